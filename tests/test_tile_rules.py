"""Front-half checks that stop silently wrong code: constants must fit their element type, and a
tile.cast must be one the lowering can do (`tile.CAST_RULES`), refused where it is written."""


import re

import ml_dtypes
import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.dialects import tile
from tilemma.dialects.attributes import element_range
from tests.inprocess import run_main
from tilemma.compiler.driver import cli


def tilemma(*args, stdin=None):
    return run_main("tilemma", cli.main, args, stdin)  # in this process (tests.inprocess)


@pytest.mark.parametrize(
    "name, dtype",
    [("f16", np.float16), ("bf16", ml_dtypes.bfloat16), ("f32", np.float32), ("f64", np.float64),
     ("f8E4M3FN", ml_dtypes.float8_e4m3fn), ("f8E5M2", ml_dtypes.float8_e5m2),
     ("f6E3M2FN", ml_dtypes.float6_e3m2fn), ("f6E2M3FN", ml_dtypes.float6_e2m3fn),
     ("f4E2M1FN", ml_dtypes.float4_e2m1fn), ("f8E8M0FNU", ml_dtypes.float8_e8m0fnu)],
)
def test_float_limits_match_ml_dtypes(name, dtype):
    info = ml_dtypes.finfo(dtype)
    low = float(info.smallest_normal) if name == "f8E8M0FNU" else float(info.min)
    assert element_range(name) == (low, float(info.max))


def test_tf32_and_ue4m3_limits():
    # tf32: f32's exponent with a 10-bit mantissa; ue4m3: e4m3 without the sign.
    assert element_range("tf32")[1] == float.fromhex("0x1.ffcp127")
    assert element_range("ue4m3") == (0.0, float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max))


@pytest.mark.parametrize(
    "element, good, bad",
    [
        ("si32", [-(2**31), 2**31 - 1, 0], [2**31, 2**32, -(2**31) - 1]),
        ("si8", [-128, 127], [128, -129]),
        ("ui8", [0, 255], [256, -1]),
        ("ui4", [0, 15], [16, -1]),
        ("si4", [-8, 7], [8, -9]),
        ("i1", [0, 1, -1], [2, -2]),
        ("f16", [65504.0, -65504.0, 1e-9], [65504.5, 65520.0, -1e5]),
        ("f32", [3.4028234663852886e38], [3.5e38, -1e39]),
        ("tf32", [3.4011621342146535e38], [3.4028234663852886e38]),
        ("f8E4M3FN", [448.0, -448.0], [449.0]),
        ("f64", [1e308], []),
    ],
)
def test_constant_range(element, good, bad):
    """The verifier range-checks a constant against its tile's element type (built in Python,
    so the parser's check is not what catches it)."""
    t = tile.TileType((16, 8), tile.element_type(element))
    for v in good:
        tile.ConstantOp(v, t).verify()
    for v in bad:
        with pytest.raises(VerifyException, match=f"out of range for {element} \\(range "):
            tile.ConstantOp(v, t).verify()


def _kernel(acc_value: str) -> str:
    return f"""func.func @k(%a: memref<16x32xsi8>, %b: memref<32x8xsi8>, %d: memref<16x8xsi32>) {{
  %ta = tile.load %a[0, 0] : memref<16x32xsi8> -> !tile.tile<16x32xsi8>
  %tb = tile.load %b[0, 0] : memref<32x8xsi8> -> !tile.tile<32x8xsi8>
  %c = tile.constant {acc_value} : !tile.tile<16x8xsi32>
  %r = tile.mma %ta, %tb, %c : !tile.tile<16x32xsi8>, !tile.tile<32x8xsi8>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  tile.store %r, %d[0, 0] : !tile.tile<16x8xsi32>, memref<16x8xsi32>
  func.return
}}
"""


