"""Library (models): the model registry and ``build_model`` — every model is one SeqLM.

``MODELS`` maps a spec's ``model.name`` to its typed config: the papers' presets (models.presets:
ssm_lm, transformer_lm, linear_mamba, mamba_lm, cooper_hybrid) and the generic backbone ``seq_lm``
itself. ``build_model(config, info, E, seeds)`` expands the config (``to_backbone()``) and builds a
pack of E SeqLM members (models.backbone), initialised from their seeds with the config's scheme
(models.init). Mixers have their own registry (models.mixers.MIXERS). ``activation_floats`` is the
planner's memory estimate of one training step.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from enum import Enum
from types import UnionType

from pydantic import BaseModel
from torch import nn

from ..util import config_memo, docstring
from .backbone import SeqLM, SeqLMConfig
from .base import ModelConfig, SequenceModel
from .blocks import NORM_KEPT
from .init import InitConfig, initialise
from .presets import (
    PRESETS,
    CooperHybridConfig,
    LinearMambaConfig,
    MambaLMConfig,
    SSMLMConfig,
    TransformerLMConfig,
)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    Config: type[ModelConfig]
    summary: str


MODELS: dict[str, ModelEntry] = {
    C.model_fields["name"].default: ModelEntry(C.model_fields["name"].default, C,
                                               " ".join((docstring(C) or "").split()))
    for C in (*PRESETS, SeqLMConfig)
}


def build_model(config: ModelConfig, info, E: int, seeds: list[int] | None = None,
                members: list[ModelConfig] | None = None) -> SeqLM:
    """Build a pack of E members (a SeqLM); initialise member e from seeds[e] when given.

    The backbone's ``init`` (models.init.InitConfig) selects the initialisation scheme. The init
    is a member-level setting: with ``members`` (one model config per member, equal to ``config``
    but for their ``init``; see ``member_key``) member e is initialised with its own scheme.
    """
    backbone = config.to_backbone()
    model = SeqLM(backbone, info, E)
    if seeds is not None:
        if len(seeds) != E:
            raise ValueError(f"{len(seeds)} seeds for a pack of {E}")
        inits: InitConfig | list[InitConfig] = backbone.init
        if members is not None:
            if len(members) != E:
                raise ValueError(f"{len(members)} member configs for a pack of {E}")
            key = member_key(config)
            if any(member_key(m) != key for m in members):
                raise ValueError("the members of a pack may differ in their init only")
            inits = [m.to_backbone().init for m in members]
        initialise(model, seeds, inits)
    return model


def member_key(config: ModelConfig) -> dict:
    """The backbone a model config builds, without its init: configs with equal keys build the
    same shapes and may train in one pack (the init is a member-level setting)."""
    return config.to_backbone().model_dump(mode="json", exclude={"init"})


def activation_floats(config: ModelConfig, info) -> int:
    """Floats per sample that one training step keeps for backward (the planner's estimate).

    Sum over the blocks of their mixer / MLP / norm estimates (``activation_floats(d_model, L)`` of
    each mixer config), the largest of the blocks' ``backward_floats`` (what one layer's backward
    builds and frees before the next layer's: counted once), plus the input (embedding or
    encoder output, positions) and the read-out (per position, class targets: the fused linear
    cross entropy's kept exponentials (``kernels.xent.linear_xent``), L·C, and the gathered
    features, L·d, where the logits of the textbook path (logits, softmax and their gradient)
    were counted, 3·L·C: 3.2x the measured step of an MQAR Mamba of 516 classes; per position,
    regression: the outputs, the target with its NaNs zeroed, the difference, the masked
    error, its square and the zeros ``torch.where`` takes, 6·L·C (3·L·C were counted:
    yu2025-fig3's S4D of width 2 and 10 outputs estimated 0.57x what getrusage measured);
    pooled: the pooled features, 3·C).
    """
    cfg = config.to_backbone()
    d, L, C = cfg.d_model, info.seq_len, info.n_classes
    n_inputs = 2 if info.dual else 1
    floats = L * d * (2 if cfg.pos == "learned" else 1)  # embedded inputs (+ positions)
    floats += sum(cfg.blocks[n].activation_floats(d, L) for n in cfg.layer_names())
    # what a layer's backward builds and frees before the next layer's: the largest, once
    floats += max((getattr(cfg.blocks[n], "backward_floats", lambda d, L: 0)(d, L)
                   for n in set(cfg.layer_names())), default=0)
    # the final norm keeps what a block's norm of its kind keeps (``blocks.NORM_KEPT``: its
    # input and x̂, and x − μ for batch norm); one L×d was counted for every kind, one under
    # with layer / RMS norm and two with batch norm (yu2025-tab2's final batch norm)
    floats += L * NORM_KEPT[cfg.final_norm] * d
    floats *= n_inputs
    P = info.read_positions
    if cfg.head == "per_position" and info.loss == "mse":
        floats += 6 * L * C
    elif cfg.head == "per_position" and P < L:  # the P supervised positions gathered: their
        # kept exponentials, features, row weights and log-sum-exps, and what the gather keeps,
        # all L features and the int64 sort of the positions (L·(C + d) counted: 2.4x
        # huang2025-figA3's MQAR Mamba step, 4 of T = 50 positions supervised, 516 classes)
        floats += P * (C + d + 6) + L * (d + 2)
    elif cfg.head == "per_position":
        floats += L * (C + d)
    else:
        floats += n_inputs * d + (4 * d + 2 * (cfg.head_hidden or d) if cfg.head == "dual_pool" else 0)
        floats += 3 * C
    return int(floats)


def fixed_floats(config: ModelConfig, info) -> int:
    """Floats one training step keeps for backward whatever its batch size (per member): the
    blocks' batch-independent kernels (``fixed_floats`` of each block config; 0 for blocks
    without one). Both inputs of a two-input task share them (one pass of 2B sequences)."""
    cfg = config.to_backbone()
    d, L = cfg.d_model, info.seq_len
    return int(sum(getattr(cfg.blocks[n], "fixed_floats", lambda d, L: 0)(d, L)
                   for n in cfg.layer_names()))


def eval_floats(config: ModelConfig, info) -> int:
    """Floats per sample that an evaluation batch surely holds at once (no autograd; a lower
    bound, so it never refuses a model that fits): the residual stream in and out of a block
    (twice for two-input tasks) and the logits with their log-softmax, at the positions that
    surely reach the read-out (``TaskInfo.output_positions``: the supervised ones where they
    are few, e.g. induction heads with T below twice the vocabulary); per-position regression:
    the float64 targets and their float32 copy, the outputs, the targets with their NaNs
    zeroed, the zeros ``torch.where`` takes, the difference and its masked square, 8·L·C
    (2·L·C were counted: yu2025-fig3's S4D of width 2 and 10 outputs evaluated at 3.5x the
    estimate)."""
    cfg = config.to_backbone()
    d, L, C = cfg.d_model, info.seq_len, info.n_classes
    n_inputs = 2 if info.dual else 1
    if cfg.head == "per_position" and info.loss == "mse":
        readout = 8 * L * C
    else:
        readout = 2 * info.output_positions * C if cfg.head == "per_position" else 2 * C
    return int(n_inputs * 2 * L * d + readout)


def work_floats(config: ModelConfig, info, batch: int) -> int:
    """Floats of the kernels' work buffers in a training step of ``batch`` samples (one member):
    the largest of the distinct blocks' ``work_floats`` (one layer's backward at a time; 0 for
    blocks without one), over 2·batch sequences for two-input tasks."""
    cfg = config.to_backbone()
    d, L = cfg.d_model, info.seq_len
    n = batch * (2 if info.dual else 1)
    return int(max((getattr(cfg.blocks[b], "work_floats", lambda d, L, n: 0)(d, L, n)
                    for b in set(cfg.layer_names())), default=0))


def eval_batch_floats(config: ModelConfig, info, batch: int) -> int:
    """Floats that an evaluation batch of ``batch`` samples (one member, no autograd) holds at
    its peak: the residual stream in and out of a block (``eval_floats``' 2·L·d, twice for
    two-input tasks) with the larger of what the blocks hold (the largest of the distinct
    blocks' ``eval_floats(d_model, L, batch)``: their mixers' intermediates, scan states and
    work buffers; the blocks run one after another, so one block's at a time; over 2·batch
    sequences for two-input tasks, one pass) and of the read-out's logits and log-softmax
    (``eval_floats``' rest; they live after the blocks). ``eval_floats`` alone was counted: an
    evaluation batch of a complex S6 at T 128 peaked at 42x the estimate (its scan states)."""
    cfg = config.to_backbone()
    d, L = cfg.d_model, info.seq_len
    n = 2 if info.dual else 1
    stream = n * 2 * L * d
    readout = eval_floats(config, info) - stream
    blocks = max((int(cfg.blocks[b].eval_floats(d, L, n * batch))
                  for b in set(cfg.layer_names())), default=0)
    return int(batch * stream + max(batch * readout, blocks))


def param_count(config: ModelConfig, info, trainable: bool = False) -> int:
    """Parameters of one member, counted without allocating them: each distinct block is built
    once on PyTorch's ``meta`` device (shapes only) and counted as often as the layer pattern
    uses it, so this stays fast for any width or depth; the same config and task counted once
    (``util.config_memo``: the planner asks about six times a shape). ValueError where a size
    overflows 64 bits. ``trainable``: only those that train (what a run record's ``n_params``
    counts, :func:`count_params`; a frozen all-ones conv is left out)."""
    return _param_count(config, info, trainable)


# an int each: room for every shape of a paper sweep, which the planner reads in 4 passes
@config_memo(1 << 14)
def _param_count(config: ModelConfig, info, trainable: bool) -> int:
    import torch

    cfg = config.to_backbone()
    names = cfg.layer_names()
    distinct = list(dict.fromkeys(names))
    try:
        with torch.device("meta"):
            model = SeqLM(cfg.model_copy(update={"layers": distinct, "repeat": 1}), info, 1)
    except (RuntimeError, TypeError) as err:  # a size past 64 bits (d_model or a vocabulary of
        # 2**70): torch's own overflow, a traceback out of `validate`
        if "overflow" not in str(err).lower():
            raise
        raise ValueError("a tensor of this model would have a size past what 64-bit integers "
                         "count (model.d_model, model.d_state, the task's vocabulary or "
                         "length)") from None
    def numel(m) -> int:
        return sum(p.numel() for p in m.parameters() if p.requires_grad or not trainable)

    per_block = {n: numel(blk) for n, blk in zip(distinct, model.blocks)}
    rest = numel(model) - sum(per_block.values())
    return int(rest + sum(per_block[n] for n in names))


def _type_name(t) -> str:
    """Readable type: int, str | list[str], Literal['a', 'b'], dict[str, A | B]; a nested
    config is the keys a spec writes in it, ``{scheme, gamma, ...}`` (a key that tells union
    members apart with its value: ``{kind: 'mixer', ...}``): 'list[Given]' or 'InitConfig'
    named a class of the code, which no spec writes."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if isinstance(t, type) and issubclass(t, BaseModel):
        tags, keys = [], []
        for k, f in t.model_fields.items():
            lit = typing.get_origin(f.annotation) is typing.Literal
            one = typing.get_args(f.annotation) if lit else ()
            if len(one) == 1:  # the member's tag, first
                tags.append(f"{k}: {one[0]!r}")
            elif not f.exclude:
                keys.append(k)
        return "{" + ", ".join(tags + keys) + "}"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in args) + "]"
    if origin in (typing.Union, UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if t is type(None):
        return "None"
    return getattr(t, "__name__", str(t).replace("typing.", ""))


def _plain(v):
    """``v`` as the lists, mappings, text, numbers, booleans and null a spec file holds."""
    if isinstance(v, BaseModel):
        v = v.model_dump()
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    if isinstance(v, Enum):
        return _plain(v.value)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _default_str(v) -> str:
    """A default as a spec writes it (YAML, one line): the Python spelling (`None`, `False`,
    `(0.9, 0.999)`) copied into a spec read `label: None` as the text 'None'."""
    import yaml

    text = yaml.safe_dump(_plain(v), default_flow_style=True, sort_keys=False,
                          allow_unicode=True, width=float("inf"))
    return text.removesuffix("\n").removesuffix("\n...").strip()


def config_rows(Config: type[BaseModel], skip: tuple[str, ...] = ("name",)
                ) -> list[tuple[str, str, str, str]]:
    """(field, type, default, meaning) per field of a config (a model's, mixer's, task's, figure
    kind's or check's), nested configs made readable; ``skip``: the field that names the entry."""
    rows = []
    for fname, f in Config.model_fields.items():
        if fname in skip or f.exclude:  # exclude: set by the loader (a spec's path), no key
            continue
        default = "(required)" if f.is_required() else _default_str(f.get_default(call_default_factory=True))
        rows.append((fname, _type_name(f.annotation), default, f.description or ""))
    return rows


def refuse_unread_window(config: ModelConfig, longest: int) -> None:
    """Raise ValueError for a sliding attention ``window`` set away from its default where it
    changes nothing: it and the default both let every query of the longest sequence (the
    task's and its evaluation sets') see its whole past. cooper_hybrid's window 30 at length 15
    trained the default 20's model, a neox block's window 100 at length 100 the full causal one,
    each under another run id. A preset's own ``window`` (cooper_hybrid) is compared with the
    preset's default, a block's or mixer's with theirs (none)."""
    from .mixers.neox_attn import NeoXAttnFields

    def seen(w: int | None) -> int | None:  # the window a query of the longest sequence meets
        return None if w is None or w >= longest else w

    bb = config.to_backbone()
    attn = [(n, b if isinstance(b, NeoXAttnFields) else b.mixer)
            for n in dict.fromkeys(bb.layer_names())
            if isinstance(b := bb.blocks[n], NeoXAttnFields)
            or isinstance(getattr(b, "mixer", None), NeoXAttnFields)]
    if not attn:
        return
    fields = type(config).model_fields
    if "window" in fields and not isinstance(config, SeqLMConfig):  # the preset's own key
        keys = [("window", config.window, fields["window"].default)]
    else:
        keys = [(f"blocks.{n}{'' if a is bb.blocks[n] else '.mixer'}.window", a.window,
                 type(a).model_fields["window"].default) for n, a in attn]
    for key, w, default in keys:
        if w != default and seen(w) == seen(default):
            raise ValueError(
                f"model.{key} {w} is not read at sequence length {longest:,} (the longest of the "
                f"task and its evaluation sets): every query already sees its whole past, as "
                f"{'without a window' if default is None else f'with the default window {default}'}"
                f": the run would train the same model under another run id; leave window out, "
                f"or give one below {longest:,}")


def count_params(model: nn.Module, E: int) -> int:
    """Trainable parameters of one member."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad) // E


__all__ = [
    "MODELS", "CooperHybridConfig", "InitConfig", "LinearMambaConfig", "MambaLMConfig",
    "ModelConfig", "ModelEntry", "SSMLMConfig", "SeqLM", "SeqLMConfig", "SequenceModel",
    "TransformerLMConfig", "activation_floats", "build_model", "config_rows", "count_params",
    "eval_floats", "eval_batch_floats", "fixed_floats", "member_key", "param_count",
    "refuse_unread_window", "work_floats",
]
