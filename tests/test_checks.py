"""Checks and verdicts (report stage): every check kind on small tables — PASS, FAIL, MISSING
(cells without finished runs), UNTESTED (no checkable claim) and diverged runs (a miss)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ssmrepro.report import (
    CHECKS,
    aggregate,
    cell_keys,
    markdown,
    parse_claim,
    verdict_counts,
    verify,
)
from ssmrepro.theory.recall import law_constant, refined_accuracy


@dataclass
class Run:
    """The part of a sweep RunConfig the report stage reads."""

    label: str
    coords: dict
    seed: int = 0
    extra: dict = field(default_factory=dict)
    # a sweep point's typed sections, shared by its seeds' runs (``sweep.per_point``)
    task: object = field(default_factory=object)
    model: object = field(default_factory=object)
    train: object = field(default_factory=object)

    def flat(self) -> dict:
        return {**self.coords, **self.extra}


def rows_for(runs, values, status=None):
    """One results.csv row per run: ``values[i]`` is test.acc (None: no record)."""
    rows = []
    for i, (r, v) in enumerate(zip(runs, values)):
        if v is None:
            continue
        st = (status or {}).get(i, "ok")
        rows.append({"run_id": f"r{i}", "label": r.label, "seed": r.seed, "status": st,
                     "test.acc": v if st == "ok" else math.nan, **r.flat()})
    return pd.DataFrame(rows)


def judge(claims, runs, values, status=None, reduce="mean", claim_text="the claim"):
    df = rows_for(runs, values, status)
    cells = aggregate(df, runs, reduce, ["test.acc"])
    spec = SimpleNamespace(claims=claims, paper_values=[], claim=claim_text)
    return [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "claim"]


def grid(labels, xs, key="model.d", seeds=(0,)):
    return [Run(lab, {key: x}, s) for lab in labels for x in xs for s in seeds]


def test_every_check_kind_is_registered_with_a_config():
    assert {"threshold", "ordering", "monotone", "recall_frontier", "loglog_slope",
            "collapse", "any_threshold"} <= set(CHECKS)
    for kind in CHECKS.values():
        assert kind.Config.model_config.get("extra") == "forbid"
    assert parse_claim({"text": "t", "op": ">=", "value": 1}).check == "threshold"  # default


# ---------------------------------------------------------------------------------- collapse


def test_collapse_on_a_derived_key():
    runs = [Run("m", {"model.n_layers": L, "model.d_state": N}) for L in (1, 2, 4) for N in (2, 4, 8)]
    law = [min(1.0, L * N / 16) for L in (1, 2, 4) for N in (2, 4, 8)]  # a function of Λ·N only
    claim = {"check": "collapse", "text": "ΛN only", "metric": "test.acc",
             "by": "model.n_layers * model.d_state", "tol": 0.05, "min_range": 0.3}
    [v] = judge([claim], runs, law)
    assert v.verdict == "PASS", v.detail
    assert "spread per" in v.detail
    off = [v + (0.2 if i == 3 else 0.0) for i, v in enumerate(law)]  # (Λ=2, N=2) breaks it
    [v] = judge([claim], runs, off)
    assert v.verdict == "FAIL" and v.ours == pytest.approx(0.2)
    [v] = judge([claim], runs, [0.0] * 9)  # flat: nothing to collapse
    assert v.verdict == "FAIL" and "span 0.000" in v.detail
    [v] = judge([{**claim, "min_groups": 5}], runs, law)
    assert v.verdict == "MISSING"
    [v] = judge([claim], runs, [None if i == 3 else x for i, x in enumerate(law)])
    assert v.verdict == "MISSING" and "not finished" in v.detail


# ---------------------------------------------------------------------------------- threshold

TH = [{"text": "A solves", "where": {"label": "A"}, "op": ">=", "value": 0.9}]


def test_threshold_pass_fail_missing():
    runs = grid(["A"], [8, 16])
    assert judge(TH, runs, [0.95, 0.99])[0].verdict == "PASS"
    v = judge(TH, runs, [0.95, 0.5])[0]
    assert v.verdict == "FAIL" and v.ours == pytest.approx(0.5) and "1 of 2" in v.detail
    v = judge(TH, runs, [None, None])[0]
    assert v.verdict == "MISSING" and "2 of 2" in v.detail
    # finished cells pass, one cell absent: MISSING (says how many)
    v = judge(TH, runs, [0.95, None])[0]
    assert v.verdict == "MISSING" and "1 of 2 needed cells not finished" in v.detail
    # finished cells fail, one absent: FAIL
    assert judge(TH, runs, [0.5, None])[0].verdict == "FAIL"
    # the profile has no such cell at all
    v = judge([{**TH[0], "where": {"label": "Z"}}], runs, [0.95, 0.99])[0]
    assert v.verdict == "MISSING" and "no cell" in v.detail


ANY = [{"check": "any_threshold", "text": "A solves somewhere", "where": {"label": "A"},
        "op": ">=", "value": 0.9}]


def test_any_threshold_pass_fail_missing():
    runs = grid(["A"], [8, 16, 32])
    v = judge(ANY, runs, [0.1, 0.95, 0.2])[0]
    assert v.verdict == "PASS" and v.ours == pytest.approx(0.95) and "1 of 3" in v.detail
    v = judge(ANY, runs, [0.1, 0.5, 0.2])[0]
    assert v.verdict == "FAIL" and v.ours == pytest.approx(0.5)
    assert judge(ANY, runs, [0.1, None, 0.2])[0].verdict == "MISSING"  # the absent cell may hold
    assert judge(ANY, runs, [0.95, None, None])[0].verdict == "PASS"  # enough already hold
    two = [{**ANY[0], "min_cells": 2}]
    assert judge(two, runs, [0.95, 0.2, 0.1])[0].verdict == "FAIL"
    assert judge(two, runs, [0.95, 0.91, 0.1])[0].verdict == "PASS"
    # a diverged cell never holds
    assert judge(ANY, runs, [0.1, 0.95, 0.2], status={1: "diverged"})[0].verdict == "FAIL"
    v = judge([{**ANY[0], "where": {"label": "Z"}}], runs, [0.95, 0.2, 0.1])[0]
    assert v.verdict == "MISSING"


def test_given_precondition_makes_untrained_cells_untestable():
    """A cell that misses the precondition (an untrained model) never makes a claim PASS."""
    runs = grid(["A"], [8, 16])
    base = {"text": "A is low", "where": {"label": "A"}, "op": "<=", "value": 0.3,
            "given": [{"metric": "test.acc", "op": ">=", "value": 0.05}]}
    # both cells low and meeting the precondition: PASS
    v = judge([base], runs, [0.1, 0.2])[0]
    assert v.verdict == "PASS" and "given test.acc >= 0.05" in v.text
    # one cell misses the precondition: the other passes, so MISSING (never a silent PASS)
    v = judge([base], runs, [0.01, 0.2])[0]
    assert v.verdict == "MISSING" and "1 of 2 finished cells miss the precondition" in v.detail
    # a testable cell contradicts the claim: FAIL regardless
    assert judge([{**base, "value": 0.15}], runs, [0.01, 0.2])[0].verdict == "FAIL"
    # every cell untestable: MISSING
    assert judge([base], runs, [0.01, 0.02])[0].verdict == "MISSING"
    # a diverged cell (NaN) stays testable and fails
    assert judge([base], runs, [0.1, 0.0], status={1: "diverged"})[0].verdict == "FAIL"
    anyc = {"check": "any_threshold", "text": "A reaches", "where": {"label": "A"}, "op": ">=",
            "value": 0.5, "given": [{"metric": "test.acc", "op": "<=", "value": 0.6}]}
    assert judge([anyc], runs, [0.55, 0.9])[0].verdict == "PASS"
    assert judge([anyc], runs, [0.2, 0.9])[0].verdict == "MISSING"  # 0.9 cell untestable
    order = {"check": "ordering", "text": "a >= b", "a": {"label": "A"}, "b": {"label": "B"},
             "given": [{"metric": "test.acc", "op": ">=", "value": 0.1}]}
    runs2 = grid(["A", "B"], [8])
    assert judge([order], runs2, [0.5, 0.3])[0].verdict == "PASS"
    assert judge([order], runs2, [0.5, 0.05])[0].verdict == "MISSING"


def test_diverged_runs_are_a_miss_not_missing():
    runs = grid(["A"], [8, 16])
    v = judge(TH, runs, [0.95, 0.0], status={1: "diverged"})[0]
    assert v.verdict == "FAIL" and "diverged" in v.detail
    # a fully diverged cell of a "<=" claim fails too (NaN never satisfies a comparison)
    le = [{"text": "A fails", "where": {"label": "A"}, "op": "<=", "value": 0.2}]
    assert judge(le, runs, [0.1, 0.0], status={1: "diverged"})[0].verdict == "FAIL"
    # one of three seeds diverged: mean is undefined (NaN, a miss); best-of-seeds skips it
    runs3 = grid(["A"], [8], seeds=(0, 1, 2))
    assert judge(TH, runs3, [0.95, 0.96, 0.0], status={2: "diverged"})[0].verdict == "FAIL"
    assert judge(TH, runs3, [0.95, 0.96, 0.0], status={2: "diverged"},
                 reduce="max")[0].verdict == "PASS"


def test_incomplete_cell_is_missing_until_all_seeds_finish():
    runs = grid(["A"], [8], seeds=(0, 1, 2))
    assert judge(TH, runs, [0.95, 0.96, None])[0].verdict == "MISSING"
    assert judge(TH, runs, [0.95, 0.96, 0.97])[0].verdict == "PASS"


def test_where_lists_and_case_labels():
    runs = [Run("(c) linear / vs D", {"model.d": 8}), Run("(d) full / vs D", {"model.d": 8}),
            Run("(c) linear / vs N", {"model.d": 16})]
    claim = [{"text": "t", "where": {"label": "(c) linear", "model.d": [8, 16]}, "op": ">=",
              "value": 0.5}]
    v = judge(claim, runs, [0.6, 0.1, 0.7])[0]
    assert v.verdict == "PASS" and "all 2 finished cells" in v.detail


def test_untested_when_the_spec_has_no_checkable_claim():
    v = judge([], grid(["A"], [8]), [0.9], claim_text="Mamba wins")
    assert [x.verdict for x in v] == ["UNTESTED"] and v[0].text == "Mamba wins"


# ---------------------------------------------------------------------------------- ordering

ORD = [{"check": "ordering", "text": "full >= linear", "a": {"label": "full"},
        "b": {"label": "linear"}}]


def test_ordering_matches_cells_on_the_other_keys():
    runs = grid(["full", "linear"], [8, 16])
    assert judge(ORD, runs, [0.5, 0.9, 0.4, 0.9])[0].verdict == "PASS"
    v = judge(ORD, runs, [0.5, 0.8, 0.4, 0.9])[0]
    assert v.verdict == "FAIL" and v.ours == pytest.approx(-0.1)
    margin = [{**ORD[0], "margin": 0.2}]
    v = judge(margin, runs, [0.5, 0.9, 0.4, 0.9])[0]
    assert v.verdict == "FAIL" and "(label=linear) + 0.2, matched on" in v.text, v.text
    # a negative margin reads as a difference (it read '+ -0.05')
    v = judge([{**ORD[0], "margin": -0.05}], runs, [0.5, 0.9, 0.52, 0.9])[0]
    assert v.verdict == "PASS" and "(label=linear) - 0.05, matched on" in v.text, v.text
    assert judge(ORD, runs, [0.5, None, 0.4, 0.9])[0].verdict == "MISSING"
    assert judge(ORD, runs, [0.5, 0.0, 0.4, 0.9], status={1: "diverged"})[0].verdict == "FAIL"
    # nothing to pair (different d values): the profile cannot test it
    v = judge(ORD, [Run("full", {"model.d": 8}), Run("linear", {"model.d": 16})], [0.5, 0.4])[0]
    assert v.verdict == "MISSING" and "no pair" in v.detail


def test_ordering_factor_is_a_ratio():
    runs = grid(["full", "linear"], [8, 16])
    twice = [{**ORD[0], "factor": 2.0}]
    # full >= 2 x linear in both pairs
    assert judge(twice, runs, [1.0, 0.9, 0.4, 0.45])[0].verdict == "PASS"
    v = judge(twice, runs, [1.0, 0.9, 0.4, 0.5])[0]
    assert v.verdict == "FAIL" and v.ours == pytest.approx(-0.1)
    assert "2 × (label=linear)" in v.text

def test_ordering_with_explicit_match_and_case_refs():
    runs = [Run("full / s1", {"model.d": 8, "train.bs": 32}),
            Run("linear / s1", {"model.d": 8, "train.bs": 64})]
    # default match includes train.bs, which differs: no pair
    assert judge(ORD, runs, [0.9, 0.5])[0].verdict == "MISSING"
    claim = [{**ORD[0], "match": ["model.d", "case:1"]}]
    assert judge(claim, runs, [0.9, 0.5])[0].verdict == "PASS"


def test_metric_expression_per_cell():
    """A check's metric may be an expression of aggregated metrics, evaluated per cell (the drop
    from a short to a long evaluation length: who degrades slowest)."""
    runs = [Run("hybrid", {"model.d": 8}), Run("tf", {"model.d": 8})]
    rows = pd.DataFrame([
        {"run_id": "r0", "label": "hybrid", "seed": 0, "status": "ok", "model.d": 8,
         "short.acc": 0.9, "long.acc": 0.7},
        {"run_id": "r1", "label": "tf", "seed": 0, "status": "ok", "model.d": 8,
         "short.acc": 0.92, "long.acc": 0.6}])
    cells = aggregate(rows, runs, "mean", ["short.acc", "long.acc"])
    drop = "short.acc - long.acc"
    claims = [
        {"check": "ordering", "text": "tf drops more", "metric": drop,
         "a": {"label": "tf"}, "b": {"label": "hybrid"}},
        {"check": "ordering", "text": "tf drops more by 0.2", "metric": drop, "margin": 0.2,
         "a": {"label": "tf"}, "b": {"label": "hybrid"}},
        {"text": "hybrid drops <= 0.25", "metric": drop, "where": {"label": "hybrid"},
         "op": "<=", "value": 0.25},
        {"text": "absent metric", "metric": "short.acc - nope.acc", "op": "<=", "value": 1.0},
    ]
    spec = SimpleNamespace(claims=claims, paper_values=[], claim="c")
    v = [x for x in verify(spec, cells, cell_keys(runs)) if x.kind == "claim"]
    assert v[0].verdict == "PASS" and v[0].ours == pytest.approx(0.12)
    assert v[1].verdict == "FAIL"
    assert v[2].verdict == "PASS" and v[2].ours == pytest.approx(0.2)
    assert v[3].verdict == "FAIL" and (v[3].ours is None or math.isnan(v[3].ours))


# ---------------------------------------------------------------------------------- monotone

MONO = [{"check": "monotone", "text": "grows with d", "along": "model.d"}]


def test_monotone_with_tolerance_and_allowed_violations():
    runs = grid(["A", "B"], [8, 16, 32])
    assert judge(MONO, runs, [0.1, 0.5, 0.9, 0.2, 0.3, 0.4])[0].verdict == "PASS"
    v = judge(MONO, runs, [0.1, 0.5, 0.4, 0.2, 0.3, 0.4])[0]
    assert v.verdict == "FAIL" and "1 violations in 4 steps" in v.detail
    assert judge([{**MONO[0], "tol": 0.15}], runs,
                 [0.1, 0.5, 0.4, 0.2, 0.3, 0.4])[0].verdict == "PASS"
    assert judge([{**MONO[0], "allowed_violations": 1}], runs,
                 [0.1, 0.5, 0.4, 0.2, 0.3, 0.4])[0].verdict == "PASS"
    dec = [{**MONO[0], "direction": "decreasing"}]
    assert judge(dec, runs, [0.9, 0.5, 0.1, 0.4, 0.3, 0.2])[0].verdict == "PASS"
    assert judge(MONO, runs, [0.1, 0.5, None, 0.2, 0.3, 0.4])[0].verdict == "MISSING"
    assert judge(MONO, runs, [0.1, 0.5, 0.0, 0.2, 0.3, 0.4],
                 status={2: "diverged"})[0].verdict == "FAIL"
    # one value of the axis per group: not testable in this profile
    v = judge(MONO, grid(["A"], [8]), [0.5])[0]
    assert v.verdict == "MISSING" and "two values" in v.detail


def test_monotone_along_a_text_key_follows_the_sweeps_order():
    """Along labels 'small', 'medium', 'large' (the sweep's order) the steps were judged in
    alphabetical order (large -> medium -> small): a metric rising with the size FAILed
    'increasing' and PASSed 'decreasing'."""
    runs = [Run(lab, {"model.d": 8}) for lab in ("small", "medium", "large")]
    claim = {"check": "monotone", "text": "grows", "along": "label", "group_by": []}
    assert judge([claim], runs, [0.2, 0.5, 0.9])[0].verdict == "PASS"
    v = judge([{**claim, "direction": "decreasing"}], runs, [0.2, 0.5, 0.9])[0]
    assert v.verdict == "FAIL" and "small→medium" in v.detail, v.detail
    # numbers keep their numeric order whatever the sweep's (10 after 9, not before)
    runs = [Run("A", {"model.d": d}) for d in (10, 9, 100)]
    assert judge(MONO, runs, [0.5, 0.4, 0.9])[0].verdict == "PASS"


# ---------------------------------------------------------------------------------- loglog slope

SLOPE = [{"check": "loglog_slope", "text": "acc ~ L^-1/2", "x": "task.L", "expected": -0.5,
          "tol": 0.1}]


def test_loglog_slope():
    Ls = [64, 256, 1024, 4096]
    runs = grid(["A"], Ls, key="task.L")
    vals = [0.9 * (L / 64) ** -0.5 for L in Ls]
    v = judge(SLOPE, runs, vals)[0]
    assert v.verdict == "PASS" and v.ours == pytest.approx(-0.5)
    assert judge(SLOPE, runs, [0.9 * (L / 64) ** -1.0 for L in Ls])[0].verdict == "FAIL"
    assert judge(SLOPE, runs, vals[:3] + [None])[0].verdict == "MISSING"
    assert judge(SLOPE, runs, vals[:3] + [0.0], status={3: "diverged"})[0].verdict == "FAIL"
    v = judge(SLOPE, grid(["A"], [64, 256], key="task.L"), vals[:2])[0]
    assert v.verdict == "MISSING" and "needs 3" in v.detail


# ---------------------------------------------------------------------------------- recall frontier


def _recall_runs(labels, Ds, Ns, regime=(512, 64, 16)):
    V, L, k = regime
    return [Run(lab, {"task.vocab": V, "task.L": L, "task.kappa": k, "model.d_model": D, "model.d_state": N})
            for lab in labels for D in Ds for N in Ns if N <= D]


FR = {"check": "recall_frontier", "text": "frontier", "threshold": 0.9, "factor": 1.5,
      "columns": {"lin": "linear"}}


def _law_values(runs, column="linear", scale=1.0):
    return [float(refined_accuracy(r.coords["model.d_state"] * scale, r.coords["model.d_model"], 512, 16,
                                   law_constant(column))) for r in runs]


def test_recall_frontier_pass_on_the_law_itself_and_fail_elsewhere():
    Ds, Ns = list(range(20, 66, 4)), list(range(4, 33, 2))
    runs = _recall_runs(["lin"], Ds, Ns)
    v = judge([FR], runs, _law_values(runs))[0]
    assert v.verdict == "PASS", v.detail
    # a model that needs twice the state of the law: N·D off by ~2 > factor 1.5
    v = judge([FR], runs, _law_values(runs, scale=0.5))[0]
    assert v.verdict == "FAIL" and "ratio" in v.detail
    # the designed constant is further from the data than x1.5
    assert judge([{**FR, "columns": {"lin": "designed"}}], runs,
                 _law_values(runs))[0].verdict == "FAIL"


def test_recall_frontier_needs_min_points_and_monotone_frontier():
    Ds, Ns = [8, 16, 32, 64], [4, 8, 16, 32]  # the quick doubling grid
    runs = _recall_runs(["lin"], Ds, Ns)
    # two frontier points only (D = 32, 64): FAIL with all cells finished
    vals = [1.0 if r.coords["model.d_model"] * r.coords["model.d_state"] >= 1024 else 0.1 for r in runs]
    v = judge([{**FR, "factor": 2.0}], runs, vals)[0]
    assert v.verdict == "FAIL" and "2 frontier points" in v.detail
    # ... and MISSING when absent cells could still add frontier points
    some = [None if r.coords["model.d_model"] == 16 else x for r, x in zip(runs, vals)]
    assert judge([{**FR, "factor": 2.0}], runs, some)[0].verdict == "MISSING"
    # a frontier that rises with D is not monotone
    Ds2, Ns2 = [24, 32, 40, 48], [8, 12, 16, 20, 24]
    runs2 = _recall_runs(["lin"], Ds2, Ns2)
    need = {24: 20, 32: 16, 40: 20, 48: 12}
    vals2 = [1.0 if r.coords["model.d_state"] >= need[r.coords["model.d_model"]] else 0.0 for r in runs2]
    v = judge([{**FR, "factor": 10.0}], runs2, vals2)[0]
    assert v.verdict == "FAIL" and "1 monotonicity violations" in v.detail
    # a column the profile did not run
    v = judge([{**FR, "columns": {"lin": "linear", "full": "full"}}], runs, vals)
    assert v[1].verdict == "MISSING" and "not run" in v[1].detail


def test_report_opens_with_verdict_counts():
    runs = grid(["A", "B"], [8])
    claims = TH + [{"text": "B solves", "where": {"label": "B"}, "op": ">=", "value": 0.9},
                   {"text": "C solves", "where": {"label": "C"}, "op": ">=", "value": 0.9}]
    df = rows_for(runs, [0.95, 0.5])
    cells = aggregate(df, runs, "mean", ["test.acc"])
    spec = SimpleNamespace(id="t", alias=None, title="T", claim="c", claims=claims,
                           paper_values=[], notes=["n"], analytic=None,
                           aggregate=SimpleNamespace(reduce="mean"))
    verdicts = verify(spec, cells, cell_keys(runs))
    assert verdict_counts(verdicts) == "**Verdicts: 1 PASS, 1 FAIL, 1 MISSING, 0 UNTESTED**"
    text = markdown(spec, "quick", cells, verdicts, len(df))
    assert text.splitlines()[2] == verdict_counts(verdicts)


def test_cells_match_runs_by_values_not_ids():
    """A committed CSV (other run ids, floats for ints) still fills the expected cells."""
    runs = grid(["A"], [8, 16])
    df = rows_for(runs, [0.9, 0.8]).assign(run_id=["x", "y"])
    df["model.d"] = df["model.d"].astype(float)
    cells = aggregate(df, runs, "mean", ["test.acc"])
    assert cells["complete"].all() and np.allclose(cells["test.acc"], [0.9, 0.8])


@pytest.mark.parametrize("claim", [
    {"check": "spread", "text": "flat", "group_by": [], "tol": 0.05},
    {"check": "collapse", "text": "one", "by": "model.d * 0", "tol": 0.05, "min_groups": 1},
    {"check": "region", "text": "inside", "region": "model.d > 0", "op": ">=", "value": 0.5},
    {"check": "region", "text": "some", "region": "model.d > 0", "op": ">=", "value": 0.5,
     "mode": "any"},
    {"check": "size_order", "text": "A first", "labels": ["A", "B"], "size": "model.d",
     "group_by": [], "threshold": 0.5, "strict": False},
])
def test_every_check_honours_its_precondition(claim):
    """A `given` no cell meets leaves a claim MISSING (untestable); spread, collapse, region and
    size_order ignored it and judged the untrained cells (FAIL, or a PASS on them)."""
    runs = grid(["A", "B"], [8, 16])
    given = [{"metric": "test.acc", "op": ">=", "value": 0.95}]
    vals = [0.9, 0.6, 0.3, 0.1] if claim["check"] != "size_order" else [0.9, 0.6, 0.6, 0.1]
    assert judge([claim], runs, vals)[0].verdict in ("PASS", "FAIL")
    v = judge([{**claim, "given": given}], runs, vals)[0]
    assert v.verdict == "MISSING" and "given test.acc >= 0.95" in v.text, v


def test_a_value_on_its_bound_but_for_rounding_is_on_it():
    """|ours - paper| = tol matches, a - b = margin is in order, a spread = tol holds, whichever
    side the float rounding of a mean or a difference falls (0.9 - 0.85 = 0.050000000000000044:
    a paper value 0.85 ± 0.05 'differed' from our 0.9 while 0.95 ± 0.05 matched it)."""
    runs = grid(["A", "B"], [8, 16])
    vals = [0.9, 0.6, 0.3, 0.1]  # A8, A16, B8, B16
    df = rows_for(runs, vals)
    cells = aggregate(df, runs, "mean", ["test.acc"])
    pv = [SimpleNamespace(where={"label": "A", "model.d": 8}, metric="test.acc", value=p, tol=0.05)
          for p in (0.85, 0.95)] + [
         SimpleNamespace(where={"label": "A", "model.d": 16}, metric="test.acc", value=0.65,
                         tol=0.05)]
    spec = SimpleNamespace(claims=[], paper_values=pv, claim="c")
    got = [v.verdict for v in verify(spec, cells, cell_keys(runs)) if v.kind == "paper_value"]
    assert got == ["match", "match", "match"]
    claims = [
        {"check": "ordering", "text": "B8 ahead", "a": {"label": "B", "model.d": 8},
         "b": {"label": "B", "model.d": 16}, "match": [], "margin": 0.2},
        {"check": "spread", "text": "A flat", "where": {"label": "A"}, "group_by": [],
         "tol": 0.3},
        {"check": "monotone", "text": "B falls", "where": {"label": "B"}, "along": "model.d",
         "direction": "decreasing", "tol": 0.2},
        {"text": "not above", "where": {"label": "B", "model.d": 8}, "op": ">", "value": 0.3},
    ]
    got = [v.verdict for v in judge(claims, runs, vals)]
    assert got == ["PASS", "PASS", "PASS", "FAIL"]


def test_size_order_and_recall_frontier_take_a_metric_expression():
    """A `metric` expression (`test.acc * 1`) was looked up as a column: size_order found no
    label reaching the threshold (MISSING whatever was measured), recall_frontier raised
    KeyError."""
    runs = grid(["A", "B"], [8, 16])
    so = {"check": "size_order", "text": "A first", "labels": ["A", "B"], "size": "model.d",
          "group_by": [], "threshold": 0.5, "strict": False}
    vals = [0.9, 0.9, 0.1, 0.6]
    assert judge([so], runs, vals)[0].verdict == "PASS"
    assert judge([{**so, "metric": "test.acc * 1"}], runs, vals)[0].verdict == "PASS"
    Ds, Ns = list(range(20, 66, 4)), list(range(4, 33, 2))
    runs = _recall_runs(["lin"], Ds, Ns)
    assert judge([{**FR, "metric": "test.acc * 1"}], runs,
                 _law_values(runs))[0].verdict == "PASS"


def test_collapse_groups_cells_equal_but_for_rounding():
    """0.1 × 3 (0.30000000000000004) and 0.3 × 1 lie on one diagonal: one group, whose spread
    0.7 fails the claim (each was a group of its own, and the claim PASSed on the others)."""
    runs = [Run("A", {"x.a": a, "x.b": b}) for a, b in [(0.1, 3), (0.3, 1), (0.1, 1), (0.05, 2)]]
    co = {"check": "collapse", "text": "c", "by": "x.a * x.b", "tol": 0.05, "min_groups": 1}
    v = judge([co], runs, [0.9, 0.2, 0.5, 0.5])[0]
    assert v.verdict == "FAIL" and "0.3: 0.700" in v.detail, v.detail


def test_region_any_is_missing_while_a_cell_that_may_hold_is_not_finished():
    """`mode: any` FAILed when the finished cells missed and a needed cell was not finished
    (or missed its precondition): that cell may still hold it (any_threshold said MISSING)."""
    runs = grid(["A", "B"], [8])
    rg = {"check": "region", "text": "some low", "region": "model.d > 0", "op": "<=",
          "value": 0.5, "mode": "any"}
    assert judge([rg], runs, [0.9, None])[0].verdict == "MISSING"
    assert judge([rg], runs, [0.9, 0.6])[0].verdict == "FAIL"
    assert judge([rg], runs, [0.9, 0.2])[0].verdict == "PASS"
    given = [{"metric": "test.acc", "op": ">=", "value": 0.5}]
    assert judge([{**rg, "given": given}], runs, [0.9, 0.2])[0].verdict == "MISSING"


def test_values_near_zero_that_differ_are_not_on_their_bound():
    """Only rounding is forgiven: losses of 5.0e-14 and 5.7e-14 differ (yu2025-fig3's S4D rose
    so from width 32 to 128; an absolute slack of 1e-12 called that step level, FAIL -> PASS)."""
    runs = grid(["A"], [32, 128])
    mo = {"check": "monotone", "text": "falls", "where": {"label": "A"}, "along": "model.d",
          "direction": "decreasing"}
    assert judge([mo], runs, [4.977e-14, 5.726e-14])[0].verdict == "FAIL"
    assert judge([mo], runs, [5.726e-14, 4.977e-14])[0].verdict == "PASS"
    od = {"check": "ordering", "text": "a >= b", "a": {"model.d": 32}, "b": {"model.d": 128},
          "match": []}
    assert judge([od], runs, [4.977e-14, 5.726e-14])[0].verdict == "FAIL"


def test_a_paper_value_of_a_cell_with_no_run_finished_is_unfinished_not_not_run():
    """A cell of the profile none of whose runs finished yet was counted among the 'cells not
    run in this profile'."""
    from ssmrepro.report import paper_value_tally

    runs = grid(["A", "B"], [8])
    df = rows_for(runs, [0.9, None])
    cells = aggregate(df, runs, "mean", ["test.acc"])
    pv = [SimpleNamespace(where={"label": lab}, metric="test.acc", value=0.9, tol=0.05)
          for lab in ("A", "B", "C")]
    got = [v for v in verify(SimpleNamespace(claims=[], paper_values=pv, claim="c"), cells,
                             cell_keys(runs)) if v.kind == "paper_value"]
    assert [v.verdict for v in got] == ["match", "unfinished", "missing"]
    assert got[1].detail == "0 of 1 runs finished"
    assert paper_value_tally(got) == ("1 of 1 compared within tolerance; 1 cells not finished, "
                                      "not compared; 1 cells not run in this profile")


def test_r59e_an_expression_zero_but_for_rounding_is_zero():
    """Seeds 0.8 and 0.9 (mean 0.8500000000000001) beside 0.85 and 0.85: `val.acc - test.acc
    >= 0` FAILed (ours -1.11e-16) and an ordering of two such drops was out of order, while
    `test.acc <= 0.85` PASSed (``close`` is relative, so only 0 was within rounding of 0). The
    difference is 0.0; a real difference of tiny values, and an expression the interval
    arithmetic cannot follow, keep their value."""
    runs = [Run("A", {"model.d": 4}, s) for s in (0, 1)]
    df = pd.DataFrame([{"run_id": f"r{i}", "label": "A", "seed": r.seed, "status": "ok",
                        "test.acc": t, "val.acc": 0.85, "test.loss": 1e-5 + i * 1e-10,
                        "val.loss": 1e-5, **r.flat()}
                       for i, (r, t) in enumerate(zip(runs, (0.8, 0.9)))])
    cells = aggregate(df, runs, "mean", ["test.acc", "val.acc", "test.loss", "val.loss"])

    def verdicts(*claims):
        spec = SimpleNamespace(claims=list(claims), paper_values=[], claim="c")
        return [(v.verdict, v.ours) for v in verify(spec, cells, cell_keys(runs))]

    assert verdicts({"text": "t", "metric": "val.acc - test.acc", "op": ">=", "value": 0},
                    {"text": "t", "metric": "test.acc - val.acc", "op": "<=", "value": 0}) == [
        ("PASS", 0.0), ("PASS", 0.0)]
    assert verdicts({"text": "t", "metric": "test.loss - val.loss", "op": "<=",
                     "value": 0})[0][0] == "FAIL"  # 5e-11 apart: no rounding
    assert verdicts({"text": "t", "metric": "round(test.acc, 1) / 1e12", "op": "<=",
                     "value": 0})[0][0] == "FAIL"


def test_r59i_size_order_no_label_solving_a_finished_grid_fails():
    """A finished grid where no label reaches the threshold at any size stayed MISSING ('no
    group where any label reaches the threshold') for ever, though nothing left to train could
    change it, while recall_frontier FAILs on '0 frontier points': it FAILs now, saying the
    largest size tried; with a cell not finished (it may still solve), MISSING."""
    runs = grid(["A", "B"], [8, 16])
    so = {"check": "size_order", "text": "A first", "labels": ["A", "B"], "size": "model.d",
          "group_by": [], "threshold": 0.5}
    for strict in (True, False):
        v = judge([{**so, "strict": strict}], runs, [0.1, 0.2, 0.1, 0.3])[0]
        assert v.verdict == "FAIL", v
        assert "no label reaches test.acc >= 0.5 in any group (d up to 16)" in v.detail, v.detail
    v = judge([so], runs, [0.1, 0.2, 0.1, None])[0]
    assert v.verdict == "MISSING" and "1 of 4 needed cells not finished" in v.detail, v.detail
    v = judge([so], runs, [0.1, 0.2, 0.1, 0.3], status={3: "diverged"})[0]
    assert v.verdict == "FAIL" and "1 diverged" in v.detail, v.detail
    assert judge([so], runs, [0.9, 0.9, 0.1, 0.6])[0].verdict == "PASS"


def test_r59i_a_scaled_difference_zero_but_for_rounding_is_zero():
    """`1000 * (val.acc - test.acc) >= 0` (per mille) or `(val.acc - test.acc) / 0.001` at
    means 0.85 and 0.8500000000000001 FAILed, 'ours: -1.11e-13', while the unscaled difference
    PASSed at 0.0: the span within rounding was judged against the metrics' size, not against
    what rounding alone makes it. Both are 0.0 now; a step (`floor`), a ratio of two rounding
    differences and a real difference of tiny values keep their value."""
    runs = [Run("A", {"model.d": 4}, s) for s in (0, 1)]
    df = pd.DataFrame([{"run_id": f"r{i}", "label": "A", "seed": r.seed, "status": "ok",
                        "test.acc": t, "val.acc": 0.85, "test.loss": 1.0 + i * 1e-10,
                        "val.loss": 1.0, "train.loss": 1e-5 + i * 2e-10, **r.flat()}
                       for i, (r, t) in enumerate(zip(runs, (0.8, 0.9)))])
    cells = aggregate(df, runs, "mean", ["test.acc", "val.acc", "test.loss", "val.loss",
                                        "train.loss"])

    def verdict(metric, op=">=", value=0):
        spec = SimpleNamespace(claims=[{"text": "t", "metric": metric, "op": op,
                                        "value": value}], paper_values=[], claim="c")
        v = [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "claim"][0]
        return v.verdict, v.ours

    for m in ("1000 * (val.acc - test.acc)", "(val.acc - test.acc) / 0.001",
              "(val.acc - test.acc) * 1e6"):
        assert verdict(m) == ("PASS", 0.0), m
    assert verdict("floor(val.acc - test.acc)") == ("FAIL", -1.0)
    assert verdict("(val.acc - test.acc) / (test.loss - val.loss)")[0] == "FAIL"
    assert verdict("1000 * (val.loss - test.loss)") == ("PASS", 0.0)  # 5e-11 apart at 1
    assert verdict("1000 * (1e-5 - train.loss)")[0] == "FAIL"  # 1e-10 apart at 1e-5: real
