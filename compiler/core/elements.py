"""The element vocabulary: one record per element type tilemma knows, and the views derived from it.

Why one module: the dialects, the passes, the ISA and fragment tables, the reference, the emulator
and the driver all name element types and need the same few facts about each (its PTX spelling,
its width, its NumPy dtype, where an fp6/fp4 value sits in its byte). Each fact is written here
once, in `Element`; every other table reads it, and a second spelling (PTX) is a second index
over the same records, never a hand-written inverse.

Records are keyed by the MLIR spelling (`f16`, `si8`, `f8E4M3FN`; `ue4m3` is tilemma's
`!tile.ue4m3`, which MLIR lacks). What an element type *may do* (cuda::tiles element classes,
cast rules, sparsity patterns, which mma takes it) is not vocabulary and lives with its rules
(`dialects/element_tables.py`, `compiler/core/isa_rows.py`).

A leaf: the standard library, NumPy and ml_dtypes only, so the bottom floor and the dialects can
import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class Element:
    """One element type.

    `bits` is the width of one value (6 for fp6; tf32 counts its 32-bit register image) and
    `storage_bits` what one element takes in memory (fp6: a whole byte; 4- and 1-bit types are
    packed). `dtype` holds values in NumPy (tf32 in float32 with the low 13 mantissa bits zero, i1
    in uint8 as 0/1, the sub-byte ml_dtypes types one per byte); `storage_dtype` is the dtype of a
    kernel buffer's elements (uint8 bytes where elements are packed or kept as codes).
    `container_shift` places an fp6/fp4 value in the 8-bit register container of
    `.kind::f8f6f4` / `.mxf8f6f4` (None: no container). Float format facts: `mantissa_bits`
    (explicit fraction bits), `emin` (exponent of the smallest normal), `max_finite`.
    """

    name: str  # MLIR spelling, the key everywhere
    ptx: str  # PTX type suffix (`.s8`, `.e4m3`)
    kind: str  # "float", "int" or "bit" (i1: signless, multiplied by xor/and + popc)
    bits: int
    signed: bool
    dtype: np.dtype
    storage_bits: int = 0  # 0: same as bits
    storage_dtype: np.dtype | None = None  # None: same as dtype
    stored_as: str = ""  # the type memory holds it as (tf32: f32); "": itself
    builtin: bool = True  # an MLIR builtin type (False: tilemma's own `!tile.ue4m3`)
    container_shift: int | None = None
    mantissa_bits: int = 0
    emin: int | None = None
    max_finite: float | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "dtype", np.dtype(self.dtype))
        set_(self, "storage_bits", self.storage_bits or self.bits)
        set_(self, "storage_dtype", np.dtype(self.dtype if self.storage_dtype is None else self.storage_dtype))
        set_(self, "stored_as", self.stored_as or self.name)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_bit(self) -> bool:
        return self.kind == "bit"

    @property
    def register_bits(self) -> int:
        """Width of one element in an mma register: fp6/fp4 fill their 8-bit container (the
        `.kind::mxf4*` forms pack e2m1 to 4 bits; their callers say so)."""
        return 8 if self.container_shift is not None else self.bits

    @property
    def code_dtype(self) -> np.dtype:
        """The unsigned integer dtype holding one element's bit pattern in its low bits."""
        return np.dtype(f"uint{max(8, self.storage_bits)}")

    @property
    def int_range(self) -> tuple[int, int]:
        """Smallest and largest value of an integer (or bit) type."""
        if self.is_float:
            raise TypeError(f"{self.name} is not an integer type")
        if self.signed:
            return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        return 0, 2**self.bits - 1

    @property
    def float_range(self) -> tuple[float, float]:
        """(lowest, highest) finite value of a float type. Unsigned types hold no negatives, and
        one without mantissa bits (e8m0: powers of two only) no zero either."""
        if not self.is_float:
            raise TypeError(f"{self.name} is not a float type")
        assert self.max_finite is not None and self.emin is not None
        if self.signed:
            return -self.max_finite, self.max_finite
        return (2.0**self.emin if self.mantissa_bits == 0 else 0.0), self.max_finite


def _ieee(mantissa: int, emax: int) -> float:
    """Largest finite value of an IEEE-style format (all-ones exponent reserved)."""
    return (2 - 2.0**-mantissa) * 2.0**emax


