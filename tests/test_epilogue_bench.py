"""benchmarks.epilogue_bench without a GPU: the tile IR of every case verifies (tilemma-opt) and
compiles to PTX with the epilogue's instructions; the plain baseline is gemm_bench's kernel; the
reference and the check accept a correct f16 epilogue and refuse wrong ones; the table, the
targets, the arguments and a dying Triton worker. The emulator runs (a kernel per case, checked
as on the GPU) wait for the emulator to run the epilogue's instructions."""

from __future__ import annotations

import importlib.util
import math
import re
import types

import ml_dtypes
import numpy as np
import pytest

import tilemma
from benchmarks import epilogue_bench as eb
from benchmarks import gemm_bench as gb
from tests.inprocess import run_main
from tilemma.compiler.driver import opt as opt_main

SHAPE = (96, 80, 160)  # M, N, K: more than one block, not powers of two
NP_LIB = types.SimpleNamespace(erf=np.vectorize(math.erf), tanh=np.tanh)


CASE_PARAMS = [pytest.param(c, id=c.name) for c in eb.CASES.values()]
EMULATOR_PARAMS = CASE_PARAMS


# ---------------------------------------------------------------------------------------------
# The IR
# ---------------------------------------------------------------------------------------------


def test_every_case_verifies_with_tilemma_opt(tmp_path):
    text = "\n".join(eb.epilogue_ir(c, SHAPE)[0] for c in eb.CASES.values())
    path = tmp_path / "cases.mlir"
    path.write_text(text)
    opt = run_main("tilemma-opt", opt_main.main, [str(path)])  # in this process (tests.inprocess)
    assert opt.returncode == 0, opt.stderr
    for c in eb.CASES.values():
        assert f"func.func @{eb.kernel_name(c, SHAPE)}(" in opt.stdout
    assert opt.stdout.count("tile.map") == sum(c.fused for c in eb.CASES.values())


def test_the_ir_says_what_the_case_is():
    text, name = eb.epilogue_ir(eb.CASES["s8-dequant"], (64, 32, 128))
    assert name == "epi_s8_dequant_64x32x128"
    assert "%b: memref<128x32xsi8, strided<[1, 128]>>" in text  # K-major B
    assert "tile.broadcast %sa[0] dims [0] : memref<64xf32>" in text  # per row
    assert "tile.broadcast %sb[0] dims [1] : memref<32xf32>" in text  # per column
    assert "tile.broadcast %bias[0] dims [1] : memref<32xf16>" in text
    body = text.split("^bb0")[1]
    ops = re.findall(r"= (\w+\.\w+)", body)
    assert ops == ["arith.sitofp", "arith.mulf", "arith.mulf", "arith.extf", "arith.addf", "arith.truncf"]
    gelu = eb.epilogue_ir(eb.CASES["bias-gelu"], SHAPE)[0]
    assert "math.erf" in gelu and "math.tanh" not in gelu and "arith.constant 0.7071067690849304 : f32" in gelu
    tanh = eb.epilogue_ir(eb.CASES["bf16-bias-gelu-tanh"], SHAPE)[0]
    assert "math.tanh" in tanh and "%v15 = arith.truncf %v14 : f32 to bf16" in tanh
    assert "tile.map" not in eb.epilogue_ir(eb.CASES["plain"], SHAPE)[0]


def test_f32_literals_round_trip():
    for value in (math.sqrt(0.5), math.sqrt(2 / math.pi), 0.044715, 0.5, 1.0, 0.0):
        text = eb.f32_literal(value)
        assert np.float32(float(text)) == np.float32(value)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_every_case_compiles_to_ptx(case):
    text, name = eb.epilogue_ir(case, SHAPE)
    [kernel] = tilemma.compile(text, sm="90", ptx="8.5")
    ptx = kernel.ptx
    params = 2 + 2 * case.dequant + case.bias + 1
    assert kernel.name == name and len(re.findall(r"\.param \.u64", ptx)) == params
    assert ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" if case.a == "si8" else
            f"mma.sync.aligned.m16n8k16.row.col.f32.{case.a}.{case.a}.f32") in ptx
    expected = {
        "f16-out": ["cvt.rn.f16.f32"],
        "bias-relu": ["cvt.f32.f16", "add.rn.f32", "max.NaN.f32", "cvt.rn.f16.f32"],
        "bias-gelu": ["cvt.f32.f16", "add.rn.f32", "mul.rn.f32", "cvt.rn.f16.f32"],
        "bias-gelu-tanh": ["cvt.f32.f16", "mul.rn.f32", "cvt.rn.f16.f32"],
        "s8-dequant": ["cvt.rn.f32.s32", "mul.rn.f32", "cvt.f32.f16", "add.rn.f32", "cvt.rn.f16.f32"],
        "bf16-bias-gelu": ["cvt.f32.bf16", "cvt.rn.bf16.f32"],
        "bf16-bias-gelu-tanh": ["cvt.f32.bf16", "cvt.rn.bf16.f32"],
    }.get(case.name, [])
    for opcode in expected:
        assert opcode in ptx, opcode
    if not case.fused:
        assert "cvt.rn.f16.f32" not in ptx and "max.NaN" not in ptx


