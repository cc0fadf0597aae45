"""Stage 1 (spec): experiment specs — one YAML file per paper figure/table under experiments/<slug>/.

A spec holds the paper's own settings (``task``, ``model``, ``train``), the sweep axes, seeds, derived
values, profiles (``smoke`` / ``quick`` / ``paper`` as overrides of the paper settings), aggregation,
the figure(s), the paper's numbers (``paper_values``), checkable ``claims`` and a ``notes`` list with
one line per decision taken where the paper is silent. Every level rejects unknown keys; errors name
the file, the key and the reason (``SpecError``).

``figure`` / ``figures`` entries and ``claims`` entries are kept as mappings here: their schemas
belong to the registered figure kinds (``plots``) and checks (``report.checks``), and
``plots.validate_outputs`` checks them (``ssmrepro validate`` and ``ssmrepro run`` call it before
any training), so this stage imports neither. An analytic target (``analytic``: a table computed
from theory, ``theory.TABLES``) has no task, model or training; its rows are its cells.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from .util import (
    ROOT_ENV,
    NoBoolNumbers,
    NoProject,
    NotSmallFile,
    TitleText,
    drawable,
    fill_seeds,
    find_project,
    has_seeds_placeholder,
    list_leaves,
    norm,
    read_small,
    repeated,
    repo_root,
    short_name,
)

SPEC_VERSION = 1
MAX_ANALYTIC_ROWS = 10_000  # rows of an analytic table (the largest shipped grid has 42)
REQUIRED_PROFILES = ("smoke", "quick", "paper")


class SpecError(Exception):
    """Invalid spec: ``messages`` are 'file: key: reason' lines."""

    def __init__(self, messages: list[str]):
        super().__init__("\n".join(messages))
        self.messages = messages


class Strict(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# a seed is a 32-bit unsigned integer: the init and data streams are keyed by its low 32 bits
# (tasks.rng.key), so seeds 0 and 2**32, or -1 and 2**32 - 1, trained the same run twice under
# two run ids, and a mean over such "seeds" counted one run several times
MAX_SEED = 2**32 - 1


def _seed(seed: int) -> int:
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{seed}: a seed is a whole number from 0 to {MAX_SEED:,} (2**32 - 1; "
                         "runs are keyed by its 32 bits, so 2**32 would train seed 0 again)")
    return seed


Seed = Annotated[int, AfterValidator(_seed)]
MAX_SEEDS = 1_000  # seeds of one list (the papers use at most 11; every run is one training)
Seeds = Annotated[list[Seed], Field(max_length=MAX_SEEDS)]
# conditions and derived values are evaluated at every sweep point: 2,000 constraints over 2,500
# points took 5 minutes of `validate` (the shipped specs have at most 2 of each)
MAX_EXPRESSIONS = 100
# syntax nodes the constraints and derived values of every profile's sweep points walk in all
# (``expr.size``: each is evaluated at each point of its profile, about a microsecond a node):
# 100 of each, of 200 nodes, at 100,000 points were hours of `validate` (the shipped specs walk
# at most 100,000 nodes a profile)
MAX_EXPRESSION_WORK = 10_000_000
# paper values are matched to cells through an index (report.cells.CellIndex), but each claim is
# still judged over its profile's cells (and each curves panel tries each paper value): the
# shipped specs have at most 12 claims and 273 paper values
MAX_CLAIMS = 1_000
MAX_PAPER_VALUES = 10_000
# figures of one spec beside its `figure` (the shipped specs have at most 3): each is drawn by
# every `plot` and `run`, and 300 copies of one `lines` figure took 48 s (a 1 MiB spec holds
# 30,000 of them: hours, and as many files)
MAX_FIGURES = 100
# specs one spec reuses the records of (the shipped specs reuse at most 1): each entry is looked
# up (its spec file read) by every profile `validate` expands and by every store opened, and
# 5,000 copies of one id (a 90 kB spec) took 164 s of `validate`
MAX_REUSE = 20
# sweep axes of one sweep (the shipped specs have at most 3): each later axis is checked against
# each earlier one (an axis whose values a later one replaces), and 10,000 axes of one value each
# (a 400 kB spec) took two minutes of `validate`; 32 axes of two points are already 2**32 runs
MAX_AXES = 32
# profiles of one spec (the shipped specs have at most 7): each is expanded and checked by
# `validate`, and 3,000 empty ones took minutes
MAX_PROFILES = 100


LABEL_SEP = " / "  # joins the case labels of several sweep axes into a run's label
# the cells pd.read_csv reads as missing by default (its na_values; R's read.csv: 'NA'), which
# a label must not be ('nan', '-NaN' and '' aside: refused as numbers, or no label)
TABLE_MISSING = frozenset({"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN",
                           "<NA>", "N/A", "NA", "NULL", "None", "n/a", "null"})
# what a spreadsheet (Excel, LibreOffice, Google Sheets) reads as the start of a formula
FORMULA_START = ("=", "+", "-", "@")


def _plain_label(label: str) -> str:
    """A case label is one line of visible text without spaces at its ends (nor two in a row), in
    composed form (NFC): it names a cell in tables, figures and claims, where "S6 " and "S6",
    "S  6" and "S 6", a label with a zero-width or direction-changing character, or "e" + a
    combining accent beside "é", would look the same as another and mean something else."""
    import unicodedata

    odd = [c for c in label if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
           or (unicodedata.category(c) == "Zs" and c != " ")]
    if odd:
        shown = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'control')}" for c in odd[:3])
        raise ValueError(f"a label is one line of visible text; it holds {shown}")
    if label != label.strip():
        raise ValueError(f"a label has no spaces at its ends: {label!r}")
    if "  " in label:  # report.md (HTML) shows a run of spaces as one: 'S  6' beside 'S 6' were
        # two cells of one name there
        raise ValueError(f"a label has no run of spaces: {label!r} looks like "
                         f"{' '.join(label.split())!r} in report.md; write that")
    if label.startswith("_"):  # matplotlib's mark of an artist kept out of the legend
        raise ValueError(f"a label does not start with '_': {label!r} (matplotlib leaves a "
                         "name starting with '_' out of a figure's legend)")
    if norm(label) != label:  # cells are keyed by values read back from CSV as numbers: '7'
        # and '7.0' (or 'True' and '1', '７' and '7', 'nan' and 'NaN') were one cell, one label's
        # runs summarised under the other's and its row gone from every table
        raise ValueError(f"a label is text, not a number or a truth value: {label!r} reads as "
                         f"{norm(label)!r} in the tables (write e.g. 'n={label}')")
    if label in TABLE_MISSING:  # results.csv, summary.csv and curves.csv write it as it is, and
        # pd.read_csv (R's read.csv: 'NA') reads it back as a missing value: the cells of 'NA'
        # and 'None' were one NaN label, which groupby leaves out
        raise ValueError(f"a label is text the tables read back: {label!r} in results.csv reads "
                         f"as a missing value in pandas' read_csv (write e.g. '{label} case')")
    if label.startswith(FORMULA_START):  # a spreadsheet opening results.csv reads the cell as a
        # formula: '=1+2' shows 3, '-PE' and '@x' #NAME?, another label than the run's
        raise ValueError(f"a label does not start with {label[0]!r}: a spreadsheet reads "
                         f"{label!r} in results.csv as a formula, not as the label (write e.g. "
                         "'no PE' for '-PE', 'x=1' for '=1')")
    composed = unicodedata.normalize("NFC", label)
    if composed != label:  # 'cafe' + U+0301 looks like 'café' (U+00E9): two cells, one name
        raise ValueError(f"a label is written composed (Unicode NFC): {label!r} holds a "
                         f"letter and a combining mark that look like {composed!r} but do not "
                         f"match it (in a claim's where, or beside a label written so); write "
                         f"{composed!r}")
    return label


Label = Annotated[str, Field(max_length=200), AfterValidator(_plain_label),
                  AfterValidator(drawable)]  # drawn on the figures' axes and legends


def replaces(later: str, key: str, value: Any) -> bool:
    """Whether setting the dotted key ``later`` overwrites what ``key: value`` set before it (the
    key itself, a field inside it, or a field the mapping ``value`` names)."""
    if key == later or key.startswith(later + "."):
        return True
    if not later.startswith(key + "."):
        return False
    node = value
    for part in later[len(key) + 1:].split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _overlap(entries: list[tuple[str, str, list[Any]]]) -> str | None:
    """Why a later one of ``entries`` ((where, dotted key, its possible values), in the order
    they are applied) replaces what an earlier one sets, or None: the same key twice, a whole
    section after a key inside it, or a key inside a mapping given before that names it (a
    case's ``set`` d_model 8 under its own ``grid`` d_model [16, 32]; ``train.lr`` then
    ``train: {lr: ...}``) replaced the earlier value without a word. A key inside a mapping
    that does not name it (``set: {model: {name: transformer_lm}}``, ``grid: {model.d_model:
    [...]}``) refines the mapping, and is fine."""
    seen: dict[str, tuple[str, list[Any]]] = {}  # an earlier key -> (where, its values)
    under: dict[str, tuple[str, str]] = {}  # a section an earlier key lies in -> (where, key)
    for where, key, values in entries:  # each key against its own sections only: n log n
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            k = ".".join(parts[:n])
            if k in seen and any(replaces(key, k, v) for v in seen[k][1]):
                w = seen[k][0]
                break
        else:
            if key not in under:
                seen.setdefault(key, (where, values))
                for n in range(1, len(parts)):
                    under.setdefault(".".join(parts[:n]), (where, key))
                continue
            w, k = under[key]
        return (f"{where}.{key} replaces what {w}.{k} sets (the earlier value would never be "
                "used); give each setting once")
    return None

def _zip_lengths(z: dict[str, list[Any]]) -> None:
    lens = {k: len(v) for k, v in z.items()}
    if len(set(lens.values())) > 1:
        raise ValueError(f"zip lists have different lengths: {lens} (zip pairs the i-th values)")


class Case(Strict):
    """One named variant of a ``cases`` axis: fixed overrides plus its own optional grid/zip."""

    label: Label | None = Field(
        None, description="the case's name: its runs' label column (several axes' labels joined "
        "by ' / '), what `where: {label: ...}` of claims, figures and paper values matches")
    set: dict[str, Any] = Field({}, description="dotted key -> value of this case's runs, e.g. "
                                "model.name: mamba_lm")
    grid: dict[str, list[Any]] = Field({}, description="dotted key -> values swept within this "
                                       "case, every combination")
    zip: dict[str, list[Any]] = Field({}, description="dotted key -> values swept within this "
                                      "case, the i-th values of all lists together")
    seeds: Seeds | None = Field(None, description="seeds of this case (default: the spec's)")
    constraints: list[str] = Field([], max_length=MAX_EXPRESSIONS,
                                   description="extra constraints for this case's points")

    @field_validator("label")
    @classmethod
    def _not_joined(cls, label: str | None) -> str | None:
        if label is not None and LABEL_SEP in label:  # the join of case labels of several axes:
            # a claim on `label: S6` was judged on the cell 'S4D / S6' too (a case label there)
            raise ValueError(f"{label!r}: a case label does not hold {LABEL_SEP!r}, which joins "
                             "the case labels of several sweep axes (a `where` on "
                             f"{label.split(LABEL_SEP)[-1]!r} would match this case too)")
        return label

    @model_validator(mode="after")
    def _no_empty_lists(self) -> Case:
        for kind in ("grid", "zip"):
            empty = [k for k, v in getattr(self, kind).items() if not v]
            if empty:  # the case ran once at its `set` values, as if the list were not there
                raise ValueError(f"{kind}.{empty[0]}: an empty list (a case's {kind} needs at "
                                 "least one value)")
        if self.seeds == []:  # the case had no runs: it left the profile without a word
            raise ValueError("seeds: an empty list (the case would have no runs; leave seeds "
                             "out to use the spec's)")
        _zip_lengths(self.zip)
        why = _overlap([("set", k, [v]) for k, v in self.set.items()]  # applied in this order
                       + [(kind, k, vs) for kind in ("grid", "zip")
                          for k, vs in getattr(self, kind).items()])
        if why:  # set d_model 8 under grid d_model [16, 32]: 8 was never run
            raise ValueError(why)
        return self


def _nodes(exprs: Any) -> int:
    """Syntax nodes of ``exprs`` together (``expr.size``); one that does not parse counts none
    (the sweep reports it at the points it is evaluated at)."""
    from . import expr

    total = 0
    for e in exprs:
        try:
            total += expr.size(e)
        except expr.ExprError:
            pass
    return total


class Axis(Strict):
    """A sweep axis over dotted keys of the task, model and train (``model.d_model``): exactly
    one of ``grid`` (cartesian), ``zip`` (paired lists) or ``cases``."""

    grid: dict[str, list[Any]] | None = Field(
        None, description="dotted key -> values: every combination, e.g. model.d_model: [32, 64]")
    zip: dict[str, list[Any]] | None = Field(
        None, description="dotted key -> values, lists of one length: the i-th values together")
    cases: list[Case] | None = Field(None, description="named variants, each its own set, grid "
                                     "or zip (section sweep[].cases[])")

    @model_validator(mode="after")
    def _one_kind(self) -> Axis:
        kinds = [k for k in ("grid", "zip", "cases") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"a sweep axis needs exactly one of grid/zip/cases, got {kinds or 'none'}")
        if self.zip is not None:
            _zip_lengths(self.zip)
        for kind in ("grid", "zip"):
            why = _overlap([(kind, k, vs) for k, vs in (getattr(self, kind) or {}).items()])
            if why:
                raise ValueError(why)
        return self

    @property
    def n_points(self) -> int:
        """The points of this axis (``sweep.axis_points``), counted without building them."""
        def grid(g: dict[str, list[Any]]) -> int:
            return math.prod(len(v) for v in g.values())

        if self.grid is not None:
            return grid(self.grid)
        if self.zip is not None:
            return max((len(v) for v in self.zip.values()), default=0)
        return sum(max(1, grid(c.grid)) * max(1, max((len(v) for v in c.zip.values()), default=1))
                   for c in self.cases or [])


class Profile(Strict):
    """A named budget of the same experiment (smoke, quick, paper, ...): settings over the
    spec's, and optionally its own sweep and seeds."""

    description: str = Field("", description="what the profile is for (shown by `show`)")
    set: dict[str, Any] = Field({}, description="dotted key -> value over the spec's task, model "
                                "and train, e.g. train.max_steps: 40")
    sweep: list[Axis] | None = Field(None, max_length=MAX_AXES, description="sweep axes that "
                                     "replace the spec's sweep (absent: the spec's)")
    seeds: Seeds | None = Field(None, description="seeds that replace the spec's")

    @model_validator(mode="after")
    def _set_once(self) -> Profile:
        why = _overlap([("set", k, [v]) for k, v in self.set.items()])  # train.lr, train: {lr}
        if why:
            raise ValueError(why)
        return self


