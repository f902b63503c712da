"""Probe of the tensor-memory accelerator's tile copy (`cp.async.bulk.tensor.2d ... tile
.mbarrier::complete_tx::bytes`) on the GPU: one CTA copies one box of a 2-D array through a
tensor map (`compiler/runtime/tensor_map.py`, encoded by the driver) into shared memory, waits
at an mbarrier for its bytes (`mbarrier.arrive.expect_tx`), and writes its shared memory out
byte for byte; the result is compared with `expected` (the box, zeros outside the array, in the
128-byte swizzle or none) and run in the emulator the same way (tests/test_emulator_tma.py).

    python -m tools.tma_probe                    # every variant, each in a process of its own
    python -m tools.tma_probe 2 64 40 0 5 128   # element bytes, box cols, box rows, c0, c1, swizzle
"""

from __future__ import annotations

import sys

import numpy as np

from tilemma.compiler.runtime.tensor_map import TensorMap

ENTRY = "tma_probe"
ROWS, COLS_BYTES = 100, 384  # the global array: 100 rows of 384 bytes (a row stride of 384)


def probe_ptx(box_bytes: int) -> str:
    """The kernel: thread 0 inits the barrier, expects `box_bytes`, issues the copy to shared
    offset 0 (1024-aligned) at coordinates (c0, c1); every thread waits for phase 0, then the CTA
    (128 threads) writes the box's shared bytes to `pout`, 16 a thread a step. `pdata` is the
    mapped array, passed only so that the map has an argument to name (the kernel never reads it)."""
    steps = -(-box_bytes // (128 * 16))
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64",
        f".visible .entry {ENTRY}(",
        "    .param .u64 pdata,", "    .param .align 64 .b8 tmap[128],", "    .param .u64 pout,", "    .param .u32 c0,", "    .param .u32 c1",
        ")", "{",
        f".shared .align 1024 .b8 smem[{max(steps * 2048, 1024)}];", ".shared .align 8 .b8 bar[8];",
        ".reg .b32 %r<16>;", ".reg .b64 %rd<8>;", ".reg .pred %p<4>;",
        "mov.u32 %r1, %tid.x;", "mov.u32 %r2, smem;", "mov.u32 %r3, bar;",
        "ld.param.u32 %r4, [c0];", "ld.param.u32 %r5, [c1];",
        "mov.b64 %rd5, tmap;", "cvta.param.u64 %rd6, %rd5;",
        "setp.eq.u32 %p1, %r1, 0;",
        "@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;",
        "fence.proxy.async.shared::cta;", "bar.sync 0;",
        f"@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r3], {box_bytes};",
        "@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], "
        "[%rd6, {%r4, %r5}], [%r3];",
        "$wait:", "mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;", "@!%p2 bra.uni $wait;",
        "ld.param.u64 %rd2, [pout];", "cvta.to.global.u64 %rd2, %rd2;",
        "mad.lo.u32 %r6, %r1, 16, %r2;", "mul.wide.u32 %rd3, %r1, 16;", "add.u64 %rd4, %rd2, %rd3;",
    ]
    for s in range(steps):
        lines += [f"ld.shared.v4.u32 {{%r7, %r8, %r9, %r10}}, [%r6+{s * 2048}];",
                  f"st.global.v4.u32 [%rd4+{s * 2048}], {{%r7, %r8, %r9, %r10}};"]
    lines += ["ret;", "}"]
    return "\n".join(lines) + "\n"


def case(element_bytes: int, cols: int, rows: int, c0: int, c1: int, swizzle: int, seed: int = 0):
    """(arguments, expected bytes of the box in shared memory): a random 100 x 384-byte array,
    a map of it in `element_bytes` elements with a box of cols x rows at (c0, c1)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (ROWS, COLS_BYTES), dtype=np.uint8)
    tmap = TensorMap(0, element_bytes, (COLS_BYTES // element_bytes, ROWS), (COLS_BYTES,), (cols, rows), swizzle)
    out = np.zeros(max(-(-tmap.box_bytes // 2048) * 2048, 1024), np.uint8)
    args = [data, tmap, out, np.uint32(c0 & 0xFFFFFFFF), np.uint32(c1 & 0xFFFFFFFF)]
    return args, expected(data, element_bytes, cols, rows, c0, c1, swizzle, out.size)


def expected(data: np.ndarray, eb: int, cols: int, rows: int, c0: int, c1: int, swizzle: int, size: int) -> np.ndarray:
    """The shared bytes the copy leaves: row r of the box at r * cols * eb, its element j the
    array's (c1 + r, c0 + j), zero outside it; 16-byte granule g of each 128 bytes at g ^ (row of
    128 bytes % 8) with the 128-byte swizzle, g ^ (row % 4) with the 64-byte one (granules 0-3 of
    each 64-byte row, the row counted in 128 bytes); the rest of `size` untouched (0 here)."""
    out = np.zeros(size, np.uint8)
    row_bytes = cols * eb
    for r in range(rows):
        for j in range(cols):
            y, x = c1 + r, c0 + j
            if 0 <= y < data.shape[0] and 0 <= x < data.shape[1] // eb:
                at = r * row_bytes + j * eb
                for b in range(eb):
                    a = at + b
                    if swizzle:
                        a ^= ((a >> 7) & (swizzle // 16 - 1)) << 4
                    out[a] = data[y, x * eb + b]
    return out


VARIANTS = [  # element bytes, box cols, box rows, c0, c1, swizzle
    (2, 64, 40, 0, 0, 128),  # f16-like, 128-byte rows: the stages' layout
    (2, 64, 40, 64, 30, 128),  # past the array's last rows (zeros)
    (1, 128, 16, 256, 7, 128),  # bytes, past the last columns
    (4, 32, 24, -8, -3, 128),  # negative coordinates (zeros before the array)
    (2, 32, 8, 40, 90, 0),  # no swizzle, 64-byte rows
    (2, 32, 40, 8, 70, 64),  # the 64-byte swizzle (a sparse A's kept values of K 64 stages)
]


def run(variant: tuple, on: str = "gpu") -> int:
    """Mismatched bytes of one variant on the GPU (or the emulator)."""
    args, want = case(*variant)
    box = args[1].box_bytes  # (the shared memory past the box is the kernel's own)
    text = probe_ptx(box)
    if on == "gpu":
        from tilemma.compiler.runtime import cuda_runtime
        out = cuda_runtime.run_kernel(text, ENTRY, (1, 1, 1), (128, 1, 1), args)[1]
    else:
        from tilemma.compiler.verify.emulator import emulate
        out = emulate(text, ENTRY, 1, 128, args)[1]
    return int((out[:box] != want[:box]).sum())


def main(argv: list[str]) -> int:
    if argv:
        print(run(tuple(int(x) for x in argv)))
        return 0
    import subprocess
    for v in VARIANTS:
        r = subprocess.run([sys.executable, "-m", "tools.tma_probe", *map(str, v)], capture_output=True, text=True)
        print(*v, r.stdout.strip() or "ERR " + r.stderr.strip().splitlines()[-1][:120], sep="\t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
