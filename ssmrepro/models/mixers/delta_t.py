"""Library (models): the Mamba-Δᵀ SSM core, huang2025 eq. (15).

    h_t = exp(Λ ⊙ (1_d ⊗ Δ(x̂_t))) ⊙ h_{t-1} + x̂_t ⊗ B_t,   y_t = h_t C_t (+ D ⊙ x̂_t)

Δ(x̂_t) ∈ R^N varies along the state dimension and there is no Δ on the input term.
[INFERRED] Δ(x̂) = softplus(W_Δ x̂ + b_Δ) with W_Δ a full d×N matrix by default (the Lemma 3
construction, App. C.2 eq. 102a, uses Linear(x̂) = w_Δ[I | 0] x̂ ∈ R^N, i.e. rank N), or low-rank
W_Δ = W↓W↑ (rank R) as Mamba's; softplus(b_Δ) log-uniform in [dt_min, dt_max] as Mamba's dt-bias
init; B_t, C_t = Linear(x̂_t) as in S6; the D skip as in S6.

Shape legend: E pack, B batch, L length, d channels, N state size, R rank of the Δ projection.
Fast path: the members on a state axis of ``kernels.scan.diag_scan``; ``forward_ref``: eq. (15)
step by step with Python loops over members and time. Analysis hook: ``decay(x)``.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import note_kernel
from ...kernels.scan import diag_scan
from ..base import refuse_reversed_range
from ..layers import PackedLinear, PackedModule, _uniform_, lr_group, no_weight_decay
from .base import MixerConfig, register
from .common import (
    A_INIT_FIELD,
    DT_INIT_FLOOR,
    DT_RANGE,
    A_params,
    DtRank,
    cplx,
    dt_bias_init,
    full_scan_eval_floats,
    init_A_,
    make_A,
    refuse_dt_below_floor,
    scan_backward_floats,
    scan_kept_floats,
)


class DeltaTConfig(MixerConfig):
    """Mamba-Δᵀ SSM core (huang2025 eq. 15): Δ(x̂_t) ∈ R^N along the state dim, no Δ on the input."""

    name: Literal["delta_t"] = "delta_t"
    d_state: int = Field(16, ge=1, le=256, description="state size per channel")
    dt_rank: DtRank | Literal["full"] = Field("full", description="full: Δ = softplus(W x̂ + b), W d×N")
    dt_min: float = Field(1e-3, gt=0, description=DT_RANGE)
    dt_max: float = Field(1e-1, gt=0, description=DT_RANGE)
    skip: bool = Field(True, description="D ⊙ x skip term")
    complex_A: bool = Field(False, description="complex Λ, B_t, C_t; y = 2·Re(...)")
    A_init: Literal["s4d_real", "s4d_lin"] = A_INIT_FIELD

    @model_validator(mode="after")
    def _check(self) -> DeltaTConfig:
        refuse_reversed_range(self)
        refuse_dt_below_floor(self)
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """x, y: 2d; x_proj out, Δ: R + 4N; the full-size scan's log-decays and states,
        2·c·d·N per step (``common.scan_kept_floats``); the gradients its backward builds are
        ``backward_floats`` (3·c·d·N were counted per layer, no backward: huang2025-fig3's
        Mamba-Δᵀ estimated 0.66x what getrusage measured)."""
        c = 2 if self.complex_A else 1
        N = self.d_state
        R = N if self.dt_rank == "full" else self.dt_rank
        return L * (2 * d_model + R + 2 * c * N + 2 * N) + scan_kept_floats(d_model, N, L, c)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: five full-size (B, L, d, N) tensors at once (log-decays Δ ⊗ Λ, the input
        Δ ⊗ B_t ⊙ x, the states and their product with C_t, ``common.full_scan_eval_floats``,
        and in a pack of more than one member a copy folding the members into the channels: a
        pack of 4 peaked at 1.21x four) with, per position, x_proj's output R + 2·c·N, the
        (complex) B_t and C_t 2·c·N, Δ N and y d."""
        c = 2 if self.complex_A else 1
        N = self.d_state
        R = N if self.dt_rank == "full" else self.dt_rank
        return batch * (L * (d_model + R + 4 * c * N + N)
                        + full_scan_eval_floats(d_model, N, L, c, copies=5))

    def backward_floats(self, d_model: int, L: int) -> int:
        """``common.scan_backward_floats`` (c = 2 with complex Λ, else 1)."""
        return scan_backward_floats(d_model, self.d_state, L, 2 if self.complex_A else 1)


