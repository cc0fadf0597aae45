"""Tool (bench): one full training step of the full-Mamba workloads, old and new kernels side by
side in one process, mambapy as the outside reference, and the fraction of the matmul peak.

``ssmrepro bench step`` builds each workload's ``mamba_lm`` pack (E members) once and times, with
:func:`ssmrepro.bench.timing.interleaved` (contenders interleaved, rotated order, medians with
min/max, wall and CPU clocks), one training step = forward + backward + ``torch.optim.AdamW``:

* ``old``  — the kernels as of commit 7336cc2 (``bench/legacy.py``: pad + shifted-slices conv,
  fused scan without batch tiles), swapped in through ``kernels.backend.torch_kernels``;
* ``new``  — the current kernels (``kernels/conv.py``, tiled ``inplace.selective_scan_fused``)
  and the engine's loss (``kernels.xent.linear_xent``: read-out and cross entropy fused, the
  same loss and gradients without the (E, B, L, V) logits); ``old`` and ``mambapy`` take
  ``F.cross_entropy`` of the logits;
* ``mb=m`` — the new kernels with the batch split into micro-batches of m sequences and the
  gradients accumulated (what a cache-aware training loop would do; same gradients);
* ``mambapy`` — ``mambapy.lm.LM`` 1.2.0 (the pure-PyTorch Mamba a CPU user would pick: pscan,
  ``nn.Conv1d``), same sizes, head tied to the embedding so the parameter counts match; only for
  E = 1 and only when ``mambapy`` is importable (``pip install ssmrepro[bench]``);
* ``GEMMs only`` (``--gemm-floor``) — the step's GEMMs alone (:func:`gemm_floor`): no
  implementation that computes the model's linear maps as GEMMs steps faster, so its ratio to
  mambapy is the ceiling of any "× mambapy" on this machine.

The step's loss is next-token cross entropy at every position (random tokens), so every variant
does the same work; the engine's MQAR step reads out only the κ supervised positions and is
cheaper by the readout. FLOPs are counted analytically (:func:`step_flops`): matmuls 2mnk, the
causal conv 2W per output, the selective scan 7 per state element and step (Δ·A, exp, Δu·B,
a·h + b, C·h), elementwise gates ignored; a step counts 3x the forward pass (backward = 2x
forward, the usual convention). Achieved GFLOP/s = FLOPs / median CPU seconds; the peak is the
measured single-thread float32 GEMM rate (:func:`ssmrepro.bench.timing.matmul_peak`). With
``--threads`` above 1 the rates, GFLOP/s, peak and ratios come from wall-clock medians (the
threads' CPU times add up).

Examples::

    ssmrepro bench step                                  # both workloads, E = 1 and 4
    ssmrepro bench step --workloads mamba-L256 --E 1 --micro 8 16 32
    ssmrepro bench step --json results/bench/step-cpu.json

Run it with one intra-op thread (the default, as every training worker) on a quiet machine; on a
shared one, read the CPU-clock columns. ``--tune-malloc`` and ``--flush-denormals`` switch on, for
the whole process (every contender, mambapy included), the two settings the training workers use
(``util.tune_malloc``, ``util.flush_denormals``); without them every contender runs as a plain
Python process would. mambapy gains much more from them than we do (its pscan allocates many
large temporaries: 3.7 s -> 1.4 s per step measured with both), so its ratio is reported both ways.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from ..kernels.xent import linear_xent
from ..tasks.base import TaskInfo
from ..util import (
    atomic_write_text,
    cpu_model,
    docstring,
    flush_denormals,
    plain_rst,
    prepare_target,
    source_tree_problem,
    utc_time,
)
from .timing import (
    MAX_BENCH_ELEMENTS,
    Values,
    bounded,
    cpu_clock,
    interleaved,
    matmul_peak,
    record_file,
    refuse_repeats,
    tune_malloc,
)


@dataclass(frozen=True)
class StepWorkload:
    name: str
    vocab: int
    d_model: int
    d_state: int
    d_conv: int
    expand: int
    n_layers: int
    batch: int
    L: int
    what: str


STEP_WORKLOADS = {
    "mamba-L256": StepWorkload("mamba-L256", 512, 64, 16, 4, 2, 2, 64, 256,
                               "full Mamba LM, issue 12: V=512 d=64 N=16 conv 4 expand 2, "
                               "2 layers, batch 64, L=256"),
    "koren-d-L64": StepWorkload("koren-d-L64", 512, 32, 16, 2, 2, 1, 128, 64,
                                "koren2026 fig6 column (d) full Mamba: V=512 d=32 N=16 conv 2 "
                                "expand 2, 1 layer, batch 128, L=64"),
}


def step_flops(w: StepWorkload, E: int = 1) -> float:
    """Analytic FLOPs of one training step (3x forward) of a pack of E members."""
    M = w.batch * w.L  # tokens per member
    d, Di, N = w.d_model, w.expand * w.d_model, w.d_state
    R = math.ceil(d / 16)  # dt_rank
    layer = (2 * M * d * 2 * Di  # in_proj
             + 2 * M * Di * w.d_conv  # depthwise causal conv
             + 2 * M * Di * (R + 2 * N)  # x_proj -> (dt, B, C)
             + 2 * M * R * Di  # dt_proj
             + 7 * M * Di * N  # selective scan
             + 2 * M * Di * d)  # out_proj
    forward = w.n_layers * layer + 2 * M * d * w.vocab  # + tied readout
    return 3.0 * forward * E


def step_gemms(w: StepWorkload) -> list[tuple[int, int, int]]:
    """The (tokens, in, out) shapes of every linear map of one member's forward pass: per layer
    the in-, x-, dt- and out-projections, then the tied read-out. Each costs three GEMMs per
    step: y = x Wᵀ (forward), dx = dy W and dW = dyᵀ x (backward)."""
    M = w.batch * w.L
    d, Di = w.d_model, w.expand * w.d_model
    R = math.ceil(d / 16)
    layer = [(M, d, 2 * Di), (M, Di, R + 2 * w.d_state), (M, R, Di), (M, Di, d)]
    return layer * w.n_layers + [(M, d, w.vocab)]


def gemm_flops(w: StepWorkload) -> float:
    """FLOPs of :func:`gemm_floor`: 3 GEMMs of 2·M·in·out per linear map."""
    return float(sum(6 * M * k * n for M, k, n in step_gemms(w)))


def gemm_floor(w: StepWorkload):
    """step(): only the GEMMs of one member's training step (:func:`step_gemms`, three each, on
    preallocated operands and outputs, the layouts ``F.linear`` and its backward use). Its time is
    a floor for any implementation of the step that computes these linear maps as GEMMs — the
    scan, conv, gates, norms, loss and optimiser come on top."""
    g = torch.Generator().manual_seed(0)
    ops = []
    for M, k, n in step_gemms(w):
        x, W, dy = (torch.randn(M, k, generator=g), torch.randn(n, k, generator=g),
                    torch.randn(M, n, generator=g))  # (M, in), (out, in), (M, out)
        ops.append((x, W, dy, torch.empty(M, n), torch.empty(M, k), torch.empty(n, k)))

    def step() -> None:
        for x, W, dy, y, dx, dW in ops:
            torch.mm(x, W.t(), out=y)  # forward      (M, out)
            torch.mm(dy, W, out=dx)  # input grad     (M, in)
            torch.mm(dy.t(), x, out=dW)  # weight grad (out, in)

    return step


def _our_config(w: StepWorkload):
    """(the mamba_lm config, the task info) of workload ``w``."""
    from ..models import MODELS

    cfg = MODELS["mamba_lm"].Config(d_model=w.d_model, d_state=w.d_state, n_layers=w.n_layers,
                                    d_conv=w.d_conv, expand=w.expand)
    return cfg, TaskInfo(vocab_size=w.vocab, n_classes=w.vocab, seq_len=w.L)


def _our_model(w: StepWorkload, E: int):
    from ..models import build_model

    cfg, info = _our_config(w)
    return build_model(cfg, info, E, list(range(E)))


def memory_problem(w: StepWorkload, packs: list[int], batch: int, L: int, mambapy: bool = True,
                   available: int | None = None) -> str | None:
    """Why timing ``packs`` of ``w`` at ``batch`` x ``L`` would not fit in memory (None when it
    fits or the memory is unknown): a model per pack size (and mambapy's) held at once, the
    largest pack's step (the planner's estimates, as ``bench.packs.memory_problem``). The
    per-activation bound alone let ``--E 256 --batch 8`` (about 27 GB here) reach the allocator
    or the OOM killer."""
    from ..train import _gb, available_memory
    from .packs import step_bytes

    cfg, info = _our_config(replace(w, batch=batch, L=L))
    params, acts = step_bytes(cfg, info, batch, [*packs, *([1] if mambapy else [])], "cpu")
    have = available_memory("cpu") if available is None else available
    if have is None or params + acts <= have:
        return None
    return (f"--E {' '.join(map(str, packs))} at batch {batch} x L {L} needs about "
            f"{_gb(params + acts)} of memory (the models with their gradients and Adam moments "
            f"{_gb(params)}, a step of the pack of {max(packs)} {_gb(acts)}); only {_gb(have)} "
            "is available: measure smaller packs, batches or lengths")


class _MambapyLM(torch.nn.Module):
    """mambapy.lm.LM's forward (embedding, Mamba, RMSNorm, head) with the head tied to the
    embedding; built from ``mambapy.mamba`` alone (``mambapy.lm`` imports Mamba-2, which needs
    einops)."""

    def __init__(self, w: StepWorkload):
        from mambapy.mamba import Mamba, MambaConfig, RMSNorm

        super().__init__()
        cfg = MambaConfig(d_model=w.d_model, n_layers=w.n_layers, d_state=w.d_state,
                          expand_factor=w.expand, d_conv=w.d_conv)
        self.embedding = torch.nn.Embedding(w.vocab, w.d_model)
        self.mamba = Mamba(cfg)
        self.norm_f = RMSNorm(w.d_model, cfg.rms_norm_eps)

    def forward(self, ids):  # (B, L) -> (B, L, V)
        return F.linear(self.norm_f(self.mamba(self.embedding(ids))), self.embedding.weight)


def _mambapy_model(w: StepWorkload):
    """mambapy's Mamba LM with the same sizes and a tied head, or None without mambapy."""
    try:
        return _MambapyLM(w)
    except ImportError:
        return None


