"""Library (tasks): MQAR, multi-query associative recall (zoology's ``multiquery_ar`` + koren2026).

Layout of one example (length L; ``kappa`` = number of facts, the paper's N_f):

* keys ``k_1..k_kappa``: distinct ids drawn without replacement from ``[1, V//2)`` (id 0 is the
  "empty" token and is never a key); values ``v_1..v_kappa``: distinct ids drawn without
  replacement from ``[V//2, V)``.
* context ``k_1 v_1 k_2 v_2 ... k_kappa v_kappa`` (``2*kappa`` tokens), tiled ``num_passes`` times.
* query region (the remaining ``L - context`` tokens, ``space = (L - context)//2`` even slots):
  ``kappa`` distinct slot indices ``gap_m`` are drawn without replacement from ``range(space)`` with
  probabilities ``p_i = a*i**(a-1)`` (``i = 1..space``, normalised; ``a = power_a``; ``a = 1`` is
  uniform, zoology's default 0.01 puts most queries right after the context). Key ``k_m`` is written
  at offset ``2*gap_m`` of the query region, so every key is asked exactly once, in random order.
* targets: the value ``v_m`` sits AT THE POSITION OF THE QUERY KEY ``k_m`` (zoology builds L+1 tokens
  and shifts inputs/labels by one; this is the net effect). Every other target is IGNORE (-100).
* ``random_non_queries``: every still-empty position of the input (everything in the query region
  that is not a query key) is replaced by an id uniform in ``[0, V)`` (fillers may equal key or value
  ids). Zoology draws these from the *torch global RNG*; we draw them from our counter-based stream,
  like every other random choice here, so a sample is a pure function of (config, seed, split, index).

Weighted sampling without replacement uses the Gumbel-top-k trick (top-kappa of
``log p_i + Gumbel``), which has the same distribution as numpy's sequential
``choice(replace=False, p=p)`` used by zoology.

Worked example: ``MQARConfig(vocab=20, L=16, kappa=2, random_non_queries=False)``, seed 1, train
split, sample 0 ('.' = IGNORE; keys from [1, 10), values from [10, 20))::

    position:  0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
    inputs:    4 17  9 12  0  0  0  0  0  0  0  0  9  0  4  0
    targets:   .  .  .  .  .  .  .  .  .  .  .  . 12  . 17  .
    role:     k1 v1 k2 v2                         q2    q1

(context = 4 tokens, space = (16 - 4)//2 = 6 slots, gaps drawn {4, 5}: key 9 at 4 + 2*4 = 12 with
target 12, key 4 at 4 + 2*5 = 14 with target 17.) With ``random_non_queries=True`` every 0 above
becomes a random id in ``[0, 20)``. (Zoology's own docstring example uses V=12, L=16, which its
``V > L`` assertion would reject; we keep that assertion, hence V=20 here.)

koren2026 extensions (its vendored ``associative_recall`` + ``generators``; see notes §2.2):

* ``key_repeats = N_k > 1``: layout ``[N_k - 1 extra KV chunks | canonical KV block | queries]``.
  Each extra chunk holds the same keys in a fresh random order, each paired with a fresh value
  (drawn without replacement within the chunk, independently of the other chunks, so it may coincide
  with the canonical value). Queries ask for the canonical (last) value. Needs ``2*kappa*(N_k+1) <= L``.
* ``query_repeats = N_q > 1``: one KV block, then ``N_q`` query sections of
  ``(L - 2*kappa)//N_q`` tokens, each with its own gaps and its own supervised targets (so there are
  ``kappa*N_q`` targets). Needs ``2*kappa*(N_q+1) <= L``. When ``N_q`` does not divide
  ``L - 2*kappa`` the few leftover tokens at the end are empty (fillers); koren's generator returns a
  shorter sequence there, we keep length L.
* ``reduce_to_ar``: plain AR. Generate with ``L = 4*kappa`` (so the ``kappa`` gaps fill all
  ``kappa`` slots and the first query slot is always used), then keep the first ``2*kappa + 1``
  tokens: all facts plus exactly one query (for a uniformly random key). koren overrides the length,
  we instead require the config to say ``L = 4*kappa`` so no field is silently ignored. The key
  asked is uniform only with ``power_a = 1`` (koren's value): any other law ranks the facts, so
  the config refuses it.
* koren's repeated-key/query generators ignore ``power_a`` (always uniform); ours apply it in every
  layout (identical for the ``power_a = 1`` koren always uses).
* ``num_passes`` (current zoology) cannot be combined with repeated keys or queries.

Randomness: each example uses the key ``rng.key(seed, split, index)`` and independent sub-streams
for keys, values, extra chunks, gaps and fillers; everything is vectorised over (E, B).
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator

from . import rng
from .base import IGNORE, Batch, Task, TaskConfig, TaskInfo

# sub-stream tags (folded into the per-example key)
_S_KEYS, _S_VALUES, _S_EXTRA_PERM, _S_EXTRA_VALUES, _S_GAPS, _S_FILL = 1, 2, 3, 4, 5, 6


class MQARConfig(TaskConfig):
    name: str = "mqar"
    vocab: int = Field(512, ge=4, description="V: keys from [1, V//2), values from [V//2, V)")
    L: int = Field(64, ge=2, description="input length (for reduce_to_ar: the generation length, = 4*kappa)")
    kappa: int = Field(16, ge=1, description="number of key-value pairs (N_f)")
    power_a: float = Field(1.0, gt=0.0, le=1e6, description="gap power law p_i ~ a*i^(a-1); 1 = "
                           "uniform (at most 1e6: from about 1e306 the weights i^(a-1) overflow "
                           "float64 and the queries sat in slots the law never gives them)")
    random_non_queries: bool = Field(True, description="fill empty positions with uniform ids in [0, V)")
    num_passes: int = Field(1, ge=1, description="times the KV block is repeated (zoology)")
    key_repeats: int = Field(1, ge=1, description="N_k: KV chunks per key, queries ask for the last")
    query_repeats: int = Field(1, ge=1, description="N_q: independent query sections")
    reduce_to_ar: bool = Field(False, description="AR: all facts then a single query (length 2*kappa+1)")

    @model_validator(mode="after")
    def _feasible(self) -> MQARConfig:
        V, L, k = self.vocab, self.L, self.kappa
        if self.key_repeats > 1 and self.query_repeats > 1:
            raise ValueError(
                f"key_repeats={self.key_repeats} and query_repeats={self.query_repeats} cannot both be > 1"
            )
        if self.num_passes > 1 and (self.key_repeats > 1 or self.query_repeats > 1):
            raise ValueError(
                f"num_passes={self.num_passes} cannot be combined with key_repeats={self.key_repeats} "
                f"or query_repeats={self.query_repeats}"
            )
        if self.reduce_to_ar and L != 4 * k:
            raise ValueError(
                f"reduce_to_ar generates with L = 4*kappa = {4 * k} and keeps 2*kappa+1 = {2 * k + 1} "
                f"tokens; set L={4 * k} (got L={L})"
            )
        if self.reduce_to_ar and self.power_a != 1.0:
            # the kappa gaps fill all kappa slots, so the law cannot move the query: it only
            # ranks the facts, and the kept query asked the first fact 29 % of the time at
            # power_a 0.01 (kappa 16) and the last three almost never, for a 'uniform' AR
            raise ValueError(
                f"power_a={self.power_a!r} with reduce_to_ar: the {k} gaps fill all {k} query "
                "slots and only the first is kept, so the power law does not place the query; "
                "it only biases which fact is asked (below 1 toward the first facts, above 1 "
                "toward the last), where plain AR asks a uniformly random one; leave power_a 1"
            )
        if L % 2:
            raise ValueError(f"L={L} must be even")
        if V <= L:
            raise ValueError(f"vocab V={V} must exceed the sequence length L={L} (zoology asserts V > L)")
        if k > V // 2 - 1:
            raise ValueError(
                f"kappa={k} distinct keys do not fit in the {V // 2 - 1} key ids [1, V//2={V // 2}) (V={V})"
            )
        if self.key_repeats > 1 or self.query_repeats > 1:
            n = max(self.key_repeats, self.query_repeats)
            if 2 * k * (n + 1) > L:
                what = "key_repeats" if self.key_repeats > 1 else "query_repeats"
                raise ValueError(
                    f"{what}={n} needs 2*kappa*({what}+1) = {2 * k * (n + 1)} <= L={L} (kappa={k})"
                )
        elif 2 * k * self.num_passes + 2 * k > L:
            raise ValueError(
                f"context 2*kappa*num_passes = {2 * k * self.num_passes} plus {2 * k} query slots "
                f"exceeds L={L} (kappa={k}, num_passes={self.num_passes})"
            )
        return self

    def unread(self) -> list[tuple[str, str]]:
        # the kept 2*kappa+1 tokens are the facts and the first query slot, which the kappa gaps
        # over kappa slots always fill: no empty position is left to fill
        return ([("random_non_queries", "with reduce_to_ar (its 2*kappa+1 tokens are the facts "
                  "and one query: no empty position)")] if self.reduce_to_ar else [])


def _interleave(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(..., n) keys, (..., n) values -> (..., 2n) as k1 v1 k2 v2 ..."""
    return torch.stack([keys, values], dim=-1).flatten(-2)


