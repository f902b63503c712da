"""Byte-pair reads of 8-bit operands stored the other way round (`#warp.schedule` pair_bytes: an
M-major A, an N-major B): the stage copied as stored (K x M, K x N) by cp.async, read by
`ldmatrix .x4.trans` of K rows 4i, 4i + 1 | 4i + 2, 4i + 3 and regrouped by `prmt` (A: rows 2g
and 2g + 1 where g and g + 8 belong; B: the even and the odd columns' fragments), the
accumulators put in that order before the K loop (`warp.pair_rows`, `warp.pair_columns`) and
back after it (`warp.unpair_rows`, `warp.unpair_columns`). In the emulator against the project's
reference (every element; integers exactly) at odd sizes, with split-K, batches, sizes known at
launch and an epilogue; that the check sees a wrong exchange; what `tile-plan` chooses; the swizzle
fold that keeps the reads conflict-free. (The ops' verifiers: tests/lit/warp/verify-errors.mlir;
GPU: tests/gpu/test_pair_bytes_gpu.py.)"""

import dataclasses
import re

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text, lower, parse
from tilemma.compiler.driver.runner import bind_sizes, launch_shapes, run_compiled
from tilemma.dialects import warp
from tilemma.dialects.swizzle import swizzle_granule


def warp_text(spec: GemmSpec, **options) -> str:
    module, locations = parse(str(gemm_module(spec)), spec.name)
    lower(module, locations, CompileOptions(sm="90", tune_cache="", **options), warp_level=True)
    return str(module)


def compiled(spec: GemmSpec, **options):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", tune_cache="", **options))
    return kernel


CASES = {  # (spec, options, the operands read by byte pairs)
    "b-row": (GemmSpec(70, 80, 200, "s8", "s8", "s32"), {}, "b"),
    "u8": (GemmSpec(130, 144, 300, "u8", "u8", "s32"), {}, "b"),
    "fp8": (GemmSpec(100, 80, 96, "e4m3", "e5m2", "f32"), {}, "b"),
    "a-col": (GemmSpec(68, 96, 300, "u8", "s8", "s32", a_layout="col", b_layout="col"), {}, "a"),
    "both": (GemmSpec(68, 112, 260, "s8", "u8", "s32", a_layout="col"), {}, "ab"),
    "fp8-a-col": (GemmSpec(100, 72, 96, "e4m3", "e5m2", "f32", a_layout="col", b_layout="col"), {}, "a"),
    "batched": (GemmSpec(68, 64, 160, "s8", "s8", "s32", batch=3, bcast="b"), {}, "b"),
    "batched-a-col": (GemmSpec(132, 64, 160, "s8", "s8", "s32", batch=2, a_layout="col"), {}, "ab"),
    "split-k": (GemmSpec(16, 256, 2048, "s8", "s8", "s32"), {"split_k": 4}, "b"),
    "split-k-both": (GemmSpec(20, 256, 2048, "s8", "s8", "s32", a_layout="col"), {"split_k": 3}, "ab"),
    "no-c": (GemmSpec(64, 80, 128, "s8", "s8", "s32", c=False), {}, "b"),
    "epilogue": (GemmSpec(64, 96, 128, "s8", "s8", "s32", vector_scales="rows,cols", out="f16"), {}, "b"),
    "epilogue-both": (GemmSpec(64, 96, 128, "s8", "s8", "s32", a_layout="col", vector_scales="rows,cols",
                                out="f16"), {}, "ab"),
    "4-stages-k64": (GemmSpec(96, 128, 320, "s8", "s8", "s32"), {"stages": 4, "stage_k": 64, "warps": "2x2",
                                                                   "warp_tile": "2x4"}, "b"),
    "odd-warp-tile": (GemmSpec(96, 72, 128, "s8", "s8", "s32", a_layout="col"),
                      {"warps": "2x2", "warp_tile": "3x1", "stages": 3}, "a"),  # B filled: one column
    "unswizzled": (GemmSpec(64, 64, 128, "s8", "s8", "s32", a_layout="col"), {"swizzle": False}, "ab"),
}


@pytest.mark.parametrize("name", CASES)
def test_pair_bytes_match_the_reference(name):
    spec, options, pairs = CASES[name]
    kernel = compiled(spec, **options)
    text = warp_text(spec, **options)
    assert re.search(rf"pair_bytes = {pairs}\b", text)
    # copied by cp.async and read by .trans ldmatrix + prmt; the fill only for a B of one column
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in kernel.ptx and "prmt.b32" in kernel.ptx
    assert bool(re.search(r"fill = b\b", text)) == (name == "odd-warp-tile")
    assert "shfl.sync.bfly.b32" in kernel.ptx
    for what, ops in (("a", "rows"), ("b", "columns")):
        assert (f"warp.unpair_{ops}" in text) == (what in pairs)
        # a C the loop starts from goes into pair order first (split-K adds it after the reduction)
        assert (f"warp.pair_{ops}" in text) == (what in pairs and spec.c and "split_k" not in options)
    result = run_compiled(kernel, seed=13, on="emulator")
    assert result.ok, result.line()


