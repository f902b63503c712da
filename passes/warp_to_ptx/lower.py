"""`warp-to-ptx`: lowers warp-level kernels to one `ptx.module`, one small pattern per op.

PTX registers are names, not SSA values, so while the patterns run, each lowered value is
replaced by a `ptx.regs` op that names its registers (or holds an immediate); a pattern fires
once its operands are in registers and puts the PTX for its op in front of it. Index arithmetic
(`arith`) is 32-bit; a fragment's registers come from its type's layout. `scf.for` becomes a
loop with the `iter_args` in registers: an accumulator used by exactly one `warp.mma` is updated
in place, so the loop needs no copies. Once a kernel holds only PTX, it becomes a `ptx.entry`
that keeps the launch shape and the argument ABI; all kernels of a target share one module.

This module is the pass: the kernel's preamble (parameters, lane id), the patterns in the order
they are tried, and the entry with its ABI. The patterns live by concern: `state` (what they
share), `index` (arith, ids, scf), `fragment_ops` (fragments in registers and global memory),
`sparse_a` (sparse A and its metadata), `shared` (shared memory), `fill` (the transposing
fill), `rows` (an accumulator read by rows or as the next A), with the PTX emission helpers
in `fragment_io`.
"""

from __future__ import annotations

import re

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, IntegerAttr, MemRefType, ModuleOp, StringAttr, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from tilemma.compiler.runtime.abi import size_param, symbol_order, tensor_map_record
from tilemma.compiler.runtime.tensor_map import MAP_BYTES
from tilemma.dialects import ptx, tile, warp
from tilemma.dialects.ptx_builder import RegisterFile
from tilemma.dialects.schedule import ScheduleAttr
from tilemma.passes.tile.plan import kernel_target
from tilemma.passes.errors import LoweringError
from tilemma.passes.rewriting import TypedPatternApplier, TypedPatternWalker
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx import transpose_kernel
from tilemma.passes.warp_to_ptx.elementwise import LowerCast, LowerMap
from tilemma.passes.warp_to_ptx.fill import LowerFillLoad, LowerFillStore
from tilemma.passes.warp_to_ptx.mbarrier import (
    LowerAsyncArrive, LowerMbarrierArrive, LowerMbarrierInit, LowerMbarrierWait, LowerRetire, LowerSetMaxRegisters,
)
from tilemma.passes.warp_to_ptx.fragment_ops import (
    LowerFragConstant,
    LowerLoad,
    LowerMma,
    LowerScale,
    LowerSplitTf32,
    LowerStore,
    LowerColumnPairs,
    LowerRowPairs,
    LowerWiden,
)
from tilemma.passes.warp_to_ptx.index import (
    LowerArith,
    LowerCmpi,
    LowerConstant,
    LowerDim,
    LowerFor,
    LowerId,
    LowerIf,
    LowerReturn,
    LowerTransposeView,
)
from tilemma.passes.warp_to_ptx.shared import (
    LowerAsyncGroups,
    LowerCopyAsync,
    LowerLdMatrix,
    LowerLoadShared,
    LowerRoundStage,
    LowerSharedAlloc,
)
from tilemma.passes.warp_to_ptx.staged_stores import LowerStoreStaged
from tilemma.passes.warp_to_ptx.transpose_stage import LowerTransposeStage
from tilemma.passes.warp_to_ptx.rows import LowerMask, LowerRowReduce, LowerToLhs
from tilemma.passes.warp_to_ptx.split_k import LowerSplitKPublish, LowerSplitKSum
from tilemma.passes.warp_to_ptx.sparse_a import LowerCopyMetaAsync, LowerLoadMeta, LowerLoadMetaShared, LowerSparseA
from tilemma.passes.warp_to_ptx.state import _PTX_OPS, SHARED_SYMBOL, LoweringState, _Kernel
from tilemma.passes.warp_to_ptx.tma import LowerClusterSync, LowerCopyTma, LowerMbarrierArrivePeers, LowerMbarrierExpectTx
from tilemma.passes.warp_to_ptx.wgmma import LowerWgmma, LowerWgmmaWait
from tilemma.passes.warp.unroll_sparse import meta_overwritten


# What PTX can spell as a kernel or parameter name (PTX ISA "Identifiers", without the `%` and
# `$` forms, which MLIR symbol names cannot carry portably: a letter then letters, digits and _,
# or _ then at least one of them): a name goes into the PTX text and, for `--emit cubin` without
# `-o`, into a file name, so anything else is refused, not escaped. WARP_SZ is a predefined
# identifier, which ptxas refuses as a name.
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+")
_PREDEFINED = ("WARP_SZ",)


