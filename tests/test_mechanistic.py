"""koren2026 mechanistic probes (analysis.mechanistic): the invariant operators reproduce the linear
model's logits exactly, Thm 2's designed weights have Eq. 10's structure (and every probe says so),
an untrained model does not, and the probes refuse models they cannot read."""

import pytest
import torch

from ssmrepro.analysis import mechanistic as mech
from ssmrepro.models import MODELS, build_model
from ssmrepro.tasks import TaskInfo, build_task

V, L, KAPPA = 128, 32, 8
INFO = TaskInfo(vocab_size=V, n_classes=V, seq_len=L)
TASK = {"name": "mqar", "vocab": V, "L": L, "kappa": KAPPA, "power_a": 1.0}


def _model(init: str = "default", D: int = 64, N: int = 32, seed: int = 3):
    cfg = MODELS["linear_mamba"].Config(d_model=D, d_state=N, init=init)
    return build_model(cfg, INFO, 1, [seed]).double().eval()


@pytest.mark.parametrize("init", ["default", "designed"])
def test_operators_reproduce_the_model_logits(init):
    m = _model(init)
    ids = torch.randint(0, V, (3, L))
    ops = mech.operators(mech.circuit(m))
    torch.testing.assert_close(mech.operator_logits(ops, ids), m(ids[None])[0], rtol=1e-9, atol=1e-9)


def test_designed_weights_have_the_eq10_structure():
    ops = mech.operators(mech.circuit(_model("designed")))
    # G_vv = (0 | EᵀE): nothing from the previous token, the JL Gram matrix on the current one
    assert float(ops.G_vv[:, :V].abs().max()) == 0.0
    torch.testing.assert_close(torch.diagonal(ops.G_vv[:, V:]), torch.ones(V, dtype=torch.float64))
    # G_kq: only the (x_{τ-1}, x_t) block is non-zero
    for r, c in ((0, 0), (1, 0), (1, 1)):
        assert float(ops.G_kq[r * V:(r + 1) * V, c * V:(c + 1) * V].abs().max()) == 0.0
    m = mech.operator_metrics(ops)
    assert m["gkq.block_share"] == pytest.approx(1.0) and m["gvv.block_share"] == pytest.approx(1.0)
    assert m["gkq.diag_hit"] > 0.9 and m["gvv.diag_hit"] > 0.9
    assert m["gkq.dominance"] > 3 and m["gvv.dominance"] > 3


def test_every_probe_recognises_the_designed_circuit_and_not_an_untrained_one():
    task = build_task(TASK)
    good = mech.mechanistic_metrics(_model("designed"), task, seed=1)
    bad = mech.mechanistic_metrics(_model("default"), task, seed=1)
    assert set(good) == set(mech.MECH_METRICS) == set(bad)
    for k in ("gkq.diag_hit", "gvv.diag_hit", "hidden.hit", "attn.hit", "conv.copy_hit",
              "conv.shift_hit"):
        assert good[k] > 0.85, k
        assert bad[k] < 0.5, k
    for k in ("gkq.dominance", "gvv.dominance", "hidden.snr", "conv.copy_dominance",
              "conv.shift_dominance"):
        assert good[k] > 3, k
        assert bad[k] < 2, k
    # the whole-quadrant correlation is diluted by the compression noise spread over all V²/4
    # entries even for the ideal circuit (hence hit and snr test the claim, corr is reported)
    assert good["hidden.corr"] > 0.3 > 0.1 > abs(bad["hidden.corr"])
    assert good["attn.corr"] > 0.5 > 0.1 > abs(bad["attn.corr"])
    assert good["hidden.rel_err"] < 0.95 < bad["hidden.rel_err"] <= 1.0


def test_hidden_state_and_attention_maps_by_hand():
    # one sequence k1 v1 k2 v2 | q=k2 ... : H has ones at (v_n, k_n); α has a one at (q, τ = 3)
    ids = torch.tensor([[5, 70, 9, 80, 9, 3, 5, 4]])
    H = mech.ideal_hidden(ids, 2, V)
    assert H.sum() == 2 and H[0, 70, 5] == 1 and H[0, 80, 9] == 1
    m = _model("designed", D=64, N=32)
    c = mech.circuit(m)
    _, ideal = mech.attention_maps(c, mech.operators(c), ids)
    assert ideal[0, 4].nonzero().flatten().tolist() == [3]  # x_3's predecessor x_2 = 9 = x_4
    assert ideal[0, 6].nonzero().flatten().tolist() == [1]  # x_0 = 5 = x_6
    Mv, Mk = mech.copy_shift_maps(mech.operators(c), ids, 2)
    assert Mv.shape == Mk.shape == (1, 4, 4)
    assert int(Mv[0, 1].argmax()) == 1 and int(Mk[0, 3].argmax()) == 2  # copy; shift by one


