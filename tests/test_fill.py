"""The transposing fill - an 8- or 4-bit operand stored M- or N-contiguous staged through registers
(`warp.fill_load` / `warp.fill_store`) into the K-major stage ldmatrix reads - and the gather
(the same ops with `gather`: rows not 4-byte aligned, copied as stored element by element). In the emulator
against the project's reference (every element, integers exactly) at odd sizes; what `tile-plan`
chooses and refuses; the chunk layout covering a stage exactly once. An N-major 8-bit B is read by
byte-pair ldmatrix by default (tests/test_pair_bytes.py): these kernels ask for the fill
(`pair_bytes=False`). (The emulator's `prmt`: tests/test_emulator.py; on the GPU:
tests/gpu/test_fill_gpu.py.)"""

import numpy as np
import re

import pytest
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.utils.exceptions import VerifyException

import tilemma
from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.dialects import warp

from tests.wgmma_cases import warp_module


def warp_text(spec: GemmSpec, **options) -> str:
    """The kernel at the warp level (what `tilemma compile --emit warp` prints), B filled."""
    options.setdefault("pair_bytes", False)
    return str(warp_module(spec, "90", **options))


def compiled(spec: GemmSpec, **options):
    options.setdefault("pair_bytes", False)
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", tune_cache="", **options))
    return kernel


CASES = {  # (spec, the operands filled)
    "b-row": (GemmSpec(70, 72, 200, "s8", "s8", "s32"), "b"),
    "a-col": (GemmSpec(68, 96, 300, "u8", "s8", "s32", a_layout="col", b_layout="col"), "a"),
    "both": (GemmSpec(68, 100, 260, "s8", "u8", "s32", a_layout="col"), "ab"),
    "fp8": (GemmSpec(100, 68, 96, "e4m3", "e5m2", "f32"), "b"),
    "batched": (GemmSpec(68, 64, 160, "s8", "s8", "s32", batch=3, bcast="b"), "b"),
    "epilogue": (GemmSpec(64, 96, 128, "s8", "s8", "s32", a_layout="col", vector_scales="rows,cols", out="f16"), "ab"),
}


@pytest.mark.parametrize("name", CASES)
def test_fill_matches_the_reference(name):
    spec, fill = CASES[name]
    kernel = compiled(spec)
    assert "stages=0" not in kernel.abi.config and "prmt.b32" in kernel.ptx, kernel.abi.config
    assert bool(re.search(r"cp\.async\.c[ag]\.shared", kernel.ptx)) == (fill != "ab")
    result = run_compiled(kernel, seed=11, on="emulator")
    assert result.ok, result.line()


FILL4 = {  # 4-bit integers: (spec, target, the operands filled); sm_90 widens them to the 8-bit mma
    "s4-b-row": (GemmSpec(70, 72, 200, "s4", "s4", "s32"), "90", "b"),
    "u4-a-col": (GemmSpec(72, 96, 264, "u4", "s4", "s32", a_layout="col", b_layout="col"), "90", "a"),
    "both": (GemmSpec(136, 80, 384, "s4", "u4", "s32", a_layout="col"), "90", "ab"),
    "batched": (GemmSpec(40, 64, 256, "u4", "u4", "s32", batch=3), "90", "b"),
    "split-k": (GemmSpec(16, 256, 2048, "s4", "s4", "s32"), "90", "b"),
    "native-sm90": (GemmSpec(72, 80, 256, "u4", "s4", "s32", a_layout="col", shape="m16n8k64"), "90", "ab"),
    "native-sm80": (GemmSpec(130, 88, 328, "s4", "s4", "s32"), "80", "b"),
}


def _fill4(name: str):
    spec, sm, fill = FILL4[name]
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm=sm, tune_cache=""))
    return kernel, fill


