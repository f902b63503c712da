"""mma_arith against independent scalar references written here with exact rationals: the fused
sum of the papers (per element, from its definition) and a chain of IEEE fmas in every rounding
mode. Every element compared, on random data over the types' whole range (subnormals included)
and on targeted cases (carries, signed zeros, Inf, NaN, overflow)."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.mma_arith import MODELS, fma_chain, fused_mma, model_for

_TYPES = {"f16": (np.float16, np.uint16, -14), "bf16": (ml_dtypes.bfloat16, np.uint16, -126)}


def _random(t: str, shape, rng, finite=True) -> np.ndarray:
    dt, ut, _ = _TYPES[t]
    bits = rng.integers(0, 1 << 16, shape, dtype=np.uint64).astype(ut)
    with np.errstate(invalid="ignore"):
        v = bits.view(dt).astype(np.float64)
    return np.where(np.isfinite(v), v, 0.0) if finite else v


def _exp(x: Fraction, emin: int) -> int:
    if x == 0:
        return -126
    return max(math.frexp(float(abs(x)))[1] - 1, emin) if abs(x) >= Fraction(2) ** -1000 else emin


def _fused_ref(a, b, c: float, frac: int, emin: int, out: str) -> float:
    """The published algorithm for one output, from its definition, in rationals."""
    terms = [(Fraction(c), _exp(Fraction(c), -126 if out == "f32" else -14))]
    terms += [(Fraction(x) * Fraction(y), _exp(Fraction(x), emin) + _exp(Fraction(y), emin)) for x, y in zip(a, b)]
    eta = max(e for _, e in terms)
    total = sum(math.trunc(v * Fraction(2) ** (frac - eta)) for v, _ in terms)
    value = Fraction(total) * Fraction(2) ** (eta - frac)
    if value == 0:
        return 0.0
    if out == "f32":
        e = max(math.frexp(float(abs(value)))[1] - 1, -126)
        q = math.trunc(value / Fraction(2) ** (e - 23)) * Fraction(2) ** (e - 23)
        return float(np.float32(float(q))) if abs(q) < 2**128 else math.copysign(math.inf, q)
    e = max(math.frexp(float(abs(value)))[1] - 1, -14)
    q = round(value / Fraction(2) ** (e - 10)) * Fraction(2) ** (e - 10)  # ties to even
    if abs(q) >= 65520:  # rounds past the largest f16
        return math.copysign(math.inf, q)
    return float(np.float16(float(q))) if q != 0 else 0.0


@pytest.mark.parametrize("arch,t,out", [("sm_90", "f16", "f32"), ("sm_90", "bf16", "f32"), ("sm_90", "f16", "f16"),
                                        ("sm_80", "f16", "f32"), ("sm_70", "f16", "f32")])
def test_fused_sum_matches_the_definition(arch, t, out):
    rng = np.random.default_rng(11)
    model = model_for(arch, t)
    k = 16
    for scale in (0, 1):  # whole range (subnormals included), then narrow: carries inside the group
        a, b = _random(t, (2, 8, k), rng), _random(t, (2, k, 8), rng)
        if scale:
            a, b = np.clip(a, -4, 4), np.clip(b, -4, 4)
        c = rng.normal(0, 4, (2, 8, 8)) if out == "f32" else _random("f16", (2, 8, 8), rng)
        c = c.astype(np.float32 if out == "f32" else np.float16).astype(np.float64)
        got = fused_mma(a, b, c, model, t, t, out).astype(np.float64)
        emin = _TYPES[t][2]
        for w, i, j in np.ndindex(c.shape):
            want = c[w, i, j]
            for g in range(0, k, model.group):  # groups chain through the rounded accumulator
                want = _fused_ref(a[w, i, g:g + model.group], b[w, g:g + model.group, j], want, model.frac_bits, emin, out)
            assert got[w, i, j] == want and math.copysign(1, got[w, i, j]) == math.copysign(1, want), (w, i, j)


def test_fused_sum_special_values():
    model = model_for("sm_90", "f16")
    a = np.array([[[1.0, np.inf, 0.0], [np.inf, -np.inf, 0.0], [np.nan, 1.0, 0.0], [-0.0, -0.0, 0.0],
                   [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]])
    b = np.array([[[1.0], [1.0], [0.0]]])
    c = np.array([[[2.0], [0.0], [0.0], [-0.0], [-(2.0**25)], [-1.0]]])
    d = fused_mma(a, b, c, model, "f16", "f16", "f32")
    bits = d.view(np.uint32).ravel().tolist()
    assert bits[0] == 0x7F800000  # Inf survives
    assert bits[1] == 0x7FFFFFFF and bits[2] == 0x7FFFFFFF  # Inf - Inf, NaN: the canonical NaN
    assert bits[3] == 0  # -0 + -0 = +0: a zero sum is +0
    assert d[0, 4, 0] == -(2.0**25) + 2  # -2**25 + 1 is not an f32: truncated toward zero
    assert bits[5] == 0  # 1 - 1 = +0
    h = fused_mma(a[:, 2:3], b, c[:, 2:3].astype(np.float16).astype(np.float64), model, "f16", "f16", "f16")
    assert h.view(np.uint16).ravel().tolist() == [0x7FFF]


def test_model_table():
    measured = {k for k, m in MODELS.items() if m.measured}
    assert measured == {k for k in MODELS if k[0] == "sm_90"}
    assert model_for("sm_120a", "e2m1", "mxf4nvf4").frac_bits == 35
    with pytest.raises(ValueError, match="no tensor-core arithmetic model for tf32 on sm_75"):
        model_for("sm_75", "tf32")


# --------------------------------------------------------------------------------------------- f64
_MAX = np.finfo(np.float64).max


def _round(x: Fraction, mode: str) -> float:
    try:
        n = float(x)
    except OverflowError:
        n = math.inf if x > 0 else -math.inf
    if math.isinf(n) or Fraction(n) != x:
        if math.isinf(n):
            lo, hi = (_MAX, math.inf) if x > 0 else (-math.inf, -_MAX)
        elif Fraction(n) < x:
            lo, hi = n, math.nextafter(n, math.inf)
        else:
            lo, hi = math.nextafter(n, -math.inf), n
        n = {"rn": n, "rz": lo if x > 0 else hi, "rm": lo, "rp": hi}[mode]
    return n


def _fma_ref(x: float, y: float, z: float, mode: str) -> float:
    if math.isinf(z):
        return z
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:
        p_neg = math.copysign(1, x) * math.copysign(1, y) < 0
        if (x == 0 or y == 0) and z == 0 and p_neg == (math.copysign(1, z) < 0):
            return -0.0 if p_neg else 0.0
        return -0.0 if mode == "rm" else 0.0
    r = _round(exact, mode)
    return r if r != 0 else math.copysign(0.0, exact)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_fma_chain_matches_sequential_ieee_fmas(mode):
    rng = np.random.default_rng(5)
    shape = (3, 6, 4)
    pieces = []
    for lo, hi in ((-30, 30), (-1074, 1023), (-1074, -1000), (900, 1023)):
        m = rng.uniform(1, 2, shape) * rng.choice([-1.0, 1.0], shape)
        pieces.append(np.ldexp(m, rng.integers(lo, hi, shape)))
    a = np.concatenate(pieces)
    a[rng.random(a.shape) < 0.1] = 0.0
    a[rng.random(a.shape) < 0.05] = -0.0
    b = np.swapaxes(a[::-1], -1, -2).copy()
    b[1] = -np.swapaxes(a[1], -1, -2)  # exact cancellations
    c = a[..., :, :1] * 0.5 + np.zeros((1, 1, 6))
    c[0, 0, :] = -0.0
    got = fma_chain(a, b, c, mode)
    for w, i, j in np.ndindex(got.shape):
        want = float(c[w, i, j])
        for k in range(a.shape[-1]):
            want = _fma_ref(float(a[w, i, k]), float(b[w, k, j]), want, mode)
        g = float(got[w, i, j])
        assert g == want and math.copysign(1, g) == math.copysign(1, want), (w, i, j, g, want)


def test_fma_chain_nan_rules():
    """Measured on the H100: an operand's NaN, quieted, b first, then the accumulator, then a."""
    q = lambda bits: np.array([bits], np.uint64).view(np.float64)[0]  # noqa: E731
    na, nb, nc = q(0xFFF1000000000001), q(0x7FF2000000000002), q(0x7FF4000000000003)
    d = fma_chain(np.array([[[na]]]), np.array([[[nb]]]), np.array([[[nc]]]))
    assert int(d.view(np.uint64)[0, 0, 0]) == 0x7FFA000000000002
    d = fma_chain(np.array([[[na]]]), np.array([[[1.0]]]), np.array([[[nc]]]))
    assert int(d.view(np.uint64)[0, 0, 0]) == 0x7FFC000000000003
    d = fma_chain(np.array([[[np.inf]]]), np.array([[[0.0]]]), np.array([[[1.0]]]))
    assert int(d.view(np.uint64)[0, 0, 0]) == int(mma_arith.DEFAULT_NAN)


