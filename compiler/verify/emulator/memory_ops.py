"""Per-thread memory instructions: ld and st (global, .param and .shared, scalar and .v2/.v4)
and atom.min/max. Global accesses are bounds- and alignment-checked against the argument
buffers, shared ones against the CTA's shared memory and its race marks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tilemma.compiler.verify.emulator.machine import _TYPES, _UNSIGNED, EmulationError, _Machine, _per_thread, _Shared
from tilemma.compiler.verify.emulator.operands import Fn, _Addr, _Reg, _Vec, _one, _reader, _writer


_CACHE_OPS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc"}


def _mem_type(mods: list[str], where: str, what: str) -> tuple[str, int, str]:
    """(space, vector length, type) of ld/st qualifiers; generic addresses are global ones here."""
    rest = [x for x in mods if x not in _CACHE_OPS]
    space = "global"
    if rest and rest[0] in ("global", "param", "shared", "shared::cta"):
        space = rest.pop(0).split("::")[0]
    n = int(rest.pop(0)[1]) if rest and rest[0] in ("v2", "v4") else 1
    if len(rest) != 1 or rest[0] not in _TYPES or rest[0] == "pred":
        raise EmulationError(f"{where}: expected {what}[.global|.shared|.param][.v2|.v4].TYPE")
    return space, n, rest[0]


def _fail(m: _Machine, where: str, access: str, mask, position: int, what: str, why: str):
    t = position if mask is None else int(np.flatnonzero(mask)[position])
    raise EmulationError(f"{where}: {what} {access} by {m.thread(t)}: {why}")


def _addresses(d, addr: _Addr, where: str) -> Callable[[_Machine], np.ndarray]:
    if not isinstance(addr.base, _Reg):
        raise EmulationError(f"{where}: a global address needs a register base")
    base = _reader(d, addr.base, "u64", where)
    off = np.uint64(addr.offset & 0xFFFFFFFFFFFFFFFF)
    return lambda m: _per_thread(np.asarray(base(m)) + off, m.T)


def _vector(d, operand, n: int, where: str, what: str) -> list:
    """The n registers of a `{..}` operand (or the one operand when n == 1)."""
    items = list(operand.items) if isinstance(operand, _Vec) else [operand]
    if len(items) != n or (n > 1) != isinstance(operand, _Vec):
        raise EmulationError(f"{where}: {what} needs {'{' + ', '.join(['%r'] * n) + '}' if n > 1 else 'one operand'}")
    return items


def _threads(m: _Machine, mask) -> np.ndarray:
    return np.arange(m.T) if mask is None else np.flatnonzero(mask)


def _put(m: _Machine, writes: list, vals: np.ndarray, dt: np.dtype, mask) -> None:
    """Write column j of vals ([threads executing, n] as `dt`) to register j."""
    for j, write in enumerate(writes):
        v = vals[:, j]
        if mask is None:
            write(m, v, None)
        else:
            full = np.zeros(m.T, dtype=dt)
            full[mask] = v
            write(m, full, mask)


def _dec_ld(d, op, mods, args, where) -> Fn:
    space, n, t = _mem_type(mods, where, "ld")
    dst, addr = _one(d, op, args, 2, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: ld needs an address in brackets")
    dt = _TYPES[t]
    size = dt.itemsize
    if space == "param":
        if not isinstance(addr.base, str) or n > 1:
            raise EmulationError(f"{where}: ld.param reads a parameter by name, one value")
        write = _writer(dst, where)
        name, off = addr.base, addr.offset

        def run_param(m, mask):
            raw = m.params[name]
            if off < 0 or off + size > raw.size:
                raise EmulationError(f"{where}: reads {size} bytes at offset {off} of a {raw.size}-byte parameter")
            write(m, raw[off:off + size].view(dt)[0], mask)

        return run_param
    regs = _vector(d, dst, n, where, "the destination")
    for r in regs:
        if not isinstance(r, _Reg):
            raise EmulationError(f"{where}: the destination must be a register")
        if r.storage.itemsize < size or (r.storage.itemsize > size and dt.kind == "f"):
            raise EmulationError(f"{where}: .{t} does not fit register {r.name} (.{r.rtype})")
    writes = [_writer(r, where) for r in regs]
    unsigned = _UNSIGNED[size]
    if space == "shared":
        saddr = _shared_addresses(d, addr, where)

        def run_shared(m, mask):
            sh = _shared_of(m, where)
            threads = _threads(m, mask)
            a = saddr(m) if mask is None else saddr(m)[mask]
            idx = sh.bytes(m, where, "load", a, threads, n * size)
            sh.touch(m, where, "load", idx, threads, write=False)
            _put(m, writes, sh.data[idx].view(unsigned).view(dt), dt, mask)

        return run_shared
    addresses = _addresses(d, addr, where)
    lanes = np.arange(n)

    def run(m, mask):
        a = addresses(m)
        if mask is not None:
            a = a[mask]
        out = np.empty((a.size, n), dtype=unsigned)
        for s, idx, pos in m.memory.locate(a, n * size, lambda p, what, why: _fail(m, where, "load", mask, p, what, why),
                                           unit=size):
            buf = m.memory.bufs[s].view(unsigned)
            vals = buf[idx][:, None] if n == 1 else buf[idx[:, None] + lanes]
            if pos is None:
                out = vals
            else:
                out[pos] = vals
        _put(m, writes, out.view(dt), dt, mask)

    return run


def _dec_st(d, op, mods, args, where) -> Fn:
    space, n, t = _mem_type(mods, where, "st")
    if space == "param":
        raise EmulationError(f"{where}: st.param is not supported (kernel parameters are read-only)")
    addr, src = _one(d, op, args, 2, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: st needs an address in brackets")
    dt = _TYPES[t]
    size = dt.itemsize
    unsigned = _UNSIGNED[size]
    reads = []
    for s in _vector(d, src, n, where, "the source"):
        if isinstance(s, _Reg) and s.storage.itemsize > size and dt.kind in "iu":
            reads.append(_reader(d, s, "u" + str(8 * size), where))  # store the low bits
        else:
            reads.append(_reader(d, s, t, where))

    def values(m, mask) -> np.ndarray:  # [threads executing, n] as unsigned
        cols = [_per_thread(r(m), m.T).view(unsigned) for r in reads]
        v = cols[0][:, None] if n == 1 else np.stack(cols, 1)
        return v if mask is None else v[mask]

    if space == "shared":
        saddr = _shared_addresses(d, addr, where)

        def run_shared(m, mask):
            sh = _shared_of(m, where)
            threads = _threads(m, mask)
            a = saddr(m) if mask is None else saddr(m)[mask]
            idx = sh.bytes(m, where, "store", a, threads, n * size)
            sh.touch(m, where, "store", idx, threads, write=True)
            sh.data[idx] = np.ascontiguousarray(values(m, mask)).view(np.uint8)

        return run_shared
    addresses = _addresses(d, addr, where)
    lanes = np.arange(n)

    def run(m, mask):
        a = addresses(m)
        v = values(m, mask)
        if mask is not None:
            a = a[mask]
        for s, idx, pos in m.memory.locate(a, n * size, lambda p, what, why: _fail(m, where, "store", mask, p, what, why),
                                           unit=size):
            buf = m.memory.bufs[s].view(unsigned)
            vals = v if pos is None else v[pos]
            if n == 1:
                buf[idx] = vals[:, 0]
            else:
                buf[idx[:, None] + lanes] = vals

    return run


def _shared_of(m: _Machine, where: str) -> _Shared:
    if m.shared is None:
        raise EmulationError(f"{where}: the kernel declares no shared memory (.shared or .extern .shared)")
    return m.shared


def _shared_addresses(d, addr: _Addr, where: str) -> Callable[[_Machine], np.ndarray]:
    """Shared addresses (int64, per thread) of `[buffer+off]` or `[%r+off]` (32- or 64-bit %r)."""
    off = addr.offset
    if isinstance(addr.base, str):
        if addr.base not in d.shared:
            raise EmulationError(f"{where}: {addr.base!r} is not a shared buffer")
        at = np.int64(d.shared[addr.base] + off)
        return lambda m: np.full(m.T, at)
    if addr.base.storage.itemsize not in (4, 8) or addr.base.storage.kind == "b":
        raise EmulationError(f"{where}: a shared address is a 32- or 64-bit register, not {addr.base.name}")
    base = _reader(d, addr.base, "u32" if addr.base.storage.itemsize == 4 else "u64", where)
    return lambda m: _per_thread(np.asarray(base(m)).astype(np.int64) + off, m.T)


def _dec_fence(d, op, mods, args, where) -> Fn:
    """fence.{acq_rel,sc}.{cta,gpu,sys}, fence.proxy.async[.shared::cta] and membar.{cta,gl,sys}:
    nothing to do here. Threads run in lockstep and CTAs (in chunks) in order, so every store is
    seen by every later load; what a missing fence would break on the GPU is not modelled (the
    split-K reduction's ordering is a GPU test's: it compares the GPU's D with this emulator's,
    word for word). The proxy fence orders generic-proxy stores before async-proxy reads (wgmma's
    operands); the emulator has one proxy, in which the stores are already seen."""
    head = op.opcode.data.split(".")[0]
    ok = (mods[:1] in (["acq_rel"], ["sc"]) and mods[1:] in (["cta"], ["gpu"], ["sys"])
          or mods in (["proxy", "async"], ["proxy", "async", "shared::cta"], ["mbarrier_init", "release", "cluster"])) \
        if head == "fence" \
        else mods in (["cta"], ["gl"], ["sys"])
    if not ok or args:
        raise EmulationError(f"{where}: expected fence.acq_rel/.sc.cta/.gpu/.sys, fence.proxy.async[.shared::cta], "
                             "fence.mbarrier_init.release.cluster or membar.cta/.gl/.sys")
    return lambda m, mask: None


def _dec_atom(d, op, mods, args, where) -> Fn:
    """atom[.global].add.u32 and atom[.global].{min,max}.{u32,s32} d, [a], b: d gets the old word.

    Threads of a chunk (and chunks, in CTA order) apply one after another in thread order, so the
    result is that of a sequential loop: every thread's old word is what the earlier threads at
    the same address left (a segmented scan: a prefix sum, or a running min/max). On the GPU the
    order is unspecified; the final memory is the same for any order, the old words are not."""
    rest = mods[1:] if mods[:1] == ["global"] else mods  # generic addresses are global ones here
    if rest == ["add", "u32"]:
        return _atomic(d, op, args, where, "u32", _add_scan)
    if len(rest) != 2 or rest[0] not in ("min", "max") or rest[1] not in ("u32", "s32"):
        raise EmulationError(f"{where}: expected atom[.global].add.u32 or .min/.max.u32/.s32 (other atomics are not "
                             "supported)")
    return _atomic(d, op, args, where, rest[1], _min_max_scan(*rest))


def _add_scan(start: np.ndarray, offered: np.ndarray, first: np.ndarray, last: np.ndarray):
    """Per thread (sorted by address, thread order kept) the word it finds, and per address the
    word left: `start` plus the earlier offers at that address, wrapping at 2^32."""
    offered = offered.astype(np.int64)
    upto = np.cumsum(offered)
    before = upto - offered - np.maximum.accumulate(np.where(first, upto - offered, 0))  # within the address
    seen = (start.astype(np.int64) + before) & 0xFFFFFFFF
    return seen.astype(np.uint32), ((seen[last] + offered[last]) & 0xFFFFFFFF).astype(np.uint32)


def _min_max_scan(how: str, t: str):
    """`_add_scan`'s counterpart for min or max of u32 or s32 words: a running min of keys."""
    dt = _TYPES[t]
    bias = 2**31 if t == "s32" else 0  # order-preserving map of both types onto 0 .. 2**32 - 1

    def key(x: np.ndarray) -> np.ndarray:
        k = x.astype(np.int64) + bias
        return k if how == "min" else (2**32 - 1) - k  # max = min of reversed keys

    def unkey(k: np.ndarray) -> np.ndarray:
        k = k if how == "min" else (2**32 - 1) - k
        return (k - bias).astype(dt)

    def scan(start: np.ndarray, offered: np.ndarray, first: np.ndarray, last: np.ndarray):
        offered, start = key(offered), key(start)
        seg = np.cumsum(first) - 1
        lift = (seg[-1] - seg) << 32  # earlier segments above every later key: one scan for all
        upto = np.minimum.accumulate(offered + lift) - lift  # inclusive running min per address
        before = np.where(first, np.int64(2**32), np.roll(upto, 1))
        return unkey(np.minimum(start, before)), unkey(np.minimum(start[last], upto[last]))

    return scan


