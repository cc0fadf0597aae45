"""Stage 3 (train): the one training loop, for a pack of E runs with identical shapes.

Each member keeps its own init seed, data stream, learning-rate schedule, betas/eps/weight decay,
gradient clipping, label smoothing, step budget and early stop; a member that stops is frozen and its
metrics are those at its stop step. NaN/inf loss marks the member ``diverged`` at that step and the
others go on (so does a loss that is not finite in the evaluation at its stop step: its last update
blew its model up).

Target kinds (``TaskInfo.target`` / ``.loss``; a batch's ``y`` has the matching shape, see
``tasks.base.Batch``)::

    per-position classification  y (E, B, L) int64, IGNORE (-100) where unsupervised;
                                 logits readout(features(x)) (E, B, L, C) at supervised positions
    sequence classification      y (E, B) int64; pooled logits readout(h, mask) (E, B, C), and with
                                 a second input readout(h, mask, h2, mask2) (LRA Retrieval)
    regression (loss "mse")      y float (E, B, C) (pooled) or (E, B, L, C), NaN where unsupervised;
                                 loss = mean squared error over the supervised outputs

Classification reports ``<set>.loss`` (cross entropy, label-smoothed in training only) and
``<set>.acc``; regression reports ``<set>.loss`` and ``<set>.mse`` (equal) and no accuracy. Sets:
``val`` and ``test`` (samples 0..size-1 of the split; a dataset task evaluates at most its whole
split), ``train`` (a fixed slice of the training data, min(val_size, train_size) samples; in the
metrics ``train.loss`` stays the loss of the member's last training batch, and ``train.avg_loss``
is the mean training-batch loss over its last ``AVG_LOSS_WINDOW`` = 1000 steps — cooper2026's
auto-LR criterion, the fork's final epoch-average loss with 1000-batch epochs) and every named
evaluation set of ``train.evals`` (the test split of the run's task with some fields overridden,
e.g. longer sequences). The evaluation history has one dict per evaluation:
``{"step", "val.loss", "val.acc", "train.loss", "train.acc"}`` (``.mse`` for regression).
``val.max_rise`` (yu2025 Fig. 6, loss spikes) is the largest rise of a validation loss in the
history (and the final one) above the best validation loss before it, as a fraction of the first.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .kernels.xent import linear_xent
from .optim import LRSchedule, PackedAdam, clip_per_member
from .store import max_rise
from .sweep import RunConfig, per_point
from .tasks import build_task, eval_set_problem, rng
from .tasks.base import (
    IGNORE,
    TEST,
    TRAIN,
    VAL,
    Batch,
    Task,
    TaskInfo,
    batch_problem,
    fixed_split_error,
    loss_problem,
)
from .util import MemberError, memory_available

_INIT_STREAM, _DATA_STREAM, _PERM_STREAM = 1, 2, 3
AVG_LOSS_WINDOW = 1000  # train.avg_loss: mean training-batch loss over the last 1000 steps


# ----------------------------------------------------------------------------------------------
# memory: what one run needs, checked before a pack is built (engine.plan, train_pack)


def member_bytes(run, device: str | None = None, members: int = 1) -> int:
    """Rough activation memory of one member per training step (bytes of the run's dtype, 8 per
    float for ``train.dtype: float64``, with autograd): batch size × ``models.activation_floats``
    (the blocks' mixer estimates + embeddings / logits) + ``models.fixed_floats`` (kernels
    computed once per step whatever the batch) + ``models.work_floats`` (the fused scans' block
    buffers: they grow with the batch up to a bound; a smaller batch's share of them is read as
    proportional, as the activations', by ``engine.plan.fitting_batch``), on ``device`` (None:
    the one ``--device auto`` picks; attention keeps its L×L scores on some paths only,
    ``attention_path``, and the fused scan's time blocks are shorter on a GPU, ``scan_path``).
    Counted at 4
    bytes a float, a float64 run's packs were sized (``engine.plan.auto_pack_size``) against
    twice the activation budget. ``members``: one member's share in a pack of that many (the
    fused scans' work buffers are the pack's, ``pack_need``)."""
    from .kernels.backend import select_device
    from .models import activation_floats, fixed_floats, work_floats
    from .models.mixers.attention import attention_path
    from .models.mixers.common import scan_path

    info = build_task(run.task).info
    dev = select_device("auto") if device is None else device
    B = run.train.batch_size
    with attention_path(dev, run.train.dtype), scan_path(dev, members):
        return _float_bytes(run) * (B * activation_floats(run.model, info)
                                    + fixed_floats(run.model, info) + work_floats(run.model, info, B))


def _float_bytes(run) -> int:
    """Bytes of one float of ``run``'s training dtype."""
    return 8 if run.train.dtype == "float64" else 4


# a fixed training set (``train.train_size``) is read in a new order each epoch, one per member
# (``rng.permutation_keys``): its int64 indices, kept for the epoch, and the peak while the next
# epoch's order is built beside them (the draws, their sort and its indices: 36-48 bytes a
# sample measured, plus the old order). Uncounted, train_size 10**8 beside a tiny model took
# 4.8 GB a member that no estimate saw: a pack of the planner's size ended in an allocator error
ORDER_BYTES = 8
ORDER_PEAK_BYTES = 56


@dataclass(frozen=True)
class MemoryNeed:
    """The planner's estimate of one run's memory at its largest (one member of a pack)."""

    params: int  # parameters of one member
    param_bytes: int  # weights, gradients and the two Adam moments
    train_bytes: int  # activations kept for backward by one training step (whole batch)
    eval_bytes: int  # what one evaluation batch holds at its peak (no autograd)
    fixed_bytes: int = 0  # the part of train_bytes that does not grow with the batch
    order_bytes: int = 0  # the epoch's order of a fixed training set, held all through training
    order_peak: int = 0  # ... while the next epoch's order is built (no activations live then)

    def peak(self, eval_bytes: int | None = None) -> int:
        """``total`` with an evaluation batch of ``eval_bytes`` (default: this estimate's)."""
        ev = self.eval_bytes if eval_bytes is None else eval_bytes
        return self.param_bytes + max(self.order_peak,
                                      self.order_bytes + max(self.train_bytes, ev))

    @property
    def total(self) -> int:
        return self.peak()


def memory_need(run, device: str | None = None, eval_chunk: int | None = None,
                members: int = 1) -> MemoryNeed:
    """Bounded estimate (no tensor is allocated; fast for any size): parameters x 4 copies x
    bytes (``models.param_count``, counted on the meta device) + the larger of a training step's
    activations (``member_bytes``: the mixers' own estimates) and what an evaluation batch holds
    at its peak (``models.eval_batch_floats``: the residual stream with the larger of the
    logits and the largest block's intermediates, scan states and work buffers, on ``device``
    as ``member_bytes`` counts them) on the run's task or any of its
    named evaluation sets (``train.evals``: a longer T there is a larger batch).
    ``eval_chunk``: the evaluation's forward passes hold that many sequences
    (``choose_eval_chunk``, the engine's choice), not the whole evaluation batch (``eval_batch``).
    ``members``: one member's share in a pack of that many (``pack_need``)."""
    return member_needs(run, device, eval_chunk)(members)


def member_needs(run, device: str | None = None, eval_chunk: int | None = None
                 ) -> Callable[[int], MemoryNeed]:
    """``memory_need`` as a function of the pack's members, the parameters counted (a model
    built on the meta device) and the evaluation sets built once: what a search over pack
    sizes reads (``largest_pack``)."""
    from .models import fixed_floats, param_count

    info = build_task(run.task).info
    width = _float_bytes(run)
    n = param_count(run.model, info)
    fixed = width * fixed_floats(run.model, info)
    eb = eval_batch(run)
    m = eb if eval_chunk is None else max(1, min(eval_chunk, eb))
    size = eval_sizer(run, device)
    samples = run.train.train_size or 0

    def need(members: int) -> MemoryNeed:
        E = max(1, members)
        return MemoryNeed(n, 4 * width * n, member_bytes(run, device, E), size(m, E), fixed,
                          ORDER_BYTES * samples, ORDER_PEAK_BYTES * samples)

    return need


