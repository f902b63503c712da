"""What a tilemma kernel became in machine code: `ptxas -v` for registers, stack and spills,
`cuobjdump -sass` for how many tensor-core mmas (HMMA/IMMA/DMMA), ldmatrix (LDSM), cp.async
(LDGSTS), global loads (LDG) and shared stores/loads (STS/LDS) it holds. Spills or a missing LDSM
say more about a slow kernel than its timing does, and need no GPU.

    python -m benchmarks.sass_check [--families f16 s8] [--size 1024] [--sm 90]
    python -m benchmarks.sass_check --ir g.mlir
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

from benchmarks.gemm_bench import FAMILIES, compile_options, tilemma_ir, tilemma_kernel
from tilemma.compiler.runtime.ptxas import assemble, find_cuda_tool, run_ptxas

OPCODES = ("HMMA", "IMMA", "DMMA", "LDSM", "LDGSTS", "LDG", "STS", "LDS", "STG", "BAR")
# An instruction line of cuobjdump -sass: /*0a30*/ [@[!]P3] OPCODE.MODIFIERS operands ;
_SASS_RE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", re.M)
_USED_RE = re.compile(r"Used (\d+) registers")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass(frozen=True)
class SassReport:
    kernel: str
    config: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    counts: dict[str, int] = field(default_factory=dict)  # SASS opcode (no modifiers) -> count

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


def ptxas_usage(log: str) -> tuple[int, int, int, int]:
    """(registers, stack frame bytes, spill store bytes, spill load bytes) from `ptxas -v`."""
    used, frame = _USED_RE.search(log), _FRAME_RE.search(log)
    if used is None or frame is None:
        raise ValueError(f"no resource usage in the ptxas -v output:\n{log}")
    return int(used.group(1)), *(int(g) for g in frame.groups())  # type: ignore[return-value]


def sass_counts(sass: str) -> Counter:
    """How often each opcode (modifiers dropped: HMMA.16816.F32 counts as HMMA) occurs."""
    return Counter(_SASS_RE.findall(sass))


def find_cuobjdump() -> str | None:
    """$CUOBJDUMP, then PATH, then the `nvidia-cuda-cuobjdump` wheel's copy."""
    return find_cuda_tool("cuobjdump")


def disassemble(cubin: bytes) -> str:
    exe = find_cuobjdump()
    if exe is None:
        raise FileNotFoundError("cuobjdump not found: put it on PATH, set $CUOBJDUMP, or "
                                "`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`")
    with tempfile.TemporaryDirectory(prefix="tilemma-sass-") as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        # cuobjdump runs nvdisasm: look for it beside cuobjdump first (the wheels' layout)
        env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(exe), os.environ.get("PATH", "")])}
        proc = subprocess.run([exe, "-sass", path], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass failed: {proc.stderr.strip()}")
    return proc.stdout


def check_ptx(ptx: str, kernel: str, config: str = "", arch: str = "sm_90", sass_out: str | None = None) -> SassReport:
    """Assemble (errors quote the PTX line), then read the resource usage and the SASS (written
    to `sass_out` as well, when given, to read the loop)."""
    cubin = assemble(ptx, arch)
    usage = ptxas_usage(run_ptxas(ptx, arch, ("-v",)).log)
    sass = disassemble(cubin)
    if sass_out:
        os.makedirs(os.path.dirname(sass_out) or ".", exist_ok=True)
        with open(sass_out, "w") as f:
            f.write(sass)
    return SassReport(kernel, config, *usage, counts=dict(sass_counts(sass)))


def table(reports: list[SassReport]) -> str:
    head = ["kernel", "regs", "stack", "spill st", "spill ld", *OPCODES]
    body = [[r.kernel, str(r.registers), str(r.stack_bytes), str(r.spill_store_bytes),
             str(r.spill_load_bytes), *(str(r.counts.get(op, 0)) for op in OPCODES)]
            for r in reports]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"  {r.kernel}: {r.config}" for r in reports if r.config]
    lines += [f"SPILLS in {r.kernel}" for r in reports if r.spills]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sass_check",
                                description=__doc__.split("\n")[0])
    p.add_argument("--families", nargs="+", default=list(FAMILIES), metavar="F",
                   help=f"benchmark families (default all: {' '.join(FAMILIES)})")
    p.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    p.add_argument("--ir", help="a tile IR file with one kernel, instead of the families")
    p.add_argument("--sm", default="90", help="target (default 90); ptxas assembles for sm_<sm>")
    p.add_argument("--sass-dir", help="also write each kernel's whole SASS to DIR/<family or file>.sass")
    args = p.parse_args(argv)
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        p.error(f"unknown family {', '.join(unknown)}: choose from {', '.join(FAMILIES)}")
    if args.ir:
        try:
            with open(args.ir) as f:
                sources = [(f.read(), args.ir)]
        except OSError as exc:
            p.error(f"{args.ir}: {exc.strerror}")
    else:
        sources = [tilemma_ir(FAMILIES[f], args.size) for f in args.families]
    labels = [os.path.basename(args.ir)] if args.ir else args.families
    arch = "sm_" + args.sm.removeprefix("sm_")
    reports = []
    try:
        for (text, name), label in zip(sources, labels):
            kernel = tilemma_kernel(text, name, compile_options(args.sm, ptx=""))
            out = os.path.join(args.sass_dir, f"{label}.sass") if args.sass_dir else None
            reports.append(check_ptx(kernel.ptx, kernel.name, kernel.config, arch, out))
    except Exception as exc:  # located compiler errors, ptxas refusals, missing tools
        print(f"sass_check: {exc}", file=sys.stderr)
        return 1
    print(table(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
