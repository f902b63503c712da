"""Runtime sizes on the shapes of real models (issue 22, item 6), in one run: one tilemma kernel
compiled once for `memref<?x?xf16>` (D = A x B, f16 operands, f32 D) launched eagerly at every
shape, the static kernel compiled for each shape, Triton's plain matmul (`DISABLE_MMA_V3=1`: its
mma.sync path, and its default: wgmma on sm_90, each in its own subprocess) and cuBLAS
(`torch.mm`, f16 D), as TFLOP/s and ratios. The static kernel runs twice: without split-K
(`split_k=1`) and as compiled by default (split-K where its tiles leave SMs idle; its output is
checked too).

    python -m benchmarks.dynamic_shapes [--out results.csv] [--quick] [--shapes 4096x4095x4096 ...]

Eager throughput: the GPU time between two events around `ITERS` back-to-back launches from
Python, divided by them; where the host cannot keep up (small shapes), host time is what this
shows, as a user launching eagerly sees it. The dynamic kernel's output is checked against
torch's f32 matmul at every shape before it is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SHAPES = ([(m, n, k) for m in (1, 16, 64, 128, 512, 4096) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008))]
          + [(1000, 1000, 1000), (257, 129, 4096), (2048, 2048, 256)])
ITERS = 50


def eager_tflops(fn, flops: float, torch) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return flops * ITERS / (start.elapsed_time(stop) * 1e-3) / 1e12


def inputs(m: int, n: int, k: int, torch):
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, device="cuda", generator=g).half()
    b = torch.randn(k, n, device="cuda", generator=g).half()
    return a, b, torch.empty(m, n, device="cuda")


def triton_worker(shapes) -> dict:
    """Best of Triton's configurations per shape (this process's DISABLE_MMA_V3 decides the path)."""
    import torch

    from benchmarks import triton_gemm

    out = {}
    for m, n, k in shapes:
        a, b, d = inputs(m, n, k, torch)
        best, kind = 0.0, ""
        for config in triton_gemm.CONFIGS[2]:
            try:
                compiled = triton_gemm.matmul(a, b, d, config, None)
                t = eager_tflops(lambda: triton_gemm.matmul(a, b, d, config, None), 2.0 * m * n * k, torch)
            except Exception:  # a configuration the shape or the GPU cannot take
                continue
            if t > best:
                best, kind = t, triton_gemm.instruction(compiled.asm["ptx"])
        out[f"{m}x{n}x{k}"] = (best, kind)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the table as CSV here")
    p.add_argument("--quick", action="store_true", help="four shapes only")
    p.add_argument("--shapes", nargs="+", metavar="MxNxK", help="these shapes instead (e.g. odd ones: 4096x4095x4096)")
    p.add_argument("--triton-worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    shapes = SHAPES[::6] if args.quick else SHAPES
    if args.shapes:
        try:
            shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes]
        except ValueError:
            p.error("--shapes: each shape is MxNxK, e.g. 4096x4095x4096")
        if any(len(s) != 3 or min(s) < 1 for s in shapes):
            p.error("--shapes: each shape is MxNxK of positive sizes")
    if args.triton_worker:
        print(json.dumps(triton_worker(shapes)))
        return 0
    import torch

    import tilemma
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

    spec = dict(a="f16", b="f16", acc="f32", c=False)
    [dyn] = tilemma.compile(str(gemm_module(GemmSpec(1, 1, 1, dynamic="mnk", **spec))), sm="90")
    triton = {}
    for name, env in (("triton-mma.sync", {"DISABLE_MMA_V3": "1"}), ("triton", {})):
        argv_ = ([sys.executable, "-m", "benchmarks.dynamic_shapes", "--triton-worker", "1"] + (["--quick"] if args.quick else [])
                 + (["--shapes", *args.shapes] if args.shapes else []))
        proc = subprocess.run(argv_, env={**os.environ, **env}, capture_output=True, text=True, timeout=400)
        triton[name] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
        if proc.returncode:
            print(f"{name}: failed: {proc.stderr[-500:]}", file=sys.stderr)
    rows = []
    for m, n, k in shapes:
        a, b, d = inputs(m, n, k, torch)
        flops = 2.0 * m * n * k
        dyn.launch(a, b, d)
        torch.cuda.synchronize()
        want = a.float() @ b.float()
        err = ((d - want).abs() / (want.abs() + 1)).max().item()
        variant = dyn.bind([a.shape, b.shape, d.shape], [a.stride(), b.stride(), d.stride()]).abi.config
        t_dyn = eager_tflops(lambda: dyn.launch(a, b, d), flops, torch)
        [static] = tilemma.compile(str(gemm_module(GemmSpec(m, n, k, **spec))), sm="90", split_k=1)
        t_static = eager_tflops(lambda: static.launch(a, b, d), flops, torch)
        [split] = tilemma.compile(str(gemm_module(GemmSpec(m, n, k, **spec))), sm="90")
        t_split, splits = t_static, 1
        if split.grid[2] > 1:
            d.zero_()
            split.launch(a, b, d)
            torch.cuda.synchronize()
            err = max(err, ((d - want).abs() / (want.abs() + 1)).max().item())
            t_split, splits = eager_tflops(lambda: split.launch(a, b, d), flops, torch), split.grid[2]
        t_cublas = eager_tflops(lambda: torch.mm(a, b), flops, torch)
        key = f"{m}x{n}x{k}"
        t_ms, kind_ms = triton["triton-mma.sync"].get(key, (0.0, ""))
        t_tr, kind_tr = triton["triton"].get(key, (0.0, ""))
        rows.append((key, t_dyn, t_static, t_split, splits, t_ms, kind_ms, t_tr, kind_tr, t_cublas, err, variant))
    header = ("shape", "dynamic", "static", "static_split_k", "splits", "triton_mma_sync", "path", "triton_default",
              "path", "cublas", "max_rel_err", "dynamic_config")
    if args.out:
        with open(args.out, "w") as f:
            f.write(",".join(header) + "\n")
            for r in rows:
                f.write(",".join(f"{x:.2f}" if isinstance(x, float) and x > 1e-3 else str(x) for x in r) + "\n")
    print(f"{'shape':>18} {'dyn':>7} {'static':>7} {'dyn/st':>6} {'split':>7} {'S':>2} {'tr.ms':>7} {'spl/ms':>7} "
          f"{'triton':>7} {'cublas':>7}  err      config")
    for key, t_dyn, t_static, t_split, splits, t_ms, _, t_tr, kind_tr, t_cublas, err, variant in rows:
        print(f"{key:>18} {t_dyn:7.1f} {t_static:7.1f} {t_dyn / t_static:6.3f} {t_split:7.1f} {splits:>2} {t_ms:7.1f} "
              f"{t_split / t_ms if t_ms else 0:7.3f} {t_tr:7.1f} {t_cublas:7.1f}  {err:.1e}  {variant}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
