"""Line prefixes: turn one raw log line into (format, level, source file, message).

Why a module of its own: one worker log interleaves MindFormers stdout records, MindSpore C++
(glog) and Python logger records, and raw prints/tracebacks (docs/mindspore-facts.md §2, §4). Every family
parser wants only the message, cleaned the same way: CR and ANSI colour codes removed, and — for
matching — whitespace runs collapsed (the swap messages embed runs of 27-35 spaces). The prefix
grammars themselves are rows of :data:`swapwatch.parsers.grammar.PREFIXES`.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Optional

from . import grammar

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PREFIXES = [(name, re.compile(rx)) for name, rx, _ in grammar.PREFIXES]
# Cheap gates so a raw line does not pay for every prefix regex.
_GATE = {
    "mindformers": lambda s: len(s) > 24 and s[4] == "-" and s[0].isdigit(),
    "mindformers_trimmed": lambda s: len(s) > 24 and s[4] == "-" and s[0].isdigit(),
    "mindformers_file": lambda s: s.startswith("["),
    "mindspore_cpp": lambda s: s.startswith("["),
    "mindspore_py": lambda s: s.startswith("["),
    "level_only": lambda s: " - " in s[:40],
}


class Line(NamedTuple):
    fmt: str              # a PREFIXES name, or "raw"
    level: Optional[str]  # INFO / WARNING / ...; None for raw lines
    file: Optional[str]   # the logging source file when the prefix names one
    msg: str              # the message, CR/ANSI stripped, not collapsed


def clean(text: str) -> str:
    """Strip the line ending, CRs and ANSI escape sequences (colour codes from a TTY-formatted log).

    What a terminal shows is kept: text before a CR inside the line (a progress bar's last frame,
    then the record glued to it) was overwritten, and text before a NUL (a NUL hole left by a
    crash, the tail of an interleaved UTF-16 line) is no record: the line starts after the last CR
    or NUL in front of its first ``] - `` (the scanner finds the record there too), and the other
    CRs and NULs go."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.rstrip("\r\n")
    if "\r" in text or "\x00" in text:
        sep = text.find("] - ")
        front = text if sep < 0 else text[:sep]
        cut = max(front.rfind("\r"), front.rfind("\x00"))
        text = text[cut + 1:].replace("\r", "").replace("\x00", "")
    return text


def collapse(msg: str) -> str:
    """Whitespace runs -> one space, ends stripped: the form every message regex is written for."""
    return " ".join(msg.split())


def split(text: str) -> Line:
    """Split a cleaned line into its prefix parts; unknown layouts are ``raw`` with the whole line."""
    for name, rx in _PREFIXES:
        if not _GATE[name](text):
            continue
        m = rx.match(text)
        if m:
            d = m.groupdict()
            msg = d["msg"]
            if msg.startswith("[MS_RUNTIME_PROF]"):
                msg = msg[len("[MS_RUNTIME_PROF]"):]
            return Line(name, d.get("level"), d.get("file"), msg)
    msg = text[len("[MS_RUNTIME_PROF]"):] if text.startswith("[MS_RUNTIME_PROF]") else text
    return Line("raw", None, None, msg)
