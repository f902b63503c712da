"""The emulator's block-scaled mma (`.kind::mxf8f6f4`, `mxf4`, `mxf4nvf4` with `.block_scale`):
every variant of the ISA table, dense and `mma.sp::ordered_metadata`, every valid selector.

No GPU we can reach runs these instructions (sm_120a/sm_121a only). What is checked here is our
own reading, from two sides that share no code path beyond the element codecs of ml_dtypes: random
values are packed into registers through the fragment, sparse and scale tables (fp4/fp6 in their
8-bit containers, or packed e2m1), run as PTX text through the emulator, and every D element is
compared with `reference.scaled_mma_reference` on the values. ptxas (marked `ptxas`) assembles
every kernel run here for sm_120a. Where the scale factors live was measured by others on sm_120
(`scale_fragments`), not by us.
"""

from __future__ import annotations

import re
import zlib

import ml_dtypes
import numpy as np
import pytest
from tilemma.compiler.verify import emulator
from tilemma.compiler.layouts import fragments
from tilemma.compiler.core import isa
from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.verify import reference as R
from tilemma.compiler.layouts import scale_fragments as SF
from tilemma.compiler.layouts import sparse_fragments as SP
from tilemma.compiler.verify.emulator import EmulationError, emulate
from tilemma.dialects.ptx_builder import PtxBuilder
from tilemma.compiler.verify.ptx_text import parse_ptx, print_ptx
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.compiler.core.targets import PTXAS_MAX_PTX
from tilemma.dialects import ptx

BLOCK_SCALED = [v for v in isa.all_variants() if v.block_scale]
MLIR = {ptx: e.name for ptx, e in BY_PTX.items()}  # PTX spelling -> MLIR name (scales too)
WARPS = 2  # one CTA of two warps, each with its own random operands
TARGET = "sm_120a"


def _short(v: isa.MmaVariant) -> str:
    return v.opcode.replace("sync.aligned.", "").replace("row.col.", "")


def _scale_vec(v: isa.MmaVariant) -> str:
    return SF.default_scale_vec(v.kind, v.scale_vec)


def _block(v: isa.MmaVariant) -> int:
    return v.k // SF.SCALE_VECS[_scale_vec(v)].chunks


