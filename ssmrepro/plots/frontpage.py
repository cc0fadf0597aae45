"""Stage 6 (plots): rebuild every committed output and write the front page, results/README.md.

``rebuild_all`` re-draws every spec's figures and reports from its committed tables (every profile
that has a ``results*.csv``; no training). ``front_page`` writes one table over the catalogue
(``experiments/catalogue.yaml``: every target of the five papers, with or without a spec): status,
verdict counts, training time of the quick profile, links to figures and reports. ``make
figures`` = ``ssmrepro figures`` = both.

Status of a target: ``not specified`` (no spec yet), ``spec only`` (no committed results),
``smoke`` (only smoke-profile results), ``quick results`` (the default profile's results.csv),
``long results`` (a results-long.csv as well).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from ..report import CLAIM_VERDICTS, md_cell
from ..spec import (
    NAME_PATTERN,
    SET_TAG,
    SpecError,
    _control_characters,
    _read_spec_text,
    experiments_dir,
    load_project_spec,
    parse_yaml,
    shown_title,
    spec_paths,
    yaml_problem,
)
from ..store import LinkOutside, TableError, open_store, output_name, read_results, results_dir
from ..sweep import expand
from ..util import (
    atomic_write_text,
    folder_lock,
    human_seconds,
    read_small,
    remove_dead_temps,
    repo_root,
)
from .export import result_files
from .outputs import Outputs, build, figure_stem, validate_outputs
from .registry import parse_figure

CATALOGUE = "catalogue.yaml"
STATUSES = ("not specified", "spec only", "smoke", "quick results", "long results")
# the report's own lines (report.markdown), at the start of a line: the same words in a spec's
# title (line 1) were read first ('2 runs expected, 2 finished' hid a profile 1 of 2 finished)
# (a line may end in '\r\n': a report checked out on Windows had no verdicts on the front page)
_VERDICTS = re.compile(r"^\*\*Verdicts: ([^*\r\n]+)\*\*\r?$", re.M)
_FINISHED = re.compile(r"^Profile `[^`\n]*`: (\d+) runs expected, (\d+) finished", re.M)
_PROFILE = re.compile(r"^Profile `([^`\n]*)`", re.M)
_CLAIM_LINE = re.compile(r"^- \*\*(" + "|".join(CLAIM_VERDICTS) + r")\*\* ", re.M)


@dataclass
class Target:
    id: str
    alias: str | None
    paper: str
    tier: int
    what: str = ""
    spec: object | None = None
    status: str = "not specified"
    verdicts: str = ""
    quick_time: str = ""
    unfinished: list[str] = field(default_factory=list)  # 'quick: 3 of 30 runs finished'
    links: list[tuple[str, str]] = field(default_factory=list)  # (text, relative path)


def catalogue(path: Path | None = None) -> tuple[dict[str, str], list[dict]]:
    """(paper titles, target rows) of ``experiments/catalogue.yaml``; SpecError naming the file,
    the key and the reason when it is not such a file (read like a spec: size, duplicate keys,
    aliases bounded)."""
    path = path or experiments_dir() / CATALOGUE
    try:
        data = parse_yaml(_read_spec_text(path))
    except (yaml.YAMLError, ValueError, RecursionError) as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(parse)"
        what = yaml_problem(err) if isinstance(err, yaml.YAMLError) else \
            (str(err).splitlines() or [type(err).__name__])[0]
        raise SpecError([f"{path}: {where}: malformed YAML: {what}"]) from None
    if not isinstance(data, dict):
        raise SpecError([f"{path}: (top level): expected a mapping with papers and targets"])
    papers, rows = data.get("papers") or {}, data.get("targets") or []
    errors = [] if isinstance(papers, dict) else [f"{path}: papers: expected a mapping"]
    errors += [f"{path}: {m}" for m in _control_characters(data)]
    # written into the front page's headings and table cells as they are: a title of two lines
    # put a heading of its own there, an id or alias holding '|' or a line break split its row
    errors += [f"{path}: papers.{k}: expected a title of one line" for k, v in
               (papers.items() if isinstance(papers, dict) else ())
               if not isinstance(v, str) or "\n" in v or "\r" in v]
    if not isinstance(rows, list):
        errors.append(f"{path}: targets: expected a list")
        rows = []
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            errors.append(f"{path}: targets.{i}: expected a mapping (id, paper, tier, ...)")
            continue
        if isinstance(row.get("id"), str) and first.setdefault(row["id"].casefold(), i) != i:
            # the front page showed the first and dropped the second without a word (or, for
            # T-spec beside t-spec, showed both: one results folder on a case-insensitive disk)
            j = first[row["id"].casefold()]
            twice = "is listed twice" if rows[j].get("id") == row["id"] else \
                f"differs only in case from {rows[j].get('id')!r}"
            errors.append(f"{path}: targets.{i}.id: {row['id']!r} {twice} (first at "
                          f"targets.{j}); one row per target")
        errors += [f"{path}: targets.{i}.{k}: missing or not text" for k in ("id", "paper")
                   if not isinstance(row.get(k), str)]
        errors += [f"{path}: targets.{i}.{k}: {row[k]!r} is not a name (letters, digits, . _ -, "
                   "as a spec's id, alias and paper)" for k in ("id", "paper", "alias")
                   if (isinstance(row.get(k), str) and not re.match(NAME_PATTERN, row[k]))
                   or (k == "alias" and row.get(k) is not None and not isinstance(row[k], str))]
        if not isinstance(row.get("tier"), int) or isinstance(row.get("tier"), bool):
            errors.append(f"{path}: targets.{i}.tier: expected a whole number")
    if errors:
        raise SpecError(errors)
    return papers, list(rows)


def _specs(errors: list[str] | None = None) -> dict[str, object]:
    """The project's specs by id; those that cannot be read are left out, their errors added to
    ``errors``."""
    out = {}
    for p in spec_paths():
        try:
            s = load_project_spec(p)
        except SpecError as err:
            if errors is not None:
                errors += err.messages
            continue
        out[s.id] = s
    return out


def rebuild_all(out: Path | None = None, echo=print, warn=None) -> list[tuple[str, str, Outputs]]:
    """Rebuild figures, summaries and reports of every spec and profile with a committed table.
    ``echo``: a line per table rebuilt; ``warn``: a 'warning: ...' line (default: standard error;
    `figures` printed them on standard output, among the lines a script reads)."""
    if warn is None:
        def warn(m: str) -> None:
            print(m, file=sys.stderr)
    specs = _specs()
    # a spec whose figures, claims or paper values name what its tables lack (a metric typo):
    # `plot` and `verify` refuse it (exit 2); `figures` rebuilt the specs before it, then ended
    # in a KeyError traceback. Said, for every spec, before anything is rebuilt.
    problems: list[str] = []
    for spec in specs.values():
        for prof, _ in result_files(spec, out):
            try:
                problems += validate_outputs(spec, expand(spec, prof))
            except SpecError as err:
                problems += err.messages
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))
    done = []
    for sid, spec in specs.items():
        tables = dict(result_files(spec, out))
        for prof, _ in tables.items():
            res = build(spec, prof, results_dir(spec, out))
            done.append((sid, prof, res))
            echo(f"{sid} ({prof}): {len(res.figures)} figure(s), report {res.report.name}")
        for prof in (p for p in spec.profiles if p not in tables):
            # results.csv deleted: its report (6 PASS) was left as it was, without a word
            rep = results_dir(spec, out) / output_name(spec, prof, "report", "md")
            if rep.exists():
                warn(f"warning: {sid} ({prof}): {rep.name} is not rebuilt: there is no "
                     f"{output_name(spec, prof, 'results', 'csv')} to rebuild it from (delete "
                     f"it, or `ssmrepro run {sid} --profile {prof}`)")
        reports = {output_name(spec, p, "report", "md") for p in spec.profiles}
        for rep in sorted(results_dir(spec, out).glob("report*.md")):
            if rep.name not in reports and not SET_TAG.search(rep.stem):  # a profile renamed
                default = spec.default_profile
                if rep.name == f"report-{default}.md":  # said 'of no profile' of smoke's
                    warn(f"warning: {sid}: {rep.name} is profile {default}'s report from before "
                         f"it became the default profile (its report is now report.md): not "
                         "rebuilt (delete it)")
                    continue
                warn(f"warning: {sid}: {rep.name} is of no profile of the spec (have "
                     f"{', '.join(spec.profiles)}): not rebuilt (delete it if the profile is "
                     "gone)")
        # a figure renamed or removed from the spec (figure.png -> figure-acc.png): the old
        # image was kept beside the new one, off the front page, without a word
        stems = [figure_stem(parse_figure(raw), i) for i, (_, raw) in
                 enumerate(spec.figure_configs)]
        drawn = {output_name(spec, p, stem, "png") for p in spec.profiles for stem in stems}
        for fig in sorted(results_dir(spec, out).glob("*.png")):
            if fig.name not in drawn and not SET_TAG.search(fig.stem):
                warn(f"warning: {sid}: {fig.name} is drawn by no figure of the spec (a figure or "
                     "profile renamed or removed): not rebuilt, not on the front page "
                     "(delete it if the figure is gone)")
    for folder in orphan_folders(out):
        warn(f"warning: {folder}: no spec of the project writes this results folder (a spec "
             "renamed, moved to another paper or deleted, or one given by its path): its "
             "outputs are not rebuilt and not on the front page (delete the folder, or restore "
             "its spec)")
    return done


MAX_ORPHANS = 100  # folders named; a root of thousands of folders is not listed in full


def orphan_folders(out: Path | None = None) -> list[Path]:
    """The ``<results root>/<paper>/<id>`` folders holding a results table, report or run
    records of no spec of the project (results/huang2025/huang2025-old after a rename): `figures`
    rebuilt the others and left these, stale reports of 5 PASS, without a word."""
    root = Path(out or repo_root() / "results")
    known = {(s.paper, s.id) for s in _specs().values()}
    found: list[Path] = []
    try:
        papers = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
        for paper in papers:
            for folder in sorted(paper.iterdir()):
                if len(found) >= MAX_ORPHANS:
                    return found
                if (paper.name, folder.name) in known or not folder.is_dir() \
                        or folder.is_symlink():
                    continue
                if any(folder.glob("results*.csv")) or any(folder.glob("report*.md")) \
                        or (folder / "runs").is_dir():
                    found.append(folder)
    except OSError:  # an unreadable folder: nothing more to name
        pass
    return found


def training_time(csv: Path, profile: str | None = None, spec=None) -> str:
    """Sum of the pack wall times of a results table (each row carries its pack's wall_s and
    pack_size; a run's time once, whatever labels it has rows under), e.g. '4 min'; '' when the
    table has no timings. ``profile``: only the rows of that profile are counted, as the report
    counts them (results.csv written while another profile was the default, whose report counts
    0 of 15 runs finished, was shown with that profile's '5 min')."""
    try:
        df = read_results(csv)
    except TableError as err:  # a damaged table (a merge's conflict markers): the front page
        # showed the spec's description in place of its time, without a word
        print(f"warning: {err} (its training time is not shown)", file=sys.stderr)
        return ""
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return ""
    if profile is not None and "profile" in df:
        df = df[df["profile"].astype(str) == profile]
    if spec is not None and profile is not None and not df.empty and "run_id" in df:
        # the rows `plot` and `export` take as the spec's runs, read as they read them
        # (``profile_table``, nothing written): another spec's table copied or linked in (its
        # profile column dropped) was timed as this spec's, '16 min' beside a report of 2, and
        # rows `plot` leaves out by a step the front page did not take (a run trained on data
        # replaced since) were timed; their warnings are `plot`'s and `export`'s to say
        from .export import _planned
        from .outputs import profile_table

        planned = _planned(spec, profile)
        store = open_store(spec, csv.parent.parents[1], readonly=True)
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                df = profile_table(spec, profile, csv.parent, planned, store).rows
            except (TableError, OSError):
                return ""
    if df.empty or "wall_s" not in df or "pack_size" not in df:
        return ""
    if "run_id" in df:  # a run under two labels has a row for each: its time counted twice
        df = df.drop_duplicates("run_id")
    w = pd.to_numeric(df["wall_s"], errors="coerce")
    n = pd.to_numeric(df["pack_size"], errors="coerce").where(lambda x: x > 0)
    total = float((w / n).sum(min_count=1))
    return "" if math.isnan(total) else human_seconds(total)


MAX_REPORT_BYTES = 16 << 20  # a report is a page of markdown


def _report_text(report: Path) -> str:
    """A report's text; '' when there is none or it is not a regular file of at most
    ``MAX_REPORT_BYTES`` (a FIFO in its place blocked `figures --no-rebuild` for ever)."""
    try:
        return read_small(report, MAX_REPORT_BYTES, follow_links=True).decode("utf-8", "replace")
    except OSError:
        return ""


def _verdicts(report: Path) -> str:
    """The report's verdict line ('5 PASS, 0 FAIL, 0 MISSING, 0 UNTESTED'); '' with a warning
    when it does not count the report's own claim lines (`- **PASS** ...`): the line edited by
    hand was shown on the front page as it stood. (A claim line edited with it is not told
    apart without rebuilding: `figures` without --no-rebuild writes every report again.)"""
    text = _report_text(report)
    m = _VERDICTS.search(text)
    if not m:
        return ""
    said = m.group(1).strip()
    lines = [x.group(1) for x in _CLAIM_LINE.finditer(text)]
    counted = ", ".join(f"{lines.count(k)} {k}" for k in CLAIM_VERDICTS)
    if said != counted:
        print(f"warning: {report}: its verdict line ({said}) does not count its claims "
              f"({counted}): edited by hand? its verdicts are not on the front page; `ssmrepro "
              "figures` (without --no-rebuild) writes the report again", file=sys.stderr)
        return ""
    return said


def _unfinished(report: Path) -> str:
    """'K of N runs finished' when the report counts fewer finished runs than expected, else ''
    (the front page called a profile trained 1 of 30 runs 'quick results', with no word)."""
    m = _FINISHED.search(_report_text(report))
    if m is None or int(m.group(2)) >= int(m.group(1)):
        return ""
    return f"{m.group(2)} of {m.group(1)} runs finished"


def _of_other_profile(spec, root: Path, prof: str) -> bool:
    """Whether ``prof``'s report (report.md, report-<prof>.md) is another profile's, with a
    warning: left from before the spec's default profile changed, `figures --no-rebuild` showed
    quick's report.md, its verdicts and figures, as the new default smoke's, without a word."""
    rep = root / output_name(spec, prof, "report", "md")
    m = _PROFILE.search(_report_text(rep))
    if m is None or m.group(1) == prof:
        return False
    print(f"warning: {spec.id}: {rep.name} is a report of profile {m.group(1)}, not {prof} (left "
          "from before the spec's profiles changed): its verdicts and figures are not on the "
          "front page; `ssmrepro figures` (without --no-rebuild) rebuilds them", file=sys.stderr)
    return True


def _describe(t: Target, spec, out: Path | None, base: Path) -> None:
    """Fill ``t`` from the spec's results folder, read while no build writes it
    (``folder_lock``): its reports, tables and figures are read one after another (a report
    three times), and a `plot` or `run` writing between the reads gave a row of one build's
    verdicts beside another's count of runs finished."""
    root = results_dir(spec, out)
    with folder_lock(root, "writing the tables, figures and reports of"):
        _describe_folder(t, spec, out, base, root)


def _describe_folder(t: Target, spec, out: Path | None, base: Path, root: Path) -> None:
    default = spec.default_profile
    files = dict((p, f) for p, f in result_files(spec, out))
    stale = {p for p in files if _of_other_profile(spec, root, p)}
    if "long" in files:
        t.status = "long results"
    elif files and set(files) <= {"smoke"}:
        t.status = "smoke"
    elif files:  # the default's table or, beside another default (paper), quick's: 'smoke'
        t.status = "quick results"  # called a profile with quick's table 'smoke-profile only'
    else:
        t.status = "spec only"
    if default in files and default not in stale:
        t.verdicts = _verdicts(root / "report.md")
        t.quick_time = training_time(files[default], default, spec)
    desc = spec.profiles[default].description  # the profile timed (quick's was shown for all)
    if not t.quick_time and desc:
        short = desc if len(desc) <= 60 else desc[:57].rsplit(" ", 1)[0] + " ..."
        t.quick_time = f"({md_cell(short)})"

    def rel(p: Path) -> str:
        try:
            return p.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            return p.as_posix()

    # the figures the spec's profiles write (a profile renamed since, long -> longer, left its
    # figure-long.png listed among the default profile's figures)
    stems = [figure_stem(parse_figure(raw), i) for i, (_, raw) in enumerate(spec.figure_configs)]
    for prof in (p for p in files if p not in stale):
        suffix = "" if prof == default else f"-{prof}"
        # every figure the spec draws, named ones too (`name: curves`: only figure*.png were
        # listed, so curves.png and cooper2026-fig13's last.png were on no front page)
        for fig in sorted({root / output_name(spec, prof, stem, "png") for stem in stems}):
            if fig.is_file():
                t.links.append((fig.stem, rel(fig)))
        rep = root / f"report{suffix}.md"
        if rep.exists():
            t.links.append((rep.stem, rel(rep)))
        if _unfinished(rep):
            t.unfinished.append(f"{prof}: {_unfinished(rep)}")
        # '; long: ...' where the default has none; not when long is the default (its verdicts
        # were shown twice, '5 PASS, 1 FAIL; long: 5 PASS, 1 FAIL')
        if prof == "long" and prof != default and rep.exists():
            t.verdicts = "; ".join(v for v in (t.verdicts, f"long: {_verdicts(rep)}") if v)


def checked_catalogue() -> tuple[list[dict], dict[str, object]]:
    """(the catalogue's target rows, the specs by id); SpecError when a row's id differs only in
    case from a spec's, or its paper, alias or tier contradicts its spec's (`figures` checks this
    before rebuilding anything)."""
    _, rows = catalogue()
    broken: list[str] = []
    specs = _specs(broken)
    if broken:  # it was left out without a word: not rebuilt, 'not specified' on the front page
        raise SpecError(broken)
    folded = {sid.casefold(): sid for sid in specs}
    slips = [f"{experiments_dir() / CATALOGUE}: targets.{i}.id: {row['id']!r} differs only in "
             f"case from the spec id {folded[row['id'].casefold()]!r} (the front page listed it "
             "as a target without a spec, beside the spec)" for i, row in enumerate(rows)
             if row["id"] not in specs and row["id"].casefold() in folded]
    for i, row in enumerate(rows):  # the spec is what runs: a row that contradicts it listed
        # huang2025-fig1 under koren2026, or with huang2025-tab1's alias (which runs that spec)
        spec = specs.get(row["id"])
        for key in ("paper", "alias", "tier") if spec is not None else ():
            if key in row and row[key] != getattr(spec, key) and not (
                    key == "alias" and row[key] is None):
                slips.append(f"{experiments_dir() / CATALOGUE}: targets.{i}.{key}: "
                             f"{row[key]!r}, but the spec {spec.id} says "
                             f"{getattr(spec, key)!r} (the front page listed it so)")
    if slips:
        raise SpecError(slips)
    return rows, specs


def targets(out: Path | None = None, base: Path | None = None) -> list[Target]:
    """Every catalogue target (plus any spec not in the catalogue), described."""
    base = base or Path(out or repo_root() / "results")
    rows, specs = checked_catalogue()
    ts = []
    for row in rows:
        t = Target(row["id"], row.get("alias"), row["paper"], int(row["tier"]), row.get("what", ""))
        spec = specs.pop(t.id, None)
        if spec is not None:
            t.spec = spec
            t.alias = spec.alias or t.alias
            _describe(t, spec, out, base)
        ts.append(t)
    for sid, spec in specs.items():  # specs the catalogue does not list
        t = Target(sid, spec.alias, spec.paper, spec.tier, shown_title(spec), spec)
        _describe(t, spec, out, base)
        ts.append(t)
    return ts


def check_front_link(out: Path | None = None) -> None:
    """``LinkOutside`` (exit 2) when ``<results root>/README.md`` is a symbolic link leading
    outside the results root, as a spec's own outputs are refused (``Store.check_links``): the
    front page replaced such a link with a regular file, exit 0, where a spec's report linked
    the same way was refused. A link that stays inside is fine (replaced, as theirs are)."""
    root = Path(out) if out else repo_root() / "results"
    link = root / "README.md"
    if not link.is_symlink():
        return
    try:
        inside = link.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a link loop
        inside = False
    if not inside:
        raise LinkOutside(f"{link} is a symbolic link to {os.readlink(link)}, outside the results "
                          f"folder {root}: ssmrepro writes only inside --out; remove the link "
                          "(or point --out at the folder it leads to)")


def front_page(out: Path | None = None, dest: Path | None = None) -> Path:
    """Write ``<results root>/README.md`` (or ``dest``): the table of every target."""
    root = Path(out) if out else repo_root() / "results"
    if dest is None:
        check_front_link(out)
    dest = dest or root / "README.md"
    ts = targets(out, base=dest.parent)
    titles, _ = catalogue()
    counts = {s: sum(t.status == s for t in ts) for s in STATUSES}
    lines = [
        "# ssmrepro results",
        "",
        "Every figure and table of the five papers, one row each (`experiments/catalogue.yaml`). "
        "Rebuilt from the committed results by `make figures` (no training); `ssmrepro run <id>` "
        "trains a target, `ssmrepro verify <id>` prints its verdicts.",
        "",
        f"{len(ts)} targets: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".",
        "",
        "Status: *not specified* (no spec yet), *spec only* (no committed results), *smoke* "
        "(smoke-profile results only), *quick results* (the default profile, ≤ 30 min on 2 CPU "
        "cores), *long results* (also the ≤ 3 h profile). Verdicts count the spec's claims "
        "(PASS / FAIL / MISSING / UNTESTED). Training time: sum of the pack wall times in the "
        "default profile's results.csv (measured on shared 2-core CPUs), else the profile's own "
        "description.",
    ]
    for paper in dict.fromkeys(t.paper for t in ts):
        lines += ["", f"## {paper} — {titles.get(paper, '')}".rstrip(" —"), "",
                  "| id | alias | tier | status | verdicts | training time | outputs |",
                  "|---|---|---|---|---|---|---|"]
        for t in (t for t in ts if t.paper == paper):
            links = ", ".join(f"[{text}]({path})" for text, path in t.links) or "—"
            what = f"<br>{md_cell(t.what)}" if t.what and t.status == "not specified" else ""
            status = t.status + (f" ({'; '.join(t.unfinished)})" if t.unfinished else "")
            lines.append(f"| {t.id}{what} | {t.alias or ''} | {t.tier} | {status} | "
                         f"{t.verdicts or '—'} | {t.quick_time or '—'} | {links} |")
    remove_dead_temps(dest.parent, dest.name)  # of a `figures` killed while it wrote this page
    atomic_write_text(dest, "\n".join(lines) + "\n")  # replaces a link, never writes through
    return dest
