"""Stage 6 (plots): the ``bound_grid`` figure kind — accuracy grids with theory lines (huang2025
Figs. 2, 3, A.2-A.4).

One panel per value of ``col`` (and row per value of ``row``): cells on an x × y grid (e.g. κ × d),
coloured by the metric and annotated with its value; a cell at or above ``solved`` gets a white
frame. ``halves: [A, B]`` instead draws each cell split in two (Fig. 3's "filled vs outlined"
pairs), A as the upper-left, B as the lower-right triangle, with both values written. Theory lines
come from ``bounds``: per label (or ``"*"`` for every panel) a list of expressions (``expr``, over
the cell columns) of the y value as a function of the x column (``axis: y``), or of a constant x
(``axis: x``, a vertical line), each drawn black and named in the legend (``text``, e.g. "Thm 2,
constant 1: d = κ + log₂|V|").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Polygon, Rectangle  # noqa: E402
from pydantic import ConfigDict, Field, model_validator  # noqa: E402

from .. import expr  # noqa: E402
from ..report.cells import cell_env, column, fmt_beside  # noqa: E402
from ..report.checks import OPS  # noqa: E402
from ..report.columns import LABEL  # noqa: E402
from ..util import DrawnText, NoBoolNumbers  # noqa: E402
from .registry import (  # noqa: E402
    FigureConfig,
    FigureContext,
    figure_kind,
    save_png,
    subplots,
    wrap_text,
)


class Bound(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)
    expr: str = Field(..., description="value of the line, an expression over cell columns")
    axis: Literal["y", "x"] = Field("y", description="y: y = expr(x, ...); x: vertical x = expr")
    text: DrawnText = Field(..., description="legend text, e.g. 'Thm 2 (constant 1): d = κ + log₂|V|'")
    style: str = "-"

    @model_validator(mode="after")
    def _parse(self) -> Bound:
        expr.check(self.expr)
        return self


# theory lines of one label (or of '*', every panel; the shipped figures draw at most 3): each is
# evaluated at every cell by `validate` and drawn with a legend entry in its panels, and 3,000 of
# them took 10 s of `validate`, then a `plot` refused for a legend 66,742 pixels tall
MAX_BOUNDS = 20
# labels given theory lines: each is evaluated at every cell before its label is looked up, and
# 3,000 unknown labels took 23 s of `validate`
MAX_BOUND_LABELS = 100


class BoundGridConfig(FigureConfig):
    kind: Literal["bound_grid"]
    x: str = Field(..., description="numeric column of each panel's x axis (a cell per value)")
    y: str = Field(..., description="numeric column of the y axis (a cell per value)")
    col: str = Field(LABEL, description="column with a column of panels per value")
    row: str | None = Field(None, description="column with a row of panels per value (null: one "
                            "row)")
    halves: list[str] | None = Field(None, min_length=2, max_length=2,
                                     description="two labels drawn as the halves of each cell")
    bounds: dict[str, Annotated[list[Bound], Field(max_length=MAX_BOUNDS)]] = Field(
        {}, max_length=MAX_BOUND_LABELS, description="label (or '*': every panel) -> theory "
        "lines, each {expr: over the cell columns, axis: y (y = expr of x) or x (a vertical line "
        "x = expr), text: its legend entry, style: matplotlib's line style, default '-'}")
    solved: float = Field(0.99, description="cells at or above get a frame")
    log_x: bool = Field(False, description="x values log-spaced: theory lines placed between "
                        "cells on a log scale (x must be positive)")
    log_y: bool = Field(True, description="y values log-spaced, as log_x (theory values <= 0 "
                        "not drawn)")
    x_name: DrawnText | None = Field(None, description="x axis label and symbol in notes "
                                     "(default: the column)")
    y_name: DrawnText | None = Field(None, description="y axis label and symbol in notes "
                                     "(default: the column)")

    def levels(self) -> list[tuple[str, str, float]]:
        return [("solved", self.metric, self.solved)]

    def column_refs(self) -> list[str]:
        refs = [self.x, self.y, self.col] + ([self.row] if self.row else [])
        for lines in self.bounds.values():
            for b in lines:
                refs += sorted(expr.names(b.expr))
        return refs

    @model_validator(mode="after")
    def _two_halves(self) -> BoundGridConfig:
        if self.halves and self.halves[0] == self.halves[1]:
            raise ValueError(f"halves: two different labels, not {self.halves}")
        return self

    def numeric_refs(self) -> list[str]:
        return [self.x, self.y]

    def log_refs(self) -> list[str]:
        return [c for c, log in ((self.x, self.log_x), (self.y, self.log_y)) if log]

    def panel_refs(self) -> list[str]:
        return [self.col] + ([self.row] if self.row else [])

    def cell_exprs(self) -> list[tuple[str, str]]:
        return [(f"bounds.{k}.{i}.expr", b.expr) for k, lines in self.bounds.items()
                for i, b in enumerate(lines)]

    def value_refs(self) -> list[tuple[str, str, Any]]:
        return ([(f"halves.{i}", LABEL, h) for i, h in enumerate(self.halves or [])]
                + [(f"bounds.{k}", LABEL, k) for k in self.bounds if k != "*"])

    def positions(self) -> list[str] | None:
        # halves: a cell's label minus its half label is the panel, the half its triangle
        return ([LABEL] if self.halves else [self.col]) + ([self.row] if self.row else []) + [
            self.x, self.y]


def _pos(vals: list[float], v: float, log: bool) -> float:
    """Axis coordinate of value v on a grid drawn at equal spacing (index), interpolated
    (linearly, or in log space) between grid values, extrapolated at the ends."""
    xs = np.log(vals) if log else np.asarray(vals, dtype=float)
    t = math.log(v) if log else v
    if len(xs) == 1:  # the one cell spans _edge_values' range (every value was drawn through
        # its centre: huang2025-figA3's d = κ + log₂|V| = 13 on its one row, d = 32)
        return (t - xs[0]) / (2 * math.log(1.5)) if log else t - xs[0]
    i = int(np.clip(np.searchsorted(xs, t) - 1, 0, len(xs) - 2))
    return i + (t - xs[i]) / (xs[i + 1] - xs[i])


def _fmt(v: float, solved: float | None = None) -> str:
    """Two decimals; three in [0.95, 0.9995) (0.988 must not read as 0.99, 0.997 not as 1.00);
    with the digits that keep it on its side of ``solved``, the frame's threshold (0.9896
    under `solved: 0.99` read 0.990 in a cell without a frame, 0.9496 under 0.95 read 0.95)."""
    if math.isnan(v):
        return "—"
    text = f"{v:.3f}" if 0.95 <= v < 0.9995 else f"{v:.2f}"
    return text if solved is None else fmt_beside(v, solved, text)


def _edge_values(vals: list[float], log: bool) -> tuple[float, float]:
    """Values at the outer cell edges (half a grid step beyond the first and last value)."""
    if len(vals) == 1:
        return (vals[0] / 1.5, vals[0] * 1.5) if log else (vals[0] - 0.5, vals[0] + 0.5)
    if log:
        return (vals[0] * math.sqrt(vals[0] / vals[1]), vals[-1] * math.sqrt(vals[-1] / vals[-2]))
    return vals[0] - (vals[1] - vals[0]) / 2, vals[-1] + (vals[-1] - vals[-2]) / 2


def _value(text: str, env: dict) -> float:
    """A theory line's value, NaN where it has none (a division by zero, a logarithm of 0
    between grid values; every cell's own values were checked by validation)."""
    try:
        v = float(expr.evaluate(text, env))
    except (expr.ExprError, TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def _ink(v: float) -> str:
    """A cell's text colour: black on a light cell and on the grey of one without a value (its
    '—' was white on that grey, unreadable), white on a dark one."""
    return "k" if math.isnan(v) or v > 0.6 else "w"


def _symbol(name: str | None, column: str) -> str:
    """An axis's short name: the first word of its name ('d' of 'd (embedding size)'), or the
    column's last part ('d_model')."""
    return name.split()[0] if name and name.split() else column.split(".")[-1]


def _lines_for(cfg: BoundGridConfig, panel: str) -> list[Bound]:
    out = list(cfg.bounds.get("*", []))
    for key, lines in cfg.bounds.items():
        if key != "*" and (key == panel or key in panel.split(" / ")):
            out += lines
    return out


@figure_kind("bound_grid", BoundGridConfig)
def bound_grid(ctx: FigureContext, cfg: BoundGridConfig, path: Path) -> bool:
    """x × y accuracy grids, a panel per (row, col), with the theory lines of ``bounds``."""
    t = ctx.table
    if t.empty or cfg.x not in t or cfg.y not in t:
        return False
    metric = cfg.metric
    t = t.assign(_col=column(t, cfg.col).astype(str),
                 _row=column(t, cfg.row).astype(str) if cfg.row else "")
    if cfg.halves:  # panels by the label without the two half labels
        def strip(s: str) -> str:
            return " / ".join(p for p in str(s).split(" / ") if p not in cfg.halves)
        t = t.assign(_col=t[LABEL].map(strip))
    cols = list(dict.fromkeys(t["_col"]))
    rows = list(dict.fromkeys(t["_row"]))
    xs = sorted(float(v) for v in t[cfg.x].unique())
    ys = sorted(float(v) for v in t[cfg.y].unique())
    nc, nr = len(cols), len(rows)
    n_lines = len({b.text for lines in cfg.bounds.values() for b in lines})
    # panels at least 1.6 in tall (a single d row must stay visible); room for the legend lines
    fig, axes = subplots(path, 130, nr, nc, figsize=(max(6.5, 3.3 + 0.42 * len(xs) * nc + 0.5 * nc),
                                                  1.2 + max(1.6, 0.38 * len(ys)) * nr + 0.6 * nr
                                                  + 0.17 * n_lines),
                         squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    n_none = 0  # cells without a value (every seed diverged): grey, said under the colour bar
    for i, rv in enumerate(rows):
        for j, cv in enumerate(cols):
            ax = axes[i, j]
            sub = t[(t["_row"] == rv) & (t["_col"] == cv)]
            for _, r in sub.iterrows():
                xi, yi = xs.index(float(r[cfg.x])), ys.index(float(r[cfg.y]))
                v = float(r[metric]) if not pd.isna(r[metric]) else math.nan
                half = None
                if cfg.halves:
                    labs = str(r[LABEL]).split(" / ")
                    half = 0 if cfg.halves[0] in labs else 1 if cfg.halves[1] in labs else None
                color = cmap(v) if not math.isnan(v) else (0.85, 0.85, 0.85, 1)
                n_none += math.isnan(v)
                if half is None:
                    ax.add_patch(Rectangle((xi - 0.5, yi - 0.5), 1, 1, color=color))
                    # on the threshold but for rounding is on it, as a claim's bound
                    frame = not math.isnan(v) and OPS[">="](v, cfg.solved)
                    if frame:
                        ax.add_patch(Rectangle((xi - 0.46, yi - 0.46), 0.92, 0.92, fill=False,
                                               ec="w", lw=1.4))
                    ax.text(xi, yi, _fmt(v, cfg.solved), ha="center",
                            va="center", fontsize=6.5, color=_ink(v))
                else:
                    tri = ([(xi - 0.5, yi - 0.5), (xi - 0.5, yi + 0.5), (xi + 0.5, yi + 0.5)]
                           if half == 0 else
                           [(xi - 0.5, yi - 0.5), (xi + 0.5, yi - 0.5), (xi + 0.5, yi + 0.5)])
                    ax.add_patch(Polygon(tri, closed=True, color=color))
                    if not math.isnan(v) and OPS[">="](v, cfg.solved):
                        ax.add_patch(Polygon(tri, closed=True, fill=False, ec="w", lw=1.2))
                    dx, dy = (-0.22, 0.2) if half == 0 else (0.22, -0.2)
                    ax.text(xi + dx, yi + dy, _fmt(v, cfg.solved),
                            ha="center", va="center", fontsize=5.5, color=_ink(v))
            ref = sub.iloc[0] if len(sub) else t.iloc[0]
            panel_labels = set(str(s) for s in sub[LABEL]) if len(sub) else set()
            lines = []
            for lab in panel_labels | {cv}:
                lines += [b for b in _lines_for(cfg, lab) if b not in lines]
            off: list[str] = []  # lines wholly outside this panel's grid
            for b in lines:
                env = cell_env(ref)
                if b.axis == "y":
                    lo, hi = _edge_values(xs, cfg.log_x)
                    fine = np.geomspace(lo, hi, 200) if cfg.log_x else np.linspace(lo, hi, 200)
                    px, py, vals = [], [], []
                    for xv in fine:
                        yv = _value(b.expr, {**env, cfg.x: float(xv)})
                        if not math.isnan(yv) and (yv > 0 or not cfg.log_y):
                            px.append(_pos(xs, float(xv), cfg.log_x))
                            py.append(_pos(ys, yv, cfg.log_y))
                            vals.append(yv)
                    ax.plot(px, py, color="k", ls=b.style, lw=1.6, label=b.text)
                    # a line above or below every row (huang2025-fig2's Thm 4 line at d = 32
                    # over a smoke grid of d 8, 16) was in the legend and nowhere in the panel
                    if py and (min(py) > len(ys) - 0.5 or max(py) < -0.5):
                        side = "above" if min(py) > len(ys) - 0.5 else "below"
                        at = [v for x in xs if not math.isnan(
                            v := _value(b.expr, {**env, cfg.x: x}))] or vals
                        near = min(at) if side == "above" else max(at)
                        off.append(f"{b.text}: {side} the grid ({_symbol(cfg.y_name, cfg.y)} "
                                   f"{'≥' if side == 'above' else '≤'} {near:.3g})")
                else:
                    xv = _value(b.expr, env)
                    if not math.isnan(xv) and (xv > 0 or not cfg.log_x):
                        at = _pos(xs, xv, cfg.log_x)
                        ax.axvline(at, color="k", ls=b.style, lw=1.6, label=b.text)
                        if not -0.5 <= at <= len(xs) - 0.5:
                            off.append(f"{b.text}: {'right' if at > 0 else 'left'} of the grid "
                                       f"({_symbol(cfg.x_name, cfg.x)} = {xv:.3g})")
            if off:  # named in the panel (the legend lists every line of every panel)
                width = fig.get_figwidth() / max(1, nc) * 0.8
                ax.text(0.5, 0.99, "\n".join(wrap_text(t, width, 5.5) for t in off),
                        transform=ax.transAxes, ha="center",
                        va="top", fontsize=5.5, color="k",
                        bbox={"fc": "w", "ec": "none", "alpha": 0.8, "pad": 1})
            ax.set_xlim(-0.5, len(xs) - 0.5)
            ax.set_ylim(-0.5, len(ys) - 0.5)
            ax.set_xticks(range(len(xs)), [f"{v:g}" for v in xs], fontsize=7)
            ax.set_yticks(range(len(ys)), [f"{v:g}" for v in ys], fontsize=7)
            title = cv if not cfg.row else f"{cv}\n{cfg.row.split('.')[-1]} = {rv}"
            if cfg.halves and not title:
                title = f"upper left: {cfg.halves[0]}, lower right: {cfg.halves[1]}"
            ax.set_title(title, fontsize=8)
            if i == nr - 1:
                ax.set_xlabel(cfg.x_name or cfg.x, fontsize=8)
            if j == 0:
                ax.set_ylabel(cfg.y_name or cfg.y, fontsize=8)
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   fontsize=7, ncol=1, frameon=False)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    fig.colorbar(sm, ax=axes.ravel().tolist(), shrink=0.8,
                 label=f"{metric}, {ctx.aggregation(metric)}\nwhite frame: ≥ {cfg.solved:g}"
                 + (f"\ngrey —: {n_none} without a value\n(diverged or not measured)"
                    if n_none else ""))
    head = ctx.fitted_title(cfg, fig.get_figwidth(), 9)
    if cfg.halves and any(c for c in cols):  # panel titles carry the rest; the halves once here
        head = f"{head}\nupper left: {cfg.halves[0]}, lower right: {cfg.halves[1]}"
    fig.suptitle(head, fontsize=9)
    save_png(fig, path, dpi=130)
    return True


__all__ = ["Bound", "BoundGridConfig", "bound_grid"]
