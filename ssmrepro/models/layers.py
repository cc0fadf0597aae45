"""Library (models): packed building blocks — every parameter carries a leading ensemble dim E.

A pack of E runs with identical shapes trains as one module. Member e only ever touches slice e of
each parameter, and each slice is initialised from the member's own generator, so a member trained in
a pack of E gets the same parameters as when trained alone (tests/test_pack_equivalence.py).

Conventions: activations are (E, B, L, d); ``reset_member(e, g)`` (re)initialises slice e from the
torch.Generator g, consuming random numbers in a fixed order. A module that owns weight matrices
declares them with ``init_weights() -> [(param_name, fan_in)]`` (read by models.init's gamma scheme).

Contents: parameter tags (``no_weight_decay``, ``lr_group``), packed Linear / Embedding / norms
(Layer, RMS, Batch) / depthwise causal conv / MLP, the scan folding helpers (``fold`` / ``unfold``:
members side by side on a scan's channel axis) and plain einsum / loop references of the linear
map and the conv that mixers' sequential references use.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.backend import causal_conv

# --------------------------------------------------------------------------------------------
# parameter tags and init draws
# --------------------------------------------------------------------------------------------


def no_weight_decay(p: nn.Parameter) -> nn.Parameter:
    """Tag a parameter as excluded from weight decay (read by ssmrepro.optim)."""
    p._no_weight_decay = True  # type: ignore[attr-defined]
    return p


LR_GROUPS = ("delta", "A")  # the learning-rate groups parameters are tagged with (lr_scale keys)


def lr_group(p: nn.Parameter, name: str, cols: tuple[int, int] | None = None) -> nn.Parameter:
    """Tag a parameter (or only its last-dim columns [cols[0], cols[1])) with a learning-rate group
    (one of ``LR_GROUPS``).

    ssmrepro.optim.PackedAdam multiplies the learning rate of tagged entries by the member's
    ``TrainConfig.lr_scale[name]`` (1 when the group is not named there).
    """
    if name not in LR_GROUPS:
        raise ValueError(f"unknown learning-rate group {name!r} (add it to LR_GROUPS)")
    p._lr_group = name  # type: ignore[attr-defined]
    p._lr_group_cols = cols  # type: ignore[attr-defined]
    return p


def _uniform_(t: torch.Tensor, bound: float, g: torch.Generator) -> None:
    with torch.no_grad():
        t.copy_((torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1) * bound)


def _normal_(t: torch.Tensor, std: float, g: torch.Generator) -> None:
    with torch.no_grad():
        t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float64) * std)


# --------------------------------------------------------------------------------------------
# packed modules
# --------------------------------------------------------------------------------------------


class PackedModule(nn.Module):
    """Base: holds E and initialises all members from their generators."""

    def __init__(self, E: int):
        super().__init__()
        self.E = E

    def reset_member(self, e: int, g: torch.Generator) -> None:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} has no reset_member(e, generator) "
                                  "(initialises member e)")


class PackedLinear(PackedModule):
    """y = x W_e + b_e. Init as torch.nn.Linear: U(-1/sqrt(din), 1/sqrt(din)) (or N(0, std))."""

    def __init__(self, E: int, din: int, dout: int, bias: bool = True, init_std: float | None = None):
        super().__init__(E)
        self.din, self.dout, self.init_std = din, dout, init_std
        self.weight = nn.Parameter(torch.empty(E, din, dout))  # (E, din, dout)
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, dout))) if bias else None

    def init_weights(self) -> list[tuple[str, int]]:
        return [("weight", self.din)]

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
    """Token embedding table per member, init N(0, init_std²) (N(0, 1) as torch.nn.Embedding)."""

    def __init__(self, E: int, vocab: int, d: int, init_std: float = 1.0):
        super().__init__(E)
        self.init_std = init_std
        self.weight = nn.Parameter(torch.empty(E, vocab, d))  # (E, V, d)

    def init_weights(self) -> list[tuple[str, int]]:
        return [("weight", self.weight.shape[1])]  # fan-in V (one-hot input) [INFERRED]

    def reset_member(self, e: int, g: torch.Generator) -> None:
        _normal_(self.weight[e], self.init_std, g)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        E, V, d = self.weight.shape
        rows = torch.arange(E, device=ids.device).view(E, *([1] * (ids.dim() - 1)))
        if ids.device.type != "cpu":  # no host sync for the range check below (CUDA graphs)
            return self.weight[rows, ids]
        # CPU: rows of the (E·V, d) table; index_select (backward: index_add) takes ~60% of the
        # time of weight[rows, ids] (backward: accumulating index_put) for a KEEP n-TH pack
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= V):  # another member's row
            raise IndexError(f"token ids must be in [0, {V}), got {int(ids.min())}.."
                             f"{int(ids.max())}")
        flat = (ids + rows * V).reshape(-1)
        return self.weight.reshape(E * V, d).index_select(0, flat).view(*ids.shape, d)


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


class PackedBatchNorm(PackedModule):
    """BatchNorm over all leading positions (B, L, ...) per member and channel, with running stats.

    Train mode: y = (x − μ_batch) / √(σ²_batch + eps) · w + b with μ, σ² (biased) over (B, L) of
    the member's own slice; running_mean / running_var (unbiased σ²) updated with momentum 0.1, as
    torch.nn.BatchNorm1d. Eval mode: the running statistics. Note: in train mode an output at
    position t depends on every position of every sequence in the batch (not causal); in eval mode
    it is a per-position affine map (causal).
    """

    def __init__(self, E: int, d: int, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__(E)
        self.d, self.eps, self.momentum = d, eps, momentum
        self.weight = no_weight_decay(nn.Parameter(torch.empty(E, d)))
        self.bias = no_weight_decay(nn.Parameter(torch.empty(E, d)))
        self.register_buffer("running_mean", torch.zeros(E, d))
        self.register_buffer("running_var", torch.ones(E, d))

    def reset_member(self, e: int, g: torch.Generator) -> None:
        with torch.no_grad():
            self.weight[e].fill_(1.0)
            self.bias[e].zero_()
            self.running_mean[e].zero_()
            self.running_var[e].fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, ..., d)
        E = x.shape[0]
        shape = (E,) + (1,) * (x.dim() - 2) + (self.d,)
        if self.training:
            x2 = x.reshape(E, -1, self.d)  # (E, M, d)
            mean = x2.mean(1)  # (E, d)
            var = x2.var(1, unbiased=False)
            n = x2.shape[1]
            with torch.no_grad():
                unbiased = var * (n / max(n - 1, 1))
                self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), self.momentum)
                self.running_var.lerp_(unbiased.detach().to(self.running_var.dtype), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)


def make_norm(E: int, d: int, kind: str) -> nn.Module:
    """none (identity) | layernorm | rmsnorm | batchnorm."""
    if kind == "none":
        return nn.Identity()
    if kind == "batchnorm":
        return PackedBatchNorm(E, d)
    return PackedNorm(E, d, kind)


class PackedCausalConv(PackedModule):
    """Depthwise causal conv: out_t[c] = Σ_k w[c, k] · x_{t-(W-1)+k}[c] (+ b[c]).

    Init as torch.nn.Conv1d(groups=channels): U(±1/sqrt(W)) for weight and bias.
    """

    def __init__(self, E: int, channels: int, width: int, bias: bool):
        super().__init__(E)
        self.width = width
        self.weight = nn.Parameter(torch.empty(E, channels, width))  # (E, C, W)
        self.bias = nn.Parameter(torch.empty(E, channels)) if bias else None

    def init_weights(self) -> list[tuple[str, int]]:
        return [("weight", self.width)]

    def reset_member(self, e: int, g: torch.Generator) -> None:
        bound = 1.0 / math.sqrt(self.width)
        _uniform_(self.weight[e], bound, g)
        if self.bias is not None:
            _uniform_(self.bias[e], bound, g)

    def forward(self, x: torch.Tensor, activation: str | None = None) -> torch.Tensor:
        """(E, B, L, C) -> (E, B, L, C); ``activation="silu"`` applies SiLU inside the kernel (one
        pass less than a separate F.silu). torch: kernels.conv; cuda: causal_conv1d_fn (W 2-4)."""
        return causal_conv(x, self.weight, self.bias, activation, who=type(self).__name__)


class PackedMLP(nn.Module):
    """fc2(act(fc1(x))): d -> hidden -> d_out (default d); biases on (fc2's optional)."""

    def __init__(self, E: int, d: int, hidden: int, act: str = "gelu", d_out: int | None = None,
                 out_bias: bool = True):
        super().__init__()
        self.fc1 = PackedLinear(E, d, hidden)
        self.fc2 = PackedLinear(E, hidden, d if d_out is None else d_out, bias=out_bias)
        self.act = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, ..., d) -> (E, ..., d_out)
        return self.fc2(self.act(self.fc1(x)))


