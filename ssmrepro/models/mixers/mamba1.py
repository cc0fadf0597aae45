"""Library (models): the Mamba-1 block (Gu & Dao 2023; huang2025 Table 2 / eq. 14), with options.

    [x̂, z] = x W_in            (E, B, L, Di) each, Di = expand·d_model (z only with the gate)
    x̂ ← σ(conv(x̂))             causal depthwise conv of width d_conv, σ = SiLU (each optional)
    y = core(x̂)                 the SSM core on Di channels (mixers.s6 by default)
    y ← y ⊙ SiLU(z)             the gate (optional)
    out = y W_out               (E, B, L, d_model)

With the defaults this is mamba-ssm's ``Mamba`` layer (in_proj and out_proj without bias, conv with
bias, S6 core with dt_rank ⌈d_model/16⌉ and the D skip), written from the paper's equations.
Options: ``core`` s6 | s4d (huang2025's "Mamba-S4D") | delta_t ("Mamba-Δᵀ", mixers.delta_t) | b2s6
(yu2025 App. G, ``blocks`` blocks); real or complex A, S4D-real or S4D-lin init; ``discretize=false``
= koren2026's simplified A = I mode (mixers.linear_mamba is koren2026's own layer).

``forward_ref``: in_proj and out_proj by einsum (``layers.linear_ref``), the conv written out step by
step (``layers.conv_ref``) and the core's sequential reference. Analysis hook: ``decay(x)`` = the
core's exp(Δ_t Λ) on this block's core input (E, B, L, Di, N).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ..base import refuse_reversed_range, refuse_unread
from ..layers import PackedCausalConv, PackedLinear, conv_ref, linear_ref
from .b2s6 import B2S6Config, B2S6Core
from .base import MixerConfig, register
from .common import A_INIT_FIELD, DT_RANGE, DtRank, refuse_dt_below_floor
from .delta_t import DeltaTConfig, DeltaTCore
from .s4d import S4DConfig, S4DCore
from .s6 import S6Config, S6Core


class Mamba1Config(MixerConfig):
    """Mamba-1 block: in_proj -> [causal depthwise conv] -> [SiLU] -> core (s6 | s4d = Mamba-S4D |
    delta_t = Mamba-Δᵀ | b2s6) -> [y ⊙ SiLU(z)] -> out_proj; real or complex A; discretize=false =
    A = I (koren2026). Defaults = mamba-ssm's Mamba layer."""

    name: Literal["mamba1"] = "mamba1"
    d_state: int = Field(16, ge=1, le=256, description="state size N of the core")
    d_conv: int = Field(4, ge=1, le=8, description="width of the causal depthwise conv")
    expand: int = Field(2, ge=1, description="d_inner = expand * d_model")
    conv: bool = Field(True, description="causal depthwise conv on the SSM branch")
    conv_bias: bool = Field(True, description="bias of the conv")
    conv_act: bool = Field(True, description="SiLU after the conv (x̂ = σ(conv(x)))")
    gate: bool = Field(True, description="gate branch y ⊙ SiLU(z)")
    bias: bool = Field(False, description="biases of in_proj and out_proj")
    core: Literal["s6", "s4d", "delta_t", "b2s6"] = Field(
        "s6", description="SSM core (b2s6: yu2025 App. G's Mamba block with a B2S6 core)")
    blocks: int = Field(8, ge=1, description="b2s6 core: number of blocks h (d_inner % h == 0)")
    complex_A: bool = Field(False, description="complex Λ (and B, C); y = 2·Re(...)")
    A_init: Literal["s4d_real", "s4d_lin"] = A_INIT_FIELD
    discretize: bool = Field(
        True, description="false: A = I and no Δ, h_t = h_{t-1} + x_t ⊗ B_t (koren2026 simplified)")
    dt_rank: DtRank | Literal["auto", "full"] = Field(
        "auto", description="rank of the Δ projection; auto: ceil(d_model/16) for s6, full for delta_t")
    dt_min: float = Field(1e-3, gt=0, description=DT_RANGE)
    dt_max: float = Field(1e-1, gt=0, description=DT_RANGE)
    skip: bool = Field(True, description="D ⊙ x skip term of the core")

    @model_validator(mode="after")
    def _check(self) -> Mamba1Config:
        if not self.discretize and (self.core == "delta_t" or self.complex_A):
            raise ValueError("discretize=false (A = I, no Δ) needs core s6 or s4d and a real A")
        if self.dt_rank == "full" and self.core != "delta_t":
            raise ValueError("dt_rank 'full' exists for core delta_t only")
        if self.core == "b2s6" and (not self.discretize or self.dt_rank != "auto"):
            raise ValueError("core b2s6 has its own per-block Δ (no dt_rank) and needs discretize")
        unread = []
        if not self.conv:
            unread += [(k, "with conv false (no convolution)") for k in ("d_conv", "conv_bias")]
        if self.core != "b2s6":
            unread.append(("blocks", f"by core {self.core!r} (blocks are core b2s6's)"))
        if self.core == "s4d":
            unread += [(k, "by core 's4d' (Δ = 1, no Δ projection)")
                       for k in ("dt_rank", "dt_min", "dt_max")]
        elif not self.discretize:
            unread += [(k, "with discretize false (A = I: no Δ)")
                       for k in ("dt_rank", "dt_min", "dt_max")]
        if not self.discretize:
            unread.append(("A_init", "with discretize false (A = I: no Λ)"))
        refuse_unread(self, unread)
        refuse_reversed_range(self)
        refuse_dt_below_floor(self)
        return self

    def core_config(self, d_model: int) -> MixerConfig:
        """The core's own config (it runs on d_inner = expand·d_model channels)."""
        if self.core == "s6":
            if not self.discretize:  # A = I: no Δ or Λ to configure
                return S6Config(d_state=self.d_state, skip=self.skip, discretize=False)
            R = math.ceil(d_model / 16) if self.dt_rank == "auto" else self.dt_rank
            return S6Config(d_state=self.d_state, dt_rank=R, dt_min=self.dt_min, dt_max=self.dt_max,
                            skip=self.skip, complex_A=self.complex_A, A_init=self.A_init)
        if self.core == "s4d":
            return S4DConfig(d_state=self.d_state, skip=self.skip, complex_A=self.complex_A,
                             A_init=self.A_init, discretize=self.discretize)
        if self.core == "delta_t":
            return DeltaTConfig(d_state=self.d_state,
                                dt_rank="full" if self.dt_rank in ("auto", "full") else self.dt_rank,
                                dt_min=self.dt_min, dt_max=self.dt_max, skip=self.skip,
                                complex_A=self.complex_A, A_init=self.A_init)
        return B2S6Config(d_state=self.d_state, heads=self.blocks, complex_A=self.complex_A,
                          complex_B=self.complex_A, skip=self.skip, A_init=self.A_init,
                          dt_min=self.dt_min, dt_max=self.dt_max)

    def activation_floats(self, d_model: int, L: int) -> int:
        """in_proj out (1 + gate)·Di; conv out and SiLU 2·Di; gate 2·Di; out d_model; + the core."""
        Di = self.expand * d_model
        own = (1 + self.gate) * Di + (self.conv + self.conv_act) * Di + 2 * self.gate * Di + d_model
        return L * own + self.core_config(d_model).activation_floats(Di, L)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: in_proj's output (1 + gate)·Di and the conv's Di per position, with the
        core's own (``eval_floats`` of ``core_config``, on Di channels) while it runs."""
        Di = self.expand * d_model
        own = batch * L * ((1 + self.gate) * Di + self.conv * Di)
        return own + self.core_config(d_model).eval_floats(Di, L, batch)

    def work_floats(self, d_model: int, L: int, batch: int) -> int:
        """The core's (``work_floats`` of ``core_config``, on Di channels)."""
        return self.core_config(d_model).work_floats(self.expand * d_model, L, batch)

    def backward_floats(self, d_model: int, L: int) -> int:
        """The core's (on d_inner channels)."""
        return self.core_config(d_model).backward_floats(self.expand * d_model, L)


