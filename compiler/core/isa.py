"""Every PTX `mma` variant of the excerpts, built from small declarative tables.

Why a table: instruction selection, the PTX printer, the fragment code and the CLI all have to
agree on which `mma` spellings exist, what each needs (PTX ISA version, SM target) and how many
registers of which type each operand takes. Writing that as if-chains spreads the ISA over the
code base; here it is data, in the style of LLVM's `llvm/test/CodeGen/NVPTX/wmma.py`:

* `ROWS`: one row per syntax line of the excerpts (000 dense `mma.sync`, 001 `mma.sp` /
  `mma.sp::ordered_metadata`), each expanded with `itertools.product` over its qualifier sets;
  block-scaled rows come from Table 36 (004).
* `PTX_NOTES` / `TARGET_NOTES`: one row per sentence of "PTX ISA Notes" / "Target ISA Notes".
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

The tables live beside this module: the vocabularies, syntax rows and Table 36 in `isa_rows`,
the target gates, the notes and `EXCEPTIONS` in `isa_notes`. This module holds the variant
record (`MmaVariant`: spelling, registers, what the table says of it), builds the table from
the rows, answers queries on it, explains undefined combinations and parses opcode text.
"""

from __future__ import annotations

import itertools
import operator
import re
from dataclasses import dataclass, fields, replace
from functools import cache

from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.core.isa_notes import (
    EXCEPTIONS,
    PTX_NOTES,
    TARGET_NOTES,
    Deviation,
    Gate,
    describe_targets,
)
from tilemma.compiler.core.isa_rows import (
    ACC_TYPES,
    ALL_KINDS,
    BITOPS,
    F6F4,
    F8,
    I4,
    I8,
    INPUT_TYPES,
    LAYOUTS,
    MX_KINDS,
    ROUNDINGS,
    ROWS,
    SHAPES,
    SPARSE_FORMS,
    STYPES,
    shape_mnk,
)
from tilemma.compiler.core.targets import (
    DEFAULT_PTX,
    PtxVersion,
    SmTarget,
    parse_ptx_version,
    parse_sm,
)

# Defined with the rows and the notes, read by callers as isa.X too.
from tilemma.compiler.core.isa_notes import TargetRule  # noqa: F401
from tilemma.compiler.core.isa_rows import F8F6F4, KINDS, SCALE_VECS, TABLE_36  # noqa: F401

_REG_TYPE = {"f16": ".f16x2", "f32": ".f32", "f64": ".f64", "s32": ".s32"}  # others: .b32


class _once:
    """`functools.cached_property` without its lock: before Python 3.12 every first read takes
    an RLock, and the ptxas audit makes ~500k first reads (~6 s). The value goes into the
    instance's `__dict__`, where later reads find it before this (non-data) descriptor."""

    def __init__(self, func):
        self.func = func
        self.__doc__ = func.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)
        return value


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

    # ---- hashing -------------------------------------------------------------------------
    # Variants key every table, and the ptxas audit hashes millions: the dataclass hash would
    # rebuild a 17-field tuple each time, so it is computed once per object. str hashes differ
    # between processes, so the cached value never goes into a pickle (`__getstate__`).
    @_once
    def _hash(self) -> int:
        return hash(_field_values(self))

    def __hash__(self) -> int:
        return self._hash

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    # ---- spelling ------------------------------------------------------------------------
    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @_once
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
    @_once
    def operands(self) -> tuple[Operand, ...]:
        """d, a, b, c (+ e, f for sparse; + scale-a-data, {byte-id-a, thread-id-a},
        scale-b-data, {byte-id-b, thread-id-b} for .block_scale), in instruction order."""
        return _operands(
            self.m, self.n, self.k, self.dtype, self.atype, self.btype, self.ctype,
            bool(self.sparse), self.kind in ("mxf4", "mxf4nvf4"), bool(self.block_scale),
        )  # fmt: skip

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
        return self.is_defined and self._req().holds_on(t)

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

    def legal_on(self, target: SmTarget | str, ptx: PtxVersion | str | None = None) -> bool:
        """`not self.legal(target, ptx)` without wording any reason (explaining an undefined
        variant searches the whole table, naming targets walks them all; the ptxas audit asks
        this of every candidate on every target); `_reasons` decides by the same two tests."""
        req = _TABLE.get(self)
        if req is None:
            return False
        t = parse_sm(target)
        p = parse_ptx_version(ptx) if ptx is not None else DEFAULT_PTX
        return req.holds_on(t) and p >= self._needed_ptx(req, t)

    def _needed_ptx(self, req: _Requirements, t: SmTarget) -> PtxVersion:
        """The PTX version the variant needs on `t` (its gates holding): the table's, its path's
        and the target's."""
        return max(req.min_ptx, self._path_ptx(t), t.min_ptx)

    def _reasons(self, t: SmTarget, p: PtxVersion) -> list[str]:
        if not self.is_defined:
            return [explain_undefined(self)]
        req = self._req()
        if not req.holds_on(t):
            return ["needs " + describe_targets(req.gates)]
        if p >= self._needed_ptx(req, t):
            return []
        reasons: list[str] = []  # at least one of these holds: p is below the needed version
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


