"""Kernel configurations: the candidates per type family, the size classes, and the tuning cache.

A configuration is what `tile-plan` takes as options (warps, warp tile, stages, stage K).
`tilemma tune` times the candidates of a family on the GPU for each size class and writes the
winners to a JSON cache keyed by target, types and size class, marked with the tilemma that
measured them (`version.tilemma_key`; another tilemma's cache is ignored); the compiler reads that cache
(`CompileOptions.tune_cache`, default `$TILEMMA_TUNE_CACHE`) whenever the options force no
configuration. Without a cache entry the distribution pass takes the target's `DEFAULTS`, with
size-class adjustments, cut to fit the target's shared memory (`fit_shared`).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

from tilemma.compiler.core import targets
from tilemma.compiler.core.version import tilemma_key
from tilemma.compiler.core.elements import BY_PTX, FP8, ptx_names


STAGES = (2, 3, 4, 5)  # the ring sizes a staged kernel may have (0: not staged)
STAGE_KS = (16, 32, 64, 128, 256, 512, 1024)  # elements of K a stage may hold (1024 1-bit: 128 bytes)


def pair_error(text, option: str) -> str | None:
    """Why `text` is not a size pair like 2x4 (None if it is)."""
    try:
        x, y = (int(p) for p in str(text).lower().split("x"))
    except ValueError:
        return f"{option} must look like 2x4, got {text!r}"
    return None if x > 0 and y > 0 else f"{option} must be positive, got {text!r}"


def stages_error(stages, automatic: bool = True) -> str | None:
    if isinstance(stages, int) and not isinstance(stages, bool) and stages in ((-1, 0) if automatic else (0,)) + STAGES:
        return None
    return (f"stages must be {'-1 (automatic), ' if automatic else ''}0 (no shared memory) or "
            f"{STAGES[0]}..{STAGES[-1]}, got {stages!r}")


def stage_k_error(stage_k, automatic: bool = True) -> str | None:
    if isinstance(stage_k, int) and not isinstance(stage_k, bool) and stage_k in ((0,) if automatic else ()) + STAGE_KS:
        return None
    return (f"stage-k must be {'0 (automatic) or ' if automatic else ''}one of "
            f"{', '.join(map(str, STAGE_KS))}, got {stage_k!r}")


@dataclass(frozen=True)
class Config:
    warps: str
    warp_tile: str
    stages: int
    stage_k: int = 64

    def __str__(self) -> str:
        return f"warps={self.warps} warp-tile={self.warp_tile} stages={self.stages} stage-k={self.stage_k}"

    def error(self) -> str | None:
        """Why this is not a configuration the options could give (None if it is): the checks
        of tile-plan's options, with nothing left automatic."""
        return (pair_error(self.warps, "warps") or pair_error(self.warp_tile, "warp-tile")
                or stages_error(self.stages, automatic=False) or stage_k_error(self.stage_k, automatic=False))


