"""Library (models): the mixer registry — name -> (typed config, packed module), filled by decorator.

A *mixer* maps (E, B, L, d_model) -> (E, B, L, d_model) for a pack of E members and owns only the
token-mixing part of a layer (projections, convolutions, scan or attention, gate). Norms,
residuals, MLPs and the layer pattern belong to the backbone (models.backbone.SeqLM). Every mixer
is a module tree of ``PackedModule``s, so ``layers.reset_members`` initialises member e from its
own generator.

Contract of a mixer file (one per family in this package):
    Config    pydantic model, extra keys rejected, frozen, ``name: Literal[...]`` field, and
              ``activation_floats(d_model, L) -> int``: floats per sample saved for backward by one
              such layer (the dominant activations), read by the planner's memory estimate
    Module    ``Module(E, d_model, cfg)``, registered with ``@register(Config)``; it defines
              ``forward(x)`` (the fast path), ``forward_ref(x)`` (a sequential reference, or the
              forward through the kernel reference it names, e.g. ``kernels.scan.selective_scan_ref``),
              ``init_weights() -> [(param, fan_in)]`` for the weight matrices it owns directly
              (models.init's gamma scheme), and analysis hooks where they exist (``decay(x)``)
    causal    False only for mixers that look ahead on purpose (none yet; bidirectional wrappers
              are a backbone option)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict
from torch import nn

from ...util import NoBoolNumbers


class MixerConfig(NoBoolNumbers):
    """Base of every mixer config."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str

    def activation_floats(self, d_model: int, L: int) -> int:  # pragma: no cover - abstract
        """Floats per sample one layer keeps for backward (projections, scan states, scores)."""
        raise NotImplementedError(f"{type(self).__name__} has no memory estimate")

    def fixed_floats(self, d_model: int, L: int) -> int:
        """Floats one layer keeps for backward whatever the batch size (a kernel computed from
        the parameters once per step, e.g. S4D's Vandermonde kernel); 0 for most mixers."""
        return 0


@dataclass(frozen=True)
class MixerEntry:
    name: str
    Config: type[MixerConfig]
    build: Callable[[Any, int, int], nn.Module]  # build(cfg, E, d_model)
    summary: str
    causal: bool = True


MIXERS: dict[str, MixerEntry] = {}


def register(Config: type[MixerConfig], causal: bool = True):
    """Class decorator: register ``Module(E, d_model, cfg)`` under ``Config``'s name."""
    name = Config.model_fields["name"].default

    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if name in MIXERS:
            raise ValueError(f"mixer {name!r} registered twice")
        MIXERS[name] = MixerEntry(name, Config, lambda cfg, E, d: cls(E, d, cfg),
                                  " ".join((Config.__doc__ or "").split()), causal)
        cls.Config = Config  # type: ignore[attr-defined]
        return cls

    return deco


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


def build_mixer(spec: dict | MixerConfig, E: int, d_model: int) -> nn.Module:
    cfg = parse_mixer(spec)
    return MIXERS[cfg.name].build(cfg, E, d_model)
