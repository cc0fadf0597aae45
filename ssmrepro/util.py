"""Foundation (below every stage and library): atomic file writes and the project's roots.

Atomic writes go through a temp file in the target's folder, flushed and fsync'ed, then
``os.replace``: a reader sees the old file or the new one, never a torn one, and a crash leaves at
most a temp file named ``.<name>.<host>.<pid>.<random>.tmp`` (so the debris of a dead writer on
this host can be recognised and removed: ``remove_dead_temps``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import glob
import hashlib
import json
import math
import os
import platform
import re
import shutil
import socket
import sys
import tempfile
import threading
import typing
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, StringConstraints, model_validator

HOST = socket.gethostname().replace(".", "_")
ROOT_ENV = "SSMREPRO_ROOT"  # folder holding experiments/ (and results/ by default)
DATA_ENV = "SSMREPRO_DATA"  # data root (LRA datasets, generated data, caches)
MAX_PID = 1 << 22  # Linux's PID_MAX_LIMIT


class MemberError(ValueError):
    """A failure of some members of a pack (indices ``members``) that each of them would meet
    alone, and the pack's other members would not: a member-level init its model does not fit
    (``models.init``), a member's own data without a target (``train.NoTargets``). The engine
    (``engine.local.train_records``) records those runs as failed and trains the others, whose
    results never depend on their pack-mates."""

    def __init__(self, message: str, members: tuple[int, ...] | list[int] = (),
                 reasons: dict[int, str] | None = None):
        super().__init__(message)
        self.members = tuple(members)
        self.reasons = dict(reasons or {})  # member -> its own message, where they differ

    def reason(self, e: int) -> str:
        """Member e's message (the error's own where it has none of its own)."""
        return self.reasons.get(e, str(self))


def pid_alive(pid: int) -> bool:
    """Whether a process of this host is running (zombies — killed but not yet reaped, common in
    containers whose PID 1 does not reap — count as dead). A number no process can have is dead:
    0 and -1 signal a process group or every process (a claim naming them looked held for ever),
    and 2**70 raised OverflowError (a traceback in `run`)."""
    if not 0 < pid <= MAX_PID:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _start_ticks(pid: int) -> int:
    """The start of the process ``pid`` in clock ticks since boot (/proc/<pid>/stat, field 22:
    the fields after the command's closing parenthesis, which the command may hold itself);
    OSError, ValueError or IndexError where the platform does not say or it is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_started(pid: int) -> float | None:
    """When the process ``pid`` of this host started (seconds since the epoch, to about a
    second), None where the platform does not say (no /proc) or it is gone."""
    try:
        ticks = _start_ticks(pid)
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def process_identity(pid: int) -> str | None:
    """'<boot id>:<start ticks>' of the process ``pid`` of this host: its start in clock ticks
    since boot, which no step of the wall clock moves (``process_started`` is read against the
    wall clock), and which with the pid names one process of one boot; None where the platform
    does not say (no /proc) or it is gone."""
    try:
        ticks = _start_ticks(pid)
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except (OSError, ValueError, IndexError):
        return None
    return f"{boot}:{ticks}" if boot else None


def soft_limit(name: str) -> int | None:
    """This process's soft limit ``resource.<name>`` (e.g. ``RLIMIT_NOFILE``); None where there
    is none (unlimited, or no such module or limit on this system)."""
    try:
        import resource

        soft = resource.getrlimit(getattr(resource, name))[0]
    except (ImportError, AttributeError, ValueError, OSError):
        return None
    return None if soft < 0 or soft == resource.RLIM_INFINITY else soft


def _process_limit(err: OSError) -> str | None:
    """What a process limit ``err`` met says, with the limit and the way out; None for an error
    of no such limit. `ulimit -n 20` with `run --workers 2` said only 'error: cannot use: Too
    many open files' (a worker's pipes), naming neither file nor limit."""

    def soft(name: str) -> str:
        n = soft_limit(name)
        return "no limit" if n is None else str(n)

    if err.errno == errno.EMFILE:
        n = soft("RLIMIT_NOFILE")
        return (f"too many open files (this process may have {n} open at once: ulimit -n "
                f"{n}); raise that limit, or run fewer --workers")
    if err.errno == errno.EFBIG:  # `ulimit -f`: 'cannot use <file>: File too large', the
        # limit unnamed (a full disk reads otherwise)
        n = soft_limit("RLIMIT_FSIZE")
        if n is None:
            return "a file larger than its file system allows"
        return (f"a file larger than this process may write ({n:,} bytes at most: ulimit -f "
                f"{n // 1024}); raise that limit")
    if err.errno == errno.ENFILE:
        return "the system's table of open files is full; close programs or run fewer --workers"
    if err.errno == errno.EAGAIN and not err.filename:  # fork: no new process (ulimit -u)
        n = soft("RLIMIT_NPROC")
        return (f"no new process could be started ({err.strerror or 'EAGAIN'}; this user may "
                f"run {n} processes and threads: ulimit -u {n}); raise that limit, or run "
                "fewer --workers")
    return None


def os_message(err: OSError) -> str:
    """'cannot write results/x.json: no space left on device' from an OSError; a process limit
    met (open files, processes) says which, with its value, whether or not a file is named."""
    limit = _process_limit(err)
    if limit is not None:
        return f"cannot use {err.filename}: {limit}" if err.filename else limit
    where = f" {err.filename}" if err.filename else ""
    return f"cannot use{where}: {os_reason(err)}"


def shell_word(text: str) -> str:
    """``text`` as one word of a shell command on one line: ``shlex.quote``'s, or where it holds
    a character that does not print (a newline, a tab, an undecodable byte) bash's ``$'...'``
    with that character escaped, as ``printf %q`` writes it (a data root holding a newline put
    a suggested command on two lines)."""
    import shlex

    if text.isprintable():
        return shlex.quote(text)
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}
    out = []
    for ch in text:
        o = ord(ch)
        if ch in named:
            out.append(named[ch])
        elif ch.isprintable():
            out.append(ch)
        elif 0xDC80 <= o <= 0xDCFF:  # a byte the file system's encoding could not decode
            out.append(f"\\x{o - 0xDC00:02x}")
        else:
            # (bash's \xHH is one byte: U+0080-U+00FF as \xHH, a no-break space, named a
            # path of another byte; \u names the character, encoded as UTF-8)
            out.append(f"\\x{o:02x}" if o < 0x80 else f"\\u{o:04x}" if o < 0x10000
                       else f"\\U{o:08x}")
    return "$'" + "".join(out) + "'"


def os_reason(err: OSError) -> str:
    """What went wrong in an OSError, in words ('no space left on device'), without a path."""
    limit = _process_limit(err)
    if limit is not None:
        return limit
    if err.errno == errno.EEXIST and err.filename:  # mkdir where something stands: a symbolic
        # link to nothing (`.cache -> /gone`) 'exists and is not a folder', read as a file
        try:
            if os.path.islink(err.filename) and not os.path.exists(err.filename):
                return (f"a symbolic link to {os.readlink(err.filename)}, which does not exist, "
                        "where a folder belongs (remove the link, or make what it leads to)")
        except (OSError, ValueError):
            pass
    return {errno.ENOSPC: "no space left on device", errno.EROFS: "read-only file system",
            errno.EACCES: "permission denied", errno.ENOTDIR: "a path component is a file, "
            "not a folder", errno.EEXIST: "exists and is not a folder",
            errno.EISDIR: "a folder where a file belongs",
            errno.ELOOP: "a symbolic link loop (a link that leads back to itself)"}.get(
        err.errno or -1, err.strerror or str(err) or type(err).__name__)  # an OSError of a
    # message alone (shutil's 'Cannot call rmtree on a symbolic link') printed 'OSError'


def remove_tree(path: Path) -> None:
    """``shutil.rmtree(path)``, an OSError naming the file it met in full: rmtree removes by
    descriptor and names the entry alone, so `data generate --force` on a read-only disk said
    `cannot use meta.json: read-only file system`, naming no folder."""
    def named(func, where, exc) -> None:
        err = exc[1] if isinstance(exc, tuple) else exc
        if isinstance(err, OSError):
            raise OSError(err.errno, err.strerror, str(where)) from None
        raise err

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=named)
    else:
        shutil.rmtree(path, onerror=named)


