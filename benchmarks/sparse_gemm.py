"""Benchmark: tilemma's 2:4-sparse f16 GEMM against its own dense kernel and cuBLAS dense (torch),
in the same run. FLOP/s are dense-equivalent (2*M*N*K) for all three. Needs a GPU and torch.

    python -m benchmarks.sparse_gemm [--size 4096]
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.dense_gemm import cublas_ms
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import reference
from tilemma.compiler.layouts import sparse_fragments
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import pack_memory


def tilemma_ms(spec: GemmSpec, rng: np.random.Generator) -> tuple[float, str]:
    [k] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx="9.0"))
    n = spec.m
    mats = [reference.random_matrix(t, (n * n,), rng) for t in (spec.a, spec.b, spec.acc, spec.acc)]
    if spec.sparse_a and not spec.prune:  # the checked kernel wants A that has the pattern
        mats[0] = sparse_fragments.prune(mats[0].reshape(n, n), "2:4").reshape(-1)
    bufs = [pack_memory(m, t) for m, t in zip(mats, (spec.a, spec.b, spec.acc, spec.acc))]
    if spec.sparse_a and not spec.prune:
        error = k.abi.params[k.abi.index("sparsity_error")]
        bufs.append(np.full(1, error.init, np.uint32))
    return cuda_runtime.time_kernel(k.ptx, k.name, k.grid, k.block, k.abi.arguments(bufs), iters=5, warmup=1), k.variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    n = parser.parse_args().size
    rng = np.random.default_rng(0)
    flops = 2.0 * n**3
    rows = []
    for name, spec in [
        ("tilemma sparse (prune)", GemmSpec(n, n, n, "f16", "f16", "f32", sparse_a=True, prune=True)),
        ("tilemma sparse (check)", GemmSpec(n, n, n, "f16", "f16", "f32", sparse_a=True)),
        ("tilemma dense", GemmSpec(n, n, n, "f16", "f16", "f32")),
    ]:
        ms, variant = tilemma_ms(spec, rng)
        rows.append((name, ms, variant))
    rows.append(("cuBLAS dense (torch)", cublas_ms("f16", n), "torch.matmul f16"))
    base = rows[-1][1]
    print(f"f16 GEMM {n}^3, dense-equivalent TFLOP/s")
    print(f"{'kernel':24} {'ms':>9} {'TFLOP/s':>9} {'vs cuBLAS':>10}  instruction")
    for name, ms, variant in rows:
        print(f"{name:24} {ms:9.3f} {flops / ms / 1e9:9.1f} {base / ms:10.3f}  {variant}")


if __name__ == "__main__":
    main()
