"""Tool (bench): interleaved, repeated timing of contenders on two clocks, and the machine's peak.

Every benchmark of ``ssmrepro bench`` times its contenders with :func:`interleaved`: after a
warm-up call of each, round r measures every contender once, in an order rotated by r (so neither
machine noise nor "who runs after whom" favours one). A measurement is a
``torch.utils.benchmark.Timer`` run of ``inner`` calls with the engine's thread count (one
intra-op thread per worker; the Timer sets it), giving the wall clock, and the process CPU clock
(``time.process_time``: user + system time of this process, all its threads) around it. On a
shared machine the CPU clock is the robust number (time spent waiting for a core does not count;
page faults do, as system time); with one thread the two agree on an idle machine.

:func:`matmul_peak` measures the single-thread float32 GEMM rate (GFLOP/s) of this machine, the
reference for "fraction of peak" figures; :func:`copy_bandwidth` the single-thread memory
bandwidth (GB/s, bytes read + written by a large copy), the slope of the roofline.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch.utils.benchmark import Timer

from ..util import tune_malloc  # noqa: F401 (re-exported for the benchmarks)


@dataclass(frozen=True)
class Stats:
    """Seconds per call of one contender: medians with min and max on both clocks."""

    n: int
    wall_median: float
    wall_min: float
    wall_max: float
    cpu_median: float
    cpu_min: float
    cpu_max: float

    @classmethod
    def of(cls, wall: list[float], cpu: list[float]) -> Stats:
        return cls(len(wall), statistics.median(wall), min(wall), max(wall),
                   statistics.median(cpu), min(cpu), max(cpu))

    def ms(self) -> dict[str, float]:
        """The same numbers in milliseconds (rounded to µs), for JSON records."""
        return {k: (v if k == "n" else round(1e3 * v, 3)) for k, v in asdict(self).items()}

    def fmt(self) -> str:
        """'cpu 12.3 ms [12.0-13.1] wall 12.5 ms [...]'."""
        c = [1e3 * self.cpu_median, 1e3 * self.cpu_min, 1e3 * self.cpu_max]
        w = [1e3 * self.wall_median, 1e3 * self.wall_min, 1e3 * self.wall_max]
        return f"cpu {c[0]:8.1f} ms [{c[1]:.1f}-{c[2]:.1f}]  wall {w[0]:8.1f} ms [{w[1]:.1f}-{w[2]:.1f}]"


class _TwoClocks:
    """The Timer's clock (wall, ``perf_counter``) that also reads the CPU clock at each call: the
    last two readings bracket the Timer's timed loop (its warm-up calls come before)."""

    def __init__(self) -> None:
        self.cpu: list[float] = []

    def __call__(self) -> float:
        self.cpu.append(time.process_time())
        return time.perf_counter()

    def last_interval(self) -> float:
        return self.cpu[-1] - self.cpu[-2]


def interleaved(fns: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1,
                inner: int = 1, threads: int = 1) -> dict[str, Stats]:
    """Time each callable ``repeats`` times, contenders interleaved (rotated order per round).

    Each sample is the mean over ``inner`` back-to-back calls (use inner > 1 for sub-ms work), run
    by a ``torch.utils.benchmark.Timer`` with ``threads`` intra-op threads (the Timer itself makes
    max(2, inner // 100) untimed warm-up calls before each sample; ``warmup`` adds whole rounds).
    """
    names = list(fns)
    clocks = {k: _TwoClocks() for k in names}
    timers = {k: Timer(stmt="f()", globals={"f": fns[k]}, num_threads=threads, label=k,
                       timer=clocks[k]) for k in names}
    for _ in range(warmup):
        for k in names:
            timers[k].timeit(1)
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for k in order:
            m = timers[k].timeit(inner)
            wall[k].append(m.mean)
            cpu[k].append(clocks[k].last_interval() / inner)
    return {k: Stats.of(wall[k], cpu[k]) for k in names}


def refuse_repeats(parser, **given) -> None:
    """A usage error (exit 2) for a value given twice in a list option (``--L 64 64`` timed the
    case twice and wrote two rows of one identity to the table and the JSON record); ``given``
    maps an option's name (``E`` for ``--E``) to its parsed list (or None)."""
    for opt, values in given.items():
        values = list(values or [])
        twice = [v for i, v in enumerate(values) if v in values[:i]]
        if twice:
            parser.error(f"argument --{opt}: {twice[0]} given twice (each is measured once)")


