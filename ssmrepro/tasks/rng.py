"""Library (tasks): counter-based random numbers, each a pure function of (seed, stream, counter).

Why not ``torch.Generator``: a pack trains E runs at once, and each run must see exactly the data it
would see when trained alone. With stateful generators that needs E generator calls per step (slow,
and impossible inside a CUDA graph). Here a sample is ``hash(seed, split, sample_index, draw)``, so
one vectorised call produces the (E, B) batch of every member on any device, and a member's data does
not depend on which pack it is in.

The mixing function is the 32-bit "lowbias32" integer hash (two multiply-xorshift rounds), evaluated
in int64 with the products split into 16-bit halves so nothing overflows. Values are uint32 stored in
int64 tensors.
"""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_GOLDEN = 0x9E3779B9


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for x in [0, 2**32) without int64 overflow."""
    lo = x & 0xFFFF
    hi = x >> 16
    return (lo * c + (((hi * c) & 0xFFFF) << 16)) & MASK32


def hash32_ref(x: torch.Tensor) -> torch.Tensor:
    """Bijective 32-bit mix of an int64 tensor holding values in [0, 2**32) (the reference:
    one new tensor per operation; :func:`hash32` computes the same in place)."""
    x = x & MASK32
    x = x ^ (x >> 16)
    x = _mul32(x, _M1)
    x = x ^ (x >> 15)
    x = _mul32(x, _M2)
    x = x ^ (x >> 16)
    return x


def _mul32_(x: torch.Tensor, c: int) -> torch.Tensor:
    """x <- (x * c) mod 2**32 in place (x in [0, 2**32)), the arithmetic of :func:`_mul32`."""
    hi = x >> 16
    x.bitwise_and_(0xFFFF).mul_(c)
    hi.mul_(c).bitwise_and_(0xFFFF).bitwise_left_shift_(16)
    return x.add_(hi).bitwise_and_(MASK32)


def hash32(x: torch.Tensor) -> torch.Tensor:
    """Bijective 32-bit mix of an int64 tensor holding values in [0, 2**32): :func:`hash32_ref`
    bit for bit, on one new tensor updated in place (a pack's (E, B, T) draws: 0.28 -> 0.22 ms
    per call for a KEEP n-TH pack of 64; tests/test_rng_tasks.py)."""
    x = x & MASK32
    x ^= x >> 16
    _mul32_(x, _M1)
    x ^= x >> 15
    _mul32_(x, _M2)
    x ^= x >> 16
    return x


def combine(h: torch.Tensor, v: torch.Tensor | int) -> torch.Tensor:
    """Fold one more component ``v`` (int or int64 tensor, any size) into the key ``h``."""
    if isinstance(v, int):
        v = torch.tensor(v, dtype=torch.int64, device=h.device)
    lo = v & MASK32
    hi = (v >> 32) & MASK32
    h = hash32(h ^ hash32(lo + _GOLDEN))
    return hash32(h ^ hash32(hi + 2 * _GOLDEN))


def key(seeds: torch.Tensor, *parts: torch.Tensor | int) -> torch.Tensor:
    """Key tensor from per-member seeds (E,) and further components broadcast against it."""
    h = hash32(seeds.to(torch.int64) ^ 0x5BD1E995)
    for p in parts:
        h = combine(h, p)
    return h


def bits(k: torch.Tensor, n: int) -> torch.Tensor:
    """n independent uint32 draws per key: (...,) -> (..., n) int64 in [0, 2**32)."""
    return _draws(k, 0, n)


def _draws(k: torch.Tensor, start: int, n: int) -> torch.Tensor:
    """``bits(k, start + n)[..., start:]``, without the draws before ``start``."""
    ctr = torch.arange(start, start + n, dtype=torch.int64, device=k.device)
    return hash32(combine(k.unsqueeze(-1), ctr) + 0x27D4EB2F)


def uniform(k: torch.Tensor, n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """n uniforms in [0, 1) per key: (...,) -> (..., n)."""
    return bits(k, n).to(dtype) * (1.0 / 4294967296.0)


def randint(k: torch.Tensor, n: int, low: int, high: int) -> torch.Tensor:
    """n integers uniform in [low, high) per key: (...,) -> (..., n) int64.

    A span of 2**31 or more (a text corpus of gigabytes) draws 62 bits per integer (two 32-bit
    draws; modulo bias below span / 2**62): one 32-bit draw scaled up reached only 2**32 values,
    so in a 24 GB corpus about 5 of every 6 byte offsets could never start a window."""
    span = high - low
    if span <= 0:
        raise ValueError(f"empty range [{low}, {high})")
    if span < (1 << 31):
        return low + (bits(k, n) * span >> 32)
    if span > (1 << 62):
        raise ValueError(f"range [{low}, {high}) spans more than 2**62 integers")
    b = bits(k, 2 * n)
    return low + (((b[..., n:] >> 2) << 32) | b[..., :n]) % span


def permutation_keys(k: torch.Tensor, n: int) -> torch.Tensor:
    """Random permutation of range(n) per key: (...,) -> (..., n), via argsort of random bits.

    The n draws of one key never tie (n <= 2**32), so the permutation does not depend on how a
    sort orders equal values (CPU and GPU sorts, stable or not, agree): :func:`bits` maps the
    counter 0..n-1 through bijections of [0, 2**32) only (``combine`` xors and ``hash32``
    mixes a counter's low word; its high word is 0 for every counter), so distinct counters give
    distinct draws; pinned by tests/test_hostile.py."""
    return torch.argsort(bits(k, n), dim=-1)


# draws that ``sample_without_replacement`` holds at once over all its keys (at least ``count``
# a key): a pool past it is read in chunks
SAMPLE_CHUNK = 1 << 20


def sample_without_replacement(k: torch.Tensor, pool: int, count: int) -> torch.Tensor:
    """``count`` distinct values from range(pool) per key, in random order: (...,) -> (..., count).

    ``permutation_keys(k, pool)[..., :count]``: the ``count`` smallest draws of each key, in
    order. A large pool is read in chunks, keeping the smallest draws so far (the draws never
    tie, so the same values in the same order): permuting all of it held a pool of draws and
    their sort per key, MQAR's keys and values at vocab 10**6 about 13 MB a sequence, 53 GB for
    a pack of 16 at batch 256 that no memory estimate counted (sampling holds memory in
    proportion to its batch and length)."""
    if count > pool:
        raise ValueError(f"cannot draw {count} distinct values from {pool}")
    step = max(count, SAMPLE_CHUNK // max(1, k.numel()))
    if pool <= step:
        return permutation_keys(k, pool)[..., :count]
    least = at = None
    for start in range(0, pool, step):
        n = min(step, pool - start)
        draws = _draws(k, start, n)
        index = torch.arange(start, start + n, dtype=torch.int64, device=k.device)
        index = index.expand_as(draws)
        if least is not None:
            draws, index = torch.cat([least, draws], dim=-1), torch.cat([at, index], dim=-1)
        least, pick = torch.topk(draws, count, dim=-1, largest=False, sorted=True)
        at = index.gather(-1, pick)
    return at
