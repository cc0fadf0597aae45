"""The frozen oracle (tests/support/legacy_models.py) equals the hand-written models it copies
(float64: same parameters from the same seeds, same outputs, same gradients). Temporary: it goes
when the hand-written models are deleted; tests/test_presets.py then compares presets with it."""

import pytest
import torch
from support.legacy_models import build_legacy

from ssmrepro.models import MODELS, build_model, count_params
from ssmrepro.tasks.base import TaskInfo

CASES = [
    {"name": "ssm_lm", "mixer": "s6", "d": 8, "N": 4},
    {"name": "ssm_lm", "mixer": "s6", "d": 8, "N": 4, "pe": "index", "norm": "layernorm",
     "n_layers": 2, "head_bias": False},
    {"name": "ssm_lm", "mixer": "s4d", "d": 8, "N": 4, "pe": "index", "norm": "rmsnorm"},
    {"name": "transformer_lm", "d": 8, "heads": 2, "n_layers": 2},
    {"name": "linear_mamba", "D": 8, "N": 4},
    {"name": "linear_mamba", "D": 8, "N": 4, "n_layers": 2, "heads": 2, "head_pattern": "MQA"},
    {"name": "linear_mamba", "D": 8, "N": 4, "init": "designed"},
    {"name": "mamba_lm", "D": 8, "N": 4, "n_layers": 2},
    {"name": "cooper_hybrid", "d": 8, "N": 4, "layers": "SSM-TF"},
]


@pytest.mark.parametrize("cfg", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_oracle_equals_old_models(cfg):
    info = TaskInfo(16, 16, 10)
    seeds = [3, 8]
    new = build_model(MODELS[cfg["name"]].Config(**cfg), info, 2, seeds).double()
    old = build_legacy(cfg, info, 2, seeds).double()
    assert count_params(new, 2) == count_params(old, 2)
    pn, po = dict(new.named_parameters()), dict(old.named_parameters())
    assert pn.keys() == po.keys()
    for n in pn:
        assert torch.equal(pn[n], po[n]), n
    ids = torch.randint(0, 16, (2, 3, 10))
    yn, yo = new(ids), old(ids)
    torch.testing.assert_close(yn, yo, rtol=1e-10, atol=1e-12)
    w = torch.randn_like(yn)
    gn = torch.autograd.grad((yn.tanh() * w).sum(), list(pn.values()))
    go = torch.autograd.grad((yo.tanh() * w).sum(), [po[n] for n in pn])
    for n, a, b in zip(pn, gn, go):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=n)
