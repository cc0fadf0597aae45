"""TEST ORACLE ONLY — a frozen copy of the hand-written models before they became SeqLM presets.

Never imported by ``ssmrepro/``; never edit it to follow the library. tests/test_presets.py builds
each preset (``ssm_lm``, ``transformer_lm``, ``linear_mamba``, ``mamba_lm``, ``cooper_hybrid``) and
the model below from the same seeds and checks, in float64, the same parameter count, the same
parameters, the same outputs and the same gradients of every parameter.

Copied from ssmrepro/models/{layers,ssm,backbone,mamba,attention,stack,init}.py as of commit
bc217b6 (the last commit with the hand-written models), trimmed to the options those models use:
SSMLM (huang2025), TransformerLM, LinearMamba (koren2026 Alg. 1 + head patterns, designed weights),
MambaLM (mamba-ssm's MambaLMHeadModel equivalent) and cooper2026's hybrid as the old SeqLM built it
(Mamba-1 block + GPT-NeoX block, tied head, Hugging Face init). What it still takes from ssmrepro:
the sequential reference scan ``kernels.scan.selective_scan_ref`` (the models used the fused fast
scan; the reference is the stronger oracle) and ``theory.designed.designed_weights`` (a theory
construction, not a model). Build with :func:`build_legacy` (the old ``build_model``: reset every
packed module in module order from the member's generator, then the scheme / post-init step).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from ssmrepro.kernels.scan import selective_scan_ref
from ssmrepro.theory.designed import designed_weights

# --------------------------------------------------------------------------------------------
# old configs (field names before the d_model / d_state rename)
# --------------------------------------------------------------------------------------------


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SSMLMConfig(_Cfg):
    name: Literal["ssm_lm"] = "ssm_lm"
    mixer: Literal["s6", "s4d"] = "s6"
    d: int = 32
    N: int = 8
    n_layers: int = 1
    pe: Literal["none", "index"] = "none"
    norm: Literal["none", "layernorm", "rmsnorm"] = "none"
    residual: bool = True
    head_bias: bool = True
    dt_rank: int | Literal["auto"] = "auto"
    dt_min: float = 1e-3
    dt_max: float = 1e-1


class TransformerLMConfig(_Cfg):
    name: Literal["transformer_lm"] = "transformer_lm"
    d: int = 16
    n_layers: int = 1
    heads: int = 1
    mlp_ratio: int = 1
    mlp_hidden: int | None = None
    pos: Literal["learned", "none"] = "learned"
    norm: Literal["none", "layernorm", "rmsnorm"] = "layernorm"
    head_bias: bool = True


class LinearMambaConfig(_Cfg):
    name: Literal["linear_mamba"] = "linear_mamba"
    D: int = 32
    N: int = 16
    n_layers: int = 1
    d_conv: int = 2
    expand: int = 2
    residual: bool | None = None
    init: Literal["default", "designed"] = "default"
    heads: int = 1
    head_pattern: Literal["MHA", "MQA", "MKA", "MVA"] | None = None


class MambaLMConfig(_Cfg):
    name: Literal["mamba_lm"] = "mamba_lm"
    D: int = 64
    N: int = 16
    n_layers: int = 1
    d_conv: int = 4
    expand: int = 2


class CooperHybridConfig(_Cfg):
    name: Literal["cooper_hybrid"] = "cooper_hybrid"
    d: int = 8
    layers: str | list[str] = "SSM-TF"
    repeat: int = 1
    N: int = 16
    expand: int = 2
    d_conv: int = 4
    heads: int = 1
    window: int | None = 20
    rotary_pct: float = 0.25
    split_heads: bool = True
    tie_head: bool = True
    init_std: float = Field(0.02, description="the hf scheme's std (old InitConfig(scheme='hf'))")


# --------------------------------------------------------------------------------------------
# packed layers (old models/layers.py, models/mamba.py PackedCausalConv)
# --------------------------------------------------------------------------------------------


def _uniform_(t, bound, g):
    with torch.no_grad():
        t.copy_((torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1) * bound)


def _normal_(t, std, g):
    with torch.no_grad():
        t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float64) * std)


class PackedModule(nn.Module):
    def __init__(self, E: int):
        super().__init__()
        self.E = E

    def reset_member(self, e, g):  # pragma: no cover - abstract
        raise NotImplementedError


class PackedLinear(PackedModule):
    def __init__(self, E, din, dout, bias=True, init_std=None):
        super().__init__(E)
        self.din, self.dout, self.init_std = din, dout, init_std
        self.weight = nn.Parameter(torch.empty(E, din, dout))
        self.bias = nn.Parameter(torch.empty(E, dout)) if bias else None

    def reset_member(self, e, g):
        bound = 1.0 / math.sqrt(self.din)
        if self.init_std is None:
            _uniform_(self.weight[e], bound, g)
        else:
            _normal_(self.weight[e], self.init_std, g)
        if self.bias is not None:
            if self.init_std is None:
                _uniform_(self.bias[e], bound, g)
            else:
                with torch.no_grad():
                    self.bias[e].zero_()

    def forward(self, x):
        E = x.shape[0]
        lead = x.shape[1:-1]
        x2 = x.reshape(E, -1, self.din)
        y = torch.bmm(x2, self.weight) if self.bias is None else torch.baddbmm(
            self.bias.unsqueeze(1), x2, self.weight)
        return y.reshape(E, *lead, self.dout)


class PackedEmbedding(PackedModule):
    def __init__(self, E, vocab, d, init_std=1.0):
        super().__init__(E)
        self.init_std = init_std
        self.weight = nn.Parameter(torch.empty(E, vocab, d))

    def reset_member(self, e, g):
        _normal_(self.weight[e], self.init_std, g)

    def forward(self, ids):
        E = ids.shape[0]
        rows = torch.arange(E, device=ids.device).view(E, *([1] * (ids.dim() - 1)))
        return self.weight[rows, ids]


class PackedNorm(PackedModule):
    def __init__(self, E, d, kind="layernorm", eps=1e-5):
        super().__init__(E)
        self.kind, self.d, self.eps = kind, d, eps
        self.weight = nn.Parameter(torch.empty(E, d))
        self.bias = nn.Parameter(torch.empty(E, d)) if kind == "layernorm" else None

    def reset_member(self, e, g):
        with torch.no_grad():
            self.weight[e].fill_(1.0)
            if self.bias is not None:
                self.bias[e].zero_()

    def forward(self, x):
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (self.d,)
        if self.kind == "layernorm":
            y = F.layer_norm(x, (self.d,), eps=self.eps)
            return y * self.weight.view(shape) + self.bias.view(shape)
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * self.weight.view(shape)


def make_norm(E, d, kind):
    return nn.Identity() if kind == "none" else PackedNorm(E, d, kind)


class PackedCausalConv(PackedModule):
    def __init__(self, E, channels, width, bias):
        super().__init__(E)
        self.width = width
        self.weight = nn.Parameter(torch.empty(E, channels, width))
        self.bias = nn.Parameter(torch.empty(E, channels)) if bias else None

    def reset_member(self, e, g):
        bound = 1.0 / math.sqrt(self.width)
        _uniform_(self.weight[e], bound, g)
        if self.bias is not None:
            _uniform_(self.bias[e], bound, g)

    def forward(self, x):  # out_t[c] = Σ_k w[c, k] x_{t-(W-1)+k}[c] (+ b[c])
        W, L = self.width, x.shape[2]
        xp = F.pad(x, (0, 0, W - 1, 0))
        out = sum(xp[:, :, j : j + L] * self.weight[:, None, None, :, j] for j in range(W))
        return out if self.bias is None else out + self.bias[:, None, None, :]


# --------------------------------------------------------------------------------------------
# SSM cores (old models/ssm.py, default options: real A, S4D-real init, discretised)
# --------------------------------------------------------------------------------------------


def _fold(x):
    E, B, L, c = x.shape
    return x.permute(1, 2, 0, 3).reshape(B, L, E * c)


def _unfold(y, E):
    B, L, Ec = y.shape
    return y.reshape(B, L, E, Ec // E).permute(2, 0, 1, 3)


def _dt_bias_init(n, dt_min, dt_max, floor, g):
    u = torch.rand(n, generator=g, dtype=torch.float64)
    dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=floor)
    return dt + torch.log(-torch.expm1(-dt))


class S6Core(PackedModule):
    def __init__(self, E, d, N, dt_rank=None, dt_min=1e-3, dt_max=1e-1, dt_init_floor=1e-4):
        super().__init__(E)
        R = dt_rank or math.ceil(d / 16)
        self.d, self.N, self.R = d, N, R
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.x_proj = PackedLinear(E, d, R + 2 * N, bias=False)
        self.dt_weight = nn.Parameter(torch.empty(E, R, d))
        self.dt_bias = nn.Parameter(torch.empty(E, d))
        self.A_log = nn.Parameter(torch.empty(E, d, N))
        self.D = nn.Parameter(torch.empty(E, d))

    def reset_member(self, e, g):
        _uniform_(self.dt_weight[e], self.R**-0.5, g)
        b = _dt_bias_init(self.d, self.dt_min, self.dt_max, self.dt_init_floor, g)
        with torch.no_grad():
            self.dt_bias[e].copy_(b)
            self.A_log[e].copy_(torch.log(torch.arange(1, self.N + 1, dtype=torch.float64)).expand(
                self.d, self.N))
            self.D[e].fill_(1.0)

    def params(self, x):
        dt, Bt, Ct = self.x_proj(x).split([self.R, self.N, self.N], dim=-1)
        E, Bsz, L, _ = dt.shape
        dt = torch.bmm(dt.reshape(E, -1, self.R), self.dt_weight).reshape(E, Bsz, L, self.d)
        delta = F.softplus(dt + self.dt_bias[:, None, None, :])
        return delta, -torch.exp(self.A_log), Bt, Ct

    def forward(self, x):
        E = x.shape[0]
        delta, A, Bt, Ct = self.params(x)
        y = selective_scan_ref(_fold(x), _fold(delta), A.reshape(E * self.d, self.N),
                               Bt.permute(1, 2, 0, 3), Ct.permute(1, 2, 0, 3), self.D.reshape(-1))
        return _unfold(y, E)

    def decay(self, x):
        delta, A, _, _ = self.params(x)
        return torch.exp(delta[..., None] * A[:, None, None])


class S4DCore(PackedModule):
    def __init__(self, E, d, N):
        super().__init__(E)
        self.d, self.N = d, N
        self.A_log = nn.Parameter(torch.empty(E, d, N))
        self.B = nn.Parameter(torch.empty(E, N))
        self.C = nn.Parameter(torch.empty(E, d, N))

    def reset_member(self, e, g):
        with torch.no_grad():
            self.A_log[e].copy_(torch.log(torch.arange(1, self.N + 1, dtype=torch.float64)).expand(
                self.d, self.N))
            self.B[e].fill_(1.0)
        _normal_(self.C[e], self.N**-0.5, g)

    def forward(self, x):
        E, Bsz, L, d = x.shape
        u = _fold(x)
        A = (-torch.exp(self.A_log)).reshape(E * d, self.N)
        Bg = self.B[None, None].expand(Bsz, L, E, self.N)
        return _unfold(selective_scan_ref(u, torch.ones_like(u), A, Bg, self.C.reshape(E * d, self.N)), E)

    def decay(self, x):
        E, Bsz, L, d = x.shape
        return torch.exp(-torch.exp(self.A_log))[:, None, None].expand(E, Bsz, L, d, self.N)


# --------------------------------------------------------------------------------------------
# attention (old models/attention.py)
# --------------------------------------------------------------------------------------------


class PackedAttention(nn.Module):
    def __init__(self, E, d, heads=1):
        super().__init__()
        self.d, self.heads = d, heads
        self.qkv = PackedLinear(E, d, 3 * d)
        self.out = PackedLinear(E, d, d)

    def forward(self, x):
        E, B, L, d = x.shape
        H = self.heads
        q, k, v = self.qkv(x).split([d, d, d], dim=-1)

        def heads(t):
            return t.reshape(E * B, L, H, -1).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.out(y.transpose(1, 2).reshape(E, B, L, d))


class PackedMLP(nn.Module):
    def __init__(self, E, d, hidden, act="gelu"):
        super().__init__()
        self.fc1 = PackedLinear(E, d, hidden)
        self.fc2 = PackedLinear(E, hidden, d)
        self.act = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[act]

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, E, d, heads, mlp_hidden, norm="layernorm"):
        super().__init__()
        self.norm1 = make_norm(E, d, norm)
        self.attn = PackedAttention(E, d, heads)
        self.norm2 = make_norm(E, d, norm) if mlp_hidden else None
        self.mlp = PackedMLP(E, d, mlp_hidden) if mlp_hidden else None

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        if self.mlp is not None:
            x = x + self.mlp(self.norm2(x))
        return x


def apply_rope(x, r, base):
    r = r - r % 2
    if r == 0:
        return x
    L = x.shape[-2]
    k = torch.arange(r // 2, device=x.device, dtype=torch.float64)
    t = torch.arange(L, device=x.device, dtype=torch.float64)
    ang = (t[:, None] * (base ** (-2.0 * k / r))[None, :]).to(x.dtype)
    cos, sin = ang.cos(), ang.sin()
    a, b, rest = x[..., : r // 2], x[..., r // 2 : r], x[..., r:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos, rest], dim=-1)


class NeoXAttention(nn.Module):
    def __init__(self, E, d, heads=1, window=None, rotary_pct=0.25, rope_base=10000.0,
                 split_heads=True):
        super().__init__()
        self.d, self.H, self.window = d, heads, window
        self.s = d // heads if split_heads else d
        self.split_heads, self.rope_base = split_heads, rope_base
        self.r = int(self.s * rotary_pct)
        self.qkv = PackedLinear(E, d, 3 * heads * self.s)
        self.dense = PackedLinear(E, heads * self.s if split_heads else d, d)

    def forward(self, x):
        E, B, L, _ = x.shape
        qkv = self.qkv(x).reshape(E, B, L, self.H, 3, self.s).permute(4, 0, 1, 3, 2, 5)
        q = apply_rope(qkv[0], self.r, self.rope_base)
        k = apply_rope(qkv[1], self.r, self.rope_base)
        i = torch.arange(L)[:, None]
        j = torch.arange(L)[None, :]
        mask = (i - j >= 0) & ((i - j < self.window) if self.window is not None else True)
        y = F.scaled_dot_product_attention(
            q.reshape(E * B, self.H, L, self.s), k.reshape(E * B, self.H, L, self.s),
            qkv[2].reshape(E * B, self.H, L, self.s), attn_mask=mask).reshape(E, B, self.H, L, self.s)
        y = y.permute(0, 1, 3, 2, 4).reshape(E, B, L, self.H * self.s) if self.split_heads else y.sum(2)
        return self.dense(y)


class NeoXBlock(nn.Module):
    def __init__(self, E, d, attn, expand=2, act="silu", norm="layernorm"):
        super().__init__()
        self.norm1 = make_norm(E, d, norm)
        self.attn = attn
        self.norm2 = make_norm(E, d, norm) if expand else None
        self.mlp = PackedMLP(E, d, expand * d, act) if expand else None

    def forward(self, h):  # parallel residual
        if self.mlp is None:
            return h + self.attn(self.norm1(h))
        return h + self.attn(self.norm1(h)) + self.mlp(self.norm2(h))


# --------------------------------------------------------------------------------------------
# the hand-written models (old models/backbone.py and models/mamba.py)
# --------------------------------------------------------------------------------------------


def append_index(h):
    E, B, L, _ = h.shape
    t = torch.arange(1, L + 1, device=h.device, dtype=h.dtype)
    return torch.cat([h, t.view(1, 1, L, 1).expand(E, B, L, 1)], dim=-1)


class SSMLM(nn.Module):
    def __init__(self, cfg, info, E):
        super().__init__()
        self.pe = cfg.pe
        d = cfg.d
        self.embed = PackedEmbedding(E, info.vocab_size, d - 1 if cfg.pe == "index" else d)
        self.norms = nn.ModuleList(make_norm(E, d, cfg.norm) for _ in range(cfg.n_layers))
        if cfg.mixer == "s6":
            dt_rank = None if cfg.dt_rank == "auto" else cfg.dt_rank
            self.mixers = nn.ModuleList(
                S6Core(E, d, cfg.N, dt_rank, cfg.dt_min, cfg.dt_max) for _ in range(cfg.n_layers))
        else:
            self.mixers = nn.ModuleList(S4DCore(E, d, cfg.N) for _ in range(cfg.n_layers))
        self.residual = cfg.residual
        self.norm_f = make_norm(E, d, cfg.norm)
        self.head = PackedLinear(E, d, info.n_classes, bias=cfg.head_bias)

    def embed_tokens(self, ids):
        h = self.embed(ids)
        return append_index(h) if self.pe == "index" else h

    def features(self, ids):
        h = self.embed_tokens(ids)
        for norm, mixer in zip(self.norms, self.mixers):
            y = mixer(norm(h))
            h = h + y if self.residual else y
        return h

    def readout(self, h):
        return self.head(self.norm_f(h))

    def forward(self, ids):
        return self.readout(self.features(ids))

    @torch.no_grad()
    def decay(self, ids, layer=0):
        h = self.embed_tokens(ids)
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers)):
            if i == layer:
                return mixer.decay(norm(h))
            y = mixer(norm(h))
            h = h + y if self.residual else y
        raise IndexError(layer)


class LearnedPositions(PackedModule):
    def __init__(self, E, L, d):
        super().__init__(E)
        self.weight = nn.Parameter(torch.empty(E, L, d))

    def reset_member(self, e, g):
        _normal_(self.weight[e], 0.02, g)

    def forward(self, h):
        return h + self.weight[:, None, : h.shape[2]]


class TransformerLM(nn.Module):
    def __init__(self, cfg, info, E):
        super().__init__()
        d = cfg.d
        hidden = d * cfg.mlp_ratio if cfg.mlp_hidden is None else cfg.mlp_hidden
        self.embed = PackedEmbedding(E, info.vocab_size, d)
        self.pos = LearnedPositions(E, info.seq_len, d) if cfg.pos == "learned" else None
        self.blocks = nn.ModuleList(
            TransformerBlock(E, d, cfg.heads, hidden, cfg.norm) for _ in range(cfg.n_layers))
        self.norm_f = make_norm(E, d, cfg.norm)
        self.head = PackedLinear(E, d, info.n_classes, bias=cfg.head_bias)

    def features(self, ids):
        h = self.embed(ids)
        if self.pos is not None:
            h = self.pos(h)
        for blk in self.blocks:
            h = blk(h)
        return h

    def readout(self, h):
        return self.head(self.norm_f(h))

    def forward(self, ids):
        return self.readout(self.features(ids))


def linear_attention(q, k, v):
    L = q.shape[2]
    scores = torch.matmul(q, k.transpose(-1, -2))
    mask = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    return torch.matmul(scores.masked_fill(~mask, 0.0), v)


class LinearMambaLayer(nn.Module):
    def __init__(self, E, D, N, d_conv, expand):
        super().__init__()
        Di = expand * D
        self.in_proj = PackedLinear(E, D, Di, bias=False)
        self.conv = PackedCausalConv(E, Di, d_conv, bias=False)
        self.B_proj = PackedLinear(E, Di, N, bias=False)
        self.C_proj = PackedLinear(E, Di, N, bias=False)
        self.out_proj = PackedLinear(E, Di, D, bias=False)

    def forward(self, x):
        xc = self.conv(self.in_proj(x))
        return self.out_proj(linear_attention(self.C_proj(xc), self.B_proj(xc), xc))


class LinearMambaMultiHeadLayer(PackedModule):
    def __init__(self, E, D, N, d_conv, expand, heads, pattern):
        super().__init__(E)
        Di = expand * D
        self.Di, self.N, self.M, self.P, self.pattern = Di, N, heads, Di // heads, pattern
        self.B_heads = heads if pattern in ("MHA", "MKA") else 1
        self.C_heads = heads if pattern in ("MHA", "MQA") else 1
        self.shared_x = pattern in ("MQA", "MKA")
        self.W_heads = nn.Parameter(torch.empty(E, Di, self.P, heads))
        wx = (E, self.P, heads) if self.shared_x else (E, self.P, heads, Di)
        self.W_contract = nn.Parameter(torch.empty(*wx))
        self.in_proj = PackedLinear(E, D, Di, bias=False)
        self.conv = PackedCausalConv(E, Di, d_conv, bias=False)
        self.B_proj = PackedLinear(E, Di, self.B_heads * N, bias=False)
        self.C_proj = PackedLinear(E, Di, self.C_heads * N, bias=False)
        self.out_proj = PackedLinear(E, Di, D, bias=False)

    def reset_member(self, e, g):
        _normal_(self.W_heads[e], 1.0, g)
        _normal_(self.W_contract[e], 1.0, g)

    def forward(self, x):
        E, Bsz, L, _ = x.shape
        M, P, N = self.M, self.P, self.N
        xc = self.conv(self.in_proj(x))
        if self.shared_x:
            xh = torch.einsum("eph,eblhp->eblp", self.W_contract, xc.reshape(E, Bsz, L, M, P))[:, :, None]
        else:
            xh = torch.einsum("ephd,ebld->ebhlp", self.W_contract, xc)
        Bh = self.B_proj(xc).reshape(E, Bsz, L, self.B_heads, N).transpose(2, 3)
        Ch = self.C_proj(xc).reshape(E, Bsz, L, self.C_heads, N).transpose(2, 3)
        scores = torch.matmul(Ch, Bh.transpose(-1, -2))
        mask = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        y = torch.matmul(scores.masked_fill(~mask, 0.0), xh)
        return self.out_proj(torch.einsum("edph,ebhlp->ebld", self.W_heads, y))


class LinearMamba(nn.Module):
    def __init__(self, cfg, info, E):
        super().__init__()
        self.embed = PackedEmbedding(E, info.vocab_size, cfg.D)
        if cfg.head_pattern is None:
            self.layers = nn.ModuleList(
                LinearMambaLayer(E, cfg.D, cfg.N, cfg.d_conv, cfg.expand) for _ in range(cfg.n_layers))
        else:
            self.layers = nn.ModuleList(
                LinearMambaMultiHeadLayer(E, cfg.D, cfg.N, cfg.d_conv, cfg.expand, cfg.heads,
                                          cfg.head_pattern) for _ in range(cfg.n_layers))
        self.residual = cfg.residual if cfg.residual is not None else cfg.n_layers > 1
        self.cfg, self.vocab = cfg, info.vocab_size

    @torch.no_grad()
    def post_init(self, seeds):
        if self.cfg.init != "designed":
            return
        layer = self.layers[0]
        for e, s in enumerate(seeds):
            w = designed_weights(self.vocab, self.cfg.D, self.cfg.N, int(s))
            self.embed.weight[e].copy_(w["embedding"])
            layer.in_proj.weight[e].copy_(w["in_proj"])
            layer.conv.weight[e].copy_(w["conv"])
            layer.B_proj.weight[e].copy_(w["B_proj"])
            layer.C_proj.weight[e].copy_(w["C_proj"])
            layer.out_proj.weight[e].copy_(w["out_proj"])

    def features(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            y = layer(x)
            x = x + y if self.residual else y
        return x

    def readout(self, x):
        E, D = x.shape[0], x.shape[-1]
        return torch.bmm(x.reshape(E, -1, D), self.embed.weight.transpose(1, 2)).reshape(
            *x.shape[:-1], -1)

    def forward(self, ids):
        return self.readout(self.features(ids))


class MambaMixer(nn.Module):
    def __init__(self, E, d, N, d_conv=4, expand=2, conv_bias=True, bias=False):
        super().__init__()
        self.d_inner = expand * d
        self.in_proj = PackedLinear(E, d, 2 * self.d_inner, bias=bias)
        self.conv = PackedCausalConv(E, self.d_inner, d_conv, bias=conv_bias)
        self.ssm = S6Core(E, self.d_inner, N, dt_rank=math.ceil(d / 16))
        self.out_proj = PackedLinear(E, self.d_inner, d, bias=bias)

    def forward(self, x):
        xs, z = self.in_proj(x).split(self.d_inner, dim=-1)
        y = self.ssm(F.silu(self.conv(xs)))
        return self.out_proj(y * F.silu(z))


class MambaLM(nn.Module):
    def __init__(self, cfg, info, E):
        super().__init__()
        self.embed = PackedEmbedding(E, info.vocab_size, cfg.D, init_std=0.02)
        self.norms = nn.ModuleList(PackedNorm(E, cfg.D, "rmsnorm") for _ in range(cfg.n_layers))
        self.mixers = nn.ModuleList(
            MambaMixer(E, cfg.D, cfg.N, cfg.d_conv, cfg.expand) for _ in range(cfg.n_layers))
        self.norm_f = PackedNorm(E, cfg.D, "rmsnorm")

    @torch.no_grad()
    def post_init(self, seeds):
        for mixer in self.mixers:
            mixer.out_proj.weight /= len(self.mixers) ** 0.5

    def features(self, ids):
        h = self.embed(ids)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(norm(h))
        return h

    def readout(self, h):
        h = self.norm_f(h)
        E, D = h.shape[0], h.shape[-1]
        return torch.bmm(h.reshape(E, -1, D), self.embed.weight.transpose(1, 2)).reshape(
            *h.shape[:-1], -1)

    def forward(self, ids):
        return self.readout(self.features(ids))


# --------------------------------------------------------------------------------------------
# cooper2026's hybrid as the old SeqLM built it from CooperHybridConfig.to_seq_lm()
# --------------------------------------------------------------------------------------------


class MixerBlock(nn.Module):
    """Pre-norm residual block: h + Mixer(RMSNorm(h)) (the old MixerBlock with cooper's options)."""

    def __init__(self, E, d, mixer):
        super().__init__()
        self.norm = PackedNorm(E, d, "rmsnorm")
        self.mixer = mixer

    def forward(self, h):
        return h + self.mixer(self.norm(h))


class CooperHybrid(nn.Module):
    """embed -> blocks ('SSM': Mamba-1 block, 'TF': parallel NeoX layer) -> LayerNorm -> tied head."""

    def __init__(self, cfg, info, E):
        super().__init__()
        import re

        d, V, C = cfg.d, info.vocab_size, info.n_classes
        names = ([n for n in re.split(r"[-→,\s]+", cfg.layers) if n] if isinstance(cfg.layers, str)
                 else list(cfg.layers)) * cfg.repeat
        self.embed = PackedEmbedding(E, V, d)
        blocks = []
        for n in names:
            if n == "SSM":
                blocks.append(MixerBlock(E, d, MambaMixer(E, d, cfg.N, cfg.d_conv, cfg.expand)))
            else:
                attn = NeoXAttention(E, d, cfg.heads, cfg.window, cfg.rotary_pct, 10000.0,
                                     cfg.split_heads)
                blocks.append(NeoXBlock(E, d, attn, cfg.expand, "silu", "layernorm"))
        self.blocks = nn.ModuleList(blocks)
        self.norm_f = PackedNorm(E, d, "layernorm")
        if cfg.tie_head:
            assert C == V
            self.head = None
        else:
            self.head = PackedLinear(E, d, C, bias=False)

    def features(self, ids):
        h = self.embed(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.norm_f(h)

    def readout(self, h):
        if self.head is not None:
            return self.head(h)
        E, d = h.shape[0], h.shape[-1]
        return torch.bmm(h.reshape(E, -1, d), self.embed.weight.transpose(1, 2)).reshape(
            *h.shape[:-1], -1)

    def forward(self, ids):
        return self.readout(self.features(ids))

    @torch.no_grad()
    def post_init(self, seeds, gens):
        """The old init scheme 'hf' (models/init.py _apply), continuing each member's generator."""
        std = self.cfg_std
        for e, g in enumerate(gens):
            for m in self.modules():
                if isinstance(m, (PackedLinear, PackedEmbedding)):
                    _normal_(m.weight[e], std, g)
                    if getattr(m, "bias", None) is not None:
                        m.bias[e].zero_()
                elif isinstance(m, S6Core):
                    _normal_(m.dt_weight[e], std, g)
                    m.dt_bias[e].zero_()


LEGACY = {"ssm_lm": (SSMLMConfig, SSMLM), "transformer_lm": (TransformerLMConfig, TransformerLM),
          "linear_mamba": (LinearMambaConfig, LinearMamba), "mamba_lm": (MambaLMConfig, MambaLM),
          "cooper_hybrid": (CooperHybridConfig, CooperHybrid)}


def build_legacy(cfg: dict, info, E: int, seeds: list[int]) -> nn.Module:
    """The old build_model: member e's packed modules reset in module order from
    torch.Generator(seeds[e]), then the model's post-init (designed weights, out_proj rescale, or
    the hf scheme continuing the same generators)."""
    Config, Model = LEGACY[cfg["name"]]
    c = Config(**cfg)
    model = Model(c, info, E)
    gens = []
    for e, s in enumerate(seeds):
        g = torch.Generator().manual_seed(int(s))
        for m in model.modules():
            if isinstance(m, PackedModule):
                m.reset_member(e, g)
        gens.append(g)
    if isinstance(model, CooperHybrid):
        model.cfg_std = c.init_std
        model.post_init(seeds, gens)
    elif hasattr(model, "post_init"):
        model.post_init(seeds)
    return model
