"""`-o FILE` of verify and plot: an existing file is never replaced without --force (one line, exit 2)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.errors import InputError
from swapwatch.commands.outputs import refuse_overwrite, write_text

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
RUNS = REPO / "fixtures" / "plot_runs"

COMMANDS = {
    "verify": ["verify", str(RUNS / "select-2ranks"), "--config", str(RUNS / "configs" / "select.yaml")],
    "plot memory": ["plot", "memory", str(RUNS / "none"), str(RUNS / "full")],
    "plot strategy": ["plot", "strategy", str(REPO / "fixtures" / "configs" / "conflict.yaml")],
}


def _sw(tmp_path, *args):
    return subprocess.run([PY, "-m", "swapwatch.cli", *args], capture_output=True, cwd=tmp_path)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_existing_output_is_kept_unless_force(tmp_path, name):
    target = tmp_path / ("out.txt" if name == "verify" else "out.png")
    target.write_bytes(b"the user's own file")
    r = _sw(tmp_path, *COMMANDS[name], "-o", str(target))
    assert r.returncode == 2 and target.read_bytes() == b"the user's own file"
    assert r.stderr.decode().strip().splitlines() == [
        f"swapwatch: error: {target}: already exists; swapwatch does not overwrite it without --force "
        "(or choose another -o name)"]
    r = _sw(tmp_path, *COMMANDS[name], "-o", str(target), "--force")
    assert r.returncode == 0, r.stderr
    data = target.read_bytes()
    assert data != b"the user's own file"
    assert data.startswith(b"\x89PNG") if name != "verify" else b"PASS" in data


def test_a_new_output_needs_no_force(tmp_path):
    r = _sw(tmp_path, *COMMANDS["verify"], "-o", "report.txt")
    assert r.returncode == 0 and b"PASS" in (tmp_path / "report.txt").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]      # no temp file left behind


def test_write_text_refuses_a_file_that_appears_at_the_last_moment(tmp_path, monkeypatch):
    """The check before the work and O_EXCL at the write: a file created in between still wins."""
    target = tmp_path / "r.txt"
    real = refuse_overwrite
    calls = []

    def late_creation(path, force):
        real(path, force)
        if not calls:
            calls.append(path)
            Path(path).write_text("appeared meanwhile")

    monkeypatch.setattr("swapwatch.commands.outputs.refuse_overwrite", late_creation)
    with pytest.raises(InputError, match="already exists"):
        write_text(str(target), "report", force=False)
    assert target.read_text() == "appeared meanwhile"
    assert sorted(os.listdir(tmp_path)) == ["r.txt"]


def test_write_text_into_a_missing_directory_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="cannot write here"):
        write_text(str(tmp_path / "no" / "such" / "r.txt"), "x", force=False)


def test_a_failed_rename_leaves_neither_temp_file_nor_placeholder(tmp_path, monkeypatch):
    """The O_EXCL placeholder is ours: when the final rename fails, it goes with the temp file."""
    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("swapwatch.commands.outputs.os.replace", refuse)
    with pytest.raises(InputError, match="cannot write the file: Permission denied"):
        write_text(str(tmp_path / "r.txt"), "report", force=False)
    assert os.listdir(tmp_path) == []
