"""benchmarks.gemm_bench / sass_check / plot: the parts that need no GPU (the result check, tf32
rounding, the table and CSV, argument errors, a failing Triton worker becoming rows, the SASS and
ptxas -v readers), and one GPU run of the whole harness on small sizes."""

from __future__ import annotations

import importlib.util
import math
import shutil

import numpy as np
import pytest

from benchmarks import gemm_bench as gb
from benchmarks import sass_check
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import reference


def _f16_case(n: int = 64, k: int = 256, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = reference.random_matrix("f16", (n, k), rng).astype(np.float64)
    b = reference.random_matrix("f16", (k, n), rng).astype(np.float64)
    got = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)  # f32 accumulation
    return a, b, got, a @ b, np.abs(a) @ np.abs(b)


def test_check_accepts_f32_accumulation_and_finds_one_wrong_term():
    a, b, got, want, s = _f16_case()
    assert gb.check(got, want, s, acc="f32", k=256) is None
    i, j, t = 17, 40, 99
    assert abs(a[i, t] * b[t, j]) > 0
    got[i, j] += a[i, t] * b[t, j]  # one product counted twice
    problem = gb.check(got, want, s, acc="f32", k=256)
    assert problem is not None and problem.startswith("1 of 4096 elements") and f"({i}, {j})" in problem


def test_check_flags_nan_and_unwritten_output():
    _, _, got, want, s = _f16_case()
    got[3, 5] = math.nan
    assert "first at (3, 5)" in gb.check(got, want, s, acc="f32", k=256)
    unwritten = np.full_like(want, gb.SENTINEL[False])
    assert gb.check(unwritten, want, s, acc="f32", k=256).startswith("4096 of 4096")


def test_check_is_exact_for_integers_and_slack_widens_the_bound():
    want = np.arange(12.0).reshape(3, 4)
    assert gb.check(want.copy(), want, None, acc="si32", k=8) is None
    got = want.copy()
    got[2, 1] += 1
    assert "first at (2, 1)" in gb.check(got, want, None, acc="si32", k=8)
    _, _, got, want, s = _f16_case()
    rounded = got.astype(np.float16).astype(np.float64)  # a peer that writes f16
    assert gb.check(rounded, want, s, acc="f32", k=256) is not None
    assert gb.check(rounded, want, s, acc="f32", k=256, slack=2.0**-10) is None


@pytest.mark.parametrize("mode", ["rna", "rn"])
def test_round_tf32_bits_is_cvt(mode):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-20, 20, 4096)).astype(np.float32)
    bits = x.view(np.int32).copy()
    bits[:64] = (bits[:64] & -0x2000) | 0x1000  # exact ties: away from zero (rna), to even (rn)
    x = bits.view(np.float32)
    got = gb.round_tf32_bits(bits, mode).view(np.float32)
    np.testing.assert_array_equal(got, reference.round_tf32(x, mode))


def _rows():
    R = gb.Row
    return [
        R("f16", 1024, "cublas", 0.004, 500.0, check="sanity", device="H"),
        R("f16", 1024, "triton-mma.sync", 0.008, 250.0, instruction="mma.sync", config="BM..."),
        R("f16", 1024, "triton", error="CompilationError: out of resources"),
        R("f16", 1024, "tilemma", 0.04, 50.0, config="mma.sync.aligned.m16n8k16", check="bound"),
        R("s8", 1024, "tilemma", error="AssertionError: wrong result: 3 of 1048576 elements"),
        R("s8", 1024, "cublas", 0.002, 1000.0),
        R("f64", 4096, "cublas", error="skipped: time budget spent"),
    ]


def test_table_has_ratios_and_lists_every_failure():
    text = gb.table(_rows())
    lines = text.splitlines()
    assert lines[0].split() == ["family", "size", "cublas", "triton", "triton-mma.sync", "tilemma",
                                "tilemma/cuBLAS", "tilemma/Triton-ms"]
    f16 = next(line for line in lines if line.split()[:2] == ["f16", "1024"]).split()
    assert f16[2:] == ["500.0", "error", "250.0", "ms", "50.0", "0.100", "0.200"]
    s8 = next(line for line in lines if line.split()[:2] == ["s8", "1024"]).split()
    assert s8[2:] == ["1000.0", "—", "—", "wrong", "—", "—"]
    assert "skip" in next(line for line in lines if line.split()[:2] == ["f64", "4096"])
    failed = text.split("failed or skipped:")[1].splitlines()[1:]
    assert failed == [f"  {r.family} {r.size} {r.impl}: {r.error}" for r in _rows() if r.error]


def test_csv_round_trip(tmp_path):
    path = tmp_path / "r.csv"
    gb.write_csv(_rows(), str(path))
    assert gb.read_csv(str(path)) == _rows()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="no matplotlib")
def test_plot_writes_a_png(tmp_path):
    from benchmarks import plot

    path = tmp_path / "r.png"
    plot.plot(_rows(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, message", [
    (["--families", "f16", "f8"], "unknown family f8"),
    (["--sizes", "1000"], "size 1000: sizes must be positive multiples of 16"),
    (["--skip", "cublas"], "invalid choice: 'cublas'"),
])
def test_bad_arguments_are_refused_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        gb.parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_tilemma_sizes_default_to_the_peers_sizes():
    args = gb.parse_args(["--sizes", "1024", "4096"])
    assert args.tilemma_sizes == [1024, 4096] and args.families == list(gb.FAMILIES)
    assert gb.parse_args(["--sizes", "4096", "--tilemma-sizes", "1024"]).tilemma_sizes == [1024]


