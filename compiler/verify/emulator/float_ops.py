"""Floating-point instructions of the epilogue: IEEE arithmetic, comparisons, conversions, packing,
and the approximate special functions, each decoded once into a closure over whole register rows.

Exact instructions (PTX gives them one correct answer) are modelled bit for bit:

* `add`/`sub`/`mul`/`div`/`sqrt`/`rcp` `.rn` on .f32 and .f64: NumPy's float32/float64
  operations, which are the IEEE ones (round to nearest even, subnormals kept); a plain
  `add.f32`/`sub.f32`/`mul.f32` is `.rn`.
* `fma.rn` (and `mad.rn`): .f32 as the exact product (a float64 product of two f32 is exact), an
  exact sum (TwoSum), the sum rounded to odd at 53 bits and that rounded to f32 (rounding to odd
  first makes the double rounding correct: 53 >= 24 + 2); .f64 is `mma_arith.fma_chain`, the
  IEEE fma already proved on an H100.
* NaN results, as an H100 gives them (`tools/epilogue_probe.py`): every .f32 instruction that
  computes a NaN - `neg.f32` and `abs.f32` of a NaN included - gives the canonical NaN
  0x7FFFFFFF; `copysign` only moves sign bits. .f64: an operand's NaN, quieted (sign and payload
  kept) - for add/sub/mul the second operand's when both are NaN, for div/sqrt/rcp the first's;
  `neg.f64`/`abs.f64` of a NaN give it back quieted, sign unchanged; NaN made from numbers
  (Inf - Inf, 0 x Inf, ...) is the default NaN 0xFFF8000000000000.
* `min`/`max`: NaN-ignoring (one NaN operand gives the other, two give the canonical NaN),
  -0 < +0; `.NaN` (f32 only) propagates the canonical NaN.
* `setp`: the ordered comparisons are false on a NaN operand, the unordered (`equ` ... `geu`)
  true; `num`/`nan`.
* `cvt`: f32 -> f16/bf16 (.rn/.rz/.rm/.rp, .satfinite; NaN -> 0x7FFF), packed f16x2/bf16x2
  (.rn/.rz; upper half from a, lower from b), f32 -> e4m3x2/e5m2x2 `.rn.satfinite` (upper byte
  from a; NaN -> 0x7F), the exact widenings f16 -> f32 (NaN -> canonical), bf16 -> f32 (the bits
  moved up, NaNs untouched), f32 -> f64 (NaN quieted, payload kept), f64 -> f32 and s32/u32 ->
  f32 with any rounding mode. Each rounds the exact source value once (f32, f64 and 32-bit
  integers are exact in float64).
* `mov.bN d, {x, y, ...}` packs registers (the first is the least significant), `mov.bN {x, y},
  s` unpacks.

Approximate instructions (`ex2`, `lg2`, `tanh`, `rcp`, `rsqrt`, `sqrt` with `.approx`): the ISA
gives an error bound, not the bits; the GPU's MUFU unit is not modelled bit for bit. Each is the
function computed in float64 (NumPy's libm, error below 1 float64 ulp) rounded to nearest f32, so
it is the correctly rounded result except where the float64 value falls within a float64 ulp of
an f32 rounding boundary; special inputs as the ISA's tables say; `.ftz` flushes subnormal inputs
and results to sign-preserving zero. The ISA's bounds are in `APPROX_BOUNDS`. How close an H100
comes (`tools/epilogue_probe.py`, every result also within the ISA's bound): ex2 91% of results
bit-identical to the model, at most 2 ulp apart; rcp 87%, sqrt 83%, rsqrt 79%, 1 ulp apart at
most; tanh 90%, up to 125 ulp apart (its bound is 2**-11 relative); lg2 45% (absolute 2**-22
near 1). Every exact instruction above is bit-identical to the H100 on all probe inputs.

Anything else (`.ftz`/`.sat` on exact arithmetic, directed rounding of arithmetic, `.relu`,
`div.approx`/`div.full`, ...) raises `EmulationError` naming what is unsupported.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.emulator import alu
from tilemma.compiler.verify.emulator.machine import _TYPES, _UNSIGNED, EmulationError, _per_thread
from tilemma.compiler.verify.emulator.operands import Fn, _Imm, _Reg, _Vec, _one, _reader, _writer

FLOATS = ("f32", "f64")
CANONICAL_NAN32 = np.uint32(0x7FFFFFFF)
DEFAULT_NAN64 = np.uint64(0xFFF8000000000000)  # a NaN made from non-NaN operands (Inf - Inf, 0 x Inf)
_QUIET64 = np.uint64(1 << 51)

# The ISA's stated error of each approximate instruction (PTX ISA 9.1, "Floating Point Instructions"):
# (kind, value): "ulp_cr" = ulps from the correctly rounded result, "ulp" = ulps from the exact
# value, "rel" = relative error,
# "abs" = absolute error, "lg2" = absolute 2**-22 in (0.5, 2), relative 2**-22 elsewhere.
APPROX_BOUNDS = {
    "ex2": ("ulp_cr", 2.0),  # "maximum ulp error is 2 ulp from correctly rounded result across the full range"
    "lg2": ("lg2", 2.0**-22),
    "tanh": ("rel", 2.0**-11),  # "maximum relative error over the entire floating point range is 2^-11"
    "rcp": ("ulp", 1.0),  # "maximum ulp error is 1 across the full range of inputs"
    "rsqrt": ("rel", 2.0**-22.9),
    "sqrt": ("rel", 2.0**-23),
}


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def canonical32(x) -> np.ndarray:
    """float32 values with every NaN replaced by the canonical 0x7FFFFFFF."""
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.isnan(x), CANONICAL_NAN32, x.view(np.uint32)).astype(np.uint32).view(np.float32)


def _nan64(out: np.ndarray, *operands) -> np.ndarray:
    """NaN results of a .f64 instruction: the first of `operands` that is a NaN, quieted (sign and
    payload kept); NaN made from numbers is the default NaN."""
    out = np.asarray(out, dtype=np.float64)
    bits = np.where(np.isnan(out), DEFAULT_NAN64, out.view(np.uint64))
    for v in reversed(operands):
        v = np.asarray(v, dtype=np.float64)
        bits = np.where(np.isnan(v), v.view(np.uint64) | _QUIET64, bits)
    return np.where(np.isnan(out), bits, out.view(np.uint64)).view(np.float64)


def round_to_odd(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The exact value hi + lo (hi its float64 rounding to nearest) rounded to odd at 53 bits:
    rounding that once more, to any narrower format, gives that format's correct rounding."""
    return mma_arith._odd(hi, lo)


