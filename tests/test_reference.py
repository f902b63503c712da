"""tilemma.compiler.verify.reference: the NumPy truth that kernels are compared with.

Expected values here come from the cuda::tiles examples, from hand computation, or from an
independent exact computation (Python Fractions with explicit round-to-nearest-even), never from the
function under test.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilemma.compiler.verify import reference as ref
from tilemma.compiler.verify.reference import INT32_MAX, INT32_MIN

FLOAT_OPERANDS = [
    # (a_type, b_type, acc_type)
    ("f16", "f16", "f32"),
    ("f16", "f16", "f16"),
    ("bf16", "bf16", "f32"),
    ("tf32", "tf32", "f32"),
    ("f32", "f32", "f32"),
    ("f8E4M3FN", "f8E5M2", "f32"),
    ("f8E5M2", "f8E4M3FN", "f16"),
    ("f6E3M2FN", "f6E2M3FN", "f32"),
    ("f4E2M1FN", "f4E2M1FN", "f32"),
]


def iota(shape):
    return np.arange(int(np.prod(shape))).reshape(shape)


def values(x, t):
    return ref.as_type(x, t)


# ------------------------------------------------------------------ cuda::tiles examples (003)


@pytest.mark.parametrize(
    "a_type, acc_type",
    [("f32", "f32"), ("f16", "f16"), ("f16", "f32"), ("bf16", "f32"), ("tf32", "f32"),
     ("f64", "f64"), ("si8", "si32"), ("ui8", "si32"), ("f8E4M3FN", "f16")],
)
def test_tiles_mma_rank2_example(a_type, acc_type):
    a = values(iota((2, 4)), a_type)
    b = values(iota((4, 2)), a_type)
    c = values(iota((2, 2)), acc_type)
    d = ref.mma_reference(a, b, c, a_type=a_type, b_type=a_type, acc_type=acc_type)
    assert d.dtype == ref.element_type(acc_type).dtype
    np.testing.assert_array_equal(d.astype(np.float64), [[28, 35], [78, 101]])


def test_tiles_matmul_rank2_example():
    a = iota((2, 4)).astype(np.float32)
    b = iota((4, 2)).astype(np.float32)
    d = ref.mma_reference(a, b, None, a_type="f32", b_type="f32", acc_type="f32")
    np.testing.assert_array_equal(d, [[28, 34], [76, 98]])


def test_tiles_mma_rank3_batched_with_negation():
    lhs = np.concatenate([iota((1, 2, 4)), iota((1, 2, 4))]).astype(np.float32)
    rhs = np.concatenate([iota((1, 4, 2)), -iota((1, 4, 2))]).astype(np.float32)
    acc = np.concatenate([iota((1, 2, 2)), -iota((1, 2, 2))]).astype(np.float32)
    d = ref.mma_reference(lhs, rhs, acc, a_type="f32", b_type="f32", acc_type="f32")
    np.testing.assert_array_equal(d, [[[28, 35], [78, 101]], [[-28, -35], [-78, -101]]])
    # The same lhs batch twice is a batch of one broadcast (cuda::tiles: A = C or A = 1).
    d1 = ref.mma_reference(lhs[:1], rhs, acc, a_type="f32", b_type="f32", acc_type="f32")
    np.testing.assert_array_equal(d1, d)


def test_tiles_matmul_rank3_batched_with_negation():
    lhs = np.concatenate([iota((1, 2, 4)), iota((1, 2, 4))]).astype(np.float32)
    rhs = np.concatenate([iota((1, 4, 2)), -iota((1, 4, 2))]).astype(np.float32)
    d = ref.mma_reference(lhs[:1], rhs, None, a_type="f32", b_type="f32", acc_type="f32")
    np.testing.assert_array_equal(d, [[[28, 34], [76, 98]], [[-28, -34], [-76, -98]]])


def test_batch_rules_are_enforced():
    a = np.zeros((3, 2, 4), np.float32)
    b = np.zeros((2, 4, 2), np.float32)
    c = np.zeros((2, 2, 2), np.float32)
    with pytest.raises(ValueError, match="batch of A is 3"):
        ref.mma_reference(a, b, c, a_type="f32", b_type="f32", acc_type="f32")
    with pytest.raises(ValueError, match="equal or one of them 1"):
        ref.mma_reference(a, b, None, a_type="f32", b_type="f32", acc_type="f32")
    with pytest.raises(ValueError, match="K differs"):
        ref.mma_reference(np.zeros((2, 3)), np.zeros((4, 2)), None, a_type="f32", b_type="f32",
                          acc_type="f32")
    with pytest.raises(ValueError, match="rank"):
        ref.mma_reference(np.zeros((2, 4)), np.zeros((1, 4, 2)), None, a_type="f32", b_type="f32",
                          acc_type="f32")


def test_matmul_result_types_follow_the_tiles_table():
    assert ref.matmul_result_type("si8") == "si32"
    assert ref.matmul_result_type("ui8") == "si32"
    assert ref.matmul_result_type("f8E4M3FN") == "f16"
    assert ref.matmul_result_type("f16") == "f16"
    assert ref.matmul_result_type("bf16") == "f32"
    assert ref.matmul_result_type("tf32") == "f32"
    assert ref.matmul_result_type("f64") == "f64"
    with pytest.raises(ValueError):
        ref.matmul_result_type("si4")


# ------------------------------------------------------------------ integers and bits


def test_int_wrap_vs_satfinite_at_int32_max():
    a = np.array([[127, 127]], np.int8)
    b = np.array([[127], [127]], np.int8)  # sum of products 32258
    c = np.array([[INT32_MAX - 100]], np.int32)  # exact D = 2147515805
    kw = dict(a_type="si8", b_type="si8", acc_type="si32")
    assert ref.mma_reference(a, b, c, **kw)[0, 0] == -2147451491  # 2147515805 - 2**32
    assert ref.mma_reference(a, b, c, satfinite=True, **kw)[0, 0] == INT32_MAX


def test_int_wrap_vs_satfinite_at_int32_min():
    a = np.array([[-128, -128]], np.int8)
    b = np.array([[127], [127]], np.int8)  # -32512
    c = np.array([[INT32_MIN + 5]], np.int32)  # exact D = -2147516155
    kw = dict(a_type="si8", b_type="si8", acc_type="si32")
    assert ref.mma_reference(a, b, c, **kw)[0, 0] == 2147451141  # -2147516155 + 2**32
    assert ref.mma_reference(a, b, c, satfinite=True, **kw)[0, 0] == INT32_MIN


def test_int_exactly_at_the_boundary_is_not_overflow():
    a = np.array([[127, 127]], np.int8)
    b = np.array([[127], [127]], np.int8)
    c = np.array([[INT32_MAX - 32258]], np.int32)
    for sat in (False, True):
        d = ref.mma_reference(a, b, c, a_type="si8", b_type="si8", acc_type="si32", satfinite=sat)
        assert d[0, 0] == INT32_MAX and d.dtype == np.int32


def test_mixed_signedness_and_int4():
    a = np.array([[255, 1]], np.uint8)
    b = np.array([[-128], [3]], np.int8)
    c = np.array([[7]], np.int32)
    d = ref.mma_reference(a, b, c, a_type="ui8", b_type="si8", acc_type="si32")
    assert d[0, 0] == 255 * -128 + 3 + 7
    a4 = np.array([[-8, 7, -1]], ml_dtypes.int4)
    b4 = np.array([[15], [15], [2]], ml_dtypes.uint4)
    d4 = ref.mma_reference(a4, b4, None, a_type="si4", b_type="ui4", acc_type="si32")
    assert d4[0, 0] == -8 * 15 + 7 * 15 - 2


def test_b1_popc_xor_and_and_by_hand():
    a = np.array([[1, 0, 1, 1, 0, 0, 1, 0],
                  [1, 1, 1, 1, 1, 1, 1, 1]], np.uint8)
    b = np.array([[1, 1, 0, 1, 0, 0, 0, 0],
                  [0, 0, 0, 0, 0, 0, 0, 0]], np.uint8).T  # columns of B
    c = np.array([[10, -1], [0, INT32_MAX]], np.int32)
    kw = dict(a_type="i1", b_type="i1", acc_type="si32")
    # AND: row0&col0 = bits 0,3 -> 2; row1&col0 = popc(col0) = 3; anything & 0 = 0.
    np.testing.assert_array_equal(ref.mma_reference(a, b, c, bitop="and", **kw),
                                  [[12, -1], [3, INT32_MAX]])
    # XOR: row0^col0 = 01100010 -> 3; row0^0 = popc(row0) = 4; row1^col0 = 8-3 = 5; row1^0 = 8
    # (and INT32_MAX + 8 wraps).
    np.testing.assert_array_equal(ref.mma_reference(a, b, c, bitop="xor", **kw),
                                  [[13, 3], [5, INT32_MIN + 7]])


def test_b1_needs_a_bitop_and_nothing_else_takes_one():
    bits = np.ones((2, 8), np.uint8)
    with pytest.raises(ValueError, match="bitop"):
        ref.mma_reference(bits, bits.T, None, a_type="i1", b_type="i1", acc_type="si32")
    with pytest.raises(ValueError, match="bitop"):
        ref.mma_reference(bits, bits.T, None, a_type="si8", b_type="si8", acc_type="si32",
                          bitop="xor")
    with pytest.raises(ValueError):
        ref.mma_reference(bits * 2, bits.T, None, a_type="i1", b_type="i1", acc_type="si32",
                          bitop="and")


# ------------------------------------------------------------------ rounding helpers


def _rna_tf32_oracle(x: float) -> float:
    """Round a positive normal float to 11 significant bits, ties away from zero (float64 math)."""
    exp = np.floor(np.log2(x))
    ulp = 2.0 ** (exp - 10)
    q = x / ulp
    return float(np.floor(q + 0.5) * ulp)


def test_tf32_rounding_at_ties():
    one = 1.0
    cases = {
        # value: (rna, rn, rz)
        one + 2**-11: (one + 2**-10, one, one),  # tie, even neighbour below
        one + 2**-10 + 2**-11: (one + 2**-9, one + 2**-9, one + 2**-10),  # tie, even above
        one + 2**-11 - 2**-23: (one, one, one),  # just below a tie
        one + 2**-11 + 2**-23: (one + 2**-10, one + 2**-10, one),  # just above
        2.0 - 2**-23: (2.0, 2.0, 2.0 - 2**-10),  # carry into the exponent
        -(one + 2**-11): (-(one + 2**-10), -one, -one),  # ties away from zero, not up
    }
    for x, (rna, rn, rz) in cases.items():
        x32 = np.array([x], np.float32)
        assert x32[0] == x  # the case itself is an f32 value
        assert ref.round_tf32(x32, "rna")[0] == rna, x
        assert ref.round_tf32(x32, "rn")[0] == rn, x
        assert ref.round_tf32(x32, "rz")[0] == rz, x


def test_tf32_rounding_specials_and_random_against_an_oracle():
    big = np.array([np.finfo(np.float32).max, np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    r = ref.round_tf32(big, "rna")
    assert np.isinf(r[0]) and r[0] > 0  # the largest f32 is above tf32's max + half ulp
    assert ref.round_tf32(big, "rz")[0] == (2 - 2**-10) * 2.0**127
    assert r[1] == np.inf and r[2] == -np.inf and np.isnan(r[3])
    assert r[4] == 0 and not np.signbit(r[4]) and r[5] == 0 and np.signbit(r[5])
    rng = np.random.default_rng(7)
    x = np.exp2(rng.uniform(-20, 20, 2000)).astype(np.float32)
    # force many exact ties: 11 significant bits plus a final 1 in the 12th
    ties = (np.floor(x.astype(np.float64) * 2.0 ** (11 - np.floor(np.log2(x)))) + 0.5)
    ties = (ties * 2.0 ** (np.floor(np.log2(x)) - 11)).astype(np.float32)
    for sample in (x, ties):
        got = ref.round_tf32(sample, "rna")
        want = np.array([_rna_tf32_oracle(float(v)) for v in sample], np.float32)
        np.testing.assert_array_equal(got, want)
        assert np.all((got.view(np.uint32) & 0x1FFF) == 0)


def test_cvt_rn_f16_and_bf16_ties_to_even():
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 65520.0, -(1 + 2**-11)], np.float32)
    np.testing.assert_array_equal(ref.cvt_rn_f16(x).astype(np.float64),
                                  [1.0, 1 + 2**-9, 65504.0, np.inf, -1.0])
    y = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20], np.float32)
    np.testing.assert_array_equal(ref.cvt_rn_bf16(y).astype(np.float64),
                                  [1.0, 1 + 2**-6, 1 + 2**-7])


# ------------------------------------------------------------------ bits


@pytest.mark.parametrize(
    "type_name, value, bits",
    [
        ("f16", 1.0, 0x3C00), ("f16", -2.0, 0xC000), ("bf16", 1.0, 0x3F80),
        ("tf32", 1.0, 0x3F800000), ("f32", -1.0, 0xBF800000), ("f64", 1.0, 0x3FF0000000000000),
        ("f8E4M3FN", 448.0, 0x7E), ("f8E4M3FN", -1.0, 0xB8), ("f8E5M2", 57344.0, 0x7B),
        ("f6E3M2FN", 28.0, 0x1F), ("f6E3M2FN", -0.25, 0x24), ("f6E2M3FN", 7.5, 0x1F),
        ("f6E2M3FN", -1.0, 0x28), ("f4E2M1FN", 6.0, 0x7), ("f4E2M1FN", -0.5, 0x9),
        ("f8E8M0FNU", 1.0, 127), ("si8", -1, 0xFF), ("ui8", 200, 200), ("si4", -1, 0xF),
        ("si4", -8, 0x8), ("si4", 7, 0x7), ("ui4", 15, 0xF), ("i1", 1, 1), ("si32", -1, 0xFFFFFFFF),
    ],
)
def test_known_bit_patterns(type_name, value, bits):
    got = ref.to_bits(np.array([value]), type_name)
    assert int(got[0]) == bits
    back = ref.from_bits(np.array([bits], np.uint64), type_name)
    assert float(back.astype(np.float64)[0]) == value


@pytest.mark.parametrize("type_name", [n for n, t in ref.ELEMENT_TYPES.items() if t.bits <= 8])
def test_every_code_round_trips(type_name):
    et = ref.ELEMENT_TYPES[type_name]
    codes = np.arange(1 << et.bits, dtype=np.uint8)
    vals = ref.from_bits(codes, type_name)
    as_f = vals.astype(np.float64)
    finite = ~np.isnan(as_f)
    np.testing.assert_array_equal(ref.to_bits(vals[finite], type_name), codes[finite])


def test_from_bits_refuses_bits_beyond_the_width():
    with pytest.raises(ValueError):
        ref.from_bits(np.array([0x10], np.uint8), "f4E2M1FN")
    with pytest.raises(ValueError):
        ref.from_bits(np.array([0x3F800001], np.uint32), "tf32")


def test_values_a_type_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="not representable in f16"):
        ref.mma_reference(np.array([[1.0001]]), np.ones((1, 1)), None, a_type="f16", b_type="f16",
                          acc_type="f32")
    with pytest.raises(ValueError, match="not representable in tf32"):
        ref.mma_reference(np.array([[1 + 2**-20]], np.float32), np.ones((1, 1), np.float32), None,
                          a_type="tf32", b_type="tf32", acc_type="f32")
    with pytest.raises(ValueError, match=r"\[-128, 127\]"):
        ref.mma_reference(np.array([[128]]), np.ones((1, 1)), None, a_type="si8", b_type="si8",
                          acc_type="si32")


# ------------------------------------------------------------------ exactness of float results


def _round_exact(fr: Fraction, dtype) -> float:
    """Round an exact rational to `dtype` (float16 or float32), nearest, ties to even."""
    x = np.array([float(fr)], np.float64).astype(dtype)[0]
    cands = [np.nextafter(x, dtype(-np.inf)), x, np.nextafter(x, dtype(np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    uint = np.uint16 if dtype == np.float16 else np.uint32

    def key(c):
        return (abs(Fraction(float(c)) - fr), int(np.array([c], dtype).view(uint)[0]) & 1)

    return float(min(cands, key=key))


@pytest.mark.parametrize("a_type, b_type, acc_type", FLOAT_OPERANDS)
def test_float_reference_is_the_exact_sum_rounded_once(a_type, b_type, acc_type):
    rng = np.random.default_rng(11)
    m, n, k = 3, 4, 16
    a = ref.random_matrix(a_type, (m, k), rng)
    b = ref.random_matrix(b_type, (k, n), rng)
    c = ref.random_matrix(acc_type, (m, n), rng)
    d = ref.mma_reference(a, b, c, a_type=a_type, b_type=b_type, acc_type=acc_type)
    dtype = ref.element_type(acc_type).dtype.type
    for i in range(m):
        for j in range(n):
            exact = sum(Fraction(float(a[i, kk])) * Fraction(float(b[kk, j])) for kk in range(k))
            exact += Fraction(float(c[i, j]))
            assert float(d[i, j]) == _round_exact(exact, dtype), (i, j)


def test_f64_reference_is_compensated():
    # Left-to-right float64 summation loses the 1 entirely; the exact answer is 1.
    a = np.array([[1e16, 1.0, -1e16]])
    b = np.ones((3, 1))
    assert ref.mma_reference(a, b, None, a_type="f64", b_type="f64", acc_type="f64")[0, 0] == 1.0
    # (2**27 + 1)(2**27 - 1) = 2**54 - 1 is not a float64; adding C = -2**54 must give exactly -1.
    a = np.array([[2.0**27 + 1]])
    b = np.array([[2.0**27 - 1]])
    c = np.array([[-(2.0**54)]])
    assert ref.mma_reference(a, b, c, a_type="f64", b_type="f64", acc_type="f64")[0, 0] == -1.0


# ------------------------------------------------------------------ compare()


def _sequential_f32(a, b, c, *, reverse=True, truncate=False):
    """A legal f32 accumulation: one product at a time in the opposite order, rounding (or
    truncating toward zero) to f32 after every addition."""
    av = a.astype(np.float64)
    bv = b.astype(np.float64)
    acc = c.astype(np.float32)
    ks = range(a.shape[-1] - 1, -1, -1) if reverse else range(a.shape[-1])
    for kk in ks:
        exact = acc.astype(np.float64) + av[:, kk, None] * bv[None, kk, :]
        r = exact.astype(np.float32)
        if truncate:
            away = np.abs(r.astype(np.float64)) > np.abs(exact)
            r = np.where(away, np.nextafter(r, np.float32(0)), r)
        acc = r
    return acc


def _sequential_f16(a, b, c):
    av = a.astype(np.float64)
    bv = b.astype(np.float64)
    acc = c.astype(np.float16)
    for kk in range(a.shape[-1]):
        acc = (acc.astype(np.float64) + av[:, kk, None] * bv[None, kk, :]).astype(np.float16)
    return acc


def _f32_case(k=256, m=16, n=8, seed=5):
    rng = np.random.default_rng(seed)
    a = ref.random_matrix("f16", (m, k), rng)
    b = ref.random_matrix("f16", (k, n), rng)
    c = ref.random_matrix("f32", (m, n), rng)
    want = ref.mma_reference(a, b, c, a_type="f16", b_type="f16", acc_type="f32")
    return a, b, c, want


def test_compare_accepts_legitimate_f32_roundings():
    a, b, c, want = _f32_case()
    kw = dict(acc_type="f32", a_type="f16", k=a.shape[1], a=a, b=b, c=c)
    for got in (_sequential_f32(a, b, c), _sequential_f32(a, b, c, reverse=False, truncate=True)):
        assert not np.array_equal(got, want)  # the orders really do round differently
        result = ref.compare(got, want, **kw)
        assert result.ok, result.detail
        assert result.n_bad == 0 and result.first_bad_index is None
    assert ref.compare(want, want, **kw).max_abs == 0.0


def test_compare_rejects_one_corrupted_element():
    a, b, c, want = _f32_case()
    kw = dict(acc_type="f32", a_type="f16", k=a.shape[1], a=a, b=b, c=c)
    legit = _sequential_f32(a, b, c)
    i, j = 3, 2
    products = a[i].astype(np.float64) * b[:, j].astype(np.float64)
    dropped = legit.copy()  # one k term lost (the smallest product is still caught)
    dropped[i, j] = np.float32(legit[i, j] - products[np.argmin(np.abs(products))])
    sign_flipped = legit.copy()
    sign_flipped[i, j] = -legit[i, j]
    exponent_bit = legit.copy()
    exponent_bit.view(np.uint32)[i, j] ^= np.uint32(1 << 23)
    for bad in (dropped, sign_flipped, exponent_bit):
        result = ref.compare(bad, want, **kw)
        assert not result.ok
        assert result.n_bad == 1 and result.first_bad_index == (i, j), result.detail


def test_compare_swapped_elements_are_both_reported():
    a, b, c, want = _f32_case()
    got = want.copy()
    got[0, 0], got[0, 1] = want[0, 1], want[0, 0]
    result = ref.compare(got, want, acc_type="f32", a_type="f16", k=a.shape[1], a=a, b=b, c=c)
    assert not result.ok and result.n_bad == 2 and result.first_bad_index == (0, 0)


def test_compare_f16_accumulation():
    rng = np.random.default_rng(9)
    k = 64
    a = ref.random_matrix("f16", (8, k), rng)
    b = ref.random_matrix("f16", (k, 8), rng)
    c = ref.random_matrix("f16", (8, 8), rng)
    want = ref.mma_reference(a, b, c, a_type="f16", b_type="f16", acc_type="f16")
    got = _sequential_f16(a, b, c)
    kw = dict(acc_type="f16", a_type="f16", k=k, a=a, b=b, c=c)
    assert ref.compare(got, want, **kw).ok
    got[5, 1] = -got[5, 1]
    result = ref.compare(got, want, **kw)
    assert not result.ok and result.first_bad_index == (5, 1)


def test_compare_f64_and_batched():
    rng = np.random.default_rng(4)
    k = 32
    a = ref.random_matrix("f64", (1, 4, k), rng)  # batch of one, broadcast
    b = ref.random_matrix("f64", (3, k, 5), rng)
    c = ref.random_matrix("f64", (3, 4, 5), rng)
    want = ref.mma_reference(a, b, c, a_type="f64", b_type="f64", acc_type="f64")
    naive = np.matmul(np.broadcast_to(a, (3, 4, k)), b) + c
    kw = dict(acc_type="f64", a_type="f64", k=k, a=a, b=b, c=c)
    assert ref.compare(naive, want, **kw).ok
    naive[2, 3, 4] -= a[0, 3, 7] * b[2, 7, 4]
    result = ref.compare(naive, want, **kw)
    assert not result.ok and result.first_bad_index == (2, 3, 4)


def test_compare_integers_exactly():
    rng = np.random.default_rng(8)
    a = ref.random_matrix("si8", (8, 32), rng)
    b = ref.random_matrix("si8", (32, 8), rng)
    want = ref.mma_reference(a, b, None, a_type="si8", b_type="si8", acc_type="si32")
    assert ref.compare(want.copy(), want, acc_type="si32", a_type="si8", k=32).ok
    got = want.copy()
    got[7, 0] += 1
    result = ref.compare(got, want, acc_type="si32", a_type="si8", k=32)
    assert not result.ok and result.n_bad == 1 and result.first_bad_index == (7, 0)
    assert result.max_abs == 1.0


def test_compare_nonfinite_and_missing_operands():
    a = np.ones((1, 1), np.float16)
    b = np.ones((1, 1), np.float16)
    kw = dict(acc_type="f32", a_type="f16", k=1, a=a, b=b)
    want = np.array([[np.inf]], np.float32)
    assert ref.compare(np.array([[np.inf]], np.float32), want, **kw).ok
    assert not ref.compare(np.array([[-np.inf]], np.float32), want, **kw).ok
    assert not ref.compare(np.array([[np.nan]], np.float32), np.array([[1.0]], np.float32), **kw).ok
    with pytest.raises(ValueError, match="needs the operands"):
        ref.compare(want, want, acc_type="f32", a_type="f16", k=1)


def test_error_bound_is_per_element():
    a = np.array([[1.0, 1.0], [0.125, 0.125]], np.float16)
    b = np.array([[2.0], [-2.0]], np.float16)
    bound = ref.error_bound(a, b, None, a_type="f16", acc_type="f32")
    # S = 4 for row 0 and 0.5 for row 1 (the results cancel to 0 in both: S, not |D|, sets the bound)
    np.testing.assert_allclose(bound[:, 0], [3 * 2.0**-22 * 4 + 2.0**-126, 3 * 2.0**-22 * 0.5 + 2.0**-126])


# ------------------------------------------------------------------ random_matrix


@pytest.mark.parametrize("type_name", list(ref.ELEMENT_TYPES))
def test_random_matrix_ranges_and_non_triviality(type_name):
    et = ref.ELEMENT_TYPES[type_name]
    rng = np.random.default_rng(123)
    big = ref.random_matrix(type_name, (64, 64), rng)
    assert big.shape == (64, 64) and big.dtype == et.dtype
    ref.as_type(big, type_name)  # every value representable (raises otherwise)
    v = big.astype(np.float64)
    assert np.all(np.isfinite(v))
    if et.is_float and type_name != "f8E8M0FNU":
        mag = np.abs(v)
        assert mag.min() >= 2.0**-3 and mag.max() <= 2.0
        assert np.all(mag >= float(ml_dtypes.finfo(et.dtype).tiny) if et.bits <= 16 else True)
        assert (v < 0).any() and (v > 0).any()
        if type_name not in ("f4E2M1FN",):
            assert len(np.unique(mag)) >= 8  # varied magnitudes, not a handful of values
        # the documented f16-accumulation guarantee for K = 4096
        assert 4096 * mag.max() ** 2 + 2.0 <= 65504
    elif type_name == "f8E8M0FNU":
        assert set(np.log2(v).astype(int).ravel()) <= set(range(-4, 5))
    else:
        lo, hi = et.int_range
        assert v.min() >= lo and v.max() <= hi
        span = hi - lo
        assert v.min() <= lo + span // 8 and v.max() >= hi - span // 8  # full range is used
    for shape in [(1,), (2,), (1, 1), (2, 1), (3, 3)]:
        for seed in range(30):
            small = ref.random_matrix(type_name, shape, np.random.default_rng(seed)).astype(np.float64)
            assert np.any(small != 0), (shape, seed)
            if small.size >= 2:
                assert not np.all(small == small.ravel()[0]), (shape, seed)


def test_random_matrix_is_reproducible():
    a = ref.random_matrix("bf16", (4, 4), np.random.default_rng(1))
    b = ref.random_matrix("bf16", (4, 4), np.random.default_rng(1))
    np.testing.assert_array_equal(a.astype(np.float32), b.astype(np.float32))


def test_satfinite_clamps_after_each_instruction_step():
    """PTX clamps at the end of every mma: with C near INT32_MAX, a positive K chunk saturates
    and a later negative chunk then counts down from INT32_MAX, unlike one clamp at the end."""
    a = np.array([[100, 100, -100, -100]], np.int8)
    b = np.array([[100], [100], [100], [100]], np.int8)
    c = np.array([[INT32_MAX - 15000]], np.int32)
    once = ref.mma_reference(a, b, c, a_type="si8", b_type="si8", acc_type="si32", satfinite=True)
    stepped = ref.mma_reference(a, b, c, a_type="si8", b_type="si8", acc_type="si32", satfinite=True,
                            satfinite_step=2)
    assert once[0, 0] == INT32_MAX - 15000  # +20000 - 20000, never clamped
    assert stepped[0, 0] == INT32_MAX - 20000  # clamped to MAX after the first chunk
