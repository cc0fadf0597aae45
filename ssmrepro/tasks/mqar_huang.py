"""Library (tasks): MQAR in huang2025's own layout (App. C.1 eq. 46, App. D.3), not zoology's.

    x = [k_1 v_1 ... k_kappa v_kappa | ... k_{i_1} ... k_{i_kappa} ...]      length T
    y = [ .   .  ...   .       .     | ... v_{i_1} ... v_{i_kappa} ...]      '.' = unsupervised

The rules (the paper's unknowns are fixed by the catalogue's "decisions already taken"):

* a **key set of size kappa** (ids ``0..kappa-1``) and a separate **value range of |V| tokens**
  (ids ``kappa..kappa+|V|-1``); the vocabulary is ``kappa + |V|`` tokens and the model's outputs
  cover all of them (targets are always value ids);
* the context holds every key exactly once, in a random order (a random permutation of the key
  set: the text's "i.i.d." keys would make a query ambiguous when a key repeats), each followed by
  its value, drawn i.i.d. uniform over the |V| values (two keys may share a value);
* the query chunk is the remaining ``T - 2*kappa`` positions: every key is asked exactly once, at
  ``kappa`` distinct positions drawn uniformly without replacement (so the keys come shuffled),
  and every other position of the chunk is a noise token drawn i.i.d. uniform over the |V| values
  (App. C.1 writes the noise as value tokens ``v_x``); there is no separator token;
* the target at a query position is the value paired with that key in the context; every other
  position is IGNORE (loss and accuracy at the query positions only, App. D.3).

Needs ``T >= 3*kappa`` (the chunk must hold the kappa queries).

Worked example: ``MQARHuangConfig(kappa=3, vocab=5, T=12)`` (ids: keys 0..2, values 3..7),
seed 0, train split, sample 0 ('.' = IGNORE)::

    position:  0  1  2  3  4  5  6  7  8  9 10 11
    inputs:    2  4  0  3  1  7  3  0  5  1  2  3
    targets:   .  .  .  .  .  .  .  3  .  7  4  .
    role:     k2 v  k0 v  k1 v  n  q0 n  q1 q2 n

(context: key 2 -> 4, key 0 -> 3, key 1 -> 7; query chunk of 6 positions: keys 0, 1, 2 at 7, 9,
10, noise 3, 5, 3 at 6, 8, 11.)

Randomness: each example uses ``rng.key(seed, split, index)`` with independent sub-streams for the
context order, the values, the query positions and the noise; everything is vectorised over (E, B).
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo, role_split_problem

_S_ORDER, _S_VALUES, _S_QPOS, _S_NOISE = 1, 2, 3, 4


class MQARHuangConfig(TaskConfig):
    name: str = "mqar_huang"
    kappa: int = Field(4, ge=1, description="key-value pairs = size of the key set")
    vocab: int = Field(128, ge=2, description="|V|: value (and noise) tokens")
    T: int = Field(100, ge=3, description="sequence length")

    @model_validator(mode="after")
    def _fits(self) -> MQARHuangConfig:
        if self.T < 3 * self.kappa:
            raise ValueError(f"T={self.T} cannot hold {self.kappa} pairs and {self.kappa} queries "
                             f"(needs T >= 3*kappa = {3 * self.kappa})")
        return self


class MQARHuang(Task):
    """Multi-query associative recall in huang2025's own layout."""

    Config = MQARHuangConfig
    name = "mqar_huang"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        return TaskInfo(vocab_size=c.kappa + c.vocab, n_classes=c.kappa + c.vocab, seq_len=c.T,
                        fewest_supervised=c.kappa, most_supervised=c.kappa)  # the kappa queries

    def eval_problem(self, other: Task) -> str | None:
        # kappa + vocab kept (the outputs fit): keys are ids 0..kappa-1, values the next |V|
        why = role_split_problem("kappa", self.config.kappa, other.config.kappa, "keys", "values")
        return None if why is None else why + " (keys are ids 0..kappa-1)"

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        kappa, V, T = c.kappa, c.vocab, c.T
        Q = T - 2 * kappa  # query-chunk length
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        E, B = k.shape
        dev = k.device
        value_of = rng.randint(rng.combine(k, _S_VALUES), kappa, 0, V) + kappa  # (E, B, kappa)
        order = rng.permutation_keys(rng.combine(k, _S_ORDER), kappa)  # context keys, in order
        ctx = torch.stack([order, value_of.gather(-1, order)], dim=-1).flatten(-2)  # (E, B, 2kappa)
        # key m is asked at query-chunk position qpos[m] (distinct, uniformly random)
        qpos = rng.sample_without_replacement(rng.combine(k, _S_QPOS), Q, kappa) + 2 * kappa
        x = torch.empty(E, B, T, dtype=torch.int64, device=dev)
        x[..., : 2 * kappa] = ctx
        x[..., 2 * kappa :] = rng.randint(rng.combine(k, _S_NOISE), Q, 0, V) + kappa
        keys = torch.arange(kappa, device=dev).expand(E, B, kappa)
        x.scatter_(-1, qpos, keys)
        y = torch.full_like(x, IGNORE)
        y.scatter_(-1, qpos, value_of)
        return Batch(x=x, y=y)
