"""Library (data): the six LRA datasets behind one loader, ``load_lra(dataset, split, ...)``.

``DATASETS`` maps each dataset to its data sources (where each lives, how it is prepared, which
command provides it). The *tasks* built on these datasets (``lra_listops``, ...) are registered
with the synthetic ones in ``ssmrepro.tasks``.

=========  ======================  =================================  =========  =====  ======
dataset    sources (preference)    input                              length     vocab  classes
=========  ======================  =================================  =========  =====  ======
listops    lra_release, generated  tokens (pad 0, eos 1, ..., X 16)   <= 2048    17     10
text       download:imdb           characters (or bytes)              <= 4096    ~135   2
retrieval  lra_release             two character documents            <= 4000x2  ~98    2
image      download:cifar10        grayscale pixels -> normalised f.  1024       (256)  10
pathfinder lra_release, generated  pixels in [0, 1], resolution 32    1024       (256)  2
pathx      lra_release, generated  pixels in [0, 1], resolution 128   16384      (256)  2
=========  ======================  =================================  =========  =====  ======

``image`` also accepts ``proxy:fashion_mnist32`` and ``proxy:digits`` when asked for explicitly.
Nothing is downloaded or generated implicitly: missing data raises ``DataUnavailable`` naming the
command to run.

Prepared arrays are cached under ``<root>/.cache`` (see ``cache.py``); the key covers the source
files' identity and every field of the dataset's preprocessing config.

Example::

    ds = load_lra("listops", "train", root="data", max_len=2048)
    ds.source, ds.x.shape, ds.vocab_size    # ('generated', (96000, 2000), 17)
    b = ds.batch(np.arange(32))             # {"x": int64 (32, L), "lengths": ..., "labels": ...}
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..util import data_root, extra_hint, folder_problem, os_reason, read_small
from . import image, listops, pathfinder, retrieval, text
from .cache import (
    MAX_META_BYTES,
    META_FILE,
    cache_key,
    change_stamp,
    config_dict,
    content_sample,
    entry_dir,
    entry_names,
    file_identity,
    load_entry,
    remove_entry,
    save_entry,
)
from .download import LRA_FOLDERS
from .sources import (
    CIFAR10,
    DIGITS,
    DIGITS_FILE,
    FASHION_MNIST32,
    GENERATED,
    IMDB,
    LRA_RELEASE,
    SYSTEM_FASHION_MNIST,
    DataUnavailable,
    cache_root,
    dir_flag,
    generated_dir,
    installed_digits_dir,
    lra_dir,
)

SPLITS = ("train", "val", "test")


# ------------------------------------------------------------------------------------- dataset


@dataclass
class LRADataset:
    """Prepared arrays of one dataset split, with the name of the data source they came from.

    Token tasks (``kind == "tokens"``): ``x`` holds token ids (uint8 / int16), right-padded with
    ``pad_id = 0``; ``lengths`` the true lengths (including ``<eos>``). Pixel tasks (``kind ==
    "pixels"``): ``x`` holds uint8 pixel values in raster order, shape (N, L) or (N, L, 3);
    ``inputs`` / ``batch`` return float32 ``(x / 255 - pixel_mean) / pixel_std``. Retrieval adds
    ``x2`` / ``lengths2`` for the second document.
    """

    dataset: str
    split: str
    source: str
    x: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray
    n_classes: int
    kind: str  # "tokens" | "pixels"
    vocab: tuple[str, ...] | None = None
    x2: np.ndarray | None = None
    lengths2: np.ndarray | None = None
    pixel_mean: tuple[float, ...] = (0.0,)
    pixel_std: tuple[float, ...] = (1.0,)
    config: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None  # where the source data was read from
    cache_path: Path | None = None
    pad_id: int = 0
    cut: int = 0  # ListOps: expressions longer than max_len allows, cut to it (answer lost)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def seq_len(self) -> int:
        return int(self.x.shape[1])

    @property
    def vocab_size(self) -> int | None:
        return len(self.vocab) if self.vocab is not None else None

    @property
    def d_input(self) -> int | None:
        """Input channels for float inputs (1 grayscale, 3 colour); None for token inputs."""
        if self.kind != "pixels":
            return None
        return 1 if self.x.ndim == 2 else int(self.x.shape[2])

    @property
    def dual(self) -> bool:
        return self.x2 is not None

    def to_float(self, pixels: np.ndarray) -> np.ndarray:
        """uint8 pixels (..., L[, C]) -> float32 normalised inputs."""
        mean = np.asarray(self.pixel_mean, dtype=np.float32)
        std = np.asarray(self.pixel_std, dtype=np.float32)
        return (pixels.astype(np.float32) / 255.0 - mean) / std

    def inputs(self, idx: np.ndarray | slice | None = None, second: bool = False) -> np.ndarray:
        """Model inputs for rows ``idx``: float32 for pixel tasks, int64 token ids otherwise."""
        arr = self.x2 if second else self.x
        if arr is None:
            raise ValueError(f"dataset {self.dataset!r} has no second input")
        rows = arr if idx is None else arr[idx]
        return self.to_float(rows) if self.kind == "pixels" else rows.astype(np.int64)

    def batch(self, idx: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """A batch as numpy arrays; token batches are trimmed to their longest sequence.

        Keys: ``x`` (B, L[, C]), ``lengths`` (B,), ``labels`` (B,) and, for retrieval, ``x2``,
        ``lengths2``.
        """
        idx = np.asarray(idx)
        out: dict[str, np.ndarray] = {"labels": np.asarray(self.labels[idx], dtype=np.int64)}
        for name, arr, lens in (("x", self.x, self.lengths), ("x2", self.x2, self.lengths2)):
            if arr is None or lens is None:
                continue
            ln = np.asarray(lens[idx], dtype=np.int64)
            rows = arr[idx]
            if self.kind == "tokens":
                rows = rows[:, : int(ln.max()) if len(ln) else 0]
            out[name] = self.to_float(rows) if self.kind == "pixels" else rows.astype(np.int64)
            out["lengths" if name == "x" else "lengths2"] = ln
        return out

    def __getitem__(self, i: int) -> dict[str, Any]:
        b = self.batch(np.array([i]))
        out: dict[str, Any] = {"x": b["x"][0, : int(b["lengths"][0])], "label": int(b["labels"][0])}
        if "x2" in b:
            out["x2"] = b["x2"][0, : int(b["lengths2"][0])]
        return out

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.x.shape)
        extra = f", vocab {self.vocab_size}" if self.vocab is not None else f", d_input {self.d_input}"
        return (
            f"{self.dataset}/{self.split}: {len(self)} examples, x {shape} ({self.kind}{extra}), "
            f"{self.n_classes} classes, source {self.source}"
        )


# ------------------------------------------------------------------------------------ registry


@dataclass(frozen=True)
class DatasetDef:
    """How to find, identify and prepare one dataset's data for each of its sources."""

    name: str
    config_cls: type
    sources: tuple[str, ...]  # preference order
    default_accept: tuple[str, ...]
    n_classes: int
    kind: str  # its inputs (INPUT_KINDS): token ids or pixel values, what prepare() writes
    locate: Callable[[str, Path, Any], Path]  # where the source would live (may not exist)
    present: Callable[[str, Path], bool]
    files: Callable[[str, Path, Any], list[Path]]
    prepare: Callable[[str, Path, Any], tuple[dict, dict]]  # -> (splits, meta)
    hint: Callable[[str, Path, Any], str]  # how to get the source, one command
    version: int = 1
    # what preparing refuses, revised: not in the cache key (a refusal changes no array that
    # is prepared, so the key and the runs whose records keep it stay); an entry whose
    # meta.json names an older revision (none: 1) is prepared again, the same arrays or the
    # refusal (one written before ListOps refused the tokens a-d served them as operators)
    checks: int = 1


