"""Tool (cli): ``ssmrepro list | show | validate | run | plot | verify | export | figures |
list-models | bench | data``.

One Typer app (``cli.app``); experiment commands in ``cli.experiments``, the LRA data commands
(``ssmrepro data ...``) in ``cli.data``; every command runs inside the error boundary
``cli.app.guard``.
"""

from __future__ import annotations

from . import data, experiments  # noqa: F401  (register the commands)
from .app import app

app.add_typer(data.app, name="data", help="Download, generate and inspect LRA datasets.")


def main() -> None:
    app()


__all__ = ["app", "main"]