def test_oversized_accumulator_constant_is_refused_located():
    """It used to become `mov.b32 %r, 4294967296` (ptxas assembles 0)."""
    bad = tilemma("compile", "-", "--sm", "90", stdin=_kernel("4294967296"))
    assert bad.returncode == 1
    assert "<stdin>:4:22" in bad.stderr
    assert "tile.constant: 4294967296 is out of range for si32 (range -2147483648 to 2147483647)" in bad.stderr
    assert "Traceback" not in bad.stderr
    [k] = compile_text(_kernel("-2147483648"), "k", CompileOptions(sm="90"))
    assert run_compiled(k, seed=1, on="emulator").ok


def test_select_mma_zero_accumulators_verify():
    """tile-select-mma turns tile.matmul into tile.mma with a zero tile.constant: still valid."""
    for a, acc in (("si8", "si32"), ("f16", "f16"), ("bf16", "f32"), ("f64", "f64")):
        text = f"""func.func @k(%a: memref<16x32x{a}>, %b: memref<32x8x{a}>, %d: memref<16x8x{acc}>) {{
  %ta = tile.load %a[0, 0] : memref<16x32x{a}> -> !tile.tile<16x32x{a}>
  %tb = tile.load %b[0, 0] : memref<32x8x{a}> -> !tile.tile<32x8x{a}>
  %r = tile.matmul %ta, %tb : !tile.tile<16x32x{a}>, !tile.tile<32x8x{a}> -> !tile.tile<16x8x{acc}>
  tile.store %r, %d[0, 0] : !tile.tile<16x8x{acc}>, memref<16x8x{acc}>
  func.return
}}
"""
        [k] = compile_text(text, "k", CompileOptions(sm="90"))
        assert run_compiled(k, seed=2, on="emulator").ok


def _cast_kernel(a: str, b: str, cast: str) -> str:
    return f"""func.func @k(%a: memref<16x64x{a}>, %b: memref<64x8x{b}>, %d: memref<16x8xf32>) {{
  %ta = tile.load %a[0, 0] : memref<16x64x{a}> -> !tile.tile<16x64x{a}>
  %tb = tile.load %b[0, 0] : memref<64x8x{b}> -> !tile.tile<64x8x{b}>
  {cast}
  func.return
}}
"""


@pytest.mark.parametrize(
    "cast, message",
    [
        ("%x = tile.cast %ta : !tile.tile<16x64xf16> -> !tile.tile<16x64xbf16>",
         "tile.cast: no conversion from f16 to bf16; supported: f32 -> tf32 (rounding rna / rn / rz / trunc), "
         "si4 -> si8, ui4 -> ui8, f32 -> f16 (rounding rn / rz)"),
        ("%x = tile.cast %ta : !tile.tile<16x64xf16> -> !tile.tile<16x64xf16>", "no conversion from f16 to f16"),
        ("%x = tile.cast %ta : !tile.tile<16x64xf16> -> !tile.tile<16x64xf8E4M3FN>",
         "no conversion from f16 to f8E4M3FN"),
    ],
)
def test_cast_outside_the_table_is_refused_at_the_cast(cast, message):
    r = tilemma("compile", "-", stdin=_cast_kernel("f16", "f16", cast))
    assert r.returncode == 1 and "<stdin>:4:3" in r.stderr and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_cast_table_rejects_signedness_change():
    t4 = tile.TileType((16, 64), tile.element_type("si4"))
    ok = tile.CastOp(tile.ConstantOp(0, t4).result, tile.TileType((16, 64), tile.element_type("si8")))
    ok.verify()
    bad = tile.CastOp(tile.ConstantOp(0, t4).result, tile.TileType((16, 64), tile.element_type("ui8")))
    with pytest.raises(VerifyException, match="no conversion from si4 to ui8"):
        bad.verify()


