"""The one engine path: planning once, exact --max-runs / --pack-size / progress for 1 and 2
workers, a dead worker reported as a failure, runs held by another process waited for."""

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import write_spec
from rich.console import Console

from ssmrepro.engine import dry_run, run_experiment
from ssmrepro.spec import load_spec
from ssmrepro.store import Store, pid_alive
from ssmrepro.sweep import expand


def _spec(tmp_path, seeds=(0, 1, 2), steps=40):
    return load_spec(write_spec(tmp_path, seeds=list(seeds), train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": steps, "val_size": 16,
        "test_size": 16, "eval_every": 20, "eval_batch_size": 16}))


def _console():
    buf = io.StringIO()
    return Console(file=buf, width=200, force_terminal=False), buf


@pytest.mark.parametrize("workers", [1, 2])
def test_max_runs_and_pack_size_are_exact(tmp_path, workers):
    spec = _spec(tmp_path)  # 2 cases x 3 seeds = 6 runs
    out = tmp_path / "o"
    con, buf = _console()
    s = run_experiment(spec, "quick", out, max_runs=3, pack_size=1, workers=workers, console=con)
    store = Store(out / spec.paper / spec.id)
    assert s.trained == 3 and s.packs == 3 and s.ok, buf.getvalue()
    assert len(list(store.runs.glob("*.json"))) == 3
    assert {json.loads(f.read_text())["pack_size"] for f in store.runs.glob("*.json")} == {1}
    text = buf.getvalue()
    assert re.search(r"runs .* 3/3 +packs 3/3 ended", text), text  # each run counted once
    s2 = run_experiment(spec, "quick", out, pack_size=2, workers=workers, console=_console()[0])
    assert s2.already_done == 3 and s2.trained == 3 and s2.packs == 2 and s2.ok
    assert len(list(store.runs.glob("*.json"))) == 6


def test_dry_run_is_the_plan_without_training(tmp_path):
    spec = _spec(tmp_path)
    d = dry_run(spec, "quick", tmp_path / "o", max_runs=5, pack_size=2, estimate=False)
    assert (d.total, d.done, d.pending, len(d.packs), d.largest) == (6, 0, 5, 3, 2)
    assert d.run_steps == 5 * 40
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").rglob("*.json"))


def test_runs_held_by_a_live_process_are_waited_for_then_taken_over(tmp_path):
    spec = _spec(tmp_path, seeds=[0])
    out = tmp_path / "o"
    runs = expand(spec, "quick")
    store = Store(out / spec.paper / spec.id)
    store.claims.mkdir(parents=True)
    held = store.claims / f"{runs[0].run_id}.claim"  # "another process" (this one) holds run 0
    held.write_text(json.dumps({"host": store.host, "pid": os.getpid(), "time": time.time(), "nonce": "x"}))
    con, buf = _console()
    result = {}
    t = threading.Thread(target=lambda: result.update(s=run_experiment(
        spec, "quick", out, pack_size=1, workers=1, console=con, wait_poll_s=0.1)))
    t.start()
    deadline = time.time() + 60
    while "waiting for 1 runs" not in buf.getvalue() and time.time() < deadline:
        time.sleep(0.05)
    assert "waiting for 1 runs" in buf.getvalue() and t.is_alive()
    held.unlink()  # the holder goes away: the runner takes the run over
    t.join(60)
    s = result["s"]
    assert s.ok and s.trained == 2 and all(store.is_done(r.run_id) for r in runs)


