"""Ray engine overheads against the local engine on the same sweep (README "Scale-out on Ray").

    python scripts/bench_ray.py [--spec keep-nth] [--profile smoke] [--cpus 1] [--out F.json]

Needs Ray (pip install -e '.[ray]'). Measures, in this process, on this machine:
  * start-up: ``ray.init()`` of a local Ray instance (what ``--engine ray`` without --address
    does) until the first pack task can run (includes shipping the ssmrepro package);
  * the sweep through the local engine (``--cpus`` workers; one: in-process) and through Ray
    (``--cpus`` CPUs), so both run as many packs at a time, each into a fresh results folder;
  * per-pack dispatch overhead = (Ray sweep - local sweep) / packs, start-up excluded;
  * the same on a sweep whose packs do no training (``train.max_steps = 0``, ``train.epochs =
    null``: evaluation only), so
    the dispatch cost is not hidden in training-time noise.
Writes one JSON record (machine, versions, seconds) to --out (default
results/bench/ray-overhead-cpu.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only


def main(argv: list[str] | None = None) -> int:
    from ssmrepro.bench.timing import bounded
    from ssmrepro.util import docstring, plain_rst

    doc = __doc__ or docstring(sys.modules.get(__name__)) or ""  # (stripped under -OO)
    ap = argparse.ArgumentParser(description=plain_rst(doc),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="keep-nth")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--cpus", type=bounded(1, 1024), default=1, help="CPUs of the local Ray instance")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "ray-overhead-cpu.json")
    a = ap.parse_args(argv)

    from ssmrepro.spec import SpecError, find_spec
    from ssmrepro.util import atomic_write_text, prepare_target

    # checked before Ray starts (an unknown spec or profile, a missing Ray, --cpus 0 and a
    # folder in --out's place were tracebacks, the last after minutes of measuring)
    try:
        spec = find_spec(a.spec)
    except SpecError as err:
        ap.error("; ".join(err.messages))
    if a.profile not in spec.profiles:
        ap.error(f"--profile {a.profile}: not a profile of {spec.id} (have "
                 f"{', '.join(sorted(spec.profiles))})")
    try:
        import ray
    except ImportError:
        ap.error("needs Ray: pip install -e '.[ray]'")
    try:
        prepare_target(a.out)
    except OSError as err:
        ap.error(f"--out {a.out}: {err.strerror or err}")
    import torch
    from rich.console import Console

    from ssmrepro.engine import ray_engine, run_experiment

    quiet = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    torch.set_num_threads(1)  # the Ray tasks run one thread each
    tmp = Path(tempfile.mkdtemp(prefix="ssmrepro-bench-ray-"))
    try:  # the sweeps' results folders were left in the temp folder, every run
        rec = _measure(a, spec, tmp, ray, torch, quiet, ray_engine, run_experiment)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(a.out, json.dumps(rec, indent=2) + "\n")  # whole or not at all
    print(json.dumps(rec, indent=2))
    return 0


def _measure(a, spec, tmp: Path, ray, torch, quiet, ray_engine, run_experiment) -> dict:
    rec: dict = {"spec": spec.id, "profile": a.profile, "ray_cpus": a.cpus, "host_cpus": os.cpu_count(),
                 "python": platform.python_version(), "torch": torch.__version__,
                 "ray": ray.__version__, "machine": platform.machine()}

    t0 = time.perf_counter()
    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False, logging_level="WARNING",
             runtime_env={"py_modules": [str(ROOT / "ssmrepro")], "excludes": ["__pycache__"]})
    ray.get(ray.remote(lambda: 1).options(num_cpus=1).remote())  # first task: workers + package
    rec["startup_s"] = round(time.perf_counter() - t0, 2)

    def sweep(engine: str, overrides: dict | None, tag: str) -> tuple[float, int]:
        # as many packs at a time on both sides: Ray runs one per CPU, and the local engine ran
        # one (workers=1) beside Ray's --cpus 2, so the difference was no dispatch overhead
        s = run_experiment(spec, a.profile, tmp / f"{engine}-{tag}", "cpu", "torch",
                           workers=a.cpus, console=quiet, overrides=overrides, engine=engine)
        if not s.ok:  # an assert: a traceback, and no check at all under python -O
            raise SystemExit(f"the {engine} sweep ({tag}) did not finish: {'; '.join(s.messages)}")
        return s.wall_s, s.packs

    try:
        for tag, ov in (("train", None), ("no-train", {"train.max_steps": 0, "train.epochs": None})):
            local_s, packs = sweep("local", ov, tag)
            ray_s, _ = sweep("ray", ov, tag)
            rec[tag] = {"packs": packs, "local_s": round(local_s, 2), "ray_s": round(ray_s, 2),
                        "dispatch_per_pack_s": round((ray_s - local_s) / max(1, packs), 3)}
    finally:
        ray_engine.shutdown()
    return rec


if __name__ == "__main__":
    raise SystemExit(main())
