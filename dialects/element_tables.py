"""What element types may do, as data: the cuda::tiles element classes, which element types a
tile, an operand, an accumulator or a block scale may have, the conversions the lowering can do,
and the types with a special treatment (pre-compressed sparse A, the widened 4-bit integers).

Plain tables keyed by MLIR element names (`f16`, `si8`, `f8E4M3FN`, `ue4m3`, ...), with no IR in
them, kept together in one module: the dialects (`tile`, `warp`, `attributes`) read them from
here, the passes and the driver mostly as `tile.X`. What each element type *is* (spellings,
widths, dtypes, float format) is in `compiler/core/elements.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilemma.compiler.core.elements import F8F6F4, SCALES


@dataclass(frozen=True)
class ElementClass:
    """A row of the cuda::tiles tables: operand types that may meet, and what they produce.

    `matmul_result` is None where `matmul` is not defined (it is then reachable through `mma`
    only); `extension` says why a row goes beyond the CUDA Tile text (None for rows of the text).
    """

    name: str
    kind: str  # "int" or "float" (rule 1 compares bit width for int, conversion rank for float)
    matmul_result: str | None
    accumulators: tuple[str, ...]
    extension: str | None = None


ELEMENT_CLASSES: dict[str, ElementClass] = {
    c.name: c
    for c in (
        ElementClass("8-bit integer", "int", "si32", ("si32",)),
        ElementClass(
            "4-bit integer", "int", None, ("si32",), "PTX mma .s4/.u4 (not in cuda::tiles)"
        ),
        ElementClass(
            "single bit", "int", None, ("si32",), "PTX mma .b1 with xor/and popc (not in cuda::tiles)"
        ),
        ElementClass("fp8/fp6/fp4", "float", "f16", ("f16", "f32")),
        ElementClass("f16", "float", "f16", ("f16", "f32")),
        ElementClass("bf16", "float", "f32", ("f32",)),
        ElementClass("tf32", "float", "f32", ("f32",)),
        ElementClass("f32", "float", "f32", ("f32",)),
        ElementClass("f64", "float", "f64", ("f64",)),
    )
}

# Element type -> its row. fp6/fp4 share the fp8 row: PTX `.kind::f8f6f4` mixes them freely
# (an extension of the text, which names only e4m3 and e5m2 there).
OPERAND_ELEMENTS: dict[str, str] = {
    "si8": "8-bit integer",
    "ui8": "8-bit integer",
    "si4": "4-bit integer",
    "ui4": "4-bit integer",
    "i1": "single bit",
    **{name: "fp8/fp6/fp4" for name in F8F6F4},
    "f16": "f16",
    "bf16": "bf16",
    "tf32": "tf32",
    "f32": "f32",
    "f64": "f64",
}

SCALE_ELEMENTS = SCALES
ACCUMULATOR_ELEMENTS = ("si32", "f16", "f32", "f64")
TILE_ELEMENTS = tuple(OPERAND_ELEMENTS) + SCALE_ELEMENTS + ("si32",)


@dataclass(frozen=True)
class CastRule:
    """How one element conversion is lowered. `roundings` maps each rounding the conversion may
    take to the first sm that has it (empty: the conversion is exact and takes none); `default`
    is the rounding used when the op names none. `how`: "cvt" emits cvt.<rounding>.<dst>.<src>
    (after the load, for an operand); "extend" is done by the load itself (sub-byte loads sign- or
    zero-extend). `on`: "operand" casts feed an mma, "result" casts convert what an mma produced
    (the epilogue); `sm` is the first target with the instruction at all."""

    roundings: tuple[tuple[str, int], ...]
    default: str | None
    how: str
    on: str = "operand"
    sm: int = 0
    note: str = ""

    @property
    def rounding_names(self) -> tuple[str, ...]:
        return tuple(r for r, _ in self.roundings)


# Every conversion the lowering can do, (source, destination) element names -> rule: the one
# table tile.cast verifies against and tile-to-ptx (and the reference runner) lower from.
# cvt.rna.tf32.f32 needs sm_80, cvt.rn/.rz.tf32.f32 sm_90 (PTX 7.8); `trunc` is no instruction
# (the mma reads the f32 register's top 19 bits: the emulator's model, checked on the H100/H200). The result casts are PTX
# cvt's: f32 -> f16 (cvt.rn/.rz.f16.f32, packed as cvt.rn.f16x2.f32 from sm_80), f32 -> bf16
# (sm_80), f32 -> e4m3/e5m2 (cvt.rn.satfinite.e4m3x2.f32, sm_89: saturating, the only form PTX
# has), s32 -> f32, f64 -> f32, and the exact widenings.
_SAT = "saturating: finite values beyond the largest and infinities become the largest of that sign; NaN stays NaN"
CAST_RULES: dict[tuple[str, str], CastRule] = {
    ("f32", "tf32"): CastRule((("rna", 80), ("rn", 90), ("rz", 90), ("trunc", 80)), "rna", "cvt"),
    ("si4", "si8"): CastRule((), None, "extend"),
    ("ui4", "ui8"): CastRule((), None, "extend"),
    ("f32", "f16"): CastRule((("rn", 0), ("rz", 0)), "rn", "cvt", "result"),
    ("f32", "bf16"): CastRule((("rn", 80), ("rz", 80)), "rn", "cvt", "result", 80),
    ("f32", "f8E4M3FN"): CastRule((("rn", 89),), "rn", "cvt", "result", 89, _SAT),
    ("f32", "f8E5M2"): CastRule((("rn", 89),), "rn", "cvt", "result", 89, _SAT),
    ("si32", "f32"): CastRule((("rn", 0), ("rz", 0)), "rn", "cvt", "result"),
    ("f64", "f32"): CastRule((("rn", 0), ("rz", 0)), "rn", "cvt", "result"),
    ("f16", "f32"): CastRule((), None, "cvt", "result"),
    ("bf16", "f32"): CastRule((), None, "cvt", "result", 80),
    ("f32", "f64"): CastRule((), None, "cvt", "result"),
}


# Element types of a pre-compressed sparse A (`tile.sparse_from`).
PRE_COMPRESSED = ("f16", "bf16")
# 4-bit integers and the 8-bit type that holds each exactly: select-mma widens to it where 4-bit
# mma is slow, and `warp.widen` does it to staged fragments.
INT4_WIDENED = {"si4": "si8", "ui4": "ui8"}
