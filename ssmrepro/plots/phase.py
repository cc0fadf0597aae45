"""Stage 6 (plots): ``phase`` — phase diagrams as annotated heatmaps, ours beside the paper's.

chen2025 Figs. 4 and 8: a metric over a y × x grid (layers × γ), every cell annotated with its
value (aggregated over seeds). One panel per metric of ``panels``; for a metric with paper values
a second panel beside it shows the paper's cell values (cells the paper gives no number for
show ``paper_default``, e.g. "≤.13"). In our panel, cells whose paper value differs by more than
the paper value's tolerance are outlined in red, and the title says how many are within it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

from ..report.cells import fmt_beside, fmt_num, select, values_equal  # noqa: E402
from ..report.checks import nearer_end, within  # noqa: E402
from ..report.columns import COMPLETE  # noqa: E402
from ..util import NoBoolNumbers, TitleText, fill_seeds, has_seeds_placeholder  # noqa: E402
from .registry import (  # noqa: E402
    FigureConfig,
    FigureContext,
    figure_kind,
    save_png,
    seeds_said,
    subplots,
    unread_metric,
    wrap_text,
)


class PhasePanel(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: str
    title: TitleText | None = None  # `{seeds}`: how the panel draws seeds
    paper_default: str | None = None  # text of cells without a paper value in the paper panel


# heatmaps of one phase figure (the shipped ones draw 2): 3,000 passed `validate`, then `plot`
# (and `run`, after training) refused a figure 507,078 pixels tall
MAX_PANELS = 20


class PhaseConfig(FigureConfig):
    kind: Literal["phase"]
    metric: str = unread_metric("each panel's own metric (panels)")
    x: str = Field(..., description="numeric column of every panel's x axis")
    y: str = Field(..., description="numeric column of every panel's y axis")
    panels: list[PhasePanel] = Field(
        ..., min_length=1, max_length=MAX_PANELS, description="a heatmap per entry: {metric, "
        "title (`{seeds}`: how the panel draws seeds), paper_default (text of cells without a "
        "paper value)}")
    where: dict[str, Any] = Field({}, description="draw only the cells matching these conditions")
    y_descending: bool = Field(True, description="largest y on top (the paper's layout)")
    x_label: str | None = Field(None, description="x axis label (default: x's last dotted part)")
    y_label: str | None = Field(None, description="y axis label (default: y's last dotted part)")
    vmax: float = Field(1.0, gt=0, description="top of the colour scale (bottom: 0)")

    def column_refs(self) -> list[str]:
        return [self.x, self.y, *self.where]

    def numeric_refs(self) -> list[str]:
        return [self.x, self.y]

    def positions(self) -> list[str] | None:  # one grid for every cell: no panel per label
        return [self.x, self.y]

    def cell_filter(self) -> dict[str, Any]:
        return self.where

    def metrics(self) -> list[str]:
        return [p.metric for p in self.panels]


def _paper_for(ctx: FigureContext, metric: str, row: dict) -> tuple[float, float] | None:
    pv = ctx.paper_value_of(row, metric)
    return None if pv is None else (pv.value, pv.tol)


PAPER_SEEDS = "the paper's seeds"  # a paper panel's {seeds}: the paper's values
NO_VALUE = "—"  # a cell's text where it has no value (every seed diverged, not measured)


def _draw(ax, grid: np.ndarray, text: list[list[str]], xs: list, ys: list, vmax: float,
          faint: np.ndarray | None = None):
    im = ax.imshow(grid, vmin=0, vmax=vmax, cmap="viridis", aspect="auto")
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = grid[i, j]
            dark = not np.isnan(v) and v > 0.6 * vmax
            color = "k" if dark else "w"
            if faint is not None and faint[i, j]:
                color = "0.6"
            elif np.isnan(v) and text[i][j] == NO_VALUE:  # a cell without a value (diverged):
                # grey, its '—' in black (it was a white '—' on the blank of no cell at all)
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color="0.85", lw=0))
                color = "k"
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=6.5, color=color)
    ax.set_xticks(range(len(xs)), [fmt_num(x) for x in xs], fontsize=7)
    ax.set_yticks(range(len(ys)), [fmt_num(y) for y in ys], fontsize=7)
    return im


def _cell(v: float, bound: float | None = None) -> str:
    """A cell's number: 2 decimals without the leading 0 (the paper's ".42"), 2 significant
    digits where 2 decimals would read as zero (an accuracy of 0.0005 read ".00", as a cell of
    exactly 0 beside it did; the heatmaps' rule); beside a paper value, with the digits that
    keep it on its side of the nearer end of paper ± tol, ``bound`` (0.4702 against .42 ± .05
    read ".47", within the tolerance, in a red outline of a cell that differs)."""
    if math.isnan(v):
        return NO_VALUE
    text = f"{v:.2g}" if 0 < abs(v) < 0.005 else f"{v:.2f}"
    text = fmt_beside(v, bound, text) if bound is not None else text
    return text.lstrip("0") if 0 <= v < 1 else text


def _in_paper_grid(ctx: FigureContext, cfg: PhaseConfig, row: Any) -> bool:
    """Whether a cell's (x, y) is a point of the paper's own grid: some paper value names it
    (of any metric). ``paper_default`` ("≤.13") stands for the paper's unprinted cells of that
    grid, not for a γ = 0.55 the paper never ran (it was shown there as the paper's). True when
    no paper value names both keys (the grid is not known)."""
    points = [(pv.where[cfg.x], pv.where[cfg.y]) for pv in ctx.spec.paper_values
              if cfg.x in pv.where and cfg.y in pv.where]
    return not points or any(values_equal(x, row[cfg.x]) and values_equal(y, row[cfg.y])
                             for x, y in points)


@figure_kind("phase", PhaseConfig)
def phase(ctx: FigureContext, cfg: PhaseConfig, path: Path) -> bool:
    """Annotated heatmaps over y × x, one per metric, the paper's cell values beside ours."""
    agg = ctx.table
    if cfg.where:
        agg = select(agg, cfg.where)
    if agg.empty:
        return False
    xs = sorted(dict.fromkeys(agg[cfg.x].tolist()), key=float)
    ys = sorted(dict.fromkeys(agg[cfg.y].tolist()), key=float, reverse=cfg.y_descending)
    layout = []
    for p in cfg.panels:
        layout.append((p, False))
        if any(pv.metric == p.metric for pv in ctx.spec.paper_values):
            layout.append((p, True))
    ncols = min(2, len(layout)) if len(layout) != 3 else 3
    nrows = math.ceil(len(layout) / ncols)
    pw, ph = max(4.8, 0.55 * len(xs) + 1.0), max(2.6, 0.42 * len(ys) + 1.2)
    fig, axes = subplots(path, 130, nrows, ncols, figsize=(pw * ncols + 1.0, ph * nrows + 0.6),
                         squeeze=False, constrained_layout=True)
    im = None
    shown = []  # every value coloured: beyond [0, vmax] the colour bar has a pointed end
    for ax, (p, paper) in zip(axes.flat, layout):
        grid = np.full((len(ys), len(xs)), np.nan)
        text = [["" for _ in xs] for _ in ys]
        faint = np.zeros_like(grid, dtype=bool)
        bad = []
        n_cmp = n_ok = n_open = n_none = 0
        for _, r in agg.iterrows():
            i = next(k for k, y in enumerate(ys) if values_equal(y, r[cfg.y]))
            j = next(k for k, x in enumerate(xs) if values_equal(x, r[cfg.x]))
            ref = _paper_for(ctx, p.metric, r.to_dict())
            if paper:
                if ref is not None:
                    grid[i, j] = ref[0]
                    text[i][j] = _cell(ref[0])
                elif p.paper_default and _in_paper_grid(ctx, cfg, r):
                    text[i][j] = p.paper_default
                    faint[i, j] = True
                continue
            v = float(r[p.metric]) if p.metric in r else math.nan
            grid[i, j] = v
            n_none += math.isnan(v)
            text[i][j] = _cell(v, None if ref is None or math.isnan(v)
                               else nearer_end(v, ref[0], ref[1]))
            if ref is not None and COMPLETE in r and not bool(r[COMPLETE]):
                # not every run of the cell finished: drawn, not judged, as the report's
                # paper value is 'unfinished' (it was counted and outlined as the report's
                # `differs`, '1 of 2 within tolerance' beside the report's '0 of 1 compared')
                n_open += 1
            elif ref is not None:
                n_cmp += 1
                if not math.isnan(v) and within(v, ref[0], ref[1]):  # as the report: a
                    # value on the bound but for rounding (0.85 of paper 0.9 ± 0.05) read red
                    n_ok += 1
                else:
                    bad.append((i, j))
        shown.append(grid.ravel())
        im = _draw(ax, grid, text, xs, ys, cfg.vmax, faint if paper else None)
        for i, j in bad:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="tab:red", lw=1.2))
        name = p.title or p.metric
        # a panel title naming seeds in its own words, as a figure's (``seeds_said``): 'acc
        # (mean of seeds)' above one seed's cells was drawn as written, before '(one seed)'
        own, said = seeds_said(name, ctx.aggregation(p.metric)) if not paper and p.title \
            and not has_seeds_placeholder(name) else (name, "")
        if said:
            ctx.warn_once(f"{ctx.spec.id}: panel {p.metric}: {said}")
        if paper:  # (the paper's values: of seeds as it ran them)
            title = f"{fill_seeds(name, PAPER_SEEDS)}: paper"
        elif has_seeds_placeholder(name):  # said once
            title = f"{fill_seeds(name, ctx.aggregation(p.metric))}: ours"
        elif own != name:  # (its words drawn as the panel draws seeds: said once)
            title = f"{fill_seeds(own, '')}: ours"
        else:
            title = f"{fill_seeds(name, '')}: ours ({ctx.aggregation(p.metric)})"
        if not paper:  # (a {seeds} panel's title left them out: red outlines unexplained)
            if n_cmp or n_open:
                title += f"\n{n_ok} of {n_cmp} within tolerance (red: outside)" + (
                    f"; {n_open} not finished, not compared" if n_open else "")
            if n_none:  # said, as the blank of a point no cell has is not
                title += (f"\ngrey {NO_VALUE}: {n_none} cell{'s' if n_none > 1 else ''} without "
                          "a value (diverged or not measured)")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(cfg.x_label or cfg.x.split(".")[-1], fontsize=8)
        ax.set_ylabel(cfg.y_label or cfg.y.split(".")[-1], fontsize=8)
    for ax in list(axes.flat)[len(layout):]:
        ax.axis("off")
    # named by the metrics drawn, with a pointed end where values lie beyond the scale (a loss
    # panel's 2.4 and 3.9 were both its top colour, beside a bar labelled 'accuracy' ending at 1)
    metrics = list(dict.fromkeys(p.metric for p in cfg.panels))
    vals = np.concatenate(shown)
    below, above = bool((vals < 0).any()), bool((vals > cfg.vmax).any())
    extend = {(False, False): "neither", (True, False): "min", (False, True): "max",
              (True, True): "both"}[(below, above)]
    # a top near the largest float (a float64 loss's vmax 1e308; validate refuses one past
    # every value of the metrics) overflowed in matplotlib's colour bar ticks: raw
    # `RuntimeWarning: overflow` lines among the command's output
    with np.errstate(over="ignore", invalid="ignore"):
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, extend=extend,
                     label="accuracy" if all(m.endswith(".acc") for m in metrics)
                     else wrap_text(", ".join(metrics), max(1.0, fig.get_figheight() - 0.3), 10))
        fig.suptitle(ctx.fitted_title(cfg, fig.get_figwidth(), 9), fontsize=9)
        save_png(fig, path, dpi=130)
    return True


__all__ = ["PhaseConfig", "PhasePanel", "phase"]
