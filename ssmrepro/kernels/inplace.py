"""Library (kernels): diagonal linear recurrences as autograd Functions.

Explicit reverse-time backward passes.

    h_t = a_t * h_{t-1} + b_t,   h_{-1} = 0          (a, b, h: (Bt, L, *S), real or complex)

Forward runs the recurrence in place (L small in-place ops, no autograd graph inside). Backward is
the adjoint recurrence run backwards in time (PyTorch's conjugate-Wirtinger convention),

    g_t = dL/dh_t + conj(a_{t+1}) * g_{t+1},   dL/db_t = g_t,   dL/da_t = g_t * conj(h_{t-1}),

so a training step touches each (Bt, L, *S) tensor a handful of times instead of building an
O(L)-node autograd graph. Same arithmetic as the sequential reference (``scan.diag_scan_ref``), in
the same order, so results agree to rounding (float64: ~1e-15).

Why time blocks (:func:`diag_scan_blocked`, :class:`_SelectiveScanFused`). On the 2-core EPYC VM
the dominant costs of the per-step loops were not the arithmetic but (1) page faults on freshly
allocated full-size (Bt, L, D, N) buffers (~0.8 ms per MiB touched the first time, i.e. ~13 ms for
one 16 MiB float32 tensor at Bt=16, L=1024, D=32, N=8), (2) memory traffic of ~15 passes over
such tensors, and (3) per-op dispatch (~2-3 us) of ~3L small ops. Both kernels therefore cut time
into blocks of T steps (the diagonal scan: T * Bt * prod(S) <= ~2^18 elements, see
:func:`block_len`; the fused selective scan also cuts the batch and the groups into independent
tiles, see :func:`scan_plan`, so its working set does not grow with the batch or the pack), reuse
a few block buffers across blocks, exponentiate per block
(``exp2(log2(e) * x)``: ~3x faster than ``torch.exp`` on this CPU, same accuracy class), and run
every bulk operation block-wise. The fused selective scan keeps only the states entering each
block (checkpointing) and recomputes a block's states in the backward pass (T more in-place steps)
instead of storing all L states. Numerics: only log-decays (Re <= 0) are exponentiated; there is
no division by a decay.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .narrow_scan import _SelectiveScanNarrow
from .recurrence import block_adjoint_, block_states_

_LOG2E = 1.0 / math.log(2.0)
# Elements of one (Bt, T, *S) block buffer: a few such buffers stay in a 1-2 MiB L2 (float32).
_BLOCK_ELEMS = 1 << 18
_MAX_BLOCK = 128


def block_len(state_numel: int) -> int:
    """Time-block length T for a per-step state of ``state_numel`` elements (Bt * prod(S)).

    T = 2^18 / state_numel clamped to [4, 128]: measured best on the 2-core EPYC VM (float32,
    fwd + bwd): T=64 at 4096 elements (Bt=16, D=32, N=8), T=16 at 16384 (Bt=8, D=128, N=16).
    """
    return max(4, min(_MAX_BLOCK, _BLOCK_ELEMS // max(1, state_numel)))


def _exp_into(x: Tensor, out: Tensor) -> Tensor:
    """out = exp(x) (out may alias x); real inputs go through the faster exp2."""
    if x.is_complex():
        return torch.exp(x, out=out)
    torch.mul(x, _LOG2E, out=out)
    return torch.exp2(out, out=out)


class _InplaceScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor) -> Tensor:
        h = b.clone()  # (Bt, L, *S)
        L = h.shape[1]
        for t in range(1, L):  # 1. h_t += a_t * h_{t-1}, in place
            h[:, t].addcmul_(a[:, t], h[:, t - 1])
        ctx.save_for_backward(a, h)
        return h

    @staticmethod
    def backward(ctx, gh: Tensor):
        a, h = ctx.saved_tensors
        g = gh.clone()  # (Bt, L, *S)
        L = g.shape[1]
        ac = a.conj() if a.is_complex() else a
        for t in range(L - 2, -1, -1):  # 2. adjoint recurrence, backwards in time
            g[:, t].addcmul_(ac[:, t + 1], g[:, t + 1])
        ga = torch.zeros_like(a)
        hp = h[:, :-1].conj() if h.is_complex() else h[:, :-1]
        torch.mul(g[:, 1:], hp, out=ga[:, 1:])  # 3. dL/da_t = g_t * h_{t-1}; a_0 has no effect
        return ga, g


def scan_inplace(a: Tensor, b: Tensor) -> Tensor:
    """h for decays ``a`` (not log-decays) and inputs ``b``, both (Bt, L, *S), same dtype."""
    if a.shape != b.shape:
        a, b = torch.broadcast_tensors(a, b)
    dtype = torch.promote_types(a.dtype, b.dtype)
    return _InplaceScan.apply(a.to(dtype).contiguous(), b.to(dtype).contiguous())


class _BlockedDiagScan(torch.autograd.Function):
    """h_t = exp(la_t) h_{t-1} + b_t from log-decays, time-blocked; la, b: (Bt, L, *S) contiguous.

    la may be real while b (and h) are complex. Saves la and h; exp(la) is recomputed per block
    in the backward pass (into a reused (Bt, T, *S) buffer), never stored at full size.
    """

    @staticmethod
    def forward(ctx, la: Tensor, b: Tensor, T: int) -> Tensor:
        Bt, L = b.shape[:2]
        h = b.clone()  # (Bt, L, *S): h_t = b_t, then += a_t h_{t-1} in place
        ab = la.new_empty(Bt, min(T, L), *la.shape[2:])  # exp(la) of one block
        Al, Hl = ab.unbind(1), h.unbind(1)
        for t0 in range(0, L, T):
            t1 = min(L, t0 + T)
            _exp_into(la[:, t0:t1], ab[:, : t1 - t0])
            for t in range(max(t0, 1), t1):
                Hl[t].addcmul_(Al[t - t0], Hl[t - 1])
        ctx.save_for_backward(la, h)
        ctx.T = T
        return h

    @staticmethod
    def backward(ctx, gh: Tensor):
        la, h = ctx.saved_tensors
        T = ctx.T
        Bt, L = h.shape[:2]
        g = gh.contiguous().clone()  # (Bt, L, *S): becomes dL/db
        gla = torch.empty_like(la) if ctx.needs_input_grad[0] else None
        ab = la.new_empty(Bt, min(T, L), *la.shape[2:])
        Al, Gl = ab.unbind(1), g.unbind(1)
        a_next = None  # conj(a) at the first step of the block after this one
        for t0 in range(T * ((L - 1) // T), -1, -T):
            t1 = min(L, t0 + T)
            n = t1 - t0
            a = _exp_into(la[:, t0:t1], ab[:, :n])  # (Bt, n, *S)
            if a.is_complex():
                a.conj_physical_()  # the adjoint runs with conj(a)
            if a_next is not None:
                Gl[t1 - 1].addcmul_(a_next, Gl[t1])
            for t in range(t1 - 2, t0 - 1, -1):  # g_t += conj(a_{t+1}) g_{t+1}
                Gl[t].addcmul_(Al[t + 1 - t0], Gl[t + 1])
            a_next = Al[0].clone()
            if gla is None:
                continue
            # dL/dla_t = g_t * conj(a_t h_{t-1}) (real part for a real la); la_0 has no effect
            s0 = max(t0, 1)
            if t0 == 0:
                gla[:, 0].zero_()
            hp = h[:, s0 - 1 : t1 - 1]
            r = torch.mul(g[:, s0:t1], hp.conj() if hp.is_complex() else hp)
            r.mul_(a[:, s0 - t0 :])
            gla[:, s0:t1].copy_(r.real if r.is_complex() and not gla.is_complex() else r)
        return gla, g, None


def diag_scan_blocked(la: Tensor, b: Tensor, block: int | None = None) -> Tensor:
    """h_t = exp(la_t) h_{t-1} + b_t, h_{-1} = 0, by :class:`_BlockedDiagScan`.

    la, b: (Bt, L, *S), broadcast against each other; h in ``promote_types(la.dtype, b.dtype)``.
    ``block``: time-block length (default :func:`block_len`); the result does not depend on it.
    """
    la, b = torch.broadcast_tensors(la, b)
    dtype = torch.promote_types(la.dtype, b.dtype)
    T = int(block) if block is not None else block_len(math.prod(b.shape) // max(1, b.shape[1]))
    if T < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    if b.shape[1] == 0:
        return b.to(dtype).clone()
    return _BlockedDiagScan.apply(la.contiguous(), b.to(dtype).contiguous(), T)


# Tiles of the fused selective scan (see :func:`scan_plan`).
_TILE_STATE = 1 << 15  # elements of one tile's per-step state (rows · N · groups · K), at most
_TILE_BLOCK = 1 << 19  # elements of one tile's time block (T · state), at most
_MIN_GROUP_K = 32  # channels per group from which every group gets tiles of its own (matmuls)
_MAX_T = 32  # longest time block of the fused scan
_MIN_MATMUL_NK = 512  # N·K from which the contractions of one-group tiles are batched matmuls
_NARROW_STATE = 1 << 16  # elements of one narrow_scan tile's per-step state (N·K·Bt·groups)
_NARROW_MIN_T, _NARROW_MAX_T = 4, 16  # its time blocks
# On a GPU the tiles above (sized for a CPU core's caches) only multiply the kernel launches: a
# pack of 256 mqar-linear members cut into 2^15-element tiles launched ~7,700 kernels per step and
# its run-steps/s stayed flat from 256 to 4096 members (launch-bound, 1.5k/s on an H200). There
# a tile's per-step state may hold 2^24 elements (64 MiB in float32) and its block 2^27.
_GPU_TILE_STATE, _GPU_TILE_BLOCK = 1 << 24, 1 << 27


@dataclass(frozen=True)
class ScanPlan:
    """How :class:`_SelectiveScanFused` cuts the work: batch rows and groups per tile, block T."""

    rows: int  # batch rows per tile (the last tile may have fewer)
    groups: int  # groups per tile: 1 (one group at a time) or all G
    T: int  # time-block length
    matmul: bool = True  # one-group tiles contract over N and K by batched matmuls
    narrow: bool = False  # the batch-and-groups-innermost kernel (narrow_scan), all rows per tile


def scan_plan(Bt: int, G: int, K: int, N: int, state: int | None = None,
              block: int | None = None, L: int | None = None, narrow: bool = True,
              gpu: bool = False) -> ScanPlan:
    """Tile and block sizes for a selective scan of Bt rows, G groups of K channels, N states.

    Tiles are independent (batch rows never interact, nor do groups): every tile runs the whole
    time loop alone with block buffers (T + 1 states and a few T-step temporaries) whose size
    does not grow with the batch or the pack, instead of streaming a (Bt, T, N, G, K) block
    through DRAM (the old kernel: T = 2 at Bt = 64, d_inner = 128, N = 16; 3.4x slower per
    member at E = 4 than at E = 1). The size is a balance between per-op overhead (~1-5 us per
    op, ~T + 25 ops per block) and cache misses, not an L2 fit. Groups
    of at least ``_MIN_GROUP_K`` channels (a Mamba member's d_inner) get tiles of their own,
    whose contractions over N and K are batched matmuls; narrow groups (KEEP n-TH packs of
    d = 8) stay together so that every op still covers long rows. Rows per tile: as many as keep
    the per-step state within ``state`` elements (balanced over tiles); T: as many steps as keep
    the block within ``block`` elements, in [2, 32] (and at most L). One-group tiles contract by
    batched matmuls when N·K >= 512 (smaller (1, N) @ (N, K) products lose to mul + sum).
    Measured on the 2-core EPYC VM (float32, fwd + bwd, one thread, CPU-clock medians of
    (rows, T, matmul) sweeps): state 2^15 and block 2^19 elements, i.e. (rows, T) = (16, 16) for
    Bt = 64, d_inner = 128, N = 16 (84 ms per layer vs 127 ms before the tiles; (8..32, 8..32)
    within ~10%, (64, 4) 1.5x slower; mul + sum instead of matmuls +10%) and (32, 16) for
    Bt = 128, d_inner = 64 (26-31 ms vs 38 ms); small states (Bt = 16, D = 32, N = 8: 4096
    elements) want T = 32-64 and mul + sum (T = 128 with matmuls was 20% slower than the old
    kernel); narrow packed groups (Bt = 16, 64 groups of 8 channels, N = 8) stay at the old
    kernel's speed (8 rows, T = 16).
    """
    if narrow and K < _MIN_GROUP_K and G > 1:  # narrow groups: narrow_scan, tiles of groups
        state = state or _NARROW_STATE
        gt = max(1, min(G, state // (N * K * Bt)))
        gt = -(-G // -(-G // gt))  # balanced over the tiles
        T = max(_NARROW_MIN_T, min(_NARROW_MAX_T, (block or _TILE_BLOCK) // (N * K * Bt * gt)))
        return ScanPlan(Bt, gt, T if L is None else max(1, min(T, L)), False, narrow=True)
    state = state or _TILE_STATE
    block = block or _TILE_BLOCK
    gt = 1 if K >= _MIN_GROUP_K and not gpu else G  # gpu: every group in a tile (one launch)
    per_row = N * gt * K
    rows = max(1, min(Bt, state // per_row))
    n_tiles = -(-Bt // rows)
    rows = -(-Bt // n_tiles)
    T = max(2, min(_MAX_T, block // (rows * per_row)))
    if L is not None:
        T = max(1, min(T, L))
    return ScanPlan(rows, gt, T, N * K >= _MIN_MATMUL_NK)


def scan_plans(Bt: int, E: int, K: int, N: int, L: int | None = None) -> tuple[ScanPlan, ...]:
    """The distinct plans :func:`scan_plan` (CPU, its default sizes) gives ``Bt`` rows of G
    groups of K channels, N states, over G = 1..E, without planning each G (the planner's
    ``_pack_share`` planned every pack size up to E, about 1,500 plans a shape: most of the
    CPU of planning a sweep of many shapes). Groups of at least ``_MIN_GROUP_K`` channels get a
    tile each, one plan for every G; narrow groups take ``gt`` = min(G, c) groups a tile, c =
    ``_NARROW_STATE`` // (N·K·Bt), balanced over the tiles, which is G itself up to c and never
    more than c past it: the plans of G = 1..min(E, c) (and 2, which c = 1 leaves at 1 group a
    tile) are all there are."""
    if K >= _MIN_GROUP_K or E == 1:
        return _plans_upto(Bt, 1, K, N, L)
    return _plans_upto(Bt, min(E, max(2, _NARROW_STATE // (N * K * Bt))), K, N, L)


@functools.lru_cache(maxsize=1 << 12)
def _plans_upto(Bt: int, n: int, K: int, N: int, L: int | None) -> tuple[ScanPlan, ...]:
    # (every E past c one entry: a pack-size search asks about many)
    return tuple(dict.fromkeys(scan_plan(Bt, G, K, N, L=L) for G in range(1, n + 1)))


def min_time_block(N: int, K: int, cpu: bool = True) -> int:
    """The shortest time block :func:`scan_plan` gives any scan of groups of K channels with N
    states, whatever the batch and the number of groups (a pack's members): the states the
    fused scans keep for the backward are one per block. On CPU, one-group tiles hold a row of
    N·K elements and as many rows as fit ``_TILE_STATE`` (T = ``_TILE_BLOCK`` / that, at least
    2) and narrow packed groups take ``_NARROW_MIN_T`` at least; on a GPU a tile holds every
    group of the pack, which can leave T = 2."""
    if not cpu:
        return 2
    fused = max(2, min(_MAX_T, _TILE_BLOCK // max(_TILE_STATE, N * K)))
    return min(fused, _NARROW_MIN_T) if K < _MIN_GROUP_K else fused


def _tiles(Bt: int, G: int, plan: ScanPlan) -> list[tuple[int, int, int, int]]:
    """(b0, b1, g0, g1) of every tile, groups outermost."""
    return [(b0, min(Bt, b0 + plan.rows), g0, min(G, g0 + plan.groups))
            for g0 in range(0, G, plan.groups) for b0 in range(0, Bt, plan.rows)]


class _SelectiveScanFused(torch.autograd.Function):
    """Real S6 scan with grouped B_t and grouped or per-channel C, tiled, time-blocked and
    checkpointed.

    u, delta: (Bt, L, G, K); A: (G, K, N); B: (Bt, L, G, N); C: (Bt, L, G, N) (input-dependent)
    or (G, K, N) (constant per channel, S4D); returns y: (Bt, L, G, K) with
        h_t = exp(Δ_t A) ⊙ h_{t-1} + (Δ_t u_t) ⊗ B_t,   y_t = Σ_n C_t[., n] h_t[., n].

    The work is cut into tiles of batch rows (and groups) by :func:`scan_plan`; each tile runs
    the whole time loop with reused block buffers laid out time-major, (T, rows, N, groups, K):
    every step is one in-place op on a contiguous state, and a block's states (T, rows, N, K)
    are one contiguous batch of (N, K) matrices for the contractions. Forward, per block of T
    steps: exp(Δ A) for the block (one mul by A·log2(e), one exp2), (Δu) ⊗ B written into the
    state buffer, T in-place steps h_t += a_t h_{t-1}, y by contracting with C (a batched
    matmul C_t h_t for one-group tiles with input-dependent C and ``plan.matmul``). Δu is formed
    per block, never at full size. Only the states entering each
    block are saved. Backward, per tile and block in reverse: redo the block's forward (exp,
    input term, T steps), then g = gy ⊗ C, T in-place adjoint steps g_t += a_{t+1} g_{t+1}
    (carrying a_{t1} g_{t1} across the block boundary), and the gradients
        dΔu_t = Σ_n g_t B_t,  dB_t = Σ_k g_t Δ_t u_t,  dC_t = Σ_k h_t gy_t,
        dla_t = g_t h_{t-1} a_t,  dΔ_t = Σ_n dla_t A + u_t dΔu_t,  dA = Σ_{b,t} dla_t Δ_t,
    the first three as batched matmuls (B_t g_t, (Δu)_t g_tᵀ, gy_t h_tᵀ) for one-group tiles
    (``plan.matmul``); dL/du = Δ dΔu and the u dΔu term of dΔ are applied per block, so the only
    full-size tensors are the inputs, the outputs, their gradients and the saved block states.
    Results do not depend on the plan beyond summation order (float64 tests: every plan equals
    the sequential reference).
    """

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                plan: ScanPlan) -> Tensor:
        Bt, L, G, K = u.shape
        N = A.shape[-1]
        c_const = C.dim() == 3
        An = A.permute(2, 0, 1).contiguous()  # (N, G, K)
        A2 = An * _LOG2E  # (N, G, K): exp(Δ A) = exp2(Δ · A log2(e))
        Cn = C.permute(2, 0, 1).contiguous() if c_const else C  # (N, G, K) or (Bt, L, G, N)
        y = u.new_empty(Bt, L, G, K)
        T = plan.T
        nb = -(-L // T)
        Hs = u.new_empty(nb, Bt, N, G, K)  # state entering each block
        S = plan.rows * N * plan.groups * K  # elements of the largest tile's state
        hbuf, abuf = u.new_empty((T + 1) * S), u.new_empty(T * S)
        wbuf = u.new_empty(T * S) if (c_const or plan.groups > 1 or not plan.matmul) else None
        dbuf = u.new_empty(T * S // N)  # Δu of one block
        for b0, b1, g0, g1 in _tiles(Bt, G, plan):
            m, gk = b1 - b0, g1 - g0
            mm = plan.matmul and gk == 1 and not c_const  # y by batched matmuls
            st = (m, N, gk, K)  # one state of this tile
            sz = m * N * gk * K
            Hb = hbuf[: (T + 1) * sz].view(T + 1, *st)  # [h entering, T states]
            ab = abuf[: T * sz].view(T, *st)  # exp(Δ A) of the block
            Hl, Al = Hb.unbind(0), ab.unbind(0)
            Hl[0].zero_()
            dl_t = delta[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            u_t = u[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            B_t = B[b0:b1, :, g0:g1].permute(1, 0, 3, 2)[..., None]  # (L, m, N, gk, 1)
            A2t = A2[:, g0:g1]  # (N, gk, K)
            if mm:
                C_m = C[b0:b1, :, g0].transpose(0, 1)[:, :, None, :]  # (L, m, 1, N)
                y_m = y[b0:b1, :, g0].transpose(0, 1)  # (L, m, K)
            else:
                Cb = Cn[:, g0:g1] if c_const else _c_tile(Cn, b0, b1, g0, g1)
                y_t = y[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            Hs_t = Hs[:, b0:b1, :, g0:g1]  # (nb, m, N, gk, K)
            for i in range(nb):
                t0, t1 = i * T, min(L, (i + 1) * T)
                n = t1 - t0
                if i:
                    Hs_t[i].copy_(Hl[0])
                dl = dl_t[t0:t1]  # (n, m, gk, K)
                du = torch.mul(dl, u_t[t0:t1], out=dbuf[: n * m * gk * K].view(n, m, gk, K))
                # decays (n, m, N, gk, K), input terms, h_t = a_t h_{t-1} + b_t
                block_states_(Hb, Hl, ab, Al, n, (dl[:, :, None], A2t), (du[:, :, None], B_t[t0:t1]))
                h = Hb[1 : n + 1]
                if mm:  # y_t = C_t h_t: (n, m, 1, N) @ (n, m, N, K)
                    y_m[t0:t1].copy_(torch.matmul(C_m[t0:t1], h.view(n, m, N, K)).view(n, m, K))
                else:
                    w = wbuf[: n * sz].view(n, *st)
                    Cbb = Cb if c_const else Cb[t0:t1]
                    torch.sum(torch.mul(h, Cbb, out=w), dim=2, out=y_t[t0:t1])
                if i + 1 < nb:
                    Hl[0].copy_(Hl[n])
            if nb:
                Hs_t[0].zero_()
        ctx.save_for_backward(u, delta, An, B, Cn, Hs)
        ctx.plan = plan
        return y

    @staticmethod
    def backward(ctx, gy: Tensor):
        u, delta, An, B, Cn, Hs = ctx.saved_tensors
        plan = ctx.plan
        T = plan.T
        Bt, L, G, K = u.shape
        N = An.shape[0]
        c_const = Cn.dim() == 3
        A2 = An * _LOG2E
        gy = gy.contiguous()
        gu = torch.empty_like(u)  # dL/du = Δ dL/d(Δu)
        gdl = torch.empty_like(delta)  # dL/dΔ = through the decay + u dL/d(Δu)
        gB = torch.empty_like(B)  # (Bt, L, G, N)
        gC = torch.zeros_like(Cn) if c_const else torch.empty_like(Cn)
        gA = torch.zeros_like(An)  # (N, G, K)
        nb = Hs.shape[0]
        S = plan.rows * N * plan.groups * K
        hbuf, abuf = u.new_empty((T + 1) * S), u.new_empty(T * S)
        gbuf, wbuf, cbuf = u.new_empty(T * S), u.new_empty(T * S), u.new_empty(S)
        dbuf, ebuf = u.new_empty(T * S // N), u.new_empty(T * S // N)  # Δu, dL/d(Δu) of a block
        for b0, b1, g0, g1 in _tiles(Bt, G, plan):
            m, gk = b1 - b0, g1 - g0
            mm = plan.matmul and gk == 1  # dΔu, dB by batched matmuls
            mmC = mm and not c_const  # dC by batched matmuls
            st = (m, N, gk, K)
            sz = m * N * gk * K
            Hb = hbuf[: (T + 1) * sz].view(T + 1, *st)
            ab = abuf[: T * sz].view(T, *st)
            Gb = gbuf[: T * sz].view(T, *st)
            carry = cbuf[:sz].view(st)  # a_{t1} g_{t1}: the adjoint entering from the next block
            Hl, Al, Gl = Hb.unbind(0), ab.unbind(0), Gb.unbind(0)
            dl_t = delta[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            u_t = u[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            gy_t = gy[b0:b1, :, g0:g1].transpose(0, 1)[:, :, None]  # (L, m, 1, gk, K)
            B_t = B[b0:b1, :, g0:g1].permute(1, 0, 3, 2)[..., None]  # (L, m, N, gk, 1)
            A2t, Ant = A2[:, g0:g1], An[:, g0:g1]  # (N, gk, K)
            Cb = Cn[:, g0:g1] if c_const else _c_tile(Cn, b0, b1, g0, g1)  # (N,gk,K) | (L,m,N,gk,1)
            gu_t = gu[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            gdl_t = gdl[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            if mm:
                B_m = B[b0:b1, :, g0].transpose(0, 1)[:, :, None, :]  # (L, m, 1, N)
                gB_m = gB[b0:b1, :, g0].transpose(0, 1)  # (L, m, N)
            else:
                gB_t = gB[b0:b1, :, g0:g1].permute(1, 0, 3, 2)  # (L, m, N, gk)
            if mmC:
                gC_m = gC[b0:b1, :, g0].transpose(0, 1)  # (L, m, N)
            elif not c_const:
                gC_t = gC[b0:b1, :, g0:g1].permute(1, 0, 3, 2)  # (L, m, N, gk)
            Hs_t = Hs[:, b0:b1, :, g0:g1]  # (nb, m, N, gk, K)
            for i in range(nb - 1, -1, -1):
                t0, t1 = i * T, min(L, (i + 1) * T)
                n = t1 - t0
                # 1. redo the block's forward: decays and states h_{t0-1} ... h_{t1-1}
                dl, ub = dl_t[t0:t1], u_t[t0:t1]  # (n, m, gk, K)
                du = torch.mul(dl, ub, out=dbuf[: n * m * gk * K].view(n, m, gk, K))
                a = block_states_(Hb, Hl, ab, Al, n, (dl[:, :, None], A2t),
                                  (du[:, :, None], B_t[t0:t1]), Hs_t[i])  # (n, m, N, gk, K)
                h, hprev = Hb[1 : n + 1], Hb[:n]
                # 2. adjoint g_t = dL/dh_t = gy_t C_t + a_{t+1} g_{t+1}
                g = block_adjoint_(Gb, Gl, Al, n, (gy_t[t0:t1], Cb if c_const else Cb[t0:t1]),
                                   carry, first=i == 0, last=i + 1 == nb)
                # 3. gradients of the block
                w = wbuf[: n * sz].view(n, *st)
                gdu = ebuf[: n * m * gk * K].view(n, m, gk, K)  # dL/d(Δu)
                if mm:  # (n, m, 1, N) @ (n, m, N, K) and (n, m, 1, K) @ (n, m, K, N)
                    gv = g.view(n, m, N, K)
                    torch.matmul(B_m[t0:t1], gv, out=gdu)
                    gB_m[t0:t1].copy_(torch.matmul(du, gv.transpose(-1, -2)).view(n, m, N))
                else:
                    torch.sum(torch.mul(g, B_t[t0:t1], out=w), dim=2, out=gdu)
                    torch.sum(torch.mul(g, du[:, :, None], out=w), dim=-1, out=gB_t[t0:t1])
                if mmC:  # (n, m, 1, K) @ (n, m, K, N)
                    hv = h.view(n, m, N, K).transpose(-1, -2)
                    gC_m[t0:t1].copy_(torch.matmul(gy_t[t0:t1, :, 0], hv).view(n, m, N))
                elif c_const:
                    gC[:, g0:g1] += torch.mul(h, gy_t[t0:t1], out=w).sum((0, 1))
                else:
                    torch.sum(torch.mul(h, gy_t[t0:t1], out=w), dim=-1, out=gC_t[t0:t1])
                torch.mul(gdu, dl, out=gu_t[t0:t1])
                gla = torch.mul(g, hprev, out=w).mul_(a)  # dL/d(Δ_t A)
                gdl_b = gdl_t[t0:t1]
                torch.sum(torch.mul(gla, Ant, out=g), dim=2, out=gdl_b)
                gdl_b.addcmul_(gdu, ub)
                gA[:, g0:g1] += gla.mul_(dl[:, :, None]).sum((0, 1))
        gC = gC.permute(1, 2, 0) if c_const else gC
        return gu, gdl, gA.permute(1, 2, 0), gB, gC, None


def _c_tile(C: Tensor, b0: int, b1: int, g0: int, g1: int) -> Tensor:
    """Input-dependent C (Bt, L, G, N) of one tile, time-major and broadcastable: (L, m, N, gk, 1)."""
    return C[b0:b1, :, g0:g1].permute(1, 0, 3, 2)[..., None]


def selective_scan_fused(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                         D: Tensor | None = None, plan: ScanPlan | None = None) -> Tensor:
    """Same result as ``scan.selective_scan`` for real inputs with grouped B and grouped or
    per-channel C, computed by :class:`_SelectiveScanFused`.

    u, delta: (Bt, L, D_), or (Bt, L, G, K) with the channels already split into the G groups
    (any strides: a pack's (E, Bt, L, d) activations permuted, without the copy a (Bt, L, D_)
    reshape makes); A: (D_, N); B: (Bt, L, G, N); C: (Bt, L, G, N) or (D_, N); D: (D_,) or
    None -> y of u's shape. Channel d belongs to group d // (D_ / G).
    ``plan``: tiles and block length (default :func:`scan_plan`); the result does not depend on
    it beyond rounding.
    """
    grouped = u.dim() == 4
    if grouped:
        Bt, L, G, K = u.shape
    else:
        Bt, L, D_ = u.shape
        G = B.shape[2]
        if D_ % G:
            raise ValueError(f"D_={D_} is not divisible by G={G}")
        K = D_ // G
    N = A.shape[1]
    if plan is None and u.device.type == "cuda":
        plan = scan_plan(Bt, G, K, N, state=_GPU_TILE_STATE, block=_GPU_TILE_BLOCK, L=L, gpu=True)
    plan = plan or scan_plan(Bt, G, K, N, L=L)
    Cf = C.reshape(G, K, N) if C.dim() == 2 else (C if plan.narrow else C.contiguous())
    u4 = u if grouped else u.reshape(Bt, L, G, K)
    fn = _SelectiveScanNarrow if plan.narrow else _SelectiveScanFused
    y = fn.apply(u4, delta if grouped else delta.reshape(Bt, L, G, K), A.reshape(G, K, N),
                 B if plan.narrow else B.contiguous(), Cf, plan)  # (Bt, L, G, K)
    if D is not None:
        y = torch.addcmul(y, u4, D.view(G, K))
    return y if grouped else y.reshape(Bt, L, G * K)
