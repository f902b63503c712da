"""`Kernel.emulate`: the Python API on NumPy arrays, in the CPU emulator, without a GPU.

Results are checked element for element against float64 NumPy (integers exactly, floats within
`reference.error_bound`), computed here from the inputs, not by the compiler's runner; inputs must
come back untouched and the arrays the kernel writes must hold its results in place. The argument
checks are `launch`'s, so the messages are too.
"""

import pathlib

import ml_dtypes
import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.runner import pack_memory
from tilemma.compiler.verify import reference

README = pathlib.Path(__file__).parents[1] / "README.md"


def gemm(m=37, n=45, k=29, a="f16", b="f16", acc="f32", sm="90", **kw) -> tilemma.Kernel:
    [kernel] = tilemma.compile(str(gemm_module(GemmSpec(m, n, k, a, b, acc, **kw))), sm=sm)
    return kernel


def readme_ir() -> str:
    code = README.read_text().split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    return code.split('ir = """', 1)[1].split('"""', 1)[0]


def within_bound(got, a, b, c, a_type: str, acc: str = "f32") -> None:
    """|got - (a @ b + c)| <= error_bound, every element, against float64 NumPy."""
    exact = a.astype(np.float64) @ b.astype(np.float64) + (0 if c is None else c.astype(np.float64))
    bound = reference.error_bound(a, b, c, a_type=a_type, acc_type=acc)
    bad = np.abs(got.astype(np.float64) - exact) > bound
    assert not bad.any(), f"{int(bad.sum())} elements out of bound, first at {np.argwhere(bad)[0]}"


@pytest.fixture(scope="module")
def f16():
    return gemm()


def f16_args(rng=None):
    rng = rng or np.random.default_rng(1)
    return [reference.random_matrix("f16", (37, 29), rng), reference.random_matrix("f16", (29, 45), rng),
            reference.random_matrix("f32", (37, 45), rng), np.zeros((37, 45), np.float32)]


# --------------------------------------------------------------------------------------- results


def test_readme_gemm_on_numpy_arrays():
    """The README's kernel (256x64 @ 64x128 f16 -> f32) as `launch` would run it, on NumPy."""
    [kernel] = tilemma.compile(readme_ir(), sm="90")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 64)).astype(np.float16), rng.standard_normal((64, 128)).astype(np.float16)
    c = rng.standard_normal((256, 128)).astype(np.float32)
    d = np.full_like(c, np.nan)
    before = [x.copy() for x in (a, b, c)]
    assert kernel.emulate(a, b, c, d) is None
    within_bound(d, a, b, c, "f16")
    assert all(np.array_equal(x, y) for x, y in zip((a, b, c), before))  # inputs untouched


@pytest.mark.parametrize("types", [("bf16", "f32"), ("si8", "si32")])
def test_bf16_and_s8(types):
    """bf16 (an ml_dtypes array) within the bound; s8 -> s32 exactly."""
    element, acc = types
    kernel = gemm(a=element, b=element, acc=acc)
    rng = np.random.default_rng(2)
    a, b = (reference.random_matrix(element, shape, rng) for shape in ((37, 29), (29, 45)))
    c = reference.random_matrix(acc, (37, 45), rng)
    assert a.dtype == (ml_dtypes.bfloat16 if element == "bf16" else np.int8)
    d = np.zeros_like(c)
    kernel.emulate(a, b, c, d)
    if acc == "si32":  # exact: |sum| < 29 * 128 * 128 + |c| fits in int32
        np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64) + c)
    else:
        within_bound(d, a, b, c, element)


