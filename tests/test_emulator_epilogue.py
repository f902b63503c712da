"""The emulator's floating-point instructions for fused epilogues, against references written here
from the ISA's definitions: exact rationals (`fractions`) rounded by a generic binary-format rounding,
Python's own IEEE doubles for specials, and the NaN bits an H100 gives (measured by
tools/epilogue_probe.py, asserted in tests/gpu/test_epilogue_ptx_gpu.py).

Every instruction runs as PTX in the emulator (one element per thread, `tools.epilogue_probe`'s
kernels) on adversarial inputs - zeros of both signs, subnormals, the largest finite values,
infinities, NaNs with payloads, ties of every target format, fma's double-rounding traps - and on
random ones.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilemma.compiler.verify.emulator import EmulationError, emulate
from tilemma.compiler.verify.emulator import float_ops
from tools import epilogue_probe as EP

F32, F64, F16, BF16 = (24, -126, 127), (53, -1022, 1023), (11, -14, 15), (8, -126, 127)
E4M3, E5M2 = (4, -6, 8), (3, -14, 15)  # significand bits, emin, emax (e4m3: largest finite 448)
CANON = 0x7FFFFFFF


def run(body, ins: tuple[str, ...], out: str, arrays: list[np.ndarray]) -> np.ndarray:
    """The emulator's output words for `body` applied elementwise to `arrays`."""
    p = EP.Probe("test", ins, out, body, "exact", lambda rng: arrays)
    text, args, n, grid = EP.prepare(p)
    return emulate(text, EP.ENTRY, (grid, 1, 1), (EP.BLOCK, 1, 1), args)[-1][:n]


def one(opcode: str, ins: tuple[str, ...], out: str, arrays) -> np.ndarray:
    return run(EP.op(opcode, EP._BANK.get(out, out)), ins, out, arrays)


# ---------------------------------------------------------------------------------------------
# The reference: exact rationals rounded to a binary format
# ---------------------------------------------------------------------------------------------


