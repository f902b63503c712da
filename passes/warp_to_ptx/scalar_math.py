"""PTX sequences for MLIR's `math` ops on one f32 register, their error bounds, and a NumPy model
that gives the emulator's bits.

Each `emit_<op>(e, x)` appends the instructions to an `Emitter` and returns a new .f32 register;
`MATH` maps the MLIR op name to it. `bound(op, x)` is, per element, an absolute bound on
|PTX result - f(x)| where f is the exact function, for every finite f32 x (see each op below);
`model(op, x)` computes the sequence with the emulator's instruction models (`float_ops`), bit
for bit what the emulator gives. `BOUNDS_DOC` is the table the README quotes.

The sequences (u = 2**-24, the f32 unit roundoff; "ulp" of an exact value v is at most 2**-23 |v|):

* exp2(x) = ex2.approx.f32(x). The ISA: at most 2 ulp from the correctly rounded result over the
  whole range, so |r - f| <= 2.5 * max(2**-23 f, 2**-149) (subnormal results count in 2**-149).
* exp(x) = ex2.approx.f32(mul.rn(x, L)) with L = f32(log2 e) = log2 e (1 + d0), d0 = -1.33e-8.
  The product is y = x log2(e) + eps with |eps| <= |x| log2(e) (|d0| + u (1 + |d0|)) + 2**-150,
  so 2**y is within a factor 2**|eps| of e**x: the argument's rounding costs a relative error of
  about |x| * 1e-7 (6 ulp at |x| = 10, 50 ulp near the overflow threshold 88.7), then ex2 as
  above. Bound: f (2**|eps| - 1) + 2.5 max(2**-23 f 2**|eps|, 2**-149).
* log2(x) = lg2.approx.f32(x): the ISA's 2**-22 absolute on (0.5, 2), 2**-22 relative elsewhere.
* log(x) = mul.rn(lg2.approx.f32(x), f32(ln 2)): ln 2 (b (1 + h) + |log2 x| h) with b the lg2
  bound and h = (1 + |d1|)(1 + u) - 1, d1 = 2.7e-9 the constant's relative error.
* tanh(x) = tanh.approx.f32(x) (sm_75): the ISA's maximum relative error 2**-11 over the whole
  range (about 11 correct bits - coarse; a result rounded to f16 has 11, bf16 8).
* sqrt(x) = sqrt.rn.f32(x): correctly rounded, 2**-24 f.
* rsqrt(x) = rsqrt.approx.f32(x): the ISA's maximum relative error 2**-22.9.
* erf(x) (no PTX instruction; designed here): with a = |x|,
  - a < 0.921875 (`setp.ltu`, so NaN takes this branch and propagates): erf(x) = x + x q(x**2),
    q a degree-5 polynomial for erf(x)/x - 1 (fma.rn Horner, then one fma);
  - else erf(x) = copysign(1 - 2**P(t), x) with t = min(a, 4) and P a degree-6 polynomial for
    log2(erfc(t)) (fma.rn Horner, ex2.approx.ftz.f32, sub.rn). erf(t) rounds to 1 in f32 from
    t = 3.92 on, so clamping at 4 makes every larger |x| (and +-inf) give +-1 exactly.
  The coefficients are ours: weighted minimax fits (Lawson's iteration over 3000/5000 points;
  q absolute, P weighted by erfc(t) so that the error is uniform in the result), each coefficient
  rounded to f32 in turn and the others refitted. With correctly rounded ex2 (the emulator's
  model) the result is within 1.18 ulp of erf(x) for every 4th f32 of [0.5, 4.5] and within
  1.04 ulp on the small branch (tests/test_scalar_math.py re-proves it on a sweep). The GPU's
  ex2 may be 1.5 ulp further off, which moves 2**P by at most 1.5 * 2**-23 erfc(a) and the final
  rounding by at most one more ulp. Bound: 2**-22 (|erf(x)| + [a >= 0.921875] erfc(a)) + 2**-149.
  20 instructions (one MUFU).

Specials: for x whose f(x) is infinite or NaN (exp overflow aside) the sequences give exactly the
IEEE value (exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x < 0) = NaN, sqrt(-1) = NaN,
rsqrt(0) = inf, tanh/erf(+-inf) = +-1, NaN -> NaN); `bound` is 0 there, meaning "exactly". Where
f(x) is finite but the result may overflow (f(x) + bound beyond the largest f32) `bound` is inf.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tilemma.dialects.ptx_builder import f32_literal

__all__ = ["MATH", "REQUIRES", "BOUNDS_DOC", "bound", "model", "exact",
           "emit_exp", "emit_exp2", "emit_log", "emit_log2", "emit_tanh", "emit_erf", "emit_sqrt", "emit_rsqrt"]

_U = 2.0**-24
_TINY = 2.0**-149
_FLT_MAX = float(np.finfo(np.float32).max)
LOG2E = np.float32(1.0 / math.log(2.0))  # 0f3FB8AA3B
LN2 = np.float32(math.log(2.0))  # 0f3F317218
_D_LOG2E = abs(float(LOG2E) * math.log(2.0) - 1.0)  # relative error of the constant, 1.33e-8
_D_LN2 = abs(float(LN2) / math.log(2.0) - 1.0)  # 2.7e-9

# erf: split point, clamp, and the coefficients (f32 bit patterns, lowest degree first).
ERF_SPLIT = np.float32(0.921875)
ERF_CLAMP = np.float32(4.0)
ERF_SMALL = (0x3E0375D3, 0xBEC09376, 0x3DE70DB1, 0xBCDB4BD2, 0x3BA3BDDC, 0xBA1D808F)  # q(s) ~ erf(x)/x - 1
ERF_TAIL = (0xB99EC3F0, 0xBFD03B28, 0xBF6B5E62, 0xBE19673D, 0x3D03136E, 0xBB8F50D3, 0x39934AD1)  # P ~ log2 erfc
ERF_MODEL_ULPS = 1.18  # the emulator model's proven worst case (tests/test_scalar_math.py)


def _lit(bits: int) -> str:
    return f"0f{bits:08X}"


def _f32(bits: int) -> np.float32:
    return np.array(bits, dtype=np.uint32).view(np.float32)[()]


# ---------------------------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------------------------


def _one(e, opcode: str, *srcs: str) -> str:
    r = e.reg("f32")
    e.emit(opcode, r, *srcs)
    return r


def emit_exp2(e, x: str) -> str:
    return _one(e, "ex2.approx.f32", x)


def emit_exp(e, x: str) -> str:
    y = _one(e, "mul.rn.f32", x, f32_literal(float(LOG2E)))
    return _one(e, "ex2.approx.f32", y)


def emit_log2(e, x: str) -> str:
    return _one(e, "lg2.approx.f32", x)


def emit_log(e, x: str) -> str:
    y = _one(e, "lg2.approx.f32", x)
    return _one(e, "mul.rn.f32", y, f32_literal(float(LN2)))


def emit_tanh(e, x: str) -> str:
    return _one(e, "tanh.approx.f32", x)


def emit_sqrt(e, x: str) -> str:
    return _one(e, "sqrt.rn.f32", x)


def emit_rsqrt(e, x: str) -> str:
    return _one(e, "rsqrt.approx.f32", x)


def _horner(e, coeffs: tuple[int, ...], t: str) -> str:
    """c0 + t (c1 + t (c2 + ...)) by fma.rn; the innermost step takes both constants as immediates."""
    acc = e.reg("f32")
    e.emit("fma.rn.f32", acc, t, _lit(coeffs[-1]), _lit(coeffs[-2]))
    for c in reversed(coeffs[:-2]):
        e.emit("fma.rn.f32", acc, acc, t, _lit(c))
    return acc


def emit_erf(e, x: str) -> str:
    a = _one(e, "abs.f32", x)
    s = _one(e, "mul.rn.f32", x, x)
    q = _horner(e, ERF_SMALL, s)
    small = _one(e, "fma.rn.f32", x, q, x)
    t = _one(e, "min.f32", a, f32_literal(float(ERF_CLAMP)))
    p = _horner(e, ERF_TAIL, t)
    ex = _one(e, "ex2.approx.ftz.f32", p)
    tail = _one(e, "sub.rn.f32", f32_literal(1.0), ex)
    tail_signed = _one(e, "copysign.f32", x, tail)
    pick = e.reg("pred")
    e.emit("setp.ltu.f32", pick, a, f32_literal(float(ERF_SPLIT)))
    return _one(e, "selp.f32", small, tail_signed, pick)


MATH: dict[str, Callable] = {
    "math.exp": emit_exp, "math.exp2": emit_exp2, "math.log": emit_log, "math.log2": emit_log2,
    "math.tanh": emit_tanh, "math.erf": emit_erf, "math.sqrt": emit_sqrt, "math.rsqrt": emit_rsqrt,
}  # fmt: skip

# The first sm each sequence runs on (tanh.approx.f32: sm_75; the rest: every target tilemma has).
REQUIRES: dict[str, int] = {op: (75 if op == "math.tanh" else 0) for op in MATH}


# ---------------------------------------------------------------------------------------------
# The emulator's bits, in NumPy
# ---------------------------------------------------------------------------------------------


def _horner_model(coeffs: tuple[int, ...], t: np.ndarray) -> np.ndarray:
    from tilemma.compiler.verify.emulator import float_ops as F

    acc = F.fma32(t, _f32(coeffs[-1]), _f32(coeffs[-2]))
    for c in reversed(coeffs[:-2]):
        acc = F.fma32(acc, t, _f32(c))
    return acc


@np.errstate(all="ignore")
def model(op: str, x) -> np.ndarray:
    """The sequence `MATH[op]` computed with the emulator's instruction models: the float32 the
    emulator gives for each input (so a NumPy reference can match the emulator bit for bit)."""
    from tilemma.compiler.verify.emulator import float_ops as F  # the lowering itself needs no emulator

    x = np.asarray(x, dtype=np.float32)
    mul = lambda a, b: F.canonical32(np.multiply(a, b, dtype=np.float32))  # noqa: E731
    if op == "math.exp2":
        return F.approx32("ex2", x)
    if op == "math.exp":
        return F.approx32("ex2", mul(x, LOG2E))
    if op == "math.log2":
        return F.approx32("lg2", x)
    if op == "math.log":
        return mul(F.approx32("lg2", x), LN2)
    if op == "math.tanh":
        return F.approx32("tanh", x)
    if op == "math.sqrt":
        return F.canonical32(np.sqrt(x))
    if op == "math.rsqrt":
        return F.approx32("rsqrt", x)
    if op == "math.erf":
        a = np.abs(x)
        small = F.fma32(x, _horner_model(ERF_SMALL, mul(x, x)), x)
        t = F.minmax("min", a, ERF_CLAMP, False, "f32")
        tail = F.canonical32(np.float32(1.0) - F.approx32("ex2", _horner_model(ERF_TAIL, t), ftz=True))
        tail = np.copysign(tail, x).astype(np.float32)
        return np.where(F.compare("ltu", a, ERF_SPLIT), small, tail).astype(np.float32)
    raise KeyError(f"no sequence for {op!r} (have {', '.join(MATH)})")


# ---------------------------------------------------------------------------------------------
# Exact values and bounds
# ---------------------------------------------------------------------------------------------

_ERF = np.frompyfunc(math.erf, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


@np.errstate(all="ignore")
def exact(op: str, x) -> np.ndarray:
    """f(x) in float64 (libm; its error, below 1e-15 relative, is far inside every bound)."""
    v = np.asarray(x, dtype=np.float32).astype(np.float64)
    if op == "math.exp":
        return np.exp(v)
    if op == "math.exp2":
        return np.exp2(v)
    if op in ("math.log", "math.log2"):
        r = np.where(v < 0, np.nan, np.log(np.abs(v)))
        return r / math.log(2.0) if op == "math.log2" else r
    if op == "math.tanh":
        return np.tanh(v)
    if op == "math.erf":
        return _ERF(v).astype(np.float64)
    if op == "math.sqrt":
        return np.sqrt(v)
    if op == "math.rsqrt":
        return np.where(v == 0, np.copysign(np.inf, v), 1.0 / np.sqrt(v))
    raise KeyError(f"no sequence for {op!r} (have {', '.join(MATH)})")


def _ex2_err(f: np.ndarray) -> np.ndarray:
    """ex2.approx.f32's error around an exact result f: 2 ulp from the correctly rounded one."""
    return 2.5 * np.maximum(2.0**-23 * np.abs(f), _TINY)