def human_seconds(sec: float) -> str:
    """A duration for a person: '0.3 s', '42 s', '7 min', '2.5 h' (one place for every such
    line: a sub-second time read '0 s' or '0s CPU', as if nothing had been timed). No time
    (NaN, infinite) is '—', and one of 100,000 h or more three digits, '2.78e+07 h' (a table's
    wall_s edited to 1e300 put a number of 300 digits on the front page); -0 is '0 s'."""
    if not math.isfinite(sec):
        return "—"
    if -0.5 < sec <= 0:
        return "0 s"
    if 0 < sec < 1:
        return f"{sec:.1g} s"
    if sec < 90:
        return f"{sec:.0f} s"
    if sec < 5400:
        return f"{sec / 60:.0f} min"
    return f"{sec / 3600:.1f} h" if sec < 3.6e8 else f"{sec / 3600:.3g} h"


def utc_time() -> str:
    """Now as ISO 8601 in UTC, e.g. ``2026-11-28T14:20:05Z``: what a record keeps of when it was
    measured (bench records kept local time without a zone, so the roofline table's date was a
    day off on a machine far from UTC, and two machines' records could not be ordered)."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def file_digest(path: Path, algo: str = "sha256") -> str:
    """The hex digest (``hashlib`` algorithm ``algo``) of the file at ``path``, read in 1 MiB
    blocks."""
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scratch_folder(parent: Path, prefix: str) -> Path:
    """A new folder name under ``parent`` to build something in before it is renamed into place:
    ``<prefix>-<host>-<pid>-<hex>``, so that ``remove_dead_scratch`` can tell one left by a
    process that is gone. ``parent`` is cleaned of those of ``prefix`` first."""
    remove_dead_scratch(parent, prefix)
    return parent / f"{prefix}-{HOST}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def remove_dead_scratch(parent: Path, prefix: str) -> None:
    """Remove the ``scratch_folder``s of ``prefix`` under ``parent`` whose process of this host is
    gone: a build killed (``kill -9``, a crashed machine) left its partial copy for ever (168 MB
    of a 200 MB archive; a cache entry's arrays). Another host's (a shared disk) and a running
    process's are left alone."""
    for path in dead_scratch(parent, prefix):
        shutil.rmtree(path, ignore_errors=True)


def scratch_name(*prefixes: str) -> re.Pattern:
    """The whole name of a ``scratch_folder`` of one of ``prefixes``:
    ``<prefix>-<host>-<pid>-<6 hex>`` (groups ``host``, ``pid``). A name that only begins so (a
    user's `.replaced-notes`) is none."""
    return re.compile("(?:" + "|".join(re.escape(p) for p in prefixes) + ")"
                      r"-(?P<host>.+)-(?P<pid>[0-9]+)-[0-9a-f]{6}")


def dead_scratch(parent: Path, prefix: str) -> list[Path]:
    """The ``scratch_folder``s of ``prefix`` under ``parent`` whose process of this host is gone
    (folders, not links), by name."""
    name = scratch_name(prefix)
    return sorted(path for path in (parent.glob(glob.escape(prefix) + "-*")
                                    if parent.is_dir() else ())
                  if (m := name.fullmatch(path.name)) and m["host"] == HOST
                  and not pid_alive(int(m["pid"])) and path.is_dir() and not path.is_symlink())


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file here: 0o666 less the process's umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


# (read once: the umask is the user's, set before the command starts)
NEW_FILE_MODE = _new_file_mode()


def _atomic(path: Path, write) -> None:
    path = Path(path)
    _check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{HOST}.{os.getpid()}.",
                                   suffix=".tmp")
    except OSError as err:  # a read-only folder: the message named a temp file, never made
        err.filename, err.filename2 = str(path), None
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600 (records live on shared disks): the mode any new file gets. It was
        # 0644 whatever the umask: under `umask 077` records, tables and reports were readable by
        # every user (`umask 002` for a group's shared results: not writable by the group)
        os.chmod(tmp, NEW_FILE_MODE)
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.filename in (None, tmp):  # name the file, never
            err.filename, err.filename2 = str(path), None  # the temp file (or nothing)
        raise


def _check_replaceable(path: Path) -> None:
    """An atomic write replaces ``path``: refuse a folder and anything that is not a regular
    file or a link (a device such as /dev/null, a FIFO, a socket), which the rename would replace
    with a regular file."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "a folder where a file belongs", str(path))
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket); ssmrepro "
                      "writes only regular files", str(path))


check_replaceable = _check_replaceable  # before long work that ends in writing ``path``


def refuse_linked_output(path: Path, suffix: str | None = None, earlier: bytes = b"") -> None:
    """An output file the user names (``export --file``, a benchmark's ``--json``) must not be a
    symbolic link: the atomic write replaces the link itself, not what it leads to, so
    ``export --file /dev/stdout`` replaced the system's /dev/stdout link (-> /proc/self/fd/1)
    with a regular file of the table. OSError (EINVAL) naming the link and its target.
    ``suffix`` (``.csv``, ``.json``: what is written): an existing file with another suffix is
    no earlier output of the command, OSError (EINVAL): `export --file my-spec.yaml` (a spec run
    by its path, a script, a document, outside the project) replaced it with the table, exit 0.
    A new file may have any name, and ``earlier`` (how the command's output begins: the table's
    header, a record's first key; whitespace aside) tells a file it wrote before under such a
    name, which is replaced again (`export --file table` twice refused the second time)."""
    if os.path.islink(path):
        raise OSError(errno.EINVAL, f"a symbolic link (to {os.readlink(path)}); writing would "
                      "replace the link itself, not what it leads to: name a regular file",
                      str(path))
    if (suffix is not None and Path(path).suffix.lower() != suffix and os.path.isfile(path)
            and not (earlier and _begins_with(path, earlier))):
        raise OSError(errno.EINVAL, f"an existing file that is not a {suffix} file (a spec, a "
                      "script, a document?); writing would replace it: name a new file, or a "
                      f"{suffix} one", str(path))


def _begins_with(path: Path, start: bytes) -> bool:
    """Whether the file ``path`` begins with ``start``, whitespace aside (False if unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4 * len(start) + 256)
    except OSError:
        return False
    return b"".join(head.split()).startswith(b"".join(start.split()))


def remove_dead_temps(folder: Path, name: str | None = None) -> int:
    """Remove the atomic writes' temp files (``.<name>.<host>.<pid>.<random>.tmp``) in ``folder``
    (of the file ``name`` only, if given) whose writer of this host is gone; how many. A killed
    writer left them for ever (a benchmark killed while saving its record)."""
    n = 0
    pattern = f".{glob.escape(name)}.*.tmp" if name else ".*.tmp"
    for tmp in folder.glob(pattern) if folder.is_dir() else ():
        parts = tmp.name.split(".")  # ['', name..., host, pid, random, 'tmp']
        try:
            host, pid = parts[-4], int(parts[-3])
        except (IndexError, ValueError):
            continue
        if host == HOST and not pid_alive(pid) and not tmp.is_dir():
            tmp.unlink(missing_ok=True)
            n += 1
    return n


def prepare_target(path: Path, suffix: str | None = None, earlier: bytes = b"") -> None:
    """Before long work whose result goes to ``path`` (a benchmark's ``--json``): create its
    folder and refuse what the atomic write at the end would refuse (a folder or a device in
    its place, a file where a folder of the path belongs, a folder that cannot be written), so
    the message comes before the work, not after minutes of it; and a symbolic link
    (``refuse_linked_output``; ``suffix``: an existing file of another kind too, unless it
    begins as the command's output, ``earlier``)."""
    refuse_linked_output(path, suffix, earlier)
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_replaceable(path)
    remove_dead_temps(path.parent, path.name)  # a killed earlier run's half-written record
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "permission denied", str(path.parent))


def atomic_write_stream(path: Path, write) -> None:
    """Write ``path`` atomically through ``write(binary_file)`` (e.g. a figure's ``savefig``)."""
    _atomic(path, write)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename)."""
    _atomic(path, lambda f: f.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (temp file + fsync + rename)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_save_npy(path: Path, arr: np.ndarray) -> None:
    """``np.save`` to ``path`` atomically (no pickles)."""
    _atomic(path, lambda f: np.save(f, np.ascontiguousarray(arr), allow_pickle=False))


def fsync_dir(path: Path) -> None:
    """fsync a directory, so the names created / renamed in it survive a crash (POSIX; a no-op
    where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


FOLDER_LOCK_WAIT_S = 600.0  # a holder stopped (^Z) longer than this is passed, with a warning
_PASSED_LOCKS: set[str] = set()  # folders whose holder was passed so: not waited for again


@contextlib.contextmanager
def folder_lock(folder: Path, what: str, wait_s: float = FOLDER_LOCK_WAIT_S) -> Iterator[None]:
    """Hold an exclusive lock (flock) on ``folder`` itself while the block runs, so that two
    processes (or threads) doing ``what`` there take turns; no file is made, and the lock goes
    with its process however that ends. A wait is said once on standard error; after ``wait_s``
    seconds (a holder stopped with ^Z) the block runs anyway, with a warning, and later blocks
    of this process on that folder do not wait (`run` writes its table after every pack). Where
    the file system has no such locks (some network ones), it runs without."""
    import fcntl
    import time

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        fd = None
    try:
        passed = str(folder) in _PASSED_LOCKS
        deadline, said = time.monotonic() + (0.0 if passed else wait_s), False
        while fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    if not passed:
                        print(f"warning: {folder}: another process is still {what} after "
                              f"{wait_s:.0f} s (stopped?); going on without waiting for it",
                              file=sys.stderr)
                        _PASSED_LOCKS.add(str(folder))
                    break
                if not said:
                    print(f"waiting for another process {what} {folder} to finish",
                          file=sys.stderr)
                    said = True
                time.sleep(0.05)
            except OSError:  # no locks on this file system
                break
        yield
    finally:
        if fd is not None:
            os.close(fd)


def folder_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder to read from, or None: 'no such folder', 'a file, not a
    folder', a FIFO or device, a symbolic link loop, a path component that is a file (each was
    'no such folder' or 'not a folder', whatever it was)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such folder"
    except NotADirectoryError:
        return "a path component is a file, not a folder"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link loop (a link that leads back to itself)"
        return f"cannot be read ({err.strerror or type(err).__name__})"
    if stat.S_ISDIR(mode):
        return None
    return ("a file, not a folder" if stat.S_ISREG(mode)
            else "a FIFO, device or socket, not a folder")


