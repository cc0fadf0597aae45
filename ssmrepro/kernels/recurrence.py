"""Library (kernels): the in-place time loops every blocked scan kernel runs on one time block.

A block's buffers are unbound along time (lists of per-step state views): ``Hl[0]`` is the state
entering the block, ``Hl[1..n]`` arrive holding the input terms b_t, ``Al[0..n-1]`` the decays
a_t; ``Gl[0..n-1]`` arrive holding dL/dh_t from the outputs. Used by ``inplace`` (tiled S6),
``narrow_scan`` and ``b2s6_scan``, whatever their state layout.
"""

from __future__ import annotations

import torch


def states_(Hl, Al, n: int) -> None:
    """h_t = a_t h_{t-1} + b_t for the block's n steps, in place (Hl[s + 1] += Al[s] Hl[s])."""
    for s in range(n):
        Hl[s + 1].addcmul_(Al[s], Hl[s])


def adjoint_(Gl, Al, n: int, carry, first: bool, last: bool) -> None:
    """g_t += a_{t+1} g_{t+1} backwards over the block, in place: first adds ``carry`` (a g
    entering from the next block) to the block's last step unless ``last`` (the sequence's last
    block), then, unless ``first`` (its first block), leaves a_{t0} g_{t0} in ``carry`` for the
    block before. For complex decays pass conj(a) (the adjoint runs with it)."""
    if not last:
        Gl[n - 1].add_(carry)
    for s in range(n - 2, -1, -1):
        Gl[s].addcmul_(Al[s + 1], Gl[s + 1])
    if not first:
        torch.mul(Al[0], Gl[0], out=carry)
