"""Build the mamba-ssm / causal-conv1d CUDA extensions from their sdists, offline, for one arch.

Used by scripts/gpu_check.sh (notes/kernels.md §3). Subcommands::

    discover   unpack the sdists, list the sources and flags each build will use, and check the
               source lists against each sdist's own setup.py (no compiler needed: a dry run)
    build      compile one extension with torch.utils.cpp_extension.load for TORCH_CUDA_ARCH_LIST
               (default 9.0 = H100/H200 only) into <work>/ext/<module>/, then install it and the
               package sources into <work>/site/ (the one directory to put on SSMREPRO_KERNEL_PATHS)
    check      import the kernels the way the cuda backend does and print versions (JSON)
    summarize  turn pytest's JUnit XML plus build/import info into gpu_check.json / gpu_check.csv

Why cpp_extension.load and not ``pip install``: both setup.py files hard-code 9 ``-gencode``s
under CUDA 13 (TORCH_CUDA_ARCH_LIST cannot narrow them, since torch drops its own arch flags once
any user flag contains "arch"), and pip's bdist_wheel tries to download a prebuilt wheel, which
fails without network. Here we pass the same defines / nvcc flags as setup.py minus ``-gencode``,
``-lineinfo``, ``--ptxas-options=-v`` and ``--threads``, and let torch add the arch flags and its
own ``-std`` (``--std`` overrides it; setup.py uses c++17 for mamba, torch's default otherwise).
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# pinned sdists (make sdists); sha256 of the files PyPI served when this was written
SDISTS = {
    "mamba_ssm-2.3.2.post1.tar.gz": "104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028",
    "causal_conv1d-1.7.0.tar.gz": "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b",
}

NVCC_FLAGS = [  # setup.py's list (both packages) without -lineinfo / --ptxas-options=-v / arch flags
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
]

EXTS = {
    "selective_scan": {
        "sdist": "mamba_ssm-2.3.2.post1",
        "module": "selective_scan_cuda",
        "package": "mamba_ssm",
        "csrc": "csrc/selective_scan",
        "globs": ["selective_scan.cpp", "selective_scan_fwd_*.cu", "selective_scan_bwd_*.cu"],
    },
    "causal_conv1d": {
        "sdist": "causal_conv1d-1.7.0",
        "module": "causal_conv1d_cuda",
        "package": "causal_conv1d",
        "csrc": "csrc",
        "globs": [
            "causal_conv1d.cpp",
            "causal_conv1d_fwd.cu",
            "causal_conv1d_bwd.cu",
            "causal_conv1d_update.cu",
        ],
    },
}


class BuildError(RuntimeError):
    pass


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unpack(sdists: Path, work: Path) -> Path:
    """Check and unpack both sdists into <work>/src (idempotent). Returns <work>/src."""
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    for name, digest in SDISTS.items():
        tar = sdists / name
        if not tar.is_file():
            raise BuildError(
                f"missing {tar}: run `make sdists` on a machine with network and carry {sdists} to this one"
            )
        got = _sha256(tar)
        if got != digest:
            raise BuildError(f"{tar}: sha256 {got} != pinned {digest}")
        target = src / name[: -len(".tar.gz")]
        if not (target / "setup.py").is_file():
            with tarfile.open(tar) as tf:
                kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tf.extractall(src, **kw)
        if not (target / "setup.py").is_file():
            raise BuildError(f"{tar} did not unpack to {target}")
    return src


def _setup_sources(setup_py: Path, module: str) -> list[str]:
    """The ``sources=[...]`` list of the CUDAExtension named ``module`` in setup.py (text parse)."""
    text = setup_py.read_text()
    m = re.search(r'name\s*=\s*"' + re.escape(module) + r'"\s*,\s*sources\s*=\s*\[(.*?)\]', text, re.S)
    if not m:
        raise BuildError(f"{setup_py}: no CUDAExtension(name={module!r}, sources=[...]) found")
    return re.findall(r'"([^"]+)"', m.group(1))


def discover(ext: str, src: Path) -> dict:
    """Sources, include dir and flags for one extension; checked against setup.py."""
    spec = EXTS[ext]
    root = src / spec["sdist"]
    csrc = root / spec["csrc"]
    sources: list[str] = []
    for pat in spec["globs"]:  # the pattern only: a checkout in 'ssm [v2]' matched no file
        hits = sorted(str(p) for p in csrc.glob(pat))
        if not hits:
            raise BuildError(f"{ext}: no source matches {csrc / pat}")
        sources += hits
    declared = sorted(str(root / s) for s in _setup_sources(root / "setup.py", spec["module"]))
    if sorted(sources) != declared:
        raise BuildError(
            f"{ext}: discovered sources differ from setup.py:\n  found    {sorted(sources)}\n"
            f"  setup.py {declared}"
        )
    return {
        "ext": ext,
        "module": spec["module"],
        "root": str(root),
        "include": str(csrc),
        "sources": sources,
        "package_dir": str(root / spec["package"]),
        "nvcc_flags": NVCC_FLAGS,
        "cxx_flags": ["-O3"],
    }


def _toolchain() -> dict:
    import torch
    from torch.utils import cpp_extension as ce

    if torch.version.cuda is None:
        raise BuildError(f"torch {torch.__version__} is a CPU build: no CUDA extensions possible")
    if ce.CUDA_HOME is None:
        raise BuildError("CUDA_HOME not found (no nvcc on PATH and no /usr/local/cuda)")
    nvcc = Path(ce.CUDA_HOME) / "bin" / "nvcc"
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"{nvcc} --version failed: {exc}") from exc
    try:
        ce.verify_ninja_availability()
    except RuntimeError as exc:
        raise BuildError("ninja is required by torch.utils.cpp_extension.load") from exc
    rel = re.search(r"release (\S+),", out)
    return {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_home": ce.CUDA_HOME,
        "nvcc": rel.group(1) if rel else out.strip().splitlines()[-1],
    }


def build(ext: str, sdists: Path, work: Path, arch: str, jobs: int | None, std: str | None) -> dict:
    info = discover(ext, unpack(sdists, work))
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    if jobs:
        os.environ["MAX_JOBS"] = str(jobs)
    tool = _toolchain()
    from torch.utils.cpp_extension import load

    bdir = work / "ext" / info["module"]
    bdir.mkdir(parents=True, exist_ok=True)
    nvcc = list(info["nvcc_flags"]) + ([f"-std={std}"] if std else [])
    cxx = list(info["cxx_flags"]) + ([f"-std={std}"] if std else [])
    print(
        f"[build] {info['module']}: {len(info['sources'])} sources, arch {arch}, MAX_JOBS="
        f"{os.environ.get('MAX_JOBS')}, torch {tool['torch']} (CUDA {tool['torch_cuda']}), "
        f"nvcc {tool['nvcc']}",
        flush=True,
    )
    t0 = time.perf_counter()
    mod = load(
        name=info["module"],
        sources=info["sources"],
        extra_cflags=cxx,
        extra_cuda_cflags=nvcc,
        extra_include_paths=[info["include"]],
        build_directory=str(bdir),
        verbose=True,
    )
    secs = time.perf_counter() - t0
    so = Path(mod.__file__)
    site = work / "site"
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy2(so, site / so.name)  # importable by name from <work>/site
    dst = site / Path(info["package_dir"]).name
    shutil.copytree(info["package_dir"], dst, dirs_exist_ok=True)
    rec = {
        "ext": ext,
        "module": info["module"],
        "seconds": round(secs, 1),
        "so": so.name,
        "so_bytes": so.stat().st_size,
        "arch": arch,
        **tool,
    }
    (work / f"build_{ext}.json").write_text(json.dumps(rec, indent=2))
    print(
        f"[build] {info['module']} done in {secs:.0f} s, {so.stat().st_size / 1e6:.1f} MB -> {site}",
        flush=True,
    )
    return rec


def check(out: Path | None) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from ssmrepro.kernels import backend, cuda

    if not torch.cuda.is_available():
        raise BuildError("torch sees no CUDA device")
    k = cuda.import_kernel_modules()  # raises KernelImportError naming the failing step
    ok, why = backend.cuda_kernels_importable()
    if not ok:
        raise BuildError(why)
    import triton

    p = torch.cuda.get_device_properties(0)
    rec = {
        "gpu": p.name,
        "capability": f"{p.major}.{p.minor}",
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
        "kernels": k.source,
        "python": sys.version.split()[0],
    }
    print(json.dumps(rec, indent=2))
    if out:
        out.write_text(json.dumps(rec, indent=2))
    return rec


def import_check(work: Path, wall: str | None, out: Path | None) -> dict:
    """Without a GPU: load the compiled extensions from <work>/site and list what they export
    (nothing can run). Writes a build summary: versions, per-extension build seconds, modules."""
    import importlib
    import platform

    import torch  # noqa: F401  (loads libc10 / libtorch, which the extensions link against)

    sys.path.insert(0, str(work / "site"))
    mods = {}
    for ext, name in (("selective_scan", "selective_scan_cuda"), ("causal_conv1d", "causal_conv1d_cuda")):
        build_info = work / f"build_{ext}.json"
        rec = json.loads(build_info.read_text()) if build_info.exists() else {}
        try:
            m = importlib.import_module(name)
            fns = sorted(n for n in dir(m) if not n.startswith("_"))
            mods[name] = {"imported": True, "functions": fns, "so_bytes": rec.get("so_bytes"),
                          "build_seconds": rec.get("seconds"), "arch": rec.get("arch")}
        except ImportError as exc:
            mods[name] = {"imported": False, "error": str(exc), "build_seconds": rec.get("seconds")}
    tool = _toolchain()
    summary = {
        "what": "mamba-ssm 2.3.2.post1 selective_scan_cuda + causal-conv1d 1.7.0 causal_conv1d_cuda, "
                "compiled for sm_90 on a machine without a GPU (import check only)",
        "host_cpus": os.cpu_count(),
        "python": platform.python_version(),
        **tool,
        "build_wall_s": int(wall) if wall else None,
        "modules": mods,
    }
    print(json.dumps(summary, indent=2))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(summary, indent=2) + "\n")
    if not all(m["imported"] for m in mods.values()):
        raise BuildError("an extension did not import: " + ", ".join(
            f"{k}: {v.get('error')}" for k, v in mods.items() if not v["imported"]))
    return summary


def _code_hash() -> str:
    h = hashlib.sha256()
    for rel in (
        "ssmrepro/kernels/cuda.py",
        "tests/support/kernel_api_emulator.py",
        "ssmrepro/kernels/backend.py",
        "tests/test_gpu.py",
    ):
        p = ROOT / rel
        h.update(rel.encode() + (p.read_bytes() if p.is_file() else b""))
    return h.hexdigest()[:16]


def summarize(junits: list[Path], work: Path, info: Path | None, out: Path, commit: str) -> int:
    """Write <out>/gpu_check.json and gpu_check.csv; return the number of failed/errored tests."""
    rows = []
    found = [j for j in junits if j.is_file()]
    for junit in found:
        for tc in ET.parse(junit).getroot().iter("testcase"):
            outcome, msg = "passed", ""
            for tag in ("failure", "error", "skipped"):
                el = tc.find(tag)
                if el is not None:
                    outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                    msg = (el.get("message") or "").splitlines()[0][:300] if el.get("message") else ""
                    break
            props = {p.get("name"): p.get("value") for p in tc.iter("property")}
            rows.append(
                {
                    "test": tc.get("name"),
                    "outcome": outcome,
                    "seconds": float(tc.get("time") or 0),
                    "message": msg,
                    **props,
                }
            )
    builds = [json.loads(p.read_text()) for p in sorted(work.glob("build_*.json"))]
    n_bad = sum(r["outcome"] in ("failed", "error") for r in rows)
    summary = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
        "code_sha256_16": _code_hash(),
        "environment": json.loads(info.read_text()) if info and info.is_file() else None,
        "builds": builds,
        "tests": {
            "total": len(rows),
            "failed": n_bad,
            "passed": sum(r["outcome"] == "passed" for r in rows),
            "skipped": sum(r["outcome"] == "skipped" for r in rows),
            "seconds": round(sum(r["seconds"] for r in rows), 1),
        },
        "results": rows,
        "junit_files": {str(j): j.is_file() for j in junits},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    keys = ["test", "outcome", "seconds", "message"]
    extra = sorted({k for r in rows for k in r} - set(keys))
    with open(out / "gpu_check.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys + extra)
        w.writeheader()
        w.writerows(rows)
    print(f"[summary] {summary['tests']} -> {out / 'gpu_check.json'}")
    return n_bad if found else 1


def main(argv: list[str] | None = None) -> int:
    # under python -OO (docstrings stripped) the usage is read from this file, as the other
    # scripts read theirs (ssmrepro.util.docstring; this one runs without ssmrepro importable)
    doc = __doc__ or ast.get_docstring(ast.parse(Path(__file__).read_text(encoding="utf-8")),
                                       clean=False)
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdists", type=Path, default=ROOT / "third_party" / "sdists")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "kernels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("discover", help="unpack + list sources/flags, check against setup.py (no compiler)")
    b = sub.add_parser("build", help="compile one extension")
    b.add_argument("ext", choices=sorted(EXTS))
    b.add_argument("--arch", default=os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"))
    b.add_argument("--jobs", type=int, default=None, help="MAX_JOBS for ninja (default: torch's choice)")
    b.add_argument("--std", default=None, help="force -std=... (default: torch's own)")
    c = sub.add_parser("check", help="import the kernels as the cuda backend does; print versions")
    c.add_argument("--out", type=Path, default=None)
    ic = sub.add_parser("import-check", help="no GPU: load the built extensions, write a summary")
    ic.add_argument("--wall", default=None, help="build wall time in seconds (from gpu_check.sh)")
    ic.add_argument("--out", type=Path, default=None)
    s = sub.add_parser("summarize", help="JUnit XML + build info -> gpu_check.json / .csv")
    s.add_argument("--junit", type=Path, nargs="+", required=True, help="JUnit XML files")
    s.add_argument("--info", type=Path, default=None)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--commit", default=os.environ.get("GIT_COMMIT", "unknown"))
    a = ap.parse_args(argv)
    try:
        if a.cmd == "discover":
            src = unpack(a.sdists, a.work)
            for ext in EXTS:
                print(json.dumps(discover(ext, src), indent=2))
            return 0
        if a.cmd == "build":
            build(a.ext, a.sdists, a.work, a.arch, a.jobs, a.std)
            return 0
        if a.cmd == "check":
            check(a.out)
        elif a.cmd == "import-check":
            import_check(a.work, a.wall, a.out)
            return 0
        return 1 if summarize(a.junit, a.work, a.info, a.out, a.commit) else 0
    except Exception as exc:  # one clear line for the shell script, then the traceback
        print(f"\n!!! build_kernels {a.cmd} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise


if __name__ == "__main__":
    sys.exit(main())
