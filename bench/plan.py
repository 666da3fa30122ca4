"""``make bench-plan``: does ``swapwatch estimate`` / ``plan`` hold on real MindSpore? (a benchmark, not a test)

On the tiny Llama (``fixtures/configs/plan_tiny.yaml`` at 6 layers, CPU, GRAPH_MODE, one process) it

1. runs every case of ``bench/record_cpu_memory.py`` for real through ``swapwatch run`` (five
   strategies: none, full, select of the attention core, of the MLP cell, of both; four shapes: the
   YAML's, twice the sequence, twice the micro-batch, half the sequence) and reads MindSpore's CPU
   pool peak (``peak used mem``; docs/compatibility.md "On a CPU-only machine"); ``--recorded`` takes
   the peaks recorded in fixtures/cpu_memory instead;
2. calibrates the memory model on three of them (``CPU_CALIBRATION``) and prints, for every case,
   calibrated on? / predicted / measured / error; the same for the DryRun L1 records
   (fixtures/dryrun/cases), family by family, each calibrated on its none + full cut
   (``DRYRUN_CALIBRATION``); exits 1, naming them, when a held-out error is beyond the bound (10 %
   on CPU, 5 % on DryRun; docs/estimate.md);
3. for budgets spread between the full-recompute and the no-recompute peak, plans, runs the planned
   YAML through ``swapwatch run`` (which verifies it: the run must PASS), and prints predicted vs
   measured peak and step time;
4. times ``swapwatch plan`` (the whole command) on the 64-layer YAML.

Run dirs land in ``bench/out/plan-<time>/`` (gitignored).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from swapwatch.memory.calibrate import calibrate, dryrun_case, measure  # noqa: E402
from swapwatch.memory.model import estimate  # noqa: E402

BIN = os.path.dirname(sys.executable)
MiB = 1 << 20
sys.path.insert(0, HERE)
from record_cpu_memory import SHAPES, STRATEGIES, case_yaml  # noqa: E402

#: the CPU runs calibration is fitted on (two runs, two scales: swapwatch.memory.calibrate.fit_pool):
#: no recompute and full recompute at the YAML's shape; every other case of fixtures/cpu_memory
#: (three select sets; twice and half the sequence, twice the micro-batch) is held out
CPU_CALIBRATION = ("none_s256_b2", "full_s256_b2")
CPU_BOUND = 0.10
#: the DryRun L1 records, family by family (the records named ``<family>_*``): calibration is fitted on
#: the family's none + full cut, every other record of the family is held out (other strategies, shapes,
#: parallel layouts, keys). A held-out record whose YAML has a key the model leaves out beyond the
#: calibration records' (its figure is a bound: swapwatch.memory.keys) is printed, not bounded.
DRYRUN_CALIBRATION = {
    "qwen3_32b": ("qwen3_32b_l8_none", "qwen3_32b_l8_full"),
    "qwen3_moe": ("qwen3_moe_l8_none", "qwen3_moe_l8_full"),
    "deepseek_v3": ("deepseek_v3_l4_none", "deepseek_v3_l4_full"),
    "llama2_70b": ("llama2_70b_l8_pp2_none", "llama2_70b_l8_pp2_full"),
    "qwen2_5_7b": ("qwen2_5_7b_l8_pp2_none", "qwen2_5_7b_l8_pp2_full"),
    "glm4_9b": ("glm4_9b_l8_pp2_none", "glm4_9b_l8_pp2_full"),
}
DRYRUN_BOUND = 0.05
CASES = Path(ROOT, "fixtures", "dryrun", "cases")


def held_out_table(title: str, cases: dict, calibrated_on: tuple, bound: float, unbounded: tuple = ()) -> list:
    """Calibrate on ``calibrated_on`` (names of ``cases``: name -> (--calibrate source, YAML, stage ->
    measured bytes)), print case / calibrated on? / predicted / measured / error for every case, and
    return the held-out cases whose |error| exceeds ``bound`` (``unbounded`` ones are printed only)."""
    if not all(n in cases for n in calibrated_on):
        print(f"\n{title}: not recorded ({', '.join(n for n in calibrated_on if n not in cases)})")
        return []
    cal, _ = calibrate([cases[n][0] for n in calibrated_on])
    t = "" if cal.transient_scale is None else f", transient scale {cal.transient_scale:.3f}"
    print(f"\n{title}: calibrated on {' + '.join(calibrated_on)} ({len(calibrated_on)} runs): residual "
          f"{cal.residual / MiB:.1f} MiB, activation scale {cal.scale:.3f}{t}\n")
    print("| case | stage | calibrated on? | predicted | measured | error |")
    print("|---|---|---|---|---|---|")
    misses, errs = [], []
    for name, (_, yaml_path, used) in cases.items():
        est = estimate(yaml_path, calibration=cal)
        for stage, m in sorted(used.items()):
            pred = est.stages[stage].peak(cal)
            err = (pred - m) / m
            tag = "yes" if name in calibrated_on else ("no (an unmodelled key: a bound, not bounded here)"
                                                         if name in unbounded else "no")
            flag = ""
            if tag == "no":
                errs.append(abs(err))
                if abs(err) > bound:
                    misses.append((name, stage, err))
                    flag = f" **MISSES {bound:.0%}**"
            print(f"| {name} | {stage} | {tag} | {pred / MiB:.1f} MiB | {m / MiB:.1f} MiB | {err:+.1%}{flag} |")
    if errs:
        print(f"\nheld out: {len(errs)} stage peaks, worst |error| {max(errs):.1%}, median "
              f"{statistics.median(errs):.1%} (bound {bound:.0%})")
    return misses


def recorded_cpu_cases() -> dict:
    """fixtures/cpu_memory (bench/record_cpu_memory.py): name -> (record, YAML, {0: pool peak})."""
    out = {}
    for js in sorted(Path(ROOT, "fixtures", "cpu_memory").glob("*.json")):
        m = dryrun_case(str(js))
        out[js.stem] = (str(js), m.config, m.used)
    return out


def dryrun_cases(family: str) -> dict:
    """The family's DryRun L1 records: name -> (record, YAML, stage -> used peak)."""
    out = {}
    for js in sorted(CASES.glob(f"{family}_*.json")):
        m = dryrun_case(str(js))
        out[js.stem] = (str(js), m.config, m.used)
    return out