class Values(argparse.Action):
    """The ``action`` of a list option (``nargs="+"`` or ``"*"``) whose repeats add up: `--L 64
    --L 1024` is `--L 64 1024` (argparse kept the last: L 1024 alone was measured and 64 dropped
    without a word, also `--kernels diag --kernels ssd`, `--E 1 --E 4`); the default is
    replaced, not added to. A value given twice is then ``refuse_repeats``'."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        before = getattr(namespace, self.dest, None)
        before = [] if before is None or before is self.default else list(before)
        setattr(namespace, self.dest, before + list(values))


def bounded(lo: int, hi: int):
    """An argparse ``type``: a whole number from ``lo`` to ``hi`` (usage error otherwise; a
    negative length or zero threads was a traceback, a length of 10**9 an allocation of
    terabytes)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is not in {lo}..{hi}")
        return v

    parse.__name__ = "int"
    return parse


def bounded_float(lo: float, hi: float, what: str):
    """An argparse ``type``: a finite number above ``lo`` and at most ``hi``, ``what`` naming it
    in the usage error (NaN passed every comparison, 0 and inf were taken as given)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
        if not (math.isfinite(v) and lo < v <= hi):
            raise argparse.ArgumentTypeError(f"{text} is not {what} above {lo:g} and at most "
                                             f"{hi:g}")
        return v

    parse.__name__ = "float"
    return parse


def record_file(text: str):
    """An argparse ``type`` of a file to write (`bench scans --json`, `bench step --json`), read
    as the CLI's ``--file`` (``util.named_path``): `--json -` wrote a file named '-' into the
    current folder, `--json out/` (no folder out) a file named `out`, and a name with a line
    break or a zero-width space a file of that name, each after the whole measuring."""
    from ..util import named_path

    try:
        return named_path(text, file=True)
    except OSError as err:  # '~/x' where the home folder is unknown
        raise argparse.ArgumentTypeError(err.strerror) from None
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


MAX_BENCH_ELEMENTS = 1 << 28  # floats of a benchmark's largest tensor (1 GiB in float32)


def one_thread() -> int:
    """Set one intra-op thread (as every training worker); returns the previous count."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    return old


def cpu_clock(device: str = "cpu") -> bool:
    """Whether a benchmark's rates come from the process CPU clock: on the CPU with one intra-op
    thread (robust to other processes on the cores). With several threads their CPU times add
    up (two busy threads made a step look twice as long: run-steps/s and GFLOP/s half of what
    they were), and a GPU's work is no CPU time: the wall clock then."""
    return not device.startswith("cuda") and torch.get_num_threads() == 1


def matmul_peak(n: int = 1024, seconds: float = 0.3, repeats: int = 5, device: str = "cpu"
                ) -> float:
    """Best measured float32 GEMM rate of an n×n×n product, GFLOP/s, on ``device``.

    On the CPU: the current thread count, timed on the process CPU clock with one thread, the
    wall clock with several (:func:`cpu_clock`). On a GPU: a 4096-cube product (1024 leaves
    most of the chip idle), wall clock between synchronisations, with torch's own float32
    matmul setting (what the benchmarked models use; TF32 off by default).
    """
    gpu = device.startswith("cuda")
    if gpu:
        n = max(n, 4096)
    clock = time.process_time if cpu_clock(device) else time.perf_counter

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize(device)

    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    c = torch.empty(n, n, device=device)
    torch.mm(a, b, out=c)
    sync()
    flop = 2.0 * n**3
    t0 = clock()
    torch.mm(a, b, out=c)
    sync()
    reps = max(1, int(seconds / max(1e-4, clock() - t0)))
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        for _ in range(reps):
            torch.mm(a, b, out=c)
        sync()
        best = min(best, (clock() - t0) / reps)
    return flop / best / 1e9


def copy_bandwidth(mib: int = 256, repeats: int = 5, device: str = "cpu") -> float:
    """Best measured bandwidth of a ``mib`` MiB float32 copy (read + write), GB/s, on
    ``device``; the buffers are far larger than any cache. CPU: the current thread count, CPU
    clock with one thread, wall clock with several (:func:`cpu_clock`); GPU: 1 GiB buffers
    (256 MiB fit in an H100's 50 MB L2 only 5 times over), wall clock between
    synchronisations."""
    gpu = device.startswith("cuda")
    if gpu:
        mib = max(mib, 1024)
    clock = time.process_time if cpu_clock(device) else time.perf_counter
    n = mib * 2**20 // 4
    a, b = torch.ones(n, device=device), torch.empty(n, device=device)
    b.copy_(a)
    best = float("inf")
    for _ in range(repeats):
        if gpu:
            torch.cuda.synchronize(device)
        t0 = clock()
        b.copy_(a)
        if gpu:
            torch.cuda.synchronize(device)
        best = min(best, clock() - t0)
    return 2.0 * a.numel() * 4 / best / 1e9
