# Two commands after cloning: `make run` and `make test`. Both build .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The image every service runs (deploy/Dockerfile); the chart's default image is this name.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/tessera/tessera:$(VERSION)

.PHONY: run test lint bench clean image

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
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) -m benchmarks.eventlog

image:
	docker build -f deploy/Dockerfile -t $(IMAGE) .

clean:
	rm -rf $(VENV) .tessera build *.egg-info
