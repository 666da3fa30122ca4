"""Files the user names with ``-o``: never written over an existing file unless ``--force``.

Why one helper: "nothing the user gave is lost or overwritten" must hold for every command that
writes (``verify -o``, ``plot memory|strategy|estimate -o``), with the same words and the same
exit code (2, one line naming the file). Run directories have their own, stricter rule (an
existing one is never reused: :func:`swapwatch.runtime.runner.new_run_dir`).
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from typing import Any, BinaryIO, Callable, Optional, Set, Tuple

from ..errors import InputError


#: (device, inode) of every file this process read as input (configs, logs): ``-o`` never names one,
#: even with ``--force`` (a verify report over its own evidence log, a plan over its input YAML).
_INPUTS: Set[Tuple[int, int]] = set()


def note_input(path: str, st: Optional[os.stat_result] = None) -> None:
    """Remember that ``path`` is an input of this command (a file; anything else is ignored).
    ``st``: its ``os.stat`` when the caller has it already (the log discovery's ``lstat`` of a file
    that is no link: a second stat of each of 10,000 rank logs was ~25 ms before the scan starts)."""
    if st is None:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return
    if stat.S_ISREG(st.st_mode):
        _INPUTS.add((st.st_dev, st.st_ino))


def forget_inputs() -> None:
    """A new command starts (the CLI's main; tests that run several in one process)."""
    _INPUTS.clear()


def refuse_overwrite(path: str, force: bool) -> None:
    """InputError (exit 2) when ``path`` exists and ``force`` is not given, or names an input."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        st = None
    if st is not None and (st.st_dev, st.st_ino) in _INPUTS:
        raise InputError("is one of this command's inputs; swapwatch never writes over what it reads, "
                         "even with --force (choose another -o name)", file=path)
    if not force and os.path.lexists(path):
        raise InputError("already exists; swapwatch does not overwrite it without --force "
                         "(or choose another -o name)", file=path)


def _mode_for(path: str) -> int:
    """The mode the written file gets: an existing file's (``--force`` keeps who may read it), else
    what the umask allows for a new file (0666 & ~umask), as any shell redirection would create it."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except (OSError, ValueError):
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


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
        os.fchmod(fd, _mode_for(path))     # mkstemp makes 0600 whatever the umask
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
