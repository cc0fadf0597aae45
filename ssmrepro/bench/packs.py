"""Tool (bench): ``ssmrepro bench`` — packed training against the simple way, same run.

Run-steps per second of packed training against one model at a time.

(a) plain: one model at a time — an E = 1 model, ``torch.optim.AdamW``, ``clip_grad_norm_``, a
    fresh batch per step (what a hand-written loop does);
(b) packed: the engine's step (PackedAdam, per-member clipping and LR) on packs of E members.
run-steps/s = E × steps/s. Results go to results/bench/<workload>-<device>.json and .csv with the
machine, torch version, backend and commit.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..engine.local import git_commit
from ..models import MODELS, build_model
from ..tasks import build_task
from ..tasks.base import TRAIN
from ..train import member_losses, packed_step, supervised_logits


@dataclass(frozen=True)
class Workload:
    name: str
    task: dict
    model: dict
    batch: int
    what: str


WORKLOADS = {
    "keep-nth-d8": Workload(
        "keep-nth-d8", {"name": "keep_nth", "n": 5, "T": 50, "vocab": 128},
        {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 8, "pe": "index"}, 16,
        "huang2025 KEEP n-TH, S6 d=8 N=8, T=50, batch 16",
    ),
    "mqar-linear": Workload(
        "mqar-linear", {"name": "mqar", "vocab": 512, "L": 64, "kappa": 16},
        {"name": "linear_mamba", "d_model": 32, "d_state": 16}, 128,
        "koren2026 fig6 simplified linear Mamba, D=32 N=16, regime 0, batch 128",
    ),
    "mqar-full-L256": Workload(
        "mqar-full-L256", {"name": "mqar", "vocab": 512, "L": 256, "kappa": 16},
        {"name": "mamba_lm", "d_model": 64, "d_state": 16}, 16,
        "full Mamba layer on MQAR, d=64 N=16 L=256, batch 16",
    ),
}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _setup(w: Workload, E: int, device: str):
    task = build_task(w.task)
    cfg = MODELS[w.model["name"]].Config(**w.model)
    model = build_model(cfg, task.info, E, list(range(E))).to(device)
    seeds = torch.arange(E, device=device)
    return task, model, seeds


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def plain_rate(w: Workload, device: str, seconds: float) -> float:
    """Steps/s of one model trained the simple way."""
    task, model, seeds = _setup(w, 1, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.arange(w.batch, device=device)[None]

    def step(i: int) -> None:
        b = task.sample(seeds, TRAIN, idx + i * w.batch)
        loss = member_losses(*supervised_logits(model, b.x, b.y))[0].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return _rate(step, device, seconds)


def packed_rate(w: Workload, E: int, device: str, seconds: float) -> float:
    """Run-steps/s of a pack of E members with the engine's per-member optimiser."""
    task, model, seeds = _setup(w, E, device)
    return E * _rate(packed_step(task, model, seeds, w.batch), device, seconds)


def _rate(step, device: str, seconds: float) -> float:
    step(0)  # warm-up
    _sync(device)
    n, t0 = 0, time.perf_counter()
    while True:
        step(n + 1)
        n += 1
        if n >= 3 and time.perf_counter() - t0 >= seconds:
            break
    _sync(device)
    return n / (time.perf_counter() - t0)


def run_bench(name: str, device: str, packs: list[int], seconds: float, out: Path | None,
              echo=print) -> dict:
    w = WORKLOADS[name]
    torch.manual_seed(0)
    plain = plain_rate(w, device, seconds)
    echo(f"{w.what} on {device}")
    echo(f"  plain (one model at a time): {plain:10.1f} run-steps/s")
    rows = []
    for E in packs:
        r = packed_rate(w, E, device, seconds)
        rows.append({"pack": E, "run_steps_per_s": r, "ratio": r / plain})
        echo(f"  packed E={E:<4d}               {r:10.1f} run-steps/s   x{r / plain:6.1f}")
    best = max(rows, key=lambda r: r["run_steps_per_s"])
    rec = {
        "workload": name,
        "description": w.what,
        "device": device,
        "machine": torch.cuda.get_device_name() if device.startswith("cuda") else cpu_name(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "backend": "torch",
        "commit": git_commit(),
        "seconds_per_measurement": seconds,
        "plain_run_steps_per_s": plain,
        "packed": rows,
        "best_ratio": best["ratio"],
        "best_pack": best["pack"],
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{name}-{'cuda' if device.startswith('cuda') else 'cpu'}"
        (out / f"{stem}.json").write_text(json.dumps(rec, indent=1))
        lines = ["workload,device,machine,torch,commit,mode,pack,run_steps_per_s,ratio"]
        base = f"{name},{device},\"{rec['machine']}\",{rec['torch']},{rec['commit']}"
        lines.append(f"{base},plain,1,{plain:.2f},1.0")
        lines += [f"{base},packed,{r['pack']},{r['run_steps_per_s']:.2f},{r['ratio']:.2f}" for r in rows]
        (out / f"{stem}.csv").write_text("\n".join(lines) + "\n")
    return rec
