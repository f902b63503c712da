"""The element records (`compiler/core/elements.py`) against facts from outside them: ml_dtypes'
finfo/iinfo, xDSL's builtin types, the PTX ISA's mma table and its container sentence; and the
two indexes and derived sets against the records."""

import ml_dtypes
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, IntegerType, Signedness
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from tilemma.compiler.core import isa, isa_rows
from tilemma.compiler.core import elements as E

RECORDS = list(E.ELEMENTS.values())
# Float types whose value dtype is their own format (tf32 lives in float32, ue4m3 in e4m3fn).
OWN_FLOATS = [e for e in RECORDS if e.is_float and e.name not in ("tf32", "ue4m3")]
INTS = [e for e in RECORDS if not e.is_float]


@pytest.mark.parametrize("e", OWN_FLOATS, ids=lambda e: e.name)
def test_float_format_is_ml_dtypes(e):
    info = ml_dtypes.finfo(e.dtype)
    assert (e.bits, e.mantissa_bits, e.emin) == (info.bits, info.nmant, info.minexp)
    assert e.max_finite == float(info.max)
    if e.mantissa_bits:  # the smallest subnormal: one unit of the last place at emin
        assert 2.0 ** (e.emin - e.mantissa_bits) == float(info.smallest_subnormal)
    low = float(info.smallest_normal) if e.name == "f8E8M0FNU" else float(info.min)
    assert e.float_range == (low, float(info.max))


def test_tf32_and_ue4m3_formats():
    # tf32: f32's exponent range with a 10-bit mantissa, carried as f32's 32-bit image;
    # ue4m3: e4m3 without its sign.
    tf32, f32 = E.ELEMENTS["tf32"], ml_dtypes.finfo(np.float32)
    assert (tf32.bits, tf32.mantissa_bits, tf32.emin, tf32.dtype) == (32, 10, f32.minexp, np.float32)
    assert tf32.max_finite == float.fromhex("0x1.ffcp127")
    ue4m3, e4m3 = E.ELEMENTS["ue4m3"], ml_dtypes.finfo(ml_dtypes.float8_e4m3fn)
    assert (ue4m3.bits, ue4m3.mantissa_bits, ue4m3.emin, ue4m3.signed) == (8, e4m3.nmant, e4m3.minexp, False)
    assert ue4m3.float_range == (0.0, float(e4m3.max))


@pytest.mark.parametrize("e", INTS, ids=lambda e: e.name)
def test_integer_width_and_range_are_iinfo(e):
    if e.is_bit:  # i1: 0/1 in a uint8
        assert (e.bits, e.int_range, e.dtype) == (1, (0, 1), np.uint8)
        return
    info = ml_dtypes.iinfo(e.dtype)
    assert (e.bits, e.int_range, e.signed) == (info.bits, (info.min, info.max), info.min < 0)


@pytest.mark.parametrize("e", RECORDS, ids=lambda e: e.name)
def test_mlir_name_is_xdsls(e):
    ctx = Context()
    ctx.load_dialect(Builtin)
    if not e.builtin:  # tilemma's own !tile.ue4m3: not a builtin spelling
        with pytest.raises(ParseError):
            Parser(ctx, e.name).parse_type()
        return
    t = Parser(ctx, e.name).parse_type()
    assert str(t) == e.name
    if isinstance(t, IntegerType):
        want = Signedness.SIGNLESS if e.is_bit else Signedness.SIGNED if e.signed else Signedness.UNSIGNED
        assert (t.width.data, t.signedness.data, e.is_float) == (e.bits, want, False)
    elif e.name == "tf32":  # xDSL counts sign + f32's 8 exponent bits + 10 mantissa bits
        assert t.bitwidth == 1 + 8 + e.mantissa_bits
    else:
        assert (t.bitwidth, e.is_float) == (e.bits, True)


def test_every_ptx_type_of_the_isa_has_a_record_and_no_record_is_unknown_to_it():
    used = set(isa_rows.INPUT_TYPES) | set(isa_rows.ACC_TYPES) | {s for s in isa_rows.STYPES if s}
    for v in isa.all_variants():
        used |= {v.atype, v.btype, v.ctype, v.dtype} | ({v.stype} if v.stype else set())
    assert used == set(E.BY_PTX)


def test_container_places_are_the_isas():
    # 000/001: ".e2m1 resides in central 4 bits of the 8-bit container with padding in the upper 2
    # bits and lower 2 bits"; ".e3m2 or .e2m3 ... resides in the lower 6 bits ... with padding in
    # the upper 2 bits".
    padding = {"e2m1": (2, 2), "e3m2": (0, 2), "e2m3": (0, 2)}  # (below, above)
    placed = {e.ptx: (e.container_shift, 8 - e.bits - e.container_shift)
              for e in RECORDS if e.container_shift is not None}
    assert placed == padding
    assert all(E.BY_PTX[t].register_bits == 8 for t in padding)


def test_storage():
    for e in RECORDS:
        assert e.storage_bits in (1, 4) or e.storage_bits % 8 == 0, e.name  # packs or fills bytes
        if e.storage_bits >= 8:  # a buffer element is one stored element
            assert e.storage_dtype.itemsize * 8 == e.storage_bits, e.name
        assert e.code_dtype.kind == "u" and e.code_dtype.itemsize * 8 >= e.storage_bits
        assert e.stored_as in E.ELEMENTS and E.ELEMENTS[e.stored_as].bits == e.bits
    assert E.BYTE_PER_ELEMENT == ("f6E3M2FN", "f6E2M3FN")
    assert E.ELEMENTS["tf32"].stored_as == "f32"


def test_indexes_and_views():
    assert len(E.BY_PTX) == len(E.ELEMENTS)
    assert all(E.BY_PTX[e.ptx] is e and E.ELEMENTS[e.name] is e for e in RECORDS)
    assert all(E.canonical(ptx) == name for ptx, name in E.ALIASES.items())
    assert all(E.canonical(e.name) == e.name for e in RECORDS)
    assert E.ptx_names(E.FP8) == ("e4m3", "e5m2")
    assert E.ptx_names(E.FP6_FP4) == ("e3m2", "e2m3", "e2m1")
    assert E.ptx_names(E.SCALES) == ("ue8m0", "ue4m3")


def test_unknown_name_lists_both_spellings():
    with pytest.raises(ValueError) as err:
        E.canonical("e9m9")
    assert str(err.value) == (
        "unknown element type 'e9m9'; known: f16, bf16, tf32, f32, f64, si8, ui8, si4, ui4, i1, si32, "
        "f8E4M3FN, f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN, f8E8M0FNU, ue4m3 (PTX spellings e4m3, e5m2, "
        "e3m2, e2m3, e2m1, ue8m0, s8, u8, s4, u4, b1, s32 also work)"
    )
