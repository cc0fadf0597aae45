"""Stage 5 (report): per-cell metrics from the analyses stored in run records.

``decay_histogram`` (huang2025 Fig. 1): every run records histograms of ``e^{-λΔ_t}`` before
timestep n and from n on. :func:`histogram_table` sums them over the seeds of a cell (the
figure draws it; ``histograms.csv`` caches it when there are no run records), and
:func:`decay_metrics` turns it into claim-checkable columns of the cell table:

* ``decay.low_before`` — fraction of the values before n that are below ``LOW`` (≈ 0),
* ``decay.high_after`` — fraction of the values from n on that are above ``HIGH`` (≈ 1),
* ``decay.high_all`` — fraction of all values above ``HIGH``,
* ``decay.split`` — total-variation distance between the before-n and from-n distributions
  (0: the decay does not depend on the position, as for S4D; 1: disjoint).

Plot-time analyses (:data:`WEIGHT_ANALYSES`) are computed from each run's saved weights
(``spec.save_weights``; ``train.build_member``): ``mechanistic`` (koren2026 Figs. 2-5,
``analysis.mechanistic``) and ``output_variance`` (koren2026 Figs. 14-15). :func:`weights_table`
has one row per run with weights (label, cell keys, seed, the analysis's metrics);
``<analysis>.csv`` caches it when there are no weights (a fresh checkout), and its per-cell mean
over seeds (:func:`cell_means`) feeds the claims. The mechanistic figures keep what they draw in
``<figure>-arrays.npz`` (``plots.mechanistic``) for the same reason; ``output_variance`` has no
figure kind of its own (its numbers reach figures and claims as cell columns only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.mechanistic import MECH_METRICS, OUT_METRICS, mechanistic_metrics, output_metrics
from ..store import TableError, decode_config_cells, metric_range_problem, read_table
from ..sweep import flatten
from ..tasks import build_task
from ..train import _DATA_STREAM, build_member, derived_seed
from ..util import pairs_text
from .cells import norm
from .columns import LABEL, N_DIVERGED, OK, STATUS

DECAY = "decay_histogram"
MECH = "mechanistic"
OUTVAR = "output_variance"
LOW, HIGH = 0.1, 0.9
DECAY_METRICS = ("decay.low_before", "decay.high_after", "decay.high_all", "decay.split")
# plot-time analyses: name -> (metrics of one model fn(model, task, data_seed), their names)
WEIGHT_ANALYSES = {MECH: (mechanistic_metrics, MECH_METRICS), OUTVAR: (output_metrics, OUT_METRICS)}
ANALYSIS_METRICS: dict[str, tuple[str, ...]] = {
    DECAY: DECAY_METRICS, **{k: v[1] for k, v in WEIGHT_ANALYSES.items()}}
_HIST_COLS = ("part", "bin", "bins", "count")


def analysis_metrics(analyses: list[str]) -> list[str]:
    """The cell columns the spec's ``analysis`` list adds (claims may test them)."""
    return [m for a in analyses for m in ANALYSIS_METRICS.get(a, ())]


def _frozen(v: Any) -> Any:
    """A cell key's value as pandas can group it: a list (a list-valued key's, ``train.betas``)
    as a tuple, at any depth (a list is unhashable: 'unhashable type: list' tracebacks in `run`,
    after training, and in `plot`)."""
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


def _thawed(v: Any) -> Any:
    """``_frozen``'s tuple as the list it was."""
    return [_thawed(x) for x in v] if isinstance(v, tuple) else v


def _grouped(df: pd.DataFrame, keys: list[str], sort: bool = False):
    """``df.groupby(keys, sort=sort, dropna=False)`` over list-valued keys too (``_frozen``)."""
    listed = [k for k in keys if df[k].map(lambda v: isinstance(v, list)).any()]
    if listed:
        df = df.assign(**{k: df[k].map(_frozen) for k in listed})
    return df.groupby(keys, sort=sort, dropna=False)


