"""Library (models): ``SeqLM``, the one backbone every model is — input -> blocks -> norm -> head.

    h = Embed(ids) | Encoder(x)  (+ learned positions | index channel)   (E, B, L, d_model)
    for name in layers:  h = Block[name](h)                               (E, B, L, d_model)
    h = FinalNorm(h)                                                      (end of ``features``)
    per_position  logits = Head(h)                                        (E, B, L, C)
    mean_pool     logits = Head(mean_{t: mask} h_t)                       (E, B, C)
    dual_pool     u, v = mean_{mask} h, mean_{mask2} h2
                  logits = W_2 ReLU(W_1 [u, v, u⊙v, u−v] + b_1) + b_2      (E, B, C)

Inputs: token ids through a packed embedding table, or (``TaskInfo.input_dim = k``) continuous
inputs (E, B, L, k) through a packed linear encoder k -> d_model. Positions: none, learned (N(0,
0.02)), fixed sinusoidal (added), or huang2025's index PE (``index``: the last channel carries the
raw position t = 1..L, so the embedding is d_model − 1 wide; ``index_norm``: t/L). Blocks come from
a layer pattern over named block configs (models.blocks: a registered mixer in a norm / residual
wrapper, or the GPT-NeoX layer); the pattern is a string ("SSM-TF", "SSM→TF", "TF,SSM") or a list
(["SSM", "TF"]), repeated ``repeat`` times. Norms: none | layernorm | rmsnorm | batchnorm. The head
may be tied to the embedding table (logits = h Eᵀ, optional bias).

dual_pool is LRA Retrieval's two-tower classifier (Tay et al. 2021): both documents pass the same
backbone, their pooled features u, v are compared by an MLP over [u, v, u⊙v, u−v] (hidden width
``head_hidden``, default d_model, ReLU) [INFERRED: one hidden layer].

A config that cannot serve its task fails at build time with the reason (per-position head on a
sequence-level task, pooled head on a per-position task, dual task without dual_pool, tied head with
continuous inputs or n_classes != vocab_size). The paper models are presets that expand to a
SeqLMConfig (models.presets).
"""

from __future__ import annotations

import re
from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import nn

from .base import ModelConfig, refuse_unread
from .blocks import BlockConfig, MixerBlockConfig, NeoXBlockConfig, build_block
from .init import InitConfig
from .layers import (
    PackedEmbedding,
    PackedLinear,
    PackedMLP,
    PackedModule,
    _normal_,
    make_norm,
    no_weight_decay,
)
from .mixers import MIXERS

NormKind = Literal["none", "layernorm", "rmsnorm", "batchnorm"]

MAX_LAYERS = 1024  # blocks per model: far above any paper's, low enough to build and plan quickly

_DEFAULT_BLOCKS = {"SSM": MixerBlockConfig(mixer={"name": "mamba1", "d_state": 16}),
                   "TF": NeoXBlockConfig()}


def parse_layers(layers: str | list[str], repeat: int = 1) -> list[str]:
    """'SSM-TF' / 'SSM→TF' / 'SSM, TF' / ['SSM', 'TF'] -> ['SSM', 'TF'], repeated."""
    names = [n for n in re.split(r"[-→,\s]+", layers) if n] if isinstance(layers, str) else list(layers)
    return names * repeat


def spelled_layers(v):
    """A ``layers`` text as one spelling, its names joined by '-' ('SSM, TF', 'SSM TF' and
    'SSM→TF' are 'SSM-TF': one model, but four run ids, each trained); a list, or anything
    else, as given (validation names what is wrong)."""
    if isinstance(v, str):
        return "-".join(n for n in re.split(r"[-→,\s]+", v) if n)
    return v


