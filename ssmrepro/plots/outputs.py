"""Stage 6 (plots): build a spec's outputs (results.csv -> cells -> verdicts, figures, report;
curves.csv from the run records) and validate its output sections (figures, claims, paper values)
before any training. An analytic spec's results.csv is its theory table (report.analytic),
computed here.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from .. import expr, report
from ..analysis import nonfinite_values
from ..engine import open_store, output_name
from ..expr import ExprError
from ..report.analysis import (
    ANALYSIS_METRICS,
    DECAY,
    DECAY_METRICS,
    WEIGHT_ANALYSES,
    add_metrics,
    analysis_metrics,
    analysis_range,
    cell_identities,
    cell_means,
    completed_keys,
    decay_metrics,
    histogram_table,
    planned_rows,
    read_histograms,
    read_weights_table,
    short_cells,
    weights_table,
    with_committed,
)
from ..report.analytic import THEORY_LABEL, analytic_cells, analytic_columns, analytic_table
from ..report.cells import (
    CASE_PREFIX,
    CellIndex,
    alternatives,
    cell_env,
    column,
    has_column,
    is_case_ref,
    listed_keys,
    norm,
    values_equal,
)
from ..report.checks import (
    OPS,
    CheckConfig,
    CollapseConfig,
    LogLogSlopeConfig,
    OrderingConfig,
    RecallFrontierConfig,
    close,
    seed_spreads,
)
from ..report.columns import LABEL, LABEL_SEP, N_PARAMS, OK, RUN_ID, SEED, STATUS, STOP_STEP
from ..report.curves import HISTORY_SETS, SAMPLES, STEP, curve_table, history_metric_sets
from ..spec import SET_TAG, Spec, SpecError, format_errors
from ..store import (
    COUNTS,
    DIVERGED_NAN,
    METRIC_PREFIX,
    OK_IS_FINITE,
    RECORD_STATUSES,
    SET_METRICS,
    TableError,
    count_problem,
    csv_text,
    in_table_order,
    is_accuracy,
    is_loss,
    is_metric_column,
    metric_name,
    metric_range_problem,
    not_recorded,
    read_run_table,
    read_table,
    scored_nonfinite,
    table_text,
    unread_table,
    whole_numbers,
)
from ..sweep import RunConfig, expand, overrides_tag, overrides_text, per_point
from ..sweep.config import FLOAT32_MAX
from ..theory.recall import law_constant, refined_frontier_product
from ..util import (
    atomic_write_text,
    encode_cell,
    first_few,
    folder_lock,
    pairs_text,
    remove_dead_temps,
    short_name,
)
from .curves import CURVES, CurvesConfig
from .figures import _in_panel
from .registry import FIGURE_KINDS, FigureConfig, FigureContext, NotDrawn, parse_figure


@dataclass
class Outputs:
    csv: Path | None  # results.csv; None when none was written (no run has a record yet)
    figure: Path | None  # the first figure drawn
    figures: list[Path]
    report: Path
    verdicts: list
    curves: Path | None = None  # curves.csv (learning curves), when records or a committed copy exist
    expected: int | None = None  # runs of the profile (None: an analytic table, no runs)
    finished: int | None = None  # of them, finished (diverged included)


def figure_stem(cfg, index: int) -> str:
    return cfg.name or ("figure" if index == 0 else f"figure{index + 1}")


_SEED_WHY = ("'seed' is not a column of a cell: a cell is its seeds' aggregate (its seed column "
             "held the first seed: a figure drew the mean at seed 0, a claim or paper value on "
             "another seed matched nothing); use `curves` with hue: [seed] for each seed's run")


def validate_outputs(spec: Spec, runs: list | None = None) -> list[str]:
    """'file: key: reason' errors of the spec's figures, claims and paper values.

    Column names are checked against the run table of ``runs`` (default: the default profile's
    runs): ``label``, ``n_params`` and every dotted config key; metrics against
    ``aggregate.metrics`` (and ``n_params`` for paper values).
    """
    path = spec.path or spec.id
    errors: list[str] = []
    if spec.analytic is not None:
        try:
            known, metrics = analytic_columns(spec)
        except KeyError as err:
            return [f"{path}: analytic.table: {err.args[0]}"]
        sets: set[str] = set()
        errors += _analytic_aggregate_problems(spec, metrics)
    else:
        if runs is None:
            runs = expand(spec, spec.default_profile)
        # one run per (label, model and task type) has every config key of its kind
        reps = {(r.label, type(r.model).__name__, type(r.task).__name__): r for r in runs}
        known = {LABEL, N_PARAMS} | {k for r in reps.values() for k in r.flat()}
        metrics = set(spec.aggregate.metrics) | set(analysis_metrics(spec.analysis))
        # the spread columns the aggregation writes beside each metric (report.cells.aggregate)
        metrics |= {f"{m}.std" for m in spec.aggregate.metrics} | {
            f"{m}.p{q:g}" for m in spec.aggregate.metrics for q in spec.aggregate.percentiles}
        sets = set(HISTORY_SETS) | {n for r in runs for n in r.train.evals}
        if "decay_histogram" in spec.analysis:
            errors += _no_decay_hook(path, reps.values())
        errors += _weight_analysis_problems(path, spec.analysis, reps.values())

    n_cases = max((len(str(r.label).split(LABEL_SEP)) for r in runs or []), default=0)
    checked: list[tuple[str, Any]] = []  # (key, config) whose columns all exist

    def no_metric(what: str, listed: str | None = "aggregate.metrics") -> str:
        """Why a metric has no column. An analytic spec's metrics are its table's: 'is not
        aggregated (aggregate.metrics: ...)' sent the reader to aggregate.metrics, which an
        analytic table does not read (adding the name there changed nothing)."""
        if spec.analytic is not None:
            return (f"{what} is not a metric of analytic table {spec.analytic.table!r} (its "
                    f"metrics: {sorted(metrics)})")
        return f"{what} is not aggregated" + (f" ({listed}: {sorted(metrics)})" if listed else "")

    def refs(key: str, cfg: Any) -> None:
        n = len(errors)
        for c in cfg.column_refs():
            if c == SEED and not isinstance(cfg, CurvesConfig):  # curves draw each run
                errors.append(f"{path}: {key}: {_SEED_WHY}")
            elif c not in known and not is_case_ref(c):
                errors.append(f"{path}: {key}: unknown column {c!r} (not a config key of this "
                              "spec's runs, nor label / case:<i>)")
            elif (is_case_ref(c) and n_cases and int(c[len(CASE_PREFIX):]) >= n_cases
                  and c not in getattr(cfg, "panel_refs", list)()):
                # every label lacks it: '' for every cell (unnamed bars, one hue, MISSING)
                errors.append(f"{path}: {key}: {c!r}: the runs' labels have at most {n_cases} "
                              f"case label(s) (case:0{f' to case:{n_cases - 1}' if n_cases > 1 else ''})")
        drawn = set(cfg.column_refs())
        for k in getattr(cfg, "names", None) or {}:  # a misspelt key ('model.dmodel') was
            if k not in drawn:  # ignored without a word: the axis kept its default name
                errors.append(f"{path}: {key}.names.{k}: names no column this figure draws "
                              f"({', '.join(sorted(drawn)) or 'none'})")
        if len(errors) == n:
            checked.append((key, cfg))

    spread = _spread_columns(spec)
    # a float32 run's loss, if finite, is at most the largest float32 (a claim `test.loss <=
    # 1e308` PASSed for any finite loss); judged with every profile's runs, as `validate`
    # gives them (`run --profile smoke`, float32, refused a bound the paper profile's float64
    # runs can miss, which `validate` accepted)
    every_profile = bool(runs) and set(spec.profiles) <= {r.profile for r in runs}
    loss_max = FLOAT32_MAX if every_profile and all(
        getattr(r.train, "dtype", None) == "float32" for r in runs) else None
    stems = set()
    files: dict[str, tuple[str, str, str]] = {}  # folded file -> (key, profile, file)
    losses: set[str] | None = None  # the runs' task losses (_task_losses), once needed
    for i, (key, raw) in enumerate(spec.figure_configs):
        try:
            cfg = parse_figure(raw)
        except KeyError as err:
            errors.append(f"{path}: {key}.kind: {err.args[0]}")
            continue
        except ValidationError as err:
            errors += format_errors(path, err, prefix=f"{key}.",
                                    model=FIGURE_KINDS[raw["kind"]].Config)
            continue
        refs(key, cfg)
        if "metric" in cfg.model_fields_set and cfg.metric not in cfg.metrics():
            # a kind that draws other columns (curves' series, length_curves' pattern, a
            # phase's panels) or an analysis: `metric: test.loss` was accepted and the figure
            # drew what it always draws, without a word
            draws = [*cfg.metrics(), *cfg.history_metrics()]
            errors.append(f"{path}: {key}.metric: kind {cfg.kind} does not read metric (it draws "
                          + (", ".join(draws) if draws else "its analysis")
                          + "; its fields: ssmrepro list-figures); leave metric out")
        errors += [f"{path}: {key}.{why}"
                   for why in getattr(cfg, "analytic_problems", lambda _: [])(spec)]
        errors += [f"{path}: {key}.metric: {no_metric(repr(m))}"
                   + (" (a band's column: aggregate.percentiles, or lo / hi: null)"
                      if re.search(r"\.p[0-9.]+$", m) else "")
                   for m in cfg.metrics() if m not in metrics]
        errors += [f"{path}: {key}.kind: {cfg.kind} needs `analysis: [{a}]`"
                   for a in cfg.analyses() if a not in spec.analysis]
        errors += _unreachable(path, [(f"{key}.{o}", m, v) for o, m, v in cfg.levels()],
                               _spread_columns(spec))
        errors += _scale_past_every_value(path, key, cfg, spread, loss_max)
        errors += [f"{path}: {key}: {m!r} is not in the runs' evaluation history (sets: "
                   f"{sorted(sets)}; metrics <set>.acc, <set>.loss or <set>.mse)"
                   for m in cfg.history_metrics()
                   if history_metric_sets(m) not in sets or m.rsplit(".", 1)[-1] not in
                   ("acc", "loss", "mse")]
        scores = [m for m in cfg.history_metrics() if m.rsplit(".", 1)[-1] in _SCORE_OF]
        if scores and runs:  # val.acc of a regression task: a figure without a curve
            losses = losses or _task_losses(runs) or {*_SCORE_OF.values()}
            errors += [f"{path}: {key}: {m!r} is not in the runs' evaluation history "
                       f"({_score_kind(losses)})" for m in scores
                       if _SCORE_OF[m.rsplit(".", 1)[-1]] not in losses]
        stem = figure_stem(cfg, i)
        if SET_TAG.search(stem):  # figure-set-fcd9b6.png: the first figure run with --set
            errors.append(f"{path}: {key}.name: {stem!r} ends in set-<6 hex digits>, the file "
                          "tag of a run with --set (it would replace such a figure)")
        elif stem in stems:
            errors.append(f"{path}: {key}.name: two figures write {stem!r}")
        else:  # and across profiles: a figure named figure-smoke in the default profile wrote
            for prof in spec.profiles:  # over the first figure of profile smoke
                file = output_name(spec, prof, stem, "png")
                folded = file.casefold()  # Fig.png and fig.png: one file on macOS or Windows
                if folded in files and files[folded][0] != key:
                    other, other_prof, other_file = files[folded]
                    errors.append(f"{path}: {key}.name: {stem!r} writes {file} in profile "
                                  f"{prof}, the file of {other} in profile {other_prof}"
                                  + ("" if other_file == file else
                                     f" ({other_file} on a case-insensitive disk)"))
                    break
                files.setdefault(folded, (key, prof, file))
        stems.add(stem)
    seen_claims: dict[str, int] = {}
    run_index = CellIndex(_config_rows(runs)) if runs else None
    dtype_index = run_index if every_profile else None  # (``_float32_only``'s, as loss_max)
    for i, raw in enumerate(spec.claims):
        key = f"claims.{i}"
        try:
            cfg = report.parse_claim(raw)
            same = seen_claims.setdefault(_claim_identity(cfg), i)
            if same == i and run_index is not None:  # or its `where` names the same runs by
                # other keys (label: S6 and model.mixer: s6): one verdict, printed twice
                same = seen_claims.setdefault(_claim_identity(cfg, run_index), i)
            if same != i:  # its verdict twice in every report, counted twice in the tally
                errors.append(f"{path}: {key}: the same claim as claims.{same} (each claim once)")
                continue
        except KeyError as err:
            errors.append(f"{path}: {key}.check: {err.args[0]}")
            continue
        except ValidationError as err:
            errors += format_errors(path, err, prefix=f"{key}.",
                                    model=report.CHECKS[raw.get("check", report.DEFAULT_CHECK)].Config)
            continue
        refs(key, cfg)
        claim_max = loss_max if loss_max is not None else _float32_only(cfg, dtype_index)
        try:
            needs = report.metric_names(cfg.metric)
        except ExprError as err:
            errors.append(f"{path}: {key}.metric: {err}")
            continue
        never = report.never_defined(cfg.metric)
        if never:  # every cell read as a miss: FAIL 'diverged/NaN' though none diverged
            errors.append(f"{path}: {key}.metric: {cfg.metric!r} has no value whatever the "
                          f"metrics are ({never})")
        same = report.constant_value(cfg.metric)
        if same is not None:  # every cell judged alike, whatever was measured
            errors.append(f"{path}: {key}.metric: {cfg.metric!r} is {same:g} whatever the "
                          "metrics are (the claim reads no run)")
        if not needs <= metrics:
            what = (repr(cfg.metric) if needs == {cfg.metric}
                    else f"{cfg.metric!r} needs {sorted(needs - metrics)}, which")
            errors.append(f"{path}: {key}.metric: "
                          f"{no_metric(what, 'aggregate.metrics and analysis metrics')}")
        plain_given = []  # (j, given) on one metric's name: range-checked ('2 * test.acc >=
        # 1.5' is no accuracy above 1)
        valid_given = []  # (j, given) whose expression parses: an expression's own range too
        for j, g in enumerate(cfg.given):  # an unknown metric read as NaN: the precondition
            try:  # held for every cell, and the claim could PASS on an unfitted model
                gneeds = report.metric_names(g.metric)
            except ExprError as err:
                errors.append(f"{path}: {key}.given.{j}.metric: {err}")
                continue
            if gneeds == {g.metric}:
                plain_given.append((j, g))
            valid_given.append((j, g))
            never = report.never_defined(g.metric)
            if never:
                errors.append(f"{path}: {key}.given.{j}.metric: {g.metric!r} has no value "
                              f"whatever the metrics are ({never})")
            same = report.constant_value(g.metric)
            if same is not None:
                errors.append(f"{path}: {key}.given.{j}.metric: {g.metric!r} is {same:g} "
                              "whatever the metrics are (the precondition reads no run)")
            if not gneeds <= metrics:
                errors.append(f"{path}: {key}.given.{j}.metric: "
                              f"{no_metric(repr(g.metric), 'aggregate.metrics and analysis metrics')}")
        bounds = [(f"{key}.{f}", cfg.metric, getattr(cfg, f)) for f in ("value", "threshold")
                  if needs == {cfg.metric} and isinstance(getattr(cfg, f, None), float)]
        bounds += [(f"{key}.given.{j}.value", g.metric, g.value) for j, g in plain_given]
        errors += _unreachable(path, bounds, spread)
        # of an expression too: it has no value past ±MAX_MAGNITUDE (`2 * test.loss <= 1e308`
        # PASSed any loss)
        strict = [(f"{key}.value", cfg.metric, cfg.op, cfg.value)] if \
            isinstance(getattr(cfg, "op", None), str) and isinstance(getattr(cfg, "value", None),
                                                                     float) else []
        strict += [(f"{key}.given.{j}.value", g.metric, g.op, g.value) for j, g in valid_given]
        if cfg.check in ("size_order", "recall_frontier"):  # every cell 'solves' it (or
            # none): the verdict was the grid's, whatever was trained (of an expression too:
            # `test.acc + 1` reaches 0.9 in every cell, `-test.acc` in none)
            strict.append((f"{key}.threshold", cfg.metric, ">=", cfg.threshold))
        errors += _never_holds(path, strict, spread, claim_max)
        errors += _always_holds(path, strict, spread, claim_max)
        errors += _given_implies(path, key, cfg)
        if needs == {cfg.metric} and cfg.check in ("size_order", "recall_frontier") and is_loss(
                (spread or {}).get(cfg.metric, cfg.metric)):
            # 'reaches the threshold' is metric >= threshold: of a loss, the sizes that have
            # not learnt (the smallest such size was judged as the smallest that solves)
            errors.append(f"{path}: {key}.metric: {cfg.metric} is a loss, but {cfg.check} "
                          f"reads 'solved' as {cfg.metric} >= threshold (a high loss); use a "
                          f"score, or the loss negated (-{cfg.metric} with a negated threshold)")
        if isinstance(cfg, OrderingConfig):  # (an expression's range too)
            errors += _ordering_always_holds(path, key, cfg, spread, claim_max)
        if cfg.check in ("monotone", "spread", "collapse"):  # (an expression's range too)
            errors += _any_accuracy(path, f"{key}.tol", cfg.metric, cfg.tol, spread, claim_max)
        if isinstance(cfg, LogLogSlopeConfig) and every_profile:  # (as a frontier's factor:
            # one profile's grid, as `run --profile smoke` validates, refused a tol its paper
            # grid can fail)
            errors += _any_slope(path, key, cfg, run_index, [r.profile for r in runs], spread,
                                 claim_max, runs)
        if isinstance(cfg, LogLogSlopeConfig) and spec.analytic is not None:  # (its grid, the
            # table of every profile: `tol: 1e308` on yu2025-fig5 was accepted)
            grid = CellIndex(_analytic_grid(spec))
            errors += _any_slope(path, key, cfg, grid, [""] * len(grid.cells), spread, None)
        if isinstance(cfg, RecallFrontierConfig) and every_profile:  # (one profile's runs,
            # as `run` validates, are not judged: a factor beyond that profile's grid alone is
            # no factor beyond the paper's)
            errors += _any_frontier(path, key, cfg, runs, run_index)
        # (of float32 runs a loss's range too: `min_range: 1e39` on test.loss never PASSed)
        rng = _bounded_range(cfg.metric, spread, claim_max) if isinstance(cfg, CollapseConfig) \
            else None
        if rng and cfg.min_range > rng[1] - rng[0]:  # it FAILed always (an analysis share's too)
            if rng[2] == "accuracies":
                errors.append(f"{path}: {key}.min_range: {cfg.min_range:g} for {cfg.metric}: "
                              "accuracies lie in [0, 1], so their group means never span more "
                              "than 1 and the claim could never PASS (a percentage? accuracies "
                              "are fractions)")
            else:
                errors.append(f"{path}: {key}.min_range: {cfg.min_range:g} for {cfg.metric}: "
                              f"{rng[2]} lies in [{rng[0]:g}, {rng[1]:g}], so group means never "
                              f"span more than {rng[1] - rng[0]:g} and the claim could never "
                              "PASS")
    if runs and not errors:  # every column exists: check what the cells hold
        errors += _cell_problems(spec, checked, runs)
    sel = spec.aggregate.select
    if sel is not None and sel.by in analysis_metrics(list(ANALYSIS_METRICS)):
        # computed per cell after the choice (from records or weights): every candidate's score
        # read no value, and the first candidate was kept whatever its analysis said
        errors.append(f"{path}: aggregate.select.by: {sel.by!r} is an analysis metric, measured "
                      "per cell after the selection: choose by a metric of the runs (e.g. "
                      "train.avg_loss, val.acc)")
    for prof in dict.fromkeys(r.profile for r in runs) if sel is not None else ():
        # an evaluation set the profile's runs lack: no candidate had a score, and the first
        # was kept as 'the chosen' value of every cell, complete, without a word
        lacking = report.unmeasured_sets([sel.by], {n for r in runs if r.profile == prof
                                                    for n in r.train.evals})
        if lacking:
            errors.append(f"{path}: aggregate.select.by: {sel.by!r} reads the evaluation set "
                          f"{lacking[0]!r}, which profile {prof}'s runs do not have "
                          "(train.evals), so the selection would choose nothing there")
    if sel is not None and sel.over not in report.cell_keys(runs):
        errors.append(f"{path}: aggregate.select.over: {sel.over!r} is not a swept key of this "
                      "profile's runs")
    elif sel is not None and every_profile:
        # `over: label` (or a key set with the label): each group of cells equal but for it held
        # one cell, and the 'selection' kept every cell (in every profile: a smoke profile of
        # one lr is a fine pipeline check, so one profile's runs alone are not judged)
        keys = report.cell_keys(runs)
        values: dict[tuple, set[str]] = {}
        for r in runs:
            flat = r.flat()
            cell = {k: str(r.label if k == LABEL else flat.get(k)) for k in keys}
            rest = (r.profile, *(v for k, v in cell.items() if k != sel.over))
            values.setdefault(rest, set()).add(cell[sel.over])
        if max(len(v) for v in values.values()) < 2:
            errors.append(f"{path}: aggregate.select.over: no two cells differ in {sel.over!r} "
                          "alone (it varies only together with other cell keys), so the "
                          "selection would choose nothing: name the swept key to choose over "
                          "(e.g. train.lr)")
    if sel is not None:  # the kept row of a group holds its chosen value of `over`: a where
        # naming a value matched only while that value was the one kept (a claim MISSING 'no
        # cell the claim needs', a paper value 'not run', every run finished)
        named = [(f"paper_values.{i}.where", pv.where) for i, pv in enumerate(spec.paper_values)]
        named += [(f"{key}.{f}", getattr(cfg, f)) for key, cfg in checked
                  if key.startswith("claims.") for f in ("where", "a", "b")
                  if isinstance(getattr(cfg, f, None), dict)]
        errors += [f"{path}: {key}.{sel.over}: aggregate.select.over keeps one value of "
                   f"{sel.over} per cell (the best by {sel.by}), so no cell is chosen by it"
                   for key, where in named if sel.over in where]
        # matched, grouped or ordered by it (match, group_by, along, x, size, by): cells were
        # compared by the value each happened to choose (an ordering matched on train.lr was
        # judged where both chose one lr and MISSING where they did not)
        errors += [f"{path}: {key}: names {sel.over} (outside `where`), the key "
                   f"aggregate.select.over chooses per cell (the best by {sel.by}): cells would "
                   "be matched, grouped or ordered by the value each happened to choose; leave "
                   "it out"
                   for key, cfg in checked if key.startswith("claims.")
                   and isinstance(cfg, CheckConfig)
                   and sel.over in cfg.column_refs()
                   and not any(sel.over in (getattr(cfg, f, None) or {}) for f in
                               ("where", "a", "b"))]
    one_seed = every_profile and spec.paper_values and all(
        _most_seeds(rs, report.cell_keys(rs)) < 2 for rs in _by_profile(runs).values())
    for i, pv in enumerate(spec.paper_values):
        spreads = seed_spreads(pv.metric) if one_seed else []
        if spreads:  # a cell of one seed has no spread: 'not measured' in every profile
            errors.append(f"{path}: paper_values.{i}.metric: {', '.join(spreads)} is a spread "
                          "over seeds, but each cell has one seed in every profile: it would "
                          "never be measured nor match")
        for k in pv.where:
            if k == SEED:
                errors.append(f"{path}: paper_values.{i}.where.{k}: {_SEED_WHY}")
            elif k not in known:
                errors.append(f"{path}: paper_values.{i}.where.{k}: unknown column {k!r}")
        if pv.metric not in metrics | {N_PARAMS}:
            errors.append(f"{path}: paper_values.{i}.metric: {no_metric(repr(pv.metric), None)}")
        pv_max = loss_max if loss_max is not None else _float32_only(pv, dtype_index)
        errors += _unreachable(path, [(f"paper_values.{i}.value", pv.metric, pv.value)], spread,
                               pv_max)
        if spread.get(pv.metric) == _STD and pv.value < 0:  # as a negative loss: never matched
            errors.append(f"{path}: paper_values.{i}.value: {pv.value:g} for {pv.metric}, a "
                          "negative spread (a standard deviation is never below 0)")
        errors += _any_accuracy(path, f"paper_values.{i}.tol", pv.metric, pv.tol, spread,
                                pv_max)
        # (of float32 runs a loss's range too: 2e38 ± 2e38 matched any loss, as a tol of 1e39)
        rng = _bounded_range(pv.metric, spread, pv_max)
        if rng and pv.tol < rng[1] - rng[0] and \
                pv.value - pv.tol <= rng[0] and pv.value + pv.tol >= rng[1]:  # 0.5 ± 0.5
            what = "accuracy" if rng[2] == "accuracies" else f"value of {rng[2]}"
            errors.append(f"{path}: paper_values.{i}.tol: {pv.value:g} ± {pv.tol:g} covers every "
                          f"{what} [{rng[0]:g}, {rng[1]:g}]: any {pv.metric} would match")
    if not errors and spec.analytic is None and runs:
        # `run`, `plot` and `verify` check these too (only `validate` did, and a spec it refused
        # trained and compared the paper's one number with the mean of several cells)
        errors += _paper_value_identities(spec, runs)
    return errors


_EXPRESSION_FIELDS = ("metric", "by", "region")  # the claim fields that hold an expression


def _float32_only(cfg: Any, runs: CellIndex | None) -> float | None:
    """``FLOAT32_MAX`` where the ``where`` of a claim or paper value (``cfg``) selects float32
    runs only (of a sweep over ``train.dtype``: `test.loss <= 1e308` with `where: {train.dtype:
    float32}` PASSed for any loss, though refused where every run is float32), else None."""
    where = getattr(cfg, "where", None)
    if runs is None or not isinstance(where, dict) or not where or not all(
            has_column(runs.cells, k) for k in (*where, "train.dtype")):
        return None
    found = runs.positions(where)
    dtypes = runs.values("train.dtype")
    return FLOAT32_MAX if found and all(dtypes[i] == "float32" for i in found) else None


def _claim_identity(cfg: CheckConfig, runs: CellIndex | None = None) -> str:
    """What tells two claims apart: every field, with a ``where`` (``a``, ``b``) in any key
    order, its any-of lists in any order, the preconditions in any order and the text's
    spacing ignored (``{label: S6, model.d_model: 8}`` and ``{model.d_model: 8, label: S6}``
    made two claims with one verdict, printed and counted twice). With ``runs`` (an index of
    every profile's runs) a ``where`` is the runs it selects, whatever keys name them."""
    d = cfg.model_dump(mode="json")
    if runs is not None:
        for f in ("where", "a", "b"):
            where = getattr(cfg, f, None)
            if isinstance(where, dict) and where and all(has_column(runs.cells, k)
                                                         for k in where):
                found = runs.positions(where)  # none: 'matches no run', reported elsewhere
                d[f] = {"(runs)": found} if found else d[f]
    d["text"] = " ".join(str(d.get("text", "")).split())
    for f in _EXPRESSION_FIELDS:  # `test.acc` and `(test.acc)` made two claims
        if isinstance(d.get(f), str):
            d[f] = expr.normal_form(d[f])
    for f in ("where", "a", "b"):
        if isinstance(d.get(f), dict) and "(runs)" not in d[f]:
            d[f] = _where_identity(d[f])
    if isinstance(d.get("given"), list):
        for g in d["given"]:
            if isinstance(g, dict) and isinstance(g.get("metric"), str):
                g["metric"] = expr.normal_form(g["metric"])
        d["given"] = sorted(d["given"], key=lambda g: json.dumps(g, sort_keys=True))
    return json.dumps(d, sort_keys=True)


def _where_identity(where: dict[str, Any]) -> dict[str, Any]:
    """A ``where`` as it selects cells: each value a sorted list of the values it admits, numbers
    by value (``label: [S6]`` is ``label: S6``, ``model.d_model: 8.0`` is ``8``: they made two
    claims, or two paper values, of one cell)."""
    out = {}
    for k, v in where.items():
        vals = v if isinstance(v, list) else [v]
        out[k] = sorted({repr(str(x) if k == LABEL else norm(x)) for x in vals})
    return out


def _paper_value_identities(spec: Spec, runs: list) -> list[str]:
    """'file: key: reason' for two paper values of one cell and metric (the report would compare
    the cell with either) and for a paper value whose ``where`` matches several cells of a
    profile of ``runs``."""
    path = spec.path or spec.id
    errors: list[str] = []
    seen: dict[str, int] = {}
    for i, pv in enumerate(spec.paper_values):
        ident = repr((expr.normal_form(pv.metric), sorted(_where_identity(pv.where).items())))
        if ident in seen:
            errors.append(f"{path}: paper_values.{i}: the same cell and metric as "
                          f"paper_values.{seen[ident]} (one paper value per cell and metric)")
        seen.setdefault(ident, i)
    return errors + _paper_values_of_several_cells(spec, runs)


def _shown(where: dict[str, Any]) -> str:
    return pairs_text(where.items()) or "(every cell)"


def _is_number(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float, np.integer, np.floating))
                         and not isinstance(v, (bool, np.bool_)))


