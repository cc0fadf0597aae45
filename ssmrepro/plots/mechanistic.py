"""Stage 6 (plots): koren2026's mechanistic figures (Figs. 2-5, 9), drawn from saved weights.

Each kind rebuilds the trained model of every selected cell (``where``; the first seed whose weights
are saved, ``train.build_member``) and draws the paper's panels from ``analysis.mechanistic``:

    invariant_operators  Fig. 2 / 9: G_vv (V × 2V) and G_kq (2V × 2V), one row per cell
    hidden_state         Fig. 3: H_t (ideal), H'_t (D × N) and H''_t at t = 2N_f, value × key
    attention_maps       Fig. 4: the ideal α_{τt} = [x_{τ-1} = x_t] and the trained B_τᵀ C_t
    copy_shift           Fig. 5: x_tᵀ G_vv ξ_τ (copy) and ξ_tᵀ G_kq ξ_τ (shift) on the context

Panel titles carry the numbers the claims test (the cell's ``mechanistic`` metrics). Without saved
weights (a fresh checkout) nothing is drawn and the committed figure stays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from pydantic import Field  # noqa: E402

from ..analysis import mechanistic as mech  # noqa: E402
from ..engine import open_store  # noqa: E402
from ..report.analysis import MECH  # noqa: E402
from ..report.cells import values_equal  # noqa: E402
from ..sweep import expand  # noqa: E402
from ..tasks import build_task  # noqa: E402
from ..train import _DATA_STREAM, build_member, derived_seed  # noqa: E402
from .registry import FigureConfig, FigureContext, figure_kind  # noqa: E402

CMAP = "inferno"  # the paper's colormap (notes §2.5)


class MechFigureConfig(FigureConfig):
    where: list[dict[str, Any]] = Field(
        [{}], description="cell selections, in row order: each {config key or label: value} "
        "draws every matching cell (one row each)")
    sample: int = Field(0, ge=0, description="which probe sequence (hidden state, maps)")
    metric: str = "val.best_acc"

    def column_refs(self) -> list[str]:
        return [k for w in self.where for k in w if k != "label"]

    def metrics(self) -> list[str]:
        return []

    def analyses(self) -> list[str]:
        return [MECH]


class OperatorsConfig(MechFigureConfig):
    kind: Literal["invariant_operators"]


class HiddenConfig(MechFigureConfig):
    kind: Literal["hidden_state"]


class AttentionConfig(MechFigureConfig):
    kind: Literal["attention_maps"]


class CopyShiftConfig(MechFigureConfig):
    kind: Literal["copy_shift"]


def _matches(run, where: dict[str, Any]) -> bool:
    flat = run.flat()
    for k, v in where.items():
        if k == "label":
            if not (run.label == v or v in [p.strip() for p in run.label.split("/")]):
                return False
        elif k not in flat or not values_equal(flat[k], v):
            return False
    return True


def _members(ctx: FigureContext, where: list[dict[str, Any]]) -> list[tuple[Any, Any, Any, int]]:
    """(run, trained model, task, data seed) of the first saved seed of every matching cell, in
    the order of the selections."""
    store = open_store(ctx.spec, ctx.out("figure", "png").parent.parents[1])
    runs = expand(ctx.spec, ctx.profile)
    out, seen = [], set()
    for sel in where:
        for r in runs:
            cell = (r.label, tuple(sorted((k, str(v)) for k, v in r.flat().items() if k != "seed")))
            if cell in seen or not _matches(r, sel):
                continue
            state = store.read_weights(r.run_id)
            if state is None:
                continue
            seen.add(cell)
            out.append((r, build_member(r, state), build_task(r.task),
                        derived_seed(r.seed, _DATA_STREAM)))
    return out


def _name(run) -> str:
    return f"{run.label}: D = {run.model.d_model}, N = {run.model.d_state}"


def _show(ax, m: np.ndarray, title: str, xlabel: str, ylabel: str, clip: bool = True):
    hi = float(np.quantile(m, 0.999)) if clip else float(m.max())
    im = ax.imshow(m, cmap=CMAP, vmin=0.0 if clip else float(m.min()), vmax=max(hi, 1e-12),
                   aspect="auto", interpolation="nearest")
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    return im


def _halves(ax, V: int, rows: bool, cols: bool) -> None:
    kw = dict(color="w", lw=0.6, ls="--")
    if cols:
        ax.axvline(V - 0.5, **kw)
    if rows:
        ax.axhline(V - 0.5, **kw)


def _save(fig, ctx: FigureContext, cfg: FigureConfig, path: Path, note: str) -> bool:
    fig.suptitle(f"{ctx.title(cfg)}\n{note}", fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _grid(n_rows: int, n_cols: int, w: float = 3.4, h: float = 3.0):
    return plt.subplots(n_rows, n_cols, figsize=(w * n_cols + 0.6, h * n_rows + 1.0),
                        squeeze=False, constrained_layout=True)


@figure_kind("invariant_operators", OperatorsConfig)
def invariant_operators(ctx: FigureContext, cfg: OperatorsConfig, path: Path) -> bool:
    """koren2026 Fig. 2 / 9: G_vv and G_kq of the trained model of each selected cell."""
    members = _members(ctx, cfg.where)
    if not members:
        return False
    fig, axes = _grid(len(members), 2, w=4.2, h=3.4)
    for i, (run, model, _, _) in enumerate(members):
        ops = mech.operators(mech.circuit(model))
        m = mech.operator_metrics(ops)
        V = ops.G_vv.shape[0]
        a = axes[i, 0]
        im = _show(a, ops.G_vv.numpy(), f"{_name(run)}\nG_vv: value diag hit {m['gvv.diag_hit']:.2f},"
                   f" dominance {m['gvv.dominance']:.1f}", "ξ_τ = [x_(τ-1) | x_τ]", "output y_t")
        _halves(a, V, rows=False, cols=True)
        fig.colorbar(im, ax=a, shrink=0.8)
        a = axes[i, 1]
        im = _show(a, ops.G_kq.numpy(), f"G_kq: key diag hit {m['gkq.diag_hit']:.2f}, dominance "
                   f"{m['gkq.dominance']:.1f}, block share {m['gkq.block_share']:.2f}",
                   "query pair ξ_t = [x_(t-1) | x_t]", "stored pair ξ_τ = [x_(τ-1) | x_τ]")
        _halves(a, V, rows=True, cols=True)
        fig.colorbar(im, ax=a, shrink=0.8)
    return _save(fig, ctx, cfg, path, "Eq. 10 predicts G_vv ≈ (0 | I) and G_kq ≈ I on its "
                 "(x_(τ-1), x_t) block (top right), ≈ 0 elsewhere; colour clipped to [0, 99.9 %]")


@figure_kind("hidden_state", HiddenConfig)
def hidden_state(ctx: FigureContext, cfg: HiddenConfig, path: Path) -> bool:
    """koren2026 Fig. 3: H_t (ideal), H'_t and H''_t = Π_v,out h_t Π_q,in at t = 2N_f."""
    members = _members(ctx, cfg.where)
    if not members:
        return False
    fig, axes = _grid(len(members), 3)
    for i, (run, model, task, seed) in enumerate(members):
        kappa = task.config.kappa
        c = mech.circuit(model)
        ops = mech.operators(c)
        ids, _ = mech.probe_batch(task, seed, cfg.sample + 1)
        ids = ids[cfg.sample:cfg.sample + 1]
        _, Hp, H2 = mech.hidden_states(c, ops, ids, 2 * kappa - 1)
        H = mech.ideal_hidden(ids, kappa, c.V)
        m = mech.hidden_metrics(c, ops, ids, kappa)
        ki, vi = mech.key_ids(c.V), mech.value_ids(c.V)
        quad = lambda X, vi=vi, ki=ki: X[0][vi][:, ki].numpy()  # noqa: E731
        _show(axes[i, 0], quad(H), f"{_name(run)}\nH_t = Σ v_n k_nᵀ (ideal)", "key token",
              "value token")
        _show(axes[i, 1], Hp[0].numpy(), "H'_t = P_out h_t (compressed)", "N", "D", clip=False)
        _show(axes[i, 2], quad(H2), f"H''_t = Π_v,out h_t Π_q,in: hit {m['hidden.hit']:.2f},"
              f" SNR {m['hidden.snr']:.1f}", "key token", "value token")
    return _save(fig, ctx, cfg, path, "t = 2N_f (end of the context), one test sequence; value × "
                 "key quadrant; the claim: H''_t ≈ H_t (the fact entries stand out)")


