"""The Ray engine on Ray's own multi-node harness (``ray.cluster_utils.Cluster``) on loopback.

Skipped without Ray (``pip install -e '.[ray]'``; ``make test-ray`` runs this file). Ray's temp
dir lives in the test's tmp folder, every wait is bounded, and the cluster is shut down after
each test. Checks: a keep-nth smoke sweep on a two-node cluster gives the local engine's
results.csv (timings aside); a worker node killed mid-pack is retried by Ray and every run still
gets exactly one record, one claim and one 'done' event, and no claim is left behind.
"""

from __future__ import annotations

import _thread
import os
import threading
import time
from pathlib import Path

import pytest

# Ray on loopback only: with this set, Ray resolves its node address to 127.0.0.1 instead of the
# machine's network address (read when ray is first imported, so set before the import)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

import torch  # noqa: E402
from helpers import write_spec  # noqa: E402

from ssmrepro.engine import run_experiment  # noqa: E402
from ssmrepro.engine.local import git_commit  # noqa: E402
from ssmrepro.engine.ray_engine import TASK_NAME  # noqa: E402
from ssmrepro.spec import find_spec, load_spec  # noqa: E402
from ssmrepro.store import Store, read_results  # noqa: E402
from ssmrepro.sweep import CODE_VERSION, expand  # noqa: E402

LIMIT_S = 300  # a test that is not done by then is interrupted (KeyboardInterrupt in the driver)
TIMING_COLUMNS = {"wall_s"}  # what may differ between two engines (host names are not columns)


@pytest.fixture
def cluster(tmp_path_factory, monkeypatch):
    """A head node (no CPUs: tasks never run on the driver's node) + one worker node, with Ray's
    temp dir inside the test's tmp folder; shut down afterwards."""
    tmp = tmp_path_factory.mktemp("r")
    (tmp / "ray").mkdir()
    monkeypatch.setenv("RAY_TMPDIR", str(tmp))  # ray_current_cluster and friends go here too
    c = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "temp_dir": str(tmp / "ray"), "include_dashboard": False,
                        "node_ip_address": "127.0.0.1"},
    )
    c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    c.wait_for_nodes(timeout=60)
    watchdog = threading.Timer(LIMIT_S, _thread.interrupt_main)
    watchdog.start()
    try:
        yield c
    finally:
        watchdog.cancel()
        ray.shutdown()
        c.shutdown()


def _tasks_running() -> int:
    """How many Ray worker processes execute a pack task (Ray titles them ray::<task name>)."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        n += cmd.startswith(f"ray::{TASK_NAME}".encode())
    return n


def _events(store: Store) -> tuple[dict, dict]:
    done, claims = {}, {}
    for ev in store.events():
        d = done if ev["event"] == "done" else claims if ev["event"] == "claim" else None
        if d is not None:
            d[ev["run_id"]] = d.get(ev["run_id"], 0) + 1
    return done, claims


def test_ray_sweep_on_two_nodes_equals_the_local_engine(cluster, tmp_path):
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")  # a second worker node
    cluster.wait_for_nodes(timeout=60)
    spec = find_spec("keep-nth")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a Ray task (one CPU each): same float reductions
    try:
        local = run_experiment(spec, "smoke", tmp_path / "local", "cpu", "torch")
    finally:
        torch.set_num_threads(threads)
    assert local.ok
    rs = run_experiment(spec, "smoke", tmp_path / "ray", "cpu", "torch", engine="ray",
                        address=cluster.address)
    assert rs.ok and rs.trained == local.trained == len(expand(spec, "smoke"))
    a = read_results(local.csv).sort_values("run_id").reset_index(drop=True)
    b = read_results(rs.csv).sort_values("run_id").reset_index(drop=True)
    assert list(a.columns) == list(b.columns)
    keep = [c for c in a.columns if c not in TIMING_COLUMNS]
    assert a[keep].equals(b[keep]), (a[keep].compare(b[keep]) if a.shape == b.shape else "shape")
    store = Store(rs.csv.parent)
    rec = store.read(b["run_id"][0])
    assert rec["commit"] == git_commit() and rec["code"] == CODE_VERSION
    assert not list(store.claims.glob("*.claim"))


def test_worker_node_killed_mid_pack_is_retried_with_one_record_per_run(cluster, tmp_path):
    spec_path = write_spec(tmp_path, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 1500, "val_size": 16,
        "test_size": 16, "eval_every": 500}, seeds=[0, 1])
    spec = load_spec(spec_path)
    runs = expand(spec, "quick")
    out = tmp_path / "out"
    worker = cluster.list_all_nodes()[-1]
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")  # where Ray retries the lost pack
    cluster.wait_for_nodes(timeout=60)
    killed = threading.Event()

    def kill_when_training() -> None:
        deadline = time.time() + LIMIT_S / 2
        while time.time() < deadline and _tasks_running() < 2:
            time.sleep(0.05)
        if _tasks_running() < 2:
            return
        time.sleep(0.5)  # well inside the packs (each trains for several seconds)
        cluster.remove_node(worker, allow_graceful=False)  # each node was training a pack
        killed.set()

    killer = threading.Thread(target=kill_when_training, daemon=True)
    killer.start()
    s = run_experiment(spec, "quick", out, "cpu", "torch", pack_size=4, engine="ray",
                       address=cluster.address)
    killer.join(timeout=60)
    assert killed.is_set(), "the two worker nodes were never seen training at once"
    assert s.ok and s.trained == len(runs) and not s.failed, s.messages
    store = Store(out / spec.paper / spec.id)
    records = sorted(store.runs.glob("*.json"))
    assert {f.stem for f in records} == {r.run_id for r in runs}
    done, claims = _events(store)
    assert done == {r.run_id: 1 for r in runs}  # exactly one record written per run
    assert claims == {r.run_id: 1 for r in runs}  # claimed once, by the driver
    assert all(store.read(r.run_id)["status"] == "ok" for r in runs)
    assert not list(store.claims.glob("*.claim"))
