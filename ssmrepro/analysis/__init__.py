"""Library (analysis): mechanistic probes computed on trained packs at the end of training.

Probes reach a mixer's own hooks through the model contract's ``mixer_inputs`` (models.base), so
they work on any SeqLM whose layers include a mixer with that hook (stored in run records).
"""

from __future__ import annotations

import math

import torch

from ..tasks.base import IGNORE, TEST

HIST_BINS = 50
PROBE_SAMPLES = 500
PROBE_VALUES = 1 << 22  # decay values a pass of ``decay_histogram`` holds at most (all members)


@torch.no_grad()
def layer_decay(model, x: torch.Tensor) -> torch.Tensor:
    """|exp(Δ_t Λ)| of the first block whose mixer has a ``decay`` hook (S6 / S4D / Δᵀ cores, the
    Mamba-1 block), on input x: (E, B, L, channels, N), real. For a complex Λ (``complex_A``)
    the hook's exp(Δ_t Λ) is complex and its modulus e^{Δ_t Re Λ} is the decay (a real cast
    kept e^{Δ Re Λ} cos(Δ Im Λ): the histogram dropped the negative ones without a word)."""
    for _, mixer, inp in model.mixer_inputs(x):
        if hasattr(mixer, "decay"):
            dec = mixer.decay(inp)
            return dec.abs() if dec.is_complex() else dec
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
def decay_histogram(model, task, data_seeds, chunk: int | None = None) -> list[dict]:
    """huang2025 Fig. 1: histogram of e^{-λΔ_t} (= exp(Δ_t Λ)) on test inputs, per member.

    Values of every (t, channel, state) are binned on [0, 1] separately for unsupervised positions
    (t < n in KEEP n-TH: "before") and supervised ones (t >= n: "after"). ``nonfinite`` counts
    the values that are NaN or infinite (a diverged model), which no bin holds: torch.histc
    dropped them without a word, and the histogram of the finite rest (22 % of it missing in one
    probe) was drawn and measured as the member's; its means are then None (not measured).
    The ``PROBE_SAMPLES`` sequences go through the model in passes of at most ``chunk``
    (``train_pack``'s evaluation chunk, what fits the memory; None: any number) and of at most
    ``PROBE_VALUES`` decay values of all members (sample 0 alone first, to learn a sequence's
    count); counts add up exactly, the means to float64 rounding. All 500 in one pass held
    (E, 500, L, channels, N) in float64 beside masks of that shape, which no memory estimate
    counts: 2.5 GB at T 200, d_model 32, d_state 16 for a run estimated at 2.7 MB, killed
    for memory after its training.
    """
    E, dev = data_seeds.shape[0], data_seeds.device
    before = torch.zeros(E, HIST_BINS, dtype=torch.int64)
    after = torch.zeros_like(before)
    sums = torch.zeros(E, 2, dtype=torch.float64)  # (before, after)
    counts = torch.zeros(E, 2, dtype=torch.int64)
    nonfinite = torch.zeros(E, dtype=torch.int64)
    start, step = 0, 1
    while start < PROBE_SAMPLES:
        idx = torch.arange(start, min(PROBE_SAMPLES, start + step), device=dev).expand(E, -1)
        b = task.sample(data_seeds, TEST, idx)
        dec = layer_decay(model, b.x).double()  # (E, B, L, d, N)
        sup = (b.y != IGNORE)[..., None, None].expand_as(dec)  # (E, B, L, d, N)
        for e in range(E):
            finite = torch.isfinite(dec[e])
            nonfinite[e] += int((~finite).sum())
            for i, part in enumerate((dec[e][~sup[e] & finite], dec[e][sup[e] & finite])):
                (before, after)[i][e] += torch.histc(part, HIST_BINS, 0.0, 1.0).long().cpu()
                sums[e, i] += float(part.sum())
                counts[e, i] += part.numel()
        if start == 0:  # the values of one sequence of every member: passes of what the bound holds
            step = max(1, min(chunk or PROBE_SAMPLES, PROBE_VALUES // max(1, dec.numel())))
        start += idx.shape[1]
    out = []
    for e in range(E):
        bad = int(nonfinite[e])
        mean = [float(sums[e, i] / counts[e, i]) if counts[e, i] and not bad else None
                for i in range(2)]
        out.append(
            {
                "bins": HIST_BINS,
                "before": before[e].tolist(),
                "after": after[e].tolist(),
                "mean_before": mean[0],
                "mean_after": mean[1],
                "nonfinite": bad,
            }
        )
    return out


ANALYSES = {"decay_histogram": decay_histogram}

_DECAY_KEYS = ("bins", "before", "after")
_DECAY_MEANS = ("mean_before", "mean_after")
_DECAY_OPTIONAL = ("nonfinite",)  # (records written before it lack it)


def nonfinite_values(res) -> int:
    """How many of a decay histogram record's values were NaN or infinite (no bin holds them;
    0 for a record written before they were counted)."""
    n = res.get("nonfinite") if isinstance(res, dict) else None
    return n if _whole(n) else 0


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _decay_problem(name: str, res) -> str | None:
    """Why ``res`` is not a decay histogram a run recorded: ``HIST_BINS`` whole counts >= 0 of
    each part and two means (numbers, or None)."""
    if not isinstance(res, dict) or set(res) - {*_DECAY_KEYS, *_DECAY_MEANS, *_DECAY_OPTIONAL} or any(
            k not in res for k in _DECAY_KEYS):
        return (f"{name} is not a histogram ({', '.join(_DECAY_KEYS)} and "
                f"{', '.join(_DECAY_MEANS)})")
    if res["bins"] != HIST_BINS or isinstance(res["bins"], bool):
        return f"{name} has {res['bins']!r} bins, not the {HIST_BINS} a run records"
    for part in ("before", "after"):
        counts = res[part]
        if not (isinstance(counts, list) and len(counts) == HIST_BINS
                and all(_whole(c) for c in counts)):
            return f"{name} {part}: not {HIST_BINS} whole counts >= 0"
    if "nonfinite" in res and not _whole(res["nonfinite"]):
        return f"{name} nonfinite {res['nonfinite']!r}: not a whole count >= 0"
    for k in _DECAY_MEANS:
        v = res.get(k)
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool)
                                  and math.isfinite(v)):
            return f"{name} {k} {v!r}: not a number"
    return None


# name -> problem(name, result) -> str | None: what a record of each of ``ANALYSES`` must hold
# (a new analysis adds its own; every result was judged as a decay histogram, so a new
# analysis's records were all refused as 'not a histogram')
ANALYSIS_PROBLEMS = {"decay_histogram": _decay_problem}


def analysis_problem(analysis) -> str | None:
    """Why a run record's ``analysis`` (name -> this member's result, as ``train`` records
    ``ANALYSES``) cannot be what a run computed, or None; each result is checked by its
    analysis's entry of ``ANALYSIS_PROBLEMS``. A decay histogram record edited to negative or
    cut counts was summed into its cell (decay.split 0.76 instead of 0.00: a PASS turned FAIL),
    and one without its bins, with text counts or another shape raised a traceback in
    `plot`."""
    if not isinstance(analysis, dict):
        return "is not a mapping of analysis name -> result"
    for name, res in analysis.items():
        if name not in ANALYSES:
            return f"{name!r} is no analysis a run records (known: {', '.join(ANALYSES)})"
        problem = ANALYSIS_PROBLEMS.get(name)
        if problem is None:
            return (f"{name!r} has no check of its records (analysis.ANALYSIS_PROBLEMS): "
                    "its result cannot be trusted")
        why = problem(name, res)
        if why:
            return why
    return None
