"""Library (models): the LTI diagonal S4D core of huang2025 Table 2 (Δ = 1, constant B and C).

    h_t = exp(Λ) ⊙ h_{t-1} + x_t ⊗ B,   y_t = h_t C (+ D ⊙ x_t)      per channel, Λ, C ∈ R^{d×N}, B ∈ R^N

Λ = -exp(A_log) (S4D-real init Λ[:, n] = -(n+1), times ``A_scale``), B = 1, C ~ N(0, 1/N), no skip D
by default.
huang2025's parameter counts (8.8k / 12.5k / 24.9k for d = 32/32/64, N = 8/64/64) fit Λ ∈ R^{d×N},
C ∈ R^{d×N}, B ∈ R^N and no D (see experiments/huang2025/*.yaml notes). The scan is the selective
scan with constant Δ, B, C (fast: ``kernels.backend.selective_scan``; reference:
``kernels.scan.selective_scan_ref``, ``forward_ref``). Options complex_A / A_init / discretize as
in mixers.s6 (complex B, C stored as [re | im]; y = 2·Re(h_t C)). Analysis hook: ``decay(x)``.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import selective_scan as scan_dispatch
from ...kernels.scan import selective_scan_ref
from ..base import refuse_unread
from ..layers import PackedModule, _normal_, fold, lr_group, no_weight_decay, unfold
from .base import MixerConfig, register
from .common import (
    A_INIT_FIELD,
    block_states,
    full_scan_eval_floats,
    fused_scan_eval_floats,
    fused_scan_work_floats,
    init_A_,
    make_A,
    scan_backward_floats,
    scan_kept_floats,
)


class S4DConfig(MixerConfig):
    """LTI diagonal SSM core (Δ = 1, constant B ∈ R^N, C ∈ R^{d×N}), huang2025 Table 2."""

    name: Literal["s4d"] = "s4d"
    d_state: int = Field(16, ge=1, le=256, description="state size per channel (kernel limit 256)")
    skip: bool = Field(False, description="D ⊙ x skip term")
    complex_A: bool = Field(False, description="complex Λ, B, C; y = 2·Re(...)")
    A_init: Literal["s4d_real", "s4d_lin"] = A_INIT_FIELD
    discretize: bool = Field(True, description="false: A = I (no decay)")
    A_scale: float = Field(1.0, gt=0, le=1, description="Λ's init times this: with Δ = 1 fixed it "
                           "plays S6's Δ at init (0.01: exp(Λ_n) = e^{-0.01(n+1)}, slow decay)")

    @model_validator(mode="after")
    def _check(self) -> S4DConfig:
        if self.complex_A and not self.discretize:
            raise ValueError("discretize=false means A = I: complex_A does not apply")
        if not self.discretize:
            why = "with discretize false (A = I: no Λ)"
            refuse_unread(self, [(k, why) for k in ("A_init", "A_scale")])
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """x, y: 2d. Complex Λ (the chunked scan, c = 2): the states and log-decays it keeps,
        2·c·d·N per step; the gradients its backward builds are ``backward_floats`` (the kept
        2·c·d·N alone were counted: d 32, N 16, L 64 estimated 0.42x what getrusage measured).
        Real Λ (the fused scan, and the CUDA kernel, which keeps less): Δ = 1, the scan's own
        contiguous copies of u, Δ and B (2d + N) and the states entering each time block
        (``common.block_states``); its backward recomputes the rest (all 2·d·N per step were
        counted: huang2025-fig1's S4D at d 32, N 8 estimated 3.1x what getrusage measured)."""
        N = self.d_state
        if self.complex_A:
            return L * 2 * d_model + scan_kept_floats(d_model, N, L, 2)
        return L * (5 * d_model + N) + block_states(d_model, N, L)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd. Complex Λ (the chunked scan): its full-size (B, L, d, N) complex
        log-decays, inputs and states (``common.full_scan_eval_floats``) with Δ = 1, Δ ⊙ x and
        the complex y, 4d per position. Real Λ (the fused scan, constant C): Δ = 1 and y 2d, the
        scan's contiguous B 2N per position (counted twice, with its C), its block states and
        work buffers (``common.fused_scan_eval_floats``)."""
        N = self.d_state
        if self.complex_A:
            return batch * (L * 4 * d_model + full_scan_eval_floats(d_model, N, L, 2))
        return fused_scan_eval_floats(batch, d_model, N, L, 2 * d_model + 2 * N, c_const=True)

    def work_floats(self, d_model: int, L: int, batch: int) -> int:
        """Real Λ: the fused scan's backward's block buffers (``common.fused_scan_work_floats``);
        the chunked complex scan has none beyond its full-size states."""
        return 0 if self.complex_A else fused_scan_work_floats(batch, d_model, self.d_state, L)

    def backward_floats(self, d_model: int, L: int) -> int:
        """Complex Λ: ``common.scan_backward_floats``; the fused real scan builds none at full
        size."""
        return scan_backward_floats(d_model, self.d_state, L, 2) if self.complex_A else 0


@register(S4DConfig)
class S4DCore(PackedModule):
    """LTI diagonal SSM (Δ = 1, input-independent B ∈ R^N, C ∈ R^{d×N}), huang2025 Table 2."""

    def __init__(self, E: int, d_model: int, cfg: S4DConfig):
        super().__init__(E)
        d, N = d_model, cfg.d_state
        self.d, self.N = d, N
        self.complex_A, self.A_init, self.discretize = cfg.complex_A, cfg.A_init, cfg.discretize
        self.A_scale = cfg.A_scale
        c = 2 if cfg.complex_A else 1  # complex B, C stored as [re | im] on the last dim
        self.A_log = (lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
                      if cfg.discretize else None)
        self.B = nn.Parameter(torch.empty(E, c * N))
        self.C = nn.Parameter(torch.empty(E, d, c * N))
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if cfg.skip else None
        self.A_im = (lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
                     if cfg.complex_A else None)

    def init_weights(self) -> list[tuple[str, int]]:
        """C reads the N states (fan-in N); B is an input vector, not a matrix."""
        return [("C", self.N)]

    def init_biases(self) -> list[str]:
        return []

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            if self.A_log is not None:
                init_A_(self.A_log[e], None if self.A_im is None else self.A_im[e], self.A_init)
                self.A_log[e].add_(math.log(self.A_scale))  # Re Λ = -exp(A_log) times A_scale
            self.B[e].zero_()
            self.B[e, : self.N].fill_(1.0)  # B = 1 (+ 0i)
            if self.D is not None:
                self.D[e].fill_(1.0)
        _normal_(self.C[e], self.N**-0.5, g)

    def _BC(self):
        """B (E, N), C (E, d, N): real, or complex from their [re | im] storage."""
        if not self.complex_A:
            return self.B, self.C
        return torch.complex(*self.B.split(self.N, -1)), torch.complex(*self.C.split(self.N, -1))

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        """ref=True: the sequential reference scan (``scan.selective_scan_ref``), same folding."""
        E, Bsz, L, d = x.shape
        u = fold(x)  # (B, L, E*d)
        Bp, Cp = self._BC()
        if self.discretize:
            A = make_A(self.A_log, self.A_im).reshape(E * d, self.N)
        else:
            A = x.new_zeros(E * d, self.N)  # A = I: no decay
        Bg = Bp[None, None].expand(Bsz, L, E, self.N)  # (B, L, G=E, N), constant in time
        args = (u, torch.ones_like(u), A, Bg, Cp.reshape(E * d, self.N),
                None if self.D is None else self.D.reshape(-1))
        if ref:
            return unfold(selective_scan_ref(*args, complex_output_scale=2.0), E)
        return unfold(scan_dispatch(*args, complex_output_scale=2.0, who=type(self).__name__), E)

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x, ref=True)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Λ) broadcast to (E, B, L, d, N) (input-independent; 1 if not discretized)."""
        E, Bsz, L, d = x.shape
        if self.A_log is None:
            return x.new_ones(E, Bsz, L, d, self.N)
        return torch.exp(make_A(self.A_log, self.A_im))[:, None, None].expand(E, Bsz, L, d, self.N)
