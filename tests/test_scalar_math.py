"""`passes/warp_to_ptx/scalar_math`: the PTX sequences for MLIR's math ops run in the emulator give
exactly `model`'s bits, stay within `bound` of the exact function on sweeps, and erf's own
design holds: within ERF_MODEL_ULPS ulp of erf on a sweep of every 64th f32 of [2**-20, 8] plus
every 16th of [0.5, 4.5] (the emulator's model; the GPU's, with its own ex2, is checked against
`bound` by tests/gpu/test_epilogue_ptx_gpu.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilemma.compiler.verify.emulator import emulate
from tilemma.passes.warp_to_ptx import scalar_math as S
from tools import epilogue_probe as EP

OPS = list(S.MATH)


def emulated(op: str, x_words: np.ndarray) -> np.ndarray:
    p = EP.Probe(op, ("f32",), "f32", EP.sequence(op), "math", lambda rng: [x_words])
    text, args, n, grid = EP.prepare(p)
    return emulate(text, EP.ENTRY, (grid, 1, 1), (EP.BLOCK, 1, 1), args)[-1][:n]


def inputs(op: str, n: int = 1 << 14) -> np.ndarray:
    rng = np.random.default_rng(OPS.index(op))
    [x] = next(p for p in EP.PROBES if p.name == op).inputs(rng)
    return np.concatenate([EP.F32_SPECIAL, x if x.size <= n else rng.choice(x, n, replace=False)])


@pytest.mark.parametrize("op", OPS)
def test_emulated_sequence_is_the_model(op):
    x = inputs(op)
    got = emulated(op, x)
    want = S.model(op, x.view(np.float32)).view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(x[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def within(op: str, x32: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Which results satisfy `bound`: within it, or exactly f(x) where the bound is 0."""
    f, b = S.exact(op, x32), S.bound(op, x32)
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.abs(g - f) <= b
        exact = (g == f) | (np.isnan(g) & np.isnan(f))
    return np.where(b == 0, exact, ok | np.isinf(b))


@pytest.mark.parametrize("op", OPS)
def test_model_is_within_the_bound(op):
    x = inputs(op, 1 << 17).view(np.float32)
    ok = within(op, x, S.model(op, x))
    assert ok.all(), [(float(v), float(S.model(op, np.array([v]))[0]), float(S.exact(op, np.array([v]))[0]))
                      for v in x[~ok][:5]]


def test_specials_are_exact():
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -1.0], np.float32)
    want = {
        "math.exp": [0.0, np.inf, np.nan, 1.0, 1.0, math.exp(-1)],
        "math.exp2": [0.0, np.inf, np.nan, 1.0, 1.0, 0.5],
        "math.log": [np.nan, np.inf, np.nan, -np.inf, -np.inf, np.nan],
        "math.log2": [np.nan, np.inf, np.nan, -np.inf, -np.inf, np.nan],
        "math.tanh": [-1.0, 1.0, np.nan, -0.0, 0.0, math.tanh(-1)],
        "math.erf": [-1.0, 1.0, np.nan, -0.0, 0.0, math.erf(-1)],
        "math.sqrt": [np.nan, np.inf, np.nan, -0.0, 0.0, np.nan],
        "math.rsqrt": [np.nan, 0.0, np.nan, -np.inf, np.inf, np.nan],
    }
    for op in OPS:
        got = emulated(op, x.view(np.uint32)).view(np.float32)
        w = np.array(want[op], np.float32)
        assert np.array_equal(np.isnan(got), np.isnan(w)), op
        fin = ~np.isnan(w)
        assert np.allclose(got[fin], w[fin], rtol=1e-6, atol=0), (op, got)
        assert np.array_equal(np.signbit(got[fin][:5]), np.signbit(w[fin][:5])), op  # signed zeros/infinities
        assert (got.view(np.uint32)[np.isnan(got)] == 0x7FFFFFFF).all(), op  # the canonical NaN


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in ulps of the f32 nearest exact."""
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


def test_erf_sweep():
    """erf's design: every 256th f32 of [2**-20, 8], every 32nd of [0.5, 4.5] (where the two
    branches and the ex2 tail meet), and random values; the sequence is odd, so x >= 0 suffices
    (checked too). Below 2**-20 erf(x) = x (1 + c0) to f32 precision: a sample checks it. (The
    PTX sequence itself: tools/epilogue_probe.py's erf rows, in the emulator and on the GPU.)"""
    x = np.concatenate([EP.sweep(2.0**-20, 8.0, 256), EP.sweep(0.5, 4.5, 32),
                        np.random.default_rng(1).integers(0, 0x41000000, 1 << 18, dtype=np.uint32)]).view(np.float32)
    got = S.model("math.erf", x)
    exact = S.exact("math.erf", x)
    err = _ulps(got, exact)
    worst = float(err.max())
    assert worst <= S.ERF_MODEL_ULPS, (worst, float(x[np.argmax(err)]))
    small = x < S.ERF_SPLIT
    assert err[small].max() <= 1.05  # the polynomial branch
    assert np.all(np.abs(got - exact) <= S.bound("math.erf", x))
    assert np.abs(got.astype(np.float64) - exact).max() < 1.2e-7  # absolute, everywhere
    neg = S.model("math.erf", -x[::7])
    assert np.array_equal(neg.view(np.uint32), got[::7].view(np.uint32) ^ np.uint32(0x80000000))
    tiny = np.float32(2.0) ** -np.arange(20, 150, dtype=np.float32)
    assert np.all(_ulps(S.model("math.erf", tiny), S.exact("math.erf", tiny)) <= 1.0)


def test_exp_bound_is_tight_where_the_argument_rounding_dominates():
    """exp's bound grows with |x| because x log2(e) is rounded before ex2: near the overflow
    threshold the model (correctly rounded ex2) really comes within a few tenths of it."""
    x = np.random.default_rng(2).uniform(60.0, 88.0, 1 << 16).astype(np.float32)
    err = np.abs(S.model("math.exp", x).astype(np.float64) - S.exact("math.exp", x))
    ratio = err / S.bound("math.exp", x)
    assert ratio.max() <= 1.0 and ratio.max() > 0.3
    assert (_ulps(S.model("math.exp", x), S.exact("math.exp", x)).max()) > 5  # far from 0.5 ulp


def test_instruction_counts_and_tables():
    for op, emit in S.MATH.items():
        e = EP.ProbeEmitter()
        r = emit(e, "%f99")
        assert r.startswith("%f") and r != "%f99"
        opcodes = [o.opcode.data for o in e.ops]
        if op == "math.erf":
            assert len(opcodes) == 20 and opcodes.count("ex2.approx.ftz.f32") == 1
        if op == "math.tanh":
            assert opcodes == ["tanh.approx.f32"] and S.REQUIRES[op] == 75
        assert op.split(".")[1] in S.BOUNDS_DOC
    assert set(S.REQUIRES) == set(S.MATH)
    with pytest.raises(KeyError, match="no sequence"):
        S.bound("math.sin", np.zeros(1, np.float32))
