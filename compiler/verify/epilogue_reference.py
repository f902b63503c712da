"""Exact reference for a GEMM's epilogue: what every element of every output may be.

The GEMM part is known only within an error bound (`reference.error_bound`: the accumulation order
and rounding of the mma are unspecified), so the epilogue is evaluated in interval arithmetic. The
accumulator enters as the set [want - bound, want + bound] (a point for integer accumulators and
wherever the bound is 0); every operation maps the sets of its arguments to a set that holds every
result the operation can give on any of their elements, with the element semantics of MLIR's
`arith` / `math` ops and of `tile.cast` (PTX `cvt`). A kernel output passes where each element lies
in its set. This is sound (a correct kernel always passes) and still sharp: a wrong term moves the
accumulator by about one product, far outside its bound, and the epilogue's operations are
evaluated exactly on the interval's ends, so a point input gives the exact bit pattern.

The sets: per element, a closed range [lo, hi] of the type's values (held as float64, exactly; int64
for i32 and i1) and a flag saying whether NaN is possible; lo = hi = NaN where no number is
possible (NaN only). The sign of a zero is not tracked (-0 and +0 compare equal).

The rules, per operation (T the result type; "rn" IEEE round to nearest even):

* Exactly rounded operations (arith.addf, subf, mulf, divf, math.fma, arith.truncf, extf, sitofp,
  the tile.cast conversions): each is monotone in each argument, so the ends of the result are the
  operation applied, with its rounding, to the corners of the arguments' box. Exact: float64
  holds the exact sum, difference, product of two f16/bf16 values, and the product of two f32;
  otherwise an f64 result correctly rounded to f32/f16/bf16 is the correctly rounded result
  (double rounding is innocuous for + - * / sqrt with 53 >= 2p + 2 bits); an f64 -> f16/bf16
  conversion goes through round-to-odd in f32 (one rounding, not two); an f32/f16/bf16 fma sums
  the exact float64 product with round-to-odd, an f64 fma in Fractions. Multiplication adds NaN
  where 0 and an infinity meet, division spans everything where the divisor's range holds 0.
* arith.maximumf / minimumf (NaN propagates), maxnumf / minnumf (NaN only when both are):
  elementwise on the ends. arith.negf, math.absf: by the sign cases.
* arith.cmpf: whether each outcome is possible over the ranges (ordered predicates are false on
  NaN, unordered true); arith.select: the chosen operand, the union of both where the condition
  can go either way. i32 (arith.addi/subi/muli wrap, maxsi/minsi, cmpi) and i1 (andi/ori/xori)
  values are points in practice (integer accumulators are exact); where a range would wrap it
  becomes the whole i32 range.
* arith.uitofp (the i32 as unsigned) and fptosi (truncation toward zero; NaN or out of range is
  poison in MLIR: any i32).
* Transcendentals (math.exp, exp2, log, log2, tanh, erf, sqrt, rsqrt): the function is monotone,
  so its exact value at the ends (float64: numpy, `math.erf`), widened by the implementation's
  absolute error bound (`implementation_bound`: `passes/warp_to_ptx/scalar_math.bound` where that
  exists, a conservative placeholder table until then) and by float64's own error, then rounded to
  T (rn is monotone, so an implementation result within the bound rounds into the range).
* tile.cast (`dialects/element_tables.CAST_RULES`): f32 -> f16/bf16 rn or rz, f32 -> e4m3/e5m2 rn
  with satfinite (finite values beyond the largest and infinities clamp to the largest of that
  sign, NaN stays NaN), si32 / f64 -> f32 rn or rz, the exact widenings.

Subnormals are kept (IEEE, no flush to zero) for the exactly rounded operations; the placeholder
bounds of the transcendentals allow the approximate instructions' flushing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tilemma.compiler.verify.exact_rounding import FLOAT_TYPES, fma, round_to
from tilemma.compiler.verify.exact_rounding import canonical_type as _name

__all__ = [
    "Interval",
    "FLOAT_TYPES",
    "round_to",
    "cast",
    "apply_op",
    "scalar_ops",
    "implementation_bound",
    "BOUNDS_SOURCE",
    "evaluate_epilogue",
    "Check",
    "check",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _is_int(type_name: str) -> bool:
    return _name(type_name) in ("i32", "i1")


# ---------------------------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """Per element, the values an operation may produce: the range [lo, hi] of `type`'s values
    (float64 arrays holding them exactly; int64 for i32 / i1), and `nan`, whether NaN is
    possible. lo = hi = NaN where only NaN is."""

    type: str
    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.lo.shape

    @property
    def empty(self) -> np.ndarray:
        """Where no number is possible (NaN only)."""
        if _is_int(self.type):
            return np.zeros(self.lo.shape, bool)
        return np.isnan(self.lo)

    @property
    def is_point(self) -> np.ndarray:
        return (self.lo == self.hi) & ~self.nan | (self.empty & self.nan)

    @staticmethod
    def point(values, type_name: str) -> Interval:
        """Exactly these values (of `type_name`: they are not rounded)."""
        t = _name(type_name)
        if _is_int(t):
            v = np.asarray(values).astype(np.int64)
            return Interval(t, v, v.copy(), np.zeros(v.shape, bool))
        v = np.asarray(values).astype(np.float64)
        nan = np.isnan(v)
        return Interval(t, v, v.copy(), nan)

    @staticmethod
    def around(want, bound, type_name: str) -> Interval:
        """want +- bound (elementwise; bound >= 0), the ends rounded to the type: every value of the
        type within the bound of want lies inside. NaN where want is NaN; an infinite want is
        exact (overflow is not a rounding error)."""
        t = _name(type_name)
        w = np.asarray(want).astype(np.float64)
        bnd = np.broadcast_to(np.asarray(bound, dtype=np.float64), w.shape)
        if _is_int(t):
            if np.any(bnd != 0):
                raise ValueError("integer values are exact: the bound must be 0")
            return Interval.point(w.astype(np.int64), t)
        with np.errstate(invalid="ignore", over="ignore"):
            lo = np.where(np.isfinite(w), round_to(w - bnd, t), w)
            hi = np.where(np.isfinite(w), round_to(w + bnd, t), w)
        return Interval(t, lo, hi, np.isnan(w))

    def where(self, mask: np.ndarray, other: Interval) -> Interval:
        """This interval where mask, `other` elsewhere."""
        return Interval(self.type, np.where(mask, self.lo, other.lo), np.where(mask, self.hi, other.hi),
                        np.where(mask, self.nan, other.nan))

    def contains(self, got) -> np.ndarray:
        """Elementwise: is got (values of the type) a possible result? NaN iff NaN is possible,
        a number iff lo <= got <= hi (so NaN-only sets accept only NaN, and infinities are exact)."""
        g = np.asarray(got)
        if _is_int(self.type):
            g = g.astype(np.int64)
            return (self.lo <= g) & (g <= self.hi)
        g = g.astype(np.float64)
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(g), self.nan, (self.lo <= g) & (g <= self.hi))

    def __getitem__(self, index) -> Interval:
        return Interval(self.type, self.lo[index], self.hi[index], self.nan[index])


def _make(t: str, lo, hi, nan, empty=None) -> Interval:
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    nan = np.asarray(nan, dtype=bool)
    if empty is not None:
        lo = np.where(empty, np.nan, lo)
        hi = np.where(empty, np.nan, hi)
        nan = nan | empty
    empty_now = np.isnan(lo) | np.isnan(hi)
    lo = np.where(empty_now, np.nan, lo)
    hi = np.where(empty_now, np.nan, hi)
    return Interval(t, lo, hi, nan | empty_now)


def _fmin(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.fmin.reduce(np.stack(np.broadcast_arrays(*arrays)), axis=0)


def _fmax(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.fmax.reduce(np.stack(np.broadcast_arrays(*arrays)), axis=0)


def _contains_zero(a: Interval) -> np.ndarray:
    return (a.lo <= 0) & (a.hi >= 0)


def _contains_inf(a: Interval) -> np.ndarray:
    return np.isinf(a.lo) | np.isinf(a.hi)


def _corners(fn: Callable, a: Interval, b: Interval, t: str, extra_nan=False) -> Interval:
    """fn (correctly rounded to t, monotone in each argument over the box) on the four corners."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        cs = [fn(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    stack = np.stack(np.broadcast_arrays(*cs))
    empty = a.empty | b.empty
    nan = a.nan | b.nan | (np.isnan(stack).any(0) & ~empty) | extra_nan
    return _make(t, _fmin(cs), _fmax(cs), nan, empty)


