"""Stage 6 (plots): the general figure kinds — bars, heatmaps, lines, histograms.

``bars``: one bar per cell, the paper's value as a black marker. ``heatmaps``: a panel per value
of ``col``, cells annotated "ours (paper)". ``lines``: metric against a swept key, one line per
``hue``, one panel per ``facet``. ``histograms``: huang2025 Fig. 1 decay histograms (from run
records, cached in ``histograms.csv``). Every figure says which profile it shows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..report.analysis import DECAY  # noqa: E402
from ..report.cells import column  # noqa: E402
from ..report.columns import DECAY_X, LABEL, N_PARAMS  # noqa: E402
from .registry import Columns, FigureConfig, FigureContext, figure_kind  # noqa: E402


def _cell_name(row: pd.Series, cols: list[str]) -> str:
    parts = []
    for c in cols:
        v = row[c]
        if isinstance(v, float) and math.isnan(v):
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        parts.append(f"{c.split('.')[-1]}={v}")
    return ",".join(parts)


# ----------------------------------------------------------------------------------------------


class BarsConfig(FigureConfig):
    kind: Literal["bars"]
    x: str = LABEL

    def column_refs(self) -> list[str]:
        return [self.x]


@figure_kind("bars", BarsConfig)
def bars(ctx: FigureContext, cfg: BarsConfig, path: Path) -> bool:
    """One bar per cell (± std over seeds), the paper's value as a black marker."""
    agg = ctx.table
    if agg.empty:
        return False
    metric = cfg.metric
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(agg)), 4))
    names = [str(v) for v in column(agg, cfg.x)]
    vals = agg[metric].to_numpy(dtype=float)
    err = agg.get(f"{metric}.std", pd.Series([0] * len(agg))).to_numpy(dtype=float)
    pos = np.arange(len(agg))
    ax.bar(pos, vals, yerr=np.nan_to_num(err), capsize=4, color="#4C72B0", label="ours")
    labelled = False
    for i, (_, row) in enumerate(agg.iterrows()):
        pv = ctx.paper_value(row.to_dict(), metric)
        if pv is not None:
            ax.plot([i - 0.35, i + 0.35], [pv, pv], color="k", lw=2,
                    label=None if labelled else "paper")
            labelled = True
        if not math.isnan(vals[i]):
            ax.text(i, vals[i] + 0.02, f"{vals[i]:.2f}", ha="center", va="bottom", fontsize=8)
        else:
            ax.text(i, 0.02, "diverged", ha="center", va="bottom", fontsize=7, color="tab:red")
        if N_PARAMS in row and not pd.isna(row[N_PARAMS]):
            ax.text(i, -0.08, f"{int(row[N_PARAMS]):,} p", ha="center", va="top", fontsize=7,
                    transform=ax.get_xaxis_transform())
    ax.set_xticks(pos, names, rotation=0)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel(f"{metric} ({ctx.aggregation()})")
    ax.set_title(ctx.title(cfg), fontsize=9)
    ax.legend(loc="upper center", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------


class HeatmapsConfig(FigureConfig):
    kind: Literal["heatmaps"]
    col: str = LABEL
    x: Columns = []
    y: Columns = []

    def column_refs(self) -> list[str]:
        return [self.col, *self.x, *self.y]


@figure_kind("heatmaps", HeatmapsConfig)
def heatmaps(ctx: FigureContext, cfg: HeatmapsConfig, path: Path) -> bool:
    """A panel per value of ``col``; cells (x × y) annotated "ours (paper)"."""
    agg = ctx.table
    if agg.empty:
        return False
    metric = cfg.metric
    panel_of = column(agg, cfg.col)
    panels = list(dict.fromkeys(panel_of))
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 1.2, 3.0 * nrows + 0.8),
                             squeeze=False, constrained_layout=True)
    im = None
    for ax, panel in zip(axes.flat, panels):
        sub = agg[panel_of == panel]
        xn = list(dict.fromkeys(_cell_name(r, cfg.x) for _, r in sub.iterrows()))
        yn = list(dict.fromkeys(_cell_name(r, cfg.y) for _, r in sub.iterrows()))
        grid = np.full((len(yn), len(xn)), np.nan)
        notes = [["" for _ in xn] for _ in yn]
        for _, r in sub.iterrows():
            i, j = yn.index(_cell_name(r, cfg.y)), xn.index(_cell_name(r, cfg.x))
            grid[i, j] = r[metric]
            pv = ctx.paper_value(r.to_dict(), metric)
            ours = "—" if math.isnan(r[metric]) else f"{r[metric]:.2f}"
            notes[i][j] = ours + (f"\n({pv:.2f})" if pv is not None else "")
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i in range(len(yn)):
            for j in range(len(xn)):
                v = grid[i, j]
                ax.text(j, i, notes[i][j], ha="center", va="center", fontsize=6.5,
                        color="k" if (not np.isnan(v) and v > 0.6) else "w")
        ax.set_xticks(range(len(xn)), xn, fontsize=7)
        ax.set_yticks(range(len(yn)), yn, fontsize=7)
        ax.set_title(str(panel), fontsize=9)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8,
                 label=f"{metric}, {ctx.aggregation()}: ours (paper)")
    fig.suptitle(ctx.title(cfg), fontsize=10)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------


