"""Library (tasks): the interface shared by every task (synthetic generators and datasets).

A task turns (per-member seeds, split, sample indices) into a batch. Sample ``i`` of split ``s`` for
seed ``r`` is a pure function of (config, r, s, i): the training stream, a fixed training set, and
the validation/test sets are all views of that function, and the three splits never share a stream.

Two kinds of task share this interface:

* synthetic generators (``keep_nth``, ``mqar``): every split is an endless stream, the seed picks
  the stream (``finite = False``, ``split_sizes() -> None``);
* datasets (``lra_*``): each split is a fixed table of rows; sample ``i`` of split ``s`` is row
  ``i`` whatever the seed (members get their own *order* from the training loop's epoch
  permutations), an index past the split's size is an error (``finite = True``,
  ``split_sizes() -> {"train": n, "val": n, "test": n}``). A dataset task loads its data when it is
  constructed, so missing data fails there (``DataUnavailable``), before any training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from pydantic import ConfigDict

from ..util import NoBoolNumbers, refuse_unread

IGNORE = -100  # target value for unsupervised positions (as torch.nn.functional.cross_entropy)

TRAIN, VAL, TEST = 0, 1, 2
SPLITS = {"train": TRAIN, "val": VAL, "test": TEST}


def role_split_problem(key: str, ours: int, theirs: int, low: str, high: str) -> str | None:
    """Why an eval set whose ``key`` (a count of ids in the ``low`` role, the rest ``high``:
    mqar_huang's keys then values, selective_copy's words then number tokens) differs from the
    run's cannot score it: the ids between the two counts change role; None when equal."""
    if ours == theirs:
        return None
    a, b = ours, theirs
    return (f"{key} {b} differs from the run's task ({a}): ids {min(a, b)}..{max(a, b) - 1} "
            f"would be {low if b > a else high} in the set but {high if b > a else low} in "
            "training")


def previous_occurrence(x: torch.Tensor, first: int = 0) -> torch.Tensor:
    """(..., T) int64: for each t, the latest j in [first, t) with x_j == x_t, else -1; x: (..., T)
    integers. A stable sort by value keeps each value's positions in order, so the entry
    before t's in sorted order is its previous occurrence when it holds the same value and
    lies at or after ``first`` (those before come first in each value's run): O(T) memory
    (a (..., T, V) one-hot table, or an (..., T, T) comparison, took gigabytes at T in the
    thousands). Slow reference: ``tests`` compare it with the obvious double loop."""
    order = torch.argsort(x, dim=-1, stable=True)
    xs = x.gather(-1, order)
    same = torch.cat([torch.zeros_like(xs[..., :1], dtype=torch.bool),
                      (xs[..., 1:] == xs[..., :-1]) & (order[..., :-1] >= first)], dim=-1)
    before = torch.cat([torch.full_like(order[..., :1], -1), order[..., :-1]], dim=-1)
    return torch.empty_like(order).scatter_(-1, order,
                                            torch.where(same, before, torch.full_like(order, -1)))


class TaskConfig(NoBoolNumbers):
    """Base of every task config: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str

    def unread(self) -> list[tuple[str, str]]:
        """(field, why) of the fields this config's other settings never let its task read (the
        data is the same whatever they hold); checked by ``refuse_unread_task``."""
        return []

    def eval_unread(self) -> list[tuple[str, str]]:
        """(field, why) of the fields that this config, as an evaluation set (``train.evals``:
        its test split alone is sampled), never reads: ``unread`` and the fields that only its
        training split reads."""
        return self.unread()

    def dtype_problem(self, dtype: str) -> str | None:
        """Why this config's inputs cannot be held in the run's ``train.dtype`` ('float32' or
        'float64'); None when they can. Checked with the run's train section
        (``sweep.check_task_data``): a task config alone does not know its run's dtype."""
        return None


def refuse_unread_task(task: TaskConfig, overrides: dict[str, dict], evals: dict[str, TaskConfig]
                       ) -> None:
    """Raise ValueError for a task field set away from its default that neither the run's task
    nor any evaluation set reads (``TaskConfig.unread``: selective copy's ``p_sparse`` with
    distribution uniform trained the same data under another run id, its label saying otherwise),
    and for an evaluation set's override (``overrides``: ``train.evals``; ``evals`` the sets'
    configs) of a field that set does not read (the set was the run's test split under another
    name)."""
    for name, ov in overrides.items():
        for key, why in evals[name].eval_unread():
            if key in ov:
                raise ValueError(f"train.evals.{name}: {key} {ov[key]!r} is not read {why}: the "
                                 "set would hold the same samples as without it; leave "
                                 f"{key} out")
    read = {k for n, c in evals.items()  # the base's value of a field an eval set reads
            for k in type(task).model_fields if k not in overrides[n]
            and k not in dict(c.eval_unread())}
    try:
        refuse_unread(task, [(k, why) for k, why in task.unread() if k not in read],
                      what="on the same data")
    except ValueError as err:
        raise ValueError(f"task: {err}") from None


