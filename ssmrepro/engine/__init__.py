"""Stage 3 (engine): run an experiment — plan once, execute packs, rebuild results.csv.

    expand (sweep) -> skip finished runs -> cut to --max-runs -> plan packs (once, here)
      -> execute: in this process (1 worker) or N workers pulling packs from one queue
      -> runs claimed by another process: wait until they are done (or take them over when their
         claim goes stale) -> results.csv

``dry_run`` is the same planning without training, with a measured time estimate. Every pack ends
exactly once (trained, failed, skipped or lost), so progress and the summary are exact for any
number of workers; a worker that dies, a pack that raises, or runs left untrained make the summary
say so (``RunSummary.ok`` is False) instead of reporting success.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..kernels.backend import BackendError, backend_problem, scan_backend
from ..spec import Spec, SpecError
from ..store import Store, open_store, output_name, results_dir, shared_homes
from ..sweep import (
    RunConfig,
    expand,
    layer_spelling_problems,
    overrides_tag,
    per_point,
    unique_runs,
)
from ..train import construction_problems, init_std_problems, lr_scale_problems
from ..util import human_seconds
from .costs import CostModel, cache_file
from .local import (
    Event,
    WorkSettings,
    default_workers,
    git_commit,
    other_load,
    run_in_process,
    run_workers,
    threads_per_process,
)
from .plan import (
    Pack,
    available_memory,
    estimate_seconds,
    eval_chunk_lines,
    extrapolate,
    memory_problems,
    pack_size_problems,
    plan,
    split_by_memory,
    workers_in_memory,
)

ENGINES = ("local", "ray")

__all__ = ["ENGINES", "DryRun", "RunSummary", "dry_run", "open_store", "output_name", "results_dir",
           "run_experiment"]

WAIT_POLL_S = 5.0  # how often to look at runs held by other processes
DRY_RUN_CALIBRATION_S = 60.0  # a dry run's calibration time (koren2026-fig6's paper profile,
# 20,304 runs of many shapes, calibrated for over 45 minutes at 5% of its training time)


@dataclass
class DryRun:
    total: int  # unique runs of the profile
    done: int
    pending: int  # to train (after --max-runs)
    packs: list[Pack]
    run_steps: int
    estimate_s: float | None = None
    estimate_how: str = ""
    planner: list[str] = field(default_factory=list)  # the cost model's choices per shape
    nominal: list[str] = field(default_factory=list)  # one line per absent dataset planned from
    #                                                   its nominal shapes (tasks.lra.nominal_data)
    oversized: list[str] = field(default_factory=list)  # one line per shape too large for this
    #                                     machine's memory, its step time extrapolated (plan.Oversized)
    untimed: list[str] = field(default_factory=list)  # one line per shape that could not be timed
    untimed_runs: int = 0  # here at all (one sequence too large): left out of ``estimate_s``
    warnings: list[str] = field(default_factory=list)  # the store's (a record quarantined ...)
    eval_chunks: list[str] = field(default_factory=list)  # one line per shape evaluated in chunks
    #                                 smaller than its evaluation batch (plan.eval_chunk_lines)
    workers: int = 1  # CPU workers (local engine) whose packs share this memory, as the packs
    #                   and their evaluation chunks were sized (``plan``'s ``Pack.shares``)

    @property
    def largest(self) -> int:
        return max((len(p) for p in self.packs), default=0)


@dataclass
class RunSummary:
    total: int
    already_done: int
    trained: int  # records written by this command (ok or diverged)
    failed: int  # runs whose pack raised, or whose worker died
    elsewhere: int  # finished meanwhile by another process
    not_run: int  # planned here but never trained (interrupted, every worker lost)
    packs: int  # packs that trained a run (not those planned: a failed, interrupted or taken-over one)
    wall_s: float
    csv: Path | None
    messages: list[str] = field(default_factory=list)
    interrupted: bool = False
    lost_workers: int = 0  # worker processes that died before reporting a pack (the command is
    #                         not ok even when the other workers trained every run)
    cpu_s: float = 0.0  # CPU time of the training processes (about the wall time on an idle
    #                     machine with one single-threaded worker per core, divided by workers)
    left: int = 0  # runs of the profile this command did not plan (cut by --max-runs) and
    #                no one has finished: the next command trains them
    early_stop_0: int = 0  # runs trained here that their early stop stopped at step 0, before
    #                        any training step (numbers of the untrained model: a warning)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.not_run or self.interrupted or self.lost_workers)


def _pending(spec: Spec, profile: str, store: Store, max_runs: int | None,
             overrides: dict | None = None, data: bool = True, runs: list | None = None):
    # ``data``: the runs checked against the data here (``sweep.expand``), which they read;
    # ``runs``: the profile's expanded already (`run` has them: a second expansion took 8 s of
    # CPU of koren2026-fig6's paper dry run)
    runs = expand(spec, profile, overrides=overrides, data=data) if runs is None else runs
    unique = unique_runs(runs)
    pending = [r for r in unique if not store.is_done(r.run_id)]
    if max_runs is not None and len(pending) > max_runs:
        # free runs first: `--max-runs 1` took a run another live process held, and waited for
        # it (up to its 10-minute heartbeat) instead of training a free one; held runs count
        # towards N (and are waited for) only where there are fewer than N free ones
        held = {r.run_id for r in pending if store.holder(r.run_id) is not None}
        pending = ([r for r in pending if r.run_id not in held]
                   + [r for r in pending if r.run_id in held])[:max_runs]
    return runs, unique, pending


def held_runs(spec: Spec, profile: str, out: Path | None = None,
              overrides: dict | None = None) -> tuple[list[str], list[str]]:
    """('pid P on host H' of each unfinished run of the profile another live process holds
    (`plot` / `verify` said "train the rest" of runs being trained at that moment), the store's
    warnings of reading those claims (one of this host dated in the future is dated now:
    ``Store._date_now``; its warning was thrown away)). The records' warnings are not among
    them: the command that asks has read the same records and said them."""
    store = open_store(spec, out)
    todo = [r for r in unique_runs(expand(spec, profile, overrides=overrides))
            if not store.is_done(r.run_id)]
    seen = len(store.warnings)
    held = [h for h in (store.holder(r.run_id) for r in todo) if h is not None]
    return held, store.to_say(seen)


def check_memory(spec: Spec, profile: str, runs: list, device: str,
                 available: int | None = None) -> None:
    """Refuse (SpecError, exit 2) before anything is built when one run of ``runs`` alone needs
    more memory than ``device`` has available (``plan.memory_problems``)."""
    bad = memory_problems(runs, device, available)
    if bad:
        raise SpecError([f"{spec.path or spec.id}: [profile {profile}] {m}" for m in bad])


def check_pack_size(spec: Spec, profile: str, runs: list, pack_size: int | None, device: str,
                    available: int | None = None) -> None:
    """Refuse (SpecError, exit 2) before anything is built when a given ``--pack-size`` makes a
    pack of ``runs`` need more memory than ``device`` has available, though one run fits
    (``plan.pack_size_problems``)."""
    bad = pack_size_problems(runs, pack_size, device, available)
    if bad:
        raise SpecError([f"{spec.path or spec.id}: [profile {profile}] {m}" for m in bad])


def check_data(runs: list) -> None:
    """Raise ``DataUnavailable`` (the CLI: exit 2, with the command that provides the data) when a
    run's task or one of its evaluation sets reads a dataset that is not on this machine. Without
    it every pack failed on its own and the command exited 1, unless the planner's calibration
    happened to load the data first. Tasks are built once per sweep point (their data is cached
    per process; ``sweep.expand`` has built them already)."""
    from ..tasks import build_task

    def build(r: RunConfig) -> None:
        build_task(r.task)
        for ov in r.train.evals.values():
            build_task({**r.task.model_dump(), **ov})

    per_point(runs, build)


def cost_model(device: str, workers: int | None = None, threads: int | None = None,
               backend: str = "torch", path: Path | None = None) -> CostModel:
    """The planner's cost model, timing with the thread count each worker will have (given, or
    the cores split between the workers) on the scan ``backend`` they will use (torch | cuda),
    cached in ``path`` (default: ``cache_file()``)."""
    cores = default_workers(device, 10**9)
    return CostModel(device, threads=threads or max(1, (os.cpu_count() or 1)
                                                    // min(cores, workers or cores)),
                     backend=backend,
                     path=path or cache_file())  # a bad $SSMREPRO_CACHE refused before any timing


def workers_capped(workers: int | None, device: str) -> str | None:
    """'--workers N capped at C (one per CPU core)' where N is more than ``device`` has (one
    worker per core, or per visible GPU), else None: what `run` and `run --dry-run` say (the
    dry run planned for C workers without a word)."""
    cap = default_workers(device, 10**9)
    if workers is None or workers <= cap:
        return None
    return (f"--workers {workers} capped at {cap} (one per "
            f"{'GPU' if device.startswith('cuda') else 'CPU core'})")


def dry_run(spec: Spec, profile: str, out: Path | None = None, device: str = "cpu",
            max_runs: int | None = None, pack_size: int | None = None,
            estimate: bool = True, overrides: dict | None = None,
            calibrate: bool = True, backend: str = "torch",
            workers: int | None = None, engine: str = "local",
            runs: list | None = None) -> DryRun:
    """Runs, packs and (optionally) a measured wall-clock estimate for one worker. With
    ``estimate`` the planner calibrates (as a real run would) and the estimate uses its timings.
    An LRA dataset absent here is planned from its nominal shapes and split sizes
    (``tasks.lra.nominal_data``; ``DryRun.nominal`` says which, and how to get the data):
    nothing is downloaded or generated, and training itself still refuses without the data.
    ``calibrate`` False: packs sized by memory alone, as `run --no-calibrate` packs them (the
    estimate still times them). Steps are timed on the scan ``backend`` `run` would use, with
    the threads each of ``workers`` (`run --workers`) would have, as `run` calibrates; packs
    sized for the ``engine`` `run` uses (local: the CPU workers share one memory; ray: a task
    per pack, each reserving its own).
    A run whose training batch alone does not fit this machine's memory (a paper profile's LRA
    batch on a CPU) is priced by extrapolation from smaller batches that do (``plan.extrapolate``;
    ``DryRun.oversized`` says which, from what), not refused; training it here still is. Without
    ``estimate``, and for any other memory problem, the dry run refuses as training would; so
    it does, with or without ``estimate``, for data missing here that has no nominal shapes (a
    text corpus file). ``runs``: ``sweep.expand``'s runs of the profile with ``overrides``,
    where the caller has them (checked against the data here)."""
    from ..tasks.lra import nominal_data

    store = open_store(spec, out, readonly=True)  # it moves nothing
    _, unique, pending = _pending(spec, profile, store, max_runs, overrides, runs=runs)
    bad = (lr_scale_problems(pending) + construction_problems(pending)
           + init_std_problems(pending) + layer_spelling_problems(unique))  # as `run` refuses them
    if bad:
        raise SpecError([f"{spec.path or spec.id}: [profile {profile}] {m}" for m in bad])
    # every step timed on the backend `run` would use (the extrapolations too)
    with nominal_data() as notes, scan_backend(backend):
        # data missing here refused first, as `run` refuses it: without the estimate (which
        # builds the tasks to time them) a spec whose corpus file is absent (yu2025-appG) was
        # planned without a word; an absent LRA dataset stands in by its nominal shapes
        check_data(pending)
        fit, over, untimed, refused = split_by_memory(pending, device, extrapolate_ok=estimate)
        if refused or (untimed and not fit and not over):  # nothing could be priced: refuse,
            # saying which sizes came from nominal shapes
            raise SpecError([f"{spec.path or spec.id}: [profile {profile}] {m}"
                             for m in refused or memory_problems(pending, device)]
                            + [f"(nominal shapes: {n.line()})" for n in notes.values()])
        bad = pack_size_problems(pending, pack_size, device)  # refused as `run` refuses it
        if bad:
            raise SpecError([f"{spec.path or spec.id}: [profile {profile}] {m}" for m in bad])
        # timed with the threads a worker will have, as `run` gives them: $SSMREPRO_THREADS, else
        # the free cores split between the workers (the dry run timed and chose its packs at
        # one thread per core whatever it said, and `--dry-run --workers 2` of 16 cores at 1
        # thread where `run --workers 2` calibrates at 8: other packs than `run` trains)
        want = min(workers or default_workers(device, 10**9), default_workers(device, 10**9))
        costs = (cost_model(device, workers, threads_per_process(want, device, other_load()),
                            backend) if estimate else None)
        if costs is not None:  # measuring every shape of a paper profile took hours
            costs.deadline = time.perf_counter() + DRY_RUN_CALIBRATION_S
        # sized as `run` sizes them: the local CPU workers' packs share one memory, Ray's do
        # not (`--engine ray --dry-run` planned packs and chunks for a share of the half)
        packs = plan(fit, pack_size, device, costs if calibrate else None,
                     workers=min(want, len(fit) or 1) if engine == "local" else 1)
        # (runs too large to train here, extrapolated below, are no runs evaluated in chunks)
        chunked = eval_chunk_lines(packs, device)
        shares = max((p.shares for p in packs), default=1)  # (after any plan for fewer)
        oversized = []
        if over:
            from ..util import release_memory

            for rs in over:
                release_memory()  # what calibration or the last shape held, before measuring
                o = extrapolate(rs, device, available_memory(device), threads=costs.threads)
                if o is None:  # the free memory shrank since the split
                    label = f" {rs[0].label}" if rs[0].label else ""  # ('run : no batch')
                    untimed.append((rs, f"run{label}: no batch fits the memory now "
                                        "available: not timed, left out of the estimate"))
                    continue
                oversized.append(o)
                # packed as `run` packs them (a given --pack-size; else by memory), each pack
                # priced at E x the run's extrapolated step, the shape's last, smaller one at its
                # full pack's (as ``estimate_seconds`` prices a calibrated shape): every run was a
                # pack of its own, `4 packs (largest 1)` for a run of 2 packs of 2
                shaped = plan(rs, pack_size, device)
                packs += [Pack(o.key, p.runs, None, o.step_s * len(shaped[0]), p.eval_chunk)
                          for p in shaped]
        d = DryRun(len(unique), len(unique) - len([r for r in unique
                                                    if not store.is_done(r.run_id)]),
                   len(pending), packs, sum(r.train.total_steps for r in pending))
        if estimate and packs:
            d.estimate_s, d.estimate_how = estimate_seconds(packs, device, costs=costs)
            if costs.uncalibrated:
                n = costs.uncalibrated  # ('1 shapes')
                d.estimate_how += (f"; {n} shape{'s' if n != 1 else ''} not calibrated (the dry run "
                                   f"measures for at most {DRY_RUN_CALIBRATION_S:.0f} s): packed "
                                   "as the memory estimate allows, priced by scaling")
            if oversized:
                n = sum(len(rs) for rs in over)
                d.estimate_how += (f"; {n} run{'s' if n > 1 else ''} too large to time at their "
                                   "batch size here priced by extrapolation")
        d.oversized = [o.line() for o in oversized]
        d.eval_chunks = chunked
        d.workers = shares
        d.untimed = [why for _, why in untimed]
        d.untimed_runs = sum(len(rs) for rs, _ in untimed)
    d.planner = list(costs.log) if costs else []
    capped = workers_capped(workers, device) if engine == "local" else None
    d.warnings = store.to_say() + ([capped] if capped else [])  # (as `run` says it: packs
    #                                                             planned for fewer)
    d.nominal = [n.line() for n in notes.values()]
    return d


class _Tracker:
    """Counts every run once, whatever the order of events and the number of workers."""

    def __init__(self, store: Store, n_packs: int):
        self.store = store
        self.n_packs = n_packs
        self.trained: set[str] = set()
        self.failed: set[str] = set()
        self.skipped: set[str] = set()
        self.elsewhere: set[str] = set()  # skipped runs seen finished by their holder
        self.offered: set[str] = set()  # skipped runs planned again, their holder gone
        self.ended: set[int] = set()
        self.packs_trained = 0  # packs that trained a run (re-planned ones too), for the summary
        self.running = 0
        self.messages: list[str] = []
        self.lost_workers = 0  # worker processes that died outside a pack they had reported

    def end(self, ev: Event) -> int:
        """Record a pack end; returns how many runs it settled (for the progress bar)."""
        if ev.pack in self.ended:
            return 0
        self.ended.add(ev.pack)
        self.packs_trained += bool(ev.run_ids)
        self.trained.update(ev.run_ids)
        self.failed.update(ev.failed)
        self.skipped.update(ev.skipped)
        if ev.message:
            self.messages.append(f"pack {ev.pack + 1}: {ev.message}")
        return len(ev.run_ids) + len(ev.failed)


def _write_table(store: Store, runs: list, name: str, warn_console: Console) -> Path:
    """``store.write_csv``, saying what it warned of (a row edited by hand that the records
    replaced: `run` overwrote it without a word, the store's warning unsaid)."""
    seen = len(store.warnings)
    path = store.write_csv(runs, name)
    for w in store.to_say(seen):
        warn_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    return path


def _pack_line(store: Store, ev: Event, n_packs: int, elapsed: float) -> str:
    """One log line per finished pack (readable in non-terminal logs too)."""
    recs = [store.read(r) or {} for r in ev.run_ids]
    accs = [(rec.get("metrics") or {}).get("test.acc") for rec in recs]
    accs = [a for a in accs if a is not None]
    labels = escape(f"[{', '.join(sorted({rec.get('label') or '-' for rec in recs}))}]")
    acc = f", test.acc {min(accs):.3f}–{max(accs):.3f}" if accs else ""  # (rich markup: a label
    #                                       like [hybrid] read as a style tag vanished unescaped)
    return (f"  pack {ev.pack + 1}/{n_packs} done: {len(ev.run_ids)} runs {labels}{acc} "
            f"({human_seconds(elapsed)} elapsed)")


def run_experiment(
    spec: Spec,
    profile: str,
    out: Path | None = None,
    device: str = "cpu",
    backend: str = "torch",
    max_runs: int | None = None,
    pack_size: int | None = None,
    workers: int | None = None,
    console: Console | None = None,
    wait_poll_s: float = WAIT_POLL_S,
    calibrate: bool = True,
    overrides: dict | None = None,
    engine: str = "local",
    address: str | None = None,
    cpus_per_pack: int = 1,
    warn_console: Console | None = None,
) -> RunSummary:
    """Train the profile's pending runs. ``console``: progress lines; ``warn_console``: the
    'warning: ...' lines (default: standard error, as every command's; they were among `run`'s
    progress on standard output). ``engine``: 'local' (this process or ``workers``
    processes on this machine) or 'ray' (one Ray task per pack on the cluster at ``address``:
    None starts a local Ray instance, 'auto' joins the one ``ray start`` runs here); with Ray,
    ``device`` 'auto' means the cluster's GPUs if it has any, and ``backend`` is resolved on the
    worker that trains the pack."""
    console = console or Console(emoji=False)
    warn_console = warn_console or Console(stderr=True, emoji=False)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} ({' | '.join(ENGINES)})")
    t0 = time.monotonic()
    # a bad $SSMREPRO_CACHE refused before anything is made or removed: it was refused at the
    # calibration, after `prepare` had made the store's empty runs/ and claims/ folders
    cache = cache_file() if calibrate and engine == "local" else None
    store = open_store(spec, out)
    store.cleanup()
    load = other_load()  # before our own calibration and training add to it
    runs, unique, pending = _pending(spec, profile, store, max_runs, overrides,
                                     data=engine == "local")  # (a Ray cluster's: its own)
    # a run the `run` of a spec this one reuses trains too is claimed and recorded in its store
    unread: list[str] = []  # (a spec reused beside the home that reads it not: said)
    store.homes, more = shared_homes(spec, profile, overrides, out, [r.run_id for r in unique],
                                     unique, unread)
    done_before = len(unique) - len([r for r in unique if not store.is_done(r.run_id)])
    for w in store.to_say() + unread:
        warn_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    # a scale of no parameter, a construction for another task (`validate` says so too)
    bad = (lr_scale_problems(pending) + construction_problems(pending)
           + init_std_problems(pending) + layer_spelling_problems(unique))
    if bad:
        raise SpecError([f"{spec.path or spec.id}: [profile {profile}] {m}" for m in bad])
    budget = None
    ray_owned = False
    if engine == "ray" and pending:
        from . import ray_engine

        ray_owned = ray_engine.connect(address)
        device = ray_engine.cluster_device(device)
        if backend_problem(backend, device):  # 'auto' became cpu: no GPU in the cluster
            if ray_owned:
                ray_engine.shutdown()
            raise BackendError(f"{backend_problem(backend, device)} (the Ray cluster has no GPUs)")
        budget = ray_engine.device_budget(device) if pack_size is None else None
        n_workers = ray_engine.slots(device, cpus_per_pack)
        # a run must fit one worker's GPU (half its free memory is the pack budget) or, on CPU,
        # the memory of the largest node (Ray reserves each pack's estimate on a node)
        room = 2 * budget if budget is not None else (
            None if device.startswith("cuda") else ray_engine.node_memory())
        if room is not None:
            try:
                check_memory(spec, profile, pending, device, available=room)
                check_pack_size(spec, profile, pending, pack_size, device, available=room)
            except SpecError:
                if ray_owned:
                    ray_engine.shutdown()
                raise
        console.print(f"[dim]Ray cluster ready in {time.monotonic() - t0:.1f}s: {n_workers} pack "
                      f"slots[/]")
    if engine == "local":  # (a Ray cluster's data lives on its workers, not necessarily here)
        check_data(pending)
        check_memory(spec, profile, pending, device)
        check_pack_size(spec, profile, pending, pack_size, device)
    if pending:
        seen = len(store.warnings)
        store.prepare()
        for w in store.to_say(seen):  # saved weights it had to quarantine
            warn_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    threads = None
    if engine == "local":
        cap = default_workers(device, 10**9)  # one per core (CPU) or visible GPU
        capped = workers_capped(workers, device)
        if capped:
            warn_console.print(f"[yellow]warning:[/] {capped}")
        want = min(workers or cap, cap)
        threads = threads_per_process(want, device, load)
    # the cost model times steps on this machine: it plans local runs, not a remote cluster's
    costs = (cost_model(device, workers, threads, backend, cache) if cache is not None
             else None)
    avail = room if engine == "ray" and pending else None  # (None: measured here)
    # local CPU workers share one memory: packs sized for as many as will train at once
    sharing = min(want, len(pending) or 1) if engine == "local" else 1
    packs = plan(pending, pack_size, device, costs, budget, available=avail, workers=sharing)
    for line in costs.log if costs else []:
        console.print(f"[dim]planner: {escape(line)}[/]", highlight=False)
    for line in eval_chunk_lines(packs, device):
        console.print(f"[dim]evaluation in chunks: {escape(line)}[/]", highlight=False)
    if engine == "local":
        n_workers = max(1, min(want, len(packs) or 1))
        # CPU workers share one memory; CUDA workers take a GPU each (``local.run_workers``, at
        # most one per GPU), where the pack budget (half the least free GPU memory) applies
        if n_workers > 1 and not device.startswith("cuda"):
            fit = workers_in_memory(packs, n_workers, available_memory(device))
            if fit < n_workers:
                warn_console.print(f"[yellow]warning:[/] {fit} worker{'s' if fit > 1 else ''} "
                                   f"instead of {n_workers}: the largest packs of {n_workers} "
                                   "workers at once would not fit in the half of the memory "
                                   "available that packs may take")
                n_workers = fit
        if n_workers < want:  # fewer packs (or memory for fewer workers): more threads each
            threads = threads_per_process(n_workers, device, load)
    elif not pending:
        n_workers = 0
    console.print(
        f"[bold]{spec.id}[/] profile [cyan]{escape(profile)}[/]: {len(unique)} runs, "
        f"{done_before} already done, {len(pending)} to train in {len(packs)} packs (largest "
        f"{max((len(p) for p in packs), default=0)}) on {device}, "
        + (f"Ray ({n_workers} slots)" if engine == "ray" else
           f"{n_workers} worker{'s' if n_workers > 1 else ''}")
        + (f" × {threads} thread{'s' if threads > 1 else ''}" if threads and pending else ""))
    from ..analysis import ANALYSES  # the training-time ones (others run at plot time)

    ws = WorkSettings(device, backend, tuple(a for a in spec.analysis if a in ANALYSES),
                      spec.save_weights, commit=git_commit(), threads=threads,
                      more=more)
    csv_name = output_name(spec, profile, "results", "csv", overrides_tag(overrides, runs))
    tr = _Tracker(store, len(packs))
    by_id = {r.run_id: r for r in pending}
    interrupted = False
    if pending:
        with Progress(*progress_columns(), console=console, transient=False) as prog:
            bar = prog.add_task("runs", total=len(pending), status="")
            step_bar = prog.add_task("pack", total=1, status="",
                                     visible=n_workers == 1 and engine == "local")

            def status() -> str:
                return (f"packs {len(tr.ended)}/{tr.n_packs} ended, {tr.running} running, "
                        f"{len(tr.failed)} runs failed")

            started: set[int] = set()  # packs that reported their start and have not ended
            stepped: set[int] = set()  # packs that reported a training step

            def on_event(ev: Event) -> None:
                if ev.kind == "pack_start":
                    started.add(ev.pack)
                    tr.running += 1
                    prog.update(step_bar, completed=0, total=1,
                                description=f"pack {ev.pack + 1} ({len(ev.run_ids)} runs)")
                elif ev.kind == "progress":
                    stepped.add(ev.pack)
                    prog.update(step_bar, completed=ev.step, total=ev.total)
                elif ev.kind == "worker_lost":  # its runs stay pending: counted as not trained
                    tr.lost_workers += 1
                    tr.messages.append(ev.message)
                    console.print(f"[red]{escape(ev.message)}[/]")
                elif ev.kind == "pack_end":
                    if ev.pack in started:  # (all its runs may have been taken over)
                        started.discard(ev.pack)
                        tr.running = max(0, tr.running - 1)
                    prog.advance(bar, tr.end(ev))
                    if ev.run_ids and not ev.failed and ev.pack not in stepped:
                        # an evaluation-only pack (a constructed model: no training step) left
                        # the pack bar at 0/1, as if it had not run
                        prog.update(step_bar, completed=1, total=1)
                    if ev.failed:
                        console.print(f"[red]pack {ev.pack + 1} failed:[/] {escape(ev.message)}")
                    if ev.run_ids:  # a pack whose other members failed alone still trained these
                        console.print(_pack_line(store, ev, tr.n_packs, time.monotonic() - t0))
                    if ev.run_ids or ev.failed:
                        _write_table(store, runs, csv_name, warn_console)
                prog.update(bar, status=status())

            try:
                work = list(enumerate(packs))
                while work:
                    if engine == "ray":
                        from .ray_engine import run_ray

                        run_ray(work, store, ws, on_event, cpus_per_pack=cpus_per_pack)
                    elif n_workers > 1 and len(work) > 1:
                        run_workers(work, store, ws, min(n_workers, len(work)), on_event)
                    else:
                        run_in_process(work, store, ws, on_event)
                    work = _wait_for_others(tr, by_id, store, pack_size, device, prog, bar,
                                            console, wait_poll_s, first_index=len(tr.ended),
                                            budget=budget,
                                            workers=n_workers if engine == "local" else 1,
                                            available=avail)
                    tr.n_packs = len(tr.ended) + len(work)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                if ray_owned:
                    from .ray_engine import shutdown

                    shutdown()
    csv = _write_table(store, runs, csv_name, warn_console)
    store.cleanup()
    recs = [store.read(r) or {} for r in tr.trained]
    cpu_s = sum({rec.get("pack_wall_s"): rec.get("pack_cpu_s") or 0.0
                 for rec in recs}.values())  # once per pack
    at_start = sum(1 for rec in recs if rec.get("status") == "ok"
                   and rec.get("stop_reason") == "early_stop" and rec.get("stop_step") == 0)
    elsewhere = tr.elsewhere - tr.trained
    settled = tr.trained | tr.failed | elsewhere
    not_run = [r.run_id for r in pending if r.run_id not in settled and not store.is_done(r.run_id)]
    planned = {r.run_id for r in pending}
    left = sum(1 for r in unique if r.run_id not in planned and not store.is_done(r.run_id))
    summary = RunSummary(len(unique), done_before, len(tr.trained), len(tr.failed),
                         len(elsewhere), len(not_run), tr.packs_trained, time.monotonic() - t0, csv,
                         tr.messages, interrupted, tr.lost_workers, cpu_s, left, at_start)
    return summary


