"""Library (models): the papers' models as presets — typed configs that expand to a SeqLMConfig.

A preset is data, not a module: its fields are the paper's knobs, ``to_backbone()`` is the SeqLM
configuration it stands for, and ``build_model`` builds that SeqLM. Each expansion is proven equal
to the hand-written model it replaced (tests/test_presets.py against tests/support/legacy_models.py:
same parameter count, same parameters from the same seeds, same outputs and gradients, float64).

    ssm_lm          huang2025 KEEP n-TH models: embedding (index PE optional) -> [norm -> S6 | S4D
                    core (+ residual)] × n_layers -> final norm -> linear head
    transformer_lm  embedding + learned positions -> pre-norm attention + MLP blocks -> norm -> head
    linear_mamba    koren2026's simplified linear Mamba (Alg. 1, head patterns of App. F.2.2): no
                    norms, tied read-out, residual for Λ > 1 layers; ``init: designed`` = Thm 2's
                    constructed weights (models.init's ``designed`` scheme)
    mamba_lm        mamba-ssm's MambaLMHeadModel: RMSNorm pre-norm Mamba-1 blocks, final RMSNorm,
                    tied head, mamba-ssm's init (embedding N(0, 0.02), out_proj / √n_layer);
                    options for huang2025 §5: core s4d (Mamba-S4D) / delta_t (Mamba-Δᵀ), the
                    single-head three-conv Mamba-2 mixer, gate off; for koren2026 Table 10: no
                    norms, no post-conv SiLU, A = I (no discretisation), no D skip, PyTorch init
    cooper_hybrid   cooper2026: Mamba-1 'SSM' and GPT-NeoX 'TF' layers in a pattern, tied head,
                    Hugging Face init
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from .backbone import MAX_LAYERS, SeqLMConfig, spelled_layers
from .base import ModelConfig, refuse_reversed_range, refuse_unread
from .blocks import MixerBlockConfig, NeoXBlockConfig
from .init import InitConfig
from .mixers.attention import AttentionConfig
from .mixers.common import DT_RANGE, DtRank, refuse_dt_below_floor
from .mixers.linear_mamba import LinearMambaMixerConfig
from .mixers.mamba1 import Mamba1Config
from .mixers.mamba2_3conv import Mamba2ThreeConvConfig
from .mixers.s4d import S4DConfig
from .mixers.s6 import S6Config


class SSMLMConfig(ModelConfig):
    """Embedding -> SSM core layers (S6 or S4D; no conv, no gate) -> linear head."""

    name: Literal["ssm_lm"] = "ssm_lm"
    mixer: Literal["s6", "s4d"] = Field("s6", description="the SSM core: s6 (selective: Δ, B, C "
                                        "from the input) or s4d (LTI: Δ = 1, fixed B)")
    d_model: int = Field(32, ge=2, description="model width (channels)")
    d_state: int = Field(8, ge=1, le=256, description="state size per channel (kernel limit 256)")
    n_layers: int = Field(1, ge=1, le=MAX_LAYERS, description="SSM layers")
    pe: Literal["none", "index", "index_norm", "sinusoidal", "learned"] = Field(
        "none", description="index: raw t in the last embedding channel (huang2025); index_norm: "
        "t/T there; sinusoidal / learned: positions added to the full-width embedding")
    norm: Literal["none", "layernorm", "rmsnorm"] = Field(
        "none", description="the norm before each core and after the last layer")
    residual: bool = Field(True, description="each layer adds its input to the core's output")
    head_bias: bool = Field(True, description="bias of the output head")
    dt_rank: DtRank | Literal["auto"] = Field("auto", description="s6: "
                                              + S6Config.model_fields["dt_rank"].description)
    dt_min: float = Field(1e-3, gt=0, description="s6: " + DT_RANGE)
    dt_max: float = Field(1e-1, gt=0, description="s6: " + DT_RANGE)
    s4d_A_scale: float = Field(1.0, gt=0, le=1, description="S4D core: Λ's init times this "
                               "(S4DConfig.A_scale)")

    @model_validator(mode="after")
    def _check(self) -> SSMLMConfig:
        if self.mixer == "s4d":
            refuse_unread(self, [(k, "by mixer 's4d' (Δ = 1, no Δ projection)")
                                 for k in ("dt_rank", "dt_min", "dt_max")])
        else:
            refuse_unread(self, [("s4d_A_scale", f"by mixer {self.mixer!r} (it scales the S4D "
                                  "core's Λ)")])
        refuse_reversed_range(self)
        if self.mixer == "s6":
            refuse_dt_below_floor(self)
        return self

    def to_backbone(self) -> SeqLMConfig:
        """[norm -> core (+ residual)] blocks; the final norm of the same kind; pe = the
        backbone's pos (index / index_norm in the last channel, sinusoidal / learned added). S6
        core with its D skip, S4D core without (huang2025 counts)."""
        if self.mixer == "s6":
            core = S6Config(d_state=self.d_state, dt_rank=self.dt_rank, dt_min=self.dt_min,
                            dt_max=self.dt_max)
        else:
            core = S4DConfig(d_state=self.d_state, A_scale=self.s4d_A_scale)
        return SeqLMConfig(
            d_model=self.d_model, layers=["SSM"], repeat=self.n_layers,
            blocks={"SSM": MixerBlockConfig(mixer=core, norm=self.norm, residual=self.residual)},
            pos=self.pe, final_norm=self.norm,
            head="per_position", head_bias=self.head_bias)


class TransformerLMConfig(ModelConfig):
    """Embedding + learned positions -> pre-norm Transformer blocks -> linear head."""

    name: Literal["transformer_lm"] = "transformer_lm"
    d_model: int = Field(16, ge=2, description="model width")
    n_layers: int = Field(1, ge=1, le=MAX_LAYERS, description="Transformer blocks")
    heads: int = Field(1, ge=1, description="attention heads")
    mlp_ratio: int = Field(1, ge=0, description="MLP hidden = mlp_ratio * d_model (unless mlp_hidden)")
    mlp_hidden: int | None = Field(None, ge=0, description="MLP hidden width (null: mlp_ratio * "
                                   "d_model; 0: no MLP)")
    pos: Literal["learned", "none"] = Field("learned", description="learned: positions added to "
                                            "the embedding; none: no positions")
    norm: Literal["none", "layernorm", "rmsnorm"] = Field(
        "layernorm", description="the pre-norm of attention and MLP, and the final norm")
    head_bias: bool = Field(True, description="bias of the output head")

    @model_validator(mode="after")
    def _check(self) -> TransformerLMConfig:
        if self.mlp_hidden is not None:
            refuse_unread(self, [("mlp_ratio", f"with mlp_hidden {self.mlp_hidden} (it overrides "
                                  "mlp_ratio)")])
        return self

    def to_backbone(self) -> SeqLMConfig:
        """Block = h + Attn(Norm h) (causal MHA, biases), then h + MLP(Norm h) (GELU; none if the
        hidden width is 0); final norm of the same kind."""
        hidden = self.d_model * self.mlp_ratio if self.mlp_hidden is None else self.mlp_hidden
        block = MixerBlockConfig(mixer=AttentionConfig(heads=self.heads), norm=self.norm,
                                 mlp_hidden=hidden, mlp_act="gelu")
        return SeqLMConfig(
            d_model=self.d_model, layers=["TF"], repeat=self.n_layers, blocks={"TF": block},
            pos=self.pos, final_norm=self.norm, head="per_position", head_bias=self.head_bias)


class LinearMambaConfig(ModelConfig):
    """koren2026 simplified linear Mamba (Alg. 1): conv + SSM with A = I, D = 0, tied embeddings."""

    name: Literal["linear_mamba"] = "linear_mamba"
    d_model: int = Field(32, ge=2, description="model width D")
    d_state: int = Field(16, ge=1, description="state size N")
    n_layers: int = Field(1, ge=1, le=MAX_LAYERS, description="Λ")
    d_conv: int = Field(2, ge=1, le=8,
                        description=LinearMambaMixerConfig.model_fields["d_conv"].description)
    expand: int = Field(2, ge=1, description=LinearMambaMixerConfig.model_fields["expand"].description)
    residual: bool | None = Field(None, description="default: on for Λ > 1 (official configs)")
    init: Literal["default", "designed"] = Field(
        "default", description="designed: koren2026 Thm 2 weights (evaluate with max_steps 0)")
    heads: int = Field(1, ge=1, description="M, SSM heads (koren2026 App. F.2.2; needs head_pattern)")
    head_pattern: Literal["MHA", "MQA", "MKA", "MVA"] | None = Field(
        None, description="koren2026 Table 8 head pattern; null = the single-head layer (Alg. 1)")

    @model_validator(mode="after")
    def _check(self) -> LinearMambaConfig:
        if self.head_pattern is None and self.heads != 1:
            raise ValueError("heads > 1 needs a head_pattern (MHA, MQA, MKA or MVA)")
        if self.init == "designed" and self.head_pattern is not None:
            raise ValueError("designed weights exist for the single-head linear Mamba only")
        if self.init == "designed" and (self.n_layers, self.d_conv, self.expand) != (1, 2, 2):
            raise ValueError("designed weights exist for 1 layer, d_conv = 2, expand = 2")
        return self

    def to_backbone(self) -> SeqLMConfig:
        """Blocks without norms (residual on for Λ > 1 unless set), no final norm, tied head
        without bias."""
        mixer = LinearMambaMixerConfig(d_state=self.d_state, d_conv=self.d_conv, expand=self.expand,
                                       heads=self.heads, head_pattern=self.head_pattern)
        residual = self.residual if self.residual is not None else self.n_layers > 1
        return SeqLMConfig(
            d_model=self.d_model, layers=["SSM"], repeat=self.n_layers,
            blocks={"SSM": MixerBlockConfig(mixer=mixer, norm="none", residual=residual)},
            pos="none", final_norm="none", head="per_position", tie_head=True, head_bias=False,
            init=InitConfig(scheme="designed" if self.init == "designed" else "default"))


class MambaLMConfig(ModelConfig):
    """Mamba LM as mamba-ssm's MambaLMHeadModel (RMSNorm, tied head); Mamba-1 block (conv + gate)
    with an S6, S4D (Mamba-S4D) or Δᵀ (Mamba-Δᵀ) core, or huang2025's single-head three-conv
    Mamba-2 mixer; gate optional (huang2025's MQAR / induction models have none)."""

    name: Literal["mamba_lm"] = "mamba_lm"
    d_model: int = Field(64, ge=2, description="model width")
    d_state: int = Field(16, ge=1, le=256, description="state size N")
    n_layers: int = Field(1, ge=1, le=MAX_LAYERS, description="Mamba blocks")
    d_conv: int = Field(4, ge=1, le=8, description=Mamba1Config.model_fields["d_conv"].description)
    expand: int = Field(2, ge=1, description=Mamba1Config.model_fields["expand"].description)
    mixer: Literal["mamba1", "mamba2_3conv"] = Field(
        "mamba1", description="mamba1: Mamba-1 block; mamba2_3conv: huang2025's single-head "
        "Mamba-2 (scalar λ, three convs; output projection only when expand > 1)")
    core: Literal["s6", "s4d", "delta_t"] = Field(
        "s6", description="mamba1's SSM core: s6 (Mamba), s4d (Mamba-S4D), delta_t (Mamba-Δᵀ)")
    gate: bool = Field(True, description="the gate branch (off: huang2025 MQAR / induction heads)")
    # koren2026 Table 10's ablations of the Mamba-1 block (mixer mamba1 only)
    norm: Literal["rmsnorm", "none"] = Field(
        "rmsnorm", description="block pre-norms and final norm; none: koren2026 Table 10's Mamba "
        "'w/o layer normalization'")
    conv_act: bool = Field(True, description="SiLU after the conv (off: Table 10 variant C)")
    discretize: bool = Field(
        True, description="false: A = I and no Δ, h_t = h_{t-1} + x_t ⊗ B_t (Table 10 variant A)")
    skip: bool = Field(True, description="the core's D ⊙ x skip (off: koren2026's D = 0 frozen)")
    init: Literal["mamba", "default"] = Field(
        "mamba", description="mamba: mamba-ssm's _init_weights; default: PyTorch defaults "
        "(embedding N(0, 1)), as koren2026's mamba_tiny")

    @model_validator(mode="after")
    def _check(self) -> MambaLMConfig:
        if self.mixer == "mamba2_3conv" and self.core != "s6":
            raise ValueError("core applies to mixer mamba1 only (mamba2_3conv has its own SSM)")
        if self.mixer == "mamba2_3conv" and not (self.conv_act and self.discretize and self.skip):
            raise ValueError("conv_act, discretize and skip apply to mixer mamba1 only")
        return self

    def mixer_config(self):
        if self.mixer == "mamba2_3conv":
            return Mamba2ThreeConvConfig(d_state=self.d_state, d_conv=self.d_conv,
                                         expand=self.expand, gate=self.gate,
                                         out_proj=self.expand > 1)
        return Mamba1Config(d_state=self.d_state, d_conv=self.d_conv, expand=self.expand,
                            core=self.core, gate=self.gate, conv_act=self.conv_act,
                            discretize=self.discretize, skip=self.skip)

    def to_backbone(self) -> SeqLMConfig:
        """h + Mixer(RMSNorm h) blocks (in/out_proj without bias, conv with bias), final RMSNorm,
        tied head without bias; init scheme 'mamba' (embedding N(0, 0.02), out_proj / √n_layer).
        norm none: h + Mixer(h) and no final norm; init default: PyTorch's defaults."""
        return SeqLMConfig(
            d_model=self.d_model, layers=["SSM"], repeat=self.n_layers,
            blocks={"SSM": MixerBlockConfig(mixer=self.mixer_config(), norm=self.norm)},
            pos="none", final_norm=self.norm, head="per_position", tie_head=True, head_bias=False,
            init=InitConfig(scheme=self.init))


class CooperHybridConfig(ModelConfig):
    """cooper2026 hybrid: Mamba-1 'SSM' and GPT-NeoX 'TF' layers in a pattern (SeqLM preset)."""

    name: Literal["cooper_hybrid"] = "cooper_hybrid"
    d_model: int = Field(8, ge=2, description="hidden_size")
    layers: str | list[str] = Field("SSM-TF", description="'SSM-TF', 'TF-TF', [SSM, TF, ...]")
    _spelled = field_validator("layers", mode="before")(spelled_layers)
    repeat: int = Field(1, ge=1, le=MAX_LAYERS, description="times the layers pattern is "
                        "stacked")
    d_state: int = Field(16, ge=1, le=256, description="Mamba state_size (audit: 16 in the runs)")
    expand: int = Field(2, ge=1, description="Mamba expand and NeoX MLP expand")
    d_conv: int = Field(4, ge=1, le=8, description="Mamba "
                        + Mamba1Config.model_fields["d_conv"].description)
    heads: int = Field(1, ge=1, description="NeoX attention heads")
    window: int | None = Field(20, ge=1, description="sliding window (null = full causal)")
    rotary_pct: float = Field(0.25, ge=0, le=1, description="NeoX: share of head dims with RoPE")
    split_heads: bool = Field(True, description="false: fork's do_split_square=False")
    tie_head: bool = Field(
        True, description="HF ties embed_out to embed_in (matches the audited counts)")
    init: InitConfig = Field(InitConfig(scheme="hf"),
                             description="HF _init_weights: Linear/embedding N(0, 0.02)")

    def to_backbone(self) -> SeqLMConfig:
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
            d_model=self.d_model, layers=self.layers, repeat=self.repeat,
            blocks={
                "SSM": MixerBlockConfig(
                    mixer=Mamba1Config(d_state=self.d_state, d_conv=self.d_conv, expand=self.expand,
                                       conv_bias=True, bias=False),
                    norm="rmsnorm"),
                "TF": NeoXBlockConfig(heads=self.heads, window=self.window,
                                      rotary_pct=self.rotary_pct, split_heads=self.split_heads,
                                      expand=self.expand, act="silu", norm="layernorm"),
            },
            pos="none", final_norm="layernorm", head="per_position", tie_head=self.tie_head,
            head_bias=False, init=self.init)

    @model_validator(mode="after")
    def _pattern(self) -> CooperHybridConfig:
        """The layer pattern names the preset's blocks (SSM, TF), at most ``MAX_LAYERS`` of them
        with ``repeat``: an empty one ('', [], '-'), an unknown name (`SSM-XX`) or 2 x 1,024
        layers passed the preset and raised the backbone's ValidationError as a traceback in
        `validate` (and in `show`, `run`)."""
        try:
            self.to_backbone()
        except ValidationError as err:
            first = err.errors()[0]
            raise ValueError(str(first.get("ctx", {}).get("error") or first["msg"])) from None
        return self


PRESETS: tuple[type[ModelConfig], ...] = (
    SSMLMConfig, TransformerLMConfig, LinearMambaConfig, MambaLMConfig, CooperHybridConfig)

__all__ = ["PRESETS", "CooperHybridConfig", "LinearMambaConfig", "MambaLMConfig", "SSMLMConfig",
           "TransformerLMConfig"]
