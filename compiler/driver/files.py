"""Reading an input and writing an output file, safely against what a user may hand a tool.

An output goes to a temporary file beside the target, flushed to disk, then renamed over it:
an error before the rename (a bad input, a full disk) leaves any existing file as it was, and
`-o` may name the input itself, which is read before anything is written.

An input is read whole, as UTF-8, up to `MAX_INPUT_BYTES` (`/dev/zero` or an endless pipe is
refused once past it instead of filling the memory); a closed standard input, a binary file and
an oversized one are each a clean error.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from typing import BinaryIO

#: The largest input `tilemma` and `tilemma-opt` read, and `tilemma.compile` takes as text: a
#: kernel's tile IR is a few KiB, so far past this the input can only exhaust the memory.
MAX_INPUT_BYTES = 64 << 20
#: Said of an empty standard input: in a pipe, the command before usually failed (its own error
#: is above).
EMPTY_STDIN = " (if it comes through a pipe: did the command before it fail?)"


def too_large(name: str) -> ValueError:
    """The error for an input past MAX_INPUT_BYTES (read from a file, or handed over as text)."""
    return ValueError(f"{name}: input larger than {MAX_INPUT_BYTES >> 20} MiB; tilemma reads tile IR, a few KiB "
                      "per kernel")


def tune_cache_path(path: str, source: str) -> str:
    """`path` (named by `source`: an option or $TILEMMA_TUNE_CACHE), which must exist unless it
    is '' (no tuning cache): a named cache that does not exist would be ignored without a word."""
    if path and not os.path.isfile(path):
        raise ValueError(f"{source} {path}: no such file (`tilemma tune --cache {path}` writes it, on a GPU)")
    return path


def read_input(path: str) -> tuple[str, str]:
    """The text of the file `path` ('-': standard input) and the name diagnostics call it by."""
    if path == "-":
        if sys.stdin is None:  # `tilemma compile - <&-`
            raise ValueError("cannot read '-': standard input is closed")
        return decode_input(read_bounded(sys.stdin.buffer, "<stdin>"), "<stdin>"), "<stdin>"
    with open(path, "rb") as f:
        return decode_input(read_bounded(f, path), path), path


def read_bounded(stream: BinaryIO, name: str) -> bytes:
    """All of `stream`, refused (ValueError) once past MAX_INPUT_BYTES, before reading a file
    that is larger."""
    try:
        size = os.fstat(stream.fileno()).st_size
    except (OSError, ValueError, io.UnsupportedOperation):
        size = 0
    if size <= MAX_INPUT_BYTES:
        data = stream.read(MAX_INPUT_BYTES + 1)
        size = len(data)
    if size > MAX_INPUT_BYTES:
        raise too_large(name)
    return data


def decode_input(data: bytes, name: str) -> str:
    """UTF-8 text with universal newlines (as a file opened as text reads); bytes that are not
    UTF-8 are a located error at the first of them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        from xdsl.utils.lexer import Input, Span

        from tilemma.compiler.driver.diagnostics import LocatedParseError

        at = len(data[: e.start].decode("utf-8"))
        shown = data.decode("utf-8", "replace")
        raise LocatedParseError(Span(at, at + 1, Input(shown, name)),
                                f"byte 0x{data[e.start]:02x} is not UTF-8 text: the input must be MLIR text, "
                                "not a binary file") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def write_atomically(path: str, data: str | bytes) -> None:
    """Replace `path` with `data` in one rename (keeping an existing file's permissions)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class PendingText(io.StringIO):
    """A text stream whose contents outlive `close()`: what a tool writes to its `-o` file,
    kept until the run has succeeded (then `write_atomically`)."""

    def close(self) -> None:  # the contents stay readable; nothing to release
        pass
