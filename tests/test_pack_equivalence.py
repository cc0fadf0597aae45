"""A pack of E members trains exactly like each member alone (float64, CPU)."""

import math

import pytest
import torch
from helpers import write_spec

from ssmrepro.spec import load_spec
from ssmrepro.sweep import expand
from ssmrepro.train import train_pack


@pytest.mark.parametrize(
    "model",
    [
        {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "pe": "index"},
        {"name": "ssm_lm", "mixer": "s4d", "d_model": 8, "d_state": 4},
        {"name": "transformer_lm", "d_model": 8, "heads": 2},
    ],
    ids=["s6", "s4d", "transformer"],
)
def test_pack_equals_members_alone(tmp_path, model):
    spec = load_spec(
        write_spec(
            tmp_path,
            model=model,
            train={"optimizer": "adamw", "lr": 0.01, "batch_size": 8, "max_steps": 30,
                   "val_size": 32, "test_size": 32, "eval_every": 10, "dtype": "float64",
                   "weight_decay": 0.01, "train_size": 64,
                   "early_stop": {"metric": "val.acc", "op": ">", "threshold": 1.0}},
            sweep=[{"zip": {"train.lr": [0.01, 0.003, 0.02], "train.grad_clip": [0.5, 1.0, None],
                            "train.max_steps": [30, 20, 25],
                            "train.label_smoothing": [0.0, 0.1, 0.0]}}],
            seeds=[5],
        )
    )
    runs = expand(spec, "paper")
    assert len({r.pack_key() for r in runs}) == 1  # members differ only in member-level fields
    keep = {}
    packed = train_pack(runs, keep=keep)
    pm = keep["model"]
    for e, r in enumerate(runs):
        k1 = {}
        alone = train_pack([r], keep=k1)[0]
        for (name, p), q in zip(pm.named_parameters(), k1["model"].parameters()):
            torch.testing.assert_close(p[e : e + 1], q, rtol=1e-9, atol=1e-11, msg=name)
        for key, v in alone["metrics"].items():
            assert math.isclose(v, packed[e]["metrics"][key], rel_tol=1e-9, abs_tol=1e-12), key
        assert alone["stop_step"] == packed[e]["stop_step"] == r.train.max_steps
        assert len(alone["history"]) == len(packed[e]["history"])
        for ha, hp in zip(alone["history"], packed[e]["history"]):
            assert ha == pytest.approx(hp, rel=1e-9, abs=1e-12)


def test_diverging_member_is_recorded_and_others_continue(tmp_path):
    spec = load_spec(write_spec(tmp_path, sweep=[{"grid": {"train.lr": [0.01, 1.0e12]}}],
                                seeds=[0]))
    runs = expand(spec, "paper")
    res = train_pack(runs)
    assert res[0]["status"] == "ok" and math.isfinite(res[0]["metrics"]["test.acc"])
    assert res[1]["status"] == "diverged"
    assert res[1]["stop_reason"] == "diverged" and res[1]["stop_step"] < 40


def test_early_stop_freezes_member(tmp_path):
    spec = load_spec(write_spec(
        tmp_path,
        train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 40, "val_size": 16,
               "test_size": 16, "eval_every": 5,
               "early_stop": {"metric": "val.loss", "op": "<", "threshold": 100.0}},
        sweep=[], seeds=[0]))
    res = train_pack(expand(spec, "paper"))
    assert res[0]["stop_reason"] == "early_stop" and res[0]["stop_step"] == 0


