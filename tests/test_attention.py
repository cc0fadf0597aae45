"""NeoX attention (cooper2026) and chen2025's conv Transformer: fast path vs loop reference."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.models.blocks import NeoXBlock
from ssmrepro.models.layers import reset_members
from ssmrepro.models.mixers import build_mixer, parse_mixer
from ssmrepro.models.mixers.neox_attn import (
    NeoXAttention,
    NeoXAttnConfig,
    apply_rope,
    neox_attention_ref,
    rope_ref,
    window_mask,
)


def _neox(E, d, **kw) -> NeoXAttention:
    return NeoXAttention(E, d, NeoXAttnConfig(**kw))


def _attn(E=2, d=8, seeds=None, **kw) -> NeoXAttention:
    m = _neox(E, d, **kw).double()
    reset_members(m, seeds or list(range(E)))
    return m


def test_rope_matches_rotation_reference_and_keeps_norms():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 10, dtype=torch.float64)
    for r in (0, 1, 5, 10):
        y = apply_rope(x, r, 10000.0)
        torch.testing.assert_close(y, rope_ref(x, r, 10000.0))
        torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation
        rr = r - r % 2
        torch.testing.assert_close(y[..., rr:], x[..., rr:])  # unrotated channels pass
    # position 0 is not rotated; position 1 rotates pair k by base^(-2k/r)
    y = apply_rope(x, 4, 100.0)
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])
    th = 100.0 ** (-2 * 1 / 4)
    torch.testing.assert_close(
        y[..., 1, 1], x[..., 1, 1] * math.cos(th) - x[..., 1, 3] * math.sin(th))


def test_rope_scores_depend_on_relative_position_only():
    torch.manual_seed(1)
    q, k = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    L = 9
    Q = apply_rope(q.expand(L, 6).clone(), 6, 10000.0)  # same vector at every position
    K = apply_rope(k.expand(L, 6).clone(), 6, 10000.0)
    S = Q @ K.T  # (L, L)
    for off in range(-3, 4):
        diag = torch.diagonal(S, off)
        torch.testing.assert_close(diag, diag[0].expand_as(diag))


def test_window_mask_semantics():
    m = window_mask(6, 3)
    for i in range(6):
        for j in range(6):
            assert bool(m[i, j]) == (0 <= i - j < 3)
    assert torch.equal(window_mask(5, None), torch.ones(5, 5, dtype=torch.bool).tril())


CASES = [
    dict(heads=1),
    dict(heads=2, window=3),
    dict(heads=2, split_heads=False, window=4),
    dict(heads=1, rotary_pct=1.0, window=1),
    dict(heads=2, conv=3, conv_on="qkv", window=5),
    dict(heads=1, conv=2, conv_on="input"),
]


@pytest.mark.parametrize("kw", CASES, ids=[str(c) for c in CASES])
def test_neox_attention_fast_equals_loop_reference(kw):
    d = 12 if kw.get("heads", 1) == 1 else 8  # d = 12, one head: 3 rotary dims (odd)
    m = _attn(d=d, **kw)
    x = torch.randn(2, 3, 9, d, dtype=torch.float64, requires_grad=True)
    y = m(x)
    y_ref = neox_attention_ref(m, x)
    torch.testing.assert_close(y, y_ref)
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, [x, *m.parameters()], g)
    grads_ref = torch.autograd.grad(y_ref, [x, *m.parameters()], g)
    for a, b in zip(grads, grads_ref):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("kw", [dict(heads=2, window=None), dict(heads=1, window=3, conv=4)])
def test_neox_attention_causal_and_windowed(kw):
    m = _attn(d=8, **kw)
    x = torch.randn(2, 2, 12, 8, dtype=torch.float64)
    y = m(x)
    t0 = 6
    x2 = x.clone()
    x2[:, :, t0 + 1 :] = torch.randn_like(x2[:, :, t0 + 1 :])
    y2 = m(x2)
    torch.testing.assert_close(y2[:, :, : t0 + 1], y[:, :, : t0 + 1])
    assert not torch.allclose(y2[:, :, t0 + 1 :], y[:, :, t0 + 1 :])
    w = kw["window"]
    if w is not None:
        # a query at i only sees keys i-w+1..i (plus conv reach, conv-1 more steps back)
        reach = w - 1 + max(kw.get("conv", 0) - 1, 0)
        i = 11
        x3 = x.clone()
        x3[:, :, : i - reach] += 5.0
        torch.testing.assert_close(m(x3)[:, :, i], y[:, :, i])
        x4 = x.clone()
        x4[:, :, i - reach] += 5.0
        assert not torch.allclose(m(x4)[:, :, i], y[:, :, i])


def test_neox_attention_pack_equals_members_alone():
    seeds = [3, 7, 11]
    kw = dict(heads=2, window=4, conv=2, split_heads=False)
    pack = _attn(E=3, d=8, seeds=seeds, **kw)
    x = torch.randn(3, 2, 7, 8, dtype=torch.float64)
    y = pack(x)
    for e, s in enumerate(seeds):
        alone = _attn(E=1, d=8, seeds=[s], **kw)
        for (n, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            torch.testing.assert_close(p[e], q[0], msg=n)
        torch.testing.assert_close(y[e], alone(x[e : e + 1])[0])


def test_neox_parameter_shapes_and_block_count():
    d, H = 8, 2
    split = _neox(1, d, heads=H)
    assert split.qkv.weight.shape == (1, d, 3 * d) and split.dense.weight.shape == (1, d, d)
    full = _neox(1, d, heads=H, split_heads=False)  # fork: every head uses the full d
    assert full.qkv.weight.shape == (1, d, 3 * d * H) and full.dense.weight.shape == (1, d, d)
    blk = NeoXBlock(1, d, _neox(1, d, heads=1), expand=2)
    n = sum(p.numel() for p in blk.parameters())
    # 2 LayerNorms + qkv (with bias) + dense + MLP d->2d->d (with biases)
    assert n == 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (2 * d * d + 2 * d) + (2 * d * d + d)


def test_neox_block_is_parallel_residual():
    torch.manual_seed(0)
    blk = NeoXBlock(1, 8, _neox(1, 8, heads=2, window=3)).double()
    reset_members(blk, [0])
    with torch.no_grad():
        for p in blk.parameters():
            p.add_(0.1 * torch.randn_like(p))  # non-trivial norms
    x = torch.randn(1, 2, 6, 8, dtype=torch.float64)
    expect = x + blk.attn(blk.norm1(x)) + blk.mlp(blk.norm2(x))
    torch.testing.assert_close(blk(x), expect)
    seq = NeoXBlock(1, 8, blk.attn, parallel=False).double()
    seq.load_state_dict(blk.state_dict())
    h = x + blk.attn(blk.norm1(x))
    torch.testing.assert_close(seq(x), h + blk.mlp(blk.norm2(h)))


def test_neox_attn_registered_as_mixer():
    cfg = parse_mixer({"name": "neox_attn", "heads": 2, "window": 5, "conv": 4})
    m = build_mixer(cfg, 2, 8)
    assert isinstance(m, NeoXAttention) and m.window == 5 and m.conv is not None
    with pytest.raises(ValidationError):
        parse_mixer({"name": "neox_attn", "windw": 5})
    with pytest.raises(ValidationError):
        parse_mixer({"name": "neox_attn", "window": 0})


def test_plain_attention_with_separate_qk_and_v_widths_equals_explicit_softmax():
    """chen2025's inverse-matching Transformer shape (q/k width ≠ v width ≠ d), per head, against
    softmax(q kᵀ / √dk + causal mask) v written out with a loop over queries."""
    from ssmrepro.models.layers import reset_members
    from ssmrepro.models.mixers.attention import AttentionConfig, PackedAttention

    E, B, L, d, H, qk, v = 2, 2, 7, 6, 2, 8, 12
    m = PackedAttention(E, d, AttentionConfig(heads=H, qk_dim=qk, v_dim=v))
    reset_members(m, [1, 2])
    m = m.double()
    x = torch.randn(E, B, L, d, dtype=torch.float64)
    y = m(x)
    W, b = m.qkv.weight, m.qkv.bias
    proj = torch.einsum("ebld,edk->eblk", x, W) + b[:, None, None]
    q, k, vv = proj.split([qk, qk, v], -1)
    outs = torch.zeros(E, B, L, v, dtype=torch.float64)
    for h in range(H):
        qs, ks = slice(h * qk // H, (h + 1) * qk // H), slice(h * v // H, (h + 1) * v // H)
        for t in range(L):
            s = torch.einsum("ebk,ebsk->ebs", q[:, :, t, qs], k[:, :, : t + 1, qs]) / (qk // H) ** 0.5
            outs[:, :, t, ks] = torch.einsum("ebs,ebsv->ebv", s.softmax(-1), vv[:, :, : t + 1, ks])
    ref = torch.einsum("eblv,evd->ebld", outs, m.out.weight) + m.out.bias[:, None, None]
    torch.testing.assert_close(y, ref, rtol=1e-10, atol=1e-10)
    n = sum(p.numel() for p in m.parameters()) // E
    assert n == d * (2 * qk + v) + (2 * qk + v) + v * d + d