@contextlib.contextmanager
def hangups_ignored(names: tuple[str, ...]) -> Iterator[None]:
    """Ignore the signals ``names`` (``signals.STOP_SIGNALS``: SIGHUP, and SIGUSR1 / SIGUSR2, a
    batch system's warning) while worker processes and multiprocessing's resource tracker are
    started:
    they keep ignoring it (an ignored signal stays ignored across exec), so a closed terminal's
    hang-up, sent to every process of the command, reaches only the command, which stops its
    workers itself (as on Ctrl-C, which they ignore). The tracker died of it: the command's
    clean-up started a fresh one, which printed a KeyError traceback per queue it was told to
    forget. Outside the main thread (no handler can be set there) it only starts a tracker
    that died again (``tracker_revived``)."""
    import signal
    import threading
    from multiprocessing import resource_tracker

    sigs = [getattr(signal, name) for name in names if hasattr(signal, name)]
    if not sigs or threading.current_thread() is not threading.main_thread():
        tracker_revived()
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    try:
        if not tracker_revived():  # (started quietly where it died)
            resource_tracker.ensure_running()  # (a no-op when it runs already)
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def tracker_revived() -> bool:
    """Where multiprocessing's resource tracker this process uses has died (`kill -9` of it
    during a sweep), start a new one whose standard error is /dev/null, warn that it did and
    return True (False where it runs, or none was started). The queues of the sweep, freed when it
    ended, each told the new tracker to forget a semaphore it never knew: after 'trained N
    runs', a KeyError traceback per queue, and Python's 'resource_tracker: process died
    unexpectedly' warning, exit 0. The runs are not affected (each process removes its own
    semaphores; the tracker only does so for a killed one). Called where workers start and
    where their sweep ends (``hangups_ignored``; ``engine.local``, ``data._workers``), and by
    the tracker itself wherever Python would start it again (``_tracker_quieted``)."""
    import warnings
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    _tracker_quieted(tracker)
    try:  # (the standard library's own probe: a write to the tracker's pipe)
        if getattr(tracker, "_fd", None) is None or tracker._check_alive():
            return False
        pid = getattr(tracker, "_pid", None)
    except (AttributeError, OSError):  # another Python's tracker: left as it is
        return False
    try:
        saved = os.dup(2)
    except OSError:  # no standard error (closed): the new tracker has none to write to either
        saved = None
    try:
        if saved is not None:
            quiet = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(quiet, 2)  # the new tracker's standard error (inherited at its start)
            finally:
                os.close(quiet)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ('process died unexpectedly, relaunching')
            resource_tracker.ensure_running()
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
    warnings.warn(f"multiprocessing's resource tracker{f' (pid {pid})' if pid else ''} died "
                  "while this command ran (killed?); a new one was started, and what this "
                  "command makes is not affected", stacklevel=1)
    return True


def _tracker_quieted(tracker) -> None:
    """Have multiprocessing's resource tracker ``tracker`` start again quietly
    (``tracker_revived``) wherever Python would start it again itself: killed in the moment
    between the check where a pool's sweep ends and the pool's shutdown (or at exit, where
    its queues are freed), Python started it with 'process died unexpectedly, relaunching' and
    a KeyError traceback per semaphore, exit 0. Where this thread is inside the tracker's own
    start already (a queue freed meanwhile), Python's check says so, as before."""
    if getattr(tracker, "_ssmrepro_quiet", False):
        return
    started = type(tracker).ensure_running.__get__(tracker)  # (Python's own)

    def ensure_running():
        count = getattr(tracker._lock, "_recursion_count", lambda: 0)
        if count() or not tracker_revived():
            started()

    tracker.ensure_running = ensure_running  # (its register, unregister and getfd call it)
    tracker._ssmrepro_quiet = True


def worker_start(parent: int, names: tuple[str, ...]) -> None:
    """A pool worker's start (``initializer``): it dies with its parent and ignores the signals
    ``names``, hang-ups and the like (the parent handles them, see ``hangups_ignored``)."""
    import signal

    die_with_parent(parent)
    for name in names:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


def die_with_parent(parent: int) -> None:
    """Linux: ask the kernel to SIGKILL this worker process when its parent dies (a killed command
    must not leave orphans working on, or blocked for ever on a full result pipe); exit at once
    if the parent is already gone."""
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # died while this worker was starting
        os._exit(1)


def extra_hint(extra: str) -> str:
    """How to install the optional extra ``extra``: ``pip install -e '.[extra]'`` (from the
    checkout) or its packages by name, as the installed package's metadata pins them. The
    checkout's command alone was wrong for a package installed with ``pip install .`` and run
    from elsewhere: there is no project to install from."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        reqs = requires("ssmrepro") or []
    except PackageNotFoundError:
        reqs = []
    marker = re.compile(r";\s*extra\s*==\s*[\"']" + re.escape(extra) + r"[\"']\s*$")
    names = [r.split(";", 1)[0].strip() for r in reqs if marker.search(r)]
    hint = f"pip install -e '.[{extra}]'"
    return hint + (f" (or pip install {' '.join(repr(n) for n in names)})" if names else "")


def expand_user(path: str | os.PathLike[str]) -> Path:
    """``Path(path).expanduser()``; a path starting with ``~`` where the home folder is unknown
    (``HOME`` unset and this user id without a passwd entry: a container run as an arbitrary
    user) is an OSError naming it, which commands print as ``cannot use ~/...: ...``, exit 2
    (pathlib's RuntimeError was a traceback: in every `run`, for the planner's cache, and for a
    path option or variable starting with ``~``)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise OSError(errno.ENOENT, f"the home folder is unknown (HOME is unset and user id "
                      f"{os.getuid()} has no passwd entry); set HOME or give the path in full",
                      str(path)) from None


def named_path(text: str, file: bool = False) -> Path:
    """The path an option names (``cli.app.path_value``, ``file_value`` and the benchmarks'
    ``--json``), a ValueError saying why where it reads as a slip: empty (or only spaces: read
    as the current folder), ``-`` (not standard output: a file named '-' was written), a
    ``stray_name``; ``file``: it names a file to write, so a name ending in '/' (or in '.',
    '..') is refused too (`--file out/`, where no folder out existed, wrote a file named
    `out`). A leading ``~`` is the home folder (``expand_user``; an OSError where it is
    unknown)."""
    text = str(text)
    if not text.strip():
        raise ValueError("an empty path; give a folder or file name ('.' for the current folder)")
    if text.strip() == "-":
        raise ValueError("'-' (standard input or output) is not read or written here; give a "
                         "folder or file name (./- for one named '-')")
    path = expand_user(text)
    odd = stray_name(path)
    if odd is not None:
        raise ValueError(f"{text!r}: {odd}")
    rest = text.rstrip()
    if file and (rest.endswith(("/", os.sep))
                 or rest.replace(os.sep, "/").rsplit("/", 1)[-1] in (".", "..")):
        raise ValueError(f"{text!r} names a folder (it ends in '/', '.' or '..'); give a file "
                         "name (e.g. out/results.csv)")
    return path