# ------------------------------------------------------------------------- runner: the GPU's twin
def test_runner_demands_the_emulators_bits_where_proven(monkeypatch):
    """`runner._gpu_twin_differs` on outputs standing for the GPU's: the emulator's own (agree),
    one bit flipped (caught, located), and a GPU whose arithmetic is unproven (not judged)."""
    from tilemma.compiler.runtime import cuda_runtime
    from tilemma.compiler.verify import emulator
    from tilemma.compiler.driver import runner
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

    spec = GemmSpec(19, 13, 40, "bf16", "bf16", "f32")
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90"))
    rng = np.random.default_rng(3)
    args = [runner.pack_memory(np.asarray(rng.normal(0, 8, n)).astype(ml_dtypes.bfloat16 if i < 2 else np.float32),
                               "bf16" if i < 2 else "f32") for i, n in enumerate(kernel.arg_sizes)]
    outs = emulator.emulate(kernel.ptx, kernel.name, kernel.grid, kernel.block, args,
                            shared_bytes=kernel.abi.shared_bytes)
    monkeypatch.setattr(cuda_runtime, "device_arch", lambda: "sm_90")
    assert runner._gpu_twin_differs(kernel, args, outs) is None
    d = kernel.gemm.d.param
    outs[d].view(np.uint32)[5] ^= 1
    assert "differ in 1 words of D, first at element 5" in runner._gpu_twin_differs(kernel, args, outs)
    monkeypatch.setattr(cuda_runtime, "device_arch", lambda: "sm_80")
    assert runner._gpu_twin_differs(kernel, args, outs) is None
