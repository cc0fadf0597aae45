"""Library (models): the backbone's block kinds — a registered mixer in a norm / residual wrapper,
and the GPT-NeoX layer.

A block maps (E, B, L, d_model) -> (E, B, L, d_model). Kinds:

    mixer  any registered mixer (``mixers.MIXERS``) in a norm / residual wrapper,
               pre-norm   h ← h + Mixer(Norm(h))        (residual off: h ← Mixer(Norm(h)))
               post-norm  h ← Norm(h + Mixer(h))        (residual off: h ← Norm(Mixer(h)))
           optionally followed by an MLP sub-block in the same arrangement (``mlp_expand`` /
           ``mlp_hidden``), and optionally bidirectional (:class:`Bidirectional`); norm "none" gives
           blocks without norms (koren2026's linear Mamba).
    neox   a GPT-NeoX layer (cooper2026): h + Attn(LN1 h) + MLP(LN2 h), parallel residual, with
           ``mixers.neox_attn`` attention.

Each block knows the input of its mixer (``mixer_input``, for analyses) and its memory estimate
(``Config.activation_floats(d_model, L)``: the mixer's own plus norms, residual and MLP).
"""

from __future__ import annotations

from typing import Annotated, Literal

import torch
from pydantic import ConfigDict, Field, SerializeAsAny, field_validator, model_validator
from torch import nn

from ..util import NoBoolNumbers
from .base import refuse_unread
from .layers import PackedLinear, PackedMLP, make_norm
from .mixers import MixerConfig, build_mixer, parse_mixer
from .mixers.base import mixer_batch_floats, mixer_floats
from .mixers.neox_attn import NeoXAttnFields

NormKind = Literal["none", "layernorm", "rmsnorm", "batchnorm"]
# Per channel and position, the tensors a norm keeps for backward (``layers.make_norm``): none,
# nothing (the mixer keeps the block's input itself); layer / RMS norm, its input and the
# normalised x̂ that the weight multiplies; batch norm, its input (for the variance), x − μ and
# x̂. Two were counted for every kind: a block without norms (koren2026's linear Mamba) was
# counted 2·L·d over what it keeps, one with batch norm L·d under (measured per layer of a
# complex S4D at d 32, T 128: -2 and +1 such tensors from RMS norm's).
NORM_KEPT = {"none": 0, "layernorm": 2, "rmsnorm": 2, "batchnorm": 3}


class MixerBlockConfig(NoBoolNumbers):
    """A registered mixer in a norm / residual wrapper."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: Literal["mixer"] = "mixer"
    mixer: SerializeAsAny[MixerConfig] = Field(
        description="mixer spec, e.g. {name: mamba1, d_state: 16}; any name in MIXERS")
    norm: NormKind = "rmsnorm"
    norm_position: Literal["pre", "post"] = "pre"
    residual: bool = True
    bidirectional: Literal["none", "sum", "concat"] = Field(
        "none", description="non-causal: add a time-reversed copy of the mixer (sum or concat)")
    mlp_expand: int = Field(0, ge=0, description="MLP sub-block hidden = mlp_expand·d_model (0 = none)")
    mlp_hidden: int | None = Field(
        None, ge=0, description="MLP hidden width, overrides mlp_expand (0 = no MLP)")
    mlp_act: Literal["gelu", "relu", "silu"] = "gelu"

    @field_validator("mixer", mode="before")
    @classmethod
    def _mixer(cls, v):
        return parse_mixer(v)

    @model_validator(mode="after")
    def _block_unread(self) -> MixerBlockConfig:
        if self.mlp_hidden == 0 or (self.mlp_hidden is None and self.mlp_expand == 0):
            refuse_unread(self, [("mlp_act", "without an MLP sub-block (mlp_expand / mlp_hidden "
                                  "0)")])
        if self.norm == "none":  # h + Mixer(Norm h) and Norm(h + Mixer h) are one block then
            refuse_unread(self, [("norm_position", "with norm 'none' (no norm to place before or "
                                  "after the mixer)")])
        if self.mlp_hidden is not None:
            refuse_unread(self, [("mlp_expand", f"with mlp_hidden {self.mlp_hidden} (it "
                                  "overrides mlp_expand)")])
        return self

    def hidden(self, d_model: int) -> int:
        return self.mlp_expand * d_model if self.mlp_hidden is None else self.mlp_hidden

    def fixed_floats(self, d_model: int, L: int) -> int:
        """The mixer's batch-independent floats (twice if bidirectional: two mixers)."""
        return (1 if self.bidirectional == "none" else 2) * mixer_floats(self.mixer, d_model, L,
                                                                         fixed=True)

    def backward_floats(self, d_model: int, L: int) -> int:
        """The mixer's backward's own floats (``MixerConfig.backward_floats``), once for a
        bidirectional block too: its two mixers' backwards run one after the other."""
        return mixer_floats(self.mixer, d_model, L, backward=True)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """What the block's forward without autograd holds at its peak beyond the residual
        stream and its norm's output (``models.eval_floats``): the mixer's
        (``MixerConfig.eval_floats``; bidirectional: the flipped input and the first
        direction's output, 2·d per position, held while the second runs) or the MLP's hidden
        pre-activation and activation and its output, 2·hidden + d per position, whichever is
        larger (they run one after the other)."""
        mixer = mixer_batch_floats(self.mixer, d_model, L, batch)
        if self.bidirectional != "none":
            mixer += batch * L * 2 * d_model
        hidden = self.hidden(d_model)
        return max(mixer, batch * L * (2 * hidden + d_model) if hidden else 0)

    def work_floats(self, d_model: int, L: int, batch: int) -> int:
        """The mixer's work buffers (``MixerConfig.work_floats``), once for a bidirectional
        block too: its two mixers run one after the other."""
        return mixer_batch_floats(self.mixer, d_model, L, batch, work=True)

    def norm_floats(self, d_model: int) -> int:
        """Floats per position the mixer's norm keeps for backward (``NORM_KEPT`` per channel)."""
        return NORM_KEPT[self.norm] * d_model

    def activation_floats(self, d_model: int, L: int) -> int:
        """The mixer's (twice if bidirectional) + what its norm keeps (``norm_floats``) + the
        MLP sub-block: its input d, the hidden pre-activation and activation 2·hidden, and what
        its own norm keeps (d + 2·hidden + 2·d were counted whatever the norm: one L×d under
        with RMS norm, one over without, measured per layer)."""
        n_dir = 1 if self.bidirectional == "none" else 2
        mixer = n_dir * mixer_floats(self.mixer, d_model, L)
        if self.bidirectional == "concat":
            mixer += L * 2 * d_model
        hidden = self.hidden(d_model)
        mlp = L * (2 * hidden + d_model + self.norm_floats(d_model)) if hidden else 0
        return mixer + L * self.norm_floats(d_model) + mlp


