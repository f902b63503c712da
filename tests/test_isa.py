"""Facts of the mma table (compiler/isa.py), the SM targets (compiler/targets.py) and the
`isa` command, checked against the excerpts in ../shared/ptx-isa and ptxas' measured limits."""

from __future__ import annotations

import subprocess

import pytest
from tests.inprocess import run_main
from tilemma.compiler.core import isa
from tilemma.compiler.driver import isa_commands
from tilemma.compiler.core.targets import (
    ALL_TARGETS,
    DEFAULT_PTX,
    PtxVersion,
    SmTarget,
    parse_ptx_version,
    parse_sm,
    previous_ptx_version,
)

# ------------------------------------------------------------------------------------------
# targets.py
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,name",
    [("90", "sm_90"), ("sm_90", "sm_90"), ("120a", "sm_120a"), ("sm_120a", "sm_120a"),
     ("SM_100F", "sm_100f"), (" 75 ", "sm_75")],
)  # fmt: skip
def test_parse_sm_spellings(text, name):
    assert parse_sm(text).name == name


@pytest.mark.parametrize("bad", ["70", "sm_101", "sm_90b", "ninety", "", "sm_", "90.0"])
def test_parse_sm_rejects_with_valid_spellings(bad):
    with pytest.raises(ValueError) as e:
        parse_sm(bad)
    msg = str(e.value)
    assert repr(bad) in msg or bad.strip() in msg
    assert "sm_75" in msg and "sm_121f" in msg and "'120a'" in msg


def test_all_targets_are_the_ptxas_13_list():
    names = {t.name for t in ALL_TARGETS}
    expected = {"sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a"}
    for n in (100, 103, 110, 120, 121):
        expected |= {f"sm_{n}", f"sm_{n}a", f"sm_{n}f"}
    assert names == expected
    assert list(ALL_TARGETS) == sorted(ALL_TARGETS)


@pytest.mark.parametrize(
    "target,ptx",
    [("sm_75", "6.3"), ("sm_80", "7.0"), ("sm_89", "7.8"), ("sm_90", "7.8"), ("sm_90a", "8.0"),
     ("sm_100a", "8.6"), ("sm_100f", "8.8"), ("sm_103", "8.8"), ("sm_110", "9.0"),
     ("sm_120", "8.7"), ("sm_120a", "8.7"), ("sm_120f", "8.8"), ("sm_121a", "8.8"),
     ("sm_88", "7.3")],
)  # fmt: skip
def test_min_ptx_per_target_as_measured_with_ptxas(target, ptx):
    assert parse_sm(target).min_ptx == PtxVersion.parse(ptx)


def test_ptx_version_parsing_and_order():
    assert PtxVersion.parse("8.7").as_tuple() == (8, 7)
    assert str(parse_ptx_version(" 9.0 ")) == "9.0"
    assert PtxVersion.parse("8.10") > PtxVersion.parse("8.9") > PtxVersion.parse("8.0")
    assert previous_ptx_version(PtxVersion(8, 0)) == PtxVersion(7, 8)  # there is no 7.9
    assert DEFAULT_PTX == PtxVersion(9, 0)
    for bad in ("8", "8.x", "v8.7", "8.7.1", ""):
        with pytest.raises(ValueError, match="MAJOR.MINOR"):
            PtxVersion.parse(bad)


def test_target_rule_predicates():
    sm_90, sm_120, sm_120a, sm_120f, sm_121a, sm_121f, sm_100a = (
        parse_sm(s) for s in ("90", "120", "120a", "120f", "121a", "121f", "100a")
    )
    # "requires sm_89 or higher": any suffix of a later number
    assert sm_90.at_least(89) and sm_100a.at_least(89) and not parse_sm("86").at_least(89)
    # "requires sm_120a": only that arch-specific target
    assert sm_120a.is_arch(120) and not sm_121a.is_arch(120) and not sm_120f.is_arch(120)
    assert sm_121a.is_arch(120, 121)
    # "supported on sm_120f or higher in the same family"
    fam = {t.name for t in ALL_TARGETS if t.in_family_from(120)}
    assert fam == {"sm_120f", "sm_120a", "sm_121f", "sm_121a"}
    assert not sm_120.in_family_from(120) and not sm_100a.in_family_from(120)
    # what ptxas lets run where: base code forward, 'f' inside its family, 'a' nowhere else
    assert sm_121f.runs_code_for(sm_120f) and not parse_sm("110").runs_code_for(parse_sm("100f"))
    assert not sm_121a.runs_code_for(sm_120a) and parse_sm("100").runs_code_for(sm_90)
    assert sm_90.family == 9 and sm_121a.family == 12 and parse_sm("103f").family == 10


