"""Library (tasks): chen2025's inverse sequence matching task (App. C.2; notes §3.4).

A *generating set* of three distinct numbers; five of its six permutations (the *key sequences*,
in random order), each followed by a separator token not in the set; then ``n_fill`` filler tokens
not in the set (the paper: 3 · Num_layer, the conv receptive field of the Mamba, so the answer
cannot be read through the convolutions); then the *query*: one of the five key sequences,
reversed. The target (last position only) is the index of that key sequence, 0..4 (the paper's
1..5; chance 0.2). The answer is unique: reversal maps the six permutations one-to-one, so
exactly one present key sequence reversed equals the query (the query itself may also appear
as a key sequence, which is the trap: a forward match is wrong).

    length L = 5 · (3 + 1) + n_fill + 3          (29 for 2 layers: n_fill = 6)

Splits (values of the set, separators and fillers; bounds inclusive):

* train: values in [low, high] = [20, 100]; the three set elements are *not* all in one residue
  class mod 3;
* val and test: values in [20, 100]; all three set elements share a residue class mod 3 (val and
  test are separate streams with the same rule: val is the test curve);
* ``ood: true`` turns the val/test splits into the OOD set: every value in [ood_low, ood_high] =
  [101, 200], no congruence rule (a named evaluation set ``{ood: {ood: true}}``).

Generating sets are drawn uniformly from the table of all valid 3-subsets of the split (76,545 for
train, 8,775 for test, 161,700 OOD), so the draw is exact and vectorised; separators and fillers
are uniform over the split's values minus the set.

Worked example: ``InverseMatchingConfig(n_fill=6)`` (2 layers, L = 29), a training sample with
the set {23, 41, 78} (residues 2, 2, 0: not all equal, so a training set), the permutation
(78, 41, 23) left out::

    key sequences   23 41 78 55 | 41 23 78 90 | 78 23 41 31 | 23 78 41 64 | 41 78 23 20
                    (index 0)     (index 1)     (index 2)     (index 3)     (index 4)
    fillers         33 96 52 60 21 47
    query           78 41 23          = key sequence 0 (23 41 78) reversed
    target          0                 (the paper's index 1)

Had the query been 41 78 23, the target would be 3 (23 78 41 reversed), not 4: key sequence 4
matches that query forward, which is the wrong answer.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, TRAIN, Batch, Task, TaskConfig, TaskInfo

_S_SET, _S_DROP, _S_ORDER, _S_QUERY, _S_SEP, _S_FILL = 1, 2, 3, 4, 5, 6

N_KEYS = 5  # key sequences shown (of the 3! = 6 permutations)
PERMS = torch.tensor(list(itertools.permutations(range(3))), dtype=torch.int64)  # (6, 3)


MAX_RANGE = 256  # values of one range: C(256, 3) = 2.7M sets, 66 MB (the paper's: 81 and 100)


class InverseMatchingConfig(TaskConfig):
    name: str = "inverse_matching"
    n_fill: int = Field(6, ge=0, le=256, description="filler tokens before the query (paper: "
                        "3 x layers)")
    low: int = Field(20, ge=0, description="train/test values in [low, high] (inclusive)")
    high: int = Field(100, ge=0, description="train/test values are at most it (the "
                      "vocabulary is 0..max(high, ood_high))")
    ood_low: int = Field(101, ge=0, description="OOD values in [ood_low, ood_high] (inclusive)")
    ood_high: int = Field(200, ge=0, description="OOD values are at most it (the vocabulary "
                          "is 0..max(high, ood_high))")
    ood: bool = Field(False, description="val/test splits are the OOD set (named eval sets)")

    @model_validator(mode="after")
    def _check(self) -> InverseMatchingConfig:
        for lo, hi, what in ((self.low, self.high, "low/high"),
                             (self.ood_low, self.ood_high, "ood_low/ood_high")):
            if hi - lo + 1 < 3 + 1 + 9:  # a set, a separator, and room for both mod-3 rules
                raise ValueError(f"{what}: [{lo}, {hi}] is too small")
            if hi - lo + 1 > MAX_RANGE:  # every 3-subset is built (valid_sets): C(n, 3) rows
                raise ValueError(f"{what}: [{lo}, {hi}] has {hi - lo + 1:,} values, more than "
                                 f"{MAX_RANGE} (its {math.comb(hi - lo + 1, 3):,} three-value "
                                 "sets are enumerated)")
        if self.ood_low <= self.high and self.low <= self.ood_high:
            raise ValueError(f"ood_low/ood_high: [{self.ood_low}, {self.ood_high}] overlaps the "
                             f"training values [{self.low}, {self.high}]: the OOD set would hold "
                             "values seen in training")
        return self

    def unread(self) -> list[tuple[str, str]]:
        # ood_high is read (it bounds the vocabulary); ood_low only by the OOD splits
        return [] if self.ood else [("ood_low", "with ood false (it bounds the OOD values of "
                                     "the ood: true splits, e.g. an evaluation set's)")]

    def eval_unread(self) -> list[tuple[str, str]]:
        """An OOD evaluation set's test split draws from [ood_low, ood_high]: ``low`` is read by
        training alone, and so is ``high`` unless it widens the vocabulary past ood_high
        (`evals: {ood: {ood: true, low: 30}}` was the `{ood: true}` set under another name)."""
        if not self.ood:
            return self.unread()
        why = "by an evaluation set with ood true (its test split draws from [ood_low, ood_high]; "
        out = [("low", why + "low bounds the training values)")]
        if self.high <= self.ood_high:
            out.append(("high", why + "high bounds the training values)"))
        return out


@lru_cache(maxsize=8)
def valid_sets(lo: int, hi: int, rule: str) -> torch.Tensor:
    """Every 3-subset of [lo, hi] (sorted rows) obeying ``rule``: 'mixed' (not all one residue mod
    3), 'same' (all one residue) or 'any'. (n, 3) int64."""
    v = torch.arange(lo, hi + 1)
    sets = torch.combinations(v, 3)
    r = sets % 3
    same = (r[:, 0] == r[:, 1]) & (r[:, 1] == r[:, 2])
    if rule == "mixed":
        sets = sets[~same]
    elif rule == "same":
        sets = sets[same]
    return sets.contiguous()


def _not_in(u: torch.Tensor, sorted_set: torch.Tensor, lo: int) -> torch.Tensor:
    """Map u uniform in [0, n-3) (..., m) to values of [lo, lo+n) minus the 3 sorted set values
    (..., 3): skip each set value in ascending order."""
    v = u + lo
    for j in range(3):
        v = v + (v >= sorted_set[..., j : j + 1]).to(v.dtype)
    return v


class InverseMatching(Task):
    """chen2025's inverse sequence matching: which of five key sequences the query reverses (5 classes)."""

    Config = InverseMatchingConfig
    name = "inverse_matching"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        L = N_KEYS * 4 + c.n_fill + 3
        return TaskInfo(vocab_size=max(c.high, c.ood_high) + 1, n_classes=N_KEYS, seq_len=L,
                        fewest_supervised=1, most_supervised=1)  # the last position

    def eval_problem(self, other: Task) -> str | None:
        """An OOD evaluation set must hold no value the run trains on: a set's own check compares
        its OOD range with its own [low, high], which an evaluation set's test split never reads
        (`{ood: true, low: 150, high: 200, ood_low: 20, ood_high: 100}` scored the run's
        training sets as out-of-distribution)."""
        a, b = self.config, other.config
        if b.ood and b.ood_low <= a.high and a.low <= b.ood_high:
            return (f"its OOD values [{b.ood_low}, {b.ood_high}] overlap the run's training "
                    f"values [{a.low}, {a.high}]: the set would report rows like the run's "
                    "training rows as out-of-distribution")
        return None

    def _range(self, split: int) -> tuple[int, int, str]:
        c = self.config
        if split == TRAIN:
            return c.low, c.high, "mixed"
        if c.ood:
            return c.ood_low, c.ood_high, "any"
        return c.low, c.high, "same"

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        dev = index.device
        lo, hi, rule = self._range(split)
        table = valid_sets(lo, hi, rule).to(dev)
        n_vals = hi - lo + 1
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        E, B = k.shape
        s = table[rng.randint(rng.combine(k, _S_SET), 1, 0, len(table))[..., 0]]  # (E, B, 3) sorted
        drop = rng.randint(rng.combine(k, _S_DROP), 1, 0, 6)  # (E, B, 1) permutation left out
        kept = torch.arange(5, device=dev) + (torch.arange(5, device=dev) >= drop).to(torch.int64)
        order = rng.permutation_keys(rng.combine(k, _S_ORDER), N_KEYS)  # (E, B, 5)
        perm_ids = kept.gather(-1, order)  # (E, B, 5): which permutation is key sequence i
        perms = PERMS.to(dev)[perm_ids]  # (E, B, 5, 3) element indices
        keyseq = s.unsqueeze(2).expand(E, B, N_KEYS, 3).gather(-1, perms)  # (E, B, 5, 3)
        q = rng.randint(rng.combine(k, _S_QUERY), 1, 0, N_KEYS)  # (E, B, 1)
        query = keyseq.gather(2, q[..., None].expand(E, B, 1, 3))[:, :, 0].flip(-1)  # (E, B, 3)
        sep = _not_in(rng.randint(rng.combine(k, _S_SEP), N_KEYS, 0, n_vals - 3), s, lo)
        fill = _not_in(rng.randint(rng.combine(k, _S_FILL), max(c.n_fill, 1), 0, n_vals - 3), s,
                       lo)[..., : c.n_fill]
        blocks = torch.cat([keyseq, sep.unsqueeze(-1)], dim=-1).flatten(-2)  # (E, B, 20)
        x = torch.cat([blocks, fill, query], dim=-1)
        y = torch.full_like(x, IGNORE)
        y[..., -1] = q[..., 0]
        return Batch(x=x, y=y)
