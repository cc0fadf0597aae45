"""Stage 6 (plots): one long-format table across every experiment's committed results
(``ssmrepro export``).

One row per (run, metric) of every ``results*.csv`` under the results root (every spec, every
profile that has a table), and one with an empty metric for a run with no finite metric::

    paper, experiment, profile, run_id, label, seed, status, n_params, metric, value, config

``metric`` is the name without its namespace (``test.acc``), ``value`` a float; ``config`` is the
run's dotted config (``{"model.d_model": 32, "train.betas": [0.9, 0.999], ...}``) as one JSON
object, so experiments with different config keys share one schema. CSV always; Parquet with the
optional ``parquet`` extra (pyarrow). docs/columns.md describes every column.
"""

from __future__ import annotations

import errno
import itertools
import json
import math
import stat
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from ..report.cells import values_equal
from ..report.columns import RUN_ID
from ..spec import SET_TAG, SpecError, load_project_spec, load_spec, spec_paths
from ..store import (
    CONFIG_PREFIXES,
    TableError,
    is_metric_column,
    metric_name,
    open_store,
    output_name,
    read_run_table,
    read_table,
    results_dir,
)
from ..util import atomic_write_stream, atomic_write_text, extra_hint, first_few, first_time
from .outputs import consistent_rows, profile_table

EXPORT_COLUMNS = ["paper", "experiment", "profile", "run_id", "label", "seed", "status",
                  "n_params", "metric", "value", "config"]
FORMATS = ("csv", "parquet")
COMPRESSED = ("gz", "bz2", "xz", "zst", "zip", "lz4", "tgz", "7z")  # suffixes export does not write
_TYPED = ("seed", "n_params", "value")  # the columns that are not text


def result_files(spec, out: Path | None = None) -> list[tuple[str, Path]]:
    """(profile, path) of every committed results table of ``spec``: each profile's own file,
    named as `plot` names it (``output_name``). A table no profile writes any more is not one:
    ``results-smoke.csv`` left from before smoke became the default profile (whose table is
    ``results.csv``) was exported beside it as smoke's, every row twice. OSError naming the
    spec's folder where it is a symbolic link loop, a file or a link to nothing: it was read as
    a folder without tables (`export` left the spec out without a word, `figures` put it on the
    front page as 'spec only'; a loop was a traceback in `export`)."""
    root = results_dir(spec, out)
    try:
        if not stat.S_ISDIR(root.stat().st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(root))
    except FileNotFoundError:  # no results yet; a link to nothing is named
        if root.is_symlink():
            raise
    files = []
    for prof in spec.profiles:
        csv = root / output_name(spec, prof, "results", "csv")
        if csv.exists() or csv.is_symlink():  # a FIFO or a dangling link: read_results says so
            files.append((prof, csv))
    return sorted(files, key=lambda pc: pc[1].name)


def misplaced_root(root: Path) -> str | None:
    """Why ``root``, given as a results root (``--out``), is a folder inside one instead, else
    None: a paper folder (``results/huang2025``, holding ``<id>/`` of a spec of that paper) or a
    spec's own folder (holding its ``results*.csv`` or ``report*.md``). `figures --out
    results/huang2025` wrote a front page of '3 spec only' there, `export` 0 rows, `list` 0 runs
    done, each exit 0."""
    try:
        if any(root.glob("results*.csv")) or any(root.glob("report*.md")):
            return ("it holds a results table or report: a spec's own folder, not the results "
                    "root (<root>/<paper>/<id>/)")
        for p in spec_paths():
            try:
                spec = load_spec(p)
            except SpecError:
                continue
            if root.name == spec.paper and (root / spec.id).is_dir():
                return (f"it is the paper folder of {spec.id} ({root / spec.id}): the results "
                        f"root is {root.parent} (<root>/<paper>/<id>/)")
    except OSError:
        return None
    return None


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _typed(v: Any, planned: Any) -> Any:
    """``v`` (a table's value) as the planned run's config types it: an integer setting of a
    column that is empty for some runs is read back as a float (``model.heads`` 1.0 beside a
    Mamba's empty cell), exported as 1.0 where the run's config says 1."""
    if (isinstance(v, float) and isinstance(planned, int) and not isinstance(planned, bool)
            and v == planned):
        return planned
    return v


