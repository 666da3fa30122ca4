"""One candidate line -> its events: the dispatch over every family parser.

The scanner finds candidate lines by literal search; this decides what each one is. The families
are tried by cheap substring tests first, so a false candidate costs a few ``in`` checks. Which
families may come from which logger is part of the grammar: LayerSetting and step lines are
MindFormers records (or raw text in logs that have no MindFormers prefix at all: docs excerpts,
hook-only runs), memory/offload lines are MindSpore records or raw continuation lines, exit lines
are msrun's, tracebacks and SWAPWATCH lines are raw or inside any record.
"""
from __future__ import annotations

import re

from typing import Callable, Dict, Iterable, List, Optional, Union

from . import layersetting, memory, msrun, pynative, steps, swapwatch_lines, tracebacks
from .grammar import (ASCEND_NEEDLE, CPU_NEEDLE, EXIT_NEEDLE, OFFLOAD_NEEDLE, PREFIXES, SWAPWATCH_NEEDLE,
                      TRACEBACK_NEEDLE)
from .model import Event, NoticeEvent, _new_copy
from .prefix import Line, clean, collapse, split

_MF_FORMATS = ("mindformers", "mindformers_trimmed", "mindformers_file", "level_only")
_SW = SWAPWATCH_NEEDLE.decode()[:-1]      # 'SWAPWATCH {'
_TB = TRACEBACK_NEEDLE.decode()
_ASC = ASCEND_NEEDLE.decode()
_CPU = CPU_NEEDLE.decode()
_EXIT = EXIT_NEEDLE.decode()
_OFF = OFFLOAD_NEEDLE.decode()

Follow = Callable[[], Iterable[tuple]]

class Entry:
    """One remembered line parse: its events as prototypes (rank None, source ``""``, never handed
    out to be changed) and a serial number unique in this process. The serial outlives the bounded
    cache: a rank's template (:mod:`swapwatch.parsers.templates`) names its lines' entries by
    serial, so an entry that was evicted and parsed again is a new entry, never a reused number."""

    __slots__ = ("serial", "events", "tails")

    def __init__(self, serial: int, events: List[Event]):
        self.serial = serial
        self.events = events
        self.tails: Optional[List[str]] = None     # the events' JSONL after rank and source (events_output)


#: The head of a MindSpore C++ record up to its timestamp: grammar.PREFIXES' ``mindspore_cpp``
#: row cut before its ``[file:line]`` (one grammar, not a second copy).
def _cpp_head() -> "re.Pattern[str]":
    rx = next(rx for name, rx, _ in PREFIXES if name == "mindspore_cpp")
    head, cut, _ = rx.partition(r" \[(?P<file>")
    if not cut or "(?P<ts>" not in head:    # the grammar changed: this key would be wrong
        raise AssertionError("classify: the mindspore_cpp prefix no longer has ts then [file:line]")
    return re.compile(head)


_CPP_HEAD = _cpp_head()
#: Parsed lines by their text after the timestamp (see :func:`classify_proto`): MindFormers
#: records of logs without / with MindFormers stdout records (``prefixed``), MindSpore C++ records.
_CACHE: List[Dict[str, Entry]] = [{}, {}, {}]
_CPP = 2
CACHE_MAX = 8192
_SERIAL = [0]
#: Kinds whose values differ on every line and rank (step counters, memory figures): never
#: remembered, so 10,000 ranks' step and memory lines do not evict the strategy lines every few
#: hundred ranks (each would be a miss anyway).
_RANK_SPECIFIC = ("step", "memory")
#: A needle that rules a line out of the cache, if in a remembered line's text, would have to
#: start in the part in front of the key (the key part has none): the front plus this is checked.
_FRONT_SLACK = max(len(_SW), len(_TB), len(_ASC)) - 1


def _cpp_head_bytes() -> "re.Pattern[bytes]":
    """:data:`_CPP_HEAD` for the scanner, which hands over a C++ record line that
    :func:`classify_proto` already saw by its bytes after this head (``Scan.memo_cpp``: the offload
    warnings, 24 of a 100 KB rank log's ~135 candidate lines, each decoded and matched as text
    before). Stricter than the text's head, so that where it matches, the text's head matches the
    same characters and the key is the same: ``proc`` printable ASCII without spaces (then the head
    is ASCII, holds no ESC or CR that ``clean`` would remove, and no needle that keeps a line out of
    the cache can start in it: each has a space after letters) and no non-ASCII byte after the
    timestamp (a non-ASCII digit would extend the text's). No ``^``: ``match(buf, pos)`` anchors."""
    text = _CPP_HEAD.pattern
    strict = text.replace("(?P<proc>[^)]*)", "(?P<proc>[!-(*-~]*)").lstrip("^") + r"(?![\x80-\xff])"
    letters_then_space = all(" " in n and n.split(" ")[0].isalpha() for n in (_SW, _TB, _ASC))
    if "(?P<proc>[!-(*-~]*)" not in strict or not letters_then_space:
        raise AssertionError("classify: the mindspore_cpp head or the cache's needles changed")
    return re.compile(strict.encode("ascii"))


CPP_HEAD_BYTES = _cpp_head_bytes()


def cached_entries() -> List[Entry]:
    """The entries the cache holds now (for tests and benchmarks)."""
    return [e for table in _CACHE for e in table.values()]


