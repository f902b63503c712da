"""Sizes known at launch (`memref<?x?xT>`): one compile serves every size. Every element of D is
checked against the exact reference (integers) or the f64 product within the accumulation's
rounding, in the emulator, for both stride classes (cp.async for 16-byte rows, rows loaded element
by element otherwise); the ABI names the size parameters; what cannot be dynamic is refused with
the reason, and a launch whose buffers disagree is refused naming them."""

import json

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.verify import reference


def compile_dynamic(a="f16", b="f16", acc="f32", dynamic="mnk", **spec):
    [k] = tilemma.compile(str(gemm_module(GemmSpec(64, 64, 64, a, b, acc, dynamic=dynamic, **spec))), sm="90")
    return k


def operands(a_t, b_t, acc, m, n, k, rng):
    """Random values with each type's extremes mixed in (wide exponents, both signs)."""
    a = reference.random_matrix(a_t, (m, k), rng).astype(reference.element_type(a_t).dtype)
    b = reference.random_matrix(b_t, (k, n), rng).astype(reference.element_type(b_t).dtype)
    c = reference.random_matrix(acc, (m, n), rng).astype(reference.element_type(acc).dtype)
    return a, b, c


@pytest.mark.parametrize("m,n,k", [(37, 91, 53), (128, 64, 64), (1, 8, 16), (130, 72, 200), (17, 200, 40)])
def test_one_f16_kernel_every_size(m, n, k):
    kernel = compile_dynamic()
    rng = np.random.default_rng(m + 7 * n + 13 * k)
    a, b, c = operands("f16", "f16", "f32", m, n, k, rng)
    d = np.full((m, n), np.nan, np.float32)
    kernel.emulate(a, b, c, d)
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    # f32 accumulation of k f16 products: each step rounds to f32
    bound = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(c)) * (k + 1) * 2.0**-23
    assert np.all(np.abs(d - want) <= bound + 1e-30), f"{m}x{n}x{k}"


@pytest.mark.parametrize("m,n,k", [(37, 91, 53), (130, 72, 256), (3, 16, 32)])
def test_one_s8_kernel_every_size_exactly(m, n, k):
    """8-bit with a K-major B (`strided<[1, ?]>`): integer products are exact, so every element
    must equal the reference."""
    kernel = compile_dynamic("s8", "s8", "s32", b_layout="col")
    rng = np.random.default_rng(m * n + k)
    a, b, c = operands("si8", "si8", "si32", m, n, k, rng)
    d = np.zeros((m, n), np.int32)
    kernel.emulate(a, b, c, d)
    want = (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32)  # s32 wraps
    np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("ptx, element, acc", [("s8", "si8", "si32"), ("f16", "f16", "f32"), ("tf32", "tf32", "f32")])