def env_path(name: str) -> Path | None:
    """The path an environment variable names, None when it is unset or blank. A blank one is
    unset, as an empty ``--out`` is refused: ``SSMREPRO_ROOT=' '`` wrote the results into a
    folder named ' ' in the current folder (printed as ' /results/...', which reads as
    /results), and ``SSMREPRO_CACHE=' '`` the planner's cache likewise."""
    value = os.environ.get(name, "")
    return expand_user(value) if value.strip() else None


def stray_name(path: Path) -> str | None:
    """Why ``path`` reads as a slip, else None: a name of it with spaces at its ends or a control
    character that does not exist yet. `--out '/x/res '` (an env file's `SSMREPRO_OUT=/x/res `,
    `SSMREPRO_DATA=/x/data `) made a folder 'res ' beside res and trained every run again there
    (or generated the data there), printed `figures: /x/res /paper/...`; a line break in a path
    broke the printed path over two lines. An invisible character (a zero-width space, a
    direction mark of text copied beside right-to-left text, a byte-order mark an editor put at
    an env file's start: Unicode's format characters, but the joiners words of some scripts
    hold) is one too: `--out $'/x/res\u200b'` made a folder printed as `/x/res` beside res. One
    that exists is used as named."""
    import unicodedata

    def stray(c: str) -> bool:
        return unicodedata.category(c) == "Cc" or (unicodedata.category(c) == "Cf"
                                                   and c not in "\u200c\u200d")

    for i, name in enumerate(path.parts):
        if name != name.strip() or any(stray(c) for c in name):
            upto = Path(*path.parts[: i + 1])
            try:
                if os.path.lexists(upto):
                    continue
            except (OSError, ValueError):  # (a NUL: the path is refused further on)
                pass
            return (f"the name {name!r} "
                    "has spaces at its ends or a control character (a line break, a tab), or "
                    "an invisible one (a zero-width space, a direction mark), and "
                    f"{str(upto)!r} does not exist: a stray character of a "
                    "copied path or an env file? Give the path without it (or create it first, "
                    "if the name is meant)")
    return None


# the project's own files and folders at its top (its sources, specs, documents, tests and
# settings), that no command writes into: `export --file README.md` (or pyproject.toml,
# Makefile) run in the project folder replaced the file with the table, exit 0
PROJECT_FOLDERS = ("experiments", "ssmrepro", "docs", "tests", "scripts", ".git", ".ci")
PROJECT_FILES = ("README.md", "Makefile", "pyproject.toml", ".gitignore")


def source_tree_problem(root: Path, what: str = "results") -> str | None:
    """Why ``root`` cannot be a results root that commands write into: the project folder itself
    (`figures --out .` replaced the project's README.md with the front page) or one of its own
    files and folders (``PROJECT_FOLDERS``, ``PROJECT_FILES``: its experiments/, package, docs/,
    tests/, scripts/, .git/, README.md, pyproject.toml, ...) or a path inside one (result folders
    among the specs, the code or the documents); None if it can. ``what`` ``"data"``: a folder the
    data commands write into (a data root, `data generate --out`), ``"export"``: the file `export`
    writes; either may lie in the project folder (its data/, the default data root run there, and
    the default export, ./ssmrepro-results.csv): `data generate listops --out ssmrepro/lo` wrote
    the generated data into the package, `data download lra --dir docs` the archive and its folders
    among the documents, `export --file experiments/<paper>/<id>.yaml` replaced a spec with the
    table (exit 0), `export --file README.md` the project's front page. A data root that is the
    project folder itself is refused too: `run` with $SSMREPRO_DATA set to it wrote the dataset
    cache (.cache/) and the data's folders among its files. ``"cache"``: the planner's cost cache
    folder ($SSMREPRO_CACHE, ``engine.costs.cache_file``), refused as a data root is: set to the
    project's docs/ (or a new folder in it), `run` made the folder there and wrote costs.json.
    The checkout this package runs from is such a project too where $SSMREPRO_ROOT names another
    (`export --file <checkout>/ssmrepro/x.csv` wrote into the package), and so is the package's
    own folder wherever it is installed."""
    try:
        where = Path(root).resolve()
    except (OSError, RuntimeError):  # a symbolic link loop (`bench --out loop` raised Python's
        return None  # 'Symlink loop' traceback): no source folder; the folder check names it
    package = Path(__file__).resolve().parent
    for project in guarded_projects():
        why = _project_problem(project, where, root, what)
        if why:
            return why
    if where.is_relative_to(package):  # (installed outside a checkout: site-packages/ssmrepro)
        return f"it is inside the ssmrepro package's folder ({package}); give one outside it"
    return None


def guarded_projects() -> list[Path]:
    """The project folders that commands write nothing into but their results (resolved): the
    one $SSMREPRO_ROOT (or the current folder) names, and the checkout this package runs from
    where it is one."""
    package = Path(__file__).resolve().parent
    found = find_project()
    return list(dict.fromkeys(p.resolve() for p in (found, package.parent)
                              if p is not None and (p is found or _is_project(p))))


def _project_problem(project: Path, where: Path, root: Path, what: str) -> str | None:
    """``source_tree_problem`` for one project folder (``where``: ``root`` resolved)."""
    if where == project and what == "results":
        return (f"it is the project folder {project} (the front page, README.md, and result "
                "folders would be written among its files); the results root is "
                f"{project / 'results'}, or a folder of your own")
    if where == project and what == "data":
        return (f"it is the project folder {project} (the data's folders and its cache, .cache/, "
                "would be written among its files); give a data folder of its own, e.g. "
                f"{project / 'data'}")
    if where == project and what == "cache":
        return (f"it is the project folder {project} (the planner's costs.json would be written "
                "among its files); give a folder of its own, e.g. ~/.cache/ssmrepro")
    # docs/, tests/ and scripts/ too: `figures --out docs` wrote result folders and a front
    # page among the project's documents (tests/: among its test files)
    for name in PROJECT_FILES:  # (a path below one: the folder check names the file)
        if where == project / name:
            return (f"it is the project's own {name} ({project / name}), a file of its sources; "
                    "give another " + ("file" if what == "export" else "folder"))
    for sub in PROJECT_FOLDERS:
        if not where.is_relative_to(project / sub):
            continue
        kind, e_g = {"data": ("a data folder", project / "data"),
                     "export": ("a file", project / Path(root).name),
                     "cache": ("a folder", "~/.cache/ssmrepro")}.get(
            what, ("a results folder", project / "results"))
        return (f"it is inside the project's {sub}/ folder ({project / sub}); give {kind} "
                f"outside it, e.g. {e_g}")
    return None


class NoProject(LookupError):
    """No project folder (experiments/, results/) to read specs from or write results into by
    default: ``SSMREPRO_ROOT`` unset, none in or above the current folder, and this package
    installed outside a checkout (``pip install .``, not ``-e``). The CLI shows it as an error,
    exit 2."""


def _is_project(p: Path) -> bool:
    return (p / "experiments").is_dir() and (p / "ssmrepro").is_dir()


def find_project() -> Path | None:
    """Folder holding experiments/: $SSMREPRO_ROOT, else the cwd or a parent of it that holds
    experiments/ and ssmrepro/, else the source tree this package is imported from (an editable
    install's checkout); None where there is none. A package installed with ``pip install .``
    lies in site-packages, which is no project: its parent was taken for one, and `run` of a spec
    given by its path wrote its results into site-packages/results."""
    env = env_path(ROOT_ENV)
    if env is not None:
        return env
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if _is_project(p):
            return p
    source = Path(__file__).resolve().parents[1]
    return source if _is_project(source) else None