def _lg2_err(x: np.ndarray, log2x: np.ndarray) -> np.ndarray:
    return np.where((x > 0.5) & (x < 2.0), 2.0**-22, 2.0**-22 * np.abs(log2x))


@np.errstate(all="ignore")
def bound(op: str, x) -> np.ndarray:
    """Per element absolute bound on |PTX result - f(x)| (float64), as the module docstring
    derives it: 0 where f(x) is not finite (the result must be exactly f(x)), inf where the
    result may overflow."""
    v = np.asarray(x, dtype=np.float32).astype(np.float64)
    f = exact(op, v)
    if op == "math.exp2":
        b = _ex2_err(f)
    elif op == "math.exp":
        eps = np.abs(v) / math.log(2.0) * (_D_LOG2E + _U * (1 + _D_LOG2E)) + 2.0**-150
        grow = np.exp2(np.minimum(eps, 1.0))
        b = f * (grow - 1.0) + _ex2_err(f * grow)
        b = np.where(v < -104.0, f + _ex2_err(0.0), b)  # e**x < 2**-150: any result within 2.5 * 2**-149
    elif op == "math.log2":
        b = _lg2_err(v, f)
    elif op == "math.log":
        h = (1 + _D_LN2) * (1 + _U) - 1
        log2x = f / math.log(2.0)
        b = math.log(2.0) * (_lg2_err(v, log2x) * (1 + h) + np.abs(log2x) * h) + _TINY
    elif op == "math.tanh":
        b = 2.0**-11 * np.abs(f) + _TINY
    elif op == "math.sqrt":
        b = _U * np.abs(f)
    elif op == "math.rsqrt":
        b = 2.0**-22.9 * np.abs(f)
    elif op == "math.erf":
        a = np.abs(v)
        tail = np.where(a >= float(ERF_SPLIT), _ERFC(a).astype(np.float64), 0.0)
        b = 2.0**-22 * (np.abs(f) + tail) + _TINY
    else:
        raise KeyError(f"no sequence for {op!r} (have {', '.join(MATH)})")
    b = np.where(np.isfinite(f), b + 2.0**-45 * np.abs(f), 0.0)  # + the float64 reference's own error
    return np.where(np.isfinite(f) & (np.abs(f) + b > _FLT_MAX), np.inf, b)


