"""Tool (cli): the experiment commands — list, show, validate, run, plot, verify, list-models, bench.

Thin by design: parse arguments, call the stage functions, print. Errors go through the boundary
in ``cli.app`` (exit 2 for bad input, 1 for runs that did not finish).
"""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from ..kernels.backend import select_backend, select_device
from ..spec import SpecError, find_spec, index_problems, load_spec, spec_paths
from .app import command, console, err_console, fail


def _spec(name: str):
    return find_spec(name)


def _root(spec, out: Path | None) -> Path:
    from ..engine import results_dir

    return results_dir(spec, out)


@command(name="list")
def list_cmd(
    models: bool = typer.Option(False, "--models", help="list the model registry instead"),
) -> None:
    """All experiment specs with alias, tier and status of their default profile."""
    if models:
        return list_models()
    from ..engine import open_store
    from ..sweep import expand

    t = Table("id", "alias", "tier", "title", "status")
    for p in spec_paths():
        try:
            s = load_spec(p)
            runs = expand(s, s.default_profile)
            st = open_store(s)
            done = sum(st.is_done(r.run_id) for r in runs)
            status = f"{s.default_profile}: {done}/{len(runs)} runs"
            if done == 0 and (st.root / "results.csv").exists():
                status += " (committed results.csv)"
            t.add_row(s.id, s.alias or "", str(s.tier), s.title, status)
        except SpecError as err:
            t.add_row(p.stem, "", "", "[red]invalid spec[/]", err.messages[0][:60])
    console.print(t)


@command(name="list-models")
def list_models() -> None:
    """Every registered model with its configuration fields and defaults."""
    from ..models import MODELS, config_rows

    for name, entry in MODELS.items():
        t = Table(title=f"{name}: {entry.summary.strip()}", title_justify="left")
        t.add_column("field")
        t.add_column("type")
        t.add_column("default")
        t.add_column("meaning")
        for row in config_rows(entry.Config):
            t.add_row(*(escape(c) for c in row))
        console.print(t)
    from ..models.mixers import MIXERS

    console.print("\n[bold]Sequence mixers[/] (use inside seq_lm / cooper_hybrid blocks as "
                  "mixer: {name: ..., fields})")
    for name, entry in MIXERS.items():
        causal = "" if entry.causal else " [non-causal]"
        t = Table(title=f"mixer {name}{causal}: {escape(entry.summary.strip())}",
                  title_justify="left")
        for col in ("field", "type", "default", "meaning"):
            t.add_column(col)
        for row in config_rows(entry.Config):
            t.add_row(*(escape(c) for c in row))
        console.print(t)


@command()
def show(
    name: str = typer.Argument(..., help="experiment id or alias"),
    profile: str | None = typer.Option(None, help="smoke | quick | paper (default: spec's)"),
    out: Path | None = typer.Option(None, help="results root (default ./results)"),
) -> None:
    """Resolved configuration of an experiment and its run table."""
    from ..engine import open_store
    from ..sweep import expand, set_dotted

    spec = _spec(name)
    profile = profile or spec.default_profile
    runs = expand(spec, profile)
    base = {"task": dict(spec.task), "model": dict(spec.model), "train": dict(spec.train)}
    for k, v in spec.profiles[profile].set.items():
        set_dotted(base, k, v)
    console.print(f"[bold]{spec.id}[/] ({spec.alias or '-'}) — {spec.title}\nclaim: {spec.claim}")
    console.print(f"profile [cyan]{profile}[/]: {spec.profiles[profile].description}")
    console.print(yaml.safe_dump(base, sort_keys=False).rstrip())
    store = open_store(spec, out)
    t = Table("#", "run_id", "label", "coords", "seed", "status", "test.acc")
    for r in runs[:200]:
        rec = store.read(r.run_id) or {}
        acc = (rec.get("metrics") or {}).get("test.acc")
        coords = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in r.coords.items())
        t.add_row(str(r.index), r.run_id, r.label, coords, str(r.seed), rec.get("status", "-"),
                  "-" if acc is None else f"{acc:.3f}")
    console.print(t)
    if len(runs) > 200:
        console.print(f"... {len(runs) - 200} more runs")


