"""Hostile and careless input (issue 11): every probe ends in a clear message with exit 2, a
recovered run with a warning, or a bounded refusal — never a traceback, a hang, a write outside
``--out`` or a silent wrong result."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, write_spec
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


def _project(tmp_path) -> Path:
    """A copy of the shipped experiments/ as its own project root."""
    root = tmp_path / "proj"
    shutil.copytree(ROOT / "experiments", root / "experiments")
    (root / "ssmrepro").mkdir()
    return root


def _edit(path: Path, **kw):
    raw = yaml.safe_load(path.read_text())
    raw.update(kw)
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))


def test_duplicate_ids_and_aliases_are_rejected(tmp_path):
    root = _project(tmp_path)
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
    _edit(fig1, alias="koren2026-fig6")  # an alias hijacking another spec's id
    _assert_refused(_invoke("validate", "--all", env=env), "is the id of")
    res = _invoke("show", "koren2026-fig6", env=env)  # the id still means the id
    _assert_refused(res, "is the id of")


def test_a_spec_whose_id_is_not_its_file_name_is_rejected(tmp_path):
    root = _project(tmp_path)
    _edit(root / "experiments/huang2025/huang2025-fig1.yaml", id="other-name")
    res = _invoke("validate", "--all", env={"SSMREPRO_ROOT": str(root)})
    _assert_refused(res, "must equal the file name")


def test_a_non_utf8_spec_is_a_message_and_does_not_break_list(tmp_path):
    root = _project(tmp_path)
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