def _data(w: StepWorkload, E: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, w.vocab, (E, w.batch, w.L), generator=g)  # (E, B, L)
    tgt = torch.randint(0, w.vocab, (E, w.batch, w.L), generator=g)  # (E, B, L)
    return ids, tgt


def make_step(model, ids, tgt, vocab: int, micro: int | None = None, packed: bool = True,
              fused: bool = False):
    """step(): forward, loss (sum over members of the mean token loss), backward, AdamW.

    ``micro``: sequences per micro-batch (gradients accumulated; None = the whole batch).
    ``packed``: the model takes (E, B, L) ids (ours); else (B, L) (mambapy, E = 1).
    ``fused``: the loss as the engine's training loop computes it (``kernels.xent.linear_xent``
    on the features and the tied head: the same loss and gradients without the logits tensor);
    else ``F.cross_entropy`` on the model's logits.
    """
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    Bsz = ids.shape[1]
    mb = micro or Bsz

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for b0 in range(0, Bsz, mb):
            x, y = ids[:, b0:b0 + mb], tgt[:, b0:b0 + mb]  # (E, m, L)
            if fused:  # per-member mean over this chunk's tokens, weighted by its share
                loss = linear_xent(model.features(x), *model.linear_readout(), y)[0].sum()
                (loss * (x.shape[1] / Bsz)).backward()
                continue
            logits = model(x if packed else x[0])  # (E, m, L, V) or (m, L, V)
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1), reduction="sum")
            (loss / (Bsz * ids.shape[2])).backward()
        opt.step()

    return step