class Select(Strict):
    """Pick one value of a swept key per cell by a metric (cooper2026's automatic learning rate:
    the lr whose runs end with the lowest training loss)."""

    over: str = Field(..., description="the swept key whose best value is kept, e.g. train.lr")
    by: str = Field(..., description="the metric that decides, e.g. train.avg_loss")
    op: Literal["min", "max"] = Field("min", description="min: the value with the lowest `by` "
                                      "is kept; max: the highest")


class Aggregate(Strict):
    """How seeds are combined into one value per cell (``mean`` with std, or best-of ``max``),
    optional percentiles over seeds (``<metric>.p10`` ...) and an optional per-cell selection of
    one value of a swept key (``select``)."""

    over: list[Literal["seed"]] = Field(
        ["seed"], description="what a cell combines: its seeds (the only choice; the other "
        "swept keys are cell keys)")
    reduce: Literal["mean", "max", "min", "median"] = Field(
        "mean", description="how a cell's seeds make its value: mean (with a std column), max "
        "(best of seeds), min or median")
    metrics: list[str] = Field(["test.acc"], description="the run metrics combined into the "
                               "results table's columns (what claims, figures and paper values "
                               "read): <set>.<name>, set test, val, train or a train.evals name, "
                               "name acc, loss or mse; more in docs/columns.md")
    percentiles: list[Annotated[float, Field(ge=0, le=100)]] = Field(
        [], max_length=101,  # every whole percentile; 20,000 of them (a 200 kB list) made a
        # 2.3 MB report of 60,000 columns in 13 s of `plot`, and the 1 MiB spec cap five times that
        description="percentiles of each metric over the seeds of a cell, e.g. [10, 90]")
    select: Select | None = Field(
        None, description="per cell, keep only the runs of the best value of `over` by `by` "
        "(the mean of `by` over its seeds; a value with a diverged run is never preferred)")

    @model_validator(mode="after")
    def _select(self) -> Aggregate:
        if self.select is not None and self.select.by not in self.metrics:
            raise ValueError(f"select.by {self.select.by!r} must be one of metrics {self.metrics}")
        twice = sorted({m for m in self.metrics if self.metrics.count(m) > 1})
        if twice:  # one column each all the same: 50,000 copies of one name took 19 s of plot
            raise ValueError(f"metrics: {', '.join(map(repr, twice))} given more than once")
        names: dict[str, float] = {}
        for q in self.percentiles:  # one column <metric>.p<q:g> each: the last one was kept
            first = names.setdefault(f"p{q:g}", q)
            if first != q:
                raise ValueError(f"percentiles: {first:g} and {q!r} both write the column "
                                 f"<metric>.p{q:g} (one would replace the other)")
        return self


