"""TEST-ONLY SUPPORT (never imported by ssmrepro/): pure-PyTorch emulators of the three CUDA
kernel APIs that the ``cuda`` backend calls.

Written by us from the documented semantics, layouts and checks in ``notes/kernels.md`` §1
(mamba-ssm 2.3.2.post1, causal-conv1d 1.7.0), *not* from their Python references. They exist so
that the adapters in :mod:`ssmrepro.kernels.cuda` (which fold packs and convert our layouts) can
be tested on a CPU: ``adapter(emulator) == our torch path`` in float64. Every loop here is the
plain sequential recurrence, one Python step per time index (obviously correct, slow).

Emulated (same argument names and order as the real functions)::

    selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False)                       # notes §1.1
    mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, ...,
                              dt_softplus=False, dt_limit=(0.0, inf))   # notes §1.3
    causal_conv1d_fn(x, weight, bias=None, ..., activation=None)        # notes §1.5

Besides computing, the emulators *enforce* the constraints the adapters must respect, including
those the real kernels do not check themselves (``dim % n_groups``; the launch-grid limit on
channels / heads, whose violation on a GPU is a launch failure rather than a clear error), so a
test fails where the real kernel would misbehave. The limits are module constants so tests can
shrink them (``monkeypatch.setattr(kernel_api_emulator, "MAX_GRID_DIM", 4)``).

Dtypes. The real kernels take fp32 / fp16 / bf16 activations and fp32 (complex64) weights. The
emulators additionally accept the float64 / complex128 pair (activations float64 => weights
float64 / complex128), so that equality tests can run in double precision; the *pairing* rules
are checked as in the kernels (e.g. D and delta_bias must have the weights' real dtype, a
variable B must have u's dtype, a constant B must have A's dtype).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "MAX_DSTATE",
    "MAX_GRID_DIM",
    "SOFTPLUS_THRESHOLD",
    "KernelContractError",
    "selective_scan_fn",
    "mamba_chunk_scan_combined",
    "causal_conv1d_fn",
]

# selective_scan.cpp: TORCH_CHECK(dstate <= 256)
MAX_DSTATE = 256
# CUDA gridDim.y / gridDim.z limit: selective_scan and channel-first causal_conv1d launch
# (batch, dim) grids; the SSD kernels put heads on grid axis 2 and batch * nchunks on axis 1.
MAX_GRID_DIM = 65535
# Both kernels: softplus(x) = log1p(exp(x)) for x <= 20, else x.
SOFTPLUS_THRESHOLD = 20.0

_ACT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class KernelContractError(ValueError):
    """An argument the real kernel would reject (or silently mis-handle)."""


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise KernelContractError(msg)


def _softplus(x: Tensor) -> Tensor:
    """The kernels' thresholded softplus; the unused branch never sees exp(> 20) (finite grads)."""
    t = SOFTPLUS_THRESHOLD
    return torch.where(x <= t, torch.log1p(torch.exp(torch.clamp(x, max=t))), x)


def _weight_real_dtype(act: torch.dtype) -> torch.dtype:
    """Real dtype the kernels require for weights given the activations' dtype (see docstring)."""
    return torch.float64 if act == torch.float64 else torch.float32


# ------------------------------------------------------------------------------------------------
# selective_scan_fn
# ------------------------------------------------------------------------------------------------