@figure_kind("attention_maps", AttentionConfig)
def attention_maps(ctx: FigureContext, cfg: AttentionConfig, path: Path) -> bool:
    """koren2026 Fig. 4: the ideal attention map [x_{τ-1} = x_t] and the trained B_τᵀ C_t."""
    members = _members(ctx, cfg.where)
    if not members:
        return False
    fig, axes = _grid(len(members), 2, w=3.6, h=3.3)
    for i, (run, model, task, seed) in enumerate(members):
        c = mech.circuit(model)
        ops = mech.operators(c)
        ids, y = mech.probe_batch(task, seed, cfg.sample + 1)
        ids, y = ids[cfg.sample:cfg.sample + 1], y[cfg.sample:cfg.sample + 1]
        trained, ideal = mech.attention_maps(c, ops, ids)
        m = mech.attention_metrics(c, ops, ids, y, task.config.kappa)
        _show(axes[i, 0], ideal[0].numpy(), f"{_name(run)}\nideal α_τt = [x_(τ-1) = x_t]",
              "τ (attended)", "t (query)")
        _show(axes[i, 1], trained[0].numpy(), f"model B_τᵀ C_t: hit {m['attn.hit']:.2f}, corr "
              f"{m['attn.corr']:.2f}", "τ (attended)", "t (query)")
    return _save(fig, ctx, cfg, path, "one test sequence (causal part); the claim: the trained "
                 "map ≈ the ideal one on the query rows")


