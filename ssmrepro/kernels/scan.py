"""Library (kernels): diagonal linear scans and the Mamba-1 (S6) selective scan, in pure PyTorch.

Everything here is plain autograd (no custom ``backward``), runs on CPU and GPU, and handles
real and complex tensors in float32 / float64 (complex64 / complex128).

Shape legend (used in docstrings and end-of-line comments)::

    Bt  batch                      L   sequence length
    S   any trailing state shape   D_  channels (Mamba's ``d_inner``)
    N   state size per channel     G   B/C groups (channel d uses group d // (D_ // G))
    Q   chunk length               nc  number of chunks (L0 = nc * Q)

The linear recurrence computed by :func:`diag_scan_ref` and :func:`diag_scan` is::

    h_t = exp(la_t) * h_{t-1} + b_t,     h_{-1} = 0,     Re(la_t) <= 0

Numerical contract of the fast scan: every ``exp`` is taken of a (sum of) ``la`` values, so no
positive real part is ever exponentiated; there is no division by a cumulative decay; decays of
``exp(-50)`` per step, or cumulative products that underflow to 0, are harmless.

Why :func:`diag_scan` is a two-pass chunked scan. Candidates measured on the 2-core AMD EPYC
VM (torch 2.13 CPU, float32, forward + backward, Bt=16, S=(32, 8); ``ssmrepro bench scans``):

* sequential loop (:func:`diag_scan_ref`): L small steps; at this state size it is already
  half memory-bound (~50 ms at L=1024, ~250-300 ms at L=4096);
* log-depth Hillis-Steele with out-of-place ops: log2(L) full-size passes, ~7 s at L=4096;
* intra-chunk masked segment-sum decay matrix: Q times the data, ~4 s at L=4096 (Q=8-16);
* one-pass chunked (local scans + ``cumsum``/``exp`` correction): ~1.5-2x slower than the
  two-pass below, the correction needs ~8 extra full-size passes (forward + backward);
* two-pass chunked (below): ~2Q + nc Python steps on (Bt, nc, *S) slices, ~18 element-wise
  passes over the data against ~10 for the loop. On CPU it wins when the loop is dispatch-bound
  (small Bt*prod(S)): 3-7x for Bt*prod(S) <= 1K; ~1.5x at 4K with 2 idle threads (it is
  multi-threaded, the loop's small ops are not), ~1.1-1.2x with 1 thread; it loses above
  ~6K elements per thread, where :func:`default_chunk` therefore picks the plain loop. On
  GPUs, where the loop is launch-bound, the chunked path is always used (not benchmarked:
  no GPU was available when this was written).

Update (issue 3): on CPU, ``chunk=None`` with Bt * prod(S) >= 512 now runs
:func:`ssmrepro.kernels.inplace.diag_scan_blocked` instead: an autograd Function with an explicit
adjoint backward that walks time in L2-sized blocks (exp of a block into a reused buffer, in-place
steps, no autograd graph, no full-size temporaries besides h, dL/db, dL/dla). Measured
(``--threads 1 --clock cpu``, minima, contended 2-core VM) at Bt=16, S=(32, 8), L=1024: reference
~47-67 ms, two-pass chunked ~41-58 ms, blocked ~25-26 ms; at Bt=8, S=(16, 8) blocked 3.1x vs
chunked 1.7-2.3x; at Bt=4, S=(16, 8) both ~3.5x; below ~512 state elements the chunked scan wins
(dispatch-bound) and stays the default there. An explicit ``chunk`` always selects the two-pass
chunked formulation below (so it stays tested on CPU); on GPUs it is always used.

Caveat for shared machines: with 2 intra-op threads and other processes on the cores, the
chunked path's multi-threaded ops can stall on thread barriers (seen: 10x slower); use
``torch.set_num_threads(1)`` per worker there.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .inplace import diag_scan_blocked

__all__ = [
    "diag_scan_ref",
    "diag_scan",
    "default_chunk",
    "selective_scan_ref",
    "selective_scan",
]

# Below this length the plain sequential loop is as fast as the chunked scan.
_SEQ_MAX_L = 32
# On CPU, per-step states (Bt * prod(S)) at least this large per intra-op thread use the
# sequential loop by default (see default_chunk).
_SEQ_STATE_PER_THREAD = 6144
# On CPU with chunk=None, per-step states (Bt * prod(S)) at least this large use the time-blocked
# in-place kernel (inplace.diag_scan_blocked); below it the two-pass chunked scan is faster.
_BLOCKED_MIN_STATE = 512
# Soft cap on the elements of one per-step slice (Bt * nc * prod(S)) for the default chunking:
# bigger slices fall out of cache and, on Linux/glibc, into mmap'd (page-faulting) allocations.
_SLICE_CAP = 1 << 17


def _check_scan_inputs(la: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Broadcast ``la`` and ``b`` to one shape (Bt, L, *S); promote ``b`` to the state dtype."""
    if la.dim() < 2 or b.dim() < 2:
        raise ValueError(f"la and b need shape (Bt, L, *S), got {tuple(la.shape)}, {tuple(b.shape)}")
    la, b = torch.broadcast_tensors(la, b)
    dtype = torch.promote_types(la.dtype, b.dtype)  # the dtype of h
    if not (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(f"diag scans need float or complex inputs, got {dtype}")
    return la, b.to(dtype)


def _seq_loop(a: Tensor, b: Tensor, h: Tensor | None = None) -> list[Tensor]:
    """Sequential recurrence over dim 1; returns the list of the L states, each (Bt, *S).

    a, b: (Bt, L, *S) (a = exp(la), already exponentiated); h: (Bt, *S) initial state or None.
    ``unbind`` (not ``a[:, t]``) so that autograd gathers the per-step gradients with a single
    ``stack`` instead of one full-size zero-fill per step.
    """
    out = []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1)):
        h = b_t if h is None else (a_t * h).add_(b_t)  # (Bt, *S)
        out.append(h)
    return out


