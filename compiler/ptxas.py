"""Assemble PTX with NVIDIA's ptxas, the ground truth for what a target accepts.

Errors come back as `PtxasError` carrying ptxas' own messages, each with the PTX source line it
points at, so a user sees which emitted instruction was refused.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

_LINE_RE = re.compile(r"line (\d+);")


class PtxasError(Exception):
    """ptxas refused the module; `diagnostics` pairs each message with its PTX line (or None)."""

    def __init__(self, arch: str, diagnostics: list[tuple[str, str | None]]):
        self.arch = arch
        self.diagnostics = diagnostics
        lines = [f"ptxas ({arch}) refused the PTX:"]
        for message, source in diagnostics:
            lines.append(f"  {message}")
            if source is not None:
                lines.append(f"    | {source.strip()}")
        super().__init__("\n".join(lines))


def find_cuda_tool(name: str) -> str | None:
    """Path of a CUDA command-line tool: $NAME (upper case), then PATH, then a pip wheel's copy
    (`nvidia-cuda-nvcc` ships ptxas, `nvidia-cuda-cuobjdump` cuobjdump, under nvidia/*/bin)."""
    explicit = os.environ.get(name.upper())
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return None
    for base in nvidia.__path__:
        for sub in sorted(os.listdir(base)):
            candidate = os.path.join(base, sub, "bin", name)
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def find_ptxas() -> str | None:
    """Path of ptxas: $PTXAS, then PATH, then the `nvidia-cuda-nvcc` wheel's copy."""
    return find_cuda_tool("ptxas")


@dataclass(frozen=True)
class PtxasResult:
    ok: bool
    cubin: bytes
    log: str

    def failing_lines(self) -> set[int]:
        """1-based PTX line numbers that ptxas reported an error on."""
        return {
            int(m.group(1))
            for line in self.log.splitlines()
            if "error" in line.lower()
            for m in [_LINE_RE.search(line)]
            if m
        }


def run_ptxas(ptx: str, arch: str, extra_args: tuple[str, ...] = ()) -> PtxasResult:
    """Run ptxas on `ptx` for `arch` (e.g. "sm_90a"); never raises on a refused module."""
    exe = find_ptxas()
    if exe is None:
        raise FileNotFoundError(
            "ptxas not found: put it on PATH, set $PTXAS, or `pip install nvidia-cuda-nvcc`"
        )
    with tempfile.TemporaryDirectory(prefix="tilemma-ptxas-") as tmp:
        src = os.path.join(tmp, "in.ptx")
        out = os.path.join(tmp, "out.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run(
            [exe, f"-arch={arch}", *extra_args, src, "-o", out],
            capture_output=True,
            text=True,
        )
        log = (proc.stdout + proc.stderr).replace(src, "<ptx>")
        if proc.returncode != 0 or not os.path.exists(out):
            return PtxasResult(False, b"", log)
        with open(out, "rb") as f:
            return PtxasResult(True, f.read(), log)


def assemble(ptx: str, arch: str) -> bytes:
    """Assemble or raise `PtxasError` quoting each offending PTX line."""
    result = run_ptxas(ptx, arch)
    if result.ok:
        return result.cubin
    src_lines = ptx.splitlines()
    diags: list[tuple[str, str | None]] = []
    for line in result.log.splitlines():
        if not line.strip():
            continue
        m = _LINE_RE.search(line)
        source = None
        if m and 0 < int(m.group(1)) <= len(src_lines):
            source = f"{m.group(1)}: {src_lines[int(m.group(1)) - 1]}"
        diags.append((line.strip(), source))
    raise PtxasError(arch, diags)
