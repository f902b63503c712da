"""Assemble PTX with NVIDIA's ptxas, the ground truth for what a target accepts.

`assemble` runs in process through nvJitLink (`cuda.bindings.nvjitlink`, which embeds the same
ptxas) when it is installed and works, saving the subprocess and temporary files; otherwise it runs
the ptxas executable. Either way errors come back as `PtxasError` carrying ptxas' own messages,
each with the PTX source line it points at, so a user sees which emitted instruction was refused.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache

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


@cache
def nvjitlink_unavailable() -> str | None:
    """Why in-process assembly cannot be used (None when it can): cuda-bindings' nvjitlink must
    import and its library load (`pip install cuda-bindings nvidia-nvjitlink`)."""
    try:
        from cuda.bindings import nvjitlink

        nvjitlink.version()
    except Exception as e:  # ImportError, or the shared library missing
        return f"{type(e).__name__}: {e}"
    return None


def run_nvjitlink(ptx: str, arch: str) -> PtxasResult:
    """`run_ptxas` in process: nvJitLink compiles the PTX to a cubin for `arch`. Its log is
    ptxas' own, with the input spelled as ptxas' is here (`<ptx>`) and nvJitLink's summary line
    dropped, so both paths report the same text."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "<ptx>")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            text = bytes(log).rstrip(b"\0").decode(errors="replace")
            lines = [
                line.replace("ptxas application ptx input", "ptxas <ptx>")
                for line in text.splitlines()
                if not line.startswith("ERROR NVJITLINK_")
            ]
            return PtxasResult(False, b"", "\n".join(lines) + "\n")
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return PtxasResult(True, bytes(cubin), "")
    finally:
        nvjitlink.destroy(handle)


ASSEMBLERS = ("auto", "nvjitlink", "ptxas")


def resolve_assembler(assembler: str = "auto") -> str:
    """The assembler `assemble` runs for `assembler`: "auto" is $TILEMMA_ASSEMBLER, else
    nvJitLink where it works, else ptxas."""
    if assembler == "auto":
        assembler = os.environ.get("TILEMMA_ASSEMBLER", "auto")
    if assembler not in ASSEMBLERS:
        raise ValueError(f"assembler {assembler!r}: expected one of {', '.join(ASSEMBLERS)}")
    if assembler == "auto":
        assembler = "nvjitlink" if nvjitlink_unavailable() is None else "ptxas"
    return assembler


_versions: dict[tuple, str] = {}


def assembler_version(assembler: str) -> str:
    """What identifies the assembler's output: nvJitLink's version, or the ptxas executable's
    path and `--version` text (run once per executable and process, 6 ms); "" when it is missing."""
    if assembler == "nvjitlink":
        if nvjitlink_unavailable() is not None:
            return ""
        from cuda.bindings import nvjitlink

        return f"nvjitlink {nvjitlink.version()}"
    exe = find_ptxas()
    if exe is None:
        return ""
    try:
        st = os.stat(exe)
    except OSError:
        return ""
    key = (exe, st.st_size, st.st_mtime_ns)
    if key not in _versions:
        try:
            proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
            _versions[key] = f"{exe}\n{proc.stdout.strip()}"
        except (OSError, subprocess.SubprocessError):
            return ""
    return _versions[key]


def assemble(ptx: str, arch: str, assembler: str = "auto") -> bytes:
    """Assemble or raise `PtxasError` quoting each offending PTX line. `assembler`: "nvjitlink"
    (in process), "ptxas" (the executable) or "auto" (nvJitLink where it works, else ptxas;
    $TILEMMA_ASSEMBLER overrides it)."""
    assembler = resolve_assembler(assembler)
    if assembler == "nvjitlink" and (why := nvjitlink_unavailable()) is not None:
        raise FileNotFoundError(f"nvJitLink is not usable ({why}): `pip install cuda-bindings nvidia-nvjitlink`")
    result = run_nvjitlink(ptx, arch) if assembler == "nvjitlink" else run_ptxas(ptx, arch)
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
