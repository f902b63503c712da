"""Fused GEMM epilogues: tilemma against cuBLASLt, unfused torch and Triton on the GPU, in one run.

Each case is a GEMM whose result goes through an epilogue before its one store (issue 21):

| case | tilemma kernel |
| --- | --- |
| plain | f16 x f16 -> f32 accumulator -> f32 D (no epilogue: the baseline, as gemm_bench's f16) |
| f16-out | f32 accumulator -> f16 D (`arith.truncf` in a `tile.map`) |
| bias-relu | + bias[n] (f16), ReLU (`arith.maximumf`) -> f16 |
| bias-gelu | + bias[n], GELU erf form 0.5 x (1 + erf(x / sqrt 2)) (`math.erf`) -> f16 |
| bias-gelu-tanh | + bias[n], GELU tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> f16 |
| s8-dequant | s8 x s8 -> s32, B column-major; f32(acc) * sa[m] * sb[n] + bias[n] -> f16 |
| bf16-bias-gelu(-tanh) | the GELU cases in bf16: bf16 A, B, bias and D |

For each case and size, one run holds: `tilemma-plain` (the same GEMM with no epilogue: f32 or s32
D) and `tilemma` (fused), their samples interleaved so that the epilogue's cost (fused time / plain
time - 1; issue 21's target: at most 3%) is not a clock drift; `cublaslt` (cuBLASLt's own fused
epilogue, `torch._addmm_activation(bias, a, b, use_gelu=...)`: ReLU, or GELU in the tanh form only,
also standing in for the erf cases; `a @ b` where there is no epilogue; none for s8);
`torch` (unfused: `act(a @ b + bias)`; s8: `torch._int_mm` then the dequantization in f32);
`triton` and `triton-mma.sync` (`triton_epilogue.py`: the same epilogue fused on the accumulator,
best of four tile configurations, default and `DISABLE_MMA_V3=1`, each in its own subprocess as in
gemm_bench). Timing, sizes and robustness as gemm_bench (CUDA events, CUDA graphs, `--budget`,
failures as rows with their error).

Checks, once per kernel, against a float64 torch reference of the same inputs: every element
within |got - y| <= L (err_acc + 4u32 (|p| + |x|)) + e_act |x| + u_out |y| + floor_out, and the RMS
of got - y at most RMS_LIMIT[out] times y's, where p is the (dequantized) product, x = p + bias the
pre-activation, y = act(x), err_acc gemm_bench's accumulation bound (K + 1) 2^-22 sum_k |a b|
(0 for s8: exact), u32 = 2^-24, L the activation's Lipschitz constant (1.13 for GELU), e_act the
f32 activation's own relative error (GELU erf 2^-14, tanh form 2^-11: tanh.approx's bound), u_out
half an ulp of D (f16 2^-11, bf16 2^-8). Peers get 4 u_out (|p| + |x|) more (an unfused chain
rounds to f16 between its steps).

    python -m benchmarks.epilogue_bench [--cases bias-gelu s8-dequant] [--sizes 2048 4096 8192x4096x4096]
                                        [--csv out.csv] [--budget 540] [--print-ir]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import struct
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from benchmarks import gemm_bench as gb
from benchmarks.gemm_bench import TRITON_MODES, Row

# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

ACTS = ("relu", "gelu", "gelu-tanh")


@dataclass(frozen=True)
class Case:
    """One GEMM with an epilogue: D = out(act(dequant(A x B) + bias))."""

    name: str
    a: str  # element of A and B: f16, bf16, si8
    out: str  # D's element: f32, si32 (the accumulator's: no epilogue), f16, bf16
    bias: bool = False  # + bias[n] (f16; bf16 for bf16 A)
    act: str | None = None  # relu, gelu (erf form), gelu-tanh
    dequant: bool = False  # s8: f32(acc) * sa[m] * sb[n] (f32 vectors)

    @property
    def acc(self) -> str:
        return "si32" if self.a == "si8" else "f32"

    @property
    def b_col(self) -> bool:
        """B column-major (K-major): what the staged 8-bit path needs (gemm_bench's s8)."""
        return self.a == "si8"

    @property
    def bias_type(self) -> str:
        return "bf16" if self.a == "bf16" else "f16"

    @property
    def fused(self) -> bool:
        """Whether the kernel has an epilogue (a tile.map) at all."""
        return self.out != self.acc or self.bias or self.act is not None or self.dequant

    @property
    def math(self) -> bool:
        """Whether the epilogue calls a math function (math.erf / math.tanh)."""
        return self.act in ("gelu", "gelu-tanh")

    def plain(self) -> Case:
        """The same GEMM with no epilogue: the accumulator stored as it is."""
        return Case(f"{self.a}-plain", self.a, self.acc)


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case("plain", "f16", "f32"),
        Case("f16-out", "f16", "f16"),
        Case("bias-relu", "f16", "f16", bias=True, act="relu"),
        Case("bias-gelu", "f16", "f16", bias=True, act="gelu"),
        Case("bias-gelu-tanh", "f16", "f16", bias=True, act="gelu-tanh"),
        Case("s8-dequant", "si8", "f16", bias=True, dequant=True),
        Case("bf16-bias-gelu", "bf16", "bf16", bias=True, act="gelu"),
        Case("bf16-bias-gelu-tanh", "bf16", "bf16", bias=True, act="gelu-tanh"),
    )
}
SHAPES = ((4096, 4096, 4096),)
# Implementations in table order.
IMPLS = ("tilemma-plain", "tilemma", "cublaslt", "torch", "triton", "triton-mma.sync")
PEERS = ("cublaslt", "torch")
TARGET_COST = 0.03  # issue 21: the fused epilogue costs at most 3% over the plain GEMM
TARGET_TRITON = 1.10  # ... and runs at >= 1.1x Triton's mma.sync path with the same epilogue

