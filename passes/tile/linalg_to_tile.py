"""`linalg-to-tile`: a bufferized linalg kernel (what torch-mlir or IREE emit, after one-shot
bufferization) becomes tile IR.

A kernel is a `func.func` whose arguments are memrefs (strided layouts; sizes and strides static
or `?`). Its body is read in order, as values flow, not as memory:

- `memref.alloc` buffers are temporaries: what a linalg op writes into one becomes an SSA tile
  value (`linalg.fill` a `tile.constant`, a matmul a `tile.mma`, an elementwise op a `tile.map`),
  and later reads of the buffer read that value. Only kernel arguments are memory: they are read
  with `tile.load` / `tile.broadcast` and written, at the end, with one `tile.store` each of the
  last value written to them. A buffer read before anything wrote it is an error.
- Contractions (`linalg.matmul`, `linalg.batch_matmul`, with any `indexing_maps` that permute
  an operand, and a `linalg.generic` whose body is `C + A * B`) become `tile.mma` with the
  buffer's value (zeros from `linalg.fill`, or C loaded: linalg accumulates, C += A x B) as the
  accumulator. A and B are kernel arguments, read directly or through `linalg.transpose` into a
  buffer: a transposed read is a strided view of the same argument (`linalg_views`).
- Elementwise ops (`linalg.generic` with parallel iterators, the named ones such as
  `linalg.add`, `linalg.copy`, `linalg.broadcast`, `memref.copy`) become `tile.map`s of their
  bodies (`linalg_epilogue`); an input indexed by fewer loops (a bias `(d0, d1) -> (d1)`, a row
  scale `(d0, d1) -> (d0)`, a scalar `() `, a stride-0 view) is a `tile.broadcast`.
- linalg's integers are signless and its contractions extend them as signed (`cast_signed`,
  `arith.extsi`; `arith.extui` in a generic's body reads them unsigned), so the arguments are
  retyped si8/si32 (ui8): the tile types that say so.
- A `?` size (what `torch.compile(dynamic=True)` hands over: `memref<?x?xf16>`, or `?x4096`)
  stays `?` in the tiles, as `tilemma gemm --dynamic` writes them: the kernel takes the size at
  launch, which checks that the buffers agree. So the `memref.dim`s that size the temporaries
  (`memref.alloc(%m, %n)`) are not needed and go. What the tile level does not lower with `?`
  sizes is refused here with its reason (`gemm_kernel.dynamic_problem`: a `?` batch, sub-byte
  operands; and the view rules of `linalg_views`).

Anything else is a located error saying what converts. Kernels are top-level `func.func`s:
tilemma makes the entry, grid and block itself; a `gpu.func` holding linalg or tile ops is
refused with a message saying so (use `--emit gpu-binary` to hand the compiled kernel back to
an MLIR gpu pipeline). A kernel without linalg ops (tile IR) is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    ShapedType,
    Signedness,
    StridedLayoutAttr,
    TensorType,
)
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.abstract_ops import ElementwiseOperation, LinalgStructuredOperation
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError, origin, replaced
from tilemma.passes.tile.gemm_kernel import dynamic_problem
from tilemma.passes.tile.upstream_dialects import BatchMatmulOp
from tilemma.passes.tile.linalg_epilogue import body_is_copy, build_map, drop_dead, fuse_maps
from tilemma.passes.tile.linalg_views import identity_exprs, tile_element, view, view_strides

_ALLOCS = (memref.AllocOp, memref.AllocaOp)
_WHAT_CONVERTS = (
    "linalg-to-tile converts linalg.fill, linalg.matmul, linalg.batch_matmul, linalg.transpose, "
    "elementwise linalg.generic / linalg.add ... / linalg.copy / linalg.broadcast, memref.alloc, "
    "memref.dim, memref.copy, memref.dealloc and arith.constant")


# What to write instead, for ops frontends emit that do not convert.
_HINTS = {
    "memref.load": " (a scalar argument is a one-element memref input of the generic, indexing map ())",
    "memref.subview": " (a window of an argument is an argument whose memref type says where it is, strided<[...], offset: ...>)",
    "memref.expand_shape": " (pass the argument with the shape the kernel reads)",
    "memref.collapse_shape": " (pass the argument with the shape the kernel reads)",
    "memref.cast": " (pass each argument with the type the kernel reads it as; ? sizes are fine)",
    "linalg.reduce": " (the one reduction tile IR has is the matmul's)",
    "linalg.quantized_matmul": " (subtract the zero points before the matmul, or write the GEMM with linalg.matmul and fold the zero points into the epilogue)",
    "bufferization.to_tensor": " (bufferize the whole kernel: mlir-opt --one-shot-bufferize=\"bufferize-function-boundaries\")",
    "hal.interface.binding.subspan": " (an IREE dispatch: a tilemma kernel is a func.func taking its buffers as memref arguments)",
    "bufferization.to_buffer": " (bufferize the whole kernel: mlir-opt --one-shot-bufferize=\"bufferize-function-boundaries\")",
}


def _operand_name(op: Operation, v: SSAValue) -> str:
    if v not in op.operands:
        return "the result"
    i = list(op.operands).index(v)
    if isinstance(op, linalg.MatmulOp | BatchMatmulOp) and i < 3:
        return f"operand {'ABC'[i]}"
    return f"operand #{i}"


def _has_dynamic(ref: MemRefType) -> bool:
    """Whether a size or a stride of the memref type is `?`."""
    layout = ref.layout
    return not ref.has_static_shape() or (
        isinstance(layout, StridedLayoutAttr) and None in layout.get_strides())


def _signed_as(held: SSAValue, signedness: Signedness) -> bool:
    """Whether a loaded tile's integers are read with `signedness` (floats: always)."""
    t = held.type.element_type  # type: ignore[union-attr]
    return not isinstance(t, IntegerType) or t.signedness.data == signedness


