"""Rewrite the transcripts of README.md and docs/*.md that no longer match what the commands print.

``python tools/refresh_transcripts.py [--check] [DOC...]``: each ```` ```text ```` block whose first
line starts with ``$ `` is run the way ``tests/test_docs_transcripts.py`` runs it; a step whose
expected lines hold no ``...`` gap and differ is replaced by the real output. A step with a gap is
only reported: which lines to elide is an author's choice. Why a tool: a change to an output (a
new verdict line, a new finding) touches dozens of transcripts across the pages, and copying real
output by hand is where mistakes creep in; the test stays the judge.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from test_docs_transcripts import FENCE, documents, matches, run  # noqa: E402


def refresh(doc: Path, env: dict, check: bool) -> int:
    text = doc.read_text(encoding="utf-8")
    out, pos, stale = [], 0, 0
    for m in FENCE.finditer(text):
        out.append(text[pos:m.start(1)])
        lines, block = [], m.group(1).splitlines()
        steps = []
        for ln in block:
            if ln.startswith("$ "):
                steps.append((ln, []))
            else:
                steps[-1][1].append(ln)
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "fixtures").symlink_to(REPO / "fixtures")
            for head, expected in steps:
                real = run(head[2:], tmp, env).splitlines()
                while real and not real[-1].rstrip():
                    real.pop()
                lines.append(head)
                if matches(expected, real) is None:
                    lines.extend(expected)
                    continue
                stale += 1
                line = text.count("\n", 0, m.start()) + 1
                if "..." in expected or check:
                    print(f"{doc.relative_to(REPO)}:{line}: {head} differs"
                          + (" (has a ... gap: edit by hand)" if "..." in expected else ""))
                    lines.extend(expected)
                else:
                    print(f"{doc.relative_to(REPO)}:{line}: {head} refreshed")
                    lines.extend(ln.rstrip() for ln in real)
        out.append("\n".join(lines) + "\n")
        pos = m.end(1)
    out.append(text[pos:])
    if not check:
        doc.write_text("".join(out), encoding="utf-8")
    return stale


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say which transcripts are stale")
    ap.add_argument("docs", nargs="*", type=Path)
    a = ap.parse_args()
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), LC_ALL="C.UTF-8")
    env.pop("COLUMNS", None)
    env.pop("SWAPWATCH_DEBUG", None)
    stale = sum(refresh(d.resolve(), env, a.check) for d in (a.docs or documents()))
    return 1 if stale and a.check else 0


if __name__ == "__main__":
    sys.exit(main())
