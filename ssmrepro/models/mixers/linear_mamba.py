"""Library (models): koren2026's simplified linear Mamba layer (Alg. 1) and its head patterns.

The official ``mamba_tiny`` "simplified" variant: no norms, no non-linearities, no gate, no biases,
no discretisation, A = I and D = 0 frozen (so they are not parameters at all):

    x̂ = causal_dconv(x W_in)          (B, L, Di)   Di = expand·d_model, depthwise, width d_conv
    B_t = x̂_t S_B, C_t = x̂_t S_C       (B, L, N)    N = d_state
    y_t = Σ_{s≤t} (C_t · B_s) x̂_s      (B, L, Di)   the "attention mode" of the SSM with A = I
    out = y W_out                      (B, L, d_model)

Multi-head patterns (App. F.2.2, Alg. 3, Table 8; ``heads`` = M > 1 with a ``head_pattern``), as the
official code builds them on the same layer (one in_proj and conv, A = I, D = 0), P = Di / M:

    values  x̂^h: MHA / MVA per head  x̂^h_p = Σ_d W_x[p, h, d] x̂_d        (W_x: (P, M, Di))
                 MQA / MKA shared    x̂_p   = Σ_h W_x[p, h] x̂_{h·P + p}   (W_x: (P, M))
    keys    B^h: MHA / MKA per head  x̂ S_B, S_B: Di -> M·N;  MQA / MVA shared, S_B: Di -> N
    queries C^h: MHA / MQA per head  x̂ S_C, S_C: Di -> M·N;  MKA / MVA shared, S_C: Di -> N
    ŷ^h_t = Σ_{s≤t} (C^h_t · B^h_s) x̂^h_s           each head: the A = I "attention mode" scan
    ŷ_d   = Σ_{p,h} W_y[d, p, h] ŷ^h_p               (W_y = W_heads: (Di, P, M))
    out   = ŷ W_out

W_x (W_contract) and W_y (W_heads) are drawn N(0, 1) as the official ``torch.randn`` init; the
linear maps use nn.Linear's init. The full models (tied embedding read-out, residual for Λ > 1
layers, koren2026 Thm 2's designed weights) are the ``linear_mamba`` preset (models.presets) and
the ``designed`` init scheme (models.init).

Fast path: :func:`chunked_linear_attention` (causal c × c scores within chunks of 64 positions, the
states of earlier chunks by a cumulative sum; one L × L matrix when L ≤ 64); ``forward_ref``: the
A = I recurrence S_t = S_{t-1} + x̂_t ⊗ B_t, y_t = S_t C_t, one step at a time, with einsum
projections and the conv written out.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import note_kernel
from ..layers import PackedCausalConv, PackedLinear, PackedModule, _normal_, conv_ref, linear_ref
from .base import MixerConfig, register

HEAD_PATTERNS = ("MHA", "MQA", "MKA", "MVA")
CHUNK = 64  # positions per chunk of the fast path (L <= CHUNK: one causal L × L score matrix)


def chunked_linear_attention(xh: torch.Tensor, Bh: torch.Tensor, Ch: torch.Tensor,
                             chunk: int = CHUNK) -> torch.Tensor:
    """y_t = Σ_{s≤t} (C_t · B_s) x̂_s per head (A = I), in chunks of ``chunk`` positions.

    Shapes: x̂ (..., H|1, L, P), B and C (..., H|1, L, N); size-1 head dims broadcast.
    Steps (the chunked form of linear attention; exact, no decay to underflow):
      1. within a chunk: the causal (c × c) scores C_t · B_s times x̂ (masked matmuls);
      2. each chunk's own state contribution Σ_s x̂_s ⊗ B_s (P × N), and the state before every
         chunk by a cumulative sum over chunks (exclusive);
      3. y_t += S_before(t) C_t for the earlier chunks.
    Cost per head ~ L·(c·(N + P) + 2·N·P) instead of L²·(N + P) for one L × L matrix.
    """
    L = xh.shape[-2]
    c = min(chunk, L)
    nc = -(-L // c)
    pad = nc * c - L
    if pad:  # zero positions at the end change nothing before them (causal)
        xh, Bh, Ch = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (xh, Bh, Ch))
    xs = xh.unflatten(-2, (nc, c))  # (..., H|1, nc, c, P)
    Bs, Cs = Bh.unflatten(-2, (nc, c)), Ch.unflatten(-2, (nc, c))  # (..., H|1, nc, c, N)
    mask = torch.ones(c, c, dtype=torch.bool, device=xh.device).tril()
    scores = torch.matmul(Cs, Bs.transpose(-1, -2)).masked_fill(~mask, 0.0)  # (..., nc, c, c)
    y = torch.matmul(scores, xs)  # (1) (..., H, nc, c, P)
    if nc > 1:
        states = torch.matmul(Bs.transpose(-1, -2), xs)  # (2) (..., H, nc, N, P): Σ_s B_s x̂_sᵀ
        before = torch.cumsum(states, dim=-3) - states  # exclusive: chunks strictly before
        y = y + torch.matmul(Cs, before)  # (3) (..., H, nc, c, P)
    y = y.flatten(-3, -2)  # (..., H, nc·c, P)
    return y[..., :L, :] if pad else y


class LinearMambaMixerConfig(MixerConfig):
    """koren2026 simplified linear Mamba layer (Alg. 1): conv + SSM with A = I, D = 0, no gate, no
    bias; heads > 1 with a head pattern MHA / MQA / MKA / MVA (App. F.2.2, Table 8)."""

    name: Literal["linear_mamba"] = "linear_mamba"
    d_state: int = Field(16, ge=1, description="state size N (per head)")
    d_conv: int = Field(2, ge=1, le=8, description="width of the causal depthwise conv")
    expand: int = Field(2, ge=1, description="Di = expand * d_model")
    heads: int = Field(1, ge=1, description="M, SSM heads (koren2026 App. F.2.2; needs head_pattern)")
    head_pattern: Literal["MHA", "MQA", "MKA", "MVA"] | None = Field(
        None, description="koren2026 Table 8 head pattern; null = the single-head layer (Alg. 1)")

    @model_validator(mode="after")
    def _check(self) -> LinearMambaMixerConfig:
        if self.head_pattern is None and self.heads != 1:
            raise ValueError("heads > 1 needs a head_pattern (MHA, MQA, MKA or MVA)")
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """x, in_proj and conv out, B and C, per-head values, y, merged y: per position; the masked
        (c × c) chunk scores of every distinct key/query head twice (scores, masked) and the chunk
        states (N × P per head and chunk, twice: own and cumulative)."""
        Di, N, M = self.expand * d_model, self.d_state, self.heads
        multi = self.head_pattern is not None
        hb = M if self.head_pattern in ("MHA", "MKA") else 1
        hc = M if self.head_pattern in ("MHA", "MQA") else 1
        values = (Di // M if self.head_pattern in ("MQA", "MKA") else Di) if multi else 0
        per_pos = d_model + 2 * Di + (hb + hc) * N + values + Di * (2 if multi else 1)
        c = min(CHUNK, L)
        P = Di // M if multi else Di
        states = 0 if L <= c else 2 * M * (-(-L // c)) * N * P
        # shared B and C with per-head values (MVA): the scores and C broadcast to the H heads,
        # copies the products keep, H·(c + N) per position (not counted: a step at d 32, 4
        # heads, T 128 allocated 1.5x the estimate)
        hx = M if self.head_pattern in ("MHA", "MVA") else 1
        bcast = hx * (c + N) if max(hb, hc) < hx else 0
        return L * (per_pos + bcast) + 2 * max(hb, hc) * L * c + states

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd (``chunked_linear_attention`` over L padded to nc·c): per padded
        position, the conv's output Di, B and C (hb + hc)·N, the per-head values (head patterns),
        the (c × c) chunk scores and their masked copy 2·max(hb, hc)·c (and their copy
        broadcast to the H heads of values where those are more, H·c), and the output y of H
        heads of P values, H·P; with more than one chunk the chunk states and the states before
        each chunk (H, nc, N, P), 2·H·N·P per chunk, their product with C and its sum with y,
        2·H·P more."""
        Di, N, M = self.expand * d_model, self.d_state, self.heads
        multi = self.head_pattern is not None
        hb = M if self.head_pattern in ("MHA", "MKA") else 1
        hc = M if self.head_pattern in ("MHA", "MQA") else 1
        hx = M if self.head_pattern in ("MHA", "MVA") else 1
        P = Di // M if multi else Di
        values = hx * P if multi else 0
        c = min(CHUNK, L)
        nc = -(-L // c)
        H = max(hb, hc, hx)
        scores = 2 * max(hb, hc) * c + (H * c if max(hb, hc) < H else 0)
        per_pos = Di + (hb + hc) * N + values + scores + (3 if nc > 1 else 1) * H * P
        return batch * (nc * c * per_pos + (2 * nc * H * N * P if nc > 1 else 0))


@register(LinearMambaMixerConfig)
class LinearMambaMixer(PackedModule):
    """koren2026's simplified linear Mamba layer, single-head or with a head pattern (module doc)."""

    def __init__(self, E: int, d_model: int, cfg: LinearMambaMixerConfig):
        super().__init__(E)
        Di, heads, pattern = cfg.expand * d_model, cfg.heads, cfg.head_pattern
        if Di % heads:
            raise ValueError(f"heads={heads} must divide D_in = expand * d_model = {Di}")
        self.d_model, self.d_conv, self.expand = d_model, cfg.d_conv, cfg.expand
        self.Di, self.N, self.M, self.P, self.pattern = Di, cfg.d_state, heads, Di // heads, pattern
        self.B_heads = heads if pattern in ("MHA", "MKA") else 1
        self.C_heads = heads if pattern in ("MHA", "MQA") else 1
        self.shared_x = pattern in ("MQA", "MKA")
        if pattern is not None:  # registered before the children: koren2026's draw order
            self.W_heads = nn.Parameter(torch.empty(E, Di, self.P, heads))  # (E, Di, P, M)
            wx = (E, self.P, heads) if self.shared_x else (E, self.P, heads, Di)
            self.W_contract = nn.Parameter(torch.empty(*wx))  # (E, P, M) or (E, P, M, Di)
        self.in_proj = PackedLinear(E, d_model, Di, bias=False)
        self.conv = PackedCausalConv(E, Di, cfg.d_conv, bias=False)
        self.B_proj = PackedLinear(E, Di, self.B_heads * cfg.d_state, bias=False)
        self.C_proj = PackedLinear(E, Di, self.C_heads * cfg.d_state, bias=False)
        self.out_proj = PackedLinear(E, Di, d_model, bias=False)

    def init_weights(self) -> list[tuple[str, int]]:
        """W_heads reads the P·M head outputs; W_contract reads Di (per head) or the M heads (shared)."""
        if self.pattern is None:
            return []
        return [("W_heads", self.P * self.M), ("W_contract", self.M if self.shared_x else self.Di)]

    def reset_member(self, e: int, g: torch.Generator) -> None:
        if self.pattern is not None:
            _normal_(self.W_heads[e], 1.0, g)
            _normal_(self.W_contract[e], 1.0, g)

    def head_inputs(self, x: torch.Tensor, ref: bool = False):
        """(x̂, B, C) per head before broadcasting, heads on dim 2 (size M or 1, Table 8):
        x̂ (E, B, M|1, L, P), B and C (E, B, M|1, L, N). Single-head layer: M = 1, P = Di."""
        E, Bsz, L, _ = x.shape
        M, P, N = self.M, self.P, self.N
        xi = linear_ref(x, self.in_proj) if ref else self.in_proj(x)
        xc = conv_ref(xi, self.conv) if ref else self.conv(xi)  # (E, B, L, Di)
        Bp = linear_ref(xc, self.B_proj) if ref else self.B_proj(xc)
        Cp = linear_ref(xc, self.C_proj) if ref else self.C_proj(xc)
        if self.pattern is None:
            xh = xc[:, :, None]  # (E, B, 1, L, Di)
        elif self.shared_x:
            xs = torch.einsum("eph,eblhp->eblp", self.W_contract, xc.reshape(E, Bsz, L, M, P))
            xh = xs[:, :, None]  # (E, B, 1, L, P)
        else:
            xh = torch.einsum("ephd,ebld->ebhlp", self.W_contract, xc)  # (E, B, M, L, P)
        Bh = Bp.reshape(E, Bsz, L, self.B_heads, N).transpose(2, 3)  # (E, B, M|1, L, N)
        Ch = Cp.reshape(E, Bsz, L, self.C_heads, N).transpose(2, 3)  # (E, B, M|1, L, N)
        return xh, Bh, Ch

    def _merge(self, y: torch.Tensor, ref: bool = False) -> torch.Tensor:
        """Per-head outputs (E, B, M|1, L, P) -> (E, B, L, d_model)."""
        if self.pattern is None:
            y = y[:, :, 0]  # (E, B, L, Di)
        else:
            y = torch.einsum("edph,ebhlp->ebld", self.W_heads, y)  # Σ_{p,h} W_y[d, p, h] ŷ^h_p
        return linear_ref(y, self.out_proj) if ref else self.out_proj(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d_model) -> (E, B, L, d_model)
        xh, Bh, Ch = self.head_inputs(x)
        note_kernel(type(self).__name__, "torch:linear_attention")
        return self._merge(chunked_linear_attention(xh, Bh, Ch, CHUNK))

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        """The A = I recurrence per head: S_t = S_{t-1} + x̂_t ⊗ B_t, y_t = S_t C_t."""
        xh, Bh, Ch = self.head_inputs(x, ref=True)
        E, Bsz, _, L, P = xh.shape
        H = max(xh.shape[2], Bh.shape[2], Ch.shape[2])
        xh, Bh, Ch = (t.expand(E, Bsz, H, *t.shape[3:]) for t in (xh, Bh, Ch))
        S = x.new_zeros(E, Bsz, H, P, self.N)  # state per head: (P, N)
        ys = []
        for t in range(L):
            S = S + xh[:, :, :, t, :, None] * Bh[:, :, :, t, None, :]
            ys.append((S * Ch[:, :, :, t, None, :]).sum(-1))  # (E, B, H, P)
        return self._merge(torch.stack(ys, dim=3), ref=True)  # (E, B, H, L, P)
