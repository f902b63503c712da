"""`warp-to-ptx` patterns for the epilogue: `warp.map` (its scalar body, once per value a lane
holds) and `warp.cast`.

Each value of an accumulator-shaped fragment is one tile element; a 16-bit fragment holds two a
register (unpacked with `mov.b32 {lo, hi}` and packed back), 8-bit four. The body's ops lower
one to one, with PTX's exact forms so nothing is contracted or approximated behind the IR's back:

| MLIR | f32 / f64 PTX |
| --- | --- |
| arith.addf, subf, mulf, divf | add.rn, sub.rn, mul.rn, div.rn (IEEE; `.rn` also keeps ptxas from fusing a mul and an add into an fma) |
| math.fma | fma.rn |
| arith.maximumf, minimumf | max.NaN, min.NaN (f32); f64: max/min, NaN propagated by setp.nan + selp |
| arith.maxnumf, minnumf | max, min (a NaN operand yields the other) |
| arith.negf, math.absf | neg, abs |
| arith.cmpf + arith.select | setp.(eq, ne, lt, ... ordered; equ, neu, ... unordered; num, nan) + selp |
| arith.extf, truncf, sitofp, uitofp, fptosi | cvt (truncf and the int -> float casts rn, fptosi rzi) |
| math.exp, exp2, log, log2, tanh, erf, sqrt, rsqrt | `scalar_math`'s sequences (ex2/lg2/tanh.approx...; bounds there) |
| math.exp2 fastmath<afn> (f32) | ex2.approx.ftz.f32: subnormal inputs and results flushed to zero (attention's softmax) |
| arith.addi, subi, muli, maxsi, minsi, cmpi (i32) | add.s32, sub.s32, mul.lo.s32, max.s32, min.s32, setp.*.s32 |

f16 and bf16 values are computed in f32 and rounded back after each op (`cvt.rn`): for +, -, x,
/ and sqrt that is exactly the 16-bit IEEE operation (f32 carries more than 2p + 2 bits of a
16-bit format, so the double rounding is innocuous); math functions get the f32 sequence's
bound plus the final rounding. An f16/bf16 `math.fma` is refused (the double rounding is not
innocuous there): extend to f32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.arith import FastMathFlag
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, f32
from xdsl.ir import Block, Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.dialects import warp
from tilemma.dialects.ptx_builder import f32_literal, f64_literal
from tilemma.dialects.tile import element_name
from tilemma.dialects.tile_epilogue import tile_element
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, _layout, regs

# The body's scalar types -> (register bank, PTX type of arithmetic on it).
_BANK = {"f32": "f32", "f64": "f64", "f16": "b16", "bf16": "b16", "si32": "b32"}

_CMPF = {"oeq": "eq", "one": "ne", "olt": "lt", "ole": "le", "ogt": "gt", "oge": "ge", "ueq": "equ",
         "une": "neu", "ult": "ltu", "ule": "leu", "ugt": "gtu", "uge": "geu", "ord": "num", "uno": "nan"}
_CMPF_NAMES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule",
               "une", "uno", "true"]
_CMPI = {"eq": "eq.s32", "ne": "ne.s32", "slt": "lt.s32", "sle": "le.s32", "sgt": "gt.s32", "sge": "ge.s32",
         "ult": "lt.u32", "ule": "le.u32", "ugt": "gt.u32", "uge": "ge.u32"}
_CMPI_NAMES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]

_FLOAT_BINARY = {arith.AddfOp: "add.rn", arith.SubfOp: "sub.rn", arith.MulfOp: "mul.rn", arith.DivfOp: "div.rn",
                 arith.MaxnumfOp: "max", arith.MinnumfOp: "min"}
_NAN_BINARY = {arith.MaximumfOp: "max", arith.MinimumfOp: "min"}
_INT_BINARY = {arith.AddiOp: "add.s32", arith.SubiOp: "sub.s32", arith.MuliOp: "mul.lo.s32",
               arith.MaxSIOp: "max.s32", arith.MinSIOp: "min.s32"}
_MATH = ("math.exp", "math.exp2", "math.log", "math.log2", "math.tanh", "math.erf", "math.sqrt", "math.rsqrt")


def _approx_functions(op: Operation) -> bool:
    """Whether a math op allows approximate functions (`fastmath<afn>`)."""
    flags = getattr(op, "fastmath", None)
    return flags is not None and FastMathFlag.APPROX_FUNC in flags.data


def _type(value) -> str:
    """The tile element name of a body value's type ("i1" for a condition)."""
    t = value.type
    if isinstance(t, IntegerType) and t.width.data == 1:
        return "i1"
    name = tile_element(t)
    assert name is not None  # tile.map's verifier admitted only these
    return name


