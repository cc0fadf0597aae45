"""Run ids: stable under new neutral config fields, sensitive to every value that matters."""

from typing import Literal

from ssmrepro.models import SSMLMConfig
from ssmrepro.spec import find_spec
from ssmrepro.sweep import CODE_VERSION, expand
from ssmrepro.sweep.config import _hash


def _id(run) -> str:
    return _hash({**run.identity(), "code": CODE_VERSION})


def test_new_field_at_its_default_keeps_the_run_id():
    run = expand(find_spec("keep-nth"), "quick")[0]

    class Grown(SSMLMConfig):  # the same config class after someone added an option
        name: Literal["ssm_lm"] = "ssm_lm"
        new_option: int = 7

    grown = Grown(**run.model.model_dump())
    run2 = expand(find_spec("keep-nth"), "quick")[0]
    run2.model = grown
    assert _id(run) == _id(run2) == run.run_id
    run2.model = Grown(**{**run.model.model_dump(), "new_option": 8})
    assert _id(run2) != run.run_id


def test_ids_differ_by_seed_task_model_and_train_values_and_names():
    runs = expand(find_spec("keep-nth"), "quick")
    assert len({r.run_id for r in runs}) == len(runs)
    r = runs[0]
    base = _id(r)
    for section, field, value in [("model", "d_state", r.model.d_state + 1), ("task", "T", r.task.T + 1),
                                  ("train", "lr", r.train.lr * 2)]:
        cfg = getattr(r, section)
        setattr(r, section, cfg.model_copy(update={field: value}))
        assert _id(r) != base, field
        setattr(r, section, cfg)
    assert _id(r) == base
    ident = r.identity()
    assert ident["model"]["name"] == "ssm_lm" and ident["task"]["name"] == "keep_nth"


def test_nested_configs_keep_their_type_tags():
    """Two mixers whose non-default fields agree ({d_state: 4}) must not share a run id: every nested
    model's name / single-valued Literal tag is part of the identity."""
    from ssmrepro.models import SeqLMConfig
    from ssmrepro.sweep import lean

    def cfg(mixer):
        return SeqLMConfig(layers="SSM", blocks={"SSM": {"mixer": {"name": mixer, "d_state": 4}}})

    a, b = lean(cfg("delta_t")), lean(cfg("s4d_zoh"))
    assert a != b
    assert a["blocks"]["SSM"]["mixer"] == {"name": "delta_t", "d_state": 4}
    assert a["blocks"]["SSM"]["kind"] == "mixer"
