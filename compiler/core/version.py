"""Which tilemma made something: the installed version and a digest of the package's own sources.

`tilemma_key()` names the code that compiled a kernel or tuned a configuration, the way Triton's
`triton_key` does: the distribution's version plus a sha256 over every `.py` file of the four
packages (`tilemma`, `tilemma.compiler`, `tilemma.dialects`, `tilemma.passes`), so that an edited
source tree (an editable install) never reuses what an older one wrote. It is worked out once per
process: about 1.5 ms for the ~90 files (0.8 MB), read from the page cache.

The version is read from the `tilemma-*.dist-info` folder name on `sys.path`, as
`importlib.metadata` finds it, without importing `importlib.metadata` (18 ms): a cached compile in a
fresh process should not pay for it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import cache

#: The packages whose sources make up the key (their folders, found without importing them).
PACKAGES = ("tilemma", "tilemma.compiler", "tilemma.dialects", "tilemma.passes")


@cache
def version() -> str:
    """The installed distribution's version (`importlib.metadata.version("tilemma")`)."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if suffix == "dist-info" and stem.startswith("tilemma-") and os.path.isfile(
                    os.path.join(entry or ".", name, "METADATA")):
                return stem.removeprefix("tilemma-")
    try:  # an installation laid out some other way (an egg, a zip): ask the slow way
        from importlib.metadata import PackageNotFoundError, version as metadata_version

        return metadata_version("tilemma")
    except PackageNotFoundError:
        return "0+unknown"


def source_folders() -> list[str]:
    """The folder of each of the four packages, in `PACKAGES` order (their `__init__`s are
    docstrings: importing them costs nothing)."""
    import importlib

    return [next(iter(importlib.import_module(package).__path__)) for package in PACKAGES]


@cache
def source_digest() -> str:
    """sha256 over the path (relative to its package) and contents of every `.py` file."""
    digest = hashlib.sha256()
    for package, folder in zip(PACKAGES, source_folders()):
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    data = f.read()
                relative = os.path.relpath(path, folder).replace(os.sep, "/")
                digest.update(f"{package}/{relative}\0{len(data)}\0".encode())
                digest.update(data)
    return digest.hexdigest()


@cache
def tilemma_key() -> str:
    """`VERSION+SOURCE_DIGEST`: what caches written by tilemma are keyed by."""
    return f"{version()}+{source_digest()}"
