"""The epilogue's interval reference (compiler/verify/epilogue_reference.py) against brute force.

Intervals a few ulps wide are enumerated completely: every pair (triple) of their values goes
through the scalar operation with an independent implementation of its semantics (NumPy's own
f16 / bf16 / f32 / f64 arithmetic and conversions, Fractions for fma and rz), and the interval
must hold every result and, for the exactly rounded operations, have exactly the extreme ones as
its ends; a point input gives the exact bit pattern. Then adversarial values (NaN, infinities,
subnormals, cancellation, overflow, saturation) and whole epilogues written in tile IR.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilemma.compiler.verify import epilogue_reference as er

I = er.Interval
DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
WIDTH = 6  # values per enumerated interval (up to)


def _start_values(t: str, n: int, rng) -> np.ndarray:
    """Interval starts: ordinary magnitudes of both signs, with zeros, subnormals, values near
    overflow and infinities mixed in."""
    dt = DTYPES[t]
    fi = ml_dtypes.finfo(dt)
    mags = np.exp2(rng.uniform(-6, 6, n))
    vals = np.where(rng.random(n) < 0.5, -mags, mags)
    kind = rng.random(n)
    tiny, big = float(fi.smallest_subnormal), float(fi.max)
    vals = np.where(kind < 0.05, 0.0, vals)
    vals = np.where((kind >= 0.05) & (kind < 0.10), tiny * rng.integers(-3, 4, n), vals)
    vals = np.where((kind >= 0.10) & (kind < 0.13), big * np.sign(vals), vals)
    vals = np.where((kind >= 0.13) & (kind < 0.15), np.where(vals < 0, -np.inf, np.inf), vals)
    with np.errstate(over="ignore"):
        return vals.astype(dt)


def _enumerate(t: str, n: int, rng, width: int = WIDTH):
    """n intervals of `t` of 1..width consecutive values: (Interval, values [n, width] padded with
    the interval's last value)."""
    dt = DTYPES[t]
    start = _start_values(t, n, rng)
    steps = rng.integers(0, width, n)
    cols = [start]
    up = np.array(np.inf, dtype=dt)
    for i in range(1, width):
        with np.errstate(over="ignore"):
            nxt = np.nextafter(cols[-1], up)
        cols.append(np.where(i <= steps, nxt, cols[-1]).astype(dt))
    pts = np.stack(cols, axis=1)
    lo = pts[:, 0].astype(np.float64)
    hi = pts[:, -1].astype(np.float64)
    return I(t, lo, hi, np.zeros(n, bool)), pts


def _numpy_op(name: str, x, y):
    with np.errstate(all="ignore"):
        return {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
                "arith.divf": np.divide}[name](x, y)


def _assert_holds(iv: I, results: np.ndarray, tight: np.ndarray | bool = True, what: str = ""):
    """Every result (axis 1..) inside iv; where `tight`, its ends are the extreme results and NaN is
    possible iff one is NaN."""
    r = results.reshape(results.shape[0], -1).astype(np.float64)
    nan = np.isnan(r)
    ok = np.where(nan, iv.nan[:, None], (iv.lo[:, None] <= r) & (r <= iv.hi[:, None]))
    bad = np.argwhere(~ok)
    assert not bad.size, (f"{what}: interval [{iv.lo[bad[0][0]]}, {iv.hi[bad[0][0]]}] nan={iv.nan[bad[0][0]]} "
                          f"misses {r[tuple(bad[0])]}")
    tight = np.broadcast_to(tight, iv.lo.shape)
    with np.errstate(all="ignore"):
        rmin = np.where(nan, np.inf, r).min(1)
        rmax = np.where(nan, -np.inf, r).max(1)
    all_nan = nan.all(1)
    sel = tight & ~all_nan
    assert np.array_equal(iv.lo[sel], rmin[sel]), f"{what}: lower ends not the least result"
    assert np.array_equal(iv.hi[sel], rmax[sel]), f"{what}: upper ends not the greatest result"
    assert np.array_equal(iv.nan[tight], nan.any(1)[tight]), f"{what}: NaN flag"
    assert np.all(iv.empty[tight & all_nan])


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("name", ["arith.addf", "arith.subf", "arith.mulf", "arith.divf"])
def test_binary_ops_enumerated(t, name):
    rng = np.random.default_rng(hash((t, name)) % 2**32)
    a, pa = _enumerate(t, 3000, rng)
    b, pb = _enumerate(t, 3000, rng)
    iv = er.apply_op(name, [a, b], t)
    res = _numpy_op(name, pa[:, :, None], pb[:, None, :])
    tight = True
    if name == "arith.divf":  # a divisor range holding 0 gives everything
        tight = ~((b.lo <= 0) & (b.hi >= 0))
    _assert_holds(iv, res, tight, f"{name} {t}")


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64"])
def test_points_give_exact_bits(t):
    rng = np.random.default_rng(7)
    dt = DTYPES[t]
    x = _start_values(t, 4000, rng)
    y = _start_values(t, 4000, rng)
    for name in ("arith.addf", "arith.subf", "arith.mulf", "arith.divf"):
        iv = er.apply_op(name, [I.point(x, t), I.point(y, t)], t)
        want = _numpy_op(name, x, y)
        finite = ~np.isnan(want.astype(np.float64))
        if name == "arith.divf":  # the sign of a zero is not tracked: x / 0 is [-inf, inf]
            finite &= y != 0
        got = iv.lo.astype(dt)
        assert np.array_equal(got[finite].view(np.uint8), want[finite].view(np.uint8)), name
        assert np.array_equal(iv.hi.astype(dt)[finite].view(np.uint8), want[finite].view(np.uint8)), name
        assert np.array_equal(iv.empty, np.isnan(want.astype(np.float64)))


def _bits(v: float, dt) -> int:
    arr = np.array([v], dtype=np.float64).astype(dt)
    return int(arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.itemsize])[0])


