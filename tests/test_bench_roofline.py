"""Tool (bench): op-by-op FLOP and byte counts, the packs record's work columns, the roofline
figure and performance table from records."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import torch
from typer.testing import CliRunner

from ssmrepro.bench.counting import count
from ssmrepro.bench.packs import WORKLOADS, packed_step_fn, plain_step, run_bench
from ssmrepro.bench.roofline import performance_table, roofline_figure
from ssmrepro.cli import app

runner = CliRunner()


def test_count_of_a_matmul_is_the_docstring_example():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    c = count(lambda: torch.mm(a, b))
    assert c.flops == 2 * 64 * 32 * 16 and c.bytes == (64 * 32 + 32 * 16 + 64 * 16) * 4 and c.ops == 1


def test_count_skips_views_and_counts_elementwise_ops():
    x = torch.randn(10, 20)
    c = count(lambda: (x.view(200) * 2.0).sum())
    # mul: 200 FLOPs, 2 x 800 bytes; sum: 200 FLOPs (its operand), 800 + 4 bytes; the view: none
    assert c.ops == 2 and c.flops == 400 and c.bytes == 800 * 3 + 4


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_builds_and_a_pack_does_E_times_the_work(name):
    torch.set_num_threads(1)
    w = WORKLOADS[name]
    one, two = plain_step(w, "cpu"), packed_step_fn(w, 2, "cpu")
    c1, c2 = count(one), count(two)
    assert c1.flops > 0 and c1.bytes > 0
    # the engine's packed step does the model's work twice (give or take the optimiser and
    # the per-member bookkeeping), so its counted FLOPs are close to twice the plain step's
    assert 1.6 < c2.flops / c1.flops < 2.4


def test_run_bench_records_work_and_roofline_reads_it(tmp_path):
    rec = run_bench("keep-nth-d8", "cpu", [2], 0.01, tmp_path, echo=lambda *a: None)
    for row in (rec["plain"], rec["packed"][0]):
        assert row["gflops"] > 0 and 0 < row["fraction_of_peak"] < 1.5 and row["intensity"] > 0
    assert rec["matmul_peak_gflops"] > 0 and rec["copy_bandwidth_gbs"] > 0
    saved = json.loads((tmp_path / "keep-nth-d8-cpu.json").read_text())
    assert saved["packed"][0]["pack"] == 2
    when = datetime.fromisoformat(saved["time"].replace("Z", "+00:00"))  # UTC, not local time
    assert saved["time"].endswith("Z") and abs(datetime.now(timezone.utc) - when).total_seconds() < 600
    table = performance_table(tmp_path)
    assert "| keep-nth-d8 (" in table and "E = 2" in table
    assert roofline_figure(tmp_path, tmp_path / "r.png").stat().st_size > 5000
    res = runner.invoke(app, ["bench", "roofline", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "roofline-cpu.png").exists() and (tmp_path / "performance.md").exists()


def test_roofline_of_an_empty_folder_draws_nothing(tmp_path):
    assert roofline_figure(tmp_path, tmp_path / "r.png") is None
    assert performance_table(tmp_path).count("\n") == 1  # the header only


def test_bench_rejects_bad_pack_sizes():
    for bad in ("0", "x", "1000"):
        res = runner.invoke(app, ["bench", "keep-nth-d8", "--packs", bad])
        assert res.exit_code == 2, (bad, res.output)


def test_step_table_keeps_the_gemm_floor_out_of_ours_and_shows_the_ceiling():
    from ssmrepro.bench.roofline import _step_line, _step_rows_of
    from ssmrepro.bench.step import FLOOR

    def row(contender, E, rate):
        return {"workload": "w", "contender": contender, "E": E, "run_steps_per_s": rate,
                "fraction_of_peak": 0.3}

    rec = {"env": {"time": "2026-11-27T14:29:00", "malloc_tuned": True, "denormals_flushed": True},
           "workloads": {"w": {"what": "a workload"}},
           "results": [row("new E=1", 1, 3.0), row("mambapy E=1", 1, 0.75), row(FLOOR, 1, 8.4)]}
    (r,) = _step_rows_of(rec)
    assert r["best_contender"] == "new E=1" and r["best"] == 3.0  # the floor is not a contender
    assert r["ceiling"] == 8.4 / 0.75
    assert "| ×4.0 | 30.0% | ×11.2 | 2026-11-27 |" in _step_line(r)
    rec["results"].pop()  # a record without the floor: no ceiling
    assert "| 30.0% | — | 2026-11-27 |" in _step_line(_step_rows_of(rec)[0])
