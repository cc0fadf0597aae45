"""Stage 6 (plots): heatmaps of a constructed (not trained) model on one example (cooper2026
Figs. 9 and 10): the input embedding and the output, dimension × position.

The model is rebuilt from the run's config (``train.build_member``: a construction is its init,
so no weights need to be stored), one test sequence of the run's task is drawn, and three
panels show (a) the embedded input, (b) the residual stream that enters the final norm (the
"output": the copied token's code appears in the read-out block), clipped to [-1, 1] with the
paper's colours (viridis: dark purple -1, cyan-green 0, yellow 1), and (c) per position whether
the prediction equals the target (supervised positions only). The construction's stream blocks
(``theory.cooper.layout``, ``theory.cooper_decode.layout`` for AR with decoding) label the y axis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from pydantic import Field  # noqa: E402

from ..report.columns import LABEL  # noqa: E402
from ..sweep.config import MAX_SAMPLES  # noqa: E402
from ..tasks import build_task  # noqa: E402
from ..tasks.base import IGNORE, TEST  # noqa: E402
from ..theory import cooper, cooper_decode  # noqa: E402
from ..train import _DATA_STREAM, build_member, derived_seed  # noqa: E402
from .registry import (  # noqa: E402
    FigureConfig,
    FigureContext,
    figure_kind,
    save_png,
    unread_metric,
    wrap_text,
)


class ConstructionConfig(FigureConfig):
    kind: Literal["construction_heatmaps"]
    metric: str = unread_metric("the constructed model's embedding and output")
    label: str | None = Field(None, description="the run's label (default: the first run)")
    sample: int = Field(0, ge=0, lt=MAX_SAMPLES, description="test sample index to draw")

    def metrics(self) -> list[str]:
        return []

    def drawn_seeds(self, ctx) -> str:  # one run's model: a title's {seeds} read 'mean of 3 seeds'
        return "one seed"

    def value_refs(self) -> list[tuple[str, str, Any]]:
        return [("label", LABEL, self.label)] if self.label is not None else []

    def run_problems(self, runs: list) -> list[str]:
        trained = sorted({r.train.total_steps for r in runs if r.train.total_steps})
        if trained:  # the figure rebuilds the model from its config: an untrained init
            return [f"kind: construction_heatmaps draws a constructed model from its config "
                    f"alone (train.max_steps: 0); these runs train ({trained[-1]} steps), so it "
                    "would draw their untrained initialisation"]
        return []


def _blocks(task) -> dict[str, slice]:
    """The construction's stream blocks for the run's task (none if it has no construction)."""
    c, V = task.config, task.info.vocab_size
    if c.name == "decode_recall":
        return cooper_decode.layout(V, c.words)
    numbers = getattr(c, "numbers", None)
    return cooper.layout(V, numbers) if numbers is not None else {}


def _block_names(task) -> dict[str, str]:
    """What the blocks hold, for the caption (the AR-with-decoding construction names them)."""
    return dict(cooper_decode.BLOCK_NAMES) if task.config.name == "decode_recall" else {}


def _stream(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(embedded input, stream before the final norm, predictions) for x (1, 1, L)."""
    with torch.no_grad():
        h0 = model.embed_tokens(x)
        h = h0
        for blk in model.blocks:
            h = blk(h)
        pred = model.readout(model.norm_f(h)).argmax(-1)
    return h0[0, 0].double(), h[0, 0].double(), pred[0, 0]


@figure_kind("construction_heatmaps", ConstructionConfig)
def construction_heatmaps(ctx: FigureContext, cfg: ConstructionConfig, path: Path) -> bool:
    """Embedding and output heatmaps (dimension × position) of a constructed model on one example."""
    runs = [r for r in ctx.runs if cfg.label in (None, r.label)]  # with the --set overrides
    if not runs:
        return False
    run = runs[0]
    model = build_member(run).double()
    task = build_task(run.task)
    seed = torch.tensor([derived_seed(run.seed, _DATA_STREAM)])  # the run's own test stream
    b = task.sample(seed, TEST, torch.tensor([[cfg.sample]]))
    emb, out, pred = _stream(model, b.x)
    y = b.y[0, 0]
    sup = y != IGNORE
    L, d = emb.shape
    fig, axes = plt.subplots(3, 1, figsize=(10, 8.6), height_ratios=[4, 4, 0.7],
                             constrained_layout=True)
    blocks = _blocks(task)
    for ax, mat, name in ((axes[0], emb, "(a) input embedding"),
                          (axes[1], out, "(b) output: stream entering the final norm")):
        im = ax.imshow(mat.T.clamp(-1, 1).numpy(), aspect="auto", cmap="viridis", vmin=-1, vmax=1,
                       interpolation="nearest")
        ax.set_ylabel("dimension")
        ax.set_title(name, fontsize=9)
        for bname, sl in blocks.items():
            ax.axhline(sl.start - 0.5, color="w", lw=0.4)
            ax.text(L + 0.5, (sl.start + sl.stop - 1) / 2, bname, fontsize=7, va="center")
        ax.set_xlim(-0.5, L - 0.5)
    fig.colorbar(im, ax=axes[:2], shrink=0.6, label="value (clipped to [-1, 1])")
    hit = np.full(L, np.nan)
    hit[sup.numpy()] = (pred[sup] == y[sup]).double().numpy()
    axes[2].imshow(hit[None], aspect="auto", cmap="RdYlGn", vmin=0, vmax=1,
                   interpolation="nearest")
    axes[2].set_yticks([])
    axes[2].set_xlabel("position")
    n_ok = int((pred[sup] == y[sup]).sum())
    last = "correct" if bool(sup[-1]) and int(pred[-1]) == int(y[-1]) else (
        "unsupervised" if not bool(sup[-1]) else "wrong")
    axes[2].set_title(f"(c) prediction = target at supervised positions (green): {n_ok} of "
                      f"{int(sup.sum())}; last position: {last}", fontsize=9)
    legend = "; ".join(f"{k}: {v}" for k, v in _block_names(task).items())
    head = ctx.fitted_title(cfg, fig.get_figwidth(), 9)
    # wrapped with the run's label (a 190-letter label ran the title off both sides of the image)
    fig.suptitle(wrap_text(f"{head} — {run.label or run.run_id}, test sample {cfg.sample}, "
                           f"d = {d}" + (f"\nblocks — {legend}" if legend else ""),
                           fig.get_figwidth() / 0.95, 9), fontsize=9)  # (lines up to the
    #                    figure's full width: wrap_text keeps 5 % clear, and cooper2026-fig10's fits)
    save_png(fig, path, dpi=130)
    return True