def _nearest(value: Fraction, t: str, mode: str = "rn") -> float:
    """Independent rounding of an exact value to `t`: the representable values around Python's
    correctly rounded float(value), then the nearest (ties to the even code) or the largest
    magnitude not above |value| (rz); IEEE overflow to infinity under rn."""
    dt = DTYPES[t]
    top = Fraction(float(ml_dtypes.finfo(dt).max))
    try:
        guess = float(value)
    except OverflowError:
        guess = 1e308 if value > 0 else -1e308
    with np.errstate(over="ignore"):
        g = np.array([guess], dtype=np.float64).astype(dt)
    cands = {float(g[0])}
    for direction in (np.inf, -np.inf):
        v = g
        for _ in range(2):
            with np.errstate(over="ignore"):
                v = np.nextafter(v, np.array([direction]).astype(dt))
            cands.add(float(v[0]))
    finite = sorted(c for c in cands if math.isfinite(c) and abs(Fraction(c)) <= top)
    if mode == "rz":
        below = [c for c in finite if abs(Fraction(c)) <= abs(value) and (c == 0 or (c > 0) == (value > 0))]
        return max(below, key=abs) if below else 0.0
    below_top = top - Fraction(float(np.nextafter(np.array([float(top)]).astype(dt), np.array([0.0]).astype(dt))[0]))
    if abs(value) >= top + below_top / 2:  # IEEE overflow (the tie at the top rounds away)
        return math.inf if value > 0 else -math.inf
    return min(finite, key=lambda c: (abs(Fraction(c) - value), _bits(c, dt) & 1))


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64"])
def test_fma_against_fractions(t):
    rng = np.random.default_rng(11)
    n = 400 if t != "f64" else 150
    a, pa = _enumerate(t, n, rng, 3)
    b, pb = _enumerate(t, n, rng, 3)
    c, pc = _enumerate(t, n, rng, 3)
    iv = er.apply_op("math.fma", [a, b, c], t)
    res = np.empty((n, 3, 3, 3))
    for i in range(n):
        for j in range(3):
            for k in range(3):
                for m in range(3):
                    x, y, z = (float(v) for v in (pa[i, j], pb[i, k], pc[i, m]))
                    if all(math.isfinite(v) for v in (x, y, z)):
                        res[i, j, k, m] = _nearest(Fraction(x) * Fraction(y) + Fraction(z), t)
                    else:
                        with np.errstate(all="ignore"):
                            res[i, j, k, m] = x * y + z
    _assert_holds(iv, res, True, f"fma {t}")