def test_smtarget_validates_suffix():
    with pytest.raises(ValueError):
        SmTarget(90, "b")


# ------------------------------------------------------------------------------------------
# Opcode spellings: every instruction of the excerpts' examples parses and round-trips
# ------------------------------------------------------------------------------------------
# (opcode, d, a, b, c) register counts exactly as the excerpts' example operand lists show.
_MMA = "mma.sync.aligned."
_SPO = "mma.sp::ordered_metadata.sync.aligned."
EXCERPT_EXAMPLES = [
    # 000 dense
    ("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16", 4, 2, 2, 4),
    ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f16", 8, 2, 2, 4),
    ("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 4, 2, 1, 4),
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 2, 4, 2, 2),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4, 4, 2, 4),
    ("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", 4, 2, 1, 4),
    ("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", 4, 2, 1, 4),
    ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 4, 4, 2, 4),
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 4, 4, 2, 4),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32", 4, 4, 2, 4),
    ("mma.sync.aligned.m16n8k16.row.col.f32.e5m2.e4m3.f32", 4, 2, 1, 4),
    ("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16", 2, 4, 2, 2),
    ("mma.sync.aligned.m16n8k16.row.col.f16.e5m2.e5m2.f16", 2, 2, 1, 2),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32", 4, 4, 2, 4),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f16.e2m3.e2m1.f16", 2, 4, 2, 2),
    # 001 sparse
    ("mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 2, 2, 2, 2),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 2, 2, 2, 2),
    ("mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 4, 2, 2, 4),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 4, 2, 2, 4),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", 4, 4, 4, 4),
    ("mma.sp.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32", 4, 4, 4, 4),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 4, 2, 2, 4),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32",
     4, 4, 4, 4),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f16.e2m3.e2m1.f16",
     2, 4, 4, 2),
    ("mma.sp.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.u8.s32", 4, 2, 2, 4),
    ("mma.sp.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32", 4, 4, 4, 4),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32",
     4, 4, 4, 4),
    ("mma.sp.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", 4, 2, 2, 4),
    ("mma.sp.sync.aligned.m16n8k128.row.col.satfinite.s32.u4.u4.s32", 4, 4, 4, 4),
    (_SPO + "m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", 4, 4, 4, 4),
    (_SPO + "m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
     4, 4, 4, 4),
    (_SPO + "m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0",
     4, 4, 4, 4),
    (_SPO + "m16n8k64.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e3m2.e2m1.f32.ue8m0",
     4, 4, 4, 4),
    (_SPO + "m16n8k64.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e5m2.f32.ue8m0",
     4, 4, 4, 4),
    # the brief's block-scaled dense example
    (_MMA + "m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
     4, 4, 2, 4),
]  # fmt: skip


@pytest.mark.parametrize("opcode,d,a,b,c", EXCERPT_EXAMPLES)
def test_excerpt_examples_parse_round_trip_and_register_counts(opcode, d, a, b, c):
    v = isa.parse_opcode(opcode)
    assert v.opcode == opcode
    assert v.is_defined
    assert [v.operand(n).count for n in "dabc"] == [d, a, b, c]
    if v.sparse:
        assert v.operand("e").reg_type == ".b32" and v.operand("f").immediate
    if v.block_scale:
        assert v.operand("scale_a").reg_type == ".b32" == v.operand("scale_b").reg_type
        assert v.operand("selector_a") == isa.Operand("selector_a", 2, ".u16")


