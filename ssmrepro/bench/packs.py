"""Tool (bench): ``ssmrepro bench`` — packed training against the simple way, same run.

Run-steps per second of packed training against one model at a time.

(a) plain: one model at a time — an E = 1 model, ``torch.optim.AdamW``, ``clip_grad_norm_``, a
    fresh batch per step (what a hand-written loop does), with the engine's loss
    (``train.training_loss``: the same read-out + loss kernels as the packs, so the ratio
    measures packing, not a kernel the plain loop lacks);
(b) packed: the engine's step (PackedAdam, per-member clipping and LR) on packs of E members.
run-steps/s = E / (seconds per step). All contenders are built first and then timed together by
:func:`ssmrepro.bench.timing.interleaved` (one warm-up step each, then rounds in a rotated
order), with the engine's thread setting (one intra-op thread per worker on the 2-core machine;
``threads``) and the workers' process settings (``util.tune_malloc``, ``util.flush_denormals``;
process-wide, so the plain loop gets them too); rates use the CPU-clock median on CPU with one
thread (robust to other processes on the cores) and the wall-clock median on a GPU or with
several threads (their CPU times add up). Results go to
results/bench/<workload>-<device>.json and .csv with the machine, torch version, backend,
commit, thread count, process settings and the spread of every contender.

Every contender's step is also counted op by op (:mod:`ssmrepro.bench.counting`: FLOPs, bytes
moved if nothing stayed in cache), so the record has its achieved GFLOP/s, its fraction of the
machine's measured float32 GEMM peak and its arithmetic intensity, with the measured copy
bandwidth: the points and roofs of ``ssmrepro bench roofline``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..engine.local import git_commit
from ..models import MODELS, build_model
from ..tasks import build_task
from ..tasks.base import TRAIN
from ..train import packed_step, training_loss
from ..util import atomic_write_text, cpu_model, flush_denormals, folder_lock, tune_malloc, utc_time
from . import RECORDS_LOCK
from .counting import count


@dataclass(frozen=True)
class Workload:
    name: str
    task: dict
    model: dict
    batch: int
    what: str
    packs: tuple[int, ...] = (4, 16, 64)  # pack sizes measured by default


WORKLOADS = {
    "keep-nth-d8": Workload(
        "keep-nth-d8", {"name": "keep_nth", "n": 5, "T": 50, "vocab": 128},
        {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 8, "pe": "index"}, 16,
        "huang2025 KEEP n-TH, S6 d=8 N=8, T=50, batch 16", (4, 16, 32, 64, 128),
    ),
    "mqar-linear": Workload(
        "mqar-linear", {"name": "mqar", "vocab": 512, "L": 64, "kappa": 16},
        {"name": "linear_mamba", "d_model": 32, "d_state": 16}, 128,
        "koren2026 fig6 simplified linear Mamba, D=32 N=16, regime 0, batch 128",
    ),
    "mqar-full-L256": Workload(
        "mqar-full-L256", {"name": "mqar", "vocab": 512, "L": 256, "kappa": 16},
        {"name": "mamba_lm", "d_model": 64, "d_state": 16}, 16,
        "full Mamba layer on MQAR, d=64 N=16 L=256, batch 16", (2, 4, 8),
    ),
    "composite-mamba2": Workload(
        "composite-mamba2", {"name": "composite", "variant": "standard", "L": 8},
        {"name": "seq_lm", "d_model": 32, "layers": ["SSM"], "repeat": 2,
         "blocks": {"SSM": {"mixer": {"name": "mamba2", "d_state": 128, "expand": 2, "d_conv": 4,
                                      "heads": 1}, "norm": "rmsnorm"}},
         "final_norm": "rmsnorm", "init": {"scheme": "gamma", "gamma": 1.0}}, 256,
        "chen2025 Fig. 4 two-layer Mamba-2 (SSD), d=32 N=128, composite functions L=8, batch 256",
        (2, 4, 8),
    ),
    "selective-copy-hybrid": Workload(
        "selective-copy-hybrid",
        {"name": "selective_copy", "words": 26, "numbers": 5, "number_offset": 5, "p": 0.2,
         "L": 100},
        {"name": "cooper_hybrid", "layers": "SSM-TF", "d_model": 40, "d_state": 1, "window": 20,
         "heads": 1}, 8,
        "cooper2026 SSM->TF hybrid (Mamba-1 + windowed NeoX attention), d=40, selective copy "
        "L=100, batch 8", (4, 16, 64),
    ),
    "mqar-b2s6": Workload(
        "mqar-b2s6", {"name": "mqar", "vocab": 256, "L": 64, "kappa": 8},
        {"name": "seq_lm", "d_model": 64, "layers": ["SSM"], "repeat": 2,
         "blocks": {"SSM": {"mixer": {"name": "b2s6", "d_state": 16, "heads": 8,
                                      "discretization": "zoh"}, "norm": "layernorm"}}}, 32,
        "yu2025 B2S6 (h=8 blocks) two-layer LM, d=64 N=16, MQAR L=64, batch 32", (2, 4),
    ),
}


def step_bytes(cfg, info, batch: int, members: list[int], device: str | None = None
               ) -> tuple[int, int]:
    """(bytes of the models of ``members`` (one model per entry, of that many members) with
    their gradients and Adam moments, bytes of the largest one's training step: its activations,
    the planner's estimates ``models.activation_floats``), float32, all models built at once.
    ``device``: the one the step runs on (the fused scan keeps fewer states on CPU,
    ``scan_path``); None: the largest estimate of any device."""
    from contextlib import nullcontext

    from ..models import activation_floats, fixed_floats, param_count
    from ..models.mixers.common import scan_path

    params = 4 * 4 * param_count(cfg, info) * sum(members)
    with nullcontext() if device is None else scan_path(device):
        acts = 4 * max(members) * (batch * activation_floats(cfg, info) + fixed_floats(cfg, info))
    return params, acts


def memory_problem(name: str, packs: list[int], device: str, available: int | None = None
                   ) -> str | None:
    """Why measuring ``packs`` of workload ``name`` would not fit in memory (None when it
    fits or the memory is unknown): every contender's model is built at once (weights,
    gradients and Adam moments of 1 + sum(packs) members) and the largest pack's training step
    holds its activations (the planner's estimates, ``models.activation_floats``). Without it
    `bench mqar-full-L256 --packs 256` (about 30 GB) failed with an allocator traceback, or
    woke the OOM killer."""
    from ..train import _gb, available_memory

    w = WORKLOADS[name]
    info = build_task(w.task).info
    cfg = MODELS[w.model["name"]].Config(**w.model)
    params, acts = step_bytes(cfg, info, w.batch, [1, *packs], device)
    have = available_memory(device) if available is None else available
    if have is None or params + acts <= have:
        return None
    return (f"--packs {','.join(map(str, packs))}: workload {name} needs about "
            f"{_gb(params + acts)} of memory on {device} (the models of every pack size with "
            f"their gradients and Adam moments {_gb(params)}, a step of the pack of "
            f"{max(packs)} {_gb(acts)}); only {_gb(have)} is available: measure smaller packs")


def _setup(w: Workload, E: int, device: str):
    task = build_task(w.task)
    cfg = MODELS[w.model["name"]].Config(**w.model)
    model = build_model(cfg, task.info, E, list(range(E))).to(device)
    seeds = torch.arange(E, device=device)
    return task, model, seeds


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def plain_step(w: Workload, device: str):
    """One step of one model trained the simple way (a callable)."""
    task, model, seeds = _setup(w, 1, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.arange(w.batch, device=device)[None]
    n = [0]

    def step() -> None:
        n[0] += 1
        b = task.sample(seeds, TRAIN, idx + n[0] * w.batch)
        loss = training_loss(model, b, None, None)[0].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        _sync(device)

    return step


def packed_step_fn(w: Workload, E: int, device: str):
    """One step of a pack of E members with the engine's per-member optimiser (a callable)."""
    task, model, seeds = _setup(w, E, device)
    inner = packed_step(task, model, seeds, w.batch)
    n = [0]

    def step() -> None:
        n[0] += 1
        inner(n[0])
        _sync(device)

    return step


def run_bench(name: str, device: str, packs: list[int], seconds: float, out: Path | None,
              echo=print, threads: int | None = 1) -> dict:
    """Time plain and packed steps interleaved; ``seconds``: rough measuring time per contender
    (sets the number of rounds, 3..20); ``threads``: intra-op threads (None: leave as is).
    Denormals are flushed while it runs (as in the workers) and not afterwards."""
    if threads:
        torch.set_num_threads(threads)
    tuned = tune_malloc()  # the training workers' process settings (every contender alike)
    try:
        return _run_bench(name, device, packs, seconds, out, echo, tuned, flush_denormals())
    finally:
        torch.set_flush_denormal(False)


def _run_bench(name: str, device: str, packs: list[int], seconds: float, out: Path | None,
               echo, tuned: bool, ftz: bool) -> dict:
    from .timing import interleaved

    w = WORKLOADS[name]
    torch.manual_seed(0)
    fns = {"plain": plain_step(w, device)}
    fns.update({f"E={E}": packed_step_fn(w, E, device) for E in packs})
    t_one = max(1e-6, max(_time_once(f) for f in fns.values()))  # warm-up, and the slowest step
    counts = {k: count(f) for k, f in fns.items()}  # FLOPs and bytes of one step (op by op)
    from .timing import copy_bandwidth, cpu_clock, matmul_peak

    peak, bandwidth = matmul_peak(device=device), copy_bandwidth(device=device)
    repeats = max(3, min(20, int(seconds / t_one)))
    st = interleaved(fns, repeats=repeats, warmup=0, threads=torch.get_num_threads())
    cpu = cpu_clock(device)  # one CPU thread: the CPU clock; several, or a GPU: the wall clock
    per_step = {k: (v.cpu_median if cpu else v.wall_median) for k, v in st.items()}
    plain = 1.0 / per_step["plain"]

    def work(k: str) -> dict:
        c = counts[k]
        gf = c.flops / per_step[k] / 1e9
        return {"gflop_per_step": c.flops / 1e9, "gbytes_per_step": c.bytes / 1e9,
                "intensity": c.intensity, "ops_per_step": c.ops, "gflops": gf,
                "fraction_of_peak": gf / peak}

    echo(f"{w.what} on {device}, {torch.get_num_threads()} thread(s), {repeats} interleaved rounds, "
         f"{'CPU' if cpu else 'wall'}-clock medians; float32 GEMM peak {peak:.1f} GFLOP/s, copy "
         f"bandwidth {bandwidth:.1f} GB/s")
    pw = work("plain")
    echo(f"  plain (one model at a time): {plain:10.1f} run-steps/s            {st['plain'].fmt()}"
         f"  {pw['gflops']:6.2f} GFLOP/s ({100 * pw['fraction_of_peak']:.1f}% of peak)")
    rows = []
    for E in packs:
        s_ = st[f"E={E}"]
        r = E / per_step[f"E={E}"]
        wk = work(f"E={E}")
        rows.append({"pack": E, "run_steps_per_s": r, "ratio": r / plain, **s_.ms(), **wk})
        echo(f"  packed E={E:<4d}               {r:10.1f} run-steps/s   x{r / plain:6.2f}   {s_.fmt()}"
             f"  {wk['gflops']:6.2f} GFLOP/s ({100 * wk['fraction_of_peak']:.1f}% of peak)")
    best = max(rows, key=lambda r: r["run_steps_per_s"])
    rec = {
        "workload": name,
        "description": w.what,
        "device": device,
        "machine": torch.cuda.get_device_name() if device.startswith("cuda") else cpu_model(),
        "threads": torch.get_num_threads(),
        "malloc_tuned": tuned,
        "denormals_flushed": ftz,
        "torch": torch.__version__,
        "backend": "torch",
        "commit": git_commit(),
        "timing": f"interleaved, {repeats} rounds, {'cpu' if cpu else 'wall'}-clock medians",
        "matmul_peak_gflops": peak,
        "copy_bandwidth_gbs": bandwidth,
        "plain_run_steps_per_s": plain,
        "plain": {**st["plain"].ms(), **pw},
        "packed": rows,
        "best_ratio": best["ratio"],
        "best_pack": best["pack"],
        "time": utc_time(),
    }
    if out is not None:
        write_record(out, rec)
    return rec


def write_record(out: Path, rec: dict) -> None:
    """Write a packs benchmark record ``rec`` into ``out``: ``<workload>-<cpu|cuda>.json`` and
    its ``.csv``, the pair together while the folder is held (``folder_lock``), as `bench
    roofline` holds it to read the records: two benches of one workload ending together left
    one's JSON beside the other's CSV."""
    name, device = rec["workload"], rec["device"]
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{name}-{'cuda' if device.startswith('cuda') else 'cpu'}"
    lines = ["workload,device,machine,torch,commit,threads,mode,pack,run_steps_per_s,ratio"]
    # the machine always quoted (as the committed records have it), a quote inside doubled: a
    # CPU or GPU name holding '"' ended the field there, and its comma made one column more
    machine = '"' + str(rec["machine"]).replace('"', '""') + '"'
    base = f"{name},{device},{machine},{rec['torch']},{rec['commit']},{rec['threads']}"
    lines.append(f"{base},plain,1,{rec['plain_run_steps_per_s']:.2f},1.0")
    lines += [f"{base},packed,{r['pack']},{r['run_steps_per_s']:.2f},{r['ratio']:.2f}"
              for r in rec["packed"]]
    with folder_lock(out, RECORDS_LOCK):
        atomic_write_text(out / f"{stem}.json", json.dumps(rec, indent=1))
        atomic_write_text(out / f"{stem}.csv", "\n".join(lines) + "\n")


def _time_once(step) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0