def test_probes_refuse_models_they_cannot_read():
    with pytest.raises(ValueError, match="single-head linear_mamba"):
        mech.circuit(build_model(MODELS["mamba_lm"].Config(d_model=16, d_state=4), INFO, 1, [0]))
    with pytest.raises(ValueError, match="d_conv 2"):
        mech.circuit(build_model(MODELS["linear_mamba"].Config(d_model=16, d_state=4, d_conv=4),
                                 INFO, 1, [0]))
    with pytest.raises(ValueError, match="E = 1"):
        mech.circuit(build_model(MODELS["linear_mamba"].Config(d_model=16, d_state=4), INFO, 2,
                                 [0, 1]))


KINDS = ["invariant_operators", "hidden_state", "attention_maps", "copy_shift"]


def _mech_spec(tmp_path):
    """A tiny trained / untrained linear Mamba pair with the four mechanistic figure kinds
    (stems figure-smoke, hidden_state-smoke, ...)."""
    from helpers import write_spec

    return write_spec(
        tmp_path, "t-mech", task=TASK,
        model={"name": "linear_mamba", "d_model": 16, "d_state": 8},
        train={"optimizer": "adamw", "lr": 0.01, "batch_size": 16, "max_steps": 30,
               "val_size": 64, "test_size": 64, "eval_every": 15, "eval_batch_size": 64},
        sweep=[{"cases": [{"label": "trained"},
                          {"label": "untrained", "set": {"train.max_steps": 0}}]}],
        seeds=[0], save_weights=True, analysis=["mechanistic"],
        figure={"kind": KINDS[0], "where": [{"label": "trained"}, {"label": "untrained"}]},
        figures=[{"kind": k, "name": k, "where": [{"label": "trained"}]} for k in KINDS[1:]],
        claims=[{"text": "control", "metric": "gkq.diag_hit", "where": {"label": "untrained"},
                 "op": "<=", "value": 0.5}])


