"""Split-K counts against each other on the shapes where the output tiles leave SMs idle: the
static f16 kernel (D = A x B, f32 D) compiled with `split_k` = 1, 2, 3, 4, 6, 8 and the automatic
choice, timed eagerly as `benchmarks.dynamic_shapes` times them, beside Triton's mma.sync path
from that benchmark's run. What `tile-plan`'s automatic split (`passes/tile/plan.py`, `split`) is
measured against.

    python -m benchmarks.split_k_sweep [--out results.csv]
"""

from __future__ import annotations

import argparse
import sys

SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (16, 11008, 4096), (16, 4096, 11008), (64, 4096, 4096),
          (64, 11008, 4096), (128, 4096, 4096), (128, 4096, 11008), (128, 11008, 4096), (257, 129, 4096),
          (512, 4096, 4096)]
SPLITS = (1, 2, 3, 4, 6, 8)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the table as CSV here")
    args = p.parse_args(argv)
    import torch

    import tilemma
    from benchmarks.dynamic_shapes import eager_tflops, inputs
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

    rows = []
    for m, n, k in SHAPES:
        a, b, d = inputs(m, n, k, torch)
        want = a.float() @ b.float()
        text = str(gemm_module(GemmSpec(m, n, k, "f16", "f16", "f32", c=False)))
        times = []
        for splits in (*SPLITS, 0):
            [kernel] = tilemma.compile(text, sm="90", split_k=splits)
            d.zero_()
            kernel.launch(a, b, d)
            torch.cuda.synchronize()
            err = ((d - want).abs() / (want.abs() + 1)).max().item()
            assert err < 1e-2, (m, n, k, splits, err)
            times.append((kernel.grid[2], eager_tflops(lambda: kernel.launch(a, b, d), 2.0 * m * n * k, torch)))
        rows.append((f"{m}x{n}x{k}", kernel.grid[0] * kernel.grid[1], times))
    print(f"{'shape':>16} {'tiles':>5} " + " ".join(f"{'S=' + str(s):>7}" for s in SPLITS) + "    auto")
    for key, tiles, times in rows:
        print(f"{key:>16} {tiles:>5} " + " ".join(f"{t:7.1f}" for _, t in times[:-1])
              + f"  {times[-1][1]:6.1f} (S={times[-1][0]})")
    if args.out:
        with open(args.out, "w") as f:
            f.write("shape,tiles," + ",".join(f"split_{s}" for s in SPLITS) + ",auto,auto_splits\n")
            for key, tiles, times in rows:
                f.write(f"{key},{tiles}," + ",".join(f"{t:.2f}" for _, t in times[:-1])
                        + f",{times[-1][1]:.2f},{times[-1][0]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
