"""Launch one tilemma GEMM of `benchmarks.gemm_bench` a few times on the GPU, with no checking and
no peers: the process to put under `ncu` or `compute-sanitizer`.

    python -m benchmarks.launch_kernel f16 4096 [warps=2x4,warp-tile=4x8,stages=3] [--launches 3]
    python -m benchmarks.launch_kernel s8-acol 512x4096x4096 --sm 90a       # a shape M x N x K
    python -m benchmarks.launch_kernel epilogue:bias-gelu 4096      # an epilogue_bench case's fused kernel
    DISABLE_MMA_V3=1 python -m benchmarks.launch_kernel tf32-brow 4096 --triton 128,256,32,8,3   # the Triton peer
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.gemm_bench import (
    FAMILIES, compile_options, make_inputs, output, parse_config, parse_shape, tilemma_arguments, tilemma_ir,
    tilemma_kernel,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("family", help=f"{', '.join(FAMILIES)}, or epilogue:CASE (benchmarks.epilogue_bench)")
    p.add_argument("size", type=parse_shape, help="N (N^3) or MxNxK")
    p.add_argument("--sm", default="90", help="the target tilemma compiles for (default 90)")
    p.add_argument("config", nargs="?", default="", help="as gemm_bench --tilemma-configs")
    p.add_argument("--launches", type=int, default=3)
    p.add_argument("--triton", metavar="BM,BN,BK,WARPS,STAGES",
                   help="launch Triton's matmul (benchmarks.triton_gemm) with this configuration instead; "
                   "DISABLE_MMA_V3=1 in the environment for its mma.sync path")
    args = p.parse_args(argv)
    import torch

    if args.family.startswith("epilogue:"):
        return _epilogue(args.family.removeprefix("epilogue:"), args.size, args.launches, torch)
    if args.family not in FAMILIES:
        p.error(f"unknown family {args.family!r}")
    fam = FAMILIES[args.family]
    if args.triton:
        return _triton(fam, args.size, tuple(int(x) for x in args.triton.split(",")), args.launches, torch)
    text, name = tilemma_ir(fam, args.size)
    kernel = tilemma_kernel(text, name, compile_options(args.sm, **parse_config(args.config)))
    inp = make_inputs(fam, args.size, torch)
    d = output(fam, args.size, torch)
    pointers, _ = tilemma_arguments(fam, inp, d, torch)
    for _ in range(args.launches):
        kernel.launch(pointers, 0)
    torch.cuda.synchronize()
    print(f"{kernel.name}: {kernel.config}", file=sys.stderr)
    return 0



def _triton(fam, n, config: tuple, launches: int, torch) -> int:
    """Triton's matmul of `fam` at `n` (N^3 or M x N x K), the operands in the family's orders (`gemm_bench`'s)."""
    from benchmarks import triton_gemm

    inp = make_inputs(fam, n, torch)
    d = output(fam, n, torch)
    for _ in range(launches):
        compiled = triton_gemm.matmul(inp["a_op"], inp["b_op"], d, config, fam.triton_precision)
    torch.cuda.synchronize()
    print(f"triton {config}: {triton_gemm.instruction(compiled.asm['ptx'])}", file=sys.stderr)
    return 0

def _epilogue(case: str, shape: tuple[int, int, int], launches: int, torch) -> int:
    """The fused kernel of an epilogue_bench case at `shape` on random tensors made from its ABI
    (through the public API: tilemma.compile and Kernel.launch)."""
    import numpy as np
    import tilemma
    from benchmarks.epilogue_bench import CASES, epilogue_ir

    n = shape[2]  # (B's scale: K)
    text, _ = epilogue_ir(CASES[case], shape)
    [kernel] = tilemma.compile(text, "90")
    args = []
    for p in kernel.abi.params:
        dtype = getattr(torch, np.dtype(p.dtype).name)
        full = torch.empty_strided(p.shape, p.strides, dtype=dtype, device="cuda")
        if dtype.is_floating_point:
            full.normal_(0, 1 if p.name != "p_b" else n ** -0.5)
        else:
            full.random_(-128, 128)
        args.append(full)
    for _ in range(launches):
        kernel.launch(*args)
    torch.cuda.synchronize()
    print(f"{kernel.name}: {kernel.abi.config}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