def f64_to_f32(v: np.ndarray, mode: str = "rn") -> np.ndarray:
    """float64 values (exact sources) rounded once to float32 by `mode` (rn/rz/rm/rp)."""
    with np.errstate(invalid="ignore"):
        v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = v.astype(np.float32)
    return _directed(r, v, mode)


def _directed(r: np.ndarray, v: np.ndarray, mode: str) -> np.ndarray:
    """Given r = RN(v) in a narrower float type, the rounding of v by `mode`: step r one place
    toward zero / -inf / +inf where RN went the wrong way."""
    if mode == "rn":
        return r
    rd = r.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if mode == "rz":
            step, to = np.abs(rd) > np.abs(v), np.zeros_like(r)
        elif mode == "rm":
            step, to = rd > v, np.full_like(r, -np.inf)
        elif mode == "rp":
            step, to = rd < v, np.full_like(r, np.inf)
        else:
            raise ValueError(f"unknown rounding mode {mode!r}")
    with np.errstate(over="ignore"):
        return np.where(step, np.nextafter(r, to), r)


def fma32(a, b, c) -> np.ndarray:
    """fma.rn.f32: a * b + c rounded once (canonical NaN)."""
    with np.errstate(invalid="ignore", over="ignore"):
        a64, b64, c64 = (np.asarray(v, dtype=np.float32).astype(np.float64) for v in (a, b, c))
        p = a64 * b64  # exact: 24 x 24 significand bits, exponents far inside float64's
        s = p + c64
        z = s - p
        err = (p - (s - z)) + (c64 - z)  # TwoSum: s + err == p + c exactly
        finite = np.isfinite(s)
        v = np.where(finite, round_to_odd(np.where(finite, s, 0.0), np.where(finite, err, 0.0)), s)
        return canonical32(v.astype(np.float32))


