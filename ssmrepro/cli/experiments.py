"""Tool (cli): the experiment commands — list, show, validate, run, plot, verify, export,
list-models, list-tasks, list-figures, list-checks, list-spec, bench.

Thin by design: parse arguments, call the stage functions, print. Errors go through the boundary
in ``cli.app`` (exit 2 for bad input, 1 for runs that did not finish). ``--json`` prints one JSON
document on stdout (progress goes to stderr); ``--set key=value`` overrides a config field for
every run (typed and validated like the YAML; it changes the run ids). ``--out``, ``--device``
and ``--workers`` default to $SSMREPRO_OUT, $SSMREPRO_DEVICE and $SSMREPRO_WORKERS.
"""

from __future__ import annotations

import math
import shlex
import time
from pathlib import Path

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from ..kernels.backend import (
    DEVICE_EXPECTED,
    DEVICE_NAME,
    backend_for_dtypes,
    backend_problem,
    select_backend,
    select_device,
)
from ..spec import (
    SpecError,
    find_spec,
    id_taken,
    index_problems,
    load_project_spec,
    load_spec,
    shown_title,
    spec_paths,
)
from ..util import doc_summary, docstring, error_line, human_seconds, short_name, whole_number
from .app import (
    PLANNED,
    RESUME,
    command,
    console,
    echo,
    err_console,
    fail,
    file_value,
    path_value,
    print_json,
    print_table,
)

PROFILE_HELP = ("a profile of the spec: smoke | quick | long | paper, or one of its own (`show` "
                "lists them; default: the spec's)")

# the default is the project's results/, not ./results (from a sub-folder, or with
# $SSMREPRO_ROOT set, the help's "./results" named a folder that nothing was written to)
OUT_HELP = ("results root (default: <project>/results, the project being $SSMREPRO_ROOT, "
            "else the current folder or the nearest above it holding experiments/ and "
            "ssmrepro/; env SSMREPRO_OUT)")
SET_HELP = ("override a config field for every run, typed like the YAML: --set model.d_model=32 "
            "--set 'train.betas=[0.9, 0.98]' (repeatable; part of the run ids; outputs are "
            "tagged -set-<hash>)")
JSON_HELP = "print one JSON document on stdout instead of tables"


def _out_option():
    return typer.Option(None, "--out", envvar="SSMREPRO_OUT", help=OUT_HELP, metavar="DIR",
                        parser=path_value)


def _set_option():
    return typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP)


def _spec(name: str):
    return find_spec(name)


def _overrides(items: list[str] | None) -> dict | None:
    from ..sweep import parse_overrides

    return parse_overrides(items) if items else None


def _effective(spec, profile: str, overrides: dict | None, say: bool = True) -> dict | None:
    """The ``--set`` keys that change a run of ``profile`` (``sweep.effective_overrides``);
    with ``say``, a note names those that change none (their outputs are the profile's own,
    untagged: they were a `-set-<hash>` copy of them)."""
    from ..sweep import effective_overrides, overrides_text

    kept = effective_overrides(spec, profile, overrides)
    idle = {k: v for k, v in (overrides or {}).items() if k not in (kept or {})}
    if say and idle:
        err_console.print(f"note: {escape(overrides_text(idle))}: every run of profile "
                          f"{escape(profile)} already has this value (no run changes): "
                          + ("the outputs are the profile's own, untagged" if not kept else
                             f"the outputs are those of {escape(overrides_text(kept))}"),
                          highlight=False, soft_wrap=True)
    return kept


def _root(spec, out: Path | None) -> Path:
    from ..engine import results_dir

    return results_dir(spec, out)


def _write_root(out: Path | None) -> None:
    """Refuse a ``--out`` that is the project folder or inside its experiments/ or package
    (``util.source_tree_problem``), exit 2, before anything is written there."""
    from ..util import source_tree_problem

    why = source_tree_problem(out) if out is not None else None
    if why:
        fail([f"--out {out}: {why}"])


def _read_root(out: Path | None, say_missing: bool = False) -> None:
    """Check the results root that ``list``, ``show`` and ``run --dry-run`` read from: a file,
    FIFO or link loop there is ``cannot use <root>: a file, not a folder`` (exit 2; it read as
    a folder of 0 runs done, exit 0). A missing one is no error (nothing was trained there yet:
    0 runs done is true); ``say_missing``: one line says so."""
    from ..util import folder_problem, repo_root

    root = out if out is not None else repo_root() / "results"
    why = folder_problem(root)
    if why == "no such folder":
        if say_missing:
            err_console.print(f"note: {escape(str(root))} does not exist yet (no run was "
                              "trained there)", highlight=False, soft_wrap=True)
    elif why:
        fail([f"cannot use {root}: {why} (the results root; --out)"])


@command(name="list")
def list_cmd(
    out: Path | None = _out_option(),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    profile: str | None = typer.Option(None, help="status of this profile (default: each "
                                       "spec's default profile)"),
) -> None:
    """All experiment specs with alias, tier and status of their default profile, or of
    ``--profile`` (models and mixers: ``ssmrepro list-models``)."""
    from ..engine import open_store
    from ..store import output_name
    from ..sweep import expand, unique_runs

    t = Table("id", "alias", "tier", "title", "status")
    rows = []
    paths = _project_specs()
    _read_root(out, say_missing=True)
    if out is not None:
        from ..plots.export import misplaced_root

        why = misplaced_root(out)
        if why:  # `--out results/huang2025`: every spec listed with 0 runs done
            fail([f"cannot use {out}: {why} (the results root; --out)"])
    for p in paths:
        try:
            s = load_project_spec(p)
            shown = s.default_profile if profile is None else profile
            row = {"id": s.id, "alias": s.alias, "paper": s.paper, "tier": s.tier,
                   "title": shown_title(s), "profile": shown, "profiles": list(s.profiles)}
            if shown not in s.profiles:  # --profile quick of a spec without one
                t.add_row(s.id, escape(s.alias or ""), str(s.tier), escape(shown_title(s)),
                          f"[dim]no profile {escape(shown)}[/]")
                rows.append({**row, "runs": None, "done": None, "results_csv": None,
                             "valid": True})
                continue
            runs = unique_runs(expand(s, shown))  # a run shared by two labels is one run, as
            # `run` and `run --dry-run` count it (koren2026-fig12 quick: 17 listed, 15 trained)
            st = open_store(s, out, readonly=True)
            done = sum(st.is_done(r.run_id) for r in runs)
            _store_warnings(st)
            table = output_name(s, shown, "results", "csv")
            committed = (st.root / table).exists()
            status = f"{escape(shown)}: {done}/{len(runs)} runs"
            if done == 0 and committed:
                status += f" (committed {table})"
            t.add_row(s.id, escape(s.alias or ""), str(s.tier), escape(shown_title(s)), status)
            rows.append({**row, "runs": len(runs), "done": done, "results_csv": committed,
                         "valid": True})
        except SpecError as err:
            t.add_row(escape(p.stem), "", "", "[red]invalid spec[/]", escape(err.messages[0][:60]))
            rows.append({"id": p.stem, "valid": False, "errors": err.messages})
    if profile is not None and not any(r.get("runs") is not None for r in rows):
        known = sorted({p for r in rows for p in r.get("profiles", [])})
        fail([f"--profile {profile}: no spec has this profile (profiles: {', '.join(known)})"])
    if as_json:
        print_json(rows)
    else:
        # ids and aliases: what `run`, `show` take. The status folds as the title does: kept to
        # its words it took the width of the title, printed in 6-character pieces ('invali' over
        # 'd spec') in 80 columns (a count like `120/1440` can fold in a console that narrow)
        print_table(t, whole=(0, 1))


def _project_specs() -> list[Path]:
    """The project's spec files; none is a message (exit 2), not an empty table or a silent
    'validate --all' that validated nothing."""
    paths = spec_paths()
    if not paths:
        from ..spec import experiments_dir

        fail([f"{experiments_dir()}: no experiment specs here (<paper>/<id>.yaml); run from the "
              "project folder or set SSMREPRO_ROOT to it"])
    return paths


def _store_warnings(store) -> None:
    """Say what reading the store did: a record it quarantined (or ignored) made the run count
    as not done without a word (only `run` printed these)."""
    for w in store.to_say():
        err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)


