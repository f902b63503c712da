"""The tensor-memory accelerator's tile copy (sm_90): `cp.async.bulk.tensor.Nd.shared::cluster
.global.tile.mbarrier::complete_tx::bytes [dst], [map, {c0, ..}], [bar]` copies one box of a
global array, described by a tensor map (`compiler/runtime/tensor_map.py`; here the emulator's
encoding of it, passed as the kernel's `.align 64 .b8 NAME[128]` parameter), to shared memory
at `dst`, and completes its bytes on the mbarrier `bar` (`mbarrier_ops`: the phase that awaits
them completes once they and its arrivals are in).

The box is the map's box (elements a dimension, innermost first) at coordinates c0, c1, ..
(elements; may be negative or run past the array: those elements are written as zeros). It is
written densely, innermost first, from `dst` (128-byte aligned, 1024 swizzled); with the 128-byte
swizzle each 16-byte granule's address bits 4-6 are XORed with bits 7-9, with the 64-byte one bits
4-5 with bits 7-8 (on the absolute shared address, as wgmma reads them). The copy lands at once
here, but its bytes count as in flight (reading them, or writing them, is an error) until the
phase it completes on completes; writing bytes a wgmma.mma_async still reads is an error too.
With `.multicast::cluster` and a 16-bit CTA mask (`cluster_ops`), the box goes to `dst` in every
CTA of the cluster whose rank's bit is set, each completing its bytes on its own barrier at
`bar`'s offset; the issuing thread counts as taking part in those barriers' phases (what it
wrote is ordered before their waiters). Modelled: the tile mode, swizzle none, 64 or 128 bytes,
each executing thread's own copy (no cache hints).
"""

from __future__ import annotations

import re

import numpy as np

from tilemma.compiler.runtime.tensor_map import MAP_BYTES, decode
from tilemma.compiler.verify.emulator.machine import (
    _OFFSET_MASK, _PARAM_SPACE, _SHARED_BASE, _SPACE_SHIFT, MAP_PARAM, EmulationError, _per_thread,
)
from tilemma.compiler.verify.emulator.cluster_ops import gone_check
from tilemma.compiler.verify.emulator.mbarrier_ops import _barriers
from tilemma.compiler.verify.emulator.memory_ops import _shared_addresses, _shared_of, _threads
from tilemma.compiler.verify.emulator.operands import Fn, _Addr, _reader

_OPCODE = re.compile(r"^cp\.async\.bulk\.tensor\.([1-5])d\.shared::(cluster|cta)\.global\.tile"
                     r"\.mbarrier::complete_tx::bytes(\.multicast::cluster)?$")
_SWIZZLE_ROWS = {0: 0, 64: 3, 128: 7}  # the address bits 7.. each swizzle XORs into the granule bits 4..
_TENSOR = re.compile(r"^\[\s*(%\w+)\s*,\s*\{([^}]*)\}\s*\]$")


def _dec_tma(d, op, mods, args, where) -> Fn:
    match = _OPCODE.match(op.opcode.data)
    multicast = bool(match and match.group(3))
    if not match or len(args) != 3 + multicast:
        raise EmulationError(f"{where}: expected cp.async.bulk.tensor.Nd.shared::cluster.global.tile"
                             ".mbarrier::complete_tx::bytes[.multicast::cluster] [dst], [map, {coordinates}], [mbar]"
                             "[, ctaMask] (no cache hint)")
    if d.target is not None and not d.target.startswith("sm_9") and not d.target.startswith("sm_1"):
        raise EmulationError(f"{where}: cp.async.bulk.tensor needs sm_90 or newer, the module targets {d.target}")
    rank = int(match.group(1))
    tensor = _TENSOR.match(args[1])
    if not tensor:
        raise EmulationError(f"{where}: the tensor operand is [map, {{c0, ..}}] (a 64-bit register holding the "
                             "map's address, then the coordinates)")
    coords = [x.strip() for x in tensor.group(2).split(",")]
    if len(coords) != rank:
        raise EmulationError(f"{where}: a {rank}d copy takes {rank} coordinates, not {len(coords)}")
    dst, bar = d.operand(args[0], op), d.operand(args[2], op)
    if not isinstance(dst, _Addr) or not isinstance(bar, _Addr):
        raise EmulationError(f"{where}: the destination and the mbarrier go in brackets")
    read_dst, read_bar = _shared_addresses(d, dst, where), _shared_addresses(d, bar, where)
    read_map = _reader(d, d.operand(tensor.group(1), op), "u64", where)
    read_coords = [_reader(d, d.operand(c, op), "s32", where) for c in coords]
    read_mask = _reader(d, d.operand(args[3], op), "u16", where) if multicast else None
    names = [n for _, n in d.params]
    kinds = [t for t, _ in d.params]

    def run(m, mask):
        threads = _threads(m, mask)
        if not threads.size:
            return
        sh = _shared_of(m, where)
        pick = (lambda v: _per_thread(v, m.T)[threads])  # noqa: E731
        dsts, bars, maps = pick(read_dst(m)), pick(read_bar(m)), pick(read_map(m)).astype(np.uint64)
        cs = np.stack([pick(r(m)).astype(np.int64) for r in read_coords], 1)
        masks = pick(read_mask(m)).astype(np.int64) if read_mask is not None else None
        for k, t in enumerate(threads):
            own = int(t) // m.per_cta
            ctas = [own]
            if masks is not None:
                mine = int(m.specials["%cluster_ctarank"][t])
                if not 0 < masks[k] < 1 << m.prog.cluster:
                    raise EmulationError(f"{where}: {m.thread(int(t))}: CTA mask {int(masks[k]):#x} names no CTA, or "
                                         f"one past the cluster's {m.prog.cluster}")
                ctas = [own - mine + r for r in range(m.prog.cluster) if masks[k] >> r & 1]
            gone_check(m, where, np.array(ctas), np.full(len(ctas), t), "copies into the shared memory of")
            for cta in ctas:
                _copy(m, sh, where, int(t), int(dsts[k]), int(bars[k]), int(maps[k]), cs[k], rank, names, kinds, cta)

    return run