def long_rows(spec, profile: str, df: pd.DataFrame,
              planned: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per (run, metric) of ``df``; ``planned``: each planned run's dotted config by run
    id, whose types the config column keeps (``_typed``)."""
    # an analytic table's grid and params are its rows' settings, not metrics: they were
    # exported as metrics beside an empty config, so no value could be told from another's row
    settings = set(spec.analytic.grid) | set(spec.analytic.params) if spec.analytic else set()
    metrics = [c for c in df.columns if is_metric_column(c) and metric_name(c) not in settings]
    config_cols = [c for c in df.columns if c.startswith(CONFIG_PREFIXES)
                   or (c not in metrics and metric_name(c) in settings)]
    rows = []
    for rec in df.to_dict("records"):
        typed = (planned or {}).get(str(rec.get("run_id")), {})
        # a setting without a value (None: `train.epochs` unset) is left out, as a committed
        # table's empty cell is: a row made from its run's record (``_from_records``) gave it
        # as null, so one run's config read two ways as the records were there or not
        config = {metric_name(c): _typed(_plain(rec[c]), typed.get(c)) for c in config_cols
                  if rec[c] is not None
                  and not (isinstance(rec[c], float) and math.isnan(rec[c]))}
        base = {"paper": spec.paper, "experiment": spec.id, "profile": profile,
                "run_id": rec.get("run_id"), "label": rec.get("label"),
                "seed": _plain(rec.get("seed")), "status": rec.get("status"),
                "n_params": _plain(rec.get("n_params")),
                "config": json.dumps(config, sort_keys=True)}
        n = len(rows)
        for m in metrics:
            v = rec[m]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            try:
                value = float(v)
            except (TypeError, ValueError):
                continue
            rows.append({**base, "metric": metric_name(m), "value": value})
        if len(rows) == n:  # no finite metric (a run that diverged at once, one in error): one
            # row with its status, no metric; it was left out, as if it had never run
            rows.append({**base, "metric": "", "value": math.nan})
    return rows


def _planned(spec, profile: str) -> list:
    """The runs ``profile`` plans ([] when the spec no longer expands: nothing to check
    against)."""
    from ..sweep import expand

    try:
        return expand(spec, profile)
    except SpecError:
        return []


def _from_records(spec, prof: str, out: Path | None, planned: list, table: pd.DataFrame,
                  name: str) -> tuple[pd.DataFrame, int]:
    """``table`` (a profile's committed rows) as `plot` reads it (``outputs.profile_table``,
    the one reading of `plot`, `verify` and `figures`, through a read-only store: nothing is
    moved, nothing written), and the number of its runs left out because their only records
    were trained on other data than there is now (a text corpus replaced, an LRA dataset's
    files) or hold numbers that mean something else now (``Store.stale_data``: written before a
    change of what its run computes). The store's warnings (those, an invalid record, one of a
    newer ssmrepro) are printed as `plot` prints them, each once per command
    (``Store.to_say``). A committed row that its run's record replaces is named where it
    differs from it: a config that run id cannot have (``consistent_rows``), a metric or status
    edited by hand (``_warn_replaced``); `plot` writes the table again from the records, the
    source of truth. ``table`` may be empty (a profile without a table, its runs recorded:
    ``_recorded_only``); ``name``: the table's, for the warnings. Export read the table by an
    order of steps of its own beside `plot`'s, and the two drifted."""
    if spec.analytic is not None:  # computed by `plot`, no records (``analytic_mismatch``)
        return table, 0
    store = open_store(spec, out, readonly=True)
    got = profile_table(spec, prof, results_dir(spec, out), planned, store, own=table,
                        name=name)
    for w in store.to_say():
        print(f"warning: {w}", file=sys.stderr)
    own, recorded = got.own, got.recorded
    have = set(recorded[RUN_ID].astype(str)) if RUN_ID in recorded else set()
    if RUN_ID in own and have:
        replaced = own[own[RUN_ID].astype(str).isin(have)]
        _warn_replaced(consistent_rows(replaced, planned, own=True), recorded, have, name)
    gone = set(own[RUN_ID].astype(str)) & store.stale_data if RUN_ID in own else set()
    rows = got.rows
    if RUN_ID in own and RUN_ID in rows and not rows.empty:  # in the committed table's order
        # of rows and columns (the file its reader sees), the rows of runs it has not and the
        # columns it has not after them, as `plot` orders them
        def key(t: pd.DataFrame) -> pd.Series:  # (a run shared by two labels: a row each)
            return t[RUN_ID].astype(str) + ("\0" + t["label"].astype(str) if "label" in t
                                             else "")

        order = {k: i for i, k in enumerate(dict.fromkeys(key(own)))}
        rank = key(rows).map(order).fillna(len(order))
        rows = rows.iloc[rank.to_numpy().argsort(kind="stable")].reset_index(drop=True)
        rows = rows[[c for c in own.columns if c in rows]
                    + [c for c in rows.columns if c not in own.columns]]
    return rows, len(gone)


