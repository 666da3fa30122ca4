#!/bin/bash
# Variants of the 2026-11-28 reliability review's reproductions (issue 36): each failure the review
# reproduced, attacked from another side. Reads SW (the swapwatch to test), REPO (a checkout: its
# fixtures/) and W (scratch) from the environment, like the review's scripts. Prints one line a
# check, "ok" or "FAIL", and exits 1 when any check fails.
#
#   SW=$PWD/.venv/bin/swapwatch REPO=$PWD tools/reliability/variants.sh
set -u
SW=${SW:-swapwatch}
REPO=${REPO:-.}
W=${W:-$(mktemp -d)}
PY=${PY:-python3}
mkdir -p "$W"
cd "$REPO" || exit 2
fails=0

# check NAME RC WORDS -- CMD...: CMD exits RC (under a 3 GB address-space cap and a 300 s timeout),
# writes no traceback, and its stderr (or stdout for rc 0/1) holds WORDS
check() {
  local name=$1 want=$2 words=$3; shift 4
  ( ulimit -v 3000000; timeout 300 "$@" ) >"$W/out" 2>"$W/err"
  local rc=$?
  local text; text=$(cat "$W/err" "$W/out")
  if [ "$rc" = "$want" ] && ! grep -q -e Traceback -e "internal error" "$W/err" && grep -qF -- "$words" <<<"$text"; then
    echo "ok    $name"
  else
    echo "FAIL  $name: rc=$rc (want $want), $(head -c 300 "$W/err")"
    fails=$((fails + 1))
  fi
}

# ---- 01: ranges stay ranges -------------------------------------------------------------------------
check "01 plot memory --ranks 0-10**12,5" 0 "1 rank" -- \
  "$SW" plot memory fixtures/plot_runs/full --ranks 0-1000000000000,5 -o "$W/m.png" --force
check "01 events --rank one 20-digit rank" 0 "no event matches" -- \
  "$SW" events fixtures/plot_runs/full --rank 99999999999999999999
check "01 events --rank 0-10**400" 0 '"rank":0' -- \
  "$SW" events fixtures/plot_runs/full --rank "0-1$(printf '0%.0s' $(seq 400))" --kind swapwatch
check "01 events --rank backwards" 2 "is not a rank or an increasing range" -- \
  "$SW" events fixtures/plot_runs/full --rank 9-3

# ---- 02: the pattern total, through every door ----------------------------------------------------------
$PY - "$W" <<'PY'
import re, sys
w = sys.argv[1]
big = lambda n, fmt: "".join(fmt.format(i=i) for i in range(n))
open(f"{w}/opswap.yaml", "w").write(re.sub(r"swap_config:\n(  .*\n)+", "", open("fixtures/configs/plan_qwen64.yaml").read())
    + "swap_config:\n  swap: True\n  op_swap:\n" + big(300, "    - op_name: 'a{{99990}}b{i}'\n      backward_prefetch: 1\n      layers: [0]\n"))
open(f"{w}/comm.yaml", "w").write("model:\n  model_config:\n    num_layers: 4\n"
                                  "recompute_config:\n  select_comm_recompute:\n" + big(300, "    'a{{99990}}c{i}': True\n"))
open(f"{w}/exclude.yaml", "w").write("recompute_config:\n  select_recompute:\n    'x': True\n  select_recompute_exclude:\n"
                                     + big(300, "    'a{{99990}}e{i}': True\n"))
PY
check "02 op_swap names past the total" 2 "positions in all" -- "$SW" explain "$W/opswap.yaml"
check "02 comm patterns past the total" 2 "positions in all" -- "$SW" explain "$W/comm.yaml"
check "02 exclude patterns past the total" 2 "positions in all" -- "$SW" explain "$W/exclude.yaml" --num-layers 4
check "02 the same YAML as verify --config" 2 "positions in all" -- \
  "$SW" verify fixtures/logs/swap_case2.log --config "$W/comm.yaml"

