"""A one-line progress bar on stderr for big inputs (only when stderr is a terminal).

Why so small: parsing a GB log takes seconds; a bar tells the user it is moving, but must never
pollute a pipe or a CI log, so it only draws on a TTY, only above ``MIN_BYTES``, and redraws at
most ten times a second.
"""
from __future__ import annotations

import sys
import time

MIN_BYTES = 100 * 1000 * 1000


class Progress:
    def __init__(self, total: int, label: str = "parsing", stream=None, force: bool = False):
        self.stream = stream or sys.stderr
        self.total = max(total, 1)
        self.label = label
        self.done = 0
        self._last = 0.0
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = force or (tty and total >= MIN_BYTES)

    def add(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        self.stream.write(f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}% {self.done / 1e6:,.0f}/"
                          f"{self.total / 1e6:,.0f} MB")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 78 + "\r")
            self.stream.flush()
