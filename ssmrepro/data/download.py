"""Library (data): explicit, resumable downloads and re-layout of the LRA release, CIFAR-10 and IMDB.

Nothing here runs implicitly: only ``ssmrepro data download ...`` calls it.

- ``download_file`` streams ``http(s)://`` or ``file://`` URLs into ``<dest>.part``; a later call
  for the same URL (``<dest>.part.url``; or any, when a checksum is known) resumes from the
  partial file (HTTP ``Range``; servers that ignore it restart from zero), then
  checks the size and the SHA-256 / MD5 when known and renames the file into place. A checksum
  mismatch deletes the partial file (it is corrupt) and raises ``DownloadError``.
- ``install_*`` extract an archive safely (no absolute paths, no ``..``, no links) and move the
  folders the loaders expect into place: ``<root>/lra/{listops-1000, tsv_data, pathfinder32, ...}``,
  ``<root>/cifar-10-batches-py``, ``<root>/imdb/aclImdb``.
"""

from __future__ import annotations

import errno
import http.client
import os
import shutil
import stat
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..util import (
    atomic_write_text,
    dead_scratch,
    file_digest,
    fsync_dir,
    read_small,
    scratch_folder,
    whole_number,
)
from .sources import downloads_dir, lra_dir

USER_AGENT = "ssmrepro-data/1.0 (+https://github.com)"


class DownloadError(RuntimeError):
    """A download or an extraction failed; the message says what to do next."""


class NoRetry(DownloadError):
    """A failure that no re-run helps (exit 2, not 1)."""


class NoRoom(NoRetry):
    """An archive to download, or whose unpacked members, would not fit in the free space of
    the data root (no re-run helps: exit 2)."""


class Unreadable(NoRetry):
    """A ``file://`` source that opens but whose first bytes cannot be read
    (``/proc/self/mem``): no re-run helps, and no partial file is kept to resume."""


class BadArchive(DownloadError):
    """The archive is not one the installer can use (no tar or zip, cut short, without the
    folders it should hold): the kept copy must go before a download can replace it."""


class Installed(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) once the folders ``args[0]`` were installed, whole, while the scratch
    folder was removed (the extracted archive's rest, and the old folders --force moved aside:
    gigabytes of the LRA release, seconds to remove): the line said 'the download resumes where
    it stopped: re-run the same command', which extracted and replaced them all again."""


@dataclass(frozen=True)
class Resource:
    name: str
    url: str
    filename: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None


RESOURCES: dict[str, Resource] = {
    # ~7.7 GB; no published checksum. The URL has been reported to return HTTP 403 at times.
    "lra": Resource(
        "lra", "https://storage.googleapis.com/long-range-arena/lra_release.gz", "lra_release.gz"
    ),
    "cifar10": Resource(
        "cifar10",
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        "cifar-10-python.tar.gz",
        size=170_498_071,
        sha256="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        md5="c58f30108f718f92721af3b95e74349a",
    ),
    "imdb": Resource(
        "imdb",
        "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
        "aclImdb_v1.tar.gz",
        size=84_125_825,
        sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
        md5="7c2ac02c03563afcf9b574c7e56c153a",
    ),
}
LRA_FOLDERS = (
    "listops-1000",
    "tsv_data",
    "pathfinder32",
    "pathfinder64",
    "pathfinder128",
    "pathfinder256",
)


# ------------------------------------------------------------------------------------- progress


class _Progress:
    """A rich progress bar (or nothing), used as a context manager: update(advance)."""

    def __init__(
        self,
        enabled: bool,
        description: str,
        total: int | None,
        completed: int = 0,
        unit_bytes: bool = True,
    ):
        self.enabled = enabled
        self._p = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            cols = [TextColumn("{task.description}", markup=False), BarColumn()]  # a file name
            cols += [DownloadColumn(), TransferSpeedColumn()] if unit_bytes else [MofNCompleteColumn()]
            cols += [TimeRemainingColumn()]
            self._p = Progress(*cols, console=Console(stderr=True, emoji=False), transient=False)
            self._task = self._p.add_task(description, total=total, completed=completed)

    def __enter__(self) -> _Progress:
        if self._p is not None:
            self._p.start()
        return self

    def update(self, advance: int = 0, completed: int | None = None) -> None:
        if self._p is not None:
            if completed is not None:
                self._p.update(self._task, completed=completed)
            else:
                self._p.advance(self._task, advance)

    def __exit__(self, *exc) -> None:
        if self._p is not None:
            self._p.stop()