@command(name="list-models")
def list_models() -> None:
    """Every registered model with its configuration fields and defaults."""
    from ..models import MODELS

    for name, entry in MODELS.items():
        _print_fields(f"{name}: {entry.summary.strip()}", entry.Config)
    from ..models.mixers import MIXERS

    console.print("\n[bold]Sequence mixers[/] (use inside seq_lm / cooper_hybrid blocks as "
                  "mixer: {name: ..., fields})")
    for name, entry in MIXERS.items():
        causal = "" if entry.causal else " [non-causal]"
        _print_fields(f"mixer {name}{causal}: {escape(entry.summary.strip())}", entry.Config)


def _print_fields(title: str, Config, skip: tuple[str, ...] = ("name",)) -> None:
    """One table of a registered entry's configuration fields under ``title`` (markup)."""
    from ..models import config_rows

    t = Table(title=title, title_justify="left")
    for col in ("field", "type", "default", "meaning"):
        t.add_column(col)
    for row in config_rows(Config, skip):
        t.add_row(*(escape(c) for c in row))
    print_table(t, whole=(0,), words=(2,))  # a default or type cut mid-word read as another


@command(name="list-tasks")
def list_tasks() -> None:
    """Every registered task with its configuration fields and defaults (a spec's `task:`)."""
    from ..tasks import TASKS

    for name, cls in TASKS.items():
        _print_fields(f"{name}: {escape(doc_summary(docstring(cls)))}", cls.Config)


@command(name="list-figures")
def list_figures() -> None:
    """Every figure kind with its fields and defaults (a spec's `figures:` entries, `kind:`)."""
    from ..plots import FIGURE_KINDS

    for name, k in FIGURE_KINDS.items():
        _print_fields(f"kind: {name}: {escape(k.summary)}", k.Config, skip=("kind",))


@command(name="list-checks")
def list_checks() -> None:
    """Every claim check with its fields and defaults (a spec's `claims:` entries, `check:`)."""
    from ..report.checks import CHECKS

    for name, k in CHECKS.items():
        _print_fields(f"check: {name}: {escape(k.summary)}", k.Config, skip=("check",))


def spec_sections() -> list[tuple[str, type]]:
    """(where, model) of every mapping a spec file holds, in the order of its keys: the file
    itself, then each section its fields' types nest (``sweep[]``, ``sweep[].cases[]``,
    ``profiles.<name>``, ``aggregate.select``, ...), and the two mappings the spec holds
    untyped but reads through a model: ``train`` (the run's train config) and each ``claims``
    entry's keys common to every check, and ``figure`` and each ``figures`` entry's common to
    every figure kind. Found through the models' field types, so a field added
    to any of them is listed."""
    import typing
    from types import UnionType

    from pydantic import BaseModel

    from ..plots.registry import FigureConfig
    from ..report.checks import CheckConfig
    from ..spec import Spec
    from ..sweep.config import TrainConfig

    # (the keys every figure kind has, under `figure:` and each `figures` entry: a kind's own
    # are list-figures'; nothing listed name, title, metric once for all kinds)
    linked = {(Spec, "train"): ("", TrainConfig), (Spec, "claims"): ("[]", CheckConfig),
              (Spec, "figure"): ("", FigureConfig), (Spec, "figures"): ("[]", FigureConfig)}

    def nested(t, at: str = "") -> list[tuple[str, type]]:
        origin, args = typing.get_origin(t), typing.get_args(t)
        if origin is typing.Annotated:
            return nested(args[0], at)
        if origin in (typing.Union, UnionType):
            return [x for a in args for x in nested(a, at)]
        if origin in (list, tuple) and args:
            return nested(args[0], at + "[]")
        if origin is dict and len(args) == 2:
            return nested(args[1], at + ".<name>")
        if isinstance(t, type) and issubclass(t, BaseModel):
            return [(at, t)]
        return []

    out: list[tuple[str, type]] = []

    def walk(where: str, model: type) -> None:
        out.append((where, model))
        for name, f in model.model_fields.items():
            link = linked.get((model, name))
            for at, sub in [link] if link else nested(f.annotation):
                here = f"{where}.{name}{at}" if where else f"{name}{at}"
                k = next((i for i, (_, m) in enumerate(out) if m is sub), None)
                if k is None:
                    walk(here, sub)
                elif link:  # one mapping in two places (figure, figures[]): one section
                    out[k] = (f"{out[k][0]}, {here}", sub)

    walk("", Spec)
    return out


@command(name="list-spec")
def list_spec() -> None:
    """Every section of a spec file with its keys, types, defaults and meaning (the fields of
    `task:`, `model:`, `figure:` and of each check: list-tasks, list-models, list-figures,
    list-checks)."""
    for where, model in spec_sections():
        what = escape(doc_summary(docstring(model) or ""))
        title = "spec file (top level)" if not where else f"section: {escape(where)}"
        _print_fields(f"{title}{': ' + what if what else ''}", model, skip=())
    from ..theory import TABLES

    for name, table in TABLES.items():  # what analytic.table names, and its params / grid keys
        _print_fields(f"analytic.table: {name}: {escape(table.summary)}; metrics "
                      f"{', '.join(table.metrics)}", table.Params, skip=())


def _table_rows(spec, profile: str, out: Path | None, overrides: dict | None, runs: list,
                todo: list, store) -> dict:
    """run id -> the committed results row of each run of ``todo`` (runs without a record), as
    `plot` reads the table (``committed_rows``)."""
    if not todo or spec.analytic is not None:
        return {}
    from ..plots.outputs import committed_rows
    from ..sweep import overrides_tag

    return committed_rows(spec, profile, _root(spec, out), runs, todo, store,
                          overrides_tag(overrides, runs))


def _row_status(row) -> tuple[str, dict]:
    """(status, metrics) of a committed results row, as a record gives them."""
    from ..store import is_metric_column, metric_name

    metrics = {}
    for k, v in row.items():
        if is_metric_column(str(k)) and v is not None and v == v:
            try:
                metrics[metric_name(str(k))] = float(v)
            except (TypeError, ValueError):
                continue
    status = row.get("status")
    return ("ok" if status is None or status != status else str(status)), metrics