def _listops_locate(src: str, root: Path, cfg) -> Path:
    return lra_dir(root) / "listops-1000" if src == LRA_RELEASE else generated_dir(root) / "listops"


def _generated_copy(src: str, path: Path) -> bool:
    """A folder where the release is read that holds a meta.json: the release has none, our
    generators write one (`data generate listops --out <root>/lra/listops-1000`): its data
    were trained on and recorded as source lra_release, the official release's."""
    return src == LRA_RELEASE and (path / "meta.json").exists()


def _listops_present(src: str, path: Path) -> bool:
    if _generated_copy(src, path):
        return False
    return all((path / f).is_file() for f in listops.SPLIT_FILES.values())


def _listops_prepare(src: str, path: Path, cfg) -> tuple[dict, dict]:
    cut: dict[str, int] = {}  # expressions cut to max_len, per split (``LRADataset.cut``)
    arrays = listops.prepare_listops(path, cfg, cut)
    return arrays, {"vocab": list(listops.VOCAB), "kind": "tokens", "cut": cut}


def _force_flag(folder: Path) -> str:
    """`` --force`` where the generator's folder is there but holds no whole dataset (a split
    file removed, a generate cut short before its meta.json): `data generate` refuses a folder
    that is not empty without it, so the suggested command failed as given."""
    try:
        return " --force" if folder.is_dir() and any(folder.iterdir()) else ""
    except OSError:
        return ""


def _download_hint(what: str, root: Path) -> str:
    """`ssmrepro data download WHAT`, with `` --force`` where a folder it installs is there
    already (a dataset of the release removed or damaged beside the others): the download
    refuses such a folder without it, after fetching and extracting the archive."""
    folders = {"lra": [lra_dir(root) / name for name in LRA_FOLDERS],
               "cifar10": [root / "cifar-10-batches-py"], "imdb": [root / "imdb" / "aclImdb"]}
    try:
        there = any(p.exists() and not p.is_symlink() for p in folders[what])
    except OSError:
        there = False
    return f"ssmrepro data download {what}{dir_flag(root)}{' --force' if there else ''}"


def _generated_meta(folder: Path, generator: str) -> dict:
    """The meta.json ``generator`` wrote into ``folder`` (its n, seed, ...), or {} where there
    is none, it cannot be read, or another generator wrote it."""
    try:
        meta = json.loads(read_small(folder / "meta.json", 1 << 20, follow_links=True))
    except (OSError, ValueError, RecursionError):
        return {}
    return meta if isinstance(meta, dict) and meta.get("generator") == generator else {}


