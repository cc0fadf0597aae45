"""Library (tasks): cooper2026 needle in a haystack (the fork's ``needle``; §5.2 Fig. 7).

Tokens (``cooper_tokens``): W words ``V0..V{W-1}`` (ids 0..W-1), the markers ``#0`` (needle
marker, id W) and ``#1`` (query marker, id W+1), then <bos>, <eos>, <null>. Defaults W = 100,
L = 100: vocabulary 105.

Rules (seq-to-seq, read off at position t, no shift), as the fork's generator:

* every position is a uniform random word; the last position is set to ``#1``;
* a needle position ``q`` uniform in [0, L // 2) gets ``#0``; the needle is the word after it,
  ``x[q + 1]``;
* target at every position t >= q: the needle (at t = q itself the needle is not yet visible to
  a causal model — the fork supervises it anyway, so at most 1 - 1/W of that position can be
  right); earlier positions are unsupervised (the fork's <null>). No window: the whole context.

Worked example: ``NeedleConfig(words=5, L=10)``, seed 0, train split, sample 0 (ids: V0..V4 =
0..4, #0 = 5, #1 = 6; '.' = IGNORE)::

    t:   0  1  2  3  4  5  6  7  8  9
    x:   3  1  3  5  4  4  0  0  2  6
    y:   .  .  .  4  4  4  4  4  4  4

(q = 3: the marker #0 at 3, the needle V4 at 4; #1 last.)

Randomness: each example uses ``rng.key(seed, split, index)`` (words and the needle position from
their own sub-streams); everything is vectorised over (E, B).
"""

from __future__ import annotations

import torch
from pydantic import Field

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo
from .cooper_tokens import S_POS, random_tokens, vocab_size


class NeedleConfig(TaskConfig):
    name: str = "needle"
    words: int = Field(100, ge=2, description="W, haystack / needle words (the fork's num_vocab)")
    L: int = Field(100, ge=4, description="sequence length")


class Needle(Task):
    """cooper2026's needle in a haystack: from a marker on, the word that followed the marker."""

    Config = NeedleConfig
    name = "needle"

    @property
    def info(self) -> TaskInfo:
        V = vocab_size(self.config.words, 2)
        return TaskInfo(vocab_size=V, n_classes=V, seq_len=self.config.L,
                        ahead="the task's target at the needle marker is the needle, the next "
                        "input")

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        W, L = c.words, c.L
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        x = random_tokens(k, L, W, 2, 0.0)
        q = rng.randint(rng.combine(k, S_POS), 1, 0, L // 2)  # (E, B, 1)
        pos = torch.arange(L, device=x.device)
        x = torch.where(pos == q, torch.full_like(x, W), x)
        x[..., -1] = W + 1
        needle = x.gather(-1, q + 1)  # (E, B, 1)
        y = torch.where(pos >= q, needle.expand_as(x), torch.full_like(x, IGNORE))
        return Batch(x=x, y=y)