def test_fused_epilogue_writes_both_outputs():
    """`tilemma gemm --bias col --act relu --out f16 --aux`: D = f16(relu(A @ B + C + bias[n])) and
    the pre-activation, two outputs in place; bias is an input like A."""
    kernel = gemm(bias="col", act="relu", out="f16", aux=True)
    params = kernel.abi.params
    names = [p.name.removeprefix("p_") for p in params]
    outputs = [n for n, p in zip(names, params) if p.is_output]
    assert set(outputs) == {"d", "pre"} and "bias" in names
    rng = np.random.default_rng(3)
    args = {}
    for name, p in zip(names, params):
        args[name] = (np.full(p.shape, 7, p.dtype) if p.is_output
                      else reference.random_matrix(p.element, p.shape, rng))
    before = {n: args[n].copy() for n in names if n not in outputs}
    kernel.emulate(*(args[n] for n in names))
    a, b, c, bias = (args[n] for n in ("a", "b", "c", "bias"))
    exact = a.astype(np.float64) @ b.astype(np.float64) + c + bias.astype(np.float64)[None, :]
    err = reference.error_bound(a, b, c, a_type="f16", acc_type="f32")
    # pre = f32(acc + bias): the GEMM's error, one f32 rounding; D = f16(max(pre, 0)).
    pre = args["pre"].astype(np.float64)
    assert (np.abs(pre - exact) <= err + 2.0**-23 * np.abs(exact)).all()
    relu = np.maximum(exact, 0)
    tol = err + 2.0**-23 * np.abs(exact) + 2.0**-11 * (relu + err) + 2.0**-25
    assert (np.abs(args["d"].astype(np.float64) - relu) <= tol).all()
    assert (args["d"] >= 0).all() and (args["d"] == 0).any()  # relu did something
    assert all(np.array_equal(args[n], before[n]) for n in before)


STRIDED = """
func.func @strided(%a: memref<32x16xf16, strided<[24, 1], offset: 8>>, %b: memref<16x8xf16, strided<[1, 16]>>,
                   %d: memref<34x8xf16, strided<[10, 1], offset: 3>>) {
  %ta = tile.load %a[0, 0] : memref<32x16xf16, strided<[24, 1], offset: 8>> -> !tile.tile<32x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16, strided<[1, 16]>> -> !tile.tile<16x8xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<32x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<32x8xf16>
  tile.store %td, %d[1, 0] : !tile.tile<32x8xf16>, memref<34x8xf16, strided<[10, 1], offset: 3>>
  func.return
}
"""


def test_strided_memrefs_take_logical_arrays_in_any_numpy_layout():
    """A, B and D strided (D with gaps and an offset, and rows the kernel does not store, which
    keep what the caller's array held)."""
    [kernel] = tilemma.compile(STRIDED, sm="90")
    rng = np.random.default_rng(4)
    a = reference.random_matrix("f16", (32, 16), rng).astype(">f2")  # big-endian
    b = np.asfortranarray(reference.random_matrix("f16", (16, 8), rng))
    d = np.full((8, 34), 7, np.float16).T  # a transposed view, written through
    kernel.emulate(a, b, d)
    within_bound(d[1:33], a.astype(np.float16), b, None, "f16", acc="f16")
    assert (d[0] == 7).all() and (d[33] == 7).all()


def test_packed_s4_operands_take_their_bytes():
    kernel = gemm(19, 24, 70, "si4", "si4", "si32")
    rng = np.random.default_rng(5)
    a, b = reference.random_matrix("si4", (19, 70), rng), reference.random_matrix("si4", (70, 24), rng)
    c = reference.random_matrix("si32", (19, 24), rng)
    d = np.zeros_like(c)
    pa, pb = pack_memory(a, "si4"), pack_memory(b, "si4")
    assert pa.dtype == np.uint8 and pa.size == kernel.abi.params[0].nbytes
    kernel.emulate(pa, pb, c, d)
    np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64) + c)