def _cell_problems(spec: Spec, items: list[tuple[str, Any]], runs: list) -> list[str]:
    """'file: key: reason' for figures and claims whose columns exist but whose cells, per
    profile, cannot be drawn or judged as written (each raised or misled after training):

    * a column read as a number (a numeric or log axis, a size) that holds text (``label``);
    * an expression (a theory line, a claim's ``region`` or ``by``) that cannot be evaluated
      for some cell (a division by zero, a logarithm of 0, text compared with a number);
    * two cells that a figure would draw on one spot (same panel, row, x and y): the last
      hid the first with no sign of it;
    * runs a kind cannot draw (``FigureConfig.run_problems``)."""
    path = spec.path or spec.id
    over = spec.aggregate.select.over if spec.aggregate.select is not None else None
    errors: list[str] = []
    profiles = _by_profile(runs)
    judged: set[str] = set()  # claims some profile can judge
    can_fail: set[str] = set()  # claims some profile's cells can fail
    unfailing: dict[str, dict[str, list[str]]] = {}  # claim key -> why -> profiles
    unjudged: dict[str, list[str]] = {}  # claim key -> why each profile cannot judge it
    paper_unjudged: dict[str, tuple[str, Any, str]] = {}  # claim key -> why the paper profile
    # cannot judge it, the claim, what it lacks
    paper_index: list[CellIndex] = []  # the paper profile's cells, indexed once for its claims
    for profile, rs in profiles.items():
        keys = [k for k in report.cell_keys(rs) if k != over]
        rows = _config_rows(rs)
        if any(N_PARAMS in (getattr(cfg, "positions", lambda: None)() or [])
               for _, cfg in items):  # a bands figure over the parameter count
            counts = _param_counts(rs)
            if counts is not None:
                rows[N_PARAMS] = counts
        rows = rows.drop(columns="seed")
        rows = rows[~rows.astype(str).duplicated()].reset_index(drop=True)
        for key, cfg in items:
            for c in getattr(cfg, "numeric_refs", lambda: [])():
                vals = column(rows, c) if has_column(rows, c) else []
                text = next((v for v in vals if not _is_number(v)), None)
                if text is not None:
                    errors.append(f"{path}: {key}: {c!r} is read as a number, but holds "
                                  f"{text!r} (a text column cannot be a numeric or log axis)")
            logs = getattr(cfg, "log_refs", lambda: [])()
            where = (cfg.cell_filter() if isinstance(cfg, FigureConfig)
                     else getattr(cfg, "where", {})) if logs else {}
            used = report.select(rows, where) if where else rows  # the cells it reads
            for c in logs:
                vals = column(used, c) if has_column(used, c) else []
                low = next((v for v in vals if v is not None and _is_number(v)
                            and not float(v) > 0), None)
                if low is not None:  # clipped to the axis edge, or a slope that always FAILed
                    errors.append(f"{path}: {key}: {c!r} is on a log scale (its logarithm is "
                                  f"taken), but is {low!r} in a run of profile {profile}: leave "
                                  "such runs out or use a linear scale")
            for field, text in cfg.cell_exprs():
                for _, row in rows.iterrows():
                    try:
                        value = expr.evaluate(text, cell_env(row))
                        if isinstance(value, str):  # a line at height 'S6' was never drawn
                            raise ValueError(f"it gives text ({value!r}), not a number")
                    except (ExprError, TypeError, ValueError) as err:
                        errors.append(f"{path}: {key}.{field}: cannot be evaluated for the cell "
                                      f"{_cell_text(row, keys)} of profile {profile}: {err}")
                        break
            if isinstance(cfg, CheckConfig):  # a claim that can never hold here
                cells = rows[~rows[keys].astype(str).duplicated()] if keys else rows.iloc[:1]
                errors += [f"{path}: {key}.{m}" for m in cfg.cell_problems(cells, keys, profile)]
                why = cfg.unjudged(cells, keys)  # None: judged here; '': no cell it needs
                spreads = seed_spreads(cfg.metric, cfg.given)
                one_seed = bool(why is None and spreads and _most_seeds(rs, keys) < 2)
                if one_seed:  # MISSING whatever is trained
                    why = (f"metric: {', '.join(spreads)} is a spread over seeds, but each cell "
                           "has one seed")
                if why is None:
                    judged.add(key)
                elif why:
                    unjudged.setdefault(key, []).append(f"{why} in profile {profile}")
                if profile == "paper" and not paper_index:
                    paper_index.append(CellIndex(cells))  # the same cells for every claim
                if profile == "paper" and why is None and any(
                        not paper_index[0].positions(w) for w in cfg.selectors()):
                    why = ""  # a where (an ordering's a or b) matches no cell of the profile
                if why is not None and profile == "paper":
                    # what it lacks: seeds for a spread over them, else the cells it names
                    fix = ("give the paper profile two seeds or more (its seeds)" if one_seed
                           else "add the cells it names to the paper profile's sweep (a value "
                           "of the paper's grid missing?)")
                    paper_unjudged[key] = (f".{why} in profile paper" if why else
                                           ": the paper profile has no cell it needs", cfg, fix)
                vacuous = cfg.unfailing(cells, keys)
                if vacuous is None:
                    can_fail.add(key)
                else:
                    unfailing.setdefault(key, {}).setdefault(vacuous, []).append(profile)
            if isinstance(cfg, FigureConfig):
                errors += [f"{path}: {key}.{m}" for m in cfg.run_problems(rs)]
                errors += _collisions(f"{path}: {key}", cfg, rows, keys, profile)
    if set(spec.profiles) <= set(profiles):  # only runs of every profile can tell 'never': a
        # run of one profile (smoke) short of the cells is an honest MISSING there, not refused
        errors += [f"{path}: {key}.{'; '.join(whys)}: it stays MISSING in every profile"
                   for key, whys in unjudged.items() if key not in judged]
        # the paper profile is the paper's own grid and settings: a claim of the paper it
        # cannot judge names a cell (a grid value) the profile lacks, and it read MISSING at the
        # paper's settings (cooper2026-fig16's state 6, named by the paper's sentence)
        # (a where no run of any profile matches is refused as such, 'matches no run')
        every = CellIndex(_config_rows(runs)) if paper_unjudged else None
        errors += [f"{path}: {key}{why}, so the claim stays MISSING at the paper's settings: "
                   f"{fix}"
                   for key, (why, cfg, fix) in paper_unjudged.items() if key in judged
                   and all(every.positions(w) for w in cfg.selectors())]
        errors += [f"{path}: {key}."
                   + "; ".join(f"{why} (profile {', '.join(profs)})" for why, profs in whys.items())
                   + ": the claim cannot fail in any profile"
                   for key, whys in unfailing.items() if key not in can_fail]
    return list(dict.fromkeys(errors))


def _by_profile(runs: list) -> dict[str, list]:
    """``runs`` by profile."""
    out: dict[str, list] = {}
    for r in runs:
        out.setdefault(r.profile, []).append(r)
    return out


def _most_seeds(runs: list, keys: list[str]) -> int:
    """The most seeds any cell of ``runs`` (one profile's) has."""
    seeds: dict[tuple, set] = {}
    for r in runs:
        flat = {LABEL: r.label, **r.flat()}
        seeds.setdefault(tuple(norm(flat.get(k)) for k in keys), set()).add(r.seed)
    return max((len(v) for v in seeds.values()), default=0)


def _no_decay_hook(path: str, runs) -> list[str]:
    """'analysis: ...' for runs whose model has no mixer decay_histogram can probe (one line per
    model kind; a dataset task whose data is absent or unusable here, an empty or short corpus,
    is checked when its run starts: `plot`, `verify` and `figures` read no data,
    ``sweep.expand``'s ``data``)."""
    from ..analysis import has_decay_hook
    from ..tasks import DataUnavailable, build_task

    errors = []
    for r in runs:
        try:
            info = build_task(r.task).info
        except (DataUnavailable, ValueError):  # (`plot` of a text_corpus spec with an empty
            # corpus here: a ValueError traceback; `run` refuses it when it expands its runs)
            continue
        label = f" {r.label}" if r.label else ""
        if info.loss == "mse" or info.target == "sequence":  # targets (E, B, L, C) of numbers
            # or one label per sequence (E, B): no per-position split of labelled positions
            what = "a regression (loss mse" if info.loss == "mse" else "labelled per sequence ("
            errors.append(f"{path}: analysis: decay_histogram splits a classification task's "
                          f"positions into those before and after its labelled ones; task "
                          f"{r.task.name} of run{label} is {what}; its packs would train, then "
                          "fail)")
        elif r.task.name != "keep_nth":
            # the split is unlabelled vs labelled positions, which is 'before n' vs 'from n on'
            # only where the labelled positions are those from a fixed n on: induction heads'
            # first occurrences were drawn and judged as 't < n', its repeats as 't >= n'
            errors.append(f"{path}: analysis: decay_histogram splits the positions at KEEP "
                          "n-TH's n (t < n and t >= n, huang2025 Fig. 1); task "
                          f"{r.task.name} of run{label} has no such n (its labelled positions "
                          "are not those from some n on), so its histograms, claims and "
                          "figure would call unlabelled positions 'before n'; use task keep_nth")
        elif hasattr(r.model, "to_backbone") and not has_decay_hook(r.model, info):
            errors.append(f"{path}: analysis: decay_histogram needs a mixer with a decay hook "
                          f"(s6, s4d, delta_t, mamba1); the model of run{label} "
                          f"({r.model.name}) has none (its packs would train, then fail)")
    return list(dict.fromkeys(errors))