def pack_need(run, members: int, device: str | None = None, eval_chunk: int | None = None) -> int:
    """Bytes a pack of ``members`` runs of ``run``'s shape needs at its largest (the one place
    the planner sizes a pack by: ``choose_eval_chunk``, ``engine.plan.auto_pack_size``,
    ``pack_memory``, ``pack_size_problems``): ``members`` x a member's own part
    (``memory_need``: parameters, activations, evaluation batch of ``eval_chunk`` sequences) +
    what the pack allocates once for all of them (the fused scans' work buffers on CPU, one set
    per scan call whatever the members: ``models.mixers.common.fused_scan_buffers``). Each
    member's whole estimate was counted: CPU packs of 16 S6 or Mamba runs estimated 1.8-2.6x
    their measured peak, and were sized that much smaller."""
    E = max(1, members)
    return E * memory_need(run, device, eval_chunk, E).total


def largest_pack(run, device: str | None, room: int, cap: int, budget: int | None = None,
                 eval_chunk: int | None = None) -> int:
    """The largest pack size in 1..``cap`` whose ``pack_need`` fits ``room`` bytes (and whose
    training steps' activations fit ``budget``, where given); 1 where none does. A binary search
    (the need grows with the members): about log2(cap) estimates."""
    needs = member_needs(run, device, eval_chunk)

    def fits(E: int) -> bool:
        need = needs(E)
        return E * need.total <= room and (budget is None or E * need.train_bytes <= budget)

    return largest_where(fits, cap)


def largest_where(fits: Callable[[int], bool], top: int) -> int:
    """The largest n in 1..``top`` for which ``fits(n)`` holds, ``fits`` holding up to some n
    and not past it (a binary search: about log2(top) calls); 1 where it holds for none (the
    pack size and the evaluation chunk: ``largest_pack``, ``choose_eval_chunk``)."""
    lo, hi = 1, max(1, top) + 1  # fits(lo) or lo == 1; fits(hi) is False
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def eval_sizer(run, device: str | None = None, task_only: bool = False,
               members: int = 1) -> Callable[..., int]:
    """Bytes one member's evaluation forward pass of m sequences holds at its peak, as a
    function of m (``memory_need``'s evaluation part: the largest over the run's task and its
    named evaluation sets; ``task_only``: the run's own task's; ``members``, or the function's
    second argument: one member's share in a pack of that many, ``pack_need``). The sets are
    built and checked once (ValueError
    naming ``train.evals.<name>`` for a set the model cannot read)."""
    from .kernels.backend import select_device
    from .models import eval_batch_floats, refuse_unread_window
    from .models.mixers.attention import attention_path
    from .models.mixers.common import scan_path

    info = build_task(run.task).info
    width = _float_bytes(run)
    dev = select_device("auto") if device is None else device
    base = run.task.model_dump()
    evals = {name: build_task({**base, **ov}).info for name, ov in run.train.evals.items()}
    for name, other in evals.items():
        try:
            run.model.to_backbone().check_eval(info, other)
        except ValueError as err:
            raise ValueError(f"train.evals.{name}: {err}") from None
    infos = [info, *evals.values()]
    refuse_unread_window(run.model, max(i.seq_len for i in infos))
    if task_only:
        infos = [info]

    def size(m: int, pack: int = members) -> int:
        with attention_path(dev, run.train.dtype), scan_path(dev, pack):
            return max(width * eval_batch_floats(run.model, i, m) for i in infos)

    return size


def eval_batch(run) -> int:
    """The largest evaluation batch ``run`` builds: ``train.eval_batch_size``, but no more than
    its largest evaluation set (val_size, or test_size, which named sets take too; the fixed
    training slice is at most val_size). An eval_batch_size of 60,000 over sets of 16 samples
    was counted at 60,000: `run` refused a run whose batches hold 16 (1,924 GB estimated)."""
    tc = run.train
    return min(tc.eval_batch_size, max(tc.val_size, tc.test_size))


def choose_eval_chunk(run, device: str, available: int | None, members: int = 1,
                      need: MemoryNeed | None = None) -> int:
    """Sequences per forward pass of ``run``'s evaluation in a pack of ``members`` runs: the
    largest m <= ``eval_batch(run)`` such that the pack (``pack_need`` at chunk m: parameters,
    and the larger of a training step and an evaluation pass of m sequences) fits
    ``available`` bytes (the engine passes ``pack_room`` of what it measures: MemAvailable on CPU,
    the GPU's free memory).
    The whole evaluation batch wherever it fits, the memory is unknown (None), the model has
    no estimate or its data is not here; 1 where not even one sequence fits (``memory_problem``
    refuses a run that does not fit all of the memory so; one that fits it but not the pack's
    half evaluates at 1, or at the largest chunk whose pack needs no more than at 1, its
    training step being the larger, as ``engine.plan.eval_chunk_lines`` says). An execution choice, as
    ``micro_batch``: ``train.eval_batch_size`` and the run id stay; the metrics do not depend
    on it beyond rounding (``evaluate``).
    Binary search over m (the estimate grows with m): about log2(eval batch) estimates.
    ``need``: ``memory_need(run, device, members=members)``, where the caller has it."""
    from .tasks import DataUnavailable

    eb = eval_batch(run)
    if available is None or not hasattr(run.model, "to_backbone"):
        return eb
    try:
        need = need or memory_need(run, device, members=members)
        if members * need.total <= available:  # (``pack_need``, whole batches)
            return eb
        size = eval_sizer(run, device, members=members)
    except (DataUnavailable, ValueError):  # no data here; a model its blocks refuse
        return eb
    total = lambda m: members * need.peak(size(m))  # noqa: E731
    # where not even chunks of 1 fit, any chunk whose pack needs no more than theirs (the
    # training step's, where it is the larger) is as good: chunks of 1 evaluated a pack whose
    # training step alone exceeded the room one sequence at a time, for no memory saved
    limit = max(available, total(1))
    fits = lambda m: total(m) <= limit  # noqa: E731
    return eb if fits(eb) else largest_where(fits, eb - 1)


def pack_room(available: int) -> int:
    """The bytes one pack may take of ``available`` (CPU: MemAvailable; GPU: its free memory):
    half, as ``engine.plan.auto_pack_size`` sizes packs. The other half is headroom for the
    estimate's error (measured peaks are 0.7-1.5x ``memory_need``), the process itself and
    other workers; an evaluation chunk chosen against all of it filled 22.8 GB of 23."""
    return available // 2


UNBOUNDED = 1 << 62  # bytes: "no limit" for memory checks that only look for models that
# cannot be built (or sizes no machine holds); 4.6 billion GB


def available_memory(device: str) -> int | None:
    """Bytes this process could still allocate on ``device``: free GPU memory on CUDA (for plain
    'cuda', the least of every visible GPU: the local engine's workers take one GPU each), else
    the kernel's MemAvailable (Linux) or free physical pages; None where unknown."""
    if device.startswith("cuda"):
        try:
            gpus = ([torch.device("cuda", i) for i in range(torch.cuda.device_count())]
                    if device == "cuda" else [torch.device(device)])
            return min(int(torch.cuda.mem_get_info(g)[0]) for g in gpus) if gpus else None
        except (RuntimeError, AssertionError, ValueError):
            return None
    return memory_available()


def _gb(n: int) -> str:
    """A size in memory for a person, in GB, MB or kB (every such line goes through it): a
    tiny model's pack estimate read '0.0 MB', as if nothing had been estimated."""
    if n >= 1e8:
        return f"{n / 1e9:,.1f} GB"
    if n >= 1e5:
        return f"{n / 1e6:,.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:,.1f} kB"
    return f"{max(int(n), 0):,} bytes"


