"""Stage 3a: execute packs on this machine — in process, or in N worker processes.

Every worker walks the same pack list and claims runs before training them (``Store.claim``), so
any number of workers, ``ssmrepro run`` processes or machines sharing the results folder never train
a run twice. Killing a worker loses at most the packs it had in flight; a re-run picks them up.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import queue as queue_mod
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..kernels.backend import kernel_usage, reset_kernel_usage, set_scan_backend
from ..store import Store
from ..train import train_pack
from .plan import Pack, plan

_COMMIT: str | None = None


def git_commit() -> str | None:
    global _COMMIT
    if _COMMIT is None:
        try:
            _COMMIT = subprocess.run(
                ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                cwd=Path(__file__).resolve().parents[2], timeout=5,
            ).stdout.strip() or ""
        except (OSError, subprocess.SubprocessError):
            _COMMIT = ""
    return _COMMIT or None


def make_record(run, result: dict, device: str, backend: str,
                kernels: dict[str, str] | None = None) -> dict:
    """One run's record; ``kernels`` = {mixer class: kernel path(s) it ran} (kernels.backend)."""
    return {
        "run_id": run.run_id,
        "spec_id": run.spec_id,
        "profile": run.profile,
        "label": run.label,
        "coords": run.coords,
        "seed": run.seed,
        "config": run.config(),
        **result,
        "backend": backend,
        "kernels": kernels or {},
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "commit": git_commit(),
        "finished_at": time.time(),
    }


@dataclass
class Event:
    kind: str  # pack_start | pack_done | pack_failed | progress | skipped
    pack: int
    n_runs: int = 0
    step: int = 0
    total: int = 0
    message: str = ""
    run_ids: list[str] = field(default_factory=list)


EventFn = Callable[[Event], None]


def work(packs: list[Pack], store: Store, device: str, backend: str, analyses: tuple[str, ...],
         on_event: EventFn) -> None:
    """Claim and train packs in order; write one record per run."""
    set_scan_backend(backend)  # per process: the models' scans and convs dispatch on it
    for i, pack in enumerate(packs):
        mine = [r for r in pack.runs if store.claim(r.run_id)]
        if not mine:
            on_event(Event("skipped", i, len(pack.runs)))
            continue
        ids = [r.run_id for r in mine]
        on_event(Event("pack_start", i, len(mine), run_ids=ids))
        reset_kernel_usage()
        try:
            results = train_pack(
                mine,
                device=device,
                progress=lambda s, t, a, i=i, n=len(mine): on_event(Event("progress", i, n, s, t)),
                heartbeat=lambda ids=ids: store.heartbeat(ids),
                analyses=analyses,
            )
            for r, res in zip(mine, results):
                store.write(make_record(r, res, device, backend, kernel_usage()))
            on_event(Event("pack_done", i, len(mine), run_ids=ids))
        except Exception as err:  # a crashing pack is recorded, the sweep goes on
            msg = "".join(traceback.format_exception_only(type(err), err)).strip()
            for r in mine:
                store.write(make_record(r, {"status": "error", "error": msg,
                                            "traceback": traceback.format_exc()}, device, backend))
            on_event(Event("pack_failed", i, len(mine), message=msg, run_ids=ids))
        finally:
            for r in mine:
                store.release(r.run_id)


def _die_with_parent(parent: int) -> None:
    """Linux: ask the kernel to SIGKILL this worker when its parent dies (a killed sweep must
    not leave orphans training on); exit at once if the parent is already gone."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # died while this worker was starting
        os._exit(1)


def default_workers(device: str, n_packs: int) -> int:
    """One single-threaded worker per CPU core (small packs scale better across processes than
    across intra-op threads), or one per visible GPU; never more than there are packs."""
    if device.startswith("cuda"):
        n = torch.cuda.device_count() if device == "cuda" else 1
    else:
        n = os.cpu_count() or 1
    return max(1, min(n, n_packs))


def _worker_main(spec_path: str, profile: str, root: str, device: str, backend: str,
                 pack_size: int | None, threads: int, q, parent: int) -> None:
    _die_with_parent(parent)
    from ..spec import load_spec
    from ..sweep import expand, unique_runs

    torch.set_num_threads(threads)
    from . import open_store

    spec = load_spec(spec_path)
    runs = expand(spec, profile)
    store = open_store(spec, Path(root).parents[1])
    packs = plan([r for r in unique_runs(runs) if not store.is_done(r.run_id)], pack_size, device)
    work(packs, store, device, backend, tuple(spec.analysis), q.put)


def run_workers(spec, profile: str, store: Store, runs: list, device: str, backend: str,
                pack_size: int | None, workers: int, on_event: EventFn) -> None:
    """Run ``workers`` processes on the same spec; forward their events to ``on_event``."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    threads = max(1, (os.cpu_count() or 1) // workers)
    procs = []
    for w in range(workers):
        dev = device
        if device == "cuda" and torch.cuda.device_count() > 1:
            dev = f"cuda:{w % torch.cuda.device_count()}"
        p = ctx.Process(target=_worker_main, args=(str(spec.path), profile, str(store.root), dev,
                                                   backend, pack_size, threads, q, os.getpid()))
        p.start()
        procs.append(p)
    while any(p.is_alive() for p in procs) or not q.empty():
        try:
            on_event(q.get(timeout=0.5))
        except queue_mod.Empty:
            pass
    for p in procs:
        p.join()
