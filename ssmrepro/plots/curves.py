"""Stage 6 (plots): ``curves`` — learning curves (metric vs training step) from the eval history.

A grid of panels (``row`` × ``col``, column refs such as ``model.repeat``, ``case:0`` or
``seed``); in each panel one line per history metric of ``series`` (``train.acc``, ``val.acc``,
``ood.acc``, ...) and, with ``hue`` (one column or several), per value of those columns. Seeds
are averaged (line = mean, band = min..max over seeds), reduced to the best seed's curve, the
seed of the best last value (``seeds: best``, for specs that aggregate with ``max``) or drawn
one line each (``seeds:
each``). Budget studies (is a cell under-trained or at its limit?) use ``logx``. The paper's values of the
drawn metrics (``paper_values`` whose ``where`` matches the panel) are dashed horizontal lines.
The data are ``curves.csv`` (report.curves), rebuilt from the run records or read back when the
records are absent.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from ..report.cells import (  # noqa: E402
    case_label,
    column,
    has_column,
    is_case_ref,
    select,
    with_case_label,
)
from ..report.columns import DIVERGED, LABEL, OK, SEED, STATUS  # noqa: E402
from ..report.curves import STEP  # noqa: E402
from ..store import is_loss  # noqa: E402
from ..util import DrawnText, encode_cell, has_seeds_placeholder  # noqa: E402
from .registry import (  # noqa: E402
    MAX_PIXELS,
    MAX_SIDE,
    YLIM_HELP,
    Columns,
    FigureConfig,
    FigureContext,
    NotDrawn,
    YLim,
    figure_kind,
    list_panels,
    mapped_panel,
    panel_value,
    plain_log_x,
    resolve_ylim,
    save_png,
    seeds_said,
    subplots,
    tight_layout,
    unread_metric,
)

CURVES = "curves"  # the table name in FigureContext.tables
DIVERGED_HERE = "×: a seed diverged there (its curve ends)"
FEWER_SEEDS = "thin, faint: the mean of the seeds left (the others diverged or ended)"
_STYLES = ["-", "--", ":", "-."]
_HUE_STYLES = ["-", "--", "-."]  # the hues of one series (dotted is a paper value's line)
# past 20 hues the colours repeat: each further 20 hues get their own marker (a colour and a
# marker name a curve, up to 20 x 10 of them)
_MARKERS = ["", "s", "^", "v", "D", "x", "+", "*", "P", "X"]  # not "o": `seeds: best` draws it
LEGEND_ROOM = 0.05 + 0.14 * 4  # inches below the panels a legend of 4 rows takes from them


class CurvesConfig(FigureConfig):
    kind: Literal["curves"]
    metric: str = unread_metric("the history metrics of series")
    series: Columns = Field(..., min_length=1,
                            description="history metrics drawn, e.g. 'train.acc,val.acc'")
    labels: dict[str, str] = Field({}, description="legend name per metric, e.g. {val.acc: test}")
    row: str | None = Field(None, description="column with a row of panels per value (null: one "
                            "row)")
    col: str | None = Field(None, description="column with a panel per value in each row (null: "
                            "one)")
    hue: Columns = Field([], description="columns naming a curve within a panel")
    names: dict[str, DrawnText] = Field({}, description="display name per column, e.g. {model.d_model: d}")
    where: dict[str, Any] = Field({}, description="only runs of the cells matching this")
    seeds: Literal["mean", "best", "each"] = Field(
        "mean", description="a cell's seeds: mean (line, band min..max), best (the seed of the "
        "best last value) or each (a line per seed)")
    logx: bool = Field(False, description="log x axis")
    x: Literal["step", "samples"] = Field(STEP, description="x axis: training step or training "
                                          "samples seen")
    ylim: YLim = Field("auto", description=YLIM_HELP)
    logy: bool = Field(False, description="log y axis")
    transform: Literal["none", "exp"] = Field(
        "none", description="exp: draw exp(value), e.g. per-byte perplexity from a loss in nats")
    ylabel: DrawnText | None = Field(None, description="y axis label (default: the series' last "
                                     "dotted parts, e.g. acc)")
    panel: tuple[Annotated[float, Field(ge=0.5, le=20)], Annotated[float, Field(ge=0.5, le=20)]] = (
        Field((3.3, 2.5), description="inches (width, height) of one panel, each 0.5 to 20"))
    wrap: int | None = Field(None, ge=1, description="without row: at most this many panels a "
                             "row, the col values wrapped onto more rows")
    paper_as: dict[str, str] = Field(
        {}, description="draw the paper values of a final metric on a series, e.g. {test.acc: "
        "val.acc} (the validation curve follows the test rule)")
    paper_panels: dict[str, str | list[Any]] = Field(
        {}, description="value of col -> the value whose paper values its panel shows, e.g. "
        "another layout of the paper's model: {'S4D+PE (LN)': S4D+PE}; a list-valued panel "
        "as its title writes it: {'[0.8, 0.95]': [0.9, 0.99]}")

    _list_panels = model_validator(mode="before")(list_panels)

    @model_validator(mode="after")
    def _named_series(self) -> CurvesConfig:
        # a legend name or a paper value drawn on a metric the figure does not draw was ignored
        bad = [f"labels.{m}" for m in self.labels if m not in self.series] + [
            f"paper_as.{k}: {v}" for k, v in self.paper_as.items() if v not in self.series]
        if bad:
            raise ValueError(f"{', '.join(bad)}: not one of the series {self.series}")
        if self.paper_panels and not self.col:
            raise ValueError("paper_panels: its keys are values of col, and no col is given")
        odd = [m for m in self.series if not is_loss(m) or m.endswith((".mse", ".best_mse"))]
        if self.transform == "exp" and odd:
            # exp of an accuracy (1 to e) or a squared error is no quantity: a perplexity is
            # exp of a cross-entropy loss in nats; it was drawn without a word
            raise ValueError(f"transform: exp of {', '.join(odd)}: exp is drawn of a "
                             "cross-entropy loss (*.loss: a perplexity), not of an accuracy, "
                             "a squared error or another metric")
        return self

    def column_refs(self) -> list[str]:
        return [c for c in (self.row, self.col, *self.hue) if c and c != SEED] + list(self.where)

    def cell_filter(self) -> dict[str, Any]:
        return self.where

    def panel_refs(self) -> list[str]:
        return [c for c in (self.row, self.col) if c]

    def positions(self) -> list[str] | None:  # a curve per (row, col, hue): two cells there
        # were averaged into one curve, step by step, as if they were seeds of one cell
        return [c for c in (self.row, self.col, *self.hue) if c]

    def value_refs(self) -> list[tuple[str, str, Any]]:  # a misspelt panel showed no paper value
        return [(f"paper_panels.{k}", self.col, panel_value(self.col, k))
                for k in self.paper_panels] if self.col else []

    def metrics(self) -> list[str]:
        return []

    def history_metrics(self) -> list[str]:
        return list(self.series)


def _lone_points(ys: np.ndarray) -> dict[str, Any]:
    """Marker arguments for ``ax.plot`` that show the points of a line with no finite neighbour
    (a curve of one evaluation, max_steps 0 or eval_every past max_steps; a value between NaNs):
    a line through one point draws nothing, and such a panel was saved empty but for its
    legend."""
    ok = np.isfinite(np.asarray(ys, dtype=float))
    prev = np.concatenate([[False], ok[:-1]])
    nxt = np.concatenate([ok[1:], [False]])
    lone = np.flatnonzero(ok & ~prev & ~nxt).tolist()
    return {"marker": "o", "ms": 4, "markevery": lone} if lone else {}


def _order(values: pd.Series) -> list:
    vals = list(dict.fromkeys(values.tolist()))
    try:
        return sorted(vals, key=float)
    except (TypeError, ValueError):
        return vals


def _fmt(ref: str | None, v: Any, names: dict[str, str] | None = None) -> str:
    if ref is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    name = "" if ref.startswith("case:") else (names or {}).get(ref, ref.split(".")[-1]) + "="
    return f"{name}{encode_cell(v)}"  # a list as the tables write it: ["SSM"], not ['SSM']


def _hue_text(df: pd.DataFrame, cfg: CurvesConfig) -> pd.Series:
    """One text per curve: 'd=32, N=8' from the hue columns ('' without hue)."""
    if not cfg.hue:
        return pd.Series("", index=df.index)
    parts = [column(df, h).map(lambda v, h=h: "" if isinstance(v, float) and math.isnan(v)
                               else _fmt(h, v, cfg.names)) for h in cfg.hue]
    # a column that does not apply to a run (a Transformer's state size) is left out, not 'N=nan'
    return pd.concat(parts, axis=1).apply(lambda r: ", ".join(t for t in r if t), axis=1)


def _paper_lines(ctx: FigureContext, cfg: CurvesConfig, sub: pd.DataFrame) -> list[tuple]:
    """(metric, value) of the paper values drawn in this panel: metric among the series and
    every ``where`` key that the curve table has matching the panel's runs."""
    out = []
    if cfg.col and is_case_ref(cfg.col) and LABEL in sub.columns and cfg.paper_panels:
        # the mapped case label swapped into the label (a `case:1` column was looked for in
        # the curve table, which has none: the mapped panel drew no paper line)
        def mapped(label: Any) -> Any:
            case = case_label(label, cfg.col)
            return with_case_label({LABEL: label}, cfg.col,
                                   cfg.paper_panels.get(case, case))[LABEL]
        sub = sub.assign(**{LABEL: sub[LABEL].map(mapped)})
    elif cfg.col in sub.columns and cfg.paper_panels:
        # a list-valued panel by the text its paper_panels key is (``list_panels``), a number
        # by its value; once per panel value, not per row of the curve table
        seen: dict[str, Any] = {}

        def mapped_value(v: Any) -> Any:
            text = str(encode_cell(v))
            if text not in seen:
                seen[text] = mapped_panel(cfg.paper_panels, cfg.col, v)
            return seen[text]

        sub = sub.assign(**{cfg.col: sub[cfg.col].map(mapped_value)})
    for pv in ctx.spec.paper_values:
        metric = cfg.paper_as.get(pv.metric, pv.metric)
        if metric not in cfg.series:
            continue
        # a case label (`case:0: A`) read from the label, as the report's `select` reads it
        conds = {k: v for k, v in pv.where.items() if has_column(sub, k)}
        if len(conds) != len(pv.where) or select(sub, conds).empty:
            continue
        out.append((metric, math.exp(pv.value) if cfg.transform == "exp" else pv.value))
    return out