# Candidates of the staged schedule per operand family, which `tilemma tune` times.
CANDIDATES: dict[str, tuple[Config, ...]] = {
    "16bit": (
        Config("2x2", "4x8", 3, 64),
        Config("2x2", "4x8", 4, 32),
        Config("2x2", "4x8", 4, 64),
        Config("2x2", "2x8", 3, 64),
        Config("2x2", "2x8", 4, 32),
        Config("2x4", "4x8", 3, 64),
        Config("4x2", "2x8", 3, 64),
        Config("2x4", "2x8", 4, 32),
    ),
    # 8-bit operands (B K-major): the same tiles, K twice as long per byte of shared memory
    "8bit": (
        Config("2x2", "4x8", 3, 128),
        Config("2x2", "4x8", 4, 64),
        Config("2x2", "4x8", 4, 128),
        Config("2x2", "2x8", 3, 128),
        Config("2x4", "4x8", 3, 128),
        Config("4x2", "2x8", 3, 128),
    ),
    # tf32 (f32 in memory, B K-major)
    "32bit": (
        Config("2x2", "4x8", 3, 32),
        Config("2x2", "4x8", 4, 32),
        Config("2x2", "4x8", 3, 64),
        Config("2x2", "2x8", 4, 32),
        Config("2x4", "4x8", 3, 32),
        Config("4x2", "2x8", 3, 32),
    ),
    # f64 (m16n8k16, B row-major or K-major): two registers a value, so smaller warp tiles
    "64bit": (
        Config("4x2", "2x4", 3, 32),
        Config("2x4", "2x4", 3, 32),
        Config("2x2", "2x4", 3, 16),
        Config("2x2", "2x4", 4, 16),
        Config("2x2", "2x4", 3, 32),
        Config("2x4", "2x4", 3, 16),
        Config("4x2", "2x4", 3, 16),
        Config("2x2", "4x2", 3, 16),
        Config("4x4", "2x2", 3, 16),
    ),
    # 4- and 1-bit operands (B K-major): the 8-bit tiles, K rows of the same bytes
    "4bit": (
        Config("2x2", "4x8", 3, 256),
        Config("2x2", "4x8", 4, 128),
        Config("2x2", "2x8", 3, 256),
        Config("2x4", "4x8", 3, 256),
    ),
    "1bit": (
        Config("2x2", "4x8", 3, 1024),
        Config("2x2", "4x8", 4, 512),
        Config("2x2", "2x8", 3, 1024),
        Config("2x4", "4x8", 3, 1024),
    ),
}
# What the distribution pass takes when the options force no configuration and the tuning cache
# has none, per target and schedule (`plan.default_schedule`), read through `default`.
# sm_90's: each measured on an H100 at 4096^3 (benchmarks/results/h100-2026-11-23-defaults.csv)
# among the configurations that do not spill.
_H100: dict[str, Config] = {
    "16bit": Config("2x2", "4x8", 3, 64),
    # warpgroups multiplying by wgmma.mma_async (`--wgmma`, sm_90a; `plan_warpgroups.plan_wgmma`): two
    # warpgroups of m64n256 (128 x 256 CTAs), 4 stages of 128-byte K rows, one stage's products
    # running on while the next's are issued (the copies 2 stages ahead). H200, TFLOP/s, f16 / B
    # K-major / bf16 (results/h200-2026-11-27-wgmma-async-configs.csv): 4096^3 679 / 678 / 698,
    # 8192^3 661 / 725 / 705; 3 stages (the copies one stage ahead) 506 / 503 / 508; 128 x 128 CTAs
    # 545 / 535 / 547 (4 stages), 509 / 517 / 525 (5). Waiting for each stage's products
    # (results/h200-2026-11-27-wgmma-first.csv, 3 stages) gave 557 / 562 / 560 at 4096^3.
    "16bit-wgmma": Config("8x1", "1x32", 4, 64),
    # 8-bit integers (K-major) by warpgroups: the 16-bit ones' tiles and stage bytes (K 128). H200,
    # TOP/s at 4096^3 / 8192^3 / 4096x11008x4096 (results/h200-2026-11-27-s8-wgmma-configs.csv; cuBLAS
    # 881 / 952 / 865): 1340 / 1501 / 1280; 256 x 128 CTAs 1294 / 1457 / 1255, 192 x 256 1218 / 1485 /
    # 1258, 3 stages 963 / 1026 / 920, 128 x 128 1031 / 1141 / 1001
    "8bit-wgmma": Config("8x1", "1x32", 4, 128),
    # tf32 (f32 operands) by warpgroups: the 16-bit ones' tiles and stage bytes (K 32), K-major A and
    # B copied as stored (truncated), copied and rounded in place, or a transposed one filled
    # (`plan_warpgroups.tf32_staging`). H200 4096^3 TFLOP/s (results/h200-2026-11-27-tf32-wgmma-matrix-shapes.csv):
    # 382 / 231 / B row 206 (cuBLAS 408, Triton's mma.sync path 211-217)
    "tf32-wgmma": Config("8x1", "1x32", 4, 32),
    "tf32-wgmma-rounded": Config("8x1", "1x32", 4, 32),
    "tf32-wgmma-fill": Config("8x1", "1x32", 4, 32),
    # a pre-compressed sparse A by wgmma.mma_async.sp (sm_90a): two warpgroups of m64n256 (128 x 256
    # CTAs), 4 stages of K 64 (A's kept values in the 64-byte swizzle), a stage's products in flight
    # (the loop unrolled by two for their metadata registers, `warp-unroll-sparse`), filled by a
    # producer warpgroup (`WGMMA_PRODUCERS`). H100, dense-equivalent TFLOP/s at 4096^3 / 8192^3
    # (results/h100-2026-11-28-sparse-producers-configs.csv, cuSPARSELt 907 / 1061 in the same call):
    # 845 / 911; without producers 772 (-in-flight-4096.csv); the former default, four m64n128
    # warpgroups (256 x 128) of 2 stages of K 128, 774 / 838 (694 / 751 with producers: two stages
    # keep nothing in flight); 128 x 128 of 4 K 128 stages with producers 723 / 707. Before the
    # products could stay in flight (ptxas had serialized those kernels, C7513), 256 x 128 of 2 K 128
    # stages led (H200, results/h200-2026-11-27-sparse-wgmma-configs.csv: 790-812 / 850-858; 128 x 256
    # of 4 K 64 stages 701 / 736).
    "sparse-wgmma": Config("8x1", "1x32", 4, 64),
    # ... with a K-major B: stages of K 64 (B's 128-byte rows; A's kept values in the 64-byte swizzle),
    # 128 x 256 CTAs of 4: 4096^3 / 8192^3 / 4096x11008x4096 700 / 712 / 685 (mma.sp 577 / 544 / 591;
    # 5 stages 640 / 688 / 632, 256 x 128 of 4 637 / 653 / 618, 2 stages 511 / 566 / 503;
    # results/h200-2026-11-27-sparse-wgmma-bcol-configs.csv)
    "sparse-wgmma-k-major-b": Config("8x1", "1x32", 4, 64),
    "8bit": Config("2x2", "4x8", 3, 128),
    # through the transposing fill (plan.default_schedule: the operands filled), H200 at 4096^3,
    # TOP/s (benchmarks/results/h200-2026-11-27-fill-configs.csv): K 64 stages leave the registers
    # for a 4x8 warp tile (K 128 ones spill there). An N-major B 619 (4x2 of 2x8, K 128: 483);
    # an M-major A 632 (4x2 of 4x8: 547); both 439 (4x2 of 2x8, K 128: 368). Triton's mma.sync
    # path in the same run: 483, 429, 324; the K-major s8 default 851.
    "8bit-fill-b": Config("4x2", "4x8", 4, 64),
    "8bit-fill-a": Config("2x4", "4x8", 4, 64),
    "8bit-fill-ab": Config("4x2", "4x8", 4, 64),
    # an N-major B read by byte-pair ldmatrix .trans (`#warp.schedule` pair_bytes), H200, TOP/s
    # (results/h200-2026-11-27-pair-bytes-configs.csv): K 128 stages spill 72-80 bytes with the 4x8
    # warp tile (the prmt results beside the prefetched fragments); 4 stages of K 64 do not:
    # 4096^3 807 (3 of K 128: 777), 8192^3 847 (796), 512x11008x4096 677 (651), 2048x2048x256
    # 254 (249); 4x2 warps 748 / 816 / 500 / 218. The K-major default 890 / 942 / 757 / 257.
    # Reads interleaved (INTERLEAVED_READS) keep 3 stages of K 128 from spilling, and lose:
    # 765 / 809 / 672 / 257 (results/h200-2026-11-27-pair-bytes-interleaved.csv; A and both alike).
    "8bit-pairs-b": Config("2x2", "4x8", 4, 64),
    # an M-major A read by byte pairs (-a), and both (-ab): the same tiles and stages
    # (results/h200-2026-11-27-pair-bytes-a-configs.csv), A / both: 4096^3 805 / 781 (2x4 warps
    # 779 / 729, 4x2 767 / 704, 2x4 of 3 K 128 stages 801 / 708; the fill 633 / 451), 8192^3 853 /
    # 842 (2x4 of 3 K 128 891 / 789), 512x11008x4096 679 / 607 (fill 430 / 284), 2048x2048x256
    # 245 / 229. 3 stages of K 128 spill 16-24 bytes with 2x2 warps.
    "8bit-pairs-a": Config("2x2", "4x8", 4, 64),
    "8bit-pairs-ab": Config("2x2", "4x8", 4, 64),
    # (the narrower warp tiles of small problems: HALVED_ROWS_STAGES)
    # rows not 4-byte aligned, gathered element by element (plan.gatherable): stages of half the
    # K keep the 4x8 warp tile's registers (3 stages of K 64 spill 88-160 bytes); not yet timed
    "16bit-gather": Config("2x2", "4x8", 4, 32),
    "8bit-gather": Config("2x2", "4x8", 4, 64),
    "fp8": Config("2x2", "2x8", 3, 128),  # two f16 HMMAs on converted registers: 4x8 spills
    "32bit": Config("2x2", "4x8", 3, 32),
    # an M-major A or a row-major B (warp.load_shared), H200 at 4096^3 (TFLOP/s, B row / A col / both;
    # benchmarks/results/h200-2026-11-27-tf32-configs.csv): 4x8 warp tiles spill 8-44 bytes and still
    # beat 2x8's 131 / 144 / 131: 2x4 warps (LARGE_WARPS) 178 / 159 / 161, 2x2 171 / 157 / 167
    "32bit-row-b": Config("2x2", "4x8", 3, 32),
    # tf32 operands fed as they are (`rounding trunc`: no cvt instructions): the rna tiles, and 2x4
    # warps from medium problems on (MEDIUM_WIDE). rna keeps a cvt per fragment register: rounding
    # each stage once in shared memory instead (each thread its own cp.async chunks after the wait,
    # ld.shared.v4 + 4 cvt + st.shared.v4, before the barrier; tried 2026-11-27) ran 4x slower on an
    # H200 (4096^3 B K-major 49 against 193 TFLOP/s): a second pass over the stage, with every warp
    # held at the barrier, on kernels whose shared-memory reads already bound them
    "32bit-trunc": Config("2x2", "4x8", 3, 32),
    "32bit-row-b-trunc": Config("2x2", "4x8", 3, 32),
    "64bit": Config("4x2", "2x4", 3, 32),  # 61 TFLOP/s, cuBLAS 61; 2x2 warps x K 16: 48
    "sparse-16bit": Config("2x2", "4x8", 4, 64),  # pre-compressed A: 481 (K 32 stages: 445); 2x4 of 4x4: 320
    "4bit": Config("2x2", "4x8", 3, 256),  # the 8-bit default's bytes; not timed (sm_90 emulates s4)
    # s4 as s8 mmas (sm_90): 416 TOP/s (`tilemma tune`, s8's default 740 in that run) though it
    # spills 32 bytes; 2x8 (no spills) 304, 3 stages of K 256 393
    "4bit-widened": Config("2x2", "4x8", 4, 128),
    "1bit": Config("2x2", "4x8", 3, 1024),  # the same bytes; not timed
    # 4-bit integers through the transposing fill: the 8-bit fill's tiles and stage bytes. s4 as s8
    # mmas, H200, TOP/s at 4096^3 / 8192^3 (results/h200-2026-11-27-int4-fill-configs.csv; the
    # K-major default 416 / 432 in the same run): B row-major 386 / 408, A M-major 387 / 409; stages
    # of K 256 lose (the fill's words double: 4x2 of 4x8 283 / 288 for B). Both filled: 4x2 of 4x8
    # 259 / 262 there, 4x2 of 2x8 275 / 287 (results/h200-2026-11-27-int4-fill.csv, the defaults
    # re-run). The s4 mma itself (sm_80-sm_89) takes the same tiles, not timed.
    "4bit-fill-b": Config("4x2", "4x8", 4, 128),
    "4bit-fill-a": Config("2x4", "4x8", 4, 128),
    "4bit-fill-ab": Config("4x2", "2x8", 4, 128),
    "4bit-widened-fill-b": Config("4x2", "4x8", 4, 128),
    "4bit-widened-fill-a": Config("2x4", "4x8", 4, 128),
    "4bit-widened-fill-ab": Config("4x2", "2x8", 4, 128),
}
# wgmma kernels whose default CTAs would not fill a wave, by wgmma schedule (`plan_warpgroups.wgmma_schedule`;
# the dense ones' for those not named). Dense: m64n128 warpgroups and 4 stages: 512x4096x4096 (H200,
# f16 / B K-major / bf16) 546 / 519 / 555 (results/h200-2026-11-27-wgmma-async-configs.csv); waiting
# for each stage, 480 / 483 / 480 against the wide CTAs' 414 / 433 / 416 (64 CTAs; 128 with these),
# results/h200-2026-11-27-wgmma-first.csv. Sparse with an N-major B: two warpgroups (128 x 128 CTAs),
# 4 stages of K 128: 512x4096x4096 646 against the default's 428 (64 CTAs) and mma.sp's 464
# (results/h200-2026-11-27-sparse-wgmma-k128.csv).
# tf32 rounded in place or filled: none narrower: the 128 x 256 CTAs, their K split where they leave SMs
# idle (`split`), are the faster (their stage's rounding or fill is shared by twice the columns): H200,
# rna 512x4096x4096 / 512x4096x11008 / 128x11008x4096 203 / 224 / 168 TFLOP/s against 160 / 166 / 100
# with 128 x 128 CTAs, N-major B 176 / 198 / 137 against 121 / 124 / 74
# (results/h200-2026-11-27-tf32-wgmma-split.csv).
WGMMA_NARROW = {"16bit-wgmma": Config("8x1", "1x16", 4, 64), "sparse-wgmma": Config("8x1", "1x16", 4, 128),
                "tf32-wgmma-rounded": Config("8x1", "1x32", 4, 32), "tf32-wgmma-fill": Config("8x1", "1x32", 4, 32)}
