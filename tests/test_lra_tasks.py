"""The six LRA datasets as tasks: shapes, dtypes and masks, index -> row, split sizes and
disjointness, the data source in the run identity, DataUnavailable at construction, and the sweep-time
checks (train_size within the split, named evaluation sets)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import write_spec

from ssmrepro.data import DATASETS, DataUnavailable, load_lra
from ssmrepro.data.pathfinder import write_pathfinder
from ssmrepro.spec import SpecError, load_spec
from ssmrepro.sweep import expand
from ssmrepro.tasks import TASKS, build_task
from ssmrepro.tasks.base import TEST, TRAIN, VAL
from ssmrepro.tasks.lra import LRA_TASKS, clear_cache

ASSETS = Path(__file__).resolve().parent / "assets" / "lra"
LRA = {cls.name: cls for cls in LRA_TASKS}


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A scratch copy of the LRA fixtures as $SSMREPRO_DATA (never write into tests/assets)."""
    root = tmp_path / "data"
    shutil.copytree(ASSETS, root, ignore=shutil.ignore_patterns("*.py", "__pycache__", ".cache"))
    monkeypatch.setenv("SSMREPRO_DATA", str(root))
    clear_cache()
    yield root
    clear_cache()


#  task -> (token inputs?, input_dim, dual, n_classes)
KINDS = {
    "lra_listops": (True, None, False, 10),
    "lra_text": (True, None, False, 2),
    "lra_retrieval": (True, None, True, 2),
    "lra_image": (False, 1, False, 10),
    "lra_pathfinder": (False, 1, False, 2),
    "lra_pathx": (False, 1, False, 2),
}


