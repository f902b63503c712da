"""The `tilemma` and `tilemma-opt` command lines: outputs, exit codes, and no tracebacks."""

import re
import subprocess
import sys

import pytest

from tests.inprocess import run_main
from tilemma.compiler.driver import cli
from tilemma.compiler.driver import opt as opt_main
from tilemma.compiler.runtime.ptxas import find_ptxas


def tilemma(*args, stdin=None):
    """`tilemma ARGS` in process (tests.inprocess); the tests below that are about the process
    (closed stdout, pipes, the environment, the installed scripts) start real ones."""
    return run_main("tilemma", cli.main, args, stdin)


def opt(*args, stdin=None):
    return run_main("tilemma-opt", opt_main.main, args, stdin)


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


def test_gemm_without_c_runs_from_a_zero_accumulator(tmp_path):
    # D = A x B (what cuBLAS computes with beta = 0): no C argument, no C read; the emulator checks
    # D against the reference on a staged, batched, broadcast kernel at odd sizes.
    g = tilemma("gemm", "--m", "130", "--n", "70", "--k", "200", "--a", "f16", "--b", "f16", "--acc", "f32",
                "--batch", "2", "--bcast", "b", "--no-c")
    assert g.returncode == 0, g.stderr
    assert "(%a: memref<2x130x200xf16>, %b: memref<1x200x70xf16>, %d: memref<2x130x70xf32>)" in g.stdout
    assert "%zero = tile.constant 0.0 : !tile.tile<2x130x70xf32>" in g.stdout and "%c" not in g.stdout
    ir = tmp_path / "g.mlir"
    ir.write_text(g.stdout)
    r = tilemma("run", str(ir), "--on", "emulator")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    ptx = tilemma("compile", str(ir), "--emit", "json")
    assert ptx.returncode == 0 and '"c"' not in ptx.stdout and "stages=3" in ptx.stdout, ptx.stdout


def test_gemm_rounding_of_tf32_operands(tmp_path):
    g = tilemma("gemm", "--m", "40", "--n", "24", "--k", "72", "--a", "tf32", "--b", "tf32", "--b-layout", "col",
                "--rounding", "rn")
    assert g.returncode == 0 and "{rounding = #tile<rounding rn>}" in g.stdout, g.stderr
    ir = tmp_path / "g.mlir"
    ir.write_text(g.stdout)
    r = tilemma("run", str(ir), "--on", "emulator")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    old = tilemma("compile", str(ir), "--sm", "80")  # cvt.rn.tf32.f32 is sm_90's
    assert old.returncode == 1 and "g.mlir:4:" in old.stderr and "rounding rn needs sm_90" in old.stderr
    no_traceback(old)
    f16 = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f16", "--b", "f16", "--rounding", "rz")
    assert f16.returncode == 1 and "--rounding rz rounds f32 operands to tf32; this GEMM has none" in f16.stderr
    no_traceback(f16)


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
    assert ok.returncode == 0 and re.search(r"@%p\d+ add\.s32 %r\d+, %r\d+, 4096;", ok.stdout)  # rna: tf32_for_mma


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
        ("tile-to-warp{warps=2y}", "warps must look like 2x4"),
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


# --- conventions (issue 12, item 4) -------------------------------------------------------------

import io
import os
import re
from importlib.metadata import metadata, version

import numpy as np

from tilemma.compiler.runtime import cuda_runtime

PIPELINE = "tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared,warp-split-tf32,cse,warp-to-ptx"


def gemm_text(*extra, m=16, n=8, k=16, a="f16", b="f16"):
    g = tilemma("gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--a", a, "--b", b, *extra)
    assert g.returncode == 0, g.stderr
    return g.stdout


