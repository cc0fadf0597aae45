"""Tool (cli): the data commands ``ssmrepro data download | generate | info`` for the LRA datasets.

A command group of the one app (``cli/__init__.py`` mounts it). Exit codes: 0 ok, 1 a download /
generation failed, 2 bad input.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ..data._workers import WorkerDied
from ..data.sources import generated_dir
from ..util import data_root, folder_problem, human_seconds, scratch_name
from .app import (
    EXIT_CODES,
    command,
    console,
    err_console,
    fail,
    help_text,
    path_value,
    print_table,
)

# `data --help` and `data generate --help` show these (the group's help was replaced by a
# one-line text where the CLI registers it: the examples were never shown) and, as every
# command's, the exit codes (they listed none)
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=help_text(
        "Long Range Arena data: explicit downloads, offline generators, and what is present.\n\n"
        "Examples:\n\n"
        "  ssmrepro data download cifar10 --dir data\n\n"
        "  ssmrepro data generate listops --n 100000 --seed 0\n\n"
        "  ssmrepro data generate pathfinder --res 32 --n 200000 --seed 0 --workers 2\n\n"
        "  ssmrepro data info"),
    epilog=help_text(EXIT_CODES),
)
generate_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Generate ListOps / Pathfinder offline, in the on-disk layout the loaders read.",
    epilog=help_text(EXIT_CODES),
)
app.add_typer(generate_app, name="generate")

DIR_HELP = "data root (default: $SSMREPRO_DATA, else ./data)"


class Target(str, Enum):
    lra = "lra"
    cifar10 = "cifar10"
    imdb = "imdb"


class PathfinderFormat(str, Enum):
    npy = "npy"
    lra = "lra"


def _data_root(dir: Path | None) -> Path:
    """The data root of a `data` command (``data_root``), refused (exit 2) where it cannot be
    one: a file, a link loop, a path below a file, a symbolic link to nothing. `data info`
    showed such a root as empty (every source 'no', each hint's command failing on it; a
    dangling link without a word), and `data generate` and `download` named another path
    (`.../generated: a path component is a file`, `exists and is not a folder`)."""
    root = data_root(dir)
    why = folder_problem(root)
    if why == "no such folder" and root.is_symlink():
        try:
            why = f"a symbolic link to {os.readlink(root)}, which does not exist"
        except OSError:
            why = "a symbolic link to nothing"
    if why not in (None, "no such folder"):
        fail([f"cannot use {root}: not a folder: {why} (the data root; --dir or $SSMREPRO_DATA)"])
    return root


def _written(path: Path, option: str) -> None:
    """Refuse a folder a data command writes into (the data root, `data generate --out`) that
    lies inside the project's experiments/, package, docs/, tests/, scripts/ or .git/
    (``util.source_tree_problem``), exit 2, before anything is written there."""
    from ..util import source_tree_problem

    why = source_tree_problem(path, "data")
    if why:
        _fail(f"{option} {path}: {why}")


def _fail(message: str, code: int = 2) -> None:
    fail([message], code)


def _one_of_dir_and_out(dir: Path | None, out: Path | None) -> None:
    """`data generate ... --dir A --out B` wrote into B and ignored A without a word (a data
    root only makes the default --out), so the loaders reading A did not find the data."""
    if dir is not None and out is not None:
        _fail(f"--dir {dir} and --out {out}: --out is the folder written, --dir only the data "
              "root its default lies under (<root>/generated/...); give one of them")


# what a generator stopped midway (a worker died, Ctrl-C, kill -9) leaves: it builds its folder
# beside the target (``_built_beside``), so nothing of it is where the loaders read
LEFT = "nothing was written: re-run the same command"
GENERATING = ".generating"  # the scratch folder's name (``util.scratch_folder``)
REPLACED = ".replaced"  # the name of the one a dataset --force replaces is moved aside into
PLACING = ".placing"  # (in a mount point) its name once every entry of it is there
SCRATCH = tuple(f"{p}-" for p in (GENERATING, REPLACED, PLACING))  # their entries in a mount point
# the whole name of one (``util.scratch_name``): a user's file or folder that only begins so
# (`.replaced-notes`) is no generator's (--force deleted it)
SCRATCH_NAME = scratch_name(GENERATING, REPLACED, PLACING)


def _scratch(entry: Path) -> bool:
    """Whether ``entry`` (of a dataset's folder) is a generator's scratch folder."""
    return bool(SCRATCH_NAME.fullmatch(entry.name)) and entry.is_dir() and not entry.is_symlink()


def _died(err: WorkerDied) -> str:
    """The line for a generator whose worker process died."""
    return f"{err}; {LEFT}"


class _InPlace(KeyboardInterrupt):
    """A generator stopped once its new dataset was in place (``_built_beside``): args[0] the
    folder."""


class _PuttingBack(KeyboardInterrupt):
    """A generator stopped again while it put back the dataset its --force had moved aside
    (``_put_back``), before that one was whole there again: args[0] the folder."""


@contextmanager
def _interrupted_says_what_is_left() -> Iterator[None]:
    """Ctrl-C of a generator: one line saying what it left (``LEFT``, or the new dataset in place
    where it was stopped after the swap: ``_InPlace``), exit 130 (the line of `run`, 'finished
    runs are saved', was printed)."""
    try:
        yield
    except KeyboardInterrupt as err:
        line = (f"{err.args[0]} holds the new dataset, whole; what it replaced is removed by the "
                "next `data generate` there" if isinstance(err, _InPlace)
                else f"stopped again while the dataset {err.args[0]} held before was put back "
                "there (--force had moved it aside): it is not whole there now; the next `data "
                "generate` there puts the rest of it back" if isinstance(err, _PuttingBack)
                else LEFT)
        err_console.print(f"interrupted — {line}", highlight=False, soft_wrap=True,
                          markup=False)
        raise typer.Exit(130) from None


def _written_meanwhile(target: Path, force: bool) -> str:
    """What a `data generate` says that finds ``target`` written by another while it ran."""
    again = ("run this command again to replace it (its --force replaces what is there when it "
             "starts)" if force else "pass --force to replace it")
    return (f"{target} was written by another `data generate` while this one ran; this one's "
            f"data were discarded ({again})")


@contextmanager
def _built_beside(target: Path, force: bool = False) -> Iterator[Path]:
    """A scratch folder beside ``target`` to generate in, renamed to ``target`` when the block
    ends (and removed when it fails; a killed one's by the next generate of ``target``).

    The generators wrote into ``target`` itself: a folder cut short (Ctrl-C, kill -9) was where
    the loaders read, and two generates of one data root at once (other seeds or sizes) both
    passed the 'empty folder' check and wrote into one folder, each saying 'wrote', the files
    of the two mixed. Now the first to finish renames its folder into place, and the other
    stops (exit 1) saying so, its data discarded; ``force``: it was given --force, and is told
    to run again to replace the other's (it was told to pass --force, which it had).

    With ``force`` the dataset there (``_prepare_out`` checked it is a generated one) is replaced
    at the end, when the new one is whole: it was removed at the start, so a generate stopped
    midway (Ctrl-C, a worker killed) said 'nothing was written' with the old data gone, and a
    `run` meanwhile found no data. The old one is moved aside (renames: in a mount point, entry
    by entry, meta.json first) and removed once the new one is in place; a stop before that
    puts it back, a stop after it says the new one is there (``_InPlace``). (Inside a mount
    point its entries were removed one by one, meta.json last: Ctrl-C while a large one was
    removed left its meta.json beside part of its files; a stop between the renames beside it,
    or while the old one was removed, said 'nothing was written' beside the new dataset, or
    with neither left.)"""
    from ..util import fsync_dir, scratch_folder

    target.parent.mkdir(parents=True, exist_ok=True)
    # an empty --out that is a mount point (another file system than its parent's): built
    # inside it, on its own disk (beside it, the images went to the parent's disk, and the
    # rename across file systems failed after all the work), its entries moved out at the end
    inside = target.is_dir() and os.stat(target).st_dev != os.stat(target.parent).st_dev
    tmp = scratch_folder(target if inside else target.parent,
                         GENERATING if inside else f".{target.name}{GENERATING}")
    old = _entries(target) if force else set()  # the dataset --force replaces
    aside, moved, placed = None, [], []  # where the old one goes; (inside) the names moved
    # there, and the new one's moved in
    whole = False  # the block ended: ``tmp`` holds the new dataset, meta.json written last
    try:
        yield tmp
        whole = True
        there = _entries(target)
        if there and there != old:
            _fail(_written_meanwhile(target, force), code=1)
        if inside:
            if there:  # (removed below; if killed, by the next generate)
                aside = scratch_folder(target, REPLACED)
                aside.mkdir()
                for name in sorted((n for n, *_ in there), key=lambda n: n != "meta.json"):
                    moved.append(name)  # (before: a stop between would lose it)
                    os.replace(target / name, aside / name)  # meta.json first: a dataset
                    # without it is not a whole one
                all_out = target / (PLACING + aside.name.removeprefix(REPLACED))
                os.replace(aside, all_out)  # what a kill from here on leaves in ``target`` is
                aside = all_out  # the new one's (``_put_back_killed``)
            for entry in sorted(tmp.iterdir(), key=lambda p: p.name == "meta.json"):
                placed.append(entry.name)
                os.replace(entry, target / entry.name)  # meta.json last: it marks a whole one
            fsync_dir(target)
            return
        if there:
            aside = scratch_folder(target.parent, f".{target.name}{REPLACED}")
            os.replace(target, aside)  # (removed below; if killed, by the next generate, which
            # puts it back if killed before the next rename: ``_put_back_killed``)
        try:
            os.replace(tmp, target)  # (onto nothing or an empty folder)
        except OSError:
            if aside is not None and not target.exists():
                os.replace(aside, target)  # the old dataset put back
                aside = None
            if not (target.is_dir() and any(target.iterdir())):
                raise
            _fail(_written_meanwhile(target, force), code=1)
        fsync_dir(target.parent)
    except KeyboardInterrupt:
        if whole and not (tmp / "meta.json").exists():  # stopped once the new one was in place
            raise _InPlace(target) from None
        raise
    finally:
        if whole and aside is not None and (tmp / "meta.json").exists():  # stopped before the
            try:  # new one was in place: the old one back
                aside = _put_back(target, aside, moved, placed, inside)
            except KeyboardInterrupt:  # (a second Ctrl-C said 'nothing was written' over an
                if not (target / "meta.json").exists():  # empty or partial folder)
                    raise _PuttingBack(target) from None
                raise
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            if aside is not None:
                shutil.rmtree(aside, ignore_errors=True)
        except KeyboardInterrupt:  # (a large old dataset takes seconds to remove)
            if whole and not (tmp / "meta.json").exists():
                raise _InPlace(target) from None
            raise


def _put_back(target: Path, aside: Path, moved: list[str], placed: list[str],
              inside: bool) -> Path:
    """Put the dataset moved aside by ``_built_beside`` back at ``target`` (the generate stopped
    before the new one was in place): the folder itself, or (inside a mount point) the entries
    ``moved``, once the new one's ``placed`` there are removed (meta.json last of all); the
    folder ``aside`` is now at (what is left of it). A ``PLACING`` one is named ``REPLACED``
    again before its entries move back, so that a stop among those moves (a second Ctrl-C, a
    kill) leaves the old entries moved back to be joined by the rest (``_put_back_killed``
    removed them as the new one's, and put back a meta.json beside part of the old files)."""
    if not inside:
        if not os.path.lexists(target) and aside.exists():
            os.replace(aside, target)
        return aside
    for name in placed:  # (its meta.json is not among them: the new one was not whole there)
        entry = target / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if aside.name.startswith(PLACING):
        back = target / (REPLACED + aside.name.removeprefix(PLACING))
        os.replace(aside, back)
        aside = back
    for name in sorted(moved, key=lambda n: n == "meta.json"):
        if os.path.lexists(aside / name):  # (stopped before its move, it is still there)
            os.replace(aside / name, target / name)
    return aside


def _entries(target: Path) -> set[tuple]:
    """What ``target`` holds (name, inode, modification time of each entry, a generator's
    scratch folder left out): a dataset --force may replace at the end only if it is still the
    one there at the start (another `data generate` may have written its own meanwhile)."""
    try:
        found = set()
        for entry in target.iterdir():
            if not _scratch(entry):
                st = entry.lstat()
                found.add((entry.name, st.st_ino, st.st_mtime_ns))
        return found
    except (FileNotFoundError, NotADirectoryError):
        return set()


@command(app, interrupted="interrupted — the download resumes where it stopped: re-run "
                             "the same command")
def download(
    target: Target = typer.Argument(..., help="what to download: lra | cifar10 | imdb"),
    dir: Path | None = typer.Option(None, "--dir", help=DIR_HELP, metavar="DIR",
                                         parser=path_value),
    url: str | None = typer.Option(None, "--url", help="override the URL (http(s):// or file://)"),
    sha256: str | None = typer.Option(None, "--sha256", help="expected SHA-256 of the archive"),
    keep_archive: bool = typer.Option(
        True, "--keep-archive/--delete-archive", help="keep the archive under <root>/downloads"
    ),
    force: bool = typer.Option(False, "--force", help="replace folders that already exist"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress bars"),
) -> None:
    """Download an archive (resumable, verified) and lay it out for the loaders.

    Example: ssmrepro data download lra --dir data --url file:///mnt/mirror/lra_release.gz
    """
    import urllib.parse

    from ..data.download import DownloadError, Installed, NoRetry
    from ..data.download import download as do_download

    if url is not None:
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 (a port that is no number raises here)
        except ValueError as err:  # urllib's own error was a traceback
            _fail(f"--url {url!r}: not a URL ({err})")
        if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file"
                                                            and not parts.hostname):
            # known now: it failed (exit 1, "re-run") after <dir>/downloads was made
            _fail(f"--url {url!r}: not a URL this command downloads (http://HOST/..., "
                  "https://HOST/... or file:///PATH)")
        if parts.scheme == "file":  # known now: it failed with exit 1 ('re-run'), and a
            # folder was 'no such file'
            import urllib.request

            if parts.netloc not in ("", "localhost"):  # `file://mnt/mirror/x.gz` (two slashes)
                # read /mirror/x.gz, naming it 'no file at /mirror/x.gz' (or read it if there)
                _fail(f"--url {url!r}: names the host {parts.netloc!r}; a file:// URL names a "
                      "file here by its absolute path, after three slashes (file:///PATH, e.g. "
                      f"file:///{parts.netloc}{parts.path})")
            local = Path(urllib.request.url2pathname(parts.path))
            if local.is_dir():
                _fail(f"--url {url!r}: {local} is a folder, not an archive file (give the "
                      "archive's own path, e.g. file:///mnt/mirror/lra_release.gz)")
            if not local.is_file():  # (a FIFO or device there was said to be 'no file')
                _fail(f"--url {url!r}: " + (f"{local} is not a regular file (a FIFO, device or "
                                            "socket), not an archive file" if local.exists()
                                            else f"no file at {local}"))
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        _fail(f"--sha256 {sha256!r}: not a SHA-256 (64 hexadecimal digits); it could only "
              "fail after the whole download")
    root = _data_root(dir)
    _written(root, "the data root (--dir or $SSMREPRO_DATA)")
    skipped: list[str] = []
    put_back: list[Path] = []  # old folders a killed --force install had moved aside
    try:
        try:
            installed = do_download(
                target.value,
                root,
                url=url,
                sha256=sha256,
                keep_archive=keep_archive,
                force=force,
                progress=progress,
                skipped=skipped,
                put_back=put_back,
            )
        finally:  # (said before this download's own outcome, failed or not)
            for p in put_back:
                err_console.print(f"note: {p} holds again the folder it held before a `data "
                                  "download --force` was killed while it replaced it (it had "
                                  "been moved aside); a --force download replaces it",
                                  highlight=False, soft_wrap=True, markup=False)
    except NoRetry as err:  # unpacked, it would not fit; a local source that cannot be read:
        # no re-run helps
        _fail(str(err))
    except DownloadError as err:
        _fail(str(err), code=1)
    except Installed as err:  # stopped while the scratch folder was removed
        err_console.print(f"interrupted — installed {', '.join(str(p) for p in err.args[0])}, "
                          "whole; the rest of the extracted archive (and the old folders "
                          "--force replaced) is removed by the next `data download`",
                          highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(130) from None
    if skipped:  # a link among the data files was left out without a word: 'installed', and
        # the data then missing
        shown = ", ".join(repr(n) for n in skipped[:3]) + (", ..." if len(skipped) > 3 else "")
        err_console.print(f"[yellow]warning:[/] left out {len(skipped)} archive member(s) that "
                          "are not plain files or folders inside it (links, devices, `..` or "
                          f"absolute paths): {escape(shown)}", highlight=False, soft_wrap=True)
    for p in installed:
        console.print(f"installed {p}", highlight=False, markup=False)


# what the generators write into their folder (and their temp files, ``.<name>.<host>...tmp``)
GENERATED_NAMES = frozenset({"meta.json", "basic_train.tsv", "basic_val.tsv", "basic_test.tsv",
                             "shards", "imgs", "metadata"})


def _foreign_entries(target: Path) -> list[str]:
    """Entries of ``target`` that no generator writes (``--force`` must not delete them). A
    generate's scratch folder inside a mount point (``_built_beside``: a running one's, or what
    a stopped one set aside) is a generator's, left alone by --force (it was named as one no
    generator writes)."""
    return sorted(p.name for p in target.iterdir()
                  if p.name not in GENERATED_NAMES and not (p.name.startswith(".")
                                                            and p.name.endswith(".tmp"))
                  and not _scratch(p))


def _prepare_out(out: Path | None, default: Path, force: bool) -> Path:
    from ..util import remove_dead_scratch

    target = out if out is not None else default
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        _fail(f"--out {target}: not a folder (a file or a link); choose another folder")
    _written(target, "--out" if out is not None else "the data root's folder (--dir or "
             "$SSMREPRO_DATA)")
    remove_dead_scratch(target, GENERATING)  # (a killed generate's, built inside a mount point)
    _put_back_killed(target)
    if target.exists() and any(target.iterdir()):
        if not force:
            _fail(f"{target} is not empty; pass --force to replace it or --out to choose another folder")
        foreign = _foreign_entries(target)
        if foreign:  # --force replaces a generated dataset, never a folder of other files
            _fail(f"{target} holds {', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}, "
                  "which no generator writes: --force only replaces a generated dataset; choose "
                  "an empty or new --out")
    return target


def _put_back_killed(target: Path) -> None:
    """Put back at ``target`` the dataset that a `data generate --force` killed (``kill -9``, a
    crashed machine) between its two renames had moved aside (``_built_beside``), saying so; the
    moved-aside folders of killed generates are removed otherwise (the new one is in place).
    Such a kill lost both datasets: the old one and the new one, whole, were both removed by
    the next generate as a killed one's scratch folders, and a `run` meanwhile found no data.
    In a mount point, where the old one's entries are moved aside one by one and the new one's
    moved in, the old one is put back unless the new one's meta.json is there: its entries
    moved aside join those not moved yet, or (every one moved: ``PLACING``) replace those of
    the new one moved in (the old one's entries moved aside were removed, its others kept beside
    a few of the new one's)."""
    from ..util import dead_scratch, remove_dead_scratch

    def said() -> None:
        err_console.print(f"note: {target} holds again the dataset it held before a `data "
                          "generate --force` there was killed while it replaced it (it had "
                          "been moved aside)", highlight=False, soft_wrap=True, markup=False)

    whole = target.is_dir() and not target.is_symlink() and (target / "meta.json").exists()
    for old in ([*dead_scratch(target, REPLACED), *dead_scratch(target, PLACING)]
                if target.is_dir() and not target.is_symlink() else ()):
        if not whole and (old / "meta.json").is_file():
            placed = ([e.name for e in target.iterdir() if not e.name.startswith(SCRATCH)]
                      if old.name.startswith(PLACING) else [])
            old = _put_back(target, old, [e.name for e in old.iterdir()], placed, inside=True)
            whole = True
            said()
        shutil.rmtree(old, ignore_errors=True)
    prefix = f".{target.name}{REPLACED}"
    if not os.path.lexists(target):
        for old in dead_scratch(target.parent, prefix):
            if (old / "meta.json").is_file():
                os.replace(old, target)
                said()
                break
    remove_dead_scratch(target.parent, prefix)
    remove_dead_scratch(target.parent, f".{target.name}{GENERATING}")  # (what it was building)


def _size(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _check_room(what: str, memory: int, disk: int, target: Path, files: int = 0) -> None:
    """Refuse before generating what cannot fit: ``memory`` (bytes the generator surely holds at
    once) against the memory available now, ``disk`` (bytes it surely writes) against the free
    space where ``target`` goes (a dataset --force replaces is kept until the new one is whole),
    and ``files`` (how many it makes) against the file system's free inodes. A size that could
    not fit ran for hours, then died of memory (killed, no message) or stopped at a full disk
    (or inode table)."""
    from ..train import available_memory

    avail = available_memory("cpu")
    if avail is not None and memory > avail:
        _fail(f"{what} hold at least {_size(memory)} in memory at once; only {_size(avail)} is "
              "available; ask for fewer")
    here = target
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        free = shutil.disk_usage(here).free
        st = os.statvfs(here)
        inodes = st.f_favail if st.f_files else None  # 0 files: no inode limit (e.g. btrfs)
    except OSError:
        return
    if disk > free:
        _fail(f"{what} take at least {_size(disk)} on disk; only {_size(free)} is free under "
              f"{here}; ask for fewer")
    if inodes is not None and files > inodes:
        _fail(f"{what} make {files:,} files; the file system of {here} has room for only "
              f"{inodes:,} more (free inodes); ask for fewer")


@command(generate_app, "listops")
def generate_listops_cmd(
    n: int = typer.Option(100_000, "--n", min=3, max=10**8,
                          help="total examples (train + val + test)"),
    seed: int = typer.Option(0, "--seed"),
    dir: Path | None = typer.Option(None, "--dir", help=DIR_HELP, metavar="DIR",
                                         parser=path_value),
    out: Path | None = typer.Option(None, "--out", metavar="DIR", parser=path_value,
                                    help="output folder (default <root>/generated/listops)"),
    workers: int = typer.Option(1, "--workers", min=1, max=max(1, os.cpu_count() or 1),
                                help="worker processes"),
    n_val: int | None = typer.Option(None, "--n-val", min=1,
                                     help="validation examples (default 2% of --n)"),
    n_test: int | None = typer.Option(None, "--n-test", min=1,
                                      help="test examples (default 2% of --n)"),
    min_length: int = typer.Option(500, "--min-length", min=0, max=100_000,
                                   help="keep trees with min_length < length"),
    max_length: int = typer.Option(2000, "--max-length", min=2, max=100_000,
                                   help="keep trees with length < max_length"),
    max_depth: int = typer.Option(10, "--max-depth", min=1, max=100),
    max_args: int = typer.Option(10, "--max-args", min=2, max=100),
    force: bool = typer.Option(False, "--force", help="replace an existing output folder"),
) -> None:
    """ListOps with the LRA grammar and length window; writes basic_{train,val,test}.tsv.

    Example: ssmrepro data generate listops --n 2000 --seed 0 --min-length 50 --max-length 300
    """
    import json

    from ..data.listops import GENERATOR_VERSION, SPLIT_FILES, generate_listops, write_listops_tsv
    from ..util import atomic_write_text

    _one_of_dir_and_out(dir, out)
    n_val = max(1, round(0.02 * n)) if n_val is None else n_val
    n_test = max(1, round(0.02 * n)) if n_test is None else n_test
    n_train = n - n_val - n_test
    if n_train < 1:
        _fail(f"--n {n} leaves no training examples after {n_val} val + {n_test} test")
    root = _data_root(dir) if out is None else data_root(dir)  # (--out: the root is unused)
    # every kept tree has more than min_length tokens: one byte each in memory (plus ~100 bytes
    # of bookkeeping per tree) and, while the training split's TSV is written, at least a
    # character and a space each three times over (its lines, their text and its bytes)
    length = min_length + 1
    _check_room(f"--n {n} ListOps trees longer than {min_length} tokens",
                n * (length + 100) + n_train * 6 * length, n * 2 * length,
                out if out is not None else generated_dir(root) / "listops")
    target = _prepare_out(out, generated_dir(root) / "listops", force)

    def sampled(pool: list[tuple[bytes, int]]) -> None:
        # the trees' length measured on the first chunk: min_length is a bound below it, and
        # `--n 100000000 --min-length 0` (trees of ~420 tokens) passed the check above as one
        # of 1 token, ran for a day and died of memory
        length = sum(len(t) for t, _ in pool) / len(pool)
        _check_room(f"--n {n} ListOps trees of about {length:,.0f} tokens (the mean of the "
                    f"first {len(pool)} drawn)",
                    int(n * (length + 100) + n_train * 6 * length), int(n * 2 * length),
                    out if out is not None else generated_dir(root) / "listops")
        left = (time.perf_counter() - t0) * (n - len(pool)) / len(pool)
        if left > 60:  # the whole generation's time, said up front (only a count of trees
            # was shown: 23 hours for --n 100000000 went unsaid)
            err_console.print(f"note: generating {n:,} ListOps trees takes about "
                              f"{human_seconds(left)} more at the rate of the first "
                              f"{len(pool)} (Ctrl-C stops it, nothing written)",
                              highlight=False, soft_wrap=True, markup=False)

    with _interrupted_says_what_is_left(), _built_beside(target, force) as folder:
        t0 = time.perf_counter()
        with console.status(f"generating {n} ListOps trees ...") as status:
            try:
                splits = generate_listops(
                    n_train,
                    n_val,
                    n_test,
                    seed,
                    min_length=min_length,
                    max_length=max_length,
                    max_depth=max_depth,
                    max_args=max_args,
                    workers=workers,
                    progress=lambda k: status.update(f"generating ListOps trees: {k}/{n}"),
                    sampled=sampled,
                )
            except typer.Exit:  # (the refusal of `sampled`: a RuntimeError to click)
                raise
            except WorkerDied as err:
                _fail(_died(err), code=1)
            except (RuntimeError, ValueError) as err:
                _fail(str(err), code=1 if isinstance(err, RuntimeError) else 2)
        for split, fname in SPLIT_FILES.items():
            write_listops_tsv(folder / fname, splits[split])
        meta = {
            "generator": "ssmrepro.data.listops",
            "version": GENERATOR_VERSION,
            "seed": seed,
            "sizes": {s: len(v) for s, v in splits.items()},
            "min_length": min_length,
            "max_length": max_length,
            "max_depth": max_depth,
            "max_args": max_args,
        }
        atomic_write_text(folder / "meta.json", json.dumps(meta, indent=1, sort_keys=True))
    console.print(
        f"wrote {n} ListOps examples ({n_train}/{n_val}/{n_test}) to {target} "
        f"in {time.perf_counter() - t0:.1f} s",
        highlight=False, markup=False,
    )


@command(generate_app, "pathfinder")
def generate_pathfinder_cmd(
    n: int = typer.Option(200_000, "--n", min=1, max=10**8, help="number of images"),
    seed: int = typer.Option(0, "--seed", min=0, max=2**63 - 1,
                             help="non-negative (numpy's seed sequence)"),
    res: int = typer.Option(32, "--res", help="resolution: 32, 64, 128 (Path-X) or 256"),
    dir: Path | None = typer.Option(None, "--dir", help=DIR_HELP, metavar="DIR",
                                         parser=path_value),
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="DIR",
        parser=path_value,
        help="output folder (default <root>/generated/pathfinder<res>/curv_contour_length_14)",
    ),
    workers: int = typer.Option(max(1, os.cpu_count() or 1), "--workers", min=1,
                                max=max(1, os.cpu_count() or 1), help="worker processes"),
    format: PathfinderFormat = typer.Option(
        PathfinderFormat.npy,
        "--format",
        help="npy: uint8 shards; lra: PNGs + metadata like the release",
    ),
    shard_size: int | None = typer.Option(
        None, "--shard-size", min=1, max=10**7,
        help="images per .npy shard (--format npy; default 10000)"),
    force: bool = typer.Option(False, "--force", help="replace an existing output folder"),
) -> None:
    """Pathfinder images with the LRA parameters for the resolution (contour length 14).

    Example: ssmrepro data generate pathfinder --res 32 --n 20000 --seed 0 --workers 2
    """
    from ..data.pathfinder import LRA_PARAMS, write_pathfinder

    _one_of_dir_and_out(dir, out)
    if shard_size is not None and format is not PathfinderFormat.npy:  # (it was ignored: the
        # lra layout has folders of 1,000 PNGs, as the release)
        _fail(f"--shard-size {shard_size}: only --format npy writes shards (--format lra "
              "writes folders of 1,000 PNG files, as the release)")
    shard_size = 10_000 if shard_size is None else shard_size
    if res not in LRA_PARAMS:
        _fail(f"--res must be one of {sorted(LRA_PARAMS)}, got {res}")
    params = LRA_PARAMS[res]
    root = _data_root(dir) if out is None else data_root(dir)  # (--out: the root is unused)
    default = generated_dir(root) / f"pathfinder{res}" / params.difficulty
    if format is PathfinderFormat.npy:  # uint8 images; a shard is buffered, then concatenated
        _check_room(f"--n {n} images of {res}x{res} in shards of --shard-size {shard_size}",
                    2 * min(n, shard_size) * res * res, n * res * res,
                    out if out is not None else default,
                    files=2 * -(-n // shard_size) + 1)  # an images and a labels file a shard
    else:  # a PNG file per image (75 bytes at the least) and a metadata line (30 or more), a
        # metadata file per 1,000 images: --n 10**8 wrote files until the inodes ran out
        _check_room(f"--n {n} PNG images of {res}x{res} (--format lra)", 0, 105 * n,
                    out if out is not None else default, files=n + -(-n // 1000) + 1)
    target = _prepare_out(out, default, force)
    with _interrupted_says_what_is_left(), _built_beside(target, force) as folder:
        t0 = time.perf_counter()
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        with Progress(
            TextColumn("pathfinder{task.fields[res]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err_console,
        ) as prog:
            task = prog.add_task("gen", total=n, res=res)
            try:
                write_pathfinder(
                    folder,
                    n,
                    res,
                    seed,
                    params=params,
                    workers=workers,
                    fmt=format.value,
                    shard_size=shard_size,
                    progress=lambda k: prog.update(task, completed=k),
                )
            except WorkerDied as err:
                prog.stop()
                _fail(_died(err), code=1)
    dt = time.perf_counter() - t0
    console.print(f"wrote {n} images to {target} in {dt:.1f} s ({n / dt:.0f} images/s)",
                  highlight=False, markup=False)


@command(app)
def info(dir: Path | None = typer.Option(None, "--dir", help=DIR_HELP, metavar="DIR",
                                         parser=path_value)) -> None:
    """Which data sources are present under the data root, and how to get the missing ones."""
    from ..data.cache import damaged_entries, entry_names
    from ..data.datasets import available_sources, outdated_entries
    from ..data.sources import cache_root

    root = _data_root(dir)
    table = Table("dataset", "source", "present", title=f"data root: {escape(str(root))}")
    wheres = []
    for row in available_sources(root):
        mark = "[green]yes[/]" if row["present"] else "[red]no[/]"
        src = row["source"] + ("" if row["default"] else " (opt-in)")
        table.add_row(escape(row["dataset"]), escape(src), mark)
        where = str(row["path"]) if row["present"] else row["hint"]
        wheres.append(f"  {row['dataset']} ({row['source']}): {where}")
    print_table(table, whole=(0,))
    # below the table, a line each: in a table column of 80 columns a path and the command to
    # copy (`ssmrepro data download lra --dir /long/da` + `ta/root`) were folded over lines
    console.print("path, or how to get it:", highlight=False, markup=False)
    for line in wheres:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    cache = cache_root(root)
    if cache.is_dir():
        # its entries' files only: a data root whose .cache is another's (`SSMREPRO_DATA=~`:
        # ~/.cache, every program's) was walked whole and counted as the datasets' cache
        names = entry_names(cache)
        # (an entry's name on a symbolic link, to /usr say, walked and counted what it leads to)
        size = sum(f.stat().st_size for n in names if not (cache / n).is_symlink()
                   for f in (cache / n).rglob("*") if f.is_file())
        console.print(f"cache: {cache} ({size / 1e6:.1f} MB in {len(names)} prepared "
                      f"entr{'y' if len(names) == 1 else 'ies'})", highlight=False, markup=False)
        damaged = damaged_entries(cache)
        for entry, why in damaged:  # only presence was said: an entry a
            # command would remove and prepare again (minutes for Path-X) looked fine
            console.print(f"damaged cache entry: {entry} ({why}); the next command that reads "
                          "it removes it and prepares the data again", highlight=False,
                          markup=False, soft_wrap=True)
        for entry, why in outdated_entries(cache):  # (said nothing: the next command
            # prepared it again, or refused the source it had served)
            if any(entry == e for e, _ in damaged):
                continue
            console.print(f"outdated cache entry: {entry} ({why}); the next command that reads "
                          "it removes it and prepares the data again", highlight=False,
                          markup=False, soft_wrap=True)