# Shapes (M, N, K) as gemm_bench spells and counts them
Shape = gb.Shape
parse_shape, shape_label, flops = gb.parse_shape, gb.shape_label, gb.flops


@dataclass
class EpiRow(Row):
    """gemm_bench's Row with `family` the case, `size` M and `shape` MxNxK (Row's fields)."""


# ---------------------------------------------------------------------------------------------
# The tile IR
# ---------------------------------------------------------------------------------------------


def f32_literal(value: float) -> str:
    """`value` rounded to f32, spelled so that it parses back to that f32."""
    return repr(struct.unpack("f", struct.pack("f", value))[0])


class _Body:
    """SSA lines of a tile.map body."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, str] = {}

    def __call__(self, rhs: str) -> str:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"{name} = {rhs}")
        return name

    def const(self, value: float) -> str:
        text = f32_literal(value)
        if text not in self.consts:
            self.consts[text] = self(f"arith.constant {text} : f32")
        return self.consts[text]

    def mul(self, x: str, y: str) -> str:
        return self(f"arith.mulf {x}, {y} : f32")

    def add(self, x: str, y: str) -> str:
        return self(f"arith.addf {x}, {y} : f32")


def activation_body(body: _Body, act: str | None, x: str) -> str:
    """The activation of f32 value `x` in the body; its f32 result."""
    if act is None:
        return x
    if act == "relu":  # max(x, 0), NaN propagated as torch.relu does
        return body(f"arith.maximumf {x}, {body.const(0.0)} : f32")
    if act == "gelu":  # 0.5 x (1 + erf(x / sqrt 2))
        e = body(f"math.erf {body.mul(x, body.const(math.sqrt(0.5)))} : f32")
        return body.mul(body.mul(x, body.const(0.5)), body.add(e, body.const(1.0)))
    if act == "gelu-tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = body.mul(body.mul(x, x), x)
        inner = body.add(x, body.mul(cube, body.const(0.044715)))
        t = body(f"math.tanh {body.mul(inner, body.const(math.sqrt(2.0 / math.pi)))} : f32")
        return body.mul(body.mul(x, body.const(0.5)), body.add(t, body.const(1.0)))
    raise ValueError(f"unknown activation {act!r}; choose from {', '.join(ACTS)}")


def kernel_name(case: Case, shape: Shape) -> str:
    return f"epi_{case.name.replace('-', '_')}_{shape_label(shape)}"


def epilogue_ir(case: Case, shape: Shape) -> tuple[str, str]:
    """The tile IR text and kernel name of `case` at M x N x K: arguments a, b, [sa, sb],
    [bias], d in that order."""
    m, n, k = shape
    name = kernel_name(case, shape)

    def tile(el: str, rows: int = m, cols: int = n) -> str:
        return f"!tile.tile<{rows}x{cols}x{el}>"

    b_layout = f", strided<[1, {k}]>" if case.b_col else ""
    args = [("a", f"memref<{m}x{k}x{case.a}>"), ("b", f"memref<{k}x{n}x{case.a}{b_layout}>")]
    if case.dequant:
        args += [("sa", f"memref<{m}xf32>"), ("sb", f"memref<{n}xf32>")]
    if case.bias:
        args += [("bias", f"memref<{n}x{case.bias_type}>")]
    args += [("d", f"memref<{m}x{n}x{case.out}>")]
    types = dict(args)
    zero = "0" if case.acc == "si32" else "0.0"
    lines = [
        f"%ta = tile.load %a[0, 0] : {types['a']} -> {tile(case.a, m, k)}",
        f"%tb = tile.load %b[0, 0] : {types['b']} -> {tile(case.a, k, n)}",
        f"%zero = tile.constant {zero} : {tile(case.acc)}",
        f"%acc = tile.mma %ta, %tb, %zero : {tile(case.a, m, k)}, {tile(case.a, k, n)}, {tile(case.acc)} "
        f"-> {tile(case.acc)}",
    ]
    result = "%acc"
    if case.fused:
        inputs = [("%acc", case.acc)]  # (tile value, element) of each map input
        for arg, dims, el in (("sa", 0, "f32"), ("sb", 1, "f32"), ("bias", 1, case.bias_type)):
            if arg in types:
                lines.append(f"%t{arg} = tile.broadcast %{arg}[0] dims [{dims}] : {types[arg]} -> {tile(el)}")
                inputs.append((f"%t{arg}", el))
        body = _Body()
        scalar = {"si32": "i32"}
        params = {"%acc": "%x", "%tsa": "%sa_m", "%tsb": "%sb_n", "%tbias": "%bias_n"}
        x = "%x"
        if case.acc == "si32":
            x = body("arith.sitofp %x : i32 to f32")
        if case.dequant:
            x = body.mul(body.mul(x, "%sa_m"), "%sb_n")
        if case.bias:
            bias = "%bias_n"
            if case.bias_type != "f32":
                bias = body(f"arith.extf %bias_n : {case.bias_type} to f32")
            x = body.add(x, bias)
        y = activation_body(body, case.act, x)
        if case.out in ("f16", "bf16"):
            y = body(f"arith.truncf {y} : f32 to {case.out}")
        elif case.out != "f32":
            raise ValueError(f"case {case.name}: an epilogue stores f32, f16 or bf16, not {case.out}")
        block_args = ", ".join(f"{params[v]}: {scalar.get(el, el)}" for v, el in inputs)
        lines.append(f"%y = tile.map {', '.join(v for v, _ in inputs)} : "
                     f"{', '.join(tile(el) for _, el in inputs)} -> {tile(case.out)} {{")
        lines.append(f"^bb0({block_args}):")
        lines += [f"  {line}" for line in body.lines]
        lines.append(f"  tile.yield {y} : {case.out}")
        lines.append("}")
        result = "%y"
    lines.append(f"tile.store {result}, %d[0, 0] : {tile(case.out)}, {types['d']}")
    lines.append("func.return")
    signature = ", ".join(f"%{a}: {t}" for a, t in args)
    text = "\n".join([f"func.func @{name}({signature}) {{", *(f"  {line}" for line in lines), "}", ""])
    return text, name


# ---------------------------------------------------------------------------------------------
# References and checks: operators only (and lib.erf / lib.tanh), for torch and NumPy alike
# ---------------------------------------------------------------------------------------------

U32 = 2.0**-24  # f32 unit roundoff (rn)
# Half an ulp of D relative to its value, and an absolute floor (half the smallest subnormal step;
# f32 and bf16: the smallest normal, for flushing).
OUT_ROUND = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": U32, "si32": 0.0}
OUT_FLOOR = {"f16": 2.0**-25, "bf16": 2.0**-126, "f32": 2.0**-126, "si32": 0.0}
# RMS of the error at most this times the RMS of the reference (about four half-ulps of D): the
# worst-case accumulation bound is loose at large K (about 4% of |y| at K = 4096 with these
# inputs), so an error systematic but inside it (a scale 0.5% off) is caught here.
RMS_LIMIT = {"f16": 2.0**-9, "bf16": 2.0**-6, "f32": 2.0**-9, "si32": 0.0}
# Activation: (Lipschitz constant, relative error of its f32 evaluation). GELU's slope peaks at
# 1.129 (x = sqrt 2); erf as an f32 sequence (scalar_math) well inside 2^-14; tanh.approx.f32's
# relative error is 2^-10.987, which 0.5 x tanh(.) halves.
ACT_ERROR = {None: (1.0, 0.0), "relu": (1.0, 0.0), "gelu": (1.13, 2.0**-14), "gelu-tanh": (1.13, 2.0**-11)}


def activation(act: str | None, x, lib):
    """The activation on float64 `x` (a torch tensor with lib=torch, or NumPy with a lib that
    has erf and tanh)."""
    if act is None:
        return x
    if act == "relu":
        return (abs(x) + x) * 0.5  # exact in binary floating point
    if act == "gelu":
        return 0.5 * x * (1.0 + lib.erf(x * math.sqrt(0.5)))
    if act == "gelu-tanh":
        return 0.5 * x * (1.0 + lib.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
    raise ValueError(f"unknown activation {act!r}")


def reference(case: Case, ab, s, bias=None, sa=None, sb=None, *, lib, act: str | None = "case") -> dict:
    """Float64 product, pre-activation and result of `case` from the exact product `ab` =
    A x B and S = |A| x |B| (None for integers: exact), the bias and scale vectors as float64;
    `act` overrides the case's activation (a peer that computes another form)."""
    act = case.act if act == "case" else act
    prod, mag = ab, s
    if case.dequant:
        scale = sa[:, None] * sb[None, :]
        prod = ab * scale
        mag = None if s is None else s * scale
    pre = prod + bias[None, :] if case.bias else prod
    return {"prod": prod, "mag": mag, "pre": pre, "y": activation(act, pre, lib), "act": act}