_COMPARED = ("status", "n_params")  # besides the metrics: the columns a row exports


def _warn_replaced(table: pd.DataFrame, recorded: pd.DataFrame, have: set[str],
                   name: str) -> None:
    """Warn of the rows of ``table`` (committed) whose exported values differ from their run's
    record (``recorded``, the runs ``have``): a metric edited by hand (0.14 -> 0.99) was
    exported as the record's without a word, as `plot` writes it again. Names the first few
    runs and the column, with both values."""
    if table.empty or recorded.empty:
        return
    cols = [c for c in table.columns if c in recorded.columns
            and (c in _COMPARED or is_metric_column(c))]
    mine = table[table[RUN_ID].astype(str).isin(have)]
    if mine.empty or not cols:
        return
    rec = {str(r[RUN_ID]): r for r in recorded.to_dict("records")}
    odd: list[str] = []
    for row in mine.to_dict("records"):
        r = rec.get(str(row[RUN_ID]))
        for c in cols if r is not None else ():
            a, b = row[c], r[c]
            if _missing(a) and _missing(b) or values_equal(a, b):
                continue
            odd.append(f"{row[RUN_ID]} {c}: {_shown(a)} in the table, {_shown(b)} in its record")
            break
    if odd:
        print(f"warning: {name}: {len(odd)} row(s) differ from their run's record ("
              f"{first_few(odd)}; edited by hand?): the record's values are exported, "
              "as `plot` writes the table again from the records, the source of truth",
              file=sys.stderr)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v == ""


def _shown(v: Any) -> str:
    if _missing(v):
        return "empty"
    text = str(_plain(v))
    return text if len(text) <= 40 else text[:40] + "..."


