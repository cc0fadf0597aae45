"""Stage 6 (plots): the figure-kind registry and what a figure kind is given.

A figure kind is one function ``fn(ctx, cfg, path) -> bool`` (False: nothing to draw) registered
with its typed config (pydantic, extra keys forbidden)::

    @figure_kind("bars", BarsConfig)
    def bars(ctx: FigureContext, cfg: BarsConfig, path: Path) -> bool: ...

A spec's ``figure: {kind: bars, ...}`` is validated against ``BarsConfig``. Column references in
configs are column names of the aggregated table (``label``, ``model.d_model``, ``task.T``, ...) or
``case:<i>``, the i-th case label of the run's label (``"(c) trained linear / vs D"`` has
``case:0`` = ``(c) trained linear`` and ``case:1`` = ``vs D``).
"""

from __future__ import annotations

import math
import re
import shlex
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints

from ..report.cells import (
    PaperValueLookup,
    finished,
    is_case_ref,
    listed_keys,
    value_matches,
    values_equal,
)
from ..report.columns import DEFAULT_METRIC, LABEL, N_DIVERGED, N_OK
from ..spec import NAME_PATTERN, parse_yaml
from ..store import is_loss
from ..util import (
    SEEDS_PLACEHOLDER,
    NoBoolNumbers,
    TitleText,
    check_registration,
    doc_summary,
    docstring,
    encode_cell,
    fill_seeds,
    first_time,
    has_seeds_placeholder,
    norm,
    repeated,
    seeds_in_math,
    short_name,
)


