"""Stage 6 (plots): the general figure kinds — bars, heatmaps, lines, histograms.

``bars``: one bar per cell, the paper's value as a black marker. ``heatmaps``: a panel per value
of ``col``, cells annotated "ours (paper)". ``lines``: metric against a swept key, one line per
``hue``, one panel per ``facet`` (optionally the paper's values as × in their line's colour and
reference curves of the x key). ``histograms``: huang2025 Fig. 1 decay histograms (from run
records, cached in ``histograms.csv``). Every figure says which profile it shows.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from .. import expr  # noqa: E402
from ..report.analysis import DECAY  # noqa: E402
from ..report.cells import (  # noqa: E402
    column,
    fmt_num,
    is_case_ref,
    value_matches,
    with_case_label,
)
from ..report.columns import DECAY_X, LABEL, N_DIVERGED, N_OK, N_PARAMS  # noqa: E402
from ..store import is_accuracy  # noqa: E402
from ..util import DrawnText, encode_cell, norm  # noqa: E402
from .registry import (  # noqa: E402
    HUE_HELP,
    MAX_REFERENCES,
    SAME_STYLE,
    YLIM_HELP,
    Columns,
    FigureConfig,
    FigureContext,
    YLim,
    figure_kind,
    gap_note,
    list_panels,
    mapped_panel,
    panel_value,
    resolve_ylim,
    same_lines,
    same_note,
    save_png,
    subplots,
    tight_layout,
    unread_metric,
    wrap_text,
)


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
    x: str = Field(LABEL, description="column whose value names each bar (bars of one value also "
                   "name the keys that differ)")

    def column_refs(self) -> list[str]:
        return [self.x]


def _annotation(v: float) -> str:
    """A heatmap cell's (or a bar's) number: 2 decimals, but 2 significant digits where 2
    decimals would read as zero (yu2025-fig4's test MSEs 0.00017 and 0.00095 were both written
    '0.00', an exact recovery, beside B2S6's 0.0044, also '0.00')."""
    if math.isnan(v):
        return "—"
    return f"{v:.2g}" if 0 < abs(v) < 0.005 else f"{v:.2f}"


def _bar_name(v: object, width: int = 16) -> str:
    """A bar's tick label: each ' / '-separated part of the cell label on its own lines."""
    return "\n".join(line for part in str(v).split(" / ")
                     for line in (textwrap.wrap(part, width) or [part]))


def _bar_names(agg: pd.DataFrame, x: str, keys: list[str]) -> list[str]:
    """Each bar's tick label (wrapped: neighbours' labels overlapped): its value of ``x``, and
    where several cells share that value the cell keys that tell them apart (two cases labelled
    alike, or an ``x`` the cells share, were bars of one name)."""
    xs = list(column(agg, x))
    # a number as the cell keys print it (8, not 8.0); a key the cell lacks (a Transformer's
    # d_state) names the cell by its label (the bar was named 'nan')
    names = [_bar_name(f"{agg[LABEL].iloc[i]} (no {x.split('.')[-1]})"
                       if isinstance(v, float) and math.isnan(v) and LABEL in agg
                       else int(v) if isinstance(v, float) and v.is_integer() else v)
             for i, v in enumerate(xs)]
    same: dict[Any, list[int]] = {}
    for i, v in enumerate(xs):
        same.setdefault(norm(v), []).append(i)
    for rows in same.values():
        if len(rows) < 2:
            continue
        sub = agg.iloc[rows]
        differ = [k for k in keys if k != x and k in sub
                  and len({norm(v) for v in sub[k]}) > 1]
        for i in rows:  # one line per key (a comma-joined pair was wrapped mid-value)
            names[i] += "".join("\n" + _bar_name(_cell_name(agg.iloc[i], [k])) for k in differ
                                if _cell_name(agg.iloc[i], [k]))
    return names


@figure_kind("bars", BarsConfig)
def bars(ctx: FigureContext, cfg: BarsConfig, path: Path) -> bool:
    """One bar per cell (± std over seeds, with reduce mean), the paper's value as a black
    marker."""
    agg = ctx.table
    if agg.empty:
        return False
    metric = cfg.metric
    fig, ax = subplots(path, 130, figsize=(max(5, 1.3 * len(agg)), 4))
    names = _bar_names(agg, cfg.x, ctx.keys)
    vals = agg[metric].to_numpy(dtype=float)
    err = agg.get(f"{metric}.std", pd.Series([0] * len(agg))).to_numpy(dtype=float)
    if ctx.spec.aggregate.reduce != "mean":  # a spread around a mean, as the lines' bands: a
        # best-of-seeds bar (reduce max) was drawn ± the std of all its seeds
        err = np.full(len(agg), np.nan)
    pos = np.arange(len(agg))
    # no error bar where there is no spread (one seed: a cap at the bar's top read '± 0')
    ax.bar(pos, vals, yerr=err, capsize=4, color="#4C72B0", label="ours")
    paper = np.full(len(agg), np.nan)
    for i, (_, row) in enumerate(agg.iterrows()):
        pv = ctx.paper_value(row.to_dict(), metric)
        if pv is not None:
            ax.plot([i - 0.35, i + 0.35], [pv, pv], color="k", lw=2,
                    label=None if np.isfinite(paper).any() else "paper")
            paper[i] = pv
        if not math.isnan(vals[i]):  # a few points above the bar (and its error bar, which
            # crossed the number), whatever the axis's scale (0.02 above it in data units put
            # the number of an MSE of 1e-4 far off the axis)
            top = vals[i] + (err[i] if np.isfinite(err[i]) and vals[i] >= 0 else 0.0)
            ax.annotate(_annotation(vals[i]), (i, top), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)
        else:  # 'diverged' only where a run did (a metric not measured read 'diverged')
            div = N_DIVERGED not in row or not float(row[N_DIVERGED]) == 0
            ax.text(i, 0.02, "diverged" if div else "not measured", ha="center", va="bottom",
                    fontsize=7, color="tab:red", transform=ax.get_xaxis_transform())
        if N_PARAMS in row and not pd.isna(row[N_PARAMS]):
            names[i] += f"\n{int(row[N_PARAMS]):,} p"
    ax.set_xticks(pos, names, rotation=0, fontsize=8)
    if cfg.x != LABEL and not is_case_ref(cfg.x):  # the ticks are values of a key: named (the
        # ticks 32, 16, 8 of cooper2026-fig9's task.words said nothing of what they counted)
        ax.set_xlabel(cfg.x.split(".")[-1] if cfg.x != N_PARAMS else "parameters")
    if np.isnan(vals).any():  # every cell's place, as matplotlib's margins give full bars (a
        # diverged last bar, NaN, was cut from the axis with half its 'diverged')
        margin = 0.05 * (len(agg) - 0.2)
        ax.set_xlim(-0.4 - margin, len(agg) - 0.6 + margin)
    # the y range holds every bar, error bar and paper value (from the bars alone, a paper value
    # above them, or an error bar's top, was drawn off the axis without a word)
    spread = np.nan_to_num(err)
    tops = np.concatenate([vals, vals + spread, paper])
    bottoms = np.concatenate([vals, np.where(vals < 0, vals - spread, vals), paper])
    # accuracies: room above 1 for the texts (a mean + std of values in [0, 1] is at most
    # 1.21); only an accuracy's (a ratio whose values lay in [0, 1], yu2025-fig6's largest
    # loss rise / first loss of 0.02-0.09, was drawn on the accuracy axis, its bars flat)
    if is_accuracy(metric) and resolve_ylim("auto", [vals, paper], metric) is not None:
        ax.set_ylim(0, 1.25)
    else:  # a loss or a ratio: its own range (on the accuracy range the bars were cut off)
        finite = np.isfinite(tops).any()
        # (room above the tallest for its number and the legend, as 1.25 for accuracies)
        ax.set_ylim(min(0.0, float(np.nanmin(bottoms)) * 1.15) if finite else 0.0,
                    max(1e-12, float(np.nanmax(tops)) * 1.3) if finite else 1.0)
    # what the error bars are, where there are any (huang2025-tab1's read as nothing: ± std, a
    # standard error or the seeds' range?)
    bars_are = "\nbars: ± std over seeds" if (np.nan_to_num(err) > 0).any() else ""
    ax.set_ylabel(f"{metric} ({ctx.aggregation(metric)}){bars_are}")
    ax.set_title(ctx.fitted_title(cfg, 0.88 * fig.get_figwidth(), 9),  # centred over the axes,
                 fontsize=9)  # right of the figure's centre (the y label's room)
    ax.legend(loc="upper center", fontsize=8, ncol=2)
    tight_layout(fig)
    save_png(fig, path, dpi=130)
    return True


# ----------------------------------------------------------------------------------------------


class HeatmapsConfig(FigureConfig):
    kind: Literal["heatmaps"]
    col: str = Field(LABEL, description="column with a panel per value")
    x: Columns = Field([], description="required: column(s) of the x axis, a list or 'a,b' (a "
                       "cell's x is its values of them all)")
    y: Columns = Field([], description="required: column(s) of the y axis, as x")
    cells_from_paper: bool = Field(
        False, description="also lay out every cell the paper prints (paper_values) for a panel, "
        "not run ones grey with the paper's value only: the paper's grid in every profile")
    names: dict[str, DrawnText] = Field({}, description="short axis names, e.g. {model.d_model: d}")
    paper_panels: dict[str, str | list[Any]] = Field(
        {}, description="panel -> the panel (value of col) whose paper values it shows, e.g. "
        "another layout of the paper's model: {'S4D+PE (LN)': S4D+PE}; a list-valued panel "
        "as its title writes it: {'[0.8, 0.95]': [0.9, 0.99]}")

    _list_panels = model_validator(mode="before")(list_panels)

    @model_validator(mode="after")
    def _axes(self) -> HeatmapsConfig:
        if not self.x or not self.y:  # every cell had no coordinate: empty panels, exit 0
            raise ValueError("x and y: give the columns of both axes (e.g. x: task.T, y: label)")
        return self

    def column_refs(self) -> list[str]:
        return [self.col, *self.x, *self.y]

    def positions(self) -> list[str] | None:
        return [self.col, *self.x, *self.y]

    def panel_refs(self) -> list[str]:
        return [self.col]

    def value_refs(self) -> list[tuple[str, str, Any]]:  # a misspelt panel showed no paper value
        return [(f"paper_panels.{k}", self.col, panel_value(self.col, k))
                for k in self.paper_panels]


def _coord(values: dict, keys: list[str]) -> tuple | None:
    """The (x or y) coordinate of a cell: its values of ``keys``, None where a key does not apply
    (e.g. a Transformer has no state size); None when no key applies."""
    out = []
    for k in keys:
        v = values.get(k)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        else:
            out.append(float(v) if isinstance(v, (int, float, np.integer, np.floating))
                       else str(encode_cell(v)))
    return tuple(out) if any(v is not None for v in out) else None


def _coord_key(coord: tuple) -> tuple:
    """Sort key: missing values first, numbers by value, text as text."""
    return tuple((0, 0.0, "") if v is None else (1, v, "") if isinstance(v, float) else (2, 0.0, v)
                 for v in coord)


def _coord_name(coord: tuple, keys: list[str], names: dict[str, str]) -> str:
    parts = []
    for k, v in zip(keys, coord):
        if v is None:
            continue
        v = int(v) if isinstance(v, float) and v.is_integer() else v
        parts.append(f"{names.get(k, k.split('.')[-1])}={v}")
    return ", ".join(parts)


def _in_panel(where: dict[str, Any], col: str, panel: Any, listed: bool = False) -> bool:
    """Whether a paper value's ``where`` names a cell of the panel ``panel`` (a value of ``col``):
    its own value of ``col``, or for ``label`` / ``case:<i>`` the case label (or the
    ``case:<i>`` of the label) it names. ``str(where.get(col))`` read ``case:1`` as 'None' (no
    paper cell laid out in cooper2026-tab1's panel '' of smoke: the paper's grid was one cell),
    a composite label as no case label of it, and a width of 8 as no panel '8.0'; a ``where``
    naming the ``case:<i>`` itself (``case:1: v``) was in no panel, its cell not laid out.
    ``listed``: ``col`` holds a list in some panel (``value_matches``)."""
    if is_case_ref(col) and col in where:
        return value_matches(col, panel, where[col])
    if col == LABEL or is_case_ref(col):
        if LABEL not in where:
            return False
        if isinstance(where[LABEL], (list, tuple)):  # any of
            return any(_in_panel({**where, LABEL: w}, col, panel) for w in where[LABEL])
        own = column(pd.DataFrame({LABEL: [str(where[LABEL])]}), col).iloc[0]
        return value_matches(LABEL, panel, where[LABEL]) or str(own) == str(panel)
    return col in where and value_matches(col, panel, where[col], listed)


@figure_kind("heatmaps", HeatmapsConfig)
def heatmaps(ctx: FigureContext, cfg: HeatmapsConfig, path: Path) -> bool:
    """A panel per value of ``col``; cells (x × y) annotated "ours (paper)" ("ours" where the
    paper gives no value)."""
    agg = ctx.table
    if agg.empty:
        return False
    metric = cfg.metric
    # a list-valued col (train.betas) is a panel per list: a list is no dict key, and a Series
    # compared with it is compared item by item (a TypeError traceback in `run` and `plot`)
    values = column(agg, cfg.col).tolist()
    of = [("list", encode_cell(v)) if isinstance(v, (list, tuple, dict)) else v for v in values]
    panel_at: dict[Any, Any] = {}  # a panel's key -> its value (the first cell's)
    for k, v in zip(of, values):
        panel_at.setdefault(k, v)
    keys, panels = list(panel_at), list(panel_at.values())
    listed = any(isinstance(v, list) for v in values)  # a paper value's list names its own panel
    layout = {}
    for key, panel in zip(keys, panels):
        sub = agg[np.array([k == key for k in of], dtype=bool)]
        data = {}
        for _, r in sub.iterrows():
            cx, cy = _coord(r.to_dict(), cfg.x), _coord(r.to_dict(), cfg.y)
            if cx is not None and cy is not None:
                data[(cx, cy)] = r
        paper = {}
        paper_panel = mapped_panel(cfg.paper_panels, cfg.col, panel)
        if cfg.cells_from_paper:
            for pv in ctx.spec.paper_values:
                w = pv.where
                if pv.metric != metric or not _in_panel(w, cfg.col, paper_panel, listed):
                    continue
                cx, cy = _coord(w, cfg.x), _coord(w, cfg.y)
                if cx is not None and cy is not None:
                    paper[(cx, cy)] = pv.value
        xs = sorted({c[0] for c in (*data, *paper)}, key=_coord_key)
        ys = sorted({c[1] for c in (*data, *paper)}, key=_coord_key)
        layout[key] = (data, paper, xs, ys, paper_panel)
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    nx = max(len(v[2]) for v in layout.values())
    ny = max(len(v[3]) for v in layout.values())
    fig, axes = subplots(path, 130, nrows, ncols, figsize=(ncols * (1.0 * nx + 1.6) + 1.4,
                                                        nrows * (0.5 * ny + 1.0) + 0.9),
                         squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")
    # colours on [0, 1] (accuracies); values beyond it (a loss of 2.3 and one of 3.9) take the
    # end colour, and the colour bar says so with a pointed end (they read as 1.0 on a bar
    # that stopped at 1)
    vals = agg[metric].to_numpy(dtype=float)
    vmin, vmax = 0.0, 1.0
    extend = {(False, False): "neither", (True, False): "min", (False, True): "max",
              (True, True): "both"}[(bool((vals < vmin).any()), bool((vals > vmax).any()))]
    im = None
    n_not_run = n_blank = n_none = 0
    with_paper = False  # a cell printed a paper value: only then does the bar say "(paper)"
    for ax, key, panel in zip(axes.flat, keys, panels):
        data, paper, xs, ys, paper_panel = layout[key]
        grid = np.full((len(ys), len(xs)), np.nan)
        for i, cy in enumerate(ys):
            for j, cx in enumerate(xs):
                r = data.get((cx, cy))
                pv = paper.get((cx, cy))
                if r is None and pv is None:  # a combination no cell of the panel has
                    n_blank += 1
                    continue
                if r is None:
                    n_not_run += 1
                    ours = "not run"
                else:
                    grid[i, j] = r[metric]
                    ours = _annotation(r[metric])
                    n_none += bool(np.isnan(grid[i, j]))
                    if pv is None:
                        pv = ctx.paper_value(with_case_label(r.to_dict(), cfg.col,
                                                             paper_panel), metric)
                with_paper = with_paper or pv is not None
                text = ours + (f" ({_annotation(pv)})" if pv is not None else "")
                v = grid[i, j]
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="k" if (np.isnan(v) or v > 0.6) else "w")
        im = ax.imshow(np.ma.masked_invalid(grid), vmin=vmin, vmax=vmax, cmap=cmap,
                       aspect="auto")
        ax.set_xticks(range(len(xs)), [_coord_name(c, cfg.x, cfg.names) for c in xs], fontsize=7)
        ax.set_yticks(range(len(ys)), [_coord_name(c, cfg.y, cfg.names) for c in ys], fontsize=7)
        name, paper_name = str(encode_cell(panel)), str(encode_cell(paper_panel))
        ax.set_title(name if paper_name == name else f"{name} (paper: {paper_name})", fontsize=9)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    # wrapped to the figure's height (one row of panels: it ran off the image)
    # "(paper)" only beside paper values: a spec without any (chen2025-figS3-S4) read as if the
    # paper's numbers were on the cells
    label = f"{metric}, {ctx.aggregation(metric)}: ours" + (" (paper)" if with_paper else "")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, extend=extend,
                 label=wrap_text(label, max(1.0, fig.get_figheight() - 0.3), 10))
    title = ctx.fitted_title(cfg, fig.get_figwidth())
    if n_not_run:
        title += f"\ngrey 'not run': {n_not_run} cells the paper prints that this profile does not train"
    if n_none:  # a grey '—' of a cell that ran, beside the grey of one that did not, unsaid
        title += (f"\ngrey '—': {n_none} cell{'s' if n_none > 1 else ''} without a value "
                  "(diverged or not measured)")
    if n_blank:  # (koren2026-fig7's 11 blank squares of 18 said nothing of what they were)
        title += (f"\ngrey, blank: {n_blank} combination{'s' if n_blank > 1 else ''} of the axes "
                  "that no cell of this profile has")
    fig.suptitle(title, fontsize=10)
    save_png(fig, path, dpi=130)
    return True


