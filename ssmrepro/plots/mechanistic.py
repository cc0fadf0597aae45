"""Stage 6 (plots): koren2026's mechanistic figures (Figs. 2-5, 9), drawn from saved weights or,
without them, from the arrays they left beside the figure.

Each kind rebuilds the trained model of every selected cell (``where``; the first seed whose weights
are saved, ``train.build_member``) and computes the paper's panels from ``analysis.mechanistic``:

    invariant_operators  Fig. 2 / 9: G_vv (V × 2V) and G_kq (2V × 2V), one row per cell
    hidden_state         Fig. 3: H_t (ideal), H'_t (D × N) and H''_t at t = 2N_f, value × key
    attention_maps       Fig. 4: the ideal α_{τt} = [x_{τ-1} = x_t] and the trained B_τᵀ C_t
    copy_shift           Fig. 5: x_tᵀ G_vv ξ_τ (copy) and ξ_tᵀ G_kq ξ_τ (shift) on the context
    output_distribution  Fig. 14: histograms of the normalised output entries (correct, wrong,
                         empty; Lemma 5) of any model, a panel per cell: rows = labels, columns =
                         heads M (``analysis.mechanistic.output_entries``)

Panel titles carry the numbers the claims test (the cell's ``mechanistic`` metrics, on the drawn
sequence where the panel shows one). What is drawn — each panel's colour range and the colour level
of each of its entries (uint8: the colormap has 256 levels, so the picture is the same as from the
full-precision matrix), the row names and the title numbers, no more — is written beside the figure
(``figure.png`` -> ``figure-arrays.npz``, compressed, atomically) and the figure is drawn from those
stored arrays, so a fresh checkout, where the weights (``runs/``, not in git) are absent, draws the
same figure from the committed arrays. Neither weights nor arrays: nothing is drawn, and a line on
stderr says why.
"""

from __future__ import annotations

import io
import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from ..analysis import mechanistic as mech  # noqa: E402
from ..engine import open_store  # noqa: E402
from ..report.analysis import MECH, OUTVAR  # noqa: E402
from ..report.cells import fmt_beside, norm, values_equal  # noqa: E402
from ..report.columns import LABEL, N_DIVERGED, N_OK  # noqa: E402
from ..sweep import expand  # noqa: E402
from ..sweep.config import MAX_SAMPLES  # noqa: E402
from ..tasks import build_task  # noqa: E402
from ..train import _DATA_STREAM, build_member, derived_seed  # noqa: E402
from ..util import atomic_write_bytes  # noqa: E402
from .registry import (  # noqa: E402
    FigureConfig,
    FigureContext,
    NotDrawn,
    figure_kind,
    save_png,
    subplots,
    unread_metric,
    wrap_text,
)

CMAP = "inferno"  # the paper's colormap (notes §2.5)
ARRAYS = "-arrays"  # figure.png -> figure-arrays.npz
LEVELS = plt.get_cmap(CMAP).N  # the colormap's levels (256): what a stored panel entry keeps


class MechFigureConfig(FigureConfig):
    where: list[dict[str, Any]] = Field(
        [{}], description="cell selections, in row order: each {config key or label: value} "
        "draws every matching cell (one row each)")
    sample: int = Field(0, ge=0, lt=MAX_SAMPLES,
                        description="which probe sequence (hidden state, maps)")
    metric: str = unread_metric("the trained model's operators (analysis: [mechanistic])",
                                "val.best_acc")

    def column_refs(self) -> list[str]:
        return [k for w in self.where for k in w if k != "label"]

    def metrics(self) -> list[str]:
        return []

    def drawn_seeds(self, ctx) -> str:
        return DRAWN_SEEDS

    def analyses(self) -> list[str]:
        return [MECH]


    def array_fields(self) -> dict[str, Any]:
        """Fields besides ``where`` and ``sample`` that change the stored arrays."""
        return {}


class OperatorsConfig(MechFigureConfig):
    kind: Literal["invariant_operators"]


class HiddenConfig(MechFigureConfig):
    kind: Literal["hidden_state"]


class AttentionConfig(MechFigureConfig):
    kind: Literal["attention_maps"]


class CopyShiftConfig(MechFigureConfig):
    kind: Literal["copy_shift"]


class DistributionConfig(MechFigureConfig):
    kind: Literal["output_distribution"]
    bins: int = Field(60, ge=5, le=400, description="histogram bins over `range`")
    range: tuple[float, float] = Field(
        (-1.0, 2.0), description="normalised entry values drawn (correct ≈ 1, others ≈ 0); "
        "values outside land in the end bins")

    def analyses(self) -> list[str]:
        return [OUTVAR]

    def array_fields(self) -> dict[str, Any]:
        return {"bins": self.bins, "range": list(self.range)}

    def placed(self, rows: Any, keys: list[str]) -> list[tuple[Any, Any]]:
        """A panel per (label, heads M) of the cells the selections match: two cells there (the
        default `where: [{}]` over N = 2 and 4) were drawn over each other in one panel, under
        the title of the last."""
        import pandas as pd

        from ..report.cells import select

        parts = [select(rows, sel) if sel else rows for sel in self.where]
        sub = pd.concat(parts) if parts else rows
        return [(sub[~sub.index.duplicated()], [LABEL, "model.heads"])]

    @model_validator(mode="after")
    def _range(self) -> DistributionConfig:
        if not self.range[0] < self.range[1]:
            raise ValueError(f"range {self.range}: the low end must be below the high end")
        return self