@dataclass
class Batch:
    """One batch for a pack of E members.

    x     (E, B, L) int64 token ids, or (E, B, L, d_input) float for continuous inputs (pixels)
    y     per-position targets (E, B, L) int64 (IGNORE where unsupervised), or
          sequence-level targets (E, B) int64 (one class per sequence, e.g. LRA);
          regression tasks (TaskInfo.loss == "mse"): float (E, B, L, C) or (E, B, C), NaN where
          unsupervised (the regression counterpart of IGNORE)
    mask  (E, B, L) bool, True at real (non-padding) positions; None = every position is real.
          Pooled read-outs average over the True positions only.
    x2, mask2  a second input sequence (LRA Retrieval: the second document), else None
    """

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor | None = None
    x2: torch.Tensor | None = None
    mask2: torch.Tensor | None = None


@dataclass(frozen=True)
class TaskInfo:
    """What a model builder (and the training loop) needs to know about the task.

    vocab_size  input token ids are in [0, vocab_size) (token inputs)
    n_classes   targets are in [0, n_classes)
    seq_len     L, the longest input length
    target      "per_position": y is (E, B, L); "sequence": y is (E, B), one label per sequence
                (the model pools over positions, e.g. mean over the real positions)
    input_dim   None: token inputs; k: continuous inputs with k channels (x is (E, B, L, k))
    dual        True: every example has two input sequences (x, x2), classified jointly
    loss        "cross_entropy": integer class targets (accuracy is reported);
                "mse": float regression targets with n_classes outputs, y is (E, B, L, C) or
                (E, B, C) (no accuracy; loss = mean squared error over the outputs)
    next_token  True: the target at t is the input at t + 1 (language modelling), so a model
                must not read ahead (no bidirectional block)
    ahead       which targets are later inputs, though not every one is (needle: the target at
                the marker is the next input, the needle): a model must not read ahead there
                either (a bidirectional block read the needle it was to predict); None: every
                target lies at or before its position (or ``next_token`` says it)
    fewest_supervised  per-position targets: the fewest supervised positions that the most
                supervised sample of any batch surely has (None: every position; 0: none is
                sure). Evaluation reads out the supervised positions only when they are at most
                half (``train.supervised_positions``): the memory estimate's lower bound counts
                ``output_positions`` of them, not L
    most_supervised  per-position targets: the most supervised positions any sample can have
                (None: not bounded, up to L). With ``fewest_supervised`` >= 1 it bounds what a
                training step reads out (``read_positions``): the memory estimate counts those
                positions' logits, not L (MQAR: κ of T)
    """

    vocab_size: int
    n_classes: int
    seq_len: int
    target: Literal["per_position", "sequence"] = "per_position"
    input_dim: int | None = None
    dual: bool = False
    loss: Literal["cross_entropy", "mse"] = "cross_entropy"
    next_token: bool = False
    ahead: str | None = None
    fewest_supervised: int | None = None
    most_supervised: int | None = None

    @property
    def output_positions(self) -> int:
        """The fewest positions per sample that surely reach the read-out in an evaluation
        (``train.supervised_positions``: the K supervised ones of the most supervised sample
        when K <= L/2 and K >= 1, else all L): L without ``fewest_supervised``."""
        K, L = self.fewest_supervised, self.seq_len
        if K is None or self.target != "per_position" or self.loss != "cross_entropy" or 2 * K > L:
            return L
        return max(K, 1)

    @property
    def read_positions(self) -> int:
        """The most positions per sample a training step reads out (``train.supervised_positions``
        gathers the K supervised ones of the most supervised sample when 1 <= K <= L/2, else
        takes all L): ``most_supervised`` where every sample surely has one (a batch without a
        supervised position reads all L) and it is at most L/2, else L. An upper bound: the
        read-out's memory counted at it is never below what the step keeps. Bounds that
        contradict each other (a task's ``most_supervised`` below its ``fewest_supervised``, e.g.
        0: one of them is wrong) give L, as none (it took 1 position: an estimate below use)."""
        most, fewest, L = self.most_supervised, self.fewest_supervised, self.seq_len
        if (most is None or fewest is None or fewest < 1 or most < fewest or 2 * most > L
                or self.target != "per_position" or self.loss != "cross_entropy"):
            return L
        return max(most, 1)