def test_fma_single_rounding():
    # (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46 exactly: a separate multiply would give 0.
    one_up, one_down = np.float32(1 + 2**-23), np.float32(1 - 2**-23)
    iv = er.apply_op("math.fma", [I.point([one_up], "f32"), I.point([one_down], "f32"), I.point([-1.0], "f32")], "f32")
    assert iv.lo[0] == iv.hi[0] == -(2.0**-46)
    # Just above a tie of the result type, below float64's (f32) or float32's (f16) last bit:
    # rounding twice to nearest would land on the even side, one rounding goes up.
    a, c = np.float32(1 + 2**-12), np.float32(2**-80)
    iv = er.apply_op("math.fma", [I.point([a], "f32"), I.point([a], "f32"), I.point([c], "f32")], "f32")
    assert iv.lo[0] == iv.hi[0] == 1 + 2**-11 + 2**-23
    a, b, c = np.float16(1 + 2**-6), np.float16(1 + 2**-5), np.float16(2**-24)
    iv = er.apply_op("math.fma", [I.point([a], "f16"), I.point([b], "f16"), I.point([c], "f16")], "f16")
    assert iv.lo[0] == iv.hi[0] == 1 + 2**-5 + 2**-6 + 2**-10


@pytest.mark.parametrize("src,dst,mode", [("f32", "f16", "rn"), ("f32", "f16", "rz"), ("f32", "bf16", "rn"),
                                          ("f32", "bf16", "rz"), ("f64", "f32", "rn"), ("f64", "f32", "rz"),
                                          ("f64", "f16", "rn"), ("f64", "bf16", "rn")])
def test_narrowing_enumerated(src, dst, mode):
    rng = np.random.default_rng(3)
    a, pa = _enumerate(src, 600, rng)
    iv = er.cast(a, dst, mode)
    res = np.array([[_nearest(Fraction(float(v)), dst, mode) if np.isfinite(v) else float(v)  # inf is exact
                     for v in row] for row in pa])
    _assert_holds(iv, res, True, f"{src}->{dst} {mode}")


def test_numpy_conversions_agree():
    """The float64 -> f16 / bf16 path (round to odd in f32) is one rounding: compare with the
    independent Fraction rounding on values near ties."""
    rng = np.random.default_rng(5)
    for t, bits in (("f16", 11), ("bf16", 8)):
        base = rng.uniform(1, 2, 2000)
        ulp = 2.0**-(bits - 1)
        ties = np.floor(base / ulp) * ulp + ulp / 2  # exact ties
        near = ties + rng.choice([-1, 1], 2000) * 2.0**-40  # beyond f32's precision from the tie
        for x in (ties, near):
            got = er.round_to(x, t)
            want = np.array([_nearest(Fraction(v), t) for v in x])
            assert np.array_equal(got, want), t


@pytest.mark.parametrize("dst", ["f8E4M3FN", "f8E5M2"])
def test_fp8_satfinite(dst):
    dt = er.FLOAT_TYPES[dst]
    codes = np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)
    grid = np.unique(codes[np.isfinite(codes)])
    big = grid.max()
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.uniform(-2 * big, 2 * big, 3000), (grid[1:] + grid[:-1]) / 2, grid,
                        [np.inf, -np.inf, 1e30, -1e30, big * 1.03, -big * 1.03]]).astype(np.float32)
    got = er.cast(I.point(x, "f32"), dst).lo

    def sat(v):
        v = min(max(float(v), -big), big)
        cands = grid[np.argsort(np.abs(grid - v), kind="stable")[:2]]
        d0, d1 = abs(cands[0] - v), abs(cands[1] - v)
        if d0 != d1:
            return cands[0]
        even = [c for c in cands if (np.array(c).astype(dt).view(np.uint8) & 1) == 0]
        return even[0]

    want = np.array([sat(v) for v in x])
    assert np.array_equal(got, want)
    nan = er.cast(I.point(np.array([np.nan], np.float32), "f32"), dst)
    assert nan.nan[0] and nan.empty[0]


def test_sitofp():
    rng = np.random.default_rng(2)
    v = np.concatenate([rng.integers(-(2**31), 2**31, 5000), [2**31 - 1, -(2**31), 16777217, -16777217, 0]])
    iv = er.apply_op("arith.sitofp", [I.point(v, "i32")], "f32")
    assert np.array_equal(iv.lo, v.astype(np.int32).astype(np.float32).astype(np.float64))
    rz = er.cast(I.point(np.array([16777217, -16777219]), "i32"), "f32", "rz")
    assert list(rz.lo) == [16777216.0, -16777218.0]


