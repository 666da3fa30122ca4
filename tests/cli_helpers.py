"""The command line run in-process, as the tests that check exit codes and one-line errors call it
(one copy for every such test file)."""
import os

import pytest

from swapwatch.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fx(*parts: str) -> str:
    """A path under ``fixtures/``, absolute."""
    return os.path.join(ROOT, "fixtures", *parts)


def sw(*args, capsys):
    """``swapwatch ARGS`` through :func:`swapwatch.cli.main`: ``(exit code, stdout, stderr)``."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err
