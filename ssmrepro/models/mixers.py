"""Sequence-mixer registry: name -> (typed config, builder).

A *mixer* maps (E, B, L, d) -> (E, B, L, d) for a pack of E members and owns only the token-mixing
part of a layer (projections, convolutions, scan or attention, gate). Norms, residuals, MLPs and
the layer pattern belong to the backbone that stacks mixers. Every mixer is a module tree of
``PackedModule``s, so ``layers.reset_members`` initialises member e from its own generator.

Contract of an entry:
    Config   pydantic model (extra keys rejected, frozen) with a ``name: Literal[...]`` field
    build    build(cfg, E, d) -> nn.Module
    causal   False only for mixers that look ahead on purpose (none yet; bidirectional wrappers
             are a backbone option)

``parse_mixer({"name": "s6", "N": 16})`` validates a dict against the entry's Config.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from .attention import NeoXAttention, PackedAttention
from .mamba import MambaMixer
from .mamba2 import Mamba2Mixer, Mamba2ThreeConv
from .selective import S4DZOH, B2S6Core, DeltaTCore, Mamba1xMixer
from .ssm import S4DCore, S6Core


class MixerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str


@dataclass(frozen=True)
class MixerEntry:
    name: str
    Config: type[MixerConfig]
    build: Callable[[Any, int, int], nn.Module]
    summary: str
    causal: bool = True


class S6CoreConfig(MixerConfig):
    """Selective SSM core on d channels (Δ low-rank + dt-bias init as mamba-ssm; no conv, no gate)."""

    name: Literal["s6"] = "s6"
    N: int = Field(16, ge=1, le=256, description="state size per channel (kernel limit 256)")
    dt_rank: int | Literal["auto"] = Field("auto", description="auto = ceil(d / 16)")
    dt_min: float = Field(1e-3, gt=0)
    dt_max: float = Field(1e-1, gt=0)
    skip: bool = Field(True, description="D ⊙ x skip term")


class S4DCoreConfig(MixerConfig):
    """LTI diagonal SSM core (Δ = 1, constant B ∈ R^N, C ∈ R^{d×N}), huang2025 Table 2."""

    name: Literal["s4d"] = "s4d"
    N: int = Field(16, ge=1, le=256)
    skip: bool = False


class Mamba1Config(MixerConfig):
    """Mamba-1 mixer: in_proj -> causal depthwise conv -> SiLU -> S6 -> y ⊙ SiLU(z) -> out_proj."""

    name: Literal["mamba1"] = "mamba1"
    N: int = Field(16, ge=1, le=256, description="d_state")
    d_conv: int = Field(4, ge=1, le=8)
    expand: int = Field(2, ge=1)
    conv_bias: bool = True
    bias: bool = False


class AttentionConfig(MixerConfig):
    """Causal multi-head softmax attention (qkv and out projections with bias)."""

    name: Literal["attention"] = "attention"
    heads: int = Field(1, ge=1)
    qk_dim: int | None = Field(None, ge=1, description="total query/key width (default d)")
    v_dim: int | None = Field(None, ge=1, description="total value width (default d)")


class NeoXAttnFields(BaseModel):
    """Fields of GPT-NeoX attention, shared by the ``neox_attn`` mixer and the ``neox`` block."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    heads: int = Field(1, ge=1)
    window: int | None = Field(
        None, ge=1, description="sliding window: query i sees j iff 0 <= i-j < window; None = all")
    rotary_pct: float = Field(0.25, ge=0, le=1, description="share of head dims with RoPE")
    rope_base: float = Field(10000.0, gt=0)
    split_heads: bool = Field(
        True, description="False: every head uses the full d, outputs summed (cooper2026 fork)")
    conv: int = Field(0, ge=0, le=8, description="depthwise causal conv width on Q,K,V (0 = off)")
    conv_on: Literal["qkv", "input"] = Field(
        "qkv", description="conv on the q,k,v projections or on the layer input")

    def build_attention(self, E: int, d: int) -> nn.Module:
        return NeoXAttention(E, d, self.heads, self.window, self.rotary_pct, self.rope_base,
                             self.split_heads, self.conv, self.conv_on)


class NeoXAttnConfig(NeoXAttnFields, MixerConfig):
    """GPT-NeoX attention: partial RoPE, sliding-window causal mask (cooper2026); opt. QKV conv."""

    name: Literal["neox_attn"] = "neox_attn"


