"""The selective-SSM family (models/mixers: delta_t, s4d_zoh, b2s6, mamba1 and the S6/S4D options):
fast == sequential reference (float64, outputs and gradients), pack == members alone, causality,
finite gradients, parameter counts in closed form, and the equations' structural claims."""

import math

import pydantic
import pytest
import torch
from support.legacy_models import MambaMixer

from ssmrepro.models.layers import reset_members
from ssmrepro.models.mixers import MIXERS, build_mixer, parse_mixer
from ssmrepro.models.mixers.b2s6 import B2S6Config, B2S6Core
from ssmrepro.models.mixers.delta_t import DeltaTConfig, DeltaTCore
from ssmrepro.models.mixers.linear_mamba import LinearMambaMixer, LinearMambaMixerConfig
from ssmrepro.models.mixers.mamba1 import Mamba1Config, Mamba1Mixer
from ssmrepro.models.mixers.s4d import S4DConfig, S4DCore
from ssmrepro.models.mixers.s4d_zoh import S4DZOH, S4DZOHConfig
from ssmrepro.models.mixers.s6 import S6Config, S6Core

D, N = 8, 3

# constructors from configs (state size N = d_state); width d = D for the cores, 4 for mamba1


def s6(E, d=D, **kw):
    return S6Core(E, d, S6Config(d_state=N, **kw))


def s4d(E, d=D, **kw):
    return S4DCore(E, d, S4DConfig(d_state=N, **kw))


def delta_t(E, d=D, **kw):
    return DeltaTCore(E, d, DeltaTConfig(d_state=N, **kw))


def zoh(E, d=D, **kw):
    return S4DZOH(E, d, S4DZOHConfig(d_state=N, **kw))


def b2s6(E, d=D, **kw):
    return B2S6Core(E, d, B2S6Config(d_state=N, **kw))


def mamba1(E, d=4, **kw):
    return Mamba1Mixer(E, d, Mamba1Config(**{"d_state": N, **kw}))


# (id, builder(E) -> module, sequence length); L > 32 exercises the chunked diag_scan path
CASES = [
    ("s6-complex-lin", lambda E: s6(E, dt_rank=2, complex_A=True, A_init="s4d_lin"), 9),
    ("s6-real-lin", lambda E: s6(E, dt_rank=2, A_init="s4d_lin"), 9),
    ("s6-nodiscretize", lambda E: s6(E, discretize=False, skip=False), 9),
    ("s4d-complex", lambda E: s4d(E, complex_A=True, A_init="s4d_lin", skip=True), 9),
    ("s4d-nodiscretize", lambda E: s4d(E, discretize=False), 9),
    ("delta_t-full", lambda E: delta_t(E), 40),
    ("delta_t-rank2-complex", lambda E: delta_t(E, dt_rank=2, complex_A=True, A_init="s4d_lin"), 40),
    ("s4d_zoh-fft", lambda E: zoh(E, learn_B=True), 40),
    ("s4d_zoh-scan", lambda E: zoh(E, impl="scan", A_init="s4d_real"), 40),
    ("b2s6-split", lambda E: b2s6(E, heads=2, impl="split"), 10),
    ("b2s6-direct", lambda E: b2s6(E, heads=4, skip=True), 36),
    ("b2s6-zoh", lambda E: b2s6(E, heads=2, discretization="zoh"), 10),
    ("b2s6-real", lambda E: b2s6(E, heads=2, complex_A=False, complex_B=False), 10),
    ("b2s6-realB-nobias-split", lambda E: b2s6(E, heads=8, complex_B=False, bias=False,
                                               impl="split"), 10),
    ("b2s6-real-split", lambda E: b2s6(E, heads=2, complex_A=False, complex_B=False,
                                       impl="split"), 10),
    ("mamba1-default", lambda E: mamba1(E), 9),
    ("mamba1-bare", lambda E: mamba1(E, conv=False, gate=False, conv_act=False), 9),
    ("mamba1-s4d-complex", lambda E: mamba1(E, d_conv=2, core="s4d", complex_A=True,
                                            A_init="s4d_lin"), 9),
    ("mamba1-delta_t", lambda E: mamba1(E, d_conv=3, core="delta_t", gate=False), 9),
    ("mamba1-b2s6", lambda E: mamba1(E, core="b2s6", blocks=2, complex_A=True, A_init="s4d_lin"), 9),
    ("mamba1-simplified", lambda E: mamba1(E, d_conv=1, discretize=False, skip=False,
                                           conv_act=False, gate=False, conv_bias=False), 9),
]
IDS = [c[0] for c in CASES]


