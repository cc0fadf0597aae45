"""ListOps sanity check: generated data is learnable beyond the majority class.

Generates ListOps with the LRA grammar but a shorter length window (so it runs on a CPU), writes it
in the LRA TSV layout, loads it back with ``load_lra`` (source ``generated``), trains a tiny
classifier (token embedding -> [mean, max, root-operator] pooling -> MLP) for about a minute and
prints test accuracy next to the majority-class baseline.

Usage:
    python scripts/listops_sanity.py [--n-train 2000] [--seconds 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from ssmrepro.bench.timing import bounded, bounded_float  # noqa: E402
from ssmrepro.data import load_lra  # noqa: E402
from ssmrepro.data.listops import (  # noqa: E402
    SPLIT_FILES,
    VOCAB_SIZE,
    generate_listops,
    write_listops_tsv,
)
from ssmrepro.util import docstring  # noqa: E402


class PoolClassifier(nn.Module):
    def __init__(self, vocab: int, d: int = 64, n_classes: int = 10):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(3 * d, 128), nn.GELU(), nn.Linear(128, n_classes))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        e = self.emb(x)  # (B, L, d)
        mask = (torch.arange(x.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1)  # (B, L, 1)
        mean = (e * mask).sum(1) / lengths[:, None]  # (B, d)
        mx = e.masked_fill(~mask, -1e4).max(1).values  # (B, d)
        root = e[:, 0]  # (B, d) root operator token
        return self.mlp(torch.cat([mean, mx, root], -1))  # (B, 10)


EVAL_TOKENS = 1 << 18  # padded tokens per scoring batch (x 64 floats: 64 MiB of embeddings)


def eval_batches(lengths: np.ndarray, tokens: int | None = None) -> list[np.ndarray]:
    """Indices of ``lengths`` (sorted by length) in batches of at most ``tokens`` (default
    ``EVAL_TOKENS``) padded tokens each (one example alone where it is longer)."""
    tokens = EVAL_TOKENS if tokens is None else tokens
    order = np.argsort(lengths, kind="stable")
    out, start = [], 0
    for end in range(1, len(order) + 1):
        if end - start > 1 and (end - start) * int(lengths[order[end - 1]]) > tokens:
            out.append(order[start:end - 1])
            start = end - 1
    if start < len(order):
        out.append(order[start:])
    return out


def accuracy(model: nn.Module, ds) -> float:
    """Accuracy over ``ds`` scored in batches of a bounded size: the whole set in one batch
    (--n-eval up to 2^20 examples, padded to the longest of --max-length up to 100,000 tokens)
    took n x length x 64 floats at once, far beyond any memory."""
    model.eval()
    right = 0
    with torch.no_grad():
        for idx in eval_batches(np.asarray(ds.lengths)):
            b = ds.batch(idx)
            logits = model(torch.from_numpy(b["x"]), torch.from_numpy(b["lengths"]))
            right += int((logits.argmax(-1).numpy() == b["labels"]).sum())
    model.train()
    return right / len(ds)


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or docstring(sys.modules.get(__name__)) or ""  # (stripped under -OO)
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    # bounded: --n-train 0 or --n-eval 0 was an IndexError traceback (max over an empty batch)
    ap.add_argument("--n-train", type=bounded(1, 1 << 20), default=2000)
    ap.add_argument("--n-eval", type=bounded(1, 1 << 20), default=500,
                    help="examples in val and in test each")
    ap.add_argument("--min-length", type=bounded(0, 100_000), default=10)
    ap.add_argument("--max-length", type=bounded(2, 100_000), default=200)
    # a finite time above 0 and at most a day (0, -1 and nan trained no epoch and ended in
    # load_state_dict(None)'s TypeError traceback; inf never stopped)
    ap.add_argument("--seconds", type=bounded_float(0, 86400, "a time"), default=60.0,
                    help="training time budget")
    ap.add_argument("--seed", type=bounded(0, 2**32 - 1), default=0)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        try:  # an empty or too narrow length window was a ValueError traceback
            splits = generate_listops(
                args.n_train, args.n_eval, args.n_eval, args.seed,
                min_length=args.min_length, max_length=args.max_length,
            )  # fmt: skip
        except ValueError as err:
            ap.error(f"--min-length {args.min_length} --max-length {args.max_length}: {err}")
        for split, fname in SPLIT_FILES.items():
            write_listops_tsv(root / "generated" / "listops" / fname, splits[split])
        train, val, test = (load_lra("listops", s, root=root) for s in ("train", "val", "test"))
        print(f"generated + loaded in {time.perf_counter() - t0:.1f} s: {train.describe()}")

        majority = np.bincount(train.labels, minlength=10).argmax()
        baseline = float((test.labels == majority).mean())

        model = PoolClassifier(VOCAB_SIZE)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        rng = np.random.default_rng(args.seed)
        best_val, best_state, epoch = -1.0, None, 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            for idx in np.array_split(rng.permutation(len(train)), max(1, len(train) // 32)):
                b = train.batch(idx)
                logits = model(torch.from_numpy(b["x"]), torch.from_numpy(b["lengths"]))
                loss = nn.functional.cross_entropy(logits, torch.from_numpy(b["labels"]))
                opt.zero_grad()
                loss.backward()
                opt.step()
            epoch += 1
            v = accuracy(model, val)
            if v > best_val:
                best_val, best_state = v, {k: t.clone() for k, t in model.state_dict().items()}
        model.load_state_dict(best_state)
        acc = accuracy(model, test)
        print(f"trained {epoch} epochs in {time.perf_counter() - t0:.0f} s; best val acc {best_val:.3f}")
        print(f"test accuracy {acc:.3f}  vs  majority-class baseline {baseline:.3f} (class {majority})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
