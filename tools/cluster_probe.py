"""Probe of a 2-CTA cluster on the GPU (`.reqnctapercluster 2, 1, 1`): what a multicast TMA copy
and an arrival at a peer's mbarrier do, which the warp-specialized kernels' B multicast rests on.

Each CTA of rank r: thread 0 makes two barriers (`full`: one arrival and both boxes' bytes;
`peer`: 32 arrivals), the cluster syncs (`fence.mbarrier_init`, `barrier.cluster`); thread 0
expects 2 boxes of bytes at its `full` and copies the box at column c0 + r * box columns, multicast
to both CTAs (mask 0b11), into shared offset r * box bytes (each CTA writes one half of every
CTA's stage); warp 0's 32 lanes arrive at the peer's `peer` barrier (`mapa`,
`mbarrier.arrive.shared::cluster`). Every thread waits for both barriers' phase
0, the CTA writes its rank and its two boxes' shared bytes out, and the cluster syncs again before
exiting (no CTA leaves while a peer may still arrive at its barriers).

    python -m tools.cluster_probe                 # every variant, each in a process of its own
    python -m tools.cluster_probe 2 64 40 0 5 128 # element bytes, box cols, box rows, c0, c1, swizzle
"""

from __future__ import annotations

import sys

import numpy as np

from tools import tma_probe as T

ENTRY = "cluster_probe"


