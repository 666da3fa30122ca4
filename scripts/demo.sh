#!/usr/bin/env bash
# `make demo`: the whole swapwatch loop on the built-in tiny Llama, on 2 CPU cores in about a minute.
#
#   1. swapwatch explain   what the demo YAML will do, layer by layer, before launch
#   2. swapwatch run       a 2-worker msrun job of the baseline (no recompute), then of the demo YAML
#                          with compiled-graph dumps (--ir); each run is verified when it ends
#   3. swapwatch plot      both runs side by side: what the strategy bought in memory
#
# The model is wider than the example's default (hidden 256, seq 256) so that recompute moves
# MindSpore's CPU pool peak by tens of MB rather than below its 1 MB print granularity.
# Environment: BIN (the venv's bin), DEMO_CONFIG, DEMO_BASELINE, DEMO_STEPS, DEMO_MODEL, DEMO_RUNS.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/.venv/bin}
export PATH="$BIN:$PATH"
DEMO_CONFIG=${DEMO_CONFIG:-fixtures/configs/demo_recompute.yaml}
DEMO_BASELINE=${DEMO_BASELINE:-fixtures/configs/demo_baseline.yaml}
DEMO_STEPS=${DEMO_STEPS:-5}
DEMO_MODEL=${DEMO_MODEL:---hidden 256 --seq 256 --batch 2 --ffn 688 --heads 4}
run=${DEMO_RUNS:-demo-runs}/$(date +%Y%m%d-%H%M%S)
mkdir -p "$run"

free_port() { "$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

job() {   # job NAME CONFIG [swapwatch run options...]
  local name=$1 config=$2; shift 2
  echo "== swapwatch run --config $config $* -- msrun (2 workers) ... -> $run/$name"
  "$BIN/swapwatch" run --config "$config" --run-dir "$run/$name" "$@" -- \
    msrun --worker_num=2 --local_worker_num=2 --master_port="$(free_port)" --log_dir="$run/$name/msrun_log" \
    --join=True swapwatch/examples/train.py --config "$config" --steps "$DEMO_STEPS" $DEMO_MODEL
}

echo "== swapwatch explain $DEMO_CONFIG"
"$BIN/swapwatch" explain "$DEMO_CONFIG"
echo

job baseline "$DEMO_BASELINE" >"$run/baseline.out" 2>&1
base_rc=$?
echo "== baseline done (exit code $base_rc; its console is in $run/baseline.out)"
echo

job recompute "$DEMO_CONFIG" --ir
rc=$?
echo

echo "== swapwatch plot memory $run/baseline $run/recompute -o $run/memory.png"
if ! "$BIN/swapwatch" plot memory "$run/baseline" "$run/recompute" -o "$run/memory.png"; then
  [ "$rc" -eq 0 ] && rc=2
fi
echo
echo "== run directories: $run/baseline, $run/recompute (run.json, console.log, msrun_log/, ir/, verify.txt)"
echo "== memory plot: $run/memory.png"
echo "== reports (one page each, open in a browser): $run/baseline/report.html, $run/recompute/report.html"
if [ "$base_rc" -ne 0 ]; then echo "== baseline run failed with exit code $base_rc"; rc=$base_rc; fi
echo "== verdict: exit code $rc ($([ "$rc" -eq 0 ] && echo 'the run did what the YAML asks' || echo 'see above'))"
exit "$rc"
