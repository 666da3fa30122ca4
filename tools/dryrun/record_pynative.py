"""Record a PyNative DryRun case into fixtures/dryrun/pynative/ (docs/estimate.md, "The PyNative path").

    .venv/bin/python tools/dryrun/record_pynative.py NAME CONFIG.yaml --role fit|held_out \
        --derived "what the case is" [--predicted-mib N] [--log DRYRUN.LOG --seconds S]

Runs CONFIG through swapwatch.pynative.dryrun.measure (MindFormers' PyNative Trainer, one simulated rank,
two steps), or reads the peaks of a log it already wrote (``--log``), and writes NAME.yaml (the YAML as
run) and NAME.json. ``--role held_out`` says the case was not used to build the model; ``--predicted-mib``
is what ``swapwatch estimate`` said before DryRun ran (kept in the record, so the claim can be checked).
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swapwatch.memory.dryrun import read_peaks  # noqa: E402
from swapwatch.pynative import dryrun  # noqa: E402

OUT = ROOT / "fixtures" / "dryrun" / "pynative"
MIB = 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("config")
    ap.add_argument("--role", choices=("fit", "held_out"), required=True)
    ap.add_argument("--derived", required=True)
    ap.add_argument("--predicted-mib", type=int)
    ap.add_argument("--log")
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps the run made (the harness: 2)")
    ap.add_argument("--baseline", help="the case without this strategy (for the savings test)")
    ap.add_argument("--family", default="qwen3")
    ap.add_argument("--not-modelled", action="store_true", help="a family estimate refuses (no layer table yet)")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if a.log:
        text = Path(a.log).read_text(encoding="utf-8", errors="replace")
        used, actual = read_peaks(text)
        if used is None or actual is None:
            raise SystemExit(f"{a.log}: no peak lines")
        hp = dryrun.HP_RE.findall(text)
        swap = dryrun._swap_counts(text)  # pylint: disable=protected-access
        seconds = a.seconds or 0.0
        which = "standin" if hp and hp[-1] == "stand-in" else "installed"
    else:
        res = dryrun.measure(a.config)
        used, actual, seconds, which, swap = res.used_bytes, res.actual_bytes, res.seconds, res.hyper_parallel, res.swap
    shutil.copyfile(a.config, OUT / f"{a.name}.yaml")
    rec = {"yaml": f"{a.name}.yaml", "derived": a.derived, "family": a.family, "rank_size": 1, "steps": a.steps,
           "role": a.role, "used_peak_mib": used // MIB, "actual_peak_mib": actual // MIB, "seconds": seconds,
           "hyper_parallel": which, "swap": swap, "mindspore": "2.10.0", "mindformers": "2.1.0"}
    if a.baseline:
        rec["baseline"] = a.baseline
    if a.not_modelled:
        rec["modelled"] = False
    if a.predicted_mib is not None:
        rec["predicted_mib_before_run"] = a.predicted_mib
    (OUT / f"{a.name}.json").write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    print(f"{a.name}: used {rec['used_peak_mib']}M actual {rec['actual_peak_mib']}M ({a.role})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
