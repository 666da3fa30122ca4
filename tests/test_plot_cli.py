"""plot memory / plot strategy on the command line: bad input is one line and exit 2, files get written."""
import os

import pytest

from cli_helpers import sw
from swapwatch.errors import InputError
from swapwatch.plot.commands import output_path, parse_ranks
from swapwatch.plot.inputs import group_paths


def run_cli(args, capsys):
    return sw(*args, capsys=capsys)


def one_error_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("swapwatch: error: ")
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("args, needle", [
    (["plot", "memory", "no/such/dir"], "no/such/dir: no such file or directory"),
    (["plot", "memory", ".", "-o", "no/such/dir/m.png"], "does not exist; create it first"),
    (["plot", "memory", ".", "-o", "m.gif"], "cannot tell the image format"),
    (["plot", "memory", ".", "--format", "jpeg", "-o", "m.png"], "unknown format 'jpeg'"),
    (["plot", "memory", ".", "--ranks", "1,x"], "--ranks 1,x: expected rank numbers"),
    (["plot", "memory", ".", "--ranks", "5-2"], "not a rank or an increasing range"),
    (["plot", "strategy", "no/such.yaml"], "no/such.yaml: no such file or directory"),
    (["plot", "strategy", ".", "--config", "missing.yaml"], "missing.yaml: no such file or directory"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys, args, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(args, capsys)
    assert code == 2
    assert needle in one_error_line(err)
    assert os.listdir(tmp_path) == []              # nothing written


def test_default_output_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "memory.png").write_bytes(b"mine")
    with pytest.raises(InputError, match="memory.png already exists; pass -o memory.png"):
        output_path(None, None, "memory")
    with pytest.raises(InputError, match="memory.png already exists; pass -o memory.png"):
        output_path(None, None, "memory", force=True)                    # --force is for a name given
    assert output_path(None, "svg", "memory") == ("memory.svg", "svg", False)
    with pytest.raises(InputError, match="does not overwrite it without --force"):
        output_path("memory.png", None, "memory")
    assert output_path("memory.png", None, "memory", force=True) == ("memory.png", "png", True)
    assert (tmp_path / "memory.png").read_bytes() == b"mine"


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("args", [
    ["plot", "memory", os.path.join(ROOT, "fixtures/plot_runs/full")],
    ["plot", "strategy", os.path.join(ROOT, "fixtures/configs/conflict.yaml")],
    ["plot", "estimate", os.path.join(ROOT, "fixtures/configs/plan_qwen64.yaml")],
])
def test_every_plot_keeps_an_existing_o_file_unless_force(tmp_path, capsys, args):
    """One rule for every plot's -o (checked once, in plot.commands.output_path), the file written
    whole through swapwatch.outputs: refused without --force, replaced with it."""
    out = tmp_path / "mine.png"
    out.write_bytes(b"mine")
    code, _, err = run_cli(args + ["-o", str(out)], capsys)
    assert code == 2 and "already exists; swapwatch does not overwrite it without --force" in one_error_line(err)
    assert out.read_bytes() == b"mine"
    code, stdout, _ = run_cli(args + ["-o", str(out), "--force"], capsys)
    assert code == 0 and stdout.startswith(f"wrote {out}")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mine.png"]          # no temp file left behind


def test_parse_ranks():
    assert str(parse_ranks("0,1,4-6,1")) == "0-1, 4-6"
    assert parse_ranks(None) is None


def test_files_group_into_runs_by_directory(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d in (a, b):
        for r in (0, 1):
            (d / f"worker_{r}.log").write_text("")
    groups = group_paths([str(a / "worker_0.log"), str(b / "worker_0.log"), str(a / "worker_1.log"), str(b)])
    assert groups == [[str(a / "worker_0.log"), str(a / "worker_1.log")], [str(b / "worker_0.log")], [str(b)]]
