"""Tool (bench): the fast CPU kernels against their references (forward + backward), one process.

For each L, times in the same process with :func:`ssmrepro.bench.timing.interleaved` (after a
warm-up, contenders interleaved in a rotated order, repeated; wall and CPU clocks; medians with
min/max) the reference and every fast formulation of a kernel (one row each):

* ``diag``:      diag_scan_ref vs ``chunked`` (diag_scan, two-pass chunked, Q = default_chunk)
                 and ``blocked`` (diag_scan's CPU default: inplace.diag_scan_blocked), on
                 la, b: (Bt, L, D, N)
* ``selective``: selective_scan_ref vs ``chunked`` (selective_scan on the chunked diag_scan,
                 Q = default_chunk), ``blocked`` (on diag_scan's CPU default), ``fused-v1``
                 (the fused scan before batch tiles, bench/legacy.py), ``fused-tiled`` (the tiled
                 kernel, never narrow_scan) and ``fused`` (inplace.selective_scan_fused as the
                 models run it: narrow_scan for packs of narrow groups, D < 32 and G > 1, else
                 the tiles); u: (Bt, L, G·D), B, C: (Bt, L, G, N) (``--groups G``: a pack of G
                 members, as S6Core folds them)
* ``ssd``:       ssd_ref vs ``chunked`` (ssd) on x: (Bt, L, H, P), B, C: (Bt, L, H, N)
* ``conv``:      the old pad + shifted-slices causal conv (bench/legacy.py) vs ``tiled``
                 (kernels/conv.py, what the models run) and ``conv1d`` (one grouped F.conv1d over
                 E·C channels with the channel-first layout copies it needs), x: (E=G, Bt, L, D),
                 width ``--width``, bias and SiLU

Prints a table (CPU-clock medians [min-max] in ms, speed-ups of the CPU medians and of the wall
medians over the reference) and optionally writes JSON with the CPU model, torch version and
thread count. One intra-op thread by default, as every training worker runs.

Example::

    ssmrepro bench scans                                 # L = 64 1024 4096, the default shape
    ssmrepro bench scans --kernels selective conv --L 256 --batch 64 --d 128 --n 16 \
        --no-ref --variants fused-v1 fused tiled conv1d  # the issue-12 Mamba layer (no reference)
    ssmrepro bench scans --L 1024 --kernels diag --chunk 32 --json out.json

Committed records (2-core AMD EPYC VM shared with other jobs, torch 2.13 CPU, float32, fwd + bwd,
one thread, CPU-clock medians): ``results/bench/scans-cpu.json`` (the default shapes),
``scans-cpu-large.json`` (``--kernels selective diag --batch 8 --d 128 --n 16``),
``kernels-cpu.json`` / ``kernels-cpu-pack4.json`` (the issue-12 layer, ``--kernels selective conv
--L 256 --batch 64 --d 128 --n 16 [--groups 4]``: fused 142 -> 107 ms, 859 -> 469 ms for a pack
of 4; conv 20 -> 8.9 ms, 99 -> 34 ms) and ``kernels-cpu-koren-d.json`` (``--L 64 --batch 128
--d 64 --width 2``: fused 46 -> 32 ms).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from ..kernels.conv import causal_conv1d_cpu
from ..kernels.inplace import block_len, scan_plan, selective_scan_fused
from ..kernels.scan import (
    default_chunk,
    diag_scan,
    diag_scan_ref,
    selective_scan,
    selective_scan_ref,
)
from ..kernels.ssd import default_ssd_chunk, ssd, ssd_ref
from ..util import atomic_write_text, cpu_model, docstring, plain_rst, prepare_target, source_tree_problem
from .legacy import causal_conv1d_slices, selective_scan_fused_v1
from .timing import (
    MAX_BENCH_ELEMENTS,
    Values,
    bounded,
    interleaved,
    record_file,
    refuse_repeats,
    tune_malloc,
)

KERNELS = ("diag", "selective", "ssd", "conv")
VARIANTS = ("chunked", "blocked", "fused-v1", "fused-tiled", "fused", "tiled", "conv1d")
KERNEL_VARIANTS = {"diag": ("chunked", "blocked"),  # the fast formulations make_case times
                   "selective": ("chunked", "blocked", "fused-v1", "fused-tiled", "fused"),
                   "ssd": ("chunked",), "conv": ("tiled", "conv1d")}



# the shape options each kernel reads (make_case); --d, --batch and --L are read by every one
READERS = {"n": ("diag", "selective", "ssd"), "groups": ("selective", "conv"), "heads": ("ssd",),
           "width": ("conv",), "chunk": ("diag", "selective"), "ssd_chunk": ("ssd",)}


def conv1d_grouped(x, weight, bias=None, activation=None):
    """One grouped F.conv1d over E·C channels: x (E, Bt, L, C) -> (Bt, E·C, L) copy, conv with
    left padding W-1, copy back to (E, Bt, L, C)."""
    E, Bt, L, C = x.shape
    W = weight.shape[-1]
    xc = x.permute(1, 0, 3, 2).reshape(Bt, E * C, L)  # (Bt, E·C, L): a copy
    y = F.conv1d(F.pad(xc, (W - 1, 0)), weight.reshape(E * C, 1, W),
                 None if bias is None else bias.reshape(E * C), groups=E * C)
    y = y.reshape(Bt, E, C, L).permute(1, 0, 3, 2).contiguous()  # (E, Bt, L, C)
    return F.silu(y) if activation else y


def make_case(kernel: str, L: int, args, dtype: torch.dtype):
    """Returns (inputs requiring grad, ref fn or None, {name: fast fn}, description)."""
    g = torch.Generator().manual_seed(0)
    Bt, D, N, G = args.batch, args.d, args.n, args.groups
    rand = lambda *s: torch.rand(*s, generator=g, dtype=dtype)  # noqa: E731
    randn = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    if kernel == "diag":
        la = -0.5 * rand(Bt, L, D, N)  # (Bt, L, D, N)
        b = randn(Bt, L, D, N)  # (Bt, L, D, N)
        q = args.chunk or default_chunk(L, Bt * D * N)
        chunked = lambda la, b: diag_scan(la, b, chunk=q)  # noqa: E731
        fast = {"chunked": chunked, "blocked": diag_scan}  # diag_scan's CPU default is blocked
        return [la, b], diag_scan_ref, fast, f"Bt={Bt} S=({D},{N}) Q={q} T={block_len(Bt * D * N)}"
    if kernel == "selective":
        u = randn(Bt, L, G * D)  # (Bt, L, G·D)
        delta = 0.01 + 0.1 * rand(Bt, L, G * D)  # (Bt, L, G·D)
        A = -torch.arange(1, N + 1, dtype=dtype).repeat(G * D, 1)  # (G·D, N) S4D-real init
        B, C = randn(Bt, L, G, N), randn(Bt, L, G, N)  # (Bt, L, G, N)
        Dskip = randn(G * D)  # (G·D,)
        # the two-pass chunked diag_scan, as diag's `chunked`: chunk=None ran diag_scan's CPU
        # default, the blocked kernel, for a state of 512 or more (every committed shape) and
        # the row said `chunked`
        q = args.chunk or default_chunk(L, Bt * G * D * N)
        fast = {
            "chunked": lambda *t: selective_scan(*t, chunk=q),
            # selective_scan on diag_scan's CPU default (the blocked kernel for a state of 512
            # or more): what the committed records' `chunked` rows timed, now under its name
            "blocked": selective_scan,
            "fused-v1": selective_scan_fused_v1,  # before batch tiles (bench/legacy.py)
            "fused-tiled": lambda *t: selective_scan_fused(  # the tiles without narrow_scan
                *t, plan=scan_plan(Bt, G, D, N, L=L, narrow=False)),
            "fused": selective_scan_fused,  # what the models run
        }
        p = scan_plan(Bt, G, D, N, L=L)
        desc = (f"Bt={Bt} G={G} D={D} N={N} Q={q} tile={p.rows}x{p.groups} T={p.T}"
                + (" (narrow_scan)" if p.narrow else ""))
        return [u, delta, A, B, C, Dskip], selective_scan_ref, fast, desc
    if kernel == "ssd":
        H, P = args.heads, D // args.heads
        x = randn(Bt, L, H, P)  # (Bt, L, H, P)
        a = -0.5 * rand(Bt, L, H)  # (Bt, L, H)
        B, C = randn(Bt, L, H, N), randn(Bt, L, H, N)  # (Bt, L, H, N)
        fast = {"chunked": lambda *t: ssd(*t, chunk=args.ssd_chunk)}
        q = args.ssd_chunk or default_ssd_chunk(L)
        return [x, a, B, C], ssd_ref, fast, f"Bt={Bt} H={H} P={P} N={N} Q={q}"
    if kernel == "conv":
        W = args.width
        x = randn(G, Bt, L, D)  # (E, Bt, L, C)
        w, bias = randn(G, D, W), randn(G, D)  # (E, C, W), (E, C)
        fast = {
            "tiled": lambda *t: causal_conv1d_cpu(*t, "silu"),
            "conv1d": lambda *t: conv1d_grouped(*t, "silu"),
        }
        ref = lambda *t: causal_conv1d_slices(*t, "silu")  # noqa: E731
        return [x, w, bias], ref, fast, f"E={G} Bt={Bt} C={D} W={W} silu"
    raise ValueError(kernel)


def ssd_floats(L: int, args) -> tuple[int, str]:
    """The largest tensor of ``ssd`` at length ``L`` (floats) and its shape in words: the
    in-chunk decay and score matrices (Bt, H, nc, Q, Q) or the chunk-level decay matrix (Bt, H,
    nc, nc), where L is padded to nc chunks of Q; the ``--d``-sized inputs are checked already."""
    Bt, H = args.batch, args.heads
    Q = args.ssd_chunk or default_ssd_chunk(L)
    nc = -(-L // Q)
    return max((Bt * H * nc * Q * Q, f"batch x heads x chunks x chunk^2 ({Bt} x {H} x {nc} x {Q}^2)"),
               (Bt * H * nc * nc, f"batch x heads x chunks^2 ({Bt} x {H} x {nc}^2)"))


# peak memory of one case (inputs, reference and variants, forward + backward) in units of the
# per-token floats of ``case_floats``, measured (maxrss, L 1024, batch 8 -> 64: diag 12.7,
# selective 7.8, ssd 12.5, conv 7.5) and rounded up
PEAK_COPIES = {"diag": 14, "selective": 9, "ssd": 14, "conv": 9}


def case_floats(kernel: str, L: int, args) -> int:
    """The floats ``PEAK_COPIES`` counts for ``kernel`` at length ``L``: diag (Bt, L, D, N);
    selective (Bt, L, G·D, N); ssd x, B and C, (Bt, L, D + 2·H·N); conv x, (E, Bt, L, C)."""
    Bt, D, N, G = args.batch, args.d, args.n, args.groups
    return {"diag": Bt * L * D * N, "selective": Bt * L * G * D * N,
            "ssd": Bt * L * (D + 2 * args.heads * N), "conv": G * Bt * L * D}[kernel]


def memory_problem(args, available: int | None = None) -> str | None:
    """Why the largest case would not fit in the memory available now (None when it fits or the
    memory is unknown): each tensor was bounded (``MAX_BENCH_ELEMENTS``), not their sum, so
    `--kernels diag --dtype float64` at the bound asked for ~27 GB and met the OOM killer."""
    from ..train import _gb, available_memory

    item = 8 if args.dtype == "float64" else 4
    need, what = max((PEAK_COPIES[k] * case_floats(k, L, args) * item
                      + (3 * item * ssd_floats(L, args)[0] if k == "ssd" else 0), f"{k} at L={L}")
                     for k in args.kernels for L in args.L)
    have = available_memory("cpu") if available is None else available
    if have is None or need <= have:
        return None
    return (f"{what} needs about {_gb(need)} of memory (inputs, reference and variants, forward "
            f"and backward, {args.dtype}); only {_gb(have)} is available: measure a smaller "
            "--L, --batch, --d or --n")


def fwd_bwd(fn, inputs):
    """A callable running fn forward + backward on fresh leaves (same inputs, same grad_out)."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    with torch.no_grad():
        grad_out = torch.randn_like(fn(*leaves))

    def step():
        fn(*leaves).backward(grad_out)
        for t in leaves:
            t.grad = None

    return step


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ssmrepro bench scans", description=plain_rst(
        docstring(sys.modules[__name__])),
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--L", type=bounded(1, 1 << 20), nargs="+", action=Values, default=[64, 1024, 4096])
    p.add_argument("--kernels", nargs="+", action=Values, default=["diag", "selective", "ssd"],
                   choices=KERNELS)
    p.add_argument("--variants", nargs="+", action=Values, default=None, choices=VARIANTS,
                   help="fast formulations to time (default: all of the kernel's)")
    p.add_argument("--no-ref", action="store_true",
                   help="skip the reference (long L); speed-ups are then over the first variant")
    p.add_argument("--batch", type=bounded(1, 1 << 16), default=16)
    p.add_argument("--d", type=bounded(1, 1 << 16), default=32, help="channels D (ssd: H * P; conv: C)")
    p.add_argument("--n", type=bounded(1, 1 << 12), default=8, help="state size N")
    p.add_argument("--groups", type=bounded(1, 1 << 12), default=1,
                   help="selective: groups G; conv: pack size E")
    p.add_argument("--heads", type=bounded(1, 1 << 12), default=4, help="ssd heads H (P = D / H)")
    p.add_argument("--width", type=bounded(1, 1 << 12), default=4, help="conv width W")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--chunk", type=bounded(1, 1 << 20), default=None,
                   help="diag/selective chunk (default auto)")
    p.add_argument("--ssd-chunk", type=bounded(1, 1 << 20), default=None, help="ssd chunk (default auto)")
    p.add_argument("--warmup", type=bounded(0, 1000), default=1)
    p.add_argument("--repeats", type=bounded(1, 1000), default=7)
    p.add_argument("--threads", type=bounded(1, 1024), default=1,
                   help="torch.set_num_threads (workers use 1)")
    p.add_argument("--tune-malloc", action="store_true",
                   help="glibc mallopt: no mmap / no trim for big blocks (process-wide)")
    p.add_argument("--json", type=record_file, default=None, help="write results as JSON here")
    args = p.parse_args(argv)
    refuse_repeats(p, L=args.L, kernels=args.kernels, variants=args.variants)
    # an option that no kernel timed reads was ignored without a word while the record's args
    # named it (`--kernels diag --groups 4 --width 7`: diag timed as always, args said G 4, W 7)
    for opt, readers in READERS.items():
        value = getattr(args, opt)
        if value != p.get_default(opt) and not set(readers) & set(args.kernels):
            p.error(f"--{opt.replace('_', '-')} {value}: no kernel of --kernels "
                    f"{' '.join(args.kernels)} reads it (it is read by {', '.join(readers)})")
    if args.chunk is not None and args.variants is not None and "chunked" not in args.variants:
        p.error(f"--chunk {args.chunk}: only the chunked variant reads it (--variants "
                f"{' '.join(args.variants)})")
    if args.variants is not None:  # a kernel without any of them was left out without a word
        # (`--kernels diag --variants fused`: an empty table and record, exit 0)
        for k in args.kernels:
            if not set(args.variants) & set(KERNEL_VARIANTS[k]):
                p.error(f"--variants {' '.join(args.variants)}: none is a variant of kernel {k} "
                        f"(its variants: {', '.join(KERNEL_VARIANTS[k])})")
        for v in args.variants:
            if not any(v in KERNEL_VARIANTS[k] for k in args.kernels):
                p.error(f"--variants {v}: not a variant of --kernels {' '.join(args.kernels)}")
    if "ssd" in args.kernels and args.d % args.heads:  # P = D // H silently dropped channels
        p.error(f"--heads {args.heads} does not divide --d {args.d} (ssd: D = H * P)")
    size = args.batch * max(args.L) * args.d * max(args.n, args.width) * args.groups
    if size > MAX_BENCH_ELEMENTS:
        p.error(f"batch x L x d x max(n, width) x groups = {size:,} floats per tensor, more than "
                f"{MAX_BENCH_ELEMENTS:,}; measure smaller shapes")
    if "ssd" in args.kernels:  # its chunk matrices: --ssd-chunk 2^20 at L 4096 asked for 1 TB
        for L in args.L:
            size, what = ssd_floats(L, args)
            if size > MAX_BENCH_ELEMENTS:
                p.error(f"ssd at L={L}: {what} = {size:,} floats per tensor, more than "
                        f"{MAX_BENCH_ELEMENTS:,}; measure a smaller --L, --batch, --heads or "
                        "--ssd-chunk")
    why = memory_problem(args)
    if why:
        p.error(why)
    if args.json:  # a folder or device there failed only after the measuring
        why = source_tree_problem(args.json, "export")
        if why:  # `--json experiments/<paper>/<id>.yaml` replaced the spec with the record
            p.error(f"--json {args.json}: {why}")
        prepare_target(args.json, ".json", b'{"env":')  # (its record, written before)

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
        "clock": "cpu (process_time) and wall (perf_counter), interleaved",
    }
    print(f"# {env['cpu']} | torch {env['torch']} | {env['threads']} thread(s) | {args.dtype} | "
          f"fwd+bwd | malloc tuned: {tuned} | CPU-clock ms: median [min-max]")
    base_col = "base cpu ms" if args.no_ref else "ref cpu ms"
    header = (f"{'kernel':<9} {'L':>5}  {'shape':<40} {'variant':<9} {base_col:>22} "
              f"{'fast cpu ms':>22} {'x cpu':>6} {'x wall':>6}")
    if args.no_ref:  # the column said `ref cpu ms` over another variant's times, and the
        # speed-ups read as over the reference
        first = {k: next(v for v in KERNEL_VARIANTS[k] if args.variants is None
                         or v in args.variants) for k in args.kernels}
        print("# --no-ref: times and speed-ups over the base, each kernel's first variant: "
              + ", ".join(f"{k} {v}" for k, v in first.items()))
    print(header)
    print("-" * len(header))
    rows = []
    for kernel in args.kernels:
        for L in args.L:
            inputs, ref, fast, desc = make_case(kernel, L, args, dtype)
            names = [n for n in fast if args.variants is None or n in args.variants]
            if not names:
                continue
            fns = {} if args.no_ref else {"ref": fwd_bwd(ref, inputs)}
            fns.update({n: fwd_bwd(fast[n], inputs) for n in names})
            st = interleaved(fns, args.repeats, args.warmup, threads=args.threads)
            base_name = "ref" if "ref" in st else names[0]
            base = st[base_name]
            for name in names:
                s = st[name]
                row = {"kernel": kernel, "variant": name, "L": L, "shape": desc, "base": base_name,
                       "ref_ms_median": 1e3 * base.cpu_median, "ref_ms_min": 1e3 * base.cpu_min,
                       "ref_ms_max": 1e3 * base.cpu_max, "fast_ms_median": 1e3 * s.cpu_median,
                       "fast_ms_min": 1e3 * s.cpu_min, "fast_ms_max": 1e3 * s.cpu_max,
                       "ref_wall_ms_median": 1e3 * base.wall_median,
                       "fast_wall_ms_median": 1e3 * s.wall_median}
                row["speedup"] = row["ref_ms_median"] / row["fast_ms_median"]
                row["speedup_wall"] = base.wall_median / s.wall_median
                rows.append(row)
                rc = f"{row['ref_ms_median']:.1f} [{row['ref_ms_min']:.1f}-{row['ref_ms_max']:.1f}]"
                fc = f"{row['fast_ms_median']:.1f} [{row['fast_ms_min']:.1f}-{row['fast_ms_max']:.1f}]"
                print(f"{kernel:<9} {L:>5}  {desc:<40} {name:<9} {rc:>22} {fc:>22} "
                      f"{row['speedup']:5.2f}x {row['speedup_wall']:5.2f}x", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "env": env,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "results": rows,
        }
        atomic_write_text(args.json, json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from . import bench_main

    bench_main(main)
