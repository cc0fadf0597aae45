"""Cache keys cover every preprocessing field and the source files' identity; entries are reused."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from ssmrepro.data import DATASETS, load_lra
from ssmrepro.data.cache import cache_key, file_identity, load_entry, save_entry

IDENTITY = [("lra/listops-1000/basic_train.tsv", 1000, 123456789)]


def _perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.01
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):
        return (_perturb(value[0]),) + value[1:]
    raise TypeError(type(value))


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_every_config_field_changes_the_key(dataset):
    ddef = DATASETS[dataset]
    cfg = ddef.config_cls()
    base = cache_key(dataset, ddef.sources[0], IDENTITY, cfg, ddef.version)
    fields = dataclasses.fields(cfg)
    assert fields
    keys = {base}
    for f in fields:
        changed = dataclasses.replace(cfg, **{f.name: _perturb(getattr(cfg, f.name))})
        k = cache_key(dataset, ddef.sources[0], IDENTITY, changed, ddef.version)
        assert k != base, f"{dataset}.{f.name} does not change the cache key"
        keys.add(k)
    assert len(keys) == len(fields) + 1


def test_identity_source_version_and_task_change_the_key():
    cfg = DATASETS["listops"].config_cls()
    base = cache_key("listops", "lra_release", IDENTITY, cfg, 1)
    (path, size, mtime) = IDENTITY[0]
    assert cache_key("listops", "lra_release", [(path, size + 1, mtime)], cfg, 1) != base
    assert cache_key("listops", "lra_release", [(path, size, mtime + 1)], cfg, 1) != base
    assert cache_key("listops", "lra_release", [(path + "x", size, mtime)], cfg, 1) != base
    assert cache_key("listops", "generated", IDENTITY, cfg, 1) != base
    assert cache_key("listops", "lra_release", IDENTITY, cfg, 2) != base
    assert cache_key("text", "lra_release", IDENTITY, cfg, 1) != base
    assert cache_key("listops", "lra_release", IDENTITY, cfg, 1) == base  # stable


def test_file_identity_tracks_size_and_mtime(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("hello")
    before = file_identity([f], tmp_path)
    os.utime(f, ns=(1, 10**18))
    after_touch = file_identity([f], tmp_path)
    f.write_text("hello!")
    after_write = file_identity([f], tmp_path)
    assert (
        before[0][0] == "a.txt" and len({tuple(before[0]), tuple(after_touch[0]), tuple(after_write[0])}) == 3
    )


def test_entries_are_reused_and_invalidated(lra_root, monkeypatch):
    import ssmrepro.data.listops as listops_mod

    first = load_lra("listops", "val", root=lra_root)
    assert first.cache_path is not None and first.cache_path.parent == lra_root / ".cache"
    assert not [p for p in first.cache_path.parent.iterdir() if p.name.startswith(".tmp")]

    def boom(*a, **k):
        raise AssertionError("prepared again although cached")

    monkeypatch.setattr(listops_mod, "prepare_listops", boom)
    again = load_lra("listops", "val", root=lra_root)  # served from the cache
    assert again.cache_path == first.cache_path and (again.x == first.x).all()
    with pytest.raises(AssertionError, match="prepared again"):
        load_lra("listops", "val", root=lra_root, max_len=100)  # new parameter -> new key
    monkeypatch.undo()

    tsv = lra_root / "lra" / "listops-1000" / "basic_val.tsv"
    tsv.write_text(tsv.read_text() + "( ( ( [SM 4 ) 4 ) ] )\t8\n")
    changed = load_lra("listops", "val", root=lra_root)  # source file changed -> new key
    assert changed.cache_path != first.cache_path and len(changed) == len(first) + 1


def test_no_cache_and_custom_cache_dir(lra_root, tmp_path):
    ds = load_lra("listops", "test", root=lra_root, cache=False)
    assert ds.cache_path is None and not (lra_root / ".cache").exists()
    ds = load_lra("listops", "test", root=lra_root, cache_dir=tmp_path / "c")
    assert ds.cache_path.parent == tmp_path / "c"


def test_save_entry_is_atomic_and_first_writer_wins(tmp_path):
    import numpy as np

    p = tmp_path / "task-abc"
    save_entry(p, {"a": np.arange(3)}, {"m": 1})
    save_entry(p, {"a": np.arange(5)}, {"m": 2})  # a concurrent writer that lost the race
    arrays, meta = load_entry(p)
    assert meta["m"] == 1 and arrays["a"].tolist() == [0, 1, 2]
    assert [q.name for q in tmp_path.iterdir()] == ["task-abc"]


def test_save_entry_removes_the_temporaries_of_killed_builds_only(tmp_path):
    """A build killed mid-write left its temporary folder (as large as the entry) for ever. The
    next build of the entry removes those of this host's dead processes; a live writer's,
    another host's (a shared disk) and another entry's stay."""
    import subprocess
    import sys

    import numpy as np

    from ssmrepro.util import HOST

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    p = tmp_path / "task-abc"

    def leftover(name: str) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "a.npy").write_bytes(b"x" * 100)
        return d

    killed = leftover(f".tmp-task-abc-{HOST}-{dead.pid}-dead00")
    live = leftover(f".tmp-task-abc-{HOST}-{os.getpid()}-cafe00")
    elsewhere = leftover(f".tmp-task-abc-elsewhere-{dead.pid}-dead00")
    other = leftover(f".tmp-task-abcd-{HOST}-{dead.pid}-dead00")
    save_entry(p, {"a": np.arange(3)}, {"m": 1})
    assert not killed.exists() and live.exists() and elsewhere.exists() and other.exists()
    assert load_entry(p)[1]["m"] == 1


def test_save_entry_fsyncs_files_and_folders_before_it_is_visible(tmp_path, monkeypatch):
    import numpy as np

    import ssmrepro.util as util

    synced: list[str] = []
    real = util.os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else "?")
        return real(fd)

    monkeypatch.setattr(util.os, "fsync", spy)
    p = tmp_path / "listops-abc"
    save_entry(p, {"train.x": np.arange(3), "train.labels": np.arange(2)}, {"m": 1})
    files = [s for s in synced if s.endswith(".tmp")]  # each array and meta.json, before rename
    assert len(files) == 3 and len(synced) == 5  # + the entry folder and its parent
    assert synced[-1] == str(tmp_path)


@pytest.mark.parametrize("damage", ["truncated array", "garbage meta", "missing array",
                                    "meta not an entry"])
def test_a_damaged_entry_is_rebuilt(lra_root, damage):
    first = load_lra("listops", "val", root=lra_root)
    entry, x = first.cache_path, np.array(first.x)
    arr = sorted(entry.glob("*.npy"))[0]
    if damage == "truncated array":
        arr.write_bytes(arr.read_bytes()[:40])
    elif damage == "garbage meta":
        (entry / "meta.json").write_bytes(b"\x00{not json")
    elif damage == "missing array":
        arr.unlink()
    else:
        (entry / "meta.json").write_text("[1, 2]")
    with pytest.warns(UserWarning, match="damaged cache entry"):
        again = load_lra("listops", "val", root=lra_root)
    assert (np.asarray(again.x) == x).all()
    assert load_lra("listops", "val", root=lra_root).cache_path == entry  # repaired in place
