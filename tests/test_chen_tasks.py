"""chen2025's tasks: the composite function task and inverse sequence matching (every rule)."""

import itertools

import pytest
import torch
from pydantic import ValidationError

from ssmrepro.tasks import build_task
from ssmrepro.tasks.base import IGNORE, TEST, TRAIN, VAL
from ssmrepro.tasks.composite import SET1, SET1_PAIRS, SET2_BASE, SET2_PAIRS, pair_shifts
from ssmrepro.tasks.inverse_matching import valid_sets

N = 4000  # samples per check


def comp(**kw):
    return build_task({"name": "composite", **kw})


def _draw(task, split, n=N, seed=0, seeds=None):
    s = torch.tensor(seeds if seeds is not None else [seed])
    return task.sample(s, split, torch.arange(n).expand(len(s), -1))


def _parse(b):
    """(key, 1-based key position, pair string, target) per sample of member 0."""
    x, y = b.x[0], b.y[0]
    anchor = x < 10
    first = anchor.int().argmax(-1)  # index of the first anchor
    key = x.gather(-1, (first - 1)[:, None])[:, 0]
    a = x.gather(-1, first[:, None])[:, 0]
    bb = x.gather(-1, (first + 1)[:, None])[:, 0]
    pairs = [f"{int(i)}{int(j)}" for i, j in zip(a, bb)]
    return key, first, pairs, y[:, -1]


# ------------------------------------------------------------------ composite function task


def test_composite_layout_and_targets_last_position_only():
    t = comp()
    b = _draw(t, TRAIN)
    assert b.x.shape == (1, N, 8) and t.info.seq_len == 8 and t.info.n_classes == 128
    assert (b.y[..., :-1] == IGNORE).all() and (b.y[..., -1] != IGNORE).all()
    x = b.x[0]
    assert ((x < 20) == ((x >= 1) & (x <= 4))).all()  # anchors 1-4, everything else in [20, 100)
    assert int(x.max()) < 100
    assert ((x < 10).sum(-1) == 2).all()  # exactly two anchors, adjacent, right after the key
    key, pos, pairs, tgt = _parse(b)
    assert ((x < 10).gather(-1, pos[:, None] + 1)[:, 0]).all()  # the second anchor follows
    assert (pos >= 1).all()  # a key precedes the anchors
    shifts = pair_shifts(t.config)
    assert (tgt == key + torch.tensor([shifts[p] for p in pairs])).all()


def test_composite_standard_functions():
    s = pair_shifts(comp().config)
    f = {1: 5, 2: 1, 3: -2, 4: -8}
    for a, b in itertools.product(f, f):
        p = f"{a}{b}"
        if p not in ("34", "43"):
            assert s[p] == f[a] + f[b], p
    assert s["34"] == -6 and s["43"] == -10  # manual 34; 43 composite = f_4 + f_3
    assert pair_shifts(comp(target43="symmetric").config)["43"] == -6
    assert len(s) == 16


def test_composite_train_pairs_exclude_43_and_cover_the_rest():
    key, pos, pairs, _ = _parse(_draw(comp(), TRAIN, 8000))
    counts = {p: pairs.count(p) for p in set(pairs)}
    assert "43" not in counts and len(counts) == 15
    assert max(counts.values()) / min(counts.values()) < 1.4  # uniform over 15 pairs
    test_pairs = set(_parse(_draw(comp(), TEST, 8000))[2])
    assert len(test_pairs) == 16 and "43" in test_pairs  # the test set has every pair


def test_composite_key_position_split_mod_8():
    for split in (TRAIN, VAL, TEST):
        key, pos, _, _ = _parse(_draw(comp(), split))
        p = pos  # first anchor index (0-based) = the key's 1-based position
        same = (key % 8) == (p % 8)
        if split == TRAIN:
            assert not same.any()  # e.g. key 33 never sits in position 1
        else:
            assert same.all()
            assert set((key % 8).tolist()) <= set(range(1, 7))  # positions 1..6 hold a key
        assert set(p.tolist()) == set(range(1, 7))


