"""A compiled-kernel stand-in whose PTX takes a tensor map, for the launch plumbing's tests
(tests/test_tma_launch.py, tests/gpu/test_tma_launch_gpu.py): tools/tma_probe.py's copy with the
parameters in a compiled kernel's order (pointers, then the map) and the ABI saying so
(`KernelABI.tensor_maps`), so that every launch path has to append the map itself.

One CTA of 64 threads: thread 0 copies one 16 x 64-byte box (32 two-byte elements a row, no
swizzle) at coordinates (0, 0) of the map into shared memory, every thread waits at the
mbarrier, then each writes 16 of its bytes to `out`. The map's base is the data's address plus
`OFFSET` (a window's origin: row `ROW0`, byte `COL0`), so `out` is exactly `want(data)`, the
window by NumPy slicing; a launch that ignored the offset would copy the array's corner."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tilemma.compiler.driver.pipeline import CompiledKernel
from tilemma.compiler.runtime.abi import KernelABI, Param
from tilemma.compiler.runtime.tensor_map import TensorMap

ENTRY = "tma_window"
ROWS, ROW_BYTES = 100, 384  # the data: 100 rows of 384 bytes
ROW0, COL0 = 37, 48  # the window's origin (COL0 in bytes, a multiple of 16)
OFFSET = ROW0 * ROW_BYTES + COL0
BOX = (32, 16)  # elements of 2 bytes a row, rows
BOX_BYTES = 2 * BOX[0] * BOX[1]
THREADS = BOX_BYTES // 16

MAP = TensorMap(0, 2, ((ROW_BYTES - COL0) // 2, ROWS - ROW0), (ROW_BYTES,), BOX, 0, OFFSET)

PTX = "\n".join([
    ".version 8.0", ".target sm_90a", ".address_size 64",
    f".visible .entry {ENTRY}(",
    "    .param .u64 p_data,", "    .param .u64 p_out,", "    .param .align 64 .b8 tmap0[128]",
    ")", "{",
    f".shared .align 1024 .b8 smem[{BOX_BYTES}];", ".shared .align 8 .b8 bar[8];",
    ".reg .b32 %r<16>;", ".reg .b64 %rd<8>;", ".reg .pred %p<4>;",
    "mov.u32 %r1, %tid.x;", "mov.u32 %r2, smem;", "mov.u32 %r3, bar;", "mov.u32 %r4, 0;",
    "mov.b64 %rd5, tmap0;", "cvta.param.u64 %rd6, %rd5;",
    "setp.eq.u32 %p1, %r1, 0;",
    "@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;",
    "fence.proxy.async.shared::cta;", "bar.sync 0;",
    f"@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r3], {BOX_BYTES};",
    "@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], "
    "[%rd6, {%r4, %r4}], [%r3];",
    "$wait:", "mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;", "@!%p2 bra.uni $wait;",
    "ld.param.u64 %rd2, [p_out];", "cvta.to.global.u64 %rd2, %rd2;",
    "mad.lo.u32 %r6, %r1, 16, %r2;", "mul.wide.u32 %rd3, %r1, 16;", "add.u64 %rd4, %rd2, %rd3;",
    "ld.shared.v4.u32 {%r7, %r8, %r9, %r10}, [%r6];",
    "st.global.v4.u32 [%rd4], {%r7, %r8, %r9, %r10};",
    "ret;", "}",
]) + "\n"

PARAMS = (Param("p_data", ("a",), (ROWS, ROW_BYTES), "ui8", (ROW_BYTES, 1), 0),
          Param("p_out", ("d",), (BOX_BYTES,), "ui8", (1,), 0))


def abi(tensor_maps: tuple[TensorMap, ...] = (MAP,)) -> KernelABI:
    return KernelABI(ENTRY, (1, 1, 1), (THREADS, 1, 1), PARAMS, sm="sm_90a", ptx_version="8.0",
                     tensor_maps=tensor_maps)


def compiled(tensor_maps: tuple[TensorMap, ...] = (MAP,)) -> CompiledKernel:
    """The kernel as the pipeline would hand it over; `gemm` stands in only for `Kernel.emulate`'s
    size guard (one multiply-add)."""
    gemm = SimpleNamespace(batch=1, m=1, n=1, k=1)
    return CompiledKernel(ENTRY, PTX, "tma", abi(tensor_maps), gemm)  # type: ignore[arg-type]


def data(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (ROWS, ROW_BYTES), dtype=np.uint8)


def want(x: np.ndarray) -> np.ndarray:
    """What `out` holds after a launch on `x`: the window's box, row by row."""
    return x[ROW0:ROW0 + BOX[1], COL0:COL0 + 2 * BOX[0]].reshape(-1)