class SeqLMConfig(ModelConfig):
    """Generic backbone: embedding -> blocks from a layer pattern (any mixer) -> norm -> head."""

    name: Literal["seq_lm"] = "seq_lm"
    d_model: int = Field(16, ge=2, description="model width")
    layers: str | list[str] = Field(
        "SSM-TF", description="layer pattern over the names in blocks: 'SSM-TF' or [SSM, TF]")
    repeat: int = Field(1, ge=1, le=MAX_LAYERS, description="repeat the pattern this many times")
    blocks: dict[str, BlockConfig] = Field(
        _DEFAULT_BLOCKS,
        description="block name -> {kind: mixer, mixer: {name: ..}, norm, norm_position, "
        "residual, bidirectional, mlp_expand, mlp_hidden} | {kind: neox, heads, window, "
        "rotary_pct, split_heads, conv, expand, parallel}")
    pos: Literal["none", "learned", "index", "index_norm", "sinusoidal"] = Field(
        "none", description="learned absolute positions; index: last channel = t (huang2025); "
        "index_norm: last channel = t/L; sinusoidal: fixed sin/cos positions added")
    final_norm: NormKind = Field("layernorm", description="the norm after the last block")
    head: Literal["per_position", "mean_pool", "dual_pool"] = Field(
        "per_position", description="mean_pool: mean over (masked) positions -> (E, B, C); "
        "dual_pool: two inputs pooled, MLP over [u, v, u*v, u-v] (LRA Retrieval)")
    head_hidden: int | None = Field(None, ge=1, description="dual_pool MLP width (default d_model)")
    tie_head: bool = Field(False, description="head weight = embedding table (needs C = V)")
    head_bias: bool = Field(True, description="bias of the output head")
    init: InitConfig = Field(InitConfig(), description="initialisation scheme (models/init.py)")

    _spelled = field_validator("layers", mode="before")(spelled_layers)

    @field_validator("blocks", mode="before")
    @classmethod
    def _default_kind(cls, v):
        if isinstance(v, dict):
            v = {k: ({"kind": "mixer", **b} if isinstance(b, dict) and "kind" not in b else b)
                 for k, b in v.items()}
        return v

    @model_validator(mode="after")
    def _check(self):
        pattern = parse_layers(self.layers)
        if len(pattern) * self.repeat > MAX_LAYERS:
            raise ValueError(f"{len(pattern)} layers x repeat {self.repeat} = "
                             f"{len(pattern) * self.repeat:,} blocks, more than {MAX_LAYERS}")
        names = self.layer_names()
        if not names:
            raise ValueError("layers is empty")
        unknown = sorted(set(names) - set(self.blocks))
        if unknown:
            raise ValueError(f"layers name blocks {unknown} not in blocks {sorted(self.blocks)}")
        if self.tie_head and self.pos in ("index", "index_norm"):
            raise ValueError(f"tie_head needs a full-width embedding (pos {self.pos!r} uses "
                             "d_model-1)")
        if self.tie_head and self.head == "dual_pool":
            raise ValueError("dual_pool ends in its own MLP: tie_head does not apply")
        if self.head != "dual_pool":
            refuse_unread(self, [("head_hidden", f"by head {self.head!r} (it is the dual_pool "
                                  "MLP's width)")])
        return self

    def layer_names(self) -> list[str]:
        return parse_layers(self.layers, self.repeat)

    def to_backbone(self) -> SeqLMConfig:
        return self

    def check_task(self, info) -> None:
        """Raise ValueError when this backbone cannot serve the task described by ``info``."""
        sequence = info.target == "sequence"
        if sequence and self.head == "per_position":
            # `head` is seq_lm's: the advice alone sent an ssm_lm author to `model.head`, an
            # unknown key of every preset
            raise ValueError("the task has one target per sequence (target 'sequence') but head "
                             "'per_position' gives one output per position: use head 'mean_pool' "
                             "(or 'dual_pool' for two-input tasks), a field of model seq_lm (the "
                             "presets, ssm_lm, mamba_lm and the others, have none: write the "
                             "model as seq_lm)")
        if not sequence and self.head != "per_position":
            raise ValueError(f"head {self.head!r} pools over positions but the task has a target "
                             "per position: use head 'per_position'")
        if info.dual and self.head != "dual_pool":
            raise ValueError("the task gives two input sequences per example (dual): use head "
                             "'dual_pool'")
        if self.head == "dual_pool" and not info.dual:
            raise ValueError("head 'dual_pool' needs a task with two inputs per example (dual)")
        if self.tie_head and info.input_dim is not None:
            raise ValueError(f"tie_head reads the token embedding table, but the task's inputs are "
                             f"continuous (input_dim={info.input_dim}): use tie_head false")
        if self.tie_head and info.n_classes != info.vocab_size:
            raise ValueError(f"tie_head needs n_classes == vocab_size, got "
                             f"{info.n_classes} != {info.vocab_size}")
        ahead = sorted({n for n in self.layer_names()
                        if getattr(self.blocks[n], "bidirectional", "none") != "none"})
        # a target that is a later input: it read the answer (next-byte accuracy 0.94 on random
        # text of 9 letters; needle's target at the marker, the needle after it)
        later = ("the task's target at each position is the next input (next-token prediction)"
                 if getattr(info, "next_token", False) else getattr(info, "ahead", None))
        if later and ahead:
            raise ValueError(f"{later}, which the bidirectional block{'s' * (len(ahead) > 1)} "
                             f"{', '.join(ahead)} would read: use bidirectional 'none'")
        # a mixer registered causal=False (mixers.register) looks ahead on purpose: it was
        # shown as [non-causal] by list-models only, and read the next byte it was to predict
        blocks = {n: getattr(self.blocks[n], "mixer", None) for n in self.layer_names()}
        looking = sorted(f"{n} ({m.name})" for n, m in blocks.items()
                         if m is not None and not MIXERS[m.name].causal)
        if later and looking:
            raise ValueError(f"{later}, which the non-causal mixer of block"
                             f"{'s' * (len(looking) > 1)} {', '.join(looking)} would read: use a "
                             "causal mixer")

    def check_eval(self, trained, other) -> None:
        """Raise ValueError when a model built for the task ``trained`` cannot read the batches of
        an evaluation set described by ``other`` (``train.evals``; the two tasks already agree on
        inputs and targets, ``tasks.incompatibility``): learned positions exist for the trained
        length only (a longer set failed every pack at its first evaluation, after validate
        said ok)."""
        if self.pos == "learned" and other.seq_len > trained.seq_len:
            raise ValueError(f"its sequences of length {other.seq_len:,} are longer than the "
                             f"{trained.seq_len:,} positions that model.pos 'learned' has (one per "
                             "position of the training task): evaluate at most that length, or "
                             "use pos 'sinusoidal' or 'none'")


