"""Recognise a device out-of-memory failure in a run's logs (what makes ``tune`` lower its target).

The texts are MindSpore's own (checked against the installed 2.10 wheel's libraries; fixtures with
each, and one real CPU failure, in ``fixtures/tune/oom/``):

* ``SET_OPCONTEXT_MEMORY_ALLOC_FAIL_BY_STRATEGY`` (runtime/graph_scheduler/actor/actor_common.h), the
  kernel actors' allocation failure: ``Device(id:N) memory isn't enough and alloc failed, kernel name:
  K, alloc size: NB.``, on CPU ``Memory isn't enough and alloc failed, kernel name: ...``; the same
  wording from the output actor (``... alloc failed in output actor, ...``) and the tuple split;
* ``AscendMemAdapter::MallocStaticDevMem`` / ``MallocDynamicDevMem``: ``Out of Memory!!! Request memory
  size: NB, Memory Statistic:``;
* the adapter's ``Initialize``: ``Malloc device memory failed, size[N]`` (the card cannot give the pool
  ``max_device_memory``: other processes, or a budget above the card);
* the memory manager actor: ``Device memory isn't enough and alloc failed, actor name: ...``.

MindSpore raises these as a ``RuntimeError`` under a ``- Memory not enough:`` or ``- Framework Error
Message:`` banner (its ``#umsg#`` rendering), and the process exits non-zero; msrun then reports the
worker's failure. An OOM is a non-zero exit *and* one of these texts: a text alone (a warning of a
retried allocation) is not a failure, and a failure without one is not an OOM.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional

#: (kind, regex) — the first match in a run's logs names the OOM
OOM_TEXTS = (
    ("kernel_alloc", r"Device\(id:\d+\) memory isn't enough and alloc failed(?: in output actor)?, "
                     r"(?:kernel name: (?P<kernel>.*?), )?alloc size: ?(?P<size>\d+)B?"),
    ("kernel_alloc", r"(?<![)\w])Memory isn't enough and alloc failed, kernel name: (?P<kernel>.*?), "
                     r"alloc size: (?P<size>\d+)B"),
    ("device_alloc", r"Device memory isn't enough and alloc failed, (?:actor name: (?P<kernel>.*?), )?"
                     r"alloc size: ?(?P<size>\d+)"),
    ("out_of_memory", r"Out of Memory!!! Request memory size: (?P<size>\d+)B?"),
    ("reserve_failed", r"Malloc device memory failed, size\[(?P<size>\d+)\]"),
)
_RX = [(kind, re.compile(rx)) for kind, rx in OOM_TEXTS]


@dataclass
class OOM:
    kind: str
    line: str
    file: str
    size: Optional[int] = None
    kernel: Optional[str] = None

    def describe(self) -> str:
        what = {"kernel_alloc": "a kernel's output could not be allocated",
                "device_alloc": "device memory could not be allocated",
                "out_of_memory": "MindSpore's memory adapter ran out of device memory",
                "reserve_failed": "the card could not reserve the memory pool"}[self.kind]
        size = f" ({self.size} bytes asked)" if self.size else ""
        return f"OOM: {what}{size}: {Path(self.file).name}: {self.line.strip()[:200]}"


def find_oom(lines: Iterable[str], file: str = "") -> Optional[OOM]:
    """The first MindSpore OOM text in ``lines``."""
    for line in lines:
        if "emory" not in line:            # every text says memory / Memory
            continue
        for kind, rx in _RX:
            m = rx.search(line)
            if m:
                d = m.groupdict()
                return OOM(kind, line.rstrip("\n"), file, int(d["size"]) if d.get("size") else None,
                           d.get("kernel"))
    return None


def run_logs(run_dir: Path) -> List[Path]:
    """A run directory's logs: the console (stdout and stderr copies) and msrun's per-worker logs."""
    out = [run_dir / "console.log", run_dir / "console.stderr.log"]
    out += sorted((run_dir / "msrun_log").glob("*.log")) if (run_dir / "msrun_log").is_dir() else []
    return [p for p in out if p.is_file()]


def oom_in_run(run_dir: Path, exit_code: Optional[int]) -> Optional[OOM]:
    """The OOM of a failed run (non-zero exit and a MindSpore OOM text), else None."""
    if not exit_code:
        return None
    for path in run_logs(run_dir):
        with open(path, encoding="utf-8", errors="replace") as fh:
            hit = find_oom(fh, str(path))
        if hit:
            return hit
    return None