def _weight_analysis_problems(path: str, analyses: list[str], runs) -> list[str]:
    """'analysis: ...' for plot-time analyses a run cannot give: both read koren2026's MQAR
    layout (keys [1, V/2), values [V/2, V)), and ``mechanistic`` the circuit of a one-layer,
    single-head linear_mamba with d_conv 2 (its model built on the meta device). `mechanistic`
    on KEEP n-TH raised an AttributeError traceback in `plot` after training; `output_variance`
    there read other tokens as 'values' and reported numbers of nothing."""
    import torch

    from ..analysis.mechanistic import circuit
    from ..models import build_model
    from ..tasks import DataUnavailable, build_task

    wanted = [a for a in ("mechanistic", "output_variance") if a in analyses]
    errors = []
    for r in runs if wanted else []:
        label = f" {r.label}" if r.label else ""
        if r.task.name != "mqar":
            errors += [f"{path}: analysis: {a} reads the MQAR layout of task mqar (keys "
                       f"[1, V/2), values [V/2, V)); run{label} trains {r.task.name}"
                       for a in wanted]
        elif "mechanistic" in wanted and (r.task.key_repeats > 1 or r.task.num_passes > 1):
            # its facts, state and attention targets are the first 2 kappa tokens: key_repeats
            # puts a chunk of stale values there (queries ask the last chunk's), num_passes the
            # first of the repeated blocks; a model recalling right scored attn.hit 0
            what = (f"key_repeats {r.task.key_repeats} (the first chunk holds stale values; "
                    "queries ask the last chunk's)" if r.task.key_repeats > 1 else
                    f"num_passes {r.task.num_passes} (the block is repeated; queries are read "
                    "after the last pass)")
            errors.append(f"{path}: analysis: mechanistic reads the context as one block of "
                          f"facts, the first 2*kappa tokens (koren2026 Figs. 2-5); run{label} "
                          f"has {what}")
        if "mechanistic" in wanted and hasattr(r.model, "to_backbone"):
            try:
                with torch.device("meta"):
                    circuit(build_model(r.model, build_task(r.task).info, 1))
            except DataUnavailable:
                pass
            except ValueError as err:
                errors.append(f"{path}: analysis: {err} (run{label}: {r.model.name})")
    return list(dict.fromkeys(errors))


def _param_counts(runs: list) -> list[int] | None:
    """Each run's parameter count as its record will hold it (``models.param_count`` of the
    trainable parameters, on the meta device: nothing allocated; counting a frozen all-ones
    conv put two cells that draw on one spot apart), each distinct model and task config
    counted once; None when a task cannot be
    built here (a dataset not downloaded) or a model cannot be counted (reported elsewhere)."""
    from ..models import param_count
    from ..tasks import build_task

    seen: dict[tuple[str, str], int] = {}
    out = []
    for r in runs:
        key = (r.model.model_dump_json(), r.task.model_dump_json())
        if key not in seen:
            try:
                seen[key] = param_count(r.model, build_task(r.task).info, trainable=True)
            except Exception:  # noqa: BLE001 (missing data, a model its blocks refuse: elsewhere)
                return None
        out.append(seen[key])
    return out


def _cell_text(row: pd.Series, keys: list[str]) -> str:
    return pairs_text((k, row[k]) for k in keys if k in row)


def _collisions(where: str, cfg: FigureConfig, rows: pd.DataFrame, keys: list[str],
                profile: str) -> list[str]:
    """Two cells of ``rows`` that ``cfg`` draws on one spot (``FigureConfig.placed``)."""
    sub = report.select(rows, cfg.cell_filter()) if cfg.cell_filter() else rows
    for part, pos in cfg.placed(sub, keys):
        errors = _collisions_in(where, cfg, part, pos, keys, profile)
        if errors:
            return errors
    return []


def _collisions_in(where: str, cfg: FigureConfig, sub: pd.DataFrame, pos: list[str] | None,
                   keys: list[str], profile: str) -> list[str]:
    """Two cells of ``sub`` at one spot, placed by the columns ``pos``."""
    # pos []: one curve for every cell, any two cells collide
    if pos is None or not all(has_column(sub, c) for c in pos):
        return []
    # each column's text once (a frame per row made koren2026-fig6's paper grid seconds long)
    spot_of = list(zip(*(column(sub, c).map(str) for c in pos))) if pos else [()] * len(sub)
    cell_of = list(zip(*(sub[k].map(str) for k in keys if k in sub))) or [()] * len(sub)
    spots: dict[tuple, int] = {}
    for i, (spot, cell) in enumerate(zip(spot_of, cell_of)):
        at = spots.setdefault(spot, i)
        if cell_of[at] != cell:
            first, row = sub.iloc[at], sub.iloc[i]
            shown = ", ".join(f"{c}={v}" for c, v in zip(pos, spot)) or "no column of the " \
                "figure tells them apart"
            spot_name, harm = ("one curve", "their curves would be averaged step by step as if "
                               "they were seeds of one cell") if isinstance(cfg, CurvesConfig) \
                else ("one spot", "one would hide the other")
            return [f"{where}: the cells {_cell_text(first, keys)} and {_cell_text(row, keys)} "
                    f"of profile {profile} fall on {spot_name} ({shown}): {harm}; tell them "
                    "apart (a panel, hue or row column) or draw one (a `where`)"]
    return []


def _scale_past_every_value(path: str, key: str, cfg: Any, spread: dict[str, str],
                            loss_max: float | None) -> list[str]:
    """'file: key.vmax: ...' where a colour scale's top (a phase's ``vmax``) lies above every
    value its panels' metrics can take (an accuracy's 1; a float32 run's loss, the largest
    float32): `vmax: 100` (a percentage) drew every accuracy in the bottom colour, `vmax:
    1e308` printed matplotlib's raw `RuntimeWarning: overflow` lines too."""
    vmax = getattr(cfg, "vmax", None)
    if not isinstance(vmax, float) or not cfg.metrics():
        return []
    tops = []
    for m in cfg.metrics():
        rng = _bounded_range(m, spread, loss_max)
        if rng is None:  # a metric of no bounded range: any top can be reached
            return []
        tops.append(rng)
    top = max(tops, key=lambda r: r[1])
    if vmax <= top[1]:
        return []
    hint = "; a percentage? accuracies are fractions" if top[2] == "accuracies" else ""
    return [f"{path}: {key}.vmax: {vmax:g} lies above every value of {', '.join(cfg.metrics())} "
            f"({top[2]} {'lie' if top[2] == 'accuracies' else 'lies'} in [{top[0]:g}, "
            f"{top[1]:.4g}]{hint}): the colour scale would be "
            "spent on values none can take"]


def _bounded_range(metric: str, spread: dict[str, str] | None = None,
                   loss_max: float | None = None) -> tuple[float, float, str] | None:
    """(lowest, highest, what) of the values of ``metric`` where both ends are finite: an
    accuracy's [0, 1], or an analysis metric's (a share such as ``gkq.diag_hit``, a
    correlation); a percentile column (``spread``) as its metric's; a loss's [0, ``loss_max``]
    where given (the runs are float32: a finite loss is at most the largest float32); None
    otherwise. A metric expression's: every number in it lies within ``expr.MAX_MAGNITUDE``
    (past it, no value); a seed spread's (``<m>.std``, the population standard deviation): [0,
    half of m's range]; a parameter count's: [0, ``_MAX_COUNT``]."""
    base = (spread or {}).get(metric, metric)
    if _is_expression(metric):
        lo, hi = _expression_range(metric, spread, loss_max)
        return lo, hi, "an expression's value"
    if is_accuracy(base):
        return 0.0, 1.0, "accuracies"
    if loss_max is not None and is_loss(base):
        return 0.0, loss_max, "a float32 loss"
    if base == N_PARAMS:
        return 0.0, _MAX_COUNT, "a parameter count"
    if base == _STD and metric.endswith(".std"):  # values in [lo, hi] spread at most (hi-lo)/2
        of = _bounded_range(metric[:-len(".std")], spread, loss_max)
        return (0.0, (of[1] - of[0]) / 2, f"a standard deviation of {of[2]}") if of else None
    rng = analysis_range(base)
    return rng if rng and np.isfinite(rng[0]) and np.isfinite(rng[1]) else None


_MAX_COUNT = float(2**63 - 1)  # a parameter count: torch counts elements in 64-bit integers


def _expression_range(metric: str, spread: dict[str, str] | None,
                      loss_max: float | None) -> tuple[float, float]:
    """The values the expression ``metric`` can take (``expr.interval``), each metric it names
    within its own range (``_bounded_range``; any value where it has none)."""
    def of(name: str) -> tuple[float, float] | None:
        rng = _bounded_range(name, spread, loss_max)
        if rng is not None:
            return rng[:2]
        return (0.0, float("inf")) if is_loss((spread or {}).get(name, name)) else None

    return expr.interval(metric, of)


def _is_expression(metric: str) -> bool:
    """Whether ``metric`` is an expression of metrics (``2 * test.loss``), not one's name."""
    try:
        return report.metric_names(metric) != {metric}
    except ExprError:  # (reported as such)
        return False


def _any_accuracy(path: str, key: str, metric: str, tol: float,
                  spread: dict[str, str] | None = None,
                  loss_max: float | None = None) -> list[str]:
    """A tolerance as wide as the range of an accuracy ([0, 1]; a percentile column of one,
    ``spread``) or of an analysis metric of a finite range (a share, [0, 1]; a correlation,
    [-1, 1]) admits every value: a paper value 'matched' and a monotone, spread or collapse
    claim PASSed whatever was measured (a percentage point count, e.g. 5, read as a fraction;
    ``tol: 1`` on ``gkq.diag_hit`` was not refused). Of float32 runs (``loss_max``), a loss's
    range too: [0, the largest float32] (a spread claim with tol 1e308 PASSed any losses)."""
    rng = _bounded_range(metric, spread, loss_max)
    if rng is None or tol < rng[1] - rng[0]:
        return []
    if rng[2] == "accuracies":
        return [f"{path}: {key}: {tol:g} for {metric} admits any accuracy (accuracies lie in "
                "[0, 1]; a percentage? accuracies are fractions)"]
    hint = "; a percentage? shares are fractions" if rng[:2] == (0.0, 1.0) else ""
    return [f"{path}: {key}: {tol:g} for {metric} admits any value ({rng[2]} lies in "
            f"[{rng[0]:g}, {rng[1]:g}]{hint})"]


def _any_slope(path: str, key: str, cfg: LogLogSlopeConfig, index: CellIndex | None,
               profiles: list[str], spread: dict[str, str], loss_max: float | None,
               runs: list | None = None) -> list[str]:
    """A ``loglog_slope`` tolerance so wide that ``expected ± tol`` holds every slope the runs
    can give: the claim cannot fail (`tol: 1e308` PASSed any slope). A fitted slope is at most
    (H - L) / g in magnitude, where log metric lies in [L, H] (a positive float64, at most the
    top of the metric's range) and g is the least gap between two log x of a group the claim
    fits (the least-squares slope of values in an interval of width W is at most W / g). A
    slope is fitted per profile and group (``where``, ``group_by``) of at least ``min_points``
    values of x, so g is the least over those of every profile: one profile's gap alone (`run
    --profile smoke`, two widths) refused a tol that the paper profile's grid can fail, and the
    gap of every profile's x pooled (`validate`) let pass one that no group can fail. An x of
    ``n_params`` is each run's count as its record will hold it (``_param_counts``; `tol:
    1e308` on it was accepted, no column of the config giving x). ``index`` holds a row per
    run (or per point of an analytic spec's grid), ``profiles`` the profile of each."""
    if index is None or any(not has_column(index.cells, k) for k in (*cfg.where, *cfg.group_by)):
        return []
    xs_of = (index.values(cfg.x) if has_column(index.cells, cfg.x)
             else _param_counts(runs) if cfg.x == N_PARAMS and runs else None)
    if xs_of is None:  # (a task that cannot be built here: not judged)
        return []
    groups: dict[tuple, set[float]] = {}  # (profile, group) -> its positive x
    for pos in index.positions(cfg.where) if cfg.where else range(len(profiles)):
        try:  # (a run without the key, or text: no point; text is refused)
            x = float(xs_of[pos])
        except (TypeError, ValueError):
            continue
        group = (profiles[pos], *(str(index.values(k)[pos]) for k in cfg.group_by))
        if np.isfinite(x) and x > 0:
            groups.setdefault(group, set()).add(x)
    gaps = [float(np.min(np.diff(np.log(sorted(xs))))) for xs in groups.values()
            if len(xs) >= cfg.min_points]
    if not gaps:
        return []  # no group any profile judges (``unjudged``'s)
    gap = min(gaps)
    rng = _bounded_range(cfg.metric, spread, loss_max)
    top = rng[1] if rng and rng[1] > 0 else sys.float_info.max
    # the least positive float64 is 2**-1074 (its log taken as such: a subnormal read as 0
    # where the CPU flushes them, as torch may set it, made it -inf)
    span = math.log(top) + 1074 * math.log(2)
    most = span / gap if gap > 0 else np.inf
    if cfg.expected - cfg.tol > -most or cfg.expected + cfg.tol < most:
        return []
    return [f"{path}: {key}.tol: {cfg.expected:g} ± {cfg.tol:g} holds every slope of log "
            f"{cfg.metric} vs log {cfg.x} these runs can give (each lies within ±{most:.4g}: log "
            f"{cfg.metric} spans at most {span:.4g} and the closest values of {cfg.x} are "
            f"{gap:.4g} apart in log): the claim cannot fail; give the tolerance the paper's "
            "slope allows"]


def _any_frontier(path: str, key: str, cfg: RecallFrontierConfig, runs: list,
                  index: CellIndex | None) -> list[str]:
    """A ``recall_frontier`` ``factor`` or ``allowed_violations`` that no frontier of the runs'
    grid can exceed: the law's part or the monotone part of the claim cannot fail (`factor:
    1e300` PASSed any frontier as 'within ×1e300 of the law'). A frontier point is a cell (D,
    N) of its profile, regime and column, so the fitted N·D over the law's, a geometric mean of
    D·N / law(D) over the points, lies within the least and the largest of D·N / law(D) over
    the cells (where the law is finite: past it the ratio is 0, and fails any factor); a
    frontier of n widths has n - 1 steps. Groups of fewer than ``min_points`` widths are never
    judged (MISSING)."""
    if index is None or any(not has_column(index.cells, k) for k in (cfg.x, cfg.y, *cfg.regime)):
        return []
    # the ratio farthest from 1 either way (None: no cell where the law is finite), the most
    # steps of a frontier
    worst: float | None = None
    steps = 0
    for label, law_col in cfg.columns.items():
        a = law_constant(law_col, cfg.task)
        groups: dict[tuple, set[tuple[float, ...]]] = {}  # (D, N, V, N_f) per group
        for pos in index.positions({LABEL: label}):
            try:
                point = (float(index.values(cfg.x)[pos]), float(index.values(cfg.y)[pos]))
                reg = {k: float(index.values(k)[pos]) for k in (cfg.vocab, cfg.facts)}
            except (TypeError, ValueError):
                return []  # text where a number belongs: refused as such
            group = (runs[pos].profile, *(str(index.values(k)[pos]) for k in cfg.regime))
            groups.setdefault(group, set()).add((*point, reg[cfg.vocab], reg[cfg.facts]))
        for pts in groups.values():
            xs = sorted({p[0] for p in pts})
            if len(xs) < cfg.min_points:
                continue
            steps = max(steps, len(xs) - 1)
            with np.errstate(all="ignore"):
                law = refined_frontier_product(np.array([p[0] for p in pts]),
                                               np.array([p[2] for p in pts]),
                                               np.array([p[3] for p in pts]), a, cfg.threshold)
                ratios = np.array([p[0] * p[1] for p in pts]) / law
            ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
            if len(ratios):
                worst = max(worst or 1.0, float(ratios.max()), float(1 / ratios.min()))
    out = []
    if steps and worst is None:
        out.append(f"{path}: {key}.factor: the law puts no width of these runs within reach of "
                   f"{cfg.threshold:g} (its N·D is infinite at every one), so a frontier is "
                   "never within any factor of it: the claim cannot pass")
    elif steps and cfg.factor >= worst:
        out.append(f"{path}: {key}.factor: ×{cfg.factor:g} holds every frontier of these runs "
                   f"(each cell's D·N lies within ×{worst:.4g} of the law's N·D at its width, "
                   "so a fitted N·D does too): the law's part of the claim cannot fail; give "
                   "the factor the paper's agreement allows")
    if steps and cfg.allowed_violations >= steps:
        out.append(f"{path}: {key}.allowed_violations: {cfg.allowed_violations} admits every "
                   f"frontier of these runs (one has at most {steps + 1} widths, {steps} "
                   "steps): the monotone part of the claim cannot fail")
    return out


_STD = "std"  # the range of a standard deviation column: never below 0


def _spread_columns(spec: Spec) -> dict[str, str]:
    """The spread columns the aggregation writes beside each metric, and whose range their
    values share: ``<m>.p<q>`` -> m (a percentile of accuracies is an accuracy), ``<m>.std`` ->
    ``_STD`` (never below 0). ``test.acc.p50 > 1`` was not range-checked at all."""
    out = {f"{m}.p{q:g}": m for m in spec.aggregate.metrics for q in spec.aggregate.percentiles}
    return {**out, **{f"{m}.std": _STD for m in spec.aggregate.metrics}}


def _unreachable(path: str, values: list[tuple[str, str, float]],
                 spread: dict[str, str] | None = None,
                 loss_max: float | None = None) -> list[str]:
    """'file: key: reason' for each (key, metric, value) where no value of the metric can be
    (``store.metric_range_problem``: an accuracy outside [0, 1], e.g. a percentage): a claim on
    it could never pass (or a precondition never hold), a paper value never match (a negative
    ``n_params`` too). ``spread``:
    ``_spread_columns``. ``loss_max``: the runs are float32, whose losses, if finite, are at
    most it (a paper value of 1e308 was never matched; a claim's bound past it is
    ``_never_holds``' or ``_always_holds``', which say which)."""
    out = []
    for key, metric, v in values:
        # an expression is no metric's name: its range is its own (``_bounded_range``);
        # 'test.acc - val.acc' ends in '.acc', and a paper value or claim bound of -0.05 on it
        # (`100 * test.acc`: 95) was refused as 'an accuracy outside [0, 1]'
        base = "" if _is_expression(metric) else (spread or {}).get(metric, metric)
        # a share's range, a seed spread's (half its metric's: of float32 losses too), a count's
        rng = _bounded_range(metric, spread, loss_max)
        v = _on_range(metric, v, spread, loss_max)  # (rounding off an end is on it)
        why = metric_range_problem(base, [v]) or (  # a paper value n_params -5 never matched
            "a parameter count below 0" if base == N_PARAMS and v < 0 else None) or (
            f"above every float32 loss (a float32 loss lies in [0, {loss_max:.4g}])"
            if loss_max is not None and is_loss(base) and v > loss_max else None) or (
            f"outside the range of {rng[2]} ([{rng[0]:g}, {rng[1]:.4g}])"  # a share of 95 (%)
            if rng and not rng[0] <= v <= rng[1] else None)
        if why:
            out.append(f"{path}: {key}: {_as_given(v)} for {metric}, {why}"
                       + (" (a percentage? accuracies are fractions)" if is_accuracy(base)
                          else ""))
    return out


def _as_given(v: float) -> str:
    """``v`` as ``:g`` writes it where that is ``v``, else all its digits: a bound of
    0.9999999999 read `test.acc > 1 never holds`."""
    return f"{v:g}" if float(f"{v:g}") == v else repr(float(v))


def _on_range(metric: str, v: float, spread: dict[str, str] | None,
              loss_max: float | None = None) -> float:
    """``v``, or the end of ``metric``'s range (``_bounded_range``) it equals but for rounding
    (``checks.close``, as a verdict compares): a bound of 1.0000000005 on an accuracy is one
    that 1.0 meets (`>=`), not 'an accuracy outside [0, 1]'."""
    rng = _bounded_range(metric, spread, loss_max)
    return next((end for end in rng[:2] if close(v, end)), v) if rng else v