def test_located_diagnostic_is_one_header_line_then_source_and_caret():
    text = gemm_text("--shape", "m16n8k16", a="f64", b="f64")
    c = tilemma("compile", "-", "--sm", "80", stdin=text)
    header, source, caret = c.stderr.splitlines()[:3]
    m = re.fullmatch(r"<stdin>:(\d+):(\d+): error: tile\.mma: no mma\.sync variant .* use m8n8k4", header)
    assert m, c.stderr
    line, col = int(m.group(1)), int(m.group(2))
    assert source == text.splitlines()[line - 1] and "tile.mma" in source
    assert caret.index("^") == col - 1 and set(caret.strip()) == {"^"}
    # tilemma-opt: the same shape for parse and verify errors
    bad = text.replace("tile.load %a[0, 0]", "tile.load %a[0, 0")
    p = opt(stdin=bad)
    assert p.returncode == 1 and re.match(r"stdin:\d+:\d+: error: ", p.stderr), p.stderr
    # without a position: "tool: error: message"
    assert tilemma("compile", "/no/such.mlir").stderr.startswith("tilemma: error: cannot open")
    assert tilemma("isa", "list", "--sm", "91").stderr.startswith("tilemma: error: ")


def test_version():
    want = version("tilemma")
    assert tilemma("--version").stdout.strip() == f"tilemma {want}"
    v = opt("--version")
    assert v.returncode == 0 and v.stdout.startswith(f"tilemma-opt {want} (xdsl {version('xdsl')})")


def test_dash_output_is_stdout(tmp_path):
    text = gemm_text()
    plain = tilemma("compile", "-", stdin=text)
    dash = tilemma("compile", "-", "-o", "-", stdin=text)
    assert dash.returncode == 0 and dash.stdout == plain.stdout and not (tmp_path / "-").exists()
    mlir = tilemma("compile", "-", "--emit", "warp", "-o", "-", stdin=text)
    assert mlir.returncode == 0 and "warp.mma" in mlir.stdout
    o = opt("-", "-p", PIPELINE, "-t", "ptx", "-o", "-", stdin=text)
    assert o.returncode == 0 and o.stdout == opt("-p", PIPELINE, "-t", "ptx", stdin=text).stdout
    assert ".entry gemm_16x8x16_f16_f16_f16" in o.stdout


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_cubin_to_stdout():
    c = subprocess.run([sys.executable, "-m", "tilemma.compiler.driver.cli", "compile", "-", "--emit", "cubin", "-o", "-"],
                       input=gemm_text().encode(), capture_output=True)
    assert c.returncode == 0 and c.stdout[:4] == b"\x7fELF", c.stderr


