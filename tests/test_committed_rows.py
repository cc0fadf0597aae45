"""A profile's tables take a run without a record from the committed tables of the spec's other
profiles (a run id is the run's whole config): koren2026-fig6's long profile is quick's runs plus
twelve column (d) cells, and a store holding only the twelve records still gets quick's rows."""

from __future__ import annotations

import shutil

from helpers import two_profile_spec
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.store import read_results, read_table

runner = CliRunner()


def _invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_profile_is_completed_from_the_other_profiles_committed_tables(tmp_path):
    spec, out = two_profile_spec(tmp_path), tmp_path / "out"
    opts = ("--out", out, "--workers", "1", "--no-calibrate")
    res = _invoke("run", spec, "--profile", "smoke", *opts)
    assert res.exit_code == 0, res.output
    folder = out / "tests" / "t-spec"
    shutil.rmtree(folder / "runs")  # smoke's records gone (not in git); its tables committed
    res = _invoke("run", spec, "--profile", "extra", *opts)  # trains the one new run
    assert res.exit_code == 0 and "1 to train" in res.output, res.output
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0, res.output
    table = read_results(folder / "results.csv")
    assert sorted(table["label"]) == ["S4D", "S6", "wide"]  # the planned labels ("wider" in extra)
    assert set(table["profile"]) == {"quick"}
    smoke = read_results(folder / "results-smoke.csv").set_index("run_id")
    for _, row in table[table["label"] != "wide"].iterrows():  # the committed rows, unchanged
        assert row["metric.test.acc"] == smoke.loc[row["run_id"], "metric.test.acc"]
    curves = read_table(folder / "curves.csv", ("step",))
    assert sorted(set(curves["label"])) == ["S4D", "S6", "wide"]
    assert "3 runs expected, 3 finished" in (folder / "report.md").read_text()

    # a damaged table of another profile is a warning, not the end of this profile's outputs
    (folder / "results-smoke.csv").write_bytes(b"\x00\x01garbage")
    shutil.copy(folder / "results.csv", tmp_path / "kept.csv")
    res = _invoke("plot", spec, "--profile", "extra", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    # quick's own committed table still completes it (its rows of runs without records)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0, res.output
    assert sorted(read_results(folder / "results.csv")["label"]) == ["S4D", "S6", "wide"]


def test_a_damaged_table_of_another_profile_is_named_only_when_its_rows_are_needed(tmp_path):
    spec, out = two_profile_spec(tmp_path), tmp_path / "out"
    opts = ("--out", out, "--workers", "1", "--no-calibrate")
    assert _invoke("run", spec, "--profile", "smoke", *opts).exit_code == 0
    folder = out / "tests" / "t-spec"
    shutil.rmtree(folder / "runs")  # smoke's tables committed, its records gone
    assert _invoke("run", spec, "--profile", "extra", *opts).exit_code == 0
    for name in ("results-extra.csv", "curves-extra.csv"):  # extra's run has its record
        (folder / name).write_bytes(b"\x00\x01garbage")
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "warning" not in res.output, res.output  # it warned twice
    assert "3 runs expected, 3 finished" in (folder / "report.md").read_text()
    (folder / "curves.csv").unlink()  # quick's own curves held smoke's runs' rows
    (folder / "curves-smoke.csv").write_bytes(b"\x00\x01garbage")  # needed: named
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "curves-smoke.csv" in res.output, res.output


def test_rows_under_an_older_run_id_are_not_doubled_by_another_profiles_rows(tmp_path, monkeypatch):
    """A run id also hashes the code version, so a profile's committed tables can hold its runs
    under older ids while another profile, trained later, holds the same configs under the
    current ones (chen2025-fig7: quick's (a) / (c) runs, re-trained in long). Both were taken:
    quick's curves figure drew 6 runs for 3-seed cells, its mean and band mixing two trainings."""
    import pandas as pd

    from ssmrepro.plots import outputs

    spec, out = two_profile_spec(tmp_path), tmp_path / "out"
    opts = ("--out", out, "--workers", "1", "--no-calibrate")
    assert _invoke("run", spec, "--profile", "quick", *opts).exit_code == 0
    assert _invoke("run", spec, "--profile", "smoke", *opts).exit_code == 0
    folder = out / "tests" / "t-spec"
    shutil.rmtree(folder / "runs")  # records are not in git
    for name in ("results.csv", "curves.csv"):  # quick's tables, written by an older version
        t = pd.read_csv(folder / name, dtype={"run_id": str})
        t["run_id"] = "0ld" + t["run_id"].str[3:]
        t.to_csv(folder / name, index=False)
    seen = {}
    for name in ("load_table", "_curves"):
        def spy(*a, _f=getattr(outputs, name), _n=name, **k):
            seen[_n] = _f(*a, **k)
            return seen[_n]
        monkeypatch.setattr(outputs, name, spy)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0, res.output
    for name, table in seen.items():  # this profile's own rows stand for its runs, once each
        assert set(table["run_id"].str[:3]) == {"0ld"}, (name, table[["run_id", "label"]])
        assert table["run_id"].nunique() == 3 and set(table["label"]) == {"S6", "S4D", "wide"}
    # a run the own table does not have (another cell or seed) is still completed
    t = pd.read_csv(folder / "results.csv", dtype={"run_id": str})
    t[t["label"] != "S6"].to_csv(folder / "results.csv", index=False)
    assert _invoke("plot", spec, "--profile", "quick", "--out", out).exit_code == 0
    got = seen["load_table"].set_index("label")["run_id"]
    assert not got["S6"].startswith("0ld") and got["S4D"].startswith("0ld")


def test_a_row_under_an_older_run_id_stands_only_for_the_cell_it_was_trained_in(tmp_path):
    """Two cells under one label that differ in a swept key (``train.lr`` 0.001 and 0.01): the
    committed row of the 0.01 cell under an older run id also stood for the planned 0.001 run
    (0.001 is the code's default, which ``_contradiction`` passes over), so that run was not
    completed from the smoke profile's table and read as not finished."""
    import pandas as pd
    from helpers import write_spec

    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
             {"grid": {"train.lr": [0.001, 0.01]}}]
    spec = write_spec(tmp_path, seeds=[0], sweep=sweep,
                      train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                             "val_size": 16, "test_size": 16, "eval_every": 2,
                             "eval_batch_size": 16},
                      profiles={"smoke": {"sweep": sweep}, "quick": {"sweep": sweep}, "paper": {}})
    out = tmp_path / "out"
    opts = ("--out", out, "--workers", "1", "--no-calibrate", "--no-plot")
    for profile in ("quick", "smoke"):
        assert _invoke("run", spec, "--profile", profile, *opts).exit_code == 0
    folder = out / "tests" / "t-spec"
    shutil.rmtree(folder / "runs")  # a fresh clone
    t = pd.read_csv(folder / "results.csv", dtype={"run_id": str})
    t = t[t["train.lr"] == 0.01].assign(run_id="0ld000000000")  # an older version's row
    t.to_csv(folder / "results.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0, res.output
    assert "2 runs expected, 2 finished" in (folder / "report.md").read_text()
