"""Library (models): initialisation schemes, selectable per model (``init: {scheme: ..., ...}``).

Every scheme starts from the modules' own ``reset_member`` (the PyTorch-default init of our packed
layers, with mamba-ssm's Δ / A / D init inside the SSM cores), run for member e in module order from
torch.Generator(seeds[e]), and then overwrites some tensors, drawing (if at all) from the *same*
generator g_e, which continues where ``reset_member`` stopped. So member e depends only on
seeds[e] and a pack equals its members built alone.

Schemes
    default   the modules' reset_member only (PyTorch defaults: Linear / conv U(±1/√fan_in),
              embedding N(0, 1); S6 Δ↑ U(±R^-½), softplus(b_Δ) log-uniform in [dt_min, dt_max],
              A = -(1..N), D = 1, as mamba-ssm).
    mamba     mamba-ssm's ``_init_weights``: embedding N(0, std) (std = 0.02), every Linear bias
              zero, and every mixer's ``out_proj`` (drawn U(±1/√fan_in) = kaiming_uniform(a=√5))
              divided by √n_layer (``rescale_prenorm_residual``, n_layer = the number of
              ``out_proj`` layers); the rest as ``default``. No extra draws: the embedding is drawn
              with std in its own place of the stream (so the other draws are default's).
    hf        Hugging Face ``_init_weights`` of cooper2026's ``HybridPreTrainedModel`` (fork
              ``micro_hf/models/hybrid.py``): every nn.Linear weight N(0, std) and bias 0 — our
              PackedLinear and the S6 Δ projection (Δ↑ weight and b_Δ, an nn.Linear ``dt_proj``
              there) — and every embedding N(0, std); conv, A_log, D and norms keep their init.
    gamma     chen2025 §4 / notes §3.2: "a parameter W ∈ R^{d1×d2} is initialised N(0, (1/d1^γ)²)"
              with d1 = fan-in (input dim), so std = fan_in^(-γ). Applied to every weight matrix:
              embedding (fan-in V, one-hot input) [INFERRED], learned positions (fan-in L)
              [INFERRED], Linear (fan-in d_in), depthwise conv (fan-in = kernel width), S6 Δ↑
              (fan-in R), S4D C (fan-in N), and what other mixers declare; biases of those layers 0
              [INFERRED]; norms, A_log, b_Δ, D untouched. γ = 0.5 ≈ "standard", γ = 1 "small".
    cooper_construction
              cooper2026 Thm 4.3's constructed hybrid for selective copy (theory.cooper): every
              parameter of an SSM→TF ``cooper_hybrid`` (one Mamba-1 block, one NeoX block, an
              untied head) is overwritten with ``selective_copy_weights`` (no randomness; the
              task's number tokens from ``numbers`` / ``number_offset``, the words from the
              vocabulary size). Evaluate with ``max_steps: 0``. With ``construction:
              decode_recall``: Thm 4.6's hybrid for AR with decoding (theory.cooper_decode,
              ``decode_recall_weights``) in an SSM→TF→TF cooper_hybrid, the words from the
              vocabulary size (V = W + 2 bits + 3 specials).
    designed  koren2026 Thm 2's constructed recall circuit (theory.designed) for a model with one
              single-head ``linear_mamba`` mixer (d_conv 2, expand 2) and a token embedding: the
              embedding and the mixer's in_proj, conv, S_B, S_C and out_proj are overwritten with
              ``designed_weights(V, D, N, seeds[e])`` (its own generator); nothing else is trained
              in that model (no biases, norms or other parameters).

Weight matrices are found by convention: a module declares those it owns directly with
``init_weights() -> list[(param_name, fan_in)]`` (and may name its biases with ``init_biases()``);
otherwise every parameter of ndim ≥ 3 not tagged no-weight-decay is a (E, d_in, d_out) matrix with
fan-in shape[1], and a parameter named ``bias`` is a bias.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import ConfigDict, Field, model_validator
from torch import nn

from ..theory.cooper import selective_copy_weights
from ..theory.cooper_decode import decode_recall_weights
from ..theory.designed import check_designed_shape, designed_weights
from ..util import MemberError, NoBoolNumbers
from .base import refuse_unread
from .blocks import MixerBlock, NeoXBlock
from .layers import PackedEmbedding, PackedLinear, PackedModule, _normal_
from .mixers.linear_mamba import LinearMambaMixer
from .mixers.mamba1 import Mamba1Mixer
from .mixers.neox_attn import NeoXAttention
from .mixers.s6 import S6Core


class InitConfig(NoBoolNumbers):
    """Initialisation scheme: default | mamba | hf | gamma | designed (see ssmrepro.models.init)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    scheme: Literal["default", "mamba", "hf", "gamma", "designed",
                    "cooper_construction"] = "default"
    gamma: float | None = Field(None, gt=0, description="gamma scheme: std = fan_in ** -gamma")
    std: float = Field(0.02, gt=0, description="mamba / hf schemes: normal std")
    construction: Literal["selective_copy", "decode_recall"] = Field(
        "selective_copy", description="cooper_construction: which task's construction "
        "(selective_copy: Thm 4.3, SSM-TF; decode_recall: Thm 4.6, SSM-TF-TF)")
    numbers: int = Field(5, ge=1, description="cooper_construction: number tokens of the task")
    number_offset: int = Field(5, ge=1, description="cooper_construction: the first number's value")

    @model_validator(mode="after")
    def _check(self):
        if (self.scheme == "gamma") != (self.gamma is not None):
            raise ValueError("gamma is required with scheme 'gamma' and only there")
        if (self.scheme != "cooper_construction" or self.construction != "selective_copy") and (
                self.numbers, self.number_offset) != (5, 5):
            raise ValueError("numbers / number_offset belong to scheme 'cooper_construction' "
                             "with construction 'selective_copy'")
        if self.scheme != "cooper_construction" and self.construction != "selective_copy":
            raise ValueError("construction belongs to scheme 'cooper_construction'")
        if self.scheme not in ("mamba", "hf"):
            refuse_unread(self, [("std", f"by scheme {self.scheme!r} (std is the mamba and hf "
                                  "schemes' normal std)")])
        return self


