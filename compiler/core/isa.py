"""Every PTX `mma` variant of the excerpts, built from small declarative tables.

Why a table: instruction selection, the PTX printer, the fragment code and the CLI all have to
agree on which `mma` spellings exist, what each needs (PTX ISA version, SM target) and how many
registers of which type each operand takes. Writing that as if-chains spreads the ISA over the
code base; here it is data, in the style of LLVM's `llvm/test/CodeGen/NVPTX/wmma.py`:

* `_ROWS`: one row per syntax line of the excerpts (000 dense `mma.sync`, 001 `mma.sp` /
  `mma.sp::ordered_metadata`), each expanded with `itertools.product` over its qualifier sets;
  block-scaled rows come from Table 36 (004).
* `_PTX_NOTES` / `_TARGET_NOTES`: one row per sentence of "PTX ISA Notes" / "Target ISA Notes".
  A variant needs the newest PTX version of every note that matches it, and every target rule.
* `EXCEPTIONS`: where ptxas 13.0 and the ISA text disagree. Where ptxas is stricter the table
  follows it (drops a variant or adds a target rule); where ptxas also assembles spellings the
  excerpts never define (it silently ignores some qualifiers) the entry records where, and the
  table still refuses them. Each entry quotes the ISA text and the ptxas evidence;
  `python -m tools.isa_ptxas_check` re-derives all of them on every target.

Register counts are computed, not listed: elements per thread = rows * cols / 32 (A halved for
sparse, x4 for the f16 m8n8k4 quad-pair form), packed into 32-bit registers by the element's
container width (f6/f4 sit in 8-bit containers except under .kind::mxf4*); f64 uses one .f64
register per element. The same formula gives the "nearest family" count for undefined
combinations. ptxas checks every count ("Argument vector size mismatch") and type ("Arguments
mismatch"): .bf16 and .tf32 operands must be .b32 registers (ptxas refuses the excerpt's
`.reg .f16x2` for bf16 and `.f32` for tf32), f16 takes .f16x2 or .b32.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from functools import cached_property

from tilemma.compiler.core.targets import (
    ALL_TARGETS,
    DEFAULT_PTX,
    PtxVersion,
    SmTarget,
    parse_ptx_version,
    parse_sm,
)

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

_BITS = {
    "f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s32": 32,
    "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1,
    "e4m3": 8, "e5m2": 8, "e3m2": 8, "e2m3": 8, "e2m1": 8,
}  # fmt: skip  (f6/f4 in 8-bit containers; e2m1 packed to 4 bits under .kind::mxf4*)
_REG_TYPE = {"f16": ".f16x2", "f32": ".f32", "f64": ".f64", "s32": ".s32"}  # others: .b32

F8 = ("e4m3", "e5m2")
F6F4 = ("e3m2", "e2m3", "e2m1")
F8F6F4 = F8 + F6F4
I8 = ("u8", "s8")
I4 = ("u4", "s4")
MX_KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")
ALL_KINDS = ("f8f6f4",) + MX_KINDS


def _shape_mnk(shape: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
    assert m, shape
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


# --------------------------------------------------------------------------------------------
# The variant record
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Operand:
    """One operand of the instruction as PTX spells it.

    `count` registers of `reg_type`, in braces when `vector`; `immediate` operands (the sparsity
    selector f) are constants, not registers."""

    name: str
    count: int
    reg_type: str | None
    vector: bool = True
    immediate: bool = False


@dataclass(frozen=True)
class MmaVariant:
    """The qualifiers of one `mma` spelling. Any combination can be represented (the ptxas check
    builds illegal ones on purpose); `is_defined` says whether the table has it."""

    m: int
    n: int
    k: int
    dtype: str
    atype: str
    btype: str
    ctype: str
    sparse: str | None = None  # None: mma.sync; "sp"; "sp::ordered_metadata"
    alayout: str = "row"
    blayout: str = "col"
    kind: str | None = None  # f8f6f4, mxf8f6f4, mxf4, mxf4nvf4 (without "kind::")
    block_scale: bool = False
    scale_vec: str | None = None  # "1X" / "2X" / "4X"; None when omitted
    stype: str | None = None  # ue8m0 / ue4m3
    satfinite: bool = False
    bitop: str | None = None  # "xor" / "and"; printed as .xor.popc
    rounding: str | None = None  # f64 only: rn / rz / rm / rp

    # ---- spelling ------------------------------------------------------------------------
    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @cached_property
    def opcode(self) -> str:
        """Full instruction name in the order ptxas and the ISA syntax lines use."""
        parts = ["mma"]
        if self.sparse:
            parts.append(self.sparse)
        parts += ["sync", "aligned", self.shape, self.alayout, self.blayout]
        if self.kind:
            parts.append(f"kind::{self.kind}")
        if self.block_scale:
            parts.append("block_scale")
        if self.scale_vec:
            parts.append(f"scale_vec::{self.scale_vec}")
        if self.satfinite:
            parts.append("satfinite")
        if self.rounding:
            parts.append(self.rounding)
        parts += [self.dtype, self.atype, self.btype, self.ctype]
        if self.stype:
            parts.append(self.stype)
        if self.bitop:
            parts += [self.bitop, "popc"]
        return ".".join(parts)

    def __str__(self) -> str:
        return self.opcode

    @property
    def family(self) -> str:
        """Type family used for ordering and messages: f16, bf16, tf32, f64, i8, i4, b1, f8
        (e4m3/e5m2 without .kind), or the .kind name."""
        if self.kind:
            return self.kind
        for name, types in (("i8", I8), ("i4", I4), ("f8", F8), ("f6f4", F6F4)):
            if self.atype in types:
                return name
        return self.atype

    # ---- registers -----------------------------------------------------------------------
    def _elem_bits(self, t: str) -> int:
        if t == "e2m1" and self.kind in ("mxf4", "mxf4nvf4"):
            return 4
        return _BITS[t]

    def _regs(self, t: str, elems: int) -> int:
        bits = self._elem_bits(t)
        return max(1, elems if bits == 64 else -(-elems * bits // 32))

    @staticmethod
    def _reg_type(t: str) -> str:
        return _REG_TYPE.get(t, ".b32")

    @cached_property
    def operands(self) -> tuple[Operand, ...]:
        """d, a, b, c (+ e, f for sparse; + scale-a-data, {byte-id-a, thread-id-a},
        scale-b-data, {byte-id-b, thread-id-b} for .block_scale), in instruction order."""
        per_warp = 4 if (self.shape == "m8n8k4" and self.atype != "f64") else 1  # quad-pairs
        a_elems = self.m * self.k * per_warp // 32 // (2 if self.sparse else 1)
        b_elems = self.k * self.n * per_warp // 32
        cd_elems = self.m * self.n * per_warp // 32
        ops = [
            Operand("d", self._regs(self.dtype, cd_elems), self._reg_type(self.dtype)),
            Operand("a", self._regs(self.atype, a_elems), self._reg_type(self.atype)),
            Operand("b", self._regs(self.btype, b_elems), self._reg_type(self.btype)),
            Operand("c", self._regs(self.ctype, cd_elems), self._reg_type(self.ctype)),
        ]
        if self.sparse:
            ops.append(Operand("e", 1, ".b32", vector=False))
            ops.append(Operand("f", 1, None, vector=False, immediate=True))
        if self.block_scale:
            ops += [
                Operand("scale_a", 1, ".b32", vector=False),
                Operand("selector_a", 2, ".u16"),
                Operand("scale_b", 1, ".b32", vector=False),
                Operand("selector_b", 2, ".u16"),
            ]
        return tuple(ops)

    def operand(self, name: str) -> Operand:
        for op in self.operands:
            if op.name == name:
                return op
        raise KeyError(f"{self.opcode} has no operand {name!r}")

    # ---- table facts ---------------------------------------------------------------------
    @property
    def is_defined(self) -> bool:
        return self in _TABLE

    def _req(self) -> _Requirements:
        try:
            return _TABLE[self]
        except KeyError:
            raise ValueError(f"{self.opcode}: {explain_undefined(self)}") from None

    @property
    def min_ptx(self) -> PtxVersion:
        """Oldest PTX ISA version that defines this variant (on its most favourable target)."""
        return self._req().min_ptx

    def min_ptx_on(self, target: SmTarget | str) -> PtxVersion:
        """Oldest `.version` that assembles this variant for `target` (includes the version
        the `.target` itself needs and 'from PTX ISA 8.8' family clauses)."""
        t = parse_sm(target)
        return max(self._req().min_ptx, self._path_ptx(t), t.min_ptx)

    def _path_ptx(self, t: SmTarget) -> PtxVersion:
        """PTX needed by the target clauses that admit `t` ('from PTX ISA version 8.8')."""
        need = PtxVersion(0, 0)
        for gate in self._req().gates:
            holding = [r.min_ptx for r in gate.rules if r.holds(t)]
            if holding:
                need = max(need, min(holding))
        return need

    def supported_on(self, target: SmTarget | str) -> bool:
        """Whether some PTX version makes this variant legal on `target`."""
        t = parse_sm(target)
        return self.is_defined and all(g.holds(t) for g in self._req().gates)

    def legal(self, target: SmTarget | str, ptx: PtxVersion | str | None = None) -> list[str]:
        """Reasons the variant cannot be used on (target, ptx); empty when it can."""
        t = parse_sm(target)
        p = parse_ptx_version(ptx) if ptx is not None else DEFAULT_PTX
        reasons = self._reasons(t, p)
        if reasons:
            quirk = ptxas_also_accepts(self, t, p)
            if quirk is not None:
                reasons[-1] += (
                    f" (ptxas 13.0 assembles it anyway, see EXCEPTIONS {quirk.name!r}; the PTX "
                    "ISA does not define it here, so tilemma does not emit it)"
                )
        return reasons

    def _reasons(self, t: SmTarget, p: PtxVersion) -> list[str]:
        if not self.is_defined:
            return [explain_undefined(self)]
        req = self._req()
        if not all(g.holds(t) for g in req.gates):
            return ["needs " + _describe_targets(req.gates)]
        reasons: list[str] = []
        if p < req.min_ptx:
            reasons.append(f"needs PTX ISA {req.min_ptx} or newer")
        path = self._path_ptx(t)
        if p < path and path > req.min_ptx and path > t.min_ptx:
            reasons.append(f"needs PTX ISA {path} or newer on {t.name}")
        if p < t.min_ptx:
            reasons.append(f".target {t.name} needs PTX ISA {t.min_ptx} or newer")
        return reasons

    @property
    def notes(self) -> tuple[str, ...]:
        """The ISA sentences (and exceptions) that set this variant's requirements."""
        return self._req().notes


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