def _width(m) -> int:
    return m.in_proj.din if isinstance(m, Mamba1Mixer) else m.d


def _build(make, seeds):
    m = make(len(seeds))
    reset_members(m, seeds)
    return m.double()


def _grads(m, x, ref):
    m.zero_grad()
    x = x.clone().requires_grad_(True)
    y = m(x, ref=ref)
    (y.sin() * torch.linspace(0.5, 1.5, y.shape[-1], dtype=y.dtype)).sum().backward()
    return y.detach(), x.grad, {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name,make,L", CASES, ids=IDS)
def test_fast_equals_reference(name, make, L):
    torch.manual_seed(0)
    m = _build(make, [4, 9])
    x = torch.randn(2, 2, L, _width(m), dtype=torch.float64)
    y, gx, gp = _grads(m, x, ref=False)
    yr, gxr, gpr = _grads(m, x, ref=True)
    torch.testing.assert_close(y, yr, rtol=1e-10, atol=1e-11)
    torch.testing.assert_close(gx, gxr, rtol=1e-9, atol=1e-10)
    assert gp.keys() == gpr.keys() == {n for n, _ in m.named_parameters()}
    for n in gp:
        torch.testing.assert_close(gp[n], gpr[n], rtol=1e-9, atol=1e-10, msg=n)


@pytest.mark.parametrize("name,make,L", CASES, ids=IDS)
def test_pack_equals_members_alone(name, make, L):
    torch.manual_seed(1)
    seeds = [7, 0, 13]
    pack = _build(make, seeds)
    x = torch.randn(3, 2, min(L, 12), _width(pack), dtype=torch.float64)
    y, gx, gp = _grads(pack, x, ref=False)
    for e, s in enumerate(seeds):
        alone = _build(make, [s])
        for (n, p), q in zip(pack.named_parameters(), alone.parameters()):
            assert torch.equal(p[e : e + 1], q), n  # same init
        ye, gxe, gpe = _grads(alone, x[e : e + 1], ref=False)
        torch.testing.assert_close(ye, y[e : e + 1], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gxe, gx[e : e + 1], rtol=1e-10, atol=1e-12)
        for n in gp:
            torch.testing.assert_close(gpe[n], gp[n][e : e + 1], rtol=1e-10, atol=1e-12, msg=n)


@pytest.mark.parametrize("name,make,L", CASES, ids=IDS)
def test_causal_and_finite_gradients(name, make, L):
    torch.manual_seed(2)
    m = _build(make, [3])
    x = torch.randn(1, 2, 12, _width(m), dtype=torch.float64)
    x2 = x.clone()
    x2[:, :, 6:] = torch.randn_like(x2[:, :, 6:])
    with torch.no_grad():
        y, y2 = m(x), m(x2)
    torch.testing.assert_close(y[:, :, :6], y2[:, :, :6], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(y[:, :, 6:], y2[:, :, 6:])
    m = m.float()
    xf = 3 * torch.randn(1, 3, 33, _width(m))
    m(xf).pow(2).mean().backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n


# ---- parameter counts (closed forms) ----


def _n(m) -> int:
    return sum(p.numel() for p in m.parameters()) // m_E(m)


def m_E(m) -> int:
    return next(m.parameters()).shape[0]


def s6_count(d, N, R, skip=True, complex_A=False, discretize=True):
    c = 2 if complex_A else 1
    if not discretize:
        return d * 2 * N + skip * d
    return d * (R + 2 * c * N) + R * d + d + c * d * N + skip * d


def s4d_count(d, N, skip=False, complex_A=False, discretize=True):
    c = 2 if complex_A else 1
    return discretize * d * N + c * N + c * d * N + skip * d + (complex_A * d * N)


def delta_t_count(d, N, R=None, skip=True, complex_A=False):
    c = 2 if complex_A else 1
    R_ = N if R is None else R
    return d * (R_ + 2 * c * N) + (0 if R is None else R * N) + N + c * d * N + skip * d


def zoh_count(d, N, learn_B=False, skip=True):
    return d + 2 * d * N + 2 * d * N + learn_B * 2 * d * N + skip * d  # log Δ, A, C, B, D


def b2s6_count(d, N, complex_A=True, complex_B=True, bias=True, skip=False):
    cA, cB = (2 if complex_A else 1), (2 if complex_B else 1)
    return cA * N + d * N * cB * (1 + bias) + d * N + 2 * d + skip * d  # A, B_w, B_bias, C, w, b, D


def mamba1_count(d, N, expand=2, d_conv=4, conv=True, conv_bias=True, gate=True, bias=False,
                  core_count=None):
    Di = expand * d
    return ((1 + gate) * Di * d + bias * (1 + gate) * Di + conv * (Di * d_conv + conv_bias * Di)
            + core_count(Di) + Di * d + bias * d)


@pytest.mark.parametrize("kw", [{}, {"skip": False}, {"complex_A": True}, {"discretize": False}])
def test_core_parameter_counts(kw):
    d, n, R = 12, 5, 3
    rank = {"dt_rank": R} if kw.get("discretize", True) else {}  # no Δ without discretisation
    assert _n(S6Core(1, d, S6Config(d_state=n, **rank, **kw))) == s6_count(d, n, R, **kw)
    assert _n(S4DCore(2, d, S4DConfig(d_state=n, **kw))) == s4d_count(d, n, **kw)
    if kw.get("discretize", True):
        assert _n(DeltaTCore(1, d, DeltaTConfig(d_state=n, **kw))) == delta_t_count(d, n, **kw)
        assert _n(DeltaTCore(1, d, DeltaTConfig(d_state=n, dt_rank=R, **kw))) == delta_t_count(
            d, n, R, **kw)


@pytest.mark.parametrize("kw", [{}, {"learn_B": True}, {"skip": False}])
def test_s4d_zoh_parameter_count(kw):
    assert _n(S4DZOH(2, 16, S4DZOHConfig(d_state=4, **kw))) == zoh_count(16, 4, **kw)
    # S4D layer of the LRA baselines at H = 128, d_state 64 (32 complex modes): A, C (2·H·32 each),
    # log Δ, D -> 16640 per layer
    assert _n(S4DZOH(1, 128, S4DZOHConfig(d_state=32))) == 2 * 128 * 32 * 2 + 2 * 128 == 16640


@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"complex_B": False},
                                {"complex_A": False, "complex_B": False}, {"skip": True}])