class Analytic(Strict):
    """An analytic target: a table computed from theory, no training (``theory.TABLES``).

    One row per point of ``grid`` (cartesian product of its lists), each computed by
    ``TABLES[table].fn(**params, **point)``; the rows are the profile's cells (one each), checked
    by the claims and drawn by the figure like trained cells.
    """

    table: str = Field(..., description="a table of theory (list-spec: analytic.table)")
    params: dict[str, Any] = Field({}, description="fixed parameters of every row (the table's "
                                   "fields)")
    grid: dict[str, list[Any]] = Field({}, description="swept parameters (cartesian product)")

    @property
    def n_rows(self) -> int:
        """The table's rows: one per point of ``grid``."""
        return math.prod(len(v) for v in self.grid.values())

    @model_validator(mode="after")
    def _grid(self) -> Analytic:
        if any(not v for v in self.grid.values()):
            raise ValueError("analytic.grid: every list needs at least one value")
        if set(self.grid) & set(self.params):
            raise ValueError(f"analytic: {sorted(set(self.grid) & set(self.params))} are both "
                             "params and grid keys")
        rows = self.n_rows
        if rows > MAX_ANALYTIC_ROWS:
            raise ValueError(f"analytic.grid: {rows:,} rows, more than {MAX_ANALYTIC_ROWS:,}")
        from .theory import TABLES  # the table's own parameter types and bounds

        table = TABLES.get(self.table)
        if table is None:  # reported with the known tables by the outputs stage
            return self
        problems: list[str] = []
        seen: dict[tuple, dict] = {}
        for values in itertools.product(*self.grid.values()):
            point = dict(zip(self.grid, values))
            try:  # every row exactly as analytic_table will compute it
                typed = tuple(table.Params(**self.params, **point).model_dump().items())
                if typed in seen:  # c: [0.1, 0.1] (or [1, 1.0]) wrote one cell as two rows
                    problems.append(
                        "grid: points " + ", ".join(f"{k}={v}" for k, v in seen[typed].items())
                        + " and " + ", ".join(f"{k}={v}" for k, v in point.items())
                        + " are the same row (a value given twice)")
                seen.setdefault(typed, point)
            except ValidationError as err:
                for e in err.errors():
                    name = ".".join(str(x) for x in e["loc"])
                    part = ("grid" if name in self.grid else "params") if name else "params"
                    at = (f" (grid point {', '.join(f'{k}={v}' for k, v in point.items())})"
                          if self.grid and name not in self.params else "")
                    msg = ("unknown key" if e["type"] == "extra_forbidden"
                           else e["msg"].removeprefix("Value error, "))
                    problems.append(f"{part}{'.' + name if name else ''}: {msg}{at}")
            if len(set(problems)) >= 4:
                break
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self