def _copy(m, sh, where: str, t: int, dst: int, bar: int, address: int, coords: np.ndarray, rank: int,
          names: list[str], kinds: list[str], cta: int) -> None:
    """Thread t's copy: the box at `coords` of the map at `address` to shared `dst` of CTA `cta`
    of the chunk (its own, or a peer's), completing on that CTA's barrier at `bar`."""
    who = m.thread(t)
    index = (address & _OFFSET_MASK) >> 8
    if address >> _SPACE_SHIFT != _PARAM_SPACE + 1 or address & 0xFF or index >= len(names) \
            or kinds[index] != MAP_PARAM:
        raise EmulationError(f"{where}: {who}: {address:#x} is not the address of a tensor-map parameter "
                             "(mov.b64 %rd, NAME; cvta.param.u64 %rd, %rd)")
    raw = bytes(m.params[names[index]][:MAP_BYTES])
    base, tmap = decode(raw)
    if len(tmap.dims) != rank:
        raise EmulationError(f"{where}: {who}: a {rank}d copy of a {len(tmap.dims)}-dimensional tensor map")
    if tmap.swizzle not in _SWIZZLE_ROWS:
        raise EmulationError(f"{where}: {who}: swizzle {tmap.swizzle} is not modelled (none, 64 or 128 bytes)")
    align = 1024 if tmap.swizzle else 128  # (a swizzled box: the swizzle's whole atom of 8 rows)
    if (dst - _SHARED_BASE) % align:
        raise EmulationError(f"{where}: {who}: the destination {dst:#x} is not {align}-byte aligned")
    eb = tmap.element_bytes
    # every element of the box: its coordinates (innermost first), in the order it is written
    grids = np.meshgrid(*[np.arange(b) for b in reversed(tmap.box)], indexing="ij")
    at = np.stack([g.ravel() for g in reversed(grids)], 1) + coords[None, :]
    inside = np.all((at >= 0) & (at < np.array(tmap.dims)[None, :]), 1)
    strides = np.array((eb, *tmap.strides), np.int64)
    arg = (base >> _SPACE_SHIFT) - 1
    buf = m.memory.bufs.get(arg)
    if buf is None:
        raise EmulationError(f"{where}: {who}: the tensor map's address {base:#x} is no argument buffer")
    offsets = (base & _OFFSET_MASK) + (np.where(inside[:, None], at, 0) * strides).sum(1)
    if inside.any() and int(offsets[inside].max()) + eb > m.memory.sizes[arg]:
        raise EmulationError(f"{where}: {who}: the tensor map reaches byte {int(offsets[inside].max()) + eb} of "
                             f"argument {arg}, which holds {m.memory.sizes[arg]}")
    values = np.zeros((at.shape[0], eb), np.uint8)
    values[inside] = buf[offsets[inside][:, None] + np.arange(eb)]
    logical = dst + np.arange(at.shape[0] * eb)
    if tmap.swizzle:  # granule bits 4.. XORed with address bits 7.. (3 of them at 128 bytes, 2 at 64)
        logical = logical ^ (((logical >> 7) & _SWIZZLE_ROWS[tmap.swizzle]) << 4)
    there = cta * m.per_cta + t % m.per_cta  # (a thread of the CTA written, for the range check)
    idx = sh.bytes(m, where, "cp.async.bulk.tensor write", logical, np.full(logical.size, there), 1).ravel()
    sh.check_unheld(m, where, "cp.async.bulk.tensor writes", idx[:, None], np.full(idx.size, t))
    if sh.inflight[idx].any():
        raise EmulationError(f"{where}: {who} copies to shared address {sh.address(int(idx[sh.inflight[idx]][0]))}, "
                             "where an earlier copy has not landed yet")
    sh.data[idx] = values.ravel()
    sh.inflight[idx] = True
    sh.writer[idx] = t  # (so that only the threads its barrier's wait orders after it read them)
    barriers = _barriers(m)
    [(o, _)] = barriers._at(where, np.array([bar]), np.array([t]))
    if cta != t // m.per_cta:
        barriers.peer(o, cta, t)
    barriers.complete_tx(where, o, cta, idx.size, idx)
