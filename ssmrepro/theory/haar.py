"""Library (theory): huang2025 Thm 1 — a Haar wavelet from three Mamba basis functions (App. A.2).

Haar wavelet (eqs. 16-18) on [0, 1], scale j, translation k, with a = 2^-j k, m = a + 2^-(j+1),
b = 2^-j (k+1)::

    psi_{j,k}(s) = 2^{j/2} (H(s - a) - 2 H(s - m) + H(s - b)),   H(s) = 1_{s > 0}

Mamba basis function at t = 1 with λ = 1, B = 2^{j/2} and a time-PE discretisation
Δ(r) = softplus(w (r - t̂)) (eq. 22: b_Δ = -w t̂)::

    g(s; t̂, w) = 2^{j/2} exp(-∫_s^1 softplus(w (r - t̂)) dr)  ->  2^{j/2} H(s - t̂)   as w -> -inf

(Δ -> inf before t̂ erases everything earlier; Δ -> 0 after t̂ keeps it.) The approximation of
Thm 1 is ``g(s; a, w) + g(s; b, w) - 2 g(s; m, w)``.

The integral is exact: with F(u) = ∫_{-inf}^u softplus(v) dv = -Li2(-e^u) (the dilogarithm),
∫_s^1 softplus(w (r - t̂)) dr = (F(w (1 - t̂)) - F(w (s - t̂))) / w. F is evaluated by its series
F(u) = Li2(σ(u)) + ½ ln²(1 + e^u) for u <= 0 (Landen's identity; σ(u) <= 1/2, so the series
Li2(y) = Σ y^k / k² converges like 2^-k) and the reflection F(u) = π²/6 + u²/2 - F(-u) for u > 0.

Errors (what the theorem's limit w -> -inf does): the L² error tends to 0 (like |w|^{-1/2});
the error at every s other than the three jump points tends to 0, and so does the sup over
[0, 1] minus any fixed neighbourhood of the jumps; the sup over all of [0, 1] does **not**: a
continuous g cannot follow a jump, and at s = t̂ the basis is ≈ 2^{j/2} while H(0) = 0. The
theorem's "∀ s ∈ [0, 1]" holds away from the jump points (and in L²), not uniformly.
"""

from __future__ import annotations

import math

import numpy as np

_SERIES_TERMS = 60  # Li2(y) = Σ y^k / k² with y <= 1/2: error < 2^-60
# |w| where the exact integral is exact in float64: it is a difference of two dilogarithms
# ~0.8 divided by w, off by ~1e-15 / |w| (1e-9 at |w| = 1e-6); at |w| = 1e-20 rounding made
# each basis function a step and haar_thm1 said l2 = 0.035, sup_away = 0 (as at 1e12; the
# truth is ~1 and ~2). Above 1e12, w^2 nears float64's limits.
ABS_W_MIN, ABS_W_MAX = 1e-6, 1e12


def haar(s, j: int = 0, k: int = 0) -> np.ndarray:
    """psi_{j,k}(s) as eq. (18): 2^{j/2} (H(s - a) - 2 H(s - m) + H(s - b)), H(0) = 0."""
    s = np.asarray(s, dtype=np.float64)
    a, m, b = jumps(j, k)
    H = lambda u: (u > 0).astype(np.float64)  # noqa: E731
    return 2.0 ** (j / 2) * (H(s - a) - 2.0 * H(s - m) + H(s - b))


def jumps(j: int = 0, k: int = 0) -> tuple[float, float, float]:
    """The three jump points a < m < b of psi_{j,k}."""
    if j < 0 or not 0 <= k < 2**j:
        raise ValueError(f"need j >= 0 and 0 <= k < 2^j, got j={j}, k={k}")
    a = k * 2.0**-j
    return a, a + 2.0 ** -(j + 1), (k + 1) * 2.0**-j


def softplus_integral(u) -> np.ndarray:
    """F(u) = ∫_{-inf}^u softplus(v) dv = -Li2(-e^u), elementwise (relative error ~1e-15)."""
    u = np.asarray(u, dtype=np.float64)
    neg = np.minimum(u, -u)  # -|u| <= 0
    e = np.exp(neg)
    y = e / (1.0 + e)  # σ(-|u|) in (0, 1/2]
    li2 = np.zeros_like(y)
    yk = np.ones_like(y)
    for k in range(1, _SERIES_TERMS + 1):
        yk = yk * y
        li2 = li2 + yk / (k * k)
    f_neg = li2 + 0.5 * np.log1p(e) ** 2
    return np.where(u <= 0, f_neg, math.pi**2 / 6 + 0.5 * u * u - f_neg)


def mamba_basis(s, t_hat: float, w: float, j: int = 0) -> np.ndarray:
    """g(s; t̂, w) = 2^{j/2} exp(-∫_s^1 softplus(w (r - t̂)) dr) for w < 0 (exact integral)."""
    if not w < 0:
        raise ValueError(f"the Heaviside limit needs w < 0 (w -> -inf), got {w}")
    s = np.asarray(s, dtype=np.float64)
    integral = (softplus_integral(w * (1.0 - t_hat)) - softplus_integral(w * (s - t_hat))) / w
    return 2.0 ** (j / 2) * np.exp(-integral)


def approximation(s, w: float, j: int = 0, k: int = 0) -> np.ndarray:
    """Thm 1's g1 + g3 - 2 g2 (basis functions at t̂ = a, b, m)."""
    a, m, b = jumps(j, k)
    return mamba_basis(s, a, w, j) + mamba_basis(s, b, w, j) - 2.0 * mamba_basis(s, m, w, j)


def errors(w: float, j: int = 0, k: int = 0, n: int = 200001, delta: float = 0.01) -> dict:
    """Approximation errors of Thm 1 at parameter w on an n-point grid of [0, 1]:

    ``l2``       (∫_0^1 (psi - approx)^2 ds)^{1/2} (trapezoid rule; the grid holds the jumps)
    ``sup_away`` max |psi - approx| over s at distance >= delta from every jump point
    ``sup``      max |psi - approx| over the whole grid (jump points included)
    """
    s = np.linspace(0.0, 1.0, n)
    err = haar(s, j, k) - approximation(s, w, j, k)
    away = np.ones_like(s, dtype=bool)
    for p in jumps(j, k):
        away &= np.abs(s - p) >= delta
    sq = err * err
    l2 = math.sqrt(float(np.sum((sq[1:] + sq[:-1]) * np.diff(s)) / 2))
    return {"l2": l2, "sup_away": float(np.abs(err[away]).max()), "sup": float(np.abs(err).max())}
