"""End to end through the CLI: smoke run of every spec, resume, kill-and-resume, two runners."""

import json
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from helpers import spec_params, write_spec
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.spec import load_spec, spec_paths
from ssmrepro.store import Store, pid_alive
from ssmrepro.sweep import expand

runner = CliRunner()


@pytest.mark.parametrize("path", spec_params(spec_paths()))
def test_smoke_profile_of_every_spec(tmp_path, path, smoke_data_root, monkeypatch):
    monkeypatch.setenv("SSMREPRO_DATA", str(smoke_data_root))  # LRA specs: fixture + generated data
    spec = load_spec(path)
    res = runner.invoke(app, ["run", spec.id, "--profile", "smoke", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    root = tmp_path / spec.paper / spec.id
    runs = expand(spec, "smoke")
    # non-default profiles get their own files, so they never overwrite each other
    df = pd.read_csv(root / "results-smoke.csv")
    if spec.analytic is not None:  # a table computed from theory: one row per grid point
        n = 1
        for v in spec.analytic.grid.values():
            n *= len(v)
        assert not runs and len(df) == n
    else:
        assert len(df) == len(runs) and set(df["status"]) <= {"ok", "diverged"}
        if "metric.test.acc" in df:  # metrics in their own namespace
            assert df["metric.test.acc"].between(0, 1).all()
        else:  # regression targets (yu2025's synthetic studies): a mean squared error
            assert (df["metric.test.mse"].dropna() >= 0).all()
    assert (root / "figure-smoke.png").stat().st_size > 1000
    assert "## Claims" in (root / "report-smoke.md").read_text()
    assert not (root / "results.csv").exists()
    # resume is the default: a second run trains nothing
    again = runner.invoke(app, ["run", spec.id, "--profile", "smoke", "--out", str(tmp_path)])
    assert again.exit_code == 0
    # (a table computed from theory trains nothing: its line says what it computed)
    assert ("computed table" if spec.analytic is not None else "0 to train") in again.output


def _cmd(spec_path, out, *extra):
    return [sys.executable, "-m", "ssmrepro.cli", "run", str(spec_path), "--out", str(out),
            "--no-plot", "--no-calibrate", *extra]


def _kill_when(cmd, env, ready, timeout=300.0):
    """Start ``cmd``, SIGKILL it as soon as ``ready()`` is true, reap it."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and not ready():
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()


def _count_events(store):
    done, claims = {}, {}
    for ev in store.events():
        d = done if ev["event"] == "done" else claims if ev["event"] == "claim" else None
        if d is not None:
            d[ev["run_id"]] = d.get(ev["run_id"], 0) + 1
    return done, claims


def test_kill_and_resume(tmp_path, cli_env):
    spec_path = write_spec(tmp_path, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 400, "val_size": 16,
        "test_size": 16, "eval_every": 100}, seeds=[0, 1, 2])
    spec = load_spec(spec_path)
    runs = expand(spec, "quick")
    out = tmp_path / "out"
    store = Store(out / spec.paper / spec.id)
    _kill_when(_cmd(spec_path, out, "--pack-size", "1", "--workers", "1"), cli_env,
               lambda: bool(list(store.runs.glob("*.json"))))
    n_before = len(list(store.runs.glob("*.json")))
    assert 1 <= n_before < len(runs), "the kill should land mid-sweep"
    finished_before = {f.name: f.stat().st_mtime_ns for f in store.runs.glob("*.json")}
    r = subprocess.run(_cmd(spec_path, out, "--pack-size", "1"), env=cli_env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    records = sorted(store.runs.glob("*.json"))
    assert len(records) == len(runs)
    assert {f.stem for f in records} == {r.run_id for r in runs}
    for f in records:
        rec = json.loads(f.read_text())
        assert rec["status"] == "ok" and rec["backend"] == "torch"
        core = {"S6": "S6Core", "S4D": "S4DCore"}[rec["label"]]  # per mixer, the path it ran
        assert rec["kernels"] == {core: "torch:selective_scan_fused"}, rec["kernels"]
    for name, mtime in finished_before.items():  # finished runs were not retrained
        assert (store.runs / name).stat().st_mtime_ns == mtime
    done, _ = _count_events(store)
    assert all(v == 1 for v in done.values()) and len(done) == len(runs)
    df = pd.read_csv(store.root / "results.csv")
    assert len(df) == len(runs) and df["run_id"].is_unique
    assert set(df["kernels.S6Core"].dropna()) == {"torch:selective_scan_fused"}
    assert not list(store.root.rglob("*.tmp")) and not list(store.claims.glob("*.claim"))


def test_two_concurrent_runners_never_train_a_run_twice(tmp_path, cli_env):
    spec_path = write_spec(tmp_path, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 60, "val_size": 16,
        "test_size": 16, "eval_every": 30}, seeds=[0, 1, 2, 3])
    spec = load_spec(spec_path)
    runs = expand(spec, "quick")
    out = tmp_path / "out"
    procs = [subprocess.Popen(_cmd(spec_path, out, "--pack-size", "1", "--workers", "1"), env=cli_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    store = Store(out / spec.paper / spec.id)
    done, claims = _count_events(store)
    assert len(done) == len(runs)
    assert all(v == 1 for v in done.values()) and all(v == 1 for v in claims.values())
    pids = {ev["pid"] for ev in store.events() if ev["event"] == "done"}
    assert len(pids) >= 1
    assert len(pd.read_csv(store.root / "results.csv")) == len(runs)


def test_killing_a_multi_worker_sweep_leaves_no_orphans_and_resumes(tmp_path, cli_env):
    spec_path = write_spec(tmp_path, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 400, "val_size": 16,
        "test_size": 16, "eval_every": 100}, seeds=[0, 1, 2])
    spec = load_spec(spec_path)
    out = tmp_path / "out"
    store = Store(out / spec.paper / spec.id)
    _kill_when(_cmd(spec_path, out, "--pack-size", "1", "--workers", "2"), cli_env,
               lambda: bool(list(store.claims.glob("*.claim"))))
    time.sleep(1.0)
    for c in store.claims.glob("*.claim"):  # the workers died with the parent
        pid = json.loads(c.read_text() or "{}").get("pid")
        assert pid is None or not pid_alive(pid), "orphan worker still running"
    r = subprocess.run(_cmd(spec_path, out, "--pack-size", "1"), env=cli_env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert all(store.is_done(x.run_id) for x in expand(spec, "quick"))
    done, _ = _count_events(store)
    assert all(v == 1 for v in done.values())


def test_workers_option(tmp_path):
    spec_path = write_spec(tmp_path, seeds=[0, 1])
    res = runner.invoke(app, ["run", str(spec_path), "--out", str(tmp_path / "o"), "--workers",
                              "2", "--pack-size", "1", "--no-plot"])
    assert res.exit_code == 0, res.output
    spec = load_spec(spec_path)
    store = Store(tmp_path / "o" / spec.paper / spec.id)
    assert all(store.is_done(r.run_id) for r in expand(spec, "quick"))


def test_spec_reuses_another_specs_records(tmp_path):
    a = write_spec(tmp_path, name="spec-a", seeds=[0])
    out = tmp_path / "o"
    assert runner.invoke(app, ["run", str(a), "--out", str(out), "--no-plot"]).exit_code == 0
    b = write_spec(tmp_path, name="spec-b", seeds=[0], reuse=[str(a)])
    res = runner.invoke(app, ["run", str(b), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "0 to train" in res.output
    spec_b = load_spec(b)
    df = pd.read_csv(out / spec_b.paper / spec_b.id / "results.csv")
    assert len(df) == len(expand(spec_b, "quick")) and set(df["status"]) == {"ok"}
