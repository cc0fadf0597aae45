"""`ssmrepro bench step` and the benchmark harness: records, FLOP count, exact micro-batching.
No wall-clock assertion anywhere."""

import copy
import json
import math
from datetime import datetime, timezone

import torch
from typer.testing import CliRunner

from ssmrepro.bench import step as st
from ssmrepro.bench.timing import Stats, interleaved, matmul_peak
from ssmrepro.cli import app


def test_interleaved_runs_every_contender_in_rotated_order():
    calls = []
    fns = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    stats = interleaved(fns, repeats=3, warmup=1, inner=2)
    assert set(stats) == set("abc") and all(isinstance(s, Stats) and s.n == 3 for s in stats.values())
    # the Timer makes 2 untimed warm-up calls before each sample: the warm-up round is 3 calls per
    # contender, each timed sample 2 + inner = 4, in rotated order
    assert calls[:9] == list("aaabbbccc")
    assert calls[9:21] == list("aaaabbbbcccc") and calls[21:33] == list("bbbbccccaaaa")
    s = stats["a"]
    assert s.cpu_min <= s.cpu_median <= s.cpu_max and s.wall_min <= s.wall_median <= s.wall_max
    assert set(s.ms()) == {"n", "wall_median", "wall_min", "wall_max", "cpu_median", "cpu_min", "cpu_max"}


def test_matmul_peak_is_positive():
    assert matmul_peak(n=64, seconds=0.01, repeats=1) > 0


def test_step_flops_of_the_issue_workload():
    w = st.STEP_WORKLOADS["mamba-L256"]
    M, d, Di, N, R = 64 * 256, 64, 128, 16, 4
    layer = 2 * M * d * 2 * Di + 2 * M * Di * 4 + 2 * M * Di * (R + 2 * N) + 2 * M * R * Di \
        + 7 * M * Di * N + 2 * M * Di * d
    assert st.step_flops(w) == 3 * (2 * layer + 2 * M * d * 512)
    assert st.step_flops(w, 4) == 4 * st.step_flops(w)
    assert math.isclose(st.step_flops(w) / 1e9, 10.6, rel_tol=0.05)


def test_micro_batched_step_is_exact_float64():
    """Gradient accumulation over micro-batches gives the parameters of the full-batch step."""
    w = st.StepWorkload("tiny", 13, 8, 4, 3, 2, 2, 6, 9, "tiny")
    model = st._our_model(w, 2).double()
    ids, tgt = st._data(w, 2)
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    c, d = copy.deepcopy(model), copy.deepcopy(model)
    st.make_step(a, ids, tgt, w.vocab)()
    st.make_step(b, ids, tgt, w.vocab, micro=4)()  # 4 + 2 sequences
    st.make_step(c, ids, tgt, w.vocab, fused=True)()  # the engine's fused read-out + loss
    st.make_step(d, ids, tgt, w.vocab, micro=4, fused=True)()
    for pa, pb, pc, pd in zip(a.parameters(), b.parameters(), c.parameters(), d.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(pc, pa, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(pd, pa, rtol=1e-10, atol=1e-12)
    assert any(not torch.equal(pa, p0) for pa, p0 in zip(a.parameters(), model.parameters()))


def test_bench_step_cli_writes_record(tmp_path):
    out = tmp_path / "step.json"
    r = CliRunner().invoke(app, ["bench", "step", "--workloads", "koren-d-L64", "--batch", "4",
                                 "--L", "8", "--E", "1", "2", "--micro", "2", "--repeats", "1",
                                 "--warmup", "0", "--no-mambapy", "--json", str(out)])
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text())
    names = {x["contender"] for x in rec["results"]}
    assert names == {"old E=1", "new E=1", "new E=1 mb=2", "old E=2", "new E=2", "new E=2 mb=2"}
    for x in rec["results"]:
        assert x["cpu_median"] > 0 and x["gflops"] > 0 and 0 < x["fraction_of_peak"]
        assert x["run_steps_per_s"] > 0 and "speedup_vs_old" in x
    env = rec["env"]
    assert env["threads"] == 1 and env["matmul_peak_gflops"] > 0 and env["cpu"] and env["commit"]
    # when it was measured, in UTC (local time without a zone put the roofline's date a day off)
    when = datetime.fromisoformat(env["time"].replace("Z", "+00:00"))
    assert env["time"].endswith("Z") and abs(datetime.now(timezone.utc) - when).total_seconds() < 600
    assert rec["workloads"]["koren-d-L64"]["batch"] == 4


def test_mambapy_reference_when_installed():
    """Same parameter count as ours (tied head); skipped when mambapy is not installed."""
    import pytest

    pytest.importorskip("mambapy.mamba")
    w = st.StepWorkload("tiny", 13, 16, 4, 4, 2, 2, 2, 5, "tiny")
    ref, ours = st._mambapy_model(w), st._our_model(w, 1)
    assert sum(p.numel() for p in ref.parameters()) == sum(p.numel() for p in ours.parameters())
    assert ref(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 13)


def test_cpu_clock_brackets_only_the_timed_calls():
    """The Timer's warm-up calls are not on the CPU clock of a sample."""
    import time as t

    def burn():
        c0 = t.process_time()
        while t.process_time() - c0 < 0.01:
            pass

    s = interleaved({"a": burn}, repeats=2, warmup=0, inner=1)["a"]
    assert 0.009 < s.cpu_median < 0.02  # one 10 ms call, not three (2 warm-ups + 1)


def test_gemm_floor_covers_every_linear_map_of_our_model():
    """The floor's GEMMs are the model's projections and tied read-out, one each, and its FLOPs the
    matmul part of step_flops (no conv, no scan)."""
    from collections import Counter

    w = st.STEP_WORKLOADS["mamba-L256"]
    model = st._our_model(w, 1)
    M = w.batch * w.L
    maps = Counter()
    for name, p in model.named_parameters():
        if name.endswith(("in_proj.weight", "x_proj.weight", "out_proj.weight", "dt_weight")):
            maps[(M, p.shape[1], p.shape[2])] += 1  # (1, in, out)
        elif name == "embed.weight":
            maps[(M, p.shape[2], p.shape[1])] += 1  # tied read-out: d -> V
    assert maps == Counter(st.step_gemms(w))
    N, Di = w.d_state, w.expand * w.d_model
    rest = 3 * w.n_layers * (2 * M * Di * w.d_conv + 7 * M * Di * N)
    assert st.gemm_flops(w) == st.step_flops(w) - rest


def test_bench_step_gemm_floor_row(tmp_path):
    out = tmp_path / "step.json"
    r = CliRunner().invoke(app, ["bench", "step", "--workloads", "koren-d-L64", "--batch", "4",
                                 "--L", "8", "--E", "1", "--repeats", "1", "--warmup", "0",
                                 "--no-old", "--no-mambapy", "--gemm-floor", "--json", str(out)])
    assert r.exit_code == 0, r.output
    rows = {x["contender"]: x for x in json.loads(out.read_text())["results"]}
    assert set(rows) == {"new E=1", st.FLOOR}
    w = st.replace(st.STEP_WORKLOADS["koren-d-L64"], batch=4, L=8)
    assert rows[st.FLOOR]["flops_per_step"] == st.gemm_flops(w)
