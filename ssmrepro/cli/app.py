"""Tool (cli): the one Typer app, its consoles and the error boundary every command runs inside.

Exit codes: 0 ok; 1 runs failed or did not finish (re-run to resume); 2 bad input (spec, id,
option, missing data, a folder that cannot be written); 130 interrupted; 141 the reader of the
output closed it (``ssmrepro list | head -1``). Expected failures become one-line messages; a
traceback means a bug.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from ..data.sources import DataUnavailable
from ..kernels.backend import BackendError
from ..plots.registry import FigureTooLarge
from ..signals import interrupt_handled, out_of_memory, restore, terminate_as_interrupt
from ..spec import SpecError
from ..store import LinkOutside, TableError
from ..util import (
    NoProject,
    docstring,
    end_command,
    error_line,
    named_path,
    new_command,
    open_standard_streams,
    os_message,
    os_reason,
    plain_rst,
    plain_warnings,
)

open_standard_streams()  # before the consoles below read sys.stdout and sys.stderr

EXIT_CODES = ("Exit codes: 0 ok; 1 some runs failed or did not finish (re-run the same command "
              "to resume); 2 bad input (spec, id, option, missing data, unwritable folder); "
              "130 interrupted; 141 the output's reader closed it (| head).")

ENV_HELP = ("Environment: SSMREPRO_OUT (default of --out), SSMREPRO_DEVICE (--device), "
            "SSMREPRO_WORKERS (--workers), SSMREPRO_DATA (dataset root), SSMREPRO_THREADS "
            "(intra-op threads per training process; default: the cores the load average leaves free, "
            "split between the workers).")


def help_text(text: str | None) -> str | None:
    """A docstring or help string as ``--help`` shows it: typer reads help as rich markup, so
    ``pip install -e '.[parquet]'`` lost its ``[parquet]`` (printed ``pip install -e '.'``, a
    wrong instruction); the docstrings' rST double backticks were printed literally; and a line
    break inside a paragraph stayed in the command list (``list``'s line broke after "or of").
    Paragraphs are joined into lines, double backticks become single ones, markup is escaped."""
    if not text:
        return text
    paragraphs = [p if p.startswith("\b") else " ".join(p.split())
                  for p in inspect.cleandoc(text).split("\n\n")]
    return escape(plain_rst("\n\n".join(paragraphs)))


def _help_of_parameters(fn: Callable[..., Any]) -> None:
    """Every typer.Option / typer.Argument help of ``fn`` through ``help_text`` (once: an
    option object shared by two commands is not escaped twice)."""
    for param in inspect.signature(fn).parameters.values():
        info = param.default
        if (isinstance(info, typer.models.ParameterInfo) and info.help
                and not getattr(info, "_help_plain", False)):
            info.help = help_text(info.help)
            info._help_plain = True  # type: ignore[attr-defined]




def _output_identity() -> tuple[Any, ...]:
    """What standard output and error are now: the Python streams and the files behind fds 1, 2."""
    ids: list[Any] = [id(sys.stdout), id(sys.stderr)]
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
            ids.append((st.st_dev, st.st_ino))
        except OSError:
            ids.append(None)
    return tuple(ids)


class _Typer(typer.Typer):
    """The app, ending with exit 141 (not 1) where what ended it was a closed output outside the
    commands' error boundary: `ssmrepro --help | head -1`, `run --help | true`, `--version |
    true` exited 1, "some runs failed" (rich's help console points the closed stream at
    /dev/null and exits 1; click wraps sys.stdout and exits 1 on EPIPE). Either replaces the
    stream, which tells such an exit 1 from a command's own."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = _output_identity()
        try:
            return super().__call__(*args, **kwargs)
        except (OSError, OutputUnwritable) as err:  # outside the commands' boundary: the help
            # or --version text could not be written (`--help >/dev/full` was a traceback); a
            # file's error names it, and is a bug here
            if isinstance(err, OSError) and (err.filename is not None
                                             or isinstance(err, BrokenPipeError)):
                raise
            why = (err if isinstance(err, OutputUnwritable)
                   else _unwritable(False, sys.stdout, err))
            try:
                err_console.print(f"[red]error:[/] {escape(str(why))}", highlight=False,
                                  soft_wrap=True)
            except OutputUnwritable:  # standard error is full too (`--help >/dev/full
                pass  # 2>/dev/full` was a traceback there, exit 1): the exit code says it
            raise SystemExit(2) from None
        except SystemExit as err:
            if err.code == 1 and _output_identity() != before:
                raise SystemExit(EXIT_PIPE) from None
            if err.code == 130:  # interrupted, its workers stopped and its line printed: a
                _ignore_interrupts()  # second Ctrl-C only broke the interpreter's shutdown
            raise


def _ignore_interrupts() -> None:
    """Ignore Ctrl-C from now on (the process is ending): a second Ctrl-C while an interrupted
    command exits raised KeyboardInterrupt in torch's finalizers at shutdown, a traceback after
    the 'interrupted' line."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


app = _Typer(
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    no_args_is_help=True,
    help=help_text("Reproduce figures and tables of Mamba / SSM papers from real training runs.\n\n"
                   "Example: ssmrepro run keep-nth --profile quick\n\n" + EXIT_CODES + "\n\n"
                   + ENV_HELP),
)
EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool its closed pipe ended


class OutputClosed(KeyboardInterrupt):
    """The reader of standard output (or error) closed it: ``ssmrepro list | head -1``. Raised
    where a write meets the closed pipe; an interrupt (a KeyboardInterrupt), so a sweep stops as
    on Ctrl-C (its workers stopped, finished runs kept). The error boundary ends the command with
    exit 141 and no word (rich exited 1, "some runs failed", and a ``--json`` document printed
    ``error: cannot use: Broken pipe``, exit 2, "bad input")."""


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reading end is closed (poll says POLLERR)."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _mute_closed_outputs() -> bool:
    """Point standard output and error, where their reader is gone, at /dev/null (what is left
    in Python's buffers is flushed there at exit, not a 'BrokenPipeError ignored' line); returns
    whether any was."""
    gone = [fd for fd in (1, 2) if _reader_gone(fd)]
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in gone:
            os.dup2(devnull, fd)
        os.close(devnull)
    return bool(gone)


class OutputUnwritable(Exception):
    """Standard output (or error) could not be written for another reason than a closed pipe:
    ``ssmrepro list >/dev/full`` (no space left), an I/O error. The error boundary ends the
    command with exit 2 and says which stream (it said ``cannot use: no space left on device``,
    as if a file of the command's were meant, and ``--help`` was a traceback)."""

    def __init__(self, stream: str, err: OSError) -> None:
        super().__init__(f"{stream} could not be written: {os_reason(err)}")
        self.stream = stream


def _unwritable(stderr: bool, file: Any, err: OSError) -> OutputUnwritable:
    """The OutputUnwritable of a failed write to ``file``, standard output (or error where
    ``stderr``); where the file is descriptor 1 or 2 it is pointed at /dev/null, so that what
    Python still holds for it is dropped at exit, not written again (an 'Exception ignored'
    line)."""
    try:
        fd = file.fileno()
        if fd in (1, 2):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
    except (AttributeError, OSError, ValueError):  # not a descriptor (a test's captured output)
        pass
    return OutputUnwritable("standard error" if stderr else "standard output", err)


def echo(text: str) -> None:
    """``typer.echo(text)`` to standard output, its failures those of the consoles (a closed
    pipe: OutputClosed; a full device: OutputUnwritable)."""
    try:
        typer.echo(text)
    except BrokenPipeError:
        if _mute_closed_outputs():
            raise OutputClosed from None
        raise
    except OSError as err:
        raise _unwritable(False, sys.stdout, err) from None


class _Console(Console):
    def on_broken_pipe(self) -> None:  # rich's: quiet, then SystemExit(1)
        self.quiet = True
        _mute_closed_outputs()
        raise OutputClosed

    def _write_buffer(self) -> None:
        try:
            super()._write_buffer()
        except BrokenPipeError:
            raise
        except OSError as err:  # a full device, an I/O error: no later line of it is written
            self.quiet = True
            del self._buffer[:]
            raise _unwritable(self.stderr, self.file, err) from None


# emoji=False: ':x:' in a label or title was printed as an emoji ('S6:x:' as 'S6❌'); lines are
# wrapped only on a terminal: piped or logged, a path longer than 80 characters was folded
# ('figures: \n/tmp/...dd\ndd/figure.png'), and a script reading the line got a broken path
console = _Console(emoji=False, soft_wrap=not sys.stdout.isatty())
err_console = _Console(stderr=True, emoji=False, soft_wrap=not sys.stderr.isatty())


MIN_CELL = 6  # the narrowest a table's folding column gets (characters)
WORD_CELL = 24  # the longest word a `words` column of print_table keeps on one line


def print_table(table, whole: tuple[int, ...] = (), words: tuple[int, ...] = ()) -> None:
    """Print a rich ``table`` without losing a character to a narrow console: the columns
    ``whole`` (ids, paths: what a reader copies) keep their longest cell on one line, every other
    column folds its text onto more lines, at least ``MIN_CELL`` wide; where that does not fit the
    console's width the table is printed as wide as it needs (the terminal wraps its lines). In
    80 columns `list` printed six different specs as `cooper2026-fig…`, and at 20 `show`'s run
    table was empty boxes. The columns ``words`` (types, defaults) break only between words: a
    default folded mid-number read as another value (`list-tasks`' lra_image std
    0.23921568627450981 as '0.2392156862745098' over '1')."""
    from rich.cells import cell_len
    from rich.text import Text

    need = 1 + len(table.columns) * 3  # the borders and each column's padding of 1 + 1
    for i, col in enumerate(table.columns):
        col.overflow = "fold"
        texts = [str(col.header), *(str(c) for c in col._cells)]
        longest = max(cell_len(Text.from_markup(t).plain) for t in texts)
        if i in whole:
            col.min_width, col.no_wrap = longest, True
        elif i in words:  # a fixed width (rich's collapse let a min_width column run the
            # table past the console's width): its longest word, up to 20 for text of many words;
            # a word over WORD_CELL (a path, `list`'s status of a broken spec) folds, else its
            # width squeezed every other column to MIN_CELL ('invali' over 'd spec')
            col.width = col.min_width = max(min(20, longest), *(
                n for t in texts for w in Text.from_markup(t).plain.split()
                if (n := cell_len(w)) <= WORD_CELL))
        else:
            col.min_width = min(MIN_CELL, longest)
        need += col.min_width
    if need <= console.width:
        console.print(table)
        return
    # rich prints no wider than the console: a console of the width needed, on the same stream
    wide = _Console(file=console.file, width=need, emoji=False, soft_wrap=console.soft_wrap,
                    force_terminal=console.is_terminal, no_color=console.no_color,
                    color_system=console.color_system)
    wide.print(table)


def version() -> str:
    """The installed ssmrepro version (package metadata), else the source tree's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("ssmrepro")
    except PackageNotFoundError:
        return "0+unknown"


def _version_callback(value: bool) -> None:
    if value:
        from ..sweep import CODE_VERSION

        try:  # (a closed pipe is click's: exit 1, made 141 by _Typer)
            typer.echo(f"ssmrepro {version()} (run code version {CODE_VERSION}, python "
                       f"{sys.version.split()[0]})")
        except BrokenPipeError:
            raise
        except OSError as err:
            raise _unwritable(False, sys.stdout, err) from None
        raise typer.Exit()


def tolerant_output() -> None:
    """Characters the output's encoding lacks (``PYTHONIOENCODING=ascii``, a Latin-1 locale) are
    written as escapes (``\\u2014``), not a UnicodeEncodeError traceback: every command prints
    labels, titles and dashes that are not ASCII. Also under the C locale without its UTF-8
    coercion (``LC_ALL=C PYTHONCOERCECLOCALE=0``, an old glibc): Python gives the ASCII streams
    the 'surrogateescape' handler there, which escapes only undecodable bytes (a traceback in
    `list`, `show` and `verify`); on a UTF-8 stream it never fails and is left as it is. A byte
    of a file's name that the file system's encoding could not decode (a path with 'é' under
    that C locale: the surrogates U+DCC3 U+DCA9) is written as that byte, as 'surrogateescape'
    writes it; escaped, such a path was printed as `r\\udcc3\\udca9sults`, naming no file."""
    import codecs

    codecs.register_error(OUTPUT_ERRORS, _escape_unencodable)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        errors = getattr(stream, "errors", "strict")
        try:
            utf = codecs.lookup(getattr(stream, "encoding", None) or "ascii").name.startswith("utf")
        except LookupError:
            utf = False
        if reconfigure is not None and (errors in ("strict", "backslashreplace")  # (stderr's)
                                        or errors == "surrogateescape" and not utf):
            try:
                reconfigure(errors=OUTPUT_ERRORS)
            except (ValueError, OSError):  # closed, or a stream that cannot change
                pass


OUTPUT_ERRORS = "ssmrepro-escape"  # ``tolerant_output``'s error handler of the output streams


def _escape_unencodable(err: UnicodeError) -> tuple[bytes, int]:
    """An output stream's characters its encoding lacks: a surrogate U+DC80-U+DCFF (a byte of a
    file name that was not decoded) as that byte, any other as a backslash escape (``\\u2014``)."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    out = bytearray()
    for ch in err.object[err.start:err.end]:
        o = ord(ch)
        out += bytes([o - 0xDC00]) if 0xDC80 <= o <= 0xDCFF else (
            ch.encode("ascii", "backslashreplace"))
    return bytes(out), err.end


@app.callback()
def _main(
    _version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                  help="print the version and exit"),
) -> None:
    tolerant_output()


def print_json(obj: Any) -> None:
    """Machine-readable output (``--json``): one JSON document on stdout, nothing else."""
    text = json.dumps(_plain(obj), indent=1, allow_nan=False)
    echo(text)
    try:  # the descriptor the document went to (none under a test runner's captured output)
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    if _reader_gone(fd):  # a reader that closed the pipe while a large document was being
        # written (`show ID --profile paper --json | head -c 10`): CPython's buffered write
        # returns the short count of that write and raises nothing, so the cut document exited 0
        _mute_closed_outputs()
        raise OutputClosed


def _plain(o: Any) -> Any:
    """JSON-safe: NaN / inf -> null, numpy scalars -> Python, paths and others -> str (text as
    ``_unescaped``)."""
    if isinstance(o, dict):
        return {_unescaped(str(k)): _plain(v) for k, v in o.items()}
    if isinstance(o, str):
        return _unescaped(o)
    if isinstance(o, (list, tuple, set)):
        return [_plain(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):  # numpy scalars
        o = o.item()
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if o is None or isinstance(o, (bool, int)):
        return o
    return _unescaped(str(o))


def _unescaped(text: str) -> str:
    """``text`` with the bytes of a file's name that the file system's encoding could not decode
    (surrogates U+DC80-U+DCFF: a path with 'é' under the C locale, ``LC_ALL=C PYTHONUTF8=0``)
    read as the UTF-8 they are, 'é': a JSON document holds text, and `run --json`'s "csv" was
    ``"r\\udcc3\\udca9s/..."``, naming no file to `json.loads` (an open() of it failed) or jq.
    Bytes that are no UTF-8 stay as those surrogates."""
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    except UnicodeError:  # another lone surrogate
        return text


def path_value(value: str) -> Path:
    """The parser of every path option and argument (``typer.Option(..., parser=path_value)``):
    an empty path (``--out ''``, or only spaces) is refused (exit 2) instead of read as the
    current folder, and ``-`` (not standard output: a file or folder named '-' was written);
    `export --file -` wrote a file named '-' into the current folder. '~/r' is the home
    folder's r, as in $SSMREPRO_ROOT, $SSMREPRO_DATA and --dir (an SSMREPRO_OUT='~/r' from an
    env file, which no shell expands, wrote into a folder named '~'). ``util.named_path``."""
    return _named(value, False)


def file_value(value: str) -> Path:
    """``path_value`` of an option naming a file to write (``export --file``): a name ending in
    '/' (or in '.', '..') names a folder, and is refused (exit 2): `--file out/`, where no folder
    out existed, wrote the table into a file named `out`."""
    return _named(value, True)


def _named(value: str, file: bool) -> Path:
    try:
        return named_path(value, file)
    except OSError as err:  # '~/r' where the home folder is unknown: a RuntimeError traceback
        raise typer.BadParameter(err.strerror) from None
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None


# error lines one refusal prints; the rest are counted (a figure's `names` of 20,000 keys that
# name no column printed 20,000 lines, 1.5 MB; `spec.format_errors` bounds a schema's alone)
MAX_FAIL_LINES = 200


def fail(messages: list[str], code: int = 2) -> None:
    """Print ``error: ...`` lines to stderr (at most ``MAX_FAIL_LINES``, then how many more) and
    exit with ``code``."""
    for m in messages[:MAX_FAIL_LINES]:
        err_console.print(f"[red]error:[/] {escape(error_line(m))}", highlight=False,
                          soft_wrap=True)
    if len(messages) > MAX_FAIL_LINES:
        err_console.print(f"[red]error:[/] ... and {len(messages) - MAX_FAIL_LINES:,} more "
                          "problems (the first are above; fix them and try again)",
                          highlight=False, soft_wrap=True)
    raise typer.Exit(code)


RESUME = "interrupted — finished runs are saved; re-run the same command to resume"
PLANNED = ("interrupted — a dry run trains and writes nothing: re-run the same command to "
           "plan again")
REDO = ("interrupted — every file written is whole (the old one or the new one); re-run the "
        "same command to finish")


def guard(fn: Callable[..., Any], interrupted: str | Callable[[dict], str] = REDO
          ) -> Callable[..., Any]:
    """Run a command inside the error boundary (see the module docstring); Ctrl-C prints
    ``interrupted`` (what is left and how to go on, worded for the command: `plot` said
    "finished runs are saved ... resume", `run`'s words; a function of the command's options
    where they change it: `run --dry-run` trains nothing) and exits 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        plain_warnings()  # our own warnings as 'warning: ...' lines
        outer = new_command()  # (what an earlier command of this process said once:
        # ``first_time``; forgotten again at its end, ``end_command``)
        previous = terminate_as_interrupt()
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except OutputClosed:
            raise typer.Exit(EXIT_PIPE) from None
        except OutputUnwritable as err:
            fail([str(err)])
        except SpecError as err:
            fail(err.messages)
        except (BackendError, DataUnavailable, TableError, LinkOutside, FigureTooLarge, NoProject) as err:
            fail([str(err)])
        except OSError as err:
            if isinstance(err, BrokenPipeError) and _mute_closed_outputs():  # print(), echo
                raise typer.Exit(EXIT_PIPE) from None
            fail([os_message(err)])
        except MemoryError as err:  # an address-space limit (`ulimit -v`): a traceback
            fail([out_of_memory(err) or "out of memory"])
        except RuntimeError as err:  # a thread that could not start (`ulimit -v`, `-u`)
            memory = out_of_memory(err)
            if memory is None:
                raise
            fail([memory])
        except EOFError as err:  # a file read past its end, not caught where it was read (a
            # bug): click took it for Ctrl-D at a prompt, 'Aborted.' exit 1, as if the user had
            # stopped the command (no command prompts); a traceback names where it came from
            raise RuntimeError(f"EOFError: {err} (a file read past its end)") from err
        except KeyboardInterrupt:
            interrupt_handled()  # (exit 130, not death by SIGINT, under `python -m`)
            line = interrupted(kwargs) if callable(interrupted) else interrupted
            try:
                err_console.print(line, highlight=False, soft_wrap=True)
            except OSError:  # a hung-up terminal (EIO): no one is left to read the line
                pass
            raise typer.Exit(130) from None
        finally:
            restore(previous)
            end_command(outer)

    return wrapper


def command(typer_app: typer.Typer = app, *args: Any,
            interrupted: str | Callable[[dict], str] = REDO, **kwargs: Any):
    """``@command()``: register a guarded command on ``typer_app`` (default: the main app);
    ``interrupted``: its Ctrl-C line (``guard``)."""

    kwargs.setdefault("epilog", EXIT_CODES)  # every command's --help states the exit codes
    kwargs["epilog"] = help_text(kwargs["epilog"])

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _help_of_parameters(fn)  # their help and the docstring read as plain text (help_text)
        return typer_app.command(*args, help=help_text(kwargs.pop("help", None) or docstring(fn)),
                                 **kwargs)(guard(fn, interrupted))

    return register
