"""Benchmark: how long the CPU emulator takes to run tilemma's f16 GEMM kernels (f32 accumulate).

A speed report, not a test: the issue asks for 512^3 under 30 s on 2 cores. Each row compiles
the kernel, decodes it (PTX text -> ptx ops -> per-instruction closures), runs the whole grid
and checks every output element against the exact reference, so a fast but wrong emulator
cannot produce a good-looking row. Usage:
    python benchmarks/emulator_speed.py [--sizes 256 512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from tilemma.compiler.verify import emulator, reference
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import pack_memory


def bench(n: int, repeat: int) -> dict:
    spec = GemmSpec(n, n, n, "f16", "f16", "f32")
    t0 = time.perf_counter()
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90"))
    t1 = time.perf_counter()
    program = emulator.compile_entry(kernel.ptx, kernel.name)
    t2 = time.perf_counter()
    rng = np.random.default_rng(0)
    a, b = (reference.random_matrix("f16", (n, n), rng) for _ in range(2))
    c = reference.random_matrix("f32", (n, n), rng)
    args = [pack_memory(x, t) for x, t in ((a, "f16"), (b, "f16"), (c, "f32"), (np.zeros((n, n)), "f32"))]
    runs = []
    for _ in range(repeat):
        out = program.run(kernel.grid, kernel.block, kernel.abi.arguments(args), shared_bytes=kernel.abi.shared_bytes)
        runs.append(program.stats.seconds)
    d = out[3].reshape(n, n)
    want = reference.mma_reference(a, b, c, a_type="f16", b_type="f16", acc_type="f32")
    cmp = reference.compare(d, want, acc_type="f32", a_type="f16", k=n, a=a, b=b, c=c)
    s = program.stats
    return {
        "size": f"{n}^3", "grid x block": f"{kernel.grid} x {kernel.block[0]}", "threads": s.threads,
        "instrs": s.instructions, "mma issued": s.mma, "compile s": t1 - t0, "decode s": t2 - t1,
        "run s (best)": min(runs), "max_rel": cmp.max_rel, "check": "PASS" if cmp.ok else "FAIL",
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows = [bench(n, args.repeat) for n in args.sizes]
    cols = list(rows[0])
    cells = [[f"{r[c]:.3f}" if isinstance(r[c], float) and c != "max_rel" else
              f"{r[c]:.2g}" if c == "max_rel" else str(r[c]) for c in cols] for r in rows]  # fmt: skip
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print(f"emulator speed, f16 x f16 -> f32 GEMM, sm_90 kernel; {os.cpu_count()} CPUs, numpy {np.__version__}")
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(x.rjust(w) for x, w in zip(row, widths)))


if __name__ == "__main__":
    main()