# ---- 03 / 06 / 08: JSON from disk ------------------------------------------------------------------------
rd() { rm -rf "$W/$1"; mkdir -p "$W/$1"; cp fixtures/logs/swap_case2.log "$W/$1/console.log"; }
rd rj_rand; ln -s /dev/urandom "$W/rj_rand/run.json"
check "03 run.json -> /dev/urandom (report)" 2 "a device has no end" -- "$SW" report "$W/rj_rand" -o "$W/r.html" --force
rd rj_big; $PY -c "import sys; open(sys.argv[1], 'w').write('{\"notes\": [\"' + 'x' * (20 << 20) + '\"]}')" "$W/rj_big/run.json"
check "03 a 20 MB run.json (events)" 2 "larger than 16 MiB" -- "$SW" events "$W/rj_big"
rd rj_obj; $PY -c "import sys; open(sys.argv[1], 'w').write('{\"a\":' * 100000 + '1' + '}' * 100000)" "$W/rj_obj/run.json"
check "08 100,000-deep objects (plot memory)" 2 "nested deeper than 64" -- "$SW" plot memory "$W/rj_obj" -o "$W/m2.png" --force
rd rj_type; echo '{"ranks": "0-7", "world_size": 8}' >"$W/rj_type/run.json"
check "06 ranks as a string (verify)" 2 "ranks: run.json: expected a list of ints" -- "$SW" verify "$W/rj_type"
rd rj_nan; echo '{"exit_code": NaN}' >"$W/rj_nan/run.json"
check "06 exit_code NaN (report)" 2 "exit_code: run.json: expected an int" -- "$SW" report "$W/rj_nan" -o "$W/r2.html" --force
check "08 --calibrate a run dir with a deep run.json" 2 "nested deeper than 64" -- \
  "$SW" estimate fixtures/configs/plan_tiny.yaml --calibrate "$W/rj_obj"
ln -sf /dev/zero "$W/zero.json"
check "08 --calibrate a .json that is a device" 2 "" -- "$SW" estimate fixtures/configs/plan_tiny.yaml --calibrate "$W/zero.json"

# ---- 05 / 06 / 07: run is transparent ----------------------------------------------------------------------
rm -rf "$W/rs"; head -c 3000000 /dev/urandom >"$W/blob"
"$SW" run --no-verify --no-report --run-dir "$W/rs" -- sh -c 'sha256sum' <"$W/blob" >"$W/o" 2>"$W/e"
if grep -q "$(sha256sum <"$W/blob" | cut -c1-64)" "$W/o"; then echo "ok    05 a binary file as stdin reaches the job byte for byte"
else echo "FAIL  05 binary stdin: $(head -c 200 "$W/o")"; fails=$((fails + 1)); fi
rm -rf "$W/rc"; "$SW" run --no-verify --no-report --run-dir "$W/rc" -- sh -c 'cat; echo "eof:$?"' <&- >"$W/o" 2>&1
if grep -q "eof:" "$W/o" && grep -q '"stdin": "closed"' "$W/rc/run.json"; then echo "ok    05 a closed stdin is closed for the job"
else echo "FAIL  05 closed stdin: $(head -c 200 "$W/o")"; fails=$((fails + 1)); fi
rm -rf "$W/rm"; "$SW" run --no-verify --no-report --run-dir "$W/rm" -- sh -c 'i=0; while [ $i -lt 2000 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done' >"$W/o" 2>"$W/e"
if [ "$(grep -c '^o' "$W/o")" = 2000 ] && [ "$(grep -c '^e' "$W/e")" = 2000 ] && ! grep -q '^e' "$W/o" && \
   cmp -s "$W/e" "$W/rm/console.stderr.log" && [ "$(grep -c '^o' "$W/rm/console.log")" = 2000 ]; then
  echo "ok    06 2,000 interleaved lines a stream: each on its own stream and in its own copy"
