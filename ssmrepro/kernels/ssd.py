"""Library (kernels): Mamba-2 SSD (state-space duality) with one scalar decay per head, in pure PyTorch.

Shape legend (used in docstrings and end-of-line comments)::

    Bt  batch          L   sequence length     H  heads
    P   head dim       N   state size          Q  chunk length
    nc  chunks (nc * Q = L padded up to a multiple of Q)

Semantics (``a`` is the log-decay, the caller passes ``dt * A``, and ``a <= 0``)::

    h_t = exp(a_t) h_{t-1} + x_t B_t^T        h: (P, N) per (batch, head),  h_{-1} = 0
    y_t = h_t C_t
        = sum_{s <= t} exp(a_{s+1} + ... + a_t) (C_t . B_s) x_s

Mamba-2 input scaling (``x * dt``) and groups (expand B, C from G groups to H heads, e.g. with a
stride-0 ``expand``) are the caller's job. With ``a == 0`` the formula is exact causal linear
attention ``y_t = sum_{s <= t} (C_t . B_s) x_s`` (the decay matrix is exactly ``tril(1)``).

:func:`ssd` is our own chunked "segment-sum" formulation: intra-chunk attention with a masked
decay matrix, plus a chunk-level state recurrence also written as a masked decay matrix. All
exponents are sums of ``a`` values (<= 0) computed directly (no difference of cumulative sums),
positions above the diagonal are set to ``-inf`` before ``exp``, and nothing is divided by a
decay, so forward and backward stay finite for any decay strength.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["ssd_ref", "ssd", "segsum", "default_ssd_chunk"]


def default_ssd_chunk(L: int) -> int:
    """Default chunk length of :func:`ssd`: ~L^(1/3) as a power of two, clamped to [16, 64].

    The intra-chunk work grows like L*Q and the chunk-level decay matrix like (L/Q)^2; they
    balance near Q ~ L^(1/3). Measured on a 2-core CPU (Bt=16, H=4, P=N=8, fwd+bwd): Q=16 is
    best at L=1024 and 4096, Q=8 loses to the (L/Q)^2 term, Q=64 to the intra-chunk term.
    """
    q = 1 << max(0, round(math.log2(max(1.0, L ** (1 / 3)))))
    return max(1, min(L, max(16, min(64, q))))


def _check(x: Tensor, a: Tensor, B: Tensor, C: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    if x.dim() != 4:
        raise ValueError(f"x must be (Bt, L, H, P), got {tuple(x.shape)}")
    Bt, L, H, _ = x.shape
    if tuple(a.shape) != (Bt, L, H):
        raise ValueError(f"a must be (Bt, L, H)=({Bt}, {L}, {H}), got {tuple(a.shape)}")
    if B.dim() != 4 or tuple(B.shape[:3]) != (Bt, L, H) or B.shape != C.shape:
        raise ValueError(
            f"B and C must both be (Bt, L, H, N) with (Bt, L, H)=({Bt}, {L}, {H}); "
            f"got {tuple(B.shape)}, {tuple(C.shape)} (expand groups to heads first)"
        )
    dtype = x.dtype
    for t in (a, B, C):
        dtype = torch.promote_types(dtype, t.dtype)
    if not dtype.is_floating_point:
        raise TypeError(f"ssd supports real floating dtypes only, got {dtype}")
    return x.to(dtype), a.to(dtype), B.to(dtype), C.to(dtype)


def ssd_ref(x: Tensor, a: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """Sequential reference: the state recurrence, one Python step per time index.

    Args:
        x: (Bt, L, H, P) inputs (values).
        a: (Bt, L, H) log-decay per head, <= 0.
        B: (Bt, L, H, N) input projections (keys).
        C: (Bt, L, H, N) output projections (queries).

    Returns:
        y: (Bt, L, H, P).
    """
    x, a, B, C = _check(x, a, B, C)
    Bt, L, H, P = x.shape
    N = B.shape[-1]
    h = x.new_zeros(Bt, H, P, N)  # (Bt, H, P, N)
    ys = []
    # unbind (not x[:, t]): autograd then gathers per-step gradients with one stack
    for x_t, a_t, B_t, C_t in zip(x.unbind(1), a.unbind(1), B.unbind(1), C.unbind(1)):
        decay = torch.exp(a_t)[:, :, None, None]  # (Bt, H, 1, 1)
        h = decay * h + x_t[:, :, :, None] * B_t[:, :, None, :]  # (Bt, H, P, N)
        ys.append(torch.einsum("bhpn,bhn->bhp", h, C_t))  # (Bt, H, P)
    return torch.stack(ys, dim=1)  # (Bt, L, H, P)


def segsum(z: Tensor) -> Tensor:
    """Stable masked segment sums: ``out[..., i, j] = z_{j+1} + ... + z_i`` for i >= j, else -inf.

    Each entry is a direct (cumulative) sum of the z's in the segment, not a difference of two
    prefix sums, so it carries no cancellation error; the diagonal is exactly 0.

    Args:
        z: (..., T).

    Returns:
        (..., T, T), so that ``exp(segsum(z))`` is the lower-triangular decay matrix.
    """
    T = z.shape[-1]
    ones = torch.ones(T, T, dtype=torch.bool, device=z.device)
    zz = z.unsqueeze(-1).expand(*z.shape, T)  # (..., T, T); zz[..., r, j] = z_r
    zz = zz.masked_fill(~torch.tril(ones, diagonal=-1), 0)  # keep r > j
    seg = torch.cumsum(zz, dim=-2)  # (..., T, T); sum_{j < r <= i} z_r
    return seg.masked_fill(~torch.tril(ones), float("-inf"))  # (..., T, T)


def ssd(x: Tensor, a: Tensor, B: Tensor, C: Tensor, chunk: int | None = None) -> Tensor:
    """Chunked, stable SSD: same semantics as :func:`ssd_ref`, no Python loop over time.

    Args:
        x: (Bt, L, H, P) inputs (values).
        a: (Bt, L, H) log-decay per head, <= 0 (caller passes ``dt * A``).
        B: (Bt, L, H, N) input projections (keys).
        C: (Bt, L, H, N) output projections (queries).
        chunk: chunk length Q (default :func:`default_ssd_chunk`); L is zero-padded to nc * Q.

    Returns:
        y: (Bt, L, H, P).
    """
    x, a, B, C = _check(x, a, B, C)
    Bt, L, H, P = x.shape
    N = B.shape[-1]
    if L == 0:
        return x.clone()
    Q = int(chunk) if chunk is not None else default_ssd_chunk(L)
    if Q < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")

    # 0. pad L up to nc * Q with zeros (padded steps come last, so they touch no real output)
    nc = -(-L // Q)
    pad = nc * Q - L
    if pad:
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
        a = F.pad(a, (0, 0, 0, pad))
        B = F.pad(B, (0, 0, 0, 0, 0, pad))
        C = F.pad(C, (0, 0, 0, 0, 0, pad))
    # head-major chunked layout, so that every matmul below is a plain batched GEMM over
    # contiguous (Bt, H, nc) batches
    xh = x.reshape(Bt, nc, Q, H, P).permute(0, 3, 1, 2, 4).contiguous()  # (Bt, H, nc, Q, P)
    Bh = B.reshape(Bt, nc, Q, H, N).permute(0, 3, 1, 2, 4).contiguous()  # (Bt, H, nc, Q, N)
    Ch = C.reshape(Bt, nc, Q, H, N).permute(0, 3, 1, 2, 4).contiguous()  # (Bt, H, nc, Q, N)
    ah = a.reshape(Bt, nc, Q, H).permute(0, 3, 1, 2)  # (Bt, H, nc, Q)

    # 1. in-chunk decays, all exponents direct sums of a's (<= 0):
    #    Lmat[i, j] = exp(a_{j+1} + ... + a_i) (0 above the diagonal),
    #    d_in[i]  = exp(a_0 + ... + a_i)        (from the chunk start),
    #    d_out[j] = exp(a_{j+1} + ... + a_{Q-1}) (to the chunk end)
    Lmat = torch.exp(segsum(ah))  # (Bt, H, nc, Q, Q)
    d_in = torch.exp(torch.cumsum(ah, dim=-1))  # (Bt, H, nc, Q)
    a_next = F.pad(ah[..., 1:], (0, 1))  # (Bt, H, nc, Q); a_{j+1}, 0 for the last j
    d_out = torch.exp(torch.flip(torch.cumsum(torch.flip(a_next, [-1]), -1), [-1]))  # (Bt,H,nc,Q)

    # 2. intra-chunk (diagonal blocks): masked, decayed attention (C_i . B_j) x_j
    scores = torch.matmul(Ch, Bh.transpose(-1, -2)) * Lmat  # (Bt, H, nc, Q, Q)
    y = torch.matmul(scores, xh)  # (Bt, H, nc, Q, P)

    if nc > 1:
        # 3. each chunk's local final state: sum_j d_out[j] B_j^T x_j
        states = torch.matmul((Bh * d_out[..., None]).transpose(-1, -2), xh)  # (Bt,H,nc,N,P)

        # 4. chunk-level recurrence as a decay matrix over the chunk totals A_c; a leading zero
        #    chunk makes row z the state entering chunk z:
        #    s_in[z] = sum_{c < z} exp(A_{c+1} + ... + A_{z-1}) states[c]
        totals = ah.sum(dim=-1)  # (Bt, H, nc)
        decay_chunk = torch.exp(segsum(F.pad(totals[..., :-1], (1, 0))))  # (Bt, H, nc, nc)
        states = torch.cat([torch.zeros_like(states[:, :, :1]), states[:, :, :-1]], dim=2)
        s_in = torch.matmul(decay_chunk, states.reshape(Bt, H, nc, N * P))  # (Bt, H, nc, N*P)
        s_in = s_in.reshape(Bt, H, nc, N, P)  # (Bt, H, nc, N, P)

        # 5. contribution of the entering state: d_in[i] C_i s_in
        y = y + torch.matmul(Ch, s_in) * d_in[..., None]  # (Bt, H, nc, Q, P)

    # 6. back to (Bt, L, H, P), drop the padding
    y = y.permute(0, 2, 3, 1, 4).reshape(Bt, nc * Q, H, P)  # (Bt, nc*Q, H, P)
    return y[:, :L] if pad else y  # (Bt, L, H, P)