# ------------------------------------------------------------------------------------- download


def _open_url(url: str, offset: int, timeout: float) -> tuple[BinaryIO, int | None, bool]:
    """Open ``url`` at byte ``offset``: (stream, total size if known, resumed?)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        if not path.is_file():
            raise DownloadError(f"{url}: no such file")
        f = open(path, "rb")  # noqa: SIM115 - returned to the caller, closed there
        # a size of 0 is no size: a kernel's file (/proc, /sys) says 0 and holds bytes, where
        # 'got 1404 of 0 bytes; re-run the same command to resume' was exit 1 at every re-run
        total = os.fstat(f.fileno()).st_size or None
        if offset > (total or 0):
            offset = 0
        f.seek(offset)
        return f, total, offset > 0
    if parsed.scheme not in ("http", "https"):
        raise DownloadError(f"unsupported URL scheme in {url!r} (use http, https or file)")
    headers = {"User-Agent": USER_AGENT}
    if offset > 0:
        headers["Range"] = f"bytes={offset}-"
    req = urllib.request.Request(url, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 - scheme checked above
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset > 0:  # range not satisfiable: we already have everything,
            # unless the server names another size (bytes */N): the file there was replaced
            # by a smaller one, and the partial download of the old one was taken as whole
            whole = whole_number((err.headers.get("Content-Range") or "").rsplit("/", 1)[-1])
            if whole is not None and whole != offset:
                return _open_url(url, 0, timeout)
            return _Empty(), offset, True
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        why = err.reason
        if isinstance(why, OSError):  # no network, a name no DNS knows, a refused connection:
            # it said only '<url>: [Errno -2] Name or service not known'
            why = (f"cannot reach {parsed.hostname} ({why.strerror or why}): offline, or behind "
                   "a proxy ($https_proxy)? Elsewhere, download the archive and pass --url "
                   "file:///<its path>")
        raise DownloadError(f"{url}: {why}") from None
    except UnicodeError as err:  # a host name that is none (`http://a..b/x`, a label over 63
        # characters), here or in a redirect: the resolver's idna codec failed, a traceback
        raise NoRetry(f"{url}: cannot look up a host of it: not a host name ({err}); check "
                      "the URL") from None
    # a server's sizes as whole numbers, None where not ('abc', '²', '-5': a ValueError
    # traceback, or a size of -5 bytes)
    length = whole_number(resp.headers.get("Content-Length") or "")
    if resp.status == 206:
        content_range = resp.headers.get("Content-Range", "")  # bytes start-end/total
        try:
            start = int(content_range.split()[1].split("-")[0])
        except (IndexError, ValueError):
            start = offset
        if start != offset:
            resp.close()
            raise DownloadError(f"{url}: server resumed at byte {start}, expected {offset}")
        total = whole_number(content_range.rsplit("/", 1)[-1])
        if total is None:
            total = offset + length if length is not None else None
        return resp, total, True
    return resp, length, False


class _Empty:
    def read(self, n: int = -1) -> bytes:
        return b""

    def close(self) -> None:
        pass


def download_file(
    url: str,
    dest: Path,
    *,
    size: int | None = None,
    sha256: str | None = None,
    md5: str | None = None,
    progress: bool = True,
    timeout: float = 60.0,
    chunk_size: int = 1 << 20,
) -> Path:
    """Download ``url`` to ``dest`` (resumable via ``dest.part``); verify size / checksums.

    Returns ``dest``. If ``dest`` exists already it is verified (when checksums are known) and kept.

    Raises:
        DownloadError: network / HTTP problems, size mismatch (re-run to resume), checksum
            mismatch (the partial file is deleted; re-run to download again).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    held = _hold(dest)
    try:
        return _download_file(url, dest, size=size, sha256=sha256, md5=md5, progress=progress,
                              timeout=timeout, chunk_size=chunk_size)
    finally:
        _let_go(dest, held)