def test_registry_holds_every_task():
    assert set(LRA) == set(KINDS) and set(KINDS) <= set(TASKS)
    assert {"keep_nth", "mqar"} <= set(TASKS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_config_mirrors_the_dataset_options(name):
    cls = LRA[name]
    fields = dataclasses.fields(DATASETS[cls.dataset].config_cls)
    cfg = cls.Config()
    assert set(type(cfg).model_fields) == {"name", "source"} | {f.name for f in fields}
    assert all(getattr(cfg, f.name) == f.default for f in fields)
    assert cfg.source == DATASETS[cls.dataset].sources[0]  # the real source by default
    with pytest.raises(ValueError, match="bogus"):
        cls.Config(bogus=1)
    with pytest.raises(ValueError, match="source"):
        cls.Config(source="somewhere")


@pytest.mark.parametrize("name", sorted(KINDS))
def test_samples_have_the_right_shapes_dtypes_and_masks(data_root, name):
    tokens, input_dim, dual, n_classes = KINDS[name]
    task = build_task({"name": name})
    info = task.info
    assert info.target == "sequence" and info.loss == "cross_entropy" and info.n_classes == n_classes
    assert info.input_dim == input_dim and info.dual == dual
    sizes = task.split_sizes()
    assert set(sizes) == {"train", "val", "test"} and all(n >= 1 for n in sizes.values())
    seeds = torch.tensor([3, 7])
    idx = torch.tensor([[0, sizes["train"] - 1, 0], [sizes["train"] - 1, 0, 0]])  # (E, B)
    b = task.sample(seeds, TRAIN, idx)
    E, B, L = 2, 3, info.seq_len
    assert b.y.shape == (E, B) and b.y.dtype == torch.int64
    assert int(b.y.min()) >= 0 and int(b.y.max()) < n_classes
    if tokens:
        assert b.x.shape == (E, B, L) and b.x.dtype == torch.int64 and info.vocab_size > 0
        assert int(b.x.max()) < info.vocab_size
        assert b.mask.shape == (E, B, L) and b.mask.dtype == torch.bool
        assert (b.x[~b.mask] == 0).all()  # right padding with pad id 0
        first_pad = (~b.mask).long().argmax(-1)  # masks are a prefix of True
        assert (b.mask.sum(-1) == torch.where(b.mask.all(-1), L, first_pad)).all()
    else:
        assert b.x.shape == (E, B, L, input_dim) and b.x.dtype == torch.float32
        assert b.mask is None and info.vocab_size == 0
    if dual:
        assert b.x2.shape == b.x.shape and b.mask2.shape == b.mask.shape
    else:
        assert b.x2 is None and b.mask2 is None
    # the same row gives the same input whatever the seed and the batch it sits in
    assert torch.equal(b.x[0, 0], b.x[1, 1]) and torch.equal(b.x[0, 1], b.x[1, 0])


@pytest.mark.parametrize("name", ["lra_listops", "lra_retrieval", "lra_pathfinder"])
def test_index_is_the_row_of_the_split(data_root, name):
    task = build_task({"name": name})
    for split, sname in ((TRAIN, "train"), (VAL, "val"), (TEST, "test")):
        ds = load_lra(LRA[name].dataset, sname)
        n = len(ds)
        idx = torch.arange(n).flip(0)[None]  # (1, n), reversed
        b = task.sample(torch.tensor([0]), split, idx)
        assert b.y[0].tolist() == ds.labels[::-1].tolist()
        for j, i in enumerate(idx[0].tolist()):
            if ds.kind == "tokens":
                ln = int(ds.lengths[i])
                assert b.x[0, j, :ln].tolist() == ds.x[i, :ln].tolist() and int(b.mask[0, j].sum()) == ln
                if ds.x2 is not None:
                    ln2 = int(ds.lengths2[i])
                    assert b.x2[0, j, :ln2].tolist() == ds.x2[i, :ln2].tolist()
            else:
                np.testing.assert_allclose(b.x[0, j, :, 0].numpy(), ds.inputs(np.array([i]))[0])
        with pytest.raises(IndexError, match=f"outside the {sname} split \\({n} rows"):
            task.sample(torch.tensor([0]), split, torch.tensor([[0, n]]))


def test_splits_are_disjoint(data_root):
    write_pathfinder(data_root / "generated" / "pathfinder32" / "curv_contour_length_14", 200, 32, 0)
    task = build_task({"name": "lra_pathfinder", "source": "generated"})
    sizes = task.split_sizes()
    assert sizes == {"train": 160, "val": 20, "test": 20}
    rows = {}
    for split, sname in ((TRAIN, "train"), (VAL, "val"), (TEST, "test")):
        x = task.sample(torch.tensor([0]), split, torch.arange(sizes[sname])[None]).x[0]
        rows[sname] = {bytes(r.numpy().tobytes()) for r in x}
        assert len(rows[sname]) == sizes[sname]  # distinct images
    assert not rows["train"] & rows["val"] and not rows["train"] & rows["test"]
    assert not rows["val"] & rows["test"]
    lo = build_task({"name": "lra_listops"})
    seqs = {s: {tuple(r[m].tolist()) for r, m in zip(b.x[0], b.mask[0])}
            for s, b in ((s, lo.sample(torch.tensor([0]), k, torch.arange(n)[None]))
                         for s, k, n in (("train", TRAIN, 7), ("val", VAL, 3), ("test", TEST, 3)))}
    assert not seqs["train"] & seqs["val"] and not seqs["train"] & seqs["test"]


def test_data_info_and_generator_provenance(data_root):
    info = build_task({"name": "lra_listops"}).data_info()
    assert info["source"] == "lra_release" and info["path"] == "lra/listops-1000"
    assert info["sizes"] == {"train": 7, "val": 3, "test": 3}
    assert info["cache_key"].startswith("listops-") and "generator" not in info
    write_pathfinder(data_root / "generated" / "pathfinder32" / "curv_contour_length_14", 20, 32, 5)
    pf = build_task({"name": "lra_pathfinder", "source": "generated"}).data_info()
    assert pf["path"] == "generated/pathfinder32/curv_contour_length_14"
    assert pf["generator"]["seed"] == 5 and pf["source"] == "generated"
    assert build_task({"name": "keep_nth"}).data_info() is None


def test_missing_data_fails_at_construction_naming_one_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SSMREPRO_DATA", str(tmp_path))
    clear_cache()
    with pytest.raises(DataUnavailable) as err:
        build_task({"name": "lra_listops"})
    msg = str(err.value)
    assert "lra_listops" in msg and "`ssmrepro data download lra`" in msg and "\n" not in msg
    assert msg.count("`ssmrepro") == 1 and "task.source: generated" in msg
    with pytest.raises(DataUnavailable, match="`ssmrepro data generate pathfinder --res 32"):
        build_task({"name": "lra_pathfinder", "source": "generated"})
    with pytest.raises(DataUnavailable, match="`ssmrepro data download imdb`"):
        build_task({"name": "lra_text"})


def test_source_is_part_of_the_run_identity(tmp_path):
    common = dict(model={"name": "ssm_lm", "d_model": 8, "d_state": 4},
                  train={"batch_size": 2, "train_size": 4, "epochs": 1, "val_size": 2, "test_size": 2},
                  sweep=[], seeds=[0])
    ids = {}
    for src in (None, "lra_release", "generated"):
        task = {"name": "lra_listops", **({"source": src} if src else {})}
        spec = load_spec(write_spec(tmp_path, name=f"s-{src}", task=task, **common))
        ids[src] = expand(spec, "paper")[0].run_id
    assert ids[None] == ids["lra_release"]  # the default source, written or not
    assert ids["generated"] != ids["lra_release"]


def _spec(tmp_path, task, train, name="t-lra"):
    return load_spec(write_spec(
        tmp_path, name=name, task=task, model={"name": "ssm_lm", "d_model": 8, "d_state": 4},
        train={"batch_size": 2, "val_size": 2, "test_size": 2, **train}, sweep=[], seeds=[0]))


def test_sweep_checks_train_size_against_the_split(data_root, tmp_path):
    ok = _spec(tmp_path, {"name": "lra_listops"}, {"train_size": 7, "epochs": 1})
    assert expand(ok, "paper", data=True)[0].train.train_size == 7
    big = _spec(tmp_path, {"name": "lra_listops"}, {"train_size": 8, "epochs": 1})
    with pytest.raises(SpecError, match=r"train_size 8 exceeds the training split of task lra_listops \(7"):
        expand(big, "paper", data=True)
    # the commands that read records only (figures, plot) expand without the data's checks
    assert expand(big, "paper")[0].train.train_size == 8
    with pytest.raises(SpecError, match="has a fixed training split"):
        expand(_spec(tmp_path, {"name": "lra_listops"}, {"max_steps": 3}), "paper")


def test_sweep_without_data_defers_the_size_check(tmp_path, monkeypatch):
    monkeypatch.setenv("SSMREPRO_DATA", str(tmp_path / "nothing"))
    clear_cache()
    spec = _spec(tmp_path, {"name": "lra_listops"}, {"train_size": 10**6, "epochs": 1})
    assert len(expand(spec, "paper")) == 1  # validates; the run itself reports DataUnavailable


def test_sweep_checks_named_evaluation_sets(tmp_path, data_root):
    base = {"name": "keep_nth", "n": 2, "T": 8, "vocab": 8}
    good = _spec(tmp_path, base, {"max_steps": 1, "evals": {"long": {"T": 16}}})
    assert expand(good, "paper")[0].train.evals == {"long": {"T": 16}}
    cases = {
        "unknown key": ({"long": {"TT": 16}}, "train.evals.long.TT: unknown key"),
        "invalid value": ({"long": {"n": 20}}, "train.evals.long"),
        "bigger vocabulary": ({"big": {"vocab": 16}}, "train.evals.big: n_classes 16 differs"),
        "other task": ({"x": {"name": "mqar"}}, "cannot change the task"),
        "reserved name": ({"test": {"T": 16}}, "must match"),
    }
    for i, (evals, msg) in enumerate(cases.values()):
        with pytest.raises(SpecError, match=msg):
            expand(_spec(tmp_path, base, {"max_steps": 1, "evals": evals}, name=f"e{i}"), "paper")
    lra = {"name": "lra_listops"}
    with pytest.raises(SpecError, match="train.evals.short.max_len"):
        expand(_spec(tmp_path, lra, {"train_size": 4, "epochs": 1,
                                     "evals": {"short": {"max_len": "x"}}}, name="e9"), "paper")


def test_task_configs_pickle():
    """Packs travel to worker processes: every task config must pickle by reference."""
    import pickle

    from ssmrepro.tasks import TASKS

    for name, cls in TASKS.items():
        cfg = cls.Config()
        assert pickle.loads(pickle.dumps(cfg)) == cfg, name
