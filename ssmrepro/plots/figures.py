"""Stage 5a: figures from the aggregated table (and, for histograms, from run records).

Kinds: ``bars`` (one bar per cell, the paper's value as a black marker), ``heatmaps`` (a panel per
``col`` value, cells annotated "ours (paper)"), ``histograms`` (huang2025 Fig. 1 style decay
histograms). Every figure says which profile it shows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..report import _eq  # noqa: E402


def _paper_value(spec, where: dict[str, Any], metric: str) -> float | None:
    """The paper's value for this cell (same matching rule as ``report.select``)."""
    for pv in spec.paper_values:
        if pv.metric == metric and all(k in where and _eq(where[k], v) for k, v in pv.where.items()):
            return pv.value
    return None


def _cell_name(row: pd.Series, cols: list[str]) -> str:
    parts = []
    for c in cols:
        v = row[c]
        if isinstance(v, float) and math.isnan(v):
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        parts.append(f"{c.split('.')[-1]}={v}")
    return ",".join(parts)


def bars(spec, agg: pd.DataFrame, profile: str, path: Path) -> None:
    f = spec.figure
    metric = f.metric
    x = f.x or "label"
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(agg)), 4))
    names = [str(v) for v in agg[x]]
    vals = agg[metric].to_numpy(dtype=float)
    err = agg.get(f"{metric}.std", pd.Series([0] * len(agg))).to_numpy(dtype=float)
    pos = np.arange(len(agg))
    ax.bar(pos, vals, yerr=np.nan_to_num(err), capsize=4, color="#4C72B0", label="ours")
    for i, (_, row) in enumerate(agg.iterrows()):
        pv = _paper_value(spec, row.to_dict(), metric)
        if pv is not None:
            ax.plot([i - 0.35, i + 0.35], [pv, pv], color="k", lw=2,
                    label="paper" if i == 0 or "paper" not in ax.get_legend_handles_labels()[1]
                    else None)
        if not math.isnan(vals[i]):
            ax.text(i, vals[i] + 0.02, f"{vals[i]:.2f}", ha="center", va="bottom", fontsize=8)
        if "n_params" in row and not pd.isna(row["n_params"]):
            ax.text(i, -0.08, f"{int(row['n_params']):,} p", ha="center", va="top", fontsize=7,
                    transform=ax.get_xaxis_transform())
    ax.set_xticks(pos, names, rotation=0)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel(metric)
    ax.set_title(f"{f.title or spec.title}\n[{spec.id}, profile {profile}]", fontsize=9)
    ax.legend(loc="upper center", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def heatmaps(spec, agg: pd.DataFrame, profile: str, path: Path) -> None:
    f = spec.figure
    metric = f.metric
    col = f.col or "label"
    xs = [c for c in (f.x or "").split(",") if c]
    ys = [c for c in (f.y or "").split(",") if c]
    panels = list(dict.fromkeys(agg[col]))
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        sub = agg[agg[col] == panel]
        xn = list(dict.fromkeys(_cell_name(r, xs) for _, r in sub.iterrows()))
        yn = list(dict.fromkeys(_cell_name(r, ys) for _, r in sub.iterrows()))
        grid = np.full((len(yn), len(xn)), np.nan)
        notes = [["" for _ in xn] for _ in yn]
        for _, r in sub.iterrows():
            i, j = yn.index(_cell_name(r, ys)), xn.index(_cell_name(r, xs))
            grid[i, j] = r[metric]
            pv = _paper_value(spec, r.to_dict(), metric)
            ours = "—" if math.isnan(r[metric]) else f"{r[metric]:.2f}"
            notes[i][j] = ours + (f"\n({pv:.2f})" if pv is not None else "")
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i in range(len(yn)):
            for j in range(len(xn)):
                v = grid[i, j]
                ax.text(j, i, notes[i][j], ha="center", va="center", fontsize=6.5,
                        color="k" if (not np.isnan(v) and v > 0.6) else "w")
        ax.set_xticks(range(len(xn)), xn, fontsize=7)
        ax.set_yticks(range(len(yn)), yn, fontsize=7)
        ax.set_title(str(panel), fontsize=9)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label=f"{metric}: ours (paper)")
    fig.suptitle(f"{f.title or spec.title} [{spec.id}, profile {profile}]", fontsize=10)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def histogram_table(records: list[dict]) -> pd.DataFrame:
    """Sum decay histograms over seeds: rows (label, T, part, bin, count)."""
    rows = []
    for rec in records:
        h = (rec.get("analysis") or {}).get("decay_histogram")
        if not h or rec.get("status") != "ok":
            continue
        T = rec["config"]["task"].get("T")
        for part in ("before", "after"):
            for b, c in enumerate(h[part]):
                rows.append({"label": rec["label"], "task.T": T, "part": part, "bin": b,
                             "bins": h["bins"], "count": c})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.groupby(["label", "task.T", "part", "bin", "bins"], as_index=False)["count"].sum()


