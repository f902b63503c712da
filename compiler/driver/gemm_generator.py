"""Writes the tile IR of a GEMM kernel: the `tilemma gemm` quick start and the tests' generator.

The kernel computes D = A x B + C over whole memrefs (rank 3 with `batch`, where `bcast` makes
one operand a batch of 1 that broadcasts). Types without a storage format (tf32) are loaded as
their storage type and converted with `tile.cast`, as a user would write it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.rewriter import InsertPoint
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, MemRefType, ModuleOp, Signedness, StridedLayoutAttr
from xdsl.ir import Block, Region, SSAValue

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.dialects import tile


@dataclass(frozen=True)
class GemmSpec:
    m: int
    n: int
    k: int
    a: str
    b: str
    acc: str | None = None  # None: the matmul result type of `a` x `b`
    batch: int | None = None
    bcast: str | None = None  # "a" or "b": that operand is a batch of 1
    satfinite: bool = False
    popc: str | None = None
    shape: str | None = None  # instruction shape hint for tile-select-mma, e.g. "m16n8k8"
    sparse_a: bool = False  # A is structured sparse (tile.compress before the mma)
    prune: bool = False  # with sparse_a: tile.compress {prune} keeps the largest magnitudes
    scale: str | None = None  # block scaling: scale type (ue8m0 / f8E8M0FNU, ue4m3)
    scale_block: int = 32  # with scale: elements of K per scale factor
    sparse_pattern: str | None = None  # with sparse_a: "4:8" for pair-wise e2m1 (mxf4 kinds)
    b_layout: str = "row"  # "col": B is stored K-major (column-major, strided<[1, K]>)
    pre_compressed: bool = False  # A arrives compressed: tile.sparse_from values, metadata
    c: bool = True  # False: D = A x B, no C argument (the accumulator starts at zero)
    rounding: str = "rna"  # how f32 operands of a tf32 GEMM are rounded (rn and rz: sm_90)

    @property
    def name(self) -> str:
        batch = f"b{self.batch}{self.bcast or ''}_" if self.batch else ""
        shape = f"_{self.shape}" if self.shape else ""
        sparse = ("_pruned" if self.prune else "_sparse") if self.sparse_a else ""
        if self.pre_compressed:
            sparse = "_precompressed"
        if self.scale:
            sparse += f"_scaled{self.scale_block}"
        layout = "_bcol" if self.b_layout == "col" else ""
        forms = ("" if self.c else "_noc") + ("" if self.rounding == "rna" else f"_{self.rounding}")
        return (
            f"gemm{sparse}_{batch}{self.m}x{self.n}x{self.k}_{self.a}_{self.b}{layout}_{self.acc_type}"
            f"{forms}{shape}"
        )

    @property
    def acc_type(self) -> str:
        if self.acc is not None:
            return self.acc
        cls = tile.ELEMENT_CLASSES[tile.OPERAND_ELEMENTS[tile.canonical_element(self.a)]]
        if cls.matmul_result is None:
            return cls.accumulators[0]
        return cls.matmul_result


def _shape(spec: GemmSpec, rows: int, cols: int, operand: str) -> tuple[int, ...]:
    if spec.batch is None:
        return (rows, cols)
    return (1 if spec.bcast == operand else spec.batch, rows, cols)


def _pre_compressed_args(spec: GemmSpec, a_shape, a_name: str, names, arg_types):
    """A's argument replaced by the values and metadata memrefs of `tile.sparse_from`."""
    from tilemma.compiler.layouts import sparse_format

    if spec.sparse_a or spec.prune or spec.scale:
        raise ValueError("a pre-compressed A (--sparse-a compressed) takes no --prune or --scale")
    if a_name not in tile.PRE_COMPRESSED:
        raise ValueError(f"--sparse-a compressed takes {' or '.join(tile.PRE_COMPRESSED)} A, not {a_name}")
    *batch, m, k = a_shape
    values = MemRefType(tile.element_type(a_name), [*batch, *sparse_format.values_shape(m, k)])
    meta = MemRefType(IntegerType(32, Signedness.UNSIGNED), [*batch, *sparse_format.meta_shape(m, k)])
    at = names.index("a")
    return (names[:at] + ("a_values", "a_meta") + names[at + 1:],
            arg_types[:at] + [values, meta] + arg_types[at + 1:])


