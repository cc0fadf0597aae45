"""Library (tasks): ``text_corpus``, next-byte language modelling on a user's text file (yu2025 App. G).

The corpus is one file of bytes (UTF-8 text or anything else), read through a memory map, so a
corpus of gigabytes costs no memory up front. Its bytes are split in order: the first
``1 - val_fraction - test_fraction`` for training, then validation, then test, so no window of one
split overlaps another. Sample ``i`` of split ``s`` for seed ``r`` is the window of L + 1 bytes that
starts at a position drawn uniformly within that split by the counter-based RNG (``tasks.rng``)
from (r, s, i); x = its first L bytes, y = its last L (every position supervised). The vocabulary
is the 256 byte values, so the loss is in nats per byte: per-byte perplexity = exp(loss), bits per
byte = loss / ln 2. (yu2025 trains on SlimPajama-6B with a subword tokenizer; its per-token
perplexities are not comparable with per-byte ones.)

``path`` is relative to the data root (``$SSMREPRO_DATA``, default ``./data``) or absolute. The
path is part of the run identity, the file's size and a fingerprint of its first and last MiB
go into every run record (``data_info``): replacing the file at the same path is detected
(``CorpusChanged``) when a run of the old file is resumed in the same process, and a record whose
fingerprint is not that of the file its path names now is not used (``corpus_changed``: the
store ignores it with a warning, and `run` trains the run again).

Example (corpus ``b"abcdefghij"``, L 4): the window starting at byte 3 gives

    x: d e f g     (byte ids 100 101 102 103)
    y: e f g h     (byte ids 101 102 103 104)
"""

from __future__ import annotations

import atexit
import hashlib
import os
from pathlib import Path

import numpy as np
import torch
from pydantic import Field, model_validator

from ..data import DataUnavailable
from ..util import data_root, expand_user
from . import rng
from .base import Batch, Task, TaskConfig, TaskInfo

_MIB = 1 << 20


class TextCorpusConfig(TaskConfig):
    name: str = "text_corpus"
    path: str = Field("text/corpus.txt", min_length=1, max_length=4096,
                      description="the corpus file, relative to the data root or absolute")
    L: int = Field(256, ge=1, le=1 << 20, description="context length (bytes per sample)")
    val_fraction: float = Field(0.05, gt=0, lt=0.5, description="share of the bytes for validation")
    test_fraction: float = Field(0.05, gt=0, lt=0.5, description="share of the bytes for test")

    @model_validator(mode="after")
    def _fractions(self) -> TextCorpusConfig:
        if self.val_fraction + self.test_fraction >= 0.5:
            raise ValueError("val_fraction + test_fraction must leave at least half the corpus "
                             "for training")
        if "\x00" in self.path:
            raise ValueError("path contains a NUL character")
        return self


class CorpusChanged(RuntimeError):
    """The corpus file changed while runs were reading it."""


_CACHE: dict[str, tuple[tuple[int, int], np.memmap, str, object]] = {}


@atexit.register
def _close_files() -> None:
    """Close the corpus files ``_open`` keeps open for the process's life (``_check_unchanged``
    reads the mapped file's size through them): left to the interpreter's shutdown, each was an
    'unclosed file' ResourceWarning on stderr under ``python -X dev`` or ``-W default`` (every
    command that built a text_corpus task, ``validate --all`` included)."""
    for hit in _CACHE.values():
        hit[3].close()  # type: ignore[attr-defined]


def _fingerprint(mm: np.memmap) -> str:
    """sha256 of the size, the first MiB and the last MiB (cheap for any size; 16 hex digits)."""
    h = hashlib.sha256(str(mm.shape[0]).encode())
    h.update(mm[:_MIB].tobytes())
    h.update(mm[-_MIB:].tobytes())
    return h.hexdigest()[:16]


def _open(path: Path) -> tuple[np.memmap, str]:
    """The corpus as a read-only uint8 memory map and its fingerprint, cached per process."""
    st = path.stat()
    key = str(path.resolve())
    stamp = (st.st_size, st.st_mtime_ns)
    hit = _CACHE.get(key)
    if hit is not None:
        if hit[0] != stamp:
            raise CorpusChanged(f"the corpus {path} changed on disk while runs were reading it "
                                "(size or modification time differ); re-run to start from the new "
                                "file")
        return hit[1], hit[2]
    f = open(path, "rb")  # noqa: SIM115 - kept open: sample() checks the mapped file through it
    mm = np.memmap(f, dtype=np.uint8, mode="r")
    fp = _fingerprint(mm)
    _CACHE[key] = (stamp, mm, fp, f)
    return mm, fp


def _check_unchanged(key: str, path: Path) -> None:
    """Raise CorpusChanged when the mapped file was cut or rewritten in place since it was
    opened: reading a page past its new end killed the process with SIGBUS ('Bus error', exit
    135, no word on what happened), and bytes rewritten in place mixed two corpora. (A file
    replaced by another at the same path leaves the mapped one intact.)"""
    hit = _CACHE.get(key)
    if hit is None:
        return
    st = os.fstat(hit[3].fileno())  # type: ignore[attr-defined]
    if (st.st_size, st.st_mtime_ns) != hit[0]:
        raise CorpusChanged(f"the corpus {path} was cut or rewritten in place while runs were "
                            f"reading it ({hit[0][0]:,} bytes when opened, {st.st_size:,} now); "
                            "re-run to start from the new file")


