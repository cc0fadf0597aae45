"""koren2026's two Mamba models, packed over E members.

``LinearMamba`` — the simplified linear Mamba of koren2026 Alg. 1 (official ``mamba_tiny``
"simplified" variant): no norms, no non-linearities, no gate, no biases, no discretisation,
A = I and D = 0 frozen (so they are not parameters at all), tied embedding / read-out:

    x = E[ids]                       (B, L, D)
    x̂ = causal_dconv(x W_in)         (B, L, 2D)   depthwise, width d_conv
    B_t = x̂_t S_B, C_t = x̂_t S_C      (B, L, N)
    y_t = Σ_{s≤t} (C_t · B_s) x̂_s     (B, L, 2D)   "attention mode" of the SSM with A = I
    x ← x + y W_out  (Λ > 1 layers with residual)  or  x ← y W_out
    logits = x Eᵀ

``MambaLM`` — a 1..n-layer Mamba-1 language model equivalent to mamba-ssm's MambaLMHeadModel
(RMSNorm pre-norm blocks with residual, final RMSNorm, tied head) with the Mamba mixer:
in_proj (d → 2·d_inner, no bias) → causal depthwise conv (width d_conv, bias) → SiLU → S6 →
y ⊙ SiLU(z) → out_proj (no bias). Written from the Mamba paper's equations, not from mamba-ssm.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.backend import causal_conv, note_kernel
from .layers import PackedEmbedding, PackedLinear, PackedModule, PackedNorm, _normal_, _uniform_
from .ssm import S6Core


class PackedCausalConv(PackedModule):
    """Depthwise causal conv: out_t[c] = Σ_k w[c, k] · x_{t-(W-1)+k}[c] (+ b[c]).

    Init as torch.nn.Conv1d(groups=channels): U(±1/sqrt(W)) for weight and bias.
    """

    def __init__(self, E: int, channels: int, width: int, bias: bool):
        super().__init__(E)
        self.width = width
        self.weight = nn.Parameter(torch.empty(E, channels, width))  # (E, C, W)
        self.bias = nn.Parameter(torch.empty(E, channels)) if bias else None

    def reset_member(self, e: int, g: torch.Generator) -> None:
        bound = 1.0 / math.sqrt(self.width)
        _uniform_(self.weight[e], bound, g)
        if self.bias is not None:
            _uniform_(self.bias[e], bound, g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, C) -> (E, B, L, C)
        # torch: kernels.cuda.causal_conv1d_torch; cuda backend: causal_conv1d_fn (widths 2-4)
        return causal_conv(x, self.weight, self.bias, who=type(self).__name__)


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """y_t = Σ_{s≤t} (q_t · k_s) v_s.  q, k: (E, B, L, N); v: (E, B, L, P) -> (E, B, L, P)."""
    L = q.shape[2]
    note_kernel("LinearMamba", "torch:linear_attention")
    scores = torch.matmul(q, k.transpose(-1, -2))  # (E, B, L, L)
    mask = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    return torch.matmul(scores.masked_fill(~mask, 0.0), v)


class LinearMambaLayer(nn.Module):
    def __init__(self, E: int, D: int, N: int, d_conv: int, expand: int):
        super().__init__()
        Di = expand * D
        self.in_proj = PackedLinear(E, D, Di, bias=False)
        self.conv = PackedCausalConv(E, Di, d_conv, bias=False)
        self.B_proj = PackedLinear(E, Di, N, bias=False)
        self.C_proj = PackedLinear(E, Di, N, bias=False)
        self.out_proj = PackedLinear(E, Di, D, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, D)
        xc = self.conv(self.in_proj(x))  # (E, B, L, Di)
        y = linear_attention(self.C_proj(xc), self.B_proj(xc), xc)  # (E, B, L, Di)
        return self.out_proj(y)


HEAD_PATTERNS = ("MHA", "MQA", "MKA", "MVA")


class LinearMambaMultiHeadLayer(PackedModule):
    """koren2026's simplified multi-head Mamba-2 layer (App. F.2.2, Alg. 3, Table 8), as the
    official code builds it on the simplified linear Mamba (one in_proj and conv, A = I, D = 0):

        x̂ = causal_dconv(x W_in)                      (B, L, Di)        Di = expand·D, P = Di / M
        values  x̂^h: MHA / MVA per head  x̂^h_p = Σ_d W_x[p, h, d] x̂_d        (W_x: (P, M, Di))
                     MQA / MKA shared    x̂_p   = Σ_h W_x[p, h] x̂_{h·P + p}   (W_x: (P, M))
        keys    B^h: MHA / MKA per head  x̂ S_B, S_B: Di -> M·N;  MQA / MVA shared, S_B: Di -> N
        queries C^h: MHA / MQA per head  x̂ S_C, S_C: Di -> M·N;  MKA / MVA shared, S_C: Di -> N
        ŷ^h_t = Σ_{s≤t} (C^h_t · B^h_s) x̂^h_s           each head: the A = I "attention mode" scan
        ŷ_d   = Σ_{p,h} W_y[d, p, h] ŷ^h_p               (W_y = W_heads: (Di, P, M))
        out   = ŷ W_out

    W_x (W_contract) and W_y (W_heads) are drawn N(0, 1) as the official ``torch.randn`` init;
    the linear maps use nn.Linear's init. Shapes of (x̂, B, C) per pattern: koren2026 Table 8.
    """

    def __init__(self, E: int, D: int, N: int, d_conv: int, expand: int, heads: int, pattern: str):
        super().__init__(E)
        if pattern not in HEAD_PATTERNS:
            raise ValueError(f"head_pattern must be one of {HEAD_PATTERNS}, got {pattern!r}")
        Di = expand * D
        if Di % heads:
            raise ValueError(f"heads={heads} must divide D_in = expand * D = {Di}")
        self.Di, self.N, self.M, self.P, self.pattern = Di, N, heads, Di // heads, pattern
        self.B_heads = heads if pattern in ("MHA", "MKA") else 1
        self.C_heads = heads if pattern in ("MHA", "MQA") else 1
        self.shared_x = pattern in ("MQA", "MKA")
        self.W_heads = nn.Parameter(torch.empty(E, Di, self.P, heads))  # (E, Di, P, M)
        wx = (E, self.P, heads) if self.shared_x else (E, self.P, heads, Di)
        self.W_contract = nn.Parameter(torch.empty(*wx))  # (E, P, M) or (E, P, M, Di)
        self.in_proj = PackedLinear(E, D, Di, bias=False)
        self.conv = PackedCausalConv(E, Di, d_conv, bias=False)
        self.B_proj = PackedLinear(E, Di, self.B_heads * N, bias=False)
        self.C_proj = PackedLinear(E, Di, self.C_heads * N, bias=False)
        self.out_proj = PackedLinear(E, Di, D, bias=False)

    def reset_member(self, e: int, g: torch.Generator) -> None:
        _normal_(self.W_heads[e], 1.0, g)
        _normal_(self.W_contract[e], 1.0, g)

    def head_inputs(self, x: torch.Tensor):
        """(x̂, B, C) per head before broadcasting, heads on dim 2 (size M or 1, Table 8):
        x̂ (E, B, M|1, L, P), B and C (E, B, M|1, L, N)."""
        E, Bsz, L, _ = x.shape
        M, P, N = self.M, self.P, self.N
        xc = self.conv(self.in_proj(x))  # (E, B, L, Di)
        if self.shared_x:
            xs = torch.einsum("eph,eblhp->eblp", self.W_contract, xc.reshape(E, Bsz, L, M, P))
            xh = xs[:, :, None]  # (E, B, 1, L, P)
        else:
            xh = torch.einsum("ephd,ebld->ebhlp", self.W_contract, xc)  # (E, B, M, L, P)
        Bh = self.B_proj(xc).reshape(E, Bsz, L, self.B_heads, N).transpose(2, 3)  # (E,B,M|1,L,N)
        Ch = self.C_proj(xc).reshape(E, Bsz, L, self.C_heads, N).transpose(2, 3)  # (E,B,M|1,L,N)
        return xh, Bh, Ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, D)
        xh, Bh, Ch = self.head_inputs(x)
        L = xh.shape[3]
        # y^h_t = Σ_{s≤t} (C^h_t · B^h_s) x̂^h_s; size-1 (shared) head dims broadcast in matmul
        note_kernel("LinearMamba", "torch:linear_attention")
        scores = torch.matmul(Ch, Bh.transpose(-1, -2))  # (E, B, M|1, L, L)
        mask = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        y = torch.matmul(scores.masked_fill(~mask, 0.0), xh)  # (E, B, M, L, P)
        return self.out_proj(torch.einsum("edph,ebhlp->ebld", self.W_heads, y))


class LinearMamba(nn.Module):
    def __init__(self, cfg, info, E: int):
        super().__init__()
        self.embed = PackedEmbedding(E, info.vocab_size, cfg.D)
        pattern = getattr(cfg, "head_pattern", None)
        if pattern is None:
            if getattr(cfg, "heads", 1) != 1:
                raise ValueError("heads > 1 needs a head_pattern (MHA, MQA, MKA or MVA)")
            self.layers = nn.ModuleList(
                LinearMambaLayer(E, cfg.D, cfg.N, cfg.d_conv, cfg.expand)
                for _ in range(cfg.n_layers)
            )
        else:
            self.layers = nn.ModuleList(
                LinearMambaMultiHeadLayer(E, cfg.D, cfg.N, cfg.d_conv, cfg.expand, cfg.heads, pattern)
                for _ in range(cfg.n_layers)
            )
        self.residual = cfg.residual if cfg.residual is not None else cfg.n_layers > 1
        self.cfg, self.vocab = cfg, info.vocab_size

    @torch.no_grad()
    def post_init(self, seeds: list[int]) -> None:
        """Overwrite every member with koren2026 Thm 2's designed weights (cfg.init = designed)."""
        if self.cfg.init != "designed":
            return
        from ..theory.designed import designed_weights

        if getattr(self.cfg, "head_pattern", None) is not None:
            raise ValueError("designed weights exist for the single-head linear Mamba only")
        if self.cfg.n_layers != 1 or self.cfg.d_conv != 2 or self.cfg.expand != 2:
            raise ValueError("designed weights exist for 1 layer, d_conv = 2, expand = 2")
        layer = self.layers[0]
        for e, s in enumerate(seeds):
            w = designed_weights(self.vocab, self.cfg.D, self.cfg.N, int(s))
            self.embed.weight[e].copy_(w["embedding"])
            layer.in_proj.weight[e].copy_(w["in_proj"])
            layer.conv.weight[e].copy_(w["conv"])
            layer.B_proj.weight[e].copy_(w["B_proj"])
            layer.C_proj.weight[e].copy_(w["C_proj"])
            layer.out_proj.weight[e].copy_(w["out_proj"])

    def features(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, D)
        x = self.embed(ids)
        for layer in self.layers:
            y = layer(x)
            x = x + y if self.residual else y
        return x

    def readout(self, x: torch.Tensor) -> torch.Tensor:  # (E, ..., D) -> (E, ..., V), tied
        E, D = x.shape[0], x.shape[-1]
        return torch.bmm(x.reshape(E, -1, D), self.embed.weight.transpose(1, 2)).reshape(
            *x.shape[:-1], -1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, V)
        return self.readout(self.features(ids))