def epilogue_check(got, ref: dict, *, out: str, k: int, peer: bool = False) -> str | None:
    """None when float64 `got` passes both checks (module docstring) against `reference`'s
    `ref`, else what went wrong. `out` is the element type D was stored in."""
    y, pre, prod, mag = ref["y"], ref["pre"], ref["prod"], ref["mag"]
    lipschitz, act_error = ACT_ERROR[ref["act"]]
    u = OUT_ROUND[out]
    if out == "si32":  # exact
        return gb.out_of_bound(got, y, 0.0)
    err = 4 * U32 * (abs(prod) + abs(pre))
    if mag is not None:
        err = err + (k + 1) * 2.0**-22 * mag + 2.0**-126
    bound = lipschitz * err + act_error * abs(pre) + u * abs(y) + OUT_FLOOR[out]
    if peer:
        bound = bound + 4 * u * (abs(prod) + abs(pre))
    problem = gb.out_of_bound(got, y, bound)
    if problem:
        return problem
    diff = got - y
    rms, size = float((diff * diff).mean()) ** 0.5, float((y * y).mean()) ** 0.5
    if rms > RMS_LIMIT[out] * size:
        return (f"RMS error {rms:.3g} is {rms / max(size, 1e-300):.3g} of the reference's RMS {size:.3g}; "
                f"at most {RMS_LIMIT[out]:g} for {out}")
    return None


