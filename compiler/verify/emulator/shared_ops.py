"""The warp- and CTA-wide shared-memory instructions of the staged kernels: cp.async with its
commit/wait groups, ldmatrix and bar.sync. The bookkeeping they drive (copies in flight, race
marks cleared at a barrier) is `machine._Shared`."""

from __future__ import annotations

import re

import numpy as np
from tilemma.compiler.verify.emulator.machine import EmulationError, _Machine, _per_thread
from tilemma.compiler.verify.emulator.memory_ops import _addresses, _shared_addresses, _shared_of, _threads
from tilemma.compiler.verify.emulator.operands import Fn, _Addr, _Imm, _Reg, _Vec, _group_count, _one, _reader, _writer


def whole_groups(mask, size: int) -> tuple[np.ndarray | None, tuple[int, int] | None]:
    """(the groups of `size` consecutive threads that execute an instruction wholly, None: all;
    (the first partly executing group, its active threads) or None)."""
    if mask is None:
        return None, None
    lanes = mask.reshape(-1, size)
    partial = lanes.any(1) & ~lanes.all(1)
    if partial.any():
        g = int(np.flatnonzero(partial)[0])
        return None, (g, int(lanes[g].sum()))
    return np.flatnonzero(lanes.all(1)), None


def _whole_warps(m: _Machine, mask, where: str, what: str) -> np.ndarray | None:
    """Warps executing a warp-wide instruction (None: all); a partly active warp is an error."""
    warps, partial = whole_groups(mask, 32)
    if partial is not None:
        w, active = partial
        raise EmulationError(f"{where}: only {active} of 32 lanes of the warp of {m.thread(w * 32)} "
                             f"execute this {what} (.sync.aligned needs the whole warp)")
    return warps


_CP_ASYNC = re.compile(r"^cp\.async\.(ca|cg)\.shared(?:::cta)?\.global(?:\.L2::(?:64|128|256)B)?$")


def _dec_cp(d, op, mods, args, where) -> Fn:
    """cp.async copies, commit_group, wait_group N, wait_all (see `_Shared`); the tensor copies
    `cp.async.bulk.tensor` are `tma_ops`', a copies' arrival at an mbarrier `mbarrier_ops`'."""
    opcode = op.opcode.data
    if opcode.startswith("cp.async.bulk.tensor."):
        from tilemma.compiler.verify.emulator.tma_ops import _dec_tma

        return _dec_tma(d, op, mods, args, where)
    if opcode.startswith("cp.async.mbarrier.arrive"):
        from tilemma.compiler.verify.emulator.mbarrier_ops import _dec_cp_arrive

        return _dec_cp_arrive(d, op, args, where)
    if opcode in ("cp.async.commit_group", "cp.async.wait_all"):
        if args:
            raise EmulationError(f"{where}: {opcode} takes no operands")
        if opcode == "cp.async.commit_group":
            return lambda m, mask: _shared_of(m, where).commit(_threads(m, mask))

        def run_all(m, mask):
            sh, threads = _shared_of(m, where), _threads(m, mask)
            sh.commit(threads)
            sh.wait(threads, 0)

        return run_all
    if opcode == "cp.async.wait_group":
        pending = _group_count(d, op, args, where, "cp.async.wait_group")
        return lambda m, mask: _shared_of(m, where).wait(_threads(m, mask), pending)
    match = _CP_ASYNC.match(opcode)
    if not match or len(args) not in (3, 4):
        raise EmulationError(f"{where}: expected cp.async.{{ca,cg}}.shared[::cta].global[.L2::128B] [dst], [src], "
                             "CP-SIZE[, SRC-SIZE] (or commit_group / wait_group N / wait_all)")
    ops = [d.operand(a, op) for a in args]
    dst, src, cp = ops[:3]
    if not (isinstance(dst, _Addr) and isinstance(src, _Addr)):
        raise EmulationError(f"{where}: cp.async needs [shared address], [global address]")
    if not isinstance(cp, _Imm) or cp.value not in ((16,) if match.group(1) == "cg" else (4, 8, 16)):
        raise EmulationError(f"{where}: cp-size must be {'16 for .cg' if match.group(1) == 'cg' else '4, 8 or 16'}")
    size = int(cp.value)
    if len(ops) == 4 and isinstance(ops[3], _Imm) and not 0 <= ops[3].value <= size:
        raise EmulationError(f"{where}: src-size {ops[3].text} is not in 0..{size}")
    src_size = _reader(d, ops[3], "u32", where) if len(ops) == 4 else (lambda m: np.uint32(size))
    saddr, gaddr = _shared_addresses(d, dst, where), _addresses(d, src, where)
    cols = np.arange(size)

    def run(m, mask):
        sh, threads = _shared_of(m, where), _threads(m, mask)
        sa, ga = saddr(m), gaddr(m)
        n = _per_thread(np.asarray(src_size(m)).astype(np.int64), m.T)
        if mask is not None:
            sa, ga, n = sa[mask], ga[mask], n[mask]
        idx = sh.bytes(m, where, "cp.async destination", sa, threads, size)
        if (n > size).any():
            k = int(np.flatnonzero(n > size)[0])
            raise EmulationError(f"{where}: {m.thread(int(threads[k]))}: src-size {int(n[k])} exceeds cp-size {size}")
        mis = (ga % np.uint64(size)) != 0
        if mis.any():
            k = int(np.flatnonzero(mis)[0])
            raise EmulationError(f"{where}: misaligned cp.async source by {m.thread(int(threads[k]))}: global "
                                 f"address {int(ga[k]):#x} is not aligned to {size} bytes")
        data = np.zeros((threads.size, size), np.uint8)
        some = np.flatnonzero(n > 0)  # src-size 0 reads nothing (the whole copy is zero fill)
        if some.size:
            first, last = ga[some], ga[some] + (n[some] - 1).astype(np.uint64)

            def fail(p, what, why):
                raise EmulationError(f"{where}: {what} cp.async source read by {m.thread(int(threads[some[p]]))}: {why}")

            m.memory.locate(last, 1, fail)
            for s, off, pos in m.memory.locate(first, 1, fail):
                rows = some if pos is None else some[pos]
                got = np.take(m.memory.bufs[s], off[:, None] + cols, mode="clip")
                data[rows] = np.where(cols < n[rows, None], got, 0)
        sh.issue(m, where, threads, idx, data)

    return run