def _count(meta: dict, key: str, default: int, most: int | None = None, least: int = 0) -> int:
    """``meta[key]`` where it is a count (an int, not a bool) from ``least`` to ``most`` (what
    `data generate` takes: a meta.json's n of 10**30, or a max_depth of 0, made a suggested
    command it refuses), else ``default``."""
    v = meta.get(key)
    ok = (isinstance(v, int) and not isinstance(v, bool)
          and least <= v <= (v if most is None else most))
    return v if ok else default


def _listops_hint(src: str, root: Path, cfg) -> str:
    """The command that writes the folder again, with the size, seed and lengths its meta.json
    records (a damaged folder of 2,000 trees of seed 7 was told `--n 100000 --seed 0`, other
    data under the same path)."""
    if src == LRA_RELEASE:
        return _download_hint("lra", root)
    folder = _listops_locate(src, root, cfg)
    meta = _generated_meta(folder, GENERATORS["listops"][0])
    sizes = meta.get("sizes") if isinstance(meta.get("sizes"), dict) else {}
    split = {k: _count(sizes, k, -1) for k in ("train", "val", "test")}
    flags = " --n 100000 --seed 0"
    if min(split.values()) > 0 and sum(split.values()) <= 10**8:  # (--n's bound)
        n = sum(split.values())
        seed = meta.get("seed")  # any int: `data generate listops --seed -1` takes it (a
        # seed hashed as text: other trees than seed 0's, which the command gave)
        seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
        flags = f" --n {n} --seed {seed}"
        for key, flag in (("val", "--n-val"), ("test", "--n-test")):
            if split[key] != max(1, round(0.02 * n)):
                flags += f" {flag} {split[key]}"
        # (the bounds of `data generate listops`' options: cli/data.py)
        got = {key: (_count(meta, key, default, most, least), default)
               for key, default, least, most in (("min_length", 500, 0, 100_000),
                                                 ("max_length", 2000, 2, 100_000),
                                                 ("max_depth", 10, 1, 100),
                                                 ("max_args", 10, 2, 100))}
        if got["max_length"][0] - got["min_length"][0] < 2:  # no length between: refused
            got["min_length"] = got["max_length"] = (0, 0)
        for key, (v, default) in got.items():
            if v != default:
                flags += f" --{key.replace('_', '-')} {v}"
    return f"ssmrepro data generate listops{flags}{dir_flag(root)}{_force_flag(folder)}"


@dataclass(frozen=True)
class PathfinderConfig:
    """Preprocessing for Pathfinder / Path-X. Every field is part of the cache key."""

    resolution: int = 32
    difficulty: str = "curv_contour_length_14"  # LRA / S4 use the hardest folder
    tokenize: bool = False  # True: gray levels 0..255 as tokens
    center: bool = False  # True: map [0, 1] to [-1, 1] (S4 class default; S4 configs use False)
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    split_seed: int = 42


@dataclass(frozen=True)
class PathXConfig(PathfinderConfig):
    resolution: int = 128


def _pf_locate(src: str, root: Path, cfg) -> Path:
    base = lra_dir(root) if src == LRA_RELEASE else generated_dir(root)
    return base / f"pathfinder{cfg.resolution}" / cfg.difficulty


def _pf_present(src: str, path: Path) -> bool:
    if src == GENERATED:  # the generator writes meta.json last, in either layout: a `--format
        # lra` folder cut short (Ctrl-C, kill -9) has metadata/ for its first thousands of
        # images only, and was trained on as the whole dataset ('present' in `data info`)
        return (path / "meta.json").is_file() and ((path / "metadata").is_dir()
                                                   or (path / "shards").is_dir())
    return (path / "metadata").is_dir() and not _generated_copy(src, path)


def _pf_prepare(src: str, path: Path, cfg) -> tuple[dict, dict]:
    images, labels = pathfinder.read_pathfinder_dir(path)
    if images.shape[1:] != (cfg.resolution, cfg.resolution):  # (a ValueError: a traceback)
        raise image.DamagedSource(f"{path}: images are {images.shape[1:]}, expected "
                                  f"{cfg.resolution}x{cfg.resolution}")
    n = len(labels)
    perm = np.random.default_rng(cfg.split_seed).permutation(n)
    n_val, n_test = int(cfg.val_fraction * n), int(cfg.test_fraction * n)
    parts = {
        "train": perm[n_val + n_test :],
        "val": perm[:n_val],
        "test": perm[n_val : n_val + n_test],
    }
    flat = images.reshape(n, -1)  # row-major: L = H * W
    out = {}
    for split, idx in parts.items():
        idx = np.sort(idx)
        out[split] = {
            "x": flat[idx],
            "lengths": np.full(len(idx), flat.shape[1], np.int32),
            "labels": labels[idx],
        }
    return out, {"kind": "pixels"}


def _pf_files(src: str, path: Path, cfg) -> list[Path]:
    return pathfinder.pathfinder_files(path)


