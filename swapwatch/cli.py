"""The ``swapwatch`` command line. Thin: parse arguments, call the library, render, pick the exit code.

Each command lives in its own section below; the logic lives in the library modules. Bad input
anywhere raises :class:`swapwatch.errors.InputError`, which :func:`main` turns into one line on
stderr and exit code 2 (never a traceback).
"""
from __future__ import annotations

import sys

import click

from . import __version__
from .errors import InputError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="swapwatch")
def cli() -> None:
    """Observe and verify recompute / activation-swap strategies of MindSpore and MindFormers training."""


def main(argv=None) -> None:
    """Console entry point: run the click group; InputError -> one line, exit 2."""
    try:
        rv = cli.main(args=argv, prog_name="swapwatch", standalone_mode=False)
    except InputError as exc:
        click.echo(f"swapwatch: error: {exc.one_line()}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("swapwatch: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


# ---- explain -------------------------------------------------------------------------------

# ---- verify / rules ------------------------------------------------------------------------

# ---- events --------------------------------------------------------------------------------

# ---- run -----------------------------------------------------------------------------------

# ---- plot ----------------------------------------------------------------------------------


if __name__ == "__main__":
    main()
