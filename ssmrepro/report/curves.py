"""Stage 5 (report): learning curves — the evaluation history of every run as one compact table.

Each run record keeps its evaluation history (``train.train_pack``: one row per evaluation with
``step``, ``val.loss`` / ``val.acc``, ``train.loss`` / ``train.acc`` and ``<name>.loss`` /
``<name>.acc`` of every named evaluation set). :func:`curve_table` flattens the histories of a
profile's runs into ``curves.csv`` (written beside ``results.csv`` by the outputs stage whenever a
figure draws curves), so the figures rebuild without raw run records:

    run_id, label, <cell keys>..., seed, status, step, samples, <metric>...  (one row per evaluation)

(``run_id`` joins a row to its run in ``results.csv``.) For example::

    run_id,label,model.d_model,seed,status,step,samples,val.loss,val.acc,train.loss,train.acc
    3f2a9c01d4e7,Mamba,32,0,ok,0,0,4.1589,0.0912,4.1602,0.0871
    3f2a9c01d4e7,Mamba,32,0,ok,500,32000,1.2034,0.4410,1.1877,0.4523

``samples`` = step × batch size (training samples seen). Metrics are rounded to 5 decimals, or
to 5 significant digits where 5 decimals would keep fewer (``round_metric``).
"""

from __future__ import annotations

import math

import pandas as pd

from ..sweep import flatten
from .columns import LABEL, RUN_ID, SEED, STATUS

STEP, SAMPLES = "step", "samples"
CURVE_X = (STEP, SAMPLES)
HISTORY_SETS = ("val", "train")  # recorded for every run; named evaluation sets add theirs


def round_metric(v: float) -> float:
    """``v`` rounded to 5 decimals, but to 5 significant digits below 0.1: a validation MSE of
    3e-8 was written 0.0 (yu2025-fig6: 746 of its losses), and a log-scale loss curve drawn
    from the table fell off the axis at its last value above 5e-6 and came back from nowhere
    at a spike."""
    if not math.isfinite(v) or v == 0:
        return v
    return round(v, max(5, 4 - math.floor(math.log10(abs(v)))))


def curve_table(records: list[dict], keys: list[str], metrics: list[str] | None = None
                ) -> pd.DataFrame:
    """The histories of ``records`` (finished run records), one row per evaluation.

    ``keys``: the cell key columns (label first); ``metrics``: history columns to keep (None:
    all). Rows keep the order of ``records`` (the profile's run order) and of each history.
    """
    rows = []
    extra = [k for k in keys if k != LABEL]
    for rec in records:
        hist = rec.get("history") or []
        if not hist:
            continue
        flat = flatten(rec.get("config") or {})
        batch = flat.get("train.batch_size") or 0
        cell = {RUN_ID: rec.get(RUN_ID), LABEL: rec.get(LABEL, ""), **{k: flat.get(k) for k in extra},
                SEED: rec.get(SEED), STATUS: rec.get(STATUS)}
        for h in hist:
            vals = {k: v for k, v in h.items() if k != STEP and (metrics is None or k in metrics)}
            step = int(h.get(STEP, 0))
            rows.append({**cell, STEP: step, SAMPLES: step * int(batch),
                         **{k: math.nan if v is None else round_metric(float(v))  # None: a
                            for k, v in vals.items()}})  # NaN/inf evaluation (diverged)
    return pd.DataFrame(rows)


def history_metric_sets(metric: str) -> str:
    """The evaluation set a history metric belongs to: 'val.acc' -> 'val', 'ood.loss' -> 'ood'."""
    return metric.rsplit(".", 1)[0]
