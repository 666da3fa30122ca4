"""Before/after harness for refactors: run every command on every fixture with two source trees, byte for byte.

Why: issue 32 restructures the package without changing what any command prints. The tests cover much of it;
this covers the rest by brute force: explain (table / json / formative / --all-layers), estimate (table /
json), plan (two budgets, table / json / yaml), verify (every format, with and without --config), events (jsonl /
csv), diff (config pairs, run pairs), plot estimate / plot strategy (the printed line) and report (the page)
on every fixture config and log. Each case's stdout, stderr (the tree's path stripped) and exit code is stored
under ``OUT/<case>.txt``; ``--compare A B`` lists the cases whose outputs differ.

    python tools/before_after.py run  --tree /tmp/base  --out /tmp/ba-before
    python tools/before_after.py run  --tree .          --out /tmp/ba-after
    python tools/before_after.py compare /tmp/ba-before /tmp/ba-after

``--tree`` is a checkout (e.g. ``git archive d97979b | tar -x -C /tmp/base``); the commands run with it first on
``PYTHONPATH`` (``python -P``: the current directory is not put first) and the fixtures read from THIS checkout
(so both trees see the same inputs, by the same paths).
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rel(pattern: str) -> List[str]:
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


def configs() -> List[str]:
    out = _rel("fixtures/configs/**/*.yaml") + _rel("fixtures/plot_runs/configs/*.yaml")
    out += _rel("fixtures/docs/*.yaml")
    out += ["fixtures/logs/cpu_swap/config.yaml"]
    out += _rel("fixtures/cpu_memory/*.yaml")[:3] + _rel("fixtures/pynative_memory/*.yaml")[:3]
    return out


def logs() -> List[str]:
    out = _rel("fixtures/logs/*.log") + _rel("fixtures/logs/*.log.gz") + _rel("fixtures/logs/families/*.log")
    out += [p for p in _rel("fixtures/logs/*")
            if os.path.isdir(os.path.join(ROOT, p)) and p != "fixtures/logs/families"]
    out += _rel("fixtures/plot_runs/*")
    out = [p for p in out if not p.endswith("/configs") and not p.endswith("make.sh") and not p.endswith(".md")]
    out += ["fixtures/docs/pynative_run_edited"]
    return out


#: log -> the config it ran (fixtures/logs/README.md)
PAIRS = {
    "fixtures/logs/swap_case1.log": "fixtures/configs/swap_case1.yaml",
    "fixtures/logs/swap_case2.log": "fixtures/configs/swap_case2.yaml",
    "fixtures/logs/swap_case2.log.gz": "fixtures/configs/swap_case2.yaml",
    "fixtures/logs/swap_case3.log": "fixtures/configs/swap_case3.yaml",
    "fixtures/logs/swap_case4.log": "fixtures/configs/swap_case4.yaml",
    "fixtures/logs/recompute_48l.log": "fixtures/configs/recompute_48l.yaml",
    "fixtures/logs/mtp_select.log": "fixtures/configs/select_recompute.yaml",
    "fixtures/logs/truncated.log": "fixtures/configs/swap_case3.yaml",
    "fixtures/logs/garbage.log": "fixtures/configs/swap_case2.yaml",
    "fixtures/logs/msrun_2ranks": "fixtures/configs/swap_case3.yaml",
    "fixtures/logs/msrun_missing_rank": "fixtures/configs/swap_case3.yaml",
    "fixtures/logs/stdout_devices": "fixtures/configs/swap_case3.yaml",
    "fixtures/logs/cpu_swap": "fixtures/logs/cpu_swap/config.yaml",
    "fixtures/logs/pynative_qwen3": "fixtures/configs/pynative_qwen3_select.yaml",
    "fixtures/logs/pynative_dsv3_mtp": "fixtures/configs/pynative_dsv3_mtp.yaml",
    "fixtures/logs/pynative_single_card": "fixtures/configs/pynative_qwen3_select.yaml",
    "fixtures/logs/pynative_pp2": "fixtures/configs/pynative_pp2.yaml",
    "fixtures/docs/pynative_run_edited": "fixtures/configs/pynative_qwen3_select.yaml",
    "fixtures/plot_runs/select-2ranks": "fixtures/plot_runs/configs/select.yaml",
}
PAIRS.update({f"fixtures/logs/families/{os.path.basename(p)[:-4]}.log": p
              for p in _rel("fixtures/configs/families/*.yaml")
              if os.path.exists(os.path.join(ROOT, f"fixtures/logs/families/{os.path.basename(p)[:-4]}.log"))})
#: cross pairs: a log against another config (differences, refusals)
CROSS = [("fixtures/logs/swap_case1.log", "fixtures/configs/swap_case2.yaml"),
         ("fixtures/logs/pynative_qwen3", "fixtures/configs/swap_case1.yaml"),
         ("fixtures/logs/swap_case1.log", "fixtures/configs/pynative_qwen3_select.yaml"),
         ("fixtures/logs/pynative_pp2", "fixtures/configs/pynative_qwen3_select.yaml")]


def cases() -> List[Tuple[str, List[str]]]:
    out: List[Tuple[str, List[str]]] = []
    cfgs = configs()
    for c in cfgs:
        for fmt in ("table", "json", "formative"):
            out.append(("explain", ["explain", c, "--format", fmt]))
        out.append(("explain", ["explain", c, "--all-layers"]))
        for fmt in ("table", "json"):
            out.append(("estimate", ["estimate", c, "--format", fmt]))
        for budget in ("1GiB", "64GiB"):
            for fmt in ("table", "json", "yaml"):
                out.append(("plan", ["plan", c, "--budget", budget, "--format", fmt]))
        out.append(("plot-estimate", ["plot", "estimate", c, "-o", "{tmp}/e.png"]))
        out.append(("plot-strategy", ["plot", "strategy", c, "-o", "{tmp}/s.png"]))
    for i in range(0, len(cfgs) - 1):
        out.append(("diff", ["diff", cfgs[i], cfgs[i + 1], "--format", "json"]))
        out.append(("diff", ["diff", cfgs[i], cfgs[i + 1]]))
    lgs = logs()
    for lg in lgs:
        for fmt in ("table", "json", "junit", "markdown"):
            out.append(("verify", ["verify", lg, "--format", fmt]))
            if lg in PAIRS:
                out.append(("verify", ["verify", lg, "--config", PAIRS[lg], "--format", fmt]))
        for fmt in ("jsonl", "csv"):
            out.append(("events", ["events", lg, "--format", fmt]))
        out.append(("plot-strategy", ["plot", "strategy", lg, "-o", "{tmp}/s.png"]))
        if lg in PAIRS:
            out.append(("plot-strategy", ["plot", "strategy", lg, "--config", PAIRS[lg], "-o", "{tmp}/s.png"]))
        out.append(("report", ["report", lg, "-o", "{tmp}/r.html"]))
    for lg, c in CROSS:
        for fmt in ("table", "json"):
            out.append(("verify", ["verify", lg, "--config", c, "--format", fmt]))
    for i in range(0, len(lgs) - 1):
        out.append(("diff", ["diff", lgs[i], lgs[i + 1], "--format", "json"]))
    return out


def _name(kind: str, argv: List[str]) -> str:
    h = hashlib.sha1("\0".join(argv).encode()).hexdigest()[:10]
    return f"{kind}-{h}"


def run_one(tree: str, out: str, kind: str, argv: List[str]) -> None:
    tmp = tempfile.mkdtemp(prefix="ba-")
    try:
        args = [a.replace("{tmp}", tmp) for a in argv]
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), SWAPWATCH_DEBUG="0", MPLBACKEND="Agg")
        main = "import sys; from swapwatch.cli import main; main(sys.argv[1:])"
        proc = subprocess.run([sys.executable, "-P", "-c", main, *args], cwd=ROOT, env=env, capture_output=True,
                              timeout=600)
        text = [f"$ swapwatch {' '.join(argv)}", f"exit {proc.returncode}", "--- stdout",
                proc.stdout.decode("utf-8", "replace"), "--- stderr",
                proc.stderr.decode("utf-8", "replace").replace(tmp, "{tmp}").replace(os.path.abspath(tree), "{tree}")]
        for f in sorted(os.listdir(tmp)):
            p = os.path.join(tmp, f)
            if f.endswith(".html"):
                with open(p, encoding="utf-8", errors="replace") as fh:
                    text += [f"--- file {f}", fh.read().replace(tmp, "{tmp}")]
            else:
                text += [f"--- file {f}: {os.path.getsize(p)} bytes"]
        with open(os.path.join(out, _name(kind, argv) + ".txt"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(text))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tree: str, out: str, jobs: int, only: str) -> None:
    os.makedirs(out, exist_ok=True)
    todo = [(k, a) for k, a in cases() if not only or k in only.split(",")]
    print(f"{len(todo)} cases", file=sys.stderr)
    with ThreadPoolExecutor(jobs) as pool:
        for i, _ in enumerate(pool.map(lambda ka: run_one(tree, out, *ka), todo)):
            if i % 100 == 0:
                print(f"  {i}/{len(todo)}", file=sys.stderr)


def compare(a: str, b: str) -> int:
    names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
    moved: Dict[str, str] = {}
    for n in names:
        pa, pb = os.path.join(a, n), os.path.join(b, n)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            moved[n] = "only in one"
            continue
        with open(pa, encoding="utf-8") as fa, open(pb, encoding="utf-8") as fb:
            ta, tb = fa.read(), fb.read()
        if ta != tb:
            moved[n] = ta.split("\n", 1)[0]
    for n, what in moved.items():
        print(f"{n}: {what}")
    print(f"{len(names)} cases, {len(moved)} differ", file=sys.stderr)
    return 1 if moved else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tree", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--only", default="", help="comma-separated kinds (explain,verify,...)")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    ns = ap.parse_args()
    if ns.cmd == "run":
        run(ns.tree, ns.out, ns.jobs, ns.only)
        return 0
    return compare(ns.a, ns.b)


if __name__ == "__main__":
    sys.exit(main())
