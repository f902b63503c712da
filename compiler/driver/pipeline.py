"""The whole compiler as one call: tile IR text -> verified IR -> passes -> PTX per kernel.

Used by `tilemma compile` and `tilemma run`; `tilemma-opt` runs the same passes one by one. Every
error that is the input's fault comes out as a `LocatedVerifyError` pointing at the source.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass, PassPipeline
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from tilemma.compiler.core import collector, configs
from tilemma.compiler.runtime.abi import SCRATCH_ROLES, KernelABI
from tilemma.compiler.core.isa import MmaVariant
from tilemma.compiler.driver.files import EMPTY_STDIN
from tilemma.compiler.driver.diagnostics import LocatedParser, LocatedVerifyError, check_input, verify_located
from tilemma.compiler.driver.instrument import PassInstrument
from tilemma.compiler import universe
from tilemma.dialects import ptx, tile
from tilemma.passes.errors import LoweringError, origin
from tilemma.passes.tile.gemm_kernel import GemmKernel, read_kernel
from tilemma.passes.tile.attention import TileAttention
from tilemma.passes.tile.attention_kernel import AttentionKernel, is_attention, read_attention
from tilemma.passes.tile.linalg_to_tile import LinalgToTile
from tilemma.passes.tile.select_mma import SelectMma
from tilemma.passes.warp.split_tf32 import SplitTf32
from tilemma.passes.warp.stage_stores import WarpStageStores
from tilemma.passes.warp.swizzle_shared import SwizzleShared
from tilemma.passes.tile.plan import TilePlan
from tilemma.passes.tile_to_warp import chain
from tilemma.passes.warp_to_ptx.lower import WarpToPtx


def make_context() -> Context:
    """The same dialects as `tilemma-opt` (`universe.make_context`)."""
    return universe.make_context()


@dataclass(frozen=True)
class CompileOptions:
    sm: str = "90"
    ptx: str = ""
    f32_precision: str = "exact"
    allow_slow: bool = False
    warps: str = ""
    warp_tile: str = ""
    sparse_form: str = "ordered"
    stages: int = -1
    stage_k: int = 0
    split_k: int = 0  # CTAs sharing an output tile's K: 0 automatic, 1 none, N at most N (`tile-plan`)
    swizzle: bool = True
    # warpgroup kernels' accumulators stored through a warp's staging buffer, as whole rows (`warp-stage-stores`)
    staged_stores: bool = True
    # an M-major 8-bit A or N-major B read by byte-pair ldmatrix .trans (True) or transposed by the
    # fill (`tile-plan`)
    pair_bytes: bool = True
    # each stage multiplied by warpgroups' wgmma.mma_async (sm_90a, `tile-plan`)
    wgmma: bool = False
    # an 8-bit N-major B of a warpgroup kernel transposed in shared memory by a producer warpgroup
    # (True, where it can) or by the fill through registers (`tile-plan`)
    shared_transpose: bool = True
    # an 8-bit N-major B transposed into a K-major workspace by a kernel of its own, launched first:
    # -1 automatic, 0 never, 1 where it can (`tile-transpose-first`)
    transpose_first: int = -1
    # a producer warpgroup that fills the stages of a wgmma kernel: -1 automatic, 0 none, 4 (`tile-plan`)
    producers: int = -1
    # that producer warpgroup's copies of A's and B's stages by the TMA: -1 automatic, 0 cp.async, 1 (`tile-plan`)
    tma: int = -1
    # its CTAs in clusters that share B's stages: -1 automatic, 1 none, 2 (`tile-plan`)
    cluster: int = -1
    # those TMA kernels' CTAs looping over the tiles: -1 automatic, 0 none, N CTAs (`tile-plan`)
    persistent: int = -1
    tune_cache: str = field(default_factory=configs.default_cache)
    # what kernels with `?` sizes may assume of them (`tile.stride_multiple`; 0: what the IR says)
    stride_multiple: int = 0
    size_multiple: str = ""  # "MxNxK": ... and of its `?` sizes (`tile.size_multiple`)
    plan_sizes: str = ""  # "MxNxK": the sizes to configure a kernel with `?` sizes for (`tile.plan_sizes`)
    # attention kernels (`tile-attention`; 0 / "": the head dim's default)
    attention_rows: int = 0  # query rows a warp: 16 or 32
    attention_block_n: int = 0  # key rows a block: 32, 64 or 128
    attention_q_shared: str = ""  # "yes": Q staged in shared memory, "no": in registers
    attention_ctas: int = 0  # CTAs an SM is to hold at once (.minnctapersm), 1..8

    def passes(self) -> list[ModulePass]:
        return [
            LinalgToTile(),  # linalg.matmul input; a no-op on tile IR
            SelectMma(self.sm, self.ptx, self.f32_precision, self.allow_slow, self.sparse_form),
            # attention kernels (tile.softmax); a no-op on the others
            TileAttention(self.attention_rows, self.attention_block_n, self.attention_q_shared, self.attention_ctas),
            *chain(TilePlan(self.warps, self.warp_tile, self.stages, self.stage_k, self.tune_cache, self.split_k,
                            self.pair_bytes, self.wgmma, self.producers, self.tma, self.cluster,
                            self.persistent, self.shared_transpose), self.transpose_first),
            *([WarpStageStores()] if self.staged_stores else []),
            *([SwizzleShared()] if self.swizzle else []),
            SplitTf32(),
            CommonSubexpressionElimination(),
            WarpToPtx(),
        ]


@dataclass(frozen=True)
class CompiledKernel:
    name: str
    ptx: str  # a complete PTX module holding this kernel (and the others of the same input)
    variant: str
    abi: KernelABI
    gemm: GemmKernel | AttentionKernel  # what the kernel computes, read from the tile IR before lowering
    scalars: tuple[int, ...] = ()  # bound from `?` sizes (`runner.bind_sizes`): the size parameters

    @property
    def instruction(self) -> MmaVariant:
        """The selected mma variant (from the tile op's typed attribute)."""
        mma = self.gemm.mma_s if isinstance(self.gemm, AttentionKernel) else self.gemm.mma
        return mma.variant.variant  # type: ignore[union-attr]

    @property
    def grid(self) -> tuple[int, int, int]:
        return self.abi.grid

    @property
    def block(self) -> tuple[int, int, int]:
        return self.abi.block

    @property
    def arg_sizes(self) -> tuple[int, ...]:
        """Elements of each memref argument, in order (without the sparsity error word)."""
        return tuple(p.span for p in self.abi.params if not {"sparsity_error", *SCRATCH_ROLES} & set(p.roles))


def parse(text: str, name: str) -> tuple[ModuleOp, dict]:
    """Parse and verify tile IR, keeping each operation's source position."""
    if not text.strip():
        raise ValueError(f"{name}: empty input: expected MLIR operations{EMPTY_STDIN if name == '<stdin>' else ''}")
    check_input(text, name)
    parser = LocatedParser(make_context(), text, name)
    module = parser.parse_module()
    verify_located(module, parser.locations)
    return module, parser.locations


def _apply(passes: list[ModulePass], module: ModuleOp, locations: dict,
           instrument: PassInstrument | None = None) -> None:
    """Run `passes` and verify the result; `instrument` times them, dumps the IR and, with its
    `verify` (`--verify-each`), verifies after every pass. Verifying after each pass costs about
    40% of a compile, and what it catches is a pass's bug, not the input's: tilemma-opt, the
    tool for looking at the passes, keeps it on (as mlir-opt), the compiler asks for it."""
    observe = instrument or PassInstrument()

    def callback(previous: ModulePass | None, op: ModuleOp, next_: ModulePass | None) -> None:
        observe(previous, op, next_)
        if previous is not None and next_ is None and observe.verify is None:
            op.verify()

    try:
        PassPipeline(tuple(passes), callback).apply(make_context(), module)
    except LoweringError as e:
        raise LocatedVerifyError(locations.get(origin(e.op)), e.message) from None


def lower(module: ModuleOp, locations: dict, options: CompileOptions, warp_level: bool = False,
          instrument: PassInstrument | None = None) -> None:
    """Run the pipeline in place: tile IR in, a ptx.module per target out (or, with
    `warp_level`, the kernels at the warp level, ready for warp-to-ptx)."""
    passes = options.passes()
    _apply(passes[:-1] if warp_level else passes, module, locations, instrument)


@collector.paused()  # a compile allocates much and frees little until it ends
def compile_text(text: str, name: str, options: CompileOptions,
                 instrument: PassInstrument | None = None) -> list[CompiledKernel]:
    module, locations = parse(text, name)
    return compile_module(module, locations, name, options, instrument)


@collector.paused()  # a compile allocates much and frees little until it ends
def compile_module(module: ModuleOp, locations: dict, name: str, options: CompileOptions,
                   instrument: PassInstrument | None = None) -> list[CompiledKernel]:
    """Lower a verified module in place (`locations`: where its ops were written, possibly empty)."""
    passes = options.passes()
    front = next(i for i, p in enumerate(passes) if isinstance(p, SelectMma)) + 1
    select, rest = passes[:front], passes[front:]
    _apply(select, module, locations, instrument)  # first: linalg-to-tile refuses gpu.func kernels
    kernels = [op for op in module.body.ops if isinstance(op, func.FuncOp)]
    if not kernels:
        raise ValueError(f"{name}: no kernel (func.func) in the input")
    for k in kernels:
        if k.is_declaration:
            raise LocatedVerifyError(locations.get(origin(k)), f"func.func @{k.sym_name.data} has no body: a kernel "
                                     "is compiled from its body (a declaration is not a kernel)")
    if options.plan_sizes:
        sizes = [int(x) for x in options.plan_sizes.lower().split("x")]
        for k in kernels:
            k.attributes[tile.PLAN_SIZES] = DenseArrayBase.from_list(i64, sizes)
    for k in kernels:  # the dispatcher's specialisation, as the attributes the passes read
        if options.stride_multiple:
            k.attributes[tile.STRIDE_MULTIPLE] = IntegerAttr(options.stride_multiple, 64)
        if options.size_multiple:
            k.attributes[tile.SIZE_MULTIPLE] = DenseArrayBase.from_list(
                i64, [int(x) for x in options.size_multiple.lower().split("x")])
    described = {}
    for k in kernels:  # what each kernel computes (after selection's casts), for the reference
        try:
            described[k.sym_name.data] = read_attention(k) if is_attention(k) else read_kernel(k)
        except LoweringError as e:
            raise LocatedVerifyError(locations.get(origin(e.op)), e.message) from None
    _apply(rest, module, locations, instrument)
    compiled = []
    for pm in module.body.ops:
        if not isinstance(pm, ptx.ModuleOp_):
            continue
        out = io.StringIO()
        ptx.print_module(pm, out)
        entries = list(pm.body.ops)
        # the kernels others launch first (`ptx.entry` prologue) are parts of those, not kernels of their own
        first = {r.data["entry"].data for e in entries if isinstance(e, ptx.EntryOp) and e.prologue is not None  # type: ignore[union-attr]
                 for r in e.prologue.data}
        for entry in entries:
            assert isinstance(entry, ptx.EntryOp)
            if entry.sym_name.data in first:
                continue
            abi = KernelABI.from_entry(entry)
            compiled.append(CompiledKernel(entry.sym_name.data, out.getvalue(), abi.instruction, abi, described[abi.name]))
    return compiled