@command()
def validate(
    name: str | None = typer.Argument(None, help="experiment id, alias or file"),
    all_: bool = typer.Option(False, "--all", help="validate every shipped spec"),
) -> None:
    """Check spec files (schema, every profile's runs, derived values, figures, claims)."""
    from ..plots import validate_outputs
    from ..sweep import expand

    if not name and not all_:
        fail(["give an experiment id or --all"])
    paths = spec_paths() if all_ else [None]
    errors: list[str] = index_problems()[1] if all_ else []
    for p in paths:
        try:
            spec = load_spec(p) if p else find_spec(name)  # type: ignore[arg-type]
            runs = {prof: expand(spec, prof) for prof in spec.profiles}
            counts = {prof: len(r) for prof, r in runs.items()}
            bad = validate_outputs(spec, [r for rs in runs.values() for r in rs])
            if bad:
                raise SpecError(bad)
            console.print(f"[green]ok[/] {spec.id}: " + ", ".join(f"{k} {v} runs"
                                                                 for k, v in counts.items()))
        except SpecError as err:
            errors += err.messages
    if errors:
        fail(errors)


@command()
def run(
    name: str = typer.Argument(..., help="experiment id or alias, e.g. keep-nth"),
    profile: str | None = typer.Option(None, help="smoke | quick | paper (default: spec's)"),
    backend: str = typer.Option("auto", help="auto | torch | cuda"),
    device: str = typer.Option("auto", help="auto | cpu | cuda | cuda:N"),
    max_runs: int | None = typer.Option(None, min=1, help="train at most this many runs"),
    out: Path | None = typer.Option(None, help="results root (default ./results)"),
    workers: int | None = typer.Option(
        None, min=1, help="worker processes, each claiming packs (default and maximum: one per "
        "CPU core or GPU)"),
    pack_size: int | None = typer.Option(None, min=1, max=4096,
                                         help="runs per pack (default: from memory)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print runs, packs and a time estimate"),
    no_estimate: bool = typer.Option(False, "--no-estimate", help="with --dry-run: skip timing"),
    no_plot: bool = typer.Option(False, "--no-plot", help="skip figure and report"),
    calibrate: bool = typer.Option(
        True, "--calibrate/--no-calibrate", help="time candidate pack sizes and micro-batches per "
        "shape before training (cached per machine) instead of sizing packs by memory alone"),
) -> None:
    """Train an experiment's runs (resuming finished ones), then write CSV, figure and report."""
    from ..engine import dry_run as plan_dry_run
    from ..engine import run_experiment
    from ..plots import validate_outputs
    from ..sweep import expand

    spec = _spec(name)
    profile = profile or spec.default_profile
    dev = select_device(device)
    be, why = select_backend(backend, dev)
    bad = validate_outputs(spec, expand(spec, profile))
    if bad:
        fail(bad)
    console.print(f"[dim]{why}[/]")
    if dry_run:
        d = plan_dry_run(spec, profile, out, dev, max_runs, pack_size, estimate=not no_estimate)
        console.print(f"{spec.id} [{profile}]: {d.total} runs, {d.done} done, {d.pending} pending "
                      f"in {len(d.packs)} packs (largest {d.largest}); {d.run_steps:,} run-steps "
                      "to train")
        for line in d.planner:
            console.print(f"[dim]planner: {line}[/]", highlight=False)
        if d.estimate_s is not None:
            console.print(f"estimated wall-clock on {dev}: {_human(d.estimate_s)} (one worker; "
                          f"{d.estimate_how})")
        return
    s = run_experiment(spec, profile, out, dev, be, max_runs, pack_size, workers, console,
                       calibrate=calibrate)
    parts = [f"trained {s.trained} runs in {s.packs} packs, {s.wall_s:.0f}s wall, "
             f"{s.cpu_s:.0f}s CPU"]
    if s.elsewhere:
        parts.append(f"{s.elsewhere} finished by another process")
    if s.failed:
        parts.append(f"[red]{s.failed} failed[/]")
    if s.not_run:
        parts.append(f"[red]{s.not_run} not trained[/]")
    console.print("; ".join(parts) + f"; table: {s.csv}")
    for m in s.messages:
        err_console.print(f"[red]error:[/] {escape(m)}", highlight=False, soft_wrap=True)
    if s.interrupted:
        err_console.print("interrupted — finished runs are saved; re-run the same command to "
                          "resume")
        raise typer.Exit(130)
    if not no_plot:
        _outputs(spec, profile, out)
    if not s.ok:
        err_console.print("[red]some runs did not finish[/]: re-run the same command to retry "
                          "them (finished runs are kept)")
        raise typer.Exit(1)