def incompatibility(base: TaskInfo, other: TaskInfo) -> str | None:
    """Why a model built for ``base`` cannot be evaluated on batches of ``other`` (None: it can).

    Used for named evaluation sets (``train.evals``): the sequence length may differ (e.g. longer
    test sequences); inputs, targets and outputs must keep their meaning and fit the model.
    """
    for field in ("n_classes", "target", "input_dim", "dual", "loss"):
        if getattr(base, field) != getattr(other, field):
            return f"{field} {getattr(other, field)!r} differs from the run's task ({getattr(base, field)!r})"
    if base.input_dim is None and other.vocab_size > base.vocab_size:
        return f"vocab_size {other.vocab_size} exceeds the run's task ({base.vocab_size})"
    return None


def eval_set_problem(base: Task, other: Task) -> str | None:
    """Why ``other`` (built from a named evaluation set, ``train.evals``) cannot evaluate runs of
    ``base`` (None: it can): its inputs or outputs do not fit (``incompatibility``), it has no
    test rows to evaluate (a dataset whose test split is empty: every pack failed with an
    IndexError after training), or it asks another question (``Task.eval_problem``)."""
    why = incompatibility(base.info, other.info)
    if why:
        return why
    sizes = other.split_sizes()
    if sizes is not None and sizes.get("test") == 0:
        return f"its test split is empty (splits {sizes}): nothing to evaluate on"
    return base.eval_problem(other)


def fixed_split_error(task: type[Task] | Task, sizes: dict[str, int] | None,
                      train_size: int | None) -> str | None:
    """Why ``train.train_size`` does not fit a dataset task's training split, or its validation or
    test split is empty (None: they fit).

    A dataset task (``finite``) always needs a fixed training set of ``train_size`` rows, at most
    its training split; ``sizes`` None = the split sizes are not known here (data not loaded).
    """
    if not task.finite:
        return None
    n = f"{sizes['train']} rows" if sizes else "a fixed number of rows"
    if train_size is None:
        return (f"task {task.name} has a fixed training split ({n}): set train.train_size (at most "
                "the split size) with train.epochs or train.max_steps")
    if sizes is not None and train_size > sizes["train"]:
        return (f"train.train_size {train_size} exceeds the training split of task {task.name} "
                f"({n}; splits {sizes})")
    empty = [s for s in ("val", "test") if sizes is not None and sizes.get(s) == 0]
    if empty:  # every run failed its pack at the first evaluation ('no supervised position ...
        # a probability of 0 or 1'): a generated set of 2 images splits into 2 / 0 / 0
        return (f"task {task.name} has an empty {' and '.join(empty)} split"
                f"{'s' if len(empty) > 1 else ''} (splits {sizes}): "
                "nothing to evaluate on; use a larger dataset (e.g. generate more rows)")
    return None


def loss_problem(task: Task, label_smoothing: float, early_stop_metric: str | None) -> str | None:
    """Why a run's training settings do not fit its task's loss (None: they fit): a regression
    task (``info.loss`` 'mse') has no label smoothing and no accuracy to early-stop on. Checked
    by ``validate`` (``sweep.check_task_data``) and before a pack trains (``train.check_pack``):
    only the pack checked it, so a sweep of ``label_smoothing: [0, 0.1]`` said ok and failed the
    whole pack, the member without smoothing included."""
    if task.info.loss != "mse":
        return None
    if label_smoothing:
        return (f"task {task.name} is a regression task: label_smoothing applies to "
                "classification only")
    if early_stop_metric == "val.acc":
        return (f"task {task.name} is a regression task (no accuracy): early-stop on val.loss")
    return None


