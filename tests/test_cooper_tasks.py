"""cooper2026 tasks: selective copy and associative recall with decoding (every rule, brute force)."""

import itertools

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.tasks import TASKS, build_task
from ssmrepro.tasks.base import IGNORE, TEST, TRAIN, VAL
from ssmrepro.tasks.decode_recall import DecodeRecall, decode_state
from ssmrepro.tasks.selective_copy import SelectiveCopy


def draw(task, n=64, seeds=(0,), split=TRAIN):
    s = torch.tensor(seeds)
    return task.sample(s, split, torch.arange(n).expand(len(seeds), n))


def sc(**kw):
    return build_task({"name": "selective_copy", **kw})


def dr(**kw):
    return build_task({"name": "decode_recall", **kw})


# ---------------------------------------------------------------------------------------------
# brute-force references, one sequence at a time, written as the fork's loops


def copy_ref(x, W, N, offset):
    """Selective copy: y[t] = x[t - n], n the value of the last number at or before t."""
    y, n = [], None
    for t, tok in enumerate(x):
        if W <= tok < W + N:
            n = tok - W + offset
        y.append(x[t - n] if n is not None and t - n >= 0 else IGNORE)
    return y


def decode_ref(x, W):
    """AR with decoding: record assoc[x[t-1]] = x[t], then update s with a bit, then look up V_s."""
    assoc, s, y = {}, 0, []
    for t, tok in enumerate(x):
        if t >= 1:
            assoc[x[t - 1]] = tok
        if tok in (W, W + 1):
            s = (2 * s + (tok - W)) % W
        y.append(assoc.get(s, IGNORE))
    return y


# ---------------------------------------------------------------------------------------------
# selective copy


def test_selective_copy_registered_and_info():
    assert TASKS["selective_copy"] is SelectiveCopy
    info = sc().info
    assert (info.vocab_size, info.n_classes, info.seq_len) == (34, 34, 100)  # 26 + 5 + 3
    assert sc(words=200).info.vocab_size == 208 and sc(words=1000).info.vocab_size == 1008
    with pytest.raises(ValidationError):
        sc(bogus=1)
    with pytest.raises(ValidationError):
        sc(L=10, L_min=11)


def test_selective_copy_docstring_example():
    t = sc(words=4, numbers=2, number_offset=2, p=0.3, L=12)
    b = t.sample(torch.tensor([0]), TRAIN, torch.tensor([[0]]))
    assert b.x[0, 0].tolist() == [5, 4, 3, 5, 4, 0, 2, 3, 3, 2, 0, 5]
    I = IGNORE
    assert b.y[0, 0].tolist() == [I, I, 5, 5, 3, 5, 4, 0, 2, 3, 3, 3]


@pytest.mark.parametrize("kw", [{}, {"p": 0.5}, {"numbers": 3, "number_offset": 1},
                                {"words": 200}, {"distribution": "mixed"}])
def test_selective_copy_brute_force(kw):
    t = sc(L=40, **kw)
    c = t.config
    b = draw(t, n=64, seeds=(0, 3))
    for e, i in itertools.product(range(2), range(64)):
        x = b.x[e, i].tolist()
        assert b.y[e, i].tolist() == copy_ref(x, c.words, c.numbers, c.number_offset)


def test_selective_copy_token_frequencies_and_specials():
    t = sc(p=0.2)
    x = draw(t, n=2000).x
    is_num = (x >= 26) & (x < 31)
    assert abs(float(is_num.double().mean()) - 0.2) < 0.01
    counts = torch.bincount(x[is_num].flatten() - 26, minlength=5).double()
    assert ((counts / counts.sum()) - 0.2).abs().max() < 0.01  # each number p/N
    assert int(x.max()) < 31  # <bos>, <eos>, <null> never appear at full length
    y = draw(t, n=2000).y
    sup = y[y != IGNORE]
    assert ((sup >= 26) & (sup < 31)).any()  # a copied token may itself be a number token


