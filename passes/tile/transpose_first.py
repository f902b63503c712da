"""`tile-transpose-first`: an 8-bit B stored N-major transposed into a K-major workspace by a
kernel of its own, launched before the GEMM, which then reads B K-major.

8-bit wgmma reads B K-major from shared memory only. Where A is M-major too, the product's
transpose has the same two orders (`tile-transpose-product` does not help), and the warpgroups
transpose B in shared memory stage by stage (`#warp.schedule` transpose `b`), on the critical path:
H200, s8 4096^3 788 TOP/s against 1352 for both operands K-major. Transposing B first, once, costs
a read and a write of B (6 us at 4096^2 bytes) and leaves the A-M-major kernel (1285 by itself):
1168 in all, in the same call (`configs.TRANSPOSE_FIRST_MIN_ROWS`). CUTLASS, TransformerEngine and
cuBLASLt's layout transforms do the same for 8-bit operands.

The rewrite (tile IR): the kernel gains an argument, B's K-major workspace (`memref<KxN,
strided<[1, K]>>` of B's whole memref, `transposed_b`), its mma's B is loaded from there, and
`tile.transpose_first` records [B's argument, the workspace's]. `tile-distribute` gives them their
roles (b, and transposed_b, a scratch role: the launch provides it where the caller does not) and
`warp-to-ptx` adds the transposing kernel to the module (`transpose_kernel`), named in the GEMM
entry's prologue, which every launch path runs first on the same stream.

Option `transpose-first`: -1 (automatic: where `tile-plan` would transpose B in shared memory and
the kernel has `TRANSPOSE_FIRST_MIN_ROWS` rows, when the tiling is left to it and `tune-cache`
holds no configuration for the kernel), 0 (never) or 1 (wherever it fits, a located error where
it does not: B 8-bit, N-major, an argument of static, unbatched, row-major sizes that are
multiples of 16, the target sm_90a).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr, DenseArrayBase, DictionaryAttr, MemRefType, ModuleOp, NoneAttr, StridedLayoutAttr, i64,
)
from xdsl.ir import BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tilemma.compiler.core import configs
from tilemma.compiler.core.memref_layout import row_major
from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.gemm_kernel import GemmKernel, read_kernel
from tilemma.passes.tile.plan import GRID_LIMITS, kernel_target, plan, tuned_config, wrong_order
from tilemma.passes.warp_to_ptx import transpose_kernel


def b_load(g: GemmKernel) -> tile.LoadOp:
    """The tile.load the mma's B starts from (through its casts)."""
    owner = g.mma.rhs.owner
    while isinstance(owner, tile.CastOp):
        owner = owner.source.owner
    assert isinstance(owner, tile.LoadOp)  # read_kernel checked
    return owner


def why_not(kernel: func.FuncOp, g: GemmKernel) -> str:
    """Why B cannot be transposed first ("" where it can)."""
    if not kernel_target(kernel).is_arch(90):
        return "it feeds sm_90a's warpgroups (wgmma), and the target is not sm_90a"
    if g.b.bits != 8:
        return f"B is {g.b.stored}, not an 8-bit type"
    if g.a_meta is not None or g.scales is not None or g.mma.variant.variant.sparse is not None:  # type: ignore[union-attr]
        return "the kernel is sparse or block-scaled"
    if g.dynamic:
        return "B's sizes are known only at launch"
    if not wrong_order(g, "b"):
        return "B is K-major already"
    ref = b_load(g).source
    if not isinstance(ref, BlockArgument):
        return "B is read through a view, not from the kernel's argument"
    ty = ref.type
    assert isinstance(ty, MemRefType)
    shape = tuple(ty.get_shape())
    if len(shape) != 2:
        return f"B's memref is of rank {len(shape)}; a batched B is not transposed first"
    layout = ty.layout
    if not isinstance(layout, NoneAttr) and not (isinstance(layout, StridedLayoutAttr)
                                                 and tuple(layout.get_strides()) == row_major(shape)
                                                 and layout.get_offset() in (0, None)):
        return "B's memref is not row-major and contiguous"
    if shape[0] % 16 or shape[1] % 16:
        return f"B's memref is {shape[0]} x {shape[1]}; its sizes must be multiples of 16"
    grid = transpose_kernel.launch(*shape)[0]
    if any(g > limit for g, limit in zip(grid, GRID_LIMITS)):
        return f"the transposing kernel's grid {grid} of a {shape[0]} x {shape[1]} B exceeds {GRID_LIMITS}"
    return ""