_RECORDS = (
    Element("f16", "f16", "float", 16, True, np.float16, mantissa_bits=10, emin=-14, max_finite=_ieee(10, 15)),
    Element("bf16", "bf16", "float", 16, True, ml_dtypes.bfloat16, mantissa_bits=7, emin=-126,
            max_finite=_ieee(7, 127)),
    Element("tf32", "tf32", "float", 32, True, np.float32, stored_as="f32", mantissa_bits=10, emin=-126,
            max_finite=_ieee(10, 127)),
    Element("f32", "f32", "float", 32, True, np.float32, mantissa_bits=23, emin=-126, max_finite=_ieee(23, 127)),
    Element("f64", "f64", "float", 64, True, np.float64, mantissa_bits=52, emin=-1022, max_finite=_ieee(52, 1023)),
    Element("si8", "s8", "int", 8, True, np.int8),
    Element("ui8", "u8", "int", 8, False, np.uint8),
    Element("si4", "s4", "int", 4, True, ml_dtypes.int4, storage_dtype=np.uint8),
    Element("ui4", "u4", "int", 4, False, ml_dtypes.uint4, storage_dtype=np.uint8),
    Element("i1", "b1", "bit", 1, False, np.uint8),
    Element("si32", "s32", "int", 32, True, np.int32),
    Element("f8E4M3FN", "e4m3", "float", 8, True, ml_dtypes.float8_e4m3fn, mantissa_bits=3, emin=-6,
            max_finite=448.0),
    Element("f8E5M2", "e5m2", "float", 8, True, ml_dtypes.float8_e5m2, mantissa_bits=2, emin=-14,
            max_finite=57344.0),
    Element("f6E3M2FN", "e3m2", "float", 6, True, ml_dtypes.float6_e3m2fn, storage_bits=8, storage_dtype=np.uint8,
            container_shift=0, mantissa_bits=2, emin=-2, max_finite=28.0),
    Element("f6E2M3FN", "e2m3", "float", 6, True, ml_dtypes.float6_e2m3fn, storage_bits=8, storage_dtype=np.uint8,
            container_shift=0, mantissa_bits=3, emin=0, max_finite=7.5),
    # e2m1 sits in the middle four bits of its container (bits 2..5), fp6 in the low six.
    Element("f4E2M1FN", "e2m1", "float", 4, True, ml_dtypes.float4_e2m1fn, storage_dtype=np.uint8,
            container_shift=2, mantissa_bits=1, emin=0, max_finite=6.0),
    Element("f8E8M0FNU", "ue8m0", "float", 8, False, ml_dtypes.float8_e8m0fnu, mantissa_bits=0, emin=-127,
            max_finite=2.0**127),
    # Unsigned e4m3 (a block scale): values held in float8_e4m3fn, bits those of it with the sign
    # clear; buffers carry the codes.
    Element("ue4m3", "ue4m3", "float", 8, False, ml_dtypes.float8_e4m3fn, storage_dtype=np.uint8, builtin=False,
            mantissa_bits=3, emin=-6, max_finite=448.0),
)  # fmt: skip

# MLIR name -> record, in the order messages list them.
ELEMENTS: dict[str, Element] = {e.name: e for e in _RECORDS}
# PTX spelling -> record: the second index over the same records.
BY_PTX: dict[str, Element] = {e.ptx: e for e in _RECORDS}
# The PTX spellings that differ from the MLIR name (users may write either): floats first.
ALIASES: dict[str, str] = {
    e.ptx: e.name for e in sorted(_RECORDS, key=lambda e: not e.is_float) if e.ptx != e.name
}

# Derived sets (MLIR names, in record order).
FP8 = tuple(e.name for e in _RECORDS if e.is_float and e.bits == 8 and e.signed)  # e4m3, e5m2
FP6_FP4 = tuple(e.name for e in _RECORDS if e.is_float and e.bits < 8)
F8F6F4 = FP8 + FP6_FP4  # the multiplicands of .kind::f8f6f4
SCALES = tuple(e.name for e in _RECORDS if e.is_float and not e.signed)  # block-scale types
# Narrower than a byte yet not dividing it: stored one per byte (fp6).
BYTE_PER_ELEMENT = tuple(e.name for e in _RECORDS if e.storage_bits != e.bits)


def ptx_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The PTX spellings of MLIR-named element types, in order."""
    return tuple(ELEMENTS[n].ptx for n in names)


def canonical(name: str) -> str:
    """The MLIR name of an element type given by its MLIR or PTX spelling."""
    name = ALIASES.get(name, name)
    if name not in ELEMENTS:
        raise ValueError(
            f"unknown element type '{name}'; known: {', '.join(ELEMENTS)} "
            f"(PTX spellings {', '.join(ALIASES)} also work)"
        )
    return name
