"""Stage 4: the results store of one spec: results/<paper>/<id>/.

    runs/<run_id>.json     one record per finished run, written atomically (temp file + rename);
                           its presence means "done"
    claims/<run_id>.claim  created with O_EXCL by the worker training the run; removed afterwards.
                           A claim whose process is gone (same host) or that has not been refreshed
                           for ``stale_after`` seconds is taken over
    events.jsonl           append-only log (claim / done / release) — used to audit that no run is
                           trained twice
    results.csv            tidy table, one row per run of the spec's default profile (other
                           profiles: results-<profile>.csv); always rebuildable from runs/.
                           Columns (docs/columns.md): run columns (run_id, label, seed, status
                           ...), metrics as ``metric.<name>`` (metric.test.acc), the dotted config
                           (task.*, model.*, train.*; lists and mappings as JSON), and how the
                           run trained (backend, device, wall_s, kernels.* ...). ``read_results``
                           reads it back, older tables (bare metric names, Python list reprs)
                           included.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import errno
import hashlib
import io
import itertools
import json
import math
import os
import re
import shutil
import socket
import stat
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .analysis import ANALYSES, analysis_problem
from .spec import find_reused
from .sweep import EarlyStop, parse_config, parsed_identity, per_point, run_id_of
from .tasks.induction_heads import InductionHeadsConfig, special_range
from .tasks.lra import data_changed as lra_data_changed
from .tasks.text_corpus import corpus_changed
from .util import (
    NotSmallFile,
    atomic_write_bytes,
    atomic_write_stream,
    atomic_write_text,
    encode_cell,
    file_digest,
    first_time,
    folder_lock,
    folder_problem,
    human_seconds,
    norm,
    pid_alive,
    process_identity,
    process_started,
    read_small,
    remove_dead_temps,
    repo_root,
)
from .util import strict_json as _clean

DONE_STATUSES = ("ok", "diverged")  # "error" records are re-run
RECORD_STATUSES = (*DONE_STATUSES, "error")
# the final evaluation of a run: NaN for every diverged run (train.py evaluates a run's final
# metrics only when it is ok), so a 'diverged' record or row with a finite one contradicts itself
DIVERGED_NAN = "test.loss"

# results.csv column namespaces (docs/columns.md)
METRIC_PREFIX = "metric."  # metric.test.acc, metric.val.loss, metric.<eval set>.acc
RUN_COLUMNS = ("run_id", "profile", "label", "seed", "status", "stop_reason", "stop_step",
               "epochs", "n_params")
CONFIG_PREFIXES = ("task.", "model.", "train.")
INFO_COLUMNS = ("backend", "device", "pack_size", "wall_s", "torch", "commit")
KERNELS_PREFIX = "kernels."


# what a trained run records of each set (train.py): val / test / train and each named
# evaluation set (train.evals) its loss and score (acc, or mse for a regression task), val also
# its best score and largest rise, train its recent average loss; a history row holds the loss
# and score of val, train and each named set
SET_METRICS = {"val": ("loss", "acc", "mse", "best_acc", "best_mse", "max_rise"),
               "train": ("loss", "acc", "mse", "avg_loss"), "test": ("loss", "acc", "mse")}
NAMED_SET_METRICS = ("loss", "acc", "mse")


def not_recorded(names: Iterable[str], evals: Iterable[str], history: bool) -> list[str]:
    """The names of ``names`` that no run whose named evaluation sets are ``evals`` records, in
    its metrics (or, with ``history``, in a history row besides its step)."""
    evals = set(evals)
    out = []
    for name in names:
        head, _, tail = str(name).partition(".")
        if history:
            known = (name == "step" or (head in ("val", "train") or head in evals)
                     and tail in NAMED_SET_METRICS)
        else:
            known = tail in SET_METRICS.get(head, NAMED_SET_METRICS if head in evals else ())
        if not known:
            out.append(name)
    return out


def record_problem(rec: Any, run_id: str) -> str | None:
    """Why a record must not be trusted as the result of ``run_id``, or None if it can be.

    A record names its run id, status, metrics and the identity (lean config + seed) and code
    version its id was hashed from, and its full config, which must lean to that identity; a
    record copied from another run, edited (its identity or its config), truncated, or written
    by another tool fails here.
    """
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("run_id") != run_id:
        return f"it names run {rec.get('run_id')!r}, not the file's {run_id!r}"
    if rec.get("status") not in RECORD_STATUSES:
        return f"unknown status {rec.get('status')!r}"
    revision = rec.get("revision", 0)
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
        return f"revision {str(revision)[:40]!r} is not a record revision (a whole number >= 0)"
    ident = rec.get("identity")
    if not isinstance(ident, dict) or run_id_of(ident, rec.get("code")) != run_id:
        return "its configuration does not hash to its run id (copied or edited)"
    try:  # the config the curves and analyses read their cell keys from: the identity's own
        config = parse_config(rec.get("config"))
        same = run_id_of(parsed_identity(config), rec.get("code")) == run_id
    except ValueError as err:
        return f"its config is not a run's configuration ({err})"
    if not same:  # config.model.d_model 8 -> 16 with the identity left alone was trusted
        return "its config is not the configuration its run id hashes (edited)"
    if rec["status"] in DONE_STATUSES and not (isinstance(rec.get("metrics"), dict)
                                               and rec["metrics"]):
        return "a finished run without metrics"
    train = config["train"]
    for k in COUNTS:
        why = count_problem(k, rec.get(k), train)
        if why:
            return f"{k} {rec.get(k)!r} {why}"
    bad = [k for k, v in (rec.get("metrics") or {}).items() if not _is_number(v)]
    if not isinstance(rec.get("metrics") or {}, dict) or bad:
        return f"metrics that are not numbers ({', '.join(map(repr, bad[:3])) or 'metrics'})"
    for k, v in (rec.get("metrics") or {}).items():
        why = metric_range_problem(k, [v])
        if why:
            return f"metric {k!r} holds {why}"
    foreign = _unknown(not_recorded(rec.get("metrics") or {}, train.evals, history=False),
                       revision)
    if foreign:  # 100,000 names of another tool's were taken as columns of every table
        return (f"metrics no run of its config records ({', '.join(map(repr, foreign[:3]))}"
                f"{f' and {len(foreign) - 3:,} more' if len(foreign) > 3 else ''})")
    if rec["status"] == "diverged" and (rec.get("metrics") or {}).get(DIVERGED_NAN) is not None:
        return (f"status 'diverged' with a finite {DIVERGED_NAN} (a diverged run's final "
                "evaluation is NaN; edited?)")
    none = rec["status"] == "ok" and "val.loss" not in (rec.get("metrics") or {})  # deleted:
    # every run evaluates it at its end (records before revisions, test stand-ins, lack it)
    if revision >= OK_IS_FINITE and (_ok_with_nonfinite_end(rec) or none):  # training writes
        # such a run 'diverged' since that revision: an edited one was trusted, its cell
        # counting no divergence and a claim over it 'not measured' (an older one is
        # ``redefined``)
        return (f"status 'ok' with a val.loss that is not finite{' (none at all)' if none else ''}"
                f" (since record revision {OK_IS_FINITE} such a run is 'diverged'; edited?)")
    why = analysis_problem(rec["analysis"]) if rec.get("analysis") is not None else None
    if why:
        return f"its analysis {why}"
    hist = rec.get("history")
    if hist is not None and not (isinstance(hist, list) and all(
            isinstance(h, dict) and all(_is_number(v) for v in h.values()) for h in hist)):
        return "a history that is not a list of evaluations (step and metric numbers)"
    last = -1
    for h in hist or []:  # the curves are drawn from it: a step of None raised in `plot`, -20
        step = h.get("step")  # was drawn; a negative loss, an accuracy of 7
        if step is None or step < 0 or step != int(step):
            return f"a history step {step!r} that is not a whole number >= 0"
        if step <= last:  # a run evaluates at increasing steps: 4,000 rows of a 4-step run (its
            # rows repeated, reordered) were taken, and the curve drew their mean at each step
            return f"history steps that do not increase ({last} then {step})"
        last = step
        foreign = _unknown(not_recorded(h, train.evals, history=True), revision)
        if foreign:
            return f"a history row with a value no run records ({foreign[0]!r})"
        if step > train.total_steps:  # drawn far right of every other curve
            return f"a history step {step} beyond the run's {train.total_steps} steps"
        for k, v in h.items():
            why = metric_range_problem(k, [v])
            if why:
                return f"history metric {k!r} holds {why}"
    why = info_problem(rec) or data_problem(rec.get("data"))
    if why:
        return why
    if rec["status"] in DONE_STATUSES:
        return history_problem([h["step"] for h in hist or []] if hist is not None else None,
                               rec, train.eval_every)
    return None


# record_problem's verdicts by (run id, digest of the record's bytes), for this process: a
# command reads each record several times (`run` with every run done: its plan, its count of
# done runs, its summary, the tables, the curves; six reads), and judging one parses its config
# (pydantic), ~3 ms: 70 of the 120 s of a 4,000-run `run` with nothing to train. The verdict is
# a function of the bytes (and of the run id the file is named by), and so is the revision check
# of a valid record (``redefined``: its scan of every history row for scores of NaN outputs
# made at each read was a fifth of the reads' time, 18 of 83 s under cProfile in a 20,000-run
# `run` with nothing to train); the data check (``data_changed``, the corpus file as it is
# now) is made at every read.
_VERDICTS: dict[tuple[str, bytes], tuple[str | None, str | None]] = {}
MAX_VERDICTS = 400_000  # 300,000 runs of a spec and the records of the stores it reuses


NEWER_METRIC = re.compile(r"[a-z][a-z0-9_]{0,39}\.[a-z][a-z0-9_]{0,39}")  # val.max_rise
MAX_NEWER_METRICS = 16  # metrics a newer ssmrepro may have added since (two were, in a version)


def _unknown(names: list[str], revision: int) -> list[str]:
    """``names`` (metrics no run of this code records: ``not_recorded``) that make a record of
    record revision ``revision`` foreign: all of them, but none in a record of a newer ssmrepro
    (``revision`` past ``RECORD_REVISION``) of a few names spelled as metrics (``val.max_rise``),
    which may record a metric this code does not know (they are left out where it is read,
    ``_known``): such a record was quarantined and its run trained again, though a newer
    ssmrepro's records are used as they are (``_newer``)."""
    if revision > RECORD_REVISION and len(names) <= MAX_NEWER_METRICS and all(
            isinstance(n, str) and NEWER_METRIC.fullmatch(n) for n in names):
        return []
    return names


def _known(rec: dict) -> dict:
    """``rec`` (a valid record of a newer ssmrepro) without the metrics, in its final metrics
    and history rows, that this code does not record (``_unknown``): columns no table of this
    code has."""
    evals = ((rec.get("config") or {}).get("train") or {}).get("evals") or {}
    metrics = rec.get("metrics") or {}
    drop = set(not_recorded(metrics, evals, history=False))
    hist = rec.get("history") or []
    rows = [set(not_recorded(h, evals, history=True)) for h in hist]
    if not drop and not any(rows):
        return rec
    return {**rec, "metrics": {k: v for k, v in metrics.items() if k not in drop},
            "history": [{k: v for k, v in h.items() if k not in odd}
                        for h, odd in zip(hist, rows)] if rec.get("history") is not None
            else None}


def judged_problem(data: bytes, rec: Any, run_id: str) -> tuple[str | None, str | None]:
    """``record_problem(rec, run_id)`` of the record ``rec`` parsed from the bytes ``data``, and
    ``redefined(rec)`` of a valid one (else None), judged once per process for the same bytes
    and run id."""
    key = (run_id, hashlib.blake2b(data, digest_size=16).digest())
    if key in _VERDICTS:
        return _VERDICTS[key]
    why = record_problem(rec, run_id)
    judged = (why, redefined(rec) if why is None else None)
    if len(_VERDICTS) >= MAX_VERDICTS:
        _VERDICTS.clear()
    _VERDICTS[key] = judged
    return judged


# how a run was computed, as make_record writes it (engine.local): the backend and device it
# resolved to (kernels.backend.select_backend / select_device) and each mixer's kernel path(s)
RECORD_BACKENDS = ("torch", "cuda")
RECORD_DEVICE = re.compile(r"cpu|cuda(:\d+)?")
KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")  # a mixer class: S6Core, Mamba2Mixer
KERNEL_PATH = re.compile(r"(torch|cuda):[^,\x00-\x1f]{1,80}")  # torch:ssd, torch:conv (width 5)
MAX_KERNEL_ENTRIES = 64  # mixer classes of one model (a model holds a few)
PACK_NUMBERS = ("pack_size", "pack_wall_s", "pack_cpu_s")  # the table's pack_size, wall_s, cpu_s


def info_problem(rec: dict) -> str | None:
    """Why a record's account of how its run was computed cannot be the one training wrote, or
    None: a backend other than torch or cuda, a device other than cpu, cuda or cuda:N, kernels
    that are not {mixer class: 'backend:path[, ...]'} (text or a list raised in every table;
    20,000 entries became 20,000 columns of results.csv), a CUDA kernel path in a run whose
    backend was torch or a CUDA backend on a CPU, and pack counts or timings that are not numbers
    >= 0 (a table holding them was refused, with a warning at every read, as it was rewritten
    from the same records). Fields a record lacks are not checked (older records)."""
    backend, device, kernels = rec.get("backend"), rec.get("device"), rec.get("kernels")
    if backend is not None and backend not in RECORD_BACKENDS:
        return f"backend {str(backend)[:40]!r}: not {' or '.join(RECORD_BACKENDS)}"
    if device is not None and not (isinstance(device, str) and RECORD_DEVICE.fullmatch(device)):
        return f"device {str(device)[:40]!r}: not cpu, cuda or cuda:N"
    if backend == "cuda" and device == "cpu":
        return "backend cuda on device cpu (the CUDA kernels run on a GPU only)"
    if kernels is not None:
        if not isinstance(kernels, dict) or len(kernels) > MAX_KERNEL_ENTRIES:
            return (f"kernels that are not a table of at most {MAX_KERNEL_ENTRIES} mixer classes "
                    "and their kernel paths")
        for k, v in kernels.items():
            paths = v.split(", ") if isinstance(v, str) else [None]
            if not KERNEL_NAME.fullmatch(k) or not all(
                    isinstance(x, str) and KERNEL_PATH.fullmatch(x) for x in paths):
                return f"kernels entry {k[:40]!r}: {str(v)[:60]!r} is not 'torch:...' or 'cuda:...'"
            if backend == "torch" and any(x.startswith("cuda:") for x in paths):
                return (f"kernels entry {k!r} claims {v!r}, a CUDA kernel path, in a run whose "
                        "backend was torch")
    for k in PACK_NUMBERS:
        v = rec.get(k)
        if v is not None and not (_is_number(v) and v >= 0):
            return f"{k} {str(v)[:40]!r} is not a count or time >= 0"
    return None


DATA_SAMPLE = re.compile(r"[0-9a-f]{20}")  # data.sample: data.cache.content_sample's digest


