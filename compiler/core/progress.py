"""A progress counter for long work (the ptxas audit, big emulator runs), on stderr.

Only when stderr is a terminal: logs, pipes and CI output get nothing. The line is redrawn in
place at most every `INTERVAL` seconds (the first time only once that much has passed, so quick
work prints nothing) and erased when the work ends, leaving the terminal as it was.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO

INTERVAL = 0.25  # seconds between redraws


class Progress:
    """`with Progress("emulator", total, "CTAs") as p: ... p.advance(n)`; thread safe."""

    def __init__(self, label: str, total: int, unit: str = "", stream: IO[str] | None = None):
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.enabled = self.stream.isatty()
        except (AttributeError, ValueError):  # no isatty, or closed
            self.enabled = False
        self.done = 0
        self.drawn = False
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            if self.enabled and now - self._last >= INTERVAL:
                self._last = now
                unit = f" {self.unit}" if self.unit else ""
                self.stream.write(f"\r\x1b[K{self.label}: {self.done}/{self.total}{unit}")
                self.stream.flush()
                self.drawn = True

    def close(self) -> None:
        with self._lock:
            if self.drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self.drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
