"""Stage 5 (report): the column names the report and figure code relies on, in one place.

Run tables (``results.csv``) have one row per run: ids, status, metrics in their own namespace
(``metric.test.acc``) and the dotted config (``model.d_model``, ``task.T``, ...); see
docs/columns.md. Cell tables (``summary.csv``) name metrics without the prefix (``test.acc``), as
specs do. Figure kinds and checks name their columns in their typed configs; the defaults below
are the only column names written in the code.
"""

from __future__ import annotations

from ..spec import LABEL_SEP  # noqa: F401  (re-exported)
from ..store import DONE_STATUSES, METRIC_PREFIX  # noqa: F401  (METRIC_PREFIX: re-exported)

LABEL = "label"  # the run's case labels joined by LABEL_SEP, e.g. "(c) trained linear / vs D"
SEED = "seed"
RUN_ID = "run_id"
STATUS = "status"
N_PARAMS = "n_params"
STOP_STEP = "stop_step"
EPOCHS = "epochs"
DEFAULT_METRIC = "test.acc"
FINISHED = DONE_STATUSES  # statuses of finished runs ("error" runs are re-run)
OK = "ok"
DIVERGED = "diverged"

# koren2026 recall grids (MQAR): width, state size and the keys of a regime
WIDTH = "model.d_model"
STATE = "model.d_state"
VOCAB = "task.vocab"
SEQ_LEN = "task.L"
FACTS = "task.kappa"
REGIME = (VOCAB, SEQ_LEN, FACTS)

# huang2025 Fig. 1: one decay-histogram curve per sequence length
DECAY_X = "task.T"

# per-cell bookkeeping columns added by ``aggregate``
N_EXPECTED = "n_expected"  # runs (seeds) of the cell in the profile
SELECT_N = "select.n"  # a cell of `aggregate.select`: its candidates (cells.aggregate)
N_OK = "n_ok"
N_DIVERGED = "n_diverged"
# runs that finished ok but stopped at their train.time_limit_s before their step budget (the
# column is there only when some cell has one)
N_TIME_LIMIT = "n_time_limit"
# runs that finished ok stopped by their train.early_stop at step 0, before any training step:
# numbers of the untrained model (the column is there only when some cell has one)
N_EARLY_STOP_0 = "n_early_stop_0"
EARLY_STOP = "early_stop"
STOP_REASON = "stop_reason"
TIME_LIMIT = "time_limit"
COMPLETE = "complete"  # every expected run of the cell has finished
