"""The offline sCIFAR stand-in ``proxy:digits``: scikit-learn's digits.csv.gz read as 64-pixel
sequences. CI has no scikit-learn: these tests read the 200-row synthetic fixture in the same file
format (tests/assets/lra/digits); one test compares with scikit-learn when it is installed."""

from __future__ import annotations

import gzip
import importlib.util

import numpy as np
import pytest

from ssmrepro.data import DIGITS, DataUnavailable, load_lra
from ssmrepro.data import datasets as datasets_mod
from ssmrepro.data.image import read_digits_csv


def _splits(root):
    return {s: load_lra("image", s, root=root, accept_sources=[DIGITS]) for s in
            ("train", "val", "test")}


def test_digits_fixture_split_and_inputs(lra_root):
    sp = _splits(lra_root)
    assert {s: len(d) for s, d in sp.items()} == {"train": 140, "val": 20, "test": 40}
    for d in sp.values():
        assert d.source == "proxy:digits" and d.n_classes == 10 and d.kind == "pixels"
        assert d.x.shape[1] == 64 and d.d_input == 1 and (d.lengths == 64).all()
        assert d.x.dtype == np.uint8 and d.x.max() <= 16
    # the three splits are a partition of the file's rows (pixels + label), in file order
    x, y = read_digits_csv(lra_root / "digits" / "digits.csv.gz")
    rows = sorted(map(bytes, np.concatenate([x, y[:, None].astype(np.uint8)], 1)))
    ours = sorted(bytes(np.concatenate([r, [lab]]).astype(np.uint8))
                  for d in sp.values() for r, lab in zip(d.x, d.labels, strict=True))
    assert ours == rows
    # z-scored with the training split's own statistics
    inp = sp["train"].inputs()
    assert abs(float(inp.mean())) < 1e-4 and abs(float(inp.std()) - 1) < 1e-4
    assert sp["test"].pixel_mean == sp["train"].pixel_mean


def test_digits_split_is_seeded(lra_root):
    a = load_lra("image", "test", root=lra_root, accept_sources=[DIGITS])
    b = load_lra("image", "test", root=lra_root, accept_sources=[DIGITS], cache=False)
    c = load_lra("image", "test", root=lra_root, accept_sources=[DIGITS], split_seed=1, cache=False)
    assert np.array_equal(a.x, b.x) and not np.array_equal(a.x, c.x)


def test_digits_is_opt_in_and_grayscale_only(lra_root):
    assert load_lra("image", "train", root=lra_root).source == "download:cifar10"
    with pytest.raises(ValueError, match="grayscale only"):
        load_lra("image", "train", root=lra_root, accept_sources=[DIGITS], grayscale=False)


def test_digits_bad_file(lra_root):
    path = lra_root / "digits" / "digits.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("1,2,3\n")
    # damaged data, named with the way to replace them (a ValueError was a traceback in a run)
    with pytest.raises(DataUnavailable, match="are damaged: .*not the digits table"):
        load_lra("image", "train", root=lra_root, accept_sources=[DIGITS])


def test_digits_missing_names_the_install(empty_root, monkeypatch):
    monkeypatch.setattr(datasets_mod, "installed_digits_dir", lambda: None)  # as without sklearn
    with pytest.raises(DataUnavailable) as err:
        load_lra("image", "train", root=empty_root, accept_sources=[DIGITS])
    msg = str(err.value)
    assert "pip install -e '.[standin]'" in msg and str(empty_root) in msg and "\n" not in msg


def test_digits_task_and_cli_exit_2(empty_root, monkeypatch):
    """Through the task and the CLI: no data -> exit 2 and the one install command."""
    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.lra import clear_cache

    monkeypatch.setattr(datasets_mod, "installed_digits_dir", lambda: None)
    monkeypatch.setenv("SSMREPRO_DATA", str(empty_root))
    clear_cache()
    with pytest.raises(DataUnavailable, match=r"pip install -e '\.\[standin\]'"):
        build_task({"name": "lra_image", "source": "proxy:digits"})
    from ssmrepro.cli.app import guard

    @guard
    def cmd():
        build_task({"name": "lra_image", "source": "proxy:digits"})

    import typer

    with pytest.raises(typer.Exit) as ex:
        cmd()
    assert ex.value.exit_code == 2


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                    reason="scikit-learn not installed (pip install -e '.[standin]')")
def test_digits_match_scikit_learn(empty_root):
    from sklearn.datasets import load_digits

    sk = load_digits()
    sp = _splits(empty_root)  # nothing under the root: scikit-learn's installed file is read
    assert {s: len(d) for s, d in sp.items()} == {"train": 1259, "val": 179, "test": 359}
    assert str(sp["train"].path).endswith("digits.csv.gz")
    ref = sorted(bytes(np.concatenate([r, [t]]).astype(np.uint8))
                 for r, t in zip(sk.data.astype(np.uint8), sk.target, strict=True))
    ours = sorted(bytes(np.concatenate([r, [lab]]).astype(np.uint8))
                  for d in sp.values() for r, lab in zip(d.x, d.labels, strict=True))
    assert ours == ref
    # row 0 of the training split is an 8x8 image in raster order, as load_digits' images
    i = next(k for k, r in enumerate(sk.data) if np.array_equal(r, sp["train"].x[0]))
    assert np.array_equal(sk.images[i].astype(np.uint8).reshape(-1), sp["train"].x[0])
