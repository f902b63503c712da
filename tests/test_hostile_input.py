"""Hostile input (issue 25): what an adversarial user can hand the tools and the API ends in a
clean, prompt error - located where the input has a place - never a traceback, an internal error,
a hang or an exhausted memory. Run in process (the entry points `tilemma` and `tilemma-opt` call),
so the whole file takes a few seconds."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import time

import pytest

import tilemma
from tilemma.compiler.driver import cli, opt
from tilemma.compiler.driver.api import _OPTION_TYPES
from tilemma.compiler.driver.diagnostics import MAX_NESTING
from tilemma.compiler.driver.files import MAX_INPUT_BYTES
from tilemma.compiler.driver.pipeline import CompileOptions

GEMM = """func.func @gemm(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>, %d: memref<16x8xf32>) {
  %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
  %tc = tile.load %c[0, 0] : memref<16x8xf32> -> !tile.tile<16x8xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %td, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}
"""


def run(tool, *args: str, capsys) -> tuple[int, str, str]:
    """A tool's main in process: (exit status, stdout, stderr), checked to hold no traceback
    and no internal error."""
    status = (cli.main if tool == "tilemma" else opt.main)(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err, err
    return status, out, err


def deep_regions(levels: int) -> str:
    body = '"scf.execute_region"() ({\n' * levels + '"scf.yield"() : () -> ()\n}) : () -> ()\n' * levels
    return GEMM.replace("  func.return", body + "  func.return")


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setenv("TILEMMA_CACHE_DIR", "")
    monkeypatch.delenv("TILEMMA_TUNE_CACHE", raising=False)


# ------------------------------------------------------------------------------------- input


@pytest.mark.parametrize("tool", ["tilemma", "tilemma-opt"])
def test_closed_stdin_is_an_error(tool, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)  # what `<&-` gives Python
    status, _, err = run(tool, *(("compile",) if tool == "tilemma" else ()), "-", capsys=capsys)
    assert status == 1 and "standard input is closed" in err


@pytest.mark.parametrize("tool", ["tilemma", "tilemma-opt"])
def test_endless_input_is_refused_past_the_limit(tool, capsys):
    start = time.perf_counter()
    status, _, err = run(tool, *(("compile",) if tool == "tilemma" else ()), "/dev/zero", capsys=capsys)
    assert status == 1 and f"input larger than {MAX_INPUT_BYTES >> 20} MiB" in err
    assert time.perf_counter() - start < 10


def test_large_file_is_refused_before_it_is_read(tmp_path, capsys):
    big = tmp_path / "big.mlir"
    with open(big, "wb") as f:
        f.truncate(MAX_INPUT_BYTES + 1)  # sparse: no 64 MiB written
    status, _, err = run("tilemma", "compile", str(big), capsys=capsys)
    assert status == 1 and "input larger than" in err


def test_binary_input_is_a_located_error(tmp_path, capsys):
    f = tmp_path / "k.mlir"
    f.write_bytes(b"func.func @k() {\n  \xff\xfe\n}\n")
    for tool in ("tilemma", "tilemma-opt"):
        status, _, err = run(tool, *(("compile",) if tool == "tilemma" else ()), str(f), capsys=capsys)
        assert status == 1 and f"{f}:2:3: error: byte 0xff is not UTF-8 text" in err, err


def test_crlf_input_reads_as_text(tmp_path, capsys, no_cache):
    f = tmp_path / "k.mlir"
    f.write_bytes(GEMM.replace("\n", "\r\n").encode())
    status, out, _ = run("tilemma", "compile", str(f), capsys=capsys)
    assert status == 0 and out == tilemma.compile(GEMM, cache=False)[0].ptx


# --------------------------------------------------------------------------- nesting and rank


@pytest.mark.parametrize("tool", ["tilemma", "tilemma-opt"])
def test_deep_nesting_is_a_located_error(tool, tmp_path, capsys):
    f = tmp_path / "deep.mlir"
    f.write_text(deep_regions(200))
    start = time.perf_counter()
    status, _, err = run(tool, *(("compile",) if tool == "tilemma" else ()), str(f), capsys=capsys)
    assert status == 1 and f"deep.mlir:38:25: error: nested more than {MAX_NESTING} levels deep" in err, err
    assert time.perf_counter() - start < 5


def test_nesting_up_to_the_limit_is_parsed_from_a_deep_stack(capsys, no_cache):
    """The limit leaves room: input just under it goes through parsing, verifying and printing
    even when the caller's stack is already deep."""
    text = GEMM.replace("{\n", "attributes {x = " + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "} {\n", 1)

    def deep(k):
        return deep(k - 1) if k else opt.main(["-", "-o", os.devnull])

    sys_stdin = sys.stdin
    try:
        sys.stdin = io.TextIOWrapper(io.BytesIO(text.encode()))
        status = deep(150)
    finally:
        sys.stdin = sys_stdin
    _, err = capsys.readouterr()
    assert status == 0, err