def test_operand_order_and_types():
    v = isa.parse_opcode(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale"
        ".f32.e4m3.e2m1.f32.ue8m0"
    )
    assert [o.name for o in v.operands] == [
        "d", "a", "b", "c", "e", "f", "scale_a", "selector_a", "scale_b", "selector_b"
    ]  # fmt: skip
    f16 = isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16")
    assert {o.reg_type for o in f16.operands} == {".f16x2"}
    f64 = isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64")
    assert [(o.count, o.reg_type) for o in f64.operands] == [(4, ".f64"), (8, ".f64"),
                                                             (4, ".f64"), (4, ".f64")]  # fmt: skip
    m8 = isa.parse_opcode("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64")
    assert [o.count for o in m8.operands] == [2, 1, 1, 2]  # no quad-pair factor for f64
    b1 = isa.parse_opcode("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc")
    assert [(o.count, o.reg_type) for o in b1.operands] == [(4, ".s32"), (4, ".b32"),
                                                            (2, ".b32"), (4, ".s32")]  # fmt: skip
    mx4 = isa.parse_opcode(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
    )  # e2m1 packed 8 per register under mxf4 (no 8-bit containers)
    assert [o.count for o in mx4.operands[:4]] == [4, 4, 2, 4]


def test_f16_m8n8k4_has_all_layouts_and_the_ctype_rule():
    m8 = [v for v in isa.all_variants() if v.shape == "m8n8k4" and v.atype == "f16"]
    assert {(v.alayout, v.blayout) for v in m8} == {
        ("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")
    }  # fmt: skip
    assert {(v.dtype, v.ctype) for v in m8} == {("f16", "f16"), ("f32", "f16"), ("f32", "f32")}
    assert len(m8) == 12
    with pytest.raises(ValueError, match="ctype .f32"):
        isa.parse_opcode("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f32")
    with pytest.raises(ValueError, match="alayout .col"):
        isa.parse_opcode("mma.sync.aligned.m16n8k16.col.col.f32.f16.f16.f32")


def test_family_sizes():
    count = lambda pred: sum(1 for v in isa.all_variants() if pred(v))
    dense, ordered = (lambda v: v.sparse is None), (lambda v: v.sparse == "sp::ordered_metadata")
    # 5 x 5 type pairs x {f16, f32} accumulators
    assert count(lambda v: dense(v) and v.kind == "f8f6f4") == 50
    assert count(lambda v: ordered(v) and v.kind == "f8f6f4") == 50
    # 5 x 5 pairs x (scale_vec omitted | 1X)
    assert count(lambda v: dense(v) and v.kind == "mxf8f6f4") == 50
    # mxf4: omitted/2X; mxf4nvf4: 2X/ue8m0, 4X/ue4m3, 4X/ue8m0 (PTX 9.1)
    assert count(lambda v: dense(v) and v.kind == "mxf4") == 2
    assert count(lambda v: dense(v) and v.kind == "mxf4nvf4") == 3
    # s8/u8: 3 shapes x 4 signedness mixes x satfinite on/off
    assert count(lambda v: dense(v) and v.atype in ("s8", "u8")) == 24
    assert count(lambda v: dense(v) and v.atype == "b1") == 6  # 3 shapes x .xor/.and
    assert count(lambda v: v.atype == "f64") == 20  # 4 shapes x (default, .rn .rz .rm .rp)
    assert not any(v.kind and v.sparse == "sp" for v in isa.all_variants())  # ordered only
    assert all(v.opcode == isa.parse_opcode(v.opcode).opcode for v in isa.all_variants())