# --------------------------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------------------------


def append_index(h: torch.Tensor, normalise: bool = False) -> torch.Tensor:
    """huang2025's PE: the raw position t = 1..L (or t/L) as one extra last channel.
    (E,B,L,d-1) -> (E,B,L,d)."""
    E, B, L, _ = h.shape
    t = torch.arange(1, L + 1, device=h.device, dtype=h.dtype)
    if normalise:
        t = t / L
    return torch.cat([h, t.view(1, 1, L, 1).expand(E, B, L, 1)], dim=-1)


def sinusoidal(L: int, d: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """Fixed sinusoidal positions (Vaswani et al.): PE[t, 2i] = sin(t / 10000^(2i/d)),
    PE[t, 2i+1] = cos(...), t = 0..L-1. (L, d)."""
    t = torch.arange(L, device=device, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, device=device, dtype=torch.float64)
    ang = t / torch.pow(10000.0, i / d)
    pe = torch.zeros(L, d, device=device, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang[:, : d // 2])
    return pe.to(dtype)


class LearnedPositions(PackedModule):
    """Learned absolute positions (E, L, d), init N(0, 0.02)."""

    def __init__(self, E: int, L: int, d: int):
        super().__init__(E)
        self.weight = nn.Parameter(torch.empty(E, L, d))  # (E, L, d)

    def init_weights(self) -> list[tuple[str, int]]:
        return [("weight", self.weight.shape[1])]  # fan-in L (one-hot position) [INFERRED]

    def reset_member(self, e: int, g: torch.Generator) -> None:
        _normal_(self.weight[e], 0.02, g)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        return h + self.weight[:, None, : h.shape[2]]


class TiedHeadBias(PackedModule):
    """Bias of a head tied to the embedding (init 0)."""

    def __init__(self, E: int, C: int):
        super().__init__(E)
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, C)))

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.bias[e].zero_()


