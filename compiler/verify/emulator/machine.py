"""The state a chunk of CTAs runs on, and what PTX's types and addresses are in NumPy.

Every instruction module reads and writes it: registers as NumPy rows (one column per thread of the
chunk), the argument buffers behind fake 64-bit pointers with bounds-checked gathers and scatters,
and shared memory that remembers, per byte, who wrote and read it since the last barrier, which
cp.async is still in flight and which wgmma may still read it, so that races and missing waits
show although all threads run in lockstep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tilemma.compiler.verify.emulator.program import Program


class EmulationError(RuntimeError):
    """The kernel did something the emulator refuses to guess about (out-of-bounds access,
    non-uniform branch, unsupported instruction, ...); the message names the instruction."""


# Register declarations -> storage of the bits (registers are untyped bit containers).
_STORAGE = {
    "pred": np.dtype(np.bool_),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.uint16),
    "f16": np.dtype(np.uint16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.uint32),
    "f32": np.dtype(np.uint32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.uint64),
    "f64": np.dtype(np.uint64),
}  # fmt: skip

# Instruction type suffixes -> the NumPy type the instruction computes in.
_TYPES = {
    "pred": np.dtype(np.bool_),
    "b8": np.dtype(np.uint8), "u8": np.dtype(np.uint8), "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.int16),
    "f16": np.dtype(np.float16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.int32),
    "f32": np.dtype(np.float32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.int64),
    "f64": np.dtype(np.float64),
}  # fmt: skip
_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_SIGNED = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
_INT_TYPES = {t for t, d in _TYPES.items() if d.kind in "iu"}
_FLOAT_TYPES = {"f16", "f32", "f64"}
_IEEE_ARITH = {"f32", "f64"}  # NumPy rounds these exactly like PTX's default .rn (f16 would round twice)

_SPACE_SHIFT = 40  # argument i occupies addresses [(i + 1) << 40, (i + 2) << 40)
_OFFSET_MASK = (1 << _SPACE_SHIFT) - 1
_SHARED_SPACE = 0xFE  # cvta.shared puts shared address x at generic (0xFF << 40) | x
_SHARED_BASE = 1024  # the first shared byte's address; kernels must not assume 0
_PARAM_SPACE = 0xFD  # a tensor-map parameter i's address (mov NAME, cvta.param): ((0xFE << 40) | 256 i)
MAP_PARAM = "map"  # the type the emulator gives a `.align 64 .b8 NAME[128]` parameter (a tensor map)


def param_address(index: int) -> int:
    """The address `mov.b64 %rd, NAME` gives parameter `index` (and cvta.param keeps)."""
    return ((_PARAM_SPACE + 1) << _SPACE_SHIFT) | (index << 8)


def _per_thread(value, threads: int) -> np.ndarray:
    """`value` (a row, or a scalar from an immediate) as one value per thread: the row itself when
    it is one already, which nearly every value is (np.broadcast_to costs more than most
    instructions' arithmetic). Read only, as the registers it may be."""
    v = np.asarray(value)
    return v if v.shape == (threads,) else np.broadcast_to(v, (threads,))


def _as_storage(value, storage: np.dtype):
    """`value` (array or NumPy scalar of an instruction type) as register bits of `storage`:
    same width is a reinterpretation, a narrower integer is zero/sign-extended by its own
    signedness, a wider one truncated (what PTX does when a register is wider than the type)."""
    v = np.asarray(value)
    if v.dtype == storage:
        return v
    if v.dtype.itemsize == storage.itemsize and storage.kind != "b":
        return v.view(storage)
    if v.dtype.kind in "iub" and storage.kind in "ub":
        return v.astype(storage)
    raise EmulationError(f"cannot hold a {v.dtype} value in a {storage} register")


class _Memory:
    """The argument buffers as bytes, with bounds-checked gathers and scatters."""

    def __init__(self, args: Sequence):
        self.bufs: dict[int, np.ndarray] = {}
        self.sizes: dict[int, int] = {}
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                padded = np.zeros(-(-max(raw.size, 1) // 8) * 8, dtype=np.uint8)
                padded[: raw.size] = raw
                self.bufs[i] = padded
                self.sizes[i] = raw.size

    @staticmethod
    def pointer(i: int) -> int:
        return (i + 1) << _SPACE_SHIFT

    def locate(self, addr: np.ndarray, size: int, fail: Callable[[int, str, str], None],
               unit: int | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Split addresses into (argument, index of `unit`-byte elements (default `size`), positions)
        groups, after checking that every `size`-byte access lies inside its argument and is
        aligned; `fail(position, what, why)` raises."""
        if addr.size:  # the usual access: one argument, in bounds, aligned (checked in few passes)
            lo, hi = int(addr.min()), int(addr.max())
            s = (lo >> _SPACE_SHIFT) - 1
            if s == (hi >> _SPACE_SHIFT) - 1 and s in self.bufs and (hi & _OFFSET_MASK) + size <= self.sizes[s]:
                offset = (addr & np.uint64(_OFFSET_MASK)).astype(np.int64)
                if size == 1 or not (offset % size).any():
                    return [(s, offset // (unit or size), None)]
        space = (addr >> np.uint64(_SPACE_SHIFT)).astype(np.int64) - 1
        offset = (addr & np.uint64(_OFFSET_MASK)).astype(np.int64)
        first = int(space[0]) if space.size else 0
        groups = []
        spaces = [first] if space.size and (space == first).all() else np.unique(space).tolist()
        for s in spaces:
            pos = None if len(spaces) == 1 else np.flatnonzero(space == s)
            off = offset if pos is None else offset[pos]
            if s not in self.bufs:
                p = 0 if pos is None else int(pos[0])
                if s == _SHARED_SPACE:
                    fail(p, "unsupported", f"address {int(addr[p]):#x} is a generic address of shared memory; "
                         "the emulator reads shared memory only through ld.shared/st.shared")
                fail(p, "out-of-bounds", f"address {int(addr[p]):#x} is outside every argument buffer")
            limit = self.sizes[s]
            bad = (off < 0) | (off + size > limit)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                p = k if pos is None else int(pos[k])
                fail(p, "out-of-bounds", f"byte offset {int(off[k])} (+{size} bytes) is out of bounds of argument {s} "
                        f"({limit} bytes); {int(bad.sum())} such accesses")
            if size > 1:
                mis = (off % size) != 0
                if mis.any():
                    k = int(np.flatnonzero(mis)[0])
                    p = k if pos is None else int(pos[k])
                    fail(p, "misaligned", f"byte offset {int(off[k])} of argument {s} is not aligned to {size} bytes")
            groups.append((s, off // (unit or size), pos))
        return groups


#: Multiply-adds (batch x M x N x K) up to which a GEMM runs in the emulator in seconds: this many
#: (512x512x256 f16) took 14 s on two shared cores, and the time grows in proportion. The runner
#: checks a GPU against the emulator only up to here; `Kernel.emulate` refuses more unless told.
QUICK_MACS = 1 << 26
#: Multiply-adds a second the emulator runs, about (an f16 GEMM of 512^3 took 21 s on a 2-core x86
#: machine; 8-bit and f64 ones run at a similar rate): what the runner's time estimate scales by.
MACS_PER_SECOND = 6e6


@dataclass
class RunStats:
    """What one `Program.run` did (for the speed benchmark and for curiosity)."""

    threads: int = 0
    ctas: int = 0
    chunks: int = 0
    instructions: int = 0  # instructions issued (each counts once for all threads of a chunk)
    mma: int = 0  # mma instructions executed (each for every warp of the chunk)
    seconds: float = 0.0


class _Machine:
    """Registers, special registers and liveness for one chunk of CTAs."""

    def __init__(self, prog: Program, memory: _Memory, params: dict[str, np.ndarray],
                 grid: tuple[int, int, int], block: tuple[int, int, int], cta0: int, nctas: int,
                 shared_size: int | None = None):
        self.prog, self.memory, self.params = prog, memory, params
        bx, by, bz = block
        per_cta = bx * by * bz
        self.per_cta = -(-per_cta // 32) * 32  # CTAs padded to whole warps
        self.T = T = nctas * self.per_cta
        self.cta0, self.grid, self.block, self.nctas = cta0, grid, block, nctas
        self.banks = {p: np.zeros((count, T), dtype=_STORAGE[t]) for p, (t, count) in prog.banks.items()}
        t = np.arange(T, dtype=np.int64)
        local = t % self.per_cta
        cta = cta0 + t // self.per_cta
        u = np.uint32
        self.specials = {
            "%tid.x": (local % bx).astype(u), "%tid.y": (local // bx % by).astype(u),
            "%tid.z": (local // (bx * by)).astype(u),
            "%ntid.x": u(bx), "%ntid.y": u(by), "%ntid.z": u(bz),
            "%ctaid.x": (cta % grid[0]).astype(u), "%ctaid.y": (cta // grid[0] % grid[1]).astype(u),
            "%ctaid.z": (cta // (grid[0] * grid[1])).astype(u),
            "%nctaid.x": u(grid[0]), "%nctaid.y": u(grid[1]), "%nctaid.z": u(grid[2]),
            "%laneid": (local & 31).astype(u), "%warpid": (local >> 5).astype(u),
            "%nwarpid": u(self.per_cta // 32),
            "%cluster_ctarank": (cta % grid[0] % prog.cluster).astype(u), "%cluster_nctarank": u(prog.cluster),
        }  # fmt: skip
        self.active: np.ndarray | None = None if per_cta == self.per_cta else local < per_cta
        self.done = False
        self.mma_count = 0
        self.wgmma = None  # per-warpgroup wgmma state (`wgmma_ops._Warpgroups`), made on first use
        self.mbarriers = None  # the CTAs' mbarrier objects (`mbarrier_ops.Barriers`), made on first use
        # threads at a barrier.cluster.arrive whose phase has not completed, and those whose phase
        # has but who have not passed its wait yet (`cluster_ops`)
        self.cluster_arrived: np.ndarray | None = None
        self.cluster_passed: np.ndarray | None = None
        self.parked: np.ndarray | None = None  # live threads of the other contexts (`Program._execute`)
        # per CTA of the chunk, whether all its threads have ended, where contexts run apart
        # (`Program._execute_apart`; None in lockstep, where a cluster's CTAs end together)
        self.exited: np.ndarray | None = None
        self.shared = None if shared_size is None else _Shared(self, shared_size)

    def thread(self, t: int) -> str:
        """Thread t of the chunk, as a user reads it."""
        local, cta = t % self.per_cta, self.cta0 + t // self.per_cta
        g, b = self.grid, self.block
        c = (cta % g[0], cta // g[0] % g[1], cta // (g[0] * g[1]))
        return (f"thread ({local % b[0]}, {local // b[0] % b[1]}, {local // (b[0] * b[1])}) "
                f"of CTA ({c[0]}, {c[1]}, {c[2]})")


def _warp_mark(threads: np.ndarray) -> np.ndarray:
    """The mark of an access by `threads` ordered for their warps' lanes (`_Shared.warp_sync`)."""
    return (-3 - threads // 32).astype(np.int32)


def _foreign(marks: np.ndarray, me: np.ndarray) -> np.ndarray:
    """Whether marks of earlier accesses are unordered before accesses by threads `me`: another
    thread's, several threads', or another warp's warp-ordered ones."""
    return (marks != -1) & (marks != me) & (marks != _warp_mark(me))


class _Shared:
    """The shared memory of one chunk of CTAs, plus what makes the GPU's undefined cases visible
    although all threads run in lockstep here: per byte, the thread that wrote it and the
    thread that read it (-2: several; -3 - w: a thread of warp w, ordered for that warp's threads
    by a `bar.warp.sync`) since the last barrier, whether a cp.async to it is
    in flight, and how many reads of wgmma.mma_async still pending (not yet retired by a
    wgmma.wait_group) it has; and the copies issued but not yet waited for. A copy lands only when
    its thread waits for its group, so a kernel that forgets a wait reads stale data on the GPU,
    here an error; likewise a write to bytes a wgmma may still be reading."""

    def __init__(self, m: _Machine, size: int):
        n = m.nctas * size
        self.size = size
        self.data = np.full(n, 0xA5, np.uint8)  # not zeros: a missing zero fill must show
        self.writer = np.full(n, -1, np.int32)
        self.reader = np.full(n, -1, np.int32)
        self.inflight = np.zeros(n, bool)
        self.async_reads = np.zeros(n, np.int32)  # pending wgmma.mma_async reads of each byte
        self.held = 0  # wgmma.mma_async operand sets held (`hold`) and not yet released
        self.committed = np.zeros(m.T, np.int64)  # groups each thread has committed
        self.copies: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # thread, bytes, data, group

    def address(self, byte: int) -> str:
        return f"{_SHARED_BASE + byte % self.size:#x}"

    def bytes(self, m: _Machine, where: str, access: str, addr: np.ndarray, threads: np.ndarray,
              size: int) -> np.ndarray:
        """[k, size] byte indices of `size`-byte accesses at shared addresses `addr` by `threads`,
        after checking that each is aligned to `size` and lies in its CTA's shared memory."""
        mis = (addr % size) != 0
        if mis.any():
            k = int(np.flatnonzero(mis)[0])
            raise EmulationError(f"{where}: misaligned shared {access} by {m.thread(int(threads[k]))}: shared "
                                 f"address {int(addr[k]):#x} is not aligned to {size} bytes")
        off = addr - _SHARED_BASE
        bad = (off < 0) | (off + size > self.size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise EmulationError(
                f"{where}: out-of-range shared {access} by {m.thread(int(threads[k]))}: shared address "
                f"{int(addr[k]):#x} (+{size} bytes) is outside the CTA's {self.size} bytes of shared memory "
                f"[{_SHARED_BASE:#x}, {_SHARED_BASE + self.size:#x}); {int(bad.sum())} such accesses")
        return ((threads // m.per_cta) * self.size + off)[:, None] + np.arange(size)

    def touch(self, m: _Machine, where: str, access: str, idx: np.ndarray, threads: np.ndarray, write: bool) -> None:
        """Check and record `threads` reading or writing bytes `idx` ([k, size])."""
        if write:
            self.check_unheld(m, where, f"{access}s", idx, threads)
        busy = self.inflight[idx]
        if busy.any():
            k, j = (int(x) for x in np.argwhere(busy)[0])
            raise EmulationError(
                f"{where}: {'write' if write else 'read'} of shared memory with a cp.async in flight: "
                f"{m.thread(int(threads[k]))} {access}s shared address {self.address(int(idx[k, j]))} that "
                "a cp.async has not yet landed on; missing cp.async.wait_group?")
        me = threads[:, None].astype(np.int32)
        w = self.writer[idx]
        bad = _foreign(w, me)
        if bad.any():
            k, j = (int(x) for x in np.argwhere(bad)[0])
            self._race(m, where, threads[k], "reads" if not write else "writes", idx[k, j], "wrote", w[k, j])
        r = self.reader[idx]
        if write:
            bad = _foreign(r, me)
            if bad.any():
                k, j = (int(x) for x in np.argwhere(bad)[0])
                self._race(m, where, threads[k], "writes", idx[k, j], "read", r[k, j])
            self.writer[idx] = np.broadcast_to(me, idx.shape)
            clash = self.writer[idx] != me
            if clash.any():
                k, j = (int(x) for x in np.argwhere(clash)[0])
                self._race(m, where, threads[k], "writes", idx[k, j], "also writes in the same instruction",
                           self.writer[idx[k, j]], window="")
        else:
            new = np.where((r == -1) | (r == me) | (r == _warp_mark(me)), me, np.int32(-2))
            self.reader[idx] = new
            clash = self.reader[idx] != new  # another thread of this instruction read it too
            if clash.any():
                self.reader[idx[clash]] = -2

    def hold(self, idx: np.ndarray) -> None:
        """Bytes `idx` are read by a wgmma.mma_async until its group is waited for (`release`):
        the tensor cores may read them any time until then."""
        np.add.at(self.async_reads, idx.ravel(), 1)
        self.held += 1

    def release(self, idx: np.ndarray) -> None:
        np.subtract.at(self.async_reads, idx.ravel(), 1)
        self.held -= 1

    def check_unheld(self, m: _Machine, where: str, verb: str, idx: np.ndarray, threads: np.ndarray) -> None:
        """A write to bytes `idx` ([k, size]) by `threads` while a wgmma.mma_async may still read
        them raises."""
        if not self.held:
            return
        busy = self.async_reads[idx] > 0
        if busy.any():
            k, j = (int(x) for x in np.argwhere(busy)[0])
            raise EmulationError(
                f"{where}: write of shared memory a wgmma.mma_async still reads: {m.thread(int(threads[k]))} "
                f"{verb} shared address {self.address(int(idx[k, j]))}, an operand of a wgmma whose group "
                "is not yet waited for; missing wgmma.wait_group?")

    def _race(self, m: _Machine, where: str, t, verb: str, byte, other_verb: str, other,
              window: str = " since the last bar.sync") -> None:
        who = self.who(m, int(other))
        raise EmulationError(
            f"{where}: shared-memory race: {m.thread(int(t))} {verb} shared address {self.address(int(byte))}, "
            f"which {who} {other_verb}{window}; missing bar.sync?")

    def who(self, m: _Machine, mark: int) -> str:
        """The thread or threads a writer or reader mark names."""
        if mark == -2:
            return "other threads"
        if mark <= -3:
            return f"a lane of the warp of {m.thread(32 * (-3 - mark))}"
        return m.thread(mark)

    def warp_sync(self, there: np.ndarray) -> None:
        """bar.warp.sync by whole warps (`there`, bool per thread): what their lanes wrote or read
        alone is ordered for the other lanes of the same warp, not for other warps (a byte read by
        several threads stays unordered until a bar.sync: imprecise, never missing a race)."""
        for marks in (self.writer, self.reader):
            mine = (marks >= 0) & there[np.maximum(marks, 0)]
            marks[mine] = _warp_mark(marks[mine])

    def barrier(self, ctas: np.ndarray | None) -> None:
        """bar.sync by every live thread of `ctas` (bool per CTA; None: all): forget the marks."""
        if ctas is None:
            self.writer.fill(-1)
            self.reader.fill(-1)
        else:
            self.writer.reshape(ctas.size, -1)[ctas] = -1
            self.reader.reshape(ctas.size, -1)[ctas] = -1

    def publish(self, seen: np.ndarray) -> None:
        """A wait on an mbarrier phase that threads `seen` (bool per thread) arrived at: their writes
        and reads so far are ordered before the waiters, so their marks go (a read mark of several
        threads, as a warpgroup's wgmma leaves, goes when any of them arrived: imprecise)."""
        per_cta = seen.size // (self.writer.size // self.size)
        w, r = self.writer, self.reader
        mine = (w >= 0) & seen[np.maximum(w, 0)]
        w[mine] = -1
        warps = seen.reshape(-1, 32).any(1)  # a warp-ordered mark goes when any lane of its warp arrived
        for marks in (w, r):
            scoped = marks <= -3
            marks[scoped & warps[np.maximum(-3 - marks, 0)]] = -1
        someone = np.repeat(seen.reshape(-1, per_cta).any(1), self.size)
        r[((r >= 0) & seen[np.maximum(r, 0)]) | ((r == -2) & someone)] = -1

    def issue(self, m: _Machine, where: str, threads: np.ndarray, idx: np.ndarray, data: np.ndarray) -> None:
        """A cp.async by `threads` of `data` to bytes `idx`: in flight until its group is waited for."""
        self.check_unheld(m, where, "copies to", idx, threads)
        if self.inflight[idx].any():
            k = int(np.flatnonzero(self.inflight[idx].any(1))[0])
            raise EmulationError(f"{where}: cp.async by {m.thread(int(threads[k]))} to shared memory that another "
                                 "cp.async has not yet landed on; missing cp.async.wait_group?")
        me = threads[:, None].astype(np.int32)
        for marks, verb in ((self.writer, "wrote"), (self.reader, "read")):
            other = marks[idx]
            bad = _foreign(other, me)
            if bad.any():
                k, j = (int(x) for x in np.argwhere(bad)[0])
                self._race(m, where, threads[k], "copies to", idx[k, j], verb, other[k, j])
        flat = idx.ravel()
        if np.unique(flat).size != flat.size:
            byte = int(np.flatnonzero(np.bincount(flat) > 1)[0])  # bincount is indexed by byte
            both = threads[np.flatnonzero((idx == byte).any(1))[:2]]
            self._race(m, where, both[1], "copies to", byte, "also copies to in the same instruction", both[0], window="")
        self.inflight[idx] = True
        self.copies.append((threads, idx, data, self.committed[threads]))

    def commit(self, threads: np.ndarray) -> None:
        self.committed[threads] += 1

    def hand_over(self, threads: np.ndarray) -> np.ndarray:
        """cp.async.mbarrier.arrive by `threads`: all their copies so far complete on a barrier instead
        of a group's wait. They land (written, marked as their thread's) but stay in flight until
        the barrier's phase completes (`Barriers.complete_tx`'s landing list); the bytes, flat."""
        mine = np.zeros(self.committed.size, bool)
        mine[threads] = True
        keep, landed = [], []
        for t, idx, data, group in self.copies:
            go = mine[t]
            if go.any():
                self.data[idx[go]] = data[go]
                self.writer[idx[go]] = np.broadcast_to(t[go, None].astype(np.int32), idx[go].shape)
                landed.append(idx[go].ravel())
            if not go.all():
                keep.append((t[~go], idx[~go], data[~go], group[~go]))
        self.copies = keep
        return np.concatenate(landed) if landed else np.zeros(0, np.int64)

    def wait(self, threads: np.ndarray, pending: int) -> None:
        """cp.async.wait_group by `threads`: their copies of all but the `pending` newest committed
        groups land (copies not yet committed stay in flight)."""
        waiting = np.zeros(self.committed.size, bool)
        waiting[threads] = True
        limit = self.committed - pending
        keep = []
        for t, idx, data, group in self.copies:
            land = waiting[t] & (group < limit[t])
            if land.any():
                self.data[idx[land]] = data[land]
                self.inflight[idx[land]] = False
                self.writer[idx[land]] = np.broadcast_to(t[land, None].astype(np.int32), idx[land].shape)
            if not land.all():
                keep.append((t[~land], idx[~land], data[~land], group[~land]))
        self.copies = keep