# sm_90a kernels of at least this many rows take the warpgroups without being asked (`plan.plan`),
# by wgmma schedule:
# - 16-bit: H200, wgmma / mma.sync defaults over the matrix's 21 shapes x f16 / bf16 x B row / col
#   (results/h200-2026-11-27-wgmma-matrix-shapes.csv): 512 rows and up 1.32-1.75x (4096^3 f16 678
#   against 438), 2048x2048x256 1.02-1.05x, 1000^3 0.94-1.0x; 128 rows 0.95-1.13x, 64 rows and
#   fewer 0.81-1.15x (mostly below).
# - sparse (a pre-compressed A): wgmma.sp / mma.sp over the matrix's shapes (H200,
#   results/h200-2026-11-27-sparse-wgmma-matrix-shapes.csv): 512 rows and up 1.05-1.41x, 16 and
#   64 rows 1.09-1.56x, 128 rows 0.97-1.30x, 1000^3 0.98x, 2048x2048x256 1.0x; one row 0.95-1.06x.
# - sparse with a K-major B (stages of K 64): against stop 38's mma.sp cells (H200,
#   results/h200-2026-11-27-matrix-sm90a-s8-sparse.csv against -matrix-sparse-s8.csv) 4096-class
#   1.26-1.40x, 512 rows 0.98-1.20x, 1000^3 0.89x, 2048x2048x256 1.0x; 128 rows and fewer 0.73-1.09x.
# - 8-bit integers (K-major): wgmma / mma.sync, H200, TOP/s
#   (results/h200-2026-11-27-s8-wgmma-matrix-shapes.csv): 4096^3 1337 / 890 (cuBLAS 879, Triton 1080),
#   8192^3 1373 / 958, 512x4096x4096 1215 / 766; 512 rows and up 1.17-1.60x, 1000^3 1.19x,
#   2048x2048x256 0.99x; 257x129x4096 0.71x (six CTAs: mma.sync's split K fills the SMs), 128 rows
#   0.84-1.05x, 64 rows 0.82-1.17x.
# - tf32 (wgmma / mma.sync over the matrix's shapes, H200, results/h200-2026-11-27-tf32-wgmma-matrix-shapes.csv):
#   truncated K-major (cp.async as stored) 4096-class 369-400 TFLOP/s, 512 rows 272-293 (mma.sync on an
#   H100, results/h100-2026-11-27-tf32-wgmma.csv: 231-247 and 219); rounded in place or filled (an
#   M-major A or N-major B): 4096-class 1.06-1.26x, and from 128 rows where the grid fills a wave
#   (`WGMMA_WAVE`, below); 64 rows 0.71-1.0x.
WGMMA_MIN_ROWS = {"16bit-wgmma": 256, "sparse-wgmma": 16, "sparse-wgmma-k-major-b": 512, "8bit-wgmma": 512,
                  "tf32-wgmma": 256, "tf32-wgmma-rounded": 128, "tf32-wgmma-fill": 128}
