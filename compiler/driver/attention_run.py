"""Runs a compiled attention kernel on random inputs (the GPU or the emulator) and checks every
element of O against the float64 reference within `attention_reference`'s bound."""

from __future__ import annotations

import numpy as np

from tilemma.compiler.driver.runner import RunResult, execute, pack_memory, sentinel
from tilemma.compiler.verify.attention_reference import attention_bound, attention_data
from tilemma.compiler.verify.reference import element_type
from tilemma.passes.tile.attention_kernel import AttentionKernel


def _indices(mem, rows: int, cols: int, batch: int) -> np.ndarray:
    """Element indices (into the argument's buffer) of the B x rows x cols window `mem` addresses."""
    b, r, c = np.ix_(np.arange(batch), np.arange(rows), np.arange(cols))
    return mem.base + b * mem.batch_stride + r * mem.row_stride + c * mem.col_stride


def run_attention(kernel, seed: int, on: str, inputs: dict[str, np.ndarray] | None = None) -> RunResult:
    """`run_compiled` for attention: Q, K, V random (`attention_data`) unless `inputs` names them
    (B x L x D, B x S x D, B x S x Dv arrays, K as stored: not transposed)."""
    a = kernel.gemm
    assert isinstance(a, AttentionKernel)
    rng = np.random.default_rng(seed)
    given = inputs or {}
    operands = {a.q.param: ("q", a.q), a.kt.param: ("k", a.kt), a.v.param: ("v", a.v)}
    shapes = {"q": (a.batch, a.l, a.d), "k": (a.batch, a.s, a.d), "v": (a.batch, a.s, a.dv)}
    values = {}
    for what, shape in shapes.items():
        x = given.get(what)
        if x is None:
            x = attention_data(shape, a.element, rng)
        elif tuple(x.shape) != shape:
            raise ValueError(f"input {what}: expected shape {shape}, got {tuple(x.shape)}")
        values[what] = np.asarray(x).astype(element_type(a.element).dtype)
    args = []
    out_type = a.o.stored
    for i, size in enumerate(kernel.arg_sizes):
        p = kernel.abi.params[i]
        buf = np.full(size, sentinel(p.element), element_type(p.element).dtype)
        if i in operands:
            what, mem = operands[i]
            x = values[what]
            if what == "k":  # K^T's window: D rows, S columns
                buf[_indices(mem, a.d, a.s, a.batch)] = np.swapaxes(x, 1, 2)
            else:
                buf[_indices(mem, x.shape[1], x.shape[2], a.batch)] = x
        args.append(pack_memory(buf, p.element))
    outs = execute(kernel, kernel.abi.arguments(args, kernel.scalars), on)
    full = outs[a.o.param].view(element_type(out_type).dtype).reshape(-1)
    where = _indices(a.o, a.l, a.dv, a.batch)
    got = full[where].astype(np.float64)
    want, bound = attention_bound(values["q"], values["k"], values["v"], a.scale, a.causal, a.element, out_type,
                                  a.p_rounding, a.o_rounding)
    err = np.abs(got - want)
    bad = ~(err <= bound)  # NaN fails
    outside = np.ones(full.size, bool)
    outside[where.reshape(-1)] = False
    untouched = np.array_equal(full[outside].view(np.uint8), args[a.o.param].view(element_type(out_type).dtype)[outside].view(np.uint8))
    detail = ""
    if bad.any():
        i = tuple(int(x[0]) for x in np.nonzero(bad))
        detail = (f"{int(bad.sum())} of {bad.size} elements outside the bound; first at {i}: got {got[i]!r}, "
                  f"want {want[i]!r}, bound {bound[i]:.3g}")
    if not untouched:
        detail = (detail + "; " if detail else "") + "elements outside O changed"
    rel = err / np.maximum(np.abs(want), 1e-30)
    return RunResult(kernel.name, kernel.variant, f"{a.batch}x{a.l}x{a.s}x{a.d}", float(np.nanmax(err)),
                     float(np.nanmax(rel)), not bad.any() and untouched, detail, on,
                     {"o": full[where.reshape(-1)]})
