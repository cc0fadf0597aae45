"""Stage 6 (plots): the ``learning_curves`` figure kind — a metric of the evaluation history
against the training step (budget studies: is a cell under-trained or at its limit?).

One panel per value of ``facet``, one curve per value of ``hue`` (seeds reduced per step with
the spec's aggregation: best of seeds for ``max``, else the mean), the paper's value for the
cell as a dotted line of the curve's colour. The history comes from the run records
(``history.csv`` caches it for committed results).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pydantic import Field  # noqa: E402

from ..report.analysis import HISTORY  # noqa: E402
from ..report.cells import column  # noqa: E402
from ..report.columns import LABEL  # noqa: E402
from .registry import Columns, FigureConfig, FigureContext, figure_kind  # noqa: E402


class LearningCurvesConfig(FigureConfig):
    kind: Literal["learning_curves"]
    metric: str = "val.acc"
    facet: str = LABEL
    hue: Columns = Field([], description="columns naming a curve within a panel")
    paper_metric: str = Field("test.acc", description="the paper value drawn beside each curve")
    logx: bool = True
    names: dict[str, str] = {}

    def column_refs(self) -> list[str]:
        return [self.facet, *self.hue]

    def metrics(self) -> list[str]:
        return []

    def analyses(self) -> list[str]:
        return [HISTORY]


def _name(row: dict, keys: list[str], names: dict[str, str]) -> str:
    parts = []
    for k in keys:
        v = row.get(k)
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        v = int(v) if isinstance(v, float) and v.is_integer() else v
        parts.append(f"{names.get(k, k.split('.')[-1])}={v}")
    return ", ".join(parts)


@figure_kind("learning_curves", LearningCurvesConfig)
def learning_curves(ctx: FigureContext, cfg: LearningCurvesConfig, path: Path) -> bool:
    """Metric of the evaluation history vs step: a panel per facet, a curve per hue."""
    hist = ctx.tables.get(HISTORY, pd.DataFrame())
    if hist.empty or cfg.metric not in hist or "step" not in hist:
        return False
    hist = hist.assign(_facet=column(hist, cfg.facet).astype(str))
    facets = list(dict.fromkeys(hist["_facet"]))
    fig, axes = plt.subplots(1, len(facets), figsize=(5.0 * len(facets), 3.9), squeeze=False)
    best = ctx.spec.aggregate.reduce == "max"
    cmap = plt.get_cmap("tab10")
    for ax, facet in zip(axes[0], facets):
        sub = hist[hist["_facet"] == facet]
        hues = list(dict.fromkeys(sub[cfg.hue].itertuples(index=False, name=None))) \
            if cfg.hue else [()]
        for k, hv in enumerate(hues):
            g = sub
            for col, v in zip(cfg.hue, hv):
                g = g[g[col] == v]
            curve = g.groupby("step")[cfg.metric].agg("max" if best else "mean").sort_index()
            curve = curve[curve.index > 0] if cfg.logx else curve
            if curve.empty:
                continue
            row = {**dict(zip(cfg.hue, hv)), LABEL: g[LABEL].iloc[0]}
            color = cmap(k % 10)
            ax.plot(curve.index, curve.values, marker="o", ms=2.5, color=color,
                    label=_name(row, cfg.hue, cfg.names) or str(facet))
            pv = ctx.paper_value(row, cfg.paper_metric)
            if pv is not None:
                ax.axhline(pv, color=color, ls=":", lw=1.2)
        if cfg.logx:
            ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("training step")
        what = "best of seeds" if best else "mean of seeds"
        ax.set_ylabel(f"{cfg.metric} ({what})")
        ax.set_title(f"{facet}\n(dotted: the paper's {cfg.paper_metric})", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(ctx.title(cfg), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True
