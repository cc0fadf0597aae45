"""Library (models): the S6 selective SSM core (Mamba-1's scan, no projections around it).

huang2025 Table 2 / eq. (14), without convolution and gate (those belong to the Mamba-1 block,
mixers.mamba1):

    Δ_t = softplus(W_Δ↑ W_Δ↓ x_t + b_Δ) ∈ R^d,  B_t = W_B x_t ∈ R^N,  C_t = W_C x_t ∈ R^N
    h_t = exp(Λ ⊙ (Δ_t ⊗ 1_N)) ⊙ h_{t-1} + (Δ_t ⊙ x_t) ⊗ B_t,   y_t = h_t C_t (+ D ⊙ x_t)

with Λ = -exp(A_log) ∈ R^{d×N} (S4D-real init Λ[:, n] = -(n+1)), d channels (the layer width),
N = d_state. The scan lives in ssmrepro.kernels (fast: ``kernels.backend.selective_scan``, i.e.
the fused torch scan or mamba-ssm's kernel); the sequential reference is
``kernels.scan.selective_scan_ref`` (``forward_ref``). The E members are folded into the scan's
channel axis (and into its groups for the input-dependent B_t, C_t), exactly as the CUDA kernels
are fed (notes/kernels.md §4.2).

Options (defaults reproduce the behaviour above bit for bit):
    complex_A   Λ = -exp(A_log) + i·A_im; B_t, C_t become complex (x_proj emits their real and
                imaginary parts, 2N columns each); y = 2·Re(h_t C_t) as mamba-ssm's complex mode
                [INFERRED for huang2025, which only uses real Λ].
    A_init      "s4d_real": Λ[:, n] = -(n+1); "s4d_lin": Λ[:, n] = -1/2 + iπn (real part -1/2 when
                A is real) — Gu et al. 2022 (S4D) initialisations.
    discretize  False: koren2026's "simplified" mode, A = I and no Δ: h_t = h_{t-1} + x_t ⊗ B_t
                (Λ = 0, Δ = 1); no Δ or Λ parameters exist then.

Learning-rate groups: every Δ parameter is tagged "delta" (Δ↑, b_Δ and the Δ↓ columns of
x_proj), every Λ parameter "A" (TrainConfig.lr_scale). Analysis hook: ``decay(x)`` = exp(Δ_t Λ).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import selective_scan as scan_dispatch
from ...kernels.scan import selective_scan_ref
from ..base import refuse_reversed_range, refuse_unread
from ..layers import PackedLinear, PackedModule, _uniform_, fold, lr_group, no_weight_decay, unfold
from .base import MixerConfig, register
from .common import (
    A_INIT_FIELD,
    DT_INIT_FLOOR,
    DT_RANGE,
    DtRank,
    block_states,
    dt_bias_init,
    full_scan_eval_floats,
    fused_scan_eval_floats,
    fused_scan_work_floats,
    init_A_,
    make_A,
    refuse_dt_below_floor,
    scan_backward_floats,
    scan_kept_floats,
)


class S6Config(MixerConfig):
    """Selective SSM core on d channels (Δ low-rank + dt-bias init as mamba-ssm; no conv, no gate)."""

    name: Literal["s6"] = "s6"
    d_state: int = Field(16, ge=1, le=256, description="state size per channel (kernel limit 256)")
    dt_rank: DtRank | Literal["auto"] = Field("auto", description="auto = ceil(d / 16)")
    dt_min: float = Field(1e-3, gt=0, description=DT_RANGE)
    dt_max: float = Field(1e-1, gt=0, description=DT_RANGE)
    skip: bool = Field(True, description="D ⊙ x skip term")
    complex_A: bool = Field(False, description="complex Λ (and B_t, C_t); y = 2·Re(...)")
    A_init: Literal["s4d_real", "s4d_lin"] = A_INIT_FIELD
    discretize: bool = Field(True, description="false: A = I and no Δ (koren2026 simplified)")

    @model_validator(mode="after")
    def _check(self) -> S6Config:
        if self.complex_A and not self.discretize:
            raise ValueError("discretize=false means A = I: complex_A does not apply")
        if not self.discretize:
            why = "with discretize false (A = I: no Δ, no Λ)"
            refuse_unread(self, [(k, why) for k in ("dt_rank", "dt_min", "dt_max", "A_init")])
        refuse_reversed_range(self)
        refuse_dt_below_floor(self)
        return self

    def rank(self, d: int) -> int:
        """R of the Δ projection on d channels (0 without discretisation)."""
        if not self.discretize:
            return 0
        return math.ceil(d / 16) if self.dt_rank == "auto" else self.dt_rank

    def activation_floats(self, d_model: int, L: int) -> int:
        """x, Δ (pre / post softplus), y: 4d; x_proj out: R + 2·nBC. Complex Λ (the chunked
        scan, c = 2): the states and log-decays it keeps, 2·c·d·N per step
        (``common.scan_kept_floats``); the gradients its backward builds are
        ``backward_floats`` (the kept 2·c·d·N alone were counted: d 32, N 16, L 64 estimated
        0.42x what getrusage measured). Real Λ (the fused
        scan, and the CUDA kernel, which keeps less): the scan's own contiguous copies of u,
        Δ, B and C (2d + 2N), the gradients of B and C its backward builds (2N) and the states
        entering each time block (``common.block_states``); its backward recomputes the rest
        (all 2·d·N per step were counted: huang2025-fig1's S6 at d 32, N 8 estimated 2.9x what
        getrusage measured)."""
        N = self.d_state
        if self.complex_A:
            return (L * (4 * d_model + self.rank(d_model) + 4 * N)
                    + scan_kept_floats(d_model, N, L, 2))
        return L * (6 * d_model + self.rank(d_model) + 6 * N) + block_states(d_model, N, L)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd. Complex Λ (the chunked scan): its full-size (B, L, d, N) complex
        log-decays, inputs and states (``common.full_scan_eval_floats``) with, per position,
        x_proj's output R + 4N, the complex B_t and C_t 4N, Δ and Δ ⊙ x 2d. Real Λ (the fused
        scan): x_proj's output R + 2N, Δ and y 2d, the scan's contiguous B and C 2N per position,
        its block states and work buffers (``common.fused_scan_eval_floats``)."""
        N, R = self.d_state, self.rank(d_model)
        if self.complex_A:
            return batch * (L * (2 * d_model + R + 8 * N) + full_scan_eval_floats(d_model, N, L, 2))
        return fused_scan_eval_floats(batch, d_model, N, L, 2 * d_model + R + 4 * N)

    def work_floats(self, d_model: int, L: int, batch: int) -> int:
        """Real Λ: the fused scan's backward's block buffers (``common.fused_scan_work_floats``);
        the chunked complex scan has none beyond its full-size states."""
        return 0 if self.complex_A else fused_scan_work_floats(batch, d_model, self.d_state, L)

    def backward_floats(self, d_model: int, L: int) -> int:
        """Complex Λ: ``common.scan_backward_floats``; the fused real scan builds none at full
        size."""
        return scan_backward_floats(d_model, self.d_state, L, 2) if self.complex_A else 0


