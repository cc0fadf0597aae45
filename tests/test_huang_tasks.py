"""huang2025's own tasks: MQAR in its App. D.3 layout (``mqar_huang``) and INDUCTION HEADS
(``induction_heads``, App. D.4): every rule of the docstrings, example by example."""

import itertools
import math

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.tasks import TASKS, build_task
from ssmrepro.tasks.base import IGNORE, TEST, TRAIN, VAL
from ssmrepro.tasks.induction_heads import InductionHeads, induction_targets
from ssmrepro.tasks.mqar_huang import MQARHuang


def draw(task, n=64, seeds=(0,), split=TRAIN, start=0):
    s = torch.tensor(seeds)
    return task.sample(s, split, (start + torch.arange(n)).expand(len(seeds), n))


# ----------------------------------------------------------------------------------------------
# MQAR (huang2025 layout)

MQ = {"name": "mqar_huang", "kappa": 6, "vocab": 16, "T": 30}


def mqar(**kw):
    return build_task({**MQ, **kw})


def test_mqar_registered_info_and_validation():
    assert TASKS["mqar_huang"] is MQARHuang
    info = mqar().info
    assert (info.vocab_size, info.n_classes, info.seq_len) == (22, 22, 30)
    with pytest.raises(ValidationError):
        build_task({**MQ, "bogus": 1})
    with pytest.raises(ValidationError, match="3\\*kappa"):
        build_task({**MQ, "T": 17})
    build_task({**MQ, "T": 18})  # exactly kappa queries and no noise


def test_mqar_docstring_example():
    b = build_task({"name": "mqar_huang", "kappa": 3, "vocab": 5, "T": 12}).sample(
        torch.tensor([0]), TRAIN, torch.tensor([[0]]))
    assert b.x[0, 0].tolist() == [2, 4, 0, 3, 1, 7, 3, 0, 5, 1, 2, 3]
    y = [v if v != IGNORE else None for v in b.y[0, 0].tolist()]
    assert y == [None] * 7 + [3, None, 7, 4, None]


@pytest.mark.parametrize("cfg", [MQ, {**MQ, "T": 18}, {**MQ, "kappa": 1, "T": 40},
                                 {**MQ, "kappa": 32, "vocab": 128, "T": 100}])
def test_mqar_every_rule(cfg):
    task = build_task(cfg)
    kappa, V, T = cfg["kappa"], cfg["vocab"], cfg["T"]
    b = draw(task, n=40, seeds=(0, 3))
    assert b.x.shape == b.y.shape == (2, 40, T)
    for e, i in itertools.product(range(2), range(40)):
        x, y = b.x[e, i].tolist(), b.y[e, i].tolist()
        keys, vals = x[0:2 * kappa:2], x[1:2 * kappa:2]
        assert sorted(keys) == list(range(kappa))  # every key once: a permutation of the key set
        assert all(kappa <= v < kappa + V for v in vals)  # values from the separate |V| range
        pair = dict(zip(keys, vals))
        chunk = x[2 * kappa:]
        qpos = [p for p in range(2 * kappa, T) if x[p] < kappa]
        assert sorted(x[p] for p in qpos) == list(range(kappa))  # every key asked exactly once
        assert all(kappa <= v < kappa + V for v in chunk if v >= kappa)  # noise = value tokens
        assert len(chunk) - len(qpos) == T - 3 * kappa
        sup = [p for p in range(T) if y[p] != IGNORE]
        assert sup == qpos  # loss exactly at the query positions
        assert all(y[p] == pair[x[p]] for p in sup)  # target = the paired value


def test_mqar_randomness_is_spread():
    """Context orders, query positions, values and noise all vary (no fixed layout)."""
    task = build_task({**MQ, "kappa": 4, "vocab": 8, "T": 40})
    b = draw(task, n=2000)
    x = b.x[0]
    first_keys = x[:, 0]
    assert set(first_keys.tolist()) == set(range(4))
    for k in range(4):  # each key is first in about a quarter of the examples
        assert abs((first_keys == k).float().mean().item() - 0.25) < 0.05
    qfirst = (x[:, 8:] < 4).float().argmax(-1)  # position of the first query in the chunk
    assert qfirst.unique().numel() > 10
    vals = x[:, 1:8:2].flatten() - 4
    assert abs(vals.float().mean().item() - 3.5) < 0.15  # uniform over 8 values
    keys_share_value = (x[:, 1] == x[:, 3]).float().mean().item()
    assert 0.05 < keys_share_value < 0.2  # values i.i.d.: two keys share one ~1/8 of the time


def test_mqar_every_knob_changes_the_data():
    base = draw(mqar())
    for kw in ({"kappa": 5}, {"vocab": 17}, {"T": 31}):
        other = draw(mqar(**kw))
        assert other.x.shape != base.x.shape or not torch.equal(other.x, base.x), kw


def test_mqar_splits_seeds_and_members():
    task = mqar()
    tr, va, te = (draw(task, split=s).x for s in (TRAIN, VAL, TEST))
    assert not torch.equal(tr, va) and not torch.equal(tr, te) and not torch.equal(va, te)
    assert not torch.equal(draw(task, seeds=(1,)).x, tr)
    both = draw(task, seeds=(0, 1)).x
    assert torch.equal(both[0], tr[0]) and torch.equal(both[1], draw(task, seeds=(1,)).x[0])
    assert torch.equal(draw(task, n=8, start=5).x[0], tr[0, 5:13])  # a pure function of index