@register(DeltaTConfig)
class DeltaTCore(PackedModule):
    """Mamba-Δᵀ SSM core on d channels: Δ(x̂_t) ∈ R^N along the state dimension (huang2025 eq. 15).

    dt_rank "full" = a full d×N Δ projection (the Δ columns of x_proj); an int R = low rank W↓W↑.
    """

    def __init__(self, E: int, d_model: int, cfg: DeltaTConfig):
        super().__init__(E)
        d, N = d_model, cfg.d_state
        self.full = cfg.dt_rank == "full"
        R = N if self.full else cfg.dt_rank
        self.d, self.N, self.R = d, N, R
        self.dt_min, self.dt_max, self.dt_init_floor = cfg.dt_min, cfg.dt_max, DT_INIT_FLOOR
        self.complex_A, self.A_init = cfg.complex_A, cfg.A_init
        self.nBC = 2 * N if cfg.complex_A else N
        self.x_proj = PackedLinear(E, d, R + 2 * self.nBC, bias=False)  # x̂ -> (Δ pre / Δ↓, B, C)
        lr_group(self.x_proj.weight, "delta", (0, R))
        self.dt_weight = None if self.full else lr_group(nn.Parameter(torch.empty(E, R, N)), "delta")
        self.dt_bias = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, N))), "delta")
        self.A_log, self.A_im = A_params(E, (d, N), cfg.complex_A)
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if cfg.skip else None

    def init_weights(self) -> list[tuple[str, int]]:
        """Weight matrices for models.init's gamma scheme: (name, fan-in)."""
        return [] if self.dt_weight is None else [("dt_weight", self.R)]

    def init_biases(self) -> list[str]:
        return []  # dt_bias keeps its Δ-range init

    def reset_member(self, e: int, g: torch.Generator) -> None:
        if self.dt_weight is not None:
            _uniform_(self.dt_weight[e], self.R**-0.5, g)
        b = dt_bias_init(self.N, self.dt_min, self.dt_max, self.dt_init_floor, g)
        with torch.no_grad():
            self.dt_bias[e].copy_(b)
            if self.D is not None:
                self.D[e].fill_(1.0)
        init_A_(self.A_log[e], None if self.A_im is None else self.A_im[e], self.A_init)

    def params(self, x: torch.Tensor):
        """x (E,B,L,d) -> Δ (E,B,L,N), Λ (E,d,N), B, C (E,B,L,N) (complex with complex_A)."""
        dt, Bt, Ct = self.x_proj(x).split([self.R, self.nBC, self.nBC], dim=-1)
        if self.complex_A:
            Bt, Ct = cplx(Bt, self.N), cplx(Ct, self.N)
        if self.dt_weight is not None:
            E, Bsz, L, _ = dt.shape
            dt = torch.bmm(dt.reshape(E, -1, self.R), self.dt_weight).reshape(E, Bsz, L, self.N)
        delta = F.softplus(dt + self.dt_bias[:, None, None, :])  # (E, B, L, N)
        return delta, make_A(self.A_log, self.A_im), Bt, Ct

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        delta, A, Bt, Ct = self.params(x)
        if ref:
            return self._ref(x, delta, A, Bt, Ct)
        # 1. log-decay Λ[d, n] Δ_t[n] and input x̂_t[d] B_t[n]; members on a state axis: (B, L, E, d, N)
        la = delta.permute(1, 2, 0, 3)[:, :, :, None, :] * A[None, None]
        b = x.permute(1, 2, 0, 3)[..., None] * Bt.permute(1, 2, 0, 3)[:, :, :, None, :]
        # 2. the diagonal scan over L
        note_kernel(type(self).__name__, "torch:diag_scan")
        h = diag_scan(la, b)  # (B, L, E, d, N)
        # 3. read-out y_t[d] = Σ_n C_t[n] h_t[d, n]
        y = (h * Ct.permute(1, 2, 0, 3)[:, :, :, None, :]).sum(-1)  # (B, L, E, d)
        if y.is_complex():
            y = 2.0 * y.real
        y = y.permute(2, 0, 1, 3)  # (E, B, L, d)
        return y if self.D is None else y + self.D[:, None, None, :] * x

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x, ref=True)

    def _ref(self, x, delta, A, Bt, Ct) -> torch.Tensor:
        """Eq. (15) step by step, one member at a time."""
        E, Bsz, L, d = x.shape
        out = []
        for e in range(E):
            h = torch.zeros(Bsz, d, self.N, dtype=torch.promote_types(A.dtype, Bt.dtype))
            ys = []
            for t in range(L):
                h = torch.exp(A[e] * delta[e, :, t, None, :]) * h + x[e, :, t, :, None] * Bt[e, :, t, None, :]
                y = (h * Ct[e, :, t, None, :]).sum(-1)  # (B, d)
                y = 2.0 * y.real if y.is_complex() else y
                ys.append(y if self.D is None else y + self.D[e] * x[e, :, t])
            out.append(torch.stack(ys, 1))
        return torch.stack(out)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Λ ⊙ (1_d ⊗ Δ_t)): (E, B, L, d, N)."""
        delta, A, _, _ = self.params(x)
        return torch.exp(A[:, None, None] * delta[:, :, :, None, :])
