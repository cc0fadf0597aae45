"""Tool (bench): benchmarks outside the pipeline.

``packs`` = packed vs one-at-a-time run-steps/s of the engine's
training step; ``scans`` = the fast scans against their sequential references."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..signals import current_folder_or_exit, load_guarded, run_guarded
from ..util import os_message

# what a command holds a benchmark folder for (``util.folder_lock``) while it writes a record's
# files, or draws and tabulates the records (`bench roofline`): each sees one set of records
RECORDS_LOCK = "writing the benchmark records of"


def _load() -> None:
    """What ``scans`` and ``step`` import (torch, the kernels, the timer): their start-up."""
    current_folder_or_exit()  # before torch, which cannot load there
    from ..kernels import conv, inplace, scan, ssd, xent  # noqa: F401
    from ..tasks import base  # noqa: F401
    from ..util import atomic_write_text  # noqa: F401
    from . import legacy, timing  # noqa: F401


# `python -m ssmrepro.bench.scans` (or .step) imports this package before the module runs (while
# sys.argv[0] is '-m'): its start-up is loaded here, guarded as `python -m ssmrepro`'s is (a
# SIGTERM there died with exit 143, a Ctrl-C printed a traceback); the module's main then runs
# guarded too (bench_main)
if sys.argv[:1] == ["-m"]:
    load_guarded(_load)


def bench_main(main: Callable[[], int]) -> None:
    """``python -m ssmrepro.bench.NAME``: ``main()``, where a Ctrl-C or `kill PID` ends with one
    line and exit 130, and a path it cannot use (``--json`` naming a folder, a read-only or
    full disk) with the message and exit 2 of ``ssmrepro bench NAME`` (a traceback)."""

    def run() -> int:
        try:
            return main()
        except OSError as err:
            sys.stderr.write(f"error: {os_message(err)}\n")
            return 2

    raise SystemExit(run_guarded(run, "interrupted — the benchmark stopped before its end (a "
                                      "--json record is written only then); re-run the same "
                                      "command"))
