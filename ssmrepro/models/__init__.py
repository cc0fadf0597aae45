"""Model registry: name -> (typed config, builder). Builders take (config, TaskInfo, E)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from .backbone import SSMLM, TransformerLM
from .init import InitConfig, initialise
from .mamba import LinearMamba, MambaLM
from .stack import CooperHybridConfig, SeqLM, SeqLMConfig


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str


class SSMLMConfig(ModelConfig):
    """Embedding -> SSM core layers (S6 or S4D; no conv, no gate) -> linear head."""

    name: Literal["ssm_lm"] = "ssm_lm"
    mixer: Literal["s6", "s4d"] = "s6"
    d: int = Field(32, ge=2, description="model width (channels)")
    N: int = Field(8, ge=1, le=256, description="state size per channel (kernel limit 256)")
    n_layers: int = Field(1, ge=1)
    pe: Literal["none", "index"] = "none"
    norm: Literal["none", "layernorm", "rmsnorm"] = "none"
    residual: bool = True
    head_bias: bool = True
    dt_rank: int | Literal["auto"] = "auto"
    dt_min: float = Field(1e-3, gt=0)
    dt_max: float = Field(1e-1, gt=0)


class TransformerLMConfig(ModelConfig):
    """Embedding + learned positions -> pre-norm Transformer blocks -> linear head."""

    name: Literal["transformer_lm"] = "transformer_lm"
    d: int = Field(16, ge=2)
    n_layers: int = Field(1, ge=1)
    heads: int = Field(1, ge=1)
    mlp_ratio: int = Field(1, ge=0, description="MLP hidden = mlp_ratio * d (unless mlp_hidden)")
    mlp_hidden: int | None = Field(None, ge=0)
    pos: Literal["learned", "none"] = "learned"
    norm: Literal["none", "layernorm", "rmsnorm"] = "layernorm"
    head_bias: bool = True


class LinearMambaConfig(ModelConfig):
    """koren2026 simplified linear Mamba (Alg. 1): conv + SSM with A = I, D = 0, tied embeddings."""

    name: Literal["linear_mamba"] = "linear_mamba"
    D: int = Field(32, ge=1, description="model width")
    N: int = Field(16, ge=1, description="state size")
    n_layers: int = Field(1, ge=1, description="Λ")
    d_conv: int = Field(2, ge=1, le=8)
    expand: int = Field(2, ge=1)
    residual: bool | None = Field(None, description="default: on for Λ > 1 (official configs)")
    init: Literal["default", "designed"] = Field(
        "default", description="designed: koren2026 Thm 2 weights (evaluate with max_steps 0)"
    )
    heads: int = Field(1, ge=1, description="M, SSM heads (koren2026 App. F.2.2; needs head_pattern)")
    head_pattern: Literal["MHA", "MQA", "MKA", "MVA"] | None = Field(
        None, description="koren2026 Table 8 head pattern; None = the single-head layer (Alg. 1)"
    )


class MambaLMConfig(ModelConfig):
    """Mamba-1 LM as mamba-ssm's MambaLMHeadModel (RMSNorm, tied head; conv + gate mixer)."""

    name: Literal["mamba_lm"] = "mamba_lm"
    D: int = Field(64, ge=2, description="d_model")
    N: int = Field(16, ge=1, le=256, description="d_state")
    n_layers: int = Field(1, ge=1)
    d_conv: int = Field(4, ge=1, le=8)
    expand: int = Field(2, ge=1)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    Config: type[ModelConfig]
    build: Callable[..., nn.Module]
    summary: str


MODELS: dict[str, ModelEntry] = {
    "ssm_lm": ModelEntry("ssm_lm", SSMLMConfig, SSMLM, SSMLMConfig.__doc__ or ""),
    "transformer_lm": ModelEntry(
        "transformer_lm", TransformerLMConfig, TransformerLM, TransformerLMConfig.__doc__ or ""
    ),
    "linear_mamba": ModelEntry(
        "linear_mamba", LinearMambaConfig, LinearMamba, LinearMambaConfig.__doc__ or ""
    ),
    "mamba_lm": ModelEntry("mamba_lm", MambaLMConfig, MambaLM, MambaLMConfig.__doc__ or ""),
    "seq_lm": ModelEntry("seq_lm", SeqLMConfig, SeqLM, SeqLMConfig.__doc__ or ""),
    "cooper_hybrid": ModelEntry(
        "cooper_hybrid", CooperHybridConfig, SeqLM, CooperHybridConfig.__doc__ or ""),
}


def build_model(config: ModelConfig, info, E: int, seeds: list[int] | None = None) -> nn.Module:
    """Build a pack of E members; initialise member e from seeds[e] when given.

    A config with an ``init`` field (models.init.InitConfig) selects the initialisation scheme.
    """
    model = MODELS[config.name].build(config, info, E)
    if seeds is not None:
        if len(seeds) != E:
            raise ValueError(f"{len(seeds)} seeds for a pack of {E}")
        init = getattr(config, "init", None)  # an InitConfig selects a scheme (models/init.py)
        initialise(model, seeds, init if isinstance(init, InitConfig) else None)
        if hasattr(model, "post_init"):  # e.g. designed (constructed) weights
            model.post_init(seeds)
    return model


def _type_name(t) -> str:
    """Readable type: int, str | list[str], Literal['a', 'b'], InitConfig, dict[str, A | B]."""
    import typing

    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in args) + "]"
    if origin in (typing.Union, __import__("types").UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if t is type(None):
        return "None"
    return getattr(t, "__name__", str(t).replace("typing.", ""))


def _default_str(v) -> str:
    if isinstance(v, BaseModel):
        return "{" + ", ".join(f"{k}: {_default_str(x)}" for k, x in v.model_dump().items()) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_default_str(x)}" for k, x in v.items()) + "}"
    return repr(v)


def config_rows(Config: type[BaseModel]) -> list[tuple[str, str, str, str]]:
    """(field, type, default, meaning) per field of a model config, nested configs made readable."""
    rows = []
    for fname, f in Config.model_fields.items():
        if fname == "name":
            continue
        default = "(required)" if f.is_required() else _default_str(f.get_default(call_default_factory=True))
        rows.append((fname, _type_name(f.annotation), default, f.description or ""))
    return rows


def count_params(model: nn.Module, E: int) -> int:
    """Trainable parameters of one member."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad) // E


__all__ = ["MODELS", "ModelConfig", "ModelEntry", "build_model", "config_rows", "count_params"]
