"""Group runs into packs: runs with equal pack keys (identical shapes) train as one stacked model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Pack:
    key: str
    runs: list

    def __len__(self) -> int:
        return len(self.runs)


def member_bytes(run) -> int:
    """Rough activation memory of one member per training step (float32 bytes).

    Dominated by the scan's (B, L, d, N) intermediates (~8 copies with autograd) and the logits.
    """
    m, t, info_len = run.model, run.train, getattr(run.task, "T", 256)
    d = getattr(m, "d", 64)
    N = getattr(m, "N", 1)
    L = info_len
    layers = getattr(m, "n_layers", 1)
    return 4 * t.batch_size * L * (8 * d * N * layers + 4 * 256 + 16 * d)


def auto_pack_size(runs: list, device: str, budget_bytes: int | None = None) -> int:
    """Largest pack that fits the memory budget (CPU: 2 GiB, GPU: half its free memory), <= 256."""
    if not runs:
        return 1
    if budget_bytes is None:
        if device.startswith("cuda"):
            import torch

            free, _ = torch.cuda.mem_get_info(torch.device(device))
            budget_bytes = free // 2
        else:
            budget_bytes = 2 << 30
    per = max(member_bytes(r) for r in runs)
    cap = 256 if device.startswith("cuda") else 32
    return max(1, min(cap, budget_bytes // max(1, per)))


def plan(runs: list, pack_size: int) -> list[Pack]:
    """Packs in first-appearance order of their key; each at most ``pack_size`` runs."""
    groups: dict[str, list] = {}
    for r in runs:
        groups.setdefault(r.pack_key(), []).append(r)
    packs = []
    for key, rs in groups.items():
        for i in range(0, len(rs), pack_size):
            packs.append(Pack(key, rs[i : i + pack_size]))
    return packs
