"""Strided memref layouts: `strided_layout` reads them, the lowering addresses through them, the
runner builds buffers with them, and what cannot be addressed is refused where it is written.

The end-to-end checks run the emulator on buffers this file lays out itself (logical matrix ->
buffer positions, sentinels in every gap) and compare every element with a reference that reads
the logical matrices; the runner's own checks come on top.
"""

import dataclasses

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr, f16

from tilemma.compiler.verify import emulator, reference
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.core.memref_layout import StridedLayout, strided_layout
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text, parse
from tilemma.compiler.driver.runner import pack_memory, run_compiled
from tests.inprocess import run_main
from tilemma.compiler.driver import cli


def _memref_type(text: str) -> MemRefType:
    module, _ = parse(f"func.func @f(%x: {text}) {{\n  func.return\n}}\n", "t")
    return next(iter(module.body.ops)).body.block.args[0].type


@pytest.mark.parametrize(
    "text, strides, offset, span",
    [
        ("memref<16x8xf16>", (8, 1), 0, 128),
        ("memref<2x16x8xf16>", (128, 8, 1), 0, 256),
        ("memref<16x8xf16, strided<[32, 1]>>", (32, 1), 0, 15 * 32 + 8),
        ("memref<16x8xf16, strided<[1, 16]>>", (1, 16), 0, 128),
        ("memref<16x8xf16, strided<[32, 1], offset: 8>>", (32, 1), 8, 8 + 15 * 32 + 8),
        ("memref<16x8xf16, affine_map<(d0, d1) -> (d0, d1)>>", (8, 1), 0, 128),
        ("memref<3x2xf16, strided<[2, 3]>>", (2, 3), 0, 8),  # interleaved, yet no element shared
    ],
)
def test_strided_layout(text, strides, offset, span):
    lay = strided_layout(_memref_type(text))
    assert (lay.strides, lay.offset, lay.span) == (strides, offset, span)
    pos = lay.positions()
    assert pos.shape == lay.shape and pos.max() == span - 1 and np.unique(pos).size == pos.size


@pytest.mark.parametrize(
    "text, message",
    [
        ("memref<?x8xf16>", "has a dynamic size or stride"),
        ("memref<16x8xf16, strided<[?, 1]>>", "has a dynamic size or stride"),
        ("memref<16x8xf16, strided<[8, 1], offset: ?>>", "has a dynamic offset"),
        ("memref<16x8xf16, affine_map<(d0, d1) -> (d1, d0)>>", "is not supported; use the identity layout"),
        ("memref<16x8xf16, strided<[0, 1]>>", "strides must be positive"),
        ("memref<16x8xf16, strided<[1, 1]>>", "make elements share a place"),
        ("memref<3x2xf16, strided<[2, 2]>>", "make elements share a place"),
    ],
)
def test_strided_layout_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        strided_layout(_memref_type(text))


def test_overlap_is_decided_arithmetically():
    """`overlaps` agrees with listing every position on random small layouts (interleaved ones
    included), and decides large interleaved ones at once (65536^2 asked for 32 GiB, 16384^2 took
    69 s and 5 GB when the positions were listed; issue 25)."""
    import random
    import time

    rng = random.Random(25)
    for _ in range(2000):
        rank = rng.choice([2, 3, 3, 4])
        shape = tuple(rng.randint(1, 12) for _ in range(rank))
        strides = tuple(rng.randint(1, 40) for _ in range(rank))
        lay = StridedLayout(shape, strides, 0)
        assert lay.overlaps() == (np.unique(lay.positions()).size != lay.positions().size), (shape, strides)
    start = time.perf_counter()
    assert strided_layout(_memref_type("memref<16384x16384xf16, strided<[16385, 16384]>>")).span > 0
    with pytest.raises(ValueError, match="make elements share a place"):
        strided_layout(_memref_type("memref<65536x65536xf16, strided<[2, 1]>>"))
    assert not StridedLayout((4096, 4096, 64), (4097, 4096, 1 << 40), 0).overlaps()
    assert StridedLayout((16384, 16384, 64), (16385, 16384, 3), 0).overlaps()
    assert time.perf_counter() - start < 1
    with pytest.raises(ValueError, match="5 interleaved dimensions .* use strides that nest"):
        StridedLayout((1000,) * 5, (1001, 1000, 999, 998, 997), 0).overlaps()