@pytest.mark.parametrize("family, case", [("f16", "plain"), ("bf16", "bf16-bias-gelu"), ("s8", "s8-dequant")])
def test_the_plain_baseline_is_gemm_bench_kernel(family, case):
    plain = eb.CASES[case].plain()
    ours, our_name = eb.epilogue_ir(plain, (256, 256, 256))
    theirs, their_name = gb.tilemma_ir(gb.FAMILIES[family], 256)
    [a], [b] = tilemma.compile(ours, sm="90", ptx="8.5"), tilemma.compile(theirs, sm="90", ptx="8.5")
    assert a.ptx.replace(our_name, "K") == b.ptx.replace(their_name, "K")


# ---------------------------------------------------------------------------------------------
# Reference and check (NumPy in place of torch)
# ---------------------------------------------------------------------------------------------


def _inputs(case: eb.Case, shape, seed: int = 0) -> dict:
    """As make_inputs, in NumPy: float64 values of what the kernel reads, and the memory."""
    m, n, k = shape
    rng = np.random.default_rng(seed)
    if case.a == "si8":
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8)
        level = (math.sqrt(k) * eb.S8_SQUARE) ** -0.5
        sa = ((rng.random(m) + 0.5) * level).astype(np.float32)
        sb = ((rng.random(n) + 0.5) * level).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float16)
        ab = a.astype(np.float64) @ b.astype(np.float64)
        s = None
    else:
        dt = np.float16 if case.a == "f16" else ml_dtypes.bfloat16
        a = rng.standard_normal((m, k)).astype(dt)
        b = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(dt)
        sa = sb = None
        bias = rng.standard_normal(n).astype(dt)
        ad, bd = a.astype(np.float64), b.astype(np.float64)
        ab, s = ad @ bd, np.abs(ad) @ np.abs(bd)
    f64 = lambda x: None if x is None else x.astype(np.float64)  # noqa: E731
    return {"a": a, "b": b, "sa": sa, "sb": sb, "bias": bias, "ab": ab, "s": s,
            "ref": eb.reference(case, ab, s, f64(bias), f64(sa), f64(sb), lib=NP_LIB)}


def _f32_epilogue(case: eb.Case, inp: dict, act: str | None = "case", bias: bool = True) -> np.ndarray:
    """What a correct kernel computes: f32 accumulation, the epilogue in f32, D rounded to out."""
    act = case.act if act == "case" else act
    if case.a == "si8":
        acc = (inp["a"].astype(np.int64) @ inp["b"].astype(np.int64)).astype(np.float32)
    else:
        acc = inp["a"].astype(np.float32) @ inp["b"].astype(np.float32)
    x = acc
    if case.dequant:
        x = x * inp["sa"][:, None] * inp["sb"][None, :]
    if case.bias and bias:
        x = x + inp["bias"].astype(np.float32)[None, :]
    lib = types.SimpleNamespace(erf=np.vectorize(math.erf, otypes=[np.float32]), tanh=np.tanh)
    y = eb.activation(act, x.astype(np.float32), lib).astype(np.float32)
    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}[case.out]
    return y.astype(dt).astype(np.float64)