def _selector_pairs(v: isa.MmaVariant) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Every valid selector of A and every valid one of B, paired cyclically: one mma each."""
    sa, sb = SF.valid_selectors(_scale_vec(v), "a"), SF.valid_selectors(_scale_vec(v), "b")
    n = max(len(sa), len(sb))
    return [(sa[i % len(sa)], sb[i % len(sb)]) for i in range(n)]


def _layouts(v: isa.MmaVariant) -> dict[str, fragments.FragmentLayout]:
    if v.sparse:
        return {"a": SP.compressed_a_layout(v.shape, v.atype), "b": SP.b_layout(v.shape, v.btype),
                "c": SP.accumulator_layout(v.shape, "f32")}
    return {k: fragments.layout(v.shape, k, t) for k, t in (("a", v.atype), ("b", v.btype), ("c", "f32"))}


def _register_bits(values: np.ndarray, ptx_type: str, lay: fragments.FragmentLayout) -> np.ndarray:
    """Element bits as the register holds them: the ISA's 8-bit container for fp4/fp6 under
    .kind::mxf8f6f4 (e2m1 in bits 2..5, e3m2/e2m3 in bits 0..5), the bare 4 bits when packed."""
    bits = R.to_bits(values, MLIR[ptx_type])
    if lay.elem_bits == 8 and ptx_type == "e2m1":
        bits = (bits << 2).astype(np.uint8)
    return bits


def _sparse_a(v: isa.MmaVariant, rng: np.random.Generator, values: np.ndarray) -> np.ndarray:
    """`values` with the variant's structured sparsity at random kept positions."""
    pat = SP.sparse_spec(v.shape, v.atype).pattern
    m, k = values.shape
    score = rng.random((m, k // pat.chunk, pat.atoms_per_chunk))
    keep = np.argsort(score, axis=-1)[..., : pat.kept_atoms]
    mask = np.zeros(score.shape, bool)
    np.put_along_axis(mask, keep, True, axis=-1)
    mask = np.repeat(mask, pat.atom, axis=-1).reshape(m, k)
    return np.where(mask, values, np.zeros((), values.dtype))


class Case:
    """One warp's random operands for `pairs` instructions of variant `v`: the same A, B, C for
    every instruction, fresh scales (and random bytes wherever the selectors do not read) for each."""

    def __init__(self, v: isa.MmaVariant, pairs, rng: np.random.Generator, values=None):
        self.v, self.pairs = v, pairs
        lays = self.lays = _layouts(v)
        at, bt, st = MLIR[v.atype], MLIR[v.btype], MLIR[v.stype]
        if values is None:
            values = (R.random_matrix(at, (v.m, v.k), rng), R.random_matrix(bt, (v.k, v.n), rng))
        a, self.b = values
        self.c = R.random_matrix("f32", (v.m, v.n), rng)
        self.a = _sparse_a(v, rng, a) if v.sparse else a
        self.words = {"b": fragments.pack(lays["b"], _register_bits(self.b, v.btype, lays["b"])),
                      "c": fragments.pack(lays["c"], self.c.view(np.uint32))}
        if v.sparse:
            pat = SP.sparse_spec(v.shape, v.atype).pattern
            kept, idx = SP.compress(self.a, pat)
            self.words["a"] = SP.pack_a(v.shape, v.atype, _register_bits(kept, v.atype, lays["a"]))
            self.words["e"] = SP.metadata_words(idx, v.shape, v.atype, 0)
        else:
            self.words["a"] = fragments.pack(lays["a"], _register_bits(self.a, v.atype, lays["a"]))
        sv, chunks = _scale_vec(v), SF.SCALE_VECS[_scale_vec(v)].chunks
        self.scales, self.sa_words, self.sb_words = [], [], []
        for (ida, idb) in pairs:
            sa, sb = R.random_matrix(st, (v.m, chunks), rng), R.random_matrix(st, (chunks, v.n), rng)
            noise = rng.integers(0, 2**32, (2, 32), dtype=np.uint32)
            self.sa_words.append(SF.pack_scales("a", sv, R.to_bits(sa, st), *ida, background=noise[0]))
            self.sb_words.append(SF.pack_scales("b", sv, R.to_bits(sb, st).T, *idb, background=noise[1]))
            self.scales.append((sa, sb))

    def want(self, i: int) -> np.ndarray:
        sa, sb = self.scales[i]
        return R.scaled_mma_reference(self.a, self.b, self.c, sa, sb, a_type=MLIR[self.v.atype],
                                      b_type=MLIR[self.v.btype], scale_type=MLIR[self.v.stype],
                                      block=_block(self.v))

    def problems(self, i: int, d_words: np.ndarray, exact: bool = False) -> list[str]:
        """Every D element of instruction i against the reference: within `compare`'s bound, and
        with `exact` bit for bit. The emulator adds like sm_120's tensor cores as published
        (`mma_arith`: terms truncated to 25 or 35 fraction bits, the sum truncated to f32), the
        reference rounds once, so by default they are held to the bound only."""
        got = fragments.unpack(self.lays["c"], d_words).view(np.float32)
        want = self.want(i)
        sa, sb = self.scales[i]
        cmp = R.compare(got, want, acc_type="f32", a_type=MLIR[self.v.atype], b_type=MLIR[self.v.btype],
                        k=self.v.k, a=self.a, b=self.b, c=self.c,
                        scales=R.BlockScales(sa, sb, MLIR[self.v.stype], _block(self.v)))
        out = [] if cmp.ok else [str(cmp)]
        if exact and cmp.ok and not np.array_equal(got, want):
            r, col = np.argwhere(got != want)[0]
            out.append(f"D[{r}][{col}] = {got[r, col]!r}, want exactly {want[r, col]!r}")
        return out


def _operands(v: isa.MmaVariant) -> list[str]:
    return ["a", "b", "c"] + (["e"] if v.sparse else []) + ["sa", "sb", "d"]


def block_scaled_kernel(v: isa.MmaVariant, pairs, version: str, name: str = "mma_bs") -> ptx.EntryOp:
    """Thread t loads its a, b, c (, e) words from x[t][..], then for each selector pair i loads
    sa[t][i], sb[t][i], runs `v` with immediates {byte-id, thread-id} and stores d[t][4i..4i+3]."""
    lays = _layouts(v)
    n = len(pairs)
    counts = {"a": lays["a"].regs, "b": lays["b"].regs, "c": 4, "e": 1, "sa": n, "sb": n, "d": 4 * n}
    b = PtxBuilder()
    gid = b.special("%tid.x")
    ptrs = {}
    for op in _operands(v):
        r, off = b.reg("b64"), b.reg("b64")
        b.emit("ld.param.u64", r, f"[p_{op}]")
        b.emit("cvta.to.global.u64", r, r)
        b.emit("mul.wide.u32", off, gid, 4 * counts[op])
        b.emit("add.s64", r, r, off)
        ptrs[op] = r
    regs = {}
    for op in ("a", "b", "c", "e")[: 4 if v.sparse else 3]:
        bank = "f32" if op == "c" else "b32"
        regs[op] = b.regs(bank, counts[op])
        for i, r in enumerate(regs[op]):
            b.emit(f"ld.global.{bank}", r, f"[{ptrs[op]}+{4 * i}]")
    for i, ((ba, ta), (bb, tb)) in enumerate(pairs):
        sa, sb, d = b.reg("b32"), b.reg("b32"), b.regs("f32", 4)
        b.emit("ld.global.b32", sa, f"[{ptrs['sa']}+{4 * i}]")
        b.emit("ld.global.b32", sb, f"[{ptrs['sb']}+{4 * i}]")
        extra = ([regs["e"][0], "0x0"] if v.sparse else []) + [sa, f"{{{ba}, {ta}}}", sb, f"{{{bb}, {tb}}}"]
        b.mma(v.opcode, d, regs["a"], regs["b"], regs["c"], extra)
        for j, r in enumerate(d):
            b.emit("st.global.f32", f"[{ptrs['d']}+{16 * i + 4 * j}]", r)
    b.emit("ret")
    return b.entry(name, [f".u64 p_{op}" for op in _operands(v)], max_threads=32 * WARPS)


def _text(v: isa.MmaVariant, pairs) -> str:
    version = str(v.min_ptx_on(TARGET))
    return print_ptx(ptx.ModuleOp_(version, TARGET, [block_scaled_kernel(v, pairs, version)]))


def _args(cases: list[Case]) -> list[np.ndarray]:
    v, n = cases[0].v, len(cases[0].pairs)
    out = [np.concatenate([c.words[k].reshape(32, -1) for c in cases]) for k in ("a", "b", "c", "e")[: 3 + bool(v.sparse)]]
    out += [np.concatenate([np.stack(getattr(c, f"{k}_words"), 1) for c in cases]) for k in ("sa", "sb")]
    return out + [np.zeros((32 * len(cases), 4 * n), np.uint32)]


def _direct(v: isa.MmaVariant, cases: list[Case], i: int) -> np.ndarray:
    """Instruction i of every warp straight through `mma_warps`."""
    (ida, idb) = cases[0].pairs[i]
    w = {k: np.stack([c.words[k].reshape(32, -1) for c in cases]) for k in ("a", "b", "c")}
    e = np.stack([c.words["e"] for c in cases]) if v.sparse else None
    return emulator.mma_warps(v.opcode, w["a"], w["b"], w["c"], e, 0 if v.sparse else None,
                              scale_a=np.stack([c.sa_words[i] for c in cases]), ids_a=ida,
                              scale_b=np.stack([c.sb_words[i] for c in cases]), ids_b=idb)


# ---------------------------------------------------------------------------------------------
# Coverage and every variant x every selector
# ---------------------------------------------------------------------------------------------


def test_every_block_scaled_variant_is_emulated():
    """All 110 block-scaled spellings (Table 36 x dense/sparse x explicit/default .scale_vec_size),
    each with the scale block the ISA's Table 35 gives (K / chunks of the logical K)."""
    assert len(BLOCK_SCALED) == 110
    seen = set()
    for v in BLOCK_SCALED:
        sem = emulator.mma_semantics(v.opcode)
        assert sem.scale is not None and (sem.sparse is not None) == bool(v.sparse)
        assert sem.scale.block * SF.SCALE_VECS[sem.scale.scale_vec].chunks == v.k
        seen.add((v.sparse, v.kind, sem.scale.scale_vec, v.stype, sem.scale.block))
    assert seen == {
        (None, "mxf8f6f4", "1X", "ue8m0", 32), (None, "mxf4", "2X", "ue8m0", 32),
        (None, "mxf4nvf4", "2X", "ue8m0", 32), (None, "mxf4nvf4", "4X", "ue8m0", 16),
        (None, "mxf4nvf4", "4X", "ue4m3", 16),
        ("sp::ordered_metadata", "mxf8f6f4", "1X", "ue8m0", 64), ("sp::ordered_metadata", "mxf4", "2X", "ue8m0", 64),
        ("sp::ordered_metadata", "mxf4nvf4", "2X", "ue8m0", 64), ("sp::ordered_metadata", "mxf4nvf4", "4X", "ue8m0", 32),
        ("sp::ordered_metadata", "mxf4nvf4", "4X", "ue4m3", 32),
    }  # fmt: skip


@pytest.mark.parametrize("v", BLOCK_SCALED, ids=_short)
def test_block_scaled_variant(v):
    """Every valid selector of A and of B (one instruction per pair), two warps of random
    operands, through PTX text and the emulator; every D element against the reference."""
    pairs = _selector_pairs(v)
    rng = np.random.default_rng(zlib.crc32(v.opcode.encode()))
    cases = [Case(v, pairs, rng) for _ in range(WARPS)]
    text = _text(v, pairs)
    assert print_ptx(parse_ptx(text)) == text  # the selector pairs read back as printed
    args = _args(cases)
    d = emulate(text, "mma_bs", (1, 1, 1), (32 * WARPS, 1, 1), args)[-1]
    bad = []
    for i in range(len(pairs)):
        direct = _direct(v, cases, i)
        for w, c in enumerate(cases):
            mine = d[32 * w: 32 * (w + 1), 4 * i: 4 * i + 4]
            assert np.array_equal(direct[w], mine)
            bad += [f"selectors {pairs[i]}, warp {w}: {x}" for x in c.problems(i, mine)]
    assert not bad, "\n".join(bad[:8])


# ---------------------------------------------------------------------------------------------
# Element and scale codes, and that the selectors really decide
# ---------------------------------------------------------------------------------------------


def _finite_codes(ptx_type: str) -> np.ndarray:
    """The bit patterns of every finite value of the type (subnormals, both zeros, the largest)."""
    et = R.element_type(MLIR[ptx_type])
    codes = np.arange(1 << et.bits, dtype=np.uint8)
    return codes[np.isfinite(R.from_bits(codes, et).astype(np.float64))]


def _every_code(ptx_type: str, shape, rng) -> np.ndarray:
    """Every finite value of the type, shuffled and tiled over `shape`."""
    n = int(np.prod(shape))
    codes = rng.permutation(np.resize(_finite_codes(ptx_type), n))
    return R.from_bits(codes, MLIR[ptx_type]).reshape(shape)


EVERY_CODE = [v for v in BLOCK_SCALED if v.scale_vec is not None and (v.atype == v.btype or v.kind != "mxf8f6f4")]


@pytest.mark.parametrize("v", EVERY_CODE, ids=_short)
def test_every_element_code(v):
    """A and B hold every finite code of their type (fp8 up to 448 / 57344, fp6/fp4 subnormals
    and both zeros): the container/packing decode is right for all of them. Sums are no longer
    exact in float64, so D is held to `compare`'s bound only."""
    rng = np.random.default_rng(zlib.crc32(b"codes " + v.opcode.encode()))
    pairs = _selector_pairs(v)[:2]
    cases = [Case(v, pairs, rng, (_every_code(v.atype, (v.m, v.k), rng), _every_code(v.btype, (v.k, v.n), rng)))
             for _ in range(WARPS)]
    for c in cases:  # B holds every code (A too, where its sparsity does not drop some)
        assert set(R.to_bits(c.b, MLIR[v.btype]).ravel().tolist()) == set(_finite_codes(v.btype).tolist())
    for i in range(len(pairs)):
        d = _direct(v, cases, i)
        for w, c in enumerate(cases):
            assert not c.problems(i, d[w], exact=False), (v.opcode, pairs[i], w)


@pytest.mark.parametrize("stype", ["ue8m0", "ue4m3"])
def test_every_scale_code(stype):
    """Each of the 256 scale bytes, alone in a product: with A and B ones where they meet and
    zero elsewhere, D[m][n] = SF_A[m][n] * SF_B[n][n] for n < 4, which isolates SF_A's byte. The
    expected values are written from the formats (.ue8m0 2**(e-127), 0xFF NaN; .ue4m3 with its
    sign bit ignored, 0x7F NaN); a NaN scale makes its whole row NaN (NaN * 0 is NaN: IEEE, and
    our reading; nothing says what the hardware does)."""
    op = f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.{stype}"
    one = 0x2  # e2m1 1.0
    lay = {k: fragments.layout("m16n8k64", k, "e2m1" if k != "c" else "f32") for k in "abc"}
    a = np.zeros((16, 64), np.uint8)
    bm = np.zeros((64, 8), np.uint8)
    for j in range(4):
        a[:, 16 * j] = one
        bm[16 * j, j] = one
    unit = 127 if stype == "ue8m0" else 0x38
    sb = np.full((8, 4), unit, np.uint8)
    words = [fragments.pack(lay["a"], a), fragments.pack(lay["b"], bm), np.zeros((32, 4), np.uint32)]
    codes = np.arange(256, dtype=np.uint8)
    got = []
    for part in codes.reshape(4, 16, 4):
        d = emulator.mma_warps(op, *words, scale_a=SF.pack_scales("a", "4X", part, 0, 1), ids_a=(0, 1),
                               scale_b=SF.pack_scales("b", "4X", sb, 0, 3), ids_b=(0, 3))
        got.append(fragments.unpack(lay["c"], d).view(np.float32))
    got = np.stack(got).astype(np.float64)  # [part, m, n]
    if stype == "ue8m0":
        want = np.where(codes == 255, np.nan, np.ldexp(1.0, codes.astype(int) - 127))
    else:
        x = codes & 0x7F
        e, m = x >> 3, (x & 7).astype(float)
        want = np.where(e == 0, m * 2.0**-9, (1 + m / 8) * np.ldexp(1.0, e.astype(int) - 7))
        want = np.where(x == 0x7F, np.nan, want)
    want = want.astype(np.float32).astype(np.float64).reshape(4, 16, 4)
    nan_row = np.isnan(want).any(-1)  # a NaN scale times the row's zero products is NaN too
    want[nan_row] = np.nan
    assert np.array_equal(got[..., :4], want, equal_nan=True)
    assert np.array_equal(got[..., 4:], np.where(nan_row[..., None], np.nan, np.zeros((4, 16, 4))), equal_nan=True)


def test_selectors_decide_the_result():
    """Not vacuous: changing a byte the selectors read changes D; any change to the bytes and
    lanes they leave alone does not."""
    v = isa.parse_opcode("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1"
                         ".f32.ue8m0")
    pairs = [((2, 1), (2, 3))]
    c = Case(v, pairs, np.random.default_rng(11))
    args = [c.words[k] for k in "abc"]

    def run(sa, sb):
        return emulator.mma_warps(v.opcode, *args, scale_a=sa, ids_a=(2, 1), scale_b=sb, ids_b=(2, 3))

    d0 = run(c.sa_words[0], c.sb_words[0])
    assert not c.problems(0, d0)
    ia, _ = SF.scale_layout("a", "2X", 2, 1)
    ib, _ = SF.scale_layout("b", "2X", 2, 3)
    read_a = np.repeat(ia >= 0, 8, 1)  # [lane, bit]
    read_b = np.repeat(ib >= 0, 8, 1)
    bitmask = (1 << np.arange(32, dtype=np.uint64)).astype(np.uint32)
    junk_a = np.bitwise_or.reduce(np.where(~read_a, bitmask, 0).astype(np.uint32), axis=1)
    junk_b = np.bitwise_or.reduce(np.where(~read_b, bitmask, 0).astype(np.uint32), axis=1)
    assert np.array_equal(run(c.sa_words[0] ^ junk_a, c.sb_words[0] ^ junk_b), d0)  # unread: no effect
    lane_a = SF.scale_lane("a", 9, 1)  # row 9, chunk 1: byte 3 of lane 4*1 + 2 + 1 = 7
    assert lane_a == 7
    sa = c.sa_words[0].copy()
    sa[lane_a] ^= np.uint32(1 << 24)  # one exponent step of SF_A[9][1]
    d1 = fragments.unpack(c.lays["c"], run(sa, c.sb_words[0])).view(np.float32)
    base = fragments.unpack(c.lays["c"], d0).view(np.float32)
    assert (d1[9] != base[9]).any() and np.array_equal(np.delete(d1, 9, 0), np.delete(base, 9, 0))
    sb = c.sb_words[0].copy()
    sb[SF.scale_lane("b", 5, 3)] ^= np.uint32(1 << 16)  # SF_B[0][5]: byte 2 of lane 23
    d2 = fragments.unpack(c.lays["c"], run(c.sa_words[0], sb)).view(np.float32)
    assert (d2[:, 5] != base[:, 5]).any() and np.array_equal(np.delete(d2, 5, 1), np.delete(base, 5, 1))


# ---------------------------------------------------------------------------------------------
# Register selectors, and what is refused
# ---------------------------------------------------------------------------------------------

_MX4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"


def _register_selector_kernel(opcode: str, tid_a_from_warp: bool = True, spoil: str = "") -> str:
    """The one-instruction kernel with {byte-id, thread-id} in .b16 registers: byte-id-a 0,
    thread-id-a the warp index (the two warps use different selectors, unless not
    `tid_a_from_warp`), byte-id-b 2, thread-id-b 1; `spoil` breaks one of them."""
    text = _text(isa.parse_opcode(opcode), [((0, 0), (2, 1))])
    code = ["    mov.u32 %r900, %warpid;" if tid_a_from_warp else "    mov.u32 %r900, 0;",
            "    cvt.u16.u32 %h1, %r900;", "    mov.b16 %h0, 0;", "    mov.b16 %h2, 2;", "    mov.b16 %h3, 1;"]
    if spoil == "split":  # thread-id-b = lane & 1: differs across the warp
        code += ["    mov.u32 %r901, %laneid;", "    and.b32 %r901, %r901, 1;", "    cvt.u16.u32 %h3, %r901;"]
    if spoil == "range":  # byte-id-a 1 is undefined for .scale_vec::2X
        code += ["    mov.b16 %h0, 1;"]
    lines = text.split("\n")
    at = next(i for i, l in enumerate(lines) if l.strip().startswith("mma."))
    lines[at] = lines[at].replace("{0, 0}", "{%h0, %h1}").replace("{2, 1}", "{%h2, %h3}")
    lines[at:at] = code
    text = re.sub(r"\.reg \.b32 %r<\d+>;", ".reg .b32 %r<1000>;", "\n".join(lines))
    return text.replace("{\n", "{\n    .reg .b16 %h<4>;\n", 1)


def test_register_selectors_per_warp():
    """Selectors in 16-bit registers are read per warp: warp w runs with thread-id-a = w (its
    scales packed for that selector, random bytes in the other thread pair)."""
    v = isa.parse_opcode(_MX4)
    text = _register_selector_kernel(_MX4)
    assert print_ptx(parse_ptx(text)) == text
    rng = np.random.default_rng(12)
    cases = [Case(v, [((0, w), (2, 1))], rng) for w in range(WARPS)]
    d = emulate(text, "mma_bs", (1, 1, 1), (32 * WARPS, 1, 1), _args(cases))[-1]
    for w, c in enumerate(cases):
        assert not c.problems(0, d[32 * w: 32 * (w + 1)]), w
    c = cases[1]  # not vacuous: warp 1's registers under warp 0's selector give another D
    wrong = emulator.mma_warps(_MX4, *(c.words[k] for k in "abc"), scale_a=c.sa_words[0], ids_a=(0, 0),
                               scale_b=c.sb_words[0], ids_b=(2, 1))
    assert c.problems(0, wrong)


@pytest.mark.parametrize("spoil,message", [
    ("split", r"the warp of thread \(0, 0, 0\).*selector register of B differs across lanes \(\[0, 1\]\)"),
    ("range", (r"the warp of thread \(0, 0, 0\).*\{byte-id-a, thread-id-a\} = \{1, 0\} is undefined for "
               r"\.scale_vec::2X")),
])  # fmt: skip
def test_bad_register_selectors_are_refused(spoil, message):
    text = _register_selector_kernel(_MX4, tid_a_from_warp=False, spoil=spoil)
    v = isa.parse_opcode(_MX4)
    args = _args([Case(v, [((0, 0), (2, 1))], np.random.default_rng(w)) for w in range(WARPS)])
    with pytest.raises(EmulationError, match=message):
        emulate(text, "mma_bs", (1, 1, 1), (32 * WARPS, 1, 1), args)


@pytest.mark.parametrize("old,new,message", [
    ("{0, 1}", "{1, 1}", (r"\{byte-id-a, thread-id-a\} = \{1, 1\} is undefined for \.scale_vec::2X \(Table 37: "
                          r"byte-id in \[0, 2\], thread-id in \[0, 1\]\)")),
    ("{2, 3}", "{2, 4}", r"\{byte-id-b, thread-id-b\} = \{2, 4\} is undefined"),
    ("{0, 1}", "{0, 1, 2}", r"expected a selector pair"),
    ("{0, 1}", "{0, %f0}", r"selector '%f0' .* must be an unsigned 16-bit constant or a 16-bit integer register"),
    ("SA, {0, 1}", "%rd0, {0, 1}", r"the scale operand %rd0 must be a 32-bit register"),
    (", SB, {2, 3};", ";", (r"expected scale-a-data, \{byte-id-a, thread-id-a\}, scale-b-data, "
                            r"\{byte-id-b, thread-id-b\} after c")),
])  # fmt: skip
def test_bad_scale_operands_are_refused(old, new, message):
    v = isa.parse_opcode(_MX4)
    text = _text(v, [((0, 1), (2, 3))])
    line_no, line = next((i, l) for i, l in enumerate(text.split("\n"), 1) if l.strip().startswith("mma."))
    sa, sb = re.search(r", (%r\d+), \{0, 1\}, (%r\d+), \{2, 3\};$", line).groups()
    old = old.replace("SA", sa).replace("SB", sb)
    assert old in line, line
    with pytest.raises(EmulationError, match=rf"<ptx>:{line_no}: `mma.*`: {message}"):
        emulator.compile_entry(text.replace(line, line.replace(old, new)))


def test_scale_operands_are_required_exactly_for_block_scale():
    v = isa.parse_opcode(_MX4)
    c = Case(v, [((0, 0), (0, 0))], np.random.default_rng(13))
    w = [c.words[k] for k in "abc"]
    with pytest.raises(EmulationError, match="scale words and selectors of A and B are needed exactly for .block_scale"):
        emulator.mma_warps(_MX4, *w)
    with pytest.raises(EmulationError, match="needed exactly for .block_scale"):
        emulator.mma_warps(_MX4, *w, scale_a=c.sa_words[0], ids_a=(0, 0), scale_b=c.sb_words[0])
    plain = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    pw = [np.zeros((32, n), np.uint32) for n in (4, 2, 4)]
    with pytest.raises(EmulationError, match="needed exactly for .block_scale"):
        emulator.mma_warps(plain, *pw, scale_a=c.sa_words[0], ids_a=(0, 0), scale_b=c.sb_words[0], ids_b=(0, 0))
    with pytest.raises(EmulationError, match=r"\{byte-id-a, thread-id-a\} = \{2, 2\} is undefined"):
        emulator.mma_warps(_MX4, *w, scale_a=c.sa_words[0], ids_a=(2, 2), scale_b=c.sb_words[0], ids_b=(0, 0))


def test_block_scaled_is_refused_before_sm120a():
    v = isa.parse_opcode(_MX4)
    text = _text(v, [((0, 0), (0, 0))]).replace(".target sm_120a", ".target sm_100a")
    with pytest.raises(EmulationError, match="not available on sm_100a"):
        emulator.compile_entry(text)


# ---------------------------------------------------------------------------------------------
# ptxas: every kernel the emulator runs here assembles for sm_120a
# ---------------------------------------------------------------------------------------------

@pytest.mark.ptxas
@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (PATH, $PTXAS, nvcc wheel)")
def test_ptxas_assembles_every_block_scaled_kernel():
    """One module with the kernel of every variant PTX 9.0 has (every valid selector pair as
    immediates, the register counts and types of the tables): ptxas assembles it for sm_120a. The
    .scale_vec::4X .ue8m0 forms need PTX 9.1, which ptxas 13.0 does not know: they are assembled
    only by a ptxas that does."""
    now = [v for v in BLOCK_SCALED if v.min_ptx_on(TARGET) <= PTXAS_MAX_PTX]
    later = [v for v in BLOCK_SCALED if v not in now]
    assert len(now) == 108 and {(v.kind, v.scale_vec, v.stype) for v in later} == {("mxf4nvf4", "4X", "ue8m0")}
    entries = [block_scaled_kernel(v, _selector_pairs(v), "9.0", f"k{i}") for i, v in enumerate(now)]
    text = print_ptx(ptx.ModuleOp_("9.0", TARGET, entries))
    result = run_ptxas(text, TARGET)
    assert result.ok, result.log[:3000]
    for v in later:
        text = _text(v, _selector_pairs(v))
        result = run_ptxas(text, TARGET)
        if "Unsupported .version 9.1" in result.log:
            continue  # ptxas 13.0: the ISA's 9.1 is not assemblable yet (isa_ptxas_check lists it)
        assert result.ok, result.log[:3000]


@pytest.mark.ptxas
@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (PATH, $PTXAS, nvcc wheel)")
def test_ptxas_assembles_register_selectors():
    result = run_ptxas(_register_selector_kernel(_MX4), TARGET)
    assert result.ok, result.log


# ---------------------------------------------------------------------------------------------
# The reference itself: definition, batches, bound, scale types
# ---------------------------------------------------------------------------------------------


def _exact_f32(a, b, c, sa, sb, block) -> np.ndarray:
    """sum_k a*sa*b*sb + c with Python fractions (exact), rounded once to f32 (via float64, which
    is exact here: every sum fits 53 bits)."""
    from fractions import Fraction

    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n), np.float64)
    for i in range(m):
        for j in range(n):
            s = Fraction(float(c[i, j]))
            for kk in range(k):
                s += (Fraction(float(a[i, kk])) * Fraction(float(sa[i, kk // block]))
                      * Fraction(float(b[kk, j])) * Fraction(float(sb[kk // block, j])))
            out[i, j] = float(s)
    return out.astype(np.float32)


@pytest.mark.parametrize("at,bt,st,block", [
    ("f8E4M3FN", "f6E2M3FN", "f8E8M0FNU", 32), ("f4E2M1FN", "f4E2M1FN", "ue4m3", 16),
    ("f6E3M2FN", "f8E5M2", "ue8m0", 8),
])  # fmt: skip
def test_scaled_reference_definition(at, bt, st, block):
    rng = np.random.default_rng(21)
    stype = R.scale_type(st)
    a, b = R.random_matrix(at, (5, 64), rng), R.random_matrix(bt, (64, 3), rng)
    c = R.random_matrix("f32", (5, 3), rng)
    sa, sb = R.random_matrix(stype, (5, 64 // block), rng), R.random_matrix(stype, (64 // block, 3), rng)
    got = R.scaled_mma_reference(a, b, c, sa, sb, a_type=at, b_type=bt, scale_type=st, block=block)
    assert got.dtype == np.float32 and np.array_equal(got, _exact_f32(a, b, c, sa, sb, block))
    # rank 3: A and SF_A with batch 2, B and SF_B with batch 1 (broadcast), C batch 2
    a3 = np.stack([a, a[::-1]])
    sa3 = np.stack([sa, sa[::-1]])
    c3 = np.stack([c, -c])
    got3 = R.scaled_mma_reference(a3, b[None], c3, sa3, sb[None], a_type=at, b_type=bt, scale_type=st, block=block)
    assert np.array_equal(got3[0], got)
    assert np.array_equal(got3[1], _exact_f32(a[::-1], b, -c, sa[::-1], sb, block))
    # a scale of batch 1 against an operand of batch 2 broadcasts too
    got3b = R.scaled_mma_reference(a3, np.stack([b, b]), c3, sa3, sb[None], a_type=at, b_type=bt, scale_type=st,
                                   block=block)
    assert np.array_equal(got3b, got3)


def test_scaled_reference_refuses_what_it_cannot_mean():
    a, b = np.ones((2, 32), np.float32), np.ones((32, 2), np.float32)
    sa, sb = np.ones((2, 1)), np.ones((1, 2))
    kw = {"a_type": "f8E4M3FN", "b_type": "f8E4M3FN", "scale_type": "ue8m0"}
    with pytest.raises(ValueError, match="not a multiple of the scale block 24"):
        R.scaled_mma_reference(a, b, None, sa, sb, block=24, **kw)
    with pytest.raises(ValueError, match=r"SF_A must be \[\.\.\., 2, 2\]"):
        R.scaled_mma_reference(a, b, None, sa, sb, block=16, **kw)
    with pytest.raises(ValueError, match="fp8/fp6/fp4"):
        R.scaled_mma_reference(a, b, None, sa, sb, block=32, a_type="f16", b_type="f16", scale_type="ue8m0")
    with pytest.raises(ValueError, match="not a block-scale type"):
        R.scaled_mma_reference(a, b, None, sa, sb, block=32, a_type="f8E4M3FN", b_type="f8E4M3FN", scale_type="f16")
    with pytest.raises(ValueError, match="not representable in ue4m3"):  # unsigned: no negative scale
        R.scaled_mma_reference(a, b, None, -sa, sb, block=32, a_type="f8E4M3FN", b_type="f8E4M3FN",
                               scale_type="ue4m3")
    with pytest.raises(ValueError, match="not representable in f8E8M0FNU"):  # powers of two only
        R.scaled_mma_reference(a, b, None, 3 * sa, sb, block=32, **kw)


def test_compare_bound_includes_the_scales():
    """The bound is built from |a*sa*b*sb|: with scales of 16 an error the scaled bound allows is
    refused by the unscaled one, and an error of one scaled product is refused by both."""
    rng = np.random.default_rng(22)
    a, b = R.random_matrix("f8E4M3FN", (16, 32), rng), R.random_matrix("f8E4M3FN", (32, 8), rng)
    sa, sb = np.full((16, 1), 16.0), np.full((1, 8), 16.0)
    kw = {"a_type": "f8E4M3FN", "b_type": "f8E4M3FN", "scale_type": "f8E8M0FNU", "block": 32}
    want = R.scaled_mma_reference(a, b, None, sa, sb, **kw)
    bound = R.scaled_error_bound(a, b, None, sa, sb, **kw)
    plain = R.error_bound(a, b, None, a_type="f8E4M3FN", acc_type="f32")
    assert np.allclose(bound - 2.0**-126, 256 * (plain - 2.0**-126))
    got = (want.astype(np.float64) + 0.5 * bound).astype(np.float32)
    scales = R.BlockScales(sa, sb, "f8E8M0FNU", 32)
    assert R.compare(got, want, acc_type="f32", a_type="f8E4M3FN", k=32, a=a, b=b, scales=scales).ok
    assert not R.compare(got, want, acc_type="f32", a_type="f8E4M3FN", k=32, a=a, b=b).ok
    wrong = want.copy()
    wrong[3, 5] += np.float32(float(a[3, 0]) * float(b[0, 5]) * 256)  # one term counted twice
    cmp = R.compare(wrong, want, acc_type="f32", a_type="f8E4M3FN", k=32, a=a, b=b, scales=scales)
    assert not cmp.ok and cmp.first_bad_index == (3, 5)


def test_scale_types_in_the_reference():
    rng = np.random.default_rng(23)
    e8 = R.random_matrix("f8E8M0FNU", (64, 64), rng).astype(np.float64)
    assert np.isfinite(e8).all() and set(np.log2(e8).astype(int).ravel()) == set(range(-4, 5))
    u4 = R.random_matrix("ue4m3", (64, 64), rng)
    v = u4.astype(np.float64)
    assert u4.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and (v >= 2.0**-4).all() and (v <= 16).all()
    assert len(np.unique(v)) > 40 and (R.to_bits(u4, "ue4m3") < 0x80).all()
    for shape in [(1,), (2,), (2, 1), (3, 3)]:  # small matrices stay valid scales
        for seed in range(30):
            for name in ("f8E8M0FNU", "ue4m3"):
                x = R.random_matrix(name, shape, np.random.default_rng(seed))
                R.as_type(x, name)
                assert (x.astype(np.float64) > 0).all()
                assert x.size < 2 or not np.all(x.astype(np.float64) == float(x.ravel()[0]))
    codes = np.arange(0x7F, dtype=np.uint8)  # every non-NaN ue4m3 code round-trips; bit 7 is ignored
    assert np.array_equal(R.to_bits(R.from_bits(codes, "ue4m3"), "ue4m3"), codes)
    assert np.array_equal(R.from_bits(codes | 0x80, "ue4m3").astype(np.float64),
                          R.from_bits(codes, "ue4m3").astype(np.float64))
    assert R.to_bits(np.array([-0.0]), "ue4m3")[0] == 0
    assert R.scale_type("ue8m0").name == "f8E8M0FNU" and R.scale_type("ue4m3").name == "ue4m3"
    assert "ue4m3" not in R.ELEMENT_TYPES  # a scale, not an mma element type


@pytest.mark.parametrize("at,bt", [("f6E3M2FN", "f6E2M3FN"), ("f4E2M1FN", "f6E3M2FN"), ("f6E2M3FN", "f4E2M1FN"),
                                   ("f4E2M1FN", "f8E5M2")])
def test_mma_reference_fp6_fp4(at, bt):
    """The unscaled .kind::f8f6f4 element types in `mma_reference`: exact sum, one rounding."""
    rng = np.random.default_rng(24)
    a, b, c = R.random_matrix(at, (4, 32), rng), R.random_matrix(bt, (32, 3), rng), R.random_matrix("f32", (4, 3), rng)
    got = R.mma_reference(a, b, c, a_type=at, b_type=bt, acc_type="f32")
    ones = np.ones((4, 1)), np.ones((1, 3))
    assert np.array_equal(got, _exact_f32(a, b, c, *ones, 32))
