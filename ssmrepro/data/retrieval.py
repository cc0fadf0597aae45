"""Library (data): LRA Retrieval, AAN document-pair matching, character level, dual input.

Source: ``<root>/lra/tsv_data/new_aan_pairs.{train,eval,test}.tsv`` from the LRA release. Each
line is ``label \\t id1 \\t id2 \\t text1 \\t text2`` (no header; no quoting). Following S4,
each document is encoded separately as ``list(text)`` characters with ``<eos>`` appended and
truncated to ``max_len`` (4000) tokens including ``<eos>``; the vocabulary (``<pad>, <unk>,
<eos>`` + characters seen >= ``min_freq`` times in the training documents; S4 reports 98
symbols) is built on train.

The dataset is dual input: ``x`` / ``lengths`` hold document 1, ``x2`` / ``lengths2`` document 2.
A model typically encodes both with shared weights and classifies ``[u, v, u - v, u * v]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .image import DamagedSource
from .text import build_char_vocab, char_lut, encode_chars, pad_ragged, token_dtype, utf8_lines

TSV_DIRNAME = "tsv_data"
SPLIT_FILES = {
    "train": "new_aan_pairs.train.tsv",
    "val": "new_aan_pairs.eval.tsv",
    "test": "new_aan_pairs.test.tsv",
}
N_CLASSES = 2
PREPARE_VERSION = 2  # 2: a byte order mark no longer drops the first pair
# what preparing refuses (``DatasetDef.checks``): 2: a first line whose label is no number and
# no word ('1x') is refused (it was skipped as a header: a pair dropped without a word)
CHECKS_VERSION = 2


@dataclass(frozen=True)
class RetrievalConfig:
    """Preprocessing for AAN. Every field is part of the cache key."""

    max_len: int = 4000  # per document, including <eos>
    min_freq: int = 1
    append_eos: bool = True


def read_aan_tsv(path: Path) -> tuple[np.ndarray, list[str], list[str]]:
    """(labels (N,), texts1, texts2) of one AAN TSV. A first line whose label is a word (letters
    only) is taken as a header."""
    labels, t1, t2 = [], [], []
    for lineno, line in utf8_lines(path):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            raise DamagedSource(f"{path}:{lineno}: expected 5 tab-separated fields, got {len(fields)}")
        try:
            y = float(fields[0])
        except ValueError:
            if lineno == 1 and fields[0].strip().replace("_", "").isalpha():
                continue  # a header ('label'); a first pair's label '1x' was skipped as one
            raise DamagedSource(f"{path}:{lineno}: label {fields[0]!r} is not a number") from None
        if not (math.isfinite(y) and y == int(y)):  # 'inf' raised OverflowError (a traceback),
            # 0.5 was cut to class 0 without a word
            raise DamagedSource(f"{path}:{lineno}: label {fields[0]!r} is not a whole number")
        labels.append(int(y))
        t1.append(fields[3])
        t2.append(fields[4])
    if not labels:  # (an emptied file loaded as a split of 0 rows, as ListOps')
        raise DamagedSource(f"{path}: no example (a split holds at least one)")
    return np.array(labels, dtype=np.int64), t1, t2


def aan_files(directory: Path) -> list[Path]:
    return [directory / f for f in SPLIT_FILES.values()]


def prepare_aan(
    directory: Path, cfg: RetrievalConfig
) -> tuple[dict[str, dict[str, np.ndarray]], tuple[str, ...]]:
    """Per split x (N, L1), lengths, x2 (N, L2), lengths2, labels; plus the vocabulary."""
    raw = {s: read_aan_tsv(directory / f) for s, f in SPLIT_FILES.items()}
    vocab = build_char_vocab(raw["train"][1] + raw["train"][2], cfg.min_freq)
    lut = char_lut(vocab)
    dtype = token_dtype(len(vocab))
    out = {}
    for split, (labels, t1, t2) in raw.items():
        path = directory / SPLIT_FILES[split]
        x1, l1 = pad_ragged([encode_chars(t, lut, cfg.max_len, cfg.append_eos) for t in t1], dtype,
                            lambda i, path=path: f"{path}: example {i + 1}, its first text")
        x2, l2 = pad_ragged([encode_chars(t, lut, cfg.max_len, cfg.append_eos) for t in t2], dtype,
                            lambda i, path=path: f"{path}: example {i + 1}, its second text")
        out[split] = {"x": x1, "lengths": l1, "x2": x2, "lengths2": l2, "labels": labels}
    return out, vocab