def fma64(a, b, c) -> np.ndarray:
    """fma.rn.f64 (the H100-proved IEEE fma of mma_arith, NaNs as measured there)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
    col = (-1, 1, 1)
    return mma_arith.fma_chain(a.reshape(col), b.reshape(col), c.reshape(col), "rn").reshape(a.shape)


def f32_to_f16(x, mode: str = "rn", satfinite: bool = False) -> np.ndarray:
    """f32 values -> float16 (cvt.<mode>[.satfinite].f16.f32); NaN -> 0x7FFF."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        r = _directed(x.astype(np.float16), x.astype(np.float64), mode)
    if satfinite:
        r = np.where(np.isinf(r), np.copysign(np.float16(65504.0), x).astype(np.float16), r)
    bits = np.where(np.isnan(x), np.uint16(0x7FFF), r.view(np.uint16)).astype(np.uint16)
    return bits.view(np.float16)


def f32_to_bf16_bits(x, mode: str = "rn", satfinite: bool = False) -> np.ndarray:
    """f32 values -> bf16 bit patterns (cvt.<mode>[.satfinite].bf16.f32); NaN -> 0x7FFF."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    sign = b >> np.uint64(31)
    mag = b & np.uint64(0x7FFFFFFF)
    trunc = mag >> np.uint64(16)
    rest = mag & np.uint64(0xFFFF)
    if mode == "rn":
        r = (mag + np.uint64(0x7FFF) + (trunc & np.uint64(1))) >> np.uint64(16)
    elif mode == "rz":
        r = trunc
    elif mode in ("rm", "rp"):
        away = (sign == 1) if mode == "rm" else (sign == 0)
        r = trunc + ((rest != 0) & away).astype(np.uint64)
    else:
        raise ValueError(f"unknown rounding mode {mode!r}")
    nan = mag > np.uint64(0x7F800000)
    if satfinite:
        r = np.where(r >= np.uint64(0x7F80), np.uint64(0x7F7F), r)
    r = r | (sign << np.uint64(15))
    return np.where(nan, np.uint64(0x7FFF), r).astype(np.uint16)


_F8 = {"e4m3x2": (ml_dtypes.float8_e4m3fn, 448.0), "e5m2x2": (ml_dtypes.float8_e5m2, 57344.0)}


def f32_to_f8_bits(x, kind: str) -> np.ndarray:
    """f32 values -> fp8 bytes as cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32: nearest even, beyond the
    largest finite (infinities too) the largest of that sign, NaN -> 0x7F."""
    dt, big = _F8[kind]
    x = np.asarray(x, dtype=np.float32)
    clamped = np.clip(np.where(np.isnan(x), 0.0, x), -big, big).astype(np.float32)
    bits = clamped.astype(dt).view(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), bits).astype(np.uint8)


def _flush32(x: np.ndarray) -> np.ndarray:
    """.ftz: subnormal f32 values become zero of the same sign."""
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.abs(x) < np.float32(2.0**-126), np.copysign(np.float32(0.0), x), x).astype(np.float32)


@np.errstate(all="ignore")
def approx32(fn: str, x, ftz: bool = False) -> np.ndarray:
    """The model of `<fn>.approx[.ftz].f32`: the float64 function rounded to f32 (canonical NaN);
    the ISA's special values; .ftz flushes subnormal inputs and results."""
    x = np.asarray(x, dtype=np.float32)
    if ftz:
        x = _flush32(x)
    v = x.astype(np.float64)
    if fn == "ex2":
        r = np.exp2(v)
    elif fn == "lg2":
        r = np.where(v < 0, np.nan, np.log2(np.abs(v)))  # log2(+-0) = -inf
    elif fn == "tanh":
        r = np.tanh(v)
    elif fn == "rcp":
        r = 1.0 / v
    elif fn == "rsqrt":
        r = np.where(v == 0, np.copysign(np.inf, v), 1.0 / np.sqrt(v))  # rsqrt(-0) = -inf
    elif fn == "sqrt":
        r = np.sqrt(v)  # sqrt(-0) = -0
    else:
        raise ValueError(f"no approximate model for {fn!r}")
    out = r.astype(np.float32)
    if ftz:
        out = _flush32(out)
    return canonical32(out)


