"""Writes the tile IR of a GEMM kernel: the `tilemma gemm` quick start and the tests' generator.

The kernel computes D = A x B + C over whole memrefs (rank 3 with `batch`, where `bcast` makes
one operand a batch of 1 that broadcasts). Types without a storage format (tf32) are loaded as
their storage type and converted with `tile.cast`, as a user would write it.

An epilogue (`EPILOGUE`: --alpha, --scale rows,cols, --bias, --act, --out, --aux) is one
`tile.map` on the accumulator, written as a frontend writes it: the accumulator converted to the
compute type T (f32; f64 for an f64 GEMM) by arith.sitofp / extf, then

    pre = alpha * acc * s_row[m] * s_col[n] + bias[m or n]      (each factor only if asked for)
    y   = act(pre)                                               (arith / math ops, composed)

and y converted to the output type in the body (arith.truncf to f16 / bf16), or, for the fp8
outputs, by a `tile.cast` after the map (f32 -> e4m3 / e5m2 rn satfinite: PTX has only the
saturating conversion). `--aux` stores `pre` as a second output. Vectors are broadcast with
`tile.broadcast`: per-row ones (s_row, a per-row bias) are M long, per-column ones N long.
Types: scales are T; the bias has the output type (nn.Linear's, and cuBLASLt's default; half the
bytes of f32 for a 16-bit output), f16 for fp8 outputs (fp8 is too coarse for a bias; cuBLASLt's
fp8 epilogues also take a 16-bit one). Batched, a per-row vector belongs to A's rows and a
per-column one to B's columns, so each has its operand's batch: one per batch, or one shared
vector where that operand broadcasts (`--bcast b`: shared weights, one bias, as nn.Linear).
"""

from __future__ import annotations

from dataclasses import dataclass

import math

