"""The contract every registered mixer must keep, checked for all of MIXERS at once.

Each mixer-specific test file checks its equations; this one makes sure that nothing registered
escapes the generic guarantees: shape (E, B, L, d) -> (E, B, L, d), a pack equals its members
built alone (outputs and gradients), the fast path equals the sequential reference (float64,
outputs and gradients), causality, finite gradients, unknown config keys rejected, a memory
estimate and declared weight matrices (init_weights).
"""

import pydantic
import pytest
import torch

from ssmrepro.models.layers import reset_members
from ssmrepro.models.mixers import MIXERS, MixerSpecError, build_mixer, parse_mixer

D = 16  # model width used for every mixer (divisible by the usual head / block counts)
SMALL = {"d_state": 4, "heads": 2}  # shrink state sizes where a mixer has such a field


def _cfg(name: str) -> dict:
    fields = MIXERS[name].Config.model_fields
    return {"name": name, **{k: v for k, v in SMALL.items() if k in fields}}


def _build(name: str, seeds: list[int]) -> torch.nn.Module:
    try:
        m = build_mixer(_cfg(name), len(seeds), D)
    except (ValueError, pydantic.ValidationError):  # a field in SMALL does not fit this mixer
        m = build_mixer({"name": name}, len(seeds), D)
    reset_members(m, seeds)
    return m.double()


NAMES = sorted(MIXERS)


@pytest.mark.parametrize("name", NAMES)
def test_pack_equals_members_alone(name):
    torch.manual_seed(0)
    seeds = [3, 11, 5]
    x = torch.randn(3, 2, 9, D, dtype=torch.float64, requires_grad=True)
    pack = _build(name, seeds)
    y = pack(x)
    assert y.shape == x.shape
    (y.sin().sum()).backward()
    for e, s in enumerate(seeds):
        alone = _build(name, [s])
        xe = x.detach()[e : e + 1].clone().requires_grad_(True)
        ye = alone(xe)
        torch.testing.assert_close(ye, y[e : e + 1].detach(), rtol=1e-9, atol=1e-9)
        ye.sin().sum().backward()
        torch.testing.assert_close(xe.grad, x.grad[e : e + 1], rtol=1e-8, atol=1e-9)
        for (n, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            if p.grad is not None:
                torch.testing.assert_close(q.grad[0], p.grad[e], rtol=1e-8, atol=1e-9, msg=n)


@pytest.mark.parametrize("name", NAMES)
def test_fast_path_equals_sequential_reference(name):
    torch.manual_seed(4)
    m = _build(name, [2, 9])
    params = [p for p in m.parameters() if p.requires_grad]
    x = torch.randn(2, 2, 11, D, dtype=torch.float64)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [m(xs[0]), m.forward_ref(xs[1])]
    torch.testing.assert_close(ys[0], ys[1], rtol=1e-10, atol=1e-11)
    w = torch.randn_like(ys[0])
    grads = [torch.autograd.grad((y.sin() * w).sum(), [xi, *params]) for y, xi in zip(ys, xs)]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_memory_estimate_and_declared_weights(name):
    """Config.activation_floats(d_model, L) is a positive int growing with L; every module
    declares the matrices it owns (init_weights), or owns none of rank >= 3."""
    cfg = parse_mixer(_cfg(name)) if _fits(name) else parse_mixer({"name": name})
    f1, f2 = cfg.activation_floats(D, 16), cfg.activation_floats(D, 64)
    assert isinstance(f1, int) and 0 < f1 < f2
    assert hasattr(MIXERS[name].build(cfg, 1, D), "init_weights")


def _fits(name: str) -> bool:
    try:
        build_mixer(_cfg(name), 1, D)
        return True
    except (ValueError, pydantic.ValidationError):
        return False


@pytest.mark.parametrize("name", [n for n in NAMES if MIXERS[n].causal])
def test_causal(name):
    torch.manual_seed(1)
    m = _build(name, [0])
    x = torch.randn(1, 2, 12, D, dtype=torch.float64)
    t0 = 6
    x2 = x.clone()
    x2[:, :, t0 + 1 :] = torch.randn_like(x2[:, :, t0 + 1 :])
    with torch.no_grad():
        y, y2 = m(x), m(x2)
    torch.testing.assert_close(y[:, :, : t0 + 1], y2[:, :, : t0 + 1], rtol=1e-10, atol=1e-10)
    assert not torch.allclose(y[:, :, t0 + 1 :], y2[:, :, t0 + 1 :])  # the future does matter


@pytest.mark.parametrize("name", NAMES)
def test_gradients_finite_and_reach_every_parameter(name):
    torch.manual_seed(2)
    m = _build(name, [0, 1]).float()
    x = torch.randn(2, 3, 33, D)
    m(x).pow(2).mean().backward()
    for n, p in m.named_parameters():
        if p.requires_grad:
            assert p.grad is not None, n
            assert torch.isfinite(p.grad).all(), n


@pytest.mark.parametrize("name", NAMES)
def test_unknown_keys_rejected(name):
    with pytest.raises(pydantic.ValidationError):
        parse_mixer({"name": name, "no_such_field": 1})


def test_unknown_mixer_lists_known_ones():
    with pytest.raises(MixerSpecError, match="known: .*s6"):
        parse_mixer({"name": "s7"})


@pytest.mark.parametrize("name", NAMES)
def test_every_mixer_reports_its_kernel_path(name):
    """Run records name the backend per mixer (kernels.backend.kernel_usage): every mixer must log
    the path it ran, so a record never hides which kernel computed a result."""
    from ssmrepro.kernels.backend import kernel_usage, reset_kernel_usage

    m = _build(name, [0])
    reset_kernel_usage()
    with torch.no_grad():
        m(torch.randn(1, 2, 5, D, dtype=torch.float64))
    usage = kernel_usage()
    assert usage and all(v.startswith("torch:") for v in usage.values()), usage
