"""Library (data): LRA Text, IMDB sentiment at character (S4) or byte (LRA) level; char vocabularies.

Source: the ``aclImdb_v1`` archive (``<root>/imdb/aclImdb/{train,test}/{pos,neg}/*.txt``), 25k train
and 25k test reviews, labels neg = 0 / pos = 1. The ``unsup`` reviews are not used.

- ``level="char"`` (S4): each review is ``list(text)`` (Unicode characters); the vocabulary is
  ``<pad>, <unk>, <eos>`` plus every character seen at least ``min_freq`` (15) times in the
  training reviews, most frequent first (S4 reports about 135 symbols); unseen characters map to
  ``<unk>``.
- ``level="byte"`` (LRA's ``ByteTextEncoder``): UTF-8 bytes; vocabulary ``<pad>, <eos>`` + 256
  bytes.

Sequences are truncated so that, with the ``<eos>`` appended, they have at most ``max_len`` (4096)
tokens. As in LRA and S4, the validation split is the test set unless ``val_split="train"``.
Each split's reviews are in one seeded order (``ORDER_SEED``), negative and positive mixed: a run
reads the first rows of a split (``train.train_size``, ``val_size``, ``test_size``), and the
archive's order (every negative review first) made those reviews of one class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .image import DamagedSource

IMDB_DIRNAME = "aclImdb"
MAX_REVIEW_BYTES = 1 << 20  # the longest aclImdb review has about 14 kB
MAX_LINE_BYTES = 1 << 24  # a TSV line (ListOps: one expression; AAN: two papers' text)
N_CLASSES = 2
PREPARE_VERSION = 2  # 2: each split's reviews in a seeded order (the archive's, every negative
#   review before the positive ones, made the first rows of a split, which train_size, val_size
#   and test_size take, reviews of one class)
ORDER_SEED = 20  # the one seeded order of each split's reviews (not a setting: split_seed draws
#                 the validation reviews of val_split train from the training reviews so ordered)
PAD, UNK, EOS = 0, 1, 2  # char level
SPECIALS = ("<pad>", "<unk>", "<eos>")


@dataclass(frozen=True)
class TextConfig:
    """Preprocessing for IMDB. Every field is part of the cache key."""

    level: str = "char"  # "char" (S4) or "byte" (LRA)
    max_len: int = 4096  # including <eos>
    min_freq: int = 15  # char level only
    append_eos: bool = True
    val_split: str = "test"  # "test": val = test set (LRA / S4); "train": seeded part of train
    val_fraction: float = 0.1  # val_split="train" only
    split_seed: int = 42


# ----------------------------------------------------------------------------------- char vocab


def build_char_vocab(texts: Iterable[str], min_freq: int = 1) -> tuple[str, ...]:
    """``<pad>, <unk>, <eos>`` + characters with count >= min_freq, most frequent first.

    >>> build_char_vocab(["abca", "b"], min_freq=2)
    ('<pad>', '<unk>', '<eos>', 'a', 'b')
    """
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(t)
    chars = sorted((c for c, n in counts.items() if n >= min_freq), key=lambda c: (-counts[c], c))
    return SPECIALS + tuple(chars)


def char_lut(vocab: Sequence[str]) -> np.ndarray:
    """Code point -> token id table (unknown code points -> <unk>)."""
    lut = np.full(0x110000, UNK, dtype=np.int32)
    for i, c in enumerate(vocab):
        if c not in SPECIALS:
            lut[ord(c)] = i
    return lut


def encode_chars(text: str, lut: np.ndarray, max_len: int, append_eos: bool) -> np.ndarray:
    """Token ids (int32) of ``text``, truncated so the total (with <eos>) is <= max_len."""
    keep = max_len - 1 if append_eos else max_len
    cps = np.frombuffer(text[:keep].encode("utf-32-le"), dtype="<u4")  # (not all of a long text)
    ids = lut[cps]
    return np.append(ids, np.int32(EOS)) if append_eos else ids


def encode_bytes(text: str, max_len: int, append_eos: bool) -> np.ndarray:
    """Byte-level ids: <pad>=0, <eos>=1, byte b -> b + 2."""
    keep = max_len - 1 if append_eos else max_len
    # (the first `keep` characters hold at least `keep` bytes: not all of a long text)
    raw = np.frombuffer(text[:keep].encode("utf-8")[:keep], dtype=np.uint8).astype(np.int32) + 2
    ids = raw
    return np.append(ids, np.int32(1)) if append_eos else ids


BYTE_VOCAB: tuple[str, ...] = ("<pad>", "<eos>", *(f"<0x{b:02x}>" for b in range(256)))


def token_dtype(vocab_size: int) -> type:
    return np.uint8 if vocab_size <= 256 else np.int16 if vocab_size <= 32767 else np.int32


PAD_CHECKED_BYTES = 1 << 28  # a padded array past this is checked against the memory available


def pad_ragged(seqs: Sequence[np.ndarray], dtype: type,
               row: Callable[[int], str] = lambda i: f"row {i + 1}") -> tuple[np.ndarray, np.ndarray]:
    """Right-pad with 0 to the longest sequence: (N, L) array and (N,) int32 lengths. A padded
    array larger than the memory available now raises DamagedSource naming the longest
    sequence (``row(i)`` names row i: its file and line) where rows padded to the next longest
    would fit (one line of millions of tokens under a large max_len padded every row to it,
    768 GB for ListOps' 96,000 rows, written into the cache until the disk was full), else
    DataUnavailable: the data are whole, the memory is short."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int32, count=len(seqs))
    width = int(lengths.max()) if len(seqs) else 0
    need = len(seqs) * width * np.dtype(dtype).itemsize
    if need > PAD_CHECKED_BYTES:
        from .. import util

        avail = util.memory_available()
        if avail is not None and need > avail:
            i = int(lengths.argmax())
            # the longest row alone is the odd one where rows padded to the next longest fit
            # (the median was compared: IMDB's reviews, a median of ~1,000 bytes under a
            # max_len of 4,096 that thousands reach, were 'damaged' on a busy machine)
            nxt = len(seqs) - 2
            typical = len(seqs) * (int(np.partition(lengths, nxt)[nxt]) if nxt >= 0 else width) \
                * np.dtype(dtype).itemsize
            if typical >= avail:  # the other rows do not fit either: the data are whole, the
                # memory is short now (real AAN's 147,086 rows of 4,000 tokens, 588 MB, were
                # 'damaged', to download again with --force, on a busy machine)
                raise util.DataUnavailable(
                    f"{row(i)}, the longest, and the {len(seqs):,} row{'s' * (len(seqs) != 1)} "
                    f"padded to its {width:,} tokens take {need:,} bytes, more than the "
                    f"{avail:,} bytes of memory available now (other processes hold the rest): "
                    "run it again when memory is free, or with task.max_len below it")
            raise DamagedSource(
                f"{row(i)}: a sequence of {width:,} tokens, to which every one of the "
                f"{len(seqs):,} rows is padded: {need:,} bytes, more than the {avail:,} bytes "
                "of memory available (task.max_len below it cuts it)")
    out = np.zeros((len(seqs), width), dtype=dtype)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out, lengths


# ----------------------------------------------------------------------------------------- IMDB


def imdb_files(directory: Path) -> dict[str, list[tuple[Path, int]]]:
    """{"train": [(file, label)], "test": [...]}, neg (0) then pos (1), files sorted by name."""
    out = {}
    for split in ("train", "test"):
        items = []
        for label, cls in ((0, "neg"), (1, "pos")):
            d = directory / split / cls
            if not d.is_dir():
                raise FileNotFoundError(f"missing {d}")
            items += [(f, label) for f in sorted(d.glob("*.txt"))]
        out[split] = items
    return out


def read_review(path: Path) -> str:
    """The UTF-8 text of one review file (universal newlines, as ``Path.read_text``). A file that
    is not UTF-8 or larger than ``MAX_REVIEW_BYTES`` raises ValueError naming it (a byte 0xff
    failed with the bare message 'utf-8'; a review of 500 MB took gigabytes and minutes)."""
    from ..util import NotSmallFile, read_small

    try:
        raw = read_small(path, MAX_REVIEW_BYTES, follow_links=True)
    except NotSmallFile as err:
        raise DamagedSource(f"{path}: not a review file ({err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DamagedSource(f"{path}: not UTF-8 text (byte {raw[err.start]:#04x} at offset "
                         f"{err.start:,})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def utf8_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line without its line ending)`` of a UTF-8 text file (lines end at
    ``\\n``; a ``\\r`` before it and a byte order mark opening the file are dropped). A line
    that is not UTF-8 or longer than ``MAX_LINE_BYTES`` raises ValueError naming the file and
    line (the TSV readers said only 'utf-8'; a BOM made the first AAN pair look like a header,
    skipped without a word)."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # one line of 500 MB
                # took gigabytes and minutes
                raise DamagedSource(f"{path}:{lineno}: a line longer than {MAX_LINE_BYTES:,} bytes "
                                 "(not a text file of this dataset?)")
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DamagedSource(f"{path}:{lineno}: not UTF-8 text (byte {raw[err.start]:#04x} "
                                 f"at column {err.start + 1:,})") from None
            yield lineno, line.rstrip("\r\n") if line.endswith("\n") else line


def imdb_present(directory: Path) -> bool:
    return all((directory / s / c).is_dir() for s in ("train", "test") for c in ("neg", "pos"))


def prepare_imdb(
    directory: Path, cfg: TextConfig
) -> tuple[dict[str, dict[str, np.ndarray]], tuple[str, ...]]:
    """Tokenise the IMDB reviews: per split x (N, L), lengths, labels; plus the vocabulary."""
    if cfg.level not in ("char", "byte"):
        raise ValueError(f"level must be 'char' or 'byte', got {cfg.level!r}")
    if cfg.val_split not in ("test", "train"):
        raise ValueError(f"val_split must be 'test' or 'train', got {cfg.val_split!r}")
    files = imdb_files(directory)
    for split, items in files.items():
        for label, cls in ((0, "neg"), (1, "pos")):
            if not any(y == label for _, y in items):  # an extraction cut short: a split of
                # one class (its accuracy that class's share) or of none, without a word
                raise DamagedSource(f"{directory / split / cls}: no review (*.txt) in it (the "
                                    "archive has 12,500)")
    # a split's rows in a seeded order: the archive lists every negative review before the
    # positive ones, and a run reads the first rows of a split (train.train_size of the training
    # split, val_size / test_size of the others), so `train_size: 5000` trained on negative
    # reviews alone and test_size 10,000 scored them alone, an accuracy of one class
    for i, split in enumerate(("train", "test")):
        order = np.random.default_rng([ORDER_SEED, i]).permutation(len(files[split]))
        files[split] = [files[split][j] for j in order]
    texts = {s: [read_review(f) for f, _ in items] for s, items in files.items()}
    labels = {s: np.array([y for _, y in items], dtype=np.int64) for s, items in files.items()}
    split_idx: dict[str, tuple[str, np.ndarray]] = {
        "train": ("train", np.arange(len(texts["train"]))),
        "test": ("test", np.arange(len(texts["test"]))),
    }
    if cfg.val_split == "train":
        from .image import split_train_val

        tr, va = split_train_val(len(texts["train"]), cfg.val_fraction, cfg.split_seed)
        split_idx = {"train": ("train", tr), "val": ("train", va), "test": split_idx["test"]}
    else:
        split_idx["val"] = split_idx["test"]
    train_texts = [texts["train"][i] for i in split_idx["train"][1]]
    if cfg.level == "char":
        vocab = build_char_vocab(train_texts, cfg.min_freq)
        lut = char_lut(vocab)

        def enc(t: str) -> np.ndarray:
            return encode_chars(t, lut, cfg.max_len, cfg.append_eos)
    else:
        vocab = BYTE_VOCAB

        def enc(t: str) -> np.ndarray:
            return encode_bytes(t, cfg.max_len, cfg.append_eos)

    dtype = token_dtype(len(vocab))
    encoded = {s: [enc(t) for t in texts[s]] for s in ("train", "test")}
    out = {}
    for split in ("train", "val", "test"):
        src, idx = split_idx[split]
        x, lengths = pad_ragged([encoded[src][i] for i in idx], dtype,
                                lambda i, src=src, idx=idx: str(files[src][idx[i]][0]))
        out[split] = {"x": x, "lengths": lengths, "labels": labels[src][idx]}
    return out, vocab
