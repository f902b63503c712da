"""Run `tilemma` / `tilemma-opt` in this process, as their entry points do.

Why: a subprocess pays about 1.5 s of interpreter start and imports before any work, and the CLI
tests start ~100 of them. Tests about a command's behaviour (output, exit status, messages) run
its `main` here with argv and fresh stdin/stdout/stderr; the few tests about the process itself
(a closed stdout, pipes, the installed scripts) keep real subprocesses. The lit suite runs its
RUN lines' tools the same way (`run_bytes`, from tests/lit_inprocess.py)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable, Sequence


def run_main(prog: str, main: Callable[[Sequence[str]], int], args: Sequence[str],
             stdin: str | None = None) -> subprocess.CompletedProcess:
    """`main(args)` with stdin holding `stdin` (empty when None): a CompletedProcess with the
    exit status (an argparse error's SystemExit included) and the decoded outputs."""
    proc = run_bytes(prog, main, args, (stdin or "").encode())
    text = lambda data: data.decode("utf-8", "replace").replace("\r\n", "\n")
    return subprocess.CompletedProcess(proc.args, proc.returncode, text(proc.stdout), text(proc.stderr))


def run_bytes(prog: str, main: Callable[[Sequence[str]], int | None], args: Sequence[str],
              stdin: bytes = b"", merge_stderr: bool = False,
              unbuffered: bool = False) -> subprocess.CompletedProcess:
    """`main(args)` as the process `prog ARGS` would run it: `sys.argv`, stdin holding `stdin`,
    stdout and stderr buffered as Python buffers a pipe (so `2>&1`, `merge_stderr`, interleaves
    them as a process does; `unbuffered`: as PYTHONUNBUFFERED does), and the exit status of
    `sys.exit(main(args))`, a SystemExit included. Outputs as bytes."""
    out, err = bytearray(), bytearray()
    streams = {"stdin": io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"),
               "stdout": _pipe(out, unbuffered),
               "stderr": _pipe(out if merge_stderr else err, unbuffered, stderr=True)}
    with contextlib.ExitStack() as stack:
        stack.enter_context(_swapped("argv", [prog, *args]))
        for name, stream in streams.items():
            stack.enter_context(_swapped(name, stream))
        try:
            status = _exit_status(main(list(args)))
        except SystemExit as e:
            status = _exit_status(e.code)
        for name in ("stdout", "stderr"):  # the interpreter's flush at exit
            if not streams[name].closed:
                streams[name].flush()
    return subprocess.CompletedProcess([prog, *args], status, bytes(out), bytes(err))


def _exit_status(code) -> int:
    """The status `sys.exit(code)` ends a process with (any other object is printed: 1)."""
    if code is None or isinstance(code, int):
        return (code or 0) % 256
    print(code, file=sys.stderr)
    return 1


class _Sink(io.RawIOBase):
    """The write end of a pipe: bytes appended to `data` (one for stdout and stderr under 2>&1)."""

    def __init__(self, data: bytearray):
        self.data = data

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.data += b
        return len(b)


def _pipe(data: bytearray, unbuffered: bool, stderr: bool = False) -> io.TextIOWrapper:
    """A standard stream on a pipe as Python opens one: text over a 4 KiB (a pipe's block) buffer,
    stderr line-buffered."""
    return io.TextIOWrapper(io.BufferedWriter(_Sink(data), 4096), encoding="utf-8",
                            errors="backslashreplace" if stderr else "strict",
                            line_buffering=stderr, write_through=unbuffered)


@contextlib.contextmanager
def _swapped(name: str, value):
    old = getattr(sys, name)
    setattr(sys, name, value)
    try:
        yield
    finally:
        setattr(sys, name, old)
