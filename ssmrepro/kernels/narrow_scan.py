"""Library (kernels): the fused selective scan for many narrow groups (packs of tiny S6 models),
laid out with batch rows and groups innermost.

Same recurrence, inputs and outputs as ``inplace._SelectiveScanFused`` (u, delta (Bt, L, G, K),
A (G, K, N), B (Bt, L, G, N), C (Bt, L, G, N) or (G, K, N) -> y (Bt, L, G, K)):

    h_t = exp(Δ_t A) ⊙ h_{t-1} + (Δ_t u_t) ⊗ B_t,   y_t = Σ_n C_t[., n] h_t[., n].

Why another layout. A KEEP n-TH pack folds E members of d = 8 channels into E groups of K = 8
channels, N = 8. The tiled kernel keeps its states as (rows, N, groups, K): the outer products
(Δu) ⊗ B and gy ⊗ C and the contractions over K then run with B or C broadcast along the
innermost dimension of 8 elements, and PyTorch's elementwise loops pay their per-row overhead
every 8 elements (measured 1.6 ms for one 0.5 M-element product on the 2-core EPYC VM, ~6x a
contiguous one). Here a state is (N, K, Bt, g) with the batch rows and the tile's groups
innermost: every operand of every product — Δ, u (N-broadcast), B, C (K-broadcast), A (expanded
once per tile to a state) — is contiguous over the Bt·g innermost elements (256 at Bt = 16 and
16 groups), so every bulk op is a long vectorised loop. Inputs are copied once per tile of
groups into that layout ((L, K, Bt, g) and (L, N, Bt, g): 1/N and 1/K of a state per step), and
the results are copied back.

As in the tiled kernel: time blocks of T steps with reused buffers, exp2 of log2(e)-scaled
log-decays, only the states entering each block saved (with the tiles' transposed inputs, 1/N
of a state per step each, so the backward does not transpose them again), the block's states
recomputed in the backward pass, explicit adjoint (see ``inplace._SelectiveScanFused`` for the
gradient formulas). Results equal the sequential reference up to summation order
(tests/test_kernels_tiled.py).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .recurrence import block_adjoint_, block_states_

_LOG2E = 1.0 / math.log(2.0)


def _group_tiles(G: int, gt: int) -> list[tuple[int, int]]:
    return [(g0, min(G, g0 + gt)) for g0 in range(0, G, gt)]


def _kl(x: Tensor, g0: int, g1: int) -> Tensor:
    """(Bt, L, G, K) -> groups g0..g1 as (L, K, Bt, g), contiguous."""
    return x[:, :, g0:g1].permute(1, 3, 0, 2).contiguous()


def _member_major(x: Tensor) -> bool:
    """x (Bt, L, G, *) is a view of member-major memory (G, Bt, L, *): a pack's (E, B, L, d)
    activations (or a slice of their last dimension) permuted, as ``S6Core`` passes them."""
    return x.dim() == 4 and x.shape[2] > 1 and x.stride(2) >= max(
        x.stride(0) * x.shape[0], x.stride(1) * x.shape[1]) and x.stride(0) >= x.stride(1) * x.shape[1]


def _empty_as(x: Tensor, shape: tuple[int, int, int, int], member_major: bool) -> Tensor:
    """An empty (Bt, L, G, n) tensor, member-major memory (G, Bt, L, n) when ``member_major`` (the
    layout of a pack's activations: the scan's results then have the members' layout, so the
    elementwise ops around the scan and their gradients — softplus, the D skip, the residual —
    run on matching strides; softplus' backward measured 7x faster so), else contiguous."""
    Bt, L, G, n = shape
    if member_major:
        return x.new_empty(G, Bt, L, n).permute(1, 2, 0, 3)
    return x.new_empty(Bt, L, G, n)


def _put(dst: Tensor, src: Tensor, g0: int, g1: int) -> None:
    """dst[:, :, g0:g1] = src.permute(2, 0, 3, 1) for a tile's result src (L, n, Bt, g).

    Into member-major dst through a contiguous (Bt, L, n, g) buffer and one 2D transpose of
    (Bt·L·n, g) -> (g, Bt·L·n), which torch copies in cache blocks (a direct 4D permuted copy
    into member-major memory was ~4x slower: 0.77 vs 0.19 ms for a KEEP n-TH pack of 64)."""
    d = dst[:, :, g0:g1]
    if not (_member_major(dst) and d.permute(2, 0, 1, 3).is_contiguous()):
        d.copy_(src.permute(2, 0, 3, 1))
        return
    L, n, Bt, g = src.shape
    tmp = src.permute(2, 0, 1, 3).contiguous()  # (Bt, L, n, g): moves runs of g elements
    d.permute(2, 0, 1, 3).view(g, Bt * L * n).copy_(tmp.view(Bt * L * n, g).t())


def _dot(a: Tensor, b: Tensor, dim: int, out: Tensor) -> Tensor:
    """out = Σ_dim a ⊙ b (b may have size 1 along ``dim``: broadcast) as one multiply and
    len - 1 in-place multiply-adds over slices: reads a once and writes no temporary of a's
    size (mul + sum wrote and re-read one; ~20% faster on (8, 8, 8, 16, 64) states)."""
    bs = (lambda j: b.select(dim, j)) if b.shape[dim] > 1 else (lambda j: b.select(dim, 0))
    torch.mul(a.select(dim, 0), bs(0), out=out)
    for j in range(1, a.shape[dim]):
        out.addcmul_(a.select(dim, j), bs(j))
    return out


def _per_state(x: Tensor, g0: int, g1: int, Bt: int) -> Tensor:
    """(G, K, N) -> groups g0..g1 expanded to a state (N, K, Bt, g), contiguous."""
    p = x[g0:g1].permute(2, 1, 0)  # (N, K, g)
    return p[:, :, None, :].expand(p.shape[0], p.shape[1], Bt, p.shape[2]).contiguous()


class _SelectiveScanNarrow(torch.autograd.Function):
    """u, delta (Bt, L, G, K); A (G, K, N); B (Bt, L, G, N); C (Bt, L, G, N) or (G, K, N);
    ``plan``: ``inplace.ScanPlan`` (``groups`` per tile, block length ``T``) -> y (Bt, L, G, K)."""

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, plan) -> Tensor:
        Bt, L, G, K = u.shape
        N = A.shape[-1]
        c_const = C.dim() == 3
        T = plan.T
        nb = -(-L // T)
        y = _empty_as(u, (Bt, L, G, K), _member_major(u))
        S = N * K * Bt * min(G, plan.groups)  # elements of the largest tile's state
        hbuf, abuf = u.new_empty((T + 1) * S), u.new_empty(T * S)
        dbuf = u.new_empty(T * S // N)
        saved = []
        for g0, g1 in _group_tiles(G, plan.groups):
            gt = g1 - g0
            st = (N, K, Bt, gt)
            sz = N * K * Bt * gt
            uk, dk = _kl(u, g0, g1), _kl(delta, g0, g1)  # (L, K, Bt, g)
            Bk = _kl(B, g0, g1)[:, :, None]  # (L, N, 1, Bt, g)
            Ck = _per_state(C, g0, g1, Bt) if c_const else _kl(C, g0, g1)[:, :, None]
            # out of place: at Bt = K = N = 1 the expanded slice is already contiguous and
            # _per_state returns A's own memory (an in-place scale rescaled the caller's A)
            A2 = _per_state(A, g0, g1, Bt) * _LOG2E  # (N, K, Bt, g)
            Hb = hbuf[: (T + 1) * sz].view(T + 1, *st)
            ab = abuf[: T * sz].view(T, *st)
            Hl, Al = Hb.unbind(0), ab.unbind(0)
            Hs = u.new_empty(nb, *st)  # the state entering each block
            yk = u.new_empty(L, K, Bt, gt)
            Hl[0].zero_()
            for i in range(nb):
                t0, t1 = i * T, min(L, (i + 1) * T)
                n = t1 - t0
                Hs[i].copy_(Hl[0])
                dl = dk[t0:t1]
                du = torch.mul(dl, uk[t0:t1], out=dbuf[: n * sz // N].view(n, K, Bt, gt))
                # decays (n, N, K, Bt, g), input terms, h_t = a_t h_{t-1} + b_t
                block_states_(Hb, Hl, ab, Al, n, (dl[:, None], A2), (du[:, None], Bk[t0:t1]))
                _dot(Hb[1 : n + 1], Ck[None] if c_const else Ck[t0:t1], 1, yk[t0:t1])  # Σ_n C h
                if i + 1 < nb:
                    Hl[0].copy_(Hl[n])
            _put(y, yk, g0, g1)
            saved += [Hs, uk, dk, Bk, Ck]  # the backward reuses the tile's transposed inputs
        ctx.save_for_backward(A, C, *saved)
        ctx.plan = plan
        ctx.member_major = tuple(_member_major(x) for x in (u, delta, B, C))
        return y

    @staticmethod
    def backward(ctx, gy: Tensor):
        A, C, *saved = ctx.saved_tensors
        plan = ctx.plan
        Bt, L, G, K = gy.shape
        N = A.shape[-1]
        c_const = C.dim() == 3
        T = plan.T
        nb = -(-L // T)
        # dL/du, dL/dΔ, dL/dB, dL/dC laid out as u, Δ, B, C (member-major for a pack's views)
        mu, md, mB, mC = ctx.member_major
        gu, gdl = _empty_as(gy, (Bt, L, G, K), mu), _empty_as(gy, (Bt, L, G, K), md)
        gA, gB = torch.empty_like(A), _empty_as(gy, (Bt, L, G, N), mB)
        gC = torch.empty_like(C) if c_const else _empty_as(gy, (Bt, L, G, N), mC)
        S = N * K * Bt * min(G, plan.groups)
        hbuf, abuf = gy.new_empty((T + 1) * S), gy.new_empty(T * S)
        gbuf, wbuf, cbuf = gy.new_empty(T * S), gy.new_empty(T * S), gy.new_empty(S)
        ebuf = gy.new_empty(T * S // N)  # dL/d(Δu) of a block
        tiles = _group_tiles(G, plan.groups)
        for k, (g0, g1) in enumerate(tiles):
            Hs, uk, dk, Bk, Ck = saved[5 * k : 5 * k + 5]
            gt = g1 - g0
            st = (N, K, Bt, gt)
            sz = N * K * Bt * gt
            gyk = _kl(gy, g0, g1)  # (L, K, Bt, g)
            gyb = gyk[:, None]  # (L, 1, K, Bt, g)
            An = _per_state(A, g0, g1, Bt)  # (N, K, Bt, g)
            A2 = An * _LOG2E
            Hb = hbuf[: (T + 1) * sz].view(T + 1, *st)
            ab = abuf[: T * sz].view(T, *st)
            Gb = gbuf[: T * sz].view(T, *st)
            carry = cbuf[:sz].view(st)  # a_{t1} g_{t1}: the adjoint entering from the next block
            Hl, Al, Gl = Hb.unbind(0), ab.unbind(0), Gb.unbind(0)
            guk, gdlk = torch.empty_like(uk), torch.empty_like(dk)  # (L, K, Bt, g)
            gBk = gy.new_empty(L, N, Bt, gt)
            gCk = gy.new_zeros(N, K, gt) if c_const else gy.new_empty(L, N, Bt, gt)
            gAs = gy.new_zeros(st)  # Σ_t dla_t Δ_t per state element; summed over rows at the end
            for i in range(nb - 1, -1, -1):
                t0, t1 = i * T, min(L, (i + 1) * T)
                n = t1 - t0
                # 1. redo the block's forward: decays and states h_{t0-1} ... h_{t1-1}
                dl, ub = dk[t0:t1], uk[t0:t1]  # (n, K, Bt, g)
                du = dl * ub
                a = block_states_(Hb, Hl, ab, Al, n, (dl[:, None], A2),
                                  (du[:, None], Bk[t0:t1]), Hs[i])  # (n, N, K, Bt, g)
                h, hprev = Hb[1 : n + 1], Hb[:n]
                # 2. adjoint g_t = dL/dh_t = gy_t C_t + a_{t+1} g_{t+1}
                g = block_adjoint_(Gb, Gl, Al, n, (gyb[t0:t1], Ck if c_const else Ck[t0:t1]),
                                   carry, first=i == 0, last=i + 1 == nb)
                # 3. gradients of the block (the formulas of inplace._SelectiveScanFused)
                w = wbuf[: n * sz].view(n, *st)
                gdu = _dot(g, Bk[t0:t1], 1, ebuf[: n * sz // N].view(n, K, Bt, gt))  # dL/d(Δu)
                _dot(g, du[:, None], 2, gBk[t0:t1])
                if c_const:
                    gCk += torch.mul(h, gyb[t0:t1], out=w).sum((0, 3))
                else:
                    _dot(h, gyb[t0:t1], 2, gCk[t0:t1])
                torch.mul(gdu, dl, out=guk[t0:t1])
                gla = torch.mul(g, hprev, out=w).mul_(a)  # dL/d(Δ_t A)
                gdl_b = gdlk[t0:t1]
                _dot(gla, An[None], 1, gdl_b)
                gdl_b.addcmul_(gdu, ub)
                for gla_s, dl_s in zip(gla.unbind(0), dl[:, None].unbind(0)):  # dA: n in-place
                    gAs.addcmul_(gla_s, dl_s)  # multiply-adds into a state (no (n, N, K, Bt, g)
                    # product and no reduction over its middle dims: ~3x an exp2 pass)
            _put(gu, guk, g0, g1)
            _put(gdl, gdlk, g0, g1)
            _put(gB, gBk, g0, g1)
            if c_const:
                gC[g0:g1].copy_(gCk.permute(2, 1, 0))
            else:
                _put(gC, gCk, g0, g1)
            gA[g0:g1].copy_(gAs.sum(2).permute(2, 1, 0))
        return gu, gdl, gA, gB, gC, None
