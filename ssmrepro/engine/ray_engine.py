"""Stage 3 (engine): execute planned packs on a Ray cluster, one Ray task per pack.

The driver (the ``ssmrepro run`` process) keeps everything that touches the results folder: it
claims a pack's runs (``Store.claim``), submits the pack as one Ray task with the resources it
needs ({"GPU": 1} on CUDA, {"CPU": k} and the pack's estimated memory on CPU), heartbeats the
claims while the task runs, and writes the records the task returns (``local.store_result``)
before releasing the claims. The task only trains (``local.train_records``, the function every
executor shares) and returns records and weights, so worker nodes need no shared disk and no git
checkout: the package is shipped to them with the job (Ray ``runtime_env`` ``py_modules``) and the
driver passes its commit and code version into the records. A task whose node or worker dies is
retried by Ray (``max_retries``); the driver writes a pack's records once, from the one result it
receives, so a lost node still yields exactly one record per run. Events are the local executors'
(``pack_start`` when a pack is submitted, exactly one ``pack_end`` per pack), so
``run_experiment`` tracks them the same way.

``import ray`` happens only here and only when the Ray engine is used (``pip install -e
'.[ray]'``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from ..kernels.backend import BackendError
from ..store import Store
from .local import Event, EventFn, PackResult, WorkSettings, store_result, train_records
from .plan import Pack, pack_memory

TASK_NAME = "ssmrepro_pack"  # the Ray task's name (a worker executing it shows ray::<name>)
HEARTBEAT_S = 30.0
MAX_RETRIES = 3  # re-executions of a pack whose worker or node died


class RayUnavailable(BackendError):
    """--engine ray without Ray installed, or a cluster that cannot be reached."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--engine ray needs Ray: pip install -e '.[ray]' (or pip install "
                             "'ray>=2.9')") from None
    return ray


def _package_dir() -> str:
    return str(Path(__file__).resolve().parents[1])


def connect(address: str | None) -> bool:
    """Connect this process to Ray (``address``: None = start a local Ray instance, 'auto' = the
    cluster started with ``ray start`` on this machine, or HOST:PORT); ship the ssmrepro package
    to the workers. Returns True if this call initialised Ray (the caller shuts it down)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    env = {"py_modules": [_package_dir()], "excludes": ["__pycache__", "*.pyc"]}
    local = {"include_dashboard": False} if address is None else {}
    handlers = _signal_handlers()
    try:
        ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level="WARNING",
                 **local)
    except (ConnectionError, ValueError, RuntimeError) as err:
        raise RayUnavailable(f"--address {address}: cannot connect to Ray ({err})") from None
    finally:
        _restore(handlers)
    return True


def _signal_handlers() -> dict:
    """This process's Python handlers of SIGTERM and SIGINT ({} outside the main thread)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}  # handlers belong to the main thread (a command runs there)
    return {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}


def _restore(handlers: dict) -> None:
    """Put back the handlers ``ray.init`` replaced: it sets SIGTERM to ``sys.exit(15)`` (and its
    C core a stack-dumping failure handler), so `kill PID` of a `run --engine ray` ended with
    exit 1 and no line, or a '*** SIGTERM received ...' dump and exit 134, instead of ending as
    an interrupted sweep (one 'interrupted' line, exit 130) as the local engine does."""
    import signal

    for sig, handler in handlers.items():
        if handler is not None:  # None: installed outside Python, nothing to put back
            signal.signal(sig, handler)


def shutdown() -> None:
    _ray().shutdown()


def cluster_device(device: str) -> str:
    """'auto' -> 'cuda' if the cluster has GPUs, else 'cpu'; 'cuda:N' -> 'cuda' (Ray gives each
    task its own GPU); 'cuda' on a cluster without GPUs is an error."""
    ray = _ray()
    gpus = ray.cluster_resources().get("GPU", 0)
    if device == "auto":
        return "cuda" if gpus else "cpu"
    if device.startswith("cuda"):
        if not gpus:
            raise RayUnavailable(f"--device {device}: the Ray cluster has no GPUs")
        return "cuda"
    return device


def resources(device: str, cpus_per_pack: int = 1, memory: int = 0) -> dict[str, float]:
    """A pack task's Ray resources: one GPU on CUDA (so packs never share a GPU's memory), else
    ``cpus_per_pack`` CPUs and ``memory`` bytes (the pack's estimate, ``plan.pack_memory``): Ray
    starts a task only on a node whose unreserved memory holds it, so the packs running at once on
    one node fit its memory together, as ``plan.workers_in_memory`` limits the local workers."""
    if device.startswith("cuda"):
        return {"num_gpus": 1, "num_cpus": 1}
    return {"num_cpus": cpus_per_pack, **({"memory": int(memory)} if memory > 0 else {})}


def node_memory() -> int | None:
    """The largest memory resource of one live node of the cluster (bytes Ray lets its tasks
    reserve there), None when no node reports one. A task asking for more is never scheduled."""
    sizes = [n.get("Resources", {}).get("memory", 0) for n in _ray().nodes() if n.get("Alive")]
    return int(max(sizes)) if any(sizes) else None


def pack_request(pack: Pack, device: str, largest: int | None) -> int:
    """The memory a CPU pack task reserves: its estimate, at most what the largest node offers
    (a request no node can meet would wait forever; such a pack runs alone on that node and
    checks its memory there). 0 on CUDA (the GPU is the task's own)."""
    if device.startswith("cuda"):
        return 0
    need = pack_memory(pack)
    return min(need, largest) if largest else need