# ---------------------------------------------------------------------------------------------
# Decoders
# ---------------------------------------------------------------------------------------------


def _float_type(mods: list[str]) -> str | None:
    return mods[-1] if mods and mods[-1] in FLOATS else None


def _refuse(where: str, what: str, mods: list[str], allowed: str) -> EmulationError:
    return EmulationError(f"{where}: {what}.{'.'.join(mods)} is not supported by the emulator (it models {allowed})")


def _lift(f):
    """Wrap an elementwise NumPy computation so numpy's floating-point warnings stay quiet."""

    def run(*xs):
        with np.errstate(all="ignore"):
            return f(*xs)

    return run


_ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _arith_fn(head: str, t: str):
    """add/sub/mul/div .rn: NumPy's IEEE float32/float64 operation, NaNs as the GPU makes them."""
    op = _ARITH[head]
    if t == "f32":
        return _lift(lambda a, b: canonical32(op(a, b)))
    if head == "div":
        return _lift(lambda a, b: _nan64(op(a, b), a, b))
    return _lift(lambda a, b: _nan64(op(a, b), b, a))  # DADD/DMUL: the second operand's NaN first


def _dec_float_binary(d, op, mods, args, where, head: str) -> Fn:
    t = mods[-1]
    rounding = mods[:-1]
    ok = rounding == ["rn"] or (not rounding and head in ("add", "sub", "mul"))
    if not ok:
        raise _refuse(where, head, mods, f"{head}{'.rn' if head == 'div' else '[.rn]'}.f32/.f64")
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where)
    f = _arith_fn(head, t)
    return lambda m, mask: write(m, f(ra(m), rb(m)), mask)


