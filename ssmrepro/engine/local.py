"""Stage 3 (engine): execute planned packs on this machine, in this process or in N workers.

The parent plans once (``engine.plan``) and hands packs to the executors: in-process for one
worker, else N spawned worker processes that pull packs from one queue. Either way one function,
``work_pack``, claims the pack's runs (``Store.claim``: several runners or machines sharing the
results folder never train a run twice), trains the claimed ones as one stacked model
(``train_records``: the part every executor shares, the Ray tasks of ``ray_engine`` included),
writes one record per run and reports what happened as ``Event``s. The parent sees every pack
end exactly once: trained, failed (an exception, recorded per run), skipped (claimed by another
process), or lost (its worker process died). Killing the sweep loses at most the packs in flight;
a re-run picks them up.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import platform
import queue as queue_mod
import signal
import subprocess
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..kernels.backend import kernel_usage, reset_kernel_usage, set_scan_backend
from ..signals import STOP_SIGNALS
from ..store import RECORD_REVISION, Store
from ..sweep import CODE_VERSION
from ..tasks.lra import CutWarning
from ..train import member_state, train_pack
from ..util import (
    MemberError,
    die_with_parent,
    flush_denormals,
    hangups_ignored,
    plain_warnings,
    soft_limit,
    tracker_revived,
    tune_malloc,
    whole_number,
)
from .plan import Pack

_COMMIT: str | None = None


def git_commit() -> str | None:
    """The commit of the git checkout this package is imported from (12 hex digits), None where
    it is not imported from one: the package's own files must be tracked by the repository
    around them. A package installed with ``pip install .`` into a virtual environment inside
    some git repository (``other-project/.venv``, untracked there) recorded that repository's
    commit as the runs' code."""
    global _COMMIT
    if _COMMIT is None:
        here = Path(__file__).resolve()
        source = here.parents[2]
        _COMMIT = ""
        try:
            tracked = subprocess.run(
                ["git", "ls-files", "--error-unmatch", "--", str(here.relative_to(source))],
                capture_output=True, text=True, cwd=source, timeout=5).returncode == 0
            if tracked:
                _COMMIT = subprocess.run(
                    ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                    cwd=source, timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return _COMMIT or None


def make_record(run, result: dict, device: str, backend: str,
                kernels: dict[str, str] | None = None, commit: str | None = None,
                code: int = CODE_VERSION) -> dict:
    """One run's record; ``kernels`` = {mixer class: kernel path(s) it ran} (kernels.backend).

    ``commit`` and ``code`` come from the process that planned the run (its run id hashes that
    code version), so a record trained on a machine without the git checkout still names them.
    """
    return {
        "run_id": run.run_id,
        "spec_id": run.spec_id,
        "profile": run.profile,
        "label": run.label,
        "coords": run.coords,
        "seed": run.seed,
        "config": run.config(),
        "identity": run.identity(),  # what the run id hashes (checked when the record is read)
        "code": code,
        "revision": RECORD_REVISION,  # the changes of what a run computes it was trained with
        **result,
        "backend": backend,
        "kernels": kernels or {},
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "commit": commit if commit is not None else git_commit(),
        "finished_at": time.time(),
    }


@dataclass
class Event:
    """What an executor reports. ``pack_end`` closes every pack exactly once."""

    kind: str  # pack_start | progress | pack_end | worker_exit | worker_lost
    pack: int
    worker: int = 0
    run_ids: list[str] = field(default_factory=list)  # pack_start: claimed; pack_end: trained
    failed: list[str] = field(default_factory=list)  # pack_end: runs whose training raised
    skipped: list[str] = field(default_factory=list)  # pack_end: runs claimed by another process
    step: int = 0
    total: int = 0
    message: str = ""


EventFn = Callable[[Event], None]


@dataclass(frozen=True)
class WorkSettings:
    device: str
    backend: str
    analyses: tuple[str, ...] = ()
    save_weights: bool = False  # keep each member's trained weights (runs/<run_id>.pt)
    commit: str | None = None  # the planner's git commit (None: look it up where the pack trains)
    code: int = CODE_VERSION  # the planner's code version (what its run ids hash)
    threads: int | None = None  # intra-op threads per training process (None: torch's default)
    # run id -> what else to keep of that run ('weights', analyses): a shared run recorded in the
    # store of a reused spec that keeps more of it (``store.shared_homes``)
    more: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def keeps(self, run_id: str) -> tuple[tuple[str, ...], bool]:
        """The training-time analyses recorded for ``run_id`` and whether its weights are kept:
        the spec's own and what a reused spec homing the run keeps (``more``)."""
        more = self.more.get(run_id, ())
        analyses = self.analyses + tuple(a for a in more if a != "weights" and a not in
                                         self.analyses)
        return analyses, self.save_weights or "weights" in more


@dataclass
class PackResult:
    """What training one pack gives back: one record per run, trained weights where kept."""

    records: list[dict]
    weights: list[dict | None]  # per run: CPU state dict (``save_weights`` and ok) or None
    failed: bool = False  # the pack raised: every record has status "error"
    message: str = ""

    def failed_ids(self) -> list[str]:
        """Run ids whose record is an error: every run where ``failed``, else the members that
        failed on their own (``_without``) while the others trained."""
        return [r["run_id"] for r in self.records if r.get("status") == "error"]


def train_records(runs: list, ws: WorkSettings, progress=None, heartbeat=None,
                  micro_batch: int | None = None, eval_chunk: int | None = None) -> PackResult:
    """Train ``runs`` as one pack and return their records; the part of a pack's work that any
    executor shares (in-process, worker processes, Ray tasks on other machines). Writes nothing:
    claiming runs and writing records stay with the caller that owns the store."""
    reset_kernel_usage()
    keep: dict = {}
    keeps = [ws.keeps(r.run_id) for r in runs]  # (a member's analyses are computed for the
    analyses = tuple(dict.fromkeys(a for k in keeps for a in k[0]))  # pack, kept where asked)
    try:
        try:
            results = train_pack(runs, device=ws.device, progress=progress, heartbeat=heartbeat,
                                 analyses=analyses, keep=keep, micro_batch=micro_batch,
                                 eval_chunk=eval_chunk)
        except MemberError as err:
            if not err.members:
                raise
            return _without(runs, err, ws, progress, heartbeat, micro_batch, eval_chunk)
        kernels = kernel_usage()
        records, weights = [], []
        for e, (r, res) in enumerate(zip(runs, results)):
            if "analysis" in res:
                res["analysis"] = {a: v for a, v in res["analysis"].items() if a in keeps[e][0]}
            keep_w = keeps[e][1] and res["status"] == "ok"
            weights.append(member_state(keep["model"], e) if keep_w else None)
            records.append(make_record(r, res, ws.device, ws.backend, kernels, ws.commit, ws.code))
        return PackResult(records, weights)
    except Exception as err:  # a crashing pack is recorded, the sweep goes on
        msg = "".join(traceback.format_exception_only(type(err), err)).strip()
        tb = traceback.format_exc()
        records = [make_record(r, {"status": "error", "error": msg, "traceback": tb}, ws.device,
                               ws.backend, commit=ws.commit, code=ws.code) for r in runs]
        return PackResult(records, [None] * len(runs), failed=True, message=msg)


def _without(runs: list, err: MemberError, ws: WorkSettings, progress, heartbeat,
             micro_batch: int | None, eval_chunk: int | None = None) -> PackResult:
    """``runs``' records when the members ``err.members`` fail on their own (``MemberError``: a
    set without a supervised target in their own data, an init their model does not fit): those
    fail as each would alone; the others train as a pack of their own (a member's training never
    depends on its pack-mates). The whole pack failed, and a run that trains alone
    (`--pack-size 1`) failed for its pack-mates' data or init. Every member failing, each
    record still names its own reason (they all read the first one's)."""
    bad = set(err.members)
    msg = "".join(traceback.format_exception_only(type(err), err)).strip()
    kind = msg[: len(msg) - len(str(err))]  # 'module.Class: '
    tb = traceback.format_exc()
    others = [r for e, r in enumerate(runs) if e not in bad]
    rest = (train_records(others, ws, progress, heartbeat, micro_batch, eval_chunk) if others
            else PackResult([], [], failed=True))
    done = iter(zip(rest.records, rest.weights))
    records, weights = [], []
    for e, r in enumerate(runs):
        if e in bad:
            records.append(make_record(r, {"status": "error", "error": kind + err.reason(e),
                                           "traceback": tb},
                                       ws.device, ws.backend, commit=ws.commit, code=ws.code))
            weights.append(None)
        else:
            rec, w = next(done)
            records.append(rec)
            weights.append(w)

    def name(r) -> str:
        where = r.label or r.coords_text()  # typed: ' 2' of a quoted integer as 2
        return f"{where + ' ' if where else ''}seed {r.seed}"

    if not others and len({err.reason(e) for e in bad}) == 1:  # one reason for the whole pack
        return PackResult(records, weights, failed=True, message=kind + err.reason(min(bad)))
    line = "; ".join(f"{name(r)}: {kind}{err.reason(e)}" for e, r in enumerate(runs) if e in bad)
    line = f"{len(bad)} of its {len(runs)} runs failed on their own ({line})"
    return PackResult(records, weights, failed=rest.failed,
                      message="; ".join(x for x in (line, rest.message) if x))


def store_result(store: Store, result: PackResult) -> list[str]:
    """Write a pack's records (and kept weights) through the store; the run ids not written
    because their claim was taken over while they trained (this process stopped past the
    claims' ``stale_after``: the taker trains them and writes their records, not both)."""
    lost = []
    for rec, w in zip(result.records, result.weights):
        if not store.holds(rec["run_id"]):
            lost.append(rec["run_id"])
            continue
        if w is not None:  # the record names its weights: another run's of the same shapes,
            # copied in their place, were loaded as this run's without a word
            rec.update(store.write_weights(rec["run_id"], w))
        store.write(rec)
    return lost


def work_pack(i: int, pack: Pack, store: Store, ws: WorkSettings, emit: EventFn,
              worker: int = 0) -> None:
    """Claim, train and record one pack; emits pack_start / progress and exactly one pack_end."""
    mine = [r for r in pack.runs if store.claim(r.run_id)]
    skipped = [r.run_id for r in pack.runs if r not in mine]
    if not mine:
        emit(Event("pack_end", i, worker, skipped=skipped))
        return
    ids = [r.run_id for r in mine]
    emit(Event("pack_start", i, worker, run_ids=ids))
    try:
        res = train_records(
            mine, ws,
            progress=lambda s, t, a: emit(Event("progress", i, worker, step=s, total=t)),
            heartbeat=lambda: store.heartbeat(ids),
            micro_batch=pack.micro_batch,
            eval_chunk=pack.eval_chunk,
        )
        lost = store_result(store, res)
        ids, skipped = [r for r in ids if r not in lost], skipped + lost
        bad = [x for x in res.failed_ids() if x not in lost]
        emit(Event("pack_end", i, worker, run_ids=[x for x in ids if x not in bad], failed=bad,
                   skipped=skipped, message=res.message if bad else ""))
    finally:
        for r in mine:
            store.release(r.run_id)


THREADS_ENV = "SSMREPRO_THREADS"


MAX_THREADS = 1024  # more OpenMP threads than any machine has cores (100,000 crash libgomp)


def thread_override() -> int | None:
    """Intra-op threads per training process from ``$SSMREPRO_THREADS`` (None: unset). On a
    shared, oversubscribed CPU one thread per process is often several times faster."""
    v = os.environ.get(THREADS_ENV, "").strip()
    if not v:
        return None
    # whole_number: '²' and '①' are digits int() cannot read, and 5,000 digits past int's
    # limit (a ValueError of its own words, 'invalid literal for int()', 'Exceeds the limit
    # (4300 digits)', that did not name the variable)
    n = whole_number(v)
    if n is None or not 1 <= n <= MAX_THREADS:
        raise ValueError(f"{THREADS_ENV}={v[:40]!r}: expected a whole number from 1 to "
                         f"{MAX_THREADS}")
    return n


def other_load() -> float:
    """Runnable processes on this machine that are not ours yet: the 1-minute load average
    (0 where the platform has none). Read before this sweep starts training."""
    try:
        return max(0.0, os.getloadavg()[0])
    except (OSError, AttributeError):
        return 0.0


def threads_per_process(workers: int, device: str, load: float) -> int | None:
    """Intra-op threads for each of ``workers`` CPU training processes: ``$SSMREPRO_THREADS``
    if set, else the cores left free by ``load`` (other processes' 1-minute load average) split
    between the workers, at least 1. Two sweeps started side by side thus take one thread each
    instead of oversubscribing the cores (OpenMP threads spinning against each other made a
    2-thread run ~10x slower beside a second one). None on a GPU (torch's default)."""
    n = thread_override()
    if n is not None:
        return n
    if device.startswith("cuda"):
        return None
    cores = os.cpu_count() or 1
    free = cores - min(cores - 1, int(load + 0.5))
    return max(1, free // max(1, workers))


def run_in_process(packs: list[tuple[int, Pack]], store: Store, ws: WorkSettings,
                   emit: EventFn) -> None:
    tune_malloc()
    flush_denormals()
    if ws.threads is not None:
        torch.set_num_threads(ws.threads)
    set_scan_backend(ws.backend)  # per process: the models' scans and convs dispatch on it
    for i, pack in packs:
        work_pack(i, pack, store, ws, emit)


def worker_warnings() -> None:
    """A worker process's warnings: 'warning: ...' as the parent prints them, without those the
    parent has said of every run's task before any worker started (``engine.check_data``: a
    ListOps max_len cutting expressions was said again by each worker, 3 lines at --workers 2)."""
    plain_warnings()
    warnings.simplefilter("ignore", CutWarning)


def _worker_main(worker: int, tasks, events, store: Store, ws: WorkSettings, threads: int,
                 parent: int) -> None:
    die_with_parent(parent)  # a killed sweep leaves no orphans training on
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us,
    for name in STOP_SIGNALS:  # and a closed terminal's hang-up (or a batch system's
        if hasattr(signal, name):  # SIGUSR1 / SIGUSR2), sent to us all
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    tune_malloc()  # no page-fault storms on every step's fresh activations (see util)
    flush_denormals()  # no slow denormal arithmetic (see util)
    worker_warnings()
    torch.set_num_threads(threads)
    set_scan_backend(ws.backend)
    while True:
        item = tasks.get()
        if item is None:
            break
        i, pack = item
        try:
            work_pack(i, pack, store, ws, events.put, worker)
        except OSError as err:  # the store cannot be written (disk full, a file in the way):
            where = err.filename or store.root  # this pack fails with one line, no traceback
            events.put(Event("pack_end", i, worker, failed=[r.run_id for r in pack.runs],
                             message=f"cannot use {where}: {err.strerror or err}"))
    events.put(Event("worker_exit", -1, worker))


def default_workers(device: str, n_packs: int) -> int:
    """One single-threaded worker per CPU core (small packs scale better across processes than
    across intra-op threads), or one per visible GPU; never more than there are packs."""
    if device.startswith("cuda"):
        n = torch.cuda.device_count() if device == "cuda" else 1
    else:
        n = os.cpu_count() or 1
    return max(1, min(n, n_packs))


def worker_death(exitcode: int | None, pack: Pack | None = None) -> str:
    """How a worker process ended, for the pack it left unfinished: 'exit code N', or the signal
    that killed it by name; a SIGKILL (what the kernel's out-of-memory killer sends) with the
    pack's memory estimate (``plan.pack_memory``), which the report of a lost pack left out
    ('exit code -9': no word of a signal or of memory)."""
    if exitcode is None or exitcode >= 0:
        return f"exit code {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = f"signal {-exitcode}"
    if -exitcode == getattr(signal, "SIGXCPU", None):  # a worker's own CPU-time limit: each
        soft = soft_limit("RLIMIT_CPU")  # worker has the command's limit (`ulimit -t`)
        limit = "" if soft is None else f" of {soft} s (ulimit -t {soft})"
        return f"killed by {name}: its CPU time limit{limit} ran out; raise that limit"
    if -exitcode != signal.SIGKILL:
        return f"killed by {name}"
    from .plan import _gb, pack_memory

    need = pack_memory(pack) if pack is not None else 0
    return (f"killed by {name}, as the kernel's out-of-memory killer ends a process"
            + (f"; the pack's memory estimate was {_gb(need)}: if memory ran out, train fewer "
               "packs at once (--workers) or smaller ones (--pack-size)" if need else ""))


def end_workers(procs: list) -> None:
    """End the worker processes ``procs`` (SIGTERM, then SIGKILL for those still alive 10 s
    later) and join them. One stopped (SIGSTOP, a ^Z of it) is continued: its SIGTERM waited for
    a SIGCONT, and Python's exit joins a live worker without a time limit, so `run` sent SIGTERM
    (or Ctrl-C) never ended. The 10 s are counted once for all (each worker that did not end on
    SIGTERM was waited for 10 s after the last: 160 s for `--workers 16`). A second Ctrl-C (or
    SIGTERM) during that wait kills them at once: it broke off the wait before the kill, and
    Python's exit then joined the live workers without a time limit (the command never ended,
    and ignored any further Ctrl-C)."""
    try:
        for p in procs:
            if p.is_alive():
                p.terminate()
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except OSError:  # (gone meanwhile)
                    pass
        _join_all(procs)
    finally:
        for p in procs:
            if p.is_alive():  # (one that does not end on SIGTERM)
                p.kill()
        _join_all(procs)


END_WAIT_S = 10.0  # how long ``end_workers`` waits for its workers after each signal


def _join_all(procs: list) -> None:
    """Join ``procs`` for at most ``END_WAIT_S`` in all."""
    deadline = time.monotonic() + END_WAIT_S
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))