def reset_members(model: nn.Module, seeds: list[int]) -> None:
    """Initialise member e of every packed submodule from torch.Generator(seed_e), in module order."""
    for e, s in enumerate(seeds):
        g = torch.Generator().manual_seed(int(s))
        for m in model.modules():
            if isinstance(m, PackedModule):
                m.reset_member(e, g)


# --------------------------------------------------------------------------------------------
# scan folding and plain references
# --------------------------------------------------------------------------------------------


def fold(x: torch.Tensor) -> torch.Tensor:
    """(E, B, L, c) -> (B, L, E*c): members side by side on a scan's channel axis."""
    E, B, L, c = x.shape
    return x.permute(1, 2, 0, 3).reshape(B, L, E * c)


def unfold(y: torch.Tensor, E: int) -> torch.Tensor:
    """(B, L, E*c) -> (E, B, L, c)."""
    B, L, Ec = y.shape
    return y.reshape(B, L, E, Ec // E).permute(2, 0, 1, 3)


def linear_ref(x: torch.Tensor, lin: PackedLinear) -> torch.Tensor:
    """(E, ..., din) -> (E, ..., dout) by einsum (independent of PackedLinear's bmm)."""
    y = torch.einsum("e...i,eio->e...o", x, lin.weight)
    if lin.bias is not None:
        y = y + lin.bias.view(lin.bias.shape[0], *([1] * (x.dim() - 2)), -1)
    return y


def conv_ref_step(u: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, t: int) -> torch.Tensor:
    """Causal depthwise conv output at step t, written out: Σ_k w[:, k] u_{t-(W-1)+k} (+ b).

    u: (E, B, L, C); w: (E, C, W); b: (E, C) or None -> (E, B, C).
    """
    W = w.shape[-1]
    out = torch.zeros_like(u[:, :, 0])
    for k in range(W):
        s = t - (W - 1) + k
        if s >= 0:
            out = out + u[:, :, s] * w[:, None, :, k]
    return out if b is None else out + b[:, None, :]


def conv_ref(u: torch.Tensor, conv: PackedCausalConv) -> torch.Tensor:
    """The whole causal conv by :func:`conv_ref_step`, one step at a time: (E, B, L, C)."""
    return torch.stack([conv_ref_step(u, conv.weight, conv.bias, t) for t in range(u.shape[2])], 2)


__all__ = [
    "PackedBatchNorm", "PackedCausalConv", "PackedEmbedding", "PackedLinear", "PackedMLP",
    "LR_GROUPS", "PackedModule", "PackedNorm", "conv_ref", "conv_ref_step", "fold", "linear_ref", "lr_group",
    "make_norm", "no_weight_decay", "reset_members", "unfold",
]
