"""Where a worker's time goes: CPU per stage of the scan, per rank log or per GB, in one process.

``make bench`` times whole commands; this splits the part the pool workers do (most of it) into
its stages, so docs/performance.md can say where the remaining time is, in numbers:

* ``prefilter``: finding the candidate lines' literals (``parsers/prefilter.py``, per byte:
  Hyperscan's matcher or numpy's, whichever ``prefilter.compiled`` picks; ``SWAPWATCH_PREFILTER=numpy``
  for the numpy path alone);
* ``classify``: turning candidate lines into events or classify-cache entries
  (``parsers/classify.py``, per line);
* ``settle``: authority and completeness of a rank (``reader._settle``; ``reader._settle_found``
  for a rank kept as a template, ``parsers/templates.py``);
* ``pack``: a rank's summary and packed form: of its events (``model.pack``: summary, pickle,
  zlib), or of its template (``templates.summary`` + ``templates.pack_extras``: the
  extras' part of the summary, pickling the extras);
* ``encode``: the JSONL of a whole file for ``swapwatch events`` (``--events``;
  ``EventSelect.text_template``);
* ``other``: the rest of ``reader._parse_piece``: reading, the head decision, locating and
  numbering lines around the hits, decoding them, collecting a rank's entries and line numbers,
  interning its template, the per-file setup.

Each stage is timed with ``time.process_time`` around the function that does it, on the files
exactly as the workers get them (``reader._plan``; rank files packed when the job has more than
``reader.PACK_MIN`` ranks).
The timers' own cost (about 1 microsecond a call, measured at start on a function that does
nothing) is taken out of each stage and shown on its own line (``timers``). Run it on a quiet
machine: CPU time inflates when the other core is busy.

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

from swapwatch import events_output  # noqa: E402

#: stage -> the functions timed for it (none calls another one of the list)
STAGES = {"prefilter": [(prefilter.Prefilter, "find"), (prefilter.WordPrefilter, "find"),
                        (prefilter.HyperscanPrefilter, "find")],
          "classify": [(reader, "classify_cached"), (reader, "classify_proto"), (reader, "classify")],
          "settle": [(reader, "_settle"), (reader, "_settle_found")],
          "pack": [(reader, "pack"), (reader.templates, "summary"), (reader.templates, "pack_extras")],
          "encode": [(events_output.EventSelect, "text"), (events_output.EventSelect, "text_template")]}


def _timed(owner, name: str, acc: Dict[str, float], label: str, calls: Dict[str, int]) -> None:
    setattr(owner, name, _wrap(getattr(owner, name), acc, label, calls))


def _wrap(fn, acc: Dict[str, float], label: str, calls: Dict[str, int]):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        calls[label] += 1
        t = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            acc[label] += time.process_time() - t
    return wrapper


def _timer_cost(n: int = 200_000):
    """(inside, outside): CPU a timed call adds within its stage's figure, and outside it, in
    seconds per call, measured on a function that does nothing (classify is timed ~135 times per
    100 KB rank log: without this, its figure would hold ~0.1 ms of timers)."""
    def nothing():
        return None
    acc, calls = {"x": 0.0}, {"x": 0}
    timed = _wrap(nothing, acc, "x", calls)
    t = time.process_time()
    for _ in range(n):
        nothing()
    bare = time.process_time() - t
    t = time.process_time()
    for _ in range(n):
        timed()
    wrapped = time.process_time() - t
    return acc["x"] / n, max(0.0, wrapped - bare - acc["x"]) / n


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a job directory (worker_N.log files) or one big log")
    ap.add_argument("--files", type=int, default=300, help="rank logs of a job to time (default 300)")
    ap.add_argument("--pieces", type=int, default=8, help="32 MB pieces of a big log to time (default 8)")
    ap.add_argument("--events", action="store_true", help="the files as ``swapwatch events`` gets them (JSONL)")
    a = ap.parse_args(argv)
    found = inputs.discover([a.path])
    files = found.files
    packing = sum(f.role == "rank" for f in files) > reader.PACK_MIN
    select = events_output.event_filter((), None) if a.events else None
    packing = packing and not a.events
    pieces = reader._plan(files[:a.files + 3], reader.CHUNK, reader.PIECE, packing, encode=select)
    pieces = pieces[:3] + pieces[3:3 + (a.files if len(files) > 1 else a.pieces)]
    reader._parse_batch(pieces[:3])          # warm: prefilter compiled, classify cache filled
    pieces = pieces[3:]
    inside, outside = _timer_cost()
    acc = dict.fromkeys(STAGES, 0.0)
    calls = dict.fromkeys(STAGES, 0)
    for label, timed in STAGES.items():
        for owner, name in timed:
            _timed(owner, name, acc, label, calls)
    t = time.process_time()
    results = reader._parse_batch(pieces)
    total = time.process_time() - t
    nbytes = sum(r.nbytes for r in results)
    for label in STAGES:
        acc[label] -= calls[label] * inside
    acc["timers"] = sum(calls.values()) * (inside + outside)
    acc["other"] = total - sum(acc.values())
    per, unit = (len(pieces), "ms per rank log") if len(files) > 1 else (nbytes / 1e9, "s per GB")
    scale = 1e3 if len(files) > 1 else 1.0
    print(f"{a.path}: {len(pieces)} {'files' if len(files) > 1 else 'pieces'}, {nbytes / 1e6:.0f} MB, "
          f"{'events' if a.events else 'packed' if packing else 'not packed'}; CPU {unit}:")
    for label in list(STAGES) + ["other", "timers"]:
        print(f"  {label:<10} {acc[label] * scale / per:7.3f}")
    print(f"  {'total':<10} {total * scale / per:7.3f}   ({nbytes / total / 1e9:.2f} GB/s of CPU)")
    model._UNPACKED.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