def test_strided_layout_refuses_rank_mismatch():
    with pytest.raises(ValueError, match="1 strides for a rank 2 memref"):
        strided_layout(MemRefType(f16, [16, 8], StridedLayoutAttr([1])))


# ---------------------------------------------------------------------------------------------
# End to end through the emulator
# ---------------------------------------------------------------------------------------------

# Layouts of a rows x cols matrix: (name, strided<...> text or None, (strides, offset)).
def _layouts(rows: int, cols: int) -> dict[str, tuple[str | None, tuple[int, int], int]]:
    return {
        "row": (None, (cols, 1), 0),
        "col": (f"strided<[1, {rows + 3}]>", (1, rows + 3), 0),
        "padded": (f"strided<[{cols + 5}, 1], offset: 7>", (cols + 5, 1), 7),
    }


def _memref(rows: int, cols: int, t: str, layout: str) -> str:
    text = _layouts(rows, cols)[layout][0]
    return f"memref<{rows}x{cols}x{t}" + (f", {text}>" if text else ">")


def _gemm(m, n, k, a_t, b_t, acc, la, lb, lc, ld, cast=None):
    ma, mb = _memref(m, k, a_t, la), _memref(k, n, b_t, lb)
    mc, md = _memref(m, n, acc, lc), _memref(m, n, acc, ld)
    va, vb = a_t, b_t
    lines = [
        f"  %ta = tile.load %a[0, 0] : {ma} -> !tile.tile<{m}x{k}x{a_t}>",
        f"  %tb = tile.load %b[0, 0] : {mb} -> !tile.tile<{k}x{n}x{b_t}>",
    ]
    if cast:
        va = vb = cast
        lines += [
            f'  %ca = tile.cast %ta {{rounding = #tile<rounding rna>}} : !tile.tile<{m}x{k}x{a_t}> -> !tile.tile<{m}x{k}x{cast}>',
            f'  %cb = tile.cast %tb {{rounding = #tile<rounding rna>}} : !tile.tile<{k}x{n}x{b_t}> -> !tile.tile<{k}x{n}x{cast}>',
        ]
    x, y = ("%ca", "%cb") if cast else ("%ta", "%tb")
    lines += [
        f"  %tc = tile.load %c[0, 0] : {mc} -> !tile.tile<{m}x{n}x{acc}>",
        f"  %r = tile.mma {x}, {y}, %tc : !tile.tile<{m}x{k}x{va}>, !tile.tile<{k}x{n}x{vb}>, "
        f"!tile.tile<{m}x{n}x{acc}> -> !tile.tile<{m}x{n}x{acc}>",
        f"  tile.store %r, %d[0, 0] : !tile.tile<{m}x{n}x{acc}>, {md}",
        "  func.return",
    ]
    head = f"func.func @k(%a: {ma}, %b: {mb}, %c: {mc}, %d: {md}) {{"
    return "\n".join([head, *lines, "}"]) + "\n"


def _place(logical: np.ndarray, strides, offset: int, fill) -> np.ndarray:
    """A buffer holding `logical` at offset + i*strides[0] + j*strides[1], `fill` elsewhere."""
    rows, cols = logical.shape
    span = offset + (rows - 1) * strides[0] + (cols - 1) * strides[1] + 1
    buf = np.full(span, fill, dtype=logical.dtype)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    buf[offset + i * strides[0] + j * strides[1]] = logical
    return buf