# Kernels `tile-transpose-product` computes as D^T = B^T A^T (a K-major A, an N-major B) from this
# many rows on, by the wgmma schedule of the transpose:
# - 8-bit integers: the warpgroups' own threshold (A' = B^T from registers by byte pairs).
# - tf32 (both operands cast alike): A' = B^T filled M-major (a 128-row stage, half the N-major
#   B's 256) and B' = A^T copied K-major. H200, samples interleaved against the kernel as written
#   (results/h200-2026-11-28g-tf32-transpose-ab.csv), rna TFLOP/s: 512x4096x4096 190 / 173,
#   512x4096x11008 197 / 184, 512x11008x4096 179 / 178, 1024x4096x4096 211 / 200, 4096^3 210 / 202,
#   4096x11008x4096 208 / 199, 2048x2048x256 142 / 133; at 128 rows it loses (128x4096x4096 93 /
#   114, 128x11008x4096 107 / 146: the transpose's 4096 rows in narrow CTAs against mma.sync's
#   split K). Truncated, B' is copied as stored, rounded nowhere (-tf32-trunc-transpose-ab.csv):
#   4096^3 279 / 247, 512x4096x4096 234 / 212, 512x11008x4096 221 / 202.
TRANSPOSED_MIN_ROWS = {"8bit-wgmma": WGMMA_MIN_ROWS["8bit-wgmma"], "tf32-wgmma-fill": 512}
# 8-bit kernels whose N-major B a kernel of its own transposes into a K-major workspace first
# (`tile-transpose-first`), where the warpgroups would transpose it in shared memory (an M-major A
# too: the product's transpose has the same orders), from this many rows on. H200, s8 with A
# M-major and B N-major, TOP/s, transposed first against in shared memory, samples interleaved in
# one call (results/h200-2026-11-29-transpose-first.csv): 4096^3 1168 / 788, 4096x4096x11008
# 1320 / 839, 4096x11008x4096 1144 / 780, 512x4096x4096 682 / 561 (the transpose 5.5 TB/s at
# 4096^2 bytes). Fewer rows than 512 read B a few times only, where a pass of its own over it costs
# as much again (and the warpgroups do not take them by themselves: `WGMMA_MIN_ROWS`).
TRANSPOSE_FIRST_MIN_ROWS = 512
# wgmma schedules chosen by themselves only where their CTAs (128 x 256, `WGMMA_NARROW`), K split in
# at most (splits) many (`plan.split`), fill a wave (`targets` one_wave) and keep at least (use) of
# the SMs' CTA slots busy over their waves (`plan.wave_use`): tf32 rounded in place or filled,
# whose stage work (the rounding, the fill) the wide CTAs share and whose split-K costs grow with the
# splits. H200, wgmma / mma.sync, rounded (rna) in place and filled (the three transposed orders)
# (results/h200-2026-11-27-tf32-wgmma-wave.csv): 128 CTAs of 2 splits (512x4096x4096, 512x4096x11008)
# 1.15-1.24x and 1.09-1.28x, 43 x 3 (128x11008x4096) 1.43x and 1.28-1.31x, 128 x 1 (2048x2048x256)
# 1.03x and 1.11-1.17x, 172 x 1 (512x11008x4096: two waves, the second 30% full) 1.16x and
# 0.89-0.96x (hence the fill's 3/4; `EVEN_WAVES` now splits it in 3, which passes); 16 x 8
# (128x4096x4096, 128x4096x11008) 0.87-1.02x and 0.74-0.96x, 32 x 1 (1000^3) 0.49x and 0.54-0.68x.
# 8-bit with B transposed in shared memory (`plan_warpgroups.shared_transpose`), whose producers'
# transposes the wide CTAs share: H200, samples interleaved, against mma.sync's byte pairs
# (results/h200-2026-11-28i-s8-transpose-ab.csv, TOP/s): 256 CTAs (4096^3) 804 / 762, 1376
# (4096x11008x4096) 799 / 753, 4096x4096x11008 852 / 816, 128 narrow ones (512x4096x4096) 581 / 566;
# 172 (512x11008x4096: the second wave 30% full) 542 / 606, 64 (2048x2048x256) 218 / 220.
WGMMA_WAVE = {"tf32-wgmma-rounded": (4, Fraction(0)), "tf32-wgmma-fill": (4, Fraction(3, 4)),
              "8bit-wgmma-transpose": (1, Fraction(3, 4))}