class Mamba2Config(MixerConfig):
    """Mamba-2 block (chen2025 App. B, mamba-ssm Mamba2): conv -> SiLU -> SSD -> RMSNorm(y ⊙ SiLU(z))."""

    name: Literal["mamba2"] = "mamba2"
    N: int = Field(128, ge=1, description="d_state (chen2025: the default 128)")
    expand: int = Field(2, ge=1)
    d_conv: int = Field(4, ge=1, le=8)
    heads: int | None = Field(
        None, ge=1, description="SSD heads; None: d_inner / headdim, or 1 (chen2025) without headdim")
    headdim: int | None = Field(None, ge=1, description="head dim P (alternative to heads)")
    ngroups: int = Field(1, ge=1, description="groups G of B / C shared by heads")
    A_min: float = Field(1.0, gt=0, description="A_log = log U(A_min, A_max)")
    A_max: float = Field(16.0, gt=0)
    dt_min: float = Field(1e-3, gt=0, description="dt_bias = softplus^-1(log-U[dt_min, dt_max])")
    dt_max: float = Field(1e-1, gt=0)
    conv_bias: bool = True
    bias: bool = Field(False, description="biases of in_proj / out_proj")
    conv_residual: bool = Field(
        False, description="chen2025 'modified Mamba': (B,C,X) = SiLU(Conv1d(U)) + U")
    gate_residual: bool = Field(
        False, description="chen2025 App. eq. 10: (B,C,X) = SiLU(Conv1d(U)) * U")
    conv_init: Literal["default", "all_ones"] = Field(
        "default", description="all_ones: chen2025 all-one conv, frozen (weight 1, bias 0)")


class Mamba2ThreeConvConfig(MixerConfig):
    """huang2025 single-head Mamba-2 (Table 2, eq. 14): scalar λ, three independent convs for x̂, B, C."""

    name: Literal["mamba2_3conv"] = "mamba2_3conv"
    N: int = Field(16, ge=1, description="state size")
    expand: int = Field(1, ge=1, description="x̂ width = expand * d (Table 2: d) [inferred]")
    d_conv: int = Field(4, ge=1, le=8, description="conv width (theory uses 2) [inferred 4]")
    gate: bool = Field(True, description="σ(W_g x) ⊙ y; huang's MQAR / induction models: off")
    out_proj: bool = Field(False, description="output projection Di -> d (none in Table 2)")
    bias: bool = Field(False, description="biases of W_u, W_B, W_C, W_g (and out_proj)")
    conv_bias: bool = True
    A_min: float = Field(1.0, gt=0, description="λ = -exp(λ_log), λ_log = log U(A_min, A_max)")
    A_max: float = Field(16.0, gt=0)
    dt_min: float = Field(1e-3, gt=0)
    dt_max: float = Field(1e-1, gt=0)


def _mamba2(c: Mamba2Config, E: int, d: int) -> nn.Module:
    return Mamba2Mixer(
        E, d, c.N, c.expand, c.d_conv, c.heads, c.headdim, c.ngroups, c.A_min, c.A_max, c.dt_min,
        c.dt_max, conv_bias=c.conv_bias, bias=c.bias, conv_residual=c.conv_residual,
        gate_residual=c.gate_residual, conv_init=c.conv_init)


def _mamba2_3conv(c: Mamba2ThreeConvConfig, E: int, d: int) -> nn.Module:
    return Mamba2ThreeConv(
        E, d, c.N, c.expand, c.d_conv, c.gate, c.out_proj, c.bias, c.conv_bias, c.A_min, c.A_max,
        c.dt_min, c.dt_max)


# ---- selective-SSM family (ssmrepro/models/selective.py) ----

_A_INIT = Field("s4d_real", description="s4d_real: Λ_n = -(n+1); s4d_lin: Λ_n = -1/2 + iπn")


