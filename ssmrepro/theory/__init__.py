"""Library (theory): closed-form results of the papers (recall laws, designed circuits, huang2025
Thm 1's Haar approximation, yu2025
Thm 3's gradient ratios) and ``TABLES``, the analytic tables an analytic spec computes.

An analytic spec (``analytic: {table, params, grid}``, no training) asks for one row per point of
its grid: ``TABLES[table].fn(**params, **point)`` returns the row's metrics (names in
``TABLES[table].metrics``), which the report checks like trained metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import haar, yu


@dataclass(frozen=True)
class TheoryTable:
    name: str
    fn: Callable[..., dict[str, float]]  # keyword parameters -> {metric: value}
    metrics: tuple[str, ...]
    summary: str


TABLES: dict[str, TheoryTable] = {
    t.name: t for t in (
        TheoryTable("haar_thm1", lambda abs_w, j=0, k=0, delta=0.01, n=200001: haar.errors(
            -float(abs_w), int(j), int(k), int(n), float(delta)), ("l2", "sup_away", "sup"),
            "huang2025 Thm 1: errors of g1 + g3 - 2 g2 against the Haar wavelet psi_{j,k} at "
            "parameter w = -abs_w (theory.haar.errors)"),
        TheoryTable("yu_thm3", lambda c, L, n=4, trials=30, kappa=1.0, seed=0: yu.gradient_ratios(
            float(c), int(L), int(n), int(trials), float(kappa), int(seed)),
            ("ratio_w", "ratio_b", "s4d_grad_b"),
            "yu2025 Thm 3: E|dy_S6/dw| / E|dy_S4D/db| and E|dy_S6/db| / E|dy_S4D/db| for inputs "
            "N(0, c^2) of length L, L*Delta fixed (theory.yu.gradient_ratios)"),
    )
}

__all__ = ["TABLES", "TheoryTable"]