def _weights(m: nn.Module) -> list[tuple[str, int]]:
    """(parameter name, fan-in) of every weight matrix owned directly by module m."""
    if hasattr(m, "init_weights"):
        return list(m.init_weights())
    return [
        (n, p.shape[1]) for n, p in m.named_parameters(recurse=False)
        if p.dim() >= 3 and not getattr(p, "_no_weight_decay", False)
    ]


def _biases(m: nn.Module) -> list[str]:
    if hasattr(m, "init_biases"):
        return list(m.init_biases())
    return [n for n, p in m.named_parameters(recurse=False) if n == "bias" and p is not None]


def weight_matrices(model: nn.Module) -> list[tuple[str, nn.Parameter, int]]:
    """Every weight matrix the gamma scheme draws, in module order: (qualified name, param, fan_in).

    Norm modules own no matrices (their vectors are skipped by the convention).
    """
    out = []
    for mname, m in model.named_modules():
        for pname, fan_in in _weights(m):
            out.append((f"{mname}.{pname}" if mname else pname, getattr(m, pname), int(fan_in)))
    return out


def _apply(model: nn.Module, e: int, g: torch.Generator, cfg: InitConfig) -> None:
    with torch.no_grad():
        if cfg.scheme == "mamba":
            outs = [m for n, m in model.named_modules()
                    if n.split(".")[-1] == "out_proj" and isinstance(m, PackedLinear)]
            for m in outs:
                m.weight[e] /= len(outs) ** 0.5
        for m in model.modules():
            if cfg.scheme == "gamma":
                for pname, fan_in in _weights(m):
                    _normal_(getattr(m, pname)[e], float(fan_in) ** -cfg.gamma, g)
                for b in _biases(m):
                    getattr(m, b)[e].zero_()
            elif cfg.scheme == "hf":
                if isinstance(m, (PackedLinear, PackedEmbedding)):
                    _normal_(m.weight[e], cfg.std, g)
                    if getattr(m, "bias", None) is not None:
                        m.bias[e].zero_()
                elif isinstance(m, S6Core):
                    _normal_(m.dt_weight[e], cfg.std, g)
                    m.dt_bias[e].zero_()
            elif cfg.scheme == "mamba":
                if isinstance(m, PackedLinear) and m.bias is not None:
                    m.bias[e].zero_()


