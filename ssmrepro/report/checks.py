"""Stage 5 (report): the check registry — every checkable claim is one registered check.

Kinds: threshold, ordering, monotone, loglog_slope, recall_frontier (koren2026), region (a
threshold inside a region given by an expression, e.g. below a theory line), size_order (which
label reaches a threshold at the smallest size; huang2025) and spread (the metric hardly changes
within groups: insensitivity to a key).

A spec's ``claims:`` list holds typed checks, selected by ``check:`` (default ``threshold``)::

    claims:
      - {text: "Mamba+PE solves KEEP FIFTH", where: {label: Mamba+PE}, op: ">=", value: 0.95}
      - {check: ordering, text: "full >= linear", a: {label: full}, b: {label: linear},
         match: [model.d_model, model.d_state]}

A check is a function ``fn(ctx, cfg) -> list[Verdict]`` registered with its pydantic config
(extra keys forbidden) by :func:`check_kind`. Checks see the profile's cells (``cells.aggregate``):
every cell the profile expects, finished or not. The verdict rules are the same for every check
(:func:`judge`):

* MISSING — the profile has no cell the claim needs, or none of them is complete (every expected
  run finished), or the complete cells pass but some needed cells are not complete (the line says
  how many), or the profile's design cannot test the claim (e.g. one point per group);
* FAIL — the complete cells contradict the claim. A diverged run's metric is NaN and counts as a
  miss, so a fully diverged cell fails a claim (it is finished, not missing);
* PASS — every needed cell is complete and the claim holds on all of them.

``where`` conditions select cells: ``{key: value}`` (numbers compare by value), ``{key: [v1, v2]}``
(any of), and ``label`` matches the whole label or one of its case labels.

A check's ``metric`` is an aggregated metric or an expression of them, evaluated per cell (e.g.
``"L50.acc - L190.acc"``: the drop from the training length to the longest; cooper2026 Fig. 8).
"""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, field_validator, model_validator

from .. import expr
from ..store import NAMED_SET_METRICS, SET_METRICS
from ..theory.recall import law_constant, refined_frontier_product
from ..util import (
    NoBoolNumbers,
    check_registration,
    doc_summary,
    docstring,
    list_leaves,
    pairs_text,
    repeated,
)
from .cells import (
    CellIndex,
    alternatives,
    cell_env,
    column,
    expected,
    fmt_beside,
    fmt_num,
    fmt_value,
    more_digits,
    norm,
    select,
)
from .columns import (
    COMPLETE,
    DEFAULT_METRIC,
    FACTS,
    LABEL,
    LABEL_SEP,
    N_DIVERGED,
    N_EXPECTED,
    N_OK,
    REGIME,
    SELECT_N,
    STATE,
    VOCAB,
    WIDTH,
)


def close(a: float, b: float) -> bool:
    """Equal but for floating-point rounding (relative 1e-9; no absolute slack, so losses of
    5e-14 and 6e-14 still differ): a mean of seeds, a difference or a sum is rounded, so
    0.9 - 0.85 is 0.050000000000000044 and a value on its bound (|ours - paper| = tol,
    a − b = margin) fell on the wrong side of it. Bounds are compared with the values
    themselves (a >= b + margin), not with their differences, whose rounding is not relative."""
    return math.isclose(a, b, rel_tol=1e-9)


# comparisons with a bound; a value on the bound but for rounding is on it (>= and <= hold,
# > and < do not); NaN compares false
OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b or close(a, b),
    "<=": lambda a, b: a <= b or close(a, b),
    ">": lambda a, b: a > b and not close(a, b),
    "<": lambda a, b: a < b and not close(a, b),
}


def within(x: float, value: float, tol: float) -> bool:
    """|x - value| <= tol, with x compared to value ± tol (see ``close``)."""
    return OPS[">="](x, value - tol) and OPS["<="](x, value + tol)


def difference(hi: float, lo: float, bound: float = 0.0) -> float:
    """hi - lo as a check judges it against ``bound`` (``hi <= lo + bound``, ``hi >= lo +
    bound``): exactly 0 where hi and lo are equal but for rounding, exactly ``bound`` where hi
    is on lo + bound but for rounding (``close``). Two means of seeds equal but for their
    summation order (0.8500000000000001 and 0.85) printed 'ours: -1.11e-16' beside a PASS of
    `a >= b`, a spread of '1.11e-16' beside one of `spread <= 0`; a difference judged on its
    bound was printed off it. Where both hold (a bound below rounding, margin 1e-12 beside means
    of 1.0) the bound is given: the check met it, and 'ours: 0.000' read as a PASS of `a >= b +
    1e-12` by a difference below its margin."""
    if close(hi, lo + bound):
        return float(bound)
    if close(hi, lo):
        return 0.0
    return hi - lo


def nearer_end(x: float, value: float, tol: float) -> float:
    """The end of value ± tol nearer to ``x`` (the bound it is printed beside, ``fmt_beside``)."""
    return value + tol if x > value else value - tol


@dataclass
class Verdict:
    kind: str  # "claim" | "paper_value"
    text: str
    verdict: str  # PASS | FAIL | MISSING | UNTESTED (claims); match | differs | missing |
    # unfinished (paper values)
    ours: float | None
    paper: float | None = None
    detail: str = ""
    bound: float | None = None  # the threshold ``ours`` is judged against (``cells.fmt_beside``)


@dataclass
class Outcome:
    """What a check found on the complete cells: ``ok`` None = this profile cannot test it."""

    ok: bool | None
    detail: str
    ours: float | None = None
    bound: float | None = None  # the threshold ``ours`` is judged against, if one


@dataclass
class CheckContext:
    spec: Any
    cells: pd.DataFrame  # ``cells.aggregate`` of the profile
    keys: list[str]  # the cell key columns
    eval_sets: set[str] | None = None  # the named evaluation sets of the profile's runs
    _index: tuple[pd.DataFrame, CellIndex] | None = field(default=None, repr=False,
                                                          compare=False)

    def needed(self, where: dict[str, Any]) -> pd.DataFrame:
        """Cells of the profile matching ``where`` (complete or not), through one index of the
        expected cells (each claim's cells were found by trying every cell)."""
        if self._index is None or self._index[0] is not self.cells:
            self._index = (self.cells, CellIndex(expected(self.cells)))
        return self._index[1].select(where)

    def unmatched(self, where: dict[str, Any]) -> str:
        """Why ``where`` selects no cell of the profile ('' when it selects some): the first
        condition no expected run meets alone (``label=S5``: a label the spec no longer has,
        or one this profile's sweep has no run of), else the conditions together. Read from
        the profile's own cells, not by expanding the other profiles."""
        if not isinstance(where, dict) or not where or not self.needed(where).empty:
            return ""
        index = self._index[1]  # (built by needed() above)
        for k, v in where.items():
            if not index.positions({k: v}):
                return f"no run of this profile has {pairs_text([(k, v)])}"
        return f"no cell of this profile has {pairs_text(where.items())} together"


WHERE_HELP = ("the cells the check reads: column -> value (or list of values); {} = every cell "
              "of the profile")
VIOLATIONS_HELP = "how many of the comparisons may fail with the check still PASS"


DEFAULT_CHECK = "threshold"  # the check of a claim without `check:`


