"""huang2025 outputs: the region and size_order checks, the bound_grid and haar_wavelet figure
kinds, analytic specs (a table from theory, no training), theory.haar and the mamba_lm options
for huang2025's §5 models."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from pydantic import ValidationError
from test_checks import Run, judge
from test_outputs import _ctx, _draw
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.models import MambaLMConfig, build_model, count_params
from ssmrepro.models.mixers.delta_t import DeltaTCore
from ssmrepro.models.mixers.mamba1 import Mamba1Mixer
from ssmrepro.models.mixers.mamba2_3conv import Mamba2ThreeConv
from ssmrepro.models.mixers.s4d import S4DCore
from ssmrepro.plots import parse_figure
from ssmrepro.report import parse_claim
from ssmrepro.spec import SpecError, load_spec
from ssmrepro.sweep import expand
from ssmrepro.tasks import build_task
from ssmrepro.theory import TABLES, haar

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------- region

def _kd_runs(labels=("A",), kappas=(4, 8), ds=(8, 16, 32)):
    return [Run(lab, {"task.kappa": k, "model.d_model": d, "task.vocab": 128})
            for lab in labels for k in kappas for d in ds]


BELOW = "model.d_model < task.kappa + log2(task.vocab)"  # 11 at kappa 4, 15 at kappa 8


def test_region_all_below_the_line():
    runs = _kd_runs()
    claim = {"check": "region", "text": "only above", "where": {"label": "A"}, "region": BELOW,
             "op": "<", "value": 0.99}
    good = [0.3, 1.0, 1.0, 0.2, 0.9, 1.0]  # d = 8 (k 4), d = 8 (k 8) below: not solved
    assert judge([claim], runs, good)[0].verdict == "PASS"
    bad = [1.0, 1.0, 1.0, 0.2, 0.9, 1.0]  # d = 8 at kappa 4 solves below the line
    v = judge([claim], runs, bad)[0]
    assert v.verdict == "FAIL" and "kappa=4" in v.detail
    assert judge([{**claim, "allowed_violations": 1}], runs, bad)[0].verdict == "PASS"
    missing = [0.3, 1.0, 1.0, None, 0.9, 1.0]  # a needed below-line cell not finished
    assert judge([claim], runs, missing)[0].verdict == "MISSING"


def test_region_any_above_the_line():
    runs = _kd_runs()
    claim = {"check": "region", "text": "attainable", "where": {"label": "A"},
             "region": f"not ({BELOW})", "op": ">=", "value": 0.99, "mode": "any"}
    assert judge([claim], runs, [0.1, 0.5, 1.0, 0.1, 0.5, 0.5])[0].verdict == "PASS"
    assert judge([claim], runs, [0.1, 0.5, 0.9, 0.1, 0.5, 0.5])[0].verdict == "FAIL"
    # one finished cell that holds is enough, even with others missing
    assert judge([claim], runs, [0.1, None, 1.0, 0.1, None, None])[0].verdict == "PASS"


def test_region_rejects_bad_expressions():
    with pytest.raises(ValidationError):
        parse_claim({"check": "region", "text": "t", "region": "__import__('os')", "op": "<",
                     "value": 1})


# ---------------------------------------------------------------------------------- size_order

def test_size_order():
    runs = _kd_runs(labels=("M2", "M", "S4D"))
    claim = {"check": "size_order", "text": "M2 < M < S4D", "labels": ["M2", "M", "S4D"],
             "size": "model.d_model", "group_by": ["task.kappa"], "threshold": 0.99}
    #            M2: k4 d8,16,32  k8       M: k4        k8           S4D: k4       k8
    ordered = [1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0]
    v = judge([claim], runs, ordered)[0]
    assert v.verdict == "PASS", v.detail
    swapped = [0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0]  # M beats M2 at kappa 4
    assert judge([claim], runs, swapped)[0].verdict == "FAIL"
    ties = [0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1]  # M2 = M = S4D everywhere
    assert judge([claim], runs, ties)[0].verdict == "FAIL"  # never strictly better
    assert judge([{**claim, "strict": False}], runs, ties)[0].verdict == "PASS"
    nothing = [0] * 18  # a finished grid no label solves: a result (as a frontier of 0 points)
    assert judge([claim], runs, nothing)[0].verdict == "FAIL"


# ---------------------------------------------------------------------------------- bound_grid

def test_bound_grid_renders_lines_and_halves(tmp_path):
    runs = _kd_runs(labels=("Mamba", "Mamba-2"))
    vals = [min(1.0, r.coords["model.d_model"] / 16) for r in runs]
    ctx = _ctx(tmp_path, runs, vals)
    raw = {"kind": "bound_grid", "x": "task.kappa", "y": "model.d_model",
           "bounds": {"Mamba": [{"expr": "task.kappa + log2(task.vocab)",
                                 "text": "Thm 2 (constant 1)"}],
                      "*": [{"expr": "8", "axis": "x", "text": "a vertical line"}]}}
    assert _draw(ctx, raw, tmp_path / "b.png") and (tmp_path / "b.png").stat().st_size > 1000
    assert _draw(ctx, {**raw, "halves": ["Mamba", "Mamba-2"]}, tmp_path / "h.png")
    with pytest.raises(ValidationError):
        parse_figure({**raw, "bounds": {"Mamba": [{"expr": "os.system(1", "text": "x"}]}})


# ---------------------------------------------------------------------------------- theory.haar

def test_softplus_integral_against_quadrature():
    for u in (-30.0, -3.0, -0.2, 0.0, 0.7, 4.0, 40.0):
        v = np.linspace(-80, u, 400001)
        f = np.logaddexp(0, v)
        quad = float(np.sum((f[1:] + f[:-1]) * np.diff(v)) / 2)
        assert haar.softplus_integral(u) == pytest.approx(quad, rel=1e-7, abs=1e-9)
    assert haar.softplus_integral(0.0) == pytest.approx(math.pi**2 / 12)


def test_haar_wavelet_and_thm1_limit():
    s = np.array([0.1, 0.3, 0.4, 0.6])
    assert haar.haar(s, 2, 1).tolist() == [0.0, 2.0, -2.0, 0.0]  # jumps at 0.25, 0.375, 0.5
    assert haar.haar(np.array([0.25, 0.375]), 2, 1).tolist() == [0.0, 2.0]  # H(0) = 0
    with pytest.raises(ValueError):
        haar.jumps(1, 2)
    # the basis function is a Heaviside in the limit: 0 well before t̂, 2^{j/2} after
    g = haar.mamba_basis(np.array([0.2, 0.6]), 0.4, -1e6, j=2)
    assert g[0] < 1e-12 and g[1] == pytest.approx(2.0, rel=1e-5)
    e3, e6 = haar.errors(-1e3, 2, 1, n=20001), haar.errors(-1e6, 2, 1, n=20001)
    assert e6["l2"] < e3["l2"] and e6["sup_away"] < 1e-6 < e3["sup_away"]
    assert e6["sup"] == pytest.approx(4.0, abs=1e-3)  # the jump points: never uniform
    assert set(TABLES["haar_thm1"].metrics) == {"l2", "sup_away", "sup"}


# ---------------------------------------------------------------------------------- analytic specs

def _analytic_spec(tmp_path, **over) -> Path:
    raw = yaml.safe_load((ROOT / "experiments/huang2025/huang2025-figA1.yaml").read_text())
    raw.update(id="t-analytic", paper="tests")
    raw["analytic"]["grid"] = {"abs_w": [100, 10000, 1000000, 100000000]}
    raw["analytic"]["params"]["n"] = 50001
    raw["claims"] = [c for c in raw["claims"] if c.get("check") != "loglog_slope"]
    raw["claims"][0]["where"] = {}
    raw["claims"][2]["where"] = {"abs_w": 1000000}
    raw.update(over)
    p = tmp_path / "t-analytic.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return p


def test_analytic_spec_runs_without_training(tmp_path):
    p = _analytic_spec(tmp_path)
    spec = load_spec(p)
    assert expand(spec, "quick") == []
    res = runner.invoke(app, ["run", str(p), "--profile", "smoke", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    root = tmp_path / "o" / "tests" / "t-analytic"
    import pandas as pd
    df = pd.read_csv(root / "results-smoke.csv")
    assert len(df) == 4 and {"abs_w", "l2", "sup_away", "sup"} <= set(df.columns)
    rep = (root / "report-smoke.md").read_text()
    assert "analytic" in rep and "no training" in rep
    assert "3 PASS, 1 FAIL" in rep  # the literal uniform bound fails at the jump points
    assert (root / "figure-smoke.png").stat().st_size > 1000
    dry = runner.invoke(app, ["run", str(p), "--profile", "paper", "--dry-run"])
    assert dry.exit_code == 0 and "no runs: table haar_thm1 from theory: 4 rows" in dry.output


def test_analytic_spec_trains_nothing(tmp_path):
    with pytest.raises(SpecError, match="trains nothing"):
        load_spec(_analytic_spec(tmp_path, task={"name": "keep_nth"}))
    with pytest.raises(SpecError, match="task. and .model"):
        load_spec(_analytic_spec(tmp_path, analytic=None))
    bad = _analytic_spec(tmp_path)
    raw = yaml.safe_load(bad.read_text())
    raw["analytic"]["table"] = "nope"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True))
    res = runner.invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2 and "unknown analytic table" in res.output


# ---------------------------------------------------------------------------------- models

MQ = {"name": "mqar_huang", "kappa": 4, "vocab": 16, "T": 20}


@pytest.mark.parametrize("fields, core", [
    ({"core": "s6", "gate": False}, None), ({"core": "s4d"}, S4DCore),
    ({"core": "delta_t", "gate": False}, DeltaTCore),
    ({"mixer": "mamba2_3conv", "gate": False}, Mamba2ThreeConv)])
def test_mamba_lm_huang_variants(fields, core):
    info = build_task(MQ).info
    cfg = MambaLMConfig(d_model=16, d_state=8, expand=1, **fields)
    m = build_model(cfg, info, 2, [0, 1])
    mixers = [x for x in m.modules() if isinstance(x, (Mamba1Mixer, Mamba2ThreeConv))]
    assert len(mixers) == 1
    if core is not None:
        assert any(isinstance(x, core) for x in m.modules())
    gate = getattr(mixers[0], "gate", None) if isinstance(mixers[0], Mamba1Mixer) else \
        mixers[0].W_g is not None
    assert bool(gate) == fields.get("gate", True)
    x = build_task(MQ).sample(torch.tensor([0, 1]), 0, torch.arange(3).expand(2, 3)).x
    assert m(x).shape == (2, 3, 20, info.n_classes)
    assert count_params(m, 2) > 0
    with pytest.raises(ValidationError):
        MambaLMConfig(mixer="mamba2_3conv", core="s4d")


def test_mamba_lm_defaults_unchanged():
    """The new fields default to koren2026's mamba_lm (run ids of existing specs unchanged)."""
    cfg = MambaLMConfig()
    assert (cfg.mixer, cfg.core, cfg.gate) == ("mamba1", "s6", True)
    from ssmrepro.sweep.config import lean
    assert set(lean(cfg)) == {"name"}


