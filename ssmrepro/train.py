"""Stage 3b: the one training loop, for a pack of E runs with identical shapes.

Each member keeps its own init seed, data stream, learning-rate schedule, betas/eps/weight decay,
gradient clipping, label smoothing, step budget and early stop; a member that stops is frozen and its
metrics are those at its stop step. NaN/inf loss marks the member ``diverged`` at that step and the
others go on. Loss and accuracy only count supervised positions (targets != -100).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .optim import LRSchedule, PackedAdam, clip_per_member
from .tasks import build_task, rng
from .tasks.base import IGNORE, TEST, TRAIN, VAL

_INIT_STREAM, _DATA_STREAM, _PERM_STREAM = 1, 2, 3


def derived_seed(seed: int, stream: int) -> int:
    """A 32-bit seed for one purpose (init, data, ...) derived from the run seed."""
    return int(rng.key(torch.tensor([seed]), stream)[0])


def supervised_logits(model, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits only where some target is supervised: (E, B, K, C) and targets (E, B, K).

    K = the largest number of supervised positions of any sequence; sequences with fewer get
    ignored padding. Exact (the loss never reads other positions) and much cheaper when few
    positions are supervised (MQAR: κ of L); falls back to all positions otherwise.
    """
    h = model.features(x)  # (E, B, L, d)
    mask = y != IGNORE
    K = int(mask.sum(-1).max())
    if K * 2 > y.shape[-1]:
        return model.readout(h), y
    pos = torch.argsort(mask.to(torch.int8), dim=-1, descending=True, stable=True)[..., :K]
    hs = h.gather(2, pos.unsqueeze(-1).expand(*pos.shape, h.shape[-1]))  # (E, B, K, d)
    return model.readout(hs), y.gather(2, pos)


def member_losses(logits: torch.Tensor, y: torch.Tensor, smoothing: torch.Tensor | None = None):
    """Per-member mean loss and accuracy over supervised positions.

    logits (E, B, L, C), y (E, B, L) -> loss (E,), correct (E,), count (E,). With ``smoothing`` (E,)
    the loss is torch's label-smoothed cross entropy, (1-ε)·nll + ε·mean_c(-log p_c).
    """
    E = logits.shape[0]
    mask = y != IGNORE
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (E, B, L)
    if smoothing is not None:
        eps = smoothing.view(E, 1, 1).to(logp.dtype)
        nll = (1 - eps) * nll + eps * (-logp.mean(-1))
    m = mask.to(logp.dtype)
    count = m.reshape(E, -1).sum(1)
    loss = (nll * m).reshape(E, -1).sum(1) / count.clamp(min=1)
    correct = ((logits.argmax(-1) == y) & mask).reshape(E, -1).sum(1)
    return loss, correct, count


@torch.no_grad()
def evaluate(model, task, data_seeds, split: int, size: int, batch: int) -> tuple[torch.Tensor, ...]:
    """Mean loss and accuracy per member on samples 0..size-1 of ``split``: (E,), (E,)."""
    model.eval()
    E = data_seeds.shape[0]
    tot_loss = torch.zeros(E, dtype=torch.float64, device=data_seeds.device)
    tot_correct = torch.zeros_like(tot_loss)
    tot_count = torch.zeros_like(tot_loss)
    for start in range(0, size, batch):
        idx = torch.arange(start, min(size, start + batch), device=data_seeds.device)
        b = task.sample(data_seeds, split, idx.expand(E, -1))
        loss, correct, count = member_losses(*supervised_logits(model, b.x, b.y))
        tot_loss += loss.double() * count
        tot_correct += correct
        tot_count += count
    model.train()
    n = tot_count.clamp(min=1)
    return tot_loss / n, tot_correct / n


def _compare(v: float, op: str, thr: float) -> bool:
    return {"<": v < thr, "<=": v <= thr, ">": v > thr, ">=": v >= thr}[op]


ProgressFn = Callable[[int, int, int], None]


