"""The `tilemma` and `tilemma-opt` command lines: outputs, exit codes, and no tracebacks."""

import subprocess
import sys

import pytest

from tilemma.compiler.ptxas import find_ptxas


def tilemma(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "tilemma.compiler.cli", *args],
        input=stdin, capture_output=True, text=True,
    )


def opt(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "tilemma.compiler.opt", *args],
        input=stdin, capture_output=True, text=True,
    )


def no_traceback(proc):
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


def test_gemm_writes_verified_ir_that_round_trips():
    g = tilemma("gemm", "--m", "37", "--n", "91", "--k", "53", "--a", "bf16", "--b", "bf16", "--acc", "f32")
    assert g.returncode == 0, g.stderr
    assert "func.func @gemm_37x91x53_bf16_bf16_f32(%a: memref<37x53xbf16>" in g.stdout
    assert "tile.mma %ta, %tb, %tc" in g.stdout
    again = opt(stdin=g.stdout)
    assert again.returncode == 0 and again.stdout.strip() == g.stdout.strip()


def test_gemm_ptx_aliases_batch_and_tf32():
    g = tilemma("gemm", "--m", "8", "--n", "8", "--k", "16", "--a", "e4m3", "--b", "e5m2", "--acc", "f32",
                "--batch", "3", "--bcast", "b", "--sm", "sm_90")
    assert g.returncode == 0, g.stderr
    assert "memref<1x16x8xf8E5M2>" in g.stdout and "memref<3x8x16xf8E4M3FN>" in g.stdout
    t = tilemma("gemm", "--m", "8", "--n", "8", "--k", "8", "--a", "tf32", "--b", "tf32")
    assert '%ta = tile.cast %0 {rounding = #tile<rounding rna>} : !tile.tile<8x8xf32> -> !tile.tile<8x8xtf32>' in t.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--a", "f17", "--b", "f16"], "unknown element type 'f17'"),
        (["--a", "f16", "--b", "bf16"], "may not meet"),
        (["--a", "bf16", "--b", "bf16", "--acc", "f16"], "accumulator element type f16 is not allowed"),
        (["--a", "f16", "--b", "f16", "--sm", "sm_9x"], "sm_9x"),
        (["--a", "f16", "--b", "f16", "--bcast", "a"], "--bcast needs --batch"),
    ],
)
def test_gemm_bad_options(args, message):
    g = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", *args)
    assert g.returncode == 1 and message in g.stderr, g.stderr
    no_traceback(g)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_compile_to_ptx_and_cubin(tmp_path):
    g = tilemma("gemm", "--m", "37", "--n", "91", "--k", "53", "--a", "f16", "--b", "f16", "--acc", "f32")
    src = tmp_path / "g.mlir"
    src.write_text(g.stdout)
    p = tilemma("compile", str(src), "--sm", "120a", "-o", str(tmp_path / "g.ptx"))
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "g.ptx").read_text()
    assert ".target sm_120a" in text and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text
    c = tilemma("compile", str(src), "--sm", "80", "--emit", "cubin", "-o", str(tmp_path / "g.cubin"))
    assert c.returncode == 0, c.stderr
    assert (tmp_path / "g.cubin").read_bytes()[:4] == b"\x7fELF"
    m = tilemma("compile", str(src), "--sm", "90", "--emit", "mlir")
    assert m.returncode == 0 and "ptx.mma" in m.stdout


def test_compile_errors_are_located():
    g = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f64", "--b", "f64", "--shape", "m16n8k16")
    c = tilemma("compile", "-", "--sm", "80", stdin=g.stdout)
    assert c.returncode == 1
    assert "<stdin>:" in c.stderr and "needs sm_90 or newer; on sm_80 use m8n8k4" in c.stderr
    no_traceback(c)
    f = tilemma("gemm", "--m", "16", "--n", "8", "--k", "8", "--a", "f32", "--b", "f32")
    c = tilemma("compile", "-", stdin=f.stdout)
    assert c.returncode == 1 and "f32-precision=tf32" in c.stderr
    ok = tilemma("compile", "-", "--f32-precision", "tf32", stdin=f.stdout)
    assert ok.returncode == 0 and "cvt.rna.tf32.f32" in ok.stdout


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty input"),
        ("func.func @f() {\n  %x = tile.matmul (\n}\n", "<stdin>:2:"),
        ("builtin.module {}\n", "no kernel (func.func)"),
    ],
)
def test_compile_bad_input(text, message):
    c = tilemma("compile", "-", stdin=text)
    assert c.returncode == 1 and message in c.stderr, c.stderr
    no_traceback(c)


def test_missing_file():
    for proc in (tilemma("compile", "/no/such.mlir"), tilemma("run", "/no/such.mlir")):
        assert proc.returncode == 1
        assert "cannot open '/no/such.mlir': No such file or directory" in proc.stderr
        no_traceback(proc)


def test_bad_pass_option_is_a_diagnostic():
    g = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f16", "--b", "f16")
    for spec, message in [
        ("tile-select-mma{sm=77x}", "77x"),
        ("tile-select-mma{f32-precision=wrong}", "f32-precision must be one of"),
        ("tile-select-mma{nope=1}", "nope"),
        ("tile-tile-warps{warps=2y}", "warps must look like 2x4"),
    ]:
        p = opt("-p", spec, stdin=g.stdout)
        assert p.returncode == 1 and message in p.stderr, (spec, p.stderr)
        no_traceback(p)


def test_isa_cli():
    listing = tilemma("isa", "list", "--sm", "90")
    assert listing.returncode == 0
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in listing.stdout.splitlines()
    bad = tilemma("isa", "check", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "--sm", "75")
    assert bad.returncode == 1 and "needs sm_80 or newer" in bad.stdout + bad.stderr


def test_sparse_gemm_through_the_cli():
    g = tilemma("gemm", "--m", "19", "--n", "23", "--k", "75", "--a", "f16", "--b", "f16", "--acc", "f32",
                "--sparse-a", "2:4", "--prune")
    assert g.returncode == 0, g.stderr
    assert "tile.compress %ta {prune} : !tile.tile<19x75xf16> -> !tile.sparse<19x75xf16>" in g.stdout
    r = tilemma("run", "-", "--sm", "90", "--on", "emulator", stdin=g.stdout)
    assert r.returncode == 0, r.stderr
    assert "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32" in r.stdout
    assert r.stdout.rstrip().endswith("PASS")
    bad = tilemma("gemm", "--m", "16", "--n", "8", "--k", "32", "--a", "f16", "--b", "f16", "--prune")
    assert bad.returncode == 1 and "--prune needs --sparse-a" in bad.stderr