FAMILIES = {  # a, b, acc, storage of a/b, cast, f32 precision
    "f16": ("f16", "f16", "f32", None),
    "s8": ("si8", "si8", "si32", None),
    "tf32": ("f32", "f32", "f32", "tf32"),
}
LAYOUT_CASES = [  # A, B, C, D
    ("col", "row", "row", "row"),
    ("row", "col", "row", "row"),
    ("padded", "padded", "padded", "padded"),
    ("col", "col", "col", "padded"),
]


@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=lambda c: "-".join(c))
@pytest.mark.parametrize("family", FAMILIES)
def test_strided_gemm_in_the_emulator(family, layouts):
    m, n, k = 37, 29, 45
    a_t, b_t, acc, cast = FAMILIES[family]
    la, lb, lc, ld = layouts
    [kernel] = compile_text(_gemm(m, n, k, a_t, b_t, acc, la, lb, lc, ld, cast), "k", CompileOptions(sm="90"))
    rng = np.random.default_rng(11)
    logical = {
        "a": reference.random_matrix(a_t, (m, k), rng),
        "b": reference.random_matrix(b_t, (k, n), rng),
        "c": reference.random_matrix(acc, (m, n), rng),
    }
    fill = {"f16": np.nan, "f32": np.nan, "si8": -128, "si32": -(2**31)}
    bufs, where = [], {}
    for name, (rows, cols, t, lay) in {
        "a": (m, k, a_t, la), "b": (k, n, b_t, lb), "c": (m, n, acc, lc), "d": (m, n, acc, ld)
    }.items():
        _, strides, offset = _layouts(rows, cols)[lay]
        values = logical.get(name, np.zeros((rows, cols), reference.element_type(t).dtype))
        buf = _place(values, strides, offset, fill[t])
        if name == "d":
            buf[:] = fill[t]
        assert buf.size == kernel.arg_sizes[len(bufs)]
        where[name] = (strides, offset)
        bufs.append(pack_memory(buf, t))
    outs = emulator.emulate(kernel.ptx, kernel.name, kernel.grid, kernel.block, bufs,
                            shared_bytes=kernel.abi.shared_bytes)
    d_buf = outs[3].view(reference.element_type(acc).dtype)
    (rs, cs), off = where["d"]
    i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    got = d_buf[off + i * rs + j * cs]
    untouched = np.ones(d_buf.size, bool)
    untouched[off + i * rs + j * cs] = False
    assert np.array_equal(d_buf[untouched].view(np.uint8), bufs[3].view(d_buf.dtype)[untouched].view(np.uint8))
    a, b, c = logical["a"], logical["b"], logical["c"]
    if cast:
        a, b = (reference.round_tf32(x, "rna") for x in (a, b))
    if acc == "si32":  # exact, and independent of the reference module: no wrap at these sizes
        want = a.astype(np.int64) @ b.astype(np.int64) + c
        assert np.array_equal(got.astype(np.int64), want)
    else:
        t = cast or a_t
        want = reference.mma_reference(a, b, c, a_type=t, b_type=t, acc_type=acc)
        cmp = reference.compare(got, want, acc_type=acc, a_type=t, k=k, a=a, b=b, c=c)
        assert cmp.ok, cmp.detail
    assert run_compiled(kernel, seed=4, on="emulator").ok  # the runner lays out the same way


def test_batched_strided_gemm():
    """Rank-3 memrefs: a column-major batch of A, B with padded rows and a batch stride."""
    text = """func.func @k(%a: memref<2x19x21xf16, strided<[512, 1, 20]>>, %b: memref<2x21x13xf16, strided<[400, 16, 1], offset: 3>>, %d: memref<2x19x13xf16>) {
  %ta = tile.load %a[0, 0, 0] : memref<2x19x21xf16, strided<[512, 1, 20]>> -> !tile.tile<2x19x21xf16>
  %tb = tile.load %b[0, 0, 0] : memref<2x21x13xf16, strided<[400, 16, 1], offset: 3>> -> !tile.tile<2x21x13xf16>
  %r = tile.matmul %ta, %tb : !tile.tile<2x19x21xf16>, !tile.tile<2x21x13xf16> -> !tile.tile<2x19x13xf16>
  tile.store %r, %d[0, 0, 0] : !tile.tile<2x19x13xf16>, memref<2x19x13xf16>
  func.return
}
"""
    [kernel] = compile_text(text, "k", CompileOptions(sm="90"))
    assert kernel.arg_sizes == (512 + 18 + 20 * 20 + 1, 3 + 400 + 20 * 16 + 12 + 1, 2 * 19 * 13)
    assert run_compiled(kernel, seed=9, on="emulator").ok


