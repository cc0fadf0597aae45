"""Library (kernels): a packed linear read-out fused with its cross-entropy loss, in chunks.

For a pack of E members, features h (E, M, d), a linear head W (E, d, C) (+ bias (E, C)) and
integer targets y (E, M) (``IGNORE`` = unsupervised), the per-member training loss

    z = h W + b,   lse_m = log Σ_c exp z_mc,
    loss_e = Σ_m w_em [ (1 - ε_e) (lse_m - z_m,y_m) + ε_e (lse_m - mean_c z_mc) ]

with row weights w (E, M) (1 / the member's supervised count at supervised rows, 0 elsewhere:
torch's mean cross entropy, label-smoothed with ε as ``torch.nn.functional.cross_entropy``).

Why. The logits of a small model are its largest tensor by far (KEEP n-TH: 128 classes from 8
features; the issue-12 LM: 512 from 64), and the textbook path (matmul -> log_softmax -> gather
-> backward: a zero-filled gather gradient, log_softmax backward, a copy for the transposed
matmul) streams five to seven (E, M, C) tensors through memory (26 MB each for a KEEP n-TH pack
of 64), and ``log_softmax``'s ``exp`` takes a slow path (~10x) for inputs below about -87, which
the logits of an index-position model reach (|z| ~ 1000). :class:`_LinearXent` walks
(members × rows) chunks of at most ``chunk`` logits: a chunk's logits are formed, shifted and
exponentiated with ``exp2`` (log2(e)-scaled; ~4x faster than ``exp`` here, with no slow path
while denormals are flushed) while in cache; the backward turns each chunk's exponentials into
p - onehot in place and contracts it at once into dh, dW and db (two matmuls). The exponentials
are kept between the passes (``keep``, default) or recomputed from h (no logits-sized memory).

:func:`linear_xent_ref` is the obvious reference (einsum, log_softmax, gather); tests/test_xent.py
checks values and gradients in float64 for every chunking.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE = -100  # the target value of an unsupervised position (tasks.base.IGNORE)
_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)
CHUNK = 1 << 19  # logits per chunk (2 MiB in float32): measured, see linear_xent
# Features narrower than this get dh by chunk as W pᵀ into a (E, d, M) buffer, transposed back
# once (KEEP n-TH's 5 x (128 -> 8) chunks: 0.11 vs 0.19 ms for p Wᵀ; equal at d = 64)
NARROW_DH = 32


def linear_xent_ref(h: Tensor, W: Tensor, bias: Tensor | None, y: Tensor,
                    smoothing: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(loss (E,), supervised count (E,)) by the textbook route: logits, log_softmax, gather.

    h (E, ..., d), W (E, d, C), bias (E, C) or None, y (E, ...) int64 (IGNORE = unsupervised),
    smoothing (E,) or None."""
    E = h.shape[0]
    z = torch.einsum("e...d,edc->e...c", h, W)
    if bias is not None:
        z = z + bias.view(E, *([1] * (z.dim() - 2)), -1)
    logp = F.log_softmax(z, dim=-1)
    mask = y != IGNORE
    nll = -logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    if smoothing is not None:
        eps = smoothing.view(E, *([1] * (nll.dim() - 1))).to(logp.dtype)
        nll = (1 - eps) * nll + eps * (-logp.mean(-1))
    m = mask.to(logp.dtype)
    count = m.reshape(E, -1).sum(1)
    return (nll * m).reshape(E, -1).sum(1) / count.clamp(min=1), count


