"""Errors that mean "the user's input is wrong": each renders as one line and exits 2.

Every command promises one clear line on stderr saying what is wrong and where (file:line and the
YAML key path when there is one) and exit code 2, never a traceback. Library code raises
:class:`InputError` with the location it knows; the CLI prints :meth:`InputError.one_line`.
"""
from __future__ import annotations

import re
from typing import Optional

#: Every character past C0 that is not text to show: DEL and the C1 controls, and Unicode's format
#: characters (category Cf: the bidi embeddings, overrides and isolates U+202A-202E / U+2066-2069,
#: zero-width U+200B-200F and U+2060-2064, the BOM U+FEFF, the tag characters U+E0000-E007F ...)
#: and line / paragraph separators (Zl, Zp). Printed raw, a key ``x\u202egpj.exe`` shows as
#: ``xexe.jpg`` and a zero-width space makes two different keys look the same ("Trojan source").
#: tests/test_text.py checks the list against ``unicodedata`` (Cc, Cf, Zl, Zp).
UNSHOWN = ("\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
           "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
           "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
#: Those and the C0 controls but tab: from a YAML key or a log line they would reach the terminal
#: raw (ESC sequences set the title or clear the screen, CR overwrites the error line).
_CONTROLS = re.compile(f"[\x00-\x08\x0a-\x1f{UNSHOWN}]")


def escaped_char(c: str) -> str:
    """How an unshown character is written: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def escape_controls(text: str) -> str:
    """``text`` with every control and invisible format character but tab written as its escape
    (one visible line that shows every character it holds)."""
    return _CONTROLS.sub(lambda m: escaped_char(m.group()), text)


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
