"""Packed causal multi-head attention and MLP blocks (the Transformer baselines)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import PackedLinear, make_norm


class PackedAttention(nn.Module):
    """Causal MHA with qkv / out projections (with bias) per member."""

    def __init__(self, E: int, d: int, heads: int = 1):
        super().__init__()
        if d % heads:
            raise ValueError(f"d={d} is not divisible by heads={heads}")
        self.d, self.heads = d, heads
        self.qkv = PackedLinear(E, d, 3 * d)
        self.out = PackedLinear(E, d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        E, B, L, d = x.shape
        H, hd = self.heads, d // self.heads
        q, k, v = self.qkv(x).reshape(E * B, L, 3, H, hd).permute(2, 0, 3, 1, 4)  # (E*B, H, L, hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (E*B, H, L, hd)
        return self.out(y.transpose(1, 2).reshape(E, B, L, d))


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