def run_workers(packs: list[tuple[int, Pack]], store: Store, ws: WorkSettings, workers: int,
                emit: EventFn) -> None:
    """N spawned processes pull packs from one queue. A worker that dies mid-pack is reported
    as that pack's end with every run lost (``failed``, message 'worker died ...')."""
    ctx = mp.get_context("spawn")
    with hangups_ignored(STOP_SIGNALS):  # the workers and the resource tracker ignore a hang-up (util)
        tasks, events = ctx.Queue(), ctx.Queue()
        for item in packs:
            tasks.put(item)
        for _ in range(workers):
            tasks.put(None)
        threads = ws.threads or thread_override() or max(1, (os.cpu_count() or 1) // workers)
        procs = []
        for w in range(workers):
            dev = ws.device
            if dev == "cuda" and torch.cuda.device_count() > 1:
                dev = f"cuda:{w % torch.cuda.device_count()}"
            wsw = dataclasses.replace(ws, device=dev)
            p = ctx.Process(target=_worker_main, args=(w, tasks, events, store, wsw, threads,
                                                       os.getpid()), daemon=True)
            p.start()
            procs.append(p)
    in_flight: dict[int, tuple[int, list[str]]] = {}  # worker -> (pack, claimed run ids)
    by_index = dict(packs)
    ended: set[int] = set()  # workers that said goodbye or whose death was handled

    def handle(ev: Event) -> None:
        if ev.kind == "pack_start":
            in_flight[ev.worker] = (ev.pack, ev.run_ids)
        elif ev.kind == "pack_end":
            in_flight.pop(ev.worker, None)
        elif ev.kind == "worker_exit":
            ended.add(ev.worker)
            return
        emit(ev)

    try:
        while len(ended) < workers:
            try:
                handle(events.get(timeout=0.5))
                continue
            except queue_mod.Empty:
                pass
            for w, p in enumerate(procs):
                if w in ended or p.is_alive():
                    continue
                p.join()
                while True:  # events it sent before dying
                    try:
                        handle(events.get(timeout=0.2))
                    except queue_mod.Empty:
                        break
                if w in ended:
                    continue
                ended.add(w)
                if w in in_flight:
                    pack, ids = in_flight.pop(w)
                    emit(Event("pack_end", pack, w, failed=ids,
                               message=f"worker {w} died ({worker_death(p.exitcode, by_index.get(pack))}"
                               ") while training this pack; its runs have no records"))
                else:  # killed before its pack_start left the process (a queue's feeder
                    #    thread sends later): the pack it took is unknown, its death is not
                    emit(Event("worker_lost", -1, w, message=f"worker {w} died ("
                               f"{worker_death(p.exitcode)}) before it reported a pack; the runs it "
                               "took, if any, have no records"))
    finally:
        end_workers(procs)
        # the reports the workers sent that were not read (this process interrupted while they
        # trained on: stopped, then SIGTERM and a late SIGCONT): their runs' records were
        # written, yet the summary said 'trained 0 runs in 0 packs'
        while len(ended) < workers:
            try:
                ev = events.get(timeout=0.2)
            except (queue_mod.Empty, OSError, ValueError, EOFError):
                break
            if ev.kind == "pack_end":
                handle(ev)
        tasks.cancel_join_thread()
        events.cancel_join_thread()
        tracker_revived()  # a tracker killed meanwhile: started again, quietly, before the
        #                    queues' semaphores are forgotten