def _rounded(op: Callable, t: str) -> Callable:
    """The float64 operation `op`, correctly rounded to t (exact in float64 for f64 itself; for
    narrower types the float64 result's rounding is innocuous: 53 >= 2p + 2)."""
    if t == "f64":
        return op
    return lambda x, y: round_to(op(x, y), t)


def _add(a, b, t):
    return _corners(_rounded(np.add, t), a, b, t)


def _sub(a, b, t):
    return _corners(_rounded(np.subtract, t), a, b, t)


def _mul(a, b, t):
    zero_inf = (_contains_zero(a) & _contains_inf(b)) | (_contains_inf(a) & _contains_zero(b))
    return _corners(_rounded(np.multiply, t), a, b, t, zero_inf & ~(a.empty | b.empty))


def _div(a, b, t):
    both = ~(a.empty | b.empty)
    by_zero = _contains_zero(b) & both
    inf_inf = _contains_inf(a) & _contains_inf(b) & both
    out = _corners(_rounded(np.divide, t), a, b, t, inf_inf)
    numerator_zero = (a.lo == 0) & (a.hi == 0)
    divisor_zero = (b.lo == 0) & (b.hi == 0)
    # x / 0 is +-inf by the zero's sign, which is not tracked; 0 / 0 is NaN
    lo = np.where(by_zero, np.where(numerator_zero, 0.0, -np.inf), out.lo)
    hi = np.where(by_zero, np.where(numerator_zero, 0.0, np.inf), out.hi)
    nan = out.nan | (by_zero & _contains_zero(a))
    return _make(t, lo, hi, nan, a.empty | b.empty | (numerator_zero & divisor_zero))


