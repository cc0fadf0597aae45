#!/usr/bin/env python
"""Benchmark the sequential reference scans against the fast ones (forward + backward, CPU).

For each L, times in the same process, interleaved repeat by repeat (so machine noise hits both
alike), after warm-up:

* ``diag``:      diag_scan_ref  vs diag_scan        on la, b: (Bt, L, D, N)
* ``selective``: selective_scan_ref vs selective_scan (input-dependent B, C: (Bt, L, N), D skip)
* ``ssd``:       ssd_ref vs ssd                     on x: (Bt, L, H, P), B, C: (Bt, L, H, N)

Prints a table (median and min ms; speed-ups of the medians and of the minima: on a shared
machine the minima are the better estimate of uncontended speed) and optionally writes JSON with
the CPU model, torch version and thread count.

Example::

    .venv/bin/python scripts/bench_scans.py                       # L = 64 1024 4096, 2 threads
    .venv/bin/python scripts/bench_scans.py --threads 1 --clock cpu   # contention-robust
    .venv/bin/python scripts/bench_scans.py --batch 4 --d 16 --n 4    # small per-step state
    .venv/bin/python scripts/bench_scans.py --L 1024 --kernels diag --chunk 32 --json out.json

Measured on the 2-core AMD EPYC VM (torch 2.13 CPU, float32, fwd+bwd, idle machine, 2 threads,
median ms ref -> fast): diag Bt=16 S=(32,8): L=1024 67 -> 42 (1.6x), L=4096 293 -> 194 (1.5x);
diag Bt=4 S=(16,4): L=1024 21 -> 3.8 (5.4x), L=4096 90 -> 13 (7.1x); ssd Bt=16 H=4 P=N=8:
L=1024 227 -> 34 (6.7x), L=4096 1098 -> 170 (6.5x). With other processes on the cores,
2-thread timings are unreliable (thread-barrier stalls); compare minima or use --threads 1.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ssmrepro.kernels.scan import (  # noqa: E402
    default_chunk,
    diag_scan,
    diag_scan_ref,
    selective_scan,
    selective_scan_ref,
)
from ssmrepro.kernels.ssd import default_ssd_chunk, ssd, ssd_ref  # noqa: E402


def cpu_model() -> str:
    from ssmrepro.bench import cpu_name

    return cpu_name()


def tune_malloc() -> bool:
    """glibc only: serve big blocks from the heap and never trim it (avoids page-fault storms).

    Process-wide side effect; only used with ``--tune-malloc``.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = libc.mallopt(m_mmap_threshold, 1 << 30) == 1
    return ok and libc.mallopt(m_trim_threshold, 1 << 31) == 1


def make_case(kernel: str, L: int, args, dtype: torch.dtype):
    """Returns (inputs requiring grad, ref fn, fast fn, description)."""
    g = torch.Generator().manual_seed(0)
    Bt, D, N = args.batch, args.d, args.n
    rand = lambda *s: torch.rand(*s, generator=g, dtype=dtype)  # noqa: E731
    randn = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    if kernel == "diag":
        la = -0.5 * rand(Bt, L, D, N)  # (Bt, L, D, N)
        b = randn(Bt, L, D, N)  # (Bt, L, D, N)
        fast = lambda la, b: diag_scan(la, b, chunk=args.chunk)  # noqa: E731
        q = args.chunk or default_chunk(L, Bt * D * N)
        return [la, b], diag_scan_ref, fast, f"Bt={Bt} S=({D},{N}) Q={q}"
    if kernel == "selective":
        u = randn(Bt, L, D)  # (Bt, L, D)
        delta = 0.01 + 0.1 * rand(Bt, L, D)  # (Bt, L, D)
        A = -torch.arange(1, N + 1, dtype=dtype).repeat(D, 1)  # (D, N) S4D-real init
        B, C = randn(Bt, L, N), randn(Bt, L, N)  # (Bt, L, N)
        Dskip = randn(D)  # (D,)
        inputs = [u, delta, A, B, C, Dskip]
        fast = lambda *t: selective_scan(*t, chunk=args.chunk)  # noqa: E731
        q = args.chunk or default_chunk(L, Bt * D * N)
        return inputs, selective_scan_ref, fast, f"Bt={Bt} D={D} N={N} Q={q}"
    if kernel == "ssd":
        H, P = args.heads, D // args.heads
        x = randn(Bt, L, H, P)  # (Bt, L, H, P)
        a = -0.5 * rand(Bt, L, H)  # (Bt, L, H)
        B, C = randn(Bt, L, H, N), randn(Bt, L, H, N)  # (Bt, L, H, N)
        fast = lambda *t: ssd(*t, chunk=args.ssd_chunk)  # noqa: E731
        q = args.ssd_chunk or default_ssd_chunk(L)
        return [x, a, B, C], ssd_ref, fast, f"Bt={Bt} H={H} P={P} N={N} Q={q}"
    raise ValueError(kernel)


