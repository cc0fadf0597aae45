"""The training loop for every target kind: sequence-level classification (LRA tasks, tokens,
pixels, two inputs) and regression, packed (a pack == its members alone, float64), losses and
metrics equal to a direct computation, named evaluation sets, the evaluation history, data records.

Models are the test-local ``stubs.StubModel`` (features / pooled readout), so these tests do not
depend on ``ssmrepro.models``.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from stubs import StubModel, make_runs, register_regression, use_stub_model

from ssmrepro.tasks import build_task
from ssmrepro.tasks.base import IGNORE, TEST, TRAIN, VAL
from ssmrepro.tasks.lra import LRATask, clear_cache
from ssmrepro.train import (
    _DATA_STREAM,
    derived_seed,
    evaluate,
    member_losses,
    supervised_logits,
    train_pack,
)

ASSETS = Path(__file__).resolve().parent / "assets" / "lra"


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    shutil.copytree(ASSETS, root, ignore=shutil.ignore_patterns("*.py", "__pycache__", ".cache"))
    monkeypatch.setenv("SSMREPRO_DATA", str(root))
    clear_cache()
    yield root
    clear_cache()


@pytest.fixture
def stub(monkeypatch):
    use_stub_model(monkeypatch)
    register_regression(monkeypatch)


TRAIN_KW = dict(optimizer="adamw", lr=0.05, weight_decay=0.01, eval_every=2, eval_batch_size=2,
                dtype="float64")


def _assert_pack_equals_alone(runs):
    keep = {}
    packed = train_pack(runs, keep=keep)
    for e, r in enumerate(runs):
        k1 = {}
        alone = train_pack([r], keep=k1)[0]
        for (name, p), q in zip(keep["model"].named_parameters(), k1["model"].parameters()):
            torch.testing.assert_close(p[e : e + 1], q, rtol=1e-9, atol=1e-11, msg=name)
        assert alone["metrics"].keys() == packed[e]["metrics"].keys()
        for key, v in alone["metrics"].items():
            assert math.isclose(v, packed[e]["metrics"][key], rel_tol=1e-9, abs_tol=1e-12), key
        assert len(alone["history"]) == len(packed[e]["history"])
        for ha, hp in zip(alone["history"], packed[e]["history"]):
            assert ha == pytest.approx(hp, rel=1e-9, abs=1e-12)
        assert alone["stop_step"] == packed[e]["stop_step"]
    return packed


@pytest.mark.parametrize("name", ["lra_listops", "lra_retrieval", "lra_pathfinder"])
def test_sequence_task_pack_equals_members_alone(data_root, stub, name):
    trains = [dict(TRAIN_KW, batch_size=2, train_size=4, epochs=3, val_size=3, test_size=3, lr=lr,
                   label_smoothing=ls, grad_clip=gc)
              for lr, ls, gc in ((0.05, 0.0, None), (0.02, 0.1, 0.5))]
    runs = make_runs({"name": name}, trains, seeds=[1, 2])
    res = _assert_pack_equals_alone(runs)
    for r in res:
        m = r["metrics"]
        assert {"val.acc", "test.acc", "train.acc", "val.best_acc"} <= set(m) and "val.mse" not in m
        assert 0 <= m["test.acc"] <= 1 and r["stop_step"] == 6 and r["epochs"] == 3
        assert r["data"]["source"] == "lra_release" and r["data"]["sizes"]["train"] >= 4
        assert set(r["history"][0]) == {"step", "val.loss", "val.acc", "train.loss", "train.acc"}
        assert [h["step"] for h in r["history"]] == [0, 2, 4, 6]


@pytest.mark.parametrize("per_position", [False, True], ids=["sequence", "per_position"])
def test_regression_pack_equals_members_alone(stub, per_position):
    task = {"name": "test_regression", "per_position": per_position}
    trains = [dict(TRAIN_KW, batch_size=4, max_steps=n, val_size=6, test_size=5, lr=lr)
              for n, lr in ((6, 0.05), (4, 0.1))]
    res = _assert_pack_equals_alone(make_runs(task, trains, seeds=[3]))
    for r in res:
        m = r["metrics"]
        assert not any(k.endswith(".acc") for k in m)
        assert m["val.loss"] == m["val.mse"] and m["test.loss"] == m["test.mse"]
        assert math.isfinite(m["train.mse"]) and m["val.best_mse"] <= m["val.mse"]
        assert set(r["history"][0]) == {"step", "val.loss", "val.mse", "train.loss", "train.mse"}
        assert r["data"] is None
    assert res[0]["metrics"]["val.mse"] < res[0]["history"][0]["val.mse"]  # it learns something


def test_members_see_their_own_order_of_the_rows(data_root, stub, monkeypatch):
    seen: list[torch.Tensor] = []
    orig = LRATask.sample

    def spy(self, seeds, split, index):
        if split == TRAIN and index.shape[1] == 2:
            seen.append(index.clone())
        return orig(self, seeds, split, index)

    monkeypatch.setattr(LRATask, "sample", spy)
    runs = make_runs({"name": "lra_listops"}, [dict(TRAIN_KW, batch_size=2, train_size=6, epochs=2,
                                                    val_size=3, test_size=3, eval_every=100,
                                                    eval_batch_size=3)],
                     seeds=[0, 1, 2])
    train_pack(runs)
    rows = torch.cat(seen, dim=1)  # (E, 2 epochs * 6 rows), the training batches in order
    assert rows.shape == (3, 12)
    for e in range(3):
        for ep in range(2):
            assert sorted(rows[e, 6 * ep : 6 * ep + 6].tolist()) == list(range(6))  # one epoch
    assert len({tuple(r.tolist()) for r in rows}) == 3  # three members, three orders
    assert rows[0, :6].tolist() != rows[0, 6:].tolist()  # a new order every epoch


def _direct(model, b):
    """Loss, accuracy per member of a sequence batch, computed without the loop's helpers."""
    h = model.features(b.x)
    out = (model.readout(h, b.mask) if b.x2 is None
           else model.readout(h, b.mask, model.features(b.x2), b.mask2))  # (E, B, C)
    loss = torch.stack([F.cross_entropy(out[e], b.y[e]) for e in range(out.shape[0])])
    acc = (out.argmax(-1) == b.y).double().mean(-1)
    return loss, acc