# ----------------------------------------------------------------------------------------------


class LinesConfig(FigureConfig):
    kind: Literal["lines"]
    x: str | None = Field(None, description="column on the x axis (null: in each panel the first "
                          "swept key that varies there)")
    hue: str = Field("case:0", description=HUE_HELP)
    facet: str | None = Field("case:1", description="column with a panel per value (null: one "
                              "panel)")
    ylim: YLim = Field("auto", description=YLIM_HELP)
    logx: bool = Field(False, description="log x axis (needs a named, numeric, positive x)")
    logy: bool = Field(False, description="log y axis")
    paper: bool = Field(False, description="mark the paper's value of each drawn cell (× in its "
                        "line's colour; the title names those of cells not drawn)")
    reference: dict[str, str] = Field(
        {}, max_length=MAX_REFERENCES, description="curves drawn dashed grey at each panel's x "
        "values: legend text -> expression of the x column, e.g. {'guess 1/N_k': '1 / task.key_repeats'}")
    names: dict[str, DrawnText] = Field({}, description="short names of x / hue / facet columns in "
                                  "the axis label, legend title and panel titles, e.g. "
                                  "{model.n_layers: Λ}")

    def column_refs(self) -> list[str]:
        return [c for c in (self.x, self.hue, self.facet) if c]

    @model_validator(mode="after")
    def _references(self) -> LinesConfig:
        if self.logx and not self.x:  # the default x, a swept key chosen per panel, was drawn on
            # a log axis as it came: text (a mixer's name) as categories 0, 1, ..., the first
            # left out of the axis with its line, without a word
            raise ValueError("logx: name x, the numeric column on the log axis (by default x is "
                             "whichever swept key varies in a panel, which may be text)")
        for text, e in self.reference.items():
            names = expr.check(e)
            if self.x is None or names - {self.x}:
                raise ValueError(f"reference {text!r}: {e!r} may only use the x column "
                                 f"({self.x!r}; set x)")
        return self

    def numeric_refs(self) -> list[str]:
        return [self.x] if self.x and (self.logx or self.reference) else []

    def log_refs(self) -> list[str]:
        return [self.x] if self.x and self.logx else []

    def positions(self) -> list[str] | None:
        return [c for c in (self.facet, self.hue, self.x) if c] if self.x else None

    def placed(self, rows: pd.DataFrame, keys: list[str]) -> list[tuple[pd.DataFrame, Any]]:
        """Without a named x, each panel's cells at the x ``lines`` draws them at (``_default_x``):
        two cells of a hue at one x there (d_model drawn, train.lr swept too) were one line
        zigzagging through both, without a word."""
        if self.x:
            return super().placed(rows, keys)
        swept = _swept(rows, keys)
        facet = column(rows, self.facet).astype(str) if self.facet else pd.Series("", rows.index)
        return [(part, [c for c in (self.facet, self.hue, _default_x(part, swept)) if c])
                for _, part in rows.groupby(facet, sort=False)]

    def panel_refs(self) -> list[str]:
        return [self.facet] if self.facet else []