def _check_names(kernel: func.FuncOp) -> None:
    """A located error for a kernel or argument name PTX cannot spell (a newline would inject
    PTX; a `/` would put a file elsewhere)."""
    name = kernel.sym_name.data
    if not _IDENTIFIER.fullmatch(name) or name in _PREDEFINED:
        what = "PTX's predefined identifier" if name in _PREDEFINED else "not a PTX identifier"
        raise LoweringError(kernel, f"kernel name {name!r} is {what} (letters, digits and _, starting with a "
                                    f"letter, or with _ and more): rename the func.func")
    for i, arg in enumerate(kernel.body.block.args):
        if arg.name_hint is not None and not _IDENTIFIER.fullmatch(arg.name_hint):
            raise LoweringError(kernel, f"argument {i} is named %{arg.name_hint}, which PTX cannot spell as a "
                                        f"parameter (letters, digits and _): rename it")


def _param_name(arg: SSAValue, index: int) -> str:
    return f"p_{arg.name_hint or f'arg{index}'}"


def _abi(kernel: func.FuncOp) -> list[DictionaryAttr]:
    attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
    out = []
    for i, arg in enumerate(kernel.body.block.args):
        entry = {"name": StringAttr(_param_name(arg, i)), "type": arg.type}
        if i < len(attrs):
            entry |= {k.removeprefix("warp."): v for k, v in attrs[i].data.items()}
        out.append(DictionaryAttr(entry))
    return out