def classify_cached(text: str, rank: Optional[int], source: str, follow: Optional[Follow] = None,
                    prefixed: bool = False) -> List[Event]:
    """:func:`classify` with the parse of MindFormers records remembered across lines and files
    (:func:`classify_proto`): a remembered line gives shallow copies of its prototypes with this
    line's rank and source."""
    hit = classify_proto(text, follow, prefixed)
    if hit is None:
        return classify(text, rank, source, follow, prefixed)
    if hit.__class__ is not Entry:
        for e in hit:                               # type: ignore[union-attr]
            e.rank = rank
            e.source = source
        return hit                                  # type: ignore[return-value]
    return [_new_copy(e, rank, source) for e in hit.events]      # type: ignore[union-attr]


def classify_proto(text: str, follow: Optional[Follow] = None, prefixed: bool = False
                   ) -> Union[Entry, List[Event], None]:
    """The events of a line whose events do not depend on its rank, source or the lines after it:
    its cache :class:`Entry` (shared prototypes: do not change them), or a fresh list with rank
    None and source ``""`` when the line is of that sort but not remembered (step and memory
    lines); None for the other lines (classify them with :func:`classify`).

    Why: every rank of a job logs the same strategy block (the same ``Set ...``, ``Formative`` and
    ``initial ... from dict`` records), and only the timestamp in front differs, so parsing the
    message once per job instead of once per rank removes most of the per-rank cost at 1,000+
    ranks. Only records that start with the fixed-width ``YYYY-MM-DD HH:MM:SS,mmm`` timestamp are
    remembered (the event never carries the timestamp), and MindSpore C++ records by their message
    (the offload warnings repeat on every rank), never the families whose events depend
    on the lines after them (tracebacks, Ascend blocks) or on their own rank (SWAPWATCH). The table
    is bounded (cleared when full), so memory does not grow with the input.
    """
    if len(text) < 30:
        return None
    if text[4] == "-" and text[19] == ",":
        end = 23
        table = _CACHE[1 if prefixed else 0]
    elif text[0] == "[":
        # A MindSpore C++ record (the offload warnings, one per marked node and rank): its events
        # depend on the message alone (no MindFormers family is read from it), so the text after
        # the pid, thread and timestamp (which differ per rank) is the key. Given that head, the
        # rest alone decides whether the line is such a record and what its message is (no other
        # prefix of grammar.PREFIXES can match it), so only lines that are records are remembered.
        head = _CPP_HEAD.match(text)
        if head is None:
            return None
        end = head.end()
        if "\x1b" in text[:end] or "\r" in text[:end]:       # clean() would change the head
            return None
        table = _CACHE[_CPP]
    else:
        return None
    key = text[end:]
    hit = table.get(key)
    if hit is not None:
        front = text[:end + _FRONT_SLACK]
        if _SW in front or _TB in front or _ASC in front:
            return None
        return hit
    if _SW in text or _TB in text or _ASC in text:
        return None
    if table is _CACHE[_CPP]:
        line = split(clean(text))
        if line.fmt != "mindspore_cpp":
            return None
        events = _classify_line(line, None, "", follow, prefixed)
    else:
        events = classify(text, None, "", follow, prefixed)
    for e in events:
        if e.kind in _RANK_SPECIFIC:
            return events
    if sum(map(len, _CACHE)) >= CACHE_MAX:
        for t in _CACHE:
            t.clear()
    _SERIAL[0] += 1
    entry = table[key] = Entry(_SERIAL[0], events)
    return entry


def classify(text: str, rank: Optional[int], source: str, follow: Optional[Follow] = None,
             prefixed: bool = False) -> List[Event]:
    """Events of one raw line (decoded). ``prefixed``: the log has MindFormers stdout records, so
    MindFormers families are only read from such records (a raw ``Set ...`` line there is a print or
    a quoted config, not MindFormers). ``follow()`` yields (source, cleaned text) of the next lines."""
    return _classify_line(split(clean(text)), rank, source, follow, prefixed)


def _classify_line(line: Line, rank: Optional[int], source: str, follow: Optional[Follow],
                   prefixed: bool) -> List[Event]:
    msg = line.msg
    if _SW in msg:
        return swapwatch_lines.parse(msg, rank, source)
    if msg.startswith(_TB):
        return tracebacks.parse(rank, source, follow() if follow else ())
    out: List[Event] = []
    fmt = line.fmt
    mf_ok = fmt in _MF_FORMATS or (fmt == "raw" and not prefixed)
    if mf_ok:
        cmsg = collapse(msg)
        ev = steps.parse(cmsg, rank, source) if "Epoch:[" in cmsg else layersetting.parse(cmsg, rank, source)
        if ev is None:
            ev = pynative.parse(cmsg, rank, source, line.level)     # PyNative (r2.x) wordings
        if ev is not None:
            return [ev]
        if line.level in ("ERROR", "CRITICAL"):
            check = layersetting.config_error(cmsg)
            if check:
                return [NoticeEvent(rank, source, what="config_error", data={"check": check, "message": cmsg})]
    if _ASC in msg:
        out.extend(memory.parse_ascend(msg, rank, source, follow() if follow else ()))
    if _CPU in msg:
        out.extend(memory.parse_cpu(msg, rank, source))
    if _EXIT in msg:
        out.extend(msrun.parse_exit(msg, rank, source))
    if _OFF in msg:
        out.extend(msrun.parse_offload(msg, rank, source))
    return out
