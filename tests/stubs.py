"""Test-local stand-ins: a tiny E-packed model with pooled heads and a regression task.

``StubModel`` implements the model contract the training loop uses (``features``, ``readout`` with
mask / second input) for token and float inputs, per-position and pooled targets, so the loop can
be tested for every target kind independently of ``ssmrepro.models``. Member e is initialised from
its own seed only, so a pack computes exactly what its members compute alone.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

from ssmrepro.sweep import RunConfig, TrainConfig
from ssmrepro.tasks import TASKS, rng
from ssmrepro.tasks.base import Batch, Task, TaskConfig, TaskInfo


class StubConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Literal["stub"] = "stub"
    d: int = 4


def _pool(h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:  # (E, B, L, d) -> (E, B, d)
    if mask is None:
        return h.mean(2)
    m = mask.to(h.dtype).unsqueeze(-1)
    return (h * m).sum(2) / m.sum(2).clamp(min=1)


class StubModel(nn.Module):
    """Embedding (tokens) or linear encoder (floats) -> running mean -> tanh(W·) -> head.

    Pooled head (info.target "sequence"): mean over mask==True positions; dual inputs: the head
    reads [u, v, u*v, u-v] of the two pooled documents.
    """

    def __init__(self, info: TaskInfo, E: int, seeds: list[int], d: int = 4):
        super().__init__()
        gens = [torch.Generator().manual_seed(int(s)) for s in seeds]

        def param(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.stack([0.5 * torch.randn(*shape, generator=g) for g in gens]))

        self.enc = param(info.input_dim, d) if info.input_dim else param(info.vocab_size, d)
        self.mix = param(d, d)
        self.head = param(4 * d if info.dual else d, info.n_classes)
        self.bias = param(info.n_classes)
        self.pool = info.target == "sequence"

    def features(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, L[, k]) -> (E, B, L, d)
        if x.is_floating_point():
            h = torch.einsum("eblk,ekd->ebld", x, self.enc)
        else:
            E = x.shape[0]
            h = self.enc[torch.arange(E, device=x.device).view(E, 1, 1), x]
        t = torch.arange(1, h.shape[2] + 1, dtype=h.dtype, device=h.device).view(1, 1, -1, 1)
        return torch.tanh(torch.einsum("ebld,edk->eblk", h.cumsum(2) / t, self.mix))

    def readout(self, h, mask=None, h2=None, mask2=None) -> torch.Tensor:
        if self.pool:
            h = _pool(h, mask)  # (E, B, d)
            if h2 is not None:
                v = _pool(h2, mask2)
                h = torch.cat([h, v, h * v, h - v], dim=-1)  # (E, B, 4d)
        y = torch.einsum("e...d,edc->e...c", h, self.head)
        return y + self.bias.view(self.bias.shape[0], *([1] * (y.dim() - 2)), -1)

    def forward(self, x):
        return self.readout(self.features(x))


def use_stub_model(monkeypatch) -> None:
    """Make ``train_pack`` build ``StubModel`` (for runs whose model is a ``StubConfig``)."""
    import ssmrepro.models as models

    monkeypatch.setattr(models, "build_model",
                        lambda cfg, info, E, seeds=None, members=None: StubModel(
                            info, E, seeds or list(range(E)), cfg.d))


class RegConfig(TaskConfig):
    name: str = "test_regression"
    T: int = 6
    V: int = 5
    per_position: bool = False


class Regression(Task):
    """x uniform tokens in [0, V); targets (floats, 2 outputs):

    sequence      y (E, B, 2) = [mean_t x_t / V, x_0 / V]
    per position  y (E, B, T, 2) = [running mean of x / V, x_t / V], NaN at (t=0, output 0)
    """

    Config = RegConfig
    name = "test_regression"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        return TaskInfo(vocab_size=c.V, n_classes=2, seq_len=c.T,
                        target="per_position" if c.per_position else "sequence", loss="mse")

    def sample(self, seeds, split, index) -> Batch:
        c = self.config
        x = rng.randint(rng.key(seeds[:, None], split, index), c.T, 0, c.V)  # (E, B, T)
        xf = x.to(torch.float32) / c.V
        if not c.per_position:
            return Batch(x=x, y=torch.stack([xf.mean(-1), xf[..., 0]], dim=-1))
        t = torch.arange(1, c.T + 1, dtype=torch.float32)
        y = torch.stack([xf.cumsum(-1) / t, xf], dim=-1)  # (E, B, T, 2)
        y[..., 0, 0] = float("nan")
        return Batch(x=x, y=y)


def register_regression(monkeypatch) -> None:
    monkeypatch.setitem(TASKS, Regression.name, Regression)


def make_runs(task: dict, trains: list[dict], seeds: list[int], d: int = 4) -> list[RunConfig]:
    """One RunConfig per (train section, seed) with the stub model."""
    tcfg = TASKS[task["name"]].Config(**task)
    runs = []
    for t in trains:
        for s in seeds:
            runs.append(RunConfig(run_id=f"r{len(runs)}", spec_id="t", profile="p", index=len(runs),
                                  label="", coords={}, seed=s, task=tcfg, model=StubConfig(d=d),
                                  train=TrainConfig(**t)))
    return runs
