"""Library (tasks): INDUCTION HEADS as huang2025 App. C.2 / D.4 (Sanford et al.'s formulation).

For each position t the target is the token that followed the latest previous occurrence of x_t:

    y_t = x_{j(t)+1},   j(t) = max{ j < t : x_j = x_t },   or "blank" when x_t is new.

Data (App. D.4), tokens ``0..|V|-1``: with probability ``1 - p`` the *standard* case, x_1..x_T
i.i.d. uniform over V; with probability ``p`` the *hard* case: a special token v* uniform in V,
x_1..x_T i.i.d. uniform over V \\ {v*}, r uniform in {1, ..., floor(gamma*T)} (``special_range``:
gamma as written, so 0.29 x 100 is 29, not float's 28.999...), and v* written at
the 1-based positions r and T - r (the text's "T r" read as T - r), so v* occurs exactly twice,
early and late, and its target at T - r is the token after position r.

Decisions where the paper is silent (spec notes repeat them):

* **blank**: not a class. Positions where x_t occurs for the first time are unsupervised (IGNORE),
  as the non-query positions of MQAR (App. D.3). Lemma 3's construction has an output layer with
  |V| outputs (W_o = [0 | I_|V|]) and no blank output, so the model classifies over V only
  (``n_classes = |V|``).
* **loss and accuracy**: at every position whose token occurred before (in either case), i.e.
  every position with a defined x_{j(t)+1}.

Worked example (the paper's, App. C.2, tokens 1..4 written here as ids 1..4 of |V| = 5; 1-based
t; '.' = IGNORE)::

    t: 1 2 3 4 5 6 7 8
    x: 2 1 3 2 4 3 2 4
    y: . . . 1 . 2 4 3

(t = 7: x_7 = 2 last occurred at j = 4, so y_7 = x_5 = 4.) ``induction_targets`` computes y from x.

Randomness: ``rng.key(seed, split, index)`` with sub-streams for the case, the tokens, v* and r.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo, previous_occurrence

_S_CASE, _S_TOKENS, _S_SPECIAL, _S_R = 1, 2, 3, 4


def special_range(gamma: float, T: int) -> int:
    """floor(gamma * T), the last position r of the hard case, with gamma read as the decimal
    it was written as (its shortest repr): float's 0.29 * 100 is 28.999999999999996, which
    floored to 28 and never drew r = 29, the paper's gamma*T."""
    return math.floor(Fraction(repr(gamma)) * T)


class InductionHeadsConfig(TaskConfig):
    name: str = "induction_heads"
    vocab: int = Field(10, ge=2, description="|V|")
    T: int = Field(100, ge=2, description="sequence length")
    p: float = Field(0.75, ge=0.0, le=1.0, description="probability of the hard case")
    gamma: float = Field(0.1, gt=0.0, lt=0.5, description="special range ratio: r <= gamma*T")

    @model_validator(mode="after")
    def _fits(self) -> InductionHeadsConfig:
        R = special_range(self.gamma, self.T)
        if self.p > 0 and R < 1:
            raise ValueError(f"gamma*T = {self.gamma * self.T:g} < 1: no position r in "
                             "{1..floor(gamma*T)} for the hard case")
        if self.p > 0 and 2 * R >= self.T:
            raise ValueError(f"positions r and T - r overlap (floor(gamma*T) = {R}, T = {self.T})")
        return self

    def unread(self) -> list[tuple[str, str]]:
        return ([("gamma", "with p 0 (no sequence is of the hard case, whose special positions "
                  "gamma bounds)")] if self.p == 0 else [])


def induction_targets(x: torch.Tensor, vocab: int) -> torch.Tensor:
    """y (same shape as x, int64): x at the position after the latest previous occurrence of x_t,
    IGNORE where x_t occurs for the first time. x: (..., T) token ids in [0, vocab)."""
    T = x.shape[-1]
    j = previous_occurrence(x)  # (..., T): latest j < t with x_j = x_t, else -1
    nxt = x.gather(-1, (j + 1).clamp(max=T - 1))
    return torch.where(j >= 0, nxt, torch.full_like(x, IGNORE))


class InductionHeads(Task):
    """huang2025's induction heads: the token after the latest earlier occurrence of this token."""

    Config = InductionHeadsConfig
    name = "induction_heads"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        # each repeated token is supervised: T - V repeats at least (pigeonhole), and T - V(1 -
        # (1 - 1/V)^T) expected of a uniform sample, which a batch's most supervised sample has
        repeats = c.T - c.vocab * -math.expm1(c.T * math.log1p(-1 / c.vocab))
        return TaskInfo(vocab_size=c.vocab, n_classes=c.vocab, seq_len=c.T,
                        fewest_supervised=max(0, c.T - c.vocab, math.floor(repeats)))

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        V, T = c.vocab, c.T
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        hard = rng.uniform(rng.combine(k, _S_CASE), 1)[..., 0] < c.p  # (E, B)
        special = rng.randint(rng.combine(k, _S_SPECIAL), 1, 0, V)  # (E, B, 1)
        u = rng.randint(rng.combine(k, _S_TOKENS), T, 0, V)  # standard case
        v = rng.randint(rng.combine(k, _S_TOKENS), T, 0, V - 1)  # hard case: V \ {v*}
        v = v + (v >= special).long()
        R = special_range(c.gamma, T)
        if R >= 1:
            r = rng.randint(rng.combine(k, _S_R), 1, 1, R + 1)  # (E, B, 1), 1-based
            v.scatter_(-1, r - 1, special)
            v.scatter_(-1, T - r - 1, special)
        x = torch.where(hard[..., None], v, u)
        return Batch(x=x, y=induction_targets(x, V))