def test_a_dying_triton_worker_becomes_error_rows():
    # Where torch or a GPU is missing the worker dies at once: each (family, size) must still
    # come back, as a row that says why.
    fams = [gb.FAMILIES["f16"], gb.FAMILIES["s8"]]
    rows = gb.triton_subprocess("triton", fams, [64, 128], budget=60)
    assert sorted((r.family, r.size) for r in rows) == [("f16", 64), ("f16", 128), ("s8", 64), ("s8", 128)]
    if importlib.util.find_spec("torch") is None:
        assert all("worker exited with 1" in r.error and "torch" in r.error for r in rows)


def test_adapter_compiles_tile_ir_and_names_its_configuration():
    fam = gb.FAMILIES["sparse-f16"]
    text, name = gb.tilemma_ir(fam, 128)
    assert "tile.compress" in text
    kernel = gb.tilemma_kernel(text, name, gb.compile_options("90", ptx="8.5"))
    assert kernel.name == name and ".version 8.5" in kernel.ptx
    assert kernel.config.startswith("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32")
    assert "warps=" in kernel.config and "stages=" in kernel.config
    if not cuda_runtime.gpu_available():
        with pytest.raises(cuda_runtime.NoGpuError):
            kernel.launch([0, 0, 0, 0], 0)


def test_a_family_with_a_narrower_d_stores_it_and_keeps_its_layout_twin():
    """`Family.out`: the f16-D sparse family's kernel rounds its f32 accumulators into an f16 D (the
    emulator's D against float64 within the bound plus D's one rounding), and its B-column twin is
    the f16-D one, not the f32-D family of the same operands."""
    fam = gb.FAMILIES["sparse-f16-pre-d16"]
    assert (fam.torch_out, gb.FAMILIES["sparse-f16-pre"].torch_out) == ("float16", "float32")
    assert gb.family_variant(fam, False, True).name == "sparse-f16-pre-bcol-d16"
    text, name = gb.tilemma_ir(fam, (64, 64, 128))
    [kernel] = compile_text(text, name, CompileOptions(sm="90"))
    assert "cvt.rn.f16x2.f32" in kernel.ptx or "cvt.rn.f16.f32" in kernel.ptx
    result = run_compiled(kernel, seed=5, on="emulator")
    assert result.ok, result.line()


SASS = """
        /*0090*/                   HMMA.16816.F32 R4, R8, R12, R4 ;     /* 0x000000000c04723c */
                                                                         /* 0x000fe20000001804 */
        /*00a0*/              @!P0 LDG.E.128 R8, desc[UR4][R2.64] ;
        /*00b0*/               @P1 LDGSTS.E.BYPASS.128 [R5], desc[UR4][R2.64] ;
        /*00c0*/                   LDSM.16.M88.4 R12, [R5] ;
        /*00d0*/                   HMMA.16816.F32 R16, R8, R14, R16 ;
        /*00e0*/             @!UP0 BRA 0x90 ;
"""


def test_sass_counts_opcodes_without_modifiers_or_predicates():
    counts = sass_check.sass_counts(SASS)
    assert counts == {"HMMA": 2, "LDG": 1, "LDGSTS": 1, "LDSM": 1, "BRA": 1}


def test_ptxas_usage_reads_registers_and_spills():
    log = ("ptxas info    : Function properties for k\n"
           "    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 0 barriers, 384 bytes cmem[0]\n")
    assert sass_check.ptxas_usage(log) == (255, 24, 16, 8)
    with pytest.raises(ValueError, match="no resource usage"):
        sass_check.ptxas_usage("ptxas info    : 0 bytes gmem\n")


@pytest.mark.ptxas
@pytest.mark.skipif(shutil.which("ptxas") is None or sass_check.find_cuobjdump() is None,
                    reason="needs ptxas and cuobjdump (pip install nvidia-cuda-cuobjdump "
                    "nvidia-cuda-nvdisasm)")
def test_sass_check_sees_the_tensor_core_instruction_of_each_family():
    expected = {"f16": "HMMA", "s8": "IMMA", "f64": "DMMA", "sparse-f16": "HMMA"}
    for fam, opcode in expected.items():
        text, name = gb.tilemma_ir(gb.FAMILIES[fam], 128)
        kernel = gb.tilemma_kernel(text, name, gb.compile_options("90", ptx=""))
        report = sass_check.check_ptx(kernel.ptx, kernel.name, kernel.config)
        assert report.counts.get(opcode, 0) > 0, (fam, report.counts)
        assert sum(report.counts.get(op, 0) for op in ("HMMA", "IMMA", "DMMA")) == report.counts[opcode]
        # the operands come from global memory: cp.async (LDGSTS) where staged, else LDG
        assert report.registers > 0 and report.counts.get("LDG", 0) + report.counts.get("LDGSTS", 0) > 0


def test_sass_check_cli_reports_a_bad_ir_file(tmp_path, capsys):
    bad = tmp_path / "bad.mlir"
    bad.write_text('"tile.nonsense"() : () -> ()\n')
    assert sass_check.main(["--ir", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sass_check: ") and "Traceback" not in err


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_runtime.gpu_available() or importlib.util.find_spec("torch") is None,
                    reason="needs a GPU and torch")
def test_whole_harness_on_small_sizes(capsys):
    assert gb.main(["--families", "f16", "s8", "tf32", "f64", "sparse-f16", "--sizes", "256",
                    "--skip", "triton", "triton-mma.sync", "--budget", "120"]) == 0
    out = capsys.readouterr().out
    for fam in ("f16", "s8", "tf32", "f64", "sparse-f16"):
        cells = next(line for line in out.splitlines() if line.split()[:2] == [fam, "256"]).split()
        assert "error" not in cells and "wrong" not in cells, out
    failed = out.split("failed or skipped:")[1].splitlines()[1:] if "failed or skipped:" in out else []
    assert all(" torch-sparse: " in line for line in failed), out  # the only optional peer
