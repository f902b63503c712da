"""linalg.matmul input, end to end: linalg-to-tile, the whole pipeline, the PTX run in the emulator,
every element of C (updated in place: C += A x B) checked against NumPy."""

import numpy as np
import pytest

from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled

CASES = {
    # name: (M, N, K, A/B element, C element, C layout)
    "f16_f32_odd": (37, 29, 45, "f16", "f32", ""),
    "f16_f32_strided_c": (37, 29, 45, "f16", "f32", ", strided<[40, 1], offset: 5>"),
    "s8_s32_odd": (37, 29, 45, "i8", "i32", ""),
    "bf16_f32_staged": (64, 64, 64, "bf16", "f32", ""),  # aligned rows: the shared-memory schedule
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
    assert (kernel.abi.shared_bytes > 0) == case.endswith("staged")
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
        (linalg_kernel("k", 16, 8, 16, "f16", "f16").replace("memref<16x16xf16>", "memref<?x16xf16>"),
         "operand A (memref<?x16xf16>) has a dynamic shape"),
        (linalg_kernel("k", 16, 8, 16, "f32", "f32"), "f32 x f32 has no exact tensor-core instruction"),
        (linalg_kernel("k", 16, 8, 16, "f16", "f64"), "tile.mma"),
    ],
)
def test_refusals_are_located(text, message):
    with pytest.raises(LocatedVerifyError) as e:
        compile_text(text, "in.mlir", CompileOptions(sm="90"))
    assert message in str(e.value) and "in.mlir:" in str(e.value), str(e.value)
