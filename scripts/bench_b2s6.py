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
import time

import torch

from ssmrepro.models.layers import reset_members
from ssmrepro.models.mixers import build_mixer

SHAPES = {"bench": dict(d=64, N=16, h=8, L=64, B=32), "lra": dict(d=128, N=64, h=8, L=1024, B=2)}


def contender(shape: dict, E: int, impl: str, disc: str):
    m = build_mixer({"name": "b2s6", "d_state": shape["N"], "heads": shape["h"], "impl": impl,
                     "discretization": disc}, E, shape["d"])
    reset_members(m, list(range(E)))
    x = torch.randn(E, shape["B"], shape["L"], shape["d"], requires_grad=True)

    def step() -> None:
        m(x).square().mean().backward()

    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="bench", choices=sorted(SHAPES))
    ap.add_argument("--packs", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--impls", nargs="+", default=["direct", "fused"])
    ap.add_argument("--disc", nargs="+", default=["euler", "zoh"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    shape = SHAPES[a.shape]
    steps = {(impl, disc, E): contender(shape, E, impl, disc)
             for disc in a.disc for E in a.packs for impl in a.impls}
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
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(shape=a.shape, dims=shape, threads=1, clock="process_time",
                           torch=torch.__version__, what="one B2S6 mixer layer, fwd + bwd",
                           rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