def test_selective_copy_mixed_distribution():
    t = sc(distribution="mixed", p=0.2, p_sparse=0.03)
    x = draw(t, n=4000).x[0]
    is_num = (x >= 26) & (x < 31)
    last_num = is_num[:, -1]
    # dense half: last token forced to a number; sparse half: numbers at rate 0.03
    body = is_num[:, :-1].double().mean(-1)
    dense = body > 0.1
    assert abs(float(dense.double().mean()) - 0.5) < 0.03
    assert bool(last_num[dense].all())
    assert abs(float(is_num[~dense, :-1].double().mean()) - 0.03) < 0.005
    assert abs(float(is_num[dense, :-1].double().mean()) - 0.2) < 0.01


def test_selective_copy_variable_lengths_and_last_only():
    t = sc(L=50, L_min=20)
    b = draw(t, n=500)
    null = 33
    pad = b.x == null
    n = 50 - pad.sum(-1)
    assert int(n.min()) == 20 and int(n.max()) == 50
    # padding is a suffix, with IGNORE targets; the prefix is the fixed-length rule
    assert bool((pad == (torch.arange(50) >= n[..., None])).all())
    assert bool((b.y[pad] == IGNORE).all())
    for i in range(50):
        x = b.x[0, i, : n[0, i]].tolist()
        assert b.y[0, i, : n[0, i]].tolist() == copy_ref(x, 26, 5, 5)
    last = sc(L=50, L_min=20, supervise="last")
    bl = draw(last, n=500)
    assert torch.equal(bl.x, b.x)
    sup = bl.y != IGNORE
    assert int(sup.sum(-1).max()) == 1
    idx = torch.arange(50).expand_as(sup)
    assert bool((idx[sup] == (n[..., None] - 1).expand_as(sup)[sup]).all())
    assert torch.equal(bl.y[sup], b.y[sup])


def test_selective_copy_every_knob_changes_the_data():
    base = dict(words=26, numbers=5, number_offset=5, p=0.2, L=30)
    b0 = draw(sc(**base), n=32)
    for kw in ({"words": 27}, {"numbers": 4}, {"number_offset": 4}, {"p": 0.3}, {"L": 31},
               {"L_min": 10}, {"distribution": "mixed"}, {"supervise": "last"},
               {"distribution": "mixed", "p_sparse": 0.1}):
        if "p_sparse" in kw:
            b0 = draw(sc(**base, distribution="mixed"), n=32)
        b1 = draw(sc(**{**base, **kw}), n=32)
        assert b1.x.shape != b0.x.shape or not (torch.equal(b1.x, b0.x) and torch.equal(b1.y, b0.y)), kw


# ---------------------------------------------------------------------------------------------
# associative recall with decoding


def test_decode_recall_registered_and_info():
    assert TASKS["decode_recall"] is DecodeRecall
    info = dr().info
    assert (info.vocab_size, info.n_classes, info.seq_len) == (37, 37, 100)  # 32 + 2 bits + 3
    assert dr().config.n_bits == 5
    with pytest.raises(ValidationError):
        dr(words=30)  # not a power of two: refused (the fork would round down to 16)
    with pytest.raises(ValidationError):
        dr(L=10, L_min=12)


def test_decode_recall_docstring_example():
    t = dr(words=4, p=0.3, L=12)
    b = t.sample(torch.tensor([5]), TRAIN, torch.tensor([[0]]))
    assert b.x[0, 0].tolist() == [2, 4, 4, 5, 1, 4, 5, 1, 2, 0, 0, 2]
    assert decode_state(b.x, 4)[0, 0].tolist() == [0, 0, 0, 1, 1, 2, 1, 1, 1, 1, 1, 1]
    I = IGNORE
    assert b.y[0, 0].tolist() == [I, I, I, I, I, 4, 4, 4, 2, 2, 2, 2]


@pytest.mark.parametrize("kw", [{}, {"p": 0.05}, {"p": 0.5}, {"p": 0.9}, {"words": 8},
                                {"words": 2}])
def test_decode_recall_brute_force(kw):
    t = dr(L=60, **kw)
    W = t.config.words
    b = draw(t, n=64, seeds=(0, 7))
    for e, i in itertools.product(range(2), range(64)):
        assert b.y[e, i].tolist() == decode_ref(b.x[e, i].tolist(), W)