def _pf_hint(src: str, root: Path, cfg) -> str:
    if src == LRA_RELEASE:
        return _download_hint("lra", root)
    res = cfg.resolution
    folder = _pf_locate(src, root, cfg)
    meta = _generated_meta(folder, GENERATORS["pathfinder"][0])  # its n and seed, as listops'
    n = _count(meta, "n", 0, 10**8) or 200000
    fmt = " --format lra" if meta.get("format") == "lra" else ""
    return (f"ssmrepro data generate pathfinder --res {res} --n {n} --seed "
            f"{_count(meta, 'seed', 0, 2**63 - 1)}{fmt}{dir_flag(root)}{_force_flag(folder)}")


def _fashion_dir(root: Path) -> Path:
    local = root / "fashion-mnist"
    if image.fashion_present(local) or not image.fashion_present(SYSTEM_FASHION_MNIST):
        return local
    return SYSTEM_FASHION_MNIST


def _digits_file(root: Path) -> Path:
    """``<root>/digits/digits.csv.gz`` when present (a copy, or a test fixture), else
    scikit-learn's installed file (which may not exist)."""
    local = root / "digits" / DIGITS_FILE
    installed = installed_digits_dir()
    if local.is_file() or installed is None or not (installed / DIGITS_FILE).is_file():
        return local
    return installed / DIGITS_FILE


def _image_locate(src: str, root: Path, cfg) -> Path:
    if src == DIGITS:
        return _digits_file(root)
    return root / image.CIFAR_DIRNAME if src == CIFAR10 else _fashion_dir(root)


def _image_present(src: str, path: Path) -> bool:
    if src == CIFAR10:
        return all(f.is_file() for f in image.cifar_files(path))
    if src == DIGITS:
        return path.is_file()
    return image.fashion_present(path)


def _image_files(src: str, path: Path, cfg) -> list[Path]:
    if src == DIGITS:
        return [path]
    return image.cifar_files(path) if src == CIFAR10 else image.fashion_files(path)


def _image_prepare(src: str, path: Path, cfg) -> tuple[dict, dict]:
    if src == CIFAR10:
        return image.prepare_cifar(path, cfg), {"kind": "pixels"}
    if not cfg.grayscale:
        raise ValueError(f"{src} is grayscale only")
    if src == DIGITS:
        splits, stats = image.prepare_digits(path, cfg)
    else:
        splits, stats = image.prepare_fashion32(path, cfg)
    return splits, {"kind": "pixels", "pixel_mean": [stats["mean"]], "pixel_std": [stats["std"]]}


def _image_hint(src: str, root: Path, cfg) -> str:
    if src == CIFAR10:
        return _download_hint("cifar10", root)
    if src == DIGITS:
        return (f"{extra_hint('standin')}: scikit-learn ships the digits (or copy its "
                f"{DIGITS_FILE} to {root / 'digits'})")
    local = root / "fashion-mnist"
    return f"apt-get install dataset-fashion-mnist (or copy its IDX .gz files to {local})"


def _text_locate(src: str, root: Path, cfg) -> Path:
    return root / "imdb" / text.IMDB_DIRNAME


def _text_prepare(src: str, path: Path, cfg) -> tuple[dict, dict]:
    splits, vocab = text.prepare_imdb(path, cfg)
    return splits, {"vocab": list(vocab), "kind": "tokens"}


def _text_files(src: str, path: Path, cfg) -> list[Path]:
    return [f for items in text.imdb_files(path).values() for f, _ in items]


def _aan_locate(src: str, root: Path, cfg) -> Path:
    return lra_dir(root) / retrieval.TSV_DIRNAME


def _aan_prepare(src: str, path: Path, cfg) -> tuple[dict, dict]:
    splits, vocab = retrieval.prepare_aan(path, cfg)
    return splits, {"vocab": list(vocab), "kind": "tokens"}


