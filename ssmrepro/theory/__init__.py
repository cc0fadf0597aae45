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

from pydantic import ConfigDict, Field, model_validator

from ..util import NoBoolNumbers
from . import haar, yu


class TableParams(NoBoolNumbers):
    """The keyword parameters of one row of a theory table (``params`` and a grid point
    together), typed and bounded: an unknown name, text, 0 or a size of 10^12 raised TypeError,
    ValueError, ZeroDivisionError or MemoryError while the table was computed, after `validate`
    said ok, or gave numbers that mean nothing (a negative distance, a grid of one point)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class HaarParams(TableParams):
    abs_w: float = Field(..., ge=haar.ABS_W_MIN, le=haar.ABS_W_MAX,
                         description="|w| of the basis functions (w = -|w|; theory.haar.ABS_W_MIN "
                         "to ABS_W_MAX)")
    j: int = Field(0, ge=0, le=12, description="scale of the wavelet")
    k: int = Field(0, ge=0, description="translation, 0 <= k < 2^j")
    n: int = Field(200001, ge=3, le=10_000_001, description="grid points of [0, 1]")
    delta: float = Field(0.01, gt=0, description="sup_away: distance from every jump")

    @model_validator(mode="after")
    def _grid(self) -> HaarParams:
        if self.k >= 2**self.j:
            raise ValueError(f"k: {self.k} is not below 2^j = {2**self.j}")
        if (self.n - 1) % 2 ** (self.j + 1):  # l2's trapezoid rule needs the jumps on the grid
            raise ValueError(f"n: {self.n} - 1 is not a multiple of 2^(j+1) = {2 ** (self.j + 1)} "
                             "(the grid must hold the wavelet's jumps)")
        if self.delta >= 2.0 ** -(self.j + 2):  # no grid point would be 'away' from a jump
            raise ValueError(f"delta: {self.delta:g} leaves no point away from the jumps (below "
                             f"{2.0 ** -(self.j + 2):g}, a quarter of the wavelet's support)")
        return self


MAX_YU_FLOATS = 1 << 24  # trials * L * n: 128 MB of float64 per tensor (the paper's grid: 360k)


class YuParams(TableParams):
    c: float = Field(..., gt=0, le=1e6, description="input scale: u ~ N(0, c^2)")
    L: int = Field(..., ge=1, le=100_000, description="sequence length")
    n: int = Field(4, ge=1, le=1024, description="state size")
    trials: int = Field(30, ge=1, le=100_000, description="independent draws (system and input) "
                        "the gradients are averaged over")
    kappa: float = Field(1.0, gt=0, le=100, description="L * Delta")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the draws")

    @model_validator(mode="after")
    def _size(self) -> YuParams:
        if self.trials * self.L * self.n > MAX_YU_FLOATS:
            raise ValueError(f"trials * L * n = {self.trials * self.L * self.n:,} floats per "
                             f"tensor, more than {MAX_YU_FLOATS:,}")
        return self


@dataclass(frozen=True)
class TheoryTable:
    name: str
    fn: Callable[..., dict[str, float]]  # keyword parameters -> {metric: value}
    metrics: tuple[str, ...]
    summary: str
    Params: type[TableParams]  # validates ``params`` + one grid point (spec.Analytic)


TABLES: dict[str, TheoryTable] = {
    t.name: t for t in (
        TheoryTable("haar_thm1", lambda abs_w, j=0, k=0, delta=0.01, n=200001: haar.errors(
            -float(abs_w), int(j), int(k), int(n), float(delta)), ("l2", "sup_away", "sup"),
            "huang2025 Thm 1: errors of g1 + g3 - 2 g2 against the Haar wavelet psi_{j,k} at "
            "parameter w = -abs_w (theory.haar.errors)", HaarParams),
        TheoryTable("yu_thm3", lambda c, L, n=4, trials=30, kappa=1.0, seed=0: yu.gradient_ratios(
            float(c), int(L), int(n), int(trials), float(kappa), int(seed)),
            ("ratio_w", "ratio_b", "s4d_grad_b"),
            "yu2025 Thm 3: E|dy_S6/dw| / E|dy_S4D/db| and E|dy_S6/db| / E|dy_S4D/db| for inputs "
            "N(0, c^2) of length L, L*Delta fixed (theory.yu.gradient_ratios)", YuParams),
    )
}

__all__ = ["TABLES", "TableParams", "TheoryTable"]
