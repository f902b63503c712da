"""Launch one tilemma GEMM of `benchmarks.gemm_bench` a few times on the GPU, with no checking and
no peers: the process to put under `ncu` or `compute-sanitizer`.

    python -m benchmarks.launch_kernel f16 4096 [warps=2x4,warp-tile=4x8,stages=3] [--launches 3]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.gemm_bench import (
    FAMILIES, compile_options, make_inputs, output, parse_config, tilemma_arguments, tilemma_ir, tilemma_kernel,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("family", choices=list(FAMILIES))
    p.add_argument("size", type=int)
    p.add_argument("config", nargs="?", default="", help="as gemm_bench --tilemma-configs")
    p.add_argument("--launches", type=int, default=3)
    args = p.parse_args(argv)
    import torch

    fam = FAMILIES[args.family]
    text, name = tilemma_ir(fam, args.size)
    kernel = tilemma_kernel(text, name, compile_options(**parse_config(args.config)))
    inp = make_inputs(fam, args.size, torch)
    d = output(fam, args.size, torch)
    pointers, _ = tilemma_arguments(fam, inp, d, torch)
    for _ in range(args.launches):
        kernel.launch(pointers, 0)
    torch.cuda.synchronize()
    print(f"{kernel.name}: {kernel.config}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
