"""Stage 2 (sweep): what one run is — its typed sections (task, model, train) and its identity.

A ``RunConfig`` holds the validated task, model and train configs of one run and its seed. Its run
id hashes the config without the fields left at their defaults (``lean``), the seed and
``CODE_VERSION``: the same run in two specs is the same record, a new field whose default keeps the
old behaviour leaves existing ids alone, and a change of what a run computes (including a changed
default value) must bump ``CODE_VERSION``. ``TrainConfig`` is the train section: optimiser,
schedule, budget, evaluation; ``MEMBER_FIELDS`` are the train fields that may differ between the
members of one pack (so may the seed and the model's init).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import to_jsonable_python

from ..models import ModelConfig, member_key
from ..models.layers import LR_GROUPS
from ..tasks import TaskConfig
from ..util import NoBoolNumbers, encode_cell, refuse_unread


class _Strict(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Sanity bounds: far above any paper's settings, low enough that no input can ask for unbounded
# work or memory before a run starts (a step budget is work the user asked for; time_limit_s cuts it)
MAX_STEPS = 10**9
MAX_BATCH = 1 << 16
MAX_SAMPLES = 10**8
# Evaluation is bounded relative to training: a run may pass at most EVAL_RATIO times as many
# samples through its model in evaluation as training does (a training step ~ 3 forward passes
# per sample), or EVAL_FLOOR samples whatever the training (max_steps 0 evaluates only). The
# shipped specs stay below 0.5x (and 1e7 samples); val_size 1e8 on a 40-step run would not.
EVAL_RATIO = 10
EVAL_FLOOR = 10**7
# the smallest normal numbers of the training dtypes: below them a value is flushed to zero
# (util.flush_denormals), so an Adam eps of 1e-45 was eps = 0
FLOAT32_TINY = 1.1754943508222875e-38
FLOAT64_TINY = 2.2250738585072014e-308
FLOAT32_MAX = 3.4028234663852886e38  # the largest finite float32: a float32 run's loss, if finite

# A run's record holds its evaluation history, one row per evaluation, and the store reads back
# records of at most 64 MiB (store.MAX_RECORD_BYTES): a history that may take more than half of
# that is refused before training. Such a run trained to the end, then its record was read back
# as damaged, quarantined, and the run trained again by every `run` (1,000 evaluations of two
# named sets with 20,000-character names made an 80 MB record; so would ~400,000 plain ones).
MAX_HISTORY_BYTES = 32 << 20
# Named evaluation sets of one run (the shipped specs have at most 8): each is a task built,
# checked and evaluated per member, and 6,000 of them (a 100 kB spec) took 33 s of `validate`
# alone, then as many test-set evaluations after training, within the sample bounds above
MAX_EVAL_SETS = 100


class Schedule(_Strict):
    """warmup (linear from warmup_start·lr) -> hold -> decay (cosine/linear) -> flat.

    ``min_lr`` (absolute; instead of ``final_factor``) maps the whole schedule's factors from
    [0, 1] onto [min_lr, lr]: the decay ends at min_lr, and the warm-up starts at
    min_lr + warmup_start·(lr - min_lr), not at warmup_start·lr."""

    kind: Literal["constant", "cosine", "linear"] = Field(
        "constant", description="the decay's shape; constant: no decay")
    warmup_steps: int = Field(0, ge=0, le=MAX_STEPS, description="steps of linear warm-up to lr")
    warmup_start: float = Field(0.0, ge=0.0, le=1.0, description="the warm-up's first lr, as a "
                                "factor of lr")
    hold_steps: int = Field(0, ge=0, le=MAX_STEPS, description="steps at lr after the warm-up, "
                            "before the decay")
    decay_steps: int | None = Field(None, ge=1, le=MAX_STEPS, description="steps of decay "
                                    "(null: the rest of training); then flat at its end")
    final_factor: float = Field(0.0, ge=0.0, le=1.0, description="the decay's end, as a factor "
                                "of lr")
    min_lr: float | None = Field(None, ge=0.0, description="the decay's end as an absolute lr "
                                 "(instead of final_factor)")

    @model_validator(mode="after")
    def _decay(self) -> Schedule:
        if self.min_lr is not None and self.final_factor > 0:
            # min_lr replaces final_factor (optim.LRSchedule rescales the factors between
            # final_factor and 1 onto min_lr..lr): a warm-up factor below final_factor became a
            # NEGATIVE learning rate (gradient ascent; final_factor 1: about -1e9 x lr), and past
            # the warm-up final_factor was quietly ignored
            raise ValueError(f"schedule: give min_lr ({self.min_lr:g}, absolute) or final_factor "
                             f"({self.final_factor:g}, of the lr), not both: min_lr replaces "
                             "final_factor as the end of the decay")
        unused = [f"{k} {v:g}" for k, v in (("final_factor", self.final_factor),
                                            ("decay_steps", self.decay_steps),
                                            ("min_lr", self.min_lr),
                                            ("hold_steps", self.hold_steps))
                  if v is not None and (v > 0 or k == "min_lr")]
        if self.kind == "constant" and unused:  # the default kind: `{final_factor: 0.1}` or
            # `--set train.schedule.min_lr=1e-5` trained at the constant lr, nothing decayed (a
            # hold before no decay holds the same lr)
            raise ValueError(f"schedule: kind 'constant' has no decay, so {', '.join(unused)} "
                             "would be ignored: give kind cosine or linear, or leave them out")
        if not self.warmup_steps:  # the first factor of a warm-up of no steps
            refuse_unread(self, [("warmup_start", "with warmup_steps 0 (it is the warm-up's "
                                  "first lr factor)")], what="with the same learning rates")
        return self


class EarlyStop(_Strict):
    metric: Literal["val.loss", "val.acc"] = Field(..., description="the validation metric "
                                                   "read at each evaluation")
    op: Literal["<", "<=", ">", ">="] = Field(..., description="how it compares with threshold")
    threshold: float = Field(..., description="the run stops at the first evaluation where "
                             "`metric op threshold` holds")

    @model_validator(mode="after")
    def _reachable(self) -> EarlyStop:
        acc, t, op = self.metric.endswith(".acc"), self.threshold, self.op
        if acc and not 0.0 <= t <= 1.0:
            raise ValueError(f"threshold {t:g} for {self.metric}: an accuracy is in "
                             "[0, 1] (a percentage? accuracies are fractions)")
        low = (op == ">=" and t <= 0) or (op == ">" and t < 0)  # every accuracy or loss
        high = acc and ((op == "<=" and t >= 1) or (op == "<" and t > 1))
        what = "an accuracy lies in [0, 1]" if acc else "a loss is never below 0"
        if low or high:  # stopped every run at its first evaluation, step 0: never trained
            raise ValueError(f"{self.metric} {op} {t:g} holds at every evaluation ({what}): "
                             "every run would stop at its first one, untrained")
        # one that never holds (val.acc > 1) only never stops: the koren2026 specs' base
        # setting, as in the paper's repository, which some profiles replace by 0.999
        return self

    @property
    def never_holds(self) -> bool:
        """The condition holds at no evaluation (an accuracy above 1, a loss below 0): the run
        trains as without it."""
        acc, t, op = self.metric.endswith(".acc"), self.threshold, self.op
        high = (op == ">" and t >= 1) or (op == ">=" and t > 1)
        low = (op == "<" and t <= 0) or (op == "<=" and t < 0)
        return (acc and (high or low)) or (not acc and low)

    def met(self, value: Any) -> bool:
        """Whether an evaluation's ``metric`` value (a history row's: NaN or None where it was
        not finite) stops the run: training asks it at each evaluation, the store of a record."""
        if value is None:
            return False
        return {"<": value < self.threshold, "<=": value <= self.threshold,
                ">": value > self.threshold, ">=": value >= self.threshold}[self.op]


_EVAL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_RESERVED_SETS = frozenset({"train", "val", "test"})


class TrainConfig(_Strict):
    """A run's training settings: optimiser, learning-rate schedule, budget, evaluation."""

    optimizer: Literal["adam", "adamw"] = Field(
        "adamw", description="adam: weight_decay as an L2 term of the gradient; adamw: "
        "decoupled weight decay")
    lr: float = Field(1e-3, gt=0, description="the learning rate (the schedule's peak)")
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = Field(
        (0.9, 0.999), description="Adam's (beta1, beta2)")
    eps: float = Field(1e-8, gt=0, le=1, description="Adam's epsilon")
    weight_decay: float = Field(0.0, ge=0, description="weight decay (see optimizer, decay_all)")
    decay_all: bool = Field(
        False,
        description="true: weight_decay reaches every parameter, as torch.optim.AdamW(model."
        "parameters()) in koren2026's and cooper2026's code; false: norms, biases and the SSMs' "
        "A, D and Δ bias are exempt (mamba-ssm's _no_weight_decay tags, the usual LM recipe)")
    schedule: Schedule = Field(Schedule(), description="the learning-rate schedule (section "
                               "train.schedule)")
    batch_size: int = Field(32, ge=1, le=MAX_BATCH, description="training samples per step")
    train_size: int | None = Field(
        None, ge=1, le=MAX_SAMPLES,
        description="null: a fresh batch every step; N: a fixed set of N samples"
    )
    max_steps: int | None = Field(None, ge=0, le=MAX_STEPS,
                                  description="training steps (give max_steps or epochs); 0: "
                                  "evaluate the initial model only")
    epochs: int | None = Field(
        None, ge=1, le=10**6,
        description="passes over the fixed training set, each train_size // batch_size steps of "
        "whole batches: the remainder (train_size mod batch_size samples of that epoch's "
        "shuffle) is left out of the epoch; the record's epochs = stop_step / those steps")
    grad_clip: float | None = Field(None, gt=0, description="clip the gradient's norm to it "
                                    "(null: no clipping)")
    label_smoothing: float = Field(0.0, ge=0.0, lt=1.0, description="cross-entropy label "
                                   "smoothing")
    eval_every: int = Field(500, ge=1, description="steps between validation evaluations")
    val_size: int = Field(1000, ge=1, le=MAX_SAMPLES, description="validation samples of each "
                          "evaluation")
    test_size: int = Field(10000, ge=1, le=MAX_SAMPLES, description="test samples of the final "
                           "evaluation (and of each named evaluation set)")
    eval_batch_size: int = Field(1000, ge=1, le=MAX_BATCH, description="samples per evaluation "
                                 "batch")
    early_stop: EarlyStop | None = Field(None, description="stop a run when a validation metric "
                                         "reaches a value (section train.early_stop)")
    time_limit_s: float | None = Field(None, gt=0, le=10**8, description="stop a run's training "
                                       "after this many seconds")
    dtype: Literal["float32", "float64"] = Field("float32", description="the floating type of "
                                                 "parameters and inputs")
    lr_scale: dict[str, float] = Field(
        default_factory=dict,
        description="multiplier of the member's lr for parameters in that learning-rate group "
        "(groups: 'delta' = every Δ parameter, 'A' = every Λ parameter; others: 1)",
    )
    evals: dict[str, dict[str, Any]] = Field(
        default_factory=dict, max_length=MAX_EVAL_SETS,
        description="named evaluation sets: name -> task-field overrides; after training each "
        "member is also evaluated on the test split of the overridden task (test_size samples), "
        "metrics <name>.loss and <name>.acc (or <name>.mse), e.g. {long: {T: 200}}",
    )

    @model_validator(mode="after")
    def _budget(self) -> TrainConfig:
        for name, ov in self.evals.items():
            if not _EVAL_NAME.fullmatch(name) or name in _RESERVED_SETS:
                raise ValueError(
                    f"evals: name {name!r} must match [A-Za-z][A-Za-z0-9_-]* and not be one of "
                    f"{sorted(_RESERVED_SETS)}")
            if "name" in ov:
                raise ValueError(f"evals.{name}: an evaluation set overrides fields of the run's "
                                 "task; it cannot change the task (name)")
        unknown = sorted(set(self.lr_scale) - set(LR_GROUPS))
        if unknown:  # a typo ('Delta') was quietly ignored: every parameter kept the plain lr
            raise ValueError(f"lr_scale: unknown learning-rate group {unknown[0]!r} (groups: "
                             f"{', '.join(LR_GROUPS)})")
        if any(v < 0 for v in self.lr_scale.values()):
            raise ValueError(f"lr_scale values must be >= 0, got {self.lr_scale}")
        tiny = FLOAT32_TINY if self.dtype == "float32" else FLOAT64_TINY
        if self.eps < tiny:  # flushed to 0 in the update: 0 / 0 for a parameter without a
            # gradient, so every run was recorded 'diverged' at step 1
            raise ValueError(f"eps {self.eps:g} is below the smallest normal {self.dtype} "
                             f"number ({tiny:.3g}): training would use eps = 0 (0 / 0 for a "
                             "parameter whose gradient is 0: every run 'diverges' at step 1)")
        if self.lr < tiny:  # flushed to 0 as well: no parameter moved, and the runs ended 'ok'
            # with exactly the untrained model's numbers (lr 1e-300, 1e-40)
            raise ValueError(f"lr {self.lr:g} is below the smallest normal {self.dtype} number "
                             f"({tiny:.3g}): training would use lr = 0 (no parameter would move; "
                             "the runs would end 'ok', untrained)")
        # weight decay enters the update as wd (adam: a gradient term wd·p) or lr·wd (adamw:
        # lr·wd·p), in the training dtype: below its smallest normal number it is flushed to 0
        # (weight_decay 1e-300 trained as weight_decay 0 under another run id); so is a group's
        # lr·lr_scale (the group trained as with lr_scale 0)
        decay = self.weight_decay * (self.lr if self.optimizer == "adamw" else 1.0)
        if 0 < decay < tiny:
            what = (f"lr x weight_decay is {decay:g} (weight_decay {self.weight_decay:g})"
                    if self.optimizer == "adamw" else f"weight_decay {decay:g} is")
            raise ValueError(f"{what} below the smallest normal {self.dtype} number "
                             f"({tiny:.3g}) of the adam{'w' * (self.optimizer == 'adamw')} "
                             "update: training "
                             "would decay nothing, as weight_decay 0 (give 0, or a larger one)")
        flushed = sorted(g for g, s in self.lr_scale.items() if 0 < self.lr * s < tiny)
        if flushed:
            raise ValueError(f"lr_scale.{flushed[0]} {self.lr_scale[flushed[0]]:g} x lr "
                             f"{self.lr:g} is below the smallest normal {self.dtype} number "
                             f"({tiny:.3g}): that group would train at lr 0, as with lr_scale 0 "
                             "(give 0, or a larger one)")
        if self.grad_clip is not None and self.grad_clip <= self.eps:
            # Adam divides by sqrt(v) + eps: gradients clipped to a norm below eps make each
            # update about grad_clip / eps of the lr (1e-300: no parameter moved, status ok)
            raise ValueError(f"grad_clip {self.grad_clip:g} is not above eps {self.eps:g}: every "
                             "update would be about grad_clip / eps of the lr (the run would "
                             "end 'ok' where it started)")
        if self.dtype == "float32":  # the moments are updated in the training dtype
            import struct

            held = [struct.unpack("f", struct.pack("f", b))[0] for b in self.betas]
            if max(held) >= 1.0:  # beta2 0.99999999: v stayed 0, every run 'diverged' at step
                # 1; beta1 so: m stayed 0, the runs ended 'ok' untrained
                raise ValueError(f"betas {list(self.betas)}: {max(self.betas)!r} is 1.0 in "
                                 "float32 (the moments would never change); at most 0.9999999")
        if self.decay_all and self.weight_decay == 0:  # nothing decays either way: the same
            # training under another run id
            raise ValueError("decay_all true is not read with weight_decay 0 (no parameter "
                             "decays either way): the run would train as without it under "
                             "another run id; leave decay_all out or give a weight_decay")
        shrink = self.lr * self.weight_decay * max([1.0, *self.lr_scale.values()])
        if self.optimizer == "adamw" and shrink >= 1:  # p -= lr * wd * p: each step zeroed
            # (or flipped the sign of) every decayed weight, and the runs ended 'ok' untrained
            scaled = " x the largest lr_scale" if shrink > self.lr * self.weight_decay else ""
            raise ValueError(f"lr x weight_decay{scaled} is {shrink:g} (lr {self.lr:g}, "
                             f"weight_decay {self.weight_decay:g}): AdamW multiplies each decayed "
                             "weight by 1 - lr x weight_decay every step, which must stay above 0 "
                             "(lr x weight_decay < 1)")
        stop = self.early_stop
        if (stop is not None and self.dtype == "float32" and not stop.metric.endswith(".acc")
                and stop.op in ("<", "<=") and stop.threshold >= FLOAT32_MAX):
            # every finite float32 loss is at most FLOAT32_MAX (a NaN or inf one is a divergence):
            # `val.loss < 1e308` stopped every run at its first evaluation, step 0, untrained
            raise ValueError(f"early_stop: {stop.metric} {stop.op} {stop.threshold:g} holds at "
                             f"every evaluation (a float32 loss is at most {FLOAT32_MAX:.4g}): "
                             "every run would stop at its first one, untrained")
        min_lr = self.schedule.min_lr
        if min_lr is not None and min_lr > self.lr:  # the 'decay' rose 500x: lr 0.01 -> 5
            raise ValueError(f"schedule.min_lr {min_lr:g} is above lr {self.lr:g}: the schedule "
                             "would raise the learning rate to it (min_lr <= lr)")
        if (self.max_steps is None) == (self.epochs is None):
            if self.max_steps is None:
                raise ValueError("give exactly one of max_steps or epochs (neither is given)")
            # a profile's `--set train.epochs=3` over a spec's max_steps: say which to drop
            # (it said `e.g. --set train.max_steps=null`, the value a `--set train.max_steps=4`
            # over a spec's epochs had just given: that --set twice is refused)
            raise ValueError(f"give exactly one of max_steps or epochs: both are given (max_steps "
                             f"{self.max_steps}, epochs {self.epochs}); set the other to null: "
                             f"--set train.epochs=null keeps max_steps {self.max_steps}, --set "
                             f"train.max_steps=null keeps epochs {self.epochs}")
        if self.epochs is not None and self.train_size is None:
            raise ValueError("epochs needs a fixed training set (train_size)")
        if self.train_size is not None and self.train_size < self.batch_size:
            raise ValueError(f"train_size={self.train_size} is smaller than batch_size")
        if self.total_steps > MAX_STEPS:
            raise ValueError(f"{self.total_steps:,} steps exceed the limit of {MAX_STEPS:,}")
        s = self.schedule
        if self.total_steps == 1 and s.warmup_steps and s.warmup_start == 0 and not s.min_lr:
            # a warm-up from 0 gives step 0 the learning rate 0, and a one-step run has no other
            # step: no parameter moved, and the run ended 'ok' with the untrained model's numbers
            how = "max_steps 1" if self.max_steps is not None else (
                f"epochs {self.epochs} of {self.steps_per_epoch} step")
            raise ValueError(f"a run of one step ({how}) with schedule.warmup_steps "
                             f"{s.warmup_steps} from warmup_start 0 trains at learning rate 0 "
                             "(the warm-up's first step): no parameter would move and the run "
                             "would end 'ok', untrained; give more steps, a warmup_start above "
                             "0, or no warm-up")
        end = s.warmup_steps + s.hold_steps + (s.decay_steps or 0)
        final = s.min_lr if s.min_lr is not None else self.lr * s.final_factor
        if s.kind != "constant" and s.decay_steps is not None and final == 0 and (
                end < self.total_steps):
            # the decay reaches 0 at step `end` and stays there: koren2026-fig10's quick with
            # max_steps 15000 over the official 7,500-step schedule trained its second half at
            # learning rate 0, a flat curve that read as a plateau of the longer budget
            raise ValueError(
                f"schedule ends at step {end:,} (warmup_steps {s.warmup_steps} + hold_steps "
                f"{s.hold_steps} + decay_steps {s.decay_steps}) at learning rate 0, but the run "
                f"trains {self.total_steps:,} steps: its last {self.total_steps - end:,} steps "
                "would train at learning rate 0 (no parameter would move); give decay_steps "
                f"{self.total_steps - s.warmup_steps - s.hold_steps:,}, leave decay_steps out "
                "(the decay then spans the rest), or a final_factor or min_lr above 0")
        ev, tr = self.eval_samples, self.train_samples
        if ev > max(EVAL_FLOOR, EVAL_RATIO * tr):
            raise ValueError(
                f"evaluation would pass {ev:,} samples through each model (val_size "
                f"{self.val_size:,} at {self.total_steps // self.eval_every + 2:,} evaluations, "
                f"test_size {self.test_size:,}, {len(self.evals)} named sets), more than "
                f"{EVAL_RATIO}x the {tr:,} of its training ({self.total_steps:,} steps of "
                f"{self.batch_size}, about 3 passes a sample) and more than {EVAL_FLOOR:,}: "
                "lower val_size / test_size or raise eval_every")
        if self.history_bytes > MAX_HISTORY_BYTES:
            n = self.total_steps // self.eval_every + 2
            raise ValueError(
                f"the evaluation history would take up to {self.history_bytes / 2**20:,.0f} MiB "
                f"of the run's record ({n:,} evaluations, every {self.eval_every:,} of "
                f"{self.total_steps:,} steps, of {len(self._history_keys)} values each), more "
                f"than the {MAX_HISTORY_BYTES >> 20} MiB a record keeps for it: raise eval_every"
                + (" or name fewer or shorter evaluation sets" if self.evals else ""))
        return self

    @property
    def _history_keys(self) -> list[str]:
        """The names of one history row (train.py's ``eval_rows``; ``mse`` is as long as
        ``acc``)."""
        sets = ["val", "train", *self.evals]
        return ["step"] + [f"{s}.{m}" for s in sets for m in ("loss", "acc")]

    @property
    def history_bytes(self) -> int:
        """An upper bound on the bytes of a run's evaluation history in its record (JSON with
        indent 1): a row every ``eval_every`` steps and at the stop step, each value a line of
        its indented key and a float of at most 24 characters."""
        row = 10 + sum(len(k) + 40 for k in self._history_keys)
        return (self.total_steps // self.eval_every + 2) * row

    @property
    def train_samples(self) -> int:
        """Forward-pass equivalents of the training: steps x batch x 3 (forward + backward)."""
        return 3 * self.total_steps * self.batch_size

    @property
    def eval_samples(self) -> int:
        """Samples one run passes through its model in evaluation, an upper bound (a dataset
        task caps each set at its split's size): every ``eval_every`` steps and at the stop step
        the validation set, the fixed training slice and min(val_size, test_size) of each named
        set; at the end also the test set and each named set's test_size."""
        k = len(self.evals)
        fit = min(self.val_size, self.train_size or self.val_size)
        per_eval = self.val_size + fit + k * min(self.val_size, self.test_size)
        final = self.val_size + fit + (1 + k) * self.test_size
        return (self.total_steps // self.eval_every + 2) * per_eval + final

    def eval_work(self, scale: dict[str, float] | None = None) -> float:
        """``eval_samples`` with each named set's samples weighted by ``scale[name]``, its
        sequence length over the run's (an evaluation set at 50,000x the training length costs
        50,000x per sample: counted as one sample, it ran for days while the dry run said
        seconds)."""
        scale = scale or {}
        k = sum(scale.get(n, 1.0) for n in self.evals)
        fit = min(self.val_size, self.train_size or self.val_size)
        per_eval = self.val_size + fit + k * min(self.val_size, self.test_size)
        final = self.val_size + fit + self.test_size + k * self.test_size
        return (self.total_steps // self.eval_every + 2) * per_eval + final

    def eval_work_problem(self, scale: dict[str, float]) -> str | None:
        """Why the evaluation, its named sets weighted by their length (``eval_work``), is too
        much work beside the training (the bound of ``_check`` on samples), or None."""
        ev, tr = self.eval_work(scale), self.train_samples
        if ev <= max(EVAL_FLOOR, EVAL_RATIO * tr):
            return None
        longer = ", ".join(f"{n} {x:,.0f}x" for n, x in scale.items() if x > 1)
        return (f"evaluation would cost about {ev:,.0f} training-length samples per model (the "
                f"named sets weighted by their sequence length over the run's: {longer}), more "
                f"than {EVAL_RATIO}x the {tr:,} of its training and more than {EVAL_FLOOR:,}: "
                "shorten the sets or lower test_size / val_size or raise eval_every")

    @property
    def steps_per_epoch(self) -> int | None:
        return None if self.train_size is None else self.train_size // self.batch_size

    @property
    def total_steps(self) -> int:
        if self.max_steps is not None:
            return self.max_steps
        return self.epochs * self.steps_per_epoch  # type: ignore[operator]


# fields that may differ between members of one pack (everything else shapes the pack)
MEMBER_FIELDS = frozenset(
    {"lr", "betas", "eps", "weight_decay", "decay_all", "schedule", "max_steps", "epochs",
     "grad_clip", "label_smoothing", "time_limit_s", "lr_scale"}
)


CODE_VERSION = 3  # bump when a change alters what a run computes (incl. a changed default)


def short_keys(keys: list[str]) -> dict[str, str]:
    """Each dotted key by its shortest last parts that no other key of ``keys`` ends in:
    ``model.d_model`` -> ``d_model``, but ``model.d_state`` and ``model.blocks.x.d_state`` ->
    ``model.d_state`` and ``x.d_state`` (both were printed ``d_state``, two values of one name).

    >>> short_keys(["model.d_state", "model.blocks.x.d_state", "train.lr"])
    {'model.d_state': 'model.d_state', 'model.blocks.x.d_state': 'x.d_state', 'train.lr': 'lr'}
    """
    out = {}
    for k in keys:
        parts = k.split(".")
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            if not any(o != k and (o == tail or o.endswith("." + tail)) for o in keys):
                break
        out[k] = tail
    return out


@dataclass
class RunConfig:
    run_id: str
    spec_id: str
    profile: str
    index: int
    label: str
    coords: dict[str, Any]
    seed: int
    task: TaskConfig
    model: ModelConfig
    train: TrainConfig
    extra: dict[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        return {
            "task": self.task.model_dump(mode="json"),
            "model": self.model.model_dump(mode="json"),
            "train": self.train.model_dump(mode="json"),
            "seed": self.seed,
        }

    def typed_coords(self) -> dict[str, Any]:
        """The swept values as the run's config holds them: the spec's text ' 2' for an integer
        field is 2 (``coords`` keeps the spec's raw values); a key that is no config field of
        its own (a whole mapping set at once) as given."""
        flat = self.flat()
        return {k: flat.get(k, v) for k, v in self.coords.items()}

    def coords_text(self, sep: str = ", ", drop: tuple[str, ...] = ()) -> str:
        """``d_model=32, mixer=s6, lr=0.01``: the swept values (``typed_coords``, but the keys in
        ``drop``) by the shortest last parts of their keys that tell them apart
        (``short_keys``), each as the spec means it (``spec_text``)."""
        coords = {k: v for k, v in self.typed_coords().items() if k not in drop}
        names = short_keys(list(coords))
        return sep.join(f"{names[k]}={spec_text(v)}" for k, v in coords.items())

    def identity(self) -> dict[str, Any]:
        """The config without fields at their defaults: what a run id hashes (see :func:`lean`)."""
        return {"task": lean(self.task), "model": lean(self.model), "train": lean(self.train),
                "seed": self.seed}

    def flat(self) -> dict[str, Any]:
        """Dotted config columns, e.g. ``model.d_model`` (nested dicts flattened)."""
        return flatten(self.config())

    def pack_key(self) -> str:
        """Runs with equal pack keys have identical shapes and train together in one pack: the
        seed, the member-level train fields (``MEMBER_FIELDS``) and the model's init (e.g.
        chen2025's γ) may differ between members; the model is compared as the backbone it
        builds (``models.member_key``)."""
        cfg = self.identity()
        cfg.pop("seed")
        cfg["model"] = member_key(self.model)
        cfg["train"] = {k: v for k, v in cfg["train"].items() if k not in MEMBER_FIELDS}
        return _hash(cfg)


# what only an optimisation step reads (a run of max_steps 0 evaluates its initial model)
_OPTIMISATION = ("optimizer", "lr", "betas", "eps", "weight_decay", "decay_all", "schedule",
                 "grad_clip", "lr_scale")


def trained_key(task: TaskConfig, model: ModelConfig, train: TrainConfig,
                ident: dict[str, Any] | None = None) -> str:
    """A hash of what a run with these sections trains: its identity without the settings that
    change nothing there — the model as the backbone it builds with only the blocks its layer
    pattern uses (``cooper_hybrid``'s Mamba keys in a TF-TF model, its attention keys in an
    SSM-SSM one, a ``seq_lm`` block no layer names), the optimizer at weight_decay 0 (Adam's
    coupled and AdamW's decoupled decay both add nothing), a learning-rate scale of 1, any
    eval_every of at least the run's steps (step 0 and the last are evaluated), and what only an
    optimisation step reads (lr, schedule, ...) in a run of max_steps 0. Runs of equal
    keys and seeds but different run ids train the same thing twice (``sweep.expand`` refuses
    them). ``ident``: the sections' ``lean`` dumps when already at hand (a run's identity
    without its seed)."""
    ident = ident or {"task": lean(task), "model": lean(model), "train": lean(train)}
    m = ident["model"]
    if hasattr(model, "layers") and hasattr(model, "to_backbone"):  # only a layer pattern can
        bb = model.to_backbone()  # leave blocks unused (cooper_hybrid, seq_lm)
        names = bb.layer_names()  # the blocks built, in order: 'SSM-TF' x 2 is SSM-TF-SSM-TF,
        # and [SSM, TF] is 'SSM-TF' (a list keeps its own run id)
        m = lean(bb.model_copy(update={
            "blocks": {k: b for k, b in bb.blocks.items() if k in set(names)},
            "layers": "-".join(names), "repeat": 1}))
    t = dict(ident["train"])
    if train.weight_decay == 0:
        t.pop("optimizer", None)
    scales = {g: v for g, v in train.lr_scale.items() if v != 1}  # x 1: the plain lr
    if scales:
        t["lr_scale"] = scales
    else:
        t.pop("lr_scale", None)
    es = train.early_stop  # one that never holds never stops a run (koren2026's val.acc > 1)
    if es is not None and es.never_holds:
        t.pop("early_stop", None)
    # every eval_every from the run's length on evaluates at step 0 and the last step alone
    t["eval_every"] = train.eval_every if train.eval_every < train.total_steps else "first, last"
    if train.total_steps == 0:  # evaluates the initial model only: nothing is optimised
        for k in _OPTIMISATION:
            t.pop(k, None)
    return _hash({"task": ident["task"], "model": m, "train": t})


def spec_text(value: Any) -> str:
    """A value as a spec means it: text that a spec would read as something else (a number
    '1e3', 'true', 'null', '' or ' 2' with spaces, a list) or that would run into the next
    value (', ') in YAML's single quotes; anything else as Python prints it. `show` printed the
    text '1e3' as 1e3, a number."""
    if not isinstance(value, str):  # a list or mapping as JSON, which YAML reads back as it
        return str(encode_cell(value))  # (``['TF']`` was Python's repr, unlike every table's)
    from ..spec import parse_yaml

    try:
        plain = parse_yaml(value) == value and value == value.strip() and ", " not in value
    except (yaml.YAMLError, ValueError):
        plain = False
    return value if plain else "'" + value.replace("'", "''") + "'"


def swept_keys(runs: list[RunConfig], flats: list[dict[str, Any]] | None = None) -> list[str]:
    """The swept config keys that tell the cells of ``runs`` apart beside their labels (sorted):
    those of the sweep's coordinates that are config columns (``flats``: each run's
    ``RunConfig.flat``). A mapping set whole (``grid: {train: [{...}, {...}]}``) is no column:
    its fields are not among them (``sweep.expand`` refuses two points of one label it alone
    tells apart)."""
    flats = [r.flat() for r in runs] if flats is None else flats
    swept = sorted({k for r in runs for k in r.coords if k != "seed"})
    return [k for k in swept if any(k in f for f in flats)]


def per_point(runs: list[RunConfig], fn: typing.Callable[[RunConfig], Any]) -> list[Any]:
    """``[fn(r) for r in runs]``, computed once per sweep point: the seeds of one point share its
    typed configs (``sweep.expand``), so ``fn`` must depend only on them (not on the seed or the
    label), e.g. ``RunConfig.pack_key``. A sweep of 100,000 runs hashed every run's config twice."""
    memo: dict[tuple[int, int, int], Any] = {}
    out = []
    for r in runs:
        key = (id(r.task), id(r.model), id(r.train))  # alive while ``runs`` holds them
        if key not in memo:
            memo[key] = fn(r)
        out.append(memo[key])
    return out


def _is_tag(annotation: Any) -> bool:
    """A single-valued Literal field (``name: Literal["s6"]``, ``kind: Literal["neox"]``) names a
    type: it is identity even at its default."""
    return typing.get_origin(annotation) is typing.Literal and len(typing.get_args(annotation)) == 1


def lean(m: BaseModel) -> dict[str, Any]:
    """JSON dump of a config without the fields at their defaults, at every nesting level, keeping
    every type tag and ``name``. Two configs that compute the same thing give the same dump, and
    adding a field whose default keeps the old behaviour does not change it."""

    def enc(v: Any) -> Any:
        if isinstance(v, BaseModel):
            return lean(v)
        if isinstance(v, dict):
            return {str(k): enc(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [enc(x) for x in v]
        return to_jsonable_python(v)

    out: dict[str, Any] = {}
    for fname, always, default in _lean_fields(type(m)):
        v = getattr(m, fname)
        if always or v != default:
            out[fname] = enc(v)
    return out


@functools.cache
def _lean_fields(cls: type[BaseModel]) -> tuple[tuple[str, bool, Any], ...]:
    """(field, always kept, default) of a config class, worked out once per class (``lean`` runs
    for every run of a sweep): ``name``, type tags and required fields are always kept."""
    return tuple((fname, fname == "name" or _is_tag(f.annotation) or f.is_required(),
                  None if f.is_required() else f.get_default(call_default_factory=True))
                 for fname, f in cls.model_fields.items())


def run_id_of(identity: dict[str, Any], code: Any = CODE_VERSION) -> str:
    """The run id of a run's identity (``RunConfig.identity()``) under code version ``code``."""
    return _hash({**identity, "code": code})


def _hash(obj: Any, n: int = 12) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:n]


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