def rnd(q: Fraction, fmt: tuple[int, int, int], mode: str = "rn", largest: Fraction | None = None) -> float:
    """q (nonzero) rounded to the format (p significand bits, emin, emax) by mode; overflow gives
    +-inf or the largest finite value as IEEE's directed roundings say. A zero result keeps q's sign."""
    p, emin, emax = fmt
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (max(e, emin) - (p - 1))
    n = q / quantum
    fl = math.floor(n)
    frac = n - fl
    if mode == "rn":
        k = fl + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2) else 0)
    elif mode == "rz":
        k = math.trunc(n)
    elif mode == "rm":
        k = fl
    else:
        k = math.ceil(n)
    r = k * quantum
    big = largest if largest is not None else (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if abs(r) > big:
        keep = {"rn": True, "rz": False, "rm": q < 0, "rp": q > 0}[mode]
        return (math.inf if keep else float(big)) * (-1.0 if q < 0 else 1.0)
    return float(r) if r != 0 else math.copysign(0.0, q)


def f32(w) -> float:
    return float(np.uint32(w).view(np.float32))


def w32(x: float) -> int:
    return CANON if math.isnan(x) else int(np.float32(x).view(np.uint32))


def f64(w) -> float:
    return struct.unpack("<d", struct.pack("<Q", int(w)))[0]


def w64(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def sample(words: np.ndarray, n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return words if words.size <= n else rng.choice(words, n, replace=False)


def f32_pairs(n_random: int = 3000) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    a, b = EP.pairs(EP.f32_values(rng, 1 << 12), rng, n_random)
    return [a, b]


# ---------------------------------------------------------------------------------------------
# f32 arithmetic
# ---------------------------------------------------------------------------------------------


def _ieee_f32(op: str, x: float, y: float) -> int:
    """The f32 result word of x op y (.rn): exact rationals for finite operands, Python's IEEE
    doubles for the infinite/NaN cases (their f32 and f64 rules agree), NaN canonical."""
    if not (math.isfinite(x) and math.isfinite(y)):
        with np.errstate(all="ignore"):
            r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](np.float64(x), np.float64(y))
        return w32(float(r))
    if op == "div" and y == 0:
        return w32(math.nan if x == 0 else math.copysign(math.inf, x) * math.copysign(1.0, y))
    q = {"add": lambda: Fraction(x) + Fraction(y), "sub": lambda: Fraction(x) - Fraction(y),
         "mul": lambda: Fraction(x) * Fraction(y), "div": lambda: Fraction(x) / Fraction(y)}[op]()
    if q == 0:  # IEEE signed zeros: an exact zero sum is +0 unless both terms are -0
        if op in ("mul", "div"):
            return w32(math.copysign(0.0, math.copysign(1, x) * math.copysign(1, y)))
        yy = -y if op == "sub" else y
        both_neg = math.copysign(1, x) < 0 and math.copysign(1, yy) < 0 and x == 0 and yy == 0
        return w32(-0.0 if both_neg else 0.0)
    return w32(rnd(q, F32))


@pytest.mark.parametrize("opname", ["add.rn.f32", "sub.rn.f32", "mul.rn.f32", "div.rn.f32", "add.f32", "sub.f32",
                                    "mul.f32"])
def test_f32_arithmetic_is_ieee_with_canonical_nan(opname):
    a, b = f32_pairs()
    got = one(opname, ("f32", "f32"), "f32", [a, b])
    head = opname.split(".")[0]
    bad = [(hex(x), hex(y), hex(g)) for x, y, g in zip(a, b, got) if _ieee_f32(head, f32(x), f32(y)) != int(g)]
    assert not bad, f"{opname}: {len(bad)} wrong, e.g. {bad[:5]}"


def _fma_ref(x: float, y: float, z: float) -> int:
    if not all(math.isfinite(v) for v in (x, y, z)):
        with np.errstate(all="ignore"):
            return w32(float(np.float64(x) * np.float64(y) + np.float64(z)))
    q = Fraction(x) * Fraction(y) + Fraction(z)
    if q == 0:
        p_neg = (math.copysign(1, x) * math.copysign(1, y)) < 0
        if (x == 0 or y == 0) and z == 0 and p_neg == (math.copysign(1, z) < 0):
            return w32(-0.0 if p_neg else 0.0)
        return w32(0.0)
    return w32(rnd(q, F32))


def test_fma_f32_is_one_rounding():
    """fma.rn.f32 against exact rationals, on specials, random triples, cancellations and the
    double-rounding traps (a x b within 2**-20 ulp of half an ulp of c): a float64 sum rounded
    again to f32 gets a few of those wrong; the emulator must get none."""
    rng = np.random.default_rng(5)
    a, b, c = (sample(x, 12000, 7) for x in EP.fma_inputs(rng, 1 << 12))
    got = one("fma.rn.f32", ("f32",) * 3, "f32", [a, b, c])
    want = [_fma_ref(f32(x), f32(y), f32(z)) for x, y, z in zip(a, b, c)]
    bad = np.flatnonzero(np.array(want, dtype=np.uint64) != got.astype(np.uint64))
    assert bad.size == 0, [(hex(a[i]), hex(b[i]), hex(c[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
    # the traps are real: rounding the float64 sum again would have failed on some of them
    with np.errstate(all="ignore"):
        naive = (a.view(np.float32).astype(np.float64) * b.view(np.float32) + c.view(np.float32)).astype(np.float32)
        differs = (naive.view(np.uint32) != got) & ~np.isnan(naive)
    assert differs.sum() > 10


def test_fma_f32_hand_picked():
    cases = [  # (a, b, c, result)
        (1.0 + 2**-23, 1.0 - 2**-23, -1.0, -(2.0**-46)),  # exact residual, far below c's ulp
        (2.0**-100, 2.0**-100, 1.0, 1.0),
        (2.0**-75, 2.0**-74, 0.0, 2.0**-149),  # the product is the smallest subnormal
        (2.0**-75, 2.0**-75, 0.0, 0.0),  # half the smallest subnormal: a tie, to even (0)
        (-(2.0**-75), 2.0**-75, 0.0, -0.0),  # ... keeping its sign
        (3 * 2.0**-76, 2.0**-74, 0.0, 2.0**-149 * 2),  # 1.5 x the smallest: a tie, to even (2)
        (3 * 2.0**-77, 2.0**-74, 0.0, 2.0**-149),  # 0.75 x the smallest: up
        (2.0**64, 2.0**64, -(2.0**127), 2.0**127),
        (2.0**127, 2.0, 0.0, math.inf),
        (-0.0, 1.0, 0.0, 0.0), (-0.0, 1.0, -0.0, -0.0), (math.inf, 0.0, 1.0, math.nan),
        (math.inf, 1.0, -math.inf, math.nan), (1.0, 1.0, math.nan, math.nan),
    ]
    a, b, c = ([w32(t[i]) for t in cases] for i in range(3))
    got = one("fma.rn.f32", ("f32",) * 3, "f32", [np.array(x, np.uint32) for x in (a, b, c)])
    assert [hex(g) for g in got] == [hex(w32(t[3])) for t in cases]


def test_neg_abs_copysign_f32():
    [x] = [np.concatenate([EP.F32_SPECIAL, np.random.default_rng(2).integers(0, 1 << 32, 2000, dtype=np.uint64)
                           .astype(np.uint32)])]
    y = np.roll(x, 7)
    neg = one("neg.f32", ("f32",), "f32", [x])
    ab = one("abs.f32", ("f32",), "f32", [x])
    cs = one("copysign.f32", ("f32", "f32"), "f32", [x, y])
    for i, w in enumerate(x.tolist()):
        nan = (w & 0x7FFFFFFF) > 0x7F800000
        assert neg[i] == (CANON if nan else w ^ 0x80000000), hex(w)
        assert ab[i] == (CANON if nan else w & 0x7FFFFFFF), hex(w)
        assert cs[i] == (int(y[i]) & 0x7FFFFFFF) | (w & 0x80000000)  # sign of the first operand


def _minmax_ref(head: str, x: float, y: float, nan_mode: bool) -> int:
    if math.isnan(x) or math.isnan(y):
        if nan_mode or (math.isnan(x) and math.isnan(y)):
            return CANON
        return w32(y if math.isnan(x) else x)
    if x == y == 0:  # -0 < +0
        neg = (math.copysign(1, x) < 0) or (math.copysign(1, y) < 0) if head == "min" else \
            (math.copysign(1, x) < 0) and (math.copysign(1, y) < 0)
        return w32(-0.0 if neg else 0.0)
    return w32(max(x, y) if head == "max" else min(x, y))


@pytest.mark.parametrize("opname", ["max.f32", "min.f32", "max.NaN.f32", "min.NaN.f32"])
def test_min_max_f32_nan_rules(opname):
    a, b = f32_pairs(2000)
    got = one(opname, ("f32", "f32"), "f32", [a, b])
    head, nan_mode = opname.split(".")[0], ".NaN." in opname
    want = [_minmax_ref(head, f32(x), f32(y), nan_mode) for x, y in zip(a, b)]
    bad = [(hex(a[i]), hex(b[i]), hex(got[i]), hex(w)) for i, w in enumerate(want) if int(got[i]) != w]
    assert not bad, bad[:5]


def _cmp_ref(c: str, x: float, y: float) -> bool:
    nan = math.isnan(x) or math.isnan(y)
    if c == "num":
        return not nan
    if c == "nan":
        return nan
    base = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[c.rstrip("u")]
    return (base and not nan) if len(c) == 2 else (base or nan)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_setp_float_all_comparisons(t):
    rng = np.random.default_rng(4)
    vals = EP.f32_values(rng, 1 << 10) if t == "f32" else EP.f64_values(rng, 1 << 10)
    a, b = EP.pairs(vals, rng, 1000)
    got = run(EP.setp_all(t), (t, t), "b32", [a, b])
    conv = f32 if t == "f32" else f64
    assert len(float_ops.FLOAT_CMPS) == 14
    for i in range(a.size):
        x, y = conv(a[i]), conv(b[i])
        want = sum(_cmp_ref(c, x, y) << k for k, c in enumerate(float_ops.FLOAT_CMPS))
        assert int(got[i]) == want, f"setp.*.{t} {x!r} {y!r}: {int(got[i]):#06x} != {want:#06x}"


@pytest.mark.parametrize("t", ["f32", "b32", "f64", "b16"])
def test_selp(t):
    rng = np.random.default_rng(9)
    n = 3000
    if t == "f64":
        x, y = EP.f64_values(rng, n)[:n], EP.f64_values(rng, n)[-n:]
    else:
        x, y = EP.f32_values(rng, n)[:n], EP.f32_values(rng, n)[-n:]
        if t == "b16":
            x, y = x.astype(np.uint16), y.astype(np.uint16)
    z = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    got = run(EP.selp(t), (t, t, "b32"), t, [x, y, z])
    assert np.array_equal(got, np.where(z & 1, x, y))


# ---------------------------------------------------------------------------------------------
# f64 arithmetic (NaN bits as an H100 gives them)
# ---------------------------------------------------------------------------------------------


def _quiet(w: int) -> int:
    return w | (1 << 51)


def _isnan64(w: int) -> bool:
    return (w & 0x7FFFFFFFFFFFFFFF) > 0x7FF0000000000000


def _ieee_f64(op: str, wa: int, wb: int) -> int:
    x, y = f64(wa), f64(wb)
    if _isnan64(wa) or _isnan64(wb):  # add/sub/mul: the second operand's NaN first; div: the first's
        order = (wa, wb) if op == "div" else (wb, wa)
        return _quiet(next(w for w in order if _isnan64(w)))
    if not (math.isfinite(x) and math.isfinite(y)) or (op == "div" and y == 0):
        with np.errstate(all="ignore"):
            r = float({"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](
                np.float64(x), np.float64(y)))
        return 0xFFF8000000000000 if math.isnan(r) else w64(r)
    q = {"add": Fraction(x) + Fraction(y), "sub": Fraction(x) - Fraction(y), "mul": Fraction(x) * Fraction(y),
         "div": Fraction(x) / Fraction(y) if y else None}[op]
    if q == 0:
        if op in ("mul", "div"):
            return w64(math.copysign(0.0, math.copysign(1, x) * math.copysign(1, y)))
        yy = -y if op == "sub" else y
        return w64(-0.0 if (x == 0 and yy == 0 and math.copysign(1, x) < 0 and math.copysign(1, yy) < 0) else 0.0)
    return w64(rnd(q, F64))


@pytest.mark.parametrize("opname", ["add.rn.f64", "sub.rn.f64", "mul.rn.f64", "div.rn.f64"])
def test_f64_arithmetic(opname):
    rng = np.random.default_rng(6)
    a, b = EP.pairs(EP.f64_values(rng, 1 << 11), rng, 2000)
    got = one(opname, ("f64", "f64"), "f64", [a, b])
    head = opname.split(".")[0]
    bad = [(hex(x), hex(y), hex(g)) for x, y, g in zip(a.tolist(), b.tolist(), got.tolist())
           if _ieee_f64(head, x, y) != g]
    assert not bad, bad[:5]


def test_fma_f64():
    rng = np.random.default_rng(8)
    vals = EP.f64_values(rng, 1 << 11)
    s = EP.F64_SPECIAL
    a = np.concatenate([np.repeat(s, 4), rng.choice(vals, 1500)])
    b = np.concatenate([np.tile(s, 4), rng.choice(vals, 1500)])
    c = np.concatenate([rng.choice(s, 4 * s.size), rng.choice(vals, 1500)])
    # cancellations: c = -RN(a b), the result is the exact rounding error of the product
    xa, xb = (rng.uniform(1, 2, 500) for _ in range(2))
    a, b = np.concatenate([a, xa.view(np.uint64)]), np.concatenate([b, xb.view(np.uint64)])
    c = np.concatenate([c, (-(xa * xb)).view(np.uint64)])
    got = one("fma.rn.f64", ("f64",) * 3, "f64", [a, b, c])
    for i in range(a.size):
        x, y, z = f64(a[i]), f64(b[i]), f64(c[i])
        if any(math.isnan(v) for v in (x, y, z)):
            assert _isnan64(int(got[i]))
            continue
        if not all(math.isfinite(v) for v in (x, y, z)):
            with np.errstate(all="ignore"):
                want = float(np.float64(x) * np.float64(y) + np.float64(z))
            assert math.isnan(want) and _isnan64(int(got[i])) or w64(want) == int(got[i])
            continue
        q = Fraction(x) * Fraction(y) + Fraction(z)
        if q == 0:
            continue  # signed zeros of f64 fma: mma_arith's tests
        assert int(got[i]) == w64(rnd(q, F64)), (x, y, z)


def test_neg_abs_min_max_f64_nan_rules():
    rng = np.random.default_rng(10)
    a, b = EP.pairs(EP.f64_values(rng, 1 << 10), rng, 1500)
    neg = one("neg.f64", ("f64",), "f64", [a])
    ab = one("abs.f64", ("f64",), "f64", [a])
    mx = one("max.f64", ("f64", "f64"), "f64", [a, b])
    mn = one("min.f64", ("f64", "f64"), "f64", [a, b])
    for i, (wa, wb) in enumerate(zip(a.tolist(), b.tolist())):
        if _isnan64(wa):  # neg/abs of a NaN: quieted, sign unchanged
            assert neg[i] == ab[i] == _quiet(wa)
        else:
            assert neg[i] == wa ^ (1 << 63) and ab[i] == wa & ~(1 << 63)
        x, y = f64(wa), f64(wb)
        for got, head in ((mx[i], "max"), (mn[i], "min")):
            if _isnan64(wa) and _isnan64(wb):
                assert got == _quiet(wb)
            elif _isnan64(wa) or _isnan64(wb):
                assert got == (wb if _isnan64(wa) else wa)
            elif x == y == 0:  # -0 < +0
                signs = {math.copysign(1, x), math.copysign(1, y)}
                want = -0.0 if (head == "min" and -1 in signs) or (head == "max" and signs == {-1}) else 0.0
                assert got == w64(want), (head, x, y)
            else:
                assert got == w64(max(x, y) if head == "max" else min(x, y))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_sqrt_and_rcp_rn(t):
    rng = np.random.default_rng(11)
    x = sample(EP.f32_values(rng, 1 << 12) if t == "f32" else EP.f64_values(rng, 1 << 12), 4000)
    fmt, conv, word = (F32, f32, w32) if t == "f32" else (F64, f64, w64)
    s = one(f"sqrt.rn.{t}", (t,), t, [x])
    r = one(f"rcp.rn.{t}", (t,), t, [x])
    for i, w in enumerate(x.tolist()):
        v = conv(w)
        if math.isnan(v) or v < 0 or math.isinf(v) or v == 0:
            want_s = v if (v == 0 or v == math.inf) else math.nan
        else:  # sqrt: the r with (r - h)^2 < v < (r + h)^2, h half an ulp; checked exactly
            want_s = rnd(Fraction(math.sqrt(v)), fmt)  # double sqrt is correctly rounded, so exact enough:
            rr = Fraction(want_s)
            h = Fraction(math.ulp(want_s) if t == "f64" else np.spacing(np.float32(want_s)).item()) / 2
            assert (rr - h) ** 2 <= Fraction(v) <= (rr + h) ** 2
        if t == "f32":
            assert int(s[i]) == word(want_s), (hex(w), v)
        else:
            assert math.isnan(want_s) and _isnan64(int(s[i])) or int(s[i]) == word(want_s), (hex(w), v)
        if math.isnan(v):
            assert (t == "f32" and r[i] == CANON) or (t == "f64" and r[i] == _quiet(w))
        elif v == 0:
            assert int(r[i]) == word(math.copysign(math.inf, v))
        elif math.isinf(v):
            assert int(r[i]) == word(math.copysign(0.0, v))
        else:
            assert int(r[i]) == word(rnd(1 / Fraction(v), fmt)), (hex(w), v)


# ---------------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------------


def _to_narrow(v: float, fmt, mode: str, sat: bool, largest=None) -> float:
    if math.isnan(v):
        return math.nan
    if math.isinf(v):
        big = float(largest if largest is not None else (2 - Fraction(2) ** (1 - fmt[0])) * Fraction(2) ** fmt[2])
        return math.copysign(big, v) if sat else v
    if v == 0:
        return v
    r = rnd(Fraction(v), fmt, mode, largest)
    if sat and math.isinf(r):
        big = float(largest if largest is not None else (2 - Fraction(2) ** (1 - fmt[0])) * Fraction(2) ** fmt[2])
        return math.copysign(big, r)
    return r


def _cvt_inputs(dtype, n=4000) -> np.ndarray:
    rng = np.random.default_rng(12)
    return np.concatenate([EP.F32_SPECIAL, sample(EP.f32_values(rng, 1 << 12), n // 2),
                           sample(EP.grid_ties(rng, dtype, 1 << 12), n // 2)])


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("sat", [False, True])
def test_cvt_f32_to_f16_and_bf16(mode, sat):
    q = ".satfinite" if sat else ""
    for name, fmt, dtype, bits in (("f16", F16, np.float16, lambda r: int(np.float16(r).view(np.uint16))),
                                   ("bf16", BF16, ml_dtypes.bfloat16,
                                    lambda r: int(np.float32(r).view(np.uint32)) >> 16)):
        x = _cvt_inputs(dtype)
        got = one(f"cvt.{mode}{q}.{name}.f32", ("f32",), "b16", [x])
        for w, g in zip(x.tolist(), got.tolist()):
            r = _to_narrow(f32(w), fmt, mode, sat)
            want = 0x7FFF if math.isnan(r) else bits(r)
            assert g == want, f"cvt.{mode}{q}.{name}.f32 {f32(w)!r} ({w:#x}): {g:#06x} != {want:#06x}"


@pytest.mark.parametrize("opcode", ["cvt.rn.f16x2.f32", "cvt.rz.f16x2.f32", "cvt.rn.bf16x2.f32",
                                    "cvt.rn.satfinite.bf16x2.f32"])
def test_cvt_packed_halves(opcode):
    """d's upper half is converted from a, its lower half from b."""
    fmt, dtype = (F16, np.float16) if opcode.split(".")[-2] == "f16x2" else (BF16, ml_dtypes.bfloat16)
    a = _cvt_inputs(dtype, 2000)
    b = np.roll(a, 13)
    got = run(EP.cvt_pack(opcode), ("f32", "f32"), "b32", [a, b])
    mode, sat = opcode.split(".")[1], "satfinite" in opcode

    def half(w):
        r = _to_narrow(f32(w), fmt, mode, sat)
        if math.isnan(r):
            return 0x7FFF
        return int(np.float16(r).view(np.uint16)) if fmt == F16 else int(np.float32(r).view(np.uint32)) >> 16

    for wa, wb, g in zip(a.tolist(), b.tolist(), got.tolist()):
        assert g == (half(wa) << 16) | half(wb), (hex(wa), hex(wb), hex(g))


@pytest.mark.parametrize("kind", ["e4m3x2", "e5m2x2"])
def test_cvt_f32_to_fp8_satfinite(kind):
    fmt, dtype, largest = (E4M3, ml_dtypes.float8_e4m3fn, Fraction(448)) if kind == "e4m3x2" else (
        E5M2, ml_dtypes.float8_e5m2, Fraction(57344))
    a = _cvt_inputs(dtype, 3000)
    b = np.roll(a, 5)
    got = run(EP.cvt_pack(f"cvt.rn.satfinite.{kind}.f32"), ("f32", "f32"), "b32", [a, b])

    def byte(w):
        r = _to_narrow(f32(w), fmt, "rn", True, largest)
        return 0x7F if math.isnan(r) else int(np.array(r, dtype=np.float32).astype(dtype).view(np.uint8))

    for wa, wb, g in zip(a.tolist(), b.tolist(), got.tolist()):
        assert g == (byte(wa) << 8) | byte(wb), (f32(wa), f32(wb), hex(g))


def test_cvt_widenings():
    """f16 -> f32 (every pattern; NaN canonical), bf16 -> f32 (every pattern; the bits moved up),
    f32 -> f64 (NaN quieted, payload kept)."""
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    from_f16 = one("cvt.f32.f16", ("b16",), "f32", [h])
    from_bf16 = one("cvt.f32.bf16", ("b16",), "f32", [h])
    for w in range(1 << 16):
        v = float(np.uint16(w).view(np.float16))
        assert from_f16[w] == (CANON if math.isnan(v) else w32(v))
        assert from_bf16[w] == w << 16
    x = _cvt_inputs(np.float16)
    wide = one("cvt.f64.f32", ("f32",), "f64", [x])
    for w, g in zip(x.tolist(), wide.tolist()):
        if (w & 0x7FFFFFFF) > 0x7F800000:
            assert g == ((w & 0x80000000) << 32) | 0x7FF8000000000000 | ((w & 0x3FFFFF) << 29)
        else:
            assert f64(g) == f32(w) and math.copysign(1, f64(g)) == math.copysign(1, f32(w))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_to_f32_from_f64_and_integers(mode):
    rng = np.random.default_rng(13)
    [x64] = EP._f64_to_f32_in(rng)
    x64 = sample(x64, 4000)
    got = one(f"cvt.{mode}.f32.f64", ("f64",), "f32", [x64])
    for w, g in zip(x64.tolist(), got.tolist()):
        v = f64(w)
        if math.isnan(v):  # sign, quiet bit, the top 22 payload bits
            assert g == ((w >> 32) & 0x80000000) | 0x7FC00000 | ((w >> 29) & 0x3FFFFF)
        else:
            want = v if (v == 0 or math.isinf(v)) else rnd(Fraction(v), F32, mode)
            assert g == w32(want), (v, mode)
    [ints] = EP._s32_in(rng)
    ints = sample(ints, 4000)
    for t in ("s32", "u32"):
        got = one(f"cvt.{mode}.f32.{t}", ("b32",), "f32", [ints])
        for w, g in zip(ints.tolist(), got.tolist()):
            v = w - (1 << 32) if (t == "s32" and w >> 31) else w
            want = 0.0 if v == 0 else rnd(Fraction(v), F32, mode)
            assert g == w32(want), (t, v, mode)


# ---------------------------------------------------------------------------------------------
# Moves, memory, integers
# ---------------------------------------------------------------------------------------------


def test_mov_pack_unpack():
    rng = np.random.default_rng(14)
    x = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32)
    got = run(EP.pack_unpack, ("b32",), "b32", [x])
    assert np.array_equal(got, (x >> 16) | (x << 16))  # the two halves swapped

    def body(e, xs):  # mov.b16 and packing immediates
        h, r = e.reg("b16"), e.reg("b32")
        e.emit("mov.b16", h, "0x1234")
        e.emit("mov.b32", r, "{" + f"{h}, 0xABCD" + "}")
        return r

    assert set(run(body, ("b32",), "b32", [x[:64]]).tolist()) == {0xABCD1234}


def test_mov_pack_errors():
    def bad(e, xs):
        r = e.reg("b32")
        e.emit("mov.b32", r, "{" + f"{xs[0]}, {xs[0]}" + "}")  # two 32-bit parts do not make a .b32
        return r

    with pytest.raises(EmulationError, match="16-bit register"):
        run(bad, ("b32",), "b32", [np.zeros(4, np.uint32)])


@pytest.mark.parametrize("t", ["u8", "u16", "b16"])
def test_narrow_loads_and_stores(t):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint8 if t == "u8" else np.uint16)
    assert np.array_equal(run(EP.memory_8_16, (t,), t, [x]), x)


def test_st_b8_stores_the_low_byte():
    def body(e, xs):
        return xs[0]

    x = np.arange(300, dtype=np.uint32).astype(np.uint16) * np.uint16(257)
    p = EP.Probe("t", ("b16",), "u8", body, "exact", lambda rng: [x])
    text, args, n, grid = EP.prepare(p)
    text = text.replace("st.global.u8", "st.global.b8")
    got = emulate(text, EP.ENTRY, (grid, 1, 1), (EP.BLOCK, 1, 1), args)[-1][:n]
    assert np.array_equal(got, (x & 0xFF).astype(np.uint8))


@pytest.mark.parametrize("opname", ["add.s32", "sub.s32", "mul.lo.s32", "max.s32", "min.s32"])
def test_s32_integer_ops(opname):
    rng = np.random.default_rng(15)
    a, b = EP._int_pairs(rng)
    got = one(opname, ("b32", "b32"), "b32", [a, b])

    def s(w):
        return w - (1 << 32) if w >> 31 else w

    f = {"add.s32": lambda x, y: x + y, "sub.s32": lambda x, y: x - y, "mul.lo.s32": lambda x, y: x * y,
         "max.s32": max, "min.s32": min}[opname]
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist()):
        assert g == f(s(x), s(y)) & 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# Approximate instructions: the exact function rounded to f32, the ISA's specials
# ---------------------------------------------------------------------------------------------

_SPECIALS = {  # (input, result) pairs from the ISA's tables (NaN: any NaN)
    "ex2": [(-math.inf, 0.0), (-0.0, 1.0), (0.0, 1.0), (math.inf, math.inf), (math.nan, math.nan)],
    "lg2": [(-math.inf, math.nan), (-1.0, math.nan), (-0.0, -math.inf), (0.0, -math.inf), (math.inf, math.inf),
            (math.nan, math.nan)],
    "tanh": [(-math.inf, -1.0), (-0.0, -0.0), (0.0, 0.0), (math.inf, 1.0), (math.nan, math.nan)],
    "rcp": [(-math.inf, -0.0), (-0.0, -math.inf), (0.0, math.inf), (math.inf, 0.0), (math.nan, math.nan)],
    "rsqrt": [(-math.inf, math.nan), (-1.0, math.nan), (-0.0, -math.inf), (0.0, math.inf), (math.inf, 0.0),
              (math.nan, math.nan)],
    "sqrt": [(-math.inf, math.nan), (-1.0, math.nan), (-0.0, -0.0), (0.0, 0.0), (math.inf, math.inf),
             (math.nan, math.nan)],
}
_EXACT = {"ex2": lambda v: 2.0**v, "lg2": math.log2, "tanh": math.tanh, "rcp": lambda v: 1 / v,
          "rsqrt": lambda v: 1 / math.sqrt(v), "sqrt": math.sqrt}


@pytest.mark.parametrize("fn", list(_SPECIALS))
@pytest.mark.parametrize("ftz", [False, True])
def test_approx_instructions(fn, ftz):
    if fn == "tanh" and ftz:
        with pytest.raises(EmulationError, match="tanh.approx.ftz.f32 is not supported"):
            one("tanh.approx.ftz.f32", ("f32",), "f32", [np.zeros(4, np.uint32)])
        return
    name = f"{fn}.approx{'.ftz' if ftz else ''}.f32"
    specials = [k for k, _ in _SPECIALS[fn]]
    rng = np.random.default_rng(16)
    lo, hi = {"ex2": (-160.0, 130.0), "tanh": (-12.0, 12.0)}.get(fn, (0.0, 1e38))
    pos = np.exp2(rng.uniform(-149, 127, 3000)).astype(np.float32)
    vals = np.concatenate([np.array(specials, np.float32), rng.uniform(lo, hi, 3000).astype(np.float32), pos,
                           np.float32(2.0) ** -np.arange(120, 150, dtype=np.float32)])
    x = vals.view(np.uint32)
    got = one(name, ("f32",), "f32", [x]).view(np.float32)
    for v, g in zip(vals.tolist(), got.tolist()):
        vin = math.copysign(0.0, v) if ftz and 0 < abs(v) < 2.0**-126 else v
        hit = [r for k, r in _SPECIALS[fn] if (math.isnan(k) and math.isnan(vin)) or (
            k == vin and math.copysign(1, k) == math.copysign(1, vin))]
        if hit or (fn in ("lg2", "rsqrt", "sqrt") and vin < 0):
            want = hit[0] if hit else math.nan
            assert (math.isnan(want) and np.float32(g).view(np.uint32) == CANON) or (
                g == want and math.copysign(1, g) == math.copysign(1, want)), (name, v, g)
            continue
        try:
            exact = _EXACT[fn](vin)
        except OverflowError:
            exact = math.inf
        with np.errstate(over="ignore"):
            want = float(np.float32(exact)) if abs(exact) < 3.5e38 else math.copysign(math.inf, exact)
        if ftz and abs(want) < 2.0**-126:
            want = math.copysign(0.0, want)
        if want != g:  # the float64 function rounded to f32: only double-rounding near-ties may differ
            assert abs(g - exact) <= 0.5 * float(np.spacing(np.float32(abs(exact)))) * (1 + 2.0**-20), (name, v, g)


# ---------------------------------------------------------------------------------------------
# Unsupported forms are named
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("opcode, ins, match", [
    ("add.rz.f32", ("f32", "f32"), "add.rz.f32 is not supported"),
    ("add.ftz.f32", ("f32", "f32"), "add.ftz.f32 is not supported"),
    ("mul.sat.f32", ("f32", "f32"), "mul.sat.f32 is not supported"),
    ("div.approx.f32", ("f32", "f32"), "div.approx.f32 is not supported"),
    ("div.full.f32", ("f32", "f32"), "div.full.f32 is not supported"),
    ("fma.rz.f32", ("f32",) * 3, "fma.rz.f32 is not supported"),
    ("max.NaN.f64", ("f64", "f64"), "max.NaN.f64 is not supported"),
    ("min.ftz.f32", ("f32", "f32"), "min.ftz.f32 is not supported"),
    ("neg.ftz.f32", ("f32",), "neg.ftz.f32 is not supported"),
    ("setp.lt.ftz.f32", ("f32", "f32"), "setp.lt.ftz.f32 is not supported"),
    ("cvt.rn.relu.f16.f32", ("f32",), "cvt.rn.relu.f16.f32 is not supported"),
    ("cvt.f16.f32", ("f32",), "cvt.f16.f32 is not supported"),
    ("cvt.rni.s32.f32", ("f32",), "cvt.rni.s32.f32 is not supported"),
    ("ex2.approx.f64", ("f64",), "ex2.approx.f64 is not supported"),
    ("sqrt.rz.f32", ("f32",), "sqrt.rz.f32 is not supported"),
    ("lg2.f32", ("f32",), "lg2.f32 is not supported"),
])  # fmt: skip
def test_unsupported_modifiers_are_named(opcode, ins, match):
    out = "b16" if ".f16." in opcode else ("b32" if ".s32." in opcode else ins[0])
    with pytest.raises(EmulationError, match=match.replace(".", r"\.")):
        one(opcode, ins, out, [np.zeros(4, dtype=EP._IO[t][2]) for t in ins])


def test_rounded_f32_helper_matches_exact_rationals():
    """`float_ops.f64_to_f32` (used by cvt and fma) for every rounding mode near every kind of
    f32 boundary: midpoints, subnormals, the overflow threshold."""
    rng = np.random.default_rng(17)
    [v] = EP._f64_to_f32_in(rng)
    v = sample(v, 3000).view(np.float64)
    v = v[np.isfinite(v) & (v != 0)]
    for mode in ("rn", "rz", "rm", "rp"):
        got = float_ops.f64_to_f32(v, mode)
        for x, g in zip(v.tolist(), got.tolist()):
            assert g == rnd(Fraction(x), F32, mode), (x, mode)


# ---------------------------------------------------------------------------------------------
# The GPU probe's harness (tools/epilogue_probe.py), without a GPU
# ---------------------------------------------------------------------------------------------


def test_probe_runs_every_kernel_in_the_emulator(tmp_path, capsys):
    # every 8th point of the sweeps (the specials and random words all): the harness, in CI's time;
    # the full sweeps run with the GPU (benchmarks/gpu_session.sh)
    assert EP.main(["--emulator-only", "--thin", "8", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "epilogue_probe.md").read_text()
    assert all(f"| {p.name} |" in table for p in EP.PROBES)
    assert "FAIL" not in table and "ERROR" not in table
    assert f"{len(EP.PROBES)} probes in" in capsys.readouterr().out


def test_probe_verdicts_catch_differences():
    """A GPU word that differs fails an exact row; a result beyond the bound fails an approx row."""
    exact = next(p for p in EP.PROBES if p.name == "fma.rn.f32")
    text, args, n, grid = EP.prepare(exact)
    emu = emulate(text, EP.ENTRY, (grid, 1, 1), (EP.BLOCK, 1, 1), [a.copy() for a in args])[-1]
    gpu = emu.copy()
    gpu[5] ^= 1
    r = EP.evaluate(exact, emu, gpu, args, n)
    assert not r.ok and r.identical < 1 and r.max_ulp == 1 and r.examples
    assert EP.evaluate(exact, emu, emu.copy(), args, n).ok
    approx = next(p for p in EP.PROBES if p.name == "math.log2")  # a bounded row (erf's sweep is 10x longer)
    text, args, n, grid = EP.prepare(approx)
    emu = emulate(text, EP.ENTRY, (grid, 1, 1), (EP.BLOCK, 1, 1), [a.copy() for a in args])[-1]
    good = EP.evaluate(approx, emu, emu.copy(), args, n)
    assert good.ok and good.identical == 1.0 and 0 < good.bound_units <= 1
    x = args[0][:n].view(np.float32)
    i = int(np.flatnonzero((np.abs(x) > 0.1) & (np.abs(x) < 0.5))[0])
    gpu = emu.copy()
    gpu[i] += 40  # 40 ulp off: far beyond log2's bound
    bad = EP.evaluate(approx, emu, gpu, args, n)
    assert not bad.ok and bad.bound_violations == 1 and bad.max_ulp == 40
