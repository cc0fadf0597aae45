"""CLI conventions (issue 19): --version, --set, --json, env vars, exit codes in every --help,
completion, bench scans --help, one way to list models; results people can use: metric
namespace, JSON list cells, curves.csv, export, the front page."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest
import yaml
from helpers import ROOT, write_spec
from typer.main import get_command
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.plots.export import export_table
from ssmrepro.plots.frontpage import STATUSES, catalogue, front_page, targets
from ssmrepro.report.curves import curve_table
from ssmrepro.spec import SpecError, load_spec
from ssmrepro.store import read_results
from ssmrepro.sweep import expand, parse_overrides

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def _json(res):
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("ssmrepro ")


def _commands(cmd, path=()):
    yield path, cmd
    if hasattr(cmd, "commands"):  # a group
        for name, sub in cmd.commands.items():
            yield from _commands(sub, path + (name,))


def test_every_command_help_states_the_exit_codes():
    for path, cmd in _commands(get_command(app)):
        if hasattr(cmd, "commands") and path:
            continue
        res = runner.invoke(app, [*path, "--help"], env=WIDE)
        assert res.exit_code == 0, (path, res.output)
        assert "Exit codes" in res.output and "2 bad input" in res.output, path


def test_bench_scans_help_shows_its_own_options():
    res = runner.invoke(app, ["bench", "scans", "--help"])
    assert res.exit_code == 0 and "--kernels" in res.output and "--L" in res.output


def test_completion_is_offered():
    assert "--install-completion" in runner.invoke(app, ["--help"], env=WIDE).output
    res = runner.invoke(app, ["--show-completion", "bash"])
    assert res.exit_code == 0 and "complete" in res.output


def test_one_way_to_list_models():
    assert runner.invoke(app, ["list", "--models"]).exit_code == 2
    assert "seq_lm" in runner.invoke(app, ["list-models"], env=WIDE).output


def test_list_json():
    rows = _json(runner.invoke(app, ["list", "--json"]))
    ids = {r["id"] for r in rows}
    assert "huang2025-tab1" in ids
    tab1 = next(r for r in rows if r["id"] == "huang2025-tab1")
    assert tab1["alias"] == "keep-nth" and tab1["results_csv"] and tab1["valid"]


# ---------------------------------------------------------------- --set


def test_parse_overrides_types_values_like_yaml():
    assert parse_overrides(["model.d_model=32", "train.betas=[0.9, 0.98]", "task.pe=null",
                            "train.lr=0.001"]) == {
        "model.d_model": 32, "train.betas": [0.9, 0.98], "task.pe": None, "train.lr": 1e-3}
    for bad in (["d_model=3"], ["model.d_model"], ["nosection.x=1"]):
        with pytest.raises(SpecError):
            parse_overrides(bad)


def test_set_changes_the_config_and_the_run_ids(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    base = expand(spec, "quick")
    over = expand(spec, "quick", overrides=parse_overrides(["model.d_model=12", "train.lr=2e-2"]))
    assert all(r.model.d_model == 12 and r.train.lr == 0.02 for r in over)  # validated as float
    assert {r.run_id for r in base}.isdisjoint({r.run_id for r in over})
    with pytest.raises(SpecError, match="d_model"):
        expand(spec, "quick", overrides={"model.d_model": "wide"})  # typed like the YAML
    with pytest.raises(SpecError, match="nope"):
        expand(spec, "quick", overrides={"model.nope": 1})
    with pytest.raises(SpecError, match="sweeps this key"):
        expand(spec, "quick", overrides={"model.mixer": "s6"})  # the cases set it


def test_show_and_validate_take_set(tmp_path):
    path = write_spec(tmp_path)
    doc = _json(runner.invoke(app, ["show", str(path), "--json", "--set", "model.d_model=12",
                                    "--out", str(tmp_path / "o")]))
    assert doc["config"]["model"]["d_model"] == 12 and doc["overrides"] == {"model.d_model": 12}
    assert all(r["config"]["model"]["d_model"] == 12 for r in doc["runs"])
    assert runner.invoke(app, ["validate", str(path), "--set", "model.d_model=12"]).exit_code == 0
    bad = runner.invoke(app, ["validate", str(path), "--set", "train.lr=-1"])
    assert bad.exit_code == 2 and "lr" in bad.output


def test_run_with_set_and_json_summary_env_out(tmp_path, monkeypatch):
    path = write_spec(tmp_path, seeds=[0])
    out = tmp_path / "o"
    monkeypatch.setenv("SSMREPRO_OUT", str(out))
    res = runner.invoke(app, ["run", str(path), "--set", "model.d_model=12", "--json",
                              "--pack-size", "1"])
    doc = _json(res)
    assert doc["ok"] and doc["trained"] == 2 and doc["overrides"] == {"model.d_model": 12}
    assert doc["outputs"]["verdicts"]["UNTESTED"] == 1
    spec = load_spec(path)
    root = out / spec.paper / spec.id
    tagged = sorted(p.name for p in root.glob("*-set-*"))
    assert any(n.startswith("results-set-") for n in tagged), tagged
    assert any(n.startswith("curves-set-") for n in tagged), tagged
    assert not (root / "results.csv").exists()  # the profile's own table is not overwritten
    # results.csv layout: metric namespace, JSON lists
    csv = next(root.glob("results-set-*.csv"))
    raw = pd.read_csv(csv)
    assert "metric.test.acc" in raw and "test.acc" not in raw
    assert json.loads(raw["train.betas"][0]) == [0.9, 0.999]
    df = read_results(csv)
    assert df["train.betas"][0] == [0.9, 0.999] and (df["model.d_model"] == 12).all()
    curves = pd.read_csv(next(root.glob("curves-set-*.csv")))
    assert list(curves.columns[:2]) == ["run_id", "label"]
    assert set(curves["run_id"]) == set(df["run_id"])
    assert {"val.acc", "val.loss", "step", "samples"} <= set(curves) and 0 in set(curves["step"])
    verdicts = _json(runner.invoke(app, ["verify", str(path), "--json", "--set",
                                         "model.d_model=12"]))
    assert verdicts["verdicts"]["UNTESTED"] == 1 and verdicts["id"] == spec.id


def test_env_device_and_workers_are_read(tmp_path, monkeypatch):
    path = write_spec(tmp_path, seeds=[0])
    monkeypatch.setenv("SSMREPRO_DEVICE", "tpu")
    res = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "tpu" in res.output
    monkeypatch.setenv("SSMREPRO_DEVICE", "cpu")
    monkeypatch.setenv("SSMREPRO_WORKERS", "0")
    res = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "workers" in res.output.lower()


def test_ray_engine_without_ray_or_with_address_only(tmp_path):
    path = write_spec(tmp_path, seeds=[0])
    res = runner.invoke(app, ["run", str(path), "--address", "auto"])
    assert res.exit_code == 2 and "--engine ray" in res.output
    res = runner.invoke(app, ["run", str(path), "--engine", "spark"])
    assert res.exit_code == 2


# ---------------------------------------------------------------- results people can use


def test_old_results_tables_read_in_the_new_layout():
    df = read_results(ROOT / "results/huang2025/huang2025-tab1/results.csv")
    assert "metric.test.acc" in df and "test.acc" not in df
    assert any(c.startswith("model.") for c in df) and "n_params" in df and "wall_s" in df
    assert isinstance(df["train.betas"].iloc[0], list)


def test_curve_table_one_row_per_evaluation():
    recs = [{"run_id": "a", "label": "M", "seed": 0, "status": "ok",
             "config": {"model": {"d_model": 8}, "train": {"batch_size": 4}},
             "history": [{"step": 0, "val.loss": 2.0, "val.acc": 0.1},
                         {"step": 10, "val.loss": float("nan"), "val.acc": 0.5}]},
            {"run_id": "b", "label": "M"}]
    df = curve_table(recs, ["label", "model.d_model"])
    assert list(df.columns) == ["run_id", "label", "model.d_model", "seed", "status", "step",
                                "samples", "val.loss", "val.acc"] and len(df) == 2
    assert df["samples"].tolist() == [0, 40] and df["model.d_model"].tolist() == [8, 8]
    assert math.isnan(df["val.loss"].iloc[1])


def test_export_one_long_table(tmp_path):
    df = export_table(ROOT / "results")
    assert {"huang2025-tab1", "koren2026-fig6"} <= set(df["experiment"])
    assert not df["metric"].str.startswith("metric.").any()
    assert df["value"].dtype == float
    row = df[(df.experiment == "huang2025-tab1") & (df.metric == "test.acc")].iloc[0]
    cfg = json.loads(row["config"])
    assert cfg["train.betas"] == [0.9, 0.999] and any(k.startswith("model.") for k in cfg)
    assert set(df[df.experiment == "koren2026-fig6"]["profile"]) >= {"quick", "designed-r0"}
    res = runner.invoke(app, ["export", "--file", str(tmp_path / "all.csv"), "--out",
                              str(ROOT / "results")])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(tmp_path / "all.csv")) == len(df)
    pq = runner.invoke(app, ["export", "--format", "parquet", "--file", str(tmp_path / "a.pq"),
                             "--out", str(ROOT / "results")])
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert pq.exit_code == 2 and "pyarrow" in pq.output
    else:
        assert pq.exit_code == 0 and len(pd.read_parquet(tmp_path / "a.pq")) == len(df)


def test_catalogue_is_shipped_with_49_targets():
    papers, rows = catalogue()
    assert len(rows) == 49 and len({r["id"] for r in rows}) == 49
    assert set(papers) == {r["paper"] for r in rows}
    for r in rows:
        assert r["tier"] in (1, 2, 3) and r["paper"] in r["id"]


def test_front_page_from_the_repo_results(tmp_path):
    dest = front_page(ROOT / "results", tmp_path / "README.md")
    text = dest.read_text()
    ts = targets(ROOT / "results", base=tmp_path)
    assert len(ts) >= 49 and all(t.status in STATUSES for t in ts)
    tab1 = next(t for t in ts if t.id == "huang2025-tab1")
    assert tab1.status == "quick results" and tab1.verdicts.startswith("5 PASS")
    assert tab1.quick_time and any(p.endswith("figure.png") for _, p in tab1.links)
    assert text.count("\n| ") >= 49 + 5  # a header row per paper
    assert "not specified" in text


def test_make_figures_on_a_fresh_clone_rebuilds_everything(tmp_path):
    """What `make figures` runs, on a copy of the committed results (no run records)."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results, ignore=shutil.ignore_patterns(
        "runs", "claims", "events.jsonl", "*.png", "report*.md", "summary*.csv", "README.md"))
    res = runner.invoke(app, ["figures", "--out", str(results)])
    assert res.exit_code == 0, res.output
    from ssmrepro.spec import find_spec

    # every committed figure is redrawn, koren2026's mechanistic ones (whose weights are not in
    # git) from the arrays committed beside them
    for png in (ROOT / "results").glob("*/*/*.png"):
        fig = results / png.relative_to(ROOT / "results")
        assert fig.exists() and fig.stat().st_size > 1000, fig
    compared = set()
    for csv in (ROOT / "results").glob("*/*/results*.csv"):
        here = results / csv.relative_to(ROOT / "results")
        spec = find_spec(csv.parent.name)
        rebuilt = here.with_name(here.name.replace("results", "report").replace(".csv", ".md"))
        assert rebuilt.exists()
        # a table of the current runs rebuilds the committed verdicts exactly (a table from an
        # older code version, whose run ids differ, is stale: it is re-run, not compared)
        profile = (here.stem.split("-", 1)[1:] or [spec.default_profile])[0]
        if profile in spec.profiles:
            ids = {r.run_id for r in expand(spec, profile)}
            table = read_results(csv)
            if ids and ids == set(table["run_id"]):
                committed = csv.with_name(rebuilt.name).read_text().splitlines()[2]
                assert rebuilt.read_text().splitlines()[2] == committed, csv
                compared.add(csv.parent.name)
    # the mechanistic figures' metrics come from the committed mechanistic.csv
    assert {f"koren2026-fig{i}" for i in (2, 3, 4, 5)} <= compared
    front = (results / "README.md").read_text()
    assert "huang2025-tab1" in front and "[figure](huang2025/huang2025-tab1/figure.png)" in front
    assert yaml.safe_load((ROOT / "experiments/catalogue.yaml").read_text())["targets"]


