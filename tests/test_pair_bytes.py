"""Byte-pair reads of an 8-bit N-major B (`#warp.schedule` pair_bytes): the stage copied as stored
(K x N) by cp.async, read by `ldmatrix .x4.trans` of K rows 4i, 4i + 1 | 4i + 2, 4i + 3 and
regrouped by `prmt` into the even and the odd columns' fragments, the accumulators put in that
order before the K loop (`warp.pair_columns`) and back after it (`warp.unpair_columns`). In the
emulator against the project's reference (every element; integers exactly) at odd sizes, with
split-K, batches, an epilogue and a filled A; what `tile-plan` chooses; the
swizzle fold that keeps the reads conflict-free; the ops' verifiers. (GPU:
tests/gpu/test_pair_bytes_gpu.py.)"""

import dataclasses
import re

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text, lower, parse
from tilemma.compiler.driver.runner import run_compiled
from tilemma.dialects import warp
from tilemma.dialects.swizzle import swizzle_granule


def warp_text(spec: GemmSpec, **options) -> str:
    module, locations = parse(str(gemm_module(spec)), spec.name)
    lower(module, locations, CompileOptions(sm="90", tune_cache="", **options), warp_level=True)
    return str(module)


def compiled(spec: GemmSpec, **options):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", tune_cache="", **options))
    return kernel


CASES = {  # (spec, options, the operands the fill transposes)
    "b-row": (GemmSpec(70, 72, 200, "s8", "s8", "s32"), {}, ""),
    "u8": (GemmSpec(130, 136, 300, "u8", "u8", "s32"), {}, ""),
    "fp8": (GemmSpec(100, 68, 96, "e4m3", "e5m2", "f32"), {}, ""),
    "a-filled": (GemmSpec(68, 100, 260, "s8", "u8", "s32", a_layout="col"), {}, "a"),
    "batched": (GemmSpec(68, 64, 160, "s8", "s8", "s32", batch=3, bcast="b"), {}, ""),
    "split-k": (GemmSpec(16, 256, 2048, "s8", "s8", "s32"), {"split_k": 4}, ""),
    "no-c": (GemmSpec(64, 80, 128, "s8", "s8", "s32", c=False), {}, ""),
    "epilogue": (GemmSpec(64, 96, 128, "s8", "s8", "s32", vector_scales="rows,cols", out="f16"), {}, ""),
    "4-stages-k64": (GemmSpec(96, 128, 320, "s8", "s8", "s32"), {"stages": 4, "stage_k": 64, "warps": "2x2",
                                                                   "warp_tile": "2x4"}, ""),
    "unswizzled": (GemmSpec(64, 64, 128, "s8", "s8", "s32"), {"swizzle": False}, ""),
}


@pytest.mark.parametrize("name", CASES)
def test_pair_bytes_match_the_reference(name):
    spec, options, fill = CASES[name]
    kernel = compiled(spec, **options)
    text = warp_text(spec, **options)
    assert re.search(r"pair_bytes = b\b", text) and bool(re.search(r"fill = a\b", text)) == (fill == "a")
    # B is copied by cp.async (no fill stores of its own) and read by .trans ldmatrix + prmt
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in kernel.ptx and "prmt.b32" in kernel.ptx
    assert "shfl.sync.bfly.b32" in kernel.ptx and "warp.unpair_columns" in text
    # a C the loop starts from goes into pair order first (split-K adds it after the reduction)
    assert ("warp.pair_columns" in text) == (spec.c and "split_k" not in options)
    result = run_compiled(kernel, seed=13, on="emulator")
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


@pytest.mark.parametrize("options, pairs", [({}, True), ({"pair_bytes": False}, False),
                                            ({"warps": "1x4", "warp_tile": "2x1", "stages": 3}, False)])
def test_plan_reads_an_n_major_8bit_b_by_byte_pairs(options, pairs):
    """The default for an N-major 8-bit B; the fill where asked (`--no-pair-bytes`), and where the
    warp tile has an odd number of instruction columns (fragments come two columns a read)."""
    text = warp_text(GemmSpec(256, 192, 256, "s8", "s8", "s32"), **options)
    assert bool(re.search(r"pair_bytes = b\b", text)) == pairs and bool(re.search(r"fill = b\b", text)) != pairs
    assert ("#warp.swizzled<1, fold>" in text) == pairs


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
    for fold, worst in ((False, 2), (True, 1)):
        most = 0
        for base in range(0, 128, 32):
            for q in range(4):
                rows = [base + 4 * (i >> 1) + (i & 1) + 2 * (q & 1) + 16 * (q >> 1) for i in range(8)]
                granules = [swizzle_granule(r, 0, 128, 1, fold) for r in rows]
                most = max(most, max(granules.count(g) for g in granules))
        assert most == worst


def test_swizzled_fold_parses_prints_and_is_checked():
    from tilemma.compiler.driver.pipeline import make_context
    from xdsl.parser import Parser

    ctx = make_context()
    ty = Parser(ctx, "memref<3x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64>").parse_type()
    assert isinstance(ty, MemRefType) and warp.swizzle_fold(ty) and str(ty) == "memref<3x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64>"
    assert not warp.swizzle_fold(Parser(ctx, "memref<3x128x128xsi8, #warp.swizzled<1>, 3 : i64>").parse_type())
    with pytest.raises(Exception, match="expected `fold`"):
        Parser(ctx, "memref<3x128x128xsi8, #warp.swizzled<1, twist>, 3 : i64>").parse_type()
