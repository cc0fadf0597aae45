"""Long Range Arena data: loaders for the six tasks, offline generators, explicit downloads.

- ``load_lra(task, split, root=None, accept_sources=None, **preprocessing) -> LRADataset``
  (datasets.py); every dataset names its source (``lra_release``, ``generated``,
  ``download:cifar10``, ``download:imdb``, ``proxy:fashion_mnist32``).
- Generators: ``generate_listops`` (listops.py), ``generate_pathfinder`` (pathfinder.py).
- CLI: ``ssmrepro data download | generate | info`` (cli.py).

Nothing is downloaded or generated implicitly; missing data raises ``DataUnavailable``.
"""

from __future__ import annotations

from .datasets import TASKS, LRADataset, load_lra, task_config
from .listops import generate_listops, listops_value, tokenize_listops
from .pathfinder import generate_pathfinder, lra_params, pathfinder_oracle
from .sources import (
    ALL_SOURCES,
    CIFAR10,
    FASHION_MNIST32,
    GENERATED,
    IMDB,
    LRA_RELEASE,
    DataUnavailable,
    resolve_data_root,
)

__all__ = [
    "ALL_SOURCES",
    "CIFAR10",
    "FASHION_MNIST32",
    "GENERATED",
    "IMDB",
    "LRA_RELEASE",
    "TASKS",
    "DataUnavailable",
    "LRADataset",
    "generate_listops",
    "generate_pathfinder",
    "listops_value",
    "load_lra",
    "lra_params",
    "pathfinder_oracle",
    "resolve_data_root",
    "task_config",
    "tokenize_listops",
]
