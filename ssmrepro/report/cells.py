"""Stage 5 (report): cells of a profile and their aggregated values.

A *cell* is one point of the figure: a label and the values of every swept key; its runs differ
only in seed. The cells a profile expects come from its expanded runs (``sweep.expand``), so a
cell with no finished runs is still listed (``n_ok = n_diverged = 0``) and a claim that needs it
can say MISSING instead of passing silently. Runs are matched to cells by label and swept values
(not by run id), so a committed ``results.csv`` is read correctly after a code-version change.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..store import is_loss, point_flats
from ..util import norm  # noqa: F401  (re-exported: the tables' cell keys)
from .columns import (
    COMPLETE,
    DIVERGED,
    EARLY_STOP,
    EPOCHS,
    FINISHED,
    LABEL,
    LABEL_SEP,
    METRIC_PREFIX,
    N_DIVERGED,
    N_EARLY_STOP_0,
    N_EXPECTED,
    N_OK,
    N_PARAMS,
    N_TIME_LIMIT,
    OK,
    SEED,
    SELECT_N,
    STATUS,
    STOP_REASON,
    STOP_STEP,
    TIME_LIMIT,
)


def early_stopped_at_start(runs: pd.DataFrame) -> int:
    """The runs of ``runs`` (table rows) that their ``train.early_stop`` stopped at step 0,
    before any training step: their numbers are the untrained model's (an early stop the
    untrained model meets, `val.loss < 50` at vocabulary 8, stopped every run there, and only
    a stop_step.mean of 0 showed it). Not refused: a constructed init may meet it rightly."""
    if not len(runs) or STOP_REASON not in runs or STOP_STEP not in runs:
        return 0
    at0 = pd.to_numeric(runs[STOP_STEP], errors="coerce") == 0
    return int(((runs[STOP_REASON] == EARLY_STOP) & at0).sum())


def values_equal(a: Any, b: Any) -> bool:
    """Numbers compare by value (8 == 8.0), everything else as text (an integer too large for a
    float, e.g. 10**400 in a ``where``, as its digits: float() raised OverflowError, a traceback
    in `validate`). Two different whole numbers that a float holds exactly (below 2**53) differ:
    no rounding made them, and at 1e9 rel 1e-9 read a seed 1000000001 as 1000000000 (a claim's
    ``where``, a paper value and a figure's panel took the other one's cell without a word)."""
    try:
        x, y = float(a), float(b)
        if x != y and x.is_integer() and y.is_integer() and max(abs(x), abs(y)) < 2.0**53:
            return False
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError, OverflowError):
        return str(a) == str(b)


CASE_PREFIX = "case:"


def fmt_num(v: Any) -> str:
    """A cell value for a label or a verdict: 64.0 -> '64', 0.25 -> '0.25', 'x' -> 'x'; 1e20 ->
    '1e+20' (a whole number past 1e15 was printed with every digit of its binary value: a key
    of 1e300 as a 301-digit number in the report's table and the claims' details)."""
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return str(v)
    return str(int(f)) if f.is_integer() and abs(f) < 1e15 else f"{f:g}"


def fmt_value(x: float) -> str:
    """A measured number as the report prints it: 3 decimals, but 3 significant digits where
    3 decimals would read as zero (|x| below 0.0005, not 0: 1.7e-09 and 0.0004 were printed
    '0.000', an MSE or a gradient ratio of the same value as a cell that is exactly 0), and from
    1e15 on, where 3 decimals print digits the float does not hold (a paper value 1e300 was
    printed as a 301-digit number, '1000000000000000052504760255...000.000')."""
    if math.isnan(x):
        return "—"
    if x == 0:  # -0.0 too (a claim on `-test.loss` of a loss of 0 read 'ours: -0.000')
        return "0.000"
    return f"{x:.3g}" if 0 < abs(x) < 0.0005 or abs(x) >= 1e15 else f"{x:.3f}"


def fmt_written(x: float) -> str:
    """A number given in a spec (a paper value) as the report prints it: ``fmt_value``, or the
    number as written where 3 decimals drop its digits (yu2025-tab1's 0.8154 was printed 0.815
    beside our 0.805 and `differs` at tol 0.01: the printed numbers read as on the tolerance)."""
    shown = fmt_value(x)
    try:
        return shown if not math.isfinite(x) or float(shown) == x else repr(float(x))
    except ValueError:
        return shown


def fmt_beside(x: float, bound: float | None, shown: str | None = None) -> str:
    """``fmt_value(x)`` (or ``shown``, x as the caller prints it, e.g. 2 decimals) beside the
    threshold ``bound`` it is judged against, with as many more significant digits as keep it
    on its own side of the bound: 0.94951 against '>= 0.95' was printed '0.950' beside a FAIL
    (and 1.0004 against '<= 1' '1.000' beside one)."""
    shown = fmt_value(x) if shown is None else shown
    # on the bound but for rounding (``checks.close``: 0.9 - 0.85 on a bound of 0.05) is on it
    # x on it is printed on it: a paper value's mean 0.8054 on the lower end of 0.8154 ± 0.01
    # (`match`) read 0.805, outside the tolerance, and a cell of 0.9496 PASSing `<= 0.9496`
    # read 0.950, above it
    on = lambda v: math.isclose(v, bound, rel_tol=1e-9)  # noqa: E731
    if bound is None or not math.isfinite(x) or not math.isfinite(bound):
        return shown
    return more_digits((x,), (shown,), lambda v: on(v) if on(x)
                       else not on(v) and (v > bound) == (x > bound))[0]


def more_digits(xs: tuple[float, ...], shown: tuple[str, ...],
                reads_right: Callable[..., bool]) -> tuple[str, ...]:
    """``shown`` (the numbers ``xs`` as printed), or ``xs`` with more significant digits (4 to
    17) until ``reads_right`` holds of the printed numbers read back (``fmt_beside``: on the
    bound's side; a monotone step's two values: still a violation); as they are where one
    reads back as no number ('—')."""
    for digits in range(4, 18):
        try:
            if reads_right(*map(float, shown)):
                return shown
        except ValueError:
            return shown
        shown = tuple(f"{x:.{digits}g}" for x in xs)
    return shown


def cell_env(row: pd.Series) -> dict[str, Any]:
    """A cell's columns as expression names (numbers as floats where they parse)."""
    env: dict[str, Any] = {}
    for k, v in row.items():
        try:
            env[str(k)] = float(v)
        except (TypeError, ValueError, OverflowError):
            env[str(k)] = v
    return env


