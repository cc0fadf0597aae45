"""Library (data): where LRA data lives on disk, the data-source names, and the one error we raise.

The data root is ``ssmrepro.util.data_root`` (first hit wins): an explicit ``--dir`` / ``root=``
argument, the environment variable ``SSMREPRO_DATA``, then ``./data`` relative to the current
directory.

Layout under the data root (everything the loaders read)::

    <root>/lra/listops-1000/basic_{train,val,test}.tsv             lra_release
    <root>/lra/tsv_data/new_aan_pairs.{train,eval,test}.tsv        lra_release
    <root>/lra/pathfinder{32,64,128,256}/curv_contour_length_14/   lra_release
    <root>/cifar-10-batches-py/{data_batch_1..5,test_batch}        download:cifar10
    <root>/imdb/aclImdb/{train,test}/{pos,neg}/*.txt               download:imdb
    <root>/fashion-mnist/*-ubyte.gz                                proxy:fashion_mnist32
    <root>/digits/digits.csv.gz                                    proxy:digits (else scikit-learn's)
    <root>/generated/listops/basic_{train,val,test}.tsv            generated
    <root>/generated/pathfinder{res}/curv_contour_length_14/       generated
    <root>/downloads/                                              archives (+ .part files)
    <root>/.cache/                                                 prepared arrays (cache.py)

Every dataset object carries the name of the source it came from, so a number trained on generated
or proxy data can never be mistaken for one trained on the official release.
"""

from __future__ import annotations

from pathlib import Path

from ..util import DataUnavailable as DataUnavailable  # (re-exported: data_root raises it)
from ..util import data_root

# Data-source names. Stored on every LRADataset (`.source`) and meant to be written into results.
LRA_RELEASE = "lra_release"  # the official lra_release.gz archive, re-laid out under <root>/lra
GENERATED = "generated"  # our own generators (ListOps, Pathfinder), `ssmrepro data generate ...`
CIFAR10 = "download:cifar10"  # the CIFAR-10 python batches from the Toronto site
IMDB = "download:imdb"  # the aclImdb_v1 archive from Stanford
FASHION_MNIST32 = "proxy:fashion_mnist32"  # stand-in for sCIFAR: Fashion-MNIST padded to 32x32
DIGITS = "proxy:digits"  # stand-in for sCIFAR: UCI handwritten digits 8x8 as shipped by scikit-learn

ALL_SOURCES = (LRA_RELEASE, GENERATED, CIFAR10, IMDB, FASHION_MNIST32, DIGITS)

# Debian's `dataset-fashion-mnist` package installs the IDX files here.
SYSTEM_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")

# scikit-learn (the optional extra `pip install -e '.[standin]'`) ships the digits as this file.
DIGITS_FILE = "digits.csv.gz"


def installed_digits_dir() -> Path | None:
    """The folder of scikit-learn's ``digits.csv.gz`` when scikit-learn is installed (found
    without importing it), else None. Nothing is ever downloaded."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent / "datasets" / "data"


def dir_flag(root: Path) -> str:
    """The ``--dir`` part of a suggested command (empty when the default root applies)."""
    try:
        default = data_root(None)
    except DataUnavailable:  # a $SSMREPRO_DATA refused (`stray_name`): no default root, and a
        default = None  # command given --dir was refused for it while suggesting commands
    if root == default:
        return ""
    from ..util import shell_word  # a root 'my data; x' ran `x` and downloaded into 'my' when
    # the line was pasted; one holding a newline put the command on two lines

    return f" --dir {shell_word(str(root))}"


def lra_dir(root: Path) -> Path:
    return root / "lra"


def generated_dir(root: Path) -> Path:
    return root / "generated"


def downloads_dir(root: Path) -> Path:
    return root / "downloads"


def cache_root(root: Path) -> Path:
    return root / ".cache"
