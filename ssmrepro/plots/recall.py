"""Stage 6 (plots): the ``recall_grid`` figure kind — koren2026 Fig. 6 style width × state grids.

One row per MQAR regime, one column per configured label, with a theory column (a) first: the
refined law ``Phi(1/sigma - m_V)`` (``theory.recall``) on a fine grid with its own threshold
contour. Each data column draws the law's threshold contour with *that column's* constant, named
in the config (``columns: {"(b) designed": designed, ...}``), never guessed from the label.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from ..report import expected, select  # noqa: E402
from ..report.columns import (  # noqa: E402
    FACTS,
    LABEL,
    N_DIVERGED,
    N_OK,
    REGIME,
    STATE,
    VOCAB,
    WIDTH,
)
from ..theory.recall import law_constant, refined_accuracy  # noqa: E402
from .registry import (  # noqa: E402
    FigureConfig,
    FigureContext,
    figure_kind,
    save_png,
    subplots,
    wrap_text,
)

LawColumn = Literal["designed", "linear", "full"]


class RecallGridConfig(FigureConfig):
    kind: Literal["recall_grid"]
    columns: dict[str, LawColumn] = Field(
        ..., description="label (or case label) -> the law's constant for that column, in order")
    theory: LawColumn | None = Field(
        "linear", description="constant of the theory column (a); null: no theory column")
    threshold: float = Field(0.9, gt=0, lt=1, description="the contour level")
    task: Literal["mqar", "ar"] = Field("mqar", description="the law's task: mqar or ar "
                                        "(associative recall), for its constants")
    x: str = Field(WIDTH, description="numeric column of the x axis (the width D)")
    y: str = Field(STATE, description="numeric column of the y axis (the state size N)")
    regime: list[str] = Field(list(REGIME), description="columns whose values make a row of "
                              "panels (one regime each)")
    vocab: str = Field(VOCAB, description="the regime column giving the law's vocabulary size V")
    facts: str = Field(FACTS, description="the regime column giving the law's number of facts "
                       "(key-value pairs)")
    log_axes: bool | None = Field(None, description="log2 axes (default: when the grid doubles)")

    @model_validator(mode="after")
    def _keys(self) -> RecallGridConfig:
        for k in (self.vocab, self.facts):
            if k not in self.regime:
                raise ValueError(f"{k} must be one of the regime keys {self.regime}")
        for col in [*self.columns.values(), *([self.theory] if self.theory else [])]:
            law_constant(col, self.task)
        return self

    def column_refs(self) -> list[str]:
        return [self.x, self.y, *self.regime]

    def numeric_refs(self) -> list[str]:  # x: label raised 'could not convert string to float'
        return [self.x, self.y, self.vocab, self.facts]

    def value_refs(self) -> list[tuple[str, str, Any]]:
        # a column whose label no run has (a case relabelled '(c) linear', the figure's
        # columns left at '(c) trained linear'): the column vanished from the figure
        return [(f"columns.{k}", LABEL, k) for k in self.columns]

    def positions(self) -> list[str] | None:  # a panel per (regime, label), a square per (x, y):
        # two cells there (a train.lr swept, not selected) were one square, the last drawn
        # over the first without a word
        return [*self.regime, LABEL, self.x, self.y]


def _edges(vals: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges halfway between grid values (geometrically on log axes)."""
    v = np.log(vals) if log else vals.astype(float)
    if len(v) == 1:
        mid = np.array([v[0] - 0.5, v[0] + 0.5]) if not log else np.array([v[0] - 0.35, v[0] + 0.35])
    else:
        inner = (v[1:] + v[:-1]) / 2
        mid = np.concatenate([[v[0] - (inner[0] - v[0])], inner, [v[-1] + (v[-1] - inner[-1])]])
    return np.exp(mid) if log else mid


def _geometric(vals: np.ndarray) -> bool:
    if len(vals) < 3 or np.any(vals <= 0):
        return False
    r = vals[1:] / vals[:-1]
    return bool(np.all(r > 1.5) and np.ptp(r) < 0.5)


