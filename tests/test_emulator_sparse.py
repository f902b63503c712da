"""The emulator's `mma.sp` / `mma.sp::ordered_metadata`: every sparse variant, every selector.

Random cases come from `sparse_probe.sparse_probe_case` (random kept positions, random data, random
`e` words in the lanes the selector ignores, expected D from the dense reference on the
decompressed A), are run as a kernel through PTX text and the emulator, and every D element is
compared exactly: the emulator's arithmetic is the reference's (exact sum, one rounding).

The GPU test (marked `gpu`) is the independent check: the same registers go through the verified
raw-register probe (`sparse_probe.probe_ptx`) and through this file's kernel on the GPU, and the
same kernel through the emulator; every D word is compared.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import emulator
from tilemma.compiler.core import isa
from tilemma.compiler.layouts import sparse_fragments as S
from tools import sparse_probe as P
from tilemma.compiler.verify.emulator import EmulationError, emulate
from tilemma.dialects.ptx_builder import PtxBuilder
from tilemma.compiler.verify.ptx_text import parse_ptx, print_ptx
from tilemma.dialects import ptx

SPARSE = [v for v in isa.all_variants() if v.sparse and not v.block_scale]
TARGETS = ("sm_80", "sm_90", "sm_120a")
WARPS, BLOCK = 4, 64  # two CTAs of two warps, each warp with its own random case


def _target(v: isa.MmaVariant) -> str:
    """The oldest of TARGETS the variant is legal on (sm_120a for the f8f6f4 and f16-accumulator
    fp8 forms)."""
    return next(t for t in TARGETS if v.supported_on(t))


def _selectors(v: isa.MmaVariant) -> tuple[int, ...]:
    return S.sparse_spec(v.shape, v.atype).selectors


def _swappable(v: isa.MmaVariant) -> bool:
    """Plain mma.sp with two kept values (or pairs) per chunk: decreasing order means something."""
    return v.sparse == "sp" and S.sparse_spec(v.shape, v.atype).pattern.kept_atoms == 2


def _short(opcode: str) -> str:
    return opcode.replace("sync.aligned.", "").replace("row.col.", "")


CASES = [(v.opcode, f) for v in SPARSE for f in _selectors(v)]
UNORDERED = [(v.opcode, f) for v in SPARSE if _swappable(v) for f in _selectors(v)]
IDS = [f"{_short(o)}-f{f}" for o, f in CASES]


def _bank(elem_type: str) -> tuple[str, str]:
    """(register bank, ld/st type) of a C/D register: .f32 for f32 accumulators, else .b32."""
    return ("f32", "f32") if elem_type == "f32" else ("b32", "b32")


def sparse_kernel(opcode: str, selector: int, target: str, version: str, block: int = BLOCK) -> str:
    """A kernel in the printer's subset: thread t = ctaid.x * block + tid.x loads a[t][..],
    b[t][..], c[t][..], e[t], runs one `opcode` with sparsity selector `selector`, stores d[t][..]
    (32-bit words; the same argument layout as `sparse_probe.probe_ptx`)."""
    v = isa.parse_opcode(opcode)
    counts, _ = P.probe_registers(opcode)
    types = {"a": "b32", "b": "b32", "e": "b32", "c": _bank(v.ctype)[0], "d": _bank(v.dtype)[0]}
    b = PtxBuilder()
    tid, cta = b.special("%tid.x"), b.special("%ctaid.x")
    gid = b.reg("b32")
    b.emit("mad.lo.u32", gid, cta, block, tid)
    ptrs, regs = {}, {}
    for op in P.OPERANDS:
        r, off = b.reg("b64"), b.reg("b64")
        b.emit("ld.param.u64", r, f"[p_{op}]")
        b.emit("cvta.to.global.u64", r, r)
        b.emit("mul.wide.u32", off, gid, 4 * counts[op])
        b.emit("add.s64", r, r, off)
        ptrs[op] = r
    for op in P.OPERANDS:
        regs[op] = b.regs(types[op], counts[op])
        if op != "d":
            for i, r in enumerate(regs[op]):
                b.emit(f"ld.global.{types[op]}", r, f"[{ptrs[op]}+{4 * i}]")
    b.ops.append(ptx.MmaOp(opcode, regs["d"], regs["a"], regs["b"], regs["c"], [regs["e"][0], hex(selector)]))
    for i, r in enumerate(regs["d"]):
        b.emit(f"st.global.{types['d']}", f"[{ptrs['d']}+{4 * i}]", r)
    b.emit("ret")
    entry = b.entry("mma_sp", [f".u64 p_{op}" for op in P.OPERANDS], max_threads=block)
    return print_ptx(ptx.ModuleOp_(version, target, [entry]))


def _cases(opcode: str, selector: int, seed: str, unordered: bool = False) -> list[P.SparseProbeCase]:
    """WARPS random cases; tf32 operands get random low 13 bits, which tensor cores ignore."""
    rng = np.random.default_rng(zlib.crc32(f"{seed} {opcode}/{selector}".encode()))
    cases = [P.sparse_probe_case(opcode, selector, rng, unordered=unordered) for _ in range(WARPS)]
    if cases[0].variant.atype == "tf32":
        for c in cases:
            for op in "ab":
                c.words[op] = c.words[op] | rng.integers(0, 1 << 13, c.words[op].shape, dtype=np.uint32)
    return cases


def _args(cases) -> list[np.ndarray]:
    """a, b, c, e of every warp one after another ([thread][reg]) and a zeroed d."""
    d = np.zeros((32 * len(cases), cases[0].layouts["d"].regs), np.uint32)
    return [np.concatenate([c.words[op].reshape(32, -1) for c in cases]) for op in "abce"] + [d]


def _wrong(cases, d_words: np.ndarray, who: str, exact: bool) -> list[str]:
    """Every D element against the case's expected D: exactly, or (GPU) as the probe judges. An
    f32 D is never judged exactly: the emulator truncates like the GPU's tensor cores (mma_arith;
    tests/test_mma_arith_replay.py holds it to the GPU's bits), the reference rounds once."""
    out = []
    for w, c in enumerate(cases):
        mine = d_words[32 * w: 32 * (w + 1)]
        bad = c.mismatches(mine)
        if exact and not bad and c.variant.dtype != "f32":
            got, want = c.decode(mine), np.asarray(c.expected, np.float64)
            if not np.array_equal(got, want):
                r, col = np.argwhere(got != want)[0]
                bad = [f"D[{r}][{col}] = {got[r, col]!r}, expected exactly {want[r, col]!r}"]
        out += [f"{c.opcode} f={c.selector} on {who}, warp {w}: {x}" for x in bad]
    return out