def analytic_mismatch(spec, table: pd.DataFrame) -> str | None:
    """Why ``table`` (an analytic spec's committed results.csv, as ``read_run_table`` reads it)
    is not the theory table `plot` computes for ``spec``, else None: other columns (another
    analytic spec's table copied in: its rows were exported as this spec's) or other grid points
    or params (a grid edited since, a row edited by hand). `plot` computes the table again;
    `export` reads it as committed, without the theory's minutes."""
    from ..report.analytic import analytic_columns
    from ..util import norm

    try:
        cells, metrics = analytic_columns(spec)
    except KeyError:
        return None  # an unknown analytic table: the spec's check says so
    a = spec.analytic
    have = {metric_name(c) for c in table.columns}
    if have != cells | metrics:
        odd = sorted(have ^ (cells | metrics), key=str)
        return (f"its columns are not those of analytic table {a.table!r} "
                f"({', '.join(map(str, odd[:3]))}{', ...' if len(odd) > 3 else ''})")
    col = {metric_name(c): c for c in table.columns}
    keys = sorted(a.grid) + sorted(a.params)
    got = {tuple(norm(v) for v in row)
           for row in table[[col[k] for k in keys]].itertuples(index=False)}
    params = tuple(norm(a.params[k]) for k in sorted(a.params))
    want = {tuple(norm(v) for v in point) + params
            for point in itertools.product(*(a.grid[k] for k in sorted(a.grid)))}
    if got != want or len(table) != len(want):
        return (f"its rows are not the grid points and params of the spec ({len(table)} "
                f"row(s), {len(want)} planned)")
    return None


def analytic_edits(spec, table: pd.DataFrame, summary: Path) -> tuple[list[int], str]:
    """(positions, why) of the rows of ``table`` (an analytic spec's results.csv, its grid
    points and params those of the spec: ``analytic_mismatch``) whose computed metric differs
    from the one `plot` wrote for the same point: the profile's ``summary`` (summary.csv, one
    cell per row) when it holds every metric column, else the table computed again (seconds:
    yu2025-fig5's 42 points take 8 s). A metric edited by hand was exported as it stood (`plot`
    computes the table again, `export` reads it as committed)."""
    from ..report.analytic import analytic_columns, analytic_table
    from ..report.cells import values_equal
    from ..util import norm

    cells, metrics = analytic_columns(spec)
    col = {metric_name(c): c for c in table.columns}
    keys = sorted(spec.analytic.grid) + sorted(spec.analytic.params)
    ref = None
    try:
        ref = read_table(summary) if summary.is_file() else None
    except TableError:
        ref = None
    source = f"its {summary.name} (what `plot` wrote)"
    if ref is None or not (set(keys) | metrics) <= {metric_name(c) for c in ref.columns}:
        try:
            ref, source = analytic_table(spec), "the theory"
        except SpecError:
            return [], ""
    rcol = {metric_name(c): c for c in ref.columns}
    want = {tuple(norm(v) for v in row[:len(keys)]): row[len(keys):]
            for row in ref[[rcol[k] for k in keys] + [rcol[m] for m in sorted(metrics)]]
            .itertuples(index=False)}
    bad, why = [], ""
    for i, row in enumerate(table[[col[k] for k in keys] + [col[m] for m in sorted(metrics)]]
                            .itertuples(index=False)):
        have = want.get(tuple(norm(v) for v in row[:len(keys)]))
        if have is None:
            continue
        for m, a, b in zip(sorted(metrics), row[len(keys):], have):
            if not values_equal(a, b):
                bad.append(i)
                if not why:
                    point = ", ".join(f"{k}={v}" for k, v in zip(keys, row[:len(keys)]))
                    why = f"{m}={a!r} at {point}, where {source} gives {b!r}"
                break
    return bad, why


def prof_rows(path: Path, profile: str) -> bool:
    """Whether the results table at ``path`` holds a row of ``profile`` (False if unreadable)."""
    try:
        t = read_run_table(path)
    except TableError:
        return False
    return "profile" in t and bool((t["profile"].astype(str) == profile).any())


