"""Hostile and careless input (issue 11): every probe ends in a clear message with exit 2, a
recovered run with a warning, or a bounded refusal — never a traceback, a hang, a write outside
``--out`` or a silent wrong result."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, two_profile_spec, write_spec
from typer.testing import CliRunner

from ssmrepro.cli import app

runner = CliRunner()


def _invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def _assert_refused(res, *needles):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output, res.output
    for n in needles:
        assert n in res.output, res.output


@pytest.mark.parametrize("key,value", [
    ("id", "../../../escaped"), ("id", "/tmp/abs"), ("id", "a/b"), ("id", "nul\x00id"),
    ("id", "x" * 300), ("paper", "../.."), ("paper", "a/b"), ("alias", "../x"),
])
def test_ids_and_paper_slugs_must_be_safe_names(tmp_path, key, value):
    spec = write_spec(tmp_path, **{key: value})
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke")
    _assert_refused(res, f"{key}:")
    leaked = [p for p in tmp_path.parent.rglob("*") if "escaped" in p.name or p.name == "abs"]
    assert not leaked and not out.exists()


def _project(tmp_path, small: bool = False) -> Path:
    """A copy of the shipped experiments/ as its own project root; ``small``: only huang2025's
    tab1 (alias keep-nth), fig1 and fig2 (what the identity tests edit; `validate --all` of the
    whole project, a minute on CI's cores, is tested once in test_spec.py)."""
    root = tmp_path / "proj"
    if small:
        (root / "experiments/huang2025").mkdir(parents=True)
        for name in ("huang2025-tab1", "huang2025-fig1", "huang2025-fig2"):
            shutil.copy(ROOT / f"experiments/huang2025/{name}.yaml", root / "experiments/huang2025")
    else:
        shutil.copytree(ROOT / "experiments", root / "experiments")
    (root / "ssmrepro").mkdir()
    return root


def _edit(path: Path, **kw):
    raw = yaml.safe_load(path.read_text())
    raw.update(kw)
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))


def test_duplicate_ids_and_aliases_are_rejected(tmp_path):
    root = _project(tmp_path, small=True)
    env = {"SSMREPRO_ROOT": str(root)}
    src = root / "experiments/huang2025/huang2025-tab1.yaml"
    (root / "experiments/other").mkdir()
    shutil.copy(src, root / "experiments/other/huang2025-tab1.yaml")  # same id twice
    res = _invoke("validate", "--all", env=env)
    _assert_refused(res, "is the id of 2 specs")
    res = _invoke("show", "huang2025-tab1", env=env)
    _assert_refused(res, "is the id of 2 specs")
    (root / "experiments/other/huang2025-tab1.yaml").unlink()

    fig1 = root / "experiments/huang2025/huang2025-fig1.yaml"
    _edit(fig1, alias="keep-nth")  # tab1's alias used again
    _assert_refused(_invoke("validate", "--all", env=env), "'keep-nth' is the alias of 2 specs")
    _assert_refused(_invoke("show", "keep-nth", env=env), "alias of 2 specs")
    _edit(fig1, alias="huang2025-fig2")  # an alias hijacking another spec's id
    _assert_refused(_invoke("validate", "--all", env=env), "is the id of")
    res = _invoke("show", "huang2025-fig2", env=env)  # the id still means the id
    _assert_refused(res, "is the id of")


def test_a_spec_whose_id_is_not_its_file_name_is_rejected(tmp_path):
    root = _project(tmp_path, small=True)
    _edit(root / "experiments/huang2025/huang2025-fig1.yaml", id="other-name")
    res = _invoke("validate", "--all", env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "must equal the file name")


def test_a_non_utf8_spec_is_a_message_and_does_not_break_list(tmp_path):
    root = _project(tmp_path, small=True)
    bad = root / "experiments/huang2025/broken.yaml"
    bad.write_bytes(b"id: broken\n\xff\xfe\x00 title: x\n")
    env = {"SSMREPRO_ROOT": str(root)}
    _assert_refused(_invoke("validate", "--all", env=env), "not UTF-8")
    res = _invoke("list", env=env)
    assert res.exit_code == 0 and "invalid spec" in res.output, res.output
    _assert_refused(_invoke("validate", bad), "not UTF-8")


@pytest.mark.parametrize("override,needle", [
    ({"seeds": []}, "no runs"),
    ({"sweep": [{"grid": {"model.d_model": []}}]}, "no runs"),
    ({"sweep": [{"grid": {f"task.k{i}": list(range(10)) for i in range(7)}}]}, "more than"),
    ({"train": {"max_steps": 10**12, "batch_size": 8}}, "max_steps"),
    ({"train": {"max_steps": 10, "batch_size": 10**9}}, "batch_size"),
    ({"train": {"max_steps": 10, "lr": float("inf")}}, "lr"),
    ({"train": {"max_steps": 10, "betas": [0.9, float("nan")]}}, "betas"),
])
def test_absurd_sizes_and_non_finite_numbers_are_spec_errors(tmp_path, override, needle):
    import time

    spec = write_spec(tmp_path, **override)
    t0 = time.time()
    res = _invoke("validate", spec)
    _assert_refused(res, needle)
    assert time.time() - t0 < 10


@pytest.mark.parametrize("opt", [["--workers", "0"], ["--workers", "-1"], ["--pack-size", "0"],
                                 ["--pack-size", "-3"], ["--max-runs", "-1"]])
def test_nonsense_numeric_options_are_refused(tmp_path, opt):
    res = _invoke("run", write_spec(tmp_path), "--out", tmp_path / "o", *opt)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_too_many_workers_are_capped(tmp_path):
    import os

    res = _invoke("run", write_spec(tmp_path, seeds=[0]), "--out", tmp_path / "o",
                  "--workers", "1000", "--pack-size", "1", "--no-plot")
    assert res.exit_code == 0, res.output
    assert f"capped at {os.cpu_count()}" in res.output


def test_reuse_of_an_unknown_spec_is_a_validation_error(tmp_path):
    _assert_refused(_invoke("validate", write_spec(tmp_path, reuse=["no-such-spec"])),
                    "reuse.0", "unknown experiment")


def test_an_unwritable_out_folder_is_a_message(tmp_path):
    spec = write_spec(tmp_path, seeds=[0])
    as_file = tmp_path / "a-file"
    as_file.write_text("x")
    _assert_refused(_invoke("run", spec, "--out", as_file, "--no-plot"), "cannot use")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores permissions
            pytest.skip("running as root: permissions are not enforced")
        _assert_refused(_invoke("run", spec, "--out", ro, "--no-plot"), "permission denied")
    finally:
        ro.chmod(0o700)


def test_disk_full_is_a_message(tmp_path, monkeypatch):
    import errno

    from ssmrepro import util

    def full(path, write):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(util, "_atomic", full)
    res = _invoke("run", write_spec(tmp_path, seeds=[0]), "--out", tmp_path / "o", "--workers", "1",
                  "--pack-size", "1")
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output
    assert "no space left on device" in res.output


@pytest.mark.parametrize("args,needle", [
    (["plot", "keep-nth", "--profile", "smokee"], "unknown profile"),
    (["verify", "keep-nth", "--profile", "smokee"], "unknown profile"),
    (["run", "keep-nth", "--device", "tpu", "--profile", "smoke"], "--device"),
    (["run", "no-such-experiment"], "unknown experiment"),
])
def test_typos_are_messages(tmp_path, args, needle):
    _assert_refused(_invoke(*args, "--out", tmp_path), needle)


def test_missing_lra_data_names_the_command(tmp_path):
    res = _invoke("run", "lra", "--profile", "smoke", "--out", tmp_path,
                  env={"SSMREPRO_DATA": str(tmp_path / "empty")})
    _assert_refused(res, "ssmrepro data")


def test_a_list_valued_sweep_axis_reports(tmp_path):
    spec = write_spec(tmp_path, seeds=[0], sweep=[{"grid": {"train.betas": [[0.9, 0.99],
                                                                             [0.8, 0.95]]}}])
    res = _invoke("run", spec, "--out", tmp_path / "o", "--pack-size", "2")
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------------------------
# second round of probes (issue 11): names that become paths, oversized input, memory, corrupt
# store files and dataset caches, malformed claims, quiet nonsense


def _one_run_spec(tmp_path, **kw):
    kw.setdefault("seeds", [0])
    kw.setdefault("sweep", [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}])
    return write_spec(tmp_path, **kw)


def _claiming_pids(store, n: int, timeout: float = 120.0) -> set[int]:
    """The process ids named by the store's claims, once ``n`` processes hold one (or at the
    timeout)."""
    import json
    import time

    pids: set[int] = set()
    deadline = time.time() + timeout
    while len(pids) < n and time.time() < deadline:
        for c in store.claims.glob("*.claim") if store.claims.exists() else []:
            try:
                pids.add(json.loads(c.read_text())["pid"])
            except (ValueError, KeyError, FileNotFoundError):
                pass
        time.sleep(0.02)
    return pids


def _leaked(tmp_path, out: Path) -> list[Path]:
    """Files written under tmp_path's parent outside ``out`` (and the spec files of tmp_path)."""
    return [p for p in tmp_path.parent.rglob("*escaped*")] + [
        p for p in tmp_path.rglob("*") if p.suffix == ".png" and out not in p.parents]


@pytest.mark.parametrize("override,args,key", [
    ({"figures": [{"kind": "bars", "metric": "test.acc", "x": "label",
                   "name": "../../../escaped"}]}, [], "figures.0.name"),
    ({"figure": {"kind": "bars", "metric": "test.acc", "x": "label", "name": "/escaped"}},
     [], "figure.name"),
    ({"profiles": {"smoke": {}, "quick": {}, "paper": {}, "../../escaped": {}}},
     ["--profile", "../../escaped"], "profiles."),
    ({"profiles": {"smoke": {}, "quick": {}, "paper": {}, "../../escaped": {}},
      "default_profile": "../../escaped"}, [], "default_profile"),
])
def test_names_that_become_file_names_cannot_leave_the_folder(tmp_path, override, args, key):
    spec = _one_run_spec(tmp_path, **override)
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--no-calibrate", *(args or ["--profile", "smoke"]))
    _assert_refused(res, key)
    assert not _leaked(tmp_path, out) and not out.exists()


def test_a_key_given_twice_is_refused(tmp_path):
    spec = _one_run_spec(tmp_path)
    spec.write_text(spec.read_text() + "seeds: [5]\n")  # PyYAML alone keeps the last one
    _assert_refused(_invoke("validate", spec), "'seeds' is given twice")


def test_yaml_merge_keys_still_work_and_explicit_keys_override_them():
    """`<<: *anchor` (koren2026-fig6 shares its column (d) settings this way) is not a key given
    twice; a key given twice beside a merge still is."""
    from ssmrepro.spec import SpecError, parse_yaml

    doc = parse_yaml("a: &x {p: 1, q: 2}\nb: {<<: *x, q: 3, r: 4}\n")
    assert doc["b"] == {"p": 1, "q": 3, "r": 4}
    with pytest.raises(Exception, match="given twice") as err:
        parse_yaml("b: {<<: {p: 1}, q: 3, q: 4}\n")
    assert not isinstance(err.value, SpecError)  # the loader's own error; load_spec wraps it


def test_oversized_and_deeply_nested_spec_files_are_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text(_one_run_spec(tmp_path).read_text() + "# padding\n" * 200_000)
    _assert_refused(_invoke("validate", big), "larger than 1 MiB")
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 20_000 + "]" * 20_000 + "\n")
    _assert_refused(_invoke("validate", deep), "malformed YAML")


@pytest.mark.parametrize("override,args,needle", [
    ({}, ["--set", "task.name=[1]"], "task.name: expected the name of a task"),
    ({}, ["--set", "model.name={a: 1}"], "model.name: expected the name of a model"),
    ({}, ["--set", "train={1: 2}"], "field names are text"),
    ({}, ["--set", "task..T=3"], "an empty part in the key"),
    ({"figure": {"kind": ["bars"]}}, [], "figure.kind: unknown figure kind"),
    ({"claims": [{"check": ["threshold"], "text": "t"}]}, [], "claims.0.check: unknown check"),
    ({"claims": [{"text": "t", "op": ">", "value": float("nan")}]}, [], "claims.0.value"),
    ({"paper_values": [{"where": {"label": "S6"}, "value": 0.5, "tol": -1}]}, [],
     "paper_values.0.tol"),
    ({"seeds": [2**70]}, [], "seeds.0"),
])
def test_malformed_values_are_messages(tmp_path, override, args, needle):
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, **override), *args), needle)


def test_a_top_level_key_that_is_not_text_is_a_message(tmp_path):
    spec = _one_run_spec(tmp_path)
    spec.write_text("1: x\n" + spec.read_text())
    _assert_refused(_invoke("validate", spec), "keys are names (text)")


def test_a_bad_thread_count_and_an_empty_project_are_messages(tmp_path):
    res = _invoke("run", _one_run_spec(tmp_path), "--out", tmp_path / "o", "--profile", "smoke",
                  env={"SSMREPRO_THREADS": "abc"})
    _assert_refused(res, "SSMREPRO_THREADS")
    assert not (tmp_path / "o").exists()
    _assert_refused(_invoke("list", env={"SSMREPRO_ROOT": str(tmp_path / "nothing")}),
                    "no experiment specs")


@pytest.mark.parametrize("setting", ["model.d_model=1000000", "task.T=1000000000",
                                     "task.vocab=1000000000"])
def test_a_model_too_large_for_memory_is_refused_before_training(tmp_path, setting):
    spec, out = _one_run_spec(tmp_path), tmp_path / "out"
    for extra in (["--dry-run", "--no-estimate"], []):
        res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                      "--set", setting, *extra)
        _assert_refused(res, "needs about", "available")
    assert not list(out.rglob("runs")) and not list(out.rglob("*.json"))  # nothing trained


def test_the_model_depth_is_bounded(tmp_path):
    res = _invoke("validate", _one_run_spec(tmp_path), "--set", "model.n_layers=1000000")
    _assert_refused(res, "model.n_layers", "1024")
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=[], model={
        "name": "seq_lm", "d_model": 8, "layers": "SSM-TF", "repeat": 1000}))
    _assert_refused(res, "more than 1024")


def test_the_memory_estimate_counts_parameters_exactly_and_can_refuse(tmp_path):
    from ssmrepro.engine.plan import memory_need, memory_problems
    from ssmrepro.models import build_model, count_params
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.tasks import build_task

    seen = set()
    for p in sorted((ROOT / "experiments").glob("*/*.yaml")):
        for r in expand(load_spec(p), "smoke") if load_spec(p).analytic is None else []:
            if r.model.name in seen or r.task.name.startswith(("lra_", "text_")):
                continue
            seen.add(r.model.name)
            info = build_task(r.task).info
            assert memory_need(r).params == count_params(build_model(r.model, info, 1), 1), p
    assert len(seen) >= 4, seen
    run = expand(load_spec(_one_run_spec(tmp_path)), "smoke")[0]
    need = memory_need(run).total
    assert memory_problems([run], "cpu", available=need) == []
    (msg,) = memory_problems([run], "cpu", available=need - 1)
    assert "needs about" in msg and "S6" in msg


def test_a_pack_checks_its_memory_where_it_trains(tmp_path, monkeypatch):
    import importlib

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import train_pack

    train_mod = importlib.import_module("ssmrepro.train")
    monkeypatch.setattr(train_mod, "available_memory", lambda device: 1000)
    run = expand(load_spec(_one_run_spec(tmp_path)), "smoke")[0]
    with pytest.raises(MemoryError, match="needs about"):
        train_pack([run])


@pytest.fixture(scope="module")
def two_profile_smoke(tmp_path_factory) -> Path:
    """helpers.two_profile_spec's smoke profile (S6, S4D), trained once: (folder holding
    t-spec.yaml and out/)."""
    root = tmp_path_factory.mktemp("two-profile")
    spec = two_profile_spec(root)
    res = _invoke("run", spec, "--out", root / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    return root


def _fresh_clone(two_profile_smoke: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of ``two_profile_smoke`` without its run records, as a fresh clone has it:
    (spec, out, the smoke profile's committed results table)."""
    spec, folder = _copy_trained(two_profile_smoke, tmp_path)
    shutil.rmtree(folder / "runs")
    return spec, tmp_path / "out", folder / "results-smoke.csv"


@pytest.fixture(scope="module")
def trained_store(tmp_path_factory) -> Path:
    """One smoke run of a one-run spec, trained once: (folder holding spec.yaml and out/)."""
    root = tmp_path_factory.mktemp("trained")
    spec = _one_run_spec(root)
    res = _invoke("run", spec, "--out", root / "out", "--profile", "smoke", "--no-calibrate",
                  "--no-plot", "--workers", "1")
    assert res.exit_code == 0, res.output
    return root


def _copy_trained(trained_store: Path, tmp_path: Path) -> tuple[Path, Path]:
    shutil.copy(trained_store / "t-spec.yaml", tmp_path / "t-spec.yaml")
    shutil.copytree(trained_store / "out", tmp_path / "out")
    return tmp_path / "t-spec.yaml", tmp_path / "out" / "tests" / "t-spec"


@pytest.mark.parametrize("edit", [
    lambda r: r["metrics"].update({"test.acc": "high"}),
    lambda r: r["metrics"].update({"test.acc": [1, 2]}),
    lambda r: r.update(history="garbage"),
    lambda r: r.update(history=[{"step": 0, "val.acc": "x"}]),
])
def test_records_with_metrics_that_are_not_numbers_are_quarantined(trained_store, tmp_path,
                                                                    edit):
    import json

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    edit(rec)
    path.write_text(json.dumps(rec))
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in res.output and "trained 1 runs" in res.output, res.output
    assert list((store / "runs" / "quarantine").iterdir())


@pytest.mark.parametrize("edit,needle", [
    (lambda c: c["model"].update(d_model=16), "is not the configuration its run id hashes"),
    (lambda c: c["train"].update(eps=1e-6), "is not the configuration its run id hashes"),
    (lambda c: c.update(seed=7), "is not the configuration its run id hashes"),
    (lambda c: c["train"].update(lr="0.01"), "train.lr: '0.01' is not as the config reads it"),
    (lambda c: c["model"].update(colour="red"), "model: not a valid model config"),
    (lambda c: c.pop("train"), "not a run's config"),
])
def test_a_record_whose_config_was_edited_is_quarantined(trained_store, tmp_path, edit, needle):
    """A record's `config` (what curves and analyses read a cell's keys from) edited with its
    `identity` left alone was trusted: d_model 8 -> 16 drew the run's curve as a d_model 16
    cell. A record as written (defaults left out of its identity: mixer s6) is not touched."""
    import json

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert "mixer" not in rec["identity"]["model"]  # a default, in the config only
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0 and "quarantined" not in res.output, res.output
    edit(rec["config"])
    path.write_text(json.dumps(rec))
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())  # the console wraps long lines
    assert "quarantined" in said and needle in said, res.output
    assert "trained 1 runs" in said, res.output
    retrained = json.loads(path.read_text())  # the record written again, as it should be
    assert retrained["config"]["model"]["d_model"] == 8 and retrained["config"]["seed"] == 0


@pytest.mark.parametrize("damage,needle", [
    ("foreign", "the weights do not fit the run's model"),
    ("tensor", "not a state dict"),
    ("garbage", "quarantined"),
    ("deleted", None),
])
def test_saved_weights_that_are_gone_or_foreign_are_trained_again(tmp_path, damage, needle):
    """Another model's weights in runs/<id>.pt raised a traceback in `plot` (load_state_dict);
    weights deleted (or unreadable) left the analysis claims FAILing as 'diverged/NaN' while
    `plot` said `run` trains them, and `run` found the run done and trained nothing."""
    import json

    import torch

    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},  # its layout
                         claims=[{"text": "t", "where": {"label": "S6"}, "op": ">",
                                  "metric": "out.noise_var", "value": 0.0}])
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    (weights,) = (out / "tests" / "t-spec" / "runs").glob("*.pt")
    record = json.loads(weights.with_suffix(".json").read_text())
    if damage == "foreign":
        torch.save({"x": torch.zeros(3)}, weights)
    elif damage == "tensor":
        torch.save(torch.zeros(3), weights)
    elif damage == "garbage":
        weights.write_bytes(b"\x00garbage")
    else:
        weights.unlink()  # and the table the analysis wrote from them
        (weights.parents[1] / "output_variance-smoke.csv").unlink()
        res = _invoke("verify", spec, *args)
        said = " ".join(res.output.split())
        assert res.exit_code == 0 and "diverged/NaN" not in said, res.output
        assert "where no run diverged but out.noise_var was not measured" in said, res.output
    if needle is not None:
        res = _invoke("plot", spec, *args)
        said = " ".join(res.output.split())
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        assert needle in said and "trained again" in said, res.output
        assert not weights.exists() and list((weights.parent / "quarantine").glob("*.pt.*"))
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "trained 1 runs" in said, res.output
    assert "has its record but not its saved weights" in said, res.output
    assert set(torch.load(weights, weights_only=True)) > {"embed.weight"}
    assert json.loads(weights.with_suffix(".json").read_text())["metrics"] == record["metrics"]


@pytest.mark.parametrize("name,content,needle", [
    ("results-smoke.csv", b"\x00\xff,,\n\"\n1,2,3", "not a readable CSV table"),
    ("results-smoke.csv", b"a,b\n1,2\n", "no column label"),
    ("results-smoke.csv", None, "holds text where numbers belong"),
    ("curves-smoke.csv", b"a,b\n1,2\n", "no column step"),
])
def test_committed_tables_that_are_not_tables_are_messages(trained_store, tmp_path, name,
                                                           content, needle):
    spec, store = _copy_trained(trained_store, tmp_path)
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0, res.output  # writes results-smoke.csv and curves-smoke.csv
    shutil.rmtree(store / "runs")  # a fresh clone: the committed tables are all there is
    table = store / name
    if content is None:  # text in a metric column
        lines = table.read_text().splitlines()
        col = lines[0].split(",").index("metric.test.acc")
        row = lines[1].split(",")
        row[col] = "high"
        table.write_text("\n".join([lines[0], ",".join(row)]) + "\n")
    else:
        table.write_bytes(content)
    _assert_refused(_invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke"),
                    str(table), needle)


@pytest.mark.parametrize("what", ["runs-is-a-file", "claims-is-a-file", "claim-is-a-folder",
                                  "events-is-a-folder"])
def test_store_paths_of_the_wrong_kind_are_messages_before_training(trained_store, tmp_path,
                                                                    what):
    spec, store = _copy_trained(trained_store, tmp_path)
    shutil.rmtree(store / "runs")
    shutil.rmtree(store / "claims", ignore_errors=True)
    if what == "runs-is-a-file":
        (store / "runs").write_text("x")
    elif what == "claims-is-a-file":
        (store / "claims").write_text("x")
    elif what == "claim-is-a-folder":
        (store / "claims" / "x.claim" / "inside").mkdir(parents=True)
    else:
        (store / "events.jsonl").unlink()
        (store / "events.jsonl").mkdir()
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--no-plot", "--workers", "2")
    _assert_refused(res, "cannot use")
    assert "trained" not in res.output


def test_claims_that_name_no_checkable_holder_do_not_block_forever(tmp_path):
    import json
    import time

    from ssmrepro.store import Store

    st = Store(tmp_path)
    st.claims.mkdir(parents=True)
    garbage = st.claims / "r1.claim"  # this host, but a pid that is no process id
    garbage.write_text(json.dumps({"host": st.host, "pid": "abc", "nonce": "n1"}))
    old = time.time() - 30
    os.utime(garbage, (old, old))
    assert st.holder("r1") is None and st.claim("r1")
    future = st.claims / "r2.claim"  # another host's claim touched "next year"
    future.write_text(json.dumps({"host": "elsewhere", "pid": 1, "nonce": "n2"}))
    later = time.time() + 365 * 86400
    os.utime(future, (later, later))
    assert st.holder("r2") is None and st.claim("r2")
    live = st.claims / "r3.claim"  # a fresh claim of another host is still respected
    live.write_text(json.dumps({"host": "elsewhere", "pid": 1, "nonce": "n3"}))
    assert st.holder("r3") is not None and not st.claim("r3")


def _meta_edit(fn):
    def edit(entry: Path) -> None:
        import json

        meta = json.loads((entry / "meta.json").read_text())
        meta.pop("digest")  # as written before entries kept one: the checks of the contents
        fn(meta)
        (entry / "meta.json").write_text(json.dumps(meta))
    return edit


@pytest.mark.parametrize("corrupt", [
    _meta_edit(lambda m: m.pop("kind")),
    _meta_edit(lambda m: m["arrays"].remove("test.x")),
    lambda e: __import__("numpy").save(e / "test.labels.npy",
                                        __import__("numpy").zeros(1, dtype="int64")),
    lambda e: __import__("numpy").save(e / "test.x.npy",
                                        __import__("numpy").full((5, 5), float("nan"))),
    lambda e: (shutil.rmtree(e), e.write_text("not a folder")),
], ids=["meta-without-kind", "missing-array", "rows-disagree", "text-inputs", "entry-is-a-file"])
def test_damaged_dataset_cache_entries_are_rebuilt(tmp_path, corrupt):
    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    good = load_lra("listops", "test", root)
    x, labels = good.x.copy(), good.labels.copy()
    corrupt(good.cache_path)
    with pytest.warns(UserWarning, match="damaged cache entry"):
        again = load_lra("listops", "test", root)
    assert (again.x == x).all() and (again.labels == labels).all()


# ---------------------------------------------------------------------------------------------
# third round of probes (issue 11): YAML that expands without bound, files that are not files,
# links leading outside --out, numbers that cannot be real, deletions --force did not own,
# evaluation without bound, settings that were quietly ignored


def _bomb(levels: int = 9) -> str:
    """A flow sequence whose aliases expand to 10**levels values (a billion laughs)."""
    parts, prev = ["&a [1,1,1,1,1,1,1,1,1,1]"], "a"
    for name in "bcdefghijk"[: levels - 1]:
        parts.append(f"&{name} [" + ",".join([f"*{prev}"] * 10) + "]")
        prev = name
    return "[" + ", ".join(parts) + "]"


@pytest.mark.parametrize("args,needle", [
    (["--set", f"task.x={_bomb()}"], "aliases (*name) are expanded"),
    (["--set", "task.x=&a [*a]"], "recursive"),
    (["--set", "model.d_model=" + "9" * 5000], "--set model.d_model: cannot use"),
    (["--set", "model.d_model=8", "--set", "model.d_model=16"], "given twice"),
    (["--set", "train={lr: 0.1, lr: 0.2}"], "'lr' is given twice"),
    (["--set", "train.val_size=100000000"], "evaluation would pass"),
    (["--set", "train.test_size=100000000"], "evaluation would pass"),
])
def test_set_values_that_expand_repeat_or_evaluate_without_bound_are_refused(tmp_path, args,
                                                                             needle):
    import time

    t0 = time.time()
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path), *args), needle)
    assert time.time() - t0 < 20


@pytest.mark.parametrize("edit,needle", [
    (lambda t: t.replace("claims: []", f"claims: [{{text: t, where: {{label: {_bomb()}}}, "
                                       "op: '>', value: 0}]"), "aliases (*name) are expanded"),
    (lambda t: t.replace("claims: []", "claims: [{text: t, where: {label: &r [*r]}, op: '>', "
                                       "value: 0}]"), "recursive"),
    (lambda t: t.replace("seeds:\n- 0", "seeds:\n- " + "9" * 5000), "malformed YAML"),
])
def test_spec_files_that_expand_without_bound_are_refused(tmp_path, edit, needle):
    """A billion-laughs `where` used to hang `run` while the report printed the claim."""
    spec = _one_run_spec(tmp_path)
    spec.write_text(edit(spec.read_text()))
    _assert_refused(_invoke("validate", spec), needle)
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate")
    _assert_refused(res, needle)
    assert not (tmp_path / "out").exists()


def test_a_spec_path_that_is_not_a_regular_file_is_a_message(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opening it for reading blocked forever
    _assert_refused(_invoke("validate", fifo), "not a regular file")
    root = _project(tmp_path)
    os.mkfifo(root / "experiments/huang2025/fifo.yaml")
    env = {"SSMREPRO_ROOT": str(root)}
    res = _invoke("list", env=env)
    flat = " ".join(res.output.split())  # (the title column may fold 'invalid spec' in 80)
    assert res.exit_code == 0 and "fifo" in flat and "invalid" in flat, res.output


@pytest.mark.parametrize("kind", ["dev-zero", "nested", "infinite-acc", "acc-above-1"])
def test_records_that_cannot_be_read_or_be_real_are_quarantined(trained_store, tmp_path, kind):
    import json

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    if kind == "dev-zero":  # read whole, it exhausted the memory
        path.unlink()
        path.symlink_to("/dev/zero")
    elif kind == "nested":  # RecursionError in the JSON reader
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        rec["metrics"]["test.acc"] = float("inf") if kind == "infinite-acc" else 7.0
        path.write_text(json.dumps(rec))  # json writes Infinity, and reads it back
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1", "--no-plot")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in res.output and "trained 1 runs" in res.output, res.output


@pytest.mark.parametrize("value,needle", [("inf", "infinite value"), ("5", "outside [0, 1]")])
def test_committed_tables_with_impossible_numbers_are_messages(trained_store, tmp_path, value,
                                                               needle):
    spec, store = _copy_trained(trained_store, tmp_path)
    assert _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke").exit_code == 0
    shutil.rmtree(store / "runs")
    table = store / "results-smoke.csv"
    lines = table.read_text().splitlines()
    col = lines[0].split(",").index("metric.test.acc")
    row = lines[1].split(",")
    row[col] = value  # an accuracy of inf or 5 passed every claim
    table.write_text("\n".join([lines[0], ",".join(row)]) + "\n")
    _assert_refused(_invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke"),
                    str(table), needle)


@pytest.mark.parametrize("name", ["report-smoke.md", "results-smoke.csv", "figure-smoke.png"])
def test_links_leading_outside_out_are_refused_before_writing(trained_store, tmp_path, name):
    spec, store = _copy_trained(trained_store, tmp_path)
    out = tmp_path / "out"
    assert _invoke("plot", spec, "--out", out, "--profile", "smoke").exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (store / name).unlink()
    (store / name).symlink_to(victim)  # plot wrote the report through such a link
    _assert_refused(_invoke("plot", spec, "--out", out, "--profile", "smoke"),
                    "symbolic link", "outside the results folder")
    assert victim.read_text() == "precious\n"
    (store / name).unlink()
    inside = store / "elsewhere-inside.bin"
    inside.write_text("x")
    (store / name).symlink_to(inside)  # a link that stays inside --out is fine
    assert _invoke("plot", spec, "--out", out, "--profile", "smoke").exit_code == 0


def test_a_runs_folder_linked_outside_out_is_refused_before_training(trained_store, tmp_path):
    spec, store = _copy_trained(trained_store, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(store / "runs", elsewhere)
    (store / "runs").symlink_to(elsewhere)
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--set", "train.lr=0.02", "--no-plot")
    _assert_refused(res, "symbolic link", "outside the results folder")
    assert len(list(elsewhere.glob("*.json"))) == 1  # nothing new written there


def test_data_generate_force_replaces_only_a_generated_dataset(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep")
    res = _invoke("data", "generate", "listops", "--n", "30", "--min-length", "1",
                  "--max-length", "50", "--out", mine, "--force")  # it deleted the folder
    _assert_refused(res, "thesis.tex", "only replaces a generated dataset")
    assert (mine / "thesis.tex").read_text() == "keep"
    (tmp_path / "link").symlink_to(mine)
    res = _invoke("data", "generate", "listops", "--n", "30", "--min-length", "1",
                  "--max-length", "50", "--out", tmp_path / "link", "--force")
    _assert_refused(res, "not a folder")
    gen = tmp_path / "gen"
    for _ in range(2):  # a generated folder is replaced with --force
        res = _invoke("data", "generate", "listops", "--n", "30", "--min-length", "1",
                      "--max-length", "50", "--out", gen, "--force")
        assert res.exit_code == 0, res.output
    res = _invoke("data", "generate", "pathfinder", "--n", "2", "--seed", "-1", "--out",
                  tmp_path / "pf", "--workers", "1")  # numpy raised on a negative seed
    assert res.exit_code == 2 and "Traceback" not in res.output and "--seed" in res.output


@pytest.mark.parametrize("args,env,needle", [
    (["run", "{spec}", "--profile", "smoke"], {"SSMREPRO_THREADS": "100000"}, "1 to 1024"),
    (["run", "{spec}", "--profile", ""], None, "unknown profile ''"),
    (["show", "{spec}", "--profile", ""], None, "unknown profile ''"),
    (["plot", "{spec}", "--profile", ""], None, "unknown profile ''"),
    (["bench", "keep-nth-d8", "--seconds", "nan"], None, "--seconds"),
    (["bench", "keep-nth-d8", "--seconds", "-5"], None, "--seconds"),
])
def test_options_and_environment_that_crashed_or_were_misread(tmp_path, args, env, needle):
    spec = _one_run_spec(tmp_path)
    args = [str(spec) if a == "{spec}" else a for a in args]
    _assert_refused(_invoke(*args, "--out", tmp_path / "out", env=env), needle)
    assert not list((tmp_path / "out").rglob("*.png")) if (tmp_path / "out").exists() else True


@pytest.mark.parametrize("override,args,needle", [
    ({"aggregate": {"over": ["model.d_model"], "metrics": ["test.acc"]}}, [], "aggregate.over"),
    ({"claims": [{"text": "t", "where": {"label": "S6x"}, "op": ">", "value": 0.5}]}, [],
     "claims.0.where: matches no run"),
    ({"paper_values": [{"where": {"label": "S6"}, "value": 0.5},
                       {"where": {"label": "S6"}, "value": 0.9}]}, [], "paper_values.1: the same"),
    ({"sweep": [{"cases": [{"label": "x" * 300, "set": {"model.mixer": "s6"}}]}]}, [],
     "at most 200 characters"),
])
def test_settings_that_were_quietly_ignored_or_unmatchable_are_spec_errors(tmp_path, override,
                                                                           args, needle):
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, **override), *args), needle)


def test_a_paper_value_may_name_a_cell_that_no_profile_trains(tmp_path):
    spec = _one_run_spec(tmp_path, paper_values=[{"where": {"label": "Mamba-2"}, "value": 0.5}])
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output


def test_evaluation_counts_in_the_estimate_and_its_memory(tmp_path):
    from ssmrepro.engine.plan import eval_steps
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    run = expand(load_spec(_one_run_spec(tmp_path)), "smoke")[0]
    t = run.train  # 40 steps, eval every 20: evaluations at 0, 20, 40 (+1), then the final one
    assert t.eval_samples == 4 * (32 + 32) + (32 + 32 + 64)
    assert eval_steps(t) == -(-t.eval_samples // (3 * 8))
    res = _invoke("run", _one_run_spec(tmp_path), "--out", tmp_path / "o", "--profile", "smoke",
                  "--dry-run", "--no-estimate", "--set", "train.evals={long: {T: 8000000}}",
                  "--set", "train.max_steps=1000000", "--set", "train.eval_every=1000000")
    _assert_refused(res, "needs about", "evaluation batch")  # passed: the eval set's T was unseen
    # (a long training, evaluated rarely: the evaluation's work is within its bound; the set's
    # length at the evaluation batch is what does not fit)


def test_workers_are_limited_to_what_memory_holds_at_once(tmp_path):
    from ssmrepro.engine.plan import pack_memory, plan, workers_in_memory
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    packs = plan(expand(load_spec(_one_run_spec(tmp_path, seeds=[0, 1, 2, 3])), "smoke"), 1)
    need = pack_memory(packs[0])
    assert need > 0
    assert workers_in_memory(packs, 4, None) == 4
    assert workers_in_memory(packs, 4, 10 * need) == 4
    assert workers_in_memory(packs, 4, 2 * need + 1) == 2
    assert workers_in_memory(packs, 4, need - 1) == 1


@pytest.mark.parametrize("text,needle", [
    ("papers: [unclosed\n", "malformed YAML"),
    ("- a\n- b\n", "expected a mapping"),
    ("papers: {x: y}\ntargets: [1, 2]\n", "targets.0"),
    ("targets: [{id: x, paper: y, tier: '1'}]\n", "targets.0.tier"),
    # the front page showed the first row and dropped the second without a word
    ("targets: [{id: x, paper: y, tier: 1}, {id: x, paper: y, tier: 2}]\n",
     "targets.1.id: 'x' is listed twice (first at targets.0)"),
])
def test_a_malformed_catalogue_is_a_message(tmp_path, text, needle):
    root = _project(tmp_path)
    (root / "experiments/catalogue.yaml").write_text(text)
    (tmp_path / "out").mkdir()
    res = _invoke("figures", "--no-rebuild", "--out", tmp_path / "out",
                  env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "catalogue.yaml", needle)


def test_unreadable_saved_weights_are_a_warning(tmp_path):
    from ssmrepro.store import Store

    st = Store(tmp_path)
    st.runs.mkdir(parents=True)
    (st.runs / "r1.pt").write_bytes(b"not a pickle")
    assert st.read_weights("r1") is None  # quarantined, so that the run is trained again
    assert "saved weights r1.pt quarantined" in st.warnings[0]
    assert "not a readable PyTorch weights file" in st.warnings[0]  # torch's words only before
    assert not (st.runs / "r1.pt").exists()


# ---------------------------------------------------------------------------------------------
# fourth round of probes (issue 11): empty paths, seed lists and sweeps bounded in size and time,
# --strict on MISSING, memory of CUDA and Ray workers, YAML 1.1 surprises and booleans read as
# numbers, labels that look alike, profile settings that never apply, outputs written in place,
# dataset cache files that never end, options that were quietly ignored


@pytest.mark.parametrize("args", [
    ["run", "{spec}", "--out", ""], ["show", "{spec}", "--out", " "], ["plot", "{spec}", "--out", ""],
    ["verify", "{spec}", "--out", ""], ["list", "--out", ""], ["export", "--file", ""],
    ["bench", "roofline", "--out", ""], ["data", "info", "--dir", ""],
    ["data", "generate", "listops", "--out", ""], ["figures", "--no-rebuild", "--out", ""],
])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, args):
    spec = _one_run_spec(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    res = _invoke(*[str(spec) if a == "{spec}" else a for a in args])
    _assert_refused(res, "an empty path")
    assert not list(work.iterdir())  # nothing written into the current folder
    res = _invoke("list", env={"SSMREPRO_OUT": "  "})
    _assert_refused(res, "an empty path")


@pytest.mark.parametrize("args", [
    ["export", "--file", "-"], ["run", "{spec}", "--out", "-"], ["plot", "{spec}", "--out", " - "],
    ["data", "generate", "listops", "--out", "-"], ["figures", "--no-rebuild", "--out", "-"],
])
def test_a_dash_path_is_refused_not_written_as_a_file_named_dash(tmp_path, monkeypatch, args):
    """`export --file -` (stdout, in many tools) wrote a file named '-' into the current folder
    and printed '9 rows -> -'; `--out -` made a folder '-'."""
    spec = _one_run_spec(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    res = _invoke(*[str(spec) if a == "{spec}" else a for a in args])
    _assert_refused(res)
    assert "'-'(standardinputoroutput)" in "".join(res.output.replace("│", "").split())
    assert not list(work.iterdir())


def test_seed_lists_and_sweeps_are_bounded_before_they_are_built(tmp_path, monkeypatch):
    import importlib
    import time

    from ssmrepro.spec import MAX_SEEDS

    expand_mod = importlib.import_module("ssmrepro.sweep.expand")
    t0 = time.time()
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, seeds=list(range(MAX_SEEDS + 1)))),
                    "seeds", "at most 1000")
    assert time.time() - t0 < 20  # 100,000 seeds took 84 s to validate
    assert expand_mod.MAX_RUNS <= 100_000  # the largest paper grid has 20,304 runs
    monkeypatch.setattr(expand_mod, "MAX_RUNS", 50)
    case = {"label": "S6", "set": {"model.mixer": "s6"}, "seeds": list(range(10)),
            "grid": {"train.lr": [0.01 * (i + 1) for i in range(6)]}}  # 60 runs: a case's own
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [case]}])  # seeds were not counted
    _assert_refused(_invoke("validate", spec), "more than 50 runs")


def test_run_ids_are_computed_once_per_point_and_equal_the_identity_hash(tmp_path):
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand, per_point, run_id_of

    spec = load_spec(_one_run_spec(tmp_path, seeds=[0, 1, 2], sweep=[{"grid": {
        "train.lr": [0.01, 0.02]}}]))
    runs = expand(spec, "smoke")
    assert [r.run_id for r in runs] == [run_id_of(r.identity()) for r in runs]
    assert len(set(per_point(runs, lambda r: id(r.train)))) == 2
    assert per_point(runs, type(runs[0]).pack_key) == [r.pack_key() for r in runs]


def test_verify_strict_fails_unless_every_claim_passes(trained_store, tmp_path):
    _, store = _copy_trained(trained_store, tmp_path)
    claim = {"text": "S6 above chance", "where": {"label": "S6"}, "op": ">", "value": 0.0}
    spec = _one_run_spec(tmp_path, claims=[claim])  # the same run as the trained store's
    out = tmp_path / "out"
    res = _invoke("verify", spec, "--out", out, "--profile", "smoke", "--strict")
    assert res.exit_code == 0 and "1 PASS" in res.output, res.output
    empty = tmp_path / "empty"  # no runs: the claim is MISSING
    res = _invoke("verify", spec, "--out", empty, "--profile", "smoke")
    assert res.exit_code == 0 and "1 MISSING" in res.output, res.output
    res = _invoke("verify", spec, "--out", empty, "--profile", "smoke", "--strict")
    assert res.exit_code == 1 and "--strict: 1 MISSING" in res.output, res.output
    res = _invoke("verify", _one_run_spec(tmp_path), "--out", out, "--profile", "smoke",
                  "--strict")  # no checkable claim: UNTESTED
    assert res.exit_code == 1 and "--strict: 1 UNTESTED" in res.output, res.output
    assert "unless every claim PASSes" in " ".join(_invoke("verify", "--help").output.split())


def test_cuda_memory_is_the_least_free_of_the_gpus_the_workers_take(monkeypatch):
    import torch

    from ssmrepro.engine.plan import _budget
    from ssmrepro.train import available_memory

    free = {0: 5 * 10**9, 1: 3 * 10**9}
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (free[d.index], 8 * 10**9))
    assert available_memory("cuda") == 3 * 10**9  # one worker per GPU: each pack fits the least
    assert available_memory("cuda:0") == 5 * 10**9
    assert _budget("cuda") == 15 * 10**8


class _FakeRay:
    """The few calls ``ray_engine.run_ray`` makes, tasks run inline; records each task's options."""

    class Ref:
        def __init__(self, value):
            self.value = value

    def __init__(self, node_memory: int):
        self.node_memory, self.options = node_memory, []

    def nodes(self):
        return [{"Alive": True, "Resources": {"CPU": 2.0, "memory": float(self.node_memory)}}]

    def cluster_resources(self):
        return {"CPU": 2.0, "memory": float(self.node_memory)}

    def remote(self, fn):
        fake = self

        class Remote:
            def options(self, **kw):
                fake.options.append(kw)
                return type("Task", (), {"remote": lambda _, *a: _FakeRay.Ref(fn(*a))})()

        return Remote()

    def wait(self, refs, num_returns=1, timeout=None):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.value

    def cancel(self, ref, force=False):
        pass


@pytest.mark.parametrize("node_memory", [10**12, 1000])
def test_ray_cpu_pack_tasks_reserve_their_memory(tmp_path, monkeypatch, node_memory):
    """Several Ray tasks on one node shared its memory unchecked (the local engine limits its
    workers to what memory holds): each CPU pack task now reserves its estimate, at most what the
    largest node offers (a larger request would never be scheduled)."""
    from ssmrepro.engine import local, ray_engine
    from ssmrepro.engine.plan import pack_memory, plan
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    fake = _FakeRay(node_memory)
    monkeypatch.setattr(ray_engine, "_ray", lambda: fake)
    packs = plan(expand(load_spec(_one_run_spec(tmp_path, seeds=[0, 1])), "smoke"), 1)
    store = Store(tmp_path / "store")
    store.prepare()
    ended = []
    ray_engine.run_ray(list(enumerate(packs)), store, local.WorkSettings("cpu", "torch"),
                       lambda ev: ended.append(ev) if ev.kind == "pack_end" else None)
    want = [min(pack_memory(p), node_memory) for p in packs]
    assert [o["memory"] for o in fake.options] == want and all(w > 0 for w in want)
    assert all(o["num_cpus"] == 1 and "num_gpus" not in o for o in fake.options)
    assert len(ended) == 2 and not any(ev.failed for ev in ended)
    assert "memory" not in ray_engine.resources("cuda", 1, 123)  # a GPU is the task's own
    assert ray_engine.pack_request(packs[0], "cuda", node_memory) == 0


@pytest.mark.parametrize("where,text,needle", [
    ("set", "model.d_model=8:00", "model.d_model"),  # YAML 1.1: base 60, 480
    ("set", "task.n=yes", "task.n"),  # YAML 1.1: true, then 1
    ("set", "task.n=true", "task.n: Input should be a valid integer"),
    ("set", "train.lr=true", "train.lr: Input should be a valid number"),
    ("set", "train.betas=[true, 0.99]", "train.betas.0"),
    ("set", "train.betas=!!set {0.99: null, 0.9: null}", "unsupported YAML type !!set"),
    ("set", "task.name=!!binary aGVsbG8=", "unsupported YAML type !!binary"),
    ("spec", ("seeds:\n- 0", "seeds:\n- true"), "seeds.0"),
    ("spec", ("seeds:\n- 0", "seeds: !!set {0: null, 1: null}"), "unsupported YAML type !!set"),
    ("spec", ("version: 1", "version: true"), "version"),
    ("spec", ("tier: 1", "tier: yes"), "tier"),
    ("spec", ("  d_model: 8", "  d_model: !!timestamp 2024-01-01"), "!!timestamp"),
])
def test_yaml_surprises_and_booleans_read_as_numbers_are_refused(tmp_path, where, text, needle):
    spec = _one_run_spec(tmp_path)
    if where == "set":
        res = _invoke("validate", spec, "--set", text)
    else:
        old, new = text
        assert old in spec.read_text()
        spec.write_text(spec.read_text().replace(old, new, 1))
        res = _invoke("validate", spec)
    _assert_refused(res, needle)


def test_yaml_is_read_with_the_1_2_scalars():
    from ssmrepro.spec import parse_yaml

    doc = parse_yaml("a: yes\nb: 8:00\nc: 2024-01-01\nd: 1e-3\ne: 0x10\nf: 1_000\ng: .inf\n"
                     "h: true\ni: null\nj: 010\n")
    assert doc == {"a": "yes", "b": "8:00", "c": "2024-01-01", "d": 0.001, "e": 16, "f": 1000,
                   "g": float("inf"), "h": True, "i": None, "j": 10}


@pytest.mark.parametrize("label,needle", [
    ("S6 ", "no spaces at its ends"), ("S\u200b6", "ZERO WIDTH SPACE"), ("a\nb", "U+000A"),
    ("S\u202e6", "RIGHT-TO-LEFT OVERRIDE"), ("S\u00a06", "NO-BREAK SPACE"),
])
def test_labels_that_look_like_another_are_refused(tmp_path, label, needle):
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [
        {"label": label, "set": {"model.mixer": "s6"}},
        {"label": "S6", "set": {"model.mixer": "s4d"}}]}])
    _assert_refused(_invoke("validate", spec), "sweep.0.cases.0.label", needle)


def test_a_profile_setting_that_every_sweep_point_replaces_is_refused(tmp_path):
    spec = _one_run_spec(tmp_path, profiles={"smoke": {"set": {"model.mixer": "nope"}},
                                             "quick": {}, "paper": {}})
    _assert_refused(_invoke("validate", spec), "profiles.smoke.set.model.mixer", "never used")
    spec = _one_run_spec(tmp_path, profiles={  # replaced at some points only: a default
        "smoke": {"set": {"model.mixer": "s6"}}, "quick": {}, "paper": {}},
        sweep=[{"cases": [{"label": "S6"}, {"label": "S4D", "set": {"model.mixer": "s4d"}}]}])
    assert _invoke("validate", spec).exit_code == 0


def test_outputs_are_written_whole_or_not_at_all(trained_store, tmp_path, monkeypatch):
    """A figure or table was written in place: a `plot` killed mid-write left a torn file."""
    from matplotlib.figure import Figure

    spec, store = _copy_trained(trained_store, tmp_path)
    out = tmp_path / "out"
    assert _invoke("plot", spec, "--out", out, "--profile", "smoke").exit_code == 0
    before = {p.name: p.read_bytes() for p in store.iterdir() if p.is_file()}
    real = Figure.savefig

    def torn(self, fname, *a, **kw):  # part of a PNG written, then the process is interrupted
        real(self, fname, *a, **kw)
        if hasattr(fname, "truncate"):
            fname.truncate(100)
        else:
            os.truncate(fname, 100)
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", torn)
    res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 130, res.output
    assert (store / "figure-smoke.png").read_bytes() == before["figure-smoke.png"]
    assert not list(store.glob(".*.tmp"))
    # said in plot's words: "finished runs are saved ... resume" was run's line
    assert "every file written is whole" in res.output and "runs" not in res.output, res.output


def test_writes_refuse_devices_and_folders_and_name_the_file(trained_store, tmp_path):
    import stat

    res = _invoke("export", "--file", "/dev/null", "--out", tmp_path)  # root replaced /dev/null
    _assert_refused(res, "/dev/null", "not a regular file")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    spec, store = _copy_trained(trained_store, tmp_path)
    (store / "results-smoke.csv").unlink(missing_ok=True)
    (store / "results-smoke.csv").mkdir()
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    _assert_refused(res, f"{store / 'results-smoke.csv'}: a folder where a file belongs")
    assert ".tmp" not in res.output  # the temp file was named instead


def test_an_out_folder_below_a_file_warns_of_no_record(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    res = _invoke("run", _one_run_spec(tmp_path), "--out", a_file, "--profile", "smoke")
    _assert_refused(res, "a path component is a file")
    assert "quarantine" not in res.output and "ignoring run record" not in res.output


@pytest.mark.parametrize("what", ["meta-fifo", "array-fifo", "meta-link", "meta-nested"])
def test_dataset_cache_files_that_never_end_are_rebuilt(tmp_path, what):
    import signal

    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    good = load_lra("listops", "test", root)
    entry = good.cache_path
    victim = entry / ("test.x.npy" if what == "array-fifo" else "meta.json")
    victim.unlink()
    if what.endswith("fifo"):
        os.mkfifo(victim)  # reading it blocked forever
    elif what == "meta-link":  # (to /dev/zero it never ended; a link is not what prepare wrote)
        victim.symlink_to(tmp_path / "elsewhere.json")
        (tmp_path / "elsewhere.json").write_text("{}")
    else:
        victim.write_text("[" * 100_000 + "]" * 100_000)  # RecursionError
    class Hung(Exception):  # not an OSError (the loader would take it for a damaged file)
        pass

    def hung(*_):
        raise Hung("loading the cache entry did not end")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.warns(UserWarning, match="damaged cache entry"):
            again = load_lra("listops", "test", root)
    finally:
        signal.alarm(0)
    assert (again.x == good.x).all()


def test_export_refuses_a_missing_results_folder_and_names_specs_it_leaves_out(tmp_path):
    res = _invoke("export", "--file", tmp_path / "x.csv", "--out", tmp_path / "no-such")
    _assert_refused(res, "no such folder")  # exported an empty table, exit 0
    assert not (tmp_path / "x.csv").exists()
    root = _project(tmp_path)
    (root / "experiments/huang2025/broken.yaml").write_text("id: [\n")
    (root / "results").mkdir()
    res = _invoke("export", "--file", tmp_path / "x.csv", env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0 and "left out (invalid spec)" in res.output, res.output
    assert "broken.yaml" in res.output


@pytest.mark.parametrize("cmd", [["export", "--file", "x.csv"], ["figures", "--no-rebuild"],
                                 ["bench", "roofline"]])
def test_a_results_root_that_is_not_a_folder_is_named_for_what_it_is(tmp_path, cmd):
    """`export --out <a file>` said 'no such folder' (and `figures` 'not a folder' for a missing
    one): the message gives the true reason."""
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    cmd = [c if c != "x.csv" else tmp_path / c for c in cmd]
    for out, needle in [("file", "a file, not a folder"), ("fifo", "a FIFO, device or socket"),
                        ("loop", "a symbolic link loop"), ("file/sub", "a path component is a file"),
                        ("missing", "no such folder")]:
        res = _invoke(*cmd, "--out", tmp_path / out)
        _assert_refused(res, needle)
        assert "no such folder" not in res.output or out == "missing", res.output
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("opt,needle", [(["--no-estimate"], "--no-estimate needs --dry-run"),
                                        (["--cpus-per-pack", "4"], "needs --engine ray")])
def test_options_that_would_be_ignored_are_refused(tmp_path, opt, needle):
    res = _invoke("run", _one_run_spec(tmp_path), "--out", tmp_path / "o", "--profile", "smoke",
                  *opt)
    _assert_refused(res, needle)
    assert not (tmp_path / "o").exists()


def test_a_spec_file_may_not_take_the_id_of_a_project_spec(tmp_path):
    """Run by its path, a copy with the id huang2025-tab1 wrote into the shipped spec's results
    folder: its results.csv, figure and report replaced the committed ones."""
    spec = write_spec(tmp_path, name="huang2025-tab1", paper="huang2025", seeds=[0])
    for cmd in ("run", "plot", "verify", "validate"):
        res = _invoke(cmd, spec, *(["--out", tmp_path / "out"] if cmd != "validate" else []))
        _assert_refused(res, "id: 'huang2025-tab1' is the id of", "needs an id of its own")
    assert not (tmp_path / "out").exists()
    shipped = ROOT / "experiments/huang2025/huang2025-tab1.yaml"
    assert _invoke("validate", shipped).exit_code == 0  # the project's own file by its path


@pytest.mark.parametrize("override,needle", [
    ({"claims": [{"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 1.5}]},
     "claims.0.value: 1.5 for test.acc"),
    ({"claims": [{"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.5,
                  "given": [{"metric": "train.acc", "op": ">=", "value": 90}]}]},
     "claims.0.given.0.value: 90 for train.acc"),
    ({"paper_values": [{"where": {"label": "S6"}, "value": 95}]}, "paper_values.0.value: 95"),
])
def test_accuracies_a_claim_or_paper_value_can_never_meet_are_refused(tmp_path, override, needle):
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, **override)), needle,
                    "outside [0, 1]")


def test_a_planner_cache_that_is_garbage_or_never_ends_is_measured_again(tmp_path):
    import json
    import signal

    from ssmrepro.engine.costs import CostModel

    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"a": "slow", "b": -1.0, "c": float("nan"), "d": True, "e": 0.5}))
    assert CostModel("cpu", threads=1, path=path)._load() == {"e": 0.5}  # float('slow') raised
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert CostModel("cpu", threads=1, path=path)._load() == {}  # RecursionError
    path.unlink()
    os.mkfifo(path)  # blocked forever

    class Hung(Exception):
        pass

    def hung(*_):
        raise Hung

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        assert CostModel("cpu", threads=1, path=path)._load() == {}
    finally:
        signal.alarm(0)


@pytest.mark.parametrize("args,env", [
    (["run", "lra", "--profile", "smoke", "--no-calibrate"], "empty"),
    (["run", "yu2025-appG", "--profile", "smoke", "--no-calibrate", "--set", "task.path=/dev/zero"],
     None),
])
def test_missing_data_is_refused_before_training_without_calibration(tmp_path, args, env):
    """With calibration off, every pack failed on its own (exit 1); a character device was a
    corpus 'not found' only inside each pack."""
    res = _invoke(*args, "--out", tmp_path / "out",
                  env={"SSMREPRO_DATA": str(tmp_path / env)} if env else None)
    _assert_refused(res)
    assert "pack 1 failed" not in res.output and not (tmp_path / "out").exists()
    assert "ssmrepro data" in res.output or "no corpus file at /dev/zero" in res.output


@pytest.mark.parametrize("url", ["http://[::1", "http://host:port/x", "http://host:99999/x"])
def test_a_download_url_that_is_not_a_url_is_a_message(tmp_path, url):
    res = _invoke("data", "download", "lra", "--url", url, "--dir", tmp_path, "--no-progress")
    _assert_refused(res, "not a URL")


# ---------------------------------------------------------------------------------------------
# fifth round of probes (issue 11): settings quietly ignored or replaced (lr_scale groups,
# derived values, empty case grids, preconditions on unknown metrics), paper values of several
# cells, figure and claim columns the profile does not sweep, models their blocks refuse, figure
# sizes, damaged figure arrays and analysis tables, tables that never end, benchmark records and
# options


@pytest.mark.parametrize("override,args,needle", [
    ({}, ["--set", "train.lr_scale={Delta: 0.1}"], "unknown learning-rate group 'Delta'"),
    ({}, ["--set", "train.early_stop={metric: val.acc, op: '>=', threshold: 95}"],
     "an accuracy is in [0, 1]"),
    ({"sweep": [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"},
                            "grid": {"model.d_model": []}}]}]},
     [], "sweep.0.cases.0: Value error, grid.model.d_model: an empty list"),
    ({"claims": [{"text": "t", "where": {"label": "S6"}, "op": ">", "value": 0.0,
                  "given": [{"metric": "tset.acc", "op": ">=", "value": 0.9}]}]},
     [], "claims.0.given.0.metric: 'tset.acc' is not aggregated"),
    ({"sweep": [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                           {"label": "S6", "set": {"model.mixer": "s4d"}}]}],
      "paper_values": [{"where": {"label": "S6"}, "value": 0.5}]},
     [], "paper_values.0.where: matches 2 cells of profile smoke"),
])
def test_settings_quietly_ignored_or_averaged_are_spec_errors(tmp_path, override, args, needle):
    """A typo'd lr_scale group trained every parameter at the plain lr; an early-stop accuracy
    of 95 never stopped; a case's empty grid ran the case once at its set values; a precondition
    on an unknown metric read NaN and held for every cell (a silent PASS); a paper value of two
    cells was compared with their mean."""
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, **override), *args), needle)


def test_a_derived_value_cannot_also_be_set(tmp_path):
    """`--set model.d_state=2` printed d_state 2 in `show` while every run had the derived
    value (the same run ids as without it)."""
    derived = {"model.d_state": "model.d_model // 2"}
    spec = _one_run_spec(tmp_path, derived=derived)
    assert _invoke("validate", spec).exit_code == 0
    _assert_refused(_invoke("show", spec, "--set", "model.d_state=2"),
                    "--set model.d_state: derived.model.d_state computes this value")
    nested = _one_run_spec(tmp_path, derived={"train.schedule.warmup_steps": "train.max_steps // 10"})
    _assert_refused(_invoke("validate", nested, "--set", "train.schedule={warmup_steps: 3}"),
                    "--set train.schedule: derived.train.schedule.warmup_steps")
    assert _invoke("validate", nested, "--set", "train.schedule={kind: cosine}").exit_code == 0
    spec = _one_run_spec(tmp_path, derived=derived, profiles={
        "smoke": {"set": {"model.d_state": 2}}, "quick": {}, "paper": {}})
    _assert_refused(_invoke("validate", spec), "profiles.smoke.set.model.d_state: derived")
    spec = _one_run_spec(tmp_path, derived=derived, sweep=[{"grid": {"model.d_state": [2, 4]}}])
    _assert_refused(_invoke("validate", spec), "sweep key model.d_state: derived")


_D = "model.d_model"  # constant in the trained store's profile (not swept)


@pytest.mark.parametrize("figure", [
    {"kind": "bars", "x": _D}, {"kind": "lines", "x": _D},
    {"kind": "phase", "x": _D, "y": "task.T", "panels": [{"metric": "test.acc"}]},
    {"kind": "curves", "series": "val.acc", "row": _D, "col": "task.T"},
    {"kind": "bound_grid", "x": _D, "y": "task.T"},
    {"kind": "bands", "x": _D, "lo": None, "hi": None},  # no percentiles aggregated: no band
], ids=lambda f: f["kind"])
def test_figures_claims_and_paper_values_may_name_a_key_not_swept(trained_store, tmp_path,
                                                                  figure):
    """A config key the profile holds constant is no cell key: figures raised KeyError (after
    training, in `run`), bound_grid and bands drew nothing, and a claim or paper value on it was
    MISSING / 'not run' forever although its cell had finished."""
    spec, store = _copy_trained(trained_store, tmp_path)
    claim = {"text": "t", "where": {_D: 8}, "op": ">", "value": 0.0}
    spec = _one_run_spec(tmp_path, figures=[{**figure, "name": "f"}], claims=[claim],
                         paper_values=[{"where": {_D: 8}, "value": 0.2, "tol": 0.15}])
    res = _invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "1 PASS" in res.output and "1 of 1 compared" in res.output, res.output
    assert (store / "f-smoke.png").is_file()
    assert _D not in (store / "summary-smoke.csv").read_text().splitlines()[0]  # tables as before


@pytest.mark.parametrize("blocks,needle", [
    ("{SSM: {mixer: {name: b2s6, heads: 3}}}", "B2S6: d=8 is not divisible by heads=3"),
    ("{SSM: {mixer: {name: mamba2, heads: 5}}}", "does not split into heads=5"),
    ("{SSM: {kind: neox, heads: 3}}", "d=8 is not divisible by heads=3"),
])
def test_a_model_its_blocks_refuse_is_a_message(tmp_path, blocks, needle):
    """`validate` said ok; `run` (and --dry-run) raised the block's ValueError (a traceback)."""
    spec = _one_run_spec(tmp_path, sweep=[], model={"name": "seq_lm", "d_model": 8,
                                                    "layers": "SSM"})
    for args in (["validate", spec], ["run", spec, "--out", tmp_path / "o", "--profile", "smoke",
                                      "--no-calibrate"],
                 ["run", spec, "--out", tmp_path / "o", "--dry-run", "--no-estimate"]):
        _assert_refused(_invoke(*args, "--set", f"model.blocks={blocks}"), "cannot be built",
                        needle)
    assert not (tmp_path / "o").exists()


def test_figures_too_large_to_draw_are_refused(tmp_path):
    import matplotlib.pyplot as plt

    from ssmrepro.plots.registry import FigureTooLarge, save_png

    for panel, needle in (([1000, 1000], "less than or equal to 20"), ([-3, 2], "greater than")):
        spec = _one_run_spec(tmp_path, figures=[{"kind": "curves", "series": "val.acc",
                                                 "panel": panel}])
        _assert_refused(_invoke("validate", spec), "figures.0.panel.0", needle)
    fig = plt.figure(figsize=(300, 300))  # e.g. a bar per cell of 30,000 cells
    with pytest.raises(FigureTooLarge, match="pixels"):
        save_png(fig, tmp_path / "big.png", dpi=130)  # MemoryError / ValueError in matplotlib
    assert not (tmp_path / "big.png").exists()


def _committed(tmp_path, spec_id: str) -> Path:
    """A copy of the committed results folder of ``spec_id`` (no run records) under tmp_path."""
    paper = spec_id.split("-")[0]
    dest = tmp_path / "out" / paper / spec_id
    shutil.copytree(ROOT / "results" / paper / spec_id, dest)
    return dest


def _no_hang(seconds: int):
    import signal

    class Hung(Exception):
        pass

    def hung(*_):
        raise Hung(f"did not end in {seconds} s")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)


@pytest.mark.parametrize("damage", ["truncated", "zip-garbage", "fifo", "wrong-dtype",
                                    "wrong-shape"])
def test_damaged_figure_arrays_are_a_warning(tmp_path, damage):
    """A damaged <figure>-arrays.npz (a fresh clone has no weights to redraw from) raised
    BadZipFile, TypeError or ValueError deep in matplotlib, or blocked forever on a FIFO."""
    import numpy as np

    folder = _committed(tmp_path, "koren2026-fig2")
    arrays = folder / "figure-arrays.npz"
    good = arrays.read_bytes()
    if damage == "truncated":
        arrays.write_bytes(good[:100])
    elif damage == "zip-garbage":
        arrays.write_bytes(b"PK\x03\x04garbage")
    elif damage == "fifo":
        arrays.unlink()
        os.mkfifo(arrays)
    else:
        z = dict(np.load(arrays, allow_pickle=False))
        if damage == "wrong-dtype":
            z["r0.metrics"] = np.array(["x"])
        else:
            z["r0.G_vv"] = np.zeros(3)
        np.savez(arrays, **z)
    _no_hang(60)
    try:
        res = _invoke("plot", "koren2026-fig2", "--out", tmp_path / "out")
    finally:
        import signal

        signal.alarm(0)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "figure.png not drawn: figure-arrays.npz is unusable" in res.output, res.output


@pytest.mark.parametrize("spec_id,name,damage,needle", [
    ("koren2026-fig2", "results.csv", "fifo", "not a regular file"),
    ("koren2026-fig2", "curves.csv", "fifo", "not a regular file"),
    ("koren2026-fig2", "mechanistic.csv", "text", "holds text where numbers belong"),
    ("koren2026-fig2", "mechanistic.csv", "foreign", "not a table of this project"),
    ("koren2026-fig2", "mechanistic.csv", "inf", "an infinite value"),
    ("huang2025-fig1", "histograms.csv", "bins", "out of range"),
])
def test_committed_analysis_tables_and_tables_that_never_end(tmp_path, spec_id, name, damage,
                                                             needle):
    """A FIFO in place of a committed table blocked `plot` forever; a damaged mechanistic.csv
    raised TypeError / KeyError; a histograms.csv with bins = 10**12 allocated without bound."""
    folder = _committed(tmp_path, spec_id)
    table = folder / name
    lines = table.read_text().splitlines()
    if damage == "fifo":
        table.unlink()
        os.mkfifo(table)
    elif damage == "foreign":
        table.write_text("a,b\n1,2\n")
    elif damage == "bins":
        col = lines[0].split(",").index("bins")
        row = lines[1].split(",")
        row[col] = str(10**12)
        table.write_text("\n".join([lines[0], ",".join(row)] + lines[2:]) + "\n")
    else:
        row = lines[1].split(",")
        row[-1] = "high" if damage == "text" else "inf"
        table.write_text("\n".join([lines[0], ",".join(row)] + lines[2:]) + "\n")
    _no_hang(60)
    try:
        res = _invoke("plot", spec_id, "--out", tmp_path / "out")
    finally:
        import signal

        signal.alarm(0)
    _assert_refused(res, str(table), needle)


@pytest.mark.parametrize("edit", ["huge", "negative", "twice", "plain-nan", "pack-2.5",
                                  "pack-true", "ratio-text", "pack-huge"])
def test_roofline_records_with_impossible_rates_are_left_out(tmp_path, edit):
    """A packs record whose run-steps/s was edited to 1e308 was printed as a 309-digit number
    with a ratio of x3e305 (its ratio column still x2.58); a negative one, a pack measured twice
    or a NaN plain rate were taken without a word; so were a pack of 2.5 (read as 2) or `true`
    (1) and a ratio written as text."""
    bench = tmp_path / "bench"
    bench.mkdir()
    rec = json.loads((ROOT / "results/bench/keep-nth-d8-cpu.json").read_text())
    row = rec["packed"][0]
    if edit == "huge":
        row["run_steps_per_s"] = 1e308
    elif edit == "negative":
        row["run_steps_per_s"] = -3.0
    elif edit == "twice":
        rec["packed"].append(dict(row))
    elif edit == "pack-2.5":
        row["pack"] = 2.5
    elif edit == "pack-true":
        row["pack"] = True
    elif edit == "ratio-text":
        row["ratio"] = str(row["ratio"])
    elif edit == "pack-huge":  # printed as 'E = 10000000000000000000000000000000000000000'
        for r in rec["packed"]:
            r["pack"] *= 10 ** 38
    else:
        rec["plain_run_steps_per_s"] = float("nan")
    (bench / "keep-nth-d8-cpu.json").write_text(json.dumps(rec))
    res = _invoke("bench", "roofline", "--out", bench)
    _assert_refused(res, "no usable packs benchmark record")
    assert not (bench / "performance.md").exists()


def test_roofline_table_keeps_a_description_with_a_bar_or_line_break_in_its_cell(tmp_path):
    """A packs record whose description held '|' and a line break split its row of
    performance.md into extra columns and a stray line ('# heading')."""
    bench = tmp_path / "bench"
    bench.mkdir()
    rec = json.loads((ROOT / "results/bench/keep-nth-d8-cpu.json").read_text())
    rec["description"] = "a | b\n# heading"
    (bench / "keep-nth-d8-cpu.json").write_text(json.dumps(rec))
    res = _invoke("bench", "roofline", "--out", bench)
    assert res.exit_code == 0, res.output
    rows = [ln for ln in (bench / "performance.md").read_text().splitlines() if "keep-nth" in ln]
    assert rows == [rows[0]] and "(a \\| b # heading)" in rows[0], rows


def test_roofline_records_that_are_damaged_foreign_or_absent(tmp_path):
    """Records without a field raised KeyError, a garbage step-cpu.json JSONDecodeError, a FIFO
    blocked forever; an empty or missing folder drew an empty roofline and table (exit 0)."""
    bench = tmp_path / "bench"
    bench.mkdir()
    for p in (ROOT / "results/bench").glob("*.json"):
        shutil.copy(p, bench / p.name)
    good = _invoke("bench", "roofline", "--out", bench)
    assert good.exit_code == 0, good.output
    table = (bench / "performance.md").read_text()
    (bench / "zz-cpu.json").write_text('{"packed": [], "plain": {"gflops": 1}}')
    (bench / "step-cpu.json").write_text("garbage{")
    (bench / "step-cpu-engine-settings.json").write_text('{"workloads": 3}')
    os.mkfifo(bench / "yy-cpu.json")
    _no_hang(60)
    try:
        res = _invoke("bench", "roofline", "--out", bench)
    finally:
        import signal

        signal.alarm(0)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    for name in ("zz-cpu.json", "step-cpu.json", "step-cpu-engine-settings.json", "yy-cpu.json"):
        assert f"leftout:{bench / name}" in "".join(res.output.split()), res.output  # rich
        # wraps long paths anywhere
    packs = table.split("\n\n")[0].strip()  # the packs rows stay; the step rows are left out
    assert (bench / "performance.md").read_text().strip() == packs
    _assert_refused(_invoke("bench", "roofline", "--out", tmp_path / "empty-but-there"),
                    "no such folder")
    (tmp_path / "empty").mkdir()
    _assert_refused(_invoke("bench", "roofline", "--out", tmp_path / "empty"),
                    "no usable packs benchmark record")
    assert not list((tmp_path / "empty").iterdir())


@pytest.mark.parametrize("args,needle", [
    (["scans", "--L", "0"], "--L: 0 is not in"),
    (["scans", "--L", "-5"], "--L: -5 is not in"),
    (["scans", "--L", "1000000000"], "--L: 1000000000 is not in"),
    (["scans", "--L", "1048576"], "floats per tensor"),
    (["scans", "--threads", "0"], "--threads: 0 is not in"),
    (["scans", "--repeats", "0"], "--repeats: 0 is not in"),
    (["scans", "--kernels", "ssd", "--heads", "5"], "--heads 5 does not divide --d 32"),
    (["step", "--E", "0"], "--E: 0 is not in"),
    (["step", "--L", "0"], "--L: 0 is not in"),  # was quietly the workload's own L
    (["step", "--batch", "-1"], "--batch: -1 is not in"),
    (["step", "--micro", "0"], "--micro: 0 is not in"),
    (["step", "--E", "256", "--L", "100000"], "floats per activation"),
    # the ssd chunk matrices (1 TB asked for) and the logits (8 x the bound) raised the
    # allocator's traceback; a micro-batch not below the batch was left out without a word
    (["scans", "--kernels", "ssd", "--L", "4096", "--ssd-chunk", "1048576"], "ssd at L=4096"),
    (["step", "--workloads", "mamba-L256", "--E", "1", "--batch", "64", "--L", "65536"],
     "logits 512"),
    (["step", "--batch", "1", "--micro", "2"], "--micro 2: not below"),
    # a kernel with none of the variants asked for was left out without a word (an empty table
    # and --json record, exit 0), a variant no kernel asked for has likewise
    (["scans", "--kernels", "diag", "--variants", "fused"], "none is a variant of kernel diag"),
    (["scans", "--kernels", "selective", "--variants", "fused", "tiled"],
     "--variants tiled: not a variant of --kernels selective"),
])
def test_benchmark_options_are_bounded(args, needle):
    res = _invoke("bench", *args)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert needle in res.output, res.output


def test_a_sha256_that_is_no_sha256_is_refused_before_downloading(tmp_path):
    src = tmp_path / "archive.tar.gz"
    src.write_bytes(b"x")
    res = _invoke("data", "download", "cifar10", "--url", f"file://{src}", "--sha256", "zz",
                  "--dir", tmp_path / "data", "--no-progress")
    _assert_refused(res, "not a SHA-256")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("what", ["labels", "tokens"])
def test_cache_entries_with_labels_or_tokens_out_of_range_are_rebuilt(tmp_path, what):
    """A cache entry with labels outside [0, n_classes) (or -100, which the loss ignores) or
    token ids outside its vocabulary was used as it was."""
    import numpy as np

    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    good = load_lra("listops", "train", root)
    x, labels = good.x.copy(), good.labels.copy()
    if what == "labels":
        np.save(good.cache_path / "train.labels.npy", np.full(len(labels), -100, dtype=np.int64))
    else:
        np.save(good.cache_path / "train.x.npy", np.full(x.shape, 200, dtype=x.dtype))
    with pytest.warns(UserWarning, match="damaged cache entry"):
        again = load_lra("listops", "train", root)
    assert (again.x == x).all() and (again.labels == labels).all()


@pytest.mark.parametrize("damage", ["labels", "fifo"])
def test_damaged_source_data_are_refused_not_trained_on(tmp_path, damage):
    """Generated Pathfinder shards with a label 7 of 2 classes were prepared and cached (every
    pack then failed, or the loss ignored them); a FIFO among them blocked the loader forever."""
    import numpy as np

    from ssmrepro.data.datasets import load_lra
    from ssmrepro.data.sources import DataUnavailable

    root = tmp_path / "data"
    out = root / "generated/pathfinder32/curv_contour_length_14"
    res = _invoke("data", "generate", "pathfinder", "--res", "32", "--n", "20", "--workers", "1",
                  "--out", out)
    assert res.exit_code == 0, res.output
    (shard,) = (out / "shards").glob("labels_*.npy")
    if damage == "labels":  # (in a folder generated before meta.json named each shard's
        # SHA-256, which would refuse the edit first)
        np.save(shard, np.full(20, 7, dtype=np.int64))
        meta = json.loads((out / "meta.json").read_text())
        del meta["shard_sha256"]
        (out / "meta.json").write_text(json.dumps(meta))
        needle = "labels outside [0, 2)"
    else:
        shard.unlink()
        os.mkfifo(shard)
        needle = "not a regular file"
    _no_hang(60)
    try:
        with pytest.raises(DataUnavailable, match=re.escape(needle)):
            load_lra("pathfinder32", "train", root, ["generated"])
    finally:
        import signal

        signal.alarm(0)


# sixth round of probes (issue 11): task value ranges and sets with nothing supervised, analytic
# specs, figure and claim options that name columns, values or expressions their cells cannot
# give


def test_an_inverse_matching_value_range_is_bounded(tmp_path):
    """high = 1000 hung building every three-value set (C(981, 3) rows); 10^4 asked for 10^11."""
    spec = _one_run_spec(tmp_path, task={"name": "inverse_matching", "high": 1000})
    _assert_refused(_invoke("validate", spec), "low/high: [20, 1000] has 981 values, more than 256")
    spec = _one_run_spec(tmp_path, task={"name": "inverse_matching", "ood_high": 10_000})
    _assert_refused(_invoke("validate", spec), "ood_low/ood_high", "more than 256")


def test_a_set_with_no_supervised_position_fails_its_pack_before_training(tmp_path):
    """Selective copy with p = 0 has no number to copy: every run recorded accuracy 0 and loss 0
    (0 / 0 read as 0), exit 0, a result nothing measured. (`validate` now refuses p = 0; p = 1e-9
    draws no number in these samples: a property of the samples, not of the settings.)"""
    import json

    spec = _one_run_spec(tmp_path, task={"name": "selective_copy", "words": 4, "numbers": 2,
                                         "p": 1e-9, "L": 8})
    assert _invoke("validate", spec).exit_code == 0  # a runtime property of the samples
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--no-plot", "--workers", "1")
    assert res.exit_code == 1, res.output
    assert "the training set (32 samples) has no supervised position" in res.output, res.output
    assert "trained 0 runs" in res.output and "Traceback" not in res.output, res.output
    # the packs that trained a run, not those planned ('trained 0 runs in 1 packs')
    assert "trained 0 runs in 0 packs" in " ".join(res.output.split()), res.output
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("runs/*.json")]
    assert records and all(r["status"] != "ok" for r in records), records  # never counted done


def test_require_targets_names_the_set_that_has_none():
    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.base import TEST
    from ssmrepro.tasks.selective_copy import SelectiveCopyConfig
    from ssmrepro.train import NoTargets, require_targets

    seeds = __import__("torch").tensor([3, 4])
    ok = build_task(SelectiveCopyConfig(words=4, numbers=2, p=0.5, L=8))
    require_targets(ok, seeds, TEST, 16, 8, "test")  # has targets: no error
    none = build_task(SelectiveCopyConfig(words=4, numbers=2, p=1e-9, L=8))
    with pytest.raises(NoTargets, match="the 'x' evaluation set .16 samples. has no supervised"):
        require_targets(none, seeds, TEST, 16, 8, "'x' evaluation")


def _analytic_spec(tmp_path, source: str, edit=None) -> Path:
    """A copy of a shipped analytic spec under another id, ``edit`` applied to its analytic."""
    raw = yaml.safe_load((ROOT / source).read_text())
    raw.update(id="t-analytic", alias=None)
    if edit is not None:
        edit(raw["analytic"])
    p = tmp_path / "t-analytic.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return p


_HAAR = "experiments/huang2025/huang2025-figA1.yaml"
_YU = "experiments/yu2025/yu2025-fig5.yaml"


@pytest.mark.parametrize("source,edit,needle", [
    (_HAAR, lambda a: a["params"].update(bogus=1), "params.bogus: unknown key"),
    (_HAAR, lambda a: a["params"].update(n="many"), "params.n: Input should be a valid integer"),
    (_HAAR, lambda a: a["grid"].update(abs_w=[0, 10]),
     "grid.abs_w: Input should be greater than or equal to 0.000001 (grid point abs_w=0)"),
    (_HAAR, lambda a: a["params"].update(n=10**9 + 1), "params.n: Input should be less than"),
    (_HAAR, lambda a: a["params"].update(delta=0.5), "delta: 0.5 leaves no point away"),
    (_HAAR, lambda a: a["params"].update(n=200000), "is not a multiple of 2^(j+1)"),
    (_HAAR, lambda a: a["grid"].update(abs_w=list(range(1, 10_002))),
     "analytic.grid: 10,001 rows, more than 10,000"),
    (_YU, lambda a: a["params"].update(trials=10**9), "params.trials: Input should be less than"),
    (_YU, lambda a: a["params"].update(trials=100_000), "floats per tensor, more than"),
], ids=["unknown", "text", "zero", "huge-n", "delta", "grid-misses-jumps", "rows", "yu-trials",
        "yu-size"])
def test_analytic_params_are_typed_and_bounded_per_table(tmp_path, source, edit, needle):
    """`validate` said ok; `run` then raised TypeError (an unknown name, text), ZeroDivisionError
    (0), MemoryError (n or trials of 10^9) or gave meaningless numbers (delta too wide)."""
    assert _invoke("validate", _analytic_spec(tmp_path, source)).exit_code == 0
    _assert_refused(_invoke("validate", _analytic_spec(tmp_path, source, edit)), "analytic",
                    needle)


@pytest.mark.parametrize("cmd", ["run", "plot"])
def test_set_on_an_analytic_spec_is_refused(tmp_path, cmd):
    """--set was ignored: tagged copies (-set-<hash>) of the plain table were written."""
    spec = _analytic_spec(tmp_path, _HAAR)
    out = tmp_path / "out"
    res = _invoke(cmd, spec, "--out", out, "--profile", "smoke", "--set", "model.d_model=8")
    _assert_refused(res, "--set model.d_model: an analytic spec trains nothing")
    assert not out.exists()


_T = "task.T"


@pytest.mark.parametrize("override,needle", [
    # a column read as a number that holds text (raised ValueError while drawing or judging)
    ({"figures": [{"kind": "lines", "x": "label", "logx": True}]},
     "figures.0: 'label' is read as a number, but holds 'S6'"),
    ({"figures": [{"kind": "phase", "x": "label", "y": _T, "panels": [{"metric": "test.acc"}]}]},
     "'label' is read as a number"),
    # expressions that cannot be evaluated for a cell (raised in the check or the figure)
    ({"claims": [{"check": "region", "text": "t", "region": f"1 / ({_D} - 8) > 0", "op": ">",
                  "value": 0.0}]}, "claims.0.region: cannot be evaluated for the cell"),
    ({"claims": [{"check": "collapse", "text": "t", "by": "label", "tol": 0.1}]},
     "claims.0.by: cannot be evaluated"),
    ({"figures": [{"kind": "bound_grid", "x": _T, "y": _D,
                   "bounds": {"*": [{"expr": f"1 / ({_T} - 8)", "text": "b"}]}}]},
     "figures.0.bounds.*.0.expr: cannot be evaluated"),
    # two cells on one spot: the last hid the first
    ({"figures": [{"kind": "lines", "x": _T, "hue": _D, "facet": None}]}, "fall on one spot"),
    # case:<i> beyond the labels: '' for every cell
    ({"figures": [{"kind": "bars", "x": "case:2"}]}, "have at most 1 case label(s) (case:0)"),
    # a label, reference or half that names no run: a silent PASS or an empty drawing
    ({"claims": [{"check": "size_order", "text": "t", "labels": ["S6", "S5"], "group_by": [],
                  "threshold": 0.9}]}, "claims.0.labels.1: 'S5' is no label of any run"),
    ({"claims": [{"check": "size_order", "text": "t", "labels": ["S6", "S6"], "group_by": [],
                  "threshold": 0.9}]}, "names a label twice"),
    ({"figures": [{"kind": "bands", "x": _T, "lo": None, "hi": None, "reference": ["S5"]}]},
     "figures.0.reference.0: 'S5' is no case:0 of any run"),
    ({"figures": [{"kind": "bound_grid", "x": _T, "y": _D, "halves": ["S6", "S6"]}]},
     "halves: two different labels"),
    ({"figures": [{"kind": "curves", "series": "val.acc", "where": {"label": "S5"}}]},
     "figures.0.where: matches no run of any profile"),
    # empty or unusable options that drew nothing (exit 0) or blew up
    ({"figures": [{"kind": "heatmaps", "x": [], "y": ["label"]}]}, "x and y: give the columns"),
    ({"figures": [{"kind": "phase", "x": _T, "y": _D, "panels": []}]}, "figures.0.panels"),
    ({"figures": [{"kind": "curves", "series": []}]}, "figures.0.series"),
    ({"figures": [{"kind": "curves", "series": "val.acc", "labels": {"val.loss": "x"}}]},
     "labels.val.loss: not one of the series"),
    ({"figures": [{"kind": "length_curves", "pattern": "L{L}.{x}", "lengths": [8, 16]}]},
     "must contain {L} and no other replacement field"),
    ({"figures": [{"kind": "length_curves", "pattern": "L{L:>99999999}", "lengths": [8, 16]}]},
     "no other replacement field or format"),
    ({"figures": [{"kind": "bands", "x": _T}]}, "(a band's column: aggregate.percentiles"),
    ({"figures": [{"kind": "construction_heatmaps"}]},
     "would draw their untrained initialisation"),
    ({"figures": [{"kind": "curves", "series": "val.acc", "col": "label",
                   "paper_panels": {"S5": "S6"}}]}, "figures.0.paper_panels.S5: 'S5' is no label"),
    ({"figure": {"kind": "heatmaps", "metric": "test.acc", "x": _T, "y": _D,
                 "paper_panels": {"S5": "S6"}}}, "figure.paper_panels.S5: 'S5' is no label"),
    ({"figures": [{"kind": "curves", "series": "val.acc", "paper_panels": {"S4D": "S6"}}]},
     "paper_panels: its keys are values of col"),
    ({"figures": [{"kind": "lines", "ylim": [1, 0]}]}, "the lower end first"),
    ({"figures": [{"kind": "phase", "x": _T, "y": _D, "panels": [{"metric": "test.acc"}],
                   "vmax": 0}]}, "figures.0.vmax"),
    ({"figures": [{"kind": "bound_grid", "x": _T, "y": _D, "solved": 5}]},
     "figures.0.solved: 5 for test.acc, an accuracy"),
    # TeX math matplotlib cannot parse (a ValueError while drawing, after training)
    ({"figures": [{"kind": "bars", "title": "a $\\foo{$ b"}]},
     "figures.0.title: Value error, 'a $\\\\foo{$ b' cannot be drawn: matplotlib reads"),
    ({"sweep": [{"cases": [{"label": "x $\\bar{$", "set": {"model.mixer": "s6"}}]}]},
     "sweep.0.cases.0.label: Value error, 'x $\\\\bar{$' cannot be drawn"),
    # two cells on one learning curve: averaged step by step as if seeds of one cell
    ({"figures": [{"kind": "curves", "series": "val.acc"}]},
     "fall on one curve (no column of the figure tells them apart): their curves would be "
     "averaged"),
    # a label matplotlib leaves out of the legend
    ({"sweep": [{"cases": [{"label": "_S6", "set": {"model.mixer": "s6"}}]}]},
     "a label does not start with '_'"),
], ids=["numeric-text", "phase-text", "region-div0", "collapse-text", "bound-div0", "one-spot",
        "case-beyond", "size-order-typo", "size-order-twice", "bands-reference", "halves",
        "figure-where", "heatmap-axes", "phase-panels", "curves-series", "curves-labels",
        "pattern-field", "pattern-format", "band-columns", "construction",
        "curves-paper-panels", "heatmap-paper-panels", "paper-panels-no-col", "ylim", "vmax",
        "solved-level", "tex-title", "tex-label", "curves-one-curve", "underscore-label"])
def test_figure_and_claim_options_are_checked_against_the_cells(tmp_path, override, needle):
    """Each passed `validate` and then raised after training, drew nothing or drew one cell over
    another with exit 0, or judged a claim on no cell."""
    _assert_refused(_invoke("validate", write_spec(tmp_path, **override)), needle)


def test_a_figure_not_drawn_says_why_and_an_unevaluable_claim_is_a_miss(trained_store,
                                                                         tmp_path):
    """A figure whose `where` matched no cell of this profile was silently absent; a claim whose
    metric expression divides by zero in a cell raised ExprError (a traceback) in `verify`."""
    _copy_trained(trained_store, tmp_path)
    spec = _one_run_spec(
        tmp_path, profiles={"smoke": {}, "quick": {"set": {_D: 16}}, "paper": {}},
        figures=[{"kind": "curves", "series": "val.acc", "where": {_D: 16}, "name": "f"}],
        claims=[{"text": "ratio", "where": {"label": "S6"}, "op": ">=", "value": 0.0,
                 "metric": "test.acc / floor(test.acc / 2)"}])  # 0 for every accuracy
    res = _invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "f-smoke.png not drawn: no finished cell of profile smoke to draw where " \
        "model.d_model=16" in res.output, res.output
    assert "FAIL ratio" in res.output and "diverged" not in res.output, res.output
    assert "(1 where test.acc / floor(test.acc / 2) has no value: " in res.output, res.output
    assert "division by zero" in res.output, res.output


@pytest.mark.parametrize("metric", ["test.loss / 0", "log(test.acc - test.acc)",
                                    "test.acc / (test.loss - test.loss)"])
def test_a_claim_metric_with_no_value_for_any_metrics_is_refused(tmp_path, metric):
    """`test.loss / 0` passed validate and every run then FAILed the claim with the detail
    '1 diverged/NaN', though no run diverged."""
    claim = {"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.0, "metric": metric}
    _assert_refused(_invoke("validate", write_spec(tmp_path, claims=[claim])),
                    f"claims.0.metric: {metric!r} has no value whatever the metrics are")
    given = {"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.0,
             "given": [{"metric": metric, "op": ">=", "value": 0.0}]}
    _assert_refused(_invoke("validate", write_spec(tmp_path, claims=[given])),
                    "claims.0.given.0.metric:", "has no value whatever the metrics are")
    claim["metric"] = "test.acc / floor(test.loss)"  # defined once the loss reaches 1
    assert _invoke("validate", write_spec(tmp_path, claims=[claim])).exit_code == 0


def test_figure_helpers_give_no_value_instead_of_raising():
    """The y range follows the values drawn (a loss on the accuracy range left the panel empty);
    a theory line with no value between grid points is left out; `where` may name case:<i>."""
    import math

    import pandas as pd

    from ssmrepro.plots.bounds import _value
    from ssmrepro.plots.registry import ACCURACY_YLIM, resolve_ylim
    from ssmrepro.report.cells import select

    assert resolve_ylim("auto", [0.0, 0.5, 1.0, math.nan]) == ACCURACY_YLIM
    assert resolve_ylim("auto", [0.2, 3.5]) is None  # a loss: matplotlib's own range
    assert resolve_ylim((0.0, 10.0), [50.0]) == (0.0, 10.0) and resolve_ylim(None, [0.5]) is None
    assert math.isnan(_value("1 / (x - 2)", {"x": 2.0}))
    assert math.isnan(_value("log(x)", {"x": 0.0})) and _value("x * 2", {"x": 2.0}) == 4.0
    cells = pd.DataFrame({"label": ["S6 / a", "S4D / b"], "test.acc": [0.5, 0.6]})
    assert list(select(cells, {"case:1": "b"})["test.acc"]) == [0.6]


# ---------------------------------------------------------------------------------------------
# seventh round of probes (issue 11): seeds that train one run twice, checks only `validate`
# made, benchmark targets refused after the measuring, a mistyped results root


@pytest.mark.parametrize("seeds,needle", [([0, 2**32], "seeds.1"), ([-1], "seeds.0"),
                                          ([2**63 - 1], "seeds.0")])
def test_seeds_beyond_32_bits_are_refused(tmp_path, seeds, needle):
    """Runs are keyed by a seed's low 32 bits: seeds 0 and 2**32 (or -1 and 2**32 - 1) trained
    the same run twice under two run ids, and the mean over "two seeds" was one run's number."""
    from ssmrepro.train import derived_seed

    assert derived_seed(0, 1) == derived_seed(2**32, 1)  # why: the key folds 32 bits
    _assert_refused(_invoke("validate", write_spec(tmp_path, seeds=seeds)), needle,
                    "2**32 - 1")
    assert _invoke("validate", write_spec(tmp_path, seeds=[0, 2**32 - 1])).exit_code == 0


def test_run_plot_and_verify_refuse_what_validate_refuses_of_paper_values(tmp_path):
    """A paper value whose `where` matches two cells (two models under one label) was refused by
    `validate` only: `run` trained it and compared the paper's number with the two cells' mean,
    exit 0."""
    spec = write_spec(tmp_path, sweep=[{"cases": [{"label": "A", "set": {"model.mixer": "s6"}},
                                                  {"label": "A", "set": {"model.mixer": "s4d"}}]}],
                      paper_values=[{"where": {"label": "A"}, "value": 0.5}])
    out = tmp_path / "out"
    for cmd in ("run", "plot", "verify"):
        _assert_refused(_invoke(cmd, spec, "--out", out, "--profile", "smoke"),
                        "paper_values.0.where: matches 2 cells of profile smoke")
    assert not out.exists()
    twice = write_spec(tmp_path, paper_values=[{"where": {"label": "S6"}, "value": 0.5},
                                               {"where": {"label": "S6"}, "value": 0.9}])
    _assert_refused(_invoke("run", twice, "--out", out, "--profile", "smoke"),
                    "the same cell and metric as paper_values.0")
    assert not out.exists()


@pytest.mark.parametrize("target", ["folder", "device", "below_a_file"])
def test_benchmark_json_targets_are_refused_before_measuring(tmp_path, target):
    """`bench scans --json` / `bench step --json` naming a folder, a device or a path below a
    file measured for minutes and only then failed to write."""
    (tmp_path / "f").write_text("x")
    where = {"folder": tmp_path, "device": Path("/dev/null"),
             "below_a_file": tmp_path / "f" / "x.json"}[target]
    for argv in (["scans", "--L", "8", "--kernels", "diag", "--repeats", "1"], ["step"]):
        res = _invoke("bench", *argv, "--json", where)
        _assert_refused(res, "cannot use")
        assert "| torch " not in res.output, res.output  # nothing was measured


def test_figures_refuses_a_results_root_that_is_not_a_folder(tmp_path):
    """`figures --out typo` created the folder and wrote a front page of no results, exit 0."""
    _assert_refused(_invoke("figures", "--out", tmp_path / "typo"), "no such folder")
    _assert_refused(_invoke("figures", "--no-rebuild", "--out", tmp_path / "typo"), "no such folder")
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("constraint,needle", [
    ("model.d_model - 4", "not true or false"),  # kept every point but d_model = 4, silently
    ("(model.d_model - 100) ** 0.5 == 0", "a negative number to a fractional power"),
    ("(model.d_model - 100) ** 0.5", "a negative number to a fractional power"),  # complex: true
])
def test_a_constraint_is_a_condition_and_powers_stay_real(tmp_path, constraint, needle):
    _assert_refused(_invoke("validate", write_spec(tmp_path, constraints=[constraint])), needle)
    assert _invoke("validate", write_spec(tmp_path, constraints=["model.d_model >= 4"])
                   ).exit_code == 0


def test_a_folder_that_refuses_new_files_is_named_not_a_temp_file(tmp_path, monkeypatch):
    """A read-only folder (or /proc) made the message name the temp file that could not be
    created (`cannot use .../.x.csv.host.123.abc.tmp`), a file the user never asked for."""
    import errno
    import tempfile

    def refuse(dir, prefix, suffix):  # what mkstemp raises in a folder without write access
        raise PermissionError(errno.EACCES, "Permission denied", f"{dir}/{prefix}abc{suffix}")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    (tmp_path / "results").mkdir()
    res = _invoke("export", "--out", tmp_path / "results", "--file", tmp_path / "x.csv")
    _assert_refused(res, f"cannot use {tmp_path / 'x.csv'}: permission denied")
    assert ".tmp" not in res.output, res.output


@pytest.mark.parametrize("sets", [["train.schedule.kind=cosine", "train.schedule={kind: linear}"],
                                  ["train.schedule={kind: linear}", "train.schedule.kind=cosine"],
                                  ["task.T=9", "task={name: keep_nth, n: 2, T: 8, vocab: 8}"]])
def test_set_keys_that_overlap_are_refused(tmp_path, sets):
    """`--set train.schedule.kind=cosine --set 'train.schedule={kind: linear}'`: the later one
    replaced the other quietly (linear, or cosine with the order swapped); the same key twice
    was already refused."""
    args = [a for s in sets for a in ("--set", s)]
    _assert_refused(_invoke("show", write_spec(tmp_path), "--profile", "smoke", *args),
                    "overlaps --set")


@pytest.mark.parametrize("argv,needle", [
    (["listops", "--n", "100000000"], "in memory at once"),  # 10^8 trees of > 500 tokens
    (["pathfinder", "--n", "100000000", "--res", "256"], "on disk"),  # 6.5 TB of images
    (["pathfinder", "--n", "10000000", "--res", "256", "--shard-size", "10000000"],
     "in memory at once"),  # one shard buffered: 655 GB, twice
])
def test_generated_data_that_cannot_fit_is_refused_before_generating(tmp_path, monkeypatch,
                                                                     argv, needle):
    """`data generate` of a size the machine cannot hold generated for hours and then died of
    memory (killed, no message) or stopped at a full disk."""
    import shutil as sh
    from collections import namedtuple

    import ssmrepro.data.listops as lo
    import ssmrepro.data.pathfinder as pf
    import ssmrepro.train as tr

    def generated(*a, **k):
        raise AssertionError("generating started")

    monkeypatch.setattr(lo, "generate_listops", generated)
    monkeypatch.setattr(pf, "write_pathfinder", generated)
    monkeypatch.setattr(tr, "available_memory", lambda device: 32 << 30)  # 32 GiB here
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(sh, "disk_usage", lambda p: usage(1 << 41, 0, 1 << 40))  # 1 TiB free
    res = _invoke("data", "generate", *argv, "--dir", tmp_path / "data", "--workers", "1")
    _assert_refused(res, needle, "ask for fewer")
    assert not (tmp_path / "data" / "generated").exists()


@pytest.mark.parametrize("name", ["results-smoke.csv", "figure-smoke.png", "report-smoke.md",
                                  "curves-smoke.csv", "summary-smoke.csv"])
def test_an_output_of_the_wrong_kind_is_refused_before_training(tmp_path, name):
    """A folder where `run` writes a table, figure or report failed after the whole sweep had
    trained (the README said: before any training)."""
    spec = write_spec(tmp_path, seeds=[0])
    store = tmp_path / "out" / "tests" / "t-spec"
    (store / name).mkdir(parents=True)
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--workers", "1")
    _assert_refused(res, f"{store / name}: a folder where a file belongs")
    assert not list(store.glob("runs/*.json"))  # nothing trained


def test_a_figure_name_may_not_take_another_profiles_figure_file(tmp_path):
    """A figure named `figure-smoke` wrote figure-smoke.png in the default profile: the file of
    the first figure of profile smoke, replaced by another plot without a word."""
    figs = [{"kind": "bars", "metric": "test.acc", "x": "label"},
            {"kind": "bars", "metric": "test.loss", "x": "label", "name": "figure-smoke"}]
    spec = write_spec(tmp_path, figure=None, figures=figs)
    _assert_refused(_invoke("validate", spec), "figures.1.name", "figure-smoke.png",
                    "figures.0 in profile smoke")
    _assert_refused(_invoke("run", spec, "--out", tmp_path / "o", "--profile", "quick"),
                    "figures.1.name")
    figs[1]["name"] = "loss"
    assert _invoke("validate", write_spec(tmp_path, figure=None, figures=figs)).exit_code == 0


# ---------------------------------------------------------------------------------------------
# eighth round of probes (issue 11)


@pytest.mark.parametrize("args", [["plot"], ["verify"], ["verify", "--json"], ["show"],
                                  ["show", "--json"], ["run", "--dry-run", "--no-estimate"]])
def test_a_record_quarantined_outside_run_is_said(tmp_path, args):
    """`plot`, `verify`, `show` and `run --dry-run` moved a damaged record to runs/quarantine/
    without a word (only `run` printed the store's warnings): the table was a run short, the
    command exited 0 and nothing said why."""
    import json

    spec = _one_run_spec(tmp_path)
    out = tmp_path / "out"
    shown = _invoke("show", spec, "--out", out, "--profile", "smoke", "--json")
    run_id = json.loads(shown.stdout)["runs"][0]["run_id"]
    record = out / "tests" / "t-spec" / "runs" / f"{run_id}.json"
    record.parent.mkdir(parents=True)
    record.write_text("garbage")
    res = _invoke(args[0], spec, *args[1:], "--out", out, "--profile", "smoke")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert f"run record {record.name} quarantined" in res.output, res.output
    assert not record.exists() and list((record.parent / "quarantine").iterdir())


@pytest.mark.parametrize("target", ["/proc/self/fd/1", "kept.csv"])
@pytest.mark.parametrize("cmd", ["export", "scans"])
def test_an_output_file_that_is_a_link_is_refused_not_replaced(tmp_path, target, cmd):
    """`export --file /dev/stdout` replaced the system's /dev/stdout link (-> /proc/self/fd/1)
    with a regular file holding the table (every later `> /dev/stdout` of the machine wrote to
    that file); a --file (or `bench scans --json`) that is a link to a file replaced the link,
    not the file. Probed here with a link of our own, never /dev/stdout."""
    (tmp_path / "kept.csv").write_text("kept")
    link = tmp_path / "out.csv"
    link.symlink_to(target if target.startswith("/") else tmp_path / target)
    (tmp_path / "results").mkdir()
    if cmd == "export":
        res = _invoke("export", "--out", tmp_path / "results", "--file", link)
    else:
        res = _invoke("bench", "scans", "--json", link, "--L", "2", "--kernels", "diag",
                      "--batch", "1", "--d", "1", "--n", "1", "--repeats", "1", "--warmup", "0")
    _assert_refused(res, str(link), "a symbolic link")
    assert link.is_symlink() and (tmp_path / "kept.csv").read_text() == "kept"


@pytest.mark.parametrize("name,fmt", [("x.parquet", None), ("x.PARQUET", "csv"),
                                      ("x.csv", "parquet")])
def test_export_refuses_a_file_whose_suffix_is_another_format(tmp_path, name, fmt):
    """`export --file x.parquet` (the format left at csv) wrote CSV text into x.parquet, exit 0:
    a file no parquet reader opens."""
    (tmp_path / "results").mkdir()
    argv = ["export", "--out", tmp_path / "results", "--file", tmp_path / name]
    res = _invoke(*argv, *(["--format", fmt] if fmt else []))
    _assert_refused(res, f"--file {tmp_path / name}: its suffix says")
    assert not (tmp_path / name).exists()
    res = _invoke("export", "--out", tmp_path / "results", "--file", tmp_path / "x.tsv")
    assert res.exit_code == 0, res.output  # a suffix of no format is the user's choice


@pytest.mark.parametrize("override,key", [
    ({"paper_values": [{"where": {"label": "S6"}, "metric": "test.acc", "value": 0.9,
                        "tol": 5}]}, "paper_values.0.tol"),
    ({"claims": [{"text": "x", "check": "monotone", "metric": "test.acc",
                  "along": "model.d_model", "tol": 10}]}, "claims.0.tol"),
    ({"claims": [{"text": "x", "check": "spread", "metric": "val.acc", "group_by": ["label"],
                  "tol": 1}]}, "claims.0.tol"),
    ({"claims": [{"text": "x", "check": "collapse", "metric": "test.acc",
                  "by": "model.d_model", "tol": 2}]}, "claims.0.tol"),
])
def test_a_tolerance_that_admits_any_accuracy_is_refused(tmp_path, override, key):
    """A tolerance of 1 or more on an accuracy (5 percentage points written as 5) admits every
    value: the paper value was 'compared within tolerance' and the claim PASSed whatever the
    runs measured."""
    spec = write_spec(tmp_path, **override)
    _assert_refused(_invoke("validate", spec), key, "admits any accuracy")
    res = _invoke("plot", spec, "--out", tmp_path / "o", "--profile", "smoke")
    _assert_refused(res, key)
    assert not (tmp_path / "o").exists()


def test_a_long_evaluation_set_counts_by_its_length(tmp_path):
    """A named evaluation set at 50,000x the training length was counted as samples of the
    training length: `run --dry-run` said 0 s for runs that evaluated for minutes (hours with a
    larger test_size), and the bound on evaluation work never refused it."""
    from ssmrepro.engine.plan import eval_steps, run_eval_scale
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    spec = _one_run_spec(tmp_path)
    run = expand(load_spec(spec), "smoke", overrides={"train.evals": {"long": {"T": 400000}}})[0]
    assert run_eval_scale(run) == {"long": 50000.0}
    assert eval_steps(run.train, run_eval_scale(run)) > 1000 * eval_steps(run.train)
    res = _invoke("run", spec, "--out", tmp_path / "o", "--profile", "smoke", "--dry-run",
                  "--no-estimate", "--set", "train.evals={long: {T: 400000}}",
                  "--set", "train.test_size=10000")
    _assert_refused(res, "evaluation would cost about", "long 50,000x")
    res = _invoke("validate", spec, "--set", "train.evals={long: {T: 16}}")
    assert res.exit_code == 0, res.output  # twice the length: well within the bound


def test_a_cache_entry_of_another_preprocessing_under_this_key_is_rebuilt(tmp_path):
    """The entry of ListOps max_len 8 copied under the key of max_len 64 (another entry's
    arrays, a restored backup) was loaded as it was: runs of max_len 64 trained on sequences cut
    to 8 without a word."""
    import numpy as np

    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    short = load_lra("listops", "train", root, max_len=8)
    full = load_lra("listops", "train", root, max_len=64)
    x = np.array(full.x)
    assert x.shape[1] > 8 and short.cache_path != full.cache_path
    shutil.rmtree(full.cache_path)
    shutil.copytree(short.cache_path, full.cache_path)
    with pytest.warns(UserWarning, match="damaged cache entry .*max_len"):
        again = load_lra("listops", "train", root, max_len=64)
    assert again.x.shape == x.shape and (np.asarray(again.x) == x).all()


@pytest.mark.parametrize("damage", ["float_tokens", "vocab_not_a_list", "unknown_kind",
                                    "the_other_kind",
                                    "inputs_1d", "labels_2d", "negative_lengths",
                                    "lengths_beyond_the_inputs"])
def test_cache_entries_of_the_wrong_kind_or_shape_are_rebuilt(tmp_path, damage):
    """A cache entry whose token ids were floats (1.5 was cut to 1), whose meta named no
    vocabulary list (ids out of range went unchecked), an unknown input kind or the other kind
    (ListOps token ids read as pixels), whose inputs
    or labels had the wrong number of dimensions, or whose lengths were negative or beyond the
    inputs' positions, was used as it was."""
    import json

    import numpy as np

    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    good = load_lra("listops", "train", root)
    x, labels = np.array(good.x), np.array(good.labels)
    meta_file = good.cache_path / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta.pop("digest")  # as written before entries kept one: the checks of the contents
    if damage == "float_tokens":
        np.save(good.cache_path / "train.x.npy", x.astype(np.float64) + 0.5)
    elif damage == "vocab_not_a_list":
        meta_file.write_text(json.dumps({**meta, "vocab": "abc"}))
    elif damage == "unknown_kind":
        meta_file.write_text(json.dumps({**meta, "kind": "foo"}))
    elif damage == "the_other_kind":  # ListOps token ids read as pixel values
        meta_file.write_text(json.dumps({**meta, "kind": "pixels"}))
    elif damage == "inputs_1d":
        np.save(good.cache_path / "train.x.npy", x.reshape(-1)[: len(labels)])
    elif damage == "negative_lengths":  # a batch cut to all but its last 5 tokens, all masked
        np.save(good.cache_path / "train.lengths.npy", np.full(len(labels), -5))
    elif damage == "lengths_beyond_the_inputs":  # padding read as tokens
        np.save(good.cache_path / "train.lengths.npy", np.full(len(labels), 10**9))
    else:
        np.save(good.cache_path / "train.labels.npy", np.stack([labels, labels], 1))
    with pytest.warns(UserWarning, match="damaged cache entry"):
        again = load_lra("listops", "train", root)
    assert again.x.shape == x.shape and (np.asarray(again.x) == x).all()
    assert (np.asarray(again.labels) == labels).all()


# ---------------------------------------------------------------------------------------------
# ninth round of probes (issue 11): commands that did nothing with exit 0, options a workload
# ignores, errors known before writing, labels a table read back as missing, paper values of
# unfinished cells, conditions no accuracy meets


@pytest.mark.parametrize("root", ["nothing", "a-file", "empty"])
def test_validate_all_and_export_refuse_a_project_without_specs(tmp_path, root):
    """`validate --all` (and `export`) with SSMREPRO_ROOT at a folder of no specs validated
    nothing and exited 0 (`list` already refused it)."""
    path = tmp_path / root
    if root == "a-file":
        path.write_text("x")
    elif root == "empty":
        (path / "experiments").mkdir(parents=True)
    env = {"SSMREPRO_ROOT": str(path)}
    _assert_refused(_invoke("validate", "--all", env=env), "no experiment specs here")
    (tmp_path / "results").mkdir()
    res = _invoke("export", "--out", tmp_path / "results", "--file", tmp_path / "x.csv", env=env)
    _assert_refused(res, "no experiment specs here")
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("args,needle", [
    (["scans", "--out", "{tmp}"], "--out: not an option of `bench scans`"),
    (["scans", "--device", "cpu", "--seconds", "9"], "--device, --seconds: not an option"),
    (["step", "--packs", "4"], "--packs: not an option of `bench step`"),
    (["roofline", "--out", "{tmp}", "--packs", "4"], "--packs: not an option of `bench roofline`"),
    (["roofline", "--out", "{tmp}", "--device", "cpu"], "which measures nothing"),
    (["roofline", "--out", "{tmp}", "extra"], "unexpected arguments 'extra'"),
])
def test_bench_options_the_workload_ignores_are_refused(tmp_path, monkeypatch, args, needle):
    """`bench scans --out DIR` measured and wrote nothing to DIR (scans writes --json FILE);
    `bench roofline --packs 4` drew the records as if no option had been given: exit 0 both."""
    import ssmrepro.bench.roofline as roofline
    import ssmrepro.bench.scans as scans
    import ssmrepro.bench.step as step

    def measured(*a, **k):
        raise AssertionError("it ran")

    for mod, fn in ((scans, "main"), (step, "main"), (roofline, "write_roofline")):
        monkeypatch.setattr(mod, fn, measured)
    _assert_refused(_invoke("bench", *[str(tmp_path) if a == "{tmp}" else a for a in args]),
                    needle)


def test_bench_packs_given_twice_are_refused(tmp_path, monkeypatch):
    """`bench keep-nth-d8 --packs 1,1,1` measured pack 1 and wrote it as three identical rows of
    the CSV and JSON records (exit 0)."""
    import ssmrepro.bench.packs as packs

    def measured(*a, **k):
        raise AssertionError("it ran")

    monkeypatch.setattr(packs, "run_bench", measured)
    res = _invoke("bench", "keep-nth-d8", "--packs", "1,2,1", "--out", tmp_path / "b")
    _assert_refused(res, "--packs '1,2,1': pack size 1 given twice")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("args,needle", [
    (["scans", "--L", "2", "2"], "--L: 2 given twice"),
    (["scans", "--kernels", "diag", "diag"], "--kernels: diag given twice"),
    (["scans", "--variants", "blocked", "chunked", "blocked"], "--variants: blocked given twice"),
    (["step", "--E", "1", "1"], "--E: 1 given twice"),
    (["step", "--micro", "8", "8"], "--micro: 8 given twice"),
    (["step", "--workloads", "mamba-L256", "mamba-L256"], "--workloads: mamba-L256 given twice"),
])
def test_bench_scans_and_step_values_given_twice_are_refused(tmp_path, capsys, args, needle):
    """`bench scans --L 2 2` timed the case twice and wrote two rows of one identity to its
    table and --json record (exit 0); likewise `bench step --E 1 1`."""
    import ssmrepro.bench.scans as scans
    import ssmrepro.bench.step as step

    main = {"scans": scans.main, "step": step.main}[args[0]]
    with pytest.raises(SystemExit) as err:
        main([*args[1:], "--json", str(tmp_path / "r.json"), "--repeats", "1", "--warmup", "0"])
    assert err.value.code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("url", ["ftp://host/x.gz", "relative/x.gz", "", "http:///x.gz"])
def test_a_download_url_this_command_cannot_fetch_is_refused_before_writing(tmp_path, url):
    """An ftp:// (or scheme-less, or host-less) URL failed with exit 1 ('re-run') after making
    <dir>/downloads."""
    res = _invoke("data", "download", "lra", "--url", url, "--dir", tmp_path / "d",
                  "--no-progress")
    _assert_refused(res, "not a URL this command downloads")
    assert not (tmp_path / "d").exists()


def test_a_listops_window_no_tree_falls_in_is_bad_input(tmp_path):
    """Options no tree can meet exited 1 (some runs failed: re-run the same command), which
    could never help."""
    res = _invoke("data", "generate", "listops", "--n", "30", "--min-length", "1",
                  "--max-length", "3", "--out", tmp_path / "g", "--workers", "1")
    _assert_refused(res, "no tree has 1 < length < 3")
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("label", ["NA", "None", "null", "nan"])
def test_labels_that_pandas_reads_as_missing_survive_the_committed_tables(tmp_path, label):
    """A case label 'None' or 'NA' came back from results.csv (and curves.csv) as '' / NaN: in a
    fresh clone (no run records) its claims were MISSING and its paper values 'not run'."""
    from ssmrepro.store import read_results, read_table

    table = tmp_path / "results.csv"
    table.write_text(f"run_id,label,seed,metric.test.acc\nabc,{label},0,0.5\ndef,,1,0.25\n")
    assert read_results(table)["label"].tolist() == [label, ""]
    curves = tmp_path / "curves.csv"
    curves.write_text(f"label,step,val.acc\n{label},0,0.5\n")
    df = read_table(curves, ("step",), numeric=("step", "val.acc"))
    assert df["label"].tolist() == [label] and df["val.acc"].tolist() == [0.5]


def test_labels_that_pandas_reads_as_missing_keep_their_verdicts(trained_store, tmp_path):
    spec, store = _copy_trained(trained_store, tmp_path)
    na = [{"cases": [{"label": "NA", "set": {"model.mixer": "s6"}}]}]
    spec = _one_run_spec(tmp_path, sweep=na, paper_values=[{"where": {"label": "NA"},
                                                            "value": 0.2, "tol": 0.15}],
                         claims=[{"text": "t", "where": {"label": "NA"}, "op": ">",
                                  "value": 0.0}])
    out = tmp_path / "out"
    assert _invoke("plot", spec, "--out", out, "--profile", "smoke").exit_code == 0
    shutil.rmtree(store / "runs")  # a fresh clone: the committed table only
    res = _invoke("verify", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert "1 PASS" in res.output and "1 of 1 compared" in res.output, res.output


def test_a_paper_value_of_an_unfinished_cell_is_not_compared(trained_store, tmp_path):
    """With 1 of 2 seeds finished the claim on a cell was MISSING, but its paper value was
    'compared within tolerance' (a match on the mean of the seeds so far), the report silent
    about it."""
    _, store = _copy_trained(trained_store, tmp_path)
    spec = _one_run_spec(tmp_path, seeds=[0, 1],
                         paper_values=[{"where": {"label": "S6"}, "value": 0.2, "tol": 0.15}])
    res = _invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())  # the console wraps long lines
    assert "0 of 0 compared within tolerance; 1 cells not finished, not compared" in said, said
    report = (store / "report-smoke.md").read_text()
    assert "(1 of 2 runs finished) | unfinished |" in report, report
    spec = _one_run_spec(tmp_path, paper_values=[{"where": {"label": "S6"}, "value": 0.2,
                                                  "tol": 0.15}])
    res = _invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert "1 of 1 compared within tolerance" in res.output, res.output  # finished: compared


@pytest.mark.parametrize("claim,key", [
    ({"text": "t", "where": {"label": "S6"}, "op": ">", "value": 1.0}, "claims.0.value"),
    ({"text": "t", "where": {"label": "S6"}, "op": "<", "value": 0.0}, "claims.0.value"),
    ({"check": "any_threshold", "text": "t", "where": {"label": "S6"}, "op": ">", "value": 1},
     "claims.0.value"),
    ({"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.5,
      "given": [{"metric": "val.acc", "op": ">", "value": 1}]}, "claims.0.given.0.value"),
])
def test_a_condition_no_accuracy_meets_is_refused(tmp_path, claim, key):
    """`test.acc > 1` (or `< 0`) is inside [0, 1] at its bound but never holds: the claim
    FAILed (a precondition: stayed MISSING) whatever the runs measured."""
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, claims=[claim])), key,
                    "never holds")
    strict = claim["given"][0] if "given" in claim else claim
    strict["op"] += "="  # `>= 1` and `<= 0` can hold
    assert _invoke("validate", _one_run_spec(tmp_path, claims=[claim])).exit_code == 0


_TWO = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                   {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]


@pytest.mark.parametrize("claim,key,fails", [
    ({"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.0}, "claims.0.value",
     {"op": ">"}),
    ({"text": "t", "where": {"label": "S6"}, "op": "<=", "value": 1.0}, "claims.0.value",
     {"op": "<"}),
    ({"text": "t", "where": {"label": "S6"}, "metric": "test.loss", "op": ">=", "value": 0},
     "claims.0.value", {"value": 0.5}),
    ({"check": "any_threshold", "text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0},
     "claims.0.value", {"value": 0.2}),
    ({"check": "region", "text": "t", "region": "model.d_model > 4", "op": "<=", "value": 1},
     "claims.0.value", {"value": 0.9}),
    ({"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.5,
      "given": [{"metric": "val.acc", "op": ">=", "value": 0}]}, "claims.0.given.0.value",
     {"given": [{"metric": "val.acc", "op": ">=", "value": 0.1}]}),
    ({"check": "ordering", "text": "t", "a": {"label": "S6"}, "b": {"label": "S4D"}, "match": [],
      "margin": -1}, "claims.0.margin", {"margin": -0.5}),
    ({"check": "ordering", "text": "t", "a": {"label": "S6"}, "b": {"label": "S4D"}, "match": [],
      "factor": 0.5, "margin": -0.5}, "claims.0.margin", {"margin": -0.4}),
])
def test_a_claim_every_run_meets_is_refused(tmp_path, claim, key, fails):
    """`test.acc >= 0` (or `<= 1`, `test.loss >= 0`, an ordering of accuracies with margin
    <= -factor) was accepted: it PASSed whatever the runs measured (only a diverged run missed
    it); a precondition of that kind filtered nothing."""
    spec = _one_run_spec(tmp_path, sweep=_TWO, claims=[claim])
    res = _invoke("validate", spec)
    _assert_refused(res, key)
    assert "cannot fail" in res.output or "excludes no cell" in res.output, res.output
    ok = _one_run_spec(tmp_path, sweep=_TWO, claims=[{**claim, **fails}])
    res = _invoke("validate", ok)
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("claim,needle", [
    ({"metric": "test.acc.p50", "op": ">", "value": 1}, "never holds"),
    ({"metric": "test.acc.p50", "op": ">=", "value": 95}, "an accuracy outside [0, 1]"),
    ({"metric": "test.acc.p50", "op": ">=", "value": 0}, "cannot fail"),
    ({"metric": "test.acc.std", "op": "<", "value": 0}, "a standard deviation is never below 0"),
    ({"metric": "test.loss.p50", "op": ">=", "value": 0}, "cannot fail"),
    ({"metric": "test.acc", "op": ">", "value": 0.1,
      "given": [{"metric": "2 * test.acc", "op": ">=", "value": 1.5}]}, None),
])
def test_spread_columns_are_range_checked_and_expressions_are_not(tmp_path, claim, needle):
    """`test.acc.p50 > 1` (a percentile of accuracies) was accepted: spread columns were not
    range-checked; a precondition `2 * test.acc >= 1.5` was refused as 'an accuracy outside
    [0, 1]' (an expression read as an accuracy by the name it ends with)."""
    spec = _one_run_spec(tmp_path, claims=[{"text": "t", "where": {"label": "S6"}, **claim}],
                         aggregate={"metrics": ["test.acc", "test.loss"], "percentiles": [50]})
    res = _invoke("validate", spec)
    if needle is None:
        assert res.exit_code == 0, res.output
    else:
        _assert_refused(res, "claims.0.value:", needle)


@pytest.mark.parametrize("claim,needle", [
    ({"check": "monotone", "text": "t", "along": "label", "group_by": [],
      "allowed_violations": 1}, "allowed_violations 1 >= the 1 steps along label"),
    ({"check": "spread", "text": "t", "group_by": [], "tol": 0.1, "allowed_violations": 3},
     "allowed_violations 3 >= the 1 groups"),
    ({"check": "region", "text": "t", "region": "model.d_model > 4", "op": ">", "value": 0.5,
      "allowed_violations": 2}, "allowed_violations 2 >= the 2 cells inside the region"),
    ({"check": "size_order", "text": "t", "labels": ["S6", "S4D"], "group_by": ["task.T"],
      "threshold": 0.0}, "claims.0.threshold: test.acc >= 0 holds for every run"),
])
def test_a_claim_whose_allowance_covers_every_comparison_is_refused(tmp_path, claim, needle):
    """A monotone, spread or region claim allowed as many violations as it makes comparisons in
    every profile PASSed whatever was measured; a size_order threshold of 0 is reached by every
    cell (the order then decided by nothing the runs learned)."""
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=_TWO, claims=[claim]))
    _assert_refused(res, needle)
    fails = {**claim, "allowed_violations": 0} if "allowed_violations" in claim else {
        **claim, "threshold": 0.5}
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=_TWO, claims=[fails]))
    assert res.exit_code == 0, res.output
    if claim["check"] == "monotone":  # a profile whose cells can fail it: judged there
        profiles = {"smoke": {}, "quick": {}, "paper": {"set": {}, "sweep": [
            {"cases": [{"label": lab, "set": {"model.mixer": "s6", "model.d_model": d}}
                       for lab, d in (("A", 8), ("B", 16), ("C", 32))]}]}}
        res = _invoke("validate", _one_run_spec(tmp_path, sweep=_TWO, claims=[claim],
                                                profiles=profiles))
        assert res.exit_code == 0, res.output


@pytest.mark.parametrize("claim,needle", [
    ({"check": "monotone", "text": "t", "along": "label"}, "claims.0.along: no group of cells"),
    ({"check": "spread", "text": "t", "group_by": ["label"], "tol": 0.1},
     "claims.0.group_by: no group of cells equal on label has two cells"),
])
def test_a_monotone_or_spread_claim_no_group_can_judge_is_refused(tmp_path, claim, needle):
    """`monotone` along label with the default grouping (every other cell key: the mixer, which
    each label sets) or `spread` grouped by label had no group of two cells in any profile:
    MISSING after every run."""
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=_TWO, claims=[claim]))
    _assert_refused(res, needle, "it stays MISSING in every profile")
    fixed = {**claim, "group_by": []}
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=_TWO, claims=[fixed]))
    assert res.exit_code == 0, res.output


def test_each_run_of_a_pack_keeps_its_own_time_limit(tmp_path):
    """time_limit_s may differ within a pack (a member field), but the pack stopped every member
    at the shortest: a run with 1,000 s packed with one of 0.0001 s was recorded as stopped by
    its 'time_limit' at step 0 of 40 (a partial run under its own config)."""
    import json

    spec = _one_run_spec(tmp_path, sweep=[{"grid": {"train.time_limit_s": [0.0001, 1000]}}])
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0 and "in 1 packs" in " ".join(res.output.split()), res.output
    recs = {r["config"]["train"]["time_limit_s"]: r for r in (
        json.loads(p.read_text()) for p in (out / "tests" / "t-spec" / "runs").glob("*.json"))}
    assert recs[1000]["stop_reason"] == "max_steps" and recs[1000]["stop_step"] == 40
    assert recs[0.0001]["stop_reason"] == "time_limit"


@pytest.mark.parametrize("value,tol,ok", [(0.5, 0.5, False), (0.9, 0.95, False),
                                          (0.5, 0.45, True), (0.2, 0.15, True)])
def test_a_paper_value_whose_tolerance_covers_every_accuracy_is_refused(tmp_path, value, tol,
                                                                         ok):
    """A paper value 0.5 ± 0.5 (a tolerance below 1, so not refused as 'admits any accuracy')
    matched whatever accuracy the runs measured."""
    spec = _one_run_spec(tmp_path, paper_values=[{"where": {"label": "S6"}, "value": value,
                                                  "tol": tol}])
    res = _invoke("validate", spec)
    if ok:
        assert res.exit_code == 0, res.output
    else:
        _assert_refused(res, "paper_values.0.tol", "covers every accuracy")


def test_a_size_no_machine_holds_does_not_name_a_memory_of_billions_of_gb(tmp_path):
    """`validate --set task.T=9e18` said 'only 4,611,686,018.4 GB is available' (its no-limit
    bound printed as this machine's memory)."""
    res = _invoke("validate", _one_run_spec(tmp_path), "--set", "task.T=9000000000000000000")
    _assert_refused(res, "no machine has that much")
    assert "4,611,686,018" not in res.output


@pytest.mark.parametrize("where,key,value", [
    ("metrics", "test.loss", -5.0), ("metrics", "train.avg_loss", -0.5),
    ("metrics", "val.loss", float("inf")), ("history", "val.loss", -1.0),
])
def test_a_record_with_an_impossible_loss_is_quarantined(trained_store, tmp_path, where, key,
                                                         value):
    """A hand-edited record with a negative (or infinite) loss was accepted: losses are
    cross-entropies or squared errors, never below 0, and are range-checked like accuracies."""
    import json

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    if where == "metrics":
        rec["metrics"][key] = value
    else:
        rec["history"][0][key] = value
    path.write_text(json.dumps(rec))
    res = _invoke("show", spec, "--out", tmp_path / "out")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in res.output and key in res.output, res.output
    assert not path.exists()


def test_a_claim_threshold_no_loss_meets_is_refused(tmp_path):
    for op, value in (("<", 0.0), ("<=", -1.0)):
        claim = {"text": "t", "metric": "test.loss", "where": {"label": "S6"}, "op": op,
                 "value": value}
        res = _invoke("validate", _one_run_spec(tmp_path, claims=[claim]))
        _assert_refused(res, "claims.0.value")
    claim["op"], claim["value"] = "<=", 0.0  # a perfect fit: can hold
    assert _invoke("validate", _one_run_spec(tmp_path, claims=[claim])).exit_code == 0


def _two_width_spec(tmp_path, claim, **kw):
    """Two labels x two widths in the default profile, one width in smoke."""
    sweep = [{"grid": {"model.d_model": [8, 16]}},
             {"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]
    return write_spec(tmp_path, sweep=sweep, seeds=[0], claims=[claim],
                      profiles={"smoke": {"set": {"model.d_model": 8}, "sweep": [sweep[1]]},
                                "quick": {}, "paper": {}}, **kw)


@pytest.mark.parametrize("claim,needle", [
    ({"check": "ordering", "text": "t", "a": {"label": "S6"}, "b": {"label": "S6"}},
     "claims.0.b: a and b select the same cells"),
    ({"check": "ordering", "text": "t", "a": {"label": "S6"}, "b": {"label": "S4D"},
      "match": ["model.d_model", "model.mixer"]}, "claims.0.match: no a-cell of profile smoke"),
])
def test_an_ordering_claim_without_a_pair_of_cells_is_refused(tmp_path, claim, needle):
    """`a` and `b` selecting the same cells passed validate and stayed MISSING after every run
    (a cell is never compared with itself)."""
    _assert_refused(_invoke("validate", _two_width_spec(tmp_path, claim)), "claims.0.", needle)
    claim = {**claim, "b": {"label": "S4D"}, "match": ["model.d_model"]}
    assert _invoke("validate", _two_width_spec(tmp_path, claim)).exit_code == 0


def test_any_threshold_needing_more_cells_than_a_profile_has_is_refused(tmp_path):
    """min_cells 2 on a `where` that matches one cell of smoke FAILed there whatever was
    measured; validate names the profile."""
    claim = {"check": "any_threshold", "text": "t", "where": {"label": "S6"}, "op": ">=",
             "value": 0.5, "min_cells": 2}
    res = _invoke("validate", _two_width_spec(tmp_path, claim))
    _assert_refused(res, "claims.0.min_cells", "matches 1 cell of profile smoke")
    assert "profile quick" not in res.output  # 2 widths there: it can hold
    res = _invoke("run", _two_width_spec(tmp_path, claim), "--profile", "smoke", "--out",
                  tmp_path / "out", "--dry-run", "--no-estimate")
    _assert_refused(res, "claims.0.min_cells")
    claim["min_cells"] = 1
    assert _invoke("validate", _two_width_spec(tmp_path, claim)).exit_code == 0


def test_max_runs_that_leaves_runs_untrained_says_how_to_continue(tmp_path):
    """`run --max-runs 1` of a two-run profile exited 0 saying only 'trained 1 runs': nothing
    told that the profile was unfinished (its claims MISSING) or how to go on."""
    spec = _one_run_spec(tmp_path, seeds=[0, 1])
    out = tmp_path / "o ut"
    args = ("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate", "--no-plot",
            "--workers", "1")
    res = _invoke(*args, "--max-runs", "1")
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "1 of 2 runs not trained yet (--max-runs 1): continue with ssmrepro run" in said, said
    assert f"--out '{out}'" in said and "--profile smoke" in said, said
    res = _invoke(*args, "--max-runs", "5")  # the rest: nothing left, nothing said
    assert res.exit_code == 0 and "not trained yet" not in res.output, res.output


@pytest.mark.parametrize("target", ["tests/t-spec/results-smoke.csv", "README.md", "new.csv"])
def test_export_refuses_a_file_inside_the_results_it_exports(trained_store, tmp_path, target):
    """`export --out results -f results/<paper>/<id>/results.csv` replaced that committed table
    with the export (the next `plot` refused it as a results table); `-f results/README.md`
    replaced the front page."""
    spec, store = _copy_trained(trained_store, tmp_path)
    out = tmp_path / "out"
    dest = out / target
    before = dest.read_bytes() if dest.exists() else None
    res = _invoke("export", "--out", out, "--file", dest,
                  env={"SSMREPRO_ROOT": str(_project(tmp_path))})
    _assert_refused(res, "inside the results root it exports")
    assert (dest.read_bytes() if dest.exists() else None) == before


@pytest.mark.parametrize("args", [["list"], ["show", "keep-nth"],
                                  ["run", "keep-nth", "--profile", "smoke", "--dry-run",
                                   "--no-estimate"]])
def test_a_results_folder_that_is_a_link_loop_is_one_message(tmp_path, args):
    """`list --out L` (L a link to itself) printed a warning for every record of every spec
    ('unreadable (OSError) (cannot quarantine it: Too many levels of symbolic links)') and
    exited 0; `plot` already refused it."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    res = _invoke(*args, "--out", loop)
    _assert_refused(res, "a symbolic link loop")
    assert "warning" not in res.output


@pytest.mark.parametrize("override,key", [
    ({"figure": {"kind": "lines", "metric": "test.acc", "x": "seed"}}, "figure:"),
    ({"figure": {"kind": "lines", "metric": "test.acc", "x": "label", "hue": "seed"}},
     "figure:"),
    ({"claims": [{"text": "t", "where": {"seed": 1}, "op": ">", "value": 0.0}]}, "claims.0:"),
    ({"paper_values": [{"where": {"label": "S6", "seed": 1}, "value": 0.5, "tol": 0.1}]},
     "paper_values.0.where.seed:"),
])
def test_seed_is_not_a_column_of_a_cell(tmp_path, override, key):
    """A cell is the aggregate of its seeds and kept the first seed's value: `lines` with
    x: seed drew the mean of 2 seeds at 'seed 0', and a claim on seed 1 stayed MISSING (a paper
    value 'not run') though both seeds had run; validate accepted them."""
    res = _invoke("validate", _one_run_spec(tmp_path, seeds=[0, 1], **override))
    _assert_refused(res, key, "'seed' is not a column of a cell")
    curves = {"kind": "curves", "series": ["val.acc"], "hue": ["seed"], "where": {"seed": 0}}
    assert _invoke("validate", _one_run_spec(tmp_path, figure=curves)).exit_code == 0


def test_a_slope_no_profile_has_the_points_for_is_refused(tmp_path):
    """loglog_slope with min_points above the values of x any profile sweeps stayed MISSING
    forever ('this profile has 2 values ... (needs 5)'), validate accepted it; a profile that
    cannot judge it (smoke) while another can is an honest MISSING there."""
    claim = {"check": "loglog_slope", "text": "t", "x": "model.d_model", "expected": 1.0,
             "tol": 0.1, "min_points": 5}
    res = _invoke("validate", _two_width_spec(tmp_path, claim))
    _assert_refused(res, "claims.0.min_points: 5, but a group has at most 1 values",
                    "at most 2 values of model.d_model in profile quick",
                    "it stays MISSING in every profile")
    claim["min_points"] = 2  # quick and paper sweep 2 widths; smoke 1
    assert _invoke("validate", _two_width_spec(tmp_path, claim)).exit_code == 0


def test_a_collapse_no_profile_has_the_groups_for_is_refused(tmp_path):
    """collapse min_groups above the groups (of >= 2 cells with equal `by`) any profile has
    stayed MISSING forever; validate accepted it. One profile short (smoke) is an honest
    MISSING there."""
    claim = {"check": "collapse", "text": "t", "by": "model.d_model", "tol": 0.1,
             "min_groups": 3}
    res = _invoke("validate", _two_width_spec(tmp_path, claim))
    _assert_refused(res, "claims.0.min_groups: 3, but there are 1 groups",
                    "2 groups of ≥ 2 cells with equal model.d_model in profile quick",
                    "it stays MISSING in every profile")
    claim["min_groups"] = 2  # quick and paper: 2 widths x 2 labels; smoke 1 width
    assert _invoke("validate", _two_width_spec(tmp_path, claim)).exit_code == 0
    # a run of the one profile that cannot judge it (smoke) is not refused: MISSING there
    # (run and plot validate one profile's runs; 'never' needs every profile's)
    res = _invoke("run", _two_width_spec(tmp_path, claim), "--profile", "smoke", "--dry-run",
                  "--no-estimate", "--out", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output


def test_a_recall_frontier_no_profile_has_the_points_for_is_refused(tmp_path):
    """recall_frontier min_points above the widths any profile sweeps stayed MISSING forever."""
    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig6.yaml").read_text())
    claim = next(c for c in raw["claims"] if c.get("check") == "recall_frontier")
    claim["min_points"] = 1000
    p = tmp_path / "fr.yaml"
    p.write_text(yaml.safe_dump({**raw, "id": "fr-spec", "alias": None, "paper": "tests"},
                                sort_keys=False))
    _assert_refused(_invoke("validate", p), "min_points: 1000, but a regime and column has at "
                    "most", "it stays MISSING in every profile")
    claim["min_points"] = 3
    p.write_text(yaml.safe_dump({**raw, "id": "fr-spec", "alias": None, "paper": "tests"},
                                sort_keys=False))
    assert _invoke("validate", p).exit_code == 0, _invoke("validate", p).output


@pytest.mark.parametrize("override,key", [
    ({"title": "red \x1b[31mALERT\x1b[0m"}, "title: text with a control character (U+001B"),
    ({"claim": "a\rb"}, "claim: text with a control character (U+000D"),
    ({"profiles": {"smoke": {"description": "x\u202eevil"}, "quick": {}, "paper": {}}},
     "profiles.smoke.description: text with a control character (U+202E"),
    ({"claims": [{"text": "bell\x07", "where": {"label": "S6"}, "op": ">=", "value": 0.5}]},
     "claims.0.text: text with a control character (U+0007"),
    ({"notes": ["ok", "clear \x1b[2J"]}, "notes.1: text with a control character"),
])
def test_control_characters_in_spec_text_are_refused(tmp_path, override, key):
    """A title (claim, description, claim text, note) holding an ANSI escape was printed raw by
    show/list/run: the terminal was recoloured or cleared by a spec file."""
    spec = write_spec(tmp_path, **override)
    for cmd in ("validate", "show"):
        res = _invoke(cmd, spec)
        _assert_refused(res, key)
        assert "\x1b" not in res.output and "\u202e" not in res.output, repr(res.output)
    ok = write_spec(tmp_path, title="two\tparts", claim="a folded\nclaim\n")
    assert _invoke("validate", ok).exit_code == 0


def test_data_generation_workers_die_with_a_killed_parent(tmp_path):
    """`data generate ... --workers 2` killed with -9 left its pool workers alive for ever
    (blocked on the full result pipe, each holding a chunk of images) as orphans."""
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import multiprocessing as mp, os, signal, sys, time\n"
        "from ssmrepro.data._workers import iter_chunks\n"
        "it = iter_chunks(time.sleep, workers=2, ahead=4)\n"  # chunk c sleeps c seconds
        "next(it)\n"
        "print(' '.join(str(p.pid) for p in mp.active_children()), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == -signal.SIGKILL, res.stderr
    kids = [int(p) for p in res.stdout.split()]
    assert kids, res.stdout
    deadline = time.monotonic() + 1.5  # the workers sleep up to 4 s; they must die at once
    alive = kids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in kids if os.path.exists(f"/proc/{p}")
                 and open(f"/proc/{p}/stat").read().split()[2] != "Z"]
    assert not alive, f"workers {alive} outlived their killed parent"


@pytest.mark.parametrize("sweep,needle", [
    ([{"grid": {"model.d_model": [8]}}, {"grid": {"model.d_model": [16]}}],
     "sweep.0: model.d_model is set again by every point of sweep axis 1"),
    ([{"grid": {"model.d_model": [8]}},
      {"cases": [{"label": "A", "set": {"model.d_model": 16}},
                 {"label": "B", "set": {"model.d_model": 32, "model.mixer": "s4d"}}]}],
     "sweep.0: model.d_model is set again by every point of sweep axis 1"),
])
def test_a_key_every_point_of_a_later_axis_sets_again_is_refused(tmp_path, sweep, needle):
    """grid d_model [8] x grid d_model [16] quietly ran d_model 16 only (the later axis replaced
    every value of the earlier); a case overriding the key for some points is fine."""
    for cmd in ("validate", "show"):
        _assert_refused(_invoke(cmd, write_spec(tmp_path, sweep=sweep)), needle,
                        "never used")
    ok = [{"grid": {"model.d_model": [8]}},  # B overrides the width, A keeps the grid's
          {"cases": [{"label": "A", "set": {"model.mixer": "s6"}},
                     {"label": "B", "set": {"model.mixer": "s4d", "model.d_model": 32}}]}]
    res = _invoke("validate", write_spec(tmp_path, sweep=ok))
    assert res.exit_code == 0, res.output


def test_a_claim_given_twice_is_refused(tmp_path):
    """Two identical claims printed one verdict twice and counted it twice ('2 PASS' for one
    claim); paper values given twice were already refused."""
    claim = {"text": "t", "where": {"label": "S6"}, "op": ">=", "value": 0.5}
    res = _invoke("validate", write_spec(tmp_path, claims=[claim, {**claim, "check": "threshold"}]))
    _assert_refused(res, "claims.1: the same claim as claims.0")
    other = {**claim, "value": 0.6}
    assert _invoke("validate", write_spec(tmp_path, claims=[claim, other])).exit_code == 0
    other = {**claim, "metric": "test.acc + 0"}  # another expression, though of one value
    res = _invoke("validate", write_spec(tmp_path, claims=[claim, other]))
    assert "the same claim" not in res.output, res.output


@pytest.mark.parametrize("first,second", [
    ({"where": {"label": "S6", _D: 8}}, {"where": {_D: 8, "label": "S6"}}),
    ({"where": {"label": ["S6", "S4D"]}}, {"where": {"label": ["S4D", "S6"]}}),
    ({"where": {"label": "S6"}, "text": "t"}, {"where": {"label": "S6"}, "text": "  t "}),
    ({"where": {"label": "S6"}, "given": [{"metric": "val.acc", "op": ">", "value": 0.1},
                                          {"metric": "val.loss", "op": "<", "value": 9}]},
     {"where": {"label": "S6"}, "given": [{"metric": "val.loss", "op": "<", "value": 9},
                                          {"metric": "val.acc", "op": ">", "value": 0.1}]}),
    ({"where": {"label": "S6"}}, {"where": {"label": ["S6"]}}),  # an any-of list of one
    ({"where": {"label": "S6", _D: 8}}, {"where": {"label": "S6", _D: 8.0}}),  # 8 is 8.0
    ({"where": {"label": "S6"}, "metric": "test.acc"},  # one expression, spelled otherwise
     {"where": {"label": "S6"}, "metric": "( test.acc )"}),
    ({"where": {"label": "S6"}, "metric": "1 - test.acc"},
     {"where": {"label": "S6"}, "metric": "1-(test.acc)"}),
    ({"where": {"label": "S6"}, "given": [{"metric": "val.acc", "op": ">", "value": 0.1},
                                          {"metric": "val.loss", "op": "<", "value": 9}]},
     {"where": {"label": "S6"}, "given": [{"metric": "(val.loss)", "op": "<", "value": 9},
                                          {"metric": "val.acc", "op": ">", "value": 0.1}]}),
])
def test_a_claim_given_twice_in_another_order_is_refused(tmp_path, first, second):
    """Two claims that differ only in the order of their `where` keys (or of an any-of list,
    of their preconditions, or in the text's spacing) passed as two claims: one verdict
    printed and counted twice."""
    claim = {"text": "t", "op": ">=", "value": 0.5}
    res = _invoke("validate", write_spec(tmp_path, claims=[{**claim, **first},
                                                           {**claim, **second}]))
    _assert_refused(res, "claims.1: the same claim as claims.0")


def test_a_label_that_looks_like_another_but_is_decomposed_is_refused(tmp_path):
    """Case labels 'café' (é, U+00E9) and 'cafe' + U+0301 (a combining accent) were two cells
    that print the same; a claim on 'café' matched one of them."""
    cases = [{"label": "caf\u00e9", "set": {"model.mixer": "s6"}},
             {"label": "cafe\u0301", "set": {"model.mixer": "s4d"}}]
    res = _invoke("validate", write_spec(tmp_path, sweep=[{"cases": cases}]))
    _assert_refused(res, "sweep.0.cases.1.label", "composed (Unicode NFC)")
    cases[1]["label"] = "caf\u00e9 2"
    assert _invoke("validate", write_spec(tmp_path, sweep=[{"cases": cases}])).exit_code == 0


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_output_the_terminal_cannot_encode_is_escaped_not_a_traceback(tmp_path, cli_env,
                                                                      encoding):
    """With an ASCII (or Latin-1) output encoding, `show` of a spec whose label or title is not
    ASCII (and every `show`: its header holds an em dash) raised UnicodeEncodeError."""
    import subprocess
    import sys

    spec = write_spec(tmp_path, title="Keep-n \u2014 \u0394 \u2713",
                      sweep=[{"cases": [{"label": "caf\u00e9 \u2713",
                                         "set": {"model.mixer": "s6"}}]}])
    for args in (["show", spec], ["validate", spec], ["list"]):
        res = subprocess.run([sys.executable, "-m", "ssmrepro.cli", *map(str, args)],
                             capture_output=True, encoding=encoding, errors="replace",
                             timeout=300, env={**cli_env, "PYTHONIOENCODING": encoding})
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Traceback" not in res.stderr and "UnicodeEncodeError" not in res.stderr
        if args[0] == "show":  # what the encoding lacks, escaped
            assert "\\u2713" in res.stdout and "\\u2014" in res.stdout, res.stdout


def test_two_percentiles_that_write_one_column_are_refused(tmp_path):
    """aggregate.percentiles [50, 50.0000001] both wrote test.acc.p50: the second replaced the
    first without a word."""
    spec = write_spec(tmp_path, aggregate={"metrics": ["test.acc"], "percentiles": [50, 50.0000001]})
    _assert_refused(_invoke("validate", spec), "aggregate", "both write the column")
    spec = write_spec(tmp_path, aggregate={"metrics": ["test.acc"], "percentiles": [50, 50.5]})
    assert _invoke("validate", spec).exit_code == 0


@pytest.mark.parametrize("stop", ["{metric: val.acc, op: '>=', threshold: 0}",
                                  "{metric: val.acc, op: '<=', threshold: 1}",
                                  "{metric: val.loss, op: '>=', threshold: 0}",
                                  "{metric: val.loss, op: '>', threshold: -1}"])
def test_an_early_stop_every_evaluation_meets_is_refused(tmp_path, stop):
    """train.early_stop val.acc >= 0 stopped every run at its first evaluation (stop_step 0):
    the runs never trained, and their claims were judged on the initial models."""
    res = _invoke("validate", _one_run_spec(tmp_path), "--set", f"train.early_stop={stop}")
    _assert_refused(res, "train.early_stop", "holds at every evaluation")
    never = "{metric: val.acc, op: '>', threshold: 1.0}"  # never stops: the koren2026 specs' base
    res = _invoke("validate", _one_run_spec(tmp_path), "--set", f"train.early_stop={never}")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("where", ["events.jsonl", "claims/abc.claim"])
def test_an_event_log_or_claim_that_is_a_fifo_is_not_called_a_folder(tmp_path, where):
    """A FIFO in place of events.jsonl (or of a claim) was refused as 'a folder where a file
    belongs'; a folder there still is."""
    spec = write_spec(tmp_path)
    path = tmp_path / "out" / "tests" / "t-spec" / where
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    res = _invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "out")
    _assert_refused(res, "not a regular file (a FIFO, device or socket)")
    assert "a folder where" not in res.output, res.output
    path.unlink()
    path.mkdir()
    _assert_refused(_invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "out"),
                    "a folder where a file belongs")


@pytest.mark.parametrize("key,value", [("n_params", "many"), ("n_params", 1.5),
                                       ("n_params", True), ("stop_step", -5),
                                       ("epochs", -1.0)])
def test_a_record_with_a_nonsense_size_or_step_is_quarantined(trained_store, tmp_path, key,
                                                              value):
    """A record with n_params 'many' was accepted and `plot` then raised ValueError in the bars
    figure (a traceback); stop_step -5 was averaged into the cell's mean stop step."""
    import json

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    rec[key] = value
    path.write_text(json.dumps(rec))
    res = _invoke("plot", spec, "--out", tmp_path / "out")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in res.output and key in res.output, res.output
    assert not path.exists()


@pytest.mark.parametrize("key,value", [("stop_step", 99999), ("stop_step", 41),
                                       ("history", [{"step": 999999, "val.acc": 0.5}])])
def test_a_record_beyond_its_runs_steps_is_quarantined(trained_store, tmp_path, key, value):
    """stop_step 99999 (or a history step of 999999) in the record of a 40-step run was
    trusted: averaged into the cell's mean stop step, drawn far right of every curve."""
    import json

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["stop_step"] == 40  # the record as written holds
    rec[key] = value
    path.write_text(json.dumps(rec))
    res = _invoke("plot", spec, "--out", tmp_path / "out")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in said and "beyond the run's 40 steps" in said, res.output
    assert not path.exists()


def test_a_history_evaluation_that_diverged_draws_and_a_bad_step_is_quarantined(trained_store,
                                                                                tmp_path):
    """A history value None (how a record stores a NaN evaluation: a run that diverged) raised
    TypeError in curve_table (a traceback in `plot` with a curves figure); a step of None,
    -20 or 0.5 was drawn or raised."""
    import json

    _, store = _copy_trained(trained_store, tmp_path)
    spec = _one_run_spec(tmp_path, figures=[{"kind": "curves", "series": "val.acc",
                                             "name": "cv"}])
    (path,) = (store / "runs").glob("*.json")
    good = json.loads(path.read_text())
    rec = json.loads(json.dumps(good))
    rec["history"][0]["val.acc"] = None
    path.write_text(json.dumps(rec))
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "cv-smoke.png" in res.output and path.exists(), res.output
    for step in (None, -20, 0.5):
        rec = json.loads(json.dumps(good))
        rec["history"][0]["step"] = step
        path.write_text(json.dumps(rec))
        res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        assert "quarantined" in res.output and "a history step" in res.output, res.output
        assert not path.exists()


def _two_profile_store(tmp_path):
    """smoke trained, its records deleted (its tables committed); extra trains quick's third run.
    Returns (spec, out, folder)."""
    spec = two_profile_spec(tmp_path)
    out = tmp_path / "out"
    for profile in ("smoke", "extra"):
        res = _invoke("run", spec, "--profile", profile, "--out", out, "--workers", "1",
                      "--no-calibrate")
        assert res.exit_code == 0, res.output
        if profile == "smoke":
            shutil.rmtree(out / "tests" / "t-spec" / "runs")
    return spec, out, out / "tests" / "t-spec"


def test_another_profiles_row_that_contradicts_its_run_id_is_not_used(tmp_path):
    """A committed row of another profile is taken by its run id: a hand-edited or foreign row
    whose config (model.d_model 64, mixer s4d) is not that run id's was put in quick's table with
    those values, so a claim on d_model=8 lost the run and one on d_model=64 found a cell that
    was never run. Its curves rows of one run under two labels were drawn twice (each step
    doubled)."""
    import pandas as pd

    from ssmrepro.store import read_results, read_table

    spec, out, folder = _two_profile_store(tmp_path)
    table = pd.read_csv(folder / "results-smoke.csv", dtype=str)
    table.loc[table["label"] == "S6", "model.d_model"] = "64"
    table.to_csv(folder / "results-smoke.csv", index=False)
    curves = pd.read_csv(folder / "curves-smoke.csv", dtype=str)
    pd.concat([curves, curves.assign(label="again")]).to_csv(folder / "curves-smoke.csv",
                                                             index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "model.d_model=64" in res.output and "not used" in res.output, res.output
    got = read_results(folder / "results.csv")
    assert sorted(got["label"]) == ["S4D", "wide"]
    assert "3 runs expected, 2 finished" in (folder / "report.md").read_text()
    cv = read_table(folder / "curves.csv", ("step",))
    assert not cv.duplicated(subset=["run_id", "step"]).any()
    assert sorted(set(cv["label"])) == ["S4D", "S6", "wide"]


def test_another_profiles_run_twice_with_different_results_is_not_used(tmp_path):
    """A committed table holding one run id twice with different metrics (a damaged or merged
    table) gave this profile the first row, 0.99 where the run measured 0.08, with no word. The
    same run under two labels (same metrics) is still used."""
    import pandas as pd

    from ssmrepro.store import read_results

    spec, out, folder = _two_profile_store(tmp_path)
    table = pd.read_csv(folder / "results-smoke.csv", dtype=str)
    pd.concat([table.assign(**{"metric.test.acc": "0.99"}), table]).to_csv(
        folder / "results-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "2 times with different results" in res.output, res.output
    got = read_results(folder / "results.csv")
    assert sorted(got["label"]) == ["wide"] and 0.99 not in set(got["metric.test.acc"])
    pd.concat([table.assign(label="again"), table]).to_csv(folder / "results-smoke.csv",
                                                           index=False)
    (folder / "results.csv").unlink()
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "different results" not in res.output, res.output
    assert sorted(read_results(folder / "results.csv")["label"]) == ["S4D", "S6", "wide"]


def test_a_committed_curves_table_with_an_accuracy_out_of_range(tmp_path):
    """A committed curves table with val.acc 7 was drawn and copied into the profile's curves
    (results tables were checked, curves tables not): the profile's own is refused (exit 2),
    another profile's skipped with a warning."""
    import pandas as pd

    from ssmrepro.store import read_table

    spec, out, folder = _two_profile_store(tmp_path)
    curves = pd.read_csv(folder / "curves-smoke.csv", dtype=str)
    curves.assign(**{"val.acc": "7"}).to_csv(folder / "curves-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "curves-smoke.csv" in res.output and "accuracy outside [0, 1]" in res.output
    assert set(read_table(folder / "curves.csv", ("step",))["label"]) == {"wide"}
    curves.assign(**{"val.acc": "7"}).to_csv(folder / "curves.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)  # records: rewritten from them
    assert res.exit_code == 0 and "accuracy outside [0, 1]" in res.output, res.output
    assert "rewritten from the run records" in res.output, res.output
    assert set(read_table(folder / "curves.csv", ("step",))["label"]) == {"wide"}
    curves.assign(**{"val.acc": "7"}).to_csv(folder / "curves.csv", index=False)
    shutil.rmtree(folder / "runs")  # a fresh clone: the table is all there is
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    _assert_refused(res, "curves.csv", "accuracy outside [0, 1]")


def test_the_profiles_own_committed_row_that_contradicts_its_run_id(tmp_path):
    """A fresh clone (no records) reads the profile's committed table as it is: a row of a
    planned run hand-edited to model.d_model 64 made a cell 'S6, 64' (n_expected 0, n_ok 1) that
    a claim on d_model=64 would find, and left S6 at 8 not run. The row is dropped with a
    warning; the run's row comes from another profile's table when one has it."""
    spec, out, folder = _own_s6_row_edited_to_d64(tmp_path, "results.csv")
    report = (folder / "report.md").read_text()
    assert "| S6 | 64 |" not in report and "3 runs expected, 3 finished" in report, report
    (folder / "results-smoke.csv").unlink()
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "3 runs expected, 2 finished" in (folder / "report.md"
                                                                      ).read_text()


def _own_s6_row_edited_to_d64(tmp_path, name: str):
    """quick plotted, its records removed (a fresh clone), S6's rows of its own committed
    ``name`` table hand-edited to model.d_model 64; plot again must leave them out with a
    warning. Returns (spec, out, folder)."""
    import pandas as pd

    spec, out, folder = _two_profile_store(tmp_path)
    assert _invoke("plot", spec, "--profile", "quick", "--out", out).exit_code == 0
    shutil.rmtree(folder / "runs")
    table = pd.read_csv(folder / name, dtype=str)
    table.loc[table["label"] == "S6", "model.d_model"] = "64"
    table.to_csv(folder / name, index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "model.d_model=64" in res.output and "not used" in res.output, res.output
    return spec, out, folder


def test_another_profiles_table_that_is_a_fifo_is_a_warning(tmp_path):
    """A FIFO in place of another profile's committed table was skipped without a word (its
    runs then counted as not finished, with no reason given); now a warning names it."""
    spec, out, folder = _two_profile_store(tmp_path)
    (folder / "results-smoke.csv").unlink()
    os.mkfifo(folder / "results-smoke.csv")
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "results-smoke.csv: not a regular file" in res.output, res.output


def test_the_profiles_own_committed_curves_row_that_contradicts_its_run_id(tmp_path):
    """As for results: a fresh clone read the profile's own curves table as it is, so a row
    hand-edited to model.d_model 64 drew S6's curve as a cell 'S6, 64' never run."""
    _own_s6_row_edited_to_d64(tmp_path, "curves.csv")


@pytest.mark.parametrize("step", ["-20", "0.5"])
def test_a_committed_curves_table_with_a_step_that_is_not_a_count(tmp_path, step):
    """A committed curves table with a step of -20 or 0.5 was drawn and copied on (a record with
    such a history step is quarantined): another profile's is skipped with a warning, the
    profile's own refused (exit 2)."""
    import pandas as pd

    spec, out, folder = _two_profile_store(tmp_path)
    curves = pd.read_csv(folder / "curves-smoke.csv", dtype=str)
    curves.loc[curves.index[1], "step"] = step
    curves.to_csv(folder / "curves-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "curves-smoke.csv" in res.output and "not a count" in res.output, res.output
    curves.to_csv(folder / "curves.csv", index=False)
    shutil.rmtree(folder / "runs")  # a fresh clone: the profile's own table is all there is
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    _assert_refused(res, "curves.csv", "not a count")


def test_the_profiles_own_committed_table_with_a_run_twice_with_different_results(tmp_path):
    """A fresh clone's own committed table holding a planned run twice with different metrics
    gave the cell the first row (0.99 where the run measured 0.08) with no word; the rows are
    dropped with a warning and the run taken from another profile's table."""
    import pandas as pd

    spec, out, folder = _two_profile_store(tmp_path)
    assert _invoke("plot", spec, "--profile", "quick", "--out", out).exit_code == 0
    shutil.rmtree(folder / "runs")
    table = pd.read_csv(folder / "results.csv", dtype=str)
    s6 = table[table["label"] == "S6"]
    pd.concat([s6.assign(**{"metric.test.acc": "0.99"}), table]).to_csv(
        folder / "results.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "2 times with different results" in res.output, res.output
    report = (folder / "report.md").read_text()
    assert "0.990" not in report and "3 runs expected, 3 finished" in report, report


def test_a_committed_row_beyond_its_runs_step_budget_is_not_used(tmp_path):
    """A committed curves row at step 999999 (or a results row with stop_step 99999) of a 4-step
    run was copied on and drawn far right (a record with such a step is quarantined)."""
    import pandas as pd

    spec, out, folder = _two_profile_store(tmp_path)
    curves = pd.read_csv(folder / "curves-smoke.csv", dtype=str)
    curves.loc[curves.index[2], "step"] = "999999"
    curves.to_csv(folder / "curves-smoke.csv", index=False)
    table = pd.read_csv(folder / "results-smoke.csv", dtype=str)
    table.loc[table["label"] == "S4D", "stop_step"] = "99999"
    table.to_csv(folder / "results-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "step=999999 (beyond the run's 4 steps)" in res.output, res.output
    assert "stop_step=99999 (beyond the run's 4 steps)" in res.output, res.output
    assert "3 runs expected, 2 finished" in (folder / "report.md").read_text()


def test_export_leaves_out_a_committed_row_that_contradicts_its_run_id(tmp_path):
    """`export` read the committed tables as they stood: a row hand-edited to lr 0.5 was
    exported under its run id, though no run of that id has it (plot already left it out)."""
    import pandas as pd

    root = _project(tmp_path)
    out = tmp_path / "results"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", out / "huang2025/huang2025-tab1")
    env = {"SSMREPRO_ROOT": str(root)}
    table = out / "huang2025/huang2025-tab1/results.csv"
    df = pd.read_csv(table, dtype=str, keep_default_na=False)
    rid = df["run_id"].iloc[0]
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv", env=env)
    assert res.exit_code == 0 and "not used" not in res.output, res.output
    assert rid in set(pd.read_csv(tmp_path / "x.csv", dtype=str)["run_id"])
    df.loc[0, "train.lr"] = "0.5"
    df.to_csv(table, index=False)
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv", env=env)
    assert res.exit_code == 0 and "train.lr=" in res.output and "not used" in res.output
    exported = pd.read_csv(tmp_path / "x.csv", dtype=str)
    assert rid not in set(exported["run_id"]) and len(exported)


def test_a_committed_row_with_a_status_no_record_has_is_named(tmp_path):
    """A committed row with status 'weird' (no record has it: ok, diverged or error) counted its
    run as not finished without a word why; now it is not used, with a warning naming it."""
    import pandas as pd

    spec, out, folder = _two_profile_store(tmp_path)
    table = pd.read_csv(folder / "results-smoke.csv", dtype=str, keep_default_na=False)
    table.loc[table["label"] == "S6", "status"] = "weird"
    table.to_csv(folder / "results-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "status='weird'" in res.output and "not used" in res.output, res.output
    assert "3 runs expected, 2 finished" in (folder / "report.md").read_text()


def test_a_diverged_status_with_a_finite_final_evaluation_is_not_used(trained_store, tmp_path):
    """A run that diverges has no final evaluation (test.loss NaN). A record or a committed row
    edited to 'diverged' with its finite metrics was counted diverged (its claims FAILed); the
    record is now quarantined (and trained again), the row not used, each with a reason."""
    import json

    import pandas as pd

    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "status": "diverged"}))
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())  # wrapped to the terminal's width
    assert "status 'diverged' with a finite test.loss" in said, res.output
    assert "trained 1 runs" in said, res.output

    (tmp_path / "two").mkdir()
    spec, out, folder = _two_profile_store(tmp_path / "two")
    table = pd.read_csv(folder / "results-smoke.csv", dtype=str, keep_default_na=False)
    table.loc[table["label"] == "S6", "status"] = "diverged"
    table.to_csv(folder / "results-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "status='diverged' with a finite metric.test.loss" in " ".join(res.output.split())
    assert "3 runs expected, 2 finished (0 diverged)" in (folder / "report.md").read_text()


def test_a_committed_curves_row_whose_samples_are_not_step_times_batch_is_not_used(tmp_path):
    """A committed curves row with samples 1e300 (a whole number, so no 'not a count') was copied
    into the profile's curves and drawn on the samples axis; samples is step x batch size."""
    import pandas as pd

    from ssmrepro.store import read_table

    spec, out, folder = _two_profile_store(tmp_path)
    curves = pd.read_csv(folder / "curves-smoke.csv", dtype=str)
    curves.loc[curves.index[1], "samples"] = "1e300"
    curves.to_csv(folder / "curves-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "quick", "--out", out)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "samples=1e+300" in res.output and "not used" in res.output, res.output
    assert read_table(folder / "curves.csv", ("step",))["samples"].max() < 1e6


def test_a_cache_entry_whose_split_was_cut_short_is_rebuilt(tmp_path):
    """A cache entry whose test split was cut from 3 examples to 1 in all its arrays alike (so
    they still agreed) was used: the run measured test.acc on one example without a word."""
    import numpy as np

    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    good = load_lra("listops", "test", root)
    x = np.array(good.x)
    for f in good.cache_path.glob("test.*.npy"):
        np.save(f, np.load(f)[:1])
    with pytest.warns(UserWarning, match="damaged cache entry .*has shape"):
        again = load_lra("listops", "test", root)
    assert again.x.shape == x.shape and (np.asarray(again.x) == x).all()


def test_a_paper_value_given_twice_with_a_where_spelled_otherwise_is_refused(tmp_path):
    """Two paper values of one cell and metric, one `where: {label: [S6]}` (an any-of list of
    one) or `model.d_model: 8.0`, the other `label: S6` / `8`, passed validate: the report
    compared the cell with either value."""
    pv = {"where": {"label": "S6", _D: 8}, "value": 0.5, "tol": 0.1}
    for other in ({"label": ["S6"], _D: 8}, {"label": "S6", _D: 8.0}):
        res = _invoke("validate", write_spec(tmp_path, paper_values=[
            pv, {**pv, "where": other, "value": 0.6}]))
        _assert_refused(res, "paper_values.1: the same cell and metric as paper_values.0")
    ok = write_spec(tmp_path, paper_values=[pv, {**pv, "where": {"label": "S4D", _D: 8}}])
    assert _invoke("validate", ok).exit_code == 0


def test_validate_all_with_a_spec_named_too_is_refused(tmp_path):
    """`validate --all my.yaml` validated the project's specs and exited 0 without reading
    my.yaml (a broken spec passed as validated)."""
    bad = write_spec(tmp_path, figures=[{"kind": "bars", "x": "label", "name": "figure2"},
                                        {"kind": "bars", "x": "label"}], figure=None)
    _assert_refused(_invoke("validate", bad), "two figures write 'figure2'")
    _assert_refused(_invoke("validate", "--all", bad), "or --all, not both")


def test_a_paper_value_of_a_negative_parameter_count_is_refused(tmp_path):
    """A paper value n_params -5 (tol 1) passed validate and could never match (accuracies
    and losses out of range were already refused)."""
    pv = {"where": {"label": "S6"}, "metric": "n_params", "value": -5, "tol": 1}
    res = _invoke("validate", write_spec(tmp_path, paper_values=[pv]))
    _assert_refused(res, "paper_values.0.value: -5 for n_params, a parameter count below 0")
    ok = write_spec(tmp_path, paper_values=[{**pv, "value": 9200, "tol": 50}])
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("metric,given", [
    ("test.acc - test.acc", None), ("test.acc * 0 + 0.7", None), ("test.acc", "val.acc * 0"),
])
def test_a_claim_on_an_expression_that_reads_no_metric_is_refused(tmp_path, metric, given):
    """A claim (or precondition) on `test.acc - test.acc` or `test.acc * 0 + 0.7` has one value
    whatever was measured: every cell PASSed (or FAILed) alike, without reading a run."""
    claim = {"text": "t", "where": {"label": "S6"}, "metric": metric, "op": ">=", "value": 0.5}
    if given:
        claim["given"] = [{"metric": given, "op": "<=", "value": 0.5}]
    res = _invoke("validate", write_spec(tmp_path, claims=[claim]))
    _assert_refused(res, "whatever the metrics are", "reads no run")
    ok = {**claim, "metric": "test.acc - test.loss", "given": []}
    assert _invoke("validate", write_spec(tmp_path, claims=[ok])).exit_code == 0


@pytest.mark.parametrize("metric,needle", [
    ("tets.acc", "'tets' is not val, test, train nor a named evaluation set"),
    ("test.accc", "a set records loss, acc"),
    ("lng.acc", "named evaluation set of train.evals: ['long']"),
    ("long.best_acc", "a named evaluation set records loss, acc, mse only"),
    ("test.max_rise", "test records loss, acc, mse only"),
    ("val.avg_loss", "val records loss, acc, mse, best_acc, best_mse, max_rise only"),
])
def test_an_aggregate_metric_no_run_records_is_refused(tmp_path, metric, needle):
    """`aggregate.metrics: [test.acc, tets.acc]` passed validate; every summary and report got an
    empty tets.acc column, without a word."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16, "evals": {"long": {"T": 12}}}
    agg = {"metrics": ["test.acc", metric], "reduce": "mean"}
    res = _invoke("validate", write_spec(tmp_path, train=train, aggregate=agg))
    _assert_refused(res, f"aggregate.metrics.1: {metric!r}: no run records it")
    assert needle in " ".join(res.output.split()), res.output
    ok = {"metrics": ["test.acc", "long.acc", "val.best_acc", "train.avg_loss", "val.max_rise"],
          "reduce": "mean"}
    res = _invoke("validate", write_spec(tmp_path, train=train, aggregate=ok))
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("metric", [
    "test.acc >= 0.3", "test.loss < 0.2", "min(test.acc, 0.3)", "test.acc > val.acc",
    "test.loss > 1e7", "test.loss <= 5e8",
])
def test_a_claim_on_a_threshold_or_clamp_of_a_metric_is_not_called_constant(tmp_path, metric):
    """The constant check probed metrics at 0.37 and up only, each name above the one before:
    `test.acc >= 0.3`, `min(test.acc, 0.3)` and `test.acc > val.acc` were refused as 'one value
    whatever the metrics are', though each depends on them; and up to 10^6 only, so a threshold
    above it (`test.loss > 1e7`, `n_params > 2e6` where n_params is aggregated) was too."""
    claim = {"text": "t", "where": {"label": "S6"}, "metric": metric, "op": ">=", "value": 0.5}
    res = _invoke("validate", write_spec(tmp_path, claims=[claim]))
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("args", [["show"], ["run", "--dry-run", "--no-estimate"]])
def test_a_quarantine_folder_linked_outside_out_is_not_written_through(trained_store, tmp_path,
                                                                         args):
    spec, store = _copy_trained(trained_store, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store / "runs" / "quarantine").symlink_to(elsewhere)
    record = next((store / "runs").glob("*.json"))
    record.write_text("garbage")  # show and run --dry-run moved it out of --out
    res = _invoke(args[0], spec, *args[1:], "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "cannot quarantine it" in res.output, res.output
    assert "Traceback" not in res.output
    assert not list(elsewhere.iterdir()) and record.read_text() == "garbage"


def test_run_removes_no_claim_of_a_claims_folder_linked_outside_out(trained_store, tmp_path):
    spec, store = _copy_trained(trained_store, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    precious = elsewhere / "precious.claim"
    precious.write_text("junk")
    os.utime(precious, (0, 0))  # stale: `run` cleaned it up before refusing the link
    shutil.rmtree(store / "claims", ignore_errors=True)
    (store / "claims").symlink_to(elsewhere)
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate")
    _assert_refused(res, "symbolic link", "outside the results folder")
    assert precious.read_text() == "junk"


def test_an_ordering_claim_over_a_large_grid_is_judged_in_bounded_time(tmp_path):
    import time

    grid = {"train.lr": [round(0.001 * (i + 1), 6) for i in range(100)],
            "model.d_model": list(range(8, 33))}
    small, large = list(range(8, 20)), list(range(20, 33))
    spec = write_spec(tmp_path, seeds=[0], sweep=[{"grid": grid}], claims=[
        {"text": "wide beats narrow", "check": "ordering", "a": {"model.d_model": large},
         "b": {"model.d_model": small}}])
    t0 = time.time()  # every a-cell was compared with every b-cell, 0.5 ms a pair: minutes
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output
    assert time.time() - t0 < 30
    _edit(spec, claims=[{"text": "wide beats narrow", "check": "ordering", "match": [],
                         "a": {"model.d_model": large}, "b": {"model.d_model": small}}])
    _assert_refused(_invoke("validate", spec), "1,560,000 pairs", "name the keys to match on")


def _half_trained_front_page(tmp_path, **spec_kw) -> Path:
    """A one-spec project (catalogue + t-spec) with 1 of its 2 smoke runs trained and `figures`
    run; returns the results root."""
    root = tmp_path / "proj"
    (root / "experiments" / "tests").mkdir(parents=True)
    (root / "ssmrepro").mkdir()
    (root / "experiments" / "catalogue.yaml").write_text(
        "papers: {tests: Tests}\ntargets:\n  - {id: t-spec, paper: tests, tier: 1, what: tiny}\n")
    write_spec(root / "experiments" / "tests", seeds=[0], **spec_kw, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
        "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    env, out = {"SSMREPRO_ROOT": str(root)}, tmp_path / "R"
    res = _invoke("run", "t-spec", "--profile", "smoke", "--out", out, "--max-runs", "1",
                  "--no-calibrate", "--workers", "1", env=env)
    assert res.exit_code == 0, res.output
    res = _invoke("figures", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    row = next(ln for ln in (out / "README.md").read_text().splitlines() if "| t-spec " in ln)
    assert "smoke (smoke: 1 of 2 runs finished)" in row, row  # it said 'smoke', no word
    return out


def test_the_front_page_says_when_a_profile_is_not_fully_trained_and_reads_no_fifo(tmp_path):
    out = _half_trained_front_page(tmp_path)
    report = out / "tests" / "t-spec" / "report-smoke.md"
    report.unlink()
    os.mkfifo(report)  # `figures --no-rebuild` read it for ever
    res = _invoke("figures", "--no-rebuild", "--out", out,
                  env={"SSMREPRO_ROOT": str(tmp_path / "proj")})
    assert res.exit_code == 0, res.output


def test_the_front_page_reads_the_reports_counts_not_a_title_that_looks_like_them(tmp_path):
    """A spec title holding '2 runs expected, 2 finished' (or a line '**Verdicts: 5 PASS ...**')
    was read by the front page in place of the report's own line: a profile 1 of 2 finished was
    shown as plain 'smoke' (and verdicts would read 5 PASS)."""
    from ssmrepro.plots import frontpage

    title = "Keep: 2 runs expected, 2 finished\n**Verdicts: 5 PASS, 0 FAIL, 0 MISSING, 0 UNTESTED**"
    out = _half_trained_front_page(tmp_path, title=title)
    report = out / "tests" / "t-spec" / "report-smoke.md"
    assert frontpage._verdicts(report) == "0 PASS, 0 FAIL, 0 MISSING, 1 UNTESTED"
    assert report.read_text().splitlines()[0].endswith(r"\*\*Verdicts: 5 PASS, 0 FAIL, 0 MISSING, "
                                                       r"0 UNTESTED\*\*")  # the title: one line


@pytest.mark.parametrize("override", [
    {"constraints": [f"model.d_model >= {i}" for i in range(101)]},
    {"sweep": [{"cases": [{"label": "S6", "constraints": [f"model.d_model >= {i}"
                                                           for i in range(101)]}]}]},
    {"derived": {f"train.x{i}": "1" for i in range(101)}},
])
def test_constraints_and_derived_values_evaluated_at_every_point_are_bounded(tmp_path, override):
    """2,000 constraints over 2,500 sweep points took 5 minutes of `validate` (each evaluated at
    every point; a 1 MiB spec holds 50,000)."""
    _assert_refused(_invoke("validate", write_spec(tmp_path, **override)),
                    "should have at most 100 items")


@pytest.mark.parametrize("record", [True, False])
def test_a_folder_where_saved_weights_belong_is_quarantined_before_training(tmp_path, record):
    spec = write_spec(tmp_path, seeds=[0], save_weights=True, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
        "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    out = tmp_path / "out"
    args = ("run", spec, "--profile", "smoke", "--out", out, "--no-calibrate", "--no-plot")
    assert _invoke(*args).exit_code == 0
    runs = out / "tests" / "t-spec" / "runs"
    weights = next(runs.glob("*.pt"))
    weights.unlink()
    if not record:
        weights.with_suffix(".json").unlink()
    (weights / "x").mkdir(parents=True)  # `run` trained the run, then could not save it: exit 2
    res = _invoke(*args)
    assert res.exit_code == 0 and "quarantined" in res.output, res.output
    assert weights.is_file() and weights.with_suffix(".json").is_file()
    assert list((runs / "quarantine").glob(f"{weights.name}.*"))


@pytest.mark.parametrize("pid", [2**70, 0, -1])
def test_a_claim_naming_a_pid_no_process_can_have_is_stale(trained_store, tmp_path, pid):
    """2**70 raised OverflowError (a traceback in `run`); 0 and -1 signal a process group or
    every process, so the claim looked held until its heartbeat went stale (10 minutes)."""
    import json
    import socket

    spec, store = _copy_trained(trained_store, tmp_path)
    record = next((store / "runs").glob("*.json"))
    record.unlink()
    (store / "claims").mkdir(exist_ok=True)
    (store / "claims" / f"{record.stem}.claim").write_text(json.dumps(
        {"host": socket.gethostname(), "pid": pid, "time": 0, "nonce": "x"}))
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--no-plot")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert record.is_file()


@pytest.mark.parametrize("meta", ["garbage", '"generator"'])
def test_a_damaged_generated_meta_json_is_a_warning_not_a_failed_pack(tmp_path, monkeypatch,
                                                                     meta):
    """The generator's meta.json is read for the record's provenance after training: garbage
    failed every pack with a bare JSONDecodeError (exit 1, the training lost)."""
    from ssmrepro.data.pathfinder import write_pathfinder
    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.lra import clear_cache

    folder = tmp_path / "data" / "generated" / "pathfinder32" / "curv_contour_length_14"
    write_pathfinder(folder, 20, 32, 5)
    monkeypatch.setenv("SSMREPRO_DATA", str(tmp_path / "data"))
    clear_cache()
    (folder / "meta.json").write_text(meta)
    try:
        with pytest.warns(UserWarning, match="meta.json"):
            info = build_task({"name": "lra_pathfinder", "source": "generated"}).data_info()
    finally:
        clear_cache()
    assert info["generator"]["generator"].startswith("unknown: ")


def test_a_quarantine_that_is_a_file_is_named_as_such(trained_store, tmp_path):
    """`runs/quarantine` a regular file: the warning said 'cannot quarantine it: File exists'."""
    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    path.write_text("garbage")
    (store / "runs" / "quarantine").write_text("not a folder")
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1", "--no-plot")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())
    assert "runs/quarantine is a file, not a folder (remove it)" in said, res.output
    assert "File exists" not in said and "trained 1 runs" in said, res.output


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["show", "keep-nth"],
                                  ["run", "keep-nth", "--profile", "smoke", "--dry-run",
                                   "--no-estimate"]])
def test_a_results_root_that_is_a_file_is_refused_where_it_is_read(tmp_path, args):
    """`list --out <a file>` showed 0 of N runs for every spec, exit 0 (so did `show` and
    `run --dry-run`); a missing root is true (nothing trained) and `list` says it is missing."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    _assert_refused(_invoke(*args, "--out", afile), f"cannot use {afile}: a file, not a folder")
    res = _invoke(*args, "--out", tmp_path / "missing")
    assert res.exit_code == 0 and not (tmp_path / "missing").exists(), res.output
    assert ("does not exist yet" in res.output) == (args[0] == "list"), res.output


@pytest.mark.parametrize("text,needle", [
    ("true: x\n", "t-spec.yaml: true: keys are names (text), got a boolean"),
    ("'': x\n", "t-spec.yaml: '': an empty key"),
    ("model: {true: 1}\n", "model.true: keys are names (text), got a boolean"),
    ("task: {'': 2}\n", "task.'': an empty key"),
    ("train: {null: 1}\n", "train.null: keys are names (text), got null"),
])
def test_keys_that_are_not_names_are_named_as_written(tmp_path, text, needle):
    """A key `true` was shown as `1` (`model.1.[key]: Input should be a valid string`) and an
    empty key not at all ('(top level): unknown key')."""
    spec = _one_run_spec(tmp_path)
    lines = spec.read_text().splitlines(keepends=True)
    first = text.split(":")[0]
    if first in ("model", "task", "train"):  # replace the whole mapping
        keep, skip = [], False
        for line in lines:
            if line.startswith(f"{first}:"):
                skip = True
                continue
            if skip and line.startswith(" "):
                continue
            skip = False
            keep.append(line)
        lines = keep
    spec.write_text(text + "".join(lines))
    res = _invoke("validate", spec)
    _assert_refused(res, needle)
    assert "[key]" not in res.output and "unknown key" not in res.output, res.output


@pytest.mark.parametrize("override,key", [
    ({"title": "x" * 200_000}, "title:"),
    ({"figure": {"kind": "bars", "metric": "test.acc", "x": "label", "title": "t" * 301}},
     "figure.title:"),
    ({"figure": {"kind": "lines", "metric": "test.acc", "x": "model.d_model", "hue": "label",
                 "facet": None, "names": {"label": "n" * 1000}}}, "figure.names.label:"),
])
def test_text_drawn_on_a_figure_is_bounded(tmp_path, override, key):
    """A 200,000-character title took 30 s to draw (wrapped to thousands of lines); a title,
    axis or legend text is at most 300 characters (the longest shipped title has 118)."""
    import time

    t0 = time.time()
    res = _invoke("validate", _one_run_spec(tmp_path, **override))
    _assert_refused(res, key, "at most 300 characters")
    assert time.time() - t0 < 20
    ok = {k: (v[:300] if isinstance(v, str) else v) for k, v in override.items()}
    if "figure" in ok:
        ok["figure"] = {k: (v[:300] if isinstance(v, str) else v)
                        for k, v in ok["figure"].items() if k != "names"}
    assert _invoke("validate", _one_run_spec(tmp_path, **ok)).exit_code == 0


def _hold(store, run_id: str) -> Path:
    """A live claim on ``run_id``, as another process holding it (this one) leaves it."""
    import json

    store.claims.mkdir(parents=True, exist_ok=True)
    held = store.claims / f"{run_id}.claim"
    held.write_text(json.dumps({"host": store.host, "pid": os.getpid(), "time": time.time(), "nonce": "x"}))
    return held


def _run_in_thread(**kw):
    import io
    import threading

    from rich.console import Console

    from ssmrepro.engine import run_experiment

    buf = io.StringIO()
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(s=run_experiment(
        console=Console(file=buf, width=200, force_terminal=False), wait_poll_s=0.1, **kw)))
    t.start()
    return t, buf, result


def test_max_runs_trains_free_runs_not_one_another_process_holds(tmp_path):
    """`run --max-runs 1` took the first pending run though another live process held it, and
    waited for it (up to the 10-minute heartbeat) instead of training a free run."""
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    spec = load_spec(write_spec(tmp_path, seeds=[0]))  # 2 runs
    out = tmp_path / "o"
    runs = expand(spec, "smoke")
    store = Store(out / spec.paper / spec.id)
    held = _hold(store, runs[0].run_id)
    t, buf, result = _run_in_thread(spec=spec, profile="smoke", out=out, max_runs=1,
                                    workers=1, calibrate=False)
    t.join(30)
    stuck = t.is_alive()
    held.unlink()  # let a stuck run go (it then trains the run it waited for)
    t.join(60)
    assert not stuck, buf.getvalue()
    s = result["s"]
    assert s.ok and s.trained == 1 and "waiting for" not in buf.getvalue(), buf.getvalue()
    assert store.is_done(runs[1].run_id) and not store.is_done(runs[0].run_id)


def test_packs_taken_over_from_a_dead_holder_are_counted_in_the_progress(tmp_path):
    """A held run whose holder went away was trained in a pack numbered beyond the plan:
    'pack 2/1 done'."""
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    spec = load_spec(write_spec(tmp_path, seeds=[0]))
    out = tmp_path / "o"
    runs = expand(spec, "smoke")
    store = Store(out / spec.paper / spec.id)
    held = _hold(store, runs[0].run_id)
    t, buf, result = _run_in_thread(spec=spec, profile="smoke", out=out, max_runs=2,
                                    pack_size=2, workers=1, calibrate=False)
    deadline = time.time() + 60
    while "waiting for 1 runs" not in buf.getvalue() and time.time() < deadline:
        time.sleep(0.05)
    held.unlink()
    t.join(60)
    assert not t.is_alive() and result["s"].trained == 2, buf.getvalue()
    shown = [tuple(map(int, m)) for m in re.findall(r"pack (\d+)/(\d+) done", buf.getvalue())]
    assert shown and all(k <= n for k, n in shown), buf.getvalue()


def test_paper_values_are_matched_through_an_index_of_the_cells(tmp_path, monkeypatch):
    """Each paper value was matched by trying every cell (and every run): 1,000 paper values over
    1,000 cells added 8.6 s to `validate`, 1 MiB of them over 100,000 cells took hours. Now each
    is looked up through an index of the cells: the conditions tried grow with the paper values,
    not with paper values x cells."""
    from ssmrepro.report import cells as cells_mod

    n = 300
    lrs = [round(0.001 + i * 1e-6, 9) for i in range(n)]
    spec = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                         {"grid": {"train.lr": lrs}}],
        paper_values=[{"where": {"label": "S6", "train.lr": v}, "value": 0.5, "tol": 0.1}
                      for v in lrs],
        claims=[{"text": f"t{i}", "where": {"label": "S6", "train.lr": v}, "op": ">=",
                 "value": 0.1} for i, v in enumerate(lrs[:50])])
    calls = [0]
    real = cells_mod.value_matches

    def counted(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(cells_mod, "value_matches", counted)
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output
    assert calls[0] < 20 * n * 3, calls[0]  # it was ~2 x n x n per profile


def test_the_cell_index_selects_exactly_what_select_does():
    """``CellIndex.select`` (paper values, claims) gives ``select``'s rows: numbers by value
    within its tolerance (0.1 + 0.2 is 0.3), text as text, a label by a case label, None/NaN
    as missing, any-of lists."""
    import random

    import pandas as pd

    from ssmrepro.report.cells import CellIndex, select
    from ssmrepro.report.columns import LABEL_SEP

    rng = random.Random(0)
    vals = [8, 8.0, "8", 16, 0.1 + 0.2, 0.3, None, float("nan"), "nan", True, "True", "x", 1e300,
            float("inf"), -0.0, 0, "None", 1.0000000001, 1]
    labels = ["S6", "S4D", f"S6{LABEL_SEP}a", f"b{LABEL_SEP}S6", "None", "8"]
    for _ in range(100):
        n = rng.randint(0, 25)
        df = pd.DataFrame({"label": [rng.choice(labels) for _ in range(n)],
                           "a": [rng.choice(vals) for _ in range(n)],
                           "b": [rng.choice(vals[:6]) for _ in range(n)]})
        index = CellIndex(df)
        for _ in range(20):
            where = {}
            for k in rng.sample(["label", "a", "b", "case:0", "case:1", "zz"], rng.randint(0, 2)):
                pool = labels if k in ("label", "case:0", "case:1") else vals
                where[k] = rng.choice(pool) if rng.random() < 0.7 else rng.sample(pool, 2)
            assert list(index.select(where).index) == list(select(df, where).index), where


def test_claims_and_paper_values_are_bounded(tmp_path):
    """Each claim is still judged over every cell of a profile: at most 1,000 claims (the shipped
    specs have 12 at most) and 10,000 paper values (273)."""
    claims = [{"text": f"t{i}", "where": {"label": "S6"}, "op": ">=", "value": i / 2000}
              for i in range(1001)]
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, claims=claims)),
                    "claims: List should have at most 1000 items")


def test_a_where_value_too_large_for_a_float_is_not_a_traceback(tmp_path):
    """An integer beyond any float (10**400) in a claim's or paper value's ``where``: float()
    raised OverflowError in ``cells.norm`` (a traceback in `validate`); now it is a value no
    run has."""
    huge = 10 ** 400
    claims = [{"text": "t", "where": {"label": "S6", "train.lr": huge}, "op": ">=",
               "value": 0.2}]
    _assert_refused(_invoke("validate", write_spec(tmp_path, claims=claims)),
                    "claims.0.where: matches no run")
    pvs = [{"where": {"label": "S6", "train.lr": huge}, "metric": "test.acc", "value": 0.5}]
    res = _invoke("validate", write_spec(tmp_path, name="t-pv", paper_values=pvs))
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output


def test_the_cell_index_opens_lists_of_lists_as_select_does():
    """``label: [[S6]]`` (a list inside the any-of list) matched S6 in ``select`` and no row
    in ``CellIndex``: `validate` called such a claim's where one that matches no run."""
    import pandas as pd

    from ssmrepro.report.cells import CellIndex, select

    df = pd.DataFrame({"label": ["S6", "S4D", "x"], "a": [1, 2, 3]})
    for where in ({"label": [["S6"]]}, {"a": [[1, 2]]}, {"a": [3, [2]]}, {"label": [[["x"]]]}):
        assert list(CellIndex(df).select(where).index) == list(select(df, where).index), where


def test_a_figure_finds_the_paper_value_the_report_compares():
    """A paper value whose ``where`` is an any-of list (``label: [S6, Mamba]``) or a case label
    was compared with its cell in the report (``select``: ``value_matches``) but not drawn on the
    figure, whose lookup compared each key with ``values_equal``."""
    from types import SimpleNamespace as PV

    from ssmrepro.report.cells import PaperValueLookup
    from ssmrepro.report.columns import LABEL_SEP

    pvs = [PV(metric="test.acc", value=0.5, where={"label": ["S6", "Mamba"]}),
           PV(metric="test.acc", value=0.7, where={"label": "(a)", "lr": [0.1, 0.2]}),
           PV(metric="test.acc", value=0.9, where={"lr": [[0.3]]})]
    find = PaperValueLookup(pvs).find
    assert find({"label": "S6"}, "test.acc") is pvs[0]
    assert find({"label": f"(a){LABEL_SEP}x", "lr": 0.2}, "test.acc") is pvs[1]
    assert find({"label": f"(a){LABEL_SEP}x", "lr": 0.3}, "test.acc") is pvs[2]
    assert find({"label": "S4D", "lr": 0.4}, "test.acc") is None


def test_plot_and_verify_of_a_partly_trained_profile_say_how_many_runs_finished(trained_store,
                                                                                 tmp_path):
    """A `run` interrupted (Ctrl-C) or cut leaves a profile partly trained: plot / verify exited 0
    and their console said only 'Verdicts: 0 PASS, 0 FAIL, 0 MISSING, 1 UNTESTED' (a spec without
    checkable claims); only report.md counted the runs."""
    spec, _ = _copy_trained(trained_store, tmp_path)
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "runs finished" not in res.output, res.output  # all trained
    raw = yaml.safe_load(spec.read_text())
    raw["seeds"] = [0, 1]  # one more run per cell: seed 1 not trained
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    for cmd in ("plot", "verify"):
        res = _invoke(cmd, spec, "--out", tmp_path / "out", "--profile", "smoke")
        assert res.exit_code == 0, res.output
        assert "1 of 2 runs finished" in " ".join(res.output.split()), res.output
        assert "ssmrepro run" in res.output, res.output
    res = _invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke", "--json")
    assert '"expected": 2' in res.output and '"finished": 1' in res.output, res.output


@pytest.mark.parametrize("key,value,why", [("lr", 0.02, "train.lr=0.01"),
                                           ("max_steps", 40000, "train.max_steps=")])
def test_a_spec_edited_after_its_runs_does_not_report_the_old_runs_as_its_own(trained_store,
                                                                               tmp_path, key,
                                                                               value, why):
    """train.lr changed in the spec after `run` (the records' ids no longer planned): plot read
    the profile's table as it is and reported the lr-0.01 runs as the new spec's, '1 runs
    expected, 1 finished'. The rows are now dropped with a warning; a table whose rows differ
    only in run id (a code version change) still stands for its runs. Its learning curves
    (curves.csv, which has no train.lr column to contradict) were drawn all the same."""
    spec, folder = _copy_trained(trained_store, tmp_path)
    raw = yaml.safe_load(spec.read_text())
    raw["figures"] = [raw.pop("figure"), {"kind": "curves", "series": ["val.acc"],
                                          "name": "lc"}]
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "not used" not in res.output, res.output
    assert (folder / "lc-smoke.png").exists() and "not drawn" not in res.output, res.output
    shutil.rmtree(folder / "runs")  # a fresh clone: the committed table only
    table = folder / "results-smoke.csv"
    text = table.read_text()
    rid = text.splitlines()[1].split(",")[0]
    table.write_text(text.replace(rid, "0123456789ab"))  # an older run id, same config
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "not used" not in res.output, res.output
    assert "not drawn" not in res.output, res.output  # the curves of the older id too
    assert "1 runs expected, 1 finished" in (folder / "report-smoke.md").read_text()
    raw = yaml.safe_load(spec.read_text())
    raw["train"][key] = value
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert why in out and "the row is not used" in out, res.output
    assert "1 runs expected, 0 finished" in (folder / "report-smoke.md").read_text()
    assert "lc-smoke.png not drawn" in out, res.output  # no curve of the old run either


def test_ctrl_c_while_the_command_line_is_still_importing_is_one_line(monkeypatch, capsys):
    """Ctrl-C in the first seconds of `ssmrepro ...` (torch, pandas and matplotlib loading, before
    the commands' error boundary exists) printed a KeyboardInterrupt traceback from whatever
    module was loading. The entry point turns it into one line and exit 130."""
    import importlib.abc
    import sys

    from ssmrepro.__main__ import main

    class Interrupted(importlib.abc.MetaPathFinder):  # Ctrl-C while ssmrepro.cli loads
        def find_spec(self, name, path=None, target=None):
            if name == "ssmrepro.cli":
                raise KeyboardInterrupt
            return None

    for name in [m for m in sys.modules if m == "ssmrepro.cli" or m.startswith("ssmrepro.cli.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted") and "Traceback" not in err, err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("leftover", ["arrays", "other"])
def test_a_cache_entry_folder_without_its_meta_json_is_rebuilt(tmp_path, leftover):
    """A cache entry folder holding files but no meta.json (a partial copy of a cache, or a file
    put there) was never rebuilt: the rename of the new entry onto it failed, and every run
    stopped with 'cannot use .../.tmp-listops-...: Directory not empty' (a temporary folder
    that no longer existed)."""
    import numpy as np

    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", root / "lra/listops-1000")
    good = load_lra("listops", "test", root)
    entry, x = good.cache_path, np.array(good.x)
    if leftover == "arrays":
        (entry / "meta.json").unlink()
    else:
        shutil.rmtree(entry)
        entry.mkdir()
        (entry / "notes.txt").write_text("mine")
    with pytest.warns(UserWarning, match="damaged cache entry .*without a meta.json"):
        again = load_lra("listops", "test", root)
    assert (entry / "meta.json").is_file() and (np.asarray(again.x) == x).all()


@pytest.mark.parametrize("train,why", [
    ({"eps": 1e-45}, "eps 1e-45 is below the smallest normal float32"),
    ({"grad_clip": 1e-300}, "grad_clip 1e-300 is not above eps"),
    ({"grad_clip": 1e-30}, "grad_clip 1e-30 is not above eps"),
    ({"schedule": {"kind": "cosine", "min_lr": 5.0}}, "schedule.min_lr 5 is above lr 0.01"),
])
def test_optimiser_settings_that_cannot_train_as_asked_are_refused(tmp_path, train, why):
    """Accepted and trained without a word: an Adam eps below float32's smallest normal number
    (flushed to 0: 0 / 0 for a parameter without a gradient, every run 'diverged' at step 1), a
    grad_clip far below eps (each update about grad_clip / eps of the lr: the runs ended 'ok'
    with the untrained model's numbers) and a min_lr above the lr (the cosine 'decay' raised the
    learning rate 500x). eps 1e-37 and a grad_clip above eps still train."""
    base = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
            "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    _assert_refused(_invoke("validate", write_spec(tmp_path, train={**base, **train})), why)
    ok = write_spec(tmp_path, train={**base, "eps": 1e-37, "grad_clip": 1e-6,
                                     "schedule": {"kind": "cosine", "min_lr": 0.01}})
    assert _invoke("validate", ok).exit_code == 0


def test_ids_that_differ_only_in_case_are_rejected(tmp_path):
    """Specs T-spec and t-spec passed `validate --all`: on a case-insensitive disk (macOS,
    Windows) their results folders are one, and each run replaced the other's tables."""
    root = _project(tmp_path, small=True)
    env = {"SSMREPRO_ROOT": str(root)}
    (root / "experiments/other").mkdir()
    twin = root / "experiments/other/Huang2025-tab1.yaml"
    shutil.copy(root / "experiments/huang2025/huang2025-tab1.yaml", twin)
    _edit(twin, id="Huang2025-tab1", alias=None)
    _assert_refused(_invoke("validate", "--all", env=env), "differs only in case")
    _assert_refused(_invoke("show", "huang2025-tab1", env=env), "differs only in case")


@pytest.mark.parametrize("override,why", [
    ({"profiles": {"smoke": {}, "quick": {}, "paper": {}, "smoke-set-fcd9b6": {}}},
     "profile 'smoke-set-fcd9b6': a name ending in set-<6 hex digits>"),
    ({"profiles": {"smoke": {}, "quick": {}, "paper": {}, "set-fcd9b6": {}}},
     "profile 'set-fcd9b6': a name ending in set-<6 hex digits>"),
    ({"profiles": {"smoke": {}, "quick": {}, "paper": {}, "Smoke": {}}},
     "profiles 'Smoke' and 'smoke' differ only in case"),
    ({"figure": None, "figures": [{"kind": "bars", "x": "label", "name": "figure-set-fcd9b6"}]},
     "'figure-set-fcd9b6' ends in set-<6 hex digits>"),
    ({"figure": None, "figures": [{"kind": "bars", "x": "label", "name": "Fig"},
                                  {"kind": "bars", "x": "label", "name": "fig"}]},
     "(Fig-smoke.png on a case-insensitive disk)"),
])
def test_profile_and_figure_names_that_write_another_ones_files_are_refused(tmp_path, override,
                                                                            why):
    """A profile named smoke-set-fcd9b6 wrote results-smoke-set-fcd9b6.csv (and its figure and
    report), the files of profile smoke run with --set train.lr=0.02, replacing them; profiles
    Smoke and smoke, or figures Fig and fig, write one file on a case-insensitive disk."""
    _assert_refused(_invoke("validate", write_spec(tmp_path, **override)), why)
    ok = write_spec(tmp_path, profiles={"smoke": {}, "quick": {}, "paper": {}, "set-up": {},
                                        "reset-abc": {}})
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("fig", [{"kind": "lines", "metric": "test.acc"},
                                 {"kind": "lines", "metric": "test.acc", "x": "label"}])
def test_a_lines_figure_over_text_values_is_drawn(trained_store, tmp_path, fig):
    """A lines figure whose x is the labels (given, or the default where no swept key varies)
    raised 'ValueError: could not convert string to float: S6' while drawing: a traceback
    after training. It is drawn with the labels as categories."""
    spec, folder = _copy_trained(trained_store, tmp_path)
    raw = yaml.safe_load(spec.read_text())
    raw["figures"] = [{**fig, "name": "lc"}]
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert (folder / "lc-smoke.png").is_file()


@pytest.mark.parametrize("fig,why", [
    ({"kind": "curves", "series": ["val.acc"], "ylim": [-1e308, 1.7e308]},
     "is wider than a float holds"),
    ({"kind": "lines", "metric": "test.acc", "x": "label", "reference": {"r": "1"}},
     "'label' is read as a number, but holds 'S6'"),
    ({"kind": "recall_grid", "columns": {"S6": "linear"}, "x": "label", "y": "model.d_model",
      "regime": ["task.vocab", "task.T"], "vocab": "task.vocab", "facts": "task.T"},
     "'label' is read as a number, but holds 'S6'"),
])
def test_figure_settings_that_cannot_be_drawn_are_refused(tmp_path, fig, why):
    """A y range wider than a float holds raised matplotlib's 'arange: cannot compute length'
    (a traceback after training); a reference line is drawn at the x values, and a recall grid
    on its D and N axes, which must be numbers (recall_grid with x: label raised 'could not
    convert string to float' after training)."""
    _assert_refused(_invoke("validate", _one_run_spec(tmp_path, figures=[fig])), why)


def test_a_case_with_an_empty_seed_list_is_refused(tmp_path):
    """A case's `seeds: []` gave it no runs: the case left the profile without a word
    ('smoke 1 runs' of two cases), where an empty spec or profile seed list is refused."""
    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}, "seeds": []}]
    res = _invoke("validate", write_spec(tmp_path, sweep=[{"cases": cases}]))
    _assert_refused(res, "cases.1", "seeds: an empty list")


def test_an_archive_that_failed_to_install_is_not_reused_for_another_url(tmp_path):
    """`data download lra --url file://A/lra_release.gz` of a file that is no archive kept it in
    downloads/, and every later download of that file name installed it again, a corrected
    `--url` and `--force` included: 'not a tar or zip archive' for ever, naming no way out.
    An archive kept from a `--url` without a checksum is downloaded again."""
    import tarfile

    (tmp_path / "a").mkdir()
    (tmp_path / "a/lra_release.gz").write_text("not an archive")
    src = tmp_path / "src/lra_release"
    shutil.copytree(ROOT / "tests/assets/lra/lra/listops-1000", src / "listops-1000")
    (tmp_path / "b").mkdir()
    with tarfile.open(tmp_path / "b/lra_release.gz", "w:gz") as tar:
        tar.add(src, arcname="lra_release")
    root = tmp_path / "data"
    args = ("data", "download", "lra", "--dir", root, "--no-progress", "--url")
    res = _invoke(*args, f"file://{tmp_path}/a/lra_release.gz")
    assert res.exit_code != 0 and "not a tar or zip archive" in res.output, res.output
    res = _invoke(*args, f"file://{tmp_path}/b/lra_release.gz")
    assert res.exit_code == 0, res.output
    assert (root / "lra/listops-1000/basic_train.tsv").is_file()


def test_a_kept_archive_that_cannot_be_installed_names_the_way_out(tmp_path):
    """A kept downloads/lra_release.gz that is no archive (the official LRA archive has no
    checksum to check it by) was installed again by every `data download lra`: 'not a tar or zip
    archive' for ever, with no word that deleting it lets the download run again. No network:
    the kept file is used before any download."""
    root = tmp_path / "data"
    (root / "downloads").mkdir(parents=True)
    (root / "downloads/lra_release.gz").write_text("not an archive")
    res = _invoke("data", "download", "lra", "--dir", root, "--no-progress")
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert "and re-run to download it again" in " ".join(res.output.split()), res.output


def test_records_reused_through_a_chain_of_reuse_are_read(tmp_path):
    """rb reuses ra and rc reuses rb: rb showed ra's runs done, but rc read only rb's own
    records (none) and trained the same runs again; a loop of reuse (ra reusing rc) ends."""
    root = tmp_path / "proj"
    folder = root / "experiments/tests"
    folder.mkdir(parents=True)
    (root / "ssmrepro").mkdir()
    for name, reuse in (("ra", []), ("rb", ["ra"]), ("rc", ["rb"])):
        _one_run_spec(folder, name=name, reuse=reuse,
                      train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2,
                             "val_size": 16, "test_size": 16, "eval_every": 2,
                             "eval_batch_size": 16})
    env, out = {"SSMREPRO_ROOT": str(root)}, tmp_path / "out"
    res = _invoke("run", "ra", "--profile", "smoke", "--out", out, "--no-plot", env=env)
    assert res.exit_code == 0, res.output
    _edit(folder / "ra.yaml", reuse=["rc"])  # a loop
    for name in ("rb", "rc"):
        res = _invoke("run", name, "--profile", "smoke", "--out", out, "--dry-run", env=env)
        assert res.exit_code == 0 and "1 done, 0 pending" in res.output, res.output


@pytest.mark.parametrize("where", ["huang2025/my-spec.yml", "my-spec.yaml", "huang2025/sub/my-spec.yaml"])
def test_a_spec_no_command_reads_is_named_by_validate_all(tmp_path, where):
    """A spec saved as .yml, at the top of experiments/ or in a folder below a paper's was passed
    over in silence: `validate --all` said ok for the others and exited 0, and `run my-spec` said
    only 'unknown experiment'."""
    root = _project(tmp_path, small=True)
    env = {"SSMREPRO_ROOT": str(root)}
    spec = root / "experiments" / where
    spec.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "experiments/huang2025/huang2025-fig1.yaml", spec)
    _edit(spec, id="my-spec", alias=None)
    _assert_refused(_invoke("validate", "--all", env=env), "the spec 'my-spec' is not read")
    _assert_refused(_invoke("show", "my-spec", env=env), "experiments/<paper>/<id>.yaml")
    spec.rename(spec.with_name("_my-spec.yaml"))  # kept out on purpose
    assert _invoke("show", "huang2025-fig1", env=env).exit_code == 0


@pytest.mark.parametrize("bad", [float("nan"), 1e30, -3.0])
def test_a_cache_entry_with_pixels_outside_0_to_255_is_rebuilt(tmp_path, bad):
    """A pixel cache entry whose inputs held NaN (a float array of the same shape) was trained
    on: the run was recorded 'diverged' at step 0, a fault of the data read as the model's; a
    pixel of 1e30 trained 'ok' on noise. prepare() writes uint8 pixels."""
    import numpy as np

    from ssmrepro.data import DIGITS
    from ssmrepro.data.datasets import load_lra

    root = tmp_path / "data"
    shutil.copytree(ROOT / "tests/assets/lra/digits", root / "digits")
    good = load_lra("image", "train", root=root, accept_sources=[DIGITS])
    x = np.array(good.x)
    damaged = x.astype(np.float32)
    damaged[0, :4] = bad
    np.save(good.cache_path / "train.x.npy", damaged)
    with pytest.warns(UserWarning, match="damaged cache entry .*pixel values"):
        again = load_lra("image", "train", root=root, accept_sources=[DIGITS])
    assert again.x.dtype == np.uint8 and (np.asarray(again.x) == x).all()


@pytest.mark.parametrize("copy", ["keep-nth-d8-old-cpu.json", "a-keep-nth-d8-cpu.json"])
def test_roofline_takes_each_workload_once(tmp_path, copy):
    """A copy of a packs record under another name (a backup, keep-nth-d8-old-cpu.json) was a
    second, indistinguishable row of performance.md and point of the figure; the record that
    `bench keep-nth-d8` writes is kept and the copy left out with a warning."""
    bench = tmp_path / "bench"
    bench.mkdir()
    src = ROOT / "results/bench/keep-nth-d8-cpu.json"
    shutil.copy(src, bench / src.name)
    shutil.copy(src, bench / copy)
    res = _invoke("bench", "roofline", "--out", bench)
    assert res.exit_code == 0, res.output
    assert f"{copy}: a second record of workload 'keep-nth-d8'" in " ".join(res.output.split())
    table = (bench / "performance.md").read_text()
    assert table.count("| keep-nth-d8 (") == 1, table


def test_two_paper_values_of_one_cell_named_by_different_keys_are_refused(tmp_path):
    """Paper values `where: {label: S6}` (0.5) and `where: {model.mixer: s6, model.d_model: 8}`
    (0.9) name one cell: both passed validate and the report compared the cell with each."""
    pvs = [{"where": {"label": "S6"}, "metric": "test.acc", "value": 0.5, "tol": 0.1},
           {"where": {"model.mixer": "s6", _D: 8}, "metric": "test.acc", "value": 0.9}]
    res = _invoke("validate", write_spec(tmp_path, paper_values=pvs))
    _assert_refused(res, "paper_values.1.where: names the cell of paper_values.0")
    pvs[1]["where"] = {"model.mixer": "s4d"}
    assert _invoke("validate", write_spec(tmp_path, paper_values=pvs)).exit_code == 0


def test_two_claims_whose_where_name_the_same_runs_by_different_keys_are_refused(tmp_path):
    """Claims alike but for `where: {label: S6}` and `where: {model.mixer: s6, model.d_model:
    8}`, which select the same runs, passed validate: one verdict printed and counted twice."""
    c = {"check": "threshold", "text": "t", "metric": "test.acc", "op": ">=", "value": 0.5}
    claims = [{**c, "where": {"label": "S6"}}, {**c, "where": {"model.mixer": "s6", _D: 8}}]
    res = _invoke("validate", write_spec(tmp_path, claims=claims))
    _assert_refused(res, "claims.1: the same claim as claims.0")
    claims[1]["where"] = {"model.mixer": "s4d"}
    assert _invoke("validate", write_spec(tmp_path, claims=claims)).exit_code == 0


def test_generated_pathfinder_shards_removed_beside_their_meta_json_are_named(tmp_path):
    """A generated Pathfinder folder whose meta.json is there but whose shards are not (a partial
    copy) stopped `run` with 'error: cannot use: FileNotFoundError', naming no folder."""
    from ssmrepro.data.pathfinder import (
        PathfinderWriter,
        generate_pathfinder,
        lra_params,
        read_pathfinder_dir,
    )

    images, labels = generate_pathfinder(3, 32, seed=2, chunk_size=256)
    d = tmp_path / "d"
    w = PathfinderWriter(d, lra_params(32), fmt="npy", shard_size=3)
    w.add(images, labels)
    w.close({"seed": 2})
    for f in (d / "shards").iterdir():
        f.unlink()
    with pytest.raises(ValueError, match="damaged generated Pathfinder shards: no imgs_") as err:
        read_pathfinder_dir(d)
    assert str(d) in str(err.value)


@pytest.mark.parametrize("betas", [[0.9, 0.99999999], [0.99999999, 0.999]])
def test_adam_betas_that_are_1_in_float32_are_refused(tmp_path, betas):
    """betas below 1 but 1.0 in float32, the dtype the moments are kept in, were accepted:
    beta2 0.99999999 left v at 0 (every run 'diverged' at step 1), beta1 so left m at 0 (the
    runs ended 'ok' with the untrained model's numbers). 0.9999 still trains."""
    base = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
            "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    res = _invoke("validate", write_spec(tmp_path, train={**base, "betas": betas}))
    _assert_refused(res, "0.99999999 is 1.0 in float32")
    ok = write_spec(tmp_path, train={**base, "betas": [0.9, 0.9999]})
    assert _invoke("validate", ok).exit_code == 0
    ok = write_spec(tmp_path, train={**base, "betas": betas, "dtype": "float64"})
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("lr,wd,scale", [(0.5, 2.0, {}), (1.0, 1.0, {}),
                                         (0.1, 5.0, {"delta": 3.0})])
def test_adamw_decay_that_zeroes_the_weights_each_step_is_refused(tmp_path, lr, wd, scale):
    """AdamW multiplies each decayed weight by 1 - lr x weight_decay every step: at 1 or more
    (lr 0.5, weight_decay 2) every step zeroed or flipped them, and the runs ended 'ok' with an
    untrained model's numbers. Adam's coupled decay (an L2 term in the gradient) is not that."""
    base = {"optimizer": "adamw", "lr": lr, "weight_decay": wd, "lr_scale": scale,
            "batch_size": 8, "max_steps": 4}
    # S6 alone: S4D has no 'delta' group, whose scale is refused on its own (round 31, M)
    s6 = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}]
    _assert_refused(_invoke("validate", write_spec(tmp_path, train=base, sweep=s6)),
                    "weight_decay", "< 1")
    ok = write_spec(tmp_path, train={**base, "optimizer": "adam"}, sweep=s6)
    assert _invoke("validate", ok).exit_code == 0
    ok = write_spec(tmp_path, train={**base, "weight_decay": 0.9 / lr / 3}, sweep=s6)
    assert _invoke("validate", ok).exit_code == 0


def test_an_unknown_spec_name_in_other_case_suggests_the_spec():
    """`show HUANG2025-TAB1` suggested nothing: the close matches were case-sensitive."""
    res = _invoke("show", "HUANG2025-TAB1")
    _assert_refused(res, "unknown experiment", "Did you mean: huang2025-tab1")


@pytest.mark.parametrize("what", ["folder", "missing"])
def test_a_file_url_that_names_no_archive_file_is_refused(tmp_path, what):
    """`data download --url file://<a folder>` said 'no such file' and exited 1 ('re-run'):
    a folder is named as one, and either is bad input (exit 2) before anything is made."""
    src = tmp_path / "mirror"
    if what == "folder":
        src.mkdir()
    res = _invoke("data", "download", "lra", "--url", f"file://{src}", "--dir", tmp_path / "d",
                  "--no-progress")
    _assert_refused(res, "a folder, not an archive file" if what == "folder" else "no file at")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("train", [
    # 1,000 evaluations of two named sets with 20,000-character names: an 80 MB record
    {"max_steps": 1000, "eval_every": 1, "val_size": 1, "test_size": 1,
     "evals": {"A" * 20000: {"T": 8}, "B" * 20000: {"T": 8}}},
    # a million plain evaluations (one per step), within the evaluation budget
    {"max_steps": 10**6, "eval_every": 1, "val_size": 1, "test_size": 1, "batch_size": 1},
])
def test_a_run_whose_record_would_be_too_large_to_read_back_is_refused(tmp_path, train):
    """A run's record holds its evaluation history, and the store reads back at most 64 MiB: the
    first case trained (7 s), its 80 MB record was quarantined as unreadable on the spot, the
    results table was left empty ('not a readable CSV table') and every `run` trained it again.
    `validate` now refuses such a history before training, and the store never writes a record
    it would not read back."""
    base = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "eval_batch_size": 16}
    spec = write_spec(tmp_path, seeds=[0], train={**base, **train})
    res = _invoke("validate", spec)
    _assert_refused(res, "the evaluation history would take up to", "raise eval_every")

    import ssmrepro.store as store_mod

    st = store_mod.Store(tmp_path / "out" / "tests" / "t")
    st.runs.mkdir(parents=True)
    rec = {"run_id": "r1", "history": [{"step": i, "val.loss": 1.0} for i in range(3000)]}
    small = len(json.dumps(rec)) // 2
    orig = store_mod.MAX_RECORD_BYTES
    store_mod.MAX_RECORD_BYTES = small
    try:
        with pytest.raises(OSError, match="more than the"):
            st.write(rec)
    finally:
        store_mod.MAX_RECORD_BYTES = orig
    assert not st.record_path("r1").exists()


def _seed_weights_swapped(tmp_path):
    """koren2026-fig14 cut to one cell of two seeds, trained with its weights saved, then seed
    1's weights copied over seed 0's (the same model, so the same shapes): (spec, args, {seed:
    weights path})."""
    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig14.yaml").read_text())
    raw.update(id="kv", paper="tests", claims=[], paper_values=[])
    raw.pop("reuse", None)
    smoke = raw["profiles"]["smoke"]
    smoke["sweep"] = [{"cases": [{"label": "MHA", "set": {"model.head_pattern": "MHA"}}]},
                      {"grid": {"model.heads": [2], "model.d_state": [2]}}]
    smoke["seeds"] = [0, 1]
    spec = tmp_path / "kv.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    args = ("--out", tmp_path / "out", "--profile", "smoke")
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1", "--no-plot")
    assert res.exit_code == 0, res.output
    runs = tmp_path / "out/tests/kv/runs"
    by_seed = {json.loads(p.read_text())["seed"]: p.with_suffix(".pt")
               for p in runs.glob("*.json")}
    shutil.copy(by_seed[1], by_seed[0])
    return spec, args, by_seed


def test_saved_weights_of_another_run_of_the_same_shapes_are_not_loaded_as_this_runs(tmp_path):
    """save_weights: seed 1's weights copied over seed 0's were loaded as seed 0's, and its
    plot-time analysis (output_variance) computed from them without a word. The record now
    names its weights' SHA-256; other weights are quarantined with a warning and the run
    trained again."""
    spec, args, by_seed = _seed_weights_swapped(tmp_path)
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert f"saved weights {by_seed[0].name} quarantined" in said, res.output
    assert "not the weights its record names" in said and "trained again" in said, res.output
    table = (tmp_path / "out/tests/kv/output_variance-smoke.csv").read_text().splitlines()
    assert len(table) == 2 and table[1].split(",")[4] == "1", table  # seed 1's row only
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1", "--no-plot")
    assert res.exit_code == 0 and "trained 1 runs" in " ".join(res.output.split()), res.output


@pytest.mark.parametrize("edit", [
    lambda h: h * 1000,  # every evaluation given 1,000 times
    lambda h: h[::-1],  # reordered
    lambda h: [h[0], dict(h[-1], step=h[0]["step"])],  # one step twice, other values
])
def test_a_record_whose_history_does_not_increase_is_quarantined(trained_store, tmp_path, edit):
    """A run evaluates at increasing steps; a record whose history repeated its rows 1,000 times
    (4,000 evaluations of a 4-step run) or reordered them was trusted, and the learning curve
    drew the mean of the rows given for a step. It is quarantined now, and the run trained
    again."""
    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert len(rec["history"]) >= 2
    rec["history"] = edit(rec["history"])
    path.write_text(json.dumps(rec))
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "history steps that do not increase" in said and "trained 1 runs" in said, res.output
    steps = [h["step"] for h in json.loads(path.read_text())["history"]]
    assert steps == sorted(set(steps))


@pytest.mark.parametrize("edit,needle", [
    (lambda r: r["metrics"].update({f"m{i}.acc": 0.5 for i in range(10000)}),
     "metrics no run of its config records ('m0.acc', 'm1.acc', 'm2.acc' and 9,997 more)"),
    (lambda r: r["metrics"].update({"test.best_acc": 0.5}), "('test.best_acc')"),
    (lambda r: r["history"][0].update({"colour": 0.5}), "a history row with a value no run"),
])
def test_a_record_with_metrics_no_run_records_is_quarantined(trained_store, tmp_path, edit,
                                                             needle):
    """A record's metrics and history rows are what train.py records for the run's sets (val,
    test, train and its named evaluation sets); one holding 10,000 names of another tool's was
    trusted, and every name became a column of results.csv (and of the export)."""
    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    edit(rec)
    path.write_text(json.dumps(rec))
    res = _invoke("plot", spec, "--out", tmp_path / "out", "--profile", "smoke")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in said and needle in said, res.output
    assert "m0.acc" not in (store / "results-smoke.csv").read_text()


def test_a_committed_curves_table_giving_a_step_twice_is_not_drawn(trained_store, tmp_path):
    """A fresh clone (no run records): the profile's curves table with each evaluation of the
    run given three times, at accuracies 0, 1 and its own, was drawn as their mean without a
    word (only results tables were checked for a run held twice). Its rows are now left out
    with a warning; the same run's rows under several labels still agree."""
    spec, folder = _copy_trained(trained_store, tmp_path)
    raw = yaml.safe_load(spec.read_text())
    raw["figures"] = [raw.pop("figure"), {"kind": "curves", "series": ["val.acc"],
                                          "name": "lc"}]
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    args = ("--out", tmp_path / "out", "--profile", "smoke")
    assert _invoke("plot", spec, *args).exit_code == 0
    shutil.rmtree(folder / "runs")
    table = folder / "curves-smoke.csv"
    head, *rows = table.read_text().splitlines()
    col = head.split(",").index("val.acc")
    out = [head]
    for row in rows:
        cells = row.split(",")
        out += [",".join(cells[:col] + [v] + cells[col + 1:]) for v in ("0.0", "1.0", cells[col])]
    table.write_text("\n".join(out) + "\n")
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "with different results; its rows are not used" in said, res.output
    assert "lc-smoke.png not drawn" in said, res.output
    table.write_text("\n".join([head, *rows, *rows]) + "\n")  # the same rows twice: they agree
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0 and "not used" not in res.output, res.output
    assert "not drawn" not in res.output, res.output


def test_a_data_generate_worker_that_dies_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    """`kill -9` of one `data generate pathfinder --workers 2` process: concurrent.futures'
    BrokenProcessPool reached the console as an 80-line traceback (exit 1). Now one line that
    says a worker died and how to resume; the half-written folder has no meta.json."""
    import ssmrepro.data.pathfinder as pf
    from ssmrepro.data._workers import WorkerDied, iter_chunks

    with pytest.raises(WorkerDied, match="a worker process died"):
        next(iter_chunks(os._exit, workers=2))  # each worker process ends at its first chunk
    monkeypatch.setattr(pf, "iter_chunks", lambda fn, workers, ahead=None:
                        iter_chunks(os._exit, workers, ahead))
    out = tmp_path / "pf"
    res = _invoke("data", "generate", "pathfinder", "--n", "40", "--workers", "2",
                  "--shard-size", "10", "--out", out)
    said = " ".join(res.output.split())
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "a worker process died" in said and "re-run the same command" in said, res.output
    assert not (out / "meta.json").exists()


def test_a_mechanistic_figure_sample_far_out_is_refused_and_one_sequence_drawn(tmp_path):
    """koren2026-fig3's hidden_state figure with `sample: 10**8`: validate accepted it, and after
    training the plot drew 10**8 + 1 probe sequences to keep the last (a failed 800 MB
    allocation under a 6 GB limit, a traceback). The index is bounded like a test set, and only
    the one sequence is drawn: the same as row `sample` of the full probe batch."""
    import torch

    from ssmrepro.analysis import mechanistic as mech
    from ssmrepro.plots.mechanistic import _probe
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.tasks import build_task

    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig3.yaml").read_text())
    raw.update(id="k3", paper="tests")
    raw["figure"]["sample"] = 10**8
    spec = tmp_path / "k3.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    _assert_refused(_invoke("validate", spec), "figure.sample", "less than 100000000")
    raw["figure"]["sample"] = 0
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    task = build_task(expand(load_spec(spec), "smoke")[0].task)
    ids, y = mech.probe_batch(task, 7, 6)
    for s in (0, 3, 5):
        one_ids, one_y = _probe(task, 7, s)
        assert torch.equal(one_ids, ids[s:s + 1]) and torch.equal(one_y, y[s:s + 1])


def test_more_percentiles_than_whole_ones_are_refused(tmp_path):
    """aggregate.percentiles of 20,000 values (a 200 kB list): a column per metric each, a
    2.3 MB report and 13 s of `plot` on a two-run store (five times that within the 1 MiB spec
    cap). At most 101, every whole percentile, which is accepted."""
    agg = {"reduce": "mean", "metrics": ["test.acc"]}
    spec = write_spec(tmp_path, aggregate={**agg, "percentiles": [i * 0.005 for i in range(20000)]})
    _assert_refused(_invoke("validate", spec), "aggregate.percentiles", "at most 101")
    spec = write_spec(tmp_path, aggregate={**agg, "percentiles": list(range(101))})
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output


def _lra_archive(tmp_path: Path) -> Path:
    """A tiny LRA release tar (lra_release/listops-1000/basic_train.tsv, a header only)."""
    import tarfile

    src = tmp_path / "src" / "lra_release" / "listops-1000"
    src.mkdir(parents=True)
    (src / "basic_train.tsv").write_text("Source\tTarget\n")
    archive = tmp_path / "lra.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "src" / "lra_release", arcname="lra_release")
    return archive


def test_a_killed_download_leaves_no_scratch_copy_behind_once_run_again(tmp_path):
    """`kill -9` of `data download lra` while it extracted left `<root>/lra/.extract-...` (168 MB
    of a 200 MB archive here; the LRA release is gigabytes) for ever: the same command, run
    again, installed the data and kept the partial copy. A scratch folder of this host's dead
    process is now removed; a running process's and another host's are left alone."""
    import subprocess
    import sys

    from ssmrepro.util import HOST, scratch_folder

    archive = _lra_archive(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lra = tmp_path / "root" / "lra"
    lra.mkdir(parents=True)
    mine = scratch_folder(lra, ".extract-lra")  # a running process's (this one's)
    mine.mkdir()
    left = lra / f".extract-lra-{HOST}-{dead.pid}-abc123"  # a killed extraction's
    (left / "lra_release").mkdir(parents=True)
    other = lra / f".extract-lra-elsewhere-{dead.pid}-abc123"  # another host's, on a shared disk
    other.mkdir()
    res = _invoke("data", "download", "lra", "--dir", tmp_path / "root", "--url",
                  archive.as_uri(), "--no-progress")
    assert res.exit_code == 0 and "installed" in res.output, res.output
    assert (lra / "listops-1000" / "basic_train.tsv").exists()
    assert not left.exists() and mine.exists() and other.exists()


def test_a_committed_analysis_table_row_of_no_planned_run_is_not_averaged_in(tmp_path):
    """A fresh clone's output_variance.csv (no saved weights) has no run ids: rows of a seed the
    profile does not have (seed 9 of koren2026-fig14's one-seed quick profile) were averaged into
    their cells and turned two FAIL verdicts into PASS; a run given twice with other values was
    averaged too. Such rows are left out with a warning."""
    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig14.yaml").read_text())
    raw.update(id="kv", paper="tests", claims=[], paper_values=[])
    raw.pop("reuse", None)
    raw["profiles"]["smoke"]["sweep"][1]["grid"] = {"model.heads": [1], "model.d_state": [2]}
    spec = tmp_path / "kv.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    args = ("--out", tmp_path / "out", "--profile", "smoke")
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    folder = tmp_path / "out/tests/kv"
    shutil.rmtree(folder / "runs")  # a fresh clone: the committed table only
    table = folder / "output_variance-smoke.csv"
    head, *rows = table.read_text().splitlines()
    assert len(rows) == 4 and head.split(",")[4] == "seed"

    def summary_noise():
        text = (folder / "summary-smoke.csv").read_text().splitlines()
        col = text[0].split(",").index("out.noise_var")
        return [line.split(",")[col] for line in text[1:]]

    assert _invoke("plot", spec, *args).exit_code == 0
    before = summary_noise()
    cells = rows[0].split(",")
    seed9 = ",".join(cells[:4] + ["9", "1e-09"] + cells[6:])
    twice = ",".join(cells[:5] + ["1e-09"] + cells[6:])
    for extra, needle in ((seed9, "seed=9; the row is not used"),
                          (twice, "is given 2 times with different values")):
        table.write_text("\n".join([head, *rows, extra]) + "\n")
        res = _invoke("plot", spec, *args)
        said = " ".join(res.output.split())
        assert res.exit_code == 0 and needle in said, res.output
        after = summary_noise()
        if "seed=9" in needle:
            assert after == before
        else:  # the run given twice is left out: its cell has no value
            assert after[0] != before[0] and after[1:] == before[1:]


def test_a_committed_histogram_table_giving_a_bin_twice_is_a_message(tmp_path):
    """huang2025-fig1 in a fresh clone (its committed histograms.csv, no run records): a bin of
    a cell given twice was a traceback in verify and plot ('cannot reindex on an axis with
    duplicate labels'); it is a damaged table now, named with the one fix."""
    folder = tmp_path / "out" / "huang2025" / "huang2025-fig1"
    shutil.copytree(ROOT / "results" / "huang2025" / "huang2025-fig1", folder)
    table = folder / "histograms.csv"
    head, *rows = table.read_text().splitlines()
    table.write_text("\n".join([head, *rows, rows[0].rsplit(",", 1)[0] + ",1"]) + "\n")
    res = _invoke("verify", "huang2025-fig1", "--out", tmp_path / "out")
    _assert_refused(res, "histograms.csv", "is given more than once", "delete it to rebuild it")


def test_data_generate_pathfinder_lra_format_checks_the_files_it_makes(tmp_path, monkeypatch):
    """`data generate pathfinder --format lra --n 100000000 --res 256` writes a PNG file per
    image: only --format npy was checked for room, so it started writing 10^8 files (100 a
    second) into a file system of 16 million inodes. The file count (and a least size) is now
    checked against the file system before generating."""
    import types

    real = os.statvfs
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(
        **{k: getattr(real(p), k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree",
                                            "f_bavail")}, f_files=10_000, f_ffree=500,
        f_favail=500))
    out = tmp_path / "pf"
    res = _invoke("data", "generate", "pathfinder", "--format", "lra", "--n", "600",
                  "--res", "32", "--workers", "1", "--out", out)
    _assert_refused(res, "make 602 files", "room for only 500 more")
    res = _invoke("data", "generate", "pathfinder", "--n", "600", "--shard-size", "1",
                  "--res", "32", "--workers", "1", "--out", out)  # two .npy files a shard
    _assert_refused(res, "make 1,201 files", "room for only 500 more")
    assert not out.exists()


def test_a_fresh_clone_table_whose_labels_were_swapped_is_not_counted_finished(tmp_path, two_profile_smoke):
    """A fresh clone's results table with the labels of its two rows swapped (S6's run under
    'S4D' and the other way): both cells were left empty and the figure undrawn, while the
    report said '2 runs expected, 2 finished' and the console said nothing. A row of the
    profile's own table whose label its run does not have in the profile is left out with a
    warning, and the runs count as not finished."""
    spec, out, table = _fresh_clone(two_profile_smoke, tmp_path)
    args, folder = ("--out", out, "--profile", "smoke"), table.parent
    text = table.read_text()
    table.write_text(text.replace(",S6,", ",@@,").replace(",S4D,", ",S6,").replace(",@@,", ",S4D,"))
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "has label='S4D' (the run's is 'S6')" in said, res.output
    assert "0 of 2 runs finished" in said, res.output
    assert "2 runs expected, 0 finished" in (folder / "report-smoke.md").read_text()


@pytest.mark.parametrize("written", [False, True])
def test_ctrl_c_of_data_generate_says_what_it_left(tmp_path, monkeypatch, written):
    """Ctrl-C of `data generate` printed `run`'s line, 'finished runs are saved'. It now says
    what is left, exit 130: nothing (re-run the same command), also after a shard was written
    (the generator builds its folder beside the target, and the half-written one is removed)."""
    import ssmrepro.data.pathfinder as pf

    def interrupted(target, *a, **kw):
        if written:  # a shard written, then Ctrl-C
            Path(target).mkdir(parents=True, exist_ok=True)
            (Path(target) / "shards").mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(pf, "write_pathfinder", interrupted)
    out = tmp_path / "pf"
    res = _invoke("data", "generate", "pathfinder", "--n", "20", "--out", out)
    said = " ".join(res.output.split())
    assert res.exit_code == 130 and "Traceback" not in res.output, res.output
    assert "runs" not in said, res.output
    assert "nothing was written: re-run the same command" in said, res.output
    assert not out.exists() and not list(tmp_path.iterdir()), list(tmp_path.iterdir())


@pytest.mark.parametrize("figure,needle", [
    ({"k": 5}, "translation k = 5 is not from 0 to 2^j - 1 = 3"),
    ({"examples": [[0, 3]]}, "examples.0: translation k = 3"),
    ({"examples": [[10**23, 0]]}, "examples.0: scale j = 100000000000000000000000 is not"),
    ({"show_w": [5]}, "figure.show_w.0: Input should be less than or equal to -0.000001"),
    ({"show_w": [-30] * 3000}, "List should have at most 20 items"),
])
def test_a_haar_figure_draws_only_wavelets_that_exist(tmp_path, figure, needle):
    """huang2025-figA1's figure options were drawn unchecked after the analytic table was
    computed: a translation k of 2^j or more and a positive show_w raised ValueError tracebacks,
    an example of scale 10^23 hung in ``2**j``, and 3,000 show_w curves took 40 s to draw.
    `validate` refuses them."""
    raw = yaml.safe_load((ROOT / "experiments/huang2025/huang2025-figA1.yaml").read_text())
    raw.update(id="haar-copy", alias=None)
    raw["figure"] = {**raw["figure"], **figure}
    spec = tmp_path / "haar-copy.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    start = time.monotonic()
    _assert_refused(_invoke("validate", spec), needle)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("blank", ["", " ", "\t "])
def test_blank_path_variables_are_unset_not_a_folder_named_blank(tmp_path, monkeypatch, blank):
    """``SSMREPRO_ROOT=' '`` made `run` (no --out) write its results into a folder named ' ' of
    the current folder, printed as ' /results/...'; ``SSMREPRO_CACHE=' '`` put the planner's
    cache there. A blank variable is unset, as ``SSMREPRO_DATA`` was."""
    from ssmrepro.engine.costs import cache_file
    from ssmrepro.util import data_root, repo_root

    monkeypatch.chdir(tmp_path)
    for name in ("SSMREPRO_ROOT", "SSMREPRO_CACHE", "SSMREPRO_DATA"):
        monkeypatch.setenv(name, blank)
    assert repo_root() == ROOT
    assert cache_file() == Path.home() / ".cache" / "ssmrepro" / "costs.json"
    assert data_root() == Path("data")
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "c"))
    assert cache_file() == tmp_path / "c" / "costs.json"


def test_export_reads_each_profiles_own_table_not_one_left_from_another_default(tmp_path):
    """smoke trained (results-smoke.csv), then the spec's default profile made smoke, and
    plotted (results.csv, smoke's table now): `export` read both as smoke's and exported every
    row twice. Each profile's table is the file `plot` names for it; a file no profile writes
    any more is not exported."""
    import pandas as pd

    spec = two_profile_spec(tmp_path)
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    project = tmp_path / "proj"
    (project / "experiments" / "tests").mkdir(parents=True)
    raw = yaml.safe_load(spec.read_text())
    raw["default_profile"] = "smoke"
    (project / "experiments" / "tests" / "t-spec.yaml").write_text(yaml.safe_dump(raw))
    env = {"SSMREPRO_ROOT": str(project)}
    res = _invoke("plot", "t-spec", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    folder = out / "tests" / "t-spec"
    assert (folder / "results.csv").exists() and (folder / "results-smoke.csv").exists()
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv", env=env)
    assert res.exit_code == 0, res.output
    df = pd.read_csv(tmp_path / "x.csv")
    assert len(df) and not df.duplicated(["run_id", "metric"]).any(), df
    assert set(df["profile"]) == {"smoke"}


def test_a_fresh_clone_table_with_metrics_no_run_records_is_not_trusted(tmp_path, two_profile_smoke):
    """A record holding metrics no run of its config records is quarantined, but a fresh
    clone's committed table with 20,000 such columns (another tool's, pasted in) was plotted as
    the runs' results and exported, 40,000 rows of them. Such a row is not used, with a
    warning, in `plot` and in `export`."""
    spec, out, table = _fresh_clone(two_profile_smoke, tmp_path)
    head, *rows = table.read_text().splitlines()
    extra = [f"metric.m{i}.acc" for i in range(3)]
    table.write_text("\n".join([",".join([head, *extra])]
                               + [",".join([r, "0.5", "", ""]) for r in rows]) + "\n")
    res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "has metric.m0.acc=0.5 (no run of its config records m0.acc)" in said, res.output
    assert "0 of 2 runs finished" in said, res.output
    project = tmp_path / "proj"
    (project / "experiments" / "tests").mkdir(parents=True)
    shutil.copy(spec, project / "experiments" / "tests" / spec.name)
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(project)})
    assert res.exit_code == 0 and "0 rows" in res.output, res.output


def test_a_committed_table_giving_a_column_twice_is_a_damaged_table(tmp_path, two_profile_smoke):
    """A fresh clone's results table with a second 'metric.test.acc' column (0.99 beside the
    run's 0.08): pandas read it as 'metric.test.acc.1' and the first was taken without a word.
    Which of the two the run wrote cannot be told: the table is damaged (exit 2, rebuild it)."""
    spec, out, table = _fresh_clone(two_profile_smoke, tmp_path)
    args = ("--out", out, "--profile", "smoke")
    head, *rows = table.read_text().splitlines()
    table.write_text("\n".join([head + ",metric.test.acc"] + [r + ",0.99" for r in rows]) + "\n")
    _assert_refused(_invoke("plot", spec, *args), "column 'metric.test.acc' given twice")


def test_a_partial_download_is_not_resumed_from_another_url(tmp_path, monkeypatch):
    """`data download lra --url file://A/big.tar` cut short (a full disk, Ctrl-C) left
    downloads/big.tar.part; the same command with a corrected `--url file://B/big.tar` resumed
    it, and installed A's first 20 MB with B's tail without a word (no checksum is known for a
    --url). A partial file is resumed only from the URL it was started from."""
    import ssmrepro.data.download as dl

    a, b = tmp_path / "a" / "big.bin", tmp_path / "b" / "big.bin"
    for path, fill in ((a, b"A"), (b, b"B")):
        path.parent.mkdir()
        path.write_bytes(fill * 20_000)
    real = dl._open_url

    class Cut:  # the transfer breaks after its first 5,000 bytes
        def __init__(self, stream):
            self.stream, self.sent = stream, False

        def read(self, n=-1):
            if self.sent:
                raise OSError(28, "No space left on device")
            self.sent = True
            return self.stream.read(5000)

        def close(self):
            self.stream.close()

    with monkeypatch.context() as m:
        m.setattr(dl, "_open_url", lambda url, offset, timeout: (
            Cut(real(url, offset, timeout)[0]), None, False))
        with pytest.raises(dl.DownloadError, match="re-run the same command to resume"):
            dl.download_file(a.as_uri(), tmp_path / "dl" / "big.bin", progress=False)
    assert (tmp_path / "dl" / "big.bin.part").stat().st_size == 5000
    got = dl.download_file(b.as_uri(), tmp_path / "dl" / "big.bin", progress=False)
    assert got.read_bytes() == b.read_bytes()
    assert not (tmp_path / "dl" / "big.bin.part.url").exists()


def test_a_figure_too_large_is_refused_before_its_panels_are_made(tmp_path, monkeypatch):
    """A phase figure's `panels` list (2,000 entries) made and filled 2,000 panels, 21 s and
    840 MB, before the image was refused as too large; ten times as many took the machine's
    memory. The size is checked before any panel is made."""
    import matplotlib.pyplot as plt

    spec = two_profile_spec(tmp_path)
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    raw = yaml.safe_load(spec.read_text())
    raw["figures"] = [{"kind": "phase", "name": "ph", "where": {"label": "S6"},
                       "x": "model.d_model", "y": "model.d_state",
                       "panels": [{"metric": "test.acc"}] * 400}]
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    made, real = [], plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **kw: made.append(kw["figsize"]) or real(*a, **kw))
    _assert_refused(_invoke("plot", spec, "--out", out, "--profile", "smoke"),
                    "ph-smoke.png: the figure would be")
    assert all(h * 130 <= 1 << 15 for _, h in made), made


def test_a_committed_histogram_table_whose_cell_gives_two_bin_counts_is_a_message(tmp_path):
    """huang2025-fig1 in a fresh clone with the first row of its histograms.csv saying 1 bin
    (the cell's other rows say 50): the cell's decay metrics were read off that 1 bin, and its
    'Mamba splits its decay at n' claim went from PASS to FAIL without a word. It is a damaged
    table now."""
    folder = tmp_path / "out" / "huang2025" / "huang2025-fig1"
    shutil.copytree(ROOT / "results" / "huang2025" / "huang2025-fig1", folder)
    table = folder / "histograms.csv"
    head, first, *rows = table.read_text().splitlines()
    cols = head.split(",")
    first = first.split(",")
    assert first[cols.index("bin")] == "0" and first[cols.index("bins")] == "50"
    first[cols.index("bins")] = "1"
    table.write_text("\n".join([head, ",".join(first), *rows]) + "\n")
    res = _invoke("verify", "huang2025-fig1", "--out", tmp_path / "out")
    _assert_refused(res, "histograms.csv: the rows of cell label=Mamba+PE",
                    "give different bin counts", "delete it to rebuild it")


@pytest.mark.parametrize("column,value,said", [
    ("n_params", "-5", "n_params=-5 (not a whole number of parameters (>= 0))"),
    ("n_params", "2.5", "n_params=2.5 (not a whole number of parameters (>= 0))"),
    ("stop_step", "-3", "stop_step=-3 (not a whole number of steps (>= 0))"),
])
def test_a_committed_table_row_with_counts_no_run_has_is_not_used(tmp_path, two_profile_smoke,
                                                                  column, value, said):
    """A record whose n_params or stop_step is not a whole number >= 0 is quarantined, but a
    fresh clone's table row with n_params -5 was summarised and drawn as the cell's size
    ('2 runs expected, 2 finished'). Such a row is not used, with a warning."""
    spec, out, table = _fresh_clone(two_profile_smoke, tmp_path)
    args = ("--out", out, "--profile", "smoke")
    head, first, *rows = table.read_text().splitlines()
    cells = first.split(",")
    cells[head.split(",").index(column)] = value
    table.write_text("\n".join([head, ",".join(cells), *rows]) + "\n")
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0, res.output
    assert said in " ".join(res.output.split()), res.output
    assert "2 runs expected, 1 finished" in (table.parent / "report-smoke.md").read_text()


def test_an_aggregate_metric_given_twice_is_refused(tmp_path):
    """`aggregate.metrics` listing test.acc 50,000 times was accepted: one column, aggregated
    50,000 times (19 s of plot instead of 4)."""
    spec = _one_run_spec(tmp_path, aggregate={"metrics": ["test.acc", "test.loss", "test.acc"]})
    _assert_refused(_invoke("validate", spec), "aggregate", "'test.acc' given more than once")


def test_a_spec_given_by_path_whose_id_differs_only_in_case_from_a_project_id_is_refused(tmp_path):
    """`run my/Huang2025-tab1.yaml` (a copy whose id differs from the project spec's only in
    case) was accepted: on a case-insensitive disk the two share one results folder, and the
    copy's tables, figures and report replaced the project spec's."""
    root = _project(tmp_path, small=True)
    env = {"SSMREPRO_ROOT": str(root)}
    twin = tmp_path / "mine" / "Huang2025-tab1.yaml"
    twin.parent.mkdir()
    shutil.copy(root / "experiments/huang2025/huang2025-tab1.yaml", twin)
    _edit(twin, id="Huang2025-tab1", alias=None)
    out = tmp_path / "out"
    for cmd in ("run", "plot", "verify"):
        _assert_refused(_invoke(cmd, twin, "--out", out, "--profile", "smoke", env=env),
                        "differs only in case from the id of")
    _assert_refused(_invoke("validate", twin, env=env), "differs only in case from the id of")
    assert not out.exists()


@pytest.mark.parametrize("lr", [1e-300, 1e-40])
def test_a_learning_rate_flushed_to_zero_is_refused(tmp_path, lr):
    """train.lr below float32's smallest normal number is used as 0: both runs ended 'ok' with
    exactly the untrained model's numbers (those of max_steps 0). Float64 training keeps it."""
    base = {"optimizer": "adam", "batch_size": 8, "max_steps": 4, "val_size": 16,
            "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    _assert_refused(_invoke("validate", write_spec(tmp_path, train={**base, "lr": lr})),
                    "train: Value error, lr", "smallest normal float32 number")
    ok = write_spec(tmp_path, train={**base, "lr": lr, "dtype": "float64"})
    assert _invoke("validate", ok).exit_code == 0


def test_data_download_force_over_a_linked_task_folder_names_the_link(tmp_path):
    """`data download lra --force` where `<root>/lra/listops-1000` is a symbolic link to a folder
    elsewhere printed `error: cannot use: OSError` (shutil refuses to remove a link's tree; no
    path, no reason). The link is named now, and the folder it leads to is left alone."""

    archive = _lra_archive(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kept.txt").write_text("mine")
    (tmp_path / "root" / "lra").mkdir(parents=True)
    link = tmp_path / "root" / "lra" / "listops-1000"
    link.symlink_to(elsewhere)
    res = _invoke("data", "download", "lra", "--dir", tmp_path / "root", "--url",
                  archive.as_uri(), "--no-progress", "--force")
    said = " ".join(res.output.split())
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert f"{link} is a symbolic link" in said and "OSError" not in said, res.output
    assert link.is_symlink() and (elsewhere / "kept.txt").read_text() == "mine"


def test_an_os_error_of_a_message_alone_prints_the_message():
    """An OSError without errno or file (shutil's 'Cannot call rmtree on a symbolic link') was
    printed as `cannot use: OSError`."""
    from ssmrepro.cli.app import os_message

    assert os_message(OSError("Cannot call rmtree on a symbolic link")) == (
        "cannot use: Cannot call rmtree on a symbolic link")


def test_data_info_of_a_data_root_that_is_a_file_says_so(tmp_path):
    """`data info --dir <a file>` listed every source as absent and suggested commands with that
    --dir (each of which then failed on it), without saying the data root is a file."""
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    _assert_refused(_invoke("data", "info", "--dir", afile), f"cannot use {afile}: not a folder")
    assert _invoke("data", "info", "--dir", tmp_path / "missing").exit_code == 0


def test_a_fresh_garbage_claim_is_not_reported_as_pid_none_on_none(tmp_path):
    """A claim naming no holder is respected for its first 5 seconds; meanwhile `run` reported
    'waiting for 1 runs claimed by another process (pid None on None)'."""
    from ssmrepro.store import Store

    st = Store(tmp_path)
    st.claims.mkdir(parents=True)
    (st.claims / "r1.claim").write_text("[1, 2, 3]")
    said = st.holder("r1")
    assert said is not None and "None" not in said and "r1.claim" in said, said


def test_a_failed_event_log_write_names_the_event_log(tmp_path, monkeypatch):
    """An append to events.jsonl that failed (a file size limit, a full disk) failed the pack
    with 'cannot use <run folder>: File too large': os.write names no file."""
    import errno

    import ssmrepro.store as store_mod
    from ssmrepro.cli.app import os_message

    st = store_mod.Store(tmp_path)

    def full(fd, data):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(store_mod.os, "write", full)
    with pytest.raises(OSError) as caught:
        st.log("claim", "r1")
    monkeypatch.undo()
    assert caught.value.filename == str(tmp_path / "events.jsonl")
    assert os_message(caught.value) == f"cannot use {tmp_path / 'events.jsonl'}: File too large"


@pytest.mark.parametrize("label,why", [("Se\u0301", "written composed"),
                                       ("S6 ", "no spaces at its ends")])
def test_a_paper_value_naming_a_label_no_case_can_have_is_refused(tmp_path, label, why):
    """A paper value's `where` label that no case label can be ('Se' + a combining accent
    beside the case 'Sé'; 'S6 ') matched no cell and was reported 'not run' beside the very
    cell it looks like (paper values may name cells no profile runs, so it passed)."""
    cases = [{"label": "S\u00e9", "set": {"model.mixer": "s6"}},
             {"label": "S6", "set": {"model.mixer": "s4d"}}]
    spec = write_spec(tmp_path, sweep=[{"cases": cases}], paper_values=[
        {"where": {"label": label}, "metric": "test.acc", "value": 0.5, "tol": 0.1}])
    _assert_refused(_invoke("validate", spec), "paper_values.0", why)
    ok = write_spec(tmp_path, sweep=[{"cases": cases}], paper_values=[
        {"where": {"label": ["S\u00e9", "Mamba"]}, "metric": "test.acc", "value": 0.5}])
    assert _invoke("validate", ok).exit_code == 0


def test_a_collapse_claim_whose_accuracy_range_cannot_be_reached_is_refused(tmp_path):
    """A collapse claim on an accuracy with min_range 2 (a percentage read as a fraction) was
    accepted and FAILed whatever was trained: group means of accuracies span at most 1."""
    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}]
    sweep = [{"cases": cases}, {"grid": {"model.d_model": [8, 12, 16]}}]
    figure = {"kind": "lines", "x": "model.d_model", "hue": "label"}

    def claim(min_range):
        return [{"check": "collapse", "text": "x", "by": "model.d_model", "tol": 0.1,
                 "min_range": min_range}]

    bad = write_spec(tmp_path, sweep=sweep, figure=figure, claims=claim(2))
    _assert_refused(_invoke("validate", bad), "claims.0.min_range: 2 for test.acc")
    ok = write_spec(tmp_path, sweep=sweep, figure=figure, claims=claim(0.5))
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("rows,needle", [
    ("[{id: x, paper: y, tier: 1}, {id: X, paper: y, tier: 2}]",
     "targets.1.id: 'X' differs only in case from 'x' (first at targets.0)"),
    ("[{id: Huang2025-tab1, paper: huang2025, tier: 1}]",
     "targets.0.id: 'Huang2025-tab1' differs only in case from the spec id 'huang2025-tab1'"),
])
def test_a_catalogue_row_that_differs_only_in_case_is_refused(tmp_path, rows, needle):
    """A catalogue row 'T-spec' beside the spec t-spec (or beside a row 't-spec') was a second
    front-page row, a target 'not specified', without a word; on a case-insensitive disk the
    two are one results folder."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text(f"papers: {{}}\ntargets: {rows}\n")
    (tmp_path / "out").mkdir()
    res = _invoke("figures", "--no-rebuild", "--out", tmp_path / "out",
                  env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "catalogue.yaml", needle)


@pytest.mark.parametrize("rank", [0, -2])
def test_a_delta_projection_of_rank_below_one_is_refused(tmp_path, rank):
    """model.dt_rank 0 passed `validate`; the S6 run then failed its pack at the first step with
    'ZeroDivisionError: 0.0 cannot be raised to a negative power' (the projection's init),
    naming no key. The same field of the S6 core, Mamba-1 and Mamba-Δᵀ mixers is checked."""
    from pydantic import ValidationError

    from ssmrepro.models.mixers.delta_t import DeltaTConfig
    from ssmrepro.models.mixers.mamba1 import Mamba1Config
    from ssmrepro.models.mixers.s6 import S6Config

    model = {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "dt_rank": rank}
    _assert_refused(_invoke("validate", write_spec(tmp_path, model=model)),
                    "model.dt_rank", "greater than or equal to 1")
    for cfg in (S6Config, Mamba1Config, DeltaTConfig):
        with pytest.raises(ValidationError):
            cfg(dt_rank=rank)
    # one S6 case: beside write_spec's S4D case a dt_rank is a key that model never reads
    res = _invoke("validate", _one_run_spec(tmp_path, model={**model, "dt_rank": 2}))
    assert res.exit_code == 0, res.output


def test_a_dataset_whose_validation_or_test_split_is_empty_is_refused_before_training(tmp_path):
    """A generated Pathfinder set of 2 images splits 2 / 0 / 0: `validate` passed, and every run
    failed its pack at the first evaluation with 'the validation set (0 samples) has no
    supervised position ... (a probability of 0 or 1, a length too short ...)'."""
    from ssmrepro.tasks import TASKS
    from ssmrepro.tasks.base import fixed_split_error

    task = TASKS["lra_pathfinder"]
    why = fixed_split_error(task, {"train": 2, "val": 0, "test": 0}, 2)
    assert why is not None and "empty val and test splits" in why, why
    assert "empty test split" in fixed_split_error(task, {"train": 8, "val": 1, "test": 0}, 2)
    assert fixed_split_error(task, {"train": 8, "val": 1, "test": 1}, 2) is None


def test_a_length_curve_of_one_length_given_twice_is_refused(tmp_path):
    """length_curves `lengths: [8, 8]` passed the two-length minimum, and the figure drew one
    point for the curve of each cell."""
    figure = {"kind": "length_curves", "lengths": [8, 8], "pattern": "L{L}.acc", "lo": None,
              "hi": None}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16, "evals": {"L8": {"T": 8}}}
    aggregate = {"reduce": "mean", "metrics": ["test.acc", "L8.acc"]}
    spec = write_spec(tmp_path, figure=figure, train=train, aggregate=aggregate)
    _assert_refused(_invoke("validate", spec), "lengths: 8 is given twice")


def test_a_decay_histogram_of_a_model_without_a_decay_hook_is_refused_before_training(tmp_path):
    """`analysis: [decay_histogram]` on a Transformer passed `validate`; every pack trained to
    the end, then failed with 'ValueError: decay_histogram needs a mixer with a decay hook'."""
    cases = [{"label": "A", "set": {"model.n_layers": 1}},
             {"label": "B", "set": {"model.n_layers": 2}}]
    spec = write_spec(tmp_path, analysis=["decay_histogram"], sweep=[{"cases": cases}],
                      model={"name": "transformer_lm", "d_model": 8})
    out = tmp_path / "out"
    for cmd in ("validate", "run"):
        args = (spec,) if cmd == "validate" else (spec, "--out", out, "--profile", "smoke")
        _assert_refused(_invoke(cmd, *args), "analysis: decay_histogram needs a mixer with a "
                        "decay hook", "run A (transformer_lm)")
    assert not (out / "tests" / "t-spec" / "runs").exists()
    ok = write_spec(tmp_path, analysis=["decay_histogram"])  # S6 and S4D cores have one
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("analysis,needle", [
    ("mechanistic", "mechanistic probes need a one-layer, single-head linear_mamba model"),
    ("output_variance", "output_variance reads the MQAR layout of task mqar"),
])
def test_a_weight_analysis_a_run_cannot_give_is_refused_before_training(tmp_path, analysis,
                                                                        needle):
    """`analysis: [mechanistic]` on KEEP n-TH / ssm_lm passed `validate`, trained, then `plot`
    raised an AttributeError traceback ('KeepNthConfig' object has no attribute 'kappa');
    `output_variance` there reported noise / SNR numbers of tokens that are no MQAR values."""
    spec = write_spec(tmp_path, analysis=[analysis], save_weights=True)
    out = tmp_path / "out"
    _assert_refused(_invoke("validate", spec), f"analysis: {analysis}", needle)
    _assert_refused(_invoke("run", spec, "--out", out, "--profile", "smoke"), needle)
    assert not (out / "tests" / "t-spec" / "runs").exists()


@pytest.mark.parametrize("over", ["label", "model.mixer"])
def test_an_aggregate_select_over_a_key_no_two_cells_differ_in_alone_is_refused(tmp_path, over):
    """`aggregate.select.over: label` (or model.mixer, set with each label) was accepted: every
    group of cells equal but for it held one cell, so the 'selection of the best value per cell'
    kept every cell without a word."""
    agg = {"reduce": "mean", "metrics": ["test.acc", "test.loss"],
           "select": {"over": over, "by": "test.loss"}}
    _assert_refused(_invoke("validate", write_spec(tmp_path, aggregate=agg)),
                    f"aggregate.select.over: no two cells differ in {over!r} alone")
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
             {"grid": {"train.lr": [0.01, 0.02]}}]
    ok = write_spec(tmp_path, sweep=sweep, aggregate={**agg, "select": {"over": "train.lr",
                                                                        "by": "test.loss"}})
    assert _invoke("validate", ok).exit_code == 0


def test_an_analysis_keeps_the_committed_rows_of_runs_whose_weights_are_gone(tmp_path):
    """One run's saved weights gone (deleted, or a fresh clone with one run trained since):
    `plot` replaced the whole committed output_variance table by the rows of the runs with
    weights, so the other cells had no analysis metrics and their claims FAILed ('out of
    order') without a word. The committed rows of runs without weights stand for them."""
    import pandas as pd

    spec = _one_run_spec(tmp_path, seeds=[0, 1], save_weights=True,
                         analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2})
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    root = out / "tests" / "t-spec"
    table = root / "output_variance-smoke.csv"
    before = pd.read_csv(table)
    assert len(before) == 2
    sorted(root.glob("runs/*.pt"))[0].unlink()
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0, res.output
    after = pd.read_csv(table)
    assert len(after) == 2 and set(after["seed"]) == {0, 1}, after
    assert pd.read_csv(root / "summary-smoke.csv")["out.noise_var"].notna().all()


def test_a_decay_histogram_table_keeps_the_committed_cells_of_runs_without_records(tmp_path):
    """A run's record gone (a fresh clone with one run trained since, or a record deleted) while
    its committed results row still stands for it: `plot` replaced histograms.csv by the cells
    of the records there were, and S4D's decay claim went from PASS to FAIL ('not measured')."""
    import pandas as pd

    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]
    spec = _one_run_spec(tmp_path, sweep=sweep, analysis=["decay_histogram"])
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    root = out / "tests" / "t-spec"
    before = sorted((root / "histograms-smoke.csv").read_text().splitlines())
    s4d = next(p for p in root.glob("runs/*.json") if '"S4D"' in p.read_text())
    s4d.unlink()
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0, res.output
    assert sorted((root / "histograms-smoke.csv").read_text().splitlines()) == before
    assert pd.read_csv(root / "summary-smoke.csv")["decay.split"].notna().all()


def test_a_weights_figure_whose_where_selects_no_cell_of_the_profile_says_so(tmp_path):
    """koren2026-fig14's N = 4 figure in its smoke profile (N = 2 only) was 'not drawn: no
    saved weights of its cells ...; `ssmrepro run ...` trains them', though every run was
    trained and `run` trains nothing more: the profile has no cell the figure selects."""
    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
                         profiles={"smoke": {}, "quick": {"set": {"model.d_state": 2}},
                                   "paper": {}},
                         figures=[{"kind": "output_distribution", "name": "fig-n2",
                                   "where": [{"model.d_state": 2}]}])
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1")
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "profile smoke has no cell its `where` selects" in said, res.output
    assert "trains them" not in said, res.output


def _s4d_weights_lost(tmp_path: Path, **spec_fields) -> tuple[Path, list, Path]:
    """An MQAR spec of an S6 and an S4D run with output_variance (plus ``spec_fields``), trained,
    then the S4D run's saved weights and the committed analysis table deleted: that cell's
    analysis metrics cannot be measured. (spec, the smoke profile's args, its results folder)."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]
    spec = _one_run_spec(tmp_path, sweep=sweep, save_weights=True,
                         analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2}, **spec_fields)
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    root = tmp_path / "out" / "tests" / "t-spec"
    next(p for p in root.glob("runs/*.json") if '"S4D"' in p.read_text()).with_suffix(
        ".pt").unlink()
    (root / "output_variance-smoke.csv").unlink()
    return spec, args, root


def test_a_log_scaled_lines_panel_with_no_measured_value_is_drawn(tmp_path):
    """A `lines` figure with `logy` whose panel holds no positive value (koren2026-fig14's
    figure15 in a fresh clone with one run trained: the other cells' analysis metrics not
    measured, NaN) raised matplotlib's 'Data cannot be log-scaled' traceback in `plot`."""
    spec, args, root = _s4d_weights_lost(tmp_path, figures=[
        {"kind": "lines", "metric": "out.noise_var", "x": "model.d_model", "facet": "label",
         "logy": True}])
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert (root / "figure-smoke.png").is_file()


def test_an_ordering_claim_says_a_cell_whose_analysis_metric_was_not_measured(tmp_path):
    """An ordering (or monotone) claim counted a pair with a cell whose analysis metric was
    never measured (saved weights gone, no committed table) as 'out of order' without a word;
    a threshold claim says 'not measured'."""
    spec, args, _ = _s4d_weights_lost(tmp_path, claims=[
        {"check": "ordering", "text": "S6 >= S4D", "metric": "out.noise_var",
         "a": {"label": "S6"}, "b": {"label": "S4D"}, "match": []}])
    res = _invoke("verify", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "1 of 1 finished pairs out of order" in said, res.output
    assert "1 where no run diverged but out.noise_var was not measured" in said, res.output


def test_committed_analysis_rows_stand_only_for_runs_finished_under_the_spec_as_it_is(tmp_path):
    """The committed output_variance rows stand for runs whose weights are gone only when those
    runs are finished under the spec as it is now: after an edit (train.max_steps) with one run
    trained again, the other cell kept the old spec's number beside '0 finished'."""
    import pandas as pd
    import yaml

    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]
    spec = _one_run_spec(tmp_path, sweep=sweep, save_weights=True,
                         analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2})
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    raw = yaml.safe_load(spec.read_text())
    raw["train"]["max_steps"] += 1
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1", "--max-runs", "1")
    assert res.exit_code == 0, res.output
    cells = pd.read_csv(tmp_path / "out" / "tests" / "t-spec" / "summary-smoke.csv")
    assert sorted(cells["n_ok"]) == [0, 1], cells
    assert cells["out.noise_var"].notna().tolist() == (cells["n_ok"] == 1).tolist(), cells


def test_a_data_root_that_is_a_file_is_named_as_one(tmp_path):
    """`run lra` with $SSMREPRO_DATA naming a file said the data were missing and suggested
    `ssmrepro data ...` commands that then failed on that file."""
    (tmp_path / "root").write_text("not a folder")
    res = _invoke("run", "lra", "--profile", "smoke", "--no-calibrate", "--out", tmp_path / "out",
                  env={"SSMREPRO_DATA": str(tmp_path / "root")})
    _assert_refused(res, "is a file, not a folder")
    assert not (tmp_path / "out").exists()


def test_plot_of_a_profile_another_process_is_training_says_so(tmp_path):
    """`plot` while another live process trained the profile's last run said only "train the
    rest with ssmrepro run ...": that `run` would have waited for the other process."""
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    path = _one_run_spec(tmp_path, seeds=[0, 1])
    spec, out = load_spec(path), tmp_path / "o"
    res = _invoke("run", path, "--out", out, "--profile", "smoke", "--no-calibrate", "--no-plot",
                  "--workers", "1", "--max-runs", "1")
    assert res.exit_code == 0, res.output
    store = Store(out / spec.paper / spec.id)
    left = [r.run_id for r in expand(spec, "smoke") if not store.is_done(r.run_id)]
    assert len(left) == 1
    said = " ".join(_invoke("plot", path, "--out", out, "--profile", "smoke").output.split())
    assert "1 of 2 runs finished" in said and "another process" not in said, said
    _hold(store, left[0])
    said = " ".join(_invoke("plot", path, "--out", out, "--profile", "smoke").output.split())
    assert (f"1 of them being trained now by another process (pid {os.getpid()} on "
            f"{store.host}): wait for it, or train the rest with ssmrepro run") in said, said


def test_list_shows_the_status_of_the_profile_asked_for(tmp_path):
    """`list` (and `list --json`) told only each spec's default profile: whether a spec's smoke
    or long profile was trained could not be seen there."""
    import json

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    root = _project(tmp_path, small=True)
    env = {"SSMREPRO_ROOT": str(root)}
    out = tmp_path / "o"
    res = _invoke("list", "--json", "--profile", "long", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    rows = {r["id"]: r for r in json.loads(res.output[res.output.index("["):])}
    fig1 = load_spec(root / "experiments/huang2025/huang2025-fig1.yaml")
    assert rows["huang2025-fig1"]["profile"] == "long"
    assert rows["huang2025-fig1"]["runs"] == len(expand(fig1, "long")) != len(expand(fig1, "quick"))
    assert rows["huang2025-tab1"]["runs"] is None  # tab1 has no long profile
    said = " ".join(_invoke("list", "--profile", "long", "--out", out, env=env).output.split())
    assert "no profile long" in said and f"long: 0/{len(expand(fig1, 'long'))} runs" in said, said
    _assert_refused(_invoke("list", "--profile", "lnog", "--out", out, env=env),
                    "--profile lnog: no spec has this profile")


def test_a_decay_histogram_cell_short_of_a_seeds_record_keeps_its_committed_bins(tmp_path):
    """A cell of two seeds with one seed's record gone (a fresh clone with one run trained
    since): `plot` measured its histogram from the other seed alone, while its results row
    counted both seeds and nothing said so. The committed cell now stands whole; with no
    committed cell, a warning says it is measured from only some of its runs."""
    spec = _one_run_spec(tmp_path, seeds=[0, 1], analysis=["decay_histogram"])
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    root = out / "tests" / "t-spec"
    table = root / "histograms-smoke.csv"
    before = table.read_text()
    sorted(root.glob("runs/*.json"))[0].unlink()
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert table.read_text() == before
    table.unlink()  # no committed cell to stand for it: measured from one seed, said
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "is measured from the records of only some of its finished " \
        "runs" in said, said
    assert table.exists() and table.read_text() != before


def test_the_projects_own_warnings_print_as_warning_lines(monkeypatch):
    """A damaged data cache entry rebuilt (and other `warnings.warn` of ours) printed in Python's
    default form, '/.../datasets.py:544: UserWarning: ...' plus a source line, unlike every
    other 'warning: ...' line of the tool; other packages' warnings keep their form."""
    import warnings

    import ssmrepro.data.datasets as datasets
    from ssmrepro.util import plain_warnings

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    plain_warnings()
    plain_warnings()  # set twice (every command sets it): still one wrapper
    ours = warnings.formatwarning("damaged cache entry x (y); rebuilding it", UserWarning,
                                  datasets.__file__, 544, "loaded = load_entry(...)")
    assert ours == "warning: damaged cache entry x (y); rebuilding it\n"
    theirs = warnings.formatwarning("m", DeprecationWarning, "/elsewhere/pkg/mod.py", 3, "x = 1")
    assert theirs.startswith("/elsewhere/pkg/mod.py:3: DeprecationWarning: m")
    assert not hasattr(warnings.formatwarning.default, "default")


def test_run_does_not_count_a_run_done_whose_weights_are_another_runs(tmp_path):
    """Seed 1's weights copied over seed 0's: `run` (and `run --dry-run`) counted seed 0 done
    and trained nothing; only its plot step found the weights foreign, and the next `run`
    trained the run. The weights are now checked against the record's digest when `run` asks
    whether the run is done."""
    spec, args, by_seed = _seed_weights_swapped(tmp_path)
    res = _invoke("run", spec, *args, "--dry-run", "--no-estimate")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "1 done, 1 pending" in said, res.output
    assert f"saved weights {by_seed[0].name} quarantined" in said, res.output
    shutil.copy(by_seed[1], by_seed[0])  # again (the dry run quarantined them)
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1", "--no-plot")
    assert res.exit_code == 0 and "trained 1 runs" in " ".join(res.output.split()), res.output


def test_show_names_the_profiles_and_prints_text_as_written(tmp_path):
    """`show` printed no list of the spec's profiles (its --profile help named smoke | quick |
    paper only, though specs have long and their own), and read a title, claim or profile
    description holding [brackets] as console markup ('[red]x[/]' printed red 'x'; a stray
    '[/]' is a markup error)."""
    import json

    spec = _one_run_spec(tmp_path, title="T [red]x[/] [/]", claim="C [b]y[/b]")
    res = _invoke("show", spec, "--profile", "smoke")
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "T [red]x[/] [/]" in said and "C [b]y[/b]" in said, said
    assert "profiles: smoke, quick, paper (--profile NAME)" in said, said
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    assert json.loads(res.output[res.output.index("{"):])["profiles"] == ["smoke", "quick",
                                                                         "paper"]


def test_text_that_looks_like_console_markup_is_printed_as_written(tmp_path):
    """Paths, labels and titles were read as Rich console markup: `run --out 'a[/]b'` ended in
    a MarkupError traceback after training, `plot --out 'a[red]b'` printed its figures and
    report under '/.../ab', a spec title holding '[/]' broke `list`, a label '[x]' vanished
    from `show`'s run table."""
    sweep = [{"cases": [{"label": "[x] S6", "set": {"model.mixer": "s6"}}]}]
    spec = _one_run_spec(tmp_path, title="T [/] [red]x[/red]", sweep=sweep)
    out = tmp_path / "a[/]b[red]c"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    said = "".join(res.output.split())  # (long paths wrap)
    assert res.exit_code == 0, res.output
    assert f"report:{out}/tests/t-spec/report-smoke.md" in said, said
    assert f"table:{out}/tests/t-spec/results-smoke.csv" in said, said
    res = _invoke("show", spec, "--profile", "smoke", "--out", out)
    assert res.exit_code == 0 and "[x] S6" in res.output, res.output
    root = _project(tmp_path, small=True)
    raw = yaml.safe_load((root / "experiments/huang2025/huang2025-fig2.yaml").read_text())
    raw["title"] = "T [/] [red]x[/red]"
    (root / "experiments/huang2025/huang2025-fig2.yaml").write_text(yaml.safe_dump(raw))
    res = _invoke("list", "--out", out, env={"SSMREPRO_ROOT": str(root), "COLUMNS": "300"})
    assert res.exit_code == 0 and "T [/] [red]x[/red]" in res.output, res.output
    res = _invoke("data", "info", "--dir", tmp_path / "d[/]x")
    assert res.exit_code == 0 and "d[/]x" in res.output, res.output


def test_a_label_holding_a_bar_keeps_the_reports_tables_in_their_columns(tmp_path):
    """A label 'a|b' split its row of report.md's tables into one cell more than the header:
    every number after it stood in the wrong column."""
    sweep = [{"cases": [{"label": "a|b", "set": {"model.mixer": "s6"}}]}]
    spec = _one_run_spec(tmp_path, sweep=sweep, paper_values=[
        {"where": {"label": "a|b"}, "metric": "test.acc", "value": 0.5, "tol": 0.1}])
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    report = (out / "tests/t-spec/report-smoke.md").read_text().splitlines()
    rows = [ln for ln in report if ln.startswith("|") and "a\\|b" in ln]
    assert len(rows) == 2, report  # the paper value's row and the cell's row
    for row in rows:
        header = report[report.index(row) - 1]
        while not header.startswith("|---"):
            header = report[report.index(header) - 1]
        n = header.count("|")
        assert row.count("|") - row.count("\\|") == n, (row, header)


@pytest.mark.parametrize("figure,module", [
    ({"kind": "bars"}, "figures"),
    ({"kind": "heatmaps", "x": ["model.mixer"], "y": ["task.T"]}, "figures"),
    ({"kind": "lines", "x": "task.T"}, "figures"),
])
def test_a_long_figure_title_is_wrapped_inside_the_image(tmp_path, monkeypatch, figure, module):
    """A title of 150 characters (allowed: up to 300) ran off both edges of a bars figure and
    was cut; the kinds that set their title as given now wrap it to the figure's width."""
    import importlib

    title = " ".join(["word"] * 30)
    spec = _one_run_spec(tmp_path, figure={**figure, "title": title})
    out = tmp_path / "out"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                   "--workers", "1", "--no-plot").exit_code == 0
    mod = importlib.import_module(f"ssmrepro.plots.{module}")
    seen = []
    real = mod.save_png

    def check(fig, path, **kw):
        fig.canvas.draw()
        box = fig.bbox
        for text in fig.findobj(lambda a: hasattr(a, "get_text") and "word" in str(a.get_text())):
            ext = text.get_window_extent()
            seen.append((ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1, text.get_text()))
        return real(fig, path, **kw)

    monkeypatch.setattr(mod, "save_png", check)
    res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert seen and all(inside for inside, _ in seen), seen


def test_bench_packs_that_do_not_fit_in_memory_are_refused_before_measuring(tmp_path, monkeypatch):
    """`bench mqar-full-L256 --packs 256` (about 30 GB) failed with an allocator traceback (or
    woke the OOM killer)."""
    import ssmrepro.bench.packs as packs
    import ssmrepro.train as train

    def measured(*a, **k):
        raise AssertionError("it ran")

    monkeypatch.setattr(packs, "run_bench", measured)
    monkeypatch.setattr(train, "available_memory", lambda device: 100 * 10**6)
    res = _invoke("bench", "mqar-full-L256", "--packs", "2", "--out", tmp_path / "b",
                  "--device", "cpu")
    _assert_refused(res, "workload mqar-full-L256 needs about", "only 0.1 GB is available")


def test_a_bench_packs_record_that_is_a_folder_is_refused_before_measuring(tmp_path, monkeypatch):
    """A folder in the place of `<out>/<workload>-cpu.csv` (or .json) was refused only after
    the measuring (minutes of it at the default --seconds)."""
    import ssmrepro.bench.packs as packs

    def measured(*a, **k):
        raise AssertionError("it ran")

    monkeypatch.setattr(packs, "run_bench", measured)
    (tmp_path / "b" / "keep-nth-d8-cpu.csv").mkdir(parents=True)
    res = _invoke("bench", "keep-nth-d8", "--packs", "1", "--out", tmp_path / "b",
                  "--device", "cpu")
    _assert_refused(res, "keep-nth-d8-cpu.csv: a folder where a file belongs")


@pytest.mark.parametrize("edit,needle", [
    ({"run_steps_per_s": 1e308}, "mambapy 1e+308 is not a rate"),
    ({"run_steps_per_s": -3}, "mambapy -3 is not a rate"),
    ({"run_steps_per_s": "fast"}, "step-cpu.json: not a step benchmark record"),
    ({"fraction_of_peak": float("nan")}, "fraction_of_peak nan is not a rate"),
    ({}, None),
])
def test_roofline_checks_the_step_records_rates_and_keeps_their_text_in_its_cells(
        tmp_path, edit, needle):
    """`bench roofline` took a step record's (`step-cpu.json`) numbers as they stood: a mambapy
    rate edited to 1e308 was printed as a 309-digit number, -3 as '×-1.0', a NaN share of the
    peak as 'nan%'; a `|` or line break in a workload's description split its table row."""
    folder = tmp_path / "bench"
    shutil.copytree(ROOT / "results/bench", folder)
    rec = json.loads((folder / "step-cpu.json").read_text())
    for w in rec["workloads"].values():
        w["what"] = "a | b\nc"
    for r in rec["results"]:
        if r["contender"].startswith("mambapy") or "fraction_of_peak" in edit:
            r.update(edit)
    (folder / "step-cpu.json").write_text(json.dumps(rec))
    res = _invoke("bench", "roofline", "--out", folder)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    table = (folder / "performance.md").read_text()
    if needle:
        assert needle in " ".join(res.output.split()), res.output
        assert "a \\| b c" not in table and "nan%" not in table and "×-" not in table
    else:
        assert "| a \\| b c |" in table and "\nc |" not in table, table
    assert max(len(w) for w in table.split()) < 100, table


@pytest.mark.parametrize("kind", ["loop", "below a file"])
def test_a_data_root_that_is_a_link_loop_or_below_a_file_is_named(tmp_path, kind):
    """$SSMREPRO_DATA naming a symbolic link loop (or a path below a file): `data info` listed
    every source as absent with commands that then failed on it, and `run lra` raised a
    RuntimeError traceback ('Symlink loop') or said the data were missing."""
    if kind == "loop":
        root = tmp_path / "loop"
        root.symlink_to("loop")
        needle = "a symbolic link loop"
    else:
        (tmp_path / "f").write_text("a file")
        root = tmp_path / "f" / "data"
        needle = "a path component is a file"
    env = {"SSMREPRO_DATA": str(root), "SSMREPRO_CACHE": str(tmp_path / "cache")}
    _assert_refused(_invoke("data", "info", env=env), needle)
    res = _invoke("run", "lra", "--profile", "smoke", "--no-calibrate", "--out", tmp_path / "out",
                  env=env)
    _assert_refused(res, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["crc", "cut", "method"])
def test_a_damaged_zip_archive_is_named_not_a_traceback(tmp_path, damage):
    """`data download --url file://x.zip` of a zip with a bad CRC, cut short or of an unknown
    compression raised zipfile's traceback (BadZipFile, NotImplementedError); it is a bad
    archive now, with the command that replaces it, and no partial copy is left."""
    import struct
    import zipfile

    src = tmp_path / "x.zip"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("lra_release/listops-1000/basic_train.tsv", "Source\tTarget\n" * 200)
        z.writestr("lra_release/listops-1000/basic_val.tsv", "Source\tTarget\n" * 200)
    data = bytearray(src.read_bytes())
    if damage == "crc":
        start = 30 + len("lra_release/listops-1000/basic_train.tsv")
        data[start + 3] ^= 0xFF  # in the first member's compressed bytes
    elif damage == "cut":
        data = data[:len(data) // 2] + data[-60:]
    else:
        for sig, at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
            i = data.find(sig)
            while i >= 0:
                data[i + at:i + at + 2] = struct.pack("<H", 99)
                i = data.find(sig, i + 4)
    src.write_bytes(bytes(data))
    res = _invoke("data", "download", "lra", "--url", f"file://{src}", "--dir", tmp_path / "d",
                  "--no-progress")
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "not a zip archive this command can extract" in res.output, res.output
    assert "delete" in res.output and "re-run" in res.output, res.output
    assert not list((tmp_path / "d" / "lra").glob(".extract-*"))


def test_a_listops_meta_json_whose_split_sizes_are_not_the_datas_names_no_generator(tmp_path):
    """A generated ListOps folder whose meta.json says other split sizes than its files hold
    (edited, or left from another generation: train 400 beside 40 rows) was taken as these
    data's provenance: the run's record named its seed without a word."""
    import warnings

    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.lra import clear_cache

    root = tmp_path / "data"
    res = _invoke("data", "generate", "listops", "--n", "60", "--n-val", "10", "--n-test", "10",
                  "--min-length", "10", "--max-length", "200", "--dir", root)
    assert res.exit_code == 0, res.output
    meta = root / "generated" / "listops" / "meta.json"
    raw = json.loads(meta.read_text())
    raw["sizes"]["train"] = 400
    raw["seed"] = 5
    meta.write_text(json.dumps(raw))
    os.environ["SSMREPRO_DATA"] = str(root)
    clear_cache()
    try:
        task = build_task({"name": "lra_listops", "source": "generated"})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            info = task.data_info()
    finally:
        del os.environ["SSMREPRO_DATA"]
        clear_cache()
    assert "seed" not in info["generator"], info
    assert "says split sizes" in info["generator"]["generator"], info
    assert any("names no generator" in str(w.message) for w in caught)


def test_swapped_generated_pathfinder_shards_are_damaged_data(tmp_path):
    """Two image shards of a generated Pathfinder swapped (same shapes) were read beside the
    other shard's labels: half the labels wrong, trained on without a word. meta.json holds each
    shard's SHA-256 now, and the reader checks it."""
    from ssmrepro.data.pathfinder import read_pathfinder_dir, write_pathfinder

    d = write_pathfinder(tmp_path / "pf", n=8, resolution=32, seed=0, shard_size=4)
    read_pathfinder_dir(d)  # as written: read
    shards = d / "shards"
    (shards / "imgs_00000.npy").rename(shards / "tmp.npy")
    (shards / "imgs_00001.npy").rename(shards / "imgs_00000.npy")
    (shards / "tmp.npy").rename(shards / "imgs_00001.npy")
    with pytest.raises(ValueError, match="imgs_00000.npy is not the shard the generator wrote"):
        read_pathfinder_dir(d)


@pytest.mark.parametrize("kind", ["part link", "part fifo", "kept fifo"])
def test_a_download_kept_file_that_is_a_link_or_fifo_is_refused(tmp_path, kind):
    """`<root>/downloads/<name>.part` that is a symbolic link: the download was written through
    it into the file it led to (outside the data root, its content replaced); a FIFO there, or
    in the place of the kept archive, blocked `data download` for ever."""
    src = tmp_path / "x.tar.gz"
    src.write_bytes(b"not read")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    downloads = tmp_path / "d" / "downloads"
    downloads.mkdir(parents=True)
    args = ["--url", f"file://{src}"]
    if kind == "part link":
        (downloads / "x.tar.gz.part").symlink_to(victim)
        needle = "a symbolic link (to"
    elif kind == "part fifo":
        os.mkfifo(downloads / "x.tar.gz.part")
        needle = "x.tar.gz.part: not a regular file"
    else:
        os.mkfifo(downloads / "lra_release.gz")  # the official archive's name: no --url
        args, needle = [], "lra_release.gz: not a regular file"
    res = _invoke("data", "download", "lra", *args, "--dir", tmp_path / "d", "--no-progress")
    _assert_refused(res, needle)
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("path", ["../../outside imgs.png", "/tmp abs.png"])
def test_a_pathfinder_metadata_line_leading_outside_its_folder_is_damaged_data(tmp_path, path):
    """A Pathfinder metadata line (LRA layout) naming `../..` or an absolute path had the image
    read from outside the dataset's folder (any PNG there, under the line's label)."""
    from ssmrepro.data.pathfinder import read_pathfinder_dir, write_pathfinder

    d = write_pathfinder(tmp_path / "pf", n=4, resolution=32, seed=0, fmt="lra")
    meta = sorted((d / "metadata").iterdir())[0]
    lines = meta.read_text().splitlines()
    lines[0] = path + " " + " ".join(lines[0].split()[2:])
    meta.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="leaves the folder"):
        read_pathfinder_dir(d)


def test_bench_scans_knows_the_variants_each_kernel_times():
    """`bench scans --variants` is checked against KERNEL_VARIANTS: it must name what make_case
    times for each kernel."""
    import argparse

    import torch

    from ssmrepro.bench import scans

    a = argparse.Namespace(batch=1, d=4, n=2, groups=1, chunk=None, ssd_chunk=None, heads=1,
                           width=2)
    for k in scans.KERNELS:
        fast = scans.make_case(k, 8, a, torch.float32)[2]
        assert tuple(fast) == scans.KERNEL_VARIANTS[k], k


def test_archive_members_left_out_of_a_download_are_named(tmp_path):
    """A symbolic link (or a `..` member) in a downloaded archive was left out without a word:
    `installed`, exit 0, and the file it stood for then missing from the data."""
    import io
    import tarfile

    src = tmp_path / "x.tar"
    with tarfile.open(src, "w") as t:
        for name, data in (("lra_release/listops-1000/basic_val.tsv", b"Source\tTarget\n"),
                           ("../evil.txt", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("lra_release/listops-1000/basic_train.tsv")
        link.type, link.linkname = tarfile.SYMTYPE, "basic_val.tsv"
        t.addfile(link)
    res = _invoke("data", "download", "lra", "--url", f"file://{src}", "--dir", tmp_path / "d",
                  "--no-progress")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())
    assert "left out 2 archive member(s)" in said, res.output
    assert "'../evil.txt'" in said and "basic_train.tsv'" in said, res.output
    assert not (tmp_path / "evil.txt").exists()


@pytest.mark.parametrize("where", ["profile", "case", "grid"])
@pytest.mark.parametrize("key", ["model..d_model", "model.d_model."])
def test_a_spec_key_with_an_empty_name_between_dots_is_named(tmp_path, where, key):
    """A profile `set` (or a case's, or a sweep axis) key `model..d_model` was refused as
    'model: unknown key', and `model.d_model.` as 'model.d_model: Input should be a valid
    integer' (it became a mapping of an empty name); `--set` said what was wrong."""
    spec = two_profile_spec(tmp_path)
    raw = yaml.safe_load(spec.read_text())
    if where == "profile":
        raw["profiles"]["smoke"]["set"] = {key: 16}
    elif where == "case":
        raw["sweep"][0]["cases"][0]["set"][key] = 16
    else:
        raw["sweep"].append({"grid": {key: [8, 16]}})
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    _assert_refused(_invoke("validate", spec), f"{key}: an empty name between its dots")


@pytest.mark.parametrize("edit,needle", [
    ({"matmul_peak_gflops": 1e308}, "must be numbers from 1e-9 to 1e12, not 1e+308"),
    ({"copy_bandwidth_gbs": 1e308}, "not 1e+308"),
    ({"matmul_peak_gflops": 1e-300}, "not 1e-300"),
    ({"threads": 10**30}, "is not a thread count"),
])
def test_roofline_refuses_a_packs_record_of_absurd_peak_bandwidth_or_threads(tmp_path, edit,
                                                                             needle):
    """A packs record's GEMM peak of 1e308 made the figure's axis limit infinite (matplotlib's
    'Axis limits cannot be NaN or Inf' traceback, exit 1); a bandwidth of 1e308 overflowed, a
    peak of 1e-300 turned the axis upside down, 10**30 threads went into the title."""
    folder = tmp_path / "bench"
    folder.mkdir()
    rec = json.loads((ROOT / "results/bench/keep-nth-d8-cpu.json").read_text())
    rec.update(edit)
    (folder / "keep-nth-d8-cpu.json").write_text(json.dumps(rec))
    _assert_refused(_invoke("bench", "roofline", "--out", folder), needle)


@pytest.mark.parametrize("entry", [["-m", "ssmrepro"], ["-m", "ssmrepro.cli"]])
def test_a_terminated_sweep_ends_as_an_interrupted_one(tmp_path, cli_env, entry):
    """`kill PID` (SIGTERM, what a batch scheduler sends at its time limit) ended `run` at once:
    exit 143, no line saying what was left, and Python's 'leaked semaphore' warning. It now
    ends as Ctrl-C does: the worker stopped, one 'interrupted — ... resume' line, exit 130."""
    import signal
    import subprocess
    import sys

    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store

    path = write_spec(tmp_path, seeds=[0, 1], train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 3000, "val_size": 16,
        "test_size": 16, "eval_every": 1000, "eval_batch_size": 16})
    spec, out = load_spec(path), tmp_path / "o"
    store = Store(out / spec.paper / spec.id)
    p = subprocess.Popen([sys.executable, *entry, "run", str(path), "--out", str(out),
                          "--no-plot", "--no-calibrate", "--pack-size", "1", "--workers", "1"],
                         env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (store.claims.exists()
                                          and list(store.claims.glob("*.claim"))):
        time.sleep(0.05)  # the worker is inside a pack
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    said = stdout + stderr
    assert p.returncode == 130, said
    assert "Traceback" not in said and "leaked" not in said, said
    assert said.count("interrupted") == 1 and "re-run the same command to resume" in said, said


def test_a_killed_writers_temp_file_is_removed_before_the_next_write(tmp_path):
    """A benchmark killed while saving its record left `.<record>.<host>.<pid>.<x>.tmp` in
    --out for ever (the store cleaned its own folders only): the next run of the command now
    removes those of this host's dead writers, and only those."""
    import subprocess
    import sys

    from ssmrepro.util import HOST, prepare_target

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    target = tmp_path / "b" / "keep-nth-d8-cpu.json"
    target.parent.mkdir()
    stale = target.parent / f".{target.name}.{HOST}.{dead}.ab_12.tmp"
    live = target.parent / f".{target.name}.{HOST}.{os.getpid()}.cd_34.tmp"
    other = target.parent / f".{target.name}.elsewhere.{dead}.ef_56.tmp"
    unrelated = target.parent / f".other.json.{HOST}.{dead}.gh_78.tmp"
    for p in (stale, live, other, unrelated):
        p.write_text("half")
    prepare_target(target)
    assert not stale.exists() and live.exists() and other.exists() and unrelated.exists()


def test_a_reuse_entry_by_path_is_read_from_the_specs_own_folder(tmp_path, monkeypatch):
    """`reuse: [sa.yaml]` in a spec by path was looked up from the current folder: from any
    other folder `run` refused it ('unknown experiment'), from one folder only it worked."""
    folder = tmp_path / "specs"
    folder.mkdir()
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    sa = _one_run_spec(folder, name="sa", train=train)
    sb = _one_run_spec(folder, name="sb", train=train, reuse=["sa.yaml"])
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = _invoke("run", sa, "--profile", "smoke", "--out", out, "--no-plot",
                  "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    res = _invoke("run", sb, "--profile", "smoke", "--out", out, "--dry-run", "--no-estimate")
    assert res.exit_code == 0 and "1 done, 0 pending" in res.output, res.output


def test_a_zip_whose_members_would_not_fit_is_refused_before_extracting(tmp_path, monkeypatch):
    """A small zip of a huge member (a zip bomb: 200 MB of zeros in 240 KB) was extracted
    until the disk was full. Its members' declared sizes are now checked against the free
    space first: refused, exit 2, nothing extracted."""
    import collections
    import zipfile

    import ssmrepro.data.download as download

    src = tmp_path / "x.zip"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("lra_release/listops-1000/basic_train.tsv", "0" * 100_000)
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(download.shutil, "disk_usage", lambda p: usage(10**6, 10**6 - 50_000,
                                                                       50_000))
    res = _invoke("data", "download", "lra", "--url", f"file://{src}", "--dir", tmp_path / "d",
                  "--no-progress")
    _assert_refused(res, "its members would take 0.1 MB unpacked", "has 50,000 bytes free")
    assert not list((tmp_path / "d").rglob("basic_train.tsv"))


@pytest.mark.parametrize("edit,said", [
    ("drop", "gives 40 of the 50 bins of part 'before'"),
    ("inf", "has a count that is not a whole number of samples (count inf)"),
    ("part", "part 'middle' is not 'before' or 'after'"),
])
def test_a_committed_histogram_table_with_bins_missing_or_odd_counts_is_a_message(tmp_path, edit,
                                                                                   said):
    """huang2025-fig1 in a fresh clone: the rows of the 10 highest 'before' bins of one cell
    deleted from its histograms.csv (every cell has all 50 bins of both parts) turned the 'Mamba
    splits its decay at n' claim from FAIL into PASS without a word; a count of inf or a part
    no histogram has was taken too. It is a damaged table now."""
    folder = tmp_path / "out" / "huang2025" / "huang2025-fig1"
    shutil.copytree(ROOT / "results" / "huang2025" / "huang2025-fig1", folder)
    table = folder / "histograms.csv"
    head, *rows = table.read_text().splitlines()
    first = rows[0].split(",")  # label, model.mixer, task.T, part, bin, bins, count
    if edit == "drop":
        cell = ",".join(first[:3]) + ",before,"
        rows = [r for r in rows if not (r.startswith(cell) and int(r.split(",")[4]) >= 40)]
    elif edit == "inf":
        rows[0] = ",".join([*first[:-1], "inf"])
    else:
        rows[0] = ",".join([*first[:3], "middle", *first[4:]])
    table.write_text("\n".join([head, *rows]) + "\n")
    res = _invoke("verify", "huang2025-fig1", "--out", tmp_path / "out")
    _assert_refused(res, "histograms.csv", said, "delete it to rebuild it")


def test_a_weights_figure_keeps_the_stored_rows_of_cells_whose_weights_are_gone(tmp_path):
    """One cell's saved weights gone (deleted, or a fresh clone with one run trained since):
    `plot` computed a saved-weights figure (koren2026-fig14's output_distribution) from the
    cells with weights, rewrote its committed arrays without the others and drew it without
    them, without a word. The stored rows of those cells stand; without them it is said."""
    spec, args, root = _s4d_weights_lost(
        tmp_path, figures=[{"kind": "output_distribution", "name": "dist",
                            "where": [{"label": "S6"}, {"label": "S4D"}]}])
    arrays, figure = root / "dist-smoke-arrays.npz", root / "dist-smoke.png"
    before = arrays.read_bytes(), figure.read_bytes()
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0, res.output
    assert (arrays.read_bytes(), figure.read_bytes()) == before
    assert "drawn without" not in res.output
    arrays.unlink()
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "dist-smoke.png drawn without 1 of its 2 cells" in said, res.output


def test_a_weights_figure_with_set_is_drawn_from_the_set_runs_only(tmp_path):
    """`plot koren2026-fig14 --set train.lr=0.02` with only the runs without it trained drew
    figure-smoke-set-<tag>.png (and its arrays) from those runs' weights, byte for byte their
    figure, while the report said 0 runs finished: a saved-weights figure looked its cells up
    without the --set overrides."""
    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
                         figures=[{"kind": "output_distribution", "name": "dist",
                                   "where": [{"label": "S6"}]}])
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    res = _invoke("plot", spec, *args, "--set", "train.lr=0.02")
    assert res.exit_code == 0, res.output
    root = out / "tests" / "t-spec"
    assert (root / "dist-smoke-arrays.npz").exists()
    assert not list(root.glob("dist-smoke-set-*")), sorted(p.name for p in root.iterdir())
    assert "dist-smoke-set-" in res.output and "not drawn" in res.output, res.output


def test_a_weights_figure_of_cells_not_finished_under_the_edited_spec_is_not_drawn(tmp_path):
    """A fresh clone (no runs/) of a spec with a saved-weights figure: its stored arrays draw it
    as committed. After a spec edit (train.max_steps), with no run of the new spec trained, the
    old arrays were drawn all the same beside a report of '0 of 2 runs finished (the tables,
    figures and verdicts hold only those)'; the figure is not drawn now, with the reason."""
    import shutil as sh

    kw = dict(save_weights=True, analysis=["output_variance"],
              sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                                {"label": "S4D", "set": {"model.mixer": "s4d"}}]}],
              task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
              figures=[{"kind": "output_distribution", "name": "dist",
                        "where": [{"label": "S6"}, {"label": "S4D"}]}])
    spec = _one_run_spec(tmp_path, **kw)
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    root = tmp_path / "out" / "tests" / "t-spec"
    sh.rmtree(root / "runs")
    figure = root / "dist-smoke.png"
    before = figure.read_bytes()
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0 and figure.read_bytes() == before, res.output
    spec = _one_run_spec(tmp_path, **kw, profiles={"smoke": {"set": {"train.max_steps": 41}},
                                                   "quick": {}, "paper": {}})
    figure.unlink()
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "0 of 2 runs finished" in said, res.output
    assert "dist-smoke.png not drawn: no finished cell of profile smoke to draw" in said, said
    assert not figure.exists()


@pytest.mark.parametrize("spec_id,table,column,value,said", [
    ("koren2026-fig14", "output_variance.csv", "out.noise_var", "-5",
     "holds -5, not a variance (>= 0)"),
    ("koren2026-fig2", "mechanistic.csv", "gkq.diag_hit", "1.5",
     "holds 1.5, not a fraction (in [0, 1])"),
])
def test_a_committed_analysis_table_with_a_value_outside_its_metric_is_a_message(
        tmp_path, spec_id, table, column, value, said):
    """koren2026-fig14 in a fresh clone with one committed out.noise_var (a variance) edited to
    -5: its '4 heads have at most 2/3 of the 1-head output variance' claim went FAIL -> PASS
    without a word. An analysis metric outside its range is a damaged table now."""
    folder = tmp_path / "out" / "koren2026" / spec_id
    shutil.copytree(ROOT / "results" / "koren2026" / spec_id, folder)
    path = folder / table
    head, *rows = path.read_text().splitlines()
    cells = rows[0].split(",")
    cells[head.split(",").index(column)] = value
    path.write_text("\n".join([head, ",".join(cells), *rows[1:]]) + "\n")
    res = _invoke("verify", spec_id, "--out", tmp_path / "out")
    _assert_refused(res, table, column, said, "delete it to rebuild it")


@pytest.mark.parametrize("rows,needle", [
    ("[{id: huang2025-fig1, paper: koren2026, tier: 2}]",
     "targets.0.paper: 'koren2026', but the spec huang2025-fig1 says 'huang2025'"),
    ("[{id: huang2025-fig1, alias: keep-nth, paper: huang2025, tier: 2}]",
     "targets.0.alias: 'keep-nth', but the spec huang2025-fig1 says None"),
    ("[{id: huang2025-fig1, paper: huang2025, tier: 1}]",  # (yu2025-tab1 / tab2 were so)
     "targets.0.tier: 1, but the spec huang2025-fig1 says 2"),
])
def test_a_catalogue_row_that_contradicts_its_spec_is_refused_before_rebuilding(tmp_path, rows,
                                                                                 needle):
    """A catalogue row whose paper or alias is not its spec's: the front page listed
    huang2025-fig1 under koren2026, or with the alias keep-nth (huang2025-tab1's: `ssmrepro run
    keep-nth` runs that spec). Refused, and by `figures` before it rebuilds anything (the
    catalogue's other refusals came after a minute of rebuilding)."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text(f"papers: {{}}\ntargets: {rows}\n")
    out = tmp_path / "out"
    (out / "huang2025").mkdir(parents=True)
    shutil.copytree(ROOT / "results/huang2025/huang2025-fig1", out / "huang2025/huang2025-fig1")
    report = out / "huang2025/huang2025-fig1/report.md"
    report.unlink()
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "catalogue.yaml", needle)
    assert not report.exists()  # nothing rebuilt


def test_figures_says_a_report_whose_results_table_is_gone(tmp_path):
    """huang2025-fig1's results.csv deleted (its long profile's table kept): `figures` left its
    report.md (6 PASS) as it was without a word, and the front page's verdicts began with
    '; long: ...'. The report left is named; the front page says 'long: ...'."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    out = tmp_path / "out"
    (out / "huang2025").mkdir(parents=True)
    shutil.copytree(ROOT / "results/huang2025/huang2025-fig1", out / "huang2025/huang2025-fig1")
    (out / "huang2025/huang2025-fig1/results.csv").unlink()
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "huang2025-fig1 (quick): report.md is not rebuilt: there is no results.csv" in said
    row = next(line for line in (out / "README.md").read_text().splitlines()
               if line.startswith("| huang2025-fig1 "))
    assert "| long: 5 PASS" in row, row


def test_export_gives_an_analytic_tables_settings_as_its_rows_config(tmp_path):
    """`export` of an analytic spec (yu2025-fig5: no runs, a table over c x L) gave its grid and
    params (c, L, n, ...) as metrics beside an empty config and no run id: the exported ratio_w
    values could not be told apart. They are each row's config now; its metrics are the rest."""
    import pandas as pd

    out = tmp_path / "out"
    shutil.copytree(ROOT / "results/yu2025/yu2025-fig5", out / "yu2025/yu2025-fig5")
    dest = tmp_path / "x.csv"
    res = _invoke("export", "--out", out, "--file", dest)
    assert res.exit_code == 0, res.output
    df = pd.read_csv(dest)
    df = df[df["experiment"] == "yu2025-fig5"]
    assert set(df["metric"]) == {"ratio_w", "ratio_b", "s4d_grad_b"}, set(df["metric"])
    configs = df["config"].map(json.loads)
    assert configs.map(lambda c: (c["c"], c["L"])).nunique() == 42
    assert len(df) == 3 * 42


def test_a_haar_figure_of_another_wavelet_than_its_table_is_refused(tmp_path):
    """huang2025-figA1 with analytic.params j: 3, k: 5 (the figure left at j: 2, k: 1) passed
    `validate`: the figure drew ψ_{2,1} and labelled the table's errors, against ψ_{3,5},
    'error against ψ_{2,1}'."""
    root = _project(tmp_path, small=True)
    path = root / "experiments/huang2025/huang2025-figA1.yaml"
    shutil.copy(ROOT / "experiments/huang2025/huang2025-figA1.yaml", path)
    raw = yaml.safe_load(path.read_text())
    env = {"SSMREPRO_ROOT": str(root)}
    assert _invoke("validate", "huang2025-figA1", env=env).exit_code == 0
    _edit(path, analytic={**raw["analytic"], "params": {**raw["analytic"]["params"], "j": 3,
                                                         "k": 5}})
    res = _invoke("validate", "huang2025-figA1", env=env)
    _assert_refused(res, "figure.j: 2, but the table's wavelet has j = 3 (analytic.params.j)",
                    "figure.k: 1, but the table's wavelet has k = 5")


def test_a_decay_histogram_of_a_relabelled_case_is_under_its_new_label(tmp_path):
    """huang2025-fig1 smoke trained, then its case label S4D+PE renamed (S4D-PE, the claims
    too): results.csv took the runs under the new label, but histograms.csv kept the records'
    old one, so the S4D-PE cell had no decay metrics and its split claim went PASS -> FAIL
    ('not measured'). A run's histogram is under the label it has in the spec as it is."""
    import pandas as pd

    def spec(label):
        return _one_run_spec(tmp_path, analysis=["decay_histogram"], sweep=[
            {"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                       {"label": label, "set": {"model.mixer": "s4d"}}]}])

    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    assert _invoke("run", spec("S4D"), *args, "--no-calibrate", "--workers", "1").exit_code == 0
    res = _invoke("plot", spec("S4D-x"), *args)
    assert res.exit_code == 0, res.output
    root = out / "tests" / "t-spec"
    assert set(pd.read_csv(root / "histograms-smoke.csv")["label"]) == {"S6", "S4D-x"}
    summary = pd.read_csv(root / "summary-smoke.csv")
    assert set(summary["label"]) == {"S6", "S4D-x"}
    assert summary["decay.split"].notna().all(), summary


def test_figures_names_a_spec_it_cannot_read(tmp_path):
    """A spec edited into one that does not validate (an unknown key) was left out by
    `figures` without a word, exit 0: its outputs were not rebuilt and the front page called
    it 'not specified' (no spec yet). Refused now, naming the spec's error."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text(
        "papers: {}\ntargets: [{id: huang2025-fig1, paper: huang2025, tier: 2}]\n")
    spec = root / "experiments/huang2025/huang2025-fig1.yaml"
    spec.write_text(spec.read_text() + "bogus_key: 1\n")
    out = tmp_path / "out"
    out.mkdir()
    for args in ([], ["--no-rebuild"]):
        res = _invoke("figures", *args, "--out", out, env={"SSMREPRO_ROOT": str(root)})
        _assert_refused(res, "huang2025-fig1.yaml: bogus_key: unknown key")
    assert not (out / "README.md").exists()


def test_figures_after_a_profile_is_renamed(tmp_path):
    """huang2025-fig1's profile `long` renamed `longer`: the front page listed the old
    figure-long.png among the default profile's figures, and its report-long.md was left as it
    was without a word. Only the figures the spec's profiles write are listed; the report of no
    profile is named."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    spec = root / "experiments/huang2025/huang2025-fig1.yaml"
    spec.write_text(spec.read_text().replace("\n  long:\n", "\n  longer:\n"))
    out = tmp_path / "out"
    (out / "huang2025").mkdir(parents=True)
    shutil.copytree(ROOT / "results/huang2025/huang2025-fig1", out / "huang2025/huang2025-fig1")
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "huang2025-fig1: report-long.md is of no profile of the spec" in said, said
    row = next(line for line in (out / "README.md").read_text().splitlines()
               if line.startswith("| huang2025-fig1 "))
    assert "figure-long" not in row and "[figure](" in row, row


def test_a_partial_run_in_a_fresh_clone_keeps_the_committed_rows_of_the_other_runs(tmp_path):
    """A fresh clone (the committed results.csv, no runs/): `run huang2025-fig1 --max-runs 1`
    replaced the committed 6-row results.csv by its one trained run's row (the engine wrote the
    table from the records alone), and 6 PASS became 6 MISSING. The committed rows of the runs
    without a record are kept."""
    import pandas as pd

    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]
    spec = _one_run_spec(tmp_path, sweep=sweep)
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke", "--no-calibrate", "--workers", "1"]
    assert _invoke("run", spec, *args).exit_code == 0
    root = out / "tests" / "t-spec"
    table = root / "results-smoke.csv"
    before = pd.read_csv(table)
    shutil.rmtree(root / "runs")
    res = _invoke("run", spec, *args, "--max-runs", "1")
    assert res.exit_code == 0, res.output
    after = pd.read_csv(table)
    assert sorted(after["run_id"]) == sorted(before["run_id"]), after
    assert "2 runs expected, 2 finished" in (root / "report-smoke.md").read_text()


def test_export_names_the_tables_of_runs_with_set_overrides_it_leaves_out(tmp_path):
    """`export` left out the tables `run --set` writes (`results-smoke-set-<hash>.csv`) without
    a word, though docs/columns.md said it reads every results*.csv."""
    root = _project(tmp_path, small=True)
    out = tmp_path / "out"
    folder = out / "huang2025" / "huang2025-tab1"
    folder.mkdir(parents=True)
    (folder / "results-smoke-set-0a1b2c.csv").write_text("run_id,label\n")
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(root)})
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert ("note: left out 1 table(s) of runs with --set overrides (not a profile of their "
            "spec): huang2025/huang2025-tab1/results-smoke-set-0a1b2c.csv") in said, said


def test_a_selection_counts_every_candidates_runs(tmp_path):
    """With `aggregate.select` (one value of a swept key kept per cell) the report, `verify
    --json` and the console counted the kept candidate's runs only: 2 runs planned, 1 trained,
    said '1 runs expected, 1 finished' and nothing about the run not trained."""
    spec = _one_run_spec(tmp_path, sweep=[
        {"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
        {"grid": {"model.d_model": [8, 12]}}],
        aggregate={"reduce": "mean", "metrics": ["test.acc"],
                   "select": {"over": "model.d_model", "by": "test.acc", "op": "max"}})
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--no-plot", "--workers", "1", "--max-runs", "1")
    assert res.exit_code == 0, res.output
    res = _invoke("verify", spec, "--out", out, "--profile", "smoke", "--json")
    assert '"expected": 2' in res.output and '"finished": 1' in res.output, res.output
    report = (out / "tests" / "t-spec" / "report-smoke.md").read_text()
    assert "2 runs expected, 1 finished" in report, report


def test_a_where_naming_the_selected_key_is_refused(tmp_path):
    """With `aggregate.select.over: model.d_model` a cell holds the chosen width only: a claim
    or paper value `where: {model.d_model: 12}` matched nothing when 8 was kept (MISSING 'no
    cell the claim needs', paper value 'not run', every run finished)."""
    select = {"reduce": "mean", "metrics": ["test.acc"],
              "select": {"over": "model.d_model", "by": "test.acc", "op": "max"}}
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
             {"grid": {"model.d_model": [8, 12]}}]
    where = {"label": "S6", "model.d_model": 12}
    spec = _one_run_spec(tmp_path, sweep=sweep, aggregate=select,
                         claims=[{"text": "t", "where": where, "op": ">=", "value": 0.5}],
                         paper_values=[{"where": where, "metric": "test.acc", "value": 0.5,
                                        "tol": 0.1}])
    _assert_refused(_invoke("validate", spec), "claims.0.where.model.d_model: aggregate.select",
                    "paper_values.0.where.model.d_model: aggregate.select")
    spec = _one_run_spec(tmp_path, sweep=sweep, aggregate=select,
                         claims=[{"text": "t", "where": {"label": "S6"}, "op": ">=",
                                  "value": 0.5}])
    assert _invoke("validate", spec).exit_code == 0


@pytest.mark.parametrize("labels", [["7", "7.0"], ["True", "1"], ["７", "x"], ["nan", "y"]])
def test_a_label_that_reads_as_a_number_is_refused(tmp_path, labels):
    """Cells are keyed by values read back from CSV, numbers as numbers: the labels '7' and
    '7.0' (or 'True' and '1', a full-width '７' and '7') were one cell, 19 of 20 cells were
    summarised and the other label's row was gone from summary.csv, report.md and the figure
    without a word. Such a label is refused before training."""
    cases = [{"label": lab, "set": {"model.mixer": m}} for lab, m in zip(labels, ["s6", "s4d"])]
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=[{"cases": cases}]))
    _assert_refused(res, "sweep.0.cases.0.label", "a label is text, not a number")


def test_a_suggested_data_command_quotes_its_data_root(tmp_path):
    """`data info --dir 'my data; x'` suggested `ssmrepro data download lra --dir .../my data; x`:
    pasted into a shell it downloaded into '.../my' and ran `x`. The root is shell-quoted."""
    import shlex

    root = tmp_path / "my data; x"
    root.mkdir()
    res = _invoke("data", "info", "--dir", root, env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert f"download lra --dir {shlex.quote(str(root))}" in res.output, res.output


@pytest.mark.parametrize("raw", ["my #2 corpus.txt", "#fff"])
def test_a_set_value_holding_a_yaml_comment_is_refused(tmp_path, raw):
    """`--set 'task.path=my #2 corpus.txt'` is parsed as YAML, which reads ' #2 corpus.txt' as a
    comment: the value quietly became 'my' (and '#fff' became null). Refused, naming the value
    read; a quoted value keeps its '#'."""
    from ssmrepro.spec import SpecError
    from ssmrepro.sweep.expand import parse_overrides

    with pytest.raises(SpecError, match="holds a YAML comment"):
        parse_overrides([f"task.path={raw}"])
    assert parse_overrides([f'task.path="{raw}"']) == {"task.path": raw}
    assert parse_overrides(["task.path=a#b"]) == {"task.path": "a#b"}
    res = _invoke("show", _one_run_spec(tmp_path), "--set", f"train.lr=0.02 {raw}")
    _assert_refused(res, "--set train.lr", "holds a YAML comment")


def test_a_case_label_holding_the_label_separator_is_refused(tmp_path):
    """' / ' joins the case labels of several sweep axes, and a `where` label matches any part:
    a case labelled 'S4D / S6' (an S4D run) was judged by a claim on `label: S6` beside the S6
    cell ('1 of 2 finished cells miss'). Such a case label is refused."""
    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S4D / S6", "set": {"model.mixer": "s4d"}}]
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=[{"cases": cases}]))
    _assert_refused(res, "sweep.0.cases.1.label", "does not hold ' / '")


def test_a_title_word_wider_than_the_figure_is_broken(tmp_path):
    """Titles are wrapped at spaces: a 290-letter word without one (a pasted identifier, a URL)
    was one line running off both edges of a bars figure and cut. It is broken between letters;
    math stays whole."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    from ssmrepro.plots.registry import wrap_text

    lines = wrap_text("W" * 290 + " [t-w, profile smoke]", 6.4, 10).split("\n")
    assert "".join(lines).replace(" ", "").startswith("W" * 290) and len(lines) > 3, lines
    prop = FontProperties(size=10)
    assert all(text_to_path.get_text_width_height_descent(line, prop, ismath=False)[0]
               <= 0.95 * 6.4 * 72 for line in lines), lines
    assert wrap_text("$" + r"\alpha" * 5 + "$", 0.5, 10) == "$" + r"\alpha" * 5 + "$"


def test_a_figure_name_for_no_drawn_column_is_refused(tmp_path):
    """`names: {model.dmodel: width d}` (a misspelt key) was ignored without a word: the axis
    kept its default name 'd_model'. A `names` key must be a column the figure draws."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"model.d_model": [8, 12]}}]
    fig = {"kind": "lines", "metric": "test.acc", "x": "model.d_model", "hue": "label",
           "names": {"model.dmodel": "width d", "label": "model"}}
    res = _invoke("validate", _one_run_spec(tmp_path, sweep=sweep, figure=fig))
    _assert_refused(res, "figure.names.model.dmodel: names no column this figure draws")
    fig["names"] = {"model.d_model": "width d", "label": "model"}
    assert _invoke("validate", _one_run_spec(tmp_path, sweep=sweep, figure=fig)).exit_code == 0


def test_emoji_codes_in_spec_text_are_printed_as_written(tmp_path):
    """Rich's console replaced emoji codes: a title 'Ratio :warning: test' was shown as
    'Ratio ⚠ test' and a label 'S6:x:' as 'S6❌' by `show`, `run` and `verify`."""
    cases = [{"label": "S6:x:", "set": {"model.mixer": "s6"}}]
    spec = _one_run_spec(tmp_path, title="Ratio :warning: test", sweep=[{"cases": cases}])
    res = _invoke("show", spec, "--profile", "smoke", env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "Ratio :warning: test" in res.output and "S6:x:" in res.output, res.output
    assert "⚠" not in res.output and "❌" not in res.output, res.output


def test_a_tilde_out_from_the_environment_is_the_home_folder(tmp_path, monkeypatch):
    """`SSMREPRO_OUT='~/res'` (an env file, which no shell expands) wrote into a folder named '~'
    of the current folder, while `SSMREPRO_ROOT='~/...'`, `SSMREPRO_DATA` and `--dir` read the
    home folder. Every path option expands '~' alike."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    spec = _one_run_spec(tmp_path)
    res = _invoke("export", "--file", "x.csv", env={"SSMREPRO_OUT": "~/res", "HOME": str(home)})
    assert "~" not in os.listdir(cwd), res.output
    assert str(home / "res") in " ".join(res.output.split()), res.output
    res = _invoke("run", spec, "--profile", "smoke", "--no-calibrate", "--no-plot", "--workers",
                  "1", env={"SSMREPRO_OUT": "~/res", "HOME": str(home)})
    assert res.exit_code == 0, res.output
    assert not (cwd / "~").exists() and (home / "res/tests/t-spec/results-smoke.csv").is_file()


@pytest.mark.parametrize("label", ["a\\|b", "*x*", "`x`", "<x>", "[x](y)", "~~x~~", "a\\b"])
def test_a_label_with_markdown_syntax_is_shown_as_written_in_report_tables(label):
    """report.md's tables escaped only '|': a label 'a\\|b' was shown 'a|b' (its backslash read
    as the pipe's escape; on GitHub it split the row), '*x*' in italics, '`x`' as code, '<x>' not
    at all (an HTML tag), '[x](y)' as a link. Every table cell renders as its text."""
    import html

    from markdown_it import MarkdownIt

    from ssmrepro.report import md_cell

    md = MarkdownIt("commonmark").enable("table").enable("strikethrough")
    out = md.render(f"| l | v |\n|---|---|\n| {md_cell(label)} | 0.5 |\n").replace("\n", "")
    assert f"<td>{html.escape(label, quote=False)}</td><td>0.5</td>" in out, out


def test_a_legend_entry_wider_than_its_panel_is_wrapped(tmp_path):
    """A 200-letter case label (labels may have 200 characters) in a `lines` legend ran off the
    image, taking the other entries and the markers with it. Legend entries are wrapped to their
    panel when the figure is saved."""
    import matplotlib

    matplotlib.use("Agg")
    import warnings

    from ssmrepro.plots.registry import save_png, subplots, tight_layout

    fig, ax = subplots(tmp_path / "f.png", 100, figsize=(4.6, 3.6))
    ax.plot([8, 12], [0.1, 0.2], marker="o", label="S6")
    ax.plot([8, 12], [0.1, 0.15], marker="o", label="M" * 200)
    ax.legend(fontsize=8)
    with warnings.catch_warnings():  # matplotlib's 'Tight layout not applied' went to stderr
        warnings.simplefilter("error")  # about a layout the saved figure does not have
        tight_layout(fig)
    legend = ax.get_legend()
    save_png(fig, tmp_path / "f.png", 100)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box = legend.get_window_extent(FigureCanvasAgg(fig).get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox)
    assert (tmp_path / "f.png").is_file()


def test_a_long_output_path_is_printed_on_one_line_when_piped(tmp_path):
    """Piped or logged (no terminal), the console wrapped its lines at 80 columns and folded a
    path longer than that: `figures: \\n/tmp/...dd\\ndd/tests/t-spec/figure-smoke.png`, so a script
    reading the line got a broken path. Off a terminal, lines are not wrapped."""
    out = tmp_path / ("d" * 90)
    res = _invoke("run", _one_run_spec(tmp_path), "--out", out, "--profile", "smoke",
                  "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    fig = out / "tests" / "t-spec" / "figure-smoke.png"
    assert f"figures: {fig}\n" in res.output, res.output


@pytest.mark.parametrize("task, key", [
    ({"name": "selective_copy", "L": 16, "number_offset": 16}, "number_offset=16"),
    ({"name": "selective_copy", "L": 16, "p": 0}, "p=0"),
    ({"name": "decode_recall", "L": 16, "p": 1}, "p=1"),
    ({"name": "multikey_recall", "L": 3, "key_len": 2}, "L=3"),
])
def test_a_task_with_no_supervised_position_is_refused_by_validate(tmp_path, task, key):
    """A selective copy whose smallest number reaches before every sequence start (offset >= L)
    or has no number (p = 0), a decode recall of bits only (p = 1), a multi-key recall too short
    to store and recall a key: `validate` said ok and `run` failed the pack after starting
    (NoTargets, exit 1, naming no key). `validate` refuses them, naming the key, exit 2."""
    res = _invoke("validate", write_spec(tmp_path, task=task))
    assert res.exit_code == 2, res.output
    assert key in res.output and "no position has a target" in res.output, res.output


def test_multikey_recall_targets_do_not_hold_an_l_by_l_comparison():
    """Multi-key recall compared every position with every other at once, (E, B, L, L): L =
    20,000 at batch 8 allocated over 50 GB while sampling, which the memory estimate does not
    count (`validate` and `run --dry-run` said ok). The comparison is made in blocks of
    positions: the same targets, in bounded memory (here: under 1 GB of address space more than
    the interpreter holds, where the old way needed about 4 GB)."""
    import subprocess
    import sys

    code = """if True:
        import resource, torch
        from ssmrepro.tasks.multikey_recall import multikey_targets
        x = torch.randint(0, 8, (1, 8, 6000))
        size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), resource.RLIM_INFINITY))
        y = multikey_targets(x, 8, 2)
        print('ok', int((y >= 0).sum()))
    """
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stderr[-2000:]


def test_multikey_recall_blocked_targets_match_the_whole_comparison():
    import torch

    from ssmrepro.tasks import multikey_recall as mk

    x = torch.randint(0, 3, (2, 3, 2000))  # blocks of 349 positions
    whole = mk.multikey_targets(x, 3, 2)
    L = x.shape[-1]
    kid = torch.roll(x, 1, dims=-1) * 3 + x
    pos = torch.arange(L)
    t, j = pos[:, None], pos[None, :]
    match = (kid[..., :, None] == kid[..., None, :]) & (j < t) & (j >= 2) & (t >= 1)
    last = torch.where(match, j, torch.full_like(j, -1)).amax(-1)
    ref = torch.where(last >= 0, x.gather(-1, (last + 1).clamp(max=L - 1)), torch.full_like(x, -100))
    assert torch.equal(whole, ref)


def test_induction_heads_targets_do_not_hold_a_position_by_vocabulary_table():
    """Induction-heads targets were found through a (E, B, T, V) one-hot table and its running
    maximum, 32 bytes per position per vocabulary id: `vocab: 4000, T: 4000` at batch 8 needed
    about 4 GB while sampling (several times the logits the memory estimate counts). A stable
    sort finds each previous occurrence in O(T) memory: the same targets, under 1 GB."""
    import subprocess
    import sys

    code = """if True:
        import resource, torch
        from ssmrepro.tasks.induction_heads import induction_targets
        x = torch.randint(0, 4000, (1, 8, 4000))
        size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), resource.RLIM_INFINITY))
        y = induction_targets(x, 4000)
        print('ok', int((y >= 0).sum()))
    """
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stderr[-2000:]


def test_an_inverse_matching_ood_range_that_overlaps_the_training_values_is_refused(tmp_path):
    """`ood_low: 50` beside training values [20, 100]: the 'OOD' evaluation set drew values seen
    in training, so an out-of-distribution accuracy measured partly in-distribution ones, without
    a word. `validate` refuses it, naming the keys, exit 2."""
    task = {"name": "inverse_matching", "n_fill": 2, "ood_low": 50, "ood_high": 150}
    res = _invoke("validate", write_spec(tmp_path, task=task))
    assert res.exit_code == 2, res.output
    assert "ood_low/ood_high: [50, 150] overlaps the training values [20, 100]" in res.output, \
        res.output
    ok = {"name": "inverse_matching", "n_fill": 2, "ood_low": 101, "ood_high": 150}
    assert _invoke("validate", write_spec(tmp_path, task=ok)).exit_code == 0


@pytest.mark.parametrize("key, value", [("sigma1", 1e-50), ("sigma2", 1e39)])
def test_a_first_abs_std_that_float32_inputs_cannot_hold_is_refused(tmp_path, key, value):
    """first_abs feeds u in float32: `sigma1: 1e-50` made every u_1 0 (the target |z_1| could not
    be read: an impossible task trained without a word), `sigma2: 1e39` made the inputs
    infinite. `validate` refuses a std outside [1e-30, 1e30], naming the key, exit 2."""
    task = {"name": "first_abs", "L": 8, key: value}
    res = _invoke("validate", write_spec(tmp_path, task=task,
                                         model={"name": "ssm_lm", "mixer": "s6", "d_model": 8,
                                                "d_state": 4}))
    assert res.exit_code == 2, res.output
    assert f"{key}={value:g} is outside [1e-30, 1e30]" in res.output, res.output


@pytest.mark.parametrize("first", [0, 1, 3])
def test_previous_occurrence_equals_the_double_loop(first):
    """tasks.base.previous_occurrence (the induction-heads and multikey-recall targets, by a
    stable sort) against the obvious reference: the latest j in [first, t) with x_j == x_t."""
    import torch

    from ssmrepro.tasks.base import previous_occurrence

    g = torch.Generator().manual_seed(first)
    x = torch.randint(0, 4, (3, 2, 40), generator=g)
    got = previous_occurrence(x, first)
    want = torch.full_like(x, -1)
    for idx in __import__("numpy").ndindex(*x.shape[:-1]):
        row = x[idx].tolist()
        for t in range(len(row)):
            for j in range(first, t):
                if row[j] == row[t]:
                    want[idx + (t,)] = j
    assert torch.equal(got, want)


def test_a_weights_figure_not_drawn_under_set_names_the_command_with_its_set_and_out(tmp_path):
    """A saved-weights figure not drawn under `--set` said '`ssmrepro run ID --profile P` trains
    them': that command trains the runs without the override, into the project's results, and
    the figure stayed not drawn. It now names the command with the same --out and --set."""
    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
                         figures=[{"kind": "output_distribution", "name": "fig-out"}])
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke", "--set", "train.lr=0.002"]
    res = _invoke("run", spec, *args, "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    root = out / "tests" / "t-spec"
    for p in [*root.glob("runs/*.pt"), *root.glob("*.npz")]:
        p.unlink()
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "not drawn" in said and "--set train.lr=0.002" in said, res.output
    assert f"--out {out}" in said, res.output


def test_saved_weights_arrays_copied_from_another_profile_are_not_drawn_as_this_ones(tmp_path):
    """A saved-weights figure's arrays file did not say which runs its rows came from: the smoke
    profile's arrays copied over the quick profile's (weights gone, as in a fresh clone) were
    drawn as the quick profile's figure, without a word. Each row now names its run, and rows of
    runs not of the profile's cells make the file unusable."""
    import shutil

    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
                         profiles={"smoke": {}, "quick": {"set": {"model.d_state": 2}},
                                   "paper": {}},
                         figures=[{"kind": "output_distribution", "name": "fig-out"}])
    out = tmp_path / "out"
    root = out / "tests" / "t-spec"
    arrays = {}
    for prof in ("smoke", "quick"):
        before = set(root.glob("*.npz"))
        res = _invoke("run", spec, "--out", out, "--profile", prof, "--no-calibrate",
                      "--workers", "1")
        assert res.exit_code == 0, res.output
        (arrays[prof],) = set(root.glob("*.npz")) - before
    quick = [p for p in root.glob("runs/*.json") if '"d_state": 2' in p.read_text()]
    assert quick
    for p in quick:
        p.with_suffix(".pt").unlink()
    res = _invoke("plot", spec, "--out", out, "--profile", "quick")
    assert res.exit_code == 0 and "not drawn" not in res.output, res.output  # its own arrays
    shutil.copyfile(arrays["smoke"], arrays["quick"])
    res = _invoke("plot", spec, "--out", out, "--profile", "quick")
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "is unusable" in said and "not of this profile's cells" in said, res.output


def test_a_tar_member_that_would_not_fit_or_a_full_disk_is_no_room_not_a_bad_archive(
        tmp_path, monkeypatch):
    """A tar streams, so only zips were size-checked before extracting: a tar member larger than
    the free space was written until the disk was full, and the full disk was reported as 'the
    archive may be truncated; delete <archive> and re-run to download it again' (exit 1), a
    7 GB download thrown away for nothing. A member that would not fit is now refused before it
    is written, and a full disk is said as such (exit 2), the archive kept."""
    import collections
    import errno
    import io
    import tarfile

    import ssmrepro.data.download as download

    src = tmp_path / "x.tar.gz"
    with tarfile.open(src, "w:gz") as tar:
        data = b"0" * 100_000
        info = tarfile.TarInfo("lra_release/listops-1000/basic_train.tsv")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    usage = collections.namedtuple("usage", "total used free")
    real = download.shutil.disk_usage
    monkeypatch.setattr(download.shutil, "disk_usage", lambda p: usage(10**6, 10**6 - 50_000,
                                                                       50_000))
    args = ["data", "download", "lra", "--url", f"file://{src}", "--no-progress"]
    res = _invoke(*args, "--dir", tmp_path / "d")
    _assert_refused(res, "basic_train.tsv takes 0.1 MB unpacked", "has 50,000 bytes free")
    assert not list((tmp_path / "d").rglob("basic_train.tsv"))
    monkeypatch.setattr(download.shutil, "disk_usage", real)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "extract", full)
    res = _invoke(*args, "--dir", tmp_path / "e")
    _assert_refused(res, "is full (No space left on device)", "free some space and re-run")
    assert "truncated" not in res.output and "download it again" not in res.output, res.output
    assert list((tmp_path / "e").rglob("x.tar.gz"))  # the archive is kept


@pytest.mark.parametrize("payload,said", [
    ("code", "it names posix.system"),
    ("int64", "its data are not uint8 rows of 3 x 32 x 32 pixels"),
    ("labels", "not one whole-number label per image"),
    ("cut", "not a CIFAR-10 python batch"),
])
def test_a_cifar_batch_that_runs_code_or_is_not_a_batch_is_damaged_data(tmp_path, payload, said):
    """The CIFAR-10 batches are pickles, read with pickle.load: a batch from a `data download
    cifar10 --url` mirror (no checksum) or copied in by hand ran any code it named when the
    first run read it (os.system here). Pixels of another type were cast to uint8 (300 read
    as 44), and a cut file was a bare ValueError or UnpicklingError in every pack. The batches
    are now read by an unpickler that builds containers and numpy arrays only, and checked:
    DataUnavailable naming the damaged file, nothing run."""
    import os
    import pickle

    import numpy as np

    from ssmrepro.data import DataUnavailable, load_lra

    marker = tmp_path / "ran"

    class Code:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    d = tmp_path / "data" / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (20, 3072), dtype=np.uint8),
                 b"labels": [i % 10 for i in range(20)]}
        if name == "test_batch":
            if payload == "code":
                batch[b"x"] = Code()
            elif payload == "int64":
                batch[b"data"] = batch[b"data"].astype(np.int64) + 200
            elif payload == "labels":
                batch[b"labels"] = [0.5] * 20
        blob = pickle.dumps(batch, protocol=2)
        (d / name).write_bytes(blob[: len(blob) // 2] if payload == "cut" and name == "test_batch"
                               else blob)
    with pytest.raises(DataUnavailable, match="are damaged") as err:
        load_lra("image", "test", root=tmp_path / "data")
    assert said in str(err.value) and "test_batch" in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize("claim", [
    {"text": "seeds agree", "metric": "test.acc.std", "op": "<=", "value": 0.05},
    {"check": "any_threshold", "text": "some cell's seeds agree", "metric": "test.acc.std",
     "op": "<=", "value": 0.05},
    {"check": "ordering", "text": "a spreads more", "metric": "test.acc.std + 0",
     "a": {"label": "a"}, "b": {"label": "b"}, "match": []},
])
def test_a_seed_spread_claim_is_not_judged_on_one_seed_or_past_a_diverged_one(claim):
    """`test.acc.std` is 0.0 for one seed (by design) and the spread of the seeds that finished
    ok: a claim that the seeds agree PASSed on a one-seed profile, and on two agreeing seeds
    beside a diverged one. A cell with fewer than 2 finished seeds is untestable (MISSING,
    saying why); a cell with a diverged seed has no spread (NaN, a miss), as it has no mean."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, cell_keys, verify

    def verdicts(seeds, status):
        runs = [SimpleNamespace(label=lab, seed=s, coords={}, flat=dict) for lab in "ab"
                for s in seeds]
        df = pd.DataFrame([{"run_id": f"r{i}", "label": r.label, "seed": r.seed,
                            "status": status.get(i, "ok"),
                            "test.acc": 0.5 if status.get(i, "ok") == "ok" else float("nan")}
                           for i, r in enumerate(runs)])
        cells = aggregate(df, runs, "mean", ["test.acc"])
        spec = SimpleNamespace(claims=[claim], paper_values=[], claim="c")
        return [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "claim"]

    [v] = verdicts([0], {})
    assert v.verdict == "MISSING", v
    assert "fewer than 2 finished seeds for test.acc.std" in v.detail, v.detail
    [v] = verdicts([0, 1, 2], {0: "diverged", 3: "diverged"})
    assert v.verdict == "FAIL", v
    assert "diverged" in v.detail or claim.get("check") == "any_threshold", v.detail
    [v] = verdicts([0, 1], {})  # two seeds that agree: judged
    assert v.verdict == "PASS", v


def test_a_log_scale_over_zero_or_negative_values_is_refused(tmp_path):
    """A loglog_slope claim (or a lines figure with logx, bands, bound_grid's log axes) over a
    key that is 0 in some run (`train.weight_decay: [0, 0.01, 0.1]`): the claim FAILed after
    training whatever was trained ('1 finished cells have no positive test.loss (diverged or
    zero)': the loss was fine, x was 0) and the figure clipped the point to the axis edge.
    `validate` refuses it naming the column and profile, exit 2; a `where` that leaves the 0
    out is accepted."""
    sweep = [{"grid": {"train.weight_decay": [0.0, 0.01, 0.1]}}]
    slope = {"check": "loglog_slope", "text": "power law", "metric": "test.loss",
             "x": "train.weight_decay", "expected": 0.0, "tol": 1.0, "group_by": [],
             "min_points": 2}
    lines = {"kind": "lines", "metric": "test.acc", "x": "train.weight_decay", "logx": True}
    for field, kw in (("claims.0", {"claims": [slope]}), ("figure", {"figure": lines})):
        res = _invoke("validate", write_spec(tmp_path, sweep=sweep, **kw))
        assert res.exit_code == 2, res.output
        assert (f"{field}: 'train.weight_decay' is on a log scale (its logarithm is taken), but "
                "is 0.0 in a run of profile smoke") in res.output, res.output
    ok = {**slope, "where": {"train.weight_decay": [0.01, 0.1]}}
    res = _invoke("validate", write_spec(tmp_path, sweep=sweep, claims=[ok],
                                         figure={**lines, "logx": False}))
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("train", [{"max_steps": 0}, {"max_steps": 2, "eval_every": 50}])
def test_a_learning_curve_of_one_evaluation_is_drawn_as_a_point(tmp_path, monkeypatch, train):
    """`max_steps: 0`, or `eval_every` past `max_steps` with a logx axis (step 0 left out):
    each curve has one point, and a line through one point draws nothing: the curves figure
    was saved with empty panels and a legend, as if fine. A lone point is drawn as a marker."""
    import ssmrepro.plots.curves as curves_mod

    drawn = []
    real = curves_mod.save_png

    def keep(fig, path, **kw):
        drawn.extend(line for ax in fig.axes for line in ax.get_lines())
        return real(fig, path, **kw)

    monkeypatch.setattr(curves_mod, "save_png", keep)
    spec = _one_run_spec(
        tmp_path, train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "val_size": 16,
                         "test_size": 16, "eval_every": 1, "eval_batch_size": 16, **train},
        figure={"kind": "curves", "series": ["val.acc", "train.loss"],
                "logx": "eval_every" in train})
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert len(drawn) == 2, drawn
    for line in drawn:
        assert len(line.get_xdata()) == 1 and line.get_marker() not in (None, "None", ""), line


def test_a_monotone_group_with_two_cells_at_one_step_is_refused(tmp_path):
    """`monotone` with a `group_by` that leaves out a key that varies (`group_by: []` over two
    labels): each group held two cells per value of `along`, compared in table order as steps
    (`3 violations in 5 steps (1→1, 2→2, 3→3)`): two rising lines FAILed. `validate` refuses
    it, naming the key to add, exit 2; naming it is accepted."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"model.d_model": [8, 12]}}]
    claim = {"check": "monotone", "text": "wider is better", "along": "model.d_model",
             "group_by": []}
    res = _invoke("validate", write_spec(tmp_path, sweep=sweep, claims=[claim]))
    assert res.exit_code == 2, res.output
    assert "claims.0.group_by: 2 cells of one group of profile smoke have model.d_model = 8" \
        in res.output and "name it in group_by" in res.output, res.output
    res = _invoke("validate", write_spec(tmp_path, sweep=sweep,
                                         claims=[{**claim, "group_by": ["label"]}]))
    assert res.exit_code == 0, res.output


def test_a_seed_whose_final_evaluation_was_not_finite_is_not_left_out_of_the_mean(tmp_path):
    """A run that finished ok whose final evaluation overflowed (its record keeps `test.acc:
    null`, as it keeps no inf) beside a seed with a value: the cell's mean was the other seed's
    value, its spread 0.0, reported as the mean of 2 seeds (`test.acc <= 0.99` PASSed). The seed
    counts as diverged for that metric: the cell's value is NaN, a miss, said so."""
    spec = _one_run_spec(
        tmp_path, seeds=[0, 1],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16},
        claims=[{"text": "some accuracy", "op": "<=", "value": 0.99}])
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate", "--no-plot",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    rec_path = sorted((out / "tests/t-spec/runs").glob("*.json"))[0]
    rec = json.loads(rec_path.read_text())
    rec["metrics"]["test.acc"] = None
    rec_path.write_text(json.dumps(rec))
    res = _invoke("verify", spec, "--out", out, "--profile", "smoke")
    assert "FAIL some accuracy" in res.output, res.output
    assert "a final evaluation that was not finite" in res.output, res.output
    summary = (out / "tests/t-spec/summary-smoke.csv").read_text().splitlines()
    row = dict(zip(summary[0].split(","), summary[1].split(",")))
    assert row["test.acc"] == "" and row["test.acc.std"] == "" and row["n_ok"] == "2", row


def test_a_decay_histogram_with_all_mass_in_one_bin_is_drawn_on_the_whole_range(tmp_path,
                                                                                 monkeypatch):
    """The histograms kind autoscaled each panel's x axis to the bins drawn: all values of a
    model in one bin ([0, 0.02)) filled the panel as a flat distribution over 0.000-0.020, beside
    panels over [0, 1]. Every panel spans the whole [0, 1] the bins cover."""
    import pandas as pd

    import ssmrepro.plots.figures as figs
    from ssmrepro.plots.registry import FigureContext
    from ssmrepro.report.analysis import DECAY

    spans = []
    monkeypatch.setattr(figs, "save_png", lambda fig, path, **kw: spans.extend(
        ax.get_xlim() for ax in fig.axes))
    rows = [{"label": lab, "task.T": 10, "part": part, "bin": b, "bins": 50,
             "count": (100 if b == 0 else 0) if lab == "S4D" else 1 + b}
            for lab in ("S6", "S4D") for part in ("before", "after") for b in range(50)]
    ctx = FigureContext(spec=None, profile="smoke", cells=pd.DataFrame(), keys=["label"],
                        out=lambda stem, ext: tmp_path / f"{stem}.{ext}",
                        tables={DECAY: pd.DataFrame(rows)})
    ctx.fitted_title = lambda cfg, width, size=10: "t"
    assert figs.histograms(ctx, figs.HistogramsConfig(kind="histograms"), tmp_path / "f.png")
    assert len(spans) == 3 and all(lo <= 0 and hi >= 1 for lo, hi in spans), spans


def test_a_precondition_on_a_seed_spread_is_not_met_by_one_seed():
    """`given: [{metric: test.acc.std, op: "<=", value: 0.05}]` (the seeds agree) held on one
    seed (its spread is 0.0 by design), so the claim was judged as if its precondition were
    met: a one-seed cell is untestable there too (MISSING, saying why)."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, cell_keys, verify

    runs = [SimpleNamespace(label="a", seed=0, coords={}, flat=dict)]
    df = pd.DataFrame([{"run_id": "r0", "label": "a", "seed": 0, "status": "ok",
                        "test.acc": 0.95}])
    cells = aggregate(df, runs, "mean", ["test.acc"])
    claim = {"text": "solved", "op": ">=", "value": 0.9,
             "given": [{"metric": "test.acc.std", "op": "<=", "value": 0.05}]}
    spec = SimpleNamespace(claims=[claim], paper_values=[], claim="c")
    [v] = [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "claim"]
    assert v.verdict == "MISSING", v
    assert "fewer than 2 finished seeds for test.acc.std" in v.detail, v.detail


def test_a_heatmap_of_a_metric_outside_zero_one_says_its_colours_are_clipped(tmp_path,
                                                                          monkeypatch):
    """The heatmaps kind colours on [0, 1]: a loss of 2.33 and one of 3.90 were both the top
    colour beside a colour bar that stopped at 1.0, as if both were 1 (and its label ran off the
    image of one row of panels). The colour bar has a pointed end where values lie beyond it;
    accuracies keep a plain bar."""
    from types import SimpleNamespace

    import pandas as pd

    import ssmrepro.plots.figures as figs
    from ssmrepro.plots.registry import FigureContext

    bars = []
    monkeypatch.setattr(figs, "save_png", lambda fig, path, **kw: bars.extend(
        im.colorbar.extend for ax in fig.axes for im in ax.get_images()
        if im.colorbar is not None))
    for metric, vals, want in (("test.loss", [3.9, 2.33], "max"),
                               ("test.acc", [0.4, 0.6], "neither")):
        bars.clear()
        cells = pd.DataFrame({"label": ["S6", "S4D"], "model.mixer": ["s6", "s4d"],
                              "task.T": [8, 8], "n_ok": [2, 2], "n_diverged": [0, 0],
                              metric: vals})
        ctx = FigureContext(spec=SimpleNamespace(paper_values=[]), profile="smoke",
                            cells=cells, keys=["label"], out=lambda s, e: tmp_path / f"{s}.{e}")
        ctx.fitted_title = lambda cfg, width, size=10: "t"
        ctx.aggregation = lambda metric="": "mean of 2 seeds"
        cfg = figs.HeatmapsConfig(kind="heatmaps", metric=metric, x=["model.mixer"],
                                  y=["task.T"])
        assert figs.heatmaps(ctx, cfg, tmp_path / "f.png")
        assert bars == [want], bars


def test_a_seed_spread_claim_in_one_seed_profiles_only_is_refused(tmp_path):
    """A claim on `test.acc.std` in a spec whose every profile trains one seed per cell stays
    MISSING whatever is trained (one seed has no spread): `validate` refuses it, exit 2, as
    any claim no profile can judge; with two seeds it is accepted."""
    claim = {"text": "seeds agree", "metric": "test.acc.std", "op": "<=", "value": 0.05}
    res = _invoke("validate", _one_run_spec(tmp_path, claims=[claim]))
    assert res.exit_code == 2, res.output
    assert ("claims.0.metric: test.acc.std is a spread over seeds, but each cell has one seed "
            "in profile smoke") in res.output and "stays MISSING in every profile" in res.output, \
        res.output
    res = _invoke("validate", _one_run_spec(tmp_path, claims=[claim], seeds=[0, 1]))
    assert res.exit_code == 0, res.output


def _curves_context(tmp_path, table):
    """A FigureContext of the `curves` kind over the curves table ``table`` (one label key, no
    paper values), its outputs under ``tmp_path`` and its title 't'."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import curves as cv

    ctx = cv.FigureContext(spec=SimpleNamespace(paper_values=[]), profile="smoke",
                           cells=pd.DataFrame(), keys=["label"],
                           out=lambda s, e: tmp_path / f"{s}.{e}", tables={cv.CURVES: table})
    ctx.title = lambda cfg: "t"
    return ctx


def test_a_log_scale_learning_curve_of_zeros_is_drawn_on_a_linear_axis(tmp_path, monkeypatch):
    """The curves kind with `logy` over values that are all 0 (an accuracy that never left 0):
    the log axis could not show them, and the figure was saved with an empty panel and a
    legend, as if fine. Such a panel (or figure, when its panels share y) is drawn linear, as
    the lines kind draws one."""

    import pandas as pd

    import ssmrepro.plots.curves as curves_mod

    scales = []
    monkeypatch.setattr(curves_mod, "save_png", lambda fig, path, **kw: scales.extend(
        ax.get_yscale() for ax in fig.axes))
    for vals, want in (([0.0, 0.0, 0.0], "linear"), ([0.1, 0.2, 0.0], "log")):
        scales.clear()
        df = pd.DataFrame({"run_id": "r0", "label": "S6", "seed": 0, "status": "ok",
                           "step": [0, 1, 2], "samples": [0, 8, 16], "val.acc": vals})
        ctx = _curves_context(tmp_path, df)
        cfg = curves_mod.CurvesConfig(kind="curves", series=["val.acc"], logy=True)
        assert curves_mod.curves(ctx, cfg, tmp_path / "f.png")
        assert scales == [want], scales


def test_a_lines_figure_with_logx_must_name_its_x(tmp_path):
    """`lines` with `logx: true` and no `x`: x is whichever swept key varies in a panel, here
    a mixer's name, drawn as categories 0 and 1 on a log axis, where 0 has no place: the first
    label's line was left out of the figure, without a word. `validate` refuses it, exit 2."""
    fig = {"kind": "lines", "metric": "test.acc", "logx": True, "facet": None}
    res = _invoke("validate", write_spec(tmp_path, figure=fig))
    assert res.exit_code == 2, res.output
    assert "logx: name x, the numeric column on the log axis" in res.output, res.output
    res = _invoke("validate", write_spec(
        tmp_path, figure={**fig, "x": "model.d_model"},
        sweep=[{"grid": {"model.d_model": [8, 12]}}]))
    assert res.exit_code == 0, res.output


def test_a_log_step_axis_over_step_zero_alone_is_drawn_linear(tmp_path, monkeypatch):
    """The curves kind with `logx` over histories of step 0 alone (`max_steps: 0`): matplotlib
    raised 'Data cannot be log-scaled because all values are <= 0', a traceback in `run` and
    `plot`. With no step above 0 the axis is linear, the lone point drawn."""

    import pandas as pd

    import ssmrepro.plots.curves as curves_mod

    drawn = []
    monkeypatch.setattr(curves_mod, "save_png", lambda fig, path, **kw: drawn.extend(
        (ax.get_xscale(), len(line.get_xdata())) for ax in fig.axes for line in ax.get_lines()))
    df = pd.DataFrame({"run_id": "r0", "label": "S6", "seed": 0, "status": "ok", "step": [0],
                       "samples": [0], "val.acc": [0.2]})
    ctx = _curves_context(tmp_path, df)
    cfg = curves_mod.CurvesConfig(kind="curves", series=["val.acc"], logx=True)
    assert curves_mod.curves(ctx, cfg, tmp_path / "f.png")
    assert drawn == [("linear", 1)], drawn


def test_a_named_eval_set_longer_than_learned_positions_is_refused(tmp_path):
    """`model.pos: learned` holds one position per step of the training task; `train.evals: {long:
    {T: 16}}` beside T 8 passed `validate` and every pack then failed at its first evaluation
    ('The size of tensor a (16) must match the size of tensor b (8)'). `validate` refuses it,
    naming the set and the reason, exit 2; a set of the training length stays fine."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    model = {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "pe": "learned"}
    res = _invoke("validate", write_spec(tmp_path, model=model,
                                         train={**train, "evals": {"long": {"T": 16}}}))
    assert res.exit_code == 2, res.output
    assert "train.evals.long: its sequences of length 16 are longer than the 8 positions" \
        in res.output, res.output
    ok = write_spec(tmp_path, model=model, train={**train, "evals": {"same": {"T": 8}}})
    assert _invoke("validate", ok).exit_code == 0


# the outputs of a spec of a regression task (write_spec copies huang2025-tab1's accuracy
# table and bars, which such a task never records: refused by validate)
REGRESSION_OUTPUTS = {"aggregate": {"reduce": "mean", "metrics": ["test.mse", "test.loss"]},
                      "figure": {"kind": "bars", "metric": "test.mse", "x": "label"}}


@pytest.mark.parametrize("theta_seed", [2**32, 2**64])
def test_a_linear_functional_theta_seed_beyond_32_bits_is_refused(tmp_path, theta_seed):
    """θ is drawn from a stream keyed by the low 32 bits of `theta_seed`: 2**32 quietly trained
    seed 0's functional under another name, 2**64 failed every pack mid-run ('Overflow when
    unpacking long long'). `validate` refuses both, naming the key, exit 2."""
    task = {"name": "linear_functional", "L": 8, "theta_seed": theta_seed}
    res = _invoke("validate", write_spec(tmp_path, task=task,
                                         model={"name": "ssm_lm", "mixer": "s6", "d_model": 8,
                                                "d_state": 4}))
    assert res.exit_code == 2, res.output
    assert "theta_seed" in res.output and "4294967295" in res.output, res.output


@pytest.mark.parametrize("task, needle", [
    ({"name": "lra_pathfinder", "resolution": 0}, "task.resolution: Input should be greater"),
    ({"name": "lra_pathfinder", "val_fraction": -0.1}, "task.val_fraction: Input should be greater"),
    ({"name": "lra_pathfinder", "test_fraction": 0.95},
     "val_fraction + test_fraction must leave rows for training"),
    ({"name": "lra_image", "source": "download:cifar10", "std": 0.0},
     "task.std: Input should be greater than 0"),
    ({"name": "lra_image", "source": "proxy:digits", "mean": 0.3},
     "mean 0.3 is not read with source proxy:digits"),
    ({"name": "lra_image", "source": "proxy:digits", "normalize": False},
     "normalize False is not read with source proxy:digits"),
    ({"name": "lra_image", "source": "download:cifar10", "color_std": [0.1, 0.1, 0.1]},
     "color_std (0.1, 0.1, 0.1) is not read with grayscale True"),
    ({"name": "lra_pathfinder", "tokenize": True, "center": True},
     "center True is not read with tokenize true"),
    ({"name": "lra_text", "level": "byte", "min_freq": 3}, "min_freq 3 is not read at level byte"),
])
def test_an_lra_preprocessing_field_out_of_range_or_never_read_is_refused(tmp_path, task, needle):
    """The LRA task configs copied the data dataclasses' bare types: `resolution: 0` planned
    'L 0', `val_fraction: -0.1` split 10 rows 10 / 9 / 0 (refused as 'an empty test split'), a
    std of 0 made every pixel infinite; and fields the loaders never read for that source or
    those options (the digits proxy normalises with its own statistics; tokens are not
    normalised) trained the default's data under another run id, without a word. `validate`
    refuses each, naming the key, exit 2."""
    res = _invoke("validate", write_spec(tmp_path, task=task))
    assert res.exit_code == 2, res.output
    assert needle in res.output, res.output


def test_a_named_eval_set_too_long_for_the_corpus_is_refused_naming_the_set(tmp_path):
    """`train.evals: {long: {L: 1000}}` on a 5,000-byte corpus (task.L 16): validate refused it
    with the corpus's 'too short ... use a smaller task.L', naming neither the set nor its L (the
    run's task.L was fine). The refusal now names `train.evals.long`, exit 2."""
    data = tmp_path / "data"
    (data / "text").mkdir(parents=True)
    (data / "text" / "c.txt").write_text("abcdefgh " * 600)
    task = {"name": "text_corpus", "path": "text/c.txt", "L": 16}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16,
             "evals": {"long": {"L": 1000}}}
    spec = write_spec(tmp_path, task=task, train=train,
                      model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4})
    res = _invoke("validate", spec, env={"SSMREPRO_DATA": str(data)})
    assert res.exit_code == 2, res.output
    assert "train.evals.long: task text_corpus: the corpus" in res.output, res.output


def test_randint_over_a_span_beyond_32_bits_reaches_every_offset():
    """text_corpus draws a window start uniformly in its split with tasks.rng.randint; a span of
    2**31 or more was one 32-bit draw scaled up, so only 2**32 evenly spaced starts were ever
    drawn (span 2**40: every start a multiple of 256; a 24 GB corpus left about 5 of every 6
    byte offsets unreachable). The draw now uses 62 bits: low bits are uniform too."""
    import torch

    from ssmrepro.tasks import rng

    k = rng.key(torch.tensor([0]), 0, torch.arange(20000))
    v = rng.randint(k, 1, 7, 7 + (1 << 40))[..., 0] - 7
    assert int(v.min()) >= 0 and int(v.max()) < 1 << 40
    residues = torch.bincount(v % 256, minlength=256)
    assert int((residues > 0).sum()) == 256, residues[:8]
    assert int(residues.max()) < 3 * 20000 / 256


@pytest.mark.parametrize("evals, key", [({"long": {"L": 16}}, "L differs"),
                                        ({"other": {"theta_seed": 1}}, "theta_seed differs")])
def test_a_linear_functional_eval_set_with_another_theta_is_refused(tmp_path, evals, key):
    """linear_functional draws its fixed θ from (L, theta_seed): `train.evals: {long: {L: 16}}`
    beside L 8 scored the model on a fresh θ (another functional, every weight redrawn) and
    reported it as a longer-sequence error, without a word. `validate` refuses it, exit 2; a set
    that keeps L and theta_seed stays fine."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    model = {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4}
    task = {"name": "linear_functional", "L": 8}
    res = _invoke("validate", write_spec(tmp_path, task=task, model=model,
                                         train={**train, "evals": evals}))
    assert res.exit_code == 2, res.output
    assert f"train.evals.{next(iter(evals))}: {key} from the run's task" in res.output, res.output
    ok = write_spec(tmp_path, task=task, model=model, train={**train, "evals": {"s": {"L": 8}}},
                    **REGRESSION_OUTPUTS)
    assert _invoke("validate", ok).exit_code == 0


def test_a_named_eval_set_whose_test_rows_are_training_rows_is_refused(tmp_path):
    """An evaluation set of the same data split another way: the digits proxy with `split_seed:
    7` drew its 'test' rows by another permutation (about 70% of them rows the run trained on),
    a text corpus with `test_fraction: 0.2` beside 0.05 scored windows of the run's training
    bytes. Both read as held-out accuracy, without a word; `validate` refuses them, exit 2; a set
    that keeps the split (`val_fraction` of the digits: its test rows come first) stays fine."""
    data = tmp_path / "data"
    shutil.copytree(ROOT / "tests" / "assets" / "lra" / "digits", data / "digits")
    (data / "text").mkdir()
    (data / "text" / "c.txt").write_text("abcdefgh " * 600)
    env = {"SSMREPRO_DATA": str(data)}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    digits = {"name": "lra_image", "source": "proxy:digits"}
    pooled = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "head": "mean_pool",
              "blocks": {"SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4}}}}
    for evals, needle in (({"x": {"split_seed": 7}}, "train.evals.x: split_seed differs"),
                          ({"x": {"val_fraction": 0.2}}, None)):
        spec = write_spec(tmp_path, task=digits, model=pooled, sweep=[],
                          train={**train, "train_size": 64, "max_steps": None, "epochs": 1,
                                 "evals": evals})
        res = _invoke("validate", spec, env=env)
        if needle is None:
            assert res.exit_code == 0, res.output
        else:
            assert res.exit_code == 2 and needle in res.output, res.output
    text = {"name": "text_corpus", "path": "text/c.txt", "L": 16}
    res = _invoke("validate", write_spec(tmp_path, task=text, train={
        **train, "evals": {"y": {"test_fraction": 0.2}}},
        model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4}), env=env)
    assert res.exit_code == 2, res.output
    assert "train.evals.y: its test split starts at byte 4,320" in res.output, res.output


def test_a_named_eval_set_with_another_token_vocabulary_is_refused(tmp_path):
    """lra_text trained at `level: byte` (258 ids) with `train.evals: {c: {level: char}}` (39
    ids, within 258): the set fed character ids to a byte-trained embedding (id 1 was <eos> in
    training, <unk> there), a number of nothing, without a word. `validate` refuses it naming
    the first id that differs, exit 2; a set whose vocabulary is a prefix (a larger min_freq)
    stays fine."""
    data = tmp_path / "data"
    shutil.copytree(ROOT / "tests" / "assets" / "lra" / "imdb", data / "imdb")
    env = {"SSMREPRO_DATA": str(data)}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 4, "train_size": 4, "epochs": 1,
             "val_size": 2, "test_size": 2, "eval_every": 2, "eval_batch_size": 4}
    pooled = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "head": "mean_pool",
              "blocks": {"SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4}}}}
    for task, evals, needle in (
            ({"name": "lra_text", "level": "byte"}, {"c": {"level": "char", "min_freq": 1}},
             "train.evals.c: its token ids mean other tokens than the run's task's (id 1 is "
             "'<unk>' there, '<eos>' in training)"),
            ({"name": "lra_text", "level": "char", "min_freq": 1}, {"c": {"min_freq": 3}}, None)):
        spec = write_spec(tmp_path, task=task, model=pooled, sweep=[],
                          train={**train, "evals": evals})
        res = _invoke("validate", spec, env=env)
        if needle is None:
            assert res.exit_code == 0, res.output
        else:
            assert res.exit_code == 2 and needle in res.output, res.output


@pytest.mark.parametrize("task,other,said,longer", [
    ({"name": "mqar_huang", "kappa": 2, "vocab": 8, "T": 12}, {"kappa": 3, "vocab": 7},
     "train.evals.x: kappa 3 differs from the run's task (2)", {"T": 24}),
    ({"name": "selective_copy", "words": 4, "numbers": 4, "number_offset": 1, "L": 12},
     {"words": 5, "numbers": 3}, "train.evals.x: words 5 differs from the run's task (4)",
     {"L": 20}),
])
def test_an_eval_set_that_swaps_the_roles_of_ids_is_refused(tmp_path, task, other, said, longer):
    """mqar_huang's keys are ids 0..kappa-1 and its values the next |V|: `train.evals: {x:
    {kappa: 3, vocab: 7}}` beside kappa 2, vocab 8 kept the outputs (10 classes) and so passed,
    but id 2, a value in training, was a key in the set: another task, scored without a word.
    Likewise selective_copy's W words then N number tokens: 5 + 3 beside 4 + 4 kept the
    vocabulary (11 ids), but id 4, a number token in training, was a word in the set.
    `validate` refuses both, exit 2; a longer sequence stays fine."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    res = _invoke("validate", write_spec(tmp_path, task=task, train={**train,
                                                                     "evals": {"x": other}}))
    assert res.exit_code == 2, res.output
    assert said in res.output, res.output
    ok = write_spec(tmp_path, task=task, train={**train, "evals": {"x": longer}})
    assert _invoke("validate", ok).exit_code == 0


def test_a_bidirectional_model_on_next_byte_prediction_is_refused(tmp_path):
    """text_corpus's target at t is the byte at t + 1; a block with `bidirectional: sum` reads
    it: the run ended 'ok' with next-byte accuracy 0.94 on random text of 9 letters (chance
    0.11), a perplexity of nothing, without a word. `validate` refuses the model, naming the
    block, exit 2; the causal model stays fine."""
    data = tmp_path / "data"
    (data / "text").mkdir(parents=True)
    (data / "text" / "c.txt").write_text("abcdefgh " * 600)
    env = {"SSMREPRO_DATA": str(data)}
    task = {"name": "text_corpus", "path": "text/c.txt", "L": 16}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    for bidir, code in (("sum", 2), ("none", 0)):
        model = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "blocks": {
            "SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4}, "bidirectional": bidir}}}
        res = _invoke("validate", write_spec(tmp_path, task=task, model=model, train=train,
                                             sweep=[]), env=env)
        assert res.exit_code == code, res.output
    assert "which the bidirectional block SSM would read" in _invoke(
        "validate", write_spec(tmp_path, task=task, train=train, sweep=[], model={
            **model, "blocks": {"SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4},
                                        "bidirectional": "concat"}}}), env=env).output


def test_a_named_eval_set_with_an_empty_test_split_is_refused(tmp_path):
    """`train.evals: {big: {resolution: 128, test_fraction: 0.05}}` on 10-image Pathfinder
    folders: the set's test split held 0 rows; `validate` said ok and every pack failed after
    training with 'IndexError: sample index 0 is outside the test split ... use
    train.train_size'. `validate` refuses it naming the set, exit 2."""
    data = tmp_path / "data"
    shutil.copytree(ROOT / "tests" / "assets" / "lra" / "lra", data / "lra")
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 4, "train_size": 8, "epochs": 1,
             "val_size": 2, "test_size": 2, "eval_every": 2, "eval_batch_size": 4,
             "evals": {"big": {"resolution": 128, "test_fraction": 0.05}}}
    pooled = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "head": "mean_pool",
              "blocks": {"SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4}}}}
    spec = write_spec(tmp_path, task={"name": "lra_pathfinder"}, model=pooled, sweep=[],
                      train=train)
    res = _invoke("validate", spec, env={"SSMREPRO_DATA": str(data)})
    assert res.exit_code == 2, res.output
    assert "train.evals.big: its test split is empty" in res.output, res.output


@pytest.mark.parametrize("L", [16, 32])
def test_a_cosine_operator_grid_that_aliases_two_primes_is_refused(tmp_path, L):
    """cosine_operator samples u = sum g_i cos(p_i t) at t = 2πk/L: at L 16, cos(5t) and
    cos(11t) are the same samples (11 ≡ -5 mod 16), so g_5 and g_11 cannot be told apart and no
    model can reach the target g; the runs trained on to an error floor without a word (the
    committed smoke profile of yu2025-fig3 did). `validate` refuses it naming task.L, exit 2."""
    task = {"name": "cosine_operator", "L": L, "n_terms": 10}
    res = _invoke("validate", write_spec(tmp_path, task=task,
                                         model={"name": "ssm_lm", "mixer": "s6", "d_model": 8,
                                                "d_state": 4}))
    assert res.exit_code == 2, res.output
    assert f"L={L} samples cos(" in res.output and "identically" in res.output, res.output
    ok = write_spec(tmp_path, task={**task, "L": 64},
                    model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4},
                    **REGRESSION_OUTPUTS)
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("task, needle", [
    ({"name": "lra_text", "level": "BYTE"}, "task.level: Input should be 'char' or 'byte'"),
    ({"name": "lra_text", "val_split": "foo"}, "task.val_split: Input should be 'test' or 'train'"),
    ({"name": "lra_pathfinder", "difficulty": "../../x"}, "task.difficulty: String should match"),
])
def test_an_lra_choice_field_is_checked_without_the_data(tmp_path, task, needle):
    """`level: BYTE` was refused only once the IMDB data was read: without it `validate` and the
    dry run planned a char-level vocabulary and said ok; `difficulty: ../../x` named a folder
    outside the data root. Both are refused from the config alone, exit 2."""
    res = _invoke("validate", write_spec(tmp_path, task=task),
                  env={"SSMREPRO_DATA": str(tmp_path / "nodata")})
    assert res.exit_code == 2, res.output
    assert needle in res.output, res.output


def test_a_stopped_worker_whose_claim_was_taken_over_writes_nothing(tmp_path):
    """A worker stopped (SIGSTOP, ^Z, a suspended machine) past the claims' ``stale_after`` had
    its claim taken over by a second `run`; on SIGCONT it finished and overwrote the taker's
    record and weights (the run trained twice, two 'done' events), and its release removed
    the taker's live claim. Its records are now dropped (the runs count as finished by another
    process) and the taker's claim stays."""
    from ssmrepro.engine.local import PackResult, store_result
    from ssmrepro.store import Store

    a, b = Store(tmp_path / "s"), Store(tmp_path / "s")
    assert a.claim("r1") and a.claim("r2")
    path = a.claims / "r1.claim"
    old = time.time() - 2 * a.stale_after
    os.utime(path, (old, old))  # a's heartbeat stopped for longer than stale_after
    assert b.claim("r1")  # taken over
    taker = path.read_text()
    a.heartbeat(["r1", "r2"])
    assert path.read_text() == taker and b.holds("r1") and not a.holds("r1")
    lost = store_result(a, PackResult([{"run_id": "r1", "status": "ok"},
                                       {"run_id": "r2", "status": "ok"}], [None, None]))
    assert lost == ["r1"]
    assert not a.record_path("r1").exists() and a.record_path("r2").exists()
    a.release("r1")
    a.release("r2")
    assert path.read_text() == taker and b.holds("r1")  # the taker's claim stands
    assert not (a.claims / "r2.claim").exists()
    assert [e["run_id"] for e in a.events() if e["event"] == "done"] == ["r2"]


def test_a_sweep_whose_every_pack_was_lost_leaves_no_unreadable_table(tmp_path, cli_env):
    """Every worker killed (the OOM killer) before any run had a record: `run` wrote a 1-byte
    results.csv without columns, and its own plot step (and every later `plot`) refused it as
    damaged ('not a readable CSV table ... delete it'), exit 2, instead of exit 1 and
    're-run the same command'. No run with a record: no table."""
    import signal
    import subprocess
    import sys

    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store

    path = write_spec(tmp_path, seeds=[0], train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 3000, "val_size": 16,
        "test_size": 16, "eval_every": 1000, "eval_batch_size": 16})
    spec, out = load_spec(path), tmp_path / "o"
    store = Store(out / spec.paper / spec.id)
    p = subprocess.Popen([sys.executable, "-m", "ssmrepro.cli", "run", str(path), "--out",
                          str(out), "--no-calibrate", "--pack-size", "1", "--workers", "2"],
                         env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = _claiming_pids(store, 2)  # both workers inside their pack
    assert len(pids) == 2 and p.pid not in pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    stdout, stderr = p.communicate(timeout=120)
    said = stdout + stderr
    assert p.returncode == 1 and "re-run the same command" in said, said
    assert "not a readable CSV" not in said and "Traceback" not in said, said
    assert not (store.root / "results.csv").exists()
    res = _invoke("plot", path, "--out", out)
    assert res.exit_code == 0 and "0 of 2 runs finished" in res.output, res.output


def test_a_claim_whose_pid_went_to_a_later_process_is_stale(tmp_path):
    """A claim of this host naming a pid that is alive but started after the claim was written
    (the claimant died and its pid was reused, as after a container restart) held the run for
    10 minutes ('waiting for 1 runs claimed by another process (pid 1 on ...)'). The process
    that wrote a claim started before it."""
    import json
    import subprocess
    import sys

    from ssmrepro.store import Store

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        s = Store(tmp_path / "s")
        s.claims.mkdir(parents=True)
        c = s.claims / "r1.claim"
        time.sleep(1.0)
        for ago, held in ((300.0, False), (0.0, True)):  # before it started; after
            when = time.time() - ago
            c.write_text(json.dumps({"host": s.host, "pid": child.pid, "time": when,
                                     "nonce": f"n{when}"}))
            assert s.claim("r1") is not held, when
            if not held:
                s.release("r1")
    finally:
        child.kill()
        child.wait()


def test_a_sigkilled_sweep_with_workers_resumes_each_run_once(tmp_path, cli_env):
    """`kill -9` of `run --workers 2` (save_weights) mid-pack: its workers die with it, their
    claims are taken over by the next `run`, which trains each unfinished run exactly once
    (one 'done' event each) and leaves no claim or temp file behind, exit 0."""
    import signal
    import subprocess
    import sys

    from ssmrepro.spec import load_spec
    from ssmrepro.store import TABLES_WRITTEN, Store
    from ssmrepro.sweep import expand
    from ssmrepro.util import pid_alive

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 400,
             "val_size": 16, "test_size": 16, "eval_every": 1000, "eval_batch_size": 16}
    path = write_spec(tmp_path, seeds=[0], save_weights=True, train=train)
    spec, out = load_spec(path), tmp_path / "o"
    store = Store(out / spec.paper / spec.id)
    cmd = [sys.executable, "-m", "ssmrepro.cli", "run", str(path), "--out", str(out),
           "--no-plot", "--no-calibrate", "--pack-size", "1", "--workers", "2"]
    p = subprocess.Popen(cmd, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pids = _claiming_pids(store, 2)
    assert len(pids) == 2
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    deadline = time.time() + 20
    while any(pid_alive(w) for w in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(w) for w in pids)  # no orphan trains on
    res = subprocess.run(cmd, env=cli_env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    store = Store(out / spec.paper / spec.id, weights=True)
    runs = [r.run_id for r in expand(spec, "quick")]
    done = [e["run_id"] for e in store.events() if e["event"] == "done"]
    assert sorted(done) == sorted(runs) and all(store.is_done(r) for r in runs)
    assert not list(store.claims.iterdir())
    # no temp file (the ledger of the rows the results tables were written with stays)
    assert not [f for f in store.root.rglob(".*") if f.name != TABLES_WRITTEN]


def test_ray_cpus_per_pack_beyond_every_node_is_refused(monkeypatch):
    """`run --engine ray --cpus-per-pack 64` on a cluster of 2-CPU nodes planned '1 pack slots'
    and then waited for ever: Ray never schedules a task no node can hold."""
    from ssmrepro.engine import ray_engine

    class FakeRay:
        @staticmethod
        def cluster_resources():
            return {"CPU": 4.0}

        @staticmethod
        def nodes():
            return [{"Alive": True, "Resources": {"CPU": 2.0}},
                    {"Alive": True, "Resources": {"CPU": 2.0}},
                    {"Alive": False, "Resources": {"CPU": 64.0}}]

    monkeypatch.setattr(ray_engine, "_ray", lambda: FakeRay)
    assert ray_engine.slots("cpu", 2) == 2
    with pytest.raises(ray_engine.RayUnavailable, match="--cpus-per-pack 3: .*largest has 2"):
        ray_engine.slots("cpu", 3)


def test_ray_init_does_not_take_over_sigterm(tmp_path):
    """`ray.init` replaces the SIGTERM handler (``sys.exit(15)``; its C core a stack-dumping
    one): `kill PID` of a `run --engine ray` ended with exit 1 and no line (or a dump, exit
    134) instead of as an interrupted sweep (exit 130). A fake Ray's init does both here."""
    import subprocess
    import sys

    script = (
        "import ctypes, os, signal, time\n"
        "from ssmrepro.engine import ray_engine\n"
        "got = []\n"
        "signal.signal(signal.SIGTERM, lambda *a: got.append(1))\n"
        "class FakeRay:\n"
        "    @staticmethod\n"
        "    def is_initialized(): return False\n"
        "    @staticmethod\n"
        "    def init(**kw):\n"
        "        signal.signal(signal.SIGTERM, lambda s, f: os._exit(1))  # as ray.init does\n"
        "        ctypes.CDLL(None).signal(signal.SIGTERM, 0)  # its C core: SIG_DFL here\n"
        "ray_engine._ray = lambda: FakeRay\n"
        "ray_engine.connect(None)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(0.2)\n"
        "print('handled' if got else 'not handled')\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "handled", (res.returncode, res.stderr)


def test_a_weights_figure_drawn_without_one_of_its_selections_says_so(tmp_path):
    """koren2026-fig2's smoke profile has no trained cell of d_model 64: its figure drew the
    untrained row alone under the title 'trained (top) vs untrained control (bottom)', without
    a word. A selection that matches no cell of the profile is now named in a warning."""
    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"],
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
                         profiles={"smoke": {}, "quick": {"set": {"model.d_state": 2}},
                                   "paper": {}},
                         figures=[{"kind": "output_distribution", "name": "fig-out",
                                   "where": [{"label": "S6", "model.d_state": 2},
                                             {"label": "S6"}]}])
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert ("fig-out-smoke.png drawn without 1 of its 2 selections: profile smoke has no cell "
            "of {label: S6, model.d_state: 2}") in said, res.output
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "quick", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0 and "selections" not in res.output, res.output


# round 25 F: model keys that the model built never reads, and init ranges given upside down

_MAMBA1 = {"name": "mamba1", "d_state": 4}


@pytest.mark.parametrize("model,needle", [
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {**_MAMBA1, "blocks": 4}}}}, "blocks 4 is not read by core 's6'"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {**_MAMBA1, "conv": False, "d_conv": 2}}}},
     "d_conv 2 is not read with conv false"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {**_MAMBA1, "core": "s4d", "dt_min": 0.01}}}},
     "dt_min 0.01 is not read by core 's4d'"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {"name": "s6", "d_state": 4, "discretize": False,
                                   "A_init": "s4d_lin"}}}},
     "A_init 's4d_lin' is not read with discretize false"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {"name": "s4d", "d_state": 4, "discretize": False,
                                   "A_scale": 0.5}}}},
     "A_scale 0.5 is not read with discretize false"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {"name": "neox_attn", "conv_on": "input"}}}},
     "conv_on 'input' is not read with conv 0"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {"name": "s6", "d_state": 4}, "mlp_act": "relu"}}},
     "mlp_act 'relu' is not read without an MLP"),
    ({"name": "seq_lm", "d_model": 8, "layers": "TF",
      "blocks": {"TF": {"kind": "neox", "expand": 0, "parallel": False}}},
     "parallel False is not read with expand 0"),
    ({"name": "seq_lm", "d_model": 8, "head_hidden": 5}, "head_hidden 5 is not read by head"),
    ({"name": "seq_lm", "d_model": 8, "init": {"std": 0.5}},
     "std 0.5 is not read by scheme 'default'"),
    ({"name": "ssm_lm", "mixer": "s4d", "d_model": 8, "d_state": 4, "dt_rank": 2},
     "dt_rank 2 is not read by mixer 's4d'"),
    ({"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "s4d_A_scale": 0.5},
     "s4d_A_scale 0.5 is not read by mixer 's6'"),
    ({"name": "transformer_lm", "d_model": 8, "mlp_hidden": 8, "mlp_ratio": 2},
     "mlp_ratio 2 is not read with mlp_hidden 8"),
    ({"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "dt_min": 0.5, "dt_max": 0.01},
     "dt_min 0.5 is above dt_max 0.01"),
    ({"name": "seq_lm", "d_model": 8, "layers": "SSM",
      "blocks": {"SSM": {"mixer": {"name": "b2s6", "d_state": 4, "heads": 2, "dt_max": 1e-4}}}},
     "dt_min 0.001 is above dt_max 0.0001"),
])
def test_model_keys_the_built_model_never_reads_are_refused(tmp_path, model, needle):
    """A model key that the model built never reads (mamba1's b2s6 ``blocks`` with core s6, an
    init ``std`` with scheme default, ssm_lm's Δ range with mixer s4d, ...) trained exactly the
    default's model under another run id and a label that said otherwise; a Δ range given upside
    down drew from [dt_max, dt_min] without a word. Both are refused by validate, naming the key."""
    spec = write_spec(tmp_path, model=model, sweep=[{"cases": [{"label": "A", "set": {}}]}],
                      seeds=[0])
    _assert_refused(_invoke("validate", spec), needle)


@pytest.mark.parametrize("model", [
    {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "dt_min": 1e-6, "dt_max": 1e-5},
    {"name": "seq_lm", "d_model": 8, "layers": "SSM",
     "blocks": {"SSM": {"mixer": {"name": "mamba1", "d_state": 4, "core": "delta_t",
                                  "dt_min": 1e-6, "dt_max": 1e-5}}}},
])
def test_a_delta_range_below_the_init_floor_is_refused(tmp_path, model):
    """softplus(b_Δ) is drawn in [dt_min, dt_max] and clamped at 1e-4 (mamba-ssm's
    dt_init_floor): a range wholly below it made every initial Δ 1e-4, so dt_max 1e-5 and 1e-6
    trained one model under two run ids. validate refuses it, naming dt_max and the floor."""
    import torch

    from ssmrepro.models import MODELS
    from ssmrepro.models.mixers.common import DT_INIT_FLOOR, dt_bias_init

    g = torch.Generator().manual_seed(0)
    assert float(torch.nn.functional.softplus(dt_bias_init(4, 1e-6, 1e-5, DT_INIT_FLOOR, g)).max()) \
        == pytest.approx(DT_INIT_FLOOR)  # what such a range drew: the floor everywhere
    spec = write_spec(tmp_path, model=model, sweep=[{"cases": [{"label": "A", "set": {}}]}],
                      seeds=[0])
    _assert_refused(_invoke("validate", spec), "dt_max 1e-05 is below the Δ init floor 0.0001")
    ok = {**model, "dt_max": 1e-4} if model["name"] == "ssm_lm" else None
    if ok:  # a range reaching the floor is the floor's constant Δ, as mamba-ssm's
        MODELS["ssm_lm"].Config.model_validate(ok)


def test_a_stopped_members_batchnorm_statistics_stay_frozen_in_its_pack(tmp_path):
    """A BatchNorm model packed with `max_steps: [3, 12]`: the forward of the pack's later steps
    kept updating the stopped member's running statistics, so its val/test metrics (eval mode
    reads them) depended on its pack-mates and differed from the member trained alone
    (`--pack-size 1`). Its statistics now stay those of its stop step (float64: equal)."""
    import math

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import train_pack

    model = {"name": "seq_lm", "d_model": 8, "layers": "S",
             "blocks": {"S": {"mixer": {"name": "s4d", "d_state": 4}, "norm": "batchnorm"}}}
    runs = expand(load_spec(write_spec(
        tmp_path, model=model, seeds=[0], sweep=[{"zip": {"train.max_steps": [3, 12]}}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 12,
               "val_size": 16, "test_size": 16, "eval_every": 3, "dtype": "float64"})), "paper")
    packed = train_pack(runs)[0]
    alone = train_pack(runs[:1])[0]
    for key, v in alone["metrics"].items():
        assert math.isclose(v, packed["metrics"][key], rel_tol=1e-9, abs_tol=1e-12), key


def test_a_training_time_analysis_reads_the_model_in_eval_mode(tmp_path):
    """`analysis: [decay_histogram]` on a BatchNorm model ran its probe in train mode: the
    histogram used the probe batch's statistics (not what the trained model computes, nor what
    the same probe gives on the saved weights) and overwrote the running statistics that the
    run's saved weights then held. The probe now runs in eval mode and leaves the state as is."""
    import torch

    from ssmrepro.analysis import decay_histogram
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.tasks import build_task
    from ssmrepro.train import _DATA_STREAM, derived_seed, train_pack

    model = {"name": "seq_lm", "d_model": 8, "layers": "S",
             "blocks": {"S": {"mixer": {"name": "s6", "d_state": 4}, "norm": "batchnorm"}}}
    runs = expand(load_spec(write_spec(
        tmp_path, model=model, seeds=[0], sweep=[],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
               "val_size": 16, "test_size": 16, "eval_every": 2, "dtype": "float64"})), "paper")
    probed, plain = {}, {}
    res = train_pack(runs, analyses=("decay_histogram",), keep=probed)[0]
    train_pack(runs, keep=plain)
    for (name, a), b in zip(probed["model"].state_dict().items(),
                            plain["model"].state_dict().values()):
        assert torch.equal(a, b), name
    seeds = torch.tensor([derived_seed(runs[0].seed, _DATA_STREAM)])
    want = decay_histogram(plain["model"].eval(), build_task(runs[0].task), seeds)[0]
    assert res["analysis"]["decay_histogram"] == want


def test_a_member_without_targets_fails_alone_not_its_pack(tmp_path):
    """Selective copy with `p: 0.07`, `L: 10` and one-sample sets: some seeds' own samples hold
    no number token (NoTargets), others' do. The whole pack failed, so seed 3, which trains
    alone (`--pack-size 1`), failed for its pack-mates' data. Now the members without targets
    fail with the message, the others train as they would alone."""
    from ssmrepro.engine.local import WorkSettings, train_records
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    runs = expand(load_spec(write_spec(
        tmp_path, task={"name": "selective_copy", "L": 10, "p": 0.07}, seeds=[0, 1, 2, 3],
        model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4}, sweep=[],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 1,
               "test_size": 1, "eval_every": 1, "eval_batch_size": 1})), "paper")
    ws = WorkSettings("cpu", "torch")
    packed = train_records(runs, ws)
    alone = [train_records([r], ws).records[0] for r in runs]
    assert [r["status"] for r in alone] == ["error", "error", "error", "ok"]
    assert [r["status"] for r in packed.records] == [r["status"] for r in alone]
    assert not packed.failed and packed.failed_ids() == [r.run_id for r in runs[:3]]
    assert "seed 0: ssmrepro.train.NoTargets: the training set" in packed.message
    assert "seed 1: ssmrepro.train.NoTargets: the validation set" in packed.message
    assert packed.records[3]["metrics"] == alone[3]["metrics"]


@pytest.mark.parametrize("train, needle", [
    ({"label_smoothing": 0.1}, "label_smoothing applies to classification only"),
    ({"early_stop": {"metric": "val.acc", "op": ">", "threshold": 0.5}}, "early-stop on val.loss"),
])
def test_a_regression_task_refuses_smoothing_and_accuracy_at_validate(tmp_path, train, needle):
    """`label_smoothing: [0, 0.1]` swept on cosine_operator (a regression task): `validate` said
    ok and the run failed its whole pack, the member without smoothing included (alone, with
    `--pack-size 1`, that one trained). Early stop on val.acc likewise passed `validate`. Both
    are refused by `validate` naming the task, exit 2."""
    base = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
            "test_size": 8, "eval_every": 1, "eval_batch_size": 8}
    spec = write_spec(tmp_path, task={"name": "cosine_operator", "L": 64, "n_terms": 10},
                      model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4},
                      train={**base, **train}, seeds=[0], sweep=[])
    res = _invoke("validate", spec)
    assert res.exit_code == 2, res.output
    assert "cosine_operator is a regression task" in res.output and needle in res.output
    assert _invoke("validate", write_spec(
        tmp_path, name="t-ok", task={"name": "cosine_operator", "L": 64, "n_terms": 10},
        model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4}, train=base,
        seeds=[0], sweep=[], **REGRESSION_OUTPUTS)).exit_code == 0


def test_a_member_whose_init_does_not_fit_fails_alone_not_its_pack(tmp_path):
    """`model.init.scheme: [default, designed, cooper_construction]` swept on an S6 model: the
    two constructions do not fit it, and the whole pack failed with the first one's message,
    the default-init run included (it trains alone, `--pack-size 1`). Now each of the two fails
    with its own message and the default one trains as it would alone."""
    from ssmrepro.engine.local import WorkSettings, train_records
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    runs = expand(load_spec(write_spec(
        tmp_path, seeds=[0],
        model={"name": "seq_lm", "d_model": 8, "layers": ["S"],
               "blocks": {"S": {"mixer": {"name": "s6", "d_state": 4}}}},
        sweep=[{"grid": {"model.init.scheme": ["default", "designed", "cooper_construction"]}}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
               "test_size": 8, "eval_every": 1, "eval_batch_size": 8})), "paper")
    ws = WorkSettings("cpu", "torch")
    packed = train_records(runs, ws)
    alone = [train_records([r], ws).records[0] for r in runs]
    assert [r["status"] for r in packed.records] == [r["status"] for r in alone] == [
        "ok", "error", "error"]
    for p, a in zip(packed.records[1:], alone[1:]):
        assert p["error"] == a["error"]
    assert "init 'designed' needs" in packed.records[1]["error"]
    assert "init 'cooper_construction' (selective_copy) needs" in packed.records[2]["error"]
    assert packed.records[0]["metrics"] == alone[0]["metrics"]
    assert packed.failed_ids() == [r.run_id for r in runs[1:]]
    both = train_records(runs[1:], ws)  # the re-run: a pack of the two that fail
    assert both.failed and [r["error"] for r in both.records] == [a["error"] for a in alone[1:]]


@pytest.mark.parametrize("scheme, needle", [
    ("designed", "init 'designed' needs a token-embedding model with exactly one linear_mamba"),
    ("cooper_construction", "init 'cooper_construction' (selective_copy) needs a cooper_hybrid"),
])
def test_validate_refuses_an_init_scheme_its_model_does_not_fit(tmp_path, scheme, needle):
    """`model.init.scheme: designed` (or `cooper_construction`) on an S6 model: `validate` said ok
    and every pack holding such a run failed when it built its model (with a `default` run
    swept beside it, that one too). `validate` refuses it, naming the scheme's requirement,
    exit 2 (checked on the meta device once per shape and scheme)."""
    model = {"name": "seq_lm", "d_model": 8, "layers": ["S"],
             "blocks": {"S": {"mixer": {"name": "s6", "d_state": 4}}}}
    res = _invoke("validate", write_spec(
        tmp_path, seeds=[0], model=model,
        sweep=[{"grid": {"model.init.scheme": ["default", scheme]}}]))
    assert res.exit_code == 2, res.output
    assert "model.init: run cannot be initialised: " + needle in " ".join(res.output.split())


def test_a_length_curve_shows_the_gap_of_a_diverged_cell_among_its_hue(tmp_path, monkeypatch):
    """length_curves averages the cells of a hue; the mean skipped NaN, so a diverged cell
    (one of two learning rates) left the other cell's values standing for the hue with no
    sign of it, and the legend named the first cell's parameter count for cells of two."""
    import math
    from types import SimpleNamespace

    import pandas as pd
    from test_checks import Run

    from ssmrepro.plots import FigureContext, bands, parse_figure
    from ssmrepro.report import aggregate, cell_keys

    runs = [Run(a, {"train.lr": lr, "model.d_model": d}, s) for a, d in (("S6", 8), ("S4D", 4))
            for lr in (0.01, 0.02) for s in (0, 1)]
    rows = []
    for i, r in enumerate(runs):
        bad = r.label == "S6" and r.coords["train.lr"] == 0.02 and r.seed == 0
        rows.append({"run_id": f"r{i}", "label": r.label, "seed": r.seed,
                     "status": "diverged" if bad else "ok",
                     "n_params": 100 * r.coords["model.d_model"] + (r.coords["train.lr"] == 0.02),
                     "L8.acc": math.nan if bad else 0.9, "L16.acc": math.nan if bad else 0.5,
                     **r.flat()})
    cells = aggregate(pd.DataFrame(rows), runs, "mean", ["L8.acc", "L16.acc"], [0, 100])
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, cell_keys(runs),
                        lambda stem, ext: tmp_path / f"{stem}.{ext}")
    drawn = {}
    monkeypatch.setattr(bands, "save_png", lambda fig, path, dpi: drawn.update(
        {ln.get_label(): list(ln.get_ydata()) for ln in fig.axes[0].get_lines()}))
    cfg = parse_figure({"kind": "length_curves", "lengths": [8, 16]})
    assert bands.length_curves(ctx, cfg, tmp_path / "f.png")
    s6 = next(k for k in drawn if k.startswith("S6"))
    assert all(math.isnan(v) for v in drawn[s6]), drawn  # 0.9 / 0.5 of the lr 0.01 cell before
    assert "1 diverged" in s6 and "mean of 2 cells" in s6 and "800–801 params" in s6, s6
    s4d = next(k for k in drawn if k.startswith("S4D"))
    assert drawn[s4d] == [0.9, 0.5] and "diverged" not in s4d, s4d


def test_a_report_prints_small_learning_rates_and_values_as_they_are():
    """report.md printed every float with 3 decimals: the learning rates 0.0001 and 0.000316 of
    two cells both read 0.000 (0.00316 read 0.003), and an MSE of 1.7e-09 or a paper value of
    0.0002 read 0.000, as a cell that is exactly 0."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import Verdict, markdown

    cells = pd.DataFrame({"label": ["S6", "S6", "S6"], "train.lr": [0.0001, 0.000316, 0.00316],
                          "n_expected": 1, "n_ok": 1, "n_diverged": 0, "complete": True,
                          "test.mse": [1.7e-09, 0.0, 0.25]})
    spec = SimpleNamespace(id="t", alias=None, title="t", claim="c", notes=[], analytic=None,
                           aggregate=SimpleNamespace(reduce="mean"))
    pv = Verdict("paper_value", "label=S6: test.mse (tol 0.0001)", "match", ours=0.00025,
                 paper=0.0002)
    text = markdown(spec, "smoke", cells, [pv], 3)
    rows = [line for line in text.splitlines() if line.startswith("| S6 |")]
    assert [r.split(" | ")[1] for r in rows] == ["0.0001", "0.000316", "0.00316"], rows
    assert [r.split(" | ")[5] for r in rows] == ["1.7e-09 |", "0.000 |", "0.250 |"], rows
    assert "| 0.0002 | 0.00025 | match |" in text, text


def test_a_figure_says_how_many_seeds_its_values_hold_when_one_is_not_trained(tmp_path):
    """The figures' 'mean of 3 seeds' counted the seeds each cell expects: a cell whose third
    seed was not trained (a row deleted, an interrupted run) was drawn as the mean of 2 under
    the label 'mean of 3 seeds'."""
    from types import SimpleNamespace

    import pandas as pd
    from test_checks import Run

    from ssmrepro.plots import FigureContext
    from ssmrepro.report import aggregate, cell_keys

    runs = [Run(a, {}, s) for a in ("S6", "S4D") for s in (0, 1, 2)]
    rows = [{"run_id": f"r{i}", "label": r.label, "seed": r.seed, "status": "ok",
             "test.acc": 0.5} for i, r in enumerate(runs) if (r.label, r.seed) != ("S4D", 2)]
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))

    def ctx(df):
        cells = aggregate(df, runs, "mean", ["test.acc"])
        return FigureContext(spec, "smoke", cells, cell_keys(runs),
                             lambda stem, ext: tmp_path / f"{stem}.{ext}")

    assert ctx(pd.DataFrame(rows)).aggregation() == "mean of 2–3 seeds"
    rows.append({"run_id": "r9", "label": "S4D", "seed": 2, "status": "ok", "test.acc": 0.5})
    assert ctx(pd.DataFrame(rows)).aggregation() == "mean of 3 seeds"


def test_a_second_row_of_a_run_under_another_id_is_not_counted_or_exported(tmp_path):
    """A committed results table holding a run's row twice, under its id and under another (a
    copy, an older training) with another value: the report took whichever came first as the
    cell's seed and counted it once, while `export` exported both rows ('2 runs' of a one-seed
    cell), with no word."""
    import pandas as pd

    from ssmrepro.plots.outputs import consistent_rows
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    spec, out = two_profile_spec(tmp_path), tmp_path / "out"
    assert _invoke("run", spec, "--profile", "smoke", "--out", out, "--workers", "1",
                   "--no-calibrate").exit_code == 0
    folder = out / "tests" / "t-spec"
    shutil.rmtree(folder / "runs")  # records are not in git
    t = pd.read_csv(folder / "results-smoke.csv", dtype={"run_id": str})
    s6 = t[t["label"] == "S6"]
    copy = s6.assign(run_id="c0ffee000000", **{"metric.test.acc": 0.999})
    pd.concat([copy, t]).to_csv(folder / "results-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "smoke", "--out", out)
    assert res.exit_code == 0, res.output
    assert "under its id and under c0ffee000000; the row of c0ffee000000 is not used" in res.output
    cells = pd.read_csv(folder / "summary-smoke.csv").set_index("label")
    assert cells.loc["S6", "test.acc"] == s6["metric.test.acc"].iloc[0]
    kept = consistent_rows(pd.read_csv(folder / "results-smoke.csv", dtype={"run_id": str}),
                           expand(load_spec(spec), "smoke"), own=True)  # what export reads
    assert sorted(kept["run_id"]) == sorted(t["run_id"])


def test_a_paper_value_of_a_metric_not_measured_is_not_called_diverged():
    """A paper value on a metric the finished runs have no value of, although none diverged (a
    column missing from a committed table), read 'diverged' in the report's paper-value table,
    and `verify --json` gave no reason beside 'ours: null'."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import markdown, verify
    from ssmrepro.spec import PaperValue

    cells = pd.DataFrame({"label": ["S6", "S4D"], "n_expected": 2, "n_ok": [2, 1],
                          "n_diverged": [0, 1], "complete": True,
                          "val.acc": [math.nan, math.nan]})
    spec = SimpleNamespace(id="t", alias=None, title="t", claim="c", notes=[], analytic=None,
                           claims=[], aggregate=SimpleNamespace(reduce="mean"),
                           paper_values=[PaperValue(where={"label": "S6"}, metric="val.acc",
                                                    value=0.2),
                                         PaperValue(where={"label": "S4D"}, metric="val.acc",
                                                    value=0.2)])
    vs = verify(spec, cells, ["label"])
    assert [(v.verdict, v.detail) for v in vs if v.kind == "paper_value"] == [
        ("differs", "not measured"), ("differs", "diverged")]
    text = markdown(spec, "smoke", cells, vs, 4)
    assert "| label=S6: val.acc (tol 0.05) | 0.200 | not measured | differs |" in text, text
    assert "| label=S4D: val.acc (tol 0.05) | 0.200 | diverged | differs |" in text, text


def test_a_learning_curve_figure_says_how_many_seeds_each_curve_holds(tmp_path, monkeypatch):
    """The curves kind's title counted the distinct seeds of the whole history table: a curve
    of 2 seeds (its third not trained) beside curves of 3 was drawn under 'mean of 3 seeds'."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import curves as kind

    hist = pd.DataFrame([{"run_id": f"{a}{s}", "label": a, "seed": s, "step": t,
                          "val.acc": 0.1 * t} for a, n in (("S6", 3), ("S4D", 2))
                         for s in range(n) for t in (1, 2)])
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", pd.DataFrame(), ["label"],
                        lambda stem, ext: tmp_path / f"{stem}.{ext}",
                        tables={kind.CURVES: hist})
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.append(
        fig._suptitle.get_text().replace("\n", " ")))
    cfg = parse_figure({"kind": "curves", "series": "val.acc", "hue": "label"})
    assert kind.curves(ctx, cfg, tmp_path / "f.png")
    assert "mean of 2–3 seeds" in seen[0], seen
    ctx.tables[kind.CURVES] = hist[hist["label"] == "S6"]
    assert kind.curves(ctx, cfg, tmp_path / "g.png")
    assert "mean of 3 seeds" in seen[-1], seen


def test_a_bar_without_a_value_says_diverged_only_where_a_run_diverged(tmp_path, monkeypatch):
    """The bars kind wrote 'diverged' under every bar without a value, also where no run
    diverged (the metric was not measured: a column missing from a committed table)."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind

    cells = pd.DataFrame({"label": ["S6", "S4D", "T"], "n_expected": 1, "n_ok": [1, 0, 1],
                          "n_diverged": [0, 1, 0], "complete": True,
                          "test.acc": [math.nan, math.nan, 0.5]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label"], lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.extend(
        t.get_text() for t in fig.axes[0].texts))
    assert kind.bars(ctx, parse_figure({"kind": "bars"}), tmp_path / "f.png")
    assert seen == ["not measured", "diverged", "0.50"], seen


def test_a_reference_line_is_not_the_mean_of_the_cells_that_did_not_diverge(tmp_path,
                                                                           monkeypatch):
    """A `bands` reference hue is drawn at the mean of its cells; the mean skipped NaN, so a
    diverged cell (one of two widths) left the other's value as the reference, with no sign."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, bands, parse_figure

    cells = pd.DataFrame({"label": ["A", "A", "R", "R"], "model.d_model": [4, 8, 4, 8],
                          "n_expected": 1, "n_ok": [1, 1, 1, 0], "n_diverged": [0, 0, 0, 1],
                          "complete": True, "n_params": [10, 20, 11, 21],
                          "test.acc": [0.5, 0.6, 0.9, math.nan]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.d_model"],
                        lambda stem, ext: tmp_path / ext)
    seen = {}
    monkeypatch.setattr(bands, "save_png", lambda fig, path, dpi: seen.update(
        {ln.get_label(): list(ln.get_ydata()) for ln in fig.axes[0].get_lines()}))
    cfg = parse_figure({"kind": "bands", "reference": ["R"], "lo": None, "hi": None})
    assert bands.bands(ctx, cfg, tmp_path / "f.png")
    ref = next(k for k in seen if k.startswith("R"))
    assert "1 of 2 cells without a value" in ref, seen
    assert all(math.isnan(v) for v in seen[ref]), seen  # 0.9, the other cell's, before


def test_a_phase_figure_counts_a_value_on_its_tolerance_bound_as_the_report_does(tmp_path,
                                                                                 monkeypatch):
    """The phase kind compared |ours - paper| <= tol in floats: 0.85 against the paper's 0.9 ±
    0.05 (|diff| 0.05000000000000004) was framed red and not counted 'within tolerance', while
    the report (``within``, rounding-aware) called the same paper value a match."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import phase as kind
    from ssmrepro.report import verify
    from ssmrepro.spec import PaperValue

    cells = pd.DataFrame({"label": ["A"], "task.g": [0.5], "model.n_layers": [2],
                          "n_expected": 1, "n_ok": 1, "n_diverged": 0, "complete": True,
                          "test.acc": [0.85]})
    pv = PaperValue(where={"task.g": 0.5, "model.n_layers": 2}, metric="test.acc", value=0.9,
                    tol=0.05)
    spec = SimpleNamespace(id="t", title="t", paper_values=[pv], claims=[], claim="c",
                           aggregate=SimpleNamespace(reduce="mean"))
    assert [v.verdict for v in verify(spec, cells, ["label"]) if v.kind == "paper_value"] == \
        ["match"]
    ctx = FigureContext(spec, "smoke", cells, ["label", "task.g", "model.n_layers"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.extend(
        ax.get_title() for ax in fig.axes))
    cfg = parse_figure({"kind": "phase", "x": "task.g", "y": "model.n_layers",
                        "panels": [{"metric": "test.acc"}]})
    assert kind.phase(ctx, cfg, tmp_path / "f.png")
    assert any("1 of 1 within tolerance" in t for t in seen), seen


def test_seeds_of_one_cell_that_disagree_on_its_parameter_count_leave_it_unknown(tmp_path):
    """The seeds of a cell share its config, so its parameter count; a committed table whose
    rows of one cell disagree (a hand-edited n_params) gave the cell the first row's count in
    the report, the figures and a paper value on n_params, with no word."""
    import pandas as pd

    spec = write_spec(tmp_path, train={"optimizer": "adam", "lr": 0.01, "batch_size": 8,
                                       "max_steps": 2, "val_size": 16, "test_size": 16,
                                       "eval_every": 2, "eval_batch_size": 16})
    out = tmp_path / "out"
    assert _invoke("run", spec, "--profile", "smoke", "--out", out, "--workers", "1",
                   "--no-calibrate").exit_code == 0
    folder = out / "tests" / "t-spec"
    shutil.rmtree(folder / "runs")  # records are not in git
    t = pd.read_csv(folder / "results-smoke.csv", dtype={"run_id": str})
    s6 = t.index[t["label"] == "S6"][0]
    real = int(t.loc[s6, "n_params"])
    t.loc[s6, "n_params"] = 12345
    t.to_csv(folder / "results-smoke.csv", index=False)
    res = _invoke("plot", spec, "--profile", "smoke", "--out", out)
    assert res.exit_code == 0, res.output
    assert f"2 parameter counts ({', '.join(map(str, sorted([real, 12345])))}) to the seeds " \
        "of the cell S6" in res.output, res.output
    cells = pd.read_csv(folder / "summary-smoke.csv").set_index("label")
    assert pd.isna(cells.loc["S6", "n_params"]) and not pd.isna(cells.loc["S4D", "n_params"])


# ---------------------------------------------------------------------------------------------
# round 25 G: the machine-readable contract (--json, exit codes, stdout vs stderr)


def test_json_names_no_results_table_that_was_not_written(tmp_path, monkeypatch):
    """`verify --json` of a profile with no run record, and `run --json` interrupted before any
    record, gave `"csv": "<out>/.../results-smoke.csv"`, a file never written (the console said
    `table: - (no run has a record)`): null now."""
    import ssmrepro.engine as engine
    from ssmrepro.engine import RunSummary

    spec, out = _one_run_spec(tmp_path), tmp_path / "out"
    res = runner.invoke(app, ["verify", str(spec), "--out", str(out), "--profile", "smoke",
                              "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["csv"] is None and doc["runs"] == {"expected": 1, "finished": 0}, doc
    assert not list(out.rglob("results*.csv"))
    absent = out / "tests" / "t-spec" / "results-smoke.csv"
    monkeypatch.setattr(engine, "run_experiment", lambda *a, **kw: RunSummary(
        1, 0, 0, 0, 0, 1, 1, 0.5, absent, interrupted=True))
    res = runner.invoke(app, ["run", str(spec), "--out", str(out), "--profile", "smoke",
                              "--json", "--no-calibrate"])
    assert res.exit_code == 130, res.output
    doc = json.loads(res.stdout)
    assert doc["interrupted"] is True and doc["csv"] is None, doc


def test_warnings_of_dry_run_and_figures_go_to_stderr(tmp_path):
    """`run --dry-run` printed a record's quarantine warning, and `figures` its 'report ... not
    rebuilt' / 'of no profile' warnings, on stdout among the lines a script reads (every other
    command's warnings are on stderr)."""
    spec, out = _one_run_spec(tmp_path), tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--no-plot")
    assert res.exit_code == 0, res.output
    (record,) = (out / "tests" / "t-spec" / "runs").glob("*.json")
    record.write_text('{"broken')
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--dry-run", "--no-estimate")
    assert res.exit_code == 0, res.output
    assert "quarantined" in res.stderr and "warning:" not in res.stdout, res.stdout
    assert "1 runs, 0 done, 1 pending" in res.stdout, res.stdout

    root = tmp_path / "proj"
    (root / "experiments" / "tests").mkdir(parents=True)
    (root / "ssmrepro").mkdir()
    (root / "experiments" / "catalogue.yaml").write_text(
        "papers: {tests: Tests}\ntargets:\n  - {id: t-spec, paper: tests, tier: 1, what: tiny}\n")
    shutil.copy(spec, root / "experiments" / "tests")
    results = tmp_path / "R"
    (results / "tests" / "t-spec").mkdir(parents=True)
    (results / "tests" / "t-spec" / "report-gone.md").write_text("# a renamed profile's\n")
    res = _invoke("figures", "--out", results, env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    assert "report-gone.md is of no profile" in res.stderr, res.output
    assert "warning:" not in res.stdout and "front page:" in res.stdout, res.stdout


@pytest.mark.parametrize("args", [["list", "--json"], ["list"]])
def test_a_reader_that_closes_the_output_ends_the_command_with_141(cli_env, args):
    """`ssmrepro list --json | true` (a reader that stops reading: `| head -1`, a script that
    reads a line) printed `error: cannot use: Broken pipe`, exit 2 ("bad input"); the tables
    (rich) exited 1, "some runs failed", a `verify --strict` of all-PASS read as a failure.
    Now: no word, exit 141 (128 + SIGPIPE, as a shell reports a tool its closed pipe ended)."""
    import subprocess
    import sys

    r, w = os.pipe()
    os.close(r)  # the reader is gone before the command writes
    try:
        p = subprocess.run([sys.executable, "-m", "ssmrepro", *args], env=cli_env, stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 141, p.stderr
    assert p.stderr == "", p.stderr  # no traceback, no 'Exception ignored ... BrokenPipeError'


def test_an_out_that_is_the_project_folder_or_inside_its_sources_is_refused(tmp_path):
    """`ssmrepro figures --out .` run in the project folder replaced the project's README.md
    with the front page (exit 0); `--out experiments` wrote result folders and a README.md
    among the specs. Refused now (exit 2) by every command that writes, before writing."""
    root = _project(tmp_path, small=True)
    (root / "README.md").write_text("# the project's own README\n")
    env = {"SSMREPRO_ROOT": str(root)}
    _assert_refused(_invoke("figures", "--no-rebuild", "--out", root, env=env),
                    "is the project folder")
    assert (root / "README.md").read_text() == "# the project's own README\n"
    for args in (["figures", "--no-rebuild"], ["plot", "keep-nth", "--profile", "smoke"],
                 ["verify", "keep-nth", "--profile", "smoke"],
                 ["run", "keep-nth", "--profile", "smoke", "--max-runs", "1"]):
        res = _invoke(*args, "--out", root / "experiments", env=env)
        _assert_refused(res, "inside the project's experiments/ folder")
    assert sorted(p.name for p in (root / "experiments").iterdir()) == ["huang2025"]
    assert sorted(p.name for p in (root / "experiments" / "huang2025").iterdir()) == [
        "huang2025-fig1.yaml", "huang2025-fig2.yaml", "huang2025-tab1.yaml"]


def test_workers_with_the_ray_engine_is_refused_not_ignored(tmp_path, monkeypatch):
    """`run --engine ray --workers 2` ran as many packs at once as the Ray cluster has slots,
    the option quietly ignored (as `--cpus-per-pack` without Ray is refused); $SSMREPRO_WORKERS,
    the local engine's default, is not an option given and is left alone."""
    spec = _one_run_spec(tmp_path)
    res = _invoke("run", spec, "--out", tmp_path / "o", "--engine", "ray", "--workers", "2")
    _assert_refused(res, "--workers is an option of the local engine")
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # Ray not installed
    res = _invoke("run", spec, "--out", tmp_path / "o", "--engine", "ray",
                  env={"SSMREPRO_WORKERS": "2"})
    assert res.exit_code == 2 and "--workers" not in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_run_prints_its_warnings_on_stderr(tmp_path):
    """`run` printed its warnings (--workers capped, a record quarantined) on stdout among its
    progress and summary lines (`list`, `show` and `plot` print theirs on stderr)."""
    spec, out = _one_run_spec(tmp_path), tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate", "--no-plot",
                  "--workers", "100000")
    assert res.exit_code == 0, res.output
    assert "capped at" in res.stderr and "warning:" not in res.stdout, res.stdout
    assert "trained 1 runs" in res.stdout, res.stdout


@pytest.mark.parametrize("kv", ["model.dt_max=.inf", "model.dt_min=.nan"])
def test_a_model_field_of_inf_or_nan_is_refused(tmp_path, kv):
    """`--set model.dt_max=.inf` (or `dt_max: .inf` in a spec) passed validation (the model
    configs, unlike the task's and train's, took inf and NaN): `show --json` printed it as
    null, the human `show` as .inf, and training drew Δ from an infinite range."""
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {}}]}])
    res = _invoke("show", spec, "--profile", "smoke", "--json", "--set", kv)
    _assert_refused(res, "finite number")
    assert res.stdout == "", res.stdout
    from pydantic import ValidationError

    from ssmrepro.models.mixers import MIXERS

    with pytest.raises(ValidationError, match="finite number"):  # the mixers' fields too
        MIXERS["mamba2"].Config(A_max=float("inf"))


def test_the_front_pages_training_time_counts_a_run_under_two_labels_once(tmp_path):
    """A run shared by two labels has a row under each in results.csv, each with its pack's wall
    time: the front page summed both (four committed rows were too long, koren2026-fig12's 1.6 h
    of training read 2.1 h)."""
    import pandas as pd

    from ssmrepro.plots.frontpage import training_time

    csv = tmp_path / "results.csv"
    pd.DataFrame({"run_id": ["a", "a", "b"], "label": ["x", "y", "x"], "seed": [0, 0, 1],
                  "wall_s": [60.0, 60.0, 60.0], "pack_size": [1, 1, 1]}).to_csv(csv, index=False)
    assert training_time(csv) == "2 min"


def test_schedule_min_lr_with_a_final_factor_is_refused(tmp_path):
    """`schedule: {min_lr: 1e-4, final_factor: 0.5, warmup_steps: 3}` (lr 1e-3) trained its
    warm-up at a NEGATIVE learning rate (-8e-4 at step 0: gradient ascent; final_factor 1 gave
    about -1e9 x lr) and quietly ignored final_factor after it: min_lr rescales the factors
    between final_factor and 1, so the two together are refused; either alone stays >= 0."""
    from pydantic import ValidationError

    from ssmrepro.optim import lr_table
    from ssmrepro.sweep.config import Schedule

    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {}}]}])
    res = _invoke("show", spec, "--profile", "smoke", "--set",
                  "train.schedule={kind: cosine, warmup_steps: 3, final_factor: 0.5, min_lr: 1e-4}")
    _assert_refused(res, "min_lr", "final_factor")
    with pytest.raises(ValidationError, match="not both"):
        Schedule(kind="cosine", warmup_steps=3, final_factor=1.0, min_lr=1e-4)
    for s in (Schedule(kind="cosine", warmup_steps=3, min_lr=1e-4),
              Schedule(kind="linear", warmup_steps=3, final_factor=0.5)):
        lrs = lr_table([1e-3], [s], [10], [s.min_lr])
        assert float(lrs.min()) >= 0.0 and float(lrs.max()) <= 1e-3 + 1e-15, lrs


def test_the_report_says_when_runs_stopped_at_their_time_limit(tmp_path):
    """`--set train.time_limit_s=1e-6`: every run stopped at step 0, untrained ('ok',
    stop_reason time_limit), and the report read '1 runs expected, 1 finished (0 diverged)'
    with the untrained numbers as the cell's, no word of the cut. It now counts them."""
    spec, out = _one_run_spec(tmp_path), tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--set", "train.time_limit_s=1e-6")
    assert res.exit_code == 0, res.output
    (report,) = (out / "tests" / "t-spec").glob("report-smoke*.md")
    text = report.read_text()
    assert "1 of the finished runs stopped at their time limit" in text, text
    assert "| n_time_limit |" in text, text
    plain = tmp_path / "plain"  # a run that ends at its step budget: no such words
    res = _invoke("run", spec, "--out", plain, "--profile", "smoke", "--no-calibrate")
    assert res.exit_code == 0, res.output
    (report,) = (plain / "tests" / "t-spec").glob("report-smoke*.md")
    assert "time limit" not in report.read_text() and "n_time_limit" not in report.read_text()


@pytest.mark.parametrize("kv", ["train.schedule={final_factor: 0.1}",
                                "train.schedule={min_lr: 1.0e-5}",
                                "train.schedule={kind: constant, decay_steps: 3}"])
def test_a_constant_schedule_with_decay_settings_is_refused(tmp_path, kv):
    """`schedule: {final_factor: 0.1}` (the kind defaults to constant), a `min_lr` or a
    `decay_steps` with kind constant trained at the constant lr: nothing decayed, no word.
    Refused, naming the ignored settings; a warm-up with constant stays accepted (a hold is
    refused too: it holds the lr that constant keeps anyway)."""
    from ssmrepro.sweep.config import Schedule

    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {}}]}])
    res = _invoke("show", spec, "--profile", "smoke", "--set", kv)
    _assert_refused(res, "kind 'constant' has no decay")
    Schedule(kind="constant", warmup_steps=3)


def test_a_run_cut_by_its_time_limit_has_a_history_row_at_its_stop_step(tmp_path, monkeypatch):
    """A run stopped by `train.time_limit_s` between evaluations: its history ended at the last
    multiple of eval_every (step 0 here), before the model its final metrics are of, while a run
    that ran its budget gets a row at its stop step. Now both do."""
    import importlib
    import types

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    train_mod = importlib.import_module("ssmrepro.train")
    steps = [0]
    clock = types.SimpleNamespace(time=lambda: 1000.0 + 10.0 * steps[0],
                                  process_time=time.process_time)
    real = train_mod.forward_backward

    def counted(*a, **kw):
        steps[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(train_mod, "time", clock)
    monkeypatch.setattr(train_mod, "forward_backward", counted)
    runs = expand(load_spec(_one_run_spec(tmp_path, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 50, "val_size": 16,
        "test_size": 16, "eval_every": 20, "eval_batch_size": 64, "time_limit_s": 25})), "smoke")
    (res,) = train_mod.train_pack(runs)
    assert res["stop_reason"] == "time_limit" and res["stop_step"] == 3, res["stop_step"]
    assert [h["step"] for h in res["history"]] == [0, 3], res["history"]
    assert res["history"][-1]["val.loss"] == pytest.approx(res["metrics"]["val.loss"])


def test_max_steps_and_epochs_both_given_say_which_to_drop(tmp_path):
    """`--set train.epochs=3` over a spec's max_steps: the refusal said only 'give exactly one of
    max_steps or epochs', not that both were set nor how to unset one."""
    spec = _one_run_spec(tmp_path)
    res = _invoke("show", spec, "--profile", "smoke", "--set", "train.epochs=3",
                  "--set", "train.train_size=64")
    _assert_refused(res, "both are given (max_steps 40, epochs 3)", "train.max_steps=null")


def _lra_copy(tmp_path):
    data = tmp_path / "data"
    for sub in ("imdb", "lra"):
        shutil.copytree(ROOT / "tests" / "assets" / "lra" / sub, data / sub)
    return data


@pytest.mark.parametrize("dataset,file,append,said", [
    ("text", "imdb/aclImdb/train/pos/0_9.txt", b"good \xff bad",
     "0_9.txt: not UTF-8 text (byte 0xff at offset"),
    ("text", "imdb/aclImdb/train/pos/0_9.txt", b"a" * ((1 << 20) + 1),
     "0_9.txt: not a review file (1,048,577 bytes, larger than 1,048,576)"),
    ("retrieval", "lra/tsv_data/new_aan_pairs.eval.tsv", b"1\tid0\tid1\ta \xff b\tc\n",
     "new_aan_pairs.eval.tsv:3: not UTF-8 text (byte 0xff at column 13)"),
    ("retrieval", "lra/tsv_data/new_aan_pairs.test.tsv", b"inf\tid0\tid1\ta\tb\n",
     "new_aan_pairs.test.tsv:3: label 'inf' is not a whole number"),
    ("retrieval", "lra/tsv_data/new_aan_pairs.test.tsv", b"0.5\tid0\tid1\ta\tb\n",
     "new_aan_pairs.test.tsv:3: label '0.5' is not a whole number"),
    ("listops", "lra/listops-1000/basic_train.tsv", b"( [MAX 2 \xff ) ]\t2\n",
     "basic_train.tsv:9: not UTF-8 text (byte 0xff at column 10)"),
])
def test_a_text_source_file_that_is_not_utf8_or_too_large_is_named(tmp_path, dataset, file,
                                                                   append, said):
    """Text sources read as UTF-8: a byte 0xff in an IMDB review or a ListOps / AAN TSV line failed
    with the bare message 'utf-8' (no file, no line); an AAN label 'inf' raised OverflowError (a
    traceback) and '0.5' was cut to class 0 without a word; a review of 50 MB took 300 MB and 7 s
    (hundreds of MB took gigabytes). Each now raises ValueError naming the file (and line)."""
    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    if "imdb" in file:
        (data / file).write_bytes(append)
    else:
        with open(data / file, "ab") as f:
            f.write(append)
    with pytest.raises(ValueError, match=re.escape(said)):
        load_lra(dataset, "train", root=data, cache=False, **(
            {"min_freq": 1} if dataset != "listops" else {}))


def test_a_byte_order_mark_keeps_the_first_aan_pair(tmp_path):
    """An AAN TSV opening with a UTF-8 byte order mark: its first label read '\\ufeff1.0', not a
    number, so the first pair was taken for a header and dropped without a word (3 of 4 pairs)."""
    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    f = data / "lra/tsv_data/new_aan_pairs.train.tsv"
    plain = load_lra("retrieval", "train", root=data, cache=False, min_freq=1)
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    marked = load_lra("retrieval", "train", root=data, cache=False, min_freq=1)
    assert marked.labels.tolist() == plain.labels.tolist() and len(plain.labels) == 4
    assert marked.x.tolist() == plain.x.tolist()


def test_a_source_rewritten_with_its_mtime_put_back_does_not_serve_the_old_cache(tmp_path):
    """The cache key holds each source file's size and mtime: an IMDB review rewritten in place
    (same size) with its mtime put back (`touch -r`, `cp -p`, an archive extracted again), or a
    second data root copied with its times (`cp -a`) sharing one cache folder, was served the
    arrays of the old bytes without a word. The entry keeps a digest of the files' change times
    (which cannot be set back): a mismatch rebuilds it with a warning."""
    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    review = data / "imdb/aclImdb/train/pos/0_9.txt"
    st = review.stat()
    first = load_lra("text", "train", root=data, min_freq=1).x.tolist()
    review.write_bytes(b"Q" + review.read_bytes()[1:])
    os.utime(review, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.warns(UserWarning, match="built from source files changed since"):
        edited = load_lra("text", "train", root=data, min_freq=1).x.tolist()
    fresh = load_lra("text", "train", root=data, min_freq=1, cache=False).x.tolist()
    assert edited == fresh != first
    # a second root, a time-keeping copy with the review's first byte put back, sharing the
    # first root's cache (which holds the edited review's arrays)
    other = tmp_path / "other"
    shutil.copytree(data, other, copy_function=shutil.copy2)
    review = other / "imdb/aclImdb/train/pos/0_9.txt"
    review.write_bytes(b"A" + review.read_bytes()[1:])
    os.utime(review, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.warns(UserWarning, match="built from source files changed since"):
        got = load_lra("text", "train", root=other, cache_dir=data / ".cache", min_freq=1)
    assert got.x.tolist() == first


def test_a_corpus_cut_in_place_while_a_run_reads_it_is_named_not_a_bus_error(tmp_path):
    """text_corpus reads its file through a memory map: the file cut in place while runs read it
    (`> corpus.txt`, a log rotated by truncation) killed the process on the next batch with SIGBUS
    ('Bus error', exit 135, the whole sweep gone without a word). sample() now checks the opened
    file and raises CorpusChanged (a failed pack, recorded), naming the file."""
    import subprocess
    import sys

    corpus = tmp_path / "c.txt"
    corpus.write_bytes(bytes(range(256)) * 64)
    code = ("import sys, torch\n"
            "from ssmrepro.tasks.text_corpus import TextCorpus, TextCorpusConfig, CorpusChanged\n"
            "t = TextCorpus(TextCorpusConfig(path=sys.argv[1], L=16))\n"
            "open(sys.argv[1], 'wb').write(b'short')\n"
            "try:\n"
            "    t.sample(torch.tensor([0, 1]), 2, torch.arange(4))\n"
            "except CorpusChanged as err:\n"
            "    print(err)\n")
    res = subprocess.run([sys.executable, "-c", code, str(corpus)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert f"the corpus {corpus} was cut or rewritten in place" in res.stdout
    assert "(16,384 bytes when opened, 5 now)" in res.stdout


def test_a_listops_row_with_three_columns_is_refused_not_read_as_a_longer_source(tmp_path):
    """A ListOps TSV row '( [MAX 2 3 ) ]<TAB>3<TAB>4' (a stray column) was split at its last tab:
    the source '( [MAX 2 3 ) ]<TAB>3' tokenised as [MAX 2 3 3 ] (a tab is whitespace) with label
    4, a wrong example trained on without a word. Rows must have exactly two fields."""
    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    with open(data / "lra/listops-1000/basic_test.tsv", "ab") as f:
        f.write(b"( [MAX 2 3 ) ]\t3\t4\n")
    with pytest.raises(ValueError, match=re.escape(
            "basic_test.tsv:5: expected 2 tab-separated fields (source, target), got 3")):
        load_lra("listops", "test", root=data, cache=False)


@pytest.mark.parametrize("dataset,file,row", [
    ("retrieval", "lra/tsv_data/new_aan_pairs.train.tsv", b"1\tid0\tid1\t" + b"a" * 5000 + b"\tb\n"),
    ("listops", "lra/listops-1000/basic_val.tsv", b"( [MAX 2" + b" 3" * 3000 + b" ) ]\t3\n"),
])
def test_an_enormous_tsv_line_is_refused_before_it_is_read_whole(tmp_path, monkeypatch, dataset,
                                                                 file, row):
    """One AAN line of 150 MB took 786 MB and 10 s to prepare (read whole, split, counted,
    encoded to UTF-32 in full before truncation to max_len): memory grew with the line. A line
    over ``MAX_LINE_BYTES`` (16 MiB; lowered here) is refused naming the file and line, read no
    further than the limit; a line just at the limit passes."""
    from ssmrepro.data import load_lra, text

    data = _lra_copy(tmp_path)
    with open(data / file, "ab") as f:
        f.write(row)
    n = sum(1 for _ in open(data / file, "rb"))
    monkeypatch.setattr(text, "MAX_LINE_BYTES", len(row) - 2)  # (the line without its \n)
    kw = {"min_freq": 1} if dataset == "retrieval" else {}
    with pytest.raises(ValueError, match=re.escape(
            f"{file.rsplit('/', 1)[1]}:{n}: a line longer than {len(row) - 2:,} bytes")):
        load_lra(dataset, "train", root=data, cache=False, **kw)
    monkeypatch.setattr(text, "MAX_LINE_BYTES", len(row) - 1)
    load_lra(dataset, "train", root=data, cache=False, **kw)


@pytest.mark.parametrize("label,said", [
    (b"inf", "0.npy:1: label 'inf' is not a whole number"),
    (b"0.5", "0.npy:1: label '0.5' is not a whole number"),
    (b"\xff", "0.npy:1: not UTF-8 text (byte 0xff)"),
])
def test_a_pathfinder_metadata_label_that_is_not_a_class_is_named(tmp_path, label, said):
    """The LRA Pathfinder metadata (text lines, field 3 the label): a label 'inf' raised
    OverflowError (a traceback from `run`), '0.5' was cut to class 0 without a word, and a byte
    0xff failed with the bare message 'utf-8'. Each now names the metadata file and line."""
    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    meta = data / "lra/pathfinder32/curv_contour_length_14/metadata/0.npy"
    lines = meta.read_bytes().split(b"\n")
    fields = lines[0].split(b" ")
    lines[0] = b" ".join([*fields[:3], label, *fields[4:]])
    meta.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError, match=re.escape(said)):
        load_lra("pathfinder", "train", root=data, resolution=32, cache=False)


def test_a_pathfinder_metadata_error_after_a_blank_line_names_its_own_line(tmp_path):
    """Metadata lines were numbered after the blank ones were dropped: a bad label on line 3
    after a blank line 2 was reported at line 2 (an empty line, nothing to fix there)."""
    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    meta = data / "lra/pathfinder32/curv_contour_length_14/metadata/0.npy"
    lines = meta.read_bytes().split(b"\n")
    fields = lines[1].split(b" ")
    lines[1] = b" ".join([*fields[:3], b"0.5", *fields[4:]])
    meta.write_bytes(b"\n".join([lines[0], b"", *lines[1:]]))
    with pytest.raises(ValueError, match=re.escape("0.npy:3: label '0.5' is not a whole number")):
        load_lra("pathfinder", "train", root=data, resolution=32, cache=False)


def test_an_enormous_pathfinder_metadata_file_is_refused_unread(tmp_path, monkeypatch):
    """A Pathfinder metadata file (LRA layout) was read whole and split into Python strings:
    300 MB of lines took gigabytes. One over ``MAX_METADATA_BYTES`` (16 MiB; lowered here) is
    refused naming it; one at the limit is read."""
    from ssmrepro.data import load_lra, pathfinder

    data = _lra_copy(tmp_path)
    meta = data / "lra/pathfinder32/curv_contour_length_14/metadata/0.npy"
    size = meta.stat().st_size
    monkeypatch.setattr(pathfinder, "MAX_METADATA_BYTES", size - 1)
    with pytest.raises(ValueError, match=re.escape(
            f"0.npy: not a Pathfinder metadata file ({size:,} bytes, larger than {size - 1:,})")):
        load_lra("pathfinder", "train", root=data, resolution=32, cache=False)
    monkeypatch.setattr(pathfinder, "MAX_METADATA_BYTES", size)
    assert len(load_lra("pathfinder", "train", root=data, resolution=32, cache=False)) > 0


@pytest.mark.parametrize("sweep,profile_set,needle", [
    ([{"cases": [{"label": "A", "set": {"model.d_model": 8}, "grid": {"model.d_model": [16]}}]}],
     {}, "grid.model.d_model replaces what set.model.d_model sets"),
    ([{"cases": [{"label": "A", "set": {"model.d_model": 8}, "zip": {"model.d_model": [16]}}]}],
     {}, "zip.model.d_model replaces what set.model.d_model sets"),
    ([{"cases": [{"label": "A", "set": {"model.d_model": 8, "model": {
        "name": "ssm_lm", "mixer": "s6", "d_model": 16, "d_state": 4}}}]}],
     {}, "set.model replaces what set.model.d_model sets"),
    ([{"grid": {"train.schedule": [{"kind": "cosine"}], "train.schedule.kind": ["linear"]}}],
     {}, "grid.train.schedule.kind replaces what grid.train.schedule sets"),
    ([{"cases": [{"label": "S6"}]}], {"train.lr": 0.02, "train": {"lr": 0.03}},
     "set.train replaces what set.train.lr sets"),
])
def test_a_setting_given_twice_in_one_case_set_or_axis_is_refused(tmp_path, sweep, profile_set,
                                                                   needle):
    """A case's `set` value under its own grid or zip, a dotted key under a whole section given
    after it, or a section's field given again by a dotted key: the later one replaced the
    earlier without a word (d_model 8 never ran; `show` listed d_model 16 only). A key inside a
    section that does not name it refines the section (huang2025-tabA1-A4's Transformer case)."""
    spec = _one_run_spec(tmp_path, sweep=sweep, profiles={
        "smoke": {"set": profile_set}, "quick": {}, "paper": {}})
    _assert_refused(_invoke("show", spec, "--profile", "smoke"), needle)
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "T", "set": {"model": {
        "name": "transformer_lm", "n_layers": 1, "heads": 1}}, "grid": {"model.d_model": [8, 16]}}]}])
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    assert sorted(r["config"]["model"]["d_model"] for r in json.loads(res.stdout)["runs"]) == [8, 16]


@pytest.mark.parametrize("where", ["axis", "case"])
def test_zip_lists_of_different_lengths_are_refused_with_set_too(tmp_path, where):
    """`show --set train.lr=0.02` of a spec whose zip lists differ in length was a ValueError
    traceback (the overrides' check expanded the axes before the zip was checked)."""
    z = {"model.d_model": [8, 16], "model.d_state": [4]}
    sweep = [{"zip": z}] if where == "axis" else [{"cases": [{"label": "A", "zip": z}]}]
    spec = _one_run_spec(tmp_path, sweep=sweep)
    for extra in ([], ["--set", "train.lr=0.02"]):
        _assert_refused(_invoke("show", spec, "--profile", "smoke", *extra),
                        "zip lists have different lengths")


def test_constraints_that_exclude_every_point_of_a_labelled_case_are_refused(tmp_path):
    """`constraints: [model.d_model >= 12]` beside a case `A` of d_model 8: the case had no runs,
    and `show` listed B's alone (its line and rows were missing from the figure and tables
    without a word). An unlabelled case may be excluded (a branch of the sweep)."""
    cases = [{"label": "A", "set": {"model.d_model": 8}},
             {"label": "B", "set": {"model.d_model": 16}}]
    spec = _one_run_spec(tmp_path, constraints=["model.d_model >= 12"], sweep=[{"cases": cases}])
    _assert_refused(_invoke("show", spec, "--profile", "smoke"),
                    "sweep.0.cases.0 (A): the constraints exclude every point of this case")
    cases[0] = {"label": "A", "set": {"model.d_model": 8}, "constraints": ["model.d_state > 4"]}
    spec = _one_run_spec(tmp_path, sweep=[{"cases": cases}])
    _assert_refused(_invoke("show", spec, "--profile", "smoke"), "sweep.0.cases.0 (A)")
    cases = [{"set": {"model.d_model": 8}, "constraints": ["model.d_state > 4"]},
             {"label": "B", "set": {"model.d_model": 16}}]
    spec = _one_run_spec(tmp_path, sweep=[{"cases": cases}])
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    assert [r["label"] for r in json.loads(res.stdout)["runs"]] == ["B"]


def test_cases_of_two_axes_keep_both_constraints_and_seeds_are_not_replaced(tmp_path):
    """The second axis's case constraints replaced the first's at their joint points: case A's
    own `model.d_model > 100` was dropped and A ran at d_model 8; a second axis's case seeds
    replaced the first's without a word, and so did every case's own seeds a profile's seeds."""
    a = [{"label": "A", "set": {"model.d_model": 8}, "constraints": ["model.d_model > 100"]},
         {"label": "A2", "set": {"model.d_model": 16}}]
    b = [{"label": "B", "constraints": ["model.d_state >= 1"]}]
    spec = _one_run_spec(tmp_path, sweep=[{"cases": a}, {"cases": b}])
    _assert_refused(_invoke("show", spec, "--profile", "smoke"),
                    "sweep.0.cases.0 (A): the constraints exclude every point")
    a[0]["constraints"] = ["model.d_model < 10"]
    b = [{"label": "B", "constraints": ["model.d_model > 8"]}, {"label": "C"}]
    spec = _one_run_spec(tmp_path, sweep=[{"cases": a}, {"cases": b}])
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    assert {r["label"] for r in json.loads(res.stdout)["runs"]} == {"A / C", "A2 / B", "A2 / C"}
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "A", "seeds": [0]}]},
                                          {"cases": [{"label": "B", "seeds": [1, 2]}]}])
    _assert_refused(_invoke("show", spec, "--profile", "smoke"),
                    "'A' and 'B' of two axes give different seeds")
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "A", "seeds": [0]}]}],
                         profiles={"smoke": {"seeds": [5, 6]}, "quick": {}, "paper": {}})
    _assert_refused(_invoke("show", spec, "--profile", "smoke"),
                    "profiles.smoke.seeds: every sweep point")


def test_a_mapping_field_that_every_sweep_point_sets_again_is_refused(tmp_path):
    """A profile `set` of `train.schedule: {kind: cosine, warmup_steps: 2}` (or an earlier axis
    sweeping such a mapping) beside a grid of `train.schedule.warmup_steps`: warmup 2 never ran,
    without a word (a key every point sets again was refused; a field its mapping names was not)."""
    sched = {"kind": "cosine", "warmup_steps": 2}
    grid = {"grid": {"train.schedule.warmup_steps": [1, 3]}}
    spec = _one_run_spec(tmp_path, sweep=[grid], profiles={
        "smoke": {"set": {"train.schedule": sched}}, "quick": {}, "paper": {}})
    _assert_refused(_invoke("show", spec, "--profile", "smoke"), "profiles.smoke.set.train."
                    "schedule: every sweep point of this profile sets train.schedule.warmup_steps")
    spec = _one_run_spec(tmp_path, sweep=[{"grid": {"train.schedule": [sched]}}, grid])
    _assert_refused(_invoke("show", spec, "--profile", "smoke"),
                    "sweep.0: train.schedule is set again (its train.schedule.warmup_steps)")
    spec = _one_run_spec(tmp_path, sweep=[{"grid": {"train.schedule": [{"kind": "cosine"}]}},
                                          grid])  # refines the mapping: every value is used
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    assert [r["config"]["train"]["schedule"]["warmup_steps"]
            for r in json.loads(res.stdout)["runs"]] == [1, 3]


def test_the_check_of_settings_given_twice_is_not_quadratic(tmp_path):
    """The check that a case, profile `set` or axis gives no setting twice compared every key
    with every other: a case `set` of 20,000 keys (a 400 kB spec) took 150 s to load."""
    from ssmrepro.spec import SpecError, load_spec

    keys = {f"model.x{i}": 1 for i in range(20000)}
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "A", "set": keys}]}],
                         profiles={"smoke": {"set": keys}, "quick": {}, "paper": {}})
    start = time.monotonic()
    load_spec(spec)
    assert time.monotonic() - start < 20
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "A", "set": {
        **keys, "model": {"x19999": 2}}}]}])
    with pytest.raises(SpecError, match="set.model replaces what set.model.x0 sets"):
        load_spec(spec)


def test_the_number_of_sweep_axes_is_bounded(tmp_path):
    """10,000 sweep axes of one value each (a 400 kB spec) took two minutes of `show` (each axis
    is checked against every later one); in the spec and in a profile."""
    axes = [{"grid": {f"model.x{i}": [1]}} for i in range(10000)]
    for kw in ({"sweep": axes}, {"profiles": {"smoke": {"sweep": axes}, "quick": {}, "paper": {}}}):
        spec = _one_run_spec(tmp_path, **kw)
        start = time.monotonic()
        _assert_refused(_invoke("show", spec, "--profile", "smoke"), "at most 32 items")
        assert time.monotonic() - start < 30


def test_the_constraints_a_point_meets_over_all_axes_are_bounded(tmp_path):
    """The constraints of one case per axis all hold at a sweep point (since the later axis's no
    longer replace the earlier's): 32 axes of 100 each made 3,200 evaluations at every point."""
    case = {"cases": [{"constraints": [f"model.d_model >= {i}" for i in range(60)]}]}
    spec = _one_run_spec(tmp_path, sweep=[case, case])
    _assert_refused(_invoke("validate", spec), "sweep: a sweep point may have to meet 120")


def test_spec_seeds_that_no_profile_uses_are_refused(tmp_path):
    """yu2025-fig3 said `seeds: [0, 1]` while each of its profiles gave its own seeds: the list
    read as the spec's seeds and was never used. It is refused, exit 2; a profile without its
    own seeds uses them, and the spec is fine."""
    profiles = {"smoke": {"seeds": [0]}, "quick": {"seeds": [0]}, "paper": {"seeds": [0, 1]}}
    spec = _one_run_spec(tmp_path, seeds=[0, 1], profiles=profiles)
    _assert_refused(_invoke("validate", spec), "seeds [0, 1]: no profile uses them")
    ok = _one_run_spec(tmp_path, seeds=[0, 1], profiles={**profiles, "paper": {}})
    assert _invoke("validate", ok).exit_code == 0


@pytest.mark.parametrize("task,needle", [
    ({"name": "selective_copy", "words": 4, "numbers": 2, "number_offset": 2, "p": 0.3, "L": 8,
      "p_sparse": 0.5}, "p_sparse 0.5 is not read with distribution 'uniform'"),
    ({"name": "composite", "set2_shift4": 7}, "set2_shift4 7 is not read by variant 'standard'"),
    ({"name": "mqar", "vocab": 64, "L": 16, "kappa": 4, "reduce_to_ar": True,
      "random_non_queries": False}, "random_non_queries False is not read with reduce_to_ar"),
    ({"name": "induction_heads", "vocab": 8, "T": 8, "p": 0.0, "gamma": 0.3},
     "gamma 0.3 is not read with p 0"),
    ({"name": "composite", "test_pair": "12", "target43": "symmetric"},
     "target43 'symmetric' is not read with test_pair '12'"),
    ({"name": "inverse_matching", "ood_low": 150}, "ood_low 150 is not read with ood false"),
])
def test_task_keys_the_task_never_reads_are_refused(tmp_path, task, needle):
    """Task settings that the task's other settings never let it read (selective copy's
    `p_sparse` with distribution uniform, composite's `set2_shift4` in the standard variant, MQAR's
    `random_non_queries` with `reduce_to_ar`, induction heads' `gamma` with `p: 0`) trained the
    same data as without them under a new run id, its label saying otherwise: refused, exit 2."""
    spec = _one_run_spec(tmp_path, task=task, sweep=[{"cases": [{"label": "S6"}]}])
    _assert_refused(_invoke("validate", spec), "task: " + needle, "leave")


def test_an_eval_set_override_its_set_never_reads_is_refused(tmp_path):
    """An evaluation set overriding a field its set does not read (`sp: {p_sparse: 0.1}` on a
    uniform selective copy) was the run's test split under another name: refused. A run's field
    that only an evaluation set reads (`p_sparse` beside `mx: {distribution: mixed}`), and a set
    leaving the run's mixed distribution, are fine."""
    task = {"name": "selective_copy", "words": 4, "numbers": 2, "number_offset": 2, "p": 0.3,
            "L": 8}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    kw = {"sweep": [{"cases": [{"label": "S6"}]}]}
    spec = _one_run_spec(tmp_path, task=task, train={**train, "evals": {"sp": {"p_sparse": 0.1}}},
                         **kw)
    _assert_refused(_invoke("validate", spec), "train.evals.sp: p_sparse 0.1 is not read")
    for t, evals in (({**task, "p_sparse": 0.1}, {"mx": {"distribution": "mixed"}}),
                     ({**task, "p_sparse": 0.1, "distribution": "mixed"},
                      {"un": {"distribution": "uniform"}}),
                     ({"name": "composite", "test_pair": "12", "target43": "symmetric"},
                      {"s43": {"test_pair": "43"}})):
        spec = _one_run_spec(tmp_path, task=t, train={**train, "evals": evals}, **kw)
        res = _invoke("validate", spec)
        assert res.exit_code == 0, res.output


def test_bars_of_cells_that_share_their_x_value_are_named_apart():
    """Two cases labelled alike (`label: A` with mixer s6 and with s4d; huang2025-tabA1-A4's long
    profile gives one label several cases) were two bars both named `A` in a bars figure over
    `label`: the bars of a shared name carry the cell keys that tell them apart."""
    import pandas as pd

    from ssmrepro.plots.figures import _bar_names

    agg = pd.DataFrame({"label": ["A", "A", "B"], "model.mixer": ["s6", "s4d", "s6"],
                        "model.d_model": [8, 8, 8]})
    names = _bar_names(agg, "label", ["label", "model.mixer", "model.d_model"])
    assert names == ["A\nmixer=s6", "A\nmixer=s4d", "B"]
    names = _bar_names(agg, "model.d_model", ["label", "model.mixer", "model.d_model"])
    assert names == ["8\nlabel=A\nmixer=s6", "8\nlabel=A\nmixer=s4d", "8\nlabel=B\nmixer=s6"]


def test_a_loglog_slope_group_holding_two_cells_of_one_x_is_refused(tmp_path):
    """A `loglog_slope` claim whose group (`group_by: [label]`, its default) holds several cells
    at one `x` (widths 8, 16, 32 each at d_state 2 and 4) fitted one slope over the pooled
    lines without a word, its verdict read 'per group'; refused as a `monotone` claim's is,
    naming the key the cells differ in (the monotone message named every key left out)."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
             {"grid": {"model.d_model": [8, 16, 32], "model.d_state": [2, 4]}}]
    claim = {"check": "loglog_slope", "text": "slope", "metric": "test.loss",
             "x": "model.d_model", "expected": -1.0, "tol": 0.5}
    spec = _one_run_spec(tmp_path, sweep=sweep, claims=[claim])
    res = _invoke("validate", spec)
    _assert_refused(res, "claims.0.group_by: 2 cells of one group of profile smoke have "
                    "model.d_model = 8 (they differ in a key that group_by leaves out: "
                    "model.d_state)")
    spec = _one_run_spec(tmp_path, sweep=sweep, claims=[{**claim, "group_by": [
        "label", "model.d_state"]}])
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output


def test_an_aggregated_score_the_task_kind_never_records_is_refused(tmp_path):
    """`test.acc` aggregated for a regression task (its runs record `test.mse`), or `test.mse` /
    `val.best_mse` for a classification task, was an empty column of every summary and report,
    its figure 'not measured' and its claims MISSING for ever: refused by `validate`, exit 2."""
    spec = _one_run_spec(tmp_path, aggregate={"reduce": "mean", "metrics": [
        "test.acc", "val.best_mse", "test.mse"]})
    _assert_refused(_invoke("validate", spec),
                    "aggregate.metrics.1: 'val.best_mse': no run records it (every run's task is "
                    "a classification task, scored by acc)", "aggregate.metrics.2: 'test.mse'")
    raw = yaml.safe_load((ROOT / "experiments/yu2025/yu2025-fig4.yaml").read_text())
    raw.update(id="t-reg", alias=None, aggregate={"reduce": "mean", "metrics": [
        "test.loss", "test.acc"]})
    path = tmp_path / "t-reg.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    _assert_refused(_invoke("validate", path), "aggregate.metrics.1: 'test.acc': no run records "
                    "it (every run's task is a regression task, scored by mse)")


def test_a_learning_curve_of_the_score_the_task_kind_never_records_is_refused(tmp_path):
    """A `curves` figure of `val.acc` for a regression task (its history records `val.mse`) drew
    no curve: refused by `validate` and by `run`, exit 2."""
    raw = yaml.safe_load((ROOT / "experiments/yu2025/yu2025-fig4.yaml").read_text())
    raw.update(id="t-reg", alias=None, figures=[{
        "kind": "curves", "name": "cv", "series": ["val.acc"], "hue": ["label"],
        "row": "task.sigma1", "col": "task.sigma2", "title": "x"}])
    path = tmp_path / "t-reg.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    needle = ("figures.0: 'val.acc' is not in the runs' evaluation history (every run's task is "
              "a regression task, scored by mse)")
    _assert_refused(_invoke("validate", path), needle)
    _assert_refused(_invoke("run", path, "--profile", "smoke", "--dry-run", "--no-estimate",
                            "--out", tmp_path / "out"), needle)


def test_a_precondition_on_a_metric_a_cell_never_measured_is_not_met():
    """A precondition on an evaluation set that a profile's runs do not have (`given: long.acc
    >= 0.0001`, the set `long` only in another profile's `train.evals`) read NaN and held, so the
    claim PASSed on cells it was meant to exclude; it is not met there (the claim is MISSING,
    untestable). In a cell where a run diverged NaN still meets it (the claim judges the
    divergence: FAIL)."""
    import math

    import pandas as pd

    from ssmrepro.report.checks import Given, testable

    cells = pd.DataFrame({"label": ["A", "B", "C"], "test.acc": [0.1, 0.1, math.nan],
                          "long.acc": [math.nan, 0.5, math.nan], "n_ok": [1, 1, 0],
                          "n_diverged": [0, 0, 1], "complete": [True, True, True]})
    kept = testable(cells, [Given(metric="long.acc", op=">=", value=0.0001)], "test.acc")
    assert kept["label"].tolist() == ["B", "C"]


def test_a_bands_figure_over_parameters_with_two_cells_at_one_size_is_refused(tmp_path):
    """A `bands` figure over the parameter count (its default x) drew two cells of one hue that
    differ in a key that leaves the size alone (`task.T` 8 and 12) at one x, one point hiding
    the other, their line a vertical zigzag: refused before training, as other kinds' cells on
    one spot are (the sizes are counted on the meta device)."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"task.T": [8, 12]}}]
    kw = {"aggregate": {"reduce": "mean", "metrics": ["test.acc"], "percentiles": [10, 90]},
          "figure": {"kind": "bands", "metric": "test.acc", "title": "x"}}
    spec = _one_run_spec(tmp_path, sweep=sweep, **kw)
    needle = ("the cells label=S6, model.mixer=s6, task.T=8 and label=S6, model.mixer=s6, "
              "task.T=12 of profile smoke fall on one spot (case:0=S6, n_params=")
    _assert_refused(_invoke("validate", spec), needle)
    _assert_refused(_invoke("run", spec, "--profile", "smoke", "--dry-run", "--no-estimate",
                            "--out", tmp_path / "out"), needle)
    spec = _one_run_spec(tmp_path, sweep=sweep, **{**kw, "figure": {
        "kind": "bands", "metric": "test.acc", "title": "x", "facet": "task.T"}})
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("schedule,needle", [
    ({"kind": "cosine", "warmup_start": 0.04}, "warmup_start 0.04 is not read with warmup_steps 0"),
    ({"kind": "constant", "hold_steps": 3}, "so hold_steps 3 would be ignored"),
])
def test_schedule_keys_the_schedule_never_reads_are_refused(tmp_path, schedule, needle):
    """A warm-up's `warmup_start` with `warmup_steps: 0`, and `hold_steps` before the no decay
    of kind `constant`, left every learning rate as without them under another run id."""
    spec = _one_run_spec(tmp_path)
    _assert_refused(_invoke("validate", spec, "--set", f"train.schedule={json.dumps(schedule)}"),
                    needle)


def test_the_best_seed_of_a_loss_is_its_lowest():
    """`seeds: best` of a curves figure took the highest value at each step, also of a loss
    series (`val.loss`: the worst seed drawn as 'best of 3 seeds'); and a figure of a loss
    aggregated with `reduce: max` (the highest loss over seeds) was labelled 'best of 3
    seeds'. The best of a loss is its lowest; a loss's max is labelled 'worst', its min
    'best'."""
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from ssmrepro.plots.curves import best_of_seeds
    from ssmrepro.plots.registry import FigureContext

    v = np.array([[1.0, 3.0], [2.0, 0.5]])  # the curve of the seed of the best last value
    assert best_of_seeds(v, "val.loss").tolist() == [3.0, 0.5]
    assert best_of_seeds(v, "train.mse").tolist() == [3.0, 0.5]
    assert best_of_seeds(v, "val.acc").tolist() == [1.0, 2.0]
    cells = pd.DataFrame({"n_expected": [3], "n_ok": [3], "n_diverged": [0]})
    for reduce, acc, loss in (("max", "best", "worst"), ("min", "worst", "best")):
        spec = SimpleNamespace(aggregate=SimpleNamespace(reduce=reduce))
        ctx = FigureContext(spec=spec, profile="p", cells=cells, keys=[], out=lambda s, e: None)
        assert ctx.aggregation("test.acc") == f"{acc} of 3 seeds"
        assert ctx.aggregation("test.loss") == f"{loss} of 3 seeds"


def test_a_size_order_group_holding_two_cells_of_one_label_and_size_is_refused(tmp_path):
    """A `size_order` claim whose group holds two cells of one label at one size (widths 8, 16
    each at d_state 2 and 4, `group_by: [task.T]`) took the smallest size at which either
    solved as the label's, without a word: refused as a `monotone` group's is."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"model.d_model": [8, 16], "model.d_state": [2, 4]}}]
    claim = {"check": "size_order", "text": "so", "labels": ["S6", "S4D"],
             "size": "model.d_model", "group_by": ["task.T"], "threshold": 0.5}
    spec = _one_run_spec(tmp_path, sweep=sweep, claims=[claim])
    _assert_refused(_invoke("validate", spec), "claims.0.group_by: 2 cells of one group of "
                    "profile smoke have model.d_model = 8 (they differ in a key that group_by "
                    "leaves out: model.d_state)")
    spec = _one_run_spec(tmp_path, sweep=sweep, claims=[{**claim, "group_by": [
        "task.T", "model.d_state"]}])
    res = _invoke("validate", spec)
    assert res.exit_code == 0, res.output


def test_a_recall_frontier_point_holding_two_cells_of_one_column_is_refused(tmp_path):
    """A `recall_frontier` claim whose column holds two cells at one (width, state) point of a
    regime (`train.lr` 0.01 and 0.02 swept, not selected) took whichever reached the threshold
    as the point's: refused as a `monotone` group's two cells at one step are."""
    task = {"name": "mqar", "vocab": 64, "L": 16, "kappa": 2}
    model = {"name": "linear_mamba", "d_model": 8, "d_state": 4}
    sweep = [{"cases": [{"label": "lin"}]},
             {"grid": {"model.d_model": [8, 16, 32], "model.d_state": [2, 4],
                       "train.lr": [0.01, 0.02]}}]
    claim = {"check": "recall_frontier", "text": "frontier", "metric": "test.acc",
             "threshold": 0.9, "min_points": 3, "factor": 2.0, "columns": {"lin": "linear"}}
    spec = _one_run_spec(tmp_path, task=task, model=model, sweep=sweep, claims=[claim])
    _assert_refused(_invoke("validate", spec), "claims.0.regime: 2 cells of one group of "
                    "profile smoke have model.d_state = 2 (they differ in a key that regime "
                    "leaves out: train.lr): give that key one value per column")


# ---------------------------------------------------------------------------------------------
# round 27 P: numbers and text in output files


def test_learning_curves_keep_small_losses(tmp_path):
    """curves.csv rounded every metric to 5 decimals: a validation MSE below 5e-6 was written 0.0
    (746 of yu2025-fig6's losses), so its log-scale loss curves fell off the axis. Values keep 5
    significant digits; 0.1 and above keep 5 decimals as before."""
    from ssmrepro.report.curves import curve_table

    rec = {"run_id": "r0", "label": "S4D", "seed": 0, "status": "ok",
           "config": {"train": {"batch_size": 2}},
           "history": [{"step": 0, "val.loss": 0.926381234}, {"step": 5, "val.loss": 3.21234e-8},
                       {"step": 10, "val.loss": 0.0123456789}, {"step": 15, "val.loss": 1e-300}]}
    table = curve_table([rec], ["label"])
    path = tmp_path / "curves.csv"
    path.write_text(table.to_csv(index=False))
    import pandas as pd

    back = pd.read_csv(path)["val.loss"].tolist()
    assert back == [0.92638, 3.2123e-8, 0.012346, 1e-300], back


def test_texts_written_over_lines_are_one_line_of_the_report(tmp_path):
    """A claim text, the spec's claim or a note written over lines (`text: |`) kept its line
    breaks in report.md: a line of the text read as a verdict of its own ('- **PASS** fake'),
    the counts ('**Verdicts: 9 PASS, ...**') or a section ('## Claims'). Each is one line."""
    fake = "**Verdicts: 9 PASS, 0 FAIL, 0 MISSING, 0 UNTESTED**"
    spec = _one_run_spec(
        tmp_path, claim=f"the claim\n\n{fake}\n",
        notes=["a note\n\n## Claims\n\n- **PASS** injected note", "second"],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16},
        claims=[{"text": "real\n- **PASS** fake claim\n# Heading", "where": {"label": "S6"},
                 "op": ">=", "value": 0.99}])
    out = tmp_path / "o"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    report = (out / "tests/t-spec/report-smoke.md").read_text()
    lines = report.splitlines()
    assert [ln for ln in lines if ln.startswith("- **")] == [
        next(ln for ln in lines
             if ln.startswith(r"- **FAIL** real - \*\*PASS\*\* fake claim # Heading"))]
    assert [ln for ln in lines if "Verdicts:" in ln] == [
        "**Verdicts: 0 PASS, 1 FAIL, 0 MISSING, 0 UNTESTED**",
        "Claim: the claim " + fake.replace("*", r"\*")]  # escaped (md_text)
    assert [ln for ln in lines if ln.startswith("#")] == [
        lines[0], "## Claims", "## Our numbers", "## Decisions (spec notes)"]
    assert r"- a note ## Claims - \*\*PASS\*\* injected note" in lines
    res = _invoke("verify", spec, "--out", out, "--profile", "smoke", "--json")
    assert json.loads(res.stdout)["claims"][0]["text"].startswith("real - **PASS** fake claim")


def test_bars_of_cells_one_label_names_are_told_apart(tmp_path, monkeypatch):
    """A bars figure by label (`x: label`, the default) of a profile that also sweeps train.lr
    drew one bar per cell, every bar named 'S6': no telling which learning rate is which. The
    bars of one name carry the keys that tell them apart (`lr=1e-30`, `lr=0.00316`)."""
    import matplotlib.axes

    ticks = []
    real = matplotlib.axes.Axes.set_xticks

    def spy(self, pos, labels=None, **kw):
        ticks.append(list(labels) if labels is not None else None)
        return real(self, pos, labels, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "set_xticks", spy)
    spec = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                         {"grid": {"train.lr": [1e-30, 0.00316]}}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    res = _invoke("run", spec, "--out", tmp_path / "o", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert [t for t in ticks if t] == [["S6\nlr=1e-30\n256 p", "S6\nlr=0.00316\n256 p"]], ticks


def test_huge_numbers_in_the_report_are_not_printed_digit_by_digit(tmp_path):
    """A paper value of 1e300 was printed with 3 decimals, a 301-digit number whose digits past
    the 17th are the float's binary expansion ('1000000000000000052504760255...000.000'), and a
    swept key of 1e20 as '100000000000000000000': from 1e15 on, 3 significant digits."""
    spec = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                         {"grid": {"train.grad_clip": [1e20]}}],
        paper_values=[{"where": {"label": "S6"}, "metric": "test.loss", "value": 1e300,
                       "tol": 1e300}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    out = tmp_path / "o"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    report = (out / "tests/t-spec/report-smoke.md").read_text()
    assert "| label=S6: test.loss (tol 1e+300) | 1e+300 |" in report, report
    assert "| S6 | s6 | 1e+20 |" in report, report
    assert "0000000000" not in report, report


def test_a_one_seed_cell_has_no_seed_spread(tmp_path):
    """A cell of one finished seed had `test.acc.std` 0.0: report.md printed 0.000 and
    summary.csv 0.0, seeds that agree exactly, where there is no spread to show. It is empty
    ('—' in the report); two seeds still have theirs."""
    spec = _one_run_spec(
        tmp_path, seeds=[0],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16},
        profiles={"smoke": {}, "quick": {"seeds": [0, 1]}, "paper": {}})
    out = tmp_path / "o"
    for profile, name in (("smoke", "summary-smoke.csv"), ("quick", "summary.csv")):
        assert _invoke("run", spec, "--out", out, "--profile", profile).exit_code == 0
        import pandas as pd

        row = pd.read_csv(out / "tests/t-spec" / name).iloc[0]
        assert row["n_ok"] == (1 if profile == "smoke" else 2)
        if profile == "smoke":
            assert pd.isna(row["test.acc.std"]) and pd.isna(row["test.loss.std"]), row
            report = (out / "tests/t-spec/report-smoke.md").read_text()
            assert "| 0.000 |" not in report.split("## Our numbers")[1], report
        else:
            assert row["test.loss.std"] > 0, row


def test_a_small_spread_in_a_verdict_detail_is_not_zero():
    """A `spread` claim on a loss with `tol: 1e-6` FAILed with the detail '1 of 1 groups spread
    more than 1e-06 (largest 0.000)': 3 decimals read the spread 3e-05 as none. The detail
    prints it as the report prints numbers (3 significant digits below 0.0005)."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, cell_keys, verify

    runs = [SimpleNamespace(label=lab, seed=0, coords={}, flat=dict) for lab in "ab"]
    df = pd.DataFrame({"run_id": ["r0", "r1"], "label": ["a", "b"], "seed": [0, 0],
                       "status": "ok", "val.mse": [1e-5, 4e-5]})
    cells = aggregate(df, runs, "mean", ["val.mse"])
    claim = {"check": "spread", "text": "a and b agree", "group_by": [], "metric": "val.mse",
             "tol": 1e-6}
    spec = SimpleNamespace(claims=[claim], paper_values=[], claim="c")
    [v] = [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "claim"]
    assert v.verdict == "FAIL", v
    assert v.detail == "1 of 1 groups spread more than 1e-06 (largest 3e-05)", v.detail


def test_heatmap_numbers_that_would_read_zero_keep_two_digits(tmp_path, monkeypatch):
    """A heatmap wrote its cells' numbers with 2 decimals: yu2025-fig4's test MSEs 0.00017 and
    0.00095 both read '0.00', an exact recovery. Below 0.005 a cell (ours or the paper's) has 2
    significant digits."""
    import matplotlib.axes

    texts = []
    real = matplotlib.axes.Axes.text
    real_note = matplotlib.axes.Axes.annotate  # a bar's number is placed in points above it

    def spy(self, x, y, s, *a, **kw):
        texts.append(s)
        return real(self, x, y, s, *a, **kw)

    def spy_note(self, text, *a, **kw):
        texts.append(text)
        return real_note(self, text, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "text", spy)
    spec = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                         {"grid": {"train.lr": [0.01, 0.02]}}],
        figure={"kind": "heatmaps", "metric": "test.loss", "x": ["train.lr"], "y": ["label"]},
        paper_values=[{"where": {"label": "S6", "train.lr": 0.01}, "metric": "test.loss",
                       "value": 0.00017, "tol": 0.1}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    res = _invoke("run", spec, "--out", tmp_path / "o", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert any(t.endswith(" (0.00017)") for t in texts), texts


def test_export_keeps_the_integer_settings_of_a_runs_config(tmp_path):
    """A setting only some runs have (huang2025-tab1's Transformer `model.heads`, empty for the
    Mamba rows) is read back from results.csv as a float column: export's config gave
    `"model.heads": 1.0` (and `"model.d_state": 8.0`) where the run's config has 1 (8). The
    planned run's config types them; a float setting stays a float."""
    import pandas as pd

    root = _project(tmp_path, small=True)
    out = tmp_path / "results"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", out / "huang2025/huang2025-tab1")
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    df = pd.read_csv(tmp_path / "x.csv", dtype=str, keep_default_na=False)
    configs = [json.loads(c) for c in df.loc[df["label"] == "Transformer", "config"]]
    assert configs and all(type(c["model.heads"]) is int for c in configs), configs[0]
    configs = [json.loads(c) for c in df.loc[df["label"] == "Mamba", "config"]]
    assert configs and all(type(c["model.d_state"]) is int for c in configs), configs[0]
    assert all(type(c["train.lr"]) is float for c in configs), configs[0]


def test_a_negative_paper_value_of_a_seed_spread_is_refused(tmp_path):
    """A paper value `test.acc.std: -0.1` could never match (a standard deviation is never below
    0) and was accepted, as a negative loss is not; it is refused, exit 2, and 0 is fine."""
    pv = {"where": {"label": "S6"}, "metric": "test.acc.std", "value": -0.1, "tol": 0.05}
    spec = _one_run_spec(tmp_path, paper_values=[pv])
    _assert_refused(_invoke("validate", spec), "paper_values.0.value: -0.1 for test.acc.std, a "
                    "negative spread")
    spec = _one_run_spec(tmp_path, paper_values=[{**pv, "value": 0.0}])
    assert _invoke("validate", spec).exit_code == 0


def test_an_ordering_of_accuracies_with_a_margin_above_1_is_refused(tmp_path):
    """`a >= b + margin` on accuracies with margin 1e300 (or 1.5) could never pass (accuracies
    lie in [0, 1]) and was accepted, while a margin that cannot fail (-1e300) was refused: both
    are refused, exit 2; a margin of 1 (a 1 beside a 0) is fine."""
    claim = {"check": "ordering", "text": "t", "a": {"label": "S6"}, "b": {"label": "S4D"},
             "match": []}
    spec = write_spec(tmp_path, claims=[{**claim, "margin": 1e300}])
    _assert_refused(_invoke("validate", spec), "claims.0.margin: 1e+300 on test.acc: no pair",
                    "cannot pass")
    spec = write_spec(tmp_path, claims=[{**claim, "margin": 1.0}])
    assert _invoke("validate", spec).exit_code == 0


def test_a_label_with_a_run_of_spaces_is_refused(tmp_path):
    """Labels 'S 6' and 'S  6' were two cells whose rows read the same in report.md (HTML shows
    a run of spaces as one space): a label has no run of spaces, exit 2 naming the plain form."""
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [
        {"label": "S 6", "set": {"model.mixer": "s6"}},
        {"label": "S  6", "set": {"model.mixer": "s4d"}}]}])
    _assert_refused(_invoke("validate", spec), "sweep.0.cases.1.label",
                    "a label has no run of spaces: 'S  6' looks like 'S 6'")


def test_an_export_without_rows_has_the_column_types_of_one_with_rows(tmp_path, monkeypatch):
    """An export of a results root without tables wrote every column untyped (object: a Parquet
    file of null columns), seed and value too, where an export with rows has int64 seeds and
    float values: files of one schema are not one schema to a reader that stacks them."""
    import pandas as pd

    from ssmrepro.plots.export import export_table

    root = _project(tmp_path, small=True)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("SSMREPRO_ROOT", str(root))
    empty = export_table(tmp_path / "empty")
    out = tmp_path / "results"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", out / "huang2025/huang2025-tab1")
    full = export_table(out)
    assert empty.empty and not full.empty
    assert empty.dtypes.to_dict() == full.dtypes.to_dict(), (empty.dtypes, full.dtypes)
    assert empty["value"].dtype == float and str(empty["seed"].dtype) == "Int64"
    assert not any(pd.api.types.is_object_dtype(t) for t in empty.dtypes), empty.dtypes


def test_a_label_that_reads_as_a_character_reference_is_shown_as_written(tmp_path):
    """A label 'a&lt;b' was written into report.md's tables as it is, and the rendered report
    showed 'a<b' (an HTML character reference), another label than the spec's. `&` is escaped
    in table cells as `|`, `*` and `<` are."""
    spec = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "a&lt;b", "set": {"model.mixer": "s6"}}]}],
        paper_values=[{"where": {"label": "a&lt;b"}, "value": 0.5}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    out = tmp_path / "o"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    report = (out / "tests/t-spec/report-smoke.md").read_text()
    assert "| a\\&lt;b | s6 |" in report and "| label=a\\&lt;b: test.acc" in report, report
    assert "| a&lt;b" not in report and "=a&lt;b" not in report, report
    import html

    from markdown_it import MarkdownIt

    from ssmrepro.report import md_cell

    md = MarkdownIt("commonmark").enable("table")
    for label in ("a&lt;b", "R&D", "&#42;"):
        out = md.render(f"| l |\n|---|\n| {md_cell(label)} |\n").replace("\n", "")
        assert f"<td>{html.escape(label, quote=False)}</td>" in out, out


def test_a_one_seed_bar_has_no_error_bar(tmp_path, monkeypatch):
    """A bar of one seed was drawn with an error bar of 0 (a cap on its top: '± 0', seeds that
    agree exactly); it has none, and a bar of two seeds keeps its ± std."""
    import matplotlib.axes

    seen = []
    real = matplotlib.axes.Axes.bar

    def spy(self, *a, **kw):
        seen.append(list(kw.get("yerr")))
        return real(self, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", spy)
    spec = _one_run_spec(
        tmp_path, seeds=[0],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16},
        profiles={"smoke": {}, "quick": {"seeds": [0, 1]}, "paper": {}})
    out = tmp_path / "o"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    assert len(seen) == 1 and math.isnan(seen[0][0]), seen
    assert _invoke("run", spec, "--out", out, "--profile", "quick").exit_code == 0
    assert len(seen) == 2 and seen[1][0] >= 0 and not math.isnan(seen[1][0]), seen


def test_a_bar_of_a_small_loss_is_not_labelled_zero(tmp_path, monkeypatch):
    """A bar's number had 2 decimals: a test loss of 0.004 was labelled '0.00' on a `bars`
    figure. Below 0.005 it has 2 significant digits, as heatmap cells."""
    import matplotlib.axes

    from ssmrepro.store import read_results

    texts = []
    real = matplotlib.axes.Axes.text
    real_note = matplotlib.axes.Axes.annotate  # a bar's number is placed in points above it

    def spy(self, x, y, s, *a, **kw):
        texts.append(s)
        return real(self, x, y, s, *a, **kw)

    def spy_note(self, text, *a, **kw):
        texts.append(text)
        return real_note(self, text, *a, **kw)

    spec = _one_run_spec(
        tmp_path, figure={"kind": "bars", "metric": "test.loss"},
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    out = tmp_path / "o"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    folder = out / "tests/t-spec"
    table = read_results(folder / "results-smoke.csv")
    table["metric.test.loss"] = 0.0042  # a fresh clone's committed table: no records
    table.to_csv(folder / "results-smoke.csv", index=False)
    shutil.rmtree(folder / "runs")
    monkeypatch.setattr(matplotlib.axes.Axes, "text", spy)
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate", spy_note)
    res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert "0.0042" in texts and "0.00" not in texts, texts


def test_a_best_of_seeds_bar_has_no_error_bar(tmp_path, monkeypatch):
    """With `reduce: max` a bar is the best seed's value, but it was drawn ± the std of all its
    seeds (the lines kind draws its band only around a mean). Only a mean has an error bar."""
    import matplotlib.axes

    seen = []
    real = matplotlib.axes.Axes.bar

    def spy(self, *a, **kw):
        seen.append(list(kw.get("yerr")))
        return real(self, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", spy)
    spec = _one_run_spec(
        tmp_path, seeds=[0, 1], aggregate={"reduce": "max", "metrics": ["test.acc"]},
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16})
    out = tmp_path / "o"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    assert len(seen) == 1 and all(math.isnan(e) for e in seen[0]), seen


@pytest.mark.parametrize("setting", ["model.d_model=1180591620717411303424",
                                     "task.vocab=1180591620717411303424",
                                     "model.d_model=4611686018427387904"])
def test_a_model_size_past_64_bits_is_a_message(tmp_path, setting):
    """`--set model.d_model=2**70` (or a vocabulary of 2**70, or d_model 2**62) ended `validate`
    and `run` in a torch traceback (TypeError 'Overflow when unpacking long long', RuntimeError
    'Storage size calculation overflowed') while the model was counted on the meta device. It
    is a message naming the sizes, exit 2."""
    spec = _one_run_spec(tmp_path)
    for cmd in (["validate"], ["run", "--out", tmp_path / "o", "--profile", "smoke"]):
        res = _invoke(*cmd, spec, "--set", setting)
        _assert_refused(res, "cannot be built: a tensor of this model would have a size past "
                        "what 64-bit integers count")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------
# round 27 O: store identity and record lifecycle


def test_an_evaluation_set_spelled_otherwise_is_one_run_id(tmp_path):
    """`train.evals: {long: {T: 16}}`, `{T: 16.0}` and `{T: '16'}` evaluate the same set (the
    task reads each as 16) but the overrides were hashed as written: three run ids, the same
    run trained three times and three rows for one cell. Each override is stored and hashed as
    its field reads it."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    spec = load_spec(_one_run_spec(tmp_path))
    ids = set()
    for t in (16, 16.0, "16"):
        runs = expand(spec, "smoke", {"train.evals": {"long": {"T": t}}})
        assert runs[0].train.evals == {"long": {"T": 16}}
        assert type(runs[0].train.evals["long"]["T"]) is int
        ids.add(runs[0].run_id)
    assert len(ids) == 1
    assert expand(spec, "smoke", {"train.evals": {"long": {"T": 12}}})[0].run_id not in ids


@pytest.mark.parametrize("edit,needle", [
    (lambda r: r.pop("history"), "a finished run without its evaluation history"),
    (lambda r: r.update(history=None), "a finished run without its evaluation history"),
    (lambda r: r.update(history=r["history"][:1]), "a history of 1 evaluations (steps 0)"),
    (lambda r: r.update(history=r["history"][1:]), "(steps 20, 40)"),
    (lambda r: r.update(history=[r["history"][0], r["history"][-1]]), "(steps 0, 40)"),
    (lambda r: r.update(history=[*r["history"][:2], dict(r["history"][1], step=30),
                                 r["history"][-1]]), "(steps 0, 20, 30, 40)"),
])
def test_a_record_with_its_history_cut_is_quarantined(trained_store, tmp_path, edit, needle):
    """A 40-step run evaluating every 20 steps records its history at steps 0, 20 and 40. A
    record without its history, or with rows cut or added, was trusted: its seed had no
    learning curve, or one ending at step 0, and the cell's curve was drawn from the other
    seeds without a word. It is quarantined, and `run` trains the run again."""
    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert [h["step"] for h in rec["history"]] == [0, 20, 40] and rec["stop_step"] == 40
    edit(rec)
    path.write_text(json.dumps(rec))
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
                  "--workers", "1", "--no-plot")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "quarantined" in said and needle in said and "trained 1 runs" in said, res.output
    assert [h["step"] for h in json.loads(path.read_text())["history"]] == [0, 20, 40]


def test_a_finished_runs_history_check_accepts_every_way_a_run_stops():
    """The evaluations train.py records: every ``eval_every`` steps from 0 and a row at the
    stop step (an early stop lands on an evaluation; a diverged run has none at its stop step
    unless it evaluated there; a run cut by its time limit before that row existed lacks it)."""
    from ssmrepro.store import history_problem

    def ok(steps, status="ok", s=None, reason="max_steps", every=4):
        rec = {"status": status, "stop_step": steps[-1] if s is None else s,
               "stop_reason": reason}
        return history_problem(steps, rec, every) is None

    assert ok([0, 4, 8]) and ok([0, 4, 6]) and ok([0]) and ok([0], s=0)
    assert ok([0, 4], "diverged", s=7) and ok([0, 4, 8], "diverged", s=8)
    assert ok([0, 4], s=6, reason="time_limit") and ok([0, 4, 6], s=6, reason="time_limit")
    assert not ok([0, 4], s=6) and not ok([0, 4, 6], "diverged", s=6)
    assert not ok([0, 8]) and not ok([4, 8]) and not ok([], s=8) and not ok([0, 4, 8, 8])
    assert not ok([0, 4], s=8.0) and ok([0, 4, 8], s=8.0)  # a stop step written 8.0
    # a record without a stop step (count_problem checks one given): not checked
    assert history_problem([0, 5], {"status": "ok", "stop_reason": "max_steps"}, 4) is None


def test_a_run_held_by_a_reused_spec_is_left_to_its_holder(tmp_path):
    """Two `run`s of specs sharing a run through `reuse` (rb reuses ra; or each the other)
    claimed it each in its own store and both trained it. A live claim on the run in a reused
    store is its holder's: this store leaves it (its own claim removed, no 'claim' event) and
    waits, naming that holder; once the claim is gone the run is this store's to claim."""
    from ssmrepro.store import Store

    ra = Store(tmp_path / "out" / "tests" / "ra")
    rb = Store(tmp_path / "out" / "tests" / "rb", reuse=[ra.root])
    assert ra.claim("r1")  # ra's `run` trains r1
    assert not rb.claim("r1")
    assert not (rb.claims / "r1.claim").exists() and rb.events() == []
    assert rb.holder("r1") == f"pid {os.getpid()} on {rb.host}, for ra"
    assert ra.claim("r2") is True and rb.holder("r3") is None and rb.claim("r3")
    ra.release("r1")
    assert rb.holder("r1") is None and rb.claim("r1")
    (ra.root / "claims").rename(ra.root / "gone")
    (ra.root / "claims").write_text("")  # a file where the folder belongs: no claim there
    assert rb.holder("r2") is None and rb.claim("r2")


def test_a_record_of_another_corpus_is_not_taken_for_this_ones(tmp_path, monkeypatch):
    """text_corpus hashes its `path` into the run id, not the corpus's bytes: with the data
    root switched ($SSMREPRO_DATA, or the file replaced at its path) `run` trained nothing and
    `verify` reported the old corpus's results as the new one's. A record whose corpus
    fingerprint is not that of the file its path names now is ignored with a warning and
    trained again, its new record replacing it (nothing is quarantined)."""
    roots = [tmp_path / "a", tmp_path / "b"]
    for i, root in enumerate(roots):
        (root / "text").mkdir(parents=True)
        (root / "text" / "c.txt").write_bytes(bytes(range(97, 97 + 4 + 4 * i)) * 300)
    spec = _one_run_spec(tmp_path, task={"name": "text_corpus", "path": "text/c.txt", "L": 8})
    args = ("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
            "--workers", "1", "--no-plot")
    said = []
    for root in (roots[0], roots[0], roots[1], roots[0]):
        monkeypatch.setenv("SSMREPRO_DATA", str(root))
        res = _invoke(*args)
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        said.append(" ".join(res.output.split()))
    assert "trained 1 runs" in said[0] and "trained 0 runs" in said[1]
    assert "it was trained on another corpus than" in said[2] and "trained 1 runs" in said[2]
    assert "trained 1 runs" in said[3]  # the record is b's now: a's corpus trains it again
    monkeypatch.setenv("SSMREPRO_DATA", str(roots[1]))
    res = _invoke("verify", spec, "--out", tmp_path / "out", "--profile", "smoke")
    assert "another corpus" in res.output, res.output
    # the results row of a's corpus does not stand in for the run either (the report counted
    # it finished and judged the claims on it, beside the warning)
    (report,) = (tmp_path / "out" / "tests" / "t-spec").glob("report*.md")
    assert "1 runs expected, 0 finished" in report.read_text()


@pytest.mark.parametrize("edit,needle", [
    (lambda h: h.pop("bins"), "is not a histogram"),
    (lambda h: h.update(before=h["before"][:10]), "before: not 50 whole counts >= 0"),
    (lambda h: h.update(before=[-5] * 50), "before: not 50 whole counts >= 0"),
    (lambda h: h.update(after=["x"] * 50), "after: not 50 whole counts >= 0"),
    (lambda h: h.update(bins=0), "has 0 bins, not the 50"),
    (lambda h: h.update(mean_after="high"), "mean_after 'high': not a number"),
    (lambda h: h.update(colour=1), "is not a histogram"),
])
def test_a_record_with_an_edited_decay_histogram_is_quarantined(tmp_path, edit, needle):
    """A run record's `analysis` was read as it stood: a decay histogram without its `bins`, with
    text counts or not a mapping raised a traceback in `plot` (KeyError, ValueError,
    TypeError), and negative or cut counts were summed into the cell (huang2025-fig1 smoke:
    the S4D cell's decay.split 0.76 instead of 0.00, its PASS turned FAIL). Such a record is
    quarantined and its run trained again, as for any edited record."""
    from test_store import record

    from ssmrepro.analysis import HIST_BINS
    from ssmrepro.store import Store

    assert HIST_BINS == 50
    hist = {"bins": 50, "before": [1] * 50, "after": [2] * 50, "mean_before": 0.4,
            "mean_after": None}
    st = Store(tmp_path)
    good = record(analysis={"decay_histogram": dict(hist)})
    st.write(good)
    assert st.read(good["run_id"]) is not None and not st.warnings
    bad = record(tag="b", analysis={"decay_histogram": dict(hist)})
    edit(bad["analysis"]["decay_histogram"])
    st.write(bad)
    assert st.read(bad["run_id"]) is None
    assert "quarantined" in st.warnings[0] and needle in st.warnings[0], st.warnings
    for other in ([1, 2], {"decay_histogram": [1, 2]}, {"other": {}}):
        rec = record(tag="b", analysis=other)
        st.write(rec)
        assert st.read(rec["run_id"]) is None and "its analysis" in st.warnings[-1]


@pytest.mark.parametrize("layers,needle", [
    ("''", "layers is empty"), ("'-'", "layers is empty"), ("[]", "layers is empty"),
    ("SSM-XX", "layers name blocks ['XX'] not in blocks ['SSM', 'TF']"),
    ("[SSM, XX]", "layers name blocks ['XX']"),
])
def test_a_cooper_hybrid_layer_pattern_its_blocks_refuse_is_a_message(tmp_path, layers, needle):
    """cooper_hybrid's `layers` naming no block or an unknown one passed the preset and raised
    the backbone's ValidationError as a traceback in `validate`; also 2 x 1,024 layers."""
    spec = _one_run_spec(tmp_path, sweep=[], model={
        "name": "cooper_hybrid", "d_model": 4, "d_state": 2, "expand": 1, "heads": 1})
    _assert_refused(_invoke("validate", spec, "--set", f"model.layers={layers}"), needle)
    _assert_refused(_invoke("validate", spec, "--set", "model.repeat=1000"),
                    "2 layers x repeat 1000 = 2,000 blocks, more than 1024")


def test_a_layer_pattern_spelled_otherwise_is_one_run_id(tmp_path):
    """'SSM-TF', 'SSM, TF', 'SSM TF' and 'SSM→TF' are one layer pattern (models.parse_layers)
    but were four run ids: the same model trained four times, four rows for one cell. A text
    pattern is kept as its names joined by '-' (the shipped specs' spelling: no run id
    changes). A list ([SSM, TF]) keeps its own id: the shipped specs use both forms."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    spec = load_spec(_one_run_spec(tmp_path, sweep=[], model={
        "name": "cooper_hybrid", "d_model": 4, "d_state": 2, "expand": 1, "heads": 1}))
    ids = set()
    for text in ("SSM-TF", "SSM, TF", "SSM TF", " SSM→TF ", "SSM--TF"):
        (r,) = expand(spec, "smoke", {"model.layers": text})
        assert r.model.layers == "SSM-TF"
        ids.add(r.run_id)
    assert len(ids) == 1
    for name in ("seq_lm",):
        seq = load_spec(_one_run_spec(tmp_path, sweep=[], model={"name": name, "d_model": 4}))
        assert expand(seq, "smoke", {"model.layers": "SSM , TF"})[0].model.layers == "SSM-TF"


def test_a_text_corpus_task_leaves_no_unclosed_file_at_exit(tmp_path):
    """The corpus file a text_corpus task keeps open (its size is checked through it) was left to
    the interpreter's shutdown: `python -X dev -m ssmrepro validate --all` (and every command that
    built such a task) ended with 'ResourceWarning: unclosed file <... tiny.txt>' on stderr."""
    import subprocess
    import sys

    (tmp_path / "c.txt").write_bytes(bytes(range(256)) * 8)
    code = ("from ssmrepro.tasks import build_task\n"
            f"build_task({{'name': 'text_corpus', 'path': {str(tmp_path / 'c.txt')!r}, 'L': 8}})\n")
    res = subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", code],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0 and "ResourceWarning" not in res.stderr, res.stderr[-2000:]


@pytest.mark.parametrize("value", ["²", "①", "1²"])
def test_a_thread_count_of_digits_int_cannot_read_names_the_variable(tmp_path, value):
    """`SSMREPRO_THREADS=²` passed the digit check (str.isdigit) and failed in int(): exit 2 with
    'invalid literal for int() with base 10', which did not say which setting was wrong."""
    res = _invoke("run", _one_run_spec(tmp_path), "--out", tmp_path / "o", "--profile", "smoke",
                  env={"SSMREPRO_THREADS": value})
    _assert_refused(res, "SSMREPRO_THREADS", "expected a whole number from 1 to 1024")
    assert "invalid literal" not in res.output and not (tmp_path / "o").exists()


@pytest.mark.parametrize("ref", ["case:²", "case:1²", "case:٣"])
def test_a_case_reference_of_non_ascii_digits_is_an_unknown_column(tmp_path, ref):
    """`hue: "case:²"` passed the digit check (str.isdigit) of a case reference and int() then
    raised: `validate` ended in a ValueError traceback; 'case:٣' (an Arabic-Indic three) was
    read as case:3. Case references are ASCII digits; anything else is an unknown column."""
    spec = write_spec(tmp_path, figures=[{"kind": "bars", "x": ref}])
    _assert_refused(_invoke("validate", spec), f"unknown column {ref!r}")


def test_a_case_reference_far_past_every_label_is_an_empty_column():
    """A panel column (`facet: "case:99999999999999"`, allowed past the labels: one panel) padded
    each label's list to i + 1 items: a MemoryError traceback in `plot` (an OverflowError past
    sys.maxsize)."""
    import pandas as pd

    from ssmrepro.report.cells import LABEL, LABEL_SEP, column

    df = pd.DataFrame({LABEL: [f"a{LABEL_SEP}b", "c"]})
    for i in (99999999999999, 10**30):
        assert list(column(df, f"case:{i}")) == ["", ""]
    assert list(column(df, "case:1")) == ["b", ""]


def _sweep_in_a_pack(tmp_path, cli_env, ignore_hup: bool = False, workers: int = 1):
    """A `run` of two long runs in a subprocess, returned once its worker is inside a pack."""
    import signal
    import subprocess
    import sys

    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store

    tmp_path.mkdir()
    path = write_spec(tmp_path, seeds=[0, 1], train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 3000, "val_size": 16,
        "test_size": 16, "eval_every": 1000, "eval_batch_size": 16})
    store = Store(tmp_path / "o" / load_spec(path).paper / load_spec(path).id)
    p = subprocess.Popen([sys.executable, "-m", "ssmrepro", "run", str(path), "--out",
                          str(tmp_path / "o"), "--no-plot", "--no-calibrate", "--pack-size", "1",
                          "--workers", str(workers)], env=cli_env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(  # as a terminal's child has it
                             signal.SIGHUP, signal.SIG_IGN if ignore_hup else signal.SIG_DFL))
    deadline = time.time() + 120
    while time.time() < deadline and not (store.claims.exists()
                                          and list(store.claims.glob("*.claim"))):
        time.sleep(0.05)
    return p, store


def test_a_hung_up_sweep_ends_as_an_interrupted_one_unless_hang_ups_are_ignored(tmp_path,
                                                                                  cli_env):
    """A SIGHUP (the terminal closed, an ssh session dropped) ended `run` at once: exit 129, no
    line, Python's 'leaked semaphore' warning. It ends as Ctrl-C and SIGTERM do (one
    'interrupted' line, exit 130, no claim left); under `nohup` (SIGHUP ignored) it runs on."""
    import signal

    p, store = _sweep_in_a_pack(tmp_path / "a", cli_env)
    p.send_signal(signal.SIGHUP)
    stdout, stderr = p.communicate(timeout=120)
    said = stdout + stderr
    assert p.returncode == 130, said
    assert "Traceback" not in said and "leaked" not in said, said
    assert said.count("interrupted") == 1 and "re-run the same command to resume" in said, said
    assert not list(store.claims.glob("*.claim"))
    p, _ = _sweep_in_a_pack(tmp_path / "b", cli_env, ignore_hup=True)
    p.send_signal(signal.SIGHUP)
    time.sleep(1.5)
    assert p.poll() is None, p.communicate()  # nohup: still training
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in stdout + stderr, stdout + stderr


@pytest.mark.parametrize("args", [["run", "--help"], ["--version"]])
def test_help_and_version_into_a_closed_pipe_exit_141(args):
    """`ssmrepro --help | head -1` (and `run --help | true`, `--version | true`) exited 1, the
    code of "some runs failed": the help's console and click's EPIPE handler end so, outside the
    commands' error boundary, where `list | head -1` exits 141."""
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write
    try:
        res = subprocess.run([sys.executable, "-m", "ssmrepro", *args], stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)
    assert res.returncode == 141 and "Traceback" not in res.stderr, res.stderr[-2000:]


def test_output_under_the_c_locale_without_utf8_coercion_is_escaped(tmp_path, cli_env):
    """`LC_ALL=C PYTHONCOERCECLOCALE=0` (or an old C library without C.UTF-8): Python writes
    ASCII with the 'surrogateescape' handler, which the escaping of characters the terminal
    lacks left alone (it changed only 'strict' streams): `show`, `list` and `verify` ended in a
    UnicodeEncodeError traceback at their first em dash."""
    import subprocess
    import sys

    spec = write_spec(tmp_path, title="Keep-n \u2014 \u0394 \u2713")
    env = {**cli_env, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env.pop("PYTHONIOENCODING", None)
    res = subprocess.run([sys.executable, "-m", "ssmrepro", "show", str(spec)],
                         capture_output=True, encoding="ascii", errors="replace", timeout=300,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "UnicodeEncodeError" not in res.stderr, res.stderr
    assert "\\u2014" in res.stdout and "\\u2713" in res.stdout, res.stdout


@pytest.mark.parametrize("umask,mode", [(0o077, 0o600), (0o002, 0o664)])
def test_written_files_take_the_umask(tmp_path, umask, mode):
    """Every atomic write (records, tables, reports, figures) set its file to 0644 whatever the
    umask: under `umask 077` the results were readable by every user; under `umask 002` (a
    group's shared results) not writable by the group. The event log was 0644 at most."""
    import subprocess
    import sys

    code = ("import sys\nfrom pathlib import Path\n"
            "from ssmrepro.util import atomic_write_text\nfrom ssmrepro.store import Store\n"
            "atomic_write_text(Path(sys.argv[1]) / 'r.md', 'x')\n"
            "Store(Path(sys.argv[1]) / 's').log('done', 'r1')\n")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=120, preexec_fn=lambda: os.umask(umask),
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    for f in (tmp_path / "r.md", tmp_path / "s" / "events.jsonl"):
        assert f.stat().st_mode & 0o777 == mode, (f, oct(f.stat().st_mode))


def test_closed_or_read_only_standard_streams(tmp_path):
    """`ssmrepro list >&-` died at import (sys.stdout is None: an AttributeError traceback, exit
    1), and a bad input with standard error closed or open only for reading (bash runs a script
    started with `2>&-` with its own file there) exited 1, its error line unwritable, not 2."""
    import subprocess
    import sys

    def run(args, close=None, read_only=None):
        def pre():
            if close is not None:
                os.close(close)
            if read_only is not None:
                fd = os.open(__file__, os.O_RDONLY)
                os.dup2(fd, read_only)
                os.close(fd)
        return subprocess.run([sys.executable, "-m", "ssmrepro", *args], capture_output=True,
                              text=True, timeout=120, preexec_fn=pre,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "SSMREPRO_ROOT": str(ROOT)})

    res = run(["list"], close=1)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    for kw in ({"close": 2}, {"read_only": 2}):
        res = run(["show", "no-such-spec"], **kw)
        assert res.returncode == 2, (kw, res.stdout[-2000:])


def test_a_second_interrupt_while_an_interrupted_command_exits_is_ignored(tmp_path):
    """Ctrl-C twice: the second, while the interrupted command's process shut down, raised
    KeyboardInterrupt in torch's finalizers, a traceback after the 'interrupted' line."""
    import subprocess
    import sys

    code = ("import atexit, os, signal\n"
            "import ssmrepro.cli.experiments as ex\n"
            "def stop(*a, **k):\n    raise KeyboardInterrupt\n"
            "ex._spec = stop  # Ctrl-C inside the command\n"
            "def second():\n    os.kill(os.getpid(), signal.SIGINT)\n"
            "atexit.register(second)  # the second Ctrl-C, during the shutdown\n"
            "from ssmrepro.cli import app\n"
            "app(['show', 'keep-nth'])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "SSMREPRO_ROOT": str(ROOT)})
    assert res.returncode == 130, res.stderr[-2000:]
    assert res.stderr.count("interrupted") == 1 and "Traceback" not in res.stderr, res.stderr


def test_a_hang_up_sent_to_every_process_of_a_sweep_leaves_no_traceback(tmp_path, cli_env):
    """A closed terminal sends SIGHUP to every process of the command: multiprocessing's
    resource tracker died of it, and the command's clean-up started a fresh one that printed a
    KeyError traceback per queue it was told to forget (after the 'interrupted' line)."""
    import signal

    p, store = _sweep_in_a_pack(tmp_path / "a", cli_env, workers=2)
    time.sleep(0.5)
    os.killpg(p.pid, signal.SIGHUP)
    stdout, stderr = p.communicate(timeout=120)
    said = stdout + stderr
    assert p.returncode == 130, said
    assert "Traceback" not in said and said.count("interrupted") == 1, said
    assert not list(store.claims.glob("*.claim"))


def test_pathfinder_metadata_files_named_by_non_ascii_digits_sort_as_names(tmp_path):
    """A metadata file named '²' (or '١٠') passed the digit check (str.isdigit) of the numeric
    sort: int() raised 'invalid literal for int()', a message naming no file, for the whole
    folder. Only ASCII digits sort as numbers; others sort after them, by name."""
    from ssmrepro.data.pathfinder import _metadata_files

    (tmp_path / "metadata").mkdir()
    for name in ("10", "2", "²", "١٠"):
        (tmp_path / "metadata" / name).write_text("")
    assert [f.name for f in _metadata_files(tmp_path)] == ["2", "10", "²", "١٠"]


@pytest.mark.parametrize("module,signame", [("ssmrepro", "SIGTERM"), ("ssmrepro", "SIGHUP"),
                                            ("ssmrepro.cli", "SIGTERM")])
def test_a_terminate_or_hang_up_while_the_command_line_loads_is_an_interrupt(module, signame):
    """`kill PID` (or a hang-up) in the first seconds of `python -m ssmrepro ...`, while torch and
    the rest load, killed it with exit 143 (129) and no line, where Ctrl-C there says 'interrupted
    — before the command started' and exits 130. `python -m ssmrepro.cli` loads in its package's
    import, before its __main__ runs: it still died so."""
    _signal_while_loading([module, "list"], signame)


def _default_hangup_and_interrupt() -> None:
    """(in the child, before exec) SIGHUP and SIGINT as a shell started from a terminal leaves
    them: a test worker (pytest-xdist) may ignore SIGINT, which its children inherit, and Python
    sets no KeyboardInterrupt handler for an ignored SIGINT (a Ctrl-C there did nothing)."""
    import signal

    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signal_while_loading(args: list[str], signame: str) -> None:
    """Send ``signame`` to `python -m ARGS` as soon as it handles SIGTERM (at once, while it
    loads): it must end with 'interrupted — before the command started' and exit 130."""
    import signal
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "SSMREPRO_ROOT": str(ROOT)},
                         preexec_fn=_default_hangup_and_interrupt)
    deadline = time.time() + 60
    while time.time() < deadline:  # until the process handles SIGTERM: at once, while loading
        with open(f"/proc/{p.pid}/status") as f:
            caught = int(next(ln for ln in f if ln.startswith("SigCgt")).split()[1], 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            break
        time.sleep(0.002)
    p.send_signal(getattr(signal, signame))
    _, err = p.communicate(timeout=120)
    # exit 130 (it died by SIGINT after the line, -2, where the Ctrl-C met code that exec ran
    # from a string: signals.interrupt_handled)
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert "before the command started" in err and "Traceback" not in err, err[-2000:]


def test_help_text_is_plain_text_not_markup_or_rst():
    """typer reads help as rich markup: `export --help` printed `pip install -e '.'` (the
    '[parquet]' eaten as a style tag, a wrong instruction); the docstrings' rST double backticks
    were printed literally (`list`: "``--profile``") and a line break inside a docstring
    paragraph stayed in the command list. One rule (cli.app.help_text) for every command."""
    wide = {"COLUMNS": "200", "TERMINAL_WIDTH": "200"}
    out = runner.invoke(app, ["export", "--help"], env=wide).output
    assert "pip install -e '.[parquet]'" in out
    for path in ([], ["list"], ["bench"], ["run"], ["data", "download"], ["verify"]):
        text = runner.invoke(app, [*path, "--help"], env=wide).output
        assert "``" not in text, path
    top = runner.invoke(app, ["--help"], env=wide).output
    line = next(x for x in top.splitlines() if " list " in x)
    assert "`ssmrepro list-models`" in line  # the whole docstring paragraph on one line


@pytest.mark.parametrize("c", [1e-100, 1e-80, 1000.0])
def test_an_analytic_point_past_float64_is_refused_not_a_fail_of_the_theory(tmp_path, c):
    """yu_thm3 at c = 1e-100 gave ratio_w = 0.0 (float64 underflow; c^3 says ~1e-300) and at
    c = 1e3 NaN: the claims FAILed with 'no positive ratio_w (diverged or zero)', exit 0, a
    verdict on Thm 3 that was the arithmetic's; at c = 1e-80 subnormal gradients gave ratio_w /
    c^3 = 1.37028 for 1.36968 without a word. Now exit 2 naming the grid point."""
    spec = yaml.safe_load((ROOT / "experiments/yu2025/yu2025-fig5.yaml").read_text())
    spec["id"] = "yu-edge"
    spec.pop("alias", None)
    spec["analytic"]["grid"] = {"c": [0.1, c], "L": [100]}
    spec["claims"] = [x for x in spec["claims"] if x["where"].get("L") == 100]
    path = tmp_path / "yu-edge.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    res = _invoke("run", path, "--out", tmp_path / "out")
    _assert_refused(res, f"c={c:g}, L=100", "under- or overflow float64")
    assert "FAIL" not in res.output


def test_a_haar_parameter_too_small_for_the_exact_integral_is_refused(tmp_path):
    """huang2025's haar_thm1 at abs_w = 1e-20 reported l2 = 0.035, sup_away = 0 (what it
    reports at 1e12: rounding of the dilogarithm difference / w made each basis function a
    step), where the truth is l2 ~ 1: the smallest |w| is now 1e-6, where it is still ~1."""
    from ssmrepro.theory import TABLES

    spec = yaml.safe_load((ROOT / "experiments/huang2025/huang2025-figA1.yaml").read_text())
    spec["id"] = "haar-edge"
    spec.pop("alias", None)
    spec["analytic"]["grid"] = {"abs_w": [1e-20, 10]}
    path = tmp_path / "haar-edge.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    _assert_refused(_invoke("validate", path), "grid.abs_w", "abs_w=1e-20")
    spec["analytic"]["grid"] = {"abs_w": [10, 100]}
    spec["figure"]["show_w"] = [-1e-20]  # panel (c) drew a perfect step at w = -1e-20
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    _assert_refused(_invoke("validate", path), "figure.show_w.0")
    row = TABLES["haar_thm1"].fn(abs_w=1e-6, j=2, k=1, n=2049)
    assert abs(row["l2"] - 1) < 1e-3 and abs(row["sup_away"] - 2) < 1e-3


@pytest.mark.parametrize("args,needle", [
    (["huang2025-tabA1-A4", "long", "{cache}", "--runs", "-1"], "--runs: -1 is not in 1.."),
    (["huang2025-tabA1-A4", "long", "{cache}", "--T", "-3"], "--T: -3 is not in 1.."),
    (["huang2025-tabA1-A4", "long", "{cache}", "--T", "3"], "n=5 does not fit"),
    (["huang2025-tabA1-A4", "long", "{cache}", "--budget", "nan"], "--budget: nan"),
    (["no-such-spec", "long", "{cache}"], "unknown experiment 'no-such-spec'"),
])
def test_planner_calibration_script_refuses_bad_input(tmp_path, args, needle):
    """scripts/planner_calibration.py (the README's calibration command): --runs -1 was an
    IndexError traceback, --T -3 a RuntimeError in the task, --T 3 (below n) unchecked (the
    override skipped validation), --budget nan accepted, an unknown spec a SpecError traceback.
    (--T without --runs was ignored without a word; it is applied now.)"""
    import subprocess
    import sys

    argv = [a.replace("{cache}", str(tmp_path / "c.json")) for a in args]
    res = subprocess.run([sys.executable, str(ROOT / "scripts/planner_calibration.py"), *argv],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and needle in res.stderr, res.stderr
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("args,needle", [
    (["--cpus", "0"], "--cpus: 0 is not in 1.."),
    (["--spec", "no-such-spec"], "unknown experiment 'no-such-spec'"),
    (["--profile", "nope"], "--profile nope: not a profile of"),
])
def test_bench_ray_script_refuses_bad_input_before_ray(tmp_path, args, needle):
    """scripts/bench_ray.py (README's Ray overhead numbers): --cpus 0, an unknown spec or
    profile, and a missing Ray were tracebacks (the profile only after Ray had started); its
    sweeps' folders were left in the temp folder and its record was not written atomically."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(ROOT / "scripts/bench_ray.py"), *args, "--out",
                          str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and needle in res.stderr, res.stderr
    assert not (tmp_path / "r.json").exists()


def test_bench_step_refuses_a_step_past_the_memory_not_only_past_one_tensor(monkeypatch):
    """`bench step` bounded each activation (2^28 floats) but not their sum: `--E 256 --batch
    8` passed and needs about 27 GB (the planner's estimate; ~16 GB measured), the allocator's
    traceback or the OOM killer on a smaller machine. Now the packs bench's estimate is checked
    against the memory available, before anything is built."""
    import ssmrepro.train as train_mod

    monkeypatch.setattr(train_mod, "available_memory", lambda device: 8 << 30)
    res = _invoke("bench", "step", "--workloads", "mamba-L256", "--E", "256", "--batch", "8")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "--E 256 at batch 8 x L 256 needs about" in res.output
    assert "only 8.6 GB is available" in res.output
    from ssmrepro.bench.step import STEP_WORKLOADS, memory_problem

    assert memory_problem(STEP_WORKLOADS["mamba-L256"], [1, 4], 64, 256, available=8 << 30) is None


def test_bench_step_records_the_installed_mambapy_version(monkeypatch):
    """`bench step`'s record named mambapy "1.2.0" whatever version was installed (a wrong
    label beside the × mambapy ratios)."""
    import sys
    import types

    from ssmrepro.bench.step import mambapy_version

    monkeypatch.setitem(sys.modules, "mambapy", None)  # not importable
    assert mambapy_version() is None
    fake = types.ModuleType("mambapy")
    fake.__version__ = "9.9.9"
    monkeypatch.setitem(sys.modules, "mambapy", fake)
    import importlib.metadata as md

    def no_dist(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "version", no_dist)
    assert mambapy_version() == "9.9.9"


def test_bench_scans_refuses_a_case_past_the_memory_not_only_past_one_tensor(monkeypatch):
    """`bench scans` bounded each tensor (2^28 floats) but not a case's sum: `--kernels diag
    --dtype float64 --L 4096 --batch 64 --d 64 --n 16` (each tensor at the bound) asked for
    ~30 GB, the OOM killer on most machines. The README's committed commands still fit 8 GB."""
    import argparse

    import ssmrepro.train as train_mod
    from ssmrepro.bench.scans import memory_problem

    monkeypatch.setattr(train_mod, "available_memory", lambda device: 8 << 30)
    res = _invoke("bench", "scans", "--kernels", "diag", "--dtype", "float64", "--L", "4096",
                  "--batch", "64", "--d", "64", "--n", "16")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "diag at L=4096 needs about 30.1 GB" in res.output
    base = dict(L=[64, 1024, 4096], kernels=["diag", "selective", "ssd"], batch=16, d=32, n=8,
                groups=1, heads=4, width=4, dtype="float32", ssd_chunk=None)
    for over in ({}, {"kernels": ["selective", "diag"], "batch": 8, "d": 128, "n": 16},
                 {"kernels": ["selective", "conv"], "L": [256], "batch": 64, "d": 128, "n": 16,
                  "groups": 4}):
        assert memory_problem(argparse.Namespace(**{**base, **over}), available=8 << 30) is None


@pytest.mark.parametrize("which", ["scans", "step"])
def test_bench_help_is_plain_text_not_rst(which):
    """`bench scans --help` and `bench step --help` print their module docstrings: rST
    (``diag``, :func:`ssmrepro.bench.timing.interleaved`, 'Examples::') was printed as written
    (util.plain_rst, which the typer commands' help_text uses too)."""
    from ssmrepro.util import plain_rst

    out = _invoke("bench", which, "--help").output
    assert "``" not in out and ":func:" not in out and "::\n" not in out, out
    assert "`ssmrepro.bench.timing.interleaved`" in out
    assert plain_rst("see :mod:`~a.b` and ``x``; Example::\n\n    run") == (
        "see `a.b` and `x`; Example:\n\n    run")


def test_bench_records_go_under_ssmrepro_out(tmp_path, monkeypatch):
    """SSMREPRO_OUT is "the default of --out" (every command's help): `bench WORKLOAD` ignored
    it and overwrote the committed results/bench records in the checkout, and `bench roofline`
    read those. Its default is now $SSMREPRO_OUT/bench."""
    import ssmrepro.bench.packs as packs_mod

    seen = {}

    def fake_run_bench(name, device, sizes, seconds, folder, echo):
        seen["folder"] = folder
        return {"best_pack": sizes[0], "best_ratio": 1.0}

    monkeypatch.setattr(packs_mod, "run_bench", fake_run_bench)
    res = _invoke("bench", "keep-nth-d8", "--packs", "1", "--device", "cpu",
                  env={"SSMREPRO_OUT": str(tmp_path / "res")})
    assert res.exit_code == 0, res.output
    assert seen["folder"] == tmp_path / "res" / "bench"
    res = _invoke("bench", "roofline", env={"SSMREPRO_OUT": str(tmp_path / "res")})
    _assert_refused(res, str(tmp_path / "res" / "bench"))


@pytest.mark.parametrize("grid", [{"c": [0.1, 0.1, 1.0], "L": [100]},
                                  {"c": [0.1, 1.0], "L": [100, 100.0]}])
def test_an_analytic_grid_point_given_twice_is_refused(tmp_path, grid):
    """An analytic grid with a value twice (`c: [0.1, 0.1]`, or `L: [100, 100.0]`, one integer)
    validated and wrote one cell as two identical rows of results.csv (a trained sweep's
    duplicate configuration is refused); now `validate` names the two points, exit 2."""
    spec = yaml.safe_load((ROOT / "experiments/yu2025/yu2025-fig5.yaml").read_text())
    spec["id"] = "yu-dup"
    spec.pop("alias", None)
    spec["analytic"]["grid"] = grid
    spec["claims"] = [x for x in spec["claims"] if x["where"].get("L") == 100]
    path = tmp_path / "yu-dup.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    _assert_refused(_invoke("validate", path), "are the same row (a value given twice)")


def test_two_spec_files_of_one_id_are_refused_by_figures_export_and_list(tmp_path):
    """experiments/huang2025/huang2025-tab1.yaml beside a copy under experiments/other/: `figures`
    rebuilt and listed whichever came last, `export` wrote the rows of both (every row twice)
    and `list` showed both, exit 0 and no word (`validate --all` and `show` refused it)."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    env = {"SSMREPRO_ROOT": str(root)}
    (root / "experiments/other").mkdir()
    shutil.copy(root / "experiments/huang2025/huang2025-tab1.yaml",
                root / "experiments/other/huang2025-tab1.yaml")
    out = tmp_path / "out"
    (out / "huang2025/huang2025-tab1").mkdir(parents=True)
    shutil.copy(ROOT / "results/huang2025/huang2025-tab1/results.csv",
                out / "huang2025/huang2025-tab1/results.csv")
    twice = "id: 'huang2025-tab1' is also the id of"
    _assert_refused(_invoke("figures", "--no-rebuild", "--out", out, env=env), twice)
    assert not (out / "README.md").exists()
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv", env=env)
    assert res.exit_code == 0 and twice in res.output, res.output
    import pandas as pd

    assert "huang2025-tab1" not in set(pd.read_csv(tmp_path / "x.csv")["experiment"])
    res = _invoke("list", "--json", "--out", out, env=env)
    rows = [r for r in json.loads(res.stdout) if r["id"] == "huang2025-tab1"]
    assert len(rows) == 2 and not any(r["valid"] for r in rows), rows
    assert twice in rows[0]["errors"][0]
    res = _invoke("validate", "--all", env=env)  # the second file's own line: not 'in case'
    _assert_refused(res, "other/huang2025-tab1.yaml: id: 'huang2025-tab1' is the id of")
    assert "differs only in case" not in res.output


def test_the_front_pages_training_time_counts_only_the_default_profiles_rows(tmp_path):
    """huang2025-tab1 made `default_profile: paper` with quick's results.csv committed: its
    report counts 0 of 15 runs finished, but the front page timed quick's rows ('5 min'), and
    its fallback showed quick's description for a paper-profile target."""
    from ssmrepro.plots.frontpage import training_time

    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    spec = root / "experiments/huang2025/huang2025-tab1.yaml"
    _edit(spec, default_profile="paper")
    out = tmp_path / "out"
    (out / "huang2025/huang2025-tab1").mkdir(parents=True)
    csv = out / "huang2025/huang2025-tab1/results.csv"
    shutil.copy(ROOT / "results/huang2025/huang2025-tab1/results.csv", csv)
    assert training_time(csv) == "5 min" and training_time(csv, "quick") == "5 min"
    assert training_time(csv, "paper") == ""
    env = {"SSMREPRO_ROOT": str(root)}
    res = _invoke("figures", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    row = next(ln for ln in (out / "README.md").read_text().splitlines()
               if ln.startswith("| huang2025-tab1 "))
    assert "paper: 0 of 15 runs finished" in row and "5 min" not in row, row
    assert "| (App. D.1 settings" in row, row


def test_figures_names_a_results_folder_of_no_spec(tmp_path):
    """results/huang2025/huang2025-old (its spec renamed or deleted) and results/zzz/x (a paper
    gone): `figures` rebuilt the rest and left their stale reports (5 PASS), off the front page,
    without a word. A folder of a spec, and one holding no output, are not named."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    out = tmp_path / "out"
    committed = ROOT / "results/huang2025/huang2025-tab1"
    for where in ("huang2025/huang2025-tab1", "huang2025/huang2025-old", "zzz/x"):
        (out / where).mkdir(parents=True)
        shutil.copy(committed / ("results.csv" if where != "zzz/x" else "report.md"), out / where)
    (out / "huang2025/empty").mkdir()
    (out / "bench").mkdir()
    (out / "bench/x.json").write_text("{}")
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    named = [ln for ln in res.output.splitlines() if "no spec of the project writes" in ln]
    assert len(named) == 2, res.output
    assert "huang2025-old" in named[0] and "zzz/x" in named[1], named


@pytest.mark.parametrize("edit,needle", [
    ({"figure": {"kind": "bars", "metric": "test.accc", "x": "label"}},
     "figure.metric: 'test.accc' is not aggregated"),
    ({"figure": {"kind": "bars", "metric": "test.acc", "x": "model.nothing"}}, "model.nothing"),
])
def test_figures_refuses_a_spec_whose_outputs_name_what_its_tables_lack(tmp_path, edit, needle):
    """huang2025-tab1 with a figure metric typo (test.accc) or an x no run has: `plot` and
    `verify` refuse it (exit 2), but `figures` rebuilt the specs before it and then ended in a
    KeyError traceback. It is refused before anything is rebuilt."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    _edit(root / "experiments/huang2025/huang2025-tab1.yaml", **edit)
    out = tmp_path / "out"
    for name in ("huang2025-fig1", "huang2025-tab1"):
        shutil.copytree(ROOT / f"results/huang2025/{name}", out / f"huang2025/{name}")
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "huang2025-tab1.yaml", needle)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_a_profile_with_no_finished_cell_loses_its_old_figure_and_summary(tmp_path):
    """huang2025-tab1 made `default_profile: paper` beside quick's committed tables (or its spec
    edited, its runs not trained yet): the report counted 0 of 15 runs finished, but the old
    figure.png and summary.csv (quick's numbers) were kept, `not drawn` said nothing of them, and
    the front page linked the figure. Both are removed, and the lines say so."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    _edit(root / "experiments/huang2025/huang2025-tab1.yaml", default_profile="paper")
    out = tmp_path / "out"
    folder = out / "huang2025/huang2025-tab1"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", folder)
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    assert "figure.png not drawn: no finished cell of profile paper to draw; the old figure.png " \
           "removed" in res.output and "summary.csv removed" in res.output, res.output
    assert not (folder / "figure.png").exists() and not (folder / "summary.csv").exists()
    assert "figure.png" not in (out / "README.md").read_text()
    assert "15 runs expected, 0 finished" in (folder / "report.md").read_text()
    _edit(root / "experiments/huang2025/huang2025-tab1.yaml", default_profile="quick")
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})  # drawn again
    assert res.exit_code == 0 and (folder / "figure.png").is_file(), res.output
    assert (folder / "summary.csv").is_file()


def test_export_names_a_results_table_of_no_profile(tmp_path):
    """huang2025-fig1 with its `long` profile removed and results-long.csv still committed:
    `export` left its rows out without a word (`figures` names its report); a note names it."""
    root = _project(tmp_path, small=True)
    spec = root / "experiments/huang2025/huang2025-fig1.yaml"
    raw = yaml.safe_load(spec.read_text())
    del raw["profiles"]["long"]
    spec.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    out = tmp_path / "out"
    shutil.copytree(ROOT / "results/huang2025/huang2025-fig1", out / "huang2025/huang2025-fig1")
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    assert "left out 1 table(s) of no profile of their spec" in res.output, res.output
    assert "huang2025/huang2025-fig1/results-long.csv" in res.output


def test_the_front_page_shows_a_default_long_profiles_verdicts_once(tmp_path):
    """huang2025-fig1 with `default_profile: long`: its row read '5 PASS, 1 FAIL, ...; long: 5
    PASS, 1 FAIL, ...', the default profile's verdicts twice, as if a second profile's."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    _edit(root / "experiments/huang2025/huang2025-fig1.yaml", default_profile="long")
    out = tmp_path / "out"
    folder, committed = out / "huang2025/huang2025-fig1", ROOT / "results/huang2025/huang2025-fig1"
    folder.mkdir(parents=True)
    shutil.copy(committed / "results-long.csv", folder / "results.csv")
    shutil.copy(committed / "report-long.md", folder / "report.md")
    res = _invoke("figures", "--no-rebuild", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    row = next(ln for ln in (out / "README.md").read_text().splitlines()
               if ln.startswith("| huang2025-fig1 "))
    assert "; long:" not in row and "| long results | 5 PASS, 1 FAIL," in row, row


@pytest.mark.parametrize("text,needle", [
    ("papers: {p: \"One\\n# Two\"}\ntargets: []\n", "papers.p: expected a title of one line"),
    ("papers: {}\ntargets: [{id: 'x|y', paper: p, tier: 1}]\n", "targets.0.id: 'x|y' is not a name"),
    ("papers: {}\ntargets: [{id: x, alias: \"a\\nb\", paper: p, tier: 1}]\n",
     "targets.0.alias: 'a\\nb' is not a name"),
    ("papers: {}\ntargets: [{id: x, alias: 7, paper: p, tier: 1}]\n", "targets.0.alias: 7"),
    ("papers: {}\ntargets: [{id: x, paper: 'p q', tier: 1}]\n", "targets.0.paper: 'p q'"),
])
def test_a_catalogue_text_that_would_break_the_front_page_is_refused(tmp_path, text, needle):
    """A catalogue row (a target without a spec) is written into the front page as it is: an id
    'x|y' split its table row, an alias with a line break cut it in two, and a paper title of two
    lines put a heading of its own on the page; exit 0, no word."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text(text)
    (tmp_path / "out").mkdir()
    res = _invoke("figures", "--no-rebuild", "--out", tmp_path / "out",
                  env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "catalogue.yaml", needle)
    assert not (tmp_path / "out/README.md").exists()


def test_the_front_page_calls_quick_results_beside_another_default_not_smoke(tmp_path):
    """huang2025-tab1 with `default_profile: paper` and only results-quick.csv committed: the
    front page said 'smoke' (smoke-profile results only)."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    _edit(root / "experiments/huang2025/huang2025-tab1.yaml", default_profile="paper")
    out = tmp_path / "out"
    folder = out / "huang2025/huang2025-tab1"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results/huang2025/huang2025-tab1/results.csv", folder / "results-quick.csv")
    res = _invoke("figures", "--no-rebuild", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    row = next(ln for ln in (out / "README.md").read_text().splitlines()
               if ln.startswith("| huang2025-tab1 "))
    assert "| quick results |" in row, row
    (folder / "results-quick.csv").rename(folder / "results-smoke.csv")
    res = _invoke("figures", "--no-rebuild", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    row = next(ln for ln in (out / "README.md").read_text().splitlines()
               if ln.startswith("| huang2025-tab1 "))
    assert "| smoke |" in row, row


@pytest.mark.parametrize("cmd", [["figures", "--no-rebuild"], ["export", "--file", "x.csv"],
                                 ["list"]])
@pytest.mark.parametrize("where,needle", [
    ("huang2025", "it is the paper folder of huang2025-"),
    ("huang2025/huang2025-tab1", "it holds a results table or report"),
])
def test_a_results_root_given_one_level_too_deep_is_refused(tmp_path, cmd, where, needle):
    """`figures --out results/huang2025` (a paper folder, or a spec's own folder) wrote a front
    page of '3 spec only' there, `export` wrote 0 rows and `list` showed 0 runs done, exit 0."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    out = tmp_path / "results"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", out / "huang2025/huang2025-tab1")
    args = [a if a != "x.csv" else tmp_path / "x.csv" for a in cmd]
    res = _invoke(*args, "--out", out / where, env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, needle)
    assert not (out / where / "README.md").exists() and not (tmp_path / "x.csv").exists()
    assert _invoke(*args, "--out", out, env={"SSMREPRO_ROOT": str(root)}).exit_code == 0


def test_the_front_page_reads_the_verdicts_of_a_report_with_windows_line_ends(tmp_path):
    """A report.md checked out with '\\r\\n' line ends (git's autocrlf on Windows; the project has
    no .gitattributes): `figures --no-rebuild` showed no verdicts ('—') for it, without a word."""
    from ssmrepro.plots import frontpage

    report = tmp_path / "report.md"
    text = (ROOT / "results/huang2025/huang2025-tab1/report.md").read_text()
    report.write_bytes(text.replace("\n", "\r\n").encode())
    assert frontpage._verdicts(report) == "5 PASS, 0 FAIL, 0 MISSING, 0 UNTESTED"


def test_figures_names_an_image_that_no_figure_of_the_spec_draws(tmp_path):
    """huang2025-tab1's figure renamed (figure.png -> figure-acc.png): `figures` drew the new one
    and kept the old figure.png beside it, off the front page, without a word. A `--set`
    figure (-set-<hash>) is not named."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    spec = root / "experiments/huang2025/huang2025-tab1.yaml"
    raw = yaml.safe_load(spec.read_text())
    _edit(spec, figure={**raw["figure"], "name": "figure-acc"})
    out = tmp_path / "out"
    folder = out / "huang2025/huang2025-tab1"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", folder)
    shutil.copy(folder / "figure.png", folder / "figure-set-0a1b2c.png")
    res = _invoke("figures", "--out", out, env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    assert (folder / "figure-acc.png").is_file()
    named = [ln for ln in res.output.splitlines() if "is drawn by no figure of the spec" in ln]
    assert len(named) == 1 and "huang2025-tab1: figure.png " in named[0], res.output


def test_the_narrow_scan_leaves_a_batch_one_width_one_state_one_A_alone():
    """Batch 1, one channel per group and d_state 1 (an S6 pack of width-1, N = 1 members): the
    narrow kernel's per-tile copy of A was A's own memory (an expand of size-1 dims is already
    contiguous) and was scaled in place by log2(e): the caller's A changed, and dL/dΔ (read
    from the saved A) was off by up to 2 in float64."""
    import torch

    from ssmrepro.kernels.inplace import scan_plan, selective_scan_fused
    from ssmrepro.kernels.scan import selective_scan_ref

    g = torch.Generator().manual_seed(0)
    Bt, L, G, K, N = 1, 9, 3, 1, 1
    ins = [torch.randn(Bt, L, G * K, generator=g, dtype=torch.float64),
           torch.rand(Bt, L, G * K, generator=g, dtype=torch.float64),
           -torch.rand(G * K, N, generator=g, dtype=torch.float64) - 0.1,
           torch.randn(Bt, L, G, N, generator=g, dtype=torch.float64),
           torch.randn(Bt, L, G, N, generator=g, dtype=torch.float64)]
    assert scan_plan(Bt, G, K, N, L=L).narrow
    A0 = ins[2].clone()
    selective_scan_fused(*ins)
    assert torch.equal(ins[2], A0)
    res = []
    for fn in (selective_scan_fused, selective_scan_ref):
        xs = [t.clone().requires_grad_(True) for t in ins]
        y = fn(*xs)
        y.backward(torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y))
        res.append([y.detach()] + [t.grad for t in xs])
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_the_zoh_input_coefficient_keeps_its_digits_at_small_steps():
    """ZOH's B̄ = (exp(ΔA) - 1)/A · B was formed as exp(ΔA) - 1: in float32 every digit of ΔA
    below ~1e-7 cancelled (s4d_zoh with dt 1e-8: output 12% off its float64 value, B̄ 100%;
    the b2s6 scan's ZOH coefficient likewise). Float32 results must match float64 ones."""
    import torch

    from ssmrepro.kernels.b2s6_scan import b2s6_scan
    from ssmrepro.models.layers import reset_members
    from ssmrepro.models.mixers.base import build_mixer, parse_mixer

    cfg = parse_mixer({"name": "s4d_zoh", "d_state": 4, "dt_min": 1e-8, "dt_max": 1e-7,
                       "skip": False})
    m32 = build_mixer(cfg, 1, 3)
    reset_members(m32, [3])
    m64 = build_mixer(cfg, 1, 3).double()
    m64.load_state_dict({k: v.double() for k, v in m32.state_dict().items()})
    x = torch.randn(1, 2, 16, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y64 = m64(x)
    for y in (m32(x.float()), m32.forward_ref(x.float())):
        assert ((y.double() - y64).abs().max() / y64.abs().max()).item() < 1e-5

    g = torch.Generator().manual_seed(1)
    Bt, L, G, K, N = 2, 7, 2, 2, 3
    u = torch.randn(Bt, L, G, K, generator=g, dtype=torch.float64)
    dl = 1e-7 * (1 + torch.rand(Bt, L, G, K, generator=g, dtype=torch.float64))
    re = -0.5 - torch.rand(G, N, generator=g, dtype=torch.float64)
    for A in (re, torch.complex(re, torch.pi * torch.arange(N, dtype=torch.float64).expand(G, N))):
        Bs, Bb = torch.randn(Bt, L, G, N, generator=g), torch.randn(G, K, N, generator=g)
        C = torch.randn(Bt, L, G, N, generator=g)
        y64 = b2s6_scan(u, dl, A, Bs.double(), Bb.double(), C.double(), "zoh")
        y32 = b2s6_scan(u.float(), dl.float(), A.to(torch.complex64 if A.is_complex() else
                                                     torch.float32), Bs, Bb, C, "zoh")
        assert ((y32.double() - y64).abs().max() / y64.abs().max()).item() < 1e-5


def test_a_decay_histogram_of_a_complex_A_model_bins_the_decay_modulus():
    """`analysis: [decay_histogram]` on an S6 core with `complex_A: true` (or s4d, delta_t,
    mamba1): the hook's exp(ΔΛ) is complex and was cast to real, so the histogram binned
    e^{ΔReΛ} cos(ΔImΛ) and dropped the negative values from its [0, 1] bins without a word."""
    import torch

    from ssmrepro.analysis import decay_histogram
    from ssmrepro.models import build_model
    from ssmrepro.models.backbone import SeqLMConfig
    from ssmrepro.tasks import build_task

    task = build_task({"name": "keep_nth", "n": 2, "T": 8, "vocab": 8})
    cfg = SeqLMConfig.model_validate({
        "d_model": 4, "layers": "SSM", "pos": "index",
        "blocks": {"SSM": {"mixer": {"name": "s6", "d_state": 8, "complex_A": True,
                                     "A_init": "s4d_lin", "dt_min": 0.5, "dt_max": 1.0}}}})
    model = build_model(cfg, task.info, 1, seeds=[0])
    hist = decay_histogram(model, task, torch.tensor([0]))[0]
    total = sum(hist["before"]) + sum(hist["after"])
    assert total == 500 * 8 * 4 * 8  # every (sample, t, channel, state) in a [0, 1] bin
    assert 0 < hist["mean_before"] <= 1 and 0 < hist["mean_after"] <= 1


def test_a_decay_histogram_of_a_mamba1_block_with_a_b2s6_core_is_refused_before_training(tmp_path):
    """A Mamba-1 block always claimed a decay hook; with `core: b2s6` (no Λ·Δ decay) `validate`
    passed `analysis: [decay_histogram]` and every pack failed after training with 'core
    B2S6Core has no decay analysis'. Its S6 core keeps the hook."""
    mixer = {"name": "mamba1", "core": "b2s6", "blocks": 2, "d_state": 2}
    model = {"name": "seq_lm", "d_model": 4, "layers": "SSM", "pos": "index",
             "blocks": {"SSM": {"mixer": mixer}}}
    spec = write_spec(tmp_path, analysis=["decay_histogram"], model=model,
                      sweep=[{"cases": [{"label": "A", "set": {"model.d_model": 4}}]}])
    _assert_refused(_invoke("validate", spec), "analysis: decay_histogram needs a mixer with a "
                    "decay hook")
    model["blocks"]["SSM"]["mixer"] = {"name": "mamba1", "d_state": 2}
    ok = write_spec(tmp_path, name="ok", analysis=["decay_histogram"], model=model,
                    sweep=[{"cases": [{"label": "A", "set": {"model.d_model": 4}}]}])
    assert _invoke("validate", ok).exit_code == 0


def test_a_mamba2_dt_range_below_the_init_floor_is_refused(tmp_path):
    """mamba2 / mamba2_3conv with `dt_max` below the Δ init floor 1e-4 (`dt_min: 1e-6, dt_max:
    1e-5`): every initial Δ was the floor whatever the range (two such ranges trained one model
    under two run ids), as S6's already refused; mamba2_3conv also took reversed A / Δ ranges
    in the spec and failed only when the pack was built."""
    from ssmrepro.models.mixers.base import parse_mixer

    for name in ("mamba2", "mamba2_3conv"):
        for bad, needle in [({"dt_min": 1e-6, "dt_max": 1e-5}, "below the Δ init floor"),
                            ({"dt_min": 0.1, "dt_max": 0.01}, "dt_min 0.1 is above dt_max"),
                            ({"A_min": 16, "A_max": 1}, "A_min 16.0 is above A_max")]:
            with pytest.raises(ValueError, match=needle):
                parse_mixer({"name": name, **bad})
        parse_mixer({"name": name, "dt_min": 1e-4, "dt_max": 1e-4})


def test_the_parameter_count_of_figure_checks_is_the_records_trainable_count():
    """A bands figure over n_params checks before training which cells share a spot, with the
    count of every parameter; the records count the trainable ones: mamba2 cells with the
    frozen all-ones conv (`conv_init: all_ones`) at `d_conv` 2 and 4 looked apart and were
    drawn on one spot (one hid the other), or cells apart were refused as one spot."""
    from types import SimpleNamespace

    from ssmrepro.models import build_model, count_params
    from ssmrepro.models.backbone import SeqLMConfig
    from ssmrepro.plots.outputs import _param_counts
    from ssmrepro.tasks import TASKS, build_task

    task = TASKS["keep_nth"].Config(n=2, T=8, vocab=8)
    info = build_task(task).info
    runs, records = [], []
    for width in (2, 4):
        mixer = {"name": "mamba2", "d_state": 4, "d_conv": width, "conv_init": "all_ones"}
        cfg = SeqLMConfig.model_validate({"d_model": 4, "layers": "SSM",
                                          "blocks": {"SSM": {"mixer": mixer}}})
        runs.append(SimpleNamespace(model=cfg, task=task))
        records.append(count_params(build_model(cfg, info, 1, seeds=[0]), 1))
    assert records[0] == records[1]
    assert _param_counts(runs) == records


def test_a_generated_pathfinder_png_folder_cut_short_is_not_present(tmp_path):
    """`data generate pathfinder --format lra` killed after its first thousand images left
    metadata/0.npy and no meta.json (the generator writes it last): `data info` said 'yes' and
    a run trained on those images as the whole dataset. A generated folder without meta.json
    is not present, in either layout; the finished one is."""

    from ssmrepro.data import load_lra
    from ssmrepro.data.sources import DataUnavailable

    d = tmp_path / "generated/pathfinder32/curv_contour_length_14"  # the generator's layout
    _ten_pathfinder_images(d)
    (d / "meta.json").write_text('{"format": "lra", "n": 10}')
    assert len(load_lra("pathfinder", "train", root=tmp_path, cache=False)) > 0
    (d / "meta.json").unlink()
    with pytest.raises(DataUnavailable, match="none of the accepted sources"):
        load_lra("pathfinder", "train", root=tmp_path, cache=False)
    res = _invoke("data", "info", "--dir", tmp_path)
    row = next(line for line in res.output.splitlines() if "generated" in line
               and "pathfinder " in line)
    assert " no " in row, res.output


def test_a_tar_cut_between_members_or_with_a_damaged_header_is_not_installed(tmp_path):
    """tarfile ends an archive's members quietly at a damaged header (a flipped byte) or at the
    end of the data between two members: `data download cifar10 --url file://...` of a tar cut
    there extracted its first batches and said 'installed', exit 0, the rest missing without a
    word. It is now a damaged archive, and nothing is moved into place."""
    import io
    import tarfile

    from ssmrepro.data.download import BadArchive, install_cifar10

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("data_batch_1", "data_batch_2", "test_batch"):
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = 1000
            tar.addfile(info, io.BytesIO(bytes(1000)))
    whole = buf.getvalue()  # each member: a 512-byte header and 1024 bytes of data
    flipped = bytearray(whole)
    flipped[2 * 1536 + 100:2 * 1536 + 104] = b"oops"  # the third member's header
    for name, data, said in (("cut.tar", whole[:2 * 1536], "empty header"),
                             ("flipped.tar", bytes(flipped), "bad checksum")):
        archive = tmp_path / name
        archive.write_bytes(data)
        with pytest.raises(BadArchive, match=re.escape(f"end-of-archive marker ({said}, "
                                                        "after 2 member(s))")):
            install_cifar10(archive, tmp_path / "root", progress=False)
        assert not (tmp_path / "root/cifar-10-batches-py").exists()
    (tmp_path / "whole.tar").write_bytes(whole)
    install_cifar10(tmp_path / "whole.tar", tmp_path / "root", progress=False)
    assert len(list((tmp_path / "root/cifar-10-batches-py").iterdir())) == 3


def test_two_data_generates_into_one_folder_do_not_mix(tmp_path, monkeypatch):
    """Two `data generate listops` of one data root at once (other seeds): both passed the
    'empty folder' check, both wrote their TSVs into the one folder and said 'wrote', the splits
    of the two mixed. Each now builds its folder beside the target: the first to finish renames
    it into place, the other stops (exit 1) saying so, and the folder holds one dataset."""
    import ssmrepro.data.listops as lo

    out, real = tmp_path / "listops", lo.generate_listops
    args = ("--n", "3", "--min-length", "1", "--max-length", "40", "--out", out)

    def other_finishes_meanwhile(*a, **kw):  # the other generate, seed 7, ends first
        monkeypatch.setattr(lo, "generate_listops", real)
        assert _invoke("data", "generate", "listops", "--seed", "7", *args).exit_code == 0
        return real(*a, **kw)

    monkeypatch.setattr(lo, "generate_listops", other_finishes_meanwhile)
    res = _invoke("data", "generate", "listops", "--seed", "8", *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"{out} was written by another `data generate` while this one ran" in said, said
    assert '"seed": 7' in (out / "meta.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["listops"]


def _listops_one_run(tmp_path, monkeypatch):
    """(a copy of the LRA fixture set as $SSMREPRO_DATA, a one-run ListOps spec on it)."""
    data = _lra_copy(tmp_path)
    monkeypatch.setenv("SSMREPRO_DATA", str(data))
    spec = _one_run_spec(tmp_path, task={"name": "lra_listops"},
                         model={"name": "seq_lm", "d_model": 8, "layers": ["SSM"],
                                "head": "mean_pool",
                                "blocks": {"SSM": {"mixer": {"name": "s4d_zoh", "d_state": 4}}}},
                         sweep=[], train={"optimizer": "adam", "lr": 0.01, "batch_size": 4,
                                          "train_size": 7, "epochs": 1, "val_size": 3,
                                          "test_size": 3, "eval_every": 2, "eval_batch_size": 4})
    return data, spec


def test_a_record_of_other_lra_data_is_not_taken_for_this_ones(tmp_path, monkeypatch):
    """An LRA task's source is part of the run id, its files are not: ListOps generated again
    (another seed or size) or the release installed again under the same data root, and `run`
    said '1 already done', trained nothing, and the table kept the old data's numbers as the new
    one's. A record whose data (its cache entry, `data.cache_key`) are not the data the source
    holds now is ignored with a warning and trained again; the same data stay done."""
    from ssmrepro.tasks.lra import clear_cache

    data, spec = _listops_one_run(tmp_path, monkeypatch)
    args = ("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-calibrate",
            "--workers", "1", "--no-plot")
    said = []
    for step in range(3):
        if step == 2:  # the training split of other data (its rows in another order)
            tsv = data / "lra/listops-1000/basic_train.tsv"
            head, *rows = tsv.read_text().splitlines()
            tsv.write_text("\n".join([head, *reversed(rows)]) + "\n")
            clear_cache()
        res = _invoke(*args)
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        said.append(" ".join(res.output.split()))
    assert "trained 1 runs" in said[0] and "trained 0 runs" in said[1], said
    assert "the listops data (lra_release) it was trained on are not the files" in said[2], said[2]
    assert "trained 1 runs" in said[2], said[2]


def test_a_cache_entry_whose_meta_json_was_edited_is_rebuilt(tmp_path):
    """A prepared-data cache entry whose meta.json was edited by hand (ListOps' vocabulary of 17
    grown to 117: still ids within it, still the shapes written) was served as the prepared
    data's, and a model built with 117 embeddings. meta.json keeps a digest of itself: an edit
    rebuilds the entry with a warning."""
    import json

    from ssmrepro.data import load_lra

    data = _lra_copy(tmp_path)
    ds = load_lra("listops", "train", root=data)
    meta_file = ds.cache_path / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["vocab"] += [f"x{i}" for i in range(100)]
    meta_file.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="meta.json was changed after the entry was written"):
        ds = load_lra("listops", "train", root=data)
    assert ds.vocab_size == 17
    assert load_lra("listops", "train", root=data).vocab_size == 17  # rebuilt, read silently


def test_an_lra_install_meeting_one_folder_already_there_installs_none(tmp_path):
    """`data download lra` with <root>/lra/tsv_data already there (no --force) moved
    listops-1000 into place, then stopped naming tsv_data only: half installed, and the same
    command then failed on listops-1000. Every folder is checked before any is moved."""
    import tarfile

    from ssmrepro.data.download import DownloadError, install_lra

    src = tmp_path / "src/lra_release"
    for name in ("listops-1000", "tsv_data"):
        (src / name).mkdir(parents=True)
        (src / name / "f.tsv").write_text("x\n")
    archive = tmp_path / "lra_release.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="lra_release")
    (tmp_path / "root/lra/tsv_data").mkdir(parents=True)
    with pytest.raises(DownloadError, match="tsv_data already exists"):
        install_lra(archive, tmp_path / "root", progress=False)
    assert sorted(p.name for p in (tmp_path / "root/lra").iterdir()) == ["tsv_data"]
    installed = install_lra(archive, tmp_path / "root", force=True, progress=False)
    assert [p.name for p in installed] == ["listops-1000", "tsv_data"]
    assert (tmp_path / "root/lra/tsv_data/f.tsv").is_file()


def test_two_downloads_of_one_archive_at_once_do_not_share_its_part_file(tmp_path):
    """Two `data download cifar10 --url ...` into one data root at once appended to one .part
    file: both failed with 'got 198,240,256 of 150,005,760 bytes ... re-run to resume', the part
    file the two interleaved. A download holds a lock on its archive: the second is refused
    at once, naming the other, and downloads once the first is done."""
    from ssmrepro.data.download import DownloadError, _hold, download_file

    src = tmp_path / "a.tar"
    src.write_bytes(b"x" * 5000)
    dest = tmp_path / "root/downloads/a.tar"
    dest.parent.mkdir(parents=True)
    held = _hold(dest)  # the first download, still running
    try:
        with pytest.raises(DownloadError, match="another `data download` is downloading a.tar"):
            download_file(src.as_uri(), dest, progress=False)
        assert not dest.exists() and not dest.with_name("a.tar.part").exists()
    finally:
        os.close(held)
    assert download_file(src.as_uri(), dest, progress=False).read_bytes() == b"x" * 5000


def test_generated_data_in_the_release_folders_is_not_the_release(tmp_path):
    """`data generate listops --out <root>/lra/listops-1000` (or Pathfinder into
    lra/pathfinder32/...): the generated data were read, and recorded, as source lra_release,
    the official release's. A release folder holding a meta.json (the release has none, the
    generators write one) is not the release: not present, and the message says why."""

    from ssmrepro.data import load_lra
    from ssmrepro.data.datasets import available_sources
    from ssmrepro.data.sources import DataUnavailable

    out = tmp_path / "lra/listops-1000"
    res = _invoke("data", "generate", "listops", "--n", "9", "--n-val", "3", "--n-test", "3",
                  "--min-length", "1", "--max-length", "40", "--out", out)
    assert res.exit_code == 0, res.output
    d = tmp_path / "lra/pathfinder32/curv_contour_length_14"  # the generator's PNG layout
    _ten_pathfinder_images(d)
    (d / "meta.json").write_text('{"generator": "ssmrepro.data.pathfinder", "n": 10}')
    for dataset, folder in (("listops", out), ("pathfinder", d)):
        with pytest.raises(DataUnavailable, match=re.escape(f"{folder} holds a meta.json: data "
                                                            "made by `ssmrepro data generate`")):
            load_lra(dataset, "train", root=tmp_path, accept_sources=["lra_release"])
    assert not any(r["present"] for r in available_sources(tmp_path)
                   if r["source"] == "lra_release")
    (d / "meta.json").unlink()  # the release's own layout
    assert load_lra("pathfinder", "train", root=tmp_path, cache=False).source == "lra_release"


def test_data_generate_into_an_empty_mount_point_builds_on_its_disk(tmp_path, monkeypatch):
    """`data generate ... --out /mnt/disk` (an empty folder that is a mount point): built beside
    it, the data went to the parent's disk and the rename across file systems failed after all
    the work. A target on another file system than its parent is built inside it, and its
    entries moved out at the end (meta.json last)."""
    import types

    import ssmrepro.cli.data as data_cli

    out = tmp_path / "disk"
    out.mkdir()

    class _OtherDisk:  # `out` is on another device than its parent
        def __getattr__(self, name):
            return getattr(os, name)

        def stat(self, path, *a, **kw):
            st = os.stat(path, *a, **kw)
            return types.SimpleNamespace(st_dev=st.st_dev + (Path(path) == out))

    monkeypatch.setattr(data_cli, "os", _OtherDisk())
    seen = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (seen.append((Path(a), Path(b))),
                                                     real_replace(a, b))[1])
    res = _invoke("data", "generate", "listops", "--n", "9", "--min-length", "1",
                  "--max-length", "40", "--out", out)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["basic_test.tsv", "basic_train.tsv",
                                                     "basic_val.tsv", "meta.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk"]
    moved = [b for a, b in seen if a.parent.parent == out and b.parent == out]  # out of the
    # scratch folder inside
    assert moved[-1] == out / "meta.json" and len(moved) == 4, seen


def test_a_results_table_cut_short_merged_with_conflicts_or_without_status_is_refused(tmp_path):
    """A results.csv cut off mid-row, or holding a git merge's conflict markers ('<<<<<<< HEAD',
    '=======', '>>>>>>> b'), was read with the missing fields empty, without a word (a number cut
    mid-digits stood); one whose status column was deleted was an IndexingError traceback in
    `verify`."""
    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    folder.mkdir(parents=True)
    text = (ROOT / "results/huang2025/huang2025-tab1/results.csv").read_text()
    lines = text.splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    at = header.index("status")
    no_status = "".join(",".join(f for i, f in enumerate(ln.rstrip("\n").split(",")) if i != at)
                        + "\n" for ln in lines)  # (no quoted field holds a comma before it)
    damaged = {
        "line 16 has 17 of the header's": text[:-300],
        "line 6 has 1 of the header's": "".join(lines[:5] + ["<<<<<<< HEAD\n"] + lines[5:7]
                                                 + ["=======\n"] + lines[7:9]
                                                 + [">>>>>>> b\n"] + lines[9:]),
        "(no column status)": no_status,
    }
    for needle, body in damaged.items():
        (folder / "results.csv").write_text(body)
        res = _invoke("verify", "huang2025-tab1", "--out", tmp_path / "out",
                      env={"SSMREPRO_ROOT": str(root)})
        _assert_refused(res, "results.csv: ", needle)
    (folder / "results.csv").write_bytes(text.replace("\n", "\r\n").encode())  # Excel's, fine
    res = _invoke("verify", "huang2025-tab1", "--out", tmp_path / "out",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0 and "5 PASS" in res.output, res.output


def test_a_row_of_another_profile_in_a_profiles_table_is_named_and_not_exported(tmp_path):
    """A row of quick's results.csv whose profile says smoke (pasted from smoke's table, edited
    by hand): `verify` left it out without a word (its claim MISSING) while `export` exported it
    as a quick row."""
    import pandas as pd

    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    folder.mkdir(parents=True)
    lines = (ROOT / "results/huang2025/huang2025-tab1/results.csv").read_text().splitlines(True)
    assert ",quick,Mamba+PE,0," in lines[1]
    (folder / "results.csv").write_text("".join([lines[0], lines[1].replace(",quick,", ",smoke,")]
                                                + lines[2:]))
    env = {"SSMREPRO_ROOT": str(root)}
    needle = "results.csv: 1 row(s) of profile 'smoke', not 'quick', are not used"
    res = _invoke("verify", "huang2025-tab1", "--out", tmp_path / "out", env=env)
    assert res.exit_code == 0 and needle in res.output, res.output
    res = _invoke("export", "--out", tmp_path / "out", "--file", tmp_path / "x.csv", env=env)
    # export reads results.csv for smoke too (its table's name before a change of the default
    # profile), and names the row there: its config is not smoke's
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and f"row of run {lines[1].split(',')[0]}" in said, res.output
    assert "the row is not used" in said, res.output
    runs = set(pd.read_csv(tmp_path / "x.csv", dtype=str)["run_id"])
    assert len(runs) == 14 and lines[1].split(",")[0] not in runs, runs


def test_text_in_a_results_tables_count_or_a_true_metric_is_refused(tmp_path):
    """'abc' typed over a run's stop_step in results.csv was a ValueError traceback in `verify`;
    a test.acc column of 'True' (a spreadsheet's truth values) was read as numbers, 1.0, and
    judged (two 'fails' claims FAILed)."""
    for col, value, rows_edited in (("stop_step", "abc", 1), ("metric.test.acc", "True", None)):
        res = _verify_tab1_edited(tmp_path, col, value, rows_edited)
        _assert_refused(res, f"results.csv: column '{col}' holds text where numbers belong")


def _verify_tab1_edited(tmp_path, col: str, value: str, n_rows: int | None = 1):
    """`verify huang2025-tab1` of its committed results.csv with ``col`` of the first ``n_rows``
    rows (None: every row) set to ``value``, in a small project under ``tmp_path``."""
    import csv
    import io

    root = tmp_path / "proj"
    if not root.exists():
        _project(tmp_path, small=True)
        (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    folder.mkdir(parents=True, exist_ok=True)
    rows = list(csv.reader(io.StringIO(
        (ROOT / "results/huang2025/huang2025-tab1/results.csv").read_text())))
    edited = [list(r) for r in rows]
    for r in edited[1:(len(rows) if n_rows is None else n_rows + 1)]:
        r[rows[0].index(col)] = value
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(edited)
    (folder / "results.csv").write_text(text.getvalue())
    return _invoke("verify", "huang2025-tab1", "--out", tmp_path / "out",
                   env={"SSMREPRO_ROOT": str(root)})


def test_a_curves_table_whose_labels_were_swapped_is_not_drawn_under_them(tmp_path):
    """curves.csv with the labels of two cells' rows swapped (a hand edit, a bad merge): each
    run's learning curve was drawn under the other's label, without a word (results.csv's rows
    were already checked against the labels of their runs)."""
    import pandas as pd

    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", folder)
    curves = pd.read_csv(folder / "curves.csv", dtype={"run_id": str})
    mamba, s4d = curves["label"] == "Mamba", curves["label"] == "S4D"
    curves.loc[mamba, "label"], curves.loc[s4d, "label"] = "S4D", "Mamba"
    curves.to_csv(folder / "curves.csv", index=False)
    res = _invoke("verify", "huang2025-tab1", "--out", tmp_path / "out",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    assert res.output.count("has label='S4D' (the run's is 'Mamba')") == 3, res.output
    assert res.output.count("has label='Mamba' (the run's is 'S4D')") == 3, res.output


def test_the_front_page_names_a_damaged_table_whose_training_time_it_leaves_out(tmp_path):
    """results.csv holding a git merge's conflict markers: `figures --no-rebuild` put the spec's
    description in place of its training time, exit 0, without a word."""
    import contextlib
    import io

    from ssmrepro.plots.frontpage import training_time

    lines = (ROOT / "results/huang2025/huang2025-tab1/results.csv").read_text().splitlines(True)
    csv = tmp_path / "results.csv"
    csv.write_text("".join(lines[:5] + ["<<<<<<< HEAD\n"] + lines[5:]))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert training_time(csv, "quick") == ""
    assert "results.csv: line 6 has 1 of the header's" in err.getvalue(), err.getvalue()
    assert "its training time is not shown" in err.getvalue(), err.getvalue()




def test_one_config_set_as_an_int_or_a_float_has_one_output_tag(tmp_path):
    """`--set train.lr=1` and `--set train.lr=1.0` (or 1e0) are one config (one set of run ids),
    but the -set- tag hashed the values as typed on the command line: two report-…-set-….md,
    figures and tables of the same runs side by side. A different value keeps its own tag."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand, overrides_tag, parse_overrides

    spec = load_spec(write_spec(tmp_path, seeds=[0]))

    def tag(*items):
        ov = parse_overrides(list(items))
        return overrides_tag(ov, expand(spec, "smoke", overrides=ov))

    assert tag("train.lr=1") == tag("train.lr=1.0") == tag("train.lr=1e0")
    assert tag("model.d_model=16") == tag("model.d_model=16.0") != tag("model.d_model=12")
    assert (tag("train.schedule={kind: constant}")
            == tag("train.schedule={kind: constant, warmup_steps: 0}"))
    assert tag("train.lr=1") != tag("train.lr=0.5") and tag("train.lr=1").startswith("set-")


def test_a_bad_planner_cache_folder_is_refused(tmp_path, monkeypatch):
    """SSMREPRO_CACHE naming a file, a folder under a file, a folder that cannot be made or a
    relative path: the cache was ignored without a word (every run timed again) or made per
    current folder; now exit 2 naming the variable, before any timing. A good one holds it (a
    blank one is unset: test_blank_path_variables_are_unset_not_a_folder_named_blank)."""
    from ssmrepro.engine.costs import cache_file
    from ssmrepro.spec import SpecError

    (tmp_path / "afile").write_text("")
    for value, needle in [(tmp_path / "afile", "not a folder"),
                          (tmp_path / "afile/sub", "cannot hold"), ("/proc/ssmrepro-cache",
                                                                    "cannot hold"),
                          ("rel", "a relative path")]:
        monkeypatch.setenv("SSMREPRO_CACHE", str(value))
        with pytest.raises(SpecError) as err:
            cache_file()
        assert "SSMREPRO_CACHE=" in err.value.messages[0] and needle in err.value.messages[0]
    res = _invoke("run", write_spec(tmp_path, seeds=[0]), "--profile", "smoke", "--dry-run",
                  "--out", tmp_path / "out", env={"SSMREPRO_CACHE": str(tmp_path / "afile")})
    _assert_refused(res, "SSMREPRO_CACHE=", "not a folder")
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "cache"))
    assert cache_file() == tmp_path / "cache/costs.json"


def test_bench_reads_its_environment_as_the_other_commands(tmp_path):
    """`bench --device` ignored SSMREPRO_DEVICE (run's --device reads it), and a blank (or '-')
    SSMREPRO_OUT was read as unset: the records went into the checkout's results/bench, where
    the other commands refuse it. The variable is no option given to `bench scans`."""
    res = _invoke("bench", "--seconds", "0.1", "--packs", "1", "--out", tmp_path,
                  env={"SSMREPRO_DEVICE": "cudax"})
    _assert_refused(res, "--device 'cudax'")
    for value in (" ", "-"):
        res = _invoke("bench", "roofline", env={"SSMREPRO_OUT": value})
        _assert_refused(res, f"SSMREPRO_OUT={value!r}")
    res = _invoke("bench", "scans", "--help", env={"SSMREPRO_DEVICE": "cpu"})
    assert res.exit_code == 0 and "not an option" not in res.output, res.output
    assert not list(tmp_path.iterdir())


def test_a_claim_on_an_evaluation_set_the_profile_lacks_is_missing_not_fail(tmp_path):
    """A claim on `long.acc` where only the quick profile's runs have the evaluation set `long`:
    in smoke it FAILed ('1 of 1 finished cells miss ... long.acc was not measured'), a verdict on
    nothing measured. Now MISSING, naming the set; a precondition on it likewise, and a paper
    value on it is missing there (it read 'not measured | differs')."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    long = {"set": {"train.evals": {"long": {"T": 12}}}}
    spec = write_spec(
        tmp_path, seeds=[0], train=train, aggregate={"metrics": ["test.acc", "long.acc"]},
        sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}],
        profiles={"smoke": {}, "quick": long, "paper": long},
        paper_values=[{"where": {"label": "S6"}, "metric": "long.acc", "value": 0.9}],
        claims=[{"text": "long holds", "metric": "long.acc", "where": {"label": "S6"},
                 "op": ">=", "value": 0.5},
                {"text": "given long", "metric": "test.acc", "where": {"label": "S6"},
                 "op": ">=", "value": 0.5,
                 "given": [{"metric": "long.acc", "op": ">=", "value": 0.5}]}])
    out = tmp_path / "out"
    res = _invoke("run", spec, "--profile", "smoke", "--out", out)
    assert res.exit_code == 0, res.output
    text = (out / "tests/t-spec/report-smoke.md").read_text()
    lines = [ln for ln in text.splitlines() if "long holds" in ln or "given long" in ln]
    assert len(lines) == 2 and all(ln.startswith("- **MISSING**") for ln in lines), lines
    assert all("no evaluation set 'long'" in ln for ln in lines), lines
    # nor is a paper value on it compared ('not measured | differs')
    assert "| label=S6: long.acc | 0.900 | — | missing |" in text, text


def test_a_curves_figure_draws_exp_of_a_loss_only(tmp_path):
    """`transform: exp` on `val.acc` (or beside a loss, or on an mse) was drawn without a word:
    exp of an accuracy is no quantity. Refused at validate like the other metric-kind checks; a
    loss (a perplexity) is drawn."""
    from pydantic import ValidationError

    from ssmrepro.plots.curves import CurvesConfig

    for series in ("val.acc", "val.loss,val.acc", "test.mse"):
        with pytest.raises(ValidationError, match="transform: exp of"):
            CurvesConfig(kind="curves", series=series, transform="exp")
    assert CurvesConfig(kind="curves", series="val.loss,train.loss", transform="exp")
    assert CurvesConfig(kind="curves", series="val.acc")
    spec = write_spec(tmp_path, figure=None,
                      figures=[{"kind": "curves", "series": "val.acc", "transform": "exp"}])
    _assert_refused(_invoke("validate", spec), "transform: exp of val.acc")


def test_claim_and_note_texts_are_read_as_written_in_the_report(tmp_path):
    """A claim text 'loss <y and z> is *small*' lost '<y and z>' in report.md (an HTML tag) and
    set 'small' in italics; a note on '<null> positions' lost '<null>', one beginning '# seeds'
    was a heading inside its list item. Title, claim, claim texts and notes are escaped."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    spec = write_spec(
        tmp_path, seeds=[0], train=train, title="a_b_ | *t*", claim="x <y and z> w",
        sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}],
        claims=[{"text": "loss <y and z> is *small* `c` _u_ a|b", "where": {"label": "S6"},
                 "op": ">=", "value": 0.5}],
        notes=["the task's <null> positions", "# seeds are 3", "1. first"])
    out = tmp_path / "out"
    assert _invoke("run", spec, "--profile", "smoke", "--out", out).exit_code == 0
    text = (out / "tests/t-spec/report-smoke.md").read_text()
    assert r"loss \<y and z> is \*small\* \`c\` \_u\_ a|b [test.acc >= 0.5" in text, text
    assert r"- the task's \<null> positions" in text and r"- \# seeds are 3" in text
    # only what markdown reads otherwise: an underscore inside a word, '|' outside a table
    # row and '<=' / '>=' start nothing, and stay as written in the raw file
    assert r"- 1\. first" in text and r"— a_b\_ | \*t\*" in text
    assert r"Claim: x \<y and z> w" in text
    from ssmrepro.plots.frontpage import _verdicts

    assert re.fullmatch(r"\d PASS, \d FAIL, \d MISSING, 0 UNTESTED",
                        _verdicts(out / "tests/t-spec/report-smoke.md"))


def test_case_labels_whose_dollars_pair_only_when_joined_are_refused(tmp_path):
    """Case labels 'a$\\foo' and 'c$d' of two axes are each drawable (one $), but a panel title
    or legend draws the run's label 'a$\\foo / c$d' on one line: TeX math between the two, and
    a traceback after training (Unknown symbol \\foo); 'a$5' and 'b$10' drew '5 / b' in italics.
    Labels follow the titles' rule ($...$ is TeX, \\$ a dollar sign): refused before training."""
    from ssmrepro.spec import SpecError, load_spec
    from ssmrepro.sweep import expand

    for first, second in [("a$\\foo", "c$d"), ("a$5", "b$10")]:
        spec = load_spec(write_spec(
            tmp_path, seeds=[0],
            sweep=[{"cases": [{"label": first, "set": {"model.mixer": "s6"}}]},
                   {"cases": [{"label": second, "set": {"model.d_model": 8}}]}]))
        with pytest.raises(SpecError, match="whose \\$ signs pair across the cases"):
            expand(spec, "smoke")
    for first, second in [("a\\$5", "b\\$10"), ("$x$", "c"), ("a$x$", "b$y$")]:
        spec = load_spec(write_spec(
            tmp_path, seeds=[0],
            sweep=[{"cases": [{"label": first, "set": {"model.mixer": "s6"}}]},
                   {"cases": [{"label": second, "set": {"model.d_model": 8}}]}]))
        assert len(expand(spec, "smoke")) == 1


def test_export_keeps_a_run_with_no_finite_metric_with_its_status(tmp_path):
    """A run of results.csv that diverged at once (every metric empty) had no row in `export`:
    the table read as if it had never run. Now one row with its status and no metric."""
    import pandas as pd

    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    out = tmp_path / "results"
    folder = out / "huang2025/huang2025-tab1"
    shutil.copytree(ROOT / "results/huang2025/huang2025-tab1", folder)
    df = pd.read_csv(folder / "results.csv", dtype={"run_id": str})
    df.loc[0, [c for c in df.columns if c.startswith("metric.")]] = math.nan
    df.loc[0, "status"] = "diverged"
    df.to_csv(folder / "results.csv", index=False)
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(tmp_path / "x.csv", dtype={"run_id": str, "metric": str})
    assert rows["run_id"].nunique() == len(df)
    lost = rows[rows["run_id"] == df.loc[0, "run_id"]]
    assert len(lost) == 1 and lost["status"].tolist() == ["diverged"], lost
    assert lost["metric"].isna().all() and lost["value"].isna().all()


def test_a_corpus_switch_that_stales_every_run_rewrites_the_results_table(tmp_path, monkeypatch):
    """With the data root switched to another corpus, every record of the profile is stale:
    the report counted 0 finished, but results.csv kept the old corpus's row on disk (the table
    was written back only when some record was read), and `export` and `list` read it as this
    data's result. The row is dropped from the file too, and so are its curves.csv rows."""
    import pandas as pd

    roots = [tmp_path / "a", tmp_path / "b"]
    for i, root in enumerate(roots):
        (root / "text").mkdir(parents=True)
        (root / "text" / "c.txt").write_bytes(bytes(range(97, 97 + 4 + 4 * i)) * 300)
    spec = _one_run_spec(tmp_path, task={"name": "text_corpus", "path": "text/c.txt", "L": 8})
    out = tmp_path / "out"
    monkeypatch.setenv("SSMREPRO_DATA", str(roots[0]))
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate")
    assert res.exit_code == 0, res.output
    (table,) = (out / "tests/t-spec").glob("results*.csv")
    assert len(pd.read_csv(table)) == 1
    monkeypatch.setenv("SSMREPRO_DATA", str(roots[1]))
    res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
    assert "another corpus" in res.output, res.output
    assert not table.exists() or pd.read_csv(table).empty
    # nor its learning curves (curves.csv kept them, for `figures --no-rebuild` and readers)
    assert not list((out / "tests/t-spec").glob("curves*.csv"))


def test_export_leaves_out_rows_of_another_corpus_before_any_plot(tmp_path, monkeypatch):
    """With the data root switched to another corpus and no `plot` or `run` since, `export` gave
    results.csv's rows of the old corpus as this one's (it reads no record). A row whose run's
    record names another corpus is left out, with a warning; back on the old corpus it is in."""
    import pandas as pd

    roots = [tmp_path / "a", tmp_path / "b"]
    for i, root in enumerate(roots):
        (root / "text").mkdir(parents=True)
        (root / "text" / "c.txt").write_bytes(bytes(range(97, 97 + 4 + 4 * i)) * 300)
    proj = tmp_path / "proj"
    (proj / "experiments/tests").mkdir(parents=True)
    (proj / "ssmrepro").mkdir()
    (proj / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    _one_run_spec(proj / "experiments/tests",
                  task={"name": "text_corpus", "path": "text/c.txt", "L": 8})
    out, env = tmp_path / "out", {"SSMREPRO_ROOT": str(proj)}
    monkeypatch.setenv("SSMREPRO_DATA", str(roots[0]))
    res = _invoke("run", "t-spec", "--out", out, "--profile", "smoke", "--no-calibrate",
                  env=env)
    assert res.exit_code == 0, res.output
    for root, rows in ((roots[1], 0), (roots[0], 1)):
        monkeypatch.setenv("SSMREPRO_DATA", str(root))
        res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv", env=env)
        assert res.exit_code == 0, res.output
        got = pd.read_csv(tmp_path / "x.csv", dtype={"run_id": str})
        assert got["run_id"].nunique() == rows, got
        assert ("trained on another text corpus" in res.output) == (rows == 0), res.output


def test_yaml_integers_with_leading_zeros_are_integers_and_stray_underscores_are_text():
    """YAML 1.2 reads `010` as the integer 10: it was the float 10.0 (a grid `model.repeat: [02,
    03]` showed `repeat=2.0`), as `00` and `0_1` were; `1_` and `1__0` were the numbers 1 and 10
    (an underscore is a separator between two digits, as Python writes it), and are text."""
    from ssmrepro.spec import parse_yaml

    doc = parse_yaml("a: 010\nb: 00\nc: 0_1\nd: -007\ne: 1_\nf: 1__0\ng: 1_000\nh: 0x_1\n"
                     "i: 1_.5\nj: 1_000.2_5\nk: 0o1_7\n")
    assert doc == {"a": 10, "b": 0, "c": 1, "d": -7, "e": "1_", "f": "1__0", "g": 1000,
                   "h": "0x_1", "i": "1_.5", "j": 1000.25, "k": 15}
    assert all(type(doc[k]) is int for k in "abcdgk"), doc


def test_yaml_merges_that_give_one_key_twice_are_refused(tmp_path):
    """Two `<<` keys in one mapping (the later replaced the earlier one's keys) and a key that two
    mappings of `<<: [*a, *b]` both give (YAML's merge takes the first, PyYAML took the last):
    refused naming the key and lines, exit 2. A key the mapping sets itself overrides both."""
    from ssmrepro.spec import parse_yaml

    doc = parse_yaml("a: &a {lr: 1, p: 1}\nb: &b {lr: 2, q: 2}\nc: {<<: [*a, *b], lr: 3}\n"
                     "d: {<<: [*a, *a]}\n")
    assert doc["c"] == {"lr": 3, "p": 1, "q": 2} and doc["d"] == {"lr": 1, "p": 1}
    spec = _one_run_spec(tmp_path)
    text = spec.read_text()
    for bad, needle in [("x1: &a {lr: 1}\nx2: &b {lr: 2}\nc:\n  <<: *a\n  <<: *b\n",
                         "line 5: malformed YAML: key '<<' (a merge) is given twice"),
                        ("x1: &a {lr: 1}\nx2: &b {lr: 2}\nc: {<<: [*a, *b]}\n",
                         "line 3: malformed YAML: key 'lr' is given by two mappings merged "
                         "here (lines 1 and 2)")]:
        spec.write_text(bad + text)
        _assert_refused(_invoke("validate", spec), needle)


def test_a_spec_declaring_yaml_1_1_is_refused(tmp_path):
    """`%YAML 1.1` asks for 1.1's reading (`no` a boolean, `010` octal 8, `1:30` 90); the spec was
    read as 1.2 without a word. `%YAML 1.2` (or no directive) is read as before."""
    spec = _one_run_spec(tmp_path)
    text = spec.read_text()
    spec.write_text("# a comment\n%YAML 1.1\n---\n" + text)
    _assert_refused(_invoke("validate", spec), "line 2: malformed YAML: the file declares %YAML 1.1")
    spec.write_text("\ufeff%YAML 1.2\n---\n" + text)
    assert _invoke("validate", spec).exit_code == 0


def test_explicit_yaml_scalar_tags_are_read_as_yaml_1_2():
    """An explicit tag applied YAML 1.1's reading to its text (`!!float 1:30` was 90.0, `!!bool
    on` True, `!!null x` None, `!!int 0b11` a bare ValueError): text that is not that type in
    YAML 1.2 is refused naming the tag and line; text that is (`!!float 1`, `!!int "08"`) is read."""
    from ssmrepro.spec import parse_yaml

    assert parse_yaml("a: !!float 1\nb: !!int '08'\nc: !!bool true\nd: !!null ~\ne: !!str 010\n"
                      ) == {"a": 1.0, "b": 8, "c": True, "d": None, "e": "010"}
    for bad, needle in [("!!float 1:30", "!!float '1:30': not a number"),
                        ("!!bool on", "!!bool 'on': not a boolean"),
                        ("!!null x", "!!null 'x': not null"),
                        ("!!int 0b11", "!!int '0b11': not an integer"),
                        ("!!int 1.0", "!!int '1.0': not an integer")]:
        with pytest.raises(yaml.YAMLError, match=re.escape(needle)):
            parse_yaml(f"k: 1\nv: {bad}\n")


def test_a_unicode_line_separator_in_a_spec_is_refused(tmp_path):
    """U+2028 / U+2029 / U+0085 (pasted from a PDF): PyYAML breaks the line there, where an editor
    shows one line (`title: A<U+2028>seeds: [0, 1]` read a hidden `seeds` key). Refused naming
    the line and column, exit 2; escaped in double quotes it is the character."""
    from ssmrepro.spec import parse_yaml

    assert parse_yaml('a: "x\\u2028y"\n') == {"a": "x\u2028y"}
    spec = _one_run_spec(tmp_path)
    text = spec.read_text()
    for ch in "\u2028\u2029\x85":
        spec.write_text(f"title: A{ch}seeds: [0, 1]\n" + text.replace("title:", "x-title:", 1))
        _assert_refused(_invoke("validate", spec), "line 1: malformed YAML: U+", "at column 9")


def test_yaml_errors_say_what_is_wrong_where(tmp_path):
    """A duplicate anchor said only `line 3: malformed YAML: second occurrence`; an unquoted
    `op: >=` said `did not find expected comment or line break`. The context is named."""
    spec = _one_run_spec(tmp_path)
    text = spec.read_text()
    for bad, needles in [
            ("x1: &a 1\nx2: &a 2\n", ["line 2: malformed YAML: an anchor (&name) is defined "
                                      "twice (first on line 1)"]),
            ("x1: >=\n", ["while scanning a block scalar on line 1", "quote it"])]:
        spec.write_text(bad + text)
        _assert_refused(_invoke("validate", spec), *needles)


def test_a_catalogue_yaml_error_names_its_context(tmp_path):
    """The catalogue is read like a spec, and its YAML errors are told as a spec's are (a
    duplicate anchor said only `second occurrence`)."""
    from ssmrepro.plots import frontpage
    from ssmrepro.spec import SpecError

    path = tmp_path / "catalogue.yaml"
    path.write_text("papers: &a {}\ntargets: &a []\n")
    with pytest.raises(SpecError, match=re.escape("line 2: malformed YAML: an anchor (&name) is "
                                                  "defined twice (first on line 1)")):
        frontpage.catalogue(path)


def test_a_spec_that_is_not_a_mapping_says_what_it_is(tmp_path):
    """An empty spec (or one of comments only) said `expected a mapping, got NoneType`."""
    spec = tmp_path / "x.yaml"
    for text, needle in [("# only a comment\n", "got nothing (an empty document"),
                         ("- a\n", "got a list"), ("hello\n", "got text ('hello')"),
                         ("---\n...\n", "got nothing")]:
        spec.write_text(text)
        _assert_refused(_invoke("validate", spec), "(top level): expected a mapping of a spec's "
                        "keys", needle)


def test_a_set_value_yaml_error_names_its_context():
    """`--set` gave the first line of a YAML error: its context alone (`found duplicate anchor;
    first occurrence`, `while scanning a block scalar`), not what was wrong."""
    from ssmrepro.spec import SpecError
    from ssmrepro.sweep.expand import parse_overrides

    for raw, needle in [("train.evals={a: &x {p: 1}, b: &x {p: 2}}", "an anchor (&name) is "
                         "defined twice"), ("train.lr=>=", "did not find expected comment")]:
        with pytest.raises(SpecError, match=re.escape(needle)):
            parse_overrides([raw])


def test_a_whole_section_of_the_same_name_that_drops_keys_is_refused(tmp_path):
    """`task: {name: keep_nth, T: 10}` in a profile's set (read as changing T) replaced the
    spec's task section: its n and vocab took their defaults without a word. A whole section of
    the same name that drops keys is refused naming them, exit 2; one of another name swaps the
    family (huang2025-tab1's Transformer case) and is fine."""
    from ssmrepro.sweep.expand import set_dotted

    cfg = {"task": {"name": "keep_nth", "n": 5, "T": 50, "vocab": 128}, "model": {"name": "a"}}
    with pytest.raises(KeyError, match="drops n, vocab"):
        set_dotted(cfg, "task", {"name": "keep_nth", "T": 10})
    set_dotted(cfg, "task", {"name": "keep_nth", "n": 5, "T": 10, "vocab": 128})
    set_dotted(cfg, "model", {"name": "b", "d_model": 8})
    assert cfg["task"]["T"] == 10 and cfg["model"] == {"name": "b", "d_model": 8}
    spec = _one_run_spec(tmp_path, profiles={
        "smoke": {"set": {"task": {"name": "keep_nth", "T": 10}}}, "quick": {}, "paper": {}})
    _assert_refused(_invoke("validate", spec), "profiles.smoke.set.task: a whole section of the "
                    "same name ('keep_nth') replaces it and drops n, vocab")


def test_a_dry_run_times_a_run_whose_evaluation_batch_is_what_is_large(tmp_path):
    """huang2025-fig3 at vocab 8,000, T 1,000, train.eval_batch_size 256: the estimate (16.5 GB,
    almost all the evaluation batch; the training step 1.6 GB) fit the 22 GB available, so `run`
    trained it, but `run --dry-run` sent it to extrapolation (over a quarter of the memory),
    found no training batch beside the evaluation batch and left it out of the estimate ('no
    batch fits the memory now available'). A timed step evaluates nothing."""
    from ssmrepro.engine.plan import fitting_batch, large_for_timing, split_by_memory
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import memory_need

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 512,
             "test_size": 512, "eval_every": 2, "eval_batch_size": 512}
    spec = write_spec(tmp_path, train=train, sweep=[], seeds=[0, 1],
                      task={"name": "keep_nth", "n": 2, "T": 64, "vocab": 512})
    runs = expand(load_spec(spec), "smoke")
    need = memory_need(runs[0])
    step = need.param_bytes + need.train_bytes
    assert need.eval_bytes > 10 * step
    avail = need.total + 1  # it trains here
    assert not large_for_timing(runs[0], avail)
    assert fitting_batch(runs[0], int(avail / 2)) == 7  # the evaluation batch takes no room
    fit, over, untimed, refused = split_by_memory(runs, "cpu", True, available=avail)
    assert (len(fit), over, untimed, refused) == (2, [], [], [])
    assert large_for_timing(runs[0], 3 * step)  # the training step itself over the share


def test_a_profile_whose_histories_together_outgrow_what_the_tables_read_back_is_refused(tmp_path):
    """Each run's history is bounded (32 MiB), the profile's were not: cooper2026-fig12's paper
    grid at `--set train.eval_every=1` planned 9.9 million evaluations (2.3 GiB of records) that
    the outputs stage reads back at once (about 15 s and 1 GB per million). Refused before
    anything trains, naming the key; the committed profiles stay under the bound."""
    from ssmrepro.spec import SpecError, load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.sweep.expand import MAX_PROFILE_HISTORY_BYTES

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 110_000,
             "val_size": 8, "test_size": 8, "eval_every": 1, "eval_batch_size": 8}
    spec = load_spec(write_spec(tmp_path, train=train, sweep=[], seeds=list(range(20))))
    with pytest.raises(SpecError) as err:
        expand(spec, "smoke")
    assert "train.eval_every: the evaluation histories of the 20 runs" in str(err.value)
    assert "raise train.eval_every" in str(err.value)
    runs = expand(spec, "smoke", {"train.eval_every": 2})  # half the evaluations: it fits
    assert sum(r.train.history_bytes for r in runs) <= MAX_PROFILE_HISTORY_BYTES


def test_a_worker_killed_by_a_signal_is_reported_by_its_name_and_a_sigkill_with_the_memory(tmp_path):
    """A worker killed mid-pack (`kill -9`, as the kernel's out-of-memory killer does) was
    reported as 'worker 0 died (exit code -9)': no word of a signal, of memory or of the pack's
    estimate."""
    from ssmrepro.engine.local import worker_death
    from ssmrepro.engine.plan import Pack, pack_memory
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    runs = expand(load_spec(write_spec(tmp_path, sweep=[], seeds=[0, 1])), "smoke")
    pack = Pack(runs[0].pack_key(), runs)
    said = worker_death(-9, pack)
    assert said.startswith("killed by SIGKILL, as the kernel's out-of-memory killer")
    need = pack_memory(pack)
    assert need > 0 and f"{need / 1e6:,.1f} MB" in said and "--workers" in said, said
    assert worker_death(-9).startswith("killed by SIGKILL") and "estimate" not in worker_death(-9)
    assert worker_death(-15) == "killed by SIGTERM"
    assert worker_death(1) == "exit code 1" and worker_death(None) == "exit code None"


def test_packs_are_sized_by_the_whole_estimate_of_a_run_not_its_training_activations(tmp_path,
                                                                                     monkeypatch):
    """48 seeds of KEEP n-TH (T 256, vocab 2,048) at train.eval_batch_size 256: each run needs
    about 1 GB (its evaluation batch; 51 MB of training activations), and the packs were sized
    by the training activations alone: 41 runs in one pack, which allocated 22 GB in its first
    evaluation (every member evaluates at once). A pack now also holds no more whole estimates
    (parameters, and the larger of a training step and an evaluation batch) than half the
    available memory (on a GPU: the budget, half its free memory)."""
    import importlib

    from ssmrepro.engine.plan import auto_pack_size, pack_memory, plan

    plan_mod = importlib.import_module("ssmrepro.engine.plan")
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import member_bytes, memory_need

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 256,
             "test_size": 256, "eval_every": 2, "eval_batch_size": 256}
    spec = write_spec(tmp_path, train=train, sweep=[], seeds=list(range(48)),
                      task={"name": "keep_nth", "n": 2, "T": 256, "vocab": 2048})
    runs = expand(load_spec(spec), "smoke")
    need = memory_need(runs[0])
    assert need.eval_bytes > 10 * member_bytes(runs[0])
    monkeypatch.setattr(plan_mod, "available_memory", lambda device: 16 * need.total)
    assert auto_pack_size(runs, "cpu") == 8  # half the available memory: 8 whole estimates
    packs = plan(runs, None, "cpu")
    assert [len(p) for p in packs] == [8] * 6 and pack_memory(packs[0]) <= 8 * need.total
    gpu = 4 * need.total  # on a GPU the budget (half its free memory) holds whole estimates
    assert auto_pack_size(runs, "cuda", budget_bytes=gpu) == 4


def test_checking_a_committed_table_is_linear_in_its_runs(tmp_path, monkeypatch):
    """`consistent_rows` (and its check for a run's second row under another id) masked the
    whole table once per run id: quadratic, 15 s for a results table of 4,000 runs (koren2026-fig6's
    paper grid has 20,304) and far more for a paper grid's curves table (millions of rows). Each
    id's rows now come from one grouping; the rows dropped stay the same. So for the completion of
    a table from committed rows and the check for rows of an edited spec."""
    import pandas as pd

    from ssmrepro.plots import outputs
    from ssmrepro.plots.outputs import consistent_rows
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    runs = expand(load_spec(write_spec(tmp_path, sweep=[], seeds=list(range(300)))), "smoke")
    df = pd.DataFrame({"run_id": [r.run_id for r in runs] + [f"x{i}" for i in range(300)],
                       "label": "", "seed": [r.seed for r in runs] * 2, "status": "ok",
                       "metric.test.acc": 0.5})
    df.loc[0, "seed"] = 7  # contradicts its run id: dropped
    df.loc[len(runs) + 5, "seed"] = 999  # another tool's id of no run's seed: kept
    masks = []
    real_eq = pd.Series.__eq__

    def counted(self, other):
        if len(self) == len(df):
            masks.append(1)
        return real_eq(self, other)

    monkeypatch.setattr(pd.Series, "__eq__", counted)
    kept = consistent_rows(df, runs, own=True)
    assert len(masks) < 10, len(masks)  # a mask per run id: 600
    # x0's twin (run 0) is dropped, so x0 is no second row of a kept one
    assert list(kept["run_id"]) == [r.run_id for r in runs[1:]] + ["x0", "x5"]
    masks.clear()  # a fresh clone's table completed from the committed rows, stale rows left out
    rows = outputs._committed_rows(runs, [df], "smoke")
    assert list(rows["run_id"]) == [r.run_id for r in runs[1:]]
    # the seed-999 row stands for no planned run (round 30: a removed seed's row is dropped)
    assert len(outputs._without_stale(df, runs, "results.csv")) == len(df) - 1
    assert len(masks) < 20, len(masks)


def _ten_pathfinder_images(d: Path) -> None:
    """Ten 32x32 Pathfinder images in the generator's PNG layout under ``d`` (no meta.json)."""
    import numpy as np

    from ssmrepro.data.pathfinder import _png_bytes

    (d / "imgs/0").mkdir(parents=True)
    (d / "metadata").mkdir()
    for i in range(10):
        (d / f"imgs/0/sample_{i}.png").write_bytes(_png_bytes(np.full((32, 32), i, np.uint8)))
    (d / "metadata/0.npy").write_text("".join(f"imgs/0 sample_{i}.png {i} {i % 2}\n"
                                              for i in range(10)))


def test_a_negative_or_infinite_count_or_time_in_a_results_table_is_refused(tmp_path):
    """A results.csv whose wall_s (or cpu_s, pack_size) was edited to -5000 or -inf was read and
    summed into the front page's training time (round 28's probe); a pack's size and times are
    numbers >= 0. (A row's impossible seed or count leaves that row out: a test above.)"""
    for col, value in (("wall_s", "-5000"), ("cpu_s", "-inf"), ("pack_size", "-2")):
        _assert_refused(_verify_tab1_edited(tmp_path, col, value),
                        f"results.csv: column '{col}' holds", "not a count or time >= 0")


def test_a_dt_range_whose_init_overflows_float32_is_refused():
    """`dt_min = dt_max = 1e300` (any dt_max above float32's largest number) passed validation and
    the run diverged at step 0: the Δ bias softplus⁻¹(Δ) (s4d_zoh's Δ) was inf in float32; a
    Mamba-2 `A_max` of 1e39 gave A = -inf and NaN gradients at step 0."""
    from ssmrepro.models.mixers.base import parse_mixer

    for name in ("s6", "mamba1", "mamba2", "mamba2_3conv", "b2s6", "delta_t", "s4d_zoh"):
        for v in (1e300, 1e39):
            with pytest.raises(ValueError, match="above 3.403e.38, float32's largest number"):
                parse_mixer({"name": name, "dt_min": v, "dt_max": v})
        parse_mixer({"name": name, "dt_min": 1e-3, "dt_max": 1e38})
    for name in ("mamba2", "mamba2_3conv"):  # A = -exp(log U(A_min, A_max)): NaN gradients
        with pytest.raises(ValueError, match="A_max 1e.39 is above 3.403e.38"):
            parse_mixer({"name": name, "A_min": 1.0, "A_max": 1e39})
        parse_mixer({"name": name, "A_min": 1.0, "A_max": 1e30})


def test_a_nested_mapping_of_the_same_kind_that_drops_a_non_default_value_is_refused(tmp_path):
    """A profile or case `set` of a nested mapping of the same kind / name (`train.schedule:
    {kind: cosine, warmup_steps: 2}` over a cosine schedule with `final_factor: 0.1`, or
    `model.blocks.SSM.mixer: {name: mamba1, d_state: 2}` over one with `d_conv: 2`) replaced it
    and the dropped keys took their defaults without a word; dropped values equal to their
    defaults pass (shipped yu2025-appG relies on them)."""
    sched = {"kind": "cosine", "warmup_steps": 1, "decay_steps": 10, "final_factor": 0.1}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 10, "val_size": 16,
             "test_size": 16, "eval_every": 5, "eval_batch_size": 16, "schedule": sched}
    spec = write_spec(tmp_path, train=train, profiles={"smoke": {"set": {
        "train.schedule": {"kind": "cosine", "warmup_steps": 2}}}, "quick": {}, "paper": {}})
    _assert_refused(_invoke("validate", spec), "train.schedule: a mapping of the same kind",
                    "drops decay_steps: 10, final_factor: 0.1")
    mixer = {"name": "mamba1", "d_state": 2, "d_conv": 2}
    model = {"name": "seq_lm", "d_model": 4, "layers": "SSM", "pos": "index",
             "blocks": {"SSM": {"mixer": mixer}}}
    case = {"label": "A", "set": {"model.blocks.SSM.mixer": {"name": "mamba1", "d_state": 2}}}
    spec = write_spec(tmp_path, name="m", model=model, sweep=[{"cases": [case]}])
    _assert_refused(_invoke("validate", spec), "model.blocks.SSM.mixer: a mapping of the same "
                    "name ('mamba1')", "drops d_conv: 2")
    mixer["d_conv"] = 4  # the default: dropping it changes nothing
    ok = write_spec(tmp_path, name="ok", model=model, sweep=[{"cases": [case]}])
    assert _invoke("validate", ok).exit_code == 0


def test_a_curves_figure_of_many_hues_keeps_them_apart_and_its_legend_off_the_panels(
        tmp_path, monkeypatch):
    """A `curves` figure of 50 hues: colours repeated after 20 (curves 0 and 20 drawn alike) and
    the legend's rows covered the panel and were cut off at the image's foot. Each curve gets a
    colour-marker pair of its own and the figure grows below the panel for its legend."""

    import pandas as pd

    from ssmrepro.plots import curves as cv

    n = 50
    table = pd.DataFrame([{"label": f"case{k:02d}", "seed": 0, "step": s, "val.acc": k / n}
                          for k in range(n) for s in (0, 5, 10)])
    ctx = _curves_context(tmp_path, table)
    saved = []
    monkeypatch.setattr(cv, "save_png", lambda fig, path, dpi: saved.append(fig))
    for seeds in ("mean", "best"):  # best of seeds draws its points as markers
        cfg = cv.CurvesConfig(kind="curves", series="val.acc", hue=["label"], seeds=seeds)
        assert cv.curves(ctx, cfg, tmp_path / "f.png")
        fig = saved[-1]
        renderer = fig.canvas.get_renderer()
        legend, panel = fig.legends[0], fig.axes[0].get_tightbbox(renderer)
        box = legend.get_window_extent(renderer)
        assert box.y0 >= 0 and box.y1 <= panel.y0, (seeds, box, panel)
        drawn = {(h.get_color(), h.get_marker()) for h in legend.legend_handles}
        assert len(drawn) == n, (seeds, len(drawn))


def test_the_evaluation_lower_bound_counts_only_positions_that_reach_the_read_out():
    """An evaluation reads out the supervised positions only, when at most half are: induction
    heads of T 1000 over 8,000 tokens at eval_batch_size 256 were estimated at 16.4 GB of logits
    (every position) where about 80 positions of a sample are read out. The bound counts the
    positions each task supervises (induction heads: its expected repeats) and stays below what
    real batches read out."""
    import torch

    from ssmrepro.models import eval_floats
    from ssmrepro.models.presets import SSMLMConfig
    from ssmrepro.tasks import build_task
    from ssmrepro.train import supervised_positions

    model = SSMLMConfig(name="ssm_lm", mixer="s6", d_model=4, d_state=2, pe="index")
    for cfg, want in (({"name": "induction_heads", "vocab": 200, "T": 100}, 21),
                      ({"name": "induction_heads", "vocab": 5, "T": 100}, 100),
                      ({"name": "mqar_huang", "kappa": 4, "vocab": 16, "T": 40}, 4),
                      ({"name": "keep_nth", "n": 2, "T": 8, "vocab": 8}, 8),
                      ({"name": "keep_nth", "n": 7, "T": 8, "vocab": 8}, 2)):
        task = build_task(cfg)
        info = task.info
        assert info.output_positions == want, (cfg, info.output_positions)
        C, L = info.n_classes, info.seq_len
        assert eval_floats(model, info) == 2 * L * 4 + 2 * want * C
        y = task.sample(torch.tensor([0, 1]), 2, torch.arange(64).expand(2, -1)).y
        read = supervised_positions(torch.zeros(*y.shape, 1), y)[1].shape[-1]
        assert want <= read, (cfg, want, read)


def test_the_attention_memory_estimate_counts_the_scores_only_where_backward_keeps_them(tmp_path):
    """The estimate counted attention's L×L scores and softmax (2·H·L² floats a layer) on every
    path; on CPU at float32 / float64 PyTorch's fused kernel keeps a logsumexp per row (measured
    with getrusage: 4.6 MB for L 4,096 and 2 heads, where the scores are 128 MB), so long
    Transformers that fit were refused. The scores are counted where the math path keeps them
    (CUDA, e.g. float64), not on CPU."""
    from ssmrepro.models.mixers.attention import AttentionConfig, attention_path
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import memory_need

    cfg = AttentionConfig(heads=2)
    for dtype in ("float32", "float64"):
        with attention_path("cpu", dtype):
            assert cfg.activation_floats(8, 4096) == 4096 * (8 + 32 + 2 + 2 * 24)
        with attention_path("cuda", dtype):
            assert cfg.activation_floats(8, 4096) == 4096 * 40 + 4 * 4096 * 4096
    assert cfg.activation_floats(8, 4096) == 4096 * 40 + 4 * 4096 * 4096  # no path said
    model = {"name": "seq_lm", "d_model": 8, "layers": "TF",
             "blocks": {"TF": {"mixer": {"name": "attention", "heads": 2}}}}
    spec = write_spec(tmp_path, model=model, task={"name": "keep_nth", "n": 2, "T": 2048,
                                                    "vocab": 8},
                      sweep=[{"cases": [{"label": "A", "set": {"model.d_model": 8}}]}])
    run = expand(load_spec(spec), "smoke")[0]
    cpu, cuda = memory_need(run, "cpu").train_bytes, memory_need(run, "cuda").train_bytes
    assert cuda - cpu == 4 * run.train.batch_size * (4 * 2048 - 2 - 48) * 2048, (cpu, cuda)


# ---------------------------------------------------------------------------------------------
# round 29 (A): what the planning commands say against what `run` does


def test_validate_and_list_count_a_run_shared_by_two_labels_once(tmp_path):
    """Two labels of one config are one run: `run` and `run --dry-run` train and count it once,
    while `validate` and `list` counted it per label (cooper2026-fig12's paper profile: '2871
    runs' for 2,475 trained)."""
    import json

    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S6 again", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}]
    root = tmp_path / "proj"
    (root / "ssmrepro").mkdir(parents=True)
    (root / "experiments" / "tests").mkdir(parents=True)
    spec = write_spec(root / "experiments" / "tests", seeds=[0], sweep=[{"cases": cases}])
    said = " ".join(_invoke("validate", spec).output.split())
    assert "ok t-spec: smoke 2 runs, quick 2 runs, paper 2 runs" in said, said
    dry = _invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "o", "--dry-run",
                  "--no-estimate")
    assert "smoke]: 2 runs, 0 done, 2 pending" in " ".join(dry.output.split()), dry.output
    res = _invoke("list", "--json", "--profile", "smoke", "--out", tmp_path / "o",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    rows = {r["id"]: r for r in json.loads(res.output[res.output.index("["):])}
    assert (rows["t-spec"]["runs"], rows["t-spec"]["done"]) == (2, 0), rows


def test_show_gives_derived_values_as_the_runs_hold_them(tmp_path):
    """`show`'s configuration printed the spec's value of a key that ``derived`` computes per
    run (koren2026-fig10: `d_state: 60` where its 2-layer runs train with 30)."""
    import json

    spec = write_spec(tmp_path, seeds=[0], sweep=[{"grid": {"model.d_model": [8, 16]}}],
                      derived={"model.d_state": "model.d_model // 2",
                               "train.eval_every": "train.max_steps // 4"})
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{"):])
    assert doc["config"]["train"]["eval_every"] == 10, doc["config"]
    assert doc["config"]["model"]["d_state"] == "derived: model.d_model // 2 (4, 8 over the runs)"
    assert [r["config"]["model"]["d_state"] for r in doc["runs"]] == [4, 8]
    spec = write_spec(tmp_path, name="w-spec", seeds=[0],
                      sweep=[{"grid": {"model.d_model": list(range(8, 28, 2))}}],
                      derived={"model.d_state": "model.d_model // 2"})
    res = _invoke("show", spec, "--profile", "smoke", "--json")
    doc = json.loads(res.output[res.output.index("{"):])
    assert doc["config"]["model"]["d_state"] == ("derived: model.d_model // 2 (4, 5, 6, 7, 8, 9, "
                                                 "10, 11, ... (10 values) over the runs)")


def test_a_dry_run_cut_by_max_runs_says_what_it_leaves(tmp_path):
    """`run --dry-run --max-runs 1` of 2 runs said '2 runs, 0 done, 1 pending': the counts did
    not add up and read as if a run were done; the line (and `--json`'s `left`) names the rest."""
    import json

    spec = write_spec(tmp_path, seeds=[0])
    args = ("run", spec, "--profile", "smoke", "--out", tmp_path / "o", "--dry-run",
            "--no-estimate", "--max-runs", "1")
    said = " ".join(_invoke(*args).output.split())
    assert "2 runs, 0 done, 1 pending" in said and "1 more not planned (--max-runs 1)" in said, said
    res = _invoke(*args, "--json")
    doc = json.loads(res.output[res.output.index("{"):])
    assert (doc["runs"], doc["done"], doc["pending"], doc["left"]) == (2, 0, 1, 1), doc
    said = " ".join(_invoke(*args[:-2]).output.split())
    assert "2 pending" in said and "not planned" not in said, said


def test_verify_and_the_report_count_a_run_shared_by_two_labels_once(tmp_path):
    """`run --max-runs 1` of two runs, one of them under two labels, said '1 of 2 runs not
    trained yet' and `verify` then '2 of 3 runs finished' (the report too): each label's row
    counted as a run."""
    import json

    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S6 again", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}]
    spec = write_spec(tmp_path, seeds=[0], sweep=[{"cases": cases}],
                      train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2,
                             "val_size": 16, "test_size": 16, "eval_every": 2,
                             "eval_batch_size": 16})
    out = tmp_path / "o"
    res = _invoke("run", spec, "--profile", "smoke", "--out", out, "--max-runs", "1",
                  "--no-calibrate", "--workers", "1", "--no-plot")
    assert "1 of 2 runs not trained yet" in " ".join(res.output.split()), res.output
    res = _invoke("verify", spec, "--profile", "smoke", "--out", out, "--json")
    doc = json.loads(res.output[res.output.index("{"):res.output.rindex("}") + 1])
    assert doc["runs"] == {"expected": 2, "finished": 1}, doc["runs"]
    assert "1 of 2 runs finished" in " ".join(res.output.split()), res.output
    text = (out / "tests" / "t-spec" / "report-smoke.md").read_text()
    assert "2 runs expected, 1 finished" in text, text


def test_a_dry_run_with_no_calibrate_plans_the_packs_run_no_calibrate_trains(tmp_path,
                                                                            monkeypatch):
    """`run --dry-run --no-calibrate` ignored --no-calibrate: its packs were the cost model's
    choice while `run --no-calibrate` sizes them by memory alone (a plan of 4 packs of 1 for a
    run of 1 pack of 4)."""
    from ssmrepro.engine import costs
    from ssmrepro.engine.plan import Choice

    monkeypatch.setattr(costs.CostModel, "choose",
                        lambda self, runs, cap, size=None: Choice(1, None, 1e-3, "measured"))
    spec = write_spec(tmp_path, seeds=[0, 1, 2, 3], sweep=[{"cases": [{"label": "S6"}]}])
    args = ("run", spec, "--profile", "smoke", "--out", tmp_path / "o")
    said = " ".join(_invoke(*args, "--dry-run").output.split())
    assert "4 pending in 4 packs (largest 1)" in said, said  # calibrated: the model's choice
    said = " ".join(_invoke(*args, "--dry-run", "--no-calibrate").output.split())
    assert "4 pending in 1 packs (largest 4)" in said, said
    said = " ".join(_invoke(*args, "--no-calibrate", "--no-plot", "--max-runs", "4",
                            "--workers", "1").output.split())
    assert "4 to train in 1 packs (largest 4)" in said, said


def test_the_estimate_of_runs_with_a_time_limit_is_at_most_the_limit(tmp_path):
    """A run stops at its `train.time_limit_s`: the dry run's estimate priced every step of its
    budget (huang2025-tab1's paper profile, 6 h a run: 89 h for 10 packs that stop within 60 h);
    a pack with a member without a limit trains its whole budget."""
    from ssmrepro.engine.plan import Pack, estimate_seconds, eval_steps
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 1000, "val_size": 16,
             "test_size": 16, "eval_every": 500, "eval_batch_size": 16}
    spec = write_spec(tmp_path, seeds=[0, 1], sweep=[{"grid": {"train.time_limit_s": [2, 3]}}],
                      train=train)
    runs = expand(load_spec(spec), "smoke")
    ev = eval_steps(runs[0].train)
    packs = [Pack(r.pack_key(), [r], None, 0.01) for r in runs]
    total, how = estimate_seconds(packs, "cpu")
    assert total == pytest.approx(2 * (2 + 0.01 * ev) + 2 * (3 + 0.01 * ev)), (total, how)
    assert "4 packs at most their train.time_limit_s" in how, how
    mixed = [Pack(runs[0].pack_key(), [runs[0], expand(load_spec(write_spec(
        tmp_path, name="u-spec", seeds=[0], train=train)), "smoke")[0]], None, 0.01)]
    total, how = estimate_seconds(mixed, "cpu")
    assert total == pytest.approx(0.01 * (1000 + ev)) and "time_limit" not in how, (total, how)


def test_the_time_limit_count_of_a_run_shared_by_two_labels_is_counted_once():
    """With runs counted once (above), report.md's 'N of the finished runs stopped at their
    time limit' still summed each label's row: '2 finished ... 3 of the finished runs stopped'."""
    import types

    import pandas as pd

    from ssmrepro.report import shared_run_counts

    runs = [types.SimpleNamespace(run_id=i) for i in ("r1", "r1", "r2", "r3")]
    df = pd.DataFrame({"run_id": ["r1", "r1", "r2", "r3"], "label": ["A", "B", "C", "D"],
                       "status": ["ok", "ok", "diverged", "error"],
                       "stop_reason": ["time_limit", "time_limit", None, None]})
    assert shared_run_counts(df, runs) == (3, 2, 1, 1)
    assert shared_run_counts(df, runs[1:]) is None  # nothing shared: the cells count them


def test_a_failed_record_does_not_hide_a_reused_specs_finished_one(trained_store, tmp_path):
    """A spec's own 'error' record of a run that a spec it reuses has finished came first:
    `run --dry-run` and `run` counted the run pending (and trained it again), `show` said
    'error'."""
    spec, folder = _copy_trained(trained_store, tmp_path)
    mine = write_spec(tmp_path, name="r-spec", seeds=[0], reuse=[str(spec)],
                      sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}])
    (rec_path,) = (folder / "runs").glob("*.json")
    rec = json.loads(rec_path.read_text())
    rec.update(status="error", error="killed")
    (tmp_path / "out" / "tests" / "r-spec" / "runs").mkdir(parents=True)
    (tmp_path / "out" / "tests" / "r-spec" / "runs" / rec_path.name).write_text(json.dumps(rec))
    args = ("run", mine, "--profile", "smoke", "--out", tmp_path / "out", "--dry-run",
            "--no-estimate")
    said = " ".join(_invoke(*args).output.split())
    assert "1 runs, 1 done, 0 pending" in said, said
    res = _invoke("show", mine, "--profile", "smoke", "--out", tmp_path / "out", "--json")
    doc = json.loads(res.output[res.output.index("{"):])
    assert [r["status"] for r in doc["runs"]] == ["ok"], doc["runs"]


def test_a_selection_never_prefers_a_candidate_with_a_seed_of_no_final_value(tmp_path):
    """`aggregate.select` scored a candidate by the mean of the seeds that have a value of
    `select.by`: a seed that finished ok with no finite final value (the record keeps no inf)
    was left out, so lr 0.1 (seeds 0.1, 0.1, NaN) beat lr 0.01 (0.5 each) and the cell showed
    train.avg_loss NaN, a miss, beside a candidate whose every seed had a value."""
    import pandas as pd
    from test_checks import Run

    from ssmrepro.report import aggregate
    from ssmrepro.spec import Select

    runs = [Run("A", {"train.lr": lr}, s) for lr in (0.01, 0.1) for s in (0, 1, 2)]
    loss = {(0.1, 2): math.nan}
    df = pd.DataFrame([{"run_id": f"r{i}", "label": r.label, "seed": r.seed, "status": "ok",
                        "metric.train.avg_loss": loss.get((r.coords["train.lr"], r.seed),
                                                          0.1 if r.coords["train.lr"] == 0.1
                                                          else 0.5), **r.flat()}
                       for i, r in enumerate(runs)])
    cells = aggregate(df, runs, "mean", ["train.avg_loss"], (),
                      Select(over="train.lr", by="train.avg_loss"))
    assert cells.iloc[0]["train.lr"] == 0.01, cells.T
    assert cells.iloc[0]["train.avg_loss"] == pytest.approx(0.5)


def _run_two_lrs_of_s6(tmp_path, **spec) -> Path:
    """Train (smoke, 3 steps) a one-label spec (S6) over train.lr 0.001 and 0.3 with the spec
    keys ``spec`` (an `aggregate.select` over the lr, analyses, figures); returns its results
    folder."""
    path = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                         {"grid": {"train.lr": [0.001, 0.3]}}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 3,
               "val_size": 16, "test_size": 16, "eval_every": 3, "eval_batch_size": 16},
        **spec)
    out = tmp_path / "out"
    res = _invoke("run", path, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    return out / "tests" / "t-spec"


def test_a_selections_analysis_metrics_are_its_kept_candidates(tmp_path):
    """`analysis: [decay_histogram]` beside `aggregate.select: {over: train.lr}`: the analysis
    tables had no `train.lr` column, so the histograms of every learning rate tried were summed
    into the cell, whose decay.* metrics (and histogram figure, and learning curves) were not
    the kept run's (decay.split 0.085 reported for the kept run's 0.154)."""
    import pandas as pd

    from ssmrepro.report.analysis import decay_metrics, histogram_table

    root = _run_two_lrs_of_s6(
        tmp_path, aggregate={"reduce": "mean", "metrics": ["test.acc"],
                             "select": {"over": "train.lr", "by": "test.acc", "op": "max"}},
        analysis=["decay_histogram"])
    cell = pd.read_csv(root / "summary-smoke.csv").iloc[0]
    recs = [json.loads(p.read_text()) for p in root.glob("runs/*.json")]
    kept = [r for r in recs if r["config"]["train"]["lr"] == cell["train.lr"]]
    want = decay_metrics(histogram_table(kept, ["label", "model.mixer"])).iloc[0]
    for m in ("decay.split", "decay.high_after", "decay.low_before"):
        assert cell[m] == pytest.approx(want[m]), (m, cell[m], want[m])
    assert "train.lr" in pd.read_csv(root / "histograms-smoke.csv")


def test_a_selections_weights_figure_and_metrics_are_its_kept_candidates(tmp_path):
    """`aggregate.select: {over: train.lr}` beside a figure and an analysis read from saved
    weights: the figure drew a row per learning rate tried, each under the cell's one name
    ('trained: D = 16, N = 8' twice), and the cell's analysis metrics were the mean over the
    candidates (gkq.dominance 0.345 for the kept run's 0.371)."""
    import numpy as np
    import pandas as pd

    root = _run_two_lrs_of_s6(
        tmp_path, save_weights=True, analysis=["output_variance"],
        task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
        aggregate={"reduce": "mean", "metrics": ["test.acc", "test.loss"],
                   "select": {"over": "train.lr", "by": "test.loss", "op": "min"}},
        figures=[{"kind": "output_distribution", "name": "fig-out", "where": [{"label": "S6"}]}])
    cell = pd.read_csv(root / "summary-smoke.csv").iloc[0]
    runs = pd.read_csv(root / "results-smoke.csv")
    kept = runs.loc[np.isclose(runs["train.lr"], cell["train.lr"]), "run_id"].tolist()
    assert list(np.load(root / "fig-out-smoke-arrays.npz")["runs"]) == kept
    table = pd.read_csv(root / "output_variance-smoke.csv")
    row = table[np.isclose(table["train.lr"], cell["train.lr"])].iloc[0]
    assert len(table) == 2 and cell["out.snr"] == pytest.approx(row["out.snr"])


def test_a_reused_record_without_the_specs_decay_histogram_is_trained_again(tmp_path):
    """rb (`analysis: [decay_histogram]`) reuses ra, which trained the same run without it: rb's
    `run` counted the run done ('trained 0 runs') and its cell's decay.* metrics stayed empty,
    without a word (a decay claim read them as a miss). Such a record is not done for rb."""
    from test_store import record

    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store, open_store

    ra = _one_run_spec(tmp_path, name="ra")
    rb = load_spec(_one_run_spec(tmp_path, name="rb", analysis=["decay_histogram"],
                                 reuse=[str(ra)]))
    assert open_store(rb, tmp_path / "out").analyses == ("decay_histogram",)
    Store(tmp_path / "ra").write(bare := record())
    st = Store(tmp_path / "rb", reuse=[tmp_path / "ra"], analyses=("decay_histogram",))
    assert not st.is_done(bare["run_id"])
    assert "record has no decay_histogram" in st.warnings[-1], st.warnings
    hist = {"bins": 50, "before": [1] * 50, "after": [2] * 50}
    Store(tmp_path / "ra").write(rec := record(tag="b", analysis={"decay_histogram": hist}))
    assert st.is_done(rec["run_id"]) and Store(tmp_path / "ra").is_done(bare["run_id"])
    assert Store(tmp_path / "rb", reuse=[tmp_path / "ra"]).is_done(bare["run_id"])


def test_an_analysis_metric_of_a_cell_with_a_diverged_seed_is_a_miss(tmp_path):
    """A cell with a diverged seed had its decay.* (and saved-weights analysis) metrics from its
    other seeds, a smaller sample (a diverged run has no histogram or weights): a claim on
    them could PASS beside the cell's NaN accuracy. They are NaN now, as the cell's other
    metrics under `reduce: mean` (with `max` the diverged seed is skipped, as there)."""
    from test_checks import Run, rows_for

    from ssmrepro.report import aggregate
    from ssmrepro.report.analysis import DECAY_METRICS, add_metrics

    runs = [Run("Mamba", {"task.T": 10}, s) for s in (0, 1)]
    import pandas as pd

    per_cell = pd.DataFrame(
        [{"label": "Mamba", "task.T": 10, **{m: 0.9 for m in DECAY_METRICS}}])
    df = rows_for(runs, [1.0, 1.0], {1: "diverged"})
    for reduce, na in (("mean", True), ("median", True), ("max", False)):
        cells = add_metrics(aggregate(df, runs, reduce, ["test.acc"]), per_cell,
                            list(DECAY_METRICS), reduce)
        assert cells["decay.split"].isna().all() == na, (reduce, cells.T)
    cells = add_metrics(aggregate(rows_for(runs, [1.0, 1.0]), runs, "mean", ["test.acc"]),
                        per_cell, list(DECAY_METRICS), "mean")
    assert cells["decay.split"].iloc[0] == 0.9


def test_a_selection_by_an_analysis_metric_is_refused(tmp_path):
    """`aggregate.select: {by: decay.split}`: analysis metrics are measured per cell after the
    choice, so every candidate scored nothing and the first one was kept (lr 0.001, split 0.06,
    over lr 0.3's 0.15 with op max), without a word."""
    spec = _one_run_spec(
        tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                         {"grid": {"train.lr": [0.001, 0.3]}}],
        aggregate={"reduce": "mean", "metrics": ["test.acc", "decay.split"],
                   "select": {"over": "train.lr", "by": "decay.split", "op": "max"}},
        analysis=["decay_histogram"])
    _assert_refused(_invoke("validate", spec),
                    "aggregate.select.by: 'decay.split' is an analysis metric")


def test_a_selection_by_an_evaluation_set_a_profile_lacks_is_refused(tmp_path):
    """`select: {by: long.acc}` where only `quick` sets `train.evals.long`: in smoke no
    candidate had a score, and the first learning rate was kept as the chosen one of every
    cell (complete, its accuracy reported), without a word."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
             {"grid": {"train.lr": [0.001, 0.3]}}]
    select = {"reduce": "mean", "metrics": ["test.acc", "long.acc"],
              "select": {"over": "train.lr", "by": "long.acc", "op": "max"}}
    spec = _one_run_spec(tmp_path, sweep=sweep, aggregate=select, profiles={
        "smoke": {}, "quick": {"set": {"train.evals": {"long": {"T": 16}}}}, "paper": {}})
    _assert_refused(_invoke("validate", spec), "aggregate.select.by: 'long.acc' reads the "
                    "evaluation set 'long', which profile smoke's runs do not have")
    spec = _one_run_spec(tmp_path, sweep=sweep, aggregate=select,
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 8,
                                "max_steps": 4, "val_size": 16, "test_size": 16,
                                "eval_every": 2, "eval_batch_size": 16,
                                "evals": {"long": {"T": 16}}})
    assert _invoke("validate", spec).exit_code == 0


def test_a_reused_spec_of_another_paper_with_this_specs_id_is_read(tmp_path):
    """`reuse: [other/dup.yaml]` where that spec has this spec's id under another paper: it was
    taken for the spec itself and skipped, so its records were never read and every shared run
    was trained again, without a word. Specs are told apart by their results folder."""
    from ssmrepro.spec import load_spec
    from ssmrepro.store import open_store, reused_specs

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    x = _one_run_spec(tmp_path / "a", name="dup")
    y = load_spec(_one_run_spec(tmp_path / "b", name="dup", paper="other", reuse=[str(x)]))
    assert [(s.paper, s.id) for s in reused_specs(y)] == [("tests", "dup")]
    assert open_store(y, tmp_path / "out").reuse == [tmp_path / "out/tests/dup"]
    assert reused_specs(load_spec(_one_run_spec(tmp_path / "a", name="dup", reuse=[str(x)]))) == []


def test_a_run_two_cases_share_has_its_decay_histogram_under_both_labels(tmp_path):
    """Cases A and B with one config train one run, reported under both labels: its decay
    histogram went to the last label alone (records keyed by run id), so cell A had no decay.*
    metrics and a claim on them read a miss, without a word."""
    import pandas as pd

    spec = _one_run_spec(
        tmp_path, analysis=["decay_histogram"],
        sweep=[{"cases": [{"label": "A", "set": {"model.mixer": "s6"}},
                          {"label": "B", "set": {"model.mixer": "s6"}}]}],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 3,
               "val_size": 16, "test_size": 16, "eval_every": 3, "eval_batch_size": 16})
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke", "--no-calibrate",
                  "--workers", "1")
    assert res.exit_code == 0, res.output
    cells = pd.read_csv(out / "tests/t-spec/summary-smoke.csv")
    assert list(cells["label"]) == ["A", "B"] and cells["decay.split"].notna().all(), cells.T
    assert cells["decay.split"].nunique() == 1


def test_a_record_whose_backend_device_kernels_or_pack_timing_training_never_wrote_is_distrusted(
        tmp_path):
    """A record's `kernels` of text or a list raised AttributeError in every table (run, show,
    verify), 20,000 entries became 20,000 columns of results.csv, a CUDA kernel path was shown
    for a run whose backend was torch, and a pack_size of 'x' went into a table that every later
    read refused with a warning (round 29)."""
    import json

    from ssmrepro.engine.local import make_record
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store, record_problem
    from ssmrepro.sweep import expand

    (run,) = expand(load_spec(_one_run_spec(tmp_path)), "smoke")
    base = make_record(run, {"status": "error", "error": "x", "pack_size": 1, "pack_wall_s": 2.5},
                       "cpu", "torch", {"S6Core": "torch:selective_scan_fused, torch:conv (width 5)"},
                       commit="")
    assert record_problem(base, run.run_id) is None
    for edit, needle in (
            ({"kernels": "abc"}, "kernels that are not a table"),
            ({"kernels": [1, 2]}, "kernels that are not a table"),
            ({"kernels": {f"K{i}": "torch:x" for i in range(20000)}}, "at most 64"),
            ({"kernels": {"S6Core": 1e308}}, "is not 'torch:...'"),
            ({"kernels": {"S6Core": "cuda:selective_scan_fn"}}, "a CUDA kernel path"),
            ({"backend": {"a": 1}}, "backend"), ({"backend": "CUDA"}, "backend 'CUDA'"),
            ({"device": 123}, "device '123'"), ({"device": "mps"}, "device 'mps'"),
            ({"backend": "cuda", "kernels": {}}, "backend cuda on device cpu"),
            ({"pack_size": "x"}, "pack_size 'x'"), ({"pack_wall_s": -5000}, "pack_wall_s")):
        assert needle in (record_problem({**base, **edit}, run.run_id) or ""), edit
    store = tmp_path / "store"
    (store / "runs").mkdir(parents=True)
    (store / "runs" / f"{run.run_id}.json").write_text(json.dumps({**base, "kernels": "abc"}))
    st = Store(store)
    assert st.table([run]).empty
    assert any("kernels that are not a table" in w for w in st.warnings), st.warnings


def test_a_backend_the_ray_cluster_cannot_run_is_refused_before_any_pack(tmp_path, monkeypatch):
    """`run --engine ray --backend bogus` (or `CUDA`, or `cuda` with `--device cpu`, or `cuda` on a
    cluster without GPUs) went to the cluster unchecked and every pack failed there with
    BackendError; it is refused before connecting (or before the first pack), exit 2."""
    from ssmrepro.engine import ray_engine

    spec = _one_run_spec(tmp_path)
    out = tmp_path / "out"
    for args, needle in ((["--backend", "bogus"], "unknown backend 'bogus'"),
                         (["--backend", "CUDA"], "unknown backend 'CUDA'"),
                         (["--backend", "cuda", "--device", "cpu"], "needs --device cuda")):
        _assert_refused(_invoke("run", spec, "--profile", "smoke", "--engine", "ray", "--out", out,
                                *args), needle)
    submitted = []
    monkeypatch.setattr(ray_engine, "connect", lambda address: True)
    monkeypatch.setattr(ray_engine, "shutdown", lambda: submitted.append("shutdown"))
    monkeypatch.setattr(ray_engine, "cluster_device", lambda device: "cpu")
    monkeypatch.setattr(ray_engine, "run_ray", lambda *a, **k: submitted.append(a))
    res = _invoke("run", spec, "--profile", "smoke", "--engine", "ray", "--backend", "cuda",
                  "--out", out, "--no-calibrate")
    _assert_refused(res, "--backend cuda needs --device cuda (the Ray cluster has no GPUs)")
    assert submitted == ["shutdown"]  # the Ray instance it started is stopped


def test_a_decay_histogram_of_a_regression_task_is_refused_before_training(tmp_path):
    """`analysis: [decay_histogram]` on a regression task (yu2025's linear_functional, targets
    (E, B, L, 1) of numbers) passed `validate` with an S6 model, and every pack trained, then
    failed in the analysis with torch's `expand(...)` RuntimeError (round 29)."""
    spec = _one_run_spec(
        tmp_path, task={"name": "linear_functional", "L": 8}, analysis=["decay_histogram"],
        model={"name": "seq_lm", "d_model": 8, "layers": "SSM", "repeat": 1,
               "blocks": {"SSM": {"mixer": {"name": "s6", "d_state": 4}, "norm": "none",
                                  "residual": False}},
               "pos": "none", "final_norm": "none", "head": "per_position"},
        sweep=[{"cases": [{"label": "S6", "set": {}}]}])
    _assert_refused(_invoke("validate", spec), "task linear_functional of run S6 is a regression")
    # and on a task labelled per sequence (LRA Pathfinder: y (E, B)), likewise a torch error
    d = tmp_path / "data/generated/pathfinder32/curv_contour_length_14"
    _ten_pathfinder_images(d)
    (d / "meta.json").write_text('{"format": "lra", "n": 10}')
    spec = _one_run_spec(tmp_path, name="pf", analysis=["decay_histogram"],
                         task={"name": "lra_pathfinder", "source": "generated"},
                         model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4},
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 2, "train_size": 4,
                                "max_steps": 4, "eval_every": 2})
    _assert_refused(_invoke("validate", spec, env={"SSMREPRO_DATA": str(tmp_path / "data")}),
                    "task lra_pathfinder of run S6 is labelled per sequence")


def test_a_float64_run_of_yu2025s_regression_tasks_sees_float64_inputs_and_targets():
    """yu2025's linear_functional and first_abs rounded inputs and targets to float32 before
    training cast them to the run's dtype: a `train.dtype: float64` run of linear_functional
    got targets θ·u of the unrounded u, 1e-8 off the inputs it saw, a loss floor no model
    could pass (round 29's dispatch trace of every op in a float64 pack). A float32 run gets
    the same numbers as before (the cast happens once, in batch_fields)."""
    import torch

    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.base import TRAIN
    from ssmrepro.train import batch_fields

    for cfg in ({"name": "linear_functional", "L": 8}, {"name": "first_abs", "L": 8}):
        task = build_task(cfg)
        b = task.sample(torch.tensor([3, 4]), TRAIN, torch.arange(5).expand(2, -1))
        x64, y64, *_ = batch_fields(b, torch.float64)
        assert x64.dtype == y64.dtype == torch.float64, cfg
        x32, y32, *_ = batch_fields(b, torch.float32)
        assert x32.dtype == y32.dtype == torch.float32 and torch.equal(x32, x64.float()), cfg
        if cfg["name"] == "linear_functional":  # the target is θ·u of the very inputs seen
            want = (x64[..., 0] * task.theta()).sum(-1)
            assert torch.allclose(y64[:, :, -1, 0], want, rtol=1e-13, atol=0), cfg


def test_float64_runs_are_not_sent_to_the_cuda_kernels(tmp_path, monkeypatch):
    """The CUDA kernels (mamba-ssm, causal-conv1d) compute in float32, float16 or bfloat16: a
    `train.dtype: float64` sweep with `--backend cuda` (or `auto` on a GPU with the kernels
    built) chose them and every pack failed on the GPU. `cuda` is refused before training, exit
    2; `auto` takes the torch path and says so (round 29)."""
    import torch

    from ssmrepro.kernels import backend

    monkeypatch.setattr(backend, "cuda_kernels_importable", lambda: (True, "CUDA kernels: test"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    spec = _one_run_spec(tmp_path)
    res = _invoke("run", spec, "--profile", "smoke", "--set", "train.dtype=float64", "--backend",
                  "cuda", "--device", "cuda", "--out", tmp_path / "out")
    _assert_refused(res, "--backend cuda: the CUDA kernels compute in float32",
                    "train.dtype float64 runs")
    assert not (tmp_path / "out").exists()
    be, why = backend.select_backend("auto", "cuda")
    assert be == "cuda"
    be, why = backend.backend_for_dtypes(be, why, "auto", {"float32", "float64"}, "cuda")
    assert be == "torch" and "train.dtype float64" in why, why
    assert backend.backend_for_dtypes("cuda", "x", "auto", {"float32"}, "cuda") == ("cuda", "x")


def test_a_float64_runs_saved_weights_are_read_back_in_float64():
    """`build_member` (what plot-time analyses read saved weights with: koren2026's mechanistic
    and output_variance) built every model in float32, so a `train.dtype: float64` run's weights
    were rounded to float32 by load_state_dict without a word and its analyses ran in float32
    (round 29)."""
    import torch

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import build_member, member_state

    spec = load_spec(ROOT / "experiments/huang2025/huang2025-tab1.yaml")
    run = expand(spec, "smoke", overrides={"train.dtype": "float64"})[0]
    trained = build_member(run)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(1e-12)  # below float32's resolution near 1
    member = build_member(run, member_state(trained, 0))
    got, want = member.state_dict(), trained.state_dict()
    assert all(got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]) for k in want)
    assert next(member.parameters()).dtype == torch.float64
    run32 = expand(spec, "smoke")[0]
    assert next(build_member(run32).parameters()).dtype == torch.float32


def test_an_eval_set_that_changes_a_tasks_hidden_question_is_refused(tmp_path):
    """A field the inputs do not show sets the target: `train.evals: {x: {n: 3}}` beside keep_nth's
    n 5 scored the model against the 3rd token, selective_copy's `number_offset`, multikey's
    `key_len` and first_abs's `sigma1` likewise; composite's `variant: full_symmetry` beside
    standard gave trained pairs other answers (34: key - 10 for key - 6), its `modulus: 4` beside
    8 drew half its 'test' rows from the run's training rows, and an inverse_matching OOD set
    with its own `low`/`high` held the run's training values. Each passed `validate` and was
    reported as a test accuracy; now refused, exit 2. Sets that keep the question stay fine."""
    from ssmrepro.tasks import build_task, eval_set_problem

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    task = {"name": "keep_nth", "n": 5, "T": 8, "vocab": 8}
    res = _invoke("validate", write_spec(tmp_path, task=task,
                                         train={**train, "evals": {"x": {"n": 3}}}))
    _assert_refused(res, "train.evals.x: n 3 differs from the run's task (5)")
    sc = {"name": "selective_copy", "words": 4, "numbers": 2, "number_offset": 2, "L": 8}
    refused = [
        (sc, {"number_offset": 1}, "number_offset 1 differs"),
        ({"name": "multikey_recall", "words": 3, "key_len": 2, "L": 12}, {"key_len": 3},
         "key_len 3 differs"),
        ({"name": "first_abs", "L": 4}, {"sigma1": 2.0}, "sigma1 2.0 differs"),
        ({"name": "composite"}, {"variant": "full_symmetry"},
         "pair 34's answer is key -10 there but key -6"),
        ({"name": "composite", "variant": "full_symmetry"}, {"set2_shift4": 10},
         "set2_shift4 differs"),
        ({"name": "composite"}, {"modulus": 4}, "key 21 at position 1, where the run trains"),
        ({"name": "inverse_matching"},
         {"ood": True, "low": 150, "high": 200, "ood_low": 20, "ood_high": 100},
         "overlap the run's training values [20, 100]"),
    ]
    for base, other, said in refused:
        why = eval_set_problem(build_task(base), build_task({**base, **other}))
        assert why is not None and said in why, (base, other, why)
    fine = [(task, {"T": 16}), (sc, {"L": 12, "supervise": "last"}),
            ({"name": "composite"}, {"test_pair": "43", "target43": "symmetric"}),
            ({"name": "composite"}, {"test_pair": "43", "modulus": 4}),
            ({"name": "composite"}, {"modulus": 16, "L": 9}),
            ({"name": "inverse_matching"}, {"ood": True}),
            ({"name": "first_abs", "L": 4}, {"sigma2": 3.0})]
    for base, other in fine:
        assert eval_set_problem(build_task(base), build_task({**base, **other})) is None, other


def test_an_mqar_power_a_whose_gap_weights_overflow_is_refused(tmp_path):
    """MQAR's gaps are the top-kappa of Gumbel noise + (a - 1) log i: `power_a: 1e308` overflowed
    those weights to inf, and the tie among them put the queries of a 64-token sequence at
    positions 42-48, where p_i ~ i^(a-1) (as at a = 1e300) puts them in the last slots, 56-62:
    other data than the law, without a word. `validate` refuses power_a above 1e6, exit 2."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    task = {"name": "mqar", "vocab": 65, "L": 64, "kappa": 4}
    res = _invoke("validate", write_spec(tmp_path, task={**task, "power_a": 1e308}, train=train))
    _assert_refused(res, "task.power_a: Input should be less than or equal to 1000000")
    ok = write_spec(tmp_path, task={**task, "power_a": 1e6}, train=train)
    assert _invoke("validate", ok).exit_code == 0


def test_decode_recall_with_a_large_vocabulary_samples_in_time_independent_of_it():
    """decode_recall looked up V_{s_t} with one pass over the (E, B, L) batch per word: 2^14
    words took 1.1 s a batch of 8, 2^20 about a minute and 2^24 (which the memory check lets
    through at batch 1) some 20 minutes, a run that never ends without a word. One sort by
    (value, time) finds every latest earlier occurrence at once; the targets are the
    definition's (an independent loop here; tests/test_cooper_tasks.py checks small vocabularies)."""
    import torch

    from ssmrepro.tasks import build_task

    W, L = 2 ** 20, 60
    task = build_task({"name": "decode_recall", "words": W, "L": L, "p": 0.5})
    start = time.perf_counter()
    b = task.sample(torch.tensor([0, 3]), 0, torch.arange(4).expand(2, -1))
    assert time.perf_counter() - start < 5.0
    for e in range(2):
        for i in range(4):
            x, s, want = b.x[e, i].tolist(), 0, []
            for t in range(L):
                if x[t] in (W, W + 1):
                    s = (2 * s + x[t] - W) % W
                js = [j for j in range(t) if x[j] == s]
                want.append(x[js[-1] + 1] if js else -100)
            assert b.y[e, i].tolist() == want


def test_the_mechanistic_analysis_of_an_mqar_with_repeated_blocks_is_refused(tmp_path):
    """`analysis: [mechanistic]` reads the facts, the state and the attention targets from the
    first 2*kappa tokens. With `key_repeats: 2` those hold a chunk of stale values (the queries
    ask the last chunk's: here the value after a query's key there is not its target), with
    `num_passes: 2` the first of two blocks: a model that recalls right scored attn.hit 0 and
    hidden.* compared its state with the wrong facts, all passed by `validate`. Refused now,
    exit 2; query_repeats (one block first) stays fine."""
    import torch

    from ssmrepro.tasks import build_task

    task = {"name": "mqar", "vocab": 64, "L": 48, "kappa": 4}
    b = build_task({**task, "key_repeats": 2}).sample(torch.tensor([0]), 2, torch.arange(4)[None])
    x, y = b.x[0], b.y[0]
    stale = {(int(r), int(x[r, 2 * m])): int(x[r, 2 * m + 1]) for r in range(4) for m in range(4)}
    nz = (y != -100).nonzero().tolist()
    wrong = sum(stale[(r, int(x[r, t]))] != int(y[r, t]) for r, t in nz)
    assert len(nz) == 16 and wrong > 8, wrong
    model = {"name": "linear_mamba", "d_model": 16, "d_state": 8, "n_layers": 1, "d_conv": 2,
             "expand": 2}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    sweep = [{"cases": [{"label": "trained"}]}]
    for extra, needle in (({"key_repeats": 2}, "run trained has key_repeats 2"),
                          ({"num_passes": 2}, "run trained has num_passes 2"),
                          ({"query_repeats": 2}, None)):
        spec = write_spec(tmp_path, task={**task, **extra}, model=model, train=train, sweep=sweep,
                          analysis=["mechanistic"], save_weights=True)
        res = _invoke("validate", spec)
        if needle:
            _assert_refused(res, "analysis: mechanistic reads the context as one block", needle)
        else:
            assert res.exit_code == 0, res.output


def test_the_best_validation_accuracy_is_an_accuracy_and_its_mse_a_loss(tmp_path):
    """val.best_acc (koren2026's paper values and claims) was not read as an accuracy: a paper
    value of 99 (the paper's percentage) or a claim `>= 95` was accepted and could never match or
    pass, and a claim `<= 1` could not fail; a val.best_mse of -5 was no negative loss."""
    agg = {"reduce": "mean", "metrics": ["val.best_acc", "test.acc"]}
    cases = (
        ({"paper_values": [{"where": {"label": "S6"}, "metric": "val.best_acc", "value": 99,
                            "tol": 1}]},
         "paper_values.0.value: 99 for val.best_acc, an accuracy outside [0, 1]"),
        ({"claims": [{"text": "x", "metric": "val.best_acc", "op": ">=", "value": 95}]},
         "claims.0.value: 95 for val.best_acc, an accuracy outside [0, 1]"),
        ({"claims": [{"text": "x", "metric": "val.best_acc", "op": "<=", "value": 1}]},
         "val.best_acc <= 1 holds for every run (an accuracy lies in [0, 1]): the claim cannot "
         "fail"),
    )
    for fields, needle in cases:
        _assert_refused(_invoke("validate", write_spec(tmp_path, aggregate=agg, **fields)),
                        needle)
    from ssmrepro.store import metric_range_problem
    assert metric_range_problem("val.best_mse", [-5.0]) and \
        metric_range_problem("val.best_acc", [1.5])
    ok = write_spec(tmp_path, aggregate=agg, claims=[
        {"text": "x", "metric": "val.best_acc", "op": ">=", "value": 0.95}])
    assert _invoke("validate", ok).exit_code == 0


def test_a_claim_the_cells_not_finished_can_still_make_hold_is_missing_not_fail():
    """FAIL is for finished cells that contradict a claim. A monotone claim with tol 0.1 FAILed
    0.5 -> 0.35 across a cell not trained yet (0.42 there holds it), a size_order claim 'A 32 >
    B 16' while A's cell at 8 was not trained, a collapse claim whose group means spanned less
    than min_range so far, a log-log slope over the points so far: each is MISSING until those
    cells are in. What no cell to come can undo still FAILs."""
    from test_checks import Run, judge

    def one(claim, runs, values):
        [v] = judge([claim], runs, values)
        return v.verdict

    line = [Run("m", {"model.d": d}) for d in (1, 2, 3)]
    mono = {"check": "monotone", "text": "t", "along": "model.d", "direction": "decreasing",
            "tol": 0.1}
    mono_up = {**mono, "direction": "increasing"}
    assert one(mono_up, line, [0.5, None, 0.35]) == "MISSING"
    assert one(mono_up, line, [0.5, None, 0.25]) == "FAIL"  # more than tol per step: certain
    assert one(mono_up, line, [0.5, 0.42, 0.35]) == "PASS"
    assert one(mono, line, [0.35, None, 0.5]) == "MISSING"
    sizes = [Run(lab, {"model.d_model": d, "task.k": 1}) for lab in ("A", "B") for d in (8, 16, 32)]
    order = {"check": "size_order", "text": "t", "labels": ["A", "B"], "size": "model.d_model",
             "group_by": ["task.k"], "threshold": 0.9}
    assert one(order, sizes, [None, 0.1, 0.95, 0.1, 0.95, 0.95]) == "MISSING"
    assert one(order, sizes, [0.1, 0.1, None, 0.95, 0.95, 0.95]) == "FAIL"  # A >= 32 > B's 8
    assert one(order, sizes, [0.95, 0.1, 0.95, 0.1, 0.95, 0.95]) == "PASS"
    grid = [Run("m", {"model.a": a, "model.b": b}) for a in (1, 2, 3) for b in (1, 2, 3)]
    coll = {"check": "collapse", "text": "t", "by": "model.a * model.b", "tol": 0.1,
            "min_groups": 1, "min_range": 0.5}
    full = [0.1, 0.2, 0.3, 0.2, 0.4, 0.6, 0.3, 0.6, 0.9]
    assert one(coll, grid, [None, *full[1:4], None, *full[5:8], None]) == "MISSING"
    assert one(coll, grid, [None, 0.2, 0.3, 0.5, *full[4:]]) == "FAIL"  # group 2 spreads 0.3
    assert one(coll, grid, full) == "PASS"
    xs = [Run("m", {"model.d": d}) for d in (1, 2, 4, 8)]
    slope = {"check": "loglog_slope", "text": "t", "x": "model.d", "expected": -1, "tol": 0.1}
    assert one(slope, xs, [1, 0.6, 0.3, None]) == "MISSING"
    assert one(slope, xs, [1, 0.9, 0.8, 0.7]) == "FAIL"


def test_the_worst_seeds_loss_is_not_taken_from_the_seeds_that_did_not_diverge():
    """`reduce: max` (koren2026's specs, which aggregate train.loss) skipped a diverged seed, as
    for a best-of-seeds accuracy; of a loss max is the worst seed (the figures say so), and the
    diverged one is worse than any: a claim `train.loss <= 0.5` PASSed on the other seeds'."""
    import pandas as pd
    from test_checks import Run

    from ssmrepro.report import aggregate

    runs = [Run("m", {"model.d": 1}, s) for s in (0, 1, 2)]
    df = pd.DataFrame([{"run_id": f"r{s}", "label": "m", "seed": s, "model.d": 1,
                        "status": st, "train.loss": v, "test.acc": a}
                       for s, (st, v, a) in enumerate([("ok", 0.1, 0.9), ("ok", 0.2, 0.8),
                                                       ("diverged", math.nan, math.nan)])])
    cells = aggregate(df, runs, "max", ["train.loss", "test.acc"])
    assert math.isnan(cells["train.loss"].iloc[0])
    assert cells["test.acc"].iloc[0] == 0.9  # the best seed's accuracy: the diverged one skipped
    cells = aggregate(df[df["status"] == "ok"], runs[:2], "max", ["train.loss"])
    assert cells["train.loss"].iloc[0] == 0.2


def test_a_paper_value_of_a_seed_spread_in_a_one_seed_cell_is_not_compared():
    """A paper value on test.acc.std in a profile of one seed (the spread is empty there) was
    `differs` ('not measured'), counted among the values compared; a claim on it is untestable.
    It is `missing` now; a seed that diverged still makes it differ."""
    from types import SimpleNamespace

    from test_checks import Run, rows_for

    from ssmrepro.report import aggregate, cell_keys, verify

    pv = SimpleNamespace(where={"label": "m"}, metric="test.acc.std", value=0.02, tol=0.01)
    spec = SimpleNamespace(claims=[], paper_values=[pv], claim="c")
    for seeds, values, status, want in (((0,), [0.9], None, "missing"),
                                        ((0, 1), [0.9, 0.9], {1: "diverged"}, "differs"),
                                        ((0, 1), [0.9, 0.94], None, "match")):
        runs = [Run("m", {"model.d": 1}, s) for s in seeds]
        cells = aggregate(rows_for(runs, values, status), runs, "mean", ["test.acc"])
        [v] = [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "paper_value"]
        assert v.verdict == want, (seeds, v)


def test_a_claims_any_of_value_that_matches_no_run_is_refused(tmp_path):
    """`where: {label: [S6, S4d]}` (a typo of S4D) matched S6, so `validate` took it, and the
    claim was judged, and could PASS, on S6 alone; so for a value no run has (`d_model: [8,
    999]`) and for a figure's filter. Each value of an any-of list must match some run."""
    for where, needle in (({"label": ["S6", "S4d"]}, "claims.0.where.label: 'S4d' (one of its "
                           "values) matches no run of any profile"),
                          ({"model.d_model": [8, 999]}, "claims.0.where.model.d_model: 999")):
        spec = write_spec(tmp_path, claims=[{"text": "x", "where": where, "op": ">=",
                                             "value": 0.9}])
        _assert_refused(_invoke("validate", spec), needle)
    ok = write_spec(tmp_path, claims=[{"text": "x", "where": {"label": ["S6", "S4D"]},
                                       "op": ">=", "value": 0.9}])
    assert _invoke("validate", ok).exit_code == 0


def test_a_precondition_that_implies_its_claim_is_refused(tmp_path):
    """`test.acc >= 0.9 given test.acc >= 0.9` (or `>= 0.8 given > 0.85`, an any_threshold
    alike): a cell meeting the precondition holds the claim, the others are untestable, so the
    claim could not fail (MISSING or PASS whatever was trained); it was accepted."""
    for check, op, value, gop, gvalue in (("threshold", ">=", 0.9, ">=", 0.9),
                                          ("threshold", ">=", 0.8, ">", 0.85),
                                          ("any_threshold", "<", 0.5, "<=", 0.4),
                                          ("threshold", ">", 0.9, ">", 0.9)):
        spec = write_spec(tmp_path, claims=[{
            "check": check, "text": "x", "op": op, "value": value,
            "given": [{"metric": "test.acc", "op": gop, "value": gvalue}]}])
        _assert_refused(_invoke("validate", spec), f"claims.0.given.0: test.acc {gop} {gvalue:g} "
                        f"implies the claim's test.acc {op} {value:g}")
    for op, gop in ((">", ">="), ("<=", ">=")):  # a cell at 0.9 meets it and misses the claim
        ok = write_spec(tmp_path, claims=[{"text": "x", "op": op, "value": 0.9, "given": [
            {"metric": "test.acc", "op": gop, "value": 0.9 if op == ">" else 0.5}]}])
        assert _invoke("validate", ok).exit_code == 0


def test_a_size_order_claim_on_a_loss_is_refused(tmp_path):
    """size_order reads 'reaches the threshold' as metric >= threshold: on test.loss that is the
    smallest size that has NOT learnt, judged as the smallest that solves; it was accepted. The
    loss negated (-test.loss >= -0.5) is what was meant, and is taken."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"model.d_model": [8, 12]}}]
    agg = {"reduce": "mean", "metrics": ["test.acc", "test.loss"]}

    def spec(metric, threshold):
        return write_spec(tmp_path, sweep=sweep, aggregate=agg, claims=[{
            "check": "size_order", "text": "x", "metric": metric, "labels": ["S6", "S4D"],
            "size": "model.d_model", "group_by": [], "threshold": threshold}])

    _assert_refused(_invoke("validate", spec("test.loss", 0.5)),
                    "claims.0.metric: test.loss is a loss, but size_order reads 'solved' as "
                    "test.loss >= threshold")
    assert _invoke("validate", spec("-test.loss", -0.5)).exit_code == 0


def test_a_claim_on_an_analysis_share_is_range_checked_like_an_accuracy(tmp_path):
    """koren2026-fig2's claims on gkq.diag_hit (a share of columns, in [0, 1]): a value of 90 (a
    percentage) was accepted and could never pass, and `<= 1` could not fail; both are refused
    as for an accuracy."""
    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig2.yaml").read_text())
    raw.update(id="t-fig2", alias=None)
    for i, (value, needle) in enumerate((
            (90, "claims.1.value: 90 for gkq.diag_hit, outside the range of a fraction ([0, 1])"),
            (1, "claims.1.value: gkq.diag_hit <= 1 holds for every run (a fraction lies in "
             "[0, 1]): the claim cannot fail"))):
        claim = raw["claims"][1]
        assert claim["metric"] == "gkq.diag_hit"
        claim.update(value=value, op=">=" if i == 0 else "<=")
        spec = tmp_path / "t-fig2.yaml"
        spec.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
        _assert_refused(_invoke("validate", spec), needle)


def test_a_claim_on_an_evaluation_set_some_of_its_runs_lack_is_refused(tmp_path):
    """`long.acc >= 0.01` over S6 (with `train.evals.long`) and S4D (without): S4D's cell read
    as a miss, 'not measured', and the claim FAILed whatever was trained (a profile with no run
    of the set was already MISSING). Narrowed to S6 it is taken. An ordering `long.acc: S6 >=
    S4D` with the set on S6's side only was accepted too (each side alone is uniform) and
    FAILed ('out of order ... long.acc was not measured') whatever was trained; with the set on
    both sides it is taken."""
    long = {"train.evals": {"long": {"T": 12}}}
    agg = {"reduce": "mean", "metrics": ["test.acc", "long.acc"]}
    threshold = {"text": "x", "metric": "long.acc", "op": ">=", "value": 0.01}
    ordering = {"check": "ordering", "text": "x", "metric": "long.acc", "a": {"label": "S6"},
                "b": {"label": "S4D"}, "match": []}
    for claim, s4d, refused in (({**threshold, "where": {}}, {}, True),
                                ({**threshold, "where": {"label": "S6"}}, {}, False),
                                (ordering, {}, True), (ordering, long, False)):
        cases = [{"label": "S6", "set": {"model.mixer": "s6", **long}},
                 {"label": "S4D", "set": {"model.mixer": "s4d", **s4d}}]
        res = _invoke("validate", write_spec(tmp_path, sweep=[{"cases": cases}], aggregate=agg,
                                             claims=[claim]))
        if refused:
            _assert_refused(res, "claims.0.metric: long.acc reads the evaluation set 'long', "
                            "which some of its runs in profile smoke do not have (label 'S4D': "
                            "train.evals)")
        else:
            assert res.exit_code == 0, res.output


def test_a_paper_value_of_a_cell_without_its_evaluation_set_is_refused(tmp_path):
    """A paper value of S4D's long.acc where only S6's runs have `train.evals.long`: it read
    'not measured | differs', counted among the values compared, whatever was trained."""
    cases = [{"label": "S6", "set": {"model.mixer": "s6", "train.evals": {"long": {"T": 12}}}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}]
    agg = {"reduce": "mean", "metrics": ["test.acc", "long.acc"]}
    for label, refused in (("S4D", True), ("S6", False)):
        spec = write_spec(tmp_path, sweep=[{"cases": cases}], aggregate=agg, paper_values=[
            {"where": {"label": label}, "metric": "long.acc", "value": 0.5, "tol": 0.1}])
        res = _invoke("validate", spec)
        if refused:
            _assert_refused(res, "paper_values.0.metric: long.acc reads the evaluation set "
                            "'long', which the runs of its cell do not have in profile smoke")
        else:
            assert res.exit_code == 0, res.output


def test_a_claim_matched_or_grouped_on_the_key_select_chooses_is_refused(tmp_path):
    """With `aggregate.select: {over: train.lr}` each cell keeps the lr it chose: an ordering
    `match: [train.lr]` was judged where S6 and S4D happened to choose one lr and MISSING where
    they did not, a spread `group_by: [train.lr]` grouped cells likewise; both were accepted."""
    agg = {"reduce": "mean", "metrics": ["test.acc", "train.avg_loss"],
           "select": {"over": "train.lr", "by": "train.avg_loss"}}
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"train.lr": [0.01, 0.003]}}]
    for claim in ({"check": "ordering", "text": "x", "a": {"label": "S6"},
                   "b": {"label": "S4D"}, "match": ["train.lr"]},
                  {"check": "spread", "text": "x", "group_by": ["train.lr"], "tol": 0.1}):
        spec = write_spec(tmp_path, aggregate=agg, sweep=sweep, claims=[claim])
        _assert_refused(_invoke("validate", spec), "claims.0: names train.lr (outside `where`), "
                        "the key aggregate.select.over chooses per cell")


def test_a_size_order_claim_that_allows_every_violation_is_refused(tmp_path):
    """size_order with `strict: false` and `allowed_violations` at least the adjacent pairs it
    compares (1 for two labels in one group) could not fail; it was accepted, as monotone,
    spread and region claims that allow every violation are not."""
    sweep = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                        {"label": "S4D", "set": {"model.mixer": "s4d"}}]},
             {"grid": {"model.d_model": [8, 12]}}]

    def spec(**kw):
        return write_spec(tmp_path, sweep=sweep, claims=[{
            "check": "size_order", "text": "x", "labels": ["S6", "S4D"], "size": "model.d_model",
            "group_by": [], "threshold": 0.5, **kw}])

    _assert_refused(_invoke("validate", spec(allowed_violations=1, strict=False)),
                    "claims.0.allowed_violations 1 >= the 1 adjacent pairs of labels",
                    "the claim cannot fail in any profile")
    assert _invoke("validate", spec(allowed_violations=1)).exit_code == 0  # strict can fail


@pytest.mark.parametrize("module,signame", [("ssmrepro.bench.scans", "SIGTERM"),
                                            ("ssmrepro.bench.step", "SIGINT")])
def test_a_benchmark_module_run_with_python_m_is_guarded_while_it_loads(module, signame):
    """`python -m ssmrepro.bench.scans` (and .step, the forms `bench --help` names) loaded torch
    and the kernels unguarded: a `kill PID` in the first seconds died with exit 143 and no line,
    a Ctrl-C printed a KeyboardInterrupt traceback. Now they load as `python -m ssmrepro` does
    and run guarded (one line, exit 130) as `ssmrepro bench scans` does."""
    _signal_while_loading([module, "--help"], signame)


def test_a_download_leaves_no_lock_file_in_the_downloads_folder(tmp_path):
    """`data download` left an empty `<archive>.lock` beside every archive it downloaded (the
    flock file was never removed). It is removed while still held; a download while another
    holds the lock is still refused."""
    from ssmrepro.data.download import DownloadError, _hold, download_file

    src = tmp_path / "src.bin"
    src.write_bytes(b"hello")
    out = tmp_path / "downloads"
    download_file(src.as_uri(), out / "a.bin", progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["a.bin"]
    held = _hold(out / "b.bin")
    try:
        with pytest.raises(DownloadError, match="another `data download`"):
            download_file(src.as_uri(), out / "b.bin", progress=False)
    finally:
        os.close(held)
    download_file(src.as_uri(), out / "b.bin", progress=False)  # the old lock file is taken
    assert sorted(p.name for p in out.iterdir()) == ["a.bin", "b.bin"]


def test_a_selections_curves_keep_a_shared_run_only_under_the_label_that_kept_it(tmp_path):
    """`aggregate.select` over train.lr, label A trying lr 0.001 and 0.3, label B only 0.001
    (the same config, so one run of both): with A keeping 0.3 and B its 0.001, the curve rows
    were filtered by run id alone, so A's learning curve averaged its kept run with its
    left-out 0.001 candidate (B's kept run). Now by (run id, label)."""
    import pandas as pd

    from ssmrepro.plots.outputs import _chosen_runs, _of_chosen
    from ssmrepro.report.cells import cell_keys
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    spec = load_spec(_one_run_spec(
        tmp_path, sweep=[{"cases": [
            {"label": "A", "set": {"model.mixer": "s6"}, "grid": {"train.lr": [0.001, 0.3]}},
            {"label": "B", "set": {"model.mixer": "s6", "train.lr": 0.001}}]}],
        aggregate={"reduce": "mean", "metrics": ["test.acc"],
                   "select": {"over": "train.lr", "by": "test.acc", "op": "max"}}))
    runs = expand(spec, "smoke")
    keys = cell_keys(runs)
    shared = {r.run_id for r in runs if r.label == "A"} & {r.run_id for r in runs if r.label == "B"}
    assert len(runs) == 3 and len(shared) == 1
    kept = [r for r in runs if (r.label, r.flat()["train.lr"]) in {("A", 0.3), ("B", 0.001)}]
    cells = pd.DataFrame([{k: {**r.flat(), "label": r.label}[k] for k in keys} for r in kept])
    chosen = _chosen_runs(cells, runs, keys)
    curves = pd.DataFrame([{"run_id": r.run_id, "label": r.label, "step": 1} for r in runs])
    drawn = _of_chosen(curves, cells, keys, chosen)
    assert sorted(zip(drawn["run_id"], drawn["label"])) == sorted((r.run_id, r.label)
                                                                   for r in kept)


def test_show_says_pending_for_a_finished_record_run_would_train_again(trained_store, tmp_path):
    """A finished record that `run` does not count done (here: the spec now records
    `analysis: [decay_histogram]`, which the record lacks; also saved weights that are gone):
    `show` printed its status 'ok' and no warning, `run` trained it again. Both now ask the
    store's one decision (Store.record_status / is_done): 'pending' and the warning why."""
    trained, _ = _copy_trained(trained_store, tmp_path)
    (tmp_path / "edited").mkdir()
    spec = _one_run_spec(tmp_path / "edited", analysis=["decay_histogram"])  # the same id
    res = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["runs"]
    assert row["status"] == "pending", row
    assert "has no decay_histogram" in res.stderr
    table = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke").output
    assert "pending" in table and " ok " not in table
    plain = _invoke("show", trained, "--out", tmp_path / "out", "--profile", "smoke", "--json")
    assert json.loads(plain.stdout)["runs"][0]["status"] == "ok"  # the spec it was trained by


def test_show_prints_swept_values_as_the_spec_means_them(tmp_path):
    """`show` printed a sweep value's raw text: the quoted `" 2"` of an integer field as `n= 2`
    (the run has n = 2; `--json` coords said " 2"), and a text value such as '1e3' bare, where
    it reads as a number. Now the run's typed value, text that reads as another type quoted."""
    from ssmrepro.sweep.config import spec_text

    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                                          {"grid": {"task.n": [" 2", 3]}}])
    table = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke").output
    assert "n=2" in table and "n= 2" not in table, table
    res = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke", "--json")
    assert [r["coords"]["task.n"] for r in json.loads(res.stdout)["runs"]] == [2, 3]
    for value, text in [("1e3", "'1e3'"), ("true", "'true'"), ("", "''"), (" x", "' x'"),
                        ("it's", "it's"), ("a, b", "'a, b'"), ("s6", "s6"), (1000.0, "1000.0")]:
        assert spec_text(value) == text, value


def test_data_info_names_a_damaged_cache_entry(tmp_path):
    """`data info` said only which sources are present and the cache's size: an entry a command
    would find damaged, remove and prepare again (a truncated array, an edited meta.json, an
    array gone) looked as good as the others. Now each is named with why, from the checks and
    digests the entry keeps (the arrays mapped, not read); nothing is removed."""
    import numpy as np

    from ssmrepro.data.cache import save_entry

    cache = tmp_path / ".cache"
    names = [f"{d}-{c * 20}" for d, c in (("listops", "a"), ("listops", "b"), ("imdb", "c"),
                                          ("cifar10", "d"))]
    for name in names:
        save_entry(cache / name, {"x": np.arange(1000).reshape(10, 100), "y": np.zeros(10)},
                   {"vocab": 17})
    os.truncate(cache / names[1] / "x.npy", 500)
    meta = cache / names[2] / "meta.json"
    meta.write_text(meta.read_text().replace("17", "117"))
    (cache / names[3] / "y.npy").unlink()
    res = _invoke("data", "info", "--dir", tmp_path)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    damaged = [n for n in names if f"damaged cache entry: {cache / n} (" in out]
    assert damaged == names[1:], out
    assert "meta.json was changed" in out and "y.npy" in out
    assert sorted(p.name for p in cache.iterdir()) == sorted(names)


def test_a_first_abs_std_past_float32_trains_in_a_float64_run(tmp_path):
    """first_abs bounded its stds to float32's range ([1e-30, 1e30]) in every run: a
    `train.dtype: float64` run, whose inputs reach the model in float64, was refused
    `sigma2: 1e35` ('the inputs are float32'). The bound is now the run's dtype's: float64
    runs take [1e-300, 1e300], float32 runs are refused as before (naming train.dtype)."""
    model = {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4}
    task = {"name": "first_abs", "L": 8, "sigma2": 1e35}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
             "test_size": 8, "eval_every": 2, "eval_batch_size": 8}
    regression = {"aggregate": {"reduce": "mean", "metrics": ["test.mse"]}, "claims": [],
                  "paper_values": [], "figure": {"kind": "bars", "metric": "test.mse",
                                                 "x": "label", "title": "x"}}
    wide = _one_run_spec(tmp_path, name="wide", task=task, model=model,
                         train={**train, "dtype": "float64"}, **regression)
    res = _invoke("validate", wide)
    assert res.exit_code == 0, res.output
    narrow = _one_run_spec(tmp_path, name="narrow", task=task, model=model, train=train,
                           **regression)
    res = _invoke("validate", narrow)
    assert res.exit_code == 2 and "sigma2=1e+35 is outside [1e-30, 1e30]: the inputs are float32" \
        in res.output and "train.dtype float32" in res.output, res.output
    res = _invoke("validate", _one_run_spec(tmp_path, name="past", model=model,
                                            task={**task, "sigma2": 1e305},
                                            train={**train, "dtype": "float64"}, **regression))
    assert res.exit_code == 2 and "outside [1e-300, 1e300]" in res.output, res.output


def test_a_results_row_edited_by_hand_is_named_when_the_records_replace_it(trained_store,
                                                                            tmp_path):
    """A value edited in results.csv (test.acc 0.143 -> 0.987654) was overwritten from the run
    records by the next `plot` or `run` without a word. Records stay the source of truth, and
    the row is named: each row's digest as written is kept (runs/.tables-written), so a table
    the tool wrote and nobody edited stays silent, as does a table it never wrote."""
    import csv

    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    spec_path, root = _copy_trained(trained_store, tmp_path)
    runs = expand(load_spec(spec_path), "smoke")
    table = root / "results-smoke.csv"

    def edit() -> None:
        rows = list(csv.reader(table.open()))
        rows[1][rows[0].index("metric.test.acc")] = "0.987654"
        with table.open("w", newline="") as f:
            csv.writer(f).writerows(rows)

    (root / "runs" / ".tables-written").unlink(missing_ok=True)
    edit()  # a table no ledger knows (committed, or written before the ledger): not judged
    store = Store(root)
    store.write_csv(runs, table.name)
    assert store.warnings == [] and "0.987654" not in table.read_text()
    store.write_csv(runs, table.name)  # written by the tool, unedited
    assert store.warnings == []
    edit()
    store.write_csv(runs, table.name)
    assert len(store.warnings) == 1 and runs[0].run_id in store.warnings[0], store.warnings
    assert "changed since ssmrepro wrote them" in store.warnings[0]
    assert "0.987654" not in table.read_text()
    for command in (["plot"], ["run", "--no-plot", "--workers", "1"]):  # (`run` kept the
        edit()  # store's warning to itself)
        res = _invoke(*command, spec_path, "--out", tmp_path / "out", "--profile", "smoke")
        assert res.exit_code == 0 and "changed since ssmrepro wrote them" in res.output, \
            res.output


def test_cosine_operator_gives_float64_runs_float64_inputs_and_float32_runs_the_same():
    """cosine_operator rounded its inputs and targets to float32 (its float64 matmul rows
    differed in their last bit with the batch), in float64 runs too. They are float64 now,
    summed term by term (the same numbers in any batch); a float32 run rounds them to exactly
    the old inputs: checked against the old matmul on every sample the committed yu2025-fig3
    runs draw (quick, seed 0; none lies within a float64 sum's rounding error of a float32
    boundary, so no summation order of the old matmul rounds otherwise)."""
    import math

    import torch

    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.base import TEST, TRAIN, VAL
    from ssmrepro.tasks.yu_synthetic import PRIMES
    from ssmrepro.train import _DATA_STREAM, derived_seed

    task = build_task({"name": "cosine_operator", "L": 64, "n_terms": 10})
    t = 2.0 * math.pi * torch.arange(64, dtype=torch.float64) / 64
    basis = torch.cos(t[:, None] * torch.tensor(PRIMES, dtype=torch.float64)[None, :])
    seeds = torch.tensor([derived_seed(0, _DATA_STREAM)])
    for split, size in ((TRAIN, 4096), (VAL, 512), (TEST, 2048)):
        b = task.sample(seeds, split, torch.arange(size)[None, :])
        g = b.y[:, :, -1].double()
        assert b.x.dtype == torch.float64 and torch.equal(b.x.float()[..., 0], (g @ basis.T).float())
        assert not torch.equal(b.x, b.x.float().double())  # not rounded to float32
    one = task.sample(seeds, TRAIN, torch.tensor([[7]]))
    assert torch.equal(one.x[0, 0], task.sample(seeds, TRAIN, torch.arange(64)[None, :]).x[0, 7])


def test_a_benchmark_module_run_with_python_m_names_a_path_it_cannot_use(tmp_path, capsys):
    """`python -m ssmrepro.bench.scans --json <a folder>` (the form `bench --help` names) ended
    in an IsADirectoryError traceback, where `ssmrepro bench scans` says 'cannot use ...: a
    folder where a file belongs', exit 2. Its entry (bench_main) now says the same."""
    from ssmrepro.bench import bench_main
    from ssmrepro.bench.scans import main

    with pytest.raises(SystemExit) as exit_:
        bench_main(lambda: main(["--L", "64", "--kernels", "diag", "--json", str(tmp_path)]))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"error: cannot use {tmp_path}: a folder where a file belongs" in err, err


def test_a_results_table_ledger_that_is_no_file_judges_nothing(trained_store, tmp_path):
    """runs/.tables-written (the digests of the rows a results table was written with) that is
    a FIFO, a link or not JSON: the table is written from the records as before, no row is
    judged edited, and nothing blocks or fails."""
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    spec_path, root = _copy_trained(trained_store, tmp_path)
    runs = expand(load_spec(spec_path), "smoke")
    ledger = root / "runs" / ".tables-written"
    for make in (lambda: os.mkfifo(ledger), lambda: ledger.symlink_to(tmp_path / "elsewhere"),
                 lambda: ledger.write_text("[1, 2")):
        ledger.unlink(missing_ok=True)
        make()
        table = root / "results-smoke.csv"
        table.write_text(table.read_text().replace("smoke,S6", "smoke,S6x"))
        store = Store(root)
        store.write_csv(runs, table.name)
        assert store.warnings == [] and "S6x" not in table.read_text()
    assert not (tmp_path / "elsewhere").exists()


def test_a_results_table_ledger_held_for_ever_does_not_block_the_write(trained_store, tmp_path,
                                                                        monkeypatch):
    """The ledger of written rows (runs/.tables-written) is locked while a table is written;
    one whose holder never lets go (stopped mid-write) blocked every later `run` and `plot`
    for ever. After LEDGER_WAIT_S it is removed and a new one begun; nothing is judged."""
    import fcntl

    import ssmrepro.store as store_mod
    from ssmrepro.spec import load_spec
    from ssmrepro.store import Store
    from ssmrepro.sweep import expand

    spec_path, root = _copy_trained(trained_store, tmp_path)
    runs = expand(load_spec(spec_path), "smoke")
    store = Store(root)
    store.write_csv(runs, "results-smoke.csv")
    ledger = root / "runs" / ".tables-written"
    held = os.open(ledger, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    monkeypatch.setattr(store_mod, "LEDGER_WAIT_S", 0.2)
    try:
        store.write_csv(runs, "results-smoke.csv")
        assert store.warnings == [] and not os.path.samestat(os.fstat(held), ledger.stat())
        assert runs[0].run_id in ledger.read_text()  # the new ledger holds the rows written
    finally:
        os.close(held)


def test_a_figures_y_range_holds_its_paper_values_error_bars_and_small_losses(tmp_path,
                                                                             monkeypatch):
    """The y range came from the cells' values alone: a paper value above them (20 beside losses
    near 4 in `bars`; 1.5 beside losses below 1 in `lines` and `bands`, on the accuracy range)
    and the top of an error bar were drawn off the axis without a word; a loss of 1e-4 lay flat
    on the accuracy range's 0 (`lines`), and a bar's number, 0.02 above it in data units, far
    off the axis (round 30)."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, bands, parse_figure
    from ssmrepro.plots import figures as kind
    from ssmrepro.spec import PaperValue

    def drawn(module, fn, cfg, loss, std, pv):
        cells = pd.DataFrame({"label": ["S6", "S6", "S4D", "S4D"], "model.d_model": [8, 16] * 2,
                              "n_expected": 2, "n_ok": 2, "n_diverged": 0, "complete": True,
                              "n_params": [10, 20, 11, 21], "test.loss": loss,
                              "test.loss.std": std})
        spec = SimpleNamespace(id="t", title="t", aggregate=SimpleNamespace(reduce="mean"),
                               paper_values=[PaperValue(where={"label": "S6", "model.d_model": 8},
                                                        metric="test.loss", value=pv, tol=0.1)])
        ctx = FigureContext(spec, "smoke", cells, ["label", "model.d_model"],
                            lambda stem, ext: tmp_path / ext)
        seen = {}
        monkeypatch.setattr(module, "save_png", lambda fig, path, dpi: seen.update(
            ylim=fig.axes[0].get_ylim(),
            texts=[getattr(t, "xy", t.get_position())[1] for t in fig.axes[0].texts]))
        assert fn(ctx, parse_figure({"metric": "test.loss", **cfg}), tmp_path / "f.png")
        return seen

    bars = drawn(kind, kind.bars, {"kind": "bars"}, [3.9, 2.4, 2.3, 2.1], [0.73, 0.2, 0.1, 0], 20)
    assert bars["ylim"][1] >= 20, bars  # 4.48: the paper's 20 and 3.9 + 0.73 were cut off
    loss = [0.3, 0.5, 0.7, 0.8]
    for module, fn, cfg in [(kind, kind.lines, {"kind": "lines", "x": "model.d_model",
                                                 "facet": None, "paper": True}),
                            (bands, bands.bands, {"kind": "bands", "x": "model.d_model",
                                                  "hue": "label", "lo": None, "hi": None})]:
        seen = drawn(module, fn, cfg, loss, [0.05] * 4, 1.5)
        assert seen["ylim"][0] <= 0.3 and seen["ylim"][1] >= 1.5, (cfg["kind"], seen)
    tiny = drawn(kind, kind.lines, {"kind": "lines", "x": "model.d_model", "facet": None},
                 [1e-4, 2e-4, 3e-4, 3.5e-4], [0] * 4, 1e-4)
    assert tiny["ylim"][1] < 1e-3, tiny  # (-0.02, 1.02): every line flat on 0
    bars = drawn(kind, kind.bars, {"kind": "bars"}, [1e-4, 2e-4, 3e-4, 3.5e-4], [0] * 4, 1e-4)
    assert bars["ylim"][1] < 1e-3 and bars["texts"] == [1e-4, 2e-4, 3e-4, 3.5e-4], bars


def test_a_phase_figure_names_its_colour_scale_and_tells_small_values_from_zero(tmp_path,
                                                                               monkeypatch):
    """The phase kind's colour bar was labelled 'accuracy' whatever it drew and ended at `vmax`
    without a sign: a loss panel's 3.9 and 2.4 were both its top colour, as if both were 1; an
    accuracy of 0.004 was written '.00', as a cell of exactly 0 (round 30)."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import phase as kind

    cells = pd.DataFrame({"label": ["A", "A"], "task.g": [0.5, 1.0], "model.n_layers": [2, 2],
                          "n_expected": 1, "n_ok": 1, "n_diverged": 0, "complete": True,
                          "test.acc": [0.004, 0.0], "test.loss": [3.9, 2.4]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[], claims=[], claim="c",
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "task.g", "model.n_layers"],
                        lambda stem, ext: tmp_path / ext)
    seen = {}
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.update(
        texts=[t.get_text() for ax in fig.axes for t in ax.texts],
        bar=[(ax.get_ylabel(), getattr(ax, "_colorbar", None)) for ax in fig.axes][-1]))
    for metrics, label, extend in [(["test.acc"], "accuracy", "neither"),
                                   (["test.acc", "test.loss"], "test.acc, test.loss", "max")]:
        cfg = parse_figure({"kind": "phase", "x": "task.g", "y": "model.n_layers",
                            "panels": [{"metric": m} for m in metrics]})
        assert kind.phase(ctx, cfg, tmp_path / "f.png")
        assert seen["texts"][:2] == [".004", ".00"], seen  # '.00', '.00'
        assert seen["bar"][0] == label and seen["bar"][1].extend == extend, seen


def _lines_legend(tmp_path, monkeypatch, cells: dict, cfg: dict) -> list[str]:
    """The legend texts of a one-panel `lines` figure (x model.d_model, hue label) of ``cells``
    (a summary's columns; one run expected per cell), drawn with the figure settings ``cfg``."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind

    cells = pd.DataFrame({"n_expected": 1, "complete": True, **cells})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.d_model"],
                        lambda stem, ext: tmp_path / ext)
    seen: list[str] = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.extend(
        t.get_text() for t in fig.axes[0].get_legend().get_texts()))
    fig = parse_figure({"kind": "lines", "x": "model.d_model", "hue": "label", "facet": None,
                        **cfg})
    assert kind.lines(ctx, fig, tmp_path / "f.png")
    return seen


def test_a_lines_hue_without_values_says_so_in_its_legend(tmp_path, monkeypatch):
    """A `lines` hue whose every cell diverged was a legend entry with nothing drawn, as if its
    line were hidden behind another; one diverged cell of a hue was a gap without a word."""
    nan = math.nan
    seen = _lines_legend(tmp_path, monkeypatch, {
        "label": ["S6", "S6", "S4D", "S4D", "T", "T"], "model.d_model": [8, 16] * 3,
        "n_ok": [1, 1, 0, 0, 1, 0], "n_diverged": [0, 0, 1, 1, 0, 1],
        "test.acc": [0.5, 0.6, nan, nan, 0.7, nan]}, {})
    assert seen == ["S6", "S4D (no value: not drawn)", "T (1 of 2 cells without a value: gaps)"], \
        seen


def test_a_bands_hue_never_takes_the_colour_of_a_named_hue(tmp_path, monkeypatch):
    """`bands` gave a hue named in its palette its own colour (hybrid: tab:green) and every
    other hue the i-th of the cycle: the third of [a, b, c, hybrid] (C2, tab:green) was drawn
    in hybrid's colour, one legend colour for two lines; past 10 hues the colours repeated."""
    from types import SimpleNamespace

    import pandas as pd
    from matplotlib.colors import to_hex

    from ssmrepro.plots import FigureContext, bands, parse_figure

    hues = ["a", "b", "c", "hybrid", *(f"h{i}" for i in range(8))]
    cells = pd.DataFrame({"label": hues, "n_params": range(10, 10 + len(hues)), "n_expected": 1,
                          "n_ok": 1, "n_diverged": 0, "complete": True, "test.acc": 0.5})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label"], lambda stem, ext: tmp_path / ext)
    seen = {}
    monkeypatch.setattr(bands, "save_png", lambda fig, path, dpi: seen.update(
        {ln.get_label(): to_hex(ln.get_color()) for ln in fig.axes[0].get_lines()}))
    cfg = parse_figure({"kind": "bands", "hue": "label", "lo": None, "hi": None})
    assert bands.bands(ctx, cfg, tmp_path / "f.png")
    assert len(seen) == len(hues) and len(set(seen.values())) == len(hues), seen
    assert seen["hybrid"] == to_hex("tab:green") and seen["a"] == to_hex("C0"), seen


def test_a_lines_band_and_line_of_a_hue_share_its_colour_in_every_panel(tmp_path, monkeypatch):
    """`lines` took colours from the axes' cycles: a hue's ± std band took the next fill colour,
    so after a hue of one seed (no band) S4D's band was drawn in S6's blue; a hue missing from a
    panel shifted the others' colours there; the 11th hue had the 1st's colour."""
    import math
    from types import SimpleNamespace

    import pandas as pd
    from matplotlib.colors import to_hex

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind

    hues = ["S6", "S4D", *(f"h{i}" for i in range(9))]
    rows = [{"label": h, "model.d_model": d, "task.T": 8, "test.acc": 0.5,
             "test.acc.std": math.nan if h == "S6" else 0.1} for h in hues for d in (8, 16)]
    rows += [{"label": "S4D", "model.d_model": d, "task.T": 4, "test.acc": 0.3,
              "test.acc.std": 0.1} for d in (8, 16)]  # T 4: S4D alone
    cells = pd.DataFrame(rows).assign(n_expected=2, n_ok=2, n_diverged=0, complete=True)
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.d_model", "task.T"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.extend(
        ({ln.get_label(): (to_hex(ln.get_color()), ln.get_marker()) for ln in ax.get_lines()},
         [to_hex(c.get_facecolor()[0]) for c in ax.collections]) for ax in fig.axes))
    cfg = parse_figure({"kind": "lines", "x": "model.d_model", "hue": "label",
                        "facet": "task.T"})
    assert kind.lines(ctx, cfg, tmp_path / "f.png")
    (lines8, fills8), (lines4, fills4) = seen
    assert len(set(lines8.values())) == len(hues), lines8  # h8 was drawn as S6
    assert fills8[0] == lines8["S4D"][0] and fills4 == [lines8["S4D"][0]], seen
    assert lines4["S4D"] == lines8["S4D"], seen  # C0 in the panel of S4D alone


def test_two_cells_on_one_square_of_a_recall_grid_are_refused(tmp_path):
    """`recall_grid` drew each cell at its (regime, label, D, N) square: with `train.lr` swept
    and not selected, two cells fell on one square and the last was drawn over the first
    without a word (validate said ok; the figure showed one learning rate's accuracy)."""
    from ssmrepro.plots import validate_outputs
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig6.yaml").read_text())
    smoke = raw["profiles"]["smoke"]
    raw.update(id="t-rg", alias=None, claims=[], paper_values=[],
               profiles={"smoke": smoke, "quick": smoke, "paper": smoke})
    # (a data key, not train.lr: the smoke profile's designed cells train 0 steps, where two
    # learning rates are one training under two ids, refused by expand itself)
    for values, bad in (([1.0], False), ([1.0, 0.5], True)):
        smoke["sweep"] = [*smoke["sweep"][:3], {"grid": {"task.power_a": values}}]
        p = tmp_path / "t-rg.yaml"
        p.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
        spec = load_spec(p)
        errors = validate_outputs(spec, expand(spec, "smoke"))
        assert bool(errors) == bad, errors
    assert "task.power_a=1" in errors[0] and "task.power_a=0.5" in errors[0], errors
    assert "fall on one spot" in errors[0] and "label=(b) designed" in errors[0], errors


def test_two_cells_of_a_lines_hue_at_its_default_x_are_refused(tmp_path):
    """A `lines` figure without `x` draws each panel over the first swept key that varies in it
    (model.d_model); with train.lr swept too, a hue's cells of both learning rates were one line
    zigzagging through both at each width, validate saying ok (a named x was already checked)."""
    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}]
    grid = {"model.d_model": [8, 16], "train.lr": [0.01, 0.02]}
    bad = write_spec(tmp_path, name="t-bad", sweep=[{"cases": cases}, {"grid": grid}],
                     figure={"kind": "lines"})
    _assert_refused(_invoke("validate", bad), "train.lr=0.01", "train.lr=0.02",
                    "fall on one spot", "model.d_model=8")
    grid = {"model.d_model": [8, 16]}  # one key varies: each hue one line over the widths
    ok = write_spec(tmp_path, sweep=[{"cases": cases}, {"grid": grid}],
                    figure={"kind": "lines"})
    res = _invoke("validate", ok)
    assert res.exit_code == 0, res.output


def test_a_learning_curve_mean_does_not_pass_a_diverged_seed_off_as_a_recovery(tmp_path,
                                                                              monkeypatch):
    """A `curves` mean of 3 seeds was `nanmean` at each step: once a seed diverged (its history
    ends), the curve went on as the mean of the 2 left, so a loss of 5.8, 8.8, 15.3 'fell' to 2.8
    at the next step, a recovery of 'the mean of 3 seeds' that never happened. The mean of every
    seed is drawn as before; where a seed has no value the others' mean is thin and faint, named
    in the legend."""

    import numpy as np
    import pandas as pd

    import ssmrepro.plots.curves as curves_mod

    loss = {0: [4.2, 3.7, 3.4, 3.2, 3.0], 1: [3.1, 2.8, 2.6, 2.5, 2.4], 2: [10, 20, 40]}
    df = pd.DataFrame([{"run_id": f"r{s}", "label": "S6", "seed": s, "status": "ok", "step": 2 * i,
                        "samples": 16 * i, "val.loss": v} for s, vs in loss.items()
                       for i, v in enumerate(vs)])
    drawn = {}
    monkeypatch.setattr(curves_mod, "save_png", lambda fig, path, **kw: drawn.update(
        lines=[(line.get_linewidth(), list(line.get_ydata())) for line in fig.axes[0].get_lines()],
        legend=[t.get_text() for t in fig.legends[0].get_texts()]))
    ctx = _curves_context(tmp_path, df)
    cfg = curves_mod.CurvesConfig(kind="curves", series=["val.loss"], ylim=None)
    assert curves_mod.curves(ctx, cfg, tmp_path / "f.png")
    (_, mean3), (thin, left) = drawn["lines"]
    assert np.allclose(mean3[:3], [np.mean([4.2, 3.1, 10]), np.mean([3.7, 2.8, 20]),
                                   np.mean([3.4, 2.6, 40])]) and np.isnan(mean3[3:]).all(), mean3
    assert thin < 1 and np.isnan(left[:2]).all() and np.allclose(left[3:], [2.85, 2.7]), left
    assert drawn["legend"][-1] == curves_mod.FEWER_SEEDS, drawn


def test_the_worst_seed_of_a_loss_is_never_a_seed_that_did_not_diverge(tmp_path):
    """`reduce: max` skipped a diverged seed (right for the best of an accuracy), also for a loss,
    whose max is its worst seed: a cell with a diverged seed reported the worst of the others,
    labelled 'worst of 2 seeds'; `min` of a loss, its best seed, was NaN for a diverged one."""
    import math

    import pandas as pd
    from test_checks import Run

    from ssmrepro.report import aggregate

    runs = [Run("S6", {}, s) for s in (0, 1)]
    df = pd.DataFrame({"run_id": ["r0", "r1"], "label": "S6", "seed": [0, 1],
                       "status": ["ok", "diverged"], "test.acc": [0.8, math.nan],
                       "test.loss": [0.5, math.nan]})

    def cell(reduce):
        row = aggregate(df, runs, reduce, ["test.acc", "test.loss"]).iloc[0]
        return row["test.acc"], row["test.loss"]

    acc, loss = cell("max")
    assert acc == 0.8 and math.isnan(loss), (acc, loss)  # loss 0.5: 'worst' of one
    acc, loss = cell("min")
    assert math.isnan(acc) and loss == 0.5, (acc, loss)  # the best loss of the seeds


def test_a_heatmap_lays_out_the_papers_cells_in_a_case_label_panel(tmp_path, monkeypatch):
    """`cells_from_paper` matched a paper value to a panel by `str(where.get(col))`: for
    cooper2026-tab1's `col: "case:1"` that was 'None', never its panel '', so the smoke figure
    showed its one trained cell and none of the 17 other cells the paper prints, without a
    word (a composite label, or a width 8 beside a panel '8.0', missed the same way)."""
    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind
    from ssmrepro.spec import load_spec

    spec = load_spec(ROOT / "experiments/cooper2026/cooper2026-tab1.yaml")
    cells = pd.DataFrame({"label": ["Hybrid"], "task.p": [0.5], "n_expected": 1, "n_ok": 1,
                          "n_diverged": 0, "complete": True, "p02.acc": [0.3]})
    ctx = FigureContext(spec, "smoke", cells, ["label", "task.p"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.extend(
        t.get_text() for t in fig.axes[0].texts))
    assert kind.heatmaps(ctx, parse_figure(spec.figure_configs[0][1]), tmp_path / "f.png")
    assert len(seen) == 18 and "0.30 (0.77)" in seen, seen
    assert sum(t.startswith("not run (") for t in seen) == 17, seen
    from ssmrepro.plots.figures import _in_panel

    assert _in_panel({"label": "S6", "model.d_model": 8}, "label", "S6 / wide")
    assert _in_panel({"label": "S6", "model.d_model": 8}, "model.d_model", 8.0)
    assert not _in_panel({"label": "S6"}, "model.d_model", 8.0)


def test_the_front_page_links_every_figure_of_a_spec_named_ones_too(tmp_path):
    """The front page listed `figure*.png` alone: a figure with its own `name` (cooper2026-fig13's
    `last.png`, huang2025-tabA1-A4's `curves.png` and `curves-long.png`, ...: 9 committed images)
    was drawn and committed but on no front page, without a word."""
    from ssmrepro.plots.frontpage import Target, _describe
    from ssmrepro.spec import load_spec

    for sid, want in (("cooper2026-fig13", ["figure", "last", "report"]),
                      ("huang2025-tabA1-A4", ["curves-long", "figure-long", "report-long",
                                              "curves", "figure", "report"])):
        _committed(tmp_path, sid)
        spec = load_spec(ROOT / f"experiments/{sid.split('-')[0]}/{sid}.yaml")
        t = Target(sid, None, spec.paper, 1)
        _describe(t, spec, tmp_path / "out", tmp_path / "out")
        assert [text for text, _ in t.links] == want, t.links


def test_a_lines_value_of_zero_on_a_log_axis_is_said(tmp_path, monkeypatch):
    """A `logy` lines panel with a cell whose value is 0 (a loss at exactly 0, an accuracy of 0)
    beside positive ones drew the hue without that cell, which a log axis has no place for,
    without a word."""
    seen = _lines_legend(tmp_path, monkeypatch, {
        "label": ["S6", "S6", "S4D", "S4D"], "model.d_model": [8, 16] * 2, "n_ok": 1,
        "n_diverged": 0, "test.loss": [0.0, 0.5, 0.2, 0.1]}, {"metric": "test.loss", "logy": True})
    assert seen == ["S6 (1 of 2 cells ≤ 0: off the log axis)", "S4D"], seen


def test_a_learning_curve_point_of_zero_on_a_log_axis_is_said(tmp_path, monkeypatch):
    """A `logy` curves panel left out a point at 0 (a training loss of exactly 0, an accuracy of
    0 beside positive ones): the curve ended or began mid-panel, without a word."""

    import pandas as pd

    import ssmrepro.plots.curves as curves_mod

    df = pd.DataFrame({"run_id": "r0", "label": "S6", "seed": 0, "status": "ok",
                       "step": [0, 2, 4], "samples": [0, 16, 32], "val.loss": [2.0, 0.5, 0.0]})
    drawn = []
    monkeypatch.setattr(curves_mod, "save_png", lambda fig, path, **kw: drawn.extend(
        t.get_text() for t in fig.legends[0].get_texts()))
    ctx = _curves_context(tmp_path, df)
    for logy, said in ((True, True), (False, False)):
        drawn.clear()
        cfg = curves_mod.CurvesConfig(kind="curves", series=["val.loss"], logy=logy, ylim=None)
        assert curves_mod.curves(ctx, cfg, tmp_path / "f.png")
        assert ("1 point(s) at or below 0: off the log y axis" in drawn) == said, drawn


def test_a_bar_whose_cell_lacks_its_x_key_is_named_by_its_label(tmp_path, monkeypatch):
    """`bars` with `x: model.d_state` beside a Transformer (no state size): its bar was named
    'nan', and the others '4.0', '8.0' (the column read back as floats), not as the keys print."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind

    cells = pd.DataFrame({"label": ["S6", "S6b", "T"], "model.d_state": [4.0, 8.0, math.nan],
                          "n_expected": 1, "n_ok": 1, "n_diverged": 0, "complete": True,
                          "test.acc": [0.5, 0.6, 0.7]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.d_state"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.extend(
        t.get_text() for t in fig.axes[0].get_xticklabels()))
    assert kind.bars(ctx, parse_figure({"kind": "bars", "x": "model.d_state"}), tmp_path / "f")
    assert seen == ["4", "8", "T (no d_state)"], seen


def test_two_cells_in_one_output_distribution_panel_are_refused(tmp_path):
    """`output_distribution` draws a panel per (label, heads M) of the cells its `where` selects;
    with the default `where: [{}]` over N = 2 and 4 two cells fell in each panel, their
    histograms drawn over each other under the title of the last, validate saying ok."""
    from ssmrepro.plots import validate_outputs
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig14.yaml").read_text())
    raw.update(id="t-od", alias=None)
    for where, bad in (([{"model.d_state": 2}], False), ([{}], True)):
        raw["figure"]["where"] = where
        p = tmp_path / "t-od.yaml"
        p.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
        spec = load_spec(p)
        errors = [e for e in validate_outputs(spec, expand(spec, "quick")) if "figure:" in e]
        assert bool(errors) == bad, errors
    assert "model.d_state=2" in errors[0] and "model.d_state=4" in errors[0], errors
    assert "fall on one spot (label=MHA, model.heads=1)" in errors[0], errors


def test_two_builds_of_one_spec_at_once_leave_the_outputs_of_every_record(tmp_path, monkeypatch):
    """`plot` while `run` writes (or two `run --max-runs 1` of one spec): a build that read the
    records before the other's last record wrote its results.csv, figure and report after the
    other's, so the outputs held one run of two while both records were there, and when the
    writes interleaved results.csv said 2 runs and report.md 1 finished, exit 0 (round 30). One
    build of a results folder at a time: the second reads the records after the first is done."""
    import threading

    from ssmrepro.plots import outputs
    from ssmrepro.spec import load_spec

    path = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                                                     {"label": "S4D",
                                                      "set": {"model.mixer": "s4d"}}]}],
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                                "val_size": 16, "test_size": 16, "eval_every": 2})
    out = tmp_path / "out"
    res = _invoke("run", path, "--profile", "smoke", "--out", out, "--no-plot", "--workers", "1")
    assert res.exit_code == 0, res.output
    spec = load_spec(path)
    root = out / "tests" / spec.id
    (root / "results-smoke.csv").unlink()
    late = sorted((root / "runs").glob("*.json"))[-1]
    aside = tmp_path / late.name
    late.rename(aside)  # the second run's record is not written yet when the first build reads
    read, release = threading.Event(), threading.Event()
    load = outputs.load_table

    def slow_load(*a, **kw):
        df = load(*a, **kw)
        if threading.current_thread().name == "early":
            read.set()
            release.wait(30)
        return df

    monkeypatch.setattr(outputs, "load_table", slow_load)
    early = threading.Thread(target=outputs.build, args=(spec, "smoke", root), name="early")
    early.start()
    assert read.wait(30)
    aside.rename(late)  # the run ends and its command builds the outputs
    later = threading.Thread(target=outputs.build, args=(spec, "smoke", root), name="later")
    later.start()
    later.join(0.5)
    waited = later.is_alive()
    release.set()
    early.join(30)
    later.join(30)
    rows = (root / "results-smoke.csv").read_text().splitlines()
    assert len(rows) == 3, rows
    assert "2 runs expected, 2 finished" in (root / "report-smoke.md").read_text()
    assert waited, "the second build did not wait for the first"


def test_a_weights_figure_of_no_finished_cell_after_a_spec_edit_is_removed(tmp_path):
    """A saved-weights figure (koren2026-fig2's invariant operators, fig14's output
    distribution) after a spec edit with no run of the new spec trained: `plot` said `not
    drawn: no finished cell ...` and kept the old image, of the runs no longer planned, beside a
    report of '0 of 1 runs finished' (the other kinds' old figure is removed: round 30)."""
    kw = dict(save_weights=True, analysis=["output_variance"],
              task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2},
              train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                     "val_size": 16, "test_size": 16, "eval_every": 2},
              figures=[{"kind": "output_distribution", "name": "dist", "where": [{"label": "S6"}]}])
    spec = _one_run_spec(tmp_path, **kw)
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    figure = tmp_path / "out" / "tests" / "t-spec" / "dist-smoke.png"
    assert figure.is_file()
    spec = _one_run_spec(tmp_path, **kw, profiles={"smoke": {"set": {"train.max_steps": 6}},
                                                   "quick": {}, "paper": {}})
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "0 of 1 runs finished" in said, said
    assert "dist-smoke.png not drawn: no finished cell of profile smoke to draw" in said, said
    assert "the old dist-smoke.png removed" in said, said
    assert not figure.exists()


def test_a_fresh_clones_tables_lose_the_rows_of_runs_trained_before_a_spec_edit(tmp_path):
    """A fresh clone (committed results.csv and curves.csv, no runs/) and a spec edited since
    (train.lr): `plot` said the rows are not used and reported '0 of 2 runs finished', removed
    figure.png and summary.csv, but left both tables on disk as they were, two `ok` runs of
    the old spec, and `export` exported them as the spec's results, exit 0 (round 30). `export`
    leaves them out with plot's warning, and `plot` writes the tables without them (no table at
    all when none is left), as after a corpus switch."""
    project = tmp_path / "proj"
    (project / "experiments/tests").mkdir(parents=True)
    (project / "ssmrepro").mkdir()
    env = {"SSMREPRO_ROOT": str(project)}
    spec = _one_run_spec(project / "experiments/tests",
                         sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                                           {"label": "S4D", "set": {"model.mixer": "s4d"}}]}],
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                                "val_size": 16, "test_size": 16, "eval_every": 2})
    out = tmp_path / "out"
    args = ["--out", out, "--profile", "smoke"]
    assert runner.invoke(app, ["run", "t-spec", *map(str, args), "--workers", "1"],
                         env=env).exit_code == 0
    root = out / "tests" / "t-spec"
    shutil.rmtree(root / "runs")
    table, curves = root / "results-smoke.csv", root / "curves-smoke.csv"
    assert table.is_file() and curves.is_file()
    edited = dict(yaml.safe_load(spec.read_text()))
    edited["train"] = {**edited["train"], "lr": 0.02}
    spec.write_text(yaml.safe_dump(edited, sort_keys=False))
    res = runner.invoke(app, ["export", "--out", str(out), "--file", str(tmp_path / "e.csv")],
                        env=env)
    assert res.exit_code == 0, res.output
    assert "0 rows" in res.output and "the spec changed since it was trained" in res.output
    res = runner.invoke(app, ["plot", "t-spec", *map(str, args)], env=env)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "0 of 2 runs finished" in said and "the spec changed since it was trained" in said
    assert not table.exists() and not curves.exists(), sorted(p.name for p in root.iterdir())


def test_learning_curves_are_not_drawn_for_runs_without_a_results_row(tmp_path):
    """A fresh clone (no runs/) whose results.csv was deleted by hand: `plot` reported '0 of 2
    runs finished' and removed figure.png, but drew the `curves` figure from curves.csv, the
    learning curves of runs it counted as not finished, exit 0 (round 30). A run's curves are
    drawn only beside its results row; the curves figure is not drawn either."""
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                                                     {"label": "S4D",
                                                      "set": {"model.mixer": "s4d"}}]}],
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                                "val_size": 16, "test_size": 16, "eval_every": 2},
                         figures=[{"kind": "bars", "metric": "test.acc", "x": "label"},
                                  {"kind": "curves", "name": "lc", "series": ["val.acc"],
                                   "hue": ["label"]}])
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--workers", "1").exit_code == 0
    root = tmp_path / "out" / "tests" / "t-spec"
    assert (root / "lc-smoke.png").is_file()
    shutil.rmtree(root / "runs")
    (root / "results-smoke.csv").unlink()
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "0 of 2 runs finished" in said, said
    assert "lc-smoke.png not drawn: no finished cell" in said, said
    assert not (root / "lc-smoke.png").exists()


def test_a_results_folder_held_by_a_stopped_command_is_passed_once(tmp_path, capsys):
    """The lock one build of a results folder holds at a time (round 30): a holder stopped
    with ^Z is waited for ``wait_s`` seconds, then passed with a warning, and not waited for
    again by the same process (`run` writes its table after every pack: it waited the full
    time at each)."""
    import fcntl

    from ssmrepro.util import folder_lock

    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the stopped holder
    try:
        t0 = time.monotonic()
        with folder_lock(tmp_path, "writing", wait_s=0.2):
            pass
        first = time.monotonic() - t0
        said = capsys.readouterr().err
        t0 = time.monotonic()
        with folder_lock(tmp_path, "writing", wait_s=0.2):
            pass
        second = time.monotonic() - t0
    finally:
        os.close(fd)
    assert 0.2 <= first < 5 and second < 0.1, (first, second)
    assert "waiting for another process writing" in said and "going on without waiting" in said
    assert capsys.readouterr().err == ""
    with folder_lock(tmp_path, "writing", wait_s=0.2):  # free now: taken
        busy = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(busy, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(busy)


def test_a_fresh_clones_row_of_a_removed_sweep_value_is_no_cell_of_the_profile(tmp_path):
    """A fresh clone (no runs/) of a spec whose grid lost a value (model.d_model [8, 12] ->
    [8]): the committed row of d_model = 12 stood as a cell of the profile, drawn, in
    summary.csv and counted: '1 runs expected, 2 finished', exit 0 (round 30). It is dropped
    with a warning, as a row of a run trained before an edit of another setting is."""
    grid = {"grid": {"model.d_model": [8, 12]}}
    spec = _one_run_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]},
                                          grid],
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                                "val_size": 16, "test_size": 16, "eval_every": 2})
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--workers", "1").exit_code == 0
    root = tmp_path / "out" / "tests" / "t-spec"
    shutil.rmtree(root / "runs")
    edited = dict(yaml.safe_load(spec.read_text()))
    edited["sweep"][1] = {"grid": {"model.d_model": [8]}}
    spec.write_text(yaml.safe_dump(edited, sort_keys=False))
    res = _invoke("plot", spec, *args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "a cell or seed no run of the profile has now" in said, said
    report = (root / "report-smoke.md").read_text()
    assert "1 runs expected, 1 finished" in report, report
    summary = (root / "summary-smoke.csv").read_text().splitlines()
    assert len(summary) == 2, summary
    assert len((root / "results-smoke.csv").read_text().splitlines()) == 2


def test_bench_and_sanity_scripts_refuse_bad_input_before_working(tmp_path, capsys):
    """scripts/bench_b2s6.py, bench_pathfinder.py and listops_sanity.py took any number: `--packs
    0` was a ZeroDivisionError traceback, `--reps 0` a StatisticsError after the warm-up, a
    folder at `--out` an IsADirectoryError after measuring, `--impls split --disc zoh` a pydantic
    traceback; `--n 0` printed `label balance: nan`, `--workers -1` ran one process and said
    workers=-1; `--seconds 0` (or nan, -1) trained no epoch and ended in load_state_dict(None)'s
    traceback, `--n-train 0` an IndexError, an empty length window a ValueError. Each is a usage
    error naming it now, exit 2, before anything is measured or generated."""
    import importlib.util

    def script(name):
        spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    cases = {
        "bench_b2s6.py": [(["--packs", "0"], "--packs: 0 is not in 1.."),
                          (["--reps", "0"], "--reps: 0 is not in 1.."),
                          (["--packs", "1", "1"], "--packs: 1 given twice"),
                          (["--impls", "bogus"], "invalid choice: 'bogus'"),
                          (["--shape", "lra", "--packs", "256"], "above 268,435,456 (2^28)"),
                          (["--out", str(tmp_path)], "a folder where a file belongs"),
                          (["--packs", "1", "--impls", "split", "--disc", "zoh"],
                           "impl 'split' needs discretization 'euler'")],
        "bench_pathfinder.py": [(["--n", "0"], "--n: 0 is not in 1.."),
                                (["--workers", "-1"], "--workers: -1 is not in 1.."),
                                (["--res", "256", "--n", "100000"], "at most 16,384 images")],
        "listops_sanity.py": [(["--seconds", s], f"--seconds: {s} is not a time above 0")
                              for s in ("0", "nan", "-1", "inf")]
        + [(["--n-train", "0"], "--n-train: 0 is not in 1.."),
           (["--min-length", "300"], "empty length window: 300 < length < 200")],
    }
    for name, inputs in cases.items():
        mod = script(name)
        for argv, needle in inputs:
            with pytest.raises(SystemExit) as exc:
                mod.main(argv)
            err = capsys.readouterr().err
            assert exc.value.code == 2 and needle in err, (name, argv, err)
    assert list(tmp_path.iterdir()) == []


def test_bench_scans_refuses_a_shape_option_no_chosen_kernel_reads(tmp_path, capsys):
    """`bench scans --kernels diag --groups 4 --width 7` timed diag as always and wrote a record
    whose args said groups 4 and width 7, exit 0 (likewise --heads without ssd, --n with conv
    alone, --chunk with ssd or without the chunked variant, --ssd-chunk without ssd). Each is a
    usage error now, before measuring; the committed records' options all pass."""
    from ssmrepro.bench.scans import KERNEL_VARIANTS, main

    def VARIANTS_OF(args):  # noqa: N802
        return list(dict.fromkeys(KERNEL_VARIANTS[k][0] for k in args["kernels"]))

    out = tmp_path / "s.json"
    for argv, needle in [
        (["--kernels", "diag", "--groups", "4"], "--groups 4: no kernel of --kernels diag"),
        (["--kernels", "diag", "selective", "--width", "7"], "--width 7: no kernel"),
        (["--kernels", "diag", "--heads", "2"], "--heads 2: no kernel"),
        (["--kernels", "conv", "--n", "16"], "--n 16: no kernel of --kernels conv"),
        (["--kernels", "ssd", "--chunk", "8"], "--chunk 8: no kernel of --kernels ssd"),
        (["--kernels", "diag", "--variants", "blocked", "--chunk", "8"],
         "--chunk 8: only the chunked variant reads it"),
        (["--kernels", "diag", "--ssd-chunk", "8"], "--ssd-chunk 8: no kernel"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--json", str(out)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and needle in err, (argv, err)
    assert not out.exists()
    for f in (ROOT / "results" / "bench").glob("*.json"):  # the committed records' options
        args = json.loads(f.read_text()).get("args") or {}
        if "kernels" in args:
            argv = ["--kernels", *args["kernels"], "--n", str(args["n"]), "--groups",
                    str(args["groups"]), "--width", str(args["width"]), "--heads",
                    str(args["heads"]), "--variants", *(args["variants"] or VARIANTS_OF(args)),
                    "--L", "2", "--batch", "1", "--d", str(args["heads"]), "--repeats", "1",
                    "--warmup", "0", "--no-ref"]  # the shape made tiny: timed in milliseconds
            assert main(argv) == 0, (f.name, capsys.readouterr().err)
    capsys.readouterr()


def test_list_and_show_tables_lose_no_character_to_a_narrow_console(tmp_path, monkeypatch):
    """In 80 columns (a terminal, or any pipe or file) `list` printed six different specs as
    `cooper2026-fig…` and aliases cut the same way; at 20 columns `show`'s run table was empty
    boxes (no run id, label or status). Ids and run ids are kept whole now, other cells fold onto
    more lines, and a table that cannot fit is printed as wide as it needs."""
    import ssmrepro.cli.experiments as experiments
    from ssmrepro.cli.app import console
    from ssmrepro.spec import find_spec, spec_paths
    from ssmrepro.sweep import expand

    # the specs whose ids were cut (cooper2026-fig10 ... fig16), not all 49 (seconds each)
    paths = [p for p in spec_paths() if p.stem.startswith("cooper2026-fig1")]
    monkeypatch.setattr(experiments, "_project_specs", lambda: paths)
    ids = [p.stem for p in paths]  # each spec file is named by its id
    assert len(ids) >= 4
    runs = expand(find_spec("keep-nth"), "smoke")
    monkeypatch.setattr(console, "_width", 80)
    res = _invoke("list", "--out", str(tmp_path / "none"))
    assert res.exit_code == 0 and "…" not in res.output, res.output
    cells = [ln.split("│")[1].strip() for ln in res.output.splitlines() if ln.startswith("│")]
    assert set(ids) <= set(cells), sorted(set(ids) - set(cells))
    for width in (80, 20):
        monkeypatch.setattr(console, "_width", width)
        res = _invoke("show", "keep-nth", "--profile", "smoke", "--out", str(tmp_path / "none"))
        assert res.exit_code == 0 and "…" not in res.output, res.output
        rows = [ln.split("│") for ln in res.output.splitlines() if ln.startswith("│")]
        assert [r.run_id for r in runs] == [c[2].strip() for c in rows if c[2].strip()]
        labels = "".join(c[3].strip() for c in rows)
        assert labels == "".join(r.label for r in runs), labels


def test_bench_scans_no_ref_names_its_base_not_the_reference(capsys):
    """`bench scans --no-ref` printed each case's first variant's times under `ref cpu ms` and the
    speed-ups over it as if over the reference (`--variants fused fused-v1`: fused-v1 is the base,
    the order of the variant list notwithstanding). The column is `base cpu ms` now and a line
    names each kernel's base."""
    from ssmrepro.bench.scans import main

    assert main(["--kernels", "selective", "--variants", "fused", "fused-v1", "--no-ref",
                 "--L", "8", "--batch", "1", "--d", "2", "--n", "1", "--repeats", "1",
                 "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "ref cpu ms" not in out and "base cpu ms" in out, out
    assert "each kernel's first variant: selective fused-v1" in out, out


def test_one_step_run_warming_up_from_zero_is_refused():
    """A run of one step (`max_steps: 1`, or one epoch of one batch) with a warm-up from
    warmup_start 0 trains its only step at learning rate 0: it ended 'ok' with its step-0
    numbers, untrained. Refused, naming the warm-up; a warmup_start above 0, a min_lr, or more
    steps train."""
    from pydantic import ValidationError

    from ssmrepro.sweep.config import TrainConfig

    warm = {"kind": "linear", "warmup_steps": 5}
    for budget in ({"max_steps": 1}, {"epochs": 1, "train_size": 40, "batch_size": 32}):
        with pytest.raises(ValidationError, match="learning rate 0 .*untrained"):
            TrainConfig(**budget, schedule=warm)
    for ok in ({"max_steps": 1, "schedule": {**warm, "warmup_start": 0.1}},
               {"max_steps": 1, "schedule": {**warm, "min_lr": 1e-4}},
               {"max_steps": 2, "schedule": warm}, {"max_steps": 0, "schedule": warm},
               {"max_steps": 1, "schedule": {"kind": "linear"}}):
        TrainConfig(**ok)


def test_lr_scale_of_a_group_the_model_lacks_is_refused(tmp_path):
    """`train.lr_scale: {delta: 0.1}` on a Transformer (no Δ, no Λ) or a plain S4D core (Λ, no Δ):
    no parameter is in the group, so the scale changed nothing and the run trained at the plain
    lr under another run id, `validate` ok. `validate` and `run` refuse it, exit 2, naming the
    group and the model's groups; an S6 model (both groups) passes."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import lr_scale_problems

    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
             "test_size": 8, "eval_every": 2, "eval_batch_size": 8,
             "lr_scale": {"delta": 0.1, "A": 0.5}}
    tf = {"label": "T", "set": {"model": {"name": "transformer_lm", "d_model": 8, "heads": 2}}}
    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}, tf]
    runs = expand(load_spec(write_spec(tmp_path, train=train, seeds=[0],
                                       sweep=[{"cases": cases}])), "smoke")
    bad = lr_scale_problems(runs)
    assert len(bad) == 2, bad
    assert "run S4D scales learning-rate group 'delta'," in bad[0] and "groups: A)" in bad[0]
    assert "run T scales learning-rate groups 'delta', 'A'" in bad[1] and "none)" in bad[1]
    path = write_spec(tmp_path, name="t-tf", train=train, seeds=[0], sweep=[{"cases": [tf]}])
    for args in (("validate", path), ("run", path, "--profile", "smoke", "--out", tmp_path / "o"),
                 ("run", path, "--dry-run", "--no-estimate", "--out", tmp_path / "o")):
        _assert_refused(_invoke(*args), "train.lr_scale: run T", "would change nothing")
    assert not (tmp_path / "o").exists()


def test_coords_text_tells_apart_swept_keys_that_end_in_one_name(tmp_path):
    """`show` named each swept value by the last part of its key: `model.d_state` and
    `model.blocks.x.d_state` both read `d_state` (`d_state=4, d_state=8`: which is which?).
    Now by the shortest last parts that tell the keys apart; a key alone keeps its short name."""
    import dataclasses

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.sweep.config import short_keys

    run = expand(load_spec(_one_run_spec(tmp_path)), "smoke")[0]
    two = dataclasses.replace(run, coords={"model.d_state": 4, "model.blocks.x.d_state": 8,
                                           "train.lr": 0.01})
    assert two.coords_text() == "model.d_state=4, x.d_state=8, lr=0.01"
    assert two.coords_text(drop=("train.lr",)) == "model.d_state=4, x.d_state=8"
    assert short_keys(["d_state", "model.d_state", "a.b.c", "x.b.c", "seed"]) == {
        "d_state": "d_state", "model.d_state": "model.d_state", "a.b.c": "a.b.c",
        "x.b.c": "x.b.c", "seed": "seed"}


def test_failure_and_parameter_count_lines_name_a_run_by_its_typed_values(tmp_path, capsys):
    """The engine's line for members of a pack that failed on their own, and the warning about a
    cell's disagreeing parameter counts, named an unlabelled run by the spec's raw text: the
    quoted `" 2"` of an integer field as `n= 2` (the run has n = 2), where `show` says `n=2`."""
    import pandas as pd

    from ssmrepro.engine.local import WorkSettings, _without
    from ssmrepro.plots.outputs import _params_disagree
    from ssmrepro.report.columns import N_PARAMS, RUN_ID
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.util import MemberError

    spec = _one_run_spec(tmp_path, sweep=[{"grid": {"task.n": [" 2", 3]}}], seeds=[0, 1])
    runs = expand(load_spec(spec), "smoke")
    assert {r.label for r in runs} == {""}, [r.label for r in runs]
    pack = [r for r in runs if r.seed == 0]
    err = MemberError("bad", members=(0, 1), reasons={0: "first", 1: "second"})
    res = _without(pack, err, WorkSettings("cpu", "torch"), None, None, None)
    assert "n=2 seed 0: " in res.message and "n= 2" not in res.message, res.message
    two = [r for r in runs if r.typed_coords()["task.n"] == 2]
    table = pd.DataFrame({RUN_ID: [r.run_id for r in two], N_PARAMS: [100, 101]})
    _params_disagree(table, {r.run_id: r for r in runs})
    warned = capsys.readouterr().err
    assert "of the cell n=2, which" in warned and "n= 2" not in warned, warned


def test_listops_sanity_scores_an_evaluation_set_in_bounded_batches(tmp_path, monkeypatch):
    """scripts/listops_sanity.py scored the whole validation and test set in one batch: with
    `--n-eval` up to 2^20 and `--max-length` up to 100,000 that is n x length x 64 floats at once
    (far beyond any memory). Now in batches of at most EVAL_TOKENS padded tokens, same accuracy."""
    import importlib.util

    import numpy as np
    import torch

    from ssmrepro.data import load_lra
    from ssmrepro.data.listops import SPLIT_FILES, VOCAB_SIZE, generate_listops, write_listops_tsv

    spec = importlib.util.spec_from_file_location("_script_sanity", ROOT / "scripts" / "listops_sanity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    splits = generate_listops(1, 200, 1, seed=3, min_length=3, max_length=60)
    for split, fname in SPLIT_FILES.items():
        write_listops_tsv(tmp_path / "generated" / "listops" / fname, splits[split])
    val = load_lra("listops", "val", root=tmp_path)
    torch.manual_seed(0)
    model = mod.PoolClassifier(VOCAB_SIZE)
    with torch.no_grad():
        b = val.batch(np.arange(len(val)))
        whole = float((model(torch.from_numpy(b["x"]), torch.from_numpy(b["lengths"]))
                       .argmax(-1).numpy() == b["labels"]).mean())
    shapes = []
    real_forward = mod.PoolClassifier.forward

    def forward(self, x, lengths):
        shapes.append(tuple(x.shape))
        return real_forward(self, x, lengths)

    monkeypatch.setattr(mod.PoolClassifier, "forward", forward)
    monkeypatch.setattr(mod, "EVAL_TOKENS", 500)
    assert mod.accuracy(model, val) == pytest.approx(whole)
    assert len(shapes) > 5 and sum(n for n, _ in shapes) == len(val), shapes
    assert all(n * length <= 500 for n, length in shapes), shapes
    assert [len(i) for i in mod.eval_batches(np.array([900, 5, 5]), 100)] == [2, 1]  # alone


def test_listops_draws_only_the_trees_it_keeps_of_its_last_chunk(monkeypatch):
    """`data generate listops --n 20 --min-length 1990 --max-length 2000` drew a whole chunk of
    256 trees in the window (~7000 tries each: minutes) to keep 20. In-process a chunk is now
    drawn only as far as its trees are used (16 s there); the data are those of the whole chunk
    (its first trees), so every setting's data stay the same."""
    import random

    from ssmrepro.data import listops

    kw = dict(min_length=600, max_length=700, max_depth=10, max_args=10, op_prob=0.25)
    calls = []
    real = listops.sample_tree
    monkeypatch.setattr(listops, "sample_tree", lambda *a, **k: calls.append(1) or real(*a, **k))
    full = listops._generate_chunk(0, seed=5, n_accept=64, **kw)
    whole = len(calls)
    calls.clear()
    got = listops.generate_listops(2, 1, 1, seed=5, chunk_size=64, **kw)
    assert len(calls) < whole / 4, (len(calls), whole)
    pool = list(dict(full).items())[:4]  # the first 4 distinct trees, in order
    random.Random(listops._chunk_seed(5, -1)).shuffle(pool)
    assert [t for s in ("train", "val", "test") for t in got[s].tokens] == [t for t, _ in pool]
    assert [int(v) for s in ("train", "val", "test") for v in got[s].labels] == [v for _, v in pool]
    monkeypatch.setattr(listops, "iter_chunks", None)  # one chunk's worth: no worker processes
    again = listops.generate_listops(2, 1, 1, seed=5, chunk_size=64, workers=2, **kw)
    assert all(again[s].tokens == got[s].tokens for s in got)


def test_a_dry_runs_untimed_line_of_an_unlabelled_run_has_no_empty_name(tmp_path, monkeypatch):
    """The dry run's line for runs whose memory shrank between its split and their timing read
    `run : no batch fits ...` for an unlabelled run (the empty label), where the planner's other
    lines say `run (...)`; a labelled run keeps its label."""
    import ssmrepro.engine as engine
    from ssmrepro.spec import load_spec

    for label, want in (("S6", "run S6: no batch fits"), ("", "run: no batch fits")):
        (tmp_path / (label or "none")).mkdir()
        spec = load_spec(_one_run_spec(tmp_path / (label or "none"), sweep=[
            {"cases": [{"label": label, "set": {"model.mixer": "s6"}}]}] if label else []))
        monkeypatch.setattr(engine, "split_by_memory",
                            lambda runs, device, extrapolate_ok: ([], [list(runs)], [], []))
        monkeypatch.setattr(engine, "extrapolate", lambda *a, **k: None)
        d = engine.dry_run(spec, "smoke", out=tmp_path / "out" / (label or "none"))
        assert len(d.untimed) == 1 and d.untimed[0].startswith(want), d.untimed


def test_a_tolerance_as_wide_as_an_analysis_metrics_range_is_refused(tmp_path):
    """A monotone, spread or collapse claim (or a paper value) on an analysis share
    (gkq.diag_hit, in [0, 1]) with ``tol: 1`` admitted any value, as a tolerance of 1 on an
    accuracy does, but only the accuracy was refused; a correlation ([-1, 1]) at ``tol: 2``
    too; and a collapse ``min_range`` wider than the share's range never PASSed, as a claim
    ``hidden.corr > 1`` (or ``>= -1``, which never fails). A tolerance narrower than the range
    is taken."""
    raw = yaml.safe_load((ROOT / "experiments/koren2026/koren2026-fig2.yaml").read_text())
    raw.update(id="t-fig2", alias=None)
    spec = tmp_path / "t-fig2.yaml"
    for claim, pvs, needle in (
            ({"check": "monotone", "along": "model.d_model", "tol": 1.0}, [],
             "claims.6.tol: 1 for gkq.diag_hit admits any value (a fraction lies in [0, 1]"),
            ({"check": "spread", "group_by": ["label"], "tol": 1.5}, [],
             "claims.6.tol: 1.5 for gkq.diag_hit admits any value"),
            ({"check": "collapse", "by": "model.d_model", "tol": 1.0}, [],
             "claims.6.tol: 1 for gkq.diag_hit admits any value"),
            ({"check": "monotone", "along": "model.d_model", "tol": 2.0,
              "metric": "hidden.corr"}, [],
             "claims.6.tol: 2 for hidden.corr admits any value (a correlation lies in [-1, 1])"),
            (None, [{"where": {"label": "trained"}, "metric": "gkq.diag_hit", "value": 0.5,
                     "tol": 0.5}], "paper_values.0.tol: 0.5 ± 0.5 covers every value of a "
             "fraction [0, 1]"),
            ({"check": "collapse", "by": "model.d_model", "tol": 0.1, "min_range": 1.5}, [],
             "claims.6.min_range: 1.5 for gkq.diag_hit: a fraction lies in [0, 1], so group "
             "means never span more than 1"),
            ({"metric": "hidden.corr", "op": ">", "value": 1.0}, [],
             "claims.6.value: hidden.corr > 1 never holds (a correlation lies in [-1, 1]"),
            ({"metric": "hidden.corr", "op": ">=", "value": -1.0}, [],
             "claims.6.value: hidden.corr >= -1 holds for every run (a correlation lies in "
             "[-1, 1]): the claim cannot fail"),
            ({"check": "monotone", "along": "model.d_model", "tol": 0.5}, [], None)):
        extra = [] if claim is None else [{"text": "x", "metric": "gkq.diag_hit", **claim}]
        spec.write_text(yaml.safe_dump({**raw, "claims": raw["claims"] + extra,
                                        "paper_values": pvs}, sort_keys=False,
                                       allow_unicode=True))
        res = _invoke("validate", spec)
        if needle is None:
            assert res.exit_code == 0, res.output
        else:
            _assert_refused(res, needle)


def test_a_reused_or_named_spec_file_that_is_not_there_is_named_as_missing(tmp_path):
    """A `reuse:` spec file moved or deleted (`reuse: [sub/t30.yaml]`), or `show x.yaml` of no
    file, said "unknown experiment 'sub/t30.yaml'", as for a mistyped id: the message names the
    file that is not there (exit 2 as before)."""
    spec = write_spec(tmp_path, reuse=["sub/t30.yaml"])
    _assert_refused(_invoke("validate", spec), "reuse.0: no spec file "
                    f"{tmp_path / 'sub' / 't30.yaml'} (no such file: moved or deleted?)")
    res = _invoke("show", tmp_path / "gone.yml")
    _assert_refused(res, f"no spec file {tmp_path / 'gone.yml'} (no such file")
    assert "unknown experiment" not in res.output
    _assert_refused(_invoke("show", "huang2025-tab1.yaml"), "no spec file huang2025-tab1.yaml",
                    "Did you mean: huang2025-tab1")
    _assert_refused(_invoke("show", "no-such-spec"), "unknown experiment 'no-such-spec'")


def test_a_heatmap_panel_by_case_mapped_by_paper_panels_shows_the_mapped_paper_value(
        tmp_path, monkeypatch):
    """`col: case:1` with `paper_panels: {v (LN): v}` (no `cells_from_paper`): the trained cell
    of panel 'v (LN)' looked its paper value up under a `case:1` key that no `where` on the
    label reads, and showed none; it shows panel v's. A `where` on another case label
    (`case:0: A`) is found for a figure too, as the report's `select` finds it, and with
    `cells_from_paper` a paper cell named by `case:1: v` is laid out in panel v."""
    import matplotlib.axes
    from test_checks import Run
    from test_outputs import _ctx, _draw

    from ssmrepro.spec import PaperValue

    runs = [Run(f"A / {c}", {"model.d": 8, "task.T": 10}) for c in ("v", "v (LN)")]
    ctx = _ctx(tmp_path, runs, [0.1, 0.9])
    texts = []
    monkeypatch.setattr(matplotlib.axes.Axes, "text",
                        lambda self, x, y, s, **kw: texts.append(s))
    raw = {"kind": "heatmaps", "col": "case:1", "x": "task.T", "y": "model.d",
           "paper_panels": {"v (LN)": "v"}}
    for where in ({"label": "A / v", "model.d": 8}, {"label": "v", "task.T": 10},
                  {"case:0": "A", "case:1": "v"}, {"model.d": 8, "case:1": "v"}):
        ctx.spec.paper_values = [PaperValue(where=where, value=0.5)]
        ctx._paper_lookup = None
        texts.clear()
        assert _draw(ctx, raw, tmp_path / "h.png")
        assert texts == ["0.10 (0.50)", "0.90 (0.50)"], (where, texts)
    texts.clear()
    assert _draw(ctx, {**raw, "paper_panels": {}}, tmp_path / "h.png")
    assert texts == ["0.10 (0.50)", "0.90"], texts  # unmapped: v (LN) has no paper value
    # with cells_from_paper, a paper cell whose `where` names the case:1 itself is laid out in
    # its panel (it was in none), as one naming it by the label
    for where in ({"label": "v", "model.d": 16, "task.T": 10},
                  {"case:1": "v", "model.d": 16, "task.T": 10}):
        ctx.spec.paper_values = [PaperValue(where=where, value=0.5)]
        ctx._paper_lookup = None
        texts.clear()
        assert _draw(ctx, {**raw, "paper_panels": {}, "cells_from_paper": True},
                     tmp_path / "h.png")
        assert texts == ["0.10", "not run (0.50)", "0.90"], (where, texts)


def test_a_paper_value_not_measured_in_a_profile_is_not_counted_as_a_cell_not_run():
    """A paper value on `long.acc` in a profile whose runs have no evaluation set `long` (only
    another profile's do): it is missing there, as designed, but the tally said '1 cells not
    run in this profile' of a cell the report shows trained. It names the reason; a cell not
    run is still counted as one."""
    from types import SimpleNamespace

    from test_checks import grid, rows_for

    from ssmrepro.report import aggregate, cell_keys, paper_value_tally, verify

    runs = grid(["S6", "S4D"], [8])
    cells = aggregate(rows_for(runs, [0.9, 0.5]), runs, "mean", ["test.acc"])
    pv = [SimpleNamespace(where={"label": lab}, metric=m, value=0.5, tol=0.05)
          for lab, m in (("S4D", "long.acc"), ("S6", "test.acc"), ("T", "test.acc"))]
    got = [v for v in verify(SimpleNamespace(claims=[], paper_values=pv, claim="c"), cells,
                             cell_keys(runs), eval_sets=set()) if v.kind == "paper_value"]
    assert [v.verdict for v in got] == ["missing", "differs", "missing"]
    assert paper_value_tally(got) == (
        "0 of 1 compared within tolerance; 1 not compared: no evaluation set 'long' in this "
        "profile; 1 cells not run in this profile")


def test_a_fresh_clones_analysis_table_loses_the_rows_of_runs_it_does_not_use(tmp_path):
    """A fresh clone (no runs/) whose spec was edited (train.lr): `plot` dropped results.csv
    and curves.csv on disk and reported '0 of 1 runs finished', but output_variance-smoke.csv
    (as mechanistic.csv, histograms.csv) kept the old run's row on disk, where a reader takes
    it for the spec's; a row of a seed the profile has not is dropped there too.
    The rows it uses stay as written."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    spec = _one_run_spec(tmp_path, save_weights=True, analysis=["output_variance"], train=train,
                         task={"name": "mqar", "vocab": 16, "L": 8, "kappa": 2})
    args = ["--out", tmp_path / "out", "--profile", "smoke"]
    assert _invoke("run", spec, *args, "--no-calibrate", "--workers", "1").exit_code == 0
    root = tmp_path / "out/tests/t-spec"
    shutil.rmtree(root / "runs")  # a fresh clone: the committed tables only
    table = root / "output_variance-smoke.csv"
    text = table.read_text()
    head, row = text.splitlines()
    seed = head.split(",").index("seed")
    seed9 = ",".join("9" if i == seed else c for i, c in enumerate(row.split(",")))
    table.write_text(text + seed9 + "\n")
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0 and "seed=9; the row is not used" in " ".join(res.output.split())
    assert table.read_text() == text  # the row used, as written; the unplanned one dropped
    raw = yaml.safe_load(spec.read_text())
    spec.write_text(yaml.safe_dump({**raw, "train": {**train, "lr": 0.02}}, sort_keys=False))
    res = _invoke("plot", spec, *args)
    assert res.exit_code == 0 and "0 of 1 runs finished" in " ".join(res.output.split())
    assert not table.exists() and not (root / "results-smoke.csv").exists()


def test_a_curves_panel_by_case_mapped_by_paper_panels_draws_the_mapped_paper_line(tmp_path):
    """A `curves` figure with `col: case:1` and `paper_panels: {v (LN): v}`: the mapping was
    applied to a `case:1` column the curve table does not have, and a `where` naming a case
    label (`case:0: A`) was never drawn, so the mapped panel drew no paper line; it draws panel
    v's. Unmapped, panel 'v (LN)' has none."""
    import pandas as pd
    from test_checks import Run
    from test_outputs import _ctx

    from ssmrepro.plots import parse_figure
    from ssmrepro.plots.curves import _paper_lines
    from ssmrepro.spec import PaperValue

    ctx = _ctx(tmp_path, [Run(f"A / {c}", {"task.T": 10}) for c in ("v", "v (LN)")], [0.1, 0.9])
    raw = {"kind": "curves", "series": "val.acc", "col": "case:1",
           "paper_as": {"test.acc": "val.acc"}, "paper_panels": {"v (LN)": "v"}}
    sub = pd.DataFrame({"label": ["A / v (LN)"], "task.T": [10]})
    for where in ({"label": "A / v", "task.T": 10}, {"label": "v"},
                  {"case:0": "A", "case:1": "v"}):
        ctx.spec.paper_values = [PaperValue(where=where, value=0.7)]
        assert _paper_lines(ctx, parse_figure(raw), sub) == [("val.acc", 0.7)], where
        assert _paper_lines(ctx, parse_figure({**raw, "paper_panels": {}}), sub) == []


def test_a_paper_panels_target_that_names_no_panel_is_refused(tmp_path):
    """`paper_panels: {S4D: S66}` (the panel whose paper values S4D's shows, misspelt): the
    panel showed no paper value, without a word, though a misspelt key was refused. A target
    that a run or a paper value names is taken (a panel of the paper's that no profile runs)."""
    pv = [{"where": {"label": "Mamba"}, "value": 0.5}]
    for kind, target, pvs, refused in (("heatmaps", "S66", [], True), ("curves", "S66", [], True),
                                       ("heatmaps", "S6", [], False),
                                       ("curves", "Mamba", pv, False)):
        fig = {"kind": kind, "col": "label", "paper_panels": {"S4D": target}, **(
            {"metric": "test.acc", "x": "task.T", "y": "model.d_model"} if kind == "heatmaps"
            else {"series": "val.acc"})}
        res = _invoke("validate", write_spec(tmp_path, figures=[fig], paper_values=pvs))
        if refused:
            _assert_refused(res, f"figures.0.paper_panels.S4D: {target!r} is no label of any "
                            "run or paper value")
        else:
            assert res.exit_code == 0, res.output


def test_a_permutations_draws_never_tie_so_no_sort_rule_can_change_the_data():
    """`permutation_keys` argsorts the 32-bit draws of one key with the default (unstable) sort;
    had two draws of a row been equal (random draws: ~4.7 ties per row of 200,000, the birthday
    bound), another device's sort could order them otherwise and the same seed give other data.
    The draws are a bijection of the counter, so no row has a tie and every sort agrees."""
    import torch

    from ssmrepro.tasks import rng

    n = 200_000
    k = rng.key(torch.arange(4), 7, n)
    b = rng.bits(k, n)
    srt = b.sort(dim=-1).values
    assert not (srt[..., 1:] == srt[..., :-1]).any()
    perm = rng.permutation_keys(k, n)
    assert torch.equal(perm, torch.argsort(b, dim=-1, stable=True))
    assert torch.equal(perm, torch.argsort(b * n + torch.arange(n), dim=-1))  # ties by index


def test_a_listops_window_with_fewer_trees_than_asked_for_is_refused_before_drawing(monkeypatch):
    """`data generate listops --n 500 --min-length 3 --max-length 5` (400 trees exist: [OP d d ])
    drew until 51 chunks in a row found no new tree (20 s here, over a minute for windows of
    thousands) before refusing; the trees of the window are now counted up front (exactly:
    checked against an enumeration) and no tree is drawn."""
    from ssmrepro.data import listops

    assert [listops.count_trees(*w) for w in [(3, 5), (3, 7), (0, 2), (1, 3)]] == [
        400, 44400, 10, 0]
    assert listops.count_trees(3, 8, max_depth=2) == 4 * (10**2 + 10**3 + 10**4 + 10**5)
    assert listops.count_trees(0, 100, max_depth=3, max_args=2, cap=10**30) == (
        10 + 4 * 10**2 + 2 * 4**2 * 10**3 + 4**3 * 10**4 * 1)  # 1, 4, 7, 10 tokens
    assert listops.count_trees(500, 2000, cap=96000) == 96000  # LRA: enough, and quickly
    assert listops.count_trees(21, 100_000, max_depth=3, max_args=2) == 0  # at most 10 tokens
    drawn = []
    real = listops.sample_tree
    monkeypatch.setattr(listops, "sample_tree", lambda *a, **k: drawn.append(1) or real(*a, **k))
    for (n, lo, hi, kw), needle in [
            ((498, 3, 5, {}), r"only 400 distinct trees have 3 < length < 5 .*\(a larger "
             "max_length or a smaller min_length"),
            ((9, 0, 2, {}), "ask for at most 10"),
            ((2, 1, 3, {}), "no tree has 1 < length < 3"),
            ((9, 10, 2000, {"max_depth": 2, "max_args": 3}),  # [OP d d d ]: 5 tokens at most
             "no tree has 10 < length < 2000 .* at most 5 tokens: a smaller min_length or a "
             "larger max_depth or max_args$")]:
        with pytest.raises(listops.WindowTooNarrow, match=needle):
            listops.generate_listops(n, 1, 1, min_length=lo, max_length=hi, **kw)
    assert not drawn
    got = listops.generate_listops(8, 1, 1, min_length=0, max_length=2)  # all 10 digits
    assert sorted(t for s in got.values() for t in s.tokens) == [bytes([2 + d]) for d in range(10)]


def test_an_early_stop_met_at_the_last_evaluation_is_recorded_as_the_early_stop(tmp_path,
                                                                             monkeypatch):
    """A run whose early-stop condition first held at its last evaluation (the step equal to
    max_steps) was recorded (record, results.csv) as stopped by its step budget, 'max_steps', as
    if it had never met it; one cut by its time limit between evaluations, meeting it at the
    evaluation of its stop step, said 'time_limit' (the report counted it as cut short). One
    never meeting it still says 'max_steps' / 'time_limit'."""
    import importlib
    import types

    from helpers import write_spec

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    train_mod = importlib.import_module("ssmrepro.train")
    steps = [0]  # a clock of 10 s per training step
    monkeypatch.setattr(train_mod, "time", types.SimpleNamespace(
        time=lambda: 1000.0 + 10.0 * steps[0], process_time=time.process_time))
    real = train_mod.forward_backward
    monkeypatch.setattr(train_mod, "forward_backward",
                        lambda *a, **k: (steps.__setitem__(0, steps[0] + 1), real(*a, **k))[1])
    tr = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
          "test_size": 16, "eval_every": 2, "dtype": "float64"}

    def one(**more):
        steps[0] = 0
        spec = load_spec(write_spec(tmp_path, train={**tr, **more}, sweep=[], seeds=[0]))
        return train_mod.train_pack(expand(spec, "paper"))[0]

    for budget, why, end in [({}, "max_steps", 4),
                             ({"max_steps": 50, "eval_every": 20, "time_limit_s": 25},
                              "time_limit", 3)]:
        losses = [h["val.loss"] for h in one(**budget)["history"]]
        assert losses[-1] < min(losses[:-1]), losses  # it learns: the last is the lowest
        for t, reason in [((losses[-1] + min(losses[:-1])) / 2, "early_stop"),
                          (losses[-1] / 2, why)]:
            rec = one(**budget, early_stop={"metric": "val.loss", "op": "<", "threshold": t})
            assert (rec["stop_reason"], rec["stop_step"]) == (reason, end)
            assert [h["val.loss"] for h in rec["history"]] == losses


def test_an_edited_first_copy_of_a_results_row_duplicated_by_hand_is_named(tmp_path):
    """A results row duplicated by hand, its first copy edited (test.acc 0.5 -> 0.987654), was
    dropped when the table was written again from the records without a word: the ledger of
    rows written compared only each run's last row. Every copy is compared now; an unedited
    copy stays silent."""
    from ssmrepro.store import Store

    store = Store(tmp_path / "s")
    store.runs.mkdir(parents=True)
    text = "run_id,label,metric.test.acc\na1,S6,0.5\nb2,S4D,0.25\n"
    table = store.root / "results.csv"
    store.write_table(table.name, text, {"a1", "b2"})
    for lines, warned in [(["a1,S6,0.5", "a1,S6,0.5", "b2,S4D,0.25"], False),
                          (["a1,S6,0.987654", "a1,S6,0.5", "b2,S4D,0.25"], True),
                          (["a1,S6,0.5", "b2,S4D,0.25", "a1,S6,0.987654"], True)]:
        store.warnings.clear()
        table.write_text("\n".join(["run_id,label,metric.test.acc", *lines]) + "\n")
        store.write_table(table.name, text, {"a1", "b2"})
        assert table.read_text() == text
        assert len(store.warnings) == int(warned), store.warnings
        assert not warned or ("run(s) a1 were changed" in store.warnings[0]), store.warnings


def test_a_given_pack_size_past_the_memory_is_refused(tmp_path, monkeypatch):
    """`run --pack-size 3` of runs one of which fits the memory but three of which do not (4 runs
    of 8.4 GB on a 24 GB machine, here a machine of 2.5 runs): refused before anything is built,
    naming the pack's need and the size that fits, exit 2, as `run --dry-run` is; only one run's
    memory was checked and the pack of 3 was built (in-process, the kernel's OOM killer ended
    the command without a word). A size that fits is taken."""
    import importlib

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import memory_need

    plan_mod = importlib.import_module("ssmrepro.engine.plan")  # (engine.plan: the function)
    spec = write_spec(tmp_path, sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}],
                      seeds=[0, 1, 2, 3])
    whole = memory_need(expand(load_spec(spec), "smoke")[0], "cpu").total
    monkeypatch.setattr(plan_mod, "available_memory", lambda device: int(2.5 * whole))
    for extra in ([], ["--dry-run", "--no-estimate"]):
        res = _invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "o", "--pack-size",
                      "3", "--no-plot", *extra)
        _assert_refused(res, "--pack-size 3: a pack of 3 runs (S6) needs about",
                        "which holds 2 such runs at once: give --pack-size 2 or less")
    assert not (tmp_path / "o").exists()
    res = _invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "o", "--pack-size", "2",
                  "--dry-run", "--no-estimate")
    assert res.exit_code == 0 and "4 pending in 2 packs (largest 2)" in res.output, res.output


def test_a_dry_run_packs_runs_it_times_small_as_run_packs_them(tmp_path, monkeypatch):
    """`run --dry-run --pack-size 2` of 4 runs that fit the memory but take more than the share
    a dry run's timing may use (timed small, extrapolated): it said `4 packs (largest 1)`, every
    run a pack of its own, while `run` (and the dry run with --no-estimate) trains 2 packs of 2;
    now 2 packs of 2, each priced at twice the run's extrapolated step."""
    import importlib

    import ssmrepro.engine as engine
    from ssmrepro.engine.plan import Oversized
    from ssmrepro.spec import load_spec
    from ssmrepro.train import memory_need

    plan_mod = importlib.import_module("ssmrepro.engine.plan")  # (engine.plan: the function)
    spec = load_spec(write_spec(tmp_path, seeds=[0, 1, 2, 3], sweep=[
        {"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}]))
    run = engine.expand(spec, "smoke")[0]
    whole = memory_need(run, "cpu").total
    monkeypatch.setattr(plan_mod, "available_memory", lambda device: 3 * whole)
    monkeypatch.setattr(plan_mod, "large_for_timing", lambda run, available: True)  # over 25%
    monkeypatch.setattr(engine, "extrapolate", lambda rs, *a, **k: Oversized(
        rs[0].pack_key(), rs[0].label, 8, whole, 3 * whole, (2, 4), (0.1, 0.2), 0.4, "affine"))
    for size, packs in ((2, [2, 2]), (3, [3, 1]), (None, [1, 1, 1, 1])):
        d = engine.dry_run(spec, "smoke", tmp_path / "o", pack_size=size)
        assert [len(p) for p in d.packs] == packs and len(d.oversized) == 1, d.packs
        assert {p.step_s for p in d.packs} == {0.4 * packs[0]}


def test_a_dry_run_times_with_the_threads_ssmrepro_threads_gives(tmp_path, monkeypatch):
    """`SSMREPRO_THREADS=2 ssmrepro run --dry-run`: the planner's timings (its pack choices and
    the estimate) were measured at one thread per core, while `run` calibrates and trains with
    the 2 threads the variable gives every worker; unset, one thread per core as before."""
    import ssmrepro.engine as engine
    from ssmrepro.engine.costs import CostModel
    from ssmrepro.spec import load_spec

    spec = load_spec(_one_run_spec(tmp_path))
    seen = []
    monkeypatch.setattr(CostModel, "fresh_seconds",
                        lambda self, runs, m: seen.append(self.threads) or 0.01)
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "cache"))
    for threads, want in (("2", 2), ("", 1)):
        monkeypatch.setenv("SSMREPRO_THREADS", threads)
        seen.clear()
        engine.dry_run(spec, "smoke", tmp_path / "o")
        assert seen and set(seen) == {want}, seen


def test_the_planners_timing_of_a_pack_with_an_init_its_model_does_not_fit_is_no_traceback(
        tmp_path, monkeypatch):
    """A pack whose first run has `model.init: {scheme: designed}` on an S6 model (`validate`
    refuses it; `run` trains the pack's other runs and fails those alone): the planner timed the
    pack with its members' own inits, so `run` (calibrating the shape's first run) and `run
    --dry-run` (timing the pack for its estimate) ended in a MemberError traceback. A step's
    cost does not depend on the init: timed with the default one, the dry run prices the pack."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import time_steps

    seq = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "repeat": 1,
           "blocks": {"SSM": {"mixer": {"name": "s6", "d_state": 4}}}}
    spec = write_spec(tmp_path, seeds=[0, 1], model=seq, train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 60, "val_size": 16,
        "test_size": 16, "eval_every": 30, "eval_batch_size": 16}, sweep=[{"cases": [
            {"label": "designed", "set": {"model.init": {"scheme": "designed"}}},
            {"label": "plain", "set": {}}]}])
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "cache"))
    res = _invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "o", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "4 pending in 1 packs (largest 4)" in res.output and "estimated" in res.output
    runs = expand(load_spec(spec), "smoke")
    assert runs[0].label == "designed" and time_steps(runs[:1], n_steps=1) > 0
    _assert_refused(_invoke("validate", spec), "model.init: run designed cannot be initialised")


def test_a_given_pack_size_above_a_shapes_runs_times_the_pack_it_trains(tmp_path):
    """`run --pack-size 64` of a shape of 2 runs: the planner timed a pack of 64 members (the 2
    runs repeated; 32x their memory, which a run of a few GB does not survive) and reported
    `E=64 ... run-steps/s` of a pack that never trains; it times the pack of 2 it trains."""
    from ssmrepro.engine.costs import CostModel
    from ssmrepro.engine.plan import plan
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    runs = expand(load_spec(write_spec(tmp_path, seeds=[0, 1], sweep=[], train={
        "optimizer": "adam", "lr": 0.01, "batch_size": 16, "max_steps": 3000, "val_size": 16,
        "test_size": 16, "eval_every": 100})), "paper")
    cm = CostModel(min_train_s=0, budget=1.0)
    timed = []
    cm.step_seconds = lambda rs, m: timed.append(len(rs)) or 0.01 * len(rs)
    c = cm.choose(runs, cap=128, size=64)
    assert c.size == 2 and set(timed) == {1, 2}, (c, timed)
    packs = plan(runs, 64, "cpu", cm)
    assert [len(p) for p in packs] == [2] and packs[0].step_s == pytest.approx(0.02)


def test_a_paper_value_of_n_params_in_a_profile_with_no_run_finished_is_unfinished():
    """huang2025-tab1's `n_params` paper values after an edit of the quick profile (no run of
    it trained yet): the cells are the profile's, but with no finished run there was no
    `n_params` column, and the five values were 'missing', '5 cells not run in this profile',
    beside the test.acc values of the same cells 'unfinished (0 of 3 runs finished)'."""
    from types import SimpleNamespace

    from test_checks import aggregate, cell_keys, grid, rows_for

    from ssmrepro.report import paper_value_tally, verify

    runs = grid(["A", "B"], [8])
    cells = aggregate(rows_for(runs, [None, None]), runs, "mean", ["test.acc"])
    pv = [SimpleNamespace(where={"label": lab}, metric=m, value=0.9, tol=0.05)
          for lab in ("A", "C") for m in ("test.acc", "n_params")]
    got = [v for v in verify(SimpleNamespace(claims=[], paper_values=pv, claim="c"), cells,
                             cell_keys(runs)) if v.kind == "paper_value"]
    assert [v.verdict for v in got] == ["unfinished", "unfinished", "missing", "missing"], got
    assert got[1].detail == "0 of 1 runs finished"
    assert paper_value_tally(got) == ("0 of 0 compared within tolerance; 2 cells not finished, "
                                      "not compared; 2 cells not run in this profile")


def test_a_schedule_that_reaches_learning_rate_0_before_the_last_step_is_refused():
    """koren2026-fig10's quick profile with `max_steps: 15000` (a budget study) over the
    official schedule (warm-up 500, hold 2,000, decay 5,000 to final_factor 0): steps 7,500 to
    15,000 trained at learning rate 0, a flat curve that read as a plateau of the longer
    budget. Refused, naming the dead steps; a decay to the last step, a longer one (smoke's
    truncated schedules), a final lr above 0 or no decay_steps train."""
    from pydantic import ValidationError

    from ssmrepro.sweep.config import TrainConfig

    official = {"kind": "cosine", "warmup_steps": 500, "hold_steps": 2000, "decay_steps": 5000}
    for budget, sched in (({"max_steps": 15000}, official),
                          ({"epochs": 3, "train_size": 64, "batch_size": 8},
                           {"kind": "linear", "decay_steps": 20}),
                          ({"max_steps": 8000}, {**official, "min_lr": 0.0})):
        with pytest.raises(ValidationError, match=r"its last [\d,]+ steps would train at learning "
                                                  r"rate 0 .*give decay_steps"):
            TrainConfig(**budget, schedule=sched)
    for ok in ({"max_steps": 7500, "schedule": official},
               {"max_steps": 6, "schedule": official},
               {"max_steps": 15000, "schedule": {**official, "final_factor": 0.1}},
               {"max_steps": 15000, "schedule": {**official, "min_lr": 1e-5}},
               {"max_steps": 15000, "schedule": {**official, "decay_steps": None}}):
        TrainConfig(**ok)


def test_a_cooper_construction_for_other_number_tokens_than_the_task_is_refused(tmp_path):
    """cooper2026-fig9 with `task.numbers: 10` (or `number_offset: 6`) and the construction's
    own `model.init.numbers: 5` (a copy of the task's): the weights read five of the numbers as
    words, and the report FAILed 'the construction outputs the correct token' (0.125), a
    verdict on a construction written for another task. `validate` and `run` refuse it; with
    the init's copy changed too it validates. A construction of another task is refused so."""
    from types import SimpleNamespace

    from ssmrepro.models.init import InitConfig
    from ssmrepro.train import construction_task_problem

    _assert_refused(_invoke("validate", "cooper2026-fig9", "--set", "task.numbers=10"),
                    "model.init: run cannot be initialised: the selective-copy construction",
                    "numbers 5 (task.numbers 10)")
    _assert_refused(_invoke("run", "cooper2026-fig9", "--profile", "smoke", "--out",
                            tmp_path / "o", "--set", "task.number_offset=6"),
                    "number_offset 5 (task.number_offset 6)")
    assert not (tmp_path / "o" / "cooper2026" / "cooper2026-fig9" / "runs").exists()
    res = _invoke("validate", "cooper2026-fig9", "--set", "task.numbers=10",
                  "--set", "model.init.numbers=10")
    assert res.exit_code == 0, res.output
    decode = InitConfig(scheme="cooper_construction", construction="decode_recall")
    assert "written for task decode_recall, not 'selective_copy'" in construction_task_problem(
        decode, SimpleNamespace(name="selective_copy"))
    assert construction_task_problem(decode, SimpleNamespace(name="decode_recall")) is None


def test_cooper2026_fig10s_attention_window_follows_the_context_length():
    """cooper2026-fig10 with `task.L: 200` (a longer context): the construction is exact where
    the recalled pair lies inside its attention window, and the spec's `window: 100` (a copy of
    L) stayed, so the report FAILed all four 'the construction is exact' claims (0.905 at the
    last position) on a model cut to half the context. The window is derived from L; the
    shipped runs keep their ids (window 100 = L 100)."""
    from ssmrepro.spec import find_spec
    from ssmrepro.sweep import expand

    spec = find_spec("cooper2026-fig10")
    assert {r.model.window for r in expand(spec, "smoke", {"task.L": 200})} == {200}
    assert {r.model.window for r in expand(spec, "quick")} == {100}


def test_a_length_curves_figure_of_other_lengths_than_its_sets_or_training_is_refused():
    """cooper2026-fig8 with `task.L: 60` (training on lengths 20-60) shaded 20-50 as the
    training lengths, and with `train.evals.L20: {L: 25}` drew that set's accuracy at x = 20:
    the figure kind reads both from its config (`train_range`, the set names), not from the
    runs. `validate` refuses either, naming the lengths the runs have."""
    from ssmrepro.plots import parse_figure
    from ssmrepro.spec import find_spec
    from ssmrepro.sweep import expand

    spec = find_spec("cooper2026-fig8")
    cfg = parse_figure(spec.figure)
    evals = dict(expand(spec, "smoke")[0].train.evals)
    for over, needle in (({"task.L": 60}, "train_range: [20, 50] is shaded as the training "
                          "lengths, but run hybrid trains on lengths 20..60; "
                          "give train_range: [20, 60]"),
                         ({"train.evals": {**evals, "L20": {"L": 25, "L_min": None}}},
                          "lengths: 20 draws L20.acc at length 20, but train.evals.L20 of run "
                          "hybrid has sequences of length 25"),
                         ({}, None)):
        got = cfg.run_problems(expand(spec, "smoke", over))
        assert (needle in got[0]) if needle else got == [], got
    _assert_refused(_invoke("validate", "cooper2026-fig8", "--set", "task.L=60"),
                    "figure.train_range: [20, 50]")


def test_an_analytic_claim_whose_where_matches_no_grid_point_is_refused(tmp_path):
    """yu2025-fig5 with L = 100 left out of its `analytic.grid`: the two slope claims `where:
    {L: 100}` matched no row, `validate` said ok and they stayed MISSING for ever (a training
    spec's claim on no run is refused; an analytic spec was not checked). Refused naming the
    claim; the shipped grid validates."""
    text = (ROOT / "experiments" / "yu2025" / "yu2025-fig5.yaml").read_text()
    text = text.replace("id: yu2025-fig5", "id: my-fig5")
    assert "L: [10, 30, 100, 300, 1000, 3000]" in text
    spec = tmp_path / "my-fig5.yaml"
    spec.write_text(text.replace("L: [10, 30, 100, 300, 1000, 3000]", "L: [10, 30, 300]"))
    _assert_refused(_invoke("validate", spec),
                    "claims.0.where: matches no point of analytic.grid (L=100)",
                    "claims.1.where: matches no point of analytic.grid (L=100)")
    spec.write_text(text)
    assert _invoke("validate", spec).exit_code == 0


def test_a_bound_grid_line_outside_its_panel_is_named_in_the_panel(tmp_path, monkeypatch):
    """huang2025-fig2's smoke grid (d 8, 16) with |V| = 256: Thm 4's line d = κ·log₂|V| = 32
    lay above every row of the Mamba-S4D panel, so the panel showed no line while the legend
    listed it (as if drawn). The panel names it (`... above the grid (d ≥ 32)`); a line inside
    the grid (Thm 2's d = 12) is drawn without a note."""
    import matplotlib.axes
    from test_checks import Run
    from test_outputs import _ctx, _draw

    said: list[str] = []
    text = matplotlib.axes.Axes.text
    monkeypatch.setattr(matplotlib.axes.Axes, "text",
                        lambda self, x, y, s, *a, **k: said.append(str(s)) or text(
                            self, x, y, s, *a, **k))
    runs = [Run(lab, {"task.kappa": 4, "task.vocab": 256, "model.d_model": d})
            for lab in ("S4D", "S6") for d in (8, 16)]
    ctx = _ctx(tmp_path, runs, [0.1, 0.2, 0.3, 0.4])
    raw = {"kind": "bound_grid", "x": "task.kappa", "y": "model.d_model",
           "y_name": "d (embedding size)",
           "bounds": {"S4D": [{"expr": "task.kappa * log2(task.vocab)", "text": "Thm 4"}],
                      "S6": [{"expr": "task.kappa + log2(task.vocab)", "text": "Thm 2"}]}}
    assert _draw(ctx, raw, tmp_path / "f.png")
    notes = [s for s in said if "the grid" in s]
    assert notes == ["Thm 4: above the grid (d ≥ 32)"], notes


def test_a_phase_panels_paper_default_is_not_shown_off_the_papers_grid(tmp_path, monkeypatch):
    """chen2025-fig4 with γ = 0.55 added to a profile: panel (b)'s paper side showed the
    paper's '≤.13' at γ = 0.55, a cell the paper never ran (its grid is 0.1 ... 1.0, 1.5, 2.0),
    as if the paper printed it. The default stands only for the unprinted cells of the paper's
    own grid (the points its paper values name); off it the paper's cell is blank."""
    import matplotlib.axes
    from test_checks import Run
    from test_outputs import _ctx, _draw

    from ssmrepro.spec import PaperValue

    said: list[str] = []
    text = matplotlib.axes.Axes.text
    monkeypatch.setattr(matplotlib.axes.Axes, "text",
                        lambda self, x, y, s, *a, **k: said.append(str(s)) or text(
                            self, x, y, s, *a, **k))
    runs = [Run("", {"model.init.gamma": g, "model.repeat": 2}) for g in (0.5, 0.55)]
    ctx = _ctx(tmp_path, runs, [0.1, 0.2])
    # the paper's grid: γ 0.5 (another panel's value) and 0.6; a test.acc value gives the
    # panel its paper side
    ctx.spec.paper_values = [
        PaperValue(where={"model.init.gamma": 0.5, "model.repeat": 2}, metric="other.acc",
                   value=0.3),
        PaperValue(where={"model.init.gamma": 0.6, "model.repeat": 3}, value=0.9)]
    raw = {"kind": "phase", "x": "model.init.gamma", "y": "model.repeat",
           "panels": [{"metric": "test.acc", "paper_default": "≤.13"}]}
    assert _draw(ctx, raw, tmp_path / "f.png")
    assert said.count("≤.13") == 1, said


def test_a_recall_grid_column_of_no_label_is_refused(tmp_path):
    """koren2026-fig6 with its case `(c) trained linear` relabelled `(c) linear` (the claim's
    `columns` too, the figure's not): `validate` said ok and the figure's column (c) vanished,
    two columns drawn where three were meant, without a word. The figure's `columns` keys are
    labels, checked as a claim's are."""
    from ssmrepro.plots import where_problems
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    text = (ROOT / "experiments" / "koren2026" / "koren2026-fig6.yaml").read_text()
    text = text.replace("id: koren2026-fig6", "id: my-fig6").replace("alias: mqar-scaling", "")
    text = text.replace("label: (c) trained linear", "label: (c) linear")
    figure, claim = [i for i, line in enumerate(text.split("\n")) if "columns:" in line]
    lines = text.split("\n")
    lines[claim] = lines[claim].replace('"(c) trained linear"', '"(c) linear"')
    spec = tmp_path / "my-fig6.yaml"
    spec.write_text("\n".join(lines))
    got = where_problems(load_spec(spec), expand(load_spec(spec), "smoke"))
    assert [e.split(": ", 1)[1] for e in got] == [
        "figure.columns.(c) trained linear: '(c) trained linear' is no label of any run of any "
        "profile; check the spelling"], got


def test_a_profile_set_that_a_cases_mapping_of_another_name_leaves_out_is_refused(tmp_path):
    """yu2025-fig4 with a quick `set: {model.blocks.SSM.mixer.d_state: 8}` beside a case that
    swaps the mixer (`model.blocks.SSM.mixer: {name: b2s6, heads: 8}`, no d_state): S6 trained
    at d_state 8 and B2S6 at its mixer's default, without a word (the profile's value never
    reached the runs whose mapping replaced it). Refused naming the key; a case mapping that
    names d_state itself overrides the profile, as a case does, and is taken."""
    model = {"name": "seq_lm", "d_model": 8, "layers": ["S"],
             "blocks": {"S": {"mixer": {"name": "s6", "d_state": 4}}}}
    for mixer, refused in (({"name": "s4d"}, True), ({"name": "s4d", "d_state": 4}, False)):
        spec = write_spec(
            tmp_path, model=model, seeds=[0],
            sweep=[{"cases": [{"label": "S6"},
                              {"label": "S4D", "set": {"model.blocks.S.mixer": mixer}}]}],
            profiles={"smoke": {"set": {"model.blocks.S.mixer.d_state": 2}}, "quick": {},
                      "paper": {}})
        res = _invoke("validate", spec)
        if refused:
            _assert_refused(res, "[profile smoke, point 1 S4D] profiles.smoke.set.model.blocks.S."
                            "mixer.d_state: this sweep point replaces model.blocks.S.mixer with "
                            "a mapping that leaves d_state out, so the profile's 2 does not "
                            "reach its runs")
        else:
            assert res.exit_code == 0, res.output


def test_output_variance_reads_every_fact_of_a_query_from_its_context():
    """`analysis: [output_variance]` on MQAR with `reduce_to_ar` (one key of κ asked): a query's
    facts were read from the sequence's targets, so the other κ - 1 facts' values counted as
    'empty' entries (out.empty_var) and out.wrong_var was NaN. They are read from the canonical
    key-value block now (the last of key_repeats chunks); layouts that ask every key keep the
    same facts."""
    import torch

    from ssmrepro.analysis import mechanistic as mech
    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.base import IGNORE

    class Flat(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(*x.shape, 48)

    for cfg in [{"reduce_to_ar": True, "L": 16}, {"key_repeats": 2}, {"query_repeats": 2},
                {"num_passes": 2}, {}]:
        task = build_task({"name": "mqar", "vocab": 48, "L": 40, "kappa": 4,
                           "random_non_queries": False, **cfg})
        _, tgt, facts = mech.output_logits(Flat(), task, 3, 5)
        assert facts.sum(1).tolist() == [4] * len(tgt), cfg  # κ facts per query
        assert facts[torch.arange(len(tgt)), tgt].all(), cfg  # its own value among them
        if not cfg.get("reduce_to_ar"):  # every key asked: the targets' values, as before
            ids, y = mech.probe_batch(task, 3, 5)
            q = y != IGNORE
            old = torch.zeros(5, 24, dtype=torch.bool)
            old[torch.nonzero(q)[:, 0], y[q] - 24] = True
            assert torch.equal(facts, old[torch.nonzero(q)[:, 0]]), cfg


def test_a_model_of_non_finite_outputs_scores_no_accuracy(tmp_path):
    """A run whose last update left its weights non-finite (`lr: 1e6`, one step: the training
    loss was finite, the status 'ok') was evaluated on NaN logits: its losses were NaN, but the
    argmax of a NaN row is class 0, so val/test/train.acc were numbers (0.06, 0.0, 0.19) that a
    claim `test.acc <= 0.5` judged. The accuracy is NaN (not measured) as the loss is; the best
    validation accuracy is that of the evaluations that had one."""
    import math

    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import train_pack

    spec = load_spec(write_spec(tmp_path, seeds=[0], sweep=[], train={
        "optimizer": "adam", "lr": 1e6, "batch_size": 8, "max_steps": 1, "val_size": 16,
        "test_size": 16, "eval_every": 1, "eval_batch_size": 16}))
    (rec,) = train_pack(expand(spec, "paper"))
    m = rec["metrics"]
    assert rec["status"] == "ok" and math.isnan(m["test.loss"]), rec
    for k in ("val.acc", "test.acc", "train.acc"):
        assert math.isnan(m[k]), (k, m[k])
    assert [h["step"] for h in rec["history"]] == [0, 1]
    assert math.isnan(rec["history"][1]["val.acc"]) and math.isnan(rec["history"][1]["train.acc"])
    assert m["val.best_acc"] == rec["history"][0]["val.acc"]


def test_attention_hit_reads_each_query_rows_peak_among_the_positions_it_sees():
    """koren2026's `attn.hit` (Fig. 4) took the argmax of a query row over every position, its
    future ones set to 0 (no attention): a model whose causal scores were all negative, peaking
    exactly at the ideal position (corr 1), scored attn.hit 0. The peak is over the causal
    entries now."""
    import types

    import torch

    from ssmrepro.analysis import mechanistic as mech
    from ssmrepro.tasks import build_task

    V, kappa = 40, 4
    task = build_task({"name": "mqar", "vocab": V, "L": 32, "kappa": kappa,
                       "random_non_queries": False})
    ids, y = mech.probe_batch(task, 0, 6)
    # B_τ = [1, onehot(x_{τ-1})], C_t = [-1, onehot(x_t) / 2]: α' = -1 + [x_{τ-1} = x_t] / 2
    pk = torch.zeros(1 + V, 2 * V, dtype=torch.float64)
    pq = torch.zeros_like(pk)
    pk[0, V:], pk[1:, :V] = 1.0, torch.eye(V, dtype=torch.float64)
    pq[0, V:], pq[1:, V:] = -1.0, 0.5 * torch.eye(V, dtype=torch.float64)
    m = mech.attention_metrics(types.SimpleNamespace(V=V),
                               types.SimpleNamespace(Pi_k_in=pk, Pi_q_in=pq), ids, y, kappa)
    assert m["attn.hit"] == 1.0 and m["attn.corr"] > 0.999, m


def test_a_length_curve_point_is_drawn_at_the_length_its_set_evaluates(tmp_path):
    """`length_curves` reads each point's x from its metric's name (`L12.acc` at 12): a set
    `L12: {T: 13}` drew the accuracy at length 13 at 12, and one keeping the task's `L_min`
    (lengths L_min..L) drew a mixture at L, both without a word. `validate` refuses them, exit 2;
    sets of their own length pass."""
    tr = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
          "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    fig = {"kind": "length_curves", "lengths": [8, 12], "hue": "label", "lo": None, "hi": None}
    agg = {"reduce": "mean", "metrics": ["test.acc", "L8.acc", "L12.acc"]}
    for evals, needles in [
            ({"L8": {"T": 8}, "L12": {"T": 12}}, None),
            ({"L8": {"T": 8}, "L12": {"T": 13}},
             ["lengths: 12 draws L12.acc at length 12, but train.evals.L12 of run S6 has "
              "sequences of length 13"])]:
        spec = write_spec(tmp_path, train={**tr, "evals": evals}, figure=fig, aggregate=agg,
                          seeds=[0])
        res = _invoke("validate", spec)
        if needles is None:
            assert res.exit_code == 0, res.output
        else:
            _assert_refused(res, *needles)
    task = {"name": "selective_copy", "words": 20, "numbers": 3, "number_offset": 3, "p": 0.2,
            "L": 30, "L_min": 20}
    fig = {"kind": "length_curves", "lengths": [30, 40], "hue": "label", "lo": None, "hi": None}
    agg = {"reduce": "mean", "metrics": ["test.acc", "L30.acc", "L40.acc"]}
    spec = write_spec(tmp_path, task=task, train={**tr, "evals": {
        "L30": {"L": 30}, "L40": {"L": 40, "L_min": None}}}, figure=fig, aggregate=agg, seeds=[0])
    _assert_refused(_invoke("validate", spec), "train.evals.L30 of run S6 has sequences of "
                    "lengths 20..30; make the set's length 30 (L_min: null)")


def test_a_length_curves_training_range_is_the_runs_own(tmp_path):
    """`length_curves`' `train_range` shades the training lengths: `[8, 10]` over runs trained
    at length 12 was drawn as their training range without a word. `validate` refuses it,
    exit 2; the runs' own range passes."""
    tr = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
          "test_size": 16, "eval_every": 2, "eval_batch_size": 16,
          "evals": {"L12": {"T": 12}, "L16": {"T": 16}}}
    agg = {"reduce": "mean", "metrics": ["test.acc", "L12.acc", "L16.acc"]}
    for rng, needle in [([12, 12], None),
                        ([8, 10], "train_range: [8, 10] is shaded as the training lengths, but "
                                  "run S6 trains on length 12")]:
        fig = {"kind": "length_curves", "lengths": [12, 16], "hue": "label", "lo": None,
               "hi": None, "train_range": rng}
        spec = write_spec(tmp_path, task={"name": "keep_nth", "n": 2, "T": 12, "vocab": 8},
                          train=tr, figure=fig, aggregate=agg, seeds=[0])
        res = _invoke("validate", spec)
        if needle is None:
            assert res.exit_code == 0, res.output
        else:
            _assert_refused(res, needle)


def test_a_claims_number_is_printed_on_its_own_side_of_the_threshold():
    """A threshold claim `test.acc >= 0.95` FAILed on 0.94951, and report.md said
    `FAIL ... (ours: 0.950)`: 3 decimals printed the value on the threshold it misses (and 1.0004
    beside a FAIL of `<= 1` as 1.000), a paper value's 1.0004 beside 0.95 ± 0.05 read 1.000
    ('differs' though it looked within). The number keeps the digits that place it: 0.9495;
    others keep 3 decimals."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, fmt_beside, markdown, verify

    runs = [SimpleNamespace(label=lab, coords={}, seed=0, flat=lambda: {}) for lab in "ABC"]
    df = pd.DataFrame([{"run_id": f"r{i}", "label": lab, "seed": 0, "status": "ok",
                        "test.acc": v} for i, (lab, v) in enumerate(zip("ABC",
                                                                          [0.94951, 1.0004, 0.5]))])
    cells = aggregate(df, runs, "mean", ["test.acc"])
    claims = [{"text": "A solves", "where": {"label": "A"}, "op": ">=", "value": 0.95},
              {"text": "B stays low", "where": {"label": "B"}, "op": "<=", "value": 1.0},
              {"text": "C is low", "where": {"label": "C"}, "op": "<=", "value": 0.6}]
    pvs = [SimpleNamespace(where={"label": "B"}, metric="test.acc", value=0.95, tol=0.05)]
    spec = SimpleNamespace(id="t", alias=None, title="T", claim="c", claims=claims,
                           paper_values=pvs, notes=[], analytic=None,
                           aggregate=SimpleNamespace(reduce="mean"))
    verdicts = verify(spec, cells, ["label"])
    assert [v.verdict for v in verdicts] == ["differs", "FAIL", "FAIL", "PASS"]
    text = markdown(spec, "quick", cells, verdicts, len(df))
    for needle in ["A solves [test.acc >= 0.95", "(ours: 0.9495)", "(ours: 1.0004)",
                   "(ours: 0.500)", "| 0.950 | 1.0004 | differs |"]:  # 0.95 ± 0.05
        assert needle in text, text
    assert fmt_beside(0.9 - 0.85, 0.05) == "0.050"  # on its bound but for rounding: on it


def test_a_key_the_cells_runs_lack_reads_as_a_dash_in_the_report_table():
    """chen2025-fig9's Transformer row: its runs have no `conv_residual` (an object column of
    bools: None) and no `d_state` (a float column: NaN). The first was printed `None`, a value
    to the reader beside `none`, a real `model.pos` of the same table; both are `—` now."""
    import pandas as pd

    from ssmrepro.report import md_table

    cells = pd.DataFrame({"label": ["Mamba", "Transformer"],
                          "model.conv_residual": [False, None],
                          "model.d_state": [16.0, float("nan")],
                          "model.pos": ["none", "learned"],
                          "n_expected": [1, 1], "test.acc": [0.2, None]})
    rows = md_table(cells, ["label", "model.conv_residual", "model.d_state", "model.pos"])
    tf = [r for r in rows.splitlines() if r.startswith("| Transformer")][0]
    assert tf == "| Transformer | — | — | learned | 1 | — |", tf
    assert "None" not in rows
    assert "| Mamba | no | 16 | none | 1 | 0.200 |" in rows


def test_an_analytic_figure_says_computed_not_one_seed():
    """yu2025-fig5's three figures labelled their axes 'ratio_w (one seed)': a table computed
    from theory (ssmrepro.theory) read as a trained result of one seed. A trained spec's
    figures keep their seed count."""
    import pandas as pd

    from ssmrepro.plots.registry import FigureContext
    from ssmrepro.spec import load_spec

    cells = pd.DataFrame({"label": ["a"], "n_expected": [1], "n_ok": [1], "n_diverged": [0]})
    for source, want in ((_YU, "computed from theory"),
                         ("experiments/huang2025/huang2025-tab1.yaml", "one seed")):
        ctx = FigureContext(load_spec(ROOT / source), "quick", cells, ["label"],
                            lambda stem, ext: Path(f"{stem}.{ext}"))
        assert ctx.aggregation("ratio_w") == want, source


def test_a_lines_legend_of_a_config_key_names_the_key(monkeypatch):
    """yu2025-fig5 draws a line per L (and per c): its legends listed 10, 30, ... 3000 (0.001
    ... 1.0) with no title, so nothing said what the numbers were. A legend of a config key is
    titled with it (its `names` entry where given); one of labels stays untitled."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from ssmrepro.plots import figures
    from ssmrepro.plots.registry import FigureContext, parse_figure
    from ssmrepro.spec import load_spec

    titles = []

    def grab(fig, path, dpi):
        titles.extend((ax.get_legend().get_title().get_text()) for ax in fig.axes)
        plt.close(fig)

    monkeypatch.setattr(figures, "save_png", grab)
    spec = load_spec(ROOT / _YU)
    cells = pd.DataFrame({"label": ["theory"] * 4, "c": [0.1, 1.0, 0.1, 1.0],
                          "L": [10, 10, 100, 100], "ratio_w": [1e-3, 1.0, 2e-3, 3.0],
                          "ratio_b": [1e-2, 1.0, 2e-2, 3.0],
                          "n_expected": [1] * 4, "n_ok": [1] * 4, "n_diverged": [0] * 4,
                          "complete": [True] * 4})
    ctx = FigureContext(spec, "quick", cells, ["label", "L", "c"],
                        lambda stem, ext: Path(f"{stem}.{ext}"))
    for raw in spec.figures:
        figures.lines(ctx, parse_figure(raw), Path("x.png"))
    assert titles == ["L", "L", "c"], titles
    cfg = parse_figure({**spec.figures[0], "hue": "label"})
    titles.clear()
    figures.lines(ctx, cfg, Path("x.png"))
    assert titles == [""], titles


def test_summary_and_curves_tables_write_list_keys_as_json(tmp_path):
    """A list-valued cell key (chen2025-fig9's `model.layers`, cooper2026-fig8's four-layer
    stacks) was written to summary.csv and curves.csv as a Python repr, `['SSM']`, where
    results.csv writes JSON, `["SSM"]` (docs/columns.md): a join of the tables on the key
    matched nothing. Every table writes JSON now."""
    import pandas as pd

    model = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"],
             "blocks": {"SSM": {"mixer": {"name": "mamba2", "d_state": 4, "heads": 1}}}}
    cases = [{"label": "one", "set": {"model.layers": ["SSM"]}},
             {"label": "two", "set": {"model.layers": ["SSM", "SSM"]}}]
    spec = _one_run_spec(tmp_path, model=model, sweep=[{"cases": cases}],
                         train={"optimizer": "adam", "lr": 0.01, "batch_size": 4, "max_steps": 2,
                                "val_size": 8, "test_size": 8, "eval_every": 1,
                                "eval_batch_size": 8})
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke",
                  "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    folder = tmp_path / "out" / "tests" / "t-spec"
    for name in ("results-smoke.csv", "summary-smoke.csv", "curves-smoke.csv"):
        text = (folder / name).read_text()
        assert "['SSM'" not in text, (name, text[:400])
        got = set(pd.read_csv(folder / name)["model.layers"])
        assert got == {'["SSM"]', '["SSM", "SSM"]'}, (name, got)


def test_error_bars_and_bands_say_they_are_a_std(monkeypatch):
    """huang2025-tab1's bars and yu2025-tab1's bands (mean of seeds, ± the seeds' std) were
    drawn with no word of what they were; the y axis says it now, and not where none is drawn
    (one seed)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from ssmrepro.plots import figures
    from ssmrepro.plots.registry import FigureContext, parse_figure
    from ssmrepro.spec import load_spec

    labels = []

    def grab(fig, path, dpi):
        labels.extend(ax.get_ylabel() for ax in fig.axes)
        plt.close(fig)

    monkeypatch.setattr(figures, "save_png", grab)
    spec = load_spec(ROOT / "experiments/huang2025/huang2025-tab1.yaml")
    for n_ok, std, says in ((3, 0.01, True), (1, float("nan"), False)):
        cells = pd.DataFrame({"label": ["Mamba", "Mamba"], "model.d_model": [8, 16],
                              "n_expected": [n_ok] * 2, "n_ok": [n_ok] * 2,
                              "n_diverged": [0] * 2, "complete": [True] * 2,
                              "test.acc": [0.5, 0.6], "test.acc.std": [std] * 2})
        ctx = FigureContext(spec, "quick", cells, ["label", "model.d_model"],
                            lambda stem, ext: Path(f"{stem}.{ext}"))
        labels.clear()
        figures.bars(ctx, parse_figure({"kind": "bars", "metric": "test.acc",
                                        "x": "model.d_model"}), Path("x.png"))
        figures.lines(ctx, parse_figure({"kind": "lines", "metric": "test.acc",
                                         "x": "model.d_model", "hue": "label"}), Path("y.png"))
        assert [("± std" in t) for t in labels] == [says, says], labels


def test_a_json_document_cut_by_its_reader_exits_141(monkeypatch):
    """`show keep-nth-ablation --profile paper --json | head -c 10` (an 870 kB document whose
    reader closes the pipe while it is written) exited 0 with the document cut: CPython's
    buffered write returns the short count of a write that met the closed pipe half-way and
    raises nothing. Now the closed reader is noticed after the write: exit 141, as a small
    document's (`verify --json | true`)."""
    import io
    import sys
    import threading

    from ssmrepro.cli.app import OutputClosed, print_json

    r, w = os.pipe()
    saved = os.dup(1)

    def reader() -> None:  # reads the first bytes while the writer is blocked, then closes
        os.read(r, 10)
        os.close(r)

    os.dup2(w, 1)
    os.close(w)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.FileIO(1, "w", closefd=False),
                                                        encoding="utf-8"))
    thread = threading.Thread(target=reader)
    thread.start()
    try:
        with pytest.raises(OutputClosed):
            print_json({"rows": ["x" * 100] * 20000})  # 2 MB: far past the pipe's buffer
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        thread.join(timeout=10)


def test_every_column_of_a_results_table_is_in_the_column_dictionary(tmp_path, monkeypatch):
    """docs/columns.md ("every table ssmrepro writes, column by column") had no `cpu_s`,
    `metric.train.avg_loss`, `metric.val.max_rise` or `metric.val.best_mse`, columns of every
    trained run's results.csv."""
    from ssmrepro.spec import load_spec
    from ssmrepro.store import SET_METRICS, Store
    from ssmrepro.sweep import expand

    (run,) = expand(load_spec(_one_run_spec(tmp_path)), "smoke")
    rec = {"status": "ok", "metrics": {f"{s}.{m}": 0.5 for s, ms in SET_METRICS.items()
                                       for m in ms}, "kernels": {"S6Core": "torch:x"}}
    monkeypatch.setattr(Store, "read", lambda self, run_id: rec)
    columns = Store(tmp_path / "store").table([run]).columns
    text = (ROOT / "docs" / "columns.md").read_text()
    plain = ("loss", "acc", "mse")  # `<name>` is `acc`, `loss` or `mse`
    missing = [c for c in columns if not c.startswith(("task.", "model.", "train.", "kernels."))
               and f"`{c}`" not in text and f"(`{c.rsplit('.', 1)[-1]}`)" not in text
               and not (c.startswith("metric.") and c.rsplit(".", 1)[-1] in plain)]
    assert not missing, missing


def test_the_bench_help_examples_parse_and_do_what_their_comments_say(monkeypatch):
    """`bench scans --help`'s example `... --variants fused-v1 fused tiled conv1d  # the
    issue-12 Mamba layer (no reference)` timed the sequential reference (no `--no-ref`): a
    slow reference at L = 256 and a `ref cpu ms` column the comment said was not there. Every
    example of `bench scans` / `bench step --help` is parsed by the benchmark's own parser."""
    import argparse
    import shlex

    from ssmrepro.bench import scans, step

    parsed = []
    original = argparse.ArgumentParser.parse_args

    def parse_only(self, args=None, namespace=None):
        parsed.append(original(self, args, namespace))
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    for module, name in ((scans, "scans"), (step, "step")):
        lines = [ln.strip() for ln in module.__doc__.splitlines()
                 if ln.strip().startswith(f"ssmrepro bench {name}")]
        assert lines, name
        for line in lines:
            command, _, comment = line.partition("#")
            with pytest.raises(SystemExit) as exit_:
                module.main(shlex.split(command)[3:])
            assert exit_.value.code == 0, line
            if "no reference" in comment:
                assert parsed[-1].no_ref, line


def test_max_steps_over_a_specs_epochs_is_told_to_unset_epochs(tmp_path):
    """`--set train.max_steps=4` over a spec that trains `epochs`: the refusal said `set the
    other to null (e.g. --set train.max_steps=null)`, the key just given (followed, `--set`
    twice is refused). Now it names both ways, and the one that keeps the value given works."""
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "epochs": 2, "train_size": 16,
             "val_size": 16, "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    spec = _one_run_spec(tmp_path, train=train)
    res = _invoke("show", spec, "--profile", "smoke", "--set", "train.max_steps=4")
    _assert_refused(res, "both are given (max_steps 4, epochs 2)",
                    "--set train.epochs=null keeps max_steps 4",
                    "--set train.max_steps=null keeps epochs 2")
    res = _invoke("show", spec, "--profile", "smoke", "--set", "train.max_steps=4",
                  "--set", "train.epochs=null")
    assert res.exit_code == 0, res.output


def test_the_out_help_names_the_folder_the_results_go_to(tmp_path, monkeypatch):
    """`--out`'s help said `default ./results`; the default is the project's results/
    ($SSMREPRO_ROOT's, or the folder above holding experiments/): run from another folder,
    `ssmrepro run` wrote into the project's results, not the ./results the help named."""
    import typer

    from ssmrepro.spec import find_spec
    from ssmrepro.store import results_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SSMREPRO_ROOT", str(ROOT))
    assert results_dir(find_spec("keep-nth")).parents[1] == ROOT / "results"
    group = typer.main.get_command(app)
    helps = {name: p.help for name, cmd in group.commands.items() for p in cmd.params
             if p.name == "out" and name not in ("bench", "data")}
    assert set(helps) >= {"list", "show", "run", "plot", "verify", "export", "figures"}, helps
    for name, text in helps.items():
        assert "./results" not in text and "<project>/results" in text, (name, text)


def test_the_generate_command_suggested_for_a_cut_dataset_works_as_given(tmp_path):
    """A generated Pathfinder folder without its meta.json (a generate cut short) or a ListOps
    folder missing a split file: `data info` and a run suggested `ssmrepro data generate ...
    --dir ROOT`, which refused the folder (`is not empty; pass --force ...`). The suggestion
    now carries `--force` there (and not for an absent folder), and followed it works."""
    import shlex

    from ssmrepro.data.datasets import available_sources

    root = tmp_path / "data"

    def hints() -> dict:
        return {r["dataset"]: r for r in available_sources(root) if r["source"] == "generated"}

    assert not hints()["pathfinder"]["hint"].endswith("--force")
    res = _invoke("data", "generate", "pathfinder", "--res", "32", "--n", "2", "--workers", "1",
                  "--dir", root)
    assert res.exit_code == 0, res.output
    (hints()["pathfinder"]["path"] / "meta.json").unlink()
    row = hints()["pathfinder"]
    assert not row["present"] and row["hint"].endswith(" --force"), row
    argv = shlex.split(row["hint"])[1:]
    argv[argv.index("--n") + 1] = "2"  # the suggested size, smaller
    res = _invoke(*argv, "--workers", "1")
    assert res.exit_code == 0, res.output
    assert hints()["pathfinder"]["present"]
    listops = hints()["listops"]["path"]
    listops.mkdir(parents=True)
    (listops / "basic_train.tsv").write_text("Source\tTarget\n")
    assert hints()["listops"]["hint"].endswith(" --force")


def test_the_download_suggested_beside_an_installed_folder_works_as_given(tmp_path):
    """An LRA release folder there but not whole (a split file of listops-1000 removed, or
    only another task of the release installed): `data info` and a run suggested `ssmrepro
    data download lra --dir ROOT`, which fetched and extracted the archive, then refused
    (`... already exists; remove it or pass --force`). The suggestion now ends with --force."""
    import shlex
    import tarfile

    from ssmrepro.data.datasets import available_sources

    root = tmp_path / "data"

    def row(dataset: str) -> dict:
        return next(r for r in available_sources(root)
                    if r["dataset"] == dataset and r["source"] == "lra_release")

    assert not row("listops")["hint"].endswith("--force")
    src = tmp_path / "src" / "lra_release" / "listops-1000"
    src.mkdir(parents=True)
    for split in ("train", "val", "test"):
        (src / f"basic_{split}.tsv").write_text("Source\tTarget\n( [MAX 1 2 ] )\t2\n")
    archive = tmp_path / "lra.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "src" / "lra_release", arcname="lra_release")
    partial = row("listops")["path"]
    partial.mkdir(parents=True)
    (partial / "basic_train.tsv").write_text("Source\tTarget\n")
    hint = row("listops")["hint"]
    assert hint.endswith(" --force") and row("retrieval")["hint"].endswith(" --force"), hint
    res = _invoke(*shlex.split(hint)[1:], "--url", f"file://{archive}", "--no-progress")
    assert res.exit_code == 0, res.output
    assert row("listops")["present"]


def test_the_pack_size_help_names_the_calibrated_default():
    """`run --pack-size`'s help said `default: from memory`, though `--calibrate` (the
    default) times candidate sizes and takes the fastest (the memory estimate only caps it)."""
    import typer

    run = typer.main.get_command(app).commands["run"]
    (text,) = [p.help for p in run.params if p.name == "pack_size"]
    assert "--calibrate" in text and "--no-calibrate" in text, text


def test_every_commands_help_lists_the_exit_codes_and_data_shows_its_examples():
    """README: "Exit codes (every command's `--help` lists them)"; `data --help` and `data
    generate --help` listed none, and `data --help` never showed the examples its group
    was written with (the CLI replaced its help with one line when registering it)."""
    import typer

    def walk(cmd, path):
        yield path
        if hasattr(cmd, "commands"):  # a group
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])

    paths = list(walk(typer.main.get_command(app), []))
    assert ["data", "generate", "pathfinder"] in paths and ["bench"] in paths
    for path in paths:
        if path[:1] == ["bench"]:  # (its own --help: `bench scans` / `step` print argparse's)
            continue
        res = _invoke(*path, "--help", env={"COLUMNS": "200"})
        assert res.exit_code == 0 and "Exit codes: 0 ok;" in res.output, (path, res.output)
    res = _invoke("data", "--help", env={"COLUMNS": "200"})
    assert "ssmrepro data generate listops --n 100000 --seed 0" in res.output, res.output


def test_data_generate_with_both_dir_and_out_is_refused(tmp_path):
    """`data generate listops --dir A --out B` (or pathfinder's) wrote into B and ignored A
    without a word: a data root only makes the default --out, so the loaders reading A found
    nothing. Refused now, exit 2, before anything is written; either alone is taken."""
    small = ["--n", "3", "--min-length", "5", "--max-length", "30"]
    for cmd in (["listops", *small], ["pathfinder", "--n", "1", "--workers", "1"]):
        out = tmp_path / cmd[0] / "out"
        res = _invoke("data", "generate", *cmd, "--dir", tmp_path / "root", "--out", out)
        _assert_refused(res, "--out is the folder written, --dir only the data root")
        assert not out.exists() and not (tmp_path / "root").exists()
    res = _invoke("data", "generate", "listops", *small, "--dir", tmp_path / "root")
    assert res.exit_code == 0, res.output


def test_data_generate_pathfinder_shard_size_with_the_lra_format_is_refused(tmp_path):
    """`data generate pathfinder --format lra --shard-size 1` wrote the release's folders of
    1,000 PNGs and ignored the option without a word; refused now, exit 2, before writing."""
    res = _invoke("data", "generate", "pathfinder", "--n", "1", "--workers", "1", "--format",
                  "lra", "--shard-size", "1", "--dir", tmp_path)
    _assert_refused(res, "--shard-size 1: only --format npy writes shards")
    assert not (tmp_path / "generated").exists()


def test_max_runs_says_to_continue_on_the_same_device_and_backend(tmp_path):
    """`run --max-runs 1 --device cpu --backend torch` (or `--engine ray --address HOST`)
    said `continue with ssmrepro run ID --profile P --out O`: followed on a GPU machine, or
    after a cluster's sweep, the rest trained on another device, or on this machine instead of
    the cluster. The suggested command keeps where the runs train, and it finishes the profile."""
    import shlex

    spec = _one_run_spec(tmp_path, seeds=[0, 1])
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-plot",
                  "--no-calibrate", "--workers", "1", "--device", "cpu", "--backend", "torch",
                  "--max-runs", "1")
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    again = said.split("continue with ", 1)[1].split(" (add --max-runs", 1)[0]
    assert again.endswith("--device cpu --backend torch"), again
    res = _invoke(*shlex.split(again)[1:], "--no-plot", "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0 and "1 already done" in " ".join(res.output.split()), res.output


def test_the_no_plot_help_names_what_it_skips(tmp_path):
    """`run --no-plot`'s help said `skip figure and report`; it also skips summary.csv,
    curves.csv and the verdicts, while results.csv is still written."""
    import typer

    run = typer.main.get_command(app).commands["run"]
    (text,) = [p.help for p in run.params if p.name == "no_plot"]
    spec = _one_run_spec(tmp_path)
    res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--no-plot",
                  "--no-calibrate", "--workers", "1")
    assert res.exit_code == 0, res.output
    written = {p.name for p in (tmp_path / "out" / "tests" / "t-spec").iterdir()}
    assert "results-smoke.csv" in written and "results.csv is still written" in text, text
    for skipped, name in (("summary", "summary-smoke.csv"), ("curves", "curves-smoke.csv"),
                          ("report", "report-smoke.md"), ("figures", "figure-smoke.png")):
        assert name not in written and skipped in text, (name, text)
    assert "Verdicts:" not in res.output and "verdicts" in text


def test_a_mechanistic_figure_not_drawn_is_not_said_drawn_without_a_selection(tmp_path):
    """`plot koren2026-fig3 --profile smoke` before training said `warning: figure-smoke.png
    drawn without 1 of its 2 selections ...` and then `figure-smoke.png not drawn: no finished
    cell ...`. The first line is said only when the figure is drawn."""
    res = _invoke("plot", "koren2026-fig3", "--profile", "smoke", "--out", tmp_path / "out")
    said = " ".join(res.output.split())
    assert "figure-smoke.png not drawn" in said, said
    assert "drawn without" not in said, said


def test_bench_help_names_both_benchmarks_with_their_own_help():
    """`bench --help`'s `-h` said `(with 'scans': the scan benchmark's own options)`; `bench
    step -h` prints the step benchmark's own options too."""
    import typer

    bench = typer.main.get_command(app).commands["bench"]
    (text,) = [p.help for p in bench.params if p.name == "help_"]
    assert "'scans' or 'step'" in text, text
    for name, option in (("scans", "--kernels"), ("step", "--workloads")):
        res = _invoke("bench", name, "-h")
        assert res.exit_code == 0 and option in res.output, res.output


def test_report_tables_show_list_valued_keys_as_json_like_the_csvs():
    """report.md's table printed a `model.layers` of [SSM] as the Python repr `['SSM']` while
    every CSV (store.csv_text) writes it `["SSM"]`: one value, two spellings. Lists, tuples and
    dicts read as in the CSVs, key column or not; the numbers beside them are unchanged."""
    import pandas as pd

    from ssmrepro.report import md_table
    from ssmrepro.store import csv_text

    df = pd.DataFrame({"label": ["Mamba", "Hybrid"], "model.layers": [["SSM"], ["SSM", "TF"]],
                       "train.betas": [(0.9, 0.999), (0.9, 0.98)],
                       "model.blocks": [{"S": {"d": 1}}, {}], "test.acc": [0.25, 0.5]})
    text = md_table(df, ("label", "model.layers"))
    csv = csv_text(df)
    for shown in ('["SSM"]', '["SSM", "TF"]', "[0.9, 0.999]", '{"S": {"d": 1}}', "{}"):
        assert shown in text and shown.replace('"', '""') in csv, (shown, text, csv)
    assert "'" not in text and "(0.9" not in text, text
    assert "| 0.250 |" in text and "| 0.500 |" in text, text


def test_lines_paper_marks_take_their_line_colour_and_values_not_drawn_are_named(tmp_path,
                                                                                 monkeypatch):
    """A `lines` figure with `paper: true` drew every paper value as a black × whatever its hue
    (koren2026-fig10's Λ lines: with close values one could not tell whose × it was), and a
    paper value at an x the profile does not run (N_k = 4 beside 1-3) was left off without a
    word. Each × now takes its line's colour (the legend says so) and the title names the
    paper values not drawn."""
    from types import SimpleNamespace

    import matplotlib.colors as mcolors
    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind
    from ssmrepro.spec import PaperValue

    cells = pd.DataFrame({"label": "", "model.n_layers": [1, 1, 1, 2, 2, 2],
                          "task.key_repeats": [1, 2, 3] * 2, "n_expected": 1, "n_ok": 1,
                          "n_diverged": 0, "complete": True,
                          "val.best_acc": [1.0, 0.5, 0.33, 1.0, 0.96, 0.96]})
    where = lambda lam, k: {"model.n_layers": lam, "task.key_repeats": k}  # noqa: E731
    pvs = [PaperValue(where=where(1, 2), metric="val.best_acc", value=0.5),
           PaperValue(where=where(2, 2), metric="val.best_acc", value=1.0),
           PaperValue(where=where(1, 4), metric="val.best_acc", value=0.25)]
    spec = SimpleNamespace(id="t", title="t", paper_values=pvs, claims=[], claim="c",
                           aggregate=SimpleNamespace(reduce="mean"), analytic=None)
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.n_layers", "task.key_repeats"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.append(fig))
    cfg = parse_figure({"kind": "lines", "metric": "val.best_acc", "x": "task.key_repeats",
                        "hue": "model.n_layers", "facet": None, "paper": True,
                        "names": {"task.key_repeats": "N_k", "model.n_layers": "Λ"}})
    assert kind.lines(ctx, cfg, tmp_path / "f.png")
    (fig,) = seen
    (ax,) = fig.axes
    line_colour = {ln.get_label(): mcolors.to_rgba(ln.get_color()) for ln in ax.lines}
    marks = {tuple(c.get_offsets()[0]): tuple(c.get_facecolor()[0]) for c in ax.collections
             if len(c.get_offsets())}  # (the legend's own × is an empty one)
    assert marks == {(2.0, 0.5): line_colour["1"], (2.0, 1.0): line_colour["2"]}, marks
    assert line_colour["1"] != line_colour["2"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "paper (×, the line's colour)" in legend, legend
    title = " ".join(fig._suptitle.get_text().split())
    assert "1 paper value not drawn" in title and "(Λ = 1, N_k = 4)" in title, title
    pvs.pop()  # every paper value drawn: nothing said
    seen.clear()
    ctx._paper_lookup = None
    assert kind.lines(ctx, cfg, tmp_path / "f.png")
    assert "not drawn" not in seen[0]._suptitle.get_text()


def test_run_show_plot_verify_help_say_they_take_a_spec_file(tmp_path):
    """`run/show/plot/verify --help` said `experiment id or alias`, but each also takes a spec
    file's path (as `validate`'s `experiment id, alias or file` says): the help says so, and a
    path is indeed taken (`show` of a spec file)."""
    import typer

    commands = typer.main.get_command(app).commands
    for name in ("run", "show", "plot", "verify"):
        (text,) = [p.help for p in commands[name].params if p.name == "name"]
        assert "spec file (.yaml)" in text, (name, text)
    res = _invoke("show", _one_run_spec(tmp_path))
    assert res.exit_code == 0, res.output


def test_dry_run_without_estimate_refuses_a_missing_corpus_as_run_does(tmp_path):
    """`run --dry-run --no-estimate` of a spec whose corpus file is missing (yu2025-appG's
    data/text/corpus.txt) planned its runs without a word and exited 0, while `run --dry-run`
    (the estimate builds the tasks) and `run` itself refuse, naming the file: it refuses too,
    exit 2, for the task's corpus and for an evaluation set's."""
    data = tmp_path / "data"
    (data / "text").mkdir(parents=True)
    (data / "text" / "c.txt").write_text("abcdefgh " * 600)
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
             "test_size": 16, "eval_every": 2, "eval_batch_size": 16}
    model = {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4}
    for name, task, evals, missing in (
            ("t-a", "text/gone.txt", {}, "gone.txt"),
            ("t-b", "text/c.txt", {"other": {"path": "text/other.txt"}}, "other.txt")):
        spec = write_spec(tmp_path, name=name, model=model, train={**train, "evals": evals},
                          task={"name": "text_corpus", "path": task, "L": 16})
        res = _invoke("run", spec, "--dry-run", "--no-estimate", "--profile", "smoke", "--out",
                      tmp_path / "out", env={"SSMREPRO_DATA": str(data)})
        assert res.exit_code == 2, res.output
        assert "no corpus file" in res.output and missing in res.output, res.output
        assert "pending in" not in res.output, res.output


def test_train_pack_refuses_runs_of_different_pack_keys(tmp_path):
    """`train_pack(runs)` given runs of two tasks (or two widths, two batch sizes) through the
    Python API trained and evaluated every member on the first run's task and settings without a
    word: refused before any training, naming the setting that differs. Member-level settings (the
    seed, lr) still pack."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import pack_mismatch, train_pack

    for axis, values in (("task.n", [2, 3]), ("model.d_model", [8, 12]),
                         ("train.batch_size", [8, 4])):
        runs = expand(load_spec(_one_run_spec(tmp_path, sweep=[{"grid": {axis: values}}])), "smoke")
        assert runs[0].pack_key() != runs[1].pack_key()
        with pytest.raises(ValueError, match=rf"differs from the pack's first run in {axis} "):
            train_pack(runs)
    same = expand(load_spec(_one_run_spec(tmp_path, seeds=[0, 1],
                                          sweep=[{"grid": {"train.lr": [0.01, 0.02]}}])), "smoke")
    assert len(same) == 4 and pack_mismatch(same) is None


def test_automatic_pack_sizing_counts_float64_activations_at_8_bytes(tmp_path):
    """The planner sized packs by activations counted at 4 bytes a float whatever the run's
    dtype: a `train.dtype: float64` run's packs held twice the activation budget (CPU: ~4 GiB of
    its 2 GiB). `member_bytes` counts the run's dtype; `memory_need` is unchanged."""
    from ssmrepro.engine.plan import auto_pack_size
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import member_bytes, memory_need

    def run(dtype):
        spec = write_spec(tmp_path, name=f"t-{dtype}", seeds=[0], train={
            "optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
            "test_size": 16, "eval_every": 2, "eval_batch_size": 16, "dtype": dtype})
        return expand(load_spec(spec), "smoke")[:1]

    single, double = run("float32"), run("float64")
    assert member_bytes(double[0]) == 2 * member_bytes(single[0])
    assert memory_need(double[0]).train_bytes == 2 * memory_need(single[0]).train_bytes
    budget = 10 * member_bytes(single[0])
    assert auto_pack_size(single, "cpu", budget) == 10
    assert auto_pack_size(double, "cpu", budget) == 5


def test_the_cost_cache_keeps_the_timings_of_each_scan_backend_apart(tmp_path, monkeypatch):
    """The planner's cost cache was keyed without the scan backend, and the planner's process
    timed its steps on its own backend (torch) whatever `--backend` the workers use: a timing of
    the torch scans was reused for packs that train on the CUDA kernels. The cost model times on
    the workers' backend and keys the CUDA kernels' timings apart; the torch keys are those
    written before (still found: every earlier timing was of the torch scans)."""
    import io

    import torch
    from rich.console import Console

    import ssmrepro.engine as engine
    import ssmrepro.train as train_mod
    from ssmrepro.engine.costs import COST_VERSION, CostModel
    from ssmrepro.kernels.backend import get_scan_backend
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import CODE_VERSION, expand
    from ssmrepro.util import cpu_model

    seen = []
    monkeypatch.setattr(train_mod, "time_steps", lambda runs, device, n, micro_batch=None: (
        seen.append(get_scan_backend()) or (2.0 if get_scan_backend() == "cuda" else 1.0)))
    spec = load_spec(_one_run_spec(tmp_path))
    runs = expand(spec, "smoke")
    path = tmp_path / "costs.json"
    old = "|".join(map(str, (COST_VERSION, CODE_VERSION, runs[0].pack_key(), 1, None, "cpu", 1,
                             torch.__version__, cpu_model())))
    path.write_text(json.dumps({old: 3.0}))  # a timing written before the key named backends
    assert CostModel(path=path).step_seconds(runs, None) == 3.0 and seen == []
    assert CostModel(path=path, backend="cuda").step_seconds(runs, None) == 2.0
    assert seen == ["cuda"] and get_scan_backend() == "torch"
    assert CostModel(path=path).step_seconds(runs, None) == 3.0  # each backend's own entry
    called = {}

    class Planned(Exception):
        pass

    def fake(device, workers=None, threads=None, backend="torch"):
        called["backend"] = backend
        raise Planned

    monkeypatch.setattr(engine, "cost_model", fake)
    with pytest.raises(Planned):
        engine.run_experiment(spec, "smoke", tmp_path / "out", "cpu", "cuda",
                              console=Console(file=io.StringIO()))
    assert called == {"backend": "cuda"}
    with pytest.raises(Planned):
        engine.dry_run(spec, "smoke", tmp_path / "out", "cpu", backend="cuda")
    assert called == {"backend": "cuda"}


def test_calibrate_with_the_ray_engine_is_refused_not_ignored(tmp_path, monkeypatch):
    """`run --engine ray --calibrate` sized its packs by the cluster's memory alone, the flag
    quietly ignored (the cost model times steps on this machine, for the local engine only):
    refused, exit 2, before Ray is needed; the default (and `--no-calibrate`) go on as before."""
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # Ray not installed
    spec = _one_run_spec(tmp_path)
    for extra in ([], ["--dry-run"]):
        res = _invoke("run", spec, "--out", tmp_path / "o", "--engine", "ray", "--calibrate",
                      *extra)
        _assert_refused(res, "--calibrate is an option of the local engine")
    for flags in ([], ["--no-calibrate"]):
        res = _invoke("run", spec, "--out", tmp_path / "o", "--engine", "ray", *flags)
        assert res.exit_code == 2 and "--calibrate" not in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_chen2025_inverse_matching_fill_follows_or_refuses_an_edited_conv_width(tmp_path):
    """chen2025's inverse-matching specs derived `task.n_fill: "3 * model.repeat"`, commented as
    the conv receptive field ((d_conv - 1) per layer): a spec edited to `d_conv: 5` kept n_fill 6
    for a receptive field of 8 without a word. figS3-S4 (Mamba only) derives it from d_conv; in
    figS5-S6 and fig9 (a Transformer case has no conv) the Mamba cases' constraint refuses the
    edit, naming the constraint. The shipped specs' run ids are unchanged."""
    from ssmrepro.spec import SpecError, load_spec
    from ssmrepro.sweep import expand

    def edited(name):
        text = (ROOT / "experiments/chen2025" / f"{name}.yaml").read_text()
        assert text.count("d_conv: 4") == 1
        text = re.sub(r"^alias: .*$", "alias: null", text.replace("d_conv: 4", "d_conv: 5"),
                      flags=re.M)
        path = tmp_path / f"{name}.yaml"
        path.write_text(re.sub(r"^id: .*$", f"id: edited-{name}", text, flags=re.M))
        return load_spec(path)

    for name in ("chen2025-figS3-S4", "chen2025-figS5-S6", "chen2025-fig9"):
        for r in expand(load_spec(ROOT / "experiments/chen2025" / f"{name}.yaml"), "smoke"):
            if "SSM" in r.model.blocks:
                assert r.task.n_fill == (r.model.blocks["SSM"].mixer.d_conv - 1) * r.model.repeat
    runs = expand(edited("chen2025-figS3-S4"), "smoke")
    assert sorted(r.task.n_fill for r in runs) == [8, 12]
    for name in ("chen2025-figS5-S6", "chen2025-fig9"):
        with pytest.raises(SpecError) as err:
            expand(edited(name), "smoke")
        said = str(err.value)
        for label in ("(Mamba)", "(Modified Mamba)"):
            assert f"{label}: the constraints exclude every point of this case ('task.n_fill == " \
                   "(model.blocks.SSM.mixer.d_conv - 1) * model.repeat' false)" in said, said
        assert "(Transformer)" not in said, said


def test_list_values_in_verdict_lines_and_show_coords_read_as_the_tables_write_them():
    """A claim's `where: {label: [MQA, MKA, MVA]}` printed `label=['MQA', 'MKA', 'MVA']` (Python's
    repr) in report.md's and `verify`'s verdict lines, and `show`'s coords `layers=['TF'],
    blocks={'TF': {...}}`, while every table writes lists and mappings as JSON (`["MQA", ...]`):
    one value read two ways, and the repr is not what a spec (YAML) takes back. All now JSON."""
    import pandas as pd

    from ssmrepro.report import verify
    from ssmrepro.spec import find_spec
    from ssmrepro.sweep import expand

    rows = [{"label": lab, "model.d_state": n, "model.heads": m, "n_expected": 1, "n_ok": 1,
             "n_diverged": 0, "complete": True, "val.best_acc": 0.5, "out.noise_var": 0.1}
            for lab in ("MHA", "MQA", "MKA", "MVA") for n in (2, 4) for m in (1, 2, 4, 6)]
    texts = [v.text for v in verify(find_spec("koren2026-fig8"), pd.DataFrame(rows))]
    assert any('label=["MQA", "MKA", "MVA"]' in t for t in texts), texts
    assert not any("['" in t for t in texts), texts
    tf = next(r for r in expand(find_spec("chen2025-figS5-S6"), "smoke") if "TF" in r.model.blocks)
    shown = tf.coords_text()
    assert 'layers=["TF"]' in shown and 'blocks={"TF": {"mixer": {"name": "attention"' in shown
    assert "'" not in shown, shown
    assert yaml.safe_load(shown.split("layers=", 1)[1].split(", blocks=")[0]) == ["TF"]


def test_ray_dry_run_packs_as_ray_does_and_says_it_plans_on_this_machine(tmp_path, monkeypatch):
    """`run --engine ray --dry-run` calibrated its packs here (the fastest pack size timed on
    this machine), while a Ray run never calibrates: it sizes packs by memory alone, so the
    dry run's pack count could differ from what Ray trains, and nothing said the plan and the
    estimate were this machine's. It now plans as Ray packs (memory alone) and says so."""
    import ssmrepro.engine as engine

    seen = []
    real = engine.dry_run

    def spy(*args, **kw):
        seen.append(kw["calibrate"])
        return real(*args, **kw)

    monkeypatch.setattr(engine, "dry_run", spy)
    spec = write_spec(tmp_path)
    said = {}
    for eng in ("ray", "local"):
        res = _invoke("run", spec, "--out", tmp_path / "o", "--profile", "smoke", "--dry-run",
                      "--no-estimate", "--engine", eng)
        assert res.exit_code == 0, res.output
        said[eng] = " ".join(res.output.split())
    assert seen == [False, True]
    assert "Ray: planned on this machine: packs sized by memory alone" in said["ray"], said
    assert "not on the cluster's workers" in said["ray"] and "Ray:" not in said["local"]
    res = _invoke("run", spec, "--out", tmp_path / "o", "--profile", "smoke", "--dry-run",
                  "--no-estimate", "--engine", "ray", "--json")
    doc = json.loads(res.stdout)
    assert doc["engine"] == "ray" and doc["ray_note"].startswith("planned on this machine")
    assert not (tmp_path / "o").exists()


def test_list_values_in_figure_legends_and_titles_read_as_the_tables_write_them():
    """A curves figure's `hue: [model.layers]` (or a row / col of a list-valued key) named its
    curves `layers=['SSM', 'SSM']` (Python's repr), where every table writes `["SSM", "SSM"]`,
    and a heatmap's coordinate of such a key was its repr too: now the tables' JSON."""
    import pandas as pd

    from ssmrepro.plots.curves import CurvesConfig, _fmt, _hue_text
    from ssmrepro.plots.figures import _coord

    cfg = CurvesConfig(kind="curves", series=["val.acc"], hue=["model.layers", "model.d_state"])
    df = pd.DataFrame({"model.layers": [["SSM", "SSM"], ["TF"]], "model.d_state": [4.0, math.nan]})
    assert _hue_text(df, cfg).tolist() == ['layers=["SSM", "SSM"], d_state=4', 'layers=["TF"]']
    assert _fmt("model.blocks", {"TF": {"norm": "layernorm"}}) == 'blocks={"TF": {"norm": "layernorm"}}'
    assert _coord({"model.layers": ["SSM"], "model.d_state": 8}, ["model.layers", "model.d_state"]) \
        == ('["SSM"]', 8.0)


def test_export_parquet_without_pyarrow_refused_before_reading_tables(monkeypatch, tmp_path):
    """`export --format parquet` without pyarrow read every spec's tables (21 s in a fresh clone)
    before it said `needs pyarrow`: the missing package is named before any table is read."""
    import sys

    from ssmrepro.plots import export as export_mod

    def no_table(*a, **k):
        raise AssertionError("the tables were read before pyarrow was checked")

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    monkeypatch.setattr(export_mod, "export_table", no_table)
    with pytest.raises(ImportError, match=r"needs pyarrow: pip install -e '\.\[parquet\]'"):
        export_mod.write_export(tmp_path / "x.parquet", "parquet", out=tmp_path)
    assert not (tmp_path / "x.parquet").exists()


def test_a_heatmap_without_paper_values_does_not_promise_them(tmp_path, monkeypatch):
    """The heatmaps colour bar read `test.acc, one seed: ours (paper)` on a spec with no paper
    value (chen2025-figS3-S4's grid): the cells held only our numbers, as if the paper's were
    there. It says `(paper)` only when a cell prints a paper value."""
    from types import SimpleNamespace

    import pandas as pd

    import ssmrepro.plots.figures as figs
    from ssmrepro.plots.registry import FigureContext

    labels = []
    monkeypatch.setattr(figs, "save_png", lambda fig, path, **kw: labels.append(
        " ".join(fig.axes[-1].get_ylabel().split())))  # the colour bar's, unwrapped
    for paper, want in ((None, "test.acc, one seed: ours"),
                        (0.9, "test.acc, one seed: ours (paper)")):
        labels.clear()
        cells = pd.DataFrame({"label": ["S6", "S4D"], "model.mixer": ["s6", "s4d"],
                              "task.T": [8, 8], "n_ok": [1, 1], "n_diverged": [0, 0],
                              "test.acc": [0.4, 0.6]})
        ctx = FigureContext(spec=SimpleNamespace(paper_values=[]), profile="smoke",
                            cells=cells, keys=["label"], out=lambda s, e: tmp_path / f"{s}.{e}")
        ctx.fitted_title = lambda cfg, width, size=10: "t"
        ctx.aggregation = lambda metric="": "one seed"
        ctx.paper_value = lambda row, metric, value=paper: value
        cfg = figs.HeatmapsConfig(kind="heatmaps", metric="test.acc", x=["model.mixer"],
                                  y=["task.T"])
        assert figs.heatmaps(ctx, cfg, tmp_path / "f.png")
        assert labels == [want], labels


def test_an_evaluation_only_pack_leaves_its_pack_bar_complete(tmp_path):
    """cooper2026-fig9 (a constructed model, no training step) run by one worker left the pack
    bar at `pack 1 (1 runs) 0/1 -:--:--` after `trained 1 runs`, as if the pack had not run."""
    import io

    from rich.console import Console

    from ssmrepro.engine import run_experiment
    from ssmrepro.spec import load_spec

    buf = io.StringIO()
    spec = load_spec(ROOT / "experiments/cooper2026/cooper2026-fig9.yaml")
    s = run_experiment(spec, "smoke", tmp_path, workers=1, calibrate=False,
                       console=Console(file=buf, width=200, force_terminal=False))
    assert s.trained == 1, buf.getvalue()
    bar = [ln for ln in buf.getvalue().splitlines() if ln.startswith("pack 1 (1 runs)")]
    assert bar and " 1/1 " in bar[-1], buf.getvalue()


def test_expanding_one_profile_leaves_the_spec_for_the_next(tmp_path):
    """A profile's nested `set` (yu2025-fig3 smoke's `model.blocks.SSM.mixer.d_state: 4`) was
    written into the spec's own mapping: in one process (`figures` after a smoke run) quick's
    runs were then planned with d_state 4, and quick's committed results.csv and curves.csv lost
    their S6 rows on disk ('the spec changed since it was trained'). Each expand starts from the
    spec as loaded."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    path = ROOT / "experiments/yu2025/yu2025-fig3.yaml"
    fresh = [r.run_id for r in expand(load_spec(path), "quick")]
    spec = load_spec(path)
    expand(spec, "smoke")
    after = expand(spec, "quick")
    assert [r.run_id for r in after] == fresh
    assert {r.model.blocks["SSM"].mixer.d_state for r in after} == {16}


def test_set_report_and_figure_name_their_overrides(tmp_path):
    """A `--set` run's report and figure (`report-smoke-set-6c6b50.md`) said `Profile smoke` /
    `[id, profile smoke]` alone: numbers of other settings under the profile's name, the tag a
    hash that names no setting. Both now name the `--set` options; the untagged ones do not."""
    import pandas as pd

    from ssmrepro.plots.registry import FigureContext, parse_figure
    from ssmrepro.spec import load_spec

    spec = _one_run_spec(tmp_path)
    out = tmp_path / "o"
    sets = ["--set", "train.lr=0.02", "--set", "task.vocab=10"]
    for extra in (sets, []):
        res = _invoke("plot", spec, "--profile", "smoke", "--out", out, *extra)
        assert res.exit_code == 0, res.output
    (tagged,) = out.rglob("report-smoke-set-*.md")
    assert "Profile `smoke` with --set task.vocab=10 --set train.lr=0.02: 1 runs expected" \
        in tagged.read_text(), tagged.read_text()
    (plain,) = out.rglob("report-smoke.md")
    assert "Profile `smoke`: 1 runs expected" in plain.read_text(), plain.read_text()
    ctx = FigureContext(load_spec(spec), "smoke", pd.DataFrame(), [], lambda *a: tmp_path,
                        overrides="--set 'task.path=\"a $x$ b\"'")
    cfg = parse_figure({"kind": "bars", "metric": "test.acc", "title": "T"})
    assert ctx.title(cfg) == "T [t-spec, profile smoke, --set 'task.path=\"a \\$x\\$ b\"']"
    ctx.overrides = ""
    assert ctx.title(cfg) == "T [t-spec, profile smoke]"


def test_front_page_shows_no_report_of_another_profile_as_the_default(tmp_path):
    """`figures --no-rebuild` after the spec's default profile changed (quick -> smoke) showed
    quick's report.md, its verdicts and figure, as the new default smoke's, without a word: the
    report that names another profile is left off the front page with a warning."""
    root = _project(tmp_path, small=True)
    shutil.copy(ROOT / "experiments/catalogue.yaml", root / "experiments")
    src = ROOT / "results/huang2025/huang2025-tab1"
    dest = tmp_path / "out/huang2025/huang2025-tab1"
    dest.mkdir(parents=True)
    for name in ("results.csv", "report.md", "figure.png"):
        shutil.copy(src / name, dest)
    env = {"SSMREPRO_ROOT": str(root)}
    row = "| huang2025-tab1 | keep-nth | 1 | quick results | 5 PASS, 0 FAIL"
    res = _invoke("figures", "--no-rebuild", "--out", tmp_path / "out", env=env)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert row in (tmp_path / "out/README.md").read_text()
    spec = root / "experiments/huang2025/huang2025-tab1.yaml"
    spec.write_text(spec.read_text() + "default_profile: smoke\n")
    res = _invoke("figures", "--no-rebuild", "--out", tmp_path / "out", env=env)
    assert res.exit_code == 0, res.output
    assert "warning: huang2025-tab1: report.md is a report of profile quick, not smoke" \
        in res.output, res.output
    page = (tmp_path / "out/README.md").read_text()
    line = next(x for x in page.splitlines() if x.startswith("| huang2025-tab1 |"))
    assert "PASS" not in line and "report.md" not in line and "figure.png" not in line, line


def test_a_profile_finds_its_table_under_its_name_before_the_default_changed(tmp_path):
    """A fresh clone (no run records) whose spec changed its default profile: the profile's
    committed rows sit in the table named as before (quick's in results.csv once smoke is the
    default, smoke's in results-smoke.csv once it is), and `figures` / `verify` reported it
    `0 of N runs finished`, its claims MISSING, beside those rows. They complete it now, as
    another profile's table of the same runs does."""
    root = _project(tmp_path, small=True)
    env = {"SSMREPRO_ROOT": str(root)}
    spec = root / "experiments/huang2025/huang2025-tab1.yaml"
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    folder.mkdir(parents=True)
    committed = ROOT / "results/huang2025/huang2025-tab1/results.csv"
    for name, default in (("results.csv", "smoke"), ("results-quick.csv", None)):
        for old in folder.iterdir():
            old.unlink()
        shutil.copy(committed, folder / name)  # quick's rows, written while quick was default
        if default:
            spec.write_text(spec.read_text() + f"default_profile: {default}\n")
        else:
            shutil.copy(ROOT / "experiments/huang2025/huang2025-tab1.yaml", spec)
        res = _invoke("verify", "huang2025-tab1", "--profile", "quick", "--out", tmp_path / "out",
                      env=env)
        assert res.exit_code == 0, res.output
        assert "Verdicts: 5 PASS, 0 FAIL, 0 MISSING" in res.output, (name, res.output)
        assert (folder / name).read_bytes() == committed.read_bytes()  # left as it was
        # and `export` exports them as quick's, not noting the table as of no profile
        res = _invoke("export", "--file", tmp_path / "x.csv", "--out", tmp_path / "out", env=env)
        assert res.exit_code == 0 and "no profile" not in res.output, res.output
        import pandas as pd
        got = pd.read_csv(tmp_path / "x.csv")
        assert set(got["profile"]) == {"quick"}, got
        assert set(got["run_id"]) == set(pd.read_csv(committed)["run_id"]), got


def test_figures_names_the_report_of_a_profile_that_became_the_default(tmp_path):
    """`figures` said of smoke's report-smoke.md, left from before smoke became the default
    profile, `is of no profile of the spec (have smoke, quick, paper) ... delete it if the
    profile is gone`: smoke is a profile of the spec. It names what happened now."""
    root = _project(tmp_path, small=True)
    shutil.copy(ROOT / "experiments/catalogue.yaml", root / "experiments")
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    folder.mkdir(parents=True)
    (folder / "report-quick.md").write_text("# old\n")  # quick is the default
    (folder / "report-gone.md").write_text("# old\n")
    res = _invoke("figures", "--out", tmp_path / "out", env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0, res.output
    assert "report-quick.md is profile quick's report from before it became the default " \
           "profile (its report is now report.md)" in res.output, res.output
    assert "report-gone.md is of no profile of the spec" in res.output, res.output


def test_show_lists_a_fresh_clones_committed_runs_from_the_results_table(trained_store, tmp_path):
    """A fresh clone (the committed results.csv, no run records: they are not in git): `show`
    printed every run's status '-' and no test.acc, where `verify` judged the same runs finished.
    It now reads them from the results tables, marked as such ('ok (table)', "source": "table")."""
    spec, store = _copy_trained(trained_store, tmp_path)
    (path,) = (store / "runs").glob("*.json")
    acc = json.loads(path.read_text())["metrics"]["test.acc"]
    assert (store / "results-smoke.csv").exists() or _invoke(
        "plot", spec, "--out", tmp_path / "out", "--profile", "smoke").exit_code == 0
    res = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke", "--json")
    assert json.loads(res.stdout)["runs"][0]["source"] == "record"
    shutil.rmtree(store / "runs")
    res = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke", "--json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["runs"]
    assert (row["status"], row["source"]) == ("ok", "table"), row
    assert row["metrics"]["test.acc"] == pytest.approx(acc)
    text = _invoke("show", spec, "--out", tmp_path / "out", "--profile", "smoke").output
    assert "ok (table)" in text and f"{acc:.3f}" in text and "run records are not in git" in text
    assert not (store / "runs").exists()  # read only


def test_induction_heads_hard_case_reaches_gamma_t_as_written():
    """huang2025 App. D.4 draws the hard case's r from {1, ..., gamma T}: with gamma 0.29 and
    T 100 float's 0.29 * 100 = 28.999... floored to 28, so v* never sat at 29 / 71 (silently a
    narrower range than the config says). The shipped gamma 0.1 keeps its range."""
    import torch

    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.induction_heads import special_range

    assert [special_range(g, T) for g, T in ((0.29, 100), (0.35, 180), (0.41, 300))] == \
        [29, 63, 123]
    assert [special_range(0.1, T) for T in (20, 30, 50, 100)] == [2, 3, 5, 10]
    task = build_task({"name": "induction_heads", "vocab": 5, "T": 100, "p": 1.0, "gamma": 0.29})
    x = task.sample(torch.tensor([0]), 0, torch.arange(3000)[None]).x[0]
    firsts = set()
    for s in x.tolist():  # v* occurs exactly twice, at r and T - r (1-based)
        v = next(v for v in set(s) if s.count(v) == 2 and s[100 - s.index(v) - 2] == v
                 and s.index(v) < 29)
        firsts.add(s.index(v) + 1)
    assert firsts == set(range(1, 30)), sorted(firsts)


def test_a_where_selects_a_list_valued_key_by_its_whole_value(tmp_path):
    """A sweep of a list-valued key (`train.betas: [[0.9, 0.99], [0.8, 0.9]]`): a claim's
    `where: {train.betas: [0.9, 0.99]}` was read as 'betas is 0.9 or 0.99', which no list
    equals, so `validate` refused it and no claim or paper value could select such a cell. A
    list is now the key's value, a list of lists any of them; an alternative that matches no
    cell is still named."""
    import pandas as pd

    from ssmrepro.report.cells import CellIndex, PaperValueLookup, select
    from ssmrepro.spec import PaperValue

    def spec(where):
        return write_spec(tmp_path, sweep=[{"grid": {"train.betas": [[0.9, 0.99], [0.8, 0.9]]}}],
                          seeds=[0], claims=[{"text": "x", "where": where, "metric": "test.acc",
                                              "op": ">=", "value": 0.5}])
    for where in ({"train.betas": [0.9, 0.99]}, {"train.betas": [[0.9, 0.99], [0.8, 0.9]]},
                  {"train.betas": [[0.8, 0.9]]}):
        res = _invoke("validate", spec(where))
        assert res.exit_code == 0, (where, res.output)
    res = _invoke("validate", spec({"train.betas": [[0.9, 0.99], [0.7, 0.9]]}))
    assert res.exit_code == 2 and "[0.7, 0.9] (one of its values) matches no run" in res.output
    res = _invoke("validate", spec({"train.betas": [0.7, 0.9]}))
    assert res.exit_code == 2 and "matches no run" in res.output
    cells = pd.DataFrame({"label": ["a", "a"], "train.betas": [[0.9, 0.99], [0.8, 0.9]],
                          "test.acc": [0.1, 0.2]})
    for where, want in (({"train.betas": [0.9, 0.99]}, [0.1]), ({"train.betas": [0.8, 0.9]}, [0.2]),
                        ({"train.betas": [[0.8, 0.9], [0.9, 0.99]]}, [0.1, 0.2]),
                        ({"train.betas": [0.9]}, []), ({"train.betas": 0.9}, [])):
        assert select(cells, where)["test.acc"].tolist() == want, where
        assert CellIndex(cells).select(where)["test.acc"].tolist() == want, where
    pvs = [PaperValue(where={"train.betas": [0.8, 0.9]}, metric="test.acc", value=0.5)]
    lookup = PaperValueLookup(pvs)
    assert lookup.find({"label": "a", "train.betas": [0.8, 0.9]}, "test.acc") is pvs[0]
    assert lookup.find({"label": "a", "train.betas": [0.9, 0.99]}, "test.acc") is None


def test_bench_scans_selective_chunked_times_the_chunked_scan(monkeypatch):
    """`bench scans`'s selective `chunked` row passed chunk=None to selective_scan, which on
    the CPU runs diag_scan's default, the blocked kernel, for a state of 512 floats or more
    (every committed shape): the row said `chunked` over the blocked kernel's times. It runs the
    two-pass chunked scan with Q = default_chunk now, as diag's `chunked`, and names Q."""
    import argparse

    import torch

    import ssmrepro.kernels.scan as scan_mod
    from ssmrepro.bench import scans

    ran = []
    monkeypatch.setattr(scan_mod, "diag_scan_blocked", lambda *t: ran.append("blocked"))
    for chunk, q in ((None, scan_mod.default_chunk(64, 2 * 16 * 16)), (8, 8)):
        a = argparse.Namespace(batch=2, d=16, n=16, groups=1, chunk=chunk, ssd_chunk=None,
                               heads=1, width=2)  # a state of 512: diag_scan's blocked default
        inputs, ref, fast, desc = scans.make_case("selective", 64, a, torch.float32)
        got = fast["chunked"](*inputs)
        assert not ran, (chunk, ran)
        assert f"Q={q} " in desc, desc
        torch.testing.assert_close(got, ref(*inputs), rtol=1e-4, atol=1e-4)


def test_bench_counting_counts_an_out_tensor_once():
    """`bench.counting` counted a tensor given as `out=` twice, as an operand and as the result:
    the committed training steps (kernels writing into buffers) read 4-15 % more bytes than they
    move, their intensity (FLOP/byte of the roofline and performance.md) that much lower. An
    out= result is counted once; an in-place op's tensor stays read + written."""
    import torch

    from ssmrepro.bench.counting import count

    a, b = torch.ones(100), torch.empty(100)
    assert count(lambda: torch.mul(a, 2.0, out=b)).bytes == 2 * 400  # a read, b written
    assert count(lambda: torch.mul(a, 2.0)).bytes == 2 * 400  # as without out=
    assert count(lambda: a.add_(1.0)).bytes == 2 * 400  # read and written
    x, y = torch.ones(8, 16), torch.empty(8, 16)
    assert count(lambda: torch.mm(x, x.t(), out=torch.empty(8, 8))).bytes == (2 * 128 + 64) * 4
    v, i = torch.empty(8, 16), torch.empty(8, 16, dtype=torch.long)
    got = count(lambda: torch.sort(x, dim=1, out=(v, i)))
    assert got.bytes == 8 * 16 * 4 * 2 + 8 * 16 * 8, got  # x, values, indices once each
    assert count(lambda: torch.add(x, 1.0, out=y)).flops == 128


def test_bench_step_with_several_threads_rates_from_the_wall_clock(monkeypatch, tmp_path):
    """`bench step --threads 2` divided by the CPU-clock median, the two threads' CPU times added
    up: run-steps/s, GFLOP/s and the ratios were those of a step twice as long (as was the
    GEMM peak, timed on the same clock). With several threads they come from the wall clock;
    one thread keeps the CPU clock. Injected timings: no wall-clock assertion."""
    import torch

    from ssmrepro.bench import step as st
    from ssmrepro.bench import timing
    from ssmrepro.bench.timing import Stats

    monkeypatch.setattr(st, "matmul_peak", lambda: 50.0)
    monkeypatch.setattr(st, "contenders", lambda w, packs, *a: {
        "old E=1": (None, 1), "new E=1": (None, 1), "new E=2": (None, 2)})
    wall = {"old E=1": 0.4, "new E=1": 0.2, "new E=2": 0.25}  # seconds per step
    monkeypatch.setattr(st, "interleaved", lambda fns, *a, **k: {
        n: Stats.of([wall[n]] * 3, [2 * wall[n]] * 3) for n in fns})  # CPU = 2 x wall
    assert timing.cpu_clock("cuda:0") is False
    old = torch.get_num_threads()
    try:
        for threads, per in ((2, wall), (1, {k: 2 * v for k, v in wall.items()})):
            out = tmp_path / f"t{threads}.json"
            assert st.main(["--workloads", "koren-d-L64", "--E", "1", "2", "--no-mambapy",
                            "--threads", str(threads), "--json", str(out)]) == 0
            assert timing.cpu_clock() is (threads == 1)
            rec = json.loads(out.read_text())
            assert rec["env"]["rates_clock"] == ("cpu" if threads == 1 else "wall")
            rows = {r["contender"]: r for r in rec["results"]}
            w = st.STEP_WORKLOADS["koren-d-L64"]
            for name, r in rows.items():
                assert math.isclose(r["run_steps_per_s"], r["E"] / per[name]), (threads, r)
                assert math.isclose(r["gflops"], st.step_flops(w, r["E"]) / per[name] / 1e9)
            assert math.isclose(rows["new E=1"]["speedup_vs_old"], per["old E=1"] / per["new E=1"])
    finally:
        torch.set_num_threads(old)


def test_roofline_best_pack_is_above_one(tmp_path):
    """`bench keep-nth-d8 --packs 1,4,...` records the engine's step of one model as pack 1;
    where it was the fastest, performance.md's `best pack E > 1` column said `E = 1` and the
    roofline drew it as the best pack's filled point. The best pack is the fastest above 1; a
    record with no pack above 1 is left out, named."""
    from ssmrepro.bench.roofline import performance_table

    rec = json.loads((ROOT / "results/bench/keep-nth-d8-cpu.json").read_text())
    plain = rec["plain_run_steps_per_s"]
    one = dict(rec["packed"][0], pack=1, run_steps_per_s=10 * plain, ratio=10.0)
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "keep-nth-d8-cpu.json").write_text(json.dumps({**rec, "packed": [one, *rec["packed"]]}))
    (bench / "mqar-linear-cpu.json").write_text(json.dumps({**rec, "workload": "mqar-linear",
                                                            "packed": [one]}))
    skipped = []
    table = performance_table(bench, skipped)
    row = next(ln for ln in table.splitlines() if "keep-nth-d8" in ln)
    assert "| E = 128: ×6.70 |" in row, row
    assert "mqar-linear" not in table, table
    assert len(skipped) == 1 and "mqar-linear-cpu.json" in skipped[0] \
        and "no pack size above 1" in skipped[0], skipped


def test_bench_pathfinder_workers_do_not_import_torch():
    """`scripts/bench_pathfinder.py --workers 2` counted, as CPU time spent generating, every
    spawned worker's import of torch: the workers import the script as `__mp_main__`, whose
    top imported `bench.timing` (torch) for its argument parser (about 1.4 CPU-s per worker:
    --n 1000 --workers 2 said 130 images/cpu-s, 214 without it). Its top imports no torch."""
    import subprocess
    import sys

    code = ("import runpy, sys; runpy.run_path(sys.argv[1], run_name='__mp_main__'); "
            "print('torch' in sys.modules)")
    got = subprocess.run([sys.executable, "-c", code, str(ROOT / "scripts/bench_pathfinder.py")],
                         capture_output=True, text=True, check=True, timeout=120)
    assert got.stdout.strip() == "False", got


def test_roofline_step_table_without_a_one_model_step_says_so():
    """A `bench step --E 4` record (no E = 1 contender) filled performance.md's `ours, one
    model` column with the best contender's rate, a pack of 4's run-steps/s; the cell is `—`
    now, and a record with E = 1 keeps its one-model rate."""
    from ssmrepro.bench.roofline import _step_line, _step_rows_of

    rec = json.loads((ROOT / "results/bench/step-cpu.json").read_text())
    rec["results"] = [r for r in rec["results"] if r["workload"] == "koren-d-L64"]
    rec["workloads"] = {"koren-d-L64": rec["workloads"]["koren-d-L64"]}
    (whole,) = _step_rows_of(rec)
    assert whole["single"] == next(r["run_steps_per_s"] for r in rec["results"]
                                   if r["contender"] == "new E=1")
    rec["results"] = [r for r in rec["results"]
                      if r["E"] == 4 or r["contender"].startswith(("mambapy", "GEMMs"))]
    (row,) = _step_rows_of(rec)
    assert row["single"] is None and row["best_contender"].startswith("new E=4"), row
    cells = [c.strip() for c in _step_line(row).split("|")]
    assert cells[4] == "—" and cells[5].startswith(f"{row['best']:.2f} (new E=4"), cells


def test_roofline_figure_holds_every_point():
    """The roofline's axes were fixed (intensity 0.01..100, 0.05 GFLOP/s..3 x peak): a record
    whose step had an intensity of 0.005 FLOP/byte or ran at 0.02 GFLOP/s was drawn outside
    them, missing from the figure with its legend entry there. The limits hold every point and
    stay as they were for the committed records."""
    from ssmrepro.bench.roofline import _limits

    rec = json.loads((ROOT / "results/bench/keep-nth-d8-cpu.json").read_text())
    assert _limits([rec], 100.0) == ((0.01, 100.0), (0.05, 300.0))
    low = {**rec, "plain": {**rec["plain"], "intensity": 0.005, "gflops": 0.02}}
    (x_lo, x_hi), (y_lo, y_hi) = _limits([low], 100.0)
    assert x_lo < 0.005 and y_lo < 0.02 and (x_hi, y_hi) == (100.0, 300.0)
    high = {**rec, "plain": {**rec["plain"], "intensity": 500.0, "gflops": 400.0}}
    (x_lo, x_hi), (y_lo, y_hi) = _limits([high], 100.0)
    assert x_hi > 500 and y_hi > 400 and (x_lo, y_lo) == (0.01, 0.05)


def test_bench_counting_counts_in_place_products_and_cpu_attention():
    """`bench.counting` took FLOPs from torch's formulas only for the ops they name: an
    in-place product (`baddbmm_`, the fused loss's read-out weight gradient) and the CPU flash
    attention (fwd and bwd, selective-copy-hybrid's attention) were counted one FLOP per
    element of their largest operand: the committed steps' GFLOP/s, share of the peak and
    intensity 9-28 % low (keep-nth-d8 E=4 0.023 GFLOP per step for 0.030). They are counted
    by their twins' formulas now."""
    import torch
    from torch.utils.flop_counter import sdpa_backward_flop_count

    from ssmrepro.bench.counting import count

    a, b, c = torch.ones(3, 4, 5), torch.ones(3, 5, 6), torch.zeros(3, 4, 6)
    assert count(lambda: c.baddbmm_(a, b)).flops == 2 * 3 * 4 * 5 * 6
    assert count(lambda: c[0].addmm_(a[0], b[0])).flops == 2 * 4 * 5 * 6
    B, H, L, S, E = 2, 3, 7, 7, 4
    q, k, v = torch.randn(B, H, L, E), torch.randn(B, H, S, E), torch.randn(B, H, S, E)
    aten = torch.ops.aten
    got = count(lambda: aten._scaled_dot_product_flash_attention_for_cpu(q, k, v))
    assert got.flops == 4 * B * H * L * S * E, got
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    got = count(lambda: aten._scaled_dot_product_flash_attention_for_cpu_backward(
        torch.ones_like(out), q, k, v, out, lse, 0.0, False))
    assert got.flops == sdpa_backward_flop_count(out.shape, q.shape, k.shape, v.shape) > 0


def test_bench_ray_runs_as_many_packs_at_a_time_on_both_sides(tmp_path, monkeypatch):
    """`scripts/bench_ray.py --cpus 2` ran the local sweep with one worker beside a Ray instance
    of two CPUs (two packs at a time): its 'dispatch_per_pack_s', (Ray - local) / packs, was no
    overhead but the difference of one pack at a time against two. The local engine gets
    --cpus workers now. A fake Ray and engine: nothing is trained."""
    import argparse
    import importlib.util
    import types

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the script sets it
    spec_ = importlib.util.spec_from_file_location("bench_ray", ROOT / "scripts/bench_ray.py")
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    calls = []

    def run_experiment(spec, profile, out, device, backend, workers=None, engine="local", **k):
        calls.append((engine, workers))
        return types.SimpleNamespace(ok=True, wall_s=1.0, packs=2, messages=[])

    remote = types.SimpleNamespace(options=lambda **k: types.SimpleNamespace(remote=lambda: 1))
    ray = types.SimpleNamespace(init=lambda **k: None, get=lambda x: x, remote=lambda f: remote,
                                __version__="0")
    torch = types.SimpleNamespace(__version__="0")
    engine = types.SimpleNamespace(shutdown=lambda: None)
    for cpus in (1, 2):
        calls.clear()
        a = argparse.Namespace(profile="smoke", cpus=cpus)
        mod._measure(a, types.SimpleNamespace(id="x"), tmp_path, ray, torch, None, engine,
                     run_experiment)
        assert calls == [("local", cpus), ("ray", cpus)] * 2, calls


def test_neox_attention_keys_its_head_size_leaves_unread_are_refused(tmp_path):
    """GPT-NeoX attention keys that change nothing at the model's head size: `split_heads: false`
    with one head (the head spans the width either way), a `rotary_pct` that rotates as many
    channels as the default 0.25 (rounded down to even: 0.3 at head size 8) or none (0.2: the
    model of rotary_pct 0), a `rope_base`
    with at most one rotated pair (its only frequency is base^0 = 1). Each trained the
    default's model under another run id. `validate` refuses them naming the key, exit 2;
    values that change the model pass."""
    from ssmrepro.models import param_count
    from ssmrepro.models.backbone import SeqLMConfig
    from ssmrepro.tasks.base import TaskInfo

    info = TaskInfo(vocab_size=6, n_classes=6, seq_len=7)

    def count(**mixer):
        return param_count(SeqLMConfig.model_validate(
            {"d_model": 8, "layers": "A", "blocks": {"A": {"mixer": {"name": "neox_attn",
                                                                     **mixer}}}}), info)

    for mixer, needle in (({"split_heads": False}, "split_heads False is not read with heads 1"),
                          ({"rotary_pct": 0.3}, "rotary_pct 0.3 is not read at head size 8: it "
                           "rotates 2 channels, as the default 0.25 does"),
                          ({"heads": 2, "rotary_pct": 0.4}, "rotates 0 channels"),
                          ({"rotary_pct": 0.2}, "rotary_pct 0.2 rotates no channel at head size "
                           "8 (the share of the head size is rounded down to even): the run would "
                           "train the model of rotary_pct 0 (no RoPE)"),
                          ({"rope_base": 500.0}, "rope_base 500.0 is not read at head size 8 "
                           "and rotary_pct 0.25: 2 rotated channels")):
        with pytest.raises(ValueError, match=re.escape(needle)):
            count(**mixer)
    for mixer in ({"split_heads": False, "heads": 2}, {"rotary_pct": 0.5}, {"rotary_pct": 0.0},
                  {"rope_base": 500.0, "rotary_pct": 0.5}):
        assert count(**mixer) > 0
    path = write_spec(tmp_path, model={"name": "cooper_hybrid", "d_model": 8},
                      task={"name": "selective_copy"}, seeds=[0],
                      sweep=[{"cases": [{"label": "R", "set": {"model.rotary_pct": 0.3}}]}])
    _assert_refused(_invoke("validate", path), "cannot be built: rotary_pct 0.3 is not read")


def test_sweep_points_that_train_the_same_under_two_run_ids_are_refused(tmp_path):
    """A sweep that varies a setting its runs never read: `cooper_hybrid` with layers TF-TF over
    `d_state` (no Mamba block), SSM-SSM over `window` (no attention), a `seq_lm` block that no
    layer names, `optimizer: [adam, adamw]` at weight_decay 0. Every point trained the same
    runs under its own run id, label and table rows. `validate`, `run` and `run --dry-run`
    refuse it naming the points and the key, exit 2; the same sweeps where the key is read pass."""
    from ssmrepro.spec import SpecError, load_spec
    from ssmrepro.sweep import expand

    cooper = {"name": "cooper_hybrid", "d_model": 8}
    blocks = {"SSM": {"mixer": {"name": "s6", "d_state": 4}}, "TF": {"mixer": {"name": "attention"}}}
    small = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
             "test_size": 8, "eval_every": 2, "eval_batch_size": 8}
    cases = {
        "tf": (dict(model={**cooper, "layers": "TF-TF"}, task={"name": "selective_copy"},
                    sweep=[{"grid": {"model.d_state": [1, 2]}}]),
               "sweep points 0 (d_state=1) and 1 (d_state=2) are one training under two run ids",
               "model.d_state 1 vs 2, and no block of the layer pattern (TF-TF) reads it"),
        "ssm": (dict(model={**cooper, "layers": "SSM-SSM"}, task={"name": "selective_copy"},
                     sweep=[{"grid": {"model.window": [4, 8]}}]),
                "model.window 4 vs 8, and no block of the layer pattern (SSM-SSM) reads it", ""),
        "seq": (dict(model={"name": "seq_lm", "d_model": 8, "layers": "SSM", "blocks": blocks},
                     sweep=[{"grid": {"model.blocks.TF.mixer.heads": [1, 2]}}]),
                "model.blocks.TF.mixer.heads 1 vs 2, and no block of the layer pattern (SSM)", ""),
        "opt": (dict(train=small, sweep=[{"grid": {"train.optimizer": ["adam", "adamw"]}}]),
                "train.optimizer 'adam' vs 'adamw', and Adam and AdamW differ only in how they "
                "apply weight_decay, which is 0", ""),
        "scale": (dict(train=small, sweep=[{"cases": [{"label": "plain"}, {"label": "x1", "set": {
            "train.lr_scale": {"delta": 1.0}}}]}]), "a learning-rate scale of 1 trains at the plain lr",
            ""),
        "every": (dict(train=small, sweep=[{"grid": {"train.eval_every": [2, 50]}}]),
                  "train.eval_every 2 vs 50, and an eval_every of at least the run's 2 steps "
                  "evaluates at step 0 and the last step only", ""),
        "stop": (dict(train=small, sweep=[{"cases": [{"label": "plain"}, {"label": "es", "set": {
            "train.early_stop": {"metric": "val.acc", "op": ">", "threshold": 1.0}}}]}]),
            "an early stop that never holds stops no run", ""),
        "zero": (dict(train={**small, "max_steps": 0}, sweep=[{"grid": {"train.lr": [0.1, 0.2]}}]),
                 "train.lr 0.1 vs 0.2, and a run of max_steps 0 evaluates its initial model", ""),
    }
    for name, (kw, *needles) in cases.items():
        path = write_spec(tmp_path, name=f"t-{name}", seeds=[0], **kw)
        with pytest.raises(SpecError) as err:
            expand(load_spec(path), "smoke")
        assert all(n in err.value.messages[0] for n in needles), err.value.messages
    for args in (("validate", path), ("run", path, "--profile", "smoke", "--out", tmp_path / "o"),
                 ("run", path, "--dry-run", "--no-estimate", "--out", tmp_path / "o")):
        _assert_refused(_invoke(*args), "are one training under two run ids")
    assert not (tmp_path / "o").exists()
    # where the key is read, the points differ and pass
    for kw in (dict(model={**cooper, "layers": "SSM-TF"}, task={"name": "selective_copy"},
                    sweep=[{"grid": {"model.d_state": [1, 2], "model.window": [4, 8]}}]),
               dict(train={**small, "weight_decay": 0.1},
                    sweep=[{"grid": {"train.optimizer": ["adam", "adamw"]}}]),
               dict(train={**small, "max_steps": 4}, sweep=[{"grid": {"train.eval_every": [2, 50]}}])):
        assert len(expand(load_spec(write_spec(tmp_path, name="t-ok", seeds=[0], **kw)), "smoke")) > 1


def test_norm_position_of_a_block_without_norm_is_refused(tmp_path):
    """`norm_position: post` with `norm: none`: h + Mixer(h) either way, so the block trained the
    pre-norm default's model under another run id. `validate` refuses it naming the key, exit 2;
    with a norm it passes."""
    blocks = {"SSM": {"mixer": {"name": "s6", "d_state": 4}, "norm": "none"}}
    model = {"name": "seq_lm", "d_model": 8, "layers": "SSM", "blocks": blocks}
    cases = [{"label": "post", "set": {"model.blocks.SSM.norm_position": "post"}}]
    path = write_spec(tmp_path, model=model, seeds=[0], sweep=[{"cases": cases}])
    _assert_refused(_invoke("validate", path),
                    "norm_position 'post' is not read with norm 'none' (no norm to place")
    ok = write_spec(tmp_path, name="t-ok", seeds=[0], sweep=[{"cases": cases}], model={
        **model, "blocks": {"SSM": {**blocks["SSM"], "norm": "rmsnorm"}}})
    assert _invoke("validate", ok).exit_code == 0


def test_an_ood_evaluation_set_refuses_the_training_range_it_never_reads(tmp_path):
    """chen2025's inverse matching: an evaluation set with `ood: true` draws its test split from
    [ood_low, ood_high], so its own `low` (and a `high` within ood_high) is read by training
    alone: `evals: {ood: {ood: true, low: 30}}` was the `{ood: true}` set under another name and
    run id. `validate` refuses it naming the key, exit 2; the plain OOD set passes."""
    task = {"name": "inverse_matching", "n_fill": 2}
    for ov, key in (({"ood": True, "low": 30}, "low 30"), ({"ood": True, "high": 90}, "high 90")):
        train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
                 "test_size": 8, "eval_every": 2, "eval_batch_size": 8, "evals": {"ood": ov}}
        path = write_spec(tmp_path, task=task, train=train, seeds=[0])
        _assert_refused(_invoke("validate", path), f"train.evals.ood: {key} is not read by an "
                        "evaluation set with ood true (its test split draws from [ood_low, "
                        "ood_high]")
    train["evals"] = {"ood": {"ood": True}}
    assert _invoke("validate", write_spec(tmp_path, task=task, train=train, seeds=[0])).exit_code == 0


def test_a_sliding_window_no_sequence_fills_is_refused(tmp_path):
    """A sliding attention `window` at least as long as the longest sequence (the task's and its
    evaluation sets'), set away from its default that is so too: every query sees its whole past
    either way (a neox block's window 500 at length 8 is the full causal model; cooper_hybrid's
    window 30 at length 12 the default 20's), and the run trained that model under another run
    id. `validate`, `run` and `run --dry-run` refuse it naming the key and the length, exit 2; a
    window an evaluation set's longer sequences reach, or below the length, passes."""
    from ssmrepro.models import CooperHybridConfig, SeqLMConfig, refuse_unread_window

    neox = SeqLMConfig(d_model=8, layers="TF", blocks={"TF": {"kind": "neox", "window": 500}})
    with pytest.raises(ValueError, match=r"model.blocks.TF.window 500 is not read at sequence "
                       r"length 8 .* as without a window"):
        refuse_unread_window(neox, 8)
    refuse_unread_window(neox, 501)
    mixer = SeqLMConfig(d_model=8, layers="A", blocks={"A": {"mixer": {"name": "neox_attn",
                                                                       "window": 9}}})
    with pytest.raises(ValueError, match=r"model.blocks.A.mixer.window 9 is not read"):
        refuse_unread_window(mixer, 9)
    cooper = CooperHybridConfig(window=30)
    with pytest.raises(ValueError, match="as with the default window 20"):
        refuse_unread_window(cooper, 12)
    refuse_unread_window(cooper, 25)  # 20 and 30 differ at length 25
    refuse_unread_window(CooperHybridConfig(window=30, layers="SSM-SSM"), 12)  # no attention
    model = {"name": "seq_lm", "d_model": 8, "layers": "TF",
             "blocks": {"TF": {"kind": "neox", "window": 500}}}
    path = write_spec(tmp_path, model=model, seeds=[0], sweep=[{"cases": [{"label": "W"}]}])
    for args in (("validate", path), ("run", path, "--profile", "smoke", "--out", tmp_path / "o"),
                 ("run", path, "--dry-run", "--no-estimate", "--out", tmp_path / "o")):
        _assert_refused(_invoke(*args), "model.blocks.TF.window 500 is not read at sequence "
                        "length 8")
    assert not (tmp_path / "o").exists()


def test_the_mamba_init_std_of_a_model_without_token_embedding_is_refused(tmp_path):
    """`model.init: {scheme: mamba, std: 0.05}` on a model of continuous inputs (yu2025's
    first_abs, LRA Image): the scheme draws only the token embedding from N(0, std), and the
    model reads its inputs through an encoder, so the std changed nothing and the run trained
    the std 0.02 model under another run id. `validate`, `run` and `run --dry-run` refuse it,
    exit 2; on token inputs it passes."""
    model = {"name": "seq_lm", "d_model": 8, "layers": "A",
             "blocks": {"A": {"mixer": {"name": "s6", "d_state": 4}}},
             "init": {"scheme": "mamba", "std": 0.05}}
    cases = [{"label": "M", "set": {"model.d_model": 8}}]
    path = write_spec(tmp_path, model=model, task={"name": "first_abs", "L": 8}, seeds=[0],
                      sweep=[{"cases": cases}])
    for args in (("validate", path), ("run", path, "--profile", "smoke", "--out", tmp_path / "o"),
                 ("run", path, "--dry-run", "--no-estimate", "--out", tmp_path / "o")):
        _assert_refused(_invoke(*args), "model.init: run M std 0.05 is not read by scheme 'mamba' "
                        "on a model of continuous inputs (task first_abs, input_dim 1)")
    assert not (tmp_path / "o").exists()
    ok = write_spec(tmp_path, name="t-ok", model=model, seeds=[0], sweep=[{"cases": cases}])
    assert _invoke("validate", ok).exit_code == 0


def test_bench_scans_selective_blocked_times_the_blocked_kernel(monkeypatch):
    """The committed records' selective `chunked` rows timed selective_scan on diag_scan's CPU
    default, the blocked kernel; that formulation is the variant `blocked` now, and it runs the
    blocked kernel (and equals the reference)."""
    import argparse

    import torch

    import ssmrepro.kernels.scan as scan_mod
    from ssmrepro.bench import scans

    ran = []
    real = scan_mod.diag_scan_blocked
    monkeypatch.setattr(scan_mod, "diag_scan_blocked",
                        lambda *t, **kw: ran.append(1) or real(*t, **kw))
    a = argparse.Namespace(batch=2, d=16, n=16, groups=1, chunk=None, ssd_chunk=None, heads=1,
                           width=2)  # a state of 512
    inputs, ref, fast, _ = scans.make_case("selective", 64, a, torch.float32)
    torch.testing.assert_close(fast["blocked"](*inputs), ref(*inputs), rtol=1e-4, atol=1e-4)
    assert ran


def test_an_installed_package_outside_a_checkout_is_no_project(tmp_path, monkeypatch):
    """`pip install .` (not -e) put the package in site-packages, and run from a folder outside
    any checkout without SSMREPRO_ROOT the project was site-packages itself: `run <spec file>`
    (no --out) wrote its results into site-packages/results, `show <id>` said `unknown
    experiment ... Try ssmrepro list` and `list` named site-packages/experiments. Each says
    there is no project folder now, exit 2, writing nothing; with --out a spec file still runs."""
    import ssmrepro.util as util

    site = tmp_path / "site"
    (site / "ssmrepro").mkdir(parents=True)
    monkeypatch.setattr(util, "__file__", str(site / "ssmrepro" / "util.py"))
    monkeypatch.delenv("SSMREPRO_ROOT", raising=False)
    monkeypatch.delenv("SSMREPRO_OUT", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = write_spec(tmp_path)
    for args in (("run", spec, "--profile", "smoke", "--no-calibrate"), ("show", "keep-nth"),
                 ("list",), ("figures",), ("export", "--file", "x.csv")):
        _assert_refused(_invoke(*args), "no project folder", "set SSMREPRO_ROOT")
    assert sorted(p.name for p in site.iterdir()) == ["ssmrepro"]
    assert not any(elsewhere.iterdir())
    res = _invoke("run", spec, "--profile", "smoke", "--dry-run", "--no-estimate", "--out", "o")
    assert res.exit_code == 0 and "4 runs, 0 done" in res.output, res.output
    # an editable install (the package in its checkout) is that checkout's project, as before
    (site / "experiments").mkdir()
    assert util.repo_root() == site


def test_the_recorded_commit_is_the_checkouts_not_an_enclosing_repositorys(tmp_path, monkeypatch):
    """A package installed with `pip install .` into a virtual environment inside another git
    repository (`other-project/.venv/.../site-packages`) recorded that repository's HEAD as the
    code its runs were trained with (results.csv's `commit`; `bench step`'s record too). Only a
    repository that tracks the package's files counts now (a checkout, or one kept in a
    subfolder of a larger repository)."""
    import subprocess

    import ssmrepro.engine.local as local
    from ssmrepro.bench.step import git_commit as step_commit

    def repo(folder: Path, package: str | None) -> str:
        """A git repository at ``folder`` whose commit tracks ``package``'s local.py (if any)."""
        folder.mkdir(parents=True)
        git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True)
        if package is not None:
            (folder / package / "ssmrepro/engine").mkdir(parents=True)
            (folder / package / "ssmrepro/engine/local.py").write_text("")
            subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
        return subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()

    repo(tmp_path / "other", None)
    mine = repo(tmp_path / "checkout", ".")
    mono = repo(tmp_path / "mono", "tools/ssmrepro")  # a checkout kept inside a larger repository
    for top, want in ((tmp_path / "other/.venv/lib/site-packages", None),
                      (tmp_path / "checkout", mine), (tmp_path / "mono/tools/ssmrepro", mono)):
        (top / "ssmrepro/engine").mkdir(parents=True, exist_ok=True)
        monkeypatch.setattr(local, "__file__", str(top / "ssmrepro/engine/local.py"))
        monkeypatch.setattr(local, "_COMMIT", None)
        assert local.git_commit() == want
        assert step_commit() == (want or "unknown")


def test_list_prints_aliases_whole_in_a_narrow_console(monkeypatch):
    """In 80 columns `list` printed the alias `composite-phase` as `composite-phas` and `e` on
    the next line (and `inverse-matching-modified` likewise): an alias is what `run` and `show`
    take, copied from the table. Aliases are kept whole, as ids are."""
    import ssmrepro.cli.experiments as experiments
    from ssmrepro.cli.app import console
    from ssmrepro.spec import load_spec, spec_paths

    paths = [p for p in spec_paths() if p.stem in ("chen2025-figS5-S6", "chen2025-figS3-S4")]
    aliases = {load_spec(p).alias for p in paths}
    assert len(aliases) == 2 and all(len(a) > 14 for a in aliases), aliases
    monkeypatch.setattr(experiments, "_project_specs", lambda: paths)
    monkeypatch.setattr(console, "_width", 80)
    res = _invoke("list", "--profile", "smoke", "--out", "/nonexistent-r35b")
    assert res.exit_code == 0, res.output
    cells = {ln.split("│")[2].strip() for ln in res.output.splitlines() if ln.startswith("│")}
    assert aliases <= cells, (aliases, res.output)


def test_a_missing_extra_names_its_packages_not_only_the_checkouts_command(monkeypatch, tmp_path):
    """`export --format parquet` without pyarrow said `pip install -e '.[parquet]'` only (and the
    digits stand-in `pip install -e '.[standin]'`): with ssmrepro installed by `pip install .` and
    run elsewhere there is no checkout to install from. The packages the extra pins are named
    too, read from the installed package's metadata."""
    import importlib.metadata
    import sys

    from ssmrepro.data import datasets
    from ssmrepro.plots import export as export_mod

    monkeypatch.setattr(importlib.metadata, "requires", lambda name: [
        "pandas>=2.0", 'pyarrow>=12; extra == "parquet"', 'scikit-learn>=1.0; extra == "standin"',
        'pytest>=7; extra == "dev"'])
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[parquet\]' \(or pip install "
                                          r"'pyarrow>=12'\)$"):
        export_mod.write_export(tmp_path / "x.parquet", "parquet", out=tmp_path)
    hint = datasets._image_hint(datasets.DIGITS, tmp_path, None)
    assert hint.startswith("pip install -e '.[standin]' (or pip install 'scikit-learn>=1.0'): "), hint


def test_a_stores_claims_and_table_ledger_take_the_umask(tmp_path):
    """Under `umask 002` (a group's shared results) the store's claims and its ledger of table
    rows (runs/.tables-written) were created 0644 whatever the umask, as the other files of the
    store no longer are: the group's other writers could not open the ledger, wrote their tables
    unlocked and unrecorded, and the next writer warned that their rows were edited by hand."""
    from ssmrepro.store import TABLES_WRITTEN, Store

    previous = os.umask(0o002)
    try:
        store = Store(tmp_path / "s")
        store.runs.mkdir(parents=True)
        assert store.claim("r1")
        store.write_table("results.csv", "run_id,status\nr1,ok\n", {"r1"})
    finally:
        os.umask(previous)
    # (atomic writes take the umask read at import: test_written_files_take_the_umask)
    for f in (store.claims / "r1.claim", store.runs / TABLES_WRITTEN):
        assert f.stat().st_mode & 0o777 == 0o664, (f, oct(f.stat().st_mode))


def test_a_root_variable_naming_no_project_is_refused_not_written_into(tmp_path, monkeypatch):
    """A mistyped or too deep `SSMREPRO_ROOT` (a folder without experiments/, or none at all):
    `run <spec file>` without --out made `<root>/results/<paper>/<id>` there and trained into it
    without a word. It is refused as the project without specs it is, exit 2, nothing made."""
    monkeypatch.delenv("SSMREPRO_OUT", raising=False)
    spec = write_spec(tmp_path)
    (tmp_path / "deep").mkdir()
    for root in (tmp_path / "typo", tmp_path / "deep"):
        res = _invoke("run", spec, "--profile", "smoke", "--no-calibrate",
                      env={"SSMREPRO_ROOT": str(root)})
        _assert_refused(res, f"{root / 'experiments'}: no experiment specs here", "SSMREPRO_ROOT")
    assert not (tmp_path / "typo").exists() and not any((tmp_path / "deep").iterdir())


def test_data_info_prints_each_path_and_command_whole_in_a_narrow_console(tmp_path, monkeypatch):
    """In 80 columns `data info --dir <a long root>` folded its `path / how to get it` cells:
    `ssmrepro data download lra --dir /.../longish/da` and `ta/root-folder-name` on the next
    line, a command and path broken for whoever copies them. Each source's path or command is a
    line of its own below the table now, never wrapped."""
    from ssmrepro.cli.app import console

    root = tmp_path / "some" / "longish" / "data" / "root-folder-name"
    root.mkdir(parents=True)
    monkeypatch.setattr(console, "_width", 80)
    res = _invoke("data", "info", "--dir", root)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert f"  listops (lra_release): ssmrepro data download lra --dir {root}" in lines, res.output
    assert f"  pathx (generated): ssmrepro data generate pathfinder --res 128 --n 200000 " \
           f"--seed 0 --dir {root}" in lines, res.output


def test_a_home_folder_that_cannot_be_found_is_a_message(tmp_path, monkeypatch):
    """HOME unset and the user id without a passwd entry (a container run as an arbitrary user):
    every `run` and `run --dry-run` ended in pathlib's `RuntimeError: Could not determine home
    directory` traceback (the planner's cache in ~/.cache), and so did any path option or
    variable starting with `~`. Each is a message naming what to set, exit 2."""
    import pwd

    from ssmrepro.engine.costs import cache_file
    from ssmrepro.spec import SpecError

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("SSMREPRO_CACHE", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(SpecError, match="cost cache is ~/.cache/ssmrepro, and the home folder is "
                                        "unknown .*: set HOME, or SSMREPRO_CACHE"):
        cache_file()
    spec = write_spec(tmp_path)
    _assert_refused(_invoke("run", spec, "--profile", "smoke", "--dry-run", "--out", tmp_path),
                    "the home folder is unknown")
    for args, env in ((("export", "--file", "~/x.csv"), None),
                      (("data", "info"), {"SSMREPRO_DATA": "~/d"}),
                      (("list",), {"SSMREPRO_ROOT": "~/w"})):
        res = _invoke(*args, env=env)
        _assert_refused(res)
        assert "home folder is unknown" in " ".join(res.output.replace("│", " ").split()), res.output


def test_no_check_of_the_package_or_its_scripts_is_an_assert():
    """`python -O` / PYTHONOPTIMIZE=1 removes `assert` statements: gpu_check.sh's environment
    step checked a CUDA build of torch and a visible GPU with asserts, so under the variable a
    CPU-only torch passed it. No code of ssmrepro/ or scripts/ (Python files, or Python inside
    a shell script) checks anything with assert."""
    import ast

    found = []
    for path in sorted([*(ROOT / "ssmrepro").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    for path in sorted((ROOT / "scripts").glob("*.sh")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*assert\b", line):
                found.append(f"{path.relative_to(ROOT)}:{i}")
    assert not found, found


def test_a_spec_file_reusing_an_id_outside_any_project_names_the_reuse(tmp_path, monkeypatch):
    """Installed outside a checkout, `run <spec file> --out DIR` of a spec whose `reuse` names
    another spec by id said only `no project folder ... (a spec given by its path also runs
    with --out DIR)`, given --out already: the id needs the project. The reuse entry is named,
    and a reuse by file still runs."""
    import ssmrepro.util as util

    site = tmp_path / "site"
    (site / "ssmrepro").mkdir(parents=True)
    monkeypatch.setattr(util, "__file__", str(site / "ssmrepro" / "util.py"))
    monkeypatch.delenv("SSMREPRO_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    other = write_spec(tmp_path, name="other")
    spec = write_spec(tmp_path, reuse=["other"])
    res = _invoke("run", spec, "--profile", "smoke", "--dry-run", "--no-estimate", "--out", "o")
    _assert_refused(res, "reuse.0: 'other' is an id, looked up in the project's experiments/, "
                         "and no project folder", "give the spec by its file")
    spec = write_spec(tmp_path, reuse=[other.name])
    res = _invoke("run", spec, "--profile", "smoke", "--dry-run", "--no-estimate", "--out", "o")
    assert res.exit_code == 0, res.output


def test_a_claim_the_paper_profile_cannot_judge_is_refused(tmp_path):
    """The paper profile is the paper's grid: cooper2026-fig16's state claims named state 6,
    which only its quick profile ran, so at the paper's settings both read MISSING ('this
    profile has no pair of matching a/b cells') and `validate` said ok. A claim (threshold or
    ordering) whose cells the paper profile lacks is refused; with the cell in its sweep it
    passes validate."""
    base = [{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                       {"label": "S4D", "set": {"model.mixer": "s4d"}}]}]
    wide = [{"cases": [*base[0]["cases"],
                       {"label": "wide", "set": {"model.mixer": "s6", "model.d_model": 12}}]}]
    claims = [{"text": "wide solves it", "where": {"label": "wide"}, "op": ">=", "value": 0.9},
              {"check": "ordering", "text": "wide beats S6", "a": {"label": "wide"},
               "b": {"label": "S6"}, "match": []},
              {"text": "S6 learns", "where": {"label": "S6"}, "op": ">=", "value": 0.5}]
    bad = write_spec(tmp_path, name="t-bad", sweep=base, claims=claims,
                     profiles={"smoke": {}, "quick": {"sweep": wide}, "paper": {}})
    res = _invoke("validate", bad)
    _assert_refused(res, "claims.0: the paper profile has no cell it needs",
                    "claims.1: the paper profile has no cell it needs", "paper's settings")
    assert "claims.2" not in res.output, res.output
    good = write_spec(tmp_path, name="t-good", sweep=wide, claims=claims,
                      profiles={"smoke": {"sweep": base}, "quick": {}, "paper": {}})
    res = _invoke("validate", good)
    assert res.exit_code == 0, res.output


def _one_trained_record(tmp_path, **train):
    """A one-run spec (S6, 2 steps, ``train`` added) trained on smoke: (spec, out, its results
    folder, its record's path, the record)."""
    spec = write_spec(tmp_path, seeds=[0], sweep=[{"cases": [{"label": "S6"}]}],
                      train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2,
                             "val_size": 16, "test_size": 16, "eval_batch_size": 16, **train})
    out = tmp_path / "out"
    res = _invoke("run", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    folder = out / "tests/t-spec"
    path = next((folder / "runs").glob("*.json"))
    return spec, out, folder, path, json.loads(path.read_text())


def test_an_older_record_scoring_outputs_that_were_not_finite_is_trained_again(tmp_path):
    """An ssmrepro before non-finite outputs scored no accuracy read the argmax of NaN logits as
    class 0: its record of a model of NaN outputs (same run id) gave test.acc 0.0 beside an empty
    test.loss, and was trusted after an upgrade: averaged into its cell and judged beside the
    new records' NaN, its committed row exported. Such a record is ignored with a warning and
    the run trained again; such a table row (results or curves) is not used."""
    import pandas as pd

    from ssmrepro.store import scored_nonfinite

    # the final train.loss is the last training batch's, not the train.acc evaluation's
    assert scored_nonfinite({"train.acc": 0.5, "train.loss": None}, final=True) is None
    assert scored_nonfinite({"train.acc": 0.5, "train.loss": None}, final=False) == ("train.acc", 0.5)
    assert scored_nonfinite({"val.best_acc": 0.5, "val.loss": None}, final=True) is None
    spec, out, folder, path, good = _one_trained_record(tmp_path, eval_every=1)
    for where, key in (("metrics", "test.loss"), ("history", "val.loss")):
        rec = json.loads(json.dumps(good))
        (rec["metrics"] if where == "metrics" else rec["history"][-1])[key] = None
        path.write_text(json.dumps(rec))
        res = _invoke("run", spec, "--out", out, "--profile", "smoke")
        assert res.exit_code == 0, res.output
        assert "written by an older ssmrepro" in res.output and "trained 1 runs" in res.output, \
            (where, res.output)
        assert json.loads(path.read_text())["metrics"]["test.loss"] is not None  # trained again
    shutil.rmtree(folder / "runs")  # a fresh clone: the tables alone
    kept = {n: (folder / n).read_text() for n in ("results-smoke.csv", "curves-smoke.csv")}
    for name, col in (("results-smoke.csv", "metric.test.loss"), ("curves-smoke.csv", "val.loss")):
        for n, text in kept.items():
            (folder / n).write_text(text)
        table = folder / name
        df = pd.read_csv(table)
        df.loc[df.index[-1], col] = None
        df.to_csv(table, index=False)
        res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
        assert res.exit_code == 0, res.output
        assert f"beside an empty {col}" in res.output, (name, res.output)
        if name.startswith("results"):
            assert "0 of 1 runs finished" in res.output, res.output


def test_an_older_records_stop_reason_reads_as_training_writes_it_now(tmp_path):
    """An ssmrepro before a run meeting its early stop at its last evaluation recorded it so
    wrote `max_steps` (at its step budget) or `time_limit` (cut between evaluations) under the
    same run id: after an upgrade results.csv said max_steps where a new training says
    early_stop, and the report counted the run among those its time limit cut short. The
    record's own history and early stop give today's reason."""
    import pandas as pd

    spec, out, folder, path, good = _one_trained_record(
        tmp_path, eval_every=2, early_stop={"metric": "val.loss", "op": "<", "threshold": 100})
    assert good["stop_reason"] == "early_stop", good  # met at step 0
    for old in ("max_steps", "time_limit"):
        path.write_text(json.dumps({**good, "stop_reason": old}))
        res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
        assert res.exit_code == 0, res.output
        assert pd.read_csv(folder / "results-smoke.csv")["stop_reason"].tolist() == ["early_stop"]
        assert "time limit" not in (folder / "report-smoke.md").read_text(), old
    from ssmrepro.store import upgraded

    unmet = {**good["config"]["train"], "early_stop": {"metric": "val.loss", "op": ">",
                                                       "threshold": 100}}
    rec = {**good, "stop_reason": "time_limit", "config": {**good["config"], "train": unmet}}
    assert upgraded(rec)["stop_reason"] == "time_limit"  # not met there: as it stands


def test_a_record_from_before_a_change_of_what_its_run_computes_is_trained_again(tmp_path):
    """A Mamba-2 run's train.lr_scale was ignored by an older ssmrepro; its record (same run id:
    no code version was bumped) stood after an upgrade for a run trained with the scale, '1
    already done'. Records name their revision now; one older than a change touching its run
    (REVISIONS) is ignored with a warning and trained again; others stand, and a revision that
    is not a whole number >= 0 is an edited record."""
    from ssmrepro.store import RECORD_REVISION, record_problem, redefined

    m2 = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "repeat": 1,
          "blocks": {"SSM": {"mixer": {"name": "mamba2", "d_state": 4, "expand": 2, "d_conv": 4,
                                       "heads": 1}, "norm": "rmsnorm"}}}
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 16,
             "test_size": 16, "eval_every": 1, "eval_batch_size": 16}
    spec = write_spec(tmp_path, seeds=[0], model=m2, sweep=[{"cases": [{"label": "M2"}]}],
                      train={**train, "lr_scale": {"delta": 0.5}})
    out = tmp_path / "out"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    path = next((out / "tests/t-spec/runs").glob("*.json"))
    good = json.loads(path.read_text())
    assert good["revision"] == RECORD_REVISION and redefined(good) is None
    old = {k: v for k, v in good.items() if k != "revision"}  # as an older ssmrepro wrote it
    path.write_text(json.dumps(old))
    # `export` before any `run` or `plot` rewrote results-smoke.csv: its row was exported
    project = tmp_path / "proj"
    (project / "experiments/tests").mkdir(parents=True)
    (project / "ssmrepro").mkdir()
    shutil.copy(spec, project / "experiments/tests")
    res = _invoke("export", "--out", out, "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(project)})
    assert res.exit_code == 0 and "0 rows" in res.output, res.output
    assert "record revision 0), before Mamba-2's" in res.output, res.output
    res = _invoke("run", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert "record revision 0), before Mamba-2's" in res.output and "trained 1 runs" in res.output, \
        res.output
    # a run the change does not touch: an older record stands (no lr_scale; an S6 model)
    unscaled = {**old, "config": {**old["config"], "train": {**old["config"]["train"],
                                                             "lr_scale": {}}}}
    assert redefined(unscaled) is None
    s6 = {**old, "config": {**old["config"], "model": {"name": "ssm_lm", "mixer": "s6"}}}
    assert redefined(s6) is None
    # a BatchNorm member stopped before its budget in a pack: its statistics moved on with the
    # pack's later steps before revision 2 (one alone, or at its budget, stands)
    bn = {**unscaled, "stop_reason": "early_stop", "pack_size": 2, "config": {
        **unscaled["config"], "model": {**m2, "blocks": {"SSM": {**m2["blocks"]["SSM"],
                                                                 "norm": "batchnorm"}}}}}
    assert "BatchNorm statistics stay frozen" in redefined(bn)
    for stands in ({"pack_size": 1}, {"stop_reason": "max_steps"}, {"revision": 2}):
        assert redefined({**bn, **stands}) is None, stands

    def rec(task=None, train=None, model=None, **kw):  # a bare older record of one change
        return {"status": "ok", "config": {"task": task or {}, "train": train or {},
                                           "model": model or {}}, **kw}

    # float64 runs of yu2025's synthetic tasks got float32 inputs (revision 3)
    assert "float64 inputs" in redefined(rec({"name": "first_abs"}, {"dtype": "float64"}))
    assert redefined(rec({"name": "first_abs"}, {"dtype": "float32"})) is None
    # a BatchNorm model's training-time analysis probed it in training mode (revision 4)
    probed = rec(model={"norm": "batchnorm"}, analysis={"decay_histogram": {}})
    assert "eval mode" in redefined(probed)
    assert redefined({**probed, "analysis": {}}) is None
    # text_corpus windows of a split of 2**31 bytes or more sat on a lattice (revision 5)
    big = {"dataset": "text_corpus", "sizes": {"train": 3 << 30, "val": 10, "test": 10}}
    small = {**big, "sizes": {"train": 1 << 30, "val": 10, "test": 10}}
    assert "62-bit" in redefined(rec(data=big))
    assert "62-bit" in redefined(rec(data={**small, "evals": {"long": big}}))
    assert redefined(rec(data=small)) is None
    assert redefined(rec(data=big, revision=RECORD_REVISION)) is None
    # induction_heads' hard case never drew r = gamma*T where float floored it one short (6)
    ih = {"name": "induction_heads", "gamma": 0.29, "T": 100}
    assert "gamma*T as written" in redefined(rec(ih))
    assert "gamma*T as written" in redefined(rec({**ih, "gamma": 0.1}, {"evals": {"x": ih}}))
    for stands in ({"gamma": 0.1}, {"p": 0.0}, {}):
        assert redefined(rec({**ih, "gamma": 0.1, "T": 50, **stands})) is None, stands
    assert redefined(rec(ih, revision=RECORD_REVISION)) is None
    for bad in ("1", -1, 1.5, True):
        why = record_problem({**good, "revision": bad}, good["run_id"])
        assert why and "is not a record revision" in why, (bad, why)


def test_an_older_record_without_val_max_rise_gets_it_from_its_history(tmp_path):
    """Records written before val.max_rise was recorded lack it: a cell of such a seed and a
    new one had no val.max_rise ('—' in the report, a claim on it unmeasured) without a word,
    and `run` found the old run done, so it never got one. It is computed from the record's own
    history as training computes it."""
    import pandas as pd

    from ssmrepro.store import redefined, upgraded

    spec = write_spec(tmp_path, seeds=[0], sweep=[{"cases": [{"label": "S6"}]}],
                      train={"optimizer": "adam", "lr": 0.5, "batch_size": 8, "max_steps": 6,
                             "val_size": 16, "test_size": 16, "eval_every": 1,
                             "eval_batch_size": 16})
    out = tmp_path / "out"
    assert _invoke("run", spec, "--out", out, "--profile", "smoke").exit_code == 0
    folder = out / "tests/t-spec"
    path = next((folder / "runs").glob("*.json"))
    good = json.loads(path.read_text())
    rise = good["metrics"]["val.max_rise"]
    assert rise and rise > 0, good["metrics"]  # a loss that rose: a value to recompute
    old = {**good, "metrics": {k: v for k, v in good["metrics"].items() if k != "val.max_rise"}}
    assert upgraded(old)["metrics"]["val.max_rise"] == rise
    # train.avg_loss (a mean of training-batch losses) cannot be computed from a record: one
    # without it is trained again (cooper2026's aggregate.select counted its candidate diverged)
    assert redefined(old) is None
    no_avg = {k: v for k, v in good["metrics"].items() if k != "train.avg_loss"}
    assert "lacks train.avg_loss" in redefined({**good, "metrics": no_avg})
    path.write_text(json.dumps(old))
    res = _invoke("plot", spec, "--out", out, "--profile", "smoke")
    assert res.exit_code == 0, res.output
    assert pd.read_csv(folder / "results-smoke.csv")["metric.val.max_rise"].tolist() == [rise]


def test_a_set_of_the_runs_own_values_writes_no_tagged_copy(tmp_path):
    """`--set train.lr=0.01` over a spec of lr 0.01 trains the profile's own runs (same ids), but
    its outputs were tagged -set-<hash>: a second results/report/figure of those runs beside
    the untagged ones; and an idle key beside a real one gave a tag other than the real one's.
    Now an idle key is dropped with a note (effective_overrides)."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import effective_overrides, parse_overrides

    path = write_spec(tmp_path, seeds=[0])
    out = tmp_path / "out"
    res = _invoke("plot", path, "--out", out, "--profile", "smoke", "--set", "train.lr=0.01",
                  "--set", "model.d_model=8.0")
    assert res.exit_code == 0, res.output
    assert "every run of profile smoke already has this value" in res.output, res.output
    written = sorted(p.name for p in (out / "tests/t-spec").iterdir())
    assert "report-smoke.md" in written and not [n for n in written if "set-" in n], written
    spec = load_spec(path)
    for given, kept in [(["train.lr=0.01"], None), (["train.lr=0.5"], {"train.lr": 0.5}),
                        (["train.lr=0.01", "train.max_steps=5"], {"train.max_steps": 5})]:
        assert effective_overrides(spec, "smoke", parse_overrides(given)) == kept, given


def test_export_after_the_default_profile_changed_does_not_call_exported_rows_unused(tmp_path):
    """huang2025-tab1's committed results.csv (quick's rows) after the spec's default profile
    became smoke: `export` read the file as smoke's table and warned `15 row(s) of profile
    'quick', not 'smoke', are not used`, then exported all 15 as quick's (read again for quick,
    the table's name from before the change)."""
    import pandas as pd

    root = _project(tmp_path, small=True)
    (root / "experiments/catalogue.yaml").write_text("papers: {}\ntargets: []\n")
    path = root / "experiments/huang2025/huang2025-tab1.yaml"
    _edit(path, default_profile="smoke")
    folder = tmp_path / "out/huang2025/huang2025-tab1"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results/huang2025/huang2025-tab1/results.csv", folder)
    res = _invoke("export", "--out", tmp_path / "out", "--file", tmp_path / "x.csv",
                  env={"SSMREPRO_ROOT": str(root)})
    assert res.exit_code == 0 and "not used" not in res.output, res.output
    df = pd.read_csv(tmp_path / "x.csv", dtype=str)
    assert set(df["profile"]) == {"quick"} and df["run_id"].nunique() == 15, df


def test_the_planners_line_gives_each_rate_beside_its_source(tmp_path):
    """A pack calibration chose (E = 4, x1.25) but dropped when re-timed back to back with one
    at a time: the planner's line read `E=1, micro_batch=None: 1.11 run-steps/s (one at a time
    1.00)`, the re-timed E = 1 rate beside calibration's, two rates of one setting. Each rate
    now names its source and the dropped pack is named."""
    from test_costs import _fake, _runs

    from ssmrepro.engine.costs import CostModel

    cm = CostModel(min_train_s=0, budget=1.0)
    _fake(cm, {(1, None): 1.0, (2, None): 1.9, (4, None): 3.2},
          fresh={(1, None): 0.9, (4, None): 3.5})
    assert cm.choose(_runs(tmp_path), cap=4).size == 1
    line = cm.log[-1]
    assert "E=1, micro_batch=None: 1.11 run-steps/s (one at a time, re-timed); E=4" in line, line
    assert "(calibration: 1.25 run-steps/s, one at a time 1.00) did not win by 10%" in line, line
    cm = CostModel(min_train_s=0, budget=1.0)  # one at a time chosen by calibration: one rate
    _fake(cm, {(1, None): 1.0, (2, None): 1.95, (4, None): 3.9})
    assert cm.choose(_runs(tmp_path), cap=4).size == 1
    assert "E=1, micro_batch=None: 1.00 run-steps/s (one at a time);" in cm.log[-1], cm.log


def test_lra_data_with_new_file_times_is_named_as_such_and_its_times_restore_it(tmp_path,
                                                                               monkeypatch):
    """An LRA run's data are known by their files' sizes and modification times: a `touch` of a
    source file (or a copy of the data root without its times) said `it was trained on other
    listops data`, and `run` trained it again (hours, for a paper profile), though the bytes
    were the same. The message says what differs and how the same files count as done again:
    with their times restored, they do."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.tasks.lra import clear_cache, data_changed

    data, spec = _listops_one_run(tmp_path, monkeypatch)
    task = expand(load_spec(spec), "smoke")[0].task.model_dump(mode="json")
    clear_cache()
    why = data_changed(task, {"cache_key": "listops-0"})  # the key there is now, from it
    key = re.search(r"now (listops-[0-9a-f]+)\)", why).group(1)
    assert data_changed(task, {"cache_key": key}) is None
    tsv = data / "lra/listops-1000/basic_train.tsv"
    st = tsv.stat()
    os.utime(tsv, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: the same bytes
    clear_cache()
    said = " ".join(data_changed(task, {"cache_key": key}).split())
    assert "are not the files" in said and "by their sizes or modification times" in said, said
    assert "touched or copied without their times" in said and "`cp -p`" in said, said
    os.utime(tsv, ns=(st.st_atime_ns, st.st_mtime_ns))  # the times restored
    clear_cache()
    assert data_changed(task, {"cache_key": key}) is None


def test_a_dry_run_calibrates_with_the_threads_run_gives_its_workers(tmp_path, monkeypatch):
    """`run --dry-run --workers 2` on 8 free cores timed and chose its packs at 1 thread (one
    per core, --workers quietly ignored) where `run --workers 2` calibrates at 4: the dry run's
    packs and estimate were of another thread count than `run` trains with."""
    import ssmrepro.engine as engine
    import ssmrepro.engine.local as local

    monkeypatch.delenv("SSMREPRO_THREADS", raising=False)
    monkeypatch.setattr(local.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(engine, "other_load", lambda: 0.0)
    seen = []
    real = engine.cost_model

    def spy(*a, **kw):
        cm = real(*a, **kw)
        seen.append(cm.threads)
        cm.min_train_s = float("inf")  # nothing worth calibrating: no timing here
        return cm

    monkeypatch.setattr(engine, "cost_model", spy)
    monkeypatch.setattr(engine, "estimate_seconds", lambda packs, device, costs: (1.0, "test"))
    spec = _one_run_spec(tmp_path)
    for workers, threads in [("2", 4), ("1", 8), ("8", 1)]:
        res = _invoke("run", spec, "--out", tmp_path / "out", "--profile", "smoke", "--dry-run",
                      "--device", "cpu", "--workers", workers)
        assert res.exit_code == 0, res.output
        assert seen[-1] == threads, (workers, seen)


def test_a_list_where_on_a_column_of_scalars_and_lists_is_the_list_value():
    """On a key whose cells hold a scalar in some runs and a list in others (``model.layers``
    'SSM' and [SSM, TF]), ``layers: [SSM, TF]`` matched the cell 'SSM' (and 'TF') as well, as
    any of its items, while `validate` (``alternatives``) read it as the one list value: a claim
    or paper value on the [SSM, TF] cell was judged on the scalar cells too. On such a column a
    list is the value, and a list of lists any of them, in ``select``, ``CellIndex`` and the
    paper-value lookup alike."""
    import pandas as pd

    from ssmrepro.report.cells import CellIndex, PaperValueLookup, listed_keys, select
    from ssmrepro.spec import PaperValue

    cells = pd.DataFrame({"label": ["a", "b", "c"], "model.layers": ["SSM", ["SSM", "TF"], "TF"],
                          "model.d_model": [8, 8, 16]})
    for want, labels in [(["SSM", "TF"], ["b"]), ([["SSM", "TF"], ["TF"]], ["b"]),
                         ("SSM", ["a"]), ([["SSM", "TF"], "TF"], [])]:
        where = {"model.layers": want}
        assert select(cells, where)["label"].tolist() == labels, want
        assert cells.iloc[CellIndex(cells).positions(where)]["label"].tolist() == labels, want
    assert select(cells, {"model.d_model": [8, 16]})["label"].tolist() == ["a", "b", "c"]
    pvs = [PaperValue(metric="test.acc", where={"model.layers": ["SSM", "TF"]}, value=0.5)]
    lookup = PaperValueLookup(pvs, listed_keys(cells))
    found = [lookup.find(row.to_dict(), "test.acc") for _, row in cells.iterrows()]
    assert [pv is not None for pv in found] == [False, True, False]


def test_a_spread_claim_the_one_seed_paper_profile_cannot_judge_asks_for_seeds(tmp_path):
    """A claim on a spread over seeds (``test.acc.std``) that a one-seed paper profile cannot
    judge was refused with 'add the cells it names to the paper profile's sweep (a value of the
    paper's grid missing?)': its cells are all there, it lacks seeds. The refusal says so."""
    claims = [{"text": "S6 is stable", "where": {"label": "S6"}, "metric": "test.acc.std",
               "op": "<=", "value": 0.1}]
    spec = write_spec(tmp_path, claims=claims,
                      profiles={"smoke": {}, "quick": {}, "paper": {"seeds": [0]}})
    res = _invoke("validate", spec)
    _assert_refused(res, "claims.0.metric: test.acc.std is a spread over seeds",
                    "give the paper profile two seeds or more")
    assert "add the cells" not in res.output, res.output


def test_heatmaps_over_a_list_valued_col_draws_a_panel_per_list(tmp_path, monkeypatch):
    """A heatmaps figure whose ``col`` is a list-valued key (``train.betas``) ended `run` (after
    training) and `plot` in a TypeError traceback: its panels were the column's values as dict
    keys, and a list is none. Each list is one panel, titled as the tables write it."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots.figures import HeatmapsConfig, heatmaps

    betas = [[0.9, 0.99], [0.9, 0.99], [0.8, 0.95]]
    table = pd.DataFrame({"label": ["", "", ""], "train.betas": betas,
                          "model.d_state": [2, 4, 2], "model.d_model": [8, 8, 8],
                          "test.acc": [0.5, 0.6, 0.7]})
    titles = []
    ctx = SimpleNamespace(table=table, spec=SimpleNamespace(paper_values=[]),
                          paper_value=lambda row, metric: None,
                          aggregation=lambda metric: "mean",
                          fitted_title=lambda cfg, width: cfg.title)
    cfg = HeatmapsConfig(kind="heatmaps", metric="test.acc", col="train.betas",
                         x="model.d_state", y="model.d_model", title="betas")
    import matplotlib.axes

    real = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda ax, t, **kw: titles.append(t) or real(ax, t, **kw))
    assert heatmaps(ctx, cfg, tmp_path / "f.png")
    assert titles == ["[0.9, 0.99]", "[0.8, 0.95]"], titles
    assert (tmp_path / "f.png").is_file()


def test_lines_and_curves_over_a_list_valued_key_draw_it_as_categories(tmp_path):
    """A `lines` figure whose x is a list-valued key (``train.betas``, also its default x when
    it is the one swept key) raised matplotlib's 'setting an array element with a sequence',
    and a `curves` figure with such a row or col 'unhashable type: list': tracebacks in `run`,
    after training, and in `plot`. The lists are drawn as categories, as the tables write
    them."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots.curves import CURVES, CurvesConfig, curves
    from ssmrepro.plots.figures import LinesConfig, lines

    betas = [[0.9, 0.99], [0.8, 0.95], [0.9, 0.99], [0.8, 0.95]]
    table = pd.DataFrame({"label": [""] * 4, "train.betas": betas,
                          "model.d_state": [2, 2, 4, 4], "test.acc": [0.5, 0.6, 0.7, 0.8]})
    history = pd.DataFrame({"label": [""] * 8, "train.betas": betas * 2,
                            "model.d_state": [2, 2, 4, 4] * 2, "seed": [0] * 8,
                            "step": [0] * 4 + [2] * 4, "val.acc": [0.1] * 4 + [0.5] * 4})
    ctx = SimpleNamespace(
        table=table, tables={CURVES: history}, keys=["label", "train.betas", "model.d_state"],
        spec=SimpleNamespace(paper_values=[], aggregate=SimpleNamespace(reduce="mean")),
        paper_value=lambda row, metric: None, paper_value_of=lambda row, metric: None,
        aggregation=lambda metric: "mean", fitted_title=lambda cfg, width: cfg.title,
        title=lambda cfg: cfg.title)
    for n, x in enumerate(["train.betas", None]):
        cfg = LinesConfig(kind="lines", metric="test.acc", x=x, hue="model.d_state",
                          facet=None, title="betas")
        assert lines(ctx, cfg, tmp_path / f"l{n}.png"), x
    for n, where in enumerate(["row", "col"]):
        cfg = CurvesConfig(kind="curves", series="val.acc", hue=["model.d_state"],
                           title="betas", **{where: "train.betas"})
        assert curves(ctx, cfg, tmp_path / f"c{n}.png"), where


def test_one_layer_pattern_spelt_two_ways_in_a_sweep_is_refused(tmp_path):
    """Sweep points whose layer patterns build the same blocks (`layers: SSM-TF, repeat: 2`
    beside `layers: SSM-TF-SSM-TF`; `[SSM, TF]` beside `SSM-TF`) trained one model twice
    under two run ids, with their own labels and table rows: the inert-points check compared
    the spellings. They are refused as one training, saying so."""
    for cases, shown in [
            ([{"label": "a", "set": {"model.layers": "SSM-TF", "model.repeat": 2}},
              {"label": "b", "set": {"model.layers": "SSM-TF-SSM-TF"}}], "SSM-TF-SSM-TF"),
            ([{"label": "c", "set": {"model.layers": ["SSM", "TF"]}},
              {"label": "d", "set": {"model.layers": "SSM-TF"}}], "SSM-TF")]:
        spec = write_spec(tmp_path, seeds=[0], model={"name": "seq_lm", "d_model": 8},
                          sweep=[{"cases": cases}])
        res = _invoke("validate", spec)
        _assert_refused(res, "are one training under two run ids",
                        f"both build the layers {shown} (one layer pattern, spelt two ways)")
        assert "reads the model keys" not in res.output, res.output


def test_the_rotary_pct_a_refusal_suggests_rotates_two_channels():
    """A rotary_pct that rotates no channel is refused with 'give rotary_pct 0, or at least X
    (2 channels)'; X was 2 / head size to 6 digits, rounded down where it rounds down (head size
    24, cooper2026's d_model: 0.0833333, which rotates none and was refused the same way). X is
    rounded up: it rotates 2 channels; where the default rotates 2, leaving it out is named."""
    from ssmrepro.models.blocks import NeoXBlockConfig

    with pytest.raises(ValueError, match=r"or leave it out \(the default 0.25 rotates 2 "):
        NeoXBlockConfig(heads=1, rotary_pct=0.1).refuse_unread_rope(9)  # the default's 2
    for size, least in [(24, "0.084"), (70, "0.029"), (4096, "0.00049")]:
        with pytest.raises(ValueError, match=f"give at least {least} ") as err:
            NeoXBlockConfig(heads=1, rotary_pct=0.5 / size).refuse_unread_rope(size)
        assert "rotates no channel" in str(err.value)
        cfg = NeoXBlockConfig(heads=1, rotary_pct=float(least))
        assert cfg.rotary_channels(size) == 2
        cfg.refuse_unread_rope(size)  # taken


def test_a_monotone_claim_along_a_list_valued_key_is_judged():
    """A monotone claim along a list-valued key (``along: train.betas``, validated ok) ended
    `run` (after training) and `plot` in pandas' 'unhashable type: list' traceback: it counted
    each group's values of ``along`` as they are. They are counted by their text, as its
    positions are."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, cell_keys, verify

    betas = [[0.8, 0.95], [0.9, 0.99]]
    runs = [SimpleNamespace(label="", seed=0, coords={"train.betas": b},
                            flat=lambda b=b: {"train.betas": b}) for b in betas]
    df = pd.DataFrame([{"run_id": f"r{i}", "label": "", "seed": 0, "status": "ok",
                        "train.betas": b, "test.acc": acc}
                       for i, (b, acc) in enumerate(zip(betas, [0.5, 0.7]))])
    cells = aggregate(df, runs, "mean", ["test.acc"])
    claim = {"check": "monotone", "text": "up", "along": "train.betas", "group_by": []}
    spec = SimpleNamespace(claims=[claim], paper_values=[], claim="c")
    [v] = [v for v in verify(spec, cells, cell_keys(runs)) if v.kind == "claim"]
    assert v.verdict == "PASS", v
    assert "0 violations in 1 steps" in v.detail, v.detail


def test_analysis_tables_of_a_list_valued_cell_key_are_grouped():
    """A spec sweeping a list-valued key (``train.betas``) with ``analysis: [decay_histogram]``
    (or a weight analysis) ended `run`, after training, and `plot` in pandas' 'unhashable type:
    list' traceback: the histogram and per-cell tables are grouped by the cell keys. Each list
    is one cell, its decay metrics reach its cell."""
    import pandas as pd

    from ssmrepro.report.analysis import DECAY, add_metrics, cell_means, decay_metrics, histogram_table

    betas = [[0.9, 0.99], [0.8, 0.95]]
    recs = [{"label": "", "status": "ok", "config": {"train": {"betas": b}},
             "analysis": {DECAY: {"bins": 2, "before": [1, s], "after": [3, 4]}}}
            for b in betas for s in (1, 2)]  # two seeds per cell
    hist = histogram_table(recs, ["label", "train.betas"])
    assert hist["train.betas"].tolist() == [betas[1]] * 4 + [betas[0]] * 4
    assert hist["count"].tolist()[:4] == [6, 8, 2, 3]  # after, before: summed over seeds
    cells = pd.DataFrame({"label": ["", ""], "train.betas": betas})
    got = add_metrics(cells, decay_metrics(hist), ["decay.high_all"])
    assert got["decay.high_all"].notna().all(), got
    table = pd.DataFrame({"label": [""] * 4, "seed": [0, 1, 0, 1],
                          "train.betas": [betas[0], betas[0], betas[1], betas[1]],
                          "m": [1.0, 2.0, 3.0, 5.0]})
    means = cell_means(table, ["m"])
    assert means["train.betas"].tolist() == betas and means["m"].tolist() == [1.5, 4.0]


def test_a_committed_histograms_table_of_a_list_valued_key_reads_its_lists(tmp_path):
    """histograms.csv writes a list-valued key's cells (``train.betas``) as JSON text, and
    ``read_histograms`` kept that text: it matched no planned cell, so where the run records
    were absent (a fresh clone) `plot` dropped the committed histograms, deleted the file and
    left the decay metrics MISSING, without a word. The cells read back as the lists."""
    from ssmrepro.report.analysis import DECAY, histogram_table, read_histograms
    from ssmrepro.store import csv_text

    recs = [{"label": "", "status": "ok", "config": {"train": {"betas": b}},
             "analysis": {DECAY: {"bins": 2, "before": [1, 2], "after": [3, 4]}}}
            for b in ([0.9, 0.99], [0.8, 0.95])]
    hist = histogram_table(recs, ["label", "train.betas"])
    path = tmp_path / "histograms.csv"
    path.write_text(csv_text(hist))
    back = read_histograms(path)
    assert back["train.betas"].tolist() == hist["train.betas"].tolist()


def test_a_heatmap_lays_a_paper_list_value_out_in_its_own_panel_only(tmp_path, monkeypatch):
    """With ``cells_from_paper``, a paper value of ``model.layers: [SSM, TF]`` was laid out in
    the panels 'SSM' and 'TF' too (a panel of a column of scalars and lists read the list as any
    of its items): a paper number beside cells it is not of. It is in the [SSM, TF] panel."""
    from types import SimpleNamespace

    import matplotlib.axes
    import pandas as pd

    from ssmrepro.plots.figures import HeatmapsConfig, heatmaps
    from ssmrepro.spec import PaperValue

    table = pd.DataFrame({"label": [""] * 3, "model.layers": ["SSM", ["SSM", "TF"], "TF"],
                          "model.d_model": [8, 8, 8], "model.d_state": [2, 2, 2],
                          "test.acc": [0.5, 0.6, 0.7]})
    pv = PaperValue(where={"model.layers": ["SSM", "TF"], "model.d_model": 8,
                           "model.d_state": 4}, metric="test.acc", value=0.9)
    ctx = SimpleNamespace(table=table, spec=SimpleNamespace(paper_values=[pv]),
                          paper_value=lambda row, metric: None,
                          aggregation=lambda metric: "mean",
                          fitted_title=lambda cfg, width: cfg.title)
    cfg = HeatmapsConfig(kind="heatmaps", metric="test.acc", col="model.layers",
                         x="model.d_model", y="model.d_state", title="t", cells_from_paper=True)
    texts = []
    real = matplotlib.axes.Axes.text
    monkeypatch.setattr(matplotlib.axes.Axes, "text",
                        lambda ax, x, y, t, **kw: texts.append(t) or real(ax, x, y, t, **kw))
    assert heatmaps(ctx, cfg, tmp_path / "f.png")
    assert texts.count("not run (0.90)") == 1, texts


def test_a_preset_beside_the_backbone_it_builds_is_named_as_one_model(tmp_path):
    """A sweep of cooper_hybrid beside the seq_lm it builds is one training under two run ids
    (refused since round 36); the refusal listed the ~50 keys by which the two configs are
    spelt and said 'no block of the layer pattern reads the model keys', which both models
    read. It now says the two models build the same blocks, and names model.name alone."""
    from ssmrepro.spec import SpecError, load_spec
    from ssmrepro.sweep import expand

    hyb = {"name": "cooper_hybrid", "d_model": 8, "layers": "SSM-TF"}
    p = write_spec(tmp_path, seeds=[0], model=hyb, sweep=[])
    bb = expand(load_spec(p), "smoke")[0].model.to_backbone().model_dump(mode="json")
    p = write_spec(tmp_path, seeds=[0], model=hyb,
                   sweep=[{"cases": [{"label": "x"}, {"label": "x", "set": {"model": bb}}]}])
    with pytest.raises(SpecError) as err:
        expand(load_spec(p), "smoke")
    text = str(err.value)
    assert "the models 'cooper_hybrid' and 'seq_lm' build the same blocks (SSM-TF)" in text, text
    assert "model.name 'cooper_hybrid' vs 'seq_lm'" in text and "no block of" not in text, text
    assert "model.blocks.SSM.mixer.dt_min" not in text, text


def test_a_float32_run_gives_its_numbers_to_float32_rounding_in_any_pack_or_micro_batch(tmp_path):
    """The equality a run id promises (README, 'How runs are identified'): the planner's pack
    (its size and pack-mates: --pack-size, --max-runs, a resumed sweep) and micro-batch change a
    float32 run's numbers in the last bits only (reduction order), never its stop step or
    status; float64's to 1e-9 is tests/test_pack_equivalence.py."""
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand
    from ssmrepro.train import train_pack

    spec = load_spec(write_spec(
        tmp_path, seeds=[5], sweep=[{"grid": {"train.lr": [0.01, 0.003, 0.02]}}],
        train={"optimizer": "adamw", "lr": 0.01, "batch_size": 8, "max_steps": 20,
               "val_size": 32, "test_size": 32, "eval_every": 10, "eval_batch_size": 16,
               "weight_decay": 0.01, "dtype": "float32",
               "early_stop": {"metric": "val.loss", "op": "<", "threshold": 2.3}}))
    runs = expand(spec, "paper")
    packed = train_pack(runs)
    assert [p["stop_step"] for p in packed] == [20, 20, 10]  # the third stops early
    for e, r in enumerate(runs):
        for micro in (None, 3):
            other = train_pack([r], micro_batch=micro)[0]
            assert (other["micro_batch"], packed[e]["micro_batch"]) == (micro, None)  # recorded
            assert (other["status"], other["stop_step"]) == (packed[e]["status"],
                                                             packed[e]["stop_step"])
            for k, v in packed[e]["metrics"].items():
                assert other["metrics"][k] == pytest.approx(v, rel=1e-5, abs=1e-6), k


def test_registries_refuse_a_registration_they_would_get_wrong():
    """The mixer, figure-kind and check registries took any registration: a mixer config with
    no default name was registered under pydantic's undefined marker (every later 'unknown
    mixer' message then failed with a TypeError), one without ``activation_floats`` failed
    ``run --dry-run`` with a traceback, and odd names, configs that accept unknown keys or
    whose tag field refuses the name went in without a word. Each is refused, naming why; the
    registries are left as they were."""
    from typing import Literal

    from pydantic import ConfigDict

    from ssmrepro.models.layers import PackedModule
    from ssmrepro.models.mixers import MIXERS, MixerConfig, MixerSpecError, parse_mixer, register
    from ssmrepro.plots.registry import FIGURE_KINDS, FigureConfig, figure_kind
    from ssmrepro.report.checks import CHECKS, ThresholdConfig, check_kind

    def est(self, d, L):
        return L * d

    def mixer_cfg(name_ann, default, **extra):
        ns = {"__annotations__": {"name": name_ann}, "activation_floats": est, **extra}
        if default is not None:
            ns["name"] = default
        return type("Cfg", (MixerConfig,), ns)

    class Mod(PackedModule):
        pass

    before = (dict(MIXERS), dict(FIGURE_KINDS), dict(CHECKS))
    bad_mixers = [
        (mixer_cfg(Literal["nodef"], None), {}, "needs the mixer's name as default"),
        (mixer_cfg(Literal["My-Mix"], "My-Mix"), {}, "lower-case identifier"),
        (mixer_cfg(Literal["s6"], "s6"), {}, "registered twice"),
        (mixer_cfg(Literal["loose"], "loose", model_config=ConfigDict(extra="allow", frozen=True)),
         {}, "reject unknown keys"),
        (mixer_cfg(Literal["thawed"], "thawed", model_config=ConfigDict(frozen=False)), {},
         "reject unknown keys"),
        (type("Cfg", (MixerConfig,), {"__annotations__": {"name": Literal["noest"]},
                                      "name": "noest"}), {}, "no activation_floats"),
        (mixer_cfg(Literal["causalstr"], "causalstr"), {"causal": "no"}, "causal must be"),
        (ThresholdConfig, {}, "is not a MixerConfig"),
    ]
    try:
        for Config, kw, why in bad_mixers:
            with pytest.raises(ValueError, match=why):
                register(Config, **kw)(Mod)
        with pytest.raises(MixerSpecError, match="unknown mixer 'zzz'; known: attention"):
            parse_mixer({"name": "zzz"})
        FigCfg = type("FigCfg", (FigureConfig,), {"__annotations__": {"kind": Literal["other"]}})
        for name, Config, why in [("bars", FigureConfig, "registered twice"),
                                  ("my kind", FigureConfig, "lower-case identifier"),
                                  ("mine", FigCfg, "kind field takes only 'other'"),
                                  ("mine", dict, "is not a FigureConfig")]:
            with pytest.raises(ValueError, match=why):
                figure_kind(name, Config)(lambda ctx, cfg, path: True)
        for name, why in [("", "lower-case identifier"), ("mine", "check field takes only"),
                          ("threshold", "registered twice")]:
            with pytest.raises(ValueError, match=why):
                check_kind(name, ThresholdConfig)(lambda ctx, cfg: [])
        assert (dict(MIXERS), dict(FIGURE_KINDS), dict(CHECKS)) == before
    finally:
        for registry, old in zip((MIXERS, FIGURE_KINDS, CHECKS), before):
            registry.clear()
            registry.update(old)


def test_a_new_mixer_that_breaks_the_contract_is_refused_not_trained():
    """A registered mixer whose parameters no ``reset_member`` initialises (a plain nn.Module
    holding them: torch.empty's memory trained from garbage; a PackedModule without
    reset_member: the pack failed with a bare NotImplementedError) is refused when built, and
    one returning another shape or dtype than its input (a mean over the positions, (E, B, 1,
    d), was broadcast by the residual; a float64 output made the model float64) is refused by
    its block, naming the mixer: both trained and reported nonsense without a word."""
    from typing import Literal

    import torch

    from ssmrepro.models.blocks import MixerBlock, MixerBlockConfig
    from ssmrepro.models.layers import PackedModule
    from ssmrepro.models.mixers import MIXERS, MixerConfig, build_mixer, register

    def config(name):
        return type("Cfg", (MixerConfig,), {"__annotations__": {"name": Literal[name]},
                                            "name": name, "__doc__": "test mixer",
                                            "activation_floats": lambda self, d, L: L * d})

    class Plain(torch.nn.Module):
        def __init__(self, E, d, cfg):
            super().__init__()
            self.w = torch.nn.Parameter(torch.empty(E, d))

        def forward(self, x):
            return x * self.w[:, None, None]

    class NoReset(PackedModule):
        def __init__(self, E, d, cfg):
            super().__init__(E)
            self.w = torch.nn.Parameter(torch.empty(E, d))

    def packed(out):
        class Packed(NoReset):
            def reset_member(self, e, g):
                with torch.no_grad():
                    self.w[e].fill_(1.0)

            def forward(self, x):
                return out(x * self.w[:, None, None])
        return Packed

    cases = {"t_plain": (Plain, "Plain holds parameters but is not a PackedModule"),
             "t_noreset": (NoReset, "NoReset is a PackedModule without reset_member"),
             "t_pooled": (packed(lambda y: y.mean(2, keepdim=True)), r"returned \(2, 3, 1, 4\)"),
             "t_double": (packed(lambda y: y.double()), "torch.float64 for an input of")}
    try:
        for name, (cls, why) in cases.items():
            register(config(name))(cls)
            with pytest.raises(ValueError, match=why):
                block = MixerBlock(2, 4, MixerBlockConfig(mixer={"name": name}))
                block(torch.randn(2, 3, 5, 4))
        block = MixerBlock(2, 4, MixerBlockConfig(mixer={"name": "t_double"}, bidirectional="sum"))
        with pytest.raises(ValueError, match="mixer 't_double' returned"):
            block(torch.randn(2, 3, 5, 4))
        assert build_mixer({"name": "s6"}, 2, 4) is not None
    finally:
        for name in cases:
            MIXERS.pop(name, None)


def test_a_new_mixers_memory_estimate_is_refused_unless_a_positive_int():
    """A registered mixer whose ``activation_floats`` returned 0 or a negative number gave
    ``run --dry-run`` a memory need and time estimate of 0 ('-0.00 s per GB-step', '0 s'); a
    float or bool was carried into the byte counts; a negative ``fixed_floats`` lowered the
    need. Each is refused naming the mixer (validate / run: 'run cannot be built', exit 2)."""
    from typing import Literal

    import torch

    from ssmrepro.models.blocks import MixerBlockConfig
    from ssmrepro.models.layers import PackedModule
    from ssmrepro.models.mixers import MIXERS, MixerConfig, register

    values = {"act": 1, "fixed": 0}

    class Cfg(MixerConfig):
        """test mixer"""
        name: Literal["t_floats"] = "t_floats"

        def activation_floats(self, d, L):
            return values["act"]

        def fixed_floats(self, d, L):
            return values["fixed"]

    class Mod(PackedModule):
        pass

    register(Cfg)(Mod)
    try:
        block = MixerBlockConfig(mixer={"name": "t_floats"})
        assert block.activation_floats(8, 4) == 1 + 4 * 2 * 8 and block.fixed_floats(8, 4) == 0
        for act, fixed, why in [(0, 0, "activation_floats.*returned 0, not a positive int"),
                                (-10**9, 0, "returned -1000000000"), (2.5, 0, "returned 2.5"),
                                (True, 0, "returned True"), (torch.tensor(3), 0, "returned"),
                                (1, -5, r"fixed_floats\(d_model=8, L=4\) returned -5, not an int")]:
            values.update(act=act, fixed=fixed)
            with pytest.raises(ValueError, match=f"mixer 't_floats': .*{why}"):
                block.activation_floats(8, 4) + block.fixed_floats(8, 4)
    finally:
        MIXERS.pop("t_floats", None)


def test_a_task_whose_batch_breaks_the_contract_is_refused_naming_why():
    """A new task's batch was checked for its target layout only: a -1 meant as 'unsupervised'
    was read as supervised class 0 by the loss and the accuracy (only IGNORE is unsupervised),
    int32 targets, a float mask, token ids past vocab_size or a second input on a task that is
    not dual trained nonsense or failed deep in the model. The first training batch and each
    evaluation's first are checked against the contract, naming the task and the slip; the
    registered tasks keep it."""
    import torch

    from ssmrepro.tasks import TASKS, DataUnavailable, build_task
    from ssmrepro.tasks.base import IGNORE, batch_problem
    from ssmrepro.tasks.keep_nth import KeepNth
    from ssmrepro.train import _check_batch

    seeds, index = torch.tensor([1, 2]), torch.arange(6).reshape(2, 3)
    for name in TASKS:
        try:
            task = build_task({"name": name})
        except DataUnavailable:
            continue
        for split in (0, 1, 2):
            assert batch_problem(task.sample(seeds, split, index), task.info, 2, 3) is None, name

    task = KeepNth(KeepNth.Config())

    def minus_one(b):
        b.y[b.y == IGNORE] = -1

    def to(field, value):
        return lambda b: setattr(b, field, value(b))

    cases = [(minus_one, "y holds class id -1: class ids are in"),
             (to("y", lambda b: b.y.int()), "y is torch.int32"),
             (to("mask", lambda b: torch.ones(b.x.shape)), "mask is torch.float32"),
             (to("x", lambda b: b.x + 1000), "x holds token ids .* outside"),
             (to("x2", lambda b: b.x), "x2 is given but the task is not dual"),
             (to("y", lambda b: b.y[:, :, :-1]), r"y is torch.int64 of shape \(2, 3, 49\)"),
             (to("y", lambda b: b.y[:1]), r"y is torch.int64 of shape \(1, 3, 50\)")]
    for change, why in cases:
        b = task.sample(seeds, 0, index)
        change(b)
        with pytest.raises(ValueError, match=f"task keep_nth: its batch breaks the contract.*{why}"):
            _check_batch(task, task.info, b, index)


def test_a_refusal_shared_by_several_unlabelled_shapes_is_printed_once():
    """`run` / `validate` of chen2025-fig4 with `--set model.blocks.SSM.mixer.heads=3` printed
    'model: run cannot be built: d_inner=16 does not split into heads=3 ...' once per depth of
    the sweep (two shapes, runs without a label: the same line twice). Once now."""
    r = CliRunner().invoke(app, ["validate", "chen2025-fig4", "--set",
                                 "model.blocks.SSM.mixer.heads=3"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if "[profile smoke]" in ln]
    assert len(lines) == 1 and "does not split into heads=3" in lines[0], r.output


def test_a_registered_check_returning_no_claim_verdict_leaves_the_claim_missing_saying_why():
    """A registered check function that returned an empty list dropped its claim from the report
    and the verdict tally without a word; one returning None failed the report with a
    TypeError; a verdict spelt 'pass' or 'OK' was counted as none of PASS / FAIL / MISSING /
    UNTESTED. The claim stays, MISSING, naming the check and what it returned."""
    from types import SimpleNamespace
    from typing import Literal

    from ssmrepro.report.checks import (
        CHECKS,
        CLAIM_VERDICTS,
        ThresholdConfig,
        Verdict,
        check_kind,
        parse_claim,
        run_check,
    )

    returned = {}

    class Cfg(ThresholdConfig):
        check: Literal["t_bad"] = "t_bad"

    check_kind("t_bad", Cfg)(lambda ctx, cfg: returned["out"])
    try:
        cfg = parse_claim({"check": "t_bad", "text": "claim T", "op": ">=", "value": 0.5})
        ctx = SimpleNamespace(eval_sets=None)
        for out, why in [([], "an empty list"), (None, "NoneType"),
                         ([Verdict("claim", "t", "pass", 1.0)], "Verdict 'claim' 'pass'"),
                         ([Verdict("paper_value", "t", "match", 1.0)], "Verdict 'paper_value' 'match'")]:
            returned["out"] = out
            (v,) = run_check(ctx, cfg)
            assert (v.kind, v.text, v.verdict) == ("claim", "claim T", "MISSING")
            assert f"check 't_bad' returned {why}, not a list of claim verdicts" in v.detail
        for verdict in CLAIM_VERDICTS:
            returned["out"] = [Verdict("claim", "t", verdict, 1.0)]
            assert run_check(ctx, cfg)[0].verdict == verdict
    finally:
        CHECKS.pop("t_bad", None)


def test_a_figure_kind_returning_no_bool_or_no_image_is_said_so(tmp_path):
    """A registered figure kind that drew its image but returned None (no ``return``) was read
    as 'no finished cell of profile smoke to draw' and its image removed as stale; one that
    returned True without writing the image listed a figure that is not there. Each is said
    as it is, naming the kind."""
    from typing import Literal

    from ssmrepro.plots.registry import FIGURE_KINDS, FigureConfig, figure_kind

    returned = {}

    class Cfg(FigureConfig):
        kind: Literal["t_fig"]

    def draw(ctx, cfg, path):
        if returned["write"]:
            path.write_bytes(b"png")
        return returned["out"]

    figure_kind("t_fig", Cfg)(draw)
    spec = write_spec(tmp_path, figure={"kind": "t_fig"})
    try:
        for write, out, why in [(True, None, "figure kind 't_fig' returned None, not true or false "
                                 "(whether it drew figure-smoke.png)"),
                                (False, True, "figure kind 't_fig' returned true but wrote no "
                                 "figure-smoke.png")]:
            returned.update(write=write, out=out)
            r = CliRunner().invoke(app, ["plot", str(spec), "--profile", "smoke", "--out",
                                         str(tmp_path / "o")])
            assert why in " ".join(r.output.split()), r.output
            assert "no finished cell of profile smoke to draw" not in r.output
    finally:
        FIGURE_KINDS.pop("t_fig", None)


def test_a_new_analysis_records_are_checked_by_their_own_rule_not_as_decay_histograms():
    """``analysis_problem`` judged every recorded analysis as a decay histogram: a new entry of
    ``ANALYSES`` had every record refused as 'is not a histogram'. Each analysis is checked by
    its own entry of ``ANALYSIS_PROBLEMS`` (one without says so); decay histograms still are."""
    from ssmrepro.analysis import ANALYSES, ANALYSIS_PROBLEMS, HIST_BINS, analysis_problem

    ANALYSES["t_mean"] = lambda model, task, seeds: [{"value": 0.5}]
    try:
        assert "has no check of its records" in analysis_problem({"t_mean": {"value": 0.5}})
        ANALYSIS_PROBLEMS["t_mean"] = lambda name, res: (
            None if isinstance(res, dict) and set(res) == {"value"} else f"{name}: no value")
        assert analysis_problem({"t_mean": {"value": 0.5}}) is None
        assert analysis_problem({"t_mean": {"bins": 3}}) == "t_mean: no value"
        good = {"bins": HIST_BINS, "before": [0] * HIST_BINS, "after": [1] * HIST_BINS}
        assert analysis_problem({"t_mean": {"value": 1.0}, "decay_histogram": good}) is None
        assert "not a histogram" in analysis_problem({"decay_histogram": {"value": 1.0}})
        assert "whole counts" in analysis_problem(
            {"decay_histogram": {**good, "before": [-1] * HIST_BINS}})
    finally:
        ANALYSES.pop("t_mean", None)
        ANALYSIS_PROBLEMS.pop("t_mean", None)


def test_a_mixer_registered_non_causal_is_refused_on_a_next_token_task():
    """``register(Config, causal=False)`` was shown as '[non-causal]' by list-models only: such a
    mixer on a next-token task (text_corpus) read the next byte it was to predict, and its
    perplexity was nonsense. It is refused as a bidirectional block is; causal mixers pass."""
    from typing import Literal

    from ssmrepro.models.backbone import SeqLMConfig
    from ssmrepro.models.layers import PackedModule
    from ssmrepro.models.mixers import MIXERS, MixerConfig, register
    from ssmrepro.tasks.base import TaskInfo

    class Cfg(MixerConfig):
        """test mixer"""
        name: Literal["t_ahead"] = "t_ahead"

        def activation_floats(self, d, L):
            return L * d

    class Mod(PackedModule):
        pass

    register(Cfg, causal=False)(Mod)
    try:
        cfg = SeqLMConfig.model_validate(
            {"name": "seq_lm", "d_model": 8, "layers": ["A", "B"],
             "blocks": {"A": {"mixer": {"name": "t_ahead"}}, "B": {"mixer": {"name": "s6"}}}})
        lm = TaskInfo(vocab_size=8, n_classes=8, seq_len=4, next_token=True)
        with pytest.raises(ValueError, match=r"non-causal mixer of block A \(t_ahead\) would read"):
            cfg.check_task(lm)
        cfg.check_task(TaskInfo(vocab_size=8, n_classes=8, seq_len=4))
        causal = cfg.model_copy(update={"layers": ["B"]})
        causal.check_task(lm)
    finally:
        MIXERS.pop("t_ahead", None)


def test_decay_all_decays_the_exempt_parameters_per_member(tmp_path):
    """`train.weight_decay` never reached the parameters tagged no_weight_decay (norms, biases,
    A_log, D, Δ bias), while koren2026's and cooper2026's code decays every parameter
    (torch.optim.AdamW(model.parameters())): `train.decay_all: true` does that, per member of a
    pack (member 0 as before, member 1 like torch with one group of every parameter); with
    weight_decay 0, or on a model that exempts nothing (koren2026's linear Mamba), it is
    refused as changing nothing."""
    import torch

    from ssmrepro.models.layers import no_weight_decay
    from ssmrepro.optim import PackedAdam
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import TrainConfig, expand
    from ssmrepro.train import lr_scale_problems

    for decoupled in (False, True):
        g = torch.Generator().manual_seed(0)
        init = [torch.randn(2, 4, 3, generator=g, dtype=torch.float64),
                torch.randn(2, 5, generator=g, dtype=torch.float64)]
        ours = [torch.nn.Parameter(init[0].clone()),
                no_weight_decay(torch.nn.Parameter(init[1].clone()))]  # a norm, a bias, A_log
        refs = [[torch.nn.Parameter(t[e : e + 1].clone()) for t in init] for e in range(2)]
        v = lambda *x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
        opt = PackedAdam(ours, v(0.9, 0.9), v(0.95, 0.95), v(1e-8, 1e-8), v(0.3, 0.3), decoupled,
                         decay_all=v(0.0, 1.0))
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        topts = [cls([{"params": refs[0][:1], "weight_decay": 0.3},  # the tagged one exempt
                      {"params": refs[0][1:], "weight_decay": 0.0}], lr=0.05, betas=(0.9, 0.95)),
                 cls(refs[1], lr=0.05, betas=(0.9, 0.95), weight_decay=0.3)]  # every parameter
        for _ in range(4):
            grads = [torch.randn(t.shape, generator=g, dtype=torch.float64) for t in init]
            for i, p in enumerate(ours):
                p.grad = grads[i].clone()
                for e in range(2):
                    refs[e][i].grad = grads[i][e : e + 1].clone()
            opt.step(v(0.05, 0.05), torch.tensor([True, True]))
            for t in topts:
                t.step()
        for e in range(2):
            for p, q in zip(ours, refs[e]):
                torch.testing.assert_close(p[e : e + 1], q, rtol=1e-12, atol=1e-12)

    with pytest.raises(ValueError, match="decay_all true is not read with weight_decay 0"):
        TrainConfig(max_steps=2, decay_all=True)
    TrainConfig(max_steps=2, decay_all=True, weight_decay=0.1)
    train = {"optimizer": "adamw", "lr": 0.01, "batch_size": 8, "max_steps": 2, "val_size": 8,
             "test_size": 8, "eval_every": 2, "eval_batch_size": 8, "weight_decay": 0.1,
             "decay_all": True}
    lin = {"label": "lin", "set": {"model": {"name": "linear_mamba", "d_model": 8,
                                             "d_state": 4}}}
    runs = expand(load_spec(write_spec(tmp_path, train=train, seeds=[0], sweep=[{"cases": [
        {"label": "S6", "set": {"model.mixer": "s6"}}, lin]}])), "smoke")
    bad = lr_scale_problems(runs)
    assert len(bad) == 1 and bad[0].startswith("train.decay_all: run lin decays every "), bad


def test_a_registered_check_verdict_whose_ours_is_no_number_leaves_the_claim_missing():
    """A registered check's verdict whose ``ours`` (or ``bound``) was a string, a list, a
    tensor or a complex failed report.md with a TypeError (after training, in plot); a bool
    was printed as the number 1.000 beside the verdict. The claim is MISSING, saying what the
    check returned; a numpy scalar or an int is taken as its float."""
    from types import SimpleNamespace
    from typing import Literal

    import numpy as np
    import torch

    from ssmrepro.report import _ours
    from ssmrepro.report.checks import CHECKS, ThresholdConfig, Verdict, check_kind, parse_claim, run_check

    returned = {}

    class Cfg(ThresholdConfig):
        check: Literal["t_ours"] = "t_ours"

    check_kind("t_ours", Cfg)(lambda ctx, cfg: [returned["v"]])
    try:
        cfg = parse_claim({"check": "t_ours", "text": "claim T", "op": ">=", "value": 0.5})
        ctx = SimpleNamespace(eval_sets=None)
        for ours, bound, what in [("0.9", None, "ours is str '0.9'"), ([0.9], None, "ours is list"),
                                  (True, None, "ours is bool True"), (np.True_, None, "ours is bool"),
                                  (torch.tensor(0.9), None, "ours is Tensor"), (1j, None, "ours is complex"),
                                  (0.9, "0.5", "bound is str '0.5'")]:
            returned["v"] = Verdict("claim", "t", "PASS", ours, bound=bound)
            (v,) = run_check(ctx, cfg)
            assert (v.text, v.verdict, v.ours) == ("claim T", "MISSING", None), (ours, v)
            assert f"check 't_ours' returned a verdict whose {what}" in v.detail, v.detail
            assert _ours(v) == "—"
        returned["v"] = Verdict("claim", "t", "PASS", 0.9, detail=["x"])
        assert "detail is list ['x'], not a string" in run_check(ctx, cfg)[0].detail
        for ours in (np.float32(0.75), np.int64(3), 2, None, float("nan")):
            returned["v"] = Verdict("claim", "t", "FAIL", ours, bound=np.float64(0.5))
            (v,) = run_check(ctx, cfg)
            assert v.verdict == "FAIL" and type(v.bound) is float
            assert v.ours is None or (type(v.ours) is float and (v.ours == float(ours) or ours != ours))
            _ours(v)
    finally:
        CHECKS.pop("t_ours", None)


def test_paper_panels_name_a_list_valued_panel(tmp_path, monkeypatch):
    """``paper_panels`` of a figure paneled by a list-valued key (``col: train.betas`` /
    ``model.layers``) could name no list panel: validate refused every spelling of one as 'no
    train.betas of any run' (a key is text, compared with the list), and a target could not be
    a list. A key names the panel as its title writes it (any spacing, YAML or JSON), a target
    is the list (or its text); the mapped panel shows the target's paper value."""
    import matplotlib.axes
    from test_checks import Run
    from test_outputs import _ctx, _draw

    from ssmrepro.plots.curves import CurvesConfig
    from ssmrepro.spec import PaperValue

    pvs = [{"where": {"train.betas": [0.9, 0.99]}, "metric": "test.acc", "value": 0.5}]
    fig = {"kind": "heatmaps", "metric": "test.acc", "col": "train.betas", "x": "model.d_state",
           "y": "model.d_model"}
    for pp, bad in [({"[0.8,0.95]": "[0.9, 0.99]"}, None), ({"[0.8, 0.95]": [0.9, 0.99]}, None),
                    ({"[0.8, 0.95]": [0.9, 0.98]}, "[0.9, 0.98] is no train.betas of any run or "
                     "paper value"), ({"[0.7, 0.9]": [0.9, 0.99]}, "[0.7, 0.9] is no train.betas "
                                      "of any run of any profile")]:
        spec = write_spec(tmp_path, seeds=[0], paper_values=pvs, figure={**fig, "paper_panels": pp},
                          sweep=[{"grid": {"train.betas": [[0.9, 0.99], [0.8, 0.95]]}}])
        res = _invoke("validate", spec)
        if bad is None:
            assert res.exit_code == 0, (pp, res.output)
        else:
            _assert_refused(res, bad)
    # a list on a column no run holds a list in would be read as any of its items
    for pp in ({"[8]": "12"}, {"8": [8, 12]}):
        spec = write_spec(tmp_path, seeds=[0], figure={**fig, "col": "model.d_model",
                                                      "paper_panels": pp},
                          sweep=[{"grid": {"model.d_model": [8, 12]}}])
        _assert_refused(_invoke("validate", spec), "is a list, and no run's model.d_model is one")
    assert CurvesConfig(kind="curves", series="val.acc", col="model.layers",
                        paper_panels={"[SSM,TF]": "[SSM, TF]"}).paper_panels == {
        '["SSM", "TF"]': ["SSM", "TF"]}
    runs = [Run("", {"model.layers": v, "model.d": 8, "task.T": 10}) for v in ("SSM", ["SSM", "TF"])]
    ctx = _ctx(tmp_path, runs, [0.1, 0.5])
    ctx.spec.paper_values = [PaperValue(where={"model.layers": ["SSM", "TF"], "model.d": 8},
                                        value=0.6)]
    texts = []
    monkeypatch.setattr(matplotlib.axes.Axes, "text", lambda self, x, y, s, **kw: texts.append(s))
    for pp in ({"SSM": ["SSM", "TF"]}, {"SSM": "[SSM, TF]"}):
        texts.clear()
        assert _draw(ctx, {"kind": "heatmaps", "col": "model.layers", "x": "task.T", "y": "model.d",
                           "paper_panels": pp}, tmp_path / "h.png")
        assert texts == ["0.10 (0.60)", "0.50 (0.60)"], (pp, texts)


def test_a_ctrl_c_inside_code_made_from_a_string_still_exits_130_under_python_m(tmp_path):
    """A Ctrl-C while `python -m ssmrepro ...` loaded (or ran) exited by SIGINT (-2) after its
    'interrupted' line, now and then (seen under load, 'not explained'): one raised inside code
    that exec / eval run from a string (namedtuple's and dataclass's methods, made while
    modules load) sets CPython's 'unhandled KeyboardInterrupt' mark even where it is caught,
    and a `-m` run kills itself with SIGINT as it exits. The guards clear it: exit 130."""
    import subprocess
    import sys

    ki = "exec('import os, signal, time; os.kill(os.getpid(), signal.SIGINT); time.sleep(5)')"
    (tmp_path / "ld.py").write_text(
        f"from ssmrepro.signals import load_guarded\nload_guarded(lambda: {ki})\n")
    (tmp_path / "rn.py").write_text(
        "import sys\nfrom ssmrepro.signals import run_guarded\n"
        f"sys.exit(run_guarded(lambda: {ki}, 'interrupted — x'))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    for mod, line in (("ld", "before the command started"), ("rn", "interrupted — x")):
        r = subprocess.run([sys.executable, "-m", mod], env=env, capture_output=True, text=True,
                           timeout=60, preexec_fn=_default_hangup_and_interrupt)
        assert r.returncode == 130 and line in r.stderr, (mod, r.returncode, r.stderr[-800:])
        assert "Traceback" not in r.stderr, r.stderr


def test_one_layer_pattern_spelt_two_ways_across_profiles_or_points_is_refused(tmp_path):
    """`layers: [SSM, TF]` in one profile and `layers: SSM-TF` in another (or in two points of
    one profile at different widths) passed: the tables keep each spelling, so a claim or paper
    value `where: {model.layers: SSM-TF}` found no cell in the [SSM, TF] profile ('no cell the
    claim needs', 'not run in this profile' of a model it trained), and two profiles trained
    one model under two run ids. validate (and run, within its profile) refuse it; one spelling
    passes."""
    model = {"name": "seq_lm", "d_model": 8, "layers": "SSM"}
    kw = dict(seeds=[0], model=model, sweep=[{"cases": [{"label": "hyb"}]}])
    spec = write_spec(tmp_path, **kw, profiles={
        "smoke": {"set": {"model.layers": ["SSM", "TF"]}},
        "quick": {"set": {"model.layers": "SSM-TF"}}, "paper": {"set": {"model.layers": "SSM-TF"}}})
    _assert_refused(_invoke("validate", spec), 'model.layers: ["SSM", "TF"] ([profile smoke] point 0',
                    "and SSM-TF ([profile quick] point 0 hyb) build the same layers SSM-TF",
                    "spell it one way")
    spec = write_spec(tmp_path, **{**kw, "sweep": [{"cases": [
        {"label": "a", "set": {"model.layers": ["SSM", "TF"]}},
        {"label": "b", "set": {"model.layers": "SSM-TF", "model.d_model": 12}}]}]})
    res = _invoke("run", spec, "--profile", "smoke", "--out", tmp_path / "o", "--dry-run",
                  "--no-estimate")
    _assert_refused(res, "[profile smoke] model.layers:", "build the same layers SSM-TF")
    spec = write_spec(tmp_path, **{**kw, "sweep": [{"cases": [
        {"label": "a", "set": {"model.layers": "SSM-TF"}},
        {"label": "b", "set": {"model.layers": "SSM-TF", "model.d_model": 12}}]}]})
    assert _invoke("validate", spec).exit_code == 0


def _close_or_both_zero(a, b, what, rtol=1e-9):
    """a == b to float64 rounding, relative to b's largest entry; a gradient one path leaves None
    (an input it never reads, e.g. the decay of a scan of one step) equals the other's zeros."""
    if a is None or b is None:
        other = b if a is None else a
        assert other is None or not bool(other.detach().abs().max() > 0), what
        return
    a, b = a.detach(), b.detach()
    assert a.shape == b.shape and a.dtype == b.dtype, what
    if b.numel():  # (not torch.testing.assert_close: ~7 ms a call, most of this test's time)
        err, scale = float((a - b).abs().max()), float(b.abs().max())
        assert err <= rtol * scale, f"{what}: off by {err:.3g}, {err / (scale or 1):.3g} of the largest"


def test_kernels_equal_their_references_at_edge_shapes_and_extreme_decays():
    """Round 38 audit: every CPU fast kernel equals its sequential reference in float64, outputs
    and gradients, at the shapes its tiling and chunking treat apart (one step, a length that is no
    multiple of the chunk, a chunk or block longer than the sequence, one state, one batch row,
    one or three groups, a conv wider than the sequence, all-zero inputs) and at log-decays per
    step of 0 (or steps Δ of 1e-12), 1e-12, 1 and 1e3."""
    import torch

    from ssmrepro.kernels.b2s6_scan import b2s6_scan, b2s6_scan_ref
    from ssmrepro.kernels.conv import _reference as conv_ref
    from ssmrepro.kernels.conv import causal_conv1d_cpu
    from ssmrepro.kernels.inplace import ScanPlan, diag_scan_blocked, selective_scan_fused
    from ssmrepro.kernels.scan import diag_scan, diag_scan_ref, selective_scan_ref
    from ssmrepro.kernels.ssd import ssd, ssd_ref

    D = torch.float64
    g = torch.Generator().manual_seed(38)
    rnd = lambda *s: torch.randn(*s, generator=g, dtype=D)  # noqa: E731
    uni = lambda *s: torch.rand(*s, generator=g, dtype=D)  # noqa: E731

    def check(name, fast, ref, inputs):
        outs = []
        for f in (fast, ref):
            ins = [t.clone().requires_grad_() if t is not None else None for t in inputs]
            y = f(*ins)
            w = torch.linspace(-1.0, 2.0, y.numel(), dtype=D).view(y.shape)
            grads = torch.autograd.grad((y * w).sum().real, [t for t in ins if t is not None],
                                        allow_unused=True)
            outs.append((y, grads))
        _close_or_both_zero(outs[0][0], outs[1][0], f"{name}: output")
        for i, (a, b) in enumerate(zip(outs[0][1], outs[1][1])):
            _close_or_both_zero(a, b, f"{name}: gradient {i}")

    for scale in (0.0, 1e-12, 1.0, 1e3):  # per-step log-decay magnitudes
        for L, chunk in ((1, None), (7, 3), (5, 100), (40, None), (40, 16)):
            for cplx in (False, True):
                la = -scale * uni(2, L, 3)
                if cplx:
                    la = torch.complex(la, rnd(2, L, 3))
                b = rnd(2, L, 3) if scale else torch.zeros(2, L, 3, dtype=D)
                check(f"diag_scan la {scale} L {L} chunk {chunk}",
                      lambda la, b, q=chunk: diag_scan(la, b, q), diag_scan_ref, [la, b])
                check(f"diag_scan_blocked la {scale} L {L} block {chunk}",
                      lambda la, b, q=chunk: diag_scan_blocked(la, b, q), diag_scan_ref, [la, b])
        for L, chunk in ((1, None), (5, 2), (5, 64), (17, 16)):
            check(f"ssd a {scale} L {L} chunk {chunk}",
                  lambda x, a, B, C, q=chunk: ssd(x, a, B, C, q), ssd_ref,
                  [rnd(1, L, 2, 3), -scale * uni(1, L, 2), rnd(1, L, 2, 1), rnd(1, L, 2, 1)])
        for Bt, L, G, K, N, plan in ((1, 1, 1, 1, 1, None), (1, 5, 1, 4, 1, ScanPlan(1, 1, 2)),
                                     (2, 6, 3, 1, 2, ScanPlan(2, 2, 4, False, narrow=True)),
                                     (2, 9, 3, 2, 1, ScanPlan(1, 3, 32, False))):
            A = -(scale or 1.0) * uni(G * K, N)
            dl = (1e-12 if scale == 0 else 1.0) * uni(Bt, L, G * K)
            check(f"selective_scan_fused |A| {scale} {(Bt, L, G, K, N)} {plan}",
                  lambda u, dl, A, B, C, Dv, p=plan: selective_scan_fused(u, dl, A, B, C, Dv, plan=p),
                  selective_scan_ref, [rnd(Bt, L, G * K), dl, A, rnd(Bt, L, G, N), rnd(Bt, L, G, N),
                                       rnd(G * K)])
        for L, cplx in ((1, True), (6, False), (6, True)):
            A = -(scale or 1.0) * (uni(2, 1) + 0.01)
            if cplx:
                A = torch.complex(A, rnd(2, 1))
            dl = (1e-12 if scale == 0 else 1.0) * uni(1, L, 2, 3) + 1e-9
            check(f"b2s6_scan euler |A| {scale} L {L} complex {cplx}",
                  lambda *a: b2s6_scan(*a, "euler"), lambda *a: b2s6_scan_ref(*a, "euler"),
                  [rnd(1, L, 2, 3), dl, A, rnd(1, L, 2, 1), rnd(2, 3, 1), rnd(1, L, 2, 1)])
    for W, L in ((1, 1), (4, 1), (7, 3), (3, 8)):
        for act in (None, "silu"):
            check(f"causal_conv1d_cpu W {W} L {L} {act}",
                  lambda x, w, b, f=act: causal_conv1d_cpu(x, w, b, f, chunk_elems=5),
                  lambda x, w, b, f=act: conv_ref(x, w, b, f), [rnd(2, 1, L, 3), rnd(2, 3, W), rnd(2, 3)])


def test_mixers_equal_their_references_at_one_step_and_extreme_steps():
    """Round 38 audit: every registered mixer's fast path equals its ``forward_ref`` in float64,
    outputs and the gradients of the input and every parameter, for a sequence of one step (one
    batch row, one member: the scans never apply a decay, so a complex Λ's gradient is None on the
    fast path and 0 on the reference, which is the same training) and for Δ ranges at the init
    floor (1e-4) and large (10 to 50: every state forgotten within a step) at a length that is no
    multiple of any chunk."""
    import pydantic
    import torch

    from ssmrepro.models.layers import reset_members
    from ssmrepro.models.mixers import MIXERS, build_mixer

    small = {"d_state": 2, "heads": 2}
    cases = []
    for name, entry in sorted(MIXERS.items()):
        fields = entry.Config.model_fields
        cfg = {"name": name, **{k: v for k, v in small.items() if k in fields}}
        cases.append((cfg, 1, 1))
        if "complex_A" in fields:
            cases.append(({**cfg, "complex_A": not fields["complex_A"].default}, 1, 1))
        if "dt_min" in fields:
            cases += [({**cfg, "dt_min": 1e-4, "dt_max": 1e-4}, 2, 5),
                      ({**cfg, "dt_min": 10.0, "dt_max": 50.0}, 2, 5)]
    for cfg, E, L in cases:
        try:
            m = build_mixer(cfg, E, 8)
        except (ValueError, pydantic.ValidationError):
            m = build_mixer({k: v for k, v in cfg.items() if k not in small}, E, 8)
        reset_members(m, list(range(5, 5 + E)))
        m = m.double()
        params = [p for p in m.parameters() if p.requires_grad]
        x = torch.randn(E, 1, L, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        res = []
        for f in (m, m.forward_ref):
            xi = x.clone().requires_grad_(True)
            y = f(xi)
            w = torch.linspace(-1.0, 2.0, y.numel(), dtype=y.dtype).view(y.shape)
            res.append((y, torch.autograd.grad((y.sin() * w).sum(), [xi, *params],
                                               allow_unused=True)))
        names = ["x", *(n for n, p in m.named_parameters() if p.requires_grad)]
        _close_or_both_zero(res[0][0], res[1][0], f"{cfg} L {L}: output", rtol=1e-10)
        for n, a, b in zip(names, res[0][1], res[1][1]):
            _close_or_both_zero(a, b, f"{cfg} L {L}: gradient of {n}", rtol=1e-8)


def test_listops_encoder_refuses_the_letters_it_uses_for_operators(tmp_path):
    """Round 38: the fast ListOps encoder (``encode_listops``: operators swapped for the letters
    a-d, then a numpy look-up) read a source's own token 'a', 'b', 'c' or 'd' as [MIN, [MAX, [MED
    or [SM: a row '( ( [MAX 2 ) d ) ] )' trained as [MAX 2 [SM ]; the reference tokenizer
    (``tokens_to_ids(tokenize_listops(...))``) refuses it. Both now agree on every row of tokens
    (ids, or a refusal), a refusal names the token as the file writes it ('[MAX2', not 'b2'), and
    the line it is on (blank lines before it made the message name an earlier line)."""
    import itertools

    import numpy as np

    from ssmrepro.data.listops import (
        ListOpsConfig,
        encode_listops,
        prepare_listops,
        tokenize_listops,
        tokens_to_ids,
    )

    alphabet = ["(", ")", "]", "X", "[MAX", "[SM", "7", "a", "b", "c", "d", "[MAXd", "12", "[M"]
    for toks in itertools.product(alphabet, repeat=2):
        src = " ".join(toks)
        try:
            want = tokens_to_ids(tokenize_listops(src))
        except KeyError:
            want = None
        try:
            got = encode_listops(src).tolist()
        except ValueError:
            got = None
        assert got == want, src
    for src, token in (("( ( [MAX 2 ) d ) ] )", "'d'"), ("( [MAX2 ) ] )", "'[MAX2'"),
                       ("( [SM 1 ) a3 ] )", "'a3'")):
        with pytest.raises(ValueError, match=re.escape(f"unknown ListOps token {token}")):
            encode_listops(src)
    for name in ("basic_train.tsv", "basic_val.tsv", "basic_test.tsv"):
        (tmp_path / name).write_text("Source\tTarget\n( ( [MAX 2 ) 9 ) ] )\t9\n"
                                     + ("\n( ( [MIN 4 ) c ) ] )\t4\n" if name == "basic_val.tsv"
                                        else ""))
    # line 4 of the file (a blank line 3 before it: the message counted rows, and said 3)
    with pytest.raises(ValueError, match=r"basic_val\.tsv:4: unknown ListOps token 'c'"):
        prepare_listops(tmp_path, ListOpsConfig())
    assert np.array_equal(encode_listops("( ( [MED 0 ) 5 ) ] )"), [14, 2, 7, 16])


def test_the_output_distribution_figure_is_written_atomically(tmp_path, monkeypatch):
    """koren2026-fig14's output_distribution figure was saved in place (``fig.savefig(path)``),
    the one figure not written through a temp file and a rename: `figures`, the front page or
    an image viewer reading it while a `plot` wrote it (or a `plot` killed then) saw a torn PNG.
    A write that fails part-way leaves the old image whole, and no temp file."""
    from types import SimpleNamespace

    import matplotlib.figure

    from ssmrepro.plots.mechanistic import DistributionConfig, _draw_distribution

    def torn(self, fname, **kw):  # a write cut short: some bytes, then the failure
        if hasattr(fname, "write"):
            fname.write(b"\x89PNG torn")
        else:
            Path(fname).write_bytes(b"\x89PNG torn")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", torn)
    path = tmp_path / "dist.png"
    path.write_bytes(b"the old image")
    cfg = DistributionConfig(kind="output_distribution", bins=5)
    dens = [0.1, 0.2, 0.3, 0.2, 0.1]
    rows = [{"name": "S6", "run": "r0",
             "panels": {k: ([dens], (0.0, 0.3)) for k in ("correct", "wrong", "empty")},
             "metrics": {"M": 1.0, "N": 2.0, "out.wrong_var": 0.1, "out.empty_var": 0.2}}]
    ctx = SimpleNamespace(fitted_title=lambda cfg, width, size: "t")
    with pytest.raises(OSError):
        _draw_distribution(ctx, cfg, path, rows)
    assert path.read_bytes() == b"the old image"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist.png"]


def test_bench_records_and_the_roofline_hold_the_folder(tmp_path, monkeypatch):
    """Two `bench keep-nth-d8` into one --out ending together wrote their JSON and CSV records
    as two atomic writes each, unlocked: one's JSON could stay beside the other's CSV. And
    `bench roofline` read the records twice, for the figure and then for performance.md: a
    bench writing between them left a figure and a table of different records. Each now holds
    the folder (``folder_lock``) for the pair of writes, or for the figure and the table. (And
    the roofline removes the temp files of one killed as it wrote them.)"""
    import fcntl
    import socket
    import subprocess
    import sys

    from ssmrepro.bench import packs, roofline

    def held() -> bool:
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    seen = []

    def watched(fn):
        def call(*args, **kw):
            seen.append((fn.__name__, held()))
            return fn(*args, **kw)
        return call

    committed = ROOT / "results" / "bench"
    rec = json.loads((committed / "keep-nth-d8-cpu.json").read_text())
    monkeypatch.setattr(packs, "atomic_write_text", watched(packs.atomic_write_text))
    packs.write_record(tmp_path, rec)
    assert seen == [("atomic_write_text", True)] * 2, seen
    assert (tmp_path / "keep-nth-d8-cpu.csv").read_text() == \
        (committed / "keep-nth-d8-cpu.csv").read_text()
    seen.clear()
    for name in ("roofline_figure", "performance_table"):
        monkeypatch.setattr(roofline, name, watched(getattr(roofline, name)))
    p = subprocess.Popen([sys.executable, "-c", "pass"])  # a roofline killed as it wrote
    p.wait()
    left = tmp_path / f".performance.md.{socket.gethostname()}.{p.pid}.abc123.tmp"
    left.write_text("half")
    roofline.write_roofline(tmp_path)
    assert seen == [("roofline_figure", True), ("performance_table", True)], seen
    assert not held() and not left.exists()


def test_a_forced_data_generate_outrun_by_another_is_told_to_run_again(tmp_path, monkeypatch):
    """`data generate listops --force` into a dataset's folder, and meanwhile a plain `data
    generate` of that folder (which --force had emptied) ends first: the forced one stopped
    (exit 1, its data discarded, rightly: the first to finish stands) saying 'pass --force to
    replace it', the flag it had. It says to run the same command again; without --force the
    advice is unchanged."""
    import ssmrepro.data.listops as lo

    out, real = tmp_path / "listops", lo.generate_listops
    args = ("--n", "3", "--min-length", "1", "--max-length", "40", "--out", out)
    assert _invoke("data", "generate", "listops", "--seed", "6", *args).exit_code == 0

    def other_finishes_meanwhile(*a, **kw):  # a plain generate, seed 7, ends first
        monkeypatch.setattr(lo, "generate_listops", real)
        assert _invoke("data", "generate", "listops", "--seed", "7", *args).exit_code == 0
        return real(*a, **kw)

    for force, advice in ((True, "run this command again to replace it"),
                          (False, "pass --force to replace it")):
        monkeypatch.setattr(lo, "generate_listops", other_finishes_meanwhile)
        res = _invoke("data", "generate", "listops", "--seed", "8", *args,
                      *(["--force"] if force else []))
        said = " ".join(res.output.split())
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert f"this one's data were discarded ({advice}" in said, said
        assert '"seed": 7' in (out / "meta.json").read_text()
        shutil.rmtree(out)


def test_weights_written_before_their_record_are_not_quarantined_while_held(tmp_path):
    """A run trained again (its record lacks an analysis the spec now keeps, its weights were
    deleted ...) while its old record stays: its holder writes the new weights, then the record
    naming them. A `plot`, `show` or `run` of another profile of the spec reading between the
    two found weights its (old) record does not name and quarantined them as foreign: the new
    record then named weights that were gone, and the run was trained a third time. Held by a
    live process, they are left alone (not used yet); unheld, quarantined as before."""
    import io as _io
    import socket

    import torch

    from ssmrepro.store import WEIGHTS_DIGEST, Store

    root = tmp_path / "out" / "p" / "s"
    (root / "runs").mkdir(parents=True)
    (root / "claims").mkdir()
    run_id = "0123456789ab"
    buf = _io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    weights = root / "runs" / f"{run_id}.pt"
    weights.write_bytes(buf.getvalue())  # the new weights, written first
    (root / "runs" / f"{run_id}.json").write_text(json.dumps({WEIGHTS_DIGEST: "0" * 64}))
    claim = root / "claims" / f"{run_id}.claim"  # the live holder training it (this process)
    claim.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                 "time": time.time(), "nonce": "n"}))
    reader = Store(root, weights=True)
    assert reader.read_weights(run_id) is None
    assert weights.read_bytes() == buf.getvalue()
    assert not (root / "runs" / "quarantine").exists()
    assert any("being trained now" in w for w in reader.warnings), reader.warnings
    claim.unlink()  # no holder: weights their record does not name are foreign
    reader = Store(root, weights=True)
    assert reader.read_weights(run_id) is None
    assert not weights.exists() and len(list((root / "runs" / "quarantine").iterdir())) == 1


def test_a_store_cleanup_leaves_a_stale_claim_just_taken_over(tmp_path, monkeypatch):
    """A `run` killed (kill -9) holding a claim; a second `run`, waiting on it, takes the stale
    claim over while a third (another profile of the spec, or --set) cleans the store at its
    start. The cleaner judged the claim stale, the taker then replaced it with its own, and the
    cleaner removed that live claim: the taker's training was dropped as another's (its claim
    gone) and the run trained again. The cleaner now removes a stale claim only holding its
    takeover marker, as the taker does: one of the two acts. A marker left by a taker that died
    (older than a takeover takes) does not keep the claim for ever: it was never taken over
    again, and a `run` waiting on its run planned it again and again without a pause."""
    import subprocess
    import sys

    from ssmrepro.store import MARKER_DEBRIS_S, Store

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    cleaner, taker = Store(tmp_path), Store(tmp_path)
    cleaner.claims.mkdir(parents=True)
    path = cleaner.claims / "r1.claim"
    path.write_text(json.dumps({"host": cleaner.host, "pid": p.pid, "time": 0, "nonce": "old"}))
    judged = Store._is_stale

    def taken_over_meanwhile(self, claim, info=None):  # the taker acts after the cleaner judged
        stale = judged(self, claim, info)
        if self is cleaner and stale:
            seen = taker._read_claim(claim)
            assert taker.take_over("r1", seen)
        return stale

    monkeypatch.setattr(Store, "_is_stale", taken_over_meanwhile)
    cleaner.cleanup()
    assert taker.holds("r1"), sorted(q.name for q in cleaner.claims.iterdir())
    monkeypatch.setattr(Store, "_is_stale", judged)
    taker.release("r1")
    path.write_text(json.dumps({"host": cleaner.host, "pid": p.pid, "time": 0, "nonce": "old"}))
    marker = cleaner.claims / "r1.claim.taken.old"  # its taker died before replacing the claim
    marker.touch()
    cleaner.cleanup()
    assert path.exists()  # a taker may be replacing it now
    assert not taker.take_over("r1", taker._read_claim(path))
    os.utime(marker, (time.time() - MARKER_DEBRIS_S - 1,) * 2)
    cleaner.cleanup()
    assert sorted(cleaner.claims.iterdir()) == []
    path.write_text(json.dumps({"host": cleaner.host, "pid": p.pid, "time": 0, "nonce": "old"}))
    marker.touch()  # and a waiting `run` takes such a claim over (it planned the run for ever)
    os.utime(marker, (time.time() - MARKER_DEBRIS_S - 1,) * 2)
    seen = taker._read_claim(path)
    assert taker.take_over("r1", seen) and not cleaner.take_over("r1", seen)
    taker.release("r1")
    assert sorted(cleaner.claims.iterdir()) == []
    left = cleaner.claims / f".r1.claim.{cleaner.host}.{p.pid}.abc123.tmp"  # a taker killed as
    left.write_text("{")  # it wrote the claim: its temp file is removed
    cleaner.cleanup()
    assert sorted(cleaner.claims.iterdir()) == []


def test_a_run_whose_stale_claim_cannot_be_taken_yet_is_planned_again_after_a_pause(
        tmp_path, monkeypatch):
    """A `run` waiting on runs of a holder killed (kill -9) found their claims stale and planned
    them again; a claim it could not take over (its takeover marker left by a taker killed in
    between) came back at once, and was planned again without a pause: 6577 packs in 30 s, a
    core spinning, until Ctrl-C. A run planned again that comes back unclaimed waits the poll
    interval before the next plan."""
    import ssmrepro.engine as engine
    from ssmrepro.spec import load_spec
    from ssmrepro.sweep import expand

    run = expand(load_spec(_one_run_spec(tmp_path)), "smoke")[0]
    store = type("Unheld", (), {"is_done": lambda self, r: False,  # its holder is gone
                                "holder": lambda self, r: None})()
    tr = engine._Tracker(store, 1)
    tr.skipped.add(run.run_id)
    slept = []
    monkeypatch.setattr(engine.time, "sleep", slept.append)
    quiet = type("P", (), {"advance": lambda *a: None})()
    args = (tr, {run.run_id: run}, store, None, "cpu", quiet, 0, None, 7.0)
    first = engine._wait_for_others(*args, first_index=1)
    assert [p.runs for _, p in first] == [[run]] and slept == []
    tr.skipped.add(run.run_id)  # its pack came back: not claimed
    again = engine._wait_for_others(*args, first_index=2)
    assert [p.runs for _, p in again] == [[run]] and slept == [7.0]


def test_a_killed_plots_temp_files_are_removed_by_the_next_plot(tmp_path):
    """`plot` (or `figures`, `make figures` in the checkout) killed with kill -9 while it wrote
    a table or a figure left its temp file (`.figure.png.<host>.<pid>.<random>.tmp`) in the
    results folder; only a `run` of the spec removed it, so after `figures` it stayed in the
    committed results for ever. The next build of the folder removes those of dead writers
    (a live writer's stays), as the next front page removes its own."""
    import socket
    import subprocess
    import sys

    project = tmp_path / "proj"
    (project / "experiments" / "tests").mkdir(parents=True)
    (project / "ssmrepro").mkdir()
    (project / "experiments" / "catalogue.yaml").write_text(
        "papers: {tests: Tests}\ntargets:\n  - {id: t-spec, paper: tests, tier: 1, what: tiny}\n")
    _one_run_spec(project / "experiments" / "tests")
    env = {"SSMREPRO_ROOT": str(project)}
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    host = socket.gethostname()
    out = tmp_path / "out"
    root = out / "tests" / "t-spec"
    root.mkdir(parents=True)
    dead = [root / f".figure-smoke.png.{host}.{p.pid}.abc123.tmp",
            out / f".README.md.{host}.{p.pid}.abc123.tmp"]
    live = root / f".report-smoke.md.{host}.{os.getpid()}.abc123.tmp"
    for f in [*dead, live]:
        f.write_bytes(b"half")
    res = _invoke("plot", "t-spec", "--profile", "smoke", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    assert not dead[0].exists() and live.exists()
    res = _invoke("figures", "--no-rebuild", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    assert not dead[1].exists()


def test_the_front_page_reads_a_results_folder_while_no_build_writes_it(tmp_path, monkeypatch):
    """The front page read a spec's report three times (whose profile, verdicts, runs
    finished) and its table, one after another: a `plot` or `run` writing the folder between
    the reads gave a row of one build's verdicts beside another's count of runs finished. It
    reads each folder holding it (``folder_lock``), as builds do, so it waits for a build."""
    import fcntl

    from ssmrepro.plots import frontpage

    project = tmp_path / "proj"
    (project / "experiments" / "tests").mkdir(parents=True)
    (project / "ssmrepro").mkdir()
    (project / "experiments" / "catalogue.yaml").write_text(
        "papers: {tests: Tests}\ntargets:\n  - {id: t-spec, paper: tests, tier: 1, what: tiny}\n")
    _one_run_spec(project / "experiments" / "tests")
    env, out = {"SSMREPRO_ROOT": str(project)}, tmp_path / "out"
    res = _invoke("plot", "t-spec", "--profile", "smoke", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    root = out / "tests" / "t-spec"
    (root / "results-smoke.csv").write_text("run_id,profile\n")  # a table: the folder is read
    held, read = [], frontpage._report_text

    def report_text(report):
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return read(report)

    monkeypatch.setattr(frontpage, "_report_text", report_text)
    res = _invoke("figures", "--no-rebuild", "--out", out, env=env)
    assert res.exit_code == 0, res.output
    assert held and all(held), held


def test_a_bands_paper_legend_entry_belongs_to_no_single_hue(tmp_path, monkeypatch):
    """`bands` drew the legend's 'paper (hollow squares)' in the colour of the first hue with a
    paper value, listed right under it (cooper2026-fig4 and fig6: a TF-TF-blue square after
    TF-TF), so it read as TF-TF's paper values alone, though every hue's squares are drawn in
    its own colour: one grey entry after the hues says so, as the lines kind's paper × does."""
    from types import SimpleNamespace

    import pandas as pd
    from matplotlib.colors import to_hex

    from ssmrepro.plots import FigureContext, bands, parse_figure
    from ssmrepro.spec import PaperValue

    cells = pd.DataFrame({"label": ["A", "A", "B", "B"], "n_params": [10, 20, 10, 20],
                          "n_expected": 1, "n_ok": 1, "n_diverged": 0, "complete": True,
                          "test.acc": [0.2, 0.4, 0.5, 0.9]})
    spec = SimpleNamespace(id="t", title="t", aggregate=SimpleNamespace(reduce="mean"),
                           paper_values=[PaperValue(where={"label": h, "n_params": 20}, value=v)
                                         for h, v in (("A", 0.3), ("B", 0.8))])
    ctx = FigureContext(spec, "smoke", cells, ["label", "n_params"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(bands, "save_png", lambda fig, path, dpi: seen.extend(
        (h.get_label(), to_hex(h.get_markeredgecolor()))
        for h in fig.axes[0].get_legend().legend_handles))
    cfg = parse_figure({"kind": "bands", "hue": "label", "lo": None, "hi": None})
    assert bands.bands(ctx, cfg, tmp_path / "f.png")
    assert [name for name, _ in seen] == ["A", "B", "paper (hollow squares, the line's colour)"]
    assert seen[-1][1] not in {seen[0][1], seen[1][1]}, seen


def test_a_bars_figure_over_a_config_key_names_its_x_axis(tmp_path, monkeypatch):
    """A `bars` figure with `x: task.words` (cooper2026-fig9 and fig10's accuracy.png) had no
    x-axis label: its ticks 32, 16, 8 said nothing of what they counted. Bars over the labels
    (their default) keep their unnamed axis: the ticks are the labels."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind

    cells = pd.DataFrame({"label": ["A", "B"], "task.words": [32, 16], "n_expected": 1,
                          "n_ok": 1, "n_diverged": 0, "complete": True, "test.acc": [1.0, 0.5]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "task.words"],
                        lambda stem, ext: tmp_path / ext)
    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.append(
        fig.axes[0].get_xlabel()))
    for x in ("task.words", "label"):
        assert kind.bars(ctx, parse_figure({"kind": "bars", "x": x}), tmp_path / "f.png")
    assert seen == ["words", ""], seen


def test_a_logx_lines_figure_keeps_its_x_values_as_ticks(tmp_path, monkeypatch):
    """A `lines` figure with `logx` over integer x values (yu2025-fig3's widths 2, 8, 32, 128,
    yu2025-tab1's h 1 ... 16) set its ticks at the values and then the log scale, which replaced
    them: the axis read 10^0, 10^1, 10^2 and no width could be read off; without `logx` the
    ticks were the values already."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, parse_figure
    from ssmrepro.plots import figures as kind

    cells = pd.DataFrame({"label": "S6", "model.d_model": [2, 8, 32, 128], "n_expected": 1,
                          "n_ok": 1, "n_diverged": 0, "complete": True,
                          "test.loss": [0.9, 0.7, 0.6, 0.5]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.d_model"],
                        lambda stem, ext: tmp_path / ext)
    seen = []

    def ticks(fig, path, dpi):
        fig.canvas.draw()
        ax = fig.axes[0]
        seen.append(([t.get_text() for t in ax.get_xticklabels()],
                     [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()],
                     ax.get_xscale()))

    monkeypatch.setattr(kind, "save_png", ticks)
    for logx in (True, False):
        cfg = parse_figure({"kind": "lines", "metric": "test.loss", "x": "model.d_model",
                            "hue": "label", "facet": None, "logx": logx, "ylim": None})
        assert kind.lines(ctx, cfg, tmp_path / "f.png")
    assert seen == [(["2", "8", "32", "128"], [], "log"), (["2", "8", "32", "128"], [], "linear")]


def test_a_curves_paper_legend_entry_belongs_to_no_single_hue(tmp_path, monkeypatch):
    """A `curves` figure with a `hue` draws each curve's paper value dotted in the curve's
    colour; its legend entry was the first such line (the first hue's colour) listed right
    under that hue (huang2025-tabA1-A4's curves.png: a blue dotted entry after `T=10, d=8`), as
    if only that curve had a paper value: one grey entry after the curves."""
    import pandas as pd
    from matplotlib.colors import to_hex

    import ssmrepro.plots.curves as curves_mod
    from ssmrepro.spec import PaperValue

    df = pd.DataFrame({"run_id": ["r0"] * 3 + ["r1"] * 3, "label": "S6", "seed": 0,
                       "status": "ok", "task.T": [10] * 3 + [20] * 3, "step": [0, 1, 2] * 2,
                       "samples": [0, 8, 16] * 2, "val.acc": [0.1, 0.5, 0.9, 0.1, 0.2, 0.3]})
    ctx = _curves_context(tmp_path, df)
    ctx.spec.paper_values = [PaperValue(where={"task.T": t}, metric="val.acc", value=v)
                             for t, v in ((10, 1.0), (20, 0.4))]
    seen = []
    monkeypatch.setattr(curves_mod, "save_png", lambda fig, path, **kw: seen.extend(
        (t.get_text(), to_hex(h.get_color())) for t, h in
        zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles)))
    cfg = curves_mod.CurvesConfig(kind="curves", series=["val.acc"], hue="task.T")
    assert curves_mod.curves(ctx, cfg, tmp_path / "f.png")
    names = [t for t, _ in seen]
    assert names == ["val.acc, T=10", "val.acc, T=20", "paper (dotted, the curve's colour)"], names
    assert seen[-1][1] not in {seen[0][1], seen[1][1]}, seen


def test_a_best_of_seeds_curve_is_one_seeds_curve(tmp_path, monkeypatch):
    """`curves` with `seeds: best` drew the best value of each step, joining seeds into a curve
    no run followed (huang2025-fig2's Mamba-2 κ = 4, d = 8: 0.18 at step 200 from seed 1, then
    seed 0's 0.55 and 0.585; seed 0, the cell's best, was at 0.017 at step 200). It draws the
    curve of the seed whose last value is best (lowest of a loss), a diverged seed's last finite
    value counting, as a cell's best of seeds is chosen by its final value."""
    import numpy as np
    import pandas as pd

    import ssmrepro.plots.curves as curves_mod

    nan = np.nan
    v = np.array([[0.0, 0.001, 0.007], [0.017, 0.1815, 0.0195], [0.5535, 0.3405, 0.0755],
                  [0.585, 0.314, 0.0835]])
    assert curves_mod.best_of_seeds(v, "val.acc").tolist() == v[:, 0].tolist()
    assert curves_mod.best_of_seeds(v, "val.loss").tolist() == v[:, 2].tolist()
    assert curves_mod.best_of_seeds(np.array([[0.9, 0.5], [0.1, nan]]), "val.loss").tolist() \
        == [0.9, 0.1]
    assert np.isnan(curves_mod.best_of_seeds(np.array([[nan, nan]]), "val.acc")).all()
    df = pd.DataFrame({"run_id": [f"r{s}" for s in range(3) for _ in range(4)], "label": "M2",
                       "seed": [s for s in range(3) for _ in range(4)], "status": "ok",
                       "step": [0, 200, 400, 600] * 3, "val.acc": v.T.ravel()})
    df["samples"] = df["step"] * 8
    ctx = _curves_context(tmp_path, df)
    seen = []
    monkeypatch.setattr(curves_mod, "save_png", lambda fig, path, **kw: seen.extend(
        ln.get_ydata().tolist() for ln in fig.axes[0].get_lines()))
    cfg = curves_mod.CurvesConfig(kind="curves", series=["val.acc"], seeds="best")
    assert curves_mod.curves(ctx, cfg, tmp_path / "f.png")
    assert seen == [v[:, 0].tolist()], seen


def test_a_haar_error_below_the_log_floor_is_said_to_be_drawn_on_it():
    """huang2025-figA1's panel (d) draws errors below 1e-9 at 1e-9 on its log axis; its legend
    said '(0 drawn at 1e-9)', but the sup error away from the jumps was 3.7e-22, 1.2e-65 and
    8.6e-218 before two zeros: a flat line at 1e-9 read as an error that stopped falling there.
    The legend counts every value drawn at the floor, the smallest positive one named."""
    from ssmrepro.plots.haar import _floored

    vals = [0.027, 1.2e-6, 3.67e-22, 1.24e-65, 8.64e-218, 0.0, 0.0]
    assert _floored(vals) == " (drawn at 1e-9: 3 below it, down to 8.6e-218 and 2 of 0)"
    assert _floored([0.5, 0.0]) == " (drawn at 1e-9: 1 of 0)"
    assert _floored([0.5, 1e-9, 2e-9]) == ""


def test_a_linear_bands_axis_of_counts_has_its_values_as_ticks(tmp_path, monkeypatch):
    """`bands` with `logx: false` over a count (cooper2026-fig12's attention heads 1, 2, 4, fig16's
    state dimension 1, 2, 6, 12) took matplotlib's ticks, 1.0, 1.5, 2.0, ... 4.0: heads that
    cannot be. Its ticks are the values, as the lines kind draws them; the log parameter axis
    keeps its plain log ticks."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.plots import FigureContext, bands, parse_figure

    cells = pd.DataFrame({"label": ["A", "A", "A", "R"], "model.heads": [1, 2, 4, 1],
                          "n_params": [10, 20, 40, 15], "n_expected": 1, "n_ok": 1,
                          "n_diverged": 0, "complete": True, "test.acc": [0.2, 0.4, 0.5, 0.3]})
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    ctx = FigureContext(spec, "smoke", cells, ["label", "model.heads"],
                        lambda stem, ext: tmp_path / ext)
    seen = []

    def ticks(fig, path, dpi):
        fig.canvas.draw()
        seen.append([t.get_text() for t in fig.axes[0].get_xticklabels()])

    monkeypatch.setattr(bands, "save_png", ticks)
    cfg = parse_figure({"kind": "bands", "hue": "label", "x": "model.heads", "logx": False,
                        "reference": ["R"], "lo": None, "hi": None})
    assert bands.bands(ctx, cfg, tmp_path / "f.png")
    assert seen == [["1", "2", "4"]], seen


def test_a_bound_grid_of_one_row_or_column_draws_its_theory_lines_at_their_values():
    """A `bound_grid` axis of one value put every value at that cell's centre: huang2025-figA3's
    one row (d = 32) drew Thm 2's d = κ + log₂|V| = 13 and Thm 3's d = 11 through it, as if the
    bounds were d = 32 (and said nothing of their lying below the grid); figA2's one column
    (κ = 4) drew each sloped line as a dash of no width. The one cell spans the range its edges
    give (v ± 0.5, or v / 1.5 .. 1.5 v on a log axis), so a line lands at its value."""
    import math

    from ssmrepro.plots.bounds import _edge_values, _pos

    assert _pos([32.0], 32.0, False) == 0.0
    assert _pos([32.0], 13.0, False) == -19.0  # below the grid: named so in the panel
    assert math.isclose(_pos([32.0], 48.0, True), 0.5)  # at the cell's upper edge
    for log in (False, True):
        lo, hi = _edge_values([4.0], log)
        assert math.isclose(_pos([4.0], lo, log), -0.5) and math.isclose(_pos([4.0], hi, log), 0.5)
    assert math.isclose(_pos([8.0, 16.0, 32.0], 12.0, True), math.log(1.5) / math.log(2))


def test_a_lines_legend_that_would_cover_a_point_is_drawn_beside_the_panel():
    """A `lines` legend where matplotlib's 'best' put it could still cover drawn points ('best'
    weighs line vertices, not markers): yu2025-fig5's figure3 legend of seven c values lay over
    the first points of three lines. Such a legend is drawn right of the panel; one clear of
    every point stays inside."""
    import matplotlib.pyplot as plt
    import numpy as np

    from ssmrepro.plots.figures import _legend_clear_of_points

    for spread, inside in ((True, False), (False, True)):
        fig, ax = plt.subplots(figsize=(4, 3))
        for k in range(7):  # points over the whole panel, or along its foot only
            ys = np.full(6, 10.0 ** k) if spread else np.full(6, 1.0 + 0.01 * k)
            ax.plot(np.arange(6), ys, marker="o", label=f"c{k}")
        ax.set_yscale("log") if spread else ax.set_ylim(0.9, 10)
        _legend_clear_of_points(ax, fontsize=8)
        fig.canvas.draw()
        box = ax.get_legend().get_window_extent()
        panel = ax.get_window_extent()
        assert (box.x0 < panel.x1) == inside, (spread, box, panel)
        plt.close(fig)


def test_a_mechanistic_ratio_near_zero_is_not_titled_as_a_signed_zero():
    """koren2026-fig3's untrained control was titled 'SNR -0.0' (its SNR is -0.01): one decimal
    kept the sign and lost the value. A ratio that one decimal would write as ±0.0 gets one
    significant digit; the others keep one decimal."""
    from ssmrepro.plots.mechanistic import _one_decimal

    assert [_one_decimal(v) for v in (-0.0022448963, 0.04, 10.1014, -0.1448, 0.0)] == [
        "-0.002", "0.04", "10.1", "-0.1", "0.0"]


def test_a_heatmap_says_what_its_blank_grey_squares_are(monkeypatch):
    """A `heatmaps` panel over x × y where some combinations have no cell (koren2026-fig7's
    N × Λ at constant Λ·N: 11 of 18 squares) drew them grey and blank with no word of what they
    were (a diverged cell, a missing value?): the title counts them as combinations that no
    cell of the profile has. A full grid says nothing more."""
    from types import SimpleNamespace

    import pandas as pd

    import ssmrepro.plots.figures as kind
    from ssmrepro.plots import FigureContext, parse_figure

    seen = []
    monkeypatch.setattr(kind, "save_png", lambda fig, path, dpi: seen.append(
        fig._suptitle.get_text()))
    spec = SimpleNamespace(id="t", title="t", paper_values=[],
                           aggregate=SimpleNamespace(reduce="mean"))
    cfg = parse_figure({"kind": "heatmaps", "metric": "val.acc", "x": "model.d_state",
                        "y": "model.n_layers"})
    for n_layers in ([1, 2], [1, 1]):  # a diagonal of a 2 × 2 grid; one full row
        cells = pd.DataFrame({"label": "A", "model.n_layers": n_layers, "model.d_state": [6, 3],
                              "n_expected": 1, "n_ok": 1, "n_diverged": 0, "complete": True,
                              "val.acc": [0.2, 0.3]})
        ctx = FigureContext(spec, "smoke", cells, ["label", "model.n_layers", "model.d_state"],
                            lambda stem, ext: None)
        assert kind.heatmaps(ctx, cfg, None)
    assert "grey, blank: 2 combinations of the axes that no cell of this profile has" in seen[0]
    assert "blank" not in seen[1], seen


def test_a_checks_difference_is_printed_on_its_own_side_of_its_bound():
    """An `ordering` FAILed by a worst difference of 0.0099 against a margin of 0.01 said
    `(ours: 0.010)`; a `spread` / `collapse` of 0.0504 over tol 0.05 `largest 0.050`, a fitted
    slope of -0.9496 against -1.0 ± 0.05 `-0.950`, an `any_threshold` best cell 0.94951 against
    `>= 0.95` `0.950`: each a FAIL beside a number on its bound. Two means of seeds equal but for
    their summation order (0.9, 0.8 and 0.85, 0.85) printed `ours: -1.11e-16` beside a PASS of
    `B >= A`, and a spread of 1.11e-16 beside `spread <= 0`: they are 0.000 now."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, markdown, verify

    def report(rows, keys, claims):
        runs = [SimpleNamespace(label=r["label"], seed=r.get("seed", 0),
                                coords={k: r[k] for k in keys[1:]},
                                flat=lambda r=r: {k: r[k] for k in keys[1:]}) for r in rows]
        df = pd.DataFrame([{**r, "run_id": f"r{i}", "status": "ok"} for i, r in enumerate(rows)])
        cells = aggregate(df, runs, "mean", ["test.acc"])
        spec = SimpleNamespace(id="t", alias=None, title="T", claim="c", claims=claims,
                               paper_values=[], notes=[], analytic=None,
                               aggregate=SimpleNamespace(reduce="mean"))
        verdicts = verify(spec, cells, keys)
        lines = [ln for ln in markdown(spec, "quick", cells, verdicts, len(df)).splitlines()
                 if ln.startswith("- **")]
        return [v.verdict for v in verdicts], lines

    ab = [{"label": "A", "test.acc": 0.9099}, {"label": "B", "test.acc": 0.9}]
    grid = [{"label": "A", "model.a": a, "model.b": b, "test.acc": v}
            for a, b, v in [(1, 2, 0.9504), (2, 1, 0.9), (1, 4, 0.6), (4, 1, 0.6)]]
    slope = [{"label": "A", "model.a": x, "test.acc": x ** -0.9496} for x in (1, 2, 4, 8)]
    ties = [{"label": "A", "seed": 0, "test.acc": 0.9}, {"label": "A", "seed": 1, "test.acc": 0.8},
            {"label": "B", "seed": 0, "test.acc": 0.85}, {"label": "B", "seed": 1, "test.acc": 0.85}]
    cases = [
        (ab, ["label"], {"check": "ordering", "a": {"label": "A"}, "b": {"label": "B"},
                         "margin": 0.01}, "FAIL", ["(ours: 0.0099)"]),
        (ab, ["label"], {"check": "any_threshold", "op": ">=", "value": 0.91}, "FAIL",
         ["(ours: 0.9099)"]),
        (grid[:2], ["label", "model.a", "model.b"],
         {"check": "spread", "group_by": ["label"], "tol": 0.05}, "FAIL",
         ["(largest 0.0504) (ours: 0.0504)"]),
        (grid, ["label", "model.a", "model.b"],
         {"check": "collapse", "by": "model.a * model.b", "tol": 0.05}, "FAIL",
         ["= 2: 0.0504, 4: 0.000;", "(ours: 0.0504)"]),
        (slope, ["label", "model.a"], {"check": "loglog_slope", "x": "model.a", "expected": -1.0,
                                       "tol": 0.05, "group_by": ["label"]}, "FAIL",
         ["fitted slope -0.9496 over 4 cells (ours: -0.9496)"]),
        (ties, ["label"], {"check": "ordering", "a": {"label": "B"}, "b": {"label": "A"}},
         "PASS", ["(ours: 0.000)"]),
        (ties, ["label"], {"check": "spread", "group_by": [], "tol": 0.0}, "PASS",
         ["(largest 0.000) (ours: 0.000)"]),
    ]
    for rows, keys, claim, verdict, needles in cases:
        verdicts, lines = report(rows, keys, [{"text": "c", "metric": "test.acc", **claim}])
        assert verdicts == [verdict], (claim, lines)
        for needle in needles:
            assert needle in lines[0], (claim, lines)
    # recall_frontier's ratio to the law, 2 decimals but on its side of ×factor
    from ssmrepro.report import fmt_beside
    assert [fmt_beside(r, 2.0, f"{r:.2f}") for r in (2.004, 1.996, 1.5)] == ["2.004", "1.996",
                                                                             "1.50"]


def test_a_selection_between_candidates_of_one_mean_does_not_follow_the_tables_row_order():
    """`aggregate.select` (max of val.acc over train.lr) between two learning rates whose seeds
    scored 0.1, 0.2, 0.3 and 0.3, 0.2, 0.1: pandas' sums of the two orders differ in the last
    bit, so the chosen rate followed the order of the table's rows (the store's records gave
    lr 0.1, the same rows in another order in a fresh clone's results.csv lr 0.2), and with it
    the cell's numbers and verdicts. Means equal but for rounding tie, and the first candidate
    in the sweep's order is kept."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate

    sel = SimpleNamespace(over="train.lr", by="val.acc", op="max")
    runs = [SimpleNamespace(coords={"train.lr": lr}, label="A", seed=s,
                            flat=lambda lr=lr: {"train.lr": lr})
            for lr in (0.1, 0.2) for s in (0, 1, 2)]
    acc = [0.1, 0.2, 0.3, 0.3, 0.2, 0.1]
    rows = [{"run_id": f"r{i}", "label": "A", "seed": r.seed, "train.lr": r.flat()["train.lr"],
             "status": "ok", "val.acc": a} for i, (r, a) in enumerate(zip(runs, acc))]
    for order in (rows, rows[::-1], rows[3:] + rows[:3]):
        cells = aggregate(pd.DataFrame(order), runs, "mean", ["val.acc"], select=sel)
        assert cells["train.lr"].tolist() == [0.1], order
    sel.op = "min"  # a lower mean still wins, whatever the order
    rows[5]["val.acc"] = 0.05
    for order in (rows, rows[::-1]):
        cells = aggregate(pd.DataFrame(order), runs, "mean", ["val.acc"], select=sel)
        assert cells["train.lr"].tolist() == [0.2], order


def test_a_paper_value_is_printed_with_the_digits_it_is_given():
    """yu2025-tab1's paper values have 4 decimals (0.8154 ± 0.01): report.md printed the paper's
    0.815 beside our 0.8053 as `| 0.815 | 0.805 | differs |`, numbers 0.010 apart, on the
    tolerance, beside `differs`. A paper value is printed as written where 3 decimals drop its
    digits (0.8154); others keep 3 decimals (0.950)."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, markdown, verify

    runs = [SimpleNamespace(label=lab, coords={}, seed=0, flat=lambda: {}) for lab in "AB"]
    df = pd.DataFrame([{"run_id": f"r{i}", "label": lab, "seed": 0, "status": "ok",
                        "test.acc": v} for i, (lab, v) in enumerate(zip("AB", [0.8053, 0.9]))])
    cells = aggregate(df, runs, "mean", ["test.acc"])
    pvs = [SimpleNamespace(where={"label": "A"}, metric="test.acc", value=0.8154, tol=0.01),
           SimpleNamespace(where={"label": "B"}, metric="test.acc", value=0.95, tol=0.05)]
    spec = SimpleNamespace(id="t", alias=None, title="T", claim="c", claims=[],
                           paper_values=pvs, notes=[], analytic=None,
                           aggregate=SimpleNamespace(reduce="mean"))
    verdicts = verify(spec, cells, ["label"])
    text = markdown(spec, "quick", cells, verdicts, len(df))
    assert "| label=A: test.acc (tol 0.01) | 0.8154 | 0.805 | differs |" in text, text
    assert "| label=B: test.acc (tol 0.05) | 0.950 | 0.900 | match |" in text, text


def test_a_figures_cell_number_is_printed_on_its_own_side_of_its_threshold(tmp_path,
                                                                             monkeypatch):
    """huang2025-figA4's committed bound_grid wrote 0.98987 as `0.990` in a cell without the
    white frame of `solved: 0.99` (its legend: `white frame: ≥ 0.99`), beside a framed 0.99023
    also `0.990`; a mean 0.99 but for rounding had no frame. chen2025-fig4's phase panel wrote a
    cell of 0.4702 beside the paper's .42 ± .05 as `.47`, within the tolerance, in the red
    outline of a cell that differs. Each number keeps the digits that place it; a value on the
    threshold but for rounding is framed."""
    import matplotlib.axes
    import matplotlib.patches
    from test_checks import Run
    from test_outputs import _ctx, _draw

    from ssmrepro.spec import PaperValue

    said: list[str] = []
    text = matplotlib.axes.Axes.text
    monkeypatch.setattr(matplotlib.axes.Axes, "text",
                        lambda self, x, y, s, *a, **k: said.append(str(s)) or text(
                            self, x, y, s, *a, **k))
    frames: list[tuple] = []
    patch = matplotlib.axes.Axes.add_patch

    def add_patch(self, p):
        if isinstance(p, matplotlib.patches.Rectangle) and not p.get_fill():
            frames.append(p.get_xy())
        return patch(self, p)

    monkeypatch.setattr(matplotlib.axes.Axes, "add_patch", add_patch)
    runs = [Run("S6", {"task.kappa": k, "model.d_model": 8}) for k in (1, 2, 3, 4)]
    ctx = _ctx(tmp_path, runs, [0.98987, 0.99023, 0.9899999999999999, 0.5])
    assert _draw(ctx, {"kind": "bound_grid", "x": "task.kappa", "y": "model.d_model"},
                 tmp_path / "g.png")
    assert [s for s in said if s.startswith("0.")] == ["0.9899", "0.9902", "0.990", "0.50"], said
    assert [round(x) for x, _ in frames] == [1, 2], frames  # 0.99023, 0.99 - 1e-16 framed
    said.clear()
    runs = [Run("", {"model.init.gamma": g, "model.repeat": 2}) for g in (0.5, 0.6)]
    ctx = _ctx(tmp_path, runs, [0.4702, 0.4698])
    ctx.spec.paper_values = [PaperValue(where={"model.init.gamma": g, "model.repeat": 2},
                                        value=0.42, tol=0.05) for g in (0.5, 0.6)]
    assert _draw(ctx, {"kind": "phase", "x": "model.init.gamma", "y": "model.repeat",
                       "panels": [{"metric": "test.acc"}]}, tmp_path / "p.png")
    assert ".4702" in said and ".4698" in said and ".42" in said, said


def test_a_negative_zero_is_printed_as_zero():
    """A claim on `-test.loss` (a loss negated, as size_order's refusal suggests) of a cell whose
    loss is 0 said `(ours: -0.000)` beside the table's `0.000`: one value, two signs. Zero is
    printed `0.000` whatever its sign; a small negative value keeps it."""
    from ssmrepro.report import fmt_beside, fmt_value

    assert [fmt_value(x) for x in (-0.0, 0.0, -1e-9, -0.25)] == ["0.000", "0.000", "-1e-09",
                                                                 "-0.250"]
    assert fmt_beside(-0.0, -0.1) == "0.000"


def test_a_selections_cell_not_finished_says_its_kept_candidate_is_in():
    """`aggregate.select` over train.lr with lr 0.1's three seeds in and lr 0.2's one of three:
    the cell is not finished (the choice could change), but its paper value read `0.900 (3 of 3
    runs finished) | unfinished` and its claim `1 of 1 needed cells not finished` beside a table
    row of n_ok 3 of n_expected 3. Both say that the kept candidate's runs are in and the other
    candidates' are not."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, markdown, verify

    sel = SimpleNamespace(over="train.lr", by="val.loss", op="min")
    runs = [SimpleNamespace(coords={"train.lr": lr}, label="A", seed=s,
                            flat=lambda lr=lr: {"train.lr": lr})
            for lr in (0.1, 0.2) for s in (0, 1, 2)]
    df = pd.DataFrame([{"run_id": f"{lr}-{s}", "label": "A", "seed": s, "train.lr": lr,
                        "status": "ok", "val.loss": lr, "test.acc": 0.9}
                       for lr in (0.1, 0.2) for s in (0, 1, 2) if lr == 0.1 or s == 0])
    cells = aggregate(df, runs, "mean", ["test.acc", "val.loss"], select=sel)
    spec = SimpleNamespace(id="t", alias=None, title="T", claim="c", notes=[], analytic=None,
                           claims=[{"text": "solves", "op": ">=", "value": 0.85}],
                           paper_values=[SimpleNamespace(where={"label": "A"}, metric="test.acc",
                                                         value=0.9, tol=0.05)],
                           aggregate=SimpleNamespace(reduce="mean"))
    verdicts = verify(spec, cells, ["label"])
    assert [v.verdict for v in verdicts] == ["unfinished", "MISSING"]
    text = markdown(spec, "quick", cells, verdicts, len(df), aggregate(df, runs, "mean", []))
    assert ("| 0.900 (3 of 3 runs of the candidate kept so far finished; the other candidates' "
            "runs not all) | unfinished |") in text, text
    assert ("1 of 1 needed cells not finished (1 of them: every run of the candidate kept so "
            "far finished, not every candidate's)") in text, text


def test_a_monotone_violation_names_its_values_with_the_digits_that_show_it():
    """A `monotone` claim FAILed `1 violations in 1 steps (1→2)` on 0.9504 → 0.9496, which the
    report's table shows as 0.950 and 0.950, a plateau; with tol 0.01 a step 0.9504 → 0.9403
    read as 0.950 and 0.940, a drop on the tolerance. Each violation names its values, with
    the digits that keep them a violation (`1→2: 0.9504→0.9496`)."""
    from types import SimpleNamespace

    import pandas as pd

    from ssmrepro.report import aggregate, verify

    for vals, tol, want in (((0.9504, 0.9496), 0.0, "1→2: 0.9504→0.9496"),
                            ((0.9504, 0.9403), 0.01, "1→2: 0.9504→0.9403"),
                            ((0.9, 0.5), 0.01, "1→2: 0.900→0.500")):
        runs = [SimpleNamespace(label="A", seed=0, coords={"model.x": x},
                                flat=lambda x=x: {"model.x": x}) for x in (1, 2)]
        df = pd.DataFrame([{"run_id": f"r{x}", "label": "A", "seed": 0, "model.x": x,
                            "status": "ok", "test.acc": v} for x, v in zip((1, 2), vals)])
        spec = SimpleNamespace(claims=[{"check": "monotone", "text": "rises", "along": "model.x",
                                        "metric": "test.acc", "tol": tol}],
                               paper_values=[], claim="c")
        [v] = verify(spec, aggregate(df, runs, "mean", ["test.acc"]), ["label", "model.x"])
        assert v.verdict == "FAIL" and f"1 violations in 1 steps ({want})" in v.detail, v.detail
