"""Library (theory): recall scaling laws of koren2026 ("On the recall scaling laws in Mamba", seed 001).

Notation: V vocabulary size, D embedding dimension, N state dimension, N_f (``n_f``) number of
facts (MQAR key-value pairs), Phi the standard normal CDF.

* :func:`eq15_accuracy` -- seed Eq. 15 (= App. Eq. 78, Thm 3 for N_f >> N, D):
  ``p_success ~ Phi(sqrt(2 N D / N_f)) ** (V / 2)``.
* :func:`refined_accuracy` -- the refined law of the authors' repository (arXiv version),
  ``acc = Phi(1/sigma - m_V)`` with ``sigma^2 = a N_f / (N_eff D) + 1/D``, ``N_eff = n_layers * N``,
  and the constant ``a`` from :data:`A_CONSTANTS`.
* :func:`law_constant`, :func:`refined_frontier_product` -- the refined law's ``threshold``
  contour in closed form: ``N D = a N_f / (N_layers (1/k^2 - 1/D))`` with
  ``k = Phi^-1(threshold) + m_V`` (infinite where ``D <= k^2``: no state size suffices).
* :func:`jl_epsilons`, :func:`jl_perfect_recall` -- Lemma 1 (JL-based scaling law):
  ``eps_v = sqrt(c log V / D)``, ``eps_k = sqrt(c log V / N)``, ``c = 4``; perfect recall is
  guaranteed when ``eps_v < 1``, ``eps_k < 1`` and ``eps_v + eps_k + N_f eps_v eps_k < 1/2``
  (main-text statement and App. Eq. 74/76). ``log`` is the natural logarithm: the paper writes
  ``log`` without a base, the JL lemma it invokes is stated with ``ln``, and Remark 1's
  ``DN >~ 4 N_f log(V / 2 delta)`` follows from the Gaussian tail ``n_sigma^2 ~ 2 ln(V / 2 delta)``
  only with the natural log. (The appendix restatement of Lemma 1, Eq. 65, prints
  ``eps_v + 2 eps_k + 2 N_f eps_v eps_k < 1``; its own proof ends at Eq. 74, which we use.)

Everything is vectorised over numpy arrays (scalars in, numpy scalars/arrays out) and uses
``math.erfc`` only (no scipy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np

# a-constants of the refined law, keyed by (task, model): "linear" = trained simplified linear
# Mamba, "full" = trained full Mamba, "designed" = the Thm 2 construction (non-trained).
A_CONSTANTS: dict[tuple[str, str], float] = {
    ("ar", "linear"): 1.0,
    ("mqar", "linear"): 5 / 4,
    ("ar", "full"): 1 / 2,
    ("mqar", "full"): 5 / 8,
    ("ar", "designed"): 2.0,
    ("mqar", "designed"): 3.0,
}

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def phi(x) -> np.ndarray:
    """Standard normal CDF, ``Phi(x) = erfc(-x / sqrt 2) / 2`` (accurate in both tails)."""
    return 0.5 * _erfc(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))


def log_phi(x) -> np.ndarray:
    """``log Phi(x)`` without cancellation: ``log1p(-Q(x))`` for x > 0, ``log Phi(x)`` otherwise."""
    x = np.asarray(x, dtype=np.float64)
    upper = np.log1p(-0.5 * _erfc(np.abs(x) / math.sqrt(2.0)))  # log(1 - Q(|x|)) = log Phi(|x|)
    with np.errstate(divide="ignore"):
        lower = np.log(0.5 * _erfc(-x / math.sqrt(2.0)))
    return np.where(x > 0, upper, lower)


def eq15_accuracy(N, D, V, n_f) -> np.ndarray:
    """Seed Eq. 15 (Thm 3, App. Eq. 78): ``p_success ~ Phi(sqrt(2 N D / N_f)) ** (V / 2)``.

    Evaluated as ``exp((V/2) * log Phi(.))`` so values close to 1 keep their precision.
    """
    N, D, V, n_f = (np.asarray(a, dtype=np.float64) for a in (N, D, V, n_f))
    return np.exp(0.5 * V * log_phi(np.sqrt(2.0 * N * D / n_f)))


def m_V(V) -> np.ndarray:
    """Location of the max of V standard normals (the refined law's shift):
    ``m_V = sqrt(2 ln V) - (ln ln V + ln 4 pi) / (2 sqrt(2 ln V))``."""
    lnV = np.log(np.asarray(V, dtype=np.float64))
    r = np.sqrt(2.0 * lnV)
    return r - (np.log(lnV) + math.log(4.0 * math.pi)) / (2.0 * r)


def refined_sigma(N, D, n_f, a, n_layers=1) -> np.ndarray:
    """``sigma = sqrt(a N_f / (N_eff D) + 1 / D)`` with ``N_eff = n_layers * N``."""
    N, D, n_f, a, n_layers = (np.asarray(v, dtype=np.float64) for v in (N, D, n_f, a, n_layers))
    return np.sqrt(a * n_f / (n_layers * N * D) + 1.0 / D)


def refined_accuracy(N, D, V, n_f, a, n_layers=1) -> np.ndarray:
    """Refined recall law (authors' repo, arXiv version): ``acc = Phi(1/sigma - m_V)`` with
    ``sigma^2 = a N_f / (N_eff D) + 1/D``, ``N_eff = n_layers * N`` (Fig. 7: accuracy depends on
    Lambda N only); ``a`` from :data:`A_CONSTANTS`."""
    return phi(1.0 / refined_sigma(N, D, n_f, a, n_layers) - m_V(V))


def law_constant(column: str, task: str = "mqar") -> float:
    """The refined law's ``a`` for a Fig. 6 column: ``designed`` / ``linear`` / ``full``."""
    try:
        return A_CONSTANTS[(task, column)]
    except KeyError:
        known = sorted({c for _, c in A_CONSTANTS})
        raise KeyError(f"no recall-law constant for ({task!r}, {column!r}); columns: {known}") from None


def refined_frontier_product(D, V, n_f, a, threshold: float = 0.9, n_layers=1) -> np.ndarray:
    """``N * D`` on the refined law's ``threshold`` contour at width ``D`` (N continuous).

    ``Phi(1/sigma - m_V) >= thr`` <=> ``1/sigma >= k = Phi^-1(thr) + m_V`` <=>
    ``a N_f / (N_eff D) + 1/D <= 1/k^2`` <=> ``N D >= a N_f / (n_layers (1/k^2 - 1/D))``.
    Infinite where ``D <= k^2`` (no state size reaches the threshold at that width).
    """
    D, V, n_f, a, n_layers = (np.asarray(v, dtype=np.float64) for v in (D, V, n_f, a, n_layers))
    k = NormalDist().inv_cdf(threshold) + m_V(V)
    room = 1.0 / k**2 - 1.0 / D
    with np.errstate(divide="ignore"):
        return np.where(room > 0, a * n_f / (n_layers * np.where(room > 0, room, 1.0)), np.inf)


def jl_epsilons(V, D, N, c=4.0) -> tuple[np.ndarray, np.ndarray]:
    """Lemma 1 / App. Eq. 75: ``eps_v = sqrt(c ln V / D)``, ``eps_k = sqrt(c ln V / N)`` (c = 4)."""
    V, D, N = (np.asarray(v, dtype=np.float64) for v in (V, D, N))
    clv = c * np.log(V)
    return np.sqrt(clv / D), np.sqrt(clv / N)


def jl_perfect_recall(V, D, N, n_f, c=4.0):
    """Lemma 1 (main text; App. Eqs. 74-76): perfect MQAR recall is guaranteed when
    ``eps_v < 1``, ``eps_k < 1`` and ``eps_v + eps_k + N_f eps_v eps_k < 1/2``.

    Returns a ``bool`` for scalar inputs and a boolean array otherwise.
    """
    ev, ek = jl_epsilons(V, D, N, c)
    ok = (ev < 1) & (ek < 1) & (ev + ek + np.asarray(n_f, dtype=np.float64) * ev * ek < 0.5)
    return bool(ok) if np.ndim(ok) == 0 else ok


def accuracy_grid(law: Callable[[np.ndarray, np.ndarray], np.ndarray], D_values, N_values) -> np.ndarray:
    """``law(N, D)`` on the (len(D_values), len(N_values)) grid (rows = D, columns = N)."""
    D = np.asarray(D_values, dtype=np.float64)[:, None]
    N = np.asarray(N_values, dtype=np.float64)[None, :]
    return np.broadcast_to(np.asarray(law(N, D), dtype=np.float64), (D.shape[0], N.shape[1])).copy()


def frontier_product(law, D_values, N_values, threshold: float = 0.9) -> float:
    """Smallest ``N * D`` over the grid whose accuracy is ``>= threshold``; NaN if no point reaches it.

    ``law`` is either a callable ``law(N, D)`` (broadcast over numpy arrays, e.g.
    ``lambda N, D: refined_accuracy(N, D, 512, 16, A_CONSTANTS["mqar", "linear"])``) or an
    accuracy array of shape (len(D_values), len(N_values)) such as a measured grid (NaN = skipped).
    Eq. 17 predicts this product to be ~constant in D/N trade-offs (``DN = Omega(N_f log(V/delta))``).
    """
    D = np.asarray(D_values, dtype=np.float64)
    N = np.asarray(N_values, dtype=np.float64)
    acc = accuracy_grid(law, D, N) if callable(law) else np.asarray(law, dtype=np.float64)
    if acc.shape != (D.size, N.size):
        raise ValueError(
            f"accuracy grid has shape {acc.shape}, expected (len(D), len(N)) = {(D.size, N.size)}"
        )
    prod = D[:, None] * N[None, :]
    with np.errstate(invalid="ignore"):
        ok = acc >= threshold
    return float(prod[ok].min()) if ok.any() else float("nan")