class Mamba1xConfig(MixerConfig):
    """Configurable Mamba-1 block: [conv] -> [SiLU] -> core (s6 | s4d = Mamba-S4D | delta_t =
    Mamba-Δᵀ) -> [gate]; real or complex A; discretize=false = A = I (koren2026). Defaults = mamba1."""

    name: Literal["mamba1x"] = "mamba1x"
    N: int = Field(16, ge=1, le=256, description="d_state")
    d_conv: int = Field(4, ge=1, le=8, description="width of the causal depthwise conv")
    expand: int = Field(2, ge=1, description="d_inner = expand * d")
    conv: bool = Field(True, description="causal depthwise conv on the SSM branch")
    conv_bias: bool = True
    conv_act: bool = Field(True, description="SiLU after the conv (x̂ = σ(conv(x)))")
    gate: bool = Field(True, description="gate branch y ⊙ SiLU(z)")
    bias: bool = Field(False, description="biases of in_proj and out_proj")
    core: Literal["s6", "s4d", "delta_t", "b2s6"] = Field(
        "s6", description="SSM core (b2s6: yu2025 App. G's Mamba block with a B2S6 core)")
    blocks: int = Field(8, ge=1, description="b2s6 core: number of blocks h (d_inner % h == 0)")
    complex_A: bool = Field(False, description="complex Λ (and B, C); y = 2·Re(...)")
    A_init: Literal["s4d_real", "s4d_lin"] = _A_INIT
    discretize: bool = Field(
        True, description="false: A = I and no Δ, h_t = h_{t-1} + x_t ⊗ B_t (koren2026 simplified)")
    dt_rank: int | Literal["auto", "full"] = Field(
        "auto", description="rank of the Δ projection; auto: ceil(d/16) for s6, full for delta_t")
    dt_min: float = Field(1e-3, gt=0)
    dt_max: float = Field(1e-1, gt=0)
    skip: bool = Field(True, description="D ⊙ x skip term of the core")

    @model_validator(mode="after")
    def _check(self) -> Mamba1xConfig:
        if not self.discretize and (self.core == "delta_t" or self.complex_A):
            raise ValueError("discretize=false (A = I, no Δ) needs core s6 or s4d and a real A")
        if self.dt_rank == "full" and self.core != "delta_t":
            raise ValueError("dt_rank 'full' exists for core delta_t only")
        if self.core == "b2s6" and (not self.discretize or self.dt_rank not in ("auto", None)):
            raise ValueError("core b2s6 has its own per-block Δ (no dt_rank) and needs discretize")
        return self


class DeltaTConfig(MixerConfig):
    """Mamba-Δᵀ SSM core (huang2025 eq. 15): Δ(x̂_t) ∈ R^N along the state dim, no Δ on the input."""

    name: Literal["delta_t"] = "delta_t"
    N: int = Field(16, ge=1, le=256, description="state size per channel")
    dt_rank: int | Literal["full"] = Field("full", description="full: Δ = softplus(W x̂ + b), W d×N")
    dt_min: float = Field(1e-3, gt=0)
    dt_max: float = Field(1e-1, gt=0)
    skip: bool = Field(True, description="D ⊙ x skip term")
    complex_A: bool = Field(False, description="complex Λ, B_t, C_t; y = 2·Re(...)")
    A_init: Literal["s4d_real", "s4d_lin"] = _A_INIT


class S4DZOHConfig(MixerConfig):
    """LTI complex diagonal S4D with ZOH and learnable log Δ per channel (the LRA S4D baseline)."""

    name: Literal["s4d_zoh"] = "s4d_zoh"
    N: int = Field(32, ge=1, le=256, description="complex modes per channel (S4D d_state = 2N)")
    dt_min: float = Field(1e-3, gt=0, description="log Δ init: log-uniform in [dt_min, dt_max]")
    dt_max: float = Field(1e-1, gt=0)
    learn_B: bool = Field(False, description="learnable complex B (else B = 1)")
    skip: bool = Field(True, description="D ⊙ u skip term")
    A_init: Literal["s4d_real", "s4d_lin"] = Field("s4d_lin")
    impl: Literal["fft", "scan"] = Field("fft", description="FFT convolution or the selective scan")


class B2S6Config(MixerConfig):
    """B2S6 (yu2025 eqs 7-8): h blocks with block-wise selective B, C, Δ, channel-specific B bias
    and a shared complex diagonal A."""

    name: Literal["b2s6"] = "b2s6"
    N: int = Field(16, ge=1, le=256, description="state size n")
    heads: int = Field(8, ge=1, description="number of blocks h (d must be divisible by h)")
    complex_A: bool = True
    complex_B: bool = Field(True, description="complex B_weight and B_bias")
    bias: bool = Field(True, description="channel-specific B_bias")
    skip: bool = Field(False, description="D ⊙ u skip term (not in the paper's equations)")
    A_init: Literal["s4d_real", "s4d_lin"] | None = Field(
        None, description="default: s4d_lin for complex A, s4d_real for real A")
    dt_min: float = Field(1e-3, gt=0)
    dt_max: float = Field(1e-1, gt=0)
    discretization: Literal["euler", "zoh"] = Field("euler", description="input term Δ·B or ZOH B̄")
    impl: Literal["split", "direct"] | None = Field(
        None, description="direct (default): one diagonal scan; split: grouped scan + bias scan "
        "(euler only; the mamba-ssm kernel form)")

    @model_validator(mode="after")
    def _check(self) -> B2S6Config:
        if self.impl == "split" and self.discretization == "zoh":
            raise ValueError("impl 'split' needs discretization 'euler'")
        return self


