"""`linalg-to-tile`: `linalg.matmul` on memref kernel arguments becomes tile IR.

An MLIR pipeline hands over its matmuls as `linalg.matmul ins(%a, %b) outs(%c)` in a `func.func`
whose arguments are those memrefs (static shapes, any strided layout tilemma addresses). linalg
accumulates into its output (C += A x B), so the op becomes tile.load of A, B and C, `tile.mma`
with C as the accumulator, and tile.store back to C: the kernel shape `tilemma gemm` writes,
with C and D one argument. linalg's integers are signless and its matmul extends them as signed
(`cast_signed`, its default), so signless iN arguments are retyped siN, the tile types that say
so. Everything the tile verifier refuses (mixed element types, accumulators the tables do not
allow) is reported at the linalg op with the tile rule's message.

Kernels are top-level `func.func`s: tilemma makes the entry, grid and block itself. A `gpu.func`
holding linalg or tile ops is refused with a message saying so (use `--emit gpu-binary` to hand
the compiled kernel back to an MLIR gpu pipeline).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, gpu
from xdsl.dialects.linalg import Linalg
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import AnyFloat, IntegerType, MemRefType, ModuleOp, Signedness
from xdsl.ir import Attribute, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError, replaced


def _convert(value: SSAValue, to: Attribute) -> SSAValue:
    """`value` as element type `to`, with the arith op linalg's `cast_signed` uses."""
    src = value.type
    if src == to:
        return value
    if isinstance(src, AnyFloat) and isinstance(to, AnyFloat):
        wider = to.bitwidth > src.bitwidth
        return (arith.ExtFOp(value, to) if wider else arith.TruncFOp(value, to)).result
    if isinstance(src, IntegerType) and isinstance(to, IntegerType):
        if to.width.data < src.width.data:
            return arith.TruncIOp(value, to).result
        unsigned = src.signedness.data == Signedness.UNSIGNED
        return (arith.ExtUIOp(value, to) if unsigned else arith.ExtSIOp(value, to)).result
    raise ValueError(f"linalg.matmul: no conversion from {src} to {to}")


class MatmulOp(linalg.MatmulOp):
    """linalg.matmul whose implicit body converts both operands to the output's element type
    before multiplying, as MLIR's does. (xDSL 0.74's body multiplies in the input type and adds
    that to the accumulator, which does not verify for f16 -> f32 or i8 -> i32.) The op is
    xDSL's, IRDL definition included; only the body builder differs."""

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = cls.body_arg_types((*inputs, *outputs))
        out = arg_types[-1]
        add, mul = (arith.AddfOp, arith.MulfOp) if isinstance(out, AnyFloat) else (arith.AddiOp, arith.MuliOp)

        @Builder.implicit_region(arg_types)
        def body(args: tuple[BlockArgument, ...]) -> None:
            product = mul(_convert(args[0], out), _convert(args[1], out))
            linalg.YieldOp(add(args[2], product))

        return body


# xDSL's linalg dialect with the matmul above: what tilemma's parsers load.
LINALG = Dialect(
    "linalg",
    [MatmulOp if op is linalg.MatmulOp else op for op in Linalg.operations],
    list(Linalg.attributes),
)

_DEFAULT_MAPS = linalg.MatmulOp.get_irdl_definition().properties["indexing_maps"].default_value


def _tile_element(t: Attribute, at: Operation, what: str) -> Attribute:
    """The tile element type of a memref element: signless integers are read as signed."""
    if isinstance(t, IntegerType) and t.signedness.data == Signedness.SIGNLESS:
        if t.width.data == 1:
            raise LoweringError(
                at,
                f"{what}: i1 elements: tile's b1 matmul computes popc(xor/and), not linalg's "
                "arithmetic; write tile.mma {popc} for binary GEMMs",
            )
        return IntegerType(t.width.data, Signedness.SIGNED)
    return t