@pytest.mark.parametrize("micro", [1, 3, 4])
@pytest.mark.parametrize(
    "model",
    [
        {"name": "ssm_lm", "mixer": "s6", "d_model": 8, "d_state": 4, "pe": "index"},
        {"name": "mamba_lm", "d_model": 8, "d_state": 4, "d_conv": 2},
    ],
    ids=["s6", "mamba"],
)
def test_micro_batches_give_the_same_training(tmp_path, model, micro):
    """A pack trained in micro-batches of ``micro`` sequences (gradient accumulation) ends with
    the parameters and metrics of the same pack trained on whole batches (float64)."""
    spec = load_spec(write_spec(
        tmp_path, model=model,
        train={"optimizer": "adamw", "lr": 0.01, "batch_size": 8, "max_steps": 12, "val_size": 16,
               "test_size": 16, "eval_every": 6, "dtype": "float64", "weight_decay": 0.01,
               "label_smoothing": 0.1, "grad_clip": 0.5},
        sweep=[{"zip": {"train.lr": [0.01, 0.003]}}], seeds=[3]))
    runs = expand(spec, "paper")
    whole, parts = {}, {}
    a = train_pack(runs, keep=whole)
    b = train_pack(runs, keep=parts, micro_batch=micro)
    for (name, p), q in zip(whole["model"].named_parameters(), parts["model"].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-11, msg=name)
    for ra, rb in zip(a, b):
        for key, v in ra["metrics"].items():
            assert math.isclose(v, rb["metrics"][key], rel_tol=1e-9, abs_tol=1e-12), key


def test_micro_batches_are_refused_for_batchnorm(tmp_path):
    model = {"name": "seq_lm", "d_model": 8, "layers": "S",
             "blocks": {"S": {"mixer": {"name": "s4d", "d_state": 4}, "norm": "batchnorm"}}}
    spec = load_spec(write_spec(tmp_path, model=model, sweep=[], seeds=[0]))
    with pytest.raises(ValueError, match="BatchNorm"):
        train_pack(expand(spec, "paper"), micro_batch=2)
def test_gamma_init_is_member_level_pack_equals_alone(tmp_path):
    """chen2025: the γ axis of a phase diagram trains as one pack (init is member-level), with
    named evaluation sets in the history; each member equals its run alone (float64)."""
    mamba2 = {"name": "seq_lm", "d_model": 8, "layers": ["SSM"], "repeat": 2,
              "blocks": {"SSM": {"mixer": {"name": "mamba2", "d_state": 4}, "norm": "rmsnorm"}},
              "final_norm": "rmsnorm", "init": {"scheme": "gamma", "gamma": 0.5}}
    spec = load_spec(write_spec(
        tmp_path, task={"name": "composite"}, model=mamba2,
        train={"optimizer": "adamw", "lr": 0.01, "batch_size": 8, "max_steps": 12,
               "val_size": 16, "test_size": 16, "eval_every": 6, "dtype": "float64",
               "evals": {"c43": {"test_pair": "43"}}},
        sweep=[{"grid": {"model.init.gamma": [0.5, 1.0, 2.0]}}], seeds=[0, 1]))
    runs = expand(spec, "paper")
    assert len(runs) == 6 and len({r.pack_key() for r in runs}) == 1
    assert len({r.run_id for r in runs}) == 6
    other = expand(load_spec(write_spec(
        tmp_path, name="t-other", task={"name": "composite"}, model={**mamba2, "d_model": 10},
        train={"max_steps": 2}, sweep=[], seeds=[0])), "paper")[0]
    assert other.pack_key() != runs[0].pack_key()  # shapes still split packs
    keep = {}
    packed = train_pack(runs, keep=keep)
    assert {"c43.acc", "c43.loss", "val.acc", "train.acc"} <= set(packed[0]["history"][0])
    for e in (0, 3, 5):
        k1 = {}
        alone = train_pack([runs[e]], keep=k1)[0]
        for (name, p), q in zip(keep["model"].named_parameters(), k1["model"].parameters()):
            torch.testing.assert_close(p[e : e + 1], q, rtol=1e-9, atol=1e-11, msg=name)
        for ha, hp in zip(alone["history"], packed[e]["history"]):
            assert ha == pytest.approx(hp, rel=1e-9, abs=1e-12)
    from ssmrepro.models import build_model
    from ssmrepro.tasks import build_task

    init = build_model(runs[0].model, build_task(runs[0].task).info, len(runs),
                       list(range(len(runs))), members=[r.model for r in runs])
    for e, r in enumerate(runs):  # untrained: embedding std = V^-γ per member (V = 128)
        assert abs(float(init.embed.weight[e].detach().std()) / 128 ** -r.model.init.gamma - 1) < 0.1