def repo_root() -> Path:
    """:func:`find_project`'s folder; :class:`NoProject` where there is none."""
    root = find_project()
    odd = stray_name(root) if root is not None and env_path(ROOT_ENV) is not None else None
    if odd is not None and not (root / "experiments").is_dir():  # a line break of an env file
        # broke the refusal below over two lines, naming '/x/proj' and ', which holds no ...'
        raise NoProject(f"${ROOT_ENV}={os.environ[ROOT_ENV]!r}: {odd}")
    if root is not None and env_path(ROOT_ENV) is not None and not (root / "experiments").is_dir():
        # a mistyped or too deep $SSMREPRO_ROOT: `run <spec file>` (no --out) made a results
        # tree there without a word
        raise NoProject(f"{root / 'experiments'}: no experiment specs here (${ROOT_ENV} is {root}, "
                        "which holds no experiments/ folder); set it to the project folder")
    if root is None:
        raise NoProject(
            f"no project folder: ${ROOT_ENV} is unset, neither {Path.cwd()} nor a folder above it "
            f"holds experiments/ and ssmrepro/, and this ssmrepro ({Path(__file__).resolve().parent}) "
            f"is installed outside a checkout; run from the project folder or set {ROOT_ENV} to it "
            "(a spec given by its path, reusing no spec by id, also runs with --out DIR)")
    return root


class DataUnavailable(RuntimeError):
    """The requested data is not on disk (we never download implicitly); ``data.sources``
    exports it (defined here, below the data layer, for :func:`data_root`).

    The message is one paragraph naming the task, the sources that were accepted, where we looked,
    and the exact ``ssmrepro data ...`` command(s) that would provide the data.
    """


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: ``root`` if given, else ``$SSMREPRO_DATA``, else ``./data``. It need not
    exist (loaders raise DataUnavailable naming the command that provides the data). One that is
    the project folder or lies among its sources (``source_tree_problem``) is DataUnavailable:
    `run` with $SSMREPRO_DATA set to the project's docs/ (its .git/, the project folder) wrote
    the dataset's cache there."""
    if root is not None and str(root) != "":
        path = expand_user(root)
        named = f"the data root {path}"
    else:
        env = env_path(DATA_ENV)
        odd = stray_name(env) if env is not None else None
        if odd is not None:  # `data generate` wrote a new data root 'data ', runs found no data
            raise DataUnavailable(f"${DATA_ENV}={os.environ[DATA_ENV]!r}: {odd}")
        path = env or Path("data")
        named = f"${DATA_ENV}={os.environ[DATA_ENV]!r}" if env else (
            f"the default data root ./data (data/ of the current folder, {Path.cwd()})")
    why = source_tree_problem(path, "data")
    if why and named.startswith("the default"):  # run from the project's docs/ (tests/, ...):
        # 'give a data folder' named no way to give one to `run`
        why += f": run from the project folder, or set ${DATA_ENV} (a data command's --dir) to it"
    if why:
        raise DataUnavailable(f"{named}: {why}")
    return path


