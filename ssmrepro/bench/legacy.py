"""Tool (bench): frozen copies of the CPU kernels as of commit 7336cc2, the "before" side of the
benchmarks (``ssmrepro bench scans`` / ``ssmrepro bench step``) and of the equivalence tests.

* :func:`causal_conv1d_slices` — the pad + W shifted slices conv (``kernels/cuda.py:
  causal_conv1d_torch`` before it delegated to ``kernels/conv.py``);
* :func:`selective_scan_fused_v1` — the time-blocked fused selective scan without batch tiles
  (``kernels/inplace.py`` before the tiles): T from ``Bt·D·N``, one tile, mul + sum contractions.

Not used by the models. Kept verbatim apart from names, so that a benchmark compares against
exactly what ran before, in the same process.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

_LOG2E = 1.0 / math.log(2.0)
_BLOCK_ELEMS = 1 << 18
_MAX_BLOCK = 128


def block_len_v1(state_numel: int) -> int:
    """The old time-block rule: T = 2^18 / (Bt·D·N) clamped to [4, 128]."""
    return max(4, min(_MAX_BLOCK, _BLOCK_ELEMS // max(1, state_numel)))


def _exp_into(x: Tensor, out: Tensor) -> Tensor:
    if x.is_complex():
        return torch.exp(x, out=out)
    torch.mul(x, _LOG2E, out=out)
    return torch.exp2(out, out=out)


def causal_conv1d_slices(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None
) -> Tensor:
    """x (E, Bt, L, C), weight (E, C, W), bias (E, C) -> (E, Bt, L, C): pad + shifted slices."""
    W, L = weight.shape[-1], x.shape[2]
    xp = F.pad(x, (0, 0, W - 1, 0))  # (E, Bt, L+W-1, C)
    out = sum(xp[:, :, j : j + L] * weight[:, None, None, :, j] for j in range(W))
    if bias is not None:
        out = out + bias[:, None, None, :]
    return F.silu(out) if activation in ("silu", "swish") else out


class _SelectiveScanFusedV1(torch.autograd.Function):
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


def selective_scan_fused_v1(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
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
    y = _SelectiveScanFusedV1.apply(
        u.reshape(Bt, L, G, K), delta.reshape(Bt, L, G, K), A.reshape(G, K, N),
        B.contiguous(), Cf, block_len_v1(Bt * D_ * N),
    ).reshape(Bt, L, D_)
    return y if D is None else y + D * u
