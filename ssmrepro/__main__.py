"""Tool: the ``ssmrepro`` command (also ``python -m ssmrepro``).

The command line (``cli.app``) behind a guard for its own imports: they take the first seconds
(torch, pandas, matplotlib), before the commands' error boundary (``cli.app.guard``) exists, and a
Ctrl-C then printed a KeyboardInterrupt traceback from whatever module was loading. Now it ends as
Ctrl-C anywhere else does: one line and exit 130.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from .cli import app
    except KeyboardInterrupt:
        sys.stderr.write("interrupted — before the command started; nothing was done\n")
        raise SystemExit(130) from None
    app()


if __name__ == "__main__":
    main()
