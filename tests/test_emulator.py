"""The CPU emulator: generated GEMMs of every dense family against the NumPy reference, every mma
variant on raw registers, instruction semantics against models written from the ISA text, bounds
checks, lockstep control flow, and PTX text that reads back into the same `ptx` ops.

No GPU needed, except for the differential test (marked `gpu`): it runs the same raw-register
kernels on the GPU and the emulator and compares every lane.
"""

from __future__ import annotations

import dataclasses
import re
import zlib

import numpy as np
import pytest
from xdsl.ir import Operation
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import emulator
from tilemma.compiler.layouts import fragments
from tilemma.compiler.core import isa
from tools import mma_probe as P
from tilemma.compiler.verify.emulator import EmulationError, emulate
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_module, compile_text, parse
from tilemma.dialects.ptx_builder import PtxBuilder
from tilemma.compiler.verify.ptx_text import PtxSyntaxError, parse_ptx, print_ptx
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.core.targets import DEFAULT_PTX
from tilemma.dialects import ptx

from tests.dense_cases import DENSE_SM90, case_id, spec_for

SMS = ("80", "90", "120a")


def _compile(spec: GemmSpec, sm: str, **options):
    module = gemm_module(spec)
    try:
        [kernel] = compile_text(str(module), spec.name, CompileOptions(sm=sm, **options))
    except Exception as e:  # LocatedVerifyError from a LoweringError
        if "no mma.sync variant" in str(e):
            pytest.skip(f"sm_{sm}: {str(e).splitlines()[0].split('error: ', 1)[-1]}")  # the message, not the caret
        raise
    return kernel, list(kernel.arg_sizes)


def _odd(case):
    return spec_for(case, 19, 23, 300 if case[0] == "i1" else 37)


def _batch(case):
    return spec_for(case, 13, 17, 300 if case[0] == "i1" else 29, batch=2, bcast="a" if case[0] == "f16" else "b")


# ---------------------------------------------------------------------------------------------
# Every dense family, three targets, through compile + emulator against the reference
# ---------------------------------------------------------------------------------------------


# Odd sizes on every target (each target's instruction for the family: int4 native on sm_80 and
# widened to 8-bit from sm_90, fp8 from sm_89); the batch and its broadcast operand, which address
# alike on every target, on sm_90.
DENSE_RUNS = [(make, case, sm) for case in DENSE_SM90 for make, sms in ((_odd, SMS), (_batch, ("90",)))
              for sm in sms]


@pytest.mark.parametrize("make, case, sm", DENSE_RUNS,
                         ids=[f"{m.__name__[1:]}-{case_id(c)}-{sm}" for m, c, sm in DENSE_RUNS])
def test_dense_family(make, case, sm):
    if make is _odd and sm == "90":  # what the emulator reads is what was printed (once a family)
        kernel = _compile_and_read_back(make(case))
    else:
        kernel, sizes = _compile(make(case), sm)
    result = run_compiled(kernel, seed=7, on="emulator")
    assert result.ok, result.line()


@pytest.mark.parametrize("sm", SMS)
@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_f32_operands(precision, sm):
    """f32 inputs on tf32 units: rounded once (tf32) or split into hi/lo tf32 parts, three mmas."""
    spec = GemmSpec(37, 91, 53, "f32", "f32", "f32", batch=2, bcast="b")
    module = gemm_module(spec)
    [kernel] = compile_text(str(module), spec.name, CompileOptions(sm=sm, f32_precision=precision))
    result = run_compiled(kernel, seed=3, on="emulator")
    assert result.ok, result.line()


def test_emulator_catches_a_wrong_kernel():
    """The comparison is not vacuous: swapping two B fragment loads gives wrong elements."""
    kernel, sizes = _compile(GemmSpec(32, 16, 32, "f16", "f16", "f32"), "90", stages=0)
    lines = kernel.ptx.split("\n")
    b_ptr = re.search(r"mad\.lo\.s64 (%rd\d+), %rd\d+, 2, %rd1;", kernel.ptx).group(1)  # p_b is %rd1
    loads = [i for i, l in enumerate(lines) if "ld.global.u16" in l and f"[{b_ptr}+" in l]
    i, j = loads[0], loads[1]
    addr = re.compile(r"\[[^\]]+\]")
    ai, aj = addr.search(lines[i]).group(0), addr.search(lines[j]).group(0)
    lines[i], lines[j] = addr.sub(aj, lines[i]), addr.sub(ai, lines[j])
    bad = dataclasses.replace(kernel, ptx="\n".join(lines))
    result = run_compiled(bad, seed=7, on="emulator")
    assert not result.ok and "out of bound" in result.detail


@pytest.mark.parametrize(
    "edit,message",
    [
        # one group fewer waited for: the stage about to be read still has copies in flight
        (("cp.async.wait_group 1;", "cp.async.wait_group 2;"), "cp.async in flight"),
        # no barrier between this iteration's ldmatrix reads and the next one's refill
        (("bar.sync 0;", "// bar.sync 0;"), "race"),
        # a broken swizzle (or for xor) sends two threads' copies to one place
        (("xor.b32", "or.b32"), "shared-memory race"),
    ],
)
def test_emulator_catches_a_broken_staged_kernel(edit, message):
    """The staged schedule's waits, barriers and swizzle are each load-bearing in the emulator."""
    kernel, _ = _compile(GemmSpec(70, 40, 200, "f16", "f16", "f32"), "90")
    assert kernel.abi.shared_bytes and edit[0] in kernel.ptx
    bad = dataclasses.replace(kernel, ptx=kernel.ptx.replace(*edit))
    with pytest.raises(EmulationError, match=message):
        run_compiled(bad, seed=5, on="emulator")


def test_runner_rejects_unknown_device():
    kernel, sizes = _compile(GemmSpec(16, 8, 16, "f16", "f16", "f32"), "90")
    with pytest.raises(ValueError, match="expected 'gpu' or 'emulator'"):
        run_compiled(kernel, seed=1, on="tpu")


def test_cli_run_on_emulator(tmp_path, capsys):
    """The issue's acceptance command, `tilemma run FILE --sm 90 --on emulator`."""
    pytest.importorskip("tilemma.compiler.driver.isa_commands", reason="the CLI's parser imports isa_commands, not in this tree yet")
    from tilemma.compiler.driver import cli

    path = tmp_path / "g.mlir"
    path.write_text(str(gemm_module(GemmSpec(37, 91, 53, "bf16", "bf16", "f32"))))
    assert cli.main(["run", str(path), "--sm", "90", "--on", "emulator"]) == 0
    out = capsys.readouterr().out
    assert "on emulator" in out and "PASS" in out


# ---------------------------------------------------------------------------------------------
# Every dense mma variant of the ISA table on raw registers
# ---------------------------------------------------------------------------------------------

DENSE_VARIANTS = [v for v in isa.all_variants() if not v.sparse and not v.block_scale]
SM90_VARIANTS = [v for v in DENSE_VARIANTS if v.supported_on("sm_90")]
WARPS, BLOCK = 4, 64  # two CTAs of two warps: every warp gets its own random registers


def _target(v: isa.MmaVariant) -> str:
    return "sm_90" if v.supported_on("sm_90") else "sm_120a"


def _bank(elem_type: str, operand: str) -> tuple[str, str]:
    """(register bank, ld/st type) the compiler would use for an operand's registers."""
    if elem_type == "f64":
        return "f64", "f64"
    if operand in ("c", "d") and elem_type == "f32":
        return "f32", "f32"
    return "b32", "b32"