BOUNDS_DOC = """\
| op | PTX | bound on abs(result - f(x)) | H100 (tools/epilogue_probe): bit-identical to the emulator, max ulp apart, max error / bound |
| --- | --- | --- | --- |
| math.exp | ex2.approx.f32(mul.rn.f32(x, log2 e)) | e^x (2^eps - 1) + 2.5 ulp, eps = abs(x) * 1.44 * 7.3e-8 (about abs(x) * 1e-7 relative: 6 ulp at abs(x) = 10) | 93.4%, 2, 0.89 |
| math.exp2 | ex2.approx.f32 | 2.5 ulp (ISA: 2 ulp from the correctly rounded result) | 91.0%, 2, 0.75 |
| math.log | mul.rn.f32(lg2.approx.f32(x), ln 2) | ln 2 (b + abs(log2 x) 6e-8), b the lg2 bound | 53.0%, -, 0.78 |
| math.log2 | lg2.approx.f32 | 2^-22 on (0.5, 2), 2^-22 relative elsewhere (ISA) | 45.4%, -, 0.85 |
| math.tanh | tanh.approx.f32 (sm_75) | 2^-11 relative (ISA) | 90.4%, 125, 0.02 |
| math.erf | odd polynomial (fma.rn) below 0.921875, else 1 - ex2.approx(poly(min(abs(x), 4))), sign by copysign; 20 instructions | 2^-22 (abs(erf x) + erfc(abs(x)) on the tail), i.e. 2 ulp; the emulator's model is within 1.18 ulp | 99.6%, 1, 0.49 |
| math.sqrt | sqrt.rn.f32 | 0.5 ulp (correctly rounded) | 100% (exact) |
| math.rsqrt | rsqrt.approx.f32 | 2^-22.9 relative (ISA) | 79.5%, 1, 0.98 |

(lg2's results near x = 1 are tiny and its bound absolute, so ulps apart is not meaningful there.)
The approximate instructions are modelled as the exact function rounded to f32; the GPU's MUFU is
not reproduced bit for bit. Every exact instruction the sequences use is bit-exact in the emulator.
"""
