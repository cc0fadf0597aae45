"""The model contract (models/base.py) on SeqLM: continuous inputs (linear encoder), sequence-level
targets (mean_pool over the mask), two-input tasks (dual_pool: MLP over [u, v, u*v, u-v]),
regression (mse: n_classes real outputs), clear errors for configs that cannot serve a task, the
mixer_inputs analysis hook and the planner's memory estimate."""

from __future__ import annotations

import pytest
import torch

from ssmrepro.analysis import layer_decay
from ssmrepro.models import SeqLMConfig, SequenceModel, activation_floats, build_model, count_params
from ssmrepro.models.layers import PackedLinear
from ssmrepro.tasks.base import TaskInfo

F64 = torch.float64


def _cfg(**kw) -> SeqLMConfig:
    blocks = {"SSM": {"mixer": {"name": "mamba1", "d_state": 4}},
              "TF": {"kind": "neox", "heads": 2, "window": 4}}
    return SeqLMConfig(**{"d_model": 8, "layers": "SSM-TF", "blocks": blocks, **kw})


def _build(cfg, info, seeds=(0, 1)):
    return build_model(cfg, info, len(seeds), list(seeds)).double()


def test_continuous_inputs_go_through_a_packed_linear_encoder():
    info = TaskInfo(vocab_size=0, n_classes=3, seq_len=12, target="sequence", input_dim=5)
    seeds = [4, 9]
    m = _build(_cfg(head="mean_pool"), info, seeds)
    assert isinstance(m, SequenceModel) and isinstance(m.embed, PackedLinear)
    assert m.embed.weight.shape == (2, 5, 8)
    x = torch.randn(2, 3, 12, 5, dtype=F64)
    y = m(x)
    assert y.shape == (2, 3, 3)
    for e, s in enumerate(seeds):  # pack == each member alone
        torch.testing.assert_close(_build(_cfg(head="mean_pool"), info, [s])(x[e : e + 1]), y[e : e + 1])
    h = m.features(x)  # causal features
    x2 = x.clone()
    x2[:, :, 7:] += 1.0
    torch.testing.assert_close(m.features(x2)[:, :, :7], h[:, :, :7])
    y.square().sum().backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    idx = _build(_cfg(head="mean_pool", pos="index"), info)  # index PE: encoder d_model - 1 wide
    assert idx.embed.weight.shape == (2, 5, 7)
    torch.testing.assert_close(idx.embed_tokens(x)[..., -1], torch.arange(1, 13, dtype=F64).expand(2, 3, 12))
    with pytest.raises(ValueError, match="continuous inputs must be"):
        m(torch.randint(0, 5, (2, 3, 12)))


def test_mean_pool_averages_over_the_mask_and_ignores_padding():
    info = TaskInfo(vocab_size=10, n_classes=4, seq_len=12, target="sequence")
    m = _build(_cfg(head="mean_pool"), info)
    ids = torch.randint(0, 10, (2, 3, 12))
    mask = torch.ones(2, 3, 12, dtype=torch.bool)
    mask[:, 1, 8:] = False  # sequence 1 is padded after 8 tokens
    h = m.features(ids)
    y = m.readout(h, mask)
    torch.testing.assert_close(y[:, 1], m.head(h[:, 1, :8].mean(1)))
    torch.testing.assert_close(y[:, 0], m.head(h[:, 0].mean(1)))
    ids2 = ids.clone()
    ids2[:, 1, 8:] = (ids2[:, 1, 8:] + 3) % 10  # change the padding only
    torch.testing.assert_close(m(ids2, mask)[:, 1], y[:, 1])


@pytest.mark.parametrize("head_bias", [True, False])
def test_dual_pool_is_the_two_tower_classifier(head_bias):
    info = TaskInfo(vocab_size=10, n_classes=2, seq_len=12, target="sequence", dual=True)
    cfg = _cfg(head="dual_pool", head_hidden=6, head_bias=head_bias)
    m = _build(cfg, info)
    assert (m.head.fc2.bias is not None) == head_bias
    x, x2 = torch.randint(0, 10, (2, 3, 12)), torch.randint(0, 10, (2, 3, 12))
    mask, mask2 = torch.ones(2, 3, 12, dtype=torch.bool), torch.ones(2, 3, 12, dtype=torch.bool)
    mask2[:, :, 9:] = False
    y = m(x, mask, x2, mask2)
    assert y.shape == (2, 3, 2)
    u, v = m.features(x).mean(2), m.features(x2)[:, :, :9].mean(2)
    z = torch.cat([u, v, u * v, u - v], -1)  # (E, B, 4d)
    hid = torch.relu(torch.einsum("ebi,eio->ebo", z, m.head.fc1.weight) + m.head.fc1.bias[:, None])
    ref = torch.einsum("ebi,eio->ebo", hid, m.head.fc2.weight)
    if head_bias:
        ref = ref + m.head.fc2.bias[:, None]
    torch.testing.assert_close(y, ref)
    # both towers share the backbone: swapping the documents swaps u and v only
    assert not torch.allclose(m(x2, mask2, x, mask), y)
    with pytest.raises(ValueError, match="h2"):
        m.readout(m.features(x), mask)
    # four head params (fc1, fc2 weights and biases) on top of the single-input model
    single = _build(_cfg(head="mean_pool"), TaskInfo(10, 2, 12, target="sequence"))
    assert count_params(m, 2) - count_params(single, 2) == (
        4 * 8 * 6 + 6 + 6 * 2 + 2 * head_bias) - (8 * 2 + 2)


