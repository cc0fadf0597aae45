"""Library (tasks): cooper2026 selective copy (the fork's ``var-copy``; paper Def. 4.1, §5.2, App. E).

Tokens (``cooper_tokens``): W words ``V0..V{W-1}`` (ids 0..W-1), N number tokens
``#o .. #(o+N-1)`` (ids W..W+N-1; o = ``number_offset``), then <bos>, <eos>, <null>. Defaults:
W = 26, N = 5, o = 5 (tokens #5..#9; the paper's text says "5 through 10", the fork's code makes
#5..#9), p = 0.2, L = 100: vocabulary 34.

Rules (seq-to-seq, the target at t is read off at position t, no shift):

* every position is a number token with probability p (each number equally likely), else a word;
* target at t: let n be the value of the most recent number token at or before t. No number yet,
  or t - n < 0: unsupervised (the fork's <null> target, masked in its loss; IGNORE here). Else
  the target is ``x[t - n]`` — which may itself be a number token (the fork does not exclude it);
* ``distribution: mixed`` (Fig. 13, the fork's ``mixed=True``): each sequence is, with
  probability 1/2, "sparse" (numbers with probability ``p_sparse`` = 0.03: hard for a windowed
  Transformer) and otherwise drawn with p and its last token replaced by a random number token
  (hard for an SSM: the answer at the end depends on a token the state had no reason to keep);
* ``L_min``: per-sequence lengths uniform in [L_min, L], padded with <null> (IGNORE targets);
* ``supervise: last``: only the last position of each sequence is a target (the paper's
  Def. 4.1 output, where its Thm 4.3 construction is exact); default ``all``.

Worked example: ``SelectiveCopyConfig(words=4, numbers=2, number_offset=2, p=0.3, L=12)``, seed 0,
train split, sample 0 (ids: V0..V3 = 0..3, #2 = 4, #3 = 5; '.' = IGNORE)::

    t:       0  1  2  3  4  5  6  7  8  9 10 11
    x:       5  4  3  5  4  0  2  3  3  2  0  5
    token:  #3 #2 V3 #3 #2 V0 V2 V3 V3 V2 V0 #3
    n:       3  2  2  3  2  2  2  2  2  2  2  3
    y:       .  .  5  5  3  5  4  0  2  3  3  3      y[t] = x[t - n]

(t = 0, 1: t - n < 0, unsupervised; at t = 2, 3, 5 the copied token is itself a number, #3.)

Randomness: each example uses ``rng.key(seed, split, index)`` and independent sub-streams for
token kinds, words, numbers, lengths and the mixture; everything is vectorised over (E, B).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo, role_split_problem
from .cooper_tokens import (
    S_LAST,
    S_MIX,
    last_only,
    last_position_before,
    lengths,
    pad_to_lengths,
    random_tokens,
    special_ids,
    vocab_size,
)


class SelectiveCopyConfig(TaskConfig):
    name: str = "selective_copy"
    words: int = Field(26, ge=1, description="W, word tokens V0..V{W-1} (the fork's num_vocab)")
    numbers: int = Field(5, ge=1, description="N, number tokens (the fork's num_numbers)")
    number_offset: int = Field(5, ge=1, description="value of the first number token (#5)")
    p: float = Field(0.2, ge=0.0, le=1.0, description="probability of a number token")
    L: int = Field(100, ge=2, description="sequence length (the longest, with L_min)")
    L_min: int | None = Field(None, ge=1, description="null: every sequence has length L; "
                              "else lengths uniform in [L_min, L], padded with <null>")
    distribution: Literal["uniform", "mixed"] = Field(
        "uniform", description="mixed: half sparse (p_sparse), half with a number token last")
    p_sparse: float = Field(0.03, ge=0.0, le=1.0, description="mixed: p of the sparse half")
    supervise: Literal["all", "last"] = Field("all", description="last: the last position only")

    @model_validator(mode="after")
    def _check(self) -> SelectiveCopyConfig:
        if self.L_min is not None and self.L_min > self.L:
            raise ValueError(f"L_min={self.L_min} exceeds L={self.L}")
        if self.number_offset >= self.L:  # t - n >= 0 needs n <= t <= L - 1
            raise ValueError(f"number_offset={self.number_offset} is not below L={self.L}: every "
                             "number reaches before the sequence start, so no position has a "
                             "target")
        if self.distribution == "uniform" and self.p == 0:
            raise ValueError("p=0 puts no number token in any sequence, so no position has a "
                             "target")
        return self

    def unread(self) -> list[tuple[str, str]]:
        return ([("p_sparse", "with distribution 'uniform' (it is the sparse half's p of "
                  "distribution 'mixed')")] if self.distribution == "uniform" else [])


class SelectiveCopy(Task):
    """cooper2026's selective copy: the token n back, n the latest number token seen."""

    Config = SelectiveCopyConfig
    name = "selective_copy"
    question = {"number_offset": "the value of each number token (how far back it copies)"}

    @property
    def info(self) -> TaskInfo:
        c = self.config
        V = vocab_size(c.words, c.numbers)
        return TaskInfo(vocab_size=V, n_classes=V, seq_len=c.L)

    def eval_problem(self, other: Task) -> str | None:
        # words + numbers kept (the outputs fit): ids are W words, then number tokens
        return super().eval_problem(other) or role_split_problem(
            "words", self.config.words, other.config.words, "words", "number tokens")

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        W, N, L = c.words, c.numbers, c.L
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        n_len = lengths(k, L, c.L_min)  # (E, B)
        if c.distribution == "mixed":
            sparse = rng.uniform(rng.combine(k, S_MIX), 1)[..., 0] < 0.5  # (E, B)
            p = torch.where(sparse, torch.full_like(sparse, c.p_sparse, dtype=torch.float64),
                            torch.full_like(sparse, c.p, dtype=torch.float64))
            x = random_tokens(k, L, W, N, p)
            last_num = W + rng.randint(rng.combine(k, S_LAST), 1, 0, N)[..., 0]  # (E, B)
            at_last = torch.arange(L, device=x.device) == (n_len[..., None] - 1)
            x = torch.where(at_last & ~sparse[..., None], last_num[..., None], x)
        else:
            x = random_tokens(k, L, W, N, c.p)
        y = copy_targets(x, W, N, c.number_offset)
        if c.supervise == "last":
            y = last_only(y, n_len)
        x, y = pad_to_lengths(x, y, n_len, special_ids(W, N)["null"])
        return Batch(x=x, y=y)


def copy_targets(x: torch.Tensor, words: int, numbers: int, offset: int) -> torch.Tensor:
    """Selective-copy targets of unpadded inputs x (E, B, L): x[t - n] where n is the value of the
    most recent number token at or before t (IGNORE: no number yet, or t - n < 0)."""
    is_num = (x >= words) & (x < words + numbers)
    last = last_position_before(x, is_num)  # (E, B, L), -1 = none yet
    n = x.gather(-1, last.clamp(min=0)) - words + offset  # the number's value
    src = torch.arange(x.shape[-1], device=x.device) - n
    ok = (last >= 0) & (src >= 0)
    return torch.where(ok, x.gather(-1, src.clamp(0, x.shape[-1] - 1)), torch.full_like(x, IGNORE))