def _matches(run, where: dict[str, Any]) -> bool:
    flat = run.flat()
    for k, v in where.items():
        if k == "label":
            if not (run.label == v or v in [p.strip() for p in run.label.split("/")]):
                return False
        elif k not in flat or not values_equal(flat[k], v):
            return False
    return True


def _runs(ctx: FigureContext) -> list:
    """The profile's runs with the ``--set`` overrides (the spec's own runs drew the figure of
    `plot --set train.lr=0.02` from the weights of the runs without it)."""
    return ctx.runs or expand(ctx.spec, ctx.profile)


def _members(ctx: FigureContext, where: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """(a run of the cell, (run, trained model, task, data seed) of its first saved seed, or None
    when none of its seeds has saved weights) of every matching cell, in the order of the
    selections."""
    store = ctx.store or open_store(ctx.spec, ctx.out("figure", "png").parent.parents[1])
    cells: dict[tuple, list] = {}
    for sel in where:
        for r in _runs(ctx):
            cell = _cell(r)
            if (cell in cells and cells[cell][1] is not None) or not _matches(r, sel):
                continue
            cells.setdefault(cell, [r, None])
            model = store.read_weights(r.run_id, use=lambda st, r=r: build_member(r, st))
            if model is not None:
                cells[cell][1] = (r, model, build_task(r.task), derived_seed(r.seed, _DATA_STREAM))
    return [tuple(c) for c in cells.values()]


def _cell(run) -> tuple:
    """A run's cell: its label and every setting but the seed."""
    return run.label, tuple(sorted((k, str(v)) for k, v in run.flat().items() if k != "seed"))


def _cell_runs(ctx: FigureContext, runs: list) -> list[set[str]]:
    """The run ids (every seed) of each run's cell."""
    ids: dict[tuple, set[str]] = {}
    for r in _runs(ctx):
        ids.setdefault(_cell(r), set()).add(r.run_id)
    return [ids.get(_cell(r), {r.run_id}) for r in runs]


def _finished(ctx: FigureContext, runs: list) -> list[bool]:
    """Whether each run's cell has a finished run under the spec as it is (stored arrays of a
    cell that is not were drawn beside a report of 0 runs finished, after a spec edit)."""
    def cell(values) -> tuple:
        return tuple(norm(v) for v in values)

    table = ctx.table
    if table.empty or not all(k in table for k in ctx.keys):
        return [False] * len(runs)
    done = {cell(row) for row in table[ctx.keys].itertuples(index=False)}
    return [cell(r.label if k == LABEL else r.flat().get(k) for k in ctx.keys) in done
            for r in runs]


def _name(run) -> str:
    return f"{run.label}: D = {run.model.d_model}, N = {run.model.d_state}"


# --- what a figure draws: rows of panels -------------------------------------------------------
# a row is {"name": str, "run": run id | None (arrays written before run ids were stored),
#           "panels": {key: (matrix, (vmin, vmax))}, "metrics": {name: value}}

Panel = tuple[np.ndarray, tuple[float, float]]


def _panel(m, clip: bool = True) -> Panel:
    """One panel: its colour range ([0, 99.9 % quantile] when clipped, else [min, max]) and the
    matrix clipped to it (a value outside the range takes the end colour either way)."""
    m = np.asarray(m, dtype=np.float64)
    lo, hi = (0.0, float(np.quantile(m, 0.999))) if clip else (float(m.min()), float(m.max()))
    hi = max(hi, 1e-12)
    return np.clip(m, lo, hi), (lo, hi)


def _row(run, panels: dict[str, Panel], metrics: dict[str, float]) -> dict[str, Any]:
    return {"name": _name(run), "run": run.run_id, "panels": panels,
            "metrics": {k: float(v) for k, v in metrics.items()}}


def arrays_path(figure: Path) -> Path:
    """Where a mechanistic figure's arrays live: ``figure.png`` -> ``figure-arrays.npz``."""
    return figure.with_name(f"{figure.stem}{ARRAYS}.npz")


def _config_key(cfg: MechFigureConfig) -> str:
    """What the arrays were drawn for (a changed selection makes them stale)."""
    return json.dumps({"kind": cfg.kind, "where": cfg.where, "sample": cfg.sample,
                       **cfg.array_fields()}, sort_keys=True, default=str)


def _levels(panel: Panel) -> np.ndarray:
    """The colour level (0..LEVELS-1) of each entry, as the colormap bins the normalised value."""
    m, (lo, hi) = panel
    x = (m - lo) / (hi - lo) * LEVELS
    return np.clip(np.floor(x), 0, LEVELS - 1).astype(np.uint8)


def _values(levels: np.ndarray, lim: tuple[float, float]) -> np.ndarray:
    """A value in the middle of each level's bin (drawn in that level's colour)."""
    lo, hi = lim
    return lo + (levels.astype(np.float64) + 0.5) / LEVELS * (hi - lo)


def pack(rows: list[dict[str, Any]], cfg: MechFigureConfig) -> bytes:
    """The compressed .npz of a figure's rows: ``r<i>.<panel>`` (uint8: the colour level of each
    entry), ``r<i>.<panel>.lim`` (the colour range vmin, vmax), ``r<i>.metrics`` with
    ``r<i>.metric_names``, ``names`` (row titles), ``runs`` (the run id each row was computed
    from) and ``config`` (the figure's selection)."""
    data: dict[str, np.ndarray] = {"config": np.array(_config_key(cfg)),
                                   "names": np.array([r["name"] for r in rows], dtype=str),
                                   "runs": np.array([r["run"] for r in rows], dtype=str)}
    for i, r in enumerate(rows):
        for k, panel in r["panels"].items():
            data[f"r{i}.{k}"] = _levels(panel)
            data[f"r{i}.{k}.lim"] = np.array(panel[1], dtype=np.float64)
        data[f"r{i}.metric_names"] = np.array(list(r["metrics"]), dtype=str)
        data[f"r{i}.metrics"] = np.array(list(r["metrics"].values()), dtype=np.float64)
    buf = io.BytesIO()
    np.savez_compressed(buf, **data)
    return buf.getvalue()


class StaleArrays(ValueError):
    """A figure's stored arrays of another selection, or of runs not of the profile's cells: drawn
    for the spec as it was before an edit, as the image beside them was."""


MAX_ARRAYS_BYTES = 64 << 20  # a figure's .npz is kilobytes to a few MB (uint8 levels, compressed)


def unpack(source, cfg: MechFigureConfig) -> list[dict[str, Any]]:
    """The rows of a figure's .npz (a path or bytes), each panel's entries in the middle of their
    colour level's bin; ValueError when they were drawn for another selection than ``cfg``'s or
    are not what ``pack`` writes (a damaged or foreign archive: not a zip, entries of the wrong
    type or shape, colour ranges that are not numbers), OSError when the path is not a regular
    file of at most ``MAX_ARRAYS_BYTES`` (a FIFO blocked forever)."""
    import tokenize
    import zipfile
    import zlib

    from ..util import npy_size_problem, read_small

    data = (source if isinstance(source, bytes)
            else read_small(source, MAX_ARRAYS_BYTES, follow_links=True))
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if sum(i.file_size for i in z.zip.infolist()) > 16 * MAX_ARRAYS_BYTES:
                raise ValueError("its entries unpack to more than "
                                 f"{16 * MAX_ARRAYS_BYTES >> 20} MiB")
            for info in z.zip.infolist():  # (an entry's header declaring 2**40 elements: a
                with z.zip.open(info) as f:  # MemoryError, 'out of memory', ended the command)
                    why = npy_size_problem(f, info.file_size)
                if why is not None:
                    raise ValueError(f"{info.filename}: {why}")
            if str(z["config"]) != _config_key(cfg):
                raise StaleArrays(f"they were drawn for another selection ({z['config']})")
            names = _texts(z["names"])
            # arrays written before the run ids were stored: rows of unknown runs (None)
            runs = _texts(z["runs"]) if "runs" in z.files else [None] * len(names)
            if len(runs) != len(names):
                raise ValueError("runs do not match names")
            return [_unpack_row(z, i, name, run) for i, (name, run) in enumerate(zip(names, runs))]
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError,
            tokenize.TokenError) as err:  # (a byte changed in a member's compressed data, in
        # its zip header's method or version, or in a member's .npy header left unclosed: a
        # traceback in `plot` and `figures`)
        raise ValueError(f"not an .npz archive ({err})") from None


