import inspect
import itertools

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.tasks import TASKS, build_task
from ssmrepro.tasks.base import IGNORE, TEST, TRAIN, VAL
from ssmrepro.tasks.mqar import MQAR, MQARConfig

BASE = {"name": "mqar", "vocab": 128, "L": 64, "kappa": 8}


def mqar(**kw):
    return build_task({**BASE, **kw})


def draw(task, n=64, seeds=(0,), split=TRAIN):
    s = torch.tensor(seeds)
    return task.sample(s, split, torch.arange(n).expand(len(seeds), n))


def context_len(c: MQARConfig) -> int:
    return 2 * c.kappa * (c.key_repeats if c.key_repeats > 1 else c.num_passes)


def check_recall(task, b):
    """Brute force, example by example: every supervised position holds a key whose target is the
    value that followed the LAST occurrence of that key in the context."""
    c = task.config
    half, ctx = c.vocab // 2, context_len(c)
    E, B, L = b.x.shape
    for e, i in itertools.product(range(E), range(B)):
        x, y = b.x[e, i].tolist(), b.y[e, i].tolist()
        keys, values = x[0:ctx:2], x[1:ctx:2]
        block = keys[-c.kappa :]
        assert len(set(block)) == c.kappa and all(1 <= k < half for k in keys)
        assert all(half <= v < c.vocab for v in values)
        assert len(set(values[-c.kappa :])) == c.kappa
        sup = [p for p in range(L) if y[p] != IGNORE]
        assert all(p >= ctx for p in sup)
        for p in sup:
            j = max(j for j in range(0, ctx, 2) if x[j] == x[p])  # last occurrence as a key
            assert y[p] == x[j + 1]
        if c.reduce_to_ar:
            assert sup == [ctx]
        else:
            assert sorted(x[p] for p in sup) == sorted(block * c.query_repeats)  # kappa * N_q targets


def test_registered_and_info():
    assert TASKS["mqar"] is MQAR
    info = mqar().info
    assert (info.vocab_size, info.n_classes, info.seq_len) == (128, 128, 64)
    assert mqar(L=32, reduce_to_ar=True).info.seq_len == 17
    with pytest.raises(ValidationError):
        MQARConfig(**BASE, bogus=1)  # extra keys are forbidden


def test_shapes_dtypes_ranges():
    b = draw(mqar(), n=5, seeds=(0, 1, 2))
    assert b.x.shape == b.y.shape == (3, 5, 64)
    assert b.x.dtype == b.y.dtype == torch.int64
    assert int(b.x.min()) >= 0 and int(b.x.max()) < 128
    sup = b.y[b.y != IGNORE]
    assert int(sup.min()) >= 64 and int(sup.max()) < 128


def test_docstring_example():
    t = build_task({"name": "mqar", "vocab": 20, "L": 16, "kappa": 2, "random_non_queries": False})
    b = t.sample(torch.tensor([1]), TRAIN, torch.tensor([[0]]))
    assert b.x[0, 0].tolist() == [4, 17, 9, 12, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 4, 0]
    y = [IGNORE] * 16
    y[12], y[14] = 12, 17
    assert b.y[0, 0].tolist() == y


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"random_non_queries": False},
        {"power_a": 0.01},
        {"num_passes": 3},
        {"key_repeats": 3},
        {"query_repeats": 3},
        {"kappa": 16, "L": 64},
        {"vocab": 65, "L": 64, "kappa": 4},
    ],
)
def test_brute_force_recall(kw):
    t = mqar(**kw)
    check_recall(t, draw(t, n=32, seeds=(0, 5)))


def test_layouts():
    # num_passes tiles the KV block
    b = draw(mqar(num_passes=2), n=16)
    assert torch.equal(b.x[..., :16], b.x[..., 16:32])
    # repeated keys: every chunk holds the same key set, in a fresh order, with values after it
    b = draw(mqar(key_repeats=3), n=16)
    chunks = b.x[..., :48].reshape(1, 16, 3, 16)
    ks = chunks[..., 0::2].sort(-1).values
    assert torch.equal(ks[:, :, 0], ks[:, :, 2]) and torch.equal(ks[:, :, 1], ks[:, :, 2])
    assert not torch.equal(chunks[..., 0::2][:, :, 0], chunks[..., 0::2][:, :, 2])  # permuted
    # repeated queries: each section of (L - 2 kappa)//N_q tokens asks every key once
    b = draw(mqar(query_repeats=2), n=16)
    for s in range(2):
        sec = slice(16 + 24 * s, 16 + 24 * (s + 1))
        assert ((b.y[..., sec] != IGNORE).sum(-1) == 8).all()
    # AR: all facts then one query at position 2 kappa, whose target is its value
    t = mqar(L=32, reduce_to_ar=True)
    b = draw(t, n=64)
    assert b.x.shape == (1, 64, 17)
    assert ((b.y != IGNORE).sum(-1) == 1).all() and (b.y[..., 16] != IGNORE).all()
    check_recall(t, b)
    assert len(set(b.x[0, :, 16].tolist())) > 20  # the queried key varies


