"""Run `tilemma` / `tilemma-opt` in this process, as their entry points do.

Why: a subprocess pays about 1.5 s of interpreter start and imports before any work, and the CLI
tests start ~100 of them. Tests about a command's behaviour (output, exit status, messages) run
its `main` here with argv and fresh stdin/stdout/stderr; the few tests about the process itself
(a closed stdout, pipes, the installed scripts) keep real subprocesses."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable, Sequence


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=None, write_through=True)


def run_main(prog: str, main: Callable[[Sequence[str]], int], args: Sequence[str],
             stdin: str | None = None) -> subprocess.CompletedProcess:
    """`main(args)` with stdin holding `stdin` (empty when None): a CompletedProcess with the
    exit status (an argparse error's SystemExit included) and the decoded outputs."""
    fin = _stream((stdin or "").encode())
    out, err = _stream(), _stream()
    with contextlib.ExitStack() as stack:
        for name, stream in (("stdin", fin), ("stdout", out), ("stderr", err)):
            stack.enter_context(_swapped(name, stream))
        try:
            status = main(list(args))
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    text = lambda s: s.buffer.getvalue().decode("utf-8", "replace").replace("\r\n", "\n")
    return subprocess.CompletedProcess([prog, *args], status or 0, text(out), text(err))


@contextlib.contextmanager
def _swapped(name: str, stream):
    old = getattr(sys, name)
    setattr(sys, name, stream)
    try:
        yield
    finally:
        setattr(sys, name, old)
