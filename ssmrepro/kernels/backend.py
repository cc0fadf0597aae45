"""Backend and device selection.

``torch``: our pure-PyTorch scans (CPU or GPU) — the reference path, always available.
``cuda``: mamba-ssm / causal-conv1d kernels; importable only with the ``cuda`` extra built against a
CUDA torch. mamba-ssm is imported lazily so that nothing here needs it on a CPU machine.
"""

from __future__ import annotations

import importlib.util

import torch


class BackendError(RuntimeError):
    pass


def cuda_kernels_importable() -> tuple[bool, str]:
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    for mod in ("selective_scan_cuda", "causal_conv1d"):
        if importlib.util.find_spec(mod) is None:
            return False, f"{mod} is not installed (pip install -e '.[cuda]')"
    return True, "mamba-ssm kernels found"


def select_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BackendError(f"--device {device}: CUDA is not available on this machine")
    return device


def select_backend(backend: str, device: str) -> tuple[str, str]:
    """Return (backend, one-line reason)."""
    ok, why = cuda_kernels_importable()
    if backend == "torch":
        return "torch", "backend torch (requested)"
    if backend == "cuda":
        if not ok:
            raise BackendError(f"--backend cuda: {why}")
        if not device.startswith("cuda"):
            raise BackendError("--backend cuda needs --device cuda")
        raise BackendError(
            "--backend cuda: the kernel path of the model zoo is not wired yet; use --backend torch "
            "(the torch path runs on the GPU)"
        )
    if backend != "auto":
        raise BackendError(f"unknown backend {backend!r} (auto|torch|cuda)")
    return "torch", f"backend torch ({why}; pure-PyTorch scans on {device})"