def _fma(a, b, c, t):
    with np.errstate(invalid="ignore", over="ignore"):
        cs = [fma(x, y, z, t) for x in (a.lo, a.hi) for y in (b.lo, b.hi) for z in (c.lo, c.hi)]
    stack = np.stack(np.broadcast_arrays(*cs))
    empty = a.empty | b.empty | c.empty
    zero_inf = (_contains_zero(a) & _contains_inf(b)) | (_contains_inf(a) & _contains_zero(b))
    nan = a.nan | b.nan | c.nan | ((np.isnan(stack).any(0) | zero_inf) & ~empty)
    return _make(t, _fmin(cs), _fmax(cs), nan, empty)


def _maximum(a, b, t, propagate=True, pick=np.maximum):
    """maximumf / minimumf (propagate NaN) or maxnumf / minnumf (NaN only when both are)."""
    both = _make(t, pick(a.lo, b.lo), pick(a.hi, b.hi), a.nan | b.nan, a.empty | b.empty)
    if propagate:
        return both
    # maxnum: a NaN operand gives the other one.
    los, his = [both.lo], [both.hi]
    for x, y in ((a, b), (b, a)):
        los.append(np.where(y.nan, x.lo, np.nan))
        his.append(np.where(y.nan, x.hi, np.nan))
    return _make(t, _fmin(los), _fmax(his), a.nan & b.nan)


def _neg(a, t):
    return _make(t, -a.hi, -a.lo, a.nan)


def _abs(a, t):
    lo = np.where(a.lo >= 0, a.lo, np.where(a.hi <= 0, -a.hi, 0.0))
    hi = np.where(a.lo >= 0, a.hi, np.where(a.hi <= 0, -a.lo, np.maximum(-a.lo, a.hi)))
    return _make(t, lo, hi, a.nan, a.empty)


def cast(a: Interval, dst: str, mode: str | None = None) -> Interval:
    """A conversion of a's values to `dst` (arith.extf / truncf / sitofp, tile.cast): exact
    widenings keep the values; narrowings round each end (rn, or rz; fp8 saturates)."""
    src, dst = _name(a.type), _name(dst)
    if _is_int(src):
        if dst not in FLOAT_TYPES:
            raise ValueError(f"no conversion {src} -> {dst}")
        lo, hi = (round_to(v.astype(np.float64), dst, mode or "rn") for v in (a.lo, a.hi))
        return _make(dst, lo, hi, np.zeros(a.shape, bool))
    if src not in FLOAT_TYPES or dst not in FLOAT_TYPES:
        raise ValueError(f"no conversion {src} -> {dst}")
    lo, hi = (round_to(v, dst, mode or "rn") for v in (a.lo, a.hi))
    return _make(dst, lo, hi, a.nan, a.empty)


