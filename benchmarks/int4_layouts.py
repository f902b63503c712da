"""4-bit integer GEMMs in every operand order on the GPU, each against the K-major kernel of the same
run: a row-major B or an M-major A is staged by the transposing fill (`warp.fill_load` /
`warp.fill_store`, nibbles interleaved then bytes transposed), the K-major orders by cp.async.
There is no peer to put beside them: cuBLAS and Triton have no 4-bit integer GEMM on sm_90.

Each kernel is first checked on the GPU at an odd size (every element of D against the exact
reference), then timed at each shape with CUDA events (`cuda_runtime.time_kernel`, back-to-back
launches, inputs from `reference.random_matrix`: the whole 4-bit range).

    python -m benchmarks.int4_layouts --shapes 4096x4096x4096 --csv out.csv
    python -m benchmarks.int4_layouts --native --configs '' 'warps=4x2,warp-tile=4x8,stages=4,stage-k=128'
"""

from __future__ import annotations

import argparse
import csv
import sys

import numpy as np

ORDERS = {  # name: (A layout, B layout)
    "s4": ("row", "col"),
    "s4-brow": ("row", "row"),
    "s4-acol": ("col", "col"),
    "s4-acol-brow": ("col", "row"),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=["4096x4096x4096", "8192x8192x8192", "4096x11008x4096",
                                                   "512x4096x4096"])
    p.add_argument("--orders", nargs="+", default=list(ORDERS), choices=list(ORDERS))
    p.add_argument("--configs", nargs="+", default=[""], help="tile-plan options per run ('' : the defaults)")
    p.add_argument("--native", action="store_true", help="the s4 m16n8k64 mma (emulated on sm_90) instead of "
                   "4-bit stages widened to the s8 mma")
    p.add_argument("--sm", default="90")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--csv", default="")
    args = p.parse_args(argv)

    from benchmarks.gemm_bench import parse_config
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
    from tilemma.compiler.driver.runner import pack_memory, run_compiled
    from tilemma.compiler.runtime import cuda_runtime
    from tilemma.compiler.verify import reference

    shape_hint = {"shape": "m16n8k64"} if args.native else {}

    def kernel(m: int, n: int, k: int, order: str, config: str):
        a_layout, b_layout = ORDERS[order]
        spec = GemmSpec(m, n, k, "s4", "s4", "s32", a_layout=a_layout, b_layout=b_layout, c=False, **shape_hint)
        options = CompileOptions(sm=args.sm, tune_cache="", **parse_config(config))
        [compiled] = compile_text(str(gemm_module(spec)), spec.name, options)
        return compiled

    rows = []
    failed = 0
    for config in args.configs:
        for order in args.orders:
            checked = kernel(136, 200, 328, order, config)
            result = run_compiled(checked, seed=3, on="gpu")
            print(f"check {order} [{config or 'defaults'}] {checked.abi.config}: {result.line()}", flush=True)
            if not result.ok:
                failed += 1
                continue
            for shape in args.shapes:
                m, n, k = (int(x) for x in shape.split("x"))
                compiled = kernel(m, n, k, order, config)
                rng = np.random.default_rng(0)
                buffers = [np.zeros(q.span, q.dtype)  # split-K scratch: counters 0
                           if set(q.roles) & {"split_workspace", "split_counters"}
                           else pack_memory(reference.random_matrix(q.element, (q.span,), rng), q.element)
                           for q in compiled.abi.params]
                ms = cuda_runtime.time_kernel(compiled.ptx, compiled.name, compiled.grid, compiled.block,
                                              compiled.abi.arguments(buffers), args.iters, 3, compiled.abi.shared_bytes)
                rows.append({"order": order, "shape": shape, "config": config or "defaults",
                             "chosen": compiled.abi.config, "tops": 2 * m * n * k / ms / 1e9})
                print(f"{order:13} {shape:16} {compiled.abi.config:55} {rows[-1]['tops']:7.1f} TOP/s", flush=True)
    base = {(r["shape"], r["config"]): r["tops"] for r in rows if r["order"] == "s4"}
    for r in rows:
        r["vs_k_major"] = r["tops"] / base[(r["shape"], r["config"])] if (r["shape"], r["config"]) in base else ""
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["order", "shape", "config", "chosen", "tops", "vs_k_major"])
            w.writeheader()
            w.writerows(rows)
    print(f"\n{'order':13} {'shape':16} {'config':12} {'TOP/s':>7} {'/K-major':>8}")
    for r in rows:
        ratio = f"{r['vs_k_major']:.2f}" if r["vs_k_major"] != "" else "-"
        print(f"{r['order']:13} {r['shape']:16} {r['config'][:12]:12} {r['tops']:7.1f} {ratio:>8}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
