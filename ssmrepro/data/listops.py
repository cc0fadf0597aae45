"""Library (data): ListOps, the LRA generator (same grammar and lengths), tokenizer, evaluator, loader.

Grammar (Nangia & Bowman 2018, as configured by LRA ``lra_benchmarks/data/listops.py``):

- a node below ``max_depth`` is an operator with probability ``op_prob = 0.25`` (a digit 0-9 with
  probability 0.75); at ``max_depth`` it is always a digit;
- an operator node picks one of ``[MIN [MAX [MED [SM`` uniformly and ``k ~ U{2..max_args}``
  children, and is closed by ``]``;
- the label is the value of the root: MIN, MAX, MED = ``floor(median)``, SM = sum mod 10;
- a tree's length counts the operator, digit and ``]`` tokens (not parentheses); LRA keeps a tree
  iff ``min_length < length < max_length`` (500 and 2000), de-duplicates, and splits 96k/2k/2k.

We shuffle with an explicit RNG instead of relying on Python's set order, so the split is
reproducible. The on-disk format is LRA's: a TSV with header ``Source\\tTarget`` whose sources wrap
every tuple level in parentheses, e.g. ``( ( ( [MAX 1 ) 7 ) ] )``.

Token ids are fixed in code (never learned from data)::

    0 <pad>   1 <eos>   2..11 digits 0-9   12 [MIN   13 [MAX   14 [MED   15 [SM   16 X (= "]")
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..util import atomic_write_text
from ._workers import iter_chunks
from .image import DamagedSource
from .text import pad_ragged

OPS = ("[MIN", "[MAX", "[MED", "[SM")
VOCAB: tuple[str, ...] = ("<pad>", "<eos>", *"0123456789", *OPS, "X")
PAD, EOS, DIGIT0, OP0, CLOSE = 0, 1, 2, 12, 16
VOCAB_SIZE = len(VOCAB)  # 17
TOKEN_TO_ID = {t: i for i, t in enumerate(VOCAB)}
TOKEN_TO_ID["]"] = CLOSE
N_CLASSES = 10
SPLIT_FILES = {"train": "basic_train.tsv", "val": "basic_val.tsv", "test": "basic_test.tsv"}
GENERATOR_VERSION = 1


# --------------------------------------------------------------------------- tokenizer / evaluator


_DROP_PARENS = str.maketrans({"(": None, ")": None, "]": "X"})


def tokenize_listops(source: str) -> list[str]:
    """LRA/S4 tokenizer: ``]`` -> ``X``, drop ``(`` and ``)``, split on whitespace.

    >>> tokenize_listops("( ( ( [MAX 1 ) 7 ) ] )")
    ['[MAX', '1', '7', 'X']
    """
    return source.translate(_DROP_PARENS).split()


def _apply(op: int, vals: list[int]) -> int:
    # op: 0 MIN, 1 MAX, 2 MED, 3 SM
    if op == 0:
        return min(vals)
    if op == 1:
        return max(vals)
    if op == 2:
        s = sorted(vals)
        n = len(s)
        # int(np.median(vals)): the mean of the two middle values, truncated, for even n
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2
    return sum(vals) % 10


def listops_value(expr: str | Sequence[str]) -> int:
    """Evaluate a ListOps expression (LRA string with or without parentheses, or a token list).

    >>> listops_value("[MED 1 2 3 4 ]"), listops_value("[SM 9 9 ]")
    (2, 8)
    >>> listops_value("( ( ( [MAX 1 ) ( ( ( [MIN 2 ) 3 ) ] ) ) ] )")
    2
    """
    toks = tokenize_listops(expr) if isinstance(expr, str) else list(expr)
    ids = bytearray()
    for tok in toks:
        i = TOKEN_TO_ID.get(tok, PAD) if isinstance(tok, str) else PAD
        if i < DIGIT0:  # (<pad>, <eos>)
            raise ValueError(f"unknown ListOps token {tok!r}")
        ids.append(i)
    try:
        return ids_value(bytes(ids))
    except ValueError as err:
        raise ValueError(f"{err} in {expr!r}") from None


def ids_value(ids: bytes | np.ndarray) -> int:
    """The value of a ListOps expression of token ids (``VOCAB``, no <eos>); ValueError saying
    how the ids are no expression (unbalanced, an operator without arguments, two of them)."""
    stack: list[tuple[int, list[int]]] = []
    result: int | None = None
    for t in ids.tobytes() if isinstance(ids, np.ndarray) else ids:
        if t == CLOSE:
            if not stack:
                raise ValueError("unbalanced ']'")
            op, args = stack.pop()
            if not args:
                raise ValueError("operator without arguments")
            v = _apply(op, args)
        elif OP0 <= t < CLOSE:
            stack.append((t - OP0, []))
            continue
        elif DIGIT0 <= t < OP0:
            v = t - DIGIT0
        else:
            raise ValueError(f"token id {t} cannot appear in a ListOps expression")
        if stack:
            stack[-1][1].append(v)
        elif result is None:
            result = v
        else:
            raise ValueError("more than one top-level expression")
    if not stack and result is None:
        raise ValueError("no token")
    if stack or result is None:
        raise ValueError("incomplete expression")
    return result


def tokens_to_ids(tokens: Iterable[str]) -> list[int]:
    return [TOKEN_TO_ID[t] for t in tokens]


def ids_to_tokens(ids: Iterable[int]) -> list[str]:
    return [VOCAB[int(i)] for i in ids]


def to_lra_string(ids: Sequence[int] | bytes) -> str:
    """Serialise token ids (no pad/eos) to LRA's parenthesised format.

    An operator with k arguments is preceded by k+1 opening parentheses; each argument and the
    closing ``]`` are followed by ``)``:

    >>> to_lra_string(tokens_to_ids(["[MAX", "1", "7", "2", "X"]))
    '( ( ( ( [MAX 1 ) 7 ) 2 ) ] )'
    """
    ids = list(ids)
    nargs: dict[int, int] = {}
    stack: list[list[int]] = []  # [position, n_args]
    for i, t in enumerate(ids):
        if OP0 <= t < OP0 + 4:
            if stack:
                stack[-1][1] += 1
            stack.append([i, 0])
        elif t == CLOSE:
            pos, k = stack.pop()
            nargs[pos] = k
        elif DIGIT0 <= t < DIGIT0 + 10:
            if stack:
                stack[-1][1] += 1
        else:
            raise ValueError(f"token id {t} cannot appear in a ListOps expression")
    if stack:
        raise ValueError("unbalanced expression")
    parts: list[str] = []
    depth = 0
    for i, t in enumerate(ids):
        if OP0 <= t < OP0 + 4:
            parts.append("( " * (nargs[i] + 1) + OPS[t - OP0])
            depth += 1
        elif t == CLOSE:
            depth -= 1
            parts.append("] )" if depth == 0 else "] ) )")
        else:
            parts.append(str(t - DIGIT0) if depth == 0 else f"{t - DIGIT0} )")
    return " ".join(parts)


# ------------------------------------------------------------------------------------- generator


class WindowTooNarrow(ValueError):
    """The length window (with max_depth / max_args) holds too few trees for the examples asked
    for: the options cannot be met (``data generate`` exits 2; it said 'runs failed', exit 1)."""


class _TooLong(Exception):
    pass


def sample_tree(
    rng: random.Random,
    max_depth: int = 10,
    max_args: int = 10,
    op_prob: float = 0.25,
    length_limit: int | None = None,
) -> tuple[bytearray, int] | None:
    """Sample one ListOps tree as (token ids, value); None if it reached ``length_limit`` tokens.

    Aborting over-long trees early saves time and does not change the distribution of the trees
    that are kept (they are rejected by the length filter anyway).
    """
    out = bytearray()
    rand, randint = rng.random, rng.randint
    limit = length_limit if length_limit is not None else 1 << 62

    def node(depth: int) -> int:
        if depth < max_depth and rand() <= op_prob:
            k = randint(2, max_args)
            op = randint(0, 3)
            out.append(OP0 + op)
            vals = [node(depth + 1) for _ in range(k)]
            out.append(CLOSE)
            if len(out) >= limit:
                raise _TooLong
            return _apply(op, vals)
        v = randint(0, 9)
        out.append(DIGIT0 + v)
        return v

    try:
        value = node(1)
    except _TooLong:
        return None
    return out, value


def _sumset(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """{x + y : x in a, y in b} of two 0/1 masks over 0..len-1, cut at len (an FFT product)."""
    n = len(a)
    size = 1 << (2 * n - 1).bit_length()
    prod = np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n]
    return (prod > 0.5).astype(np.float64)  # counts of ways are whole numbers up to n


def count_trees(min_length: int, max_length: int, max_depth: int = 10, max_args: int = 10,
                cap: int = 1 << 62) -> int:
    """How many distinct trees (token sequences) the grammar has with
    ``min_length < length < max_length``, or ``cap`` if at least that many.

    A tree of length L has at least (L + 2) / 3 digits (each operator has two or more
    arguments), so a length that any tree has holds at least 10**ceil((L + 2) / 3) trees: from
    the first length ``lc`` where that reaches ``cap``, it is enough to know whether the window
    has a length some tree has (0/1 masks of lengths, depth by depth from the deepest); below
    ``lc`` the trees are counted exactly (counts per length, depth by depth). Milliseconds for
    the LRA setting; a second or two at the options' largest."""
    lo, hi = min_length + 1, max_length - 1
    if hi < lo or cap <= 0:
        return 0
    lc = 1
    while 10 ** (-(-(lc + 2) // 3)) < cap:
        lc += 1
    if hi >= max(lo, lc):  # lengths from lc on: is one of the window's a tree's length?
        m = hi + 1
        one = np.zeros(m)
        one[1] = 1.0
        mask = one.copy()  # the lengths of a tree whose root is at max_depth: a digit
        for _ in range(max_depth - 1):
            opt = mask.copy()
            opt[0] = 1.0  # up to max_args - 2 more arguments beside the first two
            more = np.zeros(m)
            more[0] = 1.0
            e = max_args - 2
            while e:
                if e & 1:
                    more = _sumset(more, opt)
                e >>= 1
                if e:
                    opt = _sumset(opt, opt)
            kids = _sumset(_sumset(mask, mask), more)
            new = one.copy()
            new[2:] = np.maximum(new[2:], kids[:-2])  # an operator and its ']' around them
            if np.array_equal(new, mask):
                break  # deeper trees add no length up to the window's end
            mask = new
            if mask[max(lo, lc):].any():
                return cap  # (deeper trees only add lengths)
        if mask[max(lo, lc):].any():
            return cap
    top = min(hi, lc - 1)
    counts = [0] * (top + 1)
    if top >= 1:
        counts[1] = 10  # depth max_depth: a digit
    for _ in range(max_depth - 1):
        power, ops = counts, [0] * (top + 1)
        for _k in range(2, max_args + 1):
            nxt = [0] * (top + 1)
            for i, x in enumerate(power):
                if x:
                    for j in range(1, top + 1 - i):
                        if counts[j]:
                            nxt[i + j] = min(cap, nxt[i + j] + x * counts[j])
            if not any(nxt):
                break
            power = nxt
            ops = [min(cap, a + b) for a, b in zip(ops, nxt)]
        new = [0] * (top + 1)
        if top >= 1:
            new[1] = 10
        for length in range(2, top + 1):
            new[length] = min(cap, new[length] + 4 * ops[length - 2])
        if new == counts:
            break
        counts = new
    return min(cap, sum(counts[max(lo, 0):top + 1]))


def _chunk_seed(seed: int, chunk: int) -> int:
    h = hashlib.sha256(f"ssmrepro.listops:{seed}:{chunk}".encode()).digest()
    return int.from_bytes(h[:8], "little")


# the work a chunk may spend drawing its trees, in tokens (a third of a microsecond to a
# microsecond each; a tree's draw costs DRAW_COST more): DRAW_START plus DRAW_PER_TREE for each
# tree kept, and DRAW_BUDGET at most (seconds: the old limit of 612,000 tries a chunk, counted in
# work). LRA's window (500 < length < 2000) spends ~1,500 a tree kept, 400,000 a chunk; the
# narrow 1990 < length < 2000 ~1.3 million a tree (--n 20 takes 26 million; a chunk of 256 there
# is refused, as by the tries). Deterministic (tokens, not seconds), so the data of a setting
# that keeps its trees never depend on the machine.
DRAW_COST = 10  # (a try of a digit alone took ~10 times a token)
DRAW_START = 20_000_000
DRAW_PER_TREE = 2_000_000
DRAW_BUDGET = 60_000_000


def _chunk_trees(
    chunk: int,
    *,
    seed: int,
    n_accept: int,
    min_length: int,
    max_length: int,
    max_depth: int,
    max_args: int,
    op_prob: float,
) -> Iterator[tuple[bytes, int]]:
    """Chunk ``chunk``'s accepted trees one by one, as they are drawn (``_generate_chunk`` is
    their list): a consumer that needs only the first few stops drawing there."""
    rng = random.Random(_chunk_seed(seed, chunk))
    accepted = 0
    tries = 0
    work = 0  # tokens drawn (a tree cut at max_length counts max_length) and DRAW_COST a tree
    while accepted < n_accept:
        if work > min(DRAW_BUDGET, DRAW_START + DRAW_PER_TREE * accepted):  # the work, not
            # the tries: a try of 100,000 tokens (--max-depth 100 --max-args 100) took 27 ms,
            # and the 612,000 tries allowed 4.6 hours before this
            raise WindowTooNarrow(
                f"ListOps: almost no trees fall in {min_length} < length < {max_length} "
                f"(max_depth {max_depth}, max_args {max_args}): {accepted} kept of {tries:,} "
                f"trees drawn ({work:,} tokens' work); widen the length window or change "
                "max_depth / max_args"
            )
        tries += 1
        res = sample_tree(rng, max_depth, max_args, op_prob, length_limit=max_length)
        if res is None:
            work += max_length + DRAW_COST
            continue
        toks, value = res
        work += len(toks) + DRAW_COST
        if min_length < len(toks) < max_length:
            accepted += 1
            yield bytes(toks), value


def _generate_chunk(chunk: int, **kw) -> list[tuple[bytes, int]]:
    return list(_chunk_trees(chunk, **kw))


@dataclass
class ListOpsSplit:
    """Generated examples of one split: token ids without <eos> (bytes) and labels (N,)."""

    tokens: list[bytes]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.tokens)

    def lengths(self) -> np.ndarray:
        return np.fromiter((len(t) for t in self.tokens), dtype=np.int64, count=len(self.tokens))


def generate_listops(
    n_train: int,
    n_val: int,
    n_test: int,
    seed: int = 0,
    *,
    min_length: int = 500,
    max_length: int = 2000,
    max_depth: int = 10,
    max_args: int = 10,
    op_prob: float = 0.25,
    workers: int = 1,
    chunk_size: int = 256,
    progress: Callable[[int], None] | None = None,
    sampled: Callable[[list[tuple[bytes, int]]], None] | None = None,
) -> dict[str, ListOpsSplit]:
    """Generate unique ListOps trees with the LRA distribution and split them.

    Trees are drawn in chunks of ``chunk_size`` accepted trees; chunk ``c`` uses its own RNG seeded
    from ``(seed, c)``, so the result depends on ``seed`` (and the parameters) but not on
    ``workers``. Chunks are merged in order, duplicates dropped, then the pool is shuffled with an
    explicit RNG and cut into train / val / test.

    Example:
        ``generate_listops(2, 1, 1, seed=0, min_length=3, max_length=12)`` returns (LRA string
        -> tokens -> label)::

            train: ( ( ( ( ( [MIN ( ( ( [MAX 2 ) 8 ) ] ) ) 3 ) 3 ) 5 ) ] )
                                                            [MIN [MAX 2 8 X 3 3 5 X]        3
                   ( ( ( ( [MAX 4 ) 6 ) 0 ) ] )              [MAX 4 6 0 X]                  6
            val:   ( ( ( ( ( ( [MED 0 ) 1 ) 7 ) 5 ) 0 ) ] )  [MED 0 1 7 5 0 X]              1
            test:  [SM 5 [MAX 3 1 X 4 6 1 8 X]  (sum 5+3+4+6+1+8 = 27)                     7

    Args:
        n_train, n_val, n_test: examples per split (LRA: 96000, 2000, 2000).
        seed: master seed.
        min_length, max_length: keep a tree iff ``min_length < length < max_length``.
        max_depth, max_args, op_prob: grammar parameters (LRA: 10, 10, 0.25).
        workers: worker processes (``spawn``); 1 = in-process.
        progress: called with the number of unique examples collected so far.
        sampled: called once with the unique trees of the first chunk, where more are to come
            (`data generate` measures their length and the time they took: what the whole
            generation needs).

    Returns:
        ``{"train": ListOpsSplit, "val": ..., "test": ...}``.
    """
    if min(n_train, n_val, n_test) < 0:
        raise ValueError("split sizes must be >= 0")
    if max_length - min_length < 2:
        raise ValueError(f"empty length window: {min_length} < length < {max_length}")
    total = n_train + n_val + n_test
    have = count_trees(min_length, max_length, max_depth, max_args, cap=total)
    if have < total:  # up front: drawing found the window's last tree, then gave up after 51
        # chunks of repeats (a minute and more for 3 < length < 5 and --n 500)
        longest = 1  # tokens of the longest tree: digits at max_depth, max_args below each op
        for _ in range(max_depth - 1):
            longest = min(2 + max_args * longest, max_length)
        widen = ("widen the length window (a larger max_length or a smaller min_length)"
                 if longest >= max_length - 1 else
                 f"its trees have at most {longest} token{'s' * (longest > 1)}: a smaller "
                 "min_length or a larger max_depth or max_args")
        raise WindowTooNarrow(
            f"ListOps: {'no tree has' if not have else f'only {have} distinct trees have'} "
            f"{min_length} < length < {max_length} (max_depth {max_depth}, max_args "
            f"{max_args}) for {total} examples; {widen}"
            + (f", or ask for at most {have}" if have else "")
        )
    fn = functools.partial(
        _generate_chunk,
        seed=seed,
        n_accept=chunk_size,
        min_length=min_length,
        max_length=max_length,
        max_depth=max_depth,
        max_args=max_args,
        op_prob=op_prob,
    )
    seen: set[bytes] = set()
    pool: list[tuple[bytes, int]] = []
    stale = 0
    # in-process, a chunk is drawn only as far as its trees are used: the last chunk stopped
    # short where the pool is full (a chunk's first k trees are those of any longer draw, so
    # the data are the same); all chunk_size trees of the first chunk were drawn for --n 20, in
    # a narrow long window (1990 < length < 2000: minutes, ~7000 tries per tree kept)
    # (up to one chunk's worth of examples: in-process, where worker processes each drew a
    # whole chunk ahead, that much more in vain)
    lazy = functools.partial(_chunk_trees, **fn.keywords)
    with (closing(iter_chunks(fn, workers)) if workers > 1 and total > chunk_size
          else nullcontext(map(lazy, itertools.count()))) as chunks:
        for chunk in chunks:
            before = len(pool)
            for toks, value in chunk:
                if toks not in seen:
                    seen.add(toks)
                    pool.append((toks, value))
                    if len(pool) == total:
                        break
            if progress is not None:
                progress(len(pool))
            if len(pool) >= total:
                break
            if sampled is not None and before == 0:
                sampled(pool)
            stale = stale + 1 if len(pool) == before else 0
            if stale > 50:  # the window holds the trees (counted above): the rest are drawn
                # too rarely ('only 4399 unique trees exist' of 1 < length < 6's 4,400, for
                # --n 4400 at some seeds: the grammar draws a tree [OP d d d ] 1 in 9,000)
                held = count_trees(min_length, max_length, max_depth, max_args, cap=10**12)
                raise WindowTooNarrow(
                    f"ListOps: {min_length} < length < {max_length} (max_depth {max_depth}, "
                    f"max_args {max_args}) holds {f'{held:,}' if held < 10**12 else 'over 10**12'}"
                    f" distinct trees, but drawing found {len(pool)} of the {total} asked for: "
                    f"the {chunk_size * 51:,} trees drawn last were all repeats (the grammar "
                    f"draws some trees far less often than others); ask for at most {len(pool)} "
                    "examples, or widen the length window"
                )
    random.Random(_chunk_seed(seed, -1)).shuffle(pool)
    cuts = {
        "train": (0, n_train),
        "val": (n_train, n_train + n_val),
        "test": (n_train + n_val, total),
    }
    out = {}
    for split, (a, b) in cuts.items():
        part = pool[a:b]
        out[split] = ListOpsSplit(
            tokens=[t for t, _ in part], labels=np.array([v for _, v in part], dtype=np.int64)
        )
    return out


def write_listops_tsv(path: Path, split: ListOpsSplit) -> None:
    """Write one split in LRA's TSV format (header ``Source\\tTarget``), atomically."""
    lines = ["Source\tTarget"]
    lines += [f"{to_lra_string(t)}\t{int(y)}" for t, y in zip(split.tokens, split.labels)]
    atomic_write_text(path, "\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------- loader


@dataclass(frozen=True)
class ListOpsConfig:
    """Preprocessing for ListOps (S4 conventions). Every field is part of the cache key."""

    max_len: int = 2048  # total length including <eos>; longer examples are truncated
    append_eos: bool = True


PREPARE_VERSION = 2  # 2: a row of three or more tab-separated fields is refused (it was read as one source)
# what preparing refuses (``DatasetDef.checks``, not in the cache key: the runs stay valid);
# 2: a source token a, b, c or d (encode_listops read them as the operators it writes so)
# 3: counts the expressions max_len cuts (meta.json's "cut"; an entry without it was prepared
#    before: prepared again, so a cut is never unsaid)
# 4: a source that is no expression (empty, unbalanced, '2 3') or whose label is not its value
#    (a label edited from 3 to 7 was trained on as the answer)
CHECKS_VERSION = 4

# Fast path: map the 15 ListOps symbols to single characters, then look them up with numpy.
_COMPACT = (("[MIN", "a"), ("[MAX", "b"), ("[MED", "c"), ("[SM", "d"))
_LUT = np.full(256, 255, dtype=np.uint8)
for _d in range(10):
    _LUT[ord(str(_d))] = DIGIT0 + _d
for _i, (_, _c) in enumerate(_COMPACT):
    _LUT[ord(_c)] = OP0 + _i
_LUT[ord("X")] = CLOSE
_COMPACT_CHARS = "".join(c for _, c in _COMPACT)  # 'abcd'


def encode_listops(source: str) -> np.ndarray:
    """Token ids (uint8, no <eos>) of one LRA source string.

    >>> encode_listops("( ( [SM 9 ) 9 ) ] )").tolist()
    [15, 11, 11, 16]
    """
    s = source.translate(_DROP_PARENS)
    if any(c in s for c in _COMPACT_CHARS):  # a token 'a' .. 'd' (or holding one) is no
        # ListOps token: it read as the operator whose one-letter stand-in it is ('d' as [SM)
        # (str's `in`, not a set intersection: that doubled the encoder's time)
        bad = next(p for p in s.split() if any(c in p for c in _COMPACT_CHARS))
        raise ValueError(f"unknown ListOps token {bad!r}")
    for name, c in _COMPACT:
        s = s.replace(name, c)
    parts = s.split()
    compact = "".join(parts)
    if len(compact) != len(parts):  # name the token as the source writes it ('[MAX2', not 'b2')
        bad = source.translate(_DROP_PARENS).split()[next(i for i, p in enumerate(parts)
                                                           if len(p) != 1)]
        raise ValueError(f"unknown ListOps token {bad!r}")
    try:
        raw = np.frombuffer(compact.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError as err:
        raise ValueError(f"non-ASCII character in ListOps source: {err}") from None
    ids = _LUT[raw]
    if (ids == 255).any():
        bad = compact[int(np.argmax(ids == 255))]
        raise ValueError(f"unknown ListOps token {bad!r}")
    return ids


def read_listops_tsv(path: Path, linenos: list[int] | None = None) -> tuple[list[str], np.ndarray]:
    """Sources and labels of one LRA ListOps TSV (header ``Source\\tTarget``); ``linenos``, when
    given, gets each row's line number in the file (blank lines are skipped)."""
    from .text import utf8_lines

    sources, labels = [], []
    lines = utf8_lines(path)
    header = next(lines, (1, ""))[1].split("\t")
    if header[:2] != ["Source", "Target"]:
        raise DamagedSource(f"{path}: expected header 'Source<TAB>Target', got {header[:2]!r}")
    for lineno, line in lines:
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 2:  # a row '( [MAX 2 3 ) ]<TAB>3<TAB>4' was read as the source
            # '[MAX 2 3 3 ]' labelled 4 without a word (the tab is whitespace to the tokenizer)
            raise DamagedSource(f"{path}:{lineno}: expected 2 tab-separated fields (source, "
                             f"target), got {len(fields)}")
        src, tgt = fields
        try:
            labels.append(int(tgt))
        except ValueError:
            raise DamagedSource(f"{path}:{lineno}: malformed line {line[:80]!r}") from None
        sources.append(src)
        if linenos is not None:
            linenos.append(lineno)
    if not sources:  # a split file cut to its header loaded as a split of 0 rows: an
        # IndexError of sampling, 'use train.train_size <= the split size', named no file
        raise DamagedSource(f"{path}: no example after its header (a split holds at least one)")
    return sources, np.array(labels, dtype=np.int64)


def prepare_listops(directory: Path, cfg: ListOpsConfig,
                    cut: dict[str, int] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Tokenise ``basic_{train,val,test}.tsv`` in ``directory``: per split x (N, L) uint8 ids,
    lengths (N,) and labels (N,). ``cut``, when given, gets per split the number of
    expressions longer than ``max_len`` allows, cut to it (each loses its answer)."""
    if cfg.max_len < 2:
        raise ValueError("max_len must be >= 2")
    keep = cfg.max_len - 1 if cfg.append_eos else cfg.max_len
    out = {}
    for split, fname in SPLIT_FILES.items():
        path = directory / fname
        linenos: list[int] = []  # a row's own line (blank lines made the message name another)
        sources, labels = read_listops_tsv(path, linenos)
        seqs = []
        n_cut = 0
        for lineno, src, label in zip(linenos, sources, labels.tolist()):
            try:
                ids = encode_listops(src)
            except ValueError as err:
                raise DamagedSource(f"{path}:{lineno}: {err}") from None
            try:  # an empty source, '[MAX 2 3' or '2 3' was trained on under its label
                value = ids_value(ids)
            except ValueError as err:
                raise DamagedSource(f"{path}:{lineno}: not a ListOps expression ({err})") from None
            if value != label:  # (in range: 7 for [MAX 2 3 ]'s 3 was trained on as the answer)
                raise DamagedSource(f"{path}:{lineno}: label {label} is not the value of its "
                                    f"expression, {value}")
            n_cut += len(ids) > keep
            ids = ids[:keep]
            if cfg.append_eos:
                ids = np.append(ids, np.uint8(EOS))
            seqs.append(ids)
        x, lengths = pad_ragged(seqs, np.uint8,  # (refused past the memory available)
                                lambda i, path=path, at=linenos: f"{path}:{at[i]}")
        out[split] = {"x": x, "lengths": lengths, "labels": labels}
        if cut is not None:
            cut[split] = n_cut
    return out
