# Every target bootstraps .venv on a fresh machine (Python 3.9+ with venv is all it needs).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
# msrun starts its workers as a bare `python` from PATH: the venv's bin must come first.
export PATH := $(BIN):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: install oracle core dryrun lint test demo bench bench-plan clean

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[mindspore,test]'
	touch $@

install: $(VENV)/.installed

# Real MindFormers 2.1.0 in its own venv: the oracle the strategy engine is tested against, line for line.
ORACLE := .oracle-venv
$(ORACLE)/.ready: tests/oracle/requirements.lock
	test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	$(ORACLE)/bin/python -m pip install -q --no-deps -r tests/oracle/requirements.lock
	cd /tmp && LOG_MF_PATH=/tmp/swapwatch-oracle-check $(CURDIR)/$(ORACLE)/bin/python -c \
	  'from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting' >/dev/null
	touch $@

oracle: $(ORACLE)/.ready

# MindSpore DryRun (MS_SIMULATION_LEVEL=1) on a CPU host: stand-ins for the CANN libraries the PyPI wheel's
# Ascend plugin links against, built from the wheel in .oracle-venv with gcc (about a minute; never committed).
# swapwatch/memory/dryrun.py runs a YAML through them (docs/estimate.md, "DryRun L1").
DRYRUN := .dryrun-stubs
$(DRYRUN)/.built: $(ORACLE)/.ready tools/dryrun/make_cann_stubs.sh tools/dryrun/cann_stub_special.cc
	rm -rf $(DRYRUN)
	VENV=$(ORACLE) tools/dryrun/make_cann_stubs.sh $(CURDIR)/$(DRYRUN) >/dev/null

dryrun: $(DRYRUN)/.built

# A core-only install (`pip install .`, no extras: no MindSpore, no psutil), as a user on an Ascend
# cluster has it: tests/test_core_install.py runs every command once from it (SWAPWATCH_CORE_VENV).
# Reinstalled whenever a package file changes, so it always holds the code under test.
CORE := .core-venv
$(CORE)/.installed: setup.cfg pyproject.toml $(shell find swapwatch -name '*.py' -o -name '*.yaml')
	test -x $(CORE)/bin/python || $(PYTHON) -m venv $(CORE)
	$(CORE)/bin/python -m pip install -q .
	rm -rf build
	touch $@

core: $(CORE)/.installed

# ruff over the tree; mypy over the domain model (the modules every command builds on).
TYPED := swapwatch/actions.py swapwatch/plan.py swapwatch/config.py swapwatch/families.py \
         swapwatch/parsers/model.py swapwatch/checks/__init__.py swapwatch/compare.py \
         swapwatch/layer_table.py swapwatch/setting_lines.py
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy $(wildcard $(TYPED))

# SWAPWATCH_REQUIRE_ALL: MindSpore, msrun, the oracle and the core venv must be there (no silent skips).
test: install oracle core dryrun lint
	SWAPWATCH_REQUIRE_ALL=1 SWAPWATCH_CORE_VENV=$(CURDIR)/$(CORE) $(PY) -m pytest -q tests

# The whole loop on 2 CPU cores in about a minute: the plan, 2-worker msrun jobs of the tiny Llama
# (baseline, then the demo YAML) through `swapwatch run` (env, logs, IR dumps, verification), then
# the memory plot of both. DEMO_CONFIG, DEMO_BASELINE, DEMO_STEPS, DEMO_MODEL override (scripts/demo.sh).
demo: install
	BIN=$(BIN) scripts/demo.sh

bench: install
	$(PY) bench/run.py $(BENCH_ARGS)

# swapwatch plan on real MindSpore: plan for budgets between full and no recompute, run each plan,
# compare predicted with measured pool peaks and step times (about 3 minutes on 2 cores).
bench-plan: install
	$(PY) bench/plan.py

clean:
	rm -rf $(VENV) $(ORACLE) $(CORE) $(DRYRUN) .pytest_cache .hypothesis demo-runs bench/out
