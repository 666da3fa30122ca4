"""Where a worker's time goes: CPU per stage of the scan, per rank log or per GB, in one process.

``make bench`` times whole commands; this splits the part the pool workers do (most of it) into
its stages, so the README's Speed section can say where the remaining time is, in numbers:

* ``prefilter``: finding the candidate lines' literals (``parsers/prefilter.py``, per byte);
* ``classify``: turning candidate lines into events (``parsers/classify.py``, per line);
* ``settle``: authority and completeness of a rank (``reader._settle``);
* ``pack``: summary, pickle and zlib of a rank's events (``model.pack``);
* ``other``: the rest of ``reader._parse_piece``: reading, the head decision, locating and
  numbering lines around the hits, decoding them.

Each stage is timed with ``time.process_time`` around the function that does it (the timer costs
about 1 microsecond a call, ~0.15 ms of a rank's total), on the files exactly as the workers get
them (``reader._plan``; rank files packed when the job has more than ``reader.PACK_MIN`` ranks).
Run it on a quiet machine: CPU time inflates when the other core is busy.

    .venv/bin/python bench/where.py bench/out/job_1024x1000kb --files 300
    .venv/bin/python bench/where.py bench/out/worker_0_1024mb.log --pieces 8
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from swapwatch.parsers import inputs, model, prefilter, reader  # noqa: E402

STAGES = {"prefilter": (prefilter.Prefilter, "find"), "classify": (reader, "classify_cached"),
          "settle": (reader, "_settle"), "pack": (reader, "pack")}
EXTRA = {"prefilter": [(prefilter.WordPrefilter, "find")]}     # more functions counted under a stage


def _timed(owner, name: str, acc: Dict[str, float], label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*a, **k):
        t = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            acc[label] += time.process_time() - t
    setattr(owner, name, wrapper)


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a job directory (worker_N.log files) or one big log")
    ap.add_argument("--files", type=int, default=300, help="rank logs of a job to time (default 300)")
    ap.add_argument("--pieces", type=int, default=8, help="32 MB pieces of a big log to time (default 8)")
    a = ap.parse_args(argv)
    found = inputs.discover([a.path])
    files = found.files
    packing = sum(f.role == "rank" for f in files) > reader.PACK_MIN
    pieces = reader._plan(files[:a.files + 3], reader.CHUNK, reader.PIECE, packing)
    pieces = pieces[:3] + pieces[3:3 + (a.files if len(files) > 1 else a.pieces)]
    reader._parse_batch(pieces[:3])          # warm: prefilter compiled, classify cache filled
    pieces = pieces[3:]
    acc = dict.fromkeys(STAGES, 0.0)
    for label, (owner, name) in STAGES.items():
        _timed(owner, name, acc, label)
        for owner, name in EXTRA.get(label, ()):
            _timed(owner, name, acc, label)
    t = time.process_time()
    results = reader._parse_batch(pieces)
    total = time.process_time() - t
    nbytes = sum(r.nbytes for r in results)
    acc["other"] = total - sum(acc.values())
    per, unit = (len(pieces), "ms per rank log") if len(files) > 1 else (nbytes / 1e9, "s per GB")
    scale = 1e3 if len(files) > 1 else 1.0
    print(f"{a.path}: {len(pieces)} {'files' if len(files) > 1 else 'pieces'}, {nbytes / 1e6:.0f} MB, "
          f"{'packed' if packing else 'not packed'}; CPU {unit}:")
    for label in list(STAGES) + ["other"]:
        print(f"  {label:<10} {acc[label] * scale / per:7.3f}")
    print(f"  {'total':<10} {total * scale / per:7.3f}   ({nbytes / total / 1e9:.2f} GB/s of CPU)")
    model._UNPACKED.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
