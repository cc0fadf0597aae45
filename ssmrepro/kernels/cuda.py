"""Library (kernels): adapters from our packed layouts to the mamba-ssm / causal-conv1d CUDA kernels.

Three adapters, each taking our tensors (a pack of E members folded as the models fold them) and
calling one kernel API with the layout documented in ``notes/kernels.md`` §1:

=====================  =====================================  ===================================
adapter                our layout                             kernel call
=====================  =====================================  ===================================
:func:`selective_scan` ``inplace.selective_scan_fused``'s:    ``selective_scan_fn`` (§1.1):
                       u, delta (Bt, L, D_), members side     u, delta, z (Bt, D_, L); A (D_, N);
                       by side on channels (D_ = E·d); A      variable B, C (Bt, G, N, L) [2L
                       (D_, N); B, C (Bt, L, G, N) with       interleaved for complex A] or
                       G = E·g contiguous channel blocks,     constant (D_, N); D, delta_bias
                       or (Bt, L, N), or constant (D_, N)     (D_,) fp32
:func:`ssd_scan`       packs explicit: x (E, Bt, L, H, P),    ``mamba_chunk_scan_combined``
                       dt (E, Bt, L, H), A (E, H),            (§1.3): members folded into heads
                       B, C (E, Bt, L, G, N)                  (E·H) and groups (E·G)
:func:`causal_conv1d`  ``PackedCausalConv``'s: x (E, Bt, L,   ``causal_conv1d_fn`` (§1.5): x
                       C), weight (E, C, W), bias (E, C)      (Bt, E·C, L), weight (E·C, W)
=====================  =====================================  ===================================

Kernel limits handled here (notes §1.7): at most ``MAX_GRID_DIM`` = 65 535 channels / heads per
call (packs are split into several calls on group boundaries), ``MAX_DSTATE`` = 256 states per
selective-scan call (larger N is split over the state axis and the partial outputs summed,
notes §1.8 (1)), conv width 2–4 (other widths use our torch conv), ``dim % G == 0`` asserted
here because the kernel does not check it.

Complex A (S4D-Lin, B2S6). Our torch scans return ``complex_output_scale · Re(Σ_n C h)``
(scale 1.0 by default); ``selective_scan_fn`` returns ``2 · Re(Σ_n C h)``. The adapter passes
``C · (scale / 2)``, which is exact because the read-out is linear in C, so callers keep our
convention and choose the scale as before. Complex variable B / C are passed as real tensors
with (L two) interleaving (``view_as_real(X).flatten(-2)``); real B / C with complex A are
promoted to complex (zero imaginary part); real A with complex B or C is promoted to complex A.

Kernels are injectable: every adapter takes ``kernels=`` (a :class:`Kernels`); the default is
:func:`load_kernels`, the compiled ones. Tests pass pure-PyTorch emulators of the same APIs
(test-only support: ``tests/support/kernel_api_emulator.py``), which is how the adapters are
verified on CPU.

Importing the compiled kernels (:func:`load_kernels`, notes §3.4) never executes
``mamba_ssm/__init__.py`` (it needs transformers, huggingface_hub and Mamba-3 deps): a stub
``mamba_ssm`` package object pointing at the package directory is put in ``sys.modules``, only
``mamba_ssm.ops.selective_scan_interface`` and ``mamba_ssm.ops.triton.ssd_combined`` are
imported, and the stub is taken out of ``sys.modules`` again (the op modules stay), so a later
``from mamba_ssm import Mamba`` in the same process runs the real package ``__init__`` (which
reuses the already imported op modules). ``selective_scan_cuda`` / ``causal_conv1d_cuda`` (the
compiled extensions) and the ``mamba_ssm`` / ``causal_conv1d`` source packages are found on
``sys.path``, to which the directories in ``$SSMREPRO_KERNEL_PATHS`` (``os.pathsep``-separated;
``scripts/gpu_check.sh`` sets it) are prepended.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from .conv import causal_conv1d_cpu

__all__ = [
    "MAX_DSTATE",
    "MAX_GRID_DIM",
    "TESTED_VERSIONS",
    "Kernels",
    "KernelImportError",
    "load_kernels",
    "selective_scan",
    "ssd_scan",
    "causal_conv1d",
    "causal_conv1d_torch",
    "default_ssd_chunk_size",
]

MAX_DSTATE = 256  # selective_scan_fn: dstate <= 256
MAX_GRID_DIM = 65535  # channels per selective_scan / causal_conv1d call, heads per SSD call
TESTED_VERSIONS = {"mamba_ssm": "2.3.2.post1", "causal_conv1d": "1.7.0"}
KERNEL_PATHS_ENV = "SSMREPRO_KERNEL_PATHS"


@dataclass(frozen=True)
class Kernels:
    """The three kernel entry points the adapters call (real ones or emulators)."""

    selective_scan_fn: Callable
    mamba_chunk_scan_combined: Callable
    causal_conv1d_fn: Callable
    source: str = ""


# ------------------------------------------------------------------------------------------------
# importing the compiled kernels (notes §3.4)
# ------------------------------------------------------------------------------------------------


class KernelImportError(ImportError):
    pass


_LOADED: Kernels | None = None
_LOAD_ERROR: str | None = None


def _read_version(init_py: Path) -> str:
    m = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', init_py.read_text(), re.MULTILINE)
    return m.group(1) if m else "unknown"


def _stub_mamba_ssm() -> types.ModuleType:
    """Register a ``mamba_ssm`` package object without running its ``__init__.py``."""
    mod = sys.modules.get("mamba_ssm")
    if mod is not None:
        return mod
    spec = importlib.util.find_spec("mamba_ssm")  # does not execute the package
    if spec is None or not spec.submodule_search_locations:
        raise KernelImportError("mamba_ssm sources not found on sys.path (see scripts/gpu_check.sh)")
    pkg_dir = Path(list(spec.submodule_search_locations)[0])
    stub = types.ModuleType("mamba_ssm")
    stub.__path__ = [str(pkg_dir)]
    stub.__file__ = None
    stub.__version__ = _read_version(pkg_dir / "__init__.py")
    stub.__ssmrepro_stub__ = True
    sys.modules["mamba_ssm"] = stub
    return stub


def _drop_stub() -> None:
    """Take our stub package out of ``sys.modules`` (its imported submodules stay, found by their
    full names), so a later ``import mamba_ssm`` runs the real package."""
    mod = sys.modules.get("mamba_ssm")
    if mod is not None and getattr(mod, "__ssmrepro_stub__", False):
        del sys.modules["mamba_ssm"]


def import_kernel_modules(paths: list[str] | None = None) -> Kernels:
    """Import the compiled extensions and the three Python entry points; raise on failure.

    ``paths`` (default: ``$SSMREPRO_KERNEL_PATHS``) are prepended to ``sys.path`` first. Order:
    ``selective_scan_cuda`` and ``causal_conv1d_cuda`` (compiled), then ``causal_conv1d`` (its
    ``__init__`` only imports its interface), then the ``mamba_ssm`` stub and its two op modules.
    Needs no GPU to run, only importable modules (a CPU test uses a fake package tree).
    """
    if paths is None:
        env = os.environ.get(KERNEL_PATHS_ENV, "")
        paths = [p for p in env.split(os.pathsep) if p]
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    step = "selective_scan_cuda"
    try:
        importlib.import_module("selective_scan_cuda")
        step = "causal_conv1d_cuda"
        importlib.import_module("causal_conv1d_cuda")
        step = "causal_conv1d"
        cc = importlib.import_module("causal_conv1d")
        step = "mamba_ssm (stub package)"
        stub = _stub_mamba_ssm()
        step = "mamba_ssm.ops.selective_scan_interface"
        ssi = importlib.import_module("mamba_ssm.ops.selective_scan_interface")
        step = "mamba_ssm.ops.triton.ssd_combined"
        ssd = importlib.import_module("mamba_ssm.ops.triton.ssd_combined")
    except KernelImportError:
        raise
    except Exception as exc:  # ImportError, OSError (bad .so), RuntimeError from triton, ...
        raise KernelImportError(f"importing {step} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        _drop_stub()
    versions = {
        "mamba_ssm": getattr(stub, "__version__", "unknown"),
        "causal_conv1d": getattr(cc, "__version__", "unknown"),
    }
    note = "" if versions == TESTED_VERSIONS else f" (adapters written for {TESTED_VERSIONS})"
    return Kernels(
        ssi.selective_scan_fn,
        ssd.mamba_chunk_scan_combined,
        cc.causal_conv1d_fn,
        source=f"mamba_ssm {versions['mamba_ssm']}, causal_conv1d {versions['causal_conv1d']}{note}",
    )


def load_kernels() -> Kernels:
    """The compiled kernels (cached); :class:`KernelImportError` with the reason otherwise."""
    global _LOADED, _LOAD_ERROR
    if _LOADED is not None:
        return _LOADED
    if _LOAD_ERROR is not None:
        raise KernelImportError(_LOAD_ERROR)
    try:
        _LOADED = import_kernel_modules()
    except KernelImportError as exc:
        _LOAD_ERROR = str(exc)
        raise
    return _LOADED


def _kernels(kernels: Kernels | None) -> Kernels:
    return kernels if kernels is not None else load_kernels()


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def _chunk_ranges(n_items: int, n_groups: int, max_items: int, max_groups: int | None = None):
    """Split ``n_items`` channels (heads) in ``n_groups`` contiguous equal groups into calls.

    Yields (start, stop) ranges of at most ``max_items`` that are either a union of whole groups
    (at most ``max_groups`` of them) or a piece of a single group, so every call sees a uniform
    items-per-group ratio, as the kernels assume.
    """
    K = n_items // n_groups  # items per group
    if K <= max_items:
        m = max(1, max_items // K)
        if max_groups is not None:
            m = min(m, max_groups)
        return [(s, min(n_items, s + m * K)) for s in range(0, n_items, m * K)]
    pieces = math.ceil(K / max_items)  # split each group into equal-ish pieces
    size = math.ceil(K / pieces)
    return [(g * K + s, g * K + min(K, s + size)) for g in range(n_groups) for s in range(0, K, size)]


def _const_groups(X: Tensor) -> bool:
    """True for a (Bt, L, ...) view that does not vary over batch and time (stride-0 expand)."""
    return X.dim() >= 3 and X.stride(0) == 0 and X.stride(1) == 0


# ------------------------------------------------------------------------------------------------
# selective scan (Mamba-1 S6, S4D, B2S6)
# ------------------------------------------------------------------------------------------------


def _scan_operand(X: Tensor, name: str, Bt: int, L: int, D_: int, N: int):
    """Classify one of B / C: ('const', (D_, N)) or ('var', (Bt, L, G, N))."""
    if X.dim() == 2:
        if tuple(X.shape) != (D_, N):
            raise ValueError(f"constant {name} must be (D_, N)=({D_}, {N}), got {tuple(X.shape)}")
        return "const", X
    if X.dim() == 3:
        if tuple(X.shape) != (Bt, L, N):
            raise ValueError(f"{name} must be (Bt, L, N)=({Bt}, {L}, {N}), got {tuple(X.shape)}")
        X = X.unsqueeze(2)  # (Bt, L, 1, N)
    if X.dim() != 4 or tuple(X.shape[:2]) != (Bt, L) or X.shape[3] != N:
        raise ValueError(f"{name} must be (D_, N), (Bt, L, N) or (Bt, L, G, N); got {tuple(X.shape)}")
    G = X.shape[2]
    if G < 1 or D_ % G:
        raise ValueError(f"{name}: D_={D_} is not divisible by the number of groups G={G}")
    if _const_groups(X):  # e.g. S4D's B expanded over (Bt, L): pass as a constant (D_, N)
        return "const", X[0, 0].repeat_interleave(D_ // G, dim=0)
    return "var", X


def _to_kernel_var(X: Tensor, cplx: bool, act: torch.dtype) -> Tensor:
    """(Bt, L, G, N) -> (Bt, G, N, L) real, or (Bt, G, N, 2L) (L two)-interleaved for complex."""
    Xk = X.permute(0, 2, 3, 1)  # (Bt, G, N, L)
    if cplx:
        Xk = torch.view_as_real(Xk.contiguous()).flatten(-2)  # (Bt, G, N, 2L): re, im, re, im, ...
    return Xk.to(act).contiguous()


def selective_scan(
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    *,
    z: Tensor | None = None,
    delta_bias: Tensor | None = None,
    delta_softplus: bool = False,
    complex_output_scale: float = 1.0,
    kernels: Kernels | None = None,
) -> Tensor:
    """Mamba-1 selective scan through ``selective_scan_fn``; same call as ``selective_scan_fused``.

    Args (our layout; a pack of E members is folded into channels, D_ = E·d, and groups, G = E·g,
    model-major, as ``models.mixers.s6.S6Core`` does):
        u, delta: (Bt, L, D_); delta is used as given unless ``delta_bias`` / ``delta_softplus``.
        A: (D_, N) real or complex.
        B, C: (Bt, L, G, N) (channel d uses group d // (D_/G)), (Bt, L, N), or constant (D_, N).
            A (Bt, L, G, N) view with stride 0 over Bt and L (S4D's expanded B) is passed as a
            constant (D_, N) tensor. Variable B and C may have different G (both are expanded to
            lcm(G_B, G_C)).
        D: (D_,) skip or None. z: (Bt, L, D_) gate or None. delta_bias: (D_,) or None.
        complex_output_scale: y = scale · Re(Σ_n C h) for complex states (our convention, see
            the module docstring); ignored for real ones.

    Returns:
        y: (Bt, L, D_) = (scan(u, Δ) + D ⊙ u) ⊙ SiLU(z), Δ = softplus(delta + delta_bias) or
        delta + delta_bias, in u's dtype (the kernel computes in fp32 from fp32 / bf16 / fp16).
    """
    k = _kernels(kernels)
    if u.dim() != 3 or delta.shape != u.shape:
        raise ValueError(f"u and delta must be (Bt, L, D_); got {tuple(u.shape)}, {tuple(delta.shape)}")
    Bt, L, D_ = u.shape
    if A.dim() != 2 or A.shape[0] != D_:
        raise ValueError(f"A must be (D_, N) with D_={D_}; got {tuple(A.shape)}")
    N = A.shape[1]
    kB, Bx = _scan_operand(B, "B", Bt, L, D_, N)
    kC, Cx = _scan_operand(C, "C", Bt, L, D_, N)

    # 1. dtypes: activations keep u's dtype, weights fp32 / complex64 (float64 / complex128 only
    #    for double-precision emulator tests)
    act = u.dtype
    wreal = torch.float64 if act == torch.float64 else torch.float32
    cplx = A.is_complex() or Bx.is_complex() or Cx.is_complex()
    wdt = (torch.complex128 if wreal == torch.float64 else torch.complex64) if cplx else wreal
    A_k = A.to(wdt).contiguous()
    if cplx:
        Cx = Cx * (complex_output_scale / 2.0)  # kernel returns 2·Re(.); we want scale·Re(.)

    # 2. groups: variable B and C share n_groups in the kernel; a constant B forces n_groups = 1
    GB = Bx.shape[2] if kB == "var" else None
    GC = Cx.shape[2] if kC == "var" else None
    if GB is not None and GC is not None:
        G = math.lcm(GB, GC)  # divides D_ since both do; no copy when GB == GC
        if GB != G:
            Bx = Bx.repeat_interleave(G // GB, dim=2)
        if GC != G:
            Cx = Cx.repeat_interleave(G // GC, dim=2)
    else:
        G = GB or GC or 1
    max_groups = 1 if (kB == "const") != (kC == "const") else None  # mixed const/var: 1 group a call

    B_k = Bx.to(wdt).contiguous() if kB == "const" else _to_kernel_var(Bx.to(wdt), cplx, act)
    C_k = Cx.to(wdt).contiguous() if kC == "const" else _to_kernel_var(Cx.to(wdt), cplx, act)
    u_k = u.transpose(1, 2).contiguous()  # (Bt, D_, L)
    d_k = delta.to(act).transpose(1, 2).contiguous()
    z_k = None if z is None else z.to(act).transpose(1, 2).contiguous()
    D_k = None if D is None else D.to(wreal).contiguous()
    db_k = None if delta_bias is None else delta_bias.to(wreal).contiguous()

    y = _scan_calls(
        k.selective_scan_fn, u_k, d_k, A_k, B_k, C_k, D_k, z_k, db_k, bool(delta_softplus), G, max_groups
    )
    return y.transpose(1, 2)  # (Bt, L, D_)


def _scan_calls(fn, u, delta, A, B, C, D, z, delta_bias, softplus, G, max_groups):
    """Kernel layout (u: (Bt, D_, L)); split over states (> MAX_DSTATE) and channels (> MAX_GRID_DIM)."""
    D_, N = A.shape
    if N > MAX_DSTATE:  # the N states are independent: sum partial read-outs, then skip and gate
        y = None
        for s in range(0, N, MAX_DSTATE):
            sl = slice(s, min(N, s + MAX_DSTATE))
            Bs = B[:, sl] if B.dim() == 2 else B[:, :, sl]
            Cs = C[:, sl] if C.dim() == 2 else C[:, :, sl]
            part = _scan_calls(
                fn, u, delta, A[:, sl], Bs, Cs, None, None, delta_bias, softplus, G, max_groups
            )
            y = part if y is None else y + part
        if D is not None:
            y = y + (D[:, None] * u.to(D.dtype)).to(y.dtype)
        if z is not None:
            y = y * F.silu(z)
        return y
    ranges = _chunk_ranges(D_, G, MAX_GRID_DIM, max_groups)
    if len(ranges) == 1:
        return fn(u, delta, A, B, C, D, z, delta_bias, softplus)
    K = D_ // G
    outs = []
    for c0, c1 in ranges:
        g0, g1 = c0 // K, (c1 - 1) // K + 1  # groups touched by channels c0 .. c1-1
        ch = slice(c0, c1)
        Bc = B[ch] if B.dim() == 2 else B[:, g0:g1]
        Cc = C[ch] if C.dim() == 2 else C[:, g0:g1]
        outs.append(
            fn(
                u[:, ch],
                delta[:, ch],
                A[ch],
                Bc,
                Cc,
                None if D is None else D[ch],
                None if z is None else z[:, ch],
                None if delta_bias is None else delta_bias[ch],
                softplus,
            )
        )
    return torch.cat(outs, dim=1)


# ------------------------------------------------------------------------------------------------
# SSD (Mamba-2)
# ------------------------------------------------------------------------------------------------


def default_ssd_chunk_size(L: int) -> int:
    """Power of two in [16, 256], at least L for short sequences (notes §1.3)."""
    return min(256, max(16, 1 << max(0, (L - 1).bit_length())))


def ssd_scan(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    *,
    D: Tensor | None = None,
    z: Tensor | None = None,
    dt_bias: Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    chunk_size: int | None = None,
    kernels: Kernels | None = None,
) -> Tensor:
    """Packed Mamba-2 SSD through ``mamba_chunk_scan_combined`` (members folded into heads / groups).

    Args:
        x: (E, Bt, L, H, P); dt: (E, Bt, L, H); A: (E, H) real (scalar decay per head);
        B, C: (E, Bt, L, G, N), H % G == 0 (head h of a member uses its group h // (H/G));
        D: (E, H) or (E, H, P) or None; z: like x or None; dt_bias: (E, H) or None.

    With Δ = clamp(softplus(dt + dt_bias), *dt_limit) (softplus if ``dt_softplus``)::

        h_t = exp(Δ_t A) h_{t-1} + (Δ_t x_t) B_tᵀ,   y_t = h_t C_t + D x_t,   out = y ⊙ SiLU(z)

    i.e. ``ssd.ssd(x·Δ, Δ·A, B, C)`` with groups expanded to heads, plus skip and gate.
    Linear attention (A = I, no discretisation) is ``dt = 1, A = 0``.

    Returns (E, Bt, L, H, P). Folding: member e's head h is kernel head e·H + h and its group g is
    kernel group e·G + g; since (e·H + h) // (H/G) = e·G + h // (H/G) the grouping is preserved.
    """
    k = _kernels(kernels)
    if x.dim() != 5:
        raise ValueError(f"x must be (E, Bt, L, H, P), got {tuple(x.shape)}")
    E, Bt, L, H, P = x.shape
    if B.dim() != 5 or tuple(B.shape[:3]) != (E, Bt, L) or C.shape != B.shape:
        raise ValueError(f"B and C must both be (E, Bt, L, G, N); got {tuple(B.shape)}, {tuple(C.shape)}")
    G = B.shape[3]
    if H % G:
        raise ValueError(f"H={H} is not divisible by G={G}")
    if tuple(dt.shape) != (E, Bt, L, H) or tuple(A.shape) != (E, H):
        raise ValueError(f"dt must be (E, Bt, L, H) and A (E, H); got {tuple(dt.shape)}, {tuple(A.shape)}")

    def fold(t: Tensor) -> Tensor:  # (E, Bt, L, K, ...) -> (Bt, L, E·K, ...)
        t = t.movedim(0, 2)  # (Bt, L, E, K, ...)
        return t.reshape(Bt, L, E * t.shape[3], *t.shape[4:])

    xk, dtk, Bk, Ck = fold(x), fold(dt[..., None])[..., 0], fold(B), fold(C)
    zk = None if z is None else fold(z)
    Ak = A.reshape(E * H)
    Dk = None if D is None else D.reshape(E * H, *D.shape[2:])
    dbk = None if dt_bias is None else dt_bias.reshape(E * H)
    cs = int(chunk_size) if chunk_size is not None else default_ssd_chunk_size(L)
    nchunks = math.ceil(L / cs)

    def call(b0, b1, h0, h1):
        g0, g1 = h0 // (H // G), (h1 - 1) // (H // G) + 1
        hs, bs = slice(h0, h1), slice(b0, b1)
        return k.mamba_chunk_scan_combined(
            xk[bs, :, hs],
            dtk[bs, :, hs],
            Ak[hs],
            Bk[bs, :, g0:g1],
            Ck[bs, :, g0:g1],
            cs,
            D=None if Dk is None else Dk[hs],
            z=None if zk is None else zk[bs, :, hs],
            dt_bias=None if dbk is None else dbk[hs],
            dt_softplus=bool(dt_softplus),
            dt_limit=dt_limit,
        )

    head_ranges = _chunk_ranges(E * H, E * G, MAX_GRID_DIM)
    bmax = max(1, MAX_GRID_DIM // nchunks)  # grid axis 1 holds batch * nchunks
    rows = []
    for b0 in range(0, Bt, bmax):
        b1 = min(Bt, b0 + bmax)
        parts = [call(b0, b1, h0, h1) for h0, h1 in head_ranges]
        rows.append(parts[0] if len(parts) == 1 else torch.cat(parts, dim=2))
    y = rows[0] if len(rows) == 1 else torch.cat(rows, dim=0)  # (Bt, L, E·H, P)
    return y.reshape(Bt, L, E, H, P).movedim(2, 0)  # (E, Bt, L, H, P)


# ------------------------------------------------------------------------------------------------
# causal depthwise convolution
# ------------------------------------------------------------------------------------------------


def causal_conv1d_torch(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None
) -> Tensor:
    """Our torch path, any width: x (E, Bt, L, C), weight (E, C, W), bias (E, C) -> (E, Bt, L, C).

    out_t[c] = act(Σ_k w[c, k] · x_{t-(W-1)+k}[c] + b[c]), the formula of ``PackedCausalConv``,
    computed by :func:`ssmrepro.kernels.conv.causal_conv1d_cpu` (tiled, explicit backward; also
    correct on a GPU, where the CUDA kernel is the fast path).
    """
    return causal_conv1d_cpu(x, weight, bias, activation)


def causal_conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    activation: str | None = None,
    *,
    kernels: Kernels | None = None,
) -> Tensor:
    """Packed depthwise causal conv through ``causal_conv1d_fn`` (members folded into channels).

    x (E, Bt, L, C), weight (E, C, W), bias (E, C) or None, activation None | "silu" ->
    (E, Bt, L, C). Widths outside 2..4 use :func:`causal_conv1d_torch` (the kernel rejects them).
    """
    if activation not in (None, "silu", "swish"):
        raise ValueError(f"activation must be None or 'silu', got {activation!r}")
    E, Bt, L, Cn = x.shape
    W = weight.shape[-1]
    if tuple(weight.shape) != (E, Cn, W) or (bias is not None and tuple(bias.shape) != (E, Cn)):
        raise ValueError(
            f"weight must be (E, C, W)=({E}, {Cn}, W) and bias (E, C); got "
            f"{tuple(weight.shape)}, {None if bias is None else tuple(bias.shape)}"
        )
    if not 2 <= W <= 4:
        return causal_conv1d_torch(x, weight, bias, activation)
    k = _kernels(kernels)
    # (Bt, E·C, L) channel-first with stride(2) = 1. contiguous() matters: for E = 1 the reshape is
    # a view with stride(1) = 1, which the kernel would read as channel-last (needs C % 8 == 0).
    xk = x.permute(1, 0, 3, 2).reshape(Bt, E * Cn, L).contiguous()
    wk = weight.reshape(E * Cn, W).contiguous()
    bk = None if bias is None else bias.reshape(E * Cn).to(wk.dtype).contiguous()
    outs = [
        k.causal_conv1d_fn(xk[:, c0:c1], wk[c0:c1], None if bk is None else bk[c0:c1], activation=activation)
        for c0, c1 in _chunk_ranges(E * Cn, 1, MAX_GRID_DIM)
    ]
    y = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)  # (Bt, E·C, L)
    return y.reshape(Bt, E, Cn, L).permute(1, 0, 3, 2)  # (E, Bt, L, C)
