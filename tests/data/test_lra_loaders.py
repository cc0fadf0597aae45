"""Text, Retrieval, Image loaders on the fixtures; sources, accept_sources, DataUnavailable."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from ssmrepro.data import DataUnavailable, load_lra
from ssmrepro.data.image import read_cifar_batch, rgb_to_gray
from ssmrepro.data.text import build_char_vocab


def test_text_char_level(lra_root):
    ds = load_lra("text", "train", root=lra_root, min_freq=1)
    assert ds.source == "download:imdb" and ds.kind == "tokens" and ds.n_classes == 2
    assert ds.vocab[:3] == ("<pad>", "<unk>", "<eos>") and "é" not in ds.vocab  # é only in test
    assert sorted(ds.labels.tolist()) == [0, 0, 1, 1]
    first = "".join(ds.vocab[i] for i in ds.x[0, : ds.lengths[0] - 1])
    assert first == "Boring and far too long."  # neg files first, sorted by name
    test = load_lra("text", "test", root=lra_root, min_freq=1)
    assert (test.x == 1).any()  # unseen characters (é, 🙁) map to <unk>
    val = load_lra("text", "val", root=lra_root, min_freq=1)
    assert np.array_equal(val.x, test.x)  # LRA / S4: the test set doubles as validation


def test_text_byte_level_and_truncation(lra_root):
    ds = load_lra("text", "test", root=lra_root, level="byte", max_len=20)
    assert ds.vocab_size == 258 and ds.x.dtype == np.int16
    assert ds.lengths.max() == 20 and (ds.x[np.arange(len(ds)), ds.lengths - 1] == 1).all()
    text = "Awful plot 🙁 and wooden dialogue.".encode()
    row = ds.x[ds.labels == 0][0]
    assert bytes((row[:19] - 2).astype(np.uint8).tolist()) == text[:19]


def test_text_val_from_train(lra_root):
    tr = load_lra("text", "train", root=lra_root, val_split="train", val_fraction=0.5)
    va = load_lra("text", "val", root=lra_root, val_split="train", val_fraction=0.5)
    assert len(tr) == len(va) == 2


def test_char_vocab_order():
    assert build_char_vocab(["aab", "bcb"], min_freq=2) == ("<pad>", "<unk>", "<eos>", "b", "a")


def test_retrieval_dual_input(lra_root):
    ds = load_lra("retrieval", "train", root=lra_root)
    assert ds.source == "lra_release" and ds.dual and len(ds) == 4
    assert ds.labels.tolist() == [1, 0, 1, 0]
    doc1 = "".join(ds.vocab[i] for i in ds.x[0, : ds.lengths[0] - 1])
    doc2 = "".join(ds.vocab[i] for i in ds.x2[0, : ds.lengths2[0] - 1])
    assert doc1 == "we study attention for long sequences ."
    assert doc2 == "state space models scale linearly with length ."
    b = ds.batch([1, 2])
    assert set(b) == {"x", "lengths", "x2", "lengths2", "labels"}
    assert b["x"].shape[1] == b["lengths"].max() and b["x2"].shape[1] == b["lengths2"].max()
    short = load_lra("retrieval", "val", root=lra_root, max_len=10)
    assert short.lengths.max() == 10 and short.lengths2.max() == 10


def test_image_grayscale_matches_pil(lra_root):
    ds = load_lra("image", "test", root=lra_root)
    assert ds.source == "download:cifar10" and ds.x.shape == (2, 1024) and ds.d_input == 1
    rgb, labels = read_cifar_batch(lra_root / "cifar-10-batches-py" / "test_batch")
    pil = np.stack([np.asarray(Image.fromarray(im.transpose(1, 2, 0)).convert("L")) for im in rgb])
    assert np.array_equal(rgb_to_gray(rgb), pil)  # PIL / torchvision Grayscale, bit for bit
    assert np.array_equal(ds.x, pil.reshape(2, -1)) and np.array_equal(ds.labels, labels)
    x = ds.inputs()
    assert np.allclose(x, (pil.reshape(2, -1) / 255 - 122.6 / 255) / (61.0 / 255), atol=1e-5)


def test_image_splits_color_tokens(lra_root):
    tr = load_lra("image", "train", root=lra_root)
    va = load_lra("image", "val", root=lra_root)
    assert (len(tr), len(va)) == (9, 1)  # 10 training images, 10% validation
    assert not set(map(bytes, tr.x)) & set(map(bytes, va.x))
    col = load_lra("image", "test", root=lra_root, grayscale=False)
    assert col.x.shape == (2, 1024, 3) and col.d_input == 3 and col.inputs().shape == (2, 1024, 3)
    tok = load_lra("image", "test", root=lra_root, tokenize=True)
    assert tok.kind == "tokens" and tok.vocab_size == 256


def test_image_proxy_is_opt_in(lra_root):
    ds = load_lra("image", "train", root=lra_root, accept_sources=["proxy:fashion_mnist32"])
    assert ds.source == "proxy:fashion_mnist32" and ds.x.shape == (9, 1024)
    img = ds.x[0].reshape(32, 32)
    assert (img[:2] == 0).all() and (img[:, :2] == 0).all()  # 28x28 zero-padded to 32x32
    (lra_root / "cifar-10-batches-py" / "test_batch").unlink()
    with pytest.raises(DataUnavailable) as err:
        load_lra("image", "train", root=lra_root)  # the proxy is never used unless accepted
    assert "ssmrepro data download cifar10" in str(err.value)


@pytest.mark.parametrize(
    "task, command",
    [
        ("listops", "ssmrepro data generate listops"),
        ("text", "ssmrepro data download imdb"),
        ("retrieval", "ssmrepro data download lra"),
        ("image", "ssmrepro data download cifar10"),
        ("pathfinder", "ssmrepro data generate pathfinder --res 32"),
        ("pathx", "ssmrepro data generate pathfinder --res 128"),
    ],
)
def test_unavailable_names_the_command(empty_root, task, command):
    with pytest.raises(DataUnavailable) as err:
        load_lra(task, "train", root=empty_root)
    msg = str(err.value)
    assert command in msg and str(empty_root) in msg and "\n" not in msg


def test_accept_sources_and_bad_arguments(lra_root):
    with pytest.raises(DataUnavailable):
        load_lra("pathfinder", "train", root=lra_root, accept_sources=["generated"])
    with pytest.raises(ValueError, match="cannot accept"):
        load_lra("text", "train", root=lra_root, accept_sources=["lra_release"])
    with pytest.raises(ValueError, match="unknown preprocessing"):
        load_lra("listops", "train", root=lra_root, max_length=10)
    with pytest.raises(ValueError, match="split"):
        load_lra("listops", "dev", root=lra_root)
    with pytest.raises(ValueError, match="unknown LRA dataset"):
        load_lra("mnist", "train", root=lra_root)


def test_env_var_root(lra_root, monkeypatch):
    monkeypatch.setenv("SSMREPRO_DATA", str(lra_root))
    assert load_lra("listops", "test").path == lra_root / "lra" / "listops-1000"


def test_getitem_and_batch_trimming(lra_root):
    ds = load_lra("listops", "train", root=lra_root)
    item = ds[1]
    assert item["x"].shape == (ds.lengths[1],) and item["label"] == ds.labels[1]
    b = ds.batch([1, 2])
    assert b["x"].shape == (2, max(ds.lengths[1], ds.lengths[2])) and b["x"].dtype == np.int64


def test_cli_info(lra_root):
    from typer.testing import CliRunner

    from ssmrepro.cli.data import app

    r = CliRunner().invoke(app, ["info", "--dir", str(lra_root)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "lra_release" in r.output and "download:cifar10" in r.output and "yes" in r.output
