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
into blocks of T steps whose (Bt, T, *S) working set (T * Bt * prod(S) <= ~2^18 elements, see
:func:`block_len`) stays in L2, reuse a few block buffers across blocks, exponentiate per block
(``exp2(log2(e) * x)``: ~3x faster than ``torch.exp`` on this CPU, same accuracy class), and run
every bulk operation block-wise. The fused selective scan keeps only the states entering each
block (checkpointing) and recomputes a block's states in the backward pass (T more in-place steps)
instead of storing all L states. Numerics: only log-decays (Re <= 0) are exponentiated; there is
no division by a decay.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

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


class _SelectiveScanFused(torch.autograd.Function):
    """Real S6 scan with grouped B_t and grouped or per-channel C, time-blocked and checkpointed.

    u, delta: (Bt, L, G, K); A: (G, K, N); B: (Bt, L, G, N); C: (Bt, L, G, N) (input-dependent)
    or (G, K, N) (constant per channel, S4D); returns y: (Bt, L, G, K) with
        h_t = exp(Δ_t A) ⊙ h_{t-1} + (Δ_t u_t) ⊗ B_t,   y_t = Σ_n C_t[., n] h_t[., n].
    Block buffers are laid out (Bt, T, N, G, K) (channels innermost: the broadcasts of Δ, Δu and
    A then run over long contiguous rows). Forward, per block of T steps: exp(Δ A) for the block,
    (Δu) ⊗ B written into the state buffer, T in-place steps h_t += a_t h_{t-1}, y by contracting
    with C. Only the states entering each block are saved. Backward, per block in reverse: redo
    the block's forward (exp, input term, T steps), then g = gy ⊗ C, T in-place adjoint steps
    g_t += a_{t+1} g_{t+1} (carrying a_{t1} g_{t1} across the block boundary), and the gradients
        dΔu_t = Σ_n g_t B_t,  dB_t = Σ_k g_t Δ_t u_t,  dC_t = Σ_k h_t gy_t,
        dla_t = g_t h_{t-1} a_t,  dΔ_t = Σ_n dla_t A + u_t dΔu_t,  dA = Σ_{b,t} dla_t Δ_t.
    """

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, T: int) -> Tensor:
        Bt, L, G, K = u.shape
        N = A.shape[-1]
        c_const = C.dim() == 3
        An = A.permute(2, 0, 1).contiguous()  # (N, G, K)
        Cn = C.permute(2, 0, 1).contiguous() if c_const else C  # (N, G, K) or (Bt, L, G, N)
        du = delta * u  # (Bt, L, G, K)
        y = u.new_empty(Bt, L, G, K)
        nb = -(-L // T)
        Hs = u.new_empty(nb, Bt, N, G, K)  # state entering each block
        Hb = u.new_empty(Bt, T + 1, N, G, K)  # [state entering the block, its T states]
        ab = u.new_empty(Bt, T, N, G, K)  # exp(Δ A) of the block
        tmp = torch.empty_like(ab)
        Hb[:, 0].zero_()
        Hl, Al = Hb.unbind(1), ab.unbind(1)
        for i in range(nb):
            t0, t1 = i * T, min(L, (i + 1) * T)
            n = t1 - t0
            Hs[i].copy_(Hl[0])
            a = torch.mul(delta[:, t0:t1, None], An, out=ab[:, :n])  # (Bt, n, N, G, K)
            _exp_into(a, a)
            Bb = B[:, t0:t1].transpose(-1, -2)[..., None]  # (Bt, n, N, G, 1)
            torch.mul(du[:, t0:t1, None], Bb, out=Hb[:, 1 : n + 1])  # input term
            for s in range(n):
                Hl[s + 1].addcmul_(Al[s], Hl[s])  # h_t = a_t h_{t-1} + b_t
            Cb = Cn if c_const else C[:, t0:t1].transpose(-1, -2)[..., None]
            torch.mul(Hb[:, 1 : n + 1], Cb, out=tmp[:, :n])
            torch.sum(tmp[:, :n], dim=2, out=y[:, t0:t1])  # (Bt, n, G, K)
            Hl[0].copy_(Hl[n])
        ctx.save_for_backward(u, delta, An, B, Cn, Hs)
        ctx.T = T
        return y

    @staticmethod
    def backward(ctx, gy: Tensor):
        u, delta, An, B, Cn, Hs = ctx.saved_tensors
        T = ctx.T
        Bt, L, G, K = u.shape
        N = An.shape[0]
        c_const = Cn.dim() == 3
        gy = gy.contiguous()
        du = delta * u
        gdu = torch.empty_like(u)  # dL/d(Δu)
        gdl = torch.empty_like(delta)  # dL/dΔ through the decay
        gB = torch.empty_like(B)  # (Bt, L, G, N)
        gC = torch.zeros_like(Cn) if c_const else torch.empty_like(Cn)
        gA = torch.zeros_like(An)  # (N, G, K)
        Hb = u.new_empty(Bt, T + 1, N, G, K)
        ab = u.new_empty(Bt, T, N, G, K)
        Gb, tmp = torch.empty_like(ab), torch.empty_like(ab)
        Hl, Al, Gl = Hb.unbind(1), ab.unbind(1), Gb.unbind(1)
        carry = None  # a_{t1} g_{t1}: the adjoint entering this block from the next one
        for i in range(Hs.shape[0] - 1, -1, -1):
            t0, t1 = i * T, min(L, (i + 1) * T)
            n = t1 - t0
            # 1. redo the block's forward: decays and states h_{t0-1} ... h_{t1-1}
            a = torch.mul(delta[:, t0:t1, None], An, out=ab[:, :n])
            _exp_into(a, a)
            Bb = B[:, t0:t1].transpose(-1, -2)[..., None]  # (Bt, n, N, G, 1)
            Hl[0].copy_(Hs[i])
            torch.mul(du[:, t0:t1, None], Bb, out=Hb[:, 1 : n + 1])
            for s in range(n):
                Hl[s + 1].addcmul_(Al[s], Hl[s])
            h, hprev = Hb[:, 1 : n + 1], Hb[:, :n]
            # 2. adjoint g_t = dL/dh_t = gy_t C_t + a_{t+1} g_{t+1}
            g = Gb[:, :n]
            gyb = gy[:, t0:t1, None]  # (Bt, n, 1, G, K)
            Cb = Cn if c_const else Cn[:, t0:t1].transpose(-1, -2)[..., None]
            torch.mul(gyb, Cb, out=g)
            if carry is not None:
                Gl[n - 1].add_(carry)
            for s in range(n - 2, -1, -1):
                Gl[s].addcmul_(Al[s + 1], Gl[s + 1])
            carry = Al[0] * Gl[0]
            # 3. gradients of the block
            w = tmp[:, :n]
            torch.sum(torch.mul(g, Bb, out=w), dim=2, out=gdu[:, t0:t1])
            torch.mul(g, du[:, t0:t1, None], out=w)
            torch.sum(w, dim=-1, out=gB[:, t0:t1].transpose(-1, -2))
            torch.mul(h, gyb, out=w)
            if c_const:
                gC += w.sum((0, 1))
            else:
                torch.sum(w, dim=-1, out=gC[:, t0:t1].transpose(-1, -2))
            gla = torch.mul(g, hprev, out=w).mul_(a)  # dL/d(Δ_t A)
            torch.sum(torch.mul(gla, An, out=g), dim=2, out=gdl[:, t0:t1])
            gA += gla.mul_(delta[:, t0:t1, None]).sum((0, 1))
        gu = gdu * delta
        gdl += gdu * u
        gC = gC.permute(1, 2, 0) if c_const else gC
        return gu, gdl, gA.permute(1, 2, 0), gB, gC, None


def selective_scan_fused(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                         D: Tensor | None = None) -> Tensor:
    """Same result as ``scan.selective_scan`` for real inputs with grouped B and grouped or
    per-channel C, computed by :class:`_SelectiveScanFused`.

    u, delta: (Bt, L, D_); A: (D_, N); B: (Bt, L, G, N); C: (Bt, L, G, N) or (D_, N);
    D: (D_,) or None -> y: (Bt, L, D_). Channel d belongs to group d // (D_ / G).
    """
    Bt, L, D_ = u.shape
    G, N = B.shape[2], A.shape[1]
    if D_ % G:
        raise ValueError(f"D_={D_} is not divisible by G={G}")
    K = D_ // G
    Cf = C.reshape(G, K, N) if C.dim() == 2 else C.contiguous()
    y = _SelectiveScanFused.apply(
        u.reshape(Bt, L, G, K), delta.reshape(Bt, L, G, K), A.reshape(G, K, N),
        B.contiguous(), Cf, block_len(Bt * D_ * N),
    ).reshape(Bt, L, D_)
    return y if D is None else y + D * u
