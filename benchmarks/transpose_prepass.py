"""The 8-bit GEMM with both operands MN-major (issue 23, item 2): tilemma's default, B transposed
first by its own kernel into a K-major workspace (`tile-transpose-first`), against its in-kernel
transpose (`transpose-first=0`), B transposed by Triton's and torch's kernels and then tilemma's
A-M-major / B-K-major kernel (timed as one), that kernel alone (a free transpose) and the K-major
kernel, all samples interleaved in one call (ratios to the K-major kernel).

Triton's transpose moves a block through shared memory (its layout conversion), torch's is
`t().contiguous()`; a plain copy of B gives the bandwidth ceiling. Each D is checked exactly
against the float64 product.

    python -m benchmarks.transpose_prepass [--shapes 4096 4096x4096x11008] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import benchmarks.gemm_bench as gb

BLOCKS = ((64, 64), (128, 128), (64, 256))  # Triton transpose blocks (K, N) tried; the fastest is kept


def triton_transpose(torch):
    """A Triton kernel writing B^T (N x K, contiguous) from B (K x N, contiguous), one (BK, BN)
    block a program."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(src, dst, K, N, BK: tl.constexpr, BN: tl.constexpr):
        pk, pn = tl.program_id(0), tl.program_id(1)
        rk = pk * BK + tl.arange(0, BK)
        rn = pn * BN + tl.arange(0, BN)
        mask = (rk[:, None] < K) & (rn[None, :] < N)
        block = tl.load(src + rk[:, None] * N + rn[None, :], mask=mask)
        tl.store(dst + rn[None, :] * K + rk[:, None], block, mask=mask)

    def run(b, bt, bk: int, bn: int) -> None:
        k, n = b.shape
        kernel[(triton.cdiv(k, bk), triton.cdiv(n, bn))](b, bt, k, n, BK=bk, BN=bn, num_warps=4)

    return run


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["4096", "4096x4096x11008", "4096x11008x4096", "512x4096x4096"])
    p.add_argument("--sm", default="90a")
    p.add_argument("--csv")
    args = p.parse_args(argv)
    import torch

    from tilemma.compiler.runtime import cuda_runtime

    gb.set_timing(8, 30)
    fams = [gb.FAMILIES[f] for f in ("s8", "s8-acol", "s8-acol-brow")]
    shapes = [gb.parse_shape(s) for s in args.shapes]
    in_kernel = "transpose-first=0"
    builds = gb.precompile([(f.name, s, "") for s in shapes for f in fams]
                           + [("s8-acol-brow", s, in_kernel) for s in shapes], args.sm, gb.default_ptx(), 8)
    transpose = triton_transpose(torch)
    rows = []
    print(f"device {torch.cuda.get_device_name()}")
    print(f"{'shape':>18} {'K-major':>8} {'acol':>8} {'first':>8} {'in-kernel':>9} {'triton+acol':>11} "
          f"{'torch+acol':>10} {'T us':>6} {'T TB/s':>7} {'ours TB/s':>9} {'copy TB/s':>9}  ratios to K-major")
    for shape in shapes:
        m, n, k = gb.as_shape(shape)
        torch.cuda.empty_cache()
        launches = []
        for fam in fams:
            build = builds[(fam.name, tuple(shape), "")]
            if isinstance(build, str):
                print(f"{fam.name} {shape}: {build}", file=sys.stderr)
                return 1
            inp = gb.make_inputs(fam, shape, torch)
            launches.append((fam, inp, gb.kernel_from(build)))
        (f_k, inp_k, ker_k), (f_a, inp_a, ker_a), (f_ab, inp_ab, ker_ab) = launches
        build = builds[("s8-acol-brow", tuple(shape), in_kernel)]
        if isinstance(build, str):
            print(f"s8-acol-brow {shape} {in_kernel}: {build}", file=sys.stderr)
            return 1
        launches.append((f_ab, inp_ab, gb.kernel_from(build)))
        if not ker_ab.prologue or launches[-1][2].prologue:
            print(f"{shape}: expected B transposed first by default and not with {in_kernel}", file=sys.stderr)
            return 1
        plain = [gb.tilemma_checked(f, shape, inp, ker, torch) for f, inp, ker in launches]
        # the composite: s8-acol-brow's operands (A M-major, B N-major), B through the workspace
        bt = torch.empty(n, k, dtype=torch.int8, device="cuda")
        via = {**inp_ab, "b_op": bt.t()}  # K x N, K contiguous: what s8-acol's kernel reads
        gemm, d, _ = gb.tilemma_launcher(f_a, shape, via, ker_a, torch)
        best = None
        for bk, bn in BLOCKS:
            def t_only(bk=bk, bn=bn):
                transpose(inp_ab["b_op"], bt, bk, bn)
            ms = gb.median_ms(t_only, torch)[0]
            best = (ms, bk, bn) if best is None or ms < best[0] else best
        _, bk, bn = best

        def triton_then_gemm():
            transpose(inp_ab["b_op"], bt, bk, bn)
            gemm()

        def torch_then_gemm():
            bt.copy_(inp_ab["b_op"].t())
            gemm()

        def t_only():
            transpose(inp_ab["b_op"], bt, bk, bn)

        copy_dst = torch.empty_like(inp_ab["b_op"])

        def copy_only():
            copy_dst.copy_(inp_ab["b_op"])

        for composite in (triton_then_gemm, torch_then_gemm):
            d.fill_(gb.SENTINEL[True])
            composite()
            torch.cuda.synchronize()
            problem = gb.check(d.double(), inp_ab["ab"], None, acc=f_a.acc, k=k)
            if problem:
                raise AssertionError(f"{composite.__name__} {shape}: {problem}")
        ours = ker_ab.prologue[0]
        pointers = [inp_ab["b_op"].data_ptr(), bt.data_ptr()]

        def ours_only():  # tilemma's transposing kernel alone, into the same workspace
            cuda_runtime.launch(ker_ab.ptx, ours.entry, ours.grid, ours.block, pointers, 0,
                                torch.cuda.current_stream().cuda_stream)

        fns = [*plain, triton_then_gemm, torch_then_gemm, t_only, ours_only, copy_only]
        ms = [t for t, _ in gb.median_ms_interleaved(fns, torch)]
        ops = gb.flops(shape) / 1e9
        tops = [ops / t for t in ms[:6]]
        nbytes = 2 * k * n
        row = {"shape": gb.shape_label(shape), "k_major": tops[0], "acol": tops[1], "first": tops[2],
               "in_kernel": tops[3], "triton_prepass": tops[4], "torch_prepass": tops[5], "transpose_us": ms[6] * 1e3,
               "transpose_tbs": nbytes / ms[6] / 1e9, "ours_us": ms[7] * 1e3, "ours_tbs": nbytes / ms[7] / 1e9,
               "copy_tbs": nbytes / ms[8] / 1e9, "block": f"{bk}x{bn}"}
        rows.append(row)
        print(f"{row['shape']:>18} {tops[0]:8.0f} {tops[1]:8.0f} {tops[2]:8.0f} {tops[3]:9.0f} {tops[4]:11.0f} "
              f"{tops[5]:10.0f} {row['transpose_us']:6.1f} {row['transpose_tbs']:7.2f} {row['ours_tbs']:9.2f} "
              f"{row['copy_tbs']:9.2f}  " + " ".join(f"{t / tops[0]:.3f}" for t in tops[1:]))
    if args.csv:
        gb.write_dicts(rows, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
