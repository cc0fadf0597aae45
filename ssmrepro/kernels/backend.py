"""Library (kernels): backend and device selection, and the scan dispatch the models call.

``torch``: our pure-PyTorch scans (CPU or GPU) — the reference path, always available.
``cuda``: mamba-ssm / causal-conv1d kernels through the adapters in :mod:`ssmrepro.kernels.cuda`.
They are imported only when asked for (:func:`cuda_kernels_importable`), never at import time, so
nothing here needs them on a CPU machine. ``scripts/gpu_check.sh`` builds them from the sdists.

Dispatch. :func:`selective_scan` has the call signature of ``inplace.selective_scan_fused`` and
routes to the torch path or to the CUDA adapter by the process-wide scan backend
(:func:`set_scan_backend`, default ``"torch"``) or an explicit ``backend=``. A model switches with a
one-line import change::

    from ..kernels.backend import selective_scan as selective_scan_fused

and whoever builds the models (the training worker process) calls ``set_scan_backend(backend)``
with the result of :func:`select_backend`. :func:`causal_conv` does the same for the packed
depthwise convolution.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

from . import cuda as _cuda
from .inplace import selective_scan_fused
from .scan import selective_scan as _selective_scan_chunked
from .ssd import ssd as _ssd


class BackendError(RuntimeError):
    pass


_SCAN_BACKEND = "torch"
_BACKENDS = ("torch", "cuda")
# The torch path's kernels; swapped only by :func:`torch_kernels` (benchmarks, equivalence tests).
_TORCH_CONV = _cuda.causal_conv1d_torch
_TORCH_SCAN = selective_scan_fused
_USED: dict[str, set[str]] = {}  # caller (mixer class) -> kernel paths it took since the last reset


def note_kernel(who: str, impl: str) -> None:
    """Record that ``who`` (a mixer class name) ran kernel path ``impl`` (e.g. ``torch:ssd``)."""
    _USED.setdefault(who, set()).add(impl)


def kernel_usage() -> dict[str, str]:
    """{mixer: "path[, path]"} of every kernel call since :func:`reset_kernel_usage` (run records)."""
    return {k: ", ".join(sorted(v)) for k, v in sorted(_USED.items())}


def reset_kernel_usage() -> None:
    _USED.clear()


def cuda_kernels_importable() -> tuple[bool, str]:
    """(True, source) when a CUDA device exists and the compiled kernels import; else (False, why)."""
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
        k = _cuda.load_kernels()
    except _cuda.KernelImportError as exc:
        return False, f"CUDA kernels not importable: {exc} (build them with scripts/gpu_check.sh)"
    return True, f"CUDA kernels: {k.source}"


DEVICE_NAME = re.compile(r"auto|cpu|cuda(?::(\d+))?")  # what --device takes
DEVICE_EXPECTED = "expected auto, cpu, cuda or cuda:N"


def select_device(device: str) -> str:
    """auto | cpu | cuda | cuda:N -> the device to run on; anything else is a BackendError."""
    m = DEVICE_NAME.fullmatch(device)
    if m is None:
        raise BackendError(f"--device {device!r}: {DEVICE_EXPECTED}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if not torch.cuda.is_available():
        raise BackendError(f"--device {device}: CUDA is not available on this machine")
    if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
        raise BackendError(f"--device {device}: this machine has {torch.cuda.device_count()} GPUs")
    return device


BACKEND_CHOICES = ("auto", "torch", "cuda")


def backend_problem(backend: str, device: str) -> str | None:
    """Why ``--backend backend`` cannot run on ``--device device`` whatever the machine, or None:
    an unknown name, or the CUDA kernels asked for on the CPU. Checked where the device is not
    resolved here (``--engine ray``, whose workers resolve ``auto``), before anything starts."""
    if backend not in BACKEND_CHOICES:
        return f"unknown backend {backend!r} ({'|'.join(BACKEND_CHOICES)})"
    if backend == "cuda" and device == "cpu":
        return "--backend cuda needs --device cuda"
    return None


def select_backend(backend: str, device: str) -> tuple[str, str]:
    """Return (backend, one-line reason).

    ``cuda`` needs a CUDA device, ``--device cuda`` and importable kernels. ``auto`` picks
    ``cuda`` under the same conditions, else ``torch``.
    """
    if backend == "torch":
        return "torch", "backend torch (requested)"
    if backend not in BACKEND_CHOICES:
        raise BackendError(backend_problem(backend, device))
    ok, why = cuda_kernels_importable()
    on_cuda = device.startswith("cuda")
    if backend == "cuda":
        if not ok:
            raise BackendError(f"--backend cuda: {why}")
        if not on_cuda:
            raise BackendError("--backend cuda needs --device cuda")
        return "cuda", f"backend cuda ({why})"
    if ok and on_cuda:
        return "cuda", f"backend cuda ({why})"
    reason = why if not ok else f"device {device}"
    return "torch", f"backend torch ({reason}; pure-PyTorch scans on {device})"


def backend_for_dtypes(backend: str, why: str, requested: str, dtypes: set[str],
                       device: str) -> tuple[str, str]:
    """(backend, reason) for runs of the training ``dtypes`` once :func:`select_backend` chose
    ``backend`` (``why``) for the ``requested`` one. The CUDA kernels (mamba-ssm, causal-conv1d)
    compute in float32, float16 or bfloat16 only: with float64 runs ``--backend cuda`` is a
    BackendError, and ``auto`` takes the torch path, saying so (every pack failed on the GPU)."""
    if backend != "cuda" or "float64" not in dtypes:
        return backend, why
    if requested == "cuda":
        raise BackendError("--backend cuda: the CUDA kernels compute in float32, float16 or "
                           "bfloat16, and this sweep has train.dtype float64 runs: use "
                           "--backend torch (or auto)")
    return "torch", (f"backend torch (train.dtype float64: the CUDA kernels have no float64; "
                     f"pure-PyTorch scans on {device})")


def set_scan_backend(backend: str) -> None:
    """Process-wide backend used by :func:`selective_scan` / :func:`causal_conv` (torch | cuda)."""
    global _SCAN_BACKEND
    if backend not in _BACKENDS:
        raise BackendError(f"unknown scan backend {backend!r} ({'|'.join(_BACKENDS)})")
    _SCAN_BACKEND = backend


def get_scan_backend() -> str:
    return _SCAN_BACKEND


@contextmanager
def scan_backend(backend: str):
    """Temporarily set the scan backend: ``with scan_backend("cuda"): model(x)``."""
    old = _SCAN_BACKEND
    set_scan_backend(backend)
    try:
        yield
    finally:
        set_scan_backend(old)


@contextmanager
def torch_kernels(conv=None, scan=None):
    """Temporarily replace the torch path's conv and/or fused scan (same signatures as
    ``cuda.causal_conv1d_torch`` and ``inplace.selective_scan_fused``): how ``ssmrepro bench
    step`` runs the same model with the kernels before and after a change, in one process."""
    global _TORCH_CONV, _TORCH_SCAN
    old = _TORCH_CONV, _TORCH_SCAN
    _TORCH_CONV, _TORCH_SCAN = conv or old[0], scan or old[1]
    try:
        yield
    finally:
        _TORCH_CONV, _TORCH_SCAN = old


def _resolve(backend: str | None, *tensors: Tensor) -> str:
    be = backend or _SCAN_BACKEND
    if be not in _BACKENDS:
        raise BackendError(f"unknown scan backend {be!r} ({'|'.join(_BACKENDS)})")
    if be == "cuda" and not all(t.is_cuda for t in tensors):
        raise BackendError("scan backend cuda needs CUDA tensors (got a tensor on another device)")
    return be


def selective_scan(
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    *,
    backend: str | None = None,
    z: Tensor | None = None,
    delta_bias: Tensor | None = None,
    delta_softplus: bool = False,
    complex_output_scale: float = 1.0,
    who: str = "selective_scan",
) -> Tensor:
    """Selective scan with ``inplace.selective_scan_fused``'s signature and semantics.

    u, delta: (Bt, L, D_); A: (D_, N); B: (Bt, L, G, N) (or (Bt, L, N), (D_, N)); C: (Bt, L, G, N)
    or (D_, N); D: (D_,) or None -> y (Bt, L, D_). Optional extras (both backends):
    y = (scan(u, Δ) + D ⊙ u) ⊙ SiLU(z) with Δ = softplus(delta + delta_bias) if ``delta_softplus``.

    torch: ``inplace.selective_scan_fused`` for real inputs with its layouts, else the chunked
    ``scan.selective_scan`` (complex, shared B); cuda: :func:`ssmrepro.kernels.cuda.selective_scan`.
    u and delta may also come as (Bt, L, G, K), the channels split into B's G groups (see
    ``selective_scan_fused``; any strides, e.g. a pack's activations permuted): y then has that
    shape too. Only the fused torch kernel reads them so; every other path gets a (Bt, L, D_) copy.
    """
    if u.dim() == 4:
        fused = (_TORCH_SCAN is selective_scan_fused and _resolve(backend, u) == "torch"
                 and not (A.is_complex() or B.is_complex() or C.is_complex()) and z is None
                 and delta_bias is None and not delta_softplus and B.dim() == 4
                 and C.dim() in (2, 4))
        if not fused:  # one (Bt, L, D_) copy for the paths that take that layout
            shape = u.shape
            flat = lambda t: t.reshape(*shape[:2], -1)  # noqa: E731
            y = selective_scan(flat(u), flat(delta), A, B, C, D, backend=backend,
                               z=None if z is None else flat(z), delta_bias=delta_bias,
                               delta_softplus=delta_softplus,
                               complex_output_scale=complex_output_scale, who=who)
            return y.reshape(shape)
    if _resolve(backend, u) == "cuda":
        note_kernel(who, "cuda:selective_scan_fn")
        return _cuda.selective_scan(
            u,
            delta,
            A,
            B,
            C,
            D,
            z=z,
            delta_bias=delta_bias,
            delta_softplus=delta_softplus,
            complex_output_scale=complex_output_scale,
        )
    if delta_bias is not None:
        delta = delta + delta_bias
    if delta_softplus:
        delta = F.softplus(delta)  # same threshold (20) as the kernels
    fused_ok = (
        not (A.is_complex() or B.is_complex() or C.is_complex())
        and B.dim() == 4
        and (C.dim() == 4 or C.dim() == 2)
    )
    if fused_ok:
        note_kernel(who, "torch:selective_scan_fused")
        y = _TORCH_SCAN(u, delta, A, B, C, D)
    else:
        note_kernel(who, "torch:selective_scan")
        y = _selective_scan_chunked(u, delta, A, B, C, D, complex_output_scale=complex_output_scale)
    return y if z is None else y * F.silu(z)


def causal_conv(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    activation: str | None = None,
    *,
    backend: str | None = None,
    who: str = "causal_conv",
) -> Tensor:
    """Packed depthwise causal conv: x (E, Bt, L, C), weight (E, C, W), bias (E, C) -> (E, Bt, L, C)."""
    if _resolve(backend, x) == "cuda":
        W = weight.shape[-1]
        note_kernel(who, "cuda:causal_conv1d_fn" if 2 <= W <= 4 else f"torch:conv (width {W})")
        return _cuda.causal_conv1d(x, weight, bias, activation)
    note_kernel(who, "torch:conv")
    return _TORCH_CONV(x, weight, bias, activation)


def ssd_scan(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    *,
    chunk: int | None = None,
    backend: str | None = None,
    who: str = "ssd",
) -> Tensor:
    """Packed Mamba-2 SSD without skip or gate (the callers add D·x and the gate themselves).

    x: (E, Bt, L, H, P); dt: (E, Bt, L, H) the step Δ (already softplus'ed); A: (E, H) ≤ 0;
    B, C: (E, Bt, L, G, N) with H % G == 0 (head h reads group h // (H/G)) -> y (E, Bt, L, H, P):
    h_t = exp(Δ_t A) h_{t-1} + (Δ_t x_t) B_tᵀ,  y_t = h_t C_t.

    torch: ``ssd.ssd`` with members folded into the head axis (``chunk`` = its chunk length);
    cuda: ``mamba_chunk_scan_combined`` through :func:`ssmrepro.kernels.cuda.ssd_scan` (its own
    default chunk size).
    """
    if _resolve(backend, x) == "cuda":
        note_kernel(who, "cuda:mamba_chunk_scan_combined")
        return _cuda.ssd_scan(x, dt, A, B, C)
    note_kernel(who, "torch:ssd")
    E, Bt, L, H, P = x.shape
    G, N = B.shape[3], B.shape[4]

    def heads(t: Tensor) -> Tensor:  # (E, Bt, L, G, N) -> (E, Bt, L, H, N), groups expanded
        return t[:, :, :, :, None].expand(E, Bt, L, G, H // G, N).reshape(E, Bt, L, H, N)

    def fold(t: Tensor) -> Tensor:  # (E, Bt, L, H, ...) -> (Bt, L, E*H, ...)
        return t.movedim(0, 2).reshape(Bt, L, E * H, *t.shape[4:])

    a = dt * A[:, None, None, :]  # (E, Bt, L, H) log-decays
    y = _ssd(fold(x * dt[..., None]), fold(a), fold(heads(B)), fold(heads(C)), chunk)
    return y.reshape(Bt, L, E, H, P).movedim(2, 0)  # (E, Bt, L, H, P)