def _lists_back(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``df`` with the tuples of its ``keys`` columns (``_grouped``'s) as lists again."""
    tupled = [k for k in keys if k in df and df[k].map(lambda v: isinstance(v, tuple)).any()]
    return df.assign(**{k: df[k].map(_thawed) for k in tupled}) if tupled else df


def histogram_table(records: list[dict], keys: list[str]) -> pd.DataFrame:
    """Decay histograms summed over seeds: rows (label, <keys>..., part, bin, bins, count)."""
    rows = []
    keys = [k for k in keys if k != LABEL]
    for rec in records:
        h = (rec.get("analysis") or {}).get(DECAY)
        if not h or rec.get(STATUS) != OK:
            continue
        flat = flatten(rec.get("config") or {})
        cell = {LABEL: rec[LABEL], **{k: flat.get(k) for k in keys}}
        for part in ("before", "after"):
            for b, c in enumerate(h[part]):
                rows.append({**cell, "part": part, "bin": b, "bins": h["bins"], "count": c})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    by = [c for c in df.columns if c != "count"]
    return _lists_back(_grouped(df, by, sort=True)["count"].sum().reset_index(), by)


def _dist(g: pd.DataFrame, part: str | None, bins: int) -> np.ndarray:
    sub = g if part is None else g[g["part"] == part]
    c = sub.groupby("bin")["count"].sum().reindex(range(bins), fill_value=0).to_numpy(float)
    return c / c.sum() if c.sum() else np.full(bins, np.nan)


def decay_metrics(hist: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of the histogram table with the ``decay.*`` columns."""
    if hist.empty:
        return pd.DataFrame()
    keys = [c for c in hist.columns if c not in _HIST_COLS]
    rows = []
    for cell, g in _grouped(hist, keys):
        cell = cell if isinstance(cell, tuple) and len(cell) == len(keys) else (cell,)
        bins = int(g["bins"].iloc[0])
        centers = (np.arange(bins) + 0.5) / bins
        before, after, both = _dist(g, "before", bins), _dist(g, "after", bins), _dist(g, None, bins)
        rows.append({**dict(zip(keys, map(_thawed, cell))),
                     "decay.low_before": float(before[centers < LOW].sum()),
                     "decay.high_after": float(after[centers > HIGH].sum()),
                     "decay.high_all": float(both[centers > HIGH].sum()),
                     "decay.split": float(0.5 * np.abs(after - before).sum())})
    return pd.DataFrame(rows)


def weights_table(name: str, runs: list, store, keys: list[str]) -> pd.DataFrame:
    """Plot-time analysis ``name`` of every run whose trained weights are saved: rows (label,
    <keys>..., seed, <its metrics>), probed on the run's own test sequences."""
    fn, _ = WEIGHT_ANALYSES[name]
    rows = []
    keys = [k for k in keys if k != LABEL]
    for r in runs:
        model = store.read_weights(r.run_id, use=lambda st, r=r: build_member(r, st))
        if model is None:
            continue
        m = fn(model, build_task(r.task), derived_seed(r.seed, _DATA_STREAM))
        flat = r.flat()
        rows.append({LABEL: r.label, **{k: flat.get(k) for k in keys}, "seed": r.seed, **m})
    return pd.DataFrame(rows)


MAX_BINS = 1 << 16  # a histogram's bins (the analysis records 50)


def read_histograms(path) -> pd.DataFrame:
    """A committed ``histograms.csv`` (:func:`histogram_table`), checked: its columns, numbers
    where numbers belong, 1 <= bins <= ``MAX_BINS``, 0 <= bin < bins, counts >= 0; else
    ``TableError`` (a foreign or damaged table: a traceback, or ``bins`` of 10**12 allocated
    without bound)."""
    df = read_table(path, (LABEL, *_HIST_COLS), numeric=_HIST_COLS[1:])
    if len(df) and not ((df["bins"] >= 1) & (df["bins"] <= MAX_BINS) & (df["bin"] >= 0)
                        & (df["bin"] < df["bins"]) & (df["count"] >= 0)).all():
        raise TableError(f"{path}: bins, bin or count out of range (1 <= bins <= {MAX_BINS}, "
                         "0 <= bin < bins, count >= 0); delete it to rebuild it from the run "
                         "records (or re-run the runs)")
    keys = [c for c in df.columns if c not in _HIST_COLS]
    mixed = df.groupby(keys, sort=False, dropna=False)["bins"].nunique() > 1 if keys else []
    if len(df) and any(mixed):  # ``decay_metrics`` reads a cell's bin count off its first row:
        # a first row edited to 1 bin dropped the other 49 and turned a PASS into a FAIL
        cell = mixed[mixed].index[0]
        cell = pairs_text(zip(keys, cell if len(keys) > 1 else (cell,)))
        raise TableError(f"{path}: the rows of cell {cell} give different bin counts (bins); "
                         "delete it to rebuild it from the run records (or re-run the runs)")
    twice = df.drop(columns="count").astype(str).duplicated()
    if twice.any():  # histogram_table sums a cell's seeds into one row per bin: a bin given twice
        # raised 'cannot reindex on an axis with duplicate labels' (a traceback in plot / verify)
        row = df[twice].iloc[0]
        raise TableError(f"{path}: bin {row['bin']} of part {row['part']!r} of cell "
                         f"{row[LABEL]!r} is given more than once; delete it to rebuild it from "
                         "the run records (or re-run the runs)")
    why = _histogram_rows_problem(df, keys) if len(df) else None
    if why:  # histogram_table writes every bin of both parts of a cell: rows deleted (the high
        # 'before' bins of one cell) turned huang2025-fig1's split FAIL into a PASS without a word
        raise TableError(f"{path}: {why}; delete it to rebuild it from the run records (or "
                         "re-run the runs)")
    # a list-valued key's cells (train.betas) as the lists the runs hold: their JSON text
    # matched no planned cell, and the committed histograms were dropped (and the file
    # deleted) where the records were not there, the decay metrics MISSING
    return decode_config_cells(df)


def _histogram_rows_problem(df: pd.DataFrame, keys: list[str]) -> str | None:
    """What is wrong with the rows of a checked histogram table (bins, bin and count in range,
    no bin twice), or None: counts that are not whole numbers of samples (inf, 0.5, 1e300), a
    part other than ``before`` / ``after``, or a cell without every bin of both parts."""
    counts, bin_ = df["count"].to_numpy(float), df["bin"].to_numpy(float)
    for bad, what in ((bin_ != np.floor(bin_), "is not a whole number"),
                      (~(np.isfinite(counts) & (counts == np.floor(counts))
                         & (counts < 2.0 ** 53)), "has a count that is not a whole number of "
                                                  "samples")):
        if bad.any():
            row = df[bad].iloc[0]
            return (f"bin {row['bin']} of part {row['part']!r} of cell {row[LABEL]!r} {what} "
                    f"(count {row['count']})")
    parts = set(df["part"].astype(str))
    if parts - {"before", "after"}:
        return f"part {sorted(parts - {'before', 'after'})[0]!r} is not 'before' or 'after'"
    for cell, g in df.groupby(keys, sort=False, dropna=False):
        cell = cell if isinstance(cell, tuple) else (cell,)
        bins = int(g["bins"].iloc[0])
        for part in ("before", "after"):
            n = int((g["part"].astype(str) == part).sum())
            if n != bins:
                shown = pairs_text(zip(keys, cell))
                return f"cell {shown} gives {n} of the {bins} bins of part {part!r}"
    return None


def read_weights_table(path, name: str) -> pd.DataFrame:
    """A committed ``<analysis>.csv`` (:func:`weights_table`), checked: a label column and the
    analysis's metrics as finite numbers; else ``TableError``."""
    metrics = WEIGHT_ANALYSES[name][1]
    df = read_table(path, (LABEL, *metrics), numeric=metrics)
    for m in metrics:
        why = metric_range_problem(m, df[m].tolist()) or _analysis_range_problem(m, df[m])
        if why:
            raise TableError(f"{path}: column {m!r} holds {why}; delete it to rebuild it from "
                             "the saved weights (or re-run the runs)")
    return decode_config_cells(df)  # list-valued keys' cells as lists (``read_histograms``)


# what each analysis metric can be (ssmrepro.analysis.mechanistic's definitions): a variance
# of -5 in a committed output_variance.csv turned an ordering claim of koren2026-fig14 into PASS
_FRACTION, _VARIANCE, _CORR = ((0.0, 1.0, "a fraction"), (0.0, np.inf, "a variance"),
                               (-1.0, 1.0, "a correlation"))
_ANALYSIS_RANGES = {
    **{m: _FRACTION for m in ("gkq.diag_hit", "gkq.block_share", "gvv.diag_hit",
                              "gvv.block_share", "hidden.hit", "attn.hit", "conv.copy_hit",
                              "conv.shift_hit")},
    **{m: _VARIANCE for m in ("out.noise_var", "out.wrong_var", "out.empty_var")},
    "hidden.rel_err": (0.0, np.inf, "a relative error"),
    "hidden.corr": _CORR, "attn.corr": _CORR}
_RANGE_EPS = 1e-9  # float rounding of a share or a correlation


def analysis_range(name: str) -> tuple[float, float, str] | None:
    """(lowest, highest, what it is) of analysis metric ``name``, None for one of no known range
    (a claim's or paper value's bound on it is checked against it, as an accuracy's)."""
    return _ANALYSIS_RANGES.get(name)


def _analysis_range_problem(name: str, values: pd.Series) -> str | None:
    """Why values of analysis metric ``name`` cannot be its own (outside its range), or None."""
    if name not in _ANALYSIS_RANGES:
        return None
    lo, hi, what = _ANALYSIS_RANGES[name]
    v = values.to_numpy(float)
    bad = v[(v < lo - _RANGE_EPS) | (v > hi + _RANGE_EPS)]
    if not len(bad):
        return None
    return f"{bad[0]:g}, not {what} ({'>= 0' if hi == np.inf else f'in [{lo:g}, {hi:g}]'})"


def planned_rows(table: pd.DataFrame, runs: list, keys: list[str]
                 ) -> tuple[pd.DataFrame, list[str]]:
    """The rows of a committed ``<analysis>.csv`` (:func:`weights_table`, read in a fresh clone)
    that stand for planned runs, and why the others are left out: a row whose label, cell keys
    and seed (those the table has columns for) are no planned run's, or a run given by rows that
    differ. The table has no run ids; an unplanned seed's row (seed 9 of a one-seed profile) was
    averaged into its cell, and turned two FAIL verdicts of koren2026-fig14 into PASS."""
    if table.empty or LABEL not in table:
        return table, []
    cols, ident = _identities(table, keys)
    planned = set()
    for r in runs:
        flat = {**r.flat(), LABEL: r.label, "seed": r.seed}
        planned.add(tuple(norm(flat.get(c)) for c in cols))
    values = table[[c for c in table.columns if c not in cols]].astype(str)
    seen: dict[tuple, set] = {}
    for i, key in enumerate(ident):
        seen.setdefault(key, set()).add(tuple(values.iloc[i]))
    shown = [_named(cols, row) for row in table[cols].itertuples(index=False)]
    why = [f"no planned run has {text}" if key not in planned else
           f"{text} is given {len(seen[key])} times with different values"
           if len(seen[key]) > 1 else "" for key, text in zip(ident, shown)]
    out = table[[not w for w in why]].drop_duplicates()
    return out.reset_index(drop=True), list(dict.fromkeys(w for w in why if w))


def _identities(table: pd.DataFrame, keys: list[str]) -> tuple[list[str], list[tuple]]:
    """The columns that name a run in an ``<analysis>.csv`` (label, the cell keys it has, seed)
    and each row's values of them, normalised (``norm``)."""
    cols = [LABEL, *[k for k in keys if k != LABEL and k in table], *(["seed"] if "seed" in table
                                                                      else [])]
    return cols, [tuple(norm(v) for v in row) for row in table[cols].itertuples(index=False)]


def completed_keys(table: pd.DataFrame, keys: list[str], finished: list,
                   base: Callable[[list[str]], dict[str, set] | None] | None = None
                   ) -> tuple[pd.DataFrame, list[str]]:
    """A committed ``<analysis>.csv`` or ``histograms.csv`` written before the sweep had some of
    the cell ``keys`` (an axis added since: no column of it), each row given those keys' values
    of the one cell of ``finished`` runs it stands for (label, the keys it has and its seed),
    and why the other rows are left out: a row that stands for finished runs of several cells
    (the d_state 4 and 2 of an axis added where one run of d_state 4 was measured) cannot say
    which one it measured. Matched on the keys it has, such a row was merged into every cell of
    its label: a cell never trained showed the old run's numbers and a claim was judged on them.
    ``base(missing)``: the values each missing key has without the axes that set it (None:
    they cannot be told, and no row is used), those a run had when the table was written; a
    row stands only for a cell of them (with the old setting not among the axis's values, the
    row of d_state 8 went to the one finished cell, d_state 4, a run it never measured)."""
    missing = [k for k in keys if k != LABEL and k not in table]
    if table.empty or LABEL not in table or not missing:
        return table, []
    cols, ident = _identities(table, keys)
    was = base(missing) if base is not None else None
    if base is not None and was is None:  # given, but not to be told: each row went to the
        # one finished cell of its label, whichever setting it measured
        return table.iloc[0:0].reset_index(drop=True), [
            f"it has no column {', '.join(missing)}, and which of their values its rows "
            "measured cannot be told (the spec without its axes of them gives no runs)"]
    cells: dict[tuple, dict[tuple, tuple]] = {}
    for r in finished:
        flat = {**r.flat(), LABEL: r.label, "seed": r.seed}
        values = tuple(flat.get(k) for k in missing)
        if was is not None and any(norm(v) not in was.get(k, ()) for k, v in zip(missing, values)):
            continue  # a setting the row's run did not have
        cells.setdefault(tuple(norm(flat.get(c)) for c in cols), {})[
            tuple(norm(v) for v in values)] = values
    keep, fill, why = [], [], []
    for key in ident:
        of = cells.get(key, {})
        keep.append(len(of) == 1)
        if len(of) == 1:
            fill.append(next(iter(of.values())))
        elif of:
            cells_of = "; ".join(_named(missing, v) for v in of.values())
            why.append(f"{_named(cols, key)} has no column {', '.join(missing)} and stands for "
                       f"{len(of)} finished cells ({cells_of})")
    out = table[keep].copy()
    for j, k in enumerate(missing):
        out[k] = [v[j] for v in fill]
    return out.reset_index(drop=True), list(dict.fromkeys(why))


def short_cells(table: pd.DataFrame, keys: list[str], finished: list,
                recorded: set[str]) -> tuple[list[str], set[tuple]]:
    """The cells of ``table`` (``histograms.csv``: a cell's bins summed over its seeds) that a
    finished run with no record here belongs to (their bins hold only the other seeds'): the
    identity columns and the cells' values of them."""
    if table.empty:
        return [], set()
    cols, ident = _identities(table, keys)
    short = {tuple(norm({**r.flat(), LABEL: r.label}.get(c)) for c in cols)
             for r in finished if r.run_id not in recorded}
    return cols, short & set(ident)


def cell_identities(table: pd.DataFrame, keys: list[str]) -> list[tuple]:
    """Each row's cell (or run, with a seed column) identity, as ``short_cells`` gives it."""
    return _identities(table, keys)[1] if LABEL in table else []


def with_committed(table: pd.DataFrame, committed: pd.DataFrame, keys: list[str],
                   finished: list, planned: list | None = None) -> pd.DataFrame:
    """``table`` (computed from the runs whose weights or records are here) plus the rows of
    ``committed`` (the checked table from before) of the runs (a seed column) or cells (none:
    ``histograms.csv``) it lacks: one run trained into a fresh clone, or one run's weights or
    record deleted, replaced the whole committed table by that run's rows and left every other
    cell unmeasured (a claim over them FAILed: 'out of order', a split PASS turned FAIL).
    Only rows of ``finished`` runs are taken: a row of a run not finished under the spec as it
    is now (edited since) would show a number of the old spec beside a cell not run.
    The rows come in the order of the ``planned`` runs (default ``finished``), a run's or
    cell's rows as they were, rows of no planned run last: the computed rows came first and
    the committed ones after them, so the table's order changed with which runs had weights or
    records here (a rewritten committed table differing in its row order alone)."""
    if committed.empty or LABEL not in committed:
        return table
    cols, ident = _identities(committed, keys)
    done = {tuple(norm({**r.flat(), LABEL: r.label, "seed": r.seed}.get(c)) for c in cols)
            for r in finished}
    have = set(_identities(table, keys)[1]) if not table.empty else set()
    lacking = committed[[key in done and key not in have for key in ident]]
    if table.empty:
        return lacking.reset_index(drop=True)
    if lacking.empty:
        return table
    both = pd.concat([table, lacking[[c for c in table.columns if c in lacking]]],
                     ignore_index=True)
    return _in_run_order(both, keys, planned if planned is not None else finished)


def _in_run_order(table: pd.DataFrame, keys: list[str], runs: list) -> pd.DataFrame:
    """``table``'s rows in the order of the first of ``runs`` each stands for (its label, the
    cell keys it has, its seed where it has one), stably; rows of none of them last."""
    cols, ident = _identities(table, keys)
    first: dict[tuple, int] = {}
    for i, r in enumerate(runs):
        flat = {**r.flat(), LABEL: r.label, "seed": r.seed}
        first.setdefault(tuple(norm(flat.get(c)) for c in cols), i)
    rank = [first.get(key, len(runs)) for key in ident]
    return table.iloc[sorted(range(len(table)), key=lambda i: (rank[i], i))].reset_index(drop=True)


def _named(cols: list[str], key: tuple) -> str:
    return ", ".join(f"{c}={v!r}" for c, v in zip(cols, key))


def cell_means(table: pd.DataFrame, metrics: tuple[str, ...] | list[str]) -> pd.DataFrame:
    """Per-run metrics averaged over the seeds of each cell."""
    if table.empty:
        return table
    keys = [c for c in table.columns if c not in metrics and c != "seed"]
    return _lists_back(_grouped(table, keys)[list(metrics)].mean().reset_index(), keys)


def add_metrics(cells: pd.DataFrame, per_cell: pd.DataFrame, metrics: list[str],
                reduce: str = "mean") -> pd.DataFrame:
    """``cells`` with ``metrics`` columns from ``per_cell``, matched on their shared keys (NaN
    where a cell has none: a finished cell without its analysis counts as a miss). A cell with a
    diverged run gets NaN too, unless ``reduce`` is ``max``, as its other metrics (``aggregate``):
    a diverged run has no histogram or saved weights, and the cell's analysis metrics were those
    of its other seeds, a smaller sample, PASSing a claim beside the cell's NaN accuracy."""
    cells = cells.copy()
    for m in metrics:
        cells[m] = np.nan
    if per_cell.empty or cells.empty:
        return cells
    keys = [k for k in per_cell.columns if k in cells.columns and k not in metrics]
    index = {tuple(norm(v) for v in r[keys]): r for _, r in per_cell.iterrows()}
    for i, row in cells.iterrows():
        hit = index.get(tuple(norm(row[k]) for k in keys))
        if reduce != "max" and N_DIVERGED in cells and (row[N_DIVERGED] or 0) > 0:
            continue
        if hit is not None:
            for m in metrics:
                cells.at[i, m] = hit[m]
    return cells
