"""Library (models): plain causal multi-head softmax attention (the Transformer baselines).

    [q | k | v] = x W_qkv + b_qkv        q, k: qk_dim, v: v_dim wide in total, split over H heads
    y_h = softmax(q_h k_hᵀ / √(qk_dim/H) + causal mask) v_h
    out = concat_h(y_h) W_o + b_o

``qk_dim`` / ``v_dim`` (default d_model) set the total query/key and value widths, e.g. chen2025's
inverse-matching Transformer: d = 128, q/k 128, v 256, 1 head. Fast path:
``torch.nn.functional.scaled_dot_product_attention``; ``forward_ref``: an explicit softmax with a
loop over queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from ...kernels.backend import note_kernel
from ..layers import PackedLinear, linear_ref
from .base import MixerConfig, register

# whether the memory estimate counts the L×L scores and softmax that backward keeps: True (the
# default, e.g. CUDA float64's math path) unless ``attention_path`` says the fused kernel runs
_SCORES_KEPT: ContextVar[bool] = ContextVar("attention_scores_kept", default=True)


def scores_kept(device: str, dtype: str) -> bool:
    """Whether ``scaled_dot_product_attention`` (causal, no mask) keeps the L×L scores for
    backward on ``device`` at ``dtype``. On CPU at float32 / float64 its fused kernel keeps one
    logsumexp per row and head (measured with getrusage, L 4,096, 2 heads: 4.6 MB kept by the
    forward, 11 MB at the backward's peak, where the scores are 128 MB at float32); elsewhere
    (CUDA, other dtypes: not measured here) the scores are counted, as the math path keeps them."""
    return not (device == "cpu" and dtype in ("float32", "float64"))


@contextmanager
def attention_path(device: str, dtype: str) -> Iterator[None]:
    """Memory estimates made inside count attention's scores as ``scores_kept`` says."""
    token = _SCORES_KEPT.set(scores_kept(device, dtype))
    try:
        yield
    finally:
        _SCORES_KEPT.reset(token)


class AttentionConfig(MixerConfig):
    """Causal multi-head softmax attention (qkv and out projections with bias)."""

    name: Literal["attention"] = "attention"
    heads: int = Field(1, ge=1, description="attention heads H (qk_dim and v_dim split over "
                       "them)")
    qk_dim: int | None = Field(None, ge=1, description="total query/key width (default d_model)")
    v_dim: int | None = Field(None, ge=1, description="total value width (default d_model)")

    def activation_floats(self, d_model: int, L: int) -> int:
        """x, q, k, v, merged heads: d + 2·qk + 2·v per position; scores and softmax 2·H·L²
        where backward keeps them (``attention_path``), else a logsumexp per row and head and
        the fused kernel's own q, k, v copies and their gradients, 2·(2·qk + v) per position
        (a 2-layer Transformer, L 4,096, batch 8 on CPU: 61 MB estimated, 65 MB measured with
        getrusage; 4.1 GB when the scores were counted)."""
        qk, v = self.qk_dim or d_model, self.v_dim or d_model
        scores = (2 * self.heads * L * L if self.scores_built(d_model)
                  else self.heads * L + 2 * L * (2 * qk + v))
        return L * (d_model + 2 * qk + 2 * v) + scores

    def scores_built(self, d_model: int) -> bool:
        """Whether ``scaled_dot_product_attention`` builds the (B, H, L, L) scores: where the
        path keeps them (``attention_path``), and wherever the value width differs from the
        query/key width (``qk_dim`` != ``v_dim``: the fused CPU kernel wants one head width and
        the math path runs; chen2025-fig9's Transformer, qk 8, v 16, was estimated without its
        scores: a training step at d 32, T 128 allocated 2.1x the estimate, an evaluation batch
        3.4x)."""
        return _SCORES_KEPT.get() or (self.qk_dim or d_model) != (self.v_dim or d_model)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: q, k, v 2·qk + v, the attention's output v and the out projection's d
        per position; the scores and their softmax (B, H, L, L) where the path builds them
        (``attention_path``), else a logsumexp per row and head."""
        qk, v = self.qk_dim or d_model, self.v_dim or d_model
        scores = 2 * self.heads * L * L if self.scores_built(d_model) else self.heads * L
        return batch * (L * (d_model + 2 * qk + 2 * v) + scores)


@register(AttentionConfig)
class PackedAttention(nn.Module):
    """Causal MHA with qkv / out projections (with bias) per member."""

    def __init__(self, E: int, d_model: int, cfg: AttentionConfig):
        super().__init__()
        heads = cfg.heads
        self.qk, self.v = cfg.qk_dim or d_model, cfg.v_dim or d_model
        if self.qk % heads or self.v % heads:
            raise ValueError(f"q/k width {self.qk} and v width {self.v} must divide by heads={heads}")
        self.d, self.heads = d_model, heads
        self.qkv = PackedLinear(E, d_model, 2 * self.qk + self.v)  # x -> [q | k | v]
        self.out = PackedLinear(E, self.v, d_model)

    def init_weights(self) -> list[tuple[str, int]]:
        return []  # qkv and out are PackedLinear children

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        E, B, L, d = x.shape
        H = self.heads
        q, k, v = self.qkv(x).split([self.qk, self.qk, self.v], dim=-1)

        def heads(t: torch.Tensor) -> torch.Tensor:  # (E, B, L, w) -> (E*B, H, L, w/H)
            return t.reshape(E * B, L, H, -1).transpose(1, 2)

        note_kernel(type(self).__name__, "torch:sdpa")
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.out(y.transpose(1, 2).reshape(E, B, L, self.v))  # y: (E*B, H, L, v/H)

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        """softmax(q kᵀ / √dk + causal mask) v, head by head, one query at a time."""
        E, B, L, _ = x.shape
        H, qk, v = self.heads, self.qk, self.v
        q, k, vv = linear_ref(x, self.qkv).split([qk, qk, v], -1)
        out = x.new_zeros(E, B, L, v)
        for h in range(H):
            qs, vs = slice(h * qk // H, (h + 1) * qk // H), slice(h * v // H, (h + 1) * v // H)
            for t in range(L):
                s = torch.einsum("ebk,ebsk->ebs", q[:, :, t, qs], k[:, :, : t + 1, qs]) / (qk // H) ** 0.5
                p = torch.exp(s - s.max(-1, keepdim=True).values)
                p = p / p.sum(-1, keepdim=True)
                out[:, :, t, vs] = torch.einsum("ebs,ebsv->ebv", p, vv[:, :, : t + 1, vs])
        return linear_ref(out, self.out)
