"""Stage 5 (report): the cells of an analytic spec — rows of a table computed from theory.

An analytic spec (``analytic: {table, params, grid}``) trains nothing: its profile's cells are the
rows ``theory.TABLES[table].fn(**params, **point)`` for every point of the grid, one cell each,
complete by construction, so every registered check judges them as it judges trained cells.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd

from ..spec import SpecError
from ..theory import TABLES
from .columns import COMPLETE, LABEL, N_DIVERGED, N_EXPECTED, N_OK

THEORY_LABEL = "theory"


def analytic_columns(spec) -> tuple[set[str], set[str]]:
    """(cell columns, metric columns) of an analytic spec's table, without computing it."""
    a = spec.analytic
    if a.table not in TABLES:
        raise KeyError(f"unknown analytic table {a.table!r} (known: {', '.join(TABLES)})")
    return {LABEL, *a.grid, *a.params}, set(TABLES[a.table].metrics)


ANALYTIC_DIGITS = 12  # significant digits of an analytic table's computed values


def _stable(v):
    """A computed value to ``ANALYTIC_DIGITS`` significant digits: the last digits of a float
    computation change with the numpy / torch build (a fresh install rewrote yu2025-fig5's
    committed table in its 16th digit), a committed table must not."""
    if isinstance(v, float) and math.isfinite(v):
        return float(f"{v:.{ANALYTIC_DIGITS}g}")
    return v


def analytic_table(spec) -> pd.DataFrame:
    """One row per grid point: label, grid values, params, metrics (floats to
    ``ANALYTIC_DIGITS`` significant digits)."""
    a = spec.analytic
    table = TABLES[a.table]
    keys = list(a.grid)
    rows = []
    for vals in itertools.product(*(a.grid[k] for k in keys)):
        point = dict(zip(keys, vals))
        where = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in {**a.params, **point}.items())
        try:
            got = {k: _stable(v) for k, v in table.fn(**a.params, **point).items()}
        except ArithmeticError as err:  # a point past float64's range (theory.yu): exit 2
            raise SpecError([f"{spec.path}: analytic table {a.table} at {where}: {err}"]) from None
        bad = [k for k, v in got.items() if not math.isfinite(v)]
        if bad:  # a NaN row read as a 'diverged' cell, its claim a FAIL of the theory
            raise SpecError([f"{spec.path}: analytic table {a.table} at {where}: {bad[0]} = "
                             f"{got[bad[0]]} is not a finite number (outside float64's range)"])
        rows.append({LABEL: THEORY_LABEL, **point, **a.params, **got})
    return pd.DataFrame(rows)


def analytic_cells(table: pd.DataFrame) -> pd.DataFrame:
    """The table as profile cells (each complete, one 'run', none diverged)."""
    cells = table.copy()
    cells[N_EXPECTED], cells[N_OK], cells[N_DIVERGED], cells[COMPLETE] = 1, 1, 0, True
    return cells