@dataclass(frozen=True)
class WarpToPtx(ModulePass):
    """Lower every warp-level kernel (`func.func` with `warp.grid`) to PTX."""

    name = "warp-to-ptx"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels = [k for k in op.body.ops if isinstance(k, func.FuncOp) and "warp.grid" in k.attributes]
        for k in op.body.ops:
            if isinstance(k, func.FuncOp) and k not in kernels and any(
                o.dialect_name() in ("tile", "warp") for o in k.walk()
            ):
                raise LoweringError(k, "run tile-select-mma and tile-to-warp (tile-plan, tile-distribute, ...) before warp-to-ptx")
        if not kernels:
            return
        for k in kernels:
            _check_names(k)
        for k in kernels:  # (at the kernel: the loop is a pass's, with no source line)
            if any(isinstance(o, scf.ForOp) and meta_overwritten(o) for o in k.walk()):
                raise LoweringError(k, "run warp-unroll-sparse before warp-to-ptx (a loop's next stage would load "
                                       "metadata or A fragments into the registers of a warp.wgmma that still runs)")
        for mma in (o for k in kernels for o in k.walk() if isinstance(o, warp.MmaOp)):
            if mma.split_tf32 is not None:
                raise LoweringError(mma, "run warp-split-tf32 before warp-to-ptx (3xTF32 mmas)")
        state = LoweringState()
        abis = {k: _abi(k) for k in kernels}
        for k in kernels:
            state.kernels[k] = self._preamble(k)
        TypedPatternWalker(
            TypedPatternApplier([
                LowerConstant(), LowerArith(state), LowerCmpi(state), LowerDim(state), LowerTransposeView(state), LowerId(state), LowerFor(state), LowerIf(state),
                LowerFragConstant(state), LowerLoad(state), LowerStore(state), LowerSparseA(state),
                LowerScale(state), LowerSplitTf32(state), LowerWiden(state), LowerColumnPairs(state), LowerRowPairs(state), LowerMma(state), LowerReturn(state),
                LowerSharedAlloc(state), LowerCopyAsync(state), LowerAsyncGroups(), LowerRoundStage(state), LowerLdMatrix(state),
                LowerLoadMeta(state), LowerCopyMetaAsync(state), LowerLoadMetaShared(state), LowerLoadShared(state), LowerMap(state), LowerCast(state),
                LowerSplitKPublish(state), LowerSplitKSum(state), LowerFillLoad(state), LowerFillStore(state),
                LowerRowReduce(state), LowerMask(state), LowerToLhs(state), LowerWgmma(state), LowerWgmmaWait(state),
                LowerMbarrierInit(state), LowerMbarrierArrive(state), LowerAsyncArrive(state), LowerMbarrierWait(state), LowerRetire(state),
                LowerSetMaxRegisters(), LowerCopyTma(state), LowerMbarrierExpectTx(state),
                LowerMbarrierArrivePeers(state), LowerClusterSync(), LowerStoreStaged(state), LowerTransposeStage(state),
            ]),
        ).rewrite_module(op)
        modules: dict[tuple[str, str], ptx.ModuleOp_] = {}
        for k in kernels:
            entry = self._entry(k, state.kernels[k], abis[k])
            target = k.attributes["warp.target"]
            assert isinstance(target, warp.TargetAttr)
            key = (target.sm.data, target.ptx.data)
            if key not in modules:
                modules[key] = ptx.ModuleOp_(key[1], key[0], [])
                op.body.block.insert_op_before(modules[key], k)
            first = tile.transpose_first(k)
            if first is not None:  # (`tile-transpose-first`: B's transposing kernel, launched first)
                prologue = _transpose_first(k, *first)
                modules[key].body.block.add_op(prologue[0])
                entry.prologue = ArrayAttr([prologue[1]])
            modules[key].body.block.add_op(entry)
            k.detach()
            k.erase()

    @staticmethod
    def _preamble(kernel: func.FuncOp) -> _Kernel:
        """Parameters into global pointers, and the lane id: the registers every pattern uses."""
        state = _Kernel(RegisterFile(), "")
        e = fio.Emitter(state.regs)
        block = kernel.body.block
        bound = []
        for i, arg in enumerate(block.args):
            r = e.reg("b64")
            e.emit("ld.param.u64", r, f"[{_param_name(arg, i)}]")
            e.emit("cvta.to.global.u64", r, r)
            bound.append(ptx.RegsOp([r], arg.type))
            state.args[r] = (i, _param_name(arg, i))
        sizes, strides = _symbols(kernel)
        registers = {}
        for symbol in symbol_order(sizes, strides):
            registers[symbol] = e.reg("b32")
            e.emit("ld.param.u32", registers[symbol], f"[{size_param(symbol)}]")
        multiple = tile.stride_multiple(kernel)
        for b, row, srow in zip(bound, sizes, strides):
            if any(row) or any(srow):
                state.memrefs[b.regs.data[0].data] = fio.Symbols(
                    tuple(registers.get(x) for x in row), tuple(registers.get(x) for x in srow), multiple)
        state.lane = e.reg("b32")
        e.emit("mov.u32", state.lane, "%laneid")
        first = block.first_op
        assert first is not None
        threads = kernel.attributes["warp.block"]
        tiling = _tiling(kernel)
        mma = next((o for o in kernel.walk() if isinstance(o, warp.MmaOp | warp.WgmmaOp)), None)
        if mma is None:
            raise LoweringError(kernel, "warp-to-ptx: a kernel has no warp.mma (its instruction names the kernel's "
                                "configuration and ABI); nothing to lower a GEMM kernel from")
        variant = (mma.c if isinstance(mma, warp.MmaOp) else mma.accs[0]).type.variant  # type: ignore[union-attr]
        opcode = (variant.opcode if isinstance(mma, warp.MmaOp)
                  else f"wgmma.mma_async m64n{mma.n}k{mma.k_step} on {variant.opcode} accumulators")
        gx, gy, gz = _grid_text(kernel)
        config = ""
        if tiling is not None:
            (wm, wn), (rm, rn), stages, stage_k = tiling
            config = (f"; warps {wm}x{wn}, warp tile {rm}x{rn} instructions"
                      + (f", {stages} shared-memory stages of K {stage_k}" if stages else ""))
        e.ops.insert(0, ptx.CommentOp(
            f"{opcode}: grid ({gx}, {gy}, {gz}), block ({threads.get_values()[0]}, 1, 1)"  # type: ignore[union-attr]
            + config))
        for new in [*e.ops, *bound]:
            block.insert_op_before(new, first)
        state.entry = e.ops[-1]
        for arg, b in zip(list(block.args), bound):
            arg.replace_all_uses_with(b.result)
        return state

    @staticmethod
    def _entry(kernel: func.FuncOp, state: _Kernel, abi: list[DictionaryAttr]) -> ptx.EntryOp:
        block = kernel.body.block
        left = [o for o in block.ops if not isinstance(o, _PTX_OPS)]
        if left:
            raise LoweringError(left[0], f"warp-to-ptx: {left[0].name} has no lowering to PTX")
        body = [o for o in block.ops if not isinstance(o, ptx.RegsOp)]
        for o in body:
            o.detach()
        grid = tuple(kernel.attributes["warp.grid"].get_values())  # type: ignore[union-attr]
        threads = tuple(kernel.attributes["warp.block"].get_values())  # type: ignore[union-attr]
        params = [f".u64 {_param_name(a, i)}" for i, a in enumerate(block.args)]
        params += [f".u32 {size_param(x)}" for x in symbol_order(*_symbols(kernel))]
        params += [f".align 64 .b8 {name}[{MAP_BYTES}]" for name in state.tensor_maps]  # (after the sizes)
        shared = [ptx.SharedOp(SHARED_SYMBOL, state.shared_align)] if state.shared_bytes else []
        region = Region(Block([*shared, *state.regs.declarations(), *body]))
        entry = ptx.EntryOp(kernel.sym_name.data, params, region, threads[0], (grid, threads), abi)
        if state.shared_bytes:
            entry.shared_bytes = IntegerAttr(state.shared_bytes, 64)
        schedule = kernel.attributes.get("warp.schedule")
        if isinstance(schedule, ScheduleAttr):
            if schedule.schedule.cluster > 1:
                entry.cluster = IntegerAttr(schedule.schedule.cluster, 64)
            if schedule.schedule.persistent:
                entry.persistent = IntegerAttr(schedule.schedule.persistent, 64)
        if state.tensor_maps:
            entry.tensor_maps = ArrayAttr([tensor_map_record(m) for m in state.tensor_maps.values()])
        min_ctas = kernel.attributes.get("warp.min_ctas")
        if isinstance(min_ctas, IntegerAttr):
            entry.min_ctas = min_ctas
        # a kernel whose warpgroups move registers (setmaxnreg) states the count they start from:
        # ptxas cannot work it out where the file would give a thread more than it can hold (a
        # 256-thread CTA: C7508, setmaxnreg ignored), and the CTA's register pool is reckoned from it
        if any(isinstance(o, ptx.InstOp) and o.opcode.data.startswith("setmaxnreg") for o in body):
            entry.max_registers = IntegerAttr(kernel_target(kernel).limits.launch_registers(threads[0]), 64)
        grid_sizes = kernel.attributes.get("warp.grid_sizes")
        if isinstance(grid_sizes, ArrayAttr):
            entry.grid_sizes = grid_sizes
        if any(any(row) for rows in _symbols(kernel) for row in rows):
            entry.stride_multiple = IntegerAttr(tile.stride_multiple(kernel), 64)
            entry.size_multiple = DenseArrayBase.from_list(i64, list(tile.size_multiple(kernel)))
        tiling = _tiling(kernel)
        if tiling is not None:
            splits = kernel.attributes["warp.schedule"].schedule.split_k  # type: ignore[union-attr]
            entry.tiling = DenseArrayBase.from_list(i64, [v for part in tiling for v in (
                part if isinstance(part, tuple) else (part,))] + ([splits] if splits > 1 else []))
        return entry