@torch.no_grad()
def _designed(model: nn.Module, seeds: list[int], members: list[int]) -> None:
    """koren2026 Thm 2's weights into the embedding and the one single-head linear Mamba mixer
    of each member in ``members``."""
    mixers = [m for m in model.modules() if isinstance(m, LinearMambaMixer)]
    embed = getattr(model, "embed", None)
    if len(mixers) != 1 or not isinstance(embed, PackedEmbedding):
        raise ValueError("init 'designed' needs a token-embedding model with exactly one "
                         f"linear_mamba mixer, found {len(mixers)}")
    lm = mixers[0]
    if lm.pattern is not None:
        raise ValueError("designed weights exist for the single-head linear Mamba only")
    if lm.d_conv != 2 or lm.expand != 2:
        raise ValueError("designed weights exist for 1 layer, d_conv = 2, expand = 2")
    V, D = embed.weight.shape[1], embed.weight.shape[2]
    if not members:  # a structural check (``init_problem``): the construction's own sizes
        check_designed_shape(V, D, lm.N)
    for e in members:
        w = designed_weights(V, D, lm.N, int(seeds[e]))
        embed.weight[e].copy_(w["embedding"])
        for name in ("in_proj", "conv", "B_proj", "C_proj", "out_proj"):
            getattr(lm, name).weight[e].copy_(w[name])


def _neox_slots(tf: NeoXBlock) -> dict[str, torch.Tensor | None]:
    attn = tf.attn
    return {
        "norm1.w": tf.norm1.weight, "norm1.b": tf.norm1.bias, "qkv.w": attn.qkv.weight,
        "qkv.b": attn.qkv.bias, "dense.w": attn.dense.weight, "dense.b": attn.dense.bias,
        "norm2.w": tf.norm2.weight, "norm2.b": tf.norm2.bias,
        "fc1.w": tf.mlp.fc1.weight, "fc1.b": tf.mlp.fc1.bias,
        "fc2.w": tf.mlp.fc2.weight, "fc2.b": tf.mlp.fc2.bias,
    }


@torch.no_grad()
def _cooper(model: nn.Module, members: list[int], cfg: InitConfig) -> None:
    """cooper2026's constructed weights (theory.cooper: Thm 4.3, selective copy, SSM→TF;
    theory.cooper_decode: Thm 4.6, AR with decoding, SSM→TF→TF) into members ``members`` of a
    cooper_hybrid."""
    n_tf = 1 if cfg.construction == "selective_copy" else 2
    layers = "SSM-TF" if n_tf == 1 else "SSM-TF-TF"
    blocks = list(getattr(model, "blocks", []))
    ok = (len(blocks) == 1 + n_tf and isinstance(blocks[0], MixerBlock)
          and isinstance(blocks[0].mixer, Mamba1Mixer) and isinstance(blocks[0].mixer.ssm, S6Core)
          and all(isinstance(t, NeoXBlock) and isinstance(t.attn, NeoXAttention)
                  for t in blocks[1:])
          and isinstance(getattr(model, "embed", None), PackedEmbedding)
          and isinstance(getattr(model, "head", None), PackedLinear))
    if not ok:
        raise ValueError(f"init 'cooper_construction' ({cfg.construction}) needs a cooper_hybrid "
                         f"with layers {layers} and an untied head (tie_head: false)")
    ssm_block, tfs = blocks[0], blocks[1:]
    mx, attn = ssm_block.mixer, tfs[0].attn
    core = mx.ssm
    if not (mx.gate and mx.conv is not None and mx.conv_act and core.D is not None
            and core.discretize and not core.complex_A
            and all(t.mlp is not None and t.parallel for t in tfs)):
        raise ValueError("init 'cooper_construction' needs the cooper_hybrid's Mamba-1 block "
                         "(conv, SiLU, gate, real S6 core with D) and its parallel NeoX layers")
    if attn.window is None:
        raise ValueError("init 'cooper_construction' needs an attention window (model.window)")
    V, d = model.embed.weight.shape[1:]
    rotary_pct = attn.r / attn.s if attn.s else 0.0
    shape = dict(d_model=d, d_inner=mx.d_inner, d_state=core.N, d_conv=mx.conv.width,
                 dt_rank=core.R, heads=attn.H, rotary_pct=rotary_pct, rope_base=attn.rope_base,
                 window=attn.window, mlp_hidden=tfs[0].mlp.fc1.dout)
    words = V - cfg.numbers - 3 if cfg.construction == "selective_copy" else V - 2 - 3
    if cfg.construction == "selective_copy" and words < 1:
        raise ValueError(f"vocabulary {V} has no words besides {cfg.numbers} numbers + 3 "
                         "specials")
    prefixes = ["tf."] if cfg.construction == "selective_copy" else ["tf1.", "tf2."]
    slots = {
        "embed": model.embed.weight, "ssm.norm": ssm_block.norm.weight,
        "ssm.in_proj": mx.in_proj.weight, "ssm.conv_w": mx.conv.weight, "ssm.conv_b": mx.conv.bias,
        "ssm.x_proj": core.x_proj.weight, "ssm.dt_weight": core.dt_weight,
        "ssm.dt_bias": core.dt_bias, "ssm.A_log": core.A_log, "ssm.D": core.D,
        "ssm.out_proj": mx.out_proj.weight,
        "norm_f.w": model.norm_f.weight, "norm_f.b": model.norm_f.bias, "head": model.head.weight,
    }
    for pre, tf in zip(prefixes, tfs):
        slots.update({pre + k: p for k, p in _neox_slots(tf).items()})
    missing = [k for k, p in slots.items() if p is None]
    if missing or model.head.bias is not None:
        raise ValueError(f"init 'cooper_construction': the model lacks {missing or 'an unbiased head'}")
    if not members:  # a structural check (``init_problem``): no weights computed
        return
    if cfg.construction == "selective_copy":
        w = selective_copy_weights(words=words, numbers=cfg.numbers, offset=cfg.number_offset,
                                   L=attn.window, **shape)
    else:
        w = decode_recall_weights(words=words, **shape)
    for name, p in slots.items():
        for e in members:
            p[e].copy_(w[name].to(p.dtype))


