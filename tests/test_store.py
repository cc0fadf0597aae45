import json
import os
import subprocess
import sys
from pathlib import Path

from ssmrepro.models import MODELS
from ssmrepro.store import Store
from ssmrepro.sweep import CODE_VERSION, TrainConfig, lean, run_id_of
from ssmrepro.tasks.keep_nth import KeepNth
from ssmrepro.util import atomic_write_text


def record(status="ok", tag="a", **kw):
    """A valid record: its run id is the hash of its identity, which its config leans to, as
    the engine writes them (``tag`` picks one of two configs)."""
    task = KeepNth.Config(n=2, T=8, vocab=8)
    model = MODELS["ssm_lm"].Config(d_model=8 if tag == "a" else 16, d_state=4)
    train = TrainConfig(max_steps=10)
    ident = {"task": lean(task), "model": lean(model), "train": lean(train), "seed": 0}
    config = {"task": task.model_dump(mode="json"), "model": model.model_dump(mode="json"),
              "train": train.model_dump(mode="json"), "seed": 0}
    rid = run_id_of(ident)
    return {"run_id": rid, "status": status, "identity": ident, "config": config,
            "code": CODE_VERSION, "metrics": {"test.acc": 0.5}, "history": [], **kw}


def test_atomic_write_leaves_no_temp(tmp_path):
    p = tmp_path / "a" / "b.json"
    atomic_write_text(p, "x")
    atomic_write_text(p, "y")
    assert p.read_text() == "y"
    assert [f.name for f in p.parent.iterdir()] == ["b.json"]


def test_claims_are_exclusive_until_released(tmp_path):
    a, b = Store(tmp_path), Store(tmp_path)
    assert a.claim("r1")
    assert not b.claim("r1")
    a.release("r1")
    assert b.claim("r1")


def test_done_runs_cannot_be_claimed(tmp_path):
    s = Store(tmp_path)
    r1 = record("diverged", metrics={"val.loss": float("nan")})  # done too
    s.write(r1)
    assert not s.claim(r1["run_id"])
    assert json.loads(s.record_path(r1["run_id"]).read_text())["metrics"]["val.loss"] is None
    r2 = record("error", tag="b")
    s.write(r2)  # failed runs are re-run
    assert s.claim(r2["run_id"])


def test_claim_of_dead_process_is_taken_over(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "r1.claim").write_text(
        json.dumps({"host": Store(tmp_path).host, "pid": p.pid, "time": 0})
    )
    assert Store(tmp_path).claim("r1")


def test_fresh_claim_of_other_host_is_respected_and_old_one_is_not(tmp_path):
    (tmp_path / "claims").mkdir()
    c = tmp_path / "claims" / "r1.claim"
    c.write_text(json.dumps({"host": "elsewhere", "pid": 1, "time": 0}))
    assert not Store(tmp_path, stale_after=60).claim("r1")
    os.utime(c, (0, 0))  # not refreshed for a long time
    assert Store(tmp_path, stale_after=60).claim("r1")


def test_cleanup_removes_claims_of_finished_runs_and_dead_owners(tmp_path):
    s = Store(tmp_path)
    r1 = record()
    assert s.claim(r1["run_id"]) and s.claim("r2")
    s.write(r1)  # killed before releasing r1's claim
    live = Store(tmp_path)
    assert live.cleanup() == 1  # r1's claim goes; r2 is held by this (live) process
    assert not (tmp_path / "claims" / f"{r1['run_id']}.claim").exists()
    assert (tmp_path / "claims" / "r2.claim").exists()


def test_cleanup_removes_temp_files_of_dead_writers_only(tmp_path):
    from ssmrepro.util import HOST as _HOST

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    dead = tmp_path / f".results.csv.{_HOST}.{p.pid}.abc.tmp"
    live = tmp_path / f".results.csv.{_HOST}.{os.getpid()}.def.tmp"
    other = tmp_path / f".results.csv.otherhost.{p.pid}.ghi.tmp"
    for f in (dead, live, other):
        f.write_text("partial")
    Store(tmp_path).cleanup()
    assert not dead.exists() and live.exists() and other.exists()