class _Memory:
    """A buffer the kernel names: a kernel argument (by index: retyping replaces the block
    argument) or a memref.alloc."""

    __slots__ = ("arg", "alloc")

    def __init__(self, arg: int | None, alloc: SSAValue | None):
        self.arg, self.alloc = arg, alloc

    def key(self) -> object:
        return ("arg", self.arg) if self.arg is not None else self.alloc


class _Kernel:
    """The conversion of one kernel: the values the buffers hold, the views of the arguments,
    the tile ops made so far."""

    def __init__(self, kernel: func.FuncOp):
        self.kernel = kernel
        self.block = kernel.body.block
        self.original = [a.type for a in self.block.args]
        self.names = [a.name_hint for a in self.block.args]
        self.views: dict[int, tuple[MemRefType, Operation]] = {}  # argument -> its retyped memref
        self.values: dict[object, SSAValue] = {}  # buffer -> the tile it holds
        self.writers: dict[int, Operation] = {}  # argument -> the op that last wrote it
        self.transposed: dict[SSAValue, tuple[SSAValue, tuple[int, ...]]] = {}  # buffer -> (source, inverse permutation)
        self.ops: list[Operation] = []
        # Whether a size or stride is `?`: the kernel is then one `read_kernel` takes with sizes
        # known at launch, and the mma must be one it lowers so (`dynamic_problem`).
        self.dynamic = any(isinstance(t, MemRefType) and _has_dynamic(t) for t in self.original)

    # -- buffers ---------------------------------------------------------------------------

    def memory(self, value: SSAValue, at: Operation, what: str) -> _Memory:
        if isinstance(value.type, TensorType):
            raise LoweringError(at, f"{what} is a {value.type}: only memrefs are supported (bufferize tensors "
                                "first, e.g. mlir-opt --one-shot-bufferize)")
        if not isinstance(value.type, MemRefType):
            raise LoweringError(at, f"{what} is a {value.type}, not a memref")
        if isinstance(value, BlockArgument) and value.block is self.block:
            return _Memory(value.index, None)
        if isinstance(value.owner, _ALLOCS):
            return _Memory(None, value)
        raise LoweringError(at, f"{what} comes from {getattr(value.owner, 'name', 'a block argument')}: "
                            "linalg-to-tile reads kernel arguments and memref.alloc buffers")

    def arg_name(self, index: int) -> str:
        return f"%{self.names[index]}" if self.names[index] else f"argument {index}"

    def retype(self, index: int, ref: MemRefType, at: Operation) -> SSAValue:
        """The argument as memref type `ref` (one type per argument: a second, different one is
        an error naming both readers)."""
        seen = self.views.get(index)
        if seen is not None and seen[0] != ref and seen[1] is at:
            raise LoweringError(at, f"kernel argument {self.arg_name(index)} ({self.original[index]}) is read both as "
                                f"{seen[0]} and as {ref}: an argument has one layout and element type in a kernel; "
                                "pass the two forms as two arguments")
        if seen is not None and seen[0] != ref:
            raise LoweringError(
                at,
                f"kernel argument {self.arg_name(index)} ({self.original[index]}) is used here as "
                f"{ref} and by {seen[1].name} as {seen[0]}: an argument has one layout and element "
                "type in a kernel; pass the two forms as two arguments")
        self.views[index] = (ref, at)
        arg = self.block.args[index]
        if arg.type != ref:
            arg = Rewriter.replace_value_with_new_type(arg, ref)
        return arg

    def emit(self, src: Operation, op: Operation, hint: str | None = None) -> SSAValue | None:
        try:
            op.verify()
        except VerifyException as e:
            raise LoweringError(src, str(e)) from None
        if hint and op.results:
            op.results[0].name_hint = hint
        self.ops.append(op)
        replaced(src, op)
        return op.results[0] if op.results else None

    def read(self, value: SSAValue, exprs: Sequence[AffineExpr], tile_dim: dict[int, int],
             shape: Sequence[int], at: Operation, what: str,
             signedness: Signedness = Signedness.SIGNED, whole: bool = False) -> SSAValue:
        """The tile `at` reads from buffer `value` through `exprs` (loop d being tile dimension
        `tile_dim[d]` of a `shape` tile). `whole`: the read must be a whole-tile load of a kernel
        argument (an mma operand)."""
        if value in self.transposed:  # a linalg.transpose of another buffer: read that one
            source, inverse = self.transposed[value]
            return self.read(source, [exprs[i] for i in inverse], tile_dim, shape, at, what, signedness, whole)
        mem = self.memory(value, at, what)
        held = self.values.get(mem.key())
        if held is not None:
            loops = [e.position if isinstance(e, AffineDimExpr) else None for e in exprs]
            elementwise = [tile_dim.get(d) for d in loops] == list(range(len(shape)))
            if whole:
                if isinstance(held.owner, tile.LoadOp) and elementwise and _signed_as(held, signedness):
                    return held  # a copy of an argument (memref.copy into a buffer): its load
                producer = origin(held.owner).name if isinstance(held.owner, Operation) else "?"
                raise LoweringError(at, f"{what} is computed in the kernel (by {producer}): the mma reads its A and B "
                                    "from kernel arguments (directly or through linalg.transpose)")
            if not elementwise:
                raise LoweringError(at, f"{what} holds a value computed in the kernel, read here through "
                                    f"({', '.join(map(str, exprs))}): a computed tile is read elementwise "
                                    "(the identity map); only kernel arguments transpose or broadcast")
            return held
        if mem.arg is None:
            raise LoweringError(at, f"{what} is a memref.alloc buffer that nothing has written before this read")
        original = self.original[mem.arg]
        assert isinstance(original, MemRefType)
        element = tile_element(original.element_type, signedness)
        if isinstance(element, IntegerType) and element.width.data == 1:
            raise LoweringError(at, f"{what}: i1 elements: tile's b1 matmul computes popc(xor/and), not linalg's "
                                "arithmetic; write tile.mma {popc} for binary GEMMs")
        try:
            v = view(original, exprs, tile_dim, element)
        except ValueError as e:
            raise LoweringError(at, f"{what} ({original}): {e}") from None
        whole_tile = v.dims == tuple(range(len(shape)))
        if whole and not whole_tile:
            raise LoweringError(at, f"{what} ({self.original[mem.arg]}) is read as a broadcast (a stride-0 or "
                                "unit dimension): an mma operand is a whole matrix")
        try:
            result = tile.TileType(list(shape), element)
        except VerifyException as e:
            raise LoweringError(at, f"{what}: {e}") from None
        arg = self.retype(mem.arg, v.ref, at)
        rank = len(v.ref.get_shape())
        if whole_tile:
            op: Operation = tile.LoadOp(arg, [0] * rank, result)
        else:
            op = tile.BroadcastOp(arg, [0] * rank, v.dims, result)
        return self.emit(at, op)  # type: ignore[return-value]

    def write(self, value: SSAValue, result: SSAValue, at: Operation, what: str) -> None:
        """`at` writes tile `result` into buffer `value` (all of it: linalg writes whole outputs)."""
        if value in self.transposed:
            raise LoweringError(at, f"{what} is the result buffer of a linalg.transpose: write into a buffer of "
                                "its own")
        mem = self.memory(value, at, what)
        self.values[mem.key()] = result
        if mem.arg is not None:
            ref = self.original[mem.arg]
            assert isinstance(ref, MemRefType)
            element = result.type.element_type  # type: ignore[union-attr]
            try:
                strides, _ = view_strides(ref)
            except ValueError as e:
                raise LoweringError(at, f"{what}: {e}") from None
            if any(s == 0 for s, d in zip(strides, ref.get_shape()) if d != 1):
                raise LoweringError(at, f"{what} ({ref}) has a stride-0 (broadcast) dimension: elements share a place, "
                                    "so it cannot be written")
            self.retype(mem.arg, MemRefType(element, ref.get_shape(), ref.layout, ref.memory_space), at)
            self.writers[mem.arg] = at

    # -- ops -------------------------------------------------------------------------------

    def convert(self) -> None:
        term = self.block.last_op
        for op in list(self.block.ops):
            if op is term and isinstance(op, func.ReturnOp):
                if op.operands:
                    raise LoweringError(op, "the kernel returns values: a tilemma kernel writes its results into "
                                        "memref arguments (mlir-opt --buffer-results-to-out-params="
                                        "\"hoist-static-allocs modify-public-functions\" makes them so)")
                continue
            self.convert_op(op)
        self.finish()

    def convert_op(self, op: Operation) -> None:
        for v in (*op.operands, *op.results):
            if isinstance(v.type, TensorType):
                raise LoweringError(op, f"{_operand_name(op, v)} is a {v.type}: only memrefs are supported (bufferize "
                                    "tensors first, e.g. mlir-opt --one-shot-bufferize)")
        if isinstance(op, (arith.ConstantOp, memref.DeallocOp, memref.DimOp, *_ALLOCS)):
            return  # a buffer's `?` sizes are its tiles': the memref.dims that size it go with it
        if isinstance(op, memref.CopyOp):
            return self.copy(op, op.source, op.destination)
        if isinstance(op, linalg.FillOp):
            return self.fill(op)
        if isinstance(op, LinalgStructuredOperation) and not op.outputs:  # before xDSL reads operand 0
            raise LoweringError(op, "no outs(...) operand: a linalg op writes its result into an output buffer")
        if isinstance(op, linalg.TransposeOp):
            if len(op.inputs) != 1 or len(op.outputs) != 1:
                raise LoweringError(op, "expected ins(input) and outs(output)")
            return self.transpose(op)
        if isinstance(op, linalg.BroadcastOp):
            return self.broadcast(op)
        if isinstance(op, linalg.MatmulOp | BatchMatmulOp):
            return self.contraction(op)
        if isinstance(op, linalg.GenericOp):
            kinds = [str(t.data) for t in op.iterator_types]
            if all(k == "parallel" for k in kinds):
                return self.elementwise(op)
            return self.contraction(op)
        if isinstance(op, ElementwiseOperation):
            return self.elementwise(op)
        hint = _HINTS.get(op.name, " (a kernel is written in linalg or in tile IR, not both)"
                          if op.dialect_name() == "tile" else "")
        if op.dialect_name() == "linalg":
            raise LoweringError(op, f"not converted{hint}: {_WHAT_CONVERTS}")
        raise LoweringError(op, f"not converted in a linalg kernel{hint}: {_WHAT_CONVERTS}")

    def copy(self, op: Operation, source: SSAValue, dest: SSAValue) -> None:
        ref = dest.type
        assert isinstance(ref, MemRefType)
        shape = ref.get_shape()
        rank = len(shape)
        result = self.read(source, identity_exprs(rank), {d: d for d in range(rank)}, shape, op, "the source")
        self.write(dest, result, op, "the destination")

    def fill(self, op: linalg.FillOp) -> None:
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            raise LoweringError(op, "expected ins(value) and outs(buffer)")
        const = op.inputs[0].owner
        if not isinstance(const, arith.ConstantOp) or not isinstance(const.value, IntegerAttr | FloatAttr):
            raise LoweringError(op, "the fill value must be an arith.constant (a kernel fills with a known value)")
        ref = op.outputs[0].type
        self.memory(op.outputs[0], op, "the output")
        assert isinstance(ref, MemRefType)
        element = tile_element(ref.element_type)
        number = const.value.value.data
        number = float(number) if isinstance(element, AnyFloat) else int(number)
        try:
            result = tile.TileType(ref.get_shape(), element)
        except VerifyException as e:
            raise LoweringError(op, str(e)) from None
        value = self.emit(op, tile.ConstantOp(number, result), "zero" if number == 0 else None)
        assert value is not None
        self.write(op.outputs[0], value, op, "the output")

    def transpose(self, op: linalg.TransposeOp) -> None:
        perm = tuple(op.permutation.get_values())
        source, out = op.inputs[0], op.outputs[0]
        out_mem = self.memory(out, op, "the output")
        src_mem = self.memory(source, op, "the input")
        if out_mem.arg is not None:
            raise LoweringError(op, "the output is a kernel argument: tile IR has no transpose; a transposed "
                                "read of an argument (into a memref.alloc) is a strided view")
        if self.values.get(src_mem.key()) is not None:
            raise LoweringError(op, "the input is computed in the kernel: tile IR has no transpose; only kernel "
                                "arguments transpose (as a strided view of the same buffer)")
        inverse = [0] * len(perm)
        for o, i in enumerate(perm):
            inverse[i] = o
        # out[..] at dims o reads source dim perm[o]: reading out through exprs E reads source
        # dimension i through E[inverse[i]].
        self.transposed[out] = (source, tuple(inverse))

    def broadcast(self, op: linalg.BroadcastOp) -> None:
        ref = op.init.type
        assert isinstance(ref, MemRefType)
        shape = ref.get_shape()
        added = set(op.dimensions.get_values())
        exprs = [AffineDimExpr(d) for d in range(len(shape)) if d not in added]
        result = self.read(op.input, exprs, {d: d for d in range(len(shape))}, shape, op, "the input")
        self.write(op.init, result, op, "the output")

    def elementwise(self, op: LinalgStructuredOperation) -> None:
        maps = [m.data for m in op.get_indexing_maps()]
        if len(maps) != len(op.operands):
            raise LoweringError(op, f"{len(maps)} indexing maps for {len(op.operands)} operands: one map per "
                                "ins(...) and outs(...) operand")
        n_in = len(op.inputs)
        out_maps = maps[n_in:]
        rank = maps[0].num_dims if maps else 0
        for i, m in enumerate(out_maps):
            if m.results != identity_exprs(rank):
                raise LoweringError(op, f"output #{i} is written through {m}: outputs are written elementwise "
                                    "(the identity map)")
        refs = [o.type for o in op.outputs]
        for v in (*op.inputs, *op.outputs):
            if isinstance(v.type, ShapedType):
                self.memory(v, op, f"operand #{op.operands.index(v)}")
        shape = refs[0].get_shape()  # type: ignore[union-attr]
        if len(shape) not in (2, 3):
            raise LoweringError(op, f"a rank {len(shape)} elementwise op: tile values are rank 2 (or 3 for "
                                "batches); elementwise work converts where it runs over the matmul's tile")
        tile_dim = {d: d for d in range(rank)}
        body = op.body.block
        # A copy or a broadcast moves tiles, no map needed.
        picks = body_is_copy(body)
        if picks is not None and all(p < n_in and body.args[p].type == refs[j].element_type  # type: ignore[union-attr]
                                     for j, p in enumerate(picks)):
            for j, p in enumerate(picks):
                value = self.read(op.inputs[p], maps[p].results, tile_dim, shape, op, f"input #{p}")
                self.write(op.outputs[j], value, op, f"output #{j}")
            return
        inputs: list[tuple[SSAValue, SSAValue]] = []
        constants: dict[SSAValue, SSAValue] = {}
        for i, operand in enumerate((*op.inputs, *op.outputs)):
            arg = body.args[i]
            if not arg.uses:
                continue
            if not isinstance(operand.type, ShapedType):
                if isinstance(operand.owner, arith.ConstantOp):
                    constants[arg] = operand
                    continue
                raise LoweringError(op, f"input #{i} is a {operand.type} scalar computed in the kernel: a scalar input is a "
                                    "constant, or a one-element memref argument (indexing map ())")
            what = f"input #{i}" if i < n_in else f"output #{i - n_in} (read by the body)"
            inputs.append((arg, self.read(operand, maps[i].results, tile_dim, shape, op, what)))
        outputs = []
        for j, ref in enumerate(refs):
            assert isinstance(ref, MemRefType)
            try:
                outputs.append((j, tile.TileType(shape, tile_element(ref.element_type))))
            except VerifyException as e:
                raise LoweringError(op, f"output #{j}: {e}") from None
        if not inputs:
            raise LoweringError(op, "the body reads no tile: write constants with linalg.fill")
        mapped, casts = build_map(op, body, inputs, outputs, constants)
        self.emit(op, mapped)
        for (j, _), result in zip(outputs, mapped.outputs):
            if j in casts:  # an f8 result, clamped: the hardware's conversion is arith.truncf here
                result = self.emit(op, tile.CastOp(result, casts[j], "rn"))  # type: ignore[assignment]
            self.write(op.outputs[j], result, op, f"output #{j}")

    def contraction(self, op: LinalgStructuredOperation) -> None:
        if len(op.inputs) != 2 or len(op.outputs) != 1:
            if isinstance(op, linalg.GenericOp):
                raise LoweringError(op, "a linalg.generic with a reduction converts as a matmul only: ins(A, B) outs(C), "
                                    "C += A * B (tile IR's one reduction)")
            raise LoweringError(op, "expected ins(A, B) and outs(C)")
        names = dict(zip((*op.inputs, op.outputs[0]), "ABC"))
        for v in (*op.inputs, op.outputs[0]):
            self.memory(v, op, f"operand {names[v]}")
        maps = [m.data for m in op.get_indexing_maps()]
        kinds = [str(t.data) for t in op.get_iterator_types()]
        reductions = [d for d, k in enumerate(kinds) if k == "reduction"]
        parallel = [d for d, k in enumerate(kinds) if k == "parallel"]
        c_dims = [e.position for e in maps[2].results if isinstance(e, AffineDimExpr)]
        if (len(reductions) != 1 or len(parallel) not in (2, 3) or len(c_dims) != len(maps[2].results)
                or c_dims != parallel):
            raise LoweringError(op, "not a matmul: expected C[(b,) m, n] += A[(b,) m, k] * B[(b,) k, n] (C indexed by "
                                "the parallel loops in order, one reduction loop k)")
        k = reductions[0]
        *batch, m, n = c_dims
        signs = self._contraction_signs(op)

        def loops(i: int) -> set[int]:
            return {e.position for e in maps[i].results if isinstance(e, AffineDimExpr)}

        a, b = 0, 1
        if {n, k, *batch} == loops(0) and {m, k, *batch} == loops(1):
            a, b = 1, 0  # written B x A: the product commutes
        for i, want, role in ((a, {m, k, *batch}, "A"), (b, {k, n, *batch}, "B")):
            if loops(i) != want or len(maps[i].results) != len(want):
                raise LoweringError(op, f"operand {'AB'[i]} is indexed by {maps[i]}: the matmul's {role} is indexed by "
                                    f"its batch, {'m and k' if role == 'A' else 'k and n'} loops, in any order")

        def size(i: int, tile_loops: tuple[int, ...]) -> list[int]:
            """Operand i's tile shape: each loop's size as that operand's memref says it. linalg
            checks static sizes against each other; a static size against a `?` is left to the
            tile verifier, which refuses it as it does in tile IR."""
            shape = op.operands[i].type.get_shape()  # type: ignore[union-attr]
            at = {e.position: j for j, e in enumerate(maps[i].results) if isinstance(e, AffineDimExpr)}
            return [shape[at[d]] for d in tile_loops]

        a_dims = {d: i for i, d in enumerate((*batch, m, k))}
        b_dims = {d: i for i, d in enumerate((*batch, k, n))}
        c_dims_map = {d: i for i, d in enumerate((*batch, m, n))}
        ta = self.read(op.inputs[a], maps[a].results, a_dims, size(a, (*batch, m, k)), op,
                       f"operand {'AB'[a]}", signs[a], whole=True)
        tb = self.read(op.inputs[b], maps[b].results, b_dims, size(b, (*batch, k, n)), op,
                       f"operand {'AB'[b]}", signs[b], whole=True)
        ta.name_hint, tb.name_hint = "ta", "tb"
        tc = self.read(op.outputs[0], maps[2].results, c_dims_map, size(2, (*batch, m, n)), op, "operand C")
        if isinstance(tc.owner, tile.LoadOp):
            tc.name_hint = "tc"
        result = self.emit(op, tile.MmaOp(ta, tb, tc), "td")
        assert result is not None
        if self.dynamic:
            problem = dynamic_problem(result.owner, (ta.type.element, tb.type.element))  # type: ignore[arg-type, attr-defined]
            if problem:
                raise LoweringError(op, problem)
        self.write(op.outputs[0], result, op, "operand C")

    def _contraction_signs(self, op: LinalgStructuredOperation) -> tuple[Signedness, Signedness]:
        """How A and B's integers are read: the named ops extend signed; a generic says so in
        its body, which must be C + A * B (each operand converted to C's type first)."""
        signed = (Signedness.SIGNED, Signedness.SIGNED)
        if not isinstance(op, linalg.GenericOp):
            return signed
        body = op.body.block
        problem = ("the body of a linalg.generic with a reduction must be a matmul's: yield C + A * B, "
                   "A and B converted to C's type by arith.extf / extsi / extui")
        term = body.last_op
        if not isinstance(term, linalg.YieldOp) or len(term.operands) != 1 or len(body.args) != 3:
            raise LoweringError(op, problem)
        add = term.operands[0].owner
        if not isinstance(add, arith.AddfOp | arith.AddiOp) or body.args[2] not in add.operands:
            raise LoweringError(op, problem)
        product = add.operands[1] if add.operands[0] is body.args[2] else add.operands[0]
        mul = product.owner
        if not isinstance(mul, arith.MulfOp | arith.MuliOp):
            raise LoweringError(op, problem)
        signs: dict[int, Signedness] = {}
        used = {add, mul, term}
        for v in mul.operands:
            sign = Signedness.SIGNED
            if isinstance(v.owner, arith.ExtFOp | arith.ExtSIOp | arith.ExtUIOp):
                used.add(v.owner)
                if isinstance(v.owner, arith.ExtUIOp):
                    sign = Signedness.UNSIGNED
                v = v.owner.input
            if not isinstance(v, BlockArgument) or v.block is not body or v.index == 2 or v.index in signs:
                raise LoweringError(op, problem)
            signs[v.index] = sign
        if len(used) != len(list(body.ops)):
            raise LoweringError(op, problem)
        return signs[0], signs[1]

    # -- the end ---------------------------------------------------------------------------

    def finish(self) -> None:
        for index in sorted(self.writers, key=lambda i: self._order(self.writers[i])):
            value = self.values[("arg", index)]
            arg = self.block.args[index]
            if isinstance(value.owner, tile.LoadOp) and value.owner.source is arg:
                continue  # copied onto itself
            ref = arg.type
            assert isinstance(ref, MemRefType)
            store = tile.StoreOp(value, arg, [0] * len(ref.get_shape()))
            self.emit(self.writers[index], store)
        ops = drop_dead(fuse_maps(self.ops))
        term = self.block.last_op
        old = [o for o in self.block.ops if o is not term]
        for o in reversed(old):
            o.detach()
            o.erase(safe_erase=False)
        for op in ops:
            self.block.insert_op_before(op, term)  # type: ignore[arg-type]
        self.kernel.update_function_type()

    def _order(self, op: Operation) -> int:
        ops = list(self.block.ops)
        return ops.index(op) if op in ops else len(ops)


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
    """Convert every kernel written in bufferized linalg into tile ops (a no-op without linalg)."""

    name = "linalg-to-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        refuse_gpu_kernels(op)
        for kernel in list(op.walk()):
            if isinstance(kernel, func.FuncOp) and not kernel.is_declaration and any(
                    o.dialect_name() == "linalg" for o in kernel.walk()):
                if kernel.parent_op() is not op:
                    raise LoweringError(kernel, "a kernel must be a top-level func.func")
                _Kernel(kernel).convert()
        for left in op.walk():
            if left.dialect_name() == "linalg" and not isinstance(left, linalg.YieldOp):
                raise LoweringError(left, f"{left.name} is not converted: {_WHAT_CONVERTS}")