def _bounded(metric: str, v: float, spread: dict[str, str] | None,
             loss_max: float | None = None) -> tuple[float | None, float | None, str]:
    """(lowest, highest, what bounds it) of the values of ``metric`` (a spread column: its
    metric's; None: no bound that side); neither for a value out of range (``_unreachable``'s).
    An analysis metric's range as its own (a correlation's [-1, 1]: ``hidden.corr > 1`` and
    ``>= -1`` were accepted). ``v`` within rounding of an end of the range is on it."""
    base = (spread or {}).get(metric, metric)
    v = _on_range(metric, v, spread, loss_max)
    if _is_expression(metric):  # (past MAX_MAGNITUDE an expression has no value: a miss)
        m = float(expr.MAX_MAGNITUDE)
        lo, hi = _expression_range(metric, spread, loss_max)
        if (lo, hi) == (-m, m):
            return -m, m, f"an expression's value lies within ±{m:g}, past which it has none"
        return lo, hi, (f"{metric} lies in [{lo:g}, {hi:.4g}] where its metrics lie in "
                        f"their ranges; past ±{m:g} an expression has no value")
    if metric_range_problem(base, [v]):
        return None, None, ""
    if is_accuracy(base):
        return 0.0, 1.0, "an accuracy lies in [0, 1]"
    if is_loss(base):
        if loss_max is not None and v >= loss_max:  # (the runs are float32: `loss_max`)
            return 0.0, loss_max, f"a float32 loss lies in [0, {loss_max:.4g}]"
        return 0.0, None, "a loss is never below 0"
    if base == _STD:  # half its metric's range at most, where that is bounded
        rng = _bounded_range(metric, spread, loss_max)
        if rng is None or v <= 0:
            return 0.0, None if rng is None else rng[1], "a standard deviation is never below 0"
        if v > rng[1] and _bounded_range(metric, spread) is not None:
            return None, None, ""  # (``_unreachable``'s: out of its range whatever the dtype)
        return 0.0, rng[1], f"{rng[2]} lies in [0, {rng[1]:.4g}]"
    rng = analysis_range(base)  # a share (gkq.diag_hit) as an accuracy, a variance as a loss
    if rng is None or not rng[0] <= v <= rng[1]:
        return None, None, ""
    if np.isinf(rng[1]):
        return rng[0], None, f"{rng[2]} is never below {rng[0]:g}"
    return rng[0], rng[1], f"{rng[2]} lies in [{rng[0]:g}, {rng[1]:g}]"


def _never_holds(path: str, conditions: list[tuple[str, str, str, float]],
                 spread: dict[str, str] | None = None,
                 loss_max: float | None = None) -> list[str]:
    """'file: key: reason' for each (key, metric, op, value) that no accuracy can meet:
    ``> 1`` or ``< 0`` (an accuracy lies in [0, 1]; ``>= 1`` and ``<= 0`` can hold), nor a loss
    or a standard deviation (``< 0``), nor an analysis metric beyond its range (``_bounded``): a
    claim that FAILs (or a precondition that keeps it MISSING) whatever the runs measure.
    Bounds are compared as the verdict compares (``checks.OPS``, relative 1e-9): `acc >=
    1.0000000005` holds at 1.0 (it was refused), `acc > 0.9999999999` does not."""
    out = []
    for key, metric, op, v in conditions:
        lo, hi, what = _bounded(metric, v, spread, loss_max)
        if op not in OPS:
            continue
        if hi is not None and op in (">", ">=") and not OPS[op](hi, v):  # (only a
            # float32 loss's bound, `loss_max`, is below a value _bounded gives: `>= 1e308`)
            out.append(f"{path}: {key}: {metric} {op} {_as_given(v)} never holds ({what}"
                       + (")" if hi in (loss_max, expr.MAX_MAGNITUDE) else f"; >= {hi:g}?)"))
        elif lo is not None and op in ("<", "<=") and not OPS[op](lo, v):
            out.append(f"{path}: {key}: {metric} {op} {_as_given(v)} never holds ({what}"
                       + (f"; <= {lo:g}?)" if hi not in (None, expr.MAX_MAGNITUDE) else ")"))
    return out


def _always_holds(path: str, conditions: list[tuple[str, str, str, float]],
                  spread: dict[str, str] | None = None,
                  loss_max: float | None = None) -> list[str]:
    """'file: key: reason' for each (key, metric, op, value) that every accuracy, loss or
    standard deviation meets: ``acc >= 0``, ``acc <= 1``, ``loss >= 0`` (``> v`` / ``< v``
    beyond the bound are ``_unreachable``'s), or an analysis metric at its range's end
    (``hidden.corr >= -1``). A claim on it cannot fail (only a diverged run, NaN, missed it:
    the claim said no more than 'the run finished'); a precondition on it excludes no cell.
    Compared as the verdict compares (``checks.OPS``): `acc <= 0.9999999999` holds at 1.0."""
    out = []
    for key, metric, op, v in conditions:
        lo, hi, what = _bounded(metric, v, spread, loss_max)
        if op not in OPS:
            continue
        low = lo is not None and op in (">=", ">") and OPS[op](lo, v)
        high = hi is not None and op in ("<=", "<") and OPS[op](hi, v)
        if not (low or high):
            continue
        role = ("the precondition excludes no cell" if ".given." in key
                else "the claim cannot fail (only a diverged run misses it)")
        out.append(f"{path}: {key}: {metric} {op} {_as_given(v)} holds for every run ({what}): {role}; "
                   "give a value some run can miss")
    return out


def _given_implies(path: str, key: str, cfg: Any) -> list[str]:
    """'file: key.given.j: reason' for a precondition on the claim's own metric that implies the
    claim (``test.acc >= 0.9 given test.acc >= 0.9``, ``>= 0.8 given > 0.85``): every cell that
    meets it holds the claim and every other one is untestable, so it cannot fail (only a
    diverged run missed it), in a threshold, any_threshold or region claim alike."""
    op, value = getattr(cfg, "op", None), getattr(cfg, "value", None)
    if not isinstance(op, str) or not isinstance(value, float):
        return []
    out = []
    for j, g in enumerate(cfg.given):
        try:
            same = expr.normal_form(g.metric) == expr.normal_form(cfg.metric)
        except ExprError:
            continue  # reported as such
        up = op in (">=", ">")
        if not same or (g.op in (">=", ">")) != up:
            continue
        ahead = g.value > value if up else g.value < value  # strictly inside the claim's bound
        if ahead or (g.value == value and (op in (">=", "<=") or g.op == op)):
            out.append(f"{path}: {key}.given.{j}: {g.metric} {g.op} {g.value:g} implies the "
                       f"claim's {cfg.metric} {op} {value:g}: every cell that meets it holds "
                       "the claim and the others are untestable, so it cannot fail; a "
                       "precondition is on another metric (e.g. train.acc)")
    return out


def _ordering_always_holds(path: str, key: str, cfg: Any, spread: dict[str, str] | None = None,
                           loss_max: float | None = None) -> list[str]:
    """An ordering ``a >= factor·b + margin`` of a metric whose values lie in [lo, hi]
    (``_bounded_range``: an accuracy's [0, 1], a seed spread's, a share's, a float32 loss's, an
    expression's ±``expr.MAX_MAGNITUDE``) with ``margin <= lo - factor·hi``: every pair meets
    it, so the claim cannot fail; with ``margin > hi - factor·lo`` none does, so it cannot pass.
    Only accuracies were checked: `margin: -0.6` on ``test.acc.std`` (in [0, 0.5]), `-1e39` on
    float32 losses or `-3e12` on an expression PASSed whatever was trained, `1e39` FAILed."""
    rng = _bounded_range(cfg.metric, spread, loss_max)
    if rng is None:
        return []
    lo, hi, what = rng
    pairs = ("accuracies (in [0, 1])" if what == "accuracies"
             else f"values of {cfg.metric} ({what} lies in [{lo:g}, {hi:.4g}])")
    if cfg.margin <= lo - cfg.factor * hi:
        least = "-factor" if what == "accuracies" else f"{lo - cfg.factor * hi:.4g}"
        return [f"{path}: {key}.margin: {cfg.margin:g} with factor {cfg.factor:g} on "
                f"{cfg.metric}: every pair of {pairs} is in order, the claim "
                f"cannot fail; give a margin above {least}"]
    if cfg.margin > hi - cfg.factor * lo:  # the top beside the bottom is the most there is
        most = hi - cfg.factor * lo
        return [f"{path}: {key}.margin: {cfg.margin:g} on {cfg.metric}: no pair of {pairs} "
                f"is in order, the claim cannot pass; give a margin of at most {most:.4g}"]
    return []


# what a trained run records of each set (train.py): val / test / train and each named
# evaluation set (train.evals) its loss and score (acc, or mse for a regression task), val its
# best score and largest rise, train its recent average loss
_SET_METRICS = ("loss", "acc", "mse", "best_acc", "best_mse", "avg_loss", "max_rise")
# which of them each set records (store.SET_METRICS): a named evaluation set and test only their
# loss and score; `p34.best_acc` or `test.max_rise` passed as names some set records, and gave an
# empty column like `tets.acc`
_METRICS_OF = SET_METRICS


def _analytic_aggregate_problems(spec: Spec, metrics: set[str]) -> list[str]:
    """'file: aggregate...: reason' for what an analytic spec's ``aggregate`` names and its table
    never reads: a metric the table does not compute (``metrics: [ratio]`` beside yu_thm3's
    ratio_w, ratio_b, s4d_grad_b was accepted and ignored: no column, no word), percentiles or a
    selection (a table has one row per cell, no seeds to combine or choose from)."""
    path = spec.path or spec.id
    agg, table = spec.aggregate, spec.analytic.table
    out = []
    if "metrics" in agg.model_fields_set:  # the default test.acc is no one's choice
        out += [f"{path}: aggregate.metrics.{i}: {m!r} is not a metric of analytic table "
                f"{table!r} (its metrics: {sorted(metrics)})"
                for i, m in enumerate(agg.metrics) if m not in metrics]
    for key in ("percentiles", "select"):
        if getattr(agg, key):
            out.append(f"{path}: aggregate.{key}: analytic table {table!r} has one computed row "
                       "per cell (no seeds to combine or choose from): remove it")
    return out


def aggregate_metric_problems(spec: Spec, runs: list) -> list[str]:
    """'file: aggregate.metrics.<i>: reason' for a dotted metric no run of ``runs`` (every
    profile's) can record: its set is not val, test, train nor a named evaluation set of some run,
    or its name is not one a set records (``tets.acc`` or ``test.accc`` gave an empty column in
    every summary and report, without a word). Undotted names (analysis metrics) are not judged."""
    if spec.analytic is not None or not runs:
        return []
    path = spec.path or spec.id
    analysis = set(analysis_metrics(spec.analysis))
    evals = {n for r in runs for n in r.train.evals}
    sets = {*HISTORY_SETS, "test", *evals}
    out = []
    losses: set[str] | None = None
    for i, m in enumerate(spec.aggregate.metrics):
        if m in analysis or "." not in m:
            continue
        head, tail = m.split(".", 1)
        if head not in sets:
            out.append(f"{path}: aggregate.metrics.{i}: {m!r}: no run records it ({head!r} is "
                       f"not val, test, train nor a named evaluation set of train.evals: "
                       f"{sorted(evals) or 'none'})")
        elif tail not in _SET_METRICS:
            out.append(f"{path}: aggregate.metrics.{i}: {m!r}: no run records it (a set records "
                       f"{', '.join(_SET_METRICS)})")
        elif tail not in _METRICS_OF.get(head, ("loss", "acc", "mse")):
            what = "a named evaluation set" if head not in _METRICS_OF else head
            out.append(f"{path}: aggregate.metrics.{i}: {m!r}: no run records it ({what} records "
                       f"{', '.join(_METRICS_OF.get(head, ('loss', 'acc', 'mse')))} only)")
        elif tail in _SCORE_OF and _SCORE_OF[tail] not in (losses := losses or _task_losses(runs)
                                                             or {*_SCORE_OF.values()}):
            out.append(f"{path}: aggregate.metrics.{i}: {m!r}: no run records it "
                       f"({_score_kind(losses)})")
    return out


# the loss of the tasks whose runs record a score (train.py: acc for a cross-entropy task, mse
# for a regression task; test.acc of a regression task was an empty column of every summary,
# its figure 'not measured' and its claims MISSING for ever)
_SCORE_OF = {"acc": "cross_entropy", "best_acc": "cross_entropy", "mse": "mse", "best_mse": "mse"}


def _score_tail(name: str) -> str:
    """The metric a set records that ``name`` (``test.acc``, ``val.best_mse.std``,
    ``test.acc.p50``) reads: ``acc``, ``best_mse``."""
    return name.partition(".")[2].removesuffix(".std").split(".p")[0]


def _score_names(metrics: list[str]) -> list[str]:
    """The scores of a set (``test.acc``, ``long.best_mse``, their seed spreads and
    percentiles) that ``metrics`` (claim metrics or expressions) read, sorted."""
    names: set[str] = set()
    for m in metrics:
        try:
            names |= report.metric_names(m)
        except ExprError:
            continue
    return sorted(n for n in names if n.partition(".")[0] not in ("task", "model")
                  and _score_tail(n) in _SCORE_OF)


def _never_scored(name: str) -> str:
    """Why a run that does not record the score ``name`` (``_score_names``) does not: 'a
    regression task, scored by mse' (of test.acc), or the other way round."""
    return ("a regression task, scored by mse" if _SCORE_OF[_score_tail(name)] == "cross_entropy"
            else "a classification task, scored by acc")


def _score_kind(losses: set[str]) -> str:
    """'every run's task is a regression task, scored by mse' (or classification, acc) for the
    one loss of ``losses``."""
    return ("every run's task is a regression task, scored by mse" if "mse" in losses else
            "every run's task is a classification task, scored by acc")


def _task_losses(runs: list) -> set[str] | None:
    """The losses (``TaskInfo.loss``) of the runs' tasks, each distinct task config built once;
    None when one cannot be built here (a dataset not downloaded: not judged)."""
    from ..tasks import build_task

    seen: dict[str, str] = {}
    for r in runs:
        key = r.task.model_dump_json()
        if key not in seen:
            try:
                seen[key] = build_task(r.task).info.loss
            except Exception:  # noqa: BLE001 (missing data, any load error: judged elsewhere)
                return None
    return set(seen.values())


def where_problems(spec: Spec, runs: list) -> list[str]:
    """'file: key: reason' for a claim's ``where`` (``a`` / ``b`` of a comparison) that matches
    no run of ``runs`` (every profile's: a typo in a label or a value would otherwise only show
    as MISSING, forever); two paper values of one cell, or one of several cells, are
    ``validate_outputs``'s to report. A paper value may name a cell no profile trains (a number
    the paper quotes for reference)."""
    if spec.analytic is not None:
        return _analytic_where_problems(spec)
    if not runs:
        return []
    path = spec.path or spec.id
    errors: list[str] = []
    cells = _config_rows(runs)
    index = CellIndex(cells)  # each claim's runs through one index (not a pass over them all)

    def check(key: str, where: Any) -> None:
        errors.extend(_unmatched(path, key, where, cells, index))

    listed = listed_keys(cells)

    def values(key: str, cfg: Any) -> None:
        for field, col, want in cfg.value_refs():
            if not has_column(rows, col):
                continue  # an unknown column: reported by validate_outputs
            if isinstance(want, list) and col not in listed:  # read as any of its items
                errors.append(f"{path}: {key}.{field}: {encode_cell(want)} is a list, and no "
                              f"run's {col} is one; name the panel by its value")
            elif not index.positions({col: want}):
                errors.append(f"{path}: {key}.{field}: {want!r} is no {col} of any run of any "
                              "profile; check the spelling")
        col = getattr(cfg, "col", None)
        for panel, target in getattr(cfg, "paper_panels", {}).items():
            # the panel whose paper values a panel shows: a misspelt one (Mamba+PEE) showed
            # none, without a word (only the panels mapped were checked)
            if col and isinstance(target, list) and col not in listed:  # drawn as any of its
                # items: the paper values of several panels in one
                errors.append(f"{path}: {key}.paper_panels.{panel}: {encode_cell(target)} is a "
                              f"list, and no run's {col} is one; name the panel by its value")
                continue
            if not col or not has_column(rows, col) or index.positions({col: target}) or any(
                    _in_panel(pv.where, col, target, col in listed)
                    for pv in spec.paper_values):
                continue
            errors.append(f"{path}: {key}.paper_panels.{panel}: {target!r} is no {col} of any "
                          "run or paper value, so the panel would show no paper value; check "
                          "the spelling")

    losses: dict[str, str | None] = {}  # a task config's loss, each built once
    task_keys: dict[int, str] = {}  # (a sweep point's seeds share its task config object)

    def unscored(scores: list[str], r: Any) -> str:
        """The first of ``scores`` (``_score_names``: test.acc, val.best_mse) that the task of
        run ``r`` never records ('' if none; not judged where its task cannot be built here)."""
        if not scores:
            return ""
        key_ = task_keys.setdefault(id(r.task), r.task.model_dump_json())
        if key_ not in losses:
            got = _task_losses([r])
            losses[key_] = next(iter(got)) if got else None
        return next((n for n in scores if losses[key_] is not None
                     and _SCORE_OF[_score_tail(n)] != losses[key_]), "")

    def evaluated(key: str, cfg: Any) -> None:
        """A claim whose cells, in one profile, are of runs without the evaluation set its
        metric reads (`train.evals` set by one case), beside runs of the profile with it, or of
        a task that never records its score (test.acc of a regression task): those cells read
        as misses, 'not measured', and the claim FAILed whatever was trained (a profile none of
        whose runs has the set is MISSING there, as it should)."""
        names = [cfg.metric, *(g.metric for g in cfg.given)]
        if isinstance(cfg, OrderingConfig):
            selections = [cfg.a, cfg.b]
        elif cfg.check == "size_order":
            selections = [{**cfg.where, LABEL: list(cfg.labels)}]
        elif cfg.check == "recall_frontier":
            selections = [{LABEL: list(cfg.columns)}]
        else:
            selections = [getattr(cfg, "where", {})]
        # the runs of every selection together: an ordering's a-cells with the set and its
        # b-cells without it (each side alike) was accepted, and FAILed 'not measured'
        have: dict[str, dict[bool, str]] = {}
        missing: dict[str, str] = {}  # per profile, the first set a run of the claim lacks
        scores = _score_names(names)
        for where in selections:
            if not isinstance(where, dict) or any(not has_column(cells, k) for k in where):
                continue
            for pos in index.positions(where):
                r = runs[pos]
                score = unscored(scores, r)
                if score:
                    errors.append(f"{path}: {key}.metric: {cfg.metric}: the runs of label "
                                  f"{r.label!r} never record {score} ({_never_scored(score)}): "
                                  "their cells would read as misses, 'not measured', whatever "
                                  "was trained; narrow it to the runs that record it")
                    return
                lack = report.unmeasured_sets(names, set(r.train.evals))
                have.setdefault(r.profile, {}).setdefault(not lack, r.label)
                if lack:
                    missing.setdefault(r.profile, lack[0])
        for prof, seen in have.items():
            if len(seen) == 2 or (False in seen and missing[prof] in profile_sets[prof]):
                some = "some of its runs" if len(seen) == 2 else "its runs"
                errors.append(
                    f"{path}: {key}.metric: {cfg.metric} reads the evaluation set "
                    f"{missing[prof]!r}, which {some} in profile {prof} do not have "
                    f"(label {seen[False]!r}: train.evals)"
                    + ("" if len(seen) == 2 else ", though other runs of the profile do")
                    + ": their cells would read as misses, 'not measured', whatever was "
                    "trained; narrow it to the runs that have the set")
                return

    profile_sets: dict[str, set[str]] = {}  # the named evaluation sets of each profile's runs
    for r in runs:
        profile_sets.setdefault(r.profile, set()).update(r.train.evals)
    rows = cells
    for i, cfg in _parsed_claims(spec):
        for field in ("where", "a", "b"):
            check(f"claims.{i}.{field}", getattr(cfg, field, None))
        values(f"claims.{i}", cfg)
        evaluated(f"claims.{i}", cfg)
    for i, pv in enumerate(spec.paper_values):  # its cell without the set, in a profile with it
        # elsewhere: 'not measured, differs', counted among the values compared (in a profile
        # without the set it is 'missing', not compared)
        if not pv.where or any(not has_column(cells, k) for k in pv.where):
            continue
        scores = _score_names([pv.metric])
        never = next(((r, n) for r in (runs[p] for p in index.positions(pv.where))
                      if (n := unscored(scores, r))), None)
        if never:  # (a regression task's test.acc: 'not measured | differs' for ever)
            errors.append(f"{path}: paper_values.{i}.metric: {pv.metric}: the runs of its cell "
                          f"(label {never[0].label!r}) never record {never[1]} "
                          f"({_never_scored(never[1])}): it would read 'not measured' and "
                          "differ, whatever was trained")
            continue
        for prof in dict.fromkeys(r.profile for r in runs):
            mine = [runs[p] for p in index.positions(pv.where) if runs[p].profile == prof]
            sets = {n for r in runs if r.profile == prof for n in r.train.evals}
            lack = [report.unmeasured_sets([pv.metric], set(r.train.evals)) for r in mine]
            if mine and all(lack) and not report.unmeasured_sets([pv.metric], sets):
                errors.append(f"{path}: paper_values.{i}.metric: {pv.metric} reads the "
                              f"evaluation set {lack[0][0]!r}, which the runs of its cell do not "
                              f"have in profile {prof} (train.evals): it would read 'not "
                              "measured' and differ, whatever was trained")
                break
    for key, raw in spec.figure_configs:
        try:
            fig = parse_figure(raw)
        except (KeyError, ValidationError):
            continue  # reported by validate_outputs
        check(f"{key}.where", fig.cell_filter())  # drew nothing, said nothing
        values(key, fig)
    return errors