def train_pack(
    runs: list,
    device: str = "cpu",
    progress: ProgressFn | None = None,
    heartbeat: Callable[[], None] | None = None,
    analyses: tuple[str, ...] = (),
    keep: dict | None = None,
) -> list[dict[str, Any]]:
    """Train the runs of one pack together; returns one result dict per run (same order)."""
    from .analysis import ANALYSES  # local: analysis imports models
    from .models import build_model, count_params

    t_start = time.time()
    E, r0 = len(runs), runs[0]
    tc0 = r0.train
    dtype = torch.float64 if tc0.dtype == "float64" else torch.float32
    dev = torch.device(device)
    task = build_task(r0.task)
    info = task.info
    model = build_model(r0.model, info, E, [derived_seed(r.seed, _INIT_STREAM) for r in runs])
    model = model.to(device=dev, dtype=dtype)
    n_params = count_params(model, E)
    params = [p for p in model.parameters() if p.requires_grad]
    data_seeds = torch.tensor([derived_seed(r.seed, _DATA_STREAM) for r in runs], device=dev)

    vec = lambda xs: torch.tensor(xs, dtype=torch.float64, device=dev)  # noqa: E731
    opt = PackedAdam(
        params,
        vec([r.train.betas[0] for r in runs]),
        vec([r.train.betas[1] for r in runs]),
        vec([r.train.eps for r in runs]),
        vec([r.train.weight_decay for r in runs]),
        decoupled=tc0.optimizer == "adamw",
        lr_scale={
            g: vec([r.train.lr_scale.get(g, 1.0) for r in runs])
            for g in sorted({g for r in runs for g in r.train.lr_scale})
        },
    )
    totals = [r.train.total_steps for r in runs]
    T = max(totals)
    lrs = LRSchedule(
        [r.train.lr for r in runs], [r.train.schedule for r in runs], totals,
        [r.train.schedule.min_lr for r in runs],
    )
    clip = vec([r.train.grad_clip or math.inf for r in runs])
    smoothing = vec([r.train.label_smoothing for r in runs])
    totals_t = torch.tensor(totals, device=dev)
    limits = [r.train.time_limit_s for r in runs if r.train.time_limit_s]
    time_limit = min(limits) if limits else None

    active = torch.ones(E, dtype=torch.bool, device=dev)
    status = ["ok"] * E
    stop_reason: list[str | None] = [None] * E
    stop_step: list[int | None] = [None] * E
    history: list[list[list[float]]] = [[] for _ in range(E)]
    train_loss = [math.nan] * E
    es = tc0.early_stop
    B = tc0.batch_size
    spe = tc0.steps_per_epoch
    perm_epoch, perm = -1, None
    last_beat = time.time()

    def stop(e: int, reason: str, step: int) -> None:
        active[e] = False
        stop_reason[e] = reason
        stop_step[e] = step

    def run_eval(step: int) -> None:
        vl, va = evaluate(model, task, data_seeds, VAL, tc0.val_size, tc0.eval_batch_size)
        for e in range(E):
            if active[e]:
                history[e].append([step, float(vl[e]), float(va[e])])
                if es and _compare(float(vl[e] if es.metric == "val.loss" else va[e]), es.op,
                                   es.threshold):
                    stop(e, "early_stop", step)

    step = 0
    while True:
        done_now = torch.nonzero(active & (totals_t <= step)).flatten().tolist()
        if done_now:
            vl, va = evaluate(model, task, data_seeds, VAL, tc0.val_size, tc0.eval_batch_size)
            for e in done_now:
                history[e].append([step, float(vl[e]), float(va[e])])
                stop(e, "max_steps", step)
        if not bool(active.any()):
            break
        if step % tc0.eval_every == 0:
            run_eval(step)
            if not bool(active.any()):
                break
        if time_limit is not None and time.time() - t_start > time_limit:
            for e in torch.nonzero(active).flatten().tolist():
                stop(e, "time_limit", step)
            break
        # 1. batch: fresh samples per step, or one epoch-permuted view of the fixed training set
        if spe is None:
            idx = (step * B + torch.arange(B, device=dev)).expand(E, -1)
        else:
            epoch, pos = divmod(step, spe)
            if epoch != perm_epoch:
                k = rng.key(data_seeds, _PERM_STREAM, epoch)
                perm, perm_epoch = rng.permutation_keys(k, tc0.train_size), epoch
            idx = perm[:, pos * B : (pos + 1) * B]
        batch = task.sample(data_seeds, TRAIN, idx)
        # 2. forward, per-member loss; members with non-finite loss diverge and are frozen
        loss, _, _ = member_losses(*supervised_logits(model, batch.x, batch.y), smoothing)
        loss_val = loss.detach()
        finite = torch.isfinite(loss)
        for e in torch.nonzero(active & ~finite).flatten().tolist():
            status[e] = "diverged"
            stop(e, "diverged", step)
        # 3. backward of the sum (members have disjoint parameters), clip, update active members
        torch.where(active, loss, torch.zeros_like(loss)).sum().backward()
        gnorm = clip_per_member(params, clip)
        for e in torch.nonzero(active & ~torch.isfinite(gnorm)).flatten().tolist():
            status[e] = "diverged"
            stop(e, "diverged", step)
        opt.step(lrs.at(step).to(dev), active)
        for p in params:
            p.grad = None
        for e in torch.nonzero(active).flatten().tolist():
            train_loss[e] = float(loss_val[e])
        step += 1
        if progress is not None and (step % 50 == 0 or step == T):
            progress(step, T, int(active.sum()))
        if heartbeat is not None and time.time() - last_beat > 30:
            heartbeat()
            last_beat = time.time()

    # final metrics: stopped members are frozen, so evaluating now = evaluating at their stop step
    vl, va = evaluate(model, task, data_seeds, VAL, tc0.val_size, tc0.eval_batch_size)
    tl, ta = evaluate(model, task, data_seeds, TEST, tc0.test_size, tc0.eval_batch_size)
    extra = {name: ANALYSES[name](model, task, data_seeds) for name in analyses}
    wall = time.time() - t_start
    if keep is not None:  # tests and probes can inspect the trained pack
        keep["model"] = model
    out = []
    for e in range(E):
        ok = status[e] == "ok"
        accs = [h[2] for h in history[e]]
        metrics = {
            "val.loss": float(vl[e]) if ok else math.nan,
            "val.acc": float(va[e]) if ok else math.nan,
            "val.best_acc": max(accs + ([float(va[e])] if ok else [])) if (accs or ok) else math.nan,
            "test.loss": float(tl[e]) if ok else math.nan,
            "test.acc": float(ta[e]) if ok else math.nan,
            "train.loss": train_loss[e],
        }
        s = stop_step[e] if stop_step[e] is not None else step
        out.append(
            {
                "status": status[e],
                "stop_reason": stop_reason[e] or "max_steps",
                "stop_step": s,
                "epochs": (s / spe) if spe else None,
                "metrics": metrics,
                "history": history[e],
                "n_params": n_params,
                "pack_size": E,
                "pack_wall_s": wall,
                "analysis": {k: v[e] for k, v in extra.items()},
            }
        )
    return out