@pytest.mark.parametrize("name", ["arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"])
def test_min_max_enumerated(name):
    rng = np.random.default_rng(4)
    a, pa = _enumerate("f32", 2000, rng)
    b, pb = _enumerate("f32", 2000, rng)
    # NaN in some intervals (as a possibility)
    nan_a = rng.random(2000) < 0.1
    a = I("f32", a.lo, a.hi, nan_a)
    pa = np.concatenate([pa, np.where(nan_a[:, None], np.nan, pa[:, :1])], axis=1).astype(np.float32)
    iv = er.apply_op(name, [a, b], "f32")
    x, y = pa[:, :, None], pb[:, None, :]
    if name == "arith.maximumf":
        res = np.maximum(x, y)
    elif name == "arith.minimumf":
        res = np.minimum(x, y)
    elif name == "arith.maxnumf":
        res = np.fmax(x, y)
    else:
        res = np.fmin(x, y)
    _assert_holds(iv, res, True, name)


def test_neg_abs_enumerated():
    rng = np.random.default_rng(6)
    a, pa = _enumerate("f32", 3000, rng)
    _assert_holds(er.apply_op("arith.negf", [a], "f32"), -pa, True, "negf")
    _assert_holds(er.apply_op("math.absf", [a], "f32"), np.abs(pa), True, "absf")


@pytest.mark.parametrize("pred", er.CMPF_PREDICATES)
def test_cmpf_and_select(pred):
    rng = np.random.default_rng(8)
    n = 2000
    a, pa = _enumerate("f32", n, rng, 4)
    b, pb = _enumerate("f32", n, rng, 4)
    # intervals overlapping often: b starts at a's start half the time
    same = rng.random(n) < 0.5
    b = I("f32", np.where(same, a.lo, b.lo), np.where(same, a.hi, b.hi), b.nan)
    pb = np.where(same[:, None], pa, pb)
    nan_b = rng.random(n) < 0.1
    b = I("f32", b.lo, b.hi, nan_b)
    pb = np.concatenate([pb, np.where(nan_b[:, None], np.nan, pb[:, :1])], axis=1).astype(np.float32)
    cond = er.apply_op("arith.cmpf", [a, b], "i1", predicate=pred)
    x, y = pa[:, :, None].astype(np.float64), pb[:, None, :].astype(np.float64)
    with np.errstate(invalid="ignore"):
        unordered = np.isnan(x) | np.isnan(y)
        base = {"eq": x == y, "gt": x > y, "ge": x >= y, "lt": x < y, "le": x <= y, "ne": (x != y) & ~unordered}
        if pred in ("true", "false"):
            outcome = np.full(np.broadcast(x, y).shape, pred == "true")
        elif pred == "ord":
            outcome = ~unordered
        elif pred == "uno":
            outcome = unordered
        elif pred[0] == "o":
            outcome = base[pred[1:]] & ~unordered
        else:
            outcome = base[pred[1:]] | unordered
    out = outcome.reshape(n, -1)
    assert np.all(cond.lo[:, None] <= out) and np.all(out <= cond.hi[:, None]), pred
    assert np.array_equal(cond.lo == 0, (~out).any(1)) and np.array_equal(cond.hi == 1, out.any(1)), pred
    # select(cond, a, b): every element's possible choices
    sel = er.select(cond, a, b)
    choices = np.where(outcome, x, y).reshape(n, -1)
    _assert_holds(sel, choices, False, f"select {pred}")


def _bound_zero(monkeypatch):
    monkeypatch.setattr(er, "implementation_bound", lambda op, x: np.zeros(np.shape(x)))


@pytest.mark.parametrize("name", ["math.exp", "math.exp2", "math.log", "math.log2", "math.tanh", "math.erf",
                                  "math.sqrt", "math.rsqrt"])
@pytest.mark.parametrize("t", ["f32", "f16"])
def test_transcendentals_contain_bounded_results(name, t):
    rng = np.random.default_rng(12)
    a, pa = _enumerate(t, 800, rng)
    if name in ("math.exp", "math.exp2"):  # arguments where the function is finite, mostly
        a, pa = I(t, np.clip(a.lo, -60, 60), np.clip(a.hi, -60, 60), a.nan), np.clip(pa, -60, 60)
    iv = er.apply_op(name, [a], t)
    f = {"math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
         "math.tanh": np.tanh, "math.erf": np.vectorize(math.erf), "math.sqrt": np.sqrt,
         "math.rsqrt": lambda v: 1 / np.sqrt(v)}[name]
    x = pa.astype(np.float64)
    with np.errstate(all="ignore"):
        y = f(x)
        bound = er.implementation_bound(name, np.nan_to_num(x))
        bound = np.where(np.isfinite(y), bound, 0)
        for extreme in (y - bound, y + bound, y):
            r = np.where(np.isinf(bound), np.nan, extreme)
            rounded = er.round_to(r.reshape(-1), t).reshape(r.shape)
            finite = ~np.isnan(rounded)
            ok = np.where(finite, (iv.lo[:, None] <= rounded) & (rounded <= iv.hi[:, None]), True)
            assert ok.all(), (name, t, x[~ok.all(1)][0], iv.lo[~ok.all(1)][0], iv.hi[~ok.all(1)][0])
        nan = np.isnan(y)
        assert np.all(iv.nan[nan.any(1)]), name


