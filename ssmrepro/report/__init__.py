"""Stage 5 (report): aggregate runs over seeds, judge the claims, compare with the paper.

``aggregate`` (cells.py) turns the run table into one row per cell of the profile; ``verify``
runs every claim through its registered check (checks.py) and compares the paper's values;
``markdown`` writes report.md, which opens with the verdict counts. Nothing here draws figures
(that is ``plots``, the stage above).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from ..spec import shown_title
from ..util import encode_cell, pairs_text
from .cells import (
    CellIndex,
    aggregate,
    cell_keys,
    early_stopped_at_start,
    expected,
    finished,
    fmt_beside,
    fmt_num,
    fmt_value,
    fmt_written,
    select,
    values_equal,
    with_config,
)
from .checks import (
    CHECKS,
    CLAIM_VERDICTS,
    DEFAULT_CHECK,
    CheckContext,
    CheckKind,
    Verdict,
    check_kind,
    constant_value,
    labels_of_no_profile,
    metric_names,
    nearer_end,
    never_defined,
    parse_claim,
    run_check,
    seed_spreads,
    unmeasured_sets,
    within,
)
from .columns import (
    COMPLETE,
    DIVERGED,
    FINISHED,
    LABEL,
    N_DIVERGED,
    N_EARLY_STOP_0,
    N_EXPECTED,
    N_OK,
    N_TIME_LIMIT,
    OK,
    RUN_ID,
    SELECT_N,
    STATUS,
    STOP_REASON,
    TIME_LIMIT,
)

_eq = values_equal  # older name, kept for callers outside this package

__all__ = ["CHECKS", "CLAIM_VERDICTS", "DEFAULT_CHECK", "CheckContext", "CheckKind", "Verdict",
           "aggregate", "cell_keys", "check_kind", "expected", "finished", "markdown",
           "metric_names", "never_defined", "constant_value", "fmt_beside", "fmt_value",
           "paper_value_tally",
           "parse_claim", "select",
           "values_equal", "verdict_counts", "verify", "with_config"]


def _paper_value(pv, cells: pd.DataFrame, index: CellIndex | None = None) -> Verdict:
    index = index or CellIndex(cells)
    sel = expected(index.select(pv.where)) if not cells.empty else cells
    where = pairs_text(pv.where.items())
    text = f"{where}: {pv.metric}"
    done = sel[(sel[N_OK] + sel[N_DIVERGED]) > 0] if len(sel) else sel
    if len(sel) and done.empty:  # a cell of the profile, none of its runs finished yet: not
        # finished (it was counted among the 'cells not run in this profile'; so was one of a
        # metric no finished run has given a column yet, n_params before any run finished)
        return Verdict("paper_value", f"{text} (tol {pv.tol})", "unfinished", math.nan,
                       pv.value, detail=f"0 of {int(sel[N_EXPECTED].sum())} runs finished")
    if done.empty or pv.metric not in done:
        return Verdict("paper_value", text, "missing", None, pv.value)
    if COMPLETE in sel and not sel[COMPLETE].astype(bool).all():
        # like a claim, not judged until every run of the cell finished: the mean of the seeds
        # so far was reported as a 'match' while the claim on the same cell was MISSING
        n_fin = int((sel[N_OK] + sel[N_DIVERGED]).sum())
        n_exp = int(sel[N_EXPECTED].sum())
        detail = f"{n_fin} of {n_exp} runs finished"
        if n_fin >= n_exp and SELECT_N in sel:  # the kept candidate's runs are all in, not
            # every candidate's (`aggregate.select`): it read '3 of 3 runs finished' beside
            # 'unfinished'
            detail = (f"{n_fin} of {n_exp} runs of the candidate kept so far finished; the "
                      "other candidates' runs not all")
        return Verdict("paper_value", f"{text} (tol {pv.tol})", "unfinished",
                       float(done[pv.metric].astype(float).mean()), pv.value, detail=detail)
    vals = done[pv.metric].astype(float)
    if seed_spreads(pv.metric) and (vals.isna() & (done[N_OK] < 2)
                                    & (done[N_DIVERGED] == 0)).any():
        # a spread over the seeds of one seed: nothing to compare (a claim on it is
        # untestable); it 'differed', 'not measured', counted among the values compared
        return Verdict("paper_value", text, "missing", None, pv.value,
                       detail="one finished seed: no spread over seeds")
    if vals.isna().any():  # a finished cell without a value (diverged) does not match
        # nor does one where no run diverged (the metric was not measured: a column missing
        # from a committed table, an analysis of weights that are gone): it read 'diverged'
        nan = done[vals.isna()]
        div = N_DIVERGED not in nan or bool((nan[N_DIVERGED].astype(float) > 0).any())
        return Verdict("paper_value", f"{text} (tol {pv.tol})", "differs", math.nan, pv.value,
                       detail="diverged" if div else "not measured")
    ours = float(vals.mean())
    verdict = "match" if within(ours, pv.value, pv.tol) else "differs"
    # printed on its own side of the nearer end of paper ± tol (``fmt_beside``)
    bound = nearer_end(ours, pv.value, pv.tol)
    return Verdict("paper_value", f"{text} (tol {pv.tol})", verdict, ours, pv.value,
                   bound=bound)


def verify(spec, cells: pd.DataFrame, keys: list[str] | None = None,
           eval_sets: set[str] | None = None) -> list[Verdict]:
    """Paper values (match / differs / missing) and one or more verdicts per claim.

    A spec whose ``claims:`` list is empty gets one UNTESTED verdict for its ``claim:`` text.
    ``eval_sets``: the named evaluation sets of the profile's runs (a claim on another one is
    MISSING there; None: not known).
    """
    index = CellIndex(cells)  # each paper value's cell through one index of the cells
    out = []
    for pv in spec.paper_values:
        absent = unmeasured_sets([pv.metric], eval_sets)
        # not compared (it read 'not measured | differs', a paper value our runs missed)
        where = pairs_text(pv.where.items())
        out.append(Verdict("paper_value", f"{where}: {pv.metric}", "missing", None, pv.value,
                           detail=f"no evaluation set {absent[0]!r} in this profile")
                   if absent else _paper_value(pv, cells, index))
        # an any-of label that no profile has (`label: [S6, S5]` after S5 left the spec): the
        # value was compared with S6's cells alone without a word, as a claim was judged
        gone = labels_of_no_profile(spec, [pv.where]) if out[-1].verdict != "missing" else []
        if gone:
            out[-1].detail = "; ".join(x for x in (out[-1].detail, (
                f"label {', '.join(gone)} (of its any-of list) is a case label of no profile of "
                "the spec: compared without it")) if x)
    ctx = CheckContext(spec, cells, keys if keys is not None else _keys_of(cells),
                       eval_sets=eval_sets)
    for raw in spec.claims:
        out += run_check(ctx, parse_claim(raw))
    if not spec.claims:
        out.append(Verdict("claim", one_line(spec.claim), "UNTESTED", None,
                           detail="the spec has no checkable claim"))
    return out


def _keys_of(cells: pd.DataFrame) -> list[str]:
    if cells.empty or N_EXPECTED not in cells:
        return list(cells.columns)
    return list(cells.columns[: list(cells.columns).index(N_EXPECTED)])


def verdict_counts(verdicts: list[Verdict]) -> str:
    """'**Verdicts: 3 PASS, 1 FAIL, 0 MISSING, 0 UNTESTED**'."""
    claims = [v.verdict for v in verdicts if v.kind == "claim"]
    return "**Verdicts: " + ", ".join(f"{claims.count(k)} {k}" for k in CLAIM_VERDICTS) + "**"


def paper_value_tally(pvs) -> str:
    """'27 of 45 compared within tolerance; 228 cells not run in this profile'."""
    n_match = sum(v.verdict == "match" for v in pvs)
    n_missing = sum(v.verdict == "missing" for v in pvs)
    n_open = sum(v.verdict == "unfinished" for v in pvs)
    # a missing value with a reason was run but cannot be compared here (no evaluation set of
    # its metric in this profile, one seed of a spread): it was counted among the 'cells not
    # run in this profile', a cell the report's own table shows trained
    why: dict[str, int] = {}
    for v in pvs:
        if v.verdict == "missing" and v.detail:
            why[v.detail] = why.get(v.detail, 0) + 1
    n_unrun = n_missing - sum(why.values())
    out = f"{n_match} of {len(pvs) - n_missing - n_open} compared within tolerance"
    out += f"; {n_open} cells not finished, not compared" if n_open else ""
    out += "".join(f"; {n} not compared: {d}" for d, n in why.items())
    return out + (f"; {n_unrun} cells not run in this profile" if n_unrun else "")


def _fmt(x: Any, key: bool = False) -> str:
    if x is None or x is pd.NA:  # a key the cell's runs do not have (a Transformer's
        # conv_residual beside Mamba's): '—' as for a number column's NaN; it was 'None', read
        # as a value beside a real one ('none', model.pos) in the same table
        return "—"
    if isinstance(x, (bool,)):
        return "yes" if x else "no"
    if isinstance(x, (list, tuple, dict)):  # as every CSV writes it: ["SSM"], not ['SSM']
        return encode_cell(x)
    if key and isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)):
        return fmt_num(x)  # a cell's coordinate is its name: a learning rate 0.00316 read 0.003
    if isinstance(x, float):
        return fmt_value(x)
    return str(x)


def one_line(text: object) -> str:
    """``text`` with its line breaks and runs of spaces as one space: a title, claim, claim
    text or note is one line of report.md, where a line of its own reads as a heading, a
    verdict ('- **PASS** ...') or the counts ('**Verdicts: 9 PASS, ...**')."""
    return " ".join(str(text).split())


def md_cell(text: object) -> str:
    """Text safe inside a markdown table cell: a label 'a|b' split its row into one cell more
    than the header, shifting every number after it into the wrong column. A backslash, ``*``,
    a backquote, ``<`` and ``~`` are escaped too, and the ``](`` of a link: a label 'a\\|b' was
    shown 'a|b' (its backslash read as the pipe's escape), '*x*' in italics, '`x`' as code,
    '<x>' not at all (an HTML tag), '[x](y)' as a link; and ``&``: a label 'a&lt;b' was shown
    'a<b' (an HTML character reference)."""
    text = str(text).replace("\\", "\\\\")
    for ch in "|*`<~&":
        text = text.replace(ch, "\\" + ch)
    return text.replace("](", "]\\(").replace("\r", " ").replace("\n", " ")


_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")  # a tag, a comment or a directive: '<=' is none
_ENTITY = re.compile(r"&(?=#?\w+;)")  # '&lt;' read as '<'; 'a & b' is no entity
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # 'x_proj' is none


def md_text(text: object) -> str:
    """A spec's own prose (title, claim, claim text, note) as one line of report.md, read as
    written: a claim 'x <y and z> w' lost '<y and z>' (an HTML tag), a note on the task's
    '<null> positions' lost '<null>', '*a* b' and '_a_' were set in italics, '`x`' as code, and
    a '#', '>', '+', '-' or 'N.' that begins it made a heading or a list inside its list item.
    Only what markdown would read so is escaped: '<=', '|V|', 'x_proj' and 'a & b' stay as they
    are (prose is no table row, and an underscore inside a word starts no emphasis), so the raw
    file reads as written too."""
    text = one_line(text).replace("\\", "\\\\")
    for ch in "*`~":
        text = text.replace(ch, "\\" + ch)
    text = _HTML_START.sub(r"\\<", text)
    text = _ENTITY.sub(r"\\&", text)
    text = _EMPHASIS_UNDERSCORE.sub(r"\\_", text).replace("](", "]\\(")
    return re.sub(r"^(\d+)(?=[.)])", r"\1\\", re.sub(r"^([#>+\-=])", r"\\\1", text))


def md_table(df: pd.DataFrame, keys: tuple[str, ...] | list[str] = ()) -> str:
    """A GitHub markdown table (floats with 3 decimals, ``fmt_value``); the columns ``keys``
    (a cell's coordinates) as given (``fmt_num``): 0.00316 and 0.0001 are not 0.003 and 0.000."""
    cols = list(df.columns)
    exact = [c in keys for c in cols]
    out = ["| " + " | ".join(md_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        out.append("| " + " | ".join(md_cell(_fmt(x, k)) for x, k in zip(row, exact)) + " |")
    return "\n".join(out)


def _ours(v: Verdict) -> str:
    return "—" if v.ours is None or (isinstance(v.ours, float) and math.isnan(v.ours)) \
        else fmt_beside(v.ours, v.bound)


def _sum(cells: pd.DataFrame, col: str) -> int:
    return int(pd.to_numeric(cells[col], errors="coerce").fillna(0).sum()) if col in cells else 0


def run_counts(cells: pd.DataFrame, n_runs: int) -> tuple[int, int, int, int, int]:
    """(runs expected, finished, diverged, finished at their time limit, early-stopped at step
    0) of a profile's cells; ``n_runs`` (the rows of its table) where the cells do not count
    them. Where two labels share a run, ``shared_run_counts`` counts the same, each run once."""
    n_exp = int(cells[N_EXPECTED].sum()) if N_EXPECTED in cells else n_runs
    n_ok = int(cells[N_OK].sum()) if N_OK in cells else n_runs
    n_div = _sum(cells, N_DIVERGED)
    return n_exp, n_ok + n_div, n_div, _sum(cells, N_TIME_LIMIT), _sum(cells, N_EARLY_STOP_0)


def shared_run_counts(df: pd.DataFrame, runs: list) -> tuple[int, int, int, int, int] | None:
    """``run_counts`` counting each run id once, where two labels share a run (a row under
    each: the cells counted it twice, '4 of 6 runs finished' beside `run`'s '2 of 4 runs not
    trained yet', and its time limit and its early stop at step 0 twice); None where no run is
    shared (the cells count them) or the table has no run ids."""
    ids = {r.run_id for r in runs}
    if len(ids) == len(runs) or RUN_ID not in df or STATUS not in df:
        return None
    done = df[df[STATUS].isin(FINISHED) & df[RUN_ID].astype(str).isin(ids)]
    done = done.drop_duplicates(RUN_ID)
    ok = done[done[STATUS] == OK]
    cut = int((ok[STOP_REASON] == TIME_LIMIT).sum()) if STOP_REASON in ok else 0
    return (len(ids), len(done), int((done[STATUS] == DIVERGED).sum()), cut,
            early_stopped_at_start(ok))


def _seed_counts(cells: pd.DataFrame) -> tuple[int, int] | None:
    """(fewest, most) runs expected of a cell of ``cells`` (its seeds), None without them."""
    if N_EXPECTED not in cells or cells.empty:
        return None
    n = pd.to_numeric(cells[N_EXPECTED], errors="coerce").dropna()
    return (int(n.min()), int(n.max())) if len(n) else None


def markdown(spec, profile: str, cells: pd.DataFrame, verdicts: list[Verdict], n_runs: int,
             counted: pd.DataFrame | None = None,
             counts: tuple[int, int, int, int, int] | None = None, overrides: str = "") -> str:
    """report.md: verdict counts first, then claims, paper values beside ours, our numbers.
    ``counted``: the cells whose runs are counted, where ``cells`` keeps one candidate of each
    group (``aggregate.select``); ``counts``: ``run_counts`` where ``shared_run_counts`` gives
    them; ``overrides``: the ``--set`` options of the
    runs (``overrides_text``), named beside the profile (a tagged report read `Profile smoke`
    alone, its numbers of other settings under the profile's name)."""
    n_exp, n_done, n_div, n_cut, n_at0 = counts or run_counts(
        cells if counted is None else counted, n_runs)
    n_ok = n_done - n_div
    # mid-line: md_text's escape of a line-starting `-` (of `--set`) is not wanted
    who = f"Profile `{profile}`" + (f" with {md_text(overrides)[1:]}" if overrides else "")
    if spec.analytic is not None:
        a = spec.analytic
        how = (f"{who}: analytic — table `{a.table}` computed from theory "
               f"(ssmrepro.theory), {len(cells)} rows, no training.")
    else:
        how = (f"{who}: {n_exp} runs expected, {n_ok + n_div} finished "
               f"({n_div} diverged); seeds aggregated with `{spec.aggregate.reduce}`.")
        if n_cut:  # they read as finished: numbers of models trained less than asked, silently
            how += (f" {n_cut} of the finished runs stopped at their time limit "
                    "(`train.time_limit_s`) before their step budget: their numbers are of "
                    "models trained less than the spec asks (column n_time_limit).")
        if n_at0:  # only a stop_step.mean of 0 showed it
            how += (f" {n_at0} of the finished runs met their early stop (`train.early_stop`) "
                    "at step 0, before any training step: their numbers are of the untrained "
                    "model (column n_early_stop_0).")
    lines = [
        # one line (a line break in the title could make a line that reads like the counts)
        f"# {spec.id}{f' ({spec.alias})' if spec.alias else ''} — "
        f"{md_text(shown_title(spec, _seed_counts(cells)))}",
        "",
        verdict_counts(verdicts),
        "",
        how,
        f"Claim: {md_text(spec.claim)}",
        "",
        "## Claims",
        "",
    ]
    for v in (v for v in verdicts if v.kind == "claim"):
        detail = f" — {v.detail}" if v.detail else ""
        lines.append(f"- **{v.verdict}** {md_text(v.text)}{detail} (ours: {_ours(v)})")
    pvs = [v for v in verdicts if v.kind == "paper_value"]
    if pvs:
        lines += ["", f"## Paper values ({paper_value_tally(pvs)})", "",
                  "| cell | paper | ours | verdict |", "|---|---|---|---|"]
        for v in pvs:
            ours = (v.detail if v.detail in ("diverged", "not measured")
                    else f"{_ours(v)} ({md_cell(v.detail)})" if v.detail and v.verdict in (
                        "unfinished", "match", "differs") else _ours(v))
            lines.append(f"| {md_cell(v.text)} | {fmt_written(v.paper)} | {ours} | {v.verdict} |")
    shown = cells.drop(columns=[COMPLETE]) if COMPLETE in cells else cells
    if spec.analytic is not None:  # its grid and parameters, beside computed metrics
        keys = [LABEL, *spec.analytic.grid, *spec.analytic.params]
    else:  # the cell keys come first (cells.aggregate)
        keys = list(shown.columns[:list(shown.columns).index(N_EXPECTED)]) \
            if N_EXPECTED in shown else []
    lines += ["", "## Our numbers", "",
              md_table(shown, keys) if not finished(cells).empty else "(no finished runs)"]
    # each note one list item: a note written over lines ('x\n\n## Claims\n\n- **PASS** y')
    # opened a section and a verdict line of its own below the real ones
    lines += ["", "## Decisions (spec notes)", ""] + [f"- {md_text(n)}" for n in spec.notes]
    return "\n".join(lines) + "\n"
