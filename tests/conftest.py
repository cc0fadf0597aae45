from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# rich's consoles (ssmrepro.cli.app) fix their width when COLUMNS is set at import: a test
# session started with COLUMNS exported (pytest-xdist's workers, some terminals) printed every
# table 80 columns wide whatever width a test then asked for with CliRunner(env={"COLUMNS": ..})
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)


def isolate_env(environ) -> None:
    """The suite's project and defaults are this checkout's, whatever the user exported: with
    SSMREPRO_ROOT naming another checkout `make test` ran the CLI on that one's specs and
    results (it was only a default here), and SSMREPRO_OUT, SSMREPRO_DATA, SSMREPRO_DEVICE or
    SSMREPRO_WORKERS set for the user's own runs made commands without --out read (and write)
    that results folder, another data root, device or worker count (`list --json` found no
    huang2025-tab1 table). SSMREPRO_THREADS, a CPU budget, is kept."""
    environ["SSMREPRO_ROOT"] = str(ROOT)
    for name in ("SSMREPRO_OUT", "SSMREPRO_DATA", "SSMREPRO_DEVICE", "SSMREPRO_WORKERS"):
        environ.pop(name, None)


isolate_env(os.environ)
# the planner's cost cache: per test session, never the user's ~/.cache
os.environ["SSMREPRO_CACHE"] = tempfile.mkdtemp(prefix="ssmrepro-cache-")
torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cli_env(tmp_path):
    """Environment for running the CLI as a subprocess against the repo's experiments/."""
    env = dict(os.environ, SSMREPRO_ROOT=str(ROOT), PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="session")
def smoke_data_root(tmp_path_factory) -> Path:
    """A data root for the specs' smoke profiles (built once per session, a few seconds): the
    ListOps fixture as the LRA release's listops-1000, 300 generated 32x32 Pathfinder images
    (data/generated/pathfinder32/curv_contour_length_14), the 3 kB text of tests/assets/text
    as text/tiny.txt (text_corpus), and the 200-row digits fixture (proxy:digits, in
    scikit-learn's file format) as digits/digits.csv.gz."""
    from ssmrepro.data.pathfinder import write_pathfinder

    root = tmp_path_factory.mktemp("smoke-data")
    shutil.copytree(ROOT / "tests" / "assets" / "lra" / "lra" / "listops-1000",
                    root / "lra" / "listops-1000")
    write_pathfinder(root / "generated" / "pathfinder32" / "curv_contour_length_14", 300, 32, 0)
    (root / "text").mkdir()
    shutil.copy(ROOT / "tests" / "assets" / "text" / "tiny.txt", root / "text" / "tiny.txt")
    shutil.copytree(ROOT / "tests" / "assets" / "lra" / "digits", root / "digits")
    return root


PYTHON = sys.executable


@pytest.fixture(autouse=True)
def _new_command():
    """Each test starts as a new command (``util.new_command``): a warning said once per command
    (``util.first_time``) that an earlier test said is said again, whatever the tests' order."""
    util = sys.modules.get("ssmrepro.util")
    if util is not None:
        util.new_command()
    yield


@pytest.fixture(autouse=True)
def _close_figures():
    """Close the figures a test left open: tests that replace ``save_png`` (which closes the figure
    it writes) kept every figure they drew, and a run of the figure tests passed matplotlib's
    20 open figures ("More than 20 figures have been opened", a RuntimeWarning)."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")  # (never imports matplotlib for a test that did not)
    if plt is not None:
        plt.close("all")
