"""Library (tasks): cooper2026 multi-key associative recall (the fork's ``assoc-recall-mk``; §5.2
Fig. 6, App. E Figs. 15-16).

Tokens (``cooper_tokens``): W words ``V0..V{W-1}`` (ids 0..W-1), no task specials, then <bos>,
<eos>, <null>. Defaults W = 8, key length k = 2, L = 100: vocabulary 11.

Rules (seq-to-seq, read off at position t, no shift), as the fork's generator:

* every position is a uniform random word;
* the key at t is the k-gram ending at t, ``(x[t-k+1], ..., x[t])``;
* target at t: the token that followed the most recent earlier occurrence of that key, i.e.
  ``x[j + 1]`` for the largest j <= t - 1 whose k-gram equals the key at t (which may be
  ``x[t]`` itself when j = t - 1); unsupervised (the fork's <null>) if there is none;
* the fork's quirk, kept: its store step runs only from position k + 1 on, so the first k-gram
  ``(x[0], ..., x[k-1])`` is never stored — j >= k;
* ``L_min``: per-sequence lengths uniform in [L_min, L], padded with <null> (IGNORE targets).

Worked example: ``MultiKeyRecallConfig(words=3, key_len=2, L=12)``, seed 0, train split,
sample 0 ('.' = IGNORE)::

    t:   0  1  2  3  4  5  6  7  8  9 10 11
    x:   1  0  2  2  0  0  1  2  2  1  0  2
    y:   .  .  .  .  .  .  .  .  0  .  .  2

(t = 8: the key (2, 2) ended last at j = 3, so the target is x[4] = 0; t = 11: the key (0, 2)
ended at j = 2, so x[3] = 2. Every other key has no earlier stored occurrence.)

Randomness: each example uses ``rng.key(seed, split, index)`` (words and lengths from their own
sub-streams); everything is vectorised over (E, B) (one stable sort of the key ids per
sequence, ``base.previous_occurrence``: O(L) memory).
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo, previous_occurrence
from .cooper_tokens import lengths, pad_to_lengths, random_tokens, special_ids, vocab_size


class MultiKeyRecallConfig(TaskConfig):
    name: str = "multikey_recall"
    words: int = Field(8, ge=2, description="W, word tokens (the fork's num_vocab)")
    key_len: int = Field(2, ge=1, le=8, description="k, tokens per key (the fork's size_key)")
    L: int = Field(100, ge=2, description="sequence length (the longest, with L_min)")
    L_min: int | None = Field(None, ge=1, description="null: every sequence has length L; "
                              "else lengths uniform in [L_min, L], padded with <null>")

    @model_validator(mode="after")
    def _check(self) -> MultiKeyRecallConfig:
        if self.L_min is not None and self.L_min > self.L:
            raise ValueError(f"L_min={self.L_min} exceeds L={self.L}")
        if self.words ** self.key_len >= 2 ** 62:
            raise ValueError("words ** key_len must fit in 62 bits")
        if self.L < self.key_len + 2:  # a stored key ends at j >= k, recalled at t > j
            raise ValueError(f"L={self.L} is below key_len + 2 = {self.key_len + 2}: no key can be "
                             "stored and then recalled, so no position has a target")
        return self


class MultiKeyRecall(Task):
    """cooper2026's multi-key recall: the token after the latest earlier copy of the k-gram ending here."""

    Config = MultiKeyRecallConfig
    name = "multikey_recall"
    question = {"key_len": "the key recalled at each position (the k-gram ending there)"}

    @property
    def info(self) -> TaskInfo:
        V = vocab_size(self.config.words, 0)
        return TaskInfo(vocab_size=V, n_classes=V, seq_len=self.config.L)

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        n_len = lengths(k, c.L, c.L_min)
        x = random_tokens(k, c.L, c.words, 0, 0.0)
        y = multikey_targets(x, c.words, c.key_len)
        x, y = pad_to_lengths(x, y, n_len, special_ids(c.words, 0)["null"])
        return Batch(x=x, y=y)


def multikey_targets(x: torch.Tensor, words: int, key_len: int) -> torch.Tensor:
    """Targets of unpadded inputs x (E, B, L): x[j + 1] for the largest j in [k, t - 1] whose
    k-gram equals the k-gram ending at t (IGNORE when none, and for t < k - 1)."""
    L = x.shape[-1]
    kid = torch.zeros_like(x)
    for m in range(key_len):  # k-gram ending at t as a base-W number (junk for t < k - 1)
        kid = kid * words + torch.roll(x, key_len - 1 - m, dims=-1)
    last = previous_occurrence(kid, first=key_len)  # (E, B, L): j in [k, t) with t's k-gram
    # (O(L) memory: an (E, B, L, L) comparison took over 50 GB at L = 20,000, batch 8)
    return torch.where(last >= 0, x.gather(-1, (last + 1).clamp(max=L - 1)),
                       torch.full_like(x, IGNORE))