class PaperValue(Strict):
    """A number the paper prints for the cells matching ``where`` (compared within ``tol``)."""

    where: dict[str, Any] = Field(..., description="the cells it is the paper's value for: "
                                  "column -> value (a list: any of them), e.g. {model.d_model: "
                                  "64, label: S6}")
    metric: str = Field("test.acc", description="the results column compared")
    value: float = Field(..., description="the number the paper gives")
    tol: float = Field(0.05, ge=0, description="ours matches when within value ± tol")

    @model_validator(mode="after")
    def _labels_a_case_can_have(self) -> PaperValue:
        """A `where` label no case label can be ('Se' + U+0301 beside the case 'Sé', 'S6 '):
        the value matched no cell and was reported 'not run' beside the cell it names (a paper
        value may name cells no profile runs, so matching nothing is not refused)."""
        for key, want in self.where.items():
            # a setting's value is one value or a list of them, and a where lists such values:
            # a list nested deeper matches no cell
            flat, deepest = list_leaves(want)
            if deepest > 2:
                raise ValueError(f"where.{key}: a list nested {deepest} deep matches no cell (a "
                                 "setting's value is one value or a list of them, and a where "
                                 "may list such values: two deep at most)")
            # NaN equals nothing and no setting is infinite (they are refused): the value
            # matched no cell in any profile, without a word (a paper value may name cells no
            # profile runs, so matching nothing is otherwise allowed); a number written as text
            # too, as the tables read it (YAML reads `inf` and `nan` as text: 'inf' matched no
            # cell and 'nan' every cell without the setting)
            odd = [v for v in flat if v is not None and not isinstance(v, bool)
                   and (norm(v) is None or (isinstance(norm(v), float)
                                            and not math.isfinite(norm(v))))]
            if odd:
                read = "NaN" if norm(odd[0]) is None else norm(odd[0])
                raise ValueError(f"where.{key}: {want!r} matches no cell ({odd[0]!r} reads as "
                                 f"{read}: NaN equals nothing, and no setting is infinite); "
                                 "write the value the cell has (null for a cell without the "
                                 "setting)")
            if key == "label" or key.startswith("case:"):
                for label in want if isinstance(want, list) else [want]:
                    if isinstance(label, str):
                        _plain_label(label)
        return self


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"  # ids, aliases, paper slugs: safe as paths
# the tag of outputs written with --set (sweep.expand.overrides_tag) at the end of a name
SET_TAG = re.compile(r"(^|-)set-[0-9a-f]{6}$")
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class Spec(Strict):
    """A spec file, ``experiments/<paper>/<id>.yaml``: one paper figure or table."""

    version: int = Field(..., description=f"spec format version (now {SPEC_VERSION})")
    id: Name = Field(..., description="the results folder name: letters, digits, . _ -")
    alias: Name | None = Field(None, description="a second name commands take for the id "
                               "(letters, digits, . _ -)")
    paper: Name = Field(..., description="paper slug (results/<paper>/<id>/)")
    title: TitleText = Field(..., description="the figures' title (a figure's own `title` aside) "
                             "and the spec's line in `list`; `{seeds}` in it is drawn as how the "
                             "figure draws seeds ('mean of 3 seeds', 'one seed'); `{{word}}` draws `{word}`")
    tier: int = Field(..., ge=1, le=3, description="priority, 1 (first) to 3, shown by `list` "
                      "and the results front page")
    claim: str = Field(..., description="the paper's claim in words (shown by `show`; the "
                       "report's one UNTESTED verdict when `claims` is empty)")
    task: dict[str, Any] = Field({}, description="the task: {name: <a task of list-tasks>, "
                                 "...its fields}")
    model: dict[str, Any] = Field({}, description="the model: {name: <a model of list-models>, "
                                  "...its fields}")
    train: dict[str, Any] = Field({}, description="the training settings (section train)")
    sweep: list[Axis] = Field([], max_length=MAX_AXES, description="sweep axes (section "
                              "sweep[]): the runs are every combination of their points, each "
                              "with every seed")
    seeds: Seeds = Field([0], description="seeds of every sweep point (a profile's or a case's "
                         "seeds replace them)")
    derived: dict[str, str] = Field({}, max_length=MAX_EXPRESSIONS, description="dotted key -> "
                                    "expression over the point's keys, computed after the sweep, "
                                    "e.g. model.d_state: '60 // model.n_layers'")
    constraints: list[str] = Field(
        [], max_length=MAX_EXPRESSIONS, description="expressions a sweep point must satisfy, e.g. "
        "'model.d_state <= model.d_model'; points that fail are left out (the paper skips them)"
    )
    default_profile: Name = Field("quick", description="the profile a command runs without "
                                  "--profile")
    profiles: dict[Name, Profile] = Field(..., max_length=MAX_PROFILES,
                                          description="profile name (letters, digits, . _ -; "
                                          "part of output file names) -> profile; every spec "
                                          "has smoke, quick and paper")
    aggregate: Aggregate = Field(Aggregate(), description="how a cell combines its seeds "
                                 "(section aggregate)")
    analysis: list[Literal["decay_histogram", "mechanistic", "output_variance"]] = Field(
        [], description="decay_histogram: recorded at the end of training; mechanistic (koren2026 "
        "Figs. 2-5) and output_variance (Figs. 14-15): computed at plot time from the saved "
        "weights (need save_weights)")
    analytic: Analytic | None = Field(
        None, description="an analytic target computed from theory (no task, model, training)")
    save_weights: bool = Field(
        False, description="keep each finished run's trained weights in runs/<run_id>.pt (not "
        "in git; reload with train.build_member) for analyses computed at plot time")
    figure: dict[str, Any] | None = Field(
        None, description="the figure: {kind: <a kind of list-figures>, ...that kind's fields} "
        "(section figure, figures[]: the keys every kind has)")
    figures: list[dict[str, Any]] = Field(
        [], max_length=MAX_FIGURES, description="more figures of the same runs (each with a "
        "distinct `name`; section figure, figures[])")
    paper_values: list[PaperValue] = Field([], max_length=MAX_PAPER_VALUES, description="the "
                                           "paper's numbers, each compared with ours (section "
                                           "paper_values[])")
    claims: list[dict[str, Any]] = Field(
        [], max_length=MAX_CLAIMS, description="checkable claims: {check: <a check of "
        "list-checks, default threshold>, text, ...that check's fields} (section claims[]); none "
        "at all makes the claim UNTESTED")
    reuse: list[str] = Field(
        [], max_length=MAX_REUSE, description="ids of specs whose run records this spec reuses "
        "(same run id = same config, seed and code version), e.g. a figure drawn from another "
        "figure's runs; or spec files by path, relative to this spec's folder"
    )
    notes: list[str] = Field(..., min_length=1, description="one line per decision or "
                             "deviation from the paper (the report's Decisions section)")
    # set by the loader
    path: Path | None = Field(None, exclude=True)

    @field_validator("reuse", "analysis")
    @classmethod
    def _each_once(cls, names: list[str]) -> list[str]:
        twice = repeated(names)
        if twice is not None:  # each copy was done again: a reuse entry looked up and its records read once
            # more, an analysis computed again for every member after training (5,000 copies of
            # decay_histogram) or from every run's saved weights by each `plot`
            raise ValueError(f"{twice!r} is given more than once")
        return names

    @model_validator(mode="after")
    def _checks(self) -> Spec:
        if self.version != SPEC_VERSION:
            raise ValueError(f"unsupported spec version {self.version} (expected {SPEC_VERSION})")
        missing = [p for p in REQUIRED_PROFILES if p not in self.profiles]
        if missing:
            raise ValueError(f"profiles {missing} are missing (every spec has smoke, quick, paper)")
        if self.default_profile not in self.profiles:
            raise ValueError(f"default_profile {self.default_profile!r} is not a profile")
        for name in self.profiles:
            if SET_TAG.search(name):  # results-smoke-set-fcd9b6.csv of smoke run with --set
                raise ValueError(f"profile {name!r}: a name ending in set-<6 hex digits> is the "
                                 "file tag of a run with --set (its tables, figures and report "
                                 "would replace those of another profile run with --set)")
            same = [o for o in self.profiles if o != name and o.casefold() == name.casefold()]
            if same:  # results-Smoke.csv and results-smoke.csv: one file on macOS or Windows
                raise ValueError(f"profiles {same[0]!r} and {name!r} differ only in case (their "
                                 "files are one file on a case-insensitive disk)")
        if self.figure is None and not self.figures:
            raise ValueError("a spec needs a `figure` (or a `figures` list)")
        for where, sweep in [("sweep", self.sweep)] + [(f"profiles.{n}.sweep", p.sweep)
                                                       for n, p in self.profiles.items()]:
            held = len(self.constraints) + sum(max((len(c.constraints) for c in a.cases or []),
                                                   default=0) for a in sweep or [])
            if held > MAX_EXPRESSIONS:  # the constraints of one case per axis all hold at a
                # point: 32 axes of 100 each were 3,200 evaluations at each of 100,000 points
                raise ValueError(f"{where}: a sweep point may have to meet {held} constraints "
                                 f"(the spec's and its cases' on every axis), more than "
                                 f"{MAX_EXPRESSIONS}")
        work, shared = 0, _nodes(self.constraints) + _nodes(self.derived.values())
        for name, prof in self.profiles.items():  # each point evaluates them all (at most)
            axes = prof.sweep if prof.sweep is not None else self.sweep
            nodes = shared + sum(max((_nodes(c.constraints) for c in a.cases or []), default=0)
                                 for a in axes)
            work += nodes * math.prod(a.n_points for a in axes) if nodes else 0
            if work > MAX_EXPRESSION_WORK:
                raise ValueError(
                    f"constraints and derived: evaluated at every sweep point of every profile "
                    f"(through profile {name}), they would walk {work:,} syntax nodes, more than "
                    f"{MAX_EXPRESSION_WORK:,} (about a microsecond each): fewer or shorter "
                    "expressions, or fewer sweep points")
        if ("seeds" in self.model_fields_set and self.profiles
                and all(p.seeds is not None for p in self.profiles.values())):
            # yu2025-fig3's `seeds: [0, 1]` read as its seeds; every profile trained its own
            raise ValueError(f"seeds {self.seeds}: no profile uses them (each of "
                             f"{', '.join(self.profiles)} gives its own seeds); remove them")
        for a in ("mechanistic", "output_variance"):
            if a in self.analysis and not self.save_weights:
                raise ValueError(f"analysis {a!r} reads the saved weights: set save_weights")
        if self.analytic is None and (not self.task or not self.model):
            raise ValueError("a spec needs `task` and `model` (or `analytic`: a table from theory)")
        if self.analytic is not None:
            trained = [k for k in ("task", "model", "train", "sweep", "derived", "analysis",
                                   "reuse", "constraints") if getattr(self, k)]
            trained += [f"profiles.{n}" for n, p in self.profiles.items()
                        if p.set or p.sweep is not None or p.seeds is not None]
            if trained or self.save_weights:
                raise ValueError(f"an analytic spec trains nothing: remove {trained or ['save_weights']}")
        return self

    @property
    def figure_configs(self) -> list[tuple[str, dict[str, Any]]]:
        """(spec key, raw config) of every figure: ``figure`` first, then ``figures``."""
        out = [("figure", self.figure)] if self.figure is not None else []
        return out + [(f"figures.{i}", f) for i, f in enumerate(self.figures)]

    @property
    def results_dir_parts(self) -> tuple[str, str]:
        return self.paper, self.id


def shown_title(spec: Any, seeds: tuple[int, int] | None = None) -> str:
    """A spec's title as `list`, `show`, the report and the front page print it: ``{seeds}`` as
    the spec combines seeds ('mean of seeds'; it was printed as written); with ``seeds`` (the
    fewest and most seeds of a cell of the profile reported) their count ('mean of 3 seeds',
    'one seed': the report of a profile said 'mean of seeds' where its figure drew 'mean of 3
    seeds')."""
    words = ""
    if has_seeds_placeholder(spec.title):
        reduce = spec.aggregate.reduce
        lo, hi = seeds or (0, 0)
        words = ("computed from theory" if getattr(spec, "analytic", None) is not None
                 else f"{reduce} of seeds" if hi < 1 else "one seed" if hi == 1
                 else f"{reduce} of {hi} seeds" if lo == hi else f"{reduce} of {lo}–{hi} seeds")
    return fill_seeds(spec.title, words)


def _keys_at(model: type, loc: tuple) -> list[str]:
    """The keys the part of ``model`` at ``loc`` (a pydantic error's location) accepts; [] when
    the types do not tell (a part that is no field, list index or dict key of them, a union of
    models)."""
    types_ = [model]
    for part in loc:
        nxt = []
        for tp in _unwrap(types_):
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                field = tp.model_fields.get(str(part))
                if field is not None:
                    nxt.append(field.annotation)
            elif typing.get_origin(tp) in (list, tuple) and isinstance(part, int):
                nxt += list(typing.get_args(tp)[:1])
            elif typing.get_origin(tp) is dict and isinstance(part, str):
                nxt += list(typing.get_args(tp)[1:2])
        if not nxt:  # a part that is no key of any of them (a union member's tag, a
            # validator's wrapper): the keys there are not known from the types
            return []
        types_ = nxt
    models = {tp for tp in _unwrap(types_) if isinstance(tp, type) and issubclass(tp, BaseModel)}
    if len(models) != 1:  # a union's members (the mixers of a block): whose keys is not known
        return []
    return [k for k, f in models.pop().model_fields.items() if not f.exclude]