def contenders(w: StepWorkload, packs: list[int], micro: list[int], old: bool, mambapy: bool,
                floor: bool = False):
    """{name: (step callable, E)} for one workload (``floor``: add :func:`gemm_floor` as
    "GEMMs only E=1", the fastest any implementation built on these GEMMs could step)."""
    from ..kernels.backend import torch_kernels
    from .legacy import causal_conv1d_slices, selective_scan_fused_v1

    out = {}
    for E in packs:
        model = _our_model(w, E)
        ids, tgt = _data(w, E)
        if old:
            step_old = make_step(model, ids, tgt, w.vocab)

            def run_old(f=step_old):
                with torch_kernels(conv=causal_conv1d_slices, scan=selective_scan_fused_v1):
                    f()

            out[f"old E={E}"] = (run_old, E)
        out[f"new E={E}"] = (make_step(model, ids, tgt, w.vocab, fused=True), E)
        for m in micro:
            if m < w.batch:
                out[f"new E={E} mb={m}"] = (make_step(model, ids, tgt, w.vocab, micro=m,
                                                      fused=True), E)
    if mambapy:
        lm = _mambapy_model(w)
        if lm is not None:
            ids, tgt = _data(w, 1)
            out["mambapy E=1"] = (make_step(lm, ids, tgt, w.vocab, packed=False), 1)
    if floor:
        out[FLOOR] = (gemm_floor(w), 1)
    return out