# wgmma schedules whose kernels take a producer warpgroup by themselves (`Schedule.producers`:
# it fills the stages, the others multiply, mbarriers between; `warp-specialize`), where N and K
# divide into B's stages and the producers cost no residency (`plan_warpgroups.producers_by_themselves`).
# - Sparse, a stage's products in flight (`warp-unroll-sparse`), H100, dense-equivalent TFLOP/s
#   without / with (results/h100-2026-11-28-sparse-producers-shapes.csv, 11 shapes x both B orders):
#   the default 128 x 256 CTAs gain where they fill the SMs, N-major B 4096^3 766 / 830, 8192^3
#   840 / 918, 4096x11008x4096 744 / 813, 512x11008x4096 529 / 589 (K-major B alike: 758 / 825,
#   843 / 916, 749 / 819, 528 / 586), and barely lose over 4 stages of K (2048x2048x256 212 / 205,
#   207 / 206). The narrow CTAs (`WGMMA_NARROW`) lost with an N-major B on cp.async (512x4096x4096
#   718 / 660, 128x4096x4096 230 / 185; -sparse-producers-narrow.csv: 1024x2048x4096 837 / 677).
#   With the TMA's copies, one a stage (`warp-tma-blocks`), they gain where they cost no residency
#   (H200, samples interleaved, -sparse-narrow-producers-ab.csv, -narrow-producers-2.csv):
#   N-major B 512x4096x4096 728 / 808, 512x4096x11008 736 / 855, 128x4096x11008 243 / 287,
#   1024x2048x4096 777 / 857, 768x4096x4096 583 / 650 (682 persistent); K-major B 512x4096x4096
#   520 / 658, 512x4096x11008 518 / 669, 1024x2048x4096 581 / 757, 2048x1024x4096 552 / 745, but
#   not past a wave where two of its CTAs share an SM without them (768x4096x4096 537 / 491,
#   640x4096x4096 478 / 437), nor clearly with one consumer warpgroup (16x11008x4096 59 / 56,
#   64x11008x4096 224 / 234). Ragged B stages (N not a multiple
#   of 256, or K of 64) lose: results/h100-2026-11-28-sparse-producers-ragged.csv, N-major /
#   K-major B, 4000^3 564 / 414 and 551 / 192, 8000^3 658 / 512 and 707 / 257, 4096x4096x1000
#   555 / 564 and 406 / 283; a ragged M does not (4000x4096x4096 745 / 747 and 740 / 787).
#   Taller CTAs (256 x 128, four m64n128 warpgroups) with producers: 790 / 841 at 4096^3 / 8192^3
#   against 847 / 894 (results/h100-2026-11-28-sparse-tall-ctas.csv); 5 stages lose (836 / 834,
#   -sparse-stages.csv).
# - 16-bit, with the TMA's copies (`WGMMA_TMA`): H200, samples interleaved, 3 rounds, TFLOP/s
#   without / with (results/h200-2026-11-28-16bit-producers-ab.csv): an M-major A gains everywhere,
#   A and B both transposed most (f16-acol 4096^3 542 / 643, 4096x11008x4096 490 / 608, 512x4096x4096
#   444 / 588; bf16-acol alike: 546 / 649, 510 / 636, 459 / 605), with a K-major B in the 128 x 128
#   CTAs (f16-acol-bcol 512x4096x4096 494 / 583, 4096^3 607 / 609); a K-major A gains in the 128 x
#   128 CTAs (f16 512x4096x4096 515 / 581, 512x4096x11008 521 / 621; f16-bcol 489 / 577, 502 / 610;
#   bf16 alike) and is even in the 128 x 256 ones (f16 4096^3 618 / 619, 4096x11008x4096 595 / 597;
#   2048x2048x256 213 / 214, 512x11008x4096 458 / 460), as before (H200 4096^3 / 8192^3,
#   results/h200-2026-11-27-specialize-dense-peers.csv: f16 703 / 703 and 741 / 732).
# - Other dense: none (same file): tf32 truncated 374 / 382 and 399 / 380, s8 1352 / 1335 and 1537 /
#   1510; tf32 rounded in place 228 / 232.
WGMMA_PRODUCERS: dict[str, int] = {"sparse-wgmma": 4, "sparse-wgmma-k-major-b": 4, "16bit-wgmma": 4}
# wgmma schedules whose producer warpgroup copies by the TMA by itself (`Schedule.copy`, where
# `plan_warpgroups.tma_unsupported` allows). H200, dense-equivalent TFLOP/s, cp.async / TMA producers
# in one call (results/h200-2026-11-28-tma.csv): sparse, N-major B, 4096^3 898 / 902, 8192^3 904 /
# 914; K-major B 864 / 908, 918 / 979. With the metadata's copies handed to the stage's barrier
# (`warp.async_arrive`) instead of waited for L stages later, another call
# (-sparse-tma-async-arrive.csv): N-major 932 / 1002, K-major 929 / 1033 against cuSPARSELt's
# 1031 / 1090 and 878 / 1083. Dense kernels take no producers by themselves; with them, f16 660 /
# 665 and 691 / 705, s8 1293 / 1310 and 1438 / 1459, tf32 truncated 368 / 373 and 370 / 346.
WGMMA_TMA: dict[str, bool] = {"sparse-wgmma": True, "sparse-wgmma-k-major-b": True, "16bit-wgmma": True}
# wgmma schedules whose TMA kernels run their CTAs in clusters by themselves (`Schedule.cluster`:
# pairs along M that share B's stages, `plan_warpgroups.cluster_unsupported`): none. Halving B's
# L2 traffic gains nothing (H200, one call, -sparse-tma-async-arrive.csv: sparse N-major B 4096^3 /
# 8192^3 908 / 1003 against 932 / 1002, K-major 902 / 1019 against 929 / 1033; before the
# metadata's handover, f16 4096^3 690 / 689 and sparse 852 / 892, -cluster-release-scope.txt): the
# sparse kernel waits on shared memory (ncu: short-scoreboard 43% of
# its stalls, L1/TEX 83%, L2 54%; results/ncu/h200-2026-11-28-9_sparse-tma-async-arrive.txt), not L2.
WGMMA_CLUSTER: dict[str, int] = {}
# wgmma schedules whose TMA kernels are persistent by themselves (`Schedule.persistent`: as many CTAs
# as the SMs hold, each looping over tiles, where there are more tiles and K is a whole number of
# rings; `plan_warpgroups.persistent_ctas`). H200, two calls, 132 CTAs against one a tile, each
# kernel measured twice in the second (results/h200-2026-11-28-persistent.csv, -persistent-ab.csv),
# dense-equivalent TFLOP/s: sparse with a K-major B 4096^3 978 against 936 / 933, then 974 / 969
# against 898 / 902 (cuSPARSELt 939, 937), 8192^3 1044 against 1042 / 1021, then 1080 / 1070
# against 1018 / 1037 (cuSPARSELt 974, 1073): taken. An N-major B does not gain (4096^3 947 against
# 905 / 942, then 945 / 957 against 969 / 969; 8192^3 964 against 1017 / 1018, then 969 / 963
# against 988 / 939), nor do s8 (4096^3 1373 against 1316, then 1370 / 1286 against 1233 / 1312) and
# f16 (684 against 679), with their producers by the TMA as asked for. With B's stage one TMA copy
# (`warp-tma-blocks`) the N-major B gains too: samples interleaved, 3 rounds
# (-sparse-blocks-persistent-ab.csv), 4096^3 876 against 841, 8192^3 944 / 927, 4096x4096x11008
# 969 / 950, 4096x11008x4096 862 / 828 (cuSPARSELt 913, 981, 980, 829); 512x11008x4096 634 / 636.
WGMMA_PERSISTENT: dict[str, bool] = {"sparse-wgmma-k-major-b": True, "sparse-wgmma": True}
# wgmma schedules whose producer kernels (`Schedule.producers`, taken by themselves) ring more stages
# than the default's, on the default (not `WGMMA_NARROW`) tiles and no more than K has: the TMA
# copies run further ahead of the products. H200, samples interleaved, 2 rounds, dense-equivalent
# TFLOP/s, 5 stages against 4, both persistent (results/h200-2026-11-28f-sparse-stages5-ab.csv):
# N-major B 4096^3 883 / 872, 8192^3 950 / 939, 4096x11008x4096 873 / 862 (cuSPARSELt 916, 976,
# 834); K-major B 4096^3 890 / 868, 8192^3 941 / 927 (742, 877). 205 KiB of shared memory a CTA
# (4: 164). Before the TMA producers and persistence, 5 stages lost (the `WGMMA_PRODUCERS` notes).
WGMMA_PRODUCER_STAGES: dict[str, int] = {"sparse-wgmma": 5, "sparse-wgmma-k-major-b": 5}
# Targets of 99 KiB a CTA: the H100's configurations where they fit (96 KiB at most), f64's
# (144 KiB; staged from sm_90 on, so on sm_120 here) with a stage K of 16 (72 KiB). Chosen to
# fit, not measured on such a GPU.
_FIT_99_KIB = {**_H100, "64bit": Config("4x2", "2x4", 3, 16)}
# Keyed by SM number (`targets.LIMITS`' rows). 163 and 227 KiB targets fit every H100
# configuration (144 KiB at most, with LARGE_WARPS); their rows are the H100's, not measured
# there except on sm_90. sm_75 stages nothing (its mma shapes are not the staged ones, and
# cp.async is sm_80's): it takes sm_80's row, which `tile-plan` would still cut to fit.
DEFAULTS: dict[int, dict[str, Config]] = {
    75: _H100, 80: _H100, 86: _FIT_99_KIB, 87: _H100, 88: _FIT_99_KIB, 89: _FIT_99_KIB,
    90: _H100, 100: _H100, 103: _H100, 110: _H100, 120: _FIT_99_KIB, 121: _FIT_99_KIB,
}  # fmt: skip


