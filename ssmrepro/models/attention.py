"""Packed causal attention layers and Transformer blocks.

``PackedAttention`` / ``TransformerBlock``: plain causal MHA and the pre-norm block of the
Transformer baselines (huang2025 / koren2026 comparisons).

``NeoXAttention`` / ``NeoXBlock``: GPT-NeoX attention with partial RoPE and a sliding-window causal
mask, in cooper2026's parallel-residual layer; optional depthwise causal conv on Q, K, V for
chen2025's Transformer + conv (Fig. 8). ``neox_attention_ref`` is the loop-over-queries reference.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.backend import note_kernel
from .layers import PackedLinear, make_norm
from .mamba import PackedCausalConv


class PackedAttention(nn.Module):
    """Causal MHA with qkv / out projections (with bias) per member.

    ``qk_dim`` / ``v_dim`` (default d) set the total query/key and value widths, split over the
    heads; e.g. chen2025's inverse-matching Transformer: d = 128, q/k 128, v 256, 1 head.
    """

    def __init__(self, E: int, d: int, heads: int = 1, qk_dim: int | None = None,
                 v_dim: int | None = None):
        super().__init__()
        self.qk, self.v = qk_dim or d, v_dim or d
        if self.qk % heads or self.v % heads:
            raise ValueError(f"q/k width {self.qk} and v width {self.v} must divide by heads={heads}")
        self.d, self.heads = d, heads
        self.qkv = PackedLinear(E, d, 2 * self.qk + self.v)  # x -> [q | k | v]
        self.out = PackedLinear(E, self.v, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        E, B, L, d = x.shape
        H = self.heads
        q, k, v = self.qkv(x).split([self.qk, self.qk, self.v], dim=-1)

        def heads(t: torch.Tensor) -> torch.Tensor:  # (E, B, L, w) -> (E*B, H, L, w/H)
            return t.reshape(E * B, L, H, -1).transpose(1, 2)

        note_kernel(type(self).__name__, "torch:sdpa")
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.out(y.transpose(1, 2).reshape(E, B, L, self.v))  # y: (E*B, H, L, v/H)


class PackedMLP(nn.Module):
    def __init__(self, E: int, d: int, hidden: int, act: str = "gelu"):
        super().__init__()
        self.fc1 = PackedLinear(E, d, hidden)
        self.fc2 = PackedLinear(E, hidden, d)
        self.act = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class TransformerBlock(nn.Module):
    """Pre-norm block: x + Attn(LN(x)), then x + MLP(LN(x)) (MLP omitted when hidden == 0)."""

    def __init__(self, E: int, d: int, heads: int, mlp_hidden: int, norm: str = "layernorm"):
        super().__init__()
        self.norm1 = make_norm(E, d, norm)
        self.attn = PackedAttention(E, d, heads)
        self.norm2 = make_norm(E, d, norm) if mlp_hidden else None
        self.mlp = PackedMLP(E, d, mlp_hidden) if mlp_hidden else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        if self.mlp is not None:
            x = x + self.mlp(self.norm2(x))
        return x


# ---------------------------------------------------------------------------------------------
# GPT-NeoX-style attention (cooper2026) and the conv-augmented Transformer (chen2025 Fig. 8)
# ---------------------------------------------------------------------------------------------


def rope_angles(L: int, r: int, base: float, device=None, dtype=torch.float64):
    """Rotation angles θ_{t,k} = t · base^{-2k/r} for t = 0..L-1, k = 0..r/2-1: (L, r/2).

    RoPE (Su et al. 2021, eq. 34) rotates pairs of coordinates by a position-dependent angle.
    ``r`` must be even here (callers round the rotary width down).
    """
    k = torch.arange(r // 2, device=device, dtype=torch.float64)
    inv_freq = base ** (-2.0 * k / r)  # (r/2,)
    t = torch.arange(L, device=device, dtype=torch.float64)
    return (t[:, None] * inv_freq[None, :]).to(dtype)  # (L, r/2)


def apply_rope(x: torch.Tensor, r: int, base: float) -> torch.Tensor:
    """Rotate the first r channels of x (..., L, hd) pairwise; channels r.. pass through.

    GPT-NeoX pairs channel k with channel k + r/2 ("rotate_half" layout):
        x'_k       = x_k cos θ_{t,k} − x_{k+r/2} sin θ_{t,k}
        x'_{k+r/2} = x_k sin θ_{t,k} + x_{k+r/2} cos θ_{t,k}
    An odd r is rounded down to even (the last rotary channel passes through) — see NeoXAttention.
    """
    r = r - r % 2
    if r == 0:
        return x
    L = x.shape[-2]
    ang = rope_angles(L, r, base, x.device, x.dtype)  # (L, r/2)
    cos, sin = ang.cos(), ang.sin()
    a, b, rest = x[..., : r // 2], x[..., r // 2 : r], x[..., r:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos, rest], dim=-1)


def window_mask(L: int, window: int | None, device=None) -> torch.Tensor:
    """allowed[i, j] = 0 ≤ i − j < window (causal sliding window); window None = plain causal."""
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(L, device=device)[None, :]
    diff = i - j
    allowed = diff >= 0
    if window is not None:
        allowed = allowed & (diff < window)
    return allowed  # (L, L) bool


class NeoXAttention(nn.Module):
    """Causal (optionally sliding-window) multi-head attention with partial RoPE, GPT-NeoX style.

    cooper2026 §E.2 / their fork's ``GPTNeoXAttention`` (notes/paper-settings.md §5.1):

        [q_h | k_h | v_h] = x W_qkv + b_qkv               per head h, head size s   (E, B, L, 3·H·s)
        q_h, k_h ← RoPE on the first r = int(s · rotary_pct) channels (base 10000)
        y_h = softmax(q_h k_hᵀ / √s + mask) v_h            mask: 0 ≤ i − j < window
        out = merge(y_1..y_H) W_o + b_o

    ``split_heads=True``: s = d / H and merge = concat (standard MHA; the paper's text).
    ``split_heads=False``: s = d for every head, W_qkv ∈ R^{d × 3·d·H}, merge = Σ_h y_h (the fork's
    ``do_split_square=False``). With H = 1 both are the same module.

    RoPE is written from its definition (apply_rope). For odd r (e.g. d = 4, 12, 20 with one head)
    we rotate the first r − 1 channels and pass the last through; the fork instead truncates its
    cos/sin tables, which is not a rotation for the last channel — a deliberate deviation.

    Optional depthwise causal conv (chen2025 Fig. 8, "insert a convolution after the input to the
    Transformer and before the attention module (applying it to Q, K, and V)"; details unknown).
    Our reading [INFERRED]: ``conv_on="qkv"`` (default) applies a width-``conv`` depthwise causal
    conv with bias to the concatenated q, k, v projections before RoPE — the analogue of Mamba's
    conv on (x, B, C) ≈ (V, K, Q); ``conv_on="input"`` instead convolves x before W_qkv. No
    activation after the conv.

    Dropout: none (attention dropout is off in our runs).
    """

    def __init__(self, E: int, d: int, heads: int = 1, window: int | None = None,
                 rotary_pct: float = 0.25, rope_base: float = 10000.0, split_heads: bool = True,
                 conv: int = 0, conv_on: str = "qkv"):
        super().__init__()
        if split_heads and d % heads:
            raise ValueError(f"d={d} is not divisible by heads={heads}")
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 (or None), got {window}")
        self.d, self.H, self.window = d, heads, window
        self.s = d // heads if split_heads else d  # head size
        self.split_heads, self.rope_base = split_heads, rope_base
        self.r = int(self.s * rotary_pct)  # rotary channels per head (rounded down to even in use)
        self.qkv = PackedLinear(E, d, 3 * heads * self.s)
        self.dense = PackedLinear(E, heads * self.s if split_heads else d, d)
        self.conv_on = conv_on
        self.conv = None
        if conv:
            if conv_on not in ("qkv", "input"):
                raise ValueError(f"conv_on must be 'qkv' or 'input', got {conv_on!r}")
            ch = 3 * heads * self.s if conv_on == "qkv" else d
            self.conv = PackedCausalConv(E, ch, conv, bias=True)

    def project(self, x: torch.Tensor):
        """x (E, B, L, d) -> q, k, v (E, B, H, L, s), RoPE applied to q and k."""
        E, B, L, _ = x.shape
        if self.conv is not None and self.conv_on == "input":
            x = self.conv(x)
        qkv = self.qkv(x)  # (E, B, L, 3·H·s)
        if self.conv is not None and self.conv_on == "qkv":
            qkv = self.conv(qkv)
        qkv = qkv.reshape(E, B, L, self.H, 3, self.s).permute(4, 0, 1, 3, 2, 5)  # (3,E,B,H,L,s)
        q, k, v = qkv[0], qkv[1], qkv[2]
        return apply_rope(q, self.r, self.rope_base), apply_rope(k, self.r, self.rope_base), v

    def merge(self, y: torch.Tensor) -> torch.Tensor:  # (E, B, H, L, s) -> (E, B, L, d)
        E, B, H, L, s = y.shape
        if self.split_heads:
            y = y.permute(0, 1, 3, 2, 4).reshape(E, B, L, H * s)
        else:
            y = y.sum(2)
        return self.dense(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d) -> (E, B, L, d)
        E, B, L, _ = x.shape
        q, k, v = self.project(x)  # (E, B, H, L, s)
        mask = window_mask(L, self.window, x.device)  # (L, L), True = attend
        note_kernel(type(self).__name__, "torch:sdpa")
        y = F.scaled_dot_product_attention(
            q.reshape(E * B, self.H, L, self.s), k.reshape(E * B, self.H, L, self.s),
            v.reshape(E * B, self.H, L, self.s), attn_mask=mask)  # (E*B, H, L, s)
        return self.merge(y.reshape(E, B, self.H, L, self.s))


def rope_ref(x: torch.Tensor, r: int, base: float) -> torch.Tensor:
    """Slow RoPE: an explicit 2×2 rotation of each pair (k, k + r/2) at each position t."""
    r = r - r % 2
    out = x.clone()
    L = x.shape[-2]
    for t in range(L):
        for k in range(r // 2):
            th = t * base ** (-2.0 * k / r)
            a, b = x[..., t, k], x[..., t, k + r // 2]
            out[..., t, k] = a * math.cos(th) - b * math.sin(th)
            out[..., t, k + r // 2] = a * math.sin(th) + b * math.cos(th)
    return out


def neox_attention_ref(m: NeoXAttention, x: torch.Tensor) -> torch.Tensor:
    """Slow reference of NeoXAttention.forward: a loop over queries i and heads h.

    Conv and projections reuse the module's layers; RoPE uses rope_ref; each query attends
    to keys j with max(0, i − window + 1) ≤ j ≤ i through an explicit softmax.
    """
    E, B, L, _ = x.shape
    xin = m.conv(x) if (m.conv is not None and m.conv_on == "input") else x
    qkv = m.qkv(xin)
    if m.conv is not None and m.conv_on == "qkv":
        qkv = m.conv(qkv)
    qkv = qkv.reshape(E, B, L, m.H, 3, m.s)
    heads = []
    for h in range(m.H):
        q = rope_ref(qkv[:, :, :, h, 0], m.r, m.rope_base)  # (E, B, L, s)
        k = rope_ref(qkv[:, :, :, h, 1], m.r, m.rope_base)
        v = qkv[:, :, :, h, 2]
        ys = []
        for i in range(L):
            lo = 0 if m.window is None else max(0, i - m.window + 1)
            sc = (q[:, :, i : i + 1] * k[:, :, lo : i + 1]).sum(-1) / math.sqrt(m.s)  # (E, B, n)
            p = torch.exp(sc - sc.max(-1, keepdim=True).values)
            p = p / p.sum(-1, keepdim=True)
            ys.append((p.unsqueeze(-1) * v[:, :, lo : i + 1]).sum(2))  # (E, B, s)
        heads.append(torch.stack(ys, dim=2))  # (E, B, L, s)
    y = torch.stack(heads, dim=2)  # (E, B, H, L, s)
    return m.merge(y)


class NeoXBlock(nn.Module):
    """GPT-NeoX layer: parallel residual h + Attn(LN1(h)) + MLP(LN2(h)) (cooper2026 §5.1).

    MLP = Linear(d, expand·d) → act → Linear(expand·d, d), with expand = 2 by default: the
    cooper2026 ``HybridConfig`` overrides ``intermediate_size = expand · hidden_size`` (so 2d, not
    the 4d passed in). ``parallel=False`` gives the sequential pre-norm block
    h ← h + Attn(LN1 h); h ← h + MLP(LN2 h). ``expand=0`` drops the MLP.
    """

    def __init__(self, E: int, d: int, attn: nn.Module, expand: int = 2, act: str = "silu",
                 norm: str = "layernorm", parallel: bool = True):
        super().__init__()
        self.parallel = parallel
        self.norm1 = make_norm(E, d, norm)
        self.attn = attn
        self.norm2 = make_norm(E, d, norm) if expand else None
        self.mlp = PackedMLP(E, d, expand * d, act) if expand else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        if self.mlp is None:
            return h + self.attn(self.norm1(h))
        if self.parallel:
            return h + self.attn(self.norm1(h)) + self.mlp(self.norm2(h))
        h = h + self.attn(self.norm1(h))
        return h + self.mlp(self.norm2(h))