@figure_kind("copy_shift", CopyShiftConfig)
def copy_shift(ctx: FigureContext, cfg: CopyShiftConfig, path: Path) -> bool:
    """koren2026 Fig. 5: Conv1D copy (x_tᵀ G_vv ξ_τ, main diagonal) and shift (ξ_tᵀ G_kq ξ_τ)."""
    members = _members(ctx, cfg.where)
    if not members:
        return False
    fig, axes = _grid(len(members), 2, w=3.6, h=3.3)
    for i, (run, model, task, seed) in enumerate(members):
        kappa = task.config.kappa
        ops = mech.operators(mech.circuit(model))
        ids, _ = mech.probe_batch(task, seed, cfg.sample + 1)
        ids = ids[cfg.sample:cfg.sample + 1]
        Mv, Mk = mech.copy_shift_maps(ops, ids, kappa)
        m = mech.copy_shift_metrics(ops, ids, kappa)
        _show(axes[i, 0], Mv[0].numpy(), f"{_name(run)}\ncopy x_tᵀ G_vv ξ_τ: hit "
              f"{m['conv.copy_hit']:.2f}", "τ", "t")
        _show(axes[i, 1], Mk[0].numpy(), f"shift ξ_tᵀ G_kq ξ_τ: hit {m['conv.shift_hit']:.2f}",
              "τ", "t")
    return _save(fig, ctx, cfg, path, "the context (2N_f tokens) of one test sequence; hits on "
                 "its value rows: copy on the main diagonal, shift on τ = t − 1")


__all__ = ["attention_maps", "copy_shift", "hidden_state", "invariant_operators"]