def unmodelled_beyond(cases: dict, calibrated_on: tuple) -> tuple:
    """The records of ``cases`` whose YAML has an unmodelled key (memory.keys) the calibration records
    do not have: their figure is a bound, which calibration cannot make a prediction."""
    def keys(name: str) -> set:
        return set(estimate(cases[name][1]).spec.unmodelled)

    base = set().union(*(keys(n) for n in calibrated_on if n in cases))
    return tuple(n for n in cases if n not in calibrated_on and keys(n) - base)


def dryrun_tables() -> list:
    """Part 2 on the DryRun L1 records, one calibration per family; the held-out misses."""
    misses = []
    for family, on in DRYRUN_CALIBRATION.items():
        cases = dryrun_cases(family)
        misses += held_out_table(f"DryRun L1 records of {family} (fixtures/dryrun/cases; no DryRun is run here)",
                                 cases, on, DRYRUN_BOUND, unmodelled_beyond(cases, on))
    return misses


def sh(cmd, **kw):
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, **kw)


def run(config: str, run_dir: str, steps: int) -> dict:
    """One real training run through ``swapwatch run``; its pool peak and median step time."""
    r = sh([os.path.join(BIN, "swapwatch"), "run", "--config", config, "--run-dir", run_dir, "--",
            sys.executable, "-m", "swapwatch.examples.train", "--config", config, "--steps", str(steps)])
    import swapwatch

    log = swapwatch.read_logs([run_dir], show_progress=False)
    ms = [s for s in log.to_frame("steps").sort_values("step")["ms"].tolist()][1:]   # step 1 compiles
    return {"exit": r.returncode, "peak": measure(run_dir, 1).used[0],
            "step_ms": statistics.median(ms) if ms else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recorded", action="store_true",
                    help="take the CPU peaks from fixtures/cpu_memory instead of running every case (seconds)")
    ap.add_argument("--no-plans", action="store_true", help="skip the budget plans (part 3) and the timing (4)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budgets", type=int, default=5, help="budgets between full and none")
    a = ap.parse_args()
    out = os.path.join(HERE, "out", time.strftime("plan-%Y%m%d-%H%M%S"))
    os.makedirs(out)
    if a.recorded:
        cases = recorded_cpu_cases()
        print("tiny Llama, 6 layers, hidden 256, fp32, CPU: pool peaks recorded in fixtures/cpu_memory")
    else:
        print(f"tiny Llama, 6 layers, hidden 256, fp32, CPU, {a.steps} steps per case; runs in {out}")
        cases = {}
        for shape, (seq, batch) in SHAPES.items():
            for strategy in STRATEGIES:
                name = f"{strategy}_{shape}"
                path = os.path.join(out, name + ".yaml")
                Path(path).write_text(case_yaml(strategy, seq, batch))
                rd = os.path.join(out, "run-" + name)
                m = run(path, rd, a.steps)
                if m["exit"] != 0:
                    print(f"{name}: the run failed (exit {m['exit']}): see {rd}", file=sys.stderr)
                    return 1
                cases[name] = (rd, path, {0: m["peak"]})
    misses = held_out_table("The tiny Llama on CPU (MindSpore's pool peak)", cases, CPU_CALIBRATION, CPU_BOUND)
    misses += dryrun_tables()
    if not a.no_plans:
        plans(out, cases, a.steps, a.budgets)
    if misses:
        print("\nbench-plan FAILED: held-out prediction errors beyond the bound: "
              + ", ".join(f"{n} stage {st} {e:+.1%}" for n, st, e in misses), file=sys.stderr)
        return 1
    return 0


