# Two entry points a newcomer needs: `make run` and `make test`. Both build .venv from
# pyproject.toml on first use and again whenever pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: run test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[test]"
	touch $@ $(VENV)/.run-deps

run: $(VENV)/.run-deps
	$(BIN)/workbench $(ARGS)

test: $(VENV)/.test-deps
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.test-deps
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m tests.bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