def test_pair_bytes_with_sizes_known_at_launch():
    """`?` sizes promised multiples of 16 (no gather, and B's copies move 16 bytes) read both
    operands by byte pairs; the kernel bound at launch to two sizes (`--size`) runs right."""
    spec = GemmSpec(96, 144, 200, "s8", "s8", "s32", dynamic="mnk", a_layout="col")
    kernel = compiled(spec, size_multiple="16x16x16", stride_multiple=16)
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" in kernel.ptx and "shfl.sync.bfly.b32" in kernel.ptx
    assert "ld.global.u8" not in kernel.ptx and "st.shared.b32" not in kernel.ptx  # neither gathered nor filled
    for m, n, k in ((96, 144, 208), (48, 64, 96)):
        bound = bind_sizes(kernel, *launch_shapes(kernel, {}, [f"M={m},N={n},K={k}"]))
        result = run_compiled(bound, seed=3, on="emulator")
        assert result.ok, result.line()


def test_the_check_catches_unpaired_columns():
    """Exact columns on structured and random data; and the butterflies matter: with their lane
    masks swapped (the wrong permutation) the same kernel's results are caught."""
    spec = GemmSpec(16, 16, 32, "s8", "s8", "s32", c=False)
    kernel = compiled(spec, warps="1x1", warp_tile="1x2", stages=2)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    b = rng.integers(-128, 128, (32, 16), dtype=np.int8)
    good = run_compiled(kernel, seed=0, on="emulator", inputs={"p_a": a, "p_b": b})
    assert good.ok, good.line()
    assert np.array_equal(next(iter(good.outputs.values())).reshape(16, 16), a.astype(np.int64) @ b.astype(np.int64))
    swapped = re.sub(r"(shfl\.sync\.bfly\.b32 \S+ \S+) ([12]),",
                     lambda m: f"{m.group(1)} {3 - int(m.group(2))},", kernel.ptx)
    assert swapped != kernel.ptx
    bad = run_compiled(dataclasses.replace(kernel, ptx=swapped), seed=0, on="emulator", inputs={"p_a": a, "p_b": b})
    assert not bad.ok


def test_the_check_catches_unpaired_rows():
    """The same for an A read by byte pairs: its three butterflies (lane masks 4, 8, 16) with the
    first and the last swapped leave rows out of place, and the check says so."""
    kernel = compiled(GemmSpec(32, 16, 64, "s8", "s8", "s32", a_layout="col", b_layout="col"),
                      warps="1x1", warp_tile="2x2", stages=2)
    assert run_compiled(kernel, seed=4, on="emulator").ok
    swapped = re.sub(r"(shfl\.sync\.bfly\.b32 \S+ \S+) (4|16),",
                     lambda m: f"{m.group(1)} {20 - int(m.group(2))},", kernel.ptx)
    assert swapped != kernel.ptx
    assert not run_compiled(dataclasses.replace(kernel, ptx=swapped), seed=4, on="emulator").ok


@pytest.mark.parametrize("a_layout, options, pairs, fill", [
    ("row", {}, "b", ""), ("row", {"pair_bytes": False}, "", "b"),
    ("row", {"warps": "1x4", "warp_tile": "2x1", "stages": 3}, "", "b"),
    ("col", {}, "ab", ""), ("col", {"pair_bytes": False}, "", "ab"),
    ("col", {"warps": "1x4", "warp_tile": "2x1", "stages": 3}, "a", "b"),
])
def test_plan_reads_8bit_operands_stored_the_other_way_by_byte_pairs(a_layout, options, pairs, fill):
    """The default for an M-major A and an N-major B of 8 bits; the fill where asked
    (`--no-pair-bytes`), and for B where the warp tile has an odd number of instruction columns
    (its fragments come two columns a read)."""
    text = warp_text(GemmSpec(256, 192, 256, "s8", "s8", "s32", a_layout=a_layout), **options)
    assert re.findall(r"pair_bytes = ([ab]+)\b", text) == ([pairs] if pairs else [])
    assert re.findall(r"fill = ([ab]+)\b", text) == ([fill] if fill else [])
    assert text.count("#warp.swizzled<1, fold>") >= len(pairs) > 0 or not pairs


