"""Stage 6 (plots): curves with percentile bands over seeds (cooper2026's figure forms).

``bands``: ``metric`` against a column (default ``n_params``, log x for "accuracy vs parameter
count"), one line per ``hue`` (an architecture), the band between two percentile columns of the
aggregation (``aggregate.percentiles``, e.g. ``<metric>.p10`` / ``<metric>.p90``), the paper's
values as hollow markers at the matching cells, and ``reference`` lines: hues drawn as a dashed
horizontal line at their mean (cooper2026 Figs. 12 and 14 draw the pure SSM, which has no
attention window or heads, that way).

``length_curves``: the accuracy on named evaluation sets of different lengths (``train.evals``)
against the evaluation length, one line per ``hue``, the band between two percentile columns of
each set's metric, and the training length range shaded (cooper2026 Fig. 8).
"""

from __future__ import annotations

import math
import string
import textwrap
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from ..report.cells import column, select  # noqa: E402
from ..report.columns import N_DIVERGED, N_PARAMS  # noqa: E402
from ..util import DrawnText, encode_cell  # noqa: E402
from .registry import (  # noqa: E402
    HUE_HELP,
    MAX_REFERENCES,
    SAME_STYLE,
    YLIM_HELP,
    Distinct,
    FigureConfig,
    FigureContext,
    YLim,
    figure_kind,
    gap_note,
    plain_log_x,
    resolve_ylim,
    same_lines,
    same_note,
    save_png,
    subplots,
    tight_layout,
    unread_metric,
)

COLORS = {"TF-TF": "tab:blue", "SSM-SSM": "tab:red", "TF-SSM": "tab:orange",
          "SSM-TF": "tab:green",
          # Fig. 8's legend (mini/): hybrid green, T_rope blue, mamba red
          "hybrid": "tab:green", "T_rope": "tab:blue", "mamba": "tab:red"}


def _colors(hues: list[str]) -> dict[str, str]:
    """Each hue's colour: its own in ``COLORS``, else the i-th of the cycle, or where that is
    taken (by a named hue: 'hybrid' is tab:green, C2; or past 10 hues) the first colour no hue
    has (the third hue of [a, b, c, hybrid] was drawn in hybrid's green, one legend colour for
    two lines)."""
    from matplotlib.colors import to_hex

    palette = [f"C{k}" for k in range(10)] + list(plt.get_cmap("tab20").colors[1::2])
    used = {to_hex(COLORS[h]) for h in hues if h in COLORS}
    out = {}
    for i, hue in enumerate(hues):
        if hue in COLORS:
            out[hue] = COLORS[hue]
            continue
        color = f"C{i % 10}"
        if to_hex(color) in used:
            color = next((c for c in palette if to_hex(c) not in used), color)
        used.add(to_hex(color))
        out[hue] = color
    return out


def _wrap(title: str, width: int) -> str:
    """A long title (ours plus the '[id, profile]' tag) on several lines, never cut at the edge."""
    return "\n".join(textwrap.wrap(title, width)) or title


def _band_label(lo: str | None, hi: str | None) -> str:
    if not lo or not hi:
        return ""
    names = {"p0": "min", "p100": "max"}
    return f"band {names.get(lo, lo)}–{names.get(hi, hi)} over seeds"


