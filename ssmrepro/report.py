"""Stage 5b: aggregate runs over seeds and compare with the paper (``ssmrepro verify``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

_OPS = {">=": np.greater_equal, "<=": np.less_equal, ">": np.greater, "<": np.less}


def group_keys(df: pd.DataFrame, runs: list) -> list[str]:
    """Columns that identify a cell: the label and every swept key (seed excluded)."""
    swept = sorted({k for r in runs for k in r.coords if k != "seed"})
    return ["label"] + [k for k in swept if k in df.columns]


def aggregate(df: pd.DataFrame, runs: list, reduce: str, metrics: list[str]) -> pd.DataFrame:
    """One row per cell: ``<metric>`` (reduced over seeds), ``<metric>.std``, n_ok, n_diverged."""
    if df.empty:
        return df
    keys = group_keys(df, runs)
    rows = []
    for cell, g in df.groupby(keys, dropna=False, sort=False):
        cell = cell if isinstance(cell, tuple) else (cell,)
        row: dict[str, Any] = dict(zip(keys, cell))
        ok = g[g["status"] == "ok"]
        row["n_runs"] = len(g)
        row["n_ok"] = len(ok)
        row["n_diverged"] = int((g["status"] == "diverged").sum())
        if "n_params" in g:
            row["n_params"] = g["n_params"].iloc[0]
        for m in metrics:
            vals = ok[m].astype(float) if m in ok else pd.Series(dtype=float)
            row[m] = float(getattr(vals, reduce)()) if len(vals) else math.nan
            row[f"{m}.std"] = float(vals.std(ddof=0)) if len(vals) else math.nan
        if "stop_step" in g:
            row["stop_step.mean"] = float(g["stop_step"].astype(float).mean())
        if "epochs" in g and g["epochs"].notna().any():
            row["epochs.mean"] = float(g["epochs"].astype(float).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def _eq(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(a) == str(b)


def select(agg: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    if agg.empty:
        return agg
    mask = np.ones(len(agg), dtype=bool)
    for k, v in where.items():
        if k not in agg.columns:
            return agg.iloc[0:0]
        mask &= np.array([_eq(x, v) for x in agg[k]])
    return agg[mask]


@dataclass
class Verdict:
    kind: str  # paper_value | claim
    text: str
    verdict: str  # PASS | FAIL | MISSING (claims); match | differs | missing (paper values)
    ours: float | None
    paper: float | None = None


def verify(spec, agg: pd.DataFrame) -> list[Verdict]:
    out: list[Verdict] = []
    for pv in spec.paper_values:
        sel = select(agg, pv.where)
        where = ", ".join(f"{k}={v}" for k, v in pv.where.items())
        if sel.empty or pv.metric not in sel or sel[pv.metric].isna().all():
            out.append(Verdict("paper_value", f"{where}: {pv.metric}", "missing", None, pv.value))
            continue
        ours = float(sel[pv.metric].mean())
        verdict = "match" if abs(ours - pv.value) <= pv.tol else "differs"
        out.append(Verdict("paper_value", f"{where}: {pv.metric} (tol {pv.tol})", verdict, ours,
                           pv.value))
    for c in spec.claims:
        sel = select(agg, c.where)
        vals = sel[c.metric].astype(float).to_numpy() if (not sel.empty and c.metric in sel) else []
        if len(vals) == 0 or np.isnan(vals).all():
            out.append(Verdict("claim", c.text, "MISSING", None))
            continue
        ok = bool(np.all(_OPS[c.op](vals, c.value)))
        worst = float(np.nanmin(vals) if c.op in (">=", ">") else np.nanmax(vals))
        out.append(Verdict("claim", f"{c.text} [{c.metric} {c.op} {c.value}]",
                           "PASS" if ok else "FAIL", worst))
    for check in spec.checks:
        if check == "recall_frontier":
            from .plots.recall import check_frontier

            out += check_frontier(spec, agg, 0.9)
            out += check_frontier(spec, agg, 0.5)  # a coarse grid may reach 0.9 in one column
    return out


def paper_value_tally(pvs) -> str:
    """'27 of 45 compared within tolerance; 228 cells not run in this profile'."""
    n_match = sum(v.verdict == "match" for v in pvs)
    n_missing = sum(v.verdict == "missing" for v in pvs)
    out = f"{n_match} of {len(pvs) - n_missing} compared within tolerance"
    return out + (f"; {n_missing} cells not run in this profile" if n_missing else "")


def md_table(df: pd.DataFrame) -> str:
    """A GitHub markdown table (floats with 3 decimals)."""

    def fmt(x: Any) -> str:
        if isinstance(x, float):
            return "—" if math.isnan(x) else f"{x:.3f}"
        return str(x)

    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        out.append("| " + " | ".join(fmt(x) for x in row) + " |")
    return "\n".join(out)


def markdown(spec, profile: str, agg: pd.DataFrame, verdicts: list[Verdict], n_runs: int) -> str:
    lines = [
        f"# {spec.id}{f' ({spec.alias})' if spec.alias else ''} — {spec.title}",
        "",
        f"Profile `{profile}`, {n_runs} runs, seeds aggregated with `{spec.aggregate.reduce}`.",
        f"Claim: {spec.claim}",
        "",
        "## Claims",
        "",
    ]
    claims = [v for v in verdicts if v.kind == "claim"]
    for v in claims:
        ours = "—" if v.ours is None else f"{v.ours:.3f}"
        lines.append(f"- **{v.verdict}** {v.text} (ours, worst cell: {ours})")
    if not claims:
        lines.append("- (no checkable claims in this spec)")
    pvs = [v for v in verdicts if v.kind == "paper_value"]
    if pvs:
        lines += ["", f"## Paper values ({paper_value_tally(pvs)})", "",
                  "| cell | paper | ours | verdict |", "|---|---|---|---|"]
        for v in pvs:
            ours = "—" if v.ours is None else f"{v.ours:.3f}"
            lines.append(f"| {v.text} | {v.paper:.3f} | {ours} | {v.verdict} |")
    lines += ["", "## Our numbers", "", md_table(agg) if not agg.empty else "(no finished runs)"]
    lines += ["", "## Decisions (spec notes)", ""] + [f"- {n}" for n in spec.notes]
    return "\n".join(lines) + "\n"