def test_a_killed_worker_is_a_failure_and_the_others_finish(tmp_path, cli_env):
    spec_path = write_spec(tmp_path, seeds=[0, 1, 2], train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 300, "val_size": 16,
        "test_size": 16, "eval_every": 100, "eval_batch_size": 16})
    spec = load_spec(spec_path)
    out = tmp_path / "o"
    store = Store(out / spec.paper / spec.id)
    p = subprocess.Popen([sys.executable, "-m", "ssmrepro.cli", "run", str(spec_path), "--out",
                          str(out), "--no-plot", "--no-calibrate", "--pack-size", "1", "--workers", "2"],
                         env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    deadline = time.time() + 120
    while victim is None and time.time() < deadline:
        for c in store.claims.glob("*.claim") if store.claims.exists() else []:
            try:
                victim = json.loads(c.read_text())["pid"]
                break
            except (ValueError, KeyError, FileNotFoundError):
                pass
        time.sleep(0.02)
    assert victim is not None and victim != p.pid
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 1, stdout + stderr
    assert "died" in stderr and "re-run" in stderr
    n = len(list(store.runs.glob("*.json")))
    assert 1 <= n == len(expand(spec, "quick")) - 1  # every other run was trained
    r = subprocess.run([sys.executable, "-m", "ssmrepro.cli", "run", str(spec_path), "--out",
                        str(out), "--no-plot", "--pack-size", "1"], env=cli_env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert all(store.is_done(x.run_id) for x in expand(spec, "quick"))


def test_saved_weights_reload_into_the_member_model(tmp_path):
    """save_weights: each finished run's trained weights reload into an E = 1 model that gives
    the same test metrics as the pack did."""
    import torch

    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.base import TEST
    from ssmrepro.train import _DATA_STREAM, build_member, derived_seed, evaluate

    spec = load_spec(write_spec(tmp_path, seeds=[0, 1], save_weights=True, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 30, "val_size": 16,
        "test_size": 32, "eval_every": 15, "eval_batch_size": 32}))
    out = tmp_path / "o"
    s = run_experiment(spec, "quick", out, pack_size=2, workers=1, console=_console()[0])
    assert s.ok
    store = Store(out / spec.paper / spec.id)
    for r in expand(spec, "quick"):
        state = store.read_weights(r.run_id)
        assert state is not None
        model = build_member(r, state)
        task = build_task(r.task)
        seeds = torch.tensor([derived_seed(r.seed, _DATA_STREAM)])
        _, acc = evaluate(model, task, seeds, TEST, 32, 32)
        assert float(acc[0]) == pytest.approx(store.read(r.run_id)["metrics"]["test.acc"])


def test_ctrl_c_with_two_workers_is_one_message(tmp_path, cli_env):
    spec_path = write_spec(tmp_path, seeds=[0, 1, 2], train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 3000, "val_size": 16,
        "test_size": 16, "eval_every": 1000, "eval_batch_size": 16})
    spec = load_spec(spec_path)
    out = tmp_path / "o"
    store = Store(out / spec.paper / spec.id)
    p = subprocess.Popen([sys.executable, "-m", "ssmrepro.cli", "run", str(spec_path), "--out",
                          str(out), "--no-plot", "--no-calibrate", "--pack-size", "1", "--workers", "2"],
                         env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # as from a terminal: a shell's background job (CI started with `&`)
                         # inherits SIGINT ignored, and Python then installs no Ctrl-C handler
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120

    def n_claims() -> int:
        return len(list(store.claims.glob("*.claim"))) if store.claims.exists() else 0

    while time.time() < deadline and n_claims() < 2:  # both workers are inside a pack
        time.sleep(0.05)
    assert n_claims() >= 2, "the two workers never held two packs at once"
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert (stdout + stderr).count("interrupted") == 1 and "re-run" in stdout + stderr
    time.sleep(0.5)
    assert not [c for c in store.claims.glob("*.claim")
                if pid_alive(json.loads(c.read_text() or "{}").get("pid", -1))]


def test_flush_denormals_zeroes_denormal_results():
    """What the workers set: a float32 product below 1.2e-38 becomes 0 (it is a denormal
    without); normal numbers are untouched. Restored afterwards for the other tests."""
    import torch

    from ssmrepro.util import flush_denormals

    tiny, half = torch.tensor([1e-30], dtype=torch.float32), torch.tensor([1e-10])
    try:
        if not flush_denormals():
            return  # a CPU without FTZ/DAZ: nothing to check
        assert float(tiny * half) == 0.0 and float(half * half) == pytest.approx(1e-20)
    finally:
        torch.set_flush_denormal(False)
    assert float(tiny * half) > 0.0


def test_threads_per_process_leave_busy_cores_alone(monkeypatch):
    """The default intra-op thread count splits the cores other processes leave free between
    the workers (never below 1); $SSMREPRO_THREADS overrides it; a GPU keeps torch's default."""
    from ssmrepro.engine.local import THREADS_ENV, threads_per_process

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert threads_per_process(1, "cpu", 0.0) == 8  # an idle machine: all cores
    assert threads_per_process(2, "cpu", 0.2) == 4
    assert threads_per_process(1, "cpu", 2.0) == 6  # two busy processes elsewhere
    assert threads_per_process(3, "cpu", 2.6) == 1  # 5 free cores over 3 workers
    assert threads_per_process(1, "cpu", 50.0) == 1  # overloaded: still one thread
    assert threads_per_process(1, "cuda", 0.0) is None
    monkeypatch.setenv(THREADS_ENV, "3")
    assert threads_per_process(1, "cpu", 50.0) == 3


def test_a_worker_killed_before_it_reports_a_pack_is_not_success(tmp_path):
    """SIGKILL right after a worker starts: its pack_start (if it sent one) never leaves the
    process, so the engine cannot name a pack; it still says a worker died and is not ok."""
    import multiprocessing as mp

    spec = _spec(tmp_path, seeds=(0, 1), steps=20)
    out = tmp_path / "o"
    con, buf = _console()
    killed: list[int] = []

    def killer() -> None:
        deadline = time.time() + 60
        while not killed and time.time() < deadline:
            for c in mp.active_children():
                if c.pid:
                    os.kill(c.pid, signal.SIGKILL)
                    killed.append(c.pid)
                    break
            time.sleep(0.001)

    t = threading.Thread(target=killer)
    t.start()
    s = run_experiment(spec, "quick", out, pack_size=1, workers=2, console=con, calibrate=False)
    t.join()
    assert killed, "no worker process seen"
    assert not s.ok and s.failed + s.not_run + s.lost_workers >= 1, buf.getvalue()
    assert any("died" in m for m in s.messages), (s.messages, buf.getvalue())
    trained = len(list(Store(out / spec.paper / spec.id).runs.glob("*.json")))
    assert trained + s.failed + s.not_run == 4  # every run accounted for


def test_the_pack_line_keeps_labels_that_look_like_markup(tmp_path):
    from ssmrepro.engine import _pack_line
    from ssmrepro.engine.local import Event

    store = Store(tmp_path / "s")
    labels = {"a": "hybrid", "b": "bold"}
    store.read = lambda rid: {"run_id": rid, "label": labels[rid], "metrics": {"test.acc": 0.5}}
    con, buf = _console()
    con.print(_pack_line(store, Event("pack_end", 0, run_ids=["a", "b"]), 3, 5.0))
    assert "[bold, hybrid]" in buf.getvalue(), buf.getvalue()
