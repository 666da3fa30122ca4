"""``make bench``: swapwatch's log parsing vs ``grep -cE`` on the same 1 GB worker log, and peak RSS.

What is compared: ``swapwatch.read_logs`` (the whole parse: candidate search, decoding, every family
parser, completeness) in a fresh subprocess, against ``grep -cE`` with an alternation of the literals
that identify the same line families (the message needles of ``swapwatch.parsers.grammar``, i.e.
what a user would grep for). Both run on a warm page cache; each is timed twice and the best run
counts. Peak RSS is the subprocess's ``ru_maxrss`` (it includes its pool workers, which it reaps).

The log is generated once by ``bench/gen_log.py`` into ``bench/out/`` (gitignored) and reused.
Goals: ratio <= 1.5, peak RSS <= 200 MB whatever the log size.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from swapwatch.parsers import grammar  # noqa: E402

PARSE = """
import sys, time
from swapwatch.parsers import read_logs
t = time.perf_counter()
run = read_logs([sys.argv[1]], show_progress=True)
dt = time.perf_counter() - t
r = next(iter(run.ranks.values()))
kinds = {}
for e in r.events:
    kinds[e.kind] = kinds.get(e.kind, 0) + 1
print(dt, len(r.events), r.complete, r.truncated, sorted(kinds.items()))
"""


def grep_pattern() -> str:
    lits = sorted(set(grammar.raw_needles()) | set(grammar.ANYWHERE))
    return "|".join(re.sub(r"([][{}()|.*+?^$\\])", r"\\\1", x.decode()) for x in lits)


def timed(cmd, **kw):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, **kw)
    return time.perf_counter() - t, p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--log", default=None, help="use this log instead of the generated one")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args(argv)
    path = a.log or os.path.join(HERE, "out", f"worker_0_{a.size_mb}mb.log")
    if not os.path.exists(path):
        print(f"generating {path} ({a.size_mb} MB, once) ...", flush=True)
        subprocess.run([sys.executable, os.path.join(HERE, "gen_log.py"), "--size-mb", str(a.size_mb),
                        "--out", path], check=True)
    size = os.path.getsize(path)
    with open(path, "rb") as f:                     # warm the page cache for both contenders
        while f.read(16 << 20):
            pass
    grep = shutil.which("grep")
    pat = grep_pattern()
    g_best = None
    g_count = None
    if grep:
        for _ in range(a.repeat):
            dt, p = timed([grep, "-cE", pat, path], env=dict(os.environ, LC_ALL="C"))
            g_best = dt if g_best is None else min(g_best, dt)
            g_count = p.stdout.strip()
    s_best = None
    info = ""
    for _ in range(a.repeat):
        dt, p = timed([sys.executable, "-c", PARSE, path], cwd=ROOT)
        if p.returncode:
            print("swapwatch parse failed", file=sys.stderr)
            return 1
        if s_best is None or dt < s_best:
            s_best, info = dt, p.stdout.strip()
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rss_mb = rss / 1024 if sys.platform != "darwin" else rss / 1024 / 1024
    print(f"log:           {path} ({size / 1e6:,.0f} MB)")
    print(f"swapwatch:     {s_best:.2f} s  ({size / s_best / 1e9:.2f} GB/s, {os.cpu_count()} cores)  "
          f"(in-process parse s, events, complete, truncated, kinds: {info})")
    if g_best is not None:
        print(f"grep -cE:      {g_best:.2f} s  ({size / g_best / 1e9:.2f} GB/s, {g_count} matching lines)")
        print(f"ratio:         {s_best / g_best:.2f}  (goal <= 1.5)")
    else:
        print("grep -cE:      not available")
    print(f"peak RSS:      {rss_mb:.0f} MB  (goal <= 200 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