@pytest.mark.parametrize("h", [1, 4, 16])
def test_b2s6_parameter_count(kw, h):
    # independent of h
    assert _n(B2S6Core(1, 16, B2S6Config(d_state=6, heads=h, **kw))) == b2s6_count(16, 6, **kw)


def test_mamba1_parameter_counts():
    d, n = 6, 4
    R = math.ceil(d / 16)

    def m1(**kw):
        return Mamba1Mixer(1, d, Mamba1Config(d_state=n, **kw))

    assert _n(m1()) == mamba1_count(d, n, core_count=lambda Di: s6_count(Di, n, R))
    m = m1(conv=False, gate=False, bias=True, core="s4d", complex_A=True)
    assert _n(m) == mamba1_count(d, n, conv=False, gate=False, bias=True,
                                  core_count=lambda Di: s4d_count(Di, n, skip=True, complex_A=True))
    m = m1(d_conv=2, conv_bias=False, core="delta_t")
    assert _n(m) == mamba1_count(d, n, d_conv=2, conv_bias=False,
                                  core_count=lambda Di: delta_t_count(Di, n))
    # the old MambaMixer (the registered mamba1 before the merge) has the default's count
    assert _n(MambaMixer(1, d, n)) == _n(m1())


# ---- equivalences with the existing models ----


