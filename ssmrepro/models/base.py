"""Library (models): the model contract — what the training loop and the analyses may call.

``build_model(config, info, E, seeds)`` (models/__init__.py) always returns a ``SeqLM`` (models.backbone)
that implements :class:`SequenceModel`:

    features(x)             (E, B, L) token ids or (E, B, L, k) floats -> (E, B, L, d_model)
    readout(h, mask=None, h2=None, mask2=None)
        per_position head:  (E, ..., d_model) -> (E, ..., C)
        mean_pool head:     (E, B, L, d_model) -> (E, B, C), mean over mask == True positions
        dual_pool head:     u = pool(h, mask), v = pool(h2, mask2) -> MLP([u, v, u*v, u-v]) -> (E, B, C)
    forward(x, mask=None, x2=None, mask2=None) == readout(features(x), mask, features(x2), mask2)
    mixer_inputs(x)         [(block index, mixer module, mixer input (E, B, L, d_model))]: the hook
                            analyses use to reach a mixer's own probes (e.g. ``decay``)

C = TaskInfo.n_classes (real values when TaskInfo.loss == "mse"). ``ModelConfig`` is the base of
every model config (the presets and ``seq_lm``): typed, unknown keys rejected, frozen, and
``to_backbone()`` gives the SeqLMConfig it stands for.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

from ..util import NoBoolNumbers, config_memo, refuse_unread  # noqa: F401 (re-exported: the configs use it from here)


class ModelConfig(NoBoolNumbers):
    """Base of every model config: ``name`` selects the registry entry."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str

    def to_backbone(self):  # pragma: no cover - abstract
        """The SeqLMConfig this config stands for."""
        raise NotImplementedError

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs) -> None:
        """Each class's ``to_backbone`` built once per config (``util.config_memo``: a frozen
        config stands for one backbone): the memory estimate reads it a dozen times a shape."""
        super().__pydantic_init_subclass__(**kwargs)
        own = cls.__dict__.get("to_backbone")
        if callable(own) and not hasattr(own, "__wrapped__"):
            cls.to_backbone = config_memo()(own)


def refuse_reversed_range(cfg: BaseModel, low: str = "dt_min", high: str = "dt_max") -> None:
    """Raise ValueError when ``cfg.low > cfg.high`` (an init range given upside down drew from
    [high, low] without a word)."""
    if getattr(cfg, low) > getattr(cfg, high):
        raise ValueError(f"{low} {getattr(cfg, low)!r} is above {high} {getattr(cfg, high)!r}: "
                         f"the init range [{low}, {high}] is empty")


@runtime_checkable
class SequenceModel(Protocol):
    """What every built model offers (see the module docstring for shapes)."""

    def features(self, x: torch.Tensor) -> torch.Tensor: ...

    def readout(self, h: torch.Tensor, mask: torch.Tensor | None = None,
                h2: torch.Tensor | None = None, mask2: torch.Tensor | None = None) -> torch.Tensor: ...

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                x2: torch.Tensor | None = None, mask2: torch.Tensor | None = None) -> torch.Tensor: ...

    def mixer_inputs(self, x: torch.Tensor) -> list[tuple[int, nn.Module, torch.Tensor]]: ...
