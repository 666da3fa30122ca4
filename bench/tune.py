"""``make bench-tune``: does ``swapwatch tune`` find a faster strategy within the budget, on real
MindSpore through msrun? (a benchmark, not a test)

On the tiny Llama (``fixtures/configs/plan_tiny.yaml``, CPU, GRAPH_MODE, msrun):

1. a first ``tune`` at a budget no strategy exceeds measures the two probes, full and no recompute
   (their pool peaks bound the budgets);
2. for budgets at a quarter, half and three quarters between those peaks, ``tune`` runs its loop
   (probes reused from step 1's measurements are NOT shared: each budget is its own tune
   directory, as a user would run it) and reports runs used, the final measured peak (must be
   within the budget and above full recompute's) and verify;
3. the speed-up of the final strategy over full recompute is measured apart from the loop, so it
   means something on two shared cores: the two YAMLs are run alternately (``--rounds`` pairs, at
   least 20 steps each, through the same runner), the steps after warm-up pooled per strategy;
   reported: the median speed-up of the pairs and their spread (min..max), and "inside the noise"
   when that range includes 0.

Output: a Markdown table on stdout (docs/tune.md shows one) and ``bench/out/tune-<time>/``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from swapwatch.memory.emit import _load, splice  # noqa: E402
from swapwatch.tune.loop import WARMUP_STEPS, measure_run, step_limit_edit, tune  # noqa: E402

BIN = os.path.dirname(sys.executable)
MiB = 1 << 20
TRAIN = os.path.join(ROOT, "swapwatch", "examples", "train.py")


def msrun(workers: int, port: int):
    return [os.path.join(BIN, "msrun"), f"--worker_num={workers}", f"--local_worker_num={workers}",
            f"--master_port={port}", "--log_dir=msrun_log", "--join=True", TRAIN, "--config", "{config}"]


class Quiet:
    def write(self, data):
        pass

    def flush(self):
        pass


def timed_run(yaml_text: str, config: str, steps: int, out: Path, name: str, cmd):
    """Run ``yaml_text`` for ``steps`` steps through the runner; step times after warm-up."""
    from swapwatch.runtime.runner import run
    from swapwatch.tune.loop import command_for

    text = splice(yaml_text, config, [step_limit_edit(_load(yaml_text, config), steps)])
    if (out / name).exists():                 # an earlier bench in this directory: keep its runs apart
        k = 1
        while (out / f"{name}.old-{k}").exists():
            k += 1
        (out / name).rename(out / f"{name}.old-{k}")
    y = out / f"{name}.yaml"
    y.write_text(text)
    res = run(command_for(cmd, "{config}", str(y)), config=str(y), run_dir=str(out / name), out=Quiet())
    if res.exit_code != 0:
        raise SystemExit(f"timing run {name} failed: exit {res.exit_code}, see {out / name}")
    _, ms = measure_run(out / name, 1, "CPU")
    return ms[WARMUP_STEPS:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=1, help="msrun workers (1: the least noise on two cores)")
    ap.add_argument("--steps", type=int, default=6, help="steps per tune attempt")
    ap.add_argument("--timing-steps", type=int, default=22, help="steps per timing run (2 are warm-up)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating full / final timing pairs per budget")
    ap.add_argument("--max-runs", type=int, default=6)
    ap.add_argument("--port", type=int, default=None, help="msrun --master_port (resuming: the earlier one)")
    ap.add_argument("--out", default=None, help="output directory (an earlier one: its tune directories resume)")
    a = ap.parse_args()
    config = os.path.join(ROOT, "fixtures", "configs", "plan_tiny.yaml")
    out = Path(a.out) if a.out else Path(ROOT, "bench", "out", time.strftime("tune-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)
    Path("timing").mkdir(exist_ok=True)
    port = a.port or 30000 + os.getpid() % 20000
    log = []

    def say(line):
        log.append(line)
        print(line, file=sys.stderr, flush=True)

    t0 = time.time()
    bounds = tune(config, 1 << 40, msrun(a.workers, port), steps=a.steps, max_runs=2, directory="bounds",
                  say=say, runner_out=Quiet())
    full_peak, none_peak = bounds.attempts[0].peak, bounds.attempts[1].peak
    say(f"bench: full recompute {full_peak / MiB:.1f} MiB, no recompute {none_peak / MiB:.1f} MiB")
    rows = []
    for frac in (0.25, 0.5, 0.75):
        budget = int(full_peak + frac * (none_peak - full_peak))
        t1 = time.time()
        res = tune(config, budget, msrun(a.workers, port), steps=a.steps, max_runs=a.max_runs,
                   directory=f"budget-{int(frac * 100)}", say=say, runner_out=Quiet())
        tune_s = time.time() - t1
        fin = res.final
        row = {"fraction": frac, "budget_mib": round(budget / MiB, 1), "runs": len(res.attempts),
               "tune_seconds": round(tune_s), "final": fin.label if fin else None,
               "strategy": fin.strategy if fin else None,
               "final_peak_mib": round(fin.peak / MiB, 1) if fin and fin.peak else None,
               "verify": fin.verify if fin else None,
               "within_budget": bool(fin and fin.peak <= budget),
               "above_full": bool(fin and fin.peak > full_peak), "stop": res.stop_reason}
        if fin is not None and fin.label != "full recompute":
            full_text = Path(res.attempts[0].strategy_yaml).read_text()
            fin_text = Path(fin.strategy_yaml).read_text()
            pairs, all_full, all_fin = [], [], []
            for k in range(a.rounds):
                order = [("full", full_text), ("final", fin_text)] if k % 2 == 0 else \
                    [("final", fin_text), ("full", full_text)]
                got = {}
                for name, text in order:
                    got[name] = timed_run(text, config, a.timing_steps, Path("timing"),
                                          f"b{int(frac * 100)}-{k}-{name}", msrun(a.workers, port))
                all_full += got["full"]
                all_fin += got["final"]
                pairs.append(statistics.median(got["full"]) / statistics.median(got["final"]) - 1)
            row.update(speedup_median=round(statistics.median(pairs), 4), speedup_min=round(min(pairs), 4),
                       speedup_max=round(max(pairs), 4), full_ms=round(statistics.median(all_full), 1),
                       final_ms=round(statistics.median(all_fin), 1), steps_per_strategy=len(all_full),
                       inside_noise=min(pairs) <= 0 <= max(pairs))
        rows.append(row)
        say(f"bench: {json.dumps(row)}")
    Path("bench.json").write_text(json.dumps({"full_peak_mib": full_peak / MiB, "none_peak_mib": none_peak / MiB,
                                              "rows": rows, "seconds": round(time.time() - t0)}, indent=1))
    print(f"full recompute {full_peak / MiB:.1f} MiB, no recompute {none_peak / MiB:.1f} MiB (CPU pool peak, msrun "
          f"{a.workers} worker(s)); speed-up over full recompute from {a.rounds} alternating pairs of "
          f"{a.timing_steps}-step runs ({a.timing_steps - WARMUP_STEPS} timed steps each)\n")
    print("| budget | runs | final strategy | measured peak | verify | speed-up (median of pairs, min..max) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if r.get("speedup_median") is None:
            sp = "- (final is full recompute)" if r["final"] else "-"
        else:
            sp = (f"{r['speedup_median']:+.1%} ({r['speedup_min']:+.1%}..{r['speedup_max']:+.1%})"
                  + (", inside the noise" if r["inside_noise"] else ""))
        print(f"| {int(r['fraction'] * 100)} %: {r['budget_mib']} MiB | {r['runs']} | {'; '.join(r['strategy'] or [])} "
              f"| {r['final_peak_mib']} MiB | {r['verify']} | {sp} |")
    print(f"\nbench/out: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
