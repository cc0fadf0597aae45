import math

import pytest

from ssmrepro.expr import ExprError, evaluate, names


def test_arithmetic_and_functions():
    env = {"task.kappa": 8, "model.d": 32}
    assert evaluate("2*task.kappa", env) == 16
    assert evaluate("ceil(8*ln(task.kappa))", env) == math.ceil(8 * math.log(8))
    assert evaluate("model.d // 16 + max(1, 2)", env) == 4
    assert names("ceil(8*ln(task.kappa)) + model.d") == {"task.kappa", "model.d"}
    assert evaluate("task.kappa <= model.d and not model.d < 0", env) is True
    assert evaluate("1 < task.kappa < 4", env) is False


@pytest.mark.parametrize(
    "bad",
    ["__import__('os')", "task.kappa.__class__", "[1, 2]", "lambda: 1", "open('x')",
     "task.kappa if 1 else 2", "'a' * 3"],
)
def test_rejects_anything_but_arithmetic(bad):
    with pytest.raises(ExprError):
        evaluate(bad, {"task.kappa": 1})


def test_unknown_name():
    with pytest.raises(ExprError, match="unknown name"):
        evaluate("task.nope + 1", {"task.kappa": 1})
