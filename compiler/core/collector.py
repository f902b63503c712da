"""Python's cyclic garbage collector paused around work that allocates a great deal and frees
almost nothing until it ends: compiling a kernel (xDSL ops, attributes, rewriter bookkeeping) and
decoding one for the emulator. The collector's passes over those young objects find nothing,
and its full passes also walk everything else the process holds (much, in a test run or a larger
compiler), about a tenth of a compile; what the work leaves behind is collected once after."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
