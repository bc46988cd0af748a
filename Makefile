# The two commands of the README: `make demo` (an example training run observed by stepscope, ending
# with its report) and `make test` (the whole test suite). Both set up what they need on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup system-deps demo test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,torch,parquet,postgres,nvml,mlflow,lightning,huggingface,tensorflow,jax]'
	touch $(STAMP)

setup: $(STAMP)

# Debian packages the tests drive for real: Chromium (browser tests) and PostgreSQL (team store).
system-deps:
	@if ! command -v chromium >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium postgresql >/dev/null; \
	  else echo "note: install chromium and postgresql (Debian packages) to run the browser and PostgreSQL tests"; fi; \
	fi

demo: setup
	rm -rf .stepscope-demo
	STEPSCOPE_HOME=.stepscope-demo stepscope run --name demo-mlp --profile-steps 3 -- python examples/train_mlp.py --epochs 3
	STEPSCOPE_HOME=.stepscope-demo stepscope advise latest
	STEPSCOPE_HOME=.stepscope-demo stepscope report latest

test: setup system-deps
	$(PY) -m pytest -n 2 -q tests

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks examples && $(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .stepscope .stepscope-demo .pytest_cache