def _tf32_kernel(rounding: str) -> str:
    return f"""func.func @k(%a: memref<37x29xf32>, %b: memref<29x45xf32>, %d: memref<37x45xf32>) {{
  %ta = tile.load %a[0, 0] : memref<37x29xf32> -> !tile.tile<37x29xf32>
  %tb = tile.load %b[0, 0] : memref<29x45xf32> -> !tile.tile<29x45xf32>
  %ca = tile.cast %ta {{rounding = #tile<rounding {rounding}>}} : !tile.tile<37x29xf32> -> !tile.tile<37x29xtf32>
  %cb = tile.cast %tb {{rounding = #tile<rounding {rounding}>}} : !tile.tile<29x45xf32> -> !tile.tile<29x45xtf32>
  %r = tile.matmul %ca, %cb : !tile.tile<37x29xtf32>, !tile.tile<29x45xtf32> -> !tile.tile<37x45xf32>
  tile.store %r, %d[0, 0] : !tile.tile<37x45xf32>, memref<37x45xf32>
  func.return
}}
"""


@pytest.mark.parametrize("rounding", ["rna", "rn", "rz"])
def test_tf32_roundings_lower_from_the_table(rounding):
    [k] = compile_text(_tf32_kernel(rounding), "k", CompileOptions(sm="90"))
    if rounding == "rna":  # half an ulp added, the low bits the tensor cores' to drop (`tf32_for_mma`)
        assert re.search(r"@%p\d+ add\.s32 %r\d+, %r\d+, 4096;", k.ptx) and "cvt.rna" not in k.ptx
    else:
        assert f"cvt.{rounding}.tf32.f32" in k.ptx
    assert run_compiled(k, seed=5, on="emulator").ok


def test_tf32_trunc_is_no_instruction_and_reads_as_rz():
    """`rounding trunc` feeds the f32 registers to the mma as they are (no cvt, from sm_80, staged
    or not): on random f32 operands (low 13 bits set) D's bits equal the cvt.rz kernel's."""
    import numpy as np

    rng = np.random.default_rng(7)
    a = (rng.standard_normal((37, 29)) * np.exp2(rng.integers(-30, 30, (37, 29)))).astype(np.float32)
    b = (rng.standard_normal((29, 45)) * np.exp2(rng.integers(-30, 30, (29, 45)))).astype(np.float32)
    assert (a.view(np.uint32) & 0x1FFF).any() and (b.view(np.uint32) & 0x1FFF).any()
    outs = {}
    for rounding, sm, stages in (("trunc", "90", -1), ("trunc", "80", 0), ("rz", "90", -1), ("rz", "90", 0)):
        [k] = compile_text(_tf32_kernel(rounding), "k", CompileOptions(sm=sm, stages=stages))
        assert (f"cvt.{rounding}.tf32.f32" in k.ptx) == (rounding != "trunc") and "cvt.trunc" not in k.ptx
        res = run_compiled(k, seed=5, on="emulator", inputs={"a": a, "b": b})
        assert res.ok, res.line()
        outs[(rounding, sm, stages)] = np.asarray(res.outputs["d"]).view(np.uint32)
    first = next(iter(outs.values()))
    assert all(np.array_equal(first, o) for o in outs.values())


def test_tf32_trunc_reads_a_low_payload_nan_as_an_infinity():
    import numpy as np

    from tilemma.compiler.verify.mma_arith import round_tf32

    x = np.array([0x7F800001, 0xFF801FFF, 0x7FC00000, 0x3F801FFF], dtype=np.uint32).view(np.float32)
    trunc, rz = (round_tf32(x, m).view(np.uint32) for m in ("trunc", "rz"))
    assert list(trunc) == [0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000]
    assert list(rz) == [0x7FFFE000, 0xFFFFE000, 0x7FFFE000, 0x3F800000]


def test_tf32_rounding_the_target_lacks_is_refused_at_the_cast():
    r = tilemma("compile", "-", "--sm", "80", stdin=_tf32_kernel("rz"))
    assert r.returncode == 1 and "<stdin>:4:3" in r.stderr, r.stderr
    assert "tile.cast: f32 -> tf32 with rounding rz needs sm_90 or newer; sm_80 has rna" in r.stderr
    [k] = compile_text(_tf32_kernel("rna"), "k", CompileOptions(sm="80"))
    assert re.search(r"@%p\d+ add\.s32 %r\d+, %r\d+, 4096;", k.ptx)
