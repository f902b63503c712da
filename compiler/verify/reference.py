"""NumPy reference for D = A*B + C with the element semantics of PTX `mma` and `cuda::tiles::mma`.

This is the numeric truth a compiled kernel is compared against, so it shares nothing with the GPU
code but tf32's rounding of an f32 (`mma_arith.round_tf32`, the conversion's definition) and the
element records (`compiler/core/elements`: names, widths, dtypes, which are facts, not code): values
come from ml_dtypes/NumPy, products and sums are formed in float64 or int64 where they
are exact, and only the final result is rounded to the accumulator type.

What the ISA fixes and what it leaves open (PTX ISA, mma, "Precision and rounding"):

* Floating point: the element products are formed exactly for f16/bf16/tf32/fp8/fp6/fp4 (their
  significands are at most 11 bits, so a product fits in float64's 53 bits exactly; so do f32
  products, 24+24 bits). Accumulation is at least single precision (at least half precision when C
  and D are f16), but *order, rounding and subnormal handling are unspecified*. The reference is
  therefore the exactly computed sum rounded once to the accumulator type, and `compare` accepts
  any result within an error bound that any legal accumulation order and rounding satisfies.
* f64: element product and add are f64 FMAs. The reference sums with an error-free (Dot2) scheme,
  so its own error is about one f64 rounding of the result.
* Integers: products are exact, the sum is formed in s32 and *wraps* (two's complement) unless
  `.satfinite`, which clamps to [INT32_MIN, INT32_MAX]. The reference forms the exact sum in int64
  and then wraps or clamps it once. (With .satfinite the hardware's accumulation order could in
  principle saturate part way through; the ISA does not say, so tests at the boundary should use
  terms of one sign.)
* b1: "multiplication" is AND or XOR of a K-bit row of A with a K-bit column of B, followed by popc;
  the count is added to the s32 C (wrapping).

Element types are named as MLIR spells them (xDSL builtin types): f16, bf16, tf32, f32, f64, si8,
ui8, si4, ui4, i1, f8E4M3FN, f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN, f8E8M0FNU, and si32 (i32 is an
alias) for the integer accumulator. The scale type .ue4m3 has no MLIR builtin; it is `ue4m3`, kept
in `SCALE_TYPES` (not an mma element type), and `ue8m0` names f8E8M0FNU where a scale is expected.

Block scaling (`scaled_mma_reference`, PTX ISA 9.7.14.3): D = (A * SF_A)(B * SF_B) + C, each row
of A (column of B) split along K into blocks of `block` elements, each multiplied by its own scale.
Every scaled product a*sa*b*sb is exact in float64 (at most 4 + 4 + 4 + 4 significant bits, and
exponents far inside float64's range), so the reference is again the float64 sum rounded once.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from tilemma.compiler.core.elements import ALIASES, ELEMENTS, SCALES, Element
from tilemma.compiler.verify.mma_arith import round_tf32

__all__ = [
    "ElementType",
    "ELEMENT_TYPES",
    "element_type",
    "random_matrix",
    "as_type",
    "to_bits",
    "from_bits",
    "round_tf32",
    "cvt_rn_f16",
    "cvt_rn_bf16",
    "mma_reference",
    "matmul_result_type",
    "error_bound",
    "SCALE_TYPES",
    "BlockScales",
    "scale_type",
    "scaled_mma_reference",
    "scaled_error_bound",
    "Comparison",
    "compare",
    "INT32_MIN",
    "INT32_MAX",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


# The element records (`compiler/core/elements`): value dtype, bits, kind, signedness, PTX suffix,
# mantissa bits. ELEMENT_TYPES are the MLIR types mma multiplies (floats, then integers, then
# i1); the scale-only .ue4m3 has no MLIR builtin type (values held in float8_e4m3fn, never
# negative) and is kept apart in SCALE_TYPES.
ElementType = Element
_KIND_ORDER = ("float", "int", "bit")
ELEMENT_TYPES: dict[str, ElementType] = {
    e.name: e for e in sorted(ELEMENTS.values(), key=lambda e: _KIND_ORDER.index(e.kind)) if e.builtin
}
SCALE_TYPES: dict[str, ElementType] = {e.name: e for e in ELEMENTS.values() if not e.builtin}

_ALIASES = {"i32": "si32"}
_SCALE_ALIASES = {ptx: name for ptx, name in ALIASES.items() if name in SCALES}


def element_type(name: str | ElementType) -> ElementType:
    """Look an element type up by its MLIR name (ElementType passes through)."""
    if isinstance(name, ElementType):
        return name
    if name in SCALE_TYPES:
        return SCALE_TYPES[name]
    try:
        return ELEMENT_TYPES[_ALIASES.get(name, name)]
    except KeyError:
        raise ValueError(
            f"unknown element type {name!r}; known: {', '.join([*ELEMENT_TYPES, *SCALE_TYPES])}"
        ) from None


def scale_type(name: str | ElementType) -> ElementType:
    """A block-scale type by MLIR or PTX name: f8E8M0FNU (= ue8m0) or ue4m3."""
    et = element_type(_SCALE_ALIASES.get(name, name) if isinstance(name, str) else name)
    if et.name not in SCALES:
        known = ", ".join(n if ELEMENTS[n].ptx == n else f"{n} / {ELEMENTS[n].ptx}" for n in SCALES)
        raise ValueError(f"{et.name} is not a block-scale type ({known})")
    return et


def matmul_result_type(operand_type: str) -> str:
    """cuda::tiles::matmul_result_t element type: 8-bit ints -> si32, fp8/f16 -> f16, bf16/tf32/f32
    -> f32, f64 -> f64."""
    et = element_type(operand_type)
    if et.is_int and et.bits == 8:
        return "si32"
    table = {"f8E4M3FN": "f16", "f8E5M2": "f16", "f16": "f16", "bf16": "f32", "tf32": "f32",
             "f32": "f32", "f64": "f64"}
    if et.name not in table:
        raise ValueError(f"cuda::tiles::matmul has no result type for {et.name} operands")
    return table[et.name]


# ---------------------------------------------------------------------------------------------
# Values and bits
# ---------------------------------------------------------------------------------------------


def _tf32_bits_ok(values_f32: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values_f32, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0x1FFF)) == 0


def _exact_values(x, et: ElementType) -> np.ndarray:
    """Values of `x` as float64 (floats) or int64 (ints, bits), checking each is representable in `et`.

    A value that the type cannot hold is an error, not something to round silently: the reference
    must compute with exactly the values the kernel sees.
    """
    arr = np.asarray(x)
    if et.is_float:
        if arr.dtype == et.dtype and et.name != "tf32" and et.signed:
            return arr.astype(np.float64)
        vals = arr.astype(np.float64)
        if et.name == "tf32":
            as_f32 = vals.astype(np.float32)
            ok = (as_f32.astype(np.float64) == vals) | np.isnan(vals)
            ok &= _tf32_bits_ok(as_f32) | np.isnan(vals)
        elif et.name == "f64":
            return vals
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                back = vals.astype(et.dtype).astype(np.float64)
            ok = (back == vals) | (np.isnan(back) & np.isnan(vals))
        if not et.signed:  # ue4m3 (f8E8M0FNU cannot hold a negative value at all)
            ok &= ~(vals < 0)
        if not np.all(ok):
            bad = tuple(int(i) for i in np.argwhere(~ok)[0])
            raise ValueError(f"value {vals[bad]!r} at {bad} is not representable in {et.name}")
        return vals if et.signed else vals + 0.0  # -0.0 -> +0.0: an unsigned type has no sign
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{et.name} values must be integers")
    vals = arr.astype(np.int64)
    lo, hi = et.int_range
    if vals.size and (vals.min() < lo or vals.max() > hi):
        raise ValueError(f"{et.name} values must lie in [{lo}, {hi}]")
    return vals


def as_type(values, type: str | ElementType) -> np.ndarray:
    """`values` as an array of the type's value dtype; raises if any value is not representable."""
    et = element_type(type)
    vals = _exact_values(values, et)
    if et.name == "tf32":
        return vals.astype(np.float32)
    return vals.astype(et.dtype)