class Given(NoBoolNumbers):
    """A precondition on a cell, e.g. ``{metric: train.acc, op: ">=", value: 0.9}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    metric: str = Field(..., description="the results column the precondition reads")
    op: Literal[">=", "<=", ">", "<"] = Field(..., description="how the metric compares with value")
    value: float = Field(..., description="the bound the metric is compared with")

    def text(self) -> str:
        return f"{self.metric} {self.op} {self.value}"


# preconditions of one claim (the shipped claims have at most 1): each is checked against every
# cell and printed in the claim's verdict line, and 10,000 copies of one made a 200 kB line
MAX_GIVEN = 20


class CheckConfig(NoBoolNumbers):
    """The keys of every ``claims`` entry, whatever its check (each check's own: list-checks)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    check: str = Field(DEFAULT_CHECK, description="the check: one of list-checks")
    text: str = Field(..., description="the sentence of the paper's claim this checks")
    metric: str = Field(DEFAULT_METRIC, description="the results column (aggregated metric) judged")
    given: list[Given] = Field(
        [], max_length=MAX_GIVEN, description="preconditions: a finished cell that misses one "
        "(e.g. train.acc >= 0.9, an untrained model) cannot test the claim and counts as not "
        "finished (MISSING, never a silent PASS); a diverged cell (NaN) stays testable, so it "
        "still fails")

    @field_validator("text")
    @classmethod
    def _one_line(cls, text: str) -> str:
        """The text as one line (its line breaks and runs of spaces one space): a verdict is one
        line of report.md and of the terminal, and a text written over lines (`text: |`) put a
        line of its own there, '- **PASS** ...' or '# ...', that read as another verdict."""
        return " ".join(text.split())

    @field_validator("given")
    @classmethod
    def _given_once(cls, given: list[Given]) -> list[Given]:
        twice = repeated(given)  # (a Given is frozen: hashable)
        if twice is not None:  # the same condition again excludes no other cell: printed twice
            raise ValueError(f"{twice.text()} is given more than once")
        return given

    def column_refs(self) -> list[str]:
        """Columns the check names (validated against the spec's run table)."""
        return []

    def numeric_refs(self) -> list[str]:
        """Columns the check reads as numbers (a log axis, a size): validated to hold numbers in
        every run (``label`` or a text key raised ValueError in the check)."""
        return []

    def log_refs(self) -> list[str]:
        """Columns the check takes the logarithm of (a subset of ``numeric_refs``): validated to
        hold positive numbers in every cell (a slope over x = 0 FAILed whatever was trained)."""
        return []

    def cell_exprs(self) -> list[tuple[str, str]]:
        """(field, expression over a cell's config columns) evaluated on every cell of the
        profile before any training (an expression that cannot be evaluated for a cell, e.g.
        a division by zero or text compared with a number, raised in the check)."""
        return []

    def value_refs(self) -> list[tuple[str, str, Any]]:
        """(field, column, value) the check names as a value of a column (``label``: a run's
        label or case label): a typo matched no cell (a silent PASS or MISSING forever)."""
        return []

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        """'field: reason' for what makes the check unable ever to hold (or to be judged) on the
        cells of one profile (one row per cell, its config columns; ``keys`` the cell keys),
        though its ``where`` matches some: it FAILed or stayed MISSING whatever was trained."""
        return []

    def unfailing(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        """Why the check cannot fail on the cells of one profile whatever is trained (its
        ``allowed_violations`` at least the comparisons it makes there), else None.
        ``validate`` refuses a check that cannot fail in any profile."""
        return None

    def selectors(self) -> list[dict[str, Any]]:
        """The conditions each of which must match some cell of a profile for the check to be
        judged there (``validate`` requires them of the paper profile): its ``where``."""
        where = getattr(self, "where", None)
        return [where] if isinstance(where, dict) else []

    def unjudged(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        """Why the check stays MISSING on the cells of one profile whatever is trained (e.g. a
        slope over fewer values of x than ``min_points``), '' when no cell of the profile is one
        it needs, None when it can be judged. ``validate`` refuses a check that no profile can
        judge (one profile that cannot, smoke, is an honest MISSING there)."""
        return None


@dataclass(frozen=True)
class CheckKind:
    name: str
    Config: type[CheckConfig]
    fn: Callable[[CheckContext, Any], list[Verdict]]
    summary: str


CHECKS: dict[str, CheckKind] = {}
CLAIM_VERDICTS = ("PASS", "FAIL", "MISSING", "UNTESTED")


def check_kind(name: str, Config: type[CheckConfig]):
    """Register ``fn(ctx, cfg) -> list[Verdict]`` as check ``name`` with its config class."""

    def deco(fn):
        check_registration("check", name, Config, CheckConfig, "check", CHECKS)
        CHECKS[name] = CheckKind(name, Config, fn, doc_summary(docstring(fn)))
        return fn

    return deco


def parse_claim(raw: dict[str, Any]) -> CheckConfig:
    """The typed config of one ``claims:`` entry (KeyError: unknown check; ValidationError)."""
    if "check" not in raw and "kind" in raw:  # a figure's `kind:` habit: the claim was read
        # as a threshold and refused with 'kind: unknown key' plus the threshold's missing
        # fields, none of which said how a claim names its check
        kind = raw["kind"]
        raise KeyError(f"a claim names its check with `check:`, not `kind:` (check: {kind}"
                       + (")" if isinstance(kind, str) and kind in CHECKS
                          else f"; known: {', '.join(CHECKS)})"))
    name = raw.get("check", DEFAULT_CHECK)
    if not isinstance(name, str) or name not in CHECKS:
        raise KeyError(f"unknown check {name!r} (known: {', '.join(CHECKS)}; their fields: "
                       "ssmrepro list-checks)")
    return CHECKS[name].Config(**{"check": name, **raw})


def run_check(ctx: CheckContext, cfg: CheckConfig) -> list[Verdict]:
    out = CHECKS[cfg.check].fn(ctx, cfg)
    if (not isinstance(out, list) or not out
            or not all(isinstance(v, Verdict) and v.kind == "claim" and v.verdict in CLAIM_VERDICTS
                       for v in out)):
        # a registered check's slip (an empty list dropped the claim from the report and its
        # tally; a verdict 'pass' or 'OK' was counted as none of PASS / FAIL / MISSING): the claim
        # stays, MISSING, saying why
        got = (f"{type(out).__name__}" if not isinstance(out, list) else "an empty list" if not out
               else "; ".join(f"{type(v).__name__} {getattr(v, 'kind', '?')!r} "
                              f"{getattr(v, 'verdict', '?')!r}" for v in out[:3]))
        return [Verdict("claim", cfg.text, "MISSING", None,
                        detail=f"check {cfg.check!r} returned {got}, not a list of claim verdicts "
                        f"({', '.join(CLAIM_VERDICTS)}): not judged")]
    slips = [s for s in map(_verdict_slip, out) if s]
    if slips:  # a string, list or tensor `ours` failed report.md with a TypeError (after
        # training, in plot); a bool printed as the number 1.000
        return [Verdict("claim", cfg.text, "MISSING", None,
                        detail=f"check {cfg.check!r} returned a verdict whose {slips[0]}: "
                        "not judged")]
    absent = unmeasured_sets([cfg.metric, *(g.metric for g in cfg.given)], ctx.eval_sets)
    if absent:  # no value of it in any cell read as a miss: it FAILed where nothing was measured
        for v in out:
            v.verdict, v.ours = "MISSING", None
            v.detail = (f"this profile's runs have no evaluation set {' or '.join(map(repr, absent))}"
                        " (train.evals): the claim's metric is not measured here")
    # a `where` that selects no cell of the profile (a label renamed in the spec, or one of
    # another profile's cases): the verdict said only 'this profile has no cell the claim needs'
    # ('no pair of matching a/b cells'); `validate` alone named the label
    why = [(name, text) for name, text in _unselected(ctx, cfg) if text]
    for v in out:
        if v.verdict == "MISSING" and v.ours is None and why:
            v.detail = "; ".join(x for x in (v.detail, *(f"{name}: {text}" if name else text
                                                        for name, text in why)) if x)
    # an any-of label that no profile has (`label: [S6, S5]` after S5 left the spec): the claim
    # was judged, and PASSed, on S6 alone without a word (`validate` alone refused it); values
    # some other profile runs (a quick profile's subset of the paper's grid) are not named
    gone = labels_of_no_profile(ctx.spec, cfg.selectors())
    if gone:
        note = (f"label {', '.join(gone)} (of its any-of list) is a case label of no "
                "profile of the spec: judged without it")
        for v in out:
            v.detail = "; ".join(x for x in (v.detail, note) if x)
    return out


def case_labels(spec: Any) -> set[str] | None:
    """The case labels of every profile's sweep (its own, or the spec's), read from the spec
    without expanding it; None for a spec without profiles and sweeps (an analytic one, or a
    stand-in)."""
    profiles = getattr(spec, "profiles", None)
    if not isinstance(profiles, dict):
        return None
    out: set[str] = set()
    for prof in profiles.values():
        axes = prof.sweep if prof.sweep is not None else getattr(spec, "sweep", None) or []
        out.update(c.label for a in axes for c in a.cases or [] if c.label)
    return out


def labels_of_no_profile(spec: Any, selectors: list[dict[str, Any]]) -> list[str]:
    """The values (as printed) of the any-of ``label`` lists of ``selectors`` (a claim's
    ``where``, an ordering's ``a`` and ``b``, a paper value's ``where``; a list inside the list
    read as its values, as ``select`` reads it) that are a case label of no profile (a whole
    label, ``S6 / L2``, is one when each of its case labels is; a number, the label it reads
    as; None none)."""
    labels = case_labels(spec)
    if labels is None:
        return []
    gone: list[str] = []
    for w in selectors:
        want = w.get(LABEL) if isinstance(w, dict) else None
        for v in list_leaves(alternatives(want, []))[0]:
            # (a number matches the case label it reads as: `label_matches`)
            known = v is not None and all(part in labels for part in str(v).split(LABEL_SEP))
            if not known and repr(v) not in gone:
                gone.append(repr(v))
    return gone


def _unselected(ctx: CheckContext, cfg: CheckConfig) -> list[tuple[str, str]]:
    """(field, ``CheckContext.unmatched``) of each of the claim's selectors (its ``where``; an
    ordering's ``a`` and ``b``); the field is named when the claim has several."""
    sels = cfg.selectors()
    out = []
    for w in sels:
        name = next((f for f in type(cfg).model_fields if getattr(cfg, f) is w), "")
        out.append((name if len(sels) > 1 else "", ctx.unmatched(w)))
    return out


def _verdict_slip(v: Verdict) -> str:
    """What a registered check's claim verdict holds that the report cannot print ('' if
    nothing): ``ours`` and ``bound`` are numbers or None (a numpy scalar or an int is taken as
    its float, in place; a bool, a string, a list, a tensor are not), ``text`` and ``detail``
    strings."""
    for name in ("ours", "bound"):
        x = getattr(v, name)
        if x is None:
            continue
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
            return (f"{name} is {type(x).__name__} {reprlib.repr(x)}, not a number or None"
                    + (" (a tensor's .item() is one)" if hasattr(x, "item") else ""))
        try:
            setattr(v, name, float(x))
        except OverflowError:  # an int (or Fraction) beyond any float: an OverflowError
            # traceback after training, in plot
            # (its digits unprinted: str() refuses an int of over 4,300 digits)
            return f"{name} is {type(x).__name__} beyond a float's range (above 1.8e308)"
    for name in ("text", "detail"):
        x = getattr(v, name)
        if not isinstance(x, str):
            return f"{name} is {type(x).__name__} {reprlib.repr(x)}, not a string"
    return ""


def unmeasured_sets(metrics: list[str], eval_sets: set[str] | None) -> list[str]:
    """The named evaluation sets whose metrics (``long.acc``, ``long.loss.std``) ``metrics`` (a
    claim's metric and preconditions, a paper value's metric) read and that no run of the
    profile has (its ``eval_sets``, the names in its runs' train.evals; None: not known, nothing
    is said)."""
    if eval_sets is None:
        return []
    names = set()
    for metric in metrics:
        try:
            names |= metric_names(metric)
        except expr.ExprError:
            continue
    out = set()
    for name in names:
        head, _, tail = name.partition(".")
        tail = tail.removesuffix(".std").split(".p")[0]
        if (head not in SET_METRICS and head not in ("task", "model") and head not in eval_sets
                and tail in NAMED_SET_METRICS):
            out.add(head)
    return sorted(out)


# ----------------------------------------------------------------------------------------------
# the verdict rule shared by every check


def seed_spreads(metric: str, given: list[Given] | tuple = ()) -> list[str]:
    """The seed-spread columns (``<m>.std``) the metric (or expression) and the preconditions
    read."""
    names: set[str] = set()
    for m in (metric, *(g.metric for g in given)):
        try:
            names |= metric_names(m) if m else set()
        except expr.ExprError:
            pass
    return sorted(n for n in names if n.endswith(".std"))


def testable(complete: pd.DataFrame, given: list[Given], metric: str = "") -> pd.DataFrame:
    """The complete cells that meet every precondition (NaN in a cell where a run diverged counts
    as meeting it: the claim judges the divergence) and, for a metric or precondition that reads
    a seed spread (``test.acc.std``), have two seeds that finished ok or a diverged one (one seed
    has no spread: its 0.0, as it was, PASSed a claim that seeds agree; ``aggregate`` now leaves
    it NaN, which would read as a miss). A precondition with no value in a cell where no run
    diverged (its metric not measured: an evaluation set the cell's runs do not have) is not met:
    it held, and the claim PASSed on cells it was meant to exclude."""
    if complete.empty:
        return complete
    ok = np.ones(len(complete), dtype=bool)
    diverged = (complete[N_DIVERGED].to_numpy(float) > 0 if N_DIVERGED in complete
                else np.ones(len(complete), dtype=bool))
    if seed_spreads(metric, given) and N_OK in complete:
        ok &= ((complete[N_OK].to_numpy(float) >= 2)
               | (complete[N_DIVERGED].to_numpy(float) > 0 if N_DIVERGED in complete else False))
    for g in given:
        vals = _metric(complete, g.metric)
        ok &= np.array([d if math.isnan(v) else OPS[g.op](v, g.value)
                        for v, d in zip(vals, diverged)], dtype=bool)
    return complete[ok]


def _untestable(cfg: CheckConfig | None) -> str:
    """What the finished cells ``testable`` leaves out do ('miss the precondition', ...)."""
    why = ["miss the precondition"] if cfg is None or cfg.given else []
    spreads = seed_spreads(cfg.metric, cfg.given) if cfg is not None else []
    if spreads:
        why.append(f"have fewer than 2 finished seeds for {', '.join(spreads)}")
    return " or ".join(why)


def given_text(given: list[Given]) -> str:
    return f" given {' and '.join(g.text() for g in given)}" if given else ""


def judge(text: str, needed: pd.DataFrame, evaluate: Callable[[pd.DataFrame], Outcome],
          cfg: CheckConfig | None = None) -> Verdict:
    """PASS / FAIL / MISSING for one claim from the cells it needs (see the module doc); finished
    cells that ``testable`` leaves out (a precondition in ``cfg.given`` missed, one seed for a
    seed spread) count as not finished."""
    given = cfg.given if cfg is not None else []
    text += given_text(given)
    if needed.empty:
        return Verdict("claim", text, "MISSING", None,
                       detail="this profile has no cell the claim needs")
    complete = needed[needed[COMPLETE].astype(bool)]
    n_absent = len(needed) - len(complete)
    absent = (f"{n_absent} of {len(needed)} needed cells not finished" if n_absent else "")
    if n_absent and SELECT_N in needed:  # `aggregate.select`: a cell whose kept candidate's
        # runs are all in, beside candidates not finished, read as a cell of n_ok 3 of
        # n_expected 3 'not finished'
        rest = needed[~needed[COMPLETE].astype(bool)]
        k = int(((rest[N_OK] + rest[N_DIVERGED]) >= rest[N_EXPECTED]).sum())
        if k:
            absent += (f" ({k} of them: every run of the candidate kept so far finished, not "
                       "every candidate's)")
    ok = testable(complete, given, cfg.metric if cfg is not None else "")
    if len(ok) < len(complete):
        n_off = len(complete) - len(ok)
        absent = "; ".join(x for x in (absent, f"{n_off} of {len(needed)} finished cells "
                                       f"{_untestable(cfg)} (untestable)") if x)
        n_absent += n_off
        complete = ok
    if complete.empty:
        return Verdict("claim", text, "MISSING", None, detail=absent)
    out = evaluate(complete)
    detail = "; ".join(x for x in (out.detail, absent) if x)
    if out.ok is False:
        return Verdict("claim", text, "FAIL", out.ours, detail=detail, bound=out.bound)
    if out.ok is None or n_absent:
        return Verdict("claim", text, "MISSING", out.ours, detail=detail, bound=out.bound)
    return Verdict("claim", text, "PASS", out.ours, detail=detail, bound=out.bound)


def _fmt_where(where: dict[str, Any]) -> str:
    return pairs_text(where.items()) or "all cells"


def metric_names(metric: str) -> set[str]:
    """The aggregated metrics a check's ``metric`` needs: itself, or the names of an expression
    (``expr.check`` raises ExprError for a malformed one)."""
    names = expr.check(metric)
    return {metric} if names == {metric} else names


def never_defined(metric: str) -> str | None:
    """Why the metric expression has no value whatever the metrics are (e.g. ``test.loss / 0``:
    every cell read as a miss, reported as diverged although none was), None when it has one for
    some metric values (probed at a few values, each name a different one)."""
    names = sorted(metric_names(metric))
    if names == [metric]:
        return None
    why = None
    for env in _probe_envs(names):
        try:
            value = expr.evaluate(metric, env)
        except expr.ExprError as err:
            why = str(err)
            continue
        return None if isinstance(value, (int, float)) else f"it gives {value!r}, not a number"
    return why


def constant_value(metric: str) -> float | None:
    """The value of a metric expression that is the same whatever the metrics are
    (``test.acc - test.acc``, ``test.acc * 0``: a claim on it PASSed or FAILed every cell alike,
    without reading a run), else None (probed as ``never_defined``: at a few values, each name a
    different one; points where it is undefined are skipped)."""
    names = sorted(metric_names(metric))
    if names == [metric]:
        return None
    seen = set()
    for env in _probe_envs(names):
        try:
            value = expr.evaluate(metric, env)
        except expr.ExprError:
            continue
        if not isinstance(value, (int, float)) or math.isnan(value):
            return None
        seen.add(float(value))
    return seen.pop() if len(seen) == 1 else None


# metric values an expression is probed at (``never_defined``, ``constant_value``): from below
# zero to far above one, so a threshold or clamp (test.acc >= 0.3, min(test.acc, 0.3)) is seen
# on both sides (probed at 0.37 and up only, both were refused as 'constant'), and up to 10^12,
# so a threshold on a parameter count or a large loss (n_params > 1e7, test.loss > 1e7) is seen
# on both sides too (probed up to 10^6 only, both were refused as 'constant')
_PROBE_VALUES = (-1.0, 0.0, 0.001, 0.05, 0.2, 0.37, 0.5, 0.83, 0.99, 1.0, 2.9, 117.0, 3e4, 1e6,
                 1e9, 1e12)


def _probe_envs(names: list[str]) -> list[dict[str, float]]:
    """Value assignments of ``names`` to probe an expression at: each name a different value,
    the names in either order (test.acc > val.acc was probed with test.acc always below)."""
    n = len(_PROBE_VALUES)
    grown = [{k: base * (1 + 0.137 * i) for i, k in enumerate(names)}
             for base in (0.37, 0.83, 2.9, 117.0)]
    shifted = [{k: _PROBE_VALUES[(j + 5 * i) % n] for i, k in enumerate(names)} for j in range(n)]
    return grown + shifted


def undefined_cells(cells: pd.DataFrame, metric: str) -> list[str]:
    """Per cell of ``cells`` where the metric expression has no value although none of its
    metrics is NaN (no run diverged): why (e.g. a division by zero)."""
    if metric in cells:
        return []
    try:
        names = metric_names(metric)
    except expr.ExprError as err:
        return [str(err)] * len(cells)
    out = []
    for _, row in cells.iterrows():
        env = {k: float(row[k]) for k in names if k in row}
        if len(env) < len(names) or any(math.isnan(v) for v in env.values()):
            continue
        try:
            expr.evaluate(metric, env)
        except expr.ExprError as err:
            out.append(str(err))
    return out


def _nan_text(cells: pd.DataFrame, metric: str, n_nan: int) -> str:
    """'k diverged/NaN' for the NaN values of ``metric`` in ``cells``, naming those where an
    expression has no value (a division by zero) and those of cells where no run diverged (a
    metric never measured: an analysis whose run's saved weights are gone) apart from diverged
    runs."""
    undefined = undefined_cells(cells, metric)
    n_div = n_nan - len(undefined)
    n_unmeasured = 0
    if N_DIVERGED in cells:  # a NaN in a cell with no diverged run: not 'diverged'
        nan = np.isnan(_metric(cells, metric))
        n_unmeasured = max(0, int((nan & (cells[N_DIVERGED].to_numpy(float) == 0)).sum())
                           - len(undefined))
        n_div -= n_unmeasured
    parts = ([f"{n_div} diverged/NaN"] if n_div > 0 else []) + (
        [f"{len(undefined)} where {metric} has no value: {undefined[0]}"] if undefined else []
    ) + ([f"{n_unmeasured} where no run diverged but {metric} was not measured (e.g. an "
          "analysis of saved weights that are gone, or a final evaluation that was not "
          "finite)"] if n_unmeasured else [])
    return "; ".join(parts)


def _nan_note(cells: pd.DataFrame, metric: str, vals) -> str:
    """' (k diverged/NaN; ...)' for the cells of ``cells`` whose ``vals`` (the metric, in their
    order) are NaN, else '': an ordering or monotone claim counted a cell whose analysis metric
    was never measured as out of order without a word (the threshold claims said so)."""
    nan = cells[np.isnan(np.asarray(vals, dtype=float))]
    return f" ({_nan_text(nan, metric, len(nan))})" if len(nan) else ""


def _metric(cells: pd.DataFrame, metric: str) -> np.ndarray:
    """Per cell: the metric column, or the metric expression evaluated on the cell's columns
    (NaN where a name is absent or NaN: a diverged cell stays a miss). A seed spread
    (``test.acc.std``) is NaN in a cell with a diverged seed, as its mean is: it is the spread of
    the seeds that finished ok, so two seeds that agree beside one that diverged PASSed a claim
    that the seeds agree."""
    diverged = (cells[N_DIVERGED].to_numpy(float) > 0 if N_DIVERGED in cells and
                seed_spreads(metric) else np.zeros(len(cells), dtype=bool))
    if metric in cells:
        return np.where(diverged, math.nan, cells[metric].astype(float).to_numpy())
    try:
        names = metric_names(metric)
    except expr.ExprError:
        return np.full(len(cells), np.nan)
    if not names or not names <= set(cells.columns):
        return np.full(len(cells), np.nan)
    out = []
    for _, row in cells.iterrows():
        env = {k: float(row[k]) for k in names}
        try:
            out.append(math.nan if any(math.isnan(v) for v in env.values())
                       else _zero_but_for_rounding(metric, env, float(expr.evaluate(metric, env))))
        except expr.ExprError:  # e.g. a ratio whose denominator is 0 in this cell: no value,
            out.append(math.nan)  # a miss like a diverged cell (it raised in the report before)
    return np.where(diverged, math.nan, np.array(out, dtype=float))


def _zero_but_for_rounding(metric: str, env: dict[str, float], value: float) -> float:
    """0.0 where the expression ``metric``'s ``value`` is 0 but for rounding: 0 lies within
    the values it takes with each metric anywhere within rounding of its own (relative 1e-9,
    as ``close``: a mean of seeds is rounded), and those span that much by rounding alone: they
    narrow as the rounding does (an expression the interval arithmetic cannot follow,
    ``round(x, 1)``, spans any value; ``floor(a - b)`` spans [-1, 0] however close a and b).
    ``close`` compares relatively, so nothing but 0 is within rounding of 0: `val.acc -
    test.acc >= 0` FAILed for means 0.85 and 0.8500000000000001 (seeds 0.8 and 0.9), printed
    'ours: -1.11e-16', while `test.acc <= 0.85` PASSed. A span judged against the metrics'
    size instead kept the rounding of a scaled difference: `1000 * (val.acc - test.acc) >= 0`
    (per mille) still FAILed, 'ours: -1.11e-13'."""
    if value == 0.0 or not math.isfinite(value):
        return value

    def span(rel: float) -> tuple[float, float]:
        return expr.interval(metric, lambda n: (env[n] - rel * abs(env[n]),
                                                env[n] + rel * abs(env[n])) if n in env else None)

    lo, hi = span(1e-9)
    if not lo <= 0.0 <= hi or hi - lo >= expr.MAX_MAGNITUDE:
        return value
    lo_, hi_ = span(1e-12)  # (only where 0 is within reach: the common case costs one span)
    return 0.0 if hi_ - lo_ <= 1e-2 * (hi - lo) else value


def _group_name(g: pd.DataFrame, by: list[str]) -> tuple[str, ...]:
    """The values of ``by`` that the cells of one group of ``_group_rows`` share, as text."""
    return tuple(str(column(g, k).iloc[0]) for k in by)


def _group_rows(cells: pd.DataFrame, by: list[str]) -> list[pd.DataFrame]:
    """Cells split by the values of ``by`` (columns or ``case:<i>``), in order of appearance."""
    if not by or cells.empty:
        return [cells] if not cells.empty else []
    key = pd.concat([column(cells, k).astype(str) for k in by], axis=1).agg("|".join, axis=1)
    return [g for _, g in cells.groupby(key, sort=False)]


def _one_step_twice(cells: pd.DataFrame, by: list[str], along: str, keys: list[str],
                    profile: str, field: str = "group_by",
                    fix: str = "name it in group_by") -> list[str]:
    """['<field>: ...'] when two cells of one group (``by``) have one value of ``along`` (they
    differ in a key ``by`` leaves out, so a claim per group mixed them), else []."""
    if along not in cells:
        return []
    for g in _group_rows(cells, by):
        seen = g[along].astype(str)
        if seen.duplicated().any():
            v = seen[seen.duplicated()].iloc[0]
            same = g[seen == v]  # the keys they differ in (the monotone check named every key
            # group_by leaves out, those all its cells share too)
            differ = [k for k in keys if k not in by and k != along and k in same
                      and same[k].astype(str).nunique() > 1]
            return [f"{field}: {len(same)} cells of one group of profile {profile} "
                    f"have {along} = {v} (they differ in a key that {field} leaves out: "
                    f"{', '.join(differ or [k for k in keys if k not in by and k != along])}): "
                    f"{fix}"]
    return []


def _all_allowed(allowed: int, n: int, what: str) -> str | None:
    """'allowed_violations: ...' when ``allowed`` violations cover all ``n`` comparisons."""
    if n and allowed >= n:
        return f"allowed_violations {allowed} >= the {n} {what}"
    return None


MAX_PAIRS = 1_000_000  # (a, b) cell pairs an ordering compares in a profile


def _keys(cells: pd.DataFrame, keys: list[str]) -> list[tuple]:
    """Each cell's values of ``keys`` in the hashable, type-insensitive form ``norm`` gives
    (8 and 8.0 and '8' alike; NaN as None), in the order of ``cells``."""
    cols = [[norm(v) for v in column(cells, k).tolist()] for k in keys]
    return list(zip(*cols)) if cols else [()] * len(cells)


# ----------------------------------------------------------------------------------------------
# threshold


class ThresholdConfig(CheckConfig):
    """Every needed cell's ``metric`` ``op`` ``value``."""

    check: Literal["threshold"] = "threshold"
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    op: Literal[">=", "<=", ">", "<"] = Field(..., description="how the metric compares with value")
    value: float = Field(..., description="the bound the metric is compared with")

    def column_refs(self) -> list[str]:
        return list(self.where)


@check_kind("threshold", ThresholdConfig)
def threshold(ctx: CheckContext, cfg: ThresholdConfig) -> list[Verdict]:
    """Every cell matching ``where``: ``metric op value`` (NaN = diverged = a miss)."""

    def evaluate(cells: pd.DataFrame) -> Outcome:
        vals = _metric(cells, cfg.metric)
        hit = np.array([not math.isnan(v) and OPS[cfg.op](v, cfg.value) for v in vals])
        n_miss = int((~hit).sum())
        n_nan = int(np.isnan(vals).sum())
        finite = vals[~np.isnan(vals)]
        worst = (float("nan") if n_nan or not len(finite) else
                 float(finite.min() if cfg.op in (">=", ">") else finite.max()))
        detail = (f"{n_miss} of {len(cells)} finished cells miss"
                  + (f" ({_nan_text(cells, cfg.metric, n_nan)})" if n_nan else "") if n_miss
                  else "the finished cell holds" if len(cells) == 1
                  else f"all {len(cells)} finished cells hold")
        return Outcome(n_miss == 0, detail, worst, bound=cfg.value)

    text = f"{cfg.text} [{cfg.metric} {cfg.op} {cfg.value} where {_fmt_where(cfg.where)}]"
    return [judge(text, ctx.needed(cfg.where), evaluate, cfg)]


# ----------------------------------------------------------------------------------------------
# any_threshold


class AnyThresholdConfig(CheckConfig):
    """At least ``min_cells`` of the cells matching ``where`` have ``metric`` ``op`` ``value``."""

    check: Literal["any_threshold"]
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    op: Literal[">=", "<=", ">", "<"] = Field(..., description="how the metric compares with value")
    value: float = Field(..., description="the bound the metric is compared with")
    min_cells: int = Field(1, ge=1, description="how many cells must reach the bound")

    def column_refs(self) -> list[str]:
        return list(self.where)

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        n = len(select(cells, self.where))
        if 0 < n < self.min_cells:  # it FAILed with every cell trained, whatever they measured
            return [f"min_cells: {self.min_cells}, but `where` matches {n} cell"
                    f"{'s' if n > 1 else ''} of profile {profile}"]
        return []


@check_kind("any_threshold", AnyThresholdConfig)
def any_threshold(ctx: CheckContext, cfg: AnyThresholdConfig) -> list[Verdict]:
    """Some cells (``min_cells``) matching ``where`` reach ``metric op value`` (NaN = a miss).

    PASS as soon as enough complete cells hold, even if others are not finished (they cannot
    undo it); FAIL only when every needed cell is complete and too few hold."""
    needed = ctx.needed(cfg.where)
    text = (f"{cfg.text} [{cfg.metric} {cfg.op} {cfg.value} in at least {cfg.min_cells} "
            f"cell(s) where {_fmt_where(cfg.where)}]{given_text(cfg.given)}")
    if needed.empty:
        return [Verdict("claim", text, "MISSING", None,
                        detail="this profile has no cell the claim needs")]
    complete = testable(needed[needed[COMPLETE].astype(bool)], cfg.given, cfg.metric)
    vals = _metric(complete, cfg.metric)
    hits = int(sum(not math.isnan(v) and OPS[cfg.op](v, cfg.value) for v in vals))
    finite = vals[~np.isnan(vals)]
    best = (float(finite.max() if cfg.op in (">=", ">") else finite.min()) if len(finite)
            else None)
    n_absent = len(needed) - len(complete)
    # the cells without a value said, as the threshold check says them (a FAIL of cells that
    # all diverged read '0 of 3 ... hold' beside 'ours: —' without a word of why)
    n_nan = int(np.isnan(vals).sum())
    nan = f"; {_nan_text(complete, cfg.metric, n_nan)}" if n_nan else ""
    detail = (f"{hits} of {len(complete)} testable finished cells hold (need {cfg.min_cells}"
              f"{nan})")
    if n_absent:
        detail += (f"; {n_absent} of {len(needed)} needed cells not finished or that "
                   f"{_untestable(cfg)}" if cfg.given or seed_spreads(cfg.metric) else
                   f"; {n_absent} of {len(needed)} needed cells not finished")
    # printed on its own side of the threshold (``fmt_beside``: a best cell of 0.94951 read
    # 0.950 beside a FAIL of `>= 0.95`)
    if hits >= cfg.min_cells:
        return [Verdict("claim", text, "PASS", best, detail=detail, bound=cfg.value)]
    if n_absent:
        return [Verdict("claim", text, "MISSING", best, detail=detail, bound=cfg.value)]
    return [Verdict("claim", text, "FAIL", best, detail=detail, bound=cfg.value)]


# ----------------------------------------------------------------------------------------------
# ordering


class OrderingConfig(CheckConfig):
    """Cells ``a`` have ``metric >= `` that of their matching cells ``b`` + ``margin``."""

    check: Literal["ordering"]
    a: dict[str, Any] = Field(..., description="the cells that should be at least as high")
    b: dict[str, Any] = Field(..., description="the cells they are compared with")
    match: list[str] | None = Field(
        None, description="keys on which an a-cell and a b-cell must agree (default: every cell "
        "key not named in a or b)")
    margin: float = Field(0.0, description="added to factor · b")
    factor: float = Field(1.0, gt=0, description="a >= factor · b + margin (e.g. factor 2: the "
                          "a-cells are at least twice their b-cells; yu2025 Fig. 3's loss ratios)")

    def column_refs(self) -> list[str]:
        return [*self.a, *self.b, *(self.match or [])]

    def pairs(self, cells: pd.DataFrame, keys: list[str]) -> tuple[list[str], list[tuple]]:
        """The keys an a-cell and a b-cell agree on, and the (a, b) index pairs of ``cells``
        compared (a cell is never compared with itself)."""
        match, A, by_key = self._matched(cells, keys)
        return match, [(i, j) for i, k in zip(A.index, _keys(A, match))
                       for j in by_key.get(k, ()) if i != j]

    def _matched(self, cells: pd.DataFrame, keys: list[str]
                 ) -> tuple[list[str], pd.DataFrame, dict[tuple, list]]:
        """The match keys, the a-cells, and the b-cells' indices by their match values: a-cells
        are paired through it (comparing every a-cell with every b-cell took hours of `validate`
        for a large grid)."""
        match = self.match if self.match is not None else [
            k for k in keys if k not in self.a and k not in self.b]
        A, B = select(cells, self.a), select(cells, self.b)
        by_key: dict[tuple, list] = {}
        if not A.empty:
            for j, k in zip(B.index, _keys(B, match)):
                by_key.setdefault(k, []).append(j)
        return match, A, by_key

    def selectors(self) -> list[dict[str, Any]]:
        return [self.a, self.b]

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        A, B = select(cells, self.a), select(cells, self.b)
        if A.empty or B.empty:
            return []  # a profile without these cells: MISSING there (where_problems: anywhere)
        match, A, by_key = self._matched(cells, keys)
        n = sum(len(by_key.get(k, ())) for k in _keys(A, match))
        if n > MAX_PAIRS:
            return [f"match: a and b form {n:,} pairs of cells in profile {profile} (more than "
                    f"{MAX_PAIRS:,}; every a-cell is compared with each b-cell that has the same "
                    f"{', '.join(match) or '(no key)'}): name the keys to match on"]
        match, pairs = self.pairs(cells, keys)
        if pairs:
            return []
        if set(A.index) == set(B.index):
            return [f"b: a and b select the same cells of profile {profile} (a cell is never "
                    "compared with itself): it stays MISSING; tell them apart"]
        # the keys on which no a-cell agrees with any b-cell: by default every key a and b do
        # not name, so a and b by `case:<i>` (the label and the keys their cases set differ)
        # were refused naming every key, the one to leave out unsaid
        apart = [k for k in match
                 if not {v for v, in _keys(A, [k])} & {v for v, in _keys(B, [k])}]
        keep = [k for k in match if k not in apart]
        hint = (f"; no a-cell and b-cell agree on {', '.join(apart)}: leave "
                f"{'it' if len(apart) == 1 else 'them'} out, e.g. match: [{', '.join(keep)}]"
                if apart and keep else "")
        return [f"match: no a-cell of profile {profile} has a b-cell with the same "
                f"{', '.join(match)}: it stays MISSING (name the keys to match on{hint})"]


@check_kind("ordering", OrderingConfig)
def ordering(ctx: CheckContext, cfg: OrderingConfig) -> list[Verdict]:
    """Each a-cell's metric >= factor × its matched b-cell's metric + margin (NaN = a miss)."""
    match, pairs = cfg.pairs(expected(ctx.cells), ctx.keys)
    scaled = (f"{cfg.factor:g} × ({_fmt_where(cfg.b)})" if cfg.factor != 1.0
              else f"({_fmt_where(cfg.b)})")
    # a negative margin as a difference ('... - 0.05'; it read '+ -0.05')
    margin = (f" - {fmt_num(-cfg.margin)}" if cfg.margin < 0
              else f" + {fmt_num(cfg.margin)}" if cfg.margin else "")
    text = (f"{cfg.text} [{cfg.metric}: ({_fmt_where(cfg.a)}) >= {scaled}"
            f"{margin}, matched on {', '.join(match) or '-'}]")
    if not pairs:
        return [Verdict("claim", text, "MISSING", None,
                        detail="this profile has no pair of matching a/b cells")]
    needed = ctx.cells.loc[sorted({i for p in pairs for i in p})]

    def evaluate(cells: pd.DataFrame) -> Outcome:
        done = [(i, j) for i, j in pairs if i in cells.index and j in cells.index]
        if not done:
            return Outcome(None, "no pair with both cells finished")
        vals = pd.Series(_metric(cells, cfg.metric), index=cells.index)
        # each a − factor·b as judged against the margin (``difference``: 0.0 for two means
        # equal but for rounding, printed 'ours: -1.11e-16' beside a PASS)
        diffs = np.array([difference(float(vals[i]), cfg.factor * float(vals[j]), cfg.margin)
                          for i, j in done])
        miss = int(sum(not OPS[">="](float(vals[i]), cfg.factor * float(vals[j]) + cfg.margin)
                       for i, j in done))
        worst = float(np.min(diffs)) if not np.isnan(diffs).any() else math.nan
        used = cells.loc[sorted({k for p in done for k in p})]
        return Outcome(miss == 0, f"{miss} of {len(done)} finished pairs out of order"
                       + _nan_note(used, cfg.metric, vals[used.index])
                       if miss else f"all {len(done)} finished pairs in order", worst,
                       bound=cfg.margin)  # a worst difference of 0.0099 read 0.010 beside a
        # FAIL of margin 0.01

    return [judge(text, needed, evaluate, cfg)]


# ----------------------------------------------------------------------------------------------
# monotone


class MonotoneConfig(CheckConfig):
    """``metric`` non-decreasing (or non-increasing) along ``along`` within each group; along a
    text key (labels) in the order the spec's sweep gives its values."""

    check: Literal["monotone"]
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    along: str = Field(..., description="the column the cells are ordered by")
    direction: Literal["increasing", "decreasing"] = Field(
        "increasing", description="the way the metric steps along `along`")
    group_by: list[str] | None = Field(
        None, description="keys of a group (default: every cell key except `along`)")
    tol: float = Field(0.0, ge=0, description="a step against the direction of at most tol is "
                       "not a violation (evaluation noise)")
    allowed_violations: int = Field(0, ge=0, description=VIOLATIONS_HELP)

    def column_refs(self) -> list[str]:
        return [*self.where, self.along, *(self.group_by or [])]

    def unjudged(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        needed = select(cells, self.where)
        if needed.empty or self.along not in needed:
            return ""
        by = self.group_by if self.group_by is not None else [k for k in keys if k != self.along]
        if any(g[self.along].astype(str).nunique() >= 2 for g in _group_rows(needed, by)):
            return None
        return (f"along: no group of cells (equal on {', '.join(by) or '-'}) has two values of "
                f"{self.along}" + ("; name group_by (by default every other cell key)"
                                   if self.group_by is None else ""))

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        by = self.group_by if self.group_by is not None else [k for k in keys if k != self.along]
        # two cells at one step, compared in table order: two rising lines of a group_by that
        # leaves out the label FAILed ('1→1, 2→2')
        return _one_step_twice(select(cells, self.where), by, self.along, keys, profile)

    def unfailing(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        by = self.group_by if self.group_by is not None else [k for k in keys if k != self.along]
        steps = sum(g[self.along].astype(str).nunique() - 1
                    for g in _group_rows(select(cells, self.where), by)) \
            if self.along in cells else 0
        return _all_allowed(self.allowed_violations, steps, "steps along " + self.along)


@check_kind("monotone", MonotoneConfig)
def monotone(ctx: CheckContext, cfg: MonotoneConfig) -> list[Verdict]:
    """Along ``along``, consecutive finished cells of a group step the stated way (NaN = a miss)."""
    by = cfg.group_by if cfg.group_by is not None else [k for k in ctx.keys if k != cfg.along]
    needed = ctx.needed(cfg.where)
    sign = 1.0 if cfg.direction == "increasing" else -1.0
    word = "non-decreasing" if sign > 0 else "non-increasing"
    within = ("the other cell keys fixed" if cfg.group_by is None
              else f"each group of {', '.join(by)}" if by else "all cells")
    text = (f"{cfg.text} [{cfg.metric} {word} along {cfg.along}, {within} (tol {cfg.tol}, "
            f"{cfg.allowed_violations} violations allowed), where {_fmt_where(cfg.where)}]")
    # values by their text: a list-valued along (train.betas) is no hashable value (a TypeError
    # traceback in `run`, after training), as the group keys and positions below read it
    groups = [g for g in _group_rows(needed, by) if g[cfg.along].astype(str).nunique() >= 2] \
        if cfg.along in needed else []
    if not groups:
        return [Verdict("claim", text, "MISSING", None,
                        detail=f"this profile has no group with two values of {cfg.along}")]
    needed = pd.concat(groups)
    # a text key (labels) in the order the spec's sweep gives its values, not alphabetical
    # ('small', 'medium', 'large' were judged as large -> medium -> small)
    numeric = pd.api.types.is_numeric_dtype(needed[cfg.along])
    rank = {v: i for i, v in enumerate(dict.fromkeys(needed[cfg.along].astype(str)))}

    def ordered(g: pd.DataFrame) -> pd.DataFrame:
        return g.sort_values(cfg.along) if numeric else g.sort_values(
            cfg.along, key=lambda c: c.astype(str).map(rank), kind="stable")

    # each group's values of `along` in order, over every needed cell: two finished cells with
    # a cell not finished between them are that many steps apart, and a change of at most tol
    # per step is no violation (one step of 0.5 -> 0.35 across 0.42 not yet trained FAILed a
    # claim with tol 0.1 that the finished numbers cannot contradict)
    positions = {_group_name(g, by): {x: i for i, x in enumerate(
        dict.fromkeys(ordered(g)[cfg.along].astype(str)))} for g in groups}

    def evaluate(cells: pd.DataFrame) -> Outcome:
        steps = viol = 0
        where_viol = []
        for g in _group_rows(cells, by):
            g = ordered(g)
            vals = _metric(g, cfg.metric)
            xs = g[cfg.along].tolist()
            at = [positions[_group_name(g, by)][x] for x in g[cfg.along].astype(str)]
            for k in range(len(vals) - 1):
                steps += 1
                apart = max(1, at[k + 1] - at[k])  # 1 but across cells not finished
                def holds(a: float, b: float, apart: int = apart) -> bool:
                    return OPS[">="](sign * b, sign * a - apart * cfg.tol)

                if not holds(vals[k], vals[k + 1]):
                    viol += 1
                    a, b = _printed_apart(vals[k], vals[k + 1], holds)
                    where_viol.append(f"{xs[k]}→{xs[k + 1]}: {a}→{b}")
        if not steps:
            return Outcome(None, "no group has two finished cells")
        shown = ", ".join(where_viol[:4]) + (" ..." if len(where_viol) > 4 else "")
        return Outcome(viol <= cfg.allowed_violations,
                       f"{viol} violations in {steps} steps" + (f" ({shown})" if viol else "")
                       + (_nan_note(cells, cfg.metric, _metric(cells, cfg.metric)) if viol
                          else ""))

    return [judge(text, needed, evaluate, cfg)]


def _printed_apart(a: float, b: float, holds: Callable[[float, float], bool]
                   ) -> tuple[str, ...]:
    """A step a → b that ``holds`` rejects, printed (``fmt_value``, then more significant digits)
    so that the printed numbers are rejected too: a monotone step 0.9504 → 0.9496 read as the
    report's 0.950 and 0.950, a plateau, beside its violation (and 0.9504 → 0.9403 with tol 0.01
    as a drop of 0.010, on the tolerance). NaN stays '—'."""
    shown = fmt_value(a), fmt_value(b)
    if math.isnan(a) or math.isnan(b):
        return shown
    return more_digits((a, b), shown, lambda u, v: not holds(u, v))


# ----------------------------------------------------------------------------------------------
# log-log slope


class LogLogSlopeConfig(CheckConfig):
    """Least-squares slope of log(metric) vs log(x) within ``expected ± tol``, per group."""

    check: Literal["loglog_slope"]
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    x: str = Field(..., description="the column on the log x axis")
    expected: float = Field(..., description="the paper's slope")
    tol: float = Field(..., gt=0, description="the fitted slope may differ from expected by this")
    group_by: list[str] = Field([LABEL], description="one slope per group of these columns")
    min_points: int = Field(3, ge=2, description="values of x a group needs to be judged")

    def column_refs(self) -> list[str]:
        return [*self.where, self.x, *self.group_by]

    def unjudged(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        needed = select(cells, self.where)
        if needed.empty or self.x not in needed:
            return ""
        n = max(g[self.x].nunique() for g in _group_rows(needed, self.group_by))
        return (f"min_points: {self.min_points}, but a group has at most {n} values of {self.x}"
                if n < self.min_points else None)

    def numeric_refs(self) -> list[str]:
        return [self.x]

    def log_refs(self) -> list[str]:
        return [self.x]

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        # one fit over the cells of several lines (d_state 2 and 4 at each width, group_by
        # [label]) without a word: the slope 'per group' was one of the pooled points
        return _one_step_twice(select(cells, self.where), self.group_by, self.x, keys, profile)


@check_kind("loglog_slope", LogLogSlopeConfig)
def loglog_slope(ctx: CheckContext, cfg: LogLogSlopeConfig) -> list[Verdict]:
    """Per group: the slope of log metric vs log x is within tol of ``expected``."""
    needed = ctx.needed(cfg.where)
    base = (f"{cfg.text} [slope of log {cfg.metric} vs log {cfg.x} = {cfg.expected} ± {cfg.tol}"
            f", where {_fmt_where(cfg.where)}]")
    if needed.empty or cfg.x not in needed:
        return [Verdict("claim", base, "MISSING", None,
                        detail="this profile has no cell the claim needs")]
    out = []
    for g in _group_rows(needed, cfg.group_by):
        name = pairs_text((k, g.iloc[0][k]) for k in cfg.group_by if k in g)
        text = f"{base} {name}".rstrip()
        if g[cfg.x].nunique() < cfg.min_points:
            out.append(Verdict("claim", text, "MISSING", None, detail=(
                f"this profile has {g[cfg.x].nunique()} values of {cfg.x} (needs {cfg.min_points})")))
            continue

        def evaluate(cells: pd.DataFrame, g: pd.DataFrame = g) -> Outcome:
            x = cells[cfg.x].astype(float).to_numpy()
            y = _metric(cells, cfg.metric)
            bad = int(np.sum(~(y > 0) | ~(x > 0)))  # NaN or non-positive: no logarithm
            if bad:
                return Outcome(False, f"{bad} finished cells have no positive {cfg.metric} "
                               "(diverged or zero)")
            if len(np.unique(x)) < cfg.min_points:
                return Outcome(None, f"{len(np.unique(x))} finished values of {cfg.x} "
                               f"(needs {cfg.min_points})")
            slope = float(np.polyfit(np.log(x), np.log(y), 1)[0])
            ok = within(slope, cfg.expected, cfg.tol)
            if not ok and len(cells) < len(g):  # the slope of the points so far: those not
                ok = None  # finished can still bring it within tol
            # on its own side of the nearer end of expected ± tol: -0.9496 read -0.950 beside
            # a FAIL of -1.0 ± 0.05
            end = nearer_end(slope, cfg.expected, cfg.tol)
            return Outcome(ok, f"fitted slope {fmt_beside(slope, end)} over {len(x)} cells",
                           slope, bound=end)

        out.append(judge(text, g, evaluate, cfg))
    return out


# ----------------------------------------------------------------------------------------------
# collapse: the metric is a function of one combination of the keys


class CollapseConfig(CheckConfig):
    """``metric`` depends on the cell keys only through ``by`` (an expression of them)."""

    check: Literal["collapse"]
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    by: str = Field(..., description="expression of cell keys, e.g. 'model.n_layers * model.d_state'")
    tol: float = Field(..., ge=0, description="largest spread (max - min) allowed within a group "
                       "of cells with equal `by`")
    min_groups: int = Field(2, ge=1, description="groups with >= 2 cells needed to test it")
    min_range: float = Field(0.0, ge=0, description="the group means must span at least this "
                             "(so a flat grid does not pass vacuously)")

    def column_refs(self) -> list[str]:
        return [*self.where, *sorted(expr.names(self.by))]

    def numeric_refs(self) -> list[str]:
        return sorted(expr.names(self.by))

    def cell_exprs(self) -> list[tuple[str, str]]:
        return [("by", self.by)]

    def unjudged(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        needed = select(cells, self.where)
        refs = sorted(expr.names(self.by))
        if needed.empty or any(k not in needed for k in refs):
            return ""
        n = int((_by_values(needed, self.by).value_counts() >= 2).sum())
        return (f"min_groups: {self.min_groups}, but there are {n} groups of ≥ 2 cells with "
                f"equal {self.by}" if n < self.min_groups else None)


def _by_values(cells: pd.DataFrame, by: str) -> pd.Series:
    """Per cell, the value of the expression ``by`` of its keys (NaN where it has none: a cell
    without a group is left out, never a crash; validated per cell before training), to 12
    significant digits: cells on one diagonal but for rounding are one group (0.1 × 3 is
    0.30000000000000004, not 0.3 × 1: each was a group of its own, and their spread unseen)."""
    refs = sorted(expr.names(by))

    def one(r: pd.Series) -> float:
        try:
            v = float(expr.evaluate(by, {k: float(r[k]) for k in refs}))
        except (expr.ExprError, TypeError, ValueError, OverflowError):
            return math.nan
        return float(f"{v:.12g}") if math.isfinite(v) else v
    return cells.apply(one, axis=1) if len(cells) else pd.Series(dtype=float)


@check_kind("collapse", CollapseConfig)
def collapse(ctx: CheckContext, cfg: CollapseConfig) -> list[Verdict]:
    """Cells with equal ``by`` agree within tol (spread), and the groups span ≥ min_range."""
    needed = ctx.needed(cfg.where)
    text = (f"{cfg.text} [{cfg.metric} a function of {cfg.by} only: spread ≤ {cfg.tol} within "
            f"each group of equal {cfg.by} (≥ {cfg.min_groups} groups of ≥ 2 cells), group means "
            f"span ≥ {cfg.min_range}, where {_fmt_where(cfg.where)}]")
    refs = sorted(expr.names(cfg.by))
    if needed.empty or any(k not in needed for k in refs):
        return [Verdict("claim", text, "MISSING", None,
                        detail="this profile has no cell the claim needs")]

    sizes = _by_values(needed, cfg.by).value_counts()
    if int((sizes >= 2).sum()) < cfg.min_groups:
        return [Verdict("claim", text, "MISSING", None, detail=(
            f"this profile has {int((sizes >= 2).sum())} groups of ≥ 2 cells "
            f"(needs {cfg.min_groups})"))]

    def evaluate_cells(cells: pd.DataFrame) -> Outcome:
        vals = pd.Series(_metric(cells, cfg.metric), index=cells.index)
        k = _by_values(cells, cfg.by)
        groups = {float(g): vals[k == g] for g in sorted(k.unique())}
        # as judged against tol (``difference``: on it, or 0.0, but for rounding)
        spreads = {g: math.nan if v.isna().any() else
                   difference(float(v.max()), float(v.min()), cfg.tol)
                   for g, v in groups.items() if len(v) >= 2}
        wide = any(not OPS["<="](float(v.max()), float(v.min()) + cfg.tol)
                   for v in groups.values() if len(v) >= 2)
        if len(spreads) < cfg.min_groups:
            return Outcome(None, f"{len(spreads)} groups with ≥ 2 finished cells")
        nan = any(v.isna().any() for v in groups.values())
        # the span of the groups' means that have one (a group whose every cell has no value
        # is said apart): Python's max and min of a list holding NaN give NaN or a number by
        # where the NaN stands, so the span read '—' or the others' '0.000' by the groups' order
        means = [m for v in groups.values() if not math.isnan(m := float(v.mean()))]
        top, low = (max(means), min(means)) if means else (math.nan, math.nan)
        span = difference(top, low, cfg.min_range)
        worst = max((x for x in spreads.values() if not math.isnan(x)), default=math.nan)
        ok = not nan and not wide and OPS[">="](top, low + cfg.min_range)
        if not ok and not nan and not wide and len(cells) < len(needed):
            ok = None  # the span so far: cells not finished can still widen it
        # each number on its own side of its bound (a spread of 0.0504 read 0.050 beside a FAIL
        # of tol 0.05, a span of 0.0996 0.100 beside one of min_range 0.1)
        # a group with a diverged cell has no spread ('—'; the others' 0.000 was printed)
        shown = ", ".join(f"{fmt_num(g)}: " + (fmt_value(x) if math.isnan(x)
                                                 else fmt_beside(x, cfg.tol))
                          for g, x in spreads.items())
        return Outcome(ok, f"spread per {cfg.by} = {shown}; group means span "
                       f"{fmt_beside(span, cfg.min_range)}"
                       + (f"; {_nan_text(cells[vals.isna()], cfg.metric, int(vals.isna().sum()))}"
                          if nan else ""), worst, bound=cfg.tol)

    return [judge(text, needed, evaluate_cells, cfg)]


# ----------------------------------------------------------------------------------------------
# recall frontier (koren2026)

LawColumn = Literal["designed", "linear", "full"]


class RecallFrontierConfig(CheckConfig):
    """koren2026: per regime and column, the ≥ threshold frontier in the (width, state) grid."""

    check: Literal["recall_frontier"]
    columns: dict[str, LawColumn] = Field(
        ..., description="label (or case label) -> the law's constant for that column")
    threshold: float = Field(0.9, gt=0, lt=1, description="the accuracy a solved cell reaches")
    min_points: int = Field(3, ge=2, description="frontier points needed (values of x)")
    factor: float = Field(..., gt=1, description="fitted N·D within [law/factor, law*factor]")
    allowed_violations: int = Field(0, ge=0, description="frontier steps where N grows with D")
    task: Literal["mqar", "ar"] = Field("mqar", description="the law's task")
    x: str = Field(WIDTH, description="the width column (D)")
    y: str = Field(STATE, description="the state size column (N)")
    regime: list[str] = Field(list(REGIME), description="columns that name one regime (a frontier each)")
    vocab: str = Field(VOCAB, description="the vocabulary column (one of regime)")
    facts: str = Field(FACTS, description="the key-value pairs column (one of regime)")

    @model_validator(mode="after")
    def _keys(self) -> RecallFrontierConfig:
        for k in (self.vocab, self.facts):
            if k not in self.regime:
                raise ValueError(f"{k} must be one of the regime keys {self.regime}")
        for col in self.columns.values():
            law_constant(col, self.task)
        return self

    def column_refs(self) -> list[str]:
        return [self.x, self.y, *self.regime]

    def numeric_refs(self) -> list[str]:
        return [self.x, self.y, self.vocab, self.facts]

    def value_refs(self) -> list[tuple[str, str, Any]]:
        return [(f"columns.{lab}", LABEL, lab) for lab in self.columns]

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        # two cells of one column and regime at one (x, y) point: the frontier took whichever
        # reached the threshold
        if any(k not in cells for k in (self.x, *self.regime)):
            return []
        for lab in self.columns:  # the cells the frontier of that column reads (select)
            out = _one_step_twice(select(cells, {LABEL: lab}), [*self.regime, self.x], self.y,
                                  keys, profile, "regime", "give that key one value per "
                                  "column (aggregate.select over it), or add it to regime")
            if out:
                return out
        return []

    def unjudged(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        if cells.empty or any(k not in cells for k in (self.x, self.y, *self.regime)):
            return ""
        counts = [int(g[self.x].nunique())
                  for _, reg in cells.groupby([cells[k].astype(str) for k in self.regime])
                  for lab in self.columns
                  for g in [select(reg, {LABEL: lab})] if len(g)]
        if not counts:
            return ""
        n = max(counts)
        return (f"min_points: {self.min_points}, but a regime and column has at most {n} values "
                f"of {self.x}" if n < self.min_points else None)


def frontier(cells: pd.DataFrame, metric: str, x: str, y: str, thr: float) -> dict[float, float]:
    """For each x (width): the smallest y (state size) whose metric is >= thr (NaN = a miss)."""
    out: dict[float, float] = {}
    for xv, g in cells.groupby(x):
        ok = g[np.array([OPS[">="](v, thr) for v in _metric(g, metric)], dtype=bool)]
        if len(ok):
            out[float(xv)] = float(ok[y].astype(float).min())
    return out


@check_kind("recall_frontier", RecallFrontierConfig)
def recall_frontier(ctx: CheckContext, cfg: RecallFrontierConfig) -> list[Verdict]:
    """Per regime and column: ≥ min_points frontier points, monotone, N·D within factor of the law."""
    cells = expected(ctx.cells)
    missing = [k for k in (cfg.x, cfg.y, *cfg.regime) if k not in cells]
    if cells.empty or missing:
        return [Verdict("claim", f"{cfg.text} [recall frontier]", "MISSING", None,
                        detail="this profile has no cell with " + ", ".join(missing or [cfg.x]))]
    regimes = list(dict.fromkeys(tuple(r) for r in cells[cfg.regime].itertuples(index=False)))
    out = []
    for reg in regimes:
        where = dict(zip(cfg.regime, reg))
        V, n_f = float(where[cfg.vocab]), float(where[cfg.facts])
        reg_name = " ".join(f"{k.split('.')[-1]}={fmt_num(v)}" for k, v in where.items())
        for label, law_col in cfg.columns.items():
            a = law_constant(law_col, cfg.task)
            text = (f"{cfg.text} [{reg_name}, {label}: ≥ {cfg.threshold} frontier, ≥ "
                    f"{cfg.min_points} points, monotone, N·D within ×{cfg.factor:g} of the law "
                    f"(a = {a:g}, {law_col})]")
            needed = ctx.needed({**where, LABEL: label})
            n_x = needed[cfg.x].nunique() if len(needed) else 0
            if needed.empty or n_x < cfg.min_points:
                out.append(Verdict("claim", text, "MISSING", None, detail=(
                    "not run in this profile" if needed.empty else
                    f"this profile has {n_x} values of {cfg.x} (needs {cfg.min_points})")))
                continue

            def evaluate(done: pd.DataFrame, V=V, n_f=n_f, a=a, n_needed=len(needed)) -> Outcome:
                fr = frontier(done, cfg.metric, cfg.x, cfg.y, cfg.threshold)
                xs = sorted(fr)
                pts = ", ".join(f"{fmt_num(d)}×{fmt_num(fr[d])}" for d in xs) or "none"
                # the cells without a value (diverged), a miss each, said as the threshold
                # check says them ('0 frontier points' of a column that diverged said no why)
                n_nan = int(np.isnan(_metric(done, cfg.metric)).sum())
                nan = f"; {_nan_text(done, cfg.metric, n_nan)}" if n_nan else ""
                if len(xs) < cfg.min_points:
                    undecided = len(done) < n_needed  # absent cells could add frontier points
                    return Outcome(None if undecided else False,
                                   f"{len(xs)} frontier points (D×N: {pts}); needs "
                                   f"{cfg.min_points}{nan}")
                viol = sum(fr[b] > fr[a_] for a_, b in zip(xs, xs[1:]))
                prods = np.array([d * fr[d] for d in xs])
                fitted = float(np.exp(np.mean(np.log(prods))))
                law = refined_frontier_product(np.array(xs), V, n_f, a, cfg.threshold)
                law_fit = float(np.exp(np.mean(np.log(law)))) if np.all(np.isfinite(law)) \
                    else math.inf
                ratio = fitted / law_fit
                # on ×factor but for rounding is within it, as every claim's bound (``OPS``):
                # 2.000000000004 FAILed against factor 2, printed 'ratio 2.00' beside the FAIL
                ok = (viol <= cfg.allowed_violations and OPS[">="](ratio, 1 / cfg.factor)
                      and OPS["<="](ratio, cfg.factor))
                if not ok and len(done) < n_needed:  # cells not finished can still lower a
                    ok = None  # frontier point or add one
                # the ratio on its own side of ×factor (2.004 read 2.00 beside a FAIL of ×2)
                end = cfg.factor if ratio > 1 else 1 / cfg.factor
                detail = (f"frontier D×N: {pts}; {viol} monotonicity violations; fitted N·D "
                          f"{fitted:.0f} vs law {law_fit:.0f} (ratio "
                          f"{fmt_beside(ratio, end, f'{ratio:.2f}')}; spread "
                          f"max/min {prods.max() / prods.min():.1f}){nan}")
                return Outcome(ok, detail, fitted)

            out.append(judge(text, needed, evaluate, cfg))
    return out


# ----------------------------------------------------------------------------------------------
# region (a threshold inside a region given by an expression; huang2025's theory lines)


def in_region(cells: pd.DataFrame, region: str) -> np.ndarray:
    """Boolean mask: ``region`` (an ``expr`` expression over cell columns) holds for the cell."""
    return np.array([bool(expr.evaluate(region, cell_env(r))) for _, r in cells.iterrows()],
                    dtype=bool)


class RegionConfig(CheckConfig):
    """Cells inside ``region`` (e.g. below a theory line) satisfy ``metric op value``: every one
    (``mode: all``, up to ``allowed_violations``) or at least one (``mode: any``)."""

    check: Literal["region"]
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    region: str = Field(..., description="expression over cell columns, e.g. "
                        "'model.d_model < task.kappa + log2(task.vocab)'")
    op: Literal[">=", "<=", ">", "<"] = Field(..., description="how the metric compares with value")
    value: float = Field(..., description="the bound the metric is compared with")
    mode: Literal["all", "any"] = Field("all", description="every cell of the region, or at least one")
    allowed_violations: int = Field(0, ge=0, description=VIOLATIONS_HELP)

    @model_validator(mode="after")
    def _expr(self) -> RegionConfig:
        expr.check(self.region)  # ExprError is a ValueError: a validation error
        return self

    def column_refs(self) -> list[str]:
        return [*self.where, *sorted(expr.names(self.region))]

    def cell_exprs(self) -> list[tuple[str, str]]:
        return [("region", self.region)]

    def unfailing(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        if self.mode != "all":
            return None
        inside = select(cells, self.where)
        try:
            n = int(in_region(inside, self.region).sum()) if len(inside) else 0
        except (expr.ExprError, TypeError, ValueError):
            return None  # an expression that cannot be evaluated: reported as such
        return _all_allowed(self.allowed_violations, n, "cells inside the region")


@check_kind("region", RegionConfig)
def region(ctx: CheckContext, cfg: RegionConfig) -> list[Verdict]:
    """Inside ``region``: all (or any) cells ``metric op value`` (NaN = a miss)."""
    word = "every cell" if cfg.mode == "all" else "some cell"
    text = (f"{cfg.text} [{word} with {cfg.region}: {cfg.metric} {cfg.op} {cfg.value}"
            f"{f' ({cfg.allowed_violations} violations allowed)' if cfg.allowed_violations else ''}"
            f", where {_fmt_where(cfg.where)}]")
    needed = ctx.needed(cfg.where)
    if not needed.empty:
        needed = needed[in_region(needed, cfg.region)]

    def evaluate(cells: pd.DataFrame) -> Outcome:
        vals = _metric(cells, cfg.metric)
        hit = np.array([not math.isnan(v) and OPS[cfg.op](v, cfg.value) for v in vals])
        best = (float(np.nanmax(vals)) if cfg.op in (">=", ">") else float(np.nanmin(vals))) \
            if not np.isnan(vals).all() else math.nan
        worst = (float(np.nanmin(vals)) if cfg.op in (">=", ">") else float(np.nanmax(vals))) \
            if not np.isnan(vals).all() else math.nan
        # the cells without a value, as the threshold check says (a diverged cell was one of
        # the cells named as misses, beside a worst value of the others, without a word)
        n_nan = int(np.isnan(vals).sum())
        nan = f"; {_nan_text(cells, cfg.metric, n_nan)}" if n_nan else ""
        if cfg.mode == "any":
            return Outcome(bool(hit.any()), f"{int(hit.sum())} of {len(cells)} finished cells "
                           f"hold{f' ({nan[2:]})' if nan else ''}", best, bound=cfg.value)
        miss = int((~hit).sum())
        where = ", ".join(_cell_name(r, ctx.keys) for _, r in cells[~hit].head(4).iterrows())
        return Outcome(miss <= cfg.allowed_violations,
                       f"{miss} of {len(cells)} finished cells miss"
                       + (f" ({where}{' ...' if miss > 4 else ''}{nan})" if miss else ""), worst,
                       bound=cfg.value)

    if cfg.mode == "any":  # one finished cell that holds decides; absent cells cannot undo it
        complete = needed[needed[COMPLETE].astype(bool)] if len(needed) else needed
        complete = testable(complete, cfg.given, cfg.metric)
        if len(complete):
            out = evaluate(complete)
            if out.ok:
                return [Verdict("claim", text + given_text(cfg.given), "PASS", out.ours,
                                detail=out.detail, bound=out.bound)]
        v = judge(text, needed, evaluate, cfg)
        if v.verdict == "FAIL" and len(complete) < len(needed):  # a cell not finished (or
            v.verdict = "MISSING"  # untestable) may still hold: it FAILed, as if none could
        return [v]
    return [judge(text, needed, evaluate, cfg)]


def _cell_name(row: pd.Series, keys: list[str]) -> str:
    return " ".join(f"{k.split('.')[-1]}={fmt_num(row[k])}" for k in keys if k in row)


# ----------------------------------------------------------------------------------------------
# size order (huang2025: which model reaches the threshold at the smallest size)


class SizeOrderConfig(CheckConfig):
    """Per group, the smallest ``size`` at which each label reaches ``threshold``: non-decreasing
    along ``labels`` (most size-efficient first); each adjacent pair strictly ordered somewhere."""

    check: Literal["size_order"]
    labels: list[str] = Field(..., min_length=2, description="labels, most efficient first")
    size: str = Field(WIDTH, description="the size column (e.g. model.d_model)")
    group_by: list[str] = Field(..., description="keys of a group (e.g. [task.kappa])")
    threshold: float = Field(..., description="metric reaching this = solved")
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    allowed_violations: int = Field(0, ge=0, description=VIOLATIONS_HELP)
    strict: bool = Field(True, description="each adjacent pair strictly ordered in some group")

    @model_validator(mode="after")
    def _distinct(self) -> SizeOrderConfig:
        if len(set(self.labels)) < len(self.labels):
            raise ValueError(f"labels: {self.labels} names a label twice (it cannot be strictly "
                             "ordered against itself)")
        return self

    def column_refs(self) -> list[str]:
        return [self.size, *self.group_by, *self.where]

    def numeric_refs(self) -> list[str]:
        return [self.size]

    def value_refs(self) -> list[tuple[str, str, Any]]:
        return [(f"labels.{i}", LABEL, lab) for i, lab in enumerate(self.labels)]

    def unfailing(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        if self.strict:  # a pair never strictly ordered still fails it
            return None
        mine = select(cells, {**self.where, LABEL: list(self.labels)})
        n = len(_group_rows(mine, self.group_by)) * (len(self.labels) - 1)
        return _all_allowed(self.allowed_violations, n, "adjacent pairs of labels in the groups")

    def cell_problems(self, cells: pd.DataFrame, keys: list[str], profile: str) -> list[str]:
        # two cells of one label at one size in a group (d_state 2 and 4 at each width): the
        # smallest size 'of the label' was that of whichever solved, without a word
        for lab in self.labels:
            out = _one_step_twice(select(cells, {**self.where, LABEL: lab}),
                                  [LABEL, *self.group_by], self.size, keys, profile)
            if out:
                return out
        return []


def smallest_solving(cells: pd.DataFrame, metric: str, size: str, thr: float) -> float:
    """The smallest size whose metric >= thr (inf when none)."""
    ok = cells[np.array([OPS[">="](v, thr) for v in _metric(cells, metric)], dtype=bool)]
    return float(ok[size].astype(float).min()) if len(ok) else math.inf


@check_kind("size_order", SizeOrderConfig)
def size_order(ctx: CheckContext, cfg: SizeOrderConfig) -> list[Verdict]:
    """Per group: smallest solving size non-decreasing along ``labels`` (unsolved = inf)."""
    # (group_by [] is one group: it read 'in each group of ' and a detail ': 8/16')
    over = (f"in each group of {', '.join(cfg.group_by)}" if cfg.group_by else "over all cells")
    text = (f"{cfg.text} [smallest {cfg.size} with {cfg.metric} >= {cfg.threshold}: "
            f"{' <= '.join(cfg.labels)} {over}"
            f"{' (each pair strictly somewhere)' if cfg.strict else ''}, where "
            f"{_fmt_where(cfg.where)}]")
    per_label = [ctx.needed({**cfg.where, LABEL: lab}) for lab in cfg.labels]
    absent = [lab for lab, cells in zip(cfg.labels, per_label) if cells.empty]
    if absent:  # such a label never "reaches the threshold" (inf): it could not fail the order
        return [Verdict("claim", text, "MISSING", None, detail=(
            f"this profile has no cell of {', '.join(absent)}"))]
    needed = pd.concat(per_label)
    needed = needed[~needed.index.duplicated()]

    def evaluate(cells: pd.DataFrame) -> Outcome:
        viol, certain, shown, informative = 0, 0, [], 0
        strictly = [False] * (len(cfg.labels) - 1)
        # needed cells not finished (or untestable), by group: each may still reach the
        # threshold at its size, so a label's smallest solving size so far is only an upper
        # bound (a FAIL 'A 32 > B 16' while A's cell at 8 was not trained)
        open_cells = {_group_name(g, cfg.group_by): g
                      for g in _group_rows(needed.drop(cells.index), cfg.group_by)}
        for g in _group_rows(cells, cfg.group_by):
            sizes = [smallest_solving(select(g, {LABEL: lab}), cfg.metric, cfg.size,
                                      cfg.threshold) for lab in cfg.labels]
            rest = open_cells.get(_group_name(g, cfg.group_by), g.iloc[0:0])
            lowest = [min([s, *select(rest, {LABEL: lab})[cfg.size].astype(float)])
                      for s, lab in zip(sizes, cfg.labels)]
            certain += sum(lo > b for lo, b in zip(lowest, sizes[1:]))
            if all(math.isinf(s) for s in sizes):
                continue
            informative += 1
            name = ",".join(f"{k.split('.')[-1]}={fmt_num(g.iloc[0][k])}"
                            for k in cfg.group_by) or "all cells"
            shown.append(f"{name}: " + "/".join("∞" if math.isinf(s) else fmt_num(s) for s in sizes))
            for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
                if a > b:
                    viol += 1
                elif a < b:
                    strictly[i] = True
        # the cells without a value (diverged: unsolved, ∞ where no other cell of the label
        # solves) said, as the threshold check says them
        n_nan = int(np.isnan(_metric(cells, cfg.metric)).sum())
        nan = f"; {_nan_text(cells, cfg.metric, n_nan)}" if n_nan else ""
        if not informative:  # a finished grid no label solves is a result, as a frontier of 0
            # points (it stayed MISSING for ever: nothing left to train could decide it)
            return Outcome(None if len(cells) < len(needed) else False,
                           f"no label reaches {cfg.metric} >= {cfg.threshold} in any group "
                           f"({cfg.size.split('.')[-1]} up to "
                           f"{fmt_num(cells[cfg.size].astype(float).max())}){nan}")
        lax = [f"{a} vs {b}" for (a, b), s in zip(zip(cfg.labels, cfg.labels[1:]), strictly)
               if not s]
        ok = viol <= cfg.allowed_violations and (not cfg.strict or not lax)
        if not ok and len(cells) < len(needed) and certain <= cfg.allowed_violations:
            ok = None  # cells not finished can still put it in order
        detail = f"smallest solving {cfg.size.split('.')[-1]} per group: {'; '.join(shown)}"
        detail += f"; {viol} out of order" + (f"; never strictly: {', '.join(lax)}"
                                              if cfg.strict and lax else "")
        return Outcome(ok, detail + nan)

    return [judge(text, needed, evaluate, cfg)]


# ----------------------------------------------------------------------------------------------
# spread (insensitivity: the metric hardly changes along a key)


class SpreadConfig(CheckConfig):
    """Within each group (cells equal on ``group_by``), max − min of ``metric`` ≤ ``tol``."""

    check: Literal["spread"]
    where: dict[str, Any] = Field({}, description=WHERE_HELP)
    group_by: list[str] = Field(..., description="keys held fixed; the rest (e.g. N) varies")
    tol: float = Field(..., ge=0, description="the largest max − min a group may have")
    allowed_violations: int = Field(0, ge=0, description=VIOLATIONS_HELP)

    def column_refs(self) -> list[str]:
        return [*self.where, *self.group_by]

    def unjudged(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        needed = select(cells, self.where)
        if needed.empty:
            return ""
        if any(len(g) >= 2 for g in _group_rows(needed, self.group_by)):
            return None
        return (f"group_by: no group of cells equal on {', '.join(self.group_by) or '-'} has "
                "two cells")

    def unfailing(self, cells: pd.DataFrame, keys: list[str]) -> str | None:
        groups = [g for g in _group_rows(select(cells, self.where), self.group_by) if len(g) >= 2]
        return _all_allowed(self.allowed_violations, len(groups), "groups")


@check_kind("spread", SpreadConfig)
def spread(ctx: CheckContext, cfg: SpreadConfig) -> list[Verdict]:
    """Per group of ``group_by``: max − min of the metric over its cells ≤ tol (NaN = a miss)."""
    text = (f"{cfg.text} [max − min of {cfg.metric} ≤ {cfg.tol} within each group of "
            f"{', '.join(cfg.group_by) or 'all cells'}, where {_fmt_where(cfg.where)}]")
    needed = ctx.needed(cfg.where)
    groups = [g for g in _group_rows(needed, cfg.group_by) if len(g) >= 2]
    if not groups:
        return [Verdict("claim", text, "MISSING", None,
                        detail="this profile has no group with two cells")]

    def evaluate(cells: pd.DataFrame) -> Outcome:
        spreads, wide, used = [], 0, []
        for g in _group_rows(cells, cfg.group_by):
            if len(g) < 2:
                continue
            vals = _metric(g, cfg.metric)
            used.append(g)
            # as judged against tol (``difference``: on it, or 0.0, but for rounding)
            sp = (math.nan if np.isnan(vals).any()
                  else difference(float(vals.max()), float(vals.min()), cfg.tol))
            spreads.append(sp)
            wide += not math.isnan(sp) and not OPS["<="](float(vals.max()),
                                                          float(vals.min()) + cfg.tol)
        if not spreads:
            return Outcome(None, "no group has two finished cells")
        worst = max((s for s in spreads if not math.isnan(s)), default=math.nan)
        # a group with a cell without a value (diverged) is a violation of its own, said so:
        # it was counted among the groups that 'spread more than tol (largest 0.010)'
        n_nan = sum(math.isnan(s) for s in spreads)
        both = pd.concat(used)
        return Outcome(wide + n_nan <= cfg.allowed_violations,
                       f"{wide} of {len(spreads)} groups spread more than {cfg.tol} (largest "
                       f"{fmt_beside(worst, cfg.tol)})"
                       + (f"; {n_nan} with a cell without a value"
                          f"{_nan_note(both, cfg.metric, _metric(both, cfg.metric))}"
                          if n_nan else ""), worst, bound=cfg.tol)
        # with 3 decimals a loss's spread read 'more than 1e-06 (largest 0.000)', a fail for a
        # spread that looked like none; on its side of tol (0.0504 read 0.050 beside a FAIL)

    return [judge(text, pd.concat(groups), evaluate, cfg)]