@pytest.mark.parametrize("tool, args, stdin", [
    ("tilemma.compiler.driver.cli", ["isa", "list", "--sm", "90"], None),
    ("tilemma.compiler.driver.cli", ["compile", "-"], "gemm"),
    ("tilemma.compiler.driver.cli", ["gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f16", "--b", "f16"], None),
    ("tilemma.compiler.driver.opt", ["-p", PIPELINE, "-t", "ptx"], "gemm"),
])
def test_closed_stdout_exits_quietly(tool, args, stdin):
    """The reader goes away before the first write (the worst case of `... | head -1`); four
    times each, as it is a race. The kernel is the smallest: what is written does not matter."""
    text = gemm_text(m=16, n=8, k=16) if stdin else None
    for _ in range(4):
        p = subprocess.Popen([sys.executable, "-m", tool, *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdout.close()
        _, err = p.communicate(text)
        assert p.returncode in (0, 141) and err == "", (p.returncode, err)


def test_head_one_is_quiet():
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}
    for _ in range(5):
        p = subprocess.run(["bash", "-c", "tilemma isa list --sm 90 | head -1; exit ${PIPESTATUS[0]}"],
                           capture_output=True, text=True, env=env)
        assert p.returncode in (0, 141) and p.stderr == "" and p.stdout.startswith("mma."), p


def test_compile_takes_every_dialect_tilemma_opt_takes():
    from tilemma.compiler.driver.opt import TilemmaOptMain
    from tilemma.compiler.driver.pipeline import make_context

    names = set(make_context().registered_dialect_names)
    assert names == set(TilemmaOptMain(args=[]).ctx.registered_dialect_names)
    assert {"arith", "math", "memref", "linalg", "tile", "warp", "ptx"} <= names
    text = gemm_text().replace(
        "    %ta = ", "    %z = arith.constant 0 : i32\n    %f = math.absf %y : f32\n    %ta = ", 1
    ).replace("%f = math.absf %y", "%y = arith.constant 1.5 : f32\n    %f = math.absf %y")
    assert opt(stdin=text).returncode == 0
    c = tilemma("compile", "-", stdin=text)
    assert c.returncode == 0 and ".entry" in c.stdout, c.stderr


@pytest.mark.parametrize("which", ["compile", "opt"])
def test_time_passes_and_ir_dumps_go_to_stderr(which):
    text = gemm_text()
    flags = ["--time-passes", "--print-ir-before-all", "--print-ir-after-all"]
    if which == "compile":
        plain, inst = tilemma("compile", "-", stdin=text), tilemma("compile", "-", *flags, stdin=text)
    else:
        plain = opt("-p", PIPELINE, "-t", "ptx", stdin=text)
        inst = opt("-p", PIPELINE, "-t", "ptx", *flags, stdin=text)
    assert inst.returncode == 0 and inst.stdout == plain.stdout and plain.stderr == ""
    err = inst.stderr
    chain = ("tile-plan", "tile-distribute", "warp-stage-shared", "warp-pipeline", "warp-prefetch-fragments",
             "warp-widen-int4") if which == "compile" else ("tile-to-warp",)
    for name in ("tile-select-mma", *chain, "warp-swizzle-shared", "warp-split-tf32", "cse", "warp-to-ptx"):
        assert f"// -----// IR Dump Before {name} //----- //" in err
        assert f"// -----// IR Dump After {name} //----- //" in err
        assert re.search(rf"^\s+\d+\.\d{{4}} \(\s*\d+\.\d%\)  {name}$", err, re.M), name
    assert "Pass execution timing report" in err and re.search(r"\(100\.0%\)  Total", err)
    after_select = err.split("IR Dump After tile-select-mma")[1].split("IR Dump")[0]
    assert "#warp.variant" in after_select or "variant" in after_select  # the selected instruction


def test_time_passes_keeps_the_ptx_assemblable():
    if find_ptxas() is None:
        pytest.skip("ptxas not found")
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}
    p = subprocess.run(["bash", "-o", "pipefail", "-c",
                        f"tilemma-opt - -p '{PIPELINE}' -t ptx --time-passes | {find_ptxas()} -arch=sm_90 - -o /dev/null"],
                       input=gemm_text(), capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "Total" in p.stderr, p.stderr


def test_former_internal_errors_are_clear(tmp_path):
    g = tilemma("gemm", "--m", "16", "--n", "8", "--k", "32", "--a", "ue8m0", "--b", "ue8m0")
    assert g.returncode == 1 and "--a f8E8M0FNU is not a matmul operand type (a block-scale type: pass it as --scale)" in g.stderr
    r = tilemma("run", "-", "--warps", "64x64", stdin=gemm_text())
    assert r.returncode == 1 and "warps 64x64 make a CTA of 131072 threads" in r.stderr
    c = tilemma("compile", "-", "--ptx", "99.9", "--emit", "cubin", stdin=gemm_text())
    assert c.returncode == 1 and "unknown PTX ISA version 99.9" in c.stderr
    i = tilemma("isa", "list", "--sm", "90", "--ptx", "8.9")
    assert i.returncode == 1 and "unknown PTX ISA version 8.9" in i.stderr
    for proc in (g, r, c, i):
        assert "internal error" not in proc.stderr
        no_traceback(proc)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_ptxas_refusal_is_a_user_error():
    c = tilemma("compile", "-", "--ptx", "9.1", "--emit", "cubin", stdin=gemm_text())
    assert c.returncode == 1 and c.stderr.startswith("tilemma: error: ptxas (sm_90) refused the PTX:")
    assert "internal error" not in c.stderr and "| 1: .version 9.1" in c.stderr


def test_gemm_sm_is_checked_not_ignored():
    bad = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "bf16", "--b", "bf16", "--sm", "75")
    assert bad.returncode == 1 and bad.stderr.startswith("tilemma: error: --sm 75: tile.mma: no mma.sync variant")
    assert "needs sm_80 or newer" in bad.stderr
    ok = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "bf16", "--b", "bf16", "--sm", "80")
    assert ok.returncode == 0 and ok.stdout == gemm_text(a="bf16", b="bf16")
    scaled = ["--m", "16", "--n", "8", "--k", "64", "--a", "e2m1", "--b", "e2m1", "--acc", "f32",
              "--scale", "ue4m3", "--scale-block", "16"]
    assert tilemma("gemm", *scaled, "--sm", "90").returncode == 1
    assert tilemma("gemm", *scaled, "--sm", "120a").returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--stages", "0", "--stage-k", "64"], "--stage-k sizes shared-memory stages; --stages 0 has none"),
    (["--stages", "0", "--no-swizzle"], "--no-swizzle unswizzles shared-memory stages; --stages 0 has none"),
    (["--tune-cache", "/no/such/tune.json"], "--tune-cache /no/such/tune.json: no such file"),
])
def test_flags_that_would_do_nothing_are_refused(args, message):
    for command in ("compile", "run"):
        p = tilemma(command, "-", *args, stdin=gemm_text())
        assert p.returncode == 1 and message in p.stderr, (command, p.stderr)
    assert tilemma("compile", "-", "--stages", "0", stdin=gemm_text()).returncode == 0


