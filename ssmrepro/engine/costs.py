"""Stage 3 (engine): a measured cost model for packs — seconds per step of a shape at (E, m).

On a CPU the last-level cache decides whether packing pays: a pack of E members whose activations
outgrow the cache can run slower per run-step than one model at a time, and splitting each step's
batch into micro-batches of m sequences (exact gradient accumulation, ``train.forward_backward``)
brings the working set back into the cache. The planner therefore does not guess: for each shape
(pack key) it times a few steps of candidate (E, m) pairs with the thread count the workers will
use (in CPU time at one thread, so other processes' load does not skew the comparison;
``train.time_steps``), keeps the pair with the most run-steps per second, and caches the
measurements on disk (``$SSMREPRO_CACHE`` or ``~/.cache/ssmrepro/costs.json``, keyed by shape,
E, m, device, threads, torch version, CPU model, code version and scan backend), so a shape is
calibrated once per machine. The steps are timed on the backend the workers will use
(``--backend``: torch or the CUDA kernels, ``kernels.backend.scan_backend``).

One model at a time (E = 1, whole batch) is always a candidate and is measured first, and a
larger pack must measure ``MIN_GAIN`` (10%) more run-steps per second than the choice so far to
replace it, so the choice is not slower than one at a time by more than the measuring noise.
Calibration is skipped where it cannot pay for itself: when the shape's whole training would take
less than ``min_train_s`` at the E = 1 rate, or when the calibration budget (``budget`` × that
training time) is spent.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..spec import SpecError
from ..sweep import CODE_VERSION
from ..util import (
    atomic_write_text,
    cpu_model,
    env_path,
    expand_user,
    flush_denormals,
    folder_lock,
    os_reason,
    read_small,
    source_tree_problem,
    stray_name,
    tune_malloc,
)

COST_VERSION = 3  # bump when the step being timed (or how) changes; 2: CPU time at 1 thread;
# 3: narrow_scan, the fused read-out + loss, denormals flushed
MAX_CACHE_BYTES = 16 << 20  # a few hundred bytes per measured shape
# A larger pack replaces a smaller choice (one at a time first) only when it measures at least
# this factor more run-steps per second: a calibration is the median of 3 steps, and a loaded
# machine spreads single steps by 5-10%, so a pack measured 1% faster (full Mamba at E = 2) may
# well be slower; ties go to the smaller pack.
MIN_GAIN = 1.10


CACHE_ENV = "SSMREPRO_CACHE"
CACHE_LOCK_WAIT_S = 10.0  # a save holds the lock for a read and a write of a small file


def cache_file() -> Path:
    """The cost cache: in ``$SSMREPRO_CACHE`` (a folder), else ``~/.cache/ssmrepro``. A folder
    the variable names that cannot hold it is refused (SpecError, exit 2): a file there or a
    folder that cannot be written was ignored without a word (every run measured again), and a
    relative path made a cache per current folder; so is the project folder or a folder among its
    sources (``util.source_tree_problem``). A blank one is unset (``util.env_path``); an
    unwritable default folder (a read-only home) only re-measures."""
    raw = os.environ.get(CACHE_ENV, "")
    folder = env_path(CACHE_ENV)
    if folder is None:  # unset or blank (blank is unset, as SSMREPRO_ROOT and SSMREPRO_DATA)
        try:
            return expand_user("~/.cache/ssmrepro/costs.json")
        except OSError as err:  # no home folder: a RuntimeError traceback in every `run`
            why = err.strerror.split(";")[0]
            raise SpecError([f"the planner's cost cache is ~/.cache/ssmrepro, and {why}: set HOME, "
                             f"or {CACHE_ENV} to a folder (or pass --no-calibrate; with --dry-run, "
                             "--no-estimate)"]) from None
    odd = stray_name(folder)
    if odd is not None:  # a cache folder 'ssmrepro ' beside the one meant, made without a word
        raise SpecError([f"{CACHE_ENV}={raw!r}: {odd}"])
    if not folder.is_absolute():
        raise SpecError([f"{CACHE_ENV}={raw!r}: a relative path (each current folder would have "
                         "its own cache); give an absolute folder, e.g. ~/.cache/ssmrepro"])
    why = source_tree_problem(folder, "cache")
    if why:  # `SSMREPRO_CACHE=<project>/docs/c run ...` made docs/c and its costs.json there
        raise SpecError([f"{CACHE_ENV}={raw!r}: {why}"])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:  # (os_reason: a symbolic link to nothing said 'file exists')
        why = "not a folder" if folder.exists() and not folder.is_dir() else os_reason(err)
        raise SpecError([f"{CACHE_ENV}={raw!r}: cannot hold the planner's cost cache ({why}); "
                         "give a folder that can be written, or unset it"]) from None
    return folder / "costs.json"


@dataclass(frozen=True)
class Choice:
    size: int  # E, members per pack
    micro_batch: int | None  # sequences per chunk (None: the whole batch)
    step_s: float | None  # measured seconds per step of such a pack (None: not measured)
    how: str  # "measured" | "memory estimate" | "given"

    @property
    def run_steps_per_s(self) -> float | None:
        return None if not self.step_s else self.size / self.step_s


@dataclass
class CostModel:
    """Times (E, m) candidates of a shape; see the module docstring."""

    device: str = "cpu"
    threads: int = 1
    backend: str = "torch"  # the scan backend the workers use (torch | cuda): timed with it
    budget: float = 0.05  # share of the shape's estimated training time spent calibrating
    min_train_s: float = 120.0  # below this, calibration cannot pay for itself
    n_steps: int = 2
    path: Path | None = None
    log: list[str] = field(default_factory=list)
    deadline: float | None = None  # time.perf_counter() after which no shape is calibrated
    # (a dry run's bound: 5% of a paper profile's training time is hours of measuring)
    uncalibrated: int = 0  # shapes left at the memory estimate because the deadline passed
    _cache: dict | None = None

    # ------------------------------------------------------------------ cache
    def _file(self) -> Path:
        return self.path or cache_file()

    def _load(self) -> dict:
        """The cached step times; a cache that cannot be read (garbage, a FIFO or a link to
        /dev/zero, JSON nested too deeply) is empty, and an entry that is not a positive finite
        number of seconds is dropped (it is measured again)."""
        if self._cache is None:
            try:
                data = json.loads(read_small(self._file(), MAX_CACHE_BYTES, follow_links=True))
            except (OSError, ValueError, RecursionError):
                data = {}
            self._cache = {k: float(v) for k, v in data.items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool)
                           and math.isfinite(v) and v > 0} if isinstance(data, dict) else {}
        return self._cache

    def _key(self, shape: str, E: int, m: int | None) -> str:
        """The cache key of a measurement. The torch backend's keys are those written before the
        backend was part of the key (every step was timed on it then: the planner's process
        never set another), so they are still found; the CUDA kernels' carry ``|backend=cuda``
        (a timing of one backend was reused for the other)."""
        parts = [COST_VERSION, CODE_VERSION, shape, E, m, self.device, self.threads,
                 torch.__version__, cpu_model()]
        if self.backend != "torch":
            parts.append(f"backend={self.backend}")
        return "|".join(map(str, parts))

    def _save(self) -> None:
        """Write the cache, with what another process wrote there since it was read (two `run`s
        calibrating at once: each wrote the file as it had read it plus its own measurements,
        and the later one's write dropped the other's, measured again by the next run). The
        read and the write are one turn of a lock on the cache's folder (``util.folder_lock``):
        three processes saving at once each read the file before the others wrote it, and the
        last write dropped their newest entries."""
        mine, self._cache = self._load(), None
        with folder_lock(self._file().parent, "writing the planner's cost cache in",
                         wait_s=CACHE_LOCK_WAIT_S):
            self._cache = {**self._load(), **mine}
            try:
                atomic_write_text(self._file(), json.dumps(self._cache, indent=0,
                                                           sort_keys=True))
            except OSError:  # a read-only home: the model still works, it just re-measures
                pass

    # ------------------------------------------------------------------ measuring
    def step_seconds(self, runs: list, m: int | None) -> float:
        """Seconds per training step of a pack of these runs (E = len(runs)) in chunks of m."""
        key = self._key(runs[0].pack_key(), len(runs), m)
        cache = self._load()
        if key not in cache:
            cache[key] = self.fresh_seconds(runs, m)
            self._save()
        return float(cache[key])

    def fresh_seconds(self, runs: list, m: int | None) -> float:
        """``step_seconds`` measured now, not from the cache (and not stored)."""
        from ..kernels.backend import scan_backend
        from ..train import time_steps

        tune_malloc()  # time the step as the workers will run it
        flush_denormals()
        old = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            with scan_backend(self.backend):  # the planner's process timed its own (torch)
                return time_steps(runs, self.device, self.n_steps, micro_batch=m)
        finally:
            torch.set_num_threads(old)

    def confirmed(self, runs: list, best: Choice) -> Choice:
        """A pack chosen over one at a time, re-timed back to back with one at a time (both
        fresh): kept only if it still wins by ``MIN_GAIN``. Calibration times E = 1 first and
        the packs later, so a change of load in between (the planner shares the machine) can
        make a pack look faster than it is (full Mamba E = 4: x1.15 in calibration, x1.01 in an
        interleaved benchmark)."""
        group = (runs * best.size)[: best.size]
        one = self.fresh_seconds(runs[:1], None)
        pack = self.fresh_seconds(group, best.micro_batch)
        if best.size / pack > MIN_GAIN / one:
            return best
        return Choice(1, None, one, "measured")

    def choose(self, runs: list, cap: int, size: int | None = None) -> Choice:
        """The (E, m) with the most run-steps per second for this group of same-shape runs.

        ``cap``: the largest E memory allows; ``size``: E given by the user (only m is chosen).
        """
        from ..train import mixes_batch_config

        n, B = len(runs), runs[0].train.batch_size
        steps = sum(r.train.total_steps for r in runs)  # the shape's run-steps to train
        # a given size times the pack it trains: min(size, n) runs (a pack of 64 repeats timed
        # for a shape of 2 runs took 32x their memory, and the planner reported E=64)
        sizes = [min(size, n)] if size else [e for e in (1, 2, 4, 8, 16, 32, 64, 128, 256)
                                             if e <= min(n, cap)] or [1]
        micro = [None] + ([] if mixes_batch_config(runs[0]) else
                          [m for m in (B // 2, B // 4, B // 8) if m >= 2])
        fallback = Choice(size or min(n, cap), None, None, "given" if size else "memory estimate")
        if steps < 50:
            return fallback
        t0 = time.perf_counter()
        if self.deadline is not None and t0 > self.deadline:
            self.uncalibrated += 1
            return fallback
        base = self.step_seconds(runs[:1], None)  # one model at a time, whole batch
        if steps * base < self.min_train_s:
            return fallback  # the whole shape trains in a couple of minutes: not worth it
        allowed = self.budget * steps * base
        if self.deadline is not None:
            allowed = min(allowed, max(0.0, self.deadline - t0))
        best = None if size else Choice(1, None, base, "measured")
        for E in sizes:
            group = (runs * E)[:E]  # repeats stand in where a shape has fewer runs than E
            best_E = None
            for m in micro:
                if E == 1 and m is None:
                    c = Choice(1, None, base, "measured")
                elif time.perf_counter() - t0 > allowed and best_E is not None:
                    break
                else:
                    c = Choice(E, m, self.step_seconds(group, m), "measured")
                if best_E is None or c.run_steps_per_s > best_E.run_steps_per_s:
                    best_E = c
                elif m is not None:
                    break  # a smaller chunk again will not help
            if best is None or best_E.run_steps_per_s > MIN_GAIN * best.run_steps_per_s:
                best = best_E
            elif best_E.run_steps_per_s < 0.8 * best.run_steps_per_s:
                break  # bigger packs only get slower from here
            if time.perf_counter() - t0 > allowed:
                break
        dropped = None  # the pack calibration chose, dropped when re-timed (``confirmed``)
        if not size and best.size > 1:
            best, dropped = self.confirmed(runs, best), best
            dropped = None if best is dropped else dropped
        # each rate beside its source: a pack dropped when re-timed printed the re-timed E = 1
        # rate as the choice beside calibration's 'one at a time', two rates of one setting
        if dropped is not None:
            rates = (f"{best.run_steps_per_s:.2f} run-steps/s (one at a time, re-timed); "
                     f"E={dropped.size}, micro_batch={dropped.micro_batch} (calibration: "
                     f"{dropped.run_steps_per_s:.2f} run-steps/s, one at a time {1 / base:.2f}) "
                     f"did not win by {MIN_GAIN - 1:.0%} re-timed back to back with it")
        elif best.size == 1:
            rates = f"{best.run_steps_per_s:.2f} run-steps/s (one at a time)"
        else:
            rates = f"{best.run_steps_per_s:.2f} run-steps/s (one at a time {1 / base:.2f})"
        self.log.append(f"shape {runs[0].pack_key()}: E={best.size}, micro_batch="
                        f"{best.micro_batch}: {rates}; calibrated in "
                        f"{time.perf_counter() - t0:.1f}s")
        return best