def test_zombie_processes_count_as_dead():
    import time

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # exited but not reaped yet: a zombie
    from ssmrepro.store import pid_alive

    assert not pid_alive(p.pid)
    p.wait()
    assert pid_alive(os.getpid())


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_two_claimers_of_one_stale_claim_exactly_one_wins(tmp_path):
    """Replay of the race: both claimers read the same stale claim before either acts."""
    a, b = Store(tmp_path), Store(tmp_path)
    a.claims.mkdir(parents=True)
    path = a.claims / "r1.claim"
    path.write_text(json.dumps({"host": a.host, "pid": _dead_pid(), "time": 0, "nonce": "old"}))
    seen_a, seen_b = a._read_claim(path), b._read_claim(path)
    assert a._is_stale(path, seen_a) and b._is_stale(path, seen_b)
    wins = [a.take_over("r1", seen_a), b.take_over("r1", seen_b)]
    assert wins == [True, False]
    now = json.loads(path.read_text())
    assert now["pid"] == os.getpid() and now["nonce"] != "old"  # the winner's claim stands
    assert not b.claim("r1")  # a late claimer sees a live claim
    a.release("r1")
    assert list(a.claims.iterdir()) == []  # claim and takeover marker gone


def test_concurrent_claimers_of_a_stale_claim_in_processes(tmp_path):
    """Eight processes race for one stale claim: exactly one gets it. They start together, once
    all eight have imported ssmrepro (a barrier of files: a start time 1 s ahead was missed
    under heavy load, and a 60 s wait ran out, a timeout), and each stays alive until all eight
    have tried (a winner that exited before a slow starter tried left a stale claim again: two
    winners on a loaded machine, a flaky test). The limits only bound a real hang."""
    s = Store(tmp_path)
    s.claims.mkdir(parents=True)
    (s.claims / "r1.claim").write_text(
        json.dumps({"host": s.host, "pid": _dead_pid(), "time": 0, "nonce": "old"}))
    ready, tried = tmp_path / "ready", tmp_path / "tried"
    ready.mkdir()
    tried.mkdir()
    code = ("import os,sys,time; from ssmrepro.store import Store; s=Store(sys.argv[1]); "
            "end=time.time()+600\n"
            "def wait(d):\n"
            "    open(os.path.join(d, str(os.getpid())), 'w').close()\n"
            "    while len(os.listdir(d)) < 8 and time.time() < end: time.sleep(0.01)\n"
            "wait(sys.argv[2]); ok = s.claim('r1'); print(int(ok), flush=True); wait(sys.argv[3])")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(ready), str(tried)],
                              stdout=subprocess.PIPE, text=True) for _ in range(8)]
    try:
        outs = [p.communicate(timeout=900)[0].strip() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * 8
    assert sorted(outs) == ["0"] * 7 + ["1"]


def test_bad_records_are_quarantined_and_retrained(tmp_path):
    """Binary, wrong-schema, status-only, copied and edited records are never trusted."""
    s = Store(tmp_path)
    good, other = record(), record(tag="b", metrics={"test.acc": 0.9})
    s.runs.mkdir(parents=True)
    cases = {
        "binary": b"\x00\xff\xfe garbage",
        "not an object": b"[1, 2]",
        "status only": json.dumps({"run_id": good["run_id"], "status": "ok"}).encode(),
        "copied": json.dumps({**other}).encode(),  # another run's result under this id
        "edited": json.dumps({**good, "identity": {**good["identity"], "seed": 1}}).encode(),
        "no metrics": json.dumps({**good, "metrics": {}}).encode(),
    }
    for why, blob in cases.items():
        s.record_path(good["run_id"]).write_bytes(blob)
        s.warnings.clear()
        assert s.read(good["run_id"]) is None, why
        assert not s.is_done(good["run_id"]) and len(s.warnings) == 1, why
        assert not s.record_path(good["run_id"]).exists(), why
    assert len(list((s.runs / "quarantine").iterdir())) == len(cases)
    assert s.claim(good["run_id"])  # the run is trained again
    s.write(good)
    assert s.read(good["run_id"])["metrics"] == {"test.acc": 0.5}


def test_bad_record_in_a_reused_store_is_ignored_not_moved(tmp_path):
    other = Store(tmp_path / "other")
    rec = record()
    other.runs.mkdir(parents=True)
    other.record_path(rec["run_id"]).write_text(json.dumps({**rec, "run_id": "zzz"}))
    s = Store(tmp_path / "me", reuse=[tmp_path / "other"])
    assert s.read(rec["run_id"]) is None and s.warnings
    assert other.record_path(rec["run_id"]).exists()


def test_records_are_readable_by_others(tmp_path):
    """Not mkstemp's 0600: the mode the umask gives a new file (0644 under the usual 022)."""
    from ssmrepro.util import NEW_FILE_MODE

    s = Store(tmp_path)
    rec = record()
    s.write(rec)
    assert s.record_path(rec["run_id"]).stat().st_mode & 0o777 == NEW_FILE_MODE
    assert NEW_FILE_MODE == 0o666 & ~os.umask(os.umask(0o022))


def test_r53g_a_run_shared_through_reuse_is_claimed_and_recorded_in_the_reused_store(tmp_path):
    """A spec (ra) and one that reuses it (rb), run at once: rb claimed and recorded a shared
    run in its own store, which ra's `run` does not read, and both trained it. With the run
    homed in ra's store (``Store.homes``, set by rb's `run`), rb's claim and record are where
    ra looks, whichever command claims first, and each waits on the other's holder."""
    ra = Store(tmp_path / "out" / "tests" / "ra")
    rb = Store(tmp_path / "out" / "tests" / "rb", reuse=[ra.root])
    first, second = record(), record(tag="b")
    rb.homes = {first["run_id"]: ra.root, second["run_id"]: ra.root}
    rb.prepare()
    rid = first["run_id"]
    assert rb.claim(rid)  # rb's `run` claims first
    assert (ra.claims / f"{rid}.claim").exists() and not (rb.claims / f"{rid}.claim").exists()
    assert not ra.claim(rid) and ra.holder(rid) == f"pid {os.getpid()} on {ra.host}"
    assert rb.holds(rid)
    rb.write(first)
    rb.release(rid)
    assert ra.record_path(rid).is_file() and not (rb.runs / f"{rid}.json").exists()
    assert ra.is_done(rid) and rb.is_done(rid) and not ra.claim(rid)
    assert list(ra.claims.iterdir()) == []
    rid = second["run_id"]
    assert ra.claim(rid)  # ra's `run` claims first: rb leaves it to ra
    assert not rb.claim(rid) and rb.holder(rid) == f"pid {os.getpid()} on {rb.host}"
    ra.write(second)
    ra.release(rid)
    assert rb.is_done(rid) and not rb.claim(rid)


def test_r53g_weights_of_another_size_are_not_read(tmp_path, monkeypatch):
    """`truncate -s 1T runs/<id>.pt` (sparse: no disk taken) made `run`, `show` and `plot` hash
    all of it (SHA-256 of a terabyte of zeros, hours). The record keeps the weights' size
    beside their digest: a file of another size is theirs in no case and is quarantined unread;
    an older record without the size bounds it by the run's parameters."""
    import torch

    import ssmrepro.store as store_mod

    hashed = []
    real = store_mod.file_digest
    monkeypatch.setattr(store_mod, "file_digest", lambda p: hashed.append(p) or real(p))
    s = Store(tmp_path / "out" / "tests" / "t", weights=True)
    s.prepare()
    for sized in (True, False):
        rec = record(n_params=10)
        named = s.write_weights(rec["run_id"], {"w": torch.zeros(10)})
        assert named["weights_bytes"] == s.weights_path(rec["run_id"]).stat().st_size
        if not sized:  # a record written before records named the size
            named.pop("weights_bytes")
        s.write({**rec, **named})
        assert s.is_done(rec["run_id"]) and len(hashed) == 1
        os.truncate(s.weights_path(rec["run_id"]), 1 << 40)
        s.warnings.clear()
        assert not s.is_done(rec["run_id"]) and len(hashed) == 1, s.warnings
        assert not s.weights_path(rec["run_id"]).exists()  # quarantined, not read
        assert s.read_weights(rec["run_id"]) is None
        os.truncate(next((s.runs / "quarantine").iterdir()), 0)  # (no terabyte left behind)
        for q in (s.runs / "quarantine").iterdir():
            q.unlink()
        s.write_weights(rec["run_id"], {"w": torch.zeros(10)})
        os.truncate(s.weights_path(rec["run_id"]), 1 << 40)
        s.warnings.clear()
        assert s.read_weights(rec["run_id"]) is None and len(hashed) == 1
        assert "bytes" in " ".join(s.warnings), s.warnings
        hashed.clear()
        for q in (s.runs / "quarantine").iterdir():
            q.unlink()


def test_r53k_is_done_reads_a_record_once_to_check_its_weights(tmp_path, monkeypatch):
    """``is_done`` of a spec that keeps weights read each run's record three times (``read``,
    then once for the weights' digest and once more for their size): on a store of thousands
    of records of up to 64 MB each, the check cost a third more with the size's. The weights
    check reads it once; ``read_weights`` too, for the size and the digest."""
    import torch

    import ssmrepro.store as store_mod

    s = Store(tmp_path / "out" / "tests" / "t", weights=True)
    s.prepare()
    rec = record(n_params=10)
    s.write({**rec, **s.write_weights(rec["run_id"], {"w": torch.zeros(10)})})
    reads = []
    real = store_mod.read_small
    monkeypatch.setattr(store_mod, "read_small",
                        lambda p, *a, **k: reads.append(Path(p).name) or real(p, *a, **k))
    assert s.is_done(rec["run_id"])
    assert reads.count(f"{rec['run_id']}.json") == 2, reads  # ``read``'s, the weights check's
    reads.clear()
    assert s.read_weights(rec["run_id"]) is not None
    assert reads.count(f"{rec['run_id']}.json") == 1, reads
    os.truncate(s.weights_path(rec["run_id"]), 3)  # of another size: refused unread, as before
    assert not s.is_done(rec["run_id"]) and not s.weights_path(rec["run_id"]).exists()


def test_r56m_records_ignored_for_one_reason_are_one_warning(tmp_path):
    """A store of thousands of records an older ssmrepro wrote (each 'lacks train.avg_loss'),
    or damaged alike, printed a warning line per record at every `plot`, `export`, `list` and
    `show` (4,000 lines). Records of one reason are one warning naming three and the count; up
    to three are named one by one, as before."""
    from ssmrepro.store import Store

    root = tmp_path / "out" / "p" / "s"
    (root / "runs").mkdir(parents=True)
    ids = [f"{i:012x}" for i in range(6)]
    for rid in ids:
        (root / "runs" / f"{rid}.json").write_text("{not json")
    store = Store(root, readonly=True)
    assert all(store.read(rid) is None for rid in ids)
    (said,) = store.to_say()
    assert said.startswith("ignoring 6 run records (") and "and 3 more): unreadable" in said
    store = Store(root)
    assert all(store.read(rid) is None for rid in ids[:2])
    assert [w.startswith("run record ") for w in store.to_say()] == [True, True]
    assert all(store.read(rid) is None for rid in ids[2:])
    (said,) = store.to_say(2)
    assert said.startswith("4 run records quarantined to runs/quarantine/ (") and \
        "and 1 more): unreadable" in said, said
