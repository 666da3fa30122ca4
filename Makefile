# Every target bootstraps .venv on a fresh machine (Python 3.9+ with venv is all it needs).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
# msrun starts its workers as a bare `python` from PATH: the venv's bin must come first.
export PATH := $(BIN):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: install oracle core browser dryrun dryrun-pynative lint test test-fast docs wheel-test demo bench bench-plan bench-plan-search bench-tune bench-bounds clean

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[mindspore,test]'
	touch $(VENV)/.mindspore $@

# What `make demo` needs and nothing more: MindSpore (msrun included), no test or docs tools.
$(VENV)/.mindspore: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[mindspore]'
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

# PyNative DryRun (docs/estimate.md, "The PyNative path"): MindFormers' PyNative Trainer under
# MS_SIMULATION_LEVEL=1 needs numpy 1, so its own venv from its own lock (the oracle's with numpy 1.26);
# hyper_parallel (not on PyPI) is the stand-in in swapwatch/pynative/standin/. Uses the CANN stand-ins above.
PYNATIVE := .pynative-venv
$(PYNATIVE)/.ready: tests/oracle/pynative.lock
	test -x $(PYNATIVE)/bin/python || $(PYTHON) -m venv $(PYNATIVE)
	$(PYNATIVE)/bin/python -m pip install -q --no-deps -r tests/oracle/pynative.lock
	cd /tmp && LOG_MF_PATH=/tmp/swapwatch-pynative-check PYTHONPATH=$(CURDIR)/swapwatch/pynative/standin \
	  $(CURDIR)/$(PYNATIVE)/bin/python -c 'from mindformers.pynative.trainer import Trainer' >/dev/null
	touch $@

dryrun-pynative: $(DRYRUN)/.built $(PYNATIVE)/.ready

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

# The report's browser tests (tests/test_report_browser.py) drive Debian's Chromium through Playwright
# (the test extra); `playwright install`, which downloads a browser of its own, is never used.
CHROMIUM ?= /usr/bin/chromium
browser:
	test -x $(CHROMIUM) || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

# ruff over the tree; mypy over the whole package (issue 23: the domain model, the rules, every command).
TYPED := swapwatch
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy $(TYPED)

# SWAPWATCH_REQUIRE_ALL: MindSpore, msrun, the oracle, the core venv, the DryRun stand-ins and Chromium
# must be there (no silent skips).
test: install oracle core browser dryrun dryrun-pynative lint docs wheel-test
	SWAPWATCH_REQUIRE_ALL=1 SWAPWATCH_CORE_VENV=$(CURDIR)/$(CORE) $(PY) -m pytest -q tests

# ---- test tiers, docs, package (issue 25; docs/development.md) ----------------------------------
# The unit tier: every test without a tier marker (oracle, runtime, core, fuzz, scale, docs; hypothesis
# tests are fuzz), on both cores: about 90 s of CPU, so under a minute on an idle 2-core machine.
TIERS := oracle or runtime or core or fuzz or scale or docs
test-fast: install
	$(PY) -m pytest -q -n 2 -m "not ($(TIERS))" tests

# The documentation site (MkDocs) into site/, strict: a broken link, anchor or nav entry fails.
# docs/rules.md is generated from the rule registry: --check fails when it is stale.
docs: install
	$(PY) tools/gen_rules_doc.py --check
	$(BIN)/mkdocs build --strict --quiet --site-dir site

# The wheel, built once with `python -m build` and checked with twine, installed into a bare venv on
# every Python setup.cfg claims, where the core commands run on fixtures (noxfile.py). Venvs are reused.
wheel-test: install
	$(BIN)/nox --reuse-existing-virtualenvs
# -------------------------------------------------------------------------------------------------

# The whole loop on 2 CPU cores: the plan, 2-worker msrun jobs of the tiny Llama (baseline, then the
# demo YAML) through `swapwatch run` (env, logs, IR dumps, verification), the memory plot of both, a
# summary. It prints how long it took (docs/demo.md has the measured times, with and without the install).
# DEMO_CONFIG, DEMO_BASELINE, DEMO_STEPS, DEMO_MODEL override (scripts/demo.sh).
demo: $(VENV)/.mindspore
	BIN=$(BIN) scripts/demo.sh

bench: install
	$(PY) bench/run.py $(BENCH_ARGS)

# swapwatch estimate / plan on real MindSpore (issue 27 point 4): run the tiny Llama at 5 strategies x
# 4 shapes, calibrate on two, print every held-out prediction error and exit 1 beyond the bound (10 %
# CPU, 5 % DryRun records); then plan for budgets between full and no recompute and run each plan
# (about 20 minutes on 2 cores; BENCH_PLAN_ARGS=--recorded takes the peaks of fixtures/cpu_memory).
bench-plan: install
	nice -n 10 $(PY) bench/plan.py $(BENCH_PLAN_ARGS)

# issue 27: how long plan's search takes (64 x 4, 128 x 1, 128 x 16 layers x stages; goal < 1 s each)
bench-plan-search: install
	$(PY) bench/plan_search.py

# issue 36: large but legal inputs at two sizes ten times apart (patterns, strategy lines, layers, rank
# ranges): CPU time, wall time and peak RSS, to read near-linearity off (docs/reliability.md)
bench-bounds: install
	nice -n 10 $(PY) bench/bounds.py $(BENCH_BOUNDS_ARGS)

# issue 24: swapwatch tune on the tiny model through msrun (a benchmark, not a test; ~20 min)
bench-tune: install
	nice -n 10 $(PY) bench/tune.py

clean:
	rm -rf $(VENV) $(ORACLE) $(CORE) $(DRYRUN) $(PYNATIVE) .pytest_cache .hypothesis demo-runs bench/out site dist .nox
