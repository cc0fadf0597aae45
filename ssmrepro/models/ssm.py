"""Selective (S6) and LTI diagonal (S4D) SSM cores, packed over E members.

Both follow huang2025 Table 2 / eq. (14), without convolution and gate (those belong to the full
Mamba block):

    S6:   Δ_t = softplus(W_Δ↑ W_Δ↓ x_t + b_Δ) ∈ R^d,  B_t = W_B x_t ∈ R^N,  C_t = W_C x_t ∈ R^N
    S4D:  Δ_t = 1,  B_t = B ∈ R^N,  C_t = C ∈ R^{d×N}  (per channel; see note below)
          h_t = exp(Λ ⊙ (Δ_t ⊗ 1_N)) ⊙ h_{t-1} + (Δ_t ⊙ x_t) ⊗ B_t,   y_t = h_t C_t (+ D ⊙ x_t)

with Λ = -exp(A_log) ∈ R^{d×N} (S4D-real init Λ[:, n] = -(n+1)). The scan lives in
ssmrepro.kernels (``inplace.selective_scan_fused``; ``scan.selective_scan_ref`` is the reference).
Here the E members are folded into the scan's channel axis (and into its groups for the
input-dependent B_t, C_t), exactly as the CUDA kernels are fed (notes/kernels.md §4.2).

Note on S4D's C: huang2025's parameter counts (8.8k / 12.5k / 24.9k for d = 32/32/64, N = 8/64/64)
fit Λ ∈ R^{d×N}, C ∈ R^{d×N}, B ∈ R^N and no skip term D; see experiments/huang2025/*.yaml notes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.inplace import selective_scan_fused
from .layers import PackedLinear, PackedModule, _normal_, _uniform_, no_weight_decay


def _fold(x: torch.Tensor) -> torch.Tensor:
    """(E, B, L, c) -> (B, L, E*c): members side by side on the channel axis."""
    E, B, L, c = x.shape
    return x.permute(1, 2, 0, 3).reshape(B, L, E * c)


def _unfold(y: torch.Tensor, E: int) -> torch.Tensor:
    """(B, L, E*c) -> (E, B, L, c)."""
    B, L, Ec = y.shape
    return y.reshape(B, L, E, Ec // E).permute(2, 0, 1, 3)


class S6Core(PackedModule):
    """Mamba's selective SSM on d channels with state size N (no projections, conv or gate)."""

    def __init__(
        self,
        E: int,
        d: int,
        N: int,
        dt_rank: int | None = None,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dt_init_floor: float = 1e-4,
        skip: bool = True,
    ):
        super().__init__(E)
        R = dt_rank or math.ceil(d / 16)
        self.d, self.N, self.R = d, N, R
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.x_proj = PackedLinear(E, d, R + 2 * N, bias=False)  # x -> (Δ↓, B, C)
        self.dt_weight = nn.Parameter(torch.empty(E, R, d))  # Δ↑
        self.dt_bias = no_weight_decay(nn.Parameter(torch.empty(E, d)))
        self.A_log = no_weight_decay(nn.Parameter(torch.empty(E, d, N)))
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None

    def reset_member(self, e: int, g: torch.Generator) -> None:
        # Δ↑ ~ U(-R^-1/2, R^-1/2); softplus(b_Δ) log-uniform in [dt_min, dt_max] (as mamba-ssm)
        _uniform_(self.dt_weight[e], self.R**-0.5, g)
        u = torch.rand(self.d, generator=g, dtype=torch.float64)
        dt = torch.exp(u * (math.log(self.dt_max) - math.log(self.dt_min)) + math.log(self.dt_min))
        dt = dt.clamp(min=self.dt_init_floor)
        with torch.no_grad():
            self.dt_bias[e].copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
            n = torch.arange(1, self.N + 1, dtype=torch.float64)
            self.A_log[e].copy_(torch.log(n).expand(self.d, self.N))
            if self.D is not None:
                self.D[e].fill_(1.0)

    def params(self, x: torch.Tensor):
        """x (E,B,L,d) -> delta (E,B,L,d), A (E,d,N), B, C (E,B,L,N)."""
        dbl = self.x_proj(x)  # (E, B, L, R + 2N)
        dt, Bt, Ct = dbl.split([self.R, self.N, self.N], dim=-1)
        E, Bsz, L, _ = dt.shape
        dt = torch.bmm(dt.reshape(E, -1, self.R), self.dt_weight).reshape(E, Bsz, L, self.d)
        delta = F.softplus(dt + self.dt_bias[:, None, None, :])  # (E, B, L, d)
        A = -torch.exp(self.A_log)  # (E, d, N)
        return delta, A, Bt, Ct

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d) -> (E, B, L, d)
        E = x.shape[0]
        delta, A, Bt, Ct = self.params(x)
        y = selective_scan_fused(
            _fold(x),  # (B, L, E*d)
            _fold(delta),
            A.reshape(E * self.d, self.N),
            Bt.permute(1, 2, 0, 3),  # (B, L, G=E, N)
            Ct.permute(1, 2, 0, 3),
            None if self.D is None else self.D.reshape(-1),
        )
        return _unfold(y, E)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Δ_t Λ) for analysis (huang2025 Fig. 1): (E, B, L, d, N)."""
        delta, A, _, _ = self.params(x)
        return torch.exp(delta[..., None] * A[:, None, None])


class S4DCore(PackedModule):
    """LTI diagonal SSM (Δ = 1, input-independent B ∈ R^N, C ∈ R^{d×N}), huang2025 Table 2."""

    def __init__(self, E: int, d: int, N: int, skip: bool = False):
        super().__init__(E)
        self.d, self.N = d, N
        self.A_log = no_weight_decay(nn.Parameter(torch.empty(E, d, N)))
        self.B = nn.Parameter(torch.empty(E, N))
        self.C = nn.Parameter(torch.empty(E, d, N))
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            n = torch.arange(1, self.N + 1, dtype=torch.float64)
            self.A_log[e].copy_(torch.log(n).expand(self.d, self.N))
            self.B[e].fill_(1.0)
            if self.D is not None:
                self.D[e].fill_(1.0)
        _normal_(self.C[e], self.N**-0.5, g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d) -> (E, B, L, d)
        E, Bsz, L, d = x.shape
        u = _fold(x)  # (B, L, E*d)
        A = -torch.exp(self.A_log).reshape(E * d, self.N)
        Bg = self.B[None, None].expand(Bsz, L, E, self.N)  # (B, L, G=E, N), constant in time
        y = selective_scan_fused(
            u,
            torch.ones_like(u),
            A,
            Bg,
            self.C.reshape(E * d, self.N),
            None if self.D is None else self.D.reshape(-1),
        )
        return _unfold(y, E)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Λ) broadcast to (E, B, L, d, N) (input-independent)."""
        E, Bsz, L, d = x.shape
        return torch.exp(-torch.exp(self.A_log))[:, None, None].expand(E, Bsz, L, d, self.N)