def packed_step(task, model, data_seeds: torch.Tensor, batch: int, lr: float = 1e-3):
    """A callable ``step(i)``: one training step of the pack on fresh batch i (sample, forward,
    backward, per-member clipping, PackedAdam). Used to time packs (dry-run estimate, bench)."""
    params = [p for p in model.parameters() if p.requires_grad]
    E, dev = data_seeds.shape[0], data_seeds.device
    one = torch.ones(E, dtype=torch.float64, device=dev)
    opt = PackedAdam(params, 0.9 * one, 0.999 * one, 1e-8 * one, 0.01 * one, decoupled=True)
    active = torch.ones(E, dtype=torch.bool, device=dev)
    idx = torch.arange(batch, device=dev).expand(E, -1)

    def step(i: int) -> None:
        b = task.sample(data_seeds, TRAIN, idx + i * batch)
        loss, _, _ = member_losses(*supervised_logits(model, b.x, b.y))
        loss.sum().backward()
        clip_per_member(params, one)
        opt.step(lr * one, active)
        for p in params:
            p.grad = None

    return step


def time_steps(runs: list, device: str = "cpu", n_steps: int = 3) -> float:
    """Seconds per training step of this pack (after one warm-up step); nothing is recorded."""
    from .models import build_model

    E, r0 = len(runs), runs[0]
    dtype = torch.float64 if r0.train.dtype == "float64" else torch.float32
    dev = torch.device(device)
    task = build_task(r0.task)
    model = build_model(r0.model, task.info, E, [derived_seed(r.seed, _INIT_STREAM) for r in runs])
    model = model.to(device=dev, dtype=dtype)
    seeds = torch.tensor([derived_seed(r.seed, _DATA_STREAM) for r in runs], device=dev)
    step = packed_step(task, model, seeds, r0.train.batch_size)
    step(0)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for i in range(1, n_steps + 1):
        step(i)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return (time.perf_counter() - t0) / n_steps