def _hold(dest: Path) -> int:
    """An exclusive lock (``<dest>.lock``, flock: let go when the process ends, however) on the
    download of ``dest``, or DownloadError when another process holds it. Two downloads of one
    archive into one data root at once appended to one ``.part`` file: both failed with 'got
    198,240,256 of 150,005,760 bytes', and the part file they left was the two interleaved."""
    import fcntl

    lock = _lock_path(dest)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DownloadError(f"another `data download` is downloading {dest.name} into "
                                f"{dest.parent} now (it holds {lock.name}); let it finish, or "
                                "stop it, and run this again") from None
        try:  # the file locked must still be the lock: a holder that let go removed it (and
            now = os.stat(lock, follow_symlinks=False)  # a third process made a new one)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


def _lock_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".lock")


def _let_go(dest: Path, fd: int) -> None:
    """Remove the lock ``_hold`` took, then let go of it: an empty ``<name>.lock`` was left in
    the downloads folder after every download. Removed while still held, so a process that
    opened it meanwhile finds, once it holds it, that it is no longer the lock, and takes anew."""
    try:
        _lock_path(dest).unlink(missing_ok=True)
    except OSError:  # a read-only folder now: the empty file stays, the lock is still let go
        pass
    finally:
        os.close(fd)


def _download_file(url: str, dest: Path, *, size: int | None, sha256: str | None,
                   md5: str | None, progress: bool, timeout: float, chunk_size: int) -> Path:
    """``download_file`` while it holds the download's lock."""
    part = dest.with_name(dest.name + ".part")
    source = dest.with_name(dest.name + ".part.url")  # the URL the partial file's bytes are from
    _refuse_odd_files(dest, part)
    if dest.exists():
        _verify(dest, size, sha256, md5, url, delete=False)
        return dest
    offset = part.stat().st_size if part.exists() else 0
    began = _part_source(source) if offset else url
    if began != url and (began is not None or not (sha256 or md5)):  # another URL's first
        # bytes: an interrupted --url A resumed with --url B of the same file name installed A's
        # head with B's tail. A partial file of no known URL is resumed only where a checksum
        # will tell (a mismatch deletes it)
        offset = 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    if size is None or offset < size:
        stream, total, resumed = _open_url(url, offset, timeout)
        if not resumed:
            offset = 0  # server ignored the Range header (or nothing to resume): start over
        left = (size if size is not None else total or 0) - offset
        free = shutil.disk_usage(part.parent).free
        if left > free:  # a file:// source of a terabyte (a sparse file) filled the disk of
            # the data root, then failed as 'transfer interrupted ... re-run to resume'
            stream.close()
            raise NoRoom(f"{url}: {_bytes(left)} to download into {part.parent}, which has "
                         f"{_bytes(free)} free; free some space, or give another --dir")
        if not offset:
            atomic_write_text(source, url)
        if size is not None and total is not None and total != size:
            stream.close()
            raise DownloadError(f"{url}: server reports {total} bytes, expected {size}")
        # a local source whose first byte cannot be read (/proc/self/mem, an unreadable disk
        # block): the source's fault, not a transfer's; a later read error may be a mount
        # that went away (resumable)
        first = urllib.parse.urlparse(url).scheme == "file" and not offset
        unreadable = None
        try:
            with (
                open(part, "ab" if offset else "wb") as out,
                _Progress(progress, f"download {dest.name}", total, completed=offset) as bar,
            ):
                while True:
                    try:
                        block = stream.read(chunk_size)
                    except OSError as err:
                        if not first:
                            raise
                        unreadable = err
                        break
                    first = False
                    if not block:
                        break
                    out.write(block)
                    bar.update(len(block))
                out.flush()
                os.fsync(out.fileno())  # durable before the rename below makes it "done"
        except (OSError, http.client.HTTPException) as err:
            raise DownloadError(
                f"{url}: transfer interrupted ({err}); "
                f"{part} keeps the {part.stat().st_size} bytes "
                "received so far - re-run the same command to resume"
            ) from None
        finally:
            stream.close()
        if unreadable is not None:  # it said 'transfer interrupted ... re-run the same command
            # to resume' and kept the part file: a re-run read the same error again
            part.unlink(missing_ok=True)
            source.unlink(missing_ok=True)
            raise Unreadable(f"{url}: the file cannot be read "
                             f"({unreadable.strerror or unreadable}); nothing was kept")
        expected = size if size is not None else total
        got = part.stat().st_size
        if expected is not None and got != expected:
            raise DownloadError(
                f"{url}: got {got} of {expected} bytes; {part} was kept - re-run the same command to resume"
            )
    _verify(part, size, sha256, md5, url, delete=True)
    os.replace(part, dest)
    source.unlink(missing_ok=True)
    fsync_dir(dest.parent)
    return dest


