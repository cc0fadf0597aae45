#!/usr/bin/env bash
# Build the mamba-ssm / causal-conv1d kernels for sm_90 on a bare CUDA machine (no network) and run
# the GPU tests (tests/test_gpu.py) through our adapters. One command:
#
#     bash scripts/gpu_check.sh [all|build|test]        (default: all)
#
# Needs: python3 with a CUDA torch, triton, einops, ninja, pytest (the 'cuda' device image has them),
# nvcc, a GPU, and the two sdists in third_party/sdists (`make sdists` on a machine with network;
# with the device tool: run(command="bash scripts/gpu_check.sh", carry=["third_party/sdists"])).
#
# Steps: environment -> sdists (sha256) -> unpack + source discovery -> build both extensions in
# parallel (torch.utils.cpp_extension.load, TORCH_CUDA_ARCH_LIST=9.0; ~3-8 min, estimate) -> import
# check -> pytest -m gpu -> summary. Results go to $OUT (device tool) or results/bench/gpu-check/:
#   gpu_check.json / gpu_check.csv   GPU, torch, commit, builds, per-test outcome, time, errors
#   pytest.log, build_selective_scan.log, build_causal_conv1d.log   (6 files: $OUT returns <= 8)
# The build lives in build/kernels (git-ignored); re-running reuses it (ninja rebuilds nothing), so
# a run cut off by a time limit can be resumed with `test` on a warm machine.
#
# `build` also works on a machine without a GPU (a CUDA build of torch, nvcc and CUDA_HOME are
# enough): it compiles both extensions and checks that they import (they cannot run there).
#
# Environment knobs: PYTHON (python3), ARCH (9.0), SDISTS, KERNEL_BUILD (build/kernels), GIT_COMMIT,
# CXX_STD (default: c++20 for torch >= 2.14, whose headers need it; else torch's own -std),
# GPU_TEST_ARGS (extra pytest args, e.g. "-x"), MAMBA_DETERMINISTIC (default 1 here: Triton SSD
# without autotuning, fewer compilations; notes §1.3).
set -Eeuo pipefail