class TextCorpus(Task):
    """Next-byte language modelling on a text file of the user's (yu2025 App. G)."""

    Config = TextCorpusConfig
    name = "text_corpus"
    reads_data = True

    def __init__(self, config: TextCorpusConfig):
        super().__init__(config)
        c = config
        p = expand_user(c.path)
        self.path = p if p.is_absolute() else data_root() / p
        if not self.path.is_file():
            raise DataUnavailable(
                f"task text_corpus: no corpus file at {self.path} (task.path {c.path!r}, relative "
                "to the data root $SSMREPRO_DATA or ./data). Supply your own text file, e.g. "
                "`ssmrepro run yu2025-appG --profile paper --set task.path=/abs/path/corpus.txt`; "
                "nothing is downloaded.")
        if os.path.getsize(self.path) == 0:
            raise ValueError(f"task text_corpus: the corpus {self.path} is empty")
        self._bytes, self._fp = _open(self.path)
        self._key = str(self.path.resolve())  # (_open's)
        n = self._bytes.shape[0]
        n_val, n_test = int(n * c.val_fraction), int(n * c.test_fraction)
        n_train = n - n_val - n_test
        # split s covers bytes [start, stop): train, then validation, then test
        self._bounds = [(0, n_train), (n_train, n_train + n_val), (n_train + n_val, n)]
        short = [(s, b - a) for s, (a, b) in zip(("train", "val", "test"), self._bounds)
                 if b - a < c.L + 1]
        if short:
            raise ValueError(
                f"task text_corpus: the corpus {self.path} ({n} bytes) is too short for windows of "
                f"L + 1 = {c.L + 1} bytes: " + ", ".join(f"{s} has {m}" for s, m in short)
                + " (use a longer corpus or a smaller task.L)")

    def eval_problem(self, other: Task) -> str | None:
        """A named evaluation set on the same file whose test bytes begin before the run's
        training bytes end (other fractions) would score windows the run trained on."""
        if not isinstance(other, TextCorpus) or other.path.resolve() != self.path.resolve():
            return None
        train_end, test_start = self._bounds[0][1], other._bounds[2][0]
        if test_start < train_end:
            return (f"its test split starts at byte {test_start:,} of {self.path}, inside the "
                    f"run's training bytes [0, {train_end:,}) (val_fraction / test_fraction "
                    "differ): it would score windows the run trains on")
        return None

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(vocab_size=256, n_classes=256, seq_len=self.config.L, next_token=True)

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        L = self.config.L
        start, stop = self._bounds[split]
        k = rng.key(seeds[:, None], split, index)  # (E, B)
        pos = rng.randint(k, 1, start, stop - L)[..., 0]  # (E, B): window [pos, pos + L]
        win = pos.cpu().numpy()[..., None] + np.arange(L + 1)  # (E, B, L + 1)
        _check_unchanged(self._key, self.path)
        w = torch.from_numpy(np.asarray(self._bytes[win], dtype=np.int64)).to(index.device)
        return Batch(x=w[..., :L], y=w[..., 1:])

    def data_info(self) -> dict:
        try:
            where = self.path.resolve().relative_to(data_root().resolve()).as_posix()
        except ValueError:  # outside the data root
            where = str(self.path)
        return {"dataset": "text_corpus", "path": where, "bytes": int(self._bytes.shape[0]),
                "fingerprint": self._fp,
                "sizes": {s: b - a for s, (a, b) in zip(("train", "val", "test"), self._bounds)}}


def corpus_changed(task: dict, data: object) -> str | None:
    """Why a run of the text_corpus task config ``task`` (a record's dump) whose record names
    the corpus it trained on by ``data`` (``TextCorpus.data_info``: its fingerprint) was not
    trained on the corpus that ``task.path`` names now, or None (the same corpus, another task,
    or no corpus there to compare with). The path is part of the run id, the bytes are not: a
    corpus replaced at its path, or a path relative to another data root ($SSMREPRO_DATA), gave
    the old corpus's results as the new one's, and `run` trained nothing."""
    if not (isinstance(task, dict) and task.get("name") == "text_corpus"
            and isinstance(data, dict) and isinstance(data.get("fingerprint"), str)
            and isinstance(task.get("path"), str)):
        return None
    p = expand_user(task["path"])
    path = p if p.is_absolute() else data_root() / p
    try:
        if not path.is_file() or os.path.getsize(path) == 0:
            return None
        _, fp = _open(path)
    except CorpusChanged as err:  # rewritten since this process opened it
        return str(err)
    except (OSError, ValueError):  # unreadable: the run itself says why when it trains
        return None
    if fp == data["fingerprint"]:
        return None
    return (f"it was trained on another corpus than {path} holds now (fingerprint "
            f"{data['fingerprint']}, now {fp}: the file replaced, or $SSMREPRO_DATA another data "
            "root)")
