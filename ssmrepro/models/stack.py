"""Generic backbone ``SeqLM``: embedding -> blocks from a layer pattern -> final norm -> head.

    h = Embed(ids) (+ learned positions | index channel)              (E, B, L, d)
    for name in layers:  h = Block[name](h)                            (E, B, L, d)
    h = FinalNorm(h)
    logits = Head(h)              per position                         (E, B, L, C)
           | Head(mean_t h_t)     pooled (classification, e.g. LRA)    (E, B, C)

A block is either
    kind "mixer": any registered mixer (``mixers.MIXERS``) in a norm / residual wrapper,
        pre-norm   h ← h + Mixer(Norm(h))        (residual off: h ← Mixer(Norm(h)))
        post-norm  h ← Norm(h + Mixer(h))        (residual off: h ← Norm(Mixer(h)))
      optionally followed by an MLP sub-block in the same arrangement (``mlp_expand`` > 0), and
      optionally bidirectional (see ``Bidirectional``); or
    kind "neox": a GPT-NeoX layer (``attention.NeoXBlock``: parallel residual attention + MLP).

The layer pattern is a string ("SSM-TF", "SSM→TF", "TF,SSM") or a list (["SSM", "TF"]), repeated
``repeat`` times; its names index ``blocks``. Norms: none | layernorm | rmsnorm | batchnorm.

``cooper_hybrid`` (``CooperHybridConfig``) is cooper2026's hybrid as a preset of SeqLM.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator, model_validator
from torch import nn

from .attention import NeoXBlock, PackedMLP
from .backbone import LearnedPositions, append_index
from .init import InitConfig
from .layers import PackedEmbedding, PackedLinear, PackedModule, PackedNorm, no_weight_decay
from .mixers import MixerConfig, NeoXAttnFields, build_mixer, parse_mixer

NormKind = Literal["none", "layernorm", "rmsnorm", "batchnorm"]


# --------------------------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------------------------


class PackedBatchNorm(PackedModule):
    """BatchNorm over all leading positions (B, L, ...) per member and channel, with running stats.

    Train mode: y = (x − μ_batch) / √(σ²_batch + eps) · w + b with μ, σ² (biased) over (B, L) of
    the member's own slice; running_mean / running_var (unbiased σ²) updated with momentum 0.1, as
    torch.nn.BatchNorm1d. Eval mode: the running statistics. Note: in train mode an output at
    position t depends on every position of every sequence in the batch (not causal); in eval mode
    it is a per-position affine map (causal).
    """

    def __init__(self, E: int, d: int, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__(E)
        self.d, self.eps, self.momentum = d, eps, momentum
        self.weight = no_weight_decay(nn.Parameter(torch.empty(E, d)))
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, d)))
        self.register_buffer("running_mean", torch.zeros(E, d))
        self.register_buffer("running_var", torch.ones(E, d))

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.weight[e].fill_(1.0)
            self.bias[e].zero_()
            self.running_mean[e].zero_()
            self.running_var[e].fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, ..., d)
        E = x.shape[0]
        shape = (E,) + (1,) * (x.dim() - 2) + (self.d,)
        if self.training:
            x2 = x.reshape(E, -1, self.d)  # (E, M, d)
            mean = x2.mean(1)  # (E, d)
            var = x2.var(1, unbiased=False)
            n = x2.shape[1]
            with torch.no_grad():
                unbiased = var * (n / max(n - 1, 1))
                self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), self.momentum)
                self.running_var.lerp_(unbiased.detach().to(self.running_var.dtype), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)


def make_block_norm(E: int, d: int, kind: str) -> nn.Module:
    if kind == "none":
        return nn.Identity()
    if kind == "batchnorm":
        return PackedBatchNorm(E, d)
    return PackedNorm(E, d, kind)


class Bidirectional(nn.Module):
    """Non-causal wrapper: one mixer reads the sequence forward, another reads it time-reversed.

        y_fwd = M_f(x),   y_bwd = flip(M_b(flip(x)))           (flip reverses the L axis)
        sum:    y = y_fwd + y_bwd
        concat: y = [y_fwd, y_bwd] W,  W ∈ R^{2d×d} (no bias)

    The two directions have separate parameters (as S4's bidirectional kernels). With causal
    mixers y_fwd depends on x_{≤t} only and y_bwd on x_{≥t} only; y sees the whole sequence.
    """

    def __init__(self, fwd: nn.Module, bwd: nn.Module, combine: str, E: int, d: int):
        super().__init__()
        self.fwd, self.bwd, self.combine = fwd, bwd, combine
        self.proj = PackedLinear(E, 2 * d, d, bias=False) if combine == "concat" else None

    def directions(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.fwd(x), self.bwd(x.flip(2)).flip(2)  # (E, B, L, d) each

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        yf, yb = self.directions(x)
        if self.proj is None:
            return yf + yb
        return self.proj(torch.cat([yf, yb], dim=-1))


class MixerBlock(nn.Module):
    """Norm / residual wrapper around a registered mixer (+ optional MLP sub-block)."""

    def __init__(self, E: int, d: int, cfg: MixerBlockConfig):
        super().__init__()
        self.pre = cfg.norm_position == "pre"
        self.residual = cfg.residual
        self.norm = make_block_norm(E, d, cfg.norm)
        if cfg.bidirectional == "none":
            self.mixer = build_mixer(cfg.mixer, E, d)
        else:
            self.mixer = Bidirectional(build_mixer(cfg.mixer, E, d), build_mixer(cfg.mixer, E, d),
                                       cfg.bidirectional, E, d)
        self.norm2 = make_block_norm(E, d, cfg.norm) if cfg.mlp_expand else None
        self.mlp = PackedMLP(E, d, cfg.mlp_expand * d, cfg.mlp_act) if cfg.mlp_expand else None

    def _sub(self, h: torch.Tensor, f: nn.Module, norm: nn.Module) -> torch.Tensor:
        if self.pre:
            y = f(norm(h))
            return h + y if self.residual else y
        y = f(h)
        return norm(h + y if self.residual else y)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        h = self._sub(h, self.mixer, self.norm)
        if self.mlp is not None:
            h = self._sub(h, self.mlp, self.norm2)
        return h


class TiedHeadBias(PackedModule):
    """Bias of a head tied to the embedding (init 0)."""

    def __init__(self, E: int, C: int):
        super().__init__(E)
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, C)))

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.bias[e].zero_()


# --------------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------------


class MixerBlockConfig(BaseModel):
    """A registered mixer in a norm / residual wrapper."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["mixer"] = "mixer"
    mixer: SerializeAsAny[MixerConfig] = Field(
        description="mixer spec, e.g. {name: mamba1, N: 16}; any name in MIXERS")
    norm: NormKind = "rmsnorm"
    norm_position: Literal["pre", "post"] = "pre"
    residual: bool = True
    bidirectional: Literal["none", "sum", "concat"] = Field(
        "none", description="non-causal: add a time-reversed copy of the mixer (sum or concat)")
    mlp_expand: int = Field(0, ge=0, description="MLP sub-block hidden = mlp_expand·d (0 = none)")
    mlp_act: Literal["gelu", "relu", "silu"] = "gelu"

    @field_validator("mixer", mode="before")
    @classmethod
    def _mixer(cls, v):
        return parse_mixer(v)


class NeoXBlockConfig(NeoXAttnFields):
    """GPT-NeoX layer: h + Attn(LN1 h) + MLP(LN2 h) (parallel) with NeoX attention."""

    kind: Literal["neox"] = "neox"
    expand: int = Field(2, ge=0, description="MLP hidden = expand·d (cooper2026 override: 2)")
    act: Literal["gelu", "relu", "silu"] = "silu"
    norm: Literal["none", "layernorm", "rmsnorm"] = "layernorm"
    parallel: bool = Field(True, description="False: sequential pre-norm attention then MLP")


BlockConfig = Annotated[MixerBlockConfig | NeoXBlockConfig, Field(discriminator="kind")]


_DEFAULT_BLOCKS = {"SSM": MixerBlockConfig(mixer={"name": "mamba1", "N": 16}),
                   "TF": NeoXBlockConfig()}


def parse_layers(layers: str | list[str], repeat: int = 1) -> list[str]:
    """'SSM-TF' / 'SSM→TF' / 'SSM, TF' / ['SSM', 'TF'] -> ['SSM', 'TF'], repeated."""
    names = [n for n in re.split(r"[-→,\s]+", layers) if n] if isinstance(layers, str) else list(layers)
    return names * repeat


class SeqLMConfig(BaseModel):
    """Generic backbone: embedding -> blocks from a layer pattern (any mixer) -> norm -> head."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Literal["seq_lm"] = "seq_lm"
    d: int = Field(16, ge=2, description="model width")
    layers: str | list[str] = Field(
        "SSM-TF", description="layer pattern over the names in blocks: 'SSM-TF' or [SSM, TF]")
    repeat: int = Field(1, ge=1, description="repeat the pattern this many times")
    blocks: dict[str, BlockConfig] = Field(
        _DEFAULT_BLOCKS,
        description="block name -> {kind: mixer, mixer: {name: ..}, norm, norm_position, "
        "residual, bidirectional, mlp_expand} | {kind: neox, heads, window, rotary_pct, "
        "split_heads, conv, expand, parallel}")
    pos: Literal["none", "learned", "index"] = Field(
        "none", description="learned absolute positions, or index: last channel = t (huang2025)")
    final_norm: NormKind = "layernorm"
    head: Literal["per_position", "mean_pool"] = Field(
        "per_position", description="mean_pool: mean over positions -> (E, B, C)")
    tie_head: bool = Field(False, description="head weight = embedding table (needs C = V)")
    head_bias: bool = True
    init: InitConfig = Field(InitConfig(), description="initialisation scheme (models/init.py)")

    @field_validator("blocks", mode="before")
    @classmethod
    def _default_kind(cls, v):
        if isinstance(v, dict):
            v = {k: ({"kind": "mixer", **b} if isinstance(b, dict) and "kind" not in b else b)
                 for k, b in v.items()}
        return v

    @model_validator(mode="after")
    def _check(self):
        names = self.layer_names()
        if not names:
            raise ValueError("layers is empty")
        unknown = sorted(set(names) - set(self.blocks))
        if unknown:
            raise ValueError(f"layers name blocks {unknown} not in blocks {sorted(self.blocks)}")
        if self.tie_head and self.pos == "index":
            raise ValueError("tie_head needs a full-width embedding (pos 'index' uses d-1)")
        return self

    def layer_names(self) -> list[str]:
        return parse_layers(self.layers, self.repeat)


class CooperHybridConfig(BaseModel):
    """cooper2026 hybrid: Mamba-1 'SSM' and GPT-NeoX 'TF' layers in a pattern (SeqLM preset)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Literal["cooper_hybrid"] = "cooper_hybrid"
    d: int = Field(8, ge=2, description="hidden_size")
    layers: str | list[str] = Field("SSM-TF", description="'SSM-TF', 'TF-TF', [SSM, TF, ...]")
    repeat: int = Field(1, ge=1)
    N: int = Field(16, ge=1, le=256, description="Mamba state_size (audit: 16 in the runs)")
    expand: int = Field(2, ge=1, description="Mamba expand and NeoX MLP expand")
    d_conv: int = Field(4, ge=1, le=8)
    heads: int = Field(1, ge=1)
    window: int | None = Field(20, ge=1, description="sliding window (None = full causal)")
    rotary_pct: float = Field(0.25, ge=0, le=1)
    split_heads: bool = Field(True, description="False: fork's do_split_square=False")
    tie_head: bool = Field(
        True, description="HF ties embed_out to embed_in (matches the audited counts)")
    init: InitConfig = Field(InitConfig(scheme="hf"),
                             description="HF _init_weights: Linear/embedding N(0, 0.02)")

    def to_seq_lm(self) -> SeqLMConfig:
        """The SeqLM config this preset stands for (cooper2026 §5.1, notes/paper-settings.md).

        SSM block = RMSNorm → Mamba-1 mixer (in_proj no bias, conv bias, dt_rank ⌈d/16⌉, D) →
        residual; TF block = NeoX layer (LayerNorms, qkv/dense/MLP with bias, SiLU, expand 2,
        RoPE 25 %, window); final LayerNorm; head without bias. Tied head [INFERRED]: the fork's
        ``HybridConfig`` sets ``self.tie_word_embeddings = False`` and then calls
        ``PretrainedConfig.__init__`` without passing it, which resets it to the default True, so
        HF ties ``embed_out`` to ``embed_in``. The audited counts confirm it: SSM→TF d = 8, V = 34
        gives 2,192 only with one V×d table (2,464 with two); likewise 11,496 / 9,336 at d = 24,
        V = 11. Dropout (0.1 in HF) is off here.
        """
        return SeqLMConfig(
            d=self.d, layers=self.layers, repeat=self.repeat,
            blocks={
                "SSM": MixerBlockConfig(
                    mixer={"name": "mamba1", "N": self.N, "d_conv": self.d_conv,
                           "expand": self.expand, "conv_bias": True, "bias": False},
                    norm="rmsnorm"),
                "TF": NeoXBlockConfig(heads=self.heads, window=self.window,
                                      rotary_pct=self.rotary_pct, split_heads=self.split_heads,
                                      expand=self.expand, act="silu", norm="layernorm"),
            },
            pos="none", final_norm="layernorm", head="per_position", tie_head=self.tie_head,
            head_bias=False, init=self.init)


# --------------------------------------------------------------------------------------------
# Backbone
# --------------------------------------------------------------------------------------------


def build_block(E: int, d: int, cfg: MixerBlockConfig | NeoXBlockConfig) -> nn.Module:
    if isinstance(cfg, NeoXBlockConfig):
        return NeoXBlock(E, d, cfg.build_attention(E, d), cfg.expand, cfg.act, cfg.norm,
                         cfg.parallel)
    return MixerBlock(E, d, cfg)


class SeqLM(nn.Module):
    """Generic backbone (see module docstring). ``features`` ends with the final norm."""

    def __init__(self, cfg: SeqLMConfig | CooperHybridConfig, info, E: int):
        super().__init__()
        if isinstance(cfg, CooperHybridConfig):
            cfg = cfg.to_seq_lm()
        d, V, C = cfg.d, info.vocab_size, info.n_classes
        self.cfg = cfg
        self.pe = cfg.pos
        self.embed = PackedEmbedding(E, V, d - 1 if cfg.pos == "index" else d)
        self.pos = LearnedPositions(E, info.seq_len, d) if cfg.pos == "learned" else None
        self.layer_names = cfg.layer_names()
        self.blocks = nn.ModuleList(build_block(E, d, cfg.blocks[n]) for n in self.layer_names)
        self.norm_f = make_block_norm(E, d, cfg.final_norm)
        self.pool = cfg.head == "mean_pool"
        if cfg.tie_head:
            if C != V:
                raise ValueError(f"tie_head needs n_classes == vocab_size, got {C} != {V}")
            self.head = None
            self.tied_bias = TiedHeadBias(E, C) if cfg.head_bias else None
        else:
            self.head = PackedLinear(E, d, C, bias=cfg.head_bias)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        h = self.embed(ids)
        if self.pe == "index":
            h = append_index(h)
        elif self.pos is not None:
            h = self.pos(h)
        return h

    def features(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        h = self.embed_tokens(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.norm_f(h)

    def readout(self, h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Per position (E, ..., d) -> (E, ..., C); pooled (E, B, L, d) -> (E, B, C).

        Pooled: mean over positions (over ``mask`` True positions (E, B, L) when given).
        """
        if self.pool:
            if mask is None:
                h = h.mean(-2)
            else:
                m = mask.to(h.dtype).unsqueeze(-1)  # (E, B, L, 1)
                h = (h * m).sum(-2) / m.sum(-2).clamp(min=1)
        if self.head is not None:
            return self.head(h)
        E, d = h.shape[0], h.shape[-1]
        y = torch.bmm(h.reshape(E, -1, d), self.embed.weight.transpose(1, 2))
        y = y.reshape(*h.shape[:-1], -1)
        if self.tied_bias is not None:
            y = y + self.tied_bias.bias.view(E, *([1] * (y.dim() - 2)), -1)
        return y

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, C) | (E, B, C)
        return self.readout(self.features(ids))


__all__ = ["Bidirectional", "CooperHybridConfig", "MixerBlock", "MixerBlockConfig",
           "NeoXBlockConfig", "PackedBatchNorm", "SeqLM", "SeqLMConfig", "parse_layers"]
