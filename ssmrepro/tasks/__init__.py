"""Library (tasks): the task registry, name -> Task class (each with its pydantic ``Config``).

Synthetic generators (``keep_nth``, ``mqar``, ``mqar_huang``, ``induction_heads``, chen2025's
``composite`` and ``inverse_matching``, cooper2026's ``selective_copy``, ``decode_recall``,
``multikey_recall`` and ``needle``, yu2025's ``cosine_operator``, ``first_abs`` and
``linear_functional``), next-byte language modelling on a user's text file (``text_corpus``,
yu2025 App. G) and the six LRA datasets (``lra_listops``, ``lra_text``,
``lra_retrieval``, ``lra_image``, ``lra_pathfinder``, ``lra_pathx``) share one interface
(``tasks.base``).
"""

from __future__ import annotations

from ..data import DataUnavailable
from .base import Batch, Task, TaskConfig, TaskInfo, eval_set_problem, incompatibility
from .composite import Composite
from .decode_recall import DecodeRecall
from .induction_heads import InductionHeads
from .inverse_matching import InverseMatching
from .keep_nth import KeepNth
from .lra import LRA_TASKS
from .mqar import MQAR
from .mqar_huang import MQARHuang
from .multikey_recall import MultiKeyRecall
from .needle import Needle
from .selective_copy import SelectiveCopy
from .text_corpus import TextCorpus
from .yu_synthetic import CosineOperator, FirstAbs, LinearFunctional

TASKS: dict[str, type[Task]] = {
    KeepNth.name: KeepNth,
    MQAR.name: MQAR,
    MQARHuang.name: MQARHuang,
    InductionHeads.name: InductionHeads,
    Composite.name: Composite,
    InverseMatching.name: InverseMatching,
    SelectiveCopy.name: SelectiveCopy,
    DecodeRecall.name: DecodeRecall,
    MultiKeyRecall.name: MultiKeyRecall,
    Needle.name: Needle,
    CosineOperator.name: CosineOperator,
    FirstAbs.name: FirstAbs,
    LinearFunctional.name: LinearFunctional,
    TextCorpus.name: TextCorpus,
    **{cls.name: cls for cls in LRA_TASKS},
}


def build_task(config: dict | TaskConfig) -> Task:
    """The task for a config (a validated ``TaskConfig`` or a dict with ``name``). Dataset tasks
    load their data here and raise ``DataUnavailable`` when it is missing."""
    if isinstance(config, TaskConfig):
        return TASKS[config.name](config)
    cls = TASKS[config["name"]]
    return cls(cls.Config(**config))


__all__ = ["TASKS", "Batch", "DataUnavailable", "Task", "TaskConfig", "TaskInfo", "build_task",
           "eval_set_problem", "incompatibility"]