def _emulate_cases(opcode: str, selector: int, cases) -> np.ndarray:
    v = isa.parse_opcode(opcode)
    target = _target(v)
    text = sparse_kernel(opcode, selector, target, str(v.min_ptx_on(target)))
    assert print_ptx(parse_ptx(text)) == text  # the sparse mma line reads back as it was printed
    args = _args(cases)
    d = emulate(text, "mma_sp", (2, 1, 1), (BLOCK, 1, 1), args)[4]
    # the same semantics straight on registers, as `mma_warps` offers them
    direct = emulator.mma_warps(opcode, *(args[i].reshape(WARPS, 32, -1) for i in range(3)),
                                args[3].reshape(WARPS, 32), selector)
    assert np.array_equal(direct.reshape(d.shape), d)
    return d


# ---------------------------------------------------------------------------------------------
# Every variant and selector against the expected D
# ---------------------------------------------------------------------------------------------


def test_every_sparse_variant_is_covered():
    """Every sparse form of the ISA table runs: both forms legal on sm_80 and sm_90, the
    sm_120a-only fp8 (f16 accumulator) and .kind::f8f6f4 forms, and the block-scaled ones."""
    for v in isa.all_variants():
        if v.sparse:
            semantics = emulator.mma_semantics(v.opcode)
            assert semantics.sparse is not None
            assert (semantics.scale is not None) == v.block_scale
    on = {t: [v for v in SPARSE if _target(v) == t] for t in TARGETS}
    assert {v.sparse for v in on["sm_80"]} == {v.sparse for v in on["sm_90"]} == {"sp", "sp::ordered_metadata"}
    assert {v.opcode for v in isa.legal_variants("sm_90") if v.sparse} == {v.opcode for v in on["sm_80"] + on["sm_90"]}
    assert {v.kind for v in on["sm_120a"]} == {None, "f8f6f4"} and all(v.atype in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
                                                                       for v in on["sm_120a"])


@pytest.mark.parametrize("opcode,selector", CASES, ids=IDS)
def test_sparse_variant(opcode, selector):
    cases = _cases(opcode, selector, "emulator")
    bad = _wrong(cases, _emulate_cases(opcode, selector, cases), "the emulator", exact=True)
    assert not bad, "\n".join(bad[:8])