def _unwrap(tps: list) -> list:
    """The types inside Annotated / Optional / unions of ``tps``."""
    out = []
    for tp in tps:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            out += _unwrap([typing.get_args(tp)[0]])
        elif origin in (typing.Union, types.UnionType):
            out += _unwrap(list(typing.get_args(tp)))
        else:
            out.append(tp)
    return out


MAX_UNKNOWN_SHOWN = 5  # unknown keys named one by one at one place; the rest are counted
MAX_ERROR_LINES = 50  # problems of one validation shown; the rest are counted


def format_errors(path: Path | str, err: ValidationError, prefix: str = "",
                  model: type | None = None) -> list[str]:
    """'file: key: reason' lines of a pydantic error, keys prefixed with ``prefix``; with the
    ``model`` that was validated, an unknown key says which key was meant, or the keys there
    (a figure kind's or a check's fields are written down nowhere else). Several unknown keys
    at one place give one line that counts them, names the first few and lists the keys there
    once (each key's own line repeated the list: 30,000 unknown keys printed 8.8 MB)."""
    def where(loc: tuple) -> str:
        key = ".".join(short_name(str(p)) for p in loc)
        return f"{prefix}{key}" if key else (prefix.rstrip(".") or "(top level)")

    unknown: dict[tuple, list[str]] = {}  # place -> its unknown keys, in the error's order
    for e in err.errors():
        if e["type"] == "extra_forbidden":
            unknown.setdefault(tuple(e["loc"][:-1]), []).append(str(e["loc"][-1]))
    out = []
    for e in err.errors():
        if e["type"] != "extra_forbidden":
            msg = e["msg"]
            if (e["type"] == "too_long" and msg.endswith(", not more")
                    and isinstance(e.get("input"), dict)):  # pydantic counts no mapping's
                # entries: 'Dictionary should have at most 100 items after validation, not more'
                msg = msg.removesuffix("more") + str(len(e["input"]))
            out.append(f"{path}: {where(tuple(e['loc']))}: {msg}")
            continue
        place = tuple(e["loc"][:-1])
        names = unknown.pop(place, None)
        if names is None:  # the place's keys are already reported
            continue
        known = _keys_at(model, place) if model is not None else []
        meant = {}
        longest = max(map(len, known), default=0)
        for name in names:  # a name over 3 times the longest key matches none at 0.6 (a
            # 300 kB key took difflib 0.3 s)
            close = (difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                     if len(name) <= 3 * longest else [])
            if close and len(meant) < MAX_UNKNOWN_SHOWN:
                meant[name] = close[0]
        out += [f"{path}: {where(place + (name,))}: unknown key (did you mean {close}?)"
                for name, close in meant.items()]
        rest = [name for name in names if name not in meant]
        hint = f" (known here: {', '.join(known)})" if known else ""
        if len(rest) == 1:
            out.append(f"{path}: {where(place + (rest[0],))}: unknown key{hint}")
        elif rest:
            shown = ", ".join(map(short_name, rest[:MAX_UNKNOWN_SHOWN]))
            more = (f" and {len(rest) - MAX_UNKNOWN_SHOWN:,} more"
                    if len(rest) > MAX_UNKNOWN_SHOWN else "")
            out.append(f"{path}: {where(place)}: {len(rest):,} unknown keys: {shown}{more}{hint}")
    if len(out) > MAX_ERROR_LINES:  # one line per place: 20,000 profiles with a stray key
        # each printed 1.9 MB
        out = out[:MAX_ERROR_LINES] + [f"{path}: ... and {len(out) - MAX_ERROR_LINES:,} more "
                                       "problems (the first are above; fix them and validate again)"]
    return out


_format_errors = format_errors  # the name the sweep stage imports


