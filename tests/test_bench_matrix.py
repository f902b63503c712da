"""benchmarks.matrix and gemm_bench's shapes: the pure-Python parts (shape and part parsing, the
cells, the parts' split, merging CSVs, what --redo runs again, the summary). No GPU, no compile."""

from __future__ import annotations

import pytest

from benchmarks import gemm_bench as gb
from benchmarks import matrix as mx


@pytest.mark.parametrize("text, shape", [("4096", (4096,) * 3), ("257x129x4096", (257, 129, 4096)),
                                         ("1X4096x11008", (1, 4096, 11008))])
def test_parse_shape(text, shape):
    assert gb.parse_shape(text) == shape and gb.parse_shape(gb.shape_label(shape)) == shape


@pytest.mark.parametrize("text", ["64x64", "0x4x4", "ax4x4", ""])
def test_parse_shape_refuses(text):
    with pytest.raises(ValueError, match="size"):
        gb.parse_shape(text)


def test_flops_and_row_shape():
    assert gb.flops(16) == 2 * 16**3 and gb.flops((2, 3, 5)) == 60
    row = gb.new_row(gb.FAMILIES["f16"], (16, 4096, 4096), "tilemma")
    assert (row.size, row.shape, gb.row_shape(row)) == (16, "16x4096x4096", (16, 4096, 4096))
    assert gb.row_shape(gb.Row("f16", 1024, "cublas")) == (1024,) * 3  # a CSV from before shapes


def test_shapes_option_and_worker_cells():
    args = gb.parse_args(["--families", "f16", "--shapes", "16x4096x4096", "1000"])
    assert args.shapes == args.tilemma_shapes == [(16, 4096, 4096), (1000,) * 3]
    args = gb.parse_args(["--sizes", "4096", "--tilemma-sizes", "1024"])
    assert args.shapes == [(4096,) * 3] and args.tilemma_shapes == [(1024,) * 3]
    fam, shape = gb.parse_cell(gb.cell_label(gb.FAMILIES["s8-acol"], (1, 64, 2048)))
    assert (fam.name, shape) == ("s8-acol", (1, 64, 2048))
    assert gb.operand_strides(gb.FAMILIES["s8-acol"], (2, 3, 5)) == ((1, 2), (1, 5), (3, 1))


def test_every_family_has_every_layout():
    cells = mx.cells()
    layouts = {}
    for fam, _ in cells:
        key = (fam.a + ("-sparse" if fam.sparse else "") + ("-trunc" if fam.rounding == "trunc" else "")
               + (f"-d{fam.out}" if fam.out else ""))
        layouts.setdefault(key, set()).add(gb.layout_label(fam))
    assert len(layouts) == len(mx.BASES)
    for base, got in layouts.items():
        want = 2 if "sparse" in base else 4  # a pre-compressed A has no order
        assert len(got) == want, (base, got)
    assert len(set((f.name, s) for f, s in cells)) == len(cells)
    assert set(mx.ISSUE_SHAPES) <= set(mx.SHAPES) and (1, 4096, 11008) in mx.SHAPES
    assert all(f.sparse for f, s in cells if s == (8192,) * 3)


@pytest.mark.parametrize("parts", [1, 3, 4, 7])
def test_parts_cover_the_cells_once_in_order(parts):
    cells = mx.cells()
    split = mx.split(cells, parts)
    assert [c for part in split for c in part] == cells and all(split)
    costs = [sum(mx.estimate_s(f, s) for f, s in part) for part in split]
    assert max(costs) < 1.35 * sum(costs) / parts
    assert mx.parse_part("2/4") == (2, 4)
    with pytest.raises(ValueError):
        mx.parse_part("5/4")


def _row(fam, shape, impl, tflops=None, error=""):
    return gb.new_row(gb.FAMILIES[fam], shape, impl, tflops=tflops, error=error, device="GPU")


def test_merge_keeps_figures_and_redo_finds_the_unmeasured(tmp_path):
    s = (16, 4096, 4096)
    first = [_row("f16", s, "tilemma", 100.0), _row("f16", s, "triton-mma.sync", error="skipped: time budget spent")]
    second = [_row("f16", s, "tilemma", error="RuntimeError: x"), _row("f16", s, "triton-mma.sync", 80.0)]
    paths = []
    for i, rows in enumerate((first, second)):
        paths.append(str(tmp_path / f"p{i}.csv"))
        gb.write_csv(rows, paths[-1])
    merged = mx.merge(*(gb.read_csv(p) for p in paths))
    by = {r.impl: r for r in merged}
    assert by["tilemma"].tflops == 100.0 and by["triton-mma.sync"].tflops == 80.0
    cell = (gb.FAMILIES["f16"], s)
    assert mx.unfinished([cell], merged) == [cell]  # cublas and triton have no row
    done = merged + [_row("f16", s, "cublas", error="RuntimeError: no"), _row("f16", s, "triton", 90.0)]
    assert mx.unfinished([cell], done) == []  # an error is a result
    assert mx.ratios(done)[("f16", s)] == ("triton-mma.sync", 1.25)
    lines = mx.summary(done)
    assert lines[-1].startswith("target: tilemma / Triton mma.sync >= 1.0x on every cell: met; >= 1.1x on the median cell: met")


def test_small_shape_keeps_the_class():
    assert mx.small_shape((257, 129, 4096)) == (65, 65, 192)
    assert mx.small_shape((1, 11008, 4096)) == (1, 64, 2048)
    assert mx.small_shape((2048, 2048, 256)) == (64, 64, 256)