def _scan_bc(X: Tensor, name: str, b: int, dim: int, N: int, L: int, A: Tensor, u: Tensor):
    """Return (per-channel tensor broadcastable to (b, dim, N, L), n_groups or None if constant).

    Constant: (dim, N) in A's dtype. Variable: (b, N, L') or (b, G, N, L') in u's (real) dtype,
    L' = L for real A, L' = 2L for complex A with (L two) interleaving: X[..., 2l] is Re, X[..., 2l+1]
    is Im of the value at time l.
    """
    if X.dim() == 2:  # constant per channel
        _check(
            tuple(X.shape) == (dim, N),
            f"constant {name} must be (dim, dstate)=({dim}, {N}), got {tuple(X.shape)}",
        )
        _check(X.dtype == A.dtype, f"constant {name} must have A's dtype {A.dtype}, got {X.dtype}")
        return X[None, :, :, None], None  # (1, dim, N, 1)
    _check(X.dim() in (3, 4), f"variable {name} must be (b, N, L) or (b, G, N, L), got {tuple(X.shape)}")
    if X.dim() == 3:
        X = X.unsqueeze(1)  # (b, 1, N, L')
    G = X.shape[1]
    Lx = 2 * L if A.is_complex() else L
    _check(
        tuple(X.shape) == (b, G, N, Lx),
        f"variable {name} must be (batch, n_groups, dstate, {'2*' if A.is_complex() else ''}seqlen)"
        f"=({b}, {G}, {N}, {Lx}), got {tuple(X.shape)}",
    )
    _check(
        not X.is_complex() and X.dtype == u.dtype,
        f"variable {name} must be real with u's dtype {u.dtype}, got {X.dtype}",
    )
    _check(G >= 1 and dim % G == 0, f"{name}: dim={dim} is not divisible by n_groups={G} (unchecked in CUDA)")
    if A.is_complex():
        X = torch.complex(X[..., 0::2], X[..., 1::2])  # (b, G, N, L) complex
    return X.repeat_interleave(dim // G, dim=1), G  # (b, dim, N, L): channel d -> group d // (dim/G)


def selective_scan_fn(
    u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False, return_last_state=False
):
    """Emulates ``mamba_ssm.ops.selective_scan_interface.selective_scan_fn`` (notes §1.1).

    Layout: u, delta, z (b, dim, L); A (dim, N) real or complex; B, C constant (dim, N) or
    variable (b, N, L) / (b, G, N, L) [(…, 2L) interleaved for complex A]; D, delta_bias (dim,).
    With Δ = softplus(delta + delta_bias) (softplus only if ``delta_softplus``), per channel d and
    state n::

        h_t[d, n] = exp(Δ_t[d] A[d, n]) h_{t-1}[d, n] + Δ_t[d] B_t[d, n] u_t[d]     (Euler B)
        y_t[d]    = Σ_n C_t[d, n] h_t[d, n]          (real A)
                  = 2 Re Σ_n C_t[d, n] h_t[d, n]     (complex A: conjugate-pair convention)
        out       = (y + D ⊙ u) ⊙ SiLU(z)            (D and z optional)

    Returns out (b, dim, L) in u's dtype, and last_state h_{L-1} (b, dim, N) if requested.
    """
    _check(u.dim() == 3, f"u must be (batch, dim, seqlen), got {tuple(u.shape)}")
    b, dim, L = u.shape
    _check(u.dtype in _ACT_DTYPES, f"u must be fp32/fp16/bf16 (or float64 here), got {u.dtype}")
    _check(delta.dtype == u.dtype and tuple(delta.shape) == (b, dim, L), "delta must match u (shape, dtype)")
    wreal = _weight_real_dtype(u.dtype)
    wcplx = torch.complex128 if wreal == torch.float64 else torch.complex64
    _check(A.dtype in (wreal, wcplx), f"A must be {wreal} or {wcplx} (for u {u.dtype}), got {A.dtype}")
    _check(
        A.dim() == 2 and A.shape[0] == dim, f"A must be (dim, dstate) with dim={dim}, got {tuple(A.shape)}"
    )
    N = A.shape[1]
    _check(N <= MAX_DSTATE, f"selective_scan only supports state dimension <= {MAX_DSTATE}, got {N}")
    _check(dim <= MAX_GRID_DIM, f"dim={dim} exceeds the launch grid limit {MAX_GRID_DIM}")
    Bc, GB = _scan_bc(B, "B", b, dim, N, L, A, u)
    Cc, GC = _scan_bc(C, "C", b, dim, N, L, A, u)
    # selective_scan.cpp: n_groups = is_variable_B ? B.size(1) : 1, and C is shape-checked against it
    if GC is not None:
        _check(
            GC == (GB if GB is not None else 1),
            f"variable C has {GC} groups but n_groups is {GB if GB is not None else 1} "
            "(taken from B; 1 when B is constant)",
        )
    for name, v in (("D", D), ("delta_bias", delta_bias)):
        if v is not None:
            _check(
                v.dtype == wreal and tuple(v.shape) == (dim,),
                f"{name} must be ({dim},) {wreal}, got {tuple(v.shape)} {v.dtype}",
            )
    if z is not None:
        _check(z.dtype == u.dtype and tuple(z.shape) == (b, dim, L), "z must match u (shape, dtype)")

    # 1. step sizes
    dt = delta.to(wreal)
    if delta_bias is not None:
        dt = dt + delta_bias[:, None]
    if delta_softplus:
        dt = _softplus(dt)
    uw = u.to(wreal)
    # 2. discretisation: decay exp(Δ A), Euler input Δ B u; both (b, dim, N, L)
    decay = torch.exp(dt[:, :, None, :] * A[None, :, :, None])
    inp = (dt * uw)[:, :, None, :] * Bc
    # 3. sequential recurrence and read-out, one step per time index
    h = torch.zeros(b, dim, N, dtype=decay.dtype, device=u.device)
    ys = []
    for t in range(L):
        h = decay[..., t] * h + inp[..., t]  # (b, dim, N)
        ct = Cc[..., t] if Cc.shape[-1] == L else Cc[..., 0]
        ys.append((h * ct).sum(-1))  # (b, dim)
    y = torch.stack(ys, dim=-1) if L else uw.new_zeros(b, dim, 0)  # (b, dim, L)
    if y.is_complex():
        y = 2 * y.real
    # 4. skip and gate
    if D is not None:
        y = y + D[:, None] * uw
    if z is not None:
        y = y * F.silu(z.to(wreal))
    out = y.to(u.dtype)
    return (out, h) if return_last_state else out


# ------------------------------------------------------------------------------------------------
# mamba_chunk_scan_combined (Mamba-2 SSD)
# ------------------------------------------------------------------------------------------------


def mamba_chunk_scan_combined(
    x,
    dt,
    A,
    B,
    C,
    chunk_size,
    D=None,
    z=None,
    dt_bias=None,
    initial_states=None,
    seq_idx=None,
    cu_seqlens=None,
    dt_softplus=False,
    dt_limit=(0.0, float("inf")),
    return_final_states=False,
    return_varlen_states=False,
):
    """Emulates ``mamba_ssm.ops.triton.ssd_combined.mamba_chunk_scan_combined`` (notes §1.3).

    Layout: x, z (b, L, H, P); dt (b, L, H); A (H,) real; B, C (b, L, G, N), H % G == 0, head h
    uses group h // (H / G); D (H, P) or (H,); dt_bias (H,). With
    Δ = clamp(softplus(dt + dt_bias), *dt_limit) (softplus only if ``dt_softplus``; the clamp is
    always applied, so with the default limits a negative Δ becomes 0)::

        h_t = exp(Δ_t A_h) h_{t-1} + (Δ_t x_t) B_tᵀ      h: (P, N) per (batch, head)
        y_t = h_t C_t + D_h ⊙ x_t,      out = y ⊙ SiLU(z)

    The result does not depend on ``chunk_size`` (it only tiles the computation). Only the
    arguments the adapters use are emulated: initial/final states, seq_idx and varlen raise.
    """
    if initial_states is not None or seq_idx is not None or cu_seqlens is not None:
        raise NotImplementedError("emulator: initial_states / seq_idx / cu_seqlens are not emulated")
    if return_final_states or return_varlen_states:
        raise NotImplementedError("emulator: final / varlen states are not emulated")
    _check(x.dim() == 4, f"x must be (batch, seqlen, nheads, headdim), got {tuple(x.shape)}")
    b, L, H, P = x.shape
    _check(x.dtype in _ACT_DTYPES, f"x must be a real float dtype, got {x.dtype}")
    _check(
        B.dim() == 4 and tuple(B.shape[:2]) == (b, L),
        f"B must be (b, L, ngroups, dstate), got {tuple(B.shape)}",
    )
    G, N = B.shape[2], B.shape[3]
    _check(H % G == 0, f"nheads={H} is not divisible by ngroups={G}")
    _check(C.shape == B.shape, f"C must have B's shape {tuple(B.shape)}, got {tuple(C.shape)}")
    _check(tuple(dt.shape) == (b, L, H), f"dt must be ({b}, {L}, {H}), got {tuple(dt.shape)}")
    _check(
        tuple(A.shape) == (H,) and not A.is_complex(),
        f"A must be real ({H},), got {tuple(A.shape)} {A.dtype}",
    )
    if D is not None:
        _check(tuple(D.shape) in ((H, P), (H,)), f"D must be ({H}, {P}) or ({H},), got {tuple(D.shape)}")
    if z is not None:
        _check(z.shape == x.shape, "z must have x's shape")
    if dt_bias is not None:
        _check(tuple(dt_bias.shape) == (H,), f"dt_bias must be ({H},), got {tuple(dt_bias.shape)}")
    _check(
        isinstance(chunk_size, int) and chunk_size >= 1,
        f"chunk_size must be a positive int, got {chunk_size!r}",
    )
    nchunks = math.ceil(L / chunk_size)
    _check(H <= MAX_GRID_DIM, f"nheads={H} exceeds the launch grid limit {MAX_GRID_DIM}")
    _check(
        b * nchunks <= MAX_GRID_DIM,
        f"batch*nchunks={b * nchunks} exceeds the launch grid limit {MAX_GRID_DIM}",
    )

    cdt = torch.float64 if x.dtype == torch.float64 else torch.float32  # kernels compute in fp32
    # 1. step sizes
    d = dt.to(cdt)
    if dt_bias is not None:
        d = d + dt_bias.to(cdt)
    if dt_softplus:
        d = _softplus(d)
    d = torch.clamp(d, min=dt_limit[0], max=dt_limit[1])  # (b, L, H)
    # 2. groups -> heads (contiguous head blocks per group)
    Bh = B.to(cdt).repeat_interleave(H // G, dim=2)  # (b, L, H, N)
    Ch = C.to(cdt).repeat_interleave(H // G, dim=2)
    xf = x.to(cdt)
    decay = torch.exp(d * A.to(cdt))  # (b, L, H)
    # 3. sequential recurrence, one step per time index
    h = torch.zeros(b, H, P, N, dtype=cdt, device=x.device)
    ys = []
    for t in range(L):
        h = decay[:, t, :, None, None] * h + (d[:, t, :, None] * xf[:, t])[..., None] * Bh[:, t, :, None, :]
        ys.append((h * Ch[:, t, :, None, :]).sum(-1))  # (b, H, P)
    y = torch.stack(ys, dim=1) if L else xf.clone()  # (b, L, H, P)
    # 4. skip and gate
    if D is not None:
        Df = D.to(cdt)
        y = y + (Df if D.dim() == 2 else Df[:, None]) * xf
    if z is not None:
        y = y * F.silu(z.to(cdt))
    return y.to(x.dtype)


# ------------------------------------------------------------------------------------------------
# causal_conv1d_fn
# ------------------------------------------------------------------------------------------------


def causal_conv1d_fn(
    x,
    weight,
    bias=None,
    seq_idx=None,
    initial_states=None,
    return_final_states=False,
    final_states_out=None,
    activation=None,
):
    """Emulates ``causal_conv1d.causal_conv1d_fn`` (notes §1.5).

    Layout: x (b, dim, L) with stride(2) == 1 (channel-first) or stride(1) == 1 (channel-last:
    dim % 8 == 0, strides multiple of 8); weight (dim, W), 2 <= W <= 4; bias (dim,) in weight's
    dtype. Depthwise causal convolution::

        out_t[c] = act( Σ_{k<W} weight[c, k] · x_{t-(W-1)+k}[c] + bias[c] )     (x_{<0} = 0)

    with act = SiLU for activation "silu" / "swish", identity for None.
    """
    if activation not in (None, "silu", "swish"):
        raise NotImplementedError("activation must be None, silu, or swish")
    if (
        seq_idx is not None
        or initial_states is not None
        or return_final_states
        or final_states_out is not None
    ):
        raise NotImplementedError("emulator: seq_idx / initial / final states are not emulated")
    _check(x.dim() == 3, f"x must be (batch, dim, seqlen), got {tuple(x.shape)}")
    b, dim, L = x.shape
    _check(x.dtype in _ACT_DTYPES and weight.dtype in _ACT_DTYPES, "x and weight must be real float tensors")
    _check(
        weight.dim() == 2 and weight.shape[0] == dim,
        f"weight must be (dim, width), got {tuple(weight.shape)}",
    )
    W = weight.shape[1]
    _check(2 <= W <= 4, f"causal_conv1d only supports width between 2 and 4, got {W}")
    if bias is not None:
        _check(
            bias.dtype == weight.dtype and tuple(bias.shape) == (dim,),
            "bias must be (dim,) in weight's dtype",
        )
    if x.stride(2) != 1 and x.stride(1) != 1:  # the Python wrapper copies such inputs
        x = x.contiguous()
    channel_last = x.stride(1) == 1 and x.stride(2) > 1
    if channel_last:
        _check(dim % 8 == 0, "channel-last layout needs dim % 8 == 0")
        _check(x.stride(2) % 8 == 0 and x.stride(0) % 8 == 0, "channel-last layout needs strides % 8 == 0")
    else:
        _check(dim <= MAX_GRID_DIM, f"dim={dim} exceeds the channel-first launch grid limit {MAX_GRID_DIM}")

    cdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf, wf = x.to(cdt), weight.to(cdt)
    xp = F.pad(xf, (W - 1, 0))  # (b, dim, L + W - 1): zeros before t = 0
    out = torch.zeros_like(xf)
    for k in range(W):  # tap k multiplies x_{t-(W-1)+k}
        out = out + wf[None, :, k, None] * xp[:, :, k : k + L]
    if bias is not None:
        out = out + bias.to(cdt)[None, :, None]
    if activation is not None:
        out = F.silu(out)
    return out.to(x.dtype)


def emulated_kernels():
    """The emulators as a ``kernels.cuda.Kernels`` bundle (what the adapters' ``kernels=`` takes)."""
    from ssmrepro.kernels.cuda import Kernels

    return Kernels(selective_scan_fn, mamba_chunk_scan_combined, causal_conv1d_fn,
                   source="tests/support/kernel_api_emulator.py (pure PyTorch)")