def _refuse_odd_files(dest: Path, part: Path) -> None:
    """OSError (a message naming the file, exit 2) for a kept archive that is no regular file
    (a FIFO blocked `data download` for ever; a link to an archive elsewhere is read) and for a
    partial download that is a link or no regular file: the download was appended to the file
    a `.part` link led to, outside the data root, and a FIFO there blocked for ever."""
    try:
        if dest.exists() and not stat.S_ISREG(os.stat(dest).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a folder, device, FIFO or socket) "
                          "where the downloaded archive is kept: remove it", str(dest))
        mode = os.lstat(part).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise OSError(errno.EINVAL, f"a symbolic link (to {os.readlink(part)}) where the partial "
                      "download is kept: it would be written through to what it leads to; "
                      "remove it", str(part))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file (a folder, device, FIFO or socket) where "
                      "the partial download is kept: remove it", str(part))


def _part_source(path: Path) -> str | None:
    """The URL a partial download was started from (``<name>.part.url``), None when unknown
    (none written, unreadable): its bytes are then not resumed."""
    try:
        return read_small(path, 1 << 16).decode()
    except (OSError, UnicodeDecodeError):
        return None


def _verify(
    path: Path, size: int | None, sha256: str | None, md5: str | None, url: str, delete: bool
) -> None:
    got_size = path.stat().st_size
    if size is not None and got_size != size:
        raise DownloadError(f"{path}: size {got_size} bytes, expected {size} (from {url})")
    for algo, want in (("sha256", sha256), ("md5", md5)):
        if not want:
            continue
        got = file_digest(path, algo)
        if got.lower() != want.lower():
            if delete:
                path.unlink()
            what = (
                "the partial download was deleted; re-run to download again"
                if delete
                else ("delete it and re-run to download again")
            )
            raise DownloadError(
                f"{algo} mismatch for {path.name} from {url}: expected {want.lower()}, got {got} ({what})"
            )


# ------------------------------------------------------------------------------------ extraction


def _bytes(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n:,} bytes"


def _safe_member(name: str) -> bool:
    p = Path(name)
    return not p.is_absolute() and ".." not in p.parts and name.strip() != ""