def probe_kernel(v: isa.MmaVariant, target: str, version: str) -> str:
    """A kernel in the printer's subset: thread t loads its a/b/c words from x[t][reg], runs one
    `v`, stores d[t][reg]. Nothing but the mma decides where an element goes."""
    case_regs, _ = P.probe_registers(v.opcode)
    types = {"a": v.atype, "b": v.btype, "c": v.ctype, "d": v.dtype}
    b = PtxBuilder()
    ptrs = {}
    tid, cta = b.special("%tid.x"), b.special("%ctaid.x")
    gid = b.reg("b32")
    b.emit("mad.lo.u32", gid, cta, BLOCK, tid)
    for op in "abcd":
        r = b.reg("b64")
        b.emit("ld.param.u64", r, f"[p_{op}]")
        b.emit("cvta.to.global.u64", r, r)
        bank, _ = _bank(types[op], op)
        off = b.reg("b64")
        b.emit("mul.wide.u32", off, gid, case_regs[op] * (8 if bank == "f64" else 4))
        b.emit("add.s64", r, r, off)
        ptrs[op] = r
    regs = {}
    for op in "abcd":
        bank, mt = _bank(types[op], op)
        regs[op] = b.regs(bank, case_regs[op])
        if op != "d":
            for i, r in enumerate(regs[op]):
                b.emit(f"ld.global.{mt}", r, f"[{ptrs[op]}+{i * (8 if bank == 'f64' else 4)}]")
    b.mma(v.opcode, regs["d"], regs["a"], regs["b"], regs["c"])
    bank, mt = _bank(v.dtype, "d")
    for i, r in enumerate(regs["d"]):
        b.emit(f"st.global.{mt}", f"[{ptrs['d']}+{i * (8 if bank == 'f64' else 4)}]", r)
    b.emit("ret")
    entry = b.entry("mma_probe", [f".u64 p_{op}" for op in "abcd"], max_threads=BLOCK)
    return print_ptx(ptx.ModuleOp_(version, target, [entry]))


def _cases(v: isa.MmaVariant, seed: int):
    rng = np.random.default_rng(seed)
    cases = [P.probe_case(v.opcode, rng) for _ in range(WARPS)]
    if v.atype == "tf32":  # tensor cores ignore the low 13 bits of a tf32 register
        for c in cases:
            for op in "ab":
                c.words[op] = c.words[op] | rng.integers(0, 1 << 13, c.words[op].shape, dtype=np.uint32)
    return cases


def _args(cases) -> list[np.ndarray]:
    """a, b, c words of every warp one after another ([thread][reg]), and a zeroed d."""
    d = cases[0].layouts["d"]
    return [np.concatenate([c.words[op] for c in cases]) for op in "abc"] + [
        np.zeros((32 * len(cases), d.regs), d.word_dtype)
    ]


def _check_d(cases, d_words: np.ndarray, who: str) -> None:
    for w, c in enumerate(cases):
        bad = c.mismatches(d_words[32 * w: 32 * (w + 1)])
        assert not bad, f"{c.opcode} on {who}, warp {w}:\n" + "\n".join(bad)


@pytest.mark.parametrize("v", DENSE_VARIANTS, ids=lambda v: v.opcode)
def test_mma_variant_raw_registers(v):
    cases = _cases(v, seed=zlib.crc32(v.opcode.encode()))
    text = probe_kernel(v, _target(v), str(DEFAULT_PTX))
    args = _args(cases)
    d = emulate(text, "mma_probe", (2, 1, 1), (BLOCK, 1, 1), args)[3]
    _check_d(cases, d, "the emulator")
    # The same semantics straight on registers, as `mma_warps` offers them.
    direct = emulator.mma_warps(v.opcode, *(args[i].reshape(WARPS, 32, -1) for i in range(3)))
    assert np.array_equal(direct.reshape(d.shape), d)


def test_m8n8k4_quadpairs_are_independent():
    """m8n8k4 .f16 is four 8x8x4 products: quad-pair q's D depends only on its own registers."""
    op = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
    rng = np.random.default_rng(3)
    lays = {k: fragments.layout("m8n8k4", k, "f16" if k in "ab" else "f32", view="quadpair") for k in "abc"}
    mats = {k: rng.integers(-4, 5, (4, lays[k].rows, lays[k].cols)).astype(np.float16 if k in "ab" else np.float32)
            for k in "abc"}
    words = {}
    for k in "abc":
        per_q = [fragments.pack(lays[k], mats[k][q].view(np.uint16 if k in "ab" else np.uint32)) for q in range(4)]
        words[k] = np.stack([per_q[(lane >> 2) & 3][lane] for lane in range(32)])
    d = emulator.mma_warps(op, words["a"], words["b"], words["c"])
    for q in range(4):
        # every lane takes the D words of its counterpart in quad-pair q, so all copies agree
        mine = np.stack([d[(lane & 3) | (q << 2) | (lane & 16)] for lane in range(32)])
        got = fragments.unpack(lays["c"], mine).view(np.float32)
        want = mats["a"][q].astype(np.float64) @ mats["b"][q] + mats["c"][q]
        assert np.array_equal(got, want.astype(np.float32)), f"quad-pair {q}"


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}")
@pytest.mark.parametrize("v", SM90_VARIANTS, ids=lambda v: v.opcode)
def test_mma_variant_gpu_vs_emulator(v):
    """The independent truth: random registers in, the GPU's registers out, every lane compared
    with the emulator's (bit for bit for integer and exact f16 cases, within the ISA's freedom of
    accumulation order and rounding for the others)."""
    major, minor = cuda_runtime.driver_max_ptx()
    version = min((9, 0), (major, minor))
    text = probe_kernel(v, "sm_90", f"{version[0]}.{version[1]}")
    cases = _cases(v, seed=zlib.crc32(v.opcode.encode()))
    args = _args(cases)
    gpu = cuda_runtime.run_kernel(text, "mma_probe", (2, 1, 1), (BLOCK, 1, 1), args)[3]
    emu = emulate(text, "mma_probe", (2, 1, 1), (BLOCK, 1, 1), args)[3]
    _check_d(cases, gpu, "the GPU")
    _check_d(cases, emu, "the emulator")
    for w, c in enumerate(cases):  # and lane by lane against each other
        g, e = (c.decode(x[32 * w: 32 * (w + 1)]) for x in (gpu, emu))
        assert (np.abs(g - e) <= c.tolerance).all(), f"{v.opcode}, warp {w}: GPU {g} vs emulator {e}"
    if all(not c.tolerance.any() for c in cases):
        assert np.array_equal(gpu, emu), f"{v.opcode}: GPU and emulator registers differ"


def _f64_directed_case(exact_sign: float):
    """m8n8k4 .f64 registers whose exact D is 1 + s * 2**-60 (rows 0..3) and -1 + s * 2**-60 (rows
    4..7), s = exact_sign: no f64 holds those, so .rn/.rz/.rm/.rp pick different neighbours."""
    lays = {k: fragments.layout("m8n8k4", k, "f64") for k in "abc"}
    a = np.zeros((8, 4))
    b = np.zeros((4, 8))
    a[:, 0] = 2.0**-30
    b[0, :] = exact_sign * 2.0**-30
    c = np.ones((8, 8))
    c[4:] = -1.0  # rows 4..7: -1 + s * 2**-60
    return {k: fragments.pack(lays[k], m.view(np.uint64)) for k, m in zip("abc", (a, b, c))}, lays["c"]


