"""`ssmrepro bench scans` runs the scan micro-benchmark and writes its JSON record."""

import json

from typer.testing import CliRunner

from ssmrepro.cli import app


def test_bench_scans_cli_writes_rows_for_every_variant(tmp_path):
    out = tmp_path / "scans.json"
    r = CliRunner().invoke(app, ["bench", "scans", "--L", "32", "--kernels", "selective", "ssd",
                                 "--repeats", "1", "--warmup", "0", "--batch", "2", "--d", "4",
                                 "--n", "2", "--json", str(out)])
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text())
    rows = {(x["kernel"], x.get("variant", x.get("fast"))) for x in rec["results"]}
    assert {k for k, _ in rows} == {"selective", "ssd"}
    assert len(rows) >= 3  # selective: chunked + fused; ssd: chunked
    assert all(x["ref_ms_median"] > 0 and x["speedup"] > 0 for x in rec["results"])
    assert rec["env"]["torch"]


def test_bench_rejects_stray_options_for_training_workloads():
    r = CliRunner().invoke(app, ["bench", "keep-nth-d8", "--nope"])
    assert r.exit_code == 2 and "unexpected arguments" in r.output
