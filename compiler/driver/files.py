"""Writing an output file so that a failure never leaves it empty, partial or destroyed.

The data goes to a temporary file beside the target, flushed to disk, then renamed over it:
an error before the rename (a bad input, a full disk) leaves any existing file as it was, and
`-o` may name the input itself, which is read before anything is written.
"""

from __future__ import annotations

import io
import os
import tempfile


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