@figure_kind("recall_grid", RecallGridConfig)
def recall_grid(ctx: FigureContext, cfg: RecallGridConfig, path: Path) -> bool:
    """Width × state accuracy grids per regime: theory (a), then the configured columns."""
    cells = expected(ctx.cells)
    if ctx.table.empty or any(k not in cells for k in (cfg.x, cfg.y, *cfg.regime)):
        return False
    metric = cfg.metric
    labels = [lab for lab in cfg.columns if not select(cells, {LABEL: lab}).empty]
    regimes = list(dict.fromkeys(tuple(r) for r in cells[cfg.regime].itertuples(index=False)))
    Ds = np.array(sorted(cells[cfg.x].astype(float).unique()))
    Ns = np.array(sorted(cells[cfg.y].astype(float).unique()))
    log = cfg.log_axes if cfg.log_axes is not None else (_geometric(Ds) and _geometric(Ns))
    xe, ye = _edges(Ds, log), _edges(Ns, log)
    fine_D = np.geomspace(xe[0], xe[-1], 240) if log else np.linspace(xe[0], xe[-1], 240)
    fine_N = np.geomspace(ye[0], ye[-1], 240) if log else np.linspace(ye[0], ye[-1], 240)
    FD, FN = np.meshgrid(fine_D, fine_N)
    panels: list[tuple[str, str | None]] = ([("theory", cfg.theory)] if cfg.theory else []) + \
        [(lab, cfg.columns[lab]) for lab in labels]
    ncol, nrow = len(panels), len(regimes)
    fig, axes = subplots(path, 120, nrow, ncol, figsize=(2.9 * ncol + 1.4, 2.6 * nrow + 1.3),
                         squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.88")
    im = None
    n_none = 0
    for i, reg in enumerate(regimes):
        where = dict(zip(cfg.regime, reg))
        V, n_f = float(where[cfg.vocab]), float(where[cfg.facts])
        for j, (name, column) in enumerate(panels):
            ax = axes[i, j]
            law = None
            if column is not None:
                law = refined_accuracy(FN, FD, V, n_f, law_constant(column, cfg.task))
                law = np.where(FN > FD, np.nan, law)  # the grid skips N > D
            if name == "theory":
                im = ax.pcolormesh(FD, FN, law, vmin=0, vmax=1, cmap=cmap, shading="auto")
                title = f"(a) theory Φ(1/σ − m_V),\na = {law_constant(column, cfg.task):g} ({column})"
            else:
                sub = select(cells, {**where, LABEL: name})
                g = np.full((len(Ns), len(Ds)), np.nan)
                for _, r in sub.iterrows():
                    g[np.searchsorted(Ns, float(r[cfg.y])), np.searchsorted(Ds, float(r[cfg.x]))] = \
                        r[metric]
                im = ax.pcolormesh(xe, ye, np.ma.masked_invalid(g), vmin=0, vmax=1, cmap=cmap)
                # a cell that ran but has no value (every seed diverged) is marked '—': its grey
                # read as the title's 'grey: not run'
                ran = sub[(sub[N_OK] + sub[N_DIVERGED]) > 0] if N_OK in sub else sub.iloc[0:0]
                for _, r in ran[ran[metric].astype(float).isna()].iterrows():
                    ax.text(float(r[cfg.x]), float(r[cfg.y]), "—", ha="center", va="center",
                            fontsize=8, color="k")
                    n_none += 1
                if np.isnan(g).all() and ran.empty:
                    ax.text(0.5, 0.5, "not run in\nthis profile", ha="center", va="center",
                            transform=ax.transAxes, fontsize=8, color="0.35")
                title = f"{name}\nlaw contour: a = {law_constant(column, cfg.task):g} ({column})"
            if law is not None and np.nanmax(law) >= cfg.threshold:
                ax.contour(FD, FN, law, levels=[cfg.threshold], colors="w", linewidths=1.2,
                           linestyles="--")
            if log:
                ax.set_xscale("log", base=2)
                ax.set_yscale("log", base=2)
                ax.set_xticks(Ds, [f"{d:g}" for d in Ds])
                ax.set_yticks(Ns, [f"{n:g}" for n in Ns])
                ax.minorticks_off()
            else:  # a linear grid at its own values (matplotlib's ticks put a grid of one
                # width 16 at 15.6 ... 16.4, widths and state sizes no cell has)
                if len(Ds) <= 12:
                    ax.set_xticks(Ds, [f"{d:g}" for d in Ds])
                if len(Ns) <= 12:
                    ax.set_yticks(Ns, [f"{n:g}" for n in Ns])
            ax.set_xlim(xe[0], xe[-1])
            ax.set_ylim(ye[0], ye[-1])
            ax.tick_params(labelsize=7)
            if i == 0:
                ax.set_title(title, fontsize=8)
            if i == nrow - 1:
                ax.set_xlabel(f"D ({cfg.x})", fontsize=8)
            if j == 0:
                reg_name = ", ".join(f"{k.split('.')[-1]}={v:g}" if isinstance(v, float)
                                     else f"{k.split('.')[-1]}={v}" for k, v in where.items())
                ax.set_ylabel(f"{reg_name}\nN ({cfg.y})", fontsize=8)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8,
                 label=f"{metric} ({ctx.aggregation(metric)})")
    head = ctx.fitted_title(cfg, fig.get_figwidth(), 9)
    note = (f"dashed: the law's {cfg.threshold} contour with the column's constant; grey: not "
            "run (or N > D)" + (f"; grey '—': {n_none} run without a value (diverged or not "
                                "measured)" if n_none else ""))
    fig.suptitle(f"{head}\n{wrap_text(note, fig.get_figwidth(), 9)}", fontsize=9)
    save_png(fig, path, dpi=120)
    return True