def test_mamba1_defaults_equal_the_old_mamba_mixer():
    """Default options: the same parameters (same names, same init) and the same outputs as the
    old MambaMixer (frozen in tests/support/legacy_models.py); one Mamba-1 mixer, no mamba1x."""
    seeds = [2, 5]
    a, b = Mamba1Mixer(2, 8, Mamba1Config(d_state=4)), MambaMixer(2, 8, 4)
    reset_members(a, seeds)
    from support.legacy_models import PackedModule as OldPacked

    for e, s in enumerate(seeds):  # the old module tree resets through its own base class
        g = torch.Generator().manual_seed(s)
        for m in b.modules():
            if isinstance(m, OldPacked):
                m.reset_member(e, g)
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    x = torch.randn(2, 3, 10, 8, dtype=torch.float64)
    torch.testing.assert_close(a.double()(x), b.double()(x), rtol=1e-12, atol=1e-12)
    assert "mamba1x" not in MIXERS


def test_mamba1_simplified_equals_koren_linear_mamba_layer():
    """discretize=False, no gate/act/skip = koren2026's simplified layer (A = I, D = 0)."""
    E, d, n = 2, 6, 3
    lin = LinearMambaMixer(E, d, LinearMambaMixerConfig(d_state=n, d_conv=2, expand=2))
    reset_members(lin, [0, 1])
    m = mamba1(E, d=d, d_state=n, d_conv=2, conv_bias=False, gate=False, conv_act=False,
               discretize=False, skip=False)
    with torch.no_grad():
        m.in_proj.weight.copy_(lin.in_proj.weight)
        m.conv.weight.copy_(lin.conv.weight)
        m.ssm.x_proj.weight.copy_(torch.cat([lin.B_proj.weight, lin.C_proj.weight], -1))
        m.out_proj.weight.copy_(lin.out_proj.weight)
    lin, m = lin.double(), m.double()
    x = torch.randn(E, 2, 11, d, dtype=torch.float64)
    torch.testing.assert_close(m(x), lin(x), rtol=1e-12, atol=1e-12)


# ---- structure of the equations ----


def test_delta_t_decay_varies_along_state_not_channels():
    """Mamba-Δᵀ: exp(Λ ⊙ (1_d ⊗ Δ_t)), Δ_t ∈ R^N; S6: exp(Λ ⊙ (Δ_t ⊗ 1_N)), Δ_t ∈ R^d."""
    torch.manual_seed(3)
    x = torch.randn(1, 2, 5, D, dtype=torch.float64)
    dt = _build(lambda E: delta_t(E), [0])
    a = dt.decay(x)  # (1, 2, 5, D, N); Λ[:, n] = -(n+1) is the same for every channel
    assert torch.allclose(a, a[..., :1, :].expand_as(a))
    delta = -torch.log(a) / torch.arange(1, N + 1, dtype=torch.float64)
    assert delta.std(-1).min() > 0  # Δ differs along n
    core = _build(lambda E: s6(E), [0])
    a6 = core.decay(x)
    d6 = -torch.log(a6) / torch.arange(1, N + 1, dtype=torch.float64)
    assert torch.allclose(d6, d6[..., :1].expand_as(d6))  # S6: Δ constant along n
    # no Δ on the input term: with Λ = 0 the state is the running sum of x̂_t ⊗ B_t
    with torch.no_grad():
        dt.A_log.fill_(-60.0)  # Λ ≈ -1e-26
        dt.D.zero_()
        _, _, Bt, Ct = dt.params(x)
        h = torch.cumsum(x[..., None] * Bt[:, :, :, None, :], dim=2)
        torch.testing.assert_close(dt(x), (h * Ct[:, :, :, None, :]).sum(-1), rtol=1e-12, atol=1e-12)


