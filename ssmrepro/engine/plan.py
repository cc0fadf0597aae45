"""Stage 3 (engine): group runs into packs.

Runs with equal pack keys (identical shapes) train as one stacked model. How many per pack (E) and
in which micro-batches (m) comes from the measured cost model (``engine.costs``) when the engine
calibrates, else from the memory estimate (E as large as memory allows, whole batches)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..sweep import RunConfig, per_point
from ..train import (  # noqa: F401  (the memory estimate lives with training; re-exported)
    UNBOUNDED,
    MemoryNeed,
    _gb,
    available_memory,
    choose_eval_chunk,
    eval_batch,
    largest_pack,
    member_bytes,
    memory_need,
    memory_problem,
    memory_problems,
    pack_need,
    pack_room,
)
from .costs import Choice, CostModel


@dataclass
class Pack:
    key: str
    runs: list
    micro_batch: int | None = None  # sequences per chunk of a step's batch (None: whole batch)
    step_s: float | None = None  # measured seconds per step at this (E, m), when calibrated
    eval_chunk: int | None = None  # sequences per evaluation pass (``train.choose_eval_chunk``;
    #                                None: not planned, the worker chooses)
    eval_room: int | None = None  # the bytes the chunk was chosen to fit (``pack_room``)
    shares: int = 1  # CPU workers whose packs share that half (``plan``: eval_room is 1/shares)

    def __len__(self) -> int:
        return len(self.runs)


def _budget(device: str) -> int:
    """A pack's memory budget: half the free memory of the GPU (the least free of the visible
    GPUs for plain 'cuda', ``available_memory``), 2 GiB on CPU."""
    if device.startswith("cuda"):
        free = available_memory(device)
        if free is None:
            raise RuntimeError(f"{device}: cannot read the GPU's free memory")
        return free // 2
    return 2 << 30


def auto_pack_size(runs: list, device: str, budget_bytes: int | None = None,
                   workers: int = 1, available: int | None = None) -> int:
    """Largest pack of these (same-shape) runs whose training activations fit the budget (CPU:
    2 GiB, GPU: half its free memory) and whose whole estimate (``train.pack_need``: the
    members' parameters with their gradients and Adam moments, and the larger of a training
    step's activations and an evaluation batch: a pack evaluates its members together; the work
    buffers the pack's scans share, once) fits the memory a pack may take (``train.largest_pack``;
    GPU: that budget; CPU: half the memory available now); at most 128 on CPU (the KEEP n-TH d = 8
    benchmark's best pack; packs of 32 left ×0.9 of its run-steps/s unused), 256 on GPU; 1 when
    the task's data is absent here (the size needs the sequence length, which a dataset knows
    once loaded) or the model is refused (its own check says why). Sized by the training
    activations alone, 41 runs of a 1 GB evaluation batch (51 MB of activations) made one pack
    that allocated 22 GB in its first evaluation. ``workers``: CPU workers that share the memory,
    each training one such pack at a time: the half is theirs together, a pack's share of it
    1/``workers`` (sized to the whole half, 2 workers' packs did not fit it together, and `run`
    fell back to one worker, ``workers_in_memory``). ``available``: the memory on CPU (default:
    measured now; ``plan``'s, which the Ray engine gives as its largest node's: the packs were
    sized by the memory of the machine that planned them, their evaluation chunks by the node's).
    """
    if not runs:
        return 1
    from ..tasks import DataUnavailable

    budget = budget_bytes if budget_bytes is not None else _budget(device)
    cap = 256 if device.startswith("cuda") else 128
    if device.startswith("cuda"):
        room = budget
    else:
        avail = available_memory(device) if available is None else available
        room = UNBOUNDED if avail is None else pack_room(avail) // max(1, workers)
    try:
        return largest_pack(runs[0], device, room, cap, budget)
    except DataUnavailable:  # a dataset not present here (a dry run of a paper profile): the
        return 1  # real run loads the data and sizes its packs then
    except ValueError:  # a model its blocks refuse: memory_problem reports it
        return 1


def pack_memory(p: Pack) -> int:
    """Bytes a pack needs while it trains (``train.pack_need``: its members' estimates, its
    evaluation at the pack's ``eval_chunk``, and the work buffers they share); 0 where there is
    no estimate (no backbone, data absent here)."""
    from ..tasks import DataUnavailable

    if not p.runs or not hasattr(p.runs[0].model, "to_backbone"):
        return 0
    try:
        return pack_need(p.runs[0], len(p), eval_chunk=p.eval_chunk)
    except DataUnavailable:
        return 0


def pack_size_problems(runs: list, pack_size: int | None, device: str,
                       available: int | None = None) -> list[str]:
    """'--pack-size N: ...' for each shape of ``runs`` one of whose runs fits ``available`` bytes
    (default: measured now on ``device``) but whose pack of min(N, its runs) does not
    (``train.pack_need``, as ``pack_memory`` counts a pack). A
    given pack size is not capped by memory (``plan``) and only one run was checked: a pack of 4
    runs of 8.4 GB was built on a 24 GB machine, where the kernel's OOM killer ended the command
    without a word. None given, or the memory unknown: no problem."""
    from ..tasks import DataUnavailable

    if pack_size is None or pack_size <= 1:
        return []
    groups = by_shape(runs)
    avail = available_memory(device) if available is None and groups else available
    if avail is None:
        return []
    out = []
    for rs in groups.values():
        E = min(pack_size, len(rs))
        if E <= 1 or not hasattr(rs[0].model, "to_backbone"):
            continue
        try:  # (the pack evaluates in chunks of what fits it: ``choose_eval_chunk``)
            one, whole = (pack_need(rs[0], n, device, eval_chunk=1) for n in (1, E))
        except (DataUnavailable, ValueError):  # no data here, or a model its blocks refuse
            continue  # (``memory_problems`` reports the latter)
        if one > avail or whole <= avail:  # one run too large: ``memory_problems``' case
            continue
        which = rs[0].label or rs[0].coords_text()
        n = rs[0].train.train_size  # (each member's order of it: ``train.memory_need``; the
        #                             line named only the model's parts, 5.6 GB a run of a tiny
        #                             model at 10**8 samples read as the model's)
        order = (f", and the order of its fixed training set of {n:,} samples, drawn anew each "
                 "epoch (train.train_size)" if n else "")
        k = largest_pack(rs[0], device, avail, E - 1, eval_chunk=1)
        more = (whole - one) // (E - 1)  # each member past the first (an average of a whole
        #                                  estimate read as if the k runs held k of it)
        each, shared = ((f"about {_gb(one)} each", "") if more == one else
                        (f"about {_gb(one)} for one run, {_gb(more)} for each further one",
                         "; the runs' fused scans share one set of work buffers"))
        out.append(f"--pack-size {pack_size}: a pack of {E} runs{f' ({which})' if which else ''} "
                   f"needs about "
                   f"{_gb(whole)} of memory on {device} ({each}: parameters "
                   f"with their gradients and Adam moments, and a training step's or evaluation "
                   f"pass's activations, evaluating one sequence at a time{order}{shared}); only "
                   f"{_gb(avail)} "
                   f"is available, which holds {k} such "
                   f"run{'s' if k > 1 else ''} at once: give --pack-size {k} or less, or leave it "
                   "out (packs are then sized by the memory)")
    return out


def workers_in_memory(packs: list[Pack], workers: int, available: int | None) -> int:
    """How many of ``workers`` (CPU: one memory) can train at once when each holds one of the
    largest packs: their packs together within the half of ``available`` bytes that one pack
    may take (``pack_room``; the other half is the estimate's headroom, whatever the workers).
    At least 1 (a single pack too large was refused before planning). Checked against all of
    ``available``, two workers' packs, each sized to the half, together filled all of it."""
    if available is None or workers <= 1:
        return workers
    room = pack_room(available)
    needs = sorted((pack_memory(p) for p in packs), reverse=True)[:workers]
    n, used = 0, 0
    for need in needs:
        if used + need > room:
            break
        used, n = used + need, n + 1
    return max(1, n if n < len(needs) else workers)


def by_shape(runs: list) -> dict[str, list]:
    """Runs grouped by pack key (identical shapes), keys in first-appearance order."""
    groups: dict[str, list] = {}
    for r, key in zip(runs, per_point(runs, RunConfig.pack_key)):
        groups.setdefault(key, []).append(r)
    return groups


def plan(runs: list, pack_size: int | None = None, device: str = "cpu",
         costs: CostModel | None = None, budget_bytes: int | None = None,
         available: int | None = None, workers: int = 1) -> list[Pack]:
    """Packs in first-appearance order of their key. Each group of same-shape runs is cut into
    packs of ``pack_size`` runs or of the size the cost model (``costs``; else the memory
    estimate) chooses, with the chosen micro-batch. ``budget_bytes``: the memory budget (default:
    this machine's, see ``auto_pack_size``; the Ray engine passes the budget measured on a worker
    that owns the device). Each pack evaluates in chunks of ``train.choose_eval_chunk`` sequences
    for its size: the whole evaluation batch wherever the pack fits ``pack_room`` (half) of
    ``available`` bytes (default: measured now on ``device``; the Ray engine passes what one
    worker has); where that is unknown, None: ``train_pack`` chooses with the memory of the
    machine it runs on. ``workers``: CPU workers that train packs at once in one memory (the
    local engine's): packs and their evaluation chunks are sized to 1/``workers`` of that half
    (``auto_pack_size``), for as many workers as then train at once (fewer packs than
    workers, or packs that do not fit together, ``workers_in_memory``: planned again for fewer);
    CUDA workers take a GPU each."""
    from ..tasks import DataUnavailable

    groups = by_shape(runs)
    avail = available if available is not None or not groups else available_memory(device)
    share = 1 if device.startswith("cuda") else max(1, workers)
    room = None if avail is None else pack_room(avail) // share
    mark = (len(costs.log), costs.uncalibrated) if costs is not None else (0, 0)
    packs = []
    for key, rs in groups.items():
        try:  # once per shape: the evaluation chunk of a pack of 1 reads it
            need = memory_need(rs[0], device) if hasattr(rs[0].model, "to_backbone") else None
        except (DataUnavailable, ValueError):  # (each reader says or handles it on its own)
            need = None
        cap = auto_pack_size(rs, device, budget_bytes, share, avail)
        if costs is not None:
            c = costs.choose(rs, cap, pack_size)
        else:
            c = Choice(pack_size or cap, None, None, "given" if pack_size else "memory estimate")
        chunks: dict[int, int] = {}  # pack size -> its evaluation chunk (one shape: at most 2)
        for i in range(0, len(rs), c.size):
            chunk = rs[i : i + c.size]
            if len(chunk) not in chunks:  # memory unknown here (a Ray head without the GPUs
                #                               its workers have): the worker chooses (None)
                chunks[len(chunk)] = (None if room is None else
                                      choose_eval_chunk(chunk[0], device, room, len(chunk),
                                                        need if len(chunk) == 1 else None))
            packs.append(Pack(key, chunk, c.micro_batch, c.step_s if len(chunk) == c.size else None,
                              chunks[len(chunk)], room, share))
    # as many shares as packs that fit together: runs too large for a share (packs of 1 that
    # exceed it) or fewer packs than workers leave fewer workers at once, each a larger share
    n = max(1, min(share, len(packs)))
    fit = n if room is None or n < 2 else workers_in_memory(packs, n, avail)
    if fit < share:
        if costs is not None:  # (said and counted again by the plan that is kept: each shape
            #                       past a dry run's deadline was counted once a plan, 2 shapes
            #                       not calibrated of 1)
            del costs.log[mark[0]:]
            costs.uncalibrated = mark[1]
        return plan(runs, pack_size, device, costs, budget_bytes, avail, fit)
    return packs


def eval_chunk_lines(packs: list[Pack], device: str) -> list[str]:
    """One line per shape whose packs evaluate in chunks smaller than their evaluation batch
    (``Pack.eval_chunk``, chosen by ``plan``): what `run --dry-run` and `run` print. A pack
    that exceeds its half (``Pack.eval_room``) even in chunks of 1 (a run that fits all of the
    memory, not half: ``memory_problem`` refuses only the former) is said to: its line read as
    if chunks of 1 fitted the half, which they do not; so is one that evaluates whole batches
    because its training step is its peak (``choose_eval_chunk``: chunks would save nothing)."""
    out: dict[str, str] = {}
    checked: set[tuple] = set()  # (key, pack size, chunk): a shape's packs are of 1 or 2 sizes
    for p in packs:
        r0 = p.runs[0]
        eb = eval_batch(r0)
        if p.eval_chunk is None or p.key in out or (p.key, len(p), p.eval_chunk) in checked:
            continue
        checked.add((p.key, len(p), p.eval_chunk))
        m = p.eval_chunk
        need = pack_need(r0, len(p), device, m)
        # a given --pack-size is refused only where it does not fit all of the memory at
        # chunks of 1 (``pack_size_problems``): in between, not even chunks of 1 fit the half
        # (the line said the pack then fitted)
        fits = p.eval_room is None or need <= p.eval_room
        if m >= eb and fits:
            continue
        label = f" {r0.label}" if r0.label else ""
        where = r0.coords_text()
        whole = _gb(pack_need(r0, len(p), device))
        half = ("the half of the memory available that a pack may take" if p.shares <= 1 else
                f"its share of the half of the memory available that packs may take (one of "
                f"{p.shares} workers training at once)")
        how = ("whole (chunks would need no less: its training step is the larger)" if m >= eb
               else f"in chunks of {m} sequence{'s' if m > 1 else ''}")
        out[p.key] = (f"run{label}{f' ({where})' if where else ''}: evaluates its batches of "
                      f"{eb} (train.eval_batch_size) {how}"
                      f": a pack of {len(p)} then needs about {_gb(need)} on {device}"
                      + (f"; whole batches, {whole}, do not fit {half}" if fits else
                         f", more than {half} ({_gb(p.eval_room)}"
                         + ("" if m >= eb else f"; whole batches: {whole}")
                         + "): it runs, as all of the memory holds it, with less room for the "
                         "estimate's error"
                         + (" (a smaller --pack-size fits better)" if len(p) > 1 else "")))
    return list(out.values())


def estimate_seconds(packs: list[Pack], device: str, samples: int = 3,
                     costs: CostModel | None = None) -> tuple[float, str]:
    """Wall-clock estimate for ``packs`` (one worker): measured step times, scaled by steps.

    A calibrated shape (``Pack.step_s``: the cost model timed its chosen pack) prices every pack
    of that shape at that step time, the last, smaller pack of a shape included (at most the
    full pack's cost: an upper bound). Shapes the cost model did not time are modelled as
    proportional to E × member_bytes (activation volume), with the constant measured on up to
    ``samples`` of their packs (smallest, largest, median). Evaluation counts as ``eval_steps``
    more steps per pack (``TrainConfig.eval_samples`` forward passes at a third of a training
    step's cost per sample). Untimed packs are timed as ``costs`` times (its thread count, the
    workers' process settings: ``CostModel.step_seconds``, cached) when given, else in this
    process as it is: with this process's default threads on a loaded machine a step can take
    15x the CPU time a one-thread worker needs (koren2026-fig7's quick estimate read 2.3 h for
    ~25 minutes of work). Returns (seconds, one-line method description).
    """
    from ..train import time_steps

    if not packs:
        return 0.0, "nothing to train"
    timed = {p.key: p.step_s for p in packs if p.step_s is not None}
    priced = [(timed[p.key], p) for p in packs if p.key in timed]
    rest = [p for p in packs if p.key not in timed]
    how = ("the cost model's measured step times (a shape's last, smaller pack at its full pack's)"
           if timed else "")
    if rest:
        cost = [len(p) * max(member_bytes(r) for r in p.runs) for p in rest]
        order = sorted(range(len(rest)), key=lambda i: cost[i])
        picks = list(dict.fromkeys((order[0], order[len(order) // 2], order[-1])))[:samples]
        timer = ((lambda p: costs.step_seconds(p.runs, p.micro_batch)) if costs is not None
                 else (lambda p: time_steps(p.runs, device, micro_batch=p.micro_batch)))
        # cheapest first; past the cost model's deadline (a dry run's measuring time) only the
        # cheapest: the three packs timed after the dry run's 60 s of calibration (the largest
        # last) took koren2026-fig7's paper dry run to 101 s, and any pack size's step can be long
        deadline = costs.deadline if costs is not None else None
        rates: list[float] = []
        for i in picks:
            if rates and deadline is not None and time.perf_counter() > deadline:
                break
            rates.append(timer(rest[i]) / cost[i])
        rate = sorted(rates)[len(rates) // 2]
        priced += [(c * rate, p) for c, p in zip(cost, rest)]
        how = "; ".join(x for x in (how, (
            f"{len(rest)} packs of untimed shapes: measured {len(rates)} "
            f"pack{'s' if len(rates) > 1 else ''} "
            f"({', '.join(f'{r * 1e9:.2f}' for r in rates)} s per GB-step), scaled by pack size "
            "× activation volume")) if x)
    # the epoch orders' draws are part of the training a time limit cuts (``pack_seconds``)
    rate, said = order_rates(device, [p.runs[0].train.train_size for p in packs
                                      if order_work(p)])
    total = sum(pack_seconds(s, p, rate(p)) for s, p in priced)
    capped = sum(pack_seconds(s, p, rate(p)) < s * pack_steps(p) + rate(p) * order_work(p)
                 for s, p in priced)
    if capped:
        how += (f"; {capped} pack{'s' if capped > 1 else ''} at most their train.time_limit_s "
                "and evaluation")
    if said:
        how += (f"; the epoch orders of fixed training sets (train.train_size) priced at "
                f"{said}, measured")
    return total, how + "; evaluation as forward passes"


def eval_steps(train, scale: dict[str, float] | None = None) -> int:
    """Training steps that cost about what one run's evaluation costs: its evaluation samples
    (``TrainConfig.eval_work``: a named set weighted by its length over the run's, ``scale``)
    at a third of a training sample each."""
    return -(-int(train.eval_work(scale)) // (3 * train.batch_size))


def run_eval_scale(run: RunConfig) -> dict[str, float]:
    """``sweep.eval_scale`` of the run's task and its named evaluation sets (a set at 50,000x
    the training length counted as one training-length sample: the estimate said seconds for a
    run that evaluated for hours)."""
    if not run.train.evals:
        return {}
    from ..sweep.expand import eval_scale
    from ..tasks import DataUnavailable, build_task

    base = run.task.model_dump()
    try:
        return eval_scale(build_task(run.task),
                          {n: build_task({**base, **ov}) for n, ov in run.train.evals.items()})
    except DataUnavailable:  # no data here to size the sets: unweighted, as before
        return {}


def pack_seconds(step_s: float, p: Pack, order_s: float = 0.0) -> float:
    """Seconds a pack trains at ``step_s`` per step: its ``pack_steps`` and the epoch orders
    its members draw (``order_work`` at ``order_s`` seconds a sample, ``order_rate``), but at
    most its members' longest ``train.time_limit_s`` (training stops there, each member at its
    own; an order is drawn within the training time the limit counts) plus the one epoch's
    draw begun before it and its evaluation, where every member has a limit (huang2025-tab1's
    paper profile, 6 h a run: the estimate read 89 h for 10 packs that stop within 60 h and
    their evaluations; a 5 s limit on 800 epochs of 100,000 samples read 4 min of orders for
    packs that stopped within 5 s)."""
    s = step_s * pack_steps(p) + order_s * order_work(p)
    limits = [r.train.time_limit_s for r in p.runs]
    if all(limits):
        ev = max(eval_steps(r.train, run_eval_scale(r)) for r in p.runs)
        epoch = sum(r.train.train_size or 0 for r in p.runs)  # (every member's order at once)
        s = min(s, max(limits) + order_s * epoch + step_s * ev)
    return s


ORDER_PROBE = 1 << 18  # samples of the epoch order ``order_rate`` draws and times


def order_work(p: Pack) -> int:
    """Samples of the epoch orders a pack's members draw: each member with a fixed training
    set of n samples (``train.train_size``) draws one order of it for each epoch it starts
    (``rng.permutation_keys``: n hashed draws and their argsort, whatever the steps it then
    reads). Not priced, 10**8 samples beside a tiny model read 0.2 s in `run --dry-run` for a
    run whose order took about 70 s to draw."""
    return sum(-(-r.train.total_steps // r.train.steps_per_epoch) * r.train.train_size
               for r in p.runs if r.train.train_size)


ORDER_LARGE = 1 << 22  # the largest order ``order_rates`` times (beyond the caches: about
#                        3x the seconds a sample of ORDER_PROBE's on a CPU; flat past it)


def order_rate(device: str, n: int = ORDER_PROBE) -> float:
    """Seconds per sample of an epoch order of ``n`` samples drawn on ``device``
    (``order_work``): the faster of two draws of one member's order, timed here (one draw past
    ``ORDER_PROBE``: 3.5 s at ``ORDER_LARGE`` on one thread of a loaded CPU)."""
    import torch

    from ..tasks import rng

    dev = torch.device(device)
    k = rng.key(torch.zeros(1, dtype=torch.int64, device=dev), 0)
    best = math.inf
    for _ in range(2 if n <= ORDER_PROBE else 1):
        t0 = time.perf_counter()
        rng.permutation_keys(k, n)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        best = min(best, time.perf_counter() - t0)
    return best / n


def order_rates(device: str, sizes: list) -> tuple[Callable[[Pack], float], str]:
    """(seconds per sample of a pack's epoch orders, as a function of the pack (its training
    set's size), the rates as the estimate says them; '' where no size is given): the rate
    measured at ``ORDER_PROBE`` samples and, where a set is larger, at the largest set's size
    up to ``ORDER_LARGE``; a size between the two at the rate interpolated in log(size). The
    hashed draws and their sort are bound by memory once past the caches: a rate timed at
    ORDER_PROBE alone and scaled linearly priced 10**8 samples at about 2.5x too few seconds."""
    sizes = [n for n in sizes if n]
    if not sizes:
        return (lambda p: 0.0), ""
    small = order_rate(device)
    top = min(max(sizes), ORDER_LARGE)
    if top <= ORDER_PROBE:
        return (lambda p: small), f"{small * 1e6:.2f} s per million samples drawn"
    large = max(small, order_rate(device, top))  # (a per-sample rate that falls: noise)

    def rate(p: Pack) -> float:
        n = min(max(p.runs[0].train.train_size or 0, ORDER_PROBE), top)
        share = math.log(n / ORDER_PROBE) / math.log(top / ORDER_PROBE)
        return small + share * (large - small)

    return rate, (f"{small * 1e6:.2f} s per million samples drawn (sets of {ORDER_PROBE:,}) to "
                  f"{large * 1e6:.2f} (sets of {top:,}{' or more' if top == ORDER_LARGE else ''})")


def pack_steps(p: Pack) -> int:
    """Step-equivalents of a pack: its longest run's steps plus its evaluation."""
    return max(r.train.total_steps + eval_steps(r.train, run_eval_scale(r)) for r in p.runs)


class PeakRSS:
    """Context manager: ``bytes`` = how far this process's resident memory rose above its level
    at entry, sampled every 5 ms by a thread (0 where /proc is not readable)."""

    def __enter__(self) -> PeakRSS:
        import threading

        self.bytes, self._stop = 0, threading.Event()
        self._base = self._rss()
        if self._base:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    @staticmethod
    def _rss() -> int:
        import os

        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.bytes = max(self.bytes, self._rss() - self._base)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._base:
            self._thread.join()
            self.bytes = max(self.bytes, self._rss() - self._base)


def large_for_timing(run, available: int) -> bool:
    """A run whose timed training step (parameters and a training batch's activations by the
    estimate; a timing step evaluates nothing, so the evaluation batch does not count) exceeds
    ``LARGE_SHARE`` of ``available``: a dry run times it small and extrapolates
    (``extrapolate``) rather than timing it at its batch (the estimate is rough: yu2025-tab2's
    ListOps S4D at batch 32, estimated at ~9 GB, grew past 18 GB in calibration). Counting the
    evaluation batch sent a run that fits (an evaluation batch of 16 GB, a 1.6 GB training step)
    to extrapolation, which found no training batch beside that evaluation batch and left the
    run out of the estimate as if the memory had shrunk."""
    need = memory_need(run)
    return need.param_bytes + need.train_bytes > LARGE_SHARE * available


LARGE_SHARE = 0.25  # of the available memory, above which a dry run times a run small
TIMING_SHARE = 0.5  # of the available memory, what an extrapolation's timing step may use
MAX_TIMED_BATCH = 4  # the largest batch an extrapolation times (its cost grows with the batch)


def fitting_batch(run, available: int) -> int:
    """Largest training batch below ``run``'s whose training step fits in ``available`` bytes by
    the memory estimate (``memory_need``: activations scale with the batch; the parameters do
    not; the evaluation batch is no part of a timed step, ``train.time_steps``); 0 when none does
    (the parameters alone exceed it, or one sequence does)."""
    need = memory_need(run)
    room = available - need.param_bytes - need.fixed_bytes
    per_seq = max(1, -(-(need.train_bytes - need.fixed_bytes) // run.train.batch_size))
    if room <= 0:
        return 0
    return max(0, min(run.train.batch_size - 1, room // per_seq))


@dataclass
class Oversized:
    """A shape whose training step does not fit this machine's memory at its batch size: its
    step time extrapolated from two smaller batches that do (``extrapolate``). Only a dry run
    prices such runs; training them here is refused (``check_memory``)."""

    key: str
    label: str
    batch: int  # the run's batch size
    need: int  # bytes the run needs at that batch
    available: int  # bytes available here
    batches: tuple[int, ...]  # the batches timed (one or two)
    seconds: tuple[float, ...]  # their measured step times
    step_s: float  # the extrapolated step time at ``batch``
    how: str  # 'affine' (a + c*b through both points) or 'proportional' (one point, or c <= 0)

    def line(self) -> str:
        label = f" {self.label}" if self.label else ""
        timed = ", ".join(f"{s:.3g} s at batch {b}" for b, s in zip(self.batches, self.seconds))
        fate = ("within what is available, but over the share a dry run's timing may use; timed "
                "small" if self.need <= self.available else "training here refuses")
        return (f"run{label} needs about {_gb(self.need)} at batch {self.batch} ({_gb(self.available)}"
                f" available here; {fate}): step time {self.step_s:.3g} s "
                f"extrapolated to batch {self.batch} ({self.how}) from {timed}")


def extrapolate(runs: list, device: str, available: int, n_steps: int = 1,
                threads: int = 1) -> Oversized | None:
    """Step time of ``runs``' shape at its batch size B when that batch does not fit in
    ``available`` bytes: time one model at the largest batch b that fits in ``TIMING_SHARE`` of
    it (at most ``MAX_TIMED_BATCH``) and at b // 2 (``train.time_steps``), fit t(b) = a + c*b
    through the two points and read it at B (where the memory measured at b // 2 says b does
    not fit after all, the points are b // 2 and b // 4). With one point (b = 1), or where noise
    gives c <= 0, t(B) = t(b) * B / b. None when no batch fits (``fitting_batch``). A model of what
    the step would cost with the memory it needs (compute grows with the batch; memory traffic
    beyond this machine's is not measured).
    Timed as the cost model times (``threads`` intra-op threads, the workers' process settings)."""
    import torch

    from ..train import time_steps
    from ..util import flush_denormals, release_memory, tune_malloc

    r = runs[0]
    B = r.train.batch_size
    need = memory_need(r, device)
    hi = min(MAX_TIMED_BATCH, fitting_batch(r, int(available * TIMING_SHARE)))
    if hi < 1:
        return None
    lo = hi // 2 if hi >= 2 else hi

    def at(b: int) -> float:
        return time_steps([dataclasses.replace(r, train=r.train.model_copy(
            update={"batch_size": b}))], device, n_steps)

    tune_malloc()
    flush_denormals()
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with PeakRSS() as peak:  # the smaller batch first, its memory measured (on CPU)
            first = at(lo)
        guess = need.param_bytes + need.fixed_bytes + lo * (
            (need.train_bytes - need.fixed_bytes) // B)  # what the estimate says lo takes
        if hi > lo and peak.bytes > guess:  # the estimate is rough: where the measured memory
            #                                 of lo exceeds it, scale hi by the measurement
            hi = max(lo, min(hi, int(lo * available * TIMING_SHARE / peak.bytes)))
        if hi > lo:
            batches, seconds = (lo, hi), (first, at(hi))
        elif lo >= 2:  # no room above lo after all: the second point below it, so a step with a
            #            large fixed cost (S4D's kernels) is still read off a line, not scaled
            batches, seconds = (lo // 2, lo), (at(lo // 2), first)
        else:
            batches, seconds = (lo,), (first,)
    finally:
        torch.set_num_threads(old)
        release_memory()  # the heap is never trimmed (tune_malloc): give the pages back
    slope = (seconds[-1] - seconds[0]) / (batches[-1] - batches[0]) if len(batches) == 2 else 0.0
    if slope > 0:
        step, how = seconds[0] + slope * (B - batches[0]), "affine"
    else:
        step, how = seconds[-1] * B / batches[-1], "proportional"
    return Oversized(r.pack_key(), r.label, B, need.total, available, batches, seconds,
                     step, how)


def split_by_memory(runs: list, device: str, extrapolate_ok: bool, available: int | None = None
                    ) -> tuple[list, list[list], list[tuple[list, str]], list[str]]:
    """(runs that fit, groups of same-shape runs to extrapolate, groups that cannot be timed here
    with their reason, refusals) against ``available`` bytes (default: measured now). Where
    ``extrapolate_ok``, a shape whose training batch alone is what does not fit
    (``memory_problem`` names train.batch_size) is extrapolated when some smaller batch fits in
    ``TIMING_SHARE`` of the memory, else it cannot be timed here (one sequence is too large for
    that share). Any other problem (parameters, an evaluation batch, a model its blocks refuse;
    parameters and evaluation batch together filling the memory),
    and every problem without ``extrapolate_ok``, is a refusal."""
    groups = by_shape(runs)
    avail = available_memory(device) if available is None and groups else available
    fit, over, untimed, refused = [], [], [], []
    for rs in groups.values():
        m = memory_problem(rs[0], device, UNBOUNDED if avail is None else avail)
        if m is None and not (extrapolate_ok and avail is not None and large_for_timing(rs[0], avail)):
            fit.extend(rs)
        elif m is None:  # fits, but timing it at its batch would take much of the memory and
            over.append(rs)  # the estimate may be low: measured small, then extrapolated
        elif not (extrapolate_ok and avail is not None and m.startswith("train.batch_size:")):
            refused.append(m)
        elif (need := memory_need(rs[0], device, 1)).param_bytes + need.eval_bytes >= avail:
            refused.append(m)  # no batch at all could train here: the model itself is too large
        elif fitting_batch(rs[0], int(avail * TIMING_SHARE)) >= 1:
            over.append(rs)
        else:
            per_seq = -(-(need.train_bytes - need.fixed_bytes) // rs[0].train.batch_size)
            label = f" {rs[0].label}" if rs[0].label else ""
            fixed = (f" on top of {_gb(need.param_bytes + need.fixed_bytes)} for the parameters "
                     "and the model's per-step buffers (e.g. S4D's convolution kernels)"
                     if need.fixed_bytes else "")
            untimed.append((rs, f"run{label} ({len(rs)} run{'s' if len(rs) > 1 else ''}): one "
                                f"training sequence needs about {_gb(per_seq)}{fixed}, more than "
                                f"the {_gb(int(avail * TIMING_SHARE))} a timing step may use here "
                                f"({TIMING_SHARE:.0%} of {_gb(avail)} available): not timed, "
                                "left out of the estimate"))
    return fit, over, untimed, refused