@pytest.mark.parametrize("a_layout, pairs, fill", [("row", "", "b"), ("col", "a", "b")])
def test_b_rows_of_shorter_copies_take_the_fill(a_layout, pairs, fill):
    """N = 72 bytes a row: B's cp.async would move 8 bytes, where the fill is faster
    (`configs.PAIR_B_COPY`); an M-major A keeps its byte pairs."""
    text = warp_text(GemmSpec(136, 72, 256, "s8", "s8", "s32", a_layout=a_layout))
    assert re.findall(r"pair_bytes = ([ab]+)\b", text) == ([pairs] if pairs else [])
    assert re.findall(r"fill = ([ab]+)\b", text) == [fill]


@pytest.mark.parametrize("spec", [
    GemmSpec(37, 91, 53, "s8", "s8", "s32"),  # N odd: rows not 4-byte aligned, gathered by the fill
    GemmSpec(64, 62, 64, "u8", "s8", "s32"),  # N = 62: a word straddles the edge
    GemmSpec(64, 64, 64, "s8", "s8", "s32", b_layout="col"),  # K-major: read as it is
    GemmSpec(64, 64, 64, "s4", "s4", "s32"),  # 4-bit: the fill
], ids=lambda s: s.name)
def test_what_byte_pairs_do_not_read(spec):
    assert "pair_bytes" not in warp_text(spec)


def test_the_fold_puts_each_pair_matrix_in_eight_bank_groups():
    """A byte-pair matrix is K rows base + 4 (i >> 1) + (i & 1) (+ 2, + 16): with the plain phase
    two of its rows share a granule (2-way conflicts), folded none do."""
    for row_bytes in (64, 128, 256):
        per_line = max(1, 128 // row_bytes)
        for fold, worst in ((False, 2), (True, 1)):
            most = 0
            for base in range(0, 128, 32):
                for q in range(4):
                    rows = [base + 4 * (i >> 1) + (i & 1) + 2 * (q & 1) + 16 * (q >> 1) for i in range(8)]
                    # where in its 128-byte line each row's granule 0 lies: bank group
                    places = [(r % per_line) * (row_bytes // 16) + swizzle_granule(r, 0, row_bytes, 1, fold) % 8
                              for r in rows]
                    most = max(most, max(places.count(p) for p in places))
            assert most == worst, (row_bytes, fold)


def test_swizzled_fold_parses_prints_and_is_checked():
    from tilemma.compiler.driver.pipeline import make_context
    from xdsl.parser import Parser

    ctx = make_context()
    ty = Parser(ctx, "memref<3x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64>").parse_type()
    assert isinstance(ty, MemRefType) and warp.swizzle_fold(ty) and str(ty) == "memref<3x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64>"
    assert not warp.swizzle_fold(Parser(ctx, "memref<3x128x128xsi8, #warp.swizzled<1>, 3 : i64>").parse_type())
    with pytest.raises(Exception, match="expected `fold`"):
        Parser(ctx, "memref<3x128x128xsi8, #warp.swizzled<1, twist>, 3 : i64>").parse_type()


@pytest.mark.parametrize("fields, ok", [
    ("warps = 2x2, warp_tile = 4x8, stages = 4, stage_k = 64, pair_bytes = ab", True),
    ("warps = 2x2, warp_tile = 4x3, stages = 4, stage_k = 64, pair_bytes = a", True),
    ("warps = 2x2, warp_tile = 4x3, stages = 4, stage_k = 64, pair_bytes = b", False),  # B: two columns a read
    ("warps = 2x2, warp_tile = 4x8, stages = 4, stage_k = 64, fill = b, pair_bytes = b", False),  # filled too
    ("warps = 2x2, warp_tile = 4x8, stages = 0, pair_bytes = a", False),  # nothing staged
    ("warps = 2x2, warp_tile = 4x8, stages = 4, stage_k = 64, pair_bytes = c", False),
])
def test_schedule_pair_bytes_parses_and_is_checked(fields, ok):
    from xdsl.parser import Parser

    from tilemma.compiler.driver.pipeline import make_context

    def parse():
        attr = Parser(make_context(), f"#warp.schedule<{fields}>").parse_attribute()
        attr.verify()
        return attr

    if ok:
        attr = parse()
        assert f"pair_bytes = {attr.schedule.pair_bytes}" in str(attr) and fields.endswith(attr.schedule.pair_bytes)
    else:
        with pytest.raises(VerifyException, match="pair_bytes names staged operands"):
            parse()