def default(target: str | targets.SmTarget, schedule: str) -> Config:
    """The default configuration of `schedule` on `target` (its SM number's row of DEFAULTS)."""
    return DEFAULTS[targets.parse_sm(target).number][schedule]


# The candidate family whose shortest stage K bounds how far `fit_shared` cuts a schedule's.
SCHEDULE_FAMILY = {"16bit-gather": "16bit", "8bit-gather": "8bit", "fp8": "8bit", "8bit-fill-a": "8bit", "8bit-fill-b": "8bit", "8bit-fill-ab": "8bit", "8bit-pairs-a": "8bit", "8bit-pairs-b": "8bit", "8bit-pairs-ab": "8bit", "32bit-row-b": "32bit", "32bit-trunc": "32bit", "32bit-row-b-trunc": "32bit", "sparse-16bit": "16bit", "16bit-wgmma": "16bit", "8bit-wgmma": "8bit", "tf32-wgmma": "32bit", "tf32-wgmma-rounded": "32bit", "tf32-wgmma-fill": "32bit", "sparse-wgmma": "16bit", "sparse-wgmma-k-major-b": "16bit", "4bit-widened": "4bit",
                   **{f"4bit{w}-fill-{f}": "4bit" for w in ("", "-widened") for f in ("a", "b", "ab")}}


def fit_shared(stages: int, stage_k: int, bits_per_k: int, limit: int, schedule: str, *,
               cut_stages: bool, cut_k: bool, read_k: int) -> tuple[int, int]:
    """Stages and stage K cut until a ring of `stages` stages of `stage_k` elements of K, each
    element `bits_per_k` bits of A and B, fits `limit` bytes: fewer stages down to 3, then stage
    K halved down to the shortest its family's CANDIDATES use (a multiple of the fragments' K,
    `read_k`), then down to 2 stages. Only what `cut_stages` / `cut_k` allow (the defaults, not
    what the user forced) is cut; the result may still not fit (the caller refuses it)."""
    floor_k = min(c.stage_k for c in CANDIDATES[SCHEDULE_FAMILY.get(schedule, schedule)])

    def fits(s: int, k: int) -> bool:
        return s * k * bits_per_k // 8 <= limit

    while not fits(stages, stage_k) and cut_stages and stages > 3:
        stages -= 1
    while not fits(stages, stage_k) and cut_k and stage_k // 2 >= floor_k and (stage_k // 2) % read_k == 0:
        stage_k //= 2
    while not fits(stages, stage_k) and cut_stages and stages > 2:
        stages -= 1
    return stages, stage_k


