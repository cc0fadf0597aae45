"""Library (data): Long Range Arena datasets: loaders, offline generators, explicit downloads.

- ``load_lra(dataset, split, root=None, accept_sources=None, **preprocessing) -> LRADataset``
  (datasets.py); ``DATASETS``: dataset name -> its data sources. Every loaded dataset names its
  source (``lra_release``, ``generated``, ``download:cifar10``, ``download:imdb``,
  ``proxy:fashion_mnist32``, ``proxy:digits``). The training tasks built on them live in
  ``ssmrepro.tasks.lra``.
- Generators: ``generate_listops`` (listops.py), ``generate_pathfinder`` (pathfinder.py).
- CLI: ``ssmrepro data download | generate | info`` (cli.py).

Nothing is downloaded or generated implicitly; missing data raises ``DataUnavailable``.
"""

from __future__ import annotations

from .datasets import DATASETS, DatasetDef, LRADataset, dataset_config, load_lra
from .listops import generate_listops, listops_value, tokenize_listops
from .pathfinder import generate_pathfinder, lra_params, pathfinder_oracle
from .sources import (
    ALL_SOURCES,
    CIFAR10,
    DIGITS,
    FASHION_MNIST32,
    GENERATED,
    IMDB,
    LRA_RELEASE,
    DataUnavailable,
)

__all__ = [
    "ALL_SOURCES",
    "CIFAR10",
    "DIGITS",
    "FASHION_MNIST32",
    "GENERATED",
    "IMDB",
    "DATASETS",
    "LRA_RELEASE",
    "DataUnavailable",
    "DatasetDef",
    "LRADataset",
    "dataset_config",
    "generate_listops",
    "generate_pathfinder",
    "listops_value",
    "load_lra",
    "lra_params",
    "pathfinder_oracle",
    "tokenize_listops",
]
