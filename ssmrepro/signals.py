"""Foundation (signals): a `kill PID` or a hang-up ends a command as Ctrl-C does.

Standard library only, so that the entry point (``__main__``) can set these handlers before it
loads torch and the rest, as the commands' error boundary (``cli.app.guard``) sets them around
each command.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

try:  # loaded now, while memory is there: ``out_of_memory`` imported it when memory had run
    import resource  # out, and its shared object could not be mapped either (a second
except ImportError:  # traceback, exit 1, where one line was meant)
    resource = None  # type: ignore[assignment]  (no such module on this system)

# (no typing, no threading: this module is loaded before the start-up guard exists, and each
# millisecond of it was a Ctrl-C with a traceback)


# Signals that end a command as Ctrl-C does where nothing else handles or ignores them: a hang-up
# (a closed terminal), and SIGUSR1 / SIGUSR2, what batch systems send as their time limit's
# warning (Grid Engine's soft run-time limit s_rt, Slurm's `--signal=USR1@60`): a `run` died of
# one with exit 138 / 140, no line, and Python's 'leaked semaphore' warning. Worker processes
# ignore them (``util.hangups_ignored``): sent to every process of a job, they reach the command.
STOP_SIGNALS = ("SIGHUP", "SIGUSR1", "SIGUSR2")


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


def cpu_limit_interrupt(signum: int, frame: object) -> None:
    """SIGXCPU: the soft CPU-time limit ran out (`ulimit -S -t`, a batch system's soft CPU limit
    such as Grid Engine's s_cpu): the command ends as on a `kill PID` (it dumped core, exit 152,
    no line). The soft limit is raised to the hard one first: the kernel sends SIGXCPU again at
    every further second of CPU, which would kill the clean-up; the hard limit still holds."""
    try:
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    except (ValueError, OSError, AttributeError):  # (AttributeError: no resource module)
        pass
    raise KeyboardInterrupt


def terminate_as_interrupt(previous: dict[int, object] | None = None) -> dict[int, object]:
    """A SIGTERM (`kill PID`, a batch scheduler's time limit) ends the command as Ctrl-C does:
    its workers stopped, one 'interrupted — ...' line, exit 130 (it died at once with exit 143,
    no line, and Python's 'leaked semaphore' warning). So does a SIGHUP (the terminal closed, an
    ssh session dropped, `kill -HUP`), which did the same with exit 129 — unless it is ignored
    (`nohup ssmrepro run ...` runs on) — and a SIGXCPU (``cpu_limit_interrupt``). Each
    handler replaced goes into ``previous`` as soon as it is set (a signal just after it finds
    it there for ``restore``); returns ``previous`` ({} outside the main thread, where no
    handler can be set)."""
    previous = {} if previous is None else previous
    try:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        return previous
    for name in STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
            previous[sig] = signal.signal(sig, interrupt)
    xcpu = getattr(signal, "SIGXCPU", None)  # a soft CPU-time limit ran out
    if xcpu is not None and signal.getsignal(xcpu) == signal.SIG_DFL:
        previous[xcpu] = signal.signal(xcpu, cpu_limit_interrupt)
    return previous


def restore(previous: dict[int, object]) -> None:
    """Put back the handlers ``terminate_as_interrupt`` replaced (None: one set outside Python,
    whose default is put back)."""
    for sig, handler in list(previous.items()):
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    previous.clear()


def current_folder_or_exit() -> None:
    """Refuse to start, one line and exit 2, where the current folder no longer exists (deleted
    while a shell stood in it): loading torch died there with 'Intel oneMKL FATAL ERROR: Cannot
    load .../libtorch_cpu.so.' and exit 2, which reads as a broken install (and a relative path
    cannot be resolved in a folder that is gone)."""
    import os

    try:
        os.getcwd()
    except FileNotFoundError:
        sys.stderr.write("error: the current folder no longer exists (it was deleted); cd to a "
                         "folder that exists and run the command again\n")
        raise SystemExit(2) from None


def out_of_memory(err: BaseException) -> str | None:
    """One line for ``err`` where it says that memory ran out (a MemoryError, or a library that
    could not be mapped: 'failed to map segment from shared object' under `ulimit -v`), with the
    address-space limit where one is set; None for any other error. Each was a traceback."""
    text = str(err)
    thread = isinstance(err, RuntimeError) and "can't start new thread" in text  # its stack
    # could not be mapped (`ulimit -v 760000`: the progress bar's thread, a traceback), or the
    # user's processes and threads are at their limit (`ulimit -u`)
    if not (thread or isinstance(err, MemoryError) or isinstance(err, ImportError) and (
            "failed to map segment" in text or "Cannot allocate memory" in text)):
        return None
    space = _soft_limit("RLIMIT_AS")
    limit = "" if space is None else (
        f"this process may use {space / 2**30:.3g} GiB of address space at most "
        f"(ulimit -v {space // 1024})")
    said = f"{type(err).__name__}{': ' + text if text else ''}"
    if thread:
        tasks = _soft_limit("RLIMIT_NPROC")
        limits = [w for w in (limit, tasks is not None and f"this user may run {tasks} "
                              f"processes and threads (ulimit -u {tasks})") if w]
        return (f"no new thread could be started ({said}): out of memory or of threads"
                + (f"; {' and '.join(limits)}: raise "
                   f"{'that limit' if len(limits) == 1 else 'one of them'}" if limits else ""))
    return f"out of memory ({said}){'; ' + limit + ': raise that limit' if limit else ''}"


def _soft_limit(name: str) -> int | None:
    """The soft limit ``resource.<name>`` of this process; None where there is none (or no
    such module or limit)."""
    try:
        soft = resource.getrlimit(getattr(resource, name))[0]
    except (AttributeError, ValueError, OSError):
        return None
    return None if soft < 0 or soft == resource.RLIM_INFINITY else soft


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
    except (MemoryError, ImportError) as err:  # torch or pandas under `ulimit -v 700000`: an
        memory = out_of_memory(err)  # ImportError traceback ('failed to map segment')
        if memory is None:
            raise
        restore(previous)
        sys.stderr.write(f"error: {memory}\n")
        raise SystemExit(2) from None
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
