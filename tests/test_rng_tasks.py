import torch

from ssmrepro.tasks import TASKS, build_task, rng
from ssmrepro.tasks.base import IGNORE, TEST, TRAIN, VAL


def test_hash_is_deterministic_and_uniform():
    k = rng.key(torch.tensor([7]))
    u1, u2 = rng.uniform(k, 50000), rng.uniform(k, 50000)
    assert torch.equal(u1, u2)
    assert abs(float(u1.mean()) - 0.5) < 0.01
    assert abs(float(u1.std()) - (1 / 12) ** 0.5) < 0.01
    counts = torch.bincount(rng.randint(k, 60000, 0, 6).flatten(), minlength=6).double()
    assert (counts / counts.sum() - 1 / 6).abs().max() < 0.01


def test_keys_differ_by_every_component():
    base = rng.key(torch.tensor([1]), 0, 5)
    assert not torch.equal(base, rng.key(torch.tensor([2]), 0, 5))
    assert not torch.equal(base, rng.key(torch.tensor([1]), 1, 5))
    assert not torch.equal(base, rng.key(torch.tensor([1]), 0, 6))
    big = rng.key(torch.tensor([1]), 0, 5 + (1 << 32))  # high bits of an index matter too
    assert not torch.equal(base, big)


def test_sample_without_replacement_is_distinct():
    k = rng.key(torch.arange(100))
    s = rng.sample_without_replacement(k, 20, 10)
    assert s.shape == (100, 10)
    assert all(len(set(row.tolist())) == 10 for row in s)
    assert int(s.max()) < 20


def keep(**kw):
    cfg = {"name": "keep_nth", "n": 3, "T": 8, "vocab": 10, **kw}
    return build_task(cfg)


def test_keep_nth_targets():
    t = keep()
    b = t.sample(torch.tensor([0, 1]), TRAIN, torch.arange(4).expand(2, 4))
    assert b.x.shape == (2, 4, 8) and int(b.x.max()) < 10 and int(b.x.min()) >= 0
    assert (b.y[..., :2] == IGNORE).all()
    assert (b.y[..., 2:] == b.x[..., 2:3]).all()


def test_member_data_independent_of_pack():
    t = keep()
    idx = torch.arange(5)
    alone = t.sample(torch.tensor([11]), TRAIN, idx[None])
    packed = t.sample(torch.tensor([3, 11, 4]), TRAIN, idx.expand(3, 5))
    assert torch.equal(alone.x[0], packed.x[1])


def test_splits_and_seeds_give_different_streams():
    t = keep(T=20, vocab=128)
    idx = torch.arange(64)[None]
    s = torch.tensor([0])
    xs = [t.sample(s, split, idx).x for split in (TRAIN, VAL, TEST)]
    for a in range(3):
        for b in range(a + 1, 3):
            assert not torch.equal(xs[a], xs[b])
    # no training sequence reappears in validation or test (collisions are ~impossible at 128^20)
    train = {tuple(r) for r in t.sample(s, TRAIN, torch.arange(2000)[None]).x[0].tolist()}
    for split in (VAL, TEST):
        other = {tuple(r) for r in t.sample(s, split, torch.arange(2000)[None]).x[0].tolist()}
        assert not train & other


def test_every_keep_nth_knob_changes_the_data():
    base = keep(n=3, T=8, vocab=10)
    s, idx = torch.tensor([0]), torch.arange(16)[None]
    b0 = base.sample(s, TRAIN, idx)
    for kw in ({"n": 4}, {"T": 9}, {"vocab": 11}):
        b1 = keep(**{"n": 3, "T": 8, "vocab": 10, **kw}).sample(s, TRAIN, idx)
        assert b1.x.shape != b0.x.shape or not (
            torch.equal(b1.x, b0.x) and torch.equal(b1.y, b0.y)
        ), kw


def test_registry_configs_reject_unknown_keys():
    import pydantic
    import pytest

    for cls in TASKS.values():
        with pytest.raises(pydantic.ValidationError):
            cls.Config(name=cls.name, not_a_knob=1)


def test_hash32_in_place_equals_reference():
    """The in-place hash equals the one-tensor-per-op reference bit for bit, over the whole
    uint32 range's edges and random values, and leaves its input unchanged."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.tensor([0, 1, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                 (1 << 40) + 5, -1]),
                   torch.randint(0, 1 << 62, (10000,), generator=g)])
    before = x.clone()
    assert torch.equal(rng.hash32(x), rng.hash32_ref(x))
    assert torch.equal(x, before)
    k = rng.key(torch.arange(5), 1, torch.arange(7)[:, None])
    mixed = rng.combine(k.unsqueeze(-1), torch.arange(9)) + 0x27D4EB2F
    assert torch.equal(rng.bits(k, 9), rng.hash32_ref(mixed))