@pytest.mark.parametrize("opcode,selector", UNORDERED, ids=[f"{_short(o)}-f{f}" for o, f in UNORDERED])
def test_plain_sp_decreasing_pairs(opcode, selector):
    """Plain mma.sp runs chunks whose two kept values are stored in decreasing column order."""
    cases = _cases(opcode, selector, "unordered", unordered=True)
    assert any((np.diff(c.indices.astype(int).reshape(16, -1, 2, c.spec.pattern.atom)[..., 0], axis=-1) < 0).any()
               for c in cases)  # the cases really do hold decreasing pairs
    bad = _wrong(cases, _emulate_cases(opcode, selector, cases), "the emulator", exact=True)
    assert not bad, "\n".join(bad[:8])


def test_metadata_decides_the_result():
    """Not vacuous: another valid index in one selected lane gives another D; any word in an
    ignored lane changes nothing."""
    op = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    c = P.sparse_probe_case(op, 1, np.random.default_rng(1))
    d0 = emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"], c.words["e"], 1)
    assert not c.mismatches(d0)
    lane = c.spec.metadata_lanes(1)[0]
    e = c.words["e"].copy()
    e[lane] = (e[lane] & ~np.uint32(0xF)) | np.uint32(0xE if e[lane] & 0xF != 0xE else 0x4)
    assert not np.array_equal(emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"], e, 1), d0)
    e = c.words["e"].copy()
    e[lane ^ 2] = ~e[lane ^ 2]  # lane 0 of the quad: the selector f = 1 reads lanes 2 and 3
    assert np.array_equal(emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"], e, 1), d0)


# ---------------------------------------------------------------------------------------------
# The vectorized metadata decoder against sparse_fragments.metadata_indices
# ---------------------------------------------------------------------------------------------

_VALID = {16: (0x4, 0x8, 0x9, 0xC, 0xD, 0xE, 0x1, 0x2, 0x6, 0x3, 0x7, 0xB),  # distinct pairs, any order
          32: (0x4, 0xE)}


@pytest.mark.parametrize("spec", S.all_specs(), ids=str)
def test_metadata_decoder_matches_the_table(spec):
    """Random words (valid nibbles, some invalid ones): the emulator's indices for all warps at
    once are `metadata_indices` of each warp, and both refuse the same words."""
    atype = {16: "f16", 32: "tf32", 8: "s8", 4: "s4"}[spec.elem_bits]
    op = next(v.opcode for v in SPARSE if v.sparse == "sp" and v.shape == spec.shape and v.atype == atype)
    sparse = emulator.mma_semantics(op).sparse
    rng = np.random.default_rng(zlib.crc32(str(spec).encode()))
    valid = np.array(_VALID[32 if spec.elem_bits == 32 else 16], np.uint32)
    for f in spec.selectors:
        nibbles = valid[rng.integers(0, valid.size, (256, 32, 8))]
        spoil = rng.random(256) < 0.5  # half of the warps get one random nibble anywhere
        nibbles[spoil, rng.integers(0, 32, spoil.sum()), rng.integers(0, 8, spoil.sum())] = rng.integers(
            0, 16, spoil.sum())
        words = np.bitwise_or.reduce(nibbles << (4 * np.arange(8, dtype=np.uint32)), axis=-1)
        want, refused = [], 0
        for w in words:
            try:
                want.append(S.metadata_indices(w, spec.shape, atype, f))
            except ValueError:
                want.append(None)
                refused += 1
        assert 0 < refused < 128  # both kinds were seen
        ok = np.array([x is not None for x in want])
        np.testing.assert_array_equal(sparse.indices(words[ok], f), np.stack([x for x in want if x is not None]))
        for w in np.flatnonzero(~ok):
            with pytest.raises(EmulationError, match="metadata"):
                sparse.indices(words[w:w + 1], f)


# ---------------------------------------------------------------------------------------------
# What the ISA leaves undefined is refused, with the instruction and the thread named
# ---------------------------------------------------------------------------------------------

ORDERED_SWAP = [  # one ::ordered_metadata opcode per element width with two kept values per chunk
    "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.u8.s8.s32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.satfinite.s32.s4.s4.s32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32",
]


@pytest.mark.parametrize("opcode", ORDERED_SWAP, ids=_short)
def test_ordered_metadata_refuses_decreasing_pairs(opcode):
    v = isa.parse_opcode(opcode)
    plain = opcode.replace("mma.sp::ordered_metadata.", "mma.sp.").replace(".kind::f8f6f4", "")
    if v.kind:  # f8f6f4 has no plain form: take the decreasing metadata of a same-shape one
        plain = "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32"
    f = _selectors(v)[-1]
    cases = [P.sparse_probe_case(plain, f, np.random.default_rng(w), unordered=True) for w in range(WARPS)]
    ordered = [P.sparse_probe_case(opcode, f, np.random.default_rng(w)) for w in range(WARPS)]
    for c, o in zip(cases, ordered):  # ordered registers, with warp 1's metadata decreasing
        o.words["e"] = c.words["e"] if o is ordered[1] else o.words["e"]
    text = sparse_kernel(opcode, f, _target(v), "8.8")
    with pytest.raises(EmulationError, match=r"<ptx>:\d+: `mma\.sp::ordered_metadata.*`: the warp of thread "
                                             r"\(32, 0, 0\) of CTA \(0, 0, 0\): .*decreasing indices.*undefined"):
        emulate(text, "mma_sp", (2, 1, 1), (BLOCK, 1, 1), _args(ordered))
    with pytest.raises(EmulationError, match="warp 1: .*decreasing"):
        emulator.mma_warps(opcode, *(np.stack([o.words[k] for o in ordered]) for k in "abce"), f)


@pytest.mark.parametrize("form", ["sp", "sp::ordered_metadata"])
def test_repeated_index_is_refused(form):
    """0b0101 (index 1 twice) is invalid in both forms; in an ignored lane it does not matter."""
    op = f"mma.{form}.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16"
    c = P.sparse_probe_case(op, 1, np.random.default_rng(2))
    lane = c.spec.metadata_lanes(1)[1]  # lane 3 (second of the pair T2, T3): chunks 4..7 of rows 0 and 8
    for who, refused in ((lane, True), (lane ^ 2, False)):
        e = c.words["e"].copy()
        e[who] = (e[who] & ~np.uint32(0xF00)) | np.uint32(0x500)
        if refused:
            with pytest.raises(EmulationError, match=rf"warp 0: metadata of A row 0, chunk 6 \(columns 24..27\) is \[1, 1\] "
                                                     rf"\(lane {lane} bits 9..8, lane {lane} bits 11..10\): "
                                                     "the same index twice"):
                emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"], e, 1)
        else:
            assert not c.mismatches(emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"], e, 1))


def test_tf32_index_must_select_a_whole_element():
    op = "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    c = P.sparse_probe_case(op, 0, np.random.default_rng(3))
    e = c.words["e"].copy()
    e[0] = (e[0] & ~np.uint32(0xF)) | np.uint32(0x9)  # units 1, 2: halves of two elements
    with pytest.raises(EmulationError, match=r"units \[1, 2\] of A row 0, compressed column 0 do not select one "
                                             r"whole \.tf32 element"):
        emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"], e, 0)


@pytest.mark.parametrize(
    "opcode,selector",
    [
        ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4),  # one lane per quad: 0..3
        ("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", 2),  # a thread pair: 0..1
        ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32", 1),  # all four: 0
        ("mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32", 3),
    ],
    ids=lambda x: _short(x) if isinstance(x, str) else f"f{x}",
)
def test_bad_selector_is_refused(opcode, selector):
    text = sparse_kernel(opcode, selector, "sm_90", "8.5")
    line = next(i for i, l in enumerate(text.split("\n"), 1) if l.strip().startswith("mma."))
    with pytest.raises(EmulationError, match=rf"<ptx>:{line}: `mma.*`: sparsity selector {selector} is undefined"):
        emulator.compile_entry(text)
    c = P.sparse_probe_case(opcode, 0, np.random.default_rng(4))
    with pytest.raises(EmulationError, match=f"sparsity selector {selector} is undefined"):
        emulator.mma_warps(opcode, c.words["a"], c.words["b"], c.words["c"], c.words["e"], selector)


def test_sparse_operands_are_checked():
    op = "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    text = sparse_kernel(op, 0, "sm_90", "8.5")
    mma_line = next(l for l in text.split("\n") if l.strip().startswith("mma."))
    e_reg = re.search(r"(%r\d+), 0x0;$", mma_line).group(1)
    for new, message in (
        (mma_line.replace(", 0x0;", f", {e_reg};"), "selector %r\\d+ must be an integer constant"),
        (mma_line.replace(f", {e_reg}, 0x0;", ";"), "needs the metadata register and the sparsity selector"),
        (mma_line.replace(f", {e_reg}, 0x0;", ", %rd0, 0x0;"), "metadata operand %rd0 must be a 32-bit register"),
    ):
        with pytest.raises(EmulationError, match=message):
            emulator.compile_entry(text.replace(mma_line, new))
    c = P.sparse_probe_case(op, 0, np.random.default_rng(5))
    with pytest.raises(EmulationError, match="metadata words and selector are needed exactly for mma.sp"):
        emulator.mma_warps(op, c.words["a"], c.words["b"], c.words["c"])
    dense = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    with pytest.raises(EmulationError, match="needed exactly for mma.sp"):
        emulator.mma_warps(dense, c.words["a"].repeat(2, 1), c.words["b"], c.words["c"], c.words["e"], 0)


def test_sm120a_sparse_forms_are_refused_on_sm90():
    op = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32"
    with pytest.raises(EmulationError, match="not available on sm_90"):
        emulator.compile_entry(sparse_kernel(op, 0, "sm_90", "8.8"))


# ---------------------------------------------------------------------------------------------
# The GPU against the emulator (the independent check)
# ---------------------------------------------------------------------------------------------

SM90 = [v for v in isa.legal_variants("sm_90") if v.sparse]
GPU_CASES = [(v.opcode, f) for v in SM90 for f in _selectors(v)]
GPU_RESULTS: dict[str, list[str]] = {}  # opcode -> ["f0:bits", "f1:bound", "f2:FAIL", ...]


@pytest.fixture(scope="module")
def _gpu_table():
    """Print the (opcode, selector) -> verdict table after the GPU tests (`pytest -s`)."""
    yield GPU_RESULTS
    if GPU_RESULTS:
        width = max(len(_short(op)) for op in GPU_RESULTS)
        print(f"\n{'opcode (sm_90)':<{width}}  selector:verdict (bits = every D word identical, "
              "bound = within the ISA's accumulation freedom)")
        for op, verdicts in GPU_RESULTS.items():
            print(f"{_short(op):<{width}}  {' '.join(verdicts)}")
        rows = [x for v in GPU_RESULTS.values() for x in v]
        print(f"{len(rows)} (opcode, selector) rows, {sum('FAIL' in x for x in rows)} failing")


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}")
@pytest.mark.parametrize("opcode,selector", GPU_CASES, ids=[f"{_short(o)}-f{f}" for o, f in GPU_CASES])
def test_sparse_gpu_vs_emulator(opcode, selector, _gpu_table):
    """Random registers (plain mma.sp: half of the warps with decreasing pairs) through the GPU probe,
    this file's kernel on the GPU and the same kernel on the emulator: the two GPU runs agree bit
    for bit, both match the expected D, and every D word of the emulator is the GPU's (bit for bit
    for integers and exact f16 cases, else within the bound `sparse_probe` judges the GPU by)."""
    if cuda_runtime.driver_max_ptx() < (8, 7):
        pytest.skip("driver JIT < PTX 8.7")
    v = isa.parse_opcode(opcode)
    cases = _cases(opcode, selector, "gpu")
    if _swappable(v):
        cases[WARPS // 2:] = _cases(opcode, selector, "gpu unordered", unordered=True)[WARPS // 2:]
    args = _args(cases)
    text = sparse_kernel(opcode, selector, "sm_90", "8.7")
    probe = P.probe_ptx(opcode, *P.probe_registers(opcode), selector, "sm_90", "8.7")
    gpu_probe = cuda_runtime.run_kernel(probe, P.ENTRY, (WARPS, 1, 1), (32, 1, 1), args)[4]
    gpu = cuda_runtime.run_kernel(text, "mma_sp", (2, 1, 1), (BLOCK, 1, 1), args)[4]
    emu = emulate(text, "mma_sp", (2, 1, 1), (BLOCK, 1, 1), args)[4]
    problems = [] if np.array_equal(gpu, gpu_probe) else ["the probe and this kernel differ on the GPU"]
    problems += _wrong(cases, gpu, "the GPU", exact=False) + _wrong(cases, emu, "the emulator", exact=True)
    identical = np.array_equal(gpu, emu)
    differ = 0
    for w, c in enumerate(cases):  # inexact cases: both within the bound of the same D, checked above
        g, e = gpu[32 * w: 32 * (w + 1)], emu[32 * w: 32 * (w + 1)]
        differ += int((g != e).sum())
        if (c.exact or v.dtype == "s32") and not np.array_equal(g, e):
            problems.append(f"warp {w}: GPU and emulator D words differ in an exact case")
    verdict = "FAIL" if problems else "bits" if identical else f"bound({differ}w)"
    GPU_RESULTS.setdefault(opcode, []).append(f"f{selector}:{verdict}")
    assert not problems, "\n".join(problems[:8])
