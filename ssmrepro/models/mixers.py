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

from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from .attention import PackedAttention
from .mamba import MambaMixer
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


def _s6(cfg: S6CoreConfig, E: int, d: int) -> nn.Module:
    R = math.ceil(d / 16) if cfg.dt_rank == "auto" else cfg.dt_rank
    return S6Core(E, d, cfg.N, R, cfg.dt_min, cfg.dt_max, skip=cfg.skip)


MIXERS: dict[str, MixerEntry] = {
    "s6": MixerEntry("s6", S6CoreConfig, _s6, S6CoreConfig.__doc__ or ""),
    "s4d": MixerEntry(
        "s4d", S4DCoreConfig, lambda c, E, d: S4DCore(E, d, c.N, skip=c.skip),
        S4DCoreConfig.__doc__ or ""),
    "mamba1": MixerEntry(
        "mamba1", Mamba1Config,
        lambda c, E, d: MambaMixer(E, d, c.N, c.d_conv, c.expand, c.conv_bias, c.bias),
        Mamba1Config.__doc__ or ""),
    "attention": MixerEntry(
        "attention", AttentionConfig, lambda c, E, d: PackedAttention(E, d, c.heads),
        AttentionConfig.__doc__ or ""),
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