FLOOR = "GEMMs only E=1"


def git_commit() -> str:
    """The checkout's commit (``engine.local.git_commit``), 'unknown' outside a checkout (an
    installed package inside another git repository named that repository's commit)."""
    from ..engine.local import git_commit as source_commit

    return source_commit() or "unknown"


def mambapy_version() -> str | None:
    """The installed mambapy's version (its package metadata, else its ``__version__``, else
    'unknown'), None when it is not importable: the record said "1.2.0" for any version."""
    try:
        import mambapy
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mambapy")
    except PackageNotFoundError:
        return str(getattr(mambapy, "__version__", "unknown"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ssmrepro bench step", description=plain_rst(
        docstring(sys.modules[__name__])),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", action=Values, default=list(STEP_WORKLOADS),
                   choices=list(STEP_WORKLOADS))
    p.add_argument("--E", type=bounded(1, 256), nargs="+", action=Values, default=[1, 4], dest="packs",
                   help="pack sizes E (members per model)")
    p.add_argument("--batch", type=bounded(1, 1 << 16), default=None,
                   help="override the workloads' batch size")
    p.add_argument("--L", type=bounded(1, 1 << 20), default=None,
                   help="override the workloads' sequence length")
    p.add_argument("--micro", type=bounded(1, 1 << 16), nargs="*", action=Values, default=[],
                   help="micro-batch sizes (new kernels)")
    p.add_argument("--no-old", action="store_true", help="skip the old kernels")
    p.add_argument("--no-mambapy", action="store_true", help="skip mambapy even when importable")
    p.add_argument("--gemm-floor", action="store_true",
                   help="also time the step's GEMMs alone (a floor for any implementation)")
    p.add_argument("--repeats", type=bounded(1, 1000), default=5)
    p.add_argument("--warmup", type=bounded(0, 1000), default=1)
    p.add_argument("--threads", type=bounded(1, 1024), default=1, help="intra-op threads (workers use 1)")
    p.add_argument("--tune-malloc", action="store_true",
                   help="glibc mallopt: no mmap / no trim for big blocks (process-wide)")
    p.add_argument("--flush-denormals", action="store_true",
                   help="flush denormals to zero, as the training workers do (process-wide)")
    p.add_argument("--json", type=record_file, default=None, help="write the record here")
    args = p.parse_args(argv)
    refuse_repeats(p, workloads=args.workloads, E=args.packs, micro=args.micro)
    for name in args.workloads:
        w = STEP_WORKLOADS[name]
        # the widest activation per token: the logits (vocab), the in_proj output (x and z,
        # 2 x expand x d_model), not d_model alone (batch 64 x L 65536 passed, and the logits
        # asked for 8 times the limit: an allocator traceback)
        width = max(w.d_model, 2 * w.expand * w.d_model, w.vocab)
        size = max(args.packs) * (args.batch or w.batch) * (args.L or w.L) * width
        if size > MAX_BENCH_ELEMENTS:
            p.error(f"{name}: E x batch x L x {width} (the widest activation per token: "
                    f"d_model {w.d_model}, in_proj {2 * w.expand * w.d_model}, logits "
                    f"{w.vocab}) = {size:,} floats per activation, more than "
                    f"{MAX_BENCH_ELEMENTS:,}; measure smaller packs, batches or lengths")
        big = [m for m in args.micro if m >= (args.batch or w.batch)]
        if big:  # a micro-batch of the whole batch was left out of the table without a word
            p.error(f"--micro {big[0]}: not below {name}'s batch size {args.batch or w.batch} "
                    "(a micro-batch splits the batch; give sizes below it)")
        why = memory_problem(w, args.packs, args.batch or w.batch, args.L or w.L,
                             mambapy=not args.no_mambapy)
        if why:
            p.error(f"{name}: {why}")
    if args.json:  # a folder or device there failed only after the measuring
        why = source_tree_problem(args.json, "export")
        if why:  # `--json experiments/<paper>/<id>.yaml` replaced the spec with the record
            p.error(f"--json {args.json}: {why}")
        prepare_target(args.json, ".json", b'{"env":')  # (its record, written before)

    torch.set_num_threads(args.threads)
    tuned = tune_malloc() if args.tune_malloc else False
    ftz = flush_denormals() if args.flush_denormals else False  # process-wide: mambapy too
    peak = matmul_peak()
    clock = "cpu" if cpu_clock() else "wall"  # several threads: their CPU times add up

    def secs(s) -> float:
        """Seconds per step of the contender the rates and ratios use."""
        return s.cpu_median if clock == "cpu" else s.wall_median

    env = {"cpu": cpu_model(), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "python": platform.python_version(), "commit": git_commit(), "malloc_tuned": tuned,
           "denormals_flushed": ftz, "matmul_peak_gflops": round(peak, 1), "dtype": "float32",
           "rates_clock": clock,
           "time": utc_time()}
    env["mambapy"] = mambapy_version()
    print(f"# {env['cpu']} | torch {env['torch']} | {env['threads']} thread(s) | commit "
          f"{env['commit']} | malloc tuned: {tuned} | denormals flushed: {ftz} | float32 GEMM "
          f"peak {peak:.1f} GFLOP/s | rates from {clock}-clock medians")
    rows, workloads = [], {}
    for name in args.workloads:
        w = STEP_WORKLOADS[name]
        if args.batch or args.L:
            w = replace(w, batch=args.batch or w.batch, L=args.L or w.L,
                        what=f"{w.what} [overridden: batch {args.batch or w.batch}, L {args.L or w.L}]")
        print(f"\n{w.name}: {w.what}")
        workloads[name] = {**asdict(w), "flops_per_step_E1": step_flops(w)}
        cs = contenders(w, args.packs, args.micro, not args.no_old, not args.no_mambapy,
                        args.gemm_floor)
        stats = interleaved({k: f for k, (f, _) in cs.items()}, args.repeats, args.warmup,
                            threads=args.threads)
        base = {E: secs(stats[f"old E={E}"]) for E in args.packs if f"old E={E}" in stats}
        ref = secs(stats["mambapy E=1"]) if "mambapy E=1" in stats else None
        single = secs(stats["new E=1"]) if "new E=1" in stats else None
        print(f"  {'contender':<18} {'CPU ms/step: median [min-max]':<34} {'wall ms median':>14} "
              f"{'run-steps/s':>11} {'GFLOP/s':>8} {'peak':>6} {'vs old':>7} {'vs mambapy':>10}")
        for k, s in stats.items():
            E = cs[k][1]
            flops = gemm_flops(w) if k == FLOOR else step_flops(w, E)
            row = {"workload": name, "contender": k, "E": E, **s.ms(),
                   "run_steps_per_s": E / secs(s), "gflops": flops / secs(s) / 1e9,
                   "flops_per_step": flops}
            row["fraction_of_peak"] = row["gflops"] / peak
            if E in base and k not in ("mambapy E=1", FLOOR):
                row["speedup_vs_old"] = base[E] / secs(s)
            if ref is not None:
                row["run_steps_vs_mambapy"] = (E / secs(s)) / (1 / ref)
            if single is not None:
                row["run_steps_vs_single"] = (E / secs(s)) / (1 / single)
            rows.append(row)
            cpu = f"{1e3 * s.cpu_median:9.1f} [{1e3 * s.cpu_min:.1f}-{1e3 * s.cpu_max:.1f}]"
            vs_old = f"x{row['speedup_vs_old']:.2f}" if "speedup_vs_old" in row else ""
            vs_ref = f"x{row['run_steps_vs_mambapy']:.2f}" if "run_steps_vs_mambapy" in row else ""
            print(f"  {k:<18} {cpu:<34} {1e3 * s.wall_median:14.1f} {row['run_steps_per_s']:11.2f} "
                  f"{row['gflops']:8.2f} {100 * row['fraction_of_peak']:5.1f}% {vs_old:>7} {vs_ref:>10}",
                  flush=True)
        if ref is not None and FLOOR in stats:
            floor = secs(stats[FLOOR])
            print(f"  x12 mambapy needs <= {1e3 * ref / 12:.1f} ms per step; the GEMMs alone take "
                  f"{1e3 * floor:.1f} ms: no implementation built on them exceeds "
                  f"x{ref / floor:.2f} mambapy here")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        rec = {"env": env, "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "workloads": workloads, "results": rows}
        atomic_write_text(args.json, json.dumps(rec, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from . import bench_main

    bench_main(main)