class FigureConfig(NoBoolNumbers):
    """Fields every figure kind has (a kind's own: list-figures)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kind: str = Field(..., description="the figure kind: one of list-figures")
    # file stem in the results folder (default: "figure" for the first figure, "figure<i>"):
    # letters, digits, . _ - only, so a name cannot point outside the folder
    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN)] | None = Field(
        None, description="file stem in the results folder (default: figure, figure2, ...)")
    title: TitleText | None = Field(None, description="the figure's title (default: the spec's); "
                                    "`{seeds}` in it is drawn as how the figure draws seeds "
                                    "('mean of 3 seeds', 'one seed'); `{{word}}` draws `{word}`")
    metric: str = Field(DEFAULT_METRIC, description="the results column (aggregated metric) drawn")

    def drawn_seeds(self, ctx: Any) -> str | None:
        """How the figure draws seeds where it draws no cell's combined value (one run's model:
        'one seed'; a histogram of the seeds' values: '3 seeds pooled'), for its title's
        ``{seeds}``, of the ``FigureContext`` ctx; None: as the cells combine them."""
        return None

    def column_refs(self) -> list[str]:
        """Columns the figure names (validated against the spec's run table)."""
        return []

    def metrics(self) -> list[str]:
        """Aggregated metrics the figure draws."""
        return [self.metric]

    def analyses(self) -> list[str]:
        """Run analyses (the spec's ``analysis`` list) the figure needs."""
        return []

    def history_metrics(self) -> list[str]:
        """Metrics of the runs' evaluation history the figure draws (learning curves); any
        makes the outputs stage write ``curves.csv`` (report.curves)."""
        return []

    def levels(self) -> list[tuple[str, str, float]]:
        """(option, metric, value) of each option compared with a metric's values (a frame
        drawn at or above it): validated to be a value the metric can take (``solved: 5`` on
        an accuracy framed no cell, without a word)."""
        return []

    def panel_refs(self) -> list[str]:
        """Columns that split the figure into panels: ``case:<i>`` beyond the labels' case
        labels is '' for every cell there, one panel (the lines kind's default facet)."""
        return []

    def numeric_refs(self) -> list[str]:
        """Columns drawn on a numeric axis: validated to hold numbers in every run (``label``
        or a text key raised ValueError while drawing)."""
        return []

    def log_refs(self) -> list[str]:
        """Columns drawn on a log axis (a subset of ``numeric_refs``): validated to hold positive
        numbers in every cell (a 0 or a negative value was clipped to the axis edge, or left
        out, with no sign of it)."""
        return []

    def cell_exprs(self) -> list[tuple[str, str]]:
        """(field, expression over a cell's config columns) evaluated on every cell before any
        training (a theory line that cannot be evaluated raised while drawing)."""
        return []

    def value_refs(self) -> list[tuple[str, str, Any]]:
        """(field, column, value) the figure names as a value of a column (``label``: a run's
        label or case label): a typo drew nothing, or drew the cell as if it were another."""
        return []

    def positions(self) -> list[str] | None:
        """Columns that place a cell in the drawing (panel, row, x, y): two cells of a profile
        with equal values would be drawn on one spot, the last over the first, so validation
        refuses them. None: the kind draws every cell on its own (bars) or does not say."""
        return None

    def placed(self, rows: pd.DataFrame, keys: list[str]) -> list[tuple[pd.DataFrame, Any]]:
        """(cells, positions) of each part of the drawing whose cells are placed by the same
        columns: one part, ``positions``, unless the columns depend on the cells (``lines``'
        default x, the swept key that varies in each panel)."""
        return [(rows, self.positions())]

    def cell_filter(self) -> dict[str, Any]:
        """The ``where`` selecting the cells drawn (validated to match a run, like a claim's)."""
        return {}

    def run_problems(self, runs: list) -> list[str]:
        """Reasons the kind cannot draw these runs ('field: reason'), checked before training."""
        return []


def split_columns(v: Any) -> Any:
    """'a,b' -> ['a', 'b'] (the short form of a list of columns)."""
    if isinstance(v, str):
        return [c.strip() for c in v.split(",") if c.strip()]
    return v


def _named_once(columns: list[str]) -> list[str]:
    """``columns`` if none is named twice: a curves figure's `series` of 3,000 copies of
    val.acc drew each over the others, 95 s of `plot`, and two copies a line hidden under its
    copy, without a word."""
    twice = repeated(columns)
    if twice is not None:
        raise ValueError(f"{twice!r} is named more than once")
    return columns


# ["a", "b"] or "a,b", each once
Columns = Annotated[list[str], BeforeValidator(split_columns), AfterValidator(_named_once)]
Distinct = Annotated[list[str], AfterValidator(_named_once)]  # names (of hues, ...), each once

# reference curves or lines of one figure (the shipped specs draw one): each is a line and a
# legend entry in every panel, and 2,000 of a `lines` figure took 24 s of `plot` (a 1 MiB spec
# holds 40,000); 20,000 hues of a `bands` figure, 5 s of `validate` naming no label
MAX_REFERENCES = 20

ACCURACY_YLIM = (-0.02, 1.02)


def _panels_by_value(col: Any) -> bool:
    """Whether the panels of ``col`` are config values (a list, a number written another way),
    not labels (``label`` / ``case:<i>``: text, taken as written)."""
    return isinstance(col, str) and bool(col) and col != LABEL and not is_case_ref(col)


def _as_list(text: Any) -> list | None:
    """The list a panel's name spells (``[0.9, 0.99]``, ``'[SSM, TF]'``), None if it is none.
    Read as the spec is (``parse_yaml``, YAML 1.2): yaml.safe_load read ``[1e-5, 0.9]`` as the
    text '1e-5' (the panel's list holds the number 1e-05, so the key matched no panel and its
    paper values were silently not shown) and ``[yes, 010]`` as [true, 8]; a list nested
    thousands deep, or an integer of thousands of digits, spells none (it raised)."""
    if not isinstance(text, str) or not text.lstrip().startswith("["):
        return None
    try:
        v = parse_yaml(text)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    return v if isinstance(v, list) else None


def list_panels(raw: Any) -> Any:
    """A figure's raw ``paper_panels`` with list-valued panels (``col: train.betas``) named as
    the tables and panel titles write them: a key that spells a list (``'[0.9,0.99]'``) is
    taken as ``encode_cell``'s text of it (``[0.9, 0.99]``, how a panel is looked up), and a
    target that spells one as the list itself (a YAML list is one too). A key could name no
    list-valued panel (it was compared as text with the list, and validate said the panel was
    no value of the column). Labels (``col: label`` / ``case:<i>``) are text, taken as they are."""
    if not isinstance(raw, dict) or not isinstance(raw.get("paper_panels"), dict):
        return raw
    col = raw.get("col", LABEL)
    if not _panels_by_value(col):
        return raw
    panels: dict[Any, Any] = {}
    spelt: dict[Any, Any] = {}  # the key as written, of each panel (by value, as validate
    for k, v in raw["paper_panels"].items():  # and ``mapped_panel`` match it)
        key, target = _as_list(k), _as_list(v)
        name = k if key is None else str(encode_cell(key))
        try:
            same = norm(panel_value(col, name))
            hash(same)
        except TypeError:  # a key that is no text: pydantic names it
            same = (name,)
        if same in spelt:  # '[0.9,0.99]' beside '[0.9, 0.99]', '1e-3' beside '0.001': one
            # of the two targets was taken without a word, the other mapping dropped
            raise ValueError(f"paper_panels: {spelt[same]!r} and {k!r} name one panel "
                             f"({encode_cell(panel_value(col, name))}); map it once")
        spelt[same] = k
        panels[name] = v if target is None else target
    # numbers equal but for rounding ('0.3333333333' beside '0.333333333333') name one panel
    # too, as validate and ``mapped_panel`` match a key (rel 1e-9): the first took it, the
    # other's target without a word; sorted, such a pair is side by side
    nums = sorted((x, k) for x, k in spelt.items() if isinstance(x, float))
    for (x, k1), (y, k2) in zip(nums, nums[1:]):
        if values_equal(x, y):
            raise ValueError(f"paper_panels: {k1!r} and {k2!r} name one panel (equal but for "
                             "rounding); map it once")
    return {**raw, "paper_panels": panels}


def mapped_panel(panels: dict[str, Any], col: str | None, value: Any) -> Any:
    """The panel whose paper values the panel ``value`` of ``col`` shows (``paper_panels``, its
    keys as ``list_panels`` writes them), ``value`` itself where none is mapped. A key is the
    panel as the tables write it, or on a column other than the label a number written another
    way (``'1e-3'`` or ``'0.0010'`` of lr 0.001, ``'8'`` of 8.0): validate matched those to
    the panel by value, and the panel then showed its own paper values, without a word."""
    text = str(encode_cell(value))
    if text in panels:
        return panels[text]
    if _panels_by_value(col) and norm(value) is not None:
        # by value, as validate matches it (``value_matches``: equal but for rounding, rel
        # 1e-9; a key '0.3333333333' of lr 0.333333333333 passed validate and mapped nothing)
        for name, target in panels.items():
            if value_matches(col, value, panel_value(col, name), listed=True):
                return target
    return value


def panel_value(col: str | None, name: str) -> Any:
    """The value of ``col`` a ``paper_panels`` key names (``list_panels``): a list where it
    spells one on a column other than the label."""
    listed = _as_list(name) if _panels_by_value(col) else None
    return name if listed is None else listed


def _ordered(v: Any) -> Any:
    if isinstance(v, tuple) and not v[0] < v[1]:
        raise ValueError(f"the lower end first: {list(v)} is no range")
    if isinstance(v, tuple) and not math.isfinite(v[1] - v[0]):  # matplotlib's ticks raised
        raise ValueError(f"{list(v)} is wider than a float holds")  # after training
    return v


# a panel's y range: [low, high]; null: matplotlib's own; "auto" (the default): the accuracy range
# when every value drawn is in [0, 1] and none is a loss, else matplotlib's own (``resolve_ylim``)
YLim = Annotated[tuple[float, float] | Literal["auto"] | None, AfterValidator(_ordered)]
YLIM_HELP = ("y range [low, high]; auto: the accuracy range when every value drawn is in [0, 1] "
             "and none is a loss, else matplotlib's own; null: matplotlib's own")
HUE_HELP = "column with a line per value (case:<i>: the i-th ' / '-part of the case label)"


def unread_metric(draws: str, default: str = DEFAULT_METRIC) -> Any:
    """The ``metric`` field of a kind that does not draw it (``metrics()`` leaves it out):
    described as such, for ``list-figures`` printed it as 'the results column drawn'."""
    return Field(default, description=f"not read by this kind, which draws {draws} (validate "
                 "refuses a metric given here)")


def resolve_ylim(ylim: Any, values: Any, metrics: str | list[str] = ()) -> tuple[float, float] | None:
    """The y range to set: ``ylim`` as given, or for "auto" the accuracy range (-0.02, 1.02) when
    every finite value drawn lies in [0, 1] and None (matplotlib's own) otherwise: a loss, an
    MSE or a ratio drawn on the fixed accuracy range left the panel empty or its bars cut off.
    ``values`` are every value the panel draws, the paper's too (from the cells' alone, a paper
    value of 1.5 beside losses below 1 was drawn off the axis without a word); ``metrics`` the
    metrics drawn: a loss (``is_loss``) is never on the accuracy range (MSEs of 1e-4 and 3e-4
    lay flat on its 0, one line)."""
    if not isinstance(ylim, str):
        return ylim
    if any(is_loss(m) for m in ([metrics] if isinstance(metrics, str) else metrics)):
        return None
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    return ACCURACY_YLIM if ((v >= 0) & (v <= 1)).all() else None


@dataclass
class FigureContext:
    """What a figure kind draws from: the profile's cells and, lazily, its run records."""

    spec: Any
    profile: str
    cells: pd.DataFrame  # every cell of the profile (report.aggregate)
    keys: list[str]  # the cell key columns
    out: Callable[[str, str], Path]  # (stem, ext) -> a file of this profile
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # analysis tables by name
    runs: list = field(default_factory=list)  # the profile's runs, with the --set overrides
    store: Any = None  # the spec's store (its warnings are said once drawn), None: open one
    rerun: str = ""  # the shell command that trains the profile's runs (with --out and --set)
    overrides: str = ""  # the runs' --set options (``overrides_text``), named in each title
    _paper_lookup: Any = field(default=None, repr=False, compare=False)

    @property
    def run_command(self) -> str:
        """The shell command that trains this profile's runs: the caller's (with its --out and
        --set: a figure not drawn under --set named a command that trains other runs), else
        ``ssmrepro run ID --profile P``."""
        return self.rerun or shlex.join(["ssmrepro", "run", self.spec.id, "--profile", self.profile])

    @property
    def table(self) -> pd.DataFrame:
        """Cells with at least one finished run."""
        return finished(self.cells)

    def paper_value(self, row: dict[str, Any], metric: str) -> float | None:
        """The paper's value for this cell (every key of the paper value's ``where`` matches)."""
        pv = self.paper_value_of(row, metric)
        return None if pv is None else pv.value

    def paper_value_of(self, row: dict[str, Any], metric: str) -> Any:
        """The spec's first paper value of ``metric`` for this cell, or None (looked up through
        an index: trying each paper value for each cell drawn was quadratic)."""
        if self._paper_lookup is None:
            self._paper_lookup = PaperValueLookup(self.spec.paper_values, listed_keys(self.cells))
        return self._paper_lookup.find(row, metric)

    def warn_once(self, message: str) -> None:
        """Warn ``message`` once per command (``util.first_time``): a title's warning was said
        once per figure drawing it (two figures of the spec's title said it twice), then once
        per profile drawn (`figures`: the smoke and the quick figures)."""
        if first_time(message):
            warnings.warn(message, stacklevel=3)

    def title(self, cfg: FigureConfig, seeds: str | None = None) -> str:
        """The figure's title, its ``{seeds}`` drawn as ``seeds`` (the words of how the figure
        draws seeds, 'best of 3 seeds'), by default as its cells combine them for the metric
        drawn (``aggregation``). A title naming seeds in its own words instead is drawn as
        ``seeds_said`` says, with a warning."""
        # with the --set options: a tagged figure said `profile smoke` alone, of other settings
        sets = self.overrides if len(self.overrides) <= 200 else self.overrides[:199] + "…"
        sets = sets.replace("$", r"\$")  # a value's `$` drawn as written, never as TeX math
        head = cfg.title or self.spec.title
        seeds = seeds if seeds is not None else cfg.drawn_seeds(self)
        if seeds is None and (has_seeds_placeholder(head) or SEED_WORDS.search(head)):
            # of the metric drawn (a phase's loss panels under `reduce: max` were titled
            # 'best of seeds', of test.acc)
            metric, drawn = getattr(cfg, "metric", None), cfg.metrics()
            metric = (metric if isinstance(metric, str) and (metric in drawn or not drawn)
                      else drawn[0] if drawn else "")
            seeds = self.aggregation(metric)
        if has_seeds_placeholder(head):
            head = fill_seeds(head, seeds)
        else:
            head, warning = seeds_said(head, seeds)
            if warning:
                self.warn_once(f"{self.spec.id}: {warning}")
            head = fill_seeds(head, "")  # ({{word}} as {word})
        return (f"{head} [{self.spec.id}, profile {self.profile}"
                f"{', ' + sets if sets else ''}]")

    def fitted_title(self, cfg: FigureConfig, width_in: float, fontsize: float = 10) -> str:
        """``title`` wrapped to ``width_in`` inches at ``fontsize`` points (``wrap_text``), so
        a long title is never cut at the figure's edges."""
        return wrap_text(self.title(cfg), width_in, fontsize)

    def seed_range(self, ok_only: bool = False) -> tuple[int, int]:
        """The fewest and most seeds a drawn cell has finished (``ok_only``: ended ok, not
        diverged); (1, 1) where the cells do not say."""
        cells = self.cells
        if {"n_expected", N_OK, N_DIVERGED} <= set(cells.columns):
            cells = cells[cells["n_expected"] > 0]
            n = cells[N_OK] + (0 if ok_only else cells[N_DIVERGED])
        else:
            n = cells["n_expected"] if "n_expected" in cells else pd.Series([1])
        n = n[n > 0]
        return (int(n.min()), int(n.max())) if len(n) else (1, 1)

    def aggregation(self, metric: str = "") -> str:
        """How a cell's value combines seeds, true for this profile: 'mean of 3 seeds', ...;
        the seeds that finished in the cells drawn ('mean of 2–3 seeds' where one seed of a
        cell is not trained yet: 'mean of 3 seeds' labelled a line of 2 of its 3 seeds).
        ``metric`` a loss: ``max`` is its worst seed and ``min`` its best (a `reduce: max` loss
        was labelled 'best of 3 seeds', the highest loss). An analytic spec's rows are computed,
        not trained: 'computed from theory' (yu2025-fig5's axes read 'ratio_w (one seed)', a
        trained result of one seed to the reader)."""
        if getattr(self.spec, "analytic", None) is not None:
            return "computed from theory"
        lo, hi = self.seed_range()
        if hi <= 1:
            return "one seed"
        best, worst = ("worst", "best") if is_loss(metric) else ("best", "worst")
        word = {"max": best, "min": worst}.get(self.spec.aggregate.reduce,
                                               self.spec.aggregate.reduce)
        return f"{word} of {hi} seeds" if lo == hi else f"{word} of {lo}–{hi} seeds"


# a title's own words for how a cell combines seeds, where it has no `{seeds}`: the plain
# form, '<mean|best|...> of|over|across [the] [count] seeds', that `seeds_said` draws as the
# profile does, and any other naming of seeds ('average over 5 random seeds', 'mean ± std over
# 5 seeds', '3 seeds'), which it leaves as written; each with a warning
_SEED_COUNT = (r"(?:[0-9]+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
               r"twenty|thirty|fifty|hundred)")
_SEED_AGG = r"(?:mean|average|averaged|median|best|worst|max|min)"
_SEEDS_COUNTED = rf"{_SEED_COUNT}(?:\s*(?:[–-]|to)\s*{_SEED_COUNT})?"
PLAIN_SEED_WORDS = re.compile(rf"\b{_SEED_AGG}\s+(?:of|over|across)\s+(?:the\s+)?"
                              rf"(?:{_SEEDS_COUNTED}\s+seeds?|seeds)\b", re.IGNORECASE)
# 'seed(s)' naming the noun after it, not counted: the singular after a count of more than one
# ('16 seed tokens': 16 tokens), the plural before another plural noun ('16 seeds tokens');
# the words that may follow a count of seeds and end in s are not such nouns ('3 seeds across')
_MODIFIER_AFTER = (r"[\s-]+(?!(?:is|was|has|as|across|plus|versus|vs|its|this|thus|us|always|"
                   r"unless|less|besides|towards|afterwards)\b)[^\W\d_]*[^\W\d_s]s\b")
# (a count with up to three words before 'seeds', '5 distinct random seeds', and seeds named
# by number, 'seeds 0-4', 'seed 0', were missed: drawn as written without a word; a count is
# not a number ending a name, 'Mamba-2 vs Mamba seeds', 'S4.2 ...': a warning for no seeds)
SEED_WORDS = re.compile(rf"{PLAIN_SEED_WORDS.pattern}"
                        rf"|\b(?:{_SEED_AGG}|std|sd)\b(?:\W+\w+){{0,3}}?\W+seeds\b"
                        rf"|(?<![\w.-])(?:(?:1|one|a\s+single)(?:\s+[^\W\d_]+){{0,3}}\s+seed"
                        rf"|{_SEEDS_COUNTED}(?:\s+[^\W\d_]+){{0,3}}\s+seeds)\b"
                        rf"(?!{_MODIFIER_AFTER})"
                        rf"|\bseeds?\s*[:=#]?\s*[0-9]+(?:\s*(?:[–-]|to|,|and)\s*[0-9]+)*",
                        re.IGNORECASE)


def seeds_said(title: str, words: str | None = None) -> tuple[str, str]:
    """(``title`` as drawn, a warning or '') for a title without ``{seeds}`` that names seeds
    in its own words: the warning says to write ``{seeds}``; with ``words`` (how the figure
    draws seeds), the words are drawn in their place (a capital kept) only where they are
    unambiguous: the title's one naming of seeds, of the plain form, followed by no number
    ('mean of 5 seeds' above bars of one seed: 'one seed'). Any other title is drawn as
    written: a rewriter of every phrasing drew wrong counts ('mean of 2 seeds 2 and 4 layers'
    lost '2 and 4') and still missed some ('average over 5 random seeds')."""
    if seeds_in_math(title):  # TeX's braces: not filled (a `$...{seeds}...$` drew 'seeds')
        return title, (f"title {short_name(title)!r} holds {SEEDS_PLACEHOLDER} inside TeX math "
                       "($...$), where braces are TeX's: drawn as written, not filled; put "
                       f"{SEEDS_PLACEHOLDER} outside the $ signs to have the figure's count "
                       "filled in")
    found = list(SEED_WORDS.finditer(title))
    if not found:
        return title, ""
    m = found[0]

    def said(drawn: str) -> str:
        return (f"title {short_name(title)!r} names seeds in its own words "
                f"({', '.join(repr(f.group(0)) for f in found[:3])}), drawn as {drawn}; write "
                f"{SEEDS_PLACEHOLDER} to have the figure's count filled in")
    if (len(found) > 1 or PLAIN_SEED_WORDS.fullmatch(m.group(0)) is None
            or re.match(r"\s*[\[{(]?\s*[0-9]", title[m.end():])):
        return title, said("written")
    if words is None:
        return title, said("the figure draws seeds")
    drawn = words[:1].upper() + words[1:] if m.group(0)[:1].isupper() else words
    return title[:m.start()] + drawn + title[m.end():], said(repr(drawn))


def seed_title_warnings(spec: Any) -> list[str]:
    """'file: key: ...' warnings of the spec's titles that name seeds in their own words, not
    as ``{seeds}`` (``seeds_said``): the spec's title where a figure draws it, each figure's
    and each of its panels' titles; `validate` prints them."""
    path = spec.path or spec.id
    titles = []
    for key, raw in spec.figure_configs:
        if not isinstance(raw, dict):
            continue
        own = raw.get("title")
        titles.append((f"{key}.title", own) if own else ("title", spec.title))
        panels = raw.get("panels")
        for i, p in enumerate(panels if isinstance(panels, list) else []):
            if isinstance(p, dict):
                titles.append((f"{key}.panels.{i}.title", p.get("title")))
    out = []
    for key, text in dict(titles).items():
        if isinstance(text, str) and not has_seeds_placeholder(text):
            warning = seeds_said(text)[1]
            if warning:
                out.append(f"{path}: {key}: {warning}")
    return out


def wrap_text(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken at spaces (never inside ``$...$`` math) so that no line is wider than
    ``width_in`` inches at ``fontsize`` points, measured with matplotlib's font metrics (a
    count of characters at an average glyph width let titles of wide letters, or centred over
    an axes narrower than the figure, run off the image)."""
    from matplotlib import cbook
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    prop, limit = FontProperties(size=fontsize), 0.95 * width_in * 72  # points

    def width(line: str) -> float:
        try:
            return text_to_path.get_text_width_height_descent(
                line, prop, ismath=cbook.is_math_text(line))[0]
        except (ValueError, RuntimeError):  # (validated drawable; never wider than unknown)
            return len(line) * fontsize * 0.6

    if "\n" in text:  # each given line on its own
        return "\n".join(wrap_text(part, width_in, fontsize) for part in text.split("\n"))
    words, word, math_mode = [], "", False  # split at spaces outside $...$
    for ch in text:
        if ch == "$" and not word.endswith("\\"):
            math_mode = not math_mode
        if ch == " " and not math_mode:
            words.append(word)
            word = ""
        else:
            word += ch
    words.append(word)

    def pieces(w: str) -> list[str]:  # a word wider than a line (a 290-letter word with no
        # space ran off both edges of the image) is broken between letters; math stays whole
        if "$" in w or width(w) <= limit:
            return [w]
        out = [""]
        for ch in w:
            if out[-1] and width(out[-1] + ch) > limit:
                out.append("")
            out[-1] += ch
        return out

    lines: list[str] = []
    for w in [p for word in words for p in pieces(word)]:
        if lines and lines[-1] and width(f"{lines[-1]} {w}") <= limit:
            lines[-1] = f"{lines[-1]} {w}"
        else:
            lines.append(w)
    return "\n".join(lines) if lines else text


def gap_note(values: Any) -> str:
    """The legend's word for a line's cells without a value (diverged, not measured), which
    matplotlib leaves out as gaps: ' (no value: not drawn)' when none has one, ' (k of n cells
    without a value: gaps)', '' when every cell has one. A hue whose every cell diverged was a
    legend entry with nothing drawn, and a point left out was a gap, without a word."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").astype(float)
    gaps = int(v.isna().sum())
    return ("" if not gaps else " (no value: not drawn)" if gaps == len(v)
            else f" ({gaps} of {len(v)} cells without a value: gaps)")