def export_table(out: Path | None = None, skipped: list[str] | None = None,
                 tagged: list[str] | None = None, stray: list[str] | None = None,
                 foreign: list[str] | None = None) -> pd.DataFrame:
    """The long table of every spec's committed results under ``out`` (default: the project's
    results/), each profile's rows as `plot` reads them (``_from_records``). A spec that
    cannot be read is left out, with its first error appended to ``skipped``; the
    tables of runs with ``--set`` overrides (``results[-<profile>]-set-<hash>.csv``: no profile
    of the spec, their rows would mix with the profile's) are left out and named in
    ``tagged`` (they were left out without a word); those of no profile of the spec (a profile
    renamed or removed: results-long.csv after `long` was dropped, whose rows were left out
    without a word while `figures` named its report) are named in ``stray``; the folders of
    results tables that no project spec owns (a spec file run by its path: `export` gave 0 rows
    without a word) in ``foreign``."""
    rows: list[dict[str, Any]] = []
    roots: set[Path] = set()
    unread: set[str] = set()  # the ids (file names) of the project's specs left out
    for p in spec_paths():
        try:
            spec = load_project_spec(p)
        except SpecError as err:
            if skipped is not None:
                skipped.append(err.messages[0])
            unread.add(p.stem)
            continue
        root = results_dir(spec, out)
        roots.add(root)
        try:  # (a results folder this user may not read: the other specs are exported)
            rows += _spec_rows(spec, root, out, tagged, stray)
        except (TableError, OSError) as err:
            _left_out(f"{spec.paper}/{spec.id}", err)
    if foreign is not None and roots:
        base = next(iter(roots)).parents[1]  # the results root: <root>/<paper>/<id>
        known = {_resolved(r) for r in roots}
        # a project spec left out (invalid) owns its folder: it was named here too, as of 'no
        # spec of the project', beside the warning that named the spec
        foreign += sorted({f"{f.parent.parent.name}/{f.parent.name}"
                           for f in base.glob("*/*/results*.csv")
                           if _resolved(f.parent) not in known and f.parent.name not in unread})
    df = pd.DataFrame(rows, columns=EXPORT_COLUMNS)
    if df.empty:  # the columns' types of a table with rows: a Parquet file without rows had
        # every column of no type (null), seed and value too, unlike any export with rows
        df = df.astype({c: "str" for c in EXPORT_COLUMNS if c not in _TYPED})
    df["seed"] = df["seed"].astype("Int64")
    df["n_params"] = pd.to_numeric(df["n_params"], errors="coerce").astype("Int64")
    df["value"] = df["value"].astype(float)
    return df


