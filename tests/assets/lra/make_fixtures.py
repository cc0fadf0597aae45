"""Rebuild the tiny LRA fixtures in this folder (deterministic; a few KB in total).

    .venv/bin/python tests/assets/lra/make_fixtures.py

The folder is laid out like a data root (see ssmrepro/data/sources.py):

    lra/listops-1000/basic_{train,val,test}.tsv        LRA TSV, header Source<TAB>Target
    lra/tsv_data/new_aan_pairs.{train,eval,test}.tsv   label, id1, id2, text1, text2 (no header)
    lra/pathfinder32/curv_contour_length_14/           imgs/0/sample_<i>.png + metadata/0.npy (text)
    lra/pathfinder32/curv_baseline/                    includes the blacklisted empty sample_172.png
    lra/pathfinder128/curv_contour_length_14/          Path-X layout
    cifar-10-batches-py/                               python pickles, 2 images per batch
    imdb/aclImdb/{train,test}/{pos,neg}/*.txt
    fashion-mnist/*-ubyte.gz                           IDX files (Debian dataset-fashion-mnist)
    digits/digits.csv.gz                               scikit-learn's digits format, 200 random rows
"""

from __future__ import annotations

import gzip
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np

from ssmrepro.data.listops import SPLIT_FILES, ListOpsSplit, generate_listops, write_listops_tsv
from ssmrepro.data.pathfinder import PathfinderWriter, generate_pathfinder, lra_params

HERE = Path(__file__).resolve().parent


def listops() -> None:
    d = HERE / "lra" / "listops-1000"
    splits = generate_listops(6, 3, 3, seed=7, min_length=3, max_length=40)
    # one hand-written example in the first row (value: max(2, 9, min(4, 7), 0) = 9)
    hand = ListOpsSplit(tokens=[bytes([13, 4, 11, 12, 6, 9, 16, 2, 16])], labels=np.array([9]))
    splits["train"] = ListOpsSplit(
        tokens=hand.tokens + splits["train"].tokens,
        labels=np.concatenate([hand.labels, splits["train"].labels]),
    )
    for split, fname in SPLIT_FILES.items():
        write_listops_tsv(d / fname, splits[split])


def aan() -> None:
    d = HERE / "lra" / "tsv_data"
    d.mkdir(parents=True, exist_ok=True)
    docs = [
        "we study attention for long sequences .",
        "state space models scale linearly with length .",
        "a survey of parsing techniques for natural language .",
        "résumé of convolutional networks for vision — 2020 .",
        "linear recurrences revisited .",
    ]
    rows = {
        "train": [(1, 0, 1), (0, 0, 2), (1, 1, 4), (0, 3, 2)],
        "eval": [(1, 4, 0), (0, 2, 3)],
        "test": [(0, 1, 3), (1, 4, 1)],
    }
    for split, items in rows.items():
        lines = [f"{float(y)}\tid{a}\tid{b}\t{docs[a]}\t{docs[b]}" for y, a, b in items]
        (d / f"new_aan_pairs.{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def pathfinder() -> None:
    for res, n in ((32, 10), (128, 10)):
        d = HERE / "lra" / f"pathfinder{res}" / "curv_contour_length_14"
        if d.exists():
            shutil.rmtree(d)
        images, labels = generate_pathfinder(n, res, seed=3, chunk_size=256 if res == 32 else 128)
        w = PathfinderWriter(d, lra_params(res), fmt="lra")
        w.add(images, labels)
        w.close({})
        (d / "meta.json").unlink()  # the official release has no meta.json
    # curv_baseline with the blacklisted (empty) file that S4 skips
    d = HERE / "lra" / "pathfinder32" / "curv_baseline"
    if d.exists():
        shutil.rmtree(d)
    images, labels = generate_pathfinder(2, 32, seed=4, chunk_size=256)
    w = PathfinderWriter(d, lra_params(32), fmt="lra")
    w.add(images, labels)
    w.close({})
    (d / "meta.json").unlink()
    (d / "imgs" / "0" / "sample_172.png").write_bytes(b"")
    with open(d / "metadata" / "0.npy", "a") as f:
        f.write("imgs/0 sample_172.png 172 1 1.0 6 2 2 0.5 1 1\n")


def cifar() -> None:
    d = HERE / "cifar-10-batches-py"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for k, name in enumerate(names):
        data = rng.integers(0, 256, size=(2, 3072), dtype=np.uint8)
        batch = {
            b"batch_label": name.encode(),
            b"labels": [(2 * k) % 10, (2 * k + 1) % 10],
            b"data": data,
            b"filenames": [b"a.png", b"b.png"],
        }
        with open(d / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    meta = {
        b"label_names": [
            b"airplane",
            b"automobile",
            b"bird",
            b"cat",
            b"deer",
            b"dog",
            b"frog",
            b"horse",
            b"ship",
            b"truck",
        ]
    }
    with open(d / "batches.meta", "wb") as f:
        pickle.dump(meta, f, protocol=2)


def imdb() -> None:
    base = HERE / "imdb" / "aclImdb"
    reviews = {
        ("train", "pos"): ["A wonderful film.<br /><br />Loved it!", "Great acting, great score — 10/10."],
        ("train", "neg"): ["Boring and far too long.", "I want my two hours back... terrible."],
        ("test", "pos"): ["Charming; a joy from start to finish. Café scenes are lovely."],
        ("test", "neg"): ["Awful plot 🙁 and wooden dialogue."],
    }
    for (split, cls), texts in reviews.items():
        d = base / split / cls
        d.mkdir(parents=True, exist_ok=True)
        for i, t in enumerate(texts):
            rating = 9 if cls == "pos" else 2
            (d / f"{i}_{rating}.txt").write_text(t, encoding="utf-8")


def _idx(path: Path, arr: np.ndarray) -> None:
    header = b"\x00\x00\x08" + bytes([arr.ndim]) + b"".join(struct.pack(">I", s) for s in arr.shape)
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def fashion() -> None:
    d = HERE / "fashion-mnist"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    _idx(d / "train-images-idx3-ubyte.gz", rng.integers(0, 256, size=(10, 28, 28)))
    _idx(d / "train-labels-idx1-ubyte.gz", np.arange(10) % 10)
    _idx(d / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, size=(2, 28, 28)))
    _idx(d / "t10k-labels-idx1-ubyte.gz", np.array([3, 7]))


def digits() -> None:
    """200 rows in scikit-learn's digits.csv.gz format (64 gray levels 0..16, then the class);
    random pixels, classes 0..9 in turn: a format fixture, not the real data."""
    d = HERE / "digits"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2)
    rows = np.concatenate([rng.integers(0, 17, size=(200, 64)), (np.arange(200) % 10)[:, None]], 1)
    text = "".join(",".join(str(v) for v in row) + "\n" for row in rows)
    with gzip.GzipFile(d / "digits.csv.gz", "wb", mtime=0) as f:
        f.write(text.encode())


if __name__ == "__main__":
    listops()
    aan()
    pathfinder()
    cifar()
    imdb()
    fashion()
    digits()
    print(f"fixtures written under {HERE}")
