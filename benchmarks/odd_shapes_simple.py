"""The simple schedule (`stages=0`, fragments straight from global memory) at given shapes: the
baseline the gather replaces for rows that are not 4-byte aligned (f16 x f16 -> f32 D, eager
launches, TFLOP/s; same timing as `benchmarks.dynamic_shapes`, to be run beside it).

    python -m benchmarks.odd_shapes_simple 4096x4095x4096 257x129x4096
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import torch

    import tilemma
    from benchmarks.dynamic_shapes import eager_tflops, inputs
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

    for shape in argv if argv is not None else sys.argv[1:]:
        m, n, k = (int(x) for x in shape.split("x"))
        a, b, d = inputs(m, n, k, torch)
        spec = GemmSpec(m, n, k, "f16", "f16", "f32", c=False)
        for label, options in (("simple", dict(stages=0, split_k=1)), ("staged", dict(split_k=1))):
            [kernel] = tilemma.compile(str(gemm_module(spec)), sm="90", **options)
            kernel.launch(a, b, d)
            torch.cuda.synchronize()
            want = a.float() @ b.float()
            err = ((d - want).abs() / (want.abs() + 1)).max().item()
            t = eager_tflops(lambda: kernel.launch(a, b, d), 2.0 * m * n * k, torch)
            print(f"{shape:>16} {label:>7} {t:8.1f} TFLOP/s  err {err:.1e}  {kernel.abi.config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