def test_missing_tune_cache_from_the_environment_is_refused():
    p = subprocess.run([sys.executable, "-m", "tilemma.compiler.driver.cli", "compile", "-"], input=gemm_text(),
                       capture_output=True, text=True, env={**os.environ, "TILEMMA_TUNE_CACHE": "/no/tune.json"})
    assert p.returncode == 1 and "$TILEMMA_TUNE_CACHE /no/tune.json: no such file" in p.stderr


def test_run_and_tune_option_values(tmp_path):
    seed = tilemma("run", "-", "--seed", "-1", stdin=gemm_text())
    assert seed.returncode == 2 and "--seed: must be a non-negative integer, got -1" in seed.stderr
    iters = tilemma("tune", "--cache", str(tmp_path / "t.json"), "--iters", "0")
    assert iters.returncode == 1 and "--iters must be at least 1, got 0" in iters.stderr
    sm = tilemma("tune", "--cache", str(tmp_path / "t.json"), "--sm", "9z")
    assert sm.returncode == 1 and "bad SM target '9z'" in sm.stderr
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    inp = tilemma("run", "-", "--on", "emulator", "--input", f"a={empty}", stdin=gemm_text())
    assert inp.returncode == 1 and f"cannot read {empty} as a .npy array" in inp.stderr
    no_traceback(inp)


@pytest.mark.skipif(cuda_runtime.gpu_available(), reason="checks the refusal without a GPU")
def test_tune_without_a_gpu_says_so(tmp_path):
    t = tilemma("tune", "--cache", str(tmp_path / "t.json"))
    assert t.returncode == 1 and t.stderr.startswith("tilemma: error: tune times kernels on a GPU: ")
    assert "internal error" not in t.stderr and not (tmp_path / "t.json").exists()


# --- progress on a terminal (item 7) -----------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal(monkeypatch):
    from tilemma.compiler.core import progress

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    tty, log = FakeTerminal(), io.StringIO()
    for stream in (tty, log):
        with progress.Progress("work", 3, "items", stream=stream) as p:
            for _ in range(3):
                p.advance()
    assert "\r\x1b[Kwork: 1/3 items" in tty.getvalue() and "work: 3/3 items" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")  # erased at the end
    assert log.getvalue() == ""