def test_column_stride_changes_the_ptx():
    row = compile_text(_gemm(37, 29, 45, "f16", "f16", "f32", "row", "row", "row", "row"), "k", CompileOptions())
    col = compile_text(_gemm(37, 29, 45, "f16", "f16", "f32", "col", "row", "row", "row"), "k", CompileOptions())
    assert "mul.wide.u32" in col[0].ptx and row[0].ptx != col[0].ptx


def test_runner_catches_a_kernel_that_ignores_the_strides():
    """The row-major kernel's PTX run on a column-major A's buffers reads the wrong places."""
    [good] = compile_text(_gemm(37, 29, 45, "f16", "f16", "f32", "col", "row", "row", "row"), "k", CompileOptions())
    [row] = compile_text(_gemm(37, 29, 45, "f16", "f16", "f32", "row", "row", "row", "row"), "k", CompileOptions())
    assert run_compiled(good, seed=1, on="emulator").ok
    assert not run_compiled(dataclasses.replace(good, ptx=row.ptx), seed=1, on="emulator").ok


# ---------------------------------------------------------------------------------------------
# What is refused, located
# ---------------------------------------------------------------------------------------------


def _compile_cli(text: str):
    return run_main("tilemma", cli.main, ["compile", "-", "--sm", "80"], text)  # in process (tests.inprocess)


@pytest.mark.parametrize(
    "a_memref, line, message",
    [
        ("memref<16x64xsi8, strided<[64, 1], offset: ?>>", 2, "has a dynamic offset"),
        ("memref<16x64xsi8, affine_map<(d0, d1) -> (d1, d0)>>", 2, "is not supported; use the identity layout"),
    ],
)
def test_refused_layouts_are_located(a_memref, line, message):
    elem = "si8"
    text = f"""func.func @k(%a: {a_memref}, %b: memref<64x8x{elem}>, %d: memref<16x8xsi32>) {{
  %ta = tile.load %a[0, 0] : {a_memref} -> !tile.tile<16x64x{elem}>
  %tb = tile.load %b[0, 0] : memref<64x8x{elem}> -> !tile.tile<64x8x{elem}>
  %z = tile.constant 0 : !tile.tile<16x8xsi32>
  %r = tile.mma %ta, %tb, %z : !tile.tile<16x64x{elem}>, !tile.tile<64x8x{elem}>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  tile.store %r, %d[0, 0] : !tile.tile<16x8xsi32>, memref<16x8xsi32>
  func.return
}}
"""
    r = _compile_cli(text)
    assert r.returncode == 1 and f"<stdin>:{line}:3" in r.stderr and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_sparse_a_needs_unit_column_stride():
    text = """func.func @k(%a: memref<16x32xf16, strided<[1, 16]>>, %b: memref<32x8xf16>, %d: memref<16x8xf32>) {
  %ta = tile.load %a[0, 0] : memref<16x32xf16, strided<[1, 16]>> -> !tile.tile<16x32xf16>
  %tb = tile.load %b[0, 0] : memref<32x8xf16> -> !tile.tile<32x8xf16>
  %sa = tile.compress %ta {prune} : !tile.tile<16x32xf16> -> !tile.sparse<16x32xf16>
  %z = tile.constant 0.0 : !tile.tile<16x8xf32>
  %r = tile.mma %sa, %tb, %z : !tile.sparse<16x32xf16>, !tile.tile<32x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %r, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}
"""
    r = _compile_cli(text)
    assert r.returncode == 1 and "<stdin>:2:3" in r.stderr, r.stderr
    assert "a compressed (tile.compress) operand is read in runs along its rows" in r.stderr
    [ok] = compile_text(text.replace(", strided<[1, 16]>", ""), "k", CompileOptions(sm="90"))
    assert run_compiled(ok, seed=3, on="emulator").ok


