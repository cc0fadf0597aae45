"""yu2025 synthetic tasks: the sum-of-cosines operator, |u_1| and the linear functional."""

import math

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.tasks import TASKS, build_task
from ssmrepro.tasks.base import TEST, TRAIN, VAL
from ssmrepro.tasks.yu_synthetic import PRIMES, CosineOperator, FirstAbs, LinearFunctional
from ssmrepro.train import max_rise


def draw(task, n=256, seeds=(0,), split=TRAIN):
    s = torch.tensor(seeds)
    return task.sample(s, split, torch.arange(n).expand(len(seeds), n))


@pytest.mark.parametrize("name,cls", [("cosine_operator", CosineOperator),
                                      ("first_abs", FirstAbs),
                                      ("linear_functional", LinearFunctional)])
def test_registered_shapes_and_last_position_target(name, cls):
    assert TASKS[name] is cls
    task = build_task({"name": name})
    info = task.info
    b = draw(task, n=8, seeds=(0, 1))
    assert info.loss == "mse" and info.input_dim == 1 and info.target == "per_position"
    assert b.x.shape == (2, 8, info.seq_len, 1)
    # float64, a sample the same in any batch (training casts to the run's dtype)
    assert b.x.dtype == b.y.dtype == torch.float64
    assert b.y.shape == (2, 8, info.seq_len, info.n_classes)
    assert torch.isnan(b.y[:, :, :-1]).all() and torch.isfinite(b.y[:, :, -1]).all()
    with pytest.raises(ValidationError):
        build_task({"name": name, "bogus": 1})


@pytest.mark.parametrize("name", ["cosine_operator", "first_abs", "linear_functional"])
def test_pure_function_and_splits_differ(name):
    task = build_task({"name": name})
    a, b = draw(task, seeds=(3,)), draw(task, seeds=(3,))
    assert torch.equal(a.x, b.x)
    xs = [draw(task, seeds=(3,), split=s).x for s in (TRAIN, VAL, TEST)]
    assert not torch.equal(xs[0], xs[1]) and not torch.equal(xs[1], xs[2])
    assert not torch.equal(draw(task, seeds=(4,)).x, a.x)
    # sample i does not depend on the batch it is drawn in
    one = task.sample(torch.tensor([3]), TRAIN, torch.tensor([[5]]))
    assert torch.equal(one.x[0, 0], a.x[0, 5])


def test_cosine_operator_input_is_the_cosine_sum():
    task = build_task({"name": "cosine_operator", "L": 64, "n_terms": 10})
    b = draw(task, n=4)
    g = b.y[0, :, -1]  # (4, 10)
    t = 2 * math.pi * torch.arange(64, dtype=torch.float64) / 64
    for i in range(4):  # float64 inputs (they were rounded to float32)
        u = sum(g[i, j] * torch.cos(PRIMES[j] * t) for j in range(10))
        assert torch.allclose(b.x[0, i, :, 0], u, rtol=0, atol=1e-12)
    assert torch.allclose(g.new_tensor(draw(task, n=4000).y[0, :, -1].std().item()),
                          g.new_tensor(1.0), atol=0.05)
    fewer = build_task({"name": "cosine_operator", "L": 32, "n_terms": 3})
    assert fewer.info.n_classes == 3 and draw(fewer).y.shape[-1] == 3
    assert draw(build_task({"name": "cosine_operator", "L": 16, "n_terms": 3})).x.shape[2] == 16


def test_first_abs_scales_and_target():
    task = build_task({"name": "first_abs", "L": 8, "sigma1": 0.1, "sigma2": 10.0})
    b = draw(task, n=4000)
    u = b.x[0, :, :, 0]
    assert abs(u[:, 0].std().item() - 0.1) < 0.01 and abs(u[:, 1:].std().item() - 10.0) < 0.5
    assert torch.allclose(b.y[0, :, -1, 0], u[:, 0].abs() / 0.1, atol=1e-4)
    other = draw(build_task({"name": "first_abs", "L": 8, "sigma1": 1.0, "sigma2": 10.0}), n=4000)
    assert not torch.equal(other.x, b.x)
    assert torch.allclose(other.y, b.y, equal_nan=True)  # the normalised target is the same z


def test_linear_functional_fixed_theta():
    task = build_task({"name": "linear_functional", "L": 16, "theta_seed": 0})
    theta = task.theta()
    b = draw(task, n=16, seeds=(0, 1))
    assert torch.allclose(b.y[..., -1, 0], (b.x[..., 0] * theta.float()).sum(-1), atol=1e-4)
    assert torch.equal(theta, build_task({"name": "linear_functional", "L": 16}).theta())
    assert not torch.equal(theta,
                           build_task({"name": "linear_functional", "L": 16, "theta_seed": 1}).theta())


def test_max_rise():
    assert max_rise([4.0, 2.0, 1.0]) == 0.0
    assert max_rise([4.0, 1.0, 3.0, 0.5]) == 0.5
    assert max_rise([1.0, float("nan"), 2.0]) == 1.0
    assert max_rise([1.0, 1e-14, 1e-6]) < 1e-5  # no spike at float precision
    assert math.isnan(max_rise([1.0]))


def test_thm3_gradient_ratio_scaling():
    from ssmrepro.theory import TABLES
    from ssmrepro.theory.yu import gradient_ratios

    lo, hi = gradient_ratios(0.001, 50, trials=8), gradient_ratios(0.01, 50, trials=8)
    # small inputs: the w-ratio scales like c^3 and the b-ratio like c^2 (same draw of systems)
    assert math.log10(hi["ratio_w"] / lo["ratio_w"]) == pytest.approx(3.0, abs=0.1)
    assert math.log10(hi["ratio_b"] / lo["ratio_b"]) == pytest.approx(2.0, abs=0.1)
    assert set(TABLES["yu_thm3"].fn(c=0.1, L=20, trials=2)) == set(TABLES["yu_thm3"].metrics)