def plans(out: str, cases: dict, steps: int, budgets: int) -> None:
    """Part 3 and 4: plans for budgets between full and no recompute, each run for real, calibrated
    on the CPU calibration runs; then the timing of plan on the 64-layer YAML."""
    sources = []
    for n in CPU_CALIBRATION:
        sources += ["--calibrate", cases[n][0]]
    lo, hi = cases["full_s256_b2"][2][0], cases["none_s256_b2"][2][0]
    print(f"\nplans for budgets between full ({lo / MiB:.0f} MiB) and none ({hi / MiB:.0f} MiB):\n")
    full_flops = sum(r["recompute_flops"] for r in estimate(cases["full_s256_b2"][1]).layers)
    print("| budget | plan (per layer) | predicted | measured | within budget | above full | recompute FLOPs vs full "
          "| step time | verify |")
    print("|---|---|---|---|---|---|---|---|---|")
    src = os.path.join(out, "plan_source.yaml")
    Path(src).write_text(case_yaml("none", 256, 2))
    for k in range(1, budgets + 1):
        budget = int(lo + (hi - lo) * k / (budgets + 1))
        planned = os.path.join(out, f"plan-{budget // MiB}MiB.yaml")
        r = sh([os.path.join(BIN, "swapwatch"), "plan", src, "--budget", str(budget), "--format", "json", "-o",
                planned, *sources])
        if r.returncode != 0:
            print(f"| {budget / MiB:.1f} MiB | plan exit {r.returncode}: {r.stderr.strip()} | | | | | | | |")
            continue
        js = json.loads(r.stdout)
        choices = _compact([row["choice"] for row in js["layers"]])
        m = run(planned, os.path.join(out, f"run-plan-{budget // MiB}MiB"), steps)
        pred = js["stages"][0]["peak_bytes"]
        print(f"| {budget / MiB:.1f} MiB | {choices} | {pred / MiB:.1f} MiB | {m['peak'] / MiB:.0f} MiB | "
              f"{'yes' if m['peak'] <= budget else 'NO'} | {'yes' if m['peak'] > lo else 'no'} | "
              f"{js['recompute_flops'] / full_flops:.0%} | {m['step_ms']:.0f} ms | "
              f"{'PASS' if m['exit'] == 0 else 'exit %d' % m['exit']} |")
    below = sh([os.path.join(BIN, "swapwatch"), "plan", src, "--budget", str(lo - MiB), *sources])
    print(f"\nbudget {(lo - MiB) / MiB:.0f} MiB (below full recompute): exit {below.returncode}; "
          f"{below.stdout.strip().splitlines()[-1] if below.stdout.strip() else below.stderr.strip()}")
    t = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = sh([os.path.join(BIN, "swapwatch"), "plan", "fixtures/configs/plan_qwen64.yaml", "--budget", "15GiB"])
        t.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
    print(f"`swapwatch plan fixtures/configs/plan_qwen64.yaml --budget 15GiB` (64 layers, 4 stages), whole "
          f"command: best {min(t):.2f} s of 3")


def _compact(choices) -> str:
    """``full x2, attn+mlp x3, none`` from the per-layer choices (layer order)."""
    def short(c: str) -> str:
        if not c.startswith("select:"):
            return c
        parts = c[len("select:"):].split(",")
        return "+".join({"attention\\.flash_attention": "attn", "feed_forward": "mlp"}.get(p, p) for p in parts)

    out, prev, n = [], None, 0
    for c in map(short, choices):
        if c == prev:
            n += 1
            continue
        if prev is not None:
            out.append(prev if n == 1 else f"{prev} x{n}")
        prev, n = c, 1
    out.append(prev if n == 1 else f"{prev} x{n}")
    return ", ".join(out)


if __name__ == "__main__":
    sys.exit(main())