def dec_add_sub(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    if _float_type(mods) is None:
        return alu._dec_binary(d, op, mods, args, where)
    return _dec_float_binary(d, op, mods, args, where, head)


def dec_mul(d, op, mods, args, where) -> Fn:
    if _float_type(mods) is None:
        return alu._dec_mul_mad(d, op, mods, args, where)
    return _dec_float_binary(d, op, mods, args, where, "mul")


def dec_div(d, op, mods, args, where) -> Fn:
    if _float_type(mods) is None:
        return alu._dec_div_rem(d, op, mods, args, where)
    return _dec_float_binary(d, op, mods, args, where, "div")


def dec_fma(d, op, mods, args, where) -> Fn:
    """fma.rn.f32 / .f64, and mad.rn.f32 / .f64 (the same fused operation)."""
    head = op.opcode.data.split(".")[0]
    t = _float_type(mods)
    if t is None and head == "mad":
        return alu._dec_mul_mad(d, op, mods, args, where)
    if t is None or mods[:-1] != ["rn"]:
        raise _refuse(where, head, mods, f"{head}.rn.f32 and {head}.rn.f64")
    dst, a, b, c = _one(d, op, args, 4, where)
    ra, rb, rc = (_reader(d, x, t, where) for x in (a, b, c))
    write, f = _writer(dst, where), (fma32 if t == "f32" else fma64)

    def run(m, mask):
        x, y, z = np.broadcast_arrays(*(np.asarray(r(m)) for r in (ra, rb, rc)))
        write(m, _per_thread(f(x, y, z), m.T), mask)

    return run


def _sign_op(head: str, t: str):
    """neg/abs: the sign bit flipped / cleared, a NaN as the GPU gives it (f32: canonical, f64:
    quieted with its sign unchanged); copysign(a, b): b's other bits with a's sign bit."""
    u = _UNSIGNED[_TYPES[t].itemsize]
    sign = u.type(1 << (8 * u.itemsize - 1))
    dt = _TYPES[t]
    if head == "copysign":
        return lambda a, b: (np.asarray(b).view(u) & ~sign) | (np.asarray(a).view(u) & sign)
    flip = (lambda w: w ^ sign) if head == "neg" else (lambda w: w & ~sign)
    if t == "f32":
        nan_bits = lambda w: np.full_like(w, CANONICAL_NAN32)  # noqa: E731
    else:
        nan_bits = lambda w: w | _QUIET64  # noqa: E731

    def run(a):
        w = np.asarray(a).view(u)
        return np.where(np.isnan(w.view(dt)), nan_bits(w), flip(w)).astype(u)

    return run


def dec_abs_neg(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    t = _float_type(mods)
    if t is None:
        return alu._dec_abs_neg(d, op, mods, args, where)
    if len(mods) != 1:
        raise _refuse(where, head, mods, f"{head}.f32 and {head}.f64")
    dst, a = _one(d, op, args, 2, where)
    ra, write, f = _reader(d, a, t, where), _writer(dst, where), _sign_op(head, t)
    return lambda m, mask: write(m, _per_thread(f(np.asarray(ra(m))), m.T), mask)


def dec_copysign(d, op, mods, args, where) -> Fn:
    """copysign.f32/.f64 d, a, b: b's magnitude with a's sign."""
    if mods not in (["f32"], ["f64"]):
        raise _refuse(where, "copysign", mods, "copysign.f32 and copysign.f64")
    t = mods[0]
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write, f = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where), _sign_op("copysign", t)
    return lambda m, mask: write(m, _per_thread(f(np.asarray(ra(m)), np.asarray(rb(m))), m.T), mask)


def minmax(head: str, a, b, nan_mode: bool, t: str) -> np.ndarray:
    """PTX min/max: -0 < +0; NaN-ignoring (one NaN: the other operand; two: the canonical NaN
    for f32, the second NaN quieted for f64), or with .NaN the canonical NaN for any NaN."""
    dt = _TYPES[t]
    a, b = np.broadcast_arrays(np.asarray(a, dtype=dt), np.asarray(b, dtype=dt))
    with np.errstate(invalid="ignore"):
        pick_a = (a > b) if head == "max" else (a < b)
        zeros = (a == 0) & (b == 0)
        # both zero: max takes the +0 (a unless a is -0), min the -0 (a unless a is +0)
        pick_a = np.where(zeros, np.signbit(a) != (head == "max"), pick_a)
    r = np.where(pick_a, a, b)
    na, nb = np.isnan(a), np.isnan(b)
    if t == "f32":
        both = CANONICAL_NAN32.view(np.float32)
    else:  # two NaNs: the second, quieted (as an H100 gives it)
        both = (b.view(np.uint64) | _QUIET64).view(np.float64)
    if nan_mode:
        return np.where(na | nb, CANONICAL_NAN32.view(np.float32), r)
    r = np.where(na, b, np.where(nb, a, r))
    return np.where(na & nb, both, r)


def dec_min_max(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    t = _float_type(mods)
    if t is None:
        return alu._dec_binary(d, op, mods, args, where)
    quals = mods[:-1]
    if quals not in ([], ["NaN"]) or (quals and t != "f32"):
        raise _refuse(where, head, mods, f"{head}.f32, {head}.NaN.f32 and {head}.f64")
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where)
    nan_mode = bool(quals)
    return lambda m, mask: write(m, _per_thread(minmax(head, ra(m), rb(m), nan_mode, t), m.T), mask)


_ORDERED = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}  # fmt: skip
FLOAT_CMPS = (*_ORDERED, *(c + "u" for c in _ORDERED), "num", "nan")


def compare(cmp: str, a, b) -> np.ndarray:
    """setp.<cmp>.fN of the ISA's tables: ordered comparisons are false when either is NaN, the
    unordered ones (`equ`, ...) true; num: neither is NaN; nan: either is."""
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a) | np.isnan(b)
    if cmp == "num":
        return ~nan
    if cmp == "nan":
        return nan
    with np.errstate(invalid="ignore"):
        if cmp in _ORDERED:
            return _ORDERED[cmp](a, b) & ~nan
        return _ORDERED[cmp[:-1]](a, b) | nan