def data_problem(data: Any) -> str | None:
    """Why a record's account of the data its run trained on (``data``: the task's
    ``data_info``, with ``evals`` for the named evaluation sets) cannot be one training wrote,
    or None: a ``cache_key`` that is not a file name, or a ``sample`` that is not a digest of
    the data's bytes (``content_sample``). The data check (``data_changed``) read a sample of
    text as other data, printed whole in its warning (3,000 characters), and trusted a number
    or a table, as a record written before samples were kept."""
    sets = [data] if isinstance(data, dict) else []
    if sets and isinstance(data.get("evals"), dict):
        sets += [d for d in data["evals"].values() if isinstance(d, dict)]
    for d in sets:
        key, sample = d.get("cache_key"), d.get("sample")
        if key is not None and not (isinstance(key, str) and 0 < len(key) <= 255
                                    and "/" not in key and "\0" not in key):
            return f"data.cache_key {str(key)[:40]!r} is not the name of a data cache entry"
        if sample is not None and not (isinstance(sample, str) and DATA_SAMPLE.fullmatch(sample)):
            return (f"data.sample {str(sample)[:40]!r} is not a digest of its data's bytes "
                    "(20 hexadecimal digits; edited?)")
    return None


def history_problem(steps: list | None, rec: dict, every: int) -> str | None:
    """Why a finished run's history (its evaluation steps ``steps``; None: no history) is not
    the one its run made, or None. A run evaluates at step 0 and every ``every`` steps while it
    trains, and its history ends at its stop step (train.py): an ``ok`` run's at that step, a
    diverged run's at the last evaluation before it. A record without its history, or with
    rows cut or added, was trusted: its seed had no learning curve, or a curve ending at step
    0, and the cell's mean curve was drawn from the other seeds without a word. A run stopped by
    its time limit may lack the row at its stop step (records written before it had one)."""
    if steps is None:
        return "a finished run without its evaluation history (edited or truncated?)"
    s = rec.get("stop_step")
    if not _is_number(s) or s is None:
        return None  # a record without its stop step (count_problem checks one given)
    s = int(s)  # a whole number (count_problem): 40.0 read as 40, not as no stop step
    n = -(-s // every)  # the evaluations while it trained: steps 0, every, ... below s
    if rec["status"] == "ok" or s % every == 0:
        ends = {n + 1}
        if rec["status"] == "ok" and rec.get("stop_reason") == "time_limit" and s % every:
            ends.add(n)
    else:
        ends = {n}
    if len(steps) in ends and all(a == b for a, b in zip(
            steps, itertools.chain(range(0, n * every, every), (s,)))):
        return None
    shown = ", ".join(f"{x:g}" for x in steps[:4]) + (", ..." if len(steps) > 4 else "")
    return (f"a history of {len(steps):,} evaluations (steps {shown or 'none'}), not the "
            f"evaluations of a run that evaluates every {every} steps and stopped at step {s} "
            "(rows cut or added?)")


def data_changed(rec: dict) -> str | None:
    """Why a valid record (``record_problem``) does not describe its run on the data there is
    now, or None: its run's text corpus (or a named evaluation set's) is not the one its
    record names (``tasks.text_corpus.corpus_changed``), or its LRA dataset's files are not those
    it trained on (``tasks.lra.data_changed``)."""
    config, data = rec["config"], rec.get("data")
    data = data if isinstance(data, dict) else {}
    why = corpus_changed(config["task"], data) or lra_data_changed(config["task"], data)
    sets = data.get("evals") if isinstance(data.get("evals"), dict) else {}
    for name, ov in (config["train"].get("evals") or {}).items():
        why = why or (corpus_changed({**config["task"], **ov}, sets.get(name))
                      if isinstance(ov, dict) else None)
    return why


def scored_nonfinite(values: dict, final: bool) -> tuple[str, float] | None:
    """The first accuracy of ``values`` (a record's final metrics or a history row; or a table's
    metrics by name, each a column's values) that is a number beside a loss of the same
    evaluation that is not (NaN or inf, empty in a record or table), and that number; or None.
    Outputs that are not finite score no accuracy (``train.evaluate``); an ssmrepro before this
    rule read the argmax of NaN logits as class 0, and its records (under the same run ids: no
    code version was bumped) gave such a model a test.acc of 0.0, or class 0's share, and a
    val.best_acc over those scores. A final ``train.acc`` (``final``) is not checked: the final
    ``train.loss`` is the last training batch's, not that evaluation's (a history row's is)."""
    for k, v in values.items():
        loss = k.removesuffix(".acc") + ".loss"
        if not k.endswith(".acc") or (final and k == "train.acc") or loss not in values:
            continue
        lv = values[loss]
        if isinstance(v, np.ndarray) or isinstance(lv, np.ndarray):  # a table's columns
            acc = np.asarray(v, dtype=float)
            bad = np.isfinite(acc) & ~np.isfinite(np.asarray(lv, dtype=float))
            if bad.any():
                return k, float(acc[bad][0])
        elif v is not None and _is_number(v) and (lv is None or not _is_number(lv)):
            return k, float(v)  # a record's value: None is its NaN
    return None


def _model_names(rec: dict, names: tuple[str, ...]) -> bool:
    """Whether the record's model config holds one of ``names`` (a mixer, a norm kind)."""
    todo: list = [rec["config"].get("model")]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, str) and v in names:
            return True
    return False


def _mamba2_lr_scaled(rec: dict) -> bool:
    """A run of a Mamba-2 mixer (``mamba2``, ``mamba2_3conv``) whose ``train.lr_scale`` scales
    its Δ or A group (revision 1)."""
    scale = (rec["config"].get("train") or {}).get("lr_scale") or {}
    return isinstance(scale, dict) and any(scale.get(g, 1.0) != 1.0 for g in ("delta", "A")) \
        and _model_names(rec, ("mamba2", "mamba2_3conv"))


def _batchnorm_stopped_in_pack(rec: dict) -> bool:
    """A finished run of a BatchNorm model, trained in a pack (or a record without its pack
    size), that stopped before its own step budget (early stop, time limit): its pack-mates
    trained on, and their steps updated its running statistics (revision 2). (One that ran its
    whole budget beside pack-mates with larger budgets cannot be told from its record.)"""
    return rec.get("status") == "ok" and rec.get("stop_reason") in ("early_stop", "time_limit") \
        and (rec.get("pack_size") is None or rec["pack_size"] > 1) \
        and _model_names(rec, ("batchnorm",))


def _float64_yu_task(rec: dict) -> bool:
    """A float64 run of yu2025's synthetic regression tasks (``linear_functional``,
    ``first_abs``: float32-rounded inputs beside targets computed from the unrounded ones;
    ``cosine_operator``: float32 inputs and targets; revision 3). Float32 runs are unchanged."""
    config = rec["config"]
    return (config.get("train") or {}).get("dtype") == "float64" and (
        config.get("task") or {}).get("name") in ("linear_functional", "first_abs",
                                                  "cosine_operator")


def _batchnorm_probed(rec: dict) -> bool:
    """A BatchNorm run with a training-time analysis (``decay_histogram``): it probed the model
    in training mode, with the probe batch's statistics, which overwrote its running ones in the
    saved weights (revision 4)."""
    return bool(rec.get("analysis")) and _model_names(rec, ("batchnorm",))


def _corpus_of_gigabytes(rec: dict) -> bool:
    """A text_corpus run (or named evaluation set) of a split of 2**31 bytes or more: one 32-bit
    draw scaled up placed its windows on a lattice of 2**32 offsets (revision 5)."""
    data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
    evals = data.get("evals") if isinstance(data.get("evals"), dict) else {}
    return any(isinstance(d, dict) and d.get("dataset") == "text_corpus"
               and isinstance(d.get("sizes"), dict)
               and any(_is_number(v) and v is not None and v >= 1 << 31
                       for v in d["sizes"].values())
               for d in (data, *evals.values()))


def _induction_heads_hard_range(rec: dict) -> bool:
    """An induction_heads run (or named evaluation set) with hard cases whose gamma*T floored
    in float falls one short of gamma*T as written (0.29 x 100 -> 28): r = floor(gamma*T) was
    never drawn (revision 6). The shipped gamma 0.1 at T 20 / 50 / 100 is unchanged."""
    config = rec["config"]
    task = config.get("task") or {}
    evals = (config.get("train") or {}).get("evals") or {}
    for t in (task, *({**task, **e} for e in evals.values() if isinstance(e, dict))):
        if not isinstance(t, dict) or t.get("name") != "induction_heads":
            continue
        gamma, T, p = (t.get(k, InductionHeadsConfig.model_fields[k].default)
                       for k in ("gamma", "T", "p"))
        try:
            if p > 0 and special_range(gamma, T) != math.floor(gamma * T):
                return True
        except (TypeError, ValueError, OverflowError):
            continue
    return False


def _ok_with_nonfinite_end(rec: dict) -> bool:
    """An ok run whose final evaluation has no finite ``val.loss`` (its last update blew its
    model up): it is ``diverged`` at its stop step now, as a run of one more step was
    (revision 7); its record said 'ok', the report counted no divergence and a claim over a
    cell of such seeds read 'not measured'."""
    metrics = rec.get("metrics") or {}
    return rec.get("status") == "ok" and isinstance(metrics, dict) and "val.loss" in metrics \
        and metrics["val.loss"] is None


# Changes of what a run computes that keep its run id (bumping CODE_VERSION changes every run's
# id: every store trains everything again, and each committed row stands under an older id): a
# record names the revision it was written at (``revision``; records before the first have
# none, revision 0), and one older than a change that touches its run (the change's test of
# the record) is trained again (``redefined``). A new such change appends (number, what
# changed, test) here, which bumps RECORD_REVISION.
REVISIONS: tuple[tuple[int, str, Callable[[dict], bool]], ...] = (
    (1, "Mamba-2's Δ and A parameters take train.lr_scale (it was ignored)", _mamba2_lr_scaled),
    (2, "a stopped member's BatchNorm statistics stay frozen while its pack trains on (its "
        "metrics depended on its pack-mates' step budgets)", _batchnorm_stopped_in_pack),
    (3, "yu2025's synthetic tasks give a float64 run float64 inputs and targets",
     _float64_yu_task),
    (4, "training-time analyses probe the model in eval mode (a BatchNorm model's probe "
        "overwrote its running statistics)", _batchnorm_probed),
    (5, "text_corpus windows of a corpus of gigabytes start at any byte offset (62-bit draws)",
     _corpus_of_gigabytes),
    (6, "induction_heads draws the hard case's r up to gamma*T as written (0.29 x 100 floored "
        "to 28 in float)", _induction_heads_hard_range),
    (7, "a run whose model at its stop step has a loss that is not finite is 'diverged' there "
        "(it ended 'ok' with NaN metrics)", _ok_with_nonfinite_end),
)
RECORD_REVISION = REVISIONS[-1][0]
OK_IS_FINITE = next(n for n, _, t in REVISIONS if t is _ok_with_nonfinite_end)


_NEWER_KEY = "records written by a newer ssmrepro"  # (how ``_newer`` begins: ``Store.to_say``)


def _newer(revision: int) -> str:
    """The warning of records a newer ssmrepro wrote (their revision past ``RECORD_REVISION``):
    they were trusted without a word, though a change of what a run computes made since (which
    this code does not know) may mean their numbers stand for something it does not compute."""
    return (f"records written by a newer ssmrepro (record revision {revision}; this one knows "
            f"revisions up to {RECORD_REVISION}) are used as they are: a change made since in "
            "what a run computes is unknown here; update ssmrepro to read them as it does")


def _lacking(rec: dict) -> list[str]:
    """The final metric an ok run's record lacks that training records now and that cannot be
    computed from a record: ``train.avg_loss`` (a mean of training-batch losses no record keeps;
    ``val.max_rise``, the other metric added since this code version, ``upgraded`` computes),
    which records of the first hours of this code version lack beside their ``train.loss``.
    Such a seed left ``aggregate.select`` no finite ``select.by`` value: its candidate counted
    as diverged (cooper2026 picks each cell's learning rate by train.avg_loss), and a cell of it
    and a new seed had no value."""
    metrics = rec.get("metrics") or {}
    return ["train.avg_loss"] if rec.get("status") == "ok" and "train.loss" in metrics \
        and "train.avg_loss" not in metrics else []


def redefined(rec: dict) -> str | None:
    """Why a valid record's numbers (``record_problem``) mean something else today than when it
    was written, or None: it is older than a change of what its run computes (``REVISIONS``), or
    it scores an accuracy of outputs that were not finite (``scored_nonfinite``), in its final
    metrics or its evaluation history. A record written by an older ssmrepro under the same run
    id was trusted: its test.acc 0.0 of a model of NaN outputs was averaged into its cell and
    judged beside the new records' NaN (a failed evaluation); a Mamba-2 run trained with its
    lr_scale ignored stood for one trained with it. A failed run's record (trained again
    anyway) is not looked at."""
    if rec.get("status") not in DONE_STATUSES:
        return None
    revision = rec.get("revision", 0)
    for number, change, touches in REVISIONS:
        if revision < number and touches(rec):
            return (f"written by an older ssmrepro (record revision {revision}), before "
                    f"{change}")
    lacking = _lacking(rec)
    if lacking:
        return (f"written by an older ssmrepro, it lacks {', '.join(lacking)}, which training "
                "records now")
    where = scored_nonfinite(rec.get("metrics") or {}, final=True)
    at = where and where[0]
    for h in [] if at else rec.get("history") or []:
        where = scored_nonfinite(h, final=False)
        if where:
            at = f"{where[0]} at step {h.get('step')}"
            break
    if at is None:
        return None
    return (f"written by an older ssmrepro, it scores an accuracy ({at}) of outputs that were "
            "not finite (a NaN loss), which score none now")


def max_rise(losses: list[float]) -> float:
    """Largest loss spike of a history, as a fraction of the first loss: max over evaluations t of
    (loss_t − min(loss_<t)) / loss_first (0 when the loss never rises above its best so far; NaN
    with fewer than two finite values). Relative to the first loss, not to the best one, so a run
    that reaches float precision (loss ~1e-14) and moves by 1e-6 is not a spike."""
    vals = [v for v in losses if math.isfinite(v)]
    if len(vals) < 2 or vals[0] <= 0:
        return math.nan
    best, out = vals[0], 0.0
    for v in vals[1:]:
        out = max(out, v - best)
        best = min(best, v)
    return out / vals[0]


def upgraded(rec: dict) -> dict:
    """``rec`` (a valid record) with the fields an older ssmrepro wrote otherwise under the same
    run id recomputed from the record as training computes them now: ``val.max_rise`` of a
    finished record with a ``val.loss`` but not it, from its history (records before the
    metric: a cell of such a seed and a new one had no val.max_rise, '—', without a word, and
    `run` found them done); the
    stop reason of an ok run whose evaluation at its stop step met its early stop is
    ``early_stop`` (one meeting it at its step budget said ``max_steps``, one cut by its time
    limit between evaluations ``time_limit``, and the report counted it among the runs its time
    limit cut short). The file is left as it is."""
    metrics = rec.get("metrics") or {}
    if rec.get("status") in DONE_STATUSES and "val.loss" in metrics \
            and "val.max_rise" not in metrics:  # (records since give both)
        losses = [h.get("val.loss") for h in rec.get("history") or []] + [metrics.get("val.loss")]
        rise = max_rise([math.nan if v is None else v for v in losses])
        rec = {**rec, "metrics": {**metrics, "val.max_rise": None if math.isnan(rise) else rise}}
    if rec.get("status") != "ok" or rec.get("stop_reason") not in ("max_steps", "time_limit"):
        return rec
    es = ((rec.get("config") or {}).get("train") or {}).get("early_stop")
    hist = rec.get("history") or []
    if not es or not hist or hist[-1].get("step") != rec.get("stop_step"):
        return rec
    try:
        es = EarlyStop(**es) if isinstance(es, dict) else es
    except ValueError:  # (parse_config read it: not reached)
        return rec
    return {**rec, "stop_reason": "early_stop"} if es.met(hist[-1].get(es.metric)) else rec