def test_transcendentals_exact_without_bound(monkeypatch):
    """With a zero implementation bound, point arguments give the correctly rounded f32 (sqrt:
    exactly IEEE's; the others within one ulp of float64's value)."""
    _bound_zero(monkeypatch)
    rng = np.random.default_rng(13)
    x = np.abs(_start_values("f32", 3000, rng))
    iv = er.apply_op("math.sqrt", [I.point(x, "f32")], "f32")
    assert np.array_equal(iv.lo, np.sqrt(x).astype(np.float64)) and np.array_equal(iv.hi, iv.lo)
    for name, f in (("math.exp", np.exp), ("math.tanh", np.tanh), ("math.log", np.log)):
        with np.errstate(all="ignore"):
            want = f(x.astype(np.float64)).astype(np.float32).astype(np.float64)
        iv = er.apply_op(name, [I.point(x, "f32")], "f32")
        fin = np.isfinite(want)
        assert np.all((iv.lo[fin] <= want[fin]) & (want[fin] <= iv.hi[fin])), name
        assert np.all(np.nextafter(iv.lo[fin].astype(np.float32), np.float32(np.inf)) >= iv.hi[fin].astype(np.float32)), name


def test_uitofp_fptosi():
    v = np.array([-1, 5, -(2**31)])
    u = er.apply_op("arith.uitofp", [I.point(v, "i32")], "f32")
    assert list(u.lo) == [2.0**32, 5.0, 2.0**31]
    x = I.point(np.array([2.7, -2.7, 3e9, -3e9, np.nan], np.float32), "f32")
    r = er.apply_op("arith.fptosi", [x], "i32")
    assert list(r.lo[:2]) == [2, -2] and list(r.hi[:2]) == [2, -2]
    assert (r.lo[2], r.hi[3]) == (-(2**31), 2**31 - 1)  # poison: anything
    assert (r.lo[4], r.hi[4]) == (-(2**31), 2**31 - 1)
    # an enumerated range: every truncation inside
    rng = np.random.default_rng(1)
    a, pa = _enumerate("f32", 2000, rng)
    r = er.apply_op("arith.fptosi", [a], "i32")
    with np.errstate(invalid="ignore"):
        t = np.trunc(pa.astype(np.float64))
    inside = np.isfinite(t) & (np.abs(t) < 2**31)
    assert np.all(~inside | ((r.lo[:, None] <= t) & (t <= r.hi[:, None])))


def test_integer_ops_wrap():
    a = I.point(np.array([2**31 - 1, -(2**31), 5, -7]), "i32")
    b = I.point(np.array([1, -1, -3, 3]), "i32")
    assert list(er.apply_op("arith.addi", [a, b], "i32").lo) == [-(2**31), 2**31 - 1, 2, -4]
    assert list(er.apply_op("arith.muli", [a, b], "i32").lo) == [2**31 - 1, -(2**31), -15, -21]
    assert list(er.apply_op("arith.maxsi", [a, b], "i32").lo) == [2**31 - 1, -1, 5, 3]
    c = er.apply_op("arith.cmpi", [a, b], "i1", predicate="ult")
    assert list(c.lo) == [0, 1, 1, 0] and list(c.hi) == list(c.lo)
    wide = I("i32", np.array([0]), np.array([2**31 - 1]), np.array([False]))
    s = er.apply_op("arith.addi", [wide, I.point([1], "i32")], "i32")
    assert (s.lo[0], s.hi[0]) == (-(2**31), 2**31 - 1)


# --- adversarial values --------------------------------------------------------------------