def to_bits(values, type: str | ElementType) -> np.ndarray:
    """Raw bit patterns as unsigned integers (uint16/32/64, uint8 for types of 8 bits or fewer).

    Sub-byte types (si4, ui4, f6*, f4*, i1) are returned in the low bits of a uint8, upper bits zero;
    si4 in two's complement. tf32 is its 32-bit register image (f32 layout, low 13 bits zero).
    """
    et = element_type(type)
    arr = np.ascontiguousarray(as_type(values, et))
    if et.is_float:
        bits = arr.view(et.code_dtype)
        if et.bits < 8:
            bits = bits & np.uint8((1 << et.bits) - 1)
        return bits.copy()
    if et.is_bit:
        return arr.astype(np.uint8) & np.uint8(1)
    as_int = arr.astype(np.int64) & ((1 << et.bits) - 1)
    return as_int.astype(et.code_dtype)


def from_bits(bits, type: str | ElementType) -> np.ndarray:
    """Inverse of `to_bits`: values (in the type's dtype) from raw bit patterns in the low bits.

    ue4m3 ignores bit 7 (it has no sign; what the hardware is reported to do with a set one)."""
    et = element_type(type)
    raw = np.asarray(bits)
    if raw.dtype.kind not in "ui":
        raise TypeError("bit patterns must be an integer array")
    wide = raw.astype(np.uint64)
    if et.bits < 64 and np.any(wide >> np.uint64(et.bits)):
        raise ValueError(f"bit patterns wider than {et.bits} bits for {et.name}")
    if et.is_float:
        if et.name == "ue4m3":
            wide = wide & np.uint64(0x7F)
        values = np.ascontiguousarray(wide.astype(et.code_dtype)).view(et.dtype).copy()
        if et.name == "tf32" and not np.all(_tf32_bits_ok(values)):
            raise ValueError("tf32 bit patterns must have the low 13 bits zero")
        return values
    if et.is_bit:
        return wide.astype(np.uint8)
    signed = wide.astype(np.int64)
    if et.signed:
        sign = 1 << (et.bits - 1)
        signed = (signed ^ sign) - sign
    return signed.astype(et.dtype)


