import math

import pytest
import torch

from ssmrepro.optim import PackedAdam, clip_per_member, lr_table, schedule_factors
from ssmrepro.train import Schedule


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
