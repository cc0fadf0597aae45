"""Library (data): LRA Image, sequential grayscale CIFAR-10 (sCIFAR), plus two offline stand-ins.

S4 conventions (``src/dataloaders/basic.py``): torchvision ``Grayscale()`` (PIL ``convert("L")``,
ITU-R 601 luma 0.299 R + 0.587 G + 0.114 B, rounded to uint8), ``ToTensor()`` (/255), then
``Normalize(mean=122.6/255, std=61.0/255)``; the 32x32 image is read in raster (row-major) order as
a length-1024 sequence with ``d_input = 1``. Validation is a seeded 10% of the training set (45k /
5k), test is CIFAR's test batch (10k).

We keep the uint8 grayscale values on disk and in memory and apply the normalisation when a batch
is read (``LRADataset.inputs``), which is exact because the normalisation is affine.

``tokenize=True`` gives LRA's original variant instead: the 256 gray levels as integer tokens.

The Fashion-MNIST stand-in (``proxy:fashion_mnist32``) zero-pads 28x28 to 32x32 (L = 1024) and is
normalised with its own training mean / std. It is never used unless explicitly accepted.

The digits stand-in (``proxy:digits``) is the UCI handwritten digits as scikit-learn ships them
(``sklearn/datasets/data/digits.csv.gz``: 1,797 rows of 64 gray levels 0..16 then the class 0..9;
read straight from the file, scikit-learn is not imported). Each 8x8 image is read in raster order
as a length-64 sequence (not upsampled: 16x shorter than sCIFAR's 1,024), normalised with its own
training mean / std. Split: a permutation seeded with ``split_seed`` (42); the first 20%
(``DIGITS_TEST_FRACTION``) of it is test, the next ``val_fraction`` (10%) validation, the rest
training: 359 / 179 / 1,259 images. It is never used unless explicitly accepted.
"""

from __future__ import annotations

import gzip
import math
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CIFAR_DIRNAME = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
N_CLASSES = 10
PREPARE_VERSION = 1
# what preparing refuses (``DatasetDef.checks``, not in the cache key: the runs stay valid);
# 2: Fashion-MNIST images of other than 28 x 28 pixels (10 x 10 were trained on as 14 x 14)
CHECKS_VERSION = 2
DIGITS_TEST_FRACTION = 0.2


@dataclass(frozen=True)
class ImageConfig:
    """Preprocessing for sCIFAR. Every field is part of the cache key."""

    grayscale: bool = True
    tokenize: bool = False  # True: gray levels 0..255 as tokens (LRA); False: floats (S4)
    normalize: bool = True
    mean: float = 122.6 / 255  # grayscale normalisation (S4)
    std: float = 61.0 / 255
    color_mean: tuple[float, float, float] = (0.4914, 0.4822, 0.4465)  # grayscale=False only
    color_std: tuple[float, float, float] = (0.247, 0.243, 0.261)
    val_fraction: float = 0.1
    split_seed: int = 42


def rgb_to_gray(rgb: np.ndarray) -> np.ndarray:
    """uint8 (..., 3, H, W) -> uint8 (..., H, W) with PIL's ``convert("L")`` integer formula
    ``(19595 R + 38470 G + 7471 B + 32768) >> 16`` (ITU-R 601-2: 0.299, 0.587, 0.114)."""
    r, g, b = (rgb[..., i, :, :].astype(np.uint32) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


# what a CIFAR-10 python batch's pickle may build: numpy arrays and dtypes (numpy 1 and 2 module
# names; protocol 5 rebuilds from a buffer) and bytes written by Python 3 (_codecs.encode)
_CIFAR_GLOBALS = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
})


class DamagedSource(ValueError):
    """A source file that is not what its dataset reads (cut short, foreign, or a pickle naming
    other code): the loader says the data are damaged and how to replace them."""


class _BatchUnpickler(pickle.Unpickler):
    """An unpickler that builds plain containers, numbers, text, bytes and numpy arrays only: a
    pickle can call any function it names (``os.system``), and a batch comes from wherever
    `data download cifar10 --url` fetched it, or was copied into the data root by hand."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR-10 batch "
                                         "does not (refused: a pickle can run any code it names)")
        return super().find_class(module, name)


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch -> (uint8 (N, 3, 32, 32), int64 labels (N,)).

    The official batches are pickles (of a dict with ``b"data"`` (N, 3072) channel-major and
    ``b"labels"``), read with an unpickler that builds nothing but containers and numpy arrays;
    DamagedSource when the file is not such a batch (damaged, foreign, or naming other code).
    """
    try:
        with open(path, "rb") as f:
            d = _BatchUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, MemoryError, RecursionError, UnicodeDecodeError) as err:
        raise DamagedSource(f"{path}: not a CIFAR-10 python batch ({type(err).__name__}: {err})"
                         ) from None
    if not isinstance(d, dict):
        raise DamagedSource(f"{path}: not a CIFAR-10 python batch (a {type(d).__name__}, not a dict)")
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise DamagedSource(f"{path}: not a CIFAR-10 python batch (no data / labels)")
    # pixels of another type were cast to uint8 without a word (300 read as 44)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or (
            data.shape[1] != 3 * 32 * 32):
        raise DamagedSource(f"{path}: its data are not uint8 rows of 3 x 32 x 32 pixels "
                         f"({getattr(data, 'dtype', type(data).__name__)} "
                         f"{getattr(data, 'shape', '')})")
    labels = np.asarray(labels)
    if labels.shape != (len(data),) or labels.dtype.kind not in "iu":
        raise DamagedSource(f"{path}: not one whole-number label per image ({labels.dtype} "
                         f"{labels.shape} for {len(data)} images)")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def cifar_files(directory: Path) -> list[Path]:
    return [directory / n for n in (*TRAIN_BATCHES, TEST_BATCH)]