# ---------------------------------------------------------------------------------------------
# Inputs (torch, on the device)
# ---------------------------------------------------------------------------------------------

SEED = 0
S8_SQUARE = 128.0**2 / 3.0  # about E[a^2] of uniform -128..127


def make_inputs(a_type: str, shape: Shape, torch, seed: int = SEED) -> dict:
    """Random A, B and epilogue vectors of one input family, the same in every process, with
    values about 1 after the epilogue (B ~ N(0, 1/K); s8 scales about 1/(sqrt(K) E[a^2])), and
    the float64 product and S = |A| x |B|. `b` is B as torch takes it, `b_store` what tilemma's
    memref holds (s8: the K-major buffer, `b` its transposed view)."""
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    if a_type == "si8":
        a = torch.randint(-128, 128, (m, k), generator=gen, device=dev, dtype=torch.int8)
        b_store = torch.randint(-128, 128, (n, k), generator=gen, device=dev, dtype=torch.int8)
        b = b_store.t()  # k x n, column-major: torch._int_mm's fast path and tilemma's layout
        level = (math.sqrt(k) * S8_SQUARE) ** -0.5
        sa = (torch.rand(m, generator=gen, device=dev) + 0.5) * level
        sb = (torch.rand(n, generator=gen, device=dev) + 0.5) * level
        bias = torch.randn(n, generator=gen, device=dev).to(torch.float16)
        ab, s = a.double() @ b.double(), None  # exact: |sums| < 2^53
    else:
        dt = getattr(torch, {"f16": "float16", "bf16": "bfloat16"}[a_type])
        a = torch.randn(m, k, generator=gen, device=dev).to(dt)
        b_store = b = (torch.randn(k, n, generator=gen, device=dev) / math.sqrt(k)).to(dt)
        sa = sb = None
        bias = torch.randn(n, generator=gen, device=dev).to(dt)
        ad, bd = a.double(), b.double()
        ab, s = ad @ bd, ad.abs() @ bd.abs()
    return {"a": a, "b": b, "b_store": b_store, "sa": sa, "sb": sb, "bias": bias, "ab": ab, "s": s}


def case_reference(case: Case, inp: dict, torch, act: str | None = "case") -> dict:
    f64 = lambda x: None if x is None else x.double()  # noqa: E731
    return reference(case, inp["ab"], inp["s"], f64(inp["bias"]), f64(inp["sa"]), f64(inp["sb"]),
                     lib=torch, act=act)