class _Body:
    """Emits a map body for one value: `run(args) -> yielded registers`."""

    def __init__(self, e: fio.Emitter, block: Block):
        self.e, self.block = e, block
        self.consts: dict[tuple[str, str], str] = {}

    def run(self, args: list[str]) -> list[str]:
        env = dict(zip(self.block.args, args))
        for op in self.block.ops:
            if isinstance(op, warp.MapYieldOp):
                return [env[v] for v in op.values]
            env[op.results[0]] = self.lower(op, [env[v] for v in op.operands])
        raise AssertionError("warp.map body without warp.yield")  # the verifier checks it

    # -- helpers -----------------------------------------------------------------------------

    def const(self, t: str, value: float | int) -> str:
        key = (t, repr(value))
        if key not in self.consts:
            r = self.e.reg(_BANK[t])
            if t == "f32":
                self.e.emit("mov.f32", r, f32_literal(float(value)))
            elif t == "f64":
                self.e.emit("mov.f64", r, f64_literal(float(value)))
            elif t in ("f16", "bf16"):
                bits = int(np.array(value, dtype=ELEMENTS[t].dtype).view(np.uint16))
                self.e.emit("mov.b16", r, f"0x{bits:04X}")
            else:
                self.e.emit("mov.b32", r, str(int(value) & 0xFFFFFFFF))
            self.consts[key] = r
        return self.consts[key]

    def widen(self, t: str, r: str) -> str:
        """A 16-bit float as f32 (exact)."""
        f = self.e.reg("f32")
        self.e.emit(f"cvt.f32.{t}", f, r)
        return f

    def narrow(self, t: str, f: str, rounding: str = "rn") -> str:
        h = self.e.reg("b16")
        self.e.emit(f"cvt.{rounding}.{t}.f32", h, f)
        return h

    def in_f32(self, t: str, args: list[str], compute) -> str:
        """compute(f32 args) -> f32 result, for a 16-bit type: widened in, rounded out."""
        if t == "f32":
            return compute(args)
        return self.narrow(t, compute([self.widen(t, a) for a in args]))

    # -- ops ---------------------------------------------------------------------------------

    def lower(self, op: Operation, args: list[str]) -> str:
        e = self.e
        kind = type(op)
        if isinstance(op, arith.ConstantOp):
            value = op.value
            t = _type(op.result)
            if isinstance(value, FloatAttr):
                return self.const(t, value.value.data)
            if isinstance(value, IntegerAttr) and t == "si32":
                return self.const(t, value.value.data)
            raise LoweringError(op, f"arith.constant of {op.result.type} is not a value an epilogue computes on")
        t = _type(op.results[0])
        if kind in _FLOAT_BINARY and t in ("f32", "f64", "f16", "bf16"):
            opcode = _FLOAT_BINARY[kind]
            if t == "f64":
                return self._emit(f"{opcode}.f64", "f64", args)
            return self.in_f32(t, args, lambda a: self._emit(f"{opcode}.f32", "f32", a))
        if kind in _NAN_BINARY and t in ("f32", "f64", "f16", "bf16"):
            opcode = _NAN_BINARY[kind]
            if t == "f64":
                p, m, d = e.reg("pred"), e.reg("f64"), e.reg("f64")
                e.emit("setp.nan.f64", p, *args)
                e.emit(f"{opcode}.f64", m, *args)
                e.emit("selp.f64", d, f64_literal(float("nan")), m, p)
                return d
            return self.in_f32(t, args, lambda a: self._emit(f"{opcode}.NaN.f32", "f32", a))
        if isinstance(op, (arith.NegfOp, math.AbsFOp)) and t in ("f32", "f64", "f16", "bf16"):
            opcode = "neg" if isinstance(op, arith.NegfOp) else "abs"
            if t in ("f32", "f64"):
                return self._emit(f"{opcode}.{t}", t, args)
            return self.in_f32(t, args, lambda a: self._emit(f"{opcode}.f32", "f32", a))
        if isinstance(op, math.FmaOp):
            if t not in ("f32", "f64"):
                raise LoweringError(op, f"math.fma on {t} would round twice in f32: extend the operands to f32 "
                                        f"(arith.extf) and truncate the result")
            return self._emit(f"fma.rn.{t}", t, args)
        if kind in _INT_BINARY and t == "si32":
            return self._emit(_INT_BINARY[kind], "b32", args)
        if isinstance(op, arith.CmpfOp):
            src = _type(op.lhs)
            name = _CMPF_NAMES[op.predicate.value.data]
            if name in ("false", "true"):
                p = e.reg("pred")
                e.emit("setp.ne.u32" if name == "false" else "setp.eq.u32", p, 0, 0)
                return p
            if src in ("f16", "bf16"):
                args = [self.widen(src, a) for a in args]
                src = "f32"
            p = e.reg("pred")
            e.emit(f"setp.{_CMPF[name]}.{src}", p, *args)
            return p
        if isinstance(op, arith.CmpiOp) and _type(op.lhs) == "si32":
            p = e.reg("pred")
            e.emit(f"setp.{_CMPI[_CMPI_NAMES[op.predicate.value.data]]}", p, *args)
            return p
        if isinstance(op, arith.SelectOp) and t != "i1":
            cond, a, b = args
            d = e.reg(_BANK[t])
            suffix = {"f32": "f32", "f64": "f64", "si32": "b32", "f16": "b16", "bf16": "b16"}[t]
            e.emit(f"selp.{suffix}", d, a, b, cond)
            return d
        if isinstance(op, arith.ExtFOp):
            src = _type(op.input)
            if t == "f32" and src in ("f16", "bf16"):
                return self.widen(src, args[0])
            if t == "f64" and src == "f32":
                return self._emit("cvt.f64.f32", "f64", args)
            if t == "f64" and src in ("f16", "bf16"):
                return self._emit("cvt.f64.f32", "f64", [self.widen(src, args[0])])
        if isinstance(op, arith.TruncFOp):
            src = _type(op.input)
            if src == "f32" and t in ("f16", "bf16"):
                return self.narrow(t, args[0])
            if src == "f64" and t == "f32":
                return self._emit("cvt.rn.f32.f64", "f32", args)
        if isinstance(op, (arith.SIToFPOp, arith.UIToFPOp)) and _type(op.input) == "si32" and t in ("f32", "f64"):
            signed = "s32" if isinstance(op, arith.SIToFPOp) else "u32"
            return self._emit(f"cvt.rn.{t}.{signed}", t, args)
        if isinstance(op, arith.FPToSIOp) and t == "si32" and _type(op.input) in ("f32", "f64"):
            return self._emit(f"cvt.rzi.s32.{_type(op.input)}", "b32", args)
        if isinstance(op, math.Exp2Op) and t == "f32" and _approx_functions(op):
            return self._emit("ex2.approx.ftz.f32", "f32", args)  # afn: MUFU.EX2 alone, no subnormal fix-up
        if op.name in _MATH and t in ("f32", "f16", "bf16"):
            from tilemma.passes.warp_to_ptx import scalar_math

            emit = scalar_math.MATH[op.name]
            return self.in_f32(t, args, lambda a: emit(e, a[0]))
        raise LoweringError(op, f"{op.name} on {t} has no lowering in an epilogue; see the table in "
                                f"passes/warp_to_ptx/elementwise.py (f64 has the exact arithmetic only)")

    def _emit(self, opcode: str, bank: str, args: list[str]) -> str:
        d = self.e.reg(bank)
        self.e.emit(opcode, d, *args)
        return d