@pytest.mark.parametrize("name", ["lra_listops", "lra_retrieval", "lra_image"])
def test_sequence_loss_and_accuracy_equal_a_direct_computation(data_root, name):
    task = build_task({"name": name})
    model = StubModel(task.info, 2, [0, 1]).double()
    seeds = torch.tensor([5, 6])
    n = task.split_sizes()["val"]
    b = task.sample(seeds, VAL, torch.arange(n).expand(2, -1))
    b.x = b.x.double() if b.x.is_floating_point() else b.x
    loss, acc = _direct(model, b)
    out, y = supervised_logits(model, b.x, b.y, b.mask, b.x2, b.mask2)
    assert out.shape == (2, n, task.info.n_classes) and torch.equal(y, b.y)
    l2, correct, count = member_losses(out, y)
    torch.testing.assert_close(l2, loss)
    torch.testing.assert_close(correct / count, acc)
    vl, va = evaluate(model, task, seeds, VAL, n, 2)  # in batches of 2
    torch.testing.assert_close(vl, loss)
    torch.testing.assert_close(va, acc)
    eps = torch.tensor([0.1, 0.0], dtype=torch.float64)  # label smoothing = torch's, per member
    ls, _, _ = member_losses(out, y, eps)
    torch.testing.assert_close(ls[0], F.cross_entropy(out[0], y[0], label_smoothing=0.1))
    torch.testing.assert_close(ls[1], loss[1])
    if n > 1:
        y_ign = y.clone()
        y_ign[:, 0] = IGNORE  # an ignored sequence counts nowhere
        l3, c3, n3 = member_losses(out, y_ign)
        assert n3.tolist() == [n - 1, n - 1]
        direct = torch.stack([F.cross_entropy(out[e, 1:], y[e, 1:]) for e in range(2)])
        torch.testing.assert_close(l3, direct)


