"""Library (tasks): the six Long Range Arena datasets as tasks, ``lra_listops`` ... ``lra_pathx``.

A task reads one dataset through ``data.load_lra`` (prepared arrays are cached on disk under the
data root, see ``data.cache``) and keeps the three loaded splits in a per-process cache, so the
packs of one process load a dataset once. Loading happens when the task is constructed: missing
data raises ``DataUnavailable`` there, naming the one command that provides it, before any
training.

Config = the dataset's preprocessing options (the fields of ``data.DATASETS[d].config_cls``, e.g.
``max_len``, ``level``, ``resolution``, ``tokenize``) plus ``source``: the data source to read
(default: the dataset's real source). Exactly that source is read (no fallback), and ``source`` is
part of the run identity, so a number trained on generated or proxy data never shares a run id
with one trained on the real data.

    task            dataset     sources (default first)                   input
    lra_listops     listops     lra_release | generated                   tokens
    lra_text        text        download:imdb                             tokens (chars or bytes)
    lra_retrieval   retrieval   lra_release                               two token documents
    lra_image       image       download:cifar10 | proxy:fashion_mnist32  pixels (1 or 3 channels)
                                | proxy:digits                            (digits: 8x8, L = 64)
    lra_pathfinder  pathfinder  lra_release | generated                   pixels (1 channel)
    lra_pathx       pathx       lra_release | generated                   pixels (1 channel)

Samples. Split ``s`` is a fixed table: sample ``i`` is row ``i`` of that split for every seed (the
training loop gives each member its own order through epoch permutations of ``train_size`` rows);
an index outside the split is an ``IndexError``. Every target is one class per sequence
(``info.target == "sequence"``). Batches for E members and B rows (L = ``info.seq_len``)::

    token inputs   x (E, B, L) int64, right-padded with 0; mask (E, B, L) bool, True at real tokens
    pixel inputs   x (E, B, L, k) float32, normalised as the dataset says (``info.input_dim = k``,
                   ``info.vocab_size = 0``); mask None (every position is real)
    retrieval      x2, mask2: the second document, same layout (``info.dual``)
    y              (E, B) int64

Every row is padded to one fixed length L, the longest row of any split (pixel tasks: H·W), not to
the longest row of its batch: a row's input then never depends on its batch-mates, so a pack
member sees exactly what it sees alone (bidirectional models read the padding too).

Planning without the data. Inside ``nominal_data()`` (the dry run: ``engine.dry_run``), a task
whose dataset is absent is built from its nominal shapes (``data.nominal``: split sizes, padded
length, vocabulary, classes) instead of raising ``DataUnavailable``; its batches are placeholders
of the right shapes (zeros, every position real), good for building models and timing steps,
never for training. The context collects one ``NominalNote`` per absent dataset, with the command
that provides it. Outside it (training) missing data always raises.

Example (a data root holding the ListOps fixture of the tests, ``tests/assets/lra/lra``)::

    task = build_task({"name": "lra_listops"})         # reads $SSMREPRO_DATA/lra/listops-1000
    task.split_sizes()                                 # {'train': 7, 'val': 3, 'test': 3}
    b = task.sample(torch.tensor([0]), TRAIN, torch.tensor([[0, 1]]))
    b.x.shape, b.mask.sum(-1), b.y                     # (1, 2, 21), [[10, 6]], [[9, 5]]
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, create_model, model_validator

from ..data import DATASETS, GENERATED, DataUnavailable, LRADataset, dataset_config, load_lra
from ..data.datasets import GENERATORS, data_key, data_sample
from ..data.nominal import NominalShape, nominal_shape
from ..util import data_root, read_small, refuse_unread
from .base import SPLITS, Batch, Task, TaskConfig, TaskInfo

_SPLIT_NAMES = {v: k for k, v in SPLITS.items()}  # 0 -> "train", ...
_TASK_DATASETS: dict[type, str] = {}  # config class -> dataset (filled by _config_class)


# Bounds of the preprocessing fields (the dataclasses hold bare types): a resolution of 0 or -3
# planned 'L 0' / 'L 9', a negative fraction split a folder of 10 rows 10 / 9 / 0, a std of 0
# made every pixel infinite.
_BOUNDS: dict[str, dict[str, Any]] = {
    "max_len": {"ge": 2}, "resolution": {"ge": 1}, "min_freq": {"ge": 1},
    "val_fraction": {"gt": 0, "lt": 1}, "test_fraction": {"gt": 0, "lt": 1},
    "split_seed": {"ge": 0, "le": 2**32 - 1}, "std": {"gt": 0},
    # a folder name below pathfinder<res>/ ('../../x' read a folder outside the data root)
    "difficulty": {"pattern": r"^(curv_baseline|curv_contour_length_[0-9]+)$"},
}
# text fields the loaders check only once the data is read: without it (validate, the dry run)
# 'BYTE' planned a char-level vocabulary and passed
_CHOICES: dict[str, Any] = {"level": Literal["char", "byte"], "val_split": Literal["test", "train"]}
# `list-tasks`' meaning of a preprocessing field (it printed none; a ListOps max_len below the
# expressions' lengths cut every one of them without a word)
_DOCS: dict[str | tuple[str, str], str] = {  # a (dataset, field) key: that dataset's meaning
    "max_len": "tokens of a sequence (per document), <eos> included; a longer one is cut to it "
               "(a cut ListOps expression loses its answer)",
    "append_eos": "append an <eos> token to each sequence (it counts in max_len)",
    "level": "'char': Unicode characters, vocabulary <pad> <unk> <eos> + those seen at least "
             "min_freq times (S4); 'byte': UTF-8 bytes, vocabulary <pad> <eos> + the 256 bytes "
             "(LRA)",
    ("text", "min_freq"): "level char: a character enters the vocabulary when the training "
                          "reviews hold it at least this often (a rarer one reads as <unk>)",
    ("retrieval", "min_freq"): "a character enters the vocabulary when the training documents "
                               "hold it at least this often (a rarer one reads as <unk>)",
    "val_split": "'test': validation is the test set (LRA, S4); 'train': a seeded val_fraction "
                 "of the training reviews, left out of training",
    ("text", "val_fraction"): "val_split train: the share of the training reviews held out for "
                              "validation",
    ("text", "split_seed"): "val_split train: seed of the permutation that draws the "
                            "validation reviews",
    ("image", "val_fraction"): "the share held out for validation: of the training images "
                               "(cifar10, fashion_mnist32), of all images (digits, whose first "
                               "20% are test)",
    ("image", "split_seed"): "seed of the permutation that draws the validation (digits: and "
                             "test) images",
    "grayscale": "true: one channel, each pixel's luma (PIL convert('L'), S4 and LRA); false: "
                 "three channels, R G B",
    ("image", "tokenize"): "true: the 256 gray levels as tokens (LRA; vocabulary 256); false: "
                           "float pixels (S4)",
    "normalize": "float pixels in [0, 1] become (x - mean) / std; false: left in [0, 1]",
    "mean": "grayscale true: the mean that normalize subtracts (S4: 122.6/255)",
    "std": "grayscale true: the std that normalize divides by (S4: 61.0/255)",
    "color_mean": "grayscale false: the R, G, B means that normalize subtracts",
    "color_std": "grayscale false: the R, G, B stds that normalize divides by",
    "resolution": "image side in pixels: the folder pathfinder<resolution>/ is read; sequence "
                  "length resolution x resolution",
    "difficulty": "the folder under pathfinder<resolution>/: curv_baseline (contour length 6), "
                  "curv_contour_length_9, or curv_contour_length_14 (the hardest; LRA and S4)",
    ("pathfinder", "tokenize"): "true: the 256 gray levels as tokens (vocabulary 256); false: "
                                "float pixels in [0, 1] (see center)",
    "center": "true: float pixels mapped from [0, 1] to [-1, 1] (S4's class default); false: "
              "kept in [0, 1] (S4's configs)",
    ("pathfinder", "val_fraction"): "the share of the folder's images drawn for validation "
                                    "(it has no splits of its own)",
    "test_fraction": "the share of the folder's images drawn for test; the rest trains",
    ("pathfinder", "split_seed"): "seed of the permutation that splits the images into "
                                  "validation, test and training",
}


class _LRAConfig(TaskConfig):
    """Base of the LRA task configs: refuses preprocessing fields set away from their default
    where this source or these options never read them (``ignored``)."""

    @model_validator(mode="after")
    def _applies(self) -> _LRAConfig:
        dataset = _TASK_DATASETS[type(self)]
        defaults = {f.name: f.default for f in dataclasses.fields(DATASETS[dataset].config_cls)}
        if sum(getattr(self, k, 0) for k in ("val_fraction", "test_fraction")) >= 1:
            raise ValueError("val_fraction + test_fraction must leave rows for training (< 1)")
        if any(v <= 0 for v in getattr(self, "color_std", ())):
            raise ValueError(f"color_std {list(self.color_std)}: every std must be > 0")
        refuse_unread(self, ignored(dataset, self), defaults, what="on the same data")
        return self


def ignored(dataset: str, c: Any) -> list[tuple[str, str]]:
    """(field, why) for the preprocessing fields the loaders never read for config ``c`` (the
    proxies normalise with their own training-split statistics and have one channel; tokens are
    not normalised; the text vocabulary's ``min_freq`` is char-level only; ...)."""
    out: list[tuple[str, str]] = []
    norm = ("normalize", "mean", "std", "color_mean", "color_std")
    if dataset == "image":
        if str(c.source).startswith("proxy:"):
            why = (f"with source {c.source} (it has one channel and normalises with its own "
                   "training-split statistics)")
            out += [(k, why) for k in (*norm, "grayscale")]
        elif c.tokenize:
            out += [(k, "with tokenize true (gray levels are tokens)") for k in norm]
        elif not c.normalize:
            out += [(k, "with normalize false") for k in norm[1:]]
        else:
            out += [(k, f"with grayscale {c.grayscale}")
                    for k in (("color_mean", "color_std") if c.grayscale else ("mean", "std"))]
    elif dataset in ("pathfinder", "pathx") and c.tokenize:
        out.append(("center", "with tokenize true (gray levels are tokens)"))
    elif dataset == "text":
        if c.level == "byte":
            out.append(("min_freq", "at level byte (the vocabulary is the 256 bytes)"))
        if c.val_split != "train":
            out += [(k, f"with val_split {c.val_split!r} (validation is the test set)")
                    for k in ("val_fraction", "split_seed")]
    return out


def _doc(dataset: str, name: str) -> str | None:
    """`list-tasks`' meaning of a preprocessing field of ``dataset`` (Path-X: Pathfinder's)."""
    base = "pathfinder" if dataset == "pathx" else dataset
    return _DOCS.get((base, name), _DOCS.get(name))


def _config_class(task: str, dataset: str) -> type[TaskConfig]:
    """The task's pydantic config: ``name``, ``source`` and every preprocessing field of the
    dataset's config dataclass (same names, types and defaults; one source of truth)."""
    ddef = DATASETS[dataset]
    hints = typing.get_type_hints(ddef.config_cls)
    fields: dict[str, Any] = {
        f.name: (_CHOICES.get(f.name, hints[f.name]),
                 Field(f.default, description=_doc(dataset, f.name), **_BOUNDS.get(f.name, {})))
        for f in dataclasses.fields(ddef.config_cls)
    }
    sources = tuple(ddef.sources)
    source_t = Literal[sources]  # type: ignore[valid-type]
    cls = create_model(
        "".join(p.capitalize() for p in task.split("_")) + "Config",
        __base__=_LRAConfig,
        __module__=__name__,
        name=(str, task),
        source=(source_t, Field(sources[0], description=f"data source, one of {list(sources)}; "
                                "part of the run identity")),
        **fields,
    )
    cls.__doc__ = (f"{task}: the LRA {dataset} dataset; fields = its preprocessing options "
                   f"(data.{ddef.config_cls.__name__}) + source.")
    globals()[cls.__name__] = cls  # importable by name, so configs pickle (packs go to workers)
    _TASK_DATASETS[cls] = dataset
    return cls


@dataclass(frozen=True)
class _Loaded:
    """The three splits of one (dataset, root, source, preprocessing), as loaded."""

    splits: tuple[LRADataset, LRADataset, LRADataset]  # train, val, test
    root: Path
    seq_len: int
    sample: str | None = None  # a digest of a sample of the source files' bytes (data_sample)


@dataclass(frozen=True)
class NominalNote:
    """One absent dataset a planning context used nominal shapes for."""

    task: str
    shape: NominalShape
    root: Path
    command: str  # the command that provides the data

    def line(self) -> str:
        s = self.shape
        caveats = "".join(f"; {c}" for c in s.caveats)
        return (f"{self.task} ({s.dataset}, source {s.source}): no data under {str(self.root)!r}, "
                f"so the estimate uses its nominal shapes ({s.describe()}{caveats}); to get "
                f"the data: `{self.command}`")


_LOADED: dict[tuple[str, str, str], _Loaded] = {}  # per-process cache


class CutWarning(UserWarning):
    """A ListOps max_len cuts expressions (``_load``). Said by the command that plans the runs
    (``engine.check_data`` loads every run's task first); its worker processes leave it out
    (``run --workers 2`` said it three times, once per process)."""
_KEYS: dict[tuple, str | None] = {}  # (dataset, root, source, preprocessing, folder) -> data_key
_SAMPLES: dict[tuple, str | None] = {}  # ("sample", the same) -> data_sample
_NOMINAL: ContextVar[dict[tuple, NominalNote] | None] = ContextVar("lra_nominal", default=None)


@contextmanager
def nominal_data() -> Iterator[dict[tuple, NominalNote]]:
    """Within: LRA tasks whose data is absent use their nominal shapes (planning only, see the
    module docstring). Yields the notes collected, one per (dataset, source, preprocessing)."""
    notes: dict[tuple, NominalNote] = {}
    token = _NOMINAL.set(notes)
    try:
        yield notes
    finally:
        _NOMINAL.reset(token)


def _load(task: str, dataset: str, config: TaskConfig) -> _Loaded | NominalShape:
    root = data_root()
    source: str = getattr(config, "source")  # noqa: B009 - a field of the generated config
    prep = config.model_dump(exclude={"name", "source"})
    # realpath, not resolve(): a data root that is a link loop raised RuntimeError (a traceback)
    # here; load_lra names it
    key = (dataset, os.path.realpath(root), json.dumps([source, prep], sort_keys=True))
    if key not in _LOADED:
        try:
            train, val, test = (load_lra(dataset, s, root=root, accept_sources=[source], **prep)
                                for s in ("train", "val", "test"))
        except DataUnavailable as err:
            notes = _NOMINAL.get()
            if notes is not None:  # planning: the nominal shapes stand in (never cached)
                shape = nominal_shape(dataset, source, **prep)
                cmd = DATASETS[dataset].hint(source, root, dataset_config(dataset, **prep))
                notes.setdefault(key, NominalNote(task, shape, root, cmd))
                return shape
            alt = ""
            if source != GENERATED and GENERATED in DATASETS[dataset].sources:
                alt = " (or set task.source: generated to train on generated data)"
            raise DataUnavailable(f"task {task} (source {source}): {err}{alt}") from None
        widths = [a.shape[1] for d in (train, val, test) for a in (d.x, d.x2) if a is not None]
        cut = {d.split: (d.cut, len(d)) for d in (train, val, test) if d.cut}
        if cut:  # a ListOps max_len below the expressions' lengths (64 beside generated
            # expressions of 500-2,000 tokens) cut every one of them, its answer lost, and the
            # run trained on them without a word
            warnings.warn(f"task {task}: max_len {prep.get('max_len')} cuts "
                          + ", ".join(f"{n} of {total} {s}" for s, (n, total) in cut.items())
                          + " expressions (a cut expression loses its answer); raise max_len "
                          "to train on whole ones", CutWarning, stacklevel=2)
        try:  # (read just after the splits: the bytes they were prepared from)
            sample = data_sample(dataset, source, root, **prep)
        except (OSError, DataUnavailable):  # gone meanwhile: the record keeps no sample
            sample = None
        _LOADED[key] = _Loaded((train, val, test), root, max(widths), sample)
    return _LOADED[key]


def clear_cache() -> None:
    """Forget the datasets loaded by this process and their keys (``data_changed``; tests that
    rewrite a data root use it)."""
    _LOADED.clear()
    _KEYS.clear()
    _SAMPLES.clear()


class LRATask(Task):
    """Base of the six LRA tasks (see the module docstring)."""

    dataset: ClassVar[str]
    finite = True
    reads_data = True

    def __init__(self, config: TaskConfig):
        super().__init__(config)
        loaded = _load(self.name, self.dataset, config)  # raises DataUnavailable
        self.nominal: NominalShape | None = loaded if isinstance(loaded, NominalShape) else None
        if isinstance(loaded, _Loaded):
            self._data = loaded

    def eval_problem(self, other: Task) -> str | None:
        """A named evaluation set of the same data whose test rows another seeded split draws
        (Pathfinder's split_seed / fractions, the digits proxy's split_seed) would hold rows the
        run trains on: its 'test' accuracy then partly measured training rows."""
        a, b = self.config, other.config
        mine, theirs = self._vocab(), other._vocab() if isinstance(other, LRATask) else None
        if mine is not None and theirs is not None and theirs != mine[: len(theirs)]:
            # lra_text at level char beside byte (39 ids within 258): id 1 was <eos> in
            # training and <unk> in the set, every character read as some byte
            diff = next(i for i, (u, v) in enumerate(zip(theirs, mine)) if u != v)
            return (f"its token ids mean other tokens than the run's task's (id {diff} is "
                    f"{theirs[diff]!r} there, {mine[diff]!r} in training): an evaluation set "
                    "keeps the vocabulary (at most a prefix of it)")
        same = ("source", "resolution", "difficulty")  # the same folder of images
        if any(getattr(a, k, None) != getattr(b, k, None) for k in same):
            return None
        keys: tuple[str, ...] = ()
        if self.dataset in ("pathfinder", "pathx"):
            keys = ("split_seed", "val_fraction", "test_fraction")
        elif self.dataset == "image" and a.source == "proxy:digits":
            keys = ("split_seed",)
        changed = [k for k in keys if getattr(a, k) != getattr(b, k)]
        if changed:
            return (f"{' and '.join(changed)} {'differ' if len(changed) > 1 else 'differs'} from "
                    f"the run's task: the set's test rows would come from another split of the "
                    f"same {self.dataset} data, partly rows the run trains on")
        return None

    def _vocab(self) -> tuple[str, ...] | None:
        """The token vocabulary of the loaded training split (None: pixels, or not loaded)."""
        return None if self.nominal is not None else self._data.splits[0].vocab

    @property
    def info(self) -> TaskInfo:
        if self.nominal is not None:
            s, tokens = self.nominal, self.nominal.kind == "tokens"
            return TaskInfo(vocab_size=(s.vocab_size or 0) if tokens else 0, n_classes=s.n_classes,
                            seq_len=s.seq_len, target="sequence",
                            input_dim=None if tokens else s.d_input, dual=s.dual)
        tr = self._data.splits[0]
        tokens = tr.kind == "tokens"
        return TaskInfo(
            vocab_size=tr.vocab_size if tokens else 0,  # type: ignore[arg-type]
            n_classes=tr.n_classes,
            seq_len=self._data.seq_len,
            target="sequence",
            input_dim=None if tokens else tr.d_input,
            dual=tr.dual,
        )

    def split_sizes(self) -> dict[str, int]:
        if self.nominal is not None:
            return dict(self.nominal.sizes)
        return {name: len(ds) for name, ds in zip(("train", "val", "test"), self._data.splits)}

    def data_info(self) -> dict:
        if self.nominal is not None:
            return {"dataset": self.dataset, "source": self.nominal.source, "path": None,
                    "sizes": self.split_sizes(), "nominal": True}
        tr = self._data.splits[0]
        path = tr.path
        try:
            where = path.resolve().relative_to(self._data.root.resolve()).as_posix() if path else None
        except ValueError:  # outside the data root (e.g. the system Fashion-MNIST)
            where = str(path)
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "source": tr.source,
            "path": where,
            "sizes": self.split_sizes(),
            "cache_key": tr.cache_path.name if tr.cache_path is not None else None,
        }
        if self._data.sample is not None:  # (data_changed)
            out["sample"] = self._data.sample
        meta = path / "meta.json" if path is not None else None
        if meta is not None and meta.is_file():  # our generators' provenance: version and seed
            try:  # damaged, it failed every pack after training (a bare JSONDecodeError)
                gen = json.loads(read_small(meta, 1 << 20, follow_links=True))
            except (OSError, ValueError, RecursionError) as err:
                gen = {"generator": f"unknown: {meta} is not a readable meta.json "
                                    f"({type(err).__name__})"}
            want = GENERATORS.get(self.dataset) if tr.source == GENERATED else None
            if not isinstance(gen, dict):
                gen = {"generator": f"unknown: {meta} is not a generator's meta.json"}
            elif want is not None and (
                    gen.get("generator") != want[0] or not isinstance(gen.get("version"), int)
                    or isinstance(gen["version"], bool) or not 1 <= gen["version"] <= want[1]):
                # another generator's, or a newer one's (ListOps data whose meta.json named the
                # Pathfinder generator, version 99, were recorded as made by it without a word)
                gen = {"generator": f"unknown: {meta} names generator {gen.get('generator')!r} "
                                    f"version {gen.get('version')!r}, not {want[0]} version "
                                    f"{want[1]} or older: it is not these data's meta.json"}
            elif isinstance(gen.get("sizes"), dict) and gen["sizes"] != out["sizes"]:
                # a meta.json edited or left from another generation (ListOps: train 400 beside
                # 40 rows) named its seed as these data's without a word
                gen = {"generator": f"unknown: {meta} says split sizes {gen['sizes']}, the data "
                                    f"hold {out['sizes']}: it is not these data's meta.json"}
            if str(gen.get("generator", "")).startswith("unknown: "):
                warnings.warn(f"{gen['generator'][len('unknown: '):]}: the run's record names "
                              "no generator (generate the data again to restore it)", stacklevel=2)
            out["generator"] = {k: gen[k] for k in ("generator", "version", "seed") if k in gen}
        return out

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        if self.nominal is not None:
            return self._placeholder(seeds.device, split, index)
        ds = self._data.splits[split]
        E, B = index.shape
        rows = index.reshape(-1).cpu().numpy()  # (E*B,)
        if rows.size and (rows.min() < 0 or rows.max() >= len(ds)):
            bad = int(rows.max() if rows.max() >= len(ds) else rows.min())
            raise IndexError(
                f"{self.name}: sample index {bad} is outside the {_SPLIT_NAMES[split]} split "
                f"({len(ds)} rows; source {ds.source}); use train.train_size <= the split size")
        dev = seeds.device
        y = torch.from_numpy(np.asarray(ds.labels[rows], dtype=np.int64)).view(E, B).to(dev)
        x, mask = self._inputs(ds, ds.x, ds.lengths, rows, E, B)
        x2 = mask2 = None
        if ds.x2 is not None:
            x2, mask2 = self._inputs(ds, ds.x2, ds.lengths2, rows, E, B)
        to = lambda t: None if t is None else t.to(dev)  # noqa: E731
        return Batch(x=to(x), y=y, mask=to(mask), x2=to(x2), mask2=to(mask2))

    def _placeholder(self, dev: torch.device, split: int, index: torch.Tensor) -> Batch:
        """A batch of the nominal shapes for planning (timing a step): zero inputs (token id 0
        is a real position here: the mask is all True, the worst case for masked work), class 0."""
        info, (E, B) = self.info, index.shape
        n = self.split_sizes()[_SPLIT_NAMES[split]]
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
            raise IndexError(f"{self.name}: sample index outside the nominal {_SPLIT_NAMES[split]} "
                             f"split ({n} rows)")
        L = info.seq_len
        if info.input_dim is None:
            x, mask = (torch.zeros(E, B, L, dtype=torch.int64, device=dev),
                       torch.ones(E, B, L, dtype=torch.bool, device=dev))
        else:
            x, mask = torch.zeros(E, B, L, info.input_dim, device=dev), None
        y = torch.zeros(E, B, dtype=torch.int64, device=dev)
        if info.dual:
            return Batch(x=x, y=y, mask=mask, x2=x.clone(), mask2=None if mask is None else mask.clone())
        return Batch(x=x, y=y, mask=mask)

    def _inputs(self, ds: LRADataset, arr: np.ndarray, lengths, rows: np.ndarray, E: int, B: int):
        """Rows of one input table -> x (E, B, L) int64 + mask, or (E, B, L, k) float32 + None."""
        L = self._data.seq_len
        sub = np.asarray(arr[rows])  # (E*B, w) or (E*B, L, k)
        if ds.kind == "pixels":
            x = torch.from_numpy(ds.to_float(sub))  # (E*B, L) or (E*B, L, k)
            if x.dim() == 2:
                x = x.unsqueeze(-1)
            return x.view(E, B, L, x.shape[-1]), None
        x = np.zeros((len(rows), L), dtype=np.int64)
        x[:, : sub.shape[1]] = sub
        mask = np.arange(L)[None, :] < np.asarray(lengths[rows], dtype=np.int64)[:, None]  # (E*B, L)
        return torch.from_numpy(x).view(E, B, L), torch.from_numpy(mask).view(E, B, L)