def _directed_want(rounding: str | None, sign: float) -> np.ndarray:
    up, down = np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0)
    picks = {  # row block (c = 1 or -1) -> result, for exact c + sign * 2**-60
        (1.0, None): (1.0, -1.0), (1.0, "rn"): (1.0, -1.0), (1.0, "rz"): (1.0, -down),
        (1.0, "rm"): (1.0, -1.0), (1.0, "rp"): (up, -down),
        (-1.0, None): (1.0, -1.0), (-1.0, "rn"): (1.0, -1.0), (-1.0, "rz"): (down, -1.0),
        (-1.0, "rm"): (down, -up), (-1.0, "rp"): (1.0, -1.0),
    }  # fmt: skip
    top, bottom = picks[(sign, rounding)]
    want = np.empty((8, 8))
    want[:4], want[4:] = top, bottom
    return want


@pytest.mark.parametrize("rounding", [None, "rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_f64_rounding_modes(rounding, sign):
    op = "mma.sync.aligned.m8n8k4.row.col" + (f".{rounding}" if rounding else "") + ".f64.f64.f64.f64"
    words, lay_c = _f64_directed_case(sign)
    d = emulator.mma_warps(op, words["a"], words["b"], words["c"])
    got = fragments.unpack(lay_c, d).view(np.float64)
    assert np.array_equal(got, _directed_want(rounding, sign)), op


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}")
@pytest.mark.parametrize("rounding", [None, "rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_f64_rounding_modes_gpu(rounding, sign):
    op = "mma.sync.aligned.m8n8k4.row.col" + (f".{rounding}" if rounding else "") + ".f64.f64.f64.f64"
    major, minor = cuda_runtime.driver_max_ptx()
    version = min((9, 0), (major, minor))
    text = probe_kernel(isa.parse_opcode(op), "sm_90", f"{version[0]}.{version[1]}")
    words, lay_c = _f64_directed_case(sign)
    args = [np.concatenate([words[k]] * WARPS) for k in "abc"] + [np.zeros((32 * WARPS, 2), np.uint64)]
    gpu = cuda_runtime.run_kernel(text, "mma_probe", (2, 1, 1), (BLOCK, 1, 1), args)[3]
    emu = emulate(text, "mma_probe", (2, 1, 1), (BLOCK, 1, 1), args)[3]
    assert np.array_equal(gpu, emu), op
    assert np.array_equal(fragments.unpack(lay_c, gpu[:32]).view(np.float64), _directed_want(rounding, sign))


def test_mma_illegal_on_target_is_refused():
    v = isa.parse_opcode("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64")
    text = probe_kernel(v, "sm_80", str(DEFAULT_PTX))
    with pytest.raises(EmulationError, match=r":\d+: `mma.*not available on sm_80.*needs sm_90"):
        emulator.compile_entry(text)


# ---------------------------------------------------------------------------------------------
# Instruction semantics against models written from the ISA's pseudo-code
# ---------------------------------------------------------------------------------------------

_HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"


def _kernel(body: list[str], params=("p_x", "p_y", "p_z", "p_out")) -> str:
    """Hand-written PTX in the printer's layout (labels flush left, the rest indented)."""
    decl = ",\n".join(f"    .param .u64 {p}" for p in params)
    lines = [line if line.endswith(":") else f"    {line}" for line in body]
    return f"{_HEADER}\n.visible .entry k(\n{decl}\n)\n{{\n" + "\n".join(lines) + "\n}\n"


_PRELUDE = [
    ".reg .b32 %r<40>;", ".reg .b64 %rd<10>;", ".reg .pred %p<4>;", ".reg .f32 %f<4>;",
    "mov.u32 %r0, %tid.x;", "mov.u32 %r1, %ctaid.x;", "mov.u32 %r2, %ntid.x;",
    "mad.lo.u32 %r3, %r1, %r2, %r0;",  # global thread id
    "ld.param.u64 %rd0, [p_x];", "cvta.to.global.u64 %rd0, %rd0;",
    "ld.param.u64 %rd1, [p_y];", "cvta.to.global.u64 %rd1, %rd1;",
    "ld.param.u64 %rd2, [p_z];", "cvta.to.global.u64 %rd2, %rd2;",
    "ld.param.u64 %rd3, [p_out];", "cvta.to.global.u64 %rd3, %rd3;",
    "mul.wide.u32 %rd4, %r3, 4;", "add.s64 %rd5, %rd0, %rd4;", "add.s64 %rd6, %rd1, %rd4;",
    "add.s64 %rd7, %rd2, %rd4;",
    "ld.global.b32 %r4, [%rd5+0];", "ld.global.b32 %r5, [%rd6+0];", "ld.global.b32 %r6, [%rd7+0];",
    "mul.wide.u32 %rd8, %r3, 128;", "add.s64 %rd8, %rd3, %rd8;",  # out[t][0..32)
]  # fmt: skip


def _bits(x: int, i: int) -> int:
    return (x >> i) & 1


def _bfe_model(a: int, pos: int, ln: int, signed: bool, w: int = 32) -> int:
    """bfe pseudo-code of the PTX ISA, bit by bit."""
    pos, ln = pos & 0xFF, ln & 0xFF
    msb = w - 1
    sbit = 0 if (not signed or ln == 0) else _bits(a, min(pos + ln - 1, msb))
    return sum(((_bits(a, pos + i) if (i < ln and pos + i <= msb) else sbit) << i) for i in range(w))


def _bfi_model(a: int, b: int, pos: int, ln: int, w: int = 32) -> int:
    pos, ln = pos & 0xFF, ln & 0xFF
    f = b
    for i in range(ln):
        if pos + i <= w - 1:
            f = (f & ~(1 << (pos + i))) | (_bits(a, i) << (pos + i))
    return f


def _s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


def test_integer_instruction_semantics():
    ops = [
        "bfe.u32 %r10, %r4, %r5, %r6;", "bfe.s32 %r11, %r4, %r5, %r6;",
        "bfi.b32 %r12, %r4, %r7, %r5, %r6;", "shr.s32 %r13, %r4, %r5;", "shr.u32 %r14, %r4, %r5;",
        "shl.b32 %r15, %r4, %r5;", "div.s32 %r16, %r4, %r8;", "rem.s32 %r17, %r4, %r8;",
        "div.u32 %r18, %r4, %r8;", "rem.u32 %r19, %r4, %r8;", "mul.hi.u32 %r20, %r4, %r7;",
        "mul.lo.s32 %r21, %r4, %r7;", "mad.lo.u32 %r22, %r4, %r7, %r6;",
        "setp.lt.s32 %p0, %r4, %r7;", "selp.b32 %r23, 1, 0, %p0;",
        "setp.lo.u32 %p1, %r4, %r7;", "selp.b32 %r24, 1, 0, %p1;",
        "bfe.u32 %r25, %r4, 3, 7;", "bfi.b32 %r26, %r4, %r7, 29, 9;",
    ]  # fmt: skip
    body = _PRELUDE + [
        "xor.b32 %r7, %r4, %r6;", "shr.s32 %r8, %r7, 24;", "or.b32 %r8, %r8, 1;",  # odd divisor
        *ops,
        *[f"st.global.b32 [%rd8+{4 * i}], %r{10 + i};" for i in range(17)],
        "ret;",
    ]
    rng = np.random.default_rng(5)
    n = 256
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:8] = [0, 1, 0x80000000, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFF0000, 12345, 0x80000001]
    y = rng.integers(0, 48, n, dtype=np.uint32)  # positions and shift counts, some past 31
    z = rng.integers(0, 300, n, dtype=np.uint32)  # lengths, some past 32 and some past 255
    out = np.zeros((n, 32), np.uint32)
    text = _kernel(body)
    out = emulate(text, "k", (2, 1, 1), (128, 1, 1), [x, y, z, out])[3]
    names = [o.split()[0] for o in ops if not o.startswith("setp")]
    for t in range(n):
        a, p, ln = int(x[t]), int(y[t]), int(z[t])
        b = a ^ ln
        dv = _s32(b) >> 24 | 1
        q = _tdiv(_s32(a), dv)
        want = [
            _bfe_model(a, p, ln, False), _bfe_model(a, p, ln, True), _bfi_model(a, b, p, ln),
            (_s32(a) >> min(p, 31)) & 0xFFFFFFFF, (a >> p) if p < 32 else 0,
            ((a << p) & 0xFFFFFFFF) if p < 32 else 0,
            q & 0xFFFFFFFF, (_s32(a) - q * dv) & 0xFFFFFFFF,
            a // (dv & 0xFFFFFFFF), a % (dv & 0xFFFFFFFF), (a * b) >> 32, (_s32(a) * _s32(b)) & 0xFFFFFFFF,
            (a * b + ln) & 0xFFFFFFFF, int(_s32(a) < _s32(b)), int(a < b), _bfe_model(a, 3, 7, False),
            _bfi_model(a, b, 29, 9),
        ]  # fmt: skip
        assert len(want) == len(names) == 17
        for i, w in enumerate(want):
            got = int(out[t, i])
            assert got == w, f"thread {t}: {names[i]} of {a:#x}, {p}, {ln}: got {got:#x}, want {w:#x}"
    assert not out[:, 17:].any()


def _tdiv(a: int, d: int) -> int:
    """Integer division truncating toward zero (PTX div.s32)."""
    q = abs(a) // abs(d)
    return q if (a < 0) == (d < 0) else -q


def test_tf32_conversion_and_64bit_arithmetic():
    body = _PRELUDE + [
        "mov.b32 %f0, %r4;",
        "cvt.rna.tf32.f32 %r10, %f0;", "cvt.rn.tf32.f32 %r11, %f0;", "cvt.rz.tf32.f32 %r12, %f0;",
        "cvt.u64.u32 %rd9, %r4;", "mad.lo.s64 %rd9, %rd9, 3, %rd9;", "cvt.u32.u64 %r13, %rd9;",
        "shr.u64 %rd9, %rd9, 32;", "cvt.u32.u64 %r14, %rd9;",
        "mul.wide.s32 %rd9, %r4, %r5;", "shr.b64 %rd9, %rd9, 32;", "cvt.u32.u64 %r15, %rd9;",
        *[f"st.global.b32 [%rd8+{4 * i}], %r{10 + i};" for i in range(6)],
        "ret;",
    ]  # fmt: skip
    x = np.array([0x3F801000, 0x3F803000, 0x3F801FFF, 0xBF801000, 0x7F7FFFFF, 0x00001000, 0x3F800FFF, 0xFFFFFFFF] * 4,
                 np.uint32)
    y = np.arange(32, dtype=np.uint32) * 0x10000001
    out = emulate(_kernel(body), "k", (1, 1, 1), (32, 1, 1), [x, y, np.zeros(32, np.uint32), np.zeros((32, 32), np.uint32)])[3]
    rna = {0x3F801000: 0x3F802000, 0x3F803000: 0x3F804000, 0x3F801FFF: 0x3F802000, 0xBF801000: 0xBF802000,
           0x7F7FFFFF: 0x7F800000, 0x00001000: 0x00002000, 0x3F800FFF: 0x3F800000}
    rn = {0x3F801000: 0x3F800000, 0x3F803000: 0x3F804000, 0xBF801000: 0xBF800000, 0x3F801FFF: 0x3F802000}
    for t in range(32):
        a = int(x[t])
        if a in rna:
            assert int(out[t, 0]) == rna[a], f"cvt.rna.tf32.f32 {a:#x}"
        if a in rn:
            assert int(out[t, 1]) == rn[a], f"cvt.rn.tf32.f32 {a:#x}"
        if a != 0xFFFFFFFF:  # NaN keeps being NaN; checked separately below
            assert int(out[t, 2]) == a & 0xFFFFE000
        assert int(out[t, 3]) == (a * 4) & 0xFFFFFFFF and int(out[t, 4]) == (a * 4) >> 32
        assert int(out[t, 5]) == ((_s32(a) * _s32(int(y[t]))) >> 32) & 0xFFFFFFFF
    assert np.isnan(out[7, 0:3].view(np.float32)).all()


_S32_MIN = 0x80000000


def _popc(x: int) -> int:
    return x.bit_count()


def _shift_model(op: str, a: int, n: int, w: int = 64) -> int:
    """shl/shr of the ISA: counts past the width give 0 (unsigned/.b) or the sign (.s)."""
    mask = (1 << w) - 1
    if op == "shl":
        return (a << n) & mask if n < w else 0
    return a >> n if n < w else 0


def _bfe64(a: int, pos: int, ln: int, signed: bool) -> int:
    return _bfe_model(a, pos, ln, signed, w=64)


_OPS32 = [  # (instruction writing %rd/%r result, model of (x0, x1, w0, w1, s0, s1)); 32-bit results
    ("popc.b32 %r20, %r4;", lambda x0, x1, w0, w1, s0, s1: _popc(x0)),
    ("popc.b64 %r20, %rd20;", lambda x0, x1, w0, w1, s0, s1: _popc(w0)),
    ("abs.s32 %r20, %r4;", lambda x0, x1, w0, w1, s0, s1: abs(_s32(x0)) & 0xFFFFFFFF),
    ("neg.s32 %r20, %r4;", lambda x0, x1, w0, w1, s0, s1: -_s32(x0) & 0xFFFFFFFF),
    ("min.u32 %r20, %r4, %r5;", lambda x0, x1, w0, w1, s0, s1: min(x0, x1)),
    ("max.u32 %r20, %r4, %r5;", lambda x0, x1, w0, w1, s0, s1: max(x0, x1)),
    ("cvt.u32.u64 %r20, %rd20;", lambda x0, x1, w0, w1, s0, s1: w0 & 0xFFFFFFFF),
    ("setp.ne.b32 %p1, %r4, %r5;\n    selp.u32 %r20, 1, 0, %p1;", lambda x0, x1, w0, w1, s0, s1: int(x0 != x1)),
    ("setp.ne.u32 %p1, %r4, 0;\n    selp.b32 %r20, %r4, %r5, %p1;", lambda x0, x1, w0, w1, s0, s1: x0 if x0 else x1),
    ("setp.ne.b64 %p1, %rd20, %rd21;\n    selp.u32 %r20, 1, 0, %p1;", lambda x0, x1, w0, w1, s0, s1: int(w0 != w1)),
    ("setp.gt.u32 %p1, %r4, %r5;\n    selp.u32 %r20, 1, 0, %p1;", lambda x0, x1, w0, w1, s0, s1: int(x0 > x1)),
    ("setp.ge.u32 %p1, %r4, %r5;\n    selp.u32 %r20, 1, 0, %p1;", lambda x0, x1, w0, w1, s0, s1: int(x0 >= x1)),
    ("setp.eq.u32 %p1, %r4, %r5;\n    selp.u32 %r20, 1, 0, %p1;", lambda x0, x1, w0, w1, s0, s1: int(x0 == x1)),
]
_OPS64 = [  # 64-bit results
    ("shr.b64 %rd30, %rd20, %r6;", lambda x0, x1, w0, w1, s0, s1: _shift_model("shr", w0, s0)),
    ("shr.u64 %rd30, %rd20, %r6;", lambda x0, x1, w0, w1, s0, s1: _shift_model("shr", w0, s0)),
    ("shl.b64 %rd30, %rd20, %r6;", lambda x0, x1, w0, w1, s0, s1: _shift_model("shl", w0, s0)),
    ("and.b64 %rd30, %rd20, %rd21;", lambda x0, x1, w0, w1, s0, s1: w0 & w1),
    ("or.b64 %rd30, %rd20, %rd21;", lambda x0, x1, w0, w1, s0, s1: w0 | w1),
    ("cvt.u64.u32 %rd30, %r4;", lambda x0, x1, w0, w1, s0, s1: x0),
    ("mov.b64 %rd30, 0xFEDCBA9876543210;", lambda *_: 0xFEDCBA9876543210),
    ("mov.b64 %rd30, 18446744073709551615;", lambda *_: 2**64 - 1),
    ("mov.b64 %rd30, 0x8000000000000001;\n    xor.b64 %rd30, %rd30, %rd20;", lambda x0, x1, w0, w1, s0, s1:
     w0 ^ 0x8000000000000001),
    ("setp.gt.u32 %p1, %r4, %r5;\n    selp.b64 %rd30, %rd20, %rd21, %p1;", lambda x0, x1, w0, w1, s0, s1:
     w0 if x0 > x1 else w1),
    ("selp.b64 %rd30, 0x123456789ABCDEF0, %rd21, %p1;", lambda x0, x1, w0, w1, s0, s1:
     0x123456789ABCDEF0 if x0 > x1 else w1),
    ("bfe.u64 %rd30, %rd20, %r6, %r7;", lambda x0, x1, w0, w1, s0, s1: _bfe64(w0, s0, s1, False)),
    ("bfe.s64 %rd30, %rd20, %r6, %r7;", lambda x0, x1, w0, w1, s0, s1: _bfe64(w0, s0, s1, True)),
    ("mov.b64 %rd30, %rd21;", lambda x0, x1, w0, w1, s0, s1: w1),  # ld.global.b64 + st.global.b64 round trip
]


def test_sparse_lowering_scalar_instructions():
    """The scalar instructions the sparse-A lowering emits, on random and edge-case operands,
    against Python-integer models of the ISA text (one result column per instruction)."""
    lines = [
        ".reg .b32 %r<40>;", ".reg .b64 %rd<40>;", ".reg .pred %p<4>;",
        "mov.u32 %r0, %tid.x;", "mov.u32 %r1, %ctaid.x;", "mov.u32 %r2, %ntid.x;",
        "mad.lo.u32 %r3, %r1, %r2, %r0;",
        *[f"ld.param.u64 %rd{i}, [{p}];\n    cvta.to.global.u64 %rd{i}, %rd{i};"
          for i, p in enumerate(("p_x", "p_s", "p_w", "p_o32", "p_o64"))],
        "mul.wide.u32 %rd5, %r3, 8;", "add.s64 %rd6, %rd0, %rd5;", "add.s64 %rd7, %rd1, %rd5;",
        "mul.wide.u32 %rd8, %r3, 16;", "add.s64 %rd9, %rd2, %rd8;",
        f"mul.wide.u32 %rd10, %r3, {4 * len(_OPS32)};", "add.s64 %rd11, %rd3, %rd10;",
        f"mul.wide.u32 %rd12, %r3, {8 * len(_OPS64)};", "add.s64 %rd13, %rd4, %rd12;",
        "ld.global.b32 %r4, [%rd6+0];", "ld.global.b32 %r5, [%rd6+4];",
        "ld.global.b32 %r6, [%rd7+0];", "ld.global.b32 %r7, [%rd7+4];",
        "ld.global.b64 %rd20, [%rd9+0];", "ld.global.b64 %rd21, [%rd9+8];",
    ]  # fmt: skip
    for i, (inst, _) in enumerate(_OPS32):
        lines += [inst, f"st.global.b32 [%rd11+{4 * i}], %r20;"]
    for i, (inst, _) in enumerate(_OPS64):
        lines += [inst, f"st.global.b64 [%rd13+{8 * i}], %rd30;"]
    lines.append("ret;")
    params = ("p_x", "p_s", "p_w", "p_o32", "p_o64")
    rng = np.random.default_rng(11)
    n = 192
    x = rng.integers(0, 2**32, (n, 2), dtype=np.uint64).astype(np.uint32)
    edge = [0, 1, 2, _S32_MIN, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000001, 0xFFFF0000]
    x[: len(edge), 0] = edge
    x[len(edge): 2 * len(edge), 0] = edge
    x[::5, 1] = x[::5, 0]  # equal pairs for eq/ne/ge
    x[::7, 1] = 0
    s = np.stack([rng.integers(0, 72, n), rng.integers(0, 300, n)], 1).astype(np.uint32)  # past 64, past 255
    w = rng.integers(0, 2**64, (n, 2), dtype=np.uint64)
    w[:6, 0] = [0, 2**64 - 1, 2**63, 2**63 - 1, 1, 0xFFFFFFFF]
    w[::3, 1] = w[::3, 0]
    w[1::4, 0] &= np.uint64(0xFFFFFFFF)  # small values too
    o32, o64 = np.zeros((n, len(_OPS32)), np.uint32), np.zeros((n, len(_OPS64)), np.uint64)
    text = _kernel(lines, params)
    o32, o64 = emulate(text, "k", (3, 1, 1), (64, 1, 1), [x, s, w, o32, o64])[3:]
    for t in range(n):
        v = (int(x[t, 0]), int(x[t, 1]), int(w[t, 0]), int(w[t, 1]), int(s[t, 0]), int(s[t, 1]))
        for col, (ops, out) in enumerate(((_OPS32, o32), (_OPS64, o64))):
            for i, (inst, model) in enumerate(ops):
                got, want = int(out[t, i]), model(*v)
                assert got == want, f"thread {t}: `{inst}` on {[hex(a) for a in v]}: got {got:#x}, want {want:#x}"


@pytest.mark.parametrize("how, t", [("min", "u32"), ("min", "s32"), ("max", "u32"), ("max", "s32"), ("add", "u32")])
def test_atom_is_a_sequential_loop(how, t):
    """atom.global (min/max; add.u32, split-K's counters): many threads (some guarded off, blocks
    not a whole number of warps) on a few addresses; the old values and the memory are those of a
    loop over threads in order (an addition wrapping at 2^32), whether the grid runs at once or one
    CTA at a time."""
    lines = [
        ".reg .b32 %r<10>;", ".reg .b64 %rd<10>;", ".reg .pred %p<2>;",
        "mov.u32 %r0, %tid.x;", "mov.u32 %r1, %ctaid.x;", "mov.u32 %r2, %ntid.x;", "mad.lo.u32 %r3, %r1, %r2, %r0;",
        "ld.param.u64 %rd0, [p_mem];", "ld.param.u64 %rd1, [p_val];", "ld.param.u64 %rd2, [p_at];",
        "ld.param.u64 %rd3, [p_old];",
        "mul.wide.u32 %rd4, %r3, 4;", "add.s64 %rd1, %rd1, %rd4;", "add.s64 %rd2, %rd2, %rd4;", "add.s64 %rd3, %rd3, %rd4;",
        "ld.global.b32 %r4, [%rd1+0];", "ld.global.b32 %r5, [%rd2+0];",
        "mul.wide.u32 %rd5, %r5, 4;", "add.s64 %rd6, %rd0, %rd5;",
        "and.b32 %r6, %r4, 7;", "setp.ne.u32 %p0, %r6, 0;",  # threads with value % 8 == 0 sit out
        "mov.u32 %r7, 0xDEADBEEF;",
        f"@%p0 atom.global.{how}.{t} %r7, [%rd6+4], %r4;",
        "st.global.b32 [%rd3+0], %r7;",
        "ret;",
    ]  # fmt: skip
    grid, block = 3, 80
    n = grid * block
    rng = np.random.default_rng(zlib.crc32(f"{how}{t}".encode()))
    dt = np.uint32 if t == "u32" else np.int32
    val = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(dt)
    at = rng.integers(0, 4, n).astype(np.uint32)  # addresses 1..4 of a 6-word buffer (offset +4)
    mem0 = rng.integers(0, 2**32, 6, dtype=np.uint64).astype(np.uint32).view(dt)
    text = _kernel(lines, ("p_mem", "p_val", "p_at", "p_old"))
    args = [mem0, val, at, np.zeros(n, dt)]
    pick = {"min": min, "max": max, "add": lambda x, y: (x + y) % 2**32}[how]
    mem, old = [int(m) for m in mem0], []
    for i in range(n):
        if int(val[i]) % 8 == 0:
            old.append(int(np.uint32(0xDEADBEEF).view(dt)))
            continue
        a = int(at[i]) + 1
        old.append(mem[a])
        mem[a] = pick(mem[a], int(val[i]))
    prog = emulator.compile_entry(text, "k")
    for budget in ({}, {"memory_budget": 1}):
        got_mem, _, _, got_old = prog.run(grid, block, args, **budget)
        assert got_old.tolist() == old
        assert got_mem.tolist() == mem
    assert prog.stats.chunks == grid  # the second run went one CTA at a time
    assert len(set(old)) > 10 and mem != [int(m) for m in mem0]  # the atomics did something


def _prmt_model(a: int, b: int, c: int) -> int:
    """The ISA's default prmt: byte i of d from nibble i of c, whose low 3 bits pick one of the
    8 bytes {b, a} (a's are 0-3) and whose top bit replicates that byte's sign instead."""
    x, out = a | (b << 32), 0
    for i in range(4):
        nib = (c >> (4 * i)) & 0xF
        byte = (x >> (8 * (nib & 7))) & 0xFF
        out |= (0xFF if byte & 0x80 else 0) << (8 * i) if nib & 8 else byte << (8 * i)
    return out


def test_prmt_against_the_isa_model():
    """prmt.b32 (the transposing fill's byte shuffle) with selectors from registers: random words
    and selectors, every nibble value (sign replication included), per thread; and its modes refused."""
    lines = [
        ".reg .b32 %r<8>;", ".reg .b64 %rd<8>;",
        "mov.u32 %r0, %tid.x;", "mul.wide.u32 %rd4, %r0, 4;",
        "ld.param.u64 %rd0, [p_x];", "add.s64 %rd5, %rd0, %rd4;", "ld.global.b32 %r1, [%rd5];",
        "ld.param.u64 %rd0, [p_y];", "add.s64 %rd5, %rd0, %rd4;", "ld.global.b32 %r2, [%rd5];",
        "ld.param.u64 %rd0, [p_z];", "add.s64 %rd5, %rd0, %rd4;", "ld.global.b32 %r3, [%rd5];",
        "prmt.b32 %r4, %r1, %r2, %r3;", "prmt.b32 %r5, %r1, %r2, 29538;",  # 0x7362
        "add.u32 %r4, %r4, %r5;",
        "ld.param.u64 %rd0, [p_out];", "add.s64 %rd5, %rd0, %rd4;", "st.global.b32 [%rd5], %r4;", "ret;",
    ]  # fmt: skip
    rng = np.random.default_rng(6)
    a, b, c = (rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    [_, _, _, out] = emulate(_kernel(lines), "k", 1, 64, [a, b, c, np.zeros(64, np.uint32)])
    want = [(_prmt_model(int(x), int(y), int(z)) + _prmt_model(int(x), int(y), 0x7362)) % 2**32
            for x, y, z in zip(a, b, c)]
    assert out.tolist() == want
    with pytest.raises(EmulationError, match="prmt.b32"):
        emulate(_kernel([ln.replace("prmt.b32 %r5", "prmt.b32.f4e %r5") for ln in lines]), "k", 1, 64,
                [a, b, c, np.zeros(64, np.uint32)])


def test_bar_red_or_and_loops_whose_trip_count_is_the_ctas():
    """bar.red.or.pred gives every thread of a CTA the OR over its threads (a lone thread's
    predicate, as split-K hands its count around); a loop whose trip count differs between CTAs
    (split-K's last split) runs each CTA's iterations, the CTAs meeting after it; a branch that
    parts the threads of one CTA still raises; fence and membar are accepted."""
    lines = [
        ".reg .b32 %r<10>;", ".reg .b64 %rd<10>;", ".reg .pred %p<4>;",
        "mov.u32 %r0, %tid.x;", "mov.u32 %r1, %ctaid.x;", "mov.u32 %r2, %ntid.x;", "mad.lo.u32 %r3, %r1, %r2, %r0;",
        "ld.param.u64 %rd0, [p_out];", "mul.wide.u32 %rd4, %r3, 4;", "add.s64 %rd5, %rd0, %rd4;",
        "setp.eq.u32 %p0, %r0, 5;", "setp.eq.u32 %p1, %r1, 1;", "and.pred %p0, %p0, %p1;",  # thread 5 of CTA 1
        "bar.red.or.pred %p2, 0, %p0;", "selp.u32 %r4, 100, 0, %p2;",
        "fence.acq_rel.gpu;", "membar.gl;",
        "add.u32 %r5, %r1, 1;", "mov.u32 %r6, 0;",  # CTA c loops c + 1 times
        "$loop:", "add.u32 %r4, %r4, 1;", "add.u32 %r6, %r6, 1;", "setp.lt.u32 %p3, %r6, %r5;",
        "@%p3 bra.uni $loop;",
        "st.global.u32 [%rd5+0], %r4;", "ret;",
    ]  # fmt: skip
    text = _kernel(lines, ("p_out",))
    [out] = emulate(text, "k", 3, 64, [np.zeros(3 * 64, np.uint32)])
    want = np.concatenate([np.full(64, 1), np.full(64, 102), np.full(64, 3)])
    np.testing.assert_array_equal(out, want)
    parted = [ln.replace("setp.lt.u32 %p3, %r6, %r5;", "setp.lt.u32 %p3, %r6, %r0;") for ln in lines]
    with pytest.raises(EmulationError, match="non-uniform branch"):
        emulate(_kernel(parted, ("p_out",)), "k", 3, 64, [np.zeros(3 * 64, np.uint32)])


def test_atom_out_of_bounds_raises():
    lines = [
        ".reg .b32 %r<4>;", ".reg .b64 %rd<4>;", "mov.u32 %r0, %tid.x;", "ld.param.u64 %rd0, [p_mem];",
        "mul.wide.u32 %rd1, %r0, 4;", "add.s64 %rd2, %rd0, %rd1;", "atom.global.min.u32 %r1, [%rd2], %r0;", "ret;",
    ]  # fmt: skip
    mem = np.full(31, 7, np.uint32)  # one word short of the 32 threads
    with pytest.raises(EmulationError, match=r"`atom.global.min.u32 %r1, \[%rd2\], %r0;`: out-of-bounds atomic by "
                                             r"thread \(31, 0, 0\)"):
        emulate(_kernel(lines, ("p_mem",)), "k", 1, 32, [mem])
    with pytest.raises(EmulationError, match="expected atom"):
        emulator.compile_entry(_kernel([l.replace("min.u32", "add.f32") for l in lines], ("p_mem",)))


# ---------------------------------------------------------------------------------------------
# Memory: bounds, alignment, guards; control flow; the API
# ---------------------------------------------------------------------------------------------


def _gemm_text(m=37, n=91, k=53):
    kernel, sizes = _compile(GemmSpec(m, n, k, "f16", "f16", "f32"), "90", stages=0)
    rng = np.random.default_rng(0)
    from tilemma.compiler.verify.reference import random_matrix
    from tilemma.compiler.driver.runner import pack_memory

    types = ["f16", "f16", "f32", "f32"]
    args = [pack_memory(random_matrix(t, (s,), rng), t) for t, s in zip(types, sizes)]
    return kernel, args


def _line_of(text: str, needle: str) -> int:
    return next(i for i, l in enumerate(text.split("\n"), 1) if needle in l)


_FIRST_LOAD = re.compile(r"ld\.global\.u16 %r\d+, \[(%rd\d+)\+0\];")
_FIRST_STORE = re.compile(r"st\.global\.v2\.f32 \[(%rd\d+)\+0\], \{%f\d+, %f\d+\};")  # D's column pairs


@pytest.mark.parametrize(
    "pattern,offset,what",
    [
        (_FIRST_LOAD, "+1000000", "out-of-bounds load"),
        (_FIRST_LOAD, "+-2", "out-of-bounds load"),  # just before the buffer
        (_FIRST_LOAD, "+1", "misaligned load"),
        (_FIRST_STORE, "+400000", "out-of-bounds store"),
        (_FIRST_STORE, "+4", "misaligned store"),  # an 8-byte pair at a 4-byte boundary
    ],
)
def test_out_of_bounds_access_raises(pattern, offset, what):
    kernel, args = _gemm_text(64, 64, 64)  # exact sizes: no guards, every thread accesses
    old = pattern.search(kernel.ptx).group(0)
    new = old.replace("+0]", offset + "]")
    text = kernel.ptx.replace(old, new, 1)
    line = _line_of(text, new)
    before = [a.copy() for a in args]
    with pytest.raises(EmulationError, match=rf"<ptx>:{line}: `{re.escape(new)}`: {what} by thread \(\d+, 0, 0\) of CTA"):
        emulate(text, kernel.name, kernel.grid, kernel.block, args)
    assert all(np.array_equal(a, b) for a, b in zip(args, before))  # the caller's arrays untouched


def test_guards_are_what_keep_odd_sizes_in_bounds():
    """Odd sizes compute addresses past the end for threads whose guard is false; those threads
    must not access memory. Without the guards the same kernel reads out of bounds."""
    kernel, args = _gemm_text()
    emulate(kernel.ptx, kernel.name, kernel.grid, kernel.block, args)
    unguarded = re.sub(r"@%p\d+ (ld\.global)", r"\1", kernel.ptx)
    assert unguarded != kernel.ptx
    with pytest.raises(EmulationError, match="out-of-bounds load"):
        emulate(unguarded, kernel.name, kernel.grid, kernel.block, args)


def test_non_uniform_branch_raises():
    body = _PRELUDE + [
        "mov.u32 %r10, 0;",
        "$loop:",
        "add.u32 %r10, %r10, 1;",
        "setp.lt.u32 %p0, %r10, %r0;",  # trip count depends on the thread
        "@%p0 bra.uni $loop;",
        "ret;",
    ]
    args = [np.zeros(64, np.uint32) for _ in range(3)] + [np.zeros((64, 16), np.uint32)]
    with pytest.raises(EmulationError, match=r"bra.uni \$loop;`: non-uniform branch"):
        emulate(_kernel(body), "k", (1, 1, 1), (64, 1, 1), args)


def test_uniform_loop_guarded_exit_and_scalars():
    """A uniform loop, threads leaving early with a guarded `ret`, a block that is not a whole
    number of warps and a scalar parameter passed by value, like `run_kernel` takes it."""
    body = [
        ".reg .b32 %r<8>;", ".reg .b64 %rd<4>;", ".reg .pred %p<2>;",
        "mov.u32 %r0, %tid.x;", "ld.param.u32 %r1, [p_n];",
        "setp.ge.u32 %p0, %r0, %r1;", "@%p0 ret;",  # threads >= n leave
        "mov.u32 %r2, 0;", "mov.u32 %r3, 0;",
        "$loop:", "add.u32 %r3, %r3, %r0;", "add.u32 %r2, %r2, 1;",
        "setp.lt.u32 %p1, %r2, 5;", "@%p1 bra.uni $loop;",
        "ld.param.u64 %rd0, [p_out];", "cvta.to.global.u64 %rd0, %rd0;",
        "mul.wide.u32 %rd1, %r0, 4;", "add.s64 %rd0, %rd0, %rd1;", "st.global.b32 [%rd0+0], %r3;",
        "ret;",
    ]  # fmt: skip
    text = f"{_HEADER}\n.visible .entry k(\n    .param .u32 p_n,\n    .param .u64 p_out\n)\n{{\n" + "\n".join(body) + "\n}\n"
    out = np.full(40, 7, np.uint32)
    [got] = emulate(text, "k", (1, 1, 1), (40, 1, 1), [np.uint32(33), out])
    assert got.dtype == out.dtype and got.shape == out.shape and (out == 7).all()
    want = np.where(np.arange(40) < 33, np.arange(40) * 5, 7)
    assert np.array_equal(got, want)
    with pytest.raises(EmulationError, match="takes 2 parameters"):
        emulate(text, "k", 1, 40, [out])


def test_unsupported_instruction_is_named():
    body = [".reg .f32 %f<2>;", "mov.f32 %f0, 0f3F800000;", "sin.approx.f32 %f1, %f0;", "ret;"]
    text = f"{_HEADER}\n.visible .entry k(\n\n)\n{{\n" + "\n".join(body) + "\n}\n"
    line = _line_of(text, "sin.approx")
    with pytest.raises(EmulationError, match=rf"<ptx>:{line}: `sin.approx.f32 %f1, %f0;`: the emulator does not implement 'sin'"):
        emulator.compile_entry(text)


def test_emulation_is_vectorized():
    """Not a benchmark (see benchmarks/emulator_speed.py): guards against a per-thread Python loop."""
    kernel, sizes = _compile(GemmSpec(256, 256, 256, "f16", "f16", "f32"), "90")
    prog = emulator.compile_entry(kernel.ptx, kernel.name)
    args = [np.zeros(s, np.float16 if i < 2 else np.float32) for i, s in enumerate(sizes)]
    prog.run(kernel.grid, kernel.block, args, shared_bytes=kernel.abi.shared_bytes)
    assert prog.stats.threads == int(np.prod(kernel.grid)) * kernel.block[0] and prog.stats.chunks == 1
    assert prog.stats.seconds < 20


def test_chunks_of_ctas_give_the_same_result():
    """With a small register-file budget the grid runs a few CTAs at a time; same bits out."""
    kernel, args = _gemm_text()
    prog = emulator.compile_entry(kernel.ptx, kernel.name)
    whole = prog.run(kernel.grid, kernel.block, args, shared_bytes=kernel.abi.shared_bytes)
    assert prog.stats.chunks == 1
    chunked = prog.run(kernel.grid, kernel.block, args, shared_bytes=kernel.abi.shared_bytes, memory_budget=1)
    assert prog.stats.chunks == prog.stats.ctas == int(np.prod(kernel.grid)) > 1
    assert all(np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in zip(whole, chunked))


# ---------------------------------------------------------------------------------------------
# PTX text <-> ptx ops
# ---------------------------------------------------------------------------------------------


def _compile_and_read_back(spec: GemmSpec):
    """Compile `spec` for sm_90 keeping the lowered module: its PTX text parses back into the same
    `ptx` ops and prints back to the same text (test_dense_family's sm_90 odd-size kernel of each
    family: the kernel that runs is the one compiled here)."""
    module, locations = parse(str(gemm_module(spec)), spec.name)
    [kernel] = compile_module(module, locations, spec.name, CompileOptions(sm="90"))
    [original] = [op for op in module.body.ops if isinstance(op, ptx.ModuleOp_)]
    text = print_ptx(original)
    assert text == kernel.ptx
    parsed = parse_ptx(text)
    for entry in original.body.ops:  # PTX text has no launch shape or argument ABI
        for prop in ("grid", "block", "abi", "shared_bytes", "tiling"):
            entry.properties.pop(prop, None)
    assert _same_ops(parsed, original)
    assert print_ptx(parsed) == text
    return kernel


def _same_ops(a: Operation, b: Operation) -> bool:
    """Every op, its attributes, properties, operands, result types and regions alike: xDSL's
    structural equivalence (which counts results without comparing their types) plus the
    types. What comparing the two modules in xDSL's printing checked (but the properties'
    order), at a fraction of the cost: the printer writes string attributes a character at a
    time, ~1 s for a large kernel's ptx.module."""
    return a.is_structurally_equivalent(b) and all(
        x.result_types == y.result_types for x, y in zip(a.walk(), b.walk(), strict=True)
    )


def test_same_ops_tells_ops_apart():
    """`_same_ops` is not vacuous: one operand string, one property, one op fewer."""
    kernel = _compile(GemmSpec(16, 8, 16, "f16", "f16", "f32"), "90")[0]
    assert _same_ops(parse_ptx(kernel.ptx), parse_ptx(kernel.ptx))
    for edit in (("%r1, 5;", "%r1, 6;"), (".maxntid 32, 1, 1", ".maxntid 64, 1, 1"), ("    mov.u32 %r1, %tid.x;\n", "")):
        assert edit[0] in kernel.ptx
        assert not _same_ops(parse_ptx(kernel.ptx), parse_ptx(kernel.ptx.replace(*edit, 1))), edit


@pytest.mark.parametrize(
    "edit,needle,message",
    [
        (("ret;", "ret"), "    ret", "must end with ';'"),
        (("    .param .u64 p_a,", "    .param .u64 p_a"), "p_a", "separated by ','"),
        ((".reg .b64 %rd<", ".reg .b64 %rd["), "%rd[", r"expected '\.reg \.TYPE %PREFIX<COUNT>;'"),
        ((".reg .b64 %rd<", ".reg .q64 %rd<"), ".q64", "unknown register type .q64"),
        ((".target sm_90", ".tarjet sm_90"), ".tarjet", "expected '.target"),
        (("{\n", "{\n    .local .b8 buf[16];\n"), ".local", "directive not allowed"),
        (("{\n", "{\n    .shared .b8 buf[16];\n"), ".shared", r"expected '\.shared \.align A \.b8 NAME\[SIZE\];'"),
        (("+0];", "+0] junk;"), "junk", "malformed operand"),
        (("\n}\n", "\n"), None, "unexpected end of input: expected '}'"),
    ],
)
def test_parse_errors_name_the_line(edit, needle, message):
    kernel, _ = _compile(GemmSpec(64, 64, 64, "f16", "f16", "f32"), "90", stages=0)
    text = kernel.ptx.replace(*edit, 1)
    assert text != kernel.ptx
    line = _line_of(text, needle) if needle else len(text.split("\n")) - 1
    with pytest.raises(PtxSyntaxError, match=rf"^<ptx>:{line}: .*{message}"):
        parse_ptx(text)


def test_emulate_takes_the_ops_too():
    """The ptx.module (or a builtin module holding it) runs the same as its text."""
    spec = GemmSpec(19, 23, 37, "si8", "si8", "si32")
    module, locations = parse(str(gemm_module(spec)), spec.name)
    [kernel] = compile_module(module, locations, spec.name, CompileOptions(sm="90"))  # lowers `module` in place
    [pm] = [op for op in module.body.ops if isinstance(op, ptx.ModuleOp_)]
    sizes = list(kernel.arg_sizes)
    rng = np.random.default_rng(1)
    args = [rng.integers(-128, 128, s).astype(np.int8) for s in sizes[:2]] + [
        rng.integers(-(2**20), 2**20, s).astype(np.int32) for s in sizes[2:]
    ]
    want = emulate(kernel.ptx, kernel.name, kernel.grid, kernel.block, args)[3]
    for source in (pm, module):
        got = emulate(source, kernel.name, kernel.grid, kernel.block, args)[3]
        assert np.array_equal(got, want)
    a, b = args[0].reshape(19, 37).astype(np.int64), args[1].reshape(37, 23).astype(np.int64)
    assert np.array_equal(want.reshape(19, 23), a @ b + args[2].reshape(19, 23))


def test_parse_several_modules_and_pick_an_entry():
    k1, _ = _compile(GemmSpec(16, 8, 16, "f16", "f16", "f32"), "90")
    k2, _ = _compile(GemmSpec(16, 8, 16, "bf16", "bf16", "f32"), "90")
    both = k1.ptx + "\n" + k2.ptx
    prog = emulator.compile_entry(both, k2.name)
    assert prog.name == k2.name
    with pytest.raises(EmulationError, match="no kernel 'nope'"):
        emulator.compile_entry(both, "nope")


def test_ahead_names_leaders_or_laggards():
    """`Program.run`'s `ahead` is "leaders" or "laggards" (which warpgroups run ahead); anything
    else is refused before the kernel runs."""
    kernel = _kernel([".reg .b32 %r<2>;", "ret;"])
    zeros = [np.zeros(1, np.uint32) for _ in range(4)]
    for ahead in ("leaders", "laggards"):
        emulate(kernel, "k", 1, 32, zeros, ahead=ahead)
    with pytest.raises(ValueError, match="ahead: expected one of leaders, laggards, got 'first'"):
        emulate(kernel, "k", 1, 32, zeros, ahead="first")
