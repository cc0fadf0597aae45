"""Benchmark the Pathfinder generator: images per second (wall clock and per CPU-second).

Usage:
    python scripts/bench_pathfinder.py --res 32 --n 3000 --workers 2

Wall-clock throughput depends on what else runs on the machine; ``images/cpu-s`` (summed over the
worker processes) is the load-independent number, and ``cores * images/cpu-s`` is what idle cores
would deliver.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ssmrepro.data.pathfinder import generate_pathfinder  # noqa: E402

MAX_BYTES = 1 << 30  # of the images, n * res^2 uint8, held at once


def _cpu_seconds() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    # imported here, not at the top: every spawned worker imports this script (as __mp_main__)
    # before it generates, and bench.timing imports torch: about 1.4 CPU-s per worker counted
    # as generating (--n 1000 --workers 2: 7.7 CPU-s, 130 images/cpu-s; 4.7 and 214 without)
    from ssmrepro.bench.timing import bounded
    from ssmrepro.util import docstring

    doc = __doc__ or docstring(sys.modules.get(__name__)) or ""  # (stripped under -OO)
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--res", type=int, default=32, choices=[32, 64, 128, 256])
    # bounded: --n 0 printed `label balance: nan` and 0 images/s, --n -5 was a traceback, and
    # --workers 0 or -1 ran one process while the line said workers=0 / workers=-1
    ap.add_argument("--n", type=bounded(1, MAX_BYTES // (32 * 32)), default=3000)
    ap.add_argument("--workers", type=bounded(1, 1024), default=2)
    ap.add_argument("--seed", type=bounded(0, 2**32 - 1), default=0)
    args = ap.parse_args(argv)
    if args.n * args.res**2 > MAX_BYTES:
        ap.error(f"--n {args.n} at --res {args.res}: {args.n * args.res**2:,} bytes of images, "
                 f"above {MAX_BYTES:,} (at most {MAX_BYTES // args.res**2:,} images)")

    t0, c0 = time.perf_counter(), _cpu_seconds()
    images, labels = generate_pathfinder(args.n, args.res, args.seed, workers=args.workers)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0  # children counted once they exit
    print(f"resolution {args.res}: {len(labels)} images, workers={args.workers}, cores={os.cpu_count()}")
    print(f"wall   {wall:8.2f} s  -> {len(labels) / wall:8.1f} images/s")
    print(f"cpu    {cpu:8.2f} s  -> {len(labels) / cpu:8.1f} images/cpu-s")
    print(f"label balance: {labels.mean():.3f}; load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