def histograms(spec, hist: pd.DataFrame, profile: str, path: Path) -> None:
    """Left: distribution over all timesteps per T for each model; right: before vs after n."""
    labels = list(dict.fromkeys(hist["label"]))
    fig, axes = plt.subplots(1, len(labels) + 1, figsize=(4.5 * (len(labels) + 1), 3.6))
    bins = int(hist["bins"].iloc[0])
    centers = (np.arange(bins) + 0.5) / bins
    Ts = sorted(hist["task.T"].unique())
    cmap = plt.get_cmap("viridis")
    for ax, lab in zip(axes, labels):
        for k, T in enumerate(Ts):
            sub = hist[(hist["label"] == lab) & (hist["task.T"] == T)]
            c = sub.groupby("bin")["count"].sum().reindex(range(bins), fill_value=0).to_numpy()
            if c.sum():
                ax.plot(centers, c / c.sum(), color=cmap(k / max(1, len(Ts) - 1)), label=f"T={T}")
        ax.set_yscale("log")
        ax.set_xlabel(r"$e^{-\lambda\Delta_t}$")
        ax.set_title(f"{lab}: all timesteps", fontsize=9)
        ax.legend(fontsize=7)
    ax = axes[-1]
    Tmax = max(Ts)
    for lab, ls in zip(labels, ["-", "--", ":", "-."]):
        for part, color in (("before", "tab:red"), ("after", "tab:blue")):
            sub = hist[(hist["label"] == lab) & (hist["task.T"] == Tmax) & (hist["part"] == part)]
            c = sub.set_index("bin")["count"].reindex(range(bins), fill_value=0).to_numpy()
            if c.sum():
                rel = "<" if part == "before" else ">="
                ax.plot(centers, c / c.sum(), ls=ls, color=color, label=f"{lab}, t {rel} n")
    ax.set_yscale("log")
    ax.set_xlabel(r"$e^{-\lambda\Delta_t}$")
    ax.set_title(f"before vs after n (T={Tmax})", fontsize=9)
    ax.legend(fontsize=7)
    fig.suptitle(f"{spec.figure.title or spec.title} [{spec.id}, profile {profile}]", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def lines(spec, agg: pd.DataFrame, profile: str, path: Path) -> None:
    """One panel per slice: metric vs the key that varies in it, one line per model.

    Labels are "<model> / <slice>" (two case axes); the x key of a panel is the swept column
    with more than one value in it.
    """
    metric = spec.figure.metric
    parts = agg["label"].str.split(" / ", n=1, expand=True)
    agg = agg.assign(_hue=parts[0], _facet=parts[1] if parts.shape[1] > 1 else "")
    facets = list(dict.fromkeys(agg["_facet"]))
    fig, axes = plt.subplots(1, len(facets), figsize=(4.6 * len(facets), 3.6), squeeze=False)
    swept = [c for c in agg.columns if c.startswith(("model.", "task.")) and agg[c].nunique() > 1]
    for ax, facet in zip(axes[0], facets):
        sub = agg[agg["_facet"] == facet]
        xkey = next((c for c in swept if sub[c].nunique() > 1), swept[0] if swept else "label")
        for hue in dict.fromkeys(sub["_hue"]):
            h = sub[sub["_hue"] == hue].sort_values(xkey)
            ax.plot(h[xkey], h[metric], marker="o", label=hue)
            if f"{metric}.std" in h and h[f"{metric}.std"].notna().any() and spec.aggregate.reduce == "mean":
                ax.fill_between(h[xkey], h[metric] - h[f"{metric}.std"],
                                h[metric] + h[f"{metric}.std"], alpha=0.2)
        ax.set_xlabel(xkey.split(".")[-1])
        ax.set_ylabel(metric)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(facet, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"{spec.figure.title or spec.title} [{spec.id}, profile {profile}]", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


KINDS = {"bars": bars, "heatmaps": heatmaps, "lines": lines}