def test_gap_distribution_matches_weighted_sampling_without_replacement():
    # space = 4 slots, kappa = 2: compare ordered (gap of key 1, gap of key 2) frequencies with the
    # exact successive-sampling probabilities p_i * p_j / (1 - p_i), p_i ~ a * i^(a-1)
    a, n = 0.3, 20000
    t = build_task({"name": "mqar", "vocab": 13, "L": 12, "kappa": 2, "power_a": a})
    b = draw(t, n=n)
    x, y = b.x[0], b.y[0]
    gaps = torch.zeros(n, 2, dtype=torch.int64)
    for m in range(2):  # key m sits at context slot 2m
        hit = (x[:, 4:] == x[:, 2 * m : 2 * m + 1]) & (y[:, 4:] != IGNORE)
        assert (hit.sum(-1) == 1).all()
        gaps[:, m] = hit.long().argmax(-1) // 2
    w = [a * i ** (a - 1) for i in range(1, 5)]
    p = [v / sum(w) for v in w]
    for i, j in itertools.permutations(range(4), 2):
        freq = float(((gaps[:, 0] == i) & (gaps[:, 1] == j)).double().mean())
        assert abs(freq - p[i] * p[j] / (1 - p[i])) < 0.012, (i, j)


def test_power_a_uniform_vs_concentrated():
    def slot_hist(power_a):
        b = draw(mqar(kappa=4, power_a=power_a), n=2000)
        pos = (b.y[0] != IGNORE).nonzero()[:, 1]
        return torch.bincount((pos - 8) // 2, minlength=28).double() / pos.numel()

    uni = slot_hist(1.0)
    assert (uni - 1 / 28).abs().max() < 0.25 / 28
    conc = slot_hist(0.01)
    assert float(conc[:7].sum()) > 0.5 and float(conc[0]) > 3 * float(conc[-1])
    assert float(uni[:7].sum()) < 0.3


def test_every_knob_changes_the_data():
    s, idx = torch.tensor([0]), torch.arange(16)[None]

    def differs(a, b):
        return a.x.shape != b.x.shape or not (torch.equal(a.x, b.x) and torch.equal(a.y, b.y))

    b0 = mqar().sample(s, TRAIN, idx)
    for kw in (
        {"vocab": 130},
        {"L": 62},
        {"kappa": 7},
        {"power_a": 0.01},
        {"random_non_queries": False},
        {"num_passes": 2},
        {"key_repeats": 2},
        {"query_repeats": 2},
    ):
        assert differs(b0, mqar(**kw).sample(s, TRAIN, idx)), kw
    ar0 = mqar(L=32).sample(s, TRAIN, idx)
    ar1 = mqar(L=32, reduce_to_ar=True).sample(s, TRAIN, idx)
    assert differs(ar0, ar1)
    assert torch.equal(ar1.x, ar0.x[..., :17])  # AR is the truncated MQAR sample


def test_splits_and_seeds_give_different_streams():
    t = mqar()
    s = torch.tensor([0])
    xs = [draw(t, n=64, split=split).x for split in (TRAIN, VAL, TEST)]
    for a, b in itertools.combinations(range(3), 2):
        assert not torch.equal(xs[a], xs[b])
    assert not torch.equal(draw(t, seeds=(1,)).x, xs[0])
    train = {tuple(r) for r in t.sample(s, TRAIN, torch.arange(2000)[None]).x[0].tolist()}
    for split in (VAL, TEST):
        other = {tuple(r) for r in t.sample(s, split, torch.arange(2000)[None]).x[0].tolist()}
        assert not train & other


def test_samples_are_pure_functions_of_seed_split_index():
    t = mqar(key_repeats=2)
    alone = t.sample(torch.tensor([11]), VAL, torch.arange(6)[None])
    packed = t.sample(torch.tensor([3, 11, 4]), VAL, torch.arange(6).expand(3, 6))
    assert torch.equal(alone.x[0], packed.x[1]) and torch.equal(alone.y[0], packed.y[1])
    sub = t.sample(torch.tensor([11]), VAL, torch.tensor([[4, 1]]))
    assert torch.equal(sub.x[0], alone.x[0, [4, 1]]) and torch.equal(sub.y[0], alone.y[0, [4, 1]])


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"vocab": 64}, "must exceed the sequence length L=64"),
        ({"L": 63, "vocab": 100}, "L=63 must be even"),
        ({"kappa": 17}, "exceeds L=64"),
        ({"num_passes": 4}, "exceeds L=64"),
        ({"vocab": 10, "L": 8, "kappa": 5}, "kappa=5 distinct keys"),
        ({"key_repeats": 4}, "key_repeats=4 needs"),
        ({"query_repeats": 4}, "query_repeats=4 needs"),
        ({"key_repeats": 2, "query_repeats": 2}, "cannot both be > 1"),
        ({"num_passes": 2, "key_repeats": 2}, "cannot be combined"),
        ({"reduce_to_ar": True}, "set L=32"),
        ({"power_a": 0.0}, "greater than 0"),
        ({"kappa": 0}, "greater than or equal to 1"),
    ],
)
def test_invalid_configs(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        MQARConfig(**{**BASE, **kw})


def test_sample_has_no_python_loop():
    src = inspect.getsource(MQAR.sample) + inspect.getsource(inspect.getmodule(MQAR)._weighted_gaps)
    assert "for " not in src and "while " not in src
    b = draw(mqar(), n=128, seeds=tuple(range(8)))  # one vectorised call for the (8, 128) pack
    assert b.x.shape == (8, 128, 64)