def test_overlapping_store_is_refused():
    text = """func.func @k(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf32, strided<[4, 1]>>) {
  %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
  %z = tile.constant 0.0 : !tile.tile<16x8xf32>
  %r = tile.mma %ta, %tb, %z : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %r, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32, strided<[4, 1]>>
  func.return
}
"""
    r = _compile_cli(text)
    assert r.returncode == 1 and "<stdin>:6:3" in r.stderr, r.stderr
    assert "strides [4, 1] make elements share a place" in r.stderr


def test_layout_dataclass():
    lay = StridedLayout((2, 3), (1, 2), 4)
    assert lay.span == 4 + 1 + 4 + 1 and lay.positions().tolist() == [[4, 6, 8], [5, 7, 9]]


@pytest.mark.parametrize(
    "spec, sm, layouts",
    [
        (GemmSpec(37, 29, 45, "s4", "s4", "s32"), "90",  # widened to s8 in the load
         {"memref<37x45xsi4>": "strided<[51, 1], offset: 3>", "memref<45x29xsi4>": "strided<[33, 1], offset: 1>",
          "memref<37x29xsi32>": "strided<[1, 40]>"}),
        (GemmSpec(37, 29, 45, "s4", "s4", "s32", shape="m16n8k64"), "80",
         {"memref<37x45xsi4>": "strided<[51, 1], offset: 3>", "memref<45x29xsi4>": "strided<[33, 1], offset: 1>"}),
        (GemmSpec(21, 13, 70, "e4m3", "e2m1", "f32", scale="ue8m0", scale_block=32), "120a",
         {"memref<21x70xf8E4M3FN>": "strided<[1, 24]>", "memref<70x13xf4E2M1FN>": "strided<[14, 1], offset: 3>",
          "memref<21x3xf8E8M0FNU>": "strided<[1, 24]>", "memref<3x13xf8E8M0FNU>": "strided<[16, 1], offset: 5>"}),
        (GemmSpec(21, 13, 70, "e3m2", "e2m3", "f32"), "120a",  # fp6: one byte each, any stride
         {"memref<21x70xf6E3M2FN>": "strided<[1, 24]>", "memref<70x13xf6E2M3FN>": "strided<[1, 72]>"}),
        # packed elements in any order: element (i, j) at bit (offset + i*s0 + j*s1) * bits
        (GemmSpec(37, 29, 45, "s4", "s4", "s32"), "90",
         {"memref<37x45xsi4>": "strided<[1, 41], offset: 5>", "memref<45x29xsi4>": "strided<[1, 47]>"}),
        (GemmSpec(37, 29, 300, "b1", "b1", "s32", popc="xor"), "90",
         {"memref<37x300xi1>": "strided<[1, 39], offset: 3>", "memref<300x29xi1>": "strided<[1, 301]>"}),
    ],
    ids=["s4-widened", "s4-native", "block-scaled", "fp6", "s4-column-major", "b1-column-major"],
)
def test_strided_narrow_types(spec, sm, layouts):
    """Packed sub-byte operands with padded rows and offsets (a tile may start mid-byte) or
    column-major; byte types, scales included, in any layout."""
    text = str(gemm_module(spec))
    for plain, layout in layouts.items():
        assert plain in text
        text = text.replace(plain, plain[:-1] + f", {layout}>")
    [kernel] = compile_text(text, "k", CompileOptions(sm=sm))
    result = run_compiled(kernel, seed=6, on="emulator")
    assert result.ok, result.line()