def test_checked_sparse_kernel_reports_through_its_error_word():
    kernel = gemm(16, 8, 32, sparse_a=True)
    word = kernel.abi.params[-1]
    rng = np.random.default_rng(6)
    a = reference.random_matrix("f16", (16, 32), rng)
    a.reshape(16, 8, 4)[:, :, 2:] = 0  # 2:4 sparse
    b, c = reference.random_matrix("f16", (32, 8), rng), reference.random_matrix("f32", (16, 8), rng)
    d, error = np.zeros((16, 8), np.float32), np.full(1, word.init, np.uint32)
    kernel.emulate(a, b, c, d, error)
    assert kernel.sparsity_error(int(error[0])) is None
    within_bound(d, a, b, c, "f16")
    a[7, 20:24] = 1.0  # row 7, group 5: four nonzeros
    error = np.full(1, word.init - (1 << 32), np.int32)  # int32 words, as launch takes them
    kernel.emulate(a, b, c, d, error)
    assert "row 7, group 5" in kernel.sparsity_error(int(error[0]) & 0xFFFFFFFF)


def test_arch_is_the_kernels_target_where_the_emulator_models_it(f16):
    assert f16._emulator_arch() == "sm_90"
    sm80 = gemm(sm="80")
    assert sm80.sm == "sm_80" and sm80._emulator_arch() == "sm_80"
    args = f16_args()
    sm80.emulate(*args)
    within_bound(args[3], *args[:3], "f16")
    assert gemm(sm="86")._emulator_arch() == "sm_90"  # no sm_86 model: the default


# ---------------------------------------------------------------------------------------- errors


def emulate_error(kernel, args, **kw) -> str:
    with pytest.raises(tilemma.LaunchError) as e:
        kernel.emulate(*args, **kw)
    return str(e.value)


def test_wrong_count(f16):
    msg = emulate_error(f16, f16_args()[:3])
    assert "takes 4 arguments (p_a, p_b, p_c, p_d), got 3" in msg


def test_wrong_shape(f16):
    args = f16_args()
    args[1] = args[1].T
    assert "argument 1 (b), a NumPy array: shape (45, 29), expected (29, 45)" in emulate_error(f16, args)


def test_wrong_dtype(f16):
    args = f16_args()
    args[0] = args[0].astype(np.float32)
    msg = emulate_error(f16, args)
    assert "argument 0 (a), a NumPy array: dtype float32, expected float16 (f16 elements)" in msg


def test_not_an_array_and_read_only_output(f16):
    args = f16_args()
    args[2] = args[2].tolist()
    assert "argument 2 (c): list is not a NumPy array" in emulate_error(f16, args)
    args = f16_args()
    args[3].flags.writeable = False
    assert "argument 3 (d), a NumPy array: read-only, but the kernel writes it" in emulate_error(f16, args)
    args = f16_args()
    for x in args[:3]:
        x.flags.writeable = False  # inputs may be read-only: they are never written
    f16.emulate(*args)


def test_packed_operand_wants_its_bytes():
    kernel = gemm(19, 24, 70, "si4", "si4", "si32")
    rng = np.random.default_rng(7)
    args = [reference.random_matrix("si4", (19, 70), rng).astype(np.uint8), np.zeros(kernel.abi.params[1].nbytes, np.uint8),
            np.zeros((19, 24), np.int32), np.zeros((19, 24), np.int32)]
    msg = emulate_error(kernel, args)
    assert "argument 0 (a), a NumPy array: expected a contiguous uint8 buffer of 665 bytes" in msg


def test_too_large_is_refused_by_the_exact_count(f16):
    """37 x 45 x 29 = 48285 multiply-adds: refused just below, run at the limit (the ABI's bound,
    1665 x 37, is over it: the exact count decides)."""
    msg = emulate_error(f16, f16_args(), max_macs=48284)
    assert "48285 multiply-adds (batch x M x N x K) are more than the emulator runs quickly" in msg
    args = f16_args()
    f16.emulate(*args, max_macs=48285)
    within_bound(args[3], *args[:3], "f16")


def test_launch_of_a_numpy_array_points_at_emulate(f16):
    with pytest.raises(tilemma.LaunchError, match="not CUDA memory .Kernel.emulate runs the kernel on NumPy arrays"):
        f16.launch(*f16_args())