@cache
def _operands(
    m: int, n: int, k: int, dtype: str, atype: str, btype: str, ctype: str,
    sparse: bool, packed_e2m1: bool, block_scale: bool,
) -> tuple[Operand, ...]:  # fmt: skip
    """`MmaVariant.operands` from the qualifiers that size registers (layouts, rounding,
    .satfinite, ... do not): cached, since the ptxas audit sizes ~170k candidate variants that
    have ~21k distinct operand lists."""

    def regs(t: str, elems: int) -> int:
        # e2m1 is packed under .kind::mxf4*, else f6/f4 sit in 8-bit containers
        bits = 4 if t == "e2m1" and packed_e2m1 else BY_PTX[t].register_bits
        return max(1, elems if bits == 64 else -(-elems * bits // 32))

    def reg_type(t: str) -> str:
        return _REG_TYPE.get(t, ".b32")

    per_warp = 4 if ((m, n, k) == (8, 8, 4) and atype != "f64") else 1  # quad-pairs
    a_elems = m * k * per_warp // 32 // (2 if sparse else 1)
    b_elems = k * n * per_warp // 32
    cd_elems = m * n * per_warp // 32
    ops = [
        Operand("d", regs(dtype, cd_elems), reg_type(dtype)),
        Operand("a", regs(atype, a_elems), reg_type(atype)),
        Operand("b", regs(btype, b_elems), reg_type(btype)),
        Operand("c", regs(ctype, cd_elems), reg_type(ctype)),
    ]
    if sparse:
        ops.append(Operand("e", 1, ".b32", vector=False))
        ops.append(Operand("f", 1, None, vector=False, immediate=True))
    if block_scale:
        ops += [
            Operand("scale_a", 1, ".b32", vector=False),
            Operand("selector_a", 2, ".u16"),
            Operand("scale_b", 1, ".b32", vector=False),
            Operand("selector_b", 2, ".u16"),
        ]
    return tuple(ops)


# The fields `__eq__` compares, as one tuple (what `MmaVariant._hash` hashes).
FIELD_NAMES = tuple(f.name for f in fields(MmaVariant))
_field_values = operator.attrgetter(*FIELD_NAMES)


def variant_from_fields(values: tuple) -> MmaVariant:
    """`MmaVariant(*values)` (every field, in `FIELD_NAMES` order) with its hash set from the
    tuple: the ptxas audit builds ~170k candidates, and the frozen dataclass' `__init__` (one
    `object.__setattr__` a field) plus the first hash cost several seconds."""
    v = object.__new__(MmaVariant)
    d = v.__dict__
    d.update(zip(FIELD_NAMES, values))
    d["_hash"] = hash(values)
    return v


# --------------------------------------------------------------------------------------------
# Which notes and exceptions a variant falls under
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


# --------------------------------------------------------------------------------------------
# Building the table
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Requirements:
    min_ptx: PtxVersion
    gates: tuple[Gate, ...]
    notes: tuple[str, ...]

    def holds_on(self, t: SmTarget) -> bool:
        """Whether every gate holds on `t` (some PTX version makes the variant legal there)."""
        return all(g.holds(t) for g in self.gates)


def _variants(row):
    """The variants of one syntax line (an `isa_rows.Row`): the product of its qualifier sets."""
    for form, shape, at, bt, (dt, ct), (al, bl), kind, (bs, sv, st), sat, bop, rnd in (
        itertools.product(
            row.forms, row.shapes, row.atypes, row.btypes, row.cd, row.layouts,
            row.kinds, row.scales, row.satfinite, row.bitops, row.roundings,
        )
    ):  # fmt: skip
        m, n, k = shape_mnk(shape)
        yield MmaVariant(
            m, n, k, dt, at, bt, ct, sparse=form, alayout=al, blayout=bl, kind=kind,
            block_scale=bs, scale_vec=sv, stype=st, satfinite=sat, bitop=bop, rounding=rnd,
        )  # fmt: skip


def _build(deviations: tuple[Deviation, ...]) -> dict[MmaVariant, _Requirements]:
    table: dict[MmaVariant, _Requirements] = {}
    for row in ROWS:
        for v in _variants(row):
            if v in table:
                continue
            applied = [d for d in deviations if _matches(v, d.match)]
            if any(d.drop for d in applied):
                continue
            ptx = [(parse_ptx_version(p), text) for m, p, text in PTX_NOTES if _matches(v, m)]
            gates = [(g, text) for m, g, text in TARGET_NOTES if _matches(v, m)]
            gates += [(d.gate, f"EXCEPTION {d.name}") for d in applied if d.gate]
            table[v] = _Requirements(
                min_ptx=max(p for p, _ in ptx),
                gates=tuple(g for g, _ in gates),
                notes=tuple(t for _, t in ptx) + tuple(t for _, t in gates),
            )
    return table


_TABLE: dict[MmaVariant, _Requirements] = _build(EXCEPTIONS)


@cache
def _isa_text_table() -> dict[MmaVariant, _Requirements]:
    """The ISA text alone, before EXCEPTIONS: the ptxas check uses it to show what each exception
    changes and to notice an exception that ptxas no longer needs (built on first use: a
    compile never asks)."""
    return _build(())


def isa_text_defines(v: MmaVariant) -> bool:
    """Whether the excerpts' text alone (no EXCEPTIONS) defines `v`."""
    return v in _isa_text_table()


def isa_text_allows(v: MmaVariant, target: SmTarget | str, ptx: PtxVersion | str) -> bool:
    """Whether the excerpts' text alone (no EXCEPTIONS) allows `v` on (target, ptx)."""
    req = _isa_text_table().get(v)
    if req is None:
        return False
    t, p = parse_sm(target), parse_ptx_version(ptx)
    if not req.holds_on(t) or p < max(req.min_ptx, t.min_ptx):
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
    if v.legal_on(t, p):
        return None
    for d, like in _accepted_like(v):
        if d.accepted_gate and not any(
            r.holds(t) and p >= r.min_ptx for r in d.accepted_gate.rules
        ):
            continue
        if like.legal_on(t, p):
            return d
    return None


@cache
def _accepted_like(v: MmaVariant) -> tuple[tuple[Deviation, MmaVariant], ...]:
    """The `accepted_like` exceptions matching `v`, each with the variant it is accepted as.
    Target-independent, and the ptxas audit asks `ptxas_also_accepts` on every target."""
    return tuple((d, replace(v, **d.accepted_like)) for d in _accepted_like_matching(v))


# What a `match` key reads of a variant (`_matches`).
_MATCH_FIELDS = {"types": ("atype", "btype"), "shape": ("m", "n", "k"), "dense": ("sparse",)}
# Each accepted_like exception with a getter of the fields its match reads and its verdicts by
# their values.
_ACCEPTED_LIKE = tuple(
    (d, operator.attrgetter(*sorted({f for key in d.match for f in _MATCH_FIELDS.get(key, (key,))})), {})
    for d in EXCEPTIONS
    if d.accepted_like
)  # fmt: skip


def _accepted_like_matching(v: MmaVariant) -> list[Deviation]:
    """The `accepted_like` exceptions whose match covers `v`, each decided once per value of
    the fields its match reads: the ptxas audit asks for ~170k candidates (~900k `_matches`
    calls, ~2 s) that share a few thousand such values."""
    out = []
    for d, get, seen in _ACCEPTED_LIKE:
        key = get(v)
        hit = seen.get(key)
        if hit is None:
            hit = seen[key] = _matches(v, d.match)
        if hit:
            out.append(d)
    return out


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
    p = parse_ptx_version(ptx) if ptx is not None else DEFAULT_PTX
    return list(_legal_variants(parse_sm(target), p))


@cache
def _legal_variants(t: SmTarget, p: PtxVersion) -> tuple[MmaVariant, ...]:
    """`legal_variants`, by `legal_on`: wording every refused variant's reasons (as `legal`
    does) cost ~0.1 s a call, and selection's error path and the tests ask per kernel."""
    return tuple(v for v in _ALL if v.legal_on(t, p))


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
        return (0, shape_mnk(value), "")
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
    out["m"], out["n"], out["k"] = shape_mnk(tok)
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