def _resolved(path: Path) -> Path:
    """``path`` resolved, or as it is where it cannot be (a link loop: a spec's folder linked
    to itself was a RuntimeError traceback out of `export`; its own table is named left out)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def _spec_rows(spec, root: Path, out: Path | None, tagged: list[str] | None,
               stray: list[str] | None) -> list[dict[str, Any]]:
    """The export rows of every profile of ``spec`` (``export_table``); a profile whose
    table cannot be read (damaged, a folder, not readable by this user) is left out with a
    warning naming it (the whole export stopped there: no spec after it was exported)."""
    rows: list[dict[str, Any]] = []
    if tagged is not None and root.is_dir():
        tagged += sorted(f"{spec.paper}/{spec.id}/{f.name}" for f in root.glob("results*.csv")
                         if SET_TAG.search(f.stem))
    default = spec.default_profile
    if stray is not None and root.is_dir():
        own = {output_name(spec, prof, "results", "csv") for prof in spec.profiles}
        own.add(f"results-{default}.csv")  # the default's table from before, read below
        stray += sorted(f"{spec.paper}/{spec.id}/{f.name}" for f in root.glob("results*.csv")
                        if f.name not in own and not SET_TAG.search(f.stem))
    files = dict(result_files(spec, out))
    for prof in spec.profiles:  # a profile's rows under its table's name from before the
        # default profile changed (plot completes it from them: ``_other_tables``)
        was = root / (f"results-{prof}.csv" if prof == default else "results.csv")
        if prof not in files and was.is_file() and prof_rows(was, prof):
            files[prof] = was
    for prof, csv in sorted(files.items(), key=lambda pc: pc[1].name):
        try:
            rows += _profile_rows(spec, prof, csv, files, root, out)
        except (TableError, OSError) as err:
            _left_out(f"{spec.paper}/{spec.id}/{csv.name}", err)
            if isinstance(err, TableError):  # as `plot` reads it: not used, the profile's
                # rows made from their records (0 rows were exported where plot writes all)
                try:
                    rows += _recorded_only(spec, prof, out, unread=csv.name)
                except OSError as err2:
                    _left_out(f"{spec.paper}/{spec.id} (profile {prof}'s records)", err2)
    named: dict = {}  # the profiles the spec's record files name, read once
    for prof in spec.profiles:  # runs recorded, no table: `plot` writes one from them
        if prof not in files:
            try:
                rows += _recorded_only(spec, prof, out, named=named)
            except OSError as err:
                _left_out(f"{spec.paper}/{spec.id} (profile {prof}'s records)", err)
    return rows


def _profile_rows(spec, prof: str, csv: Path, files: dict[str, Path], root: Path,
                  out: Path | None) -> list[dict[str, Any]]:
    """The export rows of ``prof``'s committed table ``csv``, checked as `plot` reads it."""
    default = spec.default_profile
    table = read_run_table(csv)
    was = root / (f"results-{prof}.csv" if prof == default else "results.csv")
    if was != csv and was.is_file() and "profile" in table and RUN_ID in table:
        mine = set(table.loc[table["profile"].astype(str) == prof, RUN_ID].astype(str))
        try:
            more = read_run_table(was)
        except TableError:  # plot warns of it where its rows are needed
            more = pd.DataFrame()
        if "profile" in more and RUN_ID in more:
            more = more[(more["profile"].astype(str) == prof)
                        & ~more[RUN_ID].astype(str).isin(mine)]
            table = pd.concat([table, more], ignore_index=True)
    planned = _planned(spec, prof)
    why = analytic_mismatch(spec, table) if spec.analytic is not None else None
    if why:  # another analytic spec's table, or one edited: exported as this spec's
        print(f"warning: {csv.name} of {spec.id}: {why}: its rows are not exported "
              f"(`ssmrepro plot {spec.id}` computes the table again)", file=sys.stderr)
        table = table.iloc[:0]
    elif spec.analytic is not None and not table.empty:
        bad, why = analytic_edits(
            spec, table, root / output_name(spec, prof, "summary", "csv"))
        if bad:  # a computed metric edited by hand: exported as it stood
            print(f"warning: {csv.name} of {spec.id}: {len(bad)} row(s) hold a "
                  f"metric that is not the theory's ({why}; edited by hand?): they are "
                  f"not exported (`ssmrepro plot {spec.id}` computes the table again)",
                  file=sys.stderr)
            table = table.drop(index=table.index[bad])
    # the rows of a profile that reads this table too (its rows under the table's name
    # from before the default profile changed) are exported in its turn: they were named
    # `not used` here, beside their export
    also = {q for q, f in files.items() if q != prof and f == csv}
    if also and "profile" in table:
        table = table[~table["profile"].astype(str).isin(also)]
    table, stale = _from_records(spec, prof, out, planned, table, f"{spec.id}/{csv.name}")
    if stale:
        print(f"warning: {csv.name} of {spec.id}: the rows of {stale} run(s) are not "
              "exported: their records were trained on other data than there is now, "
              "or by an older ssmrepro (above; `ssmrepro run` trains them again)",
              file=sys.stderr)
    return long_rows(spec, prof, table, {r.run_id: r.flat() for r in planned})


