"""Stage 6 (plots): per-run learning curves as a long table (``curves.csv`` beside results.csv).

Each run record keeps its evaluation history (``train.train_pack``: one dict per evaluation with
``step``, ``val.loss``, ``val.acc``, ``train.loss``, ``train.acc``; ``.mse`` for regression). The
table has one row per (run, step, metric)::

    run_id, step, metric, value
    3f2a9c01d4e7, 0, val.acc, 0.0912
    3f2a9c01d4e7, 500, val.acc, 0.4410

Join it to ``results.csv`` on ``run_id`` for labels, seeds and configs. The default profile writes
``curves.csv``, others ``curves-<profile>.csv``. Built from run records; without records (a fresh
clone) the committed file is left as it is.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

CURVE_COLUMNS = ["run_id", "step", "metric", "value"]


def curves_table(records: list[dict]) -> pd.DataFrame:
    """The long learning-curve table of ``records`` (records without history add no rows)."""
    rows = []
    for rec in records:
        for h in rec.get("history") or []:
            if not isinstance(h, dict) or "step" not in h:
                continue
            for metric, value in h.items():
                if metric == "step" or not isinstance(value, (int, float)):
                    continue
                v = float(value)
                rows.append((rec["run_id"], int(h["step"]), metric, v if math.isfinite(v) else None))
    df = pd.DataFrame(rows, columns=CURVE_COLUMNS)
    return df.sort_values(["run_id", "metric", "step"], kind="stable").reset_index(drop=True)


def write_curves(store, runs: list, path: Path) -> Path | None:
    """Write ``path`` from the records of ``runs``; None (nothing written) when no run has a
    record with history, so a committed table survives a rebuild without records."""
    seen: set[str] = set()
    records = []
    for r in runs:
        if r.run_id in seen:
            continue
        seen.add(r.run_id)
        rec = store.read(r.run_id)
        if rec is not None:
            records.append(rec)
    df = curves_table(records)
    if df.empty:
        return path if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path
