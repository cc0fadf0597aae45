"""Tool (bench): the roofline figure and the performance table, from the committed records.

Reads ``results/bench/<workload>-cpu.json`` (``ssmrepro bench <workload>``: plain vs packed
run-steps/s, each contender's FLOPs and bytes per step counted op by op, the measured GEMM peak
and copy bandwidth) and ``step-cpu.json`` / ``step-cpu-engine-settings.json`` (``ssmrepro bench
step`` without / with the workers' process settings: full-Mamba steps against
mambapy). Writes ``roofline-cpu.png`` — achieved GFLOP/s against arithmetic intensity (FLOPs per
byte, a lower bound: bytes count every op's operands as if nothing stayed in cache), under the
roofs min(peak, bandwidth × intensity) — and ``performance.md``, the table the README shows:
workload, plain, the best pack E > 1, the best choice (E = 1 where no pack wins by the planner's
10% margin: what the planner's measured cost model trains), ratio, fraction of peak (and, for
the full-Mamba step workloads, ours against mambapy one at a time).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..plots.registry import save_png  # noqa: E402
from ..report import md_cell  # noqa: E402
from .step import FLOOR  # noqa: E402

MAX_RECORD_BYTES = 16 << 20  # a benchmark record is kilobytes
_BAD_RECORD = (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError)


def _load(p: Path) -> object:
    """A record file's JSON; OSError / ValueError when it is not a small regular file of JSON
    (a FIFO blocked forever)."""
    from ..util import read_small

    return json.loads(read_small(p, MAX_RECORD_BYTES, follow_links=True))


def _records(folder: Path, skipped: list[str] | None = None) -> list[dict]:
    """The packs records with counts (newest format), sorted by workload name. Records of other
    benchmarks (kernels, ray overhead) are not packs records and are passed over; a file that is
    unreadable or lacks what the table and the figure read (a damaged or foreign record) is named
    in ``skipped``."""
    out = []
    for p in sorted(folder.glob("*-cpu.json")):
        try:
            rec = _load(p)
        except (OSError, ValueError, RecursionError) as err:
            (skipped if skipped is not None else []).append(f"{p}: unreadable ({err})")
            continue
        if not (isinstance(rec, dict) and "packed" in rec):
            continue  # another benchmark's record
        try:
            _table_row(rec)
            _points(rec)
        except _BAD_RECORD as err:
            (skipped if skipped is not None else []).append(
                f"{p}: not a packs benchmark record of this version ({type(err).__name__}: {err})")
            continue
        out.append((p, rec))
    # one row per workload: a copy of a record under another name (keep-nth-d8-old-cpu.json)
    # was a second, indistinguishable row of the table and point of the figure; the record
    # `bench WORKLOAD` writes (<workload>-cpu.json) is kept, else the first by name
    own = {str(rec.get("workload")) for p, rec in out if p.name == f"{rec.get('workload')}-cpu.json"}
    kept: dict[str, Path] = {}
    for p, rec in out:
        w = str(rec.get("workload"))
        if w in kept or (w in own and p.name != f"{w}-cpu.json"):
            first = kept.get(w, folder / f"{w}-cpu.json")
            (skipped if skipped is not None else []).append(
                f"{p}: a second record of workload {w!r} ({first.name} holds it; each "
                "workload once)")
            continue
        kept[w] = p
    return [rec for p, rec in out if kept.get(str(rec.get("workload"))) == p]


def _points(rec: dict) -> tuple[float, float, float, float, float, float, int]:
    """What the roofline draws of a record (finite numbers; a KeyError / TypeError / ValueError
    for a record that lacks them)."""
    b, p = _best(rec), rec["plain"]
    vals = [float(v) for v in (p["intensity"], p["gflops"], b["intensity"], b["gflops"],
                               rec["matmul_peak_gflops"], rec["copy_bandwidth_gbs"])]
    if not all(1e-9 <= v <= 1e12 for v in vals):  # also NaN; a peak of 1e308 made the axis
        # limit infinite (matplotlib's ValueError traceback), a bandwidth of 1e308 overflowed
        raise ValueError("intensity, GFLOP/s, peak and bandwidth must be numbers from 1e-9 to "
                         f"1e12, not {[v for v in vals if not 1e-9 <= v <= 1e12][0]!r}")
    _check_rates(rec)
    str(rec["workload"]), str(rec["machine"]), float(b["ratio"])
    threads = rec["threads"]  # 10**30 was printed in the figure's title
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise ValueError(f"threads {threads!r} is not a thread count (1..1024)")
    return (*vals, int(b["pack"]))


MAX_PACK = 256  # the largest pack size `bench <workload> --packs` measures


def _check_rates(rec: dict) -> None:
    """ValueError unless the plain and every pack's run-steps/s are positive finite numbers, each
    pack size is measured once and each pack's ratio is its run-steps/s over the plain loop's
    (as ``bench.packs`` writes them): a hand-edited rate of 1e308 was printed as a 309-digit
    number and a ratio of x3e305 beside a ratio column of x1.01; a negative one was taken. Rates
    and ratios are JSON numbers and a pack size an integer, as written: a pack of 2.5 was read
    as 2, `true` as a pack of 1 or a rate of 1, a text rate was parsed."""
    for key, value in [("plain_run_steps_per_s", rec["plain_run_steps_per_s"])] + [
            (f"packed.{i}.{k}", row[k]) for i, row in enumerate(rec["packed"])
            for k in ("run_steps_per_s", "ratio", "pack")]:
        kinds = (int,) if key.endswith(".pack") else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise ValueError(f"{key} is {value!r}, not "
                             f"{'an integer' if kinds == (int,) else 'a number'}")
    plain = float(rec["plain_run_steps_per_s"])
    if not (plain > 0 and np.isfinite(plain)):
        raise ValueError(f"plain_run_steps_per_s {plain!r} is not a positive number")
    seen = set()
    for row in rec["packed"]:
        rate, ratio, pack = float(row["run_steps_per_s"]), float(row["ratio"]), int(row["pack"])
        if not (rate > 0 and np.isfinite(rate)):
            raise ValueError(f"pack {pack}: run_steps_per_s {rate!r} is not a positive number")
        if not 1 <= pack <= MAX_PACK or pack in seen:  # a pack of 10**40 was printed as such
            raise ValueError(f"pack {pack}: not a pack size (1..{MAX_PACK}), or measured twice")
        seen.add(pack)
        if not abs(ratio - rate / plain) <= 1e-6 * max(abs(ratio), rate / plain):
            raise ValueError(f"pack {pack}: ratio {ratio:g} is not its run-steps/s over the "
                             f"plain loop's ({rate / plain:g})")


def _best(rec: dict) -> dict:
    """The fastest pack E > 1 measured (a pack of 1, `bench WORKLOAD --packs 1,4`, is the
    engine's step of one model: it was shown as the best pack E > 1 and drawn as the filled
    point); ValueError for a record with no pack above 1 (nothing to draw or tabulate)."""
    packs = [r for r in rec["packed"] if r["pack"] > 1]
    if not packs:
        raise ValueError("no pack size above 1 measured (the best pack E > 1 is what the table "
                         "and the figure show)")
    return max(packs, key=lambda r: r["run_steps_per_s"])


def _choice(rec: dict) -> tuple[int, float, dict]:
    """What a planner with these measurements trains: (E, run-steps/s, row) over E = 1 (the plain
    loop) and every pack; one at a time wins where no pack beats it by the planner's margin
    (``engine.costs.MIN_GAIN``)."""
    from ..engine.costs import MIN_GAIN

    b = _best(rec)
    if b["run_steps_per_s"] > MIN_GAIN * rec["plain_run_steps_per_s"]:
        return b["pack"], b["run_steps_per_s"], b
    return 1, rec["plain_run_steps_per_s"], rec["plain"]


STEP_RECORDS = ("step-cpu.json", "step-cpu-engine-settings.json")  # bench step, without/with
# the workers' process settings (--tune-malloc --flush-denormals)


def _settings(env: dict) -> str:
    on = [k for k, v in (("malloc tuned", env.get("malloc_tuned")),
                         ("denormals flushed", env.get("denormals_flushed"))) if v]
    return ", ".join(on) if on else "plain process"


def _step_rows(folder: Path, skipped: list[str] | None = None) -> list[dict]:
    """Full-Mamba step workloads: our best contender vs mambapy (one at a time), one row per
    workload and record of ``STEP_RECORDS``; none from a record (named in ``skipped``) that is
    unreadable or not such a record."""
    rows = []
    for name in STEP_RECORDS:
        p = folder / name
        if not p.exists():
            continue
        try:
            got = _step_rows_of(_load(p))
            for r in got:
                _step_line(r)
        except (OSError, RecursionError, *_BAD_RECORD) as err:
            (skipped if skipped is not None else []).append(
                f"{p}: not a step benchmark record of this version ({type(err).__name__}: {err})")
            continue
        rows += got
    return rows


def _step_rows_of(rec: dict) -> list[dict]:
    rows = []
    for name, w in rec.get("workloads", {}).items():
        res = [r for r in rec.get("results", []) if r.get("workload") == name]
        ref = next((r for r in res if r["contender"].startswith("mambapy")), None)
        floor = next((r for r in res if r["contender"] == FLOOR), None)
        ours = [r for r in res if not r["contender"].startswith(("mambapy", "old"))
                and r["contender"] != FLOOR]
        if ref is None or not ours:
            continue
        best = max(ours, key=lambda r: r["run_steps_per_s"])
        # ours one model at a time: None without an E = 1 step (`bench step --E 4`), where the
        # best contender, a pack of 4, was shown as `ours, one model`
        single = next((r for r in ours if r["E"] == 1 and "mb" not in r["contender"]), None)
        rows.append({"workload": name, "what": w.get("what", name), "mambapy": ref["run_steps_per_s"],
                     "single": None if single is None else single["run_steps_per_s"],
                     "best": best["run_steps_per_s"],
                     "best_contender": best["contender"], "fraction": best["fraction_of_peak"],
                     "ceiling": floor["run_steps_per_s"] / ref["run_steps_per_s"] if floor else None,
                     "time": rec.get("env", {}).get("time", ""),
                     "settings": _settings(rec.get("env", {}))})
    return rows


def _table_row(rec: dict) -> str:
    b = _best(rec)
    E, rate, row = _choice(rec)
    plain = rec["plain_run_steps_per_s"]
    what = md_cell(f"{rec['workload']} ({rec['description']})")
    return (f"| {what} | {plain:.1f} | "
            f"E = {b['pack']}: ×{b['ratio']:.2f} | E = {E} | {rate:.1f} | ×{rate / plain:.2f} | "
            f"{row['gflops']:.2f} ({100 * row['fraction_of_peak']:.1f}%) | {row['intensity']:.2f} | "
            f"{rec['time'][:10]} |")


def _check_step_row(r: dict) -> None:
    """ValueError unless the rates of a step row are positive finite JSON numbers and its share
    of the peak a finite number >= 0 (a hand-edited mambapy rate of 1e308 was printed as a
    309-digit number, -3 as '×-1.0', a NaN share as 'nan%'), as ``_check_rates`` for packs."""
    values = [("mambapy", r["mambapy"], True), ("best", r["best"], True),
              ("fraction_of_peak", r["fraction"], False)]
    if r.get("single") is not None:
        values.append(("single", r["single"], True))
    if r.get("ceiling") is not None:
        values.append(("GEMMs alone vs mambapy", r["ceiling"], True))
    for key, value, positive in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{r['workload']}: {key} is {value!r}, not a number")
        if not (np.isfinite(value) and (value > 0 if positive else value >= 0)) or value > 1e12:
            raise ValueError(f"{r['workload']}: {key} {value!r} is not a rate "
                             f"(a {'positive' if positive else 'non-negative'} number up to 1e12)")


def _step_line(r: dict) -> str:
    _check_step_row(r)
    return (f"| {md_cell(r['what'])} | {r['settings']} | {r['mambapy']:.2f} | {_rate(r['single'])} | "
            f"{r['best']:.2f} ({md_cell(r['best_contender'])}) | ×{r['best'] / r['mambapy']:.1f} | "
            f"{100 * r['fraction']:.1f}% | {_ceiling(r.get('ceiling'))} | {md_cell(r['time'])[:10]} |")


def _rate(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _ceiling(x: float | None) -> str:
    return "—" if x is None else f"×{x:.1f}"


def performance_table(folder: Path, skipped: list[str] | None = None) -> str:
    """Markdown: one row per packs workload, then the full-Mamba step workloads vs mambapy."""
    lines = ["| workload | plain run-steps/s | best pack E > 1 | best choice | run-steps/s | ratio | "
             "GFLOP/s (% of peak) | FLOP/byte | measured |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [_table_row(rec) for rec in _records(folder, skipped)]
    steps = _step_rows(folder, skipped)
    if steps:
        lines += ["", "| full-Mamba step | process settings (all contenders) | mambapy (one model) | "
                  "ours, one model | ours, best | best vs mambapy | % of peak | "
                  "GEMMs alone vs mambapy (ceiling) | measured |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        lines += [_step_line(r) for r in steps]
    return "\n".join(lines)


def _limits(recs: list[dict], peak: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """The figure's (x, y) limits: intensity 0.01..100 and 0.05 GFLOP/s..3 x peak, widened to
    hold every point (a step of intensity 0.005 or 0.02 GFLOP/s was drawn outside the axes,
    missing from the figure while its legend entry stayed)."""
    pts = [(r["intensity"], r["gflops"]) for rec in recs for r in (rec["plain"], _best(rec))]
    xs, ys = [float(x) for x, _ in pts], [float(y) for _, y in pts]
    return ((min(0.01, min(xs) / 2), max(100.0, 2 * max(xs))),
            (min(0.05, min(ys) / 2), max(3 * peak, 2 * max(ys))))


def roofline_figure(folder: Path, path: Path) -> Path | None:
    """The roofline of every packs workload (plain: open marker, best pack: filled)."""
    recs = _records(folder)
    if not recs:
        return None
    peak = float(np.median([r["matmul_peak_gflops"] for r in recs]))
    bw = float(np.median([r["copy_bandwidth_gbs"] for r in recs]))
    (x_lo, x_hi), (y_lo, y_hi) = _limits(recs, peak)
    fig, ax = plt.subplots(figsize=(7.2, 4.8))
    xs = np.logspace(np.log10(x_lo), np.log10(x_hi), 200)
    ax.plot(xs, np.minimum(peak, bw * xs), "k-", lw=1.4,
            label=f"roof: min(GEMM peak {peak:.0f} GFLOP/s, copy {bw:.0f} GB/s × intensity)")
    cmap = plt.get_cmap("tab10")
    for k, rec in enumerate(recs):
        b = _best(rec)
        color = cmap(k % 10)
        p = rec["plain"]
        ax.plot([p["intensity"]], [p["gflops"]], "o", mfc="none", color=color, ms=7)
        ax.plot([b["intensity"]], [b["gflops"]], "o", color=color, ms=7,
                label=f"{rec['workload']}: plain → E = {b['pack']} (×{b['ratio']:.2f})")
        ax.annotate("", (b["intensity"], b["gflops"]), (p["intensity"], p["gflops"]),
                    arrowprops={"arrowstyle": "->", "color": color, "lw": 0.8})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte; bytes = every op's operands, no cache)")
    ax.set_ylabel("achieved GFLOP/s (CPU-clock median)")
    threads = "/".join(str(t) for t in sorted({r["threads"] for r in recs}))
    ax.set_title(f"Training-step roofline, {recs[0]['machine']}, {threads} thread per process\n"
                 "open: one model at a time; filled: the best pack E > 1; a point above the slope "
                 "reuses cached data", fontsize=9)
    ax.grid(alpha=0.25, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_png(fig, path, dpi=130)
    return path


class NoRecords(ValueError):
    """The folder holds no usable packs benchmark record: nothing to draw or tabulate."""


def write_roofline(folder: Path, skipped: list[str] | None = None) -> tuple[Path, str]:
    """Write roofline-cpu.png and performance.md into ``folder``; return (figure, table).
    ``NoRecords`` when the folder does not exist or holds no usable packs record (an empty
    figure and table were written before); damaged or foreign records are named in ``skipped``
    and left out."""
    from ..util import atomic_write_text, folder_lock, folder_problem, remove_dead_temps
    from . import RECORDS_LOCK

    skipped = [] if skipped is None else skipped
    why = folder_problem(folder)
    if why:
        raise NoRecords(f"{folder}: {why} (the benchmark records; --out)")
    if not _records(folder, skipped):
        raise NoRecords(f"{folder}: no usable packs benchmark record (*-cpu.json); run "
                        "`ssmrepro bench WORKLOAD --out` there first"
                        + (f" ({'; '.join(skipped)})" if skipped else ""))
    fig = folder / "roofline-cpu.png"
    # the figure and the table of one set of records: each reads the folder, and a `bench`
    # writing a record between them (or two benches' pairs interleaved) drew one beside the
    # other's table
    with folder_lock(folder, RECORDS_LOCK):
        for name in (fig.name, "performance.md"):  # of a `bench roofline` killed as it wrote
            remove_dead_temps(folder, name)
        roofline_figure(folder, fig)
        more: list[str] = []  # the step records' problems (the packs records' are named already)
        table = performance_table(folder, more)
        atomic_write_text(folder / "performance.md", table + "\n")
    named = {m.split(": ")[0] for m in skipped}
    skipped += [m for m in more if m.split(": ")[0] not in named]
    return fig, table


__all__ = ["NoRecords", "performance_table", "roofline_figure", "write_roofline"]