def gemm_module(spec: GemmSpec) -> ModuleOp:
    """Build (and verify) the tile IR module of one GEMM kernel."""
    a_name, b_name = tile.canonical_element(spec.a), tile.canonical_element(spec.b)
    for flag, name in (("--a", a_name), ("--b", b_name)):
        if name not in tile.OPERAND_ELEMENTS:
            use = " (a block-scale type: pass it as --scale)" if name in tile.SCALE_ELEMENTS else ""
            raise ValueError(
                f"{flag} {name} is not a matmul operand type{use}; operands: {', '.join(tile.OPERAND_ELEMENTS)}"
            )
    acc_name = tile.canonical_element(spec.acc_type)
    spec = GemmSpec(**{**spec.__dict__, "a": a_name, "b": b_name, "acc": acc_name})
    if spec.bcast not in (None, "a", "b"):
        raise ValueError(f"--bcast must be 'a' or 'b', got {spec.bcast!r}")
    if spec.bcast and spec.batch is None:
        raise ValueError("--bcast needs --batch")
    shapes = {
        "a": _shape(spec, spec.m, spec.k, "a"),
        "b": _shape(spec, spec.k, spec.n, "b"),
        "c": _shape(spec, spec.m, spec.n, "c"),
    }
    types = {"a": a_name, "b": b_name, "c": acc_name}
    scaled = spec.scale is not None
    if scaled:
        blocks = -(-spec.k // spec.scale_block)
        shapes["sa"] = _shape(spec, spec.m, blocks, "a")
        shapes["sb"] = _shape(spec, blocks, spec.n, "b")
        types["sa"] = types["sb"] = tile.canonical_element(spec.scale)

    if spec.rounding not in tile.ROUNDING_MODES:
        raise ValueError(f"--rounding must be one of {', '.join(tile.ROUNDING_MODES)}, got {spec.rounding!r}")
    if spec.rounding != "rna" and "tf32" not in (a_name, b_name):
        raise ValueError(f"--rounding {spec.rounding} rounds f32 operands to tf32; this GEMM has none "
                         f"({a_name} x {b_name})")
    if spec.b_layout not in ("row", "col"):
        raise ValueError(f"--b-layout must be 'row' or 'col', got {spec.b_layout!r}")

    def memref(which: str) -> MemRefType:
        stored = ELEMENTS[types[which]].stored_as
        if which == "b" and spec.b_layout == "col":  # each column of the K x N matrix contiguous
            strides = [1, spec.k] if spec.batch is None else [spec.k * spec.n, 1, spec.k]
            return MemRefType(tile.element_type(stored), shapes[which], StridedLayoutAttr(strides, 0))
        return MemRefType(tile.element_type(stored), shapes[which])

    names = ("a", "b", "sa", "sb", "c", "d") if scaled else ("a", "b", "c", "d")
    if not spec.c:
        names = tuple(n for n in names if n != "c")
    arg_types = [memref("c" if n == "d" else n) for n in names]
    if spec.pre_compressed:
        names, arg_types = _pre_compressed_args(spec, shapes["a"], a_name, names, arg_types)
    block = Block(arg_types=arg_types)
    for arg, name in zip(block.args, names):
        arg.name_hint = name
    args = dict(zip(names, block.args))
    builder = Builder(InsertPoint.at_end(block))
    zeros = [0] * len(shapes["a"])

    def load(which: str, value: SSAValue) -> SSAValue:
        stored = ELEMENTS[types[which]].stored_as
        loaded = builder.insert(
            tile.LoadOp(value, zeros, tile.TileType(shapes[which], tile.element_type(stored)))
        ).result
        if stored != types[which]:
            target = tile.TileType(shapes[which], tile.element_type(types[which]))
            loaded = builder.insert(tile.CastOp(loaded, target, rounding=spec.rounding)).result
        loaded.name_hint = f"t{which}"
        return loaded

    if spec.pre_compressed:
        sparse_type = tile.SparseTileType(shapes["a"], tile.element_type(a_name))
        ta = builder.insert(tile.SparseFromOp(args["a_values"], args["a_meta"], sparse_type)).result
        ta.name_hint = "ta"
    else:
        ta = load("a", args["a"])
    tb = load("b", args["b"])
    if spec.c:
        tc = load("c", args["c"])
    else:
        tc = builder.insert(tile.ConstantOp(0, tile.TileType(shapes["c"], tile.element_type(acc_name)))).result
        tc.name_hint = "zero"
    if spec.prune and not spec.sparse_a:
        raise ValueError("--prune needs --sparse-a")
    if spec.sparse_a:
        ta = builder.insert(tile.CompressOp(ta, prune=spec.prune, pattern=spec.sparse_pattern)).result
        ta.name_hint = "sa"
    if scaled:
        sa, sb = load("sa", args["sa"]), load("sb", args["sb"])
        op = tile.ScaledMmaOp(ta, tb, tc, sa, sb, spec.scale_block, mma_shape=spec.shape)
    else:
        op = tile.MmaOp(ta, tb, tc, satfinite=spec.satfinite, popc=spec.popc, mma_shape=spec.shape)
    result = builder.insert(op).result
    result.name_hint = "td"
    builder.insert(tile.StoreOp(result, args["d"], zeros))
    builder.insert(func.ReturnOp())
    kernel = func.FuncOp(spec.name, (arg_types, []), Region(block))
    module = ModuleOp([kernel])
    module.verify()
    return module