class LRAListOps(LRATask):
    """Long Range Arena ListOps: evaluate a nested list expression (10 classes)."""

    name = "lra_listops"
    dataset = "listops"
    Config = _config_class(name, dataset)


class LRAText(LRATask):
    """Long Range Arena text: IMDB review sentiment from characters or bytes (2 classes)."""

    name = "lra_text"
    dataset = "text"
    Config = _config_class(name, dataset)


class LRARetrieval(LRATask):
    """Long Range Arena retrieval: do two AAN documents cite each other (2 classes)."""

    name = "lra_retrieval"
    dataset = "retrieval"
    Config = _config_class(name, dataset)


class LRAImage(LRATask):
    """Long Range Arena image: CIFAR-10 pixels as a sequence (10 classes)."""

    name = "lra_image"
    dataset = "image"
    Config = _config_class(name, dataset)


class LRAPathfinder(LRATask):
    """Long Range Arena Pathfinder: are two dots joined by a dashed path (2 classes)."""

    name = "lra_pathfinder"
    dataset = "pathfinder"
    Config = _config_class(name, dataset)


class LRAPathX(LRATask):
    """Long Range Arena Path-X: Pathfinder at 128x128 pixels (2 classes)."""

    name = "lra_pathx"
    dataset = "pathx"
    Config = _config_class(name, dataset)


