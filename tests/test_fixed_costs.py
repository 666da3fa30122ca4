"""The parent's fixed costs of a verify, made cheaper without changing what it computes.

Each shortcut is checked against the slow way it replaces: the family word filter never rules out
a family whose trees hold a path, ``Finding.to_json`` builds what ``dataclasses.asdict`` built, and
discovering a job's files names them as ``os.path.relpath`` / ``os.path.realpath`` did.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

from swapwatch.model import families
from swapwatch.checks import Finding
from swapwatch.layouts import families as family_names, family_words, load_layout, split_key
from swapwatch.parsers import inputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("name", family_names())
def test_every_path_of_a_family_passes_its_word_filter(name):
    """from_log skips a family when a logged path has a word its file lacks; that is only sound if
    every path of every tree of the family is made of words of its file."""
    kinds = list(families.family_data(name)["layouts"])
    assert kinds
    words = family_words(name)
    for kind in kinds:
        paths = [p for p, _ in load_layout(f"{name}:{kind}").paths()]
        assert paths
        for path in paths:
            missing = set(re.findall(r"\w+", path)) - words
            assert not missing, (name, kind, path, missing)
    assert split_key(name)[0] == name


def test_word_filter_rules_out_a_family_lacking_a_path():
    qwen3 = family_words("qwen3")
    assert "self_attention" in qwen3 and "feed_forward" not in qwen3    # a legacy Llama path word


@dataclasses.dataclass
class _Inner:
    a: int
    b: list


@pytest.mark.parametrize("finding", [
    Finding("SW101", "error", "m"),
    Finding("SW112", "warning", "x", rank=0, layer=0, op="", expected=0, actual=False, source="w.log:1"),
    Finding("SW104", "error", "y", expected=[1, 2, (3, 4)], actual={"k": [1, {"z": None}]}),
    Finding("SW104", "error", "y", expected=_Inner(1, [2]), actual=[_Inner(3, [])], layer=3),
    Finding("SW104", "error", "y", expected={"in": _Inner(5, [6])}, actual=(1, _Inner(0, []))),
])
def test_finding_json_is_what_asdict_gave(finding):
    before = {k: v for k, v in dataclasses.asdict(finding).items() if v is not None}
    after = finding.to_json()
    assert json.dumps(after) == json.dumps(before)
    assert list(after) == list(before)


def test_discovered_names_match_relpath_and_realpath(tmp_path, monkeypatch):
    """A job directory given several ways (relative, trailing slash, through '..', through a
    symlinked directory, a symlinked file): each file shown relative to what the user gave, and
    a file reached twice kept once."""
    job = tmp_path / "runs" / "job"
    (job / "sub").mkdir(parents=True)
    for r in range(3):
        (job / f"worker_{r}.log").write_text("x\n")
    (job / "sub" / "worker_3.log").write_text("x\n")
    os.symlink(job / "worker_0.log", job / "worker_9.log")          # the same file twice
    os.symlink(job, tmp_path / "alias")
    monkeypatch.chdir(tmp_path)
    for given in (["runs/job"], ["runs/job/"], ["runs/../runs/job"], ["alias"], [str(job)],
                  ["runs/job", "alias"], ["runs/job/worker_1.log", "runs/job"]):
        got = inputs.discover(given)
        want = []
        seen = set()
        # the slow way, as discover did it before
        for g in given:
            if os.path.isdir(g):
                base = os.path.dirname(os.path.abspath(g).rstrip(os.sep))
                paths = list(inputs._walk(g, 2))
                for p in paths:
                    want.append((p, inputs._display(p, base)))
            else:
                want.append((g, g))
        slow = []
        for p, d in want:
            key = os.path.realpath(p)
            if key not in seen and re.search(r"worker_\d+\.log$", p):
                seen.add(key)
                slow.append((p, d, os.path.getsize(p)))
        assert [(f.path, f.display, f.size) for f in got.files] == slow, given
    assert len(inputs.discover(["runs/job"]).files) == 4            # worker_9 is worker_0


def test_the_scan_starts_before_what_only_the_checks_and_plots_need():
    """verify and plot memory import the YAML library, the rules, the comparison (and the regex
    library its pattern matcher uses), pandas and matplotlib while the workers scan
    (``read_logs(while_scanning=...)``), not before they start."""
    import subprocess
    import sys

    code = ("import sys, swapwatch.cli, swapwatch.commands.verify, swapwatch.plot.commands, swapwatch.parsers.reader; "
            "print(sorted(m for m in ('yaml', 'pandas', 'matplotlib', 'swapwatch.config', 'swapwatch.engine.compare', "
            "'regex', 'swapwatch.checks.sw101_missing_action') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_while_scanning_runs_once_when_workers_scan(tmp_path, monkeypatch):
    from swapwatch.parsers import reader

    src = os.path.join(ROOT, "fixtures", "logs", "swap_case1.log")
    text = open(src, encoding="utf-8").read()
    for r in range(4):
        (tmp_path / f"worker_{r}.log").write_text(text.replace("rank id: 0", f"rank id: {r}"))
    calls = []
    monkeypatch.setattr(reader, "PARALLEL_MIN", 0)
    parallel = reader.read_logs([str(tmp_path)], jobs=2, while_scanning=lambda: calls.append(1))
    assert calls == [1]
    serial = reader.read_logs([str(tmp_path)], jobs=1, while_scanning=lambda: calls.append(2))
    assert calls == [1]                 # no workers, nothing to overlap
    assert sorted(parallel.ranks) == sorted(serial.ranks) == [0, 1, 2, 3]
