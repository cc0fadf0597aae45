"""Library (models): the mixer registry — name -> (typed config, packed module), filled by decorator.

A *mixer* maps (E, B, L, d_model) -> (E, B, L, d_model) for a pack of E members and owns only the
token-mixing part of a layer (projections, convolutions, scan or attention, gate). Norms,
residuals, MLPs and the layer pattern belong to the backbone (models.backbone.SeqLM). Every mixer
is a module tree of ``PackedModule``s, so ``layers.reset_members`` initialises member e from its
own generator: every submodule that holds parameters is one, and every ``PackedModule`` defines
``reset_member(e, generator)`` (``build_mixer`` refuses a mixer that breaks this). ``forward``
returns a tensor of its input's shape and dtype (``MixerBlock`` refuses another).

Contract of a mixer file (one per family in this package):
    Config    pydantic model, extra keys rejected, frozen, ``name: Literal[...]`` field, and
              ``activation_floats(d_model, L) -> int``: floats per sample saved for backward by one
              such layer (the dominant activations), read by the planner's memory estimate;
              optionally ``backward_floats(d_model, L)`` (what its backward builds and frees
              before the next layer's, counted once a step), ``fixed_floats(d_model, L)`` and
              ``eval_floats(d_model, L, batch)`` (what a no-grad forward of a batch holds at
              its peak: the evaluation estimate)
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

from ...util import NoBoolNumbers, check_registration, docstring, short_name


class MixerConfig(NoBoolNumbers):
    """Base of every mixer config."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str

    def activation_floats(self, d_model: int, L: int) -> int:  # pragma: no cover - abstract
        """Floats per sample one layer keeps for backward (projections, scan states, scores)."""
        raise NotImplementedError(f"{type(self).__name__} has no memory estimate")

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """Floats that one such layer's forward without autograd (an evaluation batch of
        ``batch`` samples, one member) holds at once at its peak: its intermediates and its
        output, not its input (the residual stream, ``models.eval_floats``), with any work
        buffers its kernels allocate. Default: what a training step keeps, ``batch`` x
        ``activation_floats`` (a forward holds at once no more than its autograd keeps, for
        every mixer measured); the registered mixers count their own shapes."""
        return batch * self.activation_floats(d_model, L)

    def work_floats(self, d_model: int, L: int, batch: int) -> int:
        """Floats of the work buffers that one such layer's kernels allocate in a training step
        of ``batch`` samples (one member) beyond what ``activation_floats`` and
        ``backward_floats`` count: block buffers sized by the kernel's tiles, which stop
        growing with the batch at a bound (the fused scans'); its backward's, the larger,
        counted once a step as one layer's backward runs at a time; 0 for most mixers."""
        return 0

    def fixed_floats(self, d_model: int, L: int) -> int:
        """Floats one layer keeps for backward whatever the batch size (a kernel computed from
        the parameters once per step, e.g. S4D's Vandermonde kernel); 0 for most mixers."""
        return 0

    def backward_floats(self, d_model: int, L: int) -> int:
        """Floats per sample that one layer's backward builds at once beyond what the layer
        keeps (gradients of full-size scan states) and frees before the next layer's backward
        runs: a training step holds one layer's at a time, so the estimate counts the largest
        of the model's once, not once per layer; 0 for most mixers."""
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

    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        name = (Config.model_fields["name"].default
                if isinstance(Config, type) and issubclass(Config, MixerConfig) else None)
        if isinstance(Config, type) and issubclass(Config, MixerConfig) and not isinstance(name, str):
            raise ValueError(f"mixer config {Config.__name__}: its name field needs the mixer's "
                             "name as default (name: Literal['x'] = 'x')")
        check_registration("mixer", name, Config, MixerConfig, "name", MIXERS)
        if Config.activation_floats is MixerConfig.activation_floats:
            raise ValueError(f"mixer {name!r}: its config {Config.__name__} has no "
                             "activation_floats(d_model, L) (the planner's memory estimate)")
        if not isinstance(causal, bool):
            raise ValueError(f"mixer {name!r}: causal must be true or false, got {causal!r}")
        MIXERS[name] = MixerEntry(name, Config, lambda cfg, E, d: cls(E, d, cfg),
                                  " ".join((docstring(Config) or "").split()), causal)
        cls.Config = Config  # type: ignore[attr-defined]
        return cls

    return deco