def _atomic(d, op, args, where, t: str, scan) -> Fn:
    """An atom of 32-bit words of type `t` whose effect `scan` gives: (words sorted by address, in
    thread order; the offers; the first and last of each address) -> (the word each thread finds,
    the word left at each address)."""
    dst, addr, src = _one(d, op, args, 3, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: atom needs an address in brackets")
    dt = _TYPES[t]
    read, write, addresses = _reader(d, src, t, where), _writer(dst, where), _addresses(d, addr, where)

    def run(m, mask):
        a = addresses(m)
        v = _per_thread(read(m), m.T)
        if mask is not None:
            a, v = a[mask], v[mask]
        old = np.empty(a.size, dtype=dt)
        for s, idx, pos in m.memory.locate(a, 4, lambda p, what, why: _fail(m, where, "atomic", mask, p, what, why)):
            mine = v if pos is None else v[pos]
            buf = m.memory.bufs[s].view(dt)
            order = np.argsort(idx, kind="stable")  # same address together, thread order kept
            at = idx[order]
            first = np.ones(at.size, bool)
            first[1:] = at[1:] != at[:-1]
            last = np.ones(at.size, bool)
            last[:-1] = first[1:]
            seen, left = scan(buf[at], mine[order], first, last)
            buf[at[last]] = left
            got = np.empty(at.size, dtype=dt)
            got[order] = seen
            if pos is None:
                old = got
            else:
                old[pos] = got
        if mask is None:
            write(m, old, None)
        else:
            full = np.zeros(m.T, dtype=dt)
            full[mask] = old
            write(m, full, mask)

    return run