def unpack(e: fio.Emitter, registers: list[str], frag: warp.FragType) -> list[str]:
    """One register per value: 16-bit values split off their register (`mov.b32 {lo, hi}`)."""
    lay = _layout(frag)
    if lay.elems_per_reg == 1:
        return list(registers)
    assert lay.elems_per_reg == 2, "map elements are 16, 32 or 64 bits"
    out = []
    for r in registers:
        lo, hi = e.reg("b16"), e.reg("b16")
        e.emit("mov.b32", f"{{{lo}, {hi}}}", r)
        out += [lo, hi]
    return out


def pack(e: fio.Emitter, values: list[str], frag: warp.FragType) -> list[str]:
    """The fragment's registers from one register per value (16-bit values two a register)."""
    lay = _layout(frag)
    if lay.elems_per_reg == 1:
        return values
    out = []
    for i in range(0, len(values), 2):
        r = e.reg("b32")
        e.emit("mov.b32", r, f"{{{values[i]}, {values[i + 1]}}}")
        out.append(r)
    return out


@dataclass
class LowerMap(RewritePattern):
    """`warp.map`: the body once per value, on the values' registers."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MapOp, rewriter: PatternRewriter) -> None:
        inputs = [regs(v) for v in op.inputs]
        if any(r is None for r in inputs):
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        rows_only = op.rows_only()
        variant = (op.inputs[0] if op.inputs else op.outputs[0]).type.variant_attr  # type: ignore[union-attr]
        slots = warp.RowsType(f32, variant).slots()
        # a rows input: each value sees its row's register (in a map of rows, the rows themselves)
        values = [list(r) if rows_only else [r[s] for s in slots.slot]
                  if isinstance(v.type, warp.RowsType) else unpack(e, r, v.type)  # type: ignore[arg-type]
                  for r, v in zip(inputs, op.inputs)]
        body = _Body(e, op.body.block)
        nvals = len(values[0]) if values else slots.count
        results: list[list[str]] = [[] for _ in op.outputs]
        for v in range(nvals):
            for out, r in zip(results, body.run([vals[v] for vals in values])):
                out.append(r)
        packed = [out if rows_only else pack(e, out, res.type) for out, res in zip(results, op.outputs)]  # type: ignore[arg-type]
        _finish(op, rewriter, e, packed)


@dataclass
class LowerCast(RewritePattern):
    """`warp.cast`: every value converted by its `CAST_RULES` rule; fp8 results two at a time
    (`cvt.rn.satfinite.e4m3x2.f32`, the only form PTX has), packed four a register."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.CastOp, rewriter: PatternRewriter) -> None:
        src_regs = regs(op.source)
        if src_regs is None:
            return
        src_frag, dst_frag = op.source.type, op.result.type
        assert isinstance(src_frag, warp.FragType) and isinstance(dst_frag, warp.FragType)
        src, dst = element_name(src_frag.element), element_name(dst_frag.element)
        from tilemma.dialects.element_tables import CAST_RULES

        rule = CAST_RULES[(src, dst)]
        rounding = str(op.rounding.data) if op.rounding is not None else rule.default
        e = fio.Emitter(self.state.kernel(op).regs)
        values = unpack(e, src_regs, src_frag)
        sp, dp = ELEMENTS[src].ptx, ELEMENTS[dst].ptx
        if ELEMENTS[dst].storage_bits == 8:  # e4m3 / e5m2: pairs into a b16, two b16 a register
            halves = []
            for i in range(0, len(values), 2):
                h = e.reg("b16")
                e.emit(f"cvt.rn.satfinite.{dp}x2.f32", h, values[i + 1], values[i])
                halves.append(h)
            if len(halves) % 2:
                zero = e.reg("b16")
                e.emit("mov.b16", zero, 0)
                halves.append(zero)
            out = []
            for i in range(0, len(halves), 2):
                r = e.reg("b32")
                e.emit("mov.b32", r, f"{{{halves[i]}, {halves[i + 1]}}}")
                out.append(r)
            _finish(op, rewriter, e, [out])
            return
        bank = _BANK[dst]
        converted = []
        for v in values:
            d = e.reg(bank)
            mode = f".{rounding}" if rounding else ""
            e.emit(f"cvt{mode}.{dp}.{sp}", d, v)
            converted.append(d)
        _finish(op, rewriter, e, [pack(e, converted, dst_frag)])