def _texts(a: np.ndarray) -> list[str]:
    if a.ndim != 1 or a.dtype.kind != "U":
        raise ValueError("names (or runs) are not a list of text")
    return a.tolist()


def _unpack_row(z, i: int, name: str, run: str | None) -> dict[str, Any]:
    p = f"r{i}."
    panels = {}
    for k in z.files:
        if k.startswith(p) and k.endswith(".lim"):
            lim, levels = z[k], z[k[:-4]]
            if lim.shape != (2,) or lim.dtype.kind != "f" or not np.isfinite(lim).all():
                raise ValueError(f"{k} is not a colour range (two numbers)")
            if levels.ndim != 2 or levels.dtype != np.uint8:
                raise ValueError(f"{k[:-4]} is not a matrix of colour levels")
            panels[k[len(p):-4]] = (_values(levels, (float(lim[0]), float(lim[1]))),
                                    (float(lim[0]), float(lim[1])))
    names, values = _texts(z[f"{p}metric_names"]), z[f"{p}metrics"]
    if values.shape != (len(names),) or values.dtype.kind != "f":
        raise ValueError(f"{p}metrics do not match {p}metric_names")
    return {"name": name, "run": run, "panels": panels, "metrics": dict(zip(names, values.tolist()))}


def _figure(ctx: FigureContext, cfg: MechFigureConfig, path: Path, compute, draw,
            name=_name) -> bool:
    """Compute the rows from the saved weights (and store them), else read the stored arrays;
    draw the figure from the stored arrays either way (``NotDrawn`` says why it cannot). A
    cell whose weights are gone keeps its stored row (one run's weights deleted, or one run
    trained into a fresh clone, rewrote the arrays without the other cells and drew the figure
    without them) while it is finished under the spec as it is (after a spec edit the old
    arrays were drawn beside a report of 0 runs finished). A stored row is of the cell whose
    runs it names: arrays copied from another profile (or another --set) are unusable, and were
    drawn as this profile's. A stored row of a named run is drawn under ``name`` of its cell
    as the spec is now (``compute`` names a row so): after a label was renamed or two labels
    swapped (the same runs), the rows were drawn under the old labels, the figure contradicting
    the report, and the rows of cells whose weights are left were dropped as not stored."""
    arrays = arrays_path(path)
    selected = _members(ctx, cfg.where)
    if not selected:  # koren2026-fig14's N = 4 figure in smoke (N 2 only) said `run` trains them
        raise NotDrawn(f"profile {ctx.profile} has no cell its `where` selects", stale=True)
    unmatched = [sel for sel in cfg.where if not any(_matches(r, sel) for r in _runs(ctx))]
    partly = ""
    if unmatched:  # koren2026-fig2 in smoke drew its untrained row alone under the title
        # 'trained (top) vs untrained control (bottom)', without a word; said once drawn (it
        # was said before, also above the line saying the figure was not drawn at all)
        shown = ", ".join("{" + ", ".join(f"{k}: {v}" for k, v in sel.items()) + "}"
                          for sel in unmatched)
        partly = (f"warning: {path.name} drawn without {len(unmatched)} of its "
                  f"{len(cfg.where)} selections: profile {ctx.profile} has no cell of {shown}")
    fin = _finished(ctx, [r for r, _ in selected])
    ids = _cell_runs(ctx, [r for r, _ in selected])
    computed = {i: compute(cfg, *m) for i, (_, m) in enumerate(selected) if m is not None}
    stored, err = None, None
    if len(computed) < len(selected) and arrays.exists():
        try:
            stored = unpack(arrays, cfg)
        except (OSError, ValueError, KeyError) as e:
            err = e
        foreign = [row["run"] for row in stored or [] if row["run"] not in {None, *set().union(*ids)}]
        if foreign:
            err = StaleArrays(f"its rows were computed from runs that are not of this "
                              f"profile's cells ({foreign[0]}{', ...' if len(foreign) > 1 else ''})")
            stored = None
    aligned = stored is not None and len(stored) == len(selected) and all(
        stored[i]["run"] is not None or row["name"] == stored[i]["name"]
        for i, row in computed.items()) and all(
        row["run"] is None or row["run"] in ids[i] for i, row in enumerate(stored))
    if stored is not None and not aligned and not computed and all(fin):
        # arrays of another count of cells: drawn as they are; the cells none of their rows
        # names are not drawn (a cell whose every run diverged was left out without a word)
        named = all(row["run"] is not None for row in stored)
        have = ({i for i, got in enumerate(ids) if any(row["run"] in got for row in stored)}
                if named else set(range(len(selected))))
        rows = [_renamed(row, next((r for (r, _), i in zip(selected, ids) if row["run"] in i),
                                   None), name) for row in stored]
    else:
        have = set(computed) | {i for i in range(len(selected)) if aligned and fin[i]}
        rows = [computed[i] if i in computed else _renamed(stored[i], selected[i][0], name)
                for i in sorted(have)]
    run = f"`{ctx.run_command}`"
    if computed:
        data = pack(rows, cfg)
        atomic_write_bytes(arrays, data)
        rows = unpack(data, cfg)
    elif not have:
        if not any(fin):
            raise NotDrawn(f"no finished cell of profile {ctx.profile} to draw; {run} trains "
                           "them", stale=True)
        if err is not None:  # drawn for the spec before an edit: so is the old image, which
            # was kept beside 'not drawn' (the front page linked it as the figure)
            raise NotDrawn(f"{arrays.name} is unusable ({err}); re-run {run} to rebuild it",
                           stale=isinstance(err, StaleArrays) and "it was drawn from those arrays")
        raise NotDrawn(f"no saved weights of its cells (runs/, not in git) and no {arrays.name}; "
                       f"{run} trains them")
    if not rows:
        return False
    # a cell whose every run diverged has no saved weights and `run` does not train it again
    # (it was counted among the cells whose weights are gone, 'run trains them again', and the
    # image named neither)
    dead = _diverged(ctx, [r for r, _ in selected])
    lost = [i for i, f in enumerate(fin) if f and i not in have and not dead[i]]
    gone = [i for i, f in enumerate(fin) if f and i not in have and dead[i]]
    if lost:
        print(f"warning: {path.name} drawn without {len(lost)} of its {len(selected)} cells: "
              f"their saved weights (runs/, not in git) are gone and {arrays.name} does not "
              f"hold them; {run} trains them again", file=sys.stderr)
    if gone:
        print(f"warning: {path.name} drawn without {len(gone)} of its {len(selected)} cells: "
              f"every run of {_names(selected, gone, name)} diverged (no saved weights)",
              file=sys.stderr)
    if partly:
        print(partly, file=sys.stderr)
    dropped = "; ".join(t for t in (
        f"{_names(selected, gone, name)} (every run diverged)" if gone else "",
        f"{_names(selected, lost, name)} (saved weights gone)" if lost else "") if t)
    draw(ctx, cfg, path, rows, dropped)
    return True


