import math

import pytest
import torch

from ssmrepro.optim import LRSchedule, PackedAdam, clip_per_member, lr_table, schedule_factors
from ssmrepro.sweep import Schedule


def _params(seed, E=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(E, 4, 3, generator=g, dtype=torch.float64)),
            torch.nn.Parameter(torch.randn(E, 5, generator=g, dtype=torch.float64))]


@pytest.mark.parametrize("decoupled", [False, True])
def test_packed_adam_equals_torch_adam(decoupled):
    ours, ref = _params(0), _params(0)
    v = lambda x: torch.tensor([x], dtype=torch.float64)
    opt = PackedAdam(ours, v(0.9), v(0.95), v(1e-8), v(0.1), decoupled=decoupled)
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    topt = cls(ref, lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in ours]
        for p, q, gr in zip(ours, ref, grads):
            p.grad, q.grad = gr.clone(), gr.clone()
        opt.step(torch.tensor([0.01], dtype=torch.float64), torch.tensor([True]))
        topt.step()
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


def test_inactive_member_is_frozen_and_others_unaffected():
    ps = _params(0, E=2)
    before = [p.detach().clone() for p in ps]
    v = lambda *x: torch.tensor(x, dtype=torch.float64)
    opt = PackedAdam(ps, v(0.9, 0.9), v(0.99, 0.99), v(1e-8, 1e-8), v(0.0, 0.0), decoupled=True)
    for p in ps:
        p.grad = torch.ones_like(p)
        p.grad[0] = float("nan")  # a diverged member's gradient
    opt.step(v(0.1, 0.1), torch.tensor([False, True]))
    for p, b in zip(ps, before):
        assert torch.equal(p[0], b[0])
        assert not torch.equal(p[1], b[1]) and torch.isfinite(p[1]).all()


def test_clip_per_member_matches_torch():
    ps = _params(3, E=2)
    ref = [_params(3, E=1), _params(3, E=1)]
    g = torch.Generator().manual_seed(2)
    grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) * 10 for p in ps]
    for p, gr in zip(ps, grads):
        p.grad = gr.clone()
    for e, r in enumerate(ref):
        for q, gr in zip(r, grads):
            q.grad = gr[e : e + 1].clone()
    clip_per_member(ps, torch.tensor([1.0, math.inf]))
    torch.nn.utils.clip_grad_norm_(ref[0], 1.0)
    for p, q in zip(ps, ref[0]):
        torch.testing.assert_close(p.grad[0:1], q.grad)
    for p, gr in zip(ps, grads):  # max_norm = inf leaves member 1 untouched
        assert torch.equal(p.grad[1], gr[1])


def test_schedules():
    s = Schedule(kind="cosine", warmup_steps=100, hold_steps=400, decay_steps=1500)
    f = schedule_factors(2000, s)
    assert float(f[0]) == 0.0
    assert float(f[50]) == pytest.approx(0.5)
    assert float(f[300]) == 1.0
    assert float(f[500 + 750]) == pytest.approx(0.5)
    assert float(f[1999]) == pytest.approx(0.0, abs=1e-5)
    lin = Schedule(kind="linear", warmup_steps=10)
    assert float(schedule_factors(100, lin)[10 + 45]) == pytest.approx(0.5)
    tab = lr_table([0.03], [Schedule(kind="cosine", min_lr=1e-6)], [1001], [1e-6])
    assert float(tab[0, 0]) == pytest.approx(0.03)
    assert 1e-6 <= float(tab[0, 1000]) < 1.1e-6  # last step, just above the floor
    # the per-member table is lr x the member's own factors
    tab2 = lr_table([2.0], [s], [2000], [None])
    for i in (0, 77, 450, 1234, 1999):
        assert float(tab2[0, i]) == pytest.approx(2.0 * float(f[i]))


# ---- learning-rate groups (TrainConfig.lr_scale; parameters tagged with models.layers.lr_group) ----