MAX_SPEC_BYTES = 1 << 20  # a spec is a page of settings (the largest shipped one is ~40 kB)


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml when present
    """yaml.SafeLoader that refuses a mapping with a key given twice (PyYAML keeps the last one
    silently: ``lr: 0.1`` further down a file would quietly win over the first)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        merges = [(k, v) for k, v in node.value if k.tag == _MERGE_TAG]
        if len(merges) > 1:  # the later `<<` replaced the earlier one's keys without a word
            raise yaml.constructor.ConstructorError(
                None, None, f"key '<<' (a merge) is given twice (first on line "
                f"{merges[0][0].start_mark.line + 1}); merge several mappings with "
                "`<<: [*a, *b]`", merges[1][0].start_mark)
        if merges:
            self._merged_once(node, *merges[0])
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # `<<: *anchor` merges a mapping; own keys override it
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not key_node.start_mark:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (first on line {first.line + 1})",
                    key_node.start_mark)
        self.flatten_mapping(node)  # resolve `<<` merges (explicit keys win over merged ones)
        return super().construct_mapping(node, deep=deep)

    def _merged_once(self, node, merge_key, value_node) -> None:
        """Refuse a key that two mappings of one `<<: [*a, *b]` both give, unless the mapping
        itself sets it: YAML's merge gives the first mapping's value, PyYAML the last one's (a
        spec read `lr` from the mapping the author meant to be overridden)."""
        if not isinstance(value_node, yaml.SequenceNode):
            return
        own = set()
        for key_node, _ in node.value:
            if key_node.tag != _MERGE_TAG:
                own.add(self._hashable(key_node))
        given: dict[Any, Any] = {}
        for sub in value_node.value:
            if not isinstance(sub, yaml.MappingNode):
                return  # not a mapping: flatten_mapping reports it
            self.flatten_mapping(sub)  # its own merges first, as flatten_mapping does
            for key_node, _ in sub.value:
                key = self._hashable(key_node)
                if key is None or key in own:
                    continue
                first = given.setdefault(key, sub.start_mark)
                if first is not sub.start_mark:
                    a, b = first, sub.start_mark
                    where = (f"lines {a.line + 1} and {b.line + 1}" if a.line != b.line else
                             f"line {a.line + 1}, columns {a.column + 1} and {b.column + 1}")
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given by two mappings merged here ({where}): "
                        "YAML takes the first, "
                        "this reader the last; set it in this mapping or in one of them",
                        merge_key.start_mark)

    def _hashable(self, key_node) -> Any:
        key = self.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            return None
        return key


# Plain scalars are read as YAML 1.2's core schema reads them, not as YAML 1.1 (PyYAML's default):
# only true / false are booleans (`yes`, `no`, `on`, `off` are text), integers are decimal (with
# `_` separators between digits, as Python writes them), 0x or 0o, never base 60 (`8:00` was 480)
# or octal by a leading zero (`010` is the integer 10: it was 8, then the float 10.0), and dates
# are text; `1_` or `1__0` (an underscore not between two digits) is text, not 1 or 10. Tags of
# other types (!!set, !!binary, !!timestamp, !!omap, !!pairs) are refused: a spec holds mappings,
# lists, text, numbers, booleans and null.
_DIGITS = r"[0-9](?:_?[0-9])*"
_YAML12 = [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", rf"^(?:[-+]?{_DIGITS}|0o[0-7](?:_?[0-7])*"
     r"|0x[0-9a-fA-F](?:_?[0-9a-fA-F])*)$", "-+0123456789"),
    ("tag:yaml.org,2002:float", rf"^(?:[-+]?(?:\.{_DIGITS}|{_DIGITS}(?:\.(?:{_DIGITS})?)?)"
     r"(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+.0123456789"),
]
_YAML11_TYPES = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                 "tag:yaml.org,2002:timestamp"}
_REFUSED_TAGS = ("set", "binary", "timestamp", "omap", "pairs")


def _refuse_tag(loader, node):
    raise yaml.constructor.ConstructorError(
        None, None, f"unsupported YAML type {node.tag.replace('tag:yaml.org,2002:', '!!')} (a "
        "spec holds mappings, lists, text, numbers, booleans and null)", node.start_mark)


def _construct_int(loader, node) -> int:
    """An integer as YAML 1.2 reads it: decimal even with leading zeros (PyYAML's own constructor
    reads `010` as octal 8), 0x hexadecimal or 0o octal; ``_YAML12`` leaves no other form."""
    text = loader.construct_scalar(node)
    base = {"0x": 16, "0o": 8}.get(text[:2], 10)
    return int(text if base == 10 else text[2:], base)


def _yaml12_constructor(tag: str, rx: str, construct):
    """``construct`` for a scalar of ``tag`` whose text YAML 1.2 reads as that type; an explicit
    tag on other text (`!!float 1:30` was 90.0, `!!bool on` True, `!!null x` None: YAML 1.1's
    readings, or none) is refused naming it. Plain scalars get the tag only when they match."""
    pattern, name = re.compile(rx), tag.replace("tag:yaml.org,2002:", "!!")

    def build(loader, node):
        text = loader.construct_scalar(node)
        if not pattern.match(text):
            raise yaml.constructor.ConstructorError(
                None, None, f"{name} {text!r}: not {_KINDS[name]} as YAML 1.2 writes it (a "
                "spec is read as YAML 1.2)", node.start_mark)
        return construct(loader, node)
    return build


_NULL = "tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$"
_KINDS = {"!!bool": "a boolean (true or false)", "!!int": "an integer", "!!float": "a number",
          "!!null": "null (~ or null)"}


def _yaml12_resolvers(loader_cls) -> None:
    loader_cls.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in _YAML11_TYPES]
        for first, resolvers in loader_cls.yaml_implicit_resolvers.items()}
    for tag, rx, first in _YAML12:
        loader_cls.add_implicit_resolver(tag, re.compile(rx), list(first))
    for name in _REFUSED_TAGS:
        loader_cls.add_constructor(f"tag:yaml.org,2002:{name}", _refuse_tag)
    safe = yaml.constructor.SafeConstructor
    constructs = {"bool": safe.construct_yaml_bool, "int": _construct_int,
                  "float": safe.construct_yaml_float, "null": safe.construct_yaml_null}
    for tag, rx in [*((t, r) for t, r, _ in _YAML12), _NULL]:
        loader_cls.add_constructor(tag, _yaml12_constructor(
            tag, rx, constructs[tag.rsplit(":", 1)[1]]))


_yaml12_resolvers(_UniqueKeyLoader)


MAX_YAML_NODES = 200_000  # values in a document with its aliases expanded (a spec has ~2,000)
# characters of text (keys and values) in a document with its aliases expanded (the shipped
# specs hold at most 33,000): a 900 kB note aliased 20,000 times in a 1 MB file was 18 GB of
# notes for report.md, and hours of checking its letters
MAX_YAML_TEXT = 4 << 20


class YamlBoundError(ValueError):
    """A YAML document that aliases expand beyond ``MAX_YAML_NODES`` values or
    ``MAX_YAML_TEXT`` characters of text, or that contains itself (a recursive alias): every
    later walk over it would be unbounded."""


def _check_expanded_size(doc: Any) -> None:
    """Walk ``doc`` as its readers will (every alias expanded); YamlBoundError past the bound."""
    count, chars, path_ids = 0, 0, set()

    def walk(o: Any) -> None:
        nonlocal count, chars
        count += 1
        if count > MAX_YAML_NODES:
            raise YamlBoundError(f"more than {MAX_YAML_NODES:,} values once its aliases (*name) "
                                 "are expanded")
        if isinstance(o, str):
            chars += len(o)
            if chars > MAX_YAML_TEXT:
                raise YamlBoundError(f"more than {MAX_YAML_TEXT >> 20} MiB of text once its "
                                     "aliases (*name) are expanded")
        if isinstance(o, (dict, list)):
            if id(o) in path_ids:
                raise YamlBoundError("an alias (*name) inside the value it names (recursive)")
            path_ids.add(id(o))
            for v in (list(o.keys()) + list(o.values())) if isinstance(o, dict) else o:
                walk(v)
            path_ids.discard(id(o))

    walk(doc)


def _refuse_other_version(text: str) -> None:
    """A document that declares another YAML version than the 1.2 it is read as (``%YAML 1.1``
    before its ``---``): under 1.1, which it asks for, `yes` / `no` are booleans, `010` is 8 and
    `1:30` is 90; it was read as 1.2 without a word, other values than its author meant."""
    for i, line in enumerate(text.removeprefix("\ufeff").splitlines()):
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith("%"):  # the directives end where the document starts
            return
        m = re.match(r"%YAML[ \t]+([^\s#]*)", line)
        if m and m.group(1) != "1.2":
            raise yaml.error.MarkedYAMLError(
                problem=f"the file declares %YAML {m.group(1)}, but a spec is read as YAML 1.2 "
                "(`yes` and `no` are text, `010` is 10, `1:30` is text): write %YAML 1.2 or "
                "remove the line", problem_mark=yaml.error.Mark("", 0, i, 0, None, None))


def _refuse_unicode_line_breaks(text: str) -> None:
    """A raw NEL, LINE SEPARATOR or PARAGRAPH SEPARATOR (U+0085, U+2028, U+2029; text pasted from
    a PDF or a web page): PyYAML takes it for a line break, as YAML 1.1 does, where YAML 1.2 and
    most editors show one line: `title: A<U+2028>seeds: [0]` read a hidden `seeds` key, and in a
    block scalar (`text: |`) it failed with `could not find expected ':'` a line further on."""
    m = re.search("[\x85\u2028\u2029]", text)
    if m is None:
        return
    import unicodedata

    line = text.count("\n", 0, m.start())
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1)
    raise yaml.error.MarkedYAMLError(
        problem=f"U+{ord(m.group()):04X} {unicodedata.name(m.group(), 'NEXT LINE')} at column "
        f"{column + 1}: YAML readers differ on whether it breaks the line (this one does; an "
        "editor may show one line); remove it, or write it escaped in double quotes "
        f"(\"\\u{ord(m.group()):04x}\")",
        problem_mark=yaml.error.Mark("", m.start(), line, column, None, None))


def parse_yaml(text: str) -> Any:
    """A YAML document like ``yaml.safe_load``, but plain scalars are read as YAML 1.2 reads them
    (``_YAML12``: `yes` is text, `8:00` is not 480), tags of types other than mappings, lists,
    text, numbers, booleans and null are refused, a key given twice in one mapping is an error,
    and so is a document whose aliases expand past ``MAX_YAML_NODES`` values or
    ``MAX_YAML_TEXT`` characters, or refer to themselves (``YamlBoundError``). An integer of
    more digits than Python converts raises ValueError."""
    _refuse_other_version(text)
    _refuse_unicode_line_breaks(text)
    doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    _check_expanded_size(doc)
    return doc


def _read_spec_text(path: Path) -> str:
    """The file's text; SpecError when it is larger than a spec can be (``MAX_SPEC_BYTES``) or
    not a regular file (a FIFO or device would block or never end; a link to a spec is fine)."""
    try:
        data = read_small(path, MAX_SPEC_BYTES, follow_links=True)
    except NotSmallFile as err:
        why = f"larger than {MAX_SPEC_BYTES >> 20} MiB" if "larger" in str(err) else str(err)
        raise SpecError([f"{path}: (file): {why}, not a spec"]) from None
    except OSError as err:
        raise SpecError([f"{path}: cannot read: {err.strerror}"]) from None
    return data.decode("utf-8")


def yaml_problem(err: yaml.YAMLError) -> str:
    """What a YAML error says, with its context where it has one: a duplicate anchor said only
    `second occurrence`, a missing ':' `could not find expected ':'` a line below the key that
    lacks it."""
    problem = getattr(err, "problem", None) or str(err)
    context, mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if not context:
        return problem
    line = f"line {mark.line + 1}" if mark is not None else ""
    if context.startswith("found duplicate anchor"):
        return (f"an anchor (&name) is defined twice (first on {line}); give each anchor its own "
                "name")
    hint = ""
    if "tab character" in problem:  # a block of text indented with a tab: the quoting hint
        # below sent its author to quote a `claim: >-` that was meant as the block it is
        hint = " (YAML indents with spaces, never tabs: replace the tab with spaces)"
    elif context.startswith("while scanning a block scalar"):
        hint = (" (a value starting with '>' or '|' opens a block of text: quote it, e.g. "
                "op: \">=\")")
    return f"{context}{' on ' + line if line else ''}: {problem}{hint}"


def load_spec(path: Path | str) -> Spec:
    """Parse and validate one spec file (schema only; run configs are checked by ``sweep``)."""
    path = Path(path)
    try:
        raw = parse_yaml(_read_spec_text(path))
    except RecursionError:
        raise SpecError([f"{path}: (parse): malformed YAML: nested too deeply"]) from None
    except UnicodeDecodeError as err:
        raise SpecError([f"{path}: byte {err.start}: not UTF-8 text"]) from None
    except YamlBoundError as err:
        raise SpecError([f"{path}: (parse): {err}"]) from None
    except ValueError as err:  # an integer of thousands of digits (int() refuses to convert it)
        raise SpecError([f"{path}: (parse): malformed YAML: {err}"]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(parse)"
        raise SpecError([f"{path}: {where}: malformed YAML: {yaml_problem(err)}"]) from None
    except OSError as err:
        raise SpecError([f"{path}: cannot read: {err.strerror}"]) from None
    if not isinstance(raw, dict):
        got = {type(None): "nothing (an empty document: no keys, or only comments)",
               list: "a list", str: f"text ({raw!r:.40})" if isinstance(raw, str) else "",
               bool: "a boolean", int: "a number", float: "a number"}.get(type(raw),
                                                                            type(raw).__name__)
        raise SpecError([f"{path}: (top level): expected a mapping of a spec's keys (id, title, "
                         f"task, ...), got {got}"])
    deep = too_deep(raw)
    if deep:
        raise SpecError([f"{path}: {deep}"])
    odd = _odd_keys(raw)
    if odd:
        raise SpecError([f"{path}: {m}" for m in odd])
    odd_text = _control_characters(raw)
    if odd_text:
        raise SpecError([f"{path}: {m}" for m in odd_text])
    try:
        spec = Spec(**raw)
    except ValidationError as err:
        raise SpecError(_format_errors(path, err, model=Spec)) from None
    spec.path = path
    return spec


# terminal-control and direction-changing characters: a title, claim or label holding one was
# printed raw by show/list/run (an ANSI escape recoloured or cleared the terminal, a bidi
# override showed text other than what the file says); a line break or tab is fine
_BIDI = {*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}
# a control character (Unicode category Cc) other than a line break or tab, or a _BIDI one
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f"
                      + "".join(re.escape(chr(c)) for c in sorted(_BIDI)) + "]")


def _yaml_key(key: Any) -> str:
    """A key as YAML spells it: `true` (not `True`, nor `1` as pydantic named it), `null`,
    `''` (an empty key was not shown at all)."""
    return yaml.safe_dump(key, default_flow_style=True, width=1 << 30).strip().removesuffix(
        "...").strip()


MAX_SPEC_DEPTH = 64  # levels of mappings and lists a spec may nest (its own are a handful)


def too_deep(doc: Any) -> str | None:
    """'key: reason' where ``doc`` nests mappings or lists beyond ``MAX_SPEC_DEPTH`` levels, read
    through a stack: a claim's or a paper value's `where: {task.T: [[[...8...]]]}` 900 deep,
    which YAML reads, was a RecursionError or pydantic serialization traceback (a list nested
    more than twice matches no cell anyway). Each name of a dotted key is a level (``set_dotted``
    nests it so): a key `model.a.a.a...` of 3,000 names was a RecursionError traceback in
    expand's deepcopy, one of 60,000 hours of the profile checks' n² walk of its prefixes.
    None when it does not."""
    seen: dict[int, int] = {}  # a container (YAML aliases share one) -> the deepest level read
    todo: list[tuple[Any, int, tuple]] = [(doc, 0, ())]
    while todo:
        o, depth, at = todo.pop()
        if not isinstance(o, (dict, list)):
            if depth <= MAX_SPEC_DEPTH:  # (a value inside the deepest mapping a key spells)
                continue
        elif seen.get(id(o), -1) >= depth:
            continue
        if depth >= MAX_SPEC_DEPTH:
            return (f"{'.'.join(at[:8]) + ('…' if len(at) > 8 else '')}: mappings and lists nested more than "
                    f"{MAX_SPEC_DEPTH} levels deep (each name of a dotted key a level); no spec key "
                    "nests so deep")
        seen[id(o)] = depth
        items = o.items() if isinstance(o, dict) else enumerate(o)
        todo.extend((v, depth + 1 + (k.count(".") if isinstance(k, str) else 0),
                     (*at, short_name(str(k)))) for k, v in items)
    return None


def _odd_keys(doc: Any) -> list[str]:
    """'key: reason' for every mapping key of ``doc`` that is not a name: not text (`true`,
    `null`, `1`) or empty (at most 10 lines). Every key of a spec is a name."""
    out: list[str] = []

    def walk(o: Any, at: tuple) -> None:  # the path as parts, joined only for a line printed
        # (a long key aliased many times was copied into every path below it)
        if len(out) >= 10:
            return
        if isinstance(o, dict):
            for k, v in o.items():
                if not isinstance(k, str):
                    kind = {bool: "a boolean", type(None): "null", int: "a number",
                            float: "a number"}.get(type(k), type(k).__name__)
                    out.append(f"{'.'.join((*at, _yaml_key(k)))}: keys are names (text), got "
                               f"{kind}")
                elif not k.strip():
                    out.append(f"{'.'.join((*at, _yaml_key(k)))}: an empty key; keys are names")
                else:
                    walk(v, (*at, k))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, (*at, str(i)))

    walk(doc, ())
    return out


def _control_characters(doc: Any, key: str = "") -> list[str]:
    """'key: reason' for every text (value or key) of ``doc`` that holds a control character
    other than a line break or tab, or a direction-changing one (at most 10 lines)."""
    import unicodedata

    out: list[str] = []
    seen: set[int] = set()  # texts looked at: an alias (*name) of a long text is one object,
    # looked at once (a 900 kB note aliased 20,000 times took hours, letter by letter)

    def walk(o: Any, at: tuple, is_key: bool = False) -> None:  # the path as parts, joined
        # only for a line printed (a long key aliased many times was copied into every path)
        if len(out) >= 10:
            return
        if isinstance(o, str):
            if id(o) in seen:
                return
            seen.add(id(o))
            odd = [m.group() for m, _ in zip(_CONTROL.finditer(o), range(3))]
            if odd:
                shown = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'control character')}"
                                  for c in dict.fromkeys(odd))
                name = (".".join([*at[:-1], f"(key {o!r})"]) if is_key else ".".join(at))
                out.append(f"{name or '(top level)'}: text with a control character ({shown}); "
                           "a spec's text is printed to the terminal as is")
        elif isinstance(o, dict):
            for k, v in o.items():
                if isinstance(k, str):
                    walk(k, (*at, k), is_key=True)
                walk(v, (*at, str(k)))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, (*at, str(i)))

    walk(doc, (key,) if key else ())
    return out


# ----------------------------------------------------------------------------------------------
# finding specs


def experiments_dir() -> Path:
    return repo_root() / "experiments"


def spec_paths() -> list[Path]:
    return sorted(p for p in experiments_dir().glob("*/*.yaml") if not p.name.startswith("_"))


_UNREADABLE = (yaml.YAMLError, UnicodeDecodeError, OSError, SpecError, RecursionError, ValueError)


def _light_read(p: Path) -> tuple[str | None, str | None]:
    """(``id:``, ``alias:``) of a spec file without validating it (None where unreadable)."""
    try:
        text = _read_spec_text(p)
    except _UNREADABLE:
        return None, None
    return _light_parse(text)


@functools.lru_cache(maxsize=1024)
def _light_parse(text: str) -> tuple[str | None, str | None]:
    """:func:`_light_read` of a text, remembered by the text itself (the index is rebuilt for
    every spec ``validate --all`` checks: 49 × 49 YAML parses were a quarter of its time)."""
    try:
        raw = parse_yaml(text)
    except _UNREADABLE:
        return None, None
    raw = raw if isinstance(raw, dict) else {}
    return tuple(v if isinstance(v, str) else None for v in (raw.get("id"), raw.get("alias")))


def index_problems() -> tuple[dict[str, Path], list[str]]:
    """(id and alias -> file, identity problems). Ids come from file names (``<id>.yaml``),
    aliases from a light read. Problems: two files with one id, an ``id:`` that is not the file
    name, an alias used twice, an alias equal to another spec's id, ids or aliases of two specs
    that differ only in case; such names are left out of the index (ambiguous)."""
    ids: dict[str, list[Path]] = {}
    aliases: dict[str, list[Path]] = {}
    problems, out = [], {}
    for p in spec_paths():
        ids.setdefault(p.stem, []).append(p)
        i, a = _light_read(p)
        if i is not None and i != p.stem:
            problems.append(f"{p}: id: {i!r} must equal the file name {p.stem!r}")
        if a is not None and a != p.stem:
            aliases.setdefault(a, []).append(p)
    folded: dict[str, list[str]] = {}
    for name in ids:
        folded.setdefault(name.casefold(), []).append(name)
    for name, ps in ids.items():
        cased = sorted(n for n in folded[name.casefold()] if n != name)
        if len(ps) > 1:
            problems.append(f"{', '.join(map(str, ps))}: id: {name!r} is the id of "
                            f"{len(ps)} specs (ids must be unique)")
        elif cased:  # results/<paper>/T-spec and .../t-spec: one folder on macOS or Windows
            problems.append(f"{ps[0]}: id: {name!r} differs only in case from the id of "
                            f"{ids[cased[0]][0]} (ids must be unique ignoring case: on a "
                            "case-insensitive disk the two share one results folder)")
        else:
            out[name] = ps[0]
    for name, ps in aliases.items():
        if len(ps) > 1:
            problems.append(f"{', '.join(map(str, ps))}: alias: {name!r} is the alias of "
                            f"{len(ps)} specs")
        elif name in ids:
            problems.append(f"{ps[0]}: alias: {name!r} is the id of {ids[name][0]}")
        elif cased := [(n, kind, q) for kind, names in (("id", ids), ("alias", aliases))
                       for n, (q, *_) in sorted(names.items())
                       if n != name and q != ps[0] and n.casefold() == name.casefold()]:
            # `show Keep-Nth` and `show keep-nth` ran two different specs (aliases of two specs,
            # or an alias and another spec's id, alike but for case): `validate --all` said ok
            other, kind, where = cased[0]
            problems.append(f"{ps[0]}: alias: {name!r} differs only in case from {other!r}, the "
                            f"{kind} of {where} (names must be unique ignoring case: one is "
                            "easily typed for the other)")
        else:
            out[name] = ps[0]
    for name in set(ids) | set(aliases):
        if name not in out:
            out.pop(name, None)
    known = set(spec_paths())
    for p in sorted(experiments_dir().rglob("*.[yY]*[mM][lL]")):  # `X.YAML` passed in silence
        if p in known or not is_spec_file_name(p) or p.name.startswith("_"):
            continue
        i = _light_read(p)[0]
        if i is not None:  # a spec `validate --all` passed over in silence ('ok' for the rest)
            problems.append(f"{p}: the spec {i!r} is not read by any command: a spec is "
                            "experiments/<paper>/<id>.yaml (a .yml or .YAML suffix, a file at the top "
                            "or in a deeper folder is not); move or rename it, or start its "
                            "name with _ to keep it out")
    return out, problems


def id_taken(spec: Spec) -> str | None:
    """'file: id: reason' when ``spec`` was loaded from a file other than the project spec of its
    id (a copy given by its path): the two would share one results folder, and writing its
    tables, figures and report would replace the project spec's. None otherwise."""
    if find_project() is None:  # no project (an installed package run elsewhere): no spec of it
        return None  # shares the id (reading its index refused the spec with `no project folder`)
    other = index().get(spec.id)
    cased = other is None  # T-spec.yaml given by its path beside the project's t-spec: one
    if cased:  # results folder on a case-insensitive disk (index_problems checks a project's)
        other = next((p for p in spec_paths() if p.stem.casefold() == spec.id.casefold()), None)
    if spec.path is None or other is None or other.resolve() == Path(spec.path).resolve():
        return None
    # two files of one id (experiments/a/x.yaml, experiments/b/x.yaml) leave it out of the
    # index too: the second was said to differ 'only in case' from the first's identical id
    if not cased and other.stem != spec.id:  # the alias of a project spec (`id: keep-nth`): it
        # was said to differ 'only in case' from huang2025-tab1, sharing its results folder
        return (f"{spec.path}: id: {spec.id!r} is the alias of {other}; a spec given by its "
                f"path needs an id of its own (`ssmrepro show {spec.id}` names that spec)")
    relation = "differs only in case from the id" if other.stem != spec.id else "is the id"
    try:  # results/<paper>/<id>: a spec of another paper has a folder of its own, and `validate`
        # said 'the two would share one results folder' of two specs that do not
        raw = parse_yaml(_read_spec_text(other))
        paper = raw.get("paper") if isinstance(raw, dict) else None
    except _UNREADABLE:
        paper = None
    why = (f"commands name a spec by its id alone, as `ssmrepro show {spec.id}` does"
           if paper != spec.paper else
           "the two would share one results folder" + (" on a case-insensitive disk"
                                                       if other.stem != spec.id else ""))
    return (f"{spec.path}: id: {spec.id!r} {relation} of {other}; a spec given by its path needs "
            f"an id of its own ({why})")


