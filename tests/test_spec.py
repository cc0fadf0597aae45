"""Spec loading and validation: every shipped spec, and malformed specs fail clearly (exit 2)."""

from pathlib import Path

import pytest
import yaml
from helpers import spec_params
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.spec import SpecError, find_spec, load_spec, spec_paths
from ssmrepro.sweep import expand

runner = CliRunner()
SPECS = spec_paths()


def test_specs_are_shipped():
    ids = {p.stem for p in SPECS}
    assert {"huang2025-tab1", "huang2025-tabA1-A4", "huang2025-fig1"} <= ids


@pytest.mark.parametrize("path", spec_params(SPECS))
def test_every_shipped_spec_validates_in_every_profile(path):
    spec = load_spec(path)
    assert spec.id == path.stem, "file name must be <id>.yaml"
    assert path.parent.name == spec.paper
    assert spec.notes, "every spec states its decisions"
    for prof in spec.profiles:
        runs = expand(spec, prof)
        assert bool(runs) == (spec.analytic is None), prof  # an analytic spec trains nothing
        assert len({(r.run_id, r.label) for r in runs}) == len(runs)


def test_validate_all_cli():
    res = runner.invoke(app, ["validate", "--all"])
    assert res.exit_code == 0, res.output
    assert "ok huang2025-tab1" in res.output


def test_alias_and_unknown_id_suggestions():
    assert find_spec("keep-nth").id == "huang2025-tab1"
    with pytest.raises(SpecError, match="Did you mean: keep-nth"):
        find_spec("keep-nht")
    res = runner.invoke(app, ["run", "keep-nht", "--dry-run"])
    assert res.exit_code == 2
    assert "keep-nth" in res.output


def _broken(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(next(p for p in SPECS if p.stem == "huang2025-tab1").read_text())
    mutate(raw)
    p = tmp_path / "broken.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


CASES = {
    "unknown top-level key": (lambda r: r.update(sweeep=[]), "sweeep: unknown key"),
    "unknown model key": (lambda r: r["model"].update(dd=3), "model.dd: unknown key"),
    "unknown train key in a profile": (
        lambda r: r["profiles"]["smoke"]["set"].update({"train.learning_rate": 1}),
        "train.learning_rate: unknown key",
    ),
    "wrong type": (lambda r: r["model"].update(d_model="big"),
                   "model.d_model: Input should be a valid integer"),
    "impossible value (n > T)": (lambda r: r["task"].update(n=60), "does not fit in a sequence"),
    "state size above kernel limit": (lambda r: r["model"].update(d_state=512),
                                      "model.d_state: Input should be less"),
    "derived non-integer": (
        lambda r: r.update(derived={"model.d_state": "task.T / 3"}),
        "model.d_state: Input should be a valid integer, got a number with a fractional part",
    ),
    "unsafe derived expression": (
        lambda r: r.update(derived={"model.d_state": "__import__('os').getpid()"}),
        "derived.model.d_state: unsupported syntax",
    ),
    "missing profile": (lambda r: r["profiles"].pop("quick"), "profiles ['quick'] are missing"),
    "unknown task": (lambda r: r["task"].update(name="kep_nth"), "unknown task 'kep_nth'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_spec_gives_file_key_reason_and_exit_2(tmp_path, case):
    mutate, expected = CASES[case]
    p = _broken(tmp_path, mutate)
    res = runner.invoke(app, ["validate", str(p)])
    assert res.exit_code == 2, res.output
    assert str(p) in res.output
    assert expected in " ".join(res.output.split()), res.output


def test_malformed_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("version: 1\nid: [unclosed\n")
    res = runner.invoke(app, ["validate", str(p)])
    assert res.exit_code == 2
    assert "malformed YAML" in res.output and "line" in res.output


def test_sweep_kinds_and_derived(tmp_path):
    def mutate(r):
        r["sweep"] = [
            {"cases": [{"label": "A", "set": {"model.mixer": "s6"}, "grid": {"model.d_model": [8, 16]}},
                       {"label": "B", "set": {"model.mixer": "s4d"}}]},
            {"zip": {"task.T": [10, 20], "task.n": [2, 3]}},
        ]
        r["derived"] = {"model.d_state": "2 * task.n"}
        r["seeds"] = [0, 1]

    spec = load_spec(_broken(tmp_path, mutate))
    runs = expand(spec, "paper")
    assert len(runs) == (2 + 1) * 2 * 2
    assert {(r.task.T, r.task.n, r.model.d_state) for r in runs} == {(10, 2, 4), (20, 3, 6)}
    assert {r.label for r in runs} == {"A", "B"}
    # ids are stable and depend on the seed
    again = expand(load_spec(spec.path), "paper")
    assert [r.run_id for r in runs] == [r.run_id for r in again]
    assert runs[0].run_id != runs[1].run_id and runs[0].seed != runs[1].seed