def _swept(agg: pd.DataFrame, keys: list[str]) -> list[str]:
    """The cell keys that vary over the cells (list-valued keys, a case's model.layers, count by
    their text)."""
    return [c for c in keys if c != LABEL and c in agg and agg[c].astype(str).nunique() > 1]


def _default_x(sub: pd.DataFrame, swept: list[str]) -> str:
    """A `lines` panel's x when none is named: the first swept key that varies in the panel."""
    return next((c for c in swept if sub[c].astype(str).nunique() > 1),
                swept[0] if swept else LABEL)


def reference_values(ctx: FigureContext, text: str, e: str, xkey: str,
                     xs: list[float]) -> list[float]:
    """The reference curve ``text`` (expression ``e`` of the x column ``xkey``) at ``xs``; an x
    where it has no value (`1 / (task.T - 4)` at 4, `log(x)` at 0) is a gap, with a warning
    naming it (the ExprError was a traceback of `plot`, and of `run` after training)."""
    import warnings

    out, bad = [], []
    for v in xs:
        try:
            out.append(float(expr.evaluate(e, {xkey: v})))
        except (expr.ExprError, OverflowError) as err:
            out.append(math.nan)
            bad.append(f"{v:g} ({err})")
    if bad:
        warnings.warn(f"{ctx.spec.id}: reference {text!r} has no value at {xkey} = "
                      f"{'; '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}: a gap in its line",
                      stacklevel=2)
    return out


