"""Errors that mean "the user's input is wrong": each renders as one line and exits 2.

Every command promises one clear line on stderr saying what is wrong and where (file:line and the
YAML key path when there is one) and exit code 2, never a traceback. Library code raises
:class:`InputError` with the location it knows; the CLI prints :meth:`InputError.one_line`.
"""
from __future__ import annotations

import re
from typing import Optional

#: C0 and C1 control characters but tab: from a YAML key or a log line they would reach the
#: terminal raw (ESC sequences set the title or clear the screen, CR overwrites the error line).
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab shown as ``\\xNN`` (one visible line)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class InputError(Exception):
    """Bad input from the user: a file, a YAML value, a log, a command-line value."""

    def __init__(self, message: str, file: Optional[str] = None, line: Optional[int] = None,
                 key: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.key = key

    def one_line(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}" if self.line else str(self.file)
        if self.key:
            where = f"{where}: {self.key}" if where else self.key
        text = f"{where}: {self.message}" if where else self.message
        return escape_controls(" ".join(text.split("\n")))

    def __str__(self) -> str:
        return self.one_line()


class ConfigError(InputError):
    """A training YAML that MindFormers would reject, or that swapwatch cannot read."""


class NotModelled(InputError):
    """A code path or a model family that a command's sizer (or planner) does not model.

    Raised where the limit is known (``codepaths``: a path; ``memory/tensor_table``: a family) and said
    once, here, in one line naming the command: ``<where>: <command> does not model <what> yet (<hint>)``.
    ``codepaths.CodePath`` puts the command's name on it (:meth:`for_command`), so ``estimate``, ``plot
    estimate``, ``report``, ``diff``, ``plan`` and ``tune`` say the same line (exit 2; a note in ``report``
    and ``diff``)."""

    def __init__(self, what: str, hint: str = "", file: Optional[str] = None, line: Optional[int] = None,
                 key: Optional[str] = None, command: Optional[str] = None):
        self.what, self.hint, self.command = what, hint, command
        super().__init__(self._text(), file=file, line=line, key=key)

    def _text(self) -> str:
        return (f"{self.command or 'swapwatch'} does not model {self.what} yet"
                + (f" ({self.hint})" if self.hint else ""))

    def for_command(self, command: str) -> "NotModelled":
        """The same refusal, said by ``command`` (the first command to say it keeps it)."""
        if self.command is None:
            self.command = command
            self.message = self._text()
            self.args = (self.message,)
        return self
