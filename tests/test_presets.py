"""Every preset equals the hand-written model it replaced (tests/support/legacy_models.py, a frozen
copy), in float64, built from the same seeds: same parameter count, the same parameters (no copying:
the preset's module order reproduces the old draw order), the same outputs and the same gradient of
every parameter. Parameter names differ only by the backbone's layout; ``_new_name`` maps them
(norms.i / mixers.i / layers.i / TransformerBlock attn, norm1 -> blocks.i.norm / blocks.i.mixer)."""

from __future__ import annotations

import re

import pytest
import torch
from support.legacy_models import build_legacy

from ssmrepro.analysis import layer_decay
from ssmrepro.models import MODELS, SeqLM, SequenceModel, build_model, count_params
from ssmrepro.tasks.base import TaskInfo

SEEDS = [3, 8]

CASES = [
    # huang2025 ssm_lm: s6 / s4d, ± index PE, ± norms, 1-2 layers, residual / head-bias options
    {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4},
    {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "pe": "index"},
    {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "norm": "layernorm",
     "head_bias": False},
    {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "pe": "index", "norm": "rmsnorm",
     "n_layers": 2, "dt_rank": 2},
    {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "n_layers": 2, "residual": False},
    {"name": "ssm_lm", "mixer": "s4d", "d_model": 8, "d_state": 4},
    {"name": "ssm_lm", "mixer": "s4d", "d_model": 8, "d_state": 4, "pe": "index"},
    {"name": "ssm_lm", "mixer": "s4d", "d_model": 8, "d_state": 4, "pe": "index", "norm": "layernorm",
     "n_layers": 2},
    # transformer_lm
    {"name": "transformer_lm", "d_model": 8},
    {"name": "transformer_lm", "d_model": 8, "heads": 2, "n_layers": 2, "mlp_hidden": 12,
     "norm": "rmsnorm", "head_bias": False},
    {"name": "transformer_lm", "d_model": 8, "pos": "none", "mlp_ratio": 0, "norm": "none"},
    # koren2026 linear_mamba: 1 layer, 2 layers (residual), each head pattern, designed weights
    {"name": "linear_mamba", "d_model": 8, "d_state": 4},
    {"name": "linear_mamba", "d_model": 8, "d_state": 4, "n_layers": 2},
    {"name": "linear_mamba", "d_model": 8, "d_state": 4, "n_layers": 2, "residual": False,
     "d_conv": 3, "expand": 1},
    *[{"name": "linear_mamba", "d_model": 6, "d_state": 3, "heads": 3, "head_pattern": p,
       "n_layers": n} for p in ("MHA", "MQA", "MKA", "MVA") for n in (1, 2)],
    {"name": "linear_mamba", "d_model": 8, "d_state": 4, "init": "designed"},
    # mamba-ssm LM
    {"name": "mamba_lm", "d_model": 8, "d_state": 4},
    {"name": "mamba_lm", "d_model": 8, "d_state": 4, "n_layers": 2, "d_conv": 2},
    # cooper2026 hybrid
    {"name": "cooper_hybrid", "d_model": 8, "d_state": 4, "layers": "SSM-TF"},
    {"name": "cooper_hybrid", "d_model": 8, "d_state": 4, "layers": "TF-SSM", "repeat": 2,
     "heads": 2, "window": 3, "tie_head": False},
]

_WIDTH = {"ssm_lm": "d", "transformer_lm": "d", "cooper_hybrid": "d", "linear_mamba": "D",
          "mamba_lm": "D"}


def _old_cfg(cfg: dict) -> dict:
    """The same model in the old field names (d / D for d_model, N for d_state)."""
    ren = {"d_model": _WIDTH[cfg["name"]], "d_state": "N"}
    return {ren.get(k, k): v for k, v in cfg.items()}


def _new_name(old: str, model: str) -> str:
    """Old parameter name -> SeqLM's (cooper_hybrid was already a SeqLM: names unchanged)."""
    subs = [(r"^norms\.(\d+)\.", r"blocks.\1.norm."), (r"^mixers\.(\d+)\.", r"blocks.\1.mixer."),
            (r"^layers\.(\d+)\.", r"blocks.\1.mixer.")]
    if model == "transformer_lm":  # TransformerBlock(norm1, attn) -> MixerBlock(norm, mixer)
        subs += [(r"^blocks\.(\d+)\.attn\.", r"blocks.\1.mixer."),
                 (r"^blocks\.(\d+)\.norm1\.", r"blocks.\1.norm.")]
    for pat, rep in subs:
        old = re.sub(pat, rep, old)
    return old


def _info(name: str) -> TaskInfo:
    # tied heads need n_classes == vocab_size; designed weights need V >= d_model
    return TaskInfo(16, 12, 10) if name in ("ssm_lm", "transformer_lm") else TaskInfo(16, 16, 10)


def _pair(cfg: dict):
    info = _info(cfg["name"])
    new = build_model(MODELS[cfg["name"]].Config(**cfg), info, len(SEEDS), SEEDS).double()
    old = build_legacy(_old_cfg(cfg), info, len(SEEDS), SEEDS).double()
    return new, old, info


@pytest.mark.parametrize("cfg", CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_preset_equals_the_old_model(cfg):
    new, old, info = _pair(cfg)
    assert isinstance(new, SeqLM) and isinstance(new, SequenceModel)
    assert count_params(new, 2) == count_params(old, 2)
    pn = dict(new.named_parameters())
    po = {_new_name(n, cfg["name"]): p for n, p in old.named_parameters()}
    assert po.keys() == pn.keys()
    for n in pn:  # the same init from the same seeds (same draw order)
        assert torch.equal(pn[n], po[n]), n
    torch.manual_seed(0)
    ids = torch.randint(0, info.vocab_size, (2, 3, info.seq_len))
    yn, yo = new(ids), old(ids)
    torch.testing.assert_close(yn, yo, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(new.readout(new.features(ids)), yo, rtol=1e-10, atol=1e-12)
    w = torch.randn_like(yn)
    names = list(pn)
    gn = torch.autograd.grad((yn.tanh() * w).sum(), [pn[n] for n in names])
    go = torch.autograd.grad((yo.tanh() * w).sum(), [po[n] for n in names])
    for n, a, b in zip(names, gn, go):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=n)


@pytest.mark.parametrize("mixer", ["s6", "s4d"])
@pytest.mark.parametrize("layers", [1, 2])
def test_decay_analysis_equals_the_old_models_decay(mixer, layers):
    """huang2025 Fig. 1's e^{ΔΛ} now comes from the first decay-capable mixer via mixer_inputs."""
    cfg = {"name": "ssm_lm", "mixer": mixer, "d_model": 8, "d_state": 4, "pe": "index",
           "norm": "layernorm", "n_layers": layers}
    new, old, info = _pair(cfg)
    ids = torch.randint(0, info.vocab_size, (2, 3, info.seq_len))
    torch.testing.assert_close(layer_decay(new, ids), old.decay(ids), rtol=1e-12, atol=1e-12)