def best_of_seeds(values: np.ndarray, metric: str, finished: np.ndarray | None = None
                  ) -> np.ndarray:
    """The curve of the best seed (``values``: a row per step, a column per seed): the seed
    whose last value is the best, the lowest of a loss (``store.is_loss``) and the highest of
    a score, as a cell's best of seeds is chosen by its final value (a loss curve 'best of 3
    seeds' was the highest loss, the worst seed). The best value of each step instead joined
    seeds into a curve no run followed: huang2025-fig2's Mamba-2 κ = 4, d = 8 rose to 0.18 at
    step 200 (seed 1) on its way to seed 0's 0.585, which was at 0.017 there. ``finished``
    (a flag per seed): the seeds that finished ``ok``, the only ones a cell's best of seeds
    chooses among when any did (report.cells): a seed that diverged has its last value before
    diverging, and a loss of 0.2 just before a NaN was drawn as 'best of 2 seeds' over the
    finished seed's 0.25, a curve that stops, where the report's best seed is the other."""
    if values.size == 0:
        return np.full(values.shape[0], np.nan)
    last = pd.DataFrame(values).ffill().to_numpy(float)[-1]  # a seed's last finite value
    if finished is not None and (finished & ~np.isnan(last)).any():
        last = np.where(finished, last, np.nan)
    if np.isnan(last).all():
        return np.full(values.shape[0], np.nan)
    best = int(np.nanargmin(last) if is_loss(metric) else np.nanargmax(last))
    return values[:, best]