def test_mse_tasks_get_n_classes_real_outputs():
    info = TaskInfo(vocab_size=10, n_classes=2, seq_len=12, loss="mse")
    m = _build(_cfg(), info)
    y = m(torch.randint(0, 10, (2, 3, 12)))
    assert y.shape == (2, 3, 12, 2) and y.dtype == F64
    seq = _build(_cfg(head="mean_pool"), TaskInfo(10, 1, 12, target="sequence", loss="mse"))
    assert seq(torch.randint(0, 10, (2, 3, 12))).shape == (2, 3, 1)


@pytest.mark.parametrize("cfg,info,match", [
    ({}, TaskInfo(10, 3, 12, target="sequence"), "one target per sequence"),
    ({"head": "mean_pool"}, TaskInfo(10, 3, 12), "target per position"),
    ({"head": "mean_pool"}, TaskInfo(10, 3, 12, target="sequence", dual=True), "dual_pool"),
    ({"head": "dual_pool"}, TaskInfo(10, 3, 12, target="sequence"), "two inputs"),
    ({"tie_head": True}, TaskInfo(10, 10, 12, input_dim=3), "continuous"),
    ({"tie_head": True}, TaskInfo(10, 3, 12), "n_classes == vocab_size"),
])
def test_configs_that_cannot_serve_the_task_fail_with_the_reason(cfg, info, match):
    with pytest.raises(ValueError, match=match):
        build_model(_cfg(**cfg), info, 1)


def test_dual_pool_and_tied_head_rejected_at_validation():
    with pytest.raises(ValueError, match="tie_head"):
        _cfg(head="dual_pool", tie_head=True)


def test_mixer_inputs_and_decay_on_any_seqlm():
    """mixer_inputs gives each block's mixer and what it reads; the decay probe finds the first
    decay-capable mixer (here a Mamba-1 block behind a NeoX layer) and fails clearly without one."""
    info = TaskInfo(10, 10, 12)
    m = _build(_cfg(layers="TF-SSM"), info)
    ids = torch.randint(0, 10, (2, 3, 12))
    ins = m.mixer_inputs(ids)
    assert [i for i, _, _ in ins] == [0, 1]
    assert ins[0][1] is m.blocks[0].attn and ins[1][1] is m.blocks[1].mixer
    h0 = m.embed_tokens(ids)
    torch.testing.assert_close(ins[0][2], m.blocks[0].norm1(h0))
    torch.testing.assert_close(ins[1][2], m.blocks[1].norm(m.blocks[0](h0)))
    dec = layer_decay(m, ids)
    assert dec.shape == (2, 3, 12, 16, 4) and ((dec > 0) & (dec <= 1)).all()
    tf_only = _build(_cfg(layers="TF"), info)
    with pytest.raises(ValueError, match="decay"):
        layer_decay(tf_only, ids)


def test_activation_floats_model_estimate():
    info = TaskInfo(10, 10, 32)
    base = activation_floats(_cfg(), info)
    assert isinstance(base, int) and base > 0
    assert activation_floats(_cfg(), TaskInfo(10, 10, 64)) > 2 * base  # attention is quadratic
    big_state = _cfg(blocks={"SSM": {"mixer": {"name": "mamba1", "d_state": 32}},
                             "TF": {"kind": "neox"}})
    assert activation_floats(big_state, info) > base
    more_classes = activation_floats(_cfg(), TaskInfo(10, 20, 32)) - base
    assert more_classes == 32 * 10  # the fused cross entropy's kept exponentials per position
    mse = TaskInfo(10, 20, 32, loss="mse", input_dim=1)
    assert activation_floats(_cfg(), mse) - activation_floats(
        _cfg(), TaskInfo(10, 10, 32, loss="mse", input_dim=1)) == 6 * 32 * 10  # the MSE loss
    seq = TaskInfo(10, 3, 32, target="sequence")
    dual = TaskInfo(10, 3, 32, target="sequence", dual=True)
    assert activation_floats(_cfg(head="dual_pool"), dual) > 2 * activation_floats(
        _cfg(head="mean_pool"), seq) - 100
    from ssmrepro.models import MODELS

    for name, entry in MODELS.items():  # every preset has an estimate
        assert activation_floats(entry.Config(), TaskInfo(40, 40, 16)) > 0, name
