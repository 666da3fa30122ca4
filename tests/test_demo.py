"""`make demo`'s script end to end (real MindSpore, two 2-worker msrun jobs): it must finish with a
passing verdict, both run directories verified, a memory plot whose pool peaks show the recompute,
msrun's connection-retry lines kept out of the console (and in console.log), and a summary that says
what was planned, applied and bought, where the files are and how long it took. A smaller model and
fewer steps than the real demo keep it to about half a minute."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mindspore")

from runtime_helpers import REPO  # noqa: E402
from swapwatch.parsers import read_logs  # noqa: E402
from swapwatch.plot import memory_frame, peak_frame  # noqa: E402

pytestmark = pytest.mark.runtime

#: the script's own NOISE pattern (one place for it)
NOISE = next(ln for ln in (REPO / "scripts" / "demo.sh").read_text().splitlines()
             if ln.startswith("NOISE="))[len("NOISE='"):-1]


def test_demo_script_runs_the_whole_loop(tmp_path):
    env = dict(os.environ, BIN=str(Path(sys.executable).parent), DEMO_RUNS=str(tmp_path),
               DEMO_STEPS="2", DEMO_MODEL="--hidden 128 --seq 128 --batch 2 --ffn 344 --heads 4")
    proc = subprocess.run([str(REPO / "scripts" / "demo.sh")], env=env, capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "== swapwatch explain" in out and "layer  stage" in out
    assert out.rstrip().endswith("== verdict: exit code 0 (the run did what the YAML asks)")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    noise = re.compile(NOISE)
    assert not [ln for ln in out.splitlines() if noise.search(ln)]
    hidden = sum(1 for name in ("console.log", "console.stderr.log")
                 for ln in (run / "recompute" / name).read_text().splitlines() if noise.search(ln))
    assert f"; {hidden} msrun connection-retry lines not shown, they are in {run}/recompute/console*.log)" in out
    summary = out[out.index("== summary"):]
    assert "stage 0: layers 0-3 (4), full 1, select 3, comm 3, swap 0" in summary
    assert re.search(r"applied: +baseline: +PASS: 0 error\(s\)", summary), summary
    assert re.search(r"\n +recompute: PASS: 0 error\(s\)", summary) and f"(plot: {run}/memory.png)" in summary
    assert re.search(r"bought: +MindSpore's CPU pool peak (\d+) MiB -> (\d+) MiB \(-\d+%\)", summary)
    assert re.search(r"took: +\d+ min \d+ s", summary)
    for name in ("baseline", "recompute"):
        info = json.loads((run / name / "run.json").read_text())
        assert info["exit_code"] == 0 and info["world_size"] == 2
        assert (run / name / "verify.txt").read_text().splitlines()[-1].startswith("PASS")
        # issue 26: `swapwatch run` leaves one self-contained page per run
        page = (run / name / "report.html").read_text(encoding="utf-8")
        assert info["report"] == "report.html" and 'data-verdict="pass"' in page
    assert sorted(p.name for p in (run / "recompute" / "ir").rglob("*add_recomputation*"))
    assert (run / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    peaks = peak_frame(memory_frame([read_logs([str(run / n)]) for n in ("baseline", "recompute")]))
    by_run = peaks.groupby("run", observed=True)["used"].max()
    base = next(v for k, v in by_run.items() if k.startswith("baseline"))
    rec = next(v for k, v in by_run.items() if k.startswith("recompute"))
    assert rec < base, by_run