def probe_ptx(box_bytes: int, cols: int) -> str:
    """The kernel (128 threads a CTA, 2 CTAs a cluster) for boxes of `box_bytes` and `cols` columns;
    `pout` gets per CTA 16 bytes (its rank in the first word) and then its shared memory's two boxes."""
    span = -(-2 * box_bytes // 1024) * 1024
    steps = -(-2 * box_bytes // (128 * 16))
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64",
        f".visible .entry {ENTRY}(",
        "    .param .u64 pdata,", "    .param .align 64 .b8 tmap[128],", "    .param .u64 pout,",
        "    .param .u32 c0,", "    .param .u32 c1",
        ")", ".maxntid 128, 1, 1", ".reqnctapercluster 2, 1, 1", "{",
        f".shared .align 1024 .b8 smem[{max(steps * 2048, span)}];", ".shared .align 8 .b8 bar[16];",
        ".reg .b32 %r<24>;", ".reg .b64 %rd<10>;", ".reg .pred %p<6>;", ".reg .b16 %rs<2>;",
        "mov.u32 %r1, %tid.x;", "mov.u32 %r2, smem;", "mov.u32 %r3, bar;", "add.u32 %r11, %r3, 8;",
        "mov.u32 %r12, %cluster_ctarank;",
        "ld.param.u32 %r4, [c0];", "ld.param.u32 %r5, [c1];",
        "mov.b64 %rd5, tmap;", "cvta.param.u64 %rd6, %rd5;",
        "setp.eq.u32 %p1, %r1, 0;", "setp.lt.u32 %p3, %r1, 32;",
        "@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;",
        "@%p1 mbarrier.init.shared::cta.b64 [%r11], 32;",
        "fence.mbarrier_init.release.cluster;",
        "barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;",
        f"@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r3], {2 * box_bytes};",
        f"mul.lo.u32 %r13, %r12, {box_bytes};", "add.u32 %r14, %r2, %r13;",  # this CTA's half of the stage
        f"mad.lo.u32 %r16, %r12, {cols}, %r4;",  # its box's first column: c0 + rank * cols
        "mov.b16 %rs1, 3;",
        "@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%r14], [%rd6, {%r16, %r5}], [%r3], %rs1;",
        "xor.b32 %r17, %r12, 1;", "mapa.shared::cluster.u32 %r18, %r11, %r17;",
        "@%p3 mbarrier.arrive.shared::cluster.b64 _, [%r18];",
        "$wait:", "mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;", "@!%p2 bra.uni $wait;",
        "$wait2:", "mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r11], 0;", "@!%p4 bra.uni $wait2;",
        "ld.param.u64 %rd2, [pout];", "cvta.to.global.u64 %rd2, %rd2;",
        "mov.u32 %r19, %ctaid.x;", f"mul.wide.u32 %rd7, %r19, {16 + steps * 2048};", "add.u64 %rd2, %rd2, %rd7;",
        "@%p1 st.global.u32 [%rd2], %r12;", "add.u64 %rd2, %rd2, 16;",
        "mad.lo.u32 %r6, %r1, 16, %r2;", "mul.wide.u32 %rd3, %r1, 16;", "add.u64 %rd4, %rd2, %rd3;",
    ]
    for s in range(steps):
        lines += [f"ld.shared.v4.u32 {{%r7, %r8, %r9, %r10}}, [%r6+{s * 2048}];",
                  f"st.global.v4.u32 [%rd4+{s * 2048}], {{%r7, %r8, %r9, %r10}};"]
    lines += ["barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;", "ret;", "}"]
    return "\n".join(lines) + "\n"


def case(element_bytes: int, cols: int, rows: int, c0: int, c1: int, swizzle: int, seed: int = 0):
    """(arguments, expected bytes a CTA writes: its two boxes as `tma_probe.expected` has each,
    the second one box's bytes on, in its 1024-byte-aligned layout)."""
    args, _ = T.case(element_bytes, cols, rows, c0, c1, swizzle, seed)
    tmap = args[1]
    box = tmap.box_bytes
    steps = -(-2 * box // (128 * 16))
    out = np.zeros(2 * (16 + steps * 2048), np.uint8)
    data = args[0]
    want = np.zeros(2 * box, np.uint8)
    for r in range(2):
        half = T.expected(data, element_bytes, cols, rows, c0 + r * cols, c1, 0, box)
        want[r * box:(r + 1) * box] = half
    if swizzle:  # the swizzle is on the absolute address: both boxes as one 1024-aligned span
        logical = np.arange(2 * box)
        placed = logical ^ (((logical >> 7) & (swizzle // 16 - 1)) << 4)
        swizzled = np.zeros_like(want)
        swizzled[placed] = want
        want = swizzled
    return [data, tmap, out, args[3], args[4]], want, steps


def run(variant: tuple, on: str = "gpu") -> int:
    """Mismatched bytes of one variant (both CTAs' ranks and boxes) on the GPU or the emulator."""
    args, want, steps = case(*variant)
    box = args[1].box_bytes
    text = probe_ptx(box, variant[1])
    if on == "gpu":
        from tilemma.compiler.runtime import cuda_runtime
        out = cuda_runtime.run_kernel(text, ENTRY, (2, 1, 1), (128, 1, 1), args)[1]
    else:
        from tilemma.compiler.verify.emulator import emulate
        out = emulate(text, ENTRY, (2, 1, 1), 128, args)[1]
    bad = 0
    stride = 16 + steps * 2048
    for cta in range(2):
        at = cta * stride
        bad += int(out[at:at + 4].view(np.uint32)[0] != cta)
        bad += int((out[at + 16:at + 16 + 2 * box] != want).sum())
    return bad


VARIANTS = [  # element bytes, box cols, box rows, c0, c1, swizzle
    (2, 64, 32, 0, 0, 128),  # f16, 128-byte rows: B's blocks, one CTA's half each
    (2, 64, 40, 64, 80, 128),  # past the array's last rows
    (1, 128, 16, 128, 7, 128),  # bytes
    (2, 32, 16, 8, 3, 64),  # the 64-byte swizzle
    (2, 32, 8, 40, 90, 0),  # none
]


def main(argv: list[str]) -> int:
    if argv:
        print(run(tuple(int(x) for x in argv)))
        return 0
    import subprocess
    for v in VARIANTS:
        r = subprocess.run([sys.executable, "-m", "tools.cluster_probe", *map(str, v)], capture_output=True, text=True)
        print(*v, r.stdout.strip() or "ERR " + r.stderr.strip().splitlines()[-1][:120], sep="\t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
