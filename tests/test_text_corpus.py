"""text_corpus: windows of a byte corpus, disjoint splits, counter-based sampling, clear errors."""

import os

import pytest
import torch

from ssmrepro.data import DataUnavailable
from ssmrepro.tasks import TASKS, build_task
from ssmrepro.tasks import text_corpus as tc
from ssmrepro.tasks.base import TEST, TRAIN, VAL


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("SSMREPRO_DATA", str(tmp_path))
    (tmp_path / "text").mkdir()
    data = bytes(range(256)) * 40  # 10,240 bytes: byte i is i mod 256, so a window's start is visible
    (tmp_path / "text" / "c.txt").write_bytes(data)
    tc._CACHE.clear()
    yield tmp_path, data
    tc._CACHE.clear()


def _task(**kw):
    return build_task({"name": "text_corpus", "path": "text/c.txt", "L": 16, **kw})


def test_registered_and_info(corpus):
    assert TASKS["text_corpus"] is tc.TextCorpus
    info = _task().info
    assert (info.vocab_size, info.n_classes, info.seq_len, info.target) == (256, 256, 16, "per_position")


def test_windows_are_next_byte_pairs_within_their_split(corpus):
    _, data = corpus
    t = _task(L=16)
    n = len(data)
    n_val, n_test = int(n * 0.05), int(n * 0.05)
    bounds = {TRAIN: (0, n - n_val - n_test), VAL: (n - n_val - n_test, n - n_test), TEST: (n - n_test, n)}
    seeds = torch.tensor([0, 1, 2])
    idx = torch.arange(200).expand(3, -1)
    full = torch.tensor(list(data))
    for split, (a, b) in bounds.items():
        batch = t.sample(seeds, split, idx)
        assert batch.x.shape == (3, 200, 16) and batch.y.shape == (3, 200, 16)
        assert torch.equal(batch.x[..., 1:], batch.y[..., :-1])  # y is x shifted by one byte
        # recover each window's start from its first byte and check it against the corpus
        for e in range(3):
            for j in range(0, 200, 37):
                x = batch.x[e, j]
                starts = [p for p in range(a, b - 16) if torch.equal(full[p:p + 16], x)]
                assert starts, (split, e, j)
                assert all(a <= p and p + 17 <= b for p in starts)
        assert int(batch.x.min()) >= 0 and int(batch.x.max()) < 256


def test_counter_based_and_every_knob_changes_the_data(corpus):
    t = _task()
    s, i = torch.tensor([5]), torch.tensor([[3, 4, 5]])
    a = t.sample(s, TRAIN, i).x
    assert torch.equal(a, _task().sample(s, TRAIN, i).x)  # pure function of (config, seed, split, index)
    assert torch.equal(a[:, 1:], t.sample(s, TRAIN, torch.tensor([[4, 5]])).x)  # independent of batch-mates
    assert not torch.equal(a, t.sample(torch.tensor([6]), TRAIN, i).x)
    assert not torch.equal(t.sample(s, VAL, i).x, t.sample(s, TEST, i).x)
    assert _task(L=8).sample(s, TRAIN, i).x.shape[-1] == 8
    assert not torch.equal(_task(val_fraction=0.2).sample(s, VAL, i).x, t.sample(s, VAL, i).x)


def test_missing_short_and_bad_configs(corpus, tmp_path):
    root, _ = corpus
    with pytest.raises(DataUnavailable, match="no corpus file"):
        build_task({"name": "text_corpus", "path": "text/none.txt"})
    (root / "text" / "short.txt").write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="too short"):
        build_task({"name": "text_corpus", "path": "text/short.txt", "L": 16})
    (root / "text" / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        build_task({"name": "text_corpus", "path": "text/empty.txt"})
    for bad in ({"L": 0}, {"val_fraction": 0.3, "test_fraction": 0.3}, {"extra": 1}, {"path": ""}):
        with pytest.raises(ValueError):
            build_task({"name": "text_corpus", "path": "text/c.txt", **bad})
    absolute = build_task({"name": "text_corpus", "path": str(root / "text" / "c.txt"), "L": 4})
    assert absolute.data_info()["path"] == "text/c.txt"  # inside the data root: relative in records


def test_records_carry_size_and_fingerprint_and_changes_are_caught(corpus):
    root, data = corpus
    info = _task().data_info()
    assert info["bytes"] == len(data) and len(info["fingerprint"]) == 16
    assert sum(info["sizes"].values()) == len(data)
    f = root / "text" / "c.txt"
    f.write_bytes(data[:-1] + b"!")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(tc.CorpusChanged):
        _task()
    tc._CACHE.clear()
    assert _task().data_info()["fingerprint"] != info["fingerprint"]