@pytest.mark.parametrize("a_layout, b_layout", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_every_operand_order_stages_at_every_size(ptx, element, acc, a_layout, b_layout):
    """A column-major operand's `?` leading dimension (`strided<[1, ?]>`) is never taken for a
    contiguous one, whatever its stride class: each order and type stages (cp.async, the
    transposing fill, or byte by byte where rows are odd) and computes D right, every element."""
    kernel = compile_dynamic(ptx, ptx, acc.replace("si", "s"), a_layout=a_layout, b_layout=b_layout)
    rng = np.random.default_rng(5)
    for m, n, k in ((37, 91, 53), (100, 68, 96)):
        a, b, c = operands(element, element, acc, m, n, k, rng)
        a = a if a_layout == "row" else np.asfortranarray(a)
        b = b if b_layout == "row" else np.asfortranarray(b)
        d = np.zeros_like(c)
        arrays = (a, b, c, d)
        bound = kernel.bind([x.shape for x in arrays], [tuple(s // x.itemsize for s in x.strides) for x in arrays])
        assert "stages=0" not in bound.abi.config, (m, n, k, bound.abi.config)
        kernel.emulate(a, b, c, d)
        want = reference.mma_reference(a, b, c, a_type=element, b_type=element, acc_type=acc)
        result = reference.compare(d, want, acc_type=acc, a_type=element, k=k, a=a, b=b, c=c)
        assert result.ok, f"{m}x{n}x{k}: {result}"


def test_the_stride_classes_pick_their_variants():
    kernel = compile_dynamic()
    aligned = kernel.bind([(512, 64), (64, 128), (512, 128), (512, 128)], [(64, 1), (128, 1), (128, 1), (128, 1)])
    ragged = kernel.bind([(64, 63), (63, 128), (64, 128), (64, 128)], [(63, 1), (128, 1), (128, 1), (128, 1)])
    assert "stages=0" not in aligned.abi.config and "cp.async" in aligned.ptx  # 16-byte rows: staged
    # K = 63 f16: rows not 4-byte aligned, A gathered element by element (B's rows still cp.async)
    assert "stages=0" not in ragged.abi.config and "ld.global.u16" in ragged.ptx and "ld.global.u16" not in aligned.ptx
    assert aligned.abi.grid[1:] == (1, 1) and aligned.abi.grid[0] > 1 and aligned.scalars[:3] == (512, 64, 128)
    # another size of the same classes (M a multiple of 128, N, K of 64) and size bucket (M in
    # 257..512): the same variant, not a new compile
    again = kernel.bind([(384, 64), (64, 128), (384, 128), (384, 128)], [(64, 1), (128, 1), (128, 1), (128, 1)])
    assert again.compiled._compiled is aligned.compiled._compiled


def test_sizes_that_are_multiples_of_128_drop_the_edge_predicates():
    """The third class: M, N, K multiples of 128 run a variant without edge predicates (the
    CTA tile and stage K divide them), and still every element is exact."""
    kernel = compile_dynamic("s8", "s8", "s32", b_layout="col")
    m, n, k = 128, 256, 256
    bound = kernel.bind([(m, k), (k, n), (m, n), (m, n)], [(k, 1), (1, k), (n, 1), (n, 1)])
    variant = bound.compiled._compiled.abi
    assert (variant.stride_multiple, variant.size_multiple) == (16, (128, 128, 128))
    ragged = kernel.bind([(m + 1, k), (k, n), (m + 1, n), (m + 1, n)], [(k, 1), (1, k), (n, 1), (n, 1)])
    assert ragged.compiled._compiled.abi.size_multiple == (1, 128, 128)
    assert bound.ptx.count("setp") < ragged.ptx.count("setp")
    rng = np.random.default_rng(3)
    a, b, c = operands("si8", "si8", "si32", m, n, k, rng)
    d = np.zeros((m, n), np.int32)
    kernel.emulate(a, b, c, d, max_macs=1 << 24)
    np.testing.assert_array_equal(d, (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32))


def test_abi_names_the_size_parameters():
    kernel = compile_dynamic()
    abi = kernel.abi.to_dict()
    assert [p["name"] for p in abi["size_params"]] == ["M", "K", "N", "a_stride0", "b_stride0", "c_stride0", "d_stride0"]
    assert abi["params"][0]["shape"] == [-1, -1] and abi["params"][0]["sizes"] == ["M", "K"]
    assert ".param .u32 s_M" in kernel.ptx and ".param .u32 s_K" in kernel.ptx
    assert json.loads(kernel.abi.to_json())["grid_sizes"] == abi["grid_sizes"]


def test_only_m_dynamic_keeps_n_and_k_static():
    kernel = compile_dynamic(dynamic="m")
    assert kernel.abi.symbols == ("M",)
    rng = np.random.default_rng(5)
    a, b, c = operands("f16", "f16", "f32", 5, 64, 64, rng)
    d = np.zeros((5, 64), np.float32)
    kernel.emulate(a, b, c, d)
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    assert np.abs(d - want).max() < 1e-3 * (1 + np.abs(want).max())


@pytest.mark.parametrize("shapes, match", [
    ([(32, 48), (40, 16), (32, 16), (32, 16)], "K = 40, but .* has K = 48"),
    ([(32, 0), (0, 16), (32, 16), (32, 16)], "K = 0"),
])
def test_buffers_that_disagree_are_refused(shapes, match):
    kernel = compile_dynamic()
    arrays = [np.zeros(s, t) for s, t in zip(shapes, (np.float16, np.float16, np.float32, np.float32))]
    with pytest.raises(tilemma.LaunchError, match=match):
        kernel.emulate(*arrays)


def test_a_promised_multiple_is_checked():
    [kernel] = tilemma.compile(str(gemm_module(GemmSpec(64, 64, 64, "f16", "f16", "f32", dynamic="mnk"))),
                               sm="90", stride_multiple=8)
    with pytest.raises(tilemma.LaunchError, match="not a multiple of 8"):
        kernel.emulate(*(np.zeros(s, t) for s, t in zip([(16, 20), (20, 16), (16, 16), (16, 16)],
                                                         (np.float16, np.float16, np.float32, np.float32))))


@pytest.mark.parametrize("spec, match", [
    (dict(sparse_a=True), "dense, unbatched"),
    (dict(batch=2), "dense, unbatched"),
])
def test_what_cannot_be_dynamic_says_why(spec, match):
    with pytest.raises(ValueError, match=match):
        gemm_module(GemmSpec(64, 64, 64, "f16", "f16", "f32", dynamic="mnk", **spec))


def test_sub_byte_and_static_against_dynamic_are_refused_at_their_op():
    ir = """func.func @g(%a: memref<?x64xsi4>, %b: memref<64x16xsi4>, %d: memref<?x16xsi32>) {
  %ta = tile.load %a[0, 0] : memref<?x64xsi4> -> !tile.tile<?x64xsi4>
  %tb = tile.load %b[0, 0] : memref<64x16xsi4> -> !tile.tile<64x16xsi4>
  %z = tile.constant 0 : !tile.tile<?x16xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<?x64xsi4>, !tile.tile<64x16xsi4>, !tile.tile<?x16xsi32> -> !tile.tile<?x16xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<?x16xsi32>, memref<?x16xsi32>
  func.return
}"""
    with pytest.raises(tilemma.CompileError, match="packed below a byte"):
        tilemma.compile(ir, sm="90", cache=False)
    mixed = """func.func @g(%a: memref<?x?xf16>, %b: memref<64x16xf16>, %d: memref<?x16xf32>) {
  %ta = tile.load %a[0, 0] : memref<?x?xf16> -> !tile.tile<?x?xf16>
  %tb = tile.load %b[0, 0] : memref<64x16xf16> -> !tile.tile<64x16xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<?x?xf16>, !tile.tile<64x16xf16> -> !tile.tile<?x16xf32>
  tile.store %td, %d[0, 0] : !tile.tile<?x16xf32>, memref<?x16xf32>
  func.return
}"""
    with pytest.raises(tilemma.CompileError, match=r"<input>:4:\d+: .*K is \? in one operand and 64"):
        tilemma.compile(mixed, sm="90", cache=False)


@pytest.mark.parametrize("size, gathered", [("M=128,N=64,K=64", False), ("M=37,N=91,K=53", True)])
def test_tilemma_run_runs_the_variant_a_launch_runs(tmp_path, size, gathered):
    """`tilemma run` on a kernel with `?` sizes dispatches as `Kernel.bind` does: the variant of
    the run's size class (cp.async for 16-byte rows, a gather for rows not 4-byte aligned), with
    the same PTX, checked against the reference."""
    from tests.inprocess import run_main
    from tilemma.compiler.driver import cli
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

    text = str(gemm_module(GemmSpec(64, 64, 64, "f16", "f16", "f32", dynamic="mnk")))
    [generic] = compile_text(text, "dyn.mlir", CompileOptions(sm="90", tune_cache=""))
    ran = cli._dispatched(generic, text, "dyn.mlir", CompileOptions(sm="90", tune_cache=""), {}, [size])
    m, n, k = (int(p.split("=")[1]) for p in size.split(","))
    shapes = [(m, k), (k, n), (m, n), (m, n)]
    api = compile_dynamic().bind(shapes, [(s[1], 1) for s in shapes])
    assert "stages=0" not in ran.abi.config and ("ld.global.u16" in ran.ptx) == gathered
    assert ran.abi.config == api.abi.config
    assert ran.ptx == api.ptx and ran.scalars == api.scalars
    (tmp_path / "dyn.mlir").write_text(text)
    proc = run_main("tilemma", cli.main, ["run", str(tmp_path / "dyn.mlir"), "--on", "emulator", "--size", size])
    assert proc.returncode == 0 and f"{m}x{n}x{k}" in proc.stdout and "PASS" in proc.stdout, proc.stdout + proc.stderr


def test_launch_unchecked_of_a_kernel_with_unbound_sizes_is_refused():
    """Its grid and size parameters are a bound kernel's: nothing is launched (no GPU needed to
    refuse it, the check comes before the driver)."""
    kernel = compile_dynamic()
    with pytest.raises(tilemma.LaunchError, match="bind"):
        kernel.launch_unchecked(0, 0, 0, 0)
