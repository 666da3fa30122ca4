"""A one-line progress bar on stderr for long reads (only when stderr is a terminal).

Why so small: parsing a GB log or a 10,000-rank job takes seconds; a bar tells the user it is
moving (files and bytes done), but must never pollute a pipe or a CI log, so it only draws on a
TTY, only once the work has taken ``DELAY`` seconds (a quick run stays silent, whatever its
size), and redraws at most ten times a second.
"""
from __future__ import annotations

import sys
import time
from typing import Optional

#: Inputs smaller than this never draw (kept for callers that size their input against it).
MIN_BYTES = 1000 * 1000
#: Seconds of work before the first draw.
DELAY = 2.0


class Progress:
    def __init__(self, total: int, label: str = "parsing", stream=None, force: bool = False,
                 files: int = 0, delay: Optional[float] = None, interval: float = 0.1):
        self.stream = stream or sys.stderr
        self.total = max(total, 1)
        self.files = files
        self.label = label
        self.done = 0
        self.files_done = 0
        self._last = 0.0
        self._drawn = 0               # width of the widest line drawn (0: nothing drawn)
        self._start = time.monotonic()
        self.delay = (0.0 if force else DELAY) if delay is None else delay
        self.interval = interval
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = force or (tty and total >= MIN_BYTES)

    def add(self, n: int) -> None:
        """``n`` more bytes read."""
        self.done += n
        self._draw()

    def file_done(self) -> None:
        self.files_done += 1
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self.delay or (now - self._last < self.interval and self.done < self.total):
            return
        self._last = now
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        files = f"{self.files_done:,}/{self.files:,} files, " if self.files > 1 else ""
        text = f"{self.label} [{bar:<30}] {frac * 100:5.1f}% {files}{self.done / 1e6:,.0f}/{self.total / 1e6:,.0f} MB"
        self.stream.write("\r" + text)
        self.stream.flush()
        self._drawn = max(self._drawn, len(text))

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