def load_project_spec(path: Path) -> Spec:
    """``load_spec`` of one of the project's spec files (``spec_paths``); SpecError as well when
    another of them has its id, exactly or ignoring case (``experiments/a/x.yaml`` beside
    ``experiments/b/x.yaml``): `figures` rebuilt and listed whichever came last, `export`
    exported the rows of both (every row twice), `list` showed both, without a word."""
    path = Path(path)
    twins = [q for q in spec_paths() if q != path and q.stem.casefold() == path.stem.casefold()]
    if twins:
        relation = "is also the id of" if twins[0].stem == path.stem else \
            "differs only in case from the id of"
        raise SpecError([f"{path}: id: {path.stem!r} {relation} {twins[0]} (ids must be unique "
                         "ignoring case: commands name a spec by its id, and on a "
                         "case-insensitive disk the two share one results folder)"])
    return load_spec(path)


def index() -> dict[str, Path]:
    """id and alias -> file (ambiguous names left out; see :func:`index_problems`)."""
    return index_problems()[0]


def is_spec_file_name(p: Path) -> bool:
    """Whether a name given for a spec is a file's (``x.yaml``, ``x.yml``, in any case): an
    existing `my/SPEC.YAML` was looked up as an id, `unknown experiment 'my/SPEC.YAML'`."""
    return p.suffix.lower() in (".yaml", ".yml")