from xdsl.builder import Builder
from xdsl.rewriter import InsertPoint
from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import FloatAttr, IntegerType, MemRefType, ModuleOp, Signedness, StridedLayoutAttr
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
    # The epilogue (see the module's docstring): None / False / 1.0 where absent.
    bias: str | None = None  # "col": b[n] (memref<N>), "row": b[m] (memref<M>)
    act: str | None = None  # one of ACTIVATIONS
    vector_scales: str | None = None  # "rows", "cols" or "rows,cols": D = acc * s_row[m] * s_col[n]
    alpha: float | None = None  # D = alpha * acc ...
    out: str | None = None  # the stored type (default: the accumulator's, f32 after an integer GEMM)
    aux: bool = False  # also store the pre-activation (second output `pre`)
    dynamic: str = ""  # which of m, n, k are `?` (known at launch): their values are ignored
    a_layout: str = "row"  # "col": A is stored M-major (column-major, strided<[1, M]>)

    @property
    def has_epilogue(self) -> bool:
        return bool(self.bias or self.act or self.vector_scales or self.alpha is not None
                    or self.out or self.aux)

    @property
    def epilogue_name(self) -> str:
        """The kernel name's epilogue part: _alpha0p5_scale_rows_cols_bias_col_gelu_tanh_out_e4m3_aux."""
        parts = []
        if self.alpha is not None:
            parts.append("alpha" + repr(float(self.alpha)).replace("-", "m").replace(".", "p").replace("+", ""))
        if self.vector_scales:
            parts.append("scale_" + "_".join(_scale_sides(self.vector_scales)))
        if self.bias:
            parts.append(f"bias_{self.bias}")
        if self.act:
            parts.append(self.act.replace("-", "_"))
        if self.out:
            parts.append("out_" + ELEMENTS[tile.canonical_element(self.out)].ptx.lstrip("."))
        if self.aux:
            parts.append("aux")
        return "".join("_" + p for p in parts)

    @property
    def name(self) -> str:
        batch = f"b{self.batch}{self.bcast or ''}_" if self.batch else ""
        shape = f"_{self.shape}" if self.shape else ""
        sparse = ("_pruned" if self.prune else "_sparse") if self.sparse_a else ""
        if self.pre_compressed:
            sparse = "_precompressed"
        if self.scale:
            sparse += f"_scaled{self.scale_block}"
        layout = ("_acol" if self.a_layout == "col" else "") + ("_bcol" if self.b_layout == "col" else "")
        forms = ("" if self.c else "_noc") + ("" if self.rounding == "rna" else f"_{self.rounding}")
        m, n, k = ("MNK"[i] if "mnk"[i] in self.dynamic else v for i, v in enumerate((self.m, self.n, self.k)))
        return (
            f"gemm{sparse}_{batch}{m}x{n}x{k}_{self.a}_{self.b}{layout}_{self.acc_type}"
            f"{forms}{shape}{self.epilogue_name}"
        )

    @property
    def acc_type(self) -> str:
        if self.acc is not None:
            return self.acc
        if self.scale is not None:  # every block-scaled instruction accumulates in f32
            return "f32"
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
    if set(spec.dynamic) - set("mnk"):
        raise ValueError(f"--dynamic names sizes known at launch among m, n, k; got {spec.dynamic!r}")
    spec = GemmSpec(**{**spec.__dict__, "a": a_name, "b": b_name, "acc": acc_name,
                       **{d: tile.DYNAMIC for d in spec.dynamic}})
    if spec.dynamic and (spec.scale or spec.sparse_a or spec.pre_compressed or spec.batch is not None):
        raise ValueError("--dynamic: sizes known at launch are for dense, unbatched GEMMs (block-scaled, sparse "
                         "and batched kernels need static sizes)")
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
    for which, layout in (("a", spec.a_layout), ("b", spec.b_layout)):
        if layout not in ("row", "col"):
            raise ValueError(f"--{which}-layout must be 'row' or 'col', got {layout!r}")
    if spec.a_layout == "col" and (spec.sparse_a or spec.pre_compressed):
        raise ValueError("--a-layout col: a sparse A is compressed along its K rows, which must be contiguous")

    def memref(which: str) -> MemRefType:
        stored = ELEMENTS[types[which]].stored_as
        if (which, "col") in (("a", spec.a_layout), ("b", spec.b_layout)):  # each column contiguous
            rows, cols = shapes[which][-2:]
            col_stride = None if rows == tile.DYNAMIC else rows  # `?` rows: a `?` column stride
            strides = [1, col_stride] if spec.batch is None else [rows * cols, 1, rows]
            return MemRefType(tile.element_type(stored), shapes[which], StridedLayoutAttr(strides, 0))
        return MemRefType(tile.element_type(stored), shapes[which])

    names = ("a", "b", "sa", "sb", "c", "d") if scaled else ("a", "b", "c", "d")
    if not spec.c:
        names = tuple(n for n in names if n != "c")
    arg_types = [memref("c" if n == "d" else n) for n in names]
    if spec.has_epilogue:
        extra = _epilogue_args(spec, acc_name)
        at = names.index("d")
        names = names[:at] + tuple(extra) + names[at + 1:]
        arg_types = arg_types[:at] + list(extra.values()) + arg_types[at + 1:]
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
    if spec.has_epilogue:
        result.name_hint = "acc"
        stored = _epilogue(spec, builder, args, result, acc_name)
        for value, dest in stored:
            builder.insert(tile.StoreOp(value, args[dest], zeros))
    else:
        result.name_hint = "td"
        builder.insert(tile.StoreOp(result, args["d"], zeros))
    builder.insert(func.ReturnOp())
    kernel = func.FuncOp(spec.name, (arg_types, []), Region(block))
    module = ModuleOp([kernel])
    module.verify()
    return module


# ---------------------------------------------------------------------------------------------
# Epilogues
# ---------------------------------------------------------------------------------------------

ACTIVATIONS = ("relu", "gelu", "gelu-tanh", "silu", "sigmoid")
OUT_TYPES = ("f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2")  # also e4m3 / e5m2


def _scale_sides(text: str) -> tuple[str, ...]:
    sides = tuple(s.strip() for s in text.split(","))
    if not sides or any(s not in ("rows", "cols") for s in sides) or len(set(sides)) != len(sides):
        raise ValueError(f"--scale {text}: expected rows, cols or rows,cols (per-row and per-column "
                         f"scales of the accumulator), or a block-scale type")
    return tuple(s for s in ("rows", "cols") if s in sides)


def _compute_type(acc: str) -> str:
    return "f64" if acc == "f64" else "f32"


def _out_type(spec: GemmSpec, acc: str) -> str:
    if spec.out is not None:
        out = tile.canonical_element(spec.out)
        if out not in OUT_TYPES:
            raise ValueError(f"--out {spec.out}: the output type is one of f16, bf16, f32, f64, e4m3, e5m2")
        if out == "f64" and acc != "f64":
            raise ValueError("--out f64 needs an f64 GEMM (the epilogue computes in f32 otherwise)")
        return out
    return acc if ELEMENTS[acc].is_float else "f32"


def _bias_type(spec: GemmSpec, acc: str) -> str:
    out = _out_type(spec, acc)
    return "f16" if out in ("f8E4M3FN", "f8E5M2") else out


