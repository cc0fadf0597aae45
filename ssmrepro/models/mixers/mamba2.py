"""Library (models): the Mamba-2 (SSD) block as chen2025 App. B writes it (mamba-ssm ``Mamba2``).

chen2025 main-text eqs. (1)-(9), written here from those equations:

    (z, xBC, dt) = in_proj(u)                       z: Di, xBC: Di + 2GN, dt: H   (no bias)
    (x, B, C)    = SiLU(Conv1d(xBC))                depthwise causal, width W, with bias
    A  = -exp(A_log)   per head,  A_log = log U(A_min, A_max)            (App. B; 1, 16 [INFERRED])
    Δ  = softplus(dt + dt_bias),   dt_bias = softplus⁻¹(log-U[dt_min, dt_max], floor 1e-4)
    h_t = exp(Δ_t A) h_{t-1} + (Δ_t x_t) B_tᵀ,  y_t = h_t C_t + D x_t   (per head; D per head, init 1)
    out = out_proj(RMSNorm(y ⊙ SiLU(z)))            gate *then* norm (mamba-ssm RMSNormGated,
                                                    norm_before_gate=False; one norm per group)

Shape legend: E pack, B batch, L length, d model width, Di inner width, H heads, P head dim,
G groups (of B / C), N = d_state, W conv width.

chen2025 defaults: N = 128, expand 2, W = 4, one head (P = Di), G = 1. chen2025 variants, all off by
default (default = "Mamba-2 as mamba-ssm"):

* ``conv_residual`` — "modified Mamba" (§6 / App.): a residual that bypasses the non-linear conv,
  ``(B, C, X) = σ(Conv1d(Ũ)) + Ũ`` [INFERRED form; the positional embedding the paper adds with it
  belongs to the backbone].
* ``gate_residual`` — App. eq. (10): ``(B̃, C̃, X̃) = σ(Conv1d(Ũ)) ∘ Ũ``.
* ``conv_init = "all_ones"`` — App. E.1.2 "all-one convolution": every kernel tap 1 [PAPER]; the conv
  is frozen (weight 1, bias 0, requires_grad False) [INFERRED: kept fixed, bias zero].

Fast path: :func:`ssmrepro.kernels.backend.ssd_scan` with the pack folded into SSD's head axis;
``forward_ref`` is an independent plain loop over t.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import ssd_scan
from ...kernels.ssd import default_ssd_chunk
from ..layers import (
    PackedCausalConv,
    PackedLinear,
    PackedModule,
    conv_ref_step,
    linear_ref,
    lr_group,
    no_weight_decay,
)
from .base import MixerConfig, register
from .common import (
    DT_INIT_FLOOR,
    A_log_uniform,
    dt_bias_init,
    refuse_mamba2_ranges,
)


def ssd_floats(L: int, Di: int, H: int, N: int) -> int:
    """Floats per sample that the torch SSD (``kernels.ssd``, at its own chunk length
    Q = ``default_ssd_chunk(L)``, 16 for most L; the CUDA kernel's chunks are longer) keeps for
    the backward of one layer of H heads over Di channels with N states, beyond the per-position
    copies of its inputs and output: the intra-chunk (Q × Q) decay / score matrices per head,
    2·H·Q per position, and, with more than one chunk, the chunk states (H·P·N = Di·N per chunk)
    in the 6 forms the backward keeps and 2 it builds: 8·Di·N per chunk (Mamba-2 and huang2025's
    single-head Mamba-2 share it). All of it over L padded up to nc·Q (Lp): the matrices and,
    at the padding's positions, the padded and head-major copies of x, B, C and the decays and
    of the output, 3·Di + 4·H·N + 4·H each (counted over L alone, one position past a chunk,
    L = 17 or 33, was estimated at 0.86x / 0.96x the tensors a step keeps)."""
    Q = default_ssd_chunk(L)
    nc = -(-L // Q)
    Lp = nc * Q
    return (2 * H * Q * Lp + (Lp - L) * (3 * Di + 4 * H * N + 4 * H)
            + (8 * nc * Di * N if nc > 1 else 0))


def ssd_eval_floats(L: int, Di: int, H: int, N: int) -> int:
    """Floats per sample that the torch SSD (``kernels.ssd.ssd``, chunks of Q =
    ``default_ssd_chunk(L)``, L padded to nc·Q = Lp) holds at once without autograd: per padded
    position, B and C per head (B, H, nc, Q, N) 2·H·N, the in-chunk decay and score matrices
    (B, H, nc, Q, Q) 3·H·Q, x·Δ, the in-chunk output and y 3·Di; where L is padded, the padded
    copies of x, the log-decays, B and C, Di + H + 2·H·N; with more than one chunk, each
    chunk's state (B, H, nc, N, P) and the states entering the chunks, 2·Di·N per chunk."""
    Q = default_ssd_chunk(L)
    nc = -(-L // Q)
    padded = Di + H + 2 * H * N if nc * Q > L else 0
    return nc * Q * (2 * H * N + 3 * H * Q + 3 * Di + padded) + (2 * nc * Di * N if nc > 1 else 0)


class Mamba2Config(MixerConfig):
    """Mamba-2 block (chen2025 App. B, mamba-ssm Mamba2): conv -> SiLU -> SSD -> RMSNorm(y ⊙ SiLU(z))."""

    name: Literal["mamba2"] = "mamba2"
    d_state: int = Field(128, ge=1, description="state size N (chen2025: the default 128)")
    expand: int = Field(2, ge=1, description="d_inner = expand * d_model")
    d_conv: int = Field(4, ge=1, le=8, description="width of the causal depthwise conv")
    heads: int | None = Field(
        None, ge=1, description="SSD heads; null: d_inner / headdim, or 1 (chen2025) without headdim")
    headdim: int | None = Field(None, ge=1, description="head dim P (alternative to heads)")
    ngroups: int = Field(1, ge=1, description="groups G of B / C shared by heads")
    A_min: float = Field(1.0, gt=0, description="A_log = log U(A_min, A_max)")
    A_max: float = Field(16.0, gt=0, description="A_log = log U(A_min, A_max)")
    dt_min: float = Field(1e-3, gt=0, description="dt_bias = softplus^-1(log-U[dt_min, dt_max])")
    dt_max: float = Field(1e-1, gt=0, description="dt_bias = softplus^-1(log-U[dt_min, dt_max])")
    conv_bias: bool = Field(True, description="bias of the conv")
    bias: bool = Field(False, description="biases of in_proj / out_proj")
    conv_residual: bool = Field(
        False, description="chen2025 'modified Mamba': (B,C,X) = SiLU(Conv1d(U)) + U")
    gate_residual: bool = Field(
        False, description="chen2025 App. eq. 10: (B,C,X) = SiLU(Conv1d(U)) * U")
    conv_init: Literal["default", "all_ones"] = Field(
        "default", description="all_ones: chen2025 all-one conv, frozen (weight 1, bias 0)")

    @model_validator(mode="after")
    def _dt_range(self) -> Mamba2Config:
        refuse_mamba2_ranges(self)
        return self

    def n_heads(self, d_model: int) -> int:
        Di = self.expand * d_model
        if self.heads is not None:
            return self.heads
        return 1 if self.headdim is None else Di // self.headdim

    def activation_floats(self, d_model: int, L: int) -> int:
        """in_proj out (kept twice), conv out + SiLU (2·(Di + 2GN)), Δ, gate and norm with the
        SSD's head-major copies (8·Di), out; the SSD's chunk matrices and states
        (:func:`ssd_floats`). With Q
        taken as 64 and one chunk state, chen2025-fig9's Mamba (L 29, two chunks of 16) was
        estimated at 0.74x the step getrusage measured."""
        Di, G, N, H = self.expand * d_model, self.ngroups, self.d_state, self.n_heads(d_model)
        per_pos = 2 * (2 * Di + 2 * G * N + H) + 3 * (Di + 2 * G * N) + 2 * H + 8 * Di + d_model
        return L * per_pos + ssd_floats(L, Di, H, N)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: in_proj's output 2·Di + 2·G·N + H and the conv's SiLU Di + 2·G·N per
        position, x, B and C per head folded with the pack's members into one heads axis
        (``kernels.backend.ssd_scan``: a copy, Di + 2·H·N, in a pack of more than one member or
        with 1 < G < H; packs of E = 4 peaked at 1.32x without it), with the SSD's
        (``ssd_eval_floats``)."""
        Di, G, N, H = self.expand * d_model, self.ngroups, self.d_state, self.n_heads(d_model)
        folded = Di + 2 * H * N
        return batch * (L * (3 * Di + 4 * G * N + H + folded) + ssd_eval_floats(L, Di, H, N))


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


@register(Mamba2Config)
class Mamba2Mixer(PackedModule):
    """chen2025's Mamba-2 block (mamba-ssm ``Mamba2``): see the module docstring."""

    norm_eps = 1e-5

    def __init__(self, E: int, d_model: int, cfg: Mamba2Config, chunk: int | None = None):
        super().__init__(E)
        d, Di, N, ngroups = d_model, cfg.expand * d_model, cfg.d_state, cfg.ngroups
        heads = cfg.n_heads(d_model)
        if heads < 1 or Di % heads or (cfg.headdim is not None and cfg.headdim * heads != Di):
            raise ValueError(f"d_inner={Di} does not split into heads={heads} x headdim={cfg.headdim}")
        if ngroups < 1 or heads % ngroups:
            raise ValueError(f"heads={heads} must be a multiple of ngroups={ngroups}")
        if cfg.conv_residual and cfg.gate_residual:
            raise ValueError("conv_residual and gate_residual are exclusive")
        if not 0 < cfg.A_min <= cfg.A_max or not 0 < cfg.dt_min <= cfg.dt_max:
            raise ValueError("need 0 < A_min <= A_max and 0 < dt_min <= dt_max")
        self.d, self.Di, self.N, self.H, self.P, self.G = d, Di, N, heads, Di // heads, ngroups
        self.A_min, self.A_max = cfg.A_min, cfg.A_max
        self.dt_min, self.dt_max, self.dt_init_floor = cfg.dt_min, cfg.dt_max, DT_INIT_FLOOR
        self.conv_residual, self.gate_residual = cfg.conv_residual, cfg.gate_residual
        self.chunk = chunk
        conv_dim = Di + 2 * ngroups * N
        self.in_proj = PackedLinear(E, d, Di + conv_dim + heads, bias=cfg.bias)  # -> (z, xBC, dt)
        dt_cols = (Di + conv_dim, Di + conv_dim + heads)  # lr group "delta": the dt columns
        lr_group(self.in_proj.weight, "delta", dt_cols)
        if self.in_proj.bias is not None:
            lr_group(self.in_proj.bias, "delta", dt_cols)
        self.conv = SSDConv(E, conv_dim, cfg.d_conv, cfg.conv_bias, cfg.conv_init)
        self.A_log = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, heads))), "A")  # (E, H)
        self.dt_bias = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, heads))), "delta")  # (E, H)
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, heads)))  # (E, H)
        self.norm_weight = no_weight_decay(nn.Parameter(torch.empty(E, Di)))  # (E, Di)
        self.out_proj = PackedLinear(E, Di, d, bias=cfg.bias)

    def init_weights(self) -> list[tuple[str, int]]:
        return []  # A_log, dt_bias, D and the norm weight are vectors; matrices are children

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.A_log[e].copy_(A_log_uniform(self.H, self.A_min, self.A_max, g))
            self.dt_bias[e].copy_(dt_bias_init(self.H, self.dt_min, self.dt_max, self.dt_init_floor, g))
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
        proj = linear_ref(u, self.in_proj)  # (E, B, L, Di + Di + 2GN + H)
        z, xBC, dt = proj[..., :Di], proj[..., Di : 2 * Di + 2 * G * N], proj[..., 2 * Di + 2 * G * N :]
        A = -torch.exp(self.A_log)  # (E, H)
        group = [h * G // H for h in range(H)]  # head -> group
        h = u.new_zeros(E, Bsz, H, P, N)
        ys = []
        for t in range(L):
            pre = conv_ref_step(xBC, self.conv.weight, self.conv.bias, t)  # (E, B, Di + 2GN)
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
        return linear_ref(yn, self.out_proj)