# ---------------------------------------------------------------------------------------------
# Transcendentals and the implementation's bounds
# ---------------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


# name -> (exact function on float64, increasing?, domain is x >= 0?)
_FUNCTIONS: dict[str, tuple[Callable, bool, bool]] = {
    "math.exp": (np.exp, True, False),
    "math.exp2": (np.exp2, True, False),
    "math.log": (np.log, True, True),
    "math.log2": (np.log2, True, True),
    "math.tanh": (np.tanh, True, False),
    "math.erf": (_erf, True, False),
    "math.sqrt": (np.sqrt, True, True),
    "math.rsqrt": (_rsqrt, False, True),
}
# float64 evaluation of these is correctly rounded (IEEE sqrt); the others get a few ulps of slop.
_CORRECTLY_ROUNDED = ("math.sqrt",)


def _placeholder_bound(op_name: str, x: np.ndarray) -> np.ndarray:
    """PLACEHOLDER until `passes/warp_to_ptx/scalar_math.bound` exists: conservative absolute
    error bounds for the f32 implementations a PTX lowering would use (ex2.approx.ftz and
    lg2.approx.ftz with the argument scaling, tanh.approx, a polynomial erf, sqrt/rsqrt.approx),
    about 4x the documented figures. Subnormal results may flush to zero (.ftz); a subnormal
    argument to log may be flushed to zero (-> -inf), so its bound is infinite."""
    f, _, _ = _FUNCTIONS[op_name]
    with np.errstate(all="ignore"):
        y = np.abs(f(x))
        ax = np.abs(x)
        tiny = 2.0**-126
        if op_name == "math.exp":
            b = y * (2.0**-20 + ax * 2.0**-22) + tiny
        elif op_name == "math.exp2":
            b = y * (2.0**-20 + ax * 2.0**-23) + tiny
        elif op_name in ("math.log", "math.log2"):
            b = 2.0**-20 * (1.0 + y)
            b = np.where(ax < tiny, np.inf, b)
        elif op_name == "math.tanh":
            b = np.full(x.shape, 2.0**-9)
        elif op_name == "math.erf":
            b = np.full(x.shape, 2.0**-19)
        else:  # sqrt, rsqrt
            b = y * 2.0**-20 + tiny
    return np.where(np.isnan(b), np.inf, b)


try:  # the lowering's own table, where it has been written
    from tilemma.passes.warp_to_ptx.scalar_math import bound as _scalar_math_bound  # type: ignore

    BOUNDS_SOURCE = "passes/warp_to_ptx/scalar_math.bound"
except ImportError:  # pragma: no cover - depends on what has been merged
    _scalar_math_bound = None
    BOUNDS_SOURCE = "placeholder (epilogue_reference._placeholder_bound)"


def implementation_bound(op_name: str, x) -> np.ndarray:
    """Per element, an absolute bound on |implementation(x) - f(x)| for the math op `op_name`
    (MLIR name, e.g. math.exp) at float64 arguments x."""
    x = np.asarray(x, dtype=np.float64)
    if _scalar_math_bound is not None:
        b = np.asarray(_scalar_math_bound(op_name, x), dtype=np.float64)
    else:
        b = _placeholder_bound(op_name, x)
    return np.broadcast_to(b, x.shape)


