"""Run an experiment: expand, skip finished runs, plan packs, execute, rebuild results.csv."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..spec import Spec
from ..store import Store
from ..sweep import expand, unique_runs
from ..util import repo_root
from .local import Event, default_workers, run_workers, work
from .plan import plan


def results_dir(spec: Spec, out: Path | None = None) -> Path:
    return Path(out or repo_root() / "results") / spec.paper / spec.id


def open_store(spec: Spec, out: Path | None = None) -> Store:
    """The spec's store, reading also the records of the specs it reuses."""
    from ..spec import find_spec

    reuse = [results_dir(find_spec(s), out) for s in spec.reuse]
    return Store(results_dir(spec, out), reuse=reuse)


def output_name(spec: Spec, profile: str, stem: str, ext: str) -> str:
    """``results.csv`` for the spec's default profile, ``results-<profile>.csv`` otherwise, so
    profiles never overwrite each other's tables, figures or reports."""
    return f"{stem}.{ext}" if profile == spec.default_profile else f"{stem}-{profile}.{ext}"


def _pack_line(store: Store, ev: Event, n_packs: int, elapsed: float) -> str:
    """One log line per finished pack (readable in non-terminal logs too)."""
    recs = [store.read(r) or {} for r in ev.run_ids]
    accs = [(rec.get("metrics") or {}).get("test.acc") for rec in recs]
    accs = [a for a in accs if a is not None]
    labels = sorted({rec.get("label") or "-" for rec in recs})
    acc = f", test.acc {min(accs):.3f}–{max(accs):.3f}" if accs else ""
    return (f"  pack {ev.pack + 1}/{n_packs} done: {ev.n_runs} runs [{', '.join(labels)}]{acc} "
            f"({elapsed:.0f}s elapsed)")


@dataclass
class RunSummary:
    total: int
    already_done: int
    trained: int
    failed: int
    packs: int
    wall_s: float
    csv: Path | None


def run_experiment(
    spec: Spec,
    profile: str,
    out: Path | None = None,
    device: str = "cpu",
    backend: str = "torch",
    max_runs: int | None = None,
    pack_size: int | None = None,
    workers: int | None = None,
    console: Console | None = None,
) -> RunSummary:
    console = console or Console()
    t0 = time.time()
    runs = expand(spec, profile)
    store = open_store(spec, out)
    store.cleanup()
    unique = unique_runs(runs)
    pending = [r for r in unique if not store.is_done(r.run_id)]
    done_before = len(unique) - len(pending)
    if max_runs is not None:
        pending = pending[:max_runs]
    packs = plan(pending, pack_size, device)
    size = max((len(p) for p in packs), default=0)
    workers = workers or default_workers(device, len(packs))
    console.print(
        f"[bold]{spec.id}[/] profile [cyan]{profile}[/]: {len(unique)} runs, {done_before} already "
        f"done, {len(pending)} to train in {len(packs)} packs (largest {size}) on {device}, "
        f"{workers} worker{'s' if workers > 1 else ''}"
    )
    state = {"done": 0, "failed": 0, "packs_done": 0, "packs_failed": 0, "running": 0}
    if pending:
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        ) as prog:
            runs_bar = prog.add_task("runs", total=len(pending), status="")
            step_bar = prog.add_task("pack", total=1, status="", visible=workers == 1)

            def status() -> str:
                return (f"packs {state['packs_done']}/{len(packs)} done, {state['running']} running, "
                        f"{state['packs_failed']} failed")

            def on_event(ev: Event) -> None:
                if ev.kind == "pack_start":
                    state["running"] += 1
                    prog.update(step_bar, completed=0, total=1,
                                description=f"pack {ev.pack + 1} ({ev.n_runs} runs)")
                elif ev.kind == "progress":
                    prog.update(step_bar, completed=ev.step, total=ev.total)
                elif ev.kind in ("pack_done", "pack_failed"):
                    state["running"] -= 1
                    key = "packs_done" if ev.kind == "pack_done" else "packs_failed"
                    state[key] += 1
                    state["done" if ev.kind == "pack_done" else "failed"] += ev.n_runs
                    prog.advance(runs_bar, ev.n_runs)
                    if ev.kind == "pack_failed":
                        console.print(f"[red]pack {ev.pack + 1} failed:[/] {ev.message}")
                    else:
                        console.print(_pack_line(store, ev, len(packs), time.time() - t0))
                    store.write_csv(runs, output_name(spec, profile, "results", "csv"))
                elif ev.kind == "skipped":
                    prog.advance(runs_bar, ev.n_runs)
                prog.update(runs_bar, status=status())

            if workers > 1:
                run_workers(spec, profile, store, runs, device, backend, pack_size, workers,
                            on_event)
            else:
                work(packs, store, device, backend, tuple(spec.analysis), on_event)
    csv = store.write_csv(runs, output_name(spec, profile, "results", "csv"))
    store.cleanup()
    return RunSummary(len(unique), done_before, state["done"], state["failed"], len(packs),
                      time.time() - t0, csv)
