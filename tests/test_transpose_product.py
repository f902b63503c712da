"""`tile-transpose-product` and `tile.transpose_view`: an 8-bit GEMM for sm_90a with a K-major A and
an N-major B computed as D^T = B^T A^T through transposed views of its arguments, so that the
warpgroups take A' = B^T from registers; where it applies and where not; D exactly A B (numpy on
the arguments as given, and word for word the sm_90 mma.sync kernel's); the view's type, its
verifier and the located refusals; tf32 (A' = B^T filled M-major, B' = A^T copied K-major) from 512
rows, in the emulator at odd sizes. (GPU: tests/gpu/test_wgmma_gpu.py.)"""

import pytest
from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr, i8, i32
from xdsl.utils.exceptions import VerifyException

from xdsl.dialects import func

from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.instrument import PassInstrument
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import compile_text
from tilemma.dialects.tile_view import transposed_type
from tilemma.passes.tile.plan import TilePlan
from tilemma.passes.tile.transpose_product import transpose

from tests.wgmma_cases import compiled, exactly_a_times_b, options, same_words_as_mma_sync, schedule, warp_module


def spec(m, n, k, t="s8", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, t, t, "s32", **kw)


def transposed(s: GemmSpec, sm: str = "90a", **kw) -> bool:
    module = warp_module(s, sm, **kw)
    return any(o.name == "tile.transpose_view" for o in module.walk())


@pytest.mark.parametrize("s, kw, want", [
    (spec(4096, 4096, 4096), {}, True),  # A K-major, B N-major: the transpose, A' from registers
    (spec(512, 4096, 4096, "u8"), {}, True),
    (spec(520, 600, 512, c=True), {}, True),  # C read through its view too
    (spec(512, 520, 256, batch=2, bcast="b"), {}, True),  # a broadcast B: its view keeps the batch stride 0
    (spec(128, 11008, 4096), {}, False),  # decode rows: mma.sync's split K does better
    (spec(4096, 4096, 4096, b_layout="col"), {}, False),  # K-major B: as it is
    (spec(4096, 4096, 4096, a_layout="col", b_layout="col"), {}, False),  # A from registers as it is
    (spec(4096, 4096, 4096, a_layout="col"), {}, False),  # both the wrong way: B' would be N-major
    (spec(4096, 264, 4096), {}, False),  # M' = 264 rows: the transpose would be mma.sync anyway
    (spec(4096, 4096, 4096, bias="col"), {}, True),  # an epilogue: transposed with the product
    (spec(4096, 4096, 4096, dynamic="m"), {}, False),  # sizes known at launch
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"), {}, False),  # 16-bit: wgmma transposes by itself
    (spec(4096, 4096, 4096), {"warps": "2x2", "warp_tile": "4x8"}, False),  # a forced tiling
    (spec(4096, 4096, 4096), {"wgmma": True}, False),  # forced warpgroups: the fill, as asked
    (spec(4096, 4096, 4096), {"pair_bytes": False}, False),
])
def test_where_it_applies(s, kw, want):
    assert transposed(s, **kw) == want
    if want:  # and what tile-plan then makes of it
        sched = schedule(s, **kw)
        assert (sched.mma, sched.pair_bytes, sched.fill) == ("wgmma", "a", "")


def tf32(m, n, k, rounding="rna", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, "tf32", "tf32", "f32", rounding=rounding, **kw)


@pytest.mark.parametrize("s, kw, want", [
    (tf32(512, 4096, 4096), {}, True),  # A K-major, B N-major: A' = B^T filled, B' = A^T copied
    (tf32(4096, 4096, 4096), {}, True),
    (tf32(2048, 2048, 256, "rn"), {}, True),
    (tf32(4096, 4096, 4096, "trunc"), {}, True),  # B' copied as stored, not rounded
    (tf32(128, 4096, 4096), {}, False),  # 128 rows: the transpose's narrow CTAs lose
    (tf32(4096, 4096, 4096, b_layout="col"), {}, False),  # K-major B: as it is
    (tf32(4096, 4096, 4096, a_layout="col"), {}, False),  # both the wrong way
    (tf32(4096, 4096, 4096, bias="col", act="relu"), {}, True),  # an epilogue, transposed with it
    (tf32(4096, 4096, 4096), {"wgmma": True}, False),  # forced warpgroups: B filled, as asked
])
def test_where_it_applies_to_tf32(s, kw, want):
    """tf32 with a K-major A and an N-major B from 512 rows (`configs.TRANSPOSED_MIN_ROWS`): the
    transpose fills A' (M-major) instead of B and copies B' K-major."""
    assert transposed(s, **kw) == want
    if want:
        sched = schedule(s, **kw)
        assert (sched.mma, sched.pair_bytes, sched.fill) == ("wgmma", "", "a")


