"""Generic backbone SeqLM, cooper2026's hybrid preset, packed BatchNorm, bidirectional wrapper,
initialisation schemes."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.models import MODELS, build_model, count_params
from ssmrepro.models.backbone import SeqLMConfig, parse_layers
from ssmrepro.models.blocks import Bidirectional, MixerBlock, MixerBlockConfig
from ssmrepro.models.init import InitConfig, initialise, weight_matrices
from ssmrepro.models.layers import PackedBatchNorm, reset_members
from ssmrepro.models.presets import CooperHybridConfig
from ssmrepro.tasks.base import TaskInfo

MIXER_SPECS = {
    "s6": {"name": "s6", "d_state": 4},
    "s4d": {"name": "s4d", "d_state": 4},
    "mamba1": {"name": "mamba1", "d_state": 4},
    "attention": {"name": "attention", "heads": 2},
    "neox_attn": {"name": "neox_attn", "heads": 2, "window": 3},
}


def _build(cfg, info=TaskInfo(10, 10, 12), seeds=(0, 1, 2)):
    m = build_model(cfg, info, len(seeds), list(seeds)).double()
    return m


def _cfg(mixer: dict, **kw) -> SeqLMConfig:
    blocks = {"M": {"mixer": mixer, **kw.pop("block", {})},
              "TF": {"kind": "neox", "heads": 2, "window": 4}}
    return SeqLMConfig(d_model=8, layers=kw.pop("layers", "M-TF"), blocks=blocks, **kw)


# ---------------------------------------------------------------- cooper2026 parameter counts


def _cooper_count(d: int, V: int, N: int, tied: bool = True) -> int:
    """Closed form for SSM→TF (notes §5.1): embedding (+ head) + final LN + Mamba + NeoX."""
    Di, R = 2 * d, math.ceil(d / 16)
    mamba = d + d * 2 * Di + (Di * 4 + Di) + Di * (R + 2 * N) + (R * Di + Di) + Di * N + Di + Di * d
    neox = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (2 * d * d + 2 * d) + (2 * d * d + d)
    return V * d * (1 if tied else 2) + 2 * d + mamba + neox


@pytest.mark.parametrize("d,V,N,expected", [(8, 34, 16, 2192), (24, 11, 16, 11496),
                                            (24, 11, 1, 9336)])
def test_cooper_hybrid_parameter_counts_match_the_audit(d, V, N, expected):
    # selective copy: V = 26 + 5 numbers + 3 specials = 34; MKAR: 8 + 3 specials = 11
    info = TaskInfo(V, V, 100)
    m = build_model(CooperHybridConfig(d_model=d, d_state=N, layers="SSM-TF"), info, 1, [0])
    assert count_params(m, 1) == expected == _cooper_count(d, V, N)
    untied = build_model(CooperHybridConfig(d_model=d, d_state=N, tie_head=False), info, 1)
    assert count_params(untied, 1) == expected + V * d


def test_cooper_hybrid_layout():
    cfg = CooperHybridConfig(d_model=8, layers="TF→SSM", window=20).to_backbone()
    assert cfg.layer_names() == ["TF", "SSM"]
    ssm, tf = cfg.blocks["SSM"], cfg.blocks["TF"]
    assert ssm.norm == "rmsnorm" and ssm.mixer.name == "mamba1" and ssm.mixer.expand == 2
    assert tf.kind == "neox" and tf.parallel and tf.expand == 2 and tf.act == "silu"
    assert tf.rotary_pct == 0.25 and tf.window == 20
    assert cfg.final_norm == "layernorm" and not cfg.head_bias and cfg.tie_head
    m = _build(CooperHybridConfig(d_model=8, layers=["SSM", "TF"], repeat=2), TaskInfo(34, 34, 30))
    assert len(m.blocks) == 4
    y = m(torch.randint(0, 34, (3, 2, 30)))
    assert y.shape == (3, 2, 30, 34) and torch.isfinite(y).all()


# ---------------------------------------------------------------- config validation


def test_layer_patterns_and_config_errors():
    assert parse_layers("SSM-TF") == parse_layers("SSM→TF") == ["SSM", "TF"]
    assert parse_layers(["SSM", "TF"], 3) == ["SSM", "TF"] * 3
    assert parse_layers("TF, SSM") == ["TF", "SSM"]
    spec = {"d_model": 8, "layers": "SSM-TF",
            "blocks": {"SSM": {"mixer": {"name": "mamba1", "d_state": 16}, "norm": "rmsnorm"},
                       "TF": {"kind": "neox", "heads": 1, "window": 20}}}
    cfg = SeqLMConfig.model_validate(spec)
    assert cfg.blocks["SSM"].kind == "mixer" and cfg.blocks["SSM"].mixer.d_state == 16
    dumped = cfg.model_dump(mode="json")
    mixer = dumped["blocks"]["SSM"]["mixer"]  # the full mamba1 config (its options at defaults)
    assert {k: mixer[k] for k in ("name", "d_state", "d_conv", "expand", "conv_bias", "bias")} == {
        "name": "mamba1", "d_state": 16, "d_conv": 4, "expand": 2, "conv_bias": True, "bias": False}
    assert mixer["core"] == "s6" and mixer["gate"] and mixer["conv"]
    assert SeqLMConfig.model_validate(dumped) == cfg  # round trip (run ids hash the dump)
    bad = [
        {**spec, "layers": "SSM-XX"},  # unknown block name
        {**spec, "depth": 2},  # unknown top-level key
        {**spec, "blocks": {"SSM": {"mixer": {"name": "mamba1", "M": 1}}, "TF": {"kind": "neox"}}},
        {**spec, "blocks": {"SSM": {"mixer": {"name": "mamba1", "N": 16}}, "TF": {"kind": "neox"}}},
        {**spec, "blocks": {"SSM": {"mixer": {"name": "nope"}}, "TF": {"kind": "neox"}}},
        {**spec, "blocks": {"SSM": {"mixer": {"name": "s6"}, "nrm": "x"}, "TF": {"kind": "neox"}}},
        {**spec, "blocks": {"SSM": {"mixer": {"name": "s6"}}, "TF": {"kind": "neox", "hd": 1}}},
        {**spec, "init": {"scheme": "gamma"}},  # gamma needs its exponent
        {**spec, "layers": ""},
    ]
    for b in bad:
        with pytest.raises((ValidationError, ValueError)):
            SeqLMConfig.model_validate(b)
    assert "seq_lm" in MODELS and "cooper_hybrid" in MODELS


def test_list_models_prints_nested_configs():
    from typer.testing import CliRunner

    from ssmrepro.cli import app

    out = CliRunner().invoke(app, ["list-models"], env={"COLUMNS": "200"}).output
    for s in ("seq_lm", "cooper_hybrid", "{kind: 'mixer', mixer, norm,", "{kind: 'neox', heads,",
              "{scheme, gamma, std,", "scheme: hf", "str | list[str]"):
        assert s in out, s


# ---------------------------------------------------------------- every mixer in the backbone


@pytest.mark.parametrize("mixer", sorted(MIXER_SPECS))
def test_backbone_with_each_mixer_causal_pack_and_grads(mixer):
    cfg = _cfg(MIXER_SPECS[mixer], pos="learned")
    seeds = [5, 6, 7]
    m = _build(cfg, seeds=seeds).eval()
    ids = torch.randint(0, 10, (3, 2, 12))
    y = m(ids)
    assert y.shape == (3, 2, 12, 10)
    # causality: changing tokens after t0 leaves logits at <= t0 unchanged
    t0 = 5
    ids2 = ids.clone()
    ids2[:, :, t0 + 1 :] = (ids2[:, :, t0 + 1 :] + 1) % 10
    y2 = m(ids2)
    torch.testing.assert_close(y2[:, :, : t0 + 1], y[:, :, : t0 + 1])
    assert not torch.allclose(y2[:, :, t0 + 1 :], y[:, :, t0 + 1 :])
    # pack == each member alone
    for e, s in enumerate(seeds):
        alone = _build(cfg, seeds=[s]).eval()
        torch.testing.assert_close(y[e], alone(ids[e : e + 1])[0])
    # finite gradients
    m.train()
    m(ids).logsumexp(-1).sum().backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n


# ---------------------------------------------------------------- block options


class _Lin(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x).cumsum(2)  # a causal token mixer without parameters


def _block(norm, position, residual, E=1, d=6):
    cfg = MixerBlockConfig(mixer={"name": "s6"}, norm=norm, norm_position=position,
                           residual=residual)
    b = MixerBlock(E, d, cfg).double()
    reset_members(b, list(range(E)))
    b.mixer = _Lin()
    return b


@pytest.mark.parametrize("norm", ["none", "layernorm", "rmsnorm", "batchnorm"])
@pytest.mark.parametrize("position", ["pre", "post"])
@pytest.mark.parametrize("residual", [True, False])
def test_mixer_block_norm_position_residual(norm, position, residual):
    if norm == "none" and position == "post":  # no norm to place: the pre block, refused
        with pytest.raises(ValueError, match="norm_position 'post' is not read with norm 'none'"):
            _block(norm, position, residual)
        return
    b = _block(norm, position, residual).eval()
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
    f, n = b.mixer, b.norm
    if position == "pre":
        expect = (x + f(n(x))) if residual else f(n(x))
    else:
        expect = n(x + f(x)) if residual else n(f(x))
    torch.testing.assert_close(b(x), expect)
    if norm == "layernorm":
        z = n(x)
        torch.testing.assert_close(z.mean(-1), torch.zeros_like(z.mean(-1)))
    if norm == "rmsnorm":
        z = n(x)  # mean(z²) = ms / (ms + eps) exactly, ms = mean(x²) (unit weight)
        ms = x.pow(2).mean(-1)
        torch.testing.assert_close(z.pow(2).mean(-1), ms / (ms + n.eps))


def test_packed_batchnorm_equals_torch_batchnorm_per_member():
    E, d = 3, 4
    bn = PackedBatchNorm(E, d).double()
    reset_members(bn, [0, 1, 2])
    refs = [torch.nn.BatchNorm1d(d).double() for _ in range(E)]
    with torch.no_grad():
        for e, r in enumerate(refs):
            bn.weight[e].uniform_(0.5, 1.5)
            bn.bias[e].uniform_(-1, 1)
            r.weight.copy_(bn.weight[e])
            r.bias.copy_(bn.bias[e])
    for _ in range(3):  # train steps update running statistics
        x = torch.randn(E, 2, 5, d, dtype=torch.float64) * 3 + 1
        y = bn.train()(x)
        for e, r in enumerate(refs):
            ye = r.train()(x[e].reshape(-1, d)).reshape(2, 5, d)
            torch.testing.assert_close(y[e], ye)
    for e, r in enumerate(refs):
        torch.testing.assert_close(bn.running_mean[e], r.running_mean)
        torch.testing.assert_close(bn.running_var[e], r.running_var)
    x = torch.randn(E, 2, 5, d, dtype=torch.float64)
    y = bn.eval()(x)
    for e, r in enumerate(refs):
        torch.testing.assert_close(y[e], r.eval()(x[e].reshape(-1, d)).reshape(2, 5, d))


def test_batchnorm_model_causal_in_eval_only():
    """Train-mode batch statistics mix all positions (documented); eval mode is causal."""
    cfg = _cfg(MIXER_SPECS["s6"], block={"norm": "batchnorm"}, final_norm="batchnorm")
    m = _build(cfg, seeds=[0])
    ids = torch.randint(0, 10, (1, 4, 12))
    ids2 = ids.clone()
    ids2[:, :, 8:] = (ids2[:, :, 8:] + 3) % 10
    m.eval()
    torch.testing.assert_close(m(ids2)[:, :, :8], m(ids)[:, :, :8])
    m.train()
    assert not torch.allclose(m(ids2)[:, :, :8], m(ids)[:, :, :8])


@pytest.mark.parametrize("combine", ["sum", "concat"])
def test_bidirectional_sees_future_each_direction_causal(combine):
    cfg = _cfg(MIXER_SPECS["s6"], block={"bidirectional": combine}, layers="M")
    m = _build(cfg, seeds=[0, 1]).eval()
    bi = m.blocks[0].mixer
    assert isinstance(bi, Bidirectional)
    x = torch.randn(2, 2, 10, 8, dtype=torch.float64)
    x2 = x.clone()
    x2[:, :, 6:] += 1.0  # change the future of t <= 5
    yf, yb = bi.directions(x)
    yf2, yb2 = bi.directions(x2)
    torch.testing.assert_close(yf2[:, :, :6], yf[:, :, :6])  # forward direction: causal
    assert not torch.allclose(bi(x2)[:, :, :6], bi(x)[:, :, :6])  # the sum sees the future
    x3 = x.clone()
    x3[:, :, :4] += 1.0  # change the past of t >= 4
    _, yb3 = bi.directions(x3)
    torch.testing.assert_close(yb3[:, :, 4:], yb[:, :, 4:])  # backward direction: anti-causal
    if combine == "sum":
        torch.testing.assert_close(bi(x), yf + yb)
    # the backward direction is the forward rule on the reversed sequence
    torch.testing.assert_close(yb, bi.bwd(x.flip(2)).flip(2))


# ---------------------------------------------------------------- heads and embeddings


def test_pooled_head_and_tied_head():
    info = TaskInfo(10, 3, 12, target="sequence")
    cfg = _cfg(MIXER_SPECS["mamba1"], head="mean_pool")
    m = _build(cfg, info, seeds=[0, 1]).eval()
    ids = torch.randint(0, 10, (2, 4, 12))
    y = m(ids)
    assert y.shape == (2, 4, 3)
    h = m.features(ids)
    torch.testing.assert_close(y, m.head(h.mean(2)))
    mask = torch.zeros(2, 4, 12, dtype=torch.bool)
    mask[..., :5] = True
    torch.testing.assert_close(m.readout(h, mask), m.head(h[:, :, :5].mean(2)))
    tied = _build(_cfg(MIXER_SPECS["s6"], tie_head=True, head_bias=False), seeds=[0, 1])
    h = tied.features(ids)
    torch.testing.assert_close(tied.readout(h), torch.einsum("ebld,evd->eblv", h, tied.embed.weight))
    untied = _build(_cfg(MIXER_SPECS["s6"], head_bias=False), seeds=[0, 1])
    assert count_params(untied, 2) - count_params(tied, 2) == 10 * 8
    with pytest.raises(ValueError):
        build_model(_cfg(MIXER_SPECS["s6"], tie_head=True), TaskInfo(10, 3, 12), 1)


def test_position_options():
    ids = torch.randint(0, 10, (1, 2, 12))
    idx = _build(_cfg(MIXER_SPECS["s6"], pos="index"), seeds=[0])
    h = idx.embed_tokens(ids)
    torch.testing.assert_close(h[0, 0, :, -1], torch.arange(1, 13, dtype=torch.float64))
    assert idx.embed.weight.shape == (1, 10, 7)
    learned = _build(_cfg(MIXER_SPECS["s6"], pos="learned"), seeds=[0])
    torch.testing.assert_close(learned.embed_tokens(ids),
                               learned.embed(ids) + learned.pos.weight[:, None])


# ---------------------------------------------------------------- initialisation schemes


def _big_cfg(init: dict) -> SeqLMConfig:
    return SeqLMConfig(
        d_model=32, layers="SSM-TF-S4",
        blocks={"SSM": {"mixer": {"name": "mamba1", "d_state": 8}},
                "TF": {"kind": "neox", "heads": 2, "conv": 4},
                "S4": {"mixer": {"name": "s4d", "d_state": 16}, "norm": "layernorm"}},
        pos="learned", init=init)


def test_default_scheme_is_reset_members():
    a = build_model(_big_cfg({"scheme": "default"}), TaskInfo(40, 40, 16), 2, [3, 4])
    b = build_model(_big_cfg({"scheme": "default"}), TaskInfo(40, 40, 16), 2)
    reset_members(b, [3, 4])
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n


def test_gamma_init_std_per_matrix_and_untouched_params():
    gamma = 0.7
    info = TaskInfo(40, 40, 16)
    m = build_model(_big_cfg({"scheme": "gamma", "gamma": gamma}), info, 1, [0])
    ref = build_model(_big_cfg({"scheme": "default"}), info, 1, [0])
    mats = {n: (p, f) for n, p, f in weight_matrices(m)}
    expected = {"embed.weight", "pos.weight", "blocks.0.mixer.in_proj.weight",
                "blocks.0.mixer.conv.weight", "blocks.0.mixer.ssm.x_proj.weight",
                "blocks.0.mixer.ssm.dt_weight", "blocks.0.mixer.out_proj.weight",
                "blocks.1.attn.qkv.weight", "blocks.1.attn.dense.weight",
                "blocks.1.attn.conv.weight", "blocks.1.mlp.fc1.weight", "blocks.1.mlp.fc2.weight",
                "blocks.2.mixer.C", "head.weight"}
    assert set(mats) == expected
    fan = {"embed.weight": 40, "pos.weight": 16, "blocks.0.mixer.in_proj.weight": 32,
           "blocks.0.mixer.conv.weight": 4, "blocks.0.mixer.ssm.dt_weight": 2,
           "blocks.1.attn.conv.weight": 4, "blocks.1.mlp.fc2.weight": 64, "blocks.2.mixer.C": 16}
    for n, (p, f) in mats.items():
        assert fan.get(n, f) == f, n
        std = p.detach().double().std().item()
        tol = 4 / math.sqrt(p.numel())  # ~4 standard errors of the std estimate, relative
        assert abs(std / f**-gamma - 1) < max(tol, 0.05), (n, std, f**-gamma)
        assert abs(p.detach().double().mean().item()) < 4 * f**-gamma / math.sqrt(p.numel()), n
    params, ref_params = dict(m.named_parameters()), dict(ref.named_parameters())
    for n, p in params.items():
        if n.endswith("bias") and "dt_bias" not in n and "norm" not in n:
            assert torch.all(p == 0), n  # Linear / conv biases zero
        if any(k in n for k in ("A_log", "dt_bias", ".D", "norm", "s4d")) or n.endswith("mixer.B"):
            assert torch.equal(p, ref_params[n]), n  # untouched
    assert torch.all(params["blocks.0.norm.weight"] == 1)


@pytest.mark.parametrize("init", [{"scheme": "gamma", "gamma": 1.0}, {"scheme": "hf"},
                                  {"scheme": "mamba"}])
def test_init_schemes_pack_equals_alone(init):
    info = TaskInfo(40, 40, 16)
    seeds = [11, 12, 13]
    pack = build_model(_big_cfg(init), info, 3, seeds)
    for e, s in enumerate(seeds):
        alone = build_model(_big_cfg(init), info, 1, [s])
        for (n, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            torch.testing.assert_close(p[e], q[0], msg=n)
    assert not torch.equal(pack.embed.weight[0], pack.embed.weight[1])


def test_init_is_member_level_mixed_schemes_pack_equals_alone():
    """build_model(members=...): each member gets its own init (γ, or even another scheme)."""
    info = TaskInfo(40, 40, 16)
    inits = [{"scheme": "gamma", "gamma": 0.5}, {"scheme": "gamma", "gamma": 1.5},
             {"scheme": "mamba"}, {"scheme": "default"}, {"scheme": "hf"}]
    seeds = [3, 3, 4, 5, 6]
    members = [_big_cfg(i) for i in inits]
    pack = build_model(members[0], info, len(inits), seeds, members=members)
    for e, (cfg, s) in enumerate(zip(members, seeds)):
        alone = build_model(cfg, info, 1, [s])
        for (n, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            torch.testing.assert_close(p[e], q[0], msg=n)
    assert abs(pack.embed.weight[2].std().item() / 0.02 - 1) < 0.1  # mamba's embedding std
    assert abs(pack.embed.weight[3].std().item() - 1) < 0.1  # restored for the next member
    with pytest.raises(ValueError, match="init only"):
        build_model(members[0], info, 2, [0, 1], members=[members[0], _big_cfg({}).model_copy(
            update={"d_model": 16})])
    with pytest.raises(ValueError, match="member configs"):
        build_model(members[0], info, 2, [0, 1], members=members[:1])


def test_hf_and_mamba_schemes():
    info = TaskInfo(40, 40, 16)
    hf = build_model(_big_cfg({"scheme": "hf", "std": 0.05}), info, 1, [0])
    for n in ("embed.weight", "blocks.0.mixer.in_proj.weight", "blocks.0.mixer.ssm.dt_weight",
              "blocks.1.mlp.fc1.weight"):
        p = dict(hf.named_parameters())[n]
        assert abs(p.std().item() / 0.05 - 1) < 0.3, n
    assert torch.all(hf.blocks[0].mixer.ssm.dt_bias == 0)  # HF zeroes nn.Linear dt_proj.bias
    assert torch.all(hf.blocks[1].attn.qkv.bias == 0)
    mb = build_model(_big_cfg({"scheme": "mamba"}), info, 1, [0])
    assert abs(mb.embed.weight.std().item() / 0.02 - 1) < 0.1
    assert torch.all(mb.blocks[1].mlp.fc1.bias == 0)
    dt = torch.nn.functional.softplus(mb.blocks[0].mixer.ssm.dt_bias)  # mamba-ssm dt init kept
    assert dt.min() >= 1e-3 - 1e-9 and dt.max() <= 0.1 + 1e-9
    with pytest.raises(ValidationError):
        InitConfig(scheme="gamma")
    with pytest.raises(ValidationError):
        InitConfig(scheme="hf", gamma=0.5)


def test_initialise_without_scheme_matches_reset_members():
    m1 = build_model(_cfg(MIXER_SPECS["mamba1"]), TaskInfo(10, 10, 12), 1)
    m2 = build_model(_cfg(MIXER_SPECS["mamba1"]), TaskInfo(10, 10, 12), 1)
    initialise(m1, [9])
    reset_members(m2, [9])
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(p, q)


def test_gamma_init_knows_the_matrices_of_every_registered_mixer():
    """No mixer falls back to the ndim >= 3 guess with a wrong fan-in: every parameter the gamma
    scheme draws is declared (by a known layer type or the module's init_weights hook)."""
    from ssmrepro.models import init as init_mod
    from ssmrepro.models.mixers import MIXERS, build_mixer

    for name in MIXERS:
        cfg = {"name": name}
        if "d_state" in MIXERS[name].Config.model_fields:
            cfg["d_state"] = 4
        m = build_mixer(cfg, 1, 16)
        for mod in m.modules():
            declared = (hasattr(mod, "init_weights") or type(mod).__name__ in {
                "PackedLinear", "PackedEmbedding", "PackedCausalConv", "SSDConv", "S6Core",
                "S4DCore", "LearnedPositions"})
            raw3 = [n for n, p in mod.named_parameters(recurse=False)
                    if p.dim() >= 3 and not getattr(p, "_no_weight_decay", False)]
            assert declared or not raw3, (name, type(mod).__name__, raw3)
        names = {n for n, _, _ in init_mod.weight_matrices(m)}
        assert not any(n.endswith("B_bias") for n in names), name


def test_mamba_init_rescales_out_proj_by_sqrt_n_layer():
    """mamba-ssm's rescale_prenorm_residual: with 3 Mamba blocks every out_proj is the default
    draw divided by √3; embeddings N(0, 0.02); Linear biases zero."""
    from ssmrepro.models import build_model
    from ssmrepro.models.backbone import SeqLMConfig
    from ssmrepro.tasks.base import TaskInfo

    info = TaskInfo(vocab_size=11, n_classes=11, seq_len=8)
    blocks = {"SSM": {"mixer": {"name": "mamba1", "d_state": 4}}}
    base = dict(d_model=16, layers="SSM", repeat=3, blocks=blocks)
    dflt = build_model(SeqLMConfig(**base), info, 1, seeds=[4])
    mam = build_model(SeqLMConfig(**base, init={"scheme": "mamba"}), info, 1, seeds=[4])
    outs = [(n, p) for n, p in mam.named_parameters() if n.endswith("out_proj.weight")]
    assert len(outs) == 3
    ref = dict(dflt.named_parameters())
    for n, p in outs:
        torch.testing.assert_close(p, ref[n] / 3**0.5, rtol=0, atol=0)
    emb = [p for n, p in mam.named_parameters() if n.startswith("embed")][0]
    assert abs(emb.std().item() - 0.02) < 0.005