else echo "FAIL  06 interleaved streams"; fails=$((fails + 1)); fi
# a signal helper: start swapwatch in a new session, send SIG after T seconds, report rc and leftovers
sig() {  # sig NAME SIGNAL JOB-CODE WANT-RC
  local name=$1 signame=$2 code=$3 want=$4
  rm -rf "$W/rsig"
  $PY - "$SW" "$W/rsig" "$signame" "$code" "$want" <<'PY' && echo "ok    $name" || { echo "FAIL  $name"; exit 1; }
import json, os, signal, subprocess, sys, time
sw, rdir, name, code, want = sys.argv[1:]
def pre():
    for s in range(1, signal.SIGRTMAX + 1):
        try:
            if s not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
p = subprocess.Popen([sw, "run", "--no-verify", "--no-report", "--run-dir", rdir, "--", "python3", "-c", code],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=pre)
time.sleep(3)
sig = getattr(signal, name) if hasattr(signal, name) else signal.SIGRTMIN + int(name.split("+")[1])
p.send_signal(sig)
rc = p.wait(timeout=120)
info = json.load(open(os.path.join(rdir, "run.json")))
ok = rc == int(want) and info["end"] is not None
print(f"      rc={rc} interrupted={info['interrupted']} passed={info['signals_passed']}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
  [ $? = 0 ] || fails=$((fails + 1))
}
HANDLE='import signal, time, sys; got=[]; [signal.signal(s, lambda n, f: got.append(n)) for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGRTMIN + 5)]
end = time.time() + 30
while not got and time.time() < end: time.sleep(0.05)
sys.exit(0 if got else 9)'
sig "07 SIGUSR1 reaches a job that handles it (exit 0)" SIGUSR1 "$HANDLE" 0
sig "07 SIGUSR2 reaches a job that handles it (exit 0)" SIGUSR2 "$HANDLE" 0
sig "07 SIGRTMIN+5 reaches a job that handles it (exit 0)" "RTMIN+5" "$HANDLE" 0
sig "07 SIGUSR1 kills a job that does not handle it (exit 138)" SIGUSR1 "import time; time.sleep(60)" 138
sig "07 SIGALRM (timeout -s ALRM) stops the run (exit 142)" SIGALRM "import time; time.sleep(60)" 142
sig "07 SIGXCPU stops the run (exit 152)" SIGXCPU "import time; time.sleep(60)" 152

# ---- 09 / 13: config paths -----------------------------------------------------------------------------------
mkdir -p "$W/cfgdir.yaml"
check "09 report --config DIR" 2 "Is a directory" -- "$SW" report fixtures/plot_runs/full --config "$W/cfgdir.yaml" -o "$W/r3.html"
check "09 plot estimate DIR" 2 "Is a directory" -- "$SW" plot estimate "$W/cfgdir.yaml" -o "$W/e.png"
check "09 plot strategy LOG --config DIR" 2 "Is a directory" -- "$SW" plot strategy fixtures/logs/swap_case2.log --config "$W/cfgdir.yaml" -o "$W/s.png"
printf 'version: "3"\nservices:\n  web:\n    image: nginx\n' >"$W/compose.yaml"
check "13 a docker-compose file" 2 "not a MindFormers training YAML" -- "$SW" estimate "$W/compose.yaml"

# ---- 10 / 11: totals in seconds (CPU), not minutes ----------------------------------------------------------
$PY - "$W" <<'PY'
import re, sys
w = sys.argv[1]
src = open("fixtures/configs/conflict.yaml").read().replace("swap: True", "swap: False").replace("  recompute: [0, 1]", "  recompute: False")
text = re.sub(r"  select_recompute:\n(    .*\n)+", "  select_recompute: False\n", src)
open(f"{w}/comm20k.yaml", "w").write(text.replace("recompute_config:\n", "recompute_config:\n  select_comm_recompute:\n"
                                                  + "".join(f"    'ffn_norm{i}': True\n" for i in range(20000)), 1))
PY
check "10 20,000 comm patterns" 0 "" -- "$SW" explain "$W/comm20k.yaml" --format json
sed -e 's/num_layers: 64/num_layers: 9999/' -e 's/pipeline_stage: 4/pipeline_stage: 3/' fixtures/configs/plan_qwen64.yaml >"$W/L9999.yaml"
check "11 plot strategy 9,999 layers at pp 3" 0 "wrote" -- "$SW" plot strategy "$W/L9999.yaml" -o "$W/L.png" --force

# ---- 12: one rank, one log -------------------------------------------------------------------------------------
rm -rf "$W/n1" "$W/n2"; mkdir -p "$W/n1" "$W/n2"
gzip -c fixtures/logs/swap_case2.log >"$W/n1/worker_0.log.gz"; cp fixtures/logs/swap_case2.log "$W/n2/worker_0.log"
check "12 the same rank as .gz in one dir and plain in another" 2 "rank 0 appears twice" -- "$SW" verify "$W/n1" "$W/n2"
rm -rf "$W/n3"; mkdir -p "$W/n3"; cp fixtures/logs/swap_case2.log "$W/n3/worker_1.log"
check "12 two directories with different ranks still verify" 0 "2 rank(s)" -- "$SW" verify "$W/n1" "$W/n3"

# ---- 13: flow style everywhere explain reads it ---------------------------------------------------------------
$PY - "$W" <<'PY'
import re, sys
w = sys.argv[1]
src = open("fixtures/configs/plan_tiny.yaml").read()
text = re.sub(r"recompute_config:\n(  .*\n)+", "recompute_config: {\n  recompute: False,\n  select_recompute: {}\n}\n", src)
open(f"{w}/flow3.yaml", "w").write(text)
PY
rm -f "$W/flow3.out.yaml"
check "13 a flow mapping over four lines is written back" 0 "wrote" -- \
  "$SW" plan "$W/flow3.yaml" --budget 60MiB -o "$W/flow3.out.yaml"

echo "$fails failed"
[ "$fails" = 0 ]