def _transpose_first(kernel: func.FuncOp, source: int, workspace: int) -> tuple[ptx.EntryOp, DictionaryAttr]:
    """The kernel that transposes `kernel`'s N-major B (argument `source`) into its K-major
    workspace (`workspace`), and the prologue record that names it."""
    args = kernel.body.block.args
    k, n = args[source].type.get_shape()  # type: ignore[union-attr]
    name = f"{kernel.sym_name.data}_transpose_b"
    entry = transpose_kernel.transpose_entry(name, k, n, _param_name(args[source], source),
                                             _param_name(args[workspace], workspace))
    grid, block = transpose_kernel.launch(k, n)
    return entry, DictionaryAttr({
        "entry": StringAttr(name), "grid": DenseArrayBase.from_list(i64, list(grid)),
        "block": DenseArrayBase.from_list(i64, list(block)),
        "args": DenseArrayBase.from_list(i64, [source, workspace])})


def _grid_text(kernel: func.FuncOp) -> list[str]:
    """Each grid axis as the PTX comment shows it: a count, or e.g. `ceil(N/128)`."""
    grid = kernel.attributes["warp.grid"].get_values()  # type: ignore[union-attr]
    sizes = kernel.attributes.get("warp.grid_sizes")
    if not isinstance(sizes, ArrayAttr):
        return [str(g) for g in grid]
    out = []
    for axis in sizes.data:
        count, *factors = axis.data  # type: ignore[attr-defined]
        parts = ([str(count.value.data)] if count.value.data != 1 or not factors else []) + [
            f"ceil({f.data[0].data}/{f.data[1].value.data})" for f in factors]
        out.append("*".join(parts))
    return out


def _symbols(kernel: func.FuncOp) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Per argument, the symbols of its `?` sizes and strides (`warp.sizes`, `warp.strides`,
    which tile-distribute writes; "" where static)."""
    attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
    sizes, strides = [], []
    for i, arg in enumerate(kernel.body.block.args):
        d = attrs[i].data if i < len(attrs) else {}
        rank = len(arg.type.get_shape()) if isinstance(arg.type, MemRefType) else 0
        for out, key in ((sizes, "warp.sizes"), (strides, "warp.strides")):
            value = d.get(key)
            out.append(tuple(x.data for x in value.data) if isinstance(value, ArrayAttr) else ("",) * rank)
    return sizes, strides


def _tiling(kernel: func.FuncOp) -> tuple[tuple[int, int], tuple[int, int], int, int] | None:
    """Warps, warp tile, stages and stage K of a GEMM kernel's `#warp.schedule` (None for a
    kernel without one: attention, whose schedule `tile-attention` fixes)."""
    attr = kernel.attributes.get("warp.schedule")
    if not isinstance(attr, ScheduleAttr):
        return None
    s = attr.schedule
    return s.warps, s.warp_tile, s.stages, s.stage_k if s.stages else 0