DATASETS: dict[str, DatasetDef] = {
    "listops": DatasetDef(
        name="listops",
        config_cls=listops.ListOpsConfig,
        sources=(LRA_RELEASE, GENERATED),
        default_accept=(LRA_RELEASE, GENERATED),
        n_classes=listops.N_CLASSES,
        kind="tokens",
        locate=_listops_locate,
        present=_listops_present,
        files=lambda s, p, c: [p / f for f in listops.SPLIT_FILES.values()],
        prepare=_listops_prepare,
        hint=_listops_hint,
        version=listops.PREPARE_VERSION,
        checks=listops.CHECKS_VERSION,
    ),
    "text": DatasetDef(
        name="text",
        config_cls=text.TextConfig,
        sources=(IMDB,),
        default_accept=(IMDB,),
        n_classes=text.N_CLASSES,
        kind="tokens",
        locate=_text_locate,
        present=lambda s, p: text.imdb_present(p),
        files=_text_files,
        prepare=_text_prepare,
        hint=lambda s, r, c: _download_hint("imdb", r),
        version=text.PREPARE_VERSION,
    ),
    "retrieval": DatasetDef(
        name="retrieval",
        config_cls=retrieval.RetrievalConfig,
        sources=(LRA_RELEASE,),
        default_accept=(LRA_RELEASE,),
        n_classes=retrieval.N_CLASSES,
        kind="tokens",
        locate=_aan_locate,
        present=lambda s, p: all(f.is_file() for f in retrieval.aan_files(p)),
        files=lambda s, p, c: retrieval.aan_files(p),
        prepare=_aan_prepare,
        hint=lambda s, r, c: _download_hint("lra", r),
        version=retrieval.PREPARE_VERSION,
        checks=retrieval.CHECKS_VERSION,
    ),
    "image": DatasetDef(
        name="image",
        config_cls=image.ImageConfig,
        sources=(CIFAR10, FASHION_MNIST32, DIGITS),
        default_accept=(CIFAR10,),
        n_classes=image.N_CLASSES,
        kind="pixels",
        locate=_image_locate,
        present=_image_present,
        files=_image_files,
        prepare=_image_prepare,
        hint=_image_hint,
        version=image.PREPARE_VERSION,
        checks=image.CHECKS_VERSION,
    ),
    "pathfinder": DatasetDef(
        name="pathfinder",
        config_cls=PathfinderConfig,
        sources=(LRA_RELEASE, GENERATED),
        default_accept=(LRA_RELEASE, GENERATED),
        n_classes=2,
        kind="pixels",
        locate=_pf_locate,
        present=_pf_present,
        files=_pf_files,
        prepare=_pf_prepare,
        hint=_pf_hint,
    ),
    "pathx": DatasetDef(
        name="pathx",
        config_cls=PathXConfig,
        sources=(LRA_RELEASE, GENERATED),
        default_accept=(LRA_RELEASE, GENERATED),
        n_classes=2,
        kind="pixels",
        locate=_pf_locate,
        present=_pf_present,
        files=_pf_files,
        prepare=_pf_prepare,
        hint=_pf_hint,
    ),
}
# what a generated dataset's meta.json names: the generator, and the newest version it writes
GENERATORS: dict[str, tuple[str, int]] = {
    "listops": ("ssmrepro.data.listops", listops.GENERATOR_VERSION),
    "pathfinder": ("ssmrepro.data.pathfinder", pathfinder.GENERATOR_VERSION),
    "pathx": ("ssmrepro.data.pathfinder", pathfinder.GENERATOR_VERSION),
}

ALIASES = {
    "aan": "retrieval",
    "imdb": "text",
    "cifar": "image",
    "scifar": "image",
    "cifar10": "image",
    "pathfinder32": "pathfinder",
    "pathfinder64": "pathfinder",
    "pathfinder128": "pathfinder",
    "pathfinder256": "pathfinder",
    "path-x": "pathx",
}