def weights_archive_problem(path: Path) -> str | None:
    """Why the weights file ``path`` (``torch.save``'s zip archive) would unpack to more bytes
    than the file holds, else None (also for what is no zip: the legacy format, or damaged
    bytes, ``torch.load`` says what it is). ``torch.save`` stores its records uncompressed;
    torch.load inflates compressed ones to the sizes they declare: a weights file of 1 MB whose
    tensor record was deflated unpacked to 1 GB (about a thousand times its size: any memory,
    from a small file). Reads the archive's directory only."""
    import zipfile

    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as z:
            declared = sum(i.file_size for i in z.infolist())
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError):
        return None
    if declared <= size:
        return None
    return (f"its archive's records declare {declared:,} bytes in a file of {size:,} "
            "(compressed: torch.save writes none, and torch.load would unpack them whole)")


FOREIGN_WEIGHTS = "not the weights its record names (another run's, copied or edited?)"
COUNTS = ("n_params", "stop_step", "epochs")  # a run's counts besides its metrics


def count_problem(k: str, v: Any, train) -> str | None:
    """Why ``v`` cannot be the ``k`` (one of ``COUNTS``) of a run trained as ``train``, worded to
    follow '<k> <v> ', or None: not a whole number >= 0 (epochs: a number >= 0; 'many' raised in
    a figure, -5 steps was a mean stop step), or beyond the run's budget (99999 steps of a
    40-step run). Checked in a record and in a committed table's row alike (a table's n_params
    of -5 was drawn and summarised)."""
    if v is None:
        return None
    whole = k != "epochs"
    if not (_is_number(v) and v >= 0 and (not whole or v == int(v))):
        return (f"is not a {'whole ' if whole else ''}number of "
                f"{'parameters' if k == 'n_params' else 'steps' if whole else 'epochs'} (>= 0)")
    if k == "stop_step" and v > train.total_steps:
        return f"beyond the run's {train.total_steps} steps"
    if k == "epochs" and train.epochs is not None and v > train.epochs:
        return f"beyond the run's {train.epochs}"
    return None


def _loops(path: Path) -> bool:
    """``path`` (or a folder above it) is a symbolic link loop."""
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ELOOP
    return False


def _reused(pid: int, claimed: Any, started: Any = None) -> bool:
    """Whether the live process ``pid`` is another than the one that wrote the claim naming it:
    the claimant died and its pid went to another program (after a restart of the machine or
    container), which held the run for 10 minutes. A claim that names its holder's
    ``process_identity`` (``started``, start ticks since boot) is compared with the pid's now:
    exact, and no clock step moves it. Else its ``time`` (``claimed``), with a minute's margin:
    the start time is read against the wall clock, which NTP or a resumed VM may step (a step
    forward of more than the margin while a run trained made its live holder look reused, and
    its claim was taken over: the run trained twice)."""
    if isinstance(started, str) and started:
        now = process_identity(pid)
        if now is not None:
            return now != started
    if not (isinstance(claimed, (int, float)) and not isinstance(claimed, bool)
            and math.isfinite(claimed)) or claimed > time.time():
        return False  # no time, or a wrong clock: the heartbeat decides
    started = process_started(pid)
    return started is not None and started > claimed + 60.0


def _is_number(v: Any) -> bool:
    """A metric value as records hold it: a finite number, or None (NaN / inf, see ``_clean``;
    Python's JSON reader would take ``Infinity`` too, which no record of ours holds)."""
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                         and math.isfinite(v))


LOSS_EPS = 1e-6  # a loss this far below 0 is float rounding


def is_loss(name: str) -> bool:
    """A metric that is a loss (cross-entropy or mean squared error): never negative. The best
    validation score of a regression task (``val.best_mse``) is one too (it passed as no loss:
    a value of -5 was neither refused in a table nor as a paper value)."""
    return name.endswith((".loss", "_loss", ".mse", ".best_mse"))


def is_accuracy(name: str) -> bool:
    """A metric that is an accuracy, a fraction in [0, 1]: ``test.acc``, ``L50.acc`` and the best
    validation accuracy ``val.best_acc`` (which passed as none: a paper value or claim of 99, a
    percentage, was accepted and could never match or pass, ``<= 1`` accepted as a claim that
    cannot fail, and a table's 1.5 kept)."""
    return name.endswith((".acc", ".best_acc"))


def metric_range_problem(name: str, values: Iterable[Any]) -> str | None:
    """Why values of metric ``name`` cannot be real, or None: an infinite value (a run that
    diverged has NaN, never inf), an accuracy (``*.acc``) outside [0, 1] or a negative loss
    (``*.loss``, ``*_loss``, ``*.mse``: a cross-entropy or a squared error; ``LOSS_EPS`` below 0
    is float rounding)."""
    vals = [float(v) for v in values if v is not None and not isinstance(v, bool)
            and isinstance(v, (int, float))]
    if any(math.isinf(v) for v in vals):
        return "an infinite value (a diverged run has none: NaN / empty)"
    if is_accuracy(name) and any(not 0.0 <= v <= 1.0 for v in vals if v == v):
        return "an accuracy outside [0, 1]"
    if is_loss(name) and any(v < -LOSS_EPS for v in vals if v == v):
        return "a negative loss (a loss is a cross-entropy or a squared error, never below 0)"
    return None


MAX_RECORD_BYTES = 64 << 20  # a record with its history is kilobytes; a long one a few MB


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


def _safe(s: str) -> str:
    """``s`` in a file name: itself where it is up to 80 ASCII letters, digits, '-' and '_' (a
    claim's nonce: uuid hex, or inode-mtime), else a digest of it. Non-ASCII letters were kept
    (3 bytes each: 80 of them and the run id passed the 255-byte name limit, so no takeover
    marker could be made and the stale claim was never taken over or cleaned up: its run waited
    for ever), and two nonces alike in their first 80 characters shared a marker."""
    if len(s) <= 80 and all(c.isascii() and (c.isalnum() or c in "-_") for c in s):
        return s
    return hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:40]


# the record's field holding the SHA-256 of the run's saved weights (runs/<run_id>.pt)
WEIGHTS_DIGEST = "weights_sha256"
WEIGHTS_BYTES = "weights_bytes"  # their size, beside their digest: a file of another size is
# not theirs, and is not read (hashed) to find it out
BYTES_PER_PARAM = 64  # a record without their size (older): float64 parameters and buffers,
WEIGHTS_SLACK = 64 << 20  # and the zip's own bytes, with room to spare


def _not_a_file(path: Path, what: str) -> OSError:
    """The error for ``what`` (the event log, a claim) that is not a regular file: a folder
    ('a folder where a file belongs') or a FIFO, device or socket (it was called a folder)."""
    if path.is_dir():
        return IsADirectoryError(errno.EISDIR, f"{what} is a folder", str(path))
    return OSError(errno.EINVAL, f"not a regular file (a FIFO, device or socket) where {what} "
                   "belongs; remove it", str(path))


class WeightsDoNotFit(ValueError):
    """Saved weights that do not load into their run's model (another model's parameters)."""


_RECORD_WARNING = re.compile(r"(ignoring run record (.+?\.json)|run record (\S+\.json) "
                             r"quarantined to \S+): (.*)", re.DOTALL)
MAX_NAMED_RECORDS = 3  # records of one reason named one by one; more are one warning
# what a read-only command (``Store.readonly``) says of a record or weights file of its own
# that `run` quarantines: it is left where it is
_RUN_QUARANTINES = "; left in place (`run` moves it to runs/quarantine/ and trains the run again)"


def _grouped(warnings: list[str]) -> list[str]:
    """``warnings`` (a store's, ``Store.to_say``) with the records ignored or quarantined for
    one reason given as one warning, naming the first few and the count, where more than
    ``MAX_NAMED_RECORDS`` share it: a store of 4,000 records an older ssmrepro wrote (each
    'lacks train.avg_loss') printed 4,000 lines at every `plot`, `export`, `list` and `show`."""
    groups: dict[tuple[bool, str], list[str]] = {}
    for w in warnings:
        m = _RECORD_WARNING.fullmatch(w)
        if m:
            groups.setdefault((m.group(2) is None, m.group(4)), []).append(m.group(2) or
                                                                           m.group(3))
    out = []
    said = set()
    for w in warnings:
        m = _RECORD_WARNING.fullmatch(w)
        key = (m.group(2) is None, m.group(4)) if m else None
        named = groups.get(key) if m else None
        if named is None or len(named) <= MAX_NAMED_RECORDS:
            out.append(w)
        elif key not in said:  # said at the first one's place, once
            said.add(key)
            some = f"{', '.join(named[:MAX_NAMED_RECORDS])} and " \
                f"{len(named) - MAX_NAMED_RECORDS:,} more"
            out.append(f"{len(named):,} run records quarantined to runs/quarantine/ ({some}): "
                       f"{m.group(4)}" if m.group(2) is None else
                       f"ignoring {len(named):,} run records ({some}): {m.group(4)}")
    return out