def same_lines(drawn: dict[str, tuple[Any, Any]]) -> dict[str, str]:
    """hue -> the first hue before it (in ``drawn``'s order) whose line has the same points,
    for the lines of one panel (``drawn``: hue -> (xs, ys) as plotted). A later line drawn over
    an identical earlier one hid it while the legend listed both; the kinds draw it dashed with
    hollow markers (``SAME_STYLE``) and its legend entry says whose values it has. Values equal
    but for rounding (relative 1e-9) are the same; a line with no value at all draws nothing
    and is left to ``gap_note``. A later line that has every value an earlier one has, and
    values where that one has none (a cell of it diverged: [1, NaN, 1] before [1, 1, 1]), hid
    it as wholly: it is '<the earlier hue> where it has one'."""
    out: dict[str, str] = {}
    seen: list[tuple[str, list, np.ndarray]] = []
    for hue, (xs, ys) in drawn.items():
        x = pd.Series(xs).tolist()
        y = pd.to_numeric(pd.Series(ys), errors="coerce").to_numpy(float)
        if not np.isfinite(y).any():
            continue
        like = [(first, fy) for first, fx, fy in seen if fx == x and len(fy) == len(y)]
        first = next((f for f, fy in like if np.allclose(fy, y, rtol=1e-9, atol=0.0,
                                                         equal_nan=True)), None)
        if first is not None:
            out[hue] = first
            continue
        under = next((f for f, fy in like if np.isfinite(y[np.isfinite(fy)]).all()
                      and np.allclose(fy[np.isfinite(fy)], y[np.isfinite(fy)], rtol=1e-9,
                                      atol=0.0)), None)
        if under is not None:
            out[hue] = f"{under} where it has one"
        seen.append((hue, x, y))
    return out


