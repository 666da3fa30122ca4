"""Units the way users write them (docs/units.md): powers of two are labelled MiB / GiB everywhere,
plots included, and a budget with no unit or under 1 MiB is one line and exit 2 naming what was meant."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.errors import InputError
from swapwatch.memory.model import estimate
from swapwatch.memory.planner import fmt_size, parse_size
from swapwatch.text import fmt_bytes, unit_for
from swapwatch.plot.estimate import plot_estimate

ROOT = Path(__file__).resolve().parents[1]
QWEN = "fixtures/configs/plan_qwen64.yaml"
TINY = "fixtures/configs/plan_tiny.yaml"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("text,meant", [("58", "58GiB"), ("58B", "58GiB"), (" 8 ", "8GiB"), ("0.5", "0.5GiB"),
                                        ("64K", "64G"), ("64KiB", "64GiB"), ("64kb", "64Gb"), ("100KB", "100GB"),
                                        ("1048575", "1048575MiB"), ("60000", "60000MiB"), ("1023", "1023GiB"), ("0.5MiB", "0.5GiB"), ("0.9M", "0.9G")])
def test_a_budget_under_one_mib_names_what_was_meant(text, meant):
    with pytest.raises(InputError) as err:
        parse_size(text)
    msg = str(err.value)
    assert msg.endswith(f"did you mean --budget {meant}?") and "less than 1 MiB" in msg and "\n" not in msg
    assert ("has no unit" in msg) == (text.strip().isdigit() or text.strip().replace(".", "").isdigit())


@pytest.mark.parametrize("text,want", [("1MiB", 1 << 20), ("1048576", 1 << 20), ("1M", 1 << 20), ("2MB", 2 << 20),
                                       ("58GiB", 58 << 30), ("8G", 8 << 30)])
def test_a_budget_of_one_mib_or_more_is_taken(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("command", [("plan", TINY), ("plot", "estimate", TINY, "-o", "never.png")])
def test_cli_budget_without_unit_is_one_line_and_exit_2(command, tmp_path):
    r = cli(*[str(tmp_path / c) if c == "never.png" else c for c in command], "--budget", "58")
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == ("swapwatch: error: --budget 58 has no unit, so it is 58 byte(s), less than 1 MiB: "
                        "did you mean --budget 58GiB?\n")
    assert not (tmp_path / "never.png").exists()


def test_plot_labels_say_mib_and_gib():
    assert unit_for(9 * 2 ** 30) == ("MiB", 2 ** 20) and unit_for(10 * 2 ** 30) == ("GiB", 2 ** 30)
    assert fmt_bytes(183 * 2 ** 20) == "183 MiB" and fmt_bytes(47.7 * 2 ** 30) == "47.7 GiB"
    # plot estimate reads as the estimate table does: GiB from 1 GiB on, the table's numbers on the bars
    est = estimate(QWEN)
    ax = plot_estimate(est, budget=12 << 30).figure.axes[0]
    assert ax.get_ylabel() == "predicted peak per rank (GiB)"
    assert [t.get_text() for t in ax.texts] == [fmt_size(s.peak()) for s in est.stages]
    first = f"{est.stages[0].peak() / 2 ** 30:.2f} GiB"                  # docs/plan.md's estimate table
    assert [t.get_text() for t in ax.texts][0] == first and first in (ROOT / "docs" / "plan.md").read_text()
    tiny = estimate(TINY)                                                # tens of MiB
    ax = plot_estimate(tiny).figure.axes[0]
    assert ax.get_ylabel() == "predicted peak per rank (MiB)"
    assert [t.get_text() for t in ax.texts] == [fmt_size(s.peak()) for s in tiny.stages]
    assert all(t.get_text().endswith(" MiB") for t in ax.texts)
