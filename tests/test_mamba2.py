"""Mamba-2 / SSD mixers (chen2025's block, huang2025's three-conv single head) and koren2026's
multi-head linear Mamba: fast == plain-loop reference (float64, outputs and gradients), pack ==
members alone, causality, finite gradients, parameter counts, koren2026 Table 8 shapes."""

import pydantic
import pytest
import torch

from ssmrepro.kernels.ssd import ssd, ssd_ref
from ssmrepro.models import MODELS, build_model, count_params
from ssmrepro.models.layers import reset_members
from ssmrepro.models.mixers import build_mixer, parse_mixer
from ssmrepro.tasks import TaskInfo

F64 = torch.float64


def _mixer(cfg: dict, seeds: list[int], d: int = 8, chunk: int | None = 4) -> torch.nn.Module:
    m = build_mixer(cfg, len(seeds), d)
    reset_members(m, seeds)
    m.chunk = chunk  # small chunks: several chunks + padding at L = 11
    return m.double()


def _assert_fast_equals_ref(m: torch.nn.Module, x: torch.Tensor) -> None:
    params = [p for p in m.parameters() if p.requires_grad]
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [m(xs[0]), m.forward_ref(xs[1])]
    torch.testing.assert_close(ys[0], ys[1], rtol=1e-10, atol=1e-12)
    w = torch.randn_like(ys[0])
    grads = [torch.autograd.grad((y * w).sum(), [xi, *params]) for y, xi in zip(ys, xs)]
    for g0, g1 in zip(*grads):
        torch.testing.assert_close(g0, g1, rtol=1e-9, atol=1e-11)