SAME_STYLE = {"ls": "--", "mfc": "none"}  # a line over an identical earlier one (same_lines)


def same_note(first: str | None) -> str:
    """The legend's word for a line drawn over another hue's identical one (``same_lines``)."""
    return f" (same values as {first}: dashed)" if first is not None else ""


@dataclass(frozen=True)
class FigureKind:
    name: str
    Config: type[FigureConfig]
    fn: Callable[[FigureContext, Any, Path], bool]
    summary: str


FIGURE_KINDS: dict[str, FigureKind] = {}


MAX_PIXELS = 1 << 26  # 67 megapixels, e.g. 8,192 x 8,192: far above any paper figure
MAX_SIDE = 1 << 15  # pixels of one side (the PNG writer itself stops at 2**16)


class NotDrawn(Exception):
    """A figure kind cannot draw this figure (its message says why and what rebuilds it): the
    outputs stage prints '<spec>: <figure> not drawn: <why>' and goes on with the others.
    ``stale``: no finished cell of the profile is the figure's, so an old image there shows
    runs that are not the profile's (the outputs stage removes it, as when a kind draws
    nothing), or a text: why the old image is not the figure's; otherwise (no saved weights to
    draw from) the old image is left."""

    def __init__(self, message: str, stale: bool | str = False):
        super().__init__(message)
        self.stale = stale


