"""Library (kernels): the fused B2S6 scan (yu2025 eqs 7-8) as an autograd Function for CPU.

Shape legend: Bt batch, L length, G groups (blocks of all members, E·h), K channels per group
(p), N state size, T time-block length, m batch rows of a tile, gk groups of a tile.

    a_t  = exp(Δ_t A)                                      (Bt, L, G, K, N), real or complex
    Bf_t = Bsel_t + Bb                                     Bsel (Bt, L, G, N), Bb (G, K, N)
    b_t  = Δ_t u_t Bf_t           (Euler)
         = expm1(Δ_t A) / A · u_t Bf_t   (ZOH)
    h_t  = a_t h_{t-1} + b_t,   h_{-1} = 0
    y_t  = Re Σ_n C_t[n] h_t[n]                            C (Bt, L, G, N) real -> y (Bt, L, G, K)

u, Δ: (Bt, L, G, K) real; A: (G, N) (one diagonal per group; B2S6 shares it over a member's
blocks). :func:`b2s6_scan_ref` is the same map as plain full-size tensor code over a sequential
loop (the mixer's old ``direct`` path): the slow, obviously correct twin of :func:`b2s6_scan`.

Why a fused kernel. The full-size form materialises (Bt, L, G·K, N) complex tensors (log-decays,
coefficients, inputs, states, states·C: ~4.4 GB of traffic per step of the ``mqar-b2s6`` bench
at E = 1) and exponentiates complex numbers with ``torch.exp``, which on this CPU is a scalar
loop: ~23 ns per complex64 element, against ~3 ns for exp2 + cos + sin of the real and imaginary
parts (float32, 16K elements, one thread). :class:`_B2S6Scan` follows
:class:`ssmrepro.kernels.inplace._SelectiveScanFused`: the batch (and, for large packs, the
groups) is cut into independent tiles (:func:`b2s6_plan`); each tile runs the whole time loop with
reused block buffers laid out time-major, (T, m, gk, K, N), so every step is one in-place op on a
contiguous state; the decays of a block are exp2(Δ Re A log2 e) · (cos + i sin)(Δ Im A); only
the states entering each block are saved, and the backward pass recomputes a block's states
(T more in-place steps) before running the adjoint recurrence over it (PyTorch's conjugate
convention, ḡ(z) = ∂L/∂Re z + i ∂L/∂Im z):

    g_t = C_t gy_t + conj(a_{t+1}) g_{t+1}                    (= ḡ(h_t) = ḡ(b_t))
    ḡ(la_t) = conj(a_t) [g_t conj(h_{t-1}) + ZOH: ḡ(coef_t) conj(1/A)],  la_t = Δ_t A
    Euler: ḡ(Bf_t) = g_t Δ_t u_t;  s_t = Re Σ_n g_t conj(Bf_t);  ∂u = s Δ;  ∂Δ = s u + Re Σ_n ḡ(la) conj(A)
    ZOH:   r_t = g_t conj(Bf_t);  ḡ(coef_t) = r_t u_t;  ḡ(Bf_t) = g_t conj(coef_t) u_t;
           ∂u = Re Σ_n r conj(coef);  ∂Δ = Re Σ_n ḡ(la) conj(A);
           ḡ(A) += -conj(1/A) Σ ḡ(coef) conj(coef)   (coef = (exp(la) - 1)/A at fixed la)
    ḡ(A) += Σ ḡ(la) Δ,  ḡ(Bsel_t) = Σ_k ḡ(Bf_t),  ḡ(Bb) = Σ_{b,t} ḡ(Bf_t),  ∂C_t = Σ_k Re(h_t) gy_t.

Real A and/or real B are the same code with the conjugates dropping out (h is complex as soon as
A or B is). Results do not depend on the plan beyond summation order (float64 tests).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .inplace import ScanPlan, _tiles
from .recurrence import adjoint_, states_

_LOG2E = 1.0 / math.log(2.0)
_TILE_STATE = 1 << 15  # real scalars (complex = 2) of one tile's per-step state, at most
_TILE_BLOCK = 1 << 17  # real scalars of one tile's block buffer (T states), at most
_MAX_T = 32


def b2s6_plan(Bt: int, G: int, K: int, N: int, complex_h: bool = True, L: int | None = None,
              state: int | None = None, block: int | None = None) -> ScanPlan:
    """Tiles of :class:`_B2S6Scan`: batch rows and groups per tile, time-block length T.

    A tile holds all G groups while one batch row's state (G·K·N scalars, 2 per complex) fits in
    ``state``; rows: as many as fit (balanced over tiles); otherwise one row and as many groups as
    fit. T: as many steps as keep one block buffer within ``block`` scalars, in [2, 32] and <= L.
    """
    state = state or _TILE_STATE
    block = block or _TILE_BLOCK
    c = 2 if complex_h else 1
    per_group = K * N * c
    if G * per_group <= state:
        gt = G
        rows = max(1, min(Bt, state // (G * per_group)))
        n_tiles = -(-Bt // rows)
        rows = -(-Bt // n_tiles)
    else:
        rows, gt = 1, max(1, state // per_group)
        n_g = -(-G // gt)
        gt = -(-G // n_g)
    T = max(2, min(_MAX_T, block // (rows * gt * per_group)))
    if L is not None:
        T = max(1, min(T, L))
    return ScanPlan(rows, gt, T, False)


def _vr(x: Tensor) -> Tensor:
    return torch.view_as_real(x) if x.is_complex() else x


def _re_dot_sum(x: Tensor, y: Tensor, out: Tensor, tmp: Tensor) -> Tensor:
    """out = Σ_n Re(x conj(y)) over the last dim; x (..., N), y broadcastable; tmp: scratch."""
    if x.is_complex() and y.is_complex():
        prod = torch.mul(_vr(x), _vr(y), out=tmp[: 2 * x.numel()].view(*x.shape, 2))
        return torch.sum(prod, dim=(-2, -1), out=out)
    prod = torch.mul(x.real if x.is_complex() else x, y.real if y.is_complex() else y,
                     out=tmp[: x.numel()].view(x.shape))
    return torch.sum(prod, dim=-1, out=out)


def _decay(dl: Tensor, A2r: Tensor, Ai: Tensor | None, out: Tensor, scratch: Tensor) -> Tensor:
    """out = exp(Δ A) for dl (n, m, gk, K, 1), A2r = Re A·log2(e), Ai = Im A (gk, 1, N) or None;
    scratch: >= 3 out.numel() reals."""
    if Ai is None:
        return torch.mul(dl, A2r, out=out).exp2_()
    X = out.numel()
    mag = torch.mul(dl, A2r, out=scratch[:X].view(out.shape)).exp2_()  # |a|
    ang = torch.mul(dl, Ai, out=scratch[X : 2 * X].view(out.shape))  # arg a
    cos = torch.cos(ang, out=scratch[2 * X : 3 * X].view(out.shape))
    ov = torch.view_as_real(out)
    torch.mul(cos, mag, out=ov[..., 0])
    torch.mul(ang.sin_(), mag, out=ov[..., 1])
    return out


def _zoh_coef(dl: Tensor, Ar: Tensor, Aih: Tensor | None, a: Tensor, invA: Tensor, out: Tensor,
              scratch: Tensor) -> Tensor:
    """out = (exp(Δ A) - 1) / A, the ZOH coefficient, right after :func:`_decay` gave ``a`` =
    exp(Δ A) with the same ``scratch`` (whose third part still holds cos(Δ Im A)); Ar = Re A,
    Aih = Im A / 2 (gk, 1, N) or None. exp(Δ A) - 1 is formed without cancellation: expm1(x)
    for a real A, expm1(x) cos y - 2 sin²(y/2) + i Im a for Δ A = x + iy (``a - 1`` kept no
    digit of Δ A below ~1e-7 in float32: the coefficient was 19% off at Δ A = 1e-7)."""
    if Aih is None:
        return torch.mul(dl, Ar, out=out).expm1_().mul_(invA)
    X = out.numel()
    em1 = torch.mul(dl, Ar, out=scratch[:X].view(out.shape)).expm1_()  # expm1(x)
    ov = torch.view_as_real(out)
    torch.mul(em1, scratch[2 * X : 3 * X].view(out.shape), out=ov[..., 0])  # · cos y
    half = torch.mul(dl, Aih, out=scratch[X : 2 * X].view(out.shape)).sin_()  # sin(y/2)
    ov[..., 0].addcmul_(half, half, value=-2.0)
    ov[..., 1].copy_(a.imag)
    return out.mul_(invA)


class _B2S6Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, Bsel: Tensor, Bb: Tensor | None,
                C: Tensor, zoh: bool, plan: ScanPlan) -> Tensor:
        Bt, L, G, K = u.shape
        N = A.shape[-1]
        A2r = (A.real if A.is_complex() else A) * _LOG2E  # (G, N)
        Ar = A.real if A.is_complex() else A  # (G, N): Re A, and Im A / 2, for _zoh_coef
        Aih = A.imag * 0.5 if zoh and A.is_complex() else None
        Ai = A.imag if A.is_complex() else None
        invA = 1.0 / A if zoh else None
        y = u.new_empty(Bt, L, G, K)
        T = plan.T
        nb = -(-L // T)
        Hs = Bsel.new_empty(nb, Bt, G, K, N)  # state entering each block
        S = plan.rows * plan.groups * K * N
        hbuf, abuf = Bsel.new_empty((T + 1) * S), A.new_empty(T * S)
        cbuf = A.new_empty(T * S) if zoh else None
        scratch, wr = u.new_empty(3 * T * S), u.new_empty(T * S)
        for b0, b1, g0, g1 in _tiles(Bt, G, plan):
            m, gk = b1 - b0, g1 - g0
            st = (m, gk, K, N)
            sz = m * gk * K * N
            Hb = hbuf[: (T + 1) * sz].view(T + 1, *st)  # [h entering, T states]
            ab = abuf[: T * sz].view(T, *st)
            Hl, Al = Hb.unbind(0), ab.unbind(0)
            Hl[0].zero_()
            dl_t = delta[b0:b1, :, g0:g1].transpose(0, 1)[..., None]  # (L, m, gk, K, 1)
            u_t = u[b0:b1, :, g0:g1].transpose(0, 1)[..., None]  # (L, m, gk, K, 1)
            Bs_t = Bsel[b0:b1, :, g0:g1].transpose(0, 1)[:, :, :, None]  # (L, m, gk, 1, N)
            C_t = C[b0:b1, :, g0:g1].transpose(0, 1)[:, :, :, None]  # (L, m, gk, 1, N)
            y_t = y[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            A2t = A2r[g0:g1, None]  # (gk, 1, N)
            Ait = None if Ai is None else Ai[g0:g1, None]
            Art, Aiht = Ar[g0:g1, None], None if Aih is None else Aih[g0:g1, None]
            Bbt = None if Bb is None else Bb[g0:g1]  # (gk, K, N)
            Hs_t = Hs[:, b0:b1, g0:g1]  # (nb, m, gk, K, N)
            for i in range(nb):
                t0, t1 = i * T, min(L, (i + 1) * T)
                n = t1 - t0
                if i:
                    Hs_t[i].copy_(Hl[0])
                dl = dl_t[t0:t1]
                a = _decay(dl, A2t, Ait, ab[:n], scratch)
                hb = Hb[1 : n + 1]
                if Bbt is None:
                    hb.copy_(Bs_t[t0:t1].expand(n, *st))
                else:
                    torch.add(Bs_t[t0:t1], Bbt, out=hb)  # Bf
                if zoh:  # b = (a - 1)/A · u Bf
                    coef = _zoh_coef(dl, Art, Aiht, a, invA[g0:g1, None],
                                     cbuf[: n * sz].view(n, *st), scratch)
                    hb.mul_(coef).mul_(u_t[t0:t1])
                else:  # b = Δ u Bf
                    hb.mul_(dl * u_t[t0:t1])
                states_(Hl, Al, n)  # h_t = a_t h_{t-1} + b_t
                hr = hb.real if hb.is_complex() else hb
                torch.sum(torch.mul(hr, C_t[t0:t1], out=wr[: n * sz].view(n, *st)), dim=-1,
                          out=y_t[t0:t1])
                if i + 1 < nb:
                    Hl[0].copy_(Hl[n])
            if nb:
                Hs_t[0].zero_()
        ctx.save_for_backward(u, delta, A, Bsel, Bb, C, Hs)
        ctx.zoh, ctx.plan = zoh, plan
        return y

    @staticmethod
    def backward(ctx, gy: Tensor):
        u, delta, A, Bsel, Bb, C, Hs = ctx.saved_tensors
        zoh, plan = ctx.zoh, ctx.plan
        T = plan.T
        Bt, L, G, K = u.shape
        N = A.shape[-1]
        cplx_h, cplx_a = Bsel.is_complex(), A.is_complex()
        A2r = (A.real if cplx_a else A) * _LOG2E
        Ar = A.real if cplx_a else A  # Re A, and Im A / 2, for _zoh_coef
        Aih = A.imag * 0.5 if zoh and cplx_a else None
        Ai = A.imag if cplx_a else None
        invA = 1.0 / A if zoh else None
        invAc = invA.conj() if zoh and cplx_a else invA  # conj(1/A)
        gy = gy.contiguous()
        gu, gdl = torch.empty_like(u), torch.empty_like(delta)  # (Bt, L, G, K)
        gBs = torch.empty_like(Bsel)  # (Bt, L, G, N)
        gBb = None if Bb is None else torch.zeros_like(Bb)  # (G, K, N)
        gC = torch.empty_like(C)  # (Bt, L, G, N)
        gA = torch.zeros(G, N, dtype=Bsel.dtype)  # ḡ(A) (complex while h is)
        gAz = torch.zeros(G, N, dtype=Bsel.dtype) if zoh else None  # Σ ḡ(coef) conj(coef)
        nb = Hs.shape[0]
        S = plan.rows * plan.groups * K * N
        hbuf, abuf = Bsel.new_empty((T + 1) * S), A.new_empty(T * S)
        fbuf, gbuf, wbuf = Bsel.new_empty(T * S), Bsel.new_empty(T * S), Bsel.new_empty(T * S)
        cbuf = A.new_empty(T * S) if zoh else None
        zbuf = Bsel.new_empty(T * S) if zoh else None
        carry = Bsel.new_empty(S)
        scratch = u.new_empty(3 * T * S)
        for b0, b1, g0, g1 in _tiles(Bt, G, plan):
            m, gk = b1 - b0, g1 - g0
            st = (m, gk, K, N)
            sz = m * gk * K * N
            Hb = hbuf[: (T + 1) * sz].view(T + 1, *st)
            ab = abuf[: T * sz].view(T, *st)
            Gb = gbuf[: T * sz].view(T, *st)
            cr = carry[:sz].view(st)
            Hl, Al, Gl = Hb.unbind(0), ab.unbind(0), Gb.unbind(0)
            dl_t = delta[b0:b1, :, g0:g1].transpose(0, 1)[..., None]  # (L, m, gk, K, 1)
            u_t = u[b0:b1, :, g0:g1].transpose(0, 1)[..., None]
            gy_t = gy[b0:b1, :, g0:g1].transpose(0, 1)[..., None]
            Bs_t = Bsel[b0:b1, :, g0:g1].transpose(0, 1)[:, :, :, None]  # (L, m, gk, 1, N)
            C_t = C[b0:b1, :, g0:g1].transpose(0, 1)[:, :, :, None]
            gu_t = gu[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, K)
            gdl_t = gdl[b0:b1, :, g0:g1].transpose(0, 1)
            gBs_t = gBs[b0:b1, :, g0:g1].transpose(0, 1)  # (L, m, gk, N)
            gC_t = gC[b0:b1, :, g0:g1].transpose(0, 1)
            A2t = A2r[g0:g1, None]  # (gk, 1, N)
            Ait = None if Ai is None else Ai[g0:g1, None]
            Art, Aiht = Ar[g0:g1, None], None if Aih is None else Aih[g0:g1, None]
            At = A[g0:g1, None]
            Bbt = None if Bb is None else Bb[g0:g1]  # (gk, K, N)
            Hs_t = Hs[:, b0:b1, g0:g1]
            for i in range(nb - 1, -1, -1):
                t0, t1 = i * T, min(L, (i + 1) * T)
                n = t1 - t0
                nst = (n, *st)
                dl, ub, gyb = dl_t[t0:t1], u_t[t0:t1], gy_t[t0:t1]  # (n, m, gk, K, 1)
                # 1. redo the block's forward: decays, Bf, coefficients, states
                a = _decay(dl, A2t, Ait, ab[:n], scratch)
                Bf = fbuf[: n * sz].view(nst)
                if Bbt is None:
                    Bf.copy_(Bs_t[t0:t1].expand(nst))
                else:
                    torch.add(Bs_t[t0:t1], Bbt, out=Bf)
                hb = Hb[1 : n + 1]
                Hl[0].copy_(Hs_t[i])
                if zoh:
                    coef = _zoh_coef(dl, Art, Aiht, a, invA[g0:g1, None],
                                     cbuf[: n * sz].view(nst), scratch)
                    torch.mul(Bf, coef, out=hb).mul_(ub)
                else:
                    du = dl * ub  # (n, m, gk, K, 1)
                    torch.mul(Bf, du, out=hb)
                states_(Hl, Al, n)
                # 2. dC_t = Σ_k Re(h_t) gy_t
                w = wbuf[: n * sz].view(nst)
                hr = hb.real if cplx_h else hb
                wr = scratch[: n * sz].view(nst)
                torch.sum(torch.mul(hr, gyb, out=wr), dim=-2, out=gC_t[t0:t1])
                # 3. adjoint g_t = C_t gy_t + conj(a_{t+1}) g_{t+1}
                g = Gb[:n]
                torch.mul(C_t[t0:t1], gyb, out=g)
                if cplx_a:
                    a.conj_physical_()
                adjoint_(Gl, Al, n, cr, first=i == 0, last=i + 1 == nb)
                # 4. ḡ(la) = conj(a) [g conj(h_{t-1}) (+ ZOH: ḡ(coef) conj(1/A))]
                hp = Hb[:n]
                if cplx_h:
                    hp.conj_physical_()
                gla = torch.mul(g, hp, out=w)
                if zoh:
                    if cplx_h:
                        Bf.conj_physical_()
                    r = torch.mul(g, Bf, out=zbuf[: n * sz].view(nst))  # g conj(Bf)
                    cc = coef.conj_physical_() if cplx_a else coef  # conj(coef)
                    p = torch.mul(r, cc, out=Bf)  # r conj(coef); Bf no longer needed
                    torch.sum(p.real if cplx_h else p, dim=-1, out=gu_t[t0:t1])
                    p.mul_(ub)  # ḡ(coef) conj(coef)
                    gAz[g0:g1] += p.sum((0, 1, 3))
                    r.mul_(ub)  # ḡ(coef)
                    gla.add_(r.mul_(invAc[g0:g1, None]))
                    # ḡ(Bf) = g conj(coef) u, into g (the adjoint of this block is used up below)
                    gBf = torch.mul(g, cc, out=g).mul_(ub)
                else:
                    s_ = gu_t[t0:t1]  # Re Σ_n g conj(Bf), then ∂u = s Δ
                    _re_dot_sum(g, Bf, s_, scratch)
                    gdlb = gdl_t[t0:t1]
                    torch.mul(s_, ub[..., 0], out=gdlb)
                    s_.mul_(dl[..., 0])
                    gBf = g.mul_(du)  # ḡ(Bf) = g Δ u
                gla.mul_(a)  # a holds conj(a)
                # 5. parameters: Δ, A, Bsel, Bb
                gdlb = gdl_t[t0:t1]
                if zoh:
                    _re_dot_sum(gla, At, gdlb, scratch)
                else:
                    gdlb.add_(_re_dot_sum(gla, At, u.new_empty(nst[:-1]), scratch))
                gA[g0:g1] += gla.mul_(dl).sum((0, 1, 3))
                torch.sum(gBf, dim=-2, out=gBs_t[t0:t1])
                if gBb is not None:
                    gBb[g0:g1] += gBf.sum((0, 1))
        if zoh:
            gA -= invAc * gAz
        gA = gA if cplx_a else gA.real
        return gu, gdl, gA, gBs, gBb, gC, None, None


def b2s6_scan(u: Tensor, delta: Tensor, A: Tensor, Bsel: Tensor, Bb: Tensor | None, C: Tensor,
              discretization: str = "euler", plan: ScanPlan | None = None) -> Tensor:
    """y (Bt, L, G, K) of the B2S6 recurrence (module docstring) by :class:`_B2S6Scan`.

    u, delta: (Bt, L, G, K) real; A: (G, N) real or complex; Bsel: (Bt, L, G, N); Bb: (G, K, N) or
    None (real or complex); C: (Bt, L, G, N) real. ``plan``: default :func:`b2s6_plan`.
    """
    if discretization not in ("euler", "zoh"):
        raise ValueError(f"unknown discretization {discretization!r}")
    Bt, L, G, K = u.shape
    N = A.shape[-1]
    hd = torch.promote_types(A.dtype, Bsel.dtype)
    if Bb is not None:
        hd = torch.promote_types(hd, Bb.dtype)
    Bsel = Bsel.to(hd).contiguous()
    Bb = None if Bb is None else Bb.to(hd).contiguous()
    plan = plan or b2s6_plan(Bt, G, K, N, hd.is_complex, L)
    return _B2S6Scan.apply(u.contiguous(), delta.contiguous(), A.contiguous(), Bsel, Bb,
                           C.contiguous(), discretization == "zoh", plan)


def b2s6_scan_ref(u: Tensor, delta: Tensor, A: Tensor, Bsel: Tensor, Bb: Tensor | None, C: Tensor,
                  discretization: str = "euler") -> Tensor:
    """The same map as :func:`b2s6_scan` in plain full-size tensor code and a sequential loop."""
    Bt, L, G, K = u.shape
    la = delta[..., None] * A[:, None, :]  # (Bt, L, G, K, N)
    a = torch.exp(la)
    Bf = Bsel[:, :, :, None, :] + (0 if Bb is None else Bb)  # (Bt, L, G, K, N)
    coef = delta[..., None] if discretization == "euler" else torch.expm1(la) / A[:, None, :]
    b = coef * u[..., None] * Bf
    h = torch.zeros_like(b[:, 0])
    ys = []
    for t in range(L):
        h = a[:, t] * h + b[:, t]
        y = (h * C[:, t, :, None, :]).sum(-1)
        ys.append(y.real if y.is_complex() else y)
    return torch.stack(ys, 1)