def cpu_model() -> str:
    """The CPU's model name (for benchmark records and the planner's cost cache)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def memory_available() -> int | None:
    """Bytes this process could still allocate in main memory: the kernel's MemAvailable
    (Linux) or free physical pages; None where unknown (``train.available_memory`` on CPU, and
    the data layer's checks of what it would hold)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def release_memory() -> bool:
    """glibc only: hand the heap's free pages back to the kernel (``malloc_trim(0)``). After
    ``tune_malloc`` a process keeps its peak resident for good: a dry run that timed a 15 GB step
    held 17 GB it no longer used, and MemAvailable (what the next shape is sized by) fell with
    it. Returns False where malloc_trim is unavailable."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


def tune_malloc() -> bool:
    """glibc only: serve big blocks from the heap and never trim it (avoids page-fault storms).

    Freshly mmap'd pages cost a page fault each (~0.8 ms per MiB on the 2-core VM); PyTorch's CPU
    allocator asks malloc for every activation, so without this every multi-MiB tensor of a step
    is faulted in again. Process-wide side effect; returns False where mallopt is unavailable.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = libc.mallopt(m_mmap_threshold, 1 << 30) == 1
    return ok and libc.mallopt(m_trim_threshold, 1 << 31) == 1


def blank_home_unset() -> None:
    """A blank ``HOME`` (``HOME=`` in an env file, a service unit or ``docker run -e HOME=``) is
    unset, as a blank ``SSMREPRO_ROOT`` is: the home folder is then the user's passwd entry's,
    or unknown (``expand_user``). Python reads a blank HOME as '/', so matplotlib made
    /.cache/matplotlib (or warned that it could not, and used a temporary folder per command)
    and the planner's cost cache was /.cache/ssmrepro: writes at the root of the file system.
    Called at the command line's start-up, before matplotlib is loaded; worker processes
    inherit the environment."""
    if "HOME" in os.environ and not os.environ["HOME"].strip():
        del os.environ["HOME"]


CONSOLE_WIDTHS = range(5, 10_001)  # console widths kept: a message fits, a line is not huge


def unreadable_widths_unset() -> None:
    """A console width the consoles cannot use is unset at start-up, so the width is the
    terminal's (80 where there is none): ``COLUMNS=0`` (or ``00``), which rich read as a
    console 0 characters wide and printed nothing in (every message, an error's included:
    `show nosuch` exited 2 in silence, `--help` printed a blank line), and a ``TERMINAL_WIDTH``
    (typer's cap on the help's width) that is not a whole number above 0: ``abc`` or blank was
    a ValueError traceback at `--help` or a mistyped option, exit 1, and ``0`` printed an empty
    help. Either outside ``CONSOLE_WIDTHS`` too: in 1 to 4 columns an error's panel (its borders
    and padding take 4) held no character of its message, and rich pads each line to the width:
    ``COLUMNS=99999999999`` was a MemoryError traceback at `--help` (an OverflowError past
    2**63). Called at the command line's start-up, before the consoles exist; worker processes
    inherit the environment. A ``COLUMNS`` or ``LINES`` that rich takes for digits
    (``str.isdigit``) and ``int`` cannot read is unset too: ``²`` or ``①`` (digits to isdigit,
    not to int) or a number of over 4,300 digits (int's limit) was a ValueError traceback at
    start-up, exit 1, whatever the command."""
    for name in ("COLUMNS", "LINES"):  # (rich reads digits only; `abc` it ignores)
        value = os.environ.get(name, "5")
        if value.isdigit() and not (whole_number(value) in CONSOLE_WIDTHS or name == "LINES"
                                    and whole_number(value) is not None):
            del os.environ[name]
    cap = os.environ.get("TERMINAL_WIDTH")
    if cap is not None and whole_number(cap) not in CONSOLE_WIDTHS:
        del os.environ["TERMINAL_WIDTH"]


def first_few(items: list[str], n: int = 3) -> str:
    """``items`` as a warning about many names them: the first ``n`` joined by '; ' and the
    count of the rest ('a; b; c; and 3,997 more'), so one line stands for thousands."""
    more = f"; and {len(items) - n:,} more" if len(items) > n else ""
    return "; ".join(items[:n]) + more


def whole_number(text: str) -> int | None:
    """``text`` as a whole number of at most 18 digits (spaces at its ends allowed, as int
    allows them), None where it is not one: ``int`` refuses digits that are not decimal (``²``,
    which ``str.isdigit`` accepts) and numbers of over 4,300 digits."""
    text = text.strip()
    return int(text) if text.isdecimal() and len(text) <= 18 else None


def open_standard_streams() -> None:
    """Point standard input, output and error at /dev/null where the command was started with
    them closed (`ssmrepro run ... >&-`, `2>&-`, a daemon's closed descriptors). Python leaves
    such a stream None: the command line died at import with an AttributeError traceback, exit 1
    (`>&-`), or could not print its error and exited 1 for a bad input (`2>&-`); and the first
    file opened took the free descriptor 1 or 2, where anything writing to standard output or
    error (a spawned worker, a C library) would have written into that file. An output open
    only for reading (bash runs a script started with `2>&-` with its own file there) is one
    no line can be written to: an error's line failed, and the exit code of bad input became 1."""
    import fcntl

    for fd in (0, 1, 2):
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            if fd == 0 or flags & os.O_ACCMODE != os.O_RDONLY:
                continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: fd itself, if lower
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


# what this command has said once already (``first_time``): a command reads one store in
# several Store objects (`run`: its runs, then its outputs) and draws one title in each profile's
# figures (`figures`), and said such a warning each time; ``new_command`` (``cli.app.guard``, at
# each command's start: a process may run several commands) forgets it, and ``end_command`` (at
# its end) leaves no command running: None, where nothing is said once
_SAID: set[str] | None = None


def new_command() -> set[str] | None:
    """Forget what earlier commands of this process said once (``first_time``); returns what
    the command running until now had said, for ``end_command``."""
    global _SAID
    outer, _SAID = _SAID, set()
    return outer


def end_command(outer: set[str] | None = None) -> None:
    """The command ends: what it said once is forgotten (``outer``: ``new_command``'s answer,
    a command run inside another, whose own is back)."""
    global _SAID
    _SAID = outer


def first_time(key: str) -> bool:
    """Whether this command has not said ``key`` yet (from now on it has): a warning said
    once per command, however many stores, profiles or figures meet it. Outside a command
    (ssmrepro's functions called from Python: a notebook) every time: nothing is remembered
    there, so no warning is said once for the life of the process, never again, and no set
    grows with every distinct message a long-lived process meets."""
    if _SAID is None:
        return True
    if key in _SAID:
        return False
    _SAID.add(key)
    return True


def plain_warnings() -> None:
    """Print the project's own warnings (``warnings.warn`` in ssmrepro: a damaged data cache entry
    rebuilt, data without a generator's provenance) as its other warnings are printed,
    ``warning: <message>``; they came in Python's default form (``/path/datasets.py:544:
    UserWarning: ...`` and the source line ``loaded = load_entry(...)``). Other packages'
    warnings keep theirs. Set by the command line and its worker processes."""
    import warnings

    own = str(Path(__file__).resolve().parent)
    default = getattr(warnings.formatwarning, "default", warnings.formatwarning)

    def formatwarning(message, category, filename, lineno, line=None) -> str:
        if str(filename).startswith(own):
            return f"warning: {message}\n"
        return default(message, category, filename, lineno, line)

    formatwarning.default = default  # type: ignore[attr-defined]  (set twice: one wrapper)
    warnings.formatwarning = formatwarning


def flush_denormals() -> bool:
    """Flush denormal floats to zero (the CPU's FTZ/DAZ modes) on this thread; False where the
    CPU has no such mode. Training processes, the planner's calibration and the benchmarks set
    it, like JAX/XLA on CPU do by default.

    Why: decays exp(Δ A) and softmax tails of tiny models reach the denormal range (< 1.2e-38 in
    float32), where x86 arithmetic is tens of times slower: exp2 of results below 2^-126 took
    3.7x as long as of normal ones on the 2-core EPYC VM, and a KEEP n-TH pack of 64's read-out
    and loss 21 ms instead of 15. Numerics: a value that would be denormal becomes 0; nothing
    else changes (float64: below 2.2e-308).
    """
    import torch

    return bool(torch.set_flush_denormal(True))


class NotSmallFile(OSError):
    """A file that is not a regular file (a folder, FIFO, device or, unless followed, a symbolic
    link) or is larger than its kind can be."""


def load_array(source: Any, **kw: Any) -> Any:
    """``np.load(source, **kw)`` whose failure on a damaged .npy header is a ValueError, as its
    other failures on damaged data are: a changed byte that leaves the header's text unclosed
    made numpy's tokenizer raise ``tokenize.TokenError`` (not a ValueError), a traceback where
    the callers take a ValueError for a damaged file (a data cache entry, a Pathfinder shard or
    metadata file). A header that declares more data than the file holds (a changed byte in its
    shape: 2**40 elements in a file of 128 bytes) is a ValueError saying so before anything is
    allocated: numpy allocated the declared size first, a MemoryError ('out of memory') that
    ended the command instead of the damaged file being named, rebuilt or passed over."""
    import tokenize

    try:
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                why = npy_size_problem(f, os.fstat(f.fileno()).st_size)
        else:
            start = source.tell()
            size = source.seek(0, os.SEEK_END) - start
            try:
                source.seek(start)
                why = npy_size_problem(source, size)
            finally:
                source.seek(start)
        if why is not None:
            raise ValueError(why)
        return np.load(source, **kw)
    except tokenize.TokenError as err:
        raise ValueError(f"a damaged .npy header ({err.args[0] if err.args else err})") from None


def npy_size_problem(fp: Any, size: int) -> str | None:
    """Why the .npy file read from ``fp`` (its ``size`` bytes from where it is now) cannot hold
    the array its header declares (its shape and dtype need more bytes than follow the header),
    else None (also where it is no .npy, its header cannot be read or its array is pickled
    objects: ``np.load`` says what it is). Reads the header only (``load_array``, the arrays
    of a figure's .npz: ``plots.mechanistic.unpack``)."""
    import tokenize

    from numpy.lib import format as npy

    start = fp.tell()
    try:
        version = npy.read_magic(fp)
        read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, _, dtype = read(fp)
    except (ValueError, TypeError, SyntaxError, EOFError, tokenize.TokenError):
        return None
    if dtype.hasobject:
        return None
    need, have = math.prod(shape) * dtype.itemsize, size - (fp.tell() - start)
    if need <= have:
        return None
    return (f"a damaged .npy file: its header declares an array of shape {tuple(shape)} "
            f"({need:,} bytes of {dtype}) where {max(0, have):,} bytes follow it")


def read_small(path: Path, limit: int, follow_links: bool = False) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; NotSmallFile otherwise
    (a FIFO or a link to /dev/zero would never end). Without ``follow_links`` a symbolic link is
    refused too. FileNotFoundError passes through.

    Reads what the file holds, not ``limit`` bytes: ``f.read(n)`` reserves n bytes before it
    reads, so every table read (limit 1 GiB) took a gigabyte of address space, and under an
    address-space limit (``ulimit -v 1500000``, a batch system's memory cap) `run` ended in a
    MemoryError traceback after training, where its records took a few kB."""
    import stat

    st = os.stat(path) if follow_links else os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotSmallFile("a symbolic link" if stat.S_ISLNK(st.st_mode) else
                           "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file")
    if st.st_size > limit:
        raise NotSmallFile(f"{st.st_size:,} bytes, larger than {limit:,}")
    with open(path, "rb") as f:
        blocks = [f.read(st.st_size + 1)]  # the whole file, and the byte that says it grew
        size = len(blocks[0])
        while size > st.st_size and size <= limit:  # it grew since the stat: read on, in
            block = f.read(min(limit + 1 - size, 1 << 20))  # bounded steps, up to the limit
            if not block:
                break
            blocks.append(block)
            size += len(block)
    data = b"".join(blocks) if len(blocks) > 1 else blocks[0]
    if len(data) > limit:
        raise NotSmallFile(f"larger than {limit:,} bytes")
    return data


class _NotANumber:
    """Stands in for a boolean given where a field takes only numbers: the field's own validation
    then reports it ('model.d_model: Input should be a valid integer')."""

    def __repr__(self) -> str:
        return "a boolean (true / false)"


def _unbool(tp, value):
    """``value`` with every boolean where ``tp`` takes only numbers replaced by a
    ``_NotANumber`` (items of lists and tuples too); the same object when there is none."""
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unbool(typing.get_args(tp)[0], value)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if isinstance(value, bool):
            numeric = any(_unbool(a, value) is not value for a in arms)
            return _NotANumber() if numeric and not any(_takes_bool(a) for a in arms) else value
        seqs = [a for a in arms if typing.get_origin(a) in (list, tuple)]
        return _unbool(seqs[0], value) if len(seqs) == 1 else value
    if isinstance(value, bool):
        if origin is typing.Literal:
            args = typing.get_args(tp)
            numeric = not any(isinstance(a, bool) for a in args) and any(
                isinstance(a, (int, float)) for a in args)
            return _NotANumber() if numeric else value
        return _NotANumber() if tp in (int, float) else value
    if isinstance(value, (list, tuple)) and origin in (list, tuple):
        items = [a for a in typing.get_args(tp) if a is not Ellipsis] or [object]
        new = [_unbool(items[min(i, len(items) - 1)], v) for i, v in enumerate(value)]
        return type(value)(new) if any(a is not b for a, b in zip(new, value)) else value
    return value


def _takes_bool(tp) -> bool:
    import typing

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _takes_bool(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(tp))
    return tp in (bool, typing.Any, object)


MAX_DRAWN_TEXT = 300  # characters of a title or axis / legend text drawn on a figure
# (the longest shipped title is 118): a 200,000-character title took 30 s to draw, its lines
# wrapped to the figure's width


def plain_rst(text: str | None) -> str:
    """A docstring as terminal help text: the rST of our docstrings (``code``, :func:`name`,
    a paragraph ending in ``Example::``) printed as written was markup on the screen (``bench
    scans --help``: ``diag``, :func:`ssmrepro.bench.timing.interleaved`). Double backticks
    become single ones, a role keeps its target, '::' ending a line becomes ':'; the layout
    (line breaks, indentation) is kept."""
    if not text:
        return ""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)  # :func:`x`, :mod:`~a.b`
    text = re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)
    return re.sub(r"(\S)::$", r"\1:", text, flags=re.M)


def docstring(obj: Any) -> str | None:
    """``obj.__doc__`` (a module, class or function), or under ``python -OO``
    (``PYTHONOPTIMIZE=2``), which strips docstrings, the docstring read from its source file:
    every command's ``--help`` and the ``list-*`` summaries were blank there, and the scripts that
    build their usage from their docstring died with an AttributeError traceback."""
    if obj is None:  # (a script loaded without a module entry: sys.modules.get gave None)
        return None
    doc = getattr(obj, "__doc__", None)
    if doc is not None or sys.flags.optimize < 2:
        return doc
    import inspect

    try:
        path = inspect.getsourcefile(obj)
    except TypeError:  # a builtin: no source
        return None
    if not path:
        return None
    tree = _parsed_source(path)
    if tree is None:
        return None
    if inspect.ismodule(obj):
        return ast_docstring(tree)
    want = getattr(obj, "__qualname__", None)
    code = getattr(obj, "__code__", None)
    found = [(node, lines) for node, name, lines in _definitions(tree, "") if name == want]
    for node, lines in found:  # two definitions of one name (a branch): the one whose code this is
        if code is None or code.co_firstlineno in lines:
            return ast_docstring(node)
    return None


def ast_docstring(node: Any) -> str | None:
    import ast

    return ast.get_docstring(node, clean=False)


def _definitions(node: Any, prefix: str) -> Iterator[tuple[Any, str, set[int]]]:
    """Every class and function under ``node``: (node, qualified name, its first lines)."""
    import ast

    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            lines = {child.lineno, *(d.lineno for d in child.decorator_list)}
            yield child, name, lines
            inner = f"{name}.<locals>." if not isinstance(child, ast.ClassDef) else f"{name}."
            yield from _definitions(child, inner)
        else:
            yield from _definitions(child, prefix)


_SOURCES: dict[str, Any] = {}


def _parsed_source(path: str) -> Any:
    """The parsed module at ``path`` (once per file), or None where it cannot be read."""
    import ast

    if path not in _SOURCES:
        try:
            _SOURCES[path] = ast.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            _SOURCES[path] = None
    return _SOURCES[path]


def list_leaves(value: Any) -> tuple[list[Any], int]:
    """The values of ``value`` read through its nested lists, in order, and how deep the lists
    nest (0: one value, 1: a list of values, ...): a `where` value's any-of values. Read through
    a stack (a list nested 900 deep, which YAML reads, was a RecursionError traceback)."""
    leaves: list[Any] = []
    deepest, todo = 0, [(value, 0)]
    while todo:
        v, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(v, (list, tuple)):
            todo.extend((x, depth + 1) for x in reversed(v))
        else:
            leaves.append(v)
    return leaves, deepest


def doc_summary(doc: str | None) -> str:
    """A registered entry's one-line summary (``list-figures``, ``list-checks``): the first
    paragraph of its docstring on one line, its rST plain (``plain_rst``). The docstring's first
    line cut a sentence that goes on to the next ('the paper's value as a black')."""
    first = (doc or "").strip().split("\n\n")[0]
    return " ".join(plain_rst(first).split())


MAX_NAME_SHOWN = 80  # characters of a name (a key, a task's name) a problem line shows


def repeated(items: Iterable[Any]) -> Any:
    """The first of ``items`` (hashable) that comes again, or None: the one check of the lists
    that name each entry once (a figure's columns, a spec's reuse and analyses, a claim's
    preconditions). In one pass: a copy-by-copy comparison of 100,000 column names in a 1 MiB
    spec took tens of seconds of `validate`."""
    seen: set[Any] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def short_name(name: Any) -> str:
    """``name`` as a problem line names it: a long one cut, its length said (two unknown keys of
    100,000 characters printed a line of 200 kB, a task name of as many a line of 100 kB). A
    character that is not printable is shown escaped, as Python writes it in a string (a task
    name 'keep_nth\n' from a YAML block scalar, or one holding '\nerror: ...', broke its
    problem line in two, the second read as a line of its own)."""
    if not isinstance(name, str):  # (a spec's value that is no text: a len() TypeError)
        name = repr(name)
    n = len(name)
    if not name.isprintable():
        name = "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)
    if len(name) <= MAX_NAME_SHOWN:
        return name
    return f"{name[:MAX_NAME_SHOWN - 20]}… ({n:,} characters)"


MAX_LINE_SHOWN = 8_000  # characters of one printed error line: any path (4,096 at most) whole


def bounded_line(text: str, limit: int = MAX_LINE_SHOWN) -> str:
    """``text`` as one printed error line: past ``limit`` characters its middle is cut and the
    cut counted, the start and end kept (what names the file and the reason). A name nobody
    cut where it was quoted (a figure kind, a layer name or a column of 100,000 characters)
    printed a line of 100 kB; ``short_name`` cuts the names a problem line knows it quotes."""
    if len(text) <= limit:
        return text
    # the mark counted in: start and end of limit characters beside it made lines of 8,038
    room = max(limit - len(f"… ({len(text):,} characters cut) …"), 0)
    head, tail = room * 3 // 4, room - room * 3 // 4
    return (f"{text[:head]}… ({len(text) - head - tail:,} characters cut) …"
            f"{text[len(text) - tail:]}")


ERROR_MARK = "error: "  # what an error line starts with, within its MAX_LINE_SHOWN


def error_line(text: str) -> str:
    """``text`` as the rest of a printed ``error: ...`` line (``bounded_line``, the mark
    counted in)."""
    return bounded_line(text, MAX_LINE_SHOWN - len(ERROR_MARK))


def drawable(text: str) -> str:
    """``text`` if matplotlib can draw it: between a pair of ``$`` it reads TeX math (the
    shipped titles' ``$e^{-\\lambda\\Delta_t}$``), and math it cannot parse (``$\\foo{$``)
    raised ValueError while the figure was drawn, after training. ValueError naming the
    problem otherwise."""
    if "$" not in text:
        return text
    from matplotlib import cbook, mathtext

    if not cbook.is_math_text(text):  # one $ (or escaped ones): drawn as written
        return text
    try:
        mathtext.MathTextParser("path").parse(text)
    except ValueError as err:
        why = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        raise ValueError(f"{text!r} cannot be drawn: matplotlib reads what lies between its $ "
                         f"signs as TeX math, and {why[-1] if why else 'cannot parse it'} "
                         "(write \\$ for a dollar sign)") from None
    return text


DrawnText = Annotated[str, StringConstraints(max_length=MAX_DRAWN_TEXT),
                      AfterValidator(drawable)]

# a title's one placeholder: `{seeds}` is drawn as how the figure draws its seeds ('mean of 3
# seeds', 'best of seeds', 'one seed'), of the profile drawn; `{{word}}` draws `{word}`. Any
# other word in braces is refused (a typo, `{seed}`, was drawn as written); every other brace
# (`{256, 512}`, TeX math's between $ signs) is drawn as written. Braces around a word pair as
# Python's str.format pairs them: each `{{` and `}}` is one brace drawn, and what is left, one
# on each side, makes a placeholder (`{{{seeds}}}` draws `{mean of 3 seeds}`; it drew
# `{{seeds}}`, the placeholder neither filled nor unescaped); a brace of one side left unpaired
# is drawn as written
SEEDS_PLACEHOLDER = "{seeds}"
_BRACED = re.compile(r"(\{+)(\s*[^\W\d]\w*\s*)(\}+)")  # ({ seeds }: a typo)


def _braced(m: re.Match) -> tuple[str, str | None, str]:
    """(braces drawn before, the placeholder's word or None, braces drawn after) of a word in
    braces matched by ``_BRACED``."""
    n, k = len(m.group(1)), len(m.group(3))
    pair = min(n, k)
    return ("{" * (n - pair + pair // 2), m.group(2) if pair % 2 else None,
            "}" * (pair // 2 + k - pair))


def _outside_math(text: str, change: Any) -> str:
    """``text`` with ``change`` applied to its parts outside TeX math: between a pair of
    unescaped ``$`` where matplotlib reads math (an even number of them), as a whole otherwise."""
    if len(re.findall(r"(?<!\\)\$", text)) % 2:  # one $ (or three): no math (drawable)
        return change(text)
    parts = re.split(r"((?<!\\)\$.*?(?<!\\)\$)", text, flags=re.DOTALL)
    return "".join(p if i % 2 else change(p) for i, p in enumerate(parts))


def _placeholders(text: str) -> list[str]:
    """The placeholders' words of ``text`` (a title), outside math, in order."""
    found: list[str] = []
    _outside_math(text, lambda part: found.extend(
        w for w in (_braced(m)[1] for m in _BRACED.finditer(part)) if w is not None) or part)
    return found


def has_seeds_placeholder(text: str) -> bool:
    """Whether ``text`` (a title) holds ``{seeds}`` outside math, to be filled."""
    return "seeds" in _placeholders(text)


def seeds_in_math(text: str) -> bool:
    """Whether ``text`` (a title) holds ``{seeds}`` inside TeX math, where it is not filled
    (its braces are TeX's group: ``$acc_{seeds}$``)."""
    if len(re.findall(r"(?<!\\)\$", text)) % 2:  # (no math: ``_outside_math``)
        return False
    parts = re.split(r"((?<!\\)\$.*?(?<!\\)\$)", text, flags=re.DOTALL)
    return any(SEEDS_PLACEHOLDER in p for p in parts[1::2])


def fill_seeds(text: str, words: str) -> str:
    """``text`` (a title) with ``{seeds}`` drawn as ``words`` (capitalised where it opens the
    title) and ``{{word}}`` as ``{word}``, outside math (``_BRACED``)."""
    def one(m: re.Match) -> str:
        left, name, right = _braced(m)
        if name is None:
            return left + m.group(2) + right
        if name != "seeds":  # (refused by title_text)
            return m.group(0)
        return left + words + right
    out = _outside_math(text, lambda part: _BRACED.sub(one, part))
    return out[:1].upper() + out[1:] if text.startswith(SEEDS_PLACEHOLDER) else out


def title_text(text: str) -> str:
    """``text`` if its only placeholder is ``{seeds}``; ValueError naming the first other."""
    bad = [f"{{{w}}}" for w in _placeholders(text) if w != "seeds"]
    if bad:
        raise ValueError(f"unknown placeholder {short_name(bad[0])}: a title fills only "
                         f"{SEEDS_PLACEHOLDER} (how the figure draws seeds, e.g. 'mean of 3 "
                         f"seeds'); write {{{short_name(bad[0])}}} for the braces as written")
    return text


TitleText = Annotated[DrawnText, AfterValidator(title_text)]


def refuse_unread(cfg: Any, unread: list[tuple[str, str]], defaults: dict[str, Any] | None = None,
                  what: str = "the same model") -> None:
    """Raise ValueError for the first field of ``unread`` ((field, why) pairs: the fields that
    ``cfg``'s other settings never let the built model or loader read) set away from its default
    (``defaults``, else the pydantic field's): such a key trained ``what`` as the default under
    another run id, and its label said otherwise. Model, mixer and LRA task configs share it."""
    fields = type(cfg).model_fields if defaults is None else {}  # (a property: read once)
    for key, why in unread:
        value = getattr(cfg, key)
        default = (defaults[key] if defaults is not None
                   else fields[key].get_default(call_default_factory=True))
        if value != default:
            raise ValueError(f"{key} {value!r} is not read {why}: the run would train {what} "
                             f"as without it under another run id; leave {key} out")


class NoBoolNumbers(BaseModel):
    """Base of the typed configurations: a boolean where a field takes only numbers (``d_model:
    true``, ``seeds: [true]``, ``--set task.n=true``) fails that field's validation instead of
    being read as 1 or 0, which pydantic does by itself."""

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = None
        fields = cls.model_fields  # (a property that pydantic builds on each read: once, not a
        #                            key; with the value's type first, this check took 30% of a
        #                            paper profile's dry run, every config built and rebuilt)
        for key, value in data.items():
            if not isinstance(value, (bool, list, tuple)):
                continue
            f = fields.get(key) if isinstance(key, str) else None
            if f is None:
                continue
            new = _unbool(f.annotation, value)
            if new is not value:
                out = dict(data) if out is None else out
                out[key] = new
        return data if out is None else out


def config_memo(size: int = 1024) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(cfg, *args)`` remembered for the last ``size`` calls, for what a frozen
    config always gives the same answer to (``ModelConfig.to_backbone``, ``models.param_count``):
    ``cfg`` and ``args`` told apart by value where they hash (a frozen config hashes its
    fields: the sweep's equal configs are distinct objects), else ``cfg`` by identity (one that
    holds a list or a mapping; kept alive, so that its id names it while remembered). The
    planner estimated each shape's memory about six times, each building the backbone's
    configs a dozen times and its model on the meta device: 100 s of koren2026-fig6's 4,512
    shapes under ``--profile paper``, before a run was timed."""
    def wrap(fn: Callable) -> Callable:
        memo: dict[tuple, tuple[Any, Any]] = {}
        lock = threading.Lock()

        @functools.wraps(fn)
        def remembered(cfg, *args):
            key: tuple = (type(cfg), cfg, *args)
            by_id = False
            try:
                hash(key)
            except TypeError:
                key, by_id = (type(cfg), id(cfg), *args), True
                try:
                    hash(key)
                except TypeError:  # an argument that does not hash: not remembered
                    return fn(cfg, *args)
            with lock:
                hit = memo.get(key)
            if hit is not None and (not by_id or hit[0] is cfg):
                return hit[1]
            out = fn(cfg, *args)
            with lock:
                while len(memo) >= size:
                    memo.pop(next(iter(memo)))
                memo[key] = (cfg, out)
            return out

        return remembered

    return wrap


REGISTERED_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a mixer's, figure kind's or check's name


def check_registration(what: str, name: Any, Config: Any, base: type[BaseModel], tag: str,
                       registry: dict) -> None:
    """Raise ValueError for a registration that a registry (mixers, figure kinds, checks) took
    without a word and got wrong later: a name that is not a plain lower-case identifier (a mixer
    config without a default name was registered under pydantic's undefined marker, and every
    later 'unknown mixer' message failed with a TypeError), one registered already, a config
    class not derived from ``base``, one that accepts unknown keys (a misspelt field was dropped)
    or is not frozen, or one whose ``tag`` field (``name``, ``kind``, ``check``) refuses the name
    (every use of the entry failed validation)."""
    if not (isinstance(Config, type) and issubclass(Config, base)):
        raise ValueError(f"{what} config {Config!r} is not a {base.__name__}")
    if not isinstance(name, str) or not REGISTERED_NAME.fullmatch(name):
        raise ValueError(f"{what} name {name!r} (config {Config.__name__}) is not a lower-case "
                         "identifier (letters, digits and _, starting with a letter)")
    if name in registry:
        raise ValueError(f"{what} {name!r} registered twice")
    cfg = Config.model_config
    if cfg.get("extra") != "forbid" or not cfg.get("frozen"):
        raise ValueError(f"{what} {name!r}: its config {Config.__name__} must reject unknown keys "
                         "and be frozen (model_config extra='forbid', frozen=True)")
    ann = Config.model_fields[tag].annotation
    if typing.get_origin(ann) is typing.Literal and name not in typing.get_args(ann):
        raise ValueError(f"{what} {name!r}: its config {Config.__name__}'s {tag} field takes only "
                         f"{', '.join(map(repr, typing.get_args(ann)))}")


def strict_json(o: Any) -> Any:
    """Replace NaN/inf by None so records are strict JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: strict_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [strict_json(v) for v in o]
    return o


def encode_cell(v: Any) -> Any:
    """Lists and mappings as JSON text (``[0.9, 0.999]``), never Python reprs: how every table
    (CSV, report table) writes them, and YAML reads them back as the same list."""
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(strict_json(v), separators=(", ", ": "))
    return v


def pairs_text(pairs: Any) -> str:
    """``k=v, ...`` of (key, value) pairs (a mapping's ``.items()``), each value as the tables
    write it (``encode_cell``): a verdict's ``label=['MQA', 'MKA']`` read otherwise than the
    table's ``["MQA", "MKA"]``, and than YAML would take back."""
    return ", ".join(f"{k}={encode_cell(v)}" for k, v in pairs)


def norm(v: Any) -> Any:
    """A hashable, type-insensitive form of a cell value (CSV round trips change types)."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        try:
            f = float(v)
        except OverflowError:  # an integer beyond any float: itself (equal to its own digits)
            return str(v)
        return None if math.isnan(f) else f
    if isinstance(v, str):
        if v in ("True", "False"):
            return float(v == "True")
        try:
            f = float(v)
        except ValueError:
            return v
        return None if math.isnan(f) else f
    if isinstance(v, (list, tuple)):
        return tuple(norm(x) for x in v)
    return str(v)