@pytest.mark.parametrize("name", list(eb.CASES))
def test_check_accepts_a_correct_epilogue(name):
    case = eb.CASES[name]
    inp = _inputs(case, SHAPE)
    got = _f32_epilogue(case, inp)
    assert eb.epilogue_check(got, inp["ref"], out=case.out, k=SHAPE[2]) is None
    if case.a == "si8":  # the plain s8 GEMM is exact
        plain = eb.reference(case.plain(), inp["ab"], None, lib=NP_LIB)
        assert eb.epilogue_check(inp["ab"].copy(), plain, out="si32", k=SHAPE[2]) is None
        off = inp["ab"].copy()
        off[3, 4] += 1
        assert "first at (3, 4)" in eb.epilogue_check(off, plain, out="si32", k=SHAPE[2])


@pytest.mark.parametrize("name, wrong", [
    ("bias-relu", "no bias"), ("bias-relu", "no activation"), ("bias-gelu", "tanh form"),
    ("s8-dequant", "no bias"), ("f16-out", "nan"), ("bias-gelu", "unwritten"),
])
def test_check_refuses_a_wrong_epilogue(name, wrong):
    case = eb.CASES[name]
    inp = _inputs(case, SHAPE)
    if wrong == "no bias":
        got = _f32_epilogue(case, inp, bias=False)
    elif wrong == "no activation":
        got = _f32_epilogue(case, inp, act=None)
    elif wrong == "tanh form":  # (the erf form passes for gelu-tanh: within tanh.approx's error)
        got = _f32_epilogue(case, inp, act="gelu-tanh")
    else:
        got = _f32_epilogue(case, inp)
        got[7, 9] = math.nan
        if wrong == "unwritten":
            got[:] = math.nan
    problem = eb.epilogue_check(got, inp["ref"], out=case.out, k=SHAPE[2])
    assert problem is not None
    if wrong == "nan":
        assert problem.startswith("1 of") and "first at (7, 9)" in problem


def test_the_rms_check_finds_what_the_worst_case_bound_lets_through():
    # At K = 4096 the accumulation bound (K + 1) 2^-22 S is about 4% of |y|: a result 0.5% off
    # everywhere passes it, and the RMS check refuses it.
    case, shape = eb.CASES["bias-relu"], (32, 48, 4096)
    inp = _inputs(case, shape)
    got = _f32_epilogue(case, inp)
    assert eb.epilogue_check(got, inp["ref"], out="f16", k=4096) is None
    off = got * 1.005
    problem = eb.epilogue_check(off, inp["ref"], out="f16", k=4096)
    assert problem is not None and problem.startswith("RMS error")


def test_peers_get_their_chain_s_rounding():
    # torch's unfused chain: a @ b rounded to f16, + bias rounded, the activation rounded
    case = eb.CASES["bias-gelu-tanh"]
    inp = _inputs(case, SHAPE)
    prod = inp["ab"].astype(np.float16).astype(np.float64)
    pre = (prod + inp["bias"].astype(np.float64)).astype(np.float16).astype(np.float64)
    got = eb.activation("gelu-tanh", pre, NP_LIB).astype(np.float16).astype(np.float64)
    assert eb.epilogue_check(got, inp["ref"], out="f16", k=SHAPE[2], peer=True) is None


# ---------------------------------------------------------------------------------------------
# On the emulator: the kernel, its inputs and the check, end to end
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", EMULATOR_PARAMS)
def test_each_case_on_the_emulator(case):
    from tilemma.compiler.verify import emulator

    shape = (64, 48, 64)
    m, n, _ = shape
    text, name = eb.epilogue_ir(case, shape)
    [kernel] = tilemma.compile(text, sm="90", ptx="8.5")
    inp = _inputs(case, shape, seed=3)
    b_mem = inp["b"].T.copy() if case.b_col else inp["b"]
    memory = [inp["a"], b_mem] + ([inp["sa"], inp["sb"]] if case.dequant else []) + ([inp["bias"]] if case.bias else [])
    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "si32": np.int32}[case.out]
    d = np.full(m * n, eb.SENTINEL[case.out], dtype=dt)
    args = [np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in memory] + [d.view(np.uint8)]
    outs = emulator.emulate(kernel.ptx, name, kernel.grid, kernel.block, args, shared_bytes=kernel.shared_bytes)
    got = outs[-1].view(dt).reshape(m, n).astype(np.float64)
    assert eb.epilogue_check(got, inp["ref"], out=case.out, k=shape[2]) is None


# ---------------------------------------------------------------------------------------------
# Table, targets, arguments, workers
# ---------------------------------------------------------------------------------------------