@pytest.mark.parametrize("name", FILL4)
def test_4bit_fill_matches_the_reference(name):
    """The nibble interleave (`shl`/`shr` by 4 under the nibble masks) before the byte transpose;
    staged, and cp.async only for the operand not filled; every element of D exact."""
    kernel, fill = _fill4(name)
    assert "stages=0" not in kernel.abi.config and f", {0xF0F0F0F0};" in kernel.ptx
    assert bool(re.search(r"cp\.async\.c[ag]\.shared", kernel.ptx)) == (fill != "ab")
    result = run_compiled(kernel, seed=13, on="emulator")
    assert result.ok, result.line()


def test_a_stage_too_short_for_the_4bit_chunks_is_made_longer():
    """A 64-row CTA of 256 threads (what a 512-row problem gets by default): 4 stages of K 128
    give the fill of A 128 chunks of 8 x 8 elements, too few to give each thread one; the plan
    doubles the stage K (instead of taking the simple schedule), and D is exact."""
    kernel = compiled(GemmSpec(64, 256, 256, "s4", "s4", "s32", a_layout="col", b_layout="col"),
                      warps="2x4", warp_tile="2x8")
    assert kernel.abi.config == "warps=2x4 warp-tile=2x8 stages=4 stage-k=256", kernel.abi.config
    result = run_compiled(kernel, seed=4, on="emulator")
    assert result.ok, result.line()


def test_4bit_fill_check_catches_a_wrong_nibble():
    """Moving the odd lines' nibbles by 0 instead of 4 breaks D: the data reach every nibble."""
    kernel, _ = _fill4("s4-b-row")
    # the nibble move is the shift that the odd nibbles' mask (0x0F0F0F0F) follows
    bad = re.sub(r"shr\.u32 (%r\d+), (%r\d+), 4;(\s+and\.b32 \1, \1, 252645135;)", r"shr.u32 \1, \2, 0;\3", kernel.ptx)
    assert bad != kernel.ptx
    import dataclasses
    assert not run_compiled(dataclasses.replace(kernel, ptx=bad), seed=13, on="emulator").ok


def test_fill_with_split_k():
    kernel = compiled(GemmSpec(16, 256, 2048, "s8", "s8", "s32"), split_k=4)
    assert "split-k=4" in kernel.abi.config and "prmt.b32" in kernel.ptx
    result = run_compiled(kernel, seed=2, on="emulator")
    assert result.ok, result.line()


@pytest.mark.parametrize("spec, options, aligned", [
    (GemmSpec(70, 72, 256, "s8", "s8", "s32"), {}, True),  # K whole stages of 64
    (GemmSpec(16, 256, 2048, "s8", "s8", "s32"), {"split_k": 4}, True),  # each split's part from a multiple of a stage
    (GemmSpec(70, 72, 200, "s8", "s8", "s32"), {}, False),  # a ragged last stage
], ids=["whole-stages", "split-k", "ragged-k"])
def test_a_stage_wholly_inside_or_past_k_takes_one_guard(spec, options, aligned):
    """Where each stage lies wholly inside K or past it (`warp.fill_load` `aligned` on K: K whole
    stages, a split's part from a multiple of one), the stage's words share one predicate, on its
    origin (the pipeline's last load, past K, loads nothing); else each word has its own. D as the
    reference's either way."""
    fills = re.findall(r"warp\.fill_load .*", warp_text(spec, **options))
    assert fills and all(("aligned = array<i64: 1, 0>" in f) == aligned for f in fills), fills
    kernel = compiled(spec, **options)
    guards = re.findall(r"@(%p\d+) ld\.global\.b32", kernel.ptx)
    words = int(re.search(r"!warp\.staged<(\d+)>", fills[0]).group(1))
    assert len(guards) == len(fills) * words  # every word loaded under a guard
    assert len(set(guards)) == (len(fills) if aligned else len(guards))
    result = run_compiled(kernel, seed=5, on="emulator")
    assert result.ok, result.line()


