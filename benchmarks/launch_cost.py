"""Host time per launch, in one run: tilemma's checked `Kernel.launch` on torch tensors, its
`launch_unchecked` on addresses, the kernel as a `tilemma.torch` custom op, `cuda_runtime.launch`
(the benchmarks' path), and as anchors `torch.mm` and a trivial Triton kernel (issue 22, item 3).

    python -m benchmarks.launch_cost [--launches 20000] [--size 64] [--profile]

Each figure is the median over rounds of the host wall time of a batch of back-to-back launches,
divided by the batch (the GPU is synchronized between batches, untimed, so that a full launch
queue never blocks the host: the kernels here run for a few microseconds). Needs a GPU, torch and
(for its row) Triton.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

BATCH = 200


def per_call_us(fn, launches: int, torch) -> float:
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(max(1, launches // BATCH)):
        began = time.perf_counter()
        for _ in range(BATCH):
            fn()
        rounds.append((time.perf_counter() - began) / BATCH * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def triton_copy():
    """A trivial Triton kernel (y = x over n elements) and its launch, or None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def copy(x, y, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)

    return copy


def raw_launch(kernel, pointers: list[int], stream: int):
    """The driver's cuLaunchKernel through ctypes with the kernel's prepared parameters and nothing
    else (no context switch, no argument writes): the floor under `launch_unchecked`."""
    kernel.launch_unchecked(*pointers, stream=stream)
    launcher = kernel._launch.launcher(0)
    call, *fixed = launcher._call
    fixed[-1:-1] = [stream or None]  # cuLaunchKernel(f, grid, block, shared, stream, params, extra)
    return lambda: call(*fixed, None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launches", type=int, default=20000)
    p.add_argument("--size", type=int, default=64, help="M = N = K of the f16 GEMM (default 64)")
    p.add_argument("--profile", action="store_true", help="also print cProfile's top entries for Kernel.launch")
    args = p.parse_args(argv)
    import torch

    import tilemma
    import tilemma.torch
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
    from tilemma.compiler.runtime import cuda_runtime

    n = args.size
    major, minor = min((9, 0), cuda_runtime.driver_max_ptx())
    [k] = tilemma.compile(str(gemm_module(GemmSpec(n, n, n, "f16", "f16", "f32"))), ptx=f"{major}.{minor}")
    a, b = torch.randn(n, n, device="cuda").half(), torch.randn(n, n, device="cuda").half()
    c, d = torch.randn(n, n, device="cuda"), torch.empty(n, n, device="cuda")
    pointers = [t.data_ptr() for t in (a, b, c, d)]
    dh = torch.empty(n, n, device="cuda", dtype=torch.half)
    gemm = tilemma.torch.custom_op(k, "launch_cost::gemm")
    stream = torch.cuda.current_stream()
    handle = stream.cuda_stream

    rows = [
        ("tilemma Kernel.launch (torch tensors, checked)", lambda: k.launch(a, b, c, d)),
        ("tilemma Kernel.launch (stream=torch stream)", lambda: k.launch(a, b, c, d, stream=stream)),
        ("tilemma Kernel.launch_unchecked (addresses)", lambda: k.launch_unchecked(*pointers, stream=handle)),
        ("tilemma.torch custom op (allocates D)", lambda: gemm(a, b, c)),
        ("cuda_runtime.launch (addresses)", lambda: cuda_runtime.launch(k.ptx, k.name, k.grid, k.block,
                                                                        [*pointers, *k.abi.tensor_maps],
                                                                        k.shared_bytes, handle)),
        ("cuLaunchKernel alone (ctypes, the floor)", raw_launch(k, pointers, handle)),
        ("torch.mm (f16, allocates)", lambda: torch.mm(a, b)),
        ("torch.mm out= (f16)", lambda: torch.mm(a, b, out=dh)),
        ("torch add_ (f32)", lambda: c.add_(0.0)),
    ]
    copy = triton_copy()
    if copy is not None:
        x, y = torch.randn(4096, device="cuda"), torch.empty(4096, device="cuda")
        rows.append(("Triton trivial kernel (3 arguments)", lambda: copy[(1,)](x, y, 4096, BLOCK=1024)))
    else:
        print("(no Triton: its row is left out)", file=sys.stderr)
    torch.cuda.synchronize()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  kernel {k.name} grid {k.grid}")
    print(f"{'what':<52} {'host us/launch':>15}")
    for name, fn in rows:
        print(f"{name:<52} {per_call_us(fn, args.launches, torch):>15.2f}", flush=True)
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(2000):
            k.launch(a, b, c, d)
        profiler.disable()
        torch.cuda.synchronize()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
