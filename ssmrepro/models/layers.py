"""Packed layers: every parameter carries a leading ensemble dimension E.

A pack of E runs with identical shapes trains as one module. Member e only ever touches slice e of
each parameter, and each slice is initialised from the member's own generator, so a member trained in
a pack of E gets the same parameters as when trained alone (tests/test_pack_equivalence.py).

Conventions: activations are (E, B, L, d); ``reset_member(e, g)`` (re)initialises slice e from the
torch.Generator g, consuming random numbers in a fixed order.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def no_weight_decay(p: nn.Parameter) -> nn.Parameter:
    """Tag a parameter as excluded from weight decay (read by ssmrepro.optim)."""
    p._no_weight_decay = True  # type: ignore[attr-defined]
    return p


def _uniform_(t: torch.Tensor, bound: float, g: torch.Generator) -> None:
    with torch.no_grad():
        t.copy_((torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1) * bound)


def _normal_(t: torch.Tensor, std: float, g: torch.Generator) -> None:
    with torch.no_grad():
        t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float64) * std)


class PackedModule(nn.Module):
    """Base: holds E and initialises all members from their generators."""

    def __init__(self, E: int):
        super().__init__()
        self.E = E

    def reset_member(self, e: int, g: torch.Generator) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class PackedLinear(PackedModule):
    """y = x W_e + b_e. Init as torch.nn.Linear: U(-1/sqrt(din), 1/sqrt(din)) (or N(0, std))."""

    def __init__(self, E: int, din: int, dout: int, bias: bool = True, init_std: float | None = None):
        super().__init__(E)
        self.din, self.dout, self.init_std = din, dout, init_std
        self.weight = nn.Parameter(torch.empty(E, din, dout))  # (E, din, dout)
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, dout))) if bias else None

    def reset_member(self, e: int, g: torch.Generator) -> None:
        bound = 1.0 / math.sqrt(self.din)
        if self.init_std is None:
            _uniform_(self.weight[e], bound, g)
        else:
            _normal_(self.weight[e], self.init_std, g)
        if self.bias is not None:
            if self.init_std is None:
                _uniform_(self.bias[e], bound, g)
            else:
                with torch.no_grad():
                    self.bias[e].zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, ..., din) -> (E, ..., dout)
        E = x.shape[0]
        lead = x.shape[1:-1]
        x2 = x.reshape(E, -1, self.din)  # (E, M, din)
        if self.bias is None:
            y = torch.bmm(x2, self.weight)
        else:
            y = torch.baddbmm(self.bias.unsqueeze(1), x2, self.weight)  # (E, M, dout)
        return y.reshape(E, *lead, self.dout)


class PackedEmbedding(PackedModule):
    """Token embedding table per member, init N(0, 1) as torch.nn.Embedding."""

    def __init__(self, E: int, vocab: int, d: int, init_std: float = 1.0):
        super().__init__(E)
        self.init_std = init_std
        self.weight = nn.Parameter(torch.empty(E, vocab, d))  # (E, V, d)

    def reset_member(self, e: int, g: torch.Generator) -> None:
        _normal_(self.weight[e], self.init_std, g)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        E = ids.shape[0]
        rows = torch.arange(E, device=ids.device).view(E, *([1] * (ids.dim() - 1)))
        return self.weight[rows, ids]


class PackedNorm(PackedModule):
    """LayerNorm (weight + bias) or RMSNorm (weight) over the last dim, per member."""

    def __init__(self, E: int, d: int, kind: str = "layernorm", eps: float = 1e-5):
        super().__init__(E)
        if kind not in ("layernorm", "rmsnorm"):
            raise ValueError(f"unknown norm {kind!r}")
        self.kind, self.d, self.eps = kind, d, eps
        self.weight = no_weight_decay(nn.Parameter(torch.empty(E, d)))
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, d))) if kind == "layernorm" else None

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.weight[e].fill_(1.0)
            if self.bias is not None:
                self.bias[e].zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, ..., d)
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (self.d,)
        if self.kind == "layernorm":
            y = F.layer_norm(x, (self.d,), eps=self.eps)
            return y * self.weight.view(shape) + self.bias.view(shape)
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * self.weight.view(shape)


def make_norm(E: int, d: int, kind: str) -> nn.Module:
    return nn.Identity() if kind == "none" else PackedNorm(E, d, kind)


def reset_members(model: nn.Module, seeds: list[int]) -> None:
    """Initialise member e of every packed submodule from torch.Generator(seed_e), in module order."""
    for e, s in enumerate(seeds):
        g = torch.Generator().manual_seed(int(s))
        for m in model.modules():
            if isinstance(m, PackedModule):
                m.reset_member(e, g)