def test_fill_with_sizes_known_at_launch():
    """One `?`-size kernel: the variant for N a multiple of 4 fills B a word at a time; the one for
    N = 70 (B's rows 70 bytes: a word would straddle the edge and the rows are not aligned) loads
    the fill's bytes one by one, and gathers A's rows of 64 bytes at unknown offsets; both staged,
    both compute D exactly."""
    spec = GemmSpec(0, 0, 0, "s8", "s8", "s32", dynamic="mnk")
    [kernel] = tilemma.compile(str(gemm_module(spec)), sm="90", cache=False)
    rng = np.random.default_rng(8)
    for m, n, k, filled in ((100, 68, 96, True), (37, 70, 64, False)):
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (k, n), dtype=np.int8)
        c = rng.integers(-2**20, 2**20, (m, n), dtype=np.int32)
        d = np.zeros((m, n), np.int32)
        arrays = (a, b, c, d)
        bound = kernel.bind([x.shape for x in arrays], [tuple(s // x.itemsize for s in x.strides) for x in arrays])
        assert "prmt.b32" in bound.ptx and "stages=0" not in bound.abi.config, bound.abi.config
        assert ("ld.global.u8" in bound.ptx) != filled
        kernel.emulate(a, b, c, d)
        want = (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32)
        np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("spec, fill", [
    (GemmSpec(256, 256, 256, "s8", "s8", "s32"), "b"),
    (GemmSpec(256, 256, 256, "s8", "s8", "s32", a_layout="col", b_layout="col"), "a"),
    (GemmSpec(256, 256, 256, "s8", "s8", "s32", a_layout="col"), "ab"),
    (GemmSpec(256, 256, 256, "s8", "s8", "s32", b_layout="col"), ""),
    (GemmSpec(256, 256, 256, "s4", "s4", "s32"), "b"),
    (GemmSpec(256, 256, 256, "u4", "u4", "s32", a_layout="col"), "ab"),
    (GemmSpec(256, 256, 256, "s4", "s4", "s32", b_layout="col"), ""),
])
def test_plan_fills_the_operands_ldmatrix_cannot_read(spec, fill):
    kernel = compiled(spec)
    assert ("st.shared.b32" in kernel.ptx) == bool(fill) and "stages=0" not in kernel.abi.config


def test_a_ragged_4bit_word_leaves_the_simple_schedule_and_forcing_is_refused():
    """N = 76 4-bit elements: a row's last word straddles the edge (and the rows, 38 bytes, are not
    4-byte aligned); 4-bit fills load whole words."""
    spec = GemmSpec(64, 76, 64, "s4", "s4", "s32")
    assert "stages=0" in compiled(spec).abi.config
    with pytest.raises(LocatedVerifyError, match="4-bit B must be K-major"):
        compiled(spec, stages=3)


BY_ELEMENT = {  # 8-bit operands the fill transposes, loaded a byte at a time: (spec, filled, by element)
    "b-odd-n": (GemmSpec(37, 91, 53, "s8", "s8", "s32"), "b", "b"),
    "b-n-62": (GemmSpec(64, 62, 64, "u8", "s8", "s32"), "b", "b"),  # rows aligned to 2 bytes, last word ragged
    "a-odd-m": (GemmSpec(37, 64, 64, "s8", "u8", "s32", a_layout="col", b_layout="col"), "a", "a"),
    "both-odd": (GemmSpec(37, 91, 53, "s8", "u8", "s32", a_layout="col"), "ab", "ab"),
    "a-odd-b-words": (GemmSpec(37, 68, 96, "s8", "s8", "s32", a_layout="col"), "ab", "a"),
    "batched": (GemmSpec(130, 70, 200, "s8", "s8", "s32", batch=2), "b", "b"),
    "split-k": (GemmSpec(16, 250, 2048, "s8", "s8", "s32"), "b", "b"),
    "fp8": (GemmSpec(37, 91, 53, "e4m3", "e5m2", "f32"), "b", "b"),
}


@pytest.mark.parametrize("name", BY_ELEMENT)
def test_fill_by_element_matches_the_reference(name):
    """Lines not 4-byte aligned, or an M or N that ends inside a word: the fill loads each byte
    (`ld.global.u8`, zero past the extent), packs the words and transposes them as before."""
    spec, fill, by_element = BY_ELEMENT[name]
    kernel = compiled(spec)
    config = kernel.abi.config
    assert "stages=0" not in config and "st.shared.b32" in kernel.ptx and "ld.global.u8" in kernel.ptx, config
    text = warp_text(spec)
    assert re.search(rf"fill = {fill}\b", text)
    for what in "ab":
        loads = [x for x in re.findall(rf"warp.fill_load %{what}\[.*", text) if not re.search(r"\bgather\b", x)]
        assert all(("by_element" in x) == (what in by_element) for x in loads) and bool(loads) == (what in fill)
    result = run_compiled(kernel, seed=21, on="emulator")
    assert result.ok, result.line()


def test_fill_by_element_schedule_and_op():
    """The schedule names the operand in fill and gather; the fill_load carries `by_element`, which
    only a transposing fill of 8-bit elements may."""
    from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, MemRefType, Signedness, i64
    from xdsl.ir import Block

    text = warp_text(GemmSpec(64, 91, 64, "s8", "s8", "s32"))
    assert "fill = b, gather = b" in text and re.search(r"warp.fill_load %b\[.*by_element", text)
    i4 = MemRefType(IntegerType(4, Signedness.SIGNED), [128, 128])
    block = Block(arg_types=[i4, IndexType(), IndexType(), IndexType()])
    op = warp.FillLoadOp(block.args[0], block.args[1:], [0, 0], [1, 128, 128], [128, 128], 128, transpose=True,
                         by_element=True)
    with pytest.raises(VerifyException, match="by_element loads a transposing fill's 8-bit elements"):
        op.verify()


def test_a_stage_the_fill_cannot_split_evenly_is_refused_when_forced():
    spec = GemmSpec(256, 256, 256, "s8", "s8", "s32")
    with pytest.raises(LocatedVerifyError, match="transposing fill of B cannot split a 16 x 32 stage evenly "
                       "over 128 threads"):
        compiled(spec, warps="2x2", warp_tile="1x1", stages=3, stage_k=32)


@pytest.mark.parametrize("lines, across, bits, threads", [
    (128, 128, 8, 128), (128, 128, 8, 256), (64, 128, 8, 256), (256, 64, 8, 512), (32, 128, 8, 32),
    (128, 32, 8, 64), (128, 128, 4, 256), (128, 256, 4, 128), (64, 128, 4, 128)])
def test_fill_layout_covers_every_chunk_once(lines, across, bits, threads):
    layout = warp.FillLayout.of(lines, across, bits, threads)
    assert layout is not None
    per = 32 // bits
    seen = [(layout.word(t), layout.block(t) + i * layout.block_step)
            for t in range(threads) for i in range(layout.chunks_per_thread)]
    assert sorted(seen) == [(w, b) for w in range(lines // per) for b in range(across // per)]


def test_fill_layout_refuses_what_does_not_split():
    assert warp.FillLayout.of(32, 32, 8, 128) is None  # 64 chunks over 128 threads
    assert warp.FillLayout.of(130, 128, 8, 128) is None  # lines not a multiple of 4
    assert warp.FillLayout.of(128, 128, 16, 128) is None  # 16-bit: ldmatrix .trans reads it
    assert warp.FillLayout.of(132, 128, 4, 128) is None  # 4-bit lines not a multiple of 8
    assert warp.FillLayout.of(128, 128, 1, 128) is None  # 1-bit: not transposed


def test_staged_type_and_fill_store_verifier():
    from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, MemRefType, Signedness, i64
    from xdsl.ir import Block

    assert str(warp.StagedType(16)) == "!warp.staged<16>"
    stage = MemRefType(IntegerType(8, Signedness.SIGNED), [3, 128, 128], memory_space=IntegerAttr(warp.SHARED, i64))
    block = Block(arg_types=[warp.StagedType(8), stage, IndexType()])
    op = warp.FillStoreOp(block.args[0], block.args[1], block.args[2], 128)
    block.add_op(op)
    with pytest.raises(VerifyException, match="each thread stores 32 words of this stage, not 8"):
        op.verify()


GATHER = {  # (spec, the operands gathered): rows whose alignment rules out cp.async
    "f16-odd-n": (GemmSpec(66, 71, 200, "f16", "f16", "f32"), "b"),  # B's rows: 142 bytes
    "bf16-odd-k": (GemmSpec(64, 64, 99, "bf16", "bf16", "f32"), "a"),  # A's rows: 198 bytes
    "f16-m-major-odd-m": (GemmSpec(65, 72, 96, "f16", "f16", "f32", a_layout="col"), "a"),
    "f16-k-major-odd-k": (GemmSpec(64, 40, 97, "f16", "f16", "f32", b_layout="col"), "ab"),
    "s8-odd-k": (GemmSpec(64, 40, 99, "s8", "s8", "s32", b_layout="col"), "ab"),
    "f16-odd-n-batched-bias": (GemmSpec(37, 61, 64, "f16", "f16", "f32", batch=2, bias="col", out="f16"), "b"),
}


@pytest.mark.parametrize("name", GATHER)
def test_gather_matches_the_reference(name):
    """Rows that are not 4-byte aligned are staged, copied element by element through
    registers (`gather`); past the extent every element is zero (K's tail adds nothing)."""
    spec, gather = GATHER[name]
    kernel = compiled(spec)
    assert "stages=0" not in kernel.abi.config, kernel.abi.config
    loads = "ld.global.u8" if spec.a == "s8" else "ld.global.u16"
    assert kernel.ptx.count(loads) and "prmt.b32" in kernel.ptx
    assert bool(re.search(r"cp\.async\.c[ag]\.shared", kernel.ptx)) == (gather != "ab")
    result = run_compiled(kernel, seed=13, on="emulator")
    assert result.ok, result.line()


def test_gather_with_split_k():
    kernel = compiled(GemmSpec(16, 71, 2048, "f16", "f16", "f32"), split_k=4)
    assert "split-k=4" in kernel.abi.config and "ld.global.u16" in kernel.ptx
    result = run_compiled(kernel, seed=4, on="emulator")
    assert result.ok, result.line()


def test_what_neither_fills_nor_gathers_keeps_the_simple_schedule():
    """A 4-bit A whose rows end inside a byte; a 4-bit B row-major whose rows are not 4-byte
    aligned (its words would straddle rows)."""
    assert "stages=0" in compiled(GemmSpec(37, 45, 202, "s4", "s4", "s32", b_layout="col")).abi.config
    assert "stages=0" in compiled(GemmSpec(37, 44, 64, "s4", "s4", "s32")).abi.config


@pytest.mark.parametrize("rows, cols, bits, threads", [(128, 64, 16, 128), (64, 128, 16, 256), (32, 128, 8, 128)])
def test_gather_layout_covers_every_word_once(rows, cols, bits, threads):
    layout = warp.GatherLayout.of(rows, cols, bits, threads)
    assert layout is not None
    seen = [(layout.row(t) + i * layout.row_step, layout.word(t))
            for t in range(threads) for i in range(layout.chunks_per_thread)]
    assert sorted(seen) == [(r, w) for r in range(rows) for w in range(cols * bits // 32)]


def test_fills_dealt_to_a_producer_warpgroup_and_a_gather_that_cannot_be():
    """`first_thread` deals a transposing fill to threads first_thread .. (a producer warpgroup:
    its loads and stores the same threads'); a gather is always the whole CTA's."""
    gathered = warp_module(GemmSpec(37, 91, 53, "f16", "f16", "f32"), "90")  # rows not 4-byte aligned
    gather = next(o for o in gathered.walk() if isinstance(o, warp.FillLoadOp))
    gather.verify()
    gather.properties["first_thread"] = IntegerAttr(256, i64)
    with pytest.raises(VerifyException, match="a gather is dealt to the whole CTA"):
        gather.verify()
    filled = warp_module(GemmSpec(256, 256, 512, "s8", "s8", "s32"), wgmma=True, producers=4, shared_transpose=False)
    store = next(o for o in filled.walk() if isinstance(o, warp.FillStoreOp))
    assert (store.threads.value.data, warp.first_thread(store)) == (128, 256)
    store.properties["first_thread"] = IntegerAttr(0, i64)
    with pytest.raises(VerifyException, match="stored by other threads"):
        store.verify()