def _transcendental(op_name: str, a: Interval, t: str) -> Interval:
    f, increasing, nonneg = _FUNCTIONS[op_name]
    lo, hi = a.lo, a.hi
    nan = a.nan.copy()
    empty = a.empty.copy()
    if nonneg:
        with np.errstate(invalid="ignore"):
            nan |= lo < 0
            empty |= hi < 0
            lo = np.where(lo < 0, 0.0, lo)
    with np.errstate(all="ignore"):
        fl, fh = f(lo), f(hi)
        if not increasing:
            fl, fh = fh, fl
        spans_zero = (lo < 0) & (hi > 0)
        # The bound over the range: its largest value at the ends (and at 0 where the range
        # spans it); an end where the function is infinite is exact (overflow, log 0).
        bounds = [np.where(np.isfinite(fv), implementation_bound(op_name, np.nan_to_num(v)), 0.0)
                  for v, fv in ((lo, f(lo)), (hi, f(hi)))]
        bounds.append(np.where(spans_zero, implementation_bound(op_name, np.zeros(lo.shape)), 0.0))
        b = _fmax(bounds)
        if op_name not in _CORRECTLY_ROUNDED:  # float64's own error (numpy's exp, log, ...)
            finite = [np.where(np.isfinite(v), np.abs(v), 0.0) for v in (fl, fh)]
            b = b + 2.0**-50 * np.maximum(*finite)
        low = np.where(np.isinf(b) & ~np.isinf(fl), -np.inf, fl - b)
        high = np.where(np.isinf(b) & ~np.isinf(fh), np.inf, fh + b)
        if op_name == "math.rsqrt":  # rsqrt(-0) = -inf
            low = np.where(lo == 0, -np.inf, low)
    return _make(t, round_to(low, t), round_to(high, t), nan, empty)


# ---------------------------------------------------------------------------------------------
# Comparisons, selection, integers
# ---------------------------------------------------------------------------------------------

CMPF_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
                   "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true")
CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


def _relation(rel: str, a: Interval, b: Interval) -> tuple[np.ndarray, np.ndarray]:
    """Over the numbers of a and b: can `a rel b` hold, can it fail?"""
    with np.errstate(invalid="ignore"):
        if rel == "lt":
            return a.lo < b.hi, a.hi >= b.lo
        if rel == "le":
            return a.lo <= b.hi, a.hi > b.lo
        if rel == "gt":
            return a.hi > b.lo, a.lo <= b.hi
        if rel == "ge":
            return a.hi >= b.lo, a.lo < b.hi
        overlap = (a.lo <= b.hi) & (b.lo <= a.hi)
        same_point = (a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)
        if rel == "eq":
            return overlap, ~same_point
        if rel == "ne":
            return ~same_point, overlap
    raise ValueError(rel)


def _bool(can_true: np.ndarray, can_false: np.ndarray) -> Interval:
    lo = np.where(can_false, 0, 1).astype(np.int64)
    hi = np.where(can_true, 1, 0).astype(np.int64)
    return Interval("i1", lo, hi, np.zeros(lo.shape, bool))


def cmpf(predicate: str, a: Interval, b: Interval) -> Interval:
    both = ~(a.empty | b.empty)
    maybe_nan = a.nan | b.nan
    if predicate in ("true", "false"):
        value = predicate == "true"
        return _bool(np.full(a.shape, value), np.full(a.shape, not value))
    if predicate == "ord":
        return _bool(both, maybe_nan)
    if predicate == "uno":
        return _bool(maybe_nan, both)
    rel = {"eq": "eq", "gt": "gt", "ge": "ge", "lt": "lt", "le": "le", "ne": "ne"}[predicate[1:]]
    can, cannot = _relation(rel, a, b)
    can, cannot = can & both, cannot & both
    if predicate[0] == "o":
        return _bool(can, cannot | maybe_nan)
    return _bool(can | maybe_nan, cannot)


def _as_unsigned(v: np.ndarray) -> np.ndarray:
    return np.where(v < 0, v + 2**32, v)


def cmpi(predicate: str, a: Interval, b: Interval) -> Interval:
    if predicate[0] == "u" and a.type == "i32":
        points = (a.lo == a.hi) & (b.lo == b.hi)
        ua, ub = _as_unsigned(a.lo), _as_unsigned(b.lo)
        rel = {"ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub}[predicate]
        return _bool(~points | rel, ~points | ~rel)
    rel = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge",
           "ult": "lt", "ule": "le", "ugt": "gt", "uge": "ge"}[predicate]
    return _bool(*_relation(rel, a, b))