def _human(sec: float) -> str:
    if sec < 120:
        return f"{sec:.0f} s"
    if sec < 7200:
        return f"{sec / 60:.0f} min"
    return f"{sec / 3600:.1f} h"


def _outputs(spec, profile: str, out: Path | None):
    from ..plots import build, validate_outputs
    from ..report import paper_value_tally, verdict_counts
    from ..sweep import expand

    try:
        bad = validate_outputs(spec, expand(spec, profile))
    except SpecError as err:
        bad = err.messages
    if bad:
        fail(bad)
    res = build(spec, profile, _root(spec, out))
    for v in res.verdicts:
        if v.kind == "claim":
            color = {"PASS": "green", "FAIL": "red"}.get(v.verdict, "yellow")
            ours = "—" if v.ours is None or v.ours != v.ours else f"{v.ours:.3f}"
            detail = f" — {v.detail}" if v.detail else ""
            console.print(f"[{color}]{v.verdict}[/] {escape(v.text)}{escape(detail)} (ours: {ours})",
                          highlight=False)
    console.print(verdict_counts(res.verdicts).strip("*"))
    pvs = [v for v in res.verdicts if v.kind == "paper_value"]
    if pvs:
        console.print(f"paper values: {paper_value_tally(pvs)}")
    console.print(f"figures: {', '.join(map(str, res.figures)) or '-'}\nreport: {res.report}")
    return res


@command()
def plot(
    name: str = typer.Argument(..., help="experiment id or alias"),
    profile: str | None = typer.Option(None, help="profile to plot (default: spec's)"),
    out: Path | None = typer.Option(None, help="results root (default ./results)"),
) -> None:
    """Rebuild results.csv (from run records, when present), the figure and the report."""
    spec = _spec(name)
    _outputs(spec, profile or spec.default_profile, out)


@command()
def verify(
    name: str = typer.Argument(..., help="experiment id or alias"),
    profile: str | None = typer.Option(None, help="profile to check (default: spec's)"),
    out: Path | None = typer.Option(None, help="results root (default ./results)"),
    strict: bool = typer.Option(False, help="exit 1 when a claim fails"),
) -> None:
    """Our numbers beside the paper's: one verdict line per claim, report.md written."""
    spec = _spec(name)
    res = _outputs(spec, profile or spec.default_profile, out)
    if strict and any(v.verdict == "FAIL" for v in res.verdicts):
        raise typer.Exit(1)


@command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(
    ctx: typer.Context,
    workload: str = typer.Argument(
        "keep-nth-d8", help="keep-nth-d8 | mqar-linear | mqar-full-L256 | scans (the kernel "
        "micro-benchmark; its options follow: python -m ssmrepro.bench.scans --help) | step (one "
        "full-Mamba training step, old vs new kernels vs mambapy: python -m ssmrepro.bench.step "
        "--help)"),
    device: str = typer.Option("auto", help="auto | cpu | cuda"),
    packs: str = typer.Option("4,16,64", help="pack sizes to measure, comma-separated"),
    seconds: float = typer.Option(3.0, help="rough measuring time per contender (sets the "
                                  "number of interleaved rounds, 3..20)"),
    out: Path | None = typer.Option(None, help="folder for the JSON/CSV record "
                                       "(default results/bench)"),
) -> None:
    """Run-steps/s of packed training vs one model at a time, measured in this process; or, with
    ``scans``, the fast kernels' speed-up over their references; or, with ``step``, one full-Mamba
    training step with the old and new kernels (and mambapy when installed)."""
    from ..bench.packs import WORKLOADS, run_bench
    from ..util import repo_root

    if workload == "scans":
        from ..bench.scans import main as scans_main

        raise typer.Exit(scans_main(list(ctx.args)))
    if workload == "step":
        from ..bench.step import main as step_main

        raise typer.Exit(step_main(list(ctx.args)))
    if ctx.args:
        fail([f"unexpected arguments {' '.join(ctx.args)!r} (only 'scans' and 'step' take extra "
               "options)"])

    if workload not in WORKLOADS:
        fail([f"unknown workload {workload!r} (have {', '.join(WORKLOADS)})"])
    dev = select_device(device)
    sizes = [int(x) for x in packs.split(",") if x.strip()]
    rec = run_bench(workload, dev, sizes, seconds, out or repo_root() / "results" / "bench",
                    echo=console.print)
    console.print(f"best: pack {rec['best_pack']} = x{rec['best_ratio']:.1f} the plain loop")