class NeoXBlockConfig(NeoXAttnFields):
    """GPT-NeoX layer: h + Attn(LN1 h) + MLP(LN2 h) (parallel) with NeoX attention."""

    kind: Literal["neox"] = "neox"
    expand: int = Field(2, ge=0, description="MLP hidden = expand·d_model (cooper2026 override: 2)")
    act: Literal["gelu", "relu", "silu"] = "silu"
    norm: Literal["none", "layernorm", "rmsnorm"] = "layernorm"
    parallel: bool = Field(True, description="False: sequential pre-norm attention then MLP")

    @model_validator(mode="after")
    def _neox_unread(self) -> NeoXBlockConfig:
        if self.expand == 0:
            refuse_unread(self, [(k, "with expand 0 (no MLP)") for k in ("act", "parallel")])
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """Attention (NeoXAttnFields) + two norms + residual + the MLP (d -> expand·d -> d)."""
        hidden = self.expand * d_model
        return super().activation_floats(d_model, L) + L * (3 * d_model + 2 * hidden + d_model)

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """Without autograd: the attention's (``neox_attn``'s ``eval_floats``) and, run after it
        (parallel: its output kept, d per position), the second norm's output and the MLP's
        hidden pre-activation, activation and output, d + 2·hidden + d per position."""
        hidden = self.expand * d_model
        attn = super().eval_floats(d_model, L, batch)
        return max(attn, batch * L * (d_model * (1 + self.parallel) + 2 * hidden + d_model)
                   if hidden else 0)


BlockConfig = Annotated[MixerBlockConfig | NeoXBlockConfig, Field(discriminator="kind")]


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
        self.norm = make_norm(E, d, cfg.norm)
        self.mixer_name = cfg.mixer.name
        if cfg.bidirectional == "none":
            self.mixer = build_mixer(cfg.mixer, E, d)
        else:
            self.mixer = Bidirectional(build_mixer(cfg.mixer, E, d), build_mixer(cfg.mixer, E, d),
                                       cfg.bidirectional, E, d)
        hidden = cfg.hidden(d)
        self.norm2 = make_norm(E, d, cfg.norm) if hidden else None
        self.mlp = PackedMLP(E, d, hidden, cfg.mlp_act) if hidden else None

    def _sub(self, h: torch.Tensor, f: nn.Module, norm: nn.Module) -> torch.Tensor:
        if self.pre:
            y = f(norm(h))
            return h + y if self.residual else y
        y = f(h)
        return norm(h + y if self.residual else y)

    def mixer_input(self, h: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
        """(mixer, what it reads) for block input h (E, B, L, d)."""
        return self.mixer, (self.norm(h) if self.pre else h)

    def _mix(self, x: torch.Tensor) -> torch.Tensor:
        """The mixer's output, refused unless of x's shape and dtype (a mixer returning (E, B, 1,
        d) was broadcast over the positions by the residual, a float64 one turned the rest of
        the model float64: a new mixer trained and reported nonsense without a word)."""
        y = self.mixer(x)
        if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype:
            got = (f"{tuple(y.shape)} {y.dtype}" if isinstance(y, torch.Tensor)
                   else type(y).__name__)
            raise ValueError(f"mixer {self.mixer_name!r} returned {got} for an input of "
                             f"{tuple(x.shape)} {x.dtype}: a mixer keeps its input's shape and "
                             "dtype (models.mixers.base)")
        return y

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        h = self._sub(h, self._mix, self.norm)
        if self.mlp is not None:
            h = self._sub(h, self.mlp, self.norm2)
        return h


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

    def mixer_input(self, h: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
        return self.attn, self.norm1(h)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        if self.mlp is None:
            return h + self.attn(self.norm1(h))
        if self.parallel:
            return h + self.attn(self.norm1(h)) + self.mlp(self.norm2(h))
        h = h + self.attn(self.norm1(h))
        return h + self.mlp(self.norm2(h))


def build_block(E: int, d: int, cfg: MixerBlockConfig | NeoXBlockConfig) -> nn.Module:
    if isinstance(cfg, NeoXBlockConfig):
        return NeoXBlock(E, d, cfg.build_attention(E, d), cfg.expand, cfg.act, cfg.norm,
                         cfg.parallel)
    return MixerBlock(E, d, cfg)


__all__ = ["Bidirectional", "BlockConfig", "MixerBlock", "MixerBlockConfig", "NeoXBlock",
           "NeoXBlockConfig", "build_block"]