def select(cond: Interval, a: Interval, b: Interval) -> Interval:
    surely, never = cond.lo == 1, cond.hi == 0
    if _is_int(a.type):
        lo = np.where(surely, a.lo, np.where(never, b.lo, np.minimum(a.lo, b.lo)))
        hi = np.where(surely, a.hi, np.where(never, b.hi, np.maximum(a.hi, b.hi)))
        return Interval(a.type, lo, hi, np.zeros(lo.shape, bool))
    union = _make(a.type, _fmin([a.lo, b.lo]), _fmax([a.hi, b.hi]), a.nan | b.nan)
    return a.where(surely, b.where(never, union))


def _fptosi(a: Interval) -> Interval:
    """Truncation toward zero (monotone). MLIR: a NaN or out-of-range value is poison, any
    i32 (PTX cvt.rzi.s32 saturates, and gives 0 for NaN), so such a range becomes all of i32."""
    with np.errstate(invalid="ignore"):
        lo, hi = np.trunc(a.lo), np.trunc(a.hi)
        poison = a.nan | ~(lo >= INT32_MIN) | ~(hi <= INT32_MAX)
    lo = np.where(poison, INT32_MIN, np.nan_to_num(lo)).astype(np.int64)
    hi = np.where(poison, INT32_MAX, np.nan_to_num(hi)).astype(np.int64)
    return Interval("i32", lo, hi, np.zeros(lo.shape, bool))


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v - INT32_MIN) % 2**32) + INT32_MIN


def _int_corners(fn: Callable, a: Interval, b: Interval) -> Interval:
    cs = np.stack([fn(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)])
    lo, hi = cs.min(0), cs.max(0)
    if a.type == "i1":
        return Interval("i1", lo, hi, np.zeros(lo.shape, bool))
    point = lo == hi
    wraps = (lo < INT32_MIN) | (hi > INT32_MAX)
    lo = np.where(point, _wrap32(lo), np.where(wraps, INT32_MIN, lo))
    hi = np.where(point, _wrap32(hi), np.where(wraps, INT32_MAX, hi))
    return Interval(a.type, lo, hi, np.zeros(lo.shape, bool))


def _bitwise(fn: Callable, a: Interval, b: Interval) -> Interval:
    points = (a.lo == a.hi) & (b.lo == b.hi)
    exact = fn(a.lo, b.lo)
    if a.type == "i1":
        full_lo, full_hi = 0, 1
        if fn in (np.bitwise_and, np.bitwise_or):  # monotone on 0/1
            return Interval("i1", fn(a.lo, b.lo), fn(a.hi, b.hi), np.zeros(exact.shape, bool))
    else:
        full_lo, full_hi = INT32_MIN, INT32_MAX
    return Interval(a.type, np.where(points, exact, full_lo), np.where(points, exact, full_hi),
                    np.zeros(exact.shape, bool))


# ---------------------------------------------------------------------------------------------
# The op table
# ---------------------------------------------------------------------------------------------


