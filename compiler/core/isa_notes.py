"""What each `mma` variant needs, as the excerpts say it: the ways a target is gated (`Gate`:
any of 'sm_XY or higher', exact 'a' targets, 'f' families, each from a PTX version), one row per
sentence of "PTX ISA Notes" and "Target ISA Notes" (a variant needs the newest PTX version of
every note that matches it, and every target gate), and `EXCEPTIONS`, where ptxas 13.0 and the
text disagree. `isa` applies them to the rows of `isa_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilemma.compiler.core.isa_rows import ALL_KINDS, F6F4, F8, I4, I8
from tilemma.compiler.core.targets import ALL_TARGETS, PtxVersion, SmTarget, parse_ptx_version

# --------------------------------------------------------------------------------------------
# Target rules: the three ways the excerpts gate a feature
# --------------------------------------------------------------------------------------------
_NO_PTX_LIMIT = PtxVersion(0, 0)


@dataclass(frozen=True)
class TargetRule:
    """One clause of a Target ISA Notes sentence; `min_ptx` is its 'from PTX ISA version'."""

    how: str  # "min" (sm_XY or higher) | "arch" (exact 'a' targets) | "family" (sm_XYf+)
    numbers: tuple[int, ...]
    min_ptx: PtxVersion = _NO_PTX_LIMIT

    def holds(self, t: SmTarget) -> bool:
        if self.how == "min":
            return t.at_least(self.numbers[0])
        if self.how == "arch":
            return t.is_arch(*self.numbers)
        return t.in_family_from(self.numbers[0])


@dataclass(frozen=True)
class Gate:
    """Any-of target rules: 'requires sm_120a and is supported on sm_120f ... from PTX 8.8'."""

    rules: tuple[TargetRule, ...]
    text: str

    def holds(self, t: SmTarget) -> bool:
        return any(r.holds(t) for r in self.rules)


def sm_or_higher(n: int) -> Gate:
    return Gate((TargetRule("min", (n,)),), f"sm_{n} or higher")


def arch_only(*ns: int, ptx: str = "0.0") -> Gate:
    return Gate(
        (TargetRule("arch", ns, parse_ptx_version(ptx)),),
        " or ".join(f"sm_{n}a" for n in ns),
    )


def arch_or_family(n: int, arch_ptx: str, family_ptx: str) -> Gate:
    """'requires sm_Na and is supported on sm_Nf or higher in the same family from PTX X'."""
    return Gate(
        (
            TargetRule("arch", (n,), parse_ptx_version(arch_ptx)),
            TargetRule("family", (n,), parse_ptx_version(family_ptx)),
        ),
        f"sm_{n}a, or sm_{n}f or higher in the same family",
    )


def describe_targets(gates: tuple[Gate, ...]) -> str:
    """'sm_89 or newer' when the allowed targets are exactly 'this number and up', else the
    list of known targets that satisfy every gate ('sm_120a or sm_121a')."""
    ok = [t for t in ALL_TARGETS if all(g.holds(t) for g in gates)]
    if not ok:
        return "a target that no known SM satisfies (" + "; ".join(g.text for g in gates) + ")"
    lowest = min(t.number for t in ok)
    if ok == [t for t in ALL_TARGETS if t.number >= lowest]:
        return f"sm_{lowest} or newer"
    names = [t.name for t in ok]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


# --------------------------------------------------------------------------------------------
# Notes: one row per sentence of "PTX ISA Notes" and "Target ISA Notes"
# --------------------------------------------------------------------------------------------
_D = {"dense": True}
_S = {"dense": False}

# (match, PTX version, sentence)
PTX_NOTES: tuple[tuple[dict, str, str], ...] = (
    # 000 dense
    (_D, "6.4", "000: Introduced in PTX ISA version 6.4."),
    (_D | {"atype": {"f16"}, "shape": {"m8n8k4"}}, "6.4", "000: .f16 m8n8k4 in 6.4"),
    (_D | {"atype": {"f16"}, "shape": {"m16n8k8"}}, "6.5", "000: .f16 m16n8k8 in 6.5"),
    (_D | {"atype": I8, "shape": {"m8n8k16"}}, "6.5", "000: .u8/.s8 m8n8k16 in 6.5"),
    (_D | {"atype": I4, "shape": {"m8n8k32"}}, "6.5", "000: .u4/.s4 m8n8k32 in 6.5"),
    (_D | {"atype": {"f64"}, "shape": {"m8n8k4"}}, "7.0", "000: .f64 m8n8k4 in 7.0"),
    (_D | {"atype": {"f16"}, "shape": {"m16n8k16"}}, "7.0", "000: .f16 m16n8k16 in 7.0"),
    (_D | {"atype": {"bf16"}}, "7.0", "000: .bf16 m16n8k8/m16n8k16 in 7.0"),
    (_D | {"atype": {"tf32"}}, "7.0", "000: .tf32 m16n8k4/m16n8k8 in 7.0"),
    (_D | {"atype": I8, "shape": {"m16n8k16", "m16n8k32"}}, "7.0", "000: .u8/.s8 m16n8k16/k32 in 7.0"),
    (_D | {"atype": I4, "shape": {"m16n8k32", "m16n8k64"}}, "7.0", "000: .u4/.s4 m16n8k32/k64 in 7.0"),
    (_D | {"atype": {"b1"}}, "7.0", "000: .b1 m8n8k128/m16n8k128/m16n8k256 in 7.0"),
    (_D | {"bitop": {"and"}}, "7.1", "000: .and in single-bit mma in 7.1"),
    (_D | {"atype": {"f64"}, "shape": {"m16n8k4", "m16n8k8", "m16n8k16"}}, "7.8",
     "000: .f64 m16n8k4/k8/k16 in 7.8"),
    (_D | {"types": F8}, "8.4", "000: .e4m3/.e5m2 in 8.4"),
    (_D | {"types": F8, "shape": {"m16n8k16"}}, "8.7", "000: m16n8k16 with .e4m3/.e5m2 in 8.7"),
    (_D | {"types": F8, "dtype": {"f16"}}, "8.7", "000: .f16 dtype/ctype with .e4m3/.e5m2 in 8.7"),
    (_D | {"types": F6F4}, "8.7", "000: .e3m2/.e2m3/.e2m1 in 8.7"),
    (_D | {"kind": ALL_KINDS}, "8.7", "000: .kind/.block_scale/.scale_vec_size in 8.7"),
    (_D | {"kind": {"mxf4nvf4"}, "scale_vec": {"4X"}, "stype": {"ue8m0"}}, "9.1",
     "000: .scale_vec::4X with .ue8m0 for .kind::mxf4nvf4 in 9.1"),
    # 001 sparse
    (_S, "7.1", "001: Introduced in PTX ISA version 7.1."),
    (_S | {"types": F8}, "8.4", "001: .e4m3/.e5m2 in 8.4"),
    (_S | {"sparse": {"sp::ordered_metadata"}}, "8.5", "001: mma.sp::ordered_metadata in 8.5"),
    (_S | {"types": F8, "shape": {"m16n8k32"}}, "8.7", "001: m16n8k32 with .e4m3/.e5m2 in 8.7"),
    (_S | {"types": F8, "dtype": {"f16"}}, "8.7", "001: .f16 dtype/ctype with .e4m3/.e5m2 in 8.7"),
    (_S | {"types": F6F4}, "8.7", "001: .e3m2/.e2m3/.e2m1 in 8.7"),
    (_S | {"kind": ALL_KINDS}, "8.7", "001: .kind/.block_scale/.scale_vec_size in 8.7"),
    (_S | {"kind": {"mxf4nvf4"}, "scale_vec": {"4X"}, "stype": {"ue8m0"}}, "9.1",
     "001: .scale_vec::4X with .ue8m0 for .kind::mxf4nvf4 in 9.1"),
)  # fmt: skip

# (match, gate, sentence)
TARGET_NOTES: tuple[tuple[dict, Gate, str], ...] = (
    # 000 dense
    (_D, sm_or_higher(70), "000: Requires sm_70 or higher."),
    (_D | {"atype": {"f16"}, "shape": {"m16n8k8"}}, sm_or_higher(75), "000: .f16 m16n8k8"),
    (_D | {"atype": I8, "shape": {"m8n8k16"}}, sm_or_higher(75), "000: .u8/.s8 m8n8k16"),
    (_D | {"atype": I4, "shape": {"m8n8k32"}}, sm_or_higher(75), "000: .u4/.s4 m8n8k32"),
    (_D | {"atype": {"b1"}, "shape": {"m8n8k128"}}, sm_or_higher(75), "000: .b1 m8n8k128"),
    (_D | {"atype": {"f64"}, "shape": {"m8n8k4"}}, sm_or_higher(80), "000: .f64 m8n8k4"),
    (_D | {"atype": {"f16"}, "shape": {"m16n8k16"}}, sm_or_higher(80), "000: .f16 m16n8k16"),
    (_D | {"atype": {"bf16"}}, sm_or_higher(80), "000: .bf16"),
    (_D | {"atype": {"tf32"}}, sm_or_higher(80), "000: .tf32"),
    (_D | {"atype": I8, "shape": {"m16n8k16", "m16n8k32"}}, sm_or_higher(80), "000: .u8/.s8 m16n8k16/k32"),
    (_D | {"atype": I4, "shape": {"m16n8k32", "m16n8k64"}}, sm_or_higher(80), "000: .u4/.s4 m16n8k32/k64"),
    (_D | {"atype": {"b1"}, "shape": {"m16n8k128", "m16n8k256"}}, sm_or_higher(80), "000: .b1 m16n8k128/k256"),
    (_D | {"bitop": {"and"}}, sm_or_higher(80), "000: .and in single-bit mma"),
    (_D | {"atype": {"f64"}, "shape": {"m16n8k4", "m16n8k8", "m16n8k16"}}, sm_or_higher(90),
     "000: .f64 m16n8k4/k8/k16"),
    (_D | {"types": F8}, sm_or_higher(89), "000: .e4m3/.e5m2 require sm_89 or higher"),
    (_D | {"types": F6F4}, arch_or_family(120, "8.7", "8.8"),
     "000: .e3m2/.e2m3/.e2m1 require sm_120a, sm_120f family from PTX 8.8"),
    (_D | {"kind": ALL_KINDS}, arch_or_family(120, "8.7", "8.8"),
     "000: .kind/.block_scale/.scale_vec_size require sm_120a, sm_120f+ family from PTX 8.8"),
    # 001 sparse
    (_S, sm_or_higher(80), "001: Requires sm_80 or higher."),
    (_S | {"types": F8}, sm_or_higher(89), "001: .e4m3/.e5m2 require sm_89 or higher"),
    (_S | {"sparse": {"sp::ordered_metadata"}}, sm_or_higher(80), "001: ordered_metadata sm_80"),
    (_S | {"types": F8, "shape": {"m16n8k32"}}, sm_or_higher(120), "001: f8 m16n8k32 requires sm_120"),
    (_S | {"types": F8, "dtype": {"f16"}}, sm_or_higher(120), "001: f8 with .f16 requires sm_120"),
    (_S | {"types": F6F4}, arch_or_family(120, "8.7", "8.8"),
     "001: .e3m2/.e2m3/.e2m1 require sm_120a, sm_120f family from PTX 8.8"),
    (_S | {"kind": ALL_KINDS}, arch_or_family(120, "8.7", "8.8"),
     "001: .kind/.block_scale require sm_120a, sm_120f+ family from PTX 8.8"),
    (_S | {"kind": {"mxf4", "mxf4nvf4"}}, arch_only(120, 121),
     "001: .kind::mxf4nvf4/.kind::mxf4 only on sm_120a, sm_121a"),
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# EXCEPTIONS: ptxas 13.0 disagrees with the ISA text; the table follows ptxas
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Deviation:
    """A documented disagreement between the ISA excerpt and ptxas 13.0.

    When ptxas is stricter than the text the table follows ptxas: `drop` removes the matching
    variants, `gate` adds a target requirement. When ptxas is looser and accepts a spelling
    the excerpts never define, `accepted_like` records where (wherever the defined variant
    obtained by replacing these qualifiers is legal); the table still refuses such spellings,
    because nothing documents what they compute."""

    name: str
    match: dict
    isa_text: str
    ptxas_evidence: str
    drop: bool = False
    gate: Gate | None = None
    accepted_like: dict | None = None
    accepted_gate: Gate | None = None  # a further target condition for accepted_like


# Where ptxas 13.0 takes a .kind it ignores: 'a'/'f' targets of sm_100+, 'a' only for sparse mx4.
_AF_100_PLUS = Gate(
    tuple(TargetRule("family", (n,), PtxVersion(8, 7)) for n in (100, 110, 120)),
    "an 'a' or 'f' target of sm_100 or newer",
)
_SPARSE_MXF4_F8 = Gate(
    (TargetRule("arch", (100, 103, 110, 120, 121), PtxVersion(8, 7)),),
    "an 'a' target of sm_100 or newer",
)


EXCEPTIONS: tuple[Deviation, ...] = (
    # ---- ptxas is stricter than the text: the table follows ptxas ----------------------------
    Deviation(
        "sparse-f8-m16n8k32",
        _S | {"types": F8, "kind": {None}, "shape": {"m16n8k32"}},
        isa_text="001 PTX ISA Notes: 'Support for shape .m16n8k32 and .f16 dtype/ctype with "
        ".e4m3/.e5m2 alternate floating point type mma operation introduced in PTX ISA "
        "version 8.7' (001's syntax lines only show m16n8k64)",
        ptxas_evidence="every target, PTX 9.0, with every register count: \"Incorrect "
        "instruction type specified for Sparse mma with shape '.m16n8k32'\"",
        drop=True,
    ),
    Deviation(
        "sparse-f8-f16-accumulator-ordered-only",
        {"sparse": {"sp"}, "types": F8, "kind": {None}, "dtype": {"f16"}},
        isa_text="001: '.spvariant = {.sp, .sp::ordered_metadata}' with the note on .f16 "
        "dtype/ctype for .e4m3/.e5m2",
        ptxas_evidence="sm_120a, PTX 9.0, mma.sp.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3"
        ".f16: \"Illegal modifier '.sp' for instruction 'mma'\" (the "
        "sp::ordered_metadata spelling assembles)",
        drop=True,
    ),
    Deviation(
        "sparse-f8-f16-accumulator-family",
        _S | {"types": F8, "kind": {None}, "dtype": {"f16"}},
        isa_text="001 Target ISA Notes: 'Support for shape .m16n8k32 and .f16 dtype/ctype "
        "with .e4m3/.e5m2 alternate floating point type mma operation requires sm_120'",
        ptxas_evidence="sm_120 and sm_121, PTX 9.0: \"Instruction 'mma with with F16 "
        "accumulator and F8 floating point type' not supported on .target 'sm_120'\"; "
        "sm_120a, sm_120f, sm_121a and sm_121f assemble it",
        gate=arch_or_family(120, "8.7", "8.8"),
    ),
    # ---- ptxas is looser than the text: recorded, not offered -------------------------------
    Deviation(
        "int4-ignores-bitop",
        _D | {"atype": I4, "btype": I4, "bitop": {"xor", "and"}, "satfinite": {False}},
        isa_text="000: '.bitOp = {.xor, .and}' belongs to the single-bit (.b1) syntax only",
        ptxas_evidence="mma.sync.aligned.m8n8k32.row.col.s32.s4.s4.s32.xor.popc assembles "
        "wherever the plain .s4 form does, to a byte-identical cubin: ptxas drops the bit "
        "operation (with .satfinite it reports \"Illegal modifier '.satfinite'\")",
        accepted_like={"bitop": None},
    ),
    Deviation(
        "m8n8k4-bf16-tf32",
        _D | {"types": ("bf16", "tf32"), "shape": {"m8n8k4"}, "dtype": {"f32"},
              "ctype": {"f32"}},
        isa_text="000: m8n8k4 is defined for .f16 (and .f64) only",
        ptxas_evidence="mma.sync.aligned.m8n8k4.{row,col}.{row,col}.f32.bf16.bf16.f32 (a, b: 2 "
        "regs) and ...f32.tf32.tf32.f32 (a, b: 4 regs) assemble on sm_80+ from PTX 7.0, like "
        "m16n8k8 of the same type; other accumulators: \"Unexpected instruction types "
        "specified for 'mma'\"",
        accepted_like={"k": 8, "m": 16, "alayout": "row", "blayout": "col"},
    ),
    *(
        Deviation(
            f"f8-ignores-kind-without-block-scale{suffix}",
            {"sparse": forms, "atype": F8, "btype": F8, "kind": kinds, "block_scale": {False}},
            isa_text="000/001: .kind::f8f6f4 is defined at m16n8k32 (sparse m16n8k64) on "
            "sm_120a/sm_120f+, and the mx kinds only with .block_scale and Table 36's types",
            ptxas_evidence="with .e4m3/.e5m2 inputs and no .block_scale, ptxas ignores "
            ".kind: e.g. mma.sync.aligned.m16n8k16.row.col.kind::mxf4.f32.e4m3.e4m3.f32 and "
            "...m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 assemble on sm_100a; on "
            "sm_120f the sparse mx4 forms give \"Feature '.kind::mxf4 with .sp modifier' not "
            "supported on .target 'sm_120f'\"",
            accepted_like={"kind": None},
            accepted_gate=gate,
        )
        for suffix, forms, kinds, gate in (
            ("", {None}, ALL_KINDS, _AF_100_PLUS),
            ("-sparse", {"sp::ordered_metadata"}, {"f8f6f4", "mxf8f6f4"}, _AF_100_PLUS),
            ("-sparse-mxf4", {"sp::ordered_metadata"}, {"mxf4", "mxf4nvf4"}, _SPARSE_MXF4_F8),
        )
    ),
)