def time_pair(inputs, fns, warmup: int, repeats: int, clock=time.perf_counter) -> list[list[float]]:
    """Forward + backward time (s) of each fn on ``clock``, interleaved, after warm-up."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    with torch.no_grad():
        grad_out = torch.randn_like(fns[0](*leaves))

    def step(fn):
        out = fn(*leaves)
        out.backward(grad_out)
        for t in leaves:
            t.grad = None

    times: list[list[float]] = [[] for _ in fns]
    for r in range(warmup + repeats):
        for i, fn in enumerate(fns):
            t0 = clock()
            step(fn)
            if r >= warmup:
                times[i].append(clock() - t0)
    return times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--L", type=int, nargs="+", default=[64, 1024, 4096])
    p.add_argument(
        "--kernels",
        nargs="+",
        default=["diag", "selective", "ssd"],
        choices=["diag", "selective", "ssd"],
    )
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--d", type=int, default=32, help="channels D (ssd: H * P)")
    p.add_argument("--n", type=int, default=8, help="state size N")
    p.add_argument("--heads", type=int, default=4, help="ssd heads H (P = D / H)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--chunk", type=int, default=None, help="diag/selective chunk (default auto)")
    p.add_argument("--ssd-chunk", type=int, default=None, help="ssd chunk (default auto)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument(
        "--tune-malloc",
        action="store_true",
        help="glibc mallopt: no mmap / no trim for big blocks (process-wide)",
    )
    p.add_argument(
        "--clock",
        default="wall",
        choices=["wall", "cpu"],
        help="wall: perf_counter; cpu: process_time (CPU seconds of all threads; with --threads 1 "
        "a contention-robust estimate on a shared machine)",
    )
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")
    args = p.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    tuned = tune_malloc() if args.tune_malloc else False
    dtype = getattr(torch, args.dtype)
    env = {
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "dtype": args.dtype,
        "malloc_tuned": tuned,
        "pass": "forward+backward",
        "clock": args.clock,
    }
    print(
        f"# {env['cpu']} | torch {env['torch']} | {env['threads']} threads | {args.dtype} | "
        f"fwd+bwd | {args.clock} clock | malloc tuned: {tuned}"
    )
    header = (
        f"{'kernel':<10} {'L':>6}  {'shape':<26} {'ref med ms':>10} {'ref min':>8} "
        f"{'fast med ms':>11} {'fast min':>8} {'x (med)':>8} {'x (min)':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for kernel in args.kernels:
        for L in args.L:
            inputs, ref, fast, desc = make_case(kernel, L, args, dtype)
            clock = time.perf_counter if args.clock == "wall" else time.process_time
            t_ref, t_fast = time_pair(inputs, [ref, fast], args.warmup, args.repeats, clock)
            row = {
                "kernel": kernel,
                "L": L,
                "shape": desc,
                "ref_ms_median": 1e3 * statistics.median(t_ref),
                "ref_ms_min": 1e3 * min(t_ref),
                "fast_ms_median": 1e3 * statistics.median(t_fast),
                "fast_ms_min": 1e3 * min(t_fast),
            }
            row["speedup"] = row["ref_ms_median"] / row["fast_ms_median"]
            row["speedup_min"] = row["ref_ms_min"] / row["fast_ms_min"]
            rows.append(row)
            print(
                f"{kernel:<10} {L:>6}  {desc:<26} {row['ref_ms_median']:>10.1f} "
                f"{row['ref_ms_min']:>8.1f} {row['fast_ms_median']:>11.1f} "
                f"{row['fast_ms_min']:>8.1f} {row['speedup']:>7.2f}x {row['speedup_min']:>7.2f}x",
                flush=True,
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "env": env,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "results": rows,
        }
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
