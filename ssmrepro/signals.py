"""Foundation (signals): a `kill PID` or a hang-up ends a command as Ctrl-C does.

Standard library only, so that the entry point (``__main__``) can set these handlers before it
loads torch and the rest, as the commands' error boundary (``cli.app.guard``) sets them around
each command.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

# (no typing, no threading: this module is loaded before the start-up guard exists, and each
# millisecond of it was a Ctrl-C with a traceback)


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def interrupt_handled() -> None:
    """Tell the interpreter that the KeyboardInterrupt being handled is handled: the command
    ends with its line and exit 130. One raised inside code that ``exec`` or ``eval`` runs from
    a string (the methods namedtuple and dataclass make while modules load, so most Ctrl-Cs at
    start-up) sets CPython's 'unhandled KeyboardInterrupt' mark even where it is caught, and a
    `python -m ssmrepro ...` then killed itself with SIGINT as it exited (exit -2 after the
    'interrupted' line, where 130 is documented). Running a string clears the mark."""
    exec("")  # noqa: S102  (the empty program: what resets the mark)


def terminate_as_interrupt(previous: dict[int, object] | None = None) -> dict[int, object]:
    """A SIGTERM (`kill PID`, a batch scheduler's time limit) ends the command as Ctrl-C does:
    its workers stopped, one 'interrupted — ...' line, exit 130 (it died at once with exit 143,
    no line, and Python's 'leaked semaphore' warning). So does a SIGHUP (the terminal closed, an
    ssh session dropped, `kill -HUP`), which did the same with exit 129 — unless it is ignored
    (`nohup ssmrepro run ...` runs on). Each handler replaced goes into ``previous`` as soon as
    it is set (a signal just after it finds it there for ``restore``); returns ``previous``
    ({} outside the main thread, where no handler can be set)."""
    previous = {} if previous is None else previous
    try:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        return previous
    hup = getattr(signal, "SIGHUP", None)
    if hup is not None and signal.getsignal(hup) == signal.SIG_DFL:
        previous[hup] = signal.signal(hup, interrupt)
    return previous


def restore(previous: dict[int, object]) -> None:
    """Put back the handlers ``terminate_as_interrupt`` replaced (None: one set outside Python,
    whose default is put back)."""
    for sig, handler in list(previous.items()):
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    previous.clear()


def load_guarded(load: Callable[[], object]) -> object:
    """``load()`` (the command line's own imports: torch, pandas, matplotlib, the first
    seconds) as the start-up of a command: a Ctrl-C there ends with one line and exit 130, and
    so do a SIGTERM and a SIGHUP (they died with exit 143 or 129, no line). Handlers are set and
    put back inside the try: a signal just after one was set raised KeyboardInterrupt outside
    it, a traceback."""
    previous: dict[int, object] = {}
    try:
        terminate_as_interrupt(previous)
        out = load()
        restore(previous)
    except KeyboardInterrupt:
        restore(previous)
        interrupt_handled()
        sys.stderr.write("interrupted — before the command started; nothing was done\n")
        raise SystemExit(130) from None
    return out


def run_guarded(main: Callable[[], int], interrupted: str) -> int:
    """``main()`` run as a command is: a Ctrl-C, SIGTERM or SIGHUP ends it with the one line
    ``interrupted`` and exit 130 (a KeyboardInterrupt traceback, or exit 143 / 129 and no line,
    where nothing else set handlers: `python -m ssmrepro.bench.scans`)."""
    previous: dict[int, object] = {}
    try:
        terminate_as_interrupt(previous)
        return main()
    except KeyboardInterrupt:
        restore(previous)
        interrupt_handled()
        sys.stderr.write(interrupted + "\n")
        return 130
    finally:
        restore(previous)
