"""koren2026 Figure 6 / 12: D × N recall grids per MQAR regime, theory beside trained models."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

REGIME_KEYS = ["task.vocab", "task.L", "task.kappa"]
X, Y = "model.d_model", "model.d_state"


def column_kind(label: str) -> str:
    """Which theory constant a column uses: designed / linear / full (from its label)."""
    low = label.lower()
    for k in ("designed", "linear", "full"):
        if k in low:
            return k
    return "linear"


def law(D: np.ndarray, N: np.ndarray, V: int, n_f: int, kind: str) -> np.ndarray:
    from ..theory.recall import A_CONSTANTS, refined_accuracy

    return refined_accuracy(N, D, V, n_f, A_CONSTANTS[("mqar", kind)])


def regimes(agg: pd.DataFrame) -> list[tuple]:
    return list(dict.fromkeys(tuple(r) for r in agg[REGIME_KEYS].itertuples(index=False)))


def grid(sub: pd.DataFrame, metric: str, Ds: list, Ns: list) -> np.ndarray:
    g = np.full((len(Ns), len(Ds)), np.nan)
    for _, r in sub.iterrows():
        g[Ns.index(r[Y]), Ds.index(r[X])] = r[metric]
    return g


def recall_grid(spec, agg: pd.DataFrame, profile: str, path: Path) -> None:
    metric = spec.figure.metric
    labels = list(dict.fromkeys(agg["label"]))
    regs = regimes(agg)
    Ds = sorted(agg[X].unique())
    Ns = sorted(agg[Y].unique())
    ncol = len(labels) + 1
    fig, axes = plt.subplots(len(regs), ncol, figsize=(3.3 * ncol, 3.0 * len(regs)), squeeze=False)
    Dg, Ng = np.meshgrid(np.array(Ds, float), np.array(Ns, float))
    im = None
    for i, (V, L, kappa) in enumerate(regs):
        theory = law(Dg, Ng, int(V), int(kappa), "linear")
        theory[Ng > Dg] = np.nan
        panels = [("(a) theory Φ(1/σ − m_V), a = 5/4", theory, None)]
        for lab in labels:
            sub = agg[(agg["label"] == lab) & (agg["task.vocab"] == V) & (agg["task.L"] == L)
                      & (agg["task.kappa"] == kappa)]
            panels.append((lab, grid(sub, metric, Ds, Ns), column_kind(lab)))
        for j, (title, g, kind) in enumerate(panels):
            ax = axes[i, j]
            im = ax.imshow(g, origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto",
                           extent=(-0.5, len(Ds) - 0.5, -0.5, len(Ns) - 0.5))
            if np.isnan(g).all():
                ax.text(0.5, 0.5, "not run in\nthis profile", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8, color="0.4")
            if kind is not None and len(Ds) > 1 and len(Ns) > 1:  # the law's 0.9 contour
                t = law(Dg, Ng, int(V), int(kappa), kind)
                ax.contour(np.arange(len(Ds)), np.arange(len(Ns)), t, levels=[0.9],
                           colors="w", linewidths=1.2, linestyles="--")
            step_x = max(1, len(Ds) // 6)
            step_y = max(1, len(Ns) // 6)
            ax.set_xticks(range(0, len(Ds), step_x), [str(int(d)) for d in Ds[::step_x]],
                          fontsize=7)
            ax.set_yticks(range(0, len(Ns), step_y), [str(int(n)) for n in Ns[::step_y]],
                          fontsize=7)
            if i == 0:
                ax.set_title(title, fontsize=8)
            if i == len(regs) - 1:
                ax.set_xlabel("D", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"V={int(V)}, L={int(L)}, N_f={int(kappa)}\nN", fontsize=8)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.7, label=f"{metric} (best of seeds)")
    fig.suptitle(f"{spec.figure.title or spec.title} [{spec.id}, profile {profile}]\ndashed: "
                 "the law's 0.9 contour with the column's constant", fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def frontier(sub: pd.DataFrame, metric: str, thr: float) -> dict[float, float]:
    """For each D: the smallest N whose accuracy is >= thr (D without such N omitted)."""
    out = {}
    for D, g in sub.groupby(X):
        ok = g[g[metric] >= thr]
        if len(ok):
            out[float(D)] = float(ok[Y].min())
    return out


def theory_product(Ds: list, Ns: list, V: int, kappa: int, kind: str, thr: float) -> float:
    """Median N·D on the law's frontier over the same grid (N <= D)."""
    prods = []
    for D in Ds:
        Nok = [N for N in Ns if N <= D and law(np.array(D, float), np.array(N, float), V, kappa,
                                               kind) >= thr]
        if Nok:
            prods.append(D * min(Nok))
    return float(np.median(prods)) if prods else math.nan


def check_frontier(spec, agg: pd.DataFrame, thr: float = 0.9):
    """Verdicts: per regime and column, the ≥ thr frontier is monotone and N·D is ~constant."""
    from ..report import Verdict

    out = []
    if agg.empty or X not in agg or Y not in agg:
        return [Verdict("claim", "recall frontier (no data)", "MISSING", None)]
    metric = spec.figure.metric
    Ds, Ns = sorted(agg[X].unique()), sorted(agg[Y].unique())
    for V, L, kappa in regimes(agg):
        for lab in dict.fromkeys(agg["label"]):
            sub = agg[(agg["label"] == lab) & (agg["task.vocab"] == V) & (agg["task.L"] == L)
                      & (agg["task.kappa"] == kappa)]
            fr = frontier(sub, metric, thr)
            name = f"[≥{thr}] V={int(V)} L={int(L)} N_f={int(kappa)} {lab}"
            if len(fr) < 2:
                out.append(Verdict("claim", f"{name}: frontier (fewer than 2 values of D reach "
                                   f"{thr})", "MISSING", None))
                continue
            ds = sorted(fr)
            viol = sum(fr[b] > fr[a] for a, b in zip(ds, ds[1:]))
            prods = [d * fr[d] for d in ds]
            ratio = max(prods) / min(prods)
            th = theory_product(Ds, Ns, int(V), int(kappa), column_kind(lab), thr)
            ok = viol <= 1 and ratio <= 4.0
            text = (f"{name}: frontier monotone ({viol} violations) and N·D roughly constant "
                    f"(median {np.median(prods):.0f}, max/min {ratio:.1f}; law {th:.0f})")
            out.append(Verdict("claim", text, "PASS" if ok else "FAIL", float(np.median(prods))))
    return out
