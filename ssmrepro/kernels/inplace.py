"""Diagonal linear recurrence as one autograd Function with an explicit reverse-time backward.

    h_t = a_t * h_{t-1} + b_t,   h_{-1} = 0          (a, b, h: (Bt, L, *S), real or complex)

Forward runs the recurrence in place into the output buffer (L small in-place ops, no autograd graph
inside). Backward is the adjoint recurrence run backwards in time,

    g_t = dL/dh_t + conj(a_{t+1}) * g_{t+1},   dL/db_t = g_t,   dL/da_t = g_t * conj(h_{t-1}),

so a training step touches each (Bt, L, *S) tensor a handful of times instead of building an
O(L)-node autograd graph. Same arithmetic as the sequential reference (``scan.diag_scan_ref``), in
the same order, so results agree to rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor


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


class _SelectiveScanFused(torch.autograd.Function):
    """Real S6 scan with grouped B_t and grouped or per-channel C, fused per time step.

    u, delta: (Bt, L, G, K); A: (G, K, N); B: (Bt, L, G, N); C: (Bt, L, G, N) (input-dependent)
    or (G, K, N) (constant per channel, S4D); returns y: (Bt, L, G, K) with
        h_t = exp(Δ_t A) ⊙ h_{t-1} + (Δ_t u_t) ⊗ B_t,   y_t = Σ_n C_t[., n] h_t[., n].
    Only one step's (Bt, G, K, N) state is live in the arithmetic; all states are kept for the
    backward pass, which runs the adjoint recurrence backwards in time (no autograd graph).
    """

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
        Bt, L, G, K = u.shape
        N = A.shape[-1]
        c_const = C.dim() == 3
        du = delta * u  # (Bt, L, G, K)
        H = u.new_empty(Bt, L, G, K, N)  # all states, for backward
        y = u.new_empty(Bt, L, G, K)
        h = u.new_zeros(Bt, G, K, N)
        for t in range(L):
            a = torch.exp(delta[:, t, :, :, None] * A)  # (Bt, G, K, N)
            h = torch.addcmul(du[:, t, :, :, None] * B[:, t, :, None, :], a, h)  # (Bt, G, K, N)
            H[:, t] = h
            if c_const:
                torch.sum(h * C, dim=-1, out=y[:, t])  # (Bt, G, K)
            else:
                torch.matmul(h, C[:, t, :, :, None], out=y[:, t, :, :, None])  # (Bt, G, K, 1)
        ctx.save_for_backward(u, delta, A, B, C, H)
        return y

    @staticmethod
    def backward(ctx, gy: Tensor):
        u, delta, A, B, C, H = ctx.saved_tensors
        Bt, L, G, K = u.shape
        c_const = C.dim() == 3
        du = delta * u
        gdu = torch.empty_like(u)  # dL/d(Δu)
        gdelta = torch.zeros_like(delta)  # dL/dΔ through the decay
        gB, gC = torch.empty_like(B), torch.zeros_like(C)
        gA = torch.zeros_like(A)
        carry = torch.zeros_like(H[:, 0])  # exp(Δ_{t+1} A) ⊙ g_{t+1}
        for t in range(L - 1, -1, -1):
            h = H[:, t]  # (Bt, G, K, N)
            gyt = gy[:, t, :, :, None]  # (Bt, G, K, 1)
            if c_const:
                g = torch.addcmul(carry, gyt, C)  # dL/dh_t
                gC += (h * gyt).sum(0)
            else:
                g = torch.addcmul(carry, gyt, C[:, t, :, None, :])
                torch.matmul(h.transpose(-1, -2), gyt, out=gC[:, t, :, :, None])
            torch.matmul(g, B[:, t, :, :, None], out=gdu[:, t, :, :, None])  # Σ_n g B
            torch.matmul(g.transpose(-1, -2), du[:, t, :, :, None], out=gB[:, t, :, :, None])
            a = torch.exp(delta[:, t, :, :, None] * A)  # (Bt, G, K, N)
            if t > 0:
                gla = g * H[:, t - 1] * a  # dL/d(Δ_t A)
                gdelta[:, t] = (gla * A).sum(-1)
                gA += (gla * delta[:, t, :, :, None]).sum(0)
            carry = a * g
        gu = gdu * delta
        gdelta = gdelta + gdu * u
        return gu, gdelta, gA, gB, gC


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
        B.contiguous(), Cf,
    ).reshape(Bt, L, D_)
    return y if D is None else y + D * u
