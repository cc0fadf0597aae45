"""Outputs stage: every figure kind renders, spec validation of figures / claims / paper values
(exit 2, 'file: key: reason', before training), bounded expressions in specs, and the layering
of spec / report / plots."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from test_checks import Run, rows_for
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.plots import FIGURE_KINDS, FigureContext, parse_figure, validate_outputs
from ssmrepro.plots.curves import CURVES
from ssmrepro.report import aggregate, cell_keys
from ssmrepro.report.analysis import (
    DECAY,
    DECAY_METRICS,
    add_metrics,
    decay_metrics,
    histogram_table,
)
from ssmrepro.report.curves import curve_table
from ssmrepro.spec import PaperValue, load_spec, spec_paths

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
SPEC = type("S", (), {})  # a stand-in spec for figure contexts


def _ctx(tmp_path, runs, values, tables=None, **spec_fields):
    df = rows_for(runs, values)
    cells = aggregate(df, runs, "mean", ["test.acc"])
    spec = SPEC()
    spec.id, spec.title, spec.paper_values = "t-spec", "a test figure", []
    spec.aggregate = type("A", (), {"reduce": "mean"})()
    for k, v in spec_fields.items():
        setattr(spec, k, v)
    return FigureContext(spec, "quick", cells, cell_keys(runs),
                         lambda stem, ext: tmp_path / f"{stem}.{ext}", tables or {})


def _draw(ctx, raw, path) -> bool:
    cfg = parse_figure(raw)
    return FIGURE_KINDS[cfg.kind].fn(ctx, cfg, path)


def test_every_figure_kind_is_registered():
    assert {"bars", "heatmaps", "lines", "histograms", "recall_grid", "curves",
            "phase"} <= set(FIGURE_KINDS)
    for k in FIGURE_KINDS.values():
        assert k.Config.model_config.get("extra") == "forbid"


def test_bars_heatmaps_lines_render(tmp_path):
    runs = [Run(f"{m} / {s}", {"model.d": d, "task.T": T}) for m in ("A", "B")
            for s in ("vs d",) for d in (8, 16) for T in (10, 20)]
    vals = [0.1 * (i % 10) for i in range(len(runs))]
    ctx = _ctx(tmp_path, runs, vals)
    ctx.spec.paper_values = [PaperValue(where={"label": "A / vs d", "model.d": 8, "task.T": 10},
                                        value=0.5)]
    for raw in ({"kind": "bars"}, {"kind": "heatmaps", "col": "case:0", "x": "task.T",
                                   "y": "model.d"},
                {"kind": "lines", "x": "model.d", "facet": "task.T"}):
        path = tmp_path / f"{raw['kind']}.png"
        assert _draw(ctx, raw, path) and path.stat().st_size > 1000


def test_heatmap_panel_shows_another_panels_paper_values(tmp_path, monkeypatch):
    """paper_panels: a panel for another layout of the paper's model shows that model's paper
    grid (cells_from_paper) and its paper value beside ours; other panels are unchanged."""
    import matplotlib.axes

    runs = [Run(lab, {"model.d": 8, "task.T": T}) for lab in ("A", "A (LN)") for T in (10, 20)]
    ctx = _ctx(tmp_path, runs, [0.1, 0.2, 0.9, 0.8])
    ctx.spec.paper_values = [PaperValue(where={"label": "A", "model.d": d, "task.T": 10}, value=v)
                             for d, v in ((8, 0.5), (16, 0.7))]
    texts, titles = [], []
    monkeypatch.setattr(matplotlib.axes.Axes, "text",
                        lambda self, x, y, s, **kw: texts.append(s))
    real_title = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda self, s, **kw: (titles.append(s), real_title(self, s, **kw))[1])
    raw = {"kind": "heatmaps", "col": "label", "x": "task.T", "y": "model.d",
           "cells_from_paper": True}
    assert _draw(ctx, raw, tmp_path / "h0.png")
    assert "0.90" in texts and "0.90 (0.50)" not in texts and "not run (0.70)" in texts
    texts.clear()
    assert _draw(ctx, {**raw, "paper_panels": {"A (LN)": "A"}}, tmp_path / "h1.png")
    assert texts.count("not run (0.70)") == 2  # the paper's d = 16 row in both panels
    assert "0.10 (0.50)" in texts and "0.90 (0.50)" in texts and "0.80" in texts
    assert "A (LN) (paper: A)" in titles


def test_lines_with_a_list_valued_swept_key(tmp_path):
    """A case that swaps a list-valued field (model.layers) is a cell key; lines still draw."""
    runs = [Run(m, {"model.layers": layers, "model.init.gamma": g})
            for m, layers in (("Mamba", ["SSM"]), ("Transformer", ["TF"])) for g in (0.5, 1.0)]
    ctx = _ctx(tmp_path, runs, [0.2, 0.2, 0.9, 0.5])
    raw = {"kind": "lines", "x": "model.init.gamma", "hue": "label", "facet": None}
    assert _draw(ctx, raw, tmp_path / "l.png")
    assert _draw(ctx, {**raw, "x": None}, tmp_path / "l2.png")


def test_lines_mark_paper_values_and_reference_curves(tmp_path):
    """Opt-in overlays: the paper's values (black ×) and reference curves of the x key; a
    reference naming another column is a config error."""
    import pytest
    from pydantic import ValidationError

    runs = [Run(str(lam), {"model.n_layers": lam, "task.key_repeats": k})
            for lam in (1, 2) for k in (1, 2, 3)]
    ctx = _ctx(tmp_path, runs, [1.0, 0.5, 0.33, 1.0, 0.96, 0.96])
    ctx.spec.paper_values = [PaperValue(where={"model.n_layers": 1, "task.key_repeats": 2},
                                        value=0.5)]
    raw = {"kind": "lines", "x": "task.key_repeats", "hue": "model.n_layers", "facet": None,
           "paper": True, "reference": {"1/N_k": "1 / task.key_repeats"},
           "names": {"task.key_repeats": "N_k", "model.n_layers": "Λ"}}
    assert _draw(ctx, raw, tmp_path / "l.png") and (tmp_path / "l.png").stat().st_size > 1000
    with pytest.raises(ValidationError, match="may only use the x column"):
        parse_figure({**raw, "reference": {"bad": "1 / model.n_layers"}})


def test_nothing_drawn_without_finished_runs(tmp_path):
    runs = [Run("A", {"model.d": 8})]
    ctx = _ctx(tmp_path, runs, [None])
    assert not _draw(ctx, {"kind": "bars"}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def _decay_records(labels=("Mamba", "S4D"), Ts=(10, 20)):
    z = [0] * 8
    split = {"bins": 10, "before": [5, *z, 1], "after": [1, *z, 5]}  # bin centres .05 ... .95
    flat = {"bins": 10, "before": [2, *z, 2], "after": [2, *z, 2]}
    return [{"label": lab, "status": "ok", "config": {"task": {"T": T}},
             "analysis": {DECAY: split if lab == "Mamba" else flat}}
            for lab in labels for T in Ts]


def test_histograms_render_from_the_decay_table(tmp_path):
    runs = [Run(lab, {"task.T": T}) for lab in ("Mamba", "S4D") for T in (10, 20)]
    hist = histogram_table(_decay_records(), ["label", "task.T"])
    ctx = _ctx(tmp_path, runs, [1.0, 1.0, 0.1, 0.1], tables={DECAY: hist})
    assert _draw(ctx, {"kind": "histograms"}, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    assert not _draw(_ctx(tmp_path, runs, [1.0] * 4), {"kind": "histograms"}, tmp_path / "x.png")


def test_decay_metrics_feed_claims():
    runs = [Run(lab, {"task.T": T}) for lab in ("Mamba", "S4D") for T in (10, 20)]
    hist = histogram_table(_decay_records(), ["label", "task.T"])
    per_cell = decay_metrics(hist)
    mamba = per_cell[per_cell["label"] == "Mamba"].iloc[0]
    assert mamba["decay.low_before"] == pytest.approx(5 / 6)
    assert mamba["decay.high_after"] == pytest.approx(5 / 6)
    assert mamba["decay.high_all"] == pytest.approx(6 / 12)
    assert mamba["decay.split"] == pytest.approx(4 / 6)
    assert per_cell[per_cell["label"] == "S4D"]["decay.split"].eq(0).all()
    cells = aggregate(rows_for(runs, [1.0] * 4), runs, "mean", ["test.acc"])
    cells = add_metrics(cells, per_cell, list(DECAY_METRICS))
    assert cells["decay.split"].notna().all()
    # a finished cell without a histogram has NaN (a miss for a claim), not a silent pass
    cells = add_metrics(cells.drop(columns=list(DECAY_METRICS)),
                        per_cell[per_cell["task.T"] == 10], list(DECAY_METRICS))
    assert cells["decay.split"].isna().sum() == 2


def test_recall_grid_renders_with_configured_constants(tmp_path):
    runs = [Run(lab, {"task.vocab": 512, "task.L": 64, "task.kappa": 16, "model.d_model": D,
                      "model.d_state": N}) for lab in ("(b) designed", "(c) trained linear")
            for D in (8, 16, 32, 64) for N in (4, 8, 16, 32) if N <= D]
    vals = [min(1.0, r.coords["model.d_model"] * r.coords["model.d_state"] / 1024) for r in runs]
    ctx = _ctx(tmp_path, runs, vals)
    raw = {"kind": "recall_grid", "columns": {"(b) designed": "designed",
                                              "(c) trained linear": "linear",
                                              "(d) trained full": "full"}}
    assert _draw(ctx, raw, tmp_path / "r.png") and (tmp_path / "r.png").stat().st_size > 1000
    # the theory constant is named in the config, never read from label text
    with pytest.raises(Exception, match="designed"):
        parse_figure({**raw, "columns": {"(b) designed": "trained"}})


def _history_records(layers=(2, 3), seeds=(0, 1)):
    """Run records with an eval history: acc rises with the step, OOD stays at chance."""
    recs = []
    for L in layers:
        for sd in seeds:
            hist = [{"step": t, "val.acc": t / 100, "val.loss": 1 - t / 100, "train.acc": t / 90,
                     "train.loss": 0.5, "ood.acc": 0.2, "ood.loss": 1.6} for t in (0, 50, 90)]
            recs.append({"label": "Mamba", "seed": sd, "status": "ok", "history": hist,
                         "config": {"model": {"repeat": L}, "train": {"batch_size": 32}}})
    return recs


def test_curve_table_flattens_histories():
    table = curve_table(_history_records(), ["label", "model.repeat"])
    assert len(table) == 2 * 2 * 3
    assert {"label", "model.repeat", "seed", "status", "step", "samples", "val.acc",
            "ood.acc"} <= set(table.columns)
    row = table[(table["model.repeat"] == 3) & (table["seed"] == 1) & (table["step"] == 50)]
    assert row["val.acc"].item() == 0.5 and row["samples"].item() == 50 * 32
    only = curve_table(_history_records(), ["label"], metrics=["val.acc"])
    assert "ood.acc" not in only and "val.acc" in only
    assert curve_table([{"label": "x", "history": []}], ["label"]).empty


def test_curves_and_phase_render(tmp_path):
    runs = [Run("Mamba", {"model.repeat": L}, seed=sd) for L in (2, 3) for sd in (0, 1)]
    table = curve_table(_history_records(), ["label", "model.repeat"])
    ctx = _ctx(tmp_path, runs, [0.5, 0.6, 0.7, 0.8], tables={CURVES: table})
    ctx.spec.paper_values = [PaperValue(where={"model.repeat": 2}, metric="ood.acc", value=0.2)]
    raw = {"kind": "curves", "series": "train.acc,val.acc,ood.acc", "col": "model.repeat",
           "labels": {"val.acc": "test"}}
    assert _draw(ctx, raw, tmp_path / "c.png") and (tmp_path / "c.png").stat().st_size > 1000
    assert _draw(ctx, {**raw, "seeds": "each", "row": "seed"}, tmp_path / "c2.png")
    assert _draw(ctx, {**raw, "wrap": 1}, tmp_path / "c4.png")  # two panels on two rows
    assert _draw(ctx, {**raw, "wrap": 5}, tmp_path / "c5.png")  # fits: one row as without
    assert not _draw(_ctx(tmp_path, runs, [0.5] * 4), raw, tmp_path / "c3.png")  # no table
    assert parse_figure(raw).history_metrics() == ["train.acc", "val.acc", "ood.acc"]
    grid = [Run("M", {"model.repeat": L, "model.init.gamma": g}) for L in (2, 3, 4)
            for g in (0.5, 1.0)]
    pctx = _ctx(tmp_path, grid, [0.1, 0.9, 0.2, 0.8, 0.3, 0.7])
    pctx.spec.paper_values = [
        PaperValue(where={"model.repeat": 2, "model.init.gamma": 0.5}, value=0.15),
        PaperValue(where={"model.repeat": 3, "model.init.gamma": 1.0}, value=0.1)]
    praw = {"kind": "phase", "x": "model.init.gamma", "y": "model.repeat",
            "panels": [{"metric": "test.acc", "title": "(a)", "paper_default": "≤.1"}]}
    assert _draw(pctx, praw, tmp_path / "p.png") and (tmp_path / "p.png").stat().st_size > 1000
    with pytest.raises(ValidationError):
        parse_figure({**praw, "panels": [{"metric": "test.acc", "bogus": 1}]})


def test_curves_panel_shows_another_panels_paper_values(tmp_path):
    """paper_panels: the dotted paper lines of a panel come from the panel it names."""
    import pandas as pd

    from ssmrepro.plots.curves import _paper_lines

    runs = [Run(lab, {"task.T": 10}) for lab in ("A", "A (LN)")]
    ctx = _ctx(tmp_path, runs, [0.1, 0.9])
    ctx.spec.paper_values = [PaperValue(where={"label": "A", "task.T": 10}, value=0.7)]
    raw = {"kind": "curves", "series": "val.acc", "col": "label", "paper_as": {"test.acc": "val.acc"}}
    sub = pd.DataFrame({"label": ["A (LN)"], "task.T": [10]})
    assert _paper_lines(ctx, parse_figure(raw), sub) == []
    mapped = parse_figure({**raw, "paper_panels": {"A (LN)": "A"}})
    assert _paper_lines(ctx, mapped, sub) == [("val.acc", 0.7)]
    assert _paper_lines(ctx, mapped, sub.assign(label="B")) == []


def test_curve_names_leave_out_columns_that_do_not_apply():
    """A hue column a run lacks (a Transformer's state size) is left out of its curve's name."""
    import pandas as pd

    from ssmrepro.plots.curves import _hue_text

    df = pd.DataFrame({"task.T": [10, 10], "model.d_state": [8.0, float("nan")]})
    cfg = parse_figure({"kind": "curves", "series": "val.acc", "hue": "task.T,model.d_state",
                        "names": {"model.d_state": "N"}})
    assert list(_hue_text(df, cfg)) == ["T=10, N=8", "T=10"]


def test_curves_label_reused_runs_as_this_profile(tmp_path, monkeypatch):
    """A run trained by another spec (reuse) carries that spec's label in its record; its curves
    are labelled as this profile's run, once per label it sits under."""
    from types import SimpleNamespace

    import ssmrepro.plots.outputs as outputs

    rec = {**_history_records(layers=(2,), seeds=(0,))[0], "run_id": "r1", "label": ""}
    store = SimpleNamespace(read=lambda i: rec if i == "r1" else None)
    monkeypatch.setattr(outputs, "open_store", lambda spec, root: store)
    point = {"task": None, "model": None, "train": None, "flat": lambda: {"model.repeat": 2}}
    runs = [SimpleNamespace(run_id="r1", label="(a) full symmetry", **point),
            SimpleNamespace(run_id="r1", label="(a) full symmetry", **point),
            SimpleNamespace(run_id="r1", label="other", **point),
            SimpleNamespace(run_id="missing", label="x", **point)]
    table = outputs._curves(None, tmp_path / "a" / "b", runs, ["label", "model.repeat"],
                            tmp_path / "curves.csv")
    assert sorted(set(table["label"])) == ["(a) full symmetry", "other"]
    assert len(table) == 2 * 3 and rec["label"] == ""  # the record itself is not changed


def test_curves_need_history_metrics_of_the_runs(tmp_path):
    bad = _broken(tmp_path, "huang2025-tab1", lambda raw: raw.update(
        figures=[{"kind": "curves", "name": "c", "series": ["ood.acc", "val.acc"]}]))
    errors = validate_outputs(load_spec(bad))
    assert any("'ood.acc' is not in the runs' evaluation history" in e for e in errors)
    assert not any("'val.acc'" in e for e in errors)


# ---------------------------------------------------------------------------------- validation


def _broken(tmp_path: Path, spec: str, mutate) -> Path:
    src = next(p for p in spec_paths() if p.stem == spec)
    raw = yaml.safe_load(src.read_text())
    mutate(raw)
    p = tmp_path / "broken.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return p


def _set_claim(raw, claim):
    raw["claims"] = [claim]


BAD = {
    "unknown figure kind": ("huang2025-tab1", lambda r: r["figure"].update(kind="pie"),
                            "figure.kind: unknown figure kind 'pie'"),
    "unknown figure key": ("huang2025-tab1", lambda r: r["figure"].update(colour="red"),
                           "figure.colour: unknown key"),
    "figure column": ("huang2025-tab1", lambda r: r["figure"].update(x="model.dd"),
                      "figure: unknown column 'model.dd'"),
    "figure metric": ("huang2025-tab1", lambda r: r["figure"].update(metric="val.nope"),
                      "figure.metric: 'val.nope' is not aggregated"),
    "recall constant": ("koren2026-fig6",
                        lambda r: r["figure"]["columns"].update({"(b) designed": "trained"}),
                        "figure.columns.(b) designed: Input should be 'designed'"),
    "unknown check": ("huang2025-tab1", lambda r: _set_claim(r, {"check": "vibes", "text": "t"}),
                      "claims.0.check: unknown check 'vibes'"),
    "bad op": ("huang2025-tab1", lambda r: _set_claim(r, {"text": "t", "op": "=>", "value": 1}),
               "claims.0.op: Input should be"),
    "unknown claim key": ("huang2025-tab1",
                          lambda r: _set_claim(r, {"text": "t", "op": ">=", "valu": 1}),
                          "claims.0.valu: unknown key"),
    "claim column": ("huang2025-tab1", lambda r: _set_claim(
        r, {"text": "t", "where": {"model.dd": 3}, "op": ">=", "value": 1}),
        "claims.0: unknown column 'model.dd'"),
    "claim metric": ("huang2025-tab1", lambda r: _set_claim(
        r, {"text": "t", "metric": "val.nope", "op": ">=", "value": 1}),
        "claims.0.metric: 'val.nope' is not aggregated"),
    "percentile not aggregated": ("cooper2026-fig14", lambda r: _set_claim(
        r, {"text": "t", "metric": "test.acc.p50", "op": "<=", "value": 1}),
        "claims.0.metric: 'test.acc.p50' is not aggregated"),
    "ordering needs b": ("huang2025-tab1", lambda r: _set_claim(
        r, {"check": "ordering", "text": "t", "a": {"label": "Mamba"}}),
        "claims.0.b: Field required"),
    "frontier needs factor": ("koren2026-fig6",
                              lambda r: r["claims"][0].pop("factor"),
                              "claims.0.factor: Field required"),
    "paper value column": ("huang2025-tab1",
                           lambda r: r["paper_values"][0]["where"].update({"model.dd": 3}),
                           "paper_values.0.where.model.dd: unknown column"),
    "histograms need the analysis": ("huang2025-fig1", lambda r: r.update(analysis=[]),
                                     "figure.kind: histograms needs `analysis: [decay_histogram]`"),
    "analysis metric without the analysis": ("huang2025-fig1", lambda r: r.update(analysis=[]),
                                             "claims.1.metric: 'decay.high_all' is not aggregated"),
    "old checks list": ("koren2026-fig6", lambda r: r.update(checks=["recall_frontier"]),
                        "checks: unknown key"),
    "huge derived value": ("huang2025-tab1", lambda r: r.update(derived={"model.d_state": "9**9**9"}),
                           "derived.model.d_state:"),
    "huge constraint": ("huang2025-tab1", lambda r: r.update(constraints=["10**10**10 > 1"]),
                        "exceeds"),
    "string repetition": ("huang2025-tab1",
                          lambda r: r.update(constraints=["model.mixer * 10**9 == 1"]),
                          "needs numbers"),
    "50k-term chain": ("huang2025-tab1",
                       lambda r: r.update(derived={"model.d_state": "1" + "+1" * 50_000}),
                       "characters long"),
}


def test_a_claim_may_name_the_spread_columns_of_an_aggregated_metric(tmp_path):
    """``<metric>.std`` and ``<metric>.p<q>`` (q in aggregate.percentiles) are columns of every
    cell, so a claim may test them (cooper2026-fig14: the 10th-percentile run). (A standard
    deviation of accuracies is at most 0.5: `<= 0.5` on it cannot fail, so 0.4.)"""
    for metric in ("test.acc.p10", "test.acc.p90", "test.acc.std"):
        def mutate(r, m=metric):
            r["id"] = "spread-columns"  # a copy given by its path needs an id of its own
            _set_claim(r, {"text": "t", "where": {"label": "SSM-TF"}, "metric": m, "op": "<=",
                           "value": 0.4})
        p = _broken(tmp_path, "cooper2026-fig14", mutate)
        res = runner.invoke(app, ["validate", str(p)])
        assert res.exit_code == 0, res.output


@pytest.mark.parametrize("case", list(BAD))
def test_bad_outputs_config_fails_validate_with_exit_2(tmp_path, case):
    spec, mutate, expected = BAD[case]
    p = _broken(tmp_path, spec, mutate)
    res = runner.invoke(app, ["validate", str(p)])
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert str(p) in out and expected in out, res.output


def test_run_refuses_a_bad_claim_before_training(tmp_path):
    p = _broken(tmp_path, "huang2025-tab1",
                lambda r: _set_claim(r, {"check": "vibes", "text": "t"}))
    res = runner.invoke(app, ["run", str(p), "--profile", "smoke", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "claims.0.check" in res.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("path", spec_paths(), ids=lambda p: p.stem)
def test_every_shipped_spec_has_valid_outputs_and_a_checkable_claim(path):
    spec = load_spec(path)
    assert validate_outputs(spec) == []
    assert spec.claims, "every shipped spec tests its claim text"


def test_bar_labels_wrap_parts_and_long_words():
    from ssmrepro.plots.figures import _bar_name

    assert _bar_name("ListOps (generated) / B2S6") == "ListOps\n(generated)\nB2S6"
    assert _bar_name("Mamba+PE") == "Mamba+PE"
    assert all(len(line) <= 16 for line in _bar_name("a b c d e f g h i j k l m n o p").split("\n"))
    assert _bar_name(26) == "26"