def mixer_floats(cfg: MixerConfig, d_model: int, L: int, fixed: bool = False,
                 backward: bool = False) -> int:
    """``cfg.activation_floats(d_model, L)`` (``fixed``: ``cfg.fixed_floats``, ``backward``:
    ``cfg.backward_floats``), refused unless an int, positive (fixed, backward: not negative): a
    new mixer's estimate of 0 or below gave the planner a memory need and a time estimate of 0
    ('-0.00 s per GB-step'), a float was carried into the byte counts without a word."""
    what = "fixed_floats" if fixed else "backward_floats" if backward else "activation_floats"
    n = getattr(cfg, what)(d_model, L)
    return _checked_floats(cfg, f"{what}(d_model={d_model}, L={L})", n, fixed or backward,
                           "floats per sample one layer keeps for backward")


def mixer_batch_floats(cfg: MixerConfig, d_model: int, L: int, batch: int,
                       work: bool = False) -> int:
    """``cfg.eval_floats(d_model, L, batch)`` (``work``: ``cfg.work_floats``), refused unless an
    int >= 0, as ``mixer_floats``: a new mixer's None was a TypeError traceback out of `run
    --dry-run`, a negative ``work_floats`` lowered the training estimate, a float or a string
    ('3') was carried into the byte counts without a word."""
    what = "work_floats" if work else "eval_floats"
    n = getattr(cfg, what)(d_model, L, batch)
    return _checked_floats(cfg, f"{what}(d_model={d_model}, L={L}, batch={batch})", n, True,
                           "floats one layer's kernels hold for a batch" if work else
                           "floats one layer's evaluation holds at its peak")


# more floats than any memory holds (2**62: 16 EiB of float32): a count past it is read as this
# (a size no machine holds, which the memory check then refuses as such); 10**400 was an
# OverflowError traceback where the planner printed its GB, and 10**5000 Python's int-to-text
# limit naming nothing. A built-in mixer reaches it legitimately at T = 9e18.
MAX_FLOATS = 2**62


def _checked_floats(cfg: MixerConfig, call: str, n: Any, zero_ok: bool, meaning: str) -> int:
    """``n``, what ``cfg``'s ``call`` returned, where it is an int > 0 (>= 0 where ``zero_ok``),
    at most ``MAX_FLOATS`` (a larger count is read as ``MAX_FLOATS``: no memory holds either);
    else a ValueError naming the mixer and the call."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or (n == 0 and not zero_ok):
        raise ValueError(f"mixer {cfg.name!r}: {call} returned {short_name(repr(n))}, "
                         f"not {'an int >= 0' if zero_ok else 'a positive int'} ({meaning}: "
                         "the planner's memory estimate)")
    return min(n, MAX_FLOATS)


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
        name = spec["name"]  # (a name of 100,000 characters printed a line of 100 kB)
        shown = f"'{short_name(name)}'" if isinstance(name, str) else repr(name)
        raise MixerSpecError(f"unknown mixer {shown}; known: {', '.join(sorted(MIXERS))}")
    return entry.Config.model_validate(spec)


def build_mixer(spec: dict | MixerConfig, E: int, d_model: int) -> nn.Module:
    cfg = parse_mixer(spec)
    module = MIXERS[cfg.name].build(cfg, E, d_model)
    uninitialised_problem = _member_init_problem(module)
    if uninitialised_problem:
        raise ValueError(f"mixer {cfg.name!r}: {uninitialised_problem}")
    return module


def _member_init_problem(module: nn.Module) -> str | None:
    """Why ``models.init`` cannot initialise every member of ``module``'s parameters from its
    own seed (None: it can): a submodule holding parameters that is not a ``PackedModule`` (they
    kept torch.empty's memory, trained from garbage without a word), or a ``PackedModule``
    without its ``reset_member`` (the pack failed with a bare NotImplementedError)."""
    from ..layers import PackedModule

    for sub in module.modules():
        packed = isinstance(sub, PackedModule)
        if packed and type(sub).reset_member is PackedModule.reset_member:
            return (f"its module {type(sub).__name__} is a PackedModule without "
                    "reset_member(e, generator), which initialises member e")
        if not packed and next(sub.parameters(recurse=False), None) is not None:
            return (f"its module {type(sub).__name__} holds parameters but is not a "
                    "PackedModule (models.layers): nothing would initialise them")
    return None