def _unmatched(path: str, key: str, where: Any, cells: pd.DataFrame, index: CellIndex,
               what: str = "run of any profile") -> list[str]:
    """'file: key: reason' for a ``where`` that matches no cell, or one of whose any-of values
    adds none (a typo, `label: [S6, S4d]`: the claim was judged, and PASSed, on the others)."""
    if not isinstance(where, dict) or not where or any(not has_column(cells, k) for k in where):
        return []  # no condition, or an unknown column / case:<i> (reported elsewhere)
    if not index.positions(where):
        shown = pairs_text(where.items())
        return [f"{path}: {key}: matches no {what} ({shown}); check the label and the values"]
    return [f"{path}: {key}.{k}: {v!r} (one of its values) matches no {what} with the rest of "
            "the condition; check the label and the values"
            for k, want in where.items() for v in alternatives(want, index.values(k))
            if not index.positions({**where, k: v})]


def _parsed_claims(spec: Spec):
    """(index, parsed claim) of each claim of ``spec`` that parses (``validate_outputs``
    reports the others)."""
    for i, raw in enumerate(spec.claims):
        try:
            yield i, report.parse_claim(raw)
        except (KeyError, ValidationError):
            continue


def _analytic_grid(spec: Spec) -> pd.DataFrame:
    """The points of an analytic spec's ``analytic.grid`` (with its ``params``), a row each,
    listed, not computed."""
    import itertools

    a = spec.analytic
    keys = list(a.grid)
    return pd.DataFrame([{LABEL: THEORY_LABEL, **dict(zip(keys, vals)), **a.params}
                         for vals in itertools.product(*(a.grid[k] for k in keys))])


def _analytic_where_problems(spec: Spec) -> list[str]:
    """``where_problems`` of an analytic spec: a claim's (or figure's) ``where`` that matches no
    point of ``analytic.grid`` (yu2025-fig5 with L = 100 left out of its grid: its two claims
    at L = 100 stayed MISSING for ever, where a training spec's are refused). The points are
    listed, not computed."""
    cells = _analytic_grid(spec)
    index = CellIndex(cells)
    path = spec.path or spec.id
    errors: list[str] = []
    what = "point of analytic.grid"
    for i, cfg in _parsed_claims(spec):
        for field in ("where", "a", "b"):
            errors += _unmatched(path, f"claims.{i}.{field}", getattr(cfg, field, None), cells,
                                 index, what)
    for key, raw in spec.figure_configs:
        try:
            fig = parse_figure(raw)
        except (KeyError, ValidationError):
            continue
        errors += _unmatched(path, f"{key}.where", fig.cell_filter(), cells, index, what)
    return errors


def _paper_values_of_several_cells(spec: Spec, runs: list) -> list[str]:
    """'file: key: reason' for a paper value whose ``where`` matches more than one cell of a
    profile: the report compared the paper's one number with the mean of those cells (two
    models under one label, or a key left out of ``where``)."""
    if not spec.paper_values:
        return []
    errors = []
    profiles = _by_profile(runs)
    over = spec.aggregate.select.over if spec.aggregate.select is not None else None
    twice: set[int] = set()  # paper values already named as a second value of a cell
    for profile, rs in profiles.items():
        keys = [k for k in report.cell_keys(rs) if k != over]
        rows = _config_rows(rs)
        index = CellIndex(rows)  # one look-up per paper value, not a pass over every run
        named: dict[tuple, int] = {}  # (metric, cell) -> the paper value that names it
        for i, pv in enumerate(spec.paper_values):
            if any(k not in rows for k in pv.where):
                continue  # an unknown column: reported by validate_outputs
            cols = [index.values(k) for k in keys if k in rows]
            cells = {tuple(repr(c[p]) for c in cols) for p in index.positions(pv.where)}
            if len(cells) == 1:  # `label: S6` and `model.mixer: s6` of one cell: both compared
                first = named.setdefault((expr.normal_form(pv.metric), *cells), i)
                if first != i and i not in twice:
                    twice.add(i)
                    errors.append(f"{spec.path or spec.id}: paper_values.{i}.where: names the "
                                  f"cell of paper_values.{first} in profile {profile} (one paper "
                                  "value per cell and metric)")
            if len(cells) > 1:
                shown = pairs_text(pv.where.items()) or "(every cell)"
                errors.append(f"{spec.path or spec.id}: paper_values.{i}.where: matches "
                              f"{len(cells)} cells of profile {profile} ({shown}); a paper value "
                              f"is the number of one cell: add the keys that tell them apart "
                              f"({', '.join(keys)})")
    return list(dict.fromkeys(errors))


def _config_rows(runs: list) -> pd.DataFrame:
    """One row per run: its label and flat config columns, each config flattened once per sweep
    point (``sweep.per_point``), not once per seed."""
    return pd.DataFrame([{LABEL: r.label, **flat, "seed": r.seed}
                         for r, flat in zip(runs, per_point(runs, RunConfig.flat))])


def load_table(spec: Spec, profile: str, root: Path, runs: list, tag: str = "",
               store=None) -> pd.DataFrame:
    """The run table of ``profile`` as ``profile_table`` reads it, written back when any record
    was read or a committed row was dropped (a row edited by hand since it was written is
    named: records are the source of truth, the edit is not kept)."""
    store = store or open_store(spec, root.parents[1])
    got = profile_table(spec, profile, root, runs, store, tag)
    if got.changed:
        df = got.recorded
        store.write_table(output_name(spec, profile, "results", "csv", tag),
                          None if got.rows.empty else table_text(got.rows, runs),
                          set(df[RUN_ID].astype(str)) if RUN_ID in df else set())
    return got.rows


@dataclass
class ProfileTable:
    """A profile's run table as `plot` reads it (``profile_table``)."""

    rows: pd.DataFrame  # the table: a run's row from its record, else a committed one
    recorded: pd.DataFrame  # the rows made from the records (``Store.table``)
    own: pd.DataFrame  # the profile's committed table, its rows of the profile (``profile_rows``)
    changed: bool  # records were read or committed rows dropped: `plot` writes it back


def profile_table(spec: Spec, profile: str, root: Path, runs: list, store, tag: str = "",
                  own: pd.DataFrame | None = None, name: str | None = None) -> ProfileTable:
    """The run table of ``profile`` as `plot`, `verify`, `figures` and `export` read it, nothing
    written: a run's row from its record when the store has one, else from the committed tables
    (``_committed_rows``), none of a run whose records were trained on other data
    (``_without_other_data``). With no record at all, this profile's committed table is read as
    it is (rows of runs no longer planned included: claims match cells by their keys) and
    completed from the other profiles'. ``own``: the profile's committed table as the caller
    read it (`export`: checked first, and read from its name of before a default profile
    changed), else read here; ``name``: the table's, for the warnings. `export` read the tables
    by its own order of steps beside this one, and the two drifted (a store whose ``runs/`` is
    a file, its tables gone: `plot` said why its runs were not done, `export` gave 0 rows
    without a word)."""
    df = store.table(runs)
    csv = root / output_name(spec, profile, "results", "csv", tag)
    name = name or csv.name
    if own is None:
        own = _own_table(csv, read_run_table, records=not df.empty,
                         quiet=not df.empty and unread_table(store, csv.name))
    stale = False  # rows of runs trained before the spec was edited, dropped from the table
    mine = own
    if not own.empty:
        own = mine = profile_rows(own, profile, name)
        own = _unrecorded(own, df)
        _warn_unnamed_copies(own, df, runs, name)
        own = _fill_config(consistent_rows(own, runs, own=True), runs)
        if df.empty:
            n_own = len(own)
            own = _without_stale(own, runs, name)
            stale = len(own) < n_own
    # the own table's rows under older run ids stand for their runs (with records, too: a
    # committed row under an id a spreadsheet mangled, '1.23E+47', or of an older code version
    # was dropped without a word once one run had a record, its run read as not finished)
    older = own if df.empty else _older_rows(own, runs, df, name)
    base = own if df.empty else pd.concat([df, older], ignore_index=True)
    have = set(base["run_id"].astype(str)) if "run_id" in base else set()
    todo = _not_covered(older, [r for r in runs if r.run_id not in have])
    sources = chain([] if df.empty else [own],
                    (t for _, t in _other_tables(spec, profile, root, tag)))
    extra = _committed_rows(todo, sources, profile)
    if not extra.empty:
        extra = _fill_config(extra, runs)
        base = extra if base.empty else pd.concat([base, extra], ignore_index=True)
    n_rows = len(base)
    base = in_table_order(_without_other_data(base, store), runs)
    return ProfileTable(base, df, mine, not df.empty or stale or len(base) < n_rows)


def _older_rows(own: pd.DataFrame, runs: list, recorded: pd.DataFrame,
                name: str) -> pd.DataFrame:
    """The rows of ``own`` (a profile's committed rows of runs without a record, beside the
    ``recorded`` rows) under a run id no run of ``runs`` has that stand for a planned run
    without a row (``_not_covered``: of its label and seed, contradicting none of its config),
    as they do in a table read without any record. Those that stand for no planned run (the
    spec changed since) are left out with a warning (``_without_stale``); those of a run that
    has a record now, unsaid (the record replaces them)."""
    if own.empty or RUN_ID not in own:
        return own.iloc[:0]
    older = own[~_row_ids(own).isin({r.run_id for r in runs})]
    if older.empty:
        return older
    older = _without_stale(older, runs, name)
    done = set(recorded[RUN_ID].astype(str)) if RUN_ID in recorded else set()
    done |= set(own[RUN_ID].astype(str))
    left: dict[tuple, list] = {}  # (label, seed) -> the planned runs without a row
    for r in runs:
        if r.run_id not in done:
            left.setdefault((str(r.label), norm(r.seed)), []).append(r)
    ids = _row_ids(older)
    keep = []
    for rid, pos in older.groupby(ids, sort=False).indices.items():
        first = older.iloc[pos[0]]
        cands = left.get((str(first[LABEL]), norm(first[SEED])), []) \
            if {LABEL, SEED} <= set(older.columns) else []
        if len(_not_covered(older.iloc[pos], cands)) < len(cands):
            keep.append(rid)
    return older[ids.isin(keep)]