# Schedules whose staged K loop reads fragments as registers free up (`warp-prefetch-fragments`)
# rather than the whole next K step ahead: measured at 4096^3 on an H100, f16 422 against 401,
# bf16 407 against 397, pre-compressed sparse 469-481 against 462 (and its 4x8 tiles with K 64
# stages no longer spill); f64 lost 12% (54 against 61: its A reads' latency exposed), s8 5%.
# tf32 lost too (H200, 4096^3: B K-major 177 against 206 TFLOP/s, A M-major at 512x4096x4096 100
# against 131), though it ends the 4x8 tiles' spills of a row-major B.
INTERLEAVED_READS = {"16bit", "sparse-16bit"}
# Large problems take a CTA twice as wide where it fits (f16 8192^3: 454 against 441 TFLOP/s);
# `fit_shared` cuts its stages or stage K where the target's shared memory is smaller (99 KiB).
LARGE_WARPS = {"16bit": "2x4", "32bit": "2x4", "32bit-row-b": "2x4", "32bit-trunc": "2x4", "32bit-row-b-trunc": "2x4"}
# ... and medium ones of these schedules, where those CTAs still fill a wave. H200, tf32 trunc
# (TFLOP/s, B K-major / B row / A col / both; results/h200-2026-11-27-tf32-trunc-warps.csv and
# -tf32-trunc-wide.csv): 4096^3 2x4 224 / 210 / 215 / 203 against 2x2's 218 / 191 / 182 / 184; at
# 512x4096x4096 (64 such CTAs) 2x4 lost 4-13%. With rna 2x4 gains nothing at 4096^3 or loses (192 /
# 172 / 177 / 156 against 192 / 178 / 172 / 166): the conversions, not the tile, limit it. Only
# where the wide CTAs' last wave is no emptier than the default's (`plan.wave_use`): at
# 512x11008x4096 (172 wide CTAs on 132 SMs: two waves, the second 30% full) 2x2 wins, 210 / 174 /
# 165 / 165 against 2x4's 165 / 152 / 144 / 137; at 1024x11008x4096 (as full either way) 2x4 still
# does, 222 / 196 / 191 / 183 against 211 / 182 / 176 / 174 (results/h200-2026-11-27-tf32-wave.csv).
MEDIUM_WIDE = {"32bit-trunc", "32bit-row-b-trunc"}
# Schedules whose CTAs take these warps instead of the default's where the default's tiles fill a
# wave (fewer are split or halved) and these raise the share of the SMs the grid's waves keep busy
# (`plan.wave_use`) by WAVE_WARPS_GAIN or more. f64, H200, TFLOP/s,
# 4x2 warps (128x64 CTAs) against 2x2 (64x64) at 128x11008x4096, where 172 CTAs on 132 SMs leave the
# second wave 30% full and 344 fill their third to 60% (results/h200-2026-11-27-small-configs-f64-f16.csv):
# B row-major 40.5 / 46.8, K-major 40.4 / 52.2, A M-major 40.3 / 45.2, both 40.5 / 46.5. Elsewhere in
# the matrix the default's waves are as full either way (4096^3, 512x4096x4096, 2048x2048x256, 1000^3).
WAVE_WARPS = {"64bit": "2x2"}
WAVE_WARPS_GAIN = Fraction(1, 10)
# Where the default's rows do not fit M, or its CTAs leave SMs idle even with their rows halved (the
# other schedules' way to fill a wave), (warps, warp tile) of a CTA that keeps its rows and narrows
# its columns: a filled B is transposed once a CTA, so its cost per mma falls with the CTA's rows.
# H200, s8 B row-major, TOP/s (results/h200-2026-11-27-fill-small.csv, -fill-small-rule.csv): 4x2
# of 2x4 (128 x 64) against the rows halved (64 x 128, 128 x 128): 128x11008x4096 247 / 198,
# 128x4096x4096 284 / 226, 128x4096x11008 199 / 156, 1000^3 212 / 170; where the halved rows fill
# a wave it loses or wins a little (512x4096x4096 418 / 470, 512x4096x11008 403 / 373), so the
# rule leaves those. Not for a filled A (128x11008x4096: 2x2 of 2x4 261, 4x2 of 2x4 220, default
# 231) or both (512x4096x11008 293 against the default's 332).
SMALL_TILES = {"8bit-fill-b": ("4x2", "2x4")}
# Schedules whose small problems keep the warp tile's rows where the CTA fits M and split-K fills
# the wave (K of at least KEEP_ROWS_MIN_K, the shortest measured), instead of halving them: tf32
# converts or reads each fragment element by element, so a narrower warp tile costs more per mma.
# H200, TFLOP/s, kept / halved (results/h200-2026-11-27-tf32-keep-rows.csv against
# -halved-rows.csv, one device call): trunc 256x4096x4096 178 / 130, 128x4096x11008 157 / 122,
# 128x11008x4096 138 / 123 (B row-major 156 / 132, 147 / 127, 123 / 109; rna 148 / 120,
# 139 / 113, 115 / 98). At 1000^3 (no split-K) keeping them lost 94 -> 69; K 1024-4095 is not
# measured, so there the rows are halved as before.
KEEP_ROWS = {"32bit", "32bit-row-b", "32bit-trunc", "32bit-row-b-trunc"}
KEEP_ROWS_MIN_K = 4096
# ... and these where the operands outgrow half the target's L2 (`targets.Limits.l2`): halving the
# rows doubles the times B is read (and, filled, transposed), from memory once it no longer stays in
# the L2. H200 (50 MiB L2), s8 TOP/s, 4x8 warp tiles with split-K / halved rows
# (results/h200-2026-11-27-s8-keep-rows.csv): 45 MB of operands, 512x4096x11008 B row-major 539 /
# 373, A M-major 552 / 437, both 414 / 331; 256x11008x4096 312 / 229, 321 / 301, 240 / 208. 19 MB,
# 512x4096x4096 451 / 471, 452 / 508, 344 / 373; 256x4096x4096 336 / 379, 326 / 395, 250 / 294.
KEEP_ROWS_PAST_L2 = {"8bit-fill-a", "8bit-fill-b", "8bit-fill-ab"}
# Schedules whose default stages are for the default warp tile's registers: where `default_tiles`
# halves its rows (small problems), the warp tile takes these (stages, stage K) instead (a K 64
# default that only keeps the 4x8 tile from spilling). Byte-pair reads (H200, TOP/s,
# results/h200-2026-11-27-pair-bytes-small.csv), 2x8 or 1x8 tiles, K 64 / K 128 (4 stages):
# 128x11008x4096 373 / 429, 64x11008x4096 270 / 299 (split 2; unsplit with K 128 as `8bit`: 348),
# 16x11008x4096 80 / 131; 1000^3 199 / 160 (3 of K 128: 193, the fourth stage not taken there).
# An M-major A by pairs takes them alike (results/h200-2026-11-27-pair-bytes-a-small.csv: A / both
# 64x11008x4096 351 / 320, 128x11008x4096 422 / 399, 16x11008x4096 125 / 112).
HALVED_ROWS_STAGES = {"8bit-pairs-a": (3, 128), "8bit-pairs-b": (3, 128), "8bit-pairs-ab": (3, 128)}
# The bytes a cp.async of B's rows must move for byte-pair reads of B (`plan.pairable`); with
# shorter copies (N not a multiple of 16) the fill transposes it. H200, TOP/s, pairs / fill
# (results/h200-2026-11-27-pair-bytes-align.csv): B row-major 1000x1000x4096 255 / 358,
# 1000x4104x4096 540 / 663, 4104^3 474 / 529, 1000^3 196 / 207. An M-major A keeps its pairs at
# 8-byte copies (1000x4104x4096 578 / 371, 4104^3 521 / 519, 1000^3 159 / 149).
PAIR_B_COPY = 16
# Small and medium problems of these schedules take a fourth stage (`plan.more_stages`) where the
# whole grid stays resident with it (no CTA waits for another's shared memory) and the K loop runs
# at least MORE_STAGES_MIN_STEPS stages a CTA. H200, TFLOP/s or TOP/s, 3 stages against 4
# (results/h200-2026-11-27-stages4.csv): f16 512x4096x4096 355 / 391, 512x4096x11008 379 / 421,
# 64x4096x4096 156 / 171, 16x4096x4096 54 / 60, 1000^3 154 / 165 (bf16 and an M-major A alike);
# s8 16x11008x4096 112 / 128, 64x11008x4096 280 / 296; tf32 B row-major 512x4096x4096 144 /
# 157 (trunc 174 / 197), 64x11008x4096 78 / 86. Where the loop is short it loses (s8 1000^3, 8
# stages of K 128: 198 / 182; tf32 trunc 2048x2048x256, 8 of K 32: 145 / 129, A M-major 127 / 108),
# and where the fourth stage leaves CTAs waiting (tf32 trunc 512x11008x4096, 344 CTAs of which a
# 4-stage ring fits one an SM: 210 / 201, A M-major 170 / 161); large problems keep their defaults
# (tf32 4096^3: 207 against 199 with 4).
MORE_STAGES = {"16bit", "8bit", "8bit-pairs-a", "8bit-pairs-b", "8bit-pairs-ab", "32bit", "32bit-row-b", "32bit-trunc", "32bit-row-b-trunc"}
MORE_STAGES_COUNT = 4
MORE_STAGES_MIN_STEPS = 16
# ... and of these, where automatic split-K only evens the wave (two splits of more tiles than half
# the SMs fill two waves as far as the unsplit tiles fill one), the unsplit kernel with the fourth
# stage instead: 64x11008x4096 s8 296 -> 363, f16 184 -> 198 (at 16 rows even: s8 128 / 128, f16 57 /
# 55). tf32 keeps splitting (64x11008x4096 97 split against 88 unsplit), and so do the fills.
UNSPLIT_MORE_STAGES = {"16bit", "8bit", "8bit-pairs-a", "8bit-pairs-b", "8bit-pairs-ab"}
# tf32 schedules whose automatic split-K evens the waves (`plan.split`): the fewest splits, up to
# this many, that keep the most of the SMs' CTA slots busy (`plan.wave_use`), where those keep more
# than the rule for grids short of a wave. H200, TFLOP/s (results/h200-2026-11-28-tf32-even-waves.csv):
# 512x11008x4096 on warpgroups (172 CTAs: 65% of two waves), rounded (rna) K-major / B row-major /
# A M-major / both, unsplit 152 / - / - / - (the fills refused: mma.sync 124 / 142 / 144), 2 splits
# 187 / 162 / 176 / 152, 3 splits 196 / 166 / 180 / 158 (Triton's mma.sync path 190 / 192 / 177 /
# 175); truncated 270 / 181 / 172 / 166 (the last three mma.sync), 298 / 213 / 227 / 190, 288 / 213 /
# 224 / 195; 64x11008x4096 on mma.sync (86 CTAs of 64 x 128, two an SM) rounded 97 / 87 / 88 / 84
# at 2 splits, 105 / 108 / 106 / 108 at 3, 81 / 78 / 77 / 77 at 4 (Triton 93 / 101 / 91 / 98).
EVEN_WAVES = {"32bit": 3, "32bit-row-b": 3, "32bit-trunc": 3, "32bit-row-b-trunc": 3,
              "tf32-wgmma": 3, "tf32-wgmma-rounded": 3, "tf32-wgmma-fill": 3}