def test_min_ptx_from_the_notes():
    mp = lambda op: str(isa.parse_opcode(op).min_ptx)
    assert mp("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16") == "6.4"
    assert mp("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16") == "6.5"
    assert mp("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc") == "7.0"
    assert mp("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.and.popc") == "7.1"
    assert mp("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64") == "7.8"
    assert mp("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == "8.4"
    assert mp("mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32") == "8.7"
    assert mp("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16") == "8.7"
    assert mp("mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == "7.1"
    assert mp("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == "8.5"
    assert mp("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32"
              ".e2m1.e2m1.f32.ue8m0") == "9.1"  # fmt: skip
    v = isa.parse_opcode("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32")
    assert str(v.min_ptx_on("sm_120a")) == "8.7"
    assert str(v.min_ptx_on("sm_121f")) == "8.8"  # 'from PTX ISA version 8.8' for sm_120f+


# ------------------------------------------------------------------------------------------
# Legality and the reasons' wording
# ------------------------------------------------------------------------------------------
def test_reason_needs_newer_sm():
    assert isa.check("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_80") == [
        "needs sm_89 or newer"
    ]
    assert isa.check("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "75") == [
        "needs sm_80 or newer"
    ]
    assert isa.check("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64", "sm_80") == [
        "needs sm_90 or newer"
    ]


def test_reason_needs_newer_ptx():
    op = "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    assert isa.check(op, "sm_80", "8.4") == ["needs PTX ISA 8.5 or newer"]
    assert isa.check(op, "sm_80", "8.5") == []
    sm = isa.check("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90", "7.7")
    assert sm == [".target sm_90 needs PTX ISA 7.8 or newer"]


def test_reason_arch_specific_and_family():
    sparse_mx4 = ("mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4"
                  ".block_scale.f32.e2m1.e2m1.f32.ue8m0")  # fmt: skip
    assert isa.check(sparse_mx4, "sm_120f") == ["needs sm_120a or sm_121a"]
    assert isa.check(sparse_mx4, "sm_121a") == []
    dense_mx4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
    assert isa.check(dense_mx4, "sm_121f") == []  # dense: the whole sm_120f family
    assert isa.check(dense_mx4, "sm_120") == ["needs sm_120f, sm_120a, sm_121f or sm_121a"]
    assert isa.check(dense_mx4, "sm_100a") == ["needs sm_120f, sm_120a, sm_121f or sm_121a"]


def test_reason_shape_not_defined():
    assert isa.check("mma.sync.aligned.m16n8k4.row.col.s32.s8.s8.s32", "sm_90")[0].startswith(
        "shape m16n8k4 is not defined for s8"
    )
    assert isa.check("mma.sync.aligned.m16n8k4.row.col.f32.bf16.bf16.f32", "sm_90")[0].startswith(
        "shape m16n8k4 is not defined for bf16"
    )
    assert isa.check("mma.sync.aligned.m16n8k8.row.col.s32.s8.s8.s32", "sm_90") == [
        "shape m16n8k8 is not defined for s8 (allowed: m8n8k16, m16n8k16, m16n8k32)"
    ]


def test_reason_kind_and_scale_vec():
    (why,) = isa.check(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e4m3.e4m3.f32.ue8m0",
        "sm_120a",
    )
    assert why.startswith(".kind::mxf4 is not defined for e4m3")
    (why,) = isa.check(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
        "sm_120a",
    )
    assert why.startswith("omitting .scale_vec_size is not defined") and "4X" in why
    op = ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1"
          ".e2m1.f32.ue8m0")  # fmt: skip
    assert isa.check(op, "sm_120a") == ["needs PTX ISA 9.1 or newer"]
    assert isa.check(op, "sm_120a", "9.1") == []


def test_parse_errors_name_the_qualifier():
    with pytest.raises(ValueError, match=r"'\.foo'"):
        isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.foo.f32.f16.f16.f32")
    with pytest.raises(ValueError, match=r"unknown shape '\.m16n8k5'"):
        isa.parse_opcode("mma.sync.aligned.m16n8k5.row.col.f32.f16.f16.f32")
    with pytest.raises(ValueError, match=r"'\.kind::mxf9'"):
        isa.parse_opcode("mma.sync.aligned.m16n8k32.row.col.kind::mxf9.f32.e4m3.e4m3.f32")
    with pytest.raises(ValueError, match="start with 'mma.'"):
        isa.parse_opcode("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32")
    with pytest.raises(ValueError, match=r"'\.row' out of place"):
        isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.row")
    with pytest.raises(ValueError, match="ends early"):
        isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.f32.f16")
    with pytest.raises(ValueError, match="satfinite is not defined for f16"):
        isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32")


def test_default_ptx_is_newest_ptxas_accepts():
    op = "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32"
    assert isa.check(op, "sm_120f") == []  # needs 8.8 on sm_120f; default 9.0
    assert len(isa.legal_variants("sm_90")) == len(isa.legal_variants("sm_90", "9.0"))
    assert len(isa.legal_variants("sm_90", "7.0")) < len(isa.legal_variants("sm_90"))


def test_supported_on_and_legal_variants_agree():
    for t in ("sm_75", "sm_89", "sm_120a", "sm_121f"):
        legal = set(isa.legal_variants(t))
        assert legal and legal <= {v for v in isa.all_variants() if v.supported_on(t)}
    assert not any(v.kind for v in isa.legal_variants("sm_90"))
    assert len(isa.legal_variants("sm_120a")) > len(isa.legal_variants("sm_120f"))


# ------------------------------------------------------------------------------------------
# EXCEPTIONS: documented, and the table follows ptxas where ptxas is stricter
# ------------------------------------------------------------------------------------------
def test_exceptions_are_documented():
    names = [d.name for d in isa.EXCEPTIONS]
    assert len(names) == len(set(names))
    for d in isa.EXCEPTIONS:
        assert d.isa_text and d.ptxas_evidence
        assert d.drop or d.gate or d.accepted_like


def test_table_follows_ptxas_where_it_is_stricter():
    # 001's notes name sparse f8 at m16n8k32; ptxas refuses it everywhere
    assert isa.isa_text_defines(
        isa.parse_qualifiers("mma.sp.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
    )
    with pytest.raises(ValueError):
        isa.parse_opcode("mma.sp.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
    # sparse f8 with f16 accumulators: ordered metadata only, and sm_120a / sm_120f family
    op = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16"
    assert isa.check(op, "sm_120") == ["needs sm_120f, sm_120a, sm_121f or sm_121a"]
    assert isa.check(op, "sm_121f") == []
    with pytest.raises(ValueError):
        isa.parse_opcode(op.replace("sp::ordered_metadata", "sp"))


def test_ptxas_only_spellings_are_refused_with_a_note():
    (why,) = isa.check("mma.sync.aligned.m8n8k32.row.col.s32.s4.s4.s32.xor.popc", "sm_90")
    assert "int4-ignores-bitop" in why and "does not emit it" in why
    (why,) = isa.check("mma.sync.aligned.m8n8k4.row.col.f32.bf16.bf16.f32", "sm_75")
    assert "EXCEPTIONS" not in why  # ptxas refuses it there too


# ------------------------------------------------------------------------------------------
# The `isa` command
# ------------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_main("tilemma", isa_commands.main, ["isa", *args])  # in this process (tests.inprocess)


def test_cli_list():
    r = _cli("list", "--sm", "90")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [v.opcode for v in isa.legal_variants("sm_90")]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in lines
    assert "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64" in lines
    assert not any("kind::" in ln for ln in lines)
    older = _cli("list", "--sm", "sm_90", "--ptx", "7.8").stdout.splitlines()
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in lines
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" not in older
    assert _cli("list", "--sm", "90").stdout == r.stdout  # stable order


def test_cli_check_legal_and_illegal():
    ok = _cli("check", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "--sm", "80")
    assert ok.returncode == 0
    assert ok.stdout.startswith("legal: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
    assert "a: 4 x .b32" in ok.stdout
    bad = _cli("check", "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16"
               ".f32", "--sm", "80", "--ptx", "8.4")  # fmt: skip
    assert bad.returncode == 1
    assert "needs PTX ISA 8.5 or newer" in bad.stdout
    shape = _cli("check", "mma.sync.aligned.m16n8k4.row.col.s32.s8.s8.s32", "--sm", "80")
    assert shape.returncode == 1 and "shape m16n8k4 is not defined for s8" in shape.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (("check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f33", "--sm", "80"), ".f33"),
        (("check", "not-an-mma", "--sm", "80"), "not an mma opcode"),
        (("check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--sm", "70"), "sm_70"),
        (("list", "--sm", "sm_9000"), "sm_9000"),
        (("list", "--sm", "90", "--ptx", "eight"), "MAJOR.MINOR"),
    ],
)
def test_cli_errors_are_one_line_without_traceback(args, needle):
    r = _cli(*args)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilemma: error: ") and needle in err[0]