@figure_kind("lines", LinesConfig)
def lines(ctx: FigureContext, cfg: LinesConfig, path: Path) -> bool:
    """One panel per ``facet``: metric vs ``x`` (± std with mean aggregation), a line per ``hue``."""
    agg = ctx.table
    if agg.empty:
        return False
    metric = cfg.metric
    agg = agg.assign(_hue=column(agg, cfg.hue).map(encode_cell).astype(str),
                     _facet=column(agg, cfg.facet).map(encode_cell).astype(str) if cfg.facet
                     else "")
    facets = list(dict.fromkeys(agg["_facet"]))
    fig, axes = subplots(path, 130, 1, len(facets), figsize=(4.6 * len(facets), 3.6), squeeze=False)
    swept = _swept(agg, ctx.keys)
    short = lambda c: cfg.names.get(c, c.split(".")[-1])  # noqa: E731
    # the paper's values drawn (×) count for the y range: from the cells' alone, a paper
    # value of 1.5 beside losses below 1 was drawn off the accuracy range without a word
    paper = [v for _, r in agg.iterrows() if (v := ctx.paper_value(r.to_dict(), metric))
             is not None] if cfg.paper else []
    ylim = resolve_ylim(cfg.ylim, [*agg[metric].astype(float), *paper], metric)
    # one colour per hue in every panel, its band's too: from the axes' cycles, a band took the
    # next fill colour (after a hue of one seed, without a band, another hue's line colour), a
    # hue missing from a panel shifted the others' colours there, and the 11th hue was the 1st's
    palette = [f"C{k}" for k in range(10)] + list(plt.get_cmap("tab20").colors[1::2])
    style = {hue: (palette[k % len(palette)], "osD^v"[k // len(palette) % 5])
             for k, hue in enumerate(dict.fromkeys(agg["_hue"]))}
    legends: list[tuple[Any, dict]] = []
    for ax, facet in zip(axes[0], facets):
        sub = agg[agg["_facet"] == facet]
        xkey = cfg.x or _default_x(sub, swept)
        xcol = column(sub, xkey)
        if xcol.map(lambda v: isinstance(v, (list, tuple, dict))).any():  # a list-valued x
            # (train.betas) as the tables write it, drawn as categories: a list is no point on
            # an axis (a ValueError traceback in `run`, after training, and in `plot`)
            xcol = xcol.map(encode_cell).astype(str)
        sub = sub.assign(_x=xcol)
        banded = marked = False
        by_hue = {hue: sub[sub["_hue"] == hue].sort_values("_x")
                   for hue in dict.fromkeys(sub["_hue"])}
        # a hue whose line is another's drawn over it hid it (the legend listed both)
        same = same_lines({hue: (h["_x"], h[metric]) for hue, h in by_hue.items()})
        for hue, h in by_hue.items():
            # cells without a value (diverged, not measured) are gaps; the legend counts them (a
            # hue whose every cell diverged was a legend entry with nothing drawn, without a word)
            note = gap_note(h[metric])
            # on a log y axis a value of 0 or below has no place: said, not left out silently
            off = int((h[metric] <= 0).sum()) if cfg.logy and (sub[metric] > 0).any() else 0
            if off:
                note += f" ({off} of {len(h)} cells ≤ 0: off the log axis)"
            color, marker = style[hue]
            ax.plot(h["_x"], h[metric], marker=marker, color=color,
                    label=f"{hue}{note}{same_note(same.get(hue))}",
                    **(SAME_STYLE if hue in same else {}))
            std = f"{metric}.std"
            if std in h and h[std].notna().any() and ctx.spec.aggregate.reduce == "mean":
                ax.fill_between(h["_x"], h[metric] - h[std], h[metric] + h[std], alpha=0.2,
                                color=color)
                banded = True
            if cfg.paper:
                pv = [(r["_x"], ctx.paper_value(r.drop("_x").to_dict(), metric))
                      for _, r in h.iterrows()]
                pv = [(xv, v) for xv, v in pv if v is not None]
                if pv:  # in the line's colour: black ×s of close hues (koren2026-fig10's Λ)
                    # could not be told apart, one line's paper value read as another's
                    ax.scatter(*zip(*pv), marker="x", s=60, color=color, zorder=5)
                    marked = True
        try:  # a text x (the labels, where no swept key varies; a mixer's name) is drawn as
            # categories: float('S6') raised ValueError after training
            xs = sorted({float(v) for v in sub["_x"]})
        except (TypeError, ValueError):
            xs = []  # (references need numbers: numeric_refs)
        if marked:  # the legend's × in no line's colour (each panel with any says what it is)
            ax.scatter([], [], marker="x", s=60, color="0.35", label="paper (×, the line's colour)")
        for text, e in cfg.reference.items():  # at the panel's x values
            ax.plot(xs, reference_values(ctx, text, e, xkey, xs), color="0.5", ls="--",
                    lw=1, marker="*", label=text)
        if cfg.logx:  # before the ticks: setting the scale replaces them (yu2025-fig3's widths
            # 2, 8, 32, 128 and yu2025-tab1's h 1 ... 16 were drawn under ticks 10^0, 10^1, 10^2)
            ax.set_xscale("log")
        if xs and len(xs) <= 12 and all(v.is_integer() for v in xs):
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
            ax.set_xticks([], minor=True)  # a log axis's minor labels (3×10⁰) beside them
        ax.set_xlabel(short(xkey))
        # what the bands are (yu2025-tab1's were unexplained: ± std, or the seeds' range?)
        ax.set_ylabel(f"{metric} ({ctx.aggregation(metric)})"
                      + ("\nband: ± std over seeds" if banded else ""))
        if cfg.logy and (sub[metric] > 0).any():  # a panel of no positive value (an analysis
            # metric not measured: NaN) raised matplotlib's 'cannot be log-scaled' traceback
            ax.set_yscale("log")
        if ylim is not None and not cfg.logy:
            ax.set_ylim(*ylim)
        ax.set_title(f"{short(cfg.facet)} = {facet}" if cfg.facet and cfg.facet in cfg.names
                     else facet, fontsize=9)
        # a hue of a config key names it (yu2025-fig5's legends listed 10 ... 3000 and 0.001 ...
        # 1.0 with no word that they are L and c); labels and case labels say what they are
        titled = cfg.hue in cfg.names or not (cfg.hue == LABEL or is_case_ref(cfg.hue))
        legends.append((ax, {"fontsize": 8, "title": short(cfg.hue) if titled else None,
                             "title_fontsize": 8}))
    for ax, kw in legends:  # after every panel's limits are set: where it lies is known then
        _legend_clear_of_points(ax, **kw)
    title = ctx.fitted_title(cfg, fig.get_figwidth())
    if cfg.paper and (left := _paper_not_drawn(ctx, agg, metric, short)):
        title += "\n" + wrap_text(left, fig.get_figwidth(), 10)
    fig.suptitle(title, fontsize=10)
    tight_layout(fig)
    save_png(fig, path, dpi=130)
    return True


def _legend_below(ax, **kw) -> None:
    """The panel's legend below its x label: histogram steps span the whole panel (a step
    patch's extent is the panel's, so matplotlib's 'best' had nothing to weigh), and the legend
    inside lay over the curves (huang2025-fig1's S4D panel)."""
    n = len(ax.get_legend_handles_labels()[1])
    kw.setdefault("ncol", n if n <= 3 else 2)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.26), **kw)