def test_huang_specs_expand():
    for name in ("huang2025-fig2", "huang2025-figA2", "huang2025-figA3", "huang2025-fig3",
                 "huang2025-figA4"):
        path = ROOT / "experiments/huang2025" / f"{name}.yaml"
        if path.exists():
            spec = load_spec(path)
            for prof in spec.profiles:
                assert expand(spec, prof)


def test_spread():
    runs = [Run("S4D", {"task.kappa": k, "model.d_state": n}) for k in (4, 8) for n in (1, 4, 16)]
    claim = {"check": "spread", "text": "insensitive to N", "group_by": ["task.kappa"],
             "tol": 0.05}
    assert judge([claim], runs, [0.9, 0.92, 0.91, 0.3, 0.3, 0.32])[0].verdict == "PASS"
    assert judge([claim], runs, [0.9, 0.5, 0.91, 0.3, 0.3, 0.32])[0].verdict == "FAIL"
    assert judge([{**claim, "allowed_violations": 1}], runs,
                 [0.9, 0.5, 0.91, 0.3, 0.3, 0.32])[0].verdict == "PASS"
    assert judge([claim], runs, [0.9, None, 0.91, 0.3, 0.3, 0.32])[0].verdict == "MISSING"


def test_ssm_lm_position_encodings():
    """index / index_norm: t or t/T in the last channel (|V| fewer parameters); sinusoidal: fixed
    positions added (no parameters); learned: T × d added."""
    from ssmrepro.models import SSMLMConfig
    from ssmrepro.models.backbone import sinusoidal
    task = build_task({"name": "keep_nth", "n": 2, "T": 10, "vocab": 16})
    x = task.sample(torch.tensor([0]), 0, torch.arange(4)[None]).x
    counts, feats = {}, {}
    for pe in ("none", "index", "index_norm", "sinusoidal", "learned"):
        m = build_model(SSMLMConfig(d_model=8, d_state=4, pe=pe), task.info, 1, [0])
        counts[pe] = count_params(m, 1)
        feats[pe] = m.embed_tokens(x)
    assert counts["index"] == counts["index_norm"] == counts["none"] - 16
    assert counts["sinusoidal"] == counts["none"] and counts["learned"] == counts["none"] + 80
    assert torch.equal(feats["index"][..., -1], torch.arange(1, 11.0).expand(1, 4, 10))
    assert torch.allclose(feats["index_norm"][..., -1], torch.arange(1, 11.0).expand(1, 4, 10) / 10)
    pe = sinusoidal(10, 8)
    assert torch.allclose(feats["sinusoidal"] - feats["none"], pe.expand(1, 4, 10, 8), atol=1e-6)
    assert pe[0, 1] == 1.0 and pe[0, 0] == 0.0 and abs(float(pe[3, 0]) - math.sin(3)) < 1e-6