def _recorded_only(spec, prof: str, out: Path | None, unread: str | None = None,
                   named: dict | None = None) -> list[dict[str, Any]]:
    """The export rows of ``prof``, which has no results table, from the records of its planned
    runs (`run` stopped before it wrote the table, the table deleted): `list` counted them done
    and `plot` writes their table from them, while `export` left them out without a word.
    Said in a note. Nothing where the spec's store holds no record (a fresh clone: no paper
    grid is expanded for it). ``unread``: the name of the profile's table, which is there but
    not a table (text in a metric column, an empty file): `plot` passes it over and writes the
    table from the records; `export` left the profile out (0 rows). ``named``: the profiles the
    spec's record files name (``Store.named_profiles``), kept between the spec's profiles: one
    no record file names is not expanded."""
    if spec.analytic is not None:
        return []
    store = open_store(spec, out, readonly=True)
    if not store.has_records():  # (its ``runs/`` a file: said, as `plot` says it)
        for w in store.to_say():
            print(f"warning: {w}", file=sys.stderr)
        return []
    if named is not None:
        if "profiles" not in named:
            named["profiles"] = store.named_profiles()
        if prof not in named["profiles"]:
            return []
    planned = _planned(spec, prof)
    # a profile `run --profile <prof>` ran (a record names it) is exported as `plot` writes
    # its table, each planned run with a record: a run it found done, recorded under another
    # profile that plans it too (quick's runs of smoke), was left out, so quick gave 1 run of
    # its 3, a table `plot` never writes. A profile no record names (one of the same config as
    # the profile `run` ran) is not given the other's runs.
    if not any((store.read(r.run_id) or {}).get("profile") == prof for r in planned):
        return []
    name = f"{spec.id}/{output_name(spec, prof, 'results', 'csv')}"
    table, _ = _from_records(spec, prof, out, planned, pd.DataFrame(columns=[RUN_ID]), name)
    if table.empty:
        return []
    what = "no such table" if unread is None else f"{unread} is not used (above)"
    print(f"note: {name}: {what}; the {table[RUN_ID].nunique()} recorded run(s) of profile "
          f"{prof!r} are exported from their records (`ssmrepro plot {spec.id} --profile "
          f"{prof}` writes the table)", file=sys.stderr)
    return long_rows(spec, prof, table, {r.run_id: r.flat() for r in planned})


def _left_out(what: str, err: OSError | TableError) -> None:
    """Warn that ``what`` (a spec's results folder or table) is not exported, and why: one that
    cannot be read (damaged, a folder, not readable by this user) stopped the whole export,
    exit 2, where the rest could be exported. A process limit met (too many open files) is
    every spec's: it stops the export, as before. Each reason is given once per command
    (``util.first_time``: one record this user may not read was named for each profile of its
    spec); what else it leaves out is still named (a second profile's table left out for the
    same reason went without a word: its rows were missing from the export unsaid)."""
    from ..util import _process_limit, os_message

    if isinstance(err, OSError) and _process_limit(err) is not None:
        raise err
    why = os_message(err) if isinstance(err, OSError) else str(err)
    if not first_time(f"left out: {why}"):
        print(f"warning: left out {what}, for the same reason as above", file=sys.stderr)
        return
    print(f"warning: left out {what}: {why}", file=sys.stderr)


def write_export(path: Path, fmt: str, out: Path | None = None,
                 skipped: list[str] | None = None,
                 tagged: list[str] | None = None,
                 stray: list[str] | None = None,
                 foreign: list[str] | None = None) -> tuple[Path, int]:
    """Write the table as ``fmt`` (csv | parquet); returns (path, rows). Specs that cannot be
    read are listed in ``skipped``, ``--set`` tables left out in ``tagged``, tables of no
    profile in ``stray``, folders of no project spec in ``foreign`` (``export_table``)."""
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r}: expected csv or parquet")
    if fmt == "parquet":  # before the table is built: a missing pyarrow was reported only
        # after every spec's tables had been read (21 s on this machine)
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError(f"--format parquet needs pyarrow: {extra_hint('parquet')}") from None
    df = export_table(out, skipped, tagged, stray, foreign)
    if fmt == "parquet":
        atomic_write_stream(path, lambda f: df.to_parquet(f, index=False))
    else:
        atomic_write_text(path, df.to_csv(index=False))
    return path, len(df)