def extract_archive(
    archive: Path,
    dest: Path,
    *,
    keep: Callable[[str], bool] | None = None,
    progress: bool = True,
    skipped: list[str] | None = None,
) -> Path:
    """Extract a tar (any compression) or zip archive into ``dest``, skipping unsafe members,
    links and devices, and members for which ``keep(name)`` is False; the names of the unsafe
    members, links and devices left out are appended to ``skipped`` (a symbolic link among the
    LRA files was left out without a word: `installed`, and the data then missing)."""
    skipped = [] if skipped is None else skipped
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    total = archive.stat().st_size
    if zipfile.is_zipfile(archive):
        try:
            with (
                zipfile.ZipFile(archive) as zf,
                _Progress(progress, f"extract {archive.name}", len(zf.infolist()),
                          unit_bytes=False) as bar,
            ):
                wanted = sum(i.file_size for i in zf.infolist()
                             if _safe_member(i.filename) and (keep is None or keep(i.filename)))
                free = shutil.disk_usage(dest).free
                if wanted > free:  # a small archive of a huge member (a zip bomb) filled the
                    # disk before the full-disk error ended it
                    raise NoRoom(f"{archive}: its members would take {_bytes(wanted)} unpacked; "
                                 f"{dest.parent} has {_bytes(free)} free")
                for info in zf.infolist():
                    if not _safe_member(info.filename):
                        skipped.append(info.filename)
                    elif keep is None or keep(info.filename):
                        zf.extract(info, dest)
                    bar.update(1)
        except NoRoom:
            raise
        # a damaged zip (a bad CRC, cut short, an unknown compression, encrypted) raised
        # zipfile's own traceback; a full disk stays an OSError (named by the command)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as err:
            raise BadArchive(f"{archive}: not a zip archive this command can extract "
                             f"({type(err).__name__}: {err})") from None
        return dest
    ends: list[tarfile.HeaderError] = []  # why each header read stopped (the last: the end)

    class _Member(tarfile.TarInfo):
        @classmethod
        def fromtarfile(cls, tarfile_):
            try:
                return super().fromtarfile(tarfile_)
            except tarfile.HeaderError as err:
                ends.append(err)
                raise

    try:
        raw = open(archive, "rb")  # noqa: SIM115 - closed below
        tar = tarfile.open(fileobj=raw, mode="r|*", tarinfo=_Member)
    except tarfile.TarError as err:
        raise BadArchive(f"{archive}: not a tar or zip archive ({err})") from None
    use_filter = hasattr(tarfile, "data_filter")
    try:
        with _Progress(progress, f"extract {archive.name}", total) as bar:
            for member in tar:
                if not ((member.isfile() or member.isdir()) and _safe_member(member.name)):
                    skipped.append(member.name)
                elif keep is None or keep(member.name):
                    # a tar streams (its members' sizes are known one at a time): each member
                    # that would not fit is refused before it is written, as a zip's members are
                    free = shutil.disk_usage(dest).free
                    if member.size > free:
                        raise NoRoom(f"{archive}: its member {member.name} takes "
                                     f"{_bytes(member.size)} unpacked; {dest.parent} has "
                                     f"{_bytes(free)} free")
                    if use_filter:
                        tar.extract(member, dest, filter="data")
                    else:  # pragma: no cover - Python < 3.11.4
                        tar.extract(member, dest)
                bar.update(completed=raw.tell())
        if not (ends and isinstance(ends[-1], tarfile.EOFHeaderError)):
            # tarfile ends its members quietly at a damaged header or at the end of the data
            # between two members: an archive cut there (or with a header bit flipped) was
            # extracted in part and 'installed', the rest of the data missing without a word
            why = f"{ends[-1]}" if ends else "no header"
            raise BadArchive(f"{archive}: it ends without the end-of-archive marker ({why}, "
                             f"after {len(tar.members)} member(s)): the archive is cut short "
                             "or damaged")
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):  # the disk filled: the archive is fine (it
            # said 'the archive may be truncated; delete it and download it again')
            raise NoRoom(f"{archive}: extraction stopped, {dest.parent} is full ({err.strerror}); "
                         "free some space and re-run") from None
        raise BadArchive(f"{archive}: extraction failed ({err}); the archive may be truncated") from None
    except (tarfile.TarError, EOFError) as err:
        raise BadArchive(f"{archive}: extraction failed ({err}); the archive may be truncated") from None
    finally:
        tar.close()
        raw.close()
    return dest