class _TransposeFirst(PassInstrument):
    """Transposes every kernel before `tile-plan` (a forced tiling runs no `tile-transpose-product`):
    the transpose of a problem small enough to emulate, which the pass leaves to mma.sync."""

    def __call__(self, previous, module, next_) -> None:
        super().__call__(previous, module, next_)
        if isinstance(next_, TilePlan):
            for k in [o for o in module.walk() if isinstance(o, func.FuncOp)]:
                transpose(k)


@pytest.mark.parametrize("s", [
    tf32(200, 136, 72),  # ragged everywhere, K not a whole stage
    tf32(130, 264, 300, "rn", c=True),  # D = A B + C, C through its view
    tf32(96, 128, 128, "trunc", batch=2),
])
def test_tf32_transposed_emulated(s):
    """A tf32 kernel computed as its transpose (A' = B^T filled M-major, B' = A^T copied K-major, by
    warpgroups) gives D within the reference's bound of the product as written, from the arguments
    as the caller gives them, in the emulator."""
    from tilemma.compiler.driver.runner import run_compiled

    forced = options(wgmma=True, warps="8x1", warp_tile="1x32")
    [kernel] = compile_text(str(gemm_module(s)), s.name, forced, _TransposeFirst())
    assert kernel.variant.startswith("wgmma.mma_async"), kernel.variant
    [written] = compile_text(str(gemm_module(s)), s.name, forced)
    assert kernel.ptx != written.ptx  # (the product as written fills B)
    result = run_compiled(kernel, 5, "emulator")
    assert result.ok, result.line()


def test_sm90_keeps_mma_sync():
    assert not transposed(spec(4096, 4096, 4096), "90")


@pytest.mark.parametrize("s", [
    spec(512, 520, 1024),  # the loop unrolled by two (8 stages), a ragged M' edge
    spec(520, 600, 300, "u8"),  # ragged everywhere, K not a whole stage
    spec(512, 1024, 512, c=True),  # D = A B + C, C through its view
    spec(512, 520, 256, batch=2),  # a batch: the last two dimensions exchanged
])
def test_emulated_exactly_a_times_b(s):
    """D from the arguments as the caller gives them: numpy's A @ B (+ C), every word, and the
    sm_90 mma.sync kernel's words of the same problem."""
    kernel = compiled(s)
    assert kernel.variant.startswith("wgmma.mma_async"), kernel.variant
    assert transposed(s)
    exactly_a_times_b(s, kernel, "emulator", 7)


def test_transposed_type():
    assert transposed_type(MemRefType(i8, [64, 128])) == MemRefType(i8, [128, 64], StridedLayoutAttr([1, 128], 0))
    assert transposed_type(MemRefType(i32, [3, 64, 128], StridedLayoutAttr([8192, 1, 64], 16))) == \
        MemRefType(i32, [3, 128, 64], StridedLayoutAttr([8192, 64, 1], 16))
    with pytest.raises(ValueError, match="2 or more dimensions"):
        transposed_type(MemRefType(i8, [64]))


def _kernel(body: str, args: str) -> str:
    return f"builtin.module {{\n  func.func @v({args}) {{\n{body}\n    func.return\n  }}\n}}\n"


def test_the_verifier_refuses_a_wrong_result_type():
    text = _kernel("    %v = tile.transpose_view %a : memref<64x128xsi8> -> memref<128x64xsi8>",
                   "%a: memref<64x128xsi8>")
    with pytest.raises((LocatedVerifyError, VerifyException), match=r"transposed is memref<128x64xsi8, strided<\[1, 128\]>>"):
        compile_text(text, "v", options())