def masked_mean(h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over positions (E, B, L, d) -> (E, B, d), over mask == True positions when given."""
    if mask is None:
        return h.mean(-2)
    m = mask.to(h.dtype).unsqueeze(-1)  # (E, B, L, 1)
    return (h * m).sum(-2) / m.sum(-2).clamp(min=1)


class SeqLM(nn.Module):
    """The backbone (see the module docstring); implements models.base.SequenceModel."""

    def __init__(self, cfg: SeqLMConfig, info, E: int):
        super().__init__()
        cfg = cfg.to_backbone()
        cfg.check_task(info)
        d, V, C = cfg.d_model, info.vocab_size, info.n_classes
        self.cfg = cfg
        self.pe = cfg.pos
        self.continuous = info.input_dim is not None
        width = d - 1 if cfg.pos in ("index", "index_norm") else d
        if self.continuous:  # packed linear encoder k -> d_model
            self.embed = PackedLinear(E, info.input_dim, width)
        else:
            self.embed = PackedEmbedding(E, V, width)
        self.pos = LearnedPositions(E, info.seq_len, d) if cfg.pos == "learned" else None
        self.layer_names = cfg.layer_names()
        self.blocks = nn.ModuleList(build_block(E, d, cfg.blocks[n]) for n in self.layer_names)
        self.norm_f = make_norm(E, d, cfg.final_norm)
        self.head_kind = cfg.head
        self.tied_bias = None
        if cfg.head == "dual_pool":
            self.head = PackedMLP(E, 4 * d, cfg.head_hidden or d, "relu", d_out=C,
                                  out_bias=cfg.head_bias)
        elif cfg.tie_head:
            self.head = None
            self.tied_bias = TiedHeadBias(E, C) if cfg.head_bias else None
        else:
            self.head = PackedLinear(E, d, C, bias=cfg.head_bias)

    def embed_tokens(self, x: torch.Tensor) -> torch.Tensor:  # (E,B,L) | (E,B,L,k) -> (E,B,L,d)
        if self.continuous and x.dim() != 4:
            raise ValueError(f"continuous inputs must be (E, B, L, k), got shape {tuple(x.shape)}")
        h = self.embed(x)
        if self.pe in ("index", "index_norm"):
            h = append_index(h, normalise=self.pe == "index_norm")
        elif self.pe == "sinusoidal":
            h = h + sinusoidal(h.shape[2], h.shape[3], h.device, h.dtype)
        elif self.pos is not None:
            h = self.pos(h)
        return h

    def features(self, x: torch.Tensor) -> torch.Tensor:  # -> (E, B, L, d)
        h = self.embed_tokens(x)
        for blk in self.blocks:
            h = blk(h)
        return self.norm_f(h)

    def _project(self, h: torch.Tensor) -> torch.Tensor:  # (E, ..., d) -> (E, ..., C)
        if self.head is not None:
            return self.head(h)
        E, d = h.shape[0], h.shape[-1]
        y = torch.bmm(h.reshape(E, -1, d), self.embed.weight.transpose(1, 2))  # tied: h Eᵀ
        y = y.reshape(*h.shape[:-1], -1)
        if self.tied_bias is not None:
            y = y + self.tied_bias.bias.view(E, *([1] * (y.dim() - 2)), -1)
        return y

    def linear_readout(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """(W (E, d, C), bias (E, C) | None) when the read-out is one linear map per position
        (a plain or tied head): what ``readout`` computes is h W + bias. None otherwise."""
        if self.head_kind != "per_position":
            return None
        if self.head is not None:
            return self.head.weight, self.head.bias
        bias = None if self.tied_bias is None else self.tied_bias.bias
        return self.embed.weight.transpose(1, 2), bias

    def readout(self, h: torch.Tensor, mask: torch.Tensor | None = None,
                h2: torch.Tensor | None = None, mask2: torch.Tensor | None = None) -> torch.Tensor:
        """Per position (E, ..., d) -> (E, ..., C); pooled heads (E, B, L, d) -> (E, B, C)."""
        if self.head_kind == "per_position":
            return self._project(h)
        u = masked_mean(h, mask)  # (E, B, d)
        if self.head_kind == "mean_pool":
            return self._project(u)
        if h2 is None:
            raise ValueError("head 'dual_pool' needs the second input's features h2")
        v = masked_mean(h2, mask2)
        return self.head(torch.cat([u, v, u * v, u - v], dim=-1))  # (E, B, 4d) -> (E, B, C)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                x2: torch.Tensor | None = None, mask2: torch.Tensor | None = None) -> torch.Tensor:
        h2 = None if x2 is None else self.features(x2)
        return self.readout(self.features(x), mask, h2, mask2)

    def mixer_inputs(self, x: torch.Tensor) -> list[tuple[int, nn.Module, torch.Tensor]]:
        """(block index, mixer module, the mixer's input (E, B, L, d)) for every block, on input x."""
        h = self.embed_tokens(x)
        out = []
        for i, blk in enumerate(self.blocks):
            mixer, inp = blk.mixer_input(h)
            out.append((i, mixer, inp))
            h = blk(h)
        return out


__all__ = ["MAX_LAYERS", "LearnedPositions", "SeqLM", "SeqLMConfig", "append_index", "masked_mean",
           "parse_layers", "sinusoidal"]
