"""`fragment_io.Emitter`'s `div.u32` / `rem.u32` by a constant (`unsigned_magic`): the formula
against Python's integer division, and the emitted PTX run in the emulator against NumPy, on
dividends at the corners (0, d - 1, multiples of d and their neighbours, 2^32 - 1) and random ones."""

from __future__ import annotations

import numpy as np
import pytest

from tilemma.compiler.verify.emulator import emulate
from tilemma.compiler.verify.ptx_text import print_ptx
from tilemma.dialects import ptx
from tilemma.dialects.ptx_builder import PtxBuilder
from tilemma.passes.warp_to_ptx.fragment_io import Emitter, unsigned_magic

U32 = (1 << 32) - 1
BLOCK = 128


def dividends(d: int, rng: np.random.Generator, random: int = 4096) -> np.ndarray:
    """32-bit dividends for divisor d: random ones, the smallest and largest, and each side of
    the first and last multiples of d."""
    k = np.arange(1, 200, dtype=np.uint64)
    last = U32 // d * d
    near = np.concatenate([k * d, k * d - 1, k * d + 1, last - k * d, last - k * d + d - 1]) if d < 1 << 20 else k
    out = np.concatenate([rng.integers(0, 1 << 32, random, dtype=np.uint64), np.arange(300, dtype=np.uint64),
                          U32 - np.arange(300, dtype=np.uint64), near, np.array([last, last - 1, d - 1, d, d + 1],
                                                                                  dtype=np.uint64)])
    return np.unique(out[out <= U32])


def test_magic_divides_every_dividend_exactly():
    rng = np.random.default_rng(0)
    divisors = [d for d in [*range(3, 3000), *rng.integers(3, 1 << 32, 1000).tolist(), U32, (1 << 31) + 1, 641, 6700417]
                if d & (d - 1)]
    forms = set()
    for d in divisors:
        m, s, add = unsigned_magic(d)
        assert 0 < m <= U32
        n = dividends(d, rng, 512)
        t = (n * np.uint64(m)) >> np.uint64(32)
        q = ((t + ((n - t) >> np.uint64(1))) >> np.uint64(s - 1)) if add else t >> np.uint64(s)
        bad = np.flatnonzero(q != n // np.uint64(d))
        assert bad.size == 0, (d, m, s, add, int(n[bad[0]]))
        forms.add(add)
    assert forms == {False, True}  # both forms were checked


def _kernel(d: int) -> str:
    """Thread t reads n[t] and writes n[t] / d to q[t] and n[t] % d to r[t], the divisions as the
    lowering emits them."""
    b = PtxBuilder()
    tid, cta = b.special("%tid.x"), b.special("%ctaid.x")
    gid = b.reg("b32")
    b.emit("mad.lo.u32", gid, cta, BLOCK, tid)
    ptrs = []
    for name in "nqr":
        r, off = b.reg("b64"), b.reg("b64")
        b.emit("ld.param.u64", r, f"[p_{name}]")
        b.emit("cvta.to.global.u64", r, r)
        b.emit("mul.wide.u32", off, gid, 4)
        b.emit("add.s64", r, r, off)
        ptrs.append(r)
    n, q, r = b.regs("b32", 3)
    b.emit("ld.global.u32", n, f"[{ptrs[0]}]")
    e = Emitter(b.file)
    e.emit("div.u32", q, n, d)
    e.emit("rem.u32", r, n, d)
    b.ops.extend(e.ops)
    b.emit("st.global.u32", f"[{ptrs[1]}]", q)
    b.emit("st.global.u32", f"[{ptrs[2]}]", r)
    b.emit("ret")
    entry = b.entry("divide", [f".u64 p_{name}" for name in "nqr"], max_threads=BLOCK)
    return print_ptx(ptx.ModuleOp_("8.0", "sm_90", [entry]))


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 8, 11, 24, 25, 100, 641, 4097, 65535, (1 << 31) + 1, U32])
def test_emitted_division_runs_exactly(d):
    text = _kernel(d)
    assert "div." not in text and "rem." not in text  # no division left for ptxas
    n = dividends(d, np.random.default_rng(d), 2048).astype(np.uint32)
    count = -(-n.size // BLOCK) * BLOCK
    n = np.concatenate([n, np.full(count - n.size, U32, np.uint32)])
    _, q, r = emulate(text, "divide", (count // BLOCK, 1, 1), (BLOCK, 1, 1),
                      [n, np.zeros_like(n), np.zeros_like(n)])
    np.testing.assert_array_equal(q, n // np.uint32(d))
    np.testing.assert_array_equal(r, n % np.uint32(d))