# Operand types the staged schedule takes (PTX spellings), and the same grouped by element bits
# (`tile-plan` reads it); a candidate family per width.
STAGED_TYPES = ("tf32", "f16", "bf16", "s8", "u8", *ptx_names(FP8), "f64", "s4", "u4", "b1")
STAGED_ELEMENTS = {
    bits: tuple(t for t in STAGED_TYPES if BY_PTX[t].bits == bits)
    for bits in dict.fromkeys(BY_PTX[t].bits for t in STAGED_TYPES)
}
FAMILY_TYPES = {f"{bits}bit": types for bits, types in STAGED_ELEMENTS.items()}
# Representative sizes (M = N = K) the tuner measures for each class.
SIZE_CLASSES = {"small": 1024, "medium": 4096, "large": 8192}


def family(atype: str, btype: str) -> str | None:
    """The candidate family of an operand type pair (None: no tunable configurations)."""
    if atype != btype:
        return None
    return next((f for f, types in FAMILY_TYPES.items() if atype in types), None)


def size_class(m: int, n: int, k: int, batch: int = 1) -> str:
    work = m * n * k * batch
    if work <= 2 * 1024**3:
        return "small"
    return "medium" if work <= 2 * 4096**3 else "large"


def cache_key(sm: str, atype: str, btype: str, acc: str, cls: str) -> str:
    return f"{sm}/{atype}x{btype}->{acc}/{cls}"


def default_cache() -> str:
    return os.environ.get("TILEMMA_TUNE_CACHE", "")


_noted: set[str] = set()


def load(path: str) -> dict[str, Config]:
    """The cache at `path` ({} when there is none); a malformed cache is an error naming it.
    Entries are keyed by target (`cache_key`) and the whole cache by the tilemma that tuned it
    (`version.tilemma_key`: version and sources): another tilemma's cache is ignored, with a note
    on stderr (once per file and process), since its measurements were of other kernels."""
    if not path or not Path(path).exists():
        return {}
    try:
        raw = json.loads(Path(path).read_text())
        if not isinstance(raw["configs"], dict):
            raise TypeError(f"configs is a {type(raw['configs']).__name__}, not an object")
        tuned_by = raw.get("tilemma")
        if tuned_by != tilemma_key():
            if path not in _noted:
                _noted.add(path)
                print(f"tilemma: note: {path}: tuned by {'tilemma ' + str(tuned_by) if tuned_by else 'an older tilemma'}, "
                      f"not this one ({tilemma_key()}); its configurations are ignored "
                      f"(`tilemma tune --cache {path}` measures them again)", file=sys.stderr)
            return {}
        entries = {key: Config(**value) for key, value in raw["configs"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ValueError(f"{path}: not a tilemma tuning cache ({type(e).__name__}: {e})") from None
    for key, config in entries.items():
        if not isinstance(key, str) or (why := config.error()):
            raise ValueError(f"{path}: tuning cache entry {key!r}: {why or 'keys are strings'}")
    return entries


def save(path: str, configs: dict[str, Config], measured: dict[str, dict[str, float]]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    data = {"tilemma": tilemma_key(), "configs": {k: asdict(c) for k, c in sorted(configs.items())},
            "tflops": measured}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
