import json
import os
import subprocess
import sys

from ssmrepro.store import Store
from ssmrepro.util import atomic_write_text


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
    s.write({"run_id": "r1", "status": "ok", "metrics": {"x": float("nan")}})
    assert not s.claim("r1")
    assert json.loads((tmp_path / "runs" / "r1.json").read_text())["metrics"]["x"] is None
    s.write({"run_id": "r2", "status": "error"})  # failed runs are re-run
    assert s.claim("r2")


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
    assert s.claim("r1") and s.claim("r2")
    s.write({"run_id": "r1", "status": "ok"})  # killed before releasing r1's claim
    live = Store(tmp_path)
    assert live.cleanup() == 1  # r1's claim goes; r2 is held by this (live) process
    assert not (tmp_path / "claims" / "r1.claim").exists()
    assert (tmp_path / "claims" / "r2.claim").exists()


def test_cleanup_removes_temp_files_of_dead_writers_only(tmp_path):
    from ssmrepro.store import _HOST

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
