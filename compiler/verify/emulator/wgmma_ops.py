"""Hopper's warpgroup MMA (sm_90a): wgmma.fence, wgmma.commit_group, wgmma.wait_group N,
wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}, its 2:4 sparse form
wgmma.mma_async.sp.sync.aligned.m64nNk32, and the 8-bit integer (m64nNk32.s32) and tf32
(m64nNk8.f32) forms (below), with A and B read from shared memory through matrix descriptors in
the 128-byte swizzle.

A warpgroup is four consecutive warps (threads 128g .. 128g + 127 of a CTA), and every wgmma
instruction is executed by whole warpgroups (the CTA's thread count a multiple of 128). D is
64 x N f32, N / 2 registers a thread: register i of lane l of warp w (in the warpgroup) holds
(16 w + l / 4 + 8 ((i % 4) / 2), 8 (i / 4) + 2 (l % 4) + i % 2).

Descriptors (64 bits, the same in all 128 threads): bits 0-13 the start address >> 4 (a shared
address, as `mov.u32 %r, buffer;` gives), 16-29 the leading byte offset LBO >> 4, 32-45 the
stride byte offset SBO >> 4, 49-51 the base offset (0 only), 62-63 the swizzle mode (1, the
128-byte swizzle; 2 for a sparse A, below; the layouts of the others were not measured here;
every other bit 0).
The operands' elements, with 128-byte rows of 64 elements:

* K-major (imm-trans 0; A's rows are M, B's N): (row, k) at start + (row / 8) SBO + (row % 8) 128 + 2 k;
* MN-major (imm-trans 1): (k, mn) at start + (mn / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (mn % 64);

each then swizzled on its absolute address, as the hardware does: the 16-byte granule bits 4-6
XORed with the row bits 7-9 (so the k16 steps of a 64-wide K tile start 32 bytes apart). These
layouts and the fragment of D were checked on an H200 (tools/wgmma_probe.py, N = 64, 128, 256,
f16 and bf16, K- and N-major B): bit-exact with the arithmetic here.

Arithmetic: D = A B + C as mma.sync m16n8k16 computes it (`mma_arith.fused_mma` with sm_90's
model), measured equal on the H200 on random and adversarial data. Not measured: scale-d false,
taken as a C of +0 (the ISA: D = A B), and imm-scale-a/b -1, taken as negating every element.

tf32 (m64nNk8.f32.tf32.tf32 {d}, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b: no
transposes, both operands K-major, 4-byte elements, a k8 step 32 bytes along the rows): the tensor
cores read each f32 element's top 19 bits (the low 13 ignored, not rounded) and D is mma.sync
m16n8k8 tf32's arithmetic; measured bit-exact on an H100 (tools/wgmma_probe.py `run_tf32`: N = 64,
128, 256, random operands with their low bits set, and wide exponents, cancellation and subnormals).
A may also come from registers ({a0, a1, a2, a3} in place of a-desc): warp w of the warpgroup holds
A's rows 16 w .. 16 w + 15 as mma.sync m16n8k8 tf32's A fragment (a0 (g, c), a1 (g + 8, c), a2
(g, c + 4), a3 (g + 8, c + 4); g = lane / 4, c = lane % 4), measured bit-exact the same way on an
H100 (`run_tf32` with `a_registers`). Those registers are read until the wait_group that retires
the instruction: writing them before is an error, as for a sparse one's metadata. The 8-bit
integer forms take A from registers the same way, as mma.sync m16n8k32's A fragment (a0 (g, 4c ..
4c + 3), a1 (g + 8, ..), a2 (g, 16 + 4c ..), a3 (g + 8, 16 + 4c ..), the lowest k in the lowest
byte), measured bit-exact on an H200 (`run_int8` with `a_registers`: s8 and u8, N = 64, 128, 256,
random and extreme operands). A from registers is modelled for these forms only.

Sparse (.sp, PTX ISA 8.2): {d}, a-desc, b-desc, sp-meta, sp-sel, scale-d, then the dense form's
immediates. A is the compressed A, 64 rows of 16 kept values a k32 instruction, read through its
descriptor as a dense K-major A of K = 16 (a k32 step advances it 32 bytes); B is dense with
K = 32 (the layouts above, k 0..31). Warp w of the warpgroup holds the metadata of rows
16w .. 16w + 15 in sp-meta, exactly the words mma.sp::ordered_metadata m16n8k32 takes with selector 0
(`mma_sparse._SparseA` decodes them; an index twice in a chunk, which the ISA leaves undefined,
or decreasing indices, which were not measured, raise, naming the warp), and D is mma.sp
m16n8k32's arithmetic, one call an instruction. All of this was measured bit-exact on an H200
(tools/wgmma_probe.py `run_sparse`: f16 and bf16, N = 64, 128, 256, K- and N-major B, random and
adversarial data), but only with sp-sel 0 and a K-major A: sp-sel 1 and imm-trans-a 1 are
refused rather than guessed. A sparse A may also be in the 64-byte swizzle (mode 2: rows of 64
bytes, SBO 512, granule bits 4-5 XORed with address bits 7-8), measured the same way (`a_row`
64); mode 2 is refused elsewhere.

Issue, groups, waits. The kernels we emit do fence; mma_async...; commit_group; wait_group 0
before touching D, so mma_async computes D when it is issued and writes it to the registers at
once, which is exact for them. The asynchrony that matters for shared memory is modelled: the
bytes an mma_async reads stay held (`_Shared.hold`) until a wait_group of its warpgroup retires
its group (wait_group N: all but the N newest committed groups; mma_asyncs not yet committed
stay pending), and a st.shared or cp.async to held bytes raises. When it is issued, its bytes
must not have been written since the last barrier (by any thread: the whole warpgroup reads
them) nor have a cp.async in flight, and they count as read by several threads until the next
barrier. Also checked: a warpgroup executes wgmma.fence before its first mma_async.

Not checked: reading or writing D's registers before the wait that retires the mma_async (here
they hold D from the issue on; on the GPU that is undefined), the wgmma.fence the ISA requires
between other accesses of those registers and a later mma_async, and fence.proxy.async between
generic stores and the wgmma reading them (the emulator has one proxy; a barrier is required).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from tilemma.compiler.core.isa_rows import wgmma_n_legal
from tilemma.compiler.core.targets import PtxVersion
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.emulator.machine import EmulationError, _Machine, _per_thread
from tilemma.compiler.verify.emulator.memory_ops import _shared_of
from tilemma.compiler.layouts import fragments, sparse_fragments
from tilemma.compiler.verify.emulator.mma import _decode
from tilemma.compiler.verify.emulator.mma_sparse import _MetadataError, _SparseA
from tilemma.compiler.verify.emulator.operands import Fn, _Imm, _Reg, _Vec, _group_count, _one, _reader
from tilemma.compiler.verify.emulator.shared_ops import whole_groups

_MMA_ASYNC = re.compile(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(\w+)\.(\w+)$")
_MMA_ASYNC_SP = re.compile(r"^wgmma\.mma_async\.sp\.sync\.aligned\.m64n(\d+)k32\.f32\.(\w+)\.(\w+)$")
_MMA_ASYNC_INT = re.compile(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.s32\.(\w+)\.(\w+)$")
_MMA_ASYNC_TF32 = re.compile(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k8\.f32\.tf32\.tf32$")
_INT8 = {"s8": np.int8, "u8": np.uint8}
_SWIZZLES = {0: "no swizzle (the interleaved layout)", 1: "the 128-byte swizzle",
             2: "the 64-byte swizzle", 3: "the 32-byte swizzle"}
_RESERVED = ~(0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 7 << 49 | 3 << 62) & (1 << 64) - 1  # bits no field uses


class _Warpgroups:
    """wgmma state of the warpgroups of a chunk: whether each has executed wgmma.fence, the
    groups it has committed, and its mma_asyncs not yet retired (their held shared bytes)."""

    def __init__(self, m: _Machine):
        n = m.T // 128
        self.fenced = np.zeros(n, bool)
        self.committed = np.zeros(n, np.int64)
        self.registers: np.ndarray | None = None  # per warpgroup, registers a thread (setmaxnreg)
        self.pool: np.ndarray | None = None  # per CTA, registers given back and not taken again
        # warpgroups, [G, bytes], group, and the registers it reads (a sparse one's metadata, an A
        # from registers): (register, [G, 128] words it held, what it is) each
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, tuple]] = []

    def wait(self, m: _Machine, groups: np.ndarray, keep: int, where: str = "") -> None:
        """wgmma.wait_group `keep` by warpgroups `groups`: their mma_asyncs of all but the `keep`
        newest committed groups retire and release their bytes. A retiring mma_async whose register
        operands (a .sp's metadata, an A from registers) were written since its issue is an error:
        the tensor cores read them until here (an H200 computed wrong products where the next
        stage's metadata was loaded into its register early)."""
        waiting = np.zeros(self.committed.size, bool)
        waiting[groups] = True
        limit = self.committed - keep
        rest = []
        for g, idx, group, held in self.pending:
            done = waiting[g] & (group < limit[g])
            if done.any():
                m.shared.release(idx[done])
                for reg, words, what in held:
                    now = m.banks[reg.bank][reg.index].reshape(-1, 128)[g[done]].view(np.uint32)
                    changed = np.argwhere(now != words[done])
                    if changed.size:
                        k, lane = (int(x) for x in changed[0])
                        raise EmulationError(
                            f"{where}: {m.thread(int(g[done][k]) * 128 + lane)} wrote {reg.name}, {what} "
                            "of a wgmma.mma_async of its warpgroup, before the wait_group that retires it")
            if not done.all():
                rest.append((g[~done], idx[~done], group[~done], tuple((r, w[~done], x) for r, w, x in held)))
        self.pending = rest


def _state(m: _Machine) -> _Warpgroups:
    if m.wgmma is None:
        m.wgmma = _Warpgroups(m)
    return m.wgmma


def _warpgroups(m: _Machine, mask, where: str) -> np.ndarray:
    """Indices (in the chunk) of the warpgroups executing a wgmma instruction; a CTA that is not
    whole warpgroups, or a warpgroup partly executing, is an error."""
    threads = m.block[0] * m.block[1] * m.block[2]
    if threads % 128:
        raise EmulationError(f"{where}: the CTA has {threads} threads, not whole warpgroups of 128 "
                             "(wgmma is executed by warpgroups of four warps)")
    groups, partial = whole_groups(mask, 128)
    if partial is not None:
        g, active = partial
        raise EmulationError(f"{where}: only {active} of the 128 threads of the warpgroup of "
                             f"{m.thread(g * 128)} execute this (wgmma needs the whole warpgroup)")
    return np.arange(m.T // 128) if groups is None else groups


def _uniform(m: _Machine, value, groups: np.ndarray, where: str, what: str) -> np.ndarray:
    """[G] one value per warpgroup of a per-thread operand, which must not differ in a warpgroup."""
    v = _per_thread(value, m.T).reshape(-1, 128)[groups]
    split = (v != v[:, :1]).any(1)
    if split.any():
        g = int(np.flatnonzero(split)[0])
        seen = [hex(int(x)) if v.dtype.kind == "u" else str(x) for x in np.unique(v[g])[:4]]
        raise EmulationError(f"{where}: the {what} differs across the warpgroup of {m.thread(int(groups[g]) * 128)} "
                             f"({', '.join(seen)}{', ...' if np.unique(v[g]).size > 4 else ''}); it must be "
                             "the same in all 128 threads")
    return v[:, 0]


def _descriptor(m: _Machine, desc: np.ndarray, groups: np.ndarray, where: str, what: str, modes=(1,)):
    """(start, LBO, SBO) in bytes, int64 [G], and the row bytes of the swizzle (128 for mode 1, 64
    for mode 2), of descriptors of a swizzle mode in `modes` (one for all warpgroups); others raise.
    Mode 2 was measured on a sparse A only (tools/wgmma_probe.py, `a_row` 64)."""
    d = desc.astype(np.uint64)
    base, mode, reserved = (d >> np.uint64(49)) & np.uint64(7), d >> np.uint64(62), d & np.uint64(_RESERVED)
    allowed = np.isin(mode, np.array(modes, np.uint64))
    named = " or ".join(f"{x}, {_SWIZZLES[x]}" for x in modes)
    for bad, why in ((~allowed, lambda x: f"swizzle mode {int(mode[x])}, {_SWIZZLES[int(mode[x])]} (only mode {named}, "
                                          f"is modelled for this operand)"),
                     (mode != mode[0], lambda x: f"swizzle mode {int(mode[x])}, another warpgroup's "
                                                 f"{int(mode[0])} (one mode an instruction is modelled)"),
                     (base != 0, lambda x: f"base offset {int(base[x])} (only 0 is modelled)"),
                     (reserved != 0, lambda x: f"reserved bits {int(reserved[x]):#x} set")):
        if bad.any():
            g = int(np.flatnonzero(bad)[0])
            raise EmulationError(f"{where}: the warpgroup of {m.thread(int(groups[g]) * 128)}: {what} descriptor "
                                 f"{int(d[g]):#018x} has {why(g)}")

    def field(shift: int) -> np.ndarray:
        return (((d >> np.uint64(shift)) & np.uint64(0x3FFF)) << np.uint64(4)).astype(np.int64)

    return field(0), field(16), field(32), 128 if int(mode[0]) == 1 else 64


def _addresses(start, lbo, sbo, mn: int, mn_major: bool, k: int = 16, row: int = 128, elem: int = 2) -> np.ndarray:
    """[G, mn, k] shared addresses of the elements (mn, k) of an operand of `elem`-byte elements
    (2; 1 for 8-bit integers, K-major only) of `mn` rows (A: M = 64, B: N) and K = `k` (16; .sp's
    B and the integers' 32), in the canonical layout of the `row`-byte swizzle (128; 64 only
    K-major): granule bits 4.. XORed with the row-in-atom bits 7.."""
    r, k = np.arange(mn)[:, None], np.arange(k)[None, :]
    start, lbo, sbo = (x[:, None, None] for x in (start, lbo, sbo))
    if mn_major:
        logical = start + (r // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (r % 64)
    else:
        logical = start + (r // 8) * sbo + (r % 8) * row + elem * k
    return logical ^ (((logical >> 7) & (row // 16 - 1)) << 4)


def _warpgroup_positions(lay: fragments.FragmentLayout, frags: int) -> np.ndarray:
    """[128, frags x values]: the position row * width + col, in the warpgroup's 64 x width tile
    (width: `frags` of the layout's columns side by side), of value i of thread t: warp w holds rows
    16 w .. as `frags` mma.sync fragments `lay` (value i of fragment i // values)."""
    rows, cols = fragments.coords(lay)  # [32, values]
    values, width = rows.shape[1], frags * lay.cols
    t, i = np.arange(128)[:, None], np.arange(frags * values)[None, :]
    w, lane = t // 32, t % 32
    pos = (16 * w + rows[lane, i % values]) * width + lay.cols * (i // values) + cols[lane, i % values]
    if np.bincount(pos.ravel(), minlength=64 * width).max() != 1:
        raise AssertionError(f"{lay} x {frags}: the warpgroup's fragments do not hold every element once")
    return pos


def _accumulator_positions(n: int) -> np.ndarray:
    """[128, n / 2]: the position row * n + col of D that register i of thread t holds (N / 8
    m16n8 accumulator fragments a warp)."""
    return _warpgroup_positions(fragments.layout("m16n8k16", "c", "f32"), n // 8)


# [128, values]: the position row * K + col of an A (64 x K) that value i of thread t holds when A
# comes from registers: each warp's 16 rows as mma.sync's A fragment of the same K (tf32 m16n8k8:
# a value a register; 8-bit m16n8k32: four a register, the lowest K in the lowest byte)
_A_POSITIONS = {etype: _warpgroup_positions(fragments.layout(shape, "a", etype), 1)
                for etype, shape in (("tf32", "m16n8k8"), ("s8", "m16n8k32"), ("u8", "m16n8k32"))}


def _int_imm(x, allowed: tuple[int, ...], name: str, where: str) -> int:
    if not isinstance(x, _Imm) or isinstance(x.value, float) or x.fbits or int(x.value) not in allowed:
        raise EmulationError(f"{where}: {name} must be one of the constants {', '.join(map(str, allowed))}, "
                             f"got {getattr(x, 'text', getattr(x, 'name', x))}")
    return int(x.value)


def _dec_wgmma(d, op, mods, args, where) -> Fn:
    """wgmma.fence / commit_group / wait_group N (.sync.aligned) and wgmma.mma_async."""
    opcode = op.opcode.data
    if d.target is not None and d.target != "sm_90a":
        raise EmulationError(f"{where}: wgmma needs sm_90a, the module targets {d.target}")
    if d.version is not None and PtxVersion.parse(d.version) < PtxVersion(8, 0):
        raise EmulationError(f"{where}: wgmma needs PTX ISA 8.0 or newer, the module is {d.version}")
    if opcode in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned"):
        if args:
            raise EmulationError(f"{where}: {opcode} takes no operands")
        fence = opcode == "wgmma.fence.sync.aligned"

        def run_mark(m, mask):
            groups, state = _warpgroups(m, mask, where), _state(m)
            if fence:
                state.fenced[groups] = True
            else:
                state.committed[groups] += 1

        return run_mark
    if opcode == "wgmma.wait_group.sync.aligned":
        keep = _group_count(d, op, args, where, "wgmma.wait_group")
        return lambda m, mask: _state(m).wait(m, _warpgroups(m, mask, where), keep, where)
    if opcode.startswith("wgmma.mma_async"):
        return _dec_mma_async(d, op, args, where)
    raise EmulationError(f"{where}: expected wgmma.fence/commit_group/wait_group N/mma_async (.sync.aligned)")


def _dec_setmaxnreg(d, op, mods, args, where) -> Fn:
    """setmaxnreg.{inc,dec}.sync.aligned.u32 N (a "wait" step: whether it could run): a warpgroup
    gives registers back to its CTA's pool (.dec) or takes them from it (.inc, waiting until the
    pool has them: an .inc the CTA's .decs never cover hangs the GPU, here a deadlock). Each
    warpgroup starts with the registers a thread of the CTA gets when it launches (the target's
    file over the CTA's threads, in multiples of 8: what ptxas gives a kernel that uses
    setmaxnreg), or the kernel's `.maxnreg` where that is fewer (in the same units); N is a
    multiple of 8 from 24 to 256, below (.dec) or above (.inc) the count held."""
    if mods[:1] not in (["inc"], ["dec"]) or mods[1:] != ["sync", "aligned", "u32"]:
        raise EmulationError(f"{where}: expected setmaxnreg.inc/.dec.sync.aligned.u32 N")
    if d.target is not None and d.target != "sm_90a":
        raise EmulationError(f"{where}: setmaxnreg needs sm_90a, the module targets {d.target}")
    [n] = _one(d, op, args, 1, where)
    count = _int_imm(n, tuple(range(24, 257, 8)), "setmaxnreg's register count", where)
    increase = mods[0] == "inc"
    from tilemma.compiler.core.targets import limits

    record = limits(d.target or "sm_90")
    stated = d.entry.max_registers.value.data if d.entry.max_registers is not None else None  # .maxnreg

    def run(m, mask) -> bool:
        groups = _warpgroups(m, mask, where)
        state = _state(m)
        if state.registers is None:
            start = record.launch_registers(m.per_cta)
            if stated is not None:
                start = min(start, -(-stated // 8) * 8)
            state.registers = np.full(m.T // 128, start, np.int64)
            state.pool = np.zeros(m.nctas, np.int64)
        held = state.registers[groups]
        if (held > count if increase else held < count).any():
            g = int(groups[np.flatnonzero(held > count if increase else held < count)[0]])
            raise EmulationError(f"{where}: the warpgroup of {m.thread(g * 128)} holds {int(state.registers[g])} "
                                 f"registers a thread; setmaxnreg.{mods[0]} {count} would {'lower' if increase else 'raise'} it")
        ctas = groups * 128 // m.per_cta
        change = np.bincount(ctas, (count - held) * 128, minlength=m.nctas).astype(np.int64)
        if increase and (change > state.pool).any():
            return False  # the CTA's pool does not have them (yet)
        state.pool -= change
        state.registers[groups] = count
        return True

    return run


@dataclass(frozen=True)
class _Form:
    """What an mma_async opcode names: dense 16-bit floats (k16), their 2:4 sparse form (k32, 16
    kept values of A an instruction), 8-bit integers (k32, 1-byte elements) or tf32 (k8, 4-byte
    elements, K-major only)."""

    sparse: bool
    integer: bool
    n: int
    etype: str
    k: int  # K of an instruction (B's rows)
    a_k: int  # A's elements of K it reads (the kept ones where sparse)
    elem: int  # bytes of an element


def _form(opcode: str, where: str) -> _Form:
    sparse = opcode.startswith("wgmma.mma_async.sp.")
    if match := _MMA_ASYNC_INT.match(opcode):
        if match.group(2) != match.group(3) or match.group(2) not in _INT8:
            raise EmulationError(f"{where}: only wgmma.mma_async.sync.aligned.m64nNk32.s32.{{s8,u8}}.{{s8,u8}} (A and B "
                                 "of one type) is modelled among the integer forms")
        return _Form(False, True, int(match.group(1)), match.group(2), 32, 32, 1)
    if match := _MMA_ASYNC_TF32.match(opcode):
        return _Form(False, False, int(match.group(1)), "tf32", 8, 8, 4)
    form = "wgmma.mma_async.sp.sync.aligned.m64nNk32" if sparse else "wgmma.mma_async.sync.aligned.m64nNk16"
    match = (_MMA_ASYNC_SP if sparse else _MMA_ASYNC).match(opcode)
    if not match or match.group(2) != match.group(3) or match.group(2) not in ("f16", "bf16"):
        raise EmulationError(f"{where}: only {form}.f32.{{f16,bf16}}.{{f16,bf16}} (A and B of one type) is modelled")
    return _Form(sparse, False, int(match.group(1)), match.group(2), 32 if sparse else 16, 16, 2)


def _int_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A B + C of 8-bit integers into int32, exact and wrapped to 32 bits (no .satfinite)."""
    total = a.astype(np.int64) @ b.astype(np.int64) + c
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def _dec_mma_async(d, op, args, where) -> Fn:
    """wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {d}, a-desc, b-desc, scale-d, imm-scale-a,
    imm-scale-b, imm-trans-a, imm-trans-b (T f16 or bf16): D = (+-A)(+-B) + (scale-d ? C : 0);
    and wgmma.mma_async.sp.sync.aligned.m64nNk32.f32.T.T {d}, a-desc, b-desc, sp-meta, sp-sel,
    scale-d, ...: the same with A 2:4 sparse (its 16 kept values a row, K-major, and each warp's
    metadata words for its 16 rows, as mma.sp m16n8k32 takes them); and
    wgmma.mma_async.sync.aligned.m64nNk32.s32.T.T {d}, a-desc, b-desc, scale-d (T s8 or u8, both
    K-major): D = A B + (scale-d ? C : 0), the exact sum wrapped to 32 bits; and
    wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 {d}, a-desc, b-desc, scale-d, imm-scale-a,
    imm-scale-b (both K-major, f32 elements of which the low 13 bits are ignored): mma.sync
    m16n8k8 tf32's arithmetic."""
    f = _form(op.opcode.data, where)
    sparse, integer, n, etype, kk, a_k, elem = f.sparse, f.integer, f.n, f.etype, f.k, f.a_k, f.elem
    if not wgmma_n_legal(etype, n):
        raise EmulationError(f"{where}: N = {n}; m64nNk{kk} needs N a multiple of 8 from 8 to 256 (for 8-bit "
                             "integers 8, 16, 24 or a multiple of 16, as ptxas takes them)")
    if sparse and d.version is not None and PtxVersion.parse(d.version) < PtxVersion(8, 2):
        raise EmulationError(f"{where}: wgmma.mma_async.sp needs PTX ISA 8.2 or newer, the module is {d.version}")
    a_regs: list | None = None  # A from registers (tf32, 8-bit integers): its 4 registers a thread
    if len(args) >= 2 and isinstance(d.operand(args[1], op), _Vec):
        if etype not in _A_POSITIONS or sparse:
            raise EmulationError(f"{where}: A from registers is modelled for tf32 and 8-bit integers only (the "
                                 "other forms read A through a shared-memory descriptor here)")
    if sparse:
        dvec, a_desc, b_desc, meta, sel, scale_d, *imms = _one(d, op, args, 10, where)
    elif integer:  # no immediates: no negation, no transposes
        dvec, a_desc, b_desc, scale_d = _one(d, op, args, 4, where)
        imms = [_Imm("1", 1), _Imm("1", 1), _Imm("0", 0), _Imm("0", 0)]
    elif etype == "tf32":  # negations, no transposes (K-major only)
        dvec, a_desc, b_desc, scale_d, *imms = _one(d, op, args, 6, where)
        imms += [_Imm("0", 0), _Imm("0", 0)]
    else:
        dvec, a_desc, b_desc, scale_d, *imms = _one(d, op, args, 8, where)
    if isinstance(a_desc, _Vec) and etype in _A_POSITIONS:
        a_regs = list(a_desc.items)
        if len(a_regs) != 4 or any(not isinstance(r, _Reg) or r.storage.itemsize != 4 for r in a_regs):
            raise EmulationError(f"{where}: an A from registers is 4 32-bit registers a thread (m64nNk{kk} {etype})")
    regs = list(dvec.items) if isinstance(dvec, _Vec) else [dvec]
    acc = "s32" if integer else "f32"
    if len(regs) != n // 2:
        raise EmulationError(f"{where}: m64n{n}k{kk} with an {acc} accumulator needs {n // 2} registers in d, "
                             f"got {len(regs)}")
    for r in regs:
        if not isinstance(r, _Reg) or r.rtype not in (("s32", "u32", "b32") if integer else ("f32", "b32")):
            raise EmulationError(f"{where}: d must be .{acc} registers, got {getattr(r, 'name', r)}")
    if len({(r.bank, r.index) for r in regs}) != len(regs):
        raise EmulationError(f"{where}: a register appears twice in d")
    reads = []
    for x, name in ((a_desc, "a-desc"), (b_desc, "b-desc")):
        if name == "a-desc" and a_regs is not None:
            reads.append(None)
            continue
        if not isinstance(x, _Reg) or x.rtype not in ("u64", "b64"):
            raise EmulationError(f"{where}: {name} must be a .u64 or .b64 register holding a matrix descriptor")
        reads.append(_reader(d, x, "u64", where))
    if isinstance(scale_d, _Reg) and scale_d.rtype == "pred":
        read_scale = _reader(d, scale_d, "pred", where)
    else:
        value = _int_imm(scale_d, (0, 1), "scale-d (a predicate)", where) == 1
        read_scale = lambda m: np.bool_(value)  # noqa: E731
    sign_a, sign_b = (_int_imm(x, (1, -1), f"imm-scale-{ab}", where) for x, ab in zip(imms[:2], "ab"))
    trans_a, trans_b = (_int_imm(x, (0, 1), f"imm-trans-{ab}", where) == 1 for x, ab in zip(imms[2:], "ab"))
    sp = None
    if sparse:
        if not isinstance(meta, _Reg) or meta.storage.itemsize != 4 or meta.storage.kind == "b":
            raise EmulationError(f"{where}: sp-meta must be a 32-bit register, got {getattr(meta, 'text', meta)}")
        if _int_imm(sel, (0, 1), "sp-sel (the sparsity selector)", where) != 0:
            raise EmulationError(f"{where}: sp-sel 1 is not modelled: only selector 0 (the metadata of lanes 4g "
                                 "and 4g + 1) was measured on the GPU")
        if trans_a:
            raise EmulationError(f"{where}: imm-trans-a 1 (an M-major sparse A) is not modelled: only a K-major "
                                 "A was measured on the GPU for wgmma.mma_async.sp")
        # ordered: only increasing indices were measured (decreasing ones are refused as undefined)
        sp = _SparseA(sparse_fragments.sparse_spec("m16n8k32", etype), "m16n8k32", etype, True)
    if d.arch.rstrip("af") != "sm_90":
        raise EmulationError(f"{where}: wgmma exists only on sm_90a; the emulator imitates {d.arch}")
    model = None if integer else mma_arith.model_for(d.arch, etype, None, f"m16n8k{kk}")
    pos = _accumulator_positions(n)
    order = np.argsort(pos.ravel())  # thread-major register words -> row-major D
    a_cells = 0 if a_regs is not None else 64 * a_k
    cells = a_cells + n * kk  # elements of A (the kept ones where sparse; none from registers), then of B

    def operands(m: _Machine, groups: np.ndarray):
        """[G, 64, a_k] A and [G, K, N] B element bits, read from shared memory (A, or from its
        registers) and held."""
        sh = _shared_of(m, where)
        starts = []
        for read, what, mn, major, k in ((reads[0], "A", 64, trans_a, a_k), (reads[1], "B", n, trans_b, kk)):
            if read is None:  # A from registers
                continue
            desc = _uniform(m, read(m), groups, where, f"{what} descriptor")
            # the 64-byte swizzle: measured for a sparse (K-major) A
            modes = (1, 2) if sparse and what == "A" else (1,)
            start, lbo, sbo, row = _descriptor(m, desc, groups, where, what, modes)
            starts.append(_addresses(start, lbo, sbo, mn, major, k, row, elem).reshape(groups.size, -1))
        addr = np.concatenate(starts, 1).reshape(-1)
        threads = np.repeat(groups * 128, cells)
        idx = sh.bytes(m, where, "wgmma.mma_async operand read", addr, threads, elem)
        for busy in (sh.inflight[idx], (sh.writer[idx] >= 0) | (sh.writer[idx] <= -3)):  # copies in flight first
            if busy.any():
                k, j = (int(x) for x in np.argwhere(busy)[0])
                byte = int(idx[k, j])
                why = ("a cp.async has not yet landed on; missing cp.async.wait_group?" if sh.inflight[byte] else
                       f"{sh.who(m, int(sh.writer[byte]))} wrote since the last bar.sync; missing bar.sync "
                       "(after fence.proxy.async)?")
                raise EmulationError(f"{where}: the warpgroup of {m.thread(int(threads[k]))} reads shared address "
                                     f"{sh.address(byte)}, which {why}")
        sh.reader[idx] = -2  # read by the whole warpgroup
        held = idx.reshape(groups.size, -1)
        sh.hold(held)
        state = _state(m)
        registers = [(meta, "the sp-meta register")] if sparse else [(r, "an A register") for r in a_regs or ()]
        state.pending.append((groups, held, state.committed[groups].copy(), tuple(
            (r, m.banks[r.bank][r.index].reshape(-1, 128)[groups].view(np.uint32).copy(), what) for r, what in registers)))
        view = _INT8[etype] if integer else np.uint32 if elem == 4 else np.uint16
        bits = np.ascontiguousarray(sh.data[idx]).view(view).reshape(groups.size, cells)
        b = bits[:, a_cells:].reshape(-1, n, kk).transpose(0, 2, 1)
        if a_regs is None:
            return bits[:, :a_cells].reshape(-1, 64, a_k), b
        per = 4 // elem  # values a register
        a = np.zeros((groups.size, 64 * a_k), view)
        for i, r in enumerate(a_regs):  # value j of register i of thread t: A (row, col) of _A_POSITIONS
            words = m.banks[r.bank][r.index].reshape(-1, 128)[groups].view(np.uint32)
            values = np.ascontiguousarray(words).view(view).reshape(groups.size, 128, per)
            for j in range(per):
                a[:, _A_POSITIONS[etype][:, i * per + j]] = values[:, :, j]
        return a.reshape(-1, 64, a_k), b

    def densify(m: _Machine, groups: np.ndarray, a: np.ndarray):
        """.sp: the compressed [G, 64, 16] A -> ([G, 64, 32] dense A, [G, 64, 32] kept), warp w
        of each warpgroup decoding rows 16w .. 16w + 15 with its own metadata words."""
        e = m.banks[meta.bank][meta.index].reshape(-1, 128)[groups].view(np.uint32).reshape(-1, 32)
        values = a.reshape(-1, 1, 16, 16)
        try:
            kept = sp.dense(np.ones_like(values), e, 0) != 0
            dense = sp.dense(values, e, 0)
        except _MetadataError as err:
            g, w = divmod(err.warp, 4)
            raise EmulationError(f"{where}: the warp of {m.thread(int(groups[g]) * 128 + 32 * w)} (A rows "
                                 f"{16 * w}..{16 * w + 15} of its warpgroup), sp-meta: {err}") from None
        return dense.reshape(-1, 64, 32), kept.reshape(-1, 64, 32)

    def run(m: _Machine, mask):
        groups = _warpgroups(m, mask, where)
        state = _state(m)
        if not state.fenced[groups].all():
            g = int(groups[np.flatnonzero(~state.fenced[groups])[0]])
            raise EmulationError(f"{where}: the warpgroup of {m.thread(g * 128)} has not executed wgmma.fence "
                                 "(needed before its first wgmma.mma_async)")
        scaled = _uniform(m, read_scale(m), groups, where, "scale-d predicate")
        a_bits, b_bits = operands(m, groups)
        words = np.stack([m.banks[bk][i].reshape(-1, 128)[groups] for bk, i in ((r.bank, r.index) for r in regs)], 2)
        if integer:
            c = words.reshape(groups.size, -1)[:, order].view(np.int32).astype(np.int64).reshape(-1, 64, n)
            out = _int_mma(a_bits, b_bits, np.where(scaled[:, None, None], c, 0))
            out = out.view(np.uint32).reshape(groups.size, -1)[:, pos]  # [G, 128, N / 2]
        else:
            a = _decode(a_bits, etype, 8 * elem) * sign_a
            b = _decode(b_bits, etype, 8 * elem) * sign_b
            kept = None
            if sp is not None:
                a, kept = densify(m, groups, a)
            c = words.reshape(groups.size, -1)[:, order].view(np.float32).astype(np.float64).reshape(-1, 64, n)
            c = np.where(scaled[:, None, None], c, 0.0)
            out = mma_arith.fused_mma(a, b, c, model, etype, etype, "f32", kept=kept)
            out = out.view(np.uint32).reshape(groups.size, -1)[:, pos]  # [G, 128, N / 2]
        for j, r in enumerate(regs):
            m.banks[r.bank][r.index].reshape(-1, 128)[groups] = out[:, :, j]
        m.mma_count += 1

    return run
