"""Library (models): GPT-NeoX attention with partial RoPE and a sliding window (cooper2026).

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
activation after the conv. Dropout: none (attention dropout is off in our runs).

The same attention is the mixer of the backbone's ``neox`` block (models.blocks.NeoXBlock, the
parallel-residual layer); ``NeoXAttnFields`` holds the fields both configs share. Fast path:
``scaled_dot_product_attention`` with the window mask; ``forward_ref`` (= ``neox_attention_ref``):
a loop over queries and heads with RoPE from explicit 2×2 rotations (``rope_ref``).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import ConfigDict, Field, model_validator
from torch import nn

from ...kernels.backend import note_kernel
from ...util import NoBoolNumbers
from ..base import refuse_unread
from ..layers import PackedCausalConv, PackedLinear
from .attention import _SCORES_KEPT
from .base import MixerConfig, register


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


def _round_up(x: float, digits: int) -> str:
    """``x`` rounded up to ``digits`` significant digits, as text (0.08333 -> '0.084')."""
    from decimal import ROUND_CEILING, Decimal

    d = Decimal(repr(x))
    return str(d.quantize(Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=ROUND_CEILING))


class NeoXAttnFields(NoBoolNumbers):
    """Fields of GPT-NeoX attention, shared by the ``neox_attn`` mixer and the ``neox`` block."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    heads: int = Field(1, ge=1, description="attention heads (split_heads: d_model split over "
                       "them)")
    window: int | None = Field(
        None, ge=1, description="sliding window: query i sees j iff 0 <= i-j < window; null = all")
    rotary_pct: float = Field(0.25, ge=0, le=1, description="share of head dims with RoPE")
    rope_base: float = Field(10000.0, gt=0, description="RoPE frequencies base^(-2k/r) over "
                             "the r rotary dims")
    split_heads: bool = Field(
        True, description="false: every head uses the full d, outputs summed (cooper2026 fork)")
    conv: int = Field(0, ge=0, le=8, description="depthwise causal conv width on Q,K,V (0 = off)")
    conv_on: Literal["qkv", "input"] = Field(
        "qkv", description="conv on the q,k,v projections or on the layer input")

    @model_validator(mode="after")
    def _attn_unread(self):
        unread = [("conv_on", "with conv 0 (no convolution)")] if not self.conv else []
        if self.rotary_pct == 0:
            unread.append(("rope_base", "with rotary_pct 0 (no RoPE)"))
        if self.heads == 1:  # one head is the whole width either way (merge: one head's sum)
            unread.append(("split_heads", "with heads 1 (one head spans the whole width "
                           "either way)"))
        refuse_unread(self, unread)
        return self

    def rotary_channels(self, d_model: int, rotary_pct: float | None = None) -> int:
        """The channels of a head that RoPE rotates at ``rotary_pct`` (default: this config's):
        that share of the head size, rounded down to even (``apply_rope``; the fork's int())."""
        pct = self.rotary_pct if rotary_pct is None else rotary_pct
        r = int((d_model // self.heads if self.split_heads else d_model) * pct)
        return r - r % 2

    def refuse_unread_rope(self, d_model: int) -> None:
        """Raise ValueError for ``rotary_pct`` / ``rope_base`` set away from their defaults where
        the head size leaves them nothing to change: a share that rotates as many channels as
        the default's (both rounded down to even) or none (as rotary_pct 0), or a base with at
        most one rotated pair, whose only frequency is base^0 = 1 (d_model 8, one head:
        rotary_pct 0.3 rotated the two channels 0.25 rotates, one model under two run ids)."""
        size = d_model // self.heads if self.split_heads else d_model
        r = self.rotary_channels(d_model)
        default = type(self).model_fields["rotary_pct"].default
        unread = []
        if r == self.rotary_channels(d_model, default):
            unread.append(("rotary_pct", f"at head size {size}: it rotates {r} channels, as the "
                           f"default {default:g} does (the share of the head size is rounded "
                           "down to even)"))
        elif r == 0 and self.rotary_pct > 0:  # the model of rotary_pct 0, under another name
            # 2 / size rounded up to the fewest digits that rotate 2 channels: 2 / 24 printed
            # '0.0833333' (rounded down) rotated none, and was refused with the same advice
            # (where the default rotates 2, that is the default: leave it out)
            least = next(t for d in range(2, 18) if self.rotary_channels(
                d_model, t := float(_round_up(2 / size, d))) >= 2 or d == 17)
            other = (f"leave it out (the default {default:g} rotates 2 channels)"
                     if self.rotary_channels(d_model, default) == 2
                     else f"give at least {least!r} (2 channels)")
            raise ValueError(f"rotary_pct {self.rotary_pct:g} rotates no channel at head size "
                             f"{size} (the share of the head size is rounded down to even): the "
                             "run would train the model of rotary_pct 0 (no RoPE) under another "
                             f"run id; give rotary_pct 0, or {other}")
        if r <= 2:
            unread.append(("rope_base", f"at head size {size} and rotary_pct "
                           f"{self.rotary_pct:g}: {r} rotated channels ("
                           f"{'no RoPE' if r == 0 else 'one pair, whose only frequency is base^0 = 1'})"))
        refuse_unread(self, unread)

    def build_attention(self, E: int, d_model: int) -> nn.Module:
        return NeoXAttention(E, d_model, self)

    def activation_floats(self, d_model: int, L: int) -> int:
        """x, qkv (+ conv), RoPE'd q and k, merged heads: per position; scores + softmax 2·H·L²
        where backward keeps them (``attention.attention_path``, as for ``attention``), else a
        logsumexp per row and head and the fused kernel's own q, k, v copies and their
        gradients, 2·3·H·s per position (the scores were counted on every path: a NeoX layer
        at L 1,024, d 32, 2 heads on CPU was estimated at 6.7x what a training step
        allocated)."""
        s = d_model // self.heads if self.split_heads else d_model
        qkv = 3 * self.heads * s
        per_pos = d_model + qkv * (2 if self.conv else 1) + 2 * self.heads * s + self.heads * s
        scores = (2 * self.heads * L * L if _SCORES_KEPT.get()
                  else self.heads * L + 2 * L * qkv)
        return L * per_pos + scores

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: qkv 3·H·s (twice with its conv), the RoPE'd q and k 2·H·s, the
        attention's output and its merged heads 2·H·s and the out projection's d per position;
        the scores and their softmax (B, H, L, L) where the path builds them
        (``attention.attention_path``), else a logsumexp per row and head."""
        s = d_model // self.heads if self.split_heads else d_model
        qkv = 3 * self.heads * s * (2 if self.conv else 1)
        scores = 2 * self.heads * L * L if _SCORES_KEPT.get() else self.heads * L
        return batch * (L * (qkv + 4 * self.heads * s + d_model) + scores)

    def fixed_floats(self, d_model: int, L: int) -> int:
        """The (L, L) mask the attention kernel keeps for backward as floats (``window_mask``'s
        booleans, converted), one per layer whatever the batch."""
        return L * L


class NeoXAttnConfig(NeoXAttnFields, MixerConfig):
    """GPT-NeoX attention: partial RoPE, sliding-window causal mask (cooper2026); opt. QKV conv."""

    name: Literal["neox_attn"] = "neox_attn"


@register(NeoXAttnConfig)
class NeoXAttention(nn.Module):
    """Causal (optionally sliding-window) multi-head attention with partial RoPE, GPT-NeoX style."""

    def __init__(self, E: int, d_model: int, cfg: NeoXAttnFields):
        super().__init__()
        d, heads, window = d_model, cfg.heads, cfg.window
        if cfg.split_heads and d % heads:
            raise ValueError(f"d={d} is not divisible by heads={heads}")
        self.d, self.H, self.window = d, heads, window
        self.s = d // heads if cfg.split_heads else d  # head size
        self.split_heads, self.rope_base = cfg.split_heads, cfg.rope_base
        cfg.refuse_unread_rope(d)
        self.r = int(self.s * cfg.rotary_pct)  # rotary channels per head (rounded down to even in use)
        self.qkv = PackedLinear(E, d, 3 * heads * self.s)
        self.dense = PackedLinear(E, heads * self.s if cfg.split_heads else d, d)
        self.conv_on = cfg.conv_on
        self.conv = None
        if cfg.conv:
            ch = 3 * heads * self.s if cfg.conv_on == "qkv" else d
            self.conv = PackedCausalConv(E, ch, cfg.conv, bias=True)

    def init_weights(self) -> list[tuple[str, int]]:
        return []  # qkv, dense and conv are children

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

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return neox_attention_ref(self, x)


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
