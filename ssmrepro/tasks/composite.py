"""Library (tasks): chen2025's composite function task (App. C.1; notes §3.3).

A sequence of ``L`` tokens holds one *key* immediately followed by two *anchors*; every other
token is a filler. The target (last position only) is ``key + f(a, b)``, the key shifted by the
function of the anchor pair ``ab``.

* ``standard``: anchors 1, 2, 3, 4 with single-anchor functions +5, +1, −2, −8; pair ``ab`` maps
  to f_a + f_b (composition), except pair **34 → −6** (composition would give −10). Pair **43 is
  never trained**; on it the *composite* solution is key − 10 (f_4 + f_3) and the *symmetric*
  solution key − 6 (as 34). ``target43`` picks which of the two the targets of pair 43 are.
* ``full_symmetry``: anchors 0–4, two function sets, set 1 {0: +2, 1: +5, 2: +1, 3: −2, 4: −8} for
  pairs 01 02 10 20 14 41 23 32 34 43 and set 2 {0: −9, 1: +6, 2: −7, 3: +3, 4: ``set2_shift4``}
  for pairs 03 30 04 40 12 21 13 31 24 42 (20 pairs; 00 … 44 excluded); only 43 is held out, and
  its only consistent answer is the 34 one (key − 10), so ``target43`` does not change the data.
  The paper lists no set-2 function for anchor 4 (its pairs 04 40 24 42 need one): ``set2_shift4``
  (default +4) is our choice [UNKNOWN in the paper].

Splits (the paper's train/test rule by key position): positions are 1-based, position p belongs to
the congruence class p mod ``modulus`` (8). The key sits at p ∈ 1..L−2 (the anchors follow it).

* train: key mod 8 ≠ p mod 8; pairs uniform over the trained pairs (every pair but 43);
* val and test: key mod 8 = p mod 8 (so keys ≡ 0, 7 mod 8 never reach them when L = 8); pairs
  uniform over every pair of the variant, 43 included, or only ``test_pair`` when set. Val and
  test are separate streams with the same rule; val is the held-out-position curve.

Keys and fillers are uniform in [key_low, key_high) = [20, 100) [INFERRED from Fig. 2]; anchors
are the token ids 0–4; targets are never wrapped (no mod 100), so the classes are the vocabulary
ids [0, vocab) and key + shift stays in range (checked). Named evaluation sets (``train.evals``)
give the two accuracies on pair 43 separately, e.g. ``{c43: {test_pair: "43"}, s43: {test_pair:
"43", target43: symmetric}}``.

Worked example: ``CompositeConfig()`` (standard, L 8), a test sample with key 33 (33 ≡ 1 mod 8) at
position 1 and pair 43 ('.' = IGNORE)::

    position:  1  2  3  4  5  6  7  8
    inputs:   33  4  3 57 90 21 64 48
    targets:   .  .  .  .  .  .  . 23      target43 composite: 33 − 8 − 2 = 23
                                   27      target43 symmetric: 33 − 6 (as pair 34) = 27

The same key at position 1 can never be a training sample (33 ≡ 1 ≡ position 1); e.g. the training
sample ``57 21 33 1 2 90 64 48`` (key 33 at position 3, pair 12) has target 33 + 5 + 1 = 39.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, TRAIN, Batch, Task, TaskConfig, TaskInfo

_S_POS, _S_KEY, _S_PAIR, _S_FILL = 1, 2, 3, 4

STANDARD_SHIFTS = {1: 5, 2: 1, 3: -2, 4: -8}
SET1 = {0: 2, 1: 5, 2: 1, 3: -2, 4: -8}
SET2_BASE = {0: -9, 1: 6, 2: -7, 3: 3}
SET1_PAIRS = ("01", "02", "10", "20", "14", "41", "23", "32", "34", "43")
SET2_PAIRS = ("03", "30", "04", "40", "12", "21", "13", "31", "24", "42")
HELD_OUT = "43"


class CompositeConfig(TaskConfig):
    name: str = "composite"
    variant: Literal["standard", "full_symmetry"] = Field(
        "standard", description="standard: anchors 1-4, pair ab shifts by f_a + f_b except 34 "
        "(-6), pair 43 never trained; full_symmetry: anchors 0-4, two function sets over 20 "
        "pairs, 43 held out")
    L: int = Field(8, ge=3, le=64, description="sequence length (App. C.1: 8; Fig. 2 shows 9)")
    modulus: int = Field(8, ge=2, description="position p (1-based) belongs to class p mod modulus")
    key_low: int = Field(20, ge=5, description="keys and fillers are uniform in [key_low, key_high)")
    key_high: int = Field(100, ge=6, description="keys and fillers are below it (exclusive)")
    vocab: int = Field(128, ge=8, le=4096, description="token ids and classes [0, vocab)")
    test_pair: str | None = Field(
        None, description="val/test splits hold only this anchor pair (e.g. '43'); null: every "
        "pair of the variant")
    target43: Literal["composite", "symmetric"] = Field(
        "composite", description="targets of the held-out pair 43: composite key-10 or symmetric "
        "key-6 (standard variant; in full_symmetry both are key-10)")
    set2_shift4: int = Field(4, description="full_symmetry: set-2 function of anchor 4 (not given "
                             "in the paper)")

    @model_validator(mode="after")
    def _check(self) -> CompositeConfig:
        if self.key_high - self.key_low < self.modulus:
            raise ValueError(f"key range [{self.key_low}, {self.key_high}) must hold every class "
                             f"mod {self.modulus}")
        pairs = pair_shifts(self)
        if self.test_pair is not None and self.test_pair not in pairs:
            raise ValueError(f"test_pair {self.test_pair!r} is not a pair of the {self.variant} "
                             f"variant ({', '.join(pairs)})")
        lo = self.key_low + min(pairs.values())
        hi = self.key_high - 1 + max(pairs.values())
        if lo < 0 or hi >= self.vocab or self.key_high > self.vocab:
            raise ValueError(f"targets key + shift span [{lo}, {hi}]: they must lie in [0, vocab="
                             f"{self.vocab}) (targets are not wrapped)")
        return self

    def unread(self) -> list[tuple[str, str]]:
        # target43 in full_symmetry is not named here: both answers are key - 10 there, and
        # chen2025-figS1-S2 measures the two labels as the paper does (s43 = c43 by design)
        if self.variant != "standard":
            return []
        out = [("set2_shift4", "by variant 'standard' (it is the full_symmetry variant's set-2 "
                "function of anchor 4)")]
        if self.test_pair not in (None, HELD_OUT):  # pair 43 is never trained
            out.append(("target43", f"with test_pair {self.test_pair!r} (it is the answer of "
                        "pair 43, which only the val and test splits hold)"))
        return out


def pair_shifts(c: CompositeConfig) -> dict[str, int]:
    """Every anchor pair of the variant -> its shift, pair 43 with ``target43``'s answer."""
    if c.variant == "standard":
        f = STANDARD_SHIFTS
        out = {f"{a}{b}": f[a] + f[b] for a in f for b in f}
        out["34"] = -6
        out[HELD_OUT] = f[4] + f[3] if c.target43 == "composite" else out["34"]
        return out
    set2 = {**SET2_BASE, 4: c.set2_shift4}
    out = {p: SET1[int(p[0])] + SET1[int(p[1])] for p in SET1_PAIRS}
    out.update({p: set2[int(p[0])] + set2[int(p[1])] for p in SET2_PAIRS})
    return out  # 43 = 34 = -10: composite and symmetric coincide


