"""Library (tasks): KEEP n-TH (huang2025 §4.1, App. D.2), recover the n-th token of a sequence.

x_1..x_T are i.i.d. uniform over the vocabulary; the target at every position t >= n is x_n, and
positions t < n are unsupervised. (The paper writes "y_t = x_n for n < t <= T" and takes outputs at
t = n..T for loss and accuracy; at t = n the target is the current token.)

Example (vocab 10, T 8, n 3; 0-based ids, '.' = ignored target):

    x: 4 7 1 9 9 2 0 5
    y: . . 1 1 1 1 1 1
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo


class KeepNthConfig(TaskConfig):
    name: str = "keep_nth"
    n: int = Field(5, ge=1, description="position (1-based) of the token to keep")
    T: int = Field(50, ge=1, description="sequence length")
    vocab: int = Field(128, ge=2, description="|V|")

    @model_validator(mode="after")
    def _n_fits(self) -> KeepNthConfig:
        if self.n > self.T:
            raise ValueError(f"n={self.n} does not fit in a sequence of length T={self.T}")
        return self


class KeepNth(Task):
    """huang2025's KEEP n-TH: output the n-th token of the sequence."""

    Config = KeepNthConfig
    name = "keep_nth"
    question = {"n": "which token is the target (x_n)"}

    @property
    def info(self) -> TaskInfo:
        c = self.config
        return TaskInfo(vocab_size=c.vocab, n_classes=c.vocab, seq_len=c.T,
                        fewest_supervised=c.T - c.n + 1)  # positions n-1 .. T-1

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        x = rng.randint(k, c.T, 0, c.vocab)  # (E, B, T)
        y = torch.full_like(x, IGNORE)
        y[..., c.n - 1 :] = x[..., c.n - 1 : c.n]
        return Batch(x=x, y=y)