def dec_setp(d, op, mods, args, where) -> Fn:
    t = _float_type(mods)
    if t is None:
        return alu._dec_setp(d, op, mods, args, where)
    if len(mods) != 2 or mods[0] not in FLOAT_CMPS:
        raise _refuse(where, "setp", mods, f"setp.CMP.f32/.f64 with CMP in {', '.join(FLOAT_CMPS)}")
    if "|" in args[0]:
        raise EmulationError(f"{where}: the p|q destination form is not supported")
    cmp = mods[0]
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where)
    return lambda m, mask: write(m, _per_thread(compare(cmp, ra(m), rb(m)), m.T), mask)


# ---------------------------------------------------------------------------------------------
# mov with vectors: packing and unpacking
# ---------------------------------------------------------------------------------------------


def dec_mov(d, op, mods, args, where) -> Fn:
    if not any(a.strip().startswith("{") for a in args):
        return alu._dec_mov(d, op, mods, args, where)
    if len(mods) != 1 or mods[0] not in ("b32", "b64"):
        raise EmulationError(f"{where}: packing/unpacking mov takes .b32 or .b64")
    bits = 32 if mods[0] == "b32" else 64
    dst, src = _one(d, op, args, 2, where)
    if isinstance(dst, _Vec) == isinstance(src, _Vec):
        raise EmulationError(f"{where}: expected mov.{mods[0]} d, {{a, b, ..}} or mov.{mods[0]} {{a, b, ..}}, s")
    parts = dst.items if isinstance(dst, _Vec) else src.items
    n = len(parts)
    if n < 2 or bits % n or bits // n not in (8, 16, 32):
        raise EmulationError(f"{where}: cannot split .b{bits} into {n} parts")
    w = bits // n
    wide, part = _UNSIGNED[bits // 8], _UNSIGNED[w // 8]
    ptype = f"u{w}"
    if isinstance(src, _Vec):  # pack
        for p in parts:
            if isinstance(p, _Reg) and p.storage.itemsize * 8 != w:
                raise EmulationError(f"{where}: {p.name} is not a {w}-bit register")
        reads = [_reader(d, p, ptype, where) for p in parts]
        write = _writer(dst, where)

        def pack(m, mask):
            acc = np.zeros(m.T, dtype=wide)
            for i, r in enumerate(reads):
                acc |= np.asarray(r(m)).astype(wide) << wide.type(w * i)
            write(m, acc, mask)

        return pack
    for p in parts:
        if not isinstance(p, _Reg) or p.storage.itemsize * 8 != w:
            raise EmulationError(f"{where}: every destination of an unpacking mov must be a {w}-bit register")
    read = _reader(d, src, f"u{bits}", where)
    writes = [_writer(p, where) for p in parts]
    mask_w = wide.type((1 << w) - 1)

    def unpack(m, mask):
        x = _per_thread(read(m), m.T)
        for i, wr in enumerate(writes):
            wr(m, ((x >> wide.type(w * i)) & mask_w).astype(part), mask)

    return unpack


# ---------------------------------------------------------------------------------------------
# cvt
# ---------------------------------------------------------------------------------------------

_ROUNDINGS = ("rn", "rz", "rm", "rp")


def _bits16_reader(d, operand, where: str):
    """The low 16 bits of an operand (a .b16/.f16 register, or the low half of a wider one)."""
    return _reader(d, operand, "u16", where)


def dec_cvt(d, op, mods, args, where) -> Fn:
    """The float conversions listed in the module docstring; integer <-> integer and tf32 stay
    with `alu._dec_cvt`."""
    if not mods or any(x in mods for x in ("tf32",)) or all(x in alu._INT_TYPES for x in mods):
        return alu._dec_cvt(d, op, mods, args, where)
    rnd = mods[0] if mods[0] in _ROUNDINGS else None
    rest = mods[1:] if rnd else list(mods)
    sat = "satfinite" in rest
    rest = [x for x in rest if x != "satfinite"]
    if len(rest) != 2 or any(x in ("ftz", "sat", "relu", "rs", "rna") for x in rest):
        raise _refuse(where, "cvt", mods, "the conversions listed in float_ops")
    dst_t, src_t = rest
    key = (dst_t, src_t)
    packed = dst_t in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2")
    n_ops = 3 if packed else 2
    ops = _one(d, op, args, n_ops, where)
    write = _writer(ops[0], where)

    def need(rounds: tuple[str, ...], satok: bool) -> None:
        if (rnd not in rounds) or (sat and not satok):
            allowed = "/".join("." + r if r else "(none)" for r in rounds)
            raise _refuse(where, "cvt", mods, f"cvt.{dst_t}.{src_t} with rounding {allowed}"
                          + (" [.satfinite]" if satok else ""))

    if key == ("f32", "f16"):
        need((None,), False)
        rd = _bits16_reader(d, ops[1], where)
        return lambda m, mask: write(m, canonical32(np.asarray(rd(m)).astype(np.uint16).view(np.float16)), mask)
    if key == ("f32", "bf16"):  # the bits moved up, NaNs too (even signalling ones), as on an H100
        need((None,), False)
        rd = _bits16_reader(d, ops[1], where)
        return lambda m, mask: write(m, np.asarray(rd(m)).astype(np.uint32) << np.uint32(16), mask)
    if key == ("f64", "f32"):
        need((None,), False)
        rd = _reader(d, ops[1], "f32", where)
        return lambda m, mask: write(m, widen_f32_f64(np.asarray(rd(m))), mask)
    if key == ("f32", "f64"):
        need(_ROUNDINGS, False)
        rd = _reader(d, ops[1], "f64", where)
        return lambda m, mask: write(m, cvt_f64_f32(np.asarray(rd(m)), rnd), mask)
    if key in (("f32", "s32"), ("f32", "u32")):
        need(_ROUNDINGS, False)
        rd = _reader(d, ops[1], src_t, where)
        return lambda m, mask: write(m, f64_to_f32(np.asarray(rd(m)).astype(np.float64), rnd), mask)
    if key == ("f16", "f32"):
        need(_ROUNDINGS, True)
        rd = _reader(d, ops[1], "f32", where)
        return lambda m, mask: write(m, f32_to_f16(rd(m), rnd, sat).view(np.uint16), mask)
    if key == ("bf16", "f32"):
        need(_ROUNDINGS, True)
        rd = _reader(d, ops[1], "f32", where)
        return lambda m, mask: write(m, f32_to_bf16_bits(rd(m), rnd, sat), mask)
    if key in (("f16x2", "f32"), ("bf16x2", "f32")):
        need(("rn", "rz"), True)
        ra, rb = _reader(d, ops[1], "f32", where), _reader(d, ops[2], "f32", where)
        if dst_t == "f16x2":
            conv = lambda x: f32_to_f16(x, rnd, sat).view(np.uint16)  # noqa: E731
        else:
            conv = lambda x: f32_to_bf16_bits(x, rnd, sat)  # noqa: E731

        def pack16(m, mask):
            hi = conv(_per_thread(ra(m), m.T)).astype(np.uint32)
            lo = conv(_per_thread(rb(m), m.T)).astype(np.uint32)
            write(m, (hi << np.uint32(16)) | lo, mask)

        return pack16
    if key in (("e4m3x2", "f32"), ("e5m2x2", "f32")):
        if rnd != "rn" or not sat:
            raise _refuse(where, "cvt", mods, f"cvt.rn.satfinite.{dst_t}.f32 (PTX has no other form)")
        ra, rb = _reader(d, ops[1], "f32", where), _reader(d, ops[2], "f32", where)

        def pack8(m, mask):
            hi = f32_to_f8_bits(_per_thread(ra(m), m.T), dst_t).astype(np.uint16)
            lo = f32_to_f8_bits(_per_thread(rb(m), m.T), dst_t).astype(np.uint16)
            write(m, (hi << np.uint16(8)) | lo, mask)

        return pack8
    if key == ("f16", "f64") and rnd == "rn" and not sat:  # kept from the first emulator
        rd = _reader(d, ops[1], "f64", where)
        return lambda m, mask: write(m, _f64_to_f16(np.asarray(rd(m))), mask)
    raise _refuse(where, "cvt", mods, "the conversions listed in float_ops")


def _f64_to_f16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16)