def test_composite_test_pair_and_target43_eval_sets():
    c43 = _parse(_draw(comp(test_pair="43"), TEST))
    s43 = _parse(_draw(comp(test_pair="43", target43="symmetric"), TEST))
    assert set(c43[2]) == {"43"} and set(s43[2]) == {"43"}
    assert torch.equal(c43[0], s43[0])  # same sequences, two labellings
    assert (c43[3] == c43[0] - 10).all() and (s43[3] == s43[0] - 6).all()
    # the training split ignores test_pair (43 is never trained)
    assert "43" not in _parse(_draw(comp(test_pair="43"), TRAIN))[2]


def test_composite_full_symmetry():
    t = comp(variant="full_symmetry")
    s = pair_shifts(t.config)
    assert len(s) == 20 and not any(p[0] == p[1] for p in s)
    for p in SET1_PAIRS:
        assert s[p] == SET1[int(p[0])] + SET1[int(p[1])]
    set2 = {**SET2_BASE, 4: 4}
    for p in SET2_PAIRS:
        assert s[p] == set2[int(p[0])] + set2[int(p[1])]
    assert s["43"] == s["34"] == -10  # the symmetric answer = the composite one here
    for p in ("01", "10", "34", "43", "24", "42"):
        assert s[p] == s[p[::-1]]  # every pair function is symmetric
    key, pos, pairs, tgt = _parse(_draw(t, TRAIN, 8000))
    assert set(pairs) == set(s) - {"43"}
    assert pair_shifts(comp(variant="full_symmetry", set2_shift4=-3).config)["04"] == -12
    key, pos, pairs, tgt = _parse(_draw(comp(variant="full_symmetry", test_pair="43"), TEST))
    assert (tgt == key - 10).all()


def test_composite_every_knob_changes_the_data():
    base = dict(variant="standard", L=8, modulus=8, key_low=20, key_high=100, vocab=128,
                test_pair=None, target43="composite", set2_shift4=4)
    changes = [("variant", "full_symmetry"), ("L", 9), ("modulus", 7), ("key_low", 24),
               ("key_high", 90), ("vocab", 120), ("test_pair", "43"), ("target43", "symmetric"),
               ("set2_shift4", 2)]
    for k, v in changes:
        cfg = {**base, k: v}
        if k in ("target43",):
            cfg["test_pair"] = "43"
            ref = {**base, "test_pair": "43"}
        elif k == "set2_shift4":
            cfg["variant"], ref = "full_symmetry", {**base, "variant": "full_symmetry"}
        else:
            ref = base
        t0, t1 = comp(**ref), comp(**cfg)
        if t0.info != t1.info:
            continue  # vocab: the classes differ
        differs = False
        for split in (TRAIN, TEST):
            b0, b1 = _draw(t0, split, 256), _draw(t1, split, 256)
            differs |= b0.x.shape != b1.x.shape or not (
                torch.equal(b0.x, b1.x) and torch.equal(b0.y, b1.y))
        assert differs, k
    assert comp(vocab=120).info.n_classes == 120


def test_composite_validation():
    with pytest.raises(ValidationError):
        comp(test_pair="00")  # not a pair of the standard variant
    with pytest.raises(ValidationError):
        comp(key_high=125)  # key + 10 would leave the vocabulary (targets never wrap)
    with pytest.raises(ValidationError):
        comp(key_low=20, key_high=24)  # not every class mod 8
    with pytest.raises(ValidationError):
        comp(bogus=1)


def test_composite_streams_and_pack_independence():
    t = comp()
    xs = [_draw(t, s, 500).x for s in (TRAIN, VAL, TEST)]
    assert not torch.equal(xs[1], xs[2])  # val and test: same rule, separate streams
    alone = _draw(t, TEST, 64, seeds=[5])
    packed = _draw(t, TEST, 64, seeds=[1, 5])
    assert torch.equal(alone.x[0], packed.x[1]) and torch.equal(alone.y[0], packed.y[1])
    assert not torch.equal(_draw(t, TRAIN, 64, seed=1).x, _draw(t, TRAIN, 64, seed=2).x)


# ------------------------------------------------------------------ inverse sequence matching


def inv(**kw):
    return build_task({"name": "inverse_matching", **kw})


def _inv_parts(b, n_fill):
    x = b.x[0]
    keys = x[:, :20].reshape(-1, 5, 4)
    return keys[..., :3], keys[..., 3], x[:, 20 : 20 + n_fill], x[:, -3:], b.y[0, :, -1]


