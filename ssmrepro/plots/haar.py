"""Stage 6 (plots): the ``haar_wavelet`` figure kind — huang2025 Fig. A.1 and Thm 1's error.

Four panels, all from ``theory.haar`` (no training): (a) Haar wavelets ψ_{j,k}; (b) the three
Mamba basis functions g(s; t̂, w) at one parameter w (t̂ = the three jump points); (c) ψ_{j,k}
against Thm 1's approximation g1 + g3 − 2 g2 for a few w; (d) the errors of the spec's analytic
table (its cells) against |w| on log-log axes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from ..theory import haar  # noqa: E402
from .registry import (  # noqa: E402
    FigureConfig,
    FigureContext,
    figure_kind,
    save_png,
    tight_layout,
    unread_metric,
)

_ERROR_NAMES = {
    "l2": r"$L^2$ error $\|\psi - \hat\psi\|_2$",
    "sup_away": r"sup error at distance $\geq\delta$ from the jumps",
    "sup": r"sup error over all of $[0, 1]$",
}


MAX_SCALE = 6  # the wavelets drawn on a 4001-point grid: 2^-6 of [0, 1] is 62 points wide
MAX_CURVES = 20  # curves of one panel, each in its legend (the figure shows 3 and 4)


FLOOR = 1e-9  # the log axis's floor: errors below it (0 among them) are drawn on it


def _floored(vals) -> str:
    """The legend's note on the errors drawn at ``FLOOR``, '' when none is: every error below
    it, not only the zeros (huang2025-figA1's sup error away from the jumps, 3.7e-22, 1.2e-65
    and 8.6e-218 before two zeros, was a flat line at 1e-9 under '(0 drawn at 1e-9)', as if
    the error stopped falling there)."""
    below = [float(v) for v in vals if v < FLOOR]
    if not below:
        return ""
    positive = [v for v in below if v > 0]
    parts = ([f"{len(positive)} below it, down to {min(positive):.1e}"] if positive else [])
    if len(positive) < len(below):
        parts.append(f"{len(below) - len(positive)} of 0")
    return f" (drawn at 1e-9: {' and '.join(parts)})"


class HaarWaveletConfig(FigureConfig):
    kind: Literal["haar_wavelet"]
    metric: str = unread_metric("the analytic table's errors columns")
    j: int = Field(0, ge=0, le=MAX_SCALE, description="scale of the approximated wavelet")
    k: int = Field(0, ge=0, description="translation of the approximated wavelet, below 2^j")
    x: str = Field("w", description="the parameter column of the analytic table")
    errors: list[str] = Field(["l2", "sup_away", "sup"], description="error columns to draw")
    # w from -1e12 to -1e-6 (theory.haar.ABS_W_MIN/MAX): a show_w of -1e-20 drew a perfect step
    show_w: list[Annotated[float, Field(ge=-haar.ABS_W_MAX, le=-haar.ABS_W_MIN)]] = Field(
        [-30.0, -1000.0, -1.0e5], max_length=MAX_CURVES, description="w of the curves in (c)")
    basis_w: float = Field(-1000.0, ge=-haar.ABS_W_MAX, le=-haar.ABS_W_MIN,
                           description="w of the basis functions in (b)")
    examples: list[tuple[int, int]] = Field([(0, 0), (1, 0), (1, 1), (2, 2)],
                                            max_length=MAX_CURVES,
                                            description="(j, k) of the wavelets in (a)")

    @model_validator(mode="after")
    def _wavelets(self) -> HaarWaveletConfig:
        """Each wavelet drawn must exist, checked before `run` computes the table: a `k` of
        2^j or more raised ValueError while drawing, a `j` of 10^23 in `examples` hung in
        ``2**j``, and a positive `show_w` raised in the basis function (the limit is w -> -inf);
        thousands of `show_w` curves took minutes to draw."""
        for where, (j, k) in [("", (self.j, self.k)),
                              *((f"examples.{i}: ", jk) for i, jk in enumerate(self.examples))]:
            if not 0 <= j <= MAX_SCALE:
                raise ValueError(f"{where}scale j = {j} is not from 0 to {MAX_SCALE}")
            if not 0 <= k < 2**j:
                raise ValueError(f"{where}translation k = {k} is not from 0 to 2^j - 1 = "
                                 f"{2**j - 1} (j = {j})")
        return self

    def analytic_problems(self, spec) -> list[str]:
        """'key: reason' where the wavelet drawn is not the one the spec's ``haar_thm1`` table
        measures (analytic.params j: 3 beside the figure's j: 2 drew ψ_{2,1} and labelled the
        table's errors against ψ_{3,5} 'error against ψ_{2,1}')."""
        a = getattr(spec, "analytic", None)
        if a is None or a.table != "haar_thm1":
            return []
        return [f"{key}: {getattr(self, key)}, but the table's wavelet has {key} = "
                f"{a.params.get(key, 0)} (analytic.params.{key})"
                for key in ("j", "k") if getattr(self, key) != a.params.get(key, 0)]

    def column_refs(self) -> list[str]:
        return [self.x]

    def metrics(self) -> list[str]:
        return list(self.errors)


@figure_kind("haar_wavelet", HaarWaveletConfig)
def haar_wavelet(ctx: FigureContext, cfg: HaarWaveletConfig, path: Path) -> bool:
    """Haar wavelets, three Mamba basis functions, ψ vs g1 + g3 − 2 g2, errors vs |w|."""
    s = np.linspace(0.0, 1.0, 4001)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.9))
    ax = axes[0]
    for jj, kk in cfg.examples:
        ax.step(s, haar.haar(s, jj, kk), where="post", label=rf"$\psi_{{{jj},{kk}}}$")
    ax.set_title("(a) Haar wavelets", fontsize=9)
    ax.set_xlabel("$s$")
    ax.set_ylabel(r"$\psi_{j,k}(s)$")
    ax.legend(fontsize=7)

    a, m, b = haar.jumps(cfg.j, cfg.k)
    ax = axes[1]
    for name, t_hat in (("g_1", a), ("g_2", m), ("g_3", b)):
        ax.plot(s, haar.mamba_basis(s, t_hat, cfg.basis_w, cfg.j),
                label=rf"${name}$: $\hat t = {t_hat:g}$")
    ax.set_title(rf"(b) Mamba basis functions, $w = {cfg.basis_w:g}$", fontsize=9)
    ax.set_xlabel("$s$")
    ax.set_ylabel(r"$g(s;\hat t, w) = 2^{j/2} e^{-\int_s^1 \mathrm{softplus}(w(r-\hat t))dr}$",
                  fontsize=8)
    ax.legend(fontsize=7)

    ax = axes[2]
    ax.step(s, haar.haar(s, cfg.j, cfg.k), where="post", color="k", lw=2.2,
            label=rf"$\psi_{{{cfg.j},{cfg.k}}}$")
    cmap = plt.get_cmap("viridis")
    for i, w in enumerate(cfg.show_w):
        ax.plot(s, haar.approximation(s, w, cfg.j, cfg.k), color=cmap(i / max(1, len(cfg.show_w))),
                label=rf"$g_1 + g_3 - 2g_2$, $w = {w:g}$")
    ax.set_title(r"(c) wavelet vs Thm 1's approximation", fontsize=9)
    ax.set_xlabel("$s$")
    ax.legend(fontsize=7)

    ax = axes[3]
    t = ctx.table
    drawn = False
    if not t.empty and cfg.x in t:
        t = t.sort_values(cfg.x, key=lambda v: v.abs())
        for err in cfg.errors:
            if err in t:
                vals = t[err].astype(float)
                ax.plot(t[cfg.x].abs(), vals.clip(lower=FLOOR), marker="o", ms=3,
                        label=_ERROR_NAMES.get(err, err) + _floored(vals))
                drawn = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"$|w|$ (Thm 1's limit: $w \to -\infty$)")
    ax.set_ylabel(rf"error against $\psi_{{{cfg.j},{cfg.k}}}$")
    ax.set_title("(d) approximation error vs the parameter", fontsize=9)
    if drawn:
        ax.legend(fontsize=7)
    fig.suptitle(ctx.fitted_title(cfg, fig.get_figwidth()), fontsize=10)
    tight_layout(fig)
    save_png(fig, path, dpi=120)
    return True
