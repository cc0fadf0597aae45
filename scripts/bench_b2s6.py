"""Tool (scripts): B2S6 mixer fwd + bwd, old ``direct`` path against the fused kernel (``fused``).

One intra-op thread, CPU clock (time.process_time), contenders interleaved in rotated order,
``--reps`` rounds, medians and min/max per contender; a pack of E members against E times one
member. Shapes: ``bench`` (the mqar-b2s6 bench layer: d=64, N=16, h=8, L=64, batch 32) and ``lra``
(yu2025 LRA-like: d=128, N=64, h=8, L=1024, batch 2). Writes JSON to ``--out``.

    python scripts/bench_b2s6.py --shape bench --packs 1 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from ssmrepro.bench.timing import MAX_BENCH_ELEMENTS, bounded  # noqa: E402
from ssmrepro.models.layers import reset_members  # noqa: E402
from ssmrepro.models.mixers import build_mixer  # noqa: E402
from ssmrepro.util import docstring  # noqa: E402

SHAPES = {"bench": dict(d=64, N=16, h=8, L=64, B=32), "lra": dict(d=128, N=64, h=8, L=1024, B=2)}


def contender(shape: dict, E: int, impl: str, disc: str):
    m = build_mixer({"name": "b2s6", "d_state": shape["N"], "heads": shape["h"], "impl": impl,
                     "discretization": disc}, E, shape["d"])
    reset_members(m, list(range(E)))
    x = torch.randn(E, shape["B"], shape["L"], shape["d"], requires_grad=True)

    def step() -> None:
        m(x).square().mean().backward()

    return step


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or docstring(sys.modules.get(__name__)) or ""  # (stripped under -OO)
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--shape", default="bench", choices=sorted(SHAPES))
    # bounded, and choices: --packs 0 was a ZeroDivisionError traceback, -1 a negative dimension,
    # --reps 0 a StatisticsError after the warm-up, an unknown impl a pydantic traceback
    ap.add_argument("--packs", type=bounded(1, 256), nargs="+", default=[1, 4])
    ap.add_argument("--impls", nargs="+", default=["direct", "fused"],
                    choices=["direct", "split", "fused"])
    ap.add_argument("--disc", nargs="+", default=["euler", "zoh"], choices=["euler", "zoh"])
    ap.add_argument("--reps", type=bounded(1, 1000), default=5)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    for name in ("packs", "impls", "disc"):  # a value given twice was timed once, without a word
        vals = getattr(a, name)
        twice = sorted({str(v) for v in vals if vals.count(v) > 1})
        if twice:
            ap.error(f"--{name}: {', '.join(twice)} given twice")
    shape = SHAPES[a.shape]
    # the scan's states over the sequence, E*B*L*d*N floats, bounded as `bench scans` bounds its
    # tensors (--shape lra --packs 256 asked for about 4 * 10^9 floats: the allocator's traceback)
    states = max(a.packs) * shape["B"] * shape["L"] * shape["d"] * shape["N"]
    if states > MAX_BENCH_ELEMENTS:
        ap.error(f"--packs {max(a.packs)} at --shape {a.shape}: the scan's states are {states:,} "
                 f"floats, above {MAX_BENCH_ELEMENTS:,} (2^28)")
    if a.out is not None:  # refused before measuring (a folder there was a traceback after it)
        from ssmrepro.util import prepare_target

        try:
            prepare_target(a.out)
        except OSError as err:
            ap.error(f"--out {a.out}: {err.strerror or err}")
    torch.set_num_threads(1)
    try:  # a combination the mixer refuses (--impls split --disc zoh) was a pydantic traceback
        steps = {(impl, disc, E): contender(shape, E, impl, disc)
                 for disc in a.disc for E in a.packs for impl in a.impls}
    except ValidationError as err:
        ap.error(f"--impls / --disc: {err.errors()[0]['msg']}")
    keys = list(steps)
    for k in keys:  # warm-up
        steps[k]()
    times: dict = {k: [] for k in keys}
    for r in range(a.reps):
        order = keys[r % len(keys):] + keys[: r % len(keys)]
        for k in order:
            t0 = time.process_time()
            steps[k]()
            times[k].append(time.process_time() - t0)
    rows = []
    for (impl, disc, E), ts in times.items():
        med = statistics.median(ts)
        rows.append(dict(impl=impl, disc=disc, E=E, median_s=med, min_s=min(ts), max_s=max(ts),
                         per_member_s=med / E, times=ts))
        print(f"{a.shape} {disc:5s} {impl:6s} E={E}: median {med:.4f} s [{min(ts):.4f}, "
              f"{max(ts):.4f}]  per member {med / E:.4f} s", flush=True)
    if a.out is not None:
        from ssmrepro.util import atomic_write_text

        atomic_write_text(a.out, json.dumps(dict(
            shape=a.shape, dims=shape, threads=1, clock="process_time", torch=torch.__version__,
            what="one B2S6 mixer layer, fwd + bwd", rows=rows), indent=1))  # whole or not at all
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