def dataset_config(dataset: str, **preprocessing: Any):
    """The dataset's preprocessing config; unknown keys raise ValueError listing the valid ones."""
    ddef = DATASETS[ALIASES.get(dataset, dataset)]
    valid = [f.name for f in dataclasses.fields(ddef.config_cls)]
    unknown = sorted(set(preprocessing) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown preprocessing option(s) {unknown} for dataset {ddef.name!r}; valid: {valid}")
    return ddef.config_cls(**preprocessing)


def find_source(dataset: str, root: Path, accept: Sequence[str], cfg) -> tuple[str, Path] | None:
    """First accepted source whose files are present: (source name, path) or None."""
    ddef = DATASETS[dataset]
    for src in accept:
        path = ddef.locate(src, root, cfg)
        if ddef.present(src, path):
            return src, path
    return None


def unavailable_message(dataset: str, split: str, root: Path, accept: Sequence[str], cfg) -> str:
    why = folder_problem(root)
    if why not in (None, "no such folder"):  # each suggested command would fail on it too
        # (a file, a symbolic link loop, a path below a file)
        what = "is a file, not a folder" if why == "a file, not a folder" else f"is not a folder: {why}"
        return (f"LRA dataset {dataset!r} (split {split!r}): the data root {str(root)!r} {what}; "
                "point $SSMREPRO_DATA (or --dir of `ssmrepro data ...`) at a folder")
    ddef = DATASETS[dataset]
    looked = "; ".join(f"{s}: {ddef.locate(s, root, cfg)}" for s in accept)
    cmds = " | ".join(f"`{ddef.hint(s, root, cfg)}`" for s in accept)
    which = "this command" if len(accept) == 1 else "one of these commands"
    copies = [str(p) for s in accept if _generated_copy(s, p := ddef.locate(s, root, cfg))]
    if copies:  # (not a word why the files there were not read)
        looked += (f"; {', '.join(copies)} holds a meta.json: data made by `ssmrepro data "
                   "generate`, not the release (`data generate` without --out writes where "
                   "source generated is read)")
    return (
        f"LRA dataset {dataset!r} (split {split!r}) has no data under data root {str(root)!r}: "
        "none of the "
        f"accepted sources [{', '.join(accept)}] is present (looked in {looked}). Data is never "
        f"downloaded or generated implicitly; run {which}: {cmds}"
    )


def load_lra(
    dataset: str,
    split: str,
    root: str | Path | None = None,
    accept_sources: Sequence[str] | None = None,
    *,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    **preprocessing: Any,
) -> LRADataset:
    """Load one split of an LRA dataset, preparing (and caching) it on first use.

    Args:
        dataset: ``listops``, ``text``, ``retrieval``, ``image``, ``pathfinder`` or ``pathx``
            (aliases: aan, imdb, cifar, scifar, path-x, pathfinder{32,64,128,256} = pathfinder
            at that resolution).
        split: ``train``, ``val`` or ``test``.
        root: data root; default ``$SSMREPRO_DATA`` or ``./data``.
        accept_sources: data sources allowed, in order of preference (default: the dataset's
            real sources, e.g. ``["lra_release", "generated"]`` for ListOps).
        cache: read / write prepared arrays under ``cache_dir`` (default ``<root>/.cache``).
        **preprocessing: fields of the dataset's config dataclass (e.g. ``max_len=2048``,
            ``level="byte"``, ``resolution=64``); unknown names raise ValueError.

    Raises:
        DataUnavailable: no accepted source is present (the message names the command to run).
    """
    name = ALIASES.get(dataset, dataset)
    if name == "pathfinder" and dataset[len("pathfinder") :].isdigit():  # pathfinder32 / 64 / 128 / 256
        preprocessing.setdefault("resolution", int(dataset[len("pathfinder") :]))
    if name not in DATASETS:
        raise ValueError(
            f"unknown LRA dataset {dataset!r}; known: {sorted(DATASETS)} (aliases {sorted(ALIASES)})")
    ddef = DATASETS[name]
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    cfg = dataset_config(name, **preprocessing)
    accept = tuple(accept_sources) if accept_sources is not None else ddef.default_accept
    bad = [s for s in accept if s not in ddef.sources]
    if bad or not accept:
        raise ValueError(f"dataset {name!r} has sources {list(ddef.sources)}; cannot accept {bad or '[]'}")
    root_path = data_root(root)
    found = _identify(name, root_path, accept, cfg)
    if found is None:
        raise DataUnavailable(unavailable_message(name, split, root_path, accept, cfg))
    src, path, identity, stamp, key = found
    cdir = Path(cache_dir) if cache_dir is not None else cache_root(root_path)
    entry_path = entry_dir(cdir, name, key)
    if cache and entry_path in _UNCACHED:  # prepared by this process, and not cacheable
        arrays, meta = _UNCACHED[entry_path]
        return _build(name, split, src, path, cfg, arrays, meta, entry_path)
    loaded = load_entry(entry_path) if cache else None
    made_of = dict(dataset=name, source=src, config=config_dict(cfg), files=len(identity),
                   kind=ddef.kind)  # a listops entry whose meta said pixels was read as images
    why = (entry_problem(*loaded, n_classes=ddef.n_classes, made_of=made_of)
           if loaded is not None else None)
    if why is not None:  # readable, but not what prepare() writes: rebuild it
        warnings.warn(f"damaged cache entry {entry_path} ({why}); rebuilding it", stacklevel=2)
        remove_entry(entry_path)
        loaded = None
    elif loaded is not None and loaded[1].get("sources_changed", stamp) != stamp:
        # same sizes and mtimes, other change times: rewritten in place with the mtime put back,
        # or another data root's copies sharing this cache; the old arrays were served silently
        warnings.warn(f"cache entry {entry_path} was built from source files changed since (their "
                      "change times differ: rewritten in place, copied, or another data root "
                      "sharing this cache); rebuilding it", stacklevel=2)
        remove_entry(entry_path)
        loaded = None
    elif loaded is not None and _checks_of(loaded[1]) < ddef.checks:
        warnings.warn(f"cache entry {entry_path} was prepared under older {name} checks "
                      f"(revision {_checks_of(loaded[1])}, now {ddef.checks}: its source may "
                      "hold what is refused now); preparing it again", stacklevel=2)
        remove_entry(entry_path)
        loaded = None
    if loaded is None:
        # the command that replaces damaged source files (generated Pathfinder shards cut or
        # missing said only 'damaged generated Pathfinder shards: ...', naming no way out)
        again = f"replace them: `{ddef.hint(src, root_path, cfg)}`"
        try:
            splits, meta = ddef.prepare(src, path, cfg)
        except image.DamagedSource as err:  # a source file that is not what it should be (a
            # CIFAR batch naming other code, a cut pickle): a bare ValueError failed every pack
            raise DataUnavailable(f"the {name} data at {path} ({src}) are damaged: {err}; "
                                  f"{again}") from None
        arrays = {f"{s}.{k}": v for s, d in splits.items() for k, v in d.items()}
        meta = dict(meta, **made_of, sources_changed=stamp, checks=ddef.checks)
        why = entry_problem(arrays, meta, n_classes=ddef.n_classes)
        if why is not None:  # the source files themselves are damaged (e.g. a label 7 of 2)
            raise DataUnavailable(f"the {name} data at {path} ({src}) are damaged: {why}; "
                                  f"{again}")
        if cache:
            try:
                save_entry(entry_path, arrays, meta)
            except OSError as err:  # a data root shared read-only, or a full disk: every run
                # failed with `cannot use <root>/.cache/.tmp-...: read-only file system`; the
                # cache only spares preparing again, so the arrays are used as prepared
                warnings.warn(f"the prepared {name} data cannot be cached at {entry_path} "
                              f"({os_reason(err)}): used from memory, prepared again by each "
                              "process that reads them", stacklevel=2)
                _UNCACHED.clear()  # one entry's arrays held: a sweep over 30 preprocessings
                # of a read-only root held all 30 datasets in the memory of each worker
                _UNCACHED[entry_path] = (arrays, meta)  # (its other splits: not prepared again)
            else:
                loaded = load_entry(entry_path)  # memory-mapped when the entry is readable
        if loaded is None:
            loaded = (arrays, meta)
    arrays, meta = loaded
    return _build(name, split, src, path, cfg, arrays, meta, entry_path if cache else None)


# entry -> (arrays, meta) prepared by this process where the entry could not be written (a
# read-only or full data root): load_lra's other splits read them, not prepared again each;
# the last entry prepared alone (an entry's arrays may take gigabytes)
_UNCACHED: dict[Path, tuple[dict[str, np.ndarray], dict[str, Any]]] = {}


def _checks_of(meta: dict[str, Any]) -> int:
    """The revision of refusals (``DatasetDef.checks``) a cache entry was prepared under: 1
    where its meta.json names none (written before they were recorded)."""
    checks = meta.get("checks", 1)
    return checks if isinstance(checks, int) and not isinstance(checks, bool) else 0


def outdated_entries(cache_dir: Path) -> list[tuple[Path, str]]:
    """(entry, why) for each cache entry of the folder prepared under older checks of its
    dataset (``DatasetDef.checks``): what the next command that reads it removes and prepares
    again, as a damaged one (``data info`` listed those only). An entry whose meta.json cannot
    be read is passed over (``cache.damaged_entries`` names it)."""
    found = []
    for name in entry_names(cache_dir):
        m = re.fullmatch(r"([a-z]+)-[0-9a-f]{20}", name)
        ddef = DATASETS.get(m[1]) if m else None
        if ddef is None or ddef.checks <= 1:
            continue
        try:
            meta = json.loads(read_small(cache_dir / name / META_FILE, MAX_META_BYTES))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and _checks_of(meta) < ddef.checks:
            found.append((cache_dir / name, f"prepared under older {ddef.name} checks, revision "
                          f"{_checks_of(meta)}, now {ddef.checks}: its source may hold what is "
                          "refused now"))
    return found


def _identify(name: str, root: Path, accept: Sequence[str], cfg):
    """The first accepted source present under ``root`` and the identity of its files: ``(source,
    path, file identity, change stamp, cache key)``, or None when no accepted source is there."""
    found = find_source(name, root, accept, cfg)
    if found is None:
        return None
    src, path = found
    changed: list[tuple[str, int]] = []
    try:
        identity = file_identity(DATASETS[name].files(src, path, cfg), root, changed)
    except DataUnavailable as err:  # a file missing or no regular file: the command that
        # writes them again (it said 'generate or download the data again', naming none)
        raise DataUnavailable(f"the {name} data at {path} ({src}) are damaged: {err}: "
                              f"`{DATASETS[name].hint(src, root, cfg)}`") from None
    return (src, path, identity, change_stamp(changed),
            cache_key(name, src, identity, cfg, DATASETS[name].version))


def data_key(dataset: str, source: str, root: str | Path | None = None,
             **preprocessing: Any) -> str | None:
    """The name of the cache entry (``<dataset>-<key>``) that ``load_lra`` reads for ``dataset``
    from ``source`` under ``root`` now (what a run's record keeps as ``data.cache_key``), or None
    when that source is not present. The key changes with the source's files (their paths,
    sizes and modification times) and with every preprocessing field."""
    name = ALIASES.get(dataset, dataset)
    found = _identify(name, data_root(root), [source], dataset_config(name, **preprocessing))
    return None if found is None else entry_dir(Path(), name, found[4]).name


def data_sample(dataset: str, source: str, root: str | Path | None = None,
                **preprocessing: Any) -> str | None:
    """A digest of a sample of the bytes of ``dataset``'s files from ``source`` under ``root``
    (``cache.content_sample``: what the cache key's sizes and modification times miss), or None
    when that source is not present. A run's record keeps it as ``data.sample``."""
    name = ALIASES.get(dataset, dataset)
    cfg = dataset_config(name, **preprocessing)
    found = find_source(name, data_root(root), [source], cfg)
    if found is None:
        return None
    src, path = found
    return content_sample(DATASETS[name].files(src, path, cfg), path)


INPUT_KINDS = ("tokens", "pixels")  # what prepare() writes in meta.json


def entry_problem(arrays: dict[str, np.ndarray], meta: dict[str, Any],
                  n_classes: int | None = None,
                  made_of: dict[str, Any] | None = None) -> str | None:
    """Why a loaded cache entry cannot be a prepared dataset, else None: every split has its
    inputs (``<split>.x``, numbers) and integer labels (in [0, ``n_classes``) when given: a label
    out of range failed every pack, or, at -100, was silently ignored by the loss), token inputs
    are ids of the meta's vocabulary, each split's arrays agree on the number of examples, and
    the meta names the input kind; with ``made_of`` (dataset, source, preprocessing config and
    number of source files of the entry's key, and the dataset's input kind), the meta names
    those (another entry's arrays copied under this key, max_len 32 for 64, were trained on
    without a word; a ListOps entry whose meta said pixels was read as images)."""
    for k, want in (made_of or {}).items():
        if meta.get(k) != want:
            return f"meta.json says {k} {meta.get(k)!r}, not this entry's {want!r}"
    kind, vocab = meta.get("kind"), meta.get("vocab")
    if kind not in INPUT_KINDS:  # an unknown kind was built as a dataset of that kind
        return f"meta.json names no input kind of {list(INPUT_KINDS)}"
    if kind == "tokens" and not (isinstance(vocab, list) and vocab):  # the ids went unchecked
        return "meta.json of token inputs has no vocabulary list"
    for split in SPLITS:
        x, y = arrays.get(f"{split}.x"), arrays.get(f"{split}.labels")
        if x is None or y is None:
            return f"no {split}.x or {split}.labels array"
        if not np.issubdtype(x.dtype, np.number) or not np.issubdtype(y.dtype, np.integer):
            return f"{split}: inputs {x.dtype} / labels {y.dtype} are not numbers / integers"
        if kind == "tokens" and not all(np.issubdtype(a.dtype, np.integer) for a in
                                        (x, arrays.get(f"{split}.x2", x))):
            # token ids of 1.5 were cut to 1 without a word
            return f"{split}: token inputs {x.dtype} are not integers"
        if x.ndim < 2 or y.ndim != 1:  # one example per row, one label per example
            return f"{split}: inputs of shape {x.shape} / labels of shape {y.shape}"
        rows = {k: a.shape[0] if a.ndim else -1 for k, a in arrays.items()
                if k.startswith(f"{split}.")}
        if len(set(rows.values())) != 1:
            return f"{split}: arrays of different lengths {rows}"
        if n_classes is not None and y.size and not (0 <= y.min() and y.max() < n_classes):
            return f"{split}: labels outside [0, {n_classes})"
        if kind == "pixels" and x.dtype != np.uint8 and x.size and not (
                np.isfinite(x).all() and 0 <= x.min() and x.max() <= 255):
            # (prepare() writes uint8) NaN pixels were trained on, the run recorded 'diverged'
            # at step 0; pixels of 1e30 trained 'ok' on noise
            return f"{split}.x: pixel values that are not numbers from 0 to 255"
        if kind == "tokens":
            for k in (f"{split}.x", f"{split}.x2"):
                a = arrays.get(k)
                if a is not None and a.size and not (0 <= a.min() and a.max() < len(vocab)):
                    return f"{k}: token ids outside the vocabulary of {len(vocab)}"
        for k, inputs in ((f"{split}.lengths", x), (f"{split}.lengths2", arrays.get(f"{split}.x2"))):
            a = arrays.get(k)  # -5 cut a batch to all but its last 5 tokens and masked every one
            if a is None or inputs is None:
                continue
            if not np.issubdtype(a.dtype, np.integer) or a.ndim != 1 or (a.size and not (
                    0 <= a.min() and a.max() <= inputs.shape[1])):
                return (f"{k}: lengths that are not whole numbers from 0 to the inputs' "
                        f"{inputs.shape[1]} positions")
    return None


def _build(dataset, split, src, path, cfg, arrays, meta, entry_path) -> LRADataset:
    ddef = DATASETS[dataset]
    g = arrays.get
    kind = meta["kind"]
    vocab = tuple(meta["vocab"]) if meta.get("vocab") else None
    mean, std = (0.0,), (1.0,)
    if kind == "pixels":
        if getattr(cfg, "tokenize", False):
            kind, vocab = "tokens", tuple(f"<{v}>" for v in range(256))
        elif dataset == "image":
            if "pixel_mean" in meta:  # the Fashion-MNIST / digits proxies: their own statistics
                mean, std = tuple(meta["pixel_mean"]), tuple(meta["pixel_std"])
            elif not cfg.normalize:
                pass
            elif cfg.grayscale:
                mean, std = (cfg.mean,), (cfg.std,)
            else:
                mean, std = tuple(cfg.color_mean), tuple(cfg.color_std)
        elif getattr(cfg, "center", False):
            mean, std = (0.5,), (0.5,)
    return LRADataset(
        dataset=dataset,
        split=split,
        source=src,
        x=g(f"{split}.x"),
        lengths=g(f"{split}.lengths"),
        labels=g(f"{split}.labels"),
        n_classes=ddef.n_classes,
        kind=kind,
        vocab=vocab,
        x2=g(f"{split}.x2"),
        lengths2=g(f"{split}.lengths2"),
        pixel_mean=mean,
        pixel_std=std,
        config=config_dict(cfg),
        path=path,
        cache_path=entry_path,
        cut=_cut_of(meta, split),
    )


def _cut_of(meta: dict[str, Any], split: str) -> int:
    """The number of ``split``'s examples that preparing cut to max_len (meta.json's "cut"),
    0 where it names none."""
    n = (meta.get("cut") or {}).get(split, 0) if isinstance(meta.get("cut"), dict) else 0
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def available_sources(root: str | Path | None = None) -> list[dict[str, Any]]:
    """For ``ssmrepro data info``: one row per (dataset, source) with its path and presence."""
    root_path = data_root(root)
    rows = []
    for name, ddef in DATASETS.items():
        cfg = ddef.config_cls()
        for src in ddef.sources:
            path = ddef.locate(src, root_path, cfg)
            rows.append(
                {
                    "dataset": name,
                    "source": src,
                    "path": path,
                    "present": ddef.present(src, path),
                    "default": src in ddef.default_accept,
                    "hint": ddef.hint(src, root_path, cfg),
                }
            )
    return rows