def _mamba1x(c: Mamba1xConfig, E: int, d: int) -> nn.Module:
    return Mamba1xMixer(
        E, d, c.N, c.d_conv, c.expand, c.conv_bias, c.bias, conv=c.conv, conv_act=c.conv_act,
        gate=c.gate, core=c.core, complex_A=c.complex_A, A_init=c.A_init, discretize=c.discretize,
        dt_rank=c.dt_rank if isinstance(c.dt_rank, int) else None, dt_min=c.dt_min,
        dt_max=c.dt_max, skip=c.skip, blocks=c.blocks)


def _delta_t(c: DeltaTConfig, E: int, d: int) -> nn.Module:
    return DeltaTCore(E, d, c.N, None if c.dt_rank == "full" else c.dt_rank, c.dt_min, c.dt_max,
                      skip=c.skip, complex_A=c.complex_A, A_init=c.A_init)


def _s4d_zoh(c: S4DZOHConfig, E: int, d: int) -> nn.Module:
    return S4DZOH(E, d, c.N, c.dt_min, c.dt_max, learn_B=c.learn_B, skip=c.skip, A_init=c.A_init,
                  impl=c.impl)


def _b2s6(c: B2S6Config, E: int, d: int) -> nn.Module:
    return B2S6Core(E, d, c.N, c.heads, complex_A=c.complex_A, complex_B=c.complex_B, bias=c.bias,
                    skip=c.skip, A_init=c.A_init, dt_min=c.dt_min, dt_max=c.dt_max,
                    discretization=c.discretization, impl=c.impl)


def _s6(cfg: S6CoreConfig, E: int, d: int) -> nn.Module:
    R = math.ceil(d / 16) if cfg.dt_rank == "auto" else cfg.dt_rank
    return S6Core(E, d, cfg.N, R, cfg.dt_min, cfg.dt_max, skip=cfg.skip)


MIXERS: dict[str, MixerEntry] = {
    "mamba1x": MixerEntry("mamba1x", Mamba1xConfig, _mamba1x, Mamba1xConfig.__doc__ or ""),
    "delta_t": MixerEntry("delta_t", DeltaTConfig, _delta_t, DeltaTConfig.__doc__ or ""),
    "s4d_zoh": MixerEntry("s4d_zoh", S4DZOHConfig, _s4d_zoh, S4DZOHConfig.__doc__ or ""),
    "b2s6": MixerEntry("b2s6", B2S6Config, _b2s6, B2S6Config.__doc__ or ""),
    "s6": MixerEntry("s6", S6CoreConfig, _s6, S6CoreConfig.__doc__ or ""),
    "s4d": MixerEntry(
        "s4d", S4DCoreConfig, lambda c, E, d: S4DCore(E, d, c.N, skip=c.skip),
        S4DCoreConfig.__doc__ or ""),
    "mamba1": MixerEntry(
        "mamba1", Mamba1Config,
        lambda c, E, d: MambaMixer(E, d, c.N, c.d_conv, c.expand, c.conv_bias, c.bias),
        Mamba1Config.__doc__ or ""),
    "attention": MixerEntry(
        "attention", AttentionConfig, lambda c, E, d: PackedAttention(E, d, c.heads, c.qk_dim, c.v_dim),
        AttentionConfig.__doc__ or ""),
    "mamba2": MixerEntry("mamba2", Mamba2Config, _mamba2, Mamba2Config.__doc__ or ""),
    "mamba2_3conv": MixerEntry(
        "mamba2_3conv", Mamba2ThreeConvConfig, _mamba2_3conv, Mamba2ThreeConvConfig.__doc__ or ""),
    "neox_attn": MixerEntry(
        "neox_attn", NeoXAttnConfig, lambda c, E, d: c.build_attention(E, d),
        NeoXAttnConfig.__doc__ or ""),
}


class MixerSpecError(ValueError):
    pass


def parse_mixer(spec: dict | MixerConfig) -> MixerConfig:
    """Validate a mixer dict ({"name": ..., fields...}) against its registered Config."""
    if isinstance(spec, MixerConfig):
        return spec
    if not isinstance(spec, dict) or "name" not in spec:
        raise MixerSpecError(f"a mixer needs a 'name' (one of {sorted(MIXERS)}), got {spec!r}")
    entry = MIXERS.get(spec["name"])
    if entry is None:
        raise MixerSpecError(f"unknown mixer {spec['name']!r}; known: {', '.join(sorted(MIXERS))}")
    return entry.Config.model_validate(spec)


def build_mixer(spec: dict | MixerConfig, E: int, d: int) -> nn.Module:
    cfg = parse_mixer(spec)
    return MIXERS[cfg.name].build(cfg, E, d)


__all__ = ["MIXERS", "MixerConfig", "MixerEntry", "MixerSpecError", "build_mixer", "parse_mixer"]