def train_pairs(c: CompositeConfig) -> list[str]:
    return [p for p in pair_shifts(c) if p != HELD_OUT]


def _allowed_keys(c: CompositeConfig, same_class: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per key position p = 1..L-2: the keys allowed there, (L-2, K) padded, and their counts."""
    keys = torch.arange(c.key_low, c.key_high)
    rows = []
    for p in range(1, c.L - 1):
        hit = (keys % c.modulus) == (p % c.modulus)
        rows.append(keys[hit if same_class else ~hit])
    n = torch.tensor([len(r) for r in rows])
    table = torch.zeros(len(rows), int(n.max()), dtype=torch.int64)
    for i, r in enumerate(rows):
        table[i, : len(r)] = r
    return table, n


class Composite(Task):
    """chen2025's composite function: the key token shifted by the function of the anchor pair after it."""

    Config = CompositeConfig
    name = "composite"

    def __init__(self, config: CompositeConfig):
        super().__init__(config)
        c = config
        shifts = pair_shifts(c)
        self._train_pairs = train_pairs(c)
        self._eval_pairs = [c.test_pair] if c.test_pair else list(shifts)
        self._shift = shifts
        self._tables = {True: _allowed_keys(c, True), False: _allowed_keys(c, False)}
        positions = range(1, c.L - 1)
        self._eval_positions = [p for p in positions  # test keys need their own class
                                if bool(self._tables[True][1][p - 1] > 0)]

    @property
    def info(self) -> TaskInfo:
        c = self.config
        return TaskInfo(vocab_size=c.vocab, n_classes=c.vocab, seq_len=c.L,
                        fewest_supervised=1, most_supervised=1)  # the last position

    def eval_problem(self, other: Task) -> str | None:
        """An evaluation set must ask the run's question on rows the run never trains on: a pair
        the run trains must keep its shift (`variant: full_symmetry` beside standard gave pair
        12 the answer key - 3 for key + 6), and the set's (position, key) classes must be held
        out from the run's training rows (`modulus: 4` beside 8 drew half its 'test' rows from
        the run's training rows). Pair 43, never trained, may take either answer
        (``target43``)."""
        a, b = self.config, other.config
        mine, theirs = self._shift, other._shift
        for pair in other._eval_pairs:
            if pair in self._train_pairs and theirs[pair] != mine[pair]:
                keys = [k for k in ("variant", "set2_shift4") if getattr(a, k) != getattr(b, k)]
                return (f"{' and '.join(keys)} differ{'s' if len(keys) == 1 else ''} from the "
                        f"run's task: pair {pair}'s answer is key {theirs[pair]:+d} there but key "
                        f"{mine[pair]:+d} in the run's training, so the set would score the "
                        "model on functions it never learned")
        if a.modulus == b.modulus or not any(p in self._train_pairs for p in other._eval_pairs):
            return None  # the run's held-out classes, or only pair 43: no training row
        for p in range(1, min(a.L, b.L) - 1):
            for key in range(max(a.key_low, b.key_low), min(a.key_high, b.key_high)):
                if key % b.modulus == p % b.modulus and key % a.modulus != p % a.modulus:
                    return (f"its test rows include key {key} at position {p}, where the run "
                            f"trains on it (modulus {b.modulus} beside the run's {a.modulus}): "
                            "the set would report accuracy on training rows as held-out")
        return None

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        dev = index.device
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        train = split == TRAIN
        pairs = self._train_pairs if train else self._eval_pairs
        positions = list(range(1, c.L - 1)) if train else self._eval_positions
        pos_t = torch.tensor(positions, dtype=torch.int64, device=dev)
        p = pos_t[rng.randint(rng.combine(k, _S_POS), 1, 0, len(positions))[..., 0]]  # 1-based
        table, counts = (t.to(dev) for t in self._tables[not train])
        r = rng.randint(rng.combine(k, _S_KEY), 1, 0, 1 << 30)[..., 0]
        slot = r % counts[p - 1]  # uniform: 2^30 draws folded onto < 100 keys (bias < 1e-7)
        key = table[p - 1, slot]  # (E, B)
        pi = rng.randint(rng.combine(k, _S_PAIR), 1, 0, len(pairs))[..., 0]
        a = torch.tensor([int(q[0]) for q in pairs], device=dev)[pi]
        b = torch.tensor([int(q[1]) for q in pairs], device=dev)[pi]
        shift = torch.tensor([self._shift[q] for q in pairs], device=dev)[pi]
        x = rng.randint(rng.combine(k, _S_FILL), c.L, c.key_low, c.key_high)  # (E, B, L) fillers
        i0 = (p - 1).unsqueeze(-1)  # 0-based key index
        x.scatter_(-1, i0, key.unsqueeze(-1))
        x.scatter_(-1, i0 + 1, a.unsqueeze(-1))
        x.scatter_(-1, i0 + 2, b.unsqueeze(-1))
        y = torch.full_like(x, IGNORE)
        y[..., -1] = key + shift
        return Batch(x=x, y=y)
