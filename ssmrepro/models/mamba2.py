"""Mamba-2 (SSD) mixers, packed over E members: chen2025's Mamba-2 block and huang2025's
single-head three-convolution Mamba-2. Both map (E, B, L, d) -> (E, B, L, d).

Shape legend: E pack, B batch, L length, d model width, Di inner width, H heads, P head dim,
G groups (of B / C), N state size, W conv width.

``Mamba2Mixer`` — the Mamba-2 block as chen2025 App. B writes it (the mamba-ssm ``Mamba2`` layer;
chen2025 main-text eqs. (1)-(9)), written here from those equations:

    (z, xBC, dt) = in_proj(u)                       z: Di, xBC: Di + 2GN, dt: H   (no bias)
    (x, B, C)    = SiLU(Conv1d(xBC))                depthwise causal, width W, with bias
    A  = -exp(A_log)   per head,  A_log = log U(A_min, A_max)            (App. B; 1, 16 [INFERRED])
    Δ  = softplus(dt + dt_bias),   dt_bias = softplus⁻¹(log-U[dt_min, dt_max], floor 1e-4)
    h_t = exp(Δ_t A) h_{t-1} + (Δ_t x_t) B_tᵀ,  y_t = h_t C_t + D x_t   (per head; D per head, init 1)
    out = out_proj(RMSNorm(y ⊙ SiLU(z)))            gate *then* norm (mamba-ssm RMSNormGated,
                                                    norm_before_gate=False; one norm per group)

chen2025 defaults: N = 128, expand 2, W = 4, one head (P = Di), G = 1. chen2025 variants, all off by
default (default = "Mamba-2 as mamba-ssm"):

* ``conv_residual`` — "modified Mamba" (§6 / App.): a residual that bypasses the non-linear conv,
  ``(B, C, X) = σ(Conv1d(Ũ)) + Ũ`` [INFERRED form; the positional embedding the paper adds with it
  belongs to the backbone].
* ``gate_residual`` — App. eq. (10): ``(B̃, C̃, X̃) = σ(Conv1d(Ũ)) ∘ Ũ``.
* ``conv_init = "all_ones"`` — App. E.1.2 "all-one convolution": every kernel tap 1 [PAPER]; the conv
  is frozen (weight 1, bias 0, requires_grad False) [INFERRED: kept fixed, bias zero].

``Mamba2ThreeConv`` — huang2025 Table 2, eq. (14) right column (single-head Mamba-2):

    x̂_t = σ(conv_u(W_u x)_t) ∈ R^Di,  B_t = σ(conv_B(W_B x)_t) ∈ R^N,  C_t = σ(conv_C(W_C x)_t) ∈ R^N
    Δ_t = softplus(w·x_t + b) ∈ R       (from the raw x, eq. 14c)
    h_t = exp(λ Δ_t) h_{t-1} + (Δ_t x̂_t) ⊗ B_t,   y_t = h_t C_t              (14f)
    ỹ_t = σ(W_g x_t) ⊙ y_t              (14g; ``gate=False`` for huang's MQAR / induction models)

with λ = -exp(λ_log) < 0 a learned scalar. [INFERRED]: σ = SiLU; W = 4 (their theory uses 2);
x̂ has the model width (Table 2: x̂_t ∈ R^d, so ``expand = 1``) and there is no output projection
(Table 2 ends at ỹ_t ∈ R^d and the model's output layer follows; ``out_proj=True`` adds one, and is
required when expand > 1); the projections W_u, W_B, W_C, W_g have no bias, the convs have one (the
proof of Thm 3 writes σ(c_0 ⊙ x_{t-1} + c_1 ⊙ x_t − b)); λ_log = log U(1, 16) and b = softplus⁻¹ of
a log-uniform dt in [1e-3, 1e-1], as Mamba-2; no D skip term (Table 2 has none).

Fast paths feed :func:`ssmrepro.kernels.ssd.ssd` with the pack folded into SSD's head axis
(x: (B, L, E·H, P), B / C expanded per head); ``forward_ref`` is an independent plain loop over t.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.backend import ssd_scan
from .layers import PackedLinear, PackedModule, _uniform_, no_weight_decay
from .mamba import PackedCausalConv


def _dt_bias(n: int, dt_min: float, dt_max: float, floor: float, g: torch.Generator) -> torch.Tensor:
    """softplus⁻¹ of dt ~ exp(U(log dt_min, log dt_max)) clamped at floor (chen2025 App. B)."""
    u = torch.rand(n, generator=g, dtype=torch.float64)
    dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=floor)
    return dt + torch.log(-torch.expm1(-dt))


def _A_log(n: int, A_min: float, A_max: float, g: torch.Generator) -> torch.Tensor:
    """log of A_init ~ U(A_min, A_max) (chen2025 App. B)."""
    return torch.log(A_min + (A_max - A_min) * torch.rand(n, generator=g, dtype=torch.float64))


def _conv_ref(u: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, t: int) -> torch.Tensor:
    """Causal depthwise conv output at step t, written out: Σ_k w[:, k] u_{t-(W-1)+k} (+ b).

    u: (E, B, L, C); w: (E, C, W); b: (E, C) or None -> (E, B, C).
    """
    W = w.shape[-1]
    out = torch.zeros_like(u[:, :, 0])
    for k in range(W):
        s = t - (W - 1) + k
        if s >= 0:
            out = out + u[:, :, s] * w[:, None, :, k]
    return out if b is None else out + b[:, None, :]


def _linear_ref(x: torch.Tensor, lin: PackedLinear) -> torch.Tensor:
    """(E, ..., din) -> (E, ..., dout) by einsum (independent of PackedLinear's bmm)."""
    y = torch.einsum("e...i,eio->e...o", x, lin.weight)
    if lin.bias is not None:
        y = y + lin.bias.view(lin.bias.shape[0], *([1] * (x.dim() - 2)), -1)
    return y


class SSDConv(PackedCausalConv):
    """Depthwise causal conv with an optional frozen all-ones init (chen2025 App. E.1.2)."""

    def __init__(self, E: int, channels: int, width: int, bias: bool, init: str = "default"):
        super().__init__(E, channels, width, bias)
        if init not in ("default", "all_ones"):
            raise ValueError(f"unknown conv_init {init!r}")
        self.init = init
        if init == "all_ones":
            for p in self.parameters():
                p.requires_grad_(False)

    def reset_member(self, e: int, g: torch.Generator) -> None:
        if self.init == "default":
            super().reset_member(e, g)
            return
        with torch.no_grad():  # no random numbers drawn
            self.weight[e].fill_(1.0)
            if self.bias is not None:
                self.bias[e].zero_()


class Mamba2Mixer(PackedModule):
    """chen2025's Mamba-2 block (mamba-ssm ``Mamba2``): see the module docstring."""

    def __init__(
        self,
        E: int,
        d: int,
        N: int = 128,
        expand: int = 2,
        d_conv: int = 4,
        heads: int | None = None,
        headdim: int | None = None,
        ngroups: int = 1,
        A_min: float = 1.0,
        A_max: float = 16.0,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dt_init_floor: float = 1e-4,
        conv_bias: bool = True,
        bias: bool = False,
        conv_residual: bool = False,
        gate_residual: bool = False,
        conv_init: str = "default",
        norm_eps: float = 1e-5,
        chunk: int | None = None,
    ):
        super().__init__(E)
        Di = expand * d
        if heads is None:
            heads = 1 if headdim is None else Di // headdim
        if heads < 1 or Di % heads or (headdim is not None and headdim * heads != Di):
            raise ValueError(f"d_inner={Di} does not split into heads={heads} x headdim={headdim}")
        if ngroups < 1 or heads % ngroups:
            raise ValueError(f"heads={heads} must be a multiple of ngroups={ngroups}")
        if conv_residual and gate_residual:
            raise ValueError("conv_residual and gate_residual are exclusive")
        if not 0 < A_min <= A_max or not 0 < dt_min <= dt_max:
            raise ValueError("need 0 < A_min <= A_max and 0 < dt_min <= dt_max")
        self.d, self.Di, self.N, self.H, self.P, self.G = d, Di, N, heads, Di // heads, ngroups
        self.A_min, self.A_max = A_min, A_max
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.conv_residual, self.gate_residual = conv_residual, gate_residual
        self.norm_eps, self.chunk = norm_eps, chunk
        conv_dim = Di + 2 * ngroups * N
        self.in_proj = PackedLinear(E, d, Di + conv_dim + heads, bias=bias)  # -> (z, xBC, dt)
        self.conv = SSDConv(E, conv_dim, d_conv, conv_bias, conv_init)
        self.A_log = no_weight_decay(nn.Parameter(torch.empty(E, heads)))  # (E, H)
        self.dt_bias = no_weight_decay(nn.Parameter(torch.empty(E, heads)))  # (E, H)
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, heads)))  # (E, H)
        self.norm_weight = no_weight_decay(nn.Parameter(torch.empty(E, Di)))  # (E, Di)
        self.out_proj = PackedLinear(E, Di, d, bias=bias)

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.A_log[e].copy_(_A_log(self.H, self.A_min, self.A_max, g))
            self.dt_bias[e].copy_(_dt_bias(self.H, self.dt_min, self.dt_max, self.dt_init_floor, g))
            self.D[e].fill_(1.0)
            self.norm_weight[e].fill_(1.0)

    # -- shared pieces -------------------------------------------------------------------------
    def _conv_out(self, c: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """SiLU(conv(u)) with chen2025's residual variants; c = conv(u)."""
        s = F.silu(c)
        if self.conv_residual:
            return s + u
        if self.gate_residual:
            return s * u
        return s

    def _gate_norm(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """RMSNorm(y ⊙ SiLU(z)) per group of Di/G channels, times the norm weight: (E, B, L, Di)."""
        E, Bsz, L, Di = y.shape
        yz = (y * F.silu(z)).reshape(E, Bsz, L, self.G, Di // self.G)
        yz = yz * torch.rsqrt(yz.pow(2).mean(-1, keepdim=True) + self.norm_eps)
        return yz.reshape(E, Bsz, L, Di) * self.norm_weight[:, None, None, :]

    # -- fast path -----------------------------------------------------------------------------
    def forward(self, u: torch.Tensor) -> torch.Tensor:  # (E, B, L, d) -> (E, B, L, d)
        E, Bsz, L, _ = u.shape
        H, P, G, N, Di = self.H, self.P, self.G, self.N, self.Di
        z, xBC, dt = self.in_proj(u).split([Di, Di + 2 * G * N, H], dim=-1)
        xs, Bm, Cm = self._conv_out(self.conv(xBC), xBC).split([Di, G * N, G * N], dim=-1)
        delta = F.softplus(dt + self.dt_bias[:, None, None, :])  # (E, B, L, H)
        xh = xs.reshape(E, Bsz, L, H, P)  # (E, B, L, H, P)
        # SSD with head h reading group h // (H / G); torch ssd or the CUDA kernel (kernels.backend)
        y = ssd_scan(xh, delta, -torch.exp(self.A_log), Bm.reshape(E, Bsz, L, G, N),
                     Cm.reshape(E, Bsz, L, G, N), chunk=self.chunk, who=type(self).__name__)
        y = y + self.D[:, None, None, :, None] * xh  # (E, B, L, H, P)
        return self.out_proj(self._gate_norm(y.reshape(E, Bsz, L, Di), z))

    # -- reference -----------------------------------------------------------------------------
    def forward_ref(self, u: torch.Tensor) -> torch.Tensor:
        """Slow reference: the same block written as a plain Python loop over t (no ssd kernel)."""
        E, Bsz, L, _ = u.shape
        H, P, G, N, Di = self.H, self.P, self.G, self.N, self.Di
        proj = _linear_ref(u, self.in_proj)  # (E, B, L, Di + Di + 2GN + H)
        z, xBC, dt = proj[..., :Di], proj[..., Di : 2 * Di + 2 * G * N], proj[..., 2 * Di + 2 * G * N :]
        A = -torch.exp(self.A_log)  # (E, H)
        group = [h * G // H for h in range(H)]  # head -> group
        h = u.new_zeros(E, Bsz, H, P, N)
        ys = []
        for t in range(L):
            pre = _conv_ref(xBC, self.conv.weight, self.conv.bias, t)  # (E, B, Di + 2GN)
            c = pre * torch.sigmoid(pre)  # SiLU
            if self.conv_residual:  # σ(Conv1d(Ũ)) + Ũ
                c = c + xBC[:, :, t]
            elif self.gate_residual:  # σ(Conv1d(Ũ)) ∘ Ũ  (chen2025 App. eq. 10)
                c = c * xBC[:, :, t]
            x_t = c[..., :Di].reshape(E, Bsz, H, P)
            B_t = c[..., Di : Di + G * N].reshape(E, Bsz, G, N)[:, :, group]  # (E, B, H, N)
            C_t = c[..., Di + G * N :].reshape(E, Bsz, G, N)[:, :, group]
            dlt = F.softplus(dt[:, :, t] + self.dt_bias[:, None, :])  # (E, B, H)
            decay = torch.exp(dlt * A[:, None, :])[..., None, None]  # (E, B, H, 1, 1)
            h = decay * h + (dlt[..., None] * x_t)[..., :, None] * B_t[..., None, :]
            y_t = (h * C_t[..., None, :]).sum(-1) + self.D[:, None, :, None] * x_t  # (E, B, H, P)
            ys.append(y_t.reshape(E, Bsz, Di))
        y = torch.stack(ys, dim=2)  # (E, B, L, Di)
        yz = y * torch.sigmoid(z) * z  # y ⊙ SiLU(z)
        gs = Di // G
        normed = []
        for grp in range(G):  # RMSNorm over each group's channels
            v = yz[..., grp * gs : (grp + 1) * gs]
            normed.append(v / torch.sqrt((v * v).sum(-1, keepdim=True) / gs + self.norm_eps))
        yn = torch.cat(normed, dim=-1) * self.norm_weight[:, None, None, :]
        return _linear_ref(yn, self.out_proj)


class Mamba2ThreeConv(PackedModule):
    """huang2025's single-head Mamba-2 (Table 2, eq. 14): see the module docstring."""

    def __init__(
        self,
        E: int,
        d: int,
        N: int = 16,
        expand: int = 1,
        d_conv: int = 4,
        gate: bool = True,
        out_proj: bool = False,
        bias: bool = False,
        conv_bias: bool = True,
        A_min: float = 1.0,
        A_max: float = 16.0,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dt_init_floor: float = 1e-4,
        chunk: int | None = None,
    ):
        super().__init__(E)
        Di = expand * d
        if Di != d and not out_proj:
            raise ValueError("expand > 1 needs out_proj=True (x̂ is Di wide, the output d wide)")
        if not 0 < A_min <= A_max or not 0 < dt_min <= dt_max:
            raise ValueError("need 0 < A_min <= A_max and 0 < dt_min <= dt_max")
        self.d, self.Di, self.N = d, Di, N
        self.A_min, self.A_max = A_min, A_max
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.chunk = chunk
        self.lam_log = no_weight_decay(nn.Parameter(torch.empty(E)))  # λ = -exp(lam_log)
        self.dt_weight = nn.Parameter(torch.empty(E, d))  # w of Δ_t = softplus(w·x_t + b)
        self.dt_bias = no_weight_decay(nn.Parameter(torch.empty(E)))  # b
        self.W_u = PackedLinear(E, d, Di, bias=bias)
        self.conv_u = PackedCausalConv(E, Di, d_conv, bias=conv_bias)
        self.W_B = PackedLinear(E, d, N, bias=bias)
        self.conv_B = PackedCausalConv(E, N, d_conv, bias=conv_bias)
        self.W_C = PackedLinear(E, d, N, bias=bias)
        self.conv_C = PackedCausalConv(E, N, d_conv, bias=conv_bias)
        self.W_g = PackedLinear(E, d, Di, bias=bias) if gate else None
        self.out_proj = PackedLinear(E, Di, d, bias=bias) if out_proj else None

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.lam_log[e].copy_(_A_log(1, self.A_min, self.A_max, g)[0])
            _uniform_(self.dt_weight[e], 1.0 / math.sqrt(self.d), g)  # as nn.Linear(d, 1)
            self.dt_bias[e].copy_(_dt_bias(1, self.dt_min, self.dt_max, self.dt_init_floor, g)[0])

    def _delta(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d) -> (E, B, L)
        return F.softplus(torch.einsum("ebld,ed->ebl", x, self.dt_weight) + self.dt_bias[:, None, None])


    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d) -> (E, B, L, d)
        u = F.silu(self.conv_u(self.W_u(x)))  # (E, B, L, Di)
        Bm = F.silu(self.conv_B(self.W_B(x)))  # (E, B, L, N)
        Cm = F.silu(self.conv_C(self.W_C(x)))  # (E, B, L, N)
        delta = self._delta(x)  # (E, B, L)
        # one SSD head per member (H = G = 1, P = Di): torch ssd or the CUDA kernel
        y = ssd_scan(u[:, :, :, None], delta[..., None], -torch.exp(self.lam_log)[:, None],
                     Bm[:, :, :, None], Cm[:, :, :, None], chunk=self.chunk,
                     who=type(self).__name__)[:, :, :, 0]  # (E, B, L, Di)
        if self.W_g is not None:
            y = F.silu(self.W_g(x)) * y  # (14g)
        return y if self.out_proj is None else self.out_proj(y)

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        """Slow reference: eq. (14) as a plain Python loop over t (no ssd kernel)."""
        E, Bsz, L, _ = x.shape
        pu, pB, pC = (_linear_ref(x, m) for m in (self.W_u, self.W_B, self.W_C))
        lam = -torch.exp(self.lam_log)[:, None]  # (E, 1)
        h = x.new_zeros(E, Bsz, self.Di, self.N)
        ys = []
        for t in range(L):
            u_t = F.silu(_conv_ref(pu, self.conv_u.weight, self.conv_u.bias, t))  # (E, B, Di)
            B_t = F.silu(_conv_ref(pB, self.conv_B.weight, self.conv_B.bias, t))  # (E, B, N)
            C_t = F.silu(_conv_ref(pC, self.conv_C.weight, self.conv_C.bias, t))
            dlt = F.softplus((x[:, :, t] * self.dt_weight[:, None, :]).sum(-1) + self.dt_bias[:, None])
            h = torch.exp(lam * dlt)[..., None, None] * h + (dlt[..., None] * u_t)[..., None] * B_t[
                :, :, None, :]
            ys.append((h * C_t[:, :, None, :]).sum(-1))  # (E, B, Di)
        y = torch.stack(ys, dim=2)  # (E, B, L, Di)
        if self.W_g is not None:
            gx = _linear_ref(x, self.W_g)
            y = gx * torch.sigmoid(gx) * y
        return y if self.out_proj is None else _linear_ref(y, self.out_proj)


__all__ = ["Mamba2Mixer", "Mamba2ThreeConv", "SSDConv"]