def progress_columns() -> list:
    """The columns of `run`'s progress: runs (steps) done/total lead the status text, which a
    narrow terminal cuts at its end. In their own column they were the first that rich left
    out: at 40 columns the line read `runs     packs 4/5 ended, 1 running, 0…`, no count of
    the runs done (the bar and times went too, as they still do there)."""
    return [TextColumn("[progress.description]{task.description}"), BarColumn(),
            TextColumn("{task.completed}/{task.total} {task.fields[status]}"),
            TimeElapsedColumn(), TimeRemainingColumn()]


def _wait_for_others(tr: _Tracker, by_id: dict[str, RunConfig], store: Store,
                     pack_size: int | None, device: str, prog, bar, console: Console,
                     poll_s: float, first_index: int,
                     budget: int | None = None, workers: int = 1,
                     available: int | None = None) -> list[tuple[int, Pack]]:
    """Runs skipped because another process held their claim: wait until they are done; return
    new packs for those whose claim went stale (their holder died) so this command trains them
    (sized for the ``workers`` that train them at once and the memory ``available`` to them, as
    the first ``plan`` sized the others: the Ray engine's largest node on CPU, whose packs were
    sized again by the memory of the machine that planned)."""
    announced = False
    while True:
        waiting = [r for r in tr.skipped
                   if r not in tr.trained and r not in tr.failed and r not in tr.elsewhere]
        for r in waiting:
            if store.is_done(r):
                tr.elsewhere.add(r)
                prog.advance(bar, 1)
        waiting = [r for r in waiting if r not in tr.elsewhere]
        if not waiting:
            return []
        # a stale claim whose takeover marker is young cannot be claimed yet: planned now, its
        # pack ended unclaimed at every poll (the pack counter past its total for a minute)
        free = [r for r in waiting if store.holder(r) is None and store.takeover_wait(r) is None]
        if free:
            if tr.offered.intersection(free):  # planned before, and not claimed: its stale
                # claim is being taken over, or cannot be yet (``Store.take_over``). It was
                # planned again at once, thousands of packs a second, for as long as that lasted
                time.sleep(poll_s)
            tr.offered.update(free)
            tr.skipped.difference_update(free)
            packs = plan([by_id[r] for r in free], pack_size, device, budget_bytes=budget,
                         available=available, workers=workers)
            return [(first_index + k, p) for k, p in enumerate(packs)]
        if not announced:
            # a marker's own wait (``Store.takeover_wait``): one touched up to MARKER_DEBRIS_S
            # "in the future" (a clock stepped back) ages for up to twice that; the line said
            # 'within 60 s' for a wait of up to 119 s
            marked = [w for r in waiting if store.holder(r) is None
                      and (w := store.takeover_wait(r)) is not None]
            holders = sorted({store.holder(r) or "a takeover of a stale claim (its marker "
                              f"expires within {math.ceil(max(marked, default=1))} s)"
                              for r in waiting})
            console.print(f"waiting for {len(waiting)} runs claimed by another process "
                          f"({escape('; '.join(holders[:3]))}); Ctrl-C stops waiting, re-run to resume")
            announced = True
        time.sleep(poll_s)