def _v(*x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("decoupled", [False, True])
def test_lr_group_scale_equals_torch_param_group(decoupled):
    """{delta: 0.5} == torch Adam/AdamW with a param group at lr/2 (E = 1); a column-tagged
    parameter gets lr/2 on its tagged columns only (Adam is element-wise)."""
    from ssmrepro.models.layers import lr_group

    ours, ref = _params(0), _params(0)
    cols, cols_ref = _params(5)[0], _params(5)[0]
    lr_group(ours[0], "delta")
    lr_group(cols, "delta", (1, 3))
    lr_group(ours[1], "A")  # a group not named in lr_scale keeps the plain lr
    opt = PackedAdam(ours + [cols], _v(0.9), _v(0.95), _v(1e-8), _v(0.1), decoupled=decoupled,
                     lr_scale={"delta": _v(0.5)})
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    kw = dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    topt = cls([{"params": [ref[0]], "lr": 0.005}, {"params": [ref[1]]}], lr=0.01, **kw)
    c_half, c_full = cols_ref.detach().clone().requires_grad_(), cols_ref.detach().clone().requires_grad_()
    topt_c = [cls([c_half], lr=0.005, **kw), cls([c_full], lr=0.01, **kw)]
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in ours + [cols]]
        for p, gr in zip(ours + [cols], grads):
            p.grad = gr.clone()
        for q, gr in zip(ref + [c_half, c_full], grads[:2] + [grads[2], grads[2]]):
            q.grad = gr.clone()
        opt.step(_v(0.01), torch.tensor([True]))
        topt.step()
        for o in topt_c:
            o.step()
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cols[..., 1:3], c_half[..., 1:3], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cols[..., 0], c_full[..., 0], rtol=1e-12, atol=1e-12)


def test_lr_scale_zero_freezes_delta_parameters_per_member():
    """{delta: 0} for member 0 only: its Δ parameters (incl. the Δ↓ columns of x_proj) stay fixed
    while everything else moves; member 1 (no scaling) moves its Δ parameters too."""
    from ssmrepro.models.layers import reset_members
    from ssmrepro.models.mixers.b2s6 import B2S6Config, B2S6Core
    from ssmrepro.models.mixers.mamba2 import Mamba2Config, Mamba2Mixer
    from ssmrepro.models.mixers.mamba2_3conv import Mamba2ThreeConv, Mamba2ThreeConvConfig
    from ssmrepro.models.mixers.s6 import S6Config, S6Core

    for m in (S6Core(2, 8, S6Config(d_state=3, dt_rank=2)), B2S6Core(2, 8, B2S6Config(d_state=3, heads=2)),
              Mamba2Mixer(2, 8, Mamba2Config(d_state=3, headdim=4, bias=True)),
              Mamba2ThreeConv(2, 8, Mamba2ThreeConvConfig(d_state=3))):
        reset_members(m, [0, 1])
        m = m.double()
        before = {n: p.detach().clone() for n, p in m.named_parameters()}
        opt = PackedAdam(m.parameters(), _v(0.9, 0.9), _v(0.999, 0.999), _v(1e-8, 1e-8),
                         _v(0.01, 0.01), decoupled=True, lr_scale={"delta": _v(0.0, 1.0)})
        for _ in range(3):
            m(torch.randn(2, 2, 6, 8, dtype=torch.float64)).pow(2).sum().backward()
            opt.step(_v(0.01, 0.01), torch.tensor([True, True]))
            m.zero_grad()
        for n, p in m.named_parameters():
            b = before[n]
            if getattr(p, "_lr_group", None) == "delta" and p.dim() == 1:  # one per member
                assert p[0] == b[0] and p[1] != b[1], n
            elif getattr(p, "_lr_group", None) == "delta":
                c0, c1 = p._lr_group_cols or (0, p.shape[-1])
                assert torch.equal(p[0, ..., c0:c1], b[0, ..., c0:c1]), n
                assert not torch.equal(p[1, ..., c0:c1], b[1, ..., c0:c1]), n
                if (c0, c1) != (0, p.shape[-1]):  # the untagged columns (x_proj, in_proj) move
                    rest = [i for i in range(p.shape[-1]) if not c0 <= i < c1]
                    assert not torch.equal(p[0, ..., rest], b[0, ..., rest]), n
            elif n not in ("D", "norm_weight"):  # D, the norm start at 1 and move as well
                assert not torch.equal(p[0], b[0]), n


def test_train_config_lr_scale_field():
    from ssmrepro.sweep import MEMBER_FIELDS, TrainConfig

    t = TrainConfig(max_steps=1)
    assert "lr_scale" not in t.model_dump(mode="json", exclude_defaults=True)  # not in run ids
    t = TrainConfig(max_steps=1, lr_scale={"delta": 0.1})
    assert t.model_dump(mode="json")["lr_scale"] == {"delta": 0.1}
    assert "lr_scale" in MEMBER_FIELDS
    with pytest.raises(ValueError):
        TrainConfig(max_steps=1, lr_scale={"delta": -1.0})


