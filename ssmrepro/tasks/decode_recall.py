"""Library (tasks): cooper2026 associative recall with decoding (the fork's ``decode-recall``;
paper Def. 4.4, §5.2 Fig. 5, §5.3 Fig. 8 and Table 1).

Tokens (``cooper_tokens``): W words ``V0..V{W-1}`` (ids 0..W-1; W a power of two, 2^K), the bits
``#0``, ``#1`` (ids W, W+1), then <bos>, <eos>, <null>. Default W = 32 (K = 5 bits): vocabulary 37.

Rules (seq-to-seq, read off at position t, no shift), as the fork's generator:

* every position is a bit with probability p (the "bit proportion"; #0 and #1 equally likely),
  else a word;
* a running state s starts at 0; at position t, after the fork has recorded
  ``assoc[x[t-1]] = x[t]``, a bit b at t updates ``s = (2 s + b) mod W`` — so s_t is the last K
  bits at or before t read as a binary number, the newest bit least significant;
* target at t: the token that follows the most recent occurrence of the word ``V_{s_t}`` at a
  position j <= t - 1, i.e. ``x[j + 1]`` (which may be a bit, or x[t] itself when j = t - 1);
  unsupervised (the fork's <null>) if ``V_{s_t}`` has not occurred before t. Before the first
  bit the state is 0, so targets look up ``V0``;
* ``L_min``: per-sequence lengths uniform in [L_min, L], padded with <null> (IGNORE targets; the
  length-generalisation runs of Fig. 8 train on 20-50);
* ``supervise: last``: only the last position is a target; default ``all``.

The fork rounds ``num_vocab`` down to a power of two; we reject other W instead (no field is
silently changed).

Worked example: ``DecodeRecallConfig(words=4, p=0.3, L=12)`` (K = 2 bits), seed 5, train split,
sample 0 (ids: V0..V3 = 0..3, #0 = 4, #1 = 5; '.' = IGNORE)::

    t:      0  1  2  3  4  5  6  7  8  9 10 11
    x:      2  4  4  5  1  4  5  1  2  0  0  2
    token: V2 #0 #0 #1 V1 #0 #1 V1 V2 V0 V0 V2
    s:      0  0  0  1  1  2  1  1  1  1  1  1
    y:      .  .  .  .  .  4  4  4  2  2  2  2

(t = 0..4: V_s has not occurred before t. t = 5: the bit #0 makes s = 2·1 + 0 = 2; V2 last at 0,
so x[1] = #0 (a bit). t = 6: s = (2·2 + 1) mod 4 = 1; V1 last at 4, so x[5] = #0. t = 8: V1
last at 7, so the target is x[8] itself.)

Randomness: each example uses ``rng.key(seed, split, index)`` and independent sub-streams for
token kinds, words, bits and lengths; everything is vectorised over (E, B) (one sort per batch
for the last-occurrence lookup).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo
from .cooper_tokens import (
    last_only,
    lengths,
    pad_to_lengths,
    random_tokens,
    special_ids,
    vocab_size,
)


class DecodeRecallConfig(TaskConfig):
    name: str = "decode_recall"
    words: int = Field(32, ge=2, description="W = 2^K words (the fork's num_vocab, rounded there)")
    p: float = Field(0.2, ge=0.0, le=1.0, description="bit proportion: P(a position is a bit)")
    L: int = Field(100, ge=2, description="sequence length (the longest, with L_min)")
    L_min: int | None = Field(None, ge=1, description="null: every sequence has length L; "
                              "else lengths uniform in [L_min, L], padded with <null>")
    supervise: Literal["all", "last"] = Field("all", description="last: the last position only")

    @model_validator(mode="after")
    def _check(self) -> DecodeRecallConfig:
        if self.words & (self.words - 1):
            raise ValueError(f"words={self.words} must be a power of two (the state is the last "
                             "log2(words) bits; the fork rounds down, we do not change fields)")
        if self.L_min is not None and self.L_min > self.L:
            raise ValueError(f"L_min={self.L_min} exceeds L={self.L}")
        if self.p == 1:
            raise ValueError("p=1 makes every position a bit, so no word occurs to recall and no "
                             "position has a target")
        return self

    @property
    def n_bits(self) -> int:
        return self.words.bit_length() - 1


class DecodeRecall(Task):
    """cooper2026's recall with decoding: the token after the latest word that the recent bits name."""

    Config = DecodeRecallConfig
    name = "decode_recall"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        V = vocab_size(c.words, 2)
        return TaskInfo(vocab_size=V, n_classes=V, seq_len=c.L)

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        n_len = lengths(k, c.L, c.L_min)
        x = random_tokens(k, c.L, c.words, 2, c.p)
        y = decode_targets(x, c.words)
        if c.supervise == "last":
            y = last_only(y, n_len)
        x, y = pad_to_lengths(x, y, n_len, special_ids(c.words, 2)["null"])
        return Batch(x=x, y=y)


def decode_state(x: torch.Tensor, words: int) -> torch.Tensor:
    """s_t (E, B, L): the last K = log2(W) bits at or before t as a number, newest bit = 1s."""
    K = words.bit_length() - 1
    L = x.shape[-1]
    is_bit = (x == words) | (x == words + 1)
    pos = torch.arange(L, device=x.device)
    # bit values in order of appearance: the m-th bit's value at index m (stable sort by position)
    order = torch.argsort(torch.where(is_bit, pos, pos + L), dim=-1, stable=True)
    seq = (x.gather(-1, order) - words).clamp(0, 1)  # entries past the bit count are junk
    count = is_bit.long().cumsum(-1)  # bits at or before t
    s = torch.zeros_like(x)
    for j in range(K):  # j-th newest bit, weight 2^j
        idx = count - 1 - j
        bit = seq.gather(-1, idx.clamp(min=0))
        s = s + torch.where(idx >= 0, bit, torch.zeros_like(bit)) * (1 << j)
    return s


def decode_targets(x: torch.Tensor, words: int) -> torch.Tensor:
    """Targets of unpadded inputs x (E, B, L): x[j + 1] for the last j <= t - 1 with x[j] = V_{s_t}
    (IGNORE when V_{s_t} has not occurred before t)."""
    s = decode_state(x, words)
    # one sort of the L tokens (stores) and the L lookups of V_{s_t} (queries) by (value, time),
    # a store at j before a query at t iff j <= t - 1: the query's latest earlier store of the
    # same value is then the last store before it in that order (O(L log L); a pass per word,
    # O(W L), took 20 minutes a batch at 2^24 words, which the memory check lets through)
    L = x.shape[-1]
    pos = torch.arange(L, device=x.device).expand_as(x)
    vals = torch.cat([x, s], dim=-1)  # (..., 2L): tokens, then the looked-up words
    order = torch.argsort(vals * (2 * L) + torch.cat([2 * pos + 1, 2 * pos], dim=-1), dim=-1)
    idx = torch.arange(2 * L, device=x.device).expand_as(order)
    is_store = order < L
    last = torch.where(is_store, idx, torch.full_like(idx, -1)).cummax(dim=-1).values
    found = (last >= 0) & (vals.gather(-1, order.gather(-1, last.clamp(min=0)))
                           == vals.gather(-1, order))
    j_sorted = torch.where(found, order.gather(-1, last.clamp(min=0)), torch.full_like(order, -1))
    j = torch.empty_like(order).scatter_(-1, order, j_sorted)[..., L:]  # the queries' j
    return torch.where(j >= 0, x.gather(-1, (j + 1).clamp(max=L - 1)),
                       torch.full_like(x, IGNORE))
