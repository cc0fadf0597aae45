"""Pathfinder / Path-X: generator (labels checked by the flood-fill oracle), writers, loaders."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from ssmrepro.data import load_lra
from ssmrepro.data.pathfinder import (
    PathfinderWriter,
    generate_pathfinder,
    lra_params,
    pathfinder_layers,
    pathfinder_oracle,
    read_pathfinder_dir,
)


@pytest.fixture(scope="module")
def pf32():
    return generate_pathfinder(96, 32, seed=11, chunk_size=1024, with_geometry=True)


def test_shapes_dtype_and_both_labels(pf32):
    images, labels, geoms = pf32
    assert images.shape == (96, 32, 32) and images.dtype == np.uint8
    assert labels.shape == (96,) and set(np.unique(labels)) == {0, 1}
    assert 0.3 < labels.mean() < 0.7
    assert (images.reshape(96, -1).max(1) == 255).all()  # byte-scaled like scipy.misc.imsave
    assert (images == 0).mean() > 0.5  # mostly background


def test_oracle_agrees_with_labels(pf32):
    images, labels, geoms = pf32
    assert [pathfinder_oracle(g) for g in geoms] == labels.tolist()


def test_markers_are_drawn_on_snake_ends(pf32):
    images, labels, geoms = pf32
    for img, g in zip(images[:20], geoms[:20]):
        layer = pathfinder_layers(g)  # (256, 256) centre-lines at 8x
        for pt in (g.origin, g.terminal):
            r, c = np.floor(pt).astype(int)
            assert img[r, c] > 100  # the marker disc is bright
            assert layer[tuple(np.floor(pt * 8).astype(int))]  # and sits on a snake


def test_oracle_detects_wrong_label(pf32):
    _, _, geoms = pf32
    g = next(g for g in geoms if g.label == 1)
    # moving the terminal marker onto another snake's end must flip the oracle
    other = g.pieces[g.snake == (2 if (g.snake == 2).any() else 1)][0][0]
    g2 = type(g)(**{**g.__dict__, "terminal": other.copy(), "label": 0})
    assert pathfinder_oracle(g2) == 0


def test_deterministic_and_worker_independent():
    a, la = generate_pathfinder(12, 32, seed=5, chunk_size=256)
    b, lb = generate_pathfinder(12, 32, seed=5, chunk_size=256, workers=2)
    c, _ = generate_pathfinder(12, 32, seed=6, chunk_size=256)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("res, n, chunk", [(64, 1, 2048), (128, 3, 128)])
def test_higher_resolutions(res, n, chunk):
    images, labels, geoms = generate_pathfinder(n, res, seed=1, chunk_size=chunk, with_geometry=True)
    assert images.shape == (n, res, res) and images.dtype == np.uint8
    assert [pathfinder_oracle(g) for g in geoms] == labels.tolist()


def test_lra_parameters():
    p32, p128 = lra_params(32), lra_params(128)
    assert (p32.paddle_length, p32.thickness, p32.continuity, p32.seed_distance) == (2, 0.5, 1.0, 7)
    assert (p32.distractor_length, p32.n_distractors, p32.margins) == (4, 5, (1,))
    assert (p32.snake_contrasts, p32.paddle_contrasts, p32.marker_radius) == ((2.0,), (0.75,), 1.5)
    assert (p128.margins, p128.seed_distance, p128.n_distractors, p128.thickness) == ((2, 3), 20, 8, 1.5)
    assert p32.contour_length == p128.contour_length == 14
    assert p32.difficulty == "curv_contour_length_14"


def _seven_in_shards_of_three(tmp_path):
    """7 generated 32x32 images written as npy shards of 3 (3 shards); (folder, labels)."""
    images, labels = generate_pathfinder(7, 32, seed=2, chunk_size=256)
    d = tmp_path / "d"
    w = PathfinderWriter(d, lra_params(32), fmt="npy", shard_size=3)
    w.add(images, labels)
    w.close({"seed": 2})
    return d, labels


@pytest.mark.parametrize("damage,needle", [
    ("labels_short", "labels_00000.npy is uint8 [2], not 3 integer labels"),
    ("stray_labels", "3 image shards but 4 label shards"),
    ("float_images", "imgs_00000.npy is float64 [3, 32, 32], not uint8"),
    ("meta_n", "7 images, meta.json says 70"),
    ("meta_shards", "3 shards, meta.json says 9"),
])
def test_damaged_generated_shards_are_named_not_read_misaligned(tmp_path, damage, needle):
    """A labels shard cut short failed with numpy's bare 'cannot reshape array of size ...'; a
    stray labels shard (4 label shards for 3 image shards: 14 labels for 7 images) had the images
    read at half their size, misaligned with their labels; float images x1000 were trained on."""
    d, labels = _seven_in_shards_of_three(tmp_path)
    shards = d / "shards"
    if damage == "labels_short":
        np.save(shards / "labels_00000.npy", np.load(shards / "labels_00000.npy")[:2])
    elif damage == "stray_labels":
        np.save(shards / "labels_00003.npy", np.concatenate([labels, labels]))
    elif damage == "float_images":
        np.save(shards / "imgs_00000.npy", np.load(shards / "imgs_00000.npy") * 1000.0)
    else:
        meta = json.loads((d / "meta.json").read_text())
        meta.update(n=70) if damage == "meta_n" else meta.update(shards=9)
        (d / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="damaged generated Pathfinder shards") as err:
        read_pathfinder_dir(d)
    assert needle in str(err.value) and str(d) in str(err.value)


@pytest.mark.parametrize("damage,needle", [
    ("text", "imgs_00000.npy is not a numpy array file"),
    ("cut", "imgs_00000.npy is not a numpy array file"),
    ("objects", "labels_00001.npy is not a numpy array file"),
])
def test_a_generated_shard_numpy_cannot_read_is_named(tmp_path, damage, needle):
    """A shard that is not a .npy file, or one cut short, or an object array failed with numpy's
    own words, naming no file ('This file contains pickled (object) data ...', 'Failed to read
    all data for array ...')."""
    d, labels = _seven_in_shards_of_three(tmp_path)
    shards = d / "shards"
    if damage == "text":
        (shards / "imgs_00000.npy").write_text("garbage")
    elif damage == "cut":
        data = (shards / "imgs_00000.npy").read_bytes()
        (shards / "imgs_00000.npy").write_bytes(data[:200])
    else:
        np.save(shards / "labels_00001.npy", np.array([object()] * 3, dtype=object),
                allow_pickle=True)
    with pytest.raises(ValueError, match="damaged generated Pathfinder shards") as err:
        read_pathfinder_dir(d)
    assert needle in str(err.value) and str(d) in str(err.value)


@pytest.mark.parametrize("fmt", ["npy", "lra"])
def test_writer_reader_round_trip(tmp_path, fmt):
    images, labels = generate_pathfinder(7, 32, seed=2, chunk_size=256)
    w = PathfinderWriter(tmp_path / "d", lra_params(32), fmt=fmt, shard_size=3)
    w.add(images[:4], labels[:4])
    w.add(images[4:], labels[4:])
    w.close({"seed": 2})
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["n"] == 7 and meta["format"] == fmt
    got, got_labels = read_pathfinder_dir(tmp_path / "d")
    assert np.array_equal(got, images) and np.array_equal(got_labels, labels)
    if fmt == "lra":
        line = (tmp_path / "d" / "metadata" / "0.npy").read_text().splitlines()[3].split()
        assert line[:4] == ["imgs/0", "sample_3.png", "3", str(labels[3])]


def test_loader_release_layout(lra_root):
    ds = load_lra("pathfinder", "train", root=lra_root)
    assert ds.source == "lra_release" and ds.kind == "pixels" and ds.d_input == 1
    assert ds.x.shape == (8, 1024) and ds.x.dtype == np.uint8
    x = ds.inputs()
    assert x.dtype == np.float32 and 0.0 <= x.min() and x.max() <= 1.0
    # row-major flattening of the PNG: compare one training image with the file it came from
    val = load_lra("pathfinder", "val", root=lra_root)
    test = load_lra("pathfinder", "test", root=lra_root)
    assert len(ds) + len(val) + len(test) == 10
    d = lra_root / "lra" / "pathfinder32" / "curv_contour_length_14"
    pngs = {i: np.asarray(Image.open(d / "imgs" / "0" / f"sample_{i}.png")).reshape(-1) for i in range(10)}
    assert any(np.array_equal(ds.x[0], v) for v in pngs.values())
    centred = load_lra("pathfinder", "train", root=lra_root, center=True).inputs()
    assert centred.min() >= -1.0 and centred.min() < 0


def test_loader_skips_blacklisted_empty_file(lra_root):
    parts = [
        load_lra("pathfinder", s, root=lra_root, difficulty="curv_baseline") for s in ("train", "val", "test")
    ]
    assert sum(len(p) for p in parts) == 2  # sample_172.png (empty, blacklisted) is skipped


def test_pathx_release_layout_and_tokens(lra_root):
    ds = load_lra("pathx", "train", root=lra_root)
    assert ds.x.shape[1] == 128 * 128 and ds.source == "lra_release"
    alias = load_lra("pathfinder128", "train", root=lra_root)
    assert np.array_equal(alias.x, ds.x) and alias.config["resolution"] == 128
    tok = load_lra("pathx", "train", root=lra_root, tokenize=True)
    assert tok.kind == "tokens" and tok.vocab_size == 256 and tok.batch([0])["x"].dtype == np.int64


def test_cli_generate_then_load(empty_root):
    from typer.testing import CliRunner

    from ssmrepro.cli.data import app

    r = CliRunner().invoke(
        app,
        [
            "generate",
            "pathfinder",
            "--n",
            "20",
            "--seed",
            "0",
            "--res",
            "32",
            "--dir",
            str(empty_root),
            "--workers",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    ds = load_lra("pathfinder", "train", root=empty_root)
    assert ds.source == "generated" and len(ds) == 16
    expected, _ = generate_pathfinder(20, 32, seed=0)
    flat = expected.reshape(20, -1)
    assert all(any(np.array_equal(row, e) for e in flat) for row in ds.x)
