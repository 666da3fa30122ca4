"""``swapwatch report``: one self-contained HTML page per run (or several runs side by side).

A renderer only: :mod:`.build` gathers the results the other commands return (verify, explain,
the plots, estimate), :mod:`.html` writes them as a page, :mod:`.verdict` reads verify's verdict in
one function. Nothing in the checks or in the modules rendered here imports this package.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

REPORT_NAME = "report.html"


def make(paths: Sequence[str], config: Optional[str] = None) -> str:
    """The page for ``paths`` (InputError for bad input)."""
    from .build import build
    from .html import render

    return render(build(paths, config))


def write_for_run(run_dir: str, warn: Callable[[str], None]) -> Optional[str]:
    """``swapwatch run``'s last step: ``RUN_DIR/report.html``. Never raises: a report that cannot
    be made is a warning (``warn``) and the run's exit code stays what it was. Returns the file
    name written, or None."""
    import os

    from ..errors import InputError
    from ..commands.outputs import write_text

    try:
        text = make([run_dir])
        write_text(os.path.join(run_dir, REPORT_NAME), text, False)
    except InputError as exc:
        warn(f"no {REPORT_NAME}: {exc.one_line()}")
        return None
    except Exception as exc:  # noqa: BLE001 - a report bug must never change the run's outcome
        warn(f"no {REPORT_NAME}: internal error {type(exc).__name__}: {exc} (a bug in swapwatch; "
             f"`swapwatch report {run_dir}` with SWAPWATCH_DEBUG=1 shows the traceback)")
        return None
    return REPORT_NAME