def test_s4d_zoh_init_and_kernel():
    m = _build(lambda E: S4DZOH(E, 16, S4DZOHConfig(d_state=4, dt_min=1e-3, dt_max=1e-1)), [1])
    dt, A, B_over_dt, C = m.params()
    assert ((dt >= 1e-3) & (dt <= 1e-1)).all() and dt.max() / dt.min() > 5
    torch.testing.assert_close(A[0, 3], torch.tensor([-0.5 + 0j, -0.5 + 1j * math.pi,
                                                      -0.5 + 2j * math.pi, -0.5 + 3j * math.pi],
                                                     dtype=A.dtype))
    # K_k = 2 Re Σ_n C_n B̄_n Ā_n^k with B̄ = (ΔA)^{-1}(e^{ΔA} - 1) ΔB, B = 1: impulse response
    L = 6
    K = m.kernel(L)
    c, k = 5, 3
    dA = dt[0, c] * A[0, c]
    expect = 2 * (C[0, c] * (torch.exp(dA) - 1) / dA * dt[0, c] * torch.exp(dA) ** k).sum().real
    torch.testing.assert_close(K[0, c, k], expect)
    x = torch.zeros(1, 1, L, 16, dtype=torch.float64)
    x[0, 0, 0] = 1.0
    with torch.no_grad():
        y = m(x) - m.D * x
    torch.testing.assert_close(y[0, 0].T, K[0], rtol=1e-10, atol=1e-12)


def test_b2s6_blocks_are_independent_and_bias_is_per_channel():
    """Block j's outputs depend only on block j's inputs; with B_bias the p channels of one block
    get different input vectors B_k^{(i)}."""
    torch.manual_seed(4)
    m = _build(lambda E: b2s6(E, heads=4), [2])  # p = 2
    x = torch.randn(1, 2, 7, D, dtype=torch.float64)
    x2 = x.clone()
    x2[..., 2:4] += torch.randn_like(x2[..., 2:4])  # change block 1 only
    with torch.no_grad():
        y, y2 = m(x), m(x2)
        torch.testing.assert_close(y[..., :2], y2[..., :2], rtol=0, atol=0)
        torch.testing.assert_close(y[..., 4:], y2[..., 4:], rtol=0, atol=0)
        assert not torch.allclose(y[..., 2:4], y2[..., 2:4])
        # the bias term: with zero input weights, B_k^{(i)} = B_bias^{(i)}
        m.B_weight.zero_()
        m.B_bias.normal_()
        y3 = m(x)
        m.B_bias.zero_()
        assert m(x).abs().max() == 0 and y3.abs().max() > 0
    # A is one vector shared by every block and channel
    assert m.A_log.shape == (1, N) and m.A_im.shape == (1, N)


# ---- learning-rate group tags ----