class FigureTooLarge(ValueError):
    """A figure whose image would be larger than ``MAX_PIXELS`` or ``MAX_SIDE``: drawing it
    allocated gigabytes (or raised deep inside matplotlib)."""


def plain_log_x(ax) -> None:
    """Label a log x axis with plain numbers (200, 500, 1,000, 12,000): matplotlib's default
    minor labels (3×10², 1.35×10⁴, ...) overlap when the range spans less than a few decades. Call
    after the data is drawn. Within one decade: about five evenly spaced round ticks."""
    from matplotlib import ticker

    lo, hi = ax.get_xlim()
    plain = ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    if lo > 0 and hi / lo < 10:
        ax.xaxis.set_major_locator(ticker.MaxNLocator(5))
    else:
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))


def _check_size(path: Path, inches, dpi: int) -> None:
    """``FigureTooLarge`` when a figure of ``inches`` (width, height) at ``dpi`` would be larger
    than ``MAX_PIXELS`` or ``MAX_SIDE``."""
    w, h = (float(v) * dpi for v in inches)
    if w * h > MAX_PIXELS or max(w, h) > MAX_SIDE:
        raise FigureTooLarge(
            f"{path}: the figure would be {w:,.0f} x {h:,.0f} pixels, more than "
            f"{MAX_PIXELS:,} ({MAX_SIDE:,} a side); draw fewer panels or cells per figure "
            "(a `where`, more figures) or smaller panels")


