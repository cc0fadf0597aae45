"""Tool (bench): the sequential reference scans against the fast ones (forward + backward, CPU).

For each L, times in the same process, interleaved repeat by repeat (so machine noise hits all
alike), after warm-up, the reference and every fast formulation of a kernel (one row each):

* ``diag``:      diag_scan_ref vs ``chunked`` (diag_scan, two-pass chunked, Q = default_chunk)
                 and ``blocked`` (diag_scan's CPU default: inplace.diag_scan_blocked), on
                 la, b: (Bt, L, D, N)
* ``selective``: selective_scan_ref vs ``chunked`` (selective_scan on diag_scan) and ``fused``
                 (inplace.selective_scan_fused, the kernel the models run); B, C: (Bt, L, 1, N)
* ``ssd``:       ssd_ref vs ``chunked`` (ssd) on x: (Bt, L, H, P), B, C: (Bt, L, H, N)

Prints a table (median and min ms; speed-ups of the medians and of the minima: on a shared
machine the minima are the better estimate of uncontended speed) and optionally writes JSON with
the CPU model, torch version and thread count.

Example::

    ssmrepro bench scans                       # L = 64 1024 4096, 2 threads
    ssmrepro bench scans --threads 1 --clock cpu   # contention-robust
    ssmrepro bench scans --batch 4 --d 16 --n 4    # small per-step state
    ssmrepro bench scans --L 1024 --kernels diag --chunk 32 --json out.json

Committed measurements (idle 2-core AMD EPYC VM, torch 2.13 CPU, float32, fwd+bwd, 2 threads,
wall clock; speed-up of medians / of minima over the sequential reference)::

    ssmrepro bench scans --json results/bench/scans-cpu.json
    ssmrepro bench scans --kernels selective diag --batch 8 --d 128 --n 16 \
        --json results/bench/scans-cpu-large.json

    selective Bt=16 D=32 N=8:   L=64 fused 2.4x/2.5x  L=1024 fused 2.7x/2.2x (chunked 2.1x/1.8x)
                                L=4096 fused 5.5x/6.7x (chunked 1.7x/1.8x)
    selective Bt=8 D=128 N=16:  L=1024 fused 8.5x/8.9x  L=4096 fused 7.9x/7.6x (chunked 1.3-2.2x)
    diag Bt=16 S=(32,8):        L=1024 blocked 3.1x/2.7x, L=4096 2.9x/3.1x (two-pass ~1.6x)
    diag Bt=8 S=(128,16):       L=1024 blocked 2.4x/2.1x, L=4096 2.8x/2.9x (two-pass ~0.9-1.0x)
    ssd Bt=16 H=4 P=N=8:        L=64 4.5x/4.9x, L=1024 10.5x/10.0x, L=4096 6.3x/6.7x

With one thread and the CPU clock (``--threads 1 --clock cpu``, on a loaded machine) the fused
selective scan measured 4.1x/3.4x at L = 1024 and 7.2x/6.3x at L = 4096 for the first shape.
With other processes on the cores, 2-thread timings are unreliable (thread-barrier stalls);
compare minima or use --threads 1.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from ..kernels.inplace import block_len, selective_scan_fused
from ..kernels.scan import (
    default_chunk,
    diag_scan,
    diag_scan_ref,
    selective_scan,
    selective_scan_ref,
)
from ..kernels.ssd import default_ssd_chunk, ssd, ssd_ref


def cpu_model() -> str:
    from .packs import cpu_name

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
    """Returns (inputs requiring grad, ref fn, {name: fast fn}, description)."""
    g = torch.Generator().manual_seed(0)
    Bt, D, N = args.batch, args.d, args.n
    rand = lambda *s: torch.rand(*s, generator=g, dtype=dtype)  # noqa: E731
    randn = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    if kernel == "diag":
        la = -0.5 * rand(Bt, L, D, N)  # (Bt, L, D, N)
        b = randn(Bt, L, D, N)  # (Bt, L, D, N)
        chunked = lambda la, b: diag_scan(la, b, chunk=args.chunk or default_chunk(L, Bt * D * N))  # noqa: E731
        q = args.chunk or default_chunk(L, Bt * D * N)
        fast = {"chunked": chunked, "blocked": diag_scan}  # diag_scan's CPU default is blocked
        return [la, b], diag_scan_ref, fast, f"Bt={Bt} S=({D},{N}) Q={q} T={block_len(Bt * D * N)}"
    if kernel == "selective":
        u = randn(Bt, L, D)  # (Bt, L, D)
        delta = 0.01 + 0.1 * rand(Bt, L, D)  # (Bt, L, D)
        A = -torch.arange(1, N + 1, dtype=dtype).repeat(D, 1)  # (D, N) S4D-real init
        B, C = randn(Bt, L, 1, N), randn(Bt, L, 1, N)  # (Bt, L, G=1, N): one group
        Dskip = randn(D)  # (D,)
        inputs = [u, delta, A, B, C, Dskip]
        fast = {
            "chunked": lambda *t: selective_scan(*t, chunk=args.chunk),  # CPU default: blocked diag
            "fused": selective_scan_fused,  # what the models run
        }
        return inputs, selective_scan_ref, fast, f"Bt={Bt} D={D} N={N} T={block_len(Bt * D * N)}"
    if kernel == "ssd":
        H, P = args.heads, D // args.heads
        x = randn(Bt, L, H, P)  # (Bt, L, H, P)
        a = -0.5 * rand(Bt, L, H)  # (Bt, L, H)
        B, C = randn(Bt, L, H, N), randn(Bt, L, H, N)  # (Bt, L, H, N)
        fast = {"chunked": lambda *t: ssd(*t, chunk=args.ssd_chunk)}
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
    p = argparse.ArgumentParser(prog="ssmrepro bench scans", description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--L", type=int, nargs="+", default=[64, 1024, 4096])
    p.add_argument(
        "--kernels",
        nargs="+",
        default=["diag", "selective", "ssd"],
        choices=["diag", "selective", "ssd"],
    )
    p.add_argument(
        "--variants",
        nargs="+",
        default=None,
        choices=["chunked", "blocked", "fused"],
        help="fast formulations to time against the reference (default: all of the kernel's)",
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
        f"{'kernel':<10} {'L':>6}  {'shape':<28} {'fast':<8} {'ref med ms':>10} {'ref min':>8} "
        f"{'fast med ms':>11} {'fast min':>8} {'x (med)':>8} {'x (min)':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    for kernel in args.kernels:
        for L in args.L:
            inputs, ref, fast, desc = make_case(kernel, L, args, dtype)
            names = [n for n in fast if args.variants is None or n in args.variants]
            times = time_pair(inputs, [ref] + [fast[n] for n in names], args.warmup, args.repeats, clock)
            t_ref = times[0]
            for name, t_fast in zip(names, times[1:]):
                row = {
                    "kernel": kernel,
                    "variant": name,
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
                    f"{kernel:<10} {L:>6}  {desc:<28} {name:<8} {row['ref_ms_median']:>10.1f} "
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
