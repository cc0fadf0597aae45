"""Tool (cli): ``ssmrepro list | show | validate | run | plot | verify | export | figures |
list-models | list-tasks | list-figures | list-checks | list-spec | bench | data``.

One Typer app (``cli.app``); experiment commands in ``cli.experiments``, the LRA data commands
(``ssmrepro data ...``) in ``cli.data``; every command runs inside the error boundary
``cli.app.guard``.
"""

from __future__ import annotations

import sys

from ..signals import current_folder_or_exit, load_guarded


def _load():
    current_folder_or_exit()  # before torch, which cannot load there
    from ..util import blank_home_unset, unreadable_widths_unset

    blank_home_unset()  # before matplotlib reads it
    unreadable_widths_unset()  # before the consoles and typer read them
    from . import data, experiments  # noqa: F401  (register the commands)
    from .app import app

    app.add_typer(data.app, name="data")
    return app


# `python -m ssmrepro.cli` imports this package before its __main__ runs (sys.argv[0] is '-m'
# while Python locates the module): this import is that command's start-up, guarded as
# `python -m ssmrepro`'s is (a SIGTERM there died with exit 143, a Ctrl-C printed a traceback)
app = load_guarded(_load) if sys.argv[:1] == ["-m"] else _load()


def main() -> None:
    app()


__all__ = ["app", "main"]