def test_nan_and_infinities():
    nan_only = I.point([np.nan], "f32")
    one = I.point([1.0], "f32")
    inf, minf = I.point([np.inf], "f32"), I.point([-np.inf], "f32")
    r = er.apply_op("arith.addf", [nan_only, one], "f32")
    assert r.empty[0] and r.nan[0]
    r = er.apply_op("arith.addf", [inf, minf], "f32")
    assert r.empty[0] and r.nan[0]
    r = er.apply_op("arith.mulf", [I("f32", np.array([-1.0]), np.array([1.0]), np.array([False])), inf], "f32")
    assert r.nan[0] and r.lo[0] == -np.inf and r.hi[0] == np.inf  # 0 * inf inside
    r = er.apply_op("arith.divf", [one, I("f32", np.array([-1.0]), np.array([2.0]), np.array([False]))], "f32")
    assert (r.lo[0], r.hi[0], bool(r.nan[0])) == (-np.inf, np.inf, False)
    r = er.apply_op("arith.divf", [I.point([0.0], "f32"), I.point([0.0], "f32")], "f32")
    assert r.nan[0]
    r = er.apply_op("arith.maximumf", [nan_only, one], "f32")
    assert r.empty[0]
    r = er.apply_op("arith.maxnumf", [nan_only, one], "f32")
    assert r.lo[0] == r.hi[0] == 1 and not r.nan[0]
    r = er.apply_op("math.exp", [inf], "f32")
    assert r.lo[0] == r.hi[0] == np.inf
    r = er.apply_op("math.exp", [minf], "f32")
    assert r.lo[0] <= 0 <= r.hi[0] and r.hi[0] < 1e-30
    r = er.apply_op("math.log", [I.point([-1.0], "f32")], "f32")
    assert r.empty[0] and r.nan[0]
    r = er.apply_op("math.log", [I.point([0.0], "f32")], "f32")
    assert r.lo[0] == r.hi[0] == -np.inf
    r = er.apply_op("math.tanh", [inf], "f32")
    assert r.lo[0] <= 1 <= r.hi[0] and r.hi[0] - r.lo[0] < 0.01


def test_subnormals_kept():
    s = I.point([2.0**-149], "f32")
    r = er.apply_op("arith.addf", [s, s], "f32")
    assert r.lo[0] == r.hi[0] == 2.0**-148
    r = er.apply_op("arith.mulf", [I.point([2.0**-70], "f32"), I.point([2.0**-70], "f32")], "f32")
    assert r.lo[0] == r.hi[0] == 2.0**-140
    r = er.cast(I.point([2.0**-20], "f32"), "f16")
    assert r.lo[0] == 2.0**-20  # an f16 subnormal
    r = er.cast(I.point([2.0**-26], "f32"), "f16")
    assert r.lo[0] == 0.0  # below half the least subnormal... to even: 0


def test_cancellation():
    x = I("f32", np.array([1.0]), np.array([1.0 + 2**-23]), np.array([False]))
    r = er.apply_op("arith.subf", [x, x], "f32")
    assert (r.lo[0], r.hi[0]) == (-(2.0**-23), 2.0**-23)
    # a wide accumulator interval around 0 keeps both signs through relu
    acc = I.around(np.array([1e-6]), np.array([1e-5]), "f32")
    relu = er.apply_op("arith.maximumf", [acc, I.point([0.0], "f32")], "f32")
    assert relu.lo[0] == 0 and relu.hi[0] > 1e-5


def test_overflow_and_saturation():
    big = I.point([70000.0, -70000.0, 65519.0, 65520.0], "f32")
    assert list(er.cast(big, "f16").lo) == [np.inf, -np.inf, 65504.0, np.inf]
    assert list(er.cast(big, "f16", "rz").lo) == [65504.0, -65504.0, 65504.0, 65504.0]
    e4 = er.cast(I.point([np.inf, -np.inf, 500.0, 1e-9], "f32"), "f8E4M3FN")
    assert list(e4.lo) == [448.0, -448.0, 448.0, 0.0]
    e5 = er.cast(I.point([np.inf, 1e6], "f32"), "f8E5M2")
    assert list(e5.lo) == [57344.0, 57344.0]


def test_around_and_check():
    iv = I.around(np.array([1.0, np.nan, np.inf, 3.0]), np.array([0.25, 0.5, 1.0, 0.0]), "f32")
    assert list(iv.lo[[0, 2, 3]]) == [0.75, np.inf, 3.0] and iv.empty[1] and iv.nan[1]
    got = np.array([1.2, np.nan, np.inf, 3.0], np.float32)
    assert er.check(got, iv).ok
    bad = er.check(np.array([1.3, 0.0, np.inf, 3.0], np.float32), iv)
    assert not bad.ok and bad.n_bad == 2 and bad.first_bad_index == (0,)
    assert "got 1.2999999523162842, want [0.75, 1.25]" in bad.detail
    assert not er.check(np.array([1.0, np.nan, 1e38, 3.0], np.float32), iv).ok  # inf is exact
    ints = I.around(np.array([5, -3]), 0, "si32")
    assert er.check(np.array([5, -3], np.int32), ints).ok and not er.check(np.array([5, -2], np.int32), ints).ok


