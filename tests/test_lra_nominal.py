"""Dry runs without the LRA data (issue 15): nominal shapes stand in for an absent dataset in
``run --dry-run`` only (one note per dataset, with the command that provides it), training still
refuses with DataUnavailable, and the nominal shapes follow the loaders' own arithmetic."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from helpers import write_spec
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.data import DATASETS, load_lra
from ssmrepro.data import nominal as nominal_mod
from ssmrepro.data.nominal import NOMINAL, nominal_shape
from ssmrepro.data.sources import CIFAR10, DIGITS, FASHION_MNIST32, IMDB, LRA_RELEASE
from ssmrepro.models import MODELS, build_model
from ssmrepro.tasks import DataUnavailable, build_task
from ssmrepro.tasks.base import TRAIN
from ssmrepro.tasks.lra import LRA_TASKS, clear_cache, nominal_data

ASSETS = Path(__file__).resolve().parent / "assets" / "lra"
runner = CliRunner()


@pytest.fixture
def empty_root(tmp_path, monkeypatch):
    root = tmp_path / "empty-data"
    root.mkdir()
    monkeypatch.setenv("SSMREPRO_DATA", str(root))
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "cost-cache"))  # planner timings
    clear_cache()
    yield root
    clear_cache()


def _spec(tmp_path, task: dict, name: str) -> Path:
    return write_spec(tmp_path, name=name, task=task,
                      model={"name": "seq_lm", "d_model": 4, "layers": "S", "repeat": 1,
                             "blocks": {"S": {"mixer": {"name": "s4d_zoh", "d_state": 2}}},
                             "head": "mean_pool"},
                      train={"batch_size": 2, "train_size": 4, "epochs": 1, "val_size": 2,
                             "test_size": 2, "eval_batch_size": 2},
                      sweep=[], seeds=[0])


@pytest.mark.parametrize("task,command", [
    ({"name": "lra_listops", "source": "lra_release"}, "ssmrepro data download lra"),
    ({"name": "lra_image"}, "ssmrepro data download cifar10"),
    ({"name": "lra_pathfinder"}, "ssmrepro data download lra"),
])
def test_dry_run_without_the_data_uses_nominal_shapes(tmp_path, empty_root, task, command):
    spec = _spec(tmp_path, task, name=f"t-{task['name'].replace('_', '-')}")
    res = runner.invoke(app, ["run", str(spec), "--out", str(tmp_path / "out"), "--dry-run"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # rich wraps long lines
    assert "1 runs" in out and "1 packs" in out and "estimated wall-clock" in out, out
    assert out.count("nominal shapes:") == 1 and f"`{command}`" in out, out
    assert "no data under" in out
    assert not any(empty_root.iterdir())  # nothing downloaded, generated or cached

    res = runner.invoke(app, ["run", str(spec), "--out", str(tmp_path / "out"), "--no-calibrate",
                              "--no-plot"])
    assert res.exit_code == 2, res.output  # training still refuses, as before
    assert "has no data under" in res.output and f"`{command}`" in " ".join(res.output.split())
    assert not list((tmp_path / "out").rglob("*.json"))


def test_nominal_shapes_only_inside_the_planning_context(empty_root):
    with pytest.raises(DataUnavailable):
        build_task({"name": "lra_listops"})
    with nominal_data() as notes:
        task = build_task({"name": "lra_listops"})
        again = build_task({"name": "lra_listops"})
    assert len(notes) == 1 and task.nominal is not None and again.nominal is not None
    info = task.info
    assert (info.seq_len, info.vocab_size, info.n_classes) == (2000, 17, 10)
    assert task.split_sizes() == {"train": 96_000, "val": 2_000, "test": 2_000}
    with pytest.raises(DataUnavailable):  # nothing nominal was cached for later training
        build_task({"name": "lra_listops"})


@pytest.mark.parametrize("cls", LRA_TASKS, ids=lambda c: c.name)
def test_every_nominal_task_builds_a_model_that_reads_its_batches(empty_root, cls):
    with nominal_data():
        task = build_task({"name": cls.name})
    info = task.info
    assert task.split_sizes()["train"] > 0 and info.seq_len > 0
    b = task.sample(torch.tensor([0, 1]), TRAIN, torch.zeros(2, 1, dtype=torch.long))
    if info.input_dim is None:
        assert b.x.shape == (2, 1, info.seq_len) and b.mask.all()
    else:
        assert b.x.shape == (2, 1, info.seq_len, info.input_dim) and b.mask is None
    assert (b.x2 is not None) == info.dual
    cfg = MODELS["seq_lm"].Config(d_model=4, layers="S", repeat=1,
                                  blocks={"S": {"mixer": {"name": "s4d_zoh", "d_state": 2}}},
                                  head="dual_pool" if info.dual else "mean_pool")
    model = build_model(cfg, info, 2)
    with torch.no_grad():
        out = model(b.x, b.mask, b.x2, b.mask2)
    assert out.shape[:2] == (2, 1) and out.shape[-1] == info.n_classes


def _fixture_root(tmp_path) -> Path:
    root = tmp_path / "fixtures"
    shutil.copytree(ASSETS, root, ignore=shutil.ignore_patterns("*.py", "__pycache__", ".cache"))
    return root


# (dataset, source, preprocessing, compare seq_len?, compare vocab?)
CASES = [
    ("listops", LRA_RELEASE, {"max_len": 6}, True, True),  # every fixture row is truncated
    ("listops", LRA_RELEASE, {"max_len": 6, "append_eos": False}, True, True),
    ("text", IMDB, {"level": "byte", "max_len": 8}, True, True),
    ("text", IMDB, {"level": "char", "max_len": 8, "val_split": "train"}, True, False),
    ("retrieval", LRA_RELEASE, {"max_len": 5}, True, False),
    ("image", CIFAR10, {}, True, True),
    ("image", CIFAR10, {"grayscale": False}, True, True),
    ("image", CIFAR10, {"tokenize": True}, True, True),
    ("image", FASHION_MNIST32, {}, True, True),
    ("image", DIGITS, {}, True, True),
    ("pathfinder", LRA_RELEASE, {}, True, True),
    ("pathfinder", LRA_RELEASE, {"center": True, "val_fraction": 0.2}, True, True),
    ("pathx", LRA_RELEASE, {}, True, True),
]


@pytest.mark.parametrize("dataset,source,prep,same_len,same_vocab", CASES)
def test_nominal_shape_follows_the_loader(tmp_path, monkeypatch, dataset, source, prep,
                                          same_len, same_vocab):
    """The loader on the fixtures of the real formats and the nominal rule, given the fixture's
    raw row counts, agree on splits, kind, channels, classes, dual input and (where the rows are
    long enough to be capped, or the vocabulary is fixed in code) length and vocabulary."""
    root = _fixture_root(tmp_path)
    loaded = {s: load_lra(dataset, s, root=root, accept_sources=[source], **prep)
              for s in ("train", "val", "test")}
    tr = loaded["train"]
    n = {s: len(d) for s, d in loaded.items()}
    facts = NOMINAL[(dataset, source)]
    if "all" in facts.rows:
        rows = {"all": sum(n.values())}
    elif "val" in facts.rows:
        rows = dict(n)
    elif dataset == "text" and prep.get("val_split") != "train":
        rows = {"train": n["train"], "test": n["test"]}
    else:
        rows = {"train": n["train"] + n["val"], "test": n["test"]}
    longest = facts.longest if tr.kind == "tokens" and dataset != "image" else \
        int(round(tr.seq_len ** 0.5))
    monkeypatch.setitem(nominal_mod.NOMINAL, (dataset, source),
                        nominal_mod.SourceFacts(rows, longest, facts.vocab, facts.guessed))
    s = nominal_shape(dataset, source, **prep)
    assert s.sizes == n
    assert (s.kind, s.d_input, s.n_classes, s.dual) == (tr.kind, tr.d_input, tr.n_classes, tr.dual)
    assert s.n_classes == DATASETS[dataset].n_classes
    width = max(a.shape[1] for d in loaded.values() for a in (d.x, d.x2) if a is not None)
    if same_len:
        assert s.seq_len == width
    if same_vocab:
        assert s.vocab_size == tr.vocab_size


def test_release_widths_are_the_documented_ones():
    assert nominal_shape("listops", LRA_RELEASE).seq_len == 2000  # trees < 2000 tokens + <eos>
    assert nominal_shape("listops", "generated").seq_len == 2000
    assert nominal_shape("text", IMDB).seq_len == 4096
    assert nominal_shape("text", IMDB, level="byte").vocab_size == 258
    r = nominal_shape("retrieval", LRA_RELEASE)
    assert (r.seq_len, r.dual, r.sizes["train"]) == (4000, True, 147_086) and r.caveats
    assert nominal_shape("image", CIFAR10).sizes == {"train": 45_000, "val": 5_000, "test": 10_000}
    assert nominal_shape("image", DIGITS).sizes == {"train": 1_259, "val": 179, "test": 359}
    pf = nominal_shape("pathfinder", "generated")
    assert (pf.seq_len, pf.sizes["train"]) == (1024, 160_000)
    assert nominal_shape("pathx", LRA_RELEASE).seq_len == 16_384
    assert "min_freq 3" in nominal_shape("text", IMDB, min_freq=3).caveats[-1]
    assert {k for k in NOMINAL} == {(d, s) for d, dd in DATASETS.items() for s in dd.sources}