def test_budget_curves_from_the_curve_table(tmp_path):
    from ssmrepro.plots.curves import CURVES
    from ssmrepro.report.curves import curve_table
    from ssmrepro.spec import PaperValue
    recs = [{"label": lab, "status": "ok", "seed": s, "config": {"task": {"T": T}},
             "history": [{"step": st, "val.acc": min(1.0, st / 1000 * (s + 1)), "val.loss": 1.0}
                         for st in (0, 100, 500, 1000)]}
            for lab in ("Mamba+PE", "S4D+PE") for T in (10, 30) for s in (0, 1)]
    hist = curve_table(recs, ["label", "task.T"])
    assert len(hist) == 2 * 2 * 2 * 4 and set(hist["seed"]) == {0, 1}
    runs = [Run(lab, {"task.T": T}) for lab in ("Mamba+PE", "S4D+PE") for T in (10, 30)]
    ctx = _ctx(tmp_path, runs, [1.0, 1.0, 0.5, 0.2], tables={CURVES: hist})
    ctx.spec.paper_values = [PaperValue(where={"label": "S4D+PE", "task.T": 10}, value=0.94)]
    raw = {"kind": "curves", "series": "val.acc", "col": "label", "hue": "task.T", "seeds": "best",
           "logx": True, "paper_as": {"test.acc": "val.acc"}, "names": {"task.T": "T"}}
    assert _draw(ctx, raw, tmp_path / "c.png") and (tmp_path / "c.png").stat().st_size > 1000
    assert not _draw(_ctx(tmp_path, runs, [1.0] * 4), raw, tmp_path / "x.png")