def test_read_results_keeps_text_columns_text(tmp_path):
    """An empty label stays '' (NaN matched no cell: a committed table rebuilt as all MISSING)
    and a run id of digits keeps its leading zeros."""
    from ssmrepro.store import read_results

    p = tmp_path / "results.csv"
    p.write_text("run_id,profile,label,seed,status,metric.test.acc\n"
                 "012345678901,quick,,0,ok,0.5\n")
    df = read_results(p)
    assert df["label"].tolist() == [""] and df["run_id"].tolist() == ["012345678901"]
    assert df["metric.test.acc"].tolist() == [0.5]


def test_list_tasks_figures_and_checks_name_every_registered_entry():
    """A spec writer's reference: every task, figure kind and claim check with its fields (there
    was a command for models and mixers only; the rest was read from the source)."""
    import ssmrepro.plots  # noqa: F401  (registers the figure kinds)
    from ssmrepro.plots import FIGURE_KINDS
    from ssmrepro.report.checks import CHECKS
    from ssmrepro.tasks import TASKS

    for cmd, names, field in (("list-tasks", TASKS, "kappa"), ("list-figures", FIGURE_KINDS, "ylim"),
                              ("list-checks", CHECKS, "allowed_violations")):
        res = runner.invoke(app, [cmd], env=WIDE)
        assert res.exit_code == 0, res.output
        for name in names:
            assert f"{name}: " in res.output, (cmd, name)
        assert field in res.output
    for name, cls in TASKS.items():  # each listed with a one-line summary of its own
        assert cls.__dict__.get("__doc__"), name
    for name, k in CHECKS.items():  # every field of a claim says what it means
        for f, info in k.Config.model_fields.items():
            assert f == "check" or info.description, (name, f)