def cvt_rn_f16(x_f32) -> np.ndarray:
    """f32 -> f16 round to nearest even (`cvt.rn.f16.f32`); overflow gives infinity."""
    with np.errstate(over="ignore"):
        return np.asarray(x_f32, dtype=np.float32).astype(np.float16)


def cvt_rn_bf16(x_f32) -> np.ndarray:
    """f32 -> bf16 round to nearest even (`cvt.rn.bf16.f32`)."""
    return np.asarray(x_f32, dtype=np.float32).astype(ml_dtypes.bfloat16)


# ---------------------------------------------------------------------------------------------
# Random operands
# ---------------------------------------------------------------------------------------------

_MIN_MAG = 2.0**-3
_MAX_MAG = 2.0


def _normal_codes_in_range(et: ElementType, lo: float, hi: float) -> np.ndarray:
    """All finite, normal, nonzero values of a <= 8-bit float type with lo <= |v| <= hi."""
    codes = np.arange(1 << et.bits, dtype=np.uint8)
    values = codes.view(et.dtype).astype(np.float64)
    tiny = float(ml_dtypes.finfo(et.dtype).tiny)  # smallest normal
    mag = np.abs(values)
    keep = np.isfinite(values) & (mag >= max(lo, tiny)) & (mag <= hi)
    return np.unique(values[keep])


def random_matrix(type: str | ElementType, shape, rng: np.random.Generator) -> np.ndarray:
    """Random, exactly representable, non-trivial values of `type` in the type's value dtype.

    Ranges (chosen so that f16 accumulation cannot overflow: |a*b| <= 4, so |sum| <= 4*K + |c|,
    which stays below f16's 65504 for K up to 4096, and so that no value is subnormal, whose handling
    the ISA leaves unspecified):

    * f16, bf16, tf32, f32, f64: sign * 2**u with u uniform in [-3, 1), rounded to the type, so
      1/8 <= |v| <= 2 with both signs and full mantissas.
    * f8E4M3FN, f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN: uniform over the type's normal values with
      1/8 <= |v| <= 2, both signs (e2m3 and e2m1 have no normal values below 1, so theirs are [1, 2]).
    * f8E8M0FNU (a scale): 2**e with e uniform in [-4, 4] (never the NaN code 0xFF).
    * ue4m3 (a scale): uniform over the normal e4m3 values in [2**-4, 2**4], non-negative.
    * si8, ui8, si4, ui4, si32: uniform over the type's whole range; i1: 0 or 1.

    Never all zero, and for two or more elements never all equal.
    """
    et = element_type(type)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    n = int(np.prod(shape, dtype=np.int64))
    if et.name == "f8E8M0FNU":
        values = np.exp2(rng.integers(-4, 5, size=shape)).astype(np.float64)
    elif et.name == "ue4m3":
        choices = _normal_codes_in_range(et, 2.0**-4, 2.0**4)
        values = rng.choice(choices[choices > 0], size=shape)
    elif et.is_float and et.bits <= 8:
        choices = _normal_codes_in_range(et, _MIN_MAG, _MAX_MAG)
        choices = np.concatenate([choices[choices > 0], -choices[choices > 0]])
        values = rng.choice(choices, size=shape)
    elif et.is_float:
        mags = np.exp2(rng.uniform(-3.0, 1.0, size=shape))
        values = np.where(rng.random(size=shape) < 0.5, -mags, mags)
        if et.name == "tf32":
            return _nontrivial(round_tf32(values.astype(np.float32), "rna"), et, rng)
        return _nontrivial(values.astype(et.dtype), et, rng)
    else:
        lo, hi = et.int_range
        values = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    out = values.astype(np.float64).astype(et.dtype) if et.is_float else values.astype(et.dtype)
    return _nontrivial(out, et, rng) if n else out


