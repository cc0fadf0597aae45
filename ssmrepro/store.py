"""Stage 4: the results store of one spec: results/<paper>/<id>/.

    runs/<run_id>.json     one record per finished run, written atomically (temp file + rename);
                           its presence means "done"
    claims/<run_id>.claim  created with O_EXCL by the worker training the run; removed afterwards.
                           A claim whose process is gone (same host) or that has not been refreshed
                           for ``stale_after`` seconds is taken over
    events.jsonl           append-only log (claim / done / release) — used to audit that no run is
                           trained twice
    results.csv            tidy table, one row per run of the spec's default profile (other
                           profiles: results-<profile>.csv); always rebuildable from runs/
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from .util import HOST as _HOST
from .util import atomic_write_text

DONE_STATUSES = ("ok", "diverged")  # "error" records are re-run


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


def _clean(o: Any) -> Any:
    """Replace NaN/inf by None so records are strict JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def pid_alive(pid: int) -> bool:
    """Whether a process of this host is running (zombies — killed but not yet reaped, common in
    containers whose PID 1 does not reap — count as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


class Store:
    """``reuse``: read-only stores of other specs; a record there with the same run id (same
    config, seed and code version) counts as done here too."""

    def __init__(self, root: Path, stale_after: float = 600.0, reuse: list[Path] | None = None):
        self.root = Path(root)
        self.reuse = [Path(r) for r in reuse or []]
        self.runs = self.root / "runs"
        self.claims = self.root / "claims"
        self.stale_after = stale_after
        self.host = socket.gethostname()

    # ---------------------------------------------------------------- records
    def record_path(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    def read(self, run_id: str) -> dict | None:
        for root in [self.runs] + [r / "runs" for r in self.reuse]:
            try:
                return json.loads((root / f"{run_id}.json").read_text())
            except FileNotFoundError:
                continue
            except json.JSONDecodeError:  # cannot happen with atomic writes; treat as missing
                continue
        return None

    def is_done(self, run_id: str) -> bool:
        rec = self.read(run_id)
        return rec is not None and rec.get("status") in DONE_STATUSES

    def write(self, record: dict) -> None:
        atomic_write_text(
            self.record_path(record["run_id"]),
            json.dumps(_clean(record), indent=1, sort_keys=True, default=_json_default),
        )
        self.log("done", record["run_id"], status=record.get("status"))

    # ---------------------------------------------------------------- claims
    def _claim_path(self, run_id: str) -> Path:
        return self.claims / f"{run_id}.claim"

    def _is_stale(self, path: Path) -> bool:
        try:
            info = json.loads(path.read_text())
            age = time.time() - path.stat().st_mtime
        except (FileNotFoundError, json.JSONDecodeError):
            return True  # vanished or half-written by a killed process
        if info.get("host") == self.host and not pid_alive(int(info.get("pid", -1))):
            return True
        return age > self.stale_after

    def claim(self, run_id: str) -> bool:
        """Try to own a run; True if this process may train it."""
        if self.is_done(run_id):
            return False
        self.claims.mkdir(parents=True, exist_ok=True)
        path = self._claim_path(run_id)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._is_stale(path):
                    return False
                # only one process wins the rename of a stale claim; the others back off
                tomb = path.with_name(f"{path.name}.stale.{os.getpid()}.{time.time_ns()}")
                try:
                    os.rename(path, tomb)
                    os.unlink(tomb)
                except FileNotFoundError:
                    return False
                continue
            with os.fdopen(fd, "w") as f:
                json.dump({"host": self.host, "pid": os.getpid(), "time": time.time()}, f)
            if self.is_done(run_id):  # finished between our check and the claim
                self.release(run_id)
                return False
            self.log("claim", run_id)
            return True
        return False

    def cleanup(self) -> int:
        """Remove claims of finished runs and stale claims (e.g. left by a killed worker between
        writing a record and releasing its claim), and temp files of writers that died on this
        host. Returns how many files were removed."""
        n = 0
        for tmp in list(self.root.glob(".*.tmp")) + list(self.runs.glob(".*.tmp")):
            parts = tmp.name.split(".")  # ['', name..., host, pid, random, 'tmp']
            try:
                host, pid = parts[-4], int(parts[-3])
            except (IndexError, ValueError):
                continue
            if host == _HOST and not pid_alive(pid):
                tmp.unlink(missing_ok=True)
                n += 1
        for path in self.claims.glob("*.claim") if self.claims.exists() else []:
            if self.is_done(path.stem) or self._is_stale(path):
                try:
                    path.unlink()
                    n += 1
                except FileNotFoundError:
                    pass
        return n

    def heartbeat(self, run_ids: Iterable[str]) -> None:
        for r in run_ids:
            try:
                os.utime(self._claim_path(r))
            except FileNotFoundError:
                pass

    def release(self, run_id: str) -> None:
        try:
            self._claim_path(run_id).unlink()
        except FileNotFoundError:
            pass

    # ---------------------------------------------------------------- log and table
    def log(self, event: str, run_id: str, **kw: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"t": time.time(), "event": event, "run_id": run_id, "host": self.host,
                           "pid": os.getpid(), **kw})
        fd = os.open(self.root / "events.jsonl", os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def events(self) -> list[dict]:
        p = self.root / "events.jsonl"
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    def table(self, runs: list) -> pd.DataFrame:
        """One row per run of ``runs`` that has a record: ids, status, metrics, dotted config."""
        rows = []
        for r in runs:
            rec = self.read(r.run_id)
            if rec is None:
                continue
            row: dict[str, Any] = {
                "run_id": r.run_id,
                "profile": r.profile,
                "label": r.label,
                "seed": r.seed,
                "status": rec.get("status"),
                "stop_reason": rec.get("stop_reason"),
                "stop_step": rec.get("stop_step"),
                "epochs": rec.get("epochs"),
                "n_params": rec.get("n_params"),
            }
            row.update({k: v for k, v in (rec.get("metrics") or {}).items()})
            row.update({k: v for k, v in r.flat().items() if k != "seed"})
            row.update(
                {"backend": rec.get("backend"), "device": rec.get("device"),
                 "pack_size": rec.get("pack_size"), "wall_s": rec.get("pack_wall_s"),
                 "torch": rec.get("torch"), "commit": rec.get("commit")}
            )
            # the kernel path each mixer ran, e.g. kernels.S6Core = torch:selective_scan_fused
            row.update({f"kernels.{k}": v for k, v in (rec.get("kernels") or {}).items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def write_csv(self, runs: list, name: str = "results.csv") -> Path:
        df = self.table(runs)
        path = self.root / name
        atomic_write_text(path, df.to_csv(index=False))
        return path
