"""Library (tasks): the interface shared by every task (synthetic generators and datasets).

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
    """One batch for a pack of E members.

    x     (E, B, L) int64 token ids, or (E, B, L, d_input) float for continuous inputs (pixels)
    y     per-position targets (E, B, L) int64 (IGNORE where unsupervised), or
          sequence-level targets (E, B) int64 (one class per sequence, e.g. LRA);
          regression tasks (TaskInfo.loss == "mse"): float (E, B, L, C) or (E, B, C)
    mask  (E, B, L) bool, True at real (non-padding) positions; None = every position is real.
          Pooled read-outs average over the True positions only.
    x2, mask2  a second input sequence (LRA Retrieval: the second document), else None
    """

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor | None = None
    x2: torch.Tensor | None = None
    mask2: torch.Tensor | None = None


@dataclass(frozen=True)
class TaskInfo:
    """What a model builder (and the training loop) needs to know about the task.

    vocab_size  input token ids are in [0, vocab_size) (token inputs)
    n_classes   targets are in [0, n_classes)
    seq_len     L, the longest input length
    target      "per_position": y is (E, B, L); "sequence": y is (E, B), one label per sequence
                (the model pools over positions, e.g. mean over the real positions)
    input_dim   None: token inputs; k: continuous inputs with k channels (x is (E, B, L, k))
    dual        True: every example has two input sequences (x, x2), classified jointly
    loss        "cross_entropy": integer class targets (accuracy is reported);
                "mse": float regression targets with n_classes outputs, y is (E, B, L, C) or
                (E, B, C) (no accuracy; loss = mean squared error over the outputs)
    """

    vocab_size: int
    n_classes: int
    seq_len: int
    target: Literal["per_position", "sequence"] = "per_position"
    input_dim: int | None = None
    dual: bool = False
    loss: Literal["cross_entropy", "mse"] = "cross_entropy"


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
