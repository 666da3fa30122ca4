"""`swapwatch verify` / `swapwatch rules` on the command line: exit codes, one-line errors."""
import subprocess
import sys

import pytest

from cli_helpers import sw
from swapwatch.cli import main


def test_rules_lists_every_code(capsys):
    code, out, _ = sw("rules", capsys=capsys)
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()]
    for c in ("SW101", "SW102", "SW103", "SW104", "SW105", "SW106", "SW108", "SW202", "SW401", "SW402"):
        assert c in listed
    assert listed == sorted(listed)


def test_rules_explains_one_with_a_yaml_fix(capsys):
    code, out, _ = sw("rules", "sw103", capsys=capsys)
    assert code == 0
    assert out.startswith("SW103 (error, decided from the run's logs): swap backward_prefetch differs")
    assert "backward_prefetch: 10" in out and "Why it matters" in out


def test_rules_unknown_code_is_exit_2_one_line(capsys):
    code, out, err = sw("rules", "SW999", capsys=capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "SW999" in err


@pytest.mark.parametrize("args, needle", [
    (["verify", "/no/such/worker_0.log"], "/no/such/worker_0.log: no such file or directory"),
    (["verify", ".", "--ignore", "SW777"], "SW777"),
    (["verify", ".", "--env", "NOEQUALS"], "KEY=VALUE"),
    (["verify", ".", "--format", "xml"], "xml"),
    (["verify"], "PATH"),
    (["verify", ".", "--ir", "/no/such/ir"], "/no/such/ir: --ir: not a directory"),
])
def test_verify_bad_input_is_one_line_exit_2(args, needle, capsys):
    code, out, err = sw(*args, capsys=capsys)
    assert code == 2
    assert "Traceback" not in err
    # one line says what is wrong (click's own usage errors add its usage hint around it)
    assert [line for line in err.splitlines() if needle in line and "rror" in line]


def test_verify_library_imports_without_mindspore():
    code = ("import sys; import swapwatch.commands.verify, swapwatch.report.verify, swapwatch.checks; "
            "swapwatch.checks.load_rules(); assert 'mindspore' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_bug_is_one_line_and_exit_3_unless_debugging(monkeypatch, capsys):
    """An internal error is not the user's bad input (2) and does not dump a traceback on them."""
    import swapwatch.commands.verify as verify_mod

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(verify_mod, "verify", broken)
    with pytest.raises(SystemExit) as ei:
        main(["verify", "fixtures/logs/msrun_2ranks"])
    err = capsys.readouterr().err
    assert ei.value.code == 3
    assert err.count("\n") == 1 and "internal error: test_verify_cli.py:" in err and "RuntimeError: boom" in err
    assert "Traceback" not in err and "SWAPWATCH_DEBUG=1" in err
    monkeypatch.setenv("SWAPWATCH_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main(["verify", "fixtures/logs/msrun_2ranks"])