def subplots(path: Path, dpi: int, *args, **kw):
    """``plt.subplots(*args, **kw)`` for the figure ``save_png`` writes to ``path`` at ``dpi``,
    its size (``figsize``) checked first: ``FigureTooLarge`` before any panel is made. Checked
    only when saved, 2,000 panels of a phase figure (its ``panels`` list) took 21 s and 840 MB
    to make and fill before the image was refused; ten times as many, the machine's memory."""
    import matplotlib.pyplot as plt

    _check_size(path, kw["figsize"], dpi)
    return plt.subplots(*args, **kw)


def _fit_legends(fig) -> None:
    """Legends wider than their panel (a figure's legend: the figure) have their entries wrapped
    to it (``wrap_text``): a 200-letter case label ran off the image with the legend's other
    entries. A legend that fits is left as it is."""
    renderer = getattr(fig.canvas, "get_renderer", None)
    if renderer is None:
        return
    renderer = renderer()
    legends = [(leg, fig.bbox) for leg in fig.legends]
    legends += [(ax.get_legend(), ax.get_window_extent(renderer)) for ax in fig.axes
                if ax.get_legend() is not None]
    changed = False
    for leg, room in legends:
        box, texts = leg.get_window_extent(renderer), leg.get_texts()
        if box.width <= room.width or not texts:
            continue
        widest = max(t.get_window_extent(renderer).width for t in texts)
        width_in = max(0.5, (room.width - (box.width - widest)) / fig.dpi)  # less the handles
        for t in texts:
            text = t.get_text()
            wrapped = wrap_text(text, width_in, t.get_fontsize())
            if wrapped != text:
                t.set_text(wrapped)
                changed = True
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    engine = fig.get_layout_engine()  # tight_layout() once leaves a place holder
    if changed and (engine is None or isinstance(engine, PlaceHolderLayoutEngine)):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig.tight_layout()