class Store:
    """``reuse``: read-only stores of other specs; a record there with the same run id (same
    config, seed and code version) counts as done here too. ``weights``: the spec keeps each
    finished run's weights (``save_weights``, read by its analyses): a run whose record is there
    but whose weights are not is not done (it is trained again). ``analyses``: the training-time
    analyses the spec records (``decay_histogram``): a finished run whose record lacks one is not
    done either. ``readonly``: a command that only reads the store (`export`, `show`, `list`,
    `run --dry-run`) moves and touches nothing: an invalid record or weights file of its own is
    ignored with a warning saying that `run` quarantines it (``_distrust``), a claim dated in
    the future is left as it is (``_date_now``); `show` and `run --dry-run` moved damaged
    weights (and records) into ``runs/quarantine/``."""

    def __init__(self, root: Path, stale_after: float = 600.0, reuse: list[Path] | None = None,
                 weights: bool = False, analyses: tuple[str, ...] = (), readonly: bool = False):
        self.root = Path(root)
        self.readonly = readonly
        self.weights = weights
        self.analyses = tuple(analyses)
        self.reuse = [Path(r) for r in reuse or []]
        self.runs = self.root / "runs"
        self.claims = self.root / "claims"
        self.stale_after = stale_after
        self.host = socket.gethostname()
        self.warnings: list[str] = []  # problems met while reading (quarantined records ...)
        self._newer_seen = False  # a record of a newer ssmrepro was read (_warn_newer)
        self._checked: dict[tuple, bool] = {}  # weights file (path, inode, size, mtime) -> its
        # digest is its record's (hashed once per process, not at every is_done)
        self._weights_said: set[str] = set()  # run ids whose weights file was distrusted
        self._held: dict[str, str] = {}  # run id -> nonce of the claim this process wrote
        # run id -> root of the reused store where the run is claimed and recorded (``homes``)
        self.homes: dict[str, Path] = {}
        # runs whose only records were trained on other data than there is now (``data_changed``)
        # or hold numbers that mean something else now (``redefined``): a committed row of
        # theirs is the old data's (or definition's) too, and must not stand in for them
        self.stale_data: set[str] = set()

    # ---------------------------------------------------------------- records
    def home(self, run_id: str) -> Path:
        """The root of the store where the run is claimed, recorded and its weights saved: a
        reused store whose spec trains the same run (``homes``, set by `run`), else this one. A
        spec and one that reuses it, run at once, claimed and recorded a shared run each in its
        own store, and the reused spec's `run`, which reads no store of the other's, trained
        it again."""
        return self.homes.get(run_id, self.root)

    def record_path(self, run_id: str) -> Path:
        return self.home(run_id) / "runs" / f"{run_id}.json"

    def read(self, run_id: str) -> dict | None:
        """The run's valid record (own store first, then the reused ones), else None.

        An invalid record of this store (unparsable, foreign, copied from another run, edited) is
        moved to ``runs/quarantine/`` with a warning, so the run is trained again; an invalid one in
        a reused (read-only) store is ignored with a warning.
        """
        changed = False
        unfinished = None  # this store's record of a run that did not finish ("error"): a
        # reused store's finished record of it comes first (`run` trained again, and `plot`
        # reported as failed, a run the reused spec had finished)
        roots = [self.runs] + [r / "runs" for r in self.reuse]
        for k, root in enumerate(roots):
            path = root / f"{run_id}.json"
            try:
                data = read_small(path, MAX_RECORD_BYTES)
                rec = json.loads(data)
            except FileNotFoundError:  # no record
                continue
            except NotADirectoryError:  # a file where a folder of the path belongs: `prepare`
                # names it before anything is written; `list` and `show` said nothing of it
                # (every run not done) where `figures` and `export` stop on it
                self._warn_unreadable(root)
                continue
            except PermissionError:  # not damaged: this user may not read it (a store shared
                # by a group, copied or untarred under another umask, e.g. 077): it was
                # quarantined as 'unreadable' (another user's good record moved out of their
                # store) and the run trained again; `cannot use <record>: permission denied`
                raise
            except (ValueError, OSError, RecursionError) as err:  # JSON, UTF-8, a
                if isinstance(err, OSError) and err.errno == errno.ELOOP and _loops(root):
                    # the folder, not this record (`--out` a link to itself): one message, not
                    # a warning for every record of every spec and exit 0
                    raise OSError(errno.ELOOP, "a symbolic link loop", str(root)) from None
                why = f"unreadable ({err if isinstance(err, NotSmallFile) else type(err).__name__})"
            else:
                why, older = judged_problem(data, rec, run_id)
                if why is None:
                    why = data_changed(rec) or older
                    if why is None:
                        self.stale_data.discard(run_id)
                        if rec.get("status") not in DONE_STATUSES and k + 1 < len(roots):
                            unfinished = unfinished or rec
                            continue
                        if rec.get("revision", 0) > RECORD_REVISION:
                            self._warn_newer(rec["revision"])
                            rec = _known(rec)
                        return upgraded(rec)
                    self._warn(f"ignoring run record {path}: {why}; `run` trains the run again")
                    changed = True
                    continue
            self._distrust(path, why, quarantine=k == 0)
        if unfinished is not None:
            return unfinished
        if changed:
            self.stale_data.add(run_id)
        return None

    def has_records(self) -> bool:
        """Whether a run folder of this store (its ``runs/``, then the reused stores') holds a
        record, looked for as ``read`` looks: one that is not a folder (a file, a FIFO, below a
        file) is warned of (``_warn_unreadable``: its runs count as not done), a symbolic link
        loop is an OSError naming it. `export` of a spec whose tables are gone looked no
        further than 'no folder of records' and gave 0 rows, exit 0, without a word, where
        `plot` said why its runs were not done and `list` refused the loop."""
        for root in [self.runs] + [r / "runs" for r in self.reuse]:
            why = folder_problem(root)
            if why is None:
                if any(root.glob("*.json")):
                    return True
            elif why.startswith("a symbolic link loop"):
                raise OSError(errno.ELOOP, "a symbolic link loop", str(root))
            elif why != "no such folder":
                self._warn_unreadable(root)
        return False

    def named_profiles(self) -> set[str]:
        """The profiles the record files of this store's run folders name (its own, then the
        reused stores'), each file read as ``read`` reads it but not judged: a superset of the
        profiles of its valid records, for a question asked of every profile of a spec that few
        records answer (`export` of a profile without a table expanded its grid and read every
        planned run's record to find none naming it: twice the reads of a 4,000-run store)."""
        names: set[str] = set()
        for root in self._run_folders():
            try:
                paths = list(root.glob("*.json")) if root.is_dir() else []
            except OSError:
                continue
            for path in paths:
                try:
                    rec = json.loads(read_small(path, MAX_RECORD_BYTES))
                except (ValueError, OSError, RecursionError):
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("profile"), str):
                    names.add(rec["profile"])
        return names

    def _distrust(self, path: Path, why: str, quarantine: bool) -> None:
        """Quarantine the invalid record ``path`` (``quarantine``: this store's own), with a
        warning; a reused store's, or any in a ``readonly`` store, is ignored with one."""
        if not quarantine or self.readonly:
            self._warn(f"ignoring run record {path}: {why}" + (_RUN_QUARANTINES if quarantine
                                                                else ""))
            return
        try:
            dest = self._quarantine(path)
        except OSError as err:
            self._warn(f"ignoring run record {path}: {why} (cannot quarantine it: {err.strerror})")
            return
        self._warn(f"run record {path.name} quarantined to {dest.relative_to(self.root)}: {why}; "
                   "the run will be trained again")

    def _quarantine(self, path: Path) -> Path:
        """Move a distrusted file of this store (a record, saved weights) to ``runs/quarantine/``;
        the destination. OSError when it cannot be moved, or when the quarantine folder (or
        ``runs/``, the store) is a link leading outside the results root ``<out>``: ``show`` and
        ``run --dry-run``, which do not ``prepare`` the store, moved records out of ``--out``."""
        folder = self.runs / "quarantine"
        try:
            inside = folder.resolve().is_relative_to(self.root.parents[1].resolve())
        except (OSError, RuntimeError):  # a link loop
            inside = False
        if not inside:
            raise OSError(errno.EXDEV, f"{folder} leads outside the results folder "
                                       f"{self.root.parents[1]} (a symbolic link)")
        dest = folder / f"{path.name}.{time.time_ns()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # "File exists" did not say what was wrong, or what to do
            what = folder_problem(folder) or "not a folder"
            raise OSError(errno.ENOTDIR, f"{folder.relative_to(self.root)} is {what} "
                                         "(remove it)") from None
        os.replace(path, dest)
        return dest

    def _warn_unreadable(self, runs: Path) -> None:
        """Warn that the records under ``runs`` (a store's ``runs/``) cannot be read: the spec's
        folder, or ``runs/`` in it, is not a folder (the nearest such one is named)."""
        for p in (runs.parent, runs):
            why = folder_problem(p)
            if why is not None and why != "no such folder":
                self._warn(f"cannot read the run records in {p}: {why} (its runs count as not "
                           "done; move it away)")
                return

    def _warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

    def _warn_newer(self, revision: int) -> None:
        """One warning of records a newer ssmrepro wrote (``_newer``), naming the first such
        revision read: records of revisions 9, 10 and 11 gave three warnings, and a store of
        records of a thousand hand-edited revisions a thousand lines. (Not replaced by a later
        one's: ``warnings`` is read by position, what was printed is not printed again.) Said
        once per command, not per store (``to_say``)."""
        if not self._newer_seen:
            self._newer_seen = True
            self._warn(_newer(revision))

    def to_say(self, since: int = 0) -> list[str]:
        """The warnings from position ``since`` on that this command has not said yet
        (``util.first_time``; a newer ssmrepro's records are one warning, whatever revision
        it names): what a command prints of this store's. `run` reads the records in a store
        of its own, then its outputs in another, and said them twice; deciding it when the
        warning was met, a store whose warnings no one prints (`export` probing a profile's
        records without a table) took the newer records' warning, and no one said it."""
        return _grouped([w for w in self.warnings[since:]
                         if first_time(_NEWER_KEY if w.startswith(_NEWER_KEY) else w)])

    def is_done(self, run_id: str) -> bool:
        rec = self.read(run_id)
        if rec is None or rec.get("status") not in DONE_STATUSES:
            return False
        if self.weights and rec["status"] == "ok" and not self._has_weights(run_id):
            # deleted, quarantined as damaged, or another run's: the analyses had no weights to
            # read, and `plot` said `run` trained them, which found the run done. (Being trained
            # again now by another process: said by ``_distrust_weights``.)
            if self._trained_elsewhere(run_id) is None and run_id not in self._weights_said:
                # (quarantined, or left in place by a read-only command: said by
                # ``_distrust_weights``; `run` also said 'has its record but not its saved
                # weights' of the weights it had just quarantined)
                self._warn(f"run {run_id} has its record but not its saved weights (runs/"
                           f"{run_id}.pt; the spec keeps them for its analyses): the run will "
                           "be trained again")
            return False
        lacking = [a for a in self.analyses if rec["status"] == "ok"
                   and a not in (rec.get("analysis") or {})]
        if lacking:  # trained by a spec it reuses (or before `analysis:` was added) without it:
            # counted done, the cell's analysis metrics stayed empty without a word
            self._warn(f"run {run_id}'s record has no {', '.join(lacking)} (the spec's "
                       "`analysis` records it while training): the run will be trained again")
            return False
        return True

    def record_status(self, run_id: str) -> tuple[dict | None, str | None]:
        """The run's record (None without one) and its status as ``run`` will treat it: the
        record's own ('ok', 'diverged', 'error'), but 'pending' where a finished record is not
        done here (``is_done``: no saved weights, no `analysis` the spec records; the reason
        goes to ``warnings``). `show` printed 'ok' for a run `run` then trained again."""
        rec = self.read(run_id)
        if rec is None:
            return None, None
        status = rec.get("status")
        if status in DONE_STATUSES and not self.is_done(run_id):
            status = "pending"
        return rec, status

    def _has_weights(self, run_id: str) -> bool:
        """Whether the run's saved weights are here and are the ones its record names; weights
        of another run copied in (the same shapes) are quarantined as ``read_weights`` does: a
        `run` counted the run done, and only its `plot` step found them foreign."""
        for k, root in enumerate(self._run_folders()):
            path = root / f"{run_id}.pt"
            try:
                st = path.stat()
            except OSError:
                continue
            if not path.is_file():
                continue
            try:
                if not self._foreign_weights(root, run_id, path, st):
                    return True
            except PermissionError:  # not damaged: not this user's to read (``read``)
                raise
            except OSError:  # unreadable: read_weights says why when it is read
                return True
            self._distrust_weights(path, FOREIGN_WEIGHTS, quarantine=k == 0)
        return False

    def _foreign_weights(self, root: Path, run_id: str, path: Path,
                         st: os.stat_result | None = None, rec: dict | None = None) -> bool:
        """Whether the weights file ``path`` is not the one the run's record in ``root`` names
        (its SHA-256 differs; False where the record names none, as before digests). Hashed
        once per state of the file (path, inode, size, mtime) and process: `run` checks it in
        ``is_done`` and `plot` when it loads the weights."""
        rec = self._weights_record(root, run_id) if rec is None else rec  # once for both
        digest = self._weights_digest(rec)
        if digest is None:
            return False
        st = path.stat() if st is None else st
        if self._weights_size_problem(rec, st.st_size):  # hashed at any size: a
            return True  # sparse `truncate -s 1T` file was read whole by `run`, `show`, `plot`
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in self._checked:
            self._checked[key] = file_digest(path) == digest
        return not self._checked[key]

    def _run_folders(self) -> list[Path]:
        return [self.runs] + [r / "runs" for r in self.reuse]

    def write(self, record: dict) -> None:
        """Write a run's record; OSError (EFBIG) for one larger than ``read`` takes back, which
        would be quarantined as damaged on the next read and its run trained again, for ever
        (``TrainConfig`` bounds the history before training; this names any that slips by)."""
        path = self.record_path(record["run_id"])
        text = json.dumps(_clean(record), indent=1, sort_keys=True, default=_json_default)
        if len(text) > MAX_RECORD_BYTES:
            raise OSError(errno.EFBIG, f"the run record would be {len(text):,} bytes, more than "
                                       f"the {MAX_RECORD_BYTES:,} a record may hold (raise "
                                       "train.eval_every)", str(path))
        atomic_write_text(path, text)
        self.log("done", record["run_id"], status=record.get("status"))

    def weights_path(self, run_id: str) -> Path:
        return self.home(run_id) / "runs" / f"{run_id}.pt"

    def write_weights(self, run_id: str, state: dict) -> dict[str, Any]:
        """Save one run's trained weights (a state dict of CPU tensors), atomically; their
        SHA-256 and size, which the run's record keeps (``WEIGHTS_DIGEST``, ``WEIGHTS_BYTES``)
        so that ``read_weights`` knows them for this run's."""
        buf = io.BytesIO()
        torch.save(state, buf)
        atomic_write_bytes(self.weights_path(run_id), buf.getvalue())
        return {WEIGHTS_DIGEST: hashlib.sha256(buf.getvalue()).hexdigest(),
                WEIGHTS_BYTES: len(buf.getvalue())}

    @staticmethod
    def _weights_record(folder: Path, run_id: str) -> dict | None:
        """The run's record in ``folder`` as its weights are checked against it (their digest
        and size), None where it is unreadable or no mapping (``read`` says why). Read once per
        check: ``is_done`` read it three times (``read``, the digest, the size) per run."""
        try:
            rec = json.loads(read_small(folder / f"{run_id}.json", MAX_RECORD_BYTES))
        except (OSError, ValueError, RecursionError):
            return None
        return rec if isinstance(rec, dict) else None

    @staticmethod
    def _weights_size_problem(rec: dict | None, size: int, larger: bool = False) -> str | None:
        """Why a weights file of ``size`` bytes cannot be the one the run's record ``rec``
        (``_weights_record``) names, without reading it: not the size the record gives
        (``larger``: more than it), or (a record without it) more than ``BYTES_PER_PARAM`` bytes
        a parameter of the run could need; None otherwise."""
        if not isinstance(rec, dict) or not isinstance(rec.get(WEIGHTS_DIGEST), str):
            return None
        named, n = rec.get(WEIGHTS_BYTES), rec.get("n_params")
        if isinstance(named, int) and not isinstance(named, bool):
            return None if size == named or larger and size < named else (
                f"{size:,} bytes, not the {named:,} its record names")
        n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1 << 24
        most = WEIGHTS_SLACK + BYTES_PER_PARAM * n
        return None if size <= most else (f"{size:,} bytes, more than the {most:,} its run's "
                                          "model could need")

    @staticmethod
    def _weights_digest(rec: dict | None) -> str | None:
        """The SHA-256 that the run's record ``rec`` (``_weights_record``) gives its weights;
        None where there is none to compare with (a record written before records named it, or
        no readable record: ``read`` says why, and the run is trained again)."""
        digest = rec.get(WEIGHTS_DIGEST) if isinstance(rec, dict) else None
        return digest if isinstance(digest, str) else None

    def read_weights(self, run_id: str, use: Callable[[dict], Any] | None = None) -> Any:
        """The saved weights of a run (own store first, then the reused ones), else None; with
        ``use`` (e.g. loading them into the run's model), ``use(state)``.

        Weights that cannot be read, that are not a state dict (parameter name -> tensor), or
        that ``use`` refuses with ``WeightsDoNotFit`` (another model's weights), or whose SHA-256
        is not the one the run's record names (another run's of the same shapes) are moved to
        ``runs/quarantine/`` with a warning (ignored in a reused store), so that the run is
        trained again (``is_done``): foreign weights raised a traceback in `plot`."""
        for k, root in enumerate(self._run_folders()):
            path = root / f"{run_id}.pt"
            if not path.exists() and not path.is_symlink():
                continue
            try:
                if not path.is_file():
                    raise ValueError("not a regular file")
                rec = self._weights_record(root, run_id)  # (once: size here, digest below)
                why = self._weights_size_problem(rec, path.stat().st_size, larger=True)
                if why:  # not read: torch.load of a padded zip read what its entries said
                    # (a smaller file is loaded, to say why it is not theirs)
                    raise ValueError(f"{FOREIGN_WEIGHTS}: {why}")
                why = weights_archive_problem(path)
                if why is not None:
                    raise ValueError(why)
                state = torch.load(path, map_location="cpu", weights_only=True)
                if not (isinstance(state, dict) and all(
                        isinstance(n, str) and isinstance(v, torch.Tensor)
                        for n, v in state.items())):
                    raise ValueError(f"not a state dict (parameter name -> tensor): "
                                     f"{type(state).__name__}")
            except (PermissionError, MemoryError):  # not damaged: not this user's to read
                raise  # (``read``; they were quarantined as 'cannot be read' and the run
                # trained again), or too little memory now
            except Exception as err:  # truncated, foreign, not a pickle: torch.load of damaged
                # bytes raises whatever its unpickler meets (a byte flipped in data.pkl: an
                # IndexError or KeyError, a traceback in `plot`)
                said = str(err).strip().splitlines()[0] if str(err).strip() else ""
                if type(err) is ValueError:  # ours: not a regular file, not a state dict
                    why = said
                elif isinstance(err, OSError):
                    why = f"cannot be read ({type(err).__name__}: {said})"
                else:  # torch's words alone ("... legacy .tar format") named no cause
                    kind = "" if isinstance(err, RuntimeError) else f"{type(err).__name__}: "
                    why = f"not a readable PyTorch weights file (torch.load: {kind}{said})"
                self._distrust_weights(path, why, quarantine=k == 0)
                continue
            try:
                used = state if use is None else use(state)
            except WeightsDoNotFit as err:  # another model's weights (a traceback in `plot`)
                self._distrust_weights(path, str(err), quarantine=k == 0)
                continue
            if self._foreign_weights(root, run_id, path, rec=rec):  # the same shapes: another seed's
                # weights copied in were loaded as this run's without a word
                self._distrust_weights(path, FOREIGN_WEIGHTS, quarantine=k == 0)
                continue
            return used
        return None

    def _trained_elsewhere(self, run_id: str) -> str | None:
        """'pid P on host H' of another live process holding the run (training it), else None."""
        holder = self.holder(run_id)
        return None if holder is None or self.holds(run_id) else holder

    def _distrust_weights(self, path: Path, why: str, quarantine: bool) -> None:
        self._weights_said.add(path.stem)  # (``is_done``)
        holder = self._trained_elsewhere(path.stem) if why.startswith(FOREIGN_WEIGHTS) and quarantine \
            else None
        if holder is not None:
            # the run is being trained again now (a record without the analysis the spec now
            # keeps, its weights deleted ...): its holder writes the new weights, then the
            # record naming them, and a `plot`, `show` or `run` of another profile reading
            # between the two quarantined the fresh weights as foreign; the run was then trained
            # a third time. Left alone: the holder's record names them in a moment
            self._warn(f"saved weights {path.name} are not (yet) those its record names: the "
                       f"run is being trained now ({holder}); not used")
            return
        if quarantine and self.readonly:
            why += _RUN_QUARANTINES
        elif quarantine:
            try:
                dest = self._quarantine(path)
            except OSError as err:
                why += f" (cannot quarantine them: {err.strerror})"
            else:
                self._warn(f"saved weights {path.name} quarantined to "
                           f"{dest.relative_to(self.root)}: {why}; the run will be trained "
                           "again")
                return
        self._warn(f"ignoring unreadable weights {path}: {why}")

    # ---------------------------------------------------------------- claims
    # A claim file holds {"host", "pid", "time", "nonce"}; the nonce is unique per claim. Taking
    # over a stale claim is atomic: the taker first creates ``<run>.claim.taken.<nonce>`` with
    # O_EXCL for the nonce it judged stale (exactly one process can), and only the winner replaces
    # the claim file (temp file + rename). A process that read an older nonce, or lost the marker
    # race, backs off. Markers are removed when the claim is released or cleaned up.

    def _claim_path(self, run_id: str) -> Path:
        return self.home(run_id) / "claims" / f"{run_id}.claim"

    def _read_claim(self, path: Path) -> dict | None:
        """The claim's content, or None if it vanished; {} if unreadable (half-written). One
        this user may not read (another user's, written under umask 077) is marked ``_private``:
        its holder is alive while its heartbeat is, as another host's (it was called half-written
        and taken over after 5 s from the live holder: the run trained twice)."""
        st = None
        private = False
        try:
            st = path.stat()
            info = json.loads(read_small(path, 1 << 16))
        except (FileNotFoundError, NotADirectoryError):  # no claim (no claims folder: a file
            return None  # in its place raised UnboundLocalError below, reading a reused store's)
        except PermissionError:
            info, private = {}, True
        except (ValueError, OSError, RecursionError):  # JSON, UTF-8, not a small file
            info = {}
        info = info if isinstance(info, dict) else {}
        pid = info.get("pid")
        if not (isinstance(info.get("host"), str) and isinstance(pid, int)
                and not isinstance(pid, bool)):  # no holder can be checked: foreign or garbage
            info = {"nonce": info.get("nonce")} if isinstance(info.get("nonce"), str) else {}
        if not info.get("nonce"):  # old or unreadable claim: identify it by inode and mtime
            info = {**info, "nonce": f"{st.st_ino}-{st.st_mtime_ns}" if st else "unreadable"}
        if "host" not in info:
            info["_private" if private else "_unreadable"] = True
        return info

    def _holder_words(self, path: Path, info: dict) -> str:
        """'pid P on host H' of the live claim at ``path`` whose content is ``info``."""
        if info.get("_unreadable"):  # garbage or half-written: 'pid None on None' was printed
            return f"a holder {path.name} does not name (unreadable; stale after 5 s)"
        if info.get("_private"):
            return (f"a holder {path.name} does not let this user read (permission denied; "
                    f"stale after {human_seconds(self.stale_after)} without its heartbeat)")
        return f"pid {info.get('pid')} on {info.get('host')}"

    def _is_stale(self, path: Path, info: dict | None = None) -> bool:
        info = self._read_claim(path) if info is None else info
        if info is None:
            return True  # vanished
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return True
        pid = info.get("pid")
        here = info.get("host") == self.host and isinstance(pid, int)  # a holder we can check
        if here and (not pid_alive(pid) or _reused(pid, info.get("time"), info.get("started"))):
            return True
        if age < -self.stale_after:  # touched far "in the future" (a wrong clock, a copied
            # file): it would never look stale, and runs would wait for it forever. Not where
            # its holder lives on this host: our clock stepped back past its heartbeat (NTP),
            # and the claim of a run being trained was taken over (the run trained twice);
            # the holder's next heartbeat brings the time back to now
            if here:
                self._date_now(path, info, -age)
            return not here
        if info.get("_unreadable"):  # half-written by a killed process, or foreign
            return age > 5.0
        return age > self.stale_after

    def _date_now(self, path: Path, info: dict, ahead: float) -> None:
        """Touch the claim at ``path`` (content ``info``), dated ``ahead`` seconds "in the
        future" and naming a live process of this host, to now: a live holder's heartbeat
        keeps it so, and a dead holder's (its pid gone to another program: its start time,
        read on the same wrong clock, cannot tell) goes stale ``stale_after`` later. It held
        the run until the clock caught up (an hour, a year): `run` waited on it all along.
        Only inside the results root (a claim reached through a link outside is left)."""
        try:
            if self.readonly or not path.resolve().is_relative_to(
                    self.root.parents[1].resolve()):
                return
            os.utime(path)
        except (OSError, RuntimeError):  # not ours to touch, gone, a link loop: as before
            return
        self.warnings.append(
            f"{path} ({self._holder_words(path, info)}) was dated {human_seconds(ahead)} in the "
            f"future (a wrong clock): dated now, it is taken over if its holder's heartbeat "
            f"does not come within {human_seconds(self.stale_after)}")

    def _new_claim(self, run_id: str) -> str:
        nonce = uuid.uuid4().hex
        self._held[run_id] = nonce
        return json.dumps({"host": self.host, "pid": os.getpid(), "time": time.time(),
                           "started": process_identity(os.getpid()), "nonce": nonce})

    def holds(self, run_id: str) -> bool:
        """Whether the run's claim is still the one this process wrote. A holder stopped (^Z,
        SIGSTOP, a suspended machine) past ``stale_after`` has had its claim taken over: on
        waking it overwrote the new holder's record and weights (the run trained twice, both
        logged 'done'), and its release removed the new holder's live claim."""
        nonce = self._held.get(run_id)
        if nonce is None:
            return False
        try:
            info = json.loads(read_small(self._claim_path(run_id), 1 << 16))
        except (OSError, ValueError, RecursionError):  # gone, or not ours to read
            return False
        return isinstance(info, dict) and info.get("nonce") == nonce

    def take_over(self, run_id: str, seen: dict) -> bool:
        """Replace the stale claim whose content was ``seen``; True for exactly one caller."""
        path = self._claim_path(run_id)
        if self._take_marker(path, seen) is None:
            return False  # someone else took this stale claim over
        atomic_write_text(path, self._new_claim(run_id))
        return True

    def _take_marker(self, path: Path, seen: dict) -> Path | None:
        """Make (O_EXCL) the takeover marker of the stale claim at ``path`` whose content was
        ``seen``; None where another process made it first (or it cannot be made). A taker
        replaces the claim within moments of making its marker: a marker older than
        ``MARKER_DEBRIS_S`` beside the same claim is a taker's that died in between (kill -9),
        and the next generation of the marker (``.taken.<nonce>.1`` ...) is made instead; the
        claim stayed for ever, its run waited on by a `run` that planned it again and again.
        There is no last generation: past 100 (debris of killed takers, or copied) the claim
        was never taken over nor cleaned up, and the `run` waiting on it planned a pack at
        every poll for ever; each generation tried is a file that is there."""
        base = path.with_name(f"{path.name}.taken.{_safe(str(seen['nonce']))}")
        for k in itertools.count():
            marker = base if k == 0 else base.with_name(f"{base.name}.{k}")
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # umask
            except FileExistsError:
                try:
                    if _marker_wait(marker) > 0:  # made moments ago: its taker is replacing
                        return None  # the claim
                    now = self._read_claim(path)
                except OSError:
                    return None
                if now is None or now.get("nonce") != seen["nonce"]:
                    return None  # taken over (its taker's marker aged since), or removed
            except OSError:  # cannot write here
                return None
            else:
                try:  # still the claim judged stale? Between that look and this marker, another
                    # process may have taken it over, trained, released it (markers and all)
                    # and a third claimed the run afresh: the marker was made again, and that
                    # live claim replaced (two processes trained the run)
                    now = self._read_claim(path)
                except OSError:
                    now = None
                if now is not None and now.get("nonce") == seen["nonce"]:
                    return marker
                marker.unlink(missing_ok=True)
                return None
        return None

    def takeover_wait(self, run_id: str) -> float | None:
        """Seconds until the run's stale claim can be taken over, where a takeover marker of
        that claim is younger than ``MARKER_DEBRIS_S`` (a taker replacing it now, or one killed
        in between: ``_take_marker`` lets no one else take it until then); None otherwise. A
        `run` waiting on the run planned it again at every poll meanwhile, each time a new pack
        that could not claim it: 'packs 13/13 ended', then 14/14 and on for up to a minute."""
        path = self._claim_path(run_id)
        info = self._read_claim(path)
        if info is None or not self._is_stale(path, info):
            return None
        base = f"{path.name}.taken.{_safe(str(info['nonce']))}"
        young = []
        try:
            for marker in path.parent.glob(f"{base}*"):
                if marker.name == base or re.fullmatch(r"\.\d+", marker.name[len(base):]):
                    young.append(_marker_wait(marker))
        except OSError:  # a marker gone meanwhile, or claims/ unreadable: nothing to wait for
            return None
        wait = max(young, default=0.0)
        return wait if wait > 0 else None

    def claim(self, run_id: str) -> bool:
        """Try to own a run; True if this process may train it."""
        if self.is_done(run_id):
            return False
        path = self._claim_path(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)  # the umask decides
        except FileExistsError:
            seen = self._read_claim(path)
            if seen is None or not self._is_stale(path, seen) or not self.take_over(run_id, seen):
                return False
        else:
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(self._new_claim(run_id))
            except BaseException:  # a full disk (`ulimit -f`, a kill): the claim, left empty,
                # held the run for another holder after the pack failed (its next `run` waited)
                self._held.pop(run_id, None)
                path.unlink(missing_ok=True)
                raise
        if self.is_done(run_id):  # finished between our check and the claim
            self.release(run_id)
            return False
        if self._reused_claim(run_id) is not None:  # a spec this one reuses trains it now: two
            # `run`s of specs sharing a run through `reuse` claimed it each in its own store,
            # and both trained it. (Two that reuse each other and claim at the same moment may
            # both leave it; each takes it again at its next look, as a stale claim's run.)
            self.release(run_id)
            return False
        self.log("claim", run_id)
        return True

    def _reused_claim(self, run_id: str) -> tuple[Path, dict] | None:
        """A live claim on the run in a store this one reuses (its path and content), else
        None: the process training that spec trains the run, and its record there will count
        as done here too."""
        for root in self.reuse:
            path = root / "claims" / f"{run_id}.claim"
            if path == self._claim_path(run_id):  # this store's claim on a run it records there
                continue
            try:
                info = self._read_claim(path)
                if info is None or info.get("_unreadable") or self._is_stale(path, info):
                    continue
            except OSError:  # no claims folder there (a file in its place ...): no claim
                continue
            return path, info
        return None

    def holder(self, run_id: str) -> str | None:
        """'pid P on host H' of the process holding a live claim on this run (in this store,
        else in a store this one reuses), else None."""
        path = self._claim_path(run_id)
        info = self._read_claim(path)
        if info is None or self._is_stale(path, info):
            other = self._reused_claim(run_id)
            if other is None:
                return None
            return f"{self._holder_words(*other)}, for {other[0].parents[1].name}"
        return self._holder_words(path, info)

    def cleanup(self) -> int:
        """Remove claims of finished runs and stale claims (e.g. left by a killed worker between
        writing a record and releasing its claim), and temp files of writers that died on this
        host. Returns how many files were removed. ``LinkOutside`` first when a link of the
        store leads outside ``--out``: `run` removed the claims of a folder outside that a
        ``claims`` link led to, before it refused the link. (A file that is a link is only
        unlinked, and a record linked outside is quarantined when read, as before.)"""
        self.check_links(files=False)
        # (claims/ too: a taker killed while it wrote the claim it took over left its temp file)
        n = remove_dead_temps(self.root) + remove_dead_temps(self.runs) \
            + remove_dead_temps(self.claims)
        for path in self.claims.glob("*.claim") if self.claims.exists() else []:
            if self.is_done(path.stem):
                path.unlink(missing_ok=True)
                n += 1
                continue
            seen = self._read_claim(path)
            if seen is not None and self._is_stale(path, seen) and self._remove_stale(path, seen):
                n += 1
        for marker in self.claims.glob("*.claim.taken.*") if self.claims.exists() else []:
            if not marker.with_name(marker.name.split(".taken.")[0]).exists():
                marker.unlink(missing_ok=True)  # its claim is gone: the marker is debris
        return n

    def _remove_stale(self, path: Path, seen: dict) -> bool:
        """Remove the stale claim whose content was ``seen``, holding its takeover marker as
        ``take_over`` does, so that the two exclude each other: a `run` (of another profile, or
        with --set) cleaning the store removed the claim that a waiting `run` had just taken over
        from a killed holder, and the taker's training was then dropped as another's (its
        claim gone) and trained again. False where another process takes it over."""
        marker = self._take_marker(path, seen)
        if marker is None:
            return False
        try:
            path.unlink(missing_ok=True)
        finally:
            marker.unlink(missing_ok=True)
        return True

    def check_links(self, files: bool = True) -> None:
        """``LinkOutside`` when a symbolic link in the store (``<paper>/``, ``<paper>/<id>/``, its
        files, ``runs/``, ``claims/``) leads outside the results root ``<out>``: records, tables,
        figures and reports written through it would land outside ``--out`` (a link that stays
        inside is fine). ``files=False``: the folders only."""
        top = self.root.parents[1]
        try:
            bound = top.resolve()
        except (OSError, RuntimeError):  # a link loop: nothing could be written there anyway
            return
        self._check_own_folder(bound)
        paths = [self.root.parent, self.root, self.runs, self.claims, self.runs / "quarantine"]
        for folder in (self.root, self.runs) if files else ():
            try:
                paths += [p for p in folder.iterdir() if p.is_symlink()]
            except OSError:  # absent, or not a folder: prepare() names that
                pass
        for p in paths:
            if not p.is_symlink():
                continue
            try:
                target = p.resolve()
            except (OSError, RuntimeError):
                target = None
            if target is None or not target.is_relative_to(bound):
                raise LinkOutside(f"{p} is a symbolic link to {os.readlink(p)}, outside the "
                                  f"results folder {top}: ssmrepro writes only inside --out; "
                                  "remove the link (or point --out at the folder it leads to)")

    def _check_own_folder(self, bound: Path) -> None:
        """``LinkOutside`` when the spec's folder (``<paper>/<id>``), through a symbolic link
        of it or of its paper's folder, is a folder of another name inside the results root:
        `ln -s t-spec results/tests/u-spec` (to share t-spec's runs) made u-spec write its
        tables, figures and report over t-spec's, the report titled u-spec, exit 0."""
        if not (self.root.is_symlink() or self.root.parent.is_symlink()):
            return
        try:
            real = self.root.resolve()
        except (OSError, RuntimeError):  # a loop: check_links and prepare name it
            return
        if real.name != self.root.name and real.is_relative_to(bound):
            raise LinkOutside(f"{self.root} is a symbolic link to {real}, the results folder of "
                              f"{real.name!r}, not of {self.root.name!r}: two specs would write "
                              "their tables, figures and reports over each other's; remove the "
                              "link (a spec reads another's runs through its `reuse:`)")

    def prepare(self) -> None:
        """Create the store's folders now, before any training: a file where a folder belongs or
        a folder that cannot be written fails here (OSError naming the path), not in a worker;
        so does a link leading outside ``--out`` (``check_links``)."""
        self.check_links()
        for d in (self.root, self.runs, self.claims):
            d.mkdir(parents=True, exist_ok=True)
        for root in sorted(set(self.homes.values())):  # reused stores recording shared runs
            home = Store(root)
            home.check_links()
            for d in (home.root, home.runs, home.claims):
                d.mkdir(parents=True, exist_ok=True)
        events = self.root / "events.jsonl"
        if events.exists() and not events.is_file():
            raise _not_a_file(events, "the event log")
        if events.is_file() and events.stat().st_nlink > 1:  # a hard link (`cp -al` of a results
            # folder, `ln` of a file outside --out): the log's lines were appended to the other
            # name's file too; the log gets a file of its own (the other keeps what it held)
            with open(events, "rb") as src:
                atomic_write_stream(events, lambda f: shutil.copyfileobj(src, f))
        for path in self.claims.glob("*.claim"):
            if not path.is_file():  # nothing could ever replace or remove it: runs would wait
                raise _not_a_file(path, "a claim")
        for path in self.runs.glob("*.pt") if self.weights else []:
            if path.is_dir():  # nothing could replace it: `run` trained the run, then failed to
                # save its weights (exit 2, the training lost)
                self._distrust_weights(path, "a folder, not saved weights", quarantine=True)

    def heartbeat(self, run_ids: Iterable[str]) -> None:
        """Refresh the claims this process still holds (not one taken over from it)."""
        for r in run_ids:
            if r in self._held and not self.holds(r):
                continue
            try:
                os.utime(self._claim_path(r))
            except FileNotFoundError:
                pass

    def release(self, run_id: str) -> None:
        """Remove this process's claim on the run; one taken over by another process (this one
        was stopped past ``stale_after``) is that process's and stays."""
        if run_id in self._held and not self.holds(run_id):
            del self._held[run_id]
            return
        self._held.pop(run_id, None)
        path = self._claim_path(run_id)
        for marker in path.parent.glob(f"{path.name}.taken.*"):
            marker.unlink(missing_ok=True)
        path.unlink(missing_ok=True)

    # ---------------------------------------------------------------- log and table
    def log(self, event: str, run_id: str, **kw: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"t": time.time(), "event": event, "run_id": run_id, "host": self.host,
                           "pid": os.getpid(), **kw})
        path = self.root / "events.jsonl"
        fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o666)  # the umask decides
        try:
            os.write(fd, (line + "\n").encode())
        except OSError as err:  # a write names no file: the pack's line named the run folder
            raise OSError(err.errno, err.strerror, str(path)) from err
        finally:
            os.close(fd)

    def events(self) -> list[dict]:
        p = self.root / "events.jsonl"
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    def table(self, runs: list) -> pd.DataFrame:
        """One row per run of ``runs`` that has a record: ids, status, metrics, dotted config."""
        rows = []
        for r in runs:
            rec = self.read(r.run_id)
            if rec is None:
                continue
            row: dict[str, Any] = {
                "run_id": r.run_id,
                "profile": r.profile,
                "label": r.label,
                "seed": r.seed,
                "status": rec.get("status"),
                "stop_reason": rec.get("stop_reason"),
                "stop_step": rec.get("stop_step"),
                "epochs": rec.get("epochs"),
                "n_params": rec.get("n_params"),
            }
            row.update({METRIC_PREFIX + k: v for k, v in (rec.get("metrics") or {}).items()})
            row.update({k: v for k, v in r.flat().items() if k != "seed"})
            row.update(
                {"backend": rec.get("backend"), "device": rec.get("device"),
                 "pack_size": rec.get("pack_size"), "wall_s": rec.get("pack_wall_s"),
                 "cpu_s": rec.get("pack_cpu_s"),
                 "torch": rec.get("torch"), "commit": rec.get("commit")}
            )
            # the kernel path each mixer ran, e.g. kernels.S6Core = torch:selective_scan_fused
            row.update({f"kernels.{k}": v for k, v in (rec.get("kernels") or {}).items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def write_csv(self, runs: list, name: str = "results.csv") -> Path:
        """The table of ``runs`` from their records, keeping the rows of the table there (the
        committed one, in a fresh clone) of runs that have no record: `run --max-runs 1` (or an
        interrupted or failed sweep) replaced a committed 6-row results.csv by its one run's row,
        and every claim over the other cells went MISSING. The outputs stage checks the rows.
        Not while a `plot` of the folder writes its outputs (``folder_lock``): one that read
        fewer records wrote its table after this one."""
        with folder_lock(self.root, "writing the tables, figures and reports of"):
            return self._write_csv(runs, name)

    def _write_csv(self, runs: list, name: str) -> Path:
        df = self.table(runs)
        path = self.root / name
        have = set(df["run_id"].astype(str)) if "run_id" in df else set()
        wanted = {r.run_id for r in runs} - have - self.stale_data  # a row of other data's
        if wanted and path.is_file():
            try:
                old = read_results(path)
            except (TableError, OSError) as err:  # damaged: its rows of runs without a record
                # are lost in the write, so said here (`run --max-runs 1` in a fresh clone whose
                # committed table held an 'abc' replaced its rows by the one run's without a
                # word: the outputs stage then read the table written)
                old = pd.DataFrame()
                self._warn(f"{err if isinstance(err, TableError) else f'{path}: {err}'} (not "
                           f"used: written again from the run records; the rows of "
                           f"{len(wanted):,} planned run(s) without a record that it may hold "
                           "are not kept: correct the committed table and run again)")
            if "run_id" in old:  # and the rows under ids no run has (an older code version's,
                # one a spreadsheet mangled: '1.23E+47'), which the outputs stage reads as their
                # runs' or drops with a warning (``profile_table``): they were lost unsaid
                ids = old["run_id"].astype(str)
                keep = old[ids.isin(wanted) | (~ids.isin({r.run_id for r in runs} | have)
                                               & ~_recorded_cells(old, runs, have))]
                df = keep if df.empty else pd.concat([df, keep], ignore_index=True)
        # no run has a row: no table. A 1-byte file without columns (every pack lost, e.g. its
        # workers killed, or the disk full) made the same command's plot step, and `plot`,
        # refuse it as damaged ('delete it'), exit 2 instead of 1
        self.write_table(name, None if df.empty else table_text(df, runs), have)
        return path

    def write_table(self, name: str, text: str | None, from_records: set[str]) -> None:
        """Write the results table ``name`` of this store's folder (``text``; None: remove it),
        whose rows of the runs ``from_records`` are made from their records. A row of such a run
        that was changed since ssmrepro wrote it (a value edited by hand) is replaced without
        being kept: a warning names it (it was overwritten without a word). Exact: each row's
        digest as written is kept in ``runs/.tables-written``, under a lock every writer of the
        table takes, so a row the tool wrote and nobody changed never warns, whatever records
        changed since; a row it never wrote (a committed table's) is not judged."""
        path = self.root / name
        fd = _hold_ledger(self.runs / TABLES_WRITTEN)
        try:
            ledger = _read_ledger(fd)
            written = ledger.get(name, {})
            new = _row_digests(text) if text is not None else {}
            old, legacy = _table_rows(path, (text, new)) if written and from_records \
                else ({}, dict)
            if isinstance(old, str):  # its text holds no row of a run: one it wrote, saved
                # by a spreadsheet with other separators (';') or in another encoding after an
                # edit (`run` with every run done rewrote it without a word, the edit dropped;
                # `plot` called it 'not a table of this project')
                self._warn(f"{name}: changed since ssmrepro wrote it, and no longer read as a "
                           f"table of its runs ({old}): it is written again from the run "
                           "records, the source of truth; an edited value is not kept (change "
                           "the spec and run it instead)")
                old = {}
            # every copy of a row (one duplicated by hand, its first copy edited: only the
            # last was compared, and the edit was dropped without a word)
            # (a run shared by two labels has a row per label: each copy's digest is kept; a
            # ledger of an older ssmrepro keeps the last copy's alone, and digests of the
            # header and row: each row not known by its digest now is looked up by that one)
            unknown = {rid: [k for k, row in enumerate(rows)
                             if row not in _digest_list(written[rid])
                             and row not in new.get(rid, ())]
                       for rid, rows in old.items() if rid in from_records and rid in written}
            before = legacy() if any(unknown.values()) else {}
            edited = sorted(rid for rid, rows in unknown.items()
                            if any(before[rid][k] not in _digest_list(written[rid])
                                   for k in rows))
            cut = [rid for rid in edited  # (a truncated table's last row was called edited
                   if any(old[rid][k].startswith(CUT_ROW) for k in unknown[rid])]  # by hand)
            edited = [rid for rid in edited if rid not in cut]
            if cut:
                more = f" and {len(cut) - 3} more" if len(cut) > 3 else ""
                self._warn(f"{name}: the row(s) of run(s) {', '.join(cut[:3])}{more} have fewer "
                           "cells than its header (the file was cut short: a full disk, a copy "
                           "or a write stopped?): they are written again from the run records")
            if edited:
                more = f" and {len(edited) - 3} more" if len(edited) > 3 else ""
                self._warn(f"{name}: the row(s) of run(s) {', '.join(edited[:3])}{more} were "
                           "changed since ssmrepro wrote them (edited by hand?): they are "
                           "written again from the run records, the source of truth; an edited "
                           "value is not kept (change the spec and run it instead)")
            _write_ledger(fd, None)  # emptied first: a table written and its digests not (a
            # full disk, a kill) leaves no digest of an older table to judge it by
            if text is None:
                if path.is_file() or path.is_symlink():
                    path.unlink()
                ledger.pop(name, None)
            else:
                atomic_write_text(path, text)
                ledger[name] = new
            _write_ledger(fd, ledger)
        finally:
            if fd is not None:
                os.close(fd)


# ------------------------------------------------------------------------------ results tables


def _decode_cell(v: Any) -> Any:
    if not isinstance(v, str) or not v or v[0] not in "[{(":
        return v
    try:
        return json.loads(v)
    except ValueError:
        pass
    try:  # tables written before JSON cells: Python reprs of lists / tuples / dicts
        out = ast.literal_eval(v)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return v
    return list(out) if isinstance(out, tuple) else out


MARKER_DEBRIS_S = 60.0  # a takeover marker this old beside the claim it took over: its taker died


def _marker_wait(marker: Path) -> float:
    """Seconds until the takeover marker ``marker`` is debris (0: it is): one made moments ago
    is a taker's replacing its claim now, one older than ``MARKER_DEBRIS_S`` a killed taker's;
    one touched far "in the future" (a wrong clock, a copied store) is debris too: it kept the
    claim, and its run waited on, until the clock caught up (a day). ``_take_marker`` and
    ``Store.takeover_wait`` judge a marker by this one rule (the wait kept a marker from the
    future that the taker had learnt to call debris: a day's wait). OSError: gone."""
    age = time.time() - marker.lstat().st_mtime  # a link's own time (one leading nowhere raised:
    # its claim was never taken over)
    return MARKER_DEBRIS_S - age if abs(age) < MARKER_DEBRIS_S else 0.0


TABLES_WRITTEN = ".tables-written"  # in runs/: table name -> run id -> digest of its row


MAX_LEDGER_BYTES = 256 << 20  # ~60 bytes a row written: millions of rows (a paper grid's ~20 MB
# results.csv has thousands)


LEDGER_WAIT_S = 30.0  # another writer holds the ledger for milliseconds (one table's write)


def _hold_ledger(ledger: Path) -> int | None:
    """The ledger of table rows written, open and locked (flock), or None where there is none to
    keep (no runs/ folder, a read-only store, a link or FIFO put there). One that stays held
    (its writer stopped mid-write, ``kill -STOP``) is removed after ``LEDGER_WAIT_S`` and a new
    one begun: the write does not wait for ever, and no row is judged by digests that may be
    another table's."""
    import fcntl

    deadline = time.monotonic() + LEDGER_WAIT_S
    while True:
        try:
            # the umask decides, as for every file of the store: at 0644 under `umask 002` (a
            # group's shared results) the group's other writers could not open it, wrote their
            # tables unlocked and unrecorded, and the next writer called their rows edited
            fd = os.open(ledger, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    ledger.unlink()
                deadline = time.monotonic() + LEDGER_WAIT_S
            else:
                time.sleep(0.02)
            continue
        except OSError:
            os.close(fd)
            return None
        try:  # still the ledger: not removed (above) since it was opened
            same = os.path.samestat(os.stat(ledger, follow_symlinks=False), os.fstat(fd))
        except OSError:
            same = False
        if same:
            return fd
        os.close(fd)


def _digest_list(digests: str | list[str]) -> list[str]:
    """The digests of a run's rows in a ledger: a list (one per copy), or the one string of a
    ledger written before copies were kept (its last copy's)."""
    return [digests] if isinstance(digests, str) else digests


def _read_ledger(fd: int | None) -> dict[str, dict[str, list[str] | str]]:
    """The row digests of the tables written (``Store.write_table``), {} when there is none or
    it is not one (damaged: no row is judged edited)."""
    if fd is None:
        return {}
    try:
        size = os.fstat(fd).st_size
        if size > MAX_LEDGER_BYTES:  # not one (a file put there, garbage): it was read whole,
            # gigabytes into memory, before JSON refused it
            return {}
        ledger = json.loads(os.pread(fd, size, 0)) if size else {}
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(ledger, dict) or not all(
            isinstance(t, dict) and all(
                isinstance(d, str) or (isinstance(d, list) and all(isinstance(x, str) for x in d))
                for d in t.values())
            for t in ledger.values()):
        return {}
    return ledger


def _write_ledger(fd: int | None, ledger: dict | None) -> None:
    """Replace the ledger's content by ``ledger`` (None: empty it); a write that fails leaves
    it empty, or not JSON, which judges no row (``_read_ledger``)."""
    if fd is None:
        return
    try:
        os.ftruncate(fd, 0)
        if ledger:
            os.pwrite(fd, json.dumps(ledger, sort_keys=True).encode(), 0)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)


def _digested_rows(text: str, legacy: bool = False) -> list[tuple[str, str]]:
    """(run id, a digest of its row) for each row of the CSV ``text`` of a results table, in
    order ([] without a run_id column). The digest is of the row's filled cells by column name,
    numbers by value, so a column that other runs brought (empty in this row, or making a column
    of whole numbers one of floats: `4` written `4.0`) or a column order leaves it as it was: an
    older table ssmrepro wrote, put back (`git checkout`, a backup, a copy taken while `run`
    wrote the store), had its rows 'changed since ssmrepro wrote them (edited by hand?)' once
    later runs had added a column. ``legacy``: the digest of the header and the row, as ledgers
    written before kept it."""
    rows = _csv_rows(text, newline=None)  # as the ledgers' digests were taken
    header = next(rows, [])
    if "run_id" not in header:
        return []
    at = header.index("run_id")
    if legacy:
        return [(row[at], _digest([header, row])) for row in rows if len(row) > at]
    order = sorted(range(len(header)), key=header.__getitem__)
    values: dict[str, str] = {}  # a cell's text -> its value's (the same few texts recur)

    def value(cell: str) -> str:
        if cell not in values:
            try:
                values[cell] = repr(float(cell))  # `4`, `4.0` and `4e0` alike
            except ValueError:
                values[cell] = cell
        return values[cell]

    def digest(row: list[str]) -> str:  # (two lists: half the time of one of pairs)
        filled = [i for i in order if i < len(row) and row[i] != ""]
        cells = [[header[i] for i in filled], [value(row[i]) for i in filled]]
        extra = row[len(header):]  # cells past the header's (typed in by hand: the digest of
        while extra and extra[-1] == "":  # its filled cells alone left it unseen), where any
            extra = extra[:-1]  # is filled (a row's digest without them is as it was)
        cut = CUT_ROW if len(row) < len(header) else ""  # fewer cells than the header: a line
        # cut short (a truncated file), which no ledger holds (ssmrepro writes every cell)
        return cut + _digest(cells + [[value(c) for c in extra]] if extra else cells)

    return [(row[at], digest(row)) for row in rows if len(row) > at]


CUT_ROW = "cut:"  # the digest's mark of a row with fewer cells than its header (``_digested_rows``)


def _digest(cells: list) -> str:
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()[:16]


def _row_digests(text: str, legacy: bool = False) -> dict[str, list[str]]:
    """run id -> the digests of its rows in order (a run shared by two labels has a row per
    label), for the CSV ``text`` of a results table ({} without a run_id column)."""
    out: dict[str, list[str]] = {}
    for rid, digest in _digested_rows(text, legacy):
        out.setdefault(rid, []).append(digest)
    return out


def _table_rows(path: Path, known: tuple[str | None, dict[str, list[str]]] | None = None
                ) -> tuple[dict[str, list[str]] | str, Callable[[], dict[str, list[str]]]]:
    """The digests (``_row_digests``) of the rows of the table file at ``path`` ({} when it
    cannot be read or holds none), or why its text holds no row of a run (no run_id column;
    not UTF-8 text), and a function giving them as a ledger of an older ssmrepro kept them (for
    a row whose digest the ledger lacks: computed only then). ``known``: a text and its
    digests, taken when the file holds that text (a table written again as it was: each row
    digested twice was half of `run`'s table writing with nothing to train)."""
    try:
        data = read_small(path, MAX_TABLE_BYTES)
    except (OSError, ValueError):
        return {}, dict
    try:
        # (a byte-order mark, as a spreadsheet saves 'CSV UTF-8', hid the run_id column: a
        # value edited there was dropped without a word)
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:  # text ssmrepro never writes, saved in another encoding after
        # an edit (a spreadsheet's 'CSV' in its system code page: cp1252 'café'; 'Unicode
        # text', UTF-16): `run` rewrote it without a word, the edit dropped
        return "not UTF-8 text: saved in another encoding?", dict
    try:
        rows = known[1] if known is not None and text == known[0] else _row_digests(text)
        if not rows and not _has_runs_column(text) and text.strip():
            # (UTF-16 without its byte-order mark decodes as UTF-8 of NUL bytes between the
            # characters: it was said to be saved with other separators)
            return ("not UTF-8 text (NUL bytes): saved as UTF-16?" if "\x00" in text else
                    "no run_id column: saved with other separators, ';'?"), dict
    except (ValueError, csv.Error):
        return {}, dict
    return rows, lambda: _row_digests(text, legacy=True)


def _has_runs_column(text: str) -> bool:
    """Whether the CSV ``text``'s header has a run_id column."""
    return "run_id" in next(_csv_rows(text, newline=None), [])  # (lines as the digests read
    # them: a spreadsheet's 'CSV (Macintosh)' ends them with '\r' alone)


def unread_table(store: Store, name: str) -> bool:
    """Whether the store's table ``name`` is one ssmrepro wrote (its rows are in the ledger)
    whose text no longer holds a row of a run (``_table_rows``): ``Store.write_table`` warns of
    it when it writes the table again from records, so a reader of the file says nothing."""
    fd = _hold_ledger(store.runs / TABLES_WRITTEN)
    try:
        if not _read_ledger(fd).get(name):
            return False
    finally:
        if fd is not None:
            os.close(fd)
    return isinstance(_table_rows(store.root / name)[0], str)


# the order of a results table's run information after the config columns (``Store.table``)
TABLE_INFO_ORDER = ("backend", "device", "pack_size", "wall_s", "cpu_s", "torch", "commit")


def in_table_order(df: pd.DataFrame, runs: list, columns: bool = True,
                   flats: list | None = None) -> pd.DataFrame:
    """A run table's rows and columns in one order whatever the source of each row: rows in
    the order of the planned ``runs`` (by run id and label; a run's rows, e.g. its curve's
    evaluations, and rows of no planned run, after them, as they were), and with ``columns``
    the columns as ``Store.table`` makes them of every run (``RUN_COLUMNS``, the
    metrics by name, the config keys in the planned runs' order, ``TABLE_INFO_ORDER``, the
    kernels by name, any other as it was). A table made of the records there are and the rows
    kept from the table before (a fresh clone with one run trained again, `run --max-runs`)
    put the new rows first, and the columns of their runs' first row before all others: the
    order of results.csv changed with which runs had records (a Transformer's ``model.heads``
    moved before the Mamba's ``model.mixer``), for whoever reads its columns by position (a
    spreadsheet, ``read.csv``'s column numbers) or compares two versions of it."""
    if df.empty:
        return df
    if not columns:
        return _rows_in_order(df, runs)
    config: dict[str, int] = {}
    for flat in point_flats(runs) if flats is None else flats:  # the keys only (no seed)
        for k in flat:
            config.setdefault(k, len(config))
    info = {c: i for i, c in enumerate(TABLE_INFO_ORDER)}

    def rank(at: int, c: str) -> tuple:
        if c in RUN_COLUMNS:
            return (0, RUN_COLUMNS.index(c), "")
        if is_metric_column(c):
            return (1, 0, c)
        if c in config and c != "seed":
            return (2, config[c], "")
        if c.startswith(CONFIG_PREFIXES):
            return (3, at, "")
        if c in info:
            return (4, info[c], "")
        if c.startswith(KERNELS_PREFIX):
            return (5, 0, c)
        return (6, at, "")

    order = [c for _, c in sorted(enumerate(df.columns), key=lambda ic: rank(*ic))]
    return _rows_in_order(df, runs)[order]


def _rows_in_order(df: pd.DataFrame, runs: list) -> pd.DataFrame:
    """``df``'s rows in the order of ``runs`` (``in_table_order``)."""
    if "run_id" not in df:
        return df
    first: dict[Any, int] = {}
    for i, r in enumerate(runs):
        first.setdefault((r.run_id, r.label or ""), i)
        first.setdefault(r.run_id, i)
    labels = df["label"].fillna("").astype(str) if "label" in df else [""] * len(df)
    keys = [first.get((str(rid), lab), first.get(str(rid), len(runs)))
            for rid, lab in zip(df["run_id"].astype(str), labels)]
    return df.iloc[sorted(range(len(df)), key=lambda i: (keys[i], i))].reset_index(drop=True)


def table_text(df: pd.DataFrame, runs: list) -> str:
    """A results table's CSV text (``csv_text``) in table order (``in_table_order``), its
    integer settings and counts written as integers (``whole_numbers``)."""
    if df.empty:
        return csv_text(df)
    flats = point_flats(runs)
    return csv_text(whole_numbers(in_table_order(df, runs, flats=flats), runs, flats=flats))


def whole_numbers(df: pd.DataFrame, runs: list,
                  counts: Iterable[str] = ("seed", "stop_step", "n_params", "pack_size"),
                  flats: list | None = None) -> pd.DataFrame:
    """``df`` with each integer setting of the planned ``runs`` (and the ``counts`` columns)
    that some rows lack as text of integers, for writing: pandas holds such a column as
    floats, and huang2025-tab1's results.csv wrote the Transformer's ``model.heads`` (empty
    for its Mamba rows) 1.0, the Mamba's ``model.d_state`` 8.0 (``int('8.0')`` fails in a
    script reading the CSV)."""
    ints = set(_int_settings(point_flats(runs) if flats is None else flats)) | set(counts)
    df = df.copy()
    for c in df.columns:
        if c in ints and pd.api.types.is_float_dtype(df[c]) and all(
                math.isfinite(v) and v.is_integer() for v in df[c].dropna()):
            df[c] = pd.Series([None if math.isnan(v) else str(int(v)) for v in df[c]],
                              index=df.index, dtype=object)
    return df


def point_flats(runs: list) -> list[dict[str, Any]]:
    """The dotted config (``RunConfig.flat``) of each sweep point of ``runs``, once (the seeds
    of a point share it), in their order."""
    return list({id(f): f for f in per_point(runs, lambda r: r.flat())}.values())


def _int_settings(flats: list[dict[str, Any]]) -> list[str]:
    """The dotted config keys whose every value in ``flats`` (``point_flats``) is an integer (not
    a truth value)."""
    kinds: dict[str, bool] = {}
    for flat in flats:
        for k, v in flat.items():
            if v is not None:
                kinds[k] = kinds.get(k, True) and isinstance(v, int) and not isinstance(v, bool)
    return [k for k, whole in kinds.items() if whole and k != "seed"]


def csv_text(df: pd.DataFrame) -> str:
    """A run table as CSV text, list- and dict-valued cells as JSON."""
    if df.empty:
        return df.to_csv(index=False)
    return df.apply(lambda col: col.map(encode_cell) if col.dtype == object else col).to_csv(
        index=False)


def is_metric_column(col: str) -> bool:
    return col.startswith(METRIC_PREFIX)


def metric_name(col: str) -> str:
    """'metric.test.acc' -> 'test.acc'."""
    return col[len(METRIC_PREFIX):] if is_metric_column(col) else col


def decode_config_cells(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with its config cells holding JSON (or an old table's Python reprs)
    decoded to the lists / dicts they were written from (``train.betas`` ``[0.9, 0.999]``)."""
    df = df.copy()
    for col in df.columns:
        if col.startswith(CONFIG_PREFIXES) and not pd.api.types.is_numeric_dtype(df[col]):
            df[col] = df[col].astype(object).map(_decode_cell)
    return df


def _recorded_cells(old: pd.DataFrame, runs: list, have: set[str]) -> pd.Series:
    """Whether each row of ``old`` (a committed results table) is of a label and seed whose
    every planned run of ``runs`` has a row from its record (``have``): a row of that cell under
    an older id (a code version's before) is replaced by the record, as the outputs stage reads
    it (``_older_rows``). `run --max-runs 1 --no-plot` in a fresh clone after a code version
    change kept it beside the record's row, two rows of one run for anyone reading the CSV."""
    if not {"label", "seed"} <= set(old.columns):
        return pd.Series(False, index=old.index)
    done: set[tuple] = set()
    open_: set[tuple] = set()
    for r in runs:
        (done if r.run_id in have else open_).add((str(r.label), norm(r.seed)))
    done -= open_
    keys = zip(old["label"].astype(str), old["seed"].map(norm))
    return pd.Series([k in done for k in keys], index=old.index, dtype=bool)


def normalize_table(df: pd.DataFrame) -> pd.DataFrame:
    """A run table in the current layout: config cells holding JSON (or an old table's Python
    reprs) decoded to lists / dicts; an old table's bare metric columns (``test.acc``) renamed
    into the metric namespace."""
    if df.empty:
        return df
    df = decode_config_cells(df)
    bare = bare_metric_columns(df.columns)
    return df.rename(columns={c: METRIC_PREFIX + c for c in bare}) if bare else df


def bare_metric_columns(columns: Iterable[str]) -> list[str]:
    """The columns of a table of the older layout, whose metrics are not in the metric namespace
    (``ratio_w``, not ``metric.ratio_w``): each but a run's, config and kernel columns; none
    when any column is ``metric.``-named (the current layout)."""
    columns = [str(c) for c in columns]
    if any(is_metric_column(c) for c in columns):
        return []
    known = set(RUN_COLUMNS) | set(INFO_COLUMNS)
    return [c for c in columns if c not in known and not c.startswith(CONFIG_PREFIXES)
            and not c.startswith(KERNELS_PREFIX)]


TEXT_COLUMNS = ("run_id", "profile", "label", "status", "stop_reason")
# a run's counts and timings: text in one ('abc' typed over a stop_step) was a traceback in
# `verify`, a negative pack_size or wall time summed into the front page's training time
NUMBER_COLUMNS = ("seed", *COUNTS, "pack_size", "wall_s", "cpu_s")


class LinkOutside(ValueError):
    """A symbolic link inside a spec's results folder that leads outside the results root."""


class TableError(ValueError):
    """A committed table (results.csv, curves.csv ...) that is not what its name says: not CSV,
    another tool's file, or text where numbers belong. The message names the file."""


MAX_TABLE_BYTES = 1 << 30  # the largest paper grid's results.csv is ~20 MB


# what pandas reads as a missing number beside the empty cell ssmrepro writes for one: a
# spreadsheet's 'n/a', 'NA', '#N/A', 'None' or 'nan' typed into a table (``_missing_typed``)
_NA_TEXT = ("#N/A N/A", "#N/A", "N/A", "n/a", "NA", "<NA>", "#NA", "NULL", "null", "NaN",
            "-NaN", "nan", "-nan", "None", "1.#IND", "-1.#IND", "1.#QNAN", "-1.#QNAN")


def read_table(path: Path, required: tuple[str, ...] = (), numeric=(), **kw) -> pd.DataFrame:
    """``pd.read_csv`` of a table this project wrote, checked: it parses, has the ``required``
    columns, and the columns ``numeric`` names (a list, or a function of the table's column
    names giving one) hold numbers, a missing one an empty cell as written
    (``_missing_typed``); else ``TableError`` naming the cell. Read as written, too, what a
    spreadsheet adds: a text column's spaces at its ends (`` abc123 ``, a run id no run has)
    and rows of empty cells after the last."""
    fix = "delete it to rebuild it from the run records (or re-run the runs)"
    try:  # a FIFO or device in its place would block or never end: a regular file only
        data = read_small(path, MAX_TABLE_BYTES, follow_links=True)
    except NotSmallFile as err:
        raise TableError(f"{path}: {err}, not a table; {fix}") from None
    try:
        header = pd.read_csv(io.BytesIO(data), header=None, nrows=1, dtype=str,
                             keep_default_na=False).iloc[0].tolist()
        names = [h.strip() for h in header]  # a column name's spaces at its ends, as a
        # spreadsheet keeps them ('run_id ', ' metric.test.acc'): the column was not found,
        # every run not finished or its metric not measured (claims FAILed) without a word
        named = {"names": [n or f"Unnamed: {i}" for i, n in enumerate(names)], "header": 0} \
            if names != header and len(set(names)) == len(names) else {}
        df = pd.read_csv(io.BytesIO(data), **kw, **named)
        empty = df.isna().all(axis=1).to_numpy()  # a row of empty cells: a spreadsheet's ',,,'
        text = [c for c in TEXT_COLUMNS if c in df.columns]
        if text:  # as written: pandas reads a label 'None', 'NA', 'null' or 'nan' as NaN (the
            # claims and paper values on such a cell went MISSING in a fresh clone); '' is ''
            df[text] = pd.read_csv(io.BytesIO(data), usecols=text, dtype=str,
                                   keep_default_na=False, **named)[text].apply(
                lambda col: col.str.strip()).to_numpy()  # ' abc123 ' is run abc123, whose
            # row was read as another run's, its run not finished, without a word
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TableError(f"{path}: not a readable CSV table ({_not_csv(data) or first}); "
                         f"{fix}") from None
    short = _short_line(data, len(header))
    if short:  # pandas fills a row's missing fields with NaN: a table cut off mid-row, or a git
        # merge's conflict markers ('<<<<<<< HEAD') read as rows, were used without a word
        line, n = short
        raise TableError(f"{path}: line {line} has {n} of the header's {len(header)} fields (a "
                         f"line cut short, or a merge conflict's marker); {fix}")
    twice = [c for c in dict.fromkeys(names) if names.count(c) > 1]
    if twice:  # pandas renames the second 'metric.test.acc' to 'metric.test.acc.1': which one
        # the run wrote cannot be told, and the first was taken without a word
        raise TableError(f"{path}: column {twice[0]!r} given twice; {fix}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise TableError(f"{path}: not a table of this project (no column {', '.join(missing)}"
                         f"{_other_separator(header)}); {fix}")
    cols = list(dict.fromkeys(numeric(list(df.columns)) if callable(numeric) else numeric))
    for c in cols:  # 'True' / 'False' read as a bool column, numeric to pandas (a test.acc
        # of True was judged as 1.0)
        if c in df.columns and (not pd.api.types.is_numeric_dtype(df[c])
                                or pd.api.types.is_bool_dtype(df[c])):
            truth = df[c].map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(bool)  # (a
            # column of TRUE and empty cells is one of objects: pandas made TRUE 1.0)
            got = pd.to_numeric(df[c].where(~truth), errors="coerce")
            bad = np.flatnonzero((got.isna().to_numpy() & df[c].notna().to_numpy()) | truth)
            if len(bad):
                raise TableError(f"{path}: column {c!r} holds text where numbers belong "
                                 f"({str(df[c].iloc[bad[0]])[:40]!r} in {_row_name(df, bad[0])}"
                                 f"); {fix}")
            df[c] = got
    typed = _missing_typed(data, df, [c for c in cols if c in df.columns], named)
    if typed:
        c, i, value = typed
        raise TableError(f"{path}: column {c!r} holds {value!r} in {_row_name(df, i)}, not a "
                         "number (a number not measured is an empty cell, as ssmrepro writes "
                         f"it); {fix}")
    return df[~empty].reset_index(drop=True) if empty.any() else df


def _missing_typed(data: bytes, df: pd.DataFrame, cols: list[str], named: dict
                   ) -> tuple[str, int, str] | None:
    """(column, row position, text) of the first cell of ``cols`` (number columns of ``df``,
    read from CSV ``data``) that pandas read as missing from text other than the empty cell
    ssmrepro writes (``_NA_TEXT``: 'n/a', 'NA', 'nan' typed in a spreadsheet): it was read as
    not measured without a word (a claim on it FAILed, `export` left the value out), where
    '-' or 'x' in its place is refused as text. None when there is none; the table is read
    again only when its bytes hold such a text at all."""
    cols = [c for c in cols if df[c].isna().any()]
    if not cols or not any(t.encode() in data for t in ("NA", "N/A", "n/a", "nan", "NaN", "None",
                                                         "NULL", "null", "#IND", "#QNAN")):
        return None
    raw = pd.read_csv(io.BytesIO(data), usecols=cols, dtype=str, keep_default_na=False,
                      **named)  # (``named``: the column names read_table gives)
    for c in cols:
        hit = np.flatnonzero(raw[c].str.strip().isin(_NA_TEXT).to_numpy())
        if len(hit):
            return c, int(hit[0]), raw[c].iloc[hit[0]]
    return None


def _row_name(df: pd.DataFrame, i: int) -> str:
    """How a message names row ``i`` of a table: by its run id, else its place under the
    header ('row 3', the header being row 1, as a spreadsheet numbers it)."""
    rid = str(df["run_id"].iloc[i]) if "run_id" in df else ""
    return f"the row of run {rid[:40]}" if rid and rid != "nan" else f"row {i + 2}"


def _other_separator(header: list) -> str:
    """A note for a table without this project's columns whose header is one cell holding
    ';' or a tab: saved by a spreadsheet with other separators (it said 'no column label'
    alone)."""
    if len(header) == 1 and any(s in str(header[0]) for s in (";", "\t")):
        return "; its header is one cell holding ';' or a tab: saved with other separators? " \
               "ssmrepro reads ','"
    return ""


def _not_csv(data: bytes) -> str:
    """What ``data`` (a table that does not parse) is when its first bytes tell: a spreadsheet
    saved under the table's name ('Error tokenizing data. C error: Expected 1 fields in line 3'
    for an .xlsx)."""
    if data.startswith(b"PK\x03\x04"):
        return "a zip file, e.g. a spreadsheet saved as .xlsx or .ods, not CSV text"
    if data.startswith(b"\xd0\xcf\x11\xe0"):
        return "a spreadsheet saved as .xls, not CSV text"
    return ""


def _csv_rows(text: str, newline: str | None = ""):
    """``csv.reader`` over ``text`` that reads a cell as long as the text itself: its default
    limit (131,072 characters) made a table with a longer cell (a label pasted by hand), which
    pandas reads, a traceback (`field larger than field limit`) in `export`, `plot`, `figures`.
    The text is in memory already, so the limit bounds nothing."""
    if csv.field_size_limit() < len(text):
        csv.field_size_limit(len(text))
    return csv.reader(io.StringIO(text, newline=newline))


def _short_line(data: bytes, width: int) -> tuple[int, int] | None:
    """(line number, fields) of the first record of CSV ``data`` (its header first) with fewer
    than ``width`` fields, blank lines aside (pandas skips them); None when there is none."""
    rows = _csv_rows(data.decode("utf-8-sig", errors="replace"))
    for row in rows:
        if row and len(row) < width:
            return rows.line_num, len(row)
    return None


def read_results(path: Path) -> pd.DataFrame:
    """Read a results*.csv (current or older layout) as ``normalize_table`` gives it. Text
    columns stay text: an empty label stays '' (not NaN, which matches no cell) and a run id of
    digits keeps its leading zeros. ``TableError`` when the file is not such a table."""
    df = read_table(path, ("label",), numeric=lambda cols: [  # analytic tables: no run_id
        c for c in cols if c in NUMBER_COLUMNS or is_metric_column(c)] + bare_metric_columns(
        cols), dtype={c: str for c in TEXT_COLUMNS})  # (an older table's metrics: 'n/a' in
    # ratio_w, not metric.ratio_w, was read as not measured without a word)
    for c in TEXT_COLUMNS:
        if c in df:
            df[c] = df[c].fillna("")
    df = normalize_table(df)
    for c in [c for c in ("pack_size", "wall_s", "cpu_s") if c in df]:  # a pack's size and
        # times, none below 0 (a wall_s of -5000 cut the front page's training time); a row's
        # impossible seed or count leaves that row out instead (count_problem)
        bad = df[c][(df[c] < 0) | (df[c] == float("inf"))]
        if len(bad):
            raise TableError(f"{path}: column {c!r} holds {float(bad.iloc[0])!r}, not a count or "
                             "time >= 0; delete it to rebuild it from the run records (or re-run "
                             "the runs)")
    for c in [c for c in df.columns if is_metric_column(c)]:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            try:  # (an older table's bare metric columns, named here: ``normalize_table``)
                if pd.api.types.is_bool_dtype(df[c]):
                    raise TypeError(c)
                df[c] = pd.to_numeric(df[c])
            except (ValueError, TypeError):
                raise TableError(f"{path}: column {c!r} holds text where numbers belong; delete "
                                 "it to rebuild it from the run records (or re-run the runs)"
                                 ) from None
        why = metric_range_problem(metric_name(c), df[c].tolist())
        if why:
            raise TableError(f"{path}: column {c!r} holds {why}; delete it to rebuild it from "
                             "the run records (or re-run the runs)")
    return df


# ------------------------------------------------------------------------------ where a spec lives


def read_run_table(path: Path) -> pd.DataFrame:
    """``read_results`` of a table whose rows are judged: one of trained runs (run ids or config
    columns; an analytic table has neither) must say which runs finished, its ``status`` (the
    column deleted by hand was a traceback in `plot` and `verify`, and exported as empty)."""
    df = read_results(path)
    if "status" not in df and ("run_id" in df or any(c.startswith(CONFIG_PREFIXES)
                                                     for c in df.columns)):
        raise TableError(f"{path}: not a table of this project (no column status); delete it to "
                         "rebuild it from the run records (or re-run the runs)")
    return df


def results_dir(spec, out: Path | None = None) -> Path:
    """``<out or <repo>/results>/<paper>/<id>``: the folder of one spec's store and outputs."""
    return Path(out or repo_root() / "results") / spec.paper / spec.id


def reused_specs(spec) -> list:
    """The specs whose run records ``spec`` reads: its ``reuse`` list and, in turn, theirs (rc
    reusing rb, which reuses ra, read none of ra's records: rb showed its runs done, and rc
    trained them again), each once, the spec itself never. A spec is its results folder (paper
    and id): one of another paper with this spec's id was taken for the spec itself and its
    records were never read, without a word."""
    seen, out, todo = {(spec.paper, spec.id)}, [], [(spec, name) for name in spec.reuse]
    while todo:
        other = find_reused(*todo.pop(0))
        if (other.paper, other.id) not in seen:
            seen.add((other.paper, other.id))
            out.append(other)
            todo += [(other, name) for name in other.reuse]
    return out


def open_store(spec, out: Path | None = None, readonly: bool = False) -> Store:
    """The spec's store, reading also the records of the specs it reuses (and they reuse);
    ``readonly``: one that moves no record (``Store``)."""
    reuse = [results_dir(s, out) for s in reused_specs(spec)]
    return Store(results_dir(spec, out), reuse=reuse, weights=bool(spec.save_weights),
                 analyses=tuple(a for a in spec.analysis if a in ANALYSES), readonly=readonly)


def shared_homes(spec, profile: str, overrides: dict | None, out: Path | None,
                 run_ids: Iterable[str], runs: Iterable = (), unread: list[str] | None = None
                 ) -> tuple[dict[str, Path], dict[str, tuple[str, ...]]]:
    """Run id -> root of the store where `run` of ``spec`` claims and records that run
    (``Store.homes``): the store of a spec it reuses (in turn) whose runs of the same profile and
    ``--set`` include it, so that the `run` of that spec, which reads no store but its own and
    those it reuses, finds the claim and the record there. Of several such specs, the one that
    reuses fewest (then by paper and id): every spec of a chain or loop of reuse picks the same
    store. A spec whose profiles (the same, then the others: ``runs``) plan none of them, or
    that ``overrides`` do not apply to, shares nothing;
    nor does one whose store cannot be written (``_cannot_home``): a reused spec's folder that
    is a file, or a link outside ``out``, made `run` of the spec reusing it fail (exit 2), which
    only reads it (its runs count as not done, with a warning) and records them in its own.

    And run id -> what `run` of ``spec`` keeps of a run beyond what ``spec`` keeps (``kept``:
    weights, an `analysis`) for the reused specs that have the run and read its home, the
    spec's own store too (``WorkSettings.more``), so that each finds it done
    (``Store.is_done``). Such a run was recorded in the reusing spec's own store, and the
    reused spec's `run`, run at once or after it, trained it again for its weights; the run's
    home keeping less than a spec between them in a chain of reuse, that spec trained it again;
    in a loop of reuse, the spec picked as its home kept only its own.

    ``runs``: the configs of those run ids, to find them among a reused spec's runs of its other
    profiles too, and of its profiles without ``overrides`` or with those its sweep sets not
    (a run only its paper profile plans, or one that `--set` made and its sweep plans without,
    `run` of it trained again),
    and to expand only the profiles that may plan them (``sweep.may_plan``); without them, the
    same profile's runs alone are looked for.

    ``unread``: a line is appended for each reused spec that plans some of the runs but reads
    not their home (rc reusing ra and rb, neither reusing the other: the run shared by the
    three is homed in ra's store, and `run rb` trains it again), naming the fix."""
    from .spec import SpecError
    from .sweep import expand, may_plan, unswept_overrides

    wanted, reused, runs = set(run_ids), reused_specs(spec), list(runs)  # (once: each call
    # loads the specs from disk, and once per run id the 600 runs of huang2025-figA4's paper
    # profile took 10-25 s)
    best: dict[str, tuple] = {r: (len(reused), spec.paper, spec.id) for r in wanted}
    homes: dict[str, Path] = {}
    having: dict[str, list] = {}  # run id -> (what a reused spec that has it keeps, the stores
    #                               that spec reads)
    flats: dict[str, dict] = {}  # run id -> its config (`may_plan`), worked out once
    names: dict[Path, str] = {results_dir(spec, out): spec.id}  # store root -> its spec's id

    def flat(r) -> dict:
        if r.run_id not in flats:
            flats[r.run_id] = r.flat()
        return flats[r.run_id]

    for other in reused:
        root = results_dir(other, out)
        if _cannot_home(root):  # (before its sweep is expanded)
            continue
        # its runs of the same profile, then those of its other profiles (a run it plans under
        # another profile alone was recorded in this spec's store, and its `run` of that profile
        # trained the run again), each expanded only where it may plan a run still unshared
        # (`may_plan`: a reused spec's same profile of 90,000 points took 34 s to expand for a
        # `run` of one run it could not plan)
        has: set[str] = set()
        # (and without the `--set` given here: a run that `--set model.d_state=8` makes is one of
        # those the reused spec's sweep of it plans without any; or under what is left of it
        # where the sweep sets some of its keys: `--set model.d_state=8 --set
        # train.max_steps=3`, a run of its `--set train.max_steps=3`)
        part = [(p, unswept_overrides(other, p, overrides)) for p in other.profiles]
        for i, (name, given) in enumerate([(profile, overrides)] + [
                (p, overrides) for p in other.profiles if p != profile] + [
                (p, g) for p, g in part if g is not None and g != overrides] + (
                [(p, None) for p in other.profiles] if overrides else [])):
            left = wanted - has
            alone = [r for r in runs if r.run_id in left]
            if not (alone and may_plan(other, name, given, (flat(r) for r in alone))
                    or i == 0 and left and not runs):  # (without ``runs``: the same profile's)
                continue
            try:
                has |= {r.run_id for r in expand(other, name, overrides=given) or []} & wanted
            except (SpecError, ValueError):
                continue
        theirs_reused = reused_specs(other)
        rank = (len(theirs_reused), other.paper, other.id)
        reads = {root} | {results_dir(s, out) for s in theirs_reused}
        names[root] = other.id
        for rid in sorted(has):
            having.setdefault(rid, []).append((kept(other), reads, other.id))
            if rank < best[rid]:
                best[rid] = rank
                homes[rid] = root
    mine, more, own = kept(spec), {}, results_dir(spec, out)
    missed: dict[tuple[str, str], int] = {}  # (a reused spec, the home it reads not) -> runs
    for rid, specs in having.items():  # (homed in the spec's own store too: in a loop of
        # reuse, the spec that keeps less, picked as the home, kept only its own, and the other
        # spec's `run` trained the run again for its weights)
        home = homes.get(rid, own)
        extra = set().union(*(k for k, reads, _ in specs if home in reads)) - mine
        if extra:
            more[rid] = tuple(sorted(extra))
        for _, reads, name in specs:
            if home not in reads:
                missed[(name, names[home])] = missed.get((name, names[home]), 0) + 1
    for (name, home_id), n in ([] if unread is None else sorted(missed.items())):
        unread.append(f"{n} run{'s' * (n > 1)} of this profile {'is' if n == 1 else 'are'} "
                      f"planned by {name} too, but recorded in {home_id}'s store, which "
                      f"`run {name}` does not read "
                      f"({name} does not reuse {home_id}): it would train "
                      f"{'it' if n == 1 else 'them'} again; add {home_id} to {name}'s reuse")
    return homes, more


def _cannot_home(root: Path) -> bool:
    """Whether runs cannot be claimed and recorded in the store at ``root`` (``shared_homes``):
    it, its ``runs/`` or ``claims/`` is no folder (a file, a FIFO, a link loop, under a file),
    or a link of it leads outside the results root (``Store.check_links``)."""
    if any(folder_problem(p) not in (None, "no such folder")
           for p in (root, root / "runs", root / "claims")):
        return True
    try:
        Store(root).check_links(files=False)
    except LinkOutside:
        return True
    return False


def kept(spec) -> set[str]:
    """What a spec's `run` keeps of each run beside its record: the training-time analyses it
    records and 'weights' where it saves them (``save_weights``)."""
    return {a for a in spec.analysis if a in ANALYSES} | ({"weights"} if spec.save_weights
                                                           else set())


def output_name(spec, profile: str, stem: str, ext: str, tag: str = "") -> str:
    """``results.csv`` for the spec's default profile, ``results-<profile>.csv`` otherwise, so
    profiles never overwrite each other's tables, figures or reports; runs with command-line
    overrides (``--set``) add their tag: ``results-set-3f2a9c.csv``."""
    parts = [stem] + ([profile] if profile != spec.default_profile else []) + ([tag] if tag else [])
    return f"{'-'.join(parts)}.{ext}"
