"""Task interface shared by every generator.

A task turns (per-member seeds, split, sample indices) into a batch. Sample ``i`` of split ``s`` for
seed ``r`` is a pure function of (config, r, s, i): the training stream, a fixed training set, and
the validation/test sets are all views of that function, and the three splits never share a stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict

IGNORE = -100  # target value for unsupervised positions (as torch.nn.functional.cross_entropy)

TRAIN, VAL, TEST = 0, 1, 2
SPLITS = {"train": TRAIN, "val": VAL, "test": TEST}


class TaskConfig(BaseModel):
    """Base of every task config: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str


@dataclass
class Batch:
    x: torch.Tensor  # (E, B, L) int64 tokens
    y: torch.Tensor  # (E, B, L) int64 targets, IGNORE where unsupervised


@dataclass(frozen=True)
class TaskInfo:
    """What a model builder needs to know about the task."""

    vocab_size: int  # input token ids are in [0, vocab_size)
    n_classes: int  # targets are in [0, n_classes)
    seq_len: int  # L
    target: Literal["per_position"] = "per_position"


class Task:
    """Base class: subclasses set ``Config`` and implement ``info`` and ``sample``."""

    Config: ClassVar[type[TaskConfig]]
    name: ClassVar[str]

    def __init__(self, config: TaskConfig):
        self.config = config

    @property
    def info(self) -> TaskInfo:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        """seeds: (E,) int64; index: (E, B) int64 sample indices -> Batch of shape (E, B, L)."""
        raise NotImplementedError  # pragma: no cover
