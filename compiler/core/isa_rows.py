"""The `mma` spellings the excerpts define, as rows: the qualifier vocabularies, one row per
syntax line of 000 (dense `mma.sync`) and 001 (`mma.sp` / `mma.sp::ordered_metadata`), and the
block-scaled rows of Table 36 (004). Each row is the product of its qualifier sets; `isa`
expands them into variants and gives each its requirements (`isa_notes`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from tilemma.compiler.core.elements import FP6_FP4, FP8, ptx_names

# --------------------------------------------------------------------------------------------
# Qualifier vocabularies (what the grammar knows, legal or not)
# --------------------------------------------------------------------------------------------
SPARSE_FORMS: tuple[str | None, ...] = (None, "sp", "sp::ordered_metadata")
SHAPES: tuple[str, ...] = (
    "m8n8k4", "m8n8k16", "m8n8k32", "m8n8k128",
    "m16n8k4", "m16n8k8", "m16n8k16", "m16n8k32", "m16n8k64", "m16n8k128", "m16n8k256",
)  # fmt: skip
LAYOUTS = ("row", "col")
INPUT_TYPES = (
    "f16", "bf16", "tf32", "f64", "s8", "u8", "s4", "u4", "b1",
    "e4m3", "e5m2", "e3m2", "e2m3", "e2m1",
)  # fmt: skip
ACC_TYPES = ("f16", "f32", "f64", "s32")
KINDS: tuple[str | None, ...] = (None, "f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4")
SCALE_VECS: tuple[str | None, ...] = (None, "1X", "2X", "4X")
STYPES: tuple[str | None, ...] = (None, "ue8m0", "ue4m3")
BITOPS: tuple[str | None, ...] = (None, "xor", "and")
ROUNDINGS: tuple[str | None, ...] = (None, "rn", "rz", "rm", "rp")

F8 = ptx_names(FP8)  # .e4m3, .e5m2
F6F4 = ptx_names(FP6_FP4)  # .e3m2, .e2m3, .e2m1
F8F6F4 = F8 + F6F4
I8 = ("u8", "s8")
I4 = ("u4", "s4")
MX_KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")
ALL_KINDS = ("f8f6f4",) + MX_KINDS


def shape_mnk(shape: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
    assert m, shape
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


# --------------------------------------------------------------------------------------------
# Declarative rows: syntax lines of the excerpts
# --------------------------------------------------------------------------------------------
DENSE: tuple[str | None, ...] = (None,)
SPARSE: tuple[str | None, ...] = ("sp", "sp::ordered_metadata")
ORDERED: tuple[str | None, ...] = ("sp::ordered_metadata",)
SAME_F = (("f16", "f16"), ("f32", "f32"))  # (dtype, ctype): "dtype must be the same as ctype"
F32 = (("f32", "f32"),)
F64 = (("f64", "f64"),)
S32 = (("s32", "s32"),)
NO_SCALE = ((False, None, None),)


@dataclass(frozen=True)
class Row:
    """One syntax line; the variants are the product of its qualifier sets."""

    forms: tuple[str | None, ...]
    shapes: tuple[str, ...]
    atypes: tuple[str, ...]
    btypes: tuple[str, ...]
    cd: tuple[tuple[str, str], ...]  # (dtype, ctype) pairs allowed together
    layouts: tuple[tuple[str, str], ...] = (("row", "col"),)
    kinds: tuple[str | None, ...] = (None,)
    scales: tuple[tuple[bool, str | None, str | None], ...] = NO_SCALE
    satfinite: tuple[bool, ...] = (False,)
    bitops: tuple[str | None, ...] = (None,)
    roundings: tuple[str | None, ...] = (None,)
    source: str = ""


# Table 36 (004): kind -> element types, scale type, allowed .scale_vec_size; `None` in the
# sizes means "may be omitted" (mxf4 defaults to 2X, mxf8f6f4 to 1X; mxf4nvf4 has no default).
TABLE_36: tuple[tuple[str, tuple[str, ...], str, tuple[str | None, ...]], ...] = (
    ("mxf8f6f4", F8F6F4, "ue8m0", (None, "1X")),
    ("mxf4", ("e2m1",), "ue8m0", (None, "2X")),
    ("mxf4nvf4", ("e2m1",), "ue8m0", ("2X", "4X")),
    ("mxf4nvf4", ("e2m1",), "ue4m3", ("4X",)),
)
# Shape of each block-scaled kind (dense; sparse doubles K).
_MX_SHAPE_K = {"mxf8f6f4": 32, "mxf4": 64, "mxf4nvf4": 64}


def _block_scaled_rows(forms, sparse: bool) -> list[Row]:
    return [
        Row(
            forms,
            (f"m16n8k{_MX_SHAPE_K[kind] * (2 if sparse else 1)}",),
            types,
            types,
            F32,
            kinds=(kind,),
            scales=tuple((True, sv, stype) for sv in sizes),
            source=f"{'001' if sparse else '000'} block scaling, Table 36 row {kind}/{stype}",
        )
        for kind, types, stype, sizes in TABLE_36
    ]


ROWS: tuple[Row, ...] = (
    # ---- 000: dense mma.sync ------------------------------------------------------------
    Row(DENSE, ("m8n8k4",), ("f16",), ("f16",),
         cd=(("f16", "f16"), ("f32", "f16"), ("f32", "f32")),  # ctype .f32 -> dtype .f32
         layouts=tuple(itertools.product(LAYOUTS, LAYOUTS)), source="000 f16 m8n8k4"),
    Row(DENSE, ("m16n8k8", "m16n8k16"), ("f16",), ("f16",), SAME_F, source="000 f16"),
    Row(DENSE, ("m16n8k4", "m16n8k8"), ("tf32",), ("tf32",), F32, source="000 tf32"),
    Row(DENSE, ("m16n8k8", "m16n8k16"), ("bf16",), ("bf16",), F32, source="000 bf16"),
    Row(DENSE, ("m16n8k16", "m16n8k32"), F8, F8, SAME_F, source="000 f8type"),
    Row(DENSE, ("m16n8k32",), F8F6F4, F8F6F4, SAME_F, kinds=("f8f6f4",),
         source="000 kind::f8f6f4"),
    *_block_scaled_rows(DENSE, sparse=False),
    Row(DENSE, ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"), ("f64",), ("f64",), F64,
         roundings=ROUNDINGS, source="000 f64 (rounding modifiers: Precision and rounding)"),
    Row(DENSE, ("m8n8k16", "m16n8k16", "m16n8k32"), I8, I8, S32, satfinite=(False, True),
         source="000 u8/s8"),
    Row(DENSE, ("m8n8k32", "m16n8k32", "m16n8k64"), I4, I4, S32, satfinite=(False, True),
         source="000 u4/s4"),
    Row(DENSE, ("m8n8k128", "m16n8k128", "m16n8k256"), ("b1",), ("b1",), S32,
         bitops=("xor", "and"), source="000 b1"),
    # ---- 001: sparse mma.sp / mma.sp::ordered_metadata ----------------------------------
    Row(SPARSE, ("m16n8k16", "m16n8k32"), ("f16",), ("f16",), SAME_F, source="001 f16"),
    Row(SPARSE, ("m16n8k16", "m16n8k32"), ("bf16",), ("bf16",), F32, source="001 bf16"),
    Row(SPARSE, ("m16n8k8", "m16n8k16"), ("tf32",), ("tf32",), F32, source="001 tf32"),
    Row(SPARSE, ("m16n8k64",), F8, F8, F32, source="001 f8type"),
    # Not in 001's syntax lines, only in its notes: "Support for shape .m16n8k32 and .f16
    # dtype/ctype with .e4m3/.e5m2 ... introduced in PTX ISA version 8.7 ... requires sm_120".
    Row(SPARSE, ("m16n8k32", "m16n8k64"), F8, F8, SAME_F, source="001 notes: f8 k32 / f16"),
    Row(ORDERED, ("m16n8k64",), F8F6F4, F8F6F4, SAME_F, kinds=("f8f6f4",),
         source="001 kind::f8f6f4"),
    *_block_scaled_rows(ORDERED, sparse=True),
    Row(SPARSE, ("m16n8k32", "m16n8k64"), I8, I8, S32, satfinite=(False, True),
         source="001 u8/s8"),
    Row(SPARSE, ("m16n8k64", "m16n8k128"), I4, I4, S32, satfinite=(False, True),
         source="001 u4/s4"),
)  # fmt: skip


# wgmma.mma_async's N (m64nNk..) by operand type, as ptxas 13.0 takes them on sm_90a: every multiple
# of 8 from 8 to 256, but for 8-bit integers (m64nNk32.s32.{s8,u8}) only 8, 16, 24 and the
# multiples of 16 ("Illegal matrix shape '.m64n40k32' for instruction 'wgmma.mma_async with
# integer types'", and so on to n248: probed one N at a time)
WGMMA_INTEGER_N = (8, 16, 24, *range(32, 257, 16))


def wgmma_n_legal(atype: str, n: int) -> bool:
    """Whether wgmma.mma_async takes N = `n` for A and B elements of `atype` (a PTX name)."""
    if atype in ("s8", "u8"):
        return n in WGMMA_INTEGER_N
    return 8 <= n <= 256 and n % 8 == 0
