"""Shared fixtures for the LRA data tests: a scratch copy of tests/assets/lra as a data root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "lra"


@pytest.fixture
def lra_root(tmp_path: Path) -> Path:
    """A writable data root laid out like the official sources (a few KB)."""
    root = tmp_path / "root"
    shutil.copytree(ASSETS, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


@pytest.fixture
def empty_root(tmp_path: Path) -> Path:
    root = tmp_path / "empty"
    root.mkdir()
    return root