def _rows():
    R = eb.EpiRow
    s = "4096x4096x4096"
    return [
        R("bias-gelu", 4096, "tilemma-plain", 0.330, 416.0, check="bound", config="mma", shape=s),
        R("bias-gelu", 4096, "tilemma", 0.3366, 408.3, check="bound", config="mma", shape=s),
        R("bias-gelu", 4096, "cublaslt", 0.194, 708.0, check="sanity", shape=s),
        R("bias-gelu", 4096, "triton-mma.sync", 0.351, 392.0, instruction="mma.sync", shape=s),
        R("bias-gelu", 4096, "triton", error="CompilationError: out of resources", shape=s),
        R("s8-dequant", 4096, "tilemma-plain", 0.16, 860.0, shape=s),
        R("s8-dequant", 4096, "tilemma", error="AssertionError: wrong result: 3 of 16777216", shape=s),
        R("plain", 2048, "tilemma", 0.05, 340.0, shape="2048x2048x2048"),
        R("plain", 2048, "tilemma-plain", 0.05, 341.0, shape="2048x2048x2048"),
    ]


def test_table_has_the_cost_and_the_ratios_and_lists_failures():
    text = eb.table(_rows())
    lines = text.splitlines()
    assert lines[0].split() == ["case", "shape", "tilemma-plain", "tilemma", "cublaslt", "triton",
                                "triton-mma.sync", "epilogue", "cost", "tilemma/Triton-ms", "tilemma/Triton",
                                "tilemma/cuBLASLt"]
    body = [line.split() for line in lines[2:5]]
    assert [b[:2] for b in body] == [["plain", "2048x2048x2048"], ["bias-gelu", "4096x4096x4096"],
                                     ["s8-dequant", "4096x4096x4096"]]
    assert body[1][2:] == ["416.0", "408.3", "708.0", "error", "392.0", "ms", "+2.0%", "1.042", "—", "0.577"]
    assert body[2][2:5] == ["860.0", "wrong", "—"]
    failed = text.split("failed or skipped:")[1].splitlines()[1:]
    assert "  bias-gelu 4096x4096x4096 triton: CompilationError: out of resources" in failed
    assert "target: epilogue cost <= 3%: met (largest +2.0%, bias-gelu 4096x4096x4096)" in lines
    assert "target: bias-gelu 4096x4096x4096 tilemma / Triton mma.sync >= 1.1: missed (1.042)" in lines
    assert lines[-1].startswith("target:")


def test_csv_round_trip(tmp_path):
    path = tmp_path / "e.csv"
    gb.write_csv(_rows(), str(path))
    assert gb.read_csv(str(path), eb.EpiRow) == _rows()


@pytest.mark.parametrize("argv, message", [
    (["--cases", "bias-swish"], "unknown case bias-swish"),
    (["--sizes", "1000"], "size 1000x1000x1000: M, N and K must be positive multiples of 16"),
    (["--sizes", "64x64"], "size '64x64': N (square) or MxNxK"),
    (["--skip", "tilemma"], "invalid choice: 'tilemma'"),
])
def test_bad_arguments_are_refused_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        eb.parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_sizes_are_square_or_m_n_k():
    args = eb.parse_args(["--sizes", "2048", "8192x4096x4096"])
    assert args.shapes == [(2048, 2048, 2048), (8192, 4096, 4096)]
    assert eb.parse_args([]).shapes == [(4096, 4096, 4096)] and eb.parse_args([]).cases == list(eb.CASES)


def test_print_ir_needs_no_gpu(capsys):
    assert eb.main(["--print-ir", "--cases", "bias-relu", "--sizes", "64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("func.func @epi_bias_relu_64x64x64(") and "arith.maximumf" in out


def test_a_dying_triton_worker_becomes_error_rows():
    cases = [eb.CASES["bias-gelu"], eb.CASES["s8-dequant"]]
    rows = eb.triton_subprocess("triton-mma.sync", cases, [(64, 64, 64), (128, 64, 32)], budget=60)
    assert sorted((r.family, r.shape) for r in rows) == [
        ("bias-gelu", "128x64x32"), ("bias-gelu", "64x64x64"), ("s8-dequant", "128x64x32"), ("s8-dequant", "64x64x64")]
    assert all(isinstance(r, eb.EpiRow) and r.impl == "triton-mma.sync" for r in rows)
    if importlib.util.find_spec("torch") is None:
        assert all("worker exited with 1" in r.error for r in rows)