def split_train_val(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded permutation split: (train indices, val indices), val = int(val_fraction * n)."""
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(val_fraction * n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _to_sequences(rgb: np.ndarray, grayscale: bool) -> np.ndarray:
    if grayscale:
        return rgb_to_gray(rgb).reshape(len(rgb), -1)  # (N, 1024), row-major
    return rgb.transpose(0, 2, 3, 1).reshape(len(rgb), -1, 3)  # (N, 1024, 3)


def prepare_cifar(directory: Path, cfg: ImageConfig) -> dict[str, dict[str, np.ndarray]]:
    """Read the CIFAR-10 python batches: per split x uint8 (N, 1024[, 3]), lengths, labels."""
    parts = [read_cifar_batch(directory / n) for n in TRAIN_BATCHES]
    train_rgb = np.concatenate([p[0] for p in parts])
    train_y = np.concatenate([p[1] for p in parts])
    test_rgb, test_y = read_cifar_batch(directory / TEST_BATCH)
    tr, va = split_train_val(len(train_y), cfg.val_fraction, cfg.split_seed)
    x_train = _to_sequences(train_rgb, cfg.grayscale)
    x_test = _to_sequences(test_rgb, cfg.grayscale)
    out = {}
    for split, x, y in (
        ("train", x_train[tr], train_y[tr]),
        ("val", x_train[va], train_y[va]),
        ("test", x_test, test_y),
    ):
        out[split] = {"x": x, "lengths": np.full(len(y), x.shape[1], np.int32), "labels": y}
    return out


# ------------------------------------------------------------------------- Fashion-MNIST stand-in


def _find(directory: Path, stem: str) -> Path:
    for cand in (directory / f"{stem}.gz", directory / stem):
        if cand.exists():
            return cand
    raise FileNotFoundError(f"{stem}(.gz) not found in {directory}")


def fashion_files(directory: Path) -> list[Path]:
    return [_find(directory, s) for pair in FASHION_FILES.values() for s in pair]


def fashion_present(directory: Path) -> bool:
    try:
        fashion_files(directory)
    except FileNotFoundError:
        return False
    return True


MAX_IDX_BYTES = 1 << 30  # Fashion-MNIST's training images take 47 MB
MAX_DIGITS_BYTES = 1 << 26  # scikit-learn's digits table takes 0.3 MB unpacked


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (optionally gzipped): uint8 data with the shape from its header.
    DamagedSource naming the file when it is no unsigned-byte IDX file, holds other than its
    header declares (cut short, or more), or is a gzip stream that cannot be read (cut, a
    changed byte); no more than the declared bytes are read (numpy's 'cannot reshape', an
    IndexError or gzip's EOFError were tracebacks, a gzip of gigabytes was unpacked whole)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            head = f.read(4)
            if len(head) < 4 or head[:3] != b"\x00\x00\x08" or not head[3]:
                raise DamagedSource(f"{path}: not an unsigned-byte IDX file")
            dims = f.read(4 * head[3])
            if len(dims) < 4 * head[3]:
                raise DamagedSource(f"{path}: an IDX header cut short")
            shape = tuple(int.from_bytes(dims[i : i + 4], "big") for i in range(0, len(dims), 4))
            need = math.prod(shape)
            if need > MAX_IDX_BYTES:
                raise DamagedSource(f"{path}: its header declares an array of shape {shape} "
                                    f"({need:,} bytes), more than {MAX_IDX_BYTES:,}")
            raw = f.read(need + 1)
    except (OSError, EOFError, zlib.error) as err:
        raise DamagedSource(f"{path}: cannot be read ({type(err).__name__}: {err})") from None
    if len(raw) != need:
        raise DamagedSource(f"{path}: its header declares an array of shape {shape} ({need:,} "
                            f"bytes) where {'more' if len(raw) > need else f'{len(raw):,}'} "
                            "follow it")
    return np.frombuffer(raw, dtype=np.uint8).reshape(shape)


def _fashion_split(directory: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """One Fashion-MNIST split's images (N, 28, 28) and labels (N,); DamagedSource naming the
    file otherwise (images of 2 dimensions were a broadcast traceback, of 10 x 10 pixels
    trained on; a label past the last image an IndexError; an empty split a reshape error)."""
    xf, yf = (_find(directory, stem) for stem in FASHION_FILES[split])
    x, y = read_idx(xf), read_idx(yf)
    if x.ndim != 3 or x.shape[1:] != (28, 28):
        raise DamagedSource(f"{xf}: images of shape {x.shape[1:]}, not Fashion-MNIST's 28 x 28")
    if y.ndim != 1:
        raise DamagedSource(f"{yf}: labels of shape {y.shape}, not one number per image")
    if len(x) != len(y) or not len(y):
        raise DamagedSource(f"{xf} holds {len(x):,} images and {yf.name} {len(y):,} labels "
                            "(one label per image, at least one)")
    return x, y.astype(np.int64)


def prepare_fashion32(directory: Path, cfg: ImageConfig) -> tuple[dict[str, dict[str, np.ndarray]], dict]:
    """Fashion-MNIST padded to 32x32: per split arrays, and {"mean", "std"} of the padded
    train set."""
    train_x, train_y = _fashion_split(directory, "train")
    test_x, test_y = _fashion_split(directory, "test")
    train_x = np.pad(train_x, ((0, 0), (2, 2), (2, 2)))
    test_x = np.pad(test_x, ((0, 0), (2, 2), (2, 2)))
    tr, va = split_train_val(len(train_y), cfg.val_fraction, cfg.split_seed)
    flat_train = train_x.reshape(len(train_x), -1)
    stats = {"mean": float(flat_train.mean() / 255), "std": float(flat_train.std() / 255)}
    out = {}
    for split, x, y in (
        ("train", flat_train[tr], train_y[tr]),
        ("val", flat_train[va], train_y[va]),
        ("test", test_x.reshape(len(test_x), -1), test_y),
    ):
        out[split] = {"x": x, "lengths": np.full(len(y), x.shape[1], np.int32), "labels": y}
    return out, stats


# ------------------------------------------------------------------------------- digits stand-in


def read_digits_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's ``digits.csv.gz`` (or plain csv) -> (uint8 (N, 64) gray levels 0..16,
    int64 labels (N,)). Each row: 64 pixel values in raster order, then the class."""
    import io

    opener = gzip.open if path.suffix == ".gz" else open
    try:  # (scikit-learn's table takes 0.3 MB: a gzip of gigabytes is not unpacked whole)
        with opener(path, "rb") as f:
            raw = f.read(MAX_DIGITS_BYTES + 1)
        if len(raw) > MAX_DIGITS_BYTES:
            raise DamagedSource(f"{path}: more than {MAX_DIGITS_BYTES:,} bytes, not the digits "
                                "table")
        data = np.loadtxt(io.StringIO(raw.decode("utf-8")), delimiter=",", dtype=np.int64,
                          ndmin=2) if raw.strip() else np.zeros((0, 0), np.int64)
    except (OSError, EOFError, zlib.error, ValueError) as err:  # a gzip cut short or none,
        # text that is no table of numbers: gzip's, numpy's or a decoder's traceback
        if isinstance(err, DamagedSource):
            raise
        raise DamagedSource(f"{path}: not the digits table ({type(err).__name__}: "
                            f"{str(err)[:200]})") from None
    if data.ndim != 2 or data.shape[1] != 65 or data.size == 0:
        raise DamagedSource(f"{path}: not the digits table (rows of 64 pixels and a label), "
                            f"shape {data.shape}")
    x, y = data[:, :64], data[:, 64]
    if x.min() < 0 or x.max() > 16 or y.min() < 0 or y.max() >= N_CLASSES:
        raise DamagedSource(f"{path}: pixel values outside 0..16 or labels outside 0..9")
    return x.astype(np.uint8), y


def prepare_digits(path: Path, cfg: ImageConfig) -> tuple[dict[str, dict[str, np.ndarray]], dict]:
    """The 8x8 digits as length-64 sequences: per split arrays (the seeded test / val / train
    split of the module docstring), and {"mean", "std"} of the training pixels in the /255 units
    ``LRADataset.to_float`` divides by (so the inputs are z-scored with training statistics)."""
    x, y = read_digits_csv(path)
    n = len(y)
    perm = np.random.default_rng(cfg.split_seed).permutation(n)
    n_test, n_val = int(DIGITS_TEST_FRACTION * n), int(cfg.val_fraction * n)
    parts = {"test": np.sort(perm[:n_test]), "val": np.sort(perm[n_test : n_test + n_val]),
             "train": np.sort(perm[n_test + n_val :])}
    train = x[parts["train"]].astype(np.float64)
    stats = {"mean": float(train.mean() / 255), "std": float(train.std() / 255)}
    out = {}
    for split in ("train", "val", "test"):
        rows = parts[split]
        out[split] = {"x": x[rows], "lengths": np.full(len(rows), 64, np.int32), "labels": y[rows]}
    return out, stats
