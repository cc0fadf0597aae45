"""Tool (bench): FLOPs and bytes of one training step, counted op by op (for the roofline).

:func:`count` runs a step once under a ``TorchDispatchMode`` that sees every aten op the step
executes (forward, backward and optimiser) and adds up:

- **FLOPs**: matmuls, convolutions and attention by torch's own formulas
  (``torch.utils.flop_counter.flop_registry``: 2mnk for a matmul; an in-place product and the
  CPU flash attention by their twins' formulas, ``_SAME_FLOPS``); every other op that computes
  (pointwise, reductions, the scans' elementwise recurrences) one FLOP per element of its largest
  operand or result; views, copies and fills none.
- **bytes**: every tensor operand and result of every computing op, each counted once per op
  (``nbytes``; a tensor given as ``out=`` is the result, an in-place op's ``self`` is read and
  written: two). This is the traffic if nothing stayed in cache between ops — an upper bound on the
  memory traffic, so the arithmetic intensity FLOPs / bytes is a lower bound.

Worked example: ``torch.mm`` of (64, 32) by (32, 16) in float32 counts 2·64·32·16 = 65,536 FLOPs
and (64·32 + 32·16 + 64·16)·4 = 14,336 bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

# ops that move or create data without arithmetic: no FLOPs, and their bytes are not counted
# (a view moves nothing; copies are counted as traffic below)
_FREE = {
    "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "slice", "select",
    "unsqueeze", "squeeze", "as_strided", "alias", "detach", "empty", "empty_like", "empty_strided",
    "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "new_zeros", "new_ones", "fill_", "zero_", "split", "split_with_sizes", "chunk",
    "unbind", "lift_fresh", "_to_copy", "arange", "scalar_tensor", "is_same_size", "_local_scalar_dense",
    "set_", "resize_", "diagonal", "narrow", "unfold", "movedim", "flatten", "unflatten",
}
# ops that copy data: bytes, no FLOPs
_COPY = {"copy_", "clone", "cat", "stack", "index_select", "gather", "scatter", "scatter_add",
         "index_put_", "index", "embedding", "embedding_dense_backward", "constant_pad_nd", "flip",
         "roll", "repeat", "where", "masked_fill", "slice_backward", "select_backward",
         "index_add_", "new_zeros"}


# ops torch's formulas miss that compute as another op does (the same arguments first): the CPU
# flash attention (its CUDA twin's formula) and in-place products (baddbmm_: baddbmm's). They
# were counted one FLOP per element: an attention layer's step, 4·B·H·L²·E FLOPs forward, as
# the size of its largest operand
_SAME_FLOPS = {
    "_scaled_dot_product_flash_attention_for_cpu": "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu_backward":
        "_scaled_dot_product_flash_attention_backward",
}


def _formula(packet):
    """torch's FLOP formula of an aten op (``flop_registry``), or of the op it computes as
    (``_SAME_FLOPS``, an in-place ``name_``'s ``name``), or None."""
    if packet in flop_registry:
        return flop_registry[packet]
    name = packet.__name__
    twin = _SAME_FLOPS.get(name, name[:-1] if name.endswith("_") else None)
    op = getattr(torch.ops.aten, twin, None) if twin else None
    return flop_registry.get(op) if op is not None else None


@dataclass(frozen=True)
class Counts:
    flops: float
    bytes: float
    ops: int  # aten ops that computed or copied

    @property
    def intensity(self) -> float:
        """FLOPs per byte (a lower bound: bytes are an upper bound)."""
        return self.flops / self.bytes if self.bytes else 0.0


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.flops = 0.0
        self.bytes = 0.0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        name = packet.__name__
        if name in _FREE:
            return out
        # an out= tensor is the op's result, counted once with it (it was counted as an operand
        # too: the bytes of a step 4-15 % high, its intensity that much low)
        outs = {a.name for a in func._schema.arguments if a.is_out}
        reads = {k: v for k, v in kwargs.items() if k not in outs}
        tensors = [t for t in tree_flatten((args, reads, out))[0] if isinstance(t, torch.Tensor)]
        if not tensors:
            return out
        self.ops += 1
        self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        formula = _formula(packet)
        if formula is not None:
            self.flops += float(formula(*args, **kwargs, out_val=out))
        elif name not in _COPY:
            self.flops += max(t.numel() for t in tensors)
        return out


def count(step: Callable[[], None]) -> Counts:
    """FLOPs, bytes and op count of one call of ``step`` (which it runs once)."""
    mode = _Counter()
    with mode:
        step()
    return Counts(mode.flops, mode.bytes, mode.ops)


__all__ = ["Counts", "count"]