def _weighted_gaps(k: torch.Tensor, space: int, count: int, power_a: float) -> torch.Tensor:
    """``count`` distinct slots from range(space), P(i) ~ (i+1)^(a-1), per key: (...,) -> (..., count).

    Gumbel-top-k: the top-``count`` of ``log w_i + G_i`` (G_i i.i.d. standard Gumbel) is a sample
    without replacement with successive-sampling probabilities ``w_i / sum(remaining w)``.
    """
    u = (rng.bits(k, space).to(torch.float64) + 0.5) * (1.0 / 4294967296.0)  # (0, 1)
    scores = -torch.log(-torch.log(u))
    if power_a != 1.0:
        i = torch.arange(1, space + 1, dtype=torch.float64, device=k.device)
        scores = scores + (power_a - 1.0) * torch.log(i)
    return torch.topk(scores, count, dim=-1).indices


class MQAR(Task):
    """Multi-query associative recall in zoology's layout (key-value pairs, then queries)."""

    Config = MQARConfig
    name = "mqar"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        seq_len = 2 * c.kappa + 1 if c.reduce_to_ar else c.L
        # every key is asked once in each query section (AR: the one query kept): the memory
        # estimate counted the logits of all L positions, ~4x a koren2026 MQAR step's (10 of 128)
        asked = 1 if c.reduce_to_ar else c.kappa * c.query_repeats
        return TaskInfo(vocab_size=c.vocab, n_classes=c.vocab, seq_len=seq_len,
                        fewest_supervised=asked, most_supervised=asked)

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        V, L, kappa = c.vocab, c.L, c.kappa
        half = V // 2
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        E, B = k.shape

        keys = rng.sample_without_replacement(rng.combine(k, _S_KEYS), half - 1, kappa) + 1
        values = rng.sample_without_replacement(rng.combine(k, _S_VALUES), V - half, kappa) + half
        canonical = _interleave(keys, values)  # (E, B, 2 kappa)

        if c.key_repeats > 1:
            chunk = torch.arange(c.key_repeats - 1, dtype=torch.int64, device=k.device)
            kp = rng.combine(rng.combine(k, _S_EXTRA_PERM)[..., None], chunk)  # (E, B, N_k - 1)
            perm = rng.permutation_keys(kp, kappa)  # (E, B, N_k - 1, kappa)
            extra_keys = torch.gather(keys[:, :, None, :].expand_as(perm), -1, perm)
            kv = rng.combine(rng.combine(k, _S_EXTRA_VALUES)[..., None], chunk)
            extra_values = rng.sample_without_replacement(kv, V - half, kappa) + half
            extra = _interleave(extra_keys, extra_values).flatten(-2)  # (E, B, 2 kappa (N_k - 1))
            context = torch.cat([extra, canonical], dim=-1)
        else:
            context = canonical.repeat(1, 1, c.num_passes)
        ctx = context.shape[-1]

        n_sections = c.query_repeats
        section = (L - ctx) // n_sections
        space = section // 2
        ks = rng.combine(
            rng.combine(k, _S_GAPS)[..., None], torch.arange(n_sections, dtype=torch.int64, device=k.device)
        )  # (E, B, N_q)
        gaps = _weighted_gaps(ks, space, kappa, c.power_a)  # (E, B, N_q, kappa)
        start = ctx + section * torch.arange(n_sections, dtype=torch.int64, device=k.device)
        pos = (start[:, None] + 2 * gaps).flatten(-2)  # (E, B, N_q * kappa)

        x = torch.zeros(E, B, L, dtype=torch.int64, device=k.device)
        x[..., :ctx] = context
        x.scatter_(-1, pos, keys.repeat(1, 1, n_sections))
        y = torch.full_like(x, IGNORE)
        y.scatter_(-1, pos, values.repeat(1, 1, n_sections))

        if c.random_non_queries:
            empty = torch.ones_like(x, dtype=torch.bool)
            empty[..., :ctx] = False
            empty.scatter_(-1, pos, False)
            fill = rng.randint(rng.combine(k, _S_FILL), L, 0, V)
            x = torch.where(empty, fill, x)

        if c.reduce_to_ar:
            x, y = x[..., : 2 * kappa + 1].contiguous(), y[..., : 2 * kappa + 1].contiguous()
        return Batch(x=x, y=y)