_LDMATRIX = re.compile(r"^ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared(?:::cta)?\.b16$")


def _dec_ldmatrix(d, op, mods, args, where) -> Fn:
    """ldmatrix: lane 8i + r gives the address of row r (16 bytes) of matrix i; register i of
    lane l gets elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i (of its
    transpose with .trans), the first in the low half. x1 / x2 ignore the addresses of lanes 8 / 16 up."""
    match = _LDMATRIX.match(op.opcode.data)
    if not match:
        raise EmulationError(f"{where}: expected ldmatrix.sync.aligned.m8n8.{{x1,x2,x4}}[.trans].shared[::cta].b16")
    count, trans = int(match.group(1)), bool(match.group(2))
    dst, addr = _one(d, op, args, 2, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: ldmatrix needs a shared address in brackets")
    regs = list(dst.items) if isinstance(dst, _Vec) else [dst]
    if len(regs) != count:
        raise EmulationError(f"{where}: ldmatrix .x{count} writes {count} registers")
    for r in regs:
        if not isinstance(r, _Reg) or r.storage != np.dtype(np.uint32):
            raise EmulationError(f"{where}: ldmatrix writes 32-bit registers, got {getattr(r, 'name', r)}")
    saddr = _shared_addresses(d, addr, where)
    providers = np.arange(8 * count)

    def run(m, mask):
        sh = _shared_of(m, where)
        warps = _whole_warps(m, mask, where, "ldmatrix")
        wid = np.arange(m.T // 32) if warps is None else warps
        threads = (wid[:, None] * 32 + providers).reshape(-1)
        idx = sh.bytes(m, where, "ldmatrix row load", saddr(m)[threads], threads, 16)
        sh.touch(m, where, "load", idx, threads, write=False)
        mats = sh.data[idx].view(np.uint16).reshape(wid.size, count, 8, 8)
        if trans:
            mats = mats.transpose(0, 1, 3, 2)
        words = np.ascontiguousarray(mats).view(np.uint32).reshape(wid.size, count, 32)
        for i, r in enumerate(regs):
            row = m.banks[r.bank][r.index].reshape(-1, 32)
            if warps is None:
                row[...] = words[:, i]
            else:
                row[warps] = words[:, i]

    return run


def _dec_bar_red_or(d, op, args, where) -> Fn:
    """bar.red.or.pred p, 0, q: a barrier (as bar.sync 0) that gives every thread of the CTA the OR
    of q over its threads."""
    dst, barrier, src = _one(d, op, args, 3, where)
    if not isinstance(barrier, _Imm) or barrier.value != 0:
        raise EmulationError(f"{where}: only barrier 0 is supported")
    sync = _dec_bar(d, op, ["sync"], [args[1]], where)
    read, write = _reader(d, src, "pred", where), _writer(dst, where)

    def run(m, mask):
        sync(m, mask)
        q = _per_thread(read(m), m.T).astype(bool)
        live = np.ones(m.T, bool) if m.active is None else m.active
        there = live if mask is None else mask
        anyone = (q & there).reshape(m.nctas, -1).any(1)
        write(m, np.repeat(anyone, m.per_cta), mask)

    return run


def _dec_bar_warp(d, op, args, where) -> Fn:
    """bar.warp.sync -1: the lanes of a warp wait for each other. They run in lockstep here, so its
    work is to order the shared-memory accesses of each lane before the other lanes' of its warp
    (`_Shared.warp_sync`), and to refuse it where a lane of the warp does not run it."""
    ops = [d.operand(a, op) for a in args]
    if len(ops) != 1 or not isinstance(ops[0], _Imm) or int(ops[0].value) & 0xFFFFFFFF != 0xFFFFFFFF:
        raise EmulationError(f"{where}: bar.warp.sync is emulated with a full member mask (-1) only")

    def run(m, mask):
        live = np.ones(m.T, bool) if m.active is None else m.active
        there = live if mask is None else mask
        lanes = there.reshape(-1, 32)
        partial = lanes.any(1) & ~lanes.all(1)
        if partial.any():
            w = int(np.flatnonzero(partial)[0])
            missing = 32 * w + int(np.flatnonzero(~lanes[w])[0])
            raise EmulationError(f"{where}: {m.thread(missing)} does not reach the bar.warp.sync -1 its warp runs "
                                 "(every lane of the member mask must)")
        if m.shared is not None:
            m.shared.warp_sync(there)

    return run


def _dec_bar(d, op, mods, args, where) -> Fn:
    """bar.sync B [, N] / barrier.sync[.aligned] B [, N]: the warps of a context run in lockstep,
    so the barrier's work here is to end the race-detection window and to refuse a barrier that
    would hang: barrier 0 without a count waits for every live thread of the CTA (also those of
    other contexts, `_Machine.parked`); with a count N (named barriers 0-15, a warp-specialized
    kernel's consumers) exactly N threads of each CTA that reaches it must, and only their marks end."""
    head = op.opcode.data.split(".")[0]
    if head == "bar" and mods == ["red", "or", "pred"]:
        return _dec_bar_red_or(d, op, args, where)
    if head == "bar" and mods == ["warp", "sync"]:
        return _dec_bar_warp(d, op, args, where)
    if mods not in (["sync"], ["sync", "aligned"]) or (head == "bar" and mods != ["sync"]):
        raise EmulationError(f"{where}: expected bar.sync B or barrier.sync[.aligned] B (optionally ', N')")
    ops = [d.operand(a, op) for a in args]
    if len(ops) not in (1, 2) or not all(isinstance(x, _Imm) and not isinstance(x.value, float) for x in ops) \
            or not 0 <= ops[0].value < 16:
        raise EmulationError(f"{where}: only a constant barrier 0-15 with a constant thread count is supported")
    count = int(ops[1].value) if len(ops) == 2 else None
    if count is not None and (count < 32 or count % 32):
        raise EmulationError(f"{where}: a barrier's thread count is a multiple of 32, not {count}")

    def run(m, mask):
        live = np.ones(m.T, bool) if m.active is None else m.active
        there = live if mask is None else mask
        arrived = there.reshape(m.nctas, -1).sum(1)
        if count is not None and count != m.per_cta:
            partial = (arrived > 0) & (arrived != count)
            if partial.any():
                c = int(np.flatnonzero(partial)[0])
                raise EmulationError(f"{where}: {int(arrived[c])} threads of CTA {m.cta0 + c} reach barrier "
                                     f"{int(ops[0].value)}, which waits for {count} (a barrier that never fills "
                                     "hangs the GPU)")
            if m.shared is not None:
                m.shared.publish(there)
            return
        alive = live if m.parked is None else live | m.parked
        expected = alive.reshape(m.nctas, -1).sum(1)
        partial = (arrived > 0) & (arrived < expected)
        if partial.any():
            c = int(np.flatnonzero(partial)[0])
            missing = int(np.flatnonzero(alive.reshape(m.nctas, -1)[c] & ~there.reshape(m.nctas, -1)[c])[0])
            raise EmulationError(f"{where}: only {int(arrived[c])} of the {int(expected[c])} live threads of the CTA of "
                                 f"{m.thread(c * m.per_cta + missing)} reach this barrier (a barrier in divergent code "
                                 "hangs the GPU)")
        if m.shared is not None:
            m.shared.barrier(None if mask is None else arrived > 0)

    return run
