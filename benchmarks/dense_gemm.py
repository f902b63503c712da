"""Benchmark: tilemma's dense GEMM kernels against cuBLAS (through torch) in the same run.

Prints TFLOP/s of each and the ratio. Needs a GPU, cuda-bindings and torch. Usage:
    python -m benchmarks.dense_gemm [--sizes 2048 4096]
"""

from __future__ import annotations

import argparse

import numpy as np

from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import reference
from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import pack_memory

FAMILIES = [("f16", "f16", "f32"), ("bf16", "bf16", "f32"), ("si8", "si8", "si32"), ("f64", "f64", "f64")]


def cublas_ms(a: str, n: int) -> float:
    import torch

    dt = getattr(torch, ELEMENTS[a].dtype.name)  # torch names these dtypes as NumPy does
    if a == "si8":
        x = torch.randint(-8, 8, (n, n), dtype=dt, device="cuda")
        y = torch.randint(-8, 8, (n, n), dtype=dt, device="cuda")
        fn = lambda: torch._int_mm(x, y)  # noqa: E731
    else:
        x = torch.randn(n, n, device="cuda").to(dt)
        y = torch.randn(n, n, device="cuda").to(dt)
        fn = lambda: x @ y  # noqa: E731
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    args = parser.parse_args()
    major, minor = cuda_runtime.driver_max_ptx()
    rng = np.random.default_rng(0)
    rows = []
    for n in args.sizes:
        for a, b, acc in FAMILIES:
            spec = GemmSpec(n, n, n, a, b, acc)
            [k] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx=f"{min((9, 0), (major, minor))[0]}.{min((9, 0), (major, minor))[1]}"))
            mats = [reference.random_matrix(t, (n * n,), rng) for t in (a, b, acc, acc)]
            bufs = [pack_memory(m, t) for m, t in zip(mats, (a, b, acc, acc))]
            ms = cuda_runtime.time_kernel(k.ptx, k.name, k.grid, k.block, k.abi.arguments(bufs), iters=5, warmup=1)
            ref_ms = cublas_ms(a, n)
            flops = 2.0 * n**3
            rows.append((f"{a} {n}^3", k.variant, flops / ms / 1e9, flops / ref_ms / 1e9))
    print(f"{'problem':14} {'tilemma TFLOP/s':>16} {'cuBLAS TFLOP/s':>15} {'ratio':>7}  variant")
    for name, variant, ours, theirs in rows:
        print(f"{name:14} {ours:16.1f} {theirs:15.1f} {ours / theirs:7.3f}  {variant}")


if __name__ == "__main__":
    main()