def diag_scan_ref(la: Tensor, b: Tensor) -> Tensor:
    """Obviously-correct sequential diagonal scan (the oracle for :func:`diag_scan`).

    Computes ``h_t = exp(la_t) * h_{t-1} + b_t`` with ``h_{-1} = 0`` by a Python loop over L.

    Args:
        la: (Bt, L, *S) log-decay, real or complex, ``Re(la) <= 0``.
        b:  (Bt, L, *S) input, real or complex (broadcast against ``la``).

    Returns:
        h: (Bt, L, *S) in ``promote_types(la.dtype, b.dtype)``.
    """
    la, b = _check_scan_inputs(la, b)
    a = torch.exp(la)  # (Bt, L, *S)
    h = torch.zeros_like(b[:, 0])  # (Bt, *S)
    hs = []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1)):  # one step per time index, in order
        h = a_t * h + b_t  # (Bt, *S)
        hs.append(h)
    return torch.stack(hs, dim=1)  # (Bt, L, *S)


def default_chunk(L: int, state_numel: int, cpu: bool = True, threads: int | None = None) -> int:
    """Default chunk length Q of :func:`diag_scan` for length L and Bt * prod(S) = state_numel.

    Returns L (= plain sequential loop) when that is expected to be fastest: short sequences,
    and on CPU large per-step states (state_numel >= ~6K elements per intra-op thread), where
    the loop is already memory-bound and the chunked scan's extra passes over the data cost
    more than the Python/autograd overhead they save (measured crossover on a 2-core EPYC VM:
    ~4-8K elements with 1 thread, ~8-16K with 2).

    Otherwise the Python steps are ~2Q + L/Q, minimised at nc = L/Q ~ sqrt(2L). On CPU nc is
    further capped so that a per-step slice (state_numel * nc elements) stays below ~2^17
    elements (bigger slices fall out of cache and, with glibc, become page-faulting mmap
    allocations). A Q dividing L is preferred (no ragged tail) within a factor 1.5 of the target.
    """
    if L <= _SEQ_MAX_L:
        return L
    if cpu:
        threads = threads or torch.get_num_threads()
        if state_numel >= _SEQ_STATE_PER_THREAD * max(1, threads):
            return L
    nc = max(2, round(math.sqrt(2 * L)))
    if cpu:
        nc = max(4, min(nc, _SLICE_CAP // max(1, state_numel)))
    target = max(1, math.ceil(L / nc))
    for dq in range(0, target // 2 + 1):  # nearest divisor of L, searching outwards
        for q in (target - dq, target + dq):
            if 1 <= q < L and L % q == 0 and 2 * q <= 3 * target and 3 * q >= 2 * target:
                return q
    return target


def diag_scan(la: Tensor, b: Tensor, chunk: int | None = None) -> Tensor:
    """Fast, stable diagonal scan: same semantics as :func:`diag_scan_ref`.

    Two-pass chunked formulation (pure autograd). The first L0 = nc*Q steps are cut into nc
    chunks of length Q, all processed in parallel:

    1. ``a = exp(la)``; chunk decay ``P_c = exp(sum of la over chunk c)`` (|P_c| <= 1).
    2. Pass 1 — local scans with zero initial state, all chunks at once (Q steps on
       (Bt, nc, *S) slices); keep only each chunk's final local state.
    3. Carry recurrence between chunks (nc - 1 steps on (Bt, *S)):
       ``carry_{c+1} = P_c * carry_c + local_end_c``, ``carry_0 = 0``.
    4. Pass 2 — rescan every chunk from its carry (Q steps), stacking the states.
    5. A ragged tail (L - L0 < Q steps) continues sequentially from the last state.

    Args:
        la: (Bt, L, *S) log-decay, real or complex, ``Re(la) <= 0``.
        b:  (Bt, L, *S) input (broadcast against ``la``).
        chunk: chunk length Q; default :func:`default_chunk`. ``chunk >= L`` means a plain
            sequential loop. ``None`` on CPU with Bt * prod(S) >= 512: the time-blocked kernel
            :func:`ssmrepro.kernels.inplace.diag_scan_blocked` (same result).

    Returns:
        h: (Bt, L, *S) in ``promote_types(la.dtype, b.dtype)``.
    """
    la, b = _check_scan_inputs(la, b)
    cpu_state = math.prod(la.shape) // max(1, la.shape[1])  # Bt * prod(S)
    if chunk is None and la.device.type == "cpu" and cpu_state >= _BLOCKED_MIN_STATE:
        return diag_scan_blocked(la, b)  # CPU default: time-blocked kernel (inplace.py)
    Bt, L = la.shape[:2]
    S = tuple(la.shape[2:])
    if L == 0:
        return b.clone()
    numel_S = math.prod(S)
    Q = int(chunk) if chunk is not None else default_chunk(L, Bt * numel_S, la.device.type == "cpu")
    if Q < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    nc = L // Q
    a = torch.exp(la)  # (Bt, L, *S)
    if nc < 2:  # 0. short sequence: plain sequential loop
        return torch.stack(_seq_loop(a, b), dim=1)  # (Bt, L, *S)

    L0 = nc * Q
    tail = L - L0
    if tail:  # split (not slice) so that autograd rebuilds the gradient with one cat
        la0, _ = la.split([L0, tail], dim=1)
        a0, a_tail = a.split([L0, tail], dim=1)
        b0, b_tail = b.split([L0, tail], dim=1)
    else:
        la0, a0, b0 = la, a, b
    av = a0.reshape(Bt, nc, Q, *S).unbind(2)  # Q x (Bt, nc, *S)
    bv = b0.reshape(Bt, nc, Q, *S).unbind(2)  # Q x (Bt, nc, *S)

    # 1. total decay of each chunk (a sum of la's, so Re <= 0)
    P = torch.exp(la0.reshape(Bt, nc, Q, *S).sum(dim=2))  # (Bt, nc, *S)

    # 2. pass 1: chunk-local final states from zero initial state
    h = bv[0]  # (Bt, nc, *S)
    for q in range(1, Q):
        h = (av[q] * h).add_(bv[q])  # (Bt, nc, *S)
    ends = h.unbind(1)  # nc x (Bt, *S)
    Ps = P.unbind(1)  # nc x (Bt, *S)

    # 3. carries: state entering each chunk
    carry = ends[0]  # (Bt, *S) = state after chunk 0
    carries = [torch.zeros_like(carry), carry]
    for c in range(1, nc - 1):
        carry = (Ps[c] * carry).add_(ends[c])  # (Bt, *S)
        carries.append(carry)
    h = torch.stack(carries, dim=1)  # (Bt, nc, *S)

    # 4. pass 2: rescan each chunk from its carry
    hs = []
    for q in range(Q):
        h = (av[q] * h).add_(bv[q])  # (Bt, nc, *S)
        hs.append(h)
    out = torch.stack(hs, dim=2).reshape(Bt, L0, *S)  # (Bt, L0, *S)
    if not tail:
        return out

    # 5. ragged tail: continue sequentially from the last state of the last chunk
    h_tail = _seq_loop(a_tail, b_tail, hs[-1][:, -1])  # tail x (Bt, *S)
    return torch.cat([out, torch.stack(h_tail, dim=1)], dim=1)  # (Bt, L, *S)


# --------------------------------------------------------------------------------------------
# Mamba-1 selective scan (S6), and S4D as its constant-B/C special case
# --------------------------------------------------------------------------------------------


def _bc_kind(X: Tensor, name: str, Bt: int, L: int, D_: int, N: int) -> tuple[str, int]:
    """Classify a B or C tensor: ('const', 1) for (D_, N), ('shared', 1) for (Bt, L, N),
    ('group', G) for (Bt, L, G, N)."""
    if X.dim() == 2 and tuple(X.shape) == (D_, N):
        return "const", 1
    if X.dim() == 3 and tuple(X.shape) == (Bt, L, N):
        return "shared", 1
    if X.dim() == 4 and tuple(X.shape[:2]) == (Bt, L) and X.shape[3] == N:
        G = X.shape[2]
        if G < 1 or D_ % G:
            raise ValueError(f"{name}: D_={D_} is not divisible by the number of groups G={G}")
        return "group", G
    raise ValueError(
        f"{name} must be (D_, N)=({D_}, {N}), (Bt, L, N)=({Bt}, {L}, {N}) or (Bt, L, G, N); "
        f"got {tuple(X.shape)}"
    )


def _input_term(du: Tensor, X: Tensor, kind: str, G: int) -> Tensor:
    """b[b, l, d, n] = du[b, l, d] * B[., n] for the three B layouts; du: (Bt, L, D_)."""
    Bt, L, D_ = du.shape
    N = X.shape[-1]
    if kind == "const":
        return du.unsqueeze(-1) * X  # (Bt, L, D_, N)
    if kind == "shared":
        return du.unsqueeze(-1) * X.unsqueeze(2)  # (Bt, L, D_, N)
    # group g serves the contiguous channel block g*(D_//G) ... (g+1)*(D_//G) - 1
    bg = du.reshape(Bt, L, G, D_ // G, 1) * X.unsqueeze(3)  # (Bt, L, G, D_/G, N)
    return bg.reshape(Bt, L, D_, N)  # (Bt, L, D_, N)


def _contract_c(h: Tensor, C: Tensor, kind: str, G: int) -> Tensor:
    """y[b, l, d] = sum_n C[., n] h[b, l, d, n] for the three C layouts; h: (Bt, L, D_, N)."""
    Bt, L, D_, N = h.shape
    dtype = torch.promote_types(h.dtype, C.dtype)
    h, C = h.to(dtype), C.to(dtype)
    if kind == "const":
        return torch.einsum("bldn,dn->bld", h, C)  # (Bt, L, D_)
    if kind == "shared":
        return torch.einsum("bldn,bln->bld", h, C)  # (Bt, L, D_)
    hg = h.reshape(Bt, L, G, D_ // G, N)  # (Bt, L, G, D_/G, N)
    return torch.einsum("blgkn,blgn->blgk", hg, C).reshape(Bt, L, D_)  # (Bt, L, D_)


def _selective_scan(
    scan,
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None,
    complex_output_scale: float,
    return_state: bool,
    **scan_kwargs,
):
    """Shared body of :func:`selective_scan_ref` / :func:`selective_scan` (``scan`` differs)."""
    if u.dim() != 3 or delta.shape != u.shape:
        raise ValueError(f"u and delta must both be (Bt, L, D_); got {tuple(u.shape)}, {tuple(delta.shape)}")
    Bt, L, D_ = u.shape
    if A.dim() != 2 or A.shape[0] != D_:
        raise ValueError(f"A must be (D_, N) with D_={D_}; got {tuple(A.shape)}")
    N = A.shape[1]
    kB, GB = _bc_kind(B, "B", Bt, L, D_, N)
    kC, GC = _bc_kind(C, "C", Bt, L, D_, N)

    # 1. discretise: log-decay delta*A and Euler input delta*B*u
    la = delta.unsqueeze(-1) * A  # (Bt, L, D_, N)
    b = _input_term(delta * u, B, kB, GB)  # (Bt, L, D_, N)
    # 2. the diagonal scan over L
    h = scan(la, b, **scan_kwargs)  # (Bt, L, D_, N)
    # 3. read-out y_t[d] = sum_n C_t[n] h_t[d, n]
    y = _contract_c(h, C, kC, GC)  # (Bt, L, D_)
    if y.is_complex():
        y = complex_output_scale * y.real  # (Bt, L, D_)
    # 4. skip connection
    if D is not None:
        y = y + D * u  # (Bt, L, D_)
    return (y, h) if return_state else y


def selective_scan_ref(
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    complex_output_scale: float = 1.0,
    return_state: bool = False,
):
    """Reference Mamba-1 selective scan built on :func:`diag_scan_ref` (sequential over L).

    Same arguments and results as :func:`selective_scan`.
    """
    return _selective_scan(diag_scan_ref, u, delta, A, B, C, D, complex_output_scale, return_state)


def selective_scan(
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    chunk: int | None = None,
    complex_output_scale: float = 1.0,
    return_state: bool = False,
):
    """Mamba-1 (S6) selective scan core on :func:`diag_scan`; S4D when B, C, delta are constant.

    For every channel d and state n::

        h_t[d, n] = exp(delta_t[d] A[d, n]) h_{t-1}[d, n] + delta_t[d] B_t[n] u_t[d]
        y_t[d]    = sum_n C_t[n] h_t[d, n]  +  D[d] u_t[d]

    (Euler input discretisation, as in mamba-ssm's kernel; for S4D's ZOH pass
    ``B_zoh = (exp(dt A) - 1) / (dt A) * B`` as a constant B.) delta is used as given: apply
    softplus / delta_bias before calling.

    Complex A (and/or B, C): the state is complex and ``y = complex_output_scale * Re(sum_n ...)``.
    The default scale 1.0 returns the plain real part; mamba-ssm's ``selective_scan_fn`` (and
    S4D's conjugate-pair convention) returns ``2 * Re``: pass ``complex_output_scale=2.0`` to
    match it. The scale is ignored for real states.

    Args:
        u:     (Bt, L, D_) input.
        delta: (Bt, L, D_) step sizes (> 0).
        A:     (D_, N) real or complex, Re(A) <= 0.
        B:     (Bt, L, N) input-dependent, or (D_, N) constant (S4D-style), or (Bt, L, G, N) with
               G groups (channel d uses group d // (D_ // G)); real or complex.
        C:     same layouts as B (independently of B).
        D:     (D_,) skip weights, or None.
        chunk: chunk length of :func:`diag_scan` (default: automatic).
        complex_output_scale: factor on Re(...) for complex states (1.0; 2.0 = mamba-ssm).
        return_state: also return the states h.

    Returns:
        y: (Bt, L, D_) real; and h: (Bt, L, D_, N) (real or complex) if ``return_state``.
    """
    return _selective_scan(diag_scan, u, delta, A, B, C, D, complex_output_scale, return_state, chunk=chunk)