# --- whole epilogues in tile IR ------------------------------------------------------------

KERNEL = """
func.func @k(%a: memref<{m}x8xf16>, %b: memref<8x{n}xf16>, %bias: memref<{n}xf16>, %s: memref<{m}xf32>,
             %r: memref<{m}x{n}xf32>, %d: memref<{m}x{n}xf16>, %pre: memref<{m}x{n}xf32>,
             %q: memref<{m}x{n}xf8E4M3FN>, %g: memref<{m}x{n}xf32>) {{
  %ta = tile.load %a[0, 0] : memref<{m}x8xf16> -> !tile.tile<{m}x8xf16>
  %tb = tile.load %b[0, 0] : memref<8x{n}xf16> -> !tile.tile<8x{n}xf16>
  %z = tile.constant 0.0 : !tile.tile<{m}x{n}xf32>
  %acc = tile.mma %ta, %tb, %z : !tile.tile<{m}x8xf16>, !tile.tile<8x{n}xf16>, !tile.tile<{m}x{n}xf32> -> !tile.tile<{m}x{n}xf32>
  %bb = tile.broadcast %bias[0] dims [1] : memref<{n}xf16> -> !tile.tile<{m}x{n}xf16>
  %sb = tile.broadcast %s[0] dims [0] : memref<{m}xf32> -> !tile.tile<{m}x{n}xf32>
  %tr = tile.load %r[0, 0] : memref<{m}x{n}xf32> -> !tile.tile<{m}x{n}xf32>
  %two = tile.constant 2.0 : !tile.tile<{m}x{n}xf32>
  %y, %p = tile.map %acc, %bb, %sb, %tr, %two : !tile.tile<{m}x{n}xf32>, !tile.tile<{m}x{n}xf16>, !tile.tile<{m}x{n}xf32>, !tile.tile<{m}x{n}xf32>, !tile.tile<{m}x{n}xf32> -> !tile.tile<{m}x{n}xf16>, !tile.tile<{m}x{n}xf32> {{
  ^bb0(%x: f32, %bv: f16, %sv: f32, %rv: f32, %tw: f32):
    %bf = arith.extf %bv : f16 to f32
    %xs = arith.mulf %x, %sv : f32
    %s1 = arith.addf %xs, %bf : f32
    %s2 = math.fma %s1, %tw, %rv : f32
    %zero = arith.constant 0.0 : f32
    %neg = arith.cmpf olt, %s2, %zero : f32
    %half = arith.constant 0.5 : f32
    %leak = arith.mulf %s2, %half : f32
    %r1 = arith.select %neg, %leak, %s2 : f32
    %o = arith.truncf %r1 : f32 to f16
    arith.constant 1.0 : f32
    tile.yield %o, %s2 : f16, f32
  }}
  %c = tile.cast %p : !tile.tile<{m}x{n}xf32> -> !tile.tile<{m}x{n}xf8E4M3FN>
  %gl = tile.map %p : !tile.tile<{m}x{n}xf32> -> !tile.tile<{m}x{n}xf32> {{
  ^bb0(%v: f32):
    %e = math.erf %v : f32
    %one = arith.constant 1.0 : f32
    %t = arith.addf %one, %e : f32
    %h = arith.constant 0.5 : f32
    %hv = arith.mulf %h, %v : f32
    %gv = arith.mulf %hv, %t : f32
    tile.yield %gv : f32
  }}
  tile.store %y, %d[0, 0] : !tile.tile<{m}x{n}xf16>, memref<{m}x{n}xf16>
  tile.store %p, %pre[0, 0] : !tile.tile<{m}x{n}xf32>, memref<{m}x{n}xf32>
  tile.store %c, %q[0, 0] : !tile.tile<{m}x{n}xf8E4M3FN>, memref<{m}x{n}xf8E4M3FN>
  tile.store %gl, %g[0, 0] : !tile.tile<{m}x{n}xf32>, memref<{m}x{n}xf32>
  func.return
}}
"""


