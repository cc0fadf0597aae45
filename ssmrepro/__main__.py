"""Tool: the ``ssmrepro`` command (also ``python -m ssmrepro``).

The command line (``cli.app``) behind a guard for its own imports: they take the first seconds
(torch, pandas, matplotlib), before the commands' error boundary (``cli.app.guard``) exists, and a
Ctrl-C then printed a KeyboardInterrupt traceback from whatever module was loading. Now it ends as
Ctrl-C anywhere else does: one line and exit 130; so do a SIGTERM and a SIGHUP there.
"""

from __future__ import annotations

import sys

try:  # the guard's own few milliseconds of loading (stdlib only): a traceback there too
    from .signals import load_guarded
except KeyboardInterrupt:  # as signals.load_guarded ends (interrupt_handled: exit 130, not -2)
    exec("")  # noqa: S102
    sys.stderr.write("interrupted — before the command started; nothing was done\n")
    raise SystemExit(130) from None


def _load():
    from .cli import app

    return app


def main() -> None:
    load_guarded(_load)()


if __name__ == "__main__":
    main()
