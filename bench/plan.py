"""``make bench-plan``: does ``swapwatch plan`` hold on real MindSpore? (a benchmark, not a test)

On the tiny Llama (``fixtures/configs/plan_tiny.yaml``, CPU, GRAPH_MODE, one process) it

1. runs no recompute and full recompute for real through ``swapwatch run`` and reads MindSpore's
   CPU pool peak (``peak used mem``, what the parsers read; docs/compatibility.md "On a CPU-only machine");
2. calibrates the memory model on those two runs and checks its prediction on three other
   strategies (select of the attention core, of the MLP cell, of both) and on shapes it was not
   calibrated on (twice the sequence, twice the micro-batch), run for real; then prints the
   uncalibrated estimate of every recorded DryRun L1 case beside DryRun's peak;
3. for budgets spread between the full-recompute and the no-recompute peak, plans, runs the planned
   YAML through ``swapwatch run`` (which verifies it: the run must PASS), and prints predicted vs
   measured peak and step time, beside full recompute's;
4. times ``swapwatch plan`` (the whole command) on the 64-layer YAML.

Run dirs land in ``bench/out/plan-<time>/`` (gitignored). ``--layers`` sets the model's depth.
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

from swapwatch.memory.calibrate import calibrate, measure  # noqa: E402
from swapwatch.memory.model import estimate  # noqa: E402

BIN = os.path.dirname(sys.executable)
MiB = 1 << 20
STRATEGIES = {
    "none": "recompute: False",
    "full": "recompute: True",
    "select attn core": "recompute: False\n  select_recompute:\n    'attention\\.flash_attention': True",
    "select mlp": "recompute: False\n  select_recompute:\n    'feed_forward': True",
    "select attn core + mlp": ("recompute: False\n  select_recompute:\n    'attention\\.flash_attention': True\n"
                               "    'feed_forward': True"),
}


#: other shapes of the tiny Llama, each with a strategy of STRATEGIES: (strategy, YAML text, replaced by)
SHAPES = {
    "none, 2x sequence": ("none", "seq_length: 256", "seq_length: 512"),
    "select mlp, 2x sequence": ("select mlp", "seq_length: 256", "seq_length: 512"),
    "full, 2x micro-batch": ("full", "batch_size: 2", "batch_size: 4"),
}


def dryrun_table() -> None:
    """The recorded DryRun L1 corpus (fixtures/dryrun/cases, tests/test_oracle_dryrun.py): the
    uncalibrated estimate of each case beside DryRun's used peak (no DryRun is run here)."""
    cases = sorted(Path(ROOT, "fixtures", "dryrun", "cases").glob("*.json"))
    if not cases:
        return
    print("\nDryRun L1 corpus, uncalibrated (docs/estimate.md):\n")
    print("| case | stage | predicted | DryRun L1 used peak | error |")
    print("|---|---|---|---|---|")
    for js in cases:
        data = json.loads(js.read_text())
        try:
            est = estimate(str(js.with_name(data["yaml"])))
        except Exception as exc:  # noqa: BLE001 - a family without a table: say so, go on
            print(f"| {js.stem} | - | {type(exc).__name__}: {exc} | | |")
            continue
        for st in data["stages"]:
            pred, used = est.stages[st["stage"]].peak(), st["used_peak_mib"] * MiB
            print(f"| {js.stem} | {st['stage']} | {pred / MiB:.0f} MiB | {st['used_peak_mib']} MiB | "
                  f"{(pred - used) / used:+.1%} |")


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
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--budgets", type=int, default=5, help="budgets between full and none")
    a = ap.parse_args()
    out = os.path.join(HERE, "out", time.strftime("plan-%Y%m%d-%H%M%S"))
    os.makedirs(out)
    base = Path(ROOT, "fixtures/configs/plan_tiny.yaml").read_text().replace(
        "num_layers: 4", f"num_layers: {a.layers}")

    def config(name: str, rc: str) -> str:
        path = os.path.join(out, name.replace(" ", "_").replace("+", "and") + ".yaml")
        with open(path, "w") as fh:
            fh.write(base.replace("recompute: False", rc, 1))
        return path

    print(f"tiny Llama, {a.layers} layers, hidden 256, seq 256, batch 2, fp32, CPU, {a.steps} steps; runs in {out}")
    measured = {}
    for name, rc in STRATEGIES.items():
        cfg = config(name, rc)
        measured[name] = (cfg, run(cfg, os.path.join(out, "run-" + os.path.basename(cfg)[:-5]), a.steps))
    dirs = {n: os.path.join(out, "run-" + os.path.basename(c)[:-5]) for n, (c, _) in measured.items()}
    cal, _ = calibrate([dirs["none"], dirs["full"]])
    print(f"\ncalibrated on none + full: residual {cal.residual / MiB:.1f} MiB, activation scale {cal.scale:.3f}\n")
    # shapes the calibration did not see: twice the sequence, twice the micro-batch (the same strategies)
    for name, (strategy, old, new) in SHAPES.items():
        path = config(name, STRATEGIES[strategy]).replace(".yaml", "_shape.yaml")
        Path(path).write_text(Path(config(name, STRATEGIES[strategy])).read_text().replace(old, new, 1))
        measured[name] = (path, run(path, os.path.join(out, "run-" + os.path.basename(path)[:-5]), a.steps))
    print("| strategy / shape | predicted peak | measured pool peak | error | step time |")
    print("|---|---|---|---|---|")
    held_out = []
    for name, (cfg, m) in measured.items():
        pred = estimate(cfg, calibration=cal).stages[0].peak(cal)
        tag = " (calibration)" if name in ("none", "full") else " (not calibrated on)"
        if name not in ("none", "full"):
            held_out.append(abs(pred - m["peak"]) / m["peak"])
        print(f"| {name}{tag} | {pred / MiB:.1f} MiB | {m['peak'] / MiB:.0f} MiB | "
              f"{(pred - m['peak']) / m['peak']:+.1%} | {m['step_ms']:.0f} ms |")
    print(f"\nnot calibrated on: {len(held_out)} runs, worst |error| {max(held_out):.1%}, "
          f"median {statistics.median(held_out):.1%}")
    dryrun_table()

    lo, hi = measured["full"][1]["peak"], measured["none"][1]["peak"]
    print(f"\nplans for budgets between full ({lo / MiB:.0f} MiB) and none ({hi / MiB:.0f} MiB):\n")
    full_flops = sum(r["recompute_flops"] for r in estimate(measured["full"][0]).layers)
    print("| budget | plan (per layer) | predicted | measured | within budget | above full | recompute FLOPs vs full "
          f"| step time (full: {measured['full'][1]['step_ms']:.0f} ms) | verify |")
    print("|---|---|---|---|---|---|---|---|---|")
    src = config("plan_source", "recompute: False")
    for k in range(1, a.budgets + 1):
        budget = int(lo + (hi - lo) * k / (a.budgets + 1))
        planned = os.path.join(out, f"plan-{budget // MiB}MiB.yaml")
        r = sh([os.path.join(BIN, "swapwatch"), "plan", src, "--budget", str(budget), "--format", "json", "-o",
                planned, "--calibrate", dirs["none"], "--calibrate", dirs["full"]])
        if r.returncode != 0:
            print(f"| {budget / MiB:.1f} MiB | plan exit {r.returncode}: {r.stderr.strip()} | | | | | | | |")
            continue
        js = json.loads(r.stdout)
        choices = _compact([row["choice"] for row in js["layers"]])
        m = run(planned, os.path.join(out, f"run-plan-{budget // MiB}MiB"), a.steps)
        pred = js["stages"][0]["peak_bytes"]
        print(f"| {budget / MiB:.1f} MiB | {choices} | {pred / MiB:.1f} MiB | {m['peak'] / MiB:.0f} MiB | "
              f"{'yes' if m['peak'] <= budget else 'NO'} | {'yes' if m['peak'] > lo else 'no'} | "
              f"{js['recompute_flops'] / full_flops:.0%} | {m['step_ms']:.0f} ms | "
              f"{'PASS' if m['exit'] == 0 else 'exit %d' % m['exit']} |")
    below = sh([os.path.join(BIN, "swapwatch"), "plan", src, "--budget", str(lo - MiB),
                "--calibrate", dirs["none"], "--calibrate", dirs["full"]])
    print(f"\nbudget {(lo - MiB) / MiB:.0f} MiB (below full recompute): exit {below.returncode}; "
          f"{below.stdout.strip().splitlines()[-1]}")
    t = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = sh([os.path.join(BIN, "swapwatch"), "plan", "fixtures/configs/plan_qwen64.yaml", "--budget", "15GiB"])
        t.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
    print(f"`swapwatch plan fixtures/configs/plan_qwen64.yaml --budget 15GiB` (64 layers, 4 stages), whole "
          f"command: best {min(t):.2f} s of 3")
    return 0




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