def test_a_view_of_a_view_is_refused_where_it_is():
    """Tiles read views of kernel arguments: a view of a view is a located error."""
    s = GemmSpec(128, 128, 128, "s8", "s8", "s32")
    text = str(gemm_module(s)).replace(
        "%ta = tile.load %a[0, 0] : memref<128x128xsi8>",
        "%v = tile.transpose_view %a : memref<128x128xsi8> -> memref<128x128xsi8, strided<[1, 128]>>\n"
        "    %w = tile.transpose_view %v : memref<128x128xsi8, strided<[1, 128]>> -> memref<128x128xsi8, strided<[128, 1]>>\n"
        "    %ta = tile.load %w[0, 0] : memref<128x128xsi8, strided<[128, 1]>>")
    assert "%w" in text
    with pytest.raises(LocatedVerifyError, match="tile.transpose_view must view a kernel argument") as e:
        compile_text(text, s.name, options())
    assert e.value.span is not None and "%w = tile.transpose_view" in str(e.value)


def test_a_tuned_kernel_is_left_as_written(tmp_path):
    """A tuning cache's entry for the kernel's class is a configuration of the product as written
    (`tilemma tune` measured it so): that kernel is not transposed, and takes the entry."""
    from tilemma.compiler.core import configs

    s = spec(4096, 4096, 4096)
    path = str(tmp_path / "tune.json")
    chosen = configs.Config("2x2", "4x8", 3, 128)
    key = configs.cache_key("sm_90a", "s8", "s8", "s32", configs.size_class(4096, 4096, 4096))
    configs.save(path, {key: chosen}, {key: {str(chosen): 1.0}})
    assert transposed(s)  # (no cache)
    assert not transposed(s, tune_cache=path)
    kernel = compile_text(str(gemm_module(s)), s.name, options(tune_cache=path))[0]
    assert kernel.abi.config.startswith("warps=2x2 warp-tile=4x8 stages=3"), kernel.abi.config


def test_windows_of_bigger_arguments():
    """Tiles at offsets of bigger arguments (rows 64.. of A, columns 128.. of B, D written at
    (8, 16)): the transpose exchanges each offset's last two, and D's window is A's rows times B's
    columns, every word (numpy on the arguments as given)."""
    import numpy as np

    from tilemma.compiler.driver.runner import run_compiled

    text = """builtin.module {
  func.func @w(%a: memref<640x512xsi8>, %b: memref<512x1024xsi8>, %d: memref<600x700xsi32>) {
    %ta = tile.load %a[64, 0] : memref<640x512xsi8> -> !tile.tile<512x512xsi8>
    %tb = tile.load %b[0, 128] : memref<512x1024xsi8> -> !tile.tile<512x520xsi8>
    %zero = tile.constant 0 : !tile.tile<512x520xsi32>
    %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xsi8>, !tile.tile<512x520xsi8>, !tile.tile<512x520xsi32> -> !tile.tile<512x520xsi32>
    tile.store %td, %d[8, 16] : !tile.tile<512x520xsi32>, memref<600x700xsi32>
    func.return
  }
}"""
    [kernel] = compile_text(text, "w", options())
    assert kernel.variant.startswith("wgmma.mma_async")
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (640, 512)).astype(np.int8)
    b = rng.integers(-128, 128, (512, 1024)).astype(np.int8)
    result = run_compiled(kernel, 3, "emulator", inputs={"a": a, "b": b})
    assert result.ok, result.line()
    [d] = result.outputs.values()
    want = (a[64:576].astype(np.int64) @ b[:, 128:648].astype(np.int64)).astype(np.int32)
    assert np.array_equal(d[8:520, 16:536], want)


@pytest.mark.parametrize("s", [
    spec(512, 520, 256, vector_scales="rows,cols", bias="col", out="f16"),  # a quantized linear layer
    spec(520, 600, 300, "u8", alpha=0.5, vector_scales="cols", act="relu", out="f32"),
    spec(512, 520, 256, bias="row", c=True, out="f32"),
])
def test_an_epilogue_is_transposed_with_the_product(s):
    """The epilogue's per-row and per-column vectors broadcast along the exchanged dimensions: D
    within the reference's bound, and every word the sm_90 mma.sync kernel's for the same
    arguments (the same int32 sums, then the same f32 operations element by element)."""
    assert transposed(s)
    kernel = compiled(s)
    assert kernel.variant.startswith("wgmma.mma_async")
    same_words_as_mma_sync(s, kernel, "emulator", 4)