def _unrecorded(own: pd.DataFrame, recorded: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``own`` (a profile's table on disk) of runs that have no row in ``recorded``
    (the table read from their records, which replaces theirs): only those complete the table,
    so only those are judged (``consistent_rows``). A label renamed in the spec (the same runs)
    warned of every trained run's row as one 'a run of that id cannot have written', a line per
    run of the grid, before the table was rewritten from the records under the new label."""
    if own.empty or recorded.empty or RUN_ID not in own or RUN_ID not in recorded:
        return own
    return own[~own[RUN_ID].astype(str).isin(set(recorded[RUN_ID].astype(str)))]


def _warn_unnamed_copies(own: pd.DataFrame, recorded: pd.DataFrame, runs: list,
                         name: str) -> None:
    """Warn of the rows of ``own`` (a profile's committed rows of runs without a record) whose
    run id cell was cleared and that hold the cell and seed of a recorded run (``recorded``)
    with another status or metric: the record is the run's row, and the copy was dropped
    without a word (a row and its copy, the copy's id cleared and its accuracy edited: `plot`
    and `export` gave the record's, the edit lost unsaid). One warning naming the first few."""
    if own.empty or recorded.empty or not {RUN_ID, LABEL, SEED} <= set(own.columns):
        return
    blank = _row_ids(own).str.startswith(_NO_ID).to_numpy()
    if not blank.any():
        return
    by_id = {r.run_id: r for r in runs}
    rec: dict[tuple, list] = {}  # (label, seed) -> the records' rows of that cell and seed
    for row in recorded.to_dict("records"):
        if str(row[RUN_ID]) in by_id:
            rec.setdefault((str(row[LABEL]), norm(row[SEED])), []).append(row)
    cols = [c for c in own.columns if c in recorded.columns and (c == STATUS or
                                                                 is_metric_column(c))]
    said = []
    for i, row in zip(np.flatnonzero(blank), own[blank].to_dict("records")):
        for r in rec.get((str(row[LABEL]), norm(row[SEED])), []):
            if _other_cell(own.iloc[[i]], by_id[str(r[RUN_ID])]):
                continue
            odd = next((c for c in cols if norm(row[c]) is not None
                        and not values_equal(row[c], r[c])), None)
            if odd:
                said.append(f"{row[LABEL]}, seed {row[SEED]}: {odd} "
                            f"{short_name(str(row[odd]))}, the record of run {r[RUN_ID]} "
                            f"{short_name(str(r[odd]))}")
            break
    if said:
        print(f"warning: {name}: {len(said):,} row(s) without a run id hold the cell and seed "
              f"of a recorded run with other values ({first_few(said)}; edited by "
              "hand?): the run's record is used, the source of truth, and the row is not",
              file=sys.stderr)


def profile_rows(table: pd.DataFrame, profile: str, name: str) -> pd.DataFrame:
    """The rows of ``table`` (the profile's own results table ``name``) whose ``profile`` is
    ``profile``; the others (pasted from another profile's table, a table written while another
    profile was the default) are left out with a warning: `plot` and `verify` dropped them
    without a word (a claim went MISSING) while `export` exported them as this profile's."""
    if table.empty or "profile" not in table:
        return table
    other = table["profile"].astype(str) != profile
    if other.any():
        names = ", ".join(map(repr, dict.fromkeys(table.loc[other, "profile"].astype(str))))
        print(f"warning: {name}: {int(other.sum())} row(s) of profile {names}, not {profile!r}, "
              f"are not used (a profile's table holds its own runs)", file=sys.stderr)
    return table[~other]


def _write_back(path: Path, table: pd.DataFrame, text: Callable[[pd.DataFrame], str],
                records: bool, dropped: bool) -> None:
    """Write ``table`` to ``path`` when it was built from ``records``, or when rows of runs
    trained on other data were ``dropped`` from it (``_without_other_data``): a corpus switch
    that made every run's record stale left the old corpus's rows in results.csv and
    curves.csv, where `export` (and `list`) read them as this data's; or of runs trained before
    the spec was edited (``_without_stale``: a fresh clone's results.csv and curves.csv kept
    them beside a report of '0 of 2 runs finished'). A table left without rows is no table
    (``Store.write_csv``)."""
    if not (records or dropped):
        return
    if not table.empty:
        atomic_write_text(path, text(table))
    elif path.is_file():
        path.unlink()


def _committed_dropped(committed: pd.DataFrame, n_kept: int) -> bool:
    """Whether rows of an analysis table read from disk (``committed``) are not used: fewer
    than all of them were kept (``n_kept``; ``planned_rows``, ``with_committed``: runs trained
    before the spec was edited, a cell removed). ``_write_back`` then drops them on disk too, as
    from results.csv and curves.csv (they stayed in mechanistic.csv or histograms.csv, the old
    runs' numbers for anyone opening it, beside a report of '0 of 2 runs finished'). A table the
    report cannot read (no label column) is not one it dropped rows of, and is left."""
    return LABEL in committed and n_kept < len(committed)


def _without_other_data(df: pd.DataFrame, store) -> pd.DataFrame:
    """``df`` without the rows of runs whose records were trained on other data than there is
    now (``Store.stale_data``: a text corpus replaced): a committed row of such a run is the old
    data's result too, and verdicts were judged on it while the store warned of the records."""
    stale = getattr(store, "stale_data", None)  # (a stand-in store of a test has none)
    if df.empty or not stale or RUN_ID not in df:
        return df
    return df[~df[RUN_ID].astype(str).isin(stale)].reset_index(drop=True)


def _not_covered(own: pd.DataFrame, todo: list) -> list:
    """The runs of ``todo`` (planned, no row under their id) for which this profile's committed
    table ``own`` has no row of the same label and seed under another id that contradicts none of
    the run's config columns (``_contradiction``). A run id also hashes the code version, so a
    table committed before a version change holds its runs under older ids; completing them from
    another profile's table (the same configs trained later, under the current ids) drew both
    trainings of one cell (chen2025-fig7: 6 runs in 3-seed cells). A table without a run id
    column (deleted by hand) names no run: its rows of a label and seed stand for the run of
    that cell (each run was completed from another profile's table as well, and `export` gave
    the run twice, with and without its id)."""
    if own.empty or not todo or not {LABEL, SEED} <= set(own.columns):
        return todo
    ids = _row_ids(own) if RUN_ID in own else pd.Series("", index=own.index)
    groups: dict[tuple, dict[str, list[int]]] = {}  # (label, seed) -> run id -> row positions
    for i, key in enumerate(zip(own[LABEL].astype(str), own[SEED].map(norm), ids)):
        groups.setdefault(key[:2], {}).setdefault(key[2], []).append(i)
    return [r for r in todo
            if not any(not _contradiction(own.iloc[at], r) and not _other_cell(own.iloc[at], r)
                       for at in groups.get((str(r.label), norm(r.seed)), {}).values())]


def _without_stale(own: pd.DataFrame, runs: list, name: str) -> pd.DataFrame:
    """``own`` (a committed table read as it is, no record) without the rows of a run id not
    planned whose every planned run of the same label and seed it contradicts on a setting the
    sweep does not set (``_contradiction``): the spec was edited after its runs (train.lr 0.01 ->
    0.02, max_steps 4 -> 5), and those rows were reported as the new runs, '2 runs expected, 2
    finished'. So are the rows that stand for no planned run (``_other_cell``: a swept value,
    seed or case removed from the spec; the removed grid value's row was reported as a cell of
    the profile, '1 runs expected, 2 finished', and drawn). Each is dropped with a warning.
    Rows under older ids that contradict nothing (a code version change) stay."""
    if own.empty or not runs or not {RUN_ID, LABEL, SEED} <= set(own.columns):
        return own
    planned = {r.run_id for r in runs}
    cell: dict[tuple, list] = {}
    for r in runs:
        cell.setdefault((str(r.label), norm(r.seed)), []).append(r)
    ids = _row_ids(own)
    stale = []
    said = []  # 'run <id> (<label>, seed <s>) has <why>' of each
    cols = _Columns(own)  # each column read once: a frame per row id (iloc, drop) took 2 ms a
    # row, 30 s for a table of 15,000 rows under ids no run has
    flats: dict[str, dict] = {}
    for rid, pos in own.groupby(ids, sort=False).indices.items():  # one grouping (a mask per
        if rid in planned:  # id over the whole table was quadratic, see ``consistent_rows``)
            continue
        rows = cols.rows(pos)
        label, seed = cols.raw(LABEL)[pos[0]], cols.raw(SEED)[pos[0]]
        cands = cell.get((str(label), norm(seed)), [])
        # a run of its cell it contradicts in nothing keeps it: tried first, alone (each row
        # under an older id was compared with every run of its label and seed, ~30 of a grid
        # under one label: chen2025-fig8's 48 such rows took 14 s of `figures --no-rebuild`)
        if any(not _contradiction(rows, r, skip=r.coords)
               for r in cands if not _other_cell(rows, r, flats)):
            continue
        whys = [_contradiction(rows, r, skip=r.coords)
                or ("another value of a key the sweep sets" if _other_cell(rows, r, flats) else "")
                for r in cands]
        if all(whys):
            why = next((w for w in whys if not w.startswith("another value")), None) or \
                "a cell or seed no run of the profile has now (a case, seed or swept value removed)"
            said.append(f"run {rid} ({label}, seed {seed}) has {why}")
            stale.append(rid)
    if len(said) == 1:
        print(f"warning: {name}: the row of {said[0]}: the spec changed since it was trained; "
              "the row is not used (run the profile again)", file=sys.stderr)
    elif said:  # one warning (a line per row: 15,000 lines for a table of 15,000 such rows)
        print(f"warning: {name}: the rows of {len(said):,} run ids no run has now hold what "
              f"no planned run has ({first_few(said)}): the spec changed since they "
              "were trained; the rows are not used (run the profile again)", file=sys.stderr)
    return own[~ids.isin(stale)]


def _other_cell(rows: pd.DataFrame | _Rows, run, flats: dict[str, dict] | None = None) -> bool:
    """Whether ``rows`` (one run id's) hold another value than ``run`` of a key its sweep sets
    (``run.coords``). ``_contradiction`` passes over fields at their defaults (a default may have
    changed), but a swept value is the spec's own: under one label, the committed row of the
    cell ``train.lr=0.01`` stood for the planned run of ``train.lr=0.001`` (the code's default),
    which then was not completed from another profile's table and read as not finished.
    ``flats``: the runs' flat configs by run id, kept between calls (made per row id, a fifth of
    the time of a table of thousands of rows)."""
    from ..sweep.config import flatten

    flat = None if flats is None else flats.get(run.run_id)
    if flat is None:
        flat = flatten(run.config())
        if flats is not None:
            flats[run.run_id] = flat
    return any(_differing(rows, k, flat.get(k)) is not None for k in run.coords if k != SEED)


def _differing(rows: pd.DataFrame, k: str, want: Any) -> Any:
    """The first value of column ``k`` of ``rows`` that is not ``want``, or None (also when
    ``rows`` has no such column, ``want`` is None or a list / mapping, or the cell is empty: a
    field the table predates, filled by ``_fill_config``)."""
    if k not in rows or want is None or isinstance(want, (list, tuple, dict)):
        return None
    for have in rows[k]:
        if norm(have) is None or (isinstance(have, str) and have == ""):
            continue
        if not values_equal(have, want):
            return have
    return None


def _base_values(spec: Spec, profile: str, overrides: dict | None, keys: list[str]
                 ) -> dict[str, set] | None:
    """The values of ``keys`` the profile's runs have without the sweep's settings of them (the
    spec otherwise as it is, but for its constraints and the derived values of other keys):
    what a run had when a table without columns of them was written, before an axis of them
    was added (``completed_keys``); None where they cannot be told."""
    prof = spec.profiles[profile]
    drop = set(keys)

    def strip(d: dict | None) -> dict | None:
        return None if d is None else {k: v for k, v in d.items() if k not in drop}

    # nor the constraints and derived values (but those of the keys): they are evaluated over
    # the values the axes give, and the old setting may fail them (`model.d_state >= 8` beside
    # the axis d_state [8] added with it; a learning rate derived from d_state that is 0 at the
    # old 4): no point expanded, and each committed row went to the one finished cell of its
    # label, a d_state it never measured
    axes = []
    for axis in (prof.sweep if prof.sweep is not None else spec.sweep):
        if axis.cases is not None:
            axes.append(axis.model_copy(update={"cases": [
                c.model_copy(update={"set": strip(c.set), "grid": strip(c.grid),
                                     "zip": strip(c.zip), "constraints": []})
                for c in axis.cases]}))
        elif strip(axis.grid) or strip(axis.zip):
            axes.append(axis.model_copy(update={"grid": strip(axis.grid),
                                                "zip": strip(axis.zip)}))
    if prof.sweep is not None:
        spec = spec.model_copy(update={"profiles": {
            **spec.profiles, profile: prof.model_copy(update={"sweep": axes})}})
    else:
        spec = spec.model_copy(update={"sweep": axes})
    spec = spec.model_copy(update={"constraints": [], "derived": {
        k: v for k, v in spec.derived.items() if k in drop}})
    try:
        runs = expand(spec, profile, overrides=overrides)
    except (SpecError, ValueError, KeyError, TypeError):
        return None
    return {k: {norm(r.flat().get(k)) for r in runs} for k in keys} if runs else None


def _own_table(path: Path, read, records: bool, quiet: bool = False) -> pd.DataFrame:
    """This profile's committed table at ``path`` (``read`` it), empty when absent. Without run
    records it is all there is, so one that is not a table is an error (``TableError``); with
    records it only completes them and is rewritten from them, so such a file is passed over with
    a warning (and a folder in its place left for the write to name). ``quiet``: the write
    warns of it (``store.unread_table``): said once, as `run` says it."""
    if not path.exists() or (records and not path.is_file()):
        return pd.DataFrame()
    try:
        return read(path)
    except TableError as err:
        if not records:
            raise
        if not quiet:
            print(f"warning: {err} (not used: rewritten from the run records)", file=sys.stderr)
        return pd.DataFrame()


def _other_tables(spec: Spec, profile: str, root: Path, tag: str, stem: str = "results"):
    """(profile, table) of the spec's other profiles' committed ``stem`` tables, each read when
    asked for; one that cannot be read is skipped with a warning (it is not this profile's
    table). ``_committed_rows`` asks only while runs are left to find: a damaged table whose rows
    no run needed was warned about all the same. Last, this profile's table under the name it
    had before the spec's default profile changed (``results-smoke.csv`` of smoke, now the
    default, or quick's rows in ``results.csv``, quick no longer the default): a fresh clone's
    `figures` reported smoke `0 of 2 runs finished` beside its committed rows."""
    was = "-".join([stem] + ([profile] if profile == spec.default_profile else [])
                   + ([tag] if tag else [])) + ".csv"
    for p, path in [*((p, root / output_name(spec, p, stem, "csv", tag)) for p in spec.profiles
                      if p != profile), (profile, root / was)]:
        if not (path.exists() or path.is_symlink()):  # a FIFO: a warning
            continue
        try:
            t = read_run_table(path) if stem == "results" else _read_curves(path)
        except TableError as err:
            print(f"warning: {err} (not used to complete profile {profile})", file=sys.stderr)
            continue
        if "profile" in t:
            t = t[t["profile"].astype(str) == p]
        yield p, t


def committed_rows(spec: Spec, profile: str, root: Path, runs: list, todo: list, store,
                   tag: str = "") -> dict[str, pd.Series]:
    """run id -> its row in the profile's run table as `plot` reads it (``profile_table``: the
    committed tables complete what the store's records do not give), for ``todo`` (planned runs
    of ``runs`` without a record); read only, nothing written. What `show` lists for a fresh
    clone's runs: records are not in git, so it said every committed run was not trained ('-')
    where `verify` judged them finished. It read the tables by steps of its own beside
    `plot`'s (a row of a run trained before the spec was edited, or on data replaced since,
    was listed as the run's where `plot` used none)."""
    want = {r.run_id for r in todo}
    try:
        rows = profile_table(spec, profile, root, runs, store, tag).rows if want else \
            pd.DataFrame()
    except TableError as err:  # no record and a table that is none: the config is shown
        print(f"warning: {err} (its rows are not shown)", file=sys.stderr)
        return {}
    if rows.empty or RUN_ID not in rows:
        return {}
    got: dict[str, pd.Series] = {}
    older: dict[tuple, list[pd.Series]] = {}  # (label, seed) -> rows under ids no run has
    planned = {r.run_id for r in runs}
    for rid, (_, row) in zip(rows[RUN_ID].astype(str), rows.iterrows()):
        if rid in want and rid not in got:  # (a run under two labels: its first row)
            got[rid] = row
        elif rid not in planned and {LABEL, SEED} <= set(rows.columns):
            older.setdefault((str(row[LABEL]), norm(row[SEED])), []).append(row)
    # a row under an older run id (a code version change since the table was committed)
    # stands for the run of its label and seed that it contradicts in nothing, as `plot`
    # reads it (``_not_covered``): `show` listed each such run as not trained
    for r in todo:
        if r.run_id in got:
            continue
        for row in older.get((str(r.label), norm(r.seed)), []):
            one = row.to_frame().T
            if not _contradiction(one, r, skip=r.coords) and not _other_cell(one, r):
                got[r.run_id] = row
                break
    return got


def _committed_rows(runs: list, tables: Iterable[pd.DataFrame], profile: str | None
                    ) -> pd.DataFrame:
    """Rows for ``runs`` (planned runs without a record) from committed ``tables``, the first
    table holding a run's id winning. A run id is a run's whole config, so the same id in another
    profile's table is the same run: koren2026-fig6's long profile is quick's runs and twelve
    more, and a store that has only the twelve (records are not in git) still gets quick's rows.
    Each row takes the planned run's label (and, in a results table, profile); one planned run
    per row, several rows for a run in a curves table (one per evaluation). Rows that contradict
    their run id or disagree with each other are left out with a warning (``consistent_rows``).
    ``tables`` is read no further once every run has its rows (it may read files lazily)."""
    out = []
    left = {}
    for r in runs:
        left.setdefault(r.run_id, []).append(r)
    tables = iter(tables)
    while left:
        t = next(tables, None)
        if t is None:
            break
        if t.empty or RUN_ID not in t:
            continue
        t = consistent_rows(t, runs)
        ids = t[RUN_ID].astype(str)
        for rid, pos in t.groupby(ids, sort=False).indices.items():  # one grouping, not a mask
            if rid not in left:  # over the table per id (quadratic, see ``consistent_rows``)
                continue
            rows = t.iloc[pos]
            if profile is not None:  # a results table: one row per run
                rows = rows.iloc[:1]
            elif STEP in rows:  # a run under several labels: its curve once
                rows = rows.drop_duplicates(subset=[STEP])
            for r in left.pop(rid):
                out.append(rows.assign(**{LABEL: r.label},
                                       **({"profile": profile} if profile is not None else {})))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


class _Columns:
    """A table's columns read once, for ``_contradiction`` of each run's rows: the values as
    iterating the column gives them, and as numbers (``pd.to_numeric``, not a number NaN). Read
    per run from its rows' frame (a to_numeric per metric column and run, a Series per config
    key), ``consistent_rows`` of the committed tables took ~5 ms a run, 8 of the 18 s of
    `figures --no-rebuild`."""

    def __init__(self, table: pd.DataFrame):
        self.table = table
        self.columns = table.columns
        self.names = set(table.columns)  # (``k in`` a pandas Index per key and run: 2 µs each)
        curve = STEP in self.names  # the columns ``_contradiction`` reads of every run, picked
        self.metrics = [c for c in table.columns if is_metric_column(c)]  # once per table
        self.scored = [c for c in table.columns if (curve or is_metric_column(c))
                       and c.endswith((".acc", ".loss"))]
        self._raw: dict[str, np.ndarray] = {}
        self._num: dict[str, np.ndarray] = {}

    def raw(self, k: str) -> np.ndarray:
        if k not in self._raw:
            values = self.table[k].tolist()  # (as iterating the Series gives them)
            arr = np.empty(len(values), dtype=object)  # (element by element: lists stay items)
            for i, v in enumerate(values):
                arr[i] = v
            self._raw[k] = arr
        return self._raw[k]

    def num(self, k: str) -> np.ndarray:
        if k not in self._num:
            self._num[k] = pd.to_numeric(self.table[k], errors="coerce").to_numpy(dtype=float)
        return self._num[k]

    def rows(self, pos: np.ndarray | None = None) -> _Rows:
        return _Rows(self, np.arange(len(self.table)) if pos is None else pos)


class _Rows:
    """One run's rows of a ``_Columns`` (positions ``pos``): ``k in rows``, ``rows[k]`` (the
    values), ``rows.num(k)`` and ``rows.columns``, as ``_contradiction`` and ``_differing``
    read them."""

    def __init__(self, cols: _Columns, pos: np.ndarray):
        self.cols, self.pos, self.columns = cols, pos, cols.columns
        self.metrics, self.scored = cols.metrics, cols.scored

    def __contains__(self, k: object) -> bool:
        return k in self.cols.names

    def __getitem__(self, k: str) -> np.ndarray:
        return self.cols.raw(k)[self.pos]

    def num(self, k: str) -> np.ndarray:
        return self.cols.num(k)[self.pos]


def _point_identity(run) -> dict[str, Any]:
    """A run's identity (``RunConfig.identity``), flattened, without its seed: that of its sweep
    point (``per_point``; made per run, a quarter of ``consistent_rows``' time)."""
    from ..sweep.config import flatten

    ident = flatten(run.identity())
    ident.pop(SEED, None)
    return ident


def _contradiction(rows: pd.DataFrame | _Rows, run, point: dict[str, Any] | None = None,
                   skip: Iterable[str] = ()) -> str:
    """'key=value' of a config column of ``rows`` that contradicts ``run``, the planned run of
    their run id, on a field its run id hashes (``RunConfig.identity``: the seed and every field
    off its default), or that a run of it cannot have written (a status no record has, a step
    beyond its budget); '' when none does. An empty cell is a field the table predates (filled by
    ``_fill_config``); a field at its default is not compared (a default may have changed).
    ``rows``: a frame, or a run's rows of a table read once (``_Columns``, ``consistent_rows``);
    ``point``: the run's ``_point_identity``, where the caller has it; ``skip``: keys not
    compared (the keys the sweep sets, ``_without_stale``'s)."""
    if isinstance(rows, pd.DataFrame):
        rows = _Columns(rows).rows()
    ident = {**(_point_identity(run) if point is None else point), SEED: run.seed}
    for k in skip:
        ident.pop(k, None)
    for k, want in ident.items():
        have = _differing(rows, k, want)
        if have is not None:
            return f"{k}={short_name(repr(have))} (the run's is {want!r})"
    if STATUS in rows:  # 'weird' counted the run as not finished without a word why (a record
        status = rows[STATUS]  # with one is quarantined)
        odd = [v for v in status if v not in RECORD_STATUSES]
        if odd:
            return f"status={odd[0]!r} (not {', '.join(RECORD_STATUSES)})"
        col = METRIC_PREFIX + DIVERGED_NAN  # 'diverged' and a finite final evaluation: one lies
        if col in rows:
            diverged = np.array([v == "diverged" for v in status], dtype=bool)
            if (diverged & np.isfinite(rows.num(col))).any():
                return (f"status='diverged' with a finite {col} (a diverged run's final "
                        "evaluation is NaN)")
        col = METRIC_PREFIX + "val.loss"  # as in a record (``store._ok_with_nonfinite_end``):
        if col in rows and STEP not in rows:  # 'ok' and no final loss, counted as no divergence
            ok = np.array([v == "ok" for v in status], dtype=bool)
            if (ok & ~np.isfinite(rows.num(col))).any():
                return (f"status='ok' with an empty {col} (a run whose model at its stop step "
                        f"has no finite loss is 'diverged' since record revision {OK_IS_FINITE}; "
                        "an older ssmrepro's)")
    curve = STEP in rows  # a curves table's columns are a history row's (train.loss its slice's)
    scores = {c if curve else metric_name(c): rows.num(c) for c in rows.scored}
    bad = scored_nonfinite(scores, final=not curve)  # as in a record (`run` trains it again): an
    if bad:  # older ssmrepro scored NaN outputs as class 0, test.acc 0.0 beside no test.loss
        col = bad[0] if curve else METRIC_PREFIX + bad[0]
        return (f"{col}={bad[1]:g} beside an empty {col.removesuffix('.acc')}.loss (outputs "
                "that are not finite score no accuracy; an older ssmrepro's)")
    held = rows.metrics
    foreign = not_recorded([metric_name(c) for c in held], run.train.evals, history=False)
    if foreign:  # as in a record (quarantined): 20,000 columns of another tool's in a fresh
        # clone's table were kept, plotted and exported as the run's metrics
        cols = [METRIC_PREFIX + n for n in foreign]
        filled = [c for c in cols if pd.notna(rows[c]).any()]
        if filled:
            more = f", nor {len(filled) - 1:,} more such columns" if len(filled) > 1 else ""
            first = next(v for v in rows[filled[0]] if pd.notna(v))
            return (f"{filled[0]}={first!r} (no run of its config "
                    f"records {metric_name(filled[0])}{more})")
    for k in [k for k in COUNTS if k in rows]:  # as in a record: n_params -5 or 1.5 was drawn
        for v in rows.num(k)[~np.isnan(rows.num(k))].tolist():
            why = count_problem(k, v, run.train)
            if why:
                return f"{k}={v:g} ({why.removeprefix('is ')})"
    total = run.train.total_steps  # a record beyond it is quarantined (``store``)
    for k in (STEP, "stop_step"):
        if k in rows:
            far = rows.num(k)
            if (far > total).any():
                return f"{k}={np.nanmax(far):g} (beyond the run's {total} steps)"
    if STEP in rows and SAMPLES in rows:  # the curves' x: step x batch size (1e300 was drawn)
        seen = rows.num(SAMPLES)
        want = rows.num(STEP) * run.train.batch_size
        off = ~np.isnan(seen) & (seen != want)
        if off.any():
            return (f"{SAMPLES}={seen[off][0]:g} at step {rows[STEP][off][0]} (the "
                    f"run's step x batch size is {want[off][0]:g})")
    return ""


def consistent_rows(table: pd.DataFrame, runs: list, own: bool = False) -> pd.DataFrame:
    """``table`` without the rows of a planned run whose config contradicts its run id
    (``_contradiction``) or that holds it twice with different results (``_disagreeing``), each
    dropped with a warning: a hand-edited row made a cell of its own (S6 at d_model 64, a cell
    never run) and left the real one without its run; of two rows the first was taken. In the
    profile's ``own`` results table a row's label must also be one its run has in the profile
    (another profile's table names the run as that profile does, and its rows take this
    profile's labels; committed curves tables may name a run by its first case label alone):
    the labels of two rows swapped left both cells empty while the report counted '2 runs
    expected, 2 finished', and a curves table's were drawn, each run's curve under the other's
    label."""
    results = own and STEP not in table and {LABEL, SEED} <= set(table.columns)  # (a row a run)
    if not table.empty and RUN_ID not in table and results:  # (its run id column deleted)
        return table[~_seed_repeats(table, runs)]
    if table.empty or RUN_ID not in table:
        return table
    by_id = {r.run_id: r for r in runs}
    labels: dict[str, set[str]] = {}
    for r in runs:
        labels.setdefault(r.run_id, set()).add(str(r.label))
        if STEP in table:  # a curves table may name it by its first case label alone
            labels[r.run_id].add(str(r.label).split(LABEL_SEP)[0])
    ids = _row_ids(table)
    present = set(ids)  # the identity of each sweep point with a row here, once (``per_point``)
    held = [r for r in by_id.values() if r.run_id in present]
    points = dict(zip((r.run_id for r in held), per_point(held, _point_identity)))
    disagreeing = _disagreeing(table, ids)
    dropped = []
    contradicting: list[str] = []  # 'run <id> has <why>' of each run whose rows are dropped
    differing: list[str] = []  # '<id> <n> times'
    # each run's rows by one grouping (first-appearance order): a mask over the whole table per
    # run made this quadratic, 15 s for a results table of 4,000 runs and hours for a paper
    # grid's curves table (millions of rows)
    # (iterated, the grouping sorts the table once and gives each run's rows as a slice of it:
    # taking each run's positions from the table cost 3 ms a run, 13 of the 52 s of the front
    # page's training time of a 4,000-run table)
    cols = _Columns(table)  # each column read once (per run, 5 ms of pandas: ``_Columns``)
    for rid, pos in table.groupby(ids, sort=False).indices.items():
        if rid not in by_id:
            continue
        rows = cols.rows(pos)
        wrong = _contradiction(rows, by_id[rid], points[rid])
        if not wrong and own and LABEL in table:
            odd = [v for v in map(str, rows[LABEL]) if v not in labels[rid]]
            if odd:
                its = " or ".join(map(repr, sorted(labels[rid])))
                wrong = f"label={short_name(repr(odd[0]))} (the run's is {its})"
        if wrong:
            contradicting.append(f"run {rid} has {wrong}")
            dropped.append(rid)
        elif rid in disagreeing:
            differing.append(f"{rid} {len(pos)} times")
            dropped.append(rid)
    _say_dropped(contradicting, differing)
    keep = ~ids.isin(dropped)
    if own and LABEL in table and STEP not in table:  # a results row given twice (pasted again)
        keep &= ~_repeated_rows(table, ids, keep)
    if own and {LABEL, SEED} <= set(table.columns):
        keep &= ~_second_rows(table[keep], by_id)
        # rows of no run id, or of an id no run has (an older code version's): by cell and
        # seed, as in a table without the column (two older ids' rows of one cell and seed,
        # 0.08 and 0.9: the report took the first, the other kept in the table unsaid)
        blank = (~ids.isin(by_id) & keep).to_numpy()
        if results and blank.sum() > 1:
            keep.iloc[np.flatnonzero(blank)[_seed_repeats(table[blank], runs, True)]] = False
    if N_PARAMS in table:
        _params_disagree(table[keep], by_id)
    return table[keep]


def _say_dropped(contradicting: list[str], differing: list[str]) -> None:
    """The warnings of ``consistent_rows``: the runs whose rows contradict their run id
    (``contradicting``: 'run <id> has <why>') and those held several times with different
    results (``differing``), one warning of each kind naming the first few and the count (a
    line per run: 4,000 lines for a table of 4,000 planned runs whose rows were edited)."""
    if len(contradicting) == 1:
        print(f"warning: a committed table's row of {contradicting[0]}, which a run of that id "
              "cannot have written; the row is not used", file=sys.stderr)
    elif contradicting:
        print(f"warning: a committed table's rows of {len(contradicting):,} runs hold what a run "
              f"of their id cannot have written ({first_few(contradicting)}); the rows "
              "are not used", file=sys.stderr)
    if len(differing) == 1:
        print(f"warning: a committed table has run {differing[0]} with different results; its "
              "rows are not used", file=sys.stderr)
    elif differing:
        print(f"warning: a committed table has {len(differing):,} runs several times with "
              f"different results ({first_few(differing)}); their rows are not used",
              file=sys.stderr)


_NO_ID = "(no run id: row "  # how ``_row_ids`` names a row whose run id cell is empty


def _row_ids(table: pd.DataFrame) -> pd.Series:
    """The run id of each row of ``table`` as text; a row whose id cell is empty (cleared by
    hand) one of its own, ``(no run id: row <n>)``, so that it stands for the run of its cell
    and seed as in a table without the column (``_not_covered``): such rows were one run of
    id '', two seeds' rows 'the row of run(s)  more than once (the same results)', the second
    not used, and three of other cells dropped as 'the spec changed'."""
    ids = table[RUN_ID].astype(str)
    empty = table[RUN_ID].isna().to_numpy() | (ids.str.strip() == "").to_numpy()
    if empty.any():
        ids = ids.where(~empty, [f"{_NO_ID}{i})" for i in range(len(ids))])
    return ids


def _seed_repeats(table: pd.DataFrame, runs: list, ids: bool = False) -> np.ndarray:
    """The rows of ``table`` (a profile's own results table without run ids: the column
    deleted by hand or its cells cleared, its rows named by their cell and seed,
    ``_not_covered``) that repeat one cell and seed (its label, swept values and seed): a row
    given twice with the same results is used once, rows of one seed with different results
    are not used, each with a warning, as in a table with run ids (``_repeated_rows``,
    ``_disagreeing``). The report counted the seed once (its first row, whatever the others
    held) while `export` gave every row of it.
    ``ids``: the rows have run ids, none of a planned run (cleared, an older code version's)"""
    keys = [k for k in report.cell_keys(runs) if k in table and k != SEED] + [SEED]
    ident = pd.Series(["\0".join(map(str, cell)) for cell in zip(*(table[k].tolist()
                                                                    for k in keys))],
                      index=table.index, dtype=object)  # (an empty cell as its text)
    several = ident.duplicated(keep=False)
    if not several.any():
        return np.zeros(len(table), dtype=bool)
    what = "'s rows under run ids no run has" if ids else " without run ids"
    differ = _disagreeing(table, ident)  # (a cell and seed's rows as one run's)
    drop = ident.isin(differ) | ident.duplicated()

    def named(mask: pd.Series) -> str:
        first = table[mask & ~ident.duplicated()]
        cells = [f"{row[LABEL]}, seed {row[SEED]}" for _, row in first.head(3).iterrows()]
        more = f" and {len(first) - 3:,} more" if len(first) > 3 else ""
        return "; ".join(cells) + more

    if differ:
        print(f"warning: a committed table{what} {'give' if ids else 'has'} rows of one cell "
              f"and seed with "
              f"different results ({named(ident.isin(differ))}); they are not used",
              file=sys.stderr)
    same = several & ~ident.isin(differ)
    if same.any():
        print(f"warning: a committed table{what} {'give' if ids else 'holds'} the row of a "
              f"cell and seed "
              f"more than once ({named(same)}; the same results); it is used once",
              file=sys.stderr)
    return drop.to_numpy()


def _params_disagree(table: pd.DataFrame, by_id: dict) -> None:
    """A warning per cell whose planned runs' rows give different parameter counts (the seeds
    of a cell share its config): the cell's count is left unknown (``report.aggregate``)."""
    counts: dict[tuple, set] = {}
    names: dict[tuple, str] = {}
    for rid, n in zip(table[RUN_ID].astype(str), pd.to_numeric(table[N_PARAMS], errors="coerce")):
        r = by_id.get(rid)
        if r is not None and not pd.isna(n):
            coords = {k: v for k, v in r.typed_coords().items() if k != SEED}
            key = (str(r.label), *sorted((k, repr(norm(v))) for k, v in coords.items()))
            if key not in names:  # the typed values (the spec's quoted ' 2' was printed 'n= 2');
                # once per cell, not per run (a fifth of the check's time)
                names[key] = ", ".join(filter(None, [str(r.label), r.coords_text(drop=(SEED,))]))
            counts.setdefault(key, set()).add(int(n))
    for key, ns in counts.items():
        if len(ns) > 1:
            print(f"warning: a committed table gives {len(ns)} parameter counts "
                  f"({', '.join(map(str, sorted(ns)))}) to the seeds of the cell {names[key]}, "
                  "which share one config; its count is not shown", file=sys.stderr)


def _repeated_rows(table: pd.DataFrame, ids: pd.Series, keep: pd.Series) -> pd.Series:
    """The rows (of ``table``, a profile's own results table; ``ids`` its run ids, ``keep``
    the rows kept so far) that repeat a kept row of the same run and label: a row pasted twice,
    the same results (``_disagreeing`` drops a run given twice with others). Each run is named
    in a warning and its first row used: the report counted the seed once, while `export`
    gave the run twice (a mean over the long table's rows weighed it double)."""
    twice = ids.str.cat(table[LABEL].astype(str), sep="\0").duplicated() & keep
    if twice.any():
        named = list(dict.fromkeys(ids[twice]))
        more = f" and {len(named) - 3} more" if len(named) > 3 else ""
        print(f"warning: a committed table holds the row of run(s) {', '.join(named[:3])}{more} "
              "more than once (the same results); it is used once", file=sys.stderr)
    return twice


def _second_rows(table: pd.DataFrame, by_id: dict) -> pd.Series:
    """Rows (of ``table``, a profile's own results table) under a run id not planned that hold
    the label, seed and swept values of a planned run whose own row is in the table too: a
    second row of one run (a copy, an older training); each id's rows are flagged with a
    warning. The report counted the seed once (the first row, whichever it was) while
    ``export`` exported both, '4 runs' of a 3-seed cell."""
    ids = _row_ids(table)
    held: dict[tuple, list] = {}  # (label, seed) -> planned runs with a row here
    for rid in dict.fromkeys(ids):
        r = by_id.get(rid)
        if r is not None:
            held.setdefault((str(r.label), norm(r.seed)), []).append(r)
    second = []
    said = []  # 'the run <id> (<label>, seed <s>) ... under <other id>' of each
    cols = _Columns(table)  # each column read once: a frame per row id took 1 ms a row (a
    # minute for a table of 60,000 copies of its rows under other ids)
    flats: dict[str, dict] = {}
    for rid, pos in table.groupby(ids, sort=False).indices.items():  # one grouping, not a
        if rid in by_id:  # mask over the table per id (quadratic, as ``consistent_rows`` was)
            continue
        key = (str(cols.raw(LABEL)[pos[0]]), norm(cols.raw(SEED)[pos[0]]))
        cands = held.get(key, [])
        rows = cols.rows(pos) if cands else None
        twin = next((r for r in cands if not _other_cell(rows, r, flats)), None)
        if twin is not None:
            said.append((twin, key[0], rid))
            second.append(rid)
    if len(said) == 1:
        twin, label, rid = said[0]
        print(f"warning: a committed table has the run {twin.run_id} ({label}, seed "
              f"{twin.seed}) twice, under its id and under {rid}; the row of {rid} is not used",
              file=sys.stderr)
    elif said:  # one warning (a line per row: 60,000 lines for 60,000 such rows)
        named = "; ".join(f"{t.run_id} ({lab}, seed {t.seed}) under {rid}"
                          for t, lab, rid in said[:3])
        more = f"; and {len(said) - 3:,} more" if len(said) > 3 else ""
        print(f"warning: a committed table holds planned runs' rows under {len(said):,} other "
              f"ids too, beside their own ({named}{more}); the rows under the other ids are not "
              "used",
              file=sys.stderr)
    return ids.isin(second)


def _disagreeing(table: pd.DataFrame, ids: pd.Series) -> set[str]:
    """The run ids (``ids``: ``table``'s run id column as text) whose rows (a run under several
    labels) differ in a metric column; in a curves table (a row per evaluation), whose rows of
    one step differ in anything but their label (a run's rows given three times with other
    accuracies were drawn as their mean). Over the whole table at once: each run's rows
    compared on their own took 7 ms a run, 56 of the 183 s of a fresh clone's `plot` of 4,000
    runs (round 45)."""
    several = ids.duplicated(keep=False)
    if not several.any():
        return set()
    rows, ids = table[several], ids[several]
    if STEP in rows:  # the run id is a column: rows of two runs are never one distinct row
        distinct = rows.drop(columns=[c for c in (LABEL, "profile") if c in rows])
        distinct = distinct.astype(str).drop_duplicates()
        return set(distinct[RUN_ID][distinct.duplicated(subset=[RUN_ID, STEP])])
    cols = [c for c in rows.columns if is_metric_column(c)]
    if not cols:
        return set()
    counts = rows[cols].astype(str).groupby(ids.to_numpy(), sort=False).nunique(dropna=False)
    return set(counts.index[(counts > 1).any(axis=1)])


def _fill_config(df: pd.DataFrame, runs: list) -> pd.DataFrame:
    """A committed table written before a config field existed has no value for it (an empty
    cell, or no column): a run that keeps the field at its default has the same run id, so its
    cell keys are taken from the planned run of that id. Without this, a new field with a
    default (e.g. ``model.init`` of ``mamba_lm``) made every committed row of such runs match no
    cell of the profile on a fresh clone (claims MISSING)."""
    if df.empty or "run_id" not in df:
        return df
    keys = report.cell_keys(runs)
    by_id = {r.run_id: r.flat() for r in runs}
    df = df.copy()
    for k in keys:
        if k == LABEL:  # the planned run's label, never a config field
            continue
        planned = df["run_id"].map(lambda i, k=k: by_id.get(i, {}).get(k))
        if k not in df:
            df[k] = planned
        else:
            empty = df[k].isna() | (df[k].astype(str) == "")
            df[k] = df[k].where(~(empty & planned.notna()), planned)
    return df


def _read_curves(path: Path) -> pd.DataFrame:
    """A committed curves table, its metric columns in range (``metric_range_problem``: an
    accuracy of 7 was drawn and kept); ``TableError`` else."""
    df = read_table(path, (STEP,), numeric=lambda cols: [
        c for c in cols if c in (STEP, SAMPLES) or c.endswith((".acc", ".loss", ".mse"))])
    for c in df.columns:
        why = metric_range_problem(c, df[c].tolist()) if c.endswith((".acc", ".loss", ".mse")) \
            else None
        if c in (STEP, SAMPLES):  # a count: -20 or 0.5 was drawn (a record's is quarantined)
            v = df[c].dropna()
            if not (np.isfinite(v) & (v >= 0) & (v == np.floor(v))).all():
                why = "a value that is not a count (0, 1, 2 ...)"
        if why:
            raise TableError(f"{path}: column {c!r} holds {why}; delete it to rebuild it from the "
                             "run records (or re-run the runs)")
    return df


def _curves(spec: Spec, root: Path, runs: list, keys: list[str], path: Path,
            store=None, profile: str | None = None, tag: str = "",
            reported: set[str] | None = None,
            stops: dict[str, int] | None = None) -> pd.DataFrame:
    """The learning-curve table of ``runs`` (report.curves): a run's rows from its record when
    the store has one, else from the committed curves tables (this profile's, then the other
    profiles', as ``load_table``); written to ``path`` when any record was read, else the
    committed table of this profile read as it is (a fresh clone) and completed. Read as it is,
    it keeps only the run ids of ``reported`` (the results table's, when given): curves.csv
    has no column of a setting the sweep does not set, so the rows of a run trained before the
    spec was edited (train.lr) contradicted nothing there and were drawn beside a report of '0
    of 1 finished' (``_without_stale`` drops that run's results row). ``stops``: each finished
    run's stop step (its results row's): a committed curve ending before it warns."""
    store = store or open_store(spec, root.parents[1])
    recs = []
    for x in {(x.run_id, x.label): x for x in runs}.values():
        rec = store.read(x.run_id)
        if rec is not None:  # labelled as in this profile (a reused run carries its own spec's)
            recs.append({**rec, LABEL: x.label})
    table = curve_table(recs, keys)
    own = consistent_rows(_unrecorded(_own_table(path, _read_curves, records=not table.empty),
                                      table), runs, own=True)
    n_own = len(own)
    if table.empty and reported is not None and RUN_ID in own:  # reported: a planned run
        # without a results row (results.csv deleted, or its row not used) is not finished,
        # and its curves were drawn beside a report of '0 of 2 runs finished'
        own = own[own[RUN_ID].astype(str).isin(reported)]
    stale = len(own) < n_own  # (and written back without them, as results.csv is)
    base = own if table.empty else table
    have = set(base[RUN_ID].astype(str)) if RUN_ID in base else set()
    todo = [r for r in {(x.run_id, x.label): x for x in runs}.values() if r.run_id not in have]
    if table.empty:
        todo = _not_covered(own, todo)
    others = (t for _, t in _other_tables(spec, profile, root, tag, "curves")) \
        if profile is not None else ()
    extra = _committed_rows(todo, chain([] if table.empty else [own], others), None)
    if not extra.empty:  # a cell key the other profile did not sweep: the planned run's
        extra = _fill_config(extra, runs)
        base = extra if base.empty else pd.concat([base, extra], ignore_index=True)
    n_rows = len(base)
    base = in_table_order(_without_other_data(base, store), runs, columns=False)
    _warn_short_curves(path, base, stops or {}, {str(r.get(RUN_ID)) for r in recs},
                       bool(stops) and _draws_curves(spec), {x.run_id: x.label for x in runs})
    _write_back(path, base, lambda t: csv_text(whole_numbers(t, runs)), not table.empty,
                stale or len(base) < n_rows)
    return base


def _draws_curves(spec: Spec) -> bool:
    """Whether a figure of ``spec`` draws learning curves (reads curves.csv)."""
    for _, raw in spec.figure_configs:
        try:
            if parse_figure(raw).history_metrics():
                return True
        except (KeyError, ValidationError):  # reported by validate_outputs
            continue
    return False


def _warn_short_curves(path: Path, curves: pd.DataFrame, stops: dict[str, int],
                       recorded: set[str], drawn: bool = False,
                       labels: dict[str, str] | None = None) -> None:
    """Warn of the committed curves (runs without a record here) that end before the step their
    results row says the run stopped at (``stops``): a curves.csv cut at a line end (a partial
    copy, rows deleted) drew those runs' learning curves ending early without a word (a run's
    curve ends at its stop step: its last evaluation is of its final model). When a figure
    draws the curves (``drawn``), warn too of finished runs with no row at all (their rows
    deleted, or the table not there): their curves were left out without a word (a table of
    its header alone is there: it was called 'not there'). ``labels``: each run id's label,
    named beside it."""
    if not stops:
        return
    has = not curves.empty and RUN_ID in curves and STEP in curves
    last = (pd.to_numeric(curves[STEP], errors="coerce").groupby(curves[RUN_ID].astype(str)).max()
            if has else pd.Series(dtype=float))
    short = [f"{rid} (step {int(end)} of {stops[rid]})" for rid, end in last.items()
             if rid not in recorded and rid in stops and np.isfinite(end) and end < stops[rid]]
    if short:
        shown = ", ".join(short[:5]) + (f" and {len(short) - 5} more" if len(short) > 5 else "")
        print(f"warning: {path.name}: the learning curve of {len(short)} run(s) ends before the "
              f"step its results row says the run stopped at: {shown} (the table cut short or "
              "rows deleted?); drawn as they are", file=sys.stderr)
    # (a planned run's: a row of an older run id, the spec edited since, is no curve it misses)
    none = [f"{rid} ({labels.get(rid, '?') if labels is not None else '?'})" for rid in stops
            if rid not in recorded and rid not in last.index
            and (labels is None or rid in labels)] if drawn else []
    if none:
        shown = ", ".join(none[:5]) + (f" and {len(none) - 5} more" if len(none) > 5 else "")
        print(f"warning: {path.name}: {len(none)} finished run(s) have no learning curve "
              f"{'in it' if has or path.is_file() else '(the table is not there)'}: {shown} (rows "
              "deleted, or the table not copied?); their curves are not drawn", file=sys.stderr)


def _named_columns(spec: Spec) -> set[str]:
    """Columns the spec's figures, claims and paper values name (``case:<i>`` left out)."""
    named: set[str] = set()
    for _, raw in spec.figure_configs:
        try:
            named.update(parse_figure(raw).column_refs())
        except (KeyError, ValidationError):  # reported by validate_outputs
            pass
    for raw in spec.claims:
        try:
            named.update(report.parse_claim(raw).column_refs())
        except (KeyError, ValidationError):
            pass
    for pv in spec.paper_values:
        named.update(pv.where)
    return {c for c in named if not is_case_ref(c)}


def _with_run_config(table: pd.DataFrame, runs: list, columns: set[str]) -> pd.DataFrame:
    """A per-run table (``run_id`` column) with the config ``columns`` it lacks, from ``runs``
    (a figure naming a key this profile does not sweep, see ``report.with_config``)."""
    if table.empty or RUN_ID not in table:
        return table
    flats = {r.run_id: f for r, f in zip(runs, per_point(runs, RunConfig.flat))}
    cols = sorted(c for c in columns - set(table.columns)
                  if any(c in f for f in flats.values()))
    ids = table[RUN_ID].astype(str)
    return table.assign(**{c: ids.map(lambda i, c=c: flats.get(i, {}).get(c)) for c in cols})


def output_paths(spec: Spec, profile: str, root: Path, overrides: dict | None = None,
                 figures: bool = True) -> list[Path]:
    """The files ``build`` writes for ``profile`` (results.csv; with ``figures`` also the
    analysis tables, curves, summary, report and figures): ``run`` checks them before any
    training, so a folder in the place of one fails then, not after the sweep."""
    tag = overrides_tag(overrides, expand(spec, profile, overrides=overrides) if overrides else [])
    stems = [("results", "csv")]
    if figures:
        stems += [("histograms", "csv")] if DECAY in spec.analysis else []
        stems += [(a, "csv") for a in spec.analysis if a in WEIGHT_ANALYSES]
        stems += [("curves", "csv"), ("summary", "csv"), ("report", "md")]
        for i, (_, raw) in enumerate(spec.figure_configs):
            try:
                stems.append((figure_stem(parse_figure(raw), i), "png"))
            except (KeyError, ValidationError):
                continue  # reported by validate_outputs
    return [root / output_name(spec, profile, stem, ext, tag) for stem, ext in stems]


def _file_state(path: Path) -> tuple | None:
    """(inode, size, mtime) of the file at ``path``, None when there is none: whether a figure
    kind wrote its image (an atomic write replaces the inode)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns) if path.is_file() else None


def _remove_stale(path: Path, drawn: bool,
                  why: str = "it showed runs that are no finished run of the profile") -> str:
    """Remove ``path``, an output that no finished cell of the profile supports any more (its
    figure not ``drawn`` for want of one, or its summary.csv), when one is there:
    '; the old <name> removed', else ''. After a spec edit whose runs are not trained yet (or
    another default profile) the report counted 0 of 15 runs finished while the old figure.png
    and summary.csv, of runs no longer planned, were kept, and the front page linked them."""
    if drawn or path.is_symlink() or not path.is_file():
        return ""
    path.unlink()
    return f"; the old {path.name} removed ({why})"


def _chosen_runs(cells: pd.DataFrame, runs: list, keys: list[str]) -> set[tuple[str, Any]]:
    """The (run id, label) of the runs of the candidates an ``aggregate.select`` kept
    (``cells``: one row per group of candidates, with the kept value of ``over``; ``keys``:
    every cell key). By label too: a run two labels share (one config) may be the one kept of
    one label and a candidate left out of the other."""
    if cells.empty or not all(k in cells for k in keys):
        return set()
    kept = {tuple(norm(v) for v in row) for row in cells[keys].itertuples(index=False)}
    return {(r.run_id, _label_key(r.label)) for r in runs
            if tuple(norm({**r.flat(), LABEL: r.label}.get(k)) for k in keys) in kept}


def _label_key(label: Any) -> Any:
    """A label as ``chosen`` holds it: CSV round trips read '' as NaN and '1e3' as a number."""
    key = norm(label)
    return "" if key is None else key


def _of_chosen(table: pd.DataFrame, cells: pd.DataFrame, keys: list[str],
               chosen: set[tuple[str, Any]] | None) -> pd.DataFrame:
    """The rows of a per-run (``run_id``) or per-cell (``keys``) table that a figure draws: with
    a selection (``chosen``) those of the kept candidates only (a learning curve or histogram
    of a cell averaged or summed every learning rate tried, as one run's); a per-run table with
    labels by (run id, label): by run id alone, a run two labels share, kept for one, was drawn
    in the other's curve too, averaged with that label's own kept candidate."""
    if chosen is None or table.empty:
        return table
    if RUN_ID in table and LABEL in table:
        pairs = zip(table[RUN_ID].astype(str), map(_label_key, table[LABEL]))
        return table[[p in chosen for p in pairs]].reset_index(drop=True)
    if RUN_ID in table:
        ids = {run_id for run_id, _ in chosen}
        return table[table[RUN_ID].astype(str).isin(ids)].reset_index(drop=True)
    have = [k for k in keys if k in table]
    kept = {tuple(norm(v) for v in row) for row in cells[have].itertuples(index=False)} \
        if all(k in cells for k in have) else set()
    return table[[tuple(norm(v) for v in row) in kept
                  for row in table[have].itertuples(index=False)]].reset_index(drop=True)


def _write_analytic(spec: Spec, path: Path) -> pd.DataFrame:
    """Write an analytic spec's results table, its theory table (one row per grid point)."""
    df = analytic_table(spec)
    atomic_write_text(path, df.to_csv(index=False))
    return df


def write_analytic_table(spec: Spec, profile: str, root: Path) -> Path:
    """An analytic spec's results.csv (`run --no-plot` wrote none: its table is no run record,
    and the help promises results.csv whatever the figures)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / output_name(spec, profile, "results", "csv")
    with folder_lock(root, "writing the tables, figures and reports of"):
        _write_analytic(spec, path)
    return path


def build(spec: Spec, profile: str, root: Path, overrides: dict | None = None,
          rerun: str | None = None) -> Outputs:
    """results.csv (from records), summary.csv, curves.csv, every figure and report.md of
    ``profile`` (with ``overrides``: of those runs, in files tagged ``-set-<hash>``).
    ``rerun``: the shell command that trains this profile's runs, as a figure not drawn for
    want of them names it (default ``ssmrepro run ID --profile P``).

    One build of a results folder at a time (``folder_lock``): `plot` while `run` wrote its
    last record (or two `run --max-runs 1` of one spec) read the records before the other's
    build and wrote after it, leaving the outputs a run short of the records, or results.csv
    of 2 runs beside a report of 1 finished."""
    runs = expand(spec, profile, overrides=overrides)
    # one store for every read, whose warnings are said at the end: a record quarantined (or
    # ignored) here left the tables a run short without a word (only `run` printed them)
    store = open_store(spec, root.parents[1])
    store.check_links()  # nothing is written through a link outside
    root.mkdir(parents=True, exist_ok=True)
    with folder_lock(root, "writing the tables, figures and reports of"):
        # the temp files of a `plot` or `figures` killed (kill -9) while it wrote a table or a
        # figure: only a `run` of the spec removed them, and `make figures` left them in the
        # committed results folder for ever
        remove_dead_temps(root)
        return _build(spec, profile, root, runs, store, overrides, rerun)


def _build(spec: Spec, profile: str, root: Path, runs: list, store, overrides: dict | None,
           rerun: str | None) -> Outputs:
    """``build`` while it holds the results folder."""
    tag = overrides_tag(overrides, runs or [])

    def out(stem: str, ext: str) -> Path:
        return root / output_name(spec, profile, stem, ext, tag)

    counted = None  # the cells the runs are counted over (``cells`` unless a selection)
    chosen = None  # with a selection: the run ids of the candidates kept
    if spec.analytic is not None:  # a table computed from theory: its rows are the cells
        df = _write_analytic(spec, out("results", "csv"))
        keys = [LABEL, *spec.analytic.grid]
        cells = analytic_cells(df)
    else:
        df = load_table(spec, profile, root, runs, tag, store)
        keys = report.cell_keys(runs)
        agg = spec.aggregate
        cells = report.aggregate(df, runs, agg.reduce, agg.metrics, agg.percentiles, agg.select)
        if agg.select is not None:  # one cell per group of candidates: `over` is no cell key
            chosen = _chosen_runs(cells, runs, keys)
            run_keys = keys  # the analysis tables keep `over`: a row per candidate
            keys = [k for k in keys if k != agg.select.over]
            # the runs are counted over every candidate, not the kept one's alone (the report
            # said '6 runs expected, 6 finished' of 12 planned, one of them not trained)
            counted = report.aggregate(df, runs, agg.reduce, [])
    if chosen is None:
        run_keys = keys
    tables = {}
    # the runs a committed analysis table's rows may stand for: finished under the spec as it is
    done = set(df.loc[df[STATUS] == OK, RUN_ID].astype(str)) if STATUS in df and RUN_ID in df \
        else set()
    finished = [r for r in runs if r.run_id in done]
    base = functools.partial(_base_values, spec, profile, overrides)
    if DECAY in spec.analysis:
        # under the label each run has in the spec as it is (the label is no part of the run
        # id): a case relabelled since (S4D+PE -> S4D-PE) left its cell without decay metrics
        # and under each label of a run two cases share (one config): keyed by run id, its
        # histogram went to the last label alone and the other cell had no decay metrics
        recs = {(x.run_id, x.label): {**rec, LABEL: x.label} for x in runs
                if (rec := store.read(x.run_id)) is not None}
        hpath = out("histograms", "csv")
        # a histogram holding NaN / inf values (the model diverged) is no measurement of its
        # run: left out of its cell, said (its finite rest was summed in as the whole)
        bad = {key: n for key, rec in recs.items()
               if (n := nonfinite_values((rec.get("analysis") or {}).get(DECAY)))}
        if bad:
            named = [f"{rid} ({label}: {n:,} values)" for (rid, label), n in bad.items()]
            print(f"warning: {hpath.name}: the decay histogram of {len(bad)} run(s) holds NaN "
                  f"or infinite values (the model diverged): {', '.join(named[:5])}"
                  f"{f' and {len(named) - 5} more' if len(named) > 5 else ''}; left out of "
                  "their cells' histograms and decay metrics", file=sys.stderr)
        hist = histogram_table([rec for key, rec in recs.items() if key not in bad], run_keys)
        computed = not hist.empty
        dropped = False  # committed rows of runs not finished under the spec as it is
        cols, short = short_cells(hist, run_keys, finished,  # cells short of a record
                                  {rid for rid, _ in recs})
        # a committed cell stands for none of the sweep point (label, configs) of a run left
        # out here: its row holds that run's histogram too (the finite rest, as an older plot
        # summed it), and it came back, warned of as left out, when every run's was
        left = {(x.label, id(x.task), id(x.model), id(x.train)) for x in runs
                if (x.run_id, x.label) in bad}
        measured = [x for x in finished
                    if (x.label, id(x.task), id(x.model), id(x.train)) not in left]
        if hpath.exists() and (hist.empty or len(recs) < len(runs)):  # the committed cells
            read = read_histograms(hpath)
            committed, vague = completed_keys(read, run_keys, finished, base)
            for why in vague:
                print(f"warning: {hpath.name}: {why}; its rows are not used", file=sys.stderr)
            # a committed cell stands whole for one short of a seed's record (measured from the
            # seeds present, it disagreed with its results row, which counts them all)
            stand = short_cells(hist, run_keys, measured, {rid for rid, _ in recs})[1] & set(
                cell_identities(committed, run_keys))
            if stand:
                hist = hist[[k not in stand for k in cell_identities(hist, run_keys)]]
            n_own = len(hist)
            hist = with_committed(hist, committed, run_keys, measured, runs)
            dropped = _committed_dropped(read, len(hist) - n_own)
            short -= stand
        for key in sorted(short, key=str):
            print(f"warning: {hpath.name}: the cell {', '.join(f'{c}={v}' for c, v in zip(cols, key))}"
                  " is measured from the records of only some of its finished runs (the others' "
                  "records are not here)", file=sys.stderr)
        _write_back(hpath, hist, csv_text, computed, dropped)
        # a selection's cell is measured from its kept candidate alone (the histograms of
        # every learning rate were summed into it: decay.split 0.085 for the kept run's 0.154)
        tables[DECAY] = _of_chosen(hist, cells, run_keys, chosen)
        cells = add_metrics(cells, decay_metrics(hist), list(DECAY_METRICS),
                            spec.aggregate.reduce)
    for name in (a for a in spec.analysis if a in WEIGHT_ANALYSES):
        # from the saved weights; the committed table when there are none (a fresh checkout)
        table = weights_table(name, runs, store, run_keys)
        tpath = out(name, "csv")
        computed, dropped = not table.empty, False
        if len(table) < len(runs) and tpath.exists():  # runs without weights: committed rows
            read = read_weights_table(tpath, name)
            committed, unplanned = planned_rows(read, runs, run_keys)
            committed, vague = completed_keys(committed, run_keys, finished, base)
            for why in [*unplanned, *vague]:
                print(f"warning: {tpath.name}: {why}; the row is not used", file=sys.stderr)
            n_own = len(table)
            table = with_committed(table, committed, run_keys, finished, runs)
            dropped = _committed_dropped(read, len(table) - n_own)
        _write_back(tpath, table, csv_text, computed, dropped)
        tables[name] = _of_chosen(table, cells, run_keys, chosen)
        metrics = WEIGHT_ANALYSES[name][1]
        cells = add_metrics(cells, cell_means(table, metrics), list(metrics),
                            spec.aggregate.reduce)
    curves = out("curves", "csv")
    named = _named_columns(spec)
    reported = set(df[RUN_ID].astype(str)) if RUN_ID in df else set()  # no table: none
    # and the planned runs a row under an older id stands for (a code version change)
    unreported = [r for r in runs if r.run_id not in reported]
    reported |= {r.run_id for r in unreported} - {r.run_id for r in _not_covered(df, unreported)}
    stops = {}  # each finished run's stop step (its results row's)
    if {RUN_ID, STATUS, STOP_STEP} <= set(df.columns):
        for rid, status, stop in zip(df[RUN_ID].astype(str), df[STATUS],
                                     pd.to_numeric(df[STOP_STEP], errors="coerce")):
            if status == OK and np.isfinite(stop):
                stops[rid] = int(stop)
    tables[CURVES] = (_of_chosen(_with_run_config(_curves(
        spec, root, runs, keys, curves, store, profile, tag, reported, stops), runs, named),
        cells, run_keys, chosen) if runs else pd.DataFrame())
    configs = [parse_figure(raw) for _, raw in spec.figure_configs]
    view = report.with_config(cells, runs, named)  # + the config keys named but not swept here
    verdicts = report.verify(spec, view, keys, eval_sets={n for r in runs for n in r.train.evals}
                             if runs else None)
    # a figure drawn from saved weights draws a selection's kept candidate (it drew a row per
    # learning rate tried, each under the cell's one name)
    drawn_runs = [r for r in runs if (r.run_id, _label_key(r.label)) in chosen] or runs \
        if chosen is not None else runs
    ctx = FigureContext(spec, profile, view, keys, out, tables, drawn_runs, store,
                        rerun=rerun or "", overrides=overrides_text(overrides))
    figures = []
    for i, cfg in enumerate(configs):
        path = out(figure_stem(cfg, i), "png")
        try:
            before = _file_state(path)
            drawn = FIGURE_KINDS[cfg.kind].fn(ctx, cfg, path)
            if not isinstance(drawn, bool) or (drawn and _file_state(path) in (None, before)):
                # a registered kind's slip: None (no return) read as 'nothing to draw', its
                # image then removed as stale; True with no new image listed a missing or an
                # old figure
                why = (f"figure kind {cfg.kind!r} returned {drawn!r}, not true or false "
                       f"(whether it drew {path.name})" if not isinstance(drawn, bool) else
                       f"figure kind {cfg.kind!r} returned true but wrote no {path.name}")
                drawn = False
            else:
                why = f"no finished cell of profile {profile} to draw" + (
                    f" where {_shown(cfg.cell_filter())}" if cfg.cell_filter() else "")
                why += _remove_stale(path, drawn)
        except NotDrawn as err:  # a saved-weights figure of no finished cell: its old image
            # (of runs no longer planned) was kept beside a report of 0 runs finished
            drawn, why = False, str(err) + (_remove_stale(path, False, *(
                [err.stale] if isinstance(err.stale, str) else [])) if err.stale else "")
        if drawn:
            figures.append(path)
        else:  # said, never silently absent (a where or a series that matched nothing)
            print(f"{spec.id}: {path.name} not drawn: {why}", file=sys.stderr)
        # an any-of label of its `where` that no profile has (`label: [S6, S5]` after S5 left
        # the spec): drawn with S6 alone without a word (`validate` alone refused it), as a
        # claim's verdict and a paper value's row name it
        gone = report.labels_of_no_profile(spec, [cfg.cell_filter()])
        if gone:
            print(f"warning: {spec.id}: {path.name}: label {', '.join(gone)} (of its where's "
                  "any-of list) is a case label of no profile of the spec: drawn without it",
                  file=sys.stderr)
    for w in store.to_say():
        print(f"warning: {w}", file=sys.stderr)
    if not report.finished(cells).empty:
        atomic_write_text(out("summary", "csv"), csv_text(whole_numbers(
            cells, runs, ("n_params", "n_expected", "n_ok", "n_diverged", "n_time_limit",
                          "n_early_stop_0"))))
    elif _remove_stale(out("summary", "csv"), False):
        print(f"{spec.id}: {out('summary', 'csv').name} removed: no finished cell of profile "
              f"{profile}", file=sys.stderr)
    rep = out("report", "md")
    counted = cells if counted is None else counted
    shared = None if spec.analytic is not None else report.shared_run_counts(df, runs)
    atomic_write_text(rep, report.markdown(spec, profile, cells, verdicts, len(df), counted,
                                           shared, overrides_text(overrides)))
    n_exp, n_done = (shared or report.run_counts(counted, len(df)))[:2]
    analytic = spec.analytic is not None
    table = out("results", "csv")  # `verify --json` named a table that was never written
    return Outputs(table if table.is_file() else None, figures[0] if figures else None, figures,
                   rep, verdicts,
                   curves if curves.exists() else None, None if analytic else n_exp,
                   None if analytic else n_done)