@register(S6Config)
class S6Core(PackedModule):
    """Mamba's selective SSM on d channels with state size N (no projections, conv or gate)."""

    def __init__(self, E: int, d_model: int, cfg: S6Config):
        super().__init__(E)
        d, N, R = d_model, cfg.d_state, cfg.rank(d_model)
        self.d, self.N, self.R = d, N, R
        self.dt_min, self.dt_max, self.dt_init_floor = cfg.dt_min, cfg.dt_max, DT_INIT_FLOOR
        self.complex_A, self.A_init, self.discretize = cfg.complex_A, cfg.A_init, cfg.discretize
        self.nBC = 2 * N if cfg.complex_A else N  # real columns of x_proj for each of B and C
        # x -> (Δ↓, B, C); the Δ↓ columns belong to the "delta" learning-rate group
        self.x_proj = PackedLinear(E, d, R + 2 * self.nBC, bias=False)
        if cfg.discretize:
            lr_group(self.x_proj.weight, "delta", (0, R))
            self.dt_weight = lr_group(nn.Parameter(torch.empty(E, R, d)), "delta")  # Δ↑
            self.dt_bias = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d))), "delta")
            self.A_log = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
        else:
            self.dt_weight = self.dt_bias = self.A_log = None
        self.A_im = (lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
                     if cfg.complex_A else None)
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if cfg.skip else None

    def init_weights(self) -> list[tuple[str, int]]:
        """Δ↑ (R -> d); x_proj is a PackedLinear child and declares itself."""
        return [] if self.dt_weight is None else [("dt_weight", self.R)]

    def init_biases(self) -> list[str]:
        return []  # b_Δ keeps its Δ-range init

    def reset_member(self, e: int, g: torch.Generator) -> None:
        if self.discretize:
            # Δ↑ ~ U(-R^-1/2, R^-1/2); softplus(b_Δ) log-uniform in [dt_min, dt_max] (as mamba-ssm)
            _uniform_(self.dt_weight[e], self.R**-0.5, g)
            b = dt_bias_init(self.d, self.dt_min, self.dt_max, self.dt_init_floor, g)
            with torch.no_grad():
                self.dt_bias[e].copy_(b)
            init_A_(self.A_log[e], None if self.A_im is None else self.A_im[e], self.A_init)
        if self.D is not None:
            with torch.no_grad():
                self.D[e].fill_(1.0)

    def params(self, x: torch.Tensor):
        """x (E,B,L,d) -> delta (E,B,L,d), A (E,d,N), B, C (E,B,L,N) (complex with complex_A).

        discretize=False: delta = 1 and A = 0 (so exp(ΔΛ) = 1 and ΔB = B).
        """
        dbl = self.x_proj(x)  # (E, B, L, R + 2 nBC)
        dt, Bt, Ct = dbl.split([self.R, self.nBC, self.nBC], dim=-1)
        E, Bsz, L, _ = dt.shape
        if self.complex_A:  # (E, B, L, 2N) -> complex (E, B, L, N): [re | im]
            Bt = torch.complex(*Bt.split(self.N, dim=-1))
            Ct = torch.complex(*Ct.split(self.N, dim=-1))
        if not self.discretize:
            return (x.new_ones(E, Bsz, L, self.d), x.new_zeros(E, self.d, self.N), Bt, Ct)
        dt = torch.baddbmm(self.dt_bias[:, None, :], dt.reshape(E, -1, self.R), self.dt_weight)
        delta = F.softplus(dt.reshape(E, Bsz, L, self.d))  # (E, B, L, d): Δ↑ Δ↓ x + b_Δ
        A = make_A(self.A_log, self.A_im)  # (E, d, N)
        return delta, A, Bt, Ct

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        """ref=True: the sequential reference scan (``scan.selective_scan_ref``), same folding."""
        E = x.shape[0]
        delta, A, Bt, Ct = self.params(x)
        rest = (
            A.reshape(E * self.d, self.N),
            Bt.permute(1, 2, 0, 3),  # (B, L, G=E, N)
            Ct.permute(1, 2, 0, 3),
            None if self.D is None else self.D.reshape(-1),
        )
        if ref:  # u, Δ folded: (B, L, E*d)
            return unfold(selective_scan_ref(fold(x), fold(delta), *rest,
                                             complex_output_scale=2.0), E)
        # fused torch scan for real A, chunked for complex, or the CUDA kernel (kernels.backend);
        # u and Δ as (B, L, E, d) views of the members' activations: the fused kernel reads them
        # in place (fold's (B, L, E·d) copy, and its gradient's, only where a path needs it)
        y = scan_dispatch(x.permute(1, 2, 0, 3), delta.permute(1, 2, 0, 3), *rest,
                          complex_output_scale=2.0, who=type(self).__name__)
        return y.permute(2, 0, 1, 3)  # (B, L, E, d) -> (E, B, L, d)

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x, ref=True)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Δ_t Λ) for analysis (huang2025 Fig. 1): (E, B, L, d, N) (1 if not discretized)."""
        delta, A, _, _ = self.params(x)
        return torch.exp(delta[..., None] * A[:, None, None])
