# The two commands of the README: `make demo` (an example training run observed by stepscope, ending
# with its report) and `make test` (the whole test suite). Both set up what they need on a fresh machine:
# the demo only stepscope and the CPU build of torch, the tests everything else on top (separate stamps, so
# `make demo` never waits for MLflow, Lightning or transformers).
# VENV=/some/path puts the virtual environment elsewhere; PIP_ARGS passes options to every pip install
# (e.g. PIP_ARGS='--extra-index-url URL' for an index of CPU-only torch wheels, see README).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q -c constraints.txt $(PIP_ARGS)
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
TEST_EXTRAS := dev,torch,parquet,postgres,nvml,mlflow,lightning,huggingface,mpi,tensorflow,jax,pandas,dask
PYTEST_ARGS ?= -n 2 -q
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup setup-test system-deps demo test test-fast lint bench compat sanitize clean

# core + CPU torch: what `make demo` runs on (torch is pinned in constraints.txt to the CPU build)
# (setup.py and the C sources: an edited compiled part is rebuilt by the editable install)
$(DEMO_STAMP): pyproject.toml constraints.txt setup.py src/stepscope/traces/_kineto_reader.c \
		src/stepscope/collect/_region.c
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) -e '.[torch]'
	touch $@

# every extra the suite drives (MLflow, Lightning, transformers, Playwright, psycopg, mpi4py, TensorFlow, JAX, ...)
$(TEST_STAMP): $(DEMO_STAMP) pyproject.toml constraints.txt
	$(PIP) -e '.[$(TEST_EXTRAS)]'
	touch $@

setup: $(DEMO_STAMP)
setup-test: $(TEST_STAMP)

# Debian packages the tests drive for real: Chromium (browser tests), PostgreSQL (team store) and OpenMPI
# (mpirun; mpi4py links to it). Installed when run as root; otherwise a note says what is missing.
SYSTEM_PKGS := chromium postgresql openmpi-bin libopenmpi-dev
system-deps:
	@if ! command -v chromium >/dev/null || ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null \
	    || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages: $(SYSTEM_PKGS)"; \
	    apt-get update -qq </dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      $(SYSTEM_PKGS) </dev/null >/dev/null; \
	  else echo "note: install the Debian packages $(SYSTEM_PKGS) to run the browser, PostgreSQL and MPI tests"; fi; \
	fi

demo: setup
	rm -rf .stepscope-demo
	STEPSCOPE_HOME=.stepscope-demo stepscope run --name demo-mlp --profile-steps 3 -- python examples/train_mlp.py --epochs 3
	STEPSCOPE_HOME=.stepscope-demo stepscope advise latest
	STEPSCOPE_HOME=.stepscope-demo stepscope report latest

# As root, the suite runs strict: a test that skips for anything but a missing GPU fails (tests/conftest.py).
test: system-deps setup-test
	STEPSCOPE_STRICT_SKIPS=$$([ "$$(id -u)" = 0 ] && echo 1 || echo 0) $(PY) -m pytest $(PYTEST_ARGS) tests

# the inner loop: no training processes, no torch needed
test-fast: setup-test
	$(PY) -m pytest -q -m "not slow" tests

lint: setup-test
	$(VENV)/bin/ruff check src tests benchmarks examples && $(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/overhead.py

# The version matrix (docs/frameworks.md, "Versions tested"): tests/compat run in one venv per version set (the
# oldest claimed and the newest torch, pinned and newest TensorFlow / Keras / JAX) under COMPAT_VENVS, kept
# between runs. Several GB the first time (torch's CUDA builds): run before a release, not in CI.
COMPAT_VENVS ?= /tmp/stepscope-compat
compat: setup
	$(PY) benchmarks/compat.py --venvs $(COMPAT_VENVS)

# The compiled trace reader under AddressSanitizer and UBSan (gcc): built into a temporary folder, its planted bugs
# caught first (the positive controls), then every fuzz input of the suite read through it. Run before a release
# (docs/reliability.md); a few minutes.
SAN_FLAGS := -shared -fPIC -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
sanitize: setup-test
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	gcc $(SAN_FLAGS) -DSTEPSCOPE_SANITIZER_CONTROL -I"$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
	  src/stepscope/traces/_kineto_reader.c -o "$$tmp/_kineto_reader.so" && \
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(PY) tests/faults/sanitize_reader.py "$$tmp/_kineto_reader.so"

clean:
	rm -rf $(VENV) .stepscope .stepscope-demo .pytest_cache
