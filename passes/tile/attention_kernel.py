"""Reads a tile-IR kernel into the attention it computes, or says at which op it does not fit.

The form (`tilemma attention` writes it): Q (B x L x D), K^T (B x D x S: a load of K through a
transposed layout) and V (B x S x Dv) loaded from kernel arguments, S = tile.mma(Q, K^T, 0) in f32,
P = tile.softmax(S), P cast to Q's type, O = tile.mma(P, V, 0), optionally cast, stored whole.
What the FlashAttention-2 schedule of `tile-attention` supports is checked here, once: f16 or
bf16 operands, head dims 64 or 128, one batch for all operands, the m16n8k16 instruction, rows
aligned for cp.async; everything else is a located error saying what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.gemm_kernel import MemOperand, _operand, _store_operand

HEAD_DIMS = (64, 128)
ELEMENTS = ("f16", "bf16")


@dataclass(frozen=True)
class AttentionKernel:
    """O = softmax(scale * Q K^T [causal]) V for each of `batch` heads; q, kt, v, o where each lives
    (kt is the B operand of the first mma: D x S)."""

    name: str
    params: tuple[str, ...]
    batch: int
    l: int  # query rows
    s: int  # key/value rows
    d: int  # head dim of Q and K
    dv: int  # head dim of V and O
    element: str  # f16 / bf16
    q: MemOperand
    kt: MemOperand
    v: MemOperand
    o: MemOperand
    scale: float
    causal: bool
    mma_s: Operation  # S = Q K^T (carries the selected variant)
    mma_o: Operation  # O = P V
    store: Operation  # O's tile.store
    p_rounding: str | None = None  # the casts' roundings (None: the rule's default)
    o_rounding: str | None = None


def _zero(value: SSAValue, what: str, at: Operation) -> None:
    owner = value.owner
    if not (isinstance(owner, tile.ConstantOp) and float(owner.scalar()) == 0.0):
        raise LoweringError(at, f"attention: the {what} accumulator must be a zero tile.constant")


def _only_use(value: SSAValue, at: Operation, what: str) -> Operation:
    uses = list(value.uses)
    if len(uses) != 1:
        raise LoweringError(at, f"attention: {what} must have exactly one use (it stays in registers), has {len(uses)}")
    return uses[0].operation


def _shape3(value: SSAValue) -> tuple[int, int, int]:
    shape = value.type.get_shape()  # type: ignore[union-attr]
    return (shape[0], shape[1], shape[2]) if len(shape) == 3 else (1, shape[0], shape[1])


def is_attention(kernel: func.FuncOp) -> bool:
    return any(isinstance(o, tile.SoftmaxOp) for o in kernel.walk())


def read_attention(kernel: func.FuncOp) -> AttentionKernel:
    """The attention `kernel` computes, or a LoweringError at the op that does not fit."""
    params = {arg: i for i, arg in enumerate(kernel.body.block.args)}
    for arg in params:
        if not isinstance(arg.type, MemRefType):
            raise LoweringError(kernel, f"kernel arguments must be memrefs, got {arg.type} for argument {arg.index}")
    softmaxes = [o for o in kernel.walk() if isinstance(o, tile.SoftmaxOp)]
    if len(softmaxes) != 1:
        raise LoweringError(softmaxes[1], "attention: one tile.softmax a kernel")
    sm = softmaxes[0]
    mma_s = sm.input.owner
    if not isinstance(mma_s, tile.MmaOp):
        raise LoweringError(sm, "attention: tile.softmax must take the result of tile.mma (S = Q K^T)")
    _only_use(mma_s.result, mma_s, "S = Q K^T")
    _zero(mma_s.acc, "S = Q K^T", mma_s)
    cast = _only_use(sm.result, sm, "the softmax's result")
    if not isinstance(cast, tile.CastOp):
        raise LoweringError(cast, "attention: the softmax's result must be cast (tile.cast) to the type of Q, "
                                  "the second mma's A operand")
    mma_o = _only_use(cast.result, cast, "the cast softmax")
    if not isinstance(mma_o, tile.MmaOp) or mma_o.lhs is not cast.result:
        raise LoweringError(mma_o, "attention: the cast softmax must be the A operand of tile.mma (O = P V)")
    _zero(mma_o.acc, "O = P V", mma_o)
    for m in (mma_s, mma_o):
        v = m.variant
        if v is None:
            raise LoweringError(m, "run tile-select-mma before tile-attention")
        var = v.variant
        if (var.m, var.n, var.k) != (16, 8, 16) or var.ctype != "f32" or var.sparse:
            raise LoweringError(m, f"attention: the FlashAttention-2 schedule multiplies with m16n8k16 into f32, "
                                   f"not {var.opcode}")
    if mma_s.variant != mma_o.variant:
        raise LoweringError(mma_o, "attention: both mmas must use one instruction (Q and V of one type)")
    out = _only_use(mma_o.result, mma_o, "O = P V")
    o_rounding, out_cast = None, out if isinstance(out, tile.CastOp) else None
    if isinstance(out, tile.CastOp):
        if out.result.type.element not in (*ELEMENTS, "f32"):  # type: ignore[union-attr]
            raise LoweringError(out, f"attention: O is stored as f16, bf16 or f32, not {out.result.type.element}")  # type: ignore[union-attr]
        o_rounding = _rounding(out)
        out = _only_use(out.result, out, "the cast O")
    if not isinstance(out, tile.StoreOp):
        raise LoweringError(out, "attention: O (or its tile.cast) must be stored by tile.store")
    chain = {mma_s.lhs.owner, mma_s.rhs.owner, mma_s.acc.owner, mma_s, sm, cast, mma_o.rhs.owner, mma_o.acc.owner,
             mma_o, out_cast, out}
    other = next((op for op in kernel.body.block.ops if op not in chain and not isinstance(op, func.ReturnOp)), None)
    if other is not None:
        raise LoweringError(other, "attention: a kernel holds the attention alone (Q, K^T and V loaded, two tile.mma, "
                                   "tile.softmax, the casts and O's tile.store); this op is none of them")
    batched = len(mma_s.lhs.type.get_shape()) == 3  # type: ignore[union-attr]
    q = _operand(mma_s.lhs, params, batched, "Q", mma_s)
    kt = _operand(mma_s.rhs, params, batched, "K^T", mma_s)
    v = _operand(mma_o.rhs, params, batched, "V", mma_o)
    o = _store_operand(out, params, batched)
    for mem, what, at in ((q, "Q", mma_s), (kt, "K^T", mma_s), (v, "V", mma_o)):
        if mem.casts or mem.stored not in ELEMENTS:
            raise LoweringError(at, f"attention: {what} is loaded as f16 or bf16 (no casts), not {mem.stored}")
    b, l, d = _shape3(mma_s.lhs)
    s = _shape3(mma_s.rhs)[2]
    dv = _shape3(mma_o.rhs)[2]
    batches = {_shape3(x)[0] for x in (mma_s.lhs, mma_s.rhs, mma_o.rhs, out.value)}
    if len(batches) != 1:
        raise LoweringError(mma_s, "attention: Q, K, V and O have one batch (heads) each; broadcasting a batch of 1 "
                                   "is not supported")
    for dim, what in ((d, "Q and K"), (dv, "V and O")):
        if dim not in HEAD_DIMS:
            raise LoweringError(mma_s if what == "Q and K" else mma_o,
                                f"attention: head dim {dim} of {what} is not supported (the schedule takes "
                                f"{' or '.join(map(str, HEAD_DIMS))})")
    name = kernel.sym_name.data
    names = tuple(a.name_hint or f"arg{i}" for i, a in enumerate(kernel.body.block.args))
    return AttentionKernel(name, names, b, l, s, d, dv, q.stored, q, kt, v, o, sm.scale_value(), sm.causal is not None,
                           mma_s, mma_o, out, _rounding(cast), o_rounding)


def _rounding(cast: tile.CastOp) -> str | None:
    return None if cast.rounding is None else cast.rounding.data.value