def test_decode_recall_rules():
    t = dr(p=0.2, L=100)
    b = draw(t, n=2000)
    x, y = b.x, b.y
    is_bit = (x == 32) | (x == 33)
    assert abs(float(is_bit.double().mean()) - 0.2) < 0.01
    assert abs(float((x == 32).double().mean()) - 0.1) < 0.01  # #0 and #1 equally likely
    assert int(x.max()) <= 33
    sup = y != IGNORE
    assert 0.2 < float(sup.double().mean()) < 1.0
    assert ((y[sup] == 32) | (y[sup] == 33)).any()  # the recalled token may be a bit
    # targets equal to the current token happen (V_s occurred at t - 1)
    assert (y[sup] == x[sup]).any()
    # the state only changes at bits
    s = decode_state(x, 32)
    changed = s[..., 1:] != s[..., :-1]
    assert not bool((changed & ~is_bit[..., 1:]).any())


def test_decode_recall_variable_lengths_and_last():
    t = dr(L=50, L_min=20)
    b = draw(t, n=300)
    null = 36
    n = 50 - (b.x == null).sum(-1)
    assert int(n.min()) == 20 and int(n.max()) == 50
    assert bool((b.y[b.x == null] == IGNORE).all())
    for i in range(50):
        x = b.x[0, i, : n[0, i]].tolist()
        assert b.y[0, i, : n[0, i]].tolist() == decode_ref(x, 32)
    bl = draw(dr(L=50, L_min=20, supervise="last"), n=300)
    sup = bl.y != IGNORE
    assert int(sup.sum(-1).max()) == 1 and torch.equal(bl.y[sup], b.y[sup])


def test_decode_recall_every_knob_changes_the_data():
    base = dict(words=32, p=0.2, L=40)
    b0 = draw(dr(**base), n=32)
    for kw in ({"words": 16}, {"p": 0.3}, {"L": 41}, {"L_min": 20}, {"supervise": "last"}):
        b1 = draw(dr(**{**base, **kw}), n=32)
        assert b1.x.shape != b0.x.shape or not (torch.equal(b1.x, b0.x) and torch.equal(b1.y, b0.y)), kw


# ---------------------------------------------------------------------------------------------
# both: streams


@pytest.mark.parametrize("make", [lambda: sc(L=30), lambda: dr(L=30),
                                  lambda: sc(L=30, L_min=10, distribution="mixed")])
def test_streams_splits_seeds_and_packs(make):
    t = make()
    idx = torch.arange(200)[None]
    xs = [t.sample(torch.tensor([0]), s, idx).x for s in (TRAIN, VAL, TEST)]
    for a in range(3):
        for c in range(a + 1, 3):
            assert not torch.equal(xs[a], xs[c])
    train = {tuple(r) for r in xs[0][0].tolist()}
    assert not train & {tuple(r) for r in xs[1][0].tolist()}
    assert not torch.equal(xs[0], t.sample(torch.tensor([1]), TRAIN, idx).x)
    alone = t.sample(torch.tensor([11]), TRAIN, idx)
    packed = t.sample(torch.tensor([3, 11]), TRAIN, idx.expand(2, 200))
    assert torch.equal(alone.x[0], packed.x[1]) and torch.equal(alone.y[0], packed.y[1])
    again = t.sample(torch.tensor([11]), TRAIN, idx)
    assert torch.equal(alone.x, again.x)


# ---------------------------------------------------------------------------------------------
# multi-key associative recall and needle in a haystack (cooper2026 part 2)


def mkar_ref(x, k):
    """The fork's loop: at t, look up the k-gram ending at t among stored k-grams, after storing
    the k-gram ending at t - 1 with value x[t] (stores start at t = k + 1)."""
    store, y = {}, []
    for t in range(len(x)):
        if t >= k + 1:
            store[tuple(x[t - k:t])] = x[t]
        y.append(store.get(tuple(x[t - k + 1:t + 1]), IGNORE) if t >= k - 1 else IGNORE)
    return y


