"""cooper2026's report pieces: percentiles over seeds, the per-cell choice of a swept key by a
metric (automatic learning rate), the band / length-curve / construction figure kinds, and the
constructed hybrids for selective copy and for AR with decoding (exact)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from test_checks import Run
from test_outputs import _draw

from ssmrepro.models import build_model
from ssmrepro.models.init import InitConfig, initialise
from ssmrepro.models.presets import CooperHybridConfig
from ssmrepro.plots import FigureContext
from ssmrepro.report import aggregate, cell_keys, verify
from ssmrepro.spec import Aggregate, PaperValue, Select
from ssmrepro.tasks import build_task
from ssmrepro.tasks.base import IGNORE, TEST
from ssmrepro.tasks.cooper_tokens import last_position_before
from ssmrepro.tasks.decode_recall import decode_state
from ssmrepro.theory.cooper import selective_copy_margin, selective_copy_weights
from ssmrepro.theory.cooper_decode import (
    decode_recall_plan,
    decode_recall_weights,
    divided_difference_weights,
    node_decays,
    tail_bounds,
)


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


def test_select_reads_the_metric_columns_of_a_results_table():
    """results.csv and the store name metric columns ``metric.<m>``: the selection must read
    them too (it read the bare name only, so every cell silently kept its first candidate)."""
    runs = lr_runs()
    loss = [0.1 if r.coords["train.lr"] == 0.1 else 0.5 for r in runs]
    acc = [0.2 if r.coords["train.lr"] == 0.1 else 0.9 for r in runs]
    df = table(runs, acc, loss).rename(columns={"test.acc": "metric.test.acc",
                                                "train.avg_loss": "metric.train.avg_loss"})
    cells = aggregate(df, runs, "mean", ["test.acc", "train.avg_loss"], (),
                      Select(over="train.lr", by="train.avg_loss"))
    assert cells.iloc[0]["train.lr"] == 0.1 and cells.iloc[0]["test.acc"] == pytest.approx(0.2)


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


@pytest.mark.parametrize("construction", ["selective_copy", "decode_recall"])
def test_construction_members_identical_and_seed_free(construction):
    _, m = (construct if construction == "selective_copy" else construct_decode)(E=2)
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


# ---------------------------------------------------------------------------------------------
# the constructed hybrid for AR with decoding (Thm 4.6, theory.cooper_decode)

DECODE_D = {8: 38, 16: 48, 32: 58, 64: 68, 128: 78}  # 6b + 4K + 2


def construct_decode(words=32, d=None, window=100, E=2, dtype=torch.float32, exact=False,
                     layers="SSM-TF-TF", tie_head=False, L=100):
    """The constructed model; ``exact``: the weights written again at ``dtype`` (build_model
    builds float32 and so rounds them)."""
    task = build_task({"name": "decode_recall", "words": words, "L": L})
    init = InitConfig(scheme="cooper_construction", construction="decode_recall")
    cfg = CooperHybridConfig(d_model=d or DECODE_D[words], layers=layers, d_state=1,
                             window=window, tie_head=tie_head, init=init)
    model = build_model(cfg, task.info, E, list(range(E))).to(dtype).eval()
    if exact:
        initialise(model, list(range(E)), init)
    return task, model


def decode_batch(n=300, seeds=(0, 1), **kw):
    task = build_task({"name": "decode_recall", **kw})
    return task.sample(torch.tensor(list(seeds)), TEST, torch.arange(n).expand(len(seeds), n))


def predict(model, x):
    with torch.no_grad():
        return model(x).argmax(-1)


@pytest.mark.parametrize("kw", [{}, {"p": 0.05}, {"p": 0.5}, {"p": 0.9}])
def test_decode_construction_is_exact_at_every_supervised_position(kw):
    _, model = construct_decode()
    b = decode_batch(**kw)
    pred, sup = predict(model, b.x), b.y != IGNORE
    assert int(sup.sum()) > 5000
    assert torch.equal(pred[sup], b.y[sup])
    last = sup[..., -1]
    assert int(last.sum()) > 100 and torch.equal(pred[..., -1][last], b.y[..., -1][last])


@pytest.mark.parametrize("words", [8, 16])
def test_decode_construction_smaller_vocabularies(words):
    _, model = construct_decode(words=words)
    b = decode_batch(n=200, words=words)
    pred, sup = predict(model, b.x), b.y != IGNORE
    assert torch.equal(pred[sup], b.y[sup])


@pytest.mark.parametrize("words", [32, 64, 128])
def test_decode_construction_float64(words):
    """float64 with the weights written in float64: exact for K = 5, 6, 7 state bits; float32
    (or float32-rounded weights) is not enough for K >= 6 (the divided differences' weights
    grow like (K(K-1))^(K-1)), which is why the spec stays at K <= 5 in float32."""
    _, model = construct_decode(words=words, dtype=torch.float64, exact=True)
    b = decode_batch(n=150, words=words)
    pred, sup = predict(model, b.x), b.y != IGNORE
    assert int(sup.sum()) > 1000 and torch.equal(pred[sup], b.y[sup])
    if words == 64:
        _, m32 = construct_decode(words=words)
        pred32 = predict(m32, b.x)
        assert not torch.equal(pred32[sup], b.y[sup])


def test_decode_construction_fails_when_perturbed():
    """The exactness check can fail: a wrong decay in the SSM (the state is decoded wrongly) and
    no recency term in the recall layer (an older occurrence of V_s can win) both break it."""
    b = decode_batch()
    sup = b.y != IGNORE
    _, model = construct_decode()
    with torch.no_grad():
        model.blocks[0].mixer.ssm.A_log[:, 4, 0] += 0.2  # node channel λ_2
    acc = (predict(model, b.x) == b.y)[sup].double().mean()
    assert acc < 0.95
    _, model = construct_decode()
    attn = model.blocks[2].attn
    with torch.no_grad():
        attn.qkv.bias[:, : attn.r] = 0.0  # the recency query
    acc = (predict(model, b.x) == b.y)[sup].double().mean()
    assert acc < 0.99


def _recall_distance(x, words):
    """t - (j + 1) for the recalled pair (x[j] = V_{s_t}, j <= t - 1 last), -1 if none."""
    s = decode_state(x, words)
    pos = torch.arange(x.shape[-1])
    j = torch.full_like(x, -1)
    for w in range(words):
        last = last_position_before(x, x == w)
        before = torch.cat([torch.full_like(last[..., :1], -1), last[..., :-1]], dim=-1)
        j = torch.where(s == w, before, j)
    return torch.where(j >= 0, pos - (j + 1), torch.full_like(j, -1))


def test_decode_construction_is_exact_inside_the_window():
    """L = 160 > window 100: exact wherever the recalled pair lies inside the window, and the
    window really limits (some positions outside it are wrong)."""
    _, model = construct_decode(window=100)
    b = decode_batch(n=200, L=160)
    dist = _recall_distance(b.x, 32)
    sup = b.y != IGNORE
    assert torch.equal(sup, dist >= 0)
    inside, outside = sup & (dist < 100), sup & (dist >= 100)
    pred = predict(model, b.x)
    assert int(outside.sum()) > 100
    assert torch.equal(pred[inside], b.y[inside])
    assert not torch.equal(pred[outside], b.y[outside])


def test_decode_construction_refuses_what_it_cannot_build():
    with pytest.raises(ValueError):
        construct_decode(d=56)  # the layout needs 58 dims for W = 32
    with pytest.raises(ValueError):
        construct_decode(words=4, d=40)  # W < 8: a non-word token can look like a word
    with pytest.raises(ValueError):
        construct_decode(window=None)
    with pytest.raises(ValueError):
        construct_decode(layers="SSM-TF")
    with pytest.raises(ValueError):
        construct_decode(layers="SSM-SSM-TF")
    with pytest.raises(ValueError):
        construct_decode(tie_head=True)
    with pytest.raises(ValueError):
        InitConfig(construction="decode_recall")  # only with scheme cooper_construction
    with pytest.raises(ValueError):
        InitConfig(scheme="cooper_construction", construction="decode_recall", numbers=2)


def test_decode_plan_tails_and_stream():
    for K in range(3, 9):
        lam, _ = node_decays(K)
        assert float(tail_bounds(lam).max()) < 0.75  # every bit's tail leaves a margin > 0.25
    # the divided differences recover the j-th newest bit of Σ β_i λ^i up to the tail
    lam, _ = node_decays(5)
    w = divided_difference_weights(lam)
    beta = torch.tensor([1.0, -1, -1, 1, 1] + [-1.0] * 30, dtype=torch.float64)
    S = (beta[None] * lam[:, None] ** torch.arange(35)).sum(1)
    assert torch.equal(torch.sign(w @ S), beta[:5])
    plan = decode_recall_plan(words=32, d_model=58, rotary_pct=0.25, rope_base=1e4, window=100)
    assert plan["norm_slack"] < 15 and plan["min_bit_margin"] > 0.25
    w = decode_recall_weights(words=32, d_model=58, d_inner=116, d_state=1, d_conv=4, dt_rank=4,
                              heads=1, rotary_pct=0.25, rope_base=1e4, window=100,
                              mlp_hidden=116)
    emb = w["embed"]
    assert torch.equal(emb.sum(1), torch.zeros(37, dtype=emb.dtype))  # sum 0, equal norms
    assert torch.allclose((emb ** 2).sum(1), torch.full((37,), 14.0, dtype=emb.dtype))