def is_case_ref(ref: str) -> bool:
    """``case:<i>`` names the i-th case label of a run's label."""
    i = ref[len(CASE_PREFIX):] if ref.startswith(CASE_PREFIX) else ""
    return i.isascii() and i.isdigit()  # "case:²" is a digit int() cannot read (a traceback)


def column(df: pd.DataFrame, ref: str) -> pd.Series:
    """A column of ``df`` by name, or ``case:<i>``: the i-th case label ('' when absent), e.g.
    ``"(c) trained linear / vs D"`` has ``case:0`` = ``(c) trained linear``, ``case:1`` = ``vs D``."""
    if is_case_ref(ref):
        i = int(ref[len(CASE_PREFIX):])
        # no list padded to i + 1 items: a panel's `case:99999999999999` (past every label, one
        # panel) allocated i of them, a MemoryError traceback in `plot`
        return df[LABEL].astype(str).map(
            lambda s: (lambda parts: parts[i] if i < len(parts) else "")(s.split(LABEL_SEP)))
    return df[ref]


def case_label(label: Any, ref: str) -> str:
    """The ``case:<i>`` (``ref``) of one run's or cell's label ('' when it has fewer)."""
    parts = str(label).split(LABEL_SEP)
    i = int(ref[len(CASE_PREFIX):])
    return parts[i] if i < len(parts) else ""