@command()
def show(
    name: str = typer.Argument(..., help="experiment id, alias or spec file (.yaml)"),
    profile: str | None = typer.Option(None, help=PROFILE_HELP),
    out: Path | None = _out_option(),
    set_: list[str] | None = _set_option(),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Resolved configuration of an experiment and its run table."""
    from ..engine import open_store
    from ..sweep import expand, set_dotted

    spec = _spec(name)
    profile = spec.default_profile if profile is None else profile  # "" is no profile
    overrides = _overrides(set_)
    runs = expand(spec, profile, overrides=overrides)
    _read_root(out)
    base = {"task": dict(spec.task), "model": dict(spec.model), "train": dict(spec.train)}
    for k, v in spec.profiles[profile].set.items():
        set_dotted(base, k, v)
    for k, v in (overrides or {}).items():
        set_dotted(base, k, v)
    _derived_into(base, spec, runs)
    if spec.analytic is not None:  # no task, model or training: it printed three empty
        # sections and an empty run table, never the table, parameters and grid it computes
        base = {"analytic": spec.analytic.model_dump(mode="json")}
    store = open_store(spec, out, readonly=True)
    found = {r.run_id: store.record_status(r.run_id) for r in runs}
    table = _table_rows(spec, profile, out, _effective(spec, profile, overrides, say=False), runs,
                        [r for r in runs if found[r.run_id][1] is None], store)
    if as_json:
        rows = []
        for r in runs:
            rec, status = found[r.run_id]
            metrics, source = (rec or {}).get("metrics") or {}, "record" if rec else None
            if status is None and r.run_id in table:  # a committed row, no record
                (status, metrics), source = _row_status(table[r.run_id]), "table"
            rows.append({"index": r.index, "run_id": r.run_id, "label": r.label,
                         "coords": r.typed_coords(), "seed": r.seed, "status": status,
                         "source": source, "metrics": metrics, "config": r.config()})
        _store_warnings(store)
        print_json({"id": spec.id, "alias": spec.alias, "paper": spec.paper, "title": shown_title(spec),
                    "claim": spec.claim, "profile": profile, "profiles": list(spec.profiles),
                    "description": spec.profiles[profile].description, "overrides": overrides or {},
                    "config": base, "runs": rows})
        return
    console.print(f"[bold]{spec.id}[/] ({spec.alias or '-'}) — {escape(shown_title(spec))}\nclaim: "
                  f"{escape(spec.claim)}")
    console.print(f"profile [cyan]{escape(profile)}[/]: "
                  f"{escape(spec.profiles[profile].description)}")
    console.print(f"[dim]profiles: {escape(', '.join(spec.profiles))} (--profile NAME)[/]")
    console.print(yaml.safe_dump(base, sort_keys=False).rstrip(), markup=False)
    if spec.analytic is not None:
        rows = spec.analytic.n_rows
        console.print(f"no runs: table {escape(spec.analytic.table)} is computed from theory, "
                      f"one row per grid point ({rows} row{'s' if rows != 1 else ''}; "
                      "`ssmrepro run` or `plot` writes it)")
        return
    t = Table("#", "run_id", "label", "coords", "seed", "status", "test.acc")
    n_table = 0
    for r in runs[:200]:
        rec, status = found[r.run_id]
        acc = ((rec or {}).get("metrics") or {}).get("test.acc")
        if status is None and r.run_id in table:
            status, metrics = _row_status(table[r.run_id])
            status, acc, n_table = f"{status} (table)", metrics.get("test.acc"), n_table + 1
        coords = r.coords_text()
        t.add_row(str(r.index), r.run_id, escape(r.label), escape(coords), str(r.seed),
                  escape("-" if status is None else str(status)),
                  "-" if acc is None or acc != acc else f"{acc:.3f}")
    # a seed or an accuracy whole, the other cells broken only between words: at 20 columns
    # seed 123456789 was folded as `123456` over `789`, another seed to a reader, and a coords
    # value such as `lr=0.0003` could be as `lr=0.0` over `003`
    print_table(t, whole=(0, 1, 4, 6), words=(2, 3, 5))
    if n_table:
        console.print(f"[dim](table): {n_table} run(s) without a record in this store, read from "
                      f"the results tables (run records are not in git)[/]")
    _store_warnings(store)
    if len(runs) > 200:
        console.print(f"... {len(runs) - 200} more runs")


def _derived_into(base: dict, spec, runs: list) -> None:
    """Put each ``derived`` value into ``show``'s configuration as the runs hold it: the one
    value they share, else the expression and its values (koren2026-fig10 showed the spec's
    `d_state: 60` where its 2-layer runs train with `60 // model.n_layers` = 30)."""
    from ..sweep import set_dotted

    for key, text in (spec.derived or {}).items():
        values = []
        for r in runs:
            v = r.config()
            for part in key.split("."):
                v = v.get(part) if isinstance(v, dict) else None
            if v is not None and v not in values:
                values.append(v)
        shown = ", ".join(map(str, values[:8])) + (f", ... ({len(values)} values)"
                                                    if len(values) > 8 else "")
        if values:  # (at most 8 values: a sweep of 10,000 points gave a line of each)
            set_dotted(base, key, values[0] if len(values) == 1 else
                       f"derived: {text} ({shown} over the runs)")


def _data_env_problems(spec, runs) -> list[str]:
    """'file: ...' where ``$SSMREPRO_DATA`` cannot be the data root (``util.data_root``: a
    stray space or line break naming an absent folder) and a run of the spec reads its data:
    `validate` said ok and only `run` refused it. A spec of synthetic tasks never reads it."""
    from ..tasks import DataUnavailable, build_task
    from ..util import data_root

    try:
        data_root()
        return []
    except DataUnavailable as err:
        why = str(err)
    for task in {r.task.model_dump_json(): r.task for r in runs}.values():
        try:
            build_task(task)
        except DataUnavailable:  # the data root is read: the env's value is used
            return [f"{spec.path or spec.id}: task {task.name}: {why}"]
        except Exception:  # noqa: BLE001 (a task its config refuses: reported elsewhere)
            continue
    return []


@command()
def validate(
    name: str | None = typer.Argument(None, help="experiment id, alias or file"),
    all_: bool = typer.Option(False, "--all", help="validate every shipped spec"),
    set_: list[str] | None = _set_option(),
) -> None:
    """Check spec files (schema, every profile's runs, derived values, figures, claims)."""
    from ..plots import (
        aggregate_metric_problems,
        seed_title_warnings,
        validate_outputs,
        where_problems,
    )
    from ..sweep import expand, layer_spelling_problems, unique_runs
    from ..sweep.expand import MAX_SPEC_RUNS
    from ..train import model_problems

    if not name and not all_:
        fail(["give an experiment id or --all"])
    if name and all_:  # `validate --all my.yaml` validated the project's specs, never my.yaml
        fail([f"give an experiment id ({name}) or --all, not both"])
    paths = _project_specs() if all_ else [None]
    errors: list[str] = index_problems()[1] if all_ else []
    overrides = _overrides(set_)
    for p in paths:
        try:
            spec = load_spec(p) if p else find_spec(name)  # type: ignore[arg-type]
            runs = {}
            for prof in spec.profiles:
                # against the data here too, as `run` checks it (`figures`, `plot`, `verify`,
                # `show` read records: a dataset here smaller than a profile's train_size is
                # no reason to refuse them)
                runs[prof] = expand(spec, prof, overrides=overrides, data=True)
                total = sum(map(len, runs.values()))
                if total > MAX_SPEC_RUNS:  # each profile within its bound, together unbounded
                    raise SpecError([f"{spec.path or spec.id}: profiles: {', '.join(runs)} expand "
                                     f"to {total:,} runs, more than the {MAX_SPEC_RUNS:,} of all "
                                     "the profiles of a spec together (`validate` checks them "
                                     "at once); move the largest grids to a spec of their own"])
            # distinct runs, as `run` trains and `run --dry-run` counts them (a run shared by two
            # labels was counted twice: cooper2026-fig12's paper '2871 runs' are 2,475)
            counts = {prof: len(unique_runs(r)) for prof, r in runs.items()}
            every = [r for rs in runs.values() for r in rs]
            bad = validate_outputs(spec, every) or where_problems(spec, every)
            bad += aggregate_metric_problems(spec, every)  # tets.acc: an empty column
            bad += [f"{spec.path or spec.id}: [profile {prof}] {m}" for prof, rs in runs.items()
                    for m in model_problems(rs)]  # a shape the model's blocks refuse
            bad += [f"{spec.path or spec.id}: {m}" for m in layer_spelling_problems(every)]
            bad += _data_env_problems(spec, every)
            taken = [why] if (why := id_taken(spec)) else []
            if not all_:  # `validate X` of a project spec whose alias another spec also has
                # (or has but for case) said ok; `validate --all` gives these for every spec
                here = Path(spec.path).resolve() if spec.path is not None else None
                taken += [m for m in index_problems()[1]
                          if here in {Path(f).resolve() for f in m.split(": ", 1)[0].split(", ")}]
            if bad or taken:
                raise SpecError(bad + taken)
            for w in seed_title_warnings(spec):  # drawn, possibly not as the figure draws
                err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False,
                                  soft_wrap=True)
            console.print(f"[green]ok[/] {spec.id}: " + ", ".join(f"{k} {v} runs"
                                                                 for k, v in counts.items()))
            for prof, rs in runs.items():
                for m in _warmup_notes(rs):
                    err_console.print(f"note: {escape(spec.id)}: profile {escape(prof)}: "
                                      f"{escape(m)}", highlight=False, soft_wrap=True)
        except SpecError as err:
            errors += err.messages
    if errors:
        fail(errors)


def _warmup_notes(runs: list) -> list[str]:
    """What a profile's runs whose warm-up (``train.schedule.warmup_steps``) lasts as long as
    their training or longer do: their learning rate never reaches ``train.lr`` (6 steps of a
    100-step warm-up end at 5% of it; no word was said). One line per (warm-up, steps) pair,
    at most three, then a count; a note, not a refusal (a spec may mean it)."""
    from ..optim import LRSchedule
    from ..sweep import unique_runs

    seen: dict[tuple[int, int, int], int] = {}
    for r in unique_runs(runs):
        s, total = r.train.schedule, r.train.total_steps
        if 0 < total <= s.warmup_steps:  # (a run of no step, a constructed model, has no lr)
            # the last step's lr as training computes it (a min_lr lifts the warm-up onto
            # [min_lr, lr]: 6 steps of 100 from a min_lr of lr/2 end at 52%, said as 5%)
            last = float(LRSchedule([r.train.lr], [s], [total], [s.min_lr])
                         .rows(total - 1, total)[0, 0])
            if last >= r.train.lr * (1 - 1e-9):  # a warm-up flat at lr (warmup_start 1, a
                # min_lr of lr; min_lr + (lr - min_lr) may be a rounding below): it was said
                continue  # never to reach lr ('100% of it')
            # in whole percent, rounded down: 199 steps of a 200-step warm-up read '100% of it'
            # beside 'never reaches' (and under 1% as such: 40 steps of a million read '0%')
            reached = math.floor(last / r.train.lr * 100 + 1e-9)
            key = (s.warmup_steps, total, reached)
            seen[key] = seen.get(key, 0) + 1
    out = [f"{n} run{'s warm' if n > 1 else ' warms'} up over {w:,} steps "
           f"(train.schedule.warmup_steps) but train {t:,}: the learning rate never reaches "
           f"train.lr ({f'{reached}%' if reached else 'under 1%'} of it at the last step)"
           for (w, t, reached), n in list(seen.items())[:3]]
    if len(seen) > 3:
        out.append(f"and {sum(list(seen.values())[3:])} more runs of other warm-ups or lengths "
                   "whose learning rate never reaches train.lr")
    # a decay that the warm-up (ending within the run) and the hold leave no step of: the
    # cosine or linear schedule trained at the constant train.lr (`{kind: cosine, hold_steps:
    # 1000}` over 40 steps), without a word
    held: dict[tuple[str, int, int, int], int] = {}
    for r in unique_runs(runs):
        s, total = r.train.schedule, r.train.total_steps
        if s.kind != "constant" and 0 <= s.warmup_steps < total and s.hold_steps and \
                s.warmup_steps + s.hold_steps >= total - 1:  # the hold reaches the last step
            # (a decay over 1e9 steps, or to a min_lr of lr, after a hold of 1 step was said
            # to be the hold's doing)
            # the last step's lr as training computes it (the decay's first step is at lr too)
            last = LRSchedule([r.train.lr], [s], [total], [s.min_lr]).rows(total - 1, total)
            if float(last[0, 0]) >= r.train.lr * (1 - 1e-6):
                key = (s.kind, s.warmup_steps, s.hold_steps, total)
                held[key] = held.get(key, 0) + 1
    out += [f"{n} run{'s hold' if n > 1 else ' holds'} train.lr after "
            f"{w:,} warm-up steps for {h:,} steps (train.schedule.hold_steps) but train"
            f"{'s' * (n == 1)} {t:,}: the {kind} decay never lowers the learning rate"
            for (kind, w, h, t), n in list(held.items())[:3]]
    if len(held) > 3:
        out.append(f"and {sum(list(held.values())[3:])} more runs of other holds or lengths "
                   "whose decay never begins")
    return out


def _refuse_device_of_env(ctx: typer.Context, device: str) -> None:
    """Refuse a ``--device`` that came from $SSMREPRO_DEVICE and is no device's name, naming the
    variable (`SSMREPRO_DEVICE=gpu`, blank, a line break of an env file): the refusal said
    `--device 'gpu': expected ...`, an option the command line did not give. Called where the
    device is used (`bench scans` takes no --device, and ignores the variable)."""
    if (getattr(ctx.get_parameter_source("device"), "name", "") == "ENVIRONMENT"
            and not DEVICE_NAME.fullmatch(device)):
        fail([f"$SSMREPRO_DEVICE={device!r} (the default of --device): {DEVICE_EXPECTED}"])


@command(interrupted=lambda options: PLANNED if options.get("dry_run") else RESUME)
def run(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="experiment id, alias or spec file (.yaml), e.g. keep-nth"),
    profile: str | None = typer.Option(None, help=PROFILE_HELP),
    backend: str = typer.Option("auto", help="auto | torch | cuda"),
    device: str = typer.Option("auto", envvar="SSMREPRO_DEVICE",
                               help="auto | cpu | cuda | cuda:N (env SSMREPRO_DEVICE)"),
    max_runs: int | None = typer.Option(None, min=1, help="train at most this many runs"),
    out: Path | None = _out_option(),
    workers: int | None = typer.Option(
        None, min=1, envvar="SSMREPRO_WORKERS", help="worker processes, each claiming packs "
        "(default and maximum: one per CPU core or GPU; env SSMREPRO_WORKERS; local engine)"),
    pack_size: int | None = typer.Option(
        None, min=1, max=4096, help="runs per pack (default: the fastest size --calibrate "
        "times, at most what memory holds; with --no-calibrate, what memory holds)"),
    set_: list[str] | None = _set_option(),
    engine: str = typer.Option("local", help="local (this machine) | ray (one Ray task per "
                               "pack; pip install -e '.[ray]')"),
    address: str | None = typer.Option(
        None, help="with --engine ray: the cluster, 'auto' (started by `ray start` here) or "
        "HOST:PORT (default: start a local Ray instance)"),
    cpus_per_pack: int = typer.Option(1, min=1, max=1024,
                                      help="with --engine ray on CPU: CPUs (threads) per pack task"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print runs, packs and a time estimate"),
    no_estimate: bool = typer.Option(False, "--no-estimate", help="with --dry-run: skip timing"),
    no_plot: bool = typer.Option(False, "--no-plot", help="skip the figures, summary, curves "
                                 "table, verdicts and report (results.csv is still written)"),
    calibrate: bool = typer.Option(
        True, "--calibrate/--no-calibrate", help="time candidate pack sizes and micro-batches per "
        "shape before training (cached per machine) instead of sizing packs by memory alone"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as one JSON document "
                                 "on stdout (progress goes to stderr)"),
) -> None:
    """Train an experiment's runs (resuming finished ones), then write CSV, figure and report."""
    from ..engine import ENGINES, RunSummary, run_experiment
    from ..engine import dry_run as plan_dry_run
    from ..engine.local import thread_override
    from ..plots import validate_outputs
    from ..sweep import expand

    try:
        thread_override()  # $SSMREPRO_THREADS, read by every worker: refuse a bad value now
    except ValueError as err:
        fail([str(err)])
    spec = _spec(name)
    profile = spec.default_profile if profile is None else profile  # "" is no profile
    overrides = _overrides(set_)
    if engine not in ENGINES:
        fail([f"--engine {engine!r}: expected {' or '.join(ENGINES)}"])
    if address is not None and engine != "ray":
        fail(["--address needs --engine ray"])
    if cpus_per_pack != 1 and engine != "ray":  # settings that would be quietly ignored
        fail(["--cpus-per-pack needs --engine ray (the local engine: --workers)"])
    if (engine == "ray" and workers is not None
            and getattr(ctx.get_parameter_source("workers"), "name", "") == "COMMANDLINE"):
        # Ray runs as many packs at once as its cluster has slots: --workers 2 was ignored
        # ($SSMREPRO_WORKERS, a default for the local engine, is left alone)
        fail(["--workers is an option of the local engine (--engine ray runs one task per "
              "pack on as many slots as the cluster has: --cpus-per-pack sets a task's CPUs)"])
    if (engine == "ray" and calibrate
            and getattr(ctx.get_parameter_source("calibrate"), "name", "") == "COMMANDLINE"):
        # the cost model times steps in this process, on this machine: the Ray engine sizes its
        # packs by the memory of the cluster's workers, and --calibrate was ignored without a word
        fail(["--calibrate is an option of the local engine (--engine ray sizes each pack by "
              "the memory of the cluster's workers, as --no-calibrate does: it cannot time "
              "steps on them)"])
    if no_estimate and not dry_run:
        fail(["--no-estimate needs --dry-run"])
    out_console = err_console if as_json else console
    _refuse_device_of_env(ctx, device)
    if engine == "ray" and not dry_run:  # the cluster's devices decide; the worker picks backend
        if not DEVICE_NAME.fullmatch(device):
            fail([f"--device {device!r}: {DEVICE_EXPECTED}"])
        if backend_problem(backend, device):  # every pack failed on the cluster with it
            fail([backend_problem(backend, device)])
        dev, be, why = device, backend, (f"device {device}, backend {backend} (resolved on the "
                                         "Ray cluster)")
    else:
        dev = select_device(device)
        be, why = select_backend(backend, dev)
    # checked against the data here, which the runs read (a Ray cluster's workers: their own)
    runs = expand(spec, profile, overrides=overrides, data=engine == "local" or dry_run)
    overrides = _effective(spec, profile, overrides)  # the same runs, without the idle keys
    bad = validate_outputs(spec, runs)
    if bad:
        fail(bad)
    dtypes = {r.train.dtype for r in runs or []}
    if engine == "ray" and not dry_run and "float64" in dtypes and be == "auto":
        be, why = "torch", (f"device {device}, backend torch (train.dtype float64: the CUDA "
                            "kernels have no float64)")
    be, why = backend_for_dtypes(be, why, backend, dtypes, dev)
    if id_taken(spec):  # it would write into the project spec's folder (refused by the dry
        # run too, as by `validate`: it planned runs that `run` then refused)
        fail([id_taken(spec)])
    if spec.analytic is None:  # (no device trains an analytic table)
        out_console.print(f"[dim]{escape(why)}[/]")
    if dry_run and spec.analytic is not None and not as_json:  # it said '0 runs, 0 done, 0
        # pending in 0 packs (largest 0); 0 run-steps to train' (--json's counts are right)
        console.print(f"{spec.id} {escape(f'[{profile}]')}: no runs: {_analytic_rows(spec)}, "
                      "written by `run` or `plot`")
        return
    if dry_run:
        _read_root(out)
        # the Ray engine never calibrates (its packs are sized by memory alone): the dry run
        # calibrated them here and could plan other packs than Ray trains
        d = plan_dry_run(spec, profile, out, dev, max_runs, pack_size, estimate=not no_estimate,
                         overrides=overrides,  # --no-calibrate: as run packs
                         calibrate=calibrate and engine == "local", backend=be,
                         workers=workers if engine == "local" else None, engine=engine,
                         runs=runs)
        ray_note = _ray_dry_run_note(dev, device, pack_size) if engine == "ray" else None
        if as_json:
            print_json({"id": spec.id, "profile": profile, "runs": d.total, "done": d.done,
                        "pending": d.pending, "left": d.total - d.done - d.pending,
                        "packs": len(d.packs), "largest_pack": d.largest,
                        "run_steps": d.run_steps, "estimate_s": d.estimate_s,
                        "estimate_how": d.estimate_how, "device": dev, "nominal": d.nominal,
                        "oversized": d.oversized, "untimed": d.untimed,
                        "untimed_runs": d.untimed_runs, "warnings": d.warnings,
                        "eval_chunks": d.eval_chunks, "workers": d.workers,
                        "engine": engine, "ray_note": ray_note})
            return
        for w in d.warnings:  # a record quarantined while counting the runs done: on stderr,
            # as every command's (it was among the plan's lines on stdout)
            err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
        # the workers the packs were sized for (CPU workers share one memory: a pack and its
        # evaluation chunk are sized to a share of it; it was said nowhere)
        sized = (f" sized for {d.workers} workers sharing the memory" if d.workers > 1 else
                 " sized for 1 worker" if engine == "local" and not dev.startswith("cuda")
                 and d.packs else "")
        console.print(f"{spec.id} {escape(f'[{profile}]')}: {d.total} runs, {d.done} done, "
                      f"{d.pending} pending in {len(d.packs)} packs (largest {d.largest}){sized}; "
                      f"{d.run_steps:,} run-steps to train{_left_line(d, max_runs)}")
        for line in d.planner:
            console.print(f"[dim]planner: {line}[/]", highlight=False)
        if ray_note:
            console.print(f"[yellow]Ray:[/] {escape(ray_note)}", highlight=False, soft_wrap=True)
        for line in d.nominal:  # an LRA dataset absent here: planned from its nominal shapes
            console.print(f"[yellow]nominal shapes:[/] {escape(line)}", highlight=False,
                          soft_wrap=True)
        for line in d.oversized:  # too large for this machine: priced, not trainable here
            console.print(f"[yellow]does not fit here:[/] {escape(line)}", highlight=False,
                          soft_wrap=True)
        for line in d.eval_chunks:  # evaluation batches too large for the memory: in chunks
            console.print(f"[yellow]evaluation in chunks:[/] {escape(line)}", highlight=False,
                          soft_wrap=True)
        for line in d.untimed:  # too large even to time one sequence: not in the estimate
            console.print(f"[red]not timed:[/] {escape(line)}", highlight=False, soft_wrap=True)
        if d.estimate_s is not None:
            part = (f"at least (the {d.pending - d.untimed_runs} of {d.pending} pending runs "
                    "that could be timed) " if d.untimed_runs else "")
            console.print(f"estimated wall-clock on {escape(dev)}: {part}{human_seconds(d.estimate_s)} (one "
                          f"worker; {d.estimate_how})")
        return
    from ..plots import output_paths, write_analytic_table
    from ..util import check_replaceable

    _write_root(out)
    for path in output_paths(spec, profile, _root(spec, out), overrides, figures=not no_plot):
        check_replaceable(path)  # a folder in its place failed after the whole sweep
    if spec.analytic is not None:  # its table is computed, no run to train: it printed '0 runs,
        # 0 already done, 0 to train in 0 packs ... on cpu, 1 worker' under a device and backend
        # line, then 'trained 0 runs in 0 packs' (and said 'table: - (no run has a record)', and
        # `--no-plot` wrote no results.csv at all, before that)
        t0 = time.monotonic()
        csv = write_analytic_table(spec, profile, _root(spec, out))
        s = RunSummary(0, 0, 0, 0, 0, 0, 0, time.monotonic() - t0, csv)
        out_console.print(f"[bold]{spec.id}[/] profile [cyan]{escape(profile)}[/]: computed "
                          f"{_analytic_rows(spec)} in {human_seconds(s.wall_s)}; table: "
                          f"{escape(str(csv))}")
    else:
        s = run_experiment(spec, profile, out, dev, be, max_runs, pack_size, workers,
                           out_console, calibrate=calibrate, overrides=overrides, engine=engine,
                           address=address, cpus_per_pack=cpus_per_pack, warn_console=err_console)
        parts = [f"trained {s.trained} runs in {s.packs} packs, {human_seconds(s.wall_s)} wall, "
                 f"{human_seconds(s.cpu_s)} CPU"]
        if s.elsewhere:
            parts.append(f"{s.elsewhere} finished by another process")
        if s.failed:
            parts.append(f"[red]{s.failed} failed[/]")
        if s.not_run:
            parts.append(f"[red]{s.not_run} not trained[/]")
        table = (escape(str(s.csv)) if s.csv is not None and s.csv.is_file()
                 else "- (no run has a record)")
        out_console.print("; ".join(parts) + f"; table: {table}")
        if s.early_stop_0:  # only the table's stop_step 0 showed it
            err_console.print(
                f"[yellow]warning:[/] {s.early_stop_0} of the runs trained met their early stop "
                "(train.early_stop) at step 0, before any training step: their numbers are of "
                "the untrained model (the report counts them); if that is not meant, make the "
                "threshold one the untrained model does not meet", highlight=False,
                soft_wrap=True)
    where = [*(["--engine", engine] if engine != "local" else []),
             *(["--address", address] if address is not None else []),
             *(["--device", device] if device != "auto" else []),
             *(["--backend", backend] if backend != "auto" else [])]
    if s.left:  # cut by --max-runs: exit 0 (asked for), but the profile is not finished
        again = _run_command(name, profile, out, set_, where)
        out_console.print(f"[yellow]{s.left} of {s.total} runs not trained yet[/] (--max-runs "
                          f"{max_runs}): continue with {escape(again)} (add --max-runs N to "
                          "train N more)", highlight=False, soft_wrap=True)
    for m in s.messages:
        err_console.print(f"[red]error:[/] {escape(error_line(m))}", highlight=False,
                          soft_wrap=True)
    summary = {"id": spec.id, "profile": profile, "overrides": overrides or {}, "engine": engine,
               "runs": s.total, "already_done": s.already_done, "trained": s.trained,
               "failed": s.failed, "elsewhere": s.elsewhere, "not_run": s.not_run,
               "left": s.left, "packs": s.packs, "wall_s": round(s.wall_s, 3),
               "csv": s.csv if s.csv is not None and s.csv.is_file() else None,  # as the line's '-'
               "ok": s.ok,
               "interrupted": s.interrupted, "messages": s.messages}
    if s.interrupted:
        if as_json:
            print_json(summary)
        err_console.print("interrupted — finished runs are saved; re-run the same command to "
                          "resume")
        raise typer.Exit(130)
    if not no_plot:
        res = _outputs(spec, profile, out, overrides, quiet=as_json,
                       rerun=_run_command(name, profile, out, set_, where))
        summary["outputs"] = _outputs_json(res)
    _say_edited(spec, name, profile, out, set_, no_plot)
    if as_json:
        print_json(summary)
    if not s.ok:
        if s.failed or s.not_run:
            err_console.print("[red]some runs did not finish[/]: re-run the same command to "
                              "retry them (finished runs are kept)")
        else:  # every run has its record, but a worker process was killed (memory?)
            err_console.print("[red]a worker process died[/] (the other workers trained every "
                              "run): look for what killed it, e.g. the kernel's OOM killer")
        raise typer.Exit(1)


def _say_edited(spec, name: str, profile: str, out: Path | None, set_: list[str] | None,
                no_plot: bool) -> None:
    """A warning when the spec file no longer says what ``spec`` (read when `run` started) says:
    edited while the runs trained, its tables, figures and report were written for the spec as
    it was (the claims, labels and thresholds before the edit, with the verdicts of those)
    without a word, as if of the file beside them. Comments and layout are no change."""
    if spec.path is None:
        return
    try:
        now = load_spec(spec.path)
    except SpecError as err:
        now, why = None, f"it no longer loads ({err.messages[0]})"
    if now is not None:
        if now.model_dump() == spec.model_dump():
            return
        why = "it was edited"
    what = ("the tables were" if no_plot else "the tables, figures and report were")
    plot_cmd = shlex.join(["ssmrepro", "plot", name, "--profile", profile,
                           *(["--out", str(out)] if out is not None else []),
                           *[a for kv in set_ or [] for a in ("--set", kv)]])
    again = ("rebuilds them from it as it is now" if now is not None else  # a plot of a
             # deleted or broken spec fails: it was named as if it rebuilt them
             "rebuilds them from it once it loads again (restore it, or fix it)")
    err_console.print(f"[yellow]warning:[/] {escape(str(spec.path))} changed while this command "
                      f"ran ({escape(why)}): {what} written for the spec as it was when it "
                      f"started; `{escape(plot_cmd)}` {again} (and `run` trains the runs an "
                      "edit adds)", highlight=False, soft_wrap=True)


def _analytic_rows(spec) -> str:
    """'table yu_thm3 from theory: 42 rows (one per grid point)'."""
    rows = spec.analytic.n_rows
    return (f"table {escape(spec.analytic.table)} from theory: {rows} "
            f"row{'s' if rows != 1 else ''} (one per grid point)")


def _ray_dry_run_note(dev: str, device: str, pack_size: int | None) -> str:
    """What `run --engine ray --dry-run` plans for: this machine (its device, its memory, its
    timings), which a Ray run's packs and time follow only in part."""
    if pack_size is not None:
        sized = f"packs of at most {pack_size} runs (--pack-size), as a Ray run packs them"
    elif dev.startswith("cuda"):
        sized = (f"packs sized by memory alone, as a Ray run sizes them, but by this machine's "
                 f"{dev} (half its free memory): a Ray run sizes them by a cluster worker's "
                 "GPU, so its packs can differ")
    else:
        sized = ("packs sized by memory alone (2 GiB per pack on CPU), as a Ray run on CPU "
                 "workers sizes them")
    auto = (f"; --device {device} is resolved here ({dev}): a Ray run resolves it on the "
            "cluster (its GPUs, where it has any, and other packs)" if device == "auto" else "")
    return (f"planned on this machine: {sized}{auto}; the estimate times them here, one pack "
            "at a time, not on the cluster's workers")


def _left_line(d, max_runs: int | None) -> str:
    """The runs `--max-runs` leaves for a later command: '4 runs, 0 done, 3 pending' did not
    add up, and read as if one run were done."""
    left = d.total - d.done - d.pending
    return (f"; {left} more not planned (--max-runs {max_runs}): a later run trains them"
            if left > 0 else "")


def _outputs(spec, profile: str, out: Path | None, overrides: dict | None = None,
             quiet: bool = False, rerun: str | None = None):
    from ..plots import build, validate_outputs
    from ..report import fmt_beside, paper_value_tally, verdict_counts
    from ..sweep import expand

    try:
        bad = validate_outputs(spec, expand(spec, profile, overrides=overrides))
    except SpecError as err:
        bad = err.messages
    if bad:
        fail(bad)
    if id_taken(spec):  # writing would replace the project spec's tables, figures and report
        fail([id_taken(spec)])
    _write_root(out)
    res = build(spec, profile, _root(spec, out), overrides, rerun=rerun)
    if quiet:
        return res
    for v in res.verdicts:
        if v.kind == "claim":
            color = {"PASS": "green", "FAIL": "red"}.get(v.verdict, "yellow")
            ours = "—" if v.ours is None else fmt_beside(v.ours, v.bound)
            detail = f" — {v.detail}" if v.detail else ""
            console.print(f"[{color}]{v.verdict}[/] {escape(v.text)}{escape(detail)} (ours: {ours})",
                          highlight=False)
    console.print(verdict_counts(res.verdicts).strip("*"))
    pvs = [v for v in res.verdicts if v.kind == "paper_value"]
    if pvs:
        console.print(f"paper values: {paper_value_tally(pvs)}")
    console.print(f"figures: {', '.join(map(str, res.figures)) or '-'}\nreport: {res.report}",
                  markup=False)
    return res


def _run_command(name: str, profile: str, out: Path | None, set_: list[str] | None,
                 where: list[str] | None = None) -> str:
    """The `ssmrepro run` command (shell-quoted) that trains the rest of this profile;
    ``where``: the options of the `run` that says it, on which engine and device it trained
    (`run --engine ray --max-runs 4` said to continue without --engine: on this machine)."""
    return shlex.join(["ssmrepro", "run", name, "--profile", profile,
                       *(["--out", str(out)] if out is not None else []),
                       *[a for kv in set_ or [] for a in ("--set", kv)], *(where or [])])


def _say_unfinished(spec, name: str, profile: str, out: Path | None, set_: list[str] | None,
                    overrides: dict | None, res) -> None:
    """plot / verify of a profile not fully trained (a `run` interrupted or cut): the console
    says so (only report.md did; the verdict line of a spec without checkable claims read as
    a complete profile)."""
    if res.expected is None or res.finished is None or res.finished >= res.expected:
        return
    from ..engine import held_runs

    again = _run_command(name, profile, out, set_)
    held, warnings = held_runs(spec, profile, out, overrides)
    for w in warnings:
        err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    busy = (f"; {len(held)} of them being trained now by another process ({held[0]}"
            f"{', ...' if len(held) > 1 else ''}): wait for it, or" if held else ":")
    err_console.print(f"[yellow]profile {escape(profile)}: {res.finished} of {res.expected} runs "
                      f"finished[/] (the tables, figures and verdicts hold only those){busy} train "
                      f"the rest with {escape(again)}", highlight=False, soft_wrap=True)


def _outputs_json(res) -> dict:
    from ..report import CLAIM_VERDICTS

    claims = [v for v in res.verdicts if v.kind == "claim"]
    pvs = [v for v in res.verdicts if v.kind == "paper_value"]
    return {
        "verdicts": {k: sum(v.verdict == k for v in claims) for k in CLAIM_VERDICTS},
        "claims": [{"verdict": v.verdict, "text": v.text, "detail": v.detail, "ours": v.ours}
                   for v in claims],
        "paper_values": [{"cell": v.text, "paper": v.paper, "ours": v.ours,
                          "verdict": v.verdict, "detail": v.detail} for v in pvs],
        "csv": res.csv, "figures": res.figures, "report": res.report,
        "curves": getattr(res, "curves", None),
        "runs": {"expected": res.expected, "finished": res.finished},
    }


@command()
def plot(
    name: str = typer.Argument(..., help="experiment id, alias or spec file (.yaml)"),
    profile: str | None = typer.Option(None, help="profile to plot (default: spec's)"),
    out: Path | None = _out_option(),
    set_: list[str] | None = _set_option(),
) -> None:
    """Rebuild results.csv and curves.csv (from run records, when present), the figures and the
    report."""
    spec = _spec(name)
    profile = spec.default_profile if profile is None else profile
    overrides = _effective(spec, profile, _overrides(set_))
    _say_unfinished(spec, name, profile, out, set_, overrides, _outputs(
        spec, profile, out, overrides, rerun=_run_command(name, profile, out, set_)))


@command()
def verify(
    name: str = typer.Argument(..., help="experiment id, alias or spec file (.yaml)"),
    profile: str | None = typer.Option(None, help="profile to check (default: spec's)"),
    out: Path | None = _out_option(),
    strict: bool = typer.Option(False, help="exit 1 unless every claim PASSes (a FAIL, "
                                "MISSING or UNTESTED claim exits 1)"),
    set_: list[str] | None = _set_option(),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Our numbers beside the paper's: one verdict line per claim, report.md written. With
    --strict the exit code is 1 unless every claim PASSes."""
    spec = _spec(name)
    profile = spec.default_profile if profile is None else profile  # "" is no profile
    overrides = _effective(spec, profile, _overrides(set_))
    res = _outputs(spec, profile, out, overrides, quiet=as_json,
                   rerun=_run_command(name, profile, out, set_))
    if as_json:
        print_json({"id": spec.id, "profile": profile, **_outputs_json(res)})
    _say_unfinished(spec, name, profile, out, set_, overrides, res)
    if strict:
        short = [v for v in res.verdicts if v.kind == "claim" and v.verdict != "PASS"]
        if short:
            counts = {k: sum(v.verdict == k for v in short) for k in ("FAIL", "MISSING",
                                                                       "UNTESTED")}
            err_console.print("[red]--strict:[/] " + ", ".join(f"{n} {k}" for k, n in
                                                               counts.items() if n)
                              + " (every claim must PASS)", highlight=False)
            raise typer.Exit(1)


@command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
         add_help_option=False)
def bench(
    ctx: typer.Context,
    workload: str = typer.Argument(
        "keep-nth-d8", help="a packs workload (keep-nth-d8 | mqar-linear | mqar-full-L256 | "
        "composite-mamba2 | selective-copy-hybrid | mqar-b2s6) | scans (the kernel "
        "micro-benchmark; its options follow: python -m ssmrepro.bench.scans --help) | step (one "
        "full-Mamba training step, old vs new kernels vs mambapy: python -m ssmrepro.bench.step "
        "--help) | roofline (the roofline figure and the performance table from the committed "
        "records in --out, no measuring)"),
    device: str = typer.Option("auto", envvar="SSMREPRO_DEVICE",
                               help="auto | cpu | cuda (env SSMREPRO_DEVICE)"),
    packs: list[str] | None = typer.Option(
        None, "--packs", metavar="SIZES", help="pack sizes to measure, comma-separated "
        "(default: the workload's, e.g. 4,16,64); given again, its sizes are added"),
    seconds: float = typer.Option(3.0, help="rough measuring time per contender (sets the "
                                  "number of interleaved rounds, 3..20)"),
    out: Path | None = typer.Option(None, help="folder for the JSON/CSV record "
                                       "(default $SSMREPRO_OUT/bench, else the project's "
                                       "results/bench)",
                                    metavar="DIR",
                                    parser=path_value),
    help_: bool = typer.Option(False, "--help", "-h", help="show this message (with 'scans' or "
                               "'step': that benchmark's own options) and exit"),
) -> None:
    """Run-steps/s of packed training vs one model at a time, measured in this process; or, with
    ``scans``, the fast kernels' speed-up over their references (``ssmrepro bench scans --help``
    lists its options); or, with ``step``, one full-Mamba training step with the old and new
    kernels (and mambapy when installed)."""
    _refuse_unused_bench_options(ctx, workload)
    # `--packs 4 --packs 16` is `--packs 4,16` (the last one was kept: pack 4 was not measured)
    packs_text = None if packs is None else ",".join(packs)
    if workload == "scans":
        from ..bench.scans import main as scans_main

        try:
            code = scans_main(list(ctx.args) + (["--help"] if help_ else []))
        except SystemExit as exit_:  # argparse --help / usage errors
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
        raise typer.Exit(code or 0)
    if workload == "step":
        from ..bench.step import main as step_main

        try:
            code = step_main(list(ctx.args) + (["--help"] if help_ else []))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
        raise typer.Exit(code or 0)
    if help_:
        echo(ctx.get_help())
        raise typer.Exit()
    _write_root(out)  # `--out .` in the project folder wrote its records (or the roofline
    # figure) among the project's files, `--out experiments/x` among the specs
    from ..bench.packs import WORKLOADS, run_bench

    if workload == "roofline":
        from ..bench.roofline import NoRecords, write_roofline

        folder = out or _bench_folder()
        skipped: list[str] = []
        try:
            fig, table = write_roofline(folder, skipped)
        except NoRecords as err:
            fail([str(err)])
        for m in skipped:
            err_console.print(f"[yellow]warning:[/] left out: {escape(m)}", highlight=False,
                              soft_wrap=True)
        echo(table)
        console.print(f"roofline: {fig}; table: {fig.with_name('performance.md')}", markup=False)
        return
    if ctx.args:
        fail([f"unexpected arguments {' '.join(ctx.args)!r} (only 'scans' and 'step' take extra "
               "options)"])

    if workload not in WORKLOADS:
        fail([f"unknown workload {workload!r} (have {', '.join(WORKLOADS)})"])
    if not 0.1 <= seconds <= 3600:  # also NaN
        fail([f"--seconds {seconds}: expected a measuring time from 0.1 to 3600 seconds"])
    _refuse_device_of_env(ctx, device)
    dev = select_device(device)
    given = short_name(packs_text)  # (5,000 digits were repeated whole in the refusal)
    # every item a size: '1,,2' read as 1,2 (an empty item, a slip, dropped without a word); a
    # size past 18 digits is one past 256 (int's ValueError of 5,000 digits read as no size)
    items = [x.strip() for x in packs_text.split(",")] if packs_text is not None else []
    digits = [x[1:] if x[:1] in "+-" else x for x in items]  # (a sign, as int reads it)
    if packs_text is not None and packs_text.strip() and not all(d.isdecimal() for d in digits):
        fail([f"--packs {given!r}: expected comma-separated pack sizes, e.g. 4,16"])
    sizes = ([(-1 if x[:1] == "-" else 1) * (10**18 if len(d) > 18 else whole_number(d))
              for x, d in zip(items, digits)] if packs_text is not None and packs_text.strip()
             else [] if packs_text is not None else list(WORKLOADS[workload].packs))
    if not sizes or not all(1 <= e <= 256 for e in sizes):
        fail([f"--packs {given!r}: pack sizes between 1 and 256"])
    twice = sorted({e for e in sizes if sizes.count(e) > 1})
    if twice:  # 1,1,1 measured once and wrote three identical rows to the CSV and JSON records
        fail([f"--packs {given!r}: pack size {twice[0]} given twice (each size is measured once)"])
    from ..bench.packs import memory_problem
    from ..util import prepare_target

    why = memory_problem(workload, sizes, dev)
    if why:
        fail([why])
    folder = out or _bench_folder()
    folder.mkdir(parents=True, exist_ok=True)  # a file there failed after minutes of measuring
    stem = f"{workload}-{'cuda' if dev.startswith('cuda') else 'cpu'}"
    for ext in ("json", "csv"):  # a folder in a record's place failed after the measuring
        prepare_target(folder / f"{stem}.{ext}")
    rec = run_bench(workload, dev, sizes, seconds, folder,
                    echo=lambda m: console.print(m, markup=False))
    console.print(f"best: pack {rec['best_pack']} = x{rec['best_ratio']:.1f} the plain loop")


def _bench_folder() -> Path:
    """The default of `bench --out`: <$SSMREPRO_OUT>/bench, else the project's results/bench
    (with SSMREPRO_OUT set, `bench WORKLOAD` overwrote the committed records in the checkout, and
    `bench roofline` drew those, not the ones under the results root the variable names)."""
    import os

    from ..util import repo_root

    raw = os.environ.get("SSMREPRO_OUT", "")
    if not raw:  # unset or empty: the default, as the --out of the other commands
        return repo_root() / "results" / "bench"
    try:  # read as the other commands' --out reads it: a blank one (or '-') is refused, where
        # it was unset here and the records went into the checkout's results/bench
        return path_value(raw) / "bench"
    except typer.BadParameter as err:
        fail([f"SSMREPRO_OUT={raw!r} (the default of `bench --out`, <it>/bench): {err}"])
        raise


def _refuse_unused_bench_options(ctx: typer.Context, workload: str) -> None:
    """``bench scans --out DIR`` (or ``--device``, ``--packs``, ``--seconds``) and ``bench
    roofline --packs 4`` exited 0 with the option quietly ignored: those options belong to the
    packs workloads (``scans`` and ``step`` take their own, ``--json FILE`` for a record;
    ``roofline`` measures nothing)."""
    unused = {"scans": ("device", "packs", "seconds", "out"),
              "step": ("device", "packs", "seconds", "out"),
              "roofline": ("device", "packs", "seconds")}.get(workload, ())
    # an option given on the command line, whatever its value (one given as its default,
    # `bench roofline --seconds 3` or `bench scans --device auto`, was taken as not given and
    # ignored), not one read from the environment (SSMREPRO_DEVICE set for every command)
    given = [f"--{n}" for n in unused
             if getattr(ctx.get_parameter_source(n), "name", "") == "COMMANDLINE"]
    if given:
        own = ("measures nothing (it draws the records in --out)" if workload == "roofline" else
               f"takes its own options (ssmrepro bench {workload} --help; --json FILE writes "
               "its record)")
        fail([f"{', '.join(given)}: not an option of `bench {workload}`, which {own}"])
    if workload == "roofline" and ctx.args:
        fail([f"unexpected arguments {' '.join(ctx.args)!r} (`bench roofline` takes only --out)"])


@command()
def export(
    dest: Path | None = typer.Option(None, "--file", "-f", metavar="FILE", parser=file_value,
                                     help="file to write (default: ssmrepro-results.<format>)"),
    fmt: str = typer.Option("csv", "--format", help="csv | parquet (pip install -e '.[parquet]')"),
    out: Path | None = _out_option(),
) -> None:
    """One long-format table (one row per run and metric) across every experiment's committed
    results: paper, experiment, profile, run_id, label, seed, status, n_params, metric, value,
    config (JSON). Columns: docs/columns.md."""
    from ..plots.export import COMPRESSED, EXPORT_COLUMNS, FORMATS, misplaced_root, write_export
    from ..util import (
        folder_problem,
        guarded_projects,
        refuse_linked_output,
        repo_root,
        source_tree_problem,
    )

    if fmt not in FORMATS:
        fail([f"--format {fmt!r}: expected {' or '.join(FORMATS)}"])
    named = dest.suffix.lower().lstrip(".") if dest is not None else ""
    if named in FORMATS and named != fmt:  # `--file x.parquet` wrote CSV text into x.parquet
        fail([f"--file {dest}: its suffix says {named}, but the format is {fmt} (--format "
              f"{named}, or a .{fmt} file)"])
    if named in COMPRESSED:  # `--file t.csv.gz` wrote plain CSV text into t.csv.gz, exit 0
        fail([f"--file {dest}: a compressed file's suffix (.{named}), but export writes the "
              f"{fmt} table uncompressed; name a .{fmt} file (and compress it yourself)"])
    root = out if out is not None else repo_root() / "results"
    why = folder_problem(root) or misplaced_root(root)
    if why:  # a mistyped --out exported an empty table
        fail([f"{root}: {why} (the results root to export; --out)"])
    _project_specs()  # no spec to export (a wrong SSMREPRO_ROOT): an empty table, exit 0
    dest = dest or Path(f"ssmrepro-results.{fmt}")
    why = source_tree_problem(dest, "export")
    if why:  # `-f experiments/<paper>/<id>.yaml` replaced the spec with the table, exit 0
        fail([f"--file {dest}: {why}"])
    # `--out ../other-results -f results/README.md` replaced the project's committed front page with
    # the table of another root, exit 0 (and, $SSMREPRO_ROOT naming another project, `-f
    # <checkout>/results/<paper>/<id>/results-<profile>.csv` a committed table of the checkout)
    committed = [p / "results" for p in (repo_root(), *guarded_projects())]
    for where in dict.fromkeys((root, *committed)):
        if dest.resolve().is_relative_to(where.resolve()):  # `-f results/<paper>/<id>/results.csv`
            what = "results root it exports" if where == root else "project's results folder"
            fail([f"--file {dest}: inside the {what} ({where}); it would replace or add to "
                  "the committed results (a table, the front page): write it elsewhere"])
    # --file /dev/stdout replaced the system's /dev/stdout link; --file my-spec.yaml the spec
    refuse_linked_output(dest, f".{fmt}", b"PAR1" if fmt == "parquet"  # (or a table it wrote)
                         else ",".join(EXPORT_COLUMNS).encode())
    skipped: list[str] = []
    tagged: list[str] = []
    stray: list[str] = []
    foreign: list[str] = []
    try:
        path, n = write_export(dest, fmt, out, skipped, tagged, stray, foreign)
    except ImportError as err:
        fail([str(err)])
    for m in skipped:
        err_console.print(f"[yellow]warning:[/] left out (invalid spec): {escape(m)}",
                          highlight=False, soft_wrap=True)
    if tagged:
        shown = ", ".join(tagged[:3]) + (", ..." if len(tagged) > 3 else "")
        err_console.print(f"note: left out {len(tagged)} table(s) of runs with --set overrides "
                          f"(not a profile of their spec): {escape(shown)}", highlight=False,
                          soft_wrap=True)
    if stray:
        shown = ", ".join(stray[:3]) + (", ..." if len(stray) > 3 else "")
        err_console.print(f"note: left out {len(stray)} table(s) of no profile of their spec (a "
                          f"profile renamed or removed; `figures` names their reports): "
                          f"{escape(shown)}", highlight=False, soft_wrap=True)
    if foreign:  # a spec file run by its path: no project spec reads its folder
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        err_console.print(f"note: left out {len(foreign)} folder(s) of results that no spec of "
                          f"the project owns (a spec file run by its path?): {escape(shown)}",
                          highlight=False, soft_wrap=True)
    console.print(f"{n} rows -> {path}", markup=False)


@command()
def figures(
    out: Path | None = _out_option(),
    no_rebuild: bool = typer.Option(False, "--no-rebuild",
                                    help="only write the front page (results/README.md)"),
) -> None:
    """Rebuild every figure, summary, curves table and report from the committed results (no
    training) and write the front page, results/README.md (what `make figures` runs)."""
    from ..plots.export import misplaced_root
    from ..plots.frontpage import check_front_link, checked_catalogue, front_page, rebuild_all
    from ..util import folder_problem, repo_root

    root = out if out is not None else repo_root() / "results"
    why = folder_problem(root) or misplaced_root(root)
    if why:  # a mistyped --out got a new folder and a front page of no results
        fail([f"{root}: {why} (the results root to rebuild; --out)"])
    _write_root(out)  # `--out .` in the project folder replaced its README.md
    checked_catalogue()  # a catalogue the front page refuses is said before the minute rebuilding
    check_front_link(out)  # (and a front page linked outside --out)
    if not no_rebuild:
        rebuild_all(out, echo=lambda m: console.print(m, highlight=False, markup=False),
                    warn=lambda m: err_console.print(m, highlight=False, markup=False,
                                                     soft_wrap=True))
    console.print(f"front page: {front_page(out)}", markup=False)