def test_multikey_recall_docstring_example_and_info():
    t = build_task({"name": "multikey_recall", "words": 3, "key_len": 2, "L": 12})
    b = draw(t, 1)
    I = IGNORE  # noqa: E741
    assert b.x[0, 0].tolist() == [1, 0, 2, 2, 0, 0, 1, 2, 2, 1, 0, 2]
    assert b.y[0, 0].tolist() == [I, I, I, I, I, I, I, I, 0, I, I, 2]
    info = build_task({"name": "multikey_recall"}).info
    assert (info.vocab_size, info.n_classes, info.seq_len) == (11, 11, 100)  # 8 + 3


@pytest.mark.parametrize("kw", [{}, {"key_len": 1, "words": 5}, {"key_len": 3, "words": 3, "L": 40}])
def test_multikey_recall_brute_force(kw):
    t = build_task({"name": "multikey_recall", **kw})
    b = draw(t, 32, seeds=(0, 3))
    for e, i in itertools.product(range(2), range(32)):
        assert b.y[e, i].tolist() == mkar_ref(b.x[e, i].tolist(), t.config.key_len)
    assert int(b.x.max()) < t.config.words  # words only
    sup = b.y != IGNORE
    assert 0.1 < float(sup.double().mean()) < 1.0


def test_multikey_recall_lengths_and_knobs():
    t = build_task({"name": "multikey_recall", "L": 50, "L_min": 20})
    b = draw(t, 200)
    null = t.info.vocab_size - 1
    n = (b.x != null).sum(-1)
    assert int(n.min()) == 20 and int(n.max()) == 50
    assert bool((b.y[b.x == null] == IGNORE).all())
    for i in range(5):
        x = b.x[0, i, : n[0, i]].tolist()
        assert b.y[0, i, : n[0, i]].tolist() == mkar_ref(x, 2)
    base = {"name": "multikey_recall"}
    b0 = draw(build_task(base), 8)
    for kw in ({"words": 6}, {"key_len": 3}, {"L": 60}, {"L_min": 30}):
        b1 = draw(build_task({**base, **kw}), 8)
        assert b1.x.shape != b0.x.shape or not (torch.equal(b1.x, b0.x) and torch.equal(b1.y, b0.y)), kw
    assert not torch.equal(draw(build_task(base), 8, split=VAL).x, b0.x)
    with pytest.raises(ValidationError):
        build_task({"name": "multikey_recall", "L": 10, "L_min": 20})


def test_needle_rules():
    t = build_task({"name": "needle", "words": 5, "L": 10})
    b = draw(t, 1)
    I = IGNORE  # noqa: E741
    assert b.x[0, 0].tolist() == [3, 1, 3, 5, 4, 4, 0, 0, 2, 6]
    assert b.y[0, 0].tolist() == [I, I, I, 4, 4, 4, 4, 4, 4, 4]
    t = build_task({"name": "needle"})
    assert t.info.vocab_size == 105  # 100 + 2 markers + 3
    b = draw(t, 400, seeds=(0, 1))
    W = 100
    assert bool((b.x[..., -1] == W + 1).all())
    marker = b.x == W
    assert bool((marker.sum(-1) == 1).all())
    q = marker.long().argmax(-1)
    assert int(q.max()) < 50 and int(q.min()) == 0
    needle = b.x.gather(-1, (q + 1)[..., None])
    pos = torch.arange(100)
    sup = b.y != IGNORE
    assert torch.equal(sup, pos >= q[..., None])
    assert bool((b.y[sup] == needle.expand_as(b.y)[sup]).all())
    assert int(b.x[..., :-1][~marker[..., :-1]].max()) < W  # the haystack is words
    b0 = draw(t, 8)
    for kw in ({"words": 50}, {"L": 60}):
        b1 = draw(build_task({"name": "needle", **kw}), 8)
        assert b1.x.shape != b0.x.shape or not torch.equal(b1.x, b0.x), kw
    assert not torch.equal(draw(t, 8, split=TEST).x, b0.x)