def _describe_targets(gates: tuple[Gate, ...]) -> str:
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
class _Row:
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

    def expand(self):
        for form, shape, at, bt, (dt, ct), (al, bl), kind, (bs, sv, st), sat, bop, rnd in (
            itertools.product(
                self.forms, self.shapes, self.atypes, self.btypes, self.cd, self.layouts,
                self.kinds, self.scales, self.satfinite, self.bitops, self.roundings,
            )
        ):  # fmt: skip
            m, n, k = _shape_mnk(shape)
            yield MmaVariant(
                m, n, k, dt, at, bt, ct, sparse=form, alayout=al, blayout=bl, kind=kind,
                block_scale=bs, scale_vec=sv, stype=st, satfinite=sat, bitop=bop, rounding=rnd,
            )  # fmt: skip


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


def _block_scaled_rows(forms, sparse: bool) -> list[_Row]:
    return [
        _Row(
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


_ROWS: tuple[_Row, ...] = (
    # ---- 000: dense mma.sync ------------------------------------------------------------
    _Row(DENSE, ("m8n8k4",), ("f16",), ("f16",),
         cd=(("f16", "f16"), ("f32", "f16"), ("f32", "f32")),  # ctype .f32 -> dtype .f32
         layouts=tuple(itertools.product(LAYOUTS, LAYOUTS)), source="000 f16 m8n8k4"),
    _Row(DENSE, ("m16n8k8", "m16n8k16"), ("f16",), ("f16",), SAME_F, source="000 f16"),
    _Row(DENSE, ("m16n8k4", "m16n8k8"), ("tf32",), ("tf32",), F32, source="000 tf32"),
    _Row(DENSE, ("m16n8k8", "m16n8k16"), ("bf16",), ("bf16",), F32, source="000 bf16"),
    _Row(DENSE, ("m16n8k16", "m16n8k32"), F8, F8, SAME_F, source="000 f8type"),
    _Row(DENSE, ("m16n8k32",), F8F6F4, F8F6F4, SAME_F, kinds=("f8f6f4",),
         source="000 kind::f8f6f4"),
    *_block_scaled_rows(DENSE, sparse=False),
    _Row(DENSE, ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"), ("f64",), ("f64",), F64,
         roundings=ROUNDINGS, source="000 f64 (rounding modifiers: Precision and rounding)"),
    _Row(DENSE, ("m8n8k16", "m16n8k16", "m16n8k32"), I8, I8, S32, satfinite=(False, True),
         source="000 u8/s8"),
    _Row(DENSE, ("m8n8k32", "m16n8k32", "m16n8k64"), I4, I4, S32, satfinite=(False, True),
         source="000 u4/s4"),
    _Row(DENSE, ("m8n8k128", "m16n8k128", "m16n8k256"), ("b1",), ("b1",), S32,
         bitops=("xor", "and"), source="000 b1"),
    # ---- 001: sparse mma.sp / mma.sp::ordered_metadata ----------------------------------
    _Row(SPARSE, ("m16n8k16", "m16n8k32"), ("f16",), ("f16",), SAME_F, source="001 f16"),
    _Row(SPARSE, ("m16n8k16", "m16n8k32"), ("bf16",), ("bf16",), F32, source="001 bf16"),
    _Row(SPARSE, ("m16n8k8", "m16n8k16"), ("tf32",), ("tf32",), F32, source="001 tf32"),
    _Row(SPARSE, ("m16n8k64",), F8, F8, F32, source="001 f8type"),
    # Not in 001's syntax lines, only in its notes: "Support for shape .m16n8k32 and .f16
    # dtype/ctype with .e4m3/.e5m2 ... introduced in PTX ISA version 8.7 ... requires sm_120".
    _Row(SPARSE, ("m16n8k32", "m16n8k64"), F8, F8, SAME_F, source="001 notes: f8 k32 / f16"),
    _Row(ORDERED, ("m16n8k64",), F8F6F4, F8F6F4, SAME_F, kinds=("f8f6f4",),
         source="001 kind::f8f6f4"),
    *_block_scaled_rows(ORDERED, sparse=True),
    _Row(SPARSE, ("m16n8k32", "m16n8k64"), I8, I8, S32, satfinite=(False, True),
         source="001 u8/s8"),
    _Row(SPARSE, ("m16n8k64", "m16n8k128"), I4, I4, S32, satfinite=(False, True),
         source="001 u4/s4"),
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Notes: one row per sentence of "PTX ISA Notes" and "Target ISA Notes"
# --------------------------------------------------------------------------------------------
def _matches(v: MmaVariant, match: dict) -> bool:
    """`match` maps a field to its allowed values; 'types' means atype or btype; 'sparse'
    None/True picks dense/any-sparse."""
    for key, allowed in match.items():
        if key == "types":
            if v.atype not in allowed and v.btype not in allowed:
                return False
        elif key == "shape":
            if v.shape not in allowed:
                return False
        elif key == "dense":
            if (v.sparse is None) != allowed:
                return False
        elif getattr(v, key) not in allowed:
            return False
    return True


_D = {"dense": True}
_S = {"dense": False}

# (match, PTX version, sentence)
_PTX_NOTES: tuple[tuple[dict, str, str], ...] = (
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
_TARGET_NOTES: tuple[tuple[dict, Gate, str], ...] = (
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


# --------------------------------------------------------------------------------------------
# Building the table
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Requirements:
    min_ptx: PtxVersion
    gates: tuple[Gate, ...]
    notes: tuple[str, ...]


def _build(deviations: tuple[Deviation, ...]) -> dict[MmaVariant, _Requirements]:
    table: dict[MmaVariant, _Requirements] = {}
    for row in _ROWS:
        for v in row.expand():
            if v in table:
                continue
            applied = [d for d in deviations if _matches(v, d.match)]
            if any(d.drop for d in applied):
                continue
            ptx = [(parse_ptx_version(p), text) for m, p, text in _PTX_NOTES if _matches(v, m)]
            gates = [(g, text) for m, g, text in _TARGET_NOTES if _matches(v, m)]
            gates += [(d.gate, f"EXCEPTION {d.name}") for d in applied if d.gate]
            table[v] = _Requirements(
                min_ptx=max(p for p, _ in ptx),
                gates=tuple(g for g, _ in gates),
                notes=tuple(t for _, t in ptx) + tuple(t for _, t in gates),
            )
    return table


_TABLE: dict[MmaVariant, _Requirements] = _build(EXCEPTIONS)
# The ISA text alone, before EXCEPTIONS: the ptxas check uses it to show what each exception
# changes and to notice an exception that ptxas no longer needs.
_ISA_TEXT_TABLE: dict[MmaVariant, _Requirements] = _build(())


def isa_text_defines(v: MmaVariant) -> bool:
    """Whether the excerpts' text alone (no EXCEPTIONS) defines `v`."""
    return v in _ISA_TEXT_TABLE


def isa_text_allows(v: MmaVariant, target: SmTarget | str, ptx: PtxVersion | str) -> bool:
    """Whether the excerpts' text alone (no EXCEPTIONS) allows `v` on (target, ptx)."""
    req = _ISA_TEXT_TABLE.get(v)
    if req is None:
        return False
    t, p = parse_sm(target), parse_ptx_version(ptx)
    if not all(g.holds(t) for g in req.gates) or p < max(req.min_ptx, t.min_ptx):
        return False
    return all(
        p >= min(r.min_ptx for r in g.rules if r.holds(t)) for g in req.gates
    )


def ptxas_also_accepts(
    v: MmaVariant, target: SmTarget | str, ptx: PtxVersion | str | None = None
) -> Deviation | None:
    """The `accepted_like` exception under which ptxas assembles `v` on (target, ptx) although
    the table refuses it there, if any."""
    t = parse_sm(target)
    p = parse_ptx_version(ptx) if ptx is not None else DEFAULT_PTX
    if not v._reasons(t, p):
        return None
    for d in EXCEPTIONS:
        if d.accepted_like and _matches(v, d.match):
            if d.accepted_gate and not any(
                r.holds(t) and p >= r.min_ptx for r in d.accepted_gate.rules
            ):
                continue
            like = replace(v, **d.accepted_like)
            if not like._reasons(t, p):
                return d
    return None


def exceptions_matching(v: MmaVariant) -> list[Deviation]:
    """The EXCEPTIONS entries whose match covers `v`."""
    return [d for d in EXCEPTIONS if _matches(v, d.match)]


_FORM_RANK = {f: i for i, f in enumerate(SPARSE_FORMS)}
_FAMILY_ORDER = ("f16", "bf16", "tf32", "f64", "i8", "i4", "b1", "f8", "f8f6f4", *MX_KINDS)


def _sort_key(v: MmaVariant):
    return (
        _FORM_RANK[v.sparse],
        _FAMILY_ORDER.index(v.family) if v.family in _FAMILY_ORDER else 99,
        v.m, v.n, v.k, v.opcode,
    )  # fmt: skip


_ALL: tuple[MmaVariant, ...] = tuple(sorted(_TABLE, key=_sort_key))


def all_variants() -> tuple[MmaVariant, ...]:
    """Every variant some (target, PTX version) accepts, in a stable order."""
    return _ALL


def legal_variants(
    target: SmTarget | str, ptx: PtxVersion | str | None = None
) -> list[MmaVariant]:
    """Variants usable on `target` with `.version ptx` (default: the newest ptxas accepts)."""
    t = parse_sm(target)
    return [v for v in _ALL if not v.legal(t, ptx)]


def check(
    opcode: str | MmaVariant, target: SmTarget | str, ptx: PtxVersion | str | None = None
) -> list[str]:
    """Reasons `opcode` cannot be used on (target, ptx); [] when it can. Raises ValueError for
    text that is not an mma spelling at all (unknown or misplaced qualifier)."""
    v = opcode if isinstance(opcode, MmaVariant) else parse_qualifiers(opcode)
    return v.legal(target, ptx)


# --------------------------------------------------------------------------------------------
# Explaining undefined combinations
# --------------------------------------------------------------------------------------------
# Fields in the order a reader narrows a spelling down: types first, then the form, kind, shape.
_EXPLAIN_ORDER = (
    "atype", "btype", "sparse", "kind", "shape", "dtype", "ctype", "alayout", "blayout",
    "block_scale", "scale_vec", "stype", "satfinite", "bitop", "rounding",
)  # fmt: skip


def _value(v: MmaVariant, f: str):
    return v.shape if f == "shape" else getattr(v, f)


def _label(f: str, value) -> str:
    if f == "shape":
        return f"shape {value}"
    if f == "sparse":
        return {None: "mma.sync", "sp": "mma.sp"}.get(value, f"mma.{value}")
    if f in ("atype", "btype", "dtype", "ctype", "alayout", "blayout", "stype"):
        return f"{f} .{value}" if value else f"omitting {f}"
    if f == "kind":
        return f".kind::{value}" if value else "omitting .kind"
    if f == "scale_vec":
        return f".scale_vec::{value}" if value else "omitting .scale_vec_size"
    if f == "bitop":
        return f".{value}.popc" if value else "omitting the bit operation (.xor/.and .popc)"
    if f in ("block_scale", "satfinite"):
        return f".{f}" if value else f"omitting .{f}"
    return f".{value}" if value else f"omitting .{f}"


def _alt_key(value):
    """Order alternatives for messages: shapes by (m, n, k), None last."""
    if isinstance(value, str) and re.fullmatch(r"m\d+n\d+k\d+", value):
        return (0, _shape_mnk(value), "")
    return (1 if value is not None else 2, (0, 0, 0), str(value))


def _alt(f: str, value) -> str:
    if f == "shape":
        return value
    if f == "sparse":
        return _label(f, value)
    if value is None or value is False:
        return "none"
    if value is True:
        return f".{f}"
    if f == "kind":
        return f".kind::{value}"
    if f == "scale_vec":
        return f".scale_vec::{value}"
    if f == "bitop":
        return f".{value}.popc"
    return f".{value}"


def explain_undefined(v: MmaVariant) -> str:
    """Why no table entry has these qualifiers: the first field (in `_EXPLAIN_ORDER`) that
    rules every entry out, with what would be allowed there."""
    pool = list(_TABLE)
    context: dict[str, str] = {}
    for f in _EXPLAIN_ORDER:
        value = _value(v, f)
        narrowed = [w for w in pool if _value(w, f) == value]
        if not narrowed:
            if f == "atype":
                return f"{_label(f, value)} is not an mma input type"
            allowed = sorted({_value(w, f) for w in pool}, key=_alt_key)
            parts = [context[c] for c in ("types", "sparse", "kind", "shape") if c in context]
            if f == "ctype" and "dtype" in context:
                parts.append(context["dtype"])
            where = f" for {' '.join(parts)}" if parts else ""
            alts = ", ".join(_alt(f, a) for a in allowed)
            return f"{_label(f, value)} is not defined{where} (allowed: {alts})"
        pool = narrowed
        if f == "atype":
            context["types"] = value
        elif f == "btype" and value != v.atype:
            context["types"] = f"{v.atype} x {value}"
        elif f == "sparse" and value:
            context["sparse"] = f"with mma.{value}"
        elif f == "kind" and value:
            context["kind"] = f"with .kind::{value}"
        elif f == "shape":
            context["shape"] = f"at {value}"
        elif f == "dtype":
            context["dtype"] = f"with dtype .{value}"
    return "not defined"  # pragma: no cover - every field matched means it is defined


# --------------------------------------------------------------------------------------------
# Parsing opcode text
# --------------------------------------------------------------------------------------------
_TYPE_TOKENS = set(INPUT_TYPES) | set(ACC_TYPES)


def parse_qualifiers(text: str) -> MmaVariant:
    """Read an mma spelling into its qualifiers without asking whether the table defines it.

    Raises ValueError naming the first token that is unknown or out of place."""
    s = text.strip()
    s = s.removeprefix(".")
    tokens = s.split(".")
    if not tokens or tokens[0] != "mma":
        raise ValueError(f"not an mma opcode: {text!r} (expected it to start with 'mma.')")
    pos = 1
    out: dict = {}

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def fail(what: str) -> ValueError:
        tok = peek()
        if tok is None:
            return ValueError(f"{text!r} ends early: expected {what}")
        if tok == "":
            return ValueError(f"empty qualifier ('..') in {text!r}: expected {what}")
        return ValueError(f"unexpected qualifier '.{tok}' in {text!r}: expected {what}")

    if peek() in ("sp", "sp::ordered_metadata"):
        out["sparse"] = tokens[pos]
        pos += 1
    for word in ("sync", "aligned"):
        if peek() != word:
            raise fail(f"'.{word}'")
        pos += 1
    tok = peek()
    if tok is None or not re.fullmatch(r"m\d+n\d+k\d+", tok):
        raise fail(f"a shape ({', '.join(SHAPES)})")
    if tok not in SHAPES:
        raise ValueError(f"unknown shape '.{tok}' in {text!r} (known: {', '.join(SHAPES)})")
    out["m"], out["n"], out["k"] = _shape_mnk(tok)
    pos += 1
    for lay in ("alayout", "blayout"):
        if peek() not in LAYOUTS:
            raise fail(f"{lay} (.row or .col)")
        out[lay] = tokens[pos]
        pos += 1
    # optional modifiers, in the canonical order
    if (tok := peek()) and tok.startswith("kind::"):
        if tok[6:] not in ALL_KINDS:
            raise ValueError(
                f"unknown qualifier '.{tok}' in {text!r} "
                f"(known kinds: {', '.join('.kind::' + k for k in ALL_KINDS)})"
            )
        out["kind"] = tok[6:]
        pos += 1
    if peek() == "block_scale":
        out["block_scale"] = True
        pos += 1
    if (tok := peek()) and tok.startswith("scale_vec::"):
        if tok[11:] not in ("1X", "2X", "4X"):
            raise ValueError(
                f"unknown qualifier '.{tok}' in {text!r} (known: .scale_vec::1X, 2X, 4X)"
            )
        out["scale_vec"] = tok[11:]
        pos += 1
    if peek() == "satfinite":
        out["satfinite"] = True
        pos += 1
    if peek() in ROUNDINGS[1:]:
        out["rounding"] = tokens[pos]
        pos += 1
    for name in ("dtype", "atype", "btype", "ctype"):
        tok = peek()
        if tok not in _TYPE_TOKENS:
            if tok and not any(tok in voc for voc in _VOCABULARY):
                raise ValueError(f"unknown qualifier '.{tok}' in {text!r}: expected {name}")
            raise fail(f"{name} ({', '.join('.' + t for t in sorted(_TYPE_TOKENS))})")
        out[name] = tok
        pos += 1
    if peek() in STYPES[1:]:
        out["stype"] = tokens[pos]
        pos += 1
    if peek() in BITOPS[1:]:
        out["bitop"] = tokens[pos]
        pos += 1
        if peek() != "popc":
            raise fail("'.popc' after the bit operation")
        pos += 1
    if peek() is not None:
        tok = peek()
        if tok and not any(tok in voc for voc in _VOCABULARY):
            raise ValueError(f"unknown qualifier '.{tok}' in {text!r}")
        raise ValueError(f"qualifier '.{tok}' out of place in {text!r}")
    return MmaVariant(**out)


_VOCABULARY = (
    {"sp", "sp::ordered_metadata", "sync", "aligned", "row", "col", "block_scale",
     "satfinite", "popc"},
    set(SHAPES), _TYPE_TOKENS, {"kind::" + k for k in ALL_KINDS},
    {"scale_vec::" + s for s in ("1X", "2X", "4X")}, {"ue8m0", "ue4m3"}, {"xor", "and"},
    {"rn", "rz", "rm", "rp"},
)  # fmt: skip


def parse_opcode(text: str) -> MmaVariant:
    """Parse an mma spelling that the table defines; ValueError names the first unknown
    qualifier or, for a known but undefined combination, the qualifier that rules it out."""
    v = parse_qualifiers(text)
    if not v.is_defined:
        raise ValueError(f"{text.strip()!r}: {explain_undefined(v)}")
    return v


__all__ = [
    "EXCEPTIONS",
    "Deviation",
    "Gate",
    "MmaVariant",
    "Operand",
    "TargetRule",
    "all_variants",
    "check",
    "exceptions_matching",
    "explain_undefined",
    "isa_text_allows",
    "isa_text_defines",
    "legal_variants",
    "parse_opcode",
    "parse_qualifiers",
    "ptxas_also_accepts",
]