def _read(m: int, n: int):
    from tilemma.compiler.driver.pipeline import parse
    from tilemma.dialects import tile
    from tilemma.passes.tile.gemm_kernel import read_kernel
    from xdsl.dialects import func

    module, _ = parse(KERNEL.format(m=m, n=n), "k.mlir")
    kernel = next(op for op in module.body.ops if isinstance(op, func.FuncOp))
    mma = next(op for op in kernel.walk() if isinstance(op, tile.MmaOp))
    return kernel, mma


def _direct(acc, bias, s, r):
    """The first epilogue computed directly with NumPy f32 (fma exactly: float64 product and sum
    of f32 values is exact when they are all of moderate size, then one rounding)."""
    bf = bias.astype(np.float32)
    s1 = acc * s[:, None] + bf[None, :]
    s2 = (s1.astype(np.float64) * 2 + r.astype(np.float64)).astype(np.float32)
    r1 = np.where(s2 < 0, s2 * np.float32(0.5), s2)
    return r1.astype(np.float16), s2


def test_tile_ir_points_are_exact():
    from tilemma.passes.tile.gemm_kernel import read_kernel

    m, n = 19, 23
    kernel, mma = _read(m, n)
    g = read_kernel(kernel)
    rng = np.random.default_rng(1)
    acc = (rng.standard_normal((1, m, n)) * 4).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float16)
    s = rng.standard_normal(m).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    inputs = {}
    for op, mem in g.inputs:
        name = op.operands[0].name_hint
        inputs[op] = {"bias": bias[None, None, :], "s": s[None, :, None], "r": r[None]}[name]
    env = er.evaluate_epilogue(g.epilogue, mma.results[0], I.point(acc, "f32"), inputs)
    (ys, ymem), (ps, _), (qs, _), (gs, _) = g.outputs
    want_y, want_p = _direct(acc[0], bias, s, r)
    y, p = env[ys.value], env[ps.value]
    assert y.type == "f16" and np.array_equal(y.lo[0], want_y.astype(np.float64)) and np.array_equal(y.hi, y.lo)
    assert np.array_equal(p.lo[0], want_p.astype(np.float64)) and np.array_equal(p.hi, p.lo)
    q = env[qs.value]
    assert np.array_equal(q.lo[0], np.clip(want_p, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64))
    gl = env[gs.value]
    exact = 0.5 * want_p.astype(np.float64) * (1 + np.vectorize(math.erf)(want_p.astype(np.float64)))
    assert np.all((gl.lo[0] <= exact + 1e-6 * np.abs(exact)) & (exact - 1e-6 * np.abs(exact) <= gl.hi[0]))
    assert np.all(gl.hi - gl.lo <= 2.0**-15 * np.maximum(1, np.abs(want_p)))


def test_tile_ir_intervals_are_sound_and_fast():
    """An accumulator interval: every value in it, run through the direct computation, lands
    inside the outputs' intervals; 256 x 256 takes well under a few seconds."""
    from tilemma.passes.tile.gemm_kernel import read_kernel

    m, n = 256, 256
    kernel, mma = _read(m, n)
    g = read_kernel(kernel)
    rng = np.random.default_rng(2)
    want = (rng.standard_normal((1, m, n)) * 4).astype(np.float32)
    bound = np.abs(want) * 2.0**-12 + 2.0**-20
    bias = rng.standard_normal(n).astype(np.float16)
    s = rng.standard_normal(m).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    inputs = {op: {"bias": bias[None, None, :], "s": s[None, :, None], "r": r[None]}[op.operands[0].name_hint]
              for op, _ in g.inputs}
    start = time.perf_counter()
    env = er.evaluate_epilogue(g.epilogue, mma.results[0], I.around(want, bound, "f32"), inputs)
    assert time.perf_counter() - start < 10
    (ys, _), (ps, _), _, _ = g.outputs
    for frac in (-1.0, -0.5, 0.0, 0.37, 1.0):
        acc = (want.astype(np.float64) + frac * bound).astype(np.float32)
        acc = np.clip(acc, env[mma.results[0]].lo, env[mma.results[0]].hi).astype(np.float32)
        y, p = _direct(acc[0], bias, s, r)
        assert er.check(y[None], env[ys.value]).ok
        assert er.check(p[None], env[ps.value]).ok
    # a wrong element is caught
    y, _ = _direct(want[0], bias, s, r)
    y[3, 5] = -y[3, 5] if y[3, 5] != 0 else np.float16(1)
    assert er.check(y[None], env[ys.value]).n_bad == 1


def test_unknown_op_is_named():
    with pytest.raises(NotImplementedError, match="math.sin"):
        er.apply_op("math.sin", [I.point([1.0], "f32")], "f32")