TORCH_DTYPE = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "si32": "int32"}
SENTINEL = {"f16": math.nan, "bf16": math.nan, "f32": math.nan, "si32": -(1 << 31)}


def output(el: str, shape: Shape, torch):
    """D of element `el`, filled with what an unwritten element would fail the check with."""
    m, n, _ = shape
    return torch.empty(m, n, device="cuda", dtype=getattr(torch, TORCH_DTYPE[el])).fill_(SENTINEL[el])


def checked(row: EpiRow, got, ref: dict, out: str, shape: Shape, peer: bool) -> None:
    problem = epilogue_check(got.double(), ref, out=out, k=shape[2], peer=peer)
    if problem:
        raise AssertionError(f"wrong result: {problem}")
    row.check = "exact" if out == "si32" else ("sanity" if peer else "bound")


def timed(rows_fns: list[tuple[EpiRow, Callable[[], Any]]], shape: Shape, torch) -> None:
    """Time the functions with interleaved samples (gemm_bench.median_ms_interleaved)."""
    results = gb.median_ms_interleaved([fn for _, fn in rows_fns], torch)
    for (row, _), (ms, how) in zip(rows_fns, results):
        row.ms, row.timing = ms, how
        row.tflops = flops(shape) / ms / 1e9


# ---------------------------------------------------------------------------------------------
# The implementations
# ---------------------------------------------------------------------------------------------


def tilemma_pointers(case: Case, inp: dict, d) -> list[int]:
    names = ["a", "b_store"] + (["sa", "sb"] if case.dequant else []) + (["bias"] if case.bias else [])
    return [inp[x].data_ptr() for x in names] + [d.data_ptr()]


def tilemma_rows(case: Case, shape: Shape, inp: dict, ref: dict, torch, deadline: float, sm: str,
                 config: str, compiled: dict) -> list[EpiRow]:
    """`tilemma-plain` and `tilemma` for one case: each compiled (the plain kernel once per input
    family and shape, in `compiled`), launched once and checked; then timed together."""
    label = shape_label(shape)
    plain = case.plain()
    launches: dict[str, Callable[[], None]] = {}
    outputs = []  # the D buffers, alive while their kernels are timed
    rows = []
    for impl, c in (("tilemma-plain", plain), ("tilemma", case)):
        row = EpiRow(case.name, shape[0], impl, shape=label)

        def body(row: EpiRow, c: Case = c) -> EpiRow:
            key = (dataclasses.replace(c, name=""), shape, config)  # plain: once per family
            if key not in compiled:
                text, name = epilogue_ir(c, shape)
                compiled[key] = gb.tilemma_kernel(text, name, gb.compile_options(sm, **gb.parse_config(config)))
            kernel = compiled[key]
            row.config = kernel.config
            d = output(c.out, shape, torch)
            outputs.append(d)
            pointers = tilemma_pointers(c, inp, d)
            launch = lambda: kernel.launch(pointers, torch.cuda.current_stream().cuda_stream)  # noqa: E731
            launch()
            torch.cuda.synchronize()
            checked(row, d, ref if c is case else case_reference(c, inp, torch), c.out, shape, peer=False)
            launches[row.impl] = launch
            return row

        rows.append(gb.guarded(row, body, deadline))
    ready = [(r, launches[r.impl]) for r in rows if r.impl in launches and not r.error]

    def timing(row: EpiRow) -> EpiRow:
        timed(ready, shape, torch)
        return row

    if ready:
        probe = gb.guarded(EpiRow(case.name, shape[0], "timing"), timing, deadline)
        if probe.error:
            for r, _ in ready:
                r.error = probe.error
    return rows