@figure_kind("curves", CurvesConfig)
def curves(ctx: FigureContext, cfg: CurvesConfig, path: Path) -> bool:
    """Learning curves: a panel per (row, col), a line per series metric (and hue value)."""
    df = ctx.tables.get(CURVES, pd.DataFrame())
    if df.empty:
        return False
    df = select(df, cfg.where) if cfg.where else df
    missing = [m for m in cfg.series if m not in df]
    if df.empty:
        return False
    if missing == list(cfg.series):  # e.g. val.mse of a classification task
        have = [c for c in df.columns if c.rsplit(".", 1)[-1] in ("acc", "loss", "mse")]
        raise NotDrawn(f"the runs' evaluation histories have none of {', '.join(cfg.series)} "
                       f"(they have {', '.join(have) or 'none'})")
    series = [m for m in cfg.series if m in df]
    # a list-valued row or col (train.betas) by its text, as the tables write it: a list is no
    # dict key or group (a TypeError traceback in `run`, after training, and in `plot`)
    df = df.assign(_row=column(df, cfg.row).map(encode_cell) if cfg.row else "",
                   _col=column(df, cfg.col).map(encode_cell) if cfg.col else "",
                   _hue=_hue_text(df, cfg))
    rows, cols = _order(df["_row"]), _order(df["_col"])
    hues = list(dict.fromkeys(df["_hue"]))
    w, h = cfg.panel
    # panel (rv, cv) -> grid position; ``wrap`` (no row) folds the col values onto more rows
    if cfg.wrap and not cfg.row and len(cols) > cfg.wrap:
        n_r, n_c = math.ceil(len(cols) / cfg.wrap), cfg.wrap
        place = {(rows[0], cv): divmod(k, n_c) for k, cv in enumerate(cols)}
    else:
        n_r, n_c = len(rows), len(cols)
        place = {(rv, cv): (i, j) for i, rv in enumerate(rows) for j, cv in enumerate(cols)}
    drawn = df[series].to_numpy(float)
    drawn = np.exp(drawn) if cfg.transform == "exp" else drawn
    # a log x axis (panels share x) only with a step (sample count) above 0: histories of step 0
    # alone (max_steps 0) raised matplotlib's 'cannot be log-scaled' traceback
    log_x = cfg.logx and bool((df[cfg.x].astype(float) > 0).any())
    # the paper's lines count for the y range (from the curves' alone, a paper value of 1.5
    # beside losses below 1 was drawn off the accuracy range without a word)
    paper = [v for _, v in _paper_lines(ctx, cfg, df)]
    ylim = resolve_ylim(cfg.ylim, [*drawn.ravel(), *paper], series)
    fig, axes = subplots(path, 120, n_r, n_c, figsize=(w * n_c + 1.0, h * n_r + 0.9),
                         squeeze=False, sharex=True, sharey=ylim is not None)
    for ax in list(axes.flat)[len(place):]:
        ax.axis("off")
    n_colors = 10 if len(hues) <= 10 else 20  # distinct colours for up to 20 curves
    cmap = plt.get_cmap(f"tab{n_colors}")
    handles: dict[str, Any] = {}
    fewer = None  # a line of the mean of fewer seeds (its legend entry after the curves')
    off_log = 0  # points at or below 0 on a log y axis
    off_log_x = 0  # points of curves at step (samples) 0 on a log x axis
    off_paper = 0  # paper values at or below 0 on a log y axis
    hue_paper = False  # a curve of a hue drew its cell's paper value
    for (rv, cv), (i, j) in place.items():
        ax = axes[i][j]
        sub = df[(df["_row"].astype(str) == str(rv)) & (df["_col"].astype(str) == str(cv))]
        # the values of the panel's curves, one per point drawn, and its paper values: those
        # at or below 0 are counted off a log y axis (the panel's every line was counted: the
        # dotted mean of fewer seeds (a point of the solid mean's again at each end), a ×
        # mark (a curve's last point again), a paper line (its two ends) as points left out)
        points: list[np.ndarray] = []
        papers: list[float] = []
        for k, hv in enumerate(hues):
            part = sub[sub["_hue"].astype(str) == str(hv)]
            if part.empty:
                continue
            for s, m in enumerate(series):
                color = cmap((k if cfg.hue else s) % n_colors)
                # one series: each hue its own dashes too, so a curve drawn over another's
                # leaves it showing (yu2025-fig6's S6 and S6 frozen Δ coincide: one colour hid
                # the other, a curve of the legend not to be seen); never dotted, the paper's
                style = (_STYLES[s % len(_STYLES)] if len(series) > 1
                         else _HUE_STYLES[k % len(_HUE_STYLES)]) if cfg.hue else "-"
                many = cfg.hue and len(hues) > n_colors and k >= n_colors  # its colour repeats
                mark = {"marker": _MARKERS[(k // n_colors) % len(_MARKERS)], "ms": 3,
                        "markevery": 0.15} if many else {}
                name = cfg.labels.get(m, m) + (f", {hv}" if cfg.hue else "")
                by_seed = part.pivot_table(index=cfg.x, columns=SEED, values=m, aggfunc="mean")
                if cfg.transform == "exp":
                    by_seed = np.exp(by_seed)
                if log_x:  # the start (step 0) has no place on a log x axis: counted, said
                    # (as the log y axis counts them, a point of each line drawn: `each` draws a
                    # line per seed, whose starts were counted as one)
                    off = by_seed[by_seed.index <= 0]
                    off_log_x += (int(off.notna().to_numpy().sum()) if cfg.seeds == "each"
                                  else len(off))
                    by_seed = by_seed[by_seed.index > 0]
                xs = by_seed.index.to_numpy(float)
                # the seeds that diverged: their curves end there, marked × (a curve that stopped
                # mid-panel read as a run stopped early, without a word)
                gone = (part.groupby(SEED)[STATUS].agg(lambda st: (st == DIVERGED).any())
                        .reindex(by_seed.columns, fill_value=False).to_numpy(bool)
                        if STATUS in part else np.zeros(by_seed.shape[1], dtype=bool))
                ends = [] if cfg.seeds == "best" else [
                    by_seed[seed].to_numpy(float) for seed, g in zip(by_seed.columns, gone) if g]
                if cfg.seeds == "best":
                    ok = (part.groupby(SEED)[STATUS].agg(lambda st: (st == OK).all())
                          .reindex(by_seed.columns, fill_value=False).to_numpy(bool)
                          if STATUS in part else None)
                    best = best_of_seeds(by_seed.to_numpy(float), m, ok)
                    line, = ax.plot(xs, best, style,
                                    color=color, lw=1.4, **(mark or {"marker": "o", "ms": 2}))
                    points.append(best)
                    handles.setdefault(name, line)
                    if gone.any() and (ok is None or not ok.any()):  # the seed drawn diverged
                        ends.append(best)
                elif cfg.seeds == "each":
                    for seed in by_seed.columns:
                        ys = by_seed[seed].to_numpy(float)
                        line, = ax.plot(xs, ys, style, color=color, lw=1.0, alpha=0.9,
                                        **{**mark, **_lone_points(ys)})
                        points.append(ys)
                    handles.setdefault(name, line)
                else:
                    vals = by_seed.to_numpy(float)
                    mean = np.nanmean(vals, axis=1)
                    points.append(mean)
                    # the mean of every seed; where a seed has no value (it diverged, or ended
                    # before the others) the mean of the others thin and faint: a diverged seed
                    # leaving the mean read as a sudden recovery of 'the mean of 3 seeds'
                    full = np.isfinite(vals).all(axis=1)
                    solid = np.where(full, mean, np.nan)
                    line, = ax.plot(xs, solid, style, color=color, lw=1.4,
                                    **{**mark, **_lone_points(solid)})
                    few = ~full & np.isfinite(mean)
                    if few.any():  # joined to the solid line at its ends
                        near = few | np.r_[few[1:], False] | np.r_[False, few[:-1]]
                        dots, = ax.plot(xs, np.where(near, mean, np.nan), style, color=color,
                                        lw=0.7, alpha=0.55,
                                        **_lone_points(np.where(few, mean, np.nan)))
                    if vals.shape[1] > 1:
                        ax.fill_between(xs, np.nanmin(vals, axis=1), np.nanmax(vals, axis=1),
                                        color=color, alpha=0.18, lw=0)
                    handles.setdefault(name, line)
                    if few.any():
                        fewer = fewer or dots
                for ys in ends:
                    at = np.flatnonzero(np.isfinite(ys))
                    if len(at):
                        ax.plot([xs[at[-1]]], [ys[at[-1]]], "x", color=color, ms=6, mew=1.5)
                        # one grey entry: in the first curve's colour it read as that curve's
                        from matplotlib.lines import Line2D

                        handles.setdefault(DIVERGED_HERE, Line2D(
                            [], [], marker="x", color="0.35", ms=6, mew=1.5, ls="none"))
            if cfg.hue:  # the paper's value of this curve's cell, in the curve's colour
                for _m, v in dict.fromkeys(_paper_lines(ctx, cfg, part)):
                    ax.axhline(v, color=cmap(k % n_colors), ls=(0, (1, 2)), lw=1.2)
                    papers.append(v)
                    hue_paper = True
        for m, v in ([] if cfg.hue else _paper_lines(ctx, cfg, sub)):
            line = ax.axhline(v, color=cmap(series.index(m) % n_colors), ls=(0, (4, 3)), lw=1.0)
            papers.append(v)
            handles.setdefault(f"paper {cfg.labels.get(m, m)}", line)
        title = ", ".join(t for t in (_fmt(cfg.row, rv, cfg.names),
                                      _fmt(cfg.col, cv, cfg.names)) if t)
        if title:
            ax.set_title(title, fontsize=8)
        # a log axis only over positive values (a panel of accuracies 0 was drawn empty on a
        # log axis); panels sharing y (a ylim) decide together
        shown = drawn if ylim is not None else sub[series].to_numpy(float)
        shown = np.exp(shown) if cfg.transform == "exp" and ylim is None else shown
        log_y = cfg.logy and bool((shown > 0).any())
        if ylim is not None and not log_y:
            ax.set_ylim(*ylim)
        if log_y:
            ax.set_yscale("log")  # a point at or below 0 has no place there: counted, said
            off_log += sum(int((np.asarray(ys, float) <= 0).sum()) for ys in points)
            off_paper += sum(1 for v in papers if v <= 0)
        if log_x:
            ax.set_xscale("log")
            plain_log_x(ax)
        ax.tick_params(which="both", labelsize=7)
        ax.grid(alpha=0.25)
        if i == n_r - 1 or (i + 1) * n_c + j >= len(place):  # nothing drawn below it
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("training step" if cfg.x == STEP else "training samples", fontsize=8)
        if j == 0:
            ax.set_ylabel(cfg.ylabel or ", ".join(dict.fromkeys(
                m.rsplit(".", 1)[-1] for m in series)), fontsize=8)
    if hue_paper:  # one grey entry after the curves: drawn in the first curve's colour and
        # listed under it, it read as that curve's paper value alone (huang2025-tabA1-A4)
        from matplotlib.lines import Line2D

        handles["paper (dotted, the curve's colour)"] = Line2D([], [], color="0.35",
                                                               ls=(0, (1, 2)), lw=1.2)
    if fewer is not None:
        handles[FEWER_SEEDS] = fewer
    if off_log:  # (a loss of exactly 0, an accuracy of 0: the curve ended there, no word)
        from matplotlib.lines import Line2D

        handles[f"{off_log} point(s) at or below 0: off the log y axis"] = Line2D([], [], ls="none")
    if off_paper:
        from matplotlib.lines import Line2D

        handles[f"{off_paper} paper value(s) at or below 0: off the log y axis"] = Line2D(
            [], [], ls="none")
    if off_log_x:  # (every curve's first evaluation, at step 0, was left out without a word)
        from matplotlib.lines import Line2D

        at = "step 0" if cfg.x == STEP else "0 samples"
        handles[f"{off_log_x} point(s) at {at}: off the log x axis"] = Line2D([], [], ls="none")
    # the seeds of each curve (the distinct seeds of the whole table called a curve of 2 seeds,
    # beside curves of 3, 'mean of 3 seeds')
    per = df.groupby(["_row", "_col", "_hue"])[SEED].nunique() if SEED in df else pd.Series([1])
    lo, hi = int(per.min()), int(per.max())
    n_seeds = f"{hi}" if lo == hi else f"{lo}–{hi}"
    how = (f"mean of {n_seeds} seeds (band: min–max)" if cfg.seeds == "mean" and hi > 1
           else f"best of {n_seeds} seeds" if cfg.seeds == "best" and hi > 1
           else f"{n_seeds} seeds, one line each" if hi > 1 else "one seed")
    fig_w, fig_h = fig.get_size_inches()
    # wrapped to the figure's width (a one-column grid is narrow): ~0.55 em per character at 9 pt
    # said once: a title's {seeds} (or its own words, where seeds_said draws them) drawn as
    # `how` says (huang2025-fig2 read '(best of seeds) [...] — best of 3 seeds')
    words, _, band = how.partition(" (")
    head = cfg.title or ctx.spec.title
    if has_seeds_placeholder(head) or seeds_said(head, words)[0] != head:
        title = ctx.title(cfg, seeds=words) + (f" — {band.rstrip(')')}" if band else "")
    else:
        title = f"{ctx.title(cfg)} — {how}"
    head = textwrap.fill(title, width=max(30, int(fig_w * 72 / (9 * 0.55))))
    fig.suptitle(head, fontsize=9)
    # as many legend columns as the figure's width holds (~0.5 em per character at 7 pt); a
    # legend of more than 6 columns' worth of 4 rows takes what the width holds
    entry = max((len(k) for k in handles), default=1) * 7 * 0.5 / 72 + 0.45  # inches per entry
    cap = 6 if len(handles) <= 24 else len(handles)
    ncol = max(1, min(cap, len(handles), int(fig_w // entry)))
    n_rows = math.ceil(len(handles) / ncol) if handles else 0
    legend = fig.legend(list(handles.values()), list(handles.keys()), loc="lower center",
                        ncol=ncol, fontsize=7, frameon=False)
    legend_in = 0.05 + 0.14 * n_rows
    if n_rows > 4:  # the figure grows below the panels for its legend (within the image
        # limits), not over them: 70 entries covered the panels and were cut off at the foot
        legend_in = 0.1 + legend.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi
        dpi = 120
        most = min(MAX_SIDE / dpi, MAX_PIXELS / (dpi * dpi * fig_w))
        fig_h = max(fig_h, min(most, fig_h + legend_in - LEGEND_ROOM))
        fig.set_size_inches(fig_w, fig_h)
    # the panels from below the title down to the legend: tight_layout makes room for the
    # suptitle itself (a rect that also left the title's height out of it counted it twice: a
    # one-panel figure lost a third of its height to a gap under the title)
    tight_layout(fig, rect=(0, legend_in / fig_h, 1, 1))
    save_png(fig, path, dpi=120)
    return True


__all__ = ["CURVES", "CurvesConfig", "curves"]
