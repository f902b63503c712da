"""Correctly rounded arithmetic on float64 arrays: a value rounded once to f16, bf16, f32, f64 or
fp8 (rn or rz, fp8 saturating as PTX cvt.rn.satfinite), and fma with one rounding. The epilogue's
interval reference (`epilogue_reference`) evaluates every exactly rounded operation with these.

How it stays exact: float64 holds the exact sum, difference and product of two f16/bf16 values and
the product of two f32; an f64 result correctly rounded to f32/f16/bf16 is the correctly rounded
result (53 >= 2p + 2 bits); an f64 -> f16/bf16 conversion goes through round-to-odd in f32 (one
rounding, not two); an f32/f16/bf16 fma sums the exact float64 product with round-to-odd, an f64
fma in Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

__all__ = ["FLOAT_TYPES", "canonical_type", "round_to", "fma"]

FLOAT_TYPES: dict[str, type] = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f32": np.float32,
    "f64": np.float64,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
}
_MAX_FINITE = {name: float(ml_dtypes.finfo(t).max) for name, t in FLOAT_TYPES.items()}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64, 1: np.uint8}
_ALIASES = {"si32": "i32"}


def canonical_type(type_name: str) -> str:
    """The name the tables here use (si32 is i32)."""
    return _ALIASES.get(type_name, type_name)


# ---------------------------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------------------------


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd (inexact results take the neighbour whose last bit is
    1; overflow gives the largest finite value): a later rounding to <= 22 bits is then exact."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
    big = np.isinf(r) & np.isfinite(x)
    r = np.where(big, np.copysign(np.float32(_MAX_FINITE["f32"]), x).astype(np.float32), r)
    with np.errstate(invalid="ignore"):
        inexact = np.isfinite(x) & (r.astype(np.float64) != x)
    fix = inexact & ((r.view(np.uint32) & np.uint32(1)) == 0)
    if fix.any():
        toward = np.where(x > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
        r = np.where(fix, np.nextafter(r, toward.astype(np.float32)), r)
    return r


def _toward_zero(r: np.ndarray, dtype) -> np.ndarray:
    """The value one step closer to zero (r finite nonzero or infinite: inf -> largest finite),
    by decrementing the magnitude's bits."""
    arr = np.ascontiguousarray(r.astype(dtype))
    bits = arr.view(_UINT[arr.dtype.itemsize])
    return (bits - bits.dtype.type(1)).view(arr.dtype)


def round_to(x, type_name: str, mode: str = "rn") -> np.ndarray:
    """float64 values rounded once to `type_name` (f16, bf16, f32, f64, f8E4M3FN, f8E5M2) with
    `mode` rn (nearest even; overflow gives infinity) or rz (toward zero; overflow gives the
    largest finite value). The fp8 types saturate (PTX cvt.rn.satfinite). Result: float64."""
    t = canonical_type(type_name)
    x = np.asarray(x, dtype=np.float64)
    if t == "f64":
        return x.copy()
    if t not in FLOAT_TYPES:
        raise ValueError(f"cannot round to {type_name}")
    dtype = FLOAT_TYPES[t]
    with np.errstate(over="ignore", invalid="ignore"):
        if t.startswith("f8"):
            if mode != "rn":
                raise ValueError(f"{t} conversions round to nearest (rn) only")
            big = _MAX_FINITE[t]
            return np.clip(x, -big, big).astype(np.float32).astype(dtype).astype(np.float64)
        if t == "f32":
            r = x.astype(np.float32)
        else:
            r = _round_to_odd_f32(x).astype(dtype)
        if mode == "rz":
            rv = r.astype(np.float64)
            away = np.isfinite(x) & (np.abs(rv) > np.abs(x))
            if away.any():
                r = np.where(away, _toward_zero(r, dtype), r)
        elif mode != "rn":
            raise ValueError(f"unknown rounding mode {mode!r} (rn, rz)")
        return r.astype(np.float64)


def _f64_rounded_to_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """p + c rounded to odd in float64 (TwoSum gives the exact error of the rn sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
    fix = np.isfinite(s) & np.isfinite(err) & (err != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def _fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b + c with one rounding to float64: Fractions where everything is finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        naive = a * b + c
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    if not finite.any():
        return naive

    def one(x, y, z):
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        try:
            return float(exact)  # correctly rounded
        except OverflowError:
            return math.inf if exact > 0 else -math.inf

    out = naive.copy()
    out[finite] = np.frompyfunc(one, 3, 1)(a[finite], b[finite], c[finite]).astype(np.float64)
    return out


def fma(a, b, c, type_name: str) -> np.ndarray:
    """a*b + c rounded once to type_name (f16, bf16, f32, f64); arguments are values of it."""
    t = canonical_type(type_name)
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    a, b, c = np.broadcast_arrays(a, b, c)
    if t == "f64":
        return _fma_f64(a, b, c)
    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b  # exact: at most 24 + 24 significant bits, exponents inside float64's range
    return round_to(_f64_rounded_to_odd_sum(p, c), t)
