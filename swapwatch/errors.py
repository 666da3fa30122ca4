"""Errors that mean "the user's input is wrong": each renders as one line and exits 2.

Every command promises one clear line on stderr saying what is wrong and where (file:line and the
YAML key path when there is one) and exit code 2, never a traceback. Library code raises
:class:`InputError` with the location it knows; the CLI prints :meth:`InputError.one_line`.
"""
from __future__ import annotations

from typing import Optional


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
        return " ".join(text.split("\n"))

    def __str__(self) -> str:
        return self.one_line()


class ConfigError(InputError):
    """A training YAML that MindFormers would reject, or that swapwatch cannot read."""
