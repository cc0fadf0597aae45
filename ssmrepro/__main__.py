"""Tool: the ``ssmrepro`` command (also ``python -m ssmrepro``).

The command line (``cli.app``) behind a guard for its own imports: they take the first seconds
(torch, pandas, matplotlib), before the commands' error boundary (``cli.app.guard``) exists, and a
Ctrl-C then printed a KeyboardInterrupt traceback from whatever module was loading. Now it ends as
Ctrl-C anywhere else does: one line and exit 130; so do a SIGTERM and a SIGHUP there.
"""

from __future__ import annotations

import sys

from .signals import restore, terminate_as_interrupt


def main() -> None:
    # a `kill PID` (SIGTERM) or a hang-up (SIGHUP, unless ignored: nohup) while loading ends as
    # Ctrl-C does, as it does once the command runs (it died with exit 143 or 129, no line).
    # Handlers are set and put back inside the try: a signal just after one was set raised
    # KeyboardInterrupt outside it, a traceback.
    previous: dict[int, object] = {}
    try:
        terminate_as_interrupt(previous)
        from .cli import app

        restore(previous)
    except KeyboardInterrupt:
        restore(previous)
        sys.stderr.write("interrupted — before the command started; nothing was done\n")
        raise SystemExit(130) from None
    app()


if __name__ == "__main__":
    main()