def _legend_clear_of_points(ax, **kw) -> None:
    """The panel's legend where matplotlib's 'best' puts it, or right of the panel where that
    still covers a drawn point (yu2025-fig5's legend of seven c values lay over the first
    points of three of its lines: 'best' weighs line vertices, not the markers' size)."""
    legend = ax.legend(**kw)
    renderer = ax.figure.canvas.get_renderer()
    box = legend.get_window_extent(renderer).padded(4)  # a marker's radius, in pixels
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        xy = xy[np.isfinite(xy).all(axis=1)] if xy.size else xy
        if len(xy) and line.get_marker() not in (None, "", "None", " ") and any(
                box.contains(*p) for p in ax.transData.transform(xy)):
            ax.legend(**kw, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
            return


def _paper_not_drawn(ctx: FigureContext, agg: pd.DataFrame, metric: str, short) -> str:
    """The line naming the paper values of ``metric`` that no drawn cell has (an x or a hue
    this profile does not run, or whose runs have not finished), '' when every one is drawn: a
    paper value at N_k = 4 beside a profile of N_k up to 3 was left off without a word."""
    drawn = {id(pv) for _, r in agg.iterrows()
             if (pv := ctx.paper_value_of(r.to_dict(), metric)) is not None}
    left = [pv for pv in ctx.spec.paper_values if pv.metric == metric and id(pv) not in drawn]
    if not left:
        return ""
    named = ["(" + ", ".join(f"{short(k)} = {fmt_num(v)}" for k, v in pv.where.items()) + ")"
             for pv in left[:4]]
    more = f" and {len(left) - 4} more" if len(left) > 4 else ""
    return (f"paper ×: {len(left)} paper value{'s' if len(left) > 1 else ''} not drawn "
            f"(not run or not finished in this profile): {', '.join(named)}{more}")


# ----------------------------------------------------------------------------------------------


class HistogramsConfig(FigureConfig):
    kind: Literal["histograms"]
    metric: str = unread_metric("the runs' decay_histogram analysis")
    x: str = Field(DECAY_X, description="column with a curve per value in each model's panel; "
                   "the right panel splits its largest value before / after n")

    def column_refs(self) -> list[str]:
        return [self.x]

    def numeric_refs(self) -> list[str]:  # its largest value is split (a text x, model.mixer,
        return [self.x]  # raised 'Unknown format code' while drawing)

    def metrics(self) -> list[str]:
        return []

    def analyses(self) -> list[str]:
        return [DECAY]

    def drawn_seeds(self, ctx) -> str:
        """A cell's histogram sums its seeds' values (of the runs ended ok): a title's {seeds}
        read as the cells combine a metric, 'mean of 3 seeds'."""
        lo, hi = ctx.seed_range(ok_only=True)
        return ("one seed" if hi <= 1 else f"{hi} seeds pooled" if lo == hi
                else f"{lo}–{hi} seeds pooled")


@figure_kind("histograms", HistogramsConfig)
def histograms(ctx: FigureContext, cfg: HistogramsConfig, path: Path) -> bool:
    """Left: distribution over all timesteps per x for each model; right: before vs after n.

    Histograms are drawn as step lines (one step per bin) of the fraction of values in each bin,
    on a log y axis. Curves that coincide (S4D: Δ = 1, so its values before and after n are the
    same) stay visible: the first is drawn thick and translucent, the next thin and dashed.
    """
    hist = ctx.tables.get(DECAY, pd.DataFrame())
    if hist.empty or cfg.x not in hist:
        return False
    x = cfg.x
    counted = hist.groupby([LABEL, x], sort=False)["count"].sum()
    drawn = {(lab, norm(xv)) for (lab, xv), n in counted.items() if n > 0}
    # a cell whose runs recorded no value in [0, 1] (every seed diverged: NaN weights) has no
    # curve; a label of only such cells was an empty panel (its legend raised ValueError)
    labels = list(dict.fromkeys(lab for lab, xv in counted.index if (lab, norm(xv)) in drawn))
    if not labels:
        return False
    hist = hist[[(lab, norm(xv)) in drawn for lab, xv in zip(hist[LABEL], hist[x])]]
    decay = r"$e^{-\lambda\Delta_t}$"
    # long labels are wrapped and the figure grows by their lines (a 150-letter label ran its
    # panel title over the next panels' and squeezed the axes to a sliver)
    # (save_png wraps the right panel's legend to the panel: its lines are counted here)
    titles = {lab: wrap_text(f"{lab}: {decay} over all timesteps", 3.5, 9) for lab in labels}
    keys = {lab: wrap_text(str(lab), 3.0, 7) for lab in labels}  # the right panel's legend
    long = any("\n" in k for k in keys.values())  # (one column of them, below)
    extra = 0.16 * max(t.count("\n") for t in titles.values()) + (0.24 * sum(
        k.count("\n") + 1 for k in keys.values()) if long else 0.0)
    fig, axes = subplots(path, 130, 1, len(labels) + 1,
                         figsize=(4.6 * (len(labels) + 1), 3.9 + extra))
    bins = int(hist["bins"].iloc[0])
    edges = np.linspace(0.0, 1.0, bins + 1)
    xs = sorted(hist[x].unique())
    missing = _histograms_missing(ctx.table, x, drawn)
    cmap = plt.get_cmap("viridis")
    name = x.split(".")[-1]
    ylabel = "fraction of values per bin (log scale)"

    def step(ax, c, **kw):
        frac = c / c.sum()
        ax.stairs(np.where(frac > 0, frac, np.nan), edges, **kw)

    for ax, lab in zip(axes, labels):
        for k, xv in enumerate(xs):
            sub = hist[(hist[LABEL] == lab) & (hist[x] == xv)]
            c = sub.groupby("bin")["count"].sum().reindex(range(bins), fill_value=0).to_numpy()
            if c.sum():
                step(ax, c, color=cmap(k / max(1, len(xs) - 1)), lw=1.4,
                     label=f"${name} = {xv:g}$" if isinstance(xv, (int, float)) else str(xv))
        ax.set_yscale("log")
        # the whole [0, 1], with a margin (a bin at an end shows): autoscaled to the bins drawn,
        # all mass in one bin read as a flat distribution over the axis, and panels had their own x
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel(decay)
        ax.set_ylabel(ylabel)
        ax.set_title(titles[lab], fontsize=9)
        _legend_below(ax, title=name, title_fontsize=7)
    ax = axes[-1]
    xmax = max(xs)
    palette = ["tab:red", "tab:blue", "tab:green", "tab:purple"]
    for li, lab in enumerate(labels):
        curves = []
        for part in ("before", "after"):
            sub = hist[(hist[LABEL] == lab) & (hist[x] == xmax) & (hist["part"] == part)]
            c = sub.set_index("bin")["count"].reindex(range(bins), fill_value=0).to_numpy()
            if c.sum():
                curves.append((part, c))
        same = len(curves) == 2 and np.allclose(curves[0][1] / curves[0][1].sum(),
                                                curves[1][1] / curves[1][1].sum())
        for j, (part, c) in enumerate(curves):
            rel = "t < n" if part == "before" else r"t \geq n"
            style = ({"lw": 4.0, "alpha": 0.35} if j == 0 else {"lw": 1.3, "ls": "--"}) \
                if same else {"lw": 1.5, "ls": "-" if part == "after" else ":"}
            color = palette[(2 * li + j) % len(palette)] if not same else palette[2 * li % 4]
            step(ax, c, color=color, label=f"{keys[lab]}, ${rel}$" + (" (same as t < n)" if same and j
                                                                       else ""), **style)
    ax.set_yscale("log")
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel(decay)
    ax.set_ylabel(ylabel)
    ax.set_title(f"before vs from timestep n (${name} = {xmax:g}$)", fontsize=9)
    _legend_below(ax, **({"ncol": 1} if long else {}))  # (two columns of long labels were
    #                         each wrapped to a sliver of the panel when saved: 7 letters a line)
    title = ctx.fitted_title(cfg, fig.get_figwidth())
    absent = [lab for lab in labels if (lab, norm(xmax)) not in drawn]
    if absent:  # the right panel had no curve of them, without a word
        missing.append(f"right panel: no {', '.join(absent)} at ${name} = {xmax:g}$")
    if missing:
        title += "\n" + wrap_text("not drawn: " + "; ".join(missing), fig.get_figwidth(), 9)
    fig.suptitle(title, fontsize=10)
    tight_layout(fig)
    save_png(fig, path, dpi=130)
    return True


def _histograms_missing(cells: pd.DataFrame, x: str, drawn: set) -> list[str]:
    """The finished cells (label, x) with no decay histogram to draw, named with why: every
    run diverged, or no value recorded (a label whose every seed diverged was left out of the
    figure without a word)."""
    if cells.empty or LABEL not in cells or x not in cells:
        return []
    named: dict[tuple, str] = {}
    for _, r in cells.iterrows():
        key = (r[LABEL], norm(r[x]))
        if key in drawn or key in named:
            continue
        why = "diverged" if r[N_DIVERGED] and not r[N_OK] else "no histogram"
        xv = r[x]
        shown = f"{xv:g}" if isinstance(xv, (int, float)) else str(xv)
        named[key] = f"{r[LABEL]} (${x.split('.')[-1]} = {shown}$, {why})"
    return list(named.values())
