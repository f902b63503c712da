"""A kernel decoded for emulation and run for a grid: the table of instruction decoders, the
program-counter loop (guards as masks, branches uniform per CTA, ret/exit), CTAs run in chunks under a
memory budget, and the public entry points `compile_entry` and `emulate`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tilemma.compiler.core import collector
from tilemma.compiler.core.progress import Progress
from tilemma.compiler.core.targets import max_shared_per_cta
from tilemma.compiler.runtime.tensor_map import TensorMap
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.emulator.alu import (
    _dec_abs_neg, _dec_bfe, _dec_bfi, _dec_binary, _dec_prmt, _dec_cvt, _dec_cvta, _dec_div_rem, _dec_mov, _dec_mul_mad,
    _dec_not, _dec_popc, _dec_selp, _dec_setp, _dec_shfl, _dec_shift,
)
from tilemma.compiler.verify.emulator.float_ops import DECODERS as _FLOAT_DECODERS
from tilemma.compiler.verify.emulator.machine import (
    _SHARED_BASE, _STORAGE, _TYPES, MAP_PARAM, EmulationError, RunStats, _Machine, _Memory,
)
from tilemma.compiler.verify.emulator.mbarrier_ops import _dec_mbarrier
from tilemma.compiler.verify.emulator.memory_ops import _dec_atom, _dec_fence, _dec_ld, _dec_st
from tilemma.compiler.verify.emulator.mma_instruction import _dec_mma
from tilemma.compiler.verify.emulator.operands import Fn, _Decode
from tilemma.compiler.verify.emulator.shared_ops import _dec_bar, _dec_cp, _dec_ldmatrix
from tilemma.compiler.verify.emulator.wgmma_ops import _dec_setmaxnreg, _dec_wgmma
from tilemma.compiler.verify.emulator.cluster_ops import _dec_barrier_cluster, _dec_mapa
from tilemma.compiler.verify.ptx_text import ParsedPtx, parse_ptx_modules, print_ptx
from tilemma.dialects import ptx
from xdsl.dialects.builtin import ModuleOp

# which contexts `Program.run` runs ahead where warpgroups run apart (`_execute_apart`)
AHEAD = ("leaders", "laggards")


def _dec_barrier(d, op, mods, args, where):
    """barrier.cluster.* (`cluster_ops`) or a CTA's barrier.sync (`shared_ops._dec_bar`)."""
    if mods[:1] == ["cluster"]:
        return _dec_barrier_cluster(d, op, mods, args, where)
    return _dec_bar(d, op, mods, args, where)


_DECODERS = {
    "mov": _dec_mov, "add": _dec_binary, "sub": _dec_binary, "min": _dec_binary, "max": _dec_binary,
    "and": _dec_binary, "or": _dec_binary, "xor": _dec_binary, "not": _dec_not,
    "mul": _dec_mul_mad, "mad": _dec_mul_mad, "div": _dec_div_rem, "rem": _dec_div_rem,
    "shl": _dec_shift, "shr": _dec_shift, "bfe": _dec_bfe, "bfi": _dec_bfi, "prmt": _dec_prmt, "setp": _dec_setp,
    "selp": _dec_selp, "cvt": _dec_cvt, "cvta": _dec_cvta, "ld": _dec_ld, "st": _dec_st,
    "popc": _dec_popc, "abs": _dec_abs_neg, "neg": _dec_abs_neg, "atom": _dec_atom,
    "cp": _dec_cp, "ldmatrix": _dec_ldmatrix, "bar": _dec_bar, "barrier": _dec_barrier, "mapa": _dec_mapa,
    "fence": _dec_fence, "membar": _dec_fence, "shfl": _dec_shfl, "wgmma": _dec_wgmma,
    "mbarrier": _dec_mbarrier,
    **_FLOAT_DECODERS,  # float forms of add/sub/mul/div/min/max/neg/abs/setp/cvt/mov, fma, ex2, ...
}  # fmt: skip


