"""What the fuzz tests share: hypothesis settings bounded for `make test`, and running the CLI in-process.

``make test`` runs few examples with a fixed derandomized seed (same examples every run, bounded
time); ``SWAPWATCH_FUZZ_EXAMPLES=N`` runs N random examples per test for a longer hunt.
"""
import contextlib
import io
import os
import sys
import warnings

from hypothesis import HealthCheck, settings

from swapwatch.cli import main

EXTRA = os.environ.get("SWAPWATCH_FUZZ_EXAMPLES")


def fuzz_settings(default_examples: int):
    return settings(max_examples=int(EXTRA) if EXTRA else default_examples, derandomize=not EXTRA,
                    database=None, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def run_cli(argv):
    """``swapwatch ARGV`` in this process: (exit code, stdout, stderr). SWAPWATCH_DEBUG is off so an
    internal error shows as the CLI shows it (exit 3), which is what the property looks for."""
    out, err = io.StringIO(), io.StringIO()
    old = os.environ.pop("SWAPWATCH_DEBUG", None)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _python_warnings():
            try:
                main(list(argv))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        if old is not None:
            os.environ["SWAPWATCH_DEBUG"] = old
    return code, out.getvalue(), err.getvalue()


def assert_clean_exit(code, err, what):
    """The property every input must keep: 0, 1, 2 or 4 (verify: NOT VERIFIED, DESIGN §3.1); never
    an internal error or a traceback; bad input is exactly one line."""
    assert code in (0, 1, 2, 4), f"{what}: exit {code}: {err.strip()[:2000]}"
    assert "Traceback" not in err and "internal error" not in err, f"{what}: {err[:2000]}"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("swapwatch: error: "), f"{what}: {err[:2000]}"


@contextlib.contextmanager
def _python_warnings():
    """Warnings as a user's terminal shows them (Python's default filters, printed to stderr), not
    as pytest collects them: a stray SyntaxWarning is a second line on stderr the user sees."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", quiet)
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: \
            sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
        yield