def _vector_shape(spec: GemmSpec, side: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape of a per-row (side "rows": M long, follows A's batch) or per-column ("cols": N long,
    follows B's batch) vector, and the tile dimensions it runs along."""
    length, operand, dim = (spec.m, "a", 0) if side == "rows" else (spec.n, "b", 1)
    if spec.batch is None:
        return (length,), (dim,)
    if spec.bcast == operand:
        return (length,), (dim + 1,)
    return (spec.batch, length), (0, dim + 1)


def _epilogue_args(spec: GemmSpec, acc: str) -> dict[str, MemRefType]:
    """The epilogue's arguments, in order, that take D's place: vectors, then the outputs."""
    if spec.act is not None and spec.act not in ACTIVATIONS:
        raise ValueError(f"--act {spec.act}: one of {', '.join(ACTIVATIONS)}")
    if spec.bias not in (None, "row", "col"):
        raise ValueError(f"--bias {spec.bias}: row (a per-row bias b[m]) or col (a per-column bias b[n])")
    if spec.aux and spec.act is None:
        raise ValueError("--aux stores the pre-activation: it needs --act")
    if spec.alpha is not None and not math.isfinite(spec.alpha):
        raise ValueError(f"--alpha must be finite, got {spec.alpha}")
    t = _compute_type(acc)
    out = _out_type(spec, acc)
    mshape = [spec.m, spec.n] if spec.batch is None else [spec.batch, spec.m, spec.n]
    args: dict[str, MemRefType] = {}
    for side in _scale_sides(spec.vector_scales) if spec.vector_scales else ():
        args[f"scale_{side}"] = MemRefType(tile.element_type(t), _vector_shape(spec, side)[0])
    if spec.bias:
        side = "rows" if spec.bias == "row" else "cols"
        args["bias"] = MemRefType(tile.element_type(_bias_type(spec, acc)), _vector_shape(spec, side)[0])
    args["d"] = MemRefType(tile.element_type(out), mshape)
    if spec.aux:
        args["pre"] = MemRefType(tile.element_type(t), mshape)
    return args


def _epilogue(spec: GemmSpec, builder: Builder, args: dict, acc_value: SSAValue, acc: str):
    """Build the epilogue after the mma; the (value, argument name) pairs to store."""
    t = _compute_type(acc)
    out = _out_type(spec, acc)
    acc_type = acc_value.type
    shape = acc_type.get_shape()  # type: ignore[union-attr]
    arithmetic = spec.act or spec.bias or spec.vector_scales or spec.alpha is not None
    if not arithmetic:  # a conversion only: tile.cast, through f32 where no one rule converts
        value, current = acc_value, acc
        path = [] if acc == out else [out] if (acc, out) in tile.CAST_RULES else ["f32", out]
        for step in path:
            if step == current:
                continue
            if (current, step) not in tile.CAST_RULES:
                raise ValueError(f"--out {spec.out}: no conversion from the {acc} accumulator to {out}")
            value = builder.insert(tile.CastOp(value, tile.TileType(shape, tile.element_type(step)))).result
            current = step
        value.name_hint = "td"
        return [(value, "d")]

    inputs, names = [acc_value], ["x"]
    for side in _scale_sides(spec.vector_scales) if spec.vector_scales else ():
        inputs.append(_broadcast(builder, args[f"scale_{side}"], spec, side, shape, f"tscale_{side}"))
        names.append(f"s_{side[:-1]}")
    if spec.bias:
        side = "rows" if spec.bias == "row" else "cols"
        inputs.append(_broadcast(builder, args["bias"], spec, side, shape, "tbias"))
        names.append("bv")
    final = out if out not in ("f8E4M3FN", "f8E5M2") else "f32"
    results = [tile.TileType(shape, tile.element_type(final))]
    if spec.aux:
        results.append(tile.TileType(shape, tile.element_type(t)))

    def fill(block: Block) -> list[SSAValue]:
        for arg, name in zip(block.args, names):
            arg.name_hint = name
        body = _Body(block, tile.element_type(t))
        x = body.convert(block.args[0], acc, t, f"x_{t}")
        if spec.alpha is not None:
            x = body.mul(x, body.const(spec.alpha, "alpha"), "xa")
        for arg, name in zip(block.args[1:], names[1:]):
            v = body.convert(arg, tile.element_name(arg.type), t, f"{name}_{t}")
            last = arg is block.args[-1]
            if name == "bv":
                x = body.add(x, v, "z")
            else:
                x = body.mul(x, v, "z" if last else f"x_{name}")
        pre = x
        y = _activation(body, spec.act, pre) if spec.act else pre
        y = body.convert(y, t, final, "y_out")
        return [y, pre] if spec.aux else [y]

    mapped = builder.insert(tile.MapOp.build(inputs, results, fill))
    y = mapped.outputs[0]
    y.name_hint = "td" if final == out else "y"
    if final != out:
        y = builder.insert(tile.CastOp(y, tile.TileType(shape, tile.element_type(out)))).result
        y.name_hint = "td"
    stored = [(y, "d")]
    if spec.aux:
        mapped.outputs[1].name_hint = "tpre"
        stored.append((mapped.outputs[1], "pre"))
    return stored


def _broadcast(builder: Builder, ref: SSAValue, spec: GemmSpec, side: str, shape, hint: str) -> SSAValue:
    _, dims = _vector_shape(spec, side)
    element = ref.type.element_type  # type: ignore[union-attr]
    op = tile.BroadcastOp(ref, [0] * len(dims), dims, tile.TileType(shape, element))
    value = builder.insert(op).result
    value.name_hint = hint
    return value


class _Body:
    """Adds scalar arith / math ops to a map's body block, naming their results."""

    def __init__(self, block: Block, t):
        self.block, self.t = block, t
        self.consts: dict[tuple[float, str | None], SSAValue] = {}

    def _add(self, op, hint: str | None) -> SSAValue:
        self.block.add_op(op)
        if hint:
            op.results[0].name_hint = hint
        return op.results[0]

    def const(self, value: float, hint: str) -> SSAValue:
        """One constant per (value, name): `one` twice is one op, `alpha` 0.5 and `half` two."""
        if (value, hint) not in self.consts:
            self.consts[(value, hint)] = self._add(arith.ConstantOp(FloatAttr(value, self.t)), hint)
        return self.consts[(value, hint)]

    def convert(self, v: SSAValue, src: str, dst: str, hint: str) -> SSAValue:
        src = "si32" if src in ("i32", "si32") else src
        if src == dst:
            return v
        target = tile.element_type(dst)
        if src == "si32":
            return self._add(arith.SIToFPOp(v, target), hint)
        wider = ELEMENTS[dst].bits > ELEMENTS[src].bits
        return self._add(arith.ExtFOp(v, target) if wider else arith.TruncFOp(v, target), hint)

    def add(self, a, b, hint=None):
        return self._add(arith.AddfOp(a, b), hint)

    def mul(self, a, b, hint=None):
        return self._add(arith.MulfOp(a, b), hint)

    def div(self, a, b, hint=None):
        return self._add(arith.DivfOp(a, b), hint)

    def neg(self, a, hint=None):
        return self._add(arith.NegfOp(a), hint)

    def max(self, a, b, hint=None):
        return self._add(arith.MaximumfOp(a, b), hint)

    def unary(self, cls, a, hint=None):
        return self._add(cls(a), hint)


def _sigmoid(body: _Body, x: SSAValue, hint: str) -> SSAValue:
    """1 / (1 + exp(-x))."""
    e = body.unary(mathd.ExpOp, body.neg(x, "nx"), "e")
    return body.div(body.const(1.0, "one"), body.add(body.const(1.0, "one"), e, "den"), hint)


def _activation(body: _Body, act: str, x: SSAValue) -> SSAValue:
    """The activation, composed from arith and math ops as frontends write it."""
    if act == "relu":  # max(x, 0)
        return body.max(x, body.const(0.0, "zero"), "relu")
    if act == "sigmoid":
        return _sigmoid(body, x, "sig")
    if act == "silu":  # x * sigmoid(x)
        return body.mul(x, _sigmoid(body, x, "sig"), "silu")
    half, one = body.const(0.5, "half"), body.const(1.0, "one")
    if act == "gelu":  # 0.5 x (1 + erf(x / sqrt 2))
        e = body.unary(mathd.ErfOp, body.mul(x, body.const(1 / math.sqrt(2.0), "rsqrt2"), "xs"), "erf")
    else:  # gelu-tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        x3 = body.mul(body.mul(x, x, "x2"), x, "x3")
        inner = body.add(x, body.mul(body.const(0.044715, "k"), x3, "kx3"), "inner")
        e = body.unary(mathd.TanhOp, body.mul(body.const(math.sqrt(2.0 / math.pi), "c"), inner, "u"), "th")
    return body.mul(body.mul(half, x, "hx"), body.add(one, e, "onep"), "gelu")