_CORES = {"s6": S6Core, "s4d": S4DCore, "delta_t": DeltaTCore, "b2s6": B2S6Core}


@register(Mamba1Config)
class Mamba1Mixer(nn.Module):
    """in_proj -> [causal depthwise conv] -> [SiLU] -> core -> [⊙ SiLU(z)] -> out_proj (packed)."""

    def __init__(self, E: int, d_model: int, cfg: Mamba1Config):
        super().__init__()
        self.d_inner, self.gate, self.conv_act = cfg.expand * d_model, cfg.gate, cfg.conv_act
        Di = self.d_inner
        self.in_proj = PackedLinear(E, d_model, (2 if cfg.gate else 1) * Di, bias=cfg.bias)
        self.conv = PackedCausalConv(E, Di, cfg.d_conv, bias=cfg.conv_bias) if cfg.conv else None
        self.ssm = _CORES[cfg.core](E, Di, cfg.core_config(d_model))
        self.out_proj = PackedLinear(E, Di, d_model, bias=cfg.bias)

    def init_weights(self) -> list[tuple[str, int]]:
        return []  # its matrices live in its PackedLinear / conv / core children

    def core_input(self, x: torch.Tensor, ref: bool = False):
        """(x̂, z): the core's input σ(conv(x W_in)) (E, B, L, Di) and the gate branch (or None)."""
        xz = linear_ref(x, self.in_proj) if ref else self.in_proj(x)  # (E, B, L, (1|2) Di)
        xs, z = xz.split(self.d_inner, dim=-1) if self.gate else (xz, None)
        if self.conv is not None and not ref:
            return self.conv(xs, "silu" if self.conv_act else None), z  # SiLU inside the conv
        if self.conv is not None:
            xs = conv_ref(xs, self.conv)
        if self.conv_act:
            xs = F.silu(xs)
        return xs, z

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E, B, L, d_model)
        """ref=True: the sequential reference (see the module docstring)."""
        xs, z = self.core_input(x, ref)
        y = self.ssm(xs, ref=ref)  # (E, B, L, Di)
        if z is not None:
            y = y * F.silu(z)
        return linear_ref(y, self.out_proj) if ref else self.out_proj(y)

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x, ref=True)

    @property
    def decay(self):
        """The core's exp(Δ_t Λ) on this block's core input, x -> (E, B, L, Di, N): the hook
        exists only when the core has one (a B2S6 core has none; the block claimed a hook, so
        ``validate`` passed `analysis: [decay_histogram]` and every pack failed after training)."""
        if not hasattr(self.ssm, "decay"):
            raise AttributeError(f"core {type(self.ssm).__name__} has no decay analysis")
        return lambda x: self.ssm.decay(self.core_input(x)[0])
