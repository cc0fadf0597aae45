from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("SSMREPRO_ROOT", str(ROOT))
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


PYTHON = sys.executable