@pytest.mark.parametrize("n_fill", [6, 9, 15])
def test_inverse_layout_answer_and_length(n_fill):
    t = inv(n_fill=n_fill)
    assert t.info.seq_len == 5 * 4 + n_fill + 3 and t.info.n_classes == 5
    b = _draw(t, TRAIN, 2000)
    assert b.x.shape == (1, 2000, 23 + n_fill)
    assert (b.y[..., :-1] == IGNORE).all()
    seqs, sep, fill, query, tgt = _inv_parts(b, n_fill)
    sets = seqs.sort(-1).values
    assert (sets == sets[:, :1]).all()  # every key sequence is a permutation of one set
    assert (sets[:, 0, 0] < sets[:, 0, 1]).all() and (sets[:, 0, 1] < sets[:, 0, 2]).all()
    for i in range(2000):
        perms = {tuple(r) for r in seqs[i].tolist()}
        assert len(perms) == 5  # five distinct permutations of the six
        s = set(sets[i, 0].tolist())
        assert not (set(sep[i].tolist()) | set(fill[i].tolist())) & s  # separators/fillers not in the set
        match = [j for j in range(5) if seqs[i, j].flip(-1).tolist() == query[i].tolist()]
        assert match == [int(tgt[i])]  # exactly one key sequence reversed is the query


def test_inverse_targets_uniform_and_forward_traps_exist():
    seqs, _, _, query, tgt = _inv_parts(_draw(inv(), TRAIN, 6000), 6)
    counts = torch.bincount(tgt, minlength=5).double()
    assert (counts / counts.sum() - 0.2).abs().max() < 0.03  # chance = 0.2
    forward = (seqs == query[:, None]).all(-1).any(-1)  # the query also appears forward
    assert 0.6 < float(forward.double().mean()) < 0.95  # (4/5 unless the dropped one is hit)


def test_inverse_splits_mod3_and_ood():
    def residues(split, **kw):
        seqs, sep, fill, query, _ = _inv_parts(_draw(inv(**kw), split, 3000), 6)
        r = seqs[:, 0] % 3
        return seqs, (r == r[:, :1]).all(-1), torch.cat([seqs.flatten(1), sep, fill], 1)

    seqs, same, vals = residues(TRAIN)
    assert not same.any() and int(vals.min()) >= 20 and int(vals.max()) <= 100
    for split in (VAL, TEST):
        seqs, same, vals = residues(split)
        assert same.all() and int(vals.min()) >= 20 and int(vals.max()) <= 100
    seqs, same, vals = residues(TEST, ood=True)
    assert int(vals.min()) >= 101 and int(vals.max()) <= 200
    assert same.any() and not same.all()  # no congruence rule out of distribution
    assert int(vals.max()) > 190 and int(vals.min()) < 110
    # the ood flag leaves the training split alone
    assert torch.equal(_draw(inv(ood=True), TRAIN, 64).x, _draw(inv(), TRAIN, 64).x)


def test_inverse_valid_set_tables():
    assert len(valid_sets(20, 100, "mixed")) == 76545
    assert len(valid_sets(20, 100, "same")) == 8775
    assert len(valid_sets(101, 200, "any")) == 161700


def test_inverse_every_knob_changes_the_data():
    base = dict(n_fill=6, low=20, high=100, ood_low=101, ood_high=200, ood=False)
    for k, v in [("n_fill", 9), ("low", 30), ("high", 90), ("ood_low", 120), ("ood_high", 180),
                 ("ood", True)]:
        cfg = {**base, k: v}
        if k.startswith("ood_"):
            cfg["ood"], ref = True, {**base, "ood": True}
        else:
            ref = base
        b0, b1 = _draw(inv(**ref), TEST, 256), _draw(inv(**cfg), TEST, 256)
        assert b0.x.shape != b1.x.shape or not torch.equal(b0.x, b1.x), k


def test_inverse_validation_and_streams():
    with pytest.raises(ValidationError):
        inv(low=20, high=25)
    t = inv()
    xs = [_draw(t, s, 300).x for s in (TRAIN, VAL, TEST)]
    assert not torch.equal(xs[1], xs[2])
    alone = _draw(t, TRAIN, 32, seeds=[9])
    packed = _draw(t, TRAIN, 32, seeds=[2, 9])
    assert torch.equal(alone.x[0], packed.x[1])