def batch_problem(b: Batch, info: TaskInfo, E: int, B: int) -> str | None:
    """Why batch ``b`` of E members x B samples breaks the ``Batch`` contract for ``info`` (None:
    it keeps it): input dtype, shape or token ids out of [0, vocab_size); targets of another
    dtype or shape than ``info.loss`` / ``info.target`` give, or class ids outside [0,
    n_classes) other than IGNORE (a -1 for 'unsupervised' was read as supervised class 0 by
    the loss and the accuracy); a mask that is not bool of the inputs' (E, B, L); a second
    input without ``info.dual`` or the reverse. The training loop checks its first training
    batch and each evaluation's first (``train._check_batch``): a new task's slip trained and
    reported nonsense without a word."""
    x, y = b.x, b.y
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        return "x and y must be tensors"
    tokens = info.input_dim is None
    if tokens and (x.dtype != torch.int64 or x.dim() != 3):
        return f"x is {x.dtype} of shape {tuple(x.shape)}: token inputs are int64 (E, B, L)"
    if not tokens and (not x.is_floating_point() or x.dim() != 4 or x.shape[-1] != info.input_dim):
        return (f"x is {x.dtype} of shape {tuple(x.shape)}: continuous inputs are float "
                f"(E, B, L, {info.input_dim})")
    if tuple(x.shape[:2]) != (E, B):
        return f"x has shape {tuple(x.shape)} for {E} members x {B} samples"
    if tokens and x.numel() and (int(x.min()) < 0 or int(x.max()) >= info.vocab_size):
        return (f"x holds token ids {int(x.min())}..{int(x.max())}, outside [0, "
                f"{info.vocab_size}) (vocab_size)")
    L = x.shape[2]
    lead = (E, B, L) if info.target == "per_position" else (E, B)
    if info.loss == "mse":
        if not y.is_floating_point() or tuple(y.shape) != (*lead, info.n_classes):
            return (f"y is {y.dtype} of shape {tuple(y.shape)}: regression targets are float "
                    f"{(*lead, info.n_classes)}")
    else:
        if y.dtype != torch.int64 or tuple(y.shape) != lead:
            return f"y is {y.dtype} of shape {tuple(y.shape)}: class targets are int64 {lead}"
        bad = (y != IGNORE) & ((y < 0) | (y >= info.n_classes))
        if bool(bad.any()):
            return (f"y holds class id {int(y[bad][0])}: class ids are in [0, {info.n_classes}) "
                    f"(n_classes), or {IGNORE} (IGNORE) where unsupervised")
    for name, m, t in (("mask", b.mask, x), ("mask2", b.mask2, b.x2)):
        if m is not None and (m.dtype != torch.bool or t is None
                              or tuple(m.shape) != tuple(t.shape[:3])):
            return (f"{name} is {m.dtype} of shape {tuple(m.shape)}: a mask is bool of its "
                    "inputs' (E, B, L)")
    if (b.x2 is not None) != info.dual:
        return ("x2 is given but the task is not dual" if b.x2 is not None
                else "the task is dual but x2 is missing")
    if b.x2 is not None and (b.x2.dtype != x.dtype or tuple(b.x2.shape[:2]) != (E, B)):
        return f"x2 is {b.x2.dtype} of shape {tuple(b.x2.shape)}, unlike x"
    return None


class Task:
    """Base class: subclasses set ``Config`` and implement ``info`` and ``sample``.

    Dataset tasks set ``finite = True`` and override ``split_sizes`` and ``data_info``. The
    training loop checks the first training batch and the first batch of every evaluation
    against the ``Batch`` contract (``batch_problem``).
    """

    Config: ClassVar[type[TaskConfig]]
    name: ClassVar[str]
    finite: ClassVar[bool] = False  # True: fixed splits of rows (needs train.train_size)
    # True: built from data on this machine (a dataset, a corpus file), which may differ from
    # another's; what it says is checked by the commands that read it (``sweep.expand``'s data)
    reads_data: ClassVar[bool] = False
    # config fields that set which target an input has, unseen in the input (keep_nth's n):
    # field -> what it sets; an evaluation set must keep them (``eval_problem``)
    question: ClassVar[dict[str, str]] = {}

    def __init__(self, config: TaskConfig):
        self.config = config

    @property
    def info(self) -> TaskInfo:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        """seeds: (E,) int64; index: (E, B) int64 sample indices -> Batch of shape (E, B, L)."""
        raise NotImplementedError  # pragma: no cover

    def eval_problem(self, other: Task) -> str | None:
        """Why ``other`` (a named evaluation set: this task with some fields overridden) asks a
        different question than the one the run learns, though its inputs and outputs fit
        (``incompatibility``); None: it is a fair evaluation set. Here: a field of
        ``question`` differs (`train.evals: {x: {n: 3}}` beside keep_nth's n 5 scored the model
        against the 3rd token, a task it never learned, reported as a test accuracy). Tasks
        with other hidden targets extend this."""
        for key, what in self.question.items():
            ours, theirs = getattr(self.config, key), getattr(other.config, key)
            if ours != theirs:
                return (f"{key} {theirs!r} differs from the run's task ({ours!r}): it sets {what}, "
                        "which the inputs do not show, so the set would score the model on a "
                        "question it never learned")
        return None

    def split_sizes(self) -> dict[str, int] | None:
        """Rows per split ({"train", "val", "test"}) of a dataset; None for endless streams."""
        return None

    def data_info(self) -> dict | None:
        """Which data the task reads (source, path relative to the data root, sizes, cache key),
        for the run record; None for generated-on-the-fly tasks."""
        return None
