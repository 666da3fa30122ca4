# Every target bootstraps .venv on a fresh machine (Python 3.9+ with venv is all it needs).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
# msrun starts its workers as a bare `python` from PATH: the venv's bin must come first.
export PATH := $(BIN):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: install oracle test demo bench clean

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

# SWAPWATCH_REQUIRE_ALL: MindSpore, msrun and the oracle must be there (no silent skips).
test: install oracle
	SWAPWATCH_REQUIRE_ALL=1 $(PY) -m pytest -q tests

# The whole loop on 2 CPU cores in a few minutes: the plan, a 2-worker msrun job of the tiny Llama
# through `swapwatch run` (env, logs, IR dumps, verification), then the memory plot.
DEMO_CONFIG ?= fixtures/configs/demo_recompute.yaml
DEMO_STEPS ?= 5
demo: install
	@set -e; \
	run=demo-runs/$$(date +%Y%m%d-%H%M%S); \
	port=$$($(PY) -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'); \
	echo "== swapwatch explain $(DEMO_CONFIG)"; \
	$(BIN)/swapwatch explain $(DEMO_CONFIG) || true; \
	echo "== swapwatch run -> $$run"; \
	rc=0; $(BIN)/swapwatch run --config $(DEMO_CONFIG) --ir --run-dir $$run -- \
	  msrun --worker_num=2 --local_worker_num=2 --master_port=$$port --log_dir=$$run/msrun_log --join=True \
	  swapwatch/examples/train.py --config $(DEMO_CONFIG) --steps $(DEMO_STEPS) || rc=$$?; \
	if $(BIN)/swapwatch plot --help >/dev/null 2>&1; then \
	  $(BIN)/swapwatch plot memory $$run -o $$run/memory.png && echo "== memory plot: $$run/memory.png"; fi; \
	echo "== run directory: $$run (run.json, console.log, msrun_log/, ir/, verify.txt)"; \
	echo "== verdict: exit code $$rc"; \
	exit $$rc

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) $(ORACLE) .pytest_cache .hypothesis demo-runs bench/out
