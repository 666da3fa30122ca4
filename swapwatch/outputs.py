"""Files the user names with ``-o``: never written over an existing file unless ``--force``.

Why one helper: "nothing the user gave is lost or overwritten" must hold for every command that
writes (``verify -o``, ``plot memory|strategy|estimate -o``), with the same words and the same
exit code (2, one line naming the file). Run directories have their own, stricter rule (an
existing one is never reused: :func:`swapwatch.runner.new_run_dir`).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, BinaryIO, Callable

from .errors import InputError


def refuse_overwrite(path: str, force: bool) -> None:
    """InputError (exit 2) when ``path`` exists and ``force`` is not given."""
    if not force and os.path.lexists(path):
        raise InputError("already exists; swapwatch does not overwrite it without --force "
                         "(or choose another -o name)", file=path)


def write_text(path: str, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` (UTF-8) under the rules of :func:`write_with`."""
    write_with(path, force, lambda fh: fh.write(text.encode("utf-8")))


def write_with(path: str, force: bool, write: Callable[[BinaryIO], Any]) -> None:
    """Have ``write`` fill a temp file beside ``path``, then put it in place: all of it or nothing
    (temp file + rename), never over an existing file without ``force`` (checked again at the last
    moment: ``O_EXCL`` wins a race). Text files and images (``plot -o``) go through here alike."""
    refuse_overwrite(path, force)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".swapwatch-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write here: {exc.strerror or exc}", file=path) from None
    reserved = False
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        if not force:
            _reserve(path)
            reserved = True
        os.replace(tmp, path)
    except FileExistsError:
        os.unlink(tmp)
        refuse_overwrite(path, False)
    except OSError as exc:
        if reserved:                     # our own empty placeholder, not the user's file
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise InputError(f"cannot write the file: {exc.strerror or exc}", file=path) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _reserve(path: str) -> None:
    """Create ``path`` empty with ``O_EXCL``: FileExistsError if someone created it meanwhile."""
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