class MambaMixer(nn.Module):
    """Mamba-1 mixer: in_proj -> conv -> SiLU -> S6 -> gate -> out_proj (packed)."""

    def __init__(self, E: int, d: int, N: int, d_conv: int = 4, expand: int = 2,
                 conv_bias: bool = True, bias: bool = False):
        super().__init__()
        self.d_inner = expand * d
        self.in_proj = PackedLinear(E, d, 2 * self.d_inner, bias=bias)
        self.conv = PackedCausalConv(E, self.d_inner, d_conv, bias=conv_bias)
        self.ssm = S6Core(E, self.d_inner, N, dt_rank=math.ceil(d / 16))
        self.out_proj = PackedLinear(E, self.d_inner, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        xs, z = self.in_proj(x).split(self.d_inner, dim=-1)  # (E, B, L, d_inner) each
        y = self.ssm(F.silu(self.conv(xs)))
        return self.out_proj(y * F.silu(z))


class MambaLM(nn.Module):
    def __init__(self, cfg, info, E: int):
        super().__init__()
        self.embed = PackedEmbedding(E, info.vocab_size, cfg.D, init_std=0.02)
        self.norms = nn.ModuleList(PackedNorm(E, cfg.D, "rmsnorm") for _ in range(cfg.n_layers))
        self.mixers = nn.ModuleList(
            MambaMixer(E, cfg.D, cfg.N, cfg.d_conv, cfg.expand) for _ in range(cfg.n_layers)
        )
        self.norm_f = PackedNorm(E, cfg.D, "rmsnorm")

    @torch.no_grad()
    def post_init(self, seeds: list[int]) -> None:
        """mamba-ssm's rescale_prenorm_residual: out_proj /= √n_layer (a no-op for one layer)."""
        for mixer in self.mixers:
            mixer.out_proj.weight /= len(self.mixers) ** 0.5

    def features(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, D)
        h = self.embed(ids)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(norm(h))
        return h

    def readout(self, h: torch.Tensor) -> torch.Tensor:  # (E, ..., D) -> (E, ..., V), tied
        h = self.norm_f(h)
        E, D = h.shape[0], h.shape[-1]
        return torch.bmm(h.reshape(E, -1, D), self.embed.weight.transpose(1, 2)).reshape(
            *h.shape[:-1], -1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, V)
        return self.readout(self.features(ids))
