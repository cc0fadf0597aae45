"""Stage 3 (engine): group runs into packs.

Runs with equal pack keys (identical shapes) train as one stacked model. How many per pack (E) and
in which micro-batches (m) comes from the measured cost model (``engine.costs``) when the engine
calibrates, else from the memory estimate (E as large as memory allows, whole batches)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .costs import Choice, CostModel


@dataclass
class Pack:
    key: str
    runs: list
    micro_batch: int | None = None  # sequences per chunk of a step's batch (None: whole batch)
    step_s: float | None = None  # measured seconds per step at this (E, m), when calibrated

    def __len__(self) -> int:
        return len(self.runs)


def member_bytes(run) -> int:
    """Rough activation memory of one member per training step (float32 bytes, with autograd):
    batch size × ``models.activation_floats`` (the blocks' mixer estimates + embeddings / logits)."""
    from ..models import activation_floats
    from ..tasks import build_task

    info = build_task(run.task).info
    return 4 * run.train.batch_size * activation_floats(run.model, info)


@dataclass(frozen=True)
class MemoryNeed:
    """The planner's estimate of one run's memory at its largest (one member of a pack)."""

    params: int  # parameters of one member
    param_bytes: int  # weights, gradients and the two Adam moments
    train_bytes: int  # activations kept for backward by one training step (whole batch)
    eval_bytes: int  # what one evaluation batch surely holds (no autograd; a lower bound)

    @property
    def total(self) -> int:
        return self.param_bytes + max(self.train_bytes, self.eval_bytes)


def memory_need(run) -> MemoryNeed:
    """Bounded estimate (no tensor is allocated; fast for any size): parameters x 4 copies x
    bytes (``models.param_count``, counted on the meta device) + the larger of a training step's
    activations (``member_bytes``: the mixers' own estimates) and what an evaluation batch surely
    holds (``models.eval_floats``)."""
    from ..models import eval_floats, param_count
    from ..tasks import build_task

    info = build_task(run.task).info
    width = 8 if run.train.dtype == "float64" else 4
    n = param_count(run.model, info)
    train = member_bytes(run) * width // 4
    ev = width * run.train.eval_batch_size * eval_floats(run.model, info)
    return MemoryNeed(n, 4 * width * n, train, ev)


def available_memory(device: str) -> int | None:
    """Bytes this process could still allocate on ``device``: free GPU memory on CUDA, else the
    kernel's MemAvailable (Linux) or free physical pages; None where unknown."""
    if device.startswith("cuda"):
        import torch

        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (RuntimeError, AssertionError):
            return None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def memory_problems(runs: list, device: str, available: int | None = None) -> list[str]:
    """'key: reason' for every shape of ``runs`` whose one run alone would not fit in the
    memory available on ``device`` (``available``: bytes, default measured now). One estimate per
    pack key; runs whose task data is absent here are left to the run (it loads the data)."""
    from ..tasks import DataUnavailable

    groups: dict[str, object] = {}
    for r in runs:
        groups.setdefault(r.pack_key(), r)
    if not groups:
        return []
    avail = available_memory(device) if available is None else available
    if avail is None:
        return []
    out = []
    for r in groups.values():
        try:
            need = memory_need(r)
        except DataUnavailable:
            continue
        if need.total <= avail:
            continue
        what = "model" if need.param_bytes >= max(need.train_bytes, need.eval_bytes) else (
            "train.batch_size" if need.train_bytes >= need.eval_bytes else "train.eval_batch_size")
        label = f" {r.label}" if r.label else ""
        out.append(
            f"{what}: run{label} needs about {_gb(need.total)} of memory on {device}: "
            f"{need.params:,} parameters x 4 copies (weights, gradients, Adam moments) = "
            f"{_gb(need.param_bytes)}, plus activations of a training step (batch "
            f"{r.train.batch_size}) {_gb(need.train_bytes)} or of an evaluation batch "
            f"({r.train.eval_batch_size}) {_gb(need.eval_bytes)}; only {_gb(avail)} is "
            "available. Make the model or the sequences smaller (model.d_model, model.n_layers, "
            "task length or vocabulary) or the batches (train.batch_size, "
            "train.eval_batch_size)")
    return out


def _budget(device: str) -> int:
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return free // 2
    return 2 << 30


def auto_pack_size(runs: list, device: str, budget_bytes: int | None = None) -> int:
    """Largest pack of these (same-shape) runs that fits the memory budget (CPU: 2 GiB, GPU:
    half its free memory); at most 32 on CPU, 256 on GPU; 1 when the task's data is absent here
    (the size needs the sequence length, which a dataset knows once loaded)."""
    if not runs:
        return 1
    from ..tasks import DataUnavailable

    budget = budget_bytes if budget_bytes is not None else _budget(device)
    cap = 256 if device.startswith("cuda") else 32
    try:
        per_member = member_bytes(runs[0])
    except DataUnavailable:  # a dataset not present here (a dry run of a paper profile): the
        return 1  # real run loads the data and sizes its packs then
    return max(1, min(cap, budget // max(1, per_member)))


def plan(runs: list, pack_size: int | None = None, device: str = "cpu",
         costs: CostModel | None = None, budget_bytes: int | None = None) -> list[Pack]:
    """Packs in first-appearance order of their key. Each group of same-shape runs is cut into
    packs of ``pack_size`` runs or of the size the cost model (``costs``; else the memory
    estimate) chooses, with the chosen micro-batch. ``budget_bytes``: the memory budget (default:
    this machine's, see ``auto_pack_size``; the Ray engine passes the budget measured on a worker
    that owns the device)."""
    groups: dict[str, list] = {}
    for r in runs:
        groups.setdefault(r.pack_key(), []).append(r)
    packs = []
    for key, rs in groups.items():
        cap = auto_pack_size(rs, device, budget_bytes)
        if costs is not None:
            c = costs.choose(rs, cap, pack_size)
        else:
            c = Choice(pack_size or cap, None, None, "given" if pack_size else "memory estimate")
        for i in range(0, len(rs), c.size):
            chunk = rs[i : i + c.size]
            packs.append(Pack(key, chunk, c.micro_batch, c.step_s if len(chunk) == c.size else None))
    return packs


def estimate_seconds(packs: list[Pack], device: str, samples: int = 3) -> tuple[float, str]:
    """Wall-clock estimate for ``packs``: time a few steps of sample packs, scale by cost.

    The per-step cost of a pack is modelled as proportional to E × member_bytes (activation
    volume); the constant is measured on up to ``samples`` packs (smallest, largest, median).
    Evaluation time is not modelled. Returns (seconds, one-line method description).
    """
    from ..train import time_steps

    if not packs:
        return 0.0, "nothing to train"
    if all(p.step_s is not None for p in packs):  # calibrated: every pack's step was timed
        total = sum(p.step_s * max(r.train.total_steps for r in p.runs) for p in packs)
        return total, "the cost model's measured step times; evals not included"
    cost = [len(p) * max(member_bytes(r) for r in p.runs) for p in packs]
    order = sorted(range(len(packs)), key=lambda i: cost[i])
    picks = sorted({order[0], order[len(order) // 2], order[-1]})[:samples]
    rates = []
    for i in picks:
        sec = time_steps(packs[i].runs, device)
        rates.append(sec / cost[i])
    rate = sorted(rates)[len(rates) // 2]
    total = sum(c * rate * max(r.train.total_steps for r in p.runs) for c, p in zip(cost, packs))
    return total, (f"measured {len(picks)} packs ({', '.join(f'{r * 1e9:.2f}' for r in rates)} "
                   f"s per GB-step), scaled by pack size × activation volume; evals not included")