def test_deep_nesting_through_the_api(no_cache):
    with pytest.raises(tilemma.CompileError, match="nested more than"):
        tilemma.compile(deep_regions(200), cache=False)
    from xdsl.dialects.builtin import ModuleOp

    from tilemma.compiler.driver.pipeline import parse

    module, _ = parse(GEMM, "<gemm>")
    for _ in range(MAX_NESTING):  # a module built in Python, nested deeper than text may be
        module = ModuleOp([module])
    with pytest.raises(tilemma.CompileError, match="regions nested more than 32 deep"):
        tilemma.compile(module, cache=False)


def test_unclosed_string_is_refused_before_xdsl_lexes_it():
    """xDSL's string-literal regular expression backtracks exponentially on a string not closed
    on its line (a mutant with a stray quote hung both tools); such input is refused first, at
    the quote. (Kept short, so that a regression fails on the message rather than hanging.)"""
    text = GEMM.replace("tile.mma %ta", 'tile.mma "%ta abcdefgh', 1)
    with pytest.raises(tilemma.CompileError, match=r"<input>:5:18: error: a string literal not closed on its line"):
        tilemma.compile(text, cache=False)
    bad_escape = GEMM.replace("func.func @gemm", 'func.func @"g\\qemm"', 1)
    with pytest.raises(tilemma.CompileError, match=r"<input>:1:12: error: a string literal not closed"):
        tilemma.compile(bad_escape, cache=False)
    quoted = GEMM.replace("func.func @gemm", 'func.func @"gemm"', 1).replace("{\n", '{  // a "comment\n', 1)
    assert tilemma.compile(quoted, cache=False)[0].name == "gemm"


def test_long_shape_is_refused_promptly(capsys):
    text = "func.func @k(%a: memref<" + "x".join(["1"] * 150_000) + "xf16>) {\n  func.return\n}\n"
    start = time.perf_counter()
    with pytest.raises(tilemma.CompileError, match=r"<input>:1:25: error: a shape of 150000 dimensions; tilemma "
                                                   r"takes at most 64"):
        tilemma.compile(text, cache=False)
    assert time.perf_counter() - start < 5


# ----------------------------------------------------------------------------------- the API


def test_option_table_matches_compile_options():
    assert list(_OPTION_TYPES) == [f for f in CompileOptions.__dataclass_fields__ if f != "sm"]


@pytest.mark.parametrize("options, message", [
    (dict(warps=4), re.escape("option warps must be a string such as '2x2' ('' for the default), got int 4")),
    (dict(warps=(2, 2)), "option warps must be a string such as '2x2'.*got tuple \\(2, 2\\)"),
    (dict(warp_tile=[1, 4]), "option warp_tile must be a string"),
    (dict(allow_slow="no"), "option allow_slow must be True or False, got str 'no'"),
    (dict(swizzle=1), "option swizzle must be True or False, got int 1"),
    (dict(stages="3"), "option stages must be an int"),
    (dict(stages=True), "option stages must be an int.*got bool True"),
    (dict(ptx=8.7), "option ptx must be a PTX ISA version as a string, such as '8.7'"),
    (dict(tune_cache=3), "option tune_cache must be the path of a tuning cache"),
    (dict(sm=None), "sm must be a target such as '90'"),
    (dict(cache="no"), "cache must be True or False"),
    (dict(filename=3), "filename must be a str or None"),
])  # fmt: skip
def test_option_types_are_checked(options, message, no_cache):
    with pytest.raises(TypeError, match=message):
        tilemma.compile(GEMM, **options)


def test_option_values_of_the_right_type(no_cache):
    import numpy as np

    [k] = tilemma.compile(GEMM, stages=np.int64(0), warps="1x1", cache=False)
    assert "stages=0" in k.abi.config and k.block == (32, 1, 1)


def test_missing_tune_cache_is_an_error(tmp_path, monkeypatch, no_cache):
    missing = tmp_path / "tune.json"
    with pytest.raises(tilemma.CompileError, match=f"compile\\(\\): tune_cache {missing}: no such file"):
        tilemma.compile(GEMM, tune_cache=str(missing))
    with pytest.raises(tilemma.CompileError, match="no such file"):
        tilemma.compile(GEMM, tune_cache=missing)  # os.PathLike
    monkeypatch.setenv("TILEMMA_TUNE_CACHE", str(missing))
    with pytest.raises(tilemma.CompileError, match=f"\\$TILEMMA_TUNE_CACHE {missing}: no such file"):
        tilemma.compile(GEMM)
    assert tilemma.compile(GEMM, tune_cache="", cache=False)  # '' is no cache, whatever the environment says


# ---------------------------------------------------------------------------------- tilemma run


