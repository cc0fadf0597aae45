"""The planner's own choice for one shape, measured now: the largest same-shape group of a spec
profile's runs (optionally widened to N runs by seed and given sequence length T), planned with a
fresh cost model (``engine.costs.CostModel``) in a cache file of its own.

    python scripts/planner_calibration.py huang2025-tabA1-A4 long costs-fresh.json \
        --budget 1.0 --runs 128 --T 50      # the README's KEEP n-TH d = 8 calibration
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

# this checkout's package, as the other scripts: without it `python scripts/...` in a venv
# without ssmrepro was a ModuleNotFoundError traceback, and in one whose ssmrepro is another
# checkout's it planned with that checkout's code
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import ValidationError  # noqa: E402

from ssmrepro.bench.timing import bounded, bounded_float  # noqa: E402
from ssmrepro.engine.costs import CostModel  # noqa: E402
from ssmrepro.engine.plan import auto_pack_size, by_shape, plan  # noqa: E402
from ssmrepro.spec import SpecError, find_spec  # noqa: E402
from ssmrepro.sweep import expand  # noqa: E402
from ssmrepro.util import docstring  # noqa: E402


def main() -> None:
    doc = __doc__ or docstring(sys.modules.get(__name__)) or ""  # (stripped under -OO)
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("spec")
    ap.add_argument("profile")
    ap.add_argument("cache", type=Path, help="cost cache file (a fresh one re-measures)")
    ap.add_argument("--budget", type=bounded_float(0, 1, "a share"), default=0.05,
                    help="share of the shape's training time calibration may spend")
    # bounded: --runs -1 was an IndexError traceback, --T -3 a RuntimeError in the task
    ap.add_argument("--runs", type=bounded(1, 1 << 16), default=None,
                    help="widen the group to this many seeds")
    ap.add_argument("--T", type=bounded(1, 1 << 20), default=None,
                    help="override task.T (KEEP n-TH length)")
    a = ap.parse_args()
    try:  # an unknown spec or profile was a SpecError traceback
        runs = expand(find_spec(a.spec), a.profile)
    except SpecError as err:
        ap.error("; ".join(err.messages))
    rs = max(by_shape(runs).values(), key=len)
    task = rs[0].task
    if a.T:  # validated as the spec's task is (n > T, a task without T)
        try:
            task = type(task).model_validate({**task.model_dump(), "T": a.T})
        except ValidationError as err:
            ap.error(f"--T {a.T}: {err.errors()[0]['msg']} (task {task.name})")
    if a.runs:
        rs = [dataclasses.replace(rs[0], seed=i, run_id=f"calib{i}", task=task)
              for i in range(a.runs)]
    else:  # --T without --runs was ignored without a word: the spec's T was measured
        rs = [dataclasses.replace(r, task=task) for r in rs]
    print(f"{a.spec} {a.profile}: {len(rs)} runs of shape {rs[0].pack_key()}, memory cap "
          f"{auto_pack_size(rs, 'cpu')}, {rs[0].train.total_steps} steps each")
    cm = CostModel(path=a.cache, budget=a.budget)
    t = time.process_time()
    packs = plan(rs, costs=cm)
    print("\n".join(cm.log))
    print(f"packs {[len(p.runs) for p in packs]}, micro-batch {packs[0].micro_batch}; "
          f"{time.process_time() - t:.1f} CPU-s")


if __name__ == "__main__":
    main()