def _names(selected: list, which: list[int], name) -> str:
    """The selected cells ``which`` by their row names, a name of several cells with their
    count ('MHA (2 cells)')."""
    counts: dict[str, int] = {}
    for i in which:
        n = name(selected[i][0])
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(n if k == 1 else f"{n} ({k} cells)" for n, k in counts.items())


def _diverged(ctx: FigureContext, runs: list) -> list[bool]:
    """Whether every finished run of each run's cell diverged (no saved weights to draw)."""
    table = ctx.table
    if table.empty or not all(k in table for k in ctx.keys) or N_OK not in table:
        return [False] * len(runs)
    dead = {tuple(norm(v) for v in row[:-2]) for row in table[[*ctx.keys, N_OK, N_DIVERGED]]
            .itertuples(index=False) if not row[-2] and row[-1]}
    return [tuple(norm(r.label if k == LABEL else r.flat().get(k)) for k in ctx.keys) in dead
            for r in runs]


def _renamed(row: dict[str, Any], run, name) -> dict[str, Any]:
    """A stored ``row`` under ``name`` of ``run``, the planned run of its cell; a row that names
    no run (arrays written before run ids were stored) or of no cell keeps its stored name."""
    return row if run is None or row["run"] is None else {**row, "name": name(run)}


# --- drawing ----------------------------------------------------------------------------------