def peer_rows(case: Case, shape: Shape, inp: dict, ref: dict, torch, deadline: float,
              skip: Sequence[str] = ()) -> list[EpiRow]:
    """cuBLASLt's fused epilogue (where it has this one) and the unfused torch chain, but those
    in `skip`."""
    import torch.nn.functional as F

    a, b, bias = inp["a"], inp["b"], inp["bias"]
    label = shape_label(shape)
    rows = []
    jobs: list[tuple[str, Callable[[], Any], str, str | None]] = []  # impl, fn, config, act form
    if case.a != "si8":
        if not case.bias and case.act is None:
            jobs.append(("cublaslt", lambda: a @ b, f"torch.matmul ({case.a} out)", None))
        elif case.bias and case.act is not None:
            form = "relu" if case.act == "relu" else "gelu-tanh"
            use_gelu = case.act != "relu"
            note = f"torch._addmm_activation(use_gelu={use_gelu})"
            if case.act == "gelu":
                note += ": GELU's tanh form (cuBLASLt has no erf form)"
            jobs.append(("cublaslt", lambda: torch._addmm_activation(bias, a, b, use_gelu=use_gelu), note, form))
        if case.bias and case.act is not None:
            if case.act == "relu":
                fn = lambda: F.relu(a @ b + bias)  # noqa: E731
            else:
                approximate = "tanh" if case.act == "gelu-tanh" else "none"
                fn = lambda: F.gelu(a @ b + bias, approximate=approximate)  # noqa: E731
            jobs.append(("torch", fn, f"{case.act}(a @ b + bias), {case.a}", case.act))
    elif case.dequant:
        sa, sb = inp["sa"], inp["sb"]
        fn = lambda: (torch._int_mm(a, b).float() * sa[:, None] * sb[None, :] + bias).half()  # noqa: E731
        jobs.append(("torch", fn, "torch._int_mm (B column-major), dequant + bias in f32, .half()", None))
    for impl, fn, note, form in jobs:
        if impl in skip:
            continue

        def body(row: EpiRow, fn=fn, note=note, form=form) -> EpiRow:
            row.config = note
            got = fn()
            torch.cuda.synchronize()
            peer_ref = ref if form == case.act else case_reference(case, inp, torch, act=form)
            out = {v: k for k, v in TORCH_DTYPE.items()}[str(got.dtype).removeprefix("torch.")]
            checked(row, got, peer_ref, out, shape, peer=True)
            timed([(row, fn)], shape, torch)
            return row

        rows.append(gb.guarded(EpiRow(case.name, shape[0], impl, shape=label), body, deadline))
    return rows


def triton_rows(impl: str, case: Case, shape: Shape, inp: dict, ref: dict, torch, deadline: float) -> list[EpiRow]:
    """The best of `triton_epilogue.CONFIGS` (and, for s8, of both B layouts) for one case
    (worker side)."""
    from benchmarks import triton_epilogue

    a = inp["a"]
    layouts = {"B row-major": inp["b"]}
    if case.b_col:  # the K-major buffer tilemma and cuBLAS get, and a row-major copy
        layouts = {"B column-major": inp["b"], "B row-major": inp["b"].contiguous()}
    vectors = {"bias": inp["bias"] if case.bias else None, "sa": inp["sa"] if case.dequant else None,
               "sb": inp["sb"] if case.dequant else None}
    d = output(case.out, shape, torch)
    best: EpiRow | None = None
    failures = []
    for layout, b in layouts.items():
        for config in triton_epilogue.CONFIGS[a.element_size()]:
            desc = "BMxBNxBK={}x{}x{} warps={} stages={}".format(*config)
            row = EpiRow(case.name, shape[0], impl, shape=shape_label(shape),
                         config=desc + (f", {layout}" if case.b_col else ""))

            def body(row: EpiRow, config=config, b=b) -> EpiRow:
                d.fill_(SENTINEL[case.out])
                compiled = triton_epilogue.matmul(a, b, d, config, act=case.act, **vectors)
                torch.cuda.synchronize()
                row.instruction = triton_epilogue.instruction(compiled.asm["ptx"])
                checked(row, d, ref, case.out, shape, peer=True)
                timed([(row, lambda: triton_epilogue.matmul(a, b, d, config, act=case.act, **vectors))],
                      shape, torch)
                return row

            row = gb.guarded(row, body, deadline)
            if row.ok and (best is None or row.tflops > best.tflops):  # type: ignore[operator]
                best = row
            elif not row.ok:
                failures.append(f"[{row.config}] {row.error}")
    label = shape_label(shape)
    if best is None:
        return [EpiRow(case.name, shape[0], impl, shape=label, error="; ".join(failures) or "no configuration")]
    if failures:
        best.config += f" ({len(failures)} other configs failed: {failures[0][:120]})"
    if impl == "triton-mma.sync" and best.instruction == "wgmma":
        best.error = "DISABLE_MMA_V3=1 was ignored: the kernel uses wgmma"
    return [best]


# ---------------------------------------------------------------------------------------------
# Driving
# ---------------------------------------------------------------------------------------------


def _by_family(cases: list[Case]) -> dict[str, list[Case]]:
    """Cases grouped by input family (inputs are made once per family and shape)."""
    out: dict[str, list[Case]] = {}
    for c in cases:
        out.setdefault(c.a, []).append(c)
    return out