@dataclass
class _Step:
    fn: Fn | None
    kind: str  # "op", "bra", "ret", "wait" (mbarrier try_wait, setmaxnreg: fn returns whether it could run)
    guard: tuple[str, int, bool] | None  # (bank, index, negated)
    where: str
    target: int = -1


class Program:
    """One kernel decoded for emulation; `run` executes it for a grid."""

    def __init__(self, entry: ptx.EntryOp, lines: dict | None = None, source: str = "<ptx>",
                 arch: str = mma_arith.DEFAULT_ARCH):
        self.name = entry.sym_name.data
        d = _Decode(entry, lines or {}, source, arch)
        self.params = d.params
        self.max_threads = int(entry.max_threads.data) if entry.max_threads is not None else None
        # CTAs a cluster holds along x (`.reqnctapercluster N, 1, 1`): a chunk holds whole clusters,
        # whose CTAs address each other's shared memory (`mapa`, `.shared::cluster`)
        self.cluster = entry.cluster.value.data if entry.cluster is not None else 1
        body = list(entry.body.ops)
        for op in body:
            if isinstance(op, ptx.RegOp):
                prefix = op.prefix.data
                if prefix in d.banks:
                    raise EmulationError(f"{d.where(op)}: register prefix {prefix} declared twice")
                d.banks[prefix] = (op.type.data, int(op.count.data))
        self._check_registers(d, [op for op in body if isinstance(op, ptx.RegOp)])
        self._layout_shared(d, [op for op in body if isinstance(op, ptx.SharedOp)])
        code = [op for op in body if isinstance(op, (ptx.InstOp, ptx.MmaOp, ptx.LabelOp))]
        index = 0
        for op in code:
            if isinstance(op, ptx.LabelOp):
                if op.label.data in d.labels:
                    raise EmulationError(f"{d.where(op)}: label defined twice")
                d.labels[op.label.data] = index
            else:
                index += 1
        self.banks = dict(d.banks)
        self.steps: list[_Step] = [self._decode(d, op) for op in code if not isinstance(op, ptx.LabelOp)]
        # The approximate instructions the kernel runs: their results are the ISA-bounded model,
        # not the GPU's bits, so a GPU comparison of words they reach is not a bit-exact one.
        self.approximate = frozenset(d.approximate)

    def _check_registers(self, d: _Decode, decls: list) -> None:
        """The declared registers fit the target's register file: a thread's registers (PTX's
        virtual ones, which ptxas may spill) cannot outnumber the 32-bit registers of a whole SM,
        and the emulator holds every one of them for every thread of a chunk (a `.reg` of 2^40
        registers asked for 931 TiB)."""
        from tilemma.compiler.core.targets import limits

        target = d.target or "sm_90"
        try:
            record = limits(target)
        except ValueError:
            target, record = "sm_90", limits("sm_90")
        words = 0
        for op in decls:
            storage = _STORAGE.get(op.type.data)
            words += int(op.count.data) * max(1, storage.itemsize // 4 if storage is not None else 1)
            if words > record.registers_per_sm:
                raise EmulationError(
                    f"{d.where(op)}: the registers declared up to here come to {words} 32-bit registers per thread; "
                    f"{target}'s whole register file holds {record.registers_per_sm} (a thread uses at most "
                    f"{record.registers_per_thread}, ptxas spilling the rest)")

    def _layout_shared(self, d: _Decode, decls: list) -> None:
        """Static buffers in declaration order from `_SHARED_BASE`, each at its alignment; every
        `.extern` buffer at the end, where the launch's dynamic shared memory starts."""
        at = _SHARED_BASE
        for op in decls:
            name = op.sym_name.data
            if name in d.shared:
                raise EmulationError(f"{d.where(op)}: shared buffer {name} declared twice")
            if not op.dynamic:
                at = -(-at // int(op.align.data)) * int(op.align.data)
                d.shared[name] = at
                at += int(op.size.data)
        align = max([16] + [int(op.align.data) for op in decls if op.dynamic])
        self.static_shared = at - _SHARED_BASE
        self.dynamic_at = -(-at // align) * align
        for op in decls:
            if op.dynamic:
                d.shared.setdefault(op.sym_name.data, self.dynamic_at)
        self.has_shared = bool(decls)
        self.target = d.target

    @staticmethod
    def _decode(d: _Decode, op) -> _Step:
        where = d.where(op)
        if isinstance(op, ptx.MmaOp):
            return _Step(_dec_mma(d, op, where), "op", None, where)
        guard = None
        if op.guard is not None:
            g = op.guard.data
            r = d.reg(g.lstrip("!"), op)
            if r.rtype != "pred":
                raise EmulationError(f"{where}: guard {g} is not a .pred register")
            guard = (r.bank, r.index, g.startswith("!"))
        opcode = op.opcode.data
        parts = opcode.split(".")
        args = op.arg_values()
        if parts[0] == "bra":
            if parts[1:] not in ([], ["uni"]) or len(args) != 1 or args[0] not in d.labels:
                raise EmulationError(f"{where}: expected bra[.uni] LABEL with a label of this kernel")
            return _Step(None, "bra", guard, where, d.labels[args[0]])
        if parts[0] in ("ret", "exit"):
            if len(parts) > 1 or args:
                raise EmulationError(f"{where}: expected plain {parts[0]}")
            return _Step(None, "ret", guard, where)
        if parts[:2] == ["mbarrier", "try_wait"]:
            return _Step(_dec_mbarrier(d, op, parts[1:], args, where), "wait", guard, where)
        if parts[0] == "setmaxnreg":
            return _Step(_dec_setmaxnreg(d, op, parts[1:], args, where), "wait", guard, where)
        if parts[:3] == ["barrier", "cluster", "wait"]:
            return _Step(_dec_barrier_cluster(d, op, parts[1:], args, where), "wait", guard, where)
        decoder = _DECODERS.get(parts[0])
        if decoder is None:
            raise EmulationError(f"{where}: the emulator does not implement {parts[0]!r}")
        return _Step(decoder(d, op, parts[1:], args, where), "op", guard, where)

    def run(self, grid, block, args: Sequence, *, shared_bytes: int = 0, max_steps: int = 10_000_000,
            memory_budget: int = 256 << 20, warpgroups_apart: bool = True,
            ahead: str = "leaders") -> list[np.ndarray]:
        """Run the kernel for `grid` x `block` on `args` (like `cuda_runtime.run_kernel`): the
        final contents of every ndarray argument, in order. Scalars are passed by value; a
        TensorMap (for a `.align 64 .b8 NAME[128]` parameter) in the emulator's encoding, its base
        the address of the array argument it maps plus its offset; `shared_bytes` is the dynamic
        shared memory per CTA (what `.extern .shared` names). `warpgroups_apart`: where warps part
        into roles, each warpgroup of a role (of each CTA rank of a cluster) runs as a context of
        its own, so that one runs ahead of another, as on a GPU (`_execute_apart`); False: the
        role's warpgroups, and a cluster's CTAs, in lockstep. `ahead` (apart): which contexts run
        ahead, "leaders" (the first warpgroup of each role, rank 0) or "laggards" (the others,
        the leaders as late as the barriers allow): a kernel right on a GPU is right either way."""
        if ahead not in AHEAD:
            raise ValueError(f"ahead: expected one of {', '.join(AHEAD)}, got {ahead!r}")
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        threads = block[0] * block[1] * block[2]
        if threads > 1024:
            raise EmulationError(f"block {block} has {threads} threads; at most 1024 per CTA")
        if self.max_threads is not None and threads > self.max_threads:
            raise EmulationError(f"{self.name}: block {block} exceeds .maxntid {self.max_threads}")
        if grid[0] % self.cluster:
            raise EmulationError(f"{self.name}: grid {grid} is not a whole number of its clusters of {self.cluster} "
                                 "CTAs along x (.reqnctapercluster)")
        if len(args) != len(self.params):
            raise EmulationError(f"{self.name} takes {len(self.params)} parameters, got {len(args)} arguments")
        shared_size = self._shared_size(shared_bytes)
        memory = _Memory(args)
        params = {}
        for i, ((ptype, pname), arg) in enumerate(zip(self.params, args)):
            if ptype == MAP_PARAM:  # a tensor map: the emulator's own encoding of it
                if not isinstance(arg, TensorMap) or not 0 <= arg.of < len(args) \
                        or not isinstance(args[arg.of], np.ndarray):
                    raise EmulationError(f"parameter {pname} is a tensor map; argument {i} must be a TensorMap of "
                                         "an array argument")
                base = memory.pointer(arg.of) + arg.offset  # the map's base: its argument's address + offset
                params[pname] = np.frombuffer(arg.emulated(base), np.uint8)
                continue
            size = _TYPES[ptype].itemsize
            if isinstance(arg, np.ndarray):
                if size != 8:
                    raise EmulationError(f"parameter {pname} is .{ptype}; an array argument is a 64-bit pointer")
                value = np.array([memory.pointer(i)], dtype=np.uint64)
            elif isinstance(arg, np.generic):
                if arg.dtype.itemsize != size:
                    raise EmulationError(f"parameter {pname} is .{ptype}, argument {i} has {arg.dtype.itemsize} bytes")
                value = np.array([arg])
            else:
                raise TypeError(f"kernel argument {i} is {type(arg).__name__}; pass an np.ndarray or a NumPy scalar")
            params[pname] = value.view(np.uint8)
        per_cta = -(-threads // 32) * 32
        bytes_per_thread = sum(_STORAGE[t].itemsize * n for t, n in self.banks.values()) + 64
        # per shared byte: data, writer, reader, inflight, async_reads (1 + 4 + 4 + 1 + 4)
        bytes_per_thread += 14 * (shared_size or 0) // per_cta + (8 if shared_size is not None else 0)
        ctas = grid[0] * grid[1] * grid[2]
        chunk = max(1, min(ctas, memory_budget // max(1, bytes_per_thread * per_cta)))
        chunk = max(self.cluster, chunk // self.cluster * self.cluster)  # whole clusters
        stats = RunStats(threads=ctas * threads, ctas=ctas)
        start = time.perf_counter()
        with Progress(f"emulating {self.name}", ctas, "CTAs") as progress:  # only on a terminal
            for cta0 in range(0, ctas, chunk):
                m = _Machine(self, memory, params, grid, block, cta0, min(chunk, ctas - cta0), shared_size)
                stats.instructions += self._execute(m, max_steps, warpgroups_apart, ahead)
                stats.mma += m.mma_count
                stats.chunks += 1
                progress.advance(m.nctas)
        stats.seconds = time.perf_counter() - start
        self.stats = stats
        out = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                host = np.ascontiguousarray(a)
                raw = memory.bufs[i][: memory.sizes[i]]
                out.append(raw.view(host.dtype).reshape(host.shape).copy() if host.size else host.copy())
        return out

    def _shared_size(self, shared_bytes: int) -> int | None:
        """Bytes of shared memory per CTA (None: the kernel uses none), within the target's limit."""
        if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
            raise EmulationError(f"shared_bytes must be a non-negative integer, got {shared_bytes!r}")
        if not self.has_shared and not shared_bytes:
            return None
        target = self.target or "sm_90"
        try:
            limit = max_shared_per_cta(target)
        except ValueError as err:
            raise EmulationError(f"{self.name}: {err}") from None
        if self.static_shared + shared_bytes > limit:
            raise EmulationError(
                f"{self.name}: {self.static_shared} bytes of static and {shared_bytes} bytes of dynamic shared memory "
                f"exceed the {limit} bytes ({limit // 1024} KiB) one CTA may use on {target}")
        return self.dynamic_at - _SHARED_BASE + int(shared_bytes)

    def _execute(self, m: _Machine, max_steps: int, apart: bool = False, ahead: str = "leaders") -> int:
        """Run the chunk's threads to the end. They start as one context (pc, active threads); a
        branch that parts whole warps of a CTA (a warp-specialized kernel's roles) gives the warps
        that take it a context of their own, and the contexts take turns: one runs until it ends,
        waits for an mbarrier phase that is not complete (`mbarrier_ops`) or completes one, then
        the next. With `apart`, `_execute_apart` runs them instead, a warpgroup a context."""
        contexts = [_Context(0, m.active)]
        if apart:
            return self._execute_apart(m, contexts, max_steps, ahead)
        count, turn, idle = 0, 0, 0
        while contexts:
            turn %= len(contexts)
            ctx = contexts[turn]
            ran, paused = self._turn(m, ctx, contexts, max_steps - count, False)
            count += ran
            if not paused:
                contexts.remove(ctx)
                idle = 0
                continue
            # paused at once at a wait that does not pass: no progress
            idle = idle + 1 if ctx.stuck else 0
            if idle >= len(contexts):
                self._deadlock(contexts)
            turn += 1
        return count

    def _execute_apart(self, m: _Machine, contexts: list[_Context], max_steps: int, ahead: str = "leaders") -> int:
        """`_execute` with each warpgroup of a role its own context (in a cluster, each CTA rank's),
        by priority instead of in turns: the first warpgroup of each role (of rank 0) before the
        others (`_Context.lags`), the first context that can go on runs. So the leading warpgroup of
        the consumers runs through every stage it finds ready and frees what it may, the producers
        refill what was freed, and the other consumer warpgroups, and the peer CTAs, read their
        stages as late as the barriers allow. A CTA whose threads have all ended is marked
        (`_Machine.exited`): a peer's arrival at its barriers, or a multicast into its shared
        memory, is then an error. With `ahead` "laggards" the order is reversed: the other
        warpgroups and ranks run ahead, the leaders behind."""
        if self.cluster > 1:  # each CTA rank from the start, rank 0 ahead (barrier.cluster waits for all)
            rank = np.asarray(m.specials["%cluster_ctarank"], np.int64)
            contexts[:] = [_Context(0, rank == r, lags=r > 0) for r in range(self.cluster)]
        count, tried = 0, set()
        while contexts:
            order = sorted(contexts, key=lambda c: c.lags != (ahead == "laggards"))
            ctx = next((c for c in order if id(c) not in tried), None)
            if ctx is None:
                self._deadlock(contexts)
            ran, paused = self._turn(m, ctx, contexts, max_steps - count, True)
            count += ran
            if not paused:
                contexts.remove(ctx)
                alive = np.logical_or.reduce([c.threads(m.T) for c in contexts]) if contexts else np.zeros(m.T, bool)
                m.exited = ~alive.reshape(m.nctas, -1).any(1)
            if paused and ctx.stuck:
                tried.add(id(ctx))
            else:
                tried.clear()
        return count

    def _turn(self, m: _Machine, ctx: _Context, contexts: list[_Context], max_steps: int,
              apart: bool) -> tuple[int, bool]:
        """`_run` of `ctx`, the other contexts' threads parked meanwhile (what a barrier counts)."""
        others = [c.threads(m.T) for c in contexts if c is not ctx]
        m.parked = np.logical_or.reduce(others) if others else None
        m.active, m.done = ctx.active, ctx.done
        ran, paused = self._run(m, ctx, contexts, max_steps, apart)
        ctx.active, ctx.done = m.active, m.done
        return ran, paused

    def _deadlock(self, contexts: list[_Context]) -> None:
        waits = "; ".join(sorted({str(self.steps[c.pc].where) for c in contexts}))
        raise EmulationError(f"deadlock: every live thread waits (for an mbarrier phase, or registers of "
                             f"setmaxnreg.inc) for what no thread can give any more ({waits})")

    def _run(self, m: _Machine, ctx: _Context, contexts: list[_Context], max_steps: int,
             apart: bool = False) -> tuple[int, bool]:
        """Run context `ctx` until its threads end (False) or it waits for an incomplete mbarrier
        phase (True, its pc at the wait); the instructions issued."""
        steps, n, pc, count = self.steps, len(self.steps), ctx.pc, 0
        # CTAs that branch apart (a K loop whose trip count is the CTA's, as a split-K kernel's
        # last split): (pc where they meet again, the threads waiting there), innermost last
        waiting = ctx.waiting
        while pc < n:
            while waiting and pc == waiting[-1][0]:
                m.active = m.active | waiting.pop()[1]
            if m.done:
                if not waiting:
                    break
                pc, m.active = waiting.pop()
                m.done = False
                continue
            step = steps[pc]
            count += 1
            if count > max_steps:
                raise EmulationError(f"{step.where}: more than {max_steps} instructions executed; an endless loop?")
            mask = m.active
            if step.guard is not None:
                bank, i, neg = step.guard
                p = m.banks[bank][i]
                p = ~p if neg else p
                if mask is not None:
                    p = p & mask
                if not p.any():
                    pc += 1
                    continue
                mask = None if (mask is None and p.all()) else p
            if step.kind == "op":
                step.fn(m, mask)
                pc += 1
                if m.mbarriers is not None and m.mbarriers.completed:
                    # a phase completed: let its waiters run now, so that a thread which goes on
                    # to write what they still read (a missing wait) meets their race marks
                    m.mbarriers.completed = False
                    if len(contexts) > 1:
                        ctx.pc, ctx.stuck = pc, False
                        return count, True
            elif step.kind == "wait":
                if not step.fn(m, mask):
                    ctx.pc, ctx.stuck = pc, count == 1
                    return count, True
                pc += 1
            elif step.kind == "bra":
                if mask is not None and (m.active is None or not np.array_equal(mask, m.active)):
                    live = m.active if m.active is not None else np.ones(m.T, bool)
                    taken = mask.copy()  # (a guard without negation is the register's own row)
                    by_cta = (mask | ~live).reshape(m.nctas, -1).all(1) | ~mask.reshape(m.nctas, -1).any(1)
                    if not by_cta.all():
                        t, lv = (taken & live).reshape(-1, 32), live.reshape(-1, 32)
                        if not ((t == lv).all(1) | ~t.any(1)).all():  # lanes of one warp part: SIMT divergence
                            off = np.flatnonzero(live & ~mask)
                            raise EmulationError(
                                f"{step.where}: non-uniform branch: {int(mask.sum())} live threads take it, "
                                f"{off.size} do not (first: {m.thread(int(off[0]))}); the emulator runs "
                                "the threads of a warp in lockstep")
                        if waiting:
                            raise EmulationError(f"{step.where}: warps of a CTA part where CTAs have parted already; "
                                                 "the emulator does not model that")
                        # whole warps part (roles): the ones taking it run as a context of their own
                        # (apart: each warpgroup of it, and of the rest, one)
                        stay = _warpgroups(m, live & ~taken) if apart else [live & ~taken]
                        go = _warpgroups(m, taken & live) if apart else [taken & live]
                        contexts += [_Context(step.target, g, lags=ctx.lags or i > 0) for i, g in enumerate(go)]
                        contexts += [_Context(pc + 1, g, lags=True) for g in stay[1:]]
                        m.active = stay[0]
                        pc += 1
                        continue
                    # whole CTAs part: the ones behind run first, the others wait where both meet
                    # (a forward branch's target; after a backward one)
                    if step.target > pc:
                        waiting.append((step.target, taken))
                        m.active = live & ~taken
                        pc += 1
                    else:
                        waiting.append((pc + 1, live & ~taken))
                        m.active = taken
                        pc = step.target
                    continue
                pc = step.target
            else:  # ret / exit
                if mask is None:
                    m.done = True
                    m.active = np.zeros(m.T, bool)
                else:
                    m.active = (m.active if m.active is not None else np.ones(m.T, bool)) & ~mask
                    m.done = not m.active.any()
                pc += 1
        ctx.pc = pc
        return count, False


def _warpgroups(m: _Machine, threads: np.ndarray) -> list[np.ndarray]:
    """`threads` (a mask over the chunk) by warpgroup and, in a cluster, by the CTA's rank in it:
    for each (rank, warpgroup index) that any of them is in, those in it (in every cluster of the
    chunk), rank 0's first."""
    group = (np.arange(m.T) % m.per_cta) // 128  # (four warps: what a wgmma instruction runs on)
    group = group + np.asarray(m.specials["%cluster_ctarank"], np.int64) * (m.per_cta // 128 + 1)
    return [threads & (group == g) for g in np.unique(group[threads])]


@dataclass
class _Context:
    """Threads of a chunk that run together: their pc, their active threads (None: all), the
    CTAs waiting to rejoin them, and whether all have ended."""

    pc: int
    active: np.ndarray | None
    waiting: list = field(default_factory=list)
    done: bool = False
    stuck: bool = False  # paused at a wait without running anything else since its last turn
    lags: bool = False  # apart: not a role's first warpgroup of rank 0: runs only where the leaders cannot

    def threads(self, total: int) -> np.ndarray:
        out = np.ones(total, bool) if self.active is None else self.active.copy()
        for _, w in self.waiting:
            out |= w
        return out


def _dims(d, what: str) -> tuple[int, int, int]:
    t = tuple(int(x) for x in (d if isinstance(d, (tuple, list)) else (d,)))
    t = t + (1,) * (3 - len(t))
    if len(t) != 3 or min(t) < 1:
        raise EmulationError(f"{what} must be 1 to 3 positive sizes, got {d!r}")
    return t  # type: ignore[return-value]


def _parsed(source) -> ParsedPtx:
    if isinstance(source, str):
        return parse_ptx_modules(source)
    if isinstance(source, ptx.ModuleOp_):
        return parse_ptx_modules(print_ptx(source))
    if isinstance(source, ModuleOp):
        found = [op for op in source.walk() if isinstance(op, ptx.ModuleOp_)]
        if not found:
            raise EmulationError("no ptx.module in the input; lower tile IR first")
        return parse_ptx_modules("\n".join(print_ptx(p) for p in found))
    raise TypeError(f"expected PTX text or a ptx.module, got {type(source).__name__}")


def compile_entry(ptx_text_or_module, entry: str | None = None, arch: str = mma_arith.DEFAULT_ARCH) -> Program:
    """Decode kernel `entry` (the only one when None) of PTX text or a ptx.module, for a GPU
    `arch` (whose tensor-core arithmetic mma follows). Modules are printed and read back, so
    error messages point at lines of the PTX the GPU would get."""
    with collector.paused():  # decoding makes tens of thousands of objects and frees none
        parsed = _parsed(ptx_text_or_module)
        try:
            e = parsed.entry(entry)
        except ValueError as err:
            raise EmulationError(str(err)) from None
        return Program(e, parsed.lines, parsed.source, arch)


def emulate(ptx_text_or_module, entry: str, grid, block, args: list, *, arch: str = mma_arith.DEFAULT_ARCH,
            **options) -> list[np.ndarray]:
    """Run `entry` of a PTX module on the CPU, mirroring `cuda_runtime.run_kernel` on a GPU `arch`
    (sm_90 by default): arrays are copied in, the grid runs, and the final contents of every
    ndarray argument come back."""
    return compile_entry(ptx_text_or_module, entry, arch).run(grid, block, args, **options)
