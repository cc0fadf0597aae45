"""Library (data): cache of prepared (tokenised / decoded / split) arrays, keyed by their inputs.

A cache entry is a directory ``<root>/.cache/<dataset>-<key>/`` holding one ``.npy`` file per array
(so large arrays such as Path-X can be memory-mapped) and a ``meta.json``. The key is a SHA-256 of

- the dataset name and the data source name,
- the identity of every source file (relative path, size, mtime in ns),
- every field of the dataset's preprocessing config (the whole dataclass, not a hand-picked subset),
- the preparation code's version number (bumped when the preparation logic changes).

The entry's ``meta.json`` also keeps a digest of the source files' change times (ctime), checked
on load: a file rewritten with its size and mtime put back, or another data root's copy sharing
the cache, rebuilds the entry with a warning instead of serving the old arrays (``change_stamp``).

Entries are written to a temporary directory first and renamed into place, so a crash never leaves
a half-written entry behind and two processes preparing the same data do not corrupt each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import stat
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..util import (
    NotSmallFile,
    atomic_save_npy,
    atomic_write_text,
    fsync_dir,
    load_array,
    os_reason,
    read_small,
    scratch_folder,
)
from .sources import DataUnavailable

META_FILE = "meta.json"
MAX_META_BYTES = 1 << 20  # a meta.json names a few arrays and the preprocessing config


def file_identity(paths: Iterable[Path], base: Path,
                  changed: list[tuple[str, int]] | None = None) -> list[tuple[str, int, int]]:
    """``(path relative to base, size, mtime_ns)`` for each file, sorted by path; with
    ``changed``, each file's ``(path, ctime_ns)`` is appended to it (see ``change_stamp``).
    DataUnavailable naming a file that is missing or not a regular file (its caller adds the
    command that replaces it)."""
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError as err:  # an image a Pathfinder metadata line names, removed: a
            # FileNotFoundError traceback
            raise DataUnavailable(f"{p}, a file of a dataset: {os_reason(err)}; replace it"
                                  ) from None
        if not stat.S_ISREG(st.st_mode):  # a FIFO blocked the reader forever
            raise DataUnavailable(f"{p}: not a regular file (a FIFO, device or folder) among the "
                                  "files of a dataset; replace it")
        try:
            rel = p.relative_to(base).as_posix()
        except ValueError:
            rel = p.as_posix()
        out.append((rel, int(st.st_size), int(st.st_mtime_ns)))
        if changed is not None:
            changed.append((rel, int(st.st_ctime_ns)))
    out.sort()
    return out


def change_stamp(changed: list[tuple[str, int]]) -> str:
    """A digest of the source files' change times (``file_identity(..., changed=...)``), kept in
    an entry's meta.json (``sources_changed``) and checked on load, not part of the key.

    Size and mtime miss a file rewritten in place with its modification time put back (``touch
    -r``, ``cp -p``, an archive extracted again) and a second data root whose copies keep the
    first one's times sharing one cache: the entry of the old bytes was used without a word. The
    change time cannot be set back, and every copy gets its own. (Not in the key, so entries
    written before it stay valid; a changed stamp rebuilds the entry with a warning.)"""
    blob = json.dumps(sorted(changed), separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


SAMPLE_FILES = 64  # files whose bytes content_sample reads (evenly spaced among them)
SAMPLE_BLOCK = 1 << 16  # bytes read at each of a sampled file's start, middle and end


def content_sample(paths: Iterable[Path], base: Path) -> str:
    """A digest of a sample of the files' bytes: their number, and for up to ``SAMPLE_FILES``
    of them (evenly spaced by path) the path relative to ``base``, the size and the first,
    middle and last ``SAMPLE_BLOCK`` bytes. Bounded (at most 12 MiB read, whatever the
    dataset's size), and the same for a copy of the files elsewhere, whatever their times.

    A run's record keeps it beside its data's cache key (sizes and mtimes): a source rewritten
    with its size and mtime put back (`touch -r`, `cp -p` of another file, an archive of other
    data extracted again) kept the key, and the record stood for a run on the new data."""
    files = sorted(((p.relative_to(base).as_posix() if p.is_relative_to(base) else p.as_posix()),
                    p) for p in paths)
    n = len(files)
    picked = files if n <= SAMPLE_FILES else [files[i * n // SAMPLE_FILES]
                                              for i in range(SAMPLE_FILES)]
    h = hashlib.sha256(str(n).encode())
    for rel, p in picked:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)  # (a FIFO opens without a writer)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise DataUnavailable(f"{p}: not a regular file (a FIFO, device or folder) "
                                      "among the files of a dataset; replace it (generate or "
                                      "download the data again)")
            h.update(f"\0{rel}\0{st.st_size}\0".encode())
            for at in sorted({0, max(0, st.st_size // 2 - SAMPLE_BLOCK // 2),
                              max(0, st.st_size - SAMPLE_BLOCK)}):
                h.update(os.pread(fd, SAMPLE_BLOCK, at))
        finally:
            os.close(fd)
    return h.hexdigest()[:20]


def config_dict(config: Any) -> dict[str, Any]:
    """Every field of a (dataclass) preprocessing config as plain JSON-able values."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        d = dataclasses.asdict(config)
    elif isinstance(config, Mapping):
        d = dict(config)
    else:
        raise TypeError(f"config must be a dataclass instance or a mapping, got {type(config)}")
    return json.loads(json.dumps(d, sort_keys=True, default=str))


def cache_key(
    dataset: str,
    source: str,
    identity: list[tuple[str, int, int]],
    config: Any,
    version: int,
) -> str:
    """Stable 20-hex-digit key; changes when any input above changes."""
    payload = {
        "task": dataset,  # (key name kept so existing cache entries stay valid)
        "source": source,
        "files": [list(t) for t in identity],
        "config": config_dict(config),
        "version": int(version),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def entry_dir(cache_dir: Path, dataset: str, key: str) -> Path:
    return cache_dir / f"{dataset}-{key}"


def save_entry(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Atomically create cache entry ``path`` (a directory) from arrays + meta.

    Every file is written and fsync'ed inside a temporary directory, the directory itself is
    fsync'ed, then renamed into place (and the parent fsync'ed): a crash leaves either no entry or
    a complete one. If another process created the same entry meanwhile, ours is discarded and
    theirs kept.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = scratch_folder(path.parent, f".tmp-{path.name}")  # (a killed build's removed)
    tmp.mkdir()
    try:
        for name, arr in arrays.items():
            atomic_save_npy(tmp / f"{name}.npy", arr)
        # each array's shape, checked on load: a split cut short in all its arrays alike (test
        # 3 -> 1 example) was evaluated on what was left without a word
        # and its dtype: pixels of float64 12.5 in place of uint8 (the same shape) were served
        meta = dict(meta, arrays=sorted(arrays),
                    shapes={name: list(arr.shape) for name, arr in arrays.items()},
                    dtypes={name: np.asarray(arr).dtype.str for name, arr in arrays.items()})
        meta = json.loads(json.dumps(meta, default=str))  # (as it is read back)
        meta["digest"] = meta_digest(meta)
        atomic_write_text(tmp / META_FILE, json.dumps(meta, indent=1, sort_keys=True))
        fsync_dir(tmp)
        try:
            os.replace(tmp, path)
        except OSError as err:
            # the target exists (another writer won the race) and is non-empty: keep theirs
            if not (path / META_FILE).exists():  # named by the entry, not the temporary folder
                raise OSError(err.errno, err.strerror, str(path)) from None
        fsync_dir(path.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def meta_digest(meta: Mapping[str, Any]) -> str:
    """A digest of an entry's meta.json (all but its ``digest``), kept in it and checked on load:
    a meta.json edited by hand (a vocabulary of 117 for ListOps' 17, another input kind or
    pixel statistics) was served as the prepared data's, the model built to the edited one."""
    blob = json.dumps({k: v for k, v in meta.items() if k != "digest"}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def load_entry(path: Path, mmap: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """Load a cache entry, or None when it does not exist. A damaged entry (unreadable
    ``meta.json``, a missing or truncated array, an array whose shape or dtype is not the one
    written) is removed, so the caller prepares it again."""
    try:
        return _read_entry(path, mmap)
    except _Damaged as err:
        warnings.warn(f"damaged cache entry {path} ({err}); rebuilding it", stacklevel=2)
        remove_entry(path)
        return None


def remove_entry(path: Path) -> None:
    """Remove the cache entry ``path`` (to prepare it again): a symbolic link in its place (to
    an entry elsewhere, or leading nowhere) or a file is unlinked, never followed; a folder is
    removed with its files. A link was passed to rmtree, which refuses links (its error
    ignored): the entry it led to was warned about as 'rebuilding it' at every load and never
    rebuilt (save_entry kept it as another writer's), the old arrays served after a warning
    that they were being replaced, and a link leading nowhere failed every load with 'Not a
    directory'. An entry that cannot be removed (a read-only cache folder: PermissionError) is
    DataUnavailable naming it: a file's raised a traceback; a folder's was left in place without
    a word (rmtree's errors ignored), and the new entry, refused beside it as another writer's,
    gave way to the old one: the arrays it was being replaced for served again."""
    try:
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink(missing_ok=True)
        elif path.exists():
            shutil.rmtree(path)
    except FileNotFoundError:  # removed meanwhile (another process rebuilding it)
        pass
    except OSError as err:
        raise DataUnavailable(f"cannot remove cache entry {path} to prepare it again: "
                              f"{err.strerror or err} (remove it by hand, or make its cache "
                              "folder writable)") from None


def entry_problem(path: Path) -> str | None:
    """Why the cache entry ``path`` is damaged (what ``load_entry`` would remove and rebuild),
    else None; removes nothing. Bounded: the arrays are memory-mapped, not read (a truncated
    array fails to map), and checked against the shapes and the meta.json digest the entry
    keeps; an empty folder is no entry, not a damaged one."""
    try:
        _read_entry(path, mmap=True)
    except _Damaged as err:
        return str(err)
    return None


def damaged_entries(cache_dir: Path) -> list[tuple[Path, str]]:
    """(entry, why) for each damaged entry (``entry_problem``) of the cache folder, by name;
    what is no entry's name (``<dataset>-<key>``: a build's scratch folder) is passed over."""
    found = []
    for name in entry_names(cache_dir):
        why = entry_problem(cache_dir / name)
        if why is not None:
            found.append((cache_dir / name, why))
    return found


def entry_names(cache_dir: Path) -> list[str]:
    """The names of the cache folder's entries (``<dataset>-<key>``), sorted; what is no entry's
    name (a build's scratch folder) is passed over; [] where the folder cannot be listed."""
    try:
        names = sorted(p.name for p in cache_dir.iterdir())
    except OSError:
        return []
    return [n for n in names if re.fullmatch(r"[^.].*-[0-9a-f]{20}", n)]


class _Damaged(Exception):
    """A cache entry that is not what ``save_entry`` wrote (its message says how)."""


def _read_entry(path: Path, mmap: bool) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The entry's arrays and meta, None when there is none; _Damaged when it is damaged."""
    meta_file = path / META_FILE
    if path.exists() and not path.is_dir():  # a file where the entry's folder belongs
        raise _Damaged("not a folder")
    if path.is_symlink() and not path.exists():
        raise _Damaged("a symbolic link leading nowhere")
    if not meta_file.exists():
        if path.is_dir() and any(path.iterdir()):
            # save_entry renames a complete folder into place, meta.json included, so files here
            # without it are a partial copy or leftovers: the rename onto them failed with
            # 'cannot use .tmp-...: Directory not empty' on every run, naming no way out
            raise _Damaged("files without a meta.json: a partial copy?")
        return None
    try:  # what prepare() wrote: regular files (a FIFO or a link to /dev/zero never ends)
        meta = json.loads(read_small(meta_file, MAX_META_BYTES))
        if not isinstance(meta, dict) or not isinstance(meta.get("arrays"), list):
            raise ValueError("meta.json is not a cache entry's")
        if "digest" in meta and meta["digest"] != meta_digest(meta):  # (entries written
            # before it have none)
            raise ValueError("meta.json was changed after the entry was written")
        arrays = {}
        for name in meta["arrays"]:
            file = path / f"{name}.npy"
            if not stat.S_ISREG(os.lstat(file).st_mode):
                raise NotSmallFile(f"{file.name} is not a regular file")
            arrays[name] = load_array(file, mmap_mode="r" if mmap else None, allow_pickle=False)
        shapes = meta.get("shapes")  # absent in an entry written before they were recorded
        if shapes is not None:
            if not isinstance(shapes, dict):
                raise ValueError("meta.json's shapes are not a mapping")
            for name, arr in arrays.items():
                if list(arr.shape) != shapes.get(str(name)):
                    raise ValueError(f"{name}.npy has shape {list(arr.shape)}, written as "
                                     f"{shapes.get(str(name))}")
        dtypes = meta.get("dtypes")  # absent in an entry written before they were recorded
        if dtypes is not None:
            if not isinstance(dtypes, dict):
                raise ValueError("meta.json's dtypes are not a mapping")
            for name, arr in arrays.items():
                if arr.dtype.str != dtypes.get(str(name)):
                    raise ValueError(f"{name}.npy holds {arr.dtype.str}, written as "
                                     f"{dtypes.get(str(name))}")
    except (OSError, ValueError, EOFError, RecursionError) as err:  # truncated .npy, garbage,
        # a missing file, JSON nested too deeply
        raise _Damaged(f"{type(err).__name__}: {err}") from None
    return arrays, meta
