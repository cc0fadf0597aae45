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

Options (defaults reproduce the behaviour above bit for bit):
    complex_A   Λ = -exp(A_log) + i·A_im; S6's B_t, C_t become complex (x_proj emits their real and
                imaginary parts, 2N columns each) and S4D's B, C are complex; y = 2·Re(h_t C_t) as
                mamba-ssm's complex mode and S4D's conjugate-pair convention [INFERRED for huang2025,
                which only uses real Λ].
    A_init      "s4d_real": Λ[:, n] = -(n+1) (imaginary part 0); "s4d_lin": Λ[:, n] = -1/2 + iπn
                (real part -1/2 when A is real) — Gu et al. 2022 (S4D) initialisations.
    discretize  False: koren2026's "simplified" mode, A = I and no Δ: h_t = h_{t-1} + x_t ⊗ B_t
                (Λ = 0, Δ = 1); no Δ or Λ parameters exist then.

Learning-rate groups (read by ssmrepro.optim.PackedAdam through TrainConfig.lr_scale): every Δ
parameter is tagged "delta" (S6: Δ↑, b_Δ and the Δ↓ columns of x_proj), every Λ parameter "A".

Note on S4D's C: huang2025's parameter counts (8.8k / 12.5k / 24.9k for d = 32/32/64, N = 8/64/64)
fit Λ ∈ R^{d×N}, C ∈ R^{d×N}, B ∈ R^N and no skip term D; see experiments/huang2025/*.yaml notes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.backend import selective_scan as scan_dispatch
from ..kernels.scan import selective_scan_ref
from .layers import PackedLinear, PackedModule, _normal_, _uniform_, no_weight_decay

A_INITS = ("s4d_real", "s4d_lin")


def lr_group(p: nn.Parameter, name: str, cols: tuple[int, int] | None = None) -> nn.Parameter:
    """Tag a parameter (or only its last-dim columns [cols[0], cols[1])) with a learning-rate group.

    ssmrepro.optim.PackedAdam multiplies the learning rate of tagged entries by the member's
    ``TrainConfig.lr_scale[name]`` (1 when the group is not named there).
    """
    p._lr_group = name  # type: ignore[attr-defined]
    p._lr_group_cols = cols  # type: ignore[attr-defined]
    return p


def init_A_(A_log: torch.Tensor, A_im: torch.Tensor | None, kind: str) -> None:
    """Fill one member's Λ = -exp(A_log) + i·A_im, both (..., N), with S4D-real or S4D-lin values."""
    N = A_log.shape[-1]
    n = torch.arange(N, dtype=torch.float64)
    with torch.no_grad():
        if kind == "s4d_real":  # Λ_n = -(n+1)
            A_log.copy_(torch.log(n + 1).expand(A_log.shape))
            if A_im is not None:
                A_im.zero_()
        elif kind == "s4d_lin":  # Λ_n = -1/2 + iπn
            A_log.fill_(math.log(0.5))
            if A_im is not None:
                A_im.copy_((math.pi * n).expand(A_im.shape))
        else:
            raise ValueError(f"unknown A_init {kind!r}; known: {A_INITS}")


def make_A(A_log: torch.Tensor, A_im: torch.Tensor | None) -> torch.Tensor:
    """Λ = -exp(A_log) (+ i·A_im): real or complex, same shape."""
    re = -torch.exp(A_log)
    return re if A_im is None else torch.complex(re, A_im)


def dt_bias_init(n: int, dt_min: float, dt_max: float, floor: float, g: torch.Generator) -> torch.Tensor:
    """b_Δ with softplus(b_Δ) log-uniform in [dt_min, dt_max] (mamba-ssm's dt init), (n,) float64."""
    u = torch.rand(n, generator=g, dtype=torch.float64)
    dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
    dt = dt.clamp(min=floor)
    return dt + torch.log(-torch.expm1(-dt))  # inverse softplus


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
        complex_A: bool = False,
        A_init: str = "s4d_real",
        discretize: bool = True,
    ):
        super().__init__(E)
        if complex_A and not discretize:
            raise ValueError("discretize=False means A = I: complex_A does not apply")
        if A_init not in A_INITS:
            raise ValueError(f"unknown A_init {A_init!r}; known: {A_INITS}")
        R = (dt_rank or math.ceil(d / 16)) if discretize else 0
        self.d, self.N, self.R = d, N, R
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.complex_A, self.A_init, self.discretize = complex_A, A_init, discretize
        self.nBC = 2 * N if complex_A else N  # real columns of x_proj for each of B and C
        # x -> (Δ↓, B, C); the Δ↓ columns belong to the "delta" learning-rate group
        self.x_proj = PackedLinear(E, d, R + 2 * self.nBC, bias=False)
        if discretize:
            lr_group(self.x_proj.weight, "delta", (0, R))
            self.dt_weight = lr_group(nn.Parameter(torch.empty(E, R, d)), "delta")  # Δ↑
            self.dt_bias = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d))), "delta")
            self.A_log = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
        else:
            self.dt_weight = self.dt_bias = self.A_log = None
        self.A_im = (lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
                     if complex_A else None)
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None

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
        dt = torch.bmm(dt.reshape(E, -1, self.R), self.dt_weight).reshape(E, Bsz, L, self.d)
        delta = F.softplus(dt + self.dt_bias[:, None, None, :])  # (E, B, L, d)
        A = make_A(self.A_log, self.A_im)  # (E, d, N)
        return delta, A, Bt, Ct

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        """ref=True: the sequential reference scan (``scan.selective_scan_ref``), same folding."""
        E = x.shape[0]
        delta, A, Bt, Ct = self.params(x)
        args = (
            _fold(x),  # (B, L, E*d)
            _fold(delta),
            A.reshape(E * self.d, self.N),
            Bt.permute(1, 2, 0, 3),  # (B, L, G=E, N)
            Ct.permute(1, 2, 0, 3),
            None if self.D is None else self.D.reshape(-1),
        )
        if ref:
            return _unfold(selective_scan_ref(*args, complex_output_scale=2.0), E)
        # fused torch scan for real A, chunked for complex, or the CUDA kernel (kernels.backend)
        return _unfold(scan_dispatch(*args, complex_output_scale=2.0, who=type(self).__name__), E)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Δ_t Λ) for analysis (huang2025 Fig. 1): (E, B, L, d, N) (1 if not discretized)."""
        delta, A, _, _ = self.params(x)
        return torch.exp(delta[..., None] * A[:, None, None])


class S4DCore(PackedModule):
    """LTI diagonal SSM (Δ = 1, input-independent B ∈ R^N, C ∈ R^{d×N}), huang2025 Table 2."""

    def __init__(self, E: int, d: int, N: int, skip: bool = False, complex_A: bool = False,
                 A_init: str = "s4d_real", discretize: bool = True):
        super().__init__(E)
        if complex_A and not discretize:
            raise ValueError("discretize=False means A = I: complex_A does not apply")
        if A_init not in A_INITS:
            raise ValueError(f"unknown A_init {A_init!r}; known: {A_INITS}")
        self.d, self.N = d, N
        self.complex_A, self.A_init, self.discretize = complex_A, A_init, discretize
        c = 2 if complex_A else 1  # complex B, C stored as [re | im] on the last dim
        self.A_log = (lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
                      if discretize else None)
        self.B = nn.Parameter(torch.empty(E, c * N))
        self.C = nn.Parameter(torch.empty(E, d, c * N))
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None
        self.A_im = (lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d, N))), "A")
                     if complex_A else None)

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            if self.A_log is not None:
                init_A_(self.A_log[e], None if self.A_im is None else self.A_im[e], self.A_init)
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
        u = _fold(x)  # (B, L, E*d)
        Bp, Cp = self._BC()
        if self.discretize:
            A = make_A(self.A_log, self.A_im).reshape(E * d, self.N)
        else:
            A = x.new_zeros(E * d, self.N)  # A = I: no decay
        Bg = Bp[None, None].expand(Bsz, L, E, self.N)  # (B, L, G=E, N), constant in time
        args = (u, torch.ones_like(u), A, Bg, Cp.reshape(E * d, self.N),
                None if self.D is None else self.D.reshape(-1))
        if ref:
            return _unfold(selective_scan_ref(*args, complex_output_scale=2.0), E)
        return _unfold(scan_dispatch(*args, complex_output_scale=2.0, who=type(self).__name__), E)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Λ) broadcast to (E, B, L, d, N) (input-independent; 1 if not discretized)."""
        E, Bsz, L, d = x.shape
        if self.A_log is None:
            return x.new_ones(E, Bsz, L, d, self.N)
        return torch.exp(make_A(self.A_log, self.A_im))[:, None, None].expand(E, Bsz, L, d, self.N)
