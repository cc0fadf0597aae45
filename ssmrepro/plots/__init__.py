"""Build a spec's derived outputs from its store: results.csv -> aggregate -> figure + report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import report
from ..sweep import expand
from . import figures


@dataclass
class Outputs:
    csv: Path
    figure: Path | None
    report: Path
    verdicts: list


def load_table(spec, profile: str, root: Path) -> tuple[pd.DataFrame, list]:
    """The run table of ``profile``: rebuilt from records when present, else the committed CSV."""
    from ..engine import open_store, output_name

    runs = expand(spec, profile)
    store = open_store(spec, root.parents[1])
    df = store.table(runs)
    name = output_name(spec, profile, "results", "csv")
    csv = root / name
    if df.empty and csv.exists():
        df = pd.read_csv(csv)
        if "profile" in df:
            df = df[df["profile"] == profile]
    elif not df.empty:
        store.write_csv(runs, name)
    return df, runs


def build(spec, profile: str, root: Path) -> Outputs:
    from ..engine import output_name

    def out(stem: str, ext: str) -> Path:
        return root / output_name(spec, profile, stem, ext)

    df, runs = load_table(spec, profile, root)
    agg = report.aggregate(df, runs, spec.aggregate.reduce, spec.aggregate.metrics)
    verdicts = report.verify(spec, agg)
    rep = out("report", "md")
    report_text = report.markdown(spec, profile, agg, verdicts, len(df))
    root.mkdir(parents=True, exist_ok=True)
    fig_path = None
    kind = spec.figure.kind
    if kind == "histograms":
        from ..engine import open_store

        store = open_store(spec, root.parents[1])
        recs = [r for r in (store.read(x.run_id) for x in runs) if r is not None]
        hist = figures.histogram_table(recs)
        hpath = out("histograms", "csv")
        if hist.empty and hpath.exists():
            hist = pd.read_csv(hpath)
        elif not hist.empty:
            hist.to_csv(hpath, index=False)
        if not hist.empty:
            fig_path = out("figure", "png")
            figures.histograms(spec, hist, profile, fig_path)
    elif kind == "recall_grid" and not agg.empty:
        from .recall import recall_grid

        fig_path = out("figure", "png")
        recall_grid(spec, agg, profile, fig_path)
    elif not agg.empty and kind in figures.KINDS:
        fig_path = out("figure", "png")
        figures.KINDS[kind](spec, agg, profile, fig_path)
    if not agg.empty:
        agg.to_csv(out("summary", "csv"), index=False)
    rep.write_text(report_text)
    return Outputs(out("results", "csv"), fig_path, rep, verdicts)