class BandsConfig(FigureConfig):
    kind: Literal["bands"]
    x: str = Field(N_PARAMS, description="column on the x axis (default: parameter count)")
    hue: str = Field("case:0", description=HUE_HELP)
    facet: str | None = Field(None, description="column with a panel per value (null: one panel)")
    lo: str | None = Field("p10", description="suffix of the band's lower column (metric.<lo>)")
    hi: str | None = Field("p90", description="suffix of the band's upper column")
    logx: bool = Field(True, description="log x axis (a named x must be numeric and positive)")
    reference: Distinct = Field([], max_length=MAX_REFERENCES,
                                description="hues drawn as a dashed horizontal line")
    ylim: YLim = Field("auto", description=YLIM_HELP)
    xlabel: DrawnText | None = Field(
        None, description="x axis label (default: x's last dotted part; parameters for n_params)")
    where: dict[str, Any] = Field({}, description="draw only the cells matching these conditions "
                                  "(e.g. one panel of a figure whose panels have different x)")

    def column_refs(self) -> list[str]:
        return [c for c in (self.x, self.hue, self.facet, *self.where) if c and c != N_PARAMS]

    def metrics(self) -> list[str]:  # the band's columns too: without them no band was drawn
        return [self.metric] + [f"{self.metric}.{b}" for b in (self.lo, self.hi) if b]

    def numeric_refs(self) -> list[str]:
        return [self.x] if self.x != N_PARAMS else []

    def log_refs(self) -> list[str]:
        return [self.x] if self.x != N_PARAMS and self.logx else []

    def positions(self) -> list[str] | None:  # n_params too (counted before training): two
        # cells of one hue at one size (widths alike, another key swept) were one point's place
        return [c for c in (self.facet, self.hue, self.x) if c]

    def cell_filter(self) -> dict[str, Any]:
        return self.where

    def panel_refs(self) -> list[str]:
        return [self.facet] if self.facet else []

    def value_refs(self) -> list[tuple[str, str, Any]]:
        return [(f"reference.{i}", self.hue, r) for i, r in enumerate(self.reference)]