def with_case_label(row: dict[str, Any], ref: str, value: Any) -> dict[str, Any]:
    """``row`` with its ``ref`` column set to ``value``: for ``case:<i>``, the i-th case label
    of its label replaced, so that a ``where`` on the label (or a case label) reads the new one
    (a heatmap panel mapped to another by ``paper_panels`` looked its paper value up under a
    ``case:1`` key no ``where`` read, and showed none)."""
    if not is_case_ref(ref) or LABEL not in row:
        return {**row, ref: value}
    parts = str(row[LABEL]).split(LABEL_SEP)
    i = int(ref[len(CASE_PREFIX):])
    if i >= len(parts):
        return row
    parts[i] = str(value)
    return {**row, LABEL: LABEL_SEP.join(parts)}


def _row_has(row: dict[str, Any], key: str) -> bool:
    return key in row or (is_case_ref(key) and LABEL in row)


def _row_value(row: dict[str, Any], key: str) -> Any:
    """``row[key]``, a ``case:<i>`` read from the row's label (as ``column`` reads it)."""
    return row[key] if key in row else case_label(row[LABEL], key)


def has_column(df: pd.DataFrame, ref: str) -> bool:
    return (is_case_ref(ref) and LABEL in df) or ref in df


def label_matches(label: Any, want: Any) -> bool:
    """A ``label`` condition matches the whole label or one of its case labels."""
    label = str(label)
    return label == str(want) or str(want) in label.split(LABEL_SEP)


def _is_list(v: Any) -> bool:
    return isinstance(v, (list, tuple))


def _lists_of_lists(want: Any) -> bool:
    """``want`` is a non-empty list of lists: any of them, on a list-valued key."""
    return _is_list(want) and bool(want) and all(_is_list(w) for w in want)


def alternatives(want: Any, values: list[Any]) -> list[Any]:
    """The any-of values of a ``where`` value ``want`` on a column of ``values`` ([] for one
    value): a list's items, but on a list-valued key only a list of lists has alternatives."""
    if not _is_list(want):
        return []
    if any(_is_list(v) for v in values):
        return list(want) if _lists_of_lists(want) else []
    return list(want)


def value_matches(key: str, have: Any, want: Any, listed: bool = False) -> bool:
    """One ``where`` condition: a list means any of its values; ``label`` matches a case label.
    Of a list-valued key (``train.betas: [0.9, 0.95]``) a list is the value itself, and a list
    of lists any of them (``[[0.9, 0.95], [0.8, 0.9]]``): the list was read as any of its
    numbers, which a list never equals, so no claim or paper value could select such a key.
    ``listed``: the key's column holds a list in some cell (``listed_keys``), so a list is read
    so on its scalar cells too (``alternatives``): on a column of 'SSM' and [SSM, TF],
    ``layers: [SSM, TF]`` matched the cell 'SSM' as well, and a claim was judged on both."""
    if listed or _is_list(have):
        if _lists_of_lists(want):
            return any(value_matches(key, have, w, True) for w in want)
        if _is_list(have) or _is_list(want):
            return (_is_list(have) and _is_list(want) and len(want) == len(have)
                    and all(value_matches(key, h, w) if _is_list(h) else
                            not _is_list(w) and value_matches(key, h, w)
                            for h, w in zip(have, want)))
    elif _is_list(want):
        return any(value_matches(key, have, w) for w in want)
    if key == LABEL:
        return label_matches(have, want)
    if norm(have) is None or norm(want) is None:
        return norm(have) is None and norm(want) is None
    return values_equal(have, want)


def listed_keys(cells: pd.DataFrame) -> set[str]:
    """The columns of ``cells`` that hold a list in some cell (list-valued keys, for
    ``value_matches``' ``listed``)."""
    return {str(c) for c in cells.columns
            if cells[c].dtype == object and any(_is_list(v) for v in cells[c])}


