"""Library (analysis): mechanistic probes computed on trained packs at the end of training.

Probes reach a mixer's own hooks through the model contract's ``mixer_inputs`` (models.base), so
they work on any SeqLM whose layers include a mixer with that hook (stored in run records).
"""

from __future__ import annotations

import torch

from ..tasks.base import IGNORE, TEST

HIST_BINS = 50
PROBE_SAMPLES = 500


@torch.no_grad()
def layer_decay(model, x: torch.Tensor) -> torch.Tensor:
    """exp(Δ_t Λ) of the first block whose mixer has a ``decay`` hook (S6 / S4D / Δᵀ cores, the
    Mamba-1 block), on input x: (E, B, L, channels, N)."""
    for _, mixer, inp in model.mixer_inputs(x):
        if hasattr(mixer, "decay"):
            return mixer.decay(inp)
    raise ValueError("decay_histogram needs a mixer with a decay hook (s6, s4d, delta_t, mamba1)")


def has_decay_hook(config, info) -> bool:
    """Whether a block of the model ``config`` builds (for a task of ``info``) has a mixer with a
    ``decay`` hook, as :func:`layer_decay` looks for it; checked on PyTorch's ``meta`` device
    (shapes only, nothing allocated) so ``validate`` refuses `analysis: [decay_histogram]` on a
    Transformer: every pack trained, then failed with this function's ValueError."""
    from ..models.backbone import SeqLM

    cfg = config.to_backbone()
    distinct = list(dict.fromkeys(cfg.layer_names()))
    with torch.device("meta"):
        model = SeqLM(cfg.model_copy(update={"layers": distinct, "repeat": 1}), info, 1)
        h = torch.empty(1, 1, 1, cfg.d_model)
        return any(hasattr(blk.mixer_input(h)[0], "decay") for blk in model.blocks)


@torch.no_grad()
def decay_histogram(model, task, data_seeds) -> list[dict]:
    """huang2025 Fig. 1: histogram of e^{-λΔ_t} (= exp(Δ_t Λ)) on test inputs, per member.

    Values of every (t, channel, state) are binned on [0, 1] separately for unsupervised positions
    (t < n in KEEP n-TH: "before") and supervised ones (t >= n: "after").
    """
    E = data_seeds.shape[0]
    idx = torch.arange(PROBE_SAMPLES, device=data_seeds.device).expand(E, -1)
    b = task.sample(data_seeds, TEST, idx)
    dec = layer_decay(model, b.x).double()  # (E, B, L, d, N)
    sup = (b.y != IGNORE)[..., None, None].expand_as(dec)  # (E, B, L, d, N)
    out = []
    for e in range(E):
        before, after = dec[e][~sup[e]], dec[e][sup[e]]
        out.append(
            {
                "bins": HIST_BINS,
                "before": torch.histc(before, HIST_BINS, 0.0, 1.0).long().tolist(),
                "after": torch.histc(after, HIST_BINS, 0.0, 1.0).long().tolist(),
                "mean_before": float(before.mean()) if before.numel() else None,
                "mean_after": float(after.mean()) if after.numel() else None,
            }
        )
    return out


ANALYSES = {"decay_histogram": decay_histogram}