def apply_op(name: str, args: Sequence[Interval], result_type: str, *, predicate: str | None = None,
             rounding: str | None = None) -> Interval:
    """The interval of the scalar op `name` (MLIR name) on `args`, with result type `result_type`
    (f16, bf16, f32, f64, i32, i1)."""
    t = _name(result_type)
    a = args[0] if args else None
    if name == "arith.addf":
        return _add(args[0], args[1], t)
    if name == "arith.subf":
        return _sub(args[0], args[1], t)
    if name == "arith.mulf":
        return _mul(args[0], args[1], t)
    if name == "arith.divf":
        return _div(args[0], args[1], t)
    if name == "math.fma":
        return _fma(args[0], args[1], args[2], t)
    if name in ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"):
        pick = np.maximum if "max" in name else np.minimum
        return _maximum(args[0], args[1], t, propagate=name in ("arith.maximumf", "arith.minimumf"), pick=pick)
    if name == "arith.negf":
        return _neg(a, t)
    if name == "math.absf":
        return _abs(a, t)
    if name in ("arith.extf", "arith.truncf", "arith.sitofp"):
        return cast(a, t, rounding)
    if name == "arith.uitofp":  # the i32 bits as unsigned: monotone between the sign changes
        lo, hi = _as_unsigned(a.lo), _as_unsigned(a.hi)
        straddles = (a.lo < 0) & (a.hi >= 0)
        u = Interval("i32", np.where(straddles, 0, np.minimum(lo, hi)), np.where(straddles, 2**32 - 1, np.maximum(lo, hi)),
                     a.nan)
        return cast(u, t, rounding)
    if name == "arith.fptosi":
        return _fptosi(a)
    if name in _FUNCTIONS:
        return _transcendental(name, a, t)
    if name == "arith.cmpf":
        return cmpf(predicate, args[0], args[1])
    if name == "arith.cmpi":
        return cmpi(predicate, args[0], args[1])
    if name == "arith.select":
        return select(args[0], args[1], args[2])
    if name == "arith.addi":
        return _int_corners(np.add, args[0], args[1])
    if name == "arith.subi":
        return _int_corners(np.subtract, args[0], args[1])
    if name == "arith.muli":
        return _int_corners(np.multiply, args[0], args[1])
    if name == "arith.maxsi":
        return Interval(t, np.maximum(args[0].lo, args[1].lo), np.maximum(args[0].hi, args[1].hi), args[0].nan)
    if name == "arith.minsi":
        return Interval(t, np.minimum(args[0].lo, args[1].lo), np.minimum(args[0].hi, args[1].hi), args[0].nan)
    if name in ("arith.andi", "arith.ori", "arith.xori"):
        fn = {"arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor}[name]
        return _bitwise(fn, args[0], args[1])
    raise NotImplementedError(f"the epilogue reference has no semantics for {name}; it knows "
                              f"{', '.join(scalar_ops())}")


def scalar_ops() -> tuple[str, ...]:
    """The scalar ops the reference interprets."""
    return ("arith.constant", "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "math.fma",
            "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "arith.negf",
            "math.absf", "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
            *_FUNCTIONS, "arith.cmpf",
            "arith.cmpi", "arith.select", "arith.addi", "arith.subi", "arith.muli", "arith.maxsi",
            "arith.minsi", "arith.andi", "arith.ori", "arith.xori")


# ---------------------------------------------------------------------------------------------
# The tile IR
# ---------------------------------------------------------------------------------------------


def _scalar_type_name(t) -> str:
    from xdsl.dialects.builtin import IntegerType

    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    name = str(t)
    if name not in FLOAT_TYPES:
        raise NotImplementedError(f"the epilogue reference has no values of type {name}")
    return name


def _constant(op, shape) -> Interval:
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr

    t = _scalar_type_name(op.result.type)
    attr = op.value
    if isinstance(attr, IntegerAttr):
        v = int(attr.value.data)
        if t == "i1":
            v &= 1
        else:
            v = int(_wrap32(np.int64(v)))
        return Interval.point(np.full(shape, v, np.int64), t)
    if isinstance(attr, FloatAttr):
        return Interval.point(round_to(np.full(shape, float(attr.value.data)), t), t)
    raise NotImplementedError(f"arith.constant {attr}: the epilogue reference takes scalar constants")


def _map(op, args: list[Interval]) -> list[Interval]:
    """The body of a tile.map on intervals."""
    block = op.body.block
    env = dict(zip(block.args, args))
    shape = args[0].shape
    for inner in block.ops:
        if inner.name == "tile.yield":
            return [env[v] for v in inner.operands]
        if inner.name == "arith.constant":
            env[inner.results[0]] = _constant(inner, shape)
            continue
        predicate = None
        if inner.name in ("arith.cmpf", "arith.cmpi"):
            table = CMPF_PREDICATES if inner.name == "arith.cmpf" else CMPI_PREDICATES
            predicate = table[inner.predicate.value.data]
        rounding = None
        mode = inner.properties.get("roundingmode") or inner.attributes.get("roundingmode")
        if mode is not None:
            rounding = {0: "rn", 1: "rz"}.get(getattr(getattr(mode, "value", None), "data", None))
            if rounding is None:
                raise NotImplementedError(f"{inner.name}: rounding mode {mode} (the reference knows "
                                          f"to nearest even and toward zero)")
        result = apply_op(inner.name, [env[v] for v in inner.operands],
                          _scalar_type_name(inner.results[0].type), predicate=predicate, rounding=rounding)
        env[inner.results[0]] = result
    raise ValueError("tile.map body without tile.yield")


def _tile_element(value) -> str:
    from tilemma.dialects.attributes import element_name

    return _name(element_name(value.type.element_type))


_CASTS = {  # tile.cast pairs (dialects/element_tables.CAST_RULES, result side) -> default rounding
    ("f32", "f16"): "rn", ("f32", "bf16"): "rn", ("f32", "f8E4M3FN"): "rn", ("f32", "f8E5M2"): "rn",
    ("i32", "f32"): "rn", ("f64", "f32"): "rn", ("f16", "f32"): None, ("bf16", "f32"): None,
    ("f32", "f64"): None,
}


def evaluate_epilogue(ops: Sequence, acc, acc_interval: Interval,
                      inputs: Mapping[object, np.ndarray]) -> dict:
    """Run the epilogue (`GemmKernel.epilogue`: tile.map, tile.cast, tile.load, tile.broadcast,
    tile.constant in program order) on intervals: `acc` is the mma's result value and
    `acc_interval` its interval; `inputs` maps each tile.load / tile.broadcast op to its tile's
    values (already broadcast to the accumulator's shape, in the tile element's dtype). Returns
    the interval of every tile value (the mma result included)."""
    env: dict = {acc: acc_interval}
    shape = acc_interval.shape
    for op in ops:
        if op.name in ("tile.load", "tile.broadcast"):
            values = np.broadcast_to(np.asarray(inputs[op]), shape)
            env[op.results[0]] = Interval.point(values, _tile_element(op.results[0]))
        elif op.name == "tile.constant":
            t = _tile_element(op.results[0])
            v = np.full(shape, op.scalar())
            env[op.results[0]] = Interval.point(v if _is_int(t) else round_to(v, t), t)
        elif op.name == "tile.cast":
            src, dst = _tile_element(op.source), _tile_element(op.result)
            if (src, dst) not in _CASTS:
                raise NotImplementedError(f"the epilogue reference has no tile.cast {src} -> {dst}")
            rounding = str(op.rounding.data) if op.rounding is not None else _CASTS[(src, dst)]
            env[op.result] = cast(env[op.source], dst, rounding)
        elif op.name == "tile.map":
            for r, value in zip(op.outputs, _map(op, [env[v] for v in op.inputs])):
                env[r] = value
        else:
            raise NotImplementedError(f"the epilogue reference cannot evaluate {op.name}")
    return env


# ---------------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """Outcome of `check`: elements outside their interval, the first (C order), distances."""

    ok: bool
    n_bad: int
    first_bad_index: tuple[int, ...] | None
    max_abs: float  # largest |got - middle of its interval| over finite elements
    max_rel: float  # the same relative to |middle|
    detail: str = ""

    def __str__(self) -> str:
        return self.detail


def _fmt(x: float, t: str) -> str:
    return repr(int(x)) if _is_int(t) else repr(float(x))


def check(got, interval: Interval, what: str = "output") -> Check:
    """Does every element of `got` lie in its interval? (See Interval.contains.)"""
    g = np.asarray(got)
    if g.shape != interval.shape:
        raise ValueError(f"{what}: shape {g.shape}, the reference's is {interval.shape}")
    ok = interval.contains(g)
    gf = g.astype(np.float64)
    lo, hi = interval.lo.astype(np.float64), interval.hi.astype(np.float64)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mid = lo / 2 + hi / 2
        finite = np.isfinite(gf) & np.isfinite(mid)
        diff = np.where(finite, np.abs(gf - mid), 0.0)
        rel = np.where(finite & (mid != 0), diff / np.abs(np.where(mid == 0, 1, mid)), 0.0)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    bad = ~ok
    n_bad = int(np.count_nonzero(bad))
    if not n_bad:
        return Check(True, 0, None, max_abs, max_rel,
                     f"{what}: all {g.size} elements inside the reference's intervals")
    index = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), bad.shape))
    t = interval.type
    want = ("NaN" if interval.empty[index] else
            f"[{_fmt(interval.lo[index], t)}, {_fmt(interval.hi[index], t)}]"
            + (" or NaN" if interval.nan[index] else ""))
    detail = (f"{what}: {n_bad} of {g.size} elements outside the reference's intervals; first at "
              f"{index}: got {_fmt(gf[index], t) if not np.isnan(gf[index]) else 'NaN'}, want {want}")
    return Check(False, n_bad, index, max_abs, max_rel, detail)