# ------------------------------------------------------------------------------------------- SSD
def test_ssd_ref_and_ssd_equal_a_hand_written_sum():
    """y_t = Σ_{s≤t} exp(a_{s+1} + … + a_t) (C_t · B_s) x_s, written as two explicit loops."""
    g = torch.Generator().manual_seed(0)
    Bt, L, H, P, N = 2, 9, 3, 2, 4
    x = torch.randn(Bt, L, H, P, generator=g, dtype=F64)
    a = -torch.rand(Bt, L, H, generator=g, dtype=F64) * 2
    B = torch.randn(Bt, L, H, N, generator=g, dtype=F64)
    C = torch.randn(Bt, L, H, N, generator=g, dtype=F64)
    y = torch.zeros(Bt, L, H, P, dtype=F64)
    for t in range(L):
        for s in range(t + 1):
            w = torch.exp(a[:, s + 1 : t + 1].sum(1)) * (C[:, t] * B[:, s]).sum(-1)  # (Bt, H)
            y[:, t] += w[..., None] * x[:, s]
    torch.testing.assert_close(ssd_ref(x, a, B, C), y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ssd(x, a, B, C, chunk=4), y, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ Mamba2Mixer
M2 = {"name": "mamba2", "d_state": 4}
M2_VARIANTS = [
    M2,
    {**M2, "heads": 4, "ngroups": 2},
    {**M2, "headdim": 8, "ngroups": 2, "bias": True},
    {**M2, "conv_residual": True},
    {**M2, "gate_residual": True},
    {**M2, "conv_init": "all_ones", "d_conv": 2},
]


@pytest.mark.parametrize("cfg", M2_VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_mamba2_fast_equals_loop_reference(cfg):
    torch.manual_seed(0)
    m = _mixer(cfg, [1, 2])
    _assert_fast_equals_ref(m, torch.randn(2, 3, 11, 8, dtype=F64))


def test_mamba2_defaults_are_chen2025_and_mamba_ssm():
    m = build_mixer({"name": "mamba2"}, 1, 32)
    assert (m.N, m.Di, m.H, m.P, m.G) == (128, 64, 1, 64, 1)  # d_state 128, expand 2, one head
    assert m.conv.width == 4 and m.conv.bias is not None and m.in_proj.bias is None
    assert not (m.conv_residual or m.gate_residual) and m.conv.init == "default"
    reset_members(m, [0])
    A = -torch.exp(m.A_log)
    dt = torch.nn.functional.softplus(m.dt_bias)
    assert (A <= -1).all() and (A >= -16).all() and (dt >= 1e-3 - 1e-9).all() and (dt <= 0.1).all()
    assert (m.D == 1).all() and (m.norm_weight == 1).all()
    assert build_mixer({"name": "mamba2", "headdim": 16}, 1, 32).H == 4
    with pytest.raises(ValueError):
        build_mixer({"name": "mamba2", "heads": 3}, 1, 32)  # 64 does not split into 3 heads
    with pytest.raises(ValueError):
        build_mixer({"name": "mamba2", "conv_residual": True, "gate_residual": True}, 1, 32)


def test_mamba2_residual_variants_change_the_output():
    torch.manual_seed(1)
    x = torch.randn(1, 2, 7, 8, dtype=F64)
    ys = [_mixer({**M2, **v}, [5])(x) for v in ({}, {"conv_residual": True}, {"gate_residual": True})]
    assert not torch.allclose(ys[0], ys[1]) and not torch.allclose(ys[0], ys[2])


def test_mamba2_all_ones_conv_is_frozen_at_one():
    m = _mixer({**M2, "conv_init": "all_ones"}, [0, 1])
    assert (m.conv.weight == 1).all() and (m.conv.bias == 0).all()
    m(torch.randn(2, 2, 6, 8, dtype=F64)).sum().backward()
    assert m.conv.weight.grad is None and m.conv.bias.grad is None
    assert m.in_proj.weight.grad is not None


@pytest.mark.parametrize("cfg", [{**M2, "heads": 4, "ngroups": 2, "gate_residual": True},
                                 {"name": "mamba2_3conv", "d_state": 3, "expand": 2, "out_proj": True}])
def test_pack_equals_members_alone(cfg):
    torch.manual_seed(2)
    seeds = [4, 9, 6]
    x = torch.randn(3, 2, 10, 8, dtype=F64, requires_grad=True)
    pack = _mixer(cfg, seeds)
    y = pack(x)
    y.sin().sum().backward()
    for e, s in enumerate(seeds):
        alone = _mixer(cfg, [s])
        xe = x.detach()[e : e + 1].clone().requires_grad_(True)
        ye = alone(xe)
        torch.testing.assert_close(ye, y[e : e + 1].detach(), rtol=1e-12, atol=1e-12)
        ye.sin().sum().backward()
        torch.testing.assert_close(xe.grad, x.grad[e : e + 1], rtol=1e-10, atol=1e-12)
        for (n, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            torch.testing.assert_close(q.grad[0], p.grad[e], rtol=1e-10, atol=1e-12, msg=n)


@pytest.mark.parametrize("cfg", [M2, {**M2, "conv_residual": True},
                                 {"name": "mamba2_3conv", "d_state": 3}])
def test_causal(cfg):
    torch.manual_seed(3)
    m = _mixer(cfg, [0, 1])
    x = torch.randn(2, 2, 12, 8, dtype=F64)
    t0 = 5
    x2 = x.clone()
    x2[:, :, t0 + 1 :] += torch.randn_like(x2[:, :, t0 + 1 :])
    with torch.no_grad():
        for f in (m, m.forward_ref):
            y, y2 = f(x), f(x2)
            torch.testing.assert_close(y[:, :, : t0 + 1], y2[:, :, : t0 + 1], rtol=0, atol=1e-13)
            assert not torch.allclose(y[:, :, t0 + 1 :], y2[:, :, t0 + 1 :])


@pytest.mark.parametrize("cfg", [{**M2, "heads": 2, "A_min": 50.0, "A_max": 60.0, "dt_min": 0.5,
                                  "dt_max": 0.9},
                                 {"name": "mamba2_3conv", "d_state": 4, "A_min": 50.0, "A_max": 60.0}])
def test_gradients_finite_with_strong_decay(cfg):
    torch.manual_seed(4)
    m = build_mixer(cfg, 2, 8)
    reset_members(m, [0, 1])
    x = (3 * torch.randn(2, 4, 80, 8)).requires_grad_(True)
    m(x).pow(2).mean().backward()
    assert torch.isfinite(x.grad).all()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n


def test_mamba2_param_count_formula():
    def count(cfg: dict, d: int) -> int:
        return count_params(build_mixer(cfg, 2, d), 2)

    # in_proj d x (2 Di + 2 G N + H); conv (Di + 2 G N) x (W + 1); A_log, dt_bias, D: H each;
    # norm weight Di; out_proj Di x d
    def formula(d, N, expand=2, W=4, H=1, G=1, conv=True):
        Di = expand * d
        cd = Di + 2 * G * N
        return d * (Di + cd + H) + (cd * (W + 1) if conv else 0) + 3 * H + Di + Di * d

    assert count({"name": "mamba2"}, 32) == formula(32, 128) == 16035  # chen2025 phase diagram
    assert count({"name": "mamba2"}, 128) == formula(128, 128)  # chen2025 inverse matching
    assert count({"name": "mamba2", "d_state": 8, "heads": 4, "ngroups": 2}, 16) == formula(16, 8, H=4, G=2)
    assert count({"name": "mamba2", "conv_init": "all_ones"}, 32) == formula(32, 128, conv=False)


# --------------------------------------------------------------------------- Mamba2ThreeConv
T3 = {"name": "mamba2_3conv", "d_state": 3}


@pytest.mark.parametrize("cfg", [T3, {**T3, "gate": False, "d_conv": 2},
                                 {**T3, "expand": 2, "out_proj": True, "bias": True}])
def test_three_conv_fast_equals_loop_reference(cfg):
    torch.manual_seed(5)
    m = _mixer(cfg, [3, 7])
    _assert_fast_equals_ref(m, torch.randn(2, 3, 11, 8, dtype=F64))


def test_three_conv_equations_and_param_count():
    d, N, W = 8, 3, 4
    m = _mixer(T3, [0], d=d)
    assert m.lam_log.shape == (1,) and (-torch.exp(m.lam_log) < 0).all()  # scalar λ < 0
    # three independent convs (separate parameters), Δ from the raw x (a d-vector + bias)
    assert len({id(m.conv_u.weight), id(m.conv_B.weight), id(m.conv_C.weight)}) == 3
    assert m.dt_weight.shape == (1, d) and m.W_g is not None and m.out_proj is None
    # W_u d x d; conv_u d x (W+1); W_B, W_C d x N; conv_B, conv_C N x (W+1); Δ: d + 1; λ: 1; W_g d x d
    formula = d * d + d * (W + 1) + 2 * (d * N + N * (W + 1)) + d + 1 + 1 + d * d
    assert count_params(m, 1) == formula
    assert count_params(_mixer({**T3, "gate": False}, [0], d=d), 1) == formula - d * d
    with pytest.raises(ValueError):
        build_mixer({**T3, "expand": 2}, 1, d)  # needs an output projection


def test_three_conv_gate_off_matches_ssd_ref_on_its_own_inputs():
    """Without gate and with expand 1 the output is exactly SSD of eq. (14f) (independent check
    of the folding: one head per member)."""
    torch.manual_seed(6)
    m = _mixer({**T3, "gate": False}, [1, 2])
    x = torch.randn(2, 2, 9, 8, dtype=F64)
    F = torch.nn.functional
    u = F.silu(m.conv_u(m.W_u(x)))
    Bm, Cm = F.silu(m.conv_B(m.W_B(x))), F.silu(m.conv_C(m.W_C(x)))
    dlt = F.softplus(x @ m.dt_weight[:, None, :, None] + m.dt_bias[:, None, None, None])[..., 0]
    for e in range(2):
        lam = -torch.exp(m.lam_log[e])
        ye = ssd_ref((u[e] * dlt[e][..., None])[:, :, None], (lam * dlt[e])[..., None],
                     Bm[e][:, :, None], Cm[e][:, :, None])[:, :, 0]
        torch.testing.assert_close(m(x)[e], ye, rtol=1e-12, atol=1e-12)


def test_registered_and_configs_strict():
    for name in ("mamba2", "mamba2_3conv"):
        assert parse_mixer({"name": name}).name == name
        with pytest.raises(pydantic.ValidationError):
            parse_mixer({"name": name, "bogus": 1})


# ------------------------------------------------------ koren2026 multi-head linear Mamba
INFO = TaskInfo(vocab_size=32, n_classes=32, seq_len=10)
PATTERNS = ["MHA", "MQA", "MKA", "MVA"]


def _lm(pattern, M, seeds, D=6, N=3, **kw):
    cfg = MODELS["linear_mamba"].Config(d_model=D, d_state=N, heads=M, head_pattern=pattern, **kw)
    return build_model(cfg, INFO, len(seeds), seeds).double()


def _multihead_loop(layer, x):
    """Plain reference for one member (E index 0): Alg. 3 with the official shapes, loop over t."""
    W_in, W_conv = layer.in_proj.weight[0], layer.conv.weight[0]  # (D, Di), (Di, Wc)
    L, Wc = x.shape[2], W_conv.shape[1]
    M, P, N = layer.M, layer.P, layer.N
    xi = x[0] @ W_in  # (B, L, Di)
    xc = torch.stack([sum(W_conv[:, k] * xi[:, t - (Wc - 1) + k] for k in range(Wc)
                          if t - (Wc - 1) + k >= 0) for t in range(L)], dim=1)  # (B, L, Di)
    Wx, Wy = layer.W_contract[0], layer.W_heads[0]
    Bs, Cs = xc @ layer.B_proj.weight[0], xc @ layer.C_proj.weight[0]
    out = torch.zeros_like(xc)
    for h in range(M):
        if layer.pattern in ("MQA", "MKA"):
            xh = sum(Wx[:, j] * xc[..., j * P : (j + 1) * P] for j in range(M))  # (B, L, P)
        else:
            xh = xc @ Wx[:, h, :].T  # (B, L, P)
        Bh = Bs[..., h * N : (h + 1) * N] if layer.pattern in ("MHA", "MKA") else Bs
        Ch = Cs[..., h * N : (h + 1) * N] if layer.pattern in ("MHA", "MQA") else Cs
        state = torch.zeros(x.shape[1], P, N, dtype=x.dtype)  # (B, P, N), A = I
        for t in range(L):
            state = state + xh[:, t, :, None] * Bh[:, t, None, :]
            yt = (state * Ch[:, t, None, :]).sum(-1)  # (B, P)
            out[:, t] += yt @ Wy[:, :, h].T  # Σ_p W_y[d, p, h] y_p
    return (out @ layer.out_proj.weight[0])[None]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_multihead_fast_equals_loop_and_table8_shapes(pattern):
    torch.manual_seed(7)
    m = _lm(pattern, 3, [5])
    layer = m.blocks[0].mixer
    assert (layer.Di, layer.P) == (12, 4)
    x = torch.randn(1, 2, 9, 6, dtype=F64, requires_grad=True)
    y = layer(x)
    x2 = x.detach().clone().requires_grad_(True)
    ref = _multihead_loop(layer, x2)
    torch.testing.assert_close(y, ref, rtol=1e-10, atol=1e-12)
    params = list(layer.parameters())
    g1 = torch.autograd.grad(y.sum(), [x, *params])
    g2 = torch.autograd.grad(ref.sum(), [x2, *params])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    # koren2026 Table 8: x̂ (L, M|1, P), B (L, M|1, N), C (L, M|1, N)
    table8 = {"MHA": (3, 3, 3), "MQA": (1, 1, 3), "MKA": (1, 3, 1), "MVA": (3, 1, 1)}
    xh, Bh, Ch = layer.head_inputs(x.detach())
    assert (xh.shape[2], Bh.shape[2], Ch.shape[2]) == table8[pattern]
    assert xh.shape[-1] == 4 and Bh.shape[-1] == Ch.shape[-1] == 3


@pytest.mark.parametrize("pattern", PATTERNS)
def test_multihead_pack_equals_alone_causal_and_finite(pattern):
    torch.manual_seed(8)
    seeds = [2, 5, 11]
    m = _lm(pattern, 2, seeds, n_layers=2)
    ids = torch.randint(0, 32, (3, 2, 10))
    out = m(ids)
    out.pow(2).mean().backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    for e, s in enumerate(seeds):
        alone = _lm(pattern, 2, [s], n_layers=2)
        torch.testing.assert_close(alone(ids[e : e + 1]), out[e : e + 1].detach(), rtol=1e-12,
                                   atol=1e-12)
    ids2 = ids.clone()
    ids2[..., 6] = (ids2[..., 6] + 1) % 32
    with torch.no_grad():
        out2 = m(ids2)
    torch.testing.assert_close(out[..., :6, :].detach(), out2[..., :6, :], rtol=0, atol=1e-12)
    assert not torch.allclose(out[..., 6:, :].detach(), out2[..., 6:, :])


@pytest.mark.parametrize("pattern", PATTERNS)
def test_multihead_param_counts_fig8_setting(pattern):
    """koren2026 Fig. 8 setting: V 512, D 60 (D_in 120), N 4, M 3."""
    V, D, N, M, Wc = 512, 60, 4, 3, 2
    Di, P = 2 * D, 2 * D // M
    cfg = MODELS["linear_mamba"].Config(d_model=D, d_state=N, heads=M, head_pattern=pattern)
    m = build_model(cfg, TaskInfo(vocab_size=V, n_classes=V, seq_len=64), 1)
    hb = M if pattern in ("MHA", "MKA") else 1
    hc = M if pattern in ("MHA", "MQA") else 1
    wx = P * M if pattern in ("MQA", "MKA") else P * M * Di
    # E (tied) + W_in + conv + W_heads (Di, P, M) + S_B + S_C + W_contract + W_out
    formula = V * D + D * Di + Di * Wc + Di * P * M + (hb + hc) * Di * N + wx + Di * D
    assert count_params(m, 1) == formula
    # state size per layer: M heads x (P x N) = D_in x N for every pattern (Table 8 / Thm 5)
    assert M * P * N == Di * N


def test_mva_with_split_weights_equals_single_head_lemma2():
    """koren2026 Lemma 2 / eq. 127: MVA with x̂^h = the h-th slice of x̂ (W_x = split) and trivial
    aggregation (W_y = stack) is exactly the single-head model with the same in/conv/S_B/S_C/out."""
    torch.manual_seed(9)
    for M in (1, 3):
        mh = _lm("MVA", M, [4])
        single = build_model(MODELS["linear_mamba"].Config(d_model=6, d_state=3), INFO, 1, [4]).double()
        lh, l1 = mh.blocks[0].mixer, single.blocks[0].mixer
        Di, P = lh.Di, lh.P
        eye = torch.eye(Di, dtype=F64).reshape(M, P, Di)  # eye[h, p, d] = [d == h P + p]
        with torch.no_grad():
            lh.W_contract[0].copy_(eye.permute(1, 0, 2))  # (P, M, Di)
            lh.W_heads[0].copy_(eye.permute(2, 1, 0))  # (Di, P, M)
            for name in ("in_proj", "conv", "B_proj", "C_proj", "out_proj"):
                getattr(lh, name).weight.copy_(getattr(l1, name).weight)
            mh.embed.weight.copy_(single.embed.weight)
        ids = torch.randint(0, 32, (1, 2, 10))
        torch.testing.assert_close(mh(ids), single(ids), rtol=1e-12, atol=1e-12)


def test_linear_mamba_single_head_default_unchanged():
    cfg = MODELS["linear_mamba"].Config(d_model=8, d_state=4)
    assert cfg.heads == 1 and cfg.head_pattern is None
    m = build_model(cfg, INFO, 1, [0])
    assert type(m.blocks[0].mixer).__name__ == "LinearMambaMixer" and m.blocks[0].mixer.pattern is None
    assert not hasattr(m.blocks[0].mixer, "W_heads")  # the single-head layer (Alg. 1)
    with pytest.raises(ValueError):
        MODELS["linear_mamba"].Config(d_model=8, d_state=4, heads=2)  # heads need a pattern


def test_mva_heads_are_one_head_under_the_same_seed():
    """Lemma 2: MVA (shared B and C) with M heads is a single-head model; its W_contract
    (P, M, Di) and W_heads (Di, P, M) hold Di × Di numbers for every M, drawn in the same order,
    so with one seed M = 1, 2, 3 are the same function (koren2026-fig8's MVA cells coincide)."""
    x = torch.randint(0, 32, (1, 3, 10))
    outs = [_lm("MVA", M, [5])(x) for M in (1, 2, 3)]
    for o in outs[1:]:
        torch.testing.assert_close(o, outs[0], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(_lm("MHA", 2, [5])(x), outs[0])  # per-head B and C: not one head
