"""The compile cache on disk: what `tilemma.compile` and `tilemma compile` produced, kept across
processes, so that the same input with the same options is compiled once.

Where: `$TILEMMA_CACHE_DIR`, else `$XDG_CACHE_HOME/tilemma`, else `~/.cache/tilemma`;
`TILEMMA_CACHE_DIR=` (set and empty) turns the cache off, as `tilemma.compile(..., cache=False)`
does for one call.

Keys: sha256 over the tilemma that wrote the entry (`version.tilemma_key`: version and a digest of
its sources), the kind of entry, and what determines it: for a compile the input text (a ModuleOp's
printed form), the target and every option as given (a tuning cache by its path and a digest of its
contents); for a cubin the PTX, the target and the assembler with its version.

Entries are one file each, `KEY.KIND`: a magic line, a JSON header (format, key, kind, size and
sha256 of the payload, when it was written, what it holds), then the payload. Each is written to a
temporary file and renamed into place (`files.write_atomically`), so a reader sees a whole entry or
none, and processes compiling the same input at once at worst both compile it. A reader trusts
nothing: a file whose magic, format, key, kind, size or digest does not match, or whose payload does
not have the expected types, is a miss (the compile then writes it anew). There is no eviction:
`tilemma cache list` shows what is there, `tilemma cache clear` empties it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from tilemma.compiler.core.version import tilemma_key

#: Bumped whenever the layout of an entry or of a payload changes.
FORMAT = 1
MAGIC = b"tilemma-cache\n"
KINDS = ("compile", "cubin")


def directory() -> str | None:
    """The cache folder, or None when the cache is off (`TILEMMA_CACHE_DIR` set and empty)."""
    explicit = os.environ.get("TILEMMA_CACHE_DIR")
    if explicit is not None:
        return os.path.abspath(os.path.expanduser(explicit)) if explicit.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tilemma")


def make_key(kind: str, **parts: Any) -> str:
    """sha256 (hex) of the entry's kind, the tilemma that writes it and `parts` (JSON-able)."""
    data = json.dumps({"format": FORMAT, "kind": kind, "tilemma": tilemma_key(), **parts},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def _path(folder: str, key: str, kind: str) -> str:
    return os.path.join(folder, f"{key}.{kind}")


def load(kind: str, key: str) -> bytes | None:
    """The payload stored under `key`, or None: no cache, no entry, or one that is not whole or
    not this key's."""
    folder = directory()
    if folder is None:
        return None
    try:
        with open(_path(folder, key, kind), "rb") as f:
            data = f.read()
    except OSError:
        return None
    header, payload = _split(data)
    if header is None or header.get("format") != FORMAT or header.get("key") != key or header.get("kind") != kind:
        return None
    if header.get("size") != len(payload) or header.get("sha256") != hashlib.sha256(payload).hexdigest():
        return None
    return payload


def _split(data: bytes) -> tuple[dict | None, bytes]:
    """An entry's header and payload; (None, b"") when it does not start as an entry does."""
    if not data.startswith(MAGIC):
        return None, b""
    line, newline, payload = data[len(MAGIC):].partition(b"\n")
    if not newline:
        return None, b""
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        return None, b""
    return (header, payload) if isinstance(header, dict) else (None, b"")


_warned: set[str] = set()


def store(kind: str, key: str, payload: bytes, what: str) -> None:
    """Write an entry (atomically). A cache that cannot be written is a note on stderr, once per
    folder and process, never an error: the compile has succeeded."""
    folder = directory()
    if folder is None:
        return
    from tilemma.compiler.driver.files import write_atomically

    what = what if len(what) <= 300 else what[:297] + "..."  # the header stays one short line
    header = {"format": FORMAT, "key": key, "kind": kind, "size": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest(), "written": time.time(), "what": what}
    try:
        os.makedirs(folder, exist_ok=True)
        write_atomically(_path(folder, key, kind), MAGIC + json.dumps(header).encode() + b"\n" + payload)
    except OSError as e:
        if folder not in _warned:
            _warned.add(folder)
            print(f"tilemma: note: compile cache {folder} not written ({e.strerror or e}); "
                  "set TILEMMA_CACHE_DIR to a writable folder, or empty to turn the cache off", file=sys.stderr)


@dataclass(frozen=True)
class Entry:
    """One file of the cache as `tilemma cache list` shows it."""

    path: str
    kind: str
    size: int  # bytes on disk
    age: float  # seconds since it was written
    what: str  # the kernels (and target) it holds; "" when unreadable
    valid: bool  # its header is whole and this format's


def entries() -> list[Entry]:
    """The cache's entries, newest first (temporary files of writes under way left out)."""
    folder = directory()
    if folder is None or not os.path.isdir(folder):
        return []
    found, now = [], time.time()
    for name in os.listdir(folder):
        stem, _, kind = name.rpartition(".")
        path = os.path.join(folder, name)
        if name.startswith(".") or kind not in KINDS or not os.path.isfile(path):
            continue
        try:
            st = os.stat(path)
            with open(path, "rb") as f:
                header, _ = _split(f.read(len(MAGIC) + 4096))
        except OSError:
            continue
        valid = header is not None and header.get("format") == FORMAT and header.get("key") == stem
        what = header.get("what") if valid and isinstance(header.get("what"), str) else ""
        found.append(Entry(path, kind, st.st_size, max(0.0, now - st.st_mtime), what, valid))
    return sorted(found, key=lambda e: e.age)


def clear() -> tuple[int, int]:
    """Remove every entry and left-over temporary file: (files removed, bytes freed)."""
    folder = directory()
    if folder is None or not os.path.isdir(folder):
        return 0, 0
    count = freed = 0
    for name in os.listdir(folder):
        stem, _, kind = name.rpartition(".")
        if kind not in KINDS and not (name.startswith(".") and name.endswith(".tmp")):
            continue  # not ours: a cache folder someone pointed elsewhere keeps its other files
        path = os.path.join(folder, name)
        try:
            size = os.stat(path).st_size
            os.unlink(path)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        count, freed = count + 1, freed + size
    return count, freed


# ------------------------------------------------------------------------------------ compiles


def compile_key(text: str, sm: str, options: dict[str, Any]) -> str:
    """The key of compiling `text` for `sm` with `options` (CompileOptions fields as given; a
    missing `tune_cache` is `$TILEMMA_TUNE_CACHE`, as CompileOptions' default is). Options are
    keyed as given, not normalised: `sm="90"` and `sm="sm_90"` are two entries of one result."""
    options = dict(options)
    tune = options.get("tune_cache", os.environ.get("TILEMMA_TUNE_CACHE", ""))
    options["tune_cache"] = [tune, _file_digest(tune) if tune else ""]
    return make_key("compile", input=text, sm=str(sm), options=options)


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError as e:  # compiling will say what is wrong with it
        return f"unreadable: {e.strerror}"


def compile_payload(kernels: list, notes: str) -> bytes:
    """What `load_compile` rebuilds the kernels from: name, PTX module, variant and ABI of each
    (kernels of one module share its text), and the notes the compile printed."""
    modules = list(dict.fromkeys(k.ptx for k in kernels))
    return json.dumps({
        "modules": modules,
        "kernels": [{"name": k.name, "module": modules.index(k.ptx), "variant": k.variant,
                     "abi": k.abi.to_dict(), "tiling": list(k.abi.tiling)} for k in kernels],
        "notes": notes,
    }).encode()


def load_compile(key: str, source: tuple[str, str, dict]) -> tuple[list[CachedKernel], str] | None:
    """The kernels and notes stored under `key`, or None (a miss, or an entry not of this shape).
    `source` (text, sm, options) is what a kernel recompiles if a caller needs its IR (`gemm`)."""
    payload = load("compile", key)
    if payload is None:
        return None
    try:
        data = json.loads(payload)
        modules, notes = data["modules"], data["notes"]
        if not isinstance(notes, str) or not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
            return None
        kernels = []
        for k in data["kernels"]:
            name, variant, abi, tiling, module = k["name"], k["variant"], k["abi"], k["tiling"], k["module"]
            if not (isinstance(name, str) and isinstance(variant, str) and isinstance(abi, dict)
                    and type(module) is int and 0 <= module < len(modules) and isinstance(tiling, list)
                    and all(type(t) is int for t in tiling) and abi.get("name") == name):
                return None
            kernels.append(CachedKernel(name, modules[module], variant, abi, tuple(tiling), source))
        if not kernels:
            return None
        for k in kernels:
            k.abi  # noqa: B018 - checked now (its types), not at first use
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return kernels, notes


class CachedKernel:
    """A `pipeline.CompiledKernel` read from the cache: name, PTX, variant and ABI as compiled.
    `gemm` (what the kernel computes, read from the tile IR: the runner's reference and the
    sparsity error word's decoding need it) is not stored: the first use recompiles the source."""

    def __init__(self, name: str, ptx: str, variant: str, abi: dict, tiling: tuple[int, ...],
                 source: tuple[str, str, dict]):
        self.name, self.ptx, self.variant = name, ptx, variant
        self._abi_dict, self._tiling, self._source = abi, tiling, source
        self._abi = self._gemm = None

    @property
    def abi(self):
        if self._abi is None:
            from tilemma.compiler.runtime.abi import KernelABI

            self._abi = KernelABI.from_dict(self._abi_dict, self._tiling)
        return self._abi

    @property
    def gemm(self):
        if self._gemm is None:
            from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

            text, sm, options = self._source
            compiled = compile_text(text, "<cached>", CompileOptions(sm=sm, **options))
            self._gemm = next(k.gemm for k in compiled if k.name == self.name)
        return self._gemm

    instruction = property(lambda self: self.gemm.mma.variant.variant, doc="the selected mma variant")
    grid = property(lambda self: self.abi.grid)
    block = property(lambda self: self.abi.block)

    @property
    def arg_sizes(self) -> tuple[int, ...]:
        from tilemma.compiler.runtime.abi import SCRATCH_ROLES  # (the cached path imports little)

        return tuple(p.span for p in self.abi.params if not {"sparsity_error", *SCRATCH_ROLES} & set(p.roles))

    def __repr__(self) -> str:
        return f"<CachedKernel {self.name}>"


@contextmanager
def recording_stderr() -> Iterator[list[str]]:
    """What this thread writes to sys.stderr meanwhile (notes of the passes), still written: a
    cached compile prints them again, as the compile did."""
    original, thread, written = sys.stderr, threading.get_ident(), []

    class Tee:
        def write(self, s: str) -> int:
            if threading.get_ident() == thread:
                written.append(s)
            return original.write(s)

        def __getattr__(self, name: str) -> Any:
            return getattr(original, name)

    tee = Tee()
    sys.stderr = tee  # type: ignore[assignment]
    try:
        yield written
    finally:
        if sys.stderr is tee:
            sys.stderr = original


def compile_cached(text: str, sm: str, options: dict[str, Any], compile_fn) -> tuple[list, bool]:
    """Kernels for `text`: from the cache, or `compile_fn()` (stored if it succeeds). Returns
    (kernels, served from the cache)."""
    if directory() is None:
        return compile_fn(), False
    try:
        key = compile_key(text, sm, options)
    except (TypeError, ValueError):  # an option JSON cannot spell: compile (and let it say what is wrong)
        return compile_fn(), False
    hit = load_compile(key, (text, sm, options))
    if hit is not None:
        kernels, notes = hit
        if notes:
            sys.stderr.write(notes)
        return kernels, True
    with recording_stderr() as written:
        kernels = compile_fn()
    what = ", ".join(k.name for k in kernels) + f" ({kernels[0].abi.sm})" if kernels else ""
    store("compile", key, compile_payload(kernels, "".join(written)), what)
    return kernels, False


# ------------------------------------------------------------------------------------ cubins


def cubin(ptx: str, arch: str) -> bytes:
    """`ptxas.assemble(ptx, arch)` through the cache, keyed by the assembler it picks and that
    assembler's version (nvJitLink's, or the ptxas executable's `--version`)."""
    from tilemma.compiler.runtime import ptxas

    if directory() is None:
        return ptxas.assemble(ptx, arch)
    assembler = ptxas.resolve_assembler()
    key = make_key("cubin", ptx=ptx, arch=arch, assembler=assembler, assembler_version=ptxas.assembler_version(assembler))
    data = load("cubin", key)
    if data is not None and data.startswith(b"\x7fELF"):
        return data
    data = ptxas.assemble(ptx, arch, assembler)
    names = [line.split("(", 1)[0].split()[-1] for line in ptx.splitlines() if ".entry " in line]
    store("cubin", key, data, f"{', '.join(names)} ({arch}, {assembler})")
    return data
