# Two commands after cloning: `make run` and `make test`. Both build .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

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

clean:
	rm -rf $(VENV) .tessera build *.egg-info