def select(cells: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    """Rows of ``cells`` matching every condition of ``where`` (an unknown column matches none;
    ``case:<i>`` is the i-th case label, as in figures)."""
    if cells.empty:
        return cells
    mask = np.ones(len(cells), dtype=bool)
    for k, v in where.items():
        if not has_column(cells, k):
            return cells.iloc[0:0]
        col = column(cells, k)
        listed = any(_is_list(x) for x in col)
        mask &= np.array([value_matches(k, x, v, listed) for x in col], dtype=bool)
    return cells[mask]


def _as_float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


class ValueIndex:
    """Positions of ``values`` that may equal a wanted value under ``values_equal``, found by
    hashing (its text) and bisection (its number, within the tolerance of ``values_equal``)
    rather than by comparing it with every value: a superset, each to be confirmed. Matching
    1,000 paper values one by one against 1,000 cells added 8.6 s to `validate`."""

    def __init__(self, values: list[Any]):
        self.text: dict[str, list[int]] = {}
        self.none: list[int] = []  # values ``norm`` reads as missing (None, NaN)
        nums: list[tuple[float, int]] = []
        for i, v in enumerate(values):
            self.text.setdefault(_text(v), []).append(i)
            if norm(v) is None:
                self.none.append(i)
            f = _as_float(v)
            if f is not None and not math.isnan(f):
                nums.append((f, i))
        nums.sort()
        self._keys = [f for f, _ in nums]
        self._pos = [i for _, i in nums]

    def _window(self, want: Any) -> tuple[int, int]:
        """The sorted numbers within ``values_equal``'s tolerance of ``want`` (rel 1e-9, abs
        1e-12: |a - w| <= 1e-9 max(|a|, |w|) implies |a - w| < 2e-9 |w|)."""
        import bisect

        f = _as_float(want)
        if f is None or math.isnan(f):
            return 0, 0
        tol = 0.0 if math.isinf(f) else 2e-9 * abs(f) + 2e-12
        return (bisect.bisect_left(self._keys, f - tol),
                bisect.bisect_right(self._keys, f + tol))

    def count(self, want: Any) -> int:
        """At most how many positions ``candidates(want)`` gives (without listing them)."""
        lo, hi = self._window(want)
        return len(self.text.get(_text(want), ())) + hi - lo

    def candidates(self, want: Any) -> list[int]:
        lo, hi = self._window(want)
        return self.text.get(_text(want), []) + self._pos[lo:hi]


def _flat(want: Any) -> list[Any]:
    """The values a ``where`` value admits, as ``value_matches`` reads it: a list (of lists, at
    any depth) means any of its values. Only the top list was opened, so ``label: [[S6]]``
    matched S6 in ``select`` and nothing in ``CellIndex``. Each list is a value too, the whole
    value of a list-valued key (``train.betas``): a superset, confirmed by ``value_matches``."""
    if not isinstance(want, (list, tuple)):
        return [want]
    return [want] + [x for w in want for x in _flat(w)]


def _text(v: Any) -> str:
    """The index key of a value: its text, a list's with its numbers as floats (``[1, 2]`` and
    ``[1.0, 2.0]`` are one value to ``value_matches``)."""
    if not _is_list(v):
        return str(v)
    parts = []
    for x in v:
        f = None if _is_list(x) or isinstance(x, bool) else _as_float(x)
        parts.append(_text(x) if f is None else repr(f))
    return "[" + ", ".join(parts) + "]"


class CellIndex:
    """``select`` of many ``where``s over one table, each in the time of the cells it may match
    (not of every cell): the positions a condition may match come from an index of each column's
    values (built once, when first asked) and are confirmed with ``value_matches``, so the rows
    are exactly ``select``'s."""

    def __init__(self, cells: pd.DataFrame):
        self.cells = cells
        self._values: dict[str, list[Any]] = {}
        self._index: dict[str, ValueIndex] = {}
        self._labels: dict[str, list[int]] | None = None
        self._lists: dict[str, bool] = {}

    def values(self, key: str) -> list[Any]:
        """The values of column ``key`` (or ``case:<i>``), in the order of the rows."""
        return self._column(key)

    def _column(self, key: str) -> list[Any]:
        if key not in self._values:
            self._values[key] = column(self.cells, key).tolist()
        return self._values[key]

    def _listed(self, key: str) -> bool:
        """Whether column ``key`` holds a list in some cell (``value_matches``' ``listed``)."""
        if key not in self._lists:
            self._lists[key] = any(_is_list(v) for v in self._column(key))
        return self._lists[key]

    def _label_index(self) -> dict[str, list[int]]:
        """Positions by whole label and by each of its case labels (``label_matches``)."""
        if self._labels is None:
            self._labels = {}
            for i, lab in enumerate(self._column(LABEL)):
                text = str(lab)
                for part in dict.fromkeys([text, *text.split(LABEL_SEP)]):
                    self._labels.setdefault(part, []).append(i)
        return self._labels

    def _candidates(self, key: str, want: Any) -> tuple[int, Any]:
        """(at most how many, a function listing them) of the positions that may match."""
        wants = _flat(want)
        if key == LABEL:
            labels = self._label_index()
            return (sum(len(labels.get(str(w), ())) for w in wants),
                    lambda: [i for w in wants for i in labels.get(str(w), ())])
        if key not in self._index:
            self._index[key] = ValueIndex(self._column(key))
        index = self._index[key]
        n = sum(len(index.none) if norm(w) is None else index.count(w) for w in wants)
        return n, lambda: [i for w in wants
                           for i in (index.none if norm(w) is None else index.candidates(w))]

    def positions(self, where: dict[str, Any]) -> list[int]:
        """The positions (``iloc``) of the rows matching every condition of ``where``."""
        if self.cells.empty:
            return []
        if not where:
            return list(range(len(self.cells)))
        if any(not has_column(self.cells, k) for k in where):
            return []
        found = [self._candidates(k, v) for k, v in where.items()]
        _, listing = min(found, key=lambda f: f[0])  # the most selective condition
        out = []
        listed = {k: self._listed(k) for k in where}
        for i in sorted(set(listing())):
            if all(value_matches(k, self._column(k)[i], v, listed[k]) for k, v in where.items()):
                out.append(i)
        return out

    def select(self, where: dict[str, Any]) -> pd.DataFrame:
        """``select(cells, where)``: the same rows, in the same order."""
        if self.cells.empty:
            return self.cells
        return self.cells.iloc[self.positions(where)]


class PaperValueLookup:
    """The first of ``paper_values`` of a metric whose ``where`` a row matches (``value_matches``
    on each of its keys, as the report's ``select``: an any-of list, a case label), found through
    an index of their first ``where`` values rather than by trying each paper value for every
    cell a figure draws. (Each key was compared with ``values_equal``: a paper value of
    ``label: [S6, Mamba]`` or of a case label was compared in the report and not drawn.)"""

    def __init__(self, paper_values: list, listed: set[str] | frozenset = frozenset()):
        self._listed = listed  # the list-valued keys of the cells (``listed_keys``)
        self._groups: dict[tuple[str, str | None], tuple[list[int], ValueIndex | None]] = {}
        lists: dict[tuple[str, str | None], list[int]] = {}
        for i, pv in enumerate(paper_values):
            first = next(iter(pv.where), None)
            lists.setdefault((pv.metric, first), []).append(i)
        for (metric, first), idx in lists.items():
            owners: list[int] = []  # the paper value (position in idx) of each indexed value
            values: list[Any] = []
            for c, i in enumerate(idx if first else []):
                for w in _flat(paper_values[i].where[first]):
                    owners.append(c)
                    values.append(w)
            self._groups[(metric, first)] = (
                idx, (ValueIndex(values), owners) if first else None)
        self._pvs = paper_values

    def find(self, row: dict[str, Any], metric: str) -> Any:
        best: int | None = None
        for (m, first), (idx, index) in self._groups.items():
            if m != metric or (first is not None and not _row_has(row, first)):
                continue
            if index is None:
                cands = set(range(len(idx)))
            else:
                values, owners = index
                have = _row_value(row, first)
                wants = [have] + (str(have).split(LABEL_SEP) if first == LABEL else [])
                cands = {owners[k] for w in wants
                         for k in (values.none if norm(w) is None else values.candidates(w))}
            for c in sorted(cands):
                i = idx[c]
                if best is not None and i > best:
                    break
                if all(_row_has(row, k)
                       and value_matches(k, _row_value(row, k), v, k in self._listed)
                       for k, v in self._pvs[i].where.items()):
                    best = i
                    break
        return None if best is None else self._pvs[best]


def cell_keys(runs: list) -> list[str]:
    """Columns that identify a cell: the label and every swept key that is a config column."""
    from ..sweep import swept_keys

    # once per sweep point, not per run: a figure's build asks for the keys several times (a
    # 4,000-run `run` flattened 28,000 configs)
    return [LABEL, *swept_keys(runs, point_flats(runs))]


def with_config(cells: pd.DataFrame, runs: list, columns: list[str] | set[str]) -> pd.DataFrame:
    """``cells`` with the config ``columns`` they lack (dotted keys, e.g. ``model.d_model``),
    each cell's value taken from its runs. A cell's runs differ only in seed, so every config key
    has one value per cell; a key the profile does not sweep is not a cell key (a cell column),
    and a figure, claim or paper value naming it found no column (a KeyError in a figure, a
    claim or paper value MISSING forever although its cells were run). Cells of an old table that
    no run of the profile has get None."""
    from ..sweep import RunConfig, per_point

    if cells.empty or not runs:
        return cells
    keys = cell_keys(runs)
    flats = per_point(runs, RunConfig.flat)
    cols = sorted(c for c in set(columns) - set(cells.columns) if any(c in f for f in flats))
    if not cols or any(k not in cells.columns for k in keys):
        return cells
    by_cell: dict[tuple, dict[str, Any]] = {}
    for r, flat in zip(runs, flats):
        by_cell.setdefault(_key([r.label if k == LABEL else flat.get(k) for k in keys]), flat)
    found = [by_cell.get(_key([row[k] for k in keys]), {}) for row in
             cells[keys].to_dict("records")]
    return cells.assign(**{c: [f.get(c) for f in found] for c in cols})


def _key(values: list[Any]) -> tuple:
    return tuple(norm(v) for v in values)


def aggregate(df: pd.DataFrame, runs: list, reduce: str, metrics: list[str],
              percentiles: list[float] | tuple[float, ...] = (), select: Any = None
              ) -> pd.DataFrame:
    """One row per cell of the profile (and per cell of ``df`` the profile no longer has).

    Columns: the cell keys, ``n_expected`` (runs of the cell in the profile), ``n_ok``,
    ``n_diverged``, ``complete`` (every expected run finished), ``n_params``, each metric reduced
    over seeds with ``reduce`` plus ``<metric>.std`` (over the seeds that finished ``ok``; NaN
    with fewer than two), and mean stop step / epochs. ``max`` / ``min`` are the highest / lowest
    seed's value as written (of a loss: its worst / best seed; the figures label them so). A
    diverged run has no metric value: where ``reduce`` keeps the best seed (``max`` of a score,
    ``min`` of a loss) it is skipped, else (``mean``, ``median``, the worst seed) it makes the
    cell's value NaN — a claim counts NaN as a miss, never as missing.

    ``percentiles`` (e.g. [10, 90]) add ``<metric>.p10`` / ``<metric>.p90``: percentiles over the
    seeds that finished ``ok`` (linear interpolation, numpy's default; NaN when a seed diverged,
    as the mean). ``select`` (``spec.Select``: over, by, op) then keeps one row per group of
    cells that differ only in ``select.over`` (e.g. ``train.lr``): the one whose mean of
    ``select.by`` over its seeds is lowest (op min) or highest (op max), of means equal but for
    rounding the first in the sweep's order; a candidate with a diverged run is never preferred
    to one without. The kept row shows the chosen value of
    ``over``; it is ``complete`` only when every candidate is (the choice could change), and
    ``select.n`` says how many candidates there were.
    """
    keys = cell_keys(runs) if runs else [LABEL]
    cells: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        flat = {LABEL: r.label, **r.flat()}
        vals = [flat.get(k) for k in keys]
        c = cells.setdefault(_key(vals), {"values": vals, "seeds": set()})
        c["seeds"].add(r.seed)
    groups: dict[tuple, pd.DataFrame] = {}
    if not df.empty:
        present = [k for k in keys if k in df.columns]
        idx = [_key([row.get(k) if k in present else None for k in keys])
               for row in df.to_dict("records")]
        for key, g in df.groupby(pd.Series(idx, index=df.index), sort=False):
            groups[key] = g
            if key not in cells:
                first = g.iloc[0]
                cells[key] = {"values": [first.get(k) for k in keys], "seeds": set()}
    rows = []
    for key, c in cells.items():
        g = groups.get(key, df.iloc[0:0] if not df.empty else pd.DataFrame())
        row: dict[str, Any] = dict(zip(keys, c["values"]))
        expected = c["seeds"]
        status = g[STATUS] if STATUS in g else pd.Series(dtype=object)
        done = g[status.isin(FINISHED)] if len(g) else g
        if expected and SEED in done:  # count each expected seed once
            done = done[[s in expected for s in done[SEED]]].drop_duplicates(SEED)
        ok = done[done[STATUS] == OK] if len(done) else done
        row[N_EXPECTED] = len(expected)
        row[N_OK] = len(ok)
        row[N_DIVERGED] = int((done[STATUS] == DIVERGED).sum()) if len(done) else 0
        row[COMPLETE] = bool(expected) and len(done) >= len(expected)
        cut = int((ok[STOP_REASON] == TIME_LIMIT).sum()) if STOP_REASON in ok and len(ok) else 0
        if cut:  # trained less than asked (step 0 with a tiny limit): the report says so
            row[N_TIME_LIMIT] = cut
        untrained = early_stopped_at_start(ok)
        if untrained:  # the untrained model met the early stop: its numbers, said in the report
            row[N_EARLY_STOP_0] = untrained
        if N_PARAMS in g and g[N_PARAMS].notna().any():
            counts = g[N_PARAMS].dropna()
            # the seeds of a cell share its config, so its parameter count: rows that disagree
            # (a hand-edited table) leave it unknown (the first row's stood for the cell, in
            # the report, the figure legends and a paper value on n_params)
            row[N_PARAMS] = counts.iloc[0] if pd.to_numeric(counts, errors="coerce").nunique(
                dropna=False) == 1 else math.nan
        for m in metrics:
            col = _column(ok, m)
            vals = ok[col].astype(float) if col in ok else pd.Series(dtype=float)
            # a record's metric (``metric.<m>``; analysis metrics are added per cell later)
            # with no value in a run that finished ok, beside seeds that have one: its final
            # evaluation was not finite (the record keeps no inf); it counts as a diverged seed
            # for this metric (the mean of the other seeds, and their spread, stood for the
            # cell's mean of all)
            n_bad = row[N_DIVERGED] + (int(vals.isna().sum()) if col.startswith(METRIC_PREFIX)
                                        and vals.notna().any() else 0)
            row[m] = _reduce(vals, n_bad, reduce, is_loss(m))
            # a spread needs two seeds: one seed's 0.0 read as seeds that agree exactly in the
            # report's table and summary.csv (claims already left such a cell untested)
            row[f"{m}.std"] = (seeds_std(vals) if vals.notna().sum() >= 2
                               and n_bad == row[N_DIVERGED] else math.nan)
            for q in percentiles:
                v = vals.dropna()
                row[f"{m}.p{q:g}"] = (float(np.percentile(v, q)) if len(v) and not n_bad
                                      else math.nan)
        if select is not None:
            by = _column(ok, select.by)
            v = ok[by].astype(float) if by in ok else pd.Series(dtype=float)
            # a seed that finished ok without a finite ``by`` (its final evaluation was not
            # finite) counts as diverged, as for the cell's metrics: the mean of the other seeds
            # chose that candidate, whose reported value is then NaN, over one whose every
            # seed had a value
            bad = row[N_DIVERGED] or bool(v.isna().any())
            v = v.dropna()
            # the seeds' mean whatever the order of their rows (``math.fsum``: pandas' sum of
            # 0.1, 0.2, 0.3 and of 0.3, 0.2, 0.1 differ in the last bit, so two candidates of
            # one mean were chosen by the order of the table's rows, the records' order in the
            # store and results.csv's in a fresh clone)
            row[_SCORE] = (math.nan if not len(v) else math.inf if bad
                           else seeds_mean(v) * (1.0 if select.op == "min" else -1.0))
        if STOP_STEP in done and len(done):
            row[f"{STOP_STEP}.mean"] = float(done[STOP_STEP].astype(float).mean())
        if EPOCHS in done and len(done) and done[EPOCHS].notna().any():
            row[f"{EPOCHS}.mean"] = float(done[EPOCHS].astype(float).mean())
        rows.append(row)
    if select is not None:
        rows = _select(rows, keys, select)
    return pd.DataFrame(rows)


_SCORE = "_select_score"


def _column(runs: pd.DataFrame, metric: str) -> str:
    """The column of ``metric`` in a run table: ``metric.<m>`` as the store and results.csv
    write it, or the bare name (tables built by hand)."""
    return METRIC_PREFIX + metric if METRIC_PREFIX + metric in runs else metric


def _select(rows: list[dict[str, Any]], keys: list[str], select: Any) -> list[dict[str, Any]]:
    """One row per group of rows equal on every key but ``select.over`` (see ``aggregate``)."""
    if select.over not in keys:
        raise ValueError(f"aggregate.select.over {select.over!r} is not a swept key ({keys})")
    rest = [k for k in keys if k != select.over]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(_key([r.get(k) for k in rest]), []).append(r)
    out = []
    for g in groups.values():
        # the profile's candidates only, where it has any: a value of ``over`` the spec no
        # longer sweeps (lr 0.3 of older runs in the store) was chosen by its old runs, a cell
        # of 0 expected runs that no claim reads (MISSING) beside the profile's finished ones
        g = [r for r in g if r[N_EXPECTED]] or g
        scores = [r[_SCORE] for r in g]
        finite = [i for i, x in enumerate(scores) if not math.isnan(x)]
        # candidates whose means are equal but for rounding tie (as a claim's bound is met,
        # ``checks.close``): the first in the sweep's order is kept
        low = min((scores[i] for i in finite), default=math.nan)
        best = next((i for i in finite if math.isclose(scores[i], low, rel_tol=1e-9)), 0)
        row = {k: v for k, v in g[best].items() if k != _SCORE}
        row[COMPLETE] = all(bool(r[COMPLETE]) for r in g)
        row[SELECT_N] = len(g)
        out.append(row)
    return out


def _reduce(vals: pd.Series, n_diverged: int, reduce: str, loss: bool = False) -> float:
    """The seeds' ``vals`` reduced; NaN where a seed diverged, unless ``reduce`` keeps the best
    seed (``max`` of a score, ``min`` of a loss), which a diverged seed is not: the ``max`` of a
    loss, its worst seed, left a diverged seed out and reported the worst of the others."""
    vals = vals.dropna()
    best = reduce == ("min" if loss else "max")
    if not len(vals) or (n_diverged and not best):
        return math.nan
    with np.errstate(over="ignore"):
        out = float(getattr(vals, reduce)())
    # seeds of 1e308 summed past the largest float: their mean read inf
    return seeds_mean(vals) if reduce == "mean" and not math.isfinite(out) else out


def seeds_std(vals: pd.Series) -> float:
    """The seeds' standard deviation (ddof 0; NaN skipped), finite for finite seeds: of seeds
    of 1e308 the squares overflow (it read inf for seeds that agree), so they are scaled to
    their largest there."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = float(vals.std(ddof=0))
        if math.isfinite(out):
            return out
        top = float(vals.abs().max())
        return float((vals / top).std(ddof=0)) * top if math.isfinite(top) and top else out


def seeds_mean(vals: Any) -> float:
    """The mean of finite ``vals`` whatever their order (``math.fsum``), and finite: seeds of
    1e308 overflow fsum's sum (an OverflowError traceback in `report` where ``aggregate.select``
    scored its candidates), so each value is divided first there."""
    vals = [float(x) for x in vals]
    try:
        return math.fsum(vals) / len(vals)
    except OverflowError:
        return math.fsum(x / len(vals) for x in vals)
    except ValueError:  # inf and -inf
        return math.nan


def finished(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells with at least one finished run (what a figure can show)."""
    if cells.empty:
        return cells
    return cells[(cells[N_OK] + cells[N_DIVERGED]) > 0]


def expected(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells the profile expects (rows only in an old ``results.csv`` left out)."""
    if cells.empty:
        return cells
    return cells[cells[N_EXPECTED] > 0]