def _nontrivial(out: np.ndarray, et: ElementType, rng: np.random.Generator) -> np.ndarray:
    """Break the (rare, small-shape) cases of all zeros or all equal values."""
    flat = out.reshape(-1)
    if flat.size == 0:
        return out
    as_f = flat.astype(np.float64)
    if np.all(as_f == 0):
        flat[0] = 1
        as_f = flat.astype(np.float64)
    if flat.size >= 2 and np.all(as_f == as_f[0]):
        if et.is_float and not et.signed:  # scales: stay positive, and inside their range
            flat[1] = as_f[0] / 2 if as_f[0] > 1 else as_f[0] * 2
        elif et.is_float:
            flat[1] = -flat[0]
        else:
            lo, hi = et.int_range
            flat[1] = lo if int(as_f[0]) != lo else hi
    return out


# ---------------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------------


def _broadcast(a: np.ndarray, b: np.ndarray, c: np.ndarray | None):
    """Check ranks and shapes per cuda::tiles::mma_compatible and broadcast batch-of-1 operands.

    Rank 2: A is M x K, B is K x N, C is M x N. Rank 3: A is Ba x M x K, B is Bb x K x N, C is
    Bc x M x N with Ba, Bb each equal to Bc or 1 (without C, the batch is max(Ba, Bb) and Ba == Bb or
    one of them is 1, as for matmul).
    """
    rank = a.ndim
    if rank not in (2, 3) or b.ndim != rank or (c is not None and c.ndim != rank):
        shapes = [x.shape for x in (a, b, c) if x is not None]
        raise ValueError(f"operands must all have rank 2 or all rank 3, got shapes {shapes}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise ValueError(f"A is {a.shape} and B is {b.shape}: K differs ({k} vs {k2})")
    if c is not None and c.shape[-2:] != (m, n):
        raise ValueError(f"C is {c.shape}, expected (..., {m}, {n}) from A {a.shape} and B {b.shape}")
    if rank == 2:
        return a, b, c
    ba, bb = a.shape[0], b.shape[0]
    if c is not None:
        batch = c.shape[0]
        for name, size in (("A", ba), ("B", bb)):
            if size not in (batch, 1):
                raise ValueError(f"batch of {name} is {size}; it must equal C's batch {batch} or be 1")
    else:
        if ba != bb and 1 not in (ba, bb):
            raise ValueError(f"batches of A ({ba}) and B ({bb}) must be equal or one of them 1")
        batch = max(ba, bb)
    a = np.broadcast_to(a, (batch, m, k))
    b = np.broadcast_to(b, (batch, k, n))
    return a, b, c


def _operands(a, b, c, a_type, b_type, acc_type):
    at, bt, ct = element_type(a_type), element_type(b_type), element_type(acc_type)
    av = _exact_values(a, at)
    bv = _exact_values(b, bt)
    cv = None if c is None else _exact_values(c, ct)
    av, bv, cv = _broadcast(av, bv, cv)
    return at, bt, ct, av, bv, cv


def _two_sum(x: np.ndarray, y: np.ndarray):
    s = x + y
    z = s - x
    return s, (x - (s - z)) + (y - z)


_SPLITTER = 134217729.0  # 2**27 + 1 (Veltkamp splitting of a float64 into two 26-bit halves)


def _two_prod(x: np.ndarray, y: np.ndarray):
    p = x * y
    cx = _SPLITTER * x
    xh = cx - (cx - x)
    xl = x - xh
    cy = _SPLITTER * y
    yh = cy - (cy - y)
    yl = y - yh
    return p, xl * yl - (((p - xh * yh) - xl * yh) - xh * yl)


def _dot2(av: np.ndarray, bv: np.ndarray, cv: np.ndarray | None) -> np.ndarray:
    """sum_k a[..., i, k] * b[..., k, j] (+ c) in twice-working precision (Ogita-Rump-Oishi Dot2).

    The result is about as accurate as rounding the exact sum once to float64 (barring overflow or
    underflow in the error terms), which a plain float64 matmul of f64 inputs is not.
    """
    shape = av.shape[:-1] + (bv.shape[-1],)
    s = np.zeros(shape)
    err = np.zeros(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        for kk in range(av.shape[-1]):
            p, pe = _two_prod(av[..., :, kk, None], bv[..., kk, None, :])
            s, se = _two_sum(s, p)
            err += pe + se
        if cv is not None:
            s, se = _two_sum(s, np.broadcast_to(cv, shape))
            err += se
        return s + err


def mma_reference(a, b, c=None, *, a_type: str, b_type: str, acc_type: str,
                  satfinite: bool = False, bitop: str | None = None,
                  satfinite_step: int | None = None) -> np.ndarray:
    """D = A*B + C with exact element semantics, returned in the accumulator's dtype.

    `a`, `b`, `c` hold values of `a_type`, `b_type`, `acc_type` (any array whose values are exactly
    representable; anything else raises). `c=None` means a zero accumulator (matmul). Rank 2 or 3;
    in rank 3 an operand with batch 1 is broadcast (cuda::tiles::mma).

    * Float inputs, f16/f32 accumulator: exact products, sum in float64 (error ~K*2**-53 relative to
      sum|a*b|, far below the accumulator's), rounded once to f16/f32 (round to nearest even).
    * f64: Dot2 compensated sum, rounded once to f64.
    * Integers: exact int64 sum, then wrapped to s32, or clamped to [INT32_MIN, INT32_MAX] with
      `satfinite`. PTX clamps at the end of each `mma` instruction, so a kernel that walks K in
      steps of the instruction's K saturates after every step: pass `satfinite_step` = that K to
      model it (C first, then each K chunk in order, clamping after each).
    * i1 with `bitop` "xor" or "and": popc(row XOR/AND column) over K, plus C, wrapped to s32.
    """
    at, bt, ct, av, bv, cv = _operands(a, b, c, a_type, b_type, acc_type)
    if at.is_bit or bt.is_bit:
        if not (at.is_bit and bt.is_bit) or ct.name != "si32":
            raise ValueError("single-bit mma needs i1 for both A and B and an si32 accumulator")
        if bitop not in ("xor", "and"):
            raise ValueError("single-bit mma needs bitop='xor' or 'and'")
        if satfinite:
            raise ValueError(".satfinite does not apply to single-bit mma")
        av, bv = av.astype(np.int64), bv.astype(np.int64)
        if bitop == "and":
            total = _exact_int_matmul(av, bv)
        else:  # popc(a ^ b) counts positions where exactly one bit is set
            total = _exact_int_matmul(av, 1 - bv) + _exact_int_matmul(1 - av, bv)
        if cv is not None:
            total = total + cv
        return _wrap_s32(total)
    if bitop is not None:
        raise ValueError("bitop applies only to i1 (b1) operands")
    if at.is_int or bt.is_int:
        if not (at.is_int and bt.is_int) or ct.name != "si32":
            raise ValueError("integer mma needs integer A and B and an si32 accumulator")
        av, bv = av.astype(np.int64), bv.astype(np.int64)
        if satfinite and satfinite_step:
            total = np.zeros(av.shape[:-1] + (bv.shape[-1],), np.int64) if cv is None else cv.astype(np.int64)
            for k0 in range(0, av.shape[-1], satfinite_step):
                chunk = _exact_int_matmul(av[..., k0:k0 + satfinite_step], bv[..., k0:k0 + satfinite_step, :])
                total = np.clip(total + chunk, INT32_MIN, INT32_MAX)
            return total.astype(np.int32)
        total = _exact_int_matmul(av, bv)
        if cv is not None:
            total = total + cv
        if satfinite:
            return np.clip(total, INT32_MIN, INT32_MAX).astype(np.int32)
        return _wrap_s32(total)
    if satfinite:
        raise ValueError(".satfinite here applies to integer mma only")
    if ct.name not in ("f16", "f32", "f64"):
        raise ValueError(f"floating-point mma accumulates in f16, f32 or f64, not {ct.name}")
    if ct.name == "f64" or at.name == "f64" or bt.name == "f64":
        if not (ct.name == at.name == bt.name == "f64"):
            raise ValueError("f64 mma needs f64 A, B and accumulator")
        if av.shape[-2] * bv.shape[-1] * av.shape[-1] <= _DOT2_MAX_WORK:
            return _dot2(av, bv, cv)
        # Large problems: one float64 BLAS matmul. Its error, at most K * 2**-53 * sum|a*b|, is a
        # sixteenth of the f64 bound `compare` allows, so it cannot turn a right result wrong.
        total = np.matmul(av, bv)
        return total if cv is None else total + cv
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.matmul(av, bv)
        if cv is not None:
            total = total + cv
        return total.astype(ct.dtype)  # float64 -> f16/f32: one round-to-nearest-even


_DOT2_MAX_WORK = 2**27  # M*N*K up to which f64 uses the compensated (Python-loop) Dot2 sum


def _exact_int_matmul(av: np.ndarray, bv: np.ndarray) -> np.ndarray:
    """Exact integer matmul: float64 BLAS when every partial sum fits in 53 bits (it does for
    8-bit and narrower operands up to K = 2**37 / 2**14), otherwise NumPy's int64 loop."""
    bound = av.shape[-1] * max(int(np.abs(av).max(initial=0)), 1) * max(int(np.abs(bv).max(initial=0)), 1)
    if bound < 2**53:
        return np.rint(np.matmul(av.astype(np.float64), bv.astype(np.float64))).astype(np.int64)
    return np.matmul(av, bv)


def _wrap_s32(total: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of an exact int64 sum to int32."""
    return (((total.astype(np.int64) - INT32_MIN) % (2**32)) + INT32_MIN).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Block scaling
# ---------------------------------------------------------------------------------------------


def _scaled_operands(a, b, c, sa, sb, a_type, b_type, scale_type_, block, acc_type):
    """Exact values of A * SF_A and SF_B * B (float64), and C, broadcast as in `mma_reference`.

    sa is [..., M, K / block] and sb [..., K / block, N]; in rank 3 a scale's batch is its
    operand's or 1, and the two broadcast against each other before A and B are broadcast."""
    at, bt, ct = element_type(a_type), element_type(b_type), element_type(acc_type)
    st = scale_type(scale_type_)
    if not (at.is_float and bt.is_float) or at.bits > 8 or bt.bits > 8:
        raise ValueError(f"block-scaled mma multiplies fp8/fp6/fp4 values, not {at.name} x {bt.name}")
    if ct.name not in ("f16", "f32"):
        raise ValueError(f"block-scaled mma accumulates in f32 (or f16), not {ct.name}")
    av, bv = _exact_values(a, at), _exact_values(b, bt)
    sav, sbv = _exact_values(sa, st), _exact_values(sb, st)
    if av.ndim not in (2, 3) or sav.ndim != av.ndim or sbv.ndim != bv.ndim:
        raise ValueError(f"scales must have the rank of their operands: A {av.shape}, SF_A {sav.shape}, "
                         f"B {bv.shape}, SF_B {sbv.shape}")
    k = av.shape[-1]
    if int(block) <= 0 or k % int(block):
        raise ValueError(f"K = {k} is not a multiple of the scale block {block}")
    chunks = k // int(block)
    want_a, want_b = (av.shape[-2], chunks), (chunks, bv.shape[-1])
    batches_ok = av.ndim == 2 or (av.shape[0] == sav.shape[0] or 1 in (av.shape[0], sav.shape[0])) and (
        bv.shape[0] == sbv.shape[0] or 1 in (bv.shape[0], sbv.shape[0]))
    if sav.shape[-2:] != want_a or sbv.shape[-2:] != want_b or not batches_ok:
        raise ValueError(f"with K = {k} and block {block}: SF_A must be [..., {want_a[0]}, {chunks}] with A's "
                         f"batch or 1 (got {sav.shape} for A {av.shape}), SF_B [..., {chunks}, {want_b[1]}] with "
                         f"B's batch or 1 (got {sbv.shape} for B {bv.shape})")
    av = av * np.repeat(sav, block, axis=-1)  # exact: a power of two, or 4 x 4 significant bits
    bv = bv * np.repeat(sbv, block, axis=-2)
    cv = None if c is None else _exact_values(c, ct)
    av, bv, cv = _broadcast(av, bv, cv)
    return ct, av, bv, cv


def scaled_mma_reference(a, b, c, sa, sb, *, a_type: str, b_type: str, scale_type: str, block: int,
                         acc_type: str = "f32") -> np.ndarray:
    """D = sum_k (a[m,k] * sa[m, k // block]) * (b[k,n] * sb[k // block, n]) + c, in acc_type (f32).

    The block-scaled `mma` of PTX ISA 9.7.14.3 (`.kind::mxf8f6f4`, `mxf4`, `mxf4nvf4`; `block` =
    K / the instruction's .scale_vec chunks). a, b, c hold values of a_type, b_type (fp8/fp6/fp4 by
    MLIR name) and acc_type; sa, sb values of `scale_type` (f8E8M0FNU / ue8m0, or ue4m3), shaped
    [..., M, K / block] and [..., K / block, N]; c=None is a zero accumulator. Rank 2 or 3 (batch
    broadcast as `mma_reference`; a scale's batch is its operand's or 1). Products exact in float64, summed in float64 (exact unless the
    products' exponents span more than ~45 bits, then within K * 2**-53 of their magnitudes, far
    inside `scaled_error_bound`), rounded once."""
    ct, av, bv, cv = _scaled_operands(a, b, c, sa, sb, a_type, b_type, scale_type, block, acc_type)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.matmul(av, bv)
        if cv is not None:
            total = total + cv
        return total.astype(ct.dtype)


def scaled_error_bound(a, b, c, sa, sb, *, a_type: str, b_type: str, scale_type: str, block: int,
                       acc_type: str = "f32", k: int | None = None) -> np.ndarray:
    """`error_bound` of the scaled product: (K + 1) * step_error * S + floor with
    S = sum_k |a * sa * b * sb| + |c|, i.e. the magnitudes the hardware actually adds."""
    ct, av, bv, cv = _scaled_operands(a, b, c, sa, sb, a_type, b_type, scale_type, block, acc_type)
    return _summation_bound(ct, av, bv, cv, k)


@dataclass(frozen=True)
class BlockScales:
    """The scale operands of a block-scaled product, for `compare(..., scales=...)`: sa is
    [..., M, K / block], sb [..., K / block, N], values of `scale_type` (f8E8M0FNU / ue8m0, ue4m3)."""

    sa: object
    sb: object
    scale_type: str
    block: int


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------

# Per accumulation step, the largest error a legal implementation may make, relative to the
# magnitudes summed so far: two units in the last place of the accumulator (2**-10 for f16, whose
# unit roundoff is 2**-11; 2**-22 for f32 and 2**-50 for f64, four units of roundoff). Two ulps,
# not half an ulp, because the ISA leaves rounding unspecified and tensor cores are known to align
# and truncate rather than round; the extra factor covers the reference's own final rounding.
_STEP_ERROR = {"f16": 2.0**-10, "f32": 2.0**-22, "f64": 2.0**-50}
# Smallest normal of the accumulator: an absolute floor for results whose terms are all (near) zero,
# where flushing subnormals (allowed: subnormal handling is unspecified) is the only error.
_FLOOR = {"f16": 2.0**-14, "f32": 2.0**-126, "f64": 2.0**-1022}


def _summation_bound(ct: ElementType, av, bv, cv, k: int | None) -> np.ndarray:
    """(K + 1) * step_error(acc) * (sum_k |a_ik * b_kj| + |c_ij|) + floor(acc): the bound shared by
    `error_bound` and `scaled_error_bound` (whose av, bv already carry the scales)."""
    k = av.shape[-1] if k is None else k
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.matmul(np.abs(av), np.abs(bv))
        if cv is not None:
            magnitude = magnitude + np.abs(cv)
    return (k + 1) * _STEP_ERROR[ct.name] * magnitude + _FLOOR[ct.name]


def error_bound(a, b, c=None, *, a_type: str, b_type: str | None = None, acc_type: str,
                k: int | None = None) -> np.ndarray:
    """Per-element bound on |got - exact|: (K + 1) * step_error(acc) * S_ij + floor(acc), where
    S_ij = sum_k |a_ik * b_kj| + |c_ij|.

    This is the classical bound for summing K + 1 terms in any order with any rounding whose error
    per addition is at most step_error times the magnitude of what has been summed (|error| <=
    gamma_{K+1} * sum of |terms|). It depends on |a| and |b|, not on the result, so cancellation
    cannot make it spuriously tight or loose, and it is zero-width where the terms are: a wrong term,
    a lost term or an element taken from the wrong place moves the result by about one |a_ik*b_kj|,
    which exceeds the bound unless K is in the thousands (at K = 256 with `random_matrix` operands the
    bound is ~1e-2 while every product is >= 1/64).
    """
    b_type = a_type if b_type is None else b_type
    at, bt, ct, av, bv, cv = _operands(a, b, c, a_type, b_type, acc_type)
    if not ct.is_float:
        raise ValueError("integer results are compared exactly; there is no error bound")
    return _summation_bound(ct, av, bv, cv, k)


@dataclass(frozen=True)
class Comparison:
    """Outcome of `compare`: worst absolute and relative differences, the number of elements out of
    bound and the index of the first one (C order), and a readable `detail` for assertion messages."""

    max_abs: float
    max_rel: float
    ok: bool
    n_bad: int
    first_bad_index: tuple[int, ...] | None
    detail: str = ""

    def __str__(self) -> str:
        return self.detail


def compare(got, want, *, acc_type: str, a_type: str, k: int, a=None, b=None, c=None,
            b_type: str | None = None, scales: BlockScales | None = None) -> Comparison:
    """Compare every element of a kernel's `got` with `mma_reference`'s `want`.

    Integer (si32) results must match exactly. Floating-point results must satisfy
    |got - want| <= error_bound(...) element by element; the bound needs the operands `a`, `b`
    (and `c`), because it is built from sum|a_ik*b_kj| (see `error_bound`). Non-finite values must
    match exactly (same infinity, or NaN for NaN). For a block-scaled product (`want` from
    `scaled_mma_reference`) pass `scales`: the bound is then `scaled_error_bound`, whose magnitudes
    include the scales.
    """
    ct = element_type(acc_type)
    at = element_type(a_type)
    got_arr = np.asarray(got)
    want_arr = np.asarray(want)
    if got_arr.shape != want_arr.shape:
        raise ValueError(f"shape mismatch: got {got_arr.shape}, want {want_arr.shape}")
    if a is not None and np.asarray(a).shape[-1] != k:
        raise ValueError(f"k={k} but A has {np.asarray(a).shape[-1]} columns")

    if not ct.is_float:
        g = got_arr.astype(np.int64)
        w = want_arr.astype(np.int64)
        diff = np.abs(g - w).astype(np.float64)
        bad = g != w
        bound = np.zeros_like(diff)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(w != 0, diff / np.abs(w), np.where(diff > 0, np.inf, 0.0))
        return _summarize(diff, rel, bad, bound, g, w, f"{ct.name} results, exact")

    if a is None or b is None:
        raise ValueError(
            "comparing floating-point results needs the operands a and b (and c): the tolerance is "
            "derived per element from sum|a_ik*b_kj|"
        )
    if scales is not None:
        bound = scaled_error_bound(a, b, c, scales.sa, scales.sb, a_type=at.name,
                                   b_type=at.name if b_type is None else b_type,
                                   scale_type=scales.scale_type, block=scales.block, acc_type=ct.name, k=k)
    else:
        bound = error_bound(a, b, c, a_type=at.name, b_type=b_type, acc_type=ct.name, k=k)
    bound = np.broadcast_to(bound, want_arr.shape)
    g = got_arr.astype(np.float64)
    w = want_arr.astype(np.float64)
    finite = np.isfinite(w) & np.isfinite(g)
    same_nonfinite = ((np.isnan(g) & np.isnan(w)) | (np.isinf(g) & (g == w)))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(g - w), np.where(same_nonfinite, 0.0, np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):  # w == 0 is handled by the where
        rel = np.where(w != 0, diff / np.abs(np.where(finite, w, 1.0)), np.where(diff > 0, np.inf, 0.0))
    bad = ~((finite & (diff <= bound)) | same_nonfinite)
    return _summarize(diff, rel, bad, bound, g, w,
                      f"{ct.name} accumulation of K={k}: |diff| <= (K+1)*{_STEP_ERROR[ct.name]:g}*S + "
                      f"{_FLOOR[ct.name]:g}")


def _summarize(diff, rel, bad, bound, g, w, rule: str) -> Comparison:
    n_bad = int(np.count_nonzero(bad))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    if n_bad == 0:
        return Comparison(max_abs, max_rel, True, 0, None,
                          f"all {diff.size} elements within bound ({rule}); max |diff| {max_abs:g}")
    flat = int(np.flatnonzero(bad.reshape(-1))[0])
    index = tuple(int(i) for i in np.unravel_index(flat, bad.shape))
    detail = (f"{n_bad} of {bad.size} elements out of bound ({rule}); first at {index}: "
              f"got {g[index]!r}, want {w[index]!r}, |diff| {diff[index]:g} > bound {bound[index]:g}")
    return Comparison(max_abs, max_rel, False, n_bad, index, detail)