def tight_layout(fig, **kw) -> None:
    """``fig.tight_layout(**kw)`` without matplotlib's 'Tight layout not applied' warning: it
    comes from a legend entry wider than its panel (a 200-character case label), which
    ``save_png`` wraps to the panel before laying the figure out again; the warning on stderr
    spoke of a layout the saved figure does not have."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Tight layout not applied")
        fig.tight_layout(**kw)


def save_png(fig, path: Path, dpi: int) -> None:
    """Write ``fig`` to ``path`` as PNG atomically (temp file + rename: a killed ``plot`` leaves
    the old figure or the new one, never a torn file) and close it. ``FigureTooLarge`` when its
    image would be larger than ``MAX_PIXELS`` (so many panels or cells, or a panel size given in
    the spec): nothing is allocated or written. Figures whose size grows with their panels or
    cells are made by ``subplots``, which checks it before drawing."""
    import matplotlib.pyplot as plt

    from ..util import atomic_write_stream

    try:
        _check_size(path, fig.get_size_inches(), dpi)
        _fit_legends(fig)
        atomic_write_stream(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
    finally:
        plt.close(fig)


def figure_kind(name: str, Config: type[FigureConfig]):
    """Register ``fn(ctx, cfg, path) -> bool`` as figure kind ``name`` with its config class."""

    def deco(fn):
        check_registration("figure kind", name, Config, FigureConfig, "kind", FIGURE_KINDS)
        FIGURE_KINDS[name] = FigureKind(name, Config, fn, doc_summary(docstring(fn)))
        return fn

    return deco


def parse_figure(raw: dict[str, Any]) -> FigureConfig:
    """The typed config of one figure entry (KeyError: unknown kind; ValidationError)."""
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in FIGURE_KINDS:
        # (a kind that is no text, or none given, was a TypeError traceback in short_name; a
        # name's escapes were escaped twice by a repr: 'bars\\n' for 'bars' and a line break)
        shown = f"'{short_name(kind)}'" if isinstance(kind, str) else short_name(repr(kind))
        raise KeyError(f"{'no figure kind' if kind is None else 'unknown figure kind ' + shown} "
                       f"(known: {', '.join(FIGURE_KINDS)}; "
                       "their fields: ssmrepro list-figures)")
    return FIGURE_KINDS[kind].Config(**raw)