def memory_problem(run, device: str, available: int) -> str | None:
    """'key: reason' when ``run`` alone needs more than ``available`` bytes on ``device`` even
    evaluating one sequence at a time (``choose_eval_chunk``: the engine evaluates in chunks of
    whatever fits), else None (also for a model without an estimate, i.e. no ``to_backbone``,
    and for a task whose data is absent here: the run loads the data and checks then). An
    evaluation batch too large for the memory refused the run (huang2025-fig3's paper
    Mamba-Δᵀ at d 128: 41.6 GB for its batches of 1,000, a 0.8 GB training step, on 24 GB),
    and its hint, a smaller train.eval_batch_size, changed the run ids."""
    from .tasks import DataUnavailable

    if not hasattr(run.model, "to_backbone"):
        return None
    try:
        need = memory_need(run, device, eval_chunk=1)
    except DataUnavailable:
        return None
    except ValueError as err:  # a shape its blocks refuse (heads that do not divide the width)
        label = f" {run.label}" if run.label else ""
        return f"model: run{label} cannot be built: {err}"
    if need.total <= available:
        return None
    eb = eval_batch(run)
    named = run.train.evals and need.eval_bytes > eval_sizer(run, device, task_only=True)(1)
    # the key of the largest part; the model's where its parameters alone exceed the memory (no
    # batch fits then: a vocabulary of 10**10 named train.batch_size, its 5,280 GB of parameters
    # beside 6,400 GB of a step's activations)
    what = ("train.train_size" if need.order_peak >= max(need.param_bytes, need.train_bytes,
                                                         need.eval_bytes)
            else "model" if need.param_bytes >= min(available, max(need.train_bytes,
                                                                   need.eval_bytes)) else
            "train.batch_size" if need.train_bytes >= need.eval_bytes else
            "train.evals" if named else "model")
    label = f" {run.label}" if run.label else ""
    have = (f"only {_gb(available)} is available" if available < UNBOUNDED else
            "no machine has that much")  # the bound `validate` checks: not this machine's memory
    ev = (f"of an evaluation batch (1) {_gb(need.eval_bytes)}" if eb == 1 else
          f"of an evaluation pass ({eb} a batch, evaluated in chunks of as few as 1 sequence) "
          f"{_gb(need.eval_bytes)}")
    return (f"{what}: run{label} needs about {_gb(need.total)} of memory on {device}: "
            f"{need.params:,} parameters x 4 copies (weights, gradients, Adam moments) = "
            f"{_gb(need.param_bytes)}, plus activations of a training step (batch "
            f"{run.train.batch_size}) {_gb(need.train_bytes)} or {ev}"
            + (f", or {_gb(need.order_peak)} while each epoch's order of its fixed training set "
               f"of {run.train.train_size:,} samples is drawn (train.train_size)"
               if need.order_peak else "")
            + f"; {have}. "
            + ("Make the fixed training set smaller (train.train_size)"
               if what == "train.train_size" else "Make the model "
               "or the sequences smaller (model.d_model, model.n_layers, task length or "
               "vocabulary, the lengths of train.evals) or the training batch (train.batch_size)"))


def memory_problems(runs: list, device: str, available: int | None = None) -> list[str]:
    """``memory_problem`` of one run per shape (pack key) of ``runs``, against ``available``
    bytes (default: measured now on ``device``; only models that cannot be built are reported
    where that is unknown)."""
    groups: dict[str, object] = {}
    for r, key in zip(runs, per_point(runs, RunConfig.pack_key)):
        groups.setdefault(key, r)
    avail = available_memory(device) if available is None and groups else available
    unbounded = avail is None
    # one line per distinct message: shapes whose runs carry no label (chen2025-fig4's depths
    # with `--set model.blocks.SSM.mixer.heads=3`) printed the same refusal once per shape
    return list(dict.fromkeys(
        m for r in groups.values()
        if (m := memory_problem(r, device, UNBOUNDED if unbounded else avail)) is not None))


def model_problems(runs: list) -> list[str]:
    """'model: run L cannot be built: reason' for the models of ``runs`` that their blocks
    refuse (counted on the meta device, nothing allocated; one run per shape), and
    'model.init: ...' for an init scheme its model does not fit (``init_problems``): what
    ``ssmrepro validate`` reports, where ``run`` would fail before training. An LRA dataset not
    here is built from its nominal shapes (``tasks.lra.nominal_data``), as ``run --dry-run``
    builds it: without the data, `validate` said ok to a per-position head on generated ListOps
    (one target per sequence), which `run --dry-run` and `run` refused."""
    from .tasks.lra import nominal_data

    with nominal_data():
        return (memory_problems(runs, "cpu", available=UNBOUNDED) + init_problems(runs)
                + init_std_problems(runs) + lr_scale_problems(runs))


def _init_lines(runs: list, why_of, lead: str = "") -> list[str]:
    """'model.init: run <label> <lead><why>' once per distinct line, ``why_of`` asked once per
    sweep point (None: no problem)."""
    out: list[str] = []
    for r, why in zip(runs, per_point(runs, why_of)):
        line = why and f"model.init: run{f' {r.label}' if r.label else ''} {lead}{why}"
        if line and line not in out:
            out.append(line)
    return out


def init_std_problems(runs: list) -> list[str]:
    """'model.init: run L ...' for the runs whose init scheme 'mamba' sets ``std`` on a model of
    continuous inputs: the scheme draws only the token embedding from N(0, std) (its other
    matrices keep PyTorch's defaults), and such a model has an input encoder instead, so the std
    changed nothing (`init: {scheme: mamba, std: 0.05}` on LRA Image trained the std 0.02 model
    under another run id). `validate`, `run` and `run --dry-run` refuse them."""
    from .models.init import InitConfig
    from .tasks import DataUnavailable

    default = InitConfig.model_fields["std"].default

    def why_of(r):  # once per sweep point
        init = r.model.to_backbone().init if hasattr(r.model, "to_backbone") else None
        if init is None or init.scheme != "mamba" or init.std == default:
            return None
        try:
            info = build_task(r.task).info
        except DataUnavailable:  # no data here: the run checks when `run` builds its tasks
            return None
        if info.input_dim is None:
            return None
        return (f"std {init.std:g} is not read by scheme 'mamba' on a model of continuous inputs "
                f"(task {r.task.name}, input_dim {info.input_dim}): the scheme draws only a token "
                "embedding from N(0, std), and this model reads its inputs through an encoder; "
                "the run would train the same model as without it under another run id; leave "
                "std out")

    return _init_lines(runs, why_of)


def lr_scale_problems(runs: list) -> list[str]:
    """'train.lr_scale: run L ...' for the runs whose ``train.lr_scale`` names a learning-rate
    group that no trained parameter of their model belongs to (``models.layers.lr_group``: a
    Transformer has no Δ or Λ, an S4D core no Δ, an S6 with ``discretize: false`` neither):
    the scale changed nothing, every parameter trained at the plain lr under another run id;
    and 'train.decay_all: run L ...' for the runs with ``train.decay_all`` whose model has no
    trained parameter exempt from weight decay (``models.layers.no_weight_decay``: koren2026's
    linear Mamba): every parameter decayed already. Checked on the meta device once per model
    and task (nothing allocated)."""
    import json

    from .models import build_model
    from .sweep.config import lean
    from .tasks import DataUnavailable

    def key_of(r):
        if not r.train.lr_scale and not r.train.decay_all:
            return None
        try:
            info = build_task(r.task).info
        except DataUnavailable:  # no data here: nothing to check the model against
            return None
        return json.dumps(lean(r.model), sort_keys=True), repr(info)

    def tagged(p) -> bool:  # in a group, with at least one entry (columns (0, 0): none)
        cols = getattr(p, "_lr_group_cols", None)
        return (p.requires_grad and getattr(p, "_lr_group", None) is not None
                and (cols is None or cols[1] > cols[0]))

    groups: dict = {}
    out = []
    for r, key in zip(runs, per_point(runs, key_of)):
        if key is None:
            continue
        if key not in groups:
            try:
                with torch.device("meta"):
                    model = build_model(r.model, build_task(r.task).info, 1)
            except ValueError:  # a model its blocks refuse (``memory_problems`` reports it)
                groups[key] = None
                continue
            groups[key] = ({p._lr_group for p in model.parameters() if tagged(p)},
                           any(p.requires_grad and getattr(p, "_no_weight_decay", False)
                               for p in model.parameters()))
        if groups[key] is None:
            continue
        have, exempt = groups[key]
        label = f" {r.label}" if r.label else ""
        model = getattr(r.model, "name", type(r.model).__name__)
        missing = [g for g in r.train.lr_scale if g not in have]
        lines = []
        if missing:
            s = "s" if len(missing) > 1 else ""
            lines.append(f"train.lr_scale: run{label} scales learning-rate group{s} "
                         f"{', '.join(repr(g) for g in missing)}, but its model ({model}) has "
                         f"no parameter in {'them' if s else 'it'} (its groups: "
                         f"{', '.join(sorted(have)) or 'none'}): the scale would change "
                         f"nothing; leave {'them' if s else 'it'} out of this run's lr_scale")
        if r.train.decay_all and not exempt:
            lines.append(f"train.decay_all: run{label} decays every parameter, but its model "
                         f"({model}) exempts none from weight decay (no norm, bias or SSM "
                         "parameter tagged no_weight_decay): every parameter decays either way; "
                         "leave decay_all out")
        # once per line: the seeds of a point (koren2026-tab10's paper profile: 5) printed it
        # once each, the same line five times
        out.extend(line for line in lines if line not in out)
    return out


