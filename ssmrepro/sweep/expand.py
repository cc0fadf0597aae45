"""Stage 2 (sweep): expand a spec + profile into validated run configs.

Resolution order for one run: the spec's paper settings -> profile ``set`` -> command-line
overrides (``ssmrepro run ID --set model.d_model=32``: ``expand(..., overrides=...)``) -> the sweep
point's overrides -> ``derived`` expressions -> constraints -> typed validation (task, model,
train) -> one run per seed (ids: see ``sweep.config``). A key the profile sweeps cannot be
overridden (the sweep would replace it).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ValidationError

from .. import expr
from ..models import MODELS, ModelConfig
from ..spec import (
    LABEL_SEP,
    Axis,
    Spec,
    SpecError,
    _format_errors,
    _zip_lengths,
    find_reused,
    parse_yaml,
    replaces,
    too_deep,
    yaml_problem,
)
from ..tasks import TASKS, DataUnavailable, Task, TaskConfig, build_task, eval_set_problem
from ..tasks.base import fixed_split_error, loss_problem, refuse_unread_task
from ..util import encode_cell, norm, short_name
from .config import (
    RunConfig,
    TrainConfig,
    flatten,
    lean,
    per_point,
    run_id_of,
    swept_keys,
    trained_key,
)

SECTIONS = ("task", "model", "train")


def set_dotted(cfg: dict[str, Any], key: str, value: Any,
               drops: list[tuple[str, str, str, Any]] | None = None) -> None:
    """Set the dotted ``key`` of ``cfg`` to ``value``. A mapping replacing a mapping of the same
    name, kind or scheme inside a section appends ``(key, tag, dropped key, its old value)`` to
    ``drops`` for each key the old one set and the new one leaves out (``refuse_dropped`` checks
    them once the run's config is whole)."""
    parts = key.split(".")
    if parts[0] not in SECTIONS:
        raise KeyError(f"{key}: keys must start with one of {', '.join(SECTIONS)} (e.g. model.d_model)")
    if "" in parts:  # 'model..d_model' said 'model: unknown key', 'model.d_model.' that
        # d_model should be an integer (it became a mapping of an empty name)
        raise KeyError(f"{key}: an empty name between its dots (a key is a dotted name, e.g. "
                       "model.d_model)")
    if len(parts) == 1:  # a whole section, e.g. a case that swaps the model family
        if not isinstance(value, dict):
            raise KeyError(f"{key}: a whole section must be a mapping")
        _keeps_its_keys(key, cfg.get(key), value)
        cfg[key] = copy.deepcopy(value)
        return
    node = cfg
    for p in parts[:-1]:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    if drops is not None:
        drops.extend((key, tag, k, v) for tag, k, v in _dropped_keys(node.get(parts[-1]), value))
    node[parts[-1]] = copy.deepcopy(value)


NESTED_TAGS = ("name", "kind", "scheme")  # what names a nested mapping's kind (mixer, schedule, init)


def _dropped_keys(old: Any, value: Any) -> list[tuple[str, str, Any]]:
    """``(tag, key, old value)`` for each key of the mapping ``old`` that the mapping ``value`` of
    the same name / kind / scheme leaves out (its default applies instead)."""
    if not (isinstance(old, dict) and isinstance(value, dict)):
        return []
    tag = next((t for t in NESTED_TAGS if t in old), None)
    if tag is None or value.get(tag) != old[tag]:
        return []
    return [(tag, k, old[k]) for k in old if k not in value]


def _lost_profile_sets(sets: dict[str, Any], overrides: dict[str, Any], cfg: dict[str, Any],
                       identity: dict[str, Any]) -> list[str]:
    """'key: reason' for each profile ``set`` key whose mapping a sweep point replaces with one
    that leaves the key out, where the key fits the new mapping and its value would change the
    run: yu2025-fig4 with a quick `set: {model.blocks.SSM.mixer.d_state: 8}` and a case
    `model.blocks.SSM.mixer: {name: b2s6, heads: 8}` trained B2S6 at its default d_state, not
    8, without a word. A mapping that names the key gives its own value on purpose (a case
    overrides the profile), and one the key does not fit (a Transformer's d_state) is fine."""
    out = []
    for k, v in sets.items():
        outer = [o for o in overrides if k.startswith(o + ".")]
        if not outer:
            continue
        node: Any = cfg
        for p in k.split("."):
            node = node.get(p, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:  # the new mapping (or a later key) gives it
            continue
        kept = copy.deepcopy(cfg)
        set_dotted(kept, k, v)
        try:
            parsed = validate_sections(kept)
        except (SectionError, KeyError, ValueError):  # the key does not fit the new mapping
            continue
        if json.dumps(dict(zip(SECTIONS, map(lean, parsed))), sort_keys=True,
                      default=str) != json.dumps(identity, sort_keys=True, default=str):
            o = max(outer, key=len)
            out.append(f"{k}: this sweep point replaces {o} with a mapping that leaves "
                       f"{k[len(o) + 1:]} out, so the profile's {v!r} does not reach its runs "
                       "(they take the mapping's default); give it in that mapping, or set it "
                       "per case")
    return out


_MISSING = object()


def refuse_dropped(cfg: dict[str, Any], drops: list[tuple[str, str, str, Any]],
                   identity: dict[str, Any]) -> None:
    """ValueError when a key that a nested mapping of the same name / kind / scheme dropped held a
    value other than the default it fell back to: `train.schedule: {kind: cosine, warmup_steps:
    2}` over a cosine schedule with `final_factor: 0.1` trained with final_factor 0 without a
    word. A dropped value equal to its default changes nothing and passes (shipped specs give a
    mixer of the same name without the keys whose defaults they keep). ``identity`` is the run's
    ``{"task": lean(task), "model": ..., "train": ...}`` as parsed from ``cfg``."""
    changed: dict[tuple[str, str, Any], list[str]] = {}
    for key, tag, k, old in drops:
        parts = key.split(".")
        node: Any = cfg
        for p in parts:
            node = node.get(p) if isinstance(node, dict) else None
        if not isinstance(node, dict) or k in node:  # replaced again, or given again later
            continue
        kept = copy.deepcopy(cfg)
        target = kept
        for p in parts:
            target = target[p]
        target[k] = copy.deepcopy(old)
        try:
            parsed = validate_sections(kept)
        except (SectionError, KeyError, ValueError):  # the old key does not fit the new mapping
            continue
        ident = dict(zip(SECTIONS, map(lean, parsed)))
        if json.dumps(ident, sort_keys=True, default=str) != json.dumps(identity, sort_keys=True,
                                                                       default=str):
            changed.setdefault((key, tag, node.get(tag)), []).append(f"{k}: {old!r}")
    for (key, tag, name), lost in changed.items():
        raise ValueError(f"{key}: a mapping of the same {tag} ({name!r}) replaces it and drops "
                         f"{', '.join(lost)}, whose default would apply instead without a word; to "
                         f"change some keys, set them one by one ({key}.<field>: ...), or give "
                         "the dropped keys in the mapping too")


def _keeps_its_keys(key: str, old: Any, value: Any) -> None:
    """KeyError when the section ``value`` replaces the section ``old`` of the same ``name``
    without keys that ``old`` sets: `task: {name: keep_nth, T: 10}` over `task: {name: keep_nth,
    n: 5, T: 50, vocab: 128}`, read as changing T, replaced the section and n and vocab took their
    defaults without a word. A section of another name (a model swapped for a Transformer)
    replaces it. (Mappings inside a section, a mixer or a schedule, are not checked: shipped
    specs give a mixer of the same name without the keys whose defaults they keep.)"""
    if not (isinstance(old, dict) and isinstance(value, dict)):
        return
    kind = "name"
    if kind not in old or value.get(kind) != old[kind]:
        return
    dropped = [k for k in old if k not in value]
    if dropped:
        shown = next((k for k in value if k != kind), "field")
        raise KeyError(f"{key}: a whole section of the same {kind} ({old[kind]!r}) replaces it and "
                       f"drops {', '.join(map(str, dropped))} (their defaults would apply); to "
                       f"change some keys, set them one by one ({key}.{shown}: ...), or give "
                       "every key")


def _zip_points(z: dict[str, list[Any]]) -> list[dict[str, Any]]:
    _zip_lengths(z)  # refused when the spec is read (an Axis or Case), checked again here
    n = len(next(iter(z.values()), []))
    return [{k: v[i] for k, v in z.items()} for i in range(n)]


def _grid_points(g: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    keys = list(g)
    return (dict(zip(keys, vals)) for vals in itertools.product(*(g[k] for k in keys)))


SEEDS_KEY = "__seeds__"  # a case's own seed list and constraints travel with its overrides
CONSTRAINTS_KEY = "__constraints__"


MAX_RUNS = 100_000  # runs one profile may expand to (koren2026's paper grid has 20,304)
# runs every profile of a spec expands to together, as `validate` holds them (koren2026-fig6's
# three have 21,513): 100 profiles of 100,000 runs each were ten million runs, ~25 min and
# ~45 GB of memory for `validate`
MAX_SPEC_RUNS = 3 * MAX_RUNS
# The evaluation histories of a profile's runs together (``TrainConfig.history_bytes``, an upper
# bound): the outputs stage reads every record at once and flattens the histories into
# curves.csv, about 15 s and 1 GB per million evaluations. Each run's own bound (32 MiB) let
# cooper2026-fig12's paper grid at `--set train.eval_every=1` plan 11.5 million evaluations
# (2.7 GiB of records) that no report could read back; the largest committed profile
# (huang2025-figA3 paper) may take 419 MiB.
MAX_PROFILE_HISTORY_BYTES = 512 << 20
# values (mappings, lists and what they hold) of a run's task, model and train sections as its
# profile and --set leave them, before its sweep point's settings: every point copies them (the
# shipped specs hold at most 60). A 50,000-entry list under task, an unknown key, took 13 ms a
# point before each point refused it: 20 minutes over 100,000 points
MAX_SETTING_VALUES = 10_000


def _point_values(axis: Axis) -> int:
    """The most values (``_values``) one point of ``axis`` sets, at most: its case's ``set``
    with the largest value of each of its lists."""
    def lists(d: dict[str, list[Any]]) -> int:
        return sum(max((_values(v, MAX_SETTING_VALUES) for v in vs), default=0)
                   for vs in d.values())

    if axis.grid is not None or axis.zip is not None:
        return lists(axis.grid if axis.grid is not None else axis.zip)
    return max((_values(c.set, MAX_SETTING_VALUES) + lists(c.grid) + lists(c.zip)
                for c in axis.cases or []), default=0)


def _values(node: Any, limit: int) -> int:
    """The values of ``node`` (itself, and what its mappings and lists hold), counted up to just
    past ``limit``."""
    n, stack = 0, [node]
    while stack and n <= limit:
        v = stack.pop()
        n += 1
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return n


def _holds(constraint: str, env: dict[str, Any]) -> bool:
    """Whether a point meets ``constraint``: a condition, true or false. A number (``model.d_model
    - 8`` for ``>= 8``) was taken for its truth value and kept every point but one, silently."""
    value = expr.evaluate(constraint, env)
    if not isinstance(value, bool):
        raise expr.ExprError(f"constraint {constraint!r} is {value!r}, not true or false (a "
                             "constraint is a condition, e.g. model.d_state <= model.d_model)")
    return value


def axis_points(axis: Axis) -> list[tuple[list[str], dict[str, Any]]]:
    """(labels, overrides) for every point of one axis."""
    return [(labels, ov) for labels, ov, _ in _case_points(axis)]


def _case_points(axis: Axis) -> list[tuple[list[str], dict[str, Any], int | None]]:
    """(labels, overrides, the index of its case or None) for every point of one axis."""
    return list(_iter_case_points(axis))


def _iter_case_points(axis: Axis) -> Iterator[tuple[list[str], dict[str, Any], int | None]]:
    """``_case_points``, built one at a time (``may_plan`` reads the first few)."""
    if axis.grid is not None:
        yield from (([], p, None) for p in _grid_points(axis.grid))
        return
    if axis.zip is not None:
        yield from (([], p, None) for p in _zip_points(axis.zip))
        return
    for c, case in enumerate(axis.cases or []):
        zips = _zip_points(case.zip) or [{}]
        extra = {SEEDS_KEY: case.seeds} if case.seeds is not None else {}
        if case.constraints:
            extra[CONSTRAINTS_KEY] = case.constraints
        labels = [case.label] if case.label else []
        subs = (dict(a, **b) for a in _grid_points(case.grid) for b in zips)
        first = next(subs, None)  # (an empty grid list: the case's own point)
        for sub in itertools.chain([first or {}], subs):
            yield (labels, {**case.set, **sub, **extra}, c)


def _axis_keys(axis: Axis) -> set[str]:
    """The keys the points of ``axis`` set (its grid's or zip's, its cases'), read without
    building the points."""
    if axis.grid is not None or axis.zip is not None:
        return set(axis.grid if axis.grid is not None else axis.zip)
    return {k for case in axis.cases or [] for k in (*case.set, *case.grid, *case.zip)}


def _join(la: list[str], oa: dict[str, Any], lb: list[str], ob: dict[str, Any]) -> dict[str, Any]:
    """The overrides of a point of earlier axes (labels ``la``) and a point of the next axis: the
    next one's keys win (``_replaced_axis_keys`` refuses an axis whose values are never used),
    the constraints of both cases hold (the next case's list replaced the earlier's: a case
    excluded by its own constraint ran), and two cases' seed lists must agree (one replaced the
    other)."""
    out = {**oa, **ob}
    if CONSTRAINTS_KEY in oa and CONSTRAINTS_KEY in ob:
        out[CONSTRAINTS_KEY] = oa[CONSTRAINTS_KEY] + ob[CONSTRAINTS_KEY]
    if SEEDS_KEY in oa and SEEDS_KEY in ob and list(oa[SEEDS_KEY]) != list(ob[SEEDS_KEY]):
        raise ValueError(f"the cases {LABEL_SEP.join(la) or '(unlabelled)'!r} and "
                         f"{LABEL_SEP.join(lb) or '(unlabelled)'!r} of two axes give different "
                         f"seeds ({oa[SEEDS_KEY]} and {ob[SEEDS_KEY]}): one list would quietly "
                         "replace the other (give a case's seeds in one axis)")
    return out


@functools.lru_cache(maxsize=64)
def _derived_levels(derived: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, str], ...], ...]:
    """The (key, expression) pairs of ``derived`` in the order they are computed: levels, each
    reading no key a later level sets. Once per spec: worked out again at every sweep point (the
    names of every value still pending, for each level), a chain of 100 derived values took
    76 ms a point, two hours for a sweep of 100,000 points. ValueError for a cycle."""
    pending = dict(derived)
    reads = {k: expr.names(e) for k, e in pending.items()}
    levels = []
    while pending:
        ready = tuple((k, e) for k, e in pending.items() if not (reads[k] & pending.keys()))
        if not ready:
            raise ValueError(f"derived values depend on each other in a cycle: {sorted(pending)}")
        levels.append(ready)
        for key, _ in ready:
            pending.pop(key)
    return tuple(levels)


def _leaf_at(cfg: dict[str, Any], key: str) -> bool:
    """Whether setting the dotted ``key`` of ``cfg`` to a value that is no mapping adds just
    that leaf to ``flatten(cfg)``: the mappings on its path are there or absent, and it
    replaces no mapping."""
    *path, last = key.split(".")
    node = cfg
    for part in path:
        if part not in node:
            return True
        node = node[part]
        if not isinstance(node, dict):
            return False
    return not isinstance(node.get(last), dict)


def _apply_derived(cfg: dict[str, Any], derived: dict[str, str]) -> None:
    """Set each derived value of ``cfg``, level by level (``_derived_levels``), each level's
    expressions reading the config as the levels before it left it (its dotted leaves, kept up
    to date as they are set: flattening the whole config again for each level of a chain of
    100 took most of a point's time)."""
    env = None
    for level in _derived_levels(tuple(derived.items())):
        env = flatten(cfg) if env is None else env
        values = []
        for key, e in level:
            try:
                values.append((key, expr.evaluate(e, env)))
            except expr.ExprError as err:
                raise expr.ExprError(f"derived.{key}: {err}") from None
        for key, value in values:
            leaf = env is not None and not isinstance(value, dict) and _leaf_at(cfg, key)
            set_dotted(cfg, key, value)
            if leaf:
                env[key] = value
            else:  # a mapping on its path or in its place is gone: read the config again
                env = None


class SectionError(Exception):
    def __init__(self, section: str, err: ValidationError, model: type | None = None):
        super().__init__(section)
        self.section, self.err, self.model = section, err, model  # model: the config class


def validate_sections(cfg: dict[str, Any], data: bool = False
                      ) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
    """Typed configs of one run; raises KeyError for unknown names, SectionError for invalid
    fields (``train.evals.<name>`` overrides included) and ValueError for a train section that
    does not fit its task (see ``check_task_data``; ``data``: against the data here too)."""
    for section in SECTIONS:  # field names are text (they become keyword arguments)
        odd = [k for k in cfg[section] if not isinstance(k, str)]
        if odd:
            raise KeyError(f"{section}.{odd[0]!r}: field names are text, got "
                           f"{type(odd[0]).__name__}")
    for section in ("task", "model"):  # a name is text (a list or mapping cannot be looked up)
        if not isinstance(cfg[section].get("name"), str):
            raise KeyError(f"{section}.name: expected the name of a {section}, got "
                           f"{type(cfg[section].get('name')).__name__}")
    task_cls = TASKS.get(cfg["task"].get("name"))
    if task_cls is None:
        raise KeyError(f"task.name: unknown task '{short_name(cfg['task']['name'])}' (known: "
                       f"{sorted(TASKS)}; "
                       "their fields: ssmrepro list-tasks)")
    model_entry = MODELS.get(cfg["model"].get("name"))
    if model_entry is None:
        raise KeyError(
            f"model.name: unknown model '{short_name(cfg['model']['name'])}' (known: "
            f"{sorted(MODELS)})"
        )
    out = []
    for section, cls in (("task", task_cls.Config), ("model", model_entry.Config), ("train", TrainConfig)):
        try:
            out.append(cls(**cfg[section]))
        except ValidationError as err:
            raise SectionError(section, err, cls) from None
    task, model, train = out
    evals, typed = {}, {}
    for name, overrides in train.evals.items():  # every evaluation set is a valid task config
        try:
            evals[name] = task_cls.Config(**{**task.model_dump(), **overrides})
        except ValidationError as err:
            raise SectionError(f"train.evals.{name}", err, task_cls.Config) from None
        dump = evals[name].model_dump(mode="json")
        typed[name] = {k: dump[k] for k in overrides}
    if json.dumps(typed, sort_keys=True) != json.dumps(train.evals, sort_keys=True, default=str):
        # each override as its field reads it (what the run id hashes): `T: 20`, `T: 20.0` and
        # `T: '20'` are one evaluation set, but were three run ids (the run trained thrice)
        train = train.model_copy(update={"evals": typed})
    refuse_unread_task(task, train.evals, evals)
    check_task_data(task_cls, task, train, evals, data)
    return task, model, train


def config_identity(config: Any) -> dict[str, Any]:
    """The identity (``RunConfig.identity``: what a run id hashes) of a run's full config as a
    record stores it (``RunConfig.config``): each section parsed (``parse_config``) and leaned.
    Raises ValueError for anything that is not such a config."""
    return parsed_identity(parse_config(config))


def parsed_identity(parsed: dict[str, Any]) -> dict[str, Any]:
    """The identity of a ``parse_config`` result: each section leaned, and the seed."""
    return {**{s: lean(parsed[s]) for s in SECTIONS}, "seed": parsed["seed"]}


def parse_config(config: Any) -> dict[str, Any]:
    """A run's full config as a record stores it (``RunConfig.config``), each section parsed as
    its task's, its model's and the train config (typed), with its seed. Raises ValueError for
    anything that is not such a config (an unknown name, an invalid field, a missing section, a
    value stored otherwise than the config reads it)."""
    if not isinstance(config, dict) or set(config) != {*SECTIONS, "seed"}:
        raise ValueError("not a run's config (task, model, train and seed)")
    for section in SECTIONS:
        if not isinstance(config[section], dict) or any(not isinstance(k, str)
                                                        for k in config[section]):
            raise ValueError(f"{section}: not a mapping of field names")
    name = {s: config[s].get("name") for s in ("task", "model")}
    task_cls = TASKS.get(name["task"]) if isinstance(name["task"], str) else None
    model_entry = MODELS.get(name["model"]) if isinstance(name["model"], str) else None
    if task_cls is None or model_entry is None:
        raise ValueError(f"an unknown task or model ({name['task']!r}, {name['model']!r})")
    out: dict[str, Any] = {}
    for section, cls in (("task", task_cls.Config), ("model", model_entry.Config),
                         ("train", TrainConfig)):
        try:
            typed = cls(**config[section])
        except (ValidationError, TypeError, RecursionError) as err:
            raise ValueError(f"{section}: not a valid {section} config ({type(err).__name__})"
                             ) from None
        odd = _unlike(config[section], typed.model_dump(mode="json"))
        if odd:  # lr '0.01' (text) parsed as 0.01, but curves read the stored value
            raise ValueError(f"{section}.{odd[0]}: {odd[1]!r} is not as the config reads it "
                             f"({odd[2]!r})")
        out[section] = typed
    return {**out, "seed": config["seed"]}


def _unlike(given: dict[str, Any], parsed: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The first (dotted key, stored value, parsed value) where a stored config section differs
    from its parsed dump; a key the stored section lacks (a field added since) is fine."""
    for k, v in given.items():
        w = parsed.get(k)
        if isinstance(v, dict) and isinstance(w, dict):
            odd = _unlike(v, w)
            if odd:
                return (f"{k}.{odd[0]}", odd[1], odd[2])
        elif type(v) is not type(w) and not (isinstance(v, (int, float)) and isinstance(
                w, (int, float)) and not isinstance(v, bool) and not isinstance(w, bool)) \
                or v != w:
            return (k, v, w)
    return None


def check_task_data(task_cls: type[Task], task: TaskConfig, train: TrainConfig,
                    evals: dict[str, TaskConfig], data: bool = False) -> None:
    """A dataset task needs ``train.train_size`` within its training split, and an evaluation set
    must keep the run's inputs and outputs and have test rows (``tasks.eval_set_problem``). What
    needs the data of a task that reads it (``Task.reads_data``) is checked here with ``data``
    (the commands that read it: `run`, its dry run, `validate`) when the data is present (it is
    loaded once per process and cached); otherwise the run checks it before training
    (``train.check_pack``) and fails with ``DataUnavailable``. Without ``data`` the runs of a
    spec are the same on every machine: `figures` of committed results was refused for a
    smaller dataset generated here (train.train_size 1600 exceeds the training split ...)."""
    err = fixed_split_error(task_cls, None, train.train_size)
    if err:
        raise ValueError(err)
    for where, config in (("task", task), *((f"train.evals.{n}", c) for n, c in evals.items())):
        why = config.dtype_problem(train.dtype)
        if why:
            raise ValueError(f"{where}: {why} (train.dtype {train.dtype})")
    if task_cls.reads_data and not data:
        return
    try:  # synthetic tasks build instantly; dataset tasks load (or reuse) their data
        base = build_task(task)
        built = {}
        for n, c in evals.items():
            try:
                built[n] = build_task(c)
            except ValueError as err:  # a set's own length or data (text_corpus: windows
                # longer than a split) read as the run's task's ('use a smaller task.L')
                raise ValueError(f"train.evals.{n}: {err}") from None
    except DataUnavailable:
        return
    err = fixed_split_error(base, base.split_sizes(), train.train_size) or loss_problem(
        base, train.label_smoothing, train.early_stop.metric if train.early_stop else None)
    if err:
        raise ValueError(err)
    for name, et in built.items():
        why = eval_set_problem(base, et)
        if why:
            raise ValueError(f"train.evals.{name}: {why}")
    why = train.eval_work_problem(eval_scale(base, built))
    if why:
        raise ValueError(why)


def eval_scale(base: Task, evals: dict[str, Task]) -> dict[str, float]:
    """Each named evaluation set's sequence length over the run's task's (its cost per sample
    relative to the run's own evaluation samples)."""
    return {n: et.info.seq_len / max(1, base.info.seq_len) for n, et in evals.items()}


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["model.d_model=32", "train.lr=1e-3"]`` -> {key: value}, each value parsed as YAML
    (``32`` is an int, ``[1, 2]`` a list, ``null`` None), like the same line in a spec file."""
    import yaml

    out: dict[str, Any] = {}
    errors = []
    for item in items:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            errors.append(f"--set {item!r}: expected key=value, e.g. --set model.d_model=32")
            continue
        if key in out:  # the last one would quietly win
            errors.append(f"--set {key}: given twice (once per key)")
            continue
        if any(not part.strip() for part in key.split(".")):
            errors.append(f"--set {key}: an empty part in the key (expected section.field, e.g. "
                          "model.d_model)")
            continue
        try:
            key.encode("utf-8")
        except UnicodeError:  # a byte of another encoding (the shell's '\xff'): a pydantic
            # `task: Input should be a valid string, unable to parse raw data` naming no key
            errors.append(f"--set {key!r}: the key is not UTF-8 text (a byte of another "
                          "encoding)")
            continue
        if key.split(".")[0] not in SECTIONS:
            errors.append(f"--set {key}: keys start with one of {', '.join(SECTIONS)} "
                          "(e.g. model.d_model)")
            continue
        inside = next((k for k in out if k.startswith(key + ".") or key.startswith(k + ".")),
                      None)
        if inside is not None:  # `train.schedule={...}` replaced `train.schedule.kind`, or
            errors.append(f"--set {key}: overlaps --set {inside} (the later one would quietly "
                          "replace the other; give one of them)")  # was replaced by it
            continue
        try:
            out[key] = parse_yaml(raw) if raw.strip() else ""
            # (900 deep was a RecursionError traceback in expand; the key's names are levels)
            deep = too_deep({key: out[key]})
            if deep:
                errors.append(f"--set {key}: {deep.partition(': ')[2]}")
                continue
            import json

            if raw.count("#") > json.dumps(out[key], ensure_ascii=False, default=str).count("#"):
                # YAML read ' #...' as a comment: `task.path=my #2 corpus.txt` quietly became 'my'
                errors.append(f"--set {key}: {raw!r} holds a YAML comment (' #' onwards is "
                              f"dropped: the value read is {out[key]!r}); quote the value, "
                              f"e.g. --set '{key}=\"{raw.strip()}\"'")
        except yaml.YAMLError as err:
            errors.append(f"--set {key}: cannot parse {raw!r} ({yaml_problem(err)})")
        except (ValueError, RecursionError) as err:  # YamlBoundError, a 5,000-digit integer ...
            what = "nested too deeply" if isinstance(err, RecursionError) else str(err)
            if isinstance(err, UnicodeError):  # bytes the shell passed that are no UTF-8 ('\xff'):
                # it said `'utf-8' codec can't encode character '\udcff' ...: surrogates not allowed`
                what = "not UTF-8 text (a byte of another encoding; write the value in UTF-8)"
            errors.append(f"--set {key}: cannot use {raw[:60]!r}: {what}")
    if errors:
        raise SpecError(errors)
    return out


def _dollars(text: str) -> int:
    """The $ signs of ``text`` that matplotlib reads as TeX math delimiters (not ``\\$``)."""
    return text.count("$") - text.count("\\$")


def overrides_tag(overrides: dict[str, Any] | None, runs: list[RunConfig]) -> str:
    """A short stable name for a set of overrides ('' for none), e.g. 'set-3f2a9c': it hashes
    each key's value as the typed config of ``runs`` (``expand(..., overrides)``) holds it, as
    run ids do: `--set train.lr=1` and `--set train.lr=1.0` are one config, but were two tags,
    their tables, reports and figures written twice side by side (a key no run's config holds
    hashes its value as given)."""
    if not overrides:
        return ""
    import hashlib

    flats = per_point(runs, RunConfig.flat)
    typed: dict[str, Any] = {}
    for k in sorted(overrides):
        seen = {json.dumps({f: v for f, v in flat.items() if f == k or f.startswith(k + ".")},
                           sort_keys=True, default=str) for flat in flats}
        seen.discard("{}")
        typed[k] = sorted(seen) if seen else overrides[k]
    blob = json.dumps(typed, sort_keys=True, default=str)
    return "set-" + hashlib.sha256(blob.encode()).hexdigest()[:6]


def effective_overrides(spec: Spec, profile: str, overrides: dict[str, Any] | None
                        ) -> dict[str, Any] | None:
    """The keys of ``overrides`` that change a run of ``profile`` (None when none does): a key
    whose value is the one the runs already hold (`--set train.lr=0.01` over a spec of lr
    0.01) leaves every run id as it is, but tagged its outputs `-set-<hash>`: a second table,
    report and figures of the profile's own runs beside the untagged ones (and a partly idle
    `--set` a tag other than that of its effective keys). A key is dropped when the runs
    without it are the runs with it; one whose absence is refused (``train.max_steps=null``
    beside ``train.epochs``) is kept."""
    if not overrides:
        return None
    kept = dict(overrides)
    runs = expand(spec, profile, overrides=kept)
    for k in sorted(overrides):
        rest = {j: v for j, v in kept.items() if j != k}
        try:
            if expand(spec, profile, overrides=rest or None) == runs:
                kept = rest
        except SpecError:
            pass
    return kept or None


def overrides_text(overrides: dict[str, Any] | None) -> str:
    """The ``--set`` options that ``overrides`` stand for, shell-quoted ('' for none), e.g.
    ``--set train.lr=0.02``: what a tagged report and figure say they are of (they said only
    `profile smoke`, the numbers of other settings under the profile's name, the tag a hash)."""
    if not overrides:
        return ""
    import re
    import shlex

    def shown(v: Any) -> str:  # as `--set` reads it back: a plain name bare, else JSON (YAML)
        plain = isinstance(v, str) and re.fullmatch(r"[A-Za-z_][\w./-]*", v) and v.lower() not in {
            "true", "false", "null", "yes", "no", "on", "off", "y", "n"}
        return v if plain else json.dumps(v, default=str)

    return shlex.join([a for k in sorted(overrides) for a in ("--set", f"{k}={shown(overrides[k])}")])


def _replaced_axis_keys(spec: Spec, profile: str, axes: list, key: str) -> list[str]:
    """'file: ...' for a key an axis sweeps that every point of a later axis sets again (the key,
    or a field that each of its mapping values names): the earlier values were never used (grid
    d_model [8] x grid d_model [16] quietly ran d_model 16 only; grid schedule [{kind: cosine,
    warmup_steps: 2}] x grid schedule.warmup_steps [1, 3] never ran warmup 2); a case that sets
    it for some points only is an override, and fine."""
    meta = (SEEDS_KEY, CONSTRAINTS_KEY)
    sets = [[{k: v for k, v in ov.items() if k not in meta} for _, ov in axis_points(axis)]
            for axis in axes]
    out = []
    for i, earlier in enumerate(sets):
        values: dict[str, list[Any]] = {}
        for pt in earlier:
            for k, v in pt.items():
                values.setdefault(k, []).append(v)
        for k in sorted(values):
            for j in range(i + 1, len(sets)):
                later = sets[j]
                hits = {s: all(replaces(s, k, v) for v in values[k])
                        for s in set().union(*later)} if later else {}
                if later and all(any(hits[s] for s in pt) for pt in later):
                    what = next(s for s in later[0] if hits[s])
                    inside = what.startswith(k + ".")  # a field the values of k name
                    part = f" (its {what})" if inside else "" if what == k else f" (in {what})"
                    out.append(f"{spec.path}: [profile {profile}] {key}.{i}: {k} is set again"
                               f"{part} by every point of sweep axis {j}, so the values of axis "
                               f"{i}{' for it' if inside else ''} are never used (sweep it in one "
                               "axis)")
                    break
    return out


def _set_value_named(line: str, path: Any, given: dict[str, Any]) -> str:
    """``line`` ('file: key: reason') with the value of the ``--set`` that gave its key (or a
    mapping holding it): `--set $'task.T=8\ntask.n=2'` said `task.T: Input should be a valid
    integer`, the value read (YAML joined the lines: '8 task.n=2') shown nowhere."""
    head = f"{path}: "
    key = line[len(head):].partition(": ")[0] if line.startswith(head) else ""
    hit = next((k for k in given if key == k or key.startswith(k + ".")), None)
    if hit is None:
        return line
    shown = repr(given[hit])
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"{line} (--set {hit} read as {shown})"


def expand(spec: Spec, profile: str | None = None,
           overrides: dict[str, Any] | None = None, data: bool = False) -> list[RunConfig]:
    """All runs of ``spec`` under ``profile`` (default: the spec's default profile), with
    ``overrides`` ({dotted key: value}) applied after the profile's ``set``; validated like the
    YAML, and part of every run id (they change the config). None for an analytic spec (its
    table is computed by the report stage). ``data``: the runs are checked against the data
    here too (``check_task_data``), for the commands that read it."""
    profile = spec.default_profile if profile is None else profile  # "" names no profile
    if profile not in spec.profiles:
        raise SpecError([f"{spec.path}: unknown profile {profile!r} (have {sorted(spec.profiles)})"])
    if spec.analytic is not None:
        if overrides:  # nothing reads them: the tagged outputs were the plain table again
            raise SpecError([f"{spec.path}: --set {next(iter(overrides))}: an analytic spec "
                             "trains nothing (no task, model or train to set); its table's "
                             "settings are analytic.params and analytic.grid in the spec"])
        return []
    prof = spec.profiles[profile]
    for i, name in enumerate(spec.reuse):  # the specs whose records this one reuses must exist
        try:
            other = find_reused(spec, name)
        except SpecError as err:
            raise SpecError([f"{spec.path}: reuse.{i}: {m}" for m in err.messages]) from None
        if (other.paper, other.id) == (spec.paper, spec.id):  # (a spec is its results folder)
            # read as nothing: a slip for another spec's id reused no record, without a word
            raise SpecError([f"{spec.path}: reuse.{i}: {name!r} is this spec itself (paper "
                             f"{spec.paper!r}, id {spec.id!r}), whose own records it reads "
                             "anyway: name the spec whose records it reuses, or remove the "
                             "entry"])
    # deep copies: a profile's nested `set` (yu2025-fig3 smoke's model.blocks.SSM.mixer.d_state)
    # was written into the spec's own mapping, so every later expand of another profile in the
    # same process (`figures`, `validate`, `list`) planned the runs with it
    base = {"task": copy.deepcopy(dict(spec.task)), "model": copy.deepcopy(dict(spec.model)),
            "train": copy.deepcopy(dict(spec.train))}
    errors: list[str] = []
    base_drops: list[tuple[str, str, str, Any]] = []  # nested mappings the sets replaced
    try:
        for k, v in prof.set.items():
            set_dotted(base, k, v, base_drops)
    except KeyError as err:
        raise SpecError([f"{spec.path}: profiles.{profile}.set.{err.args[0]}"]) from None
    axes = prof.sweep if prof.sweep is not None else spec.sweep
    given = dict(overrides or {})  # (the loop below names a point's own `overrides`)
    if overrides:
        swept = {k for axis in axes for _, ov in axis_points(axis) for k in ov}
        # a key the sweep sets, one inside it, or a field the --set mapping names (a mapping
        # whose fields the sweep only refines stands: --set model={d_model: 16, ...} under a
        # sweep of model.mixer was refused as replaced, though every point kept its value)
        clash = sorted(k for k, v in overrides.items() if any(replaces(s, k, v) for s in swept))
        if clash:
            raise SpecError([f"--set {k}: the profile {profile!r} sweeps this key (the sweep "
                             "would replace the value)" for k in clash])
        try:
            for k, v in overrides.items():
                set_dotted(base, k, v, base_drops)
        except KeyError as err:
            raise SpecError([f"--set {err.args[0]}"]) from None
    held = {k: _values(base[k], MAX_SETTING_VALUES) for k in SECTIONS}
    held.update({f"{'sweep' if prof.sweep is None else f'profiles.{profile}.sweep'}.{a}":
                 _point_values(axis) for a, axis in enumerate(axes)})
    if sum(held.values()) > MAX_SETTING_VALUES:
        big = max(held, key=held.__getitem__)
        raise SpecError([f"{spec.path}: [profile {profile}] {big}: the task, model and train "
                         f"settings of a run hold more than {MAX_SETTING_VALUES:,} values "
                         f"(settings, lists and their entries; {big} sets the most), which every "
                         "sweep point copies: a run's settings are a page (remove what no run "
                         "reads)"])
    seeds = prof.seeds if prof.seeds is not None else spec.seeds
    n_points = 1
    for axis in axes:
        n_points *= axis.n_points  # (counted without building them)
        if n_points * max(1, len(seeds)) > MAX_RUNS:
            raise SpecError([f"{spec.path}: [profile {profile}] sweep: more than {MAX_RUNS:,} runs "
                             f"(the axes multiply to {n_points:,} points x {len(seeds)} seeds); "
                             "split the sweep into smaller specs or profiles"])
    points: list[tuple[list[str], dict[str, Any]]] = [([], {})]
    cases: list[tuple[tuple[int, int], ...]] = [()]  # per point: (axis, case) of its labelled cases
    try:
        for a, axis in enumerate(axes):
            these = _case_points(axis)
            points = [(la + lb, _join(la, oa, lb, ob)) for la, oa in points for lb, ob, _ in these]
            cases = [ca + (((a, c),) if c is not None and axis.cases[c].label else ())
                     for ca in cases for _, _, c in these]
    except ValueError as err:
        raise SpecError([f"{spec.path}: [profile {profile}] sweep: {err}"]) from None
    kept: set[tuple[int, int]] = set()  # labelled cases with a point the constraints keep
    # labelled case -> the constraints that excluded its points (the first false one of each)
    excluded_by: dict[tuple[int, int], dict[str, None]] = {}
    errors += _replaced_axis_keys(spec, profile, axes, "sweep" if prof.sweep is None
                                  else f"profiles.{profile}.sweep")
    swept_keys = {s for _, ov in points for s in ov}
    unused = []
    for k, v in prof.set.items():  # the key, or a field its mapping names (schedule.warmup_steps)
        hits = {s for s in swept_keys if replaces(s, k, v)}
        if points and hits and all(any(s in hits for s in ov) for _, ov in points):
            unused.append((k, min(hits)))
    if unused:  # the profile's value is replaced at every point: it would be quietly ignored
        raise SpecError([f"{spec.path}: profiles.{profile}.set.{k}: every sweep point of this "
                         f"profile sets {'this key' if s == k else s}, so "
                         f"{'this value' if s == k else 'what this value gives for it'} is never "
                         "used (remove it, or set it in the sweep)" for k, s in unused])
    if prof.seeds is not None and points and all(SEEDS_KEY in ov for _, ov in points):
        raise SpecError([f"{spec.path}: profiles.{profile}.seeds: every sweep point of this "
                         "profile has its case's own seeds, so this list is never used (remove "
                         "it, or the cases' seeds)"])

    replaced = [f"{where}: derived.{d} computes this value ({spec.derived[d]!r}), so the value "
                "set here is never used (remove it, or change the derived expression)"
                for where, k, v in [(f"--set {k}", k, v) for k, v in (overrides or {}).items()]
                + [(f"{spec.path}: profiles.{profile}.set.{k}", k, v) for k, v in prof.set.items()]
                + [(f"{spec.path}: sweep key {k}", k, v) for axis in axes
                   for _, ov in axis_points(axis) for k, v in ov.items()
                   if k not in (SEEDS_KEY, CONSTRAINTS_KEY)]
                for d in spec.derived if replaces(d, k, v)]
    errors += list(dict.fromkeys(replaced))  # the derived expression overwrote these quietly

    runs: list[RunConfig] = []
    tkeys: list[str] = []  # per run: what it trains (``trained_key``)
    grouped: dict[str, list[str]] = {}  # message -> points where it occurs
    for i, (labels, overrides) in enumerate(points):
        label = LABEL_SEP.join(labels)
        point = f"{i}{' ' + label if label else ''}"
        odd = [x for x in labels if _dollars(x) % 2]
        if odd and _dollars(label) and _dollars(label) % 2 == 0:
            # each case label is drawable alone (spec.Case), but one line of a figure (a panel
            # title, a legend) pairs the $ of two: TeX math, drawn as such or a traceback after
            # training ('a$\foo' and 'c$d': Unknown symbol \foo)
            grouped.setdefault(
                f"{spec.path}: the case labels {' and '.join(map(repr, odd))} join into the label "
                f"{label!r}, whose $ signs pair across the cases: a figure would draw what lies "
                "between them as TeX math (or fail to draw it); write \\$ for a dollar sign",
                []).append(point)
            continue
        cfg = copy.deepcopy(base)
        overrides = dict(overrides)
        point_seeds = overrides.pop(SEEDS_KEY, None)
        constraints = spec.constraints + overrides.pop(CONSTRAINTS_KEY, [])
        drops = list(base_drops)
        try:
            for k, v in overrides.items():
                set_dotted(cfg, k, v, drops)
            _apply_derived(cfg, spec.derived)
            env = flatten(cfg)
            false = next((c for c in constraints if not _holds(c, env)), None)
            if false is not None:
                for case in cases[i]:
                    excluded_by.setdefault(case, {})[false] = None
                continue
            kept.update(cases[i])
            task, model, train = validate_sections(cfg, data)
            ident = {"task": lean(task), "model": lean(model), "train": lean(train)}  # per point
            if drops:
                refuse_dropped(cfg, drops, ident)
            for m in _lost_profile_sets(prof.set, overrides, cfg, ident):
                grouped.setdefault(f"{spec.path}: profiles.{profile}.set.{m}", []).append(point)
        except SectionError as err:
            for m in _format_errors(spec.path or spec.id, err.err, prefix=f"{err.section}.",
                                    model=err.model):
                grouped.setdefault(_set_value_named(m, spec.path or spec.id, given),
                                   []).append(point)
            continue
        except (KeyError, ValueError, expr.ExprError) as err:
            grouped.setdefault(f"{spec.path}: {err.args[0] if err.args else err}", []).append(point)
            continue
        point_seeds = point_seeds if point_seeds is not None else seeds
        if len(runs) + len(point_seeds) > MAX_RUNS:  # a case's own seeds multiply its points
            raise SpecError([f"{spec.path}: [profile {profile}] sweep: more than {MAX_RUNS:,} "
                             f"runs (at sweep point {point} of {len(points):,}, with the seeds of "
                             "each point); split the sweep into smaller specs or profiles"])
        tkey = trained_key(task, model, train, ident)
        for seed in point_seeds:
            rc = RunConfig(
                run_id="",
                spec_id=spec.id,
                profile=profile,
                index=len(runs),
                label=label,
                coords=dict(overrides),
                seed=int(seed),
                task=task,
                model=model,
                train=train,
            )
            rc.run_id = run_id_of({**ident, "seed": rc.seed})  # = run_id_of(rc.identity())
            runs.append(rc)
            tkeys.append(tkey)
    where = "sweep" if prof.sweep is None else f"profiles.{profile}.sweep"
    for a, axis in enumerate(axes):  # a labelled case the constraints exclude entirely had no
        # runs: its line, bars and table rows were missing without a word
        for c, case in enumerate(axis.cases or []):
            if case.label and (a, c) not in kept and not grouped:
                false = " and ".join(map(repr, list(excluded_by.get((a, c), {}))[:3]))
                why = f" ({false} false)" if false else ""  # a spec's own check of its values
                errors.append(f"{spec.path}: [profile {profile}] {where}.{a}.cases.{c} "
                              f"({case.label}): the constraints exclude every point of this "
                              f"case{why}, so it has no runs (remove the case from this profile's "
                              "sweep, or change its settings or the constraints)")
    for msg, pts in grouped.items():
        shown = ", ".join(pts[:3]) + (f" and {len(pts) - 3} more" if len(pts) > 3 else "")
        path, _, rest = msg.partition(": ")
        errors.append(f"{path}: [profile {profile}, point {shown}] {rest}")
    if errors:
        raise SpecError(errors)
    if not runs:
        raise SpecError([f"{spec.path}: [profile {profile}] sweep: no runs (an empty grid, zip or "
                         "seed list, or constraints that exclude every point)"])
    history = {r.run_id: r.train for r in runs}
    total = sum(t.history_bytes for t in history.values())
    if total > MAX_PROFILE_HISTORY_BYTES:
        n = sum(t.total_steps // t.eval_every + 2 for t in history.values())
        raise SpecError([f"{spec.path}: [profile {profile}] train.eval_every: the evaluation "
                         f"histories of the {len(history):,} runs would take up to "
                         f"{total / 2**20:,.0f} MiB of their records together ({n:,} evaluations), "
                         f"more than the {MAX_PROFILE_HISTORY_BYTES >> 20} MiB the tables and "
                         "figures read back at once: raise train.eval_every, or split the sweep "
                         "into smaller specs or profiles"])
    seen: dict[tuple[str, str], int] = {}
    for r in runs:  # one run may sit in two slices (labels) of a figure, but not twice in one
        if (r.run_id, r.label) in seen:
            raise SpecError(
                [f"{spec.path}: [profile {profile}] sweep points {seen[(r.run_id, r.label)]} and "
                 f"{r.index} resolve to the same run (duplicate configuration)"]
            )
        seen[(r.run_id, r.label)] = r.index
    refuse_inert_points(spec, profile, runs, tkeys)
    refuse_shared_cells(spec, profile, runs)
    return runs


def refuse_shared_cells(spec: Spec, profile: str, runs: list[RunConfig]) -> None:
    """Raise SpecError for two runs of one seed and label that no swept config column tells
    apart: a mapping set whole by the sweep (``grid: {train: [{lr: 0.01, ...}, {lr: 0.001,
    ...}]}``, or unlabelled cases each setting its own ``model``) is no column of the tables,
    so the tables, figures and claims, which know a cell by its label and swept columns
    (``swept_keys``), made one cell of both points: its mean took one point's seeds and the
    other's runs were left out, without a word."""
    flats = per_point(runs, RunConfig.flat)
    keys = swept_keys(runs, flats)
    first: dict[tuple, tuple[RunConfig, dict[str, Any]]] = {}
    for r, flat in zip(runs, flats):
        cell = (r.label, r.seed, tuple(norm(flat.get(k)) for k in keys))
        a, fa = first.setdefault(cell, (r, flat))
        if a.run_id == r.run_id:
            continue
        diff = [k for k in dict.fromkeys([*fa, *flat]) if fa.get(k) != flat.get(k)]
        whole = sorted({k for k in (*a.coords, *r.coords) if k not in keys and k != "seed"})
        shown = ", ".join(diff[:3]) + (f" and {len(diff) - 3} more" if len(diff) > 3 else "")
        raise SpecError([
            f"{spec.path}: [profile {profile}] sweep points {a.index} and {r.index} "
            f"({'label ' + repr(r.label) if r.label else 'no label'}) differ only in {shown}, set "
            f"inside {', '.join(whole) or 'a mapping'} as a whole: the tables, figures and claims know "
            "a cell by its label and swept keys, so both would be one cell (one point's runs "
            "left out); sweep those keys themselves (e.g. grid: {"
            f"{diff[0] if diff else 'train.lr'}: [...]}}) or give each point its own case label"])


def refuse_inert_points(spec: Spec, profile: str, runs: list[RunConfig], keys: list[str]) -> None:
    """Raise SpecError for two runs of one seed that train the same thing (``keys``, per run:
    ``trained_key``) under two run ids: the sweep varied a setting their models or training
    never read (a TF-TF ``cooper_hybrid`` over ``d_state``, an unused ``seq_lm`` block's key,
    ``optimizer`` at weight_decay 0, ``lr`` at max_steps 0), and the runs got their own ids,
    labels and table rows while they were one run trained twice."""
    first: dict[tuple[str, int], RunConfig] = {}
    for r, key in zip(runs, keys):
        a = first.setdefault((key, r.seed), r)
        if a.run_id == r.run_id:
            continue
        fa, fb = a.flat(), r.flat()
        diff = [k for k in dict.fromkeys([*fa, *fb]) if fa.get(k) != fb.get(k)]
        names = [f"{x.index} ({': '.join(filter(None, [x.label, x.coords_text()])) or 'no label'})"
                 for x in (a, r)]
        why = []
        model_keys = [k for k in diff if k.startswith("model.")]
        spelt = [k for k in model_keys if k in ("model.layers", "model.repeat")]
        unread = [k for k in model_keys if k not in spelt]
        if model_keys:
            layers = "-".join(r.model.to_backbone().layer_names())
        if "model.name" in model_keys:  # a preset beside the backbone it builds: its other keys
            # differ too, in name, not in the model built
            why.append(f"the models {fa.get('model.name')!r} and {fb.get('model.name')!r} build "
                       f"the same blocks ({layers}): one model, configured two ways")
            spelt, unread = [], []
        if spelt:
            why.append(f"both build the layers {layers} (one layer pattern, spelt two ways)")
        if unread:
            why.append(f"no block of the layer pattern ({layers}) reads "
                       f"{'it' if len(diff) == 1 else 'the model keys'}")
        if r.train.total_steps == 0 and any(k.startswith("train.") for k in diff):
            why.append("a run of max_steps 0 evaluates its initial model: no optimisation step "
                       f"reads {'it' if len(diff) == 1 else 'the train keys'}")
        else:
            if any(k.startswith("train.optimizer") for k in diff):
                why.append("Adam and AdamW differ only in how they apply weight_decay, which is 0")
            if any(k.startswith("train.lr_scale") for k in diff):
                why.append("a learning-rate scale of 1 trains at the plain lr")
            if any(k.startswith("train.early_stop") for k in diff):
                why.append("an early stop that never holds stops no run")
            if "train.eval_every" in diff:
                why.append(f"an eval_every of at least the run's {r.train.total_steps:,} steps "
                           "evaluates at step 0 and the last step only")
        shown = [f"{k} {fa.get(k)!r} vs {fb.get(k)!r}" for k in diff
                 if "model.name" not in diff or not k.startswith("model.") or k == "model.name"]
        if "model.name" in diff and len(model_keys) > 1:  # each model's own keys: not one by one
            shown.append(f"the {len(model_keys) - 1} model keys of each model's own layout")
        raise SpecError([f"{spec.path}: [profile {profile}] sweep points {names[0]} and "
                         f"{names[1]} are one training under two run ids (the same model, data "
                         f"and optimisation): they differ only in "
                         f"{', '.join(shown)}, and "
                         f"{'; '.join(why) or 'neither run reads it'}; drop one of the points, or "
                         "that key from the sweep"])


def _swept_or_derived(spec: Spec, axes: list[Axis]) -> set[str]:
    """The keys the points of ``axes`` (a profile's sweep) or a derived value of ``spec`` set,
    read without building the points (``may_plan``, ``unswept_overrides``)."""
    return {k for axis in axes for k in _axis_keys(axis)} | set(spec.derived)


MAY_PLAN_POINTS = 16  # sweep points `may_plan` builds at most to read a profile's settings


def may_plan(spec: Spec, profile: str, overrides: dict[str, Any] | None,
             flats: Iterable[dict[str, Any]]) -> bool:
    """Whether ``expand(spec, profile, overrides)`` may plan one of the runs (another spec's)
    whose configs are ``flats`` (``RunConfig.flat``), judged without expanding it: a run whose
    config differs from a value every run of the profile has (the spec's and the profile's
    settings, then ``overrides``, where no sweep key or derived value can replace them:
    ``train.max_steps`` of a smoke profile) is not among its runs. Those values are compared as
    a run's config holds them (``_settings_as_read``): as given, `layers: SSM TF` and `betas:
    ['0.9', '0.999']` differed from the same run's 'SSM-TF' and [0.9, 0.999], and the reused
    spec's run of that profile trained it again. Cheap: one point is built, not the sweep, so a
    spec `reuse`d by another can be asked about its profiles of 20,000 runs (koren2026-fig6's
    paper: seconds to expand) for nothing. A profile whose settings cannot be applied, or none
    of whose first points validates, may plan them (``expand`` says why not)."""
    prof = spec.profiles.get(profile)
    if prof is None or spec.analytic is not None:
        return False
    base = {k: copy.deepcopy(dict(getattr(spec, k))) for k in SECTIONS}
    try:
        for k, v in [*prof.set.items(), *(overrides or {}).items()]:
            set_dotted(base, k, v, [])
        axes = prof.sweep if prof.sweep is not None else spec.sweep
    except (KeyError, ValueError):
        return True
    swept = _swept_or_derived(spec, axes)
    fixed = [k for k in flatten(base)
             if not any(k == s or k.startswith(s + ".") or s.startswith(k + ".") for s in swept)]
    read = _settings_as_read(spec, base, axes, fixed)
    if read is None:
        return True

    def kind(v: Any) -> str:
        return ("bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float))
                else type(v).__name__)

    kinds = {k: kind(v) for k, v in read.items()}

    def differs(flat: dict[str, Any], k: str) -> bool:
        return k in flat and flat[k] != read[k] and kind(flat[k]) == kinds[k]

    last = None  # the key that ruled out the run before, tried first (the runs of one spec
    # mostly differ from the profile in the same key: 2,000 runs x 100 profiles x every key
    # compared took seconds)
    for flat in flats:
        if last is not None and differs(flat, last):
            continue
        last = next((k for k in read if differs(flat, k)), None)
        if last is None:
            return True
    return False


def unswept_overrides(spec: Spec, profile: str, overrides: dict[str, Any] | None
                      ) -> dict[str, Any] | None:
    """``overrides`` less the keys that ``profile``'s sweep or a derived value sets
    (``replaces``: `expand` refuses them), None when that leaves none or the profile is not
    there: the `--set` under which the profile may plan a run that the whole `--set` made
    (``shared_homes``: `--set model.d_state=8 --set train.max_steps=3` beside a sweep of d_state
    is a run of that profile's `--set train.max_steps=3`). Read without building the sweep's
    points."""
    prof = spec.profiles.get(profile)
    if prof is None or not overrides:
        return None
    axes = prof.sweep if prof.sweep is not None else spec.sweep
    swept = _swept_or_derived(spec, axes)
    left = {k: v for k, v in overrides.items() if not any(replaces(s, k, v) for s in swept)}
    return left or None


def _settings_as_read(spec: Spec, base: dict[str, Any], axes: list[Axis],
                      keys: list[str]) -> dict[str, Any] | None:
    """The dotted ``keys`` of ``base`` (a profile's settings) as a run's validated config holds
    them (``RunConfig.flat``: 'SSM TF' spelled 'SSM-TF', '0.9' read as 0.9), read from the first
    of the profile's sweep points (of ``axes``, built one at a time) that validates among its
    first ``MAY_PLAN_POINTS``, whether or not the constraints keep it (they choose points, and
    koren2026-fig6's full-r12 keeps none of its first 16); a key the validated config lacks is
    left out. None when none of them validates."""
    firsts = [list(itertools.islice(_iter_case_points(a), MAY_PLAN_POINTS)) for a in axes]
    for combo in itertools.islice(itertools.product(*firsts), MAY_PLAN_POINTS):
        labels: list[str] = []
        point: dict[str, Any] = {}
        cfg = copy.deepcopy(base)
        try:
            for lb, ob, _ in combo:
                point = _join(labels, point, lb, ob)
                labels = labels + lb
            for k, v in point.items():
                if k not in (SEEDS_KEY, CONSTRAINTS_KEY):
                    set_dotted(cfg, k, v)
            _apply_derived(cfg, spec.derived)
            typed = validate_sections(cfg)
        except (SectionError, KeyError, ValueError, expr.ExprError):
            continue
        flat = flatten({s: t.model_dump(mode="json") for s, t in zip(SECTIONS, typed)})
        return {k: flat[k] for k in keys if k in flat}
    return None


def unique_runs(runs: list[RunConfig]) -> list[RunConfig]:
    """First occurrence of each run id (a run shown under two labels is trained once)."""
    out: dict[str, RunConfig] = {}
    for r in runs:
        out.setdefault(r.run_id, r)
    return list(out.values())


def layer_spelling_problems(runs: list[RunConfig]) -> list[str]:
    """One line per layer pattern that the runs (of one or every profile) spell two ways: a
    ``seq_lm`` / ``cooper_hybrid`` model with ``layers: [SSM, TF]`` beside ``layers: SSM-TF``
    (or ``SSM-TF`` x ``repeat: 2`` beside ``SSM-TF-SSM-TF``). The tables keep each spelling, so a
    claim, paper value or figure that names one (``where: {model.layers: SSM-TF}``) missed the
    other's cells, without a word ('no cell the claim needs', 'not run in this profile' of a
    model that was trained), and two profiles trained one model under two run ids (refused
    inside one sweep only, ``refuse_inert_points``). Run ids keep the spelling (shipped ids), so
    the spec is asked to spell each pattern one way."""
    built: dict[tuple[str, int], str] = {}  # (layers as given, repeat) -> the layers built
    spellings: dict[str, dict[tuple[str, int], RunConfig]] = {}
    for r in runs:
        m = r.model
        if not (hasattr(m, "layers") and hasattr(m, "to_backbone")):
            continue
        given = (json.dumps(m.layers), int(getattr(m, "repeat", 1) or 1))
        if given not in built:
            built[given] = "-".join(m.to_backbone().layer_names())
        spellings.setdefault(built[given], {}).setdefault(given, r)
    out = []
    for layers, seen in spellings.items():
        if len(seen) < 2:
            continue
        shown = [f"{encode_cell(r.model.layers)}"
                 + (f" x repeat {given[1]}" if given[1] != 1 else "")
                 + f" ([profile {r.profile}] point {r.index}"
                 + f"{' ' + r.label if r.label else ''})" for given, r in list(seen.items())[:3]]
        out.append(f"model.layers: {' and '.join(shown)} build the same layers {layers}, spelt "
                   f"{len(seen)} ways: the tables keep each spelling, so a claim, paper value or "
                   "figure naming one misses the cells of the other (and one model may train under "
                   f"two run ids); spell it one way (e.g. layers: {layers})")
    return out