LRA_TASKS: tuple[type[LRATask], ...] = (LRAListOps, LRAText, LRARetrieval, LRAImage, LRAPathfinder,
                                        LRAPathX)


def data_changed(task: dict, data: object) -> str | None:
    """Why a run of the LRA task config ``task`` (a record's dump) whose record names the data
    it trained on by ``data`` (``LRATask.data_info``: its cache entry, ``<dataset>-<key>``) was
    not trained on the data its source holds now, or None (the same data, another task, a
    planning record, or no data there to compare with). The source is part of the run id, its
    files are not: ListOps generated again with another seed or size, or the release installed
    again, gave the old data's results as the new one's, and `run` trained nothing."""
    names = {t.name: t.dataset for t in LRA_TASKS}
    if not (isinstance(task, dict) and task.get("name") in names and isinstance(data, dict)
            and isinstance(data.get("cache_key"), str) and isinstance(task.get("source"), str)):
        return None
    dataset, source = names[task["name"]], task["source"]
    prep = {k: v for k, v in task.items() if k not in ("name", "source")}
    root = data_root()
    try:
        folder = DATASETS[dataset].locate(source, root, dataset_config(dataset, **prep))
        st = os.stat(folder)  # (computed once a process for one folder: a records' read of
        # 54 runs does not stat the 200,000 Pathfinder images 54 times)
        memo = (dataset, os.path.realpath(root), source, json.dumps(prep, sort_keys=True),
                st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        if memo not in _KEYS:
            _KEYS[memo] = data_key(dataset, source, root, **prep)
        now = _KEYS[memo]
        if now is not None and now == data["cache_key"] and isinstance(data.get("sample"), str):
            # the same sizes and mtimes: the bytes, sampled (a record without a sample,
            # written before it was kept, is judged by the key alone)
            memo = ("sample", *memo)
            if memo not in _SAMPLES:
                _SAMPLES[memo] = data_sample(dataset, source, root, **prep)
            sample = _SAMPLES[memo]
            if sample is not None and sample != data["sample"]:
                return (f"the {dataset} data ({source}) it was trained on are not the files "
                        f"{folder} holds now, though they have the same sizes and "
                        f"modification times (data {now}, their bytes sampled {data['sample']}, "
                        f"now {sample}): rewritten with their times put back (`touch -r`, `cp "
                        "-p` of other files, another archive extracted), or $SSMREPRO_DATA "
                        "another data root")
    except (OSError, ValueError, TypeError, DataUnavailable):  # absent or unreadable: the run
        return None  # itself says why when it trains
    if now is None or now == data["cache_key"]:
        return None
    # the data are known by their files' paths, sizes and modification times (hashing a
    # release's gigabytes at every read is not affordable), so the same bytes with new times
    # differ too: said as it is (it read `trained on other data` for a `touch` or a copy, and
    # the hours of training to recover what restoring the times recovers went unsaid)
    return (f"the {dataset} data ({source}) it was trained on are not the files {folder} holds "
            f"now by their sizes or modification times (data {data['cache_key']}, now {now}): "
            "generated or installed again, $SSMREPRO_DATA another data root, or the same files "
            "touched or copied without their times (if so, copy them again keeping their times, "
            "e.g. `cp -p` or `rsync -t`, and the run counts as done)")
