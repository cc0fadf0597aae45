#!/usr/bin/env python
"""Scan micro-benchmark; the same as ``ssmrepro bench scans`` (see ssmrepro/bench/scans.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ssmrepro.bench.scans import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