def init_problems(runs: list) -> list[str]:
    """'model.init: run L cannot be initialised: reason' for the runs whose init scheme fits only
    some models (``models.init.STRUCTURAL``: designed weights, cooper constructions) and not
    theirs, checked on the meta device once per shape and scheme (the init is member-level: a
    pack mixes schemes, so one run per shape is not enough)."""
    from .models import build_model
    from .models.init import STRUCTURAL, init_problem
    from .tasks import DataUnavailable

    def init_of(r):
        b = r.model.to_backbone() if hasattr(r.model, "to_backbone") else None
        return b.init if b is not None and b.init.scheme in STRUCTURAL else None

    import json

    from .sweep.config import lean

    def key_of(r):  # what the check reads: the model config (its init included) and task info
        if init_of(r) is None:
            return None
        try:
            info = build_task(r.task).info
        except DataUnavailable:  # no data here: the run checks when it builds its pack
            return None
        return json.dumps(lean(r.model), sort_keys=True), repr(info)

    seen: set = set()
    out = []
    misfit = set()  # the keys of models the scheme does not fit
    keys = per_point(runs, key_of)
    for r, key in zip(runs, keys):
        if key is None or key in seen:
            continue
        seen.add(key)
        try:
            with torch.device("meta"):
                why = init_problem(build_model(r.model, build_task(r.task).info, 1), init_of(r))
        except ValueError:  # a model its blocks refuse (``memory_problems`` reports it)
            continue
        if why:
            misfit.add(key)
            label = f" {r.label}" if r.label else ""
            out.append(f"model.init: run{label} cannot be initialised: {why}")
    # per run, for the models that fit (the key reads the task's info, not its number tokens)
    return out + construction_problems([r for r, key in zip(runs, keys)
                                        if key is not None and key not in misfit])


def construction_problems(runs: list) -> list[str]:
    """'model.init: run L cannot be initialised: reason' for the runs whose cooper construction
    is written for another task than theirs (``construction_task_problem``): `validate` and
    `run` refuse them (the construction's weights trained nothing and FAILed its claims)."""
    def why_of(r):  # once per sweep point
        b = r.model.to_backbone() if hasattr(r.model, "to_backbone") else None
        return construction_task_problem(b.init if b is not None else None, r.task)

    return _init_lines(runs, why_of, "cannot be initialised: ")


def construction_task_problem(init, task) -> str | None:
    """Why a cooper construction's weights do not solve the run's ``task`` (None: they do, or
    the init is no construction): selective copy's construction is written for the task's
    number tokens (``numbers``, ``number_offset``, copies of the task's own fields), so
    cooper2026-fig9 with ``task.numbers: 10`` and the init's 5 read five numbers as words and
    FAILed 'the construction is exact' (0.125); decode recall's is for task decode_recall."""
    if init is None or init.scheme != "cooper_construction":
        return None
    want = init.construction
    if getattr(task, "name", None) != want:
        return (f"construction {want!r} is written for task {want}, not "
                f"{getattr(task, 'name', None)!r}")
    if want == "selective_copy":
        odd = [f"{k} {getattr(init, k)} (task.{k} {getattr(task, k)})"
               for k in ("numbers", "number_offset") if getattr(init, k) != getattr(task, k)]
        if odd:
            return ("the selective-copy construction is written for the task's number tokens, "
                    f"but model.init has {', '.join(odd)}: set model.init's numbers and "
                    "number_offset to the task's")
    return None


def derived_seed(seed: int, stream: int) -> int:
    """A 32-bit seed for one purpose (init, data, ...) derived from the run seed."""
    return int(rng.key(torch.tensor([seed]), stream)[0])


