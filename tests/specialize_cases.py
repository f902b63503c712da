"""The warp-specialized kernels (`producers=4`) the CPU and GPU tests both run: every operand family
the producer warpgroup copies as stored or transposes by the fill, odd sizes (ragged M, N and K),
rings that wrap, the stages kept in flight or waited for, a batch and an epilogue."""

from __future__ import annotations

from tilemma.compiler.driver.gemm_generator import GemmSpec

SPECIALIZED = dict(producers=4, tma=0)  # (copying by cp.async: the TMA's are TMA_CASES')

CASES = [  # (spec, extra options, the sm_90 kernel's instruction)
    (GemmSpec(130, 200, 1000, "f16", "f16", "f32"), {}, "mma"),
    (GemmSpec(130, 200, 1000, "bf16", "bf16", "f32", a_layout="col", b_layout="col"), {}, "mma"),
    (GemmSpec(192, 256, 700, "tf32", "tf32", "f32", b_layout="col", rounding="rna"), {}, "mma"),
    (GemmSpec(256, 256, 512, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"), {}, "mma"),
    (GemmSpec(130, 256, 600, "s8", "s8", "s32", b_layout="col"), {}, "mma"),
    # the transposing fill done by the producers (their words held between loads and stores):
    # an N-major 8-bit B, both 8-bit operands, a rounded tf32 N-major B, a batch
    (GemmSpec(130, 256, 600, "s8", "s8", "s32"), {}, "mma"),
    (GemmSpec(128, 256, 512, "s8", "s8", "s32", a_layout="col"), {"pair_bytes": False}, "mma"),
    # an M-major 8-bit A the consumers take from registers (byte-pair reads of the stage), B filled
    (GemmSpec(128, 256, 512, "s8", "s8", "s32", a_layout="col"), {}, "mma"),
    (GemmSpec(192, 128, 700, "tf32", "tf32", "f32", rounding="rna"), {"warps": "8x1", "warp_tile": "1x16"}, "mma"),
    # 128 x 128 CTAs: the fill's loads a stage ahead of its stores (`loads_ahead`), ragged M, N, K
    (GemmSpec(200, 136, 520, "s8", "s8", "s32", a_layout="col"), {"warps": "8x1", "warp_tile": "1x16"}, "mma"),
    (GemmSpec(96, 256, 384, "u8", "u8", "s32", batch=2, bcast="b"), {}, "mma"),
    (GemmSpec(128, 256, 1024, "f16", "f16", "f32", pre_compressed=True), {"tma": 0}, "mma.sp"),  # (TMA_CASES: tma)
    (GemmSpec(96, 64, 320, "f16", "f16", "f32", batch=3, bias="col", act="gelu", out="f16"), {}, "mma"),
    (GemmSpec(200, 136, 72, "f16", "f16", "f32", b_layout="col"), {"stages": 2}, "mma"),  # products waited for
    (GemmSpec(64, 128, 64, "f16", "f16", "f32"), {}, "mma"),  # one stage: the producers' drain alone
    # 16 consumer warps: the registers they take are their share of what the producers give back
    (GemmSpec(256, 128, 512, "f16", "f16", "f32", pre_compressed=True),
     {"warps": "16x1", "warp_tile": "1x16", "stages": 2, "tma": 0}, "mma.sp"),
]

# The producers' copies by the TMA (`tma`): the families whose stages are copied as stored, at
# sizes whose rows are 16-byte multiples (a tensor map's strides) but not of the tiles (the TMA's
# zeros past the edges), either operand order, a batch (3-d maps) against a broadcast B (2-d),
# a pre-compressed A (metadata on cp.async beside the TMA), two stages, one stage, 16 consumers.
# Stages wider than a swizzle span, copied as one box of several (`warp-tma-blocks`): an M-major A
# and an N-major B whose last tile's blocks partly leave the array (zeros), a batch (4-d maps), a
# pre-compressed A with a ragged K.
TMA = dict(producers=4, tma=1)

TMA_CASES = [
    (GemmSpec(130, 200, 1000, "f16", "f16", "f32"), {}, "mma"),
    (GemmSpec(136, 200, 1000, "bf16", "bf16", "f32", a_layout="col", b_layout="col"), {}, "mma"),
    (GemmSpec(256, 256, 516, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"), {}, "mma"),
    (GemmSpec(130, 256, 608, "s8", "s8", "s32", b_layout="col"), {}, "mma"),
    (GemmSpec(96, 256, 384, "u8", "u8", "s32", batch=2, bcast="b", b_layout="col"), {}, "mma"),
    (GemmSpec(128, 256, 1024, "f16", "f16", "f32", pre_compressed=True), {}, "mma.sp"),
    (GemmSpec(96, 64, 320, "f16", "f16", "f32", batch=3, bias="col", act="gelu", out="f16"), {}, "mma"),
    (GemmSpec(200, 136, 72, "f16", "f16", "f32", b_layout="col"), {"stages": 2}, "mma"),
    (GemmSpec(64, 128, 64, "f16", "f16", "f32"), {}, "mma"),
    (GemmSpec(256, 128, 512, "f16", "f16", "f32", pre_compressed=True),
     {"warps": "16x1", "warp_tile": "1x16", "stages": 2}, "mma.sp"),
    (GemmSpec(192, 320, 1000, "f16", "f16", "f32", a_layout="col"), {}, "mma"),
    (GemmSpec(96, 192, 320, "bf16", "bf16", "f32", batch=2), {}, "mma"),
    (GemmSpec(256, 320, 1000, "f16", "f16", "f32", pre_compressed=True), {}, "mma.sp"),
]

# ... and in clusters of 2 CTAs (`cluster`: pairs along M sharing B's stages, each CTA's producer
# copying half of B's blocks to both, multicast): an even number of tile rows, B in one block a
# stage (its rank-0 CTA copies it all), a batch, a pre-compressed A of 128- and 256-row tiles.
CLUSTER = dict(producers=4, tma=1, cluster=2)

CLUSTER_CASES = [
    (GemmSpec(130, 200, 1000, "f16", "f16", "f32"), {}, "mma"),
    (GemmSpec(136, 200, 1000, "bf16", "bf16", "f32", a_layout="col", b_layout="col"), {}, "mma"),
    (GemmSpec(256, 256, 516, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"), {}, "mma"),
    (GemmSpec(130, 256, 608, "s8", "s8", "s32", b_layout="col"), {}, "mma"),
    (GemmSpec(160, 256, 384, "u8", "u8", "s32", batch=2, bcast="b", b_layout="col"), {}, "mma"),
    (GemmSpec(256, 256, 1024, "f16", "f16", "f32", pre_compressed=True), {}, "mma.sp"),
    (GemmSpec(200, 64, 320, "f16", "f16", "f32", batch=3, bias="col", act="gelu", out="f16"), {}, "mma"),
    (GemmSpec(200, 136, 72, "f16", "f16", "f32", b_layout="col"), {"stages": 2}, "mma"),
    (GemmSpec(512, 128, 512, "f16", "f16", "f32", pre_compressed=True),
     {"warps": "16x1", "warp_tile": "1x16", "stages": 2}, "mma.sp"),
]

# ... and persistent (`persistent`: a grid of that many CTAs, each looping over tiles pid, pid + P,
# ...; the stage ring and its phases carried on from tile to tile): narrow tiles so that each CTA
# takes two or three, unevenly, rings that wrap within and across tiles (K a whole number of rings,
# or not: 5 stages a tile on rings of 4 and 3), both operand orders, tf32 truncated, 8-bit, a
# pre-compressed A with either B, an epilogue, two stages, 16 consumers.
PERSISTENT = dict(producers=4, tma=1, persistent=3)

PERSISTENT_CASES = [
    (GemmSpec(130, 200, 1024, "f16", "f16", "f32"), {"warps": "8x1", "warp_tile": "1x8"}, "mma"),
    (GemmSpec(136, 200, 1024, "bf16", "bf16", "f32", a_layout="col", b_layout="col"),
     {"warps": "8x1", "warp_tile": "1x8"}, "mma"),
    (GemmSpec(256, 256, 512, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"),
     {"warps": "8x1", "warp_tile": "1x16"}, "mma"),
    (GemmSpec(130, 256, 1024, "s8", "s8", "s32", b_layout="col"), {"warps": "8x1", "warp_tile": "1x16"}, "mma"),
    (GemmSpec(256, 512, 1024, "f16", "f16", "f32", pre_compressed=True),
     {"warps": "8x1", "warp_tile": "1x16"}, "mma.sp"),
    (GemmSpec(256, 256, 512, "f16", "f16", "f32", pre_compressed=True, b_layout="col"),
     {"warps": "8x1", "warp_tile": "1x16", "persistent": 2}, "mma.sp"),
    (GemmSpec(200, 256, 256, "f16", "f16", "f32", bias="col", act="gelu", out="f16"),
     {"warps": "8x1", "warp_tile": "1x8"}, "mma"),
    (GemmSpec(200, 136, 256, "f16", "f16", "f32", b_layout="col"),
     {"warps": "8x1", "warp_tile": "1x8", "stages": 2, "persistent": 4}, "mma"),
    (GemmSpec(512, 128, 512, "f16", "f16", "f32", pre_compressed=True),
     {"warps": "16x1", "warp_tile": "1x16", "stages": 2, "persistent": 1}, "mma.sp"),
    # tiles of 5 stages on a ring of 4 (and of 3): a tile's stage 0 in whatever buffer the ring reached
    (GemmSpec(256, 256, 320, "f16", "f16", "f32"), {"warps": "8x1", "warp_tile": "1x8", "persistent": 3}, "mma"),
    (GemmSpec(256, 256, 320, "f16", "f16", "f32", pre_compressed=True, b_layout="col"),
     {"warps": "8x1", "warp_tile": "1x16", "stages": 3, "persistent": 2}, "mma.sp"),
]
