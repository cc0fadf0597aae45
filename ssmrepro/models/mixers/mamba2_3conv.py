"""Library (models): huang2025's single-head Mamba-2 with three convolutions (Table 2, eq. 14).

    x̂_t = σ(conv_u(W_u x)_t) ∈ R^Di,  B_t = σ(conv_B(W_B x)_t) ∈ R^N,  C_t = σ(conv_C(W_C x)_t) ∈ R^N
    Δ_t = softplus(w·x_t + b) ∈ R       (from the raw x, eq. 14c)
    h_t = exp(λ Δ_t) h_{t-1} + (Δ_t x̂_t) ⊗ B_t,   y_t = h_t C_t              (14f)
    ỹ_t = σ(W_g x_t) ⊙ y_t              (14g; ``gate=False`` for huang's MQAR / induction models)

with λ = -exp(λ_log) < 0 a learned scalar and N = d_state. [INFERRED]: σ = SiLU; W = 4 (their
theory uses 2); x̂ has the model width (Table 2: x̂_t ∈ R^d, so ``expand = 1``) and there is no output
projection (Table 2 ends at ỹ_t ∈ R^d and the model's output layer follows; ``out_proj=True`` adds
one, and is required when expand > 1); the projections W_u, W_B, W_C, W_g have no bias, the convs
have one (the proof of Thm 3 writes σ(c_0 ⊙ x_{t-1} + c_1 ⊙ x_t − b)); λ_log = log U(1, 16) and
b = softplus⁻¹ of a log-uniform dt in [1e-3, 1e-1], as Mamba-2; no D skip term (Table 2 has none).

Fast path: :func:`ssmrepro.kernels.backend.ssd_scan` with one head per member (H = G = 1, P = Di);
``forward_ref`` is a plain loop over t.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import ssd_scan
from ..layers import (
    PackedCausalConv,
    PackedLinear,
    PackedModule,
    _uniform_,
    conv_ref_step,
    linear_ref,
    lr_group,
    no_weight_decay,
)
from .base import MixerConfig, register
from .common import (
    DT_INIT_FLOOR,
    DT_RANGE,
    A_log_uniform,
    dt_bias_init,
    refuse_mamba2_ranges,
)
from .mamba2 import ssd_eval_floats, ssd_floats


class Mamba2ThreeConvConfig(MixerConfig):
    """huang2025 single-head Mamba-2 (Table 2, eq. 14): scalar λ, three independent convs for x̂, B, C."""

    name: Literal["mamba2_3conv"] = "mamba2_3conv"
    d_state: int = Field(16, ge=1, description="state size N")
    expand: int = Field(1, ge=1, description="x̂ width = expand * d_model (Table 2: d) [inferred]")
    d_conv: int = Field(4, ge=1, le=8, description="conv width (theory uses 2) [inferred 4]")
    gate: bool = Field(True, description="σ(W_g x) ⊙ y; huang's MQAR / induction models: off")
    out_proj: bool = Field(False, description="output projection Di -> d_model (none in Table 2)")
    bias: bool = Field(False, description="biases of W_u, W_B, W_C, W_g (and out_proj)")
    conv_bias: bool = Field(True, description="biases of the three convs")
    A_min: float = Field(1.0, gt=0, description="λ = -exp(λ_log), λ_log = log U(A_min, A_max)")
    A_max: float = Field(16.0, gt=0, description="λ = -exp(λ_log), λ_log = log U(A_min, A_max)")
    dt_min: float = Field(1e-3, gt=0, description=DT_RANGE)
    dt_max: float = Field(1e-1, gt=0, description=DT_RANGE)

    @model_validator(mode="after")
    def _dt_range(self) -> Mamba2ThreeConvConfig:
        refuse_mamba2_ranges(self)
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """projections, convs and SiLUs 3·(Di + 2N); Δ; gate 2·Di; y; out; the SSD's inputs as
        it takes them (x·Δ, B and C per head) and its head-major copies of them and of its
        output, 4·(Di + N); its one head's chunk matrices and chunk states (``ssd_floats``: the
        same torch SSD as Mamba-2's). A chunk of 64 and one chunk state per chunk were counted
        (huang2025-fig2's Mamba-2 at d 64, N 28, T 100 estimated 0.44x what getrusage measured:
        the SSD's chunks are 16 long and it keeps 8 forms of each state)."""
        Di, N = self.expand * d_model, self.d_state
        per_pos = (3 * (Di + 2 * N) + 2 + 2 * self.gate * Di + Di + self.out_proj * d_model
                   + 4 * (Di + N))
        return L * per_pos + ssd_floats(L, Di, 1, N)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: the three convs' SiLUs Di + 2N per position, x, B and C folded with the
        pack's members into one heads axis (a copy in a pack of more than one member, Di + 2N;
        ``mamba2.Mamba2Config.eval_floats``), with the one-head SSD's
        (``mamba2.ssd_eval_floats``)."""
        Di, N = self.expand * d_model, self.d_state
        return batch * (L * 2 * (Di + 2 * N) + ssd_eval_floats(L, Di, 1, N))


@register(Mamba2ThreeConvConfig)
class Mamba2ThreeConv(PackedModule):
    """huang2025's single-head Mamba-2 (Table 2, eq. 14): see the module docstring."""

    def __init__(self, E: int, d_model: int, cfg: Mamba2ThreeConvConfig, chunk: int | None = None):
        super().__init__(E)
        d, Di, N = d_model, cfg.expand * d_model, cfg.d_state
        if Di != d and not cfg.out_proj:
            raise ValueError("expand > 1 needs out_proj=True (x̂ is Di wide, the output d wide)")
        if not 0 < cfg.A_min <= cfg.A_max or not 0 < cfg.dt_min <= cfg.dt_max:
            raise ValueError("need 0 < A_min <= A_max and 0 < dt_min <= dt_max")
        self.d, self.Di, self.N = d, Di, N
        self.A_min, self.A_max = cfg.A_min, cfg.A_max
        self.dt_min, self.dt_max, self.dt_init_floor = cfg.dt_min, cfg.dt_max, DT_INIT_FLOOR
        self.chunk = chunk
        bias, conv_bias, W = cfg.bias, cfg.conv_bias, cfg.d_conv
        self.lam_log = lr_group(no_weight_decay(nn.Parameter(torch.empty(E))), "A")  # λ = -exp(lam_log)
        self.dt_weight = lr_group(nn.Parameter(torch.empty(E, d)), "delta")  # w of Δ_t = softplus(w·x_t + b)
        self.dt_bias = lr_group(no_weight_decay(nn.Parameter(torch.empty(E))), "delta")  # b
        self.W_u = PackedLinear(E, d, Di, bias=bias)
        self.conv_u = PackedCausalConv(E, Di, W, bias=conv_bias)
        self.W_B = PackedLinear(E, d, N, bias=bias)
        self.conv_B = PackedCausalConv(E, N, W, bias=conv_bias)
        self.W_C = PackedLinear(E, d, N, bias=bias)
        self.conv_C = PackedCausalConv(E, N, W, bias=conv_bias)
        self.W_g = PackedLinear(E, d, Di, bias=bias) if cfg.gate else None
        self.out_proj = PackedLinear(E, Di, d, bias=bias) if cfg.out_proj else None

    def init_weights(self) -> list[tuple[str, int]]:
        """w of Δ_t = softplus(w·x_t + b) is a d -> 1 projection (fan-in d)."""
        return [("dt_weight", self.d)]

    def init_biases(self) -> list[str]:
        return []  # dt_bias keeps its Δ-range init

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.lam_log[e].copy_(A_log_uniform(1, self.A_min, self.A_max, g)[0])
            _uniform_(self.dt_weight[e], 1.0 / math.sqrt(self.d), g)  # as nn.Linear(d, 1)
            self.dt_bias[e].copy_(dt_bias_init(1, self.dt_min, self.dt_max, self.dt_init_floor, g)[0])

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
        pu, pB, pC = (linear_ref(x, m) for m in (self.W_u, self.W_B, self.W_C))
        lam = -torch.exp(self.lam_log)[:, None]  # (E, 1)
        h = x.new_zeros(E, Bsz, self.Di, self.N)
        ys = []
        for t in range(L):
            u_t = F.silu(conv_ref_step(pu, self.conv_u.weight, self.conv_u.bias, t))  # (E, B, Di)
            B_t = F.silu(conv_ref_step(pB, self.conv_B.weight, self.conv_B.bias, t))  # (E, B, N)
            C_t = F.silu(conv_ref_step(pC, self.conv_C.weight, self.conv_C.bias, t))
            dlt = F.softplus((x[:, :, t] * self.dt_weight[:, None, :]).sum(-1) + self.dt_bias[:, None])
            h = torch.exp(lam * dlt)[..., None, None] * h + (dlt[..., None] * u_t)[..., None] * B_t[
                :, :, None, :]
            ys.append((h * C_t[:, :, None, :]).sum(-1))  # (E, B, Di)
        y = torch.stack(ys, dim=2)  # (E, B, L, Di)
        if self.W_g is not None:
            gx = linear_ref(x, self.W_g)
            y = gx * torch.sigmoid(gx) * y
        return y if self.out_proj is None else linear_ref(y, self.out_proj)
