# ssmrepro — every command a newcomer needs. Uses a local virtual environment in .venv.
# PY and VENV are the Makefile's unless given on make's command line (`make install VENV=/x/v`): a
# PY or VENV exported by an unrelated setup (a shell's rc, another project's tooling) took over,
# and `make install` made its venv over that folder and installed torch and ssmrepro there.
# PROFILE (`PROFILE=smoke make demo`), TORCH and SDISTS come from the environment too.
# (each value read whole: one with a space, `PY='python3 -X dev'`, was split into words, and its
# note was left out or named the first word alone)
$(foreach v,PY VENV,$(if $(filter environment,$(origin $(v))),$(eval env_$(v) := $$($(v)))))
PY      = python3
VENV    = .venv
same_text = $(and $(findstring |$(1)|,|$(2)|),$(findstring |$(2)|,|$(1)|))
$(foreach v,PY VENV,$(if $(and $(filter file,$(origin $(v))),$(filter file,$(origin env_$(v))),$(if \
  $(call same_text,$(env_$(v)),$($(v))),,x)),$(info note: $(v)=$(env_$(v)) of the environment is \
  not used (make ... $(v)=... sets it))))
BIN     := $(VENV)/bin
# pip and ssmrepro through the venv's python, not its console scripts: pip writes those with a
# `#!/bin/sh` + `exec "<venv>/bin/python"` head where the path has a space or is long, and sh
# expands a `$`, a backtick or a `"` of the path there (a clone in "My Results $HOME" ran
# "My Results /home/me/.venv/bin/python": `make install` and `make demo` stopped with exit 127)
PIP      = $(BIN)/python -m pip
SSMREPRO = $(BIN)/python -m ssmrepro
TORCH   ?= torch==2.13.0
PROFILE ?= quick
SDISTS  ?= third_party/sdists

# make splits a path at its spaces (and a target cannot hold one): VENV='/x/my venv' made two venvs,
# /x/my and ./venv, then ran '/x/my' as a command; an empty VENV made BIN /bin
one_path = $(if $(filter 1,$(words $($(1)))),,$(error $(1)='$($(1))': give it one path, without \
  spaces (make splits a path at them; a symbolic link to the folder has none)))
$(foreach v,VENV SDISTS,$(call one_path,$(v)))

.PHONY: install test smoke figures bench lint demo clean sdists gpu-check cuda-install test-ray

$(BIN)/ssmrepro: pyproject.toml
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH)"
	$(PIP) install -q -e '.[dev]'
	@touch $@

install: $(BIN)/ssmrepro              ## create .venv with torch (CPU build) and ssmrepro

demo: install                         ## train KEEP FIFTH (huang2025 Table 1) on the quick profile (PROFILE=)
	$(SSMREPRO) run keep-nth --profile $(PROFILE)

# -n: pytest-xdist, one test process per core (at most 4; CI has 2): the suite is CPU-bound
# (training, subprocesses) and took ~13 min in one process on CI's 2 cores
test: install                         ## unit tests + smoke run of every spec (CPU, no network)
	$(BIN)/python -m pytest -q -n auto --maxprocesses=4

smoke: install                        ## every spec's smoke profile into a scratch folder
	for s in $$($(BIN)/python -c "from ssmrepro.spec import spec_paths; print(' '.join(p.stem for p in spec_paths()))"); do \
	  $(SSMREPRO) run $$s --profile smoke --out .smoke-results || exit 1; done

figures: install                      ## rebuild every figure/report from committed results (no training) + results/README.md
	$(SSMREPRO) figures

bench: install                        ## packed vs one-at-a-time run-steps/s per workload, the scan micro-benchmark, the roofline
	for w in keep-nth-d8 mqar-linear mqar-full-L256 composite-mamba2 selective-copy-hybrid mqar-b2s6; do \
	  $(SSMREPRO) bench $$w --device cpu || exit 1; done
	$(SSMREPRO) bench scans
	$(SSMREPRO) bench roofline

lint: install
	$(BIN)/ruff check ssmrepro tests scripts

clean:
	rm -rf .smoke-results .pytest_cache results/*/*/runs results/*/*/claims

sdists: install                       ## download the pinned mamba-ssm / causal-conv1d sdists (git-ignored)
	mkdir -p $(SDISTS)
	MAMBA_SKIP_CUDA_BUILD=TRUE CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE \
	  $(PIP) download --no-deps --no-build-isolation --no-binary :all: -d $(SDISTS) \
	  mamba-ssm==2.3.2.post1 causal-conv1d==1.7.0
	$(BIN)/python scripts/build_kernels.py --sdists $(SDISTS) discover > /dev/null && echo "sdists OK: $(SDISTS)"

gpu-check:                            ## on a CUDA machine: build the kernels for sm_90, run pytest -m gpu
	bash scripts/gpu_check.sh all

cuda-install:                         ## with a CUDA build of torch: compile + install the pinned kernels (sm of this GPU)
	MAMBA_FORCE_BUILD=TRUE CAUSAL_CONV1D_FORCE_BUILD=TRUE $(PIP) install --no-build-isolation \
	  --no-deps mamba-ssm==2.3.2.post1 causal-conv1d==1.7.0
	$(PIP) install -e '.[cuda]'

test-ray:                             ## the Ray engine tests (needs: pip install -e '.[ray]')
	$(PIP) install -q -e '.[ray]'
	$(BIN)/python -m pytest -q tests/test_ray_engine.py