def test_mechanistic_metrics_and_figures_from_saved_weights(tmp_path):
    """save_weights + analysis mechanistic: the report reads per-cell numbers computed at plot time
    from the weights, caches them in mechanistic.csv (used when the weights are gone), and the
    four figure kinds draw the trained cells."""
    import pandas as pd
    from typer.testing import CliRunner

    from ssmrepro.cli import app

    path = _mech_spec(tmp_path)
    out = tmp_path / "res"
    res = CliRunner().invoke(app, ["run", str(path), "--profile", "smoke", "--out", str(out)])
    assert res.exit_code == 0, res.output
    root = out / "tests" / "t-mech"
    table = pd.read_csv(root / "mechanistic-smoke.csv")
    assert sorted(table["label"]) == ["trained", "untrained"]
    assert set(mech.MECH_METRICS) <= set(table.columns)
    summary = pd.read_csv(root / "summary-smoke.csv")
    assert summary["gkq.diag_hit"].notna().all()
    for stem in ["figure", *KINDS[1:]]:
        assert (root / f"{stem}-smoke.png").stat().st_size > 1000
    assert "1 PASS" in (root / "report-smoke.md").read_text()
    # without the weights (a fresh checkout) the committed table still feeds the claims
    for pt in (root / "runs").glob("*.pt"):
        pt.unlink()
    res = CliRunner().invoke(app, ["plot", str(path), "--profile", "smoke", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 PASS" in (root / "report-smoke.md").read_text()


def test_mechanistic_figures_redraw_from_their_arrays_without_weights(tmp_path):
    """Drawn from a tiny trained model's weights, each figure leaves its arrays beside it (the
    operators to a colour level); with the weights gone the same arrays draw the same figure,
    pixel for pixel, and the report keeps its verdicts; with neither, a line says why."""
    import matplotlib.image as mpimg
    import numpy as np
    from typer.testing import CliRunner

    from ssmrepro.cli import app
    from ssmrepro.engine import open_store
    from ssmrepro.plots import mechanistic as pm
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import build_member

    path = _mech_spec(tmp_path)
    out = tmp_path / "res"
    plot = ["plot", str(path), "--profile", "smoke", "--out", str(out)]
    res = CliRunner().invoke(app, ["run", str(path), "--profile", "smoke", "--out", str(out)])
    assert res.exit_code == 0, res.output
    root = out / "tests" / "t-mech"
    pngs = [root / f"{stem}-smoke.png" for stem in ["figure", *KINDS[1:]]]
    arrays = [pm.arrays_path(p) for p in pngs]
    assert arrays[0].name == "figure-smoke-arrays.npz"
    from_weights = [mpimg.imread(p) for p in pngs]
    stored = [a.read_bytes() for a in arrays]
    assert all(len(b) < 250_000 for b in stored), [len(b) for b in stored]
    # the stored G_vv of the trained cell is the model's, clipped to its colour range, to a level
    spec = load_spec(path)
    run = next(r for r in expand(spec, "smoke") if r.label == "trained")
    model = build_member(run, open_store(spec, out).read_weights(run.run_id))
    G = mech.operators(mech.circuit(model)).G_vv.numpy()
    with np.load(arrays[0]) as z:
        assert z["names"].tolist() == ["trained: D = 16, N = 8", "untrained: D = 16, N = 8"]
        lo, hi = z["r0.G_vv.lim"]
        assert lo == 0.0 and hi == pytest.approx(np.quantile(G, 0.999))
        assert z["r0.G_vv"].dtype == np.uint8 and z["r0.G_vv"].shape == G.shape
        err = np.abs(pm._values(z["r0.G_vv"], (lo, hi)) - np.clip(G, lo, hi))
        assert err.max() <= (hi - lo) / pm.LEVELS / 2 * (1 + 1e-9)
        names = z["r0.metric_names"].tolist()
        assert dict(zip(names, z["r0.metrics"])) == pytest.approx(
            {k: v for k, v in mech.operator_metrics(mech.operators(mech.circuit(model))).items()
             if k in names})
    report = (root / "report-smoke.md").read_text().splitlines()[2]
    # a fresh checkout: no weights, no figures; the arrays draw them again
    for p in [*(root / "runs").glob("*.pt"), *pngs]:
        p.unlink()
    res = CliRunner().invoke(app, plot)
    assert res.exit_code == 0, res.output
    for p, a, before, data in zip(pngs, arrays, from_weights, stored):
        assert a.read_bytes() == data  # read, not rewritten
        np.testing.assert_array_equal(mpimg.imread(p), before)
    assert (root / "report-smoke.md").read_text().splitlines()[2] == report
    # neither weights nor arrays: no figure, a message, no traceback
    for p in [*pngs, *arrays]:
        p.unlink()
    res = CliRunner().invoke(app, plot)
    assert res.exit_code == 0, res.output
    assert "figure-smoke.png not drawn: no saved weights" in res.output
    assert not any(p.exists() for p in pngs)


def test_stored_arrays_draw_the_full_precision_picture(tmp_path):
    """A panel keeps the colour level of each entry (uint8), so the figure drawn from the stored
    arrays equals the one drawn from the full-precision matrices, for all four kinds."""
    from types import SimpleNamespace

    import matplotlib.image as mpimg
    import numpy as np

    from ssmrepro.plots import mechanistic as pm

    task = build_task(TASK)
    ctx = SimpleNamespace(title=lambda cfg, **kw: "t")
    run = SimpleNamespace(label="x", run_id="r0", model=SimpleNamespace(d_model=32, d_state=16))
    members = [(run, _model(init, D=32, N=16), task, 5) for init in ("designed", "default")]
    kinds = {"invariant_operators": (pm.OperatorsConfig, pm._operators_row, pm._draw_operators),
             "hidden_state": (pm.HiddenConfig, pm._hidden_row, pm._draw_hidden),
             "attention_maps": (pm.AttentionConfig, pm._attention_row, pm._draw_attention),
             "copy_shift": (pm.CopyShiftConfig, pm._copy_shift_row, pm._draw_copy_shift)}
    for kind, (Config, row, draw) in kinds.items():
        cfg = Config(kind=kind)
        rows = [row(cfg, *m) for m in members]
        draw(ctx, cfg, tmp_path / "full.png", rows)
        draw(ctx, cfg, tmp_path / "stored.png", pm.unpack(pm.pack(rows, cfg), cfg))
        np.testing.assert_array_equal(mpimg.imread(tmp_path / "full.png"),
                                      mpimg.imread(tmp_path / "stored.png"), err_msg=kind)
    # arrays drawn for another selection are refused
    with pytest.raises(ValueError, match="another selection"):
        pm.unpack(pm.pack(rows, cfg), pm.CopyShiftConfig(kind="copy_shift", sample=1))


def test_output_variance_separates_a_recalling_model_from_noise():
    task = build_task(TASK)
    good = mech.output_metrics(_model("designed", D=64, N=32), task, seed=1)
    small = mech.output_metrics(_model("designed", D=64, N=4), task, seed=1)
    assert set(good) == set(mech.OUT_METRICS)
    # a larger state = less compression noise (Lemma 5's variance), a higher signal-to-noise
    assert good["out.noise_var"] < small["out.noise_var"]
    assert good["out.snr"] > small["out.snr"] > 0


def test_output_entries_are_normalised_and_split_as_eq132():
    """Correct entries average exactly 1 and the others 0 (per query minus the others' mean, over
    the mean margin); wrong = the other values of the query's own facts, empty = the rest."""
    task = build_task(TASK)
    e = mech.output_entries(_model("designed", D=64, N=32), task, seed=1, n_seq=64)
    Q = e["correct"].numel()
    assert Q == 64 * KAPPA
    assert e["wrong"].numel() == Q * (KAPPA - 1)
    assert e["empty"].numel() == Q * (V // 2 - KAPPA)
    assert float(e["correct"].mean()) == pytest.approx(1.0, abs=1e-12)
    others = torch.cat([e["wrong"], e["empty"]])
    assert float(others.mean()) == pytest.approx(0.0, abs=1e-9)
    # a smaller state = more SSM compression noise on the wrong entries (Lemma 5's σ̃ terms)
    small = mech.output_metrics(_model("designed", D=64, N=4), task, seed=1)
    big = mech.output_metrics(_model("designed", D=64, N=32), task, seed=1)
    assert small["out.wrong_var"] > big["out.wrong_var"] > 0


def test_output_distribution_figure_is_drawn_from_its_stored_arrays(tmp_path):
    """The Fig. 14 histograms are drawn from the stored (uint8-level) arrays, and storing them
    again changes nothing (a fresh clone draws the same picture); another binning is refused."""
    from types import SimpleNamespace

    import matplotlib.image as mpimg
    import numpy as np

    from ssmrepro.plots import mechanistic as pm

    task = build_task(TASK)
    cfg = pm.DistributionConfig(kind="output_distribution", bins=30)
    ctx = SimpleNamespace(title=lambda c, **kw: "t", fitted_title=lambda c, w, f=10: "t")
    rows = []
    for M, pattern in ((1, None), (2, "MHA")):
        mcfg = MODELS["linear_mamba"].Config(d_model=16, d_state=4, heads=M, head_pattern=pattern)
        model = build_model(mcfg, INFO, 1, [0]).double().eval()
        run = SimpleNamespace(label="MHA", run_id=f"r{M}", model=mcfg)
        rows.append(pm._distribution_row(cfg, run, model, task, 5))
    once = pm.unpack(pm.pack(rows, cfg), cfg)
    twice = pm.unpack(pm.pack(once, cfg), cfg)
    pm._draw_distribution(ctx, cfg, tmp_path / "a.png", once)
    pm._draw_distribution(ctx, cfg, tmp_path / "b.png", twice)
    np.testing.assert_array_equal(mpimg.imread(tmp_path / "a.png"), mpimg.imread(tmp_path / "b.png"))
    for r, s in zip(rows, once):  # each density within half a colour level of its value
        for k, (dens, (_, hi)) in r["panels"].items():
            assert np.abs(s["panels"][k][0] - dens).max() <= hi / pm.LEVELS / 2 + 1e-12
    with pytest.raises(ValueError, match="another selection"):
        pm.unpack(pm.pack(rows, cfg), pm.DistributionConfig(kind="output_distribution", bins=31))