def run_triton_worker(impl: str, cases: list[Case], shapes: list[Shape], budget: float) -> int:
    import torch

    deadline = time.monotonic() + budget
    device = torch.cuda.get_device_name()
    for shape in shapes:
        for fam, fam_cases in _by_family(cases).items():
            inp: dict | None = None
            try:
                inp = make_inputs(fam, shape, torch)
            except Exception as exc:
                traceback.print_exc()
                failure = gb._error(exc)
            for case in fam_cases:
                try:
                    if inp is None:
                        raise RuntimeError(f"inputs: {failure}")
                    rows = triton_rows(impl, case, shape, inp, case_reference(case, inp, torch), torch, deadline)
                except Exception as exc:
                    traceback.print_exc()
                    rows = [EpiRow(case.name, shape[0], impl, shape=shape_label(shape), error=gb._error(exc))]
                for row in rows:
                    row.device = device
                    print("ROW " + json.dumps(asdict(row)), flush=True)
            del inp
            torch.cuda.empty_cache()
    return 0


def triton_subprocess(impl: str, cases: list[Case], shapes: list[Shape], budget: float) -> list[EpiRow]:
    """One Triton mode in its own process (gemm_bench.worker_subprocess); every (case, shape)
    it did not report becomes an error row."""
    rows, why = gb.worker_subprocess(
        "benchmarks.epilogue_bench", impl,
        ["--cases", *(c.name for c in cases), "--sizes", *map(shape_label, shapes)], budget, EpiRow)
    done = {(r.family, r.shape) for r in rows}
    rows += [EpiRow(c.name, s[0], impl, shape=shape_label(s), error=why)
             for s in shapes for c in cases if (c.name, shape_label(s)) not in done]
    return rows  # type: ignore[return-value]


def run(args: argparse.Namespace) -> list[EpiRow]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("epilogue_bench: torch sees no CUDA device; this benchmark needs the GPU")
    started = time.monotonic()
    deadline = started + args.budget
    modes = [m for m in TRITON_MODES if m not in args.skip]
    # tilemma and the torch peers first, leaving the Triton workers their share of the budget
    main_deadline = started + args.budget * (0.4 if modes else 1.0)
    device = torch.cuda.get_device_name()
    cases = [CASES[c] for c in args.cases]
    rows: list[EpiRow] = []
    compiled: dict = {}
    for shape in args.shapes:
        for fam, fam_cases in _by_family(cases).items():
            print(f"{fam} {shape_label(shape)}: {' '.join(c.name for c in fam_cases)}", file=sys.stderr, flush=True)
            try:
                inp = make_inputs(fam, shape, torch)
            except Exception as exc:
                traceback.print_exc()
                rows += [EpiRow(c.name, shape[0], "tilemma", shape=shape_label(shape), error=gb._error(exc))
                         for c in fam_cases]
                continue
            for case in fam_cases:
                try:
                    ref = case_reference(case, inp, torch)
                except Exception as exc:
                    traceback.print_exc()
                    rows.append(EpiRow(case.name, shape[0], "tilemma", shape=shape_label(shape), error=gb._error(exc)))
                    continue
                rows += tilemma_rows(case, shape, inp, ref, torch, main_deadline, args.sm, args.tilemma_config,
                                     compiled)
                rows += peer_rows(case, shape, inp, ref, torch, main_deadline, args.skip)
                del ref
                torch.cuda.empty_cache()
            del inp
            compiled.clear()
            torch.cuda.empty_cache()
    for i, impl in enumerate(modes):
        left = deadline - time.monotonic()
        print(f"{impl}: {left:.0f} s of budget left", file=sys.stderr, flush=True)
        if left > 5:
            rows += triton_subprocess(impl, cases, list(args.shapes), left / (len(modes) - i))
        else:
            rows += [EpiRow(c.name, s[0], impl, shape=shape_label(s), error="skipped: time budget spent")
                     for s in args.shapes for c in cases]
    for row in rows:
        row.device = row.device or device
    return rows


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _cost(by: dict[str, Row]) -> str:
    """The epilogue's cost: fused time / plain time - 1 (issue 21: at most +3%)."""
    fused, plain = by.get("tilemma"), by.get("tilemma-plain")
    if fused is None or plain is None or not fused.ok or not plain.ok:
        return "—"
    return f"{100 * (fused.ms / plain.ms - 1):+.1f}%"  # type: ignore[operator]