def slots(device: str, cpus_per_pack: int = 1) -> int:
    """How many pack tasks the cluster can run at once. ``RayUnavailable`` when no node has
    ``cpus_per_pack`` CPUs: Ray never schedules such a task, and `run --cpus-per-pack 64` on a
    smaller cluster waited for ever ('1 pack slots', then nothing)."""
    ray = _ray()
    res = ray.cluster_resources()
    if device.startswith("cuda"):
        return max(1, int(res.get("GPU", 0)))
    largest = max((n.get("Resources", {}).get("CPU", 0) for n in ray.nodes() if n.get("Alive")),
                  default=0)
    if largest and cpus_per_pack > largest:
        raise RayUnavailable(f"--cpus-per-pack {cpus_per_pack}: no node of the Ray cluster has "
                             f"that many CPUs (the largest has {largest:g}), so no pack could "
                             "ever start; ask for at most that many")
    return max(1, int(res.get("CPU", 0) // max(1, cpus_per_pack)))


def _probe_budget(device: str) -> int:
    from .plan import _budget

    return _budget(device)


def device_budget(device: str) -> int | None:
    """Memory budget of a pack, measured on a worker that owns the device (GPU: half its free
    memory, as ``plan.auto_pack_size`` does locally); None on CPU (the local default applies)."""
    if not device.startswith("cuda"):
        return None
    ray = _ray()
    task = ray.remote(_probe_budget).options(name="ssmrepro_budget", **resources(device))
    return int(ray.get(task.remote("cuda")))


def _train_task(runs: list, ws: WorkSettings, threads: int,
                micro_batch: int | None = None, eval_chunk: int | None = None) -> PackResult:
    """The Ray task: train one pack on the worker and return its records (writes nothing)."""
    import torch

    from ..kernels.backend import select_backend, set_scan_backend
    from ..util import flush_denormals

    flush_denormals()
    torch.set_num_threads(max(1, threads))
    backend, _ = select_backend(ws.backend, ws.device)  # 'auto' resolves on the worker
    set_scan_backend(backend)
    ws = dataclasses.replace(ws, backend=backend)
    return train_records(runs, ws, micro_batch=micro_batch, eval_chunk=eval_chunk)


def run_ray(packs: list[tuple[int, Pack]], store: Store, ws: WorkSettings, emit: EventFn, *,
            cpus_per_pack: int = 1, max_retries: int = MAX_RETRIES,
            heartbeat_s: float = HEARTBEAT_S, poll_s: float = 0.5,
            on_submit: Callable[[int], None] | None = None) -> None:
    """Run ``packs`` as Ray tasks (Ray must be connected: ``connect``). At most twice as many packs
    as the cluster has slots are claimed and in flight at once; the rest wait here unclaimed."""
    ray = _ray()
    remote = ray.remote(_train_task)
    largest = None if ws.device.startswith("cuda") else node_memory()

    def task(pack: Pack):
        return remote.options(name=TASK_NAME, max_retries=max_retries, retry_exceptions=False,
                              **resources(ws.device, cpus_per_pack,
                                          pack_request(pack, ws.device, largest)))

    ws = dataclasses.replace(ws, device="cuda" if ws.device.startswith("cuda") else ws.device)
    todo = list(packs)
    in_flight: dict = {}  # ObjectRef -> (pack index, claimed run ids, skipped run ids)
    last_beat = time.monotonic()

    def submit() -> None:
        window = 2 * slots(ws.device, cpus_per_pack)
        while todo and len(in_flight) < window:
            i, pack = todo.pop(0)
            mine = [r for r in pack.runs if store.claim(r.run_id)]
            skipped = [r.run_id for r in pack.runs if r not in mine]
            if not mine:
                emit(Event("pack_end", i, skipped=skipped))
                continue
            ids = [r.run_id for r in mine]
            in_flight[task(pack).remote(mine, ws, cpus_per_pack, pack.micro_batch,
                                        pack.eval_chunk)] = (
                i, ids, skipped)
            emit(Event("pack_start", i, run_ids=ids))
            if on_submit is not None:
                on_submit(i)

    try:
        submit()
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=poll_s)
            if time.monotonic() - last_beat > heartbeat_s:
                store.heartbeat([r for _, ids, _ in in_flight.values() for r in ids])
                last_beat = time.monotonic()
            for ref in ready:
                i, ids, skipped = in_flight.pop(ref)
                try:
                    res: PackResult = ray.get(ref)
                except Exception as err:  # retries exhausted: node/worker lost, or unpicklable
                    msg = f"Ray task failed after {max_retries} retries: {type(err).__name__}: " \
                          f"{str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
                    emit(Event("pack_end", i, failed=ids, skipped=skipped, message=msg))
                else:
                    lost = store_result(store, res)
                    kept = [r for r in ids if r not in lost]
                    skipped = skipped + lost
                    bad = [x for x in res.failed_ids() if x not in lost]
                    emit(Event("pack_end", i, run_ids=[x for x in kept if x not in bad],
                               failed=bad, skipped=skipped, message=res.message if bad else ""))
                for r in ids:  # after the records are written (a crash before leaves stale claims)
                    store.release(r)
            submit()
    finally:
        for ref, (_, ids, _) in in_flight.items():  # interrupted: stop the tasks, free the runs
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 (best effort on the way out)
                pass
            for r in ids:
                store.release(r)


__all__ = ["HEARTBEAT_S", "MAX_RETRIES", "TASK_NAME", "RayUnavailable", "cluster_device",
           "connect", "device_budget", "node_memory", "pack_request", "resources", "run_ray",
           "shutdown", "slots"]