def _show(ax, panel: Panel, title: str, xlabel: str, ylabel: str):
    m, (lo, hi) = panel
    im = ax.imshow(m, cmap=CMAP, vmin=lo, vmax=hi, aspect="auto", interpolation="nearest")
    ax.set_title(_fitted(ax, title, 8), fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    return im


def _fitted(ax, title: str, fontsize: float) -> str:
    """A panel's title wrapped to its column of the figure (a 140-letter label ran its title
    over the next panels and off the image); a title that fits is left as it is. One that does
    not is wrapped to the panel itself, about 3/4 of its column (beside its colour bar and y
    label: wrapped to the whole column, it still ran off the image's left edge)."""
    column = ax.figure.get_figwidth() / ax.get_subplotspec().get_gridspec().ncols
    fits = wrap_text(title, column, fontsize) == title
    return title if fits else wrap_text(title, 0.75 * column, fontsize)


def _halves(ax, V: int, rows: bool, cols: bool) -> None:
    kw = dict(color="w", lw=0.6, ls="--")
    if cols:
        ax.axvline(V - 0.5, **kw)
    if rows:
        ax.axhline(V - 0.5, **kw)


DRAWN_SEEDS = "one seed"  # what every kind here draws of a cell: one trained model


def _title(ctx: FigureContext, cfg: FigureConfig) -> str:
    """The figure's title, its 'mean of seeds' words (the spec's) saying what is drawn: one
    seed's model per cell (the first with saved weights). They were rewritten as the cells'
    aggregation, 'mean of 3 seeds', above the matrices of one seed."""
    return ctx.title(cfg)  # (of cfg.drawn_seeds)


def _save(fig, ctx: FigureContext, cfg: FigureConfig, path: Path, note: str,
          dropped: str = "") -> None:
    fig.suptitle(f"{wrap_text(_title(ctx, cfg), fig.get_figwidth(), 9)}\n{note}"
                 + _dropped_line(fig, dropped), fontsize=9)
    save_png(fig, path, dpi=120)


def _dropped_line(fig, dropped: str) -> str:
    """The title's line naming the selected cells not drawn ('' when every one is)."""
    return "\n" + wrap_text(f"not drawn: {dropped}", fig.get_figwidth(), 9) if dropped else ""


def _grid(path: Path, n_rows: int, n_cols: int, w: float = 3.4, h: float = 3.0):
    return subplots(path, 120, n_rows, n_cols, figsize=(w * n_cols + 0.6, h * n_rows + 1.0),
                    squeeze=False, constrained_layout=True)


def _probe(task, seed: int, sample: int):
    """Test sequence number ``sample`` of the run's task alone (ids (1, L), targets (1, L)): the
    test stream is addressed by index, so this is row ``sample`` of ``mech.probe_batch``, which
    drew every sequence before it too (a figure's ``sample: 10**8`` allocated gigabytes after
    training, and failed)."""
    import torch

    from ..tasks.base import TEST

    b = task.sample(torch.tensor([int(seed)]), TEST, torch.tensor([[sample]]))
    return b.x[0], b.y[0]


# --- Fig. 2 / 9 ---------------------------------------------------------------------------------


def _operators_row(cfg, run, model, task, seed) -> dict[str, Any]:
    ops = mech.operators(mech.circuit(model))
    m = mech.operator_metrics(ops)
    keys = ("gvv.diag_hit", "gvv.dominance", "gkq.diag_hit", "gkq.dominance", "gkq.block_share")
    return _row(run, {"G_vv": _panel(ops.G_vv.numpy()), "G_kq": _panel(ops.G_kq.numpy())},
                {k: m[k] for k in keys})


def _draw_operators(ctx, cfg, path, rows, dropped: str = "") -> None:
    fig, axes = _grid(path, len(rows), 2, w=4.2, h=3.4)
    for i, r in enumerate(rows):
        m, P = r["metrics"], r["panels"]
        V = P["G_vv"][0].shape[0]
        a = axes[i, 0]
        hit = _shown(ctx, m, "gvv.diag_hit", f"{m['gvv.diag_hit']:.2f}")
        dom = _shown(ctx, m, "gvv.dominance", _one_decimal(m["gvv.dominance"]))
        im = _show(a, P["G_vv"], f"{r['name']}\nG_vv: value diag hit {hit}, dominance {dom}",
                   "ξ_τ = [x_(τ-1) | x_τ]", "output y_t")
        _halves(a, V, rows=False, cols=True)
        fig.colorbar(im, ax=a, shrink=0.8)
        a = axes[i, 1]
        hit = _shown(ctx, m, "gkq.diag_hit", f"{m['gkq.diag_hit']:.2f}")
        dom = _shown(ctx, m, "gkq.dominance", _one_decimal(m["gkq.dominance"]))
        share = _shown(ctx, m, "gkq.block_share", f"{m['gkq.block_share']:.2f}")
        im = _show(a, P["G_kq"], f"G_kq: key diag hit {hit}, dominance {dom}, block share {share}",
                   "query pair ξ_t = [x_(t-1) | x_t]", "stored pair ξ_τ = [x_(τ-1) | x_τ]")
        _halves(a, V, rows=True, cols=True)
        fig.colorbar(im, ax=a, shrink=0.8)
    _save(fig, ctx, cfg, path, "Eq. 10 predicts G_vv ≈ (0 | I) and G_kq ≈ I on its "
          "(x_(τ-1), x_t) block (top right), ≈ 0 elsewhere; colour clipped to [0, 99.9 %]", dropped)


@figure_kind("invariant_operators", OperatorsConfig)
def invariant_operators(ctx: FigureContext, cfg: OperatorsConfig, path: Path) -> bool:
    """koren2026 Fig. 2 / 9: G_vv and G_kq of the trained model of each selected cell."""
    return _figure(ctx, cfg, path, _operators_row, _draw_operators)


# --- Fig. 3 -------------------------------------------------------------------------------------


def _hidden_row(cfg, run, model, task, seed) -> dict[str, Any]:
    kappa = task.config.kappa
    c = mech.circuit(model)
    ops = mech.operators(c)
    ids, _ = _probe(task, seed, cfg.sample)
    _, Hp, H2 = mech.hidden_states(c, ops, ids, 2 * kappa - 1)
    H = mech.ideal_hidden(ids, kappa, c.V)
    m = mech.hidden_metrics(c, ops, ids, kappa)
    ki, vi = mech.key_ids(c.V), mech.value_ids(c.V)
    quad = lambda X: X[0][vi][:, ki].numpy()  # noqa: E731
    return _row(run, {"H_ideal": _panel(quad(H)), "H_prime": _panel(Hp[0].numpy(), clip=False),
                      "H_dprime": _panel(quad(H2))},
                {k: m[k] for k in ("hidden.hit", "hidden.snr")})


def _claim_bounds(spec: Any, metric: str) -> list[float]:
    """The thresholds the spec's claims (and their preconditions) set on ``metric``."""
    out = []
    for c in getattr(spec, "claims", None) or []:
        items = [c, *(c.get("given") or [])] if isinstance(c, dict) else []
        out += [float(it["value"]) for it in items if isinstance(it, dict)
                and it.get("metric") == metric and "op" in it
                and isinstance(it.get("value"), (int, float))
                and not isinstance(it.get("value"), bool)]
    return out


def _shown(ctx, m: dict, metric: str, text: str) -> str:
    """A title's number ``text`` of ``m[metric]``, with the digits that keep it on its side of
    the nearest threshold a claim sets on the metric (``fmt_beside``): a G_kq diag hit of 0.8984
    was titled 0.90 beside a FAIL of `gkq.diag_hit >= 0.9`, a dominance of 2.96 3.0 beside one
    of `>= 3`."""
    v = float(m[metric])
    bounds = _claim_bounds(getattr(ctx, "spec", None), metric)
    if not bounds or not math.isfinite(v):
        return text
    return fmt_beside(v, min(bounds, key=lambda b: abs(v - b)), text)


def _one_decimal(v: float) -> str:
    """A ratio with one decimal, but one significant digit where one decimal would read as a
    signed zero (koren2026-fig3's untrained control, SNR -0.01, was titled 'SNR -0.0')."""
    text = f"{v:.1f}"
    return f"{v:.1g}" if v != 0 and float(text) == 0 else text


def _draw_hidden(ctx, cfg, path, rows, dropped: str = "") -> None:
    fig, axes = _grid(path, len(rows), 3)
    for i, r in enumerate(rows):
        m, P = r["metrics"], r["panels"]
        _show(axes[i, 0], P["H_ideal"], f"{r['name']}\nH_t = Σ v_n k_nᵀ (ideal)", "key token",
              "value token")
        _show(axes[i, 1], P["H_prime"], "H'_t = P_out h_t (compressed)", "N", "D")
        hit = _shown(ctx, m, "hidden.hit", f"{m['hidden.hit']:.2f}")
        snr = _shown(ctx, m, "hidden.snr", _one_decimal(m["hidden.snr"]))
        _show(axes[i, 2], P["H_dprime"], f"H''_t = Π_v,out h_t Π_q,in: hit {hit}, SNR {snr}",
              "key token", "value token")
    _save(fig, ctx, cfg, path, "t = 2N_f (end of the context), one test sequence; value × "
          "key quadrant; the claim: H''_t ≈ H_t (the fact entries stand out)", dropped)


@figure_kind("hidden_state", HiddenConfig)
def hidden_state(ctx: FigureContext, cfg: HiddenConfig, path: Path) -> bool:
    """koren2026 Fig. 3: H_t (ideal), H'_t and H''_t = Π_v,out h_t Π_q,in at t = 2N_f."""
    return _figure(ctx, cfg, path, _hidden_row, _draw_hidden)


# --- Fig. 4 -------------------------------------------------------------------------------------


def _attention_row(cfg, run, model, task, seed) -> dict[str, Any]:
    c = mech.circuit(model)
    ops = mech.operators(c)
    ids, y = _probe(task, seed, cfg.sample)
    trained, ideal = mech.attention_maps(c, ops, ids)
    m = mech.attention_metrics(c, ops, ids, y, task.config.kappa)
    return _row(run, {"ideal": _panel(ideal[0].numpy()), "trained": _panel(trained[0].numpy())},
                {k: m[k] for k in ("attn.hit", "attn.corr")})


def _draw_attention(ctx, cfg, path, rows, dropped: str = "") -> None:
    fig, axes = _grid(path, len(rows), 2, w=3.6, h=3.3)
    for i, r in enumerate(rows):
        m, P = r["metrics"], r["panels"]
        _show(axes[i, 0], P["ideal"], f"{r['name']}\nideal α_τt = [x_(τ-1) = x_t]",
              "τ (attended)", "t (query)")
        hit = _shown(ctx, m, "attn.hit", f"{m['attn.hit']:.2f}")
        corr = _shown(ctx, m, "attn.corr", f"{m['attn.corr']:.2f}")
        _show(axes[i, 1], P["trained"], f"model B_τᵀ C_t: hit {hit}, corr {corr}",
              "τ (attended)", "t (query)")
    _save(fig, ctx, cfg, path, "one test sequence (causal part); the claim: the trained "
          "map ≈ the ideal one on the query rows", dropped)


@figure_kind("attention_maps", AttentionConfig)
def attention_maps(ctx: FigureContext, cfg: AttentionConfig, path: Path) -> bool:
    """koren2026 Fig. 4: the ideal attention map [x_{τ-1} = x_t] and the trained B_τᵀ C_t."""
    return _figure(ctx, cfg, path, _attention_row, _draw_attention)


# --- Fig. 5 -------------------------------------------------------------------------------------


def _copy_shift_row(cfg, run, model, task, seed) -> dict[str, Any]:
    kappa = task.config.kappa
    ops = mech.operators(mech.circuit(model))
    ids, _ = _probe(task, seed, cfg.sample)
    Mv, Mk = mech.copy_shift_maps(ops, ids, kappa)
    m = mech.copy_shift_metrics(ops, ids, kappa)
    return _row(run, {"copy": _panel(Mv[0].numpy()), "shift": _panel(Mk[0].numpy())},
                {k: m[k] for k in ("conv.copy_hit", "conv.shift_hit")})


def _draw_copy_shift(ctx, cfg, path, rows, dropped: str = "") -> None:
    fig, axes = _grid(path, len(rows), 2, w=3.6, h=3.3)
    for i, r in enumerate(rows):
        m, P = r["metrics"], r["panels"]
        copy = _shown(ctx, m, "conv.copy_hit", f"{m['conv.copy_hit']:.2f}")
        shift = _shown(ctx, m, "conv.shift_hit", f"{m['conv.shift_hit']:.2f}")
        _show(axes[i, 0], P["copy"], f"{r['name']}\ncopy x_tᵀ G_vv ξ_τ: hit {copy}", "τ", "t")
        _show(axes[i, 1], P["shift"], f"shift ξ_tᵀ G_kq ξ_τ: hit {shift}", "τ", "t")
    _save(fig, ctx, cfg, path, "the context (2N_f tokens) of one test sequence; hits on "
          "its value rows: copy on the main diagonal, shift on τ = t − 1", dropped)


@figure_kind("copy_shift", CopyShiftConfig)
def copy_shift(ctx: FigureContext, cfg: CopyShiftConfig, path: Path) -> bool:
    """koren2026 Fig. 5: Conv1D copy (x_tᵀ G_vv ξ_τ, main diagonal) and shift (ξ_tᵀ G_kq ξ_τ)."""
    return _figure(ctx, cfg, path, _copy_shift_row, _draw_copy_shift)


# --- Fig. 14 ------------------------------------------------------------------------------------

ENTRIES = (("correct", "correct value (y^i)", "tab:green"),
           ("wrong", "other values of its facts (y^j)", "tab:red"),
           ("empty", "values not in its facts (y^l)", "tab:blue"))


def _label(run) -> str:
    """An output-distribution row's name: its label (a row of panels per label, one per M)."""
    return run.label


def _distribution_row(cfg, run, model, task, seed) -> dict[str, Any]:
    e = mech.output_entries(model, task, seed)
    lo, hi = cfg.range
    edges = np.linspace(lo, hi, cfg.bins + 1)
    panels = {}
    for k, _, _ in ENTRIES:
        v = np.clip(e[k].numpy(), lo, hi)
        counts, _ = np.histogram(v, edges)
        dens = counts / max(len(v), 1) / (edges[1] - edges[0])  # a density: area 1
        panels[k] = (dens[None, :], (0.0, max(float(dens.max()), 1e-12)))
    m = mech.output_metrics(model, task, seed)
    return {"name": _label(run), "run": run.run_id, "panels": panels,
            "metrics": {"M": float(getattr(run.model, "heads", 1)),
                        "N": float(getattr(run.model, "d_state", float("nan"))),
                        **{k: m[k] for k in ("out.noise_var", "out.wrong_var", "out.empty_var")}}}


def _draw_distribution(ctx, cfg, path, rows, dropped: str = "") -> None:
    labels = list(dict.fromkeys(r["name"] for r in rows))
    heads = sorted({r["metrics"]["M"] for r in rows})
    fig, axes = subplots(path, 120, len(labels), len(heads), figsize=(3.0 * len(heads) + 0.6,
                                                                   2.2 * len(labels) + 1.4),
                         squeeze=False, sharex=True, constrained_layout=True)
    lo, hi = cfg.range
    x = np.linspace(lo, hi, cfg.bins + 1)
    for ax in axes.flat:
        ax.axis("off")
    for r in rows:
        i, j = labels.index(r["name"]), heads.index(r["metrics"]["M"])
        ax, m = axes[i, j], r["metrics"]
        ax.axis("on")
        for k, text, colour in ENTRIES:
            ax.stairs(r["panels"][k][0][0], x, color=colour, label=text)
        for v in (0.0, 1.0):
            ax.axvline(v, color="0.6", lw=0.6, ls="--")
        ax.set_ylim(bottom=0)
        wrong = _shown(ctx, m, "out.wrong_var", f"{m['out.wrong_var']:.3f}")
        empty = _shown(ctx, m, "out.empty_var", f"{m['out.empty_var']:.3f}")
        ax.set_title(_fitted(ax, f"{r['name']}, M = {m['M']:g}, N = {m['N']:g}: var wrong "
                             f"{wrong}, empty {empty}", 7), fontsize=7)
        ax.tick_params(labelsize=7)
        if j == 0:
            ax.set_ylabel("density", fontsize=8)
        if i == len(labels) - 1:
            ax.set_xlabel("normalised output entry", fontsize=8)
    axes[0, 0].legend(fontsize=6, loc="upper right")
    note = ("value logits at the query positions of 256 test sequences, per query minus the mean "
            "of the other values, over the mean margin (correct ≈ 1, others ≈ 0; values outside "
            f"[{lo:g}, {hi:g}] in the end bins). Lemma 5: MHA's spread shrinks with M")
    fig.suptitle(wrap_text(_title(ctx, cfg), fig.get_figwidth(), 9) + "\n"
                 + "\n".join(textwrap.wrap(note, max(30, int(fig.get_figwidth() * 72 / 5))))
                 + _dropped_line(fig, dropped), fontsize=9)
    # atomically, as every figure (it wrote in place: `figures`, the front page or an image
    # viewer reading it while `plot` wrote, or a `plot` killed then, saw a torn PNG)
    save_png(fig, path, dpi=120)


@figure_kind("output_distribution", DistributionConfig)
def output_distribution(ctx: FigureContext, cfg: DistributionConfig, path: Path) -> bool:
    """koren2026 Fig. 14: normalised output-entry histograms per cell (rows label, columns M)."""
    return _figure(ctx, cfg, path, _distribution_row, _draw_distribution, name=_label)


__all__ = ["arrays_path", "attention_maps", "copy_shift", "hidden_state", "invariant_operators",
           "output_distribution", "pack", "unpack"]