# A relative OUT, SDISTS, KERNEL_BUILD or PYTHON path is the caller's, taken from the folder the
# script is started in (`cd elsewhere; OUT=out bash .../gpu_check.sh` wrote into <checkout>/out and
# said "logs in out"); the defaults are the checkout's.
HERE="$PWD"
from_here() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$HERE" "$1" ;; esac; }
[ -n "${OUT:-}" ] && OUT="$(from_here "$OUT")"
[ -n "${SDISTS:-}" ] && SDISTS="$(from_here "$SDISTS")"
[ -n "${KERNEL_BUILD:-}" ] && KERNEL_BUILD="$(from_here "$KERNEL_BUILD")"
case "${PYTHON:-}" in */*) PYTHON="$(from_here "$PYTHON")" ;; esac
# the checkout holding this file, also when it is run through a symbolic link (ROOT was the link's
# folder's parent), and with CDPATH exported (cd then printed the folder too, into ROOT)
ROOT="$(CDPATH='' cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")/.." && pwd)"
cd "$ROOT"
PHASE="${1:-all}"
PY="${PYTHON:-python3}"
ARCH="${ARCH:-9.0}"
SDISTS="${SDISTS:-third_party/sdists}"
WORK="${KERNEL_BUILD:-build/kernels}"
RES="${OUT:-results/bench/gpu-check}"
CURRENT="start"
export PYTHONUNBUFFERED=1

case "$PHASE" in all|build|test) ;; *) echo "usage: $0 [all|build|test]" >&2; exit 2 ;; esac
mkdir -p "$RES" "$WORK"

step() { CURRENT="$1"; echo; echo "=== [gpu_check] $1   ($(date -u +%H:%M:%S) UTC)"; }
die() { echo "!!! [gpu_check] FAILED at step '$CURRENT': $*" >&2; exit 1; }
trap 'rc=$?; if [ $rc -ne 0 ]; then echo "!!! [gpu_check] FAILED at step '"'"'$CURRENT'"'"' (exit $rc); logs in $RES" >&2; fi' EXIT

# ---------------------------------------------------------------------------------------------
step "environment"
command -v "$PY" >/dev/null || die "no $PY on PATH"
NEED_GPU=1; [ "$PHASE" = "build" ] && NEED_GPU=0
NEED_GPU=$NEED_GPU "$PY" - <<'EOF' || die "a CUDA build of torch (and, except for 'build', a visible GPU) is required"
import os, sys, torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda)
if not torch.version.cuda:  # not `assert`: PYTHONOPTIMIZE=1 would skip the check
    sys.exit("CPU-only torch build")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("GPU", p.name, f"sm_{p.major}{p.minor}", f"{p.total_memory / 2**30:.0f} GiB")
else:
    if os.environ["NEED_GPU"] != "0":
        sys.exit("torch sees no GPU")
    print("no GPU: build and import check only")
EOF
nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not available)"
if [ "$PHASE" != "test" ]; then
  "$PY" -c "import ninja" 2>/dev/null || command -v ninja >/dev/null || die "ninja is required for the build"
fi
NEEDED="triton einops pytest packaging"; [ "$PHASE" = "build" ] && NEEDED=""
for m in $NEEDED; do
  "$PY" -c "import $m" 2>/dev/null || die "python package '$m' is missing (carry it as a wheel)"
done
"$PY" -c "import pydantic" 2>/dev/null \
  || echo "note: pydantic missing: the model-level GPU test (ssmrepro.models) will be skipped"
COMMIT="${GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
echo "commit $COMMIT"

# ---------------------------------------------------------------------------------------------
step "sdists + source discovery"
"$PY" scripts/build_kernels.py --sdists "$SDISTS" --work "$WORK" discover > "$WORK/discover.json" \
  || die "sdists missing / corrupt or source lists changed (see above)"
echo "sources discovered: $(grep -c '\.cu"' "$WORK/discover.json") .cu files; unpacked under $WORK/src"

# ---------------------------------------------------------------------------------------------
if [ "$PHASE" != "test" ]; then
  step "build selective_scan_cuda + causal_conv1d_cuda (sm ${ARCH}, in parallel)"
  NCPU="$(nproc)"
  SS_JOBS=$(( NCPU > 6 ? NCPU - 4 : NCPU ))
  CC_JOBS=$(( NCPU > 6 ? 4 : NCPU ))
  STD="${CXX_STD:-$("$PY" -c 'import torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); print("c++20" if v >= (2, 14) else "")')}"
  STD_ARGS=(); [ -n "$STD" ] && STD_ARGS=(--std "$STD")
  echo "MAX_JOBS: selective_scan $SS_JOBS, causal_conv1d $CC_JOBS; -std: ${STD:-torch default}"
  t0=$(date +%s)
  "$PY" scripts/build_kernels.py --sdists "$SDISTS" --work "$WORK" build selective_scan \
      --arch "$ARCH" --jobs "$SS_JOBS" "${STD_ARGS[@]}" > "$RES/build_selective_scan.log" 2>&1 &
  pid_ss=$!
  "$PY" scripts/build_kernels.py --sdists "$SDISTS" --work "$WORK" build causal_conv1d \
      --arch "$ARCH" --jobs "$CC_JOBS" "${STD_ARGS[@]}" > "$RES/build_causal_conv1d.log" 2>&1 &
  pid_cc=$!
  rc_ss=0; rc_cc=0
  wait "$pid_ss" || rc_ss=$?
  wait "$pid_cc" || rc_cc=$?
  BUILD_WALL=$(( $(date +%s) - t0 ))
  echo "build wall time: $BUILD_WALL s"
  for x in selective_scan causal_conv1d; do
    grep -h '^\[build\]' "$RES/build_$x.log" || true
  done
  if [ $rc_ss -ne 0 ] || [ $rc_cc -ne 0 ]; then
    [ $rc_ss -ne 0 ] && { echo "--- tail of build_selective_scan.log"; tail -n 60 "$RES/build_selective_scan.log"; }
    [ $rc_cc -ne 0 ] && { echo "--- tail of build_causal_conv1d.log"; tail -n 60 "$RES/build_causal_conv1d.log"; }
    die "compilation failed (selective_scan rc=$rc_ss, causal_conv1d rc=$rc_cc)"
  fi
fi

# ---------------------------------------------------------------------------------------------
step "import check"
case "$WORK" in /*) SITE="$WORK/site" ;; *) SITE="$ROOT/$WORK/site" ;; esac
export SSMREPRO_KERNEL_PATHS="$SITE"
[ -d "$SSMREPRO_KERNEL_PATHS" ] || die "no build at $SSMREPRO_KERNEL_PATHS (run '$0 build' first)"
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  "$PY" scripts/build_kernels.py --work "$WORK" check --out "$WORK/kernel_info.json" \
    || die "the kernels do not import through ssmrepro.kernels.cuda (see the message above)"
else  # no GPU: the compiled modules must load and expose their functions; nothing can run
  "$PY" scripts/build_kernels.py --work "$WORK" import-check --wall "${BUILD_WALL:-}" \
      --out "$RES/cuda-build.json" || die "the compiled extensions do not import"
fi

[ "$PHASE" = "build" ] && { echo "build OK"; CURRENT="done"; exit 0; }

# ---------------------------------------------------------------------------------------------
# Three pytest groups, most important first, each summarised as soon as it ends, so a run cut
# off by a time limit still leaves gpu_check.json for the groups that finished. The Triton SSD
# group compiles many kernels; MAMBA_DETERMINISTIC=1 (default here) makes mamba-ssm use one
# (the cheapest) config per kernel instead of autotuning ~10 (same math; set it to 0 to test the
# autotuned configs, which costs several more minutes of compilation on a fresh machine).
export SSMREPRO_REQUIRE_GPU_TESTS=1
export MAMBA_DETERMINISTIC="${MAMBA_DETERMINISTIC:-1}"
: > "$RES/pytest.log"
rc_test=0
JUNITS=()
for group in scan conv ssd; do
  case $group in
    scan) sel="selective_scan or mixer" ;;
    conv) sel="causal_conv1d" ;;
    ssd)  sel="ssd" ;;
  esac
  step "pytest -m gpu -k '$sel'  (MAMBA_DETERMINISTIC=$MAMBA_DETERMINISTIC)"
  junit="$WORK/junit_$group.xml"
  rm -f "$junit"
  JUNITS+=("$junit")
  set +e
  # shellcheck disable=SC2086
  "$PY" -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "$sel" --junitxml="$junit" \
      -o junit_family=xunit1 ${GPU_TEST_ARGS:-} 2>&1 | tee -a "$RES/pytest.log"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] || rc_test=$rc
  "$PY" scripts/build_kernels.py --work "$WORK" summarize --junit "${JUNITS[@]}" \
      --info "$WORK/kernel_info.json" --out "$RES" --commit "$COMMIT" || true
done

CURRENT="summary"
# the path as an argument, not inside the code: a quote in $OUT was a SyntaxError, read as "no GPU
# test passed" after every test had passed
"$PY" -c "import json, sys; t = json.load(open(sys.argv[1]))['tests']; print(t); sys.exit(t['passed'] == 0)" \
  "$RES/gpu_check.json" || die "no GPU test passed (see $RES/gpu_check.csv)"
[ "$rc_test" -eq 0 ] || die "pytest -m gpu failed (exit $rc_test; see $RES/pytest.log and $RES/gpu_check.csv)"
CURRENT="done"
echo "gpu_check OK: $RES/gpu_check.json"
