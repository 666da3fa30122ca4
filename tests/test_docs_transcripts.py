"""Every transcript in README.md and docs/*.md is what the commands print today.

A transcript is a fenced ```` ```text ```` block whose first line starts with ``$ ``; each ``$ cmd``
line is run (bash, from a scratch directory where ``fixtures`` is the repository's, so a file a
command writes, such as ``plan -o planned.yaml``, lands there and not in the tree), stdout and
stderr together, as a user's terminal shows them, and the lines up to the next ``$`` must be its
output. A line ``...`` stands for any number of lines (none included): the parts around it must
appear in that order, the first at the very start unless a ``...`` precedes it, the last at the
very end unless one follows it. Trailing blanks of a line are not compared (a table's last column
is padded). docs/development.md says how to write one.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```text\n(\$ .*?)^```$", re.M | re.S)


def documents():
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("**/*.md"))


def transcripts():
    """(id, [(command, expected lines)]) for every transcript block, in document order."""
    out = []
    for doc in documents():
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            steps = []
            for ln in m.group(1).splitlines():
                if ln.startswith("$ "):
                    steps.append((ln[2:], []))
                else:
                    steps[-1][1].append(ln)
            out.append((f"{doc.relative_to(REPO)}:{line}", steps))
    return out


def matches(expected, actual):
    """None when ``actual`` (lines) is what ``expected`` shows, else why not."""
    exp = [ln.rstrip() for ln in expected]
    act = [ln.rstrip() for ln in actual]
    while exp and not exp[-1]:
        exp.pop()
    while act and not act[-1]:
        act.pop()
    parts, cur = [], []
    for ln in exp:
        if ln == "...":
            parts.append(cur)
            cur = []
        else:
            cur.append(ln)
    parts.append(cur)
    if len(parts) == 1:
        return None if exp == act else "output differs"
    pos = 0
    for i, part in enumerate(parts):
        if not part:
            continue
        if i == 0:
            if act[:len(part)] != part:
                return f"does not start with {part[0]!r}"
            pos = len(part)
            continue
        if i == len(parts) - 1:
            if len(act) - len(part) < pos or act[len(act) - len(part):] != part:
                return f"does not end with {part[-1]!r}"
            continue
        found = next((j for j in range(pos, len(act) - len(part) + 1) if act[j:j + len(part)] == part), None)
        if found is None:
            return f"the part starting {part[0]!r} is not in the output (in order)"
        pos = found + len(part)
    return None


def test_documents_have_transcripts():
    """The parser finds the transcripts (a changed fence style must not turn this file into a no-op)."""
    found = {tid.split(":")[0] for tid, _ in transcripts()}
    assert "README.md" in found and os.path.join("docs", "rules.md") in found, found
    assert sum(len(steps) for _, steps in transcripts()) >= 20


@pytest.mark.parametrize("tid,steps", transcripts(), ids=[t for t, _ in transcripts()])
def test_transcript_is_real_output(tid, steps, tmp_path):
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), PYTHONUNBUFFERED="1",
               PYTHONPATH=str(REPO), LC_ALL="C.UTF-8")
    env.pop("COLUMNS", None)
    env.pop("SWAPWATCH_DEBUG", None)
    for command, expected in steps:
        output = run(command, tmp_path, env)
        why = matches(expected, output.splitlines())
        assert why is None, f"{tid}: $ {command}: {why}\n--- real output:\n{output}"


def run(command, cwd, env):
    """What ``command`` prints. ``swapwatch rules [CODE]`` (41 of the transcripts, docs/rules.md)
    goes through the same click command in this process: the registry and its rendering are all it
    runs, and a process start per rule would be most of this file's time."""
    words = command.split()
    if words[:2] == ["swapwatch", "rules"] and len(words) <= 3 and RULES_ARG.match(" ".join(words[2:])):
        from click.testing import CliRunner

        from swapwatch.cli import cli

        res = CliRunner().invoke(cli, words[1:], catch_exceptions=False)
        return res.output
    return subprocess.run(["bash", "-c", command + " 2>&1"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300).stdout


RULES_ARG = re.compile(r"^(?:[Ss][Ww])?\d*$")


@pytest.mark.parametrize("expected,actual,ok", [
    (["a", "b"], ["a", "b", ""], True),
    (["a", "b"], ["a", "c"], False),
    (["a", "...", "z"], ["a", "x", "y", "z"], True),
    (["a", "...", "z"], ["a", "z"], True),
    (["a", "...", "z"], ["b", "z"], False),
    (["...", "y", "z"], ["a", "y", "z"], True),
    (["...", "y"], ["a", "y", "z"], False),
    (["a", "...", "c", "...", "e"], ["a", "b", "c", "d", "e"], True),
    (["a", "...", "d", "...", "c"], ["a", "c", "d", "e"], False),
])
def test_ellipsis_matching(expected, actual, ok):
    assert (matches(expected, actual) is None) is ok
