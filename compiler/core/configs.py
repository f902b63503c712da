"""Kernel configurations: the candidates per type family, the size classes, and the tuning cache.

A configuration is what `tile-plan` takes as options (warps, warp tile, stages, stage K).
`tilemma tune` times the candidates of a family on the GPU for each size class and writes the
winners to a JSON cache keyed by target, types and size class; the compiler reads that cache
(`CompileOptions.tune_cache`, default `$TILEMMA_TUNE_CACHE`) whenever the options force no
configuration. Without a cache entry the distribution pass's own heuristic decides.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Config:
    warps: str
    warp_tile: str
    stages: int
    stage_k: int = 64

    def __str__(self) -> str:
        return f"warps={self.warps} warp-tile={self.warp_tile} stages={self.stages} stage-k={self.stage_k}"


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
# has none, per schedule (`plan.default_schedule`): each measured on an H100 at 4096^3
# (benchmarks/results/h100-2026-11-23-defaults.csv) among the configurations that do not spill.
DEFAULTS: dict[str, Config] = {
    "16bit": Config("2x2", "4x8", 3, 64),
    "8bit": Config("2x2", "4x8", 3, 128),
    "fp8": Config("2x2", "2x8", 3, 128),  # two f16 HMMAs on converted registers: 4x8 spills
    "32bit": Config("2x2", "4x8", 3, 32),
    "32bit-row-b": Config("2x2", "2x8", 3, 32),  # B through warp.load_shared: 4x8 spills
    "64bit": Config("4x2", "2x4", 3, 32),  # 61 TFLOP/s, cuBLAS 61; 2x2 warps x K 16: 48
    "sparse-16bit": Config("2x2", "4x8", 4, 64),  # pre-compressed A: 481 (K 32 stages: 445); 2x4 of 4x4: 320
    "4bit": Config("2x2", "4x8", 3, 256),  # the 8-bit default's bytes; not timed (sm_90 emulates s4)
    # s4 as s8 mmas (sm_90): 416 TOP/s (`tilemma tune`, s8's default 740 in that run) though it
    # spills 32 bytes; 2x8 (no spills) 304, 3 stages of K 256 393
    "4bit-widened": Config("2x2", "4x8", 4, 128),
    "1bit": Config("2x2", "4x8", 3, 1024),  # the same bytes; not timed
}
# Schedules whose staged K loop reads fragments as registers free up (`warp-prefetch-fragments`)
# rather than the whole next K step ahead: measured at 4096^3 on an H100, f16 422 against 401,
# bf16 407 against 397, pre-compressed sparse 469-481 against 462 (and its 4x8 tiles with K 64
# stages no longer spill); f64 lost 12% (54 against 61: its A reads' latency exposed), s8 5%.
INTERLEAVED_READS = {"16bit", "sparse-16bit"}
# Large problems take a CTA twice as wide where it fits (f16 8192^3: 454 against 441 TFLOP/s).
LARGE_WARPS = {"16bit": "2x4", "32bit": "2x4", "32bit-row-b": "2x4"}
# Small problems of these schedules take more stages (tf32 1024^3: 120 against 110 TFLOP/s, where
# at 4096^3 4 stages lose: 199 against 207).
SMALL_STAGES = {"32bit": 4}

# Operand types the staged schedule takes, by element bits (`tile-plan` reads it); a
# candidate family per width.
STAGED_ELEMENTS = {32: ("tf32",), 16: ("f16", "bf16"), 8: ("s8", "u8", "e4m3", "e5m2"), 64: ("f64",),
                   4: ("s4", "u4"), 1: ("b1",)}
FAMILY_TYPES = {f"{bits}bit": types for bits, types in STAGED_ELEMENTS.items()}
STAGED_TYPES = tuple(t for ts in STAGED_ELEMENTS.values() for t in ts)
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


def load(path: str) -> dict[str, Config]:
    """The cache at `path` ({} when there is none); a malformed cache is an error naming it."""
    if not path or not Path(path).exists():
        return {}
    try:
        raw = json.loads(Path(path).read_text())
        return {key: Config(**value) for key, value in raw["configs"].items()}
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a tilemma tuning cache ({e})") from None


def save(path: str, configs: dict[str, Config], measured: dict[str, dict[str, float]]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    data = {"configs": {k: asdict(c) for k, c in sorted(configs.items())}, "tflops": measured}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
