"""koren2026 models: the packed linear Mamba equals an independent plain implementation; the
full Mamba LM is causal and packs exactly; designed weights load into the packed model."""

import torch

from ssmrepro.models import MODELS, build_model, count_params
from ssmrepro.tasks import TaskInfo
from ssmrepro.theory.designed import designed_forward, designed_weights

INFO = TaskInfo(vocab_size=64, n_classes=64, seq_len=24)


def test_linear_mamba_with_designed_weights_equals_plain_forward():
    cfg = MODELS["linear_mamba"].Config(d_model=16, d_state=8, init="designed")
    m = build_model(cfg, INFO, 2, [3, 4]).double()
    x = torch.randint(0, 64, (2, 5, 24))
    out = m(x)
    for e, s in enumerate([3, 4]):
        w = {k: v.double() for k, v in designed_weights(64, 16, 8, s).items()}  # as loaded
        torch.testing.assert_close(out[e], designed_forward(x[e], w), rtol=1e-10, atol=1e-10)


def test_linear_mamba_counts_and_causality():
    cfg = MODELS["linear_mamba"].Config(d_model=32, d_state=16)
    info = TaskInfo(vocab_size=512, n_classes=512, seq_len=64)
    m = build_model(cfg, info, 1, [0])
    # E (V×D, tied) + W_in (D×2D) + conv (2D×2) + S_B, S_C (2D×N) + W_out (2D×D)
    assert count_params(m, 1) == 512 * 32 + 32 * 64 + 64 * 2 + 2 * 64 * 16 + 64 * 32
    x = torch.randint(0, 512, (1, 2, 64))
    x2 = x.clone()
    x2[..., 40] = (x2[..., 40] + 1) % 512
    torch.testing.assert_close(m(x)[..., :40, :], m(x2)[..., :40, :])


def test_mamba_lm_causal_and_pack_equals_alone():
    cfg = MODELS["mamba_lm"].Config(d_model=16, d_state=4, d_conv=4, expand=2)
    m = build_model(cfg, INFO, 3, [1, 2, 3]).double()
    x = torch.randint(0, 64, (3, 2, 24))
    y = m(x)
    x2 = x.clone()
    x2[..., 10] = (x2[..., 10] + 1) % 64
    y2 = m(x2)
    torch.testing.assert_close(y[..., :10, :], y2[..., :10, :], rtol=0, atol=1e-12)
    assert not torch.allclose(y[..., 10:, :], y2[..., 10:, :])
    alone = build_model(cfg, INFO, 1, [2]).double()
    torch.testing.assert_close(alone(x[1:2]), y[1:2], rtol=1e-12, atol=1e-12)
    # d_model 16: embedding 64*16 (tied) + 2 RMSNorm + in_proj 16x64 + conv 32x4+32
    # + x_proj 32x(1+8) + dt_proj 1x32+32 + A_log 32x4 + D 32 + out_proj 32x16
    assert count_params(m, 3) == 1024 + 32 + 1024 + 160 + 288 + 64 + 128 + 32 + 512


def test_mamba_lm_rescales_out_proj_like_mamba_ssm():
    from ssmrepro.models import MambaLMConfig, build_model
    from ssmrepro.tasks.base import TaskInfo

    info = TaskInfo(vocab_size=9, n_classes=9, seq_len=6)
    one = build_model(MambaLMConfig(d_model=8, d_state=4, n_layers=1), info, 1, seeds=[3])
    two = build_model(MambaLMConfig(d_model=8, d_state=4, n_layers=2), info, 1, seeds=[3])
    # same generator stream up to the first mixer's out_proj: layer 0 is the 1-layer draw / √2
    torch.testing.assert_close(two.blocks[0].mixer.out_proj.weight,
                               one.blocks[0].mixer.out_proj.weight / 2**0.5, rtol=0, atol=1e-7)


def _table10(**over):
    """koren2026 Table 10's Base (mamba_lm without norms, D skip off, PyTorch init) + ``over``."""
    base = dict(d_model=8, d_state=4, d_conv=4, expand=2, norm="none", skip=False, init="default")
    return MODELS["mamba_lm"].Config(**{**base, **over})


def test_mamba_lm_table10_variant_d_equals_a_plain_linear_circuit():
    """C / D (A = I, no gate, no SiLU, no norms, no D skip): h + out(Σ_{s≤t} (C_t·B_s) conv(h W_in)_s),
    tied read-out — written out by hand from the parameters."""
    info = TaskInfo(vocab_size=16, n_classes=16, seq_len=7)
    m = build_model(_table10(discretize=False, gate=False, conv_act=False, d_conv=2), info, 1, [5])
    m = m.double()
    p = {n: t.detach()[0] for n, t in m.named_parameters()}
    x = torch.randint(0, 16, (1, 3, 7))
    h = p["embed.weight"][x[0]]  # (B, L, d)
    u = h @ p["blocks.0.mixer.in_proj.weight"]  # (B, L, 2d)
    w, b = p["blocks.0.mixer.conv.weight"], p["blocks.0.mixer.conv.bias"]  # (2d, 2), (2d,)
    prev = torch.nn.functional.pad(u, (0, 0, 1, 0))[:, :-1]
    xc = prev * w[:, 0] + u * w[:, 1] + b  # causal width-2 conv, no activation
    bc = xc @ p["blocks.0.mixer.ssm.x_proj.weight"]  # (B, L, 2N): [B | C], no Δ columns
    Bt, Ct = bc[..., :4], bc[..., 4:]
    scores = torch.tril(Ct @ Bt.transpose(1, 2))  # (B, t, s), s ≤ t, A = I
    y = (scores @ xc) @ p["blocks.0.mixer.out_proj.weight"]
    logits = (h + y) @ p["embed.weight"].T
    torch.testing.assert_close(m(x)[0], logits, rtol=1e-10, atol=1e-10)
    assert not any("norm" in n or n.endswith(".D") or "A_log" in n or "dt_" in n
                   for n, _ in m.named_parameters())


