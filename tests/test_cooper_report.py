"""cooper2026's report pieces: percentiles over seeds, the per-cell choice of a swept key by a
metric (automatic learning rate), the band / length-curve / construction figure kinds, and the
constructed selective-copy hybrid (exact)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from test_checks import Run
from test_outputs import _draw

from ssmrepro.models import build_model
from ssmrepro.models.init import InitConfig
from ssmrepro.models.presets import CooperHybridConfig
from ssmrepro.plots import FigureContext
from ssmrepro.report import aggregate, cell_keys, verify
from ssmrepro.spec import Aggregate, PaperValue, Select
from ssmrepro.tasks import build_task
from ssmrepro.tasks.base import IGNORE, TEST
from ssmrepro.theory.cooper import selective_copy_margin, selective_copy_weights


def table(runs, acc, loss, status=None):
    rows = []
    for i, r in enumerate(runs):
        st = (status or {}).get(i, "ok")
        rows.append({"run_id": f"r{i}", "label": r.label, "seed": r.seed, "status": st,
                     "test.acc": acc[i] if st == "ok" else math.nan,
                     "train.avg_loss": loss[i] if st == "ok" else math.nan, **r.flat()})
    return pd.DataFrame(rows)


def lr_runs(labels=("A",), lrs=(0.01, 0.1), seeds=(0, 1, 2, 3), xs=(8,)):
    return [Run(lab, {"model.d": x, "train.lr": lr}, s)
            for lab in labels for x in xs for lr in lrs for s in seeds]


def test_percentiles_over_seeds():
    runs = lr_runs(lrs=(0.01,), seeds=range(11))
    acc = [i / 10 for i in range(11)]
    cells = aggregate(table(runs, acc, acc), runs, "mean", ["test.acc"], [10, 90])
    assert cells["test.acc.p10"].iloc[0] == pytest.approx(0.1)
    assert cells["test.acc.p90"].iloc[0] == pytest.approx(0.9)
    assert cells["test.acc"].iloc[0] == pytest.approx(0.5)
    # a diverged seed: mean and percentiles are NaN (a miss), never a silently smaller sample
    cells = aggregate(table(runs, acc, acc, {3: "diverged"}), runs, "mean", ["test.acc"], [10])
    assert math.isnan(cells["test.acc.p10"].iloc[0])


def test_select_keeps_the_lr_with_the_lowest_training_loss():
    runs = lr_runs(labels=("A", "B"))
    # A: lr 0.1 has the lower loss (and the lower accuracy: selection is by loss, not accuracy)
    # B: lr 0.01 has the lower loss
    acc, loss = [], []
    for r in runs:
        hi = r.coords["train.lr"] == 0.1
        if r.label == "A":
            acc.append(0.5 if hi else 0.9)
            loss.append(0.2 if hi else 0.4)
        else:
            acc.append(0.3 if hi else 0.7)
            loss.append(1.0 if hi else 0.1)
    sel = Select(over="train.lr", by="train.avg_loss")
    cells = aggregate(table(runs, acc, loss), runs, "mean", ["test.acc", "train.avg_loss"],
                      [10, 90], sel)
    assert len(cells) == 2
    a = cells[cells["label"] == "A"].iloc[0]
    b = cells[cells["label"] == "B"].iloc[0]
    assert a["train.lr"] == 0.1 and a["test.acc"] == pytest.approx(0.5)
    assert b["train.lr"] == 0.01 and b["test.acc"] == pytest.approx(0.7)
    assert a["select.n"] == 2 and bool(a["complete"])
    # op max picks the other one
    cells = aggregate(table(runs, acc, loss), runs, "mean", ["test.acc", "train.avg_loss"],
                      (), Select(over="train.lr", by="train.avg_loss", op="max"))
    assert cells[cells["label"] == "A"].iloc[0]["train.lr"] == 0.01


def test_select_never_prefers_a_candidate_with_a_diverged_run_and_waits_for_all():
    runs = lr_runs()
    loss = [0.1 if r.coords["train.lr"] == 0.1 else 0.5 for r in runs]
    acc = [0.5] * len(runs)
    diverged = {i: "diverged" for i, r in enumerate(runs)
                if r.coords["train.lr"] == 0.1 and r.seed == 2}
    sel = Select(over="train.lr", by="train.avg_loss")
    cells = aggregate(table(runs, acc, loss, diverged), runs, "mean",
                      ["test.acc", "train.avg_loss"], (), sel)
    assert cells.iloc[0]["train.lr"] == 0.01
    # one candidate not finished: the cell is not complete (claims say MISSING)
    df = table(runs, acc, loss)
    df = df[df["train.lr"] != 0.1]
    cells = aggregate(df, runs, "mean", ["test.acc", "train.avg_loss"], (), sel)
    assert not bool(cells.iloc[0]["complete"])
    spec = SimpleNamespace(claims=[{"text": "t", "op": ">=", "value": 0.4}], paper_values=[],
                           claim="c")
    keys = [k for k in cell_keys(runs) if k != "train.lr"]
    assert [v.verdict for v in verify(spec, cells, keys) if v.kind == "claim"] == ["MISSING"]


def test_select_must_name_an_aggregated_metric():
    with pytest.raises(ValueError):
        Aggregate(metrics=["test.acc"], select={"over": "train.lr", "by": "train.avg_loss"})
    with pytest.raises(ValueError):
        runs = lr_runs()
        aggregate(table(runs, [0.5] * 8, [0.1] * 8), runs, "mean", ["test.acc", "train.avg_loss"],
                  (), Select(over="model.nope", by="train.avg_loss"))


def _ctx(tmp_path, runs, df, metrics, pv=()):
    cells = aggregate(df, runs, "mean", metrics, [10, 90])
    spec = SimpleNamespace(id="t", title="t", paper_values=list(pv),
                           aggregate=SimpleNamespace(reduce="mean"))
    return FigureContext(spec, "quick", cells, cell_keys(runs),
                         lambda stem, ext: tmp_path / f"{stem}.{ext}")


def test_bands_and_length_curves_render(tmp_path):
    runs = [Run(a, {"model.d_model": d, "model.window": w}, s) for a in ("SSM-TF", "TF-TF")
            for d in (4, 8) for w in (10, 20) for s in range(3)]
    runs += [Run("SSM-SSM", {"model.d_model": 8}, s) for s in range(3)]
    rows = []
    for i, r in enumerate(runs):
        rows.append({"run_id": f"r{i}", "label": r.label, "seed": r.seed, "status": "ok",
                     "n_params": 1000 * r.coords["model.d_model"], "test.acc": 0.1 * (i % 9),
                     "L20.acc": 0.9, "L40.acc": 0.5 + 0.01 * r.seed, **r.flat()})
    df = pd.DataFrame(rows)
    pv = [PaperValue(where={"label": "SSM-TF", "model.d_model": 8, "model.window": 20},
                     value=0.99)]
    ctx = _ctx(tmp_path, runs, df, ["test.acc", "L20.acc", "L40.acc"], pv)
    assert _draw(ctx, {"kind": "bands"}, tmp_path / "a.png")
    assert _draw(ctx, {"kind": "bands", "x": "model.window", "logx": False,
                       "reference": ["SSM-SSM"], "facet": "model.d_model"}, tmp_path / "b.png")
    assert _draw(ctx, {"kind": "length_curves", "lengths": [20, 40], "train_range": [10, 30]},
                 tmp_path / "c.png")
    # one panel: only the cells matching `where`; none left draws nothing
    assert _draw(ctx, {"kind": "bands", "x": "model.window", "where": {"label": "TF-TF"}},
                 tmp_path / "d.png")
    assert not _draw(ctx, {"kind": "bands", "where": {"label": "nope"}}, tmp_path / "e.png")
    for f in ("a", "b", "c", "d"):
        assert (tmp_path / f"{f}.png").stat().st_size > 10_000
    with pytest.raises(ValueError):
        from ssmrepro.plots import parse_figure
        parse_figure({"kind": "length_curves", "lengths": [1, 2], "pattern": "acc"})


# ---------------------------------------------------------------------------------------------
# the constructed hybrid


def construct(words=26, d=40, window=20, E=2, dtype=torch.float32):
    task = build_task({"name": "selective_copy", "words": words})
    cfg = CooperHybridConfig(d_model=d, layers="SSM-TF", d_state=1, window=window,
                             tie_head=False, init=InitConfig(scheme="cooper_construction"))
    return task, build_model(cfg, task.info, E, list(range(E))).to(dtype).eval()


@pytest.mark.parametrize("kw", [{}, {"distribution": "mixed"}, {"p": 0.5}])
def test_construction_is_exact(kw):
    task, model = construct()
    task = build_task({"name": "selective_copy", **kw})
    b = task.sample(torch.tensor([0, 1]), TEST, torch.arange(300).expand(2, 300))
    with torch.no_grad():
        pred = model(b.x).argmax(-1)
    sup = b.y != IGNORE
    last = sup[..., -1]
    assert int(last.sum()) > 250
    assert torch.equal(pred[..., -1][last], b.y[..., -1][last])  # the paper's claim
    assert torch.equal(pred[sup], b.y[sup])  # and (RoPE, relative) every supervised position


def test_construction_members_identical_and_seed_free():
    _, m = construct(E=2)
    for p in m.parameters():
        assert torch.equal(p[0], p[1])


def test_construction_refuses_what_it_cannot_build():
    with pytest.raises(ValueError):
        construct(d=24)  # the layout needs 34 dims for V = 34
    with pytest.raises(ValueError):
        construct(window=8)  # offset 9 is out of reach
    task = build_task({"name": "selective_copy"})
    with pytest.raises(ValueError):  # tied head
        build_model(CooperHybridConfig(d_model=40, init=InitConfig(scheme="cooper_construction")),
                    task.info, 1, [0])
    with pytest.raises(ValueError):  # TF first
        build_model(CooperHybridConfig(d_model=40, layers="TF-SSM", tie_head=False,
                                       init=InitConfig(scheme="cooper_construction")),
                    task.info, 1, [0])
    with pytest.raises(ValueError):
        InitConfig(numbers=3)  # construction fields only with their scheme


def test_rope_margin_needs_enough_rotary_channels():
    assert selective_copy_margin(4, 0.25, 10000.0, [5, 6, 7, 8, 9], 19) == 0.0  # no rotary pair
    assert selective_copy_margin(40, 0.25, 10000.0, [5, 6, 7, 8, 9], 19) > 0.1
    w = selective_copy_weights(words=26, numbers=5, offset=5, d_model=40, d_inner=80, d_state=1,
                               d_conv=4, dt_rank=3, heads=1, rotary_pct=0.25, rope_base=1e4,
                               window=20, L=100, mlp_hidden=80)
    emb = w["embed"]
    assert torch.allclose(emb.sum(1), torch.ones(34, dtype=emb.dtype))  # equal sums ...
    assert torch.allclose((emb ** 2).sum(1), torch.full((34,), 17.0, dtype=emb.dtype))  # norms


def test_a_batch_without_targets_trains_as_zero_loss():
    """Short AR-with-decoding sequences can leave a (micro-)batch with no supervised position:
    the loss is 0 with a zero gradient, not a crash (found by cooper2026-fig8's quick run)."""
    from ssmrepro.tasks.base import Batch
    from ssmrepro.train import forward_backward, member_losses, supervised_logits

    task = build_task({"name": "decode_recall", "L": 20})
    model = build_model(CooperHybridConfig(layers="SSM-TF", d_model=8), task.info, 2, [0, 1])
    x = torch.randint(0, 32, (2, 3, 20))
    y = torch.full_like(x, IGNORE)
    out, yy = supervised_logits(model, x, y)
    loss, _, count = member_losses(out, yy)
    assert loss.tolist() == [0.0, 0.0] and count.tolist() == [0.0, 0.0]
    active = torch.tensor([True, True])
    y2 = y.clone()
    y2[:, 2, 5] = 3  # one target in the last sequence only: micro-batches of 1 see none twice
    got = forward_backward(model, Batch(x=x, y=y2), torch.float32, None, active, micro_batch=1)
    assert torch.isfinite(got).all() and (got > 0).all()