class LinesConfig(FigureConfig):
    kind: Literal["lines"]
    x: str | None = None  # default: the swept key that varies within the panel
    hue: str = "case:0"
    facet: str | None = "case:1"
    ylim: tuple[float, float] | None = (-0.02, 1.02)
    logx: bool = False
    logy: bool = False

    def column_refs(self) -> list[str]:
        return [c for c in (self.x, self.hue, self.facet) if c]


@figure_kind("lines", LinesConfig)
def lines(ctx: FigureContext, cfg: LinesConfig, path: Path) -> bool:
    """One panel per ``facet``: metric vs ``x`` (± std with mean aggregation), a line per ``hue``."""
    agg = ctx.table
    if agg.empty:
        return False
    metric = cfg.metric
    agg = agg.assign(_hue=column(agg, cfg.hue).astype(str),
                     _facet=column(agg, cfg.facet).astype(str) if cfg.facet else "")
    facets = list(dict.fromkeys(agg["_facet"]))
    fig, axes = plt.subplots(1, len(facets), figsize=(4.6 * len(facets), 3.6), squeeze=False)
    # list-valued keys (e.g. a case's model.layers) count by their text
    swept = [c for c in ctx.keys if c != LABEL and c in agg and agg[c].astype(str).nunique() > 1]
    for ax, facet in zip(axes[0], facets):
        sub = agg[agg["_facet"] == facet]
        xkey = cfg.x or next((c for c in swept if sub[c].astype(str).nunique() > 1),
                             swept[0] if swept else LABEL)
        for hue in dict.fromkeys(sub["_hue"]):
            h = sub[sub["_hue"] == hue].sort_values(xkey)
            ax.plot(h[xkey], h[metric], marker="o", label=hue)
            std = f"{metric}.std"
            if std in h and h[std].notna().any() and ctx.spec.aggregate.reduce == "mean":
                ax.fill_between(h[xkey], h[metric] - h[std], h[metric] + h[std], alpha=0.2)
        ax.set_xlabel(xkey.split(".")[-1])
        ax.set_ylabel(f"{metric} ({ctx.aggregation()})")
        if cfg.logx:
            ax.set_xscale("log")
        if cfg.logy:
            ax.set_yscale("log")
        if cfg.ylim is not None and not cfg.logy:
            ax.set_ylim(*cfg.ylim)
        ax.set_title(facet, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(ctx.title(cfg), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------


class HistogramsConfig(FigureConfig):
    kind: Literal["histograms"]
    x: str = DECAY_X  # one curve per value (left panels); the largest is split before/after

    def column_refs(self) -> list[str]:
        return [self.x]

    def metrics(self) -> list[str]:
        return []

    def analyses(self) -> list[str]:
        return [DECAY]


@figure_kind("histograms", HistogramsConfig)
def histograms(ctx: FigureContext, cfg: HistogramsConfig, path: Path) -> bool:
    """Left: distribution over all timesteps per x for each model; right: before vs after n."""
    hist = ctx.tables.get(DECAY, pd.DataFrame())
    if hist.empty or cfg.x not in hist:
        return False
    x = cfg.x
    labels = list(dict.fromkeys(hist[LABEL]))
    fig, axes = plt.subplots(1, len(labels) + 1, figsize=(4.5 * (len(labels) + 1), 3.6))
    bins = int(hist["bins"].iloc[0])
    centers = (np.arange(bins) + 0.5) / bins
    xs = sorted(hist[x].unique())
    cmap = plt.get_cmap("viridis")
    name = x.split(".")[-1]
    for ax, lab in zip(axes, labels):
        for k, xv in enumerate(xs):
            sub = hist[(hist[LABEL] == lab) & (hist[x] == xv)]
            c = sub.groupby("bin")["count"].sum().reindex(range(bins), fill_value=0).to_numpy()
            if c.sum():
                ax.plot(centers, c / c.sum(), color=cmap(k / max(1, len(xs) - 1)),
                        label=f"{name}={xv}")
        ax.set_yscale("log")
        ax.set_xlabel(r"$e^{-\lambda\Delta_t}$")
        ax.set_ylabel("fraction of values")
        ax.set_title(f"{lab}: all timesteps", fontsize=9)
        ax.legend(fontsize=7)
    ax = axes[-1]
    xmax = max(xs)
    for lab, ls in zip(labels, ["-", "--", ":", "-."]):
        for part, color in (("before", "tab:red"), ("after", "tab:blue")):
            sub = hist[(hist[LABEL] == lab) & (hist[x] == xmax) & (hist["part"] == part)]
            c = sub.set_index("bin")["count"].reindex(range(bins), fill_value=0).to_numpy()
            if c.sum():
                rel = "<" if part == "before" else ">="
                ax.plot(centers, c / c.sum(), ls=ls, color=color, label=f"{lab}, t {rel} n")
    ax.set_yscale("log")
    ax.set_xlabel(r"$e^{-\lambda\Delta_t}$")
    ax.set_title(f"before vs after n ({name}={xmax})", fontsize=9)
    ax.legend(fontsize=7)
    fig.suptitle(ctx.title(cfg), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True