def _find_dirs(top: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """Shallowest directory with each of ``names`` below ``top``."""
    found: dict[str, Path] = {}
    for dirpath, dirnames, _ in os.walk(top):
        for d in sorted(dirnames):
            if d in names and d not in found:
                found[d] = Path(dirpath) / d
        dirnames[:] = [d for d in dirnames if d not in names]
    return found


def _check_target(target: Path, force: bool) -> None:
    """DownloadError unless ``_move_into_place`` can put a folder at ``target``."""
    if target.is_symlink():  # rmtree refuses a link ('cannot use: OSError', nothing named);
        # --force replaces a folder of the data root, not a folder elsewhere a link leads to
        raise DownloadError(f"{target} is a symbolic link (to {os.readlink(target)}); --force "
                            "replaces only a real folder, not one a link leads to: remove the "
                            "link and run this again")
    if target.exists() and not force:
        raise DownloadError(f"{target} already exists; remove it or pass --force to replace it")


def _move_into_place(src: Path, target: Path, force: bool) -> None:
    """Move the extracted folder ``src`` (in a scratch folder beside ``target``) to ``target``.
    A folder there (--force) is first moved aside into that scratch folder, removed with it
    (put back by the next download if this one is killed before it finished: ``_extract_scratch``):
    it was removed in place, so a download killed
    meanwhile (gigabytes of the LRA release take seconds) left a dataset half deleted where
    the loaders read."""
    _check_target(target, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        os.replace(target, src.with_name(f"{src.name}.replaced"))
    os.replace(src, target)
    fsync_dir(target.parent)


def _extract_scratch(base: Path, scratch: str, names: tuple[str, ...],
                     put_back: list[Path] | None) -> Path:
    """A new scratch folder ``.extract-<scratch>-...`` under ``base`` to extract an archive in.
    The old folders that a killed install (``kill -9``, a crashed machine) had moved aside
    (``_move_into_place``: ``<name>.replaced`` in its scratch folder) are first put back at
    ``base / <name>``, in place of the new folder moved in there if any, and listed in
    ``put_back``: the killed install's scratch folder was removed as a dead one, the only copy
    of the old data with it, and a task's folder was missing (or new beside the others old)
    until a --force download finished. An install is finished once its scratch folder is
    renamed ``.extract-<scratch>.done-...`` (``_remove_scratch``): the old folders in it go."""
    for dead in dead_scratch(base, f".extract-{scratch}"):
        for aside in _moved_aside(dead, names):
            target = base / aside.name.removesuffix(".replaced")
            new = aside.with_name(target.name)  # where the new folder was extracted
            if os.path.lexists(target):  # the new one, moved in: it goes back
                if os.path.lexists(new) or target.is_symlink() or not target.is_dir():
                    continue  # (not the new one: another install's since)
                os.replace(target, new)
            os.replace(aside, target)
            fsync_dir(base)
            if put_back is not None:
                put_back.append(target)
    for done in dead_scratch(base, f".extract-{scratch}.done"):
        shutil.rmtree(done, ignore_errors=True)
    return scratch_folder(base, f".extract-{scratch}")


def _moved_aside(top: Path, names: tuple[str, ...]) -> list[Path]:
    """The folders ``<name>.replaced`` of ``names`` below ``top`` (not below those folders nor
    below the ones of ``names``: an extracted dataset is not walked)."""
    aside = {f"{name}.replaced" for name in names}
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(top):
        found += [Path(dirpath) / d for d in sorted(dirnames) if d in aside
                  and not os.path.islink(Path(dirpath) / d)]
        dirnames[:] = [d for d in dirnames if d not in aside and d not in names]
    return found


def install_lra(archive: Path, root: Path, *, force: bool = False, progress: bool = True,
                skipped: list[str] | None = None,
                put_back: list[Path] | None = None) -> list[Path]:
    """Extract ``lra_release.gz`` and move its task folders to ``<root>/lra/<name>``."""
    base = lra_dir(root)
    base.mkdir(parents=True, exist_ok=True)
    tmp = _extract_scratch(base, "lra", LRA_FOLDERS, put_back)
    out: list[Path] = []
    whole = False  # every folder found was moved into place
    try:
        extract_archive(archive, tmp, progress=progress, skipped=skipped)
        found = _find_dirs(tmp, LRA_FOLDERS)
        if not found:
            raise BadArchive(
                f"{archive}: none of {list(LRA_FOLDERS)} found inside; is this the LRA release?"
            )
        for name in found:  # each folder checked before any is moved: one already there
            # (tsv_data) stopped the install after listops-1000 was moved in, the message
            # naming only the one, and the same command then failed on listops-1000
            _check_target(base / name, force)
        try:
            for name, path in sorted(found.items()):
                _move_into_place(path, base / name, force)
                out.append(base / name)
        except BaseException:  # stopped among the moves (Ctrl-C, SIGTERM, an error): the
            for name, path in sorted(found.items(), reverse=True):  # folders moved in go back,
                _move_back(path, base / name)  # those they replaced too: the same command
            raise  # then failed on the first ('already exists; ... pass --force'), exit 1
        whole = True
        return out
    finally:
        _remove_scratch(tmp, out if whole else None)


def _move_back(src: Path, target: Path) -> None:
    """Undo ``_move_into_place(src, target, ...)``, as far as it went: the folder moved to
    ``target`` back to ``src``, and the one it replaced (``--force``) back to ``target``."""
    if not os.path.lexists(src) and os.path.isdir(target) and not os.path.islink(target):
        os.replace(target, src)
    replaced = src.with_name(f"{src.name}.replaced")
    if replaced.is_dir() and not os.path.lexists(target):
        os.replace(replaced, target)


def _remove_scratch(tmp: Path, installed: list[Path] | None) -> None:
    """Remove an install's scratch folder ``tmp``; a Ctrl-C meanwhile, once every folder was
    ``installed``, is ``Installed`` (the next download removes what is left of ``tmp``). An
    install finished first renames ``tmp`` ``.extract-<scratch>.done-...``: killed while it was
    removed, what is left of the old folders (--force) in it is not put back
    (``_extract_scratch``)."""
    try:
        if installed and tmp.is_dir():
            extract, scratch, rest = tmp.name.split("-", 2)  # (.extract-<scratch>-<host>-...)
            done = tmp.with_name(f"{extract}-{scratch}.done-{rest}")
            os.replace(tmp, done)
            tmp = done
        shutil.rmtree(tmp, ignore_errors=True)
    except KeyboardInterrupt:
        if installed:
            raise Installed(installed) from None
        raise


def _install_folder(archive: Path, base: Path, folder: str, scratch: str, *, force: bool,
                    progress: bool, keep=None, skipped: list[str] | None = None,
                    put_back: list[Path] | None = None) -> list[Path]:
    """Extract ``archive`` in a scratch folder under ``base`` and move its ``folder`` to
    ``base / folder`` (atomic from the loaders' point of view)."""
    base.mkdir(parents=True, exist_ok=True)
    tmp = _extract_scratch(base, scratch, (folder,), put_back)
    whole = False
    try:
        extract_archive(archive, tmp, keep=keep, progress=progress, skipped=skipped)
        found = _find_dirs(tmp, (folder,))
        if not found:
            raise BadArchive(f"{archive}: no {folder} folder inside")
        _move_into_place(found[folder], base / folder, force)
        whole = True
        return [base / folder]
    finally:
        _remove_scratch(tmp, [base / folder] if whole else None)


def install_cifar10(archive: Path, root: Path, *, force: bool = False, progress: bool = True,
                    skipped: list[str] | None = None,
                    put_back: list[Path] | None = None) -> list[Path]:
    """Extract ``cifar-10-python.tar.gz`` to ``<root>/cifar-10-batches-py``."""
    return _install_folder(archive, root, "cifar-10-batches-py", "cifar10", force=force,
                           progress=progress, skipped=skipped, put_back=put_back)


def install_imdb(archive: Path, root: Path, *, force: bool = False, progress: bool = True,
                 skipped: list[str] | None = None,
                 put_back: list[Path] | None = None) -> list[Path]:
    """Extract ``aclImdb_v1.tar.gz`` (without the unlabelled reviews) to ``<root>/imdb/aclImdb``."""
    return _install_folder(archive, root / "imdb", "aclImdb", "imdb", force=force,
                           progress=progress, keep=lambda name: "/unsup/" not in name,
                           skipped=skipped, put_back=put_back)


INSTALLERS = {"lra": install_lra, "cifar10": install_cifar10, "imdb": install_imdb}


def download(
    what: str,
    root: Path,
    *,
    url: str | None = None,
    sha256: str | None = None,
    keep_archive: bool = True,
    force: bool = False,
    progress: bool = True,
    skipped: list[str] | None = None,
    put_back: list[Path] | None = None,
) -> list[Path]:
    """Download ``what`` (lra | cifar10 | imdb) into ``root`` and lay it out for the loaders.

    With ``url`` (e.g. a mirror or a ``file://`` path) the official size / checksums are not
    applied (pass ``sha256`` to check one). Returns the installed folders.
    """
    if what not in RESOURCES:
        raise ValueError(f"unknown download {what!r}; choose from {sorted(RESOURCES)}")
    res = RESOURCES[what]
    official = url is None or url == res.url
    src = res.url if url is None else url
    name = res.filename if official else Path(urllib.parse.urlparse(src).path).name
    if name in ("", ".", ".."):  # a URL of no file name (`http://host/`, `http://host/..`: it
        # named <root>/downloads/.., the data root, 'cannot use ...: a folder where a file belongs')
        name = res.filename
    dest = downloads_dir(root) / name
    itself = _names_file(src, dest)  # `--url file:///<root>/downloads/x.tgz`: an archive put
    # there by hand was deleted as an earlier download's, then 'no such file', exit 1
    if not official and not sha256 and dest.exists() and not itself:
        # nothing tells an archive kept from an earlier download (another --url of the same
        # file name) from this URL's: it was installed again, so an archive that failed to
        # install ('not a tar or zip archive') failed every later command, --force and a
        # corrected --url included
        dest.unlink()
    download_file(
        src,
        dest,
        size=res.size if official else None,
        sha256=sha256 or (res.sha256 if official else None),
        md5=res.md5 if official and not sha256 else None,
        progress=progress,
    )
    try:
        installed = INSTALLERS[what](dest, root, force=force, progress=progress, skipped=skipped,
                                     put_back=put_back)
    except BadArchive as err:  # the kept archive is installed again by the next download
        # (the official one, which has no checksum for LRA): 'not a tar or zip archive' for ever
        if itself:  # the file --url names: no download replaces it (nor is it ours to delete)
            raise NoRetry(f"{err} (the file --url names)") from None
        if urllib.parse.urlparse(src).scheme == "file":  # a copy of a local file: a re-run
            # copies the same bytes (it said 'delete <copy> and re-run to download it again',
            # exit 1, and failed so at every re-run); the copy is no use and is removed
            dest.unlink(missing_ok=True)
            why = str(err).removeprefix(f"{dest}: ")
            raise NoRetry(f"--url {src}: {why} (the file --url names; nothing was installed): "
                          "give a whole tar or zip archive") from None
        raise BadArchive(f"{err}; delete {dest} and re-run to download it again") from None
    if not keep_archive and not itself:  # (the source file is not this command's to delete)
        dest.unlink()
    return installed


def _names_file(url: str, path: Path) -> bool:
    """Whether ``url`` is a ``file://`` URL of the file ``path`` itself."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "file":
        return False
    try:
        return os.path.samefile(urllib.request.url2pathname(parsed.path), path)
    except (OSError, ValueError):
        return False