def test_mamba_lm_table10_variants_parameter_counts_and_init():
    info = TaskInfo(vocab_size=128, n_classes=128, seq_len=64)
    counts = {}
    for name, over in {"Base": {}, "A": {"discretize": False},
                       "B": {"discretize": False, "gate": False},
                       "C": {"discretize": False, "gate": False, "conv_act": False},
                       "D": {"discretize": False, "gate": False, "conv_act": False, "d_conv": 2},
                       "E": {"discretize": False, "gate": False, "conv_act": False, "d_conv": 1}
                       }.items():
        counts[name] = count_params(build_model(_table10(d_model=64, d_state=16, **over), info, 1,
                                                [0]), 1)
    # embedding 128·64 (tied) + in_proj 64·(2·128) + conv 128·4 + 128 + x_proj 128·(4 + 2·16)
    # + dt_proj 4·128 + 128 + A_log 128·16 + out_proj 128·64 (no norms, no D)
    assert counts["Base"] == 8192 + 16384 + 640 + 4608 + 640 + 2048 + 8192
    assert counts["A"] == counts["Base"] - (128 * 4 + 640 + 2048)  # no Δ, no A
    assert counts["B"] == counts["A"] - 64 * 128  # no z branch
    assert counts["C"] == counts["B"]  # the SiLU has no parameters
    assert counts["D"] == counts["C"] - 2 * 128 and counts["E"] == counts["C"] - 3 * 128
    # init default: PyTorch's embedding N(0, 1); the mamba_lm default keeps mamba-ssm's N(0, 0.02)
    std = {s: float(build_model(MODELS["mamba_lm"].Config(d_model=64, d_state=16, init=s), info, 1,
                                [0]).embed.weight.detach().std()) for s in ("default", "mamba")}
    assert 0.9 < std["default"] < 1.1 and 0.015 < std["mamba"] < 0.025


def test_mamba_lm_table10_options_apply_to_mamba1_only():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="mixer mamba1 only"):
        MODELS["mamba_lm"].Config(mixer="mamba2_3conv", discretize=False)
    cfg = MODELS["mamba_lm"].Config()
    assert (cfg.norm, cfg.conv_act, cfg.discretize, cfg.skip, cfg.init) == (
        "rmsnorm", True, True, True, "mamba")


def test_chunked_linear_attention_equals_one_causal_matrix():
    """The fast path's chunks (c × c scores + the earlier chunks' states by a cumulative sum)
    equal one causal L × L score matrix, for every chunk size (padding included) and every
    broadcast of the head dim (Table 8's shared x̂ / B / C), in float64."""
    import pytest

    from ssmrepro.models.mixers.linear_mamba import chunked_linear_attention

    g = torch.Generator().manual_seed(0)
    L, P, N, M = 23, 5, 3, 4
    for hx, hb, hc in ((1, 1, 1), (M, M, M), (1, 1, M), (1, M, 1), (M, 1, 1)):
        xh = torch.randn(2, 3, hx, L, P, generator=g, dtype=torch.float64)
        Bh = torch.randn(2, 3, hb, L, N, generator=g, dtype=torch.float64)
        Ch = torch.randn(2, 3, hc, L, N, generator=g, dtype=torch.float64)
        mask = torch.ones(L, L, dtype=torch.bool).tril()
        want = torch.matmul(torch.matmul(Ch, Bh.transpose(-1, -2)).masked_fill(~mask, 0.0), xh)
        for c in (1, 4, 7, 23, 64):
            got = chunked_linear_attention(xh, Bh, Ch, c)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=f"{hx, hb, hc, c}")
    with pytest.raises(RuntimeError):  # mismatched lengths are an error, not a silent broadcast
        chunked_linear_attention(xh, Bh[..., :5, :], Ch, 4)


def test_linear_mamba_fast_path_equals_recurrence_past_one_chunk():
    """Sequences of several chunks (L = 150 > 64, not a multiple): the packed model's fast path
    equals the A = I recurrence (forward_ref) in value and gradient (input and every parameter),
    single head and every head pattern."""
    info = TaskInfo(vocab_size=200, n_classes=200, seq_len=150)
    for kw in ({}, {"heads": 2, "head_pattern": "MHA"}, {"heads": 3, "head_pattern": "MQA"},
               {"heads": 2, "head_pattern": "MKA"}, {"heads": 2, "head_pattern": "MVA"},
               {"n_layers": 2}):
        cfg = MODELS["linear_mamba"].Config(d_model=6, d_state=3, **kw)
        m = build_model(cfg, info, 2, [1, 2]).double()
        mixer = m.blocks[0].mixer
        inp = torch.randn(2, 2, 150, 6, dtype=torch.float64, requires_grad=True)
        fast, ref = mixer(inp), mixer.forward_ref(inp)
        torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10, msg=str(kw))
        wrt = [inp, *mixer.parameters()]
        gf = torch.autograd.grad(fast.square().sum(), wrt)
        gr = torch.autograd.grad(ref.square().sum(), wrt)
        for a, b in zip(gf, gr):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9, msg=str(kw))