STRUCTURAL = ("designed", "cooper_construction")  # schemes that fit only some models


def init_problem(model: nn.Module, cfg: InitConfig) -> str | None:
    """Why the scheme ``cfg`` does not fit ``model`` (None: it fits, or the scheme fits any
    model): the checks ``initialise`` makes before writing a construction's weights, with no
    weight computed or written (the model may be on the meta device). ``validate`` reports it
    (``train.model_problems``): it said ok and every pack holding such a run failed."""
    try:
        if cfg.scheme == "designed":
            _designed(model, [], [])
        elif cfg.scheme == "cooper_construction":
            _cooper(model, [], cfg)
    except ValueError as err:
        return str(err)
    return None


def initialise(model: nn.Module, seeds: list[int],
               cfg: InitConfig | list[InitConfig] | None = None) -> None:
    """Initialise member e of every packed submodule from torch.Generator(seeds[e]).

    ``cfg`` is one scheme for every member, or one per member (a list of len(seeds)): the init is
    a member-level setting (e.g. chen2025's γ axis trains as one pack), since no scheme changes a
    shape. With ``cfg`` None or scheme 'default' this is exactly ``layers.reset_members``.
    """
    cfgs = cfg if isinstance(cfg, list) else [cfg] * len(seeds)
    if len(cfgs) != len(seeds):
        raise ValueError(f"{len(cfgs)} init configs for {len(seeds)} members")
    schemes = ["default" if c is None else c.scheme for c in cfgs]
    embeds = [m for m in model.modules() if isinstance(m, PackedEmbedding)]
    stds = [m.init_std for m in embeds]
    try:
        for e, s in enumerate(seeds):
            c = cfgs[e]
            for m, std in zip(embeds, stds):  # mamba: the embedding is drawn N(0, std) in its
                m.init_std = c.std if schemes[e] == "mamba" else std  # own place of the stream
            g = torch.Generator().manual_seed(int(s))
            for m in model.modules():
                if isinstance(m, PackedModule):
                    m.reset_member(e, g)
            if schemes[e] in ("mamba", "hf", "gamma"):
                _apply(model, e, g, c)
    finally:
        for m, std in zip(embeds, stds):
            m.init_std = std
    designed = [e for e, sc in enumerate(schemes) if sc == "designed"]
    failed: dict[int, str] = {}  # member -> why its scheme does not fit the model
    if designed:
        try:
            _designed(model, seeds, designed)
        except ValueError as err:
            failed.update({e: str(err) for e in designed})
    for e, sc in enumerate(schemes):
        if sc == "cooper_construction":
            try:
                _cooper(model, [e], cfgs[e])
            except ValueError as err:
                failed[e] = str(err)
    if failed:  # the members with another scheme are fine: a pack trains them without these
        raise MemberError(next(iter(failed.values())), sorted(failed), failed)


__all__ = ["STRUCTURAL", "InitConfig", "init_problem", "initialise", "weight_matrices"]