RATIOS = (
    ("epilogue cost", _cost),
    ("tilemma/Triton-ms", lambda by: gb._ratio(by.get("tilemma"), by.get("triton-mma.sync"))),
    ("tilemma/Triton", lambda by: gb._ratio(by.get("tilemma"), by.get("triton"))),
    ("tilemma/cuBLASLt", lambda by: gb._ratio(by.get("tilemma"), by.get("cublaslt"))),
)
LEGEND = ("TFLOP/s (TOP/s for s8). tilemma-plain: the same GEMM, no epilogue (f32/s32 D). epilogue cost: "
          "tilemma's fused time / plain time - 1 (samples interleaved). cublaslt: torch._addmm_activation "
          "(GELU: tanh form), a @ b where no epilogue; torch: unfused. wg/ms: Triton used wgmma/mma.sync.")


def _order(key: tuple) -> tuple:
    name, shape = key
    return (parse_shape(shape), list(CASES).index(name) if name in CASES else 99)


def targets(rows: list[EpiRow]) -> list[str]:
    """Issue 21's two targets, where this run measured them."""
    by: dict[tuple[str, str], dict[str, Row]] = {}
    for r in rows:
        by.setdefault((r.family, r.shape), {})[r.impl] = r
    out = []
    costs = [(float(_cost(v)[:-1]) / 100, k) for k, v in by.items() if _cost(v) != "—"]
    if costs:
        worst, (name, shape) = max(costs)
        verdict = "met" if worst <= TARGET_COST else "missed"
        out.append(f"target: epilogue cost <= {100 * TARGET_COST:.0f}%: {verdict} (largest {100 * worst:+.1f}%, "
                   f"{name} {shape})")
    for (name, shape), v in sorted(by.items(), key=lambda kv: _order(kv[0])):
        if name != "bias-gelu":
            continue
        ratio = gb._ratio(v.get("tilemma"), v.get("triton-mma.sync"))
        if ratio != "—":
            verdict = "met" if float(ratio) >= TARGET_TRITON else "missed"
            out.append(f"target: bias-gelu {shape} tilemma / Triton mma.sync >= {TARGET_TRITON}: {verdict} ({ratio})")
    return out


def table(rows: list[EpiRow]) -> str:
    text = gb.table(rows, impls=IMPLS, ratios=RATIOS, keys=("family", "shape"), headers=("case", "shape"),
                    order=_order, legend=LEGEND, config_impls=("tilemma", "tilemma-plain", "cublaslt", "torch",
                                                              "triton", "triton-mma.sync"))
    extra = targets(rows)
    return text + ("\n" + "\n".join(extra) if extra else "")


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.epilogue_bench", description=__doc__.split("\n")[0])
    p.add_argument("--cases", nargs="+", default=list(CASES), metavar="CASE",
                   help=f"cases to run (default all: {' '.join(CASES)})")
    p.add_argument("--sizes", nargs="+", default=["4096"], metavar="SIZE",
                   help="N (square) or MxNxK, e.g. 2048 4096 8192x4096x4096 (default 4096)")
    p.add_argument("--skip", nargs="+", default=[], metavar="IMPL", choices=[*TRITON_MODES, *PEERS],
                   help="leave out peers: triton, triton-mma.sync, cublaslt, torch")
    p.add_argument("--sm", default="90", help="target tilemma compiles for (default 90)")
    p.add_argument("--tilemma-config", default="", metavar="CFG",
                   help="tilemma configuration for the plain and fused kernels, e.g. "
                   "'warps=2x4,warp-tile=4x8,stages=3' (default: the compiler's)")
    p.add_argument("--csv", help="write every row to this CSV file")
    p.add_argument("--budget", type=float, default=3600.0,
                   help="seconds; measurements not started by then become 'skipped' rows")
    p.add_argument("--print-ir", action="store_true", help="print each case's tile IR and stop (no GPU)")
    p.add_argument("--triton-worker", choices=list(TRITON_MODES), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        p.error(f"unknown case {', '.join(unknown)}: choose from {', '.join(CASES)}")
    try:
        args.shapes = [parse_shape(s) for s in args.sizes]
    except ValueError as exc:
        p.error(str(exc))
    bad = [s for s in args.shapes if any(d < 16 or d % 16 for d in s)]
    if bad:
        p.error(f"size {shape_label(bad[0])}: M, N and K must be positive multiples of 16")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cases = [CASES[c] for c in args.cases]
    if args.print_ir:
        for shape in args.shapes:
            for case in cases:
                print(epilogue_ir(case, shape)[0])
        return 0
    if args.triton_worker:
        return run_triton_worker(args.triton_worker, cases, args.shapes, args.budget)
    try:
        rows = run(args)
    except ModuleNotFoundError as exc:
        print(f"epilogue_bench needs torch and a GPU: {exc}", file=sys.stderr)
        return 1
    if args.csv:
        gb.write_csv(rows, args.csv)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