def widen_f32_f64(x: np.ndarray) -> np.ndarray:
    """cvt.f64.f32: exact; a NaN keeps its sign and payload (quieted) - `_nan64`'s rule."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        v = x.astype(np.float64)
    nan_bits = ((x.view(np.uint32).astype(np.uint64) & np.uint64(0x80000000)) << np.uint64(32)) | np.uint64(
        0x7FF8000000000000) | ((x.view(np.uint32).astype(np.uint64) & np.uint64(0x3FFFFF)) << np.uint64(29))
    return np.where(np.isnan(x), nan_bits, v.view(np.uint64)).view(np.float64)


def cvt_f64_f32(x: np.ndarray, mode: str) -> np.ndarray:
    """cvt.<mode>.f32.f64: one rounding; a NaN keeps its sign and the top 22 payload bits,
    quieted (as an H100 gives it)."""
    x = np.asarray(x, dtype=np.float64)
    w = x.view(np.uint64)
    nan = ((w >> np.uint64(32)) & np.uint64(0x80000000)) | np.uint64(0x7FC00000) | (
        (w >> np.uint64(29)) & np.uint64(0x3FFFFF))
    return np.where(np.isnan(x), nan.astype(np.uint32), f64_to_f32(x, mode).view(np.uint32)).view(np.float32)


# ---------------------------------------------------------------------------------------------
# The special-function unit: ex2, lg2, tanh, rcp, rsqrt, sqrt
# ---------------------------------------------------------------------------------------------


def dec_special(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    exact = {("rcp", "rn", "f32"), ("rcp", "rn", "f64"), ("sqrt", "rn", "f32"), ("sqrt", "rn", "f64")}
    dst, a = _one(d, op, args, 2, where)
    write = _writer(dst, where)
    if len(mods) == 2 and (head, *mods) in exact:
        t = mods[1]
        ra = _reader(d, a, t, where)
        if head == "rcp":
            f = _lift(lambda x: canonical32(np.float32(1.0) / x) if t == "f32" else _nan64(1.0 / x, x))
        else:
            f = _lift(lambda x: canonical32(np.sqrt(x)) if t == "f32" else _nan64(np.sqrt(x), x))
        return lambda m, mask: write(m, _per_thread(f(np.asarray(ra(m))), m.T), mask)
    ftz = "ftz" in mods
    rest = [x for x in mods if x != "ftz"]
    allowed_ftz = head != "tanh"
    if rest != ["approx", "f32"] or (ftz and not allowed_ftz):
        forms = f"{head}.approx{'[.ftz]' if allowed_ftz else ''}.f32" + (
            f", {head}.rn.f32 and {head}.rn.f64" if head in ("rcp", "sqrt") else "")
        raise _refuse(where, head, mods, forms)
    ra = _reader(d, a, "f32", where)
    d.approximate.add(f"{head}.approx{'.ftz' if ftz else ''}.f32")
    return lambda m, mask: write(m, _per_thread(approx32(head, ra(m), ftz), m.T), mask)


# Registered in program._DECODERS (they fall back on alu's decoders for integer types).
DECODERS = {
    "add": dec_add_sub, "sub": dec_add_sub, "mul": dec_mul, "div": dec_div, "fma": dec_fma, "mad": dec_fma,
    "neg": dec_abs_neg, "abs": dec_abs_neg, "copysign": dec_copysign, "min": dec_min_max, "max": dec_min_max,
    "setp": dec_setp, "mov": dec_mov, "cvt": dec_cvt,
    "ex2": dec_special, "lg2": dec_special, "tanh": dec_special, "rcp": dec_special, "rsqrt": dec_special,
    "sqrt": dec_special,
}  # fmt: skip