def _chunks(E: int, M: int, C: int, chunk: int) -> list[tuple[int, int, int, int]]:
    """(e0, e1, r0, r1): blocks of members × rows with at most ``chunk`` logits (>= one row)."""
    rows = max(1, min(M, chunk // max(1, C)))
    members = max(1, min(E, chunk // max(1, rows * C)))
    return [(e0, min(E, e0 + members), r0, min(M, r0 + rows))
            for e0 in range(0, E, members) for r0 in range(0, M, rows)]


class _LinearXent(torch.autograd.Function):
    """h (E, M, d), W (E, d, C), bias (E, C) | None, y (E, M) int64 >= 0, w (E, M) row weights,
    eps (E,) | None -> loss (E,) (see the module docstring). Saves h, W, bias, y, w and the
    log2-sum-exp of every row.

    Logits are formed in log2 units (W, b scaled by log2(e)), so softmax = exp2(z - lse).
    Forward per chunk: logits (one matmul), row max, shift, exp2, row sum. Backward per chunk:
    logits again, shift by lse, exp2: p in place; p_y -= 1 - ε (one element per row); then two
    matmuls read p: dh = r (p Wᵀ) and [dW; db] += (r [h, 1])ᵀ p, with r the rows' loss weights
    times the incoming gradient. The smoothing's -ε/C for every class is a rank-one correction
    of dh, dW and db applied once (no pass over the logits)."""

    @staticmethod
    def forward(ctx, h: Tensor, W: Tensor, bias: Tensor | None, y: Tensor, w: Tensor,
                eps: Tensor | None, chunk: int, keep: bool) -> Tensor:
        E, M, _ = h.shape
        C = W.shape[-1]
        W2 = W * _LOG2E
        b2 = None if bias is None else (bias * _LOG2E)[:, None]
        lse2 = h.new_empty(E, M)  # log2 Σ_c 2^(z2_c), z2 = z log2(e)
        loss = h.new_zeros(E)
        yi = y.unsqueeze(-1)
        P = h.new_empty(E, M, C) if keep else None  # 2^(z2 - max), kept for the backward
        lsum = h.new_empty(E, M) if keep else None  # log2 Σ_c 2^(z2_c - max)
        for e0, e1, r0, r1 in _chunks(E, M, C, chunk):
            hc = h[e0:e1, r0:r1]
            z = None if P is None else P[e0:e1, r0:r1]  # contiguous: whole rows or one member
            if b2 is None:
                z = torch.bmm(hc, W2[e0:e1], out=z)
            else:
                z = torch.baddbmm(b2[e0:e1], hc, W2[e0:e1], out=z)
            mx = z.amax(-1, keepdim=True)
            z.sub_(mx)
            zy = z.gather(-1, yi[e0:e1, r0:r1]).squeeze(-1)  # z2_y - max
            if eps is not None:
                zmean = z.mean(-1)
            ls = z.exp2_().sum(-1).log2_()  # log2 Σ 2^(z2 - max)
            lse2[e0:e1, r0:r1] = ls + mx.squeeze(-1)
            if lsum is not None:
                lsum[e0:e1, r0:r1] = ls
            nll = ls - zy
            if eps is not None:
                ee = eps[e0:e1, None]
                nll = (1 - ee) * nll + ee * (ls - zmean)
            loss[e0:e1] += (nll * w[e0:e1, r0:r1]).sum(-1)
        ctx.save_for_backward(h, W, bias, y, w, lse2, eps, P, lsum)
        ctx.chunk = chunk
        return loss * _LN2  # log2 units -> nats

    @staticmethod
    def backward(ctx, gloss: Tensor):
        h, W, bias, y, w, lse2, eps, P, lsum = ctx.saved_tensors
        E, M, d = h.shape
        C = W.shape[-1]
        need_h, need_W, need_b = ctx.needs_input_grad[:3]
        r = w * gloss[:, None]  # (E, M): d loss / d (row's loss)
        W2 = W * _LOG2E
        b2 = None if bias is None else (bias * _LOG2E)[:, None]
        inv = None if P is None else torch.exp2(-lsum)  # 1 / Σ_c 2^(z2_c - max)
        Y = torch.cat([h, h.new_ones(E, M, 1)], -1).mul_(r[..., None]).transpose(1, 2)  # r [h, 1]
        hit = h.new_full((E, 1, 1), -1.0) if eps is None else (eps - 1)[:, None, None]
        hit = hit.expand(E, M, 1)  # -(1 - ε): the target's part of p - (1-ε) onehot
        yi = y.unsqueeze(-1)
        Wt = W.transpose(1, 2)  # (E, C, d)
        ghT = h.new_empty(E, d, M) if need_h and d < NARROW_DH else None  # (W pᵀ) by chunk
        gh = torch.empty_like(h) if need_h and ghT is None else None
        gWa = h.new_zeros(E, d + 1, C) if (need_W or need_b) else None  # [dW; db]
        for e0, e1, r0, r1 in _chunks(E, M, C, ctx.chunk):
            hc = h[e0:e1, r0:r1]
            if P is not None:  # 2^(z2 - max) / Σ: the kept buffer becomes the gradient in place
                # (a second backward through the same graph is refused by autograd's version
                # check on P)
                p = P[e0:e1, r0:r1].mul_(inv[e0:e1, r0:r1, None])
            elif b2 is None:
                p = torch.bmm(hc, W2[e0:e1]).sub_(lse2[e0:e1, r0:r1, None]).exp2_()
            else:
                p = torch.baddbmm(b2[e0:e1], hc, W2[e0:e1]).sub_(lse2[e0:e1, r0:r1, None]).exp2_()
            p.scatter_add_(-1, yi[e0:e1, r0:r1], hit[e0:e1, r0:r1])
            if ghT is not None:
                torch.bmm(W[e0:e1], p.transpose(1, 2), out=ghT[e0:e1, :, r0:r1])
            elif need_h:
                gh[e0:e1, r0:r1] = torch.bmm(p, Wt[e0:e1])
            if gWa is not None:
                gWa[e0:e1].baddbmm_(Y[e0:e1, :, r0:r1], p)
        if ghT is not None:  # back to (E, M, d), contiguous, with the rows' weights
            gh = torch.mul(ghT.transpose(1, 2), r[..., None], out=torch.empty_like(h))
        elif need_h:
            gh.mul_(r[..., None])
        if eps is not None:  # the smoothing's -ε/C for every class: rank-one corrections
            if need_h:
                gh.sub_((r * (eps[:, None] / C))[..., None] * W.sum(-1)[:, None, :])
            if gWa is not None:
                gWa.sub_((eps / C)[:, None, None] * Y.sum(2)[..., None])
        gW = gWa[:, :d] if need_W else None
        gb = gWa[:, d] if need_b else None
        return gh, gW, gb, None, None, None, None, None


def linear_xent(h: Tensor, W: Tensor, bias: Tensor | None, y: Tensor,
                smoothing: Tensor | None = None, chunk: int = CHUNK,
                keep: bool = True) -> tuple[Tensor, Tensor]:
    """Same result as :func:`linear_xent_ref` (loss (E,), supervised count (E,)), by
    :class:`_LinearXent` in chunks of at most ``chunk`` logits; the result does not depend on
    ``chunk`` beyond rounding.

    ``W`` may be a transposed view (a tied head: the embedding (E, C, d) transposed).
    ``keep``: keep each chunk's exponentials (one (E, M, C) buffer, the size of the logits the
    textbook path stores) for the backward, else recompute the chunk's logits there (no
    logits-sized memory; one more matmul).

    Measured on the 2-core EPYC VM (float32, one thread, fwd + bwd, CPU-clock medians, FTZ on,
    loaded machine): KEEP n-TH head (d 8 -> 128 classes, 800 rows per member) E = 16: 4.6 ms
    (textbook) -> 3.9 (keep) / 4.3 (recompute); E = 64 with logits of +-1000: 20.4 -> 13.0 / 15.0
    (without FTZ the textbook log_softmax takes 27 ms there: exp's slow path for inputs below
    -87); the issue-12 LM's tied head (d 64 -> 512, 16,384 rows): 50.6 -> 45.5 / 58.7.
    Chunks of 2^18..2^20 logits were within ~5% of each other, smaller ones pay the per-op cost.
    """
    E, d = h.shape[0], h.shape[-1]
    mask = y != IGNORE
    count = mask.reshape(E, -1).sum(1).to(h.dtype)
    w = mask.to(h.dtype) / count.clamp(min=1).view(E, *([1] * (y.dim() - 1)))
    eps = None if smoothing is None else smoothing.to(h.dtype)
    if h.is_cuda:  # chunks are for CPU caches; on a GPU one chunk = a few large kernels
        chunk = max(int(chunk), y.numel() * W.shape[-1])
    loss = _LinearXent.apply(h.reshape(E, -1, d), W, bias, y.clamp(min=0).reshape(E, -1),
                             w.reshape(E, -1), eps, int(chunk), bool(keep))
    return loss, count
