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


def block_states_(Hb, Hl, ab, Al, n: int, log2_decay, inputs, h_in=None):
    """A block's decays and states, in place: ``ab[:n]`` = 2^(x ⊙ y) for ``log2_decay`` = (x, y)
    (log2-scaled log-decays, broadcast), ``Hb[0]`` = ``h_in`` (unless None: already there),
    ``Hb[1:n+1]`` = u ⊙ v for ``inputs`` = (u, v) (the input terms), then :func:`states_`.
    Returns the decays ``ab[:n]``."""
    a = torch.mul(*log2_decay, out=ab[:n]).exp2_()
    if h_in is not None:
        Hl[0].copy_(h_in)
    torch.mul(*inputs, out=Hb[1 : n + 1])
    states_(Hl, Al, n)
    return a


def block_adjoint_(Gb, Gl, Al, n: int, out_grad, carry, first: bool, last: bool):
    """``Gb[:n]`` = x ⊙ y for ``out_grad`` = (x, y) (dL/dh_t from the outputs, e.g. gy_t C_t),
    then :func:`adjoint_`. Returns ``Gb[:n]``, the block's dL/dh."""
    g = torch.mul(*out_grad, out=Gb[:n])
    adjoint_(Gl, Al, n, carry, first, last)
    return g