def gemm_file(tmp_path, m: int, n: int, k: int) -> str:
    text = GEMM.replace("16x16xf16", f"{m}x{k}xf16").replace("16x8xf16", f"{k}x{n}xf16").replace("16x8xf32", f"{m}x{n}xf32")
    path = tmp_path / f"g{m}x{n}x{k}.mlir"
    path.write_text(text)
    return str(path)


def test_run_refuses_a_long_emulation_up_front(tmp_path, capsys, no_cache):
    start = time.perf_counter()
    status, _, err = run("tilemma", "run", gemm_file(tmp_path, 4096, 4096, 4096), "--on", "emulator", capsys=capsys)
    assert status == 1 and ("gemm: 4096x4096x4096 is 68.7 G multiply-adds; the CPU emulator would take about 3.18 h"
                            in err and "pass --allow-long to run it anyway, or run it on a GPU (--on gpu)" in err), err
    status, _, err = run("tilemma", "run", gemm_file(tmp_path, 65536, 65536, 65536), "--on", "emulator", capsys=capsys)
    assert status == 1 and "65536x65536x65536 is 281 T multiply-adds" in err  # was a MemoryError
    assert "host memory" in err or "--allow-long" in err
    assert time.perf_counter() - start < 20


def test_run_allow_long_opts_in(tmp_path, capsys, monkeypatch, no_cache):
    from tilemma.compiler.driver import runner

    monkeypatch.setattr(runner, "MAX_EMULATION_SECONDS", 1e-6)
    path = gemm_file(tmp_path, 16, 8, 16)
    status, _, err = run("tilemma", "run", path, "--on", "emulator", capsys=capsys)
    assert status == 1 and "--allow-long" in err
    status, out, _ = run("tilemma", "run", path, "--on", "emulator", "--allow-long", capsys=capsys)
    assert status == 0 and "PASS" in out


def test_run_with_an_unused_argument(tmp_path, capsys, no_cache):
    """An argument the kernel never touches gets a buffer too (was a KeyError after compiling);
    one of a type no buffer can be made of is refused when compiling, at the kernel."""
    path = tmp_path / "unused.mlir"
    path.write_text(GEMM.replace("%d: memref<16x8xf32>)", "%d: memref<16x8xf32>, %e: memref<4x4xf32>)"))
    status, out, _ = run("tilemma", "run", str(path), "--on", "emulator", capsys=capsys)
    assert status == 0 and "PASS" in out
    path.write_text(GEMM.replace("%d: memref<16x8xf32>)", "%d: memref<16x8xf32>, %e: memref<4x4xi64>)"))
    status, _, err = run("tilemma", "compile", str(path), capsys=capsys)
    assert status == 1 and "unused.mlir:1:1: error: func.func: argument 4 is a memref<4x4xi64>, which the kernel " \
        "does not use, of i64, not an element type of a kernel argument" in err, err


# ------------------------------------------------------------------------------------ messages


@pytest.mark.parametrize("text, where, message", [
    (GEMM.replace("tile.load %a[0, 0]", "tile.load %a[0, 99999999999999999999999]"), "2:3",
     "Integer value 99999999999999999999999 is out of range for type i64"),
    (GEMM + GEMM.replace("%ta =", "%ta  ="), "9:1", 'Redefinition of symbol "gemm"'),
    ("func.func @k(%a: memref<4xf32>)\n" + GEMM, "1:1",
     "func.func @k has no body: a kernel is compiled from its body (a declaration is not a kernel)"),
])  # fmt: skip
def test_errors_are_located(text, where, message, no_cache):
    """Were unlocated (an integer out of range, a symbol defined twice) or an xDSL message about
    regions (a body-less func.func)."""
    with pytest.raises(tilemma.CompileError, match=f"^<input>:{where}: error: {re.escape(message)}"):
        tilemma.compile(text, cache=False)


def test_empty_stdin_after_a_failed_command(monkeypatch, capsys):
    for tool in ("tilemma", "tilemma-opt"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        status, _, err = run(tool, *(("compile",) if tool == "tilemma" else ()), "-", capsys=capsys)
        assert status == 1 and "empty input: expected MLIR operations (if it comes through a pipe: did the " \
            "command before it fail?)" in err


def test_block_scaled_gemm_accumulates_in_f32_by_default(capsys):
    status, out, _ = run("tilemma", "gemm", "--m", "16", "--n", "8", "--k", "64", "--a", "e2m1", "--b", "e2m1",
                         "--scale", "ue8m0", capsys=capsys)
    assert status == 0 and "f32_f32" not in out and "-> !tile.tile<16x8xf32>" in out


def test_datacenter_blackwell_is_told_mma_sync_is_not_its_fast_path(no_cache):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        tilemma.compile(GEMM, sm="100a", cache=False)
    assert "note: sm_100a runs the warp-level mma.sync tilemma emits, but not at Blackwell's full rate" in err.getvalue()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        tilemma.compile(GEMM, sm="120a", cache=False)
    assert err.getvalue() == ""
