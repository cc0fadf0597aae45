"""Library (kernels): packed causal depthwise convolution on CPU, channel-last, explicit backward.

    out[e, b, t, c] = act(Σ_k w[e, c, k] · x[e, b, t-(W-1)+k, c] + bias[e, c])     (x_{<0} = 0)

x (E, Bt, L, C) in the models' channel-last layout, weight (E, C, W), bias (E, C) or None,
activation None | "silu". Same formula as the pad + shifted-slices version it replaces
(``bench/legacy.py: causal_conv1d_slices``), computed without padding and without a full-size
product per tap:

forward   per cache-sized chunk of (member, batch) rows, ``out = x·w_{W-1} (+ bias)`` then one
          in-place ``addcmul_`` per earlier tap on the shifted time slice, then SiLU in place;
backward  per chunk, the pre-activation is recomputed in a reused chunk buffer (W ops, no saved
          activation), ``gz = silu'(z)·g``, ``gx = gz·w_{W-1}`` plus one ``addcmul_`` per tap on
          the slice shifted the other way, and ``gw[.., k] = Σ_{b,t} gz_t · x_{t-(W-1)+k}``,
          ``gbias = Σ_{b,t} gz`` accumulated over chunks.

Why. The slices version allocates a padded copy and W full-size products in the forward pass and,
in the backward pass, zero-fills and copies a full-size gradient per slice; on a 2-core VM where
every fresh multi-MiB tensor is page-faulted in (notes in ``inplace.py``) and packs outgrow the
last-level cache, that costs 3-15x the arithmetic. Tiles of ``CONV_CHUNK_ELEMS`` elements keep
the passes over a tile in cache; the output (and the input gradient) are the only full-size
allocations.
A grouped ``F.conv1d`` over E·C channels (oneDNN) needs layout copies to channel-first and back,
which cost more than they save: measured fwd + bwd with SiLU, float32, one thread, x (E, 64, 256,
128), W = 4 (``ssmrepro bench scans --kernels conv``, CPU-clock medians): E = 1 slices 20.8 ms,
F.conv1d 24.3 ms, this 8.9 ms; E = 4 slices 99 ms, F.conv1d 105 ms, this 34 ms
(``results/bench/kernels-cpu*.json``). With glibc's default allocator the slices version's cost
depends on the process's allocation history (fresh mmap'd 32 MiB blocks are page-faulted in:
at E = 4 it measured 450-480 ms in a fresh process, where this one measured 60 ms).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# Elements of one tile of (member, batch) rows (1 MiB float32). Measured on the 2-core EPYC VM
# (float32, fwd + bwd, E = 1 and 4, Bt = 64, L = 256, C = 128): 2^15 -> 2^18 elements per tile
# 15 -> 8 ms at E = 1 (per-op overhead of ~25 ops per tile), flat from 2^18 to 2^20.
CONV_CHUNK_ELEMS = 1 << 18


def _chunks(E: int, Bt: int, row: int, target: int) -> list[tuple[int, int, int, int]]:
    """(e0, e1, b0, b1) tiles of the (E, Bt) rows of ``row`` elements each, ~``target`` elements:
    a tile lies inside one member (several batch rows) or spans whole members (all rows)."""
    per = max(1, target // max(1, row))  # batch rows per tile
    if per < Bt:
        return [(e, e + 1, b, min(Bt, b + per)) for e in range(E) for b in range(0, Bt, per)]
    m = max(1, per // Bt)  # whole members per tile
    return [(e, min(E, e + m), 0, Bt) for e in range(0, E, m)]


def _conv_into(out: Tensor, x: Tensor, wt: Tensor, bias: Tensor | None) -> Tensor:
    """out = Σ_k wt[k] · x shifted by W-1-k (+ bias); x, out: (m, b, L, C); wt: (W, m, 1, 1, C)."""
    W, L = wt.shape[0], x.shape[2]
    if bias is None:
        torch.mul(x, wt[W - 1], out=out)
    else:
        torch.addcmul(bias, x, wt[W - 1], out=out)
    for k in range(W - 1):
        s = W - 1 - k
        if s < L:
            out[:, :, s:].addcmul_(x[:, :, : L - s], wt[k])
    return out


class _CausalConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, silu: bool, target: int) -> Tensor:
        E, Bt, L, C = x.shape
        wt = weight.permute(2, 0, 1).contiguous()[:, :, None, None, :]  # (W, E, 1, 1, C), C unit-stride
        bb = None if bias is None else bias.contiguous()[:, None, None, :]  # (E, 1, 1, C)
        out = x.new_empty(E, Bt, L, C)
        for e0, e1, b0, b1 in _chunks(E, Bt, L * C, target):
            o = out[e0:e1, b0:b1]  # (m, b, L, C)
            _conv_into(o, x[e0:e1, b0:b1], wt[:, e0:e1], None if bb is None else bb[e0:e1])
            if silu:
                F.silu(o, inplace=True)
        ctx.save_for_backward(x, weight, bias)
        ctx.silu, ctx.target = silu, target
        return out

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight, bias = ctx.saved_tensors
        E, Bt, L, C = x.shape
        W = weight.shape[-1]
        wt = weight.permute(2, 0, 1).contiguous()[:, :, None, None, :]  # (W, E, 1, 1, C)
        bb = None if bias is None else bias.contiguous()[:, None, None, :]
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx = torch.empty_like(x, memory_format=torch.contiguous_format) if need_x else None
        gw = weight.new_zeros(E, W, C)  # (E, W, C), tap-major: contiguous per-tap rows
        gb = weight.new_zeros(E, C) if (need_b and bias is not None) else None
        tiles = _chunks(E, Bt, L * C, ctx.target)
        e0, e1, b0, b1 = tiles[0]
        zbuf = x.new_empty(e1 - e0, b1 - b0, L, C)  # pre-activation / gz of one tile
        pbuf = x.new_empty(e1 - e0, b1 - b0, L, C)  # products for the weight gradient
        for e0, e1, b0, b1 in tiles:
            m, nb = e1 - e0, b1 - b0
            xc, gc = x[e0:e1, b0:b1], g[e0:e1, b0:b1]
            z = zbuf[:m, :nb]
            if ctx.silu:
                _conv_into(z, xc, wt[:, e0:e1], None if bb is None else bb[e0:e1])
                torch.ops.aten.silu_backward(gc, z, grad_input=z)  # gz, in place of z
                gz = z
            else:
                gz = gc
            if gx is not None:
                gxc = gx[e0:e1, b0:b1]
                torch.mul(gz, wt[W - 1, e0:e1], out=gxc)
                for k in range(W - 1):
                    s = W - 1 - k
                    if s < L:
                        gxc[:, :, : L - s].addcmul_(gz[:, :, s:], wt[k, e0:e1])
            if need_w:
                for k in range(W):
                    s = W - 1 - k
                    if s < L:  # a contiguous product buffer: the sum over (b, t) collapses
                        p = pbuf.view(-1)[: m * nb * (L - s) * C].view(m, nb, L - s, C)
                        torch.mul(gz[:, :, s:], xc[:, :, : L - s], out=p)
                        gw[e0:e1, k] += p.sum((1, 2))
            if gb is not None:
                gb[e0:e1] += gz.sum((1, 2))
        return gx, (gw.transpose(1, 2) if need_w else None), gb, None, None


def causal_conv1d_cpu(x: Tensor, weight: Tensor, bias: Tensor | None = None,
                      activation: str | None = None, chunk_elems: int | None = None) -> Tensor:
    """Packed causal depthwise conv: x (E, Bt, L, C), weight (E, C, W), bias (E, C) or None,
    activation None | "silu" -> (E, Bt, L, C), by :class:`_CausalConv` (any width, any dtype).

    ``chunk_elems``: elements per (member, batch) tile (default ``CONV_CHUNK_ELEMS``); the result
    does not depend on it beyond the summation order of the weight and bias gradients.
    """
    if activation not in (None, "silu", "swish"):
        raise ValueError(f"activation must be None or 'silu', got {activation!r}")
    E, Bt, L, C = x.shape
    W = weight.shape[-1]
    if tuple(weight.shape) != (E, C, W) or (bias is not None and tuple(bias.shape) != (E, C)):
        raise ValueError(
            f"weight must be (E, C, W)=({E}, {C}, W) and bias (E, C); got "
            f"{tuple(weight.shape)}, {None if bias is None else tuple(bias.shape)}"
        )
    dtype = x.dtype
    weight = weight.to(dtype)
    bias = None if bias is None else bias.to(dtype)
    if x.numel() == 0:
        return _reference(x, weight, bias, activation)
    target = int(chunk_elems) if chunk_elems else CONV_CHUNK_ELEMS
    if x.is_cuda and not chunk_elems:  # tiles are for a CPU core's caches; on a GPU one tile
        target = max(target, x.numel())  # (512 tiles x ~25 ops at 256 mqar-linear members)
    return _CausalConv.apply(x, weight, bias, activation is not None, target)


def _reference(x: Tensor, weight: Tensor, bias: Tensor | None, activation: str | None) -> Tensor:
    """The pad + shifted-slices formula (used for empty inputs only; tests compare against it)."""
    W, L = weight.shape[-1], x.shape[2]
    xp = F.pad(x, (0, 0, W - 1, 0))  # (E, Bt, L+W-1, C)
    out = sum(xp[:, :, j : j + L] * weight[:, None, None, :, j] for j in range(W))
    if bias is not None:
        out = out + bias[:, None, None, :]
    return F.silu(out) if activation in ("silu", "swish") else out
