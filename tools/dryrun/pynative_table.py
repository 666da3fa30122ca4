"""Print docs/estimate.md's PyNative DryRun table from fixtures/dryrun/pynative/ (markdown rows):
case, strategy, estimate, DryRun L1, error, and whether the case was used to build the model.

    .venv/bin/python tools/dryrun/pynative_table.py
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swapwatch.pynative import sizing  # noqa: E402

CASES = ROOT / "fixtures" / "dryrun" / "pynative"
MIB = 1 << 20


def main() -> int:
    print("| case | strategy | steps | estimate | PyNative DryRun L1 (used) | error | peak phase | "
          "used to build the model? |")
    print("|---|---|---|---|---|---|---|---|")
    for js in sorted(CASES.glob("*.json")):
        rec = json.loads(js.read_text(encoding="utf-8"))
        if rec.get("modelled") is False:
            print(f"| {js.stem} | {rec['derived'].split(':')[0]} | {rec['steps']} | not modelled (refused) | "
                  f"{rec['used_peak_mib']} MiB | - | - | no table for {rec['family']} yet |")
            continue
        est = sizing.estimate_pynative(str(CASES / rec["yaml"]))
        ph = est.stages[0].phases
        steady = rec["steps"] == 2
        pred = ph.peak(steady=steady)
        used = rec["used_peak_mib"] * MIB
        choices = sorted({r["choice"] for r in est.layers})
        strategy = "; ".join(f"{c} ({','.join(str(r['layer']) for r in est.layers if r['choice'] == c)})"
                             for c in choices)
        role = ("no: held out (estimate said %d MiB before DryRun ran)" % rec["predicted_mib_before_run"]
                if rec["role"] == "held_out" else "yes")
        print(f"| {js.stem} | {strategy} | {rec['steps']} | {pred / MIB:.0f} MiB | {rec['used_peak_mib']} MiB | "
              f"{(pred - used) / used:+.1%} | {ph.phase(steady)} | {role} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
