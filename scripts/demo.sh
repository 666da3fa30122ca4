#!/usr/bin/env bash
# `make demo`: the whole swapwatch loop on the built-in tiny Llama, on 2 CPU cores.
#
#   1. swapwatch explain   what the demo YAML will do, layer by layer, before launch
#   2. swapwatch run       a 2-worker msrun job of the baseline (no recompute), then of the demo YAML
#                          with compiled-graph dumps (--ir); each run is verified when it ends
#   3. swapwatch plot      both runs side by side: what the strategy bought in memory
#   4. a summary           what was planned, what each run applied (verified), what recompute bought,
#                          where the files are, and how long it all took
#
# msrun's workers retry their connection to the scheduler while it starts ("Failed to connect to the
# meta server", "Topology build timed out, retry(N/1200)", "Connect] Connection N source: ..."):
# normal, from a dozen to over a hundred lines depending on the machine's load. They are kept out of
# the console and stay in each run's console.log and msrun_log/ (docs/demo.md).
#
# The model is wider than the example's default (hidden 256, seq 256) so that recompute moves
# MindSpore's CPU pool peak by tens of MiB rather than below its 1 MiB print granularity.
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
# msrun's scheduler-connection retries (MindSpore's cluster/topology and rpc/tcp, worker side, while the
# scheduler starts): compute_graph_node.cc's register/reconnect lines and tcp_comm.cc's Connect attempts
NOISE='Failed to connect to the meta server|Topology build timed out|Failed to register and try to reconnect|tcp_comm\.cc:[0-9]+\] Connect\] Connection [0-9]+ source'

free_port() { "$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

job() {   # job NAME CONFIG [swapwatch run options...]
  local name=$1 config=$2; shift 2
  echo "== swapwatch run --config $config $* -- msrun (2 workers) ... -> $run/$name"
  "$BIN/swapwatch" run --config "$config" --run-dir "$run/$name" "$@" -- \
    msrun --worker_num=2 --local_worker_num=2 --master_port="$(free_port)" --log_dir="$run/$name/msrun_log" \
    --join=True swapwatch/examples/train.py --config "$config" --steps "$DEMO_STEPS" $DEMO_MODEL
}

echo "== swapwatch explain $DEMO_CONFIG"
"$BIN/swapwatch" explain "$DEMO_CONFIG" | tee "$run/explain.txt"
echo

job baseline "$DEMO_BASELINE" >"$run/baseline.out" 2>&1
base_rc=$?
echo "== baseline done (exit code $base_rc; its console is in $run/baseline.out)"
echo

job recompute "$DEMO_CONFIG" --ir 2>&1 | grep --line-buffered -v -E "$NOISE"
rc=${PIPESTATUS[0]}
# the job's stdout and stderr are kept apart (console.log, console.stderr.log): count both
hidden=$(cat "$run/recompute/console.log" "$run/recompute/console.stderr.log" 2>/dev/null | grep -c -E "$NOISE")
echo "== recompute done (exit code $rc; ${hidden:-0} msrun connection-retry lines not shown, they are in $run/recompute/console*.log)"
echo

echo "== swapwatch plot memory $run/baseline $run/recompute -o $run/memory.png"
if ! "$BIN/swapwatch" plot memory "$run/baseline" "$run/recompute" -o "$run/memory.png"; then
  [ "$rc" -eq 0 ] && rc=2
fi
echo
if [ "$base_rc" -ne 0 ]; then rc=$base_rc; fi

# ---- the summary ----------------------------------------------------------------------------------
last() { [ -f "$1" ] && tail -n 1 "$1" || echo "(no $1: the run did not get that far)"; }
bought=$("$BIN/python" - "$run" <<'EOF' 2>/dev/null
import sys
from swapwatch.parsers import read_logs
from swapwatch.plot import memory_frame, peak_frame

run = sys.argv[1]
peaks = peak_frame(memory_frame([read_logs([f"{run}/{n}"]) for n in ("baseline", "recompute")]))
by = peaks.groupby("run", observed=True)["used"].max()
base, rec = (float(next(v for k, v in by.items() if str(k).startswith(n))) for n in ("baseline", "recompute"))
print(f"MindSpore's CPU pool peak {base / 2**20:.0f} MiB -> {rec / 2**20:.0f} MiB ({(rec - base) / base:+.0%})")
EOF
)
echo "== summary"
echo "   planned:     $DEMO_CONFIG:"
grep -E '^stage [0-9]+:' "$run/explain.txt" | sed 's/^/                  /'
echo "   applied:     baseline:  $(last "$run/baseline/verify.txt")"
echo "                recompute: $(last "$run/recompute/verify.txt")"
echo "   bought:      ${bought:-(no pool peaks in the logs)} (plot: $run/memory.png)"
echo "   files:       $run/{baseline,recompute}/ (run.json, console.log, console.stderr.log, msrun_log/, verify.txt, verify.json; ir/ of recompute)"
echo "   reports:     $run/baseline/report.html, $run/recompute/report.html (one page each, open in a browser)"
echo "   took:        $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "== verdict: exit code $rc ($([ "$rc" -eq 0 ] && echo 'the run did what the YAML asks' || echo 'see above'))"
exit "$rc"