@pytest.mark.parametrize("make,expect", [
    (lambda: s6(1, dt_rank=2), {"dt_weight", "dt_bias", "x_proj.weight"}),
    (lambda: delta_t(1), {"dt_bias", "x_proj.weight"}),
    (lambda: delta_t(1, dt_rank=2), {"dt_weight", "dt_bias", "x_proj.weight"}),
    (lambda: zoh(1), {"log_dt"}),
    (lambda: b2s6(1, heads=2), {"w", "b"}),
    (lambda: _mamba2(bias=True), {"dt_bias", "in_proj.weight", "in_proj.bias"}),
    (lambda: _mamba2_3conv(), {"dt_weight", "dt_bias"}),
])
def test_delta_parameters_are_tagged(make, expect):
    """Every Δ parameter in group "delta", every Λ one in "A" (Mamba-2's were in none: a
    `train.lr_scale` on a Mamba-2 model changed nothing; it is refused where no parameter is)."""
    m = make()
    tagged = {n for n, p in m.named_parameters() if getattr(p, "_lr_group", None) == "delta"}
    assert tagged == expect
    A = {n for n, p in m.named_parameters() if getattr(p, "_lr_group", None) == "A"}
    assert A and all(n.startswith(("A_", "lam_")) for n in A)
    if "x_proj.weight" in expect:  # only the Δ columns of the shared projection
        R = m.R
        assert m.x_proj.weight._lr_group_cols == (0, R)
    if "in_proj.weight" in expect:  # Mamba-2: the last H columns of (z, xBC, dt)
        dt = (m.in_proj.weight.shape[-1] - m.H, m.in_proj.weight.shape[-1])
        assert m.in_proj.weight._lr_group_cols == m.in_proj.bias._lr_group_cols == dt


def _mamba2(**kw):
    from ssmrepro.models.mixers.mamba2 import Mamba2Config, Mamba2Mixer

    return Mamba2Mixer(1, D, Mamba2Config(d_state=3, headdim=4, **kw))


def _mamba2_3conv(**kw):
    from ssmrepro.models.mixers.mamba2_3conv import Mamba2ThreeConv, Mamba2ThreeConvConfig

    return Mamba2ThreeConv(1, D, Mamba2ThreeConvConfig(d_state=3, **kw))


# ---- registry ----


def test_registry_entries_build_and_validate():
    for name in ("mamba1", "delta_t", "s4d_zoh", "b2s6"):
        assert name in MIXERS
        m = build_mixer({"name": name, "d_state": 4}, 2, 16)
        reset_members(m, [0, 1])
        assert m(torch.randn(2, 1, 5, 16)).shape == (2, 1, 5, 16)
    m = build_mixer({"name": "mamba1", "core": "delta_t", "dt_rank": 2, "d_state": 4}, 1, 16)
    assert isinstance(m.ssm, DeltaTCore) and m.ssm.R == 2
    bad = [
        {"name": "mamba1", "discretize": False, "core": "delta_t"},
        {"name": "mamba1", "discretize": False, "complex_A": True},
        {"name": "mamba1", "dt_rank": "full"},
        {"name": "mamba1", "d_conv": 0},
        {"name": "b2s6", "discretization": "zoh", "impl": "split"},
        {"name": "s4d_zoh", "d_state": 4, "extra": 1},
    ]
    for spec in bad:
        with pytest.raises(pydantic.ValidationError):
            parse_mixer(spec)
    with pytest.raises(ValueError, match="divisible"):
        build_mixer({"name": "b2s6", "heads": 3}, 1, 16)


def test_s4d_A_scale_scales_the_initial_decay_rates_only():
    """A_scale multiplies Λ's init (Δ = 1 is fixed, so it sets the initial decay like S6's Δ);
    1.0 is the S4D-real init unchanged, and the scaled core still matches its reference."""
    from ssmrepro.models.mixers.common import make_A

    base, slow = s4d(2), s4d(2, A_scale=0.01)
    reset_members(base, seeds=[0, 1])
    reset_members(slow, seeds=[0, 1])
    A0, A1 = make_A(base.A_log, None), make_A(slow.A_log, None)
    assert torch.allclose(A0[0, 0], -torch.arange(1.0, N + 1))
    assert torch.allclose(A1, 0.01 * A0) and torch.equal(slow.C, base.C)
    x = torch.randn(2, 3, 6, D, dtype=torch.float64)
    slow = slow.double()
    assert torch.allclose(slow(x), slow.forward_ref(x), atol=1e-10)
    with pytest.raises(pydantic.ValidationError):
        S4DConfig(d_state=N, A_scale=0.0)