# ----------------------------------------------------------------------------------------------
# INDUCTION HEADS

IH = {"name": "induction_heads", "vocab": 10, "T": 100, "p": 0.75, "gamma": 0.1}


def ih(**kw):
    return build_task({**IH, **kw})


def brute_targets(x: list[int]) -> list[int]:
    out = []
    for t, v in enumerate(x):
        prev = [j for j in range(t) if x[j] == v]
        out.append(x[max(prev) + 1] if prev else IGNORE)
    return out


def test_induction_registered_info_and_validation():
    assert TASKS["induction_heads"] is InductionHeads
    info = ih().info
    assert (info.vocab_size, info.n_classes, info.seq_len) == (10, 10, 100)  # no blank class
    with pytest.raises(ValidationError):
        build_task({**IH, "bogus": 1})
    with pytest.raises(ValidationError, match="gamma"):
        build_task({**IH, "T": 5})  # floor(0.1 * 5) = 0: no r
    build_task({**IH, "T": 5, "p": 0.0})  # the standard case alone needs no r


def test_induction_docstring_example():
    x = torch.tensor([2, 1, 3, 2, 4, 3, 2, 4])
    assert induction_targets(x, 5).tolist() == [IGNORE] * 3 + [1, IGNORE, 2, 4, 3]
    assert induction_targets(x, 5).tolist() == brute_targets(x.tolist())


def test_induction_targets_match_brute_force():
    for task in (ih(), ih(vocab=5, T=30, p=0.5), ih(vocab=40, p=1.0)):
        b = draw(task, n=50, seeds=(0, 7))
        for e, i in itertools.product(range(2), range(50)):
            assert b.y[e, i].tolist() == brute_targets(b.x[e, i].tolist())
    x = torch.tensor([[3, 3, 3, 1, 3]])  # consecutive repeats: j(t) = t - 1, target = x_t
    assert induction_targets(x, 4).tolist() == [[IGNORE, 3, 3, IGNORE, 1]]


def _hard_special(x: list[int], T: int, R: int):
    """The special token of a hard-case sequence: occurs exactly twice, at r and T - r."""
    for v in set(x):
        pos = [t + 1 for t, u in enumerate(x) if u == v]  # 1-based
        if len(pos) == 2 and 1 <= pos[0] <= R and pos[1] == T - pos[0]:
            return v, pos[0]
    return None


def test_induction_hard_case_layout():
    T, R = 100, 10
    b = draw(ih(p=1.0, vocab=5), n=300)
    rs, specials = [], []
    for x in b.x[0].tolist():
        found = _hard_special(x, T, R)
        assert found is not None  # v* exactly twice, at r <= gamma T and T - r
        v, r = found
        rs.append(r)
        specials.append(v)
        assert x.count(v) == 2
    assert set(rs) == set(range(1, R + 1))  # r uniform on {1..gamma T}
    assert set(specials) == set(range(5))
    y = b.y[0]
    for i, r in enumerate(rs[:50]):  # the long-range target: the token after position r
        assert y[i, T - r - 1].item() == b.x[0, i, r].item()


def test_induction_hard_probability_and_standard_case():
    T, R = 100, 10
    hard = [_hard_special(x, T, R) is not None for x in draw(ih(vocab=5), n=2000).x[0].tolist()]
    # with |V| = 5 a standard sequence almost never has a token exactly twice at r and T - r
    assert abs(sum(hard) / len(hard) - 0.75) < 0.03
    std = draw(ih(vocab=5, p=0.0), n=2000).x[0]
    counts = torch.bincount(std.flatten(), minlength=5).float()
    assert (counts / counts.sum() - 0.2).abs().max() < 0.01  # i.i.d. uniform over V


def test_induction_every_knob_changes_the_data():
    base = draw(ih())
    for kw in ({"vocab": 11}, {"T": 99}, {"p": 0.5}, {"gamma": 0.05}):
        other = draw(ih(**kw))
        assert other.x.shape != base.x.shape or not torch.equal(other.x, base.x), kw


def test_induction_splits_seeds_and_members():
    task = ih()
    tr, va, te = (draw(task, split=s).x for s in (TRAIN, VAL, TEST))
    assert not torch.equal(tr, va) and not torch.equal(tr, te) and not torch.equal(va, te)
    both = draw(task, seeds=(0, 1)).x
    assert torch.equal(both[0], tr[0]) and torch.equal(both[1], draw(task, seeds=(1,)).x[0])
    assert torch.equal(draw(task, n=8, start=5).x[0], tr[0, 5:13])


def test_induction_supervised_fraction():
    """Every position whose token occurred before is supervised: with T = 100 and |V| = 40 about
    |V| (1 - (1 - 1/|V|)^T) ~ 37 first occurrences are not."""
    y = draw(ih(vocab=40, p=0.0), n=500).y[0]
    firsts = (y == IGNORE).sum(-1).float().mean().item()
    assert abs(firsts - 40 * (1 - (1 - 1 / 40) ** 100)) < 1.0
    assert math.isclose((y[:, 0] == IGNORE).float().mean().item(), 1.0)