@pytest.mark.parametrize("terminal", [True, False])
def test_emulator_progress(monkeypatch, terminal):
    from tilemma.compiler.verify import emulator
    from tilemma.compiler.core import progress
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
    from tilemma.compiler.verify.reference import random_matrix
    from tilemma.compiler.driver.runner import pack_memory

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    err = FakeTerminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    [k] = compile_text(gemm_text(m=64, n=64, k=16), "g", CompileOptions(warps="1x1", warp_tile="1x1", stages=0))
    rng = np.random.default_rng(0)
    args = [pack_memory(random_matrix(p.element, (p.span,), rng), p.element) for p in k.abi.params]
    ctas = k.grid[0] * k.grid[1] * k.grid[2]
    assert ctas == 32
    emulator.emulate(k.ptx, k.name, k.grid, k.block, args, memory_budget=1)  # one CTA per chunk
    if terminal:
        assert f"emulating {k.name}: 1/{ctas} CTAs" in err.getvalue()
        assert f"emulating {k.name}: {ctas}/{ctas} CTAs" in err.getvalue()
    else:
        assert err.getvalue() == ""


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
@pytest.mark.parametrize("terminal", [True, False])
def test_ptxas_audit_progress(monkeypatch, terminal):
    from tilemma.compiler.core import isa, progress
    from tools import isa_ptxas_check
    from tilemma.compiler.core.targets import DEFAULT_PTX, parse_sm

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    err = FakeTerminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    v = isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    t = parse_sm("90")
    work = [(t, [isa_ptxas_check.instruction(v)]) for _ in range(3)]
    out = isa_ptxas_check._assemble_many(work, DEFAULT_PTX, batch=1, workers=2)
    assert out == [[[]]] * 3  # ptxas took each line
    if terminal:
        assert "ptxas audit: operand sweep: 3/3 batches" in err.getvalue()
    else:
        assert err.getvalue() == ""


# --- packaging (item 5) ------------------------------------------------------------------------


def test_package_metadata_and_py_typed():
    from importlib.resources import files

    md = metadata("tilemma")
    assert md["License-Expression"] == "Apache-2.0" and md["Requires-Python"] == ">=3.11"
    assert md["Author"] == "tilemma developers" and "Typing :: Typed" in md.get_all("Classifier")
    assert files("tilemma").joinpath("py.typed").is_file()


def test_lit_names_the_missing_tools(tmp_path):
    """lit.cfg finds %tilemma next to the Python running lit or on PATH, else says what to do."""
    import lit

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)  # outside the venv: no tilemma scripts beside it
    site = os.path.dirname(os.path.dirname(lit.__file__))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": site, "HOME": str(tmp_path)}
    p = subprocess.run([str(bare / "python3"), "-c", "import lit.main; lit.main.main()", os.path.join(repo, "tests/lit/tile")],
                       capture_output=True, text=True, env=env)
    assert p.returncode != 0
    assert "tilemma-opt not found next to" in p.stderr and "pip install -e ." in p.stderr, p.stderr


def test_outputs_are_written_only_on_success(tmp_path):
    """`-o` may name the input; a failing run leaves an existing output as it was, and no
    temporary file behind."""
    g = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f16", "--b", "f16", "--acc", "f32").stdout
    src = tmp_path / "g.mlir"
    src.write_text(g)
    expected = opt(str(src)).stdout
    same = opt(str(src), "-o", str(src))
    assert same.returncode == 0 and src.read_text() == expected
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @k(")
    for tool in (opt, tilemma):
        out = tmp_path / "precious.txt"
        out.write_text("precious")
        proc = tool(*(("compile",) if tool is tilemma else ()), str(bad), "-o", str(out))
        assert proc.returncode == 1 and out.read_text() == "precious", proc.stderr
        no_traceback(proc)
    ok = tilemma("compile", str(src), "-o", str(tmp_path / "g.ptx"), "--metadata", str(tmp_path / "g.json"))
    assert ok.returncode == 0 and (tmp_path / "g.ptx").read_text().startswith(".version")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir", "g.json", "g.mlir", "g.ptx", "precious.txt"]


def test_verify_each_verifies_after_every_pass_and_changes_nothing():
    """`tilemma compile` verifies the input and the final module; `--verify-each` (tilemma-opt's
    default) verifies after every pass too, which is how a pass's bug is found where it happens."""
    from tilemma.compiler.driver.instrument import PassInstrument
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

    text = gemm_text()
    seen = []
    checked = PassInstrument(verify=lambda module: (module.verify(), seen.append(1)))
    [plain] = compile_text(text, "g.mlir", CompileOptions(tune_cache=""))
    [each] = compile_text(text, "g.mlir", CompileOptions(tune_cache=""), checked)
    assert each.ptx == plain.ptx
    assert len(seen) == len(CompileOptions(tune_cache="").passes())
    cli_plain, cli_each = tilemma("compile", "-", stdin=text), tilemma("compile", "-", "--verify-each", stdin=text)
    assert cli_each.returncode == 0 and cli_each.stdout == cli_plain.stdout, cli_each.stderr