@figure_kind("bands", BandsConfig)
def bands(ctx: FigureContext, cfg: BandsConfig, path: Path) -> bool:
    """Metric vs x, a line per hue with a percentile band, paper values as hollow markers."""
    agg = select(ctx.table, cfg.where) if cfg.where else ctx.table
    if agg.empty or cfg.x not in agg:
        return False
    m = cfg.metric
    agg = agg.assign(_hue=column(agg, cfg.hue).map(encode_cell).astype(str),
                     _facet=column(agg, cfg.facet).map(encode_cell).astype(str) if cfg.facet
                     else "")
    facets = list(dict.fromkeys(agg["_facet"]))
    fig, axes = subplots(path, 130, 1, len(facets), figsize=(5.4 * len(facets), 4.0), squeeze=False)
    hues = list(dict.fromkeys(agg["_hue"]))
    colors = _colors(hues)
    lo, hi = (f"{m}.{cfg.lo}" if cfg.lo else None), (f"{m}.{cfg.hi}" if cfg.hi else None)
    # every value drawn sets the y range, the paper's hollow squares too (from the cells' alone,
    # a paper value above losses below 1 was drawn off the accuracy range without a word)
    plotted = agg[~agg["_hue"].isin(cfg.reference)]
    drawn = [*(agg[c].astype(float) for c in (m, lo, hi) if c in agg),
             [v for _, r in plotted.iterrows() if (v := ctx.paper_value(r.to_dict(), m))
              is not None]]
    ylim = resolve_ylim(cfg.ylim, np.concatenate(drawn), m)
    for ax, facet in zip(axes[0], facets):
        sub = agg[agg["_facet"] == facet]
        marked = False
        # a hue whose line is another's drawn over it hid it (the legend listed both)
        by_hue = {hue: sub[sub["_hue"] == hue].sort_values(cfg.x) for hue in hues}
        same = same_lines({hue: (h[cfg.x].astype(float), h[m]) for hue, h in by_hue.items()
                           if hue not in cfg.reference and not h.empty})
        for hue, h in by_hue.items():
            if h.empty:
                continue
            color = colors[hue]
            if hue in cfg.reference:  # the mean of its cells; none where one has no value
                # (a diverged cell: the others' mean was drawn as the hue's, with no sign of it)
                y = _cells_mean(h, m)
                gap = int(h[m].astype(float).isna().sum())
                note = f"; {gap} of {len(h)} cells without a value: not drawn" if gap else ""
                ax.axhline(y, ls="--", color=color, label=f"{hue} (reference{note})")
                if lo in h and hi in h and not gap:
                    ax.axhspan(_cells_mean(h, lo), _cells_mean(h, hi), color=color, alpha=0.08)
                continue
            xs = h[cfg.x].astype(float).to_numpy()
            # a cell without a value (diverged) is a gap, said in the legend as the lines kind
            # says it (a hue whose every cell diverged was an entry with nothing drawn)
            ax.plot(xs, h[m].astype(float), marker="o", color=color,
                    label=f"{hue}{gap_note(h[m])}{same_note(same.get(hue))}",
                    **(SAME_STYLE if hue in same else {}))
            if lo in h and hi in h and h[lo].notna().any():
                ax.fill_between(xs, h[lo].astype(float), h[hi].astype(float), color=color,
                                alpha=0.18, lw=0)
            for (_, row), xv in zip(h.iterrows(), xs):
                pv = ctx.paper_value(row.to_dict(), m)
                if pv is not None:
                    ax.plot([xv], [pv], marker="s", mfc="none", mec=color, ms=9, mew=1.6,
                            ls="none")
                    marked = True
        if marked:  # one grey entry after the hues, as the lines kind's paper ×: the entry in
            # the first hue's colour, listed under it, read as that hue's paper values alone
            ax.plot([], [], marker="s", mfc="none", mec="0.35", ms=9, mew=1.6, ls="none",
                    label="paper (hollow squares, the line's colour)")
        if cfg.logx:
            ax.set_xscale("log")
            plain_log_x(ax)
        else:  # a count (heads, state dimension) at its values, as the lines kind draws it:
            # matplotlib's ticks put cooper2026-fig12's heads 1, 2, 4 among 1.5, 2.5, 3.5
            xs = sorted({float(v) for v in sub.loc[~sub["_hue"].isin(cfg.reference), cfg.x]
                         if pd.notna(v)})
            if xs and len(xs) <= 12 and all(v.is_integer() for v in xs):
                ax.set_xticks(xs, [f"{v:g}" for v in xs])
        if ylim is not None:
            ax.set_ylim(*ylim)
        xlabel = cfg.xlabel or ("parameters" if cfg.x == N_PARAMS else cfg.x.split(".")[-1])
        ax.set_xlabel(xlabel)
        band = _band_label(cfg.lo, cfg.hi)
        ax.set_ylabel(f"{m} ({ctx.aggregation(m)}{'; ' + band if band else ''})", fontsize=8)
        if facet:
            name = cfg.facet.split(".")[-1] if not cfg.facet.startswith("case:") else ""
            ax.set_title(f"{name} = {facet}" if name else facet, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(_wrap(ctx.title(cfg), 60 * len(facets)), fontsize=10)
    tight_layout(fig)
    save_png(fig, path, dpi=130)
    return True


# ----------------------------------------------------------------------------------------------


class LengthCurvesConfig(FigureConfig):
    kind: Literal["length_curves"]
    metric: str = unread_metric("pattern's metric of each length")
    lengths: list[int] = Field(..., min_length=2, description="evaluation lengths (x values)")
    pattern: str = Field("L{L}.acc", description="metric of each length, e.g. 'L{L}.acc'")
    hue: str = Field("case:0", description=HUE_HELP)
    lo: str | None = Field("p0", description="suffix of the band's lower column "
                           "(<metric of a length>.<lo>; null: no band)")
    hi: str | None = Field("p100", description="suffix of the band's upper column")
    train_range: tuple[float, float] | None = Field(None, description="training lengths, shaded")
    ylim: YLim = Field("auto", description=YLIM_HELP)

    @model_validator(mode="after")
    def _pattern(self) -> LengthCurvesConfig:
        try:
            fields = [(name, spec, conv) for _, name, spec, conv in
                      string.Formatter().parse(self.pattern) if name is not None]
        except ValueError as err:  # an unmatched brace
            raise ValueError(f"pattern {self.pattern!r}: {err}") from None
        if not fields or any(f != ("L", "", None) for f in fields):
            # '{x}' or '{0}' raised KeyError / IndexError in validate; '{L:>99999999}' built a
            # string of 100 MB per length
            raise ValueError(f"pattern {self.pattern!r} must contain {{L}} and no other "
                             "replacement field or format (e.g. 'L{L}.acc')")
        if self.train_range is not None and not self.train_range[0] <= self.train_range[1]:
            raise ValueError(f"train_range: the shorter length first, not {list(self.train_range)}")
        twice = sorted({L for L in self.lengths if self.lengths.count(L) > 1})
        if twice:  # [8, 8] passed the two-length minimum and drew one point, not a curve
            raise ValueError(f"lengths: {twice[0]} is given twice (each evaluation length once)")
        return self

    def metrics(self) -> list[str]:
        names = [self.pattern.format(L=L) for L in self.lengths]
        return names + [f"{n}.{b}" for n in names for b in (self.lo, self.hi) if b]

    def column_refs(self) -> list[str]:
        return [self.hue]

    def run_problems(self, runs: list) -> list[str]:
        """Each length's evaluation set (the set its metric names, ``train.evals``) holds
        sequences of that length: the x of a point is read from the metric's name, so
        ``L20: {L: 25}`` drew the accuracy at length 25 at 20, and a set whose lengths vary
        (``L_min`` kept from the task) one of lengths L_min..L at L."""
        from ..tasks import build_task

        out: list[str] = []
        seen: dict[str, int | None] = {}  # a set's config -> its length (runs share sets)
        for L in self.lengths:
            name = self.pattern.format(L=L).rsplit(".", 1)[0]
            for r in runs:
                ov = r.train.evals.get(name)
                if ov is None:  # a set the runs lack: refused elsewhere
                    continue
                cfg = {**r.task.model_dump(), **ov}
                key = repr(sorted(cfg.items()))
                if key not in seen:
                    try:
                        seen[key] = build_task(cfg).info.seq_len
                    except Exception:  # noqa: BLE001 (data not here, a bad set: elsewhere)
                        seen[key] = None
                got = seen[key]
                if got is None:
                    continue
                varies = cfg.get("L_min") not in (None, got)
                if got != L or varies:
                    what = (f"lengths {cfg['L_min']}..{got}" if varies else f"length {got}")
                    out.append(f"lengths: {L} draws {self.pattern.format(L=L)} at length {L}, "
                               f"but train.evals.{name} of run {r.label or r.run_id} has "
                               f"sequences of {what}; make the set's length {L}"
                               + (" (L_min: null)" if varies else ""))
                    break
        if self.train_range is not None:  # the shaded training lengths are the runs' own
            tasks: set[str] = set()  # each task once (a sweep's runs share a few)
            for r in runs:
                cfg = r.task.model_dump()
                if (key := repr(sorted(cfg.items()))) in tasks:
                    continue
                tasks.add(key)
                try:
                    hi = build_task(cfg).info.seq_len
                except Exception:  # noqa: BLE001 (data not here: reported elsewhere)
                    continue
                lo = cfg.get("L_min") or hi
                if (lo, hi) != tuple(self.train_range):
                    a, b = self.train_range
                    what = f"lengths {lo}..{hi}" if lo != hi else f"length {hi}"
                    out.append(f"train_range: [{a:g}, {b:g}] is shaded as the training lengths, "
                               f"but run {r.label or r.run_id} trains on {what}; give "
                               f"train_range: [{lo}, {hi}]")
                    break
        return out


def _cells_mean(h: pd.DataFrame, name: str) -> float:
    """The mean of column ``name`` over the cells ``h``; NaN when a cell has no value (or the
    column is absent)."""
    return float(h[name].astype(float).mean(skipna=False)) if name in h else math.nan


def _length_label(hue: str, h: pd.DataFrame, cfg: LengthCurvesConfig) -> str:
    """The legend entry of a hue's curve: its parameter count (the range when its cells
    differ: the first cell's stood for all), how many cells it averages and how many of them
    diverged or have no value at some length (the gaps in its curve)."""
    parts = []
    n = h[N_PARAMS].dropna().astype(float) if N_PARAMS in h else pd.Series(dtype=float)
    if len(n):
        lo, hi = int(n.min()), int(n.max())
        parts.append(f"{lo:,} params" if lo == hi else f"{lo:,}–{hi:,} params")
    if len(h) > 1:
        parts.append(f"mean of {len(h)} cells")
    names = [cfg.pattern.format(L=L) for L in cfg.lengths]
    cols = [c for c in names if c in h]
    gap = (h[cols].astype(float).isna().any(axis=1) if cols
           else pd.Series(True, index=h.index)) | (len(cols) < len(names))
    if gap.any():
        div = gap & (h[N_DIVERGED].astype(float) > 0) if N_DIVERGED in h else gap & False
        n_div, n_other = int(div.sum()), int((gap & ~div).sum())
        whole = len(h) == 1
        parts += ([("diverged" if whole else f"{n_div} diverged") + ": gaps"] if n_div else []) \
            + ([("no value" if whole else f"{n_other} without a value") + " at some length"]
               if n_other else [])
    return f"{hue} ({'; '.join(parts)})" if parts else hue


@figure_kind("length_curves", LengthCurvesConfig)
def length_curves(ctx: FigureContext, cfg: LengthCurvesConfig, path: Path) -> bool:
    """Accuracy vs evaluation length, a line per hue with its band, the training range shaded."""
    agg = ctx.table
    if agg.empty:
        return False
    agg = agg.assign(_hue=column(agg, cfg.hue).map(encode_cell).astype(str))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if cfg.train_range is not None:
        ax.axvspan(*cfg.train_range, color="0.85", alpha=0.6,
                   label=f"training lengths {cfg.train_range[0]:g}–{cfg.train_range[1]:g}")
    hues = list(dict.fromkeys(agg["_hue"]))
    colors = _colors(hues)
    curves = {}
    for hue in hues:
        h = agg[agg["_hue"] == hue]
        ys, los, his = [], [], []
        # the mean of the hue's cells, NaN where one has none (a diverged cell): a gap, as lines
        # draws a diverged cell (the other cells' mean stood for the hue with no sign of it)
        for L in cfg.lengths:
            name = cfg.pattern.format(L=L)
            ys.append(_cells_mean(h, name))
            los.append(_cells_mean(h, f"{name}.{cfg.lo}"))
            his.append(_cells_mean(h, f"{name}.{cfg.hi}"))
        curves[hue] = (h, ys, los, his)
    # a hue whose curve is another's drawn over it hid it (the legend listed both)
    same = same_lines({hue: (cfg.lengths, c[1]) for hue, c in curves.items()})
    for hue, (h, ys, los, his) in curves.items():
        color = colors[hue]
        ax.plot(cfg.lengths, ys, marker="o", color=color,
                label=_length_label(hue, h, cfg) + same_note(same.get(hue)),
                **(SAME_STYLE if hue in same else {}))
        if not np.isnan(los).all():
            ax.fill_between(cfg.lengths, los, his, color=color, alpha=0.18, lw=0)
    ylim = resolve_ylim(cfg.ylim, [v for L in cfg.lengths for c in (cfg.pattern.format(L=L),)
                                   if c in agg for v in agg[c]],
                        [cfg.pattern.format(L=L) for L in cfg.lengths])
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel("evaluation sequence length")
    band = _band_label(cfg.lo, cfg.hi)
    metric = cfg.pattern.replace("{L}", "<L>")
    ax.set_ylabel(f"{metric} ({ctx.aggregation(metric)}{'; ' + band if band else ''})", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_wrap(ctx.title(cfg), 80), fontsize=9)
    tight_layout(fig)
    save_png(fig, path, dpi=130)
    return True
