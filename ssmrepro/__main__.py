"""Tool: the ``ssmrepro`` command (also ``python -m ssmrepro``).

The command line (``cli.app``) behind a guard for its own imports: they take the first seconds
(torch, pandas, matplotlib), before the commands' error boundary (``cli.app.guard``) exists, and a
Ctrl-C then printed a KeyboardInterrupt traceback from whatever module was loading. Now it ends as
Ctrl-C anywhere else does: one line and exit 130; so do a SIGTERM and a SIGHUP there.
"""

from __future__ import annotations

import signal
import sys


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # a `kill PID` (SIGTERM) or a hang-up (SIGHUP, unless ignored: nohup) while loading ends as
    # Ctrl-C does, as it does once the command runs (it died with exit 143 or 129, no line).
    # Handlers are set and put back inside the try: a signal just after one was set raised
    # KeyboardInterrupt outside it, a traceback.
    previous: dict[int, object] = {}
    try:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _stop)
        if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
            previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, _stop)
        from .cli import app

        _restore(previous)
    except KeyboardInterrupt:
        _restore(previous)
        sys.stderr.write("interrupted — before the command started; nothing was done\n")
        raise SystemExit(130) from None
    app()


def _restore(previous: dict[int, object]) -> None:
    """Put back the handlers ``main`` replaced while loading."""
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)  # type: ignore[arg-type]
    previous.clear()


if __name__ == "__main__":
    main()
