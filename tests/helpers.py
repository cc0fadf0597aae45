"""Helpers to build small specs on the fly for tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def spec_params(paths: list[Path]) -> list:
    """pytest params of spec files, named by their ids."""
    return [pytest.param(p, id=p.stem) for p in paths]


def write_spec(tmp_path: Path, name: str = "t-spec", **overrides) -> Path:
    """A copy of huang2025-tab1 with tiny settings; ``overrides`` replace top-level keys."""
    raw = yaml.safe_load((ROOT / "experiments/huang2025/huang2025-tab1.yaml").read_text())
    raw.update(
        id=name,
        alias=None,
        paper="tests",
        task={"name": "keep_nth", "n": 2, "T": 8, "vocab": 8},
        model={"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "pe": "index"},
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 40, "val_size": 32,
               "test_size": 64, "eval_every": 20, "eval_batch_size": 64},
        sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}},
                          {"label": "S4D", "set": {"model.mixer": "s4d"}}]}],
        seeds=[0, 1],
        paper_values=[],
        claims=[],
    )
    raw["profiles"] = {"smoke": {}, "quick": {}, "paper": {}}
    raw.update(overrides)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def two_profile_spec(tmp_path: Path) -> Path:
    """A spec whose profiles share runs: smoke (S6, S4D), quick (S6, S4D and 'wide') and extra
    (quick's 'wide' run under the label 'wider'): for tables completed from other profiles'."""
    cases = [{"label": "S6", "set": {"model.mixer": "s6"}},
             {"label": "S4D", "set": {"model.mixer": "s4d"}}]
    wide = {"set": {"model.mixer": "s6", "model.d_model": 12}}
    return write_spec(
        tmp_path, seeds=[0],
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4, "val_size": 16,
               "test_size": 16, "eval_every": 2, "eval_batch_size": 16},
        profiles={"smoke": {"sweep": [{"cases": cases}]},
                  "quick": {"sweep": [{"cases": [*cases, {"label": "wide", **wide}]}]},
                  "extra": {"sweep": [{"cases": [{"label": "wider", **wide}]}]}, "paper": {}})


def stand_in_run(**fields):
    """A run for the report code built by hand (label, seed, coords, flat, ...): its own sweep
    point, its typed configs (task, model, train) objects of its own (``sweep.per_point`` knows a
    point by them, as the runs ``sweep.expand`` makes)."""
    from types import SimpleNamespace

    return SimpleNamespace(task=object(), model=object(), train=object(), **fields)
