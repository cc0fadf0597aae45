"""The model zoo from a YAML spec: nested mixer configs validate, sweep, pack, train and record.

One tiny spec sweeps the generic backbone over every family (Mamba-2, three-conv Mamba-2, B2S6
inside a Mamba block, Mamba-Δᵀ, complex S4D, GPT-NeoX attention, cooper2026's hybrid); each run
must finish, lower its validation loss, and name the kernel path of each of its mixers.
"""

import json

import pytest
from helpers import write_spec

from ssmrepro.engine import run_experiment
from ssmrepro.spec import SpecError, load_spec
from ssmrepro.store import Store
from ssmrepro.sweep import expand

SSM = {"norm": "rmsnorm", "mixer": {"name": "mamba1", "d_state": 4}}
CASES = [
    {"label": "mamba2", "set": {"model.blocks.SSM.mixer": {"name": "mamba2", "d_state": 4, "heads": 2}}},
    {"label": "mamba2_3conv", "set": {"model.blocks.SSM.mixer": {"name": "mamba2_3conv", "d_state": 4}}},
    {"label": "b2s6-block", "set": {"model.blocks.SSM.mixer": {
        "name": "mamba1", "d_state": 4, "core": "b2s6", "blocks": 2, "complex_A": True,
        "A_init": "s4d_lin"}}},
    {"label": "delta_t", "set": {"model.blocks.SSM.mixer": {"name": "delta_t", "d_state": 4}}},
    {"label": "s4d_zoh", "set": {"model.blocks.SSM.mixer": {"name": "s4d_zoh", "d_state": 4}}},
    {"label": "neox", "set": {"model.layers": "TF"}},
    {"label": "cooper", "set": {"model": {"name": "cooper_hybrid", "d_model": 8, "layers": "SSM-TF"}}},
]


def _spec(tmp_path, **over):
    kw = dict(
        model={"name": "seq_lm", "d_model": 8, "layers": "SSM", "pos": "learned",
               "blocks": {"SSM": SSM, "TF": {"kind": "neox", "heads": 2, "window": 4}}},
        train={"optimizer": "adamw", "lr": 0.01, "batch_size": 16, "max_steps": 60,
               "val_size": 64, "test_size": 64, "eval_every": 30, "eval_batch_size": 64},
        sweep=[{"cases": CASES}], seeds=[0, 1])
    kw.update(over)
    return write_spec(tmp_path, name="zoo", **kw)


def test_every_family_trains_from_a_spec_and_records_its_kernels(tmp_path):
    spec = load_spec(_spec(tmp_path))
    runs = expand(spec, "quick")
    assert len(runs) == len(CASES) * 2
    assert len({r.run_id for r in runs}) == len(runs)
    summary = run_experiment(spec, "quick", out=tmp_path / "out", workers=1)
    assert summary is not None
    store = Store(tmp_path / "out" / spec.paper / spec.id)
    recs = [json.loads(f.read_text()) for f in store.runs.glob("*.json")]
    assert len(recs) == len(runs)
    for rec in recs:
        assert rec["status"] == "ok", (rec["label"], rec.get("error"))
        first, last = rec["history"][0]["val.loss"], rec["history"][-1]["val.loss"]
        assert last < first, (rec["label"], first, last)  # validation loss went down
        assert rec["kernels"] and all(v.startswith("torch:") for v in rec["kernels"].values())
    by_label = {r["label"]: r["kernels"] for r in recs}
    assert "Mamba2Mixer" in by_label["mamba2"] and "B2S6Core" in by_label["b2s6-block"]
    assert "NeoXAttention" in by_label["neox"] and "S6Core" in by_label["cooper"]


@pytest.mark.parametrize("bad,where", [
    ({"name": "mamba2", "d_state": 4, "nope": 1}, "nope"),
    ({"name": "mamba9"}, "mamba9"),
    ({"name": "mamba1", "core": "b2s6", "dt_rank": 3}, "b2s6"),
])
def test_bad_nested_mixer_is_a_spec_error_naming_the_problem(tmp_path, bad, where):
    path = _spec(tmp_path, sweep=[{"cases": [{"label": "x", "set": {"model.blocks.SSM.mixer": bad}}]}])
    with pytest.raises(SpecError) as err:
        expand(load_spec(path), "quick")
    assert where in str(err.value) and "model" in str(err.value)