def test_regression_loss_equals_mse_and_ignores_nan_targets(stub):
    task = build_task({"name": "test_regression", "per_position": True})
    model = StubModel(task.info, 2, [0, 1]).double()
    seeds = torch.tensor([1, 2])
    b = task.sample(seeds, TEST, torch.arange(5).expand(2, -1))
    out, y = supervised_logits(model, b.x, b.y.double())
    assert out.shape == (2, 5, 6, 2)
    loss, correct, count = member_losses(out, y)
    sup = ~torch.isnan(y)
    direct = torch.stack([((out[e] - y[e])[sup[e]] ** 2).mean() for e in range(2)])
    torch.testing.assert_close(loss, direct)
    assert correct is None and count.tolist() == [5 * 6 * 2 - 5] * 2
    loss.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    tl, tm = evaluate(model, task, seeds, TEST, 5, 2)
    torch.testing.assert_close(tl, direct.detach())
    torch.testing.assert_close(tm, tl)


def test_named_evaluation_sets(stub):
    base = {"name": "keep_nth", "n": 2, "T": 6, "vocab": 5}
    runs = make_runs(base, [dict(TRAIN_KW, batch_size=4, max_steps=3, val_size=4, test_size=6,
                                 evals={"long": {"T": 12}, "short": {"T": 4}})], seeds=[0, 1])
    keep = {}
    res = train_pack(runs, keep=keep)
    seeds = torch.tensor([derived_seed(r.seed, _DATA_STREAM) for r in runs])
    for name, over in (("long", {"T": 12}), ("short", {"T": 4})):
        loss, acc = evaluate(keep["model"], build_task({**base, **over}), seeds, TEST, 6, 2)
        for e, r in enumerate(res):
            assert r["metrics"][f"{name}.loss"] == pytest.approx(float(loss[e]), rel=1e-12)
            assert r["metrics"][f"{name}.acc"] == pytest.approx(float(acc[e]), rel=1e-12)
    assert res[0]["metrics"]["long.loss"] != res[0]["metrics"]["test.loss"]


def test_pack_checks_fail_before_training(data_root, stub):
    def runs(task, **kw):
        return make_runs(task, [dict(TRAIN_KW, **kw)], seeds=[0])

    with pytest.raises(ValueError, match="exceeds the training split"):
        train_pack(runs({"name": "lra_listops"}, batch_size=2, train_size=8, epochs=1))
    with pytest.raises(ValueError, match="label_smoothing applies to classification only"):
        train_pack(runs({"name": "test_regression"}, batch_size=2, max_steps=1, label_smoothing=0.1))
    with pytest.raises(ValueError, match="early-stop on val.loss"):
        train_pack(runs({"name": "test_regression"}, batch_size=2, max_steps=1,
                        early_stop={"metric": "val.acc", "op": ">", "threshold": 0.5}))
    with pytest.raises(ValueError, match="train.evals.x: n_classes"):
        train_pack(runs({"name": "keep_nth", "vocab": 8}, batch_size=2, max_steps=1,
                        evals={"x": {"vocab": 9}}))


def test_evaluation_of_a_dataset_covers_at_most_its_split(data_root, stub):
    res = train_pack(make_runs({"name": "lra_listops"}, [dict(
        TRAIN_KW, batch_size=2, train_size=4, epochs=1, val_size=1000, test_size=1000)], seeds=[0]))
    assert math.isfinite(res[0]["metrics"]["test.acc"])  # 3 test rows, not 1000


@pytest.mark.parametrize("name", ["lra_listops", "lra_retrieval", "lra_pathfinder"])
def test_seq_lm_trains_every_lra_input_kind_packed(data_root, name):
    """The real backbone (bidirectional S4D blocks, pooled heads): a pack == its members alone."""
    from ssmrepro.models import MODELS

    model = MODELS["seq_lm"].Config(
        name="seq_lm", d_model=8, layers="SSM", pos="none", final_norm="layernorm",
        head="dual_pool" if name == "lra_retrieval" else "mean_pool",
        blocks={"SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4}, "bidirectional": "sum",
                        "norm": "batchnorm", "norm_position": "post", "mlp_expand": 1}})
    runs = make_runs({"name": name}, [dict(TRAIN_KW, batch_size=2, train_size=4, epochs=2,
                                           val_size=3, test_size=3, lr=lr) for lr in (0.01, 0.003)],
                     seeds=[0])
    runs = [dataclasses.replace(r, model=model) for r in runs]
    for r in _assert_pack_equals_alone(runs):
        assert r["status"] == "ok" and 0 <= r["metrics"]["test.acc"] <= 1