class MatmulToTile(RewritePattern):
    """linalg.matmul ins(A, B) outs(C) on kernel memrefs -> tile.load A, B, C; tile.mma; tile.store C."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: linalg.MatmulOp, rewriter: PatternRewriter) -> None:
        kernel = op.parent_op()
        if not isinstance(kernel, func.FuncOp):
            raise LoweringError(op, "must sit directly in the kernel's func.func body")
        if len(op.inputs) != 2 or len(op.outputs) != 1:
            raise LoweringError(op, "expected ins(A, B) and outs(C)")
        if op.indexing_maps != _DEFAULT_MAPS:
            raise LoweringError(
                op,
                "only the default indexing maps (C[m, n] += A[m, k] * B[k, n]) are supported; "
                "express a transposed operand with a strided memref layout instead",
            )
        operands = (*op.inputs, op.outputs[0])
        for what, value in zip("ABC", operands):
            ref = value.type
            if not isinstance(ref, MemRefType):
                raise LoweringError(
                    op,
                    f"operand {what} is a {ref}: only memrefs are supported (bufferize tensors "
                    "first, e.g. mlir-opt --one-shot-bufferize)",
                )
            if not ref.has_static_shape():
                raise LoweringError(op, f"operand {what} ({ref}) has a dynamic shape; tilemma needs static shapes")
            if len(ref.get_shape()) != 2:
                raise LoweringError(op, f"operand {what} ({ref}) must be rank 2")
            if not (isinstance(value, BlockArgument) and value.block is kernel.body.block):
                raise LoweringError(
                    op,
                    f"operand {what} must be an argument of the kernel @{kernel.sym_name.data} "
                    f"(a memref the caller passes), not the result of {value.owner.name}",  # type: ignore[union-attr]
                )
        args = []
        for i, what in enumerate("ABC"):
            value = op.operands[i]  # afresh: A and B may be one argument, retyped at A
            ref = value.type
            assert isinstance(ref, MemRefType) and isinstance(value, BlockArgument)
            element = _tile_element(ref.element_type, op, f"operand {what}")
            if element != ref.element_type:  # signless -> signed, everywhere the argument goes
                value = rewriter.replace_value_with_new_type(
                    value, MemRefType(element, ref.get_shape(), ref.layout, ref.memory_space)
                )
                kernel.update_function_type()
            args.append(value)
        self._rewrite(op, args, rewriter)

    @staticmethod
    def _rewrite(op: linalg.MatmulOp, args: list[SSAValue], rewriter: PatternRewriter) -> None:
        new: list[Operation] = []
        tiles = []
        for value, hint in zip(args, ("ta", "tb", "tc")):
            ref = value.type
            assert isinstance(ref, MemRefType)
            load = tile.LoadOp(value, (0, 0), tile.TileType(ref.get_shape(), ref.element_type))
            load.result.name_hint = hint
            new.append(load)
            tiles.append(load.result)
        mma = tile.MmaOp(*tiles)
        mma.result.name_hint = "td"
        new += [mma, tile.StoreOp(mma.result, args[2], (0, 0))]
        for o in new:
            try:
                o.verify()
            except VerifyException as e:
                raise LoweringError(op, str(e)) from None
        rewriter.replace(op, new, [])
        for o in new:
            replaced(op, o)


def refuse_gpu_kernels(module: ModuleOp) -> None:
    """A LoweringError at the first gpu.func that holds tile or linalg ops."""
    for f in module.walk():
        if isinstance(f, gpu.FuncOp) and any(o.dialect_name() in ("tile", "linalg") for o in f.walk()):
            raise LoweringError(
                f,
                "kernels inside gpu.module/gpu.func are not supported: write the kernel as a "
                "top-level func.func taking its memrefs (tilemma makes the entry, grid and block "
                "itself), and hand the result to an MLIR gpu pipeline with "
                "`tilemma compile --emit gpu-binary`",
            )


class LinalgToTile(ModulePass):
    """Convert every linalg.matmul on kernel memrefs into tile ops (a no-op without linalg)."""

    name = "linalg-to-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        refuse_gpu_kernels(op)
        PatternRewriteWalker(MatmulToTile(), apply_recursively=False).rewrite_module(op)
        for left in op.walk():
            if left.dialect_name() == "linalg" and not isinstance(left, linalg.YieldOp):
                raise LoweringError(left, "only linalg.matmul is converted to tile ops")