def supervised_logits(model, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None,
                      x2: torch.Tensor | None = None, mask2: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Model outputs where some target is supervised, and the matching targets.

    The target kind follows from ``y`` (``tasks.base.Batch``):

    - sequence level, y (E, B) int64 or (E, B, C) float: pooled outputs ``readout(h, mask)``
      (E, B, C); with a second input x2 ``readout(h, mask, h2, mask2)``, where both inputs go
      through ``features`` as one batch of 2B sequences when they have the same length (one pass;
      batch statistics, e.g. BatchNorm's, then cover both documents, as in S4's retrieval).
    - per-position regression, y (E, B, L, C) float: every position, (E, B, L, C).
    - per-position classification, y (E, B, L) int64: (E, B, K, C) and targets (E, B, K), K = the
      largest number of supervised positions of any sequence (sequences with fewer get ignored
      padding; a batch with no supervised position at all reads every position). Exact (the
      loss never reads other positions) and much cheaper when few positions are supervised
      (MQAR: κ of L); falls back to all positions otherwise.
    """
    if y.dim() == (3 if y.is_floating_point() else 2):  # one target per sequence
        if x2 is None:
            return model.readout(model.features(x), mask), y
        B = x.shape[1]
        if x2.shape[2] == x.shape[2]:
            h = model.features(torch.cat([x, x2], dim=1))  # (E, 2B, L, d)
            h, h2 = h[:, :B], h[:, B:]
        else:
            h, h2 = model.features(x), model.features(x2)
        return model.readout(h, mask, h2, mask2), y
    h = model.features(x)  # (E, B, L, d)
    if y.is_floating_point():
        return model.readout(h), y
    hs, ys = supervised_positions(h, y)
    return model.readout(hs), ys


def supervised_positions(h: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Features (E, B, L, d) and int targets (E, B, L) -> those at the supervised positions,
    (E, B, K, d) and (E, B, K) (see ``supervised_logits``), or both unchanged when more than
    half the positions are supervised (or none is)."""
    sup = y != IGNORE
    K = int(sup.sum(-1).max())
    if K == 0 or K * 2 > y.shape[-1]:  # K = 0: a (micro-)batch with no target (short sequences)
        return h, y
    pos = torch.argsort(sup.to(torch.int8), dim=-1, descending=True, stable=True)[..., :K]
    hs = h.gather(2, pos.unsqueeze(-1).expand(*pos.shape, h.shape[-1]))  # (E, B, K, d)
    return hs, y.gather(2, pos)


def training_loss(model, batch: Batch, dtype: torch.dtype | None,
                  smoothing: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-member training loss (E,), supervised count (E,)) of a batch, with autograd.

    Equals ``member_losses(*supervised_logits(...))``. Per-position classification by a model
    whose read-out is one linear map (``model.linear_readout()``: the head's (E, d, C) weight and
    bias, e.g. a plain or tied head) goes through ``kernels.xent.linear_xent`` instead, which
    never materialises the (E, B, L, C) logits (tests/test_xent.py: same losses and gradients,
    float64); everything else through the logits."""
    x, y, mask, x2, mask2 = batch_fields(batch, dtype)
    head = getattr(model, "linear_readout", None)
    head = head() if head is not None and y.dim() == 3 and not y.is_floating_point() else None
    if head is None:
        loss, _, count = member_losses(*supervised_logits(model, x, y, mask, x2, mask2),
                                       smoothing, score=False)
        return loss, count
    hs, ys = supervised_positions(model.features(x), y)
    return linear_xent(hs, *head, ys, smoothing)


def member_losses(out: torch.Tensor, y: torch.Tensor, smoothing: torch.Tensor | None = None,
                  score: bool = True):
    """Per-member mean loss, correct predictions and supervised count: (E,), (E,) | None, (E,).

    Classification: out (E, ..., C) logits, y (E, ...) int64 with IGNORE = unsupervised; the loss
    is the cross entropy over supervised targets, with ``smoothing`` (E,) torch's label-smoothed
    one, (1-ε)·nll + ε·mean_c(-log p_c). Regression: out and y float (E, ..., C), NaN in y =
    unsupervised; the loss is the mean squared error over supervised outputs, ``correct`` is None.
    ``score=False`` skips the accuracy (``correct`` is None): training steps do not need it.
    """
    E = out.shape[0]
    if y.is_floating_point():
        sup = ~torch.isnan(y)
        y0 = torch.where(sup, y, torch.zeros_like(y))  # NaN-free, so no NaN gradient leaks
        err = torch.where(sup, out - y0, torch.zeros_like(out))
        count = sup.reshape(E, -1).sum(1).to(out.dtype)
        return (err * err).reshape(E, -1).sum(1) / count.clamp(min=1), None, count
    mask = y != IGNORE
    logp = F.log_softmax(out, dim=-1)
    nll = -logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (E, B[, L])
    if smoothing is not None:
        eps = smoothing.view(E, *([1] * (nll.dim() - 1))).to(logp.dtype)
        nll = (1 - eps) * nll + eps * (-logp.mean(-1))
    count = mask.reshape(E, -1).sum(1).to(logp.dtype)
    # an output read at an unsupervised position (padding of supervised_positions, or every
    # position) counts nothing even where it is not finite (nll * mask made it NaN)
    loss = torch.where(mask, nll, torch.zeros_like(nll)).reshape(E, -1).sum(1) / count.clamp(min=1)
    if not score:
        return loss, None, count
    correct = ((out.argmax(-1) == y) & mask).reshape(E, -1).sum(1)
    return loss, correct, count


def supervised_count(y: torch.Tensor) -> torch.Tensor:
    """Supervised targets per member (E,): the denominator of ``member_losses``' mean."""
    E = y.shape[0]
    sup = ~torch.isnan(y) if y.is_floating_point() else y != IGNORE
    return sup.reshape(E, -1).sum(1)


def slice_batch(b: Batch, start: int, stop: int) -> Batch:
    """Sequences start..stop-1 of every member: a micro-batch."""
    cut = lambda t: None if t is None else t[:, start:stop]  # noqa: E731
    return Batch(x=cut(b.x), y=cut(b.y), mask=cut(b.mask), x2=cut(b.x2), mask2=cut(b.mask2))


def forward_backward(model, batch: Batch, dtype: torch.dtype, smoothing: torch.Tensor | None,
                     active: torch.Tensor, micro_batch: int | None = None) -> torch.Tensor:
    """Per-member training loss (E,) of ``batch``, with the gradient of the active members' summed
    losses accumulated in ``.grad`` (members have disjoint parameters, so the sum's gradient is
    each member's own).

    ``micro_batch`` = m < B runs the batch in chunks of m sequences (gradient accumulation): chunk
    c adds its summed per-target loss divided by the WHOLE batch's supervised count, so the loss
    and gradients equal the full batch's up to rounding (tests/test_train_targets.py, float64).
    The working set of one chunk is m/B of the batch's: the planner picks m to keep it in cache.
    Models whose training forward mixes sequences (BatchNorm batch statistics) need m = None.

    The forward runs over every member; the buffers it updates (BatchNorm's running statistics)
    keep the values they had for inactive members (``keep_frozen``): a member stopped at step s
    evaluates with the statistics of step s, as it would trained alone.
    """
    with keep_frozen(model, active):
        return _forward_backward(model, batch, dtype, smoothing, active, micro_batch)


class keep_frozen:  # noqa: N801  (a context manager used like a function)
    """Within the block, the per-member buffers of ``model`` (leading dim E: BatchNorm's running
    statistics) may change; on exit the slices of members not in ``active`` get back their values
    from entry. A training forward of the pack updated a stopped member's running statistics at
    every later step of the others (its final metrics then depended on how long its pack-mates
    trained, differing from the member trained alone). Nothing is copied when every member is
    active or the model has no such buffer."""

    def __init__(self, model, active: torch.Tensor):
        from .models.layers import PackedModule

        self.active, self.saved = active, []
        if bool(active.all()):
            return
        E = active.shape[0]
        self.saved = [(b, b.detach().clone()) for m in model.modules()
                      if isinstance(m, PackedModule) for b in m.buffers(recurse=False)
                      if b.dim() and b.shape[0] == E]

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        with torch.no_grad():
            for b, old in self.saved:
                act = self.active.view(-1, *([1] * (b.dim() - 1)))
                b.copy_(torch.where(act, b, old))


def _forward_backward(model, batch: Batch, dtype: torch.dtype, smoothing: torch.Tensor | None,
                      active: torch.Tensor, micro_batch: int | None) -> torch.Tensor:
    B = batch.y.shape[1]
    if micro_batch is None or micro_batch >= B:
        loss, _ = training_loss(model, batch, dtype, smoothing)
        torch.where(active, loss, torch.zeros_like(loss)).sum().backward()
        return loss.detach()
    total = supervised_count(batch.y).clamp(min=1).to(torch.float64)
    out = torch.zeros(batch.y.shape[0], dtype=torch.float64, device=batch.y.device)
    for c0 in range(0, B, micro_batch):
        sub = slice_batch(batch, c0, min(B, c0 + micro_batch))
        loss, count = training_loss(model, sub, dtype, smoothing)
        part = loss * (count.to(loss.dtype) / total.to(loss.dtype))  # this chunk's share
        torch.where(active, part, torch.zeros_like(part)).sum().backward()
        out += part.detach().double()
    return out.to(dtype)


def batch_fields(b: Batch, dtype: torch.dtype | None = None) -> tuple:
    """(x, y, mask, x2, mask2) for ``supervised_logits``; float inputs and targets in ``dtype``."""
    cast = lambda t: t.to(dtype) if dtype is not None and t is not None and t.is_floating_point() else t  # noqa: E731
    return cast(b.x), cast(b.y), b.mask, cast(b.x2), b.mask2


def _float_dtype(model) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


class NoTargets(MemberError):
    """A data set whose samples have no supervised position (every target IGNORE / NaN).
    ``members``: the pack's members (indices) whose own samples have none; the others' have
    some (their data are their own: ``engine.local.train_records`` trains them without these)."""


@torch.no_grad()
def require_targets(task, data_seeds, split: int, size: int, batch: int, what: str) -> None:
    """``NoTargets`` unless every member's samples 0..size-1 of ``split`` hold a supervised
    target (reads batches until each member has one; usually the first)."""
    seen = torch.zeros(data_seeds.shape[0], dtype=torch.bool, device=data_seeds.device)
    for start in range(0, size, batch):
        idx = torch.arange(start, min(size, start + batch), device=data_seeds.device)
        seen |= supervised_count(task.sample(data_seeds, split, idx.expand(len(seen), -1)).y) > 0
        if bool(seen.all()):
            return
    raise NoTargets(f"the {what} set ({size:,} samples) has no supervised position: nothing to "
                    "learn or measure (its accuracy and loss read 0); check the task's settings "
                    "(a probability of 0 or 1, a length too short for its layout)",
                    tuple(torch.nonzero(~seen).flatten().tolist()))


def member_sums(out: torch.Tensor, y: torch.Tensor) -> tuple:
    """Per-member sums of an evaluation pass: loss summed over the supervised targets (each
    sequence's sum in the model's dtype, the sequences' sums added in float64), correct
    predictions (int64; None for regression) and supervised targets (int64), each (E,). The
    same losses as ``member_losses`` (no smoothing), kept as sums so that a set evaluated in
    chunks adds up to the same totals whatever the chunks (a float32 mean per batch times its
    count moved the sum with the batch's cut; a float32 count is inexact past 2**24 targets).
    Nothing larger than one float64 per sequence is made beside what ``member_losses`` makes
    (the memory estimate's ``eval_floats`` counts those)."""
    E, B = out.shape[:2]
    if y.is_floating_point():
        sup = ~torch.isnan(y)
        err = torch.where(sup, out - torch.where(sup, y, torch.zeros_like(y)),
                          torch.zeros_like(out))
        per_seq = (err * err).reshape(E, B, -1).sum(-1)
        return per_seq.double().sum(1), None, sup.reshape(E, -1).sum(1)
    mask = y != IGNORE
    logp = F.log_softmax(out, dim=-1)
    nll = -logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (E, B[, L])
    # a non-finite output at a supervised position: NaN; at an unsupervised one (read as the
    # padding of supervised_positions, or as every position where most are supervised, so
    # depending on the batch's cut): nothing, as member_losses' (nll * mask made it NaN)
    per_seq = torch.where(mask, nll, torch.zeros_like(nll)).reshape(E, B, -1).sum(-1)
    correct = ((out.argmax(-1) == y) & mask).reshape(E, -1).sum(1)
    return per_seq.double().sum(1), correct, mask.reshape(E, -1).sum(1)


@torch.no_grad()
def evaluate(model, task, data_seeds, split: int, size: int, batch: int,
             chunk: int | None = None) -> tuple[torch.Tensor, ...]:
    """Mean loss and score per member on samples 0..size-1 of ``split``: (E,), (E,).

    The score is the accuracy (classification) or the mean squared error (regression, = loss);
    NaN, as the loss, where the outputs are not finite. Samples are drawn and go through the
    model in batches of ``batch`` (``train.eval_batch_size``), or of ``chunk`` sequences where
    smaller (None: whole batches), the engine's choice where a whole batch would not fit the
    memory (``choose_eval_chunk``; a sample is a function of its index, ``tasks.base``, so the
    chunks hold the batches' samples and no whole batch is ever built). The totals are sums over targets
    (``member_sums``: exact integer counts, float64 loss sums), so the chunk changes no accuracy
    and a float64 model's loss only by float64 rounding; a float32 model's per-target losses
    can move in their last float32 bits with the number of sequences a matrix product sees (as
    with the pack size, README 'What a run id promises'), and an argmax within that rounding
    of a tie with them, nothing more.
    """
    model.eval()
    dtype = _float_dtype(model)
    E = data_seeds.shape[0]
    tot_loss = torch.zeros(E, dtype=torch.float64, device=data_seeds.device)
    tot_correct = torch.zeros_like(tot_loss)
    tot_count = torch.zeros(E, dtype=torch.int64, device=data_seeds.device)
    step = batch if chunk is None else max(1, min(chunk, batch))
    for start in range(0, size, step):  # (a sample is a function of its index alone: chunks
        #                                  drawn on their own hold the batch's sequences)
        idx = torch.arange(start, min(size, start + step), device=data_seeds.device)
        b = task.sample(data_seeds, split, idx.expand(E, -1))
        if start == 0:
            _check_batch(task, task.info, b, idx.expand(E, -1))
        loss, correct, count = member_sums(*supervised_logits(model, *batch_fields(b, dtype)))
        tot_loss += loss
        tot_correct += correct if correct is not None else loss
        tot_count += count
    model.train()
    n = tot_count.clamp(min=1).double()
    # outputs that are not finite (NaN or inf logits: a loss of NaN) predict nothing: argmax over
    # NaN logits read class 0 (or the first NaN), so a model of NaN outputs scored an accuracy
    score = torch.where(torch.isfinite(tot_loss), tot_correct / n, math.nan)
    return tot_loss / n, score


def _check_batch(task: Task, info: TaskInfo, b: Batch, index: torch.Tensor) -> None:
    """A batch keeps the ``Batch`` contract for the task's info (``tasks.base.batch_problem``:
    layout, dtypes, token and class ids, masks, the second input), else a clear error naming
    the task. Checked on the first training batch and each evaluation's first batch; ``index``
    the (E, B) sample indices it was drawn for."""
    why = batch_problem(b, info, *index.shape)
    if why:
        raise ValueError(f"task {task.name}: its batch breaks the contract (tasks.base.Batch): "
                         f"{why}")


def check_pack(runs: list, task: Task, eval_tasks: dict[str, Task]) -> None:
    """Everything about a pack that needs its tasks (built, data loaded) and would otherwise fail
    mid-run or after training: raises ValueError before any training."""
    tc0 = runs[0].train
    err = fixed_split_error(task, task.split_sizes(), tc0.train_size)
    if err:
        raise ValueError(err)
    for r in runs:  # label smoothing is member-level
        why = loss_problem(task, r.train.label_smoothing,
                           r.train.early_stop.metric if r.train.early_stop else None)
        if why:
            raise ValueError(why)
    for name, et in eval_tasks.items():
        why = eval_set_problem(task, et)
        if why:
            raise ValueError(f"train.evals.{name}: {why}")


def pack_mismatch(runs: list) -> str | None:
    """Why ``runs`` cannot train as one pack, naming the first setting (dotted key) that differs
    from the first run's outside what members may vary (the seed, ``MEMBER_FIELDS``, the model's
    init: what ``RunConfig.pack_key`` leaves out), or None. ``train_pack`` reads the task, the
    shared train settings and the backbone of the first run only: a mixed pack given through the
    Python API trained and evaluated every member on the first run's task without a word (the
    engine groups by ``pack_key``; a test's stub model without ``to_backbone`` is compared whole)."""
    from .models import member_key
    from .sweep.config import MEMBER_FIELDS, flatten

    def view(r) -> dict[str, Any]:
        model = member_key(r.model) if hasattr(r.model, "to_backbone") else r.model.model_dump(
            mode="json")
        train = {k: v for k, v in r.train.model_dump(mode="json").items() if k not in MEMBER_FIELDS}
        return flatten({"task": r.task.model_dump(mode="json"), "model": model, "train": train})

    views = per_point(runs, view)
    first = views[0]
    for r, v in zip(runs, views):
        if v is first:
            continue
        for key in sorted(set(first) | set(v)):
            if first.get(key, "(unset)") != v.get(key, "(unset)"):
                name = r.label or r.coords_text()
                label = f" {name}" if name else ""
                return (f"train_pack: run{label} differs from the pack's first run in {key} "
                        f"({v.get(key, '(unset)')!r} vs {first.get(key, '(unset)')!r}): a pack trains "
                        "every member on its first run's task and settings; pack runs of one "
                        "RunConfig.pack_key only (engine.plan groups them)")
    return None


def _eval_size(task: Task, split: str, size: int) -> int:
    """Samples evaluated: ``size``, at most the whole split of a dataset task."""
    sizes = task.split_sizes()
    return min(size, sizes[split]) if sizes else size


ProgressFn = Callable[[int, int, int], None]


def train_pack(
    runs: list,
    device: str = "cpu",
    progress: ProgressFn | None = None,
    heartbeat: Callable[[], None] | None = None,
    analyses: tuple[str, ...] = (),
    keep: dict | None = None,
    micro_batch: int | None = None,
    eval_chunk: int | None = None,
) -> list[dict[str, Any]]:
    """Train the runs of one pack together; returns one result dict per run (same order).

    ``micro_batch``: run each step's batch in chunks of this many sequences (exact gradient
    accumulation, see ``forward_backward``; an execution choice of the planner, not part of a run's
    identity). Refused for models with BatchNorm, whose batch statistics would change.
    ``eval_chunk``: evaluate in forward passes of this many sequences (``evaluate``; the
    planner's ``Pack.eval_chunk``); None: the largest that fits the memory available here
    (``choose_eval_chunk``: the whole evaluation batch wherever it fits). The record names it
    (``eval_chunk``, None: whole batches), as ``micro_batch``.

    Raises before any training when the runs do not share one pack key (``pack_mismatch``:
    ValueError), the task's data is missing (``DataUnavailable``) or the pack does not fit its
    tasks (``check_pack``: ValueError).
    """
    from .analysis import ANALYSES  # local: analysis imports models
    from .models import build_model, count_params

    if not runs:
        raise ValueError("train_pack: no runs to train")
    mixed = pack_mismatch(runs)
    if mixed:
        raise ValueError(mixed)
    t_start, c_start = time.monotonic(), time.process_time()
    E, r0 = len(runs), runs[0]
    tc0 = r0.train
    dtype = torch.float64 if tc0.dtype == "float64" else torch.float32
    dev = torch.device(device)
    task = build_task(r0.task)
    info = task.info
    base_task = r0.task.model_dump()
    eval_tasks = {name: build_task({**base_task, **ov}) for name, ov in tc0.evals.items()}
    check_pack(runs, task, eval_tasks)
    score = "mse" if info.loss == "mse" else "acc"
    n_val = _eval_size(task, "val", tc0.val_size)
    n_test = _eval_size(task, "test", tc0.test_size)
    n_fit = min(tc0.val_size, tc0.train_size or tc0.val_size)  # the fixed training slice
    avail = available_memory(device)  # the parent checks too; this covers Ray workers
    too_big = memory_problem(r0, device, avail) if avail is not None else None
    if too_big:
        raise MemoryError(too_big)
    chunk = eval_chunk if eval_chunk is not None else choose_eval_chunk(
        r0, device, None if avail is None else pack_room(avail), E)
    chunk = chunk if 0 < chunk < eval_batch(r0) else None  # None: whole batches, as before
    model = build_model(r0.model, info, E, [derived_seed(r.seed, _INIT_STREAM) for r in runs],
                        members=[r.model for r in runs])
    model = model.to(device=dev, dtype=dtype)
    if micro_batch is not None and micro_batch < tc0.batch_size and mixes_batch(model):
        raise ValueError("micro-batching would change this model's BatchNorm batch statistics")
    n_params = count_params(model, E)
    params = [p for p in model.parameters() if p.requires_grad]
    data_seeds = torch.tensor([derived_seed(r.seed, _DATA_STREAM) for r in runs], device=dev)
    for et in eval_tasks.values():  # an evaluation set the model cannot read fails now, not at the end
        evaluate(model, et, data_seeds, TEST, 1, 1)
    # a set with no supervised position measured accuracy 0 and loss 0 (0 / 0 read as 0): a result
    # nobody measured; such a pack fails now, before training, with what to change
    require_targets(task, data_seeds, TRAIN, n_fit, tc0.eval_batch_size, "training")
    require_targets(task, data_seeds, VAL, n_val, tc0.eval_batch_size, "validation")
    require_targets(task, data_seeds, TEST, n_test, tc0.eval_batch_size, "test")
    for name, et in eval_tasks.items():
        require_targets(et, data_seeds, TEST, _eval_size(et, "test", min(tc0.val_size,
                                                                         tc0.test_size)),
                        tc0.eval_batch_size, f"{name!r} evaluation")

    vec = lambda xs: torch.tensor(xs, dtype=torch.float64, device=dev)  # noqa: E731
    opt = PackedAdam(
        params,
        vec([r.train.betas[0] for r in runs]),
        vec([r.train.betas[1] for r in runs]),
        vec([r.train.eps for r in runs]),
        vec([r.train.weight_decay for r in runs]),
        decoupled=tc0.optimizer == "adamw",
        lr_scale={
            g: vec([r.train.lr_scale.get(g, 1.0) for r in runs])
            for g in sorted({g for r in runs for g in r.train.lr_scale})
        },
        decay_all=vec([float(r.train.decay_all) for r in runs]),
    )
    totals = [r.train.total_steps for r in runs]
    T = max(totals)
    lrs = LRSchedule(
        [r.train.lr for r in runs], [r.train.schedule for r in runs], totals,
        [r.train.schedule.min_lr for r in runs],
    )
    clip = vec([r.train.grad_clip or math.inf for r in runs])
    smoothing = (vec([r.train.label_smoothing for r in runs])  # None: no smoothing term at all
                 if info.loss != "mse" and any(r.train.label_smoothing for r in runs) else None)
    totals_t = torch.tensor(totals, device=dev)
    # each member's own time limit (a member field: a pack may mix them; the shortest cut every
    # member, and a 6-hour run packed with a 1-minute one stopped at 1 minute as 'time_limit')
    limits = [r.train.time_limit_s if r.train.time_limit_s else math.inf for r in runs]
    time_limit = min(limits) if any(t < math.inf for t in limits) else None

    active = torch.ones(E, dtype=torch.bool, device=dev)
    status = ["ok"] * E
    stop_reason: list[str | None] = [None] * E
    stop_step: list[int | None] = [None] * E
    history: list[list[dict[str, float]]] = [[] for _ in range(E)]
    train_loss = [math.nan] * E
    recent = torch.full((E, AVG_LOSS_WINDOW), math.nan, dtype=torch.float64)  # ring of losses
    es = tc0.early_stop
    B = tc0.batch_size
    spe = tc0.steps_per_epoch
    perm_epoch, perm = -1, None
    last_beat = time.monotonic()

    def stop(e: int, reason: str, step: int) -> None:
        active[e] = False
        stop_reason[e] = reason
        stop_step[e] = step

    def eval_rows(step: int) -> list[dict[str, float]]:
        """One history row per member: validation set, the fixed training slice and the first
        min(val_size, test_size) samples of every named evaluation set (learning curves)."""
        vl, vs = evaluate(model, task, data_seeds, VAL, n_val, tc0.eval_batch_size, chunk)
        fl, fs = evaluate(model, task, data_seeds, TRAIN, n_fit, tc0.eval_batch_size, chunk)
        rows = [{"step": step, "val.loss": float(vl[e]), f"val.{score}": float(vs[e]),
                 "train.loss": float(fl[e]), f"train.{score}": float(fs[e])} for e in range(E)]
        for name, et in eval_tasks.items():
            n = _eval_size(et, "test", min(tc0.val_size, tc0.test_size))
            nl, ns = evaluate(model, et, data_seeds, TEST, n, tc0.eval_batch_size, chunk)
            for e in range(E):
                rows[e][f"{name}.loss"], rows[e][f"{name}.{score}"] = float(nl[e]), float(ns[e])
        return rows

    def met(row: dict[str, float]) -> bool:
        return bool(es) and es.met(row[es.metric])

    def blown(e: int, row: dict[str, float], step: int) -> bool:
        """Member e stops at ``step`` with a model whose loss is not finite (``row``: its
        evaluation at that step): its last update blew it up, and the training step it would
        take next diverges, so it is ``diverged`` at ``step``, as in a longer run; its history
        keeps the row only at a multiple of eval_every, as that run's. Such a member ended
        'ok' at its budget (or time limit) with NaN metrics, and a run of one more step was
        'diverged'."""
        if math.isfinite(row["val.loss"]) and math.isfinite(row["train.loss"]):
            return False
        if step % tc0.eval_every == 0 and (not history[e] or history[e][-1] is not row):
            history[e].append(row)
        status[e] = "diverged"
        stop(e, "diverged", step)
        return True

    def run_eval(step: int) -> None:
        rows = eval_rows(step)
        for e in range(E):
            if active[e]:
                history[e].append(rows[e])
                if met(rows[e]):
                    stop(e, "early_stop", step)

    step = 0
    while True:
        done_now = torch.nonzero(active & (totals_t <= step)).flatten().tolist()
        if done_now:
            rows = eval_rows(step)
            for e in done_now:
                if blown(e, rows[e], step):
                    continue
                history[e].append(rows[e])
                # its last evaluation is an evaluation too: a run meeting its early stop there
                # (at its step budget) said 'max_steps', as if it never had
                stop(e, "early_stop" if met(rows[e]) else "max_steps", step)
        if not bool(active.any()):
            break
        if step % tc0.eval_every == 0:
            run_eval(step)
            if not bool(active.any()):
                break
        if time_limit is not None and time.monotonic() - t_start > time_limit:
            elapsed = time.monotonic() - t_start
            cut = [e for e in torch.nonzero(active).flatten().tolist() if elapsed > limits[e]]
            # the history ends at the stop step, as a member's that ran its budget does (its
            # curve ended at the last multiple of eval_every, before its final model)
            rows = eval_rows(step) if cut and step % tc0.eval_every else None
            for e in cut:
                if blown(e, rows[e] if rows is not None else history[e][-1], step):
                    continue
                if rows is not None:
                    history[e].append(rows[e])
                # meeting its early stop at that evaluation, it is not a run cut short (the
                # report counted it among the runs its time limit cut)
                stop(e, "early_stop" if rows is not None and met(rows[e]) else "time_limit", step)
            if not bool(active.any()):
                break
            time_limit = min(t for e, t in enumerate(limits) if bool(active[e]))
            time_limit = None if math.isinf(time_limit) else time_limit
        # 1. batch: fresh samples per step, or one epoch-permuted view of the fixed training set
        if spe is None:
            idx = (step * B + torch.arange(B, device=dev)).expand(E, -1)
        else:
            epoch, pos = divmod(step, spe)
            if epoch != perm_epoch:
                k = rng.key(data_seeds, _PERM_STREAM, epoch)
                perm, perm_epoch = rng.permutation_keys(k, tc0.train_size), epoch
            idx = perm[:, pos * B : (pos + 1) * B]
        batch = task.sample(data_seeds, TRAIN, idx)
        if step == 0:
            _check_batch(task, info, batch, idx)
        # 2. forward + backward (in micro-batches when planned) of the active members' losses;
        #    members with a non-finite loss or gradient diverge and are frozen
        loss_val = forward_backward(model, batch, dtype, smoothing, active, micro_batch)
        for e in torch.nonzero(active & ~torch.isfinite(loss_val)).flatten().tolist():
            status[e] = "diverged"
            stop(e, "diverged", step)
        # 3. per-member clipping, update of the active members
        gnorm = clip_per_member(params, clip)
        for e in torch.nonzero(active & ~torch.isfinite(gnorm)).flatten().tolist():
            status[e] = "diverged"
            stop(e, "diverged", step)
        opt.step(lrs.at(step).to(dev), active)
        for p in params:
            p.grad = None
        for e in torch.nonzero(active).flatten().tolist():
            train_loss[e] = float(loss_val[e])
            recent[e, step % AVG_LOSS_WINDOW] = float(loss_val[e])
        step += 1
        if progress is not None and (step % 50 == 0 or step == T):
            progress(step, T, int(active.sum()))
        if heartbeat is not None and time.monotonic() - last_beat > 30:
            heartbeat()
            last_beat = time.monotonic()

    # final metrics: stopped members are frozen, so evaluating now = evaluating at their stop step
    eb = tc0.eval_batch_size
    vl, vs = evaluate(model, task, data_seeds, VAL, n_val, eb, chunk)
    tl, ts = evaluate(model, task, data_seeds, TEST, n_test, eb, chunk)
    _, fs = evaluate(model, task, data_seeds, TRAIN, n_fit, eb, chunk)
    named = {name: evaluate(model, et, data_seeds, TEST, _eval_size(et, "test", tc0.test_size), eb,
                          chunk)
             for name, et in eval_tasks.items()}
    model.eval()  # probes read the trained model as evaluation does: in train mode BatchNorm
    #               used the probe batch's statistics and overwrote the running ones (saved weights)
    extra = {name: ANALYSES[name](model, task, data_seeds, chunk) for name in analyses}
    model.train()
    data = task.data_info()
    eval_data = {n: d for n, et in eval_tasks.items() if (d := et.data_info()) is not None}
    if eval_data:
        data = {**(data or {}), "evals": eval_data}
    wall, cpu = time.monotonic() - t_start, time.process_time() - c_start
    if keep is not None:  # tests and probes can inspect the trained pack
        keep["model"] = model
    best = max if score == "acc" else min
    out = []
    for e in range(E):
        ok = status[e] == "ok"
        val = lambda t, e=e, ok=ok: float(t[e]) if ok else math.nan  # noqa: E731
        scores = [v for v in [h[f"val.{score}"] for h in history[e]]
                  + ([float(vs[e])] if ok else []) if math.isfinite(v)]  # max() kept a NaN first
        metrics = {
            "val.loss": val(vl),
            f"val.{score}": val(vs),
            f"val.best_{score}": best(scores) if scores else math.nan,
            "test.loss": val(tl),
            f"test.{score}": val(ts),
            "train.loss": train_loss[e],
            "train.avg_loss": float(recent[e].nanmean()) if ok else math.nan,
            f"train.{score}": val(fs),
        }
        metrics["val.max_rise"] = max_rise([h["val.loss"] for h in history[e]] + [val(vl)])
        for name, (nl, ns) in named.items():
            metrics[f"{name}.loss"] = val(nl)
            metrics[f"{name}.{score}"] = val(ns)
        s = stop_step[e] if stop_step[e] is not None else step
        out.append(
            {
                "status": status[e],
                "stop_reason": stop_reason[e] or "max_steps",
                "stop_step": s,
                "epochs": (s / spe) if spe else None,
                "metrics": metrics,
                "history": history[e],
                "n_params": n_params,
                "pack_size": E,
                # the chunks each step's batch ran in (None: whole), like the pack an execution
                # choice that moves the last bits of a float32 run's numbers (README)
                "micro_batch": micro_batch if micro_batch is not None
                and micro_batch < tc0.batch_size else None,
                # the sequences each evaluation pass held where fewer than a batch (None: whole
                # batches): the engine's choice for the memory, moving float32 bits at most
                "eval_chunk": chunk,
                "pack_wall_s": wall,
                "pack_cpu_s": cpu,  # this process's CPU time for the pack (all its threads)
                "data": data,
                "analysis": {k: v[e] for k, v in extra.items()},
            }
        )
    return out


def member_state(model, e: int) -> dict[str, torch.Tensor]:
    """Member e's slice of a pack's state dict, loadable into the same model built with E = 1:
    every tensor with a leading ensemble dim E keeps it as size 1; shared buffers are copied."""
    E = _pack_size(model)
    return {k: (v[e : e + 1] if v.dim() and v.shape[0] == E else v).detach().clone().cpu()
            for k, v in model.state_dict().items()}


def _pack_size(model) -> int:
    return next(p for p in model.parameters()).shape[0]


def build_member(run, state: dict[str, torch.Tensor] | None = None):
    """The model of one run (E = 1) as ``train_pack`` builds it, in eval mode; with ``state``
    (``member_state`` of its trained pack) its trained weights. Analyses of saved runs use it."""
    from .models import build_model

    task = build_task(run.task)
    model = build_model(run.model, task.info, 1, [derived_seed(run.seed, _INIT_STREAM)])
    # in the run's dtype, as train_pack trains it: a float64 run's saved weights were copied
    # into float32 parameters without a word, and its plot-time analyses ran in float32
    model = model.to(dtype=torch.float64 if run.train.dtype == "float64" else torch.float32)
    if state is not None:
        try:
            model.load_state_dict(state)
        except RuntimeError as err:  # missing, unexpected or misshapen parameters
            from .store import WeightsDoNotFit

            why = " ".join(str(err).split())
            raise WeightsDoNotFit("the weights do not fit the run's model ("
                                  + (why if len(why) <= 160 else why[:157] + "...") + ")"
                                  ) from None
    return model.eval()


def mixes_batch(model) -> bool:
    """Whether the model's training forward mixes sequences (BatchNorm): no micro-batching."""
    from .models.layers import PackedBatchNorm

    return any(isinstance(m, PackedBatchNorm) for m in model.modules())


def mixes_batch_config(run) -> bool:
    """``mixes_batch`` of the run's model, from a parameter-free build (meta device)."""
    from .models import build_model

    info = build_task(run.task).info  # tasks build real tables (on the CPU), models need none
    with torch.device("meta"):
        model = build_model(run.model, info, 1)
    return mixes_batch(model)


def packed_step(task, model, data_seeds: torch.Tensor, batch: int, lr: float = 1e-3,
                micro_batch: int | None = None):
    """A callable ``step(i)``: one training step of the pack on fresh batch i (sample, forward,
    backward in micro-batches of ``micro_batch``, per-member clipping, PackedAdam), as
    ``train_pack`` runs it. Used to time packs (planner, dry-run estimate, bench). A dataset
    task's rows wrap around its training split."""
    params = [p for p in model.parameters() if p.requires_grad]
    E, dev = data_seeds.shape[0], data_seeds.device
    dtype = _float_dtype(model)
    one = torch.ones(E, dtype=torch.float64, device=dev)
    opt = PackedAdam(params, 0.9 * one, 0.999 * one, 1e-8 * one, 0.01 * one, decoupled=True)
    active = torch.ones(E, dtype=torch.bool, device=dev)
    idx = torch.arange(batch, device=dev).expand(E, -1)
    sizes = task.split_sizes()

    def step(i: int) -> None:
        rows = idx + i * batch
        b = task.sample(data_seeds, TRAIN, rows % sizes["train"] if sizes else rows)
        forward_backward(model, b, dtype, None, active, micro_batch)
        clip_per_member(params, one)
        opt.step(lr * one, active)
        for p in params:
            p.grad = None

    return step


def time_steps(runs: list, device: str = "cpu", n_steps: int = 3,
               micro_batch: int | None = None) -> float:
    """Seconds per training step of this pack (after one warm-up step); nothing is recorded.

    On a CPU with one intra-op thread the step is timed in process CPU time, the median of the
    steps: on a shared machine other processes' load stretches wall time by any factor (a
    planner calibrating beside a running sweep measured one model at a time 4x slower than
    the pack it was compared with), while the CPU time a step needs stays what it is. With
    several threads (their CPU times add up) or on a GPU, wall time."""
    from .models import build_model
    from .models.init import initialise

    E, r0 = len(runs), runs[0]
    dtype = torch.float64 if r0.train.dtype == "float64" else torch.float32
    dev = torch.device(device)
    task = build_task(r0.task)
    # the default init of every member: an init scheme changes no shape and no step's cost, and
    # one that a member's model does not fit (a `designed` or cooper construction elsewhere)
    # fails that run alone where it trains (``MemberError``); building the members' own inits
    # here raised it out of the planner, a traceback from `run` and `run --dry-run`
    model = build_model(r0.model, task.info, E)
    initialise(model, [derived_seed(r.seed, _INIT_STREAM) for r in runs])
    model = model.to(device=dev, dtype=dtype)
    seeds = torch.tensor([derived_seed(r.seed, _DATA_STREAM) for r in runs], device=dev)
    step = packed_step(task, model, seeds, r0.train.batch_size, micro_batch=micro_batch)
    step(0)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    clock = time.process_time if dev.type == "cpu" and torch.get_num_threads() == 1 \
        else time.perf_counter
    times = []
    for i in range(1, n_steps + 1):
        t0 = clock()
        step(i)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        times.append(clock() - t0)
    return statistics.median(times)
