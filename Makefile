# Every target bootstraps .venv on a fresh machine (Python 3.9+ with venv is all it needs).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
# msrun starts its workers as a bare `python` from PATH: the venv's bin must come first.
export PATH := $(BIN):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: install test demo bench clean

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[mindspore,test]'
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -q tests

demo: install
	$(BIN)/swapwatch explain fixtures/configs/swap_case3.yaml

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo-runs bench/out