def test_train_pack_applies_lr_scale(tmp_path):
    """End to end: a pack where member 0 has lr_scale {delta: 0} keeps its Δ bias at init."""
    from helpers import write_spec

    from ssmrepro.models import build_model
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.tasks import build_task
    from ssmrepro.train import _INIT_STREAM, derived_seed, train_pack

    spec = load_spec(write_spec(
        tmp_path, model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4},
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
               "test_size": 16, "eval_every": 10, "eval_batch_size": 16, "dtype": "float64"},
        # labelled: a mapping set whole is no table column, so unlabelled points that differ
        # only inside it are refused (one cell of both)
        sweep=[{"cases": [{"label": "frozen", "set": {"train.lr_scale": {"delta": 0.0}}},
                          {"label": "free", "set": {"train.lr_scale": {}}}]}], seeds=[3]))
    runs = expand(spec, "paper")
    assert len(runs) == 2 and len({r.pack_key() for r in runs}) == 1
    keep = {}
    train_pack(runs, keep=keep)
    init = build_model(runs[0].model, build_task(runs[0].task).info, 2,
                       [derived_seed(r.seed, _INIT_STREAM) for r in runs]).double()
    names = [n for n, _ in init.named_parameters() if n.endswith("dt_bias")]
    assert names
    trained = dict(keep["model"].named_parameters())
    for n in names:
        p0 = dict(init.named_parameters())[n]
        assert torch.equal(trained[n][0], p0[0])
        assert not torch.equal(trained[n][1], p0[1])


def test_lr_schedule_blocks_equal_the_table_and_need_no_full_table():
    s = Schedule(kind="cosine", warmup_steps=100, hold_steps=400, decay_steps=1500)
    lrs = [0.01, 0.003]
    sched = LRSchedule(lrs, [s, Schedule(kind="linear")], [2000, 9000], [None, None])
    tab = lr_table(lrs, [s, Schedule(kind="linear")], [2000, 9000], [None, None])
    for step in (0, 99, 4095, 4096, 8999):
        torch.testing.assert_close(sched.at(step), tab[:, step])
    huge = LRSchedule([0.1], [s], [10**12], [None])  # a budget far beyond memory as a table
    assert float(huge.at(10**11)) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("scaled", [False, True])
def test_all_active_in_place_update_equals_the_masked_update(decoupled, scaled):
    """Every member active: PackedAdam updates moments and parameters in place; members 0, 1
    of a pack stepped so equal, bit for bit (float64, several steps, weight decay, an lr group
    scaled per member), the same members in a pack of 3 whose third member is inactive (the
    masked torch.where update)."""
    v = lambda *x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    g = torch.Generator().manual_seed(5)
    base = [torch.randn(3, 4, 3, generator=g, dtype=torch.float64),
            torch.randn(3, 5, generator=g, dtype=torch.float64)]
    grads = [[torch.randn(b.shape, generator=g, dtype=torch.float64) for b in base]
             for _ in range(4)]

    def run(E, active):
        ps = [torch.nn.Parameter(b[:E].clone()) for b in base]
        if scaled:
            ps[0]._lr_group = "delta"
        scale = {"delta": v(0.5, 2.0, 3.0)[:E]} if scaled else None
        opt = PackedAdam(ps, v(0.9, 0.8, 0.9)[:E], v(0.99, 0.95, 0.9)[:E], v(1e-8, 1e-6, 1e-8)[:E],
                         v(0.1, 0.0, 0.3)[:E], decoupled=decoupled, lr_scale=scale)
        for gs in grads:
            for p, gr in zip(ps, gs):
                p.grad = gr[:E].clone()
            opt.step(v(0.01, 0.03, 0.02)[:E], active)
        return ps, opt

    fast, ofast = run(2, torch.tensor([True, True]))
    masked, omasked = run(3, torch.tensor([True, True, False]))
    for a, b in zip(fast, masked):
        assert torch.equal(a.detach(), b.detach()[:2])
    for a, b in zip(ofast.m + ofast.v, omasked.m + omasked.v):
        assert torch.equal(a, b[:2])
