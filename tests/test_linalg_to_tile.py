"""linalg input, end to end: linalg-to-tile, the whole pipeline, the PTX run in the emulator, every
element checked against NumPy: linalg.matmul on kernel memrefs (C updated in place: C += A x B),
then what frontends emit (tests/data/frontends), and plain xdsl-opt with the plugin."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text, parse
from tilemma.compiler.driver.runner import bind_sizes, launch_shapes, run_compiled
from tilemma.dialects import tile
from tilemma.passes.tile.linalg_to_tile import LinalgToTile
from tests.inprocess import run_main
from tilemma.compiler.driver import cli

CASES = {
    # name: (M, N, K, A/B element, C element, C layout)
    "f16_f32_odd": (37, 29, 45, "f16", "f32", ""),
    "f16_f32_strided_c": (37, 29, 45, "f16", "f32", ", strided<[40, 1], offset: 5>"),
    "s8_s32_odd": (37, 29, 45, "i8", "i32", ""),
    "bf16_f32_staged": (64, 64, 64, "bf16", "f32", ""),  # aligned rows: cp.async
}


def linalg_kernel(name, m, n, k, ab, c, layout=""):
    a_t, b_t, c_t = f"memref<{m}x{k}x{ab}>", f"memref<{k}x{n}x{ab}>", f"memref<{m}x{n}x{c}{layout}>"
    return (
        f"func.func @{name}(%a: {a_t}, %b: {b_t}, %c: {c_t}) {{\n"
        f"  linalg.matmul ins(%a, %b : {a_t}, {b_t}) outs(%c : {c_t})\n"
        "  func.return\n}\n"
    )


def _adversarial(rng, shape, kind):
    if kind == "int8":
        x = rng.integers(-128, 128, shape)
        x[rng.random(shape) < 0.3] = -128  # the extremes: -128 * -128 products
        x[rng.random(shape) < 0.1] = 127
        return x.astype(np.int8)
    dtype = {"f16": np.float16}.get(kind)
    if dtype is None:
        import ml_dtypes

        dtype = ml_dtypes.bfloat16
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 12, shape)  # wide exponents
    x[rng.random(shape) < 0.02] = 65504.0 if kind == "f16" else 3e38 ** 0.25  # near the top
    x[rng.random(shape) < 0.1] = 0.0
    return x.astype(dtype)


@pytest.mark.parametrize("case", CASES)
def test_linalg_matmul_runs_exactly(case):
    m, n, k, ab, c_type, layout = CASES[case]
    [kernel] = compile_text(linalg_kernel(case, m, n, k, ab, c_type, layout), "<test>", CompileOptions(sm="90"))
    assert kernel.abi.params[2].roles == ("c", "d")  # C is read and written in place
    # odd 16-bit rows are gathered into shared memory; an 8-bit B with an odd N is filled byte by byte
    assert kernel.abi.shared_bytes > 0
    # The runner's own random inputs and reference (sentinels outside the tiles)...
    assert run_compiled(kernel, 1, "emulator").ok
    # ...and adversarial inputs checked here against NumPy, every element.
    rng = np.random.default_rng(7)
    if ab == "i8":
        a, b = _adversarial(rng, (m, k), "int8"), _adversarial(rng, (k, n), "int8")
        c = rng.integers(-(2**31), 2**31, (m, n), dtype=np.int64)
        c[0, :] = 2**31 - 1  # wraps: linalg's i32 addition and mma's s32 both wrap
        c = c.astype(np.int32)
    else:
        a, b = _adversarial(rng, (m, k), ab), _adversarial(rng, (k, n), ab)
        c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-20, 20, (m, n))).astype(np.float32)
    result = run_compiled(kernel, 1, "emulator", inputs={"a": a, "b": b, "c": c})
    assert result.ok, result.detail
    got = result.outputs["c"]
    assert got.shape == (m, n)
    if ab == "i8":
        want = (a.astype(np.int64) @ b.astype(np.int64) + c) % 2**32
        want = np.where(want >= 2**31, want - 2**32, want).astype(np.int32)
        assert np.array_equal(got, want)
    else:
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        want = a64 @ b64 + c
        scale = np.abs(a64) @ np.abs(b64) + np.abs(c)
        assert np.all(np.abs(got - want) <= (k + 1) * 2.0**-23 * scale), np.max(np.abs(got - want) / scale)


def test_linalg_and_tile_ir_compile_to_the_same_ptx():
    """The converted kernel is the one a user writes in tile IR (C loaded, mma'd, stored back)."""
    tile_ir = """func.func @k(%a: memref<37x45xf16>, %b: memref<45x29xf16>, %c: memref<37x29xf32>) {
  %ta = tile.load %a[0, 0] : memref<37x45xf16> -> !tile.tile<37x45xf16>
  %tb = tile.load %b[0, 0] : memref<45x29xf16> -> !tile.tile<45x29xf16>
  %tc = tile.load %c[0, 0] : memref<37x29xf32> -> !tile.tile<37x29xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<37x45xf16>, !tile.tile<45x29xf16>, !tile.tile<37x29xf32> -> !tile.tile<37x29xf32>
  tile.store %td, %c[0, 0] : !tile.tile<37x29xf32>, memref<37x29xf32>
  func.return
}
"""
    options = CompileOptions(sm="90")
    [from_linalg] = compile_text(linalg_kernel("k", 37, 29, 45, "f16", "f32"), "<linalg>", options)
    [from_tile] = compile_text(tile_ir, "<tile>", options)
    assert from_linalg.ptx == from_tile.ptx


@pytest.mark.parametrize(
    "text, message",
    [
        (linalg_kernel("k", 16, 8, 16, "f32", "f32"), "f32 x f32 has no exact tensor-core instruction"),
        (linalg_kernel("k", 16, 8, 16, "f16", "f64"), "tile.mma"),
    ],
)
def test_refusals_are_located(text, message):
    with pytest.raises(LocatedVerifyError) as e:
        compile_text(text, "in.mlir", CompileOptions(sm="90"))
    assert message in str(e.value) and "in.mlir:" in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------
# What frontends emit (tests/data/frontends: torch-mlir / IREE output, bufferized), converted,
# compiled for sm_90 and run in the emulator, each output checked against a NumPy model of what
# the frontend's program computes (torch's formulas in float64), independent of tile IR.
# ---------------------------------------------------------------------------------------------

FRONTENDS = Path(__file__).resolve().parent / "data" / "frontends"
BIN = Path(sys.executable).parent

_erf = np.vectorize(math.erf)


def _f16(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _linear_inputs(rng):
    """x (37 x 64), the Linear's weight w (91 x 64: the kernel takes w.t(), its K-major view),
    bias (91)."""
    x, w, b = _f16(rng, 37, 64), _f16(rng, 91, 64, scale=0.5), _f16(rng, 91)
    return {"arg0": x, "arg1": w.T, "arg2": b}, (x, w, b)


def _linear(act):
    def model(x, w, b):
        pre = x.astype(np.float64) @ w.astype(np.float64).T
        h = pre + b.astype(np.float64)
        # f16 arithmetic after the f32 accumulation: a few roundings of 2^-11 of what they round
        return act(h), 2.0**-7 * (1 + np.abs(pre) + np.abs(b.astype(np.float64)))
    return model


def _gelu_tanh(h):
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


def _int8_inputs(rng):
    x = rng.integers(-128, 128, (37, 64)).astype(np.int8)
    w = rng.integers(-128, 128, (91, 64)).astype(np.int8)
    x[0, :] = -128  # the extremes: -128 * -128 products
    w[:, 0] = -128
    sx = rng.uniform(0.001, 0.01, 37).astype(np.float32)
    sw = rng.uniform(0.001, 0.01, 91).astype(np.float32)
    bias = _f16(rng, 91)
    return {"x": x, "w": w.T, "sx": sx, "sw": sw, "bias": bias}, (x, w, sx, sw, bias)


def _int8_model(x, w, sx, sw, bias):
    acc = x.astype(np.int64) @ w.astype(np.int64).T  # exact in i32
    want = acc * sx.astype(np.float64)[:, None] * sw.astype(np.float64)[None, :] + bias.astype(np.float64)
    return want, 2.0**-10 * np.abs(want) + 2.0**-14


def _bmm_inputs(rng):
    a, b = _f16(rng, 3, 37, 48), _f16(rng, 3, 48, 29)
    return {"arg0": a, "arg1": b}, (a, b)


def _bmm_model(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    return want, 2.0**-10 * np.abs(want) + 49 * 2.0**-23 * (np.abs(a64) @ np.abs(b64))


def _ta_inputs(rng):
    import ml_dtypes

    a = rng.standard_normal((64, 37)).astype(ml_dtypes.bfloat16)  # stored K x M
    b = rng.standard_normal((64, 91)).astype(ml_dtypes.bfloat16)
    c = rng.standard_normal((37, 91)).astype(np.float32)
    return {"a": a.T, "b": b, "c": c}, (a, b, c)


def _ta_model(a, b, c):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64.T @ b64 + c
    return want, 65 * 2.0**-23 * (np.abs(a64.T) @ np.abs(b64) + np.abs(c))


# file: (output argument, inputs(rng) -> (named arrays, model arguments), model -> (want, bound))
FRONTEND_CASES = {
    "linear_bias_gelu_f16": ("arg3", _linear_inputs, _linear(lambda h: 0.5 * h * (1 + _erf(h / math.sqrt(2))))),
    "linear_bias_gelu_tanh_f16": ("arg3", _linear_inputs, _linear(_gelu_tanh)),
    "linear_bias_relu_f16": ("arg3", _linear_inputs, _linear(lambda h: np.maximum(h, 0))),
    "linear_bias_silu_f16": ("arg3", _linear_inputs, _linear(lambda h: h / (1 + np.exp(-h)))),
    "int8_dequant": ("out", _int8_inputs, _int8_model),
    "bmm_f16": ("arg2", _bmm_inputs, _bmm_model),
    "matmul_transpose_a_bf16": ("c", _ta_inputs, _ta_model),
}


def test_every_frontend_input_has_a_case():
    assert sorted(p.stem for p in FRONTENDS.glob("*.mlir")) == sorted(FRONTEND_CASES)


@pytest.mark.parametrize("name", FRONTEND_CASES)
def test_frontend_input_converts_to_tile_ir(name):
    """Only tile ops are left (and func.return); the temporaries are gone; it verifies."""
    module, _ = parse((FRONTENDS / f"{name}.mlir").read_text(), name)
    LinalgToTile().apply(None, module)  # type: ignore[arg-type]
    module.verify()
    left = {op.name for op in module.walk()} - {"builtin.module", "func.func", "func.return"}
    assert all(n.startswith("tile.") or n.startswith(("arith.", "math.")) for n in left), left
    for op in module.walk():
        if op.name.startswith(("arith.", "math.")):
            assert op.parent_op().name == "tile.map", op.name  # only inside map bodies


def _dtype(element: str):
    import ml_dtypes

    return {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
            "si32": np.int32, "si8": np.int8, "ui8": np.uint8}[element]


_CMPF = {"ugt": lambda x, y: (x > y) | np.isnan(x) | np.isnan(y), "ogt": np.greater, "olt": np.less,
         "ult": lambda x, y: (x < y) | np.isnan(x) | np.isnan(y), "oge": np.greater_equal, "ole": np.less_equal}
_PREDICATES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true"]
_MATH = {"math.erf": _erf, "math.tanh": np.tanh, "math.exp": np.exp}


def _eval_body(block, args):
    """A tile.map body on NumPy arrays, each op rounded to its result type as MLIR's arith."""
    from xdsl.dialects.builtin import IntegerType

    env = dict(zip(block.args, args))
    for op in block.ops:
        if op.name == "tile.yield":
            return [env[v] for v in op.operands]
        x = [env[v] for v in op.operands]
        t = op.results[0].type
        dt = np.int64 if isinstance(t, IntegerType) and t.width.data > 1 else None
        if dt is None and not isinstance(t, IntegerType):
            dt = _dtype(str(t))
        f64 = [np.asarray(v, np.float64) for v in x]
        name = op.name
        if name == "arith.constant":
            r = np.array(op.value.value.data, dt)
        elif name in ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf", "arith.minimumf"):
            fn = {"addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide,
                  "maximumf": np.maximum, "minimumf": np.minimum}[name.split(".")[1]]
            r = fn(f64[0], f64[1]).astype(dt)  # exact in f64 for 16-bit inputs, then one rounding
            if dt == np.float32:
                r = fn(x[0].astype(np.float32), x[1].astype(np.float32)).astype(dt)
        elif name == "arith.negf":
            r = (-x[0]).astype(dt)
        elif name in ("arith.truncf", "arith.extf", "arith.sitofp"):
            r = np.asarray(x[0]).astype(np.float64).astype(dt) if name == "arith.sitofp" else np.asarray(x[0]).astype(dt)
        elif name == "arith.cmpf":
            r = _CMPF[_PREDICATES[op.predicate.value.data]](f64[0], f64[1])
        elif name == "arith.select":
            r = np.where(x[0], x[1], x[2])
        elif name in ("arith.addi", "arith.muli"):
            r = (x[0].astype(np.int64) + x[1] if name == "arith.addi" else x[0].astype(np.int64) * x[1])
            r = ((r + 2**31) % 2**32 - 2**31).astype(np.int64)
        elif name in _MATH:
            with np.errstate(over="ignore"):
                r = _MATH[name](f64[0]).astype(dt)
        elif name == "math.fma":
            r = (f64[0] * f64[1] + f64[2]).astype(dt)
        else:
            raise NotImplementedError(name)
        env[op.results[0]] = r
    raise AssertionError("no tile.yield")


def run_tile_ir(module, inputs):
    """What a converted kernel computes, op by op in NumPy (the mma exactly, in float64, then
    rounded to the accumulator's type): the kernel's stored outputs by argument name. Checks
    linalg-to-tile's semantics before (and independently of) the lowering."""
    from xdsl.dialects import func

    [kernel] = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    memory = {a: np.asarray(inputs[a.name_hint]) for a in kernel.body.block.args if a.name_hint in inputs}
    env, outputs = {}, {}
    for op in kernel.body.block.ops:
        if isinstance(op, tile.LoadOp):
            env[op.result] = memory[op.source]
        elif isinstance(op, tile.BroadcastOp):
            src, shape = memory[op.source], op.result.type.get_shape()
            dims = op.dim_values()
            if not dims:
                src = src.reshape(-1)[:1].reshape([1] * len(shape))
            else:
                at = [1] * len(shape)
                for i, d in enumerate(dims):
                    at[d] = src.shape[i]
                src = src.reshape(at)
            env[op.result] = np.broadcast_to(src, shape)
        elif isinstance(op, tile.ConstantOp):
            env[op.result] = np.full(op.result.type.get_shape(), op.scalar(), _dtype(op.result.type.element))
        elif isinstance(op, tile.MmaOp):
            a, b, c = (env[v] for v in op.operands)
            acc = op.result.type.element
            if acc == "si32":
                r = a.astype(np.int64) @ b.astype(np.int64) + c
                env[op.result] = ((r + 2**31) % 2**32 - 2**31).astype(np.int32)
            else:
                env[op.result] = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)).astype(_dtype(acc))
        elif isinstance(op, tile.MapOp):
            results = _eval_body(op.body.block, [env[v] for v in op.inputs])
            for r, v in zip(op.outputs, results):
                env[r] = np.asarray(v).astype(_dtype(r.type.element))
        elif isinstance(op, tile.StoreOp):
            outputs[op.dest.name_hint] = env[op.value]
    return outputs


@pytest.mark.parametrize("name", FRONTEND_CASES)
def test_frontend_input_converts_to_what_the_frontend_computes(name):
    """The tile IR linalg-to-tile makes, evaluated op by op, is the frontend's program: the
    NumPy model's values within its bound (no lowering involved: runs before the epilogue's)."""
    out, make_inputs, model = FRONTEND_CASES[name]
    module, _ = parse((FRONTENDS / f"{name}.mlir").read_text(), name)
    LinalgToTile().apply(None, module)  # type: ignore[arg-type]
    inputs, arrays = make_inputs(np.random.default_rng(11))
    got = run_tile_ir(module, inputs)[out].astype(np.float64)
    want, bound = model(*arrays)
    err = np.abs(got - want)
    assert np.all(err <= bound), (float(np.max(err / bound)), np.unravel_index(np.argmax(err / bound), err.shape))


@pytest.mark.parametrize("name", list(FRONTEND_CASES))
def test_frontend_input_runs_exactly_in_the_emulator(name):
    out, make_inputs, model = FRONTEND_CASES[name]
    text = (FRONTENDS / f"{name}.mlir").read_text()
    [kernel] = compile_text(text, f"{name}.mlir", CompileOptions(sm="90"))
    # The runner's random inputs, checked against its reference of the tile IR...
    first = run_compiled(kernel, 1, "emulator")
    assert first.ok, first.detail
    # ...and the frontend's program on inputs made here, against NumPy.
    inputs, arrays = make_inputs(np.random.default_rng(11))
    _runs_as_modelled(kernel, inputs, arrays, out, model)


def _runs_as_modelled(kernel, inputs, arrays, out, model):
    """`kernel` on `inputs` in the emulator: right by the runner's reference of the tile IR, every
    element, and within `model`'s bound of the program's NumPy model on the same `arrays`."""
    result = run_compiled(kernel, 1, "emulator", inputs=inputs)
    assert result.ok, result.detail
    got = result.outputs[out].astype(np.float64)
    want, bound = model(*arrays)
    assert got.shape == want.shape
    err = np.abs(got - want)
    assert np.all(err <= bound), (float(np.max(err / bound)), np.unravel_index(np.argmax(err / bound), err.shape))


@pytest.mark.parametrize("name", list(FRONTEND_CASES))
def test_tilemma_run_takes_frontend_input(name):
    proc = run_main("tilemma", cli.main, ["run", str(FRONTENDS / f"{name}.mlir"), "--sm", "90", "--on", "emulator"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "PASS" in proc.stdout and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------
# Plain xdsl-opt with the tilemma plugin: the mixed-precision matmuls frontends emit parse,
# verify and print as MLIR's (xDSL's own linalg.matmul body refuses them).
# ---------------------------------------------------------------------------------------------

XDSL_INPUTS = {
    "f16_f32": "memref<16x32xf16>, memref<32x8xf16>, memref<16x8xf32>",
    "i8_i32": "memref<16x32xi8>, memref<32x8xi8>, memref<16x8xi32>",
    "bf16_f32": "memref<16x32xbf16>, memref<32x8xbf16>, memref<16x8xf32>",
}


def xdsl_opt(*args: str) -> subprocess.CompletedProcess:
    """`xdsl-opt ARGS` run in this process through its console script's function (reading
    sys.argv), as tests.inprocess runs tilemma's: a process costs ~0.7 s of imports. The tilemma
    plugin is found as the command finds it, through the `xdsl.universe` entry point."""
    from xdsl.tools import xdsl_opt

    return run_main("xdsl-opt", lambda _: xdsl_opt.main(), args)


@pytest.mark.parametrize("case", XDSL_INPUTS)
def test_xdsl_opt_verifies_mixed_precision_matmul(case, tmp_path):
    a, b, c = XDSL_INPUTS[case].split(", ")
    src = tmp_path / "mm.mlir"
    src.write_text(
        f"func.func @k(%a: {a}, %b: {b}, %c: {c}) {{\n"
        f"  linalg.matmul ins(%a, %b : {a}, {b}) outs(%c : {c})\n"
        "  func.return\n}\n")
    proc = xdsl_opt(str(src))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"linalg.matmul ins(%a, %b : {a}, {b}) outs(%c : {c})" in proc.stdout
    # The generic form shows the body: both operands converted to C's type, as MLIR's does.
    proc = xdsl_opt(str(src), "--print-op-generic")
    assert proc.returncode == 0, proc.stderr[-3000:]
    if case == "i8_i32":
        assert proc.stdout.count('"arith.extsi"') == 2 and '"arith.muli"' in proc.stdout
    else:
        assert proc.stdout.count('"arith.extf"') == 2 and '"arith.mulf"' in proc.stdout
    # ... and the plugin's pass converts it there too.
    proc = xdsl_opt(str(src), "-p", "linalg-to-tile")
    assert proc.returncode == 0 and "tile.mma" in proc.stdout, proc.stderr[-3000:]


def test_xdsl_opt_keeps_indexing_maps_and_knows_batch_matmul(tmp_path):
    """The upstream spelling of a transposed operand parses and prints back (it used to crash
    with an IndexError, and print as the untransposed matmul when written as an attribute)."""
    src = tmp_path / "t.mlir"
    maps = ("indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
            "affine_map<(d0, d1, d2) -> (d0, d1)>]")
    src.write_text(
        "func.func @k(%a: memref<16x32xf16>, %b: memref<8x32xf16>, %c: memref<16x8xf32>, "
        "%x: memref<2x16x32xf16>, %y: memref<2x32x8xf16>, %z: memref<2x16x8xf32>) {\n"
        f"  linalg.matmul {maps} ins(%a, %b : memref<16x32xf16>, memref<8x32xf16>) outs(%c : memref<16x8xf32>)\n"
        "  linalg.batch_matmul ins(%x, %y : memref<2x16x32xf16>, memref<2x32x8xf16>) outs(%z : memref<2x16x8xf32>)\n"
        "  func.return\n}\n")
    proc = xdsl_opt(str(src))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"linalg.matmul {maps} ins(%a, %b" in proc.stdout
    assert "linalg.batch_matmul ins(%x, %y : memref<2x16x32xf16>, memref<2x32x8xf16>) outs(%z" in proc.stdout
    again = tmp_path / "again.mlir"
    again.write_text(proc.stdout)
    proc = xdsl_opt(str(again), "-p", "linalg-to-tile")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "%b: memref<32x8xf16, strided<[1, 32]>>" in proc.stdout  # B^T: the K-major view of b


# ---------------------------------------------------------------------------------------------
# Views and forms without an epilogue, end to end now: the generic form of a u8 matmul
# (arith.extui), a batch of A^T through linalg.transpose, B^T through indexing_maps with C
# copied in and D copied out (bufferization's copies).
# ---------------------------------------------------------------------------------------------

VIEW_KERNELS = {
    "generic_u8": """func.func @generic_u8(%a: memref<19x64xi8>, %b: memref<64x24xi8>, %c: memref<19x24xi32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<19x64xi8>, memref<64x24xi8>) outs(%c : memref<19x24xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extui %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  return
}""",
    "batched_at": """func.func @batched_at(%at: memref<2x48x37xf16>, %b: memref<2x48x29xf16>, %c: memref<2x37x29xf32>) {
  %a = memref.alloc() : memref<2x37x48xf16>
  linalg.transpose ins(%at : memref<2x48x37xf16>) outs(%a : memref<2x37x48xf16>) permutation = [0, 2, 1]
  linalg.batch_matmul ins(%a, %b : memref<2x37x48xf16>, memref<2x48x29xf16>) outs(%c : memref<2x37x29xf32>)
  return
}""",
    "bt_copies": """func.func @bt_copies(%a: memref<37x64xf16>, %w: memref<29x64xf16>, %c: memref<37x29xf32>, %d: memref<37x29xf32>) {
  %buf = memref.alloc() : memref<37x29xf32>
  memref.copy %c, %buf : memref<37x29xf32> to memref<37x29xf32>
  linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
      ins(%a, %w : memref<37x64xf16>, memref<29x64xf16>) outs(%buf : memref<37x29xf32>)
  memref.copy %buf, %d : memref<37x29xf32> to memref<37x29xf32>
  return
}""",
}


@pytest.mark.parametrize("name", VIEW_KERNELS)
def test_views_run_exactly(name):
    [kernel] = compile_text(VIEW_KERNELS[name], f"{name}.mlir", CompileOptions(sm="90"))
    assert run_compiled(kernel, 1, "emulator").ok
    rng = np.random.default_rng(5)
    if name == "generic_u8":
        a = rng.integers(0, 256, (19, 64)).astype(np.uint8)
        b = rng.integers(0, 256, (64, 24)).astype(np.uint8)
        a[0, :] = b[:, 0] = 255  # unsigned: 255 * 255, not (-1) * (-1)
        c = rng.integers(-1000, 1000, (19, 24)).astype(np.int32)
        result = run_compiled(kernel, 1, "emulator", inputs={"a": a, "b": b, "c": c})
        assert result.ok, result.detail
        assert np.array_equal(result.outputs["c"], (a.astype(np.int64) @ b + c).astype(np.int32))
        return
    if name == "batched_at":
        at, b = _f16(rng, 2, 48, 37), _f16(rng, 2, 48, 29)
        c = rng.standard_normal((2, 37, 29)).astype(np.float32)
        inputs, a, out = {"at": at.transpose(0, 2, 1), "b": b, "c": c}, at.transpose(0, 2, 1), "c"
    else:
        a, w = _f16(rng, 37, 64), _f16(rng, 29, 64)
        c = rng.standard_normal((37, 29)).astype(np.float32)
        inputs, b, out = {"a": a, "w": w.T, "c": c}, w.T, "d"
    result = run_compiled(kernel, 1, "emulator", inputs=inputs)
    assert result.ok, result.detail
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64 + c
    bound = (a.shape[-1] + 1) * 2.0**-23 * (np.abs(a64) @ np.abs(b64) + np.abs(c))
    assert np.all(np.abs(result.outputs[out] - want) <= bound)


# ---------------------------------------------------------------------------------------------
# Sizes known at launch: what torch.compile(dynamic=True) hands over through torch-mlir
# (`memref<?x?xf16>`, or `?x64` where only M varies), bufferized: temporaries sized by
# memref.dim (`memref.alloc(%m, %n)`), the result copied into the out parameter. It converts to
# the tile IR `tilemma gemm --dynamic` writes (the same PTX), compiles once and runs at several
# sizes in the emulator, every element checked against the runner's reference and a NumPy model
# of the program; what `?` sizes cannot be is refused at the op, with the tile level's reason.
# ---------------------------------------------------------------------------------------------


def torch_matmul(name, m, n, k, weight=False):
    """torch.mm(a, b) (`weight`: a Linear's a @ w.t(), w stored N x K and transposed by
    linalg.transpose into a temporary) as torch-mlir lowers it under strict symbolic shapes, f16
    operands accumulated in f32, bufferized with its result the out parameter %d; m, n, k a
    size or "?" (only the `?` ones size the temporaries, from memref.dim)."""
    def ref(rows, cols, e):
        return f"memref<{rows}x{cols}x{e}>"

    def alloc(value, rows, cols, e):
        sizes = ", ".join(v for v, s in ((f"%{rows}", size_of[rows]), (f"%{cols}", size_of[cols])) if s == "?")
        return f"  %{value} = memref.alloc({sizes}) {{alignment = 64 : i64}} : {ref(size_of[rows], size_of[cols], e)}"

    size_of = {"m": m, "n": n, "k": k}
    a_t, b_t, d_t = ref(m, k, "f16"), ref(n, k, "f16") if weight else ref(k, n, "f16"), ref(m, n, "f32")
    lines = [f"func.func @{name}(%a: {a_t}, %b: {b_t}, %d: {d_t}) attributes {{torch.assume_strict_symbolic_shapes}} {{",
             "  %c0 = arith.constant 0 : index",
             "  %c1 = arith.constant 1 : index",
             "  %cst = arith.constant 0.000000e+00 : f32",
             f"  %m = memref.dim %a, %c0 : {a_t}",
             f"  %k = memref.dim %a, %c1 : {a_t}",
             f"  %n = memref.dim %b, {'%c0' if weight else '%c1'} : {b_t}"]
    b, kn_t = "%b", ref(k, n, "f16")
    if weight:
        lines += [alloc("bt", "k", "n", "f16"),
                  f"  linalg.transpose ins(%b : {b_t}) outs(%bt : {kn_t}) permutation = [1, 0]"]
        b = "%bt"
    lines += [alloc("acc", "m", "n", "f32"),
              f"  linalg.fill ins(%cst : f32) outs(%acc : {d_t})",
              f"  linalg.matmul ins(%a, {b} : {a_t}, {kn_t}) outs(%acc : {d_t})",
              f"  memref.copy %acc, %d : {d_t} to {d_t}",
              "  return", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("dynamic, weight", [("mnk", False), ("m", False), ("mnk", True)])
def test_dynamic_linalg_compiles_to_the_kernel_of_tilemma_gemm_dynamic(dynamic, weight):
    """torch's form with `?` sizes is the GEMM `tilemma gemm --dynamic ... --no-c` writes (a
    weight read transposed: `--b-layout col`, its `strided<[1, ?]>` view): the same PTX."""
    spec = GemmSpec(64, 64, 64, "f16", "f16", "f32", dynamic=dynamic, c=False, b_layout="col" if weight else "row")
    m, n, k = ("?" if d in dynamic else 64 for d in "mnk")
    options = CompileOptions(sm="90", tune_cache="")
    [from_linalg] = compile_text(torch_matmul(spec.name, m, n, k, weight), "<linalg>", options)
    [from_gemm] = compile_text(str(gemm_module(spec)), "<gemm>", options)
    assert from_linalg.abi.symbols == from_gemm.abi.symbols and from_linalg.abi.dynamic
    assert from_linalg.ptx == from_gemm.ptx


_RELU_LINEAR = """#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @linear_relu(%x: memref<MxKxf16>, %w: memref<NxKxf16>, %bias: memref<Nxf16>, %y: memref<MxNxf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 0.000000e+00 : f16
  %m = memref.dim %x, %c0 : memref<MxKxf16>
  %k = memref.dim %x, %c1 : memref<MxKxf16>
  %n = memref.dim %w, %c0 : memref<NxKxf16>
  %wt = memref.alloc(SIZES_KN) {alignment = 64 : i64} : memref<KxNxf16>
  linalg.transpose ins(%w : memref<NxKxf16>) outs(%wt : memref<KxNxf16>) permutation = [1, 0]
  %acc = memref.alloc(SIZES_MN) {alignment = 64 : i64} : memref<MxNxf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<MxNxf32>)
  linalg.matmul ins(%x, %wt : memref<MxKxf16>, memref<KxNxf16>) outs(%acc : memref<MxNxf32>)
  %out = memref.alloc(SIZES_MN) {alignment = 64 : i64} : memref<MxNxf16>
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%acc, %bias : memref<MxNxf32>, memref<Nxf16>) outs(%out : memref<MxNxf16>) {
  ^bb0(%in: f32, %b: f16, %o: f16):
    %0 = arith.truncf %in : f32 to f16
    %1 = arith.addf %0, %b : f16
    %2 = arith.cmpf ugt, %1, %cst_0 : f16
    %3 = arith.select %2, %1, %cst_0 : f16
    linalg.yield %3 : f16
  }
  memref.copy %out, %y : memref<MxNxf16> to memref<MxNxf16>
  return
}
"""

_BMM = """#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @bmm(%a: memref<3x?x?xf16>, %b: memref<3x?x?xf16>, %d: memref<3x?x?xf16>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cst = arith.constant 0.000000e+00 : f32
  %m = memref.dim %a, %c1 : memref<3x?x?xf16>
  %n = memref.dim %b, %c2 : memref<3x?x?xf16>
  %acc = memref.alloc(%m, %n) {alignment = 64 : i64} : memref<3x?x?xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<3x?x?xf32>)
  linalg.batch_matmul ins(%a, %b : memref<3x?x?xf16>, memref<3x?x?xf16>) outs(%acc : memref<3x?x?xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%acc : memref<3x?x?xf32>) outs(%d : memref<3x?x?xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return
}
"""


def _relu_linear(m, n, k):
    """_RELU_LINEAR with each of M, N, K a size or ?: only the `?` ones size the temporaries."""
    sizes = {"M": m, "N": n, "K": k}
    text = _RELU_LINEAR
    for pair in ("KN", "MN"):
        text = text.replace(f"SIZES_{pair}", ", ".join(f"%{d.lower()}" for d in pair if sizes[d] == "?"))
    for d, v in sizes.items():
        text = text.replace(f"<{d}x", f"<{v}x").replace(f"x{d}x", f"x{v}x")
    return text


def _in_place(m, n, k):
    """linalg.matmul on kernel memrefs, C += A x B in place (f16 -> f32)."""
    a_t, b_t, c_t = f"memref<{m}x{k}xf16>", f"memref<{k}x{n}xf16>", f"memref<{m}x{n}xf32>"
    return (f"func.func @mm(%a: {a_t}, %b: {b_t}, %c: {c_t}) {{\n"
            f"  linalg.matmul ins(%a, %b : {a_t}, {b_t}) outs(%c : {c_t})\n  return\n}}\n")


def _mm_inputs(rng, m, n, k):
    a, b = _f16(rng, m, k), _f16(rng, k, n)
    c = rng.standard_normal((m, n)).astype(np.float32)
    return {"a": a, "b": b, "c": c}, (a, b, c)


def _mm_model(a, b, c):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # f32 accumulation of K f16 products: each step rounds to f32
    return a64 @ b64 + c, (a.shape[1] + 1) * 2.0**-23 * (np.abs(a64) @ np.abs(b64) + np.abs(c))


def _torch_mm_inputs(rng, m, n, k):
    a, b = _f16(rng, m, k), _f16(rng, k, n)
    return {"a": a, "b": b}, (a, b, np.zeros((m, n)))


def _relu_inputs(rng, m, n, k):
    x, w, bias = _f16(rng, m, k), _f16(rng, n, k, scale=0.5), _f16(rng, n)
    return {"x": x, "w": w.T, "bias": bias}, (x, w, bias)  # the kernel reads w.t(): pass that view


def _bmm_dyn_inputs(rng, m, n, k):
    a, b = _f16(rng, 3, m, k), _f16(rng, 3, k, n)
    return {"a": a, "b": b}, (a, b)


def _bmm_dyn_model(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    return want, 2.0**-10 * np.abs(want) + (a.shape[-1] + 1) * 2.0**-23 * (np.abs(a64) @ np.abs(b64))


# name: (kernel text, output, inputs(rng, m, n, k) -> (named arrays, model arguments), model,
#        the sizes run: M x N x K, the static ones as the text has them)
DYNAMIC_CASES = {
    "in_place_mnk": (_in_place("?", "?", "?"), "c", _mm_inputs, _mm_model, [(37, 91, 53), (130, 72, 256)]),
    "torch_mm_mnk": (torch_matmul("mm", "?", "?", "?"), "d", _torch_mm_inputs, _mm_model, [(37, 91, 53), (130, 72, 256)]),
    "torch_mm_m": (torch_matmul("mm", "?", 91, 53), "d", _torch_mm_inputs, _mm_model, [(37, 91, 53), (130, 91, 53), (1, 91, 53)]),
    "linear_relu_mnk": (_relu_linear("?", "?", "?"), "y", _relu_inputs, _linear(lambda h: np.maximum(h, 0)),
                        [(37, 91, 53), (130, 72, 256)]),
    "linear_relu_m": (_relu_linear("?", 91, 64), "y", _relu_inputs, _linear(lambda h: np.maximum(h, 0)),
                      [(37, 91, 64), (130, 91, 64)]),
    "bmm_mnk": (_BMM, "d", _bmm_dyn_inputs, _bmm_dyn_model, [(37, 29, 45), (19, 72, 64)]),
}

_DYNAMIC_COMPILED: dict = {}


def _dynamic_kernel(name):
    """The case's kernel, compiled once for every size."""
    if name not in _DYNAMIC_COMPILED:
        [_DYNAMIC_COMPILED[name]] = compile_text(DYNAMIC_CASES[name][0], f"{name}.mlir", CompileOptions(sm="90"))
    return _DYNAMIC_COMPILED[name]


def test_dynamic_linalg_converts_to_tile_ir_with_question_marks():
    module, _ = parse(DYNAMIC_CASES["linear_relu_m"][0], "linear_relu_m.mlir")
    LinalgToTile().apply(None, module)  # type: ignore[arg-type]
    module.verify()
    text = str(module)
    assert "%x: memref<?x64xf16>, %w: memref<64x91xf16, strided<[1, 64]>>, %bias: memref<91xf16>, %y: memref<?x91xf16>" in text
    assert "tile.mma %ta, %tb, %zero : !tile.tile<?x64xf16>, !tile.tile<64x91xf16>, !tile.tile<?x91xf32>" in text
    assert "memref.dim" not in text and "memref.alloc" not in text


@pytest.mark.parametrize("name, size", [(name, size) for name, case in DYNAMIC_CASES.items() for size in case[4]])
def test_dynamic_linalg_runs_exactly_at_every_size(name, size):
    text, out, make_inputs, model, _ = DYNAMIC_CASES[name]
    kernel = _dynamic_kernel(name)
    assert kernel.abi.dynamic
    inputs, arrays = make_inputs(np.random.default_rng(sum(size)), *size)
    bound = bind_sizes(kernel, *launch_shapes(kernel, inputs, None))  # the sizes from the arrays
    g = bound.gemm
    assert (g.m, g.n, g.k) == size
    _runs_as_modelled(bound, inputs, arrays, out, model)


def test_tilemma_compile_and_run_take_dynamic_linalg(tmp_path):
    """`tilemma compile` of the torch form says the sizes in its ABI; `tilemma run` runs it at
    the sizes of --size, or of the --input arrays, against the reference."""
    src = tmp_path / "linear.mlir"
    src.write_text(DYNAMIC_CASES["linear_relu_mnk"][0])
    proc = run_main("tilemma", cli.main, ["compile", str(src), "--sm", "90", "--emit", "json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    params = {p["name"]: p for p in json.loads(proc.stdout)["kernels"][0]["params"]}
    assert params["p_x"]["sizes"] == ["M", "K"] and params["p_w"]["sizes"] == ["K", "N"]
    assert params["p_w"]["strides"] == [1, -1]  # w.t(): K-major, its row stride known at launch
    proc = run_main("tilemma", cli.main, ["run", str(src), "--on", "emulator", "--sm", "90", "--size", "M=37,N=91,K=53"])
    assert proc.returncode == 0 and "37x91x53" in proc.stdout and "PASS" in proc.stdout, proc.stdout + proc.stderr
    rng = np.random.default_rng(3)
    files = []
    for arg, array in (("x", _f16(rng, 130, 40)), ("w", _f16(rng, 72, 40).T), ("bias", _f16(rng, 72))):
        np.save(tmp_path / f"{arg}.npy", array)
        files += ["--input", f"{arg}={tmp_path / arg}.npy"]
    proc = run_main("tilemma", cli.main, ["run", str(src), "--on", "emulator", "--sm", "90", *files])
    assert proc.returncode == 0 and "130x72x40" in proc.stdout and "PASS" in proc.stdout, proc.stdout + proc.stderr


_MM_DYN = "func.func @k(%a: {a}, %b: {b}, %c: {c}) {{\n  linalg.matmul ins(%a, %b : {a}, {b}) outs(%c : {c})\n  func.return\n}}\n"


@pytest.mark.parametrize("text, message", [
    (_BMM.replace("3x?x?", "?x?x?").replace("memref.alloc(%m, %n)", "memref.alloc(%m, %m, %n)"),
     "linalg.batch_matmul: the batch size must be static; M, N, K and strides may be ?"),
    (_MM_DYN.format(a="memref<?x64xi4>", b="memref<64x16xi4>", c="memref<?x16xi32>"),
     "linalg.matmul: si4 operands are packed below a byte: their sizes must be static"),
    (_MM_DYN.format(a="memref<?x?xf16, strided<[?, 1], offset: ?>>", b="memref<?x?xf16>", c="memref<?x?xf32>"),
     "linalg.matmul: operand A (memref<?x?xf16, strided<[?, 1], offset: ?>>): memref<?x?xf16, strided<[?, 1], "
     "offset: ?>> has a dynamic offset; a view starts where its buffer does"),
    (_MM_DYN.format(a="memref<?x64xf16>", b="memref<?x16xf16>", c="memref<?x16xf32>"),
     "linalg.matmul: tile.mma: the contraction dimension K is ? in one operand and 64 in the other (?x64 and ?x16); "
     "make both ? or both static"),
    (_MM_DYN.format(a="memref<?x16xf16>", b="memref<16x8xf16>", c="memref<16x8xf16>"),
     "linalg.matmul: tile.mma: accumulator shape 16x8 does not match N x M = ?x8 of ?x16 times 16x8"),
    (_MM_DYN.format(a="memref<?x16xf16>", b="memref<16x8xf16>", c="memref<?x8xf32, strided<[0, 1]>>"),
     "linalg.matmul: operand C (memref<?x8xf32, strided<[0, 1]>>) has a stride-0 (broadcast) dimension"),
    # A bias row picked by a constant: at 1 along a ? stride; or out of a ? dimension.
    ("""func.func @k(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %bias: memref<2x?xf32>, %c: memref<?x?xf32>) {
  linalg.matmul ins(%a, %b : memref<?x?xf16>, memref<?x?xf16>) outs(%c : memref<?x?xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (1, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<2x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.addf %x, %o : f32
    linalg.yield %0 : f32
  }
  func.return
}""", "linalg.generic: input #0 (memref<2x?xf32>): the window starts at offset 1 of dimension 0, whose stride is ?: "
        "a window along a ? stride starts at 0"),
    ("""func.func @k(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %bias: memref<?x?xf32>, %c: memref<?x?xf32>) {
  linalg.matmul ins(%a, %b : memref<?x?xf16>, memref<?x?xf16>) outs(%c : memref<?x?xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<?x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.addf %x, %o : f32
    linalg.yield %0 : f32
  }
  func.return
}""", "linalg.generic: input #0 (memref<?x?xf32>): dimension 0 is ? and read at index 0: a ? dimension is read whole"),
])
def test_what_dynamic_linalg_cannot_be_is_refused_at_the_op(text, message):
    """Each refusal comes from linalg-to-tile (the message names the linalg op), located at it,
    with the reason the tile level gives for the same kernel written in tile IR."""
    with pytest.raises(LocatedVerifyError) as e:
        compile_text(text, "in.mlir", CompileOptions(sm="90"))
    assert message in str(e.value) and "in.mlir:" in str(e.value), str(e.value)