def find_reused(spec: Spec, name: str) -> Spec:
    """The spec that ``spec``'s ``reuse`` entry ``name`` names: an id or alias, or a spec file
    by path, relative to ``spec``'s own folder (it was read from the current folder: a spec by
    path reusing ``other.yaml`` worked from one folder only)."""
    p = Path(name)
    if is_spec_file_name(p) and not p.is_absolute() and spec.path is not None:
        name = str(Path(spec.path).parent / p)
    try:
        return find_spec(name)
    except NoProject as err:  # an id with no project to look it up in: the message said
        # `--out DIR` would do, which it does not here, and named no reuse entry
        raise SpecError([f"{name!r} is an id, looked up in the project's experiments/, and "
                         f"{err.args[0].split(';')[0]}; set {ROOT_ENV} to the project folder, "
                         "or give the spec by its file (a .yaml path, relative to this spec)"]) \
            from None


def find_spec(name: str) -> Spec:
    """Load a spec by id, alias or path; unknown names suggest close matches."""
    p = Path(name)
    if is_spec_file_name(p) and (p.exists() or p.is_symlink()):  # a link that loops
        # was `no spec file x.yaml (no such file: moved or deleted?)`: it says why now
        return load_spec(p)
    idx, problems = index_problems()
    clash = [m for m in problems if f"{name!r}" in m]
    if clash:
        raise SpecError(clash)
    if name not in idx:
        lower: dict[str, str] = {}  # matched ignoring case: `show T-SPEC` suggested nothing
        for k in idx:
            lower.setdefault(k.lower(), k)
        close = [lower[c] for c in difflib.get_close_matches(
            (p.stem if is_spec_file_name(p) else name).lower(), list(lower), n=4,
            cutoff=0.5)]
        hint = f" Did you mean: {', '.join(close)}?" if close else " Try `ssmrepro list`."
        if is_spec_file_name(p):  # a spec file moved or deleted: it was 'unknown
            # experiment', as a mistyped id, naming no file that is missing
            raise SpecError([f"no spec file {name} (no such file: moved or deleted?).{hint}"])
        raise SpecError([f"unknown experiment {name!r}.{hint}"])
    return load_spec(idx[name])
