"""`tile-select-mma`: picks the `mma.sync` variant that implements each tile.matmul / tile.mma.

Choices come from the ISA table (`tilemma.compiler.core.isa`) filtered by what the target and PTX
version accept, then by what is fast there (`SLOW_PATHS`, from the target's record), and among
exact choices the largest instruction wins (fewest instructions per tile). Anything that changes numerics is only
done when asked: f32 operands go to tf32 units only with `f32-precision=tf32`, f16 accumulation
only when the IR's accumulator is f16. `tile.matmul` becomes `tile.mma` with a zero accumulator.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.core import isa, targets
from tilemma.compiler.layouts import sparse_fragments
from tilemma.dialects import tile
from tilemma.dialects.warp import TargetAttr, VariantAttr
from tilemma.passes.errors import LoweringError, replaced


@dataclass(frozen=True)
class SlowPath:
    """An instruction family that is legal on some targets but emulated there (the target
    record's `feature` is `targets.EMULATED`), and the exact detour."""

    feature: str  # the `targets.Limits` field that says native or emulated
    types: tuple[str, ...]  # operand element types (MLIR names) it concerns
    widen_to: dict[str, str]  # exact widening that reaches a fast family
    why: str

    def applies(self, target: targets.SmTarget) -> bool:
        return getattr(target.limits, self.feature) == targets.EMULATED


SLOW_PATHS = (
    SlowPath(
        feature="int4_mma",
        types=tuple(tile.INT4_WIDENED),
        widen_to=tile.INT4_WIDENED,
        why="int4 mma is emulated from sm_90 on (measured on sm_90: 28x slower than int8 mma)",
    ),
)

F32_PRECISIONS = ("exact", "tf32", "3xtf32")
# .kind qualifiers in order of preference: plain mma first; .kind::f8f6f4 reaches fp6/fp4.
UNSCALED_KINDS = (None, "f8f6f4")
BLOCK_SCALED_KINDS = ("mxf4", "mxf8f6f4", "mxf4nvf4")
_DEFAULT_SCALE_VEC = {"mxf4": "2X", "mxf8f6f4": "1X"}


def scale_count(v) -> int:
    """Scale factors per row of A in one instruction (.scale_vec::NX; N defaults by .kind)."""
    return int((v.scale_vec or _DEFAULT_SCALE_VEC[v.kind])[0])


# Sparse forms in order of preference (the ISA advises ordered metadata for speed).
SPARSE_FORM_OPTIONS = {"ordered": ("sp::ordered_metadata", "sp"), "sp": ("sp",)}


def _cast(rewriter_anchor: Operation, value: SSAValue, element: str, rounding: str | None) -> SSAValue:
    vt = value.type
    assert isinstance(vt, tile.TileType)
    cast = tile.CastOp(value, tile.TileType(vt.get_shape(), tile.element_type(element)), rounding)
    Rewriter.insert_op(cast, _before(rewriter_anchor))
    return cast.result


def _before(op: Operation):
    from xdsl.rewriter import InsertPoint

    return InsertPoint.before(op)


#: SM numbers whose tensor cores are fed by tcgen05.mma (datacenter Blackwell: sm_100, sm_103,
#: sm_110), where mma.sync runs but is not the fast path: compiling for them says so.
TCGEN05_TARGETS = (100, 103, 110)


@dataclass(frozen=True)
class SelectMma(ModulePass):
    """Options: `sm` (e.g. 90, sm_90a, 120a), `ptx` (default: newest ptxas accepts),
    `f32-precision` (exact: refuse f32 operands; tf32: round them to tf32, rna; 3xtf32: split
    each into tf32 hi + lo parts and run three tf32 mmas, close to f32 accuracy),
    `allow-slow` (keep families the target runs slowly instead of widening them),
    `sparse-form` (ordered: mma.sp::ordered_metadata where legal, as the ISA advises, else
    mma.sp; sp: plain mma.sp only)."""

    name = "tile-select-mma"

    sm: str | int = "90"
    ptx: str | float = ""
    f32_precision: str = "exact"
    allow_slow: bool = False
    sparse_form: str = "ordered"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = targets.parse_sm(str(self.sm))
        version = targets.released_ptx_version(str(self.ptx)) if self.ptx else max(
            targets.DEFAULT_PTX, target.min_ptx
        )
        if self.sparse_form not in SPARSE_FORM_OPTIONS:
            raise ValueError(
                f"tile-select-mma: sparse-form must be one of {', '.join(SPARSE_FORM_OPTIONS)}, "
                f"got {self.sparse_form!r}"
            )
        if self.f32_precision not in F32_PRECISIONS:
            raise ValueError(
                f"tile-select-mma: f32-precision must be one of {', '.join(F32_PRECISIONS)}, "
                f"got {self.f32_precision!r}"
            )
        selected = False
        for kernel in op.walk():
            if not isinstance(kernel, func.FuncOp):
                continue
            for mm in [o for o in kernel.walk() if isinstance(o, (tile.MatmulOp, *tile.MMA_OPS))]:
                mma = self._as_mma(mm)
                self._select(mma, target, version)
                selected = True
            for cast in [o for o in kernel.walk() if isinstance(o, tile.CastOp)]:
                _check_cast_target(cast, target)
            kernel.attributes["warp.target"] = TargetAttr(target.name, str(version))
        if selected and target.number in TCGEN05_TARGETS:
            print(f"tilemma: note: {target.name} runs the warp-level mma.sync tilemma emits, but not at "
                  "Blackwell's full rate: its fast path is tcgen05.mma, which tilemma does not emit", file=sys.stderr)

    @staticmethod
    def _as_mma(op):
        if isinstance(op, tile.MMA_OPS):
            return op
        result = op.result.type
        assert isinstance(result, tile.TileType)
        zero = tile.ConstantOp(0, result)
        mma = tile.MmaOp(
            op.lhs,
            op.rhs,
            zero.result,
            satfinite=op.satfinite is not None,
            popc=str(op.popc.data) if op.popc is not None else None,
        )
        Rewriter.insert_op(zero, _before(op))
        Rewriter.replace_op(op, mma)
        replaced(op, mma)
        return mma

    def _operand_types(self, mma: tile.MmaOp, target: targets.SmTarget) -> tuple[str, str]:
        """Insert the casts the target needs; return the operand element types after them."""
        a, b = mma.lhs.type.element, mma.rhs.type.element  # type: ignore[union-attr]
        if isinstance(mma, tile.ScaledMmaOp):  # narrow floats only: nothing to convert
            return a, b
        if a == b == "f32":
            if self.f32_precision == "exact":
                raise LoweringError(
                    mma,
                    "f32 x f32 has no exact tensor-core instruction: pass f32-precision=3xtf32 "
                    "(three tf32 mmas on hi/lo parts, close to f32 accuracy) or f32-precision=tf32 "
                    "(round the operands to tf32, 10-bit mantissa), or tile.cast them to tf32",
                )
            if self.f32_precision == "3xtf32":
                mma.split_tf32 = UnitAttr()
            else:
                _set_operands(mma, "tf32", "tf32", "rna")
            return "tf32", "tf32"
        hinted = mma.mma_shape.data if mma.mma_shape is not None else None
        sparse = isinstance(mma.lhs.type, tile.SparseTileType)
        for slow in SLOW_PATHS:
            if (
                not sparse  # widening would change the sparsity pattern (4:8 pairs vs 2:4)
                and slow.applies(target)
                and a in slow.types
                and not self.allow_slow
                and not _hint_needs(hinted, a)
            ):
                _set_operands(mma, slow.widen_to[a], slow.widen_to[b], None)
                return slow.widen_to[a], slow.widen_to[b]
        return a, b

    def _select(self, mma: tile.MmaOp, target: targets.SmTarget, version) -> None:
        a, b = self._operand_types(mma, target)
        acc = mma.acc.type.element  # type: ignore[union-attr]
        want = dict(
            atype=ELEMENTS[a].ptx,
            btype=ELEMENTS[b].ptx,
            ctype=ELEMENTS[acc].ptx,
            dtype=ELEMENTS[acc].ptx,
            satfinite=getattr(mma, "satfinite", None) is not None,
            bitop=str(mma.popc.data) if getattr(mma, "popc", None) is not None else None,
        )
        scaled = isinstance(mma, tile.ScaledMmaOp)
        if scaled:
            want["stype"] = ELEMENTS[mma.scale_a.type.element].ptx  # type: ignore[union-attr]
        hint = mma.mma_shape.data if mma.mma_shape is not None else None
        forms = (
            SPARSE_FORM_OPTIONS[self.sparse_form]
            if isinstance(mma.lhs.type, tile.SparseTileType)
            else (None,)
        )
        kinds = BLOCK_SCALED_KINDS if scaled else UNSCALED_KINDS
        defined = [
            v
            for v in isa.all_variants()
            if v.sparse in forms
            and v.kind in kinds
            and v.block_scale == scaled
            and (not scaled or v.k // scale_count(v) == mma.block_size)
            and (v.sparse is None or _pattern(v) == mma.lhs.type.pattern)  # type: ignore[union-attr]
            and v.rounding is None
            and (v.alayout, v.blayout) == ("row", "col")
            and all(getattr(v, f) == x for f, x in want.items())
            and (hint is None or v.shape == hint)
        ]
        legal = [v for v in defined if not v.legal(target, version)]
        if not legal:
            raise LoweringError(mma, self._why_none(want, hint, defined, target, version, forms))
        # Largest instruction first; for sparse A the ISA advises ::ordered_metadata over mma.sp.
        best = max(
            legal,
            key=lambda v: (v.m * v.n * v.k, -forms.index(v.sparse), -kinds.index(v.kind), v.scale_vec is not None),
        )
        mma.variant = VariantAttr(best)

    @staticmethod
    def _why_none(want, hint, defined, target, version, forms) -> str:
        form = "mma.sync" if forms == (None,) else "mma.sp"
        what = f"{want['atype']} x {want['btype']} -> {want['dtype']}"
        if "stype" in want:
            what += f" scaled by {want['stype']}"
        if want["satfinite"]:
            what += " with satfinite"
        if want["bitop"]:
            what += f" ({want['bitop']}.popc)"
        where = f"{target.name} with PTX {version}"
        if not defined:
            shape = f" of shape {hint}" if hint else ""
            return f"no {form} variant{shape} computes {what}"
        ordered = sorted(defined, key=lambda v: (UNSCALED_KINDS + BLOCK_SCALED_KINDS).index(v.kind))
        reasons = dict.fromkeys(
            f"{v.shape}{f' .kind::{v.kind}' if v.kind else ''}: {'; '.join(v.legal(target, version))}"
            for v in ordered
        )
        others = [
            v.shape
            for v in isa.legal_variants(target, version)
            if v.sparse in forms and v.kind is None and hint is not None
            and (v.atype, v.btype, v.dtype) == (want["atype"], want["btype"], want["dtype"])
        ]
        tail = f"; on {target.name} use {' or '.join(sorted(set(others)))}" if others else ""
        return f"no {form} variant for {what} on {where}: " + "; ".join(reasons) + tail


def _pattern(v) -> str:
    """The sparsity an mma.sp variant needs (packed 4-bit operands: pair-wise 4:8)."""
    return sparse_fragments.sparse_spec(v.shape, v.atype).pattern.name


def _check_cast_target(cast: tile.CastOp, target: targets.SmTarget) -> None:
    """A cast's rounding exists on the target (`tile.CAST_RULES` says from which sm)."""
    src, dst = cast.source.type.element, cast.result.type.element  # type: ignore[union-attr]
    rule = tile.CAST_RULES[(src, dst)]
    rounding = str(cast.rounding.data) if cast.rounding is not None else rule.default
    need = dict(rule.roundings).get(rounding) if rounding is not None else None
    if rule.sm > target.number:
        raise LoweringError(cast, f"{src} -> {dst} needs sm_{rule.sm} or newer (PTX cvt); the target is {target.name}")
    if need is not None and target.number < need:
        usable = [r for r, sm in rule.roundings if sm <= target.number]
        raise LoweringError(
            cast,
            f"{src} -> {dst} with rounding {rounding} needs sm_{need} or newer; "
            f"{target.name} has {' / '.join(usable) or 'none'}",
        )


def _set_operands(mma: tile.MmaOp, a: str, b: str, rounding: str | None) -> None:
    """Make the mma multiply its operands converted to `a` and `b` (casts inserted before it)."""
    lhs = _cast(mma, mma.lhs, a, rounding)
    rhs = _cast(mma, mma.rhs, b, rounding)
    mma.operands = [lhs, rhs, mma.acc]


def _hint_needs(hint: str | None, element: str) -> bool:
    """A shape hint that only exists for 4-bit operands asks for the native 4-bit instruction."""
    if hint is None:
        return False
    dense = [v for v in isa.all_variants() if v.sparse is None and v.kind is None and v.shape == hint]
    return any(v.atype == ELEMENTS[element].ptx for v in dense) and not any(
        v.atype in ("s8", "u8") for v in dense
    )