def _workspace_type(b: MemRefType) -> MemRefType:
    """B's K-major copy: its K x N elements, K contiguous."""
    k, n = b.get_shape()
    return MemRefType(b.element_type, [k, n], StridedLayoutAttr([1, k]))


def rewrite(kernel: func.FuncOp, g: GemmKernel) -> None:
    """Give `kernel` B's K-major workspace as its last argument and load the mma's B from it."""
    load = b_load(g)
    source = load.source
    assert isinstance(source, BlockArgument) and isinstance(source.type, MemRefType)
    block = kernel.body.block
    workspace = block.insert_arg(_workspace_type(source.type), len(block.args))
    workspace.name_hint = "transposed_b"
    kernel.function_type = func.FunctionType.from_lists([a.type for a in block.args], [])
    if kernel.arg_attrs is not None:
        kernel.arg_attrs = ArrayAttr([*kernel.arg_attrs.data, DictionaryAttr({})])
    Rewriter.replace_op(load, tile.LoadOp(workspace, list(load.offset_values()), load.result.type))  # type: ignore[arg-type]
    kernel.attributes[tile.TRANSPOSE_FIRST] = DenseArrayBase.from_list(i64, [source.index, workspace.index])


def wanted(kernel: func.FuncOp, g: GemmKernel) -> bool:
    """The automatic rule: `tile-plan` would transpose B in shared memory, the kernel has enough
    rows, and the rewritten kernel is planned for the warpgroups."""
    if g.m < configs.TRANSPOSE_FIRST_MIN_ROWS:
        return False
    try:
        if plan(kernel, g, None, None).transpose != "b":
            return False
        trial = kernel.clone()
        rewrite(trial, read_kernel(trial))
        return plan(trial, read_kernel(trial), None, None).mma == "wgmma"
    except LoweringError:
        return False  # (tile-plan reports what it cannot take)


@dataclass(frozen=True)
class TileTransposeFirst(ModulePass):
    """Transpose each kernel's 8-bit N-major B first, by a kernel of its own (see the module)."""

    name = "tile-transpose-first"

    transpose_first: int = -1
    tune_cache: str = ""  # tile-plan's: a kernel it holds a configuration for is left as it is (-1)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.transpose_first not in (-1, 0, 1):
            raise ValueError(f"tile-transpose-first: transpose-first is -1 (automatic), 0 (never) or 1, "
                             f"got {self.transpose_first!r}")
        if self.transpose_first == 0:
            return
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            if not any(isinstance(o, tile.MMA_OPS) for o in kernel.walk()) or tile.transpose_first(kernel):
                continue
            try:
                g = read_kernel(kernel)
            except LoweringError:
                continue  # (tile-plan reports it)
            reason = why_not(kernel, g)
            if reason:
                if self.transpose_first == 1:
                    raise LoweringError(g.mma, f"transpose-first: B cannot be transposed first: {reason}")
                continue
            if self.transpose_first == 1 or (tuned_config(kernel, g.mma, self.tune_cache) is None
                                             and wanted(kernel, g)):
                rewrite(kernel, g)


def workspace_roles(kernel: func.FuncOp, args: list[SSAValue], roles: dict[SSAValue, list[str]]) -> None:
    """B's argument and its workspace's roles (`args`: the kernel's arguments, keys of `roles`) in a
    kernel `rewrite` left (`tile-distribute`): the caller's B is the b the transposing kernel
    reads, the workspace the GEMM's (scratch)."""
    pair = tile.transpose_first(kernel)
    if pair is None:
        return
    source, workspace = (args[i] if 0 <= i < len(args) else None for i in pair)
    ref = source.type if source is not None else None
    if not (isinstance(ref, MemRefType) and workspace is not None and len(ref.get_shape()) == 2
            and workspace.type == _workspace_type(ref)):
        raise LoweringError(kernel, f"{tile.TRANSPOSE_FIRST} = {list(pair)}: expected the indices of an argument "
                                    "holding a K x N B and of its K-major copy, memref<KxN, strided<[1, K]>> "
                                    "(what tile-transpose-first writes)")
    roles[workspace][:] = [r for r in roles[workspace] if r != "b"] + ["transposed_b"]
    if "b" not in roles[source]:
        roles[source].append("b")
