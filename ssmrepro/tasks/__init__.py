"""Library (tasks): the task registry, name -> Task class (each with its pydantic ``Config``).

Synthetic generators (``keep_nth``, ``mqar``) and the six LRA datasets (``lra_*``) share one
interface (``tasks.base``).
"""

from __future__ import annotations

from .base import Batch, Task, TaskConfig, TaskInfo
from .keep_nth import KeepNth
from .mqar import MQAR

TASKS: dict[str, type[Task]] = {
    KeepNth.name: KeepNth,
    MQAR.name: MQAR,
}


def build_task(config: dict | TaskConfig) -> Task:
    if isinstance(config, TaskConfig):
        return TASKS[config.name](config)
    cls = TASKS[config["name"]]
    return cls(cls.Config(**config))


__all__ = ["TASKS", "Batch", "Task", "TaskConfig", "TaskInfo", "build_task"]
