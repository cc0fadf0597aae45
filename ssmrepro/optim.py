"""Library (optim): per-member optimisation for packs — Adam/AdamW, LR schedules, gradient clipping.

Every parameter is an (E, ...) tensor. Member e has its own learning rate, betas, eps, weight decay,
step count, clipping threshold and active flag; an inactive member (early-stopped, diverged, or out of
steps) is frozen: its parameters and moments stay exactly as they were. For E = 1 the update equals
torch.optim.Adam / AdamW (tests/test_optim.py).

Learning-rate groups: a parameter tagged ``p._lr_group = name`` (``models.layers.lr_group``; optionally
only the last-dim columns ``p._lr_group_cols = (start, stop)``) is updated with the member's lr times
``lr_scale[name][e]`` — like a torch.optim param group whose lr is scaled (the decoupled weight decay
step lr·wd is scaled with it, as torch does). Groups not named in ``lr_scale`` use the plain lr.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def schedule_factors(total: int, s, steps: torch.Tensor | None = None) -> torch.Tensor:
    """LR multipliers of one member with step budget ``total``, at ``steps`` (default
    0..total-1): float64, same shape as ``steps``.

    warmup (linear from ``warmup_start`` to 1 over ``warmup_steps``) -> hold at 1 for ``hold_steps``
    -> decay over ``decay_steps`` (default: the rest) by ``kind`` (cosine / linear / constant) to
    ``final_factor`` -> flat at the final value.
    """
    step = torch.arange(total, dtype=torch.float64) if steps is None else steps.double()
    one = torch.ones_like(step)
    if s.warmup_steps:
        warm = s.warmup_start + (1.0 - s.warmup_start) * step / s.warmup_steps
    else:
        warm = one
    t = step - s.warmup_steps - s.hold_steps
    decay = s.decay_steps if s.decay_steps is not None else max(1, total - s.warmup_steps - s.hold_steps)
    frac = (t / max(1, decay)).clamp(0.0, 1.0)
    if s.kind == "cosine":
        shape = 0.5 * (1.0 + torch.cos(math.pi * frac))
    elif s.kind == "linear":
        shape = 1.0 - frac
    else:
        shape = one
    after = one if s.kind == "constant" else s.final_factor + (1.0 - s.final_factor) * shape
    out = torch.where(t < 0, one, after)
    if s.warmup_steps:
        out = torch.where(step < s.warmup_steps, warm, out)
    return out


class LRSchedule:
    """Learning rates of a pack's members, computed in blocks of steps as training goes (memory
    independent of the step budget). ``at(step)`` -> (E,) float64: member e's lr at that step, 0
    beyond its own budget. ``min_lr`` (absolute) rescales the decay so it ends at min_lr instead
    of lr * final_factor."""

    BLOCK = 4096

    def __init__(self, lrs: list[float], schedules: list, totals: list[int],
                 min_lrs: list[float | None]):
        self.members = list(zip(lrs, schedules, totals, min_lrs))
        self._start, self._block = -1, torch.empty(0)

    def rows(self, start: int, stop: int) -> torch.Tensor:
        """(E, stop - start) learning rates for steps start..stop-1."""
        steps = torch.arange(start, stop, dtype=torch.float64)
        out = torch.zeros(len(self.members), stop - start, dtype=torch.float64)
        for e, (lr, s, tot, mn) in enumerate(self.members):
            f = schedule_factors(tot, s, steps)
            vals = lr * f if mn is None else mn + (lr - mn) * (f - s.final_factor) / max(
                1e-12, 1.0 - s.final_factor)
            out[e] = torch.where(steps < tot, vals, torch.zeros_like(vals))
        return out

    def at(self, step: int) -> torch.Tensor:
        if not self._start <= step < self._start + self._block.shape[-1]:
            self._start = step - step % self.BLOCK
            self._block = self.rows(self._start, self._start + self.BLOCK)
        return self._block[:, step - self._start]


def lr_table(lrs: list[float], schedules: list, totals: list[int], min_lrs: list[float | None]):
    """(E, max_total) learning rates (for tests and plots of short schedules)."""
    return LRSchedule(lrs, schedules, totals, min_lrs).rows(0, max(totals))


class PackedAdam:
    """Adam (coupled L2) or AdamW (decoupled decay) with per-member hyper-parameters.

    Args are (E,) tensors; ``decoupled`` selects AdamW. Parameters tagged ``_no_weight_decay``
    (norms, biases, the SSMs' A / D / Δ bias) get no weight decay, except for the members whose
    ``decay_all`` (E,) entry is true (``TrainConfig.decay_all``: every parameter decays, as
    ``torch.optim.AdamW(model.parameters())``). ``lr_scale`` maps a learning-rate group name to
    (E,) multipliers of the members' learning rates for the parameters tagged with that group
    (see the module docstring).
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], betas1, betas2, eps, weight_decay,
                 decoupled: bool, lr_scale: dict[str, torch.Tensor] | None = None,
                 decay_all: torch.Tensor | None = None):
        self.params = [p for p in params if p.requires_grad]
        self.b1, self.b2, self.eps, self.wd = betas1, betas2, eps, weight_decay
        # the weight decay of the parameters tagged _no_weight_decay: 0, or wd for the members
        # that decay every parameter (None: no member does)
        self.wd_tagged = (None if decay_all is None or not bool(decay_all.any())
                          else weight_decay * decay_all.to(weight_decay.dtype))
        self.decoupled = decoupled
        E = self.params[0].shape[0]
        dev = self.params[0].device
        self.steps = torch.zeros(E, dtype=torch.float64, device=dev)
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.scales = [self._scale(p, lr_scale or {}) for p in self.params]

    @staticmethod
    def _scale(p: torch.Tensor, lr_scale: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """lr multiplier broadcastable to p ((E, 1, ..., 1) or (E, 1, ..., k)), or None (= 1)."""
        group = getattr(p, "_lr_group", None)
        if group is None or group not in lr_scale:
            return None
        s = lr_scale[group].to(device=p.device, dtype=torch.float64)  # (E,)
        cols = getattr(p, "_lr_group_cols", None)
        if cols is None:
            return s.view(-1, *([1] * (p.dim() - 1)))
        if cols[1] <= cols[0]:
            return None
        out = torch.ones(p.shape[0], *([1] * (p.dim() - 2)), p.shape[-1], dtype=torch.float64,
                         device=p.device)
        out[..., cols[0] : cols[1]] = s.view(-1, *([1] * (p.dim() - 1)))
        return out

    @staticmethod
    def _view(x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return x.view(-1, *([1] * (p.dim() - 1))).to(p.dtype)

    @torch.no_grad()
    def step(self, lr: torch.Tensor, active: torch.Tensor) -> None:
        """lr: (E,) learning rates; active: (E,) bool — inactive members are left untouched."""
        self.steps += active.to(self.steps.dtype)
        t = self.steps.clamp(min=1)
        bc1 = 1 - self.b1.to(torch.float64) ** t
        bc2 = 1 - self.b2.to(torch.float64) ** t
        # Every member active (the usual step): moments and parameters updated in place, with
        # the same operations in the same order as the masked update below (bit for bit,
        # tests/test_optim.py), without three full-size torch.where selections and copies.
        everyone = bool(active.all())
        for p, m, v, scale in zip(self.params, self.m, self.v, self.scales):
            if p.grad is None:
                continue

            def V(x: torch.Tensor, p: torch.Tensor = p) -> torch.Tensor:  # (E,) -> like p
                return self._view(x, p)

            g = p.grad
            wd = self.wd_tagged if getattr(p, "_no_weight_decay", False) else self.wd
            decay = wd is not None
            if not self.decoupled and decay:
                g = g + V(wd) * p
            b1, b2 = V(self.b1), V(self.b2)
            if everyone:
                m_new = m.mul_(b1).add_((1 - b1) * g)
                v_new = v.mul_(b2).add_((1 - b2) * g * g)
            else:
                m_new = b1 * m + (1 - b1) * g
                v_new = b2 * v + (1 - b2) * g * g
            denom = torch.div(v_new, V(bc2)).sqrt_().add_(V(self.eps))
            if scale is None:
                upd = (V(lr / bc1) * m_new).div_(denom)
                if self.decoupled and decay:
                    upd = upd.add_(V(lr * wd) * p)
            else:  # a scaled learning-rate group: lr_p = lr * scale (same order of operations)
                upd = ((V(lr) * scale).to(p.dtype) / V(bc1) * m_new).div_(denom)
                if self.decoupled and decay:
                    upd = upd.add_((V(lr * wd) * scale).to(p.dtype) * p)
            if everyone:
                p.sub_(upd)
                continue
            act = V(active).bool()
            p.copy_(torch.where(act, p - upd, p))
            m.copy_(torch.where(act, m_new, m))
            v.copy_(torch.where(act, v_new, v))


@torch.no_grad()
def clip_per_member(params: list[torch.nn.Parameter], max_norm: torch.Tensor) -> torch.Tensor:
    """Scale each member's gradients so its global norm is at most max_norm[e] (inf = no clip).

    Same rule as torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), capped at 1.
    Returns the per-member gradient norms before clipping.
    """
    grads = [p.grad for p in params if p.grad is not None]
    E = grads[0].shape[0]
    sq = sum(g.reshape(E, -1).double().pow(2).sum(1) for g in grads)
    norm = sq.sqrt()
    coef = (max_norm.double() / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(E, *([1] * (g.dim() - 1))).to(g.dtype))
    return norm
