"""A cluster's CTAs (sm_90, `.reqnctapercluster N, 1, 1`): CTAs that run together and address each
other's shared memory. A chunk of the emulator holds whole clusters (`Program.run`), so a CTA's
peers' shared memory is the chunk's, at their own offsets.

- `%cluster_ctarank` / `%cluster_nctarank`: the CTA's rank in its cluster (its x index mod N) and N.
- `mapa.shared::cluster.u32 d, a, r`: the `.shared::cluster` address of shared address `a` in the
  CTA of rank `r`. Here a cluster address is `CLUSTER_BIT | r << RANK_SHIFT | a` (an address of the
  CTA's own shared window, below `CLUSTER_BIT`, is one of its own CTA's too); `cluster_target` reads
  both back as (shared address, CTA of the chunk).
- `barrier.cluster.arrive[.release|.relaxed][.aligned]` / `barrier.cluster.wait[.acquire][.aligned]`:
  every live thread of the cluster arrives before any passes the wait (a phase: the last arrival
  completes it, which ends the race-detection window of the cluster's CTAs as a bar.sync ends a
  CTA's; a wait blocks its context until its threads' phase has completed).
- `fence.mbarrier_init.release.cluster`: orders the barriers' initialization before the peers' use
  (`memory_ops._dec_fence`: nothing to do in lockstep).

What reaches a peer: an `mbarrier.arrive[.release.cluster].shared::cluster.b64 _, [a]` at a mapped
address (`mbarrier_ops`), and a `cp.async.bulk.tensor ... .multicast::cluster` copy (`tma_ops`).
Apart (`Program._execute_apart`, the default) the ranks of a cluster run as contexts of their own
from the start, rank 0 ahead: a peer that uses a barrier before its CTA made it (a missing cluster
sync after `mbarrier.init`) fails as a use before init, and a CTA whose threads have all ended
while a peer still arrives at its barriers or multicasts into its shared memory is an error
(`gone_check`).
"""

from __future__ import annotations

import numpy as np

from tilemma.compiler.verify.emulator.machine import EmulationError, _Machine, _per_thread
from tilemma.compiler.verify.emulator.memory_ops import _threads
from tilemma.compiler.verify.emulator.operands import Fn, _one, _reader, _writer

CLUSTER_BIT = 1 << 31
RANK_SHIFT = 24
_LOCAL_MASK = (1 << RANK_SHIFT) - 1


def gone_check(m: _Machine, where: str, ctas: np.ndarray, threads: np.ndarray, what: str) -> None:
    """Refuse an access by `threads` to the shared memory of CTAs `ctas` (of the chunk) of which
    one has exited (`_Machine.exited`): on a GPU that memory is gone, or the next CTA's."""
    if m.exited is None:
        return
    gone = m.exited[np.asarray(ctas, np.int64)]
    if gone.any():
        k = int(np.flatnonzero(gone)[0])
        raise EmulationError(f"{where}: {m.thread(int(threads[k]))} {what} CTA {m.cta0 + int(np.asarray(ctas)[k])} of "
                             "its cluster, which has exited (its shared memory is gone)")


def cluster_target(m: _Machine, where: str, addr: np.ndarray, threads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shared address in its CTA, CTA of the chunk) of `.shared::cluster` addresses `addr` used by
    `threads`: a mapped address names its rank's CTA, any other the thread's own."""
    addr = np.asarray(addr, np.int64)
    own = threads // m.per_cta
    mapped = (addr & CLUSTER_BIT) != 0
    rank = (addr >> RANK_SHIFT) & 0x7F
    bad = mapped & (rank >= m.prog.cluster)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise EmulationError(f"{where}: {m.thread(int(threads[k]))} addresses CTA rank {int(rank[k])} of a cluster of "
                             f"{m.prog.cluster}")
    own_rank = m.specials["%cluster_ctarank"][threads].astype(np.int64)
    return np.where(mapped, addr & _LOCAL_MASK, addr), np.where(mapped, own - own_rank + rank, own)


def _dec_mapa(d, op, mods, args, where) -> Fn:
    if mods != ["shared::cluster", "u32"]:
        raise EmulationError(f"{where}: expected mapa.shared::cluster.u32 d, a, rank")
    dst, a, r = _one(d, op, args, 3, where)
    read_a, read_r, write = _reader(d, a, "u32", where), _reader(d, r, "u32", where), _writer(dst, where)

    def run(m, mask):
        local = _per_thread(read_a(m), m.T).astype(np.int64) & ~np.int64(CLUSTER_BIT) & _LOCAL_MASK
        rank = _per_thread(read_r(m), m.T).astype(np.int64)
        threads = _threads(m, mask)
        if threads.size and (rank[threads] >= m.prog.cluster).any():
            k = int(threads[np.flatnonzero(rank[threads] >= m.prog.cluster)[0]])
            raise EmulationError(f"{where}: {m.thread(k)} maps to rank {int(rank[k])} of a cluster of {m.prog.cluster}")
        write(m, (CLUSTER_BIT | (rank << RANK_SHIFT) | local).astype(np.uint32), mask)

    return run


def _dec_barrier_cluster(d, op, mods, args, where) -> Fn:
    kind = mods[1] if len(mods) > 1 else ""
    rest = [x for x in mods[2:] if x != "aligned"]
    if kind not in ("arrive", "wait") or args or rest not in (
            ([], ["release"], ["relaxed"]) if kind == "arrive" else ([], ["acquire"])):
        raise EmulationError(f"{where}: expected barrier.cluster.arrive[.release|.relaxed][.aligned] or "
                             "barrier.cluster.wait[.acquire][.aligned]")

    def arrive(m, mask):
        if m.cluster_arrived is None:
            m.cluster_arrived, m.cluster_passed = np.zeros(m.T, bool), np.zeros(m.T, bool)
        threads = _threads(m, mask)
        m.cluster_arrived[threads] = True
        live = np.ones(m.T, bool) if m.active is None else m.active.copy()
        if m.parked is not None:
            live |= m.parked
        n = m.prog.cluster * m.per_cta  # a cluster's threads, consecutive in the chunk
        done = np.zeros(m.nctas, bool)
        for c in np.unique(threads // n):  # the phase completes once every live thread arrived
            span = slice(c * n, (c + 1) * n)
            if not (live[span] & ~m.cluster_arrived[span]).any():
                m.cluster_passed[span] |= m.cluster_arrived[span]
                m.cluster_arrived[span] = False
                done[c * m.prog.cluster:(c + 1) * m.prog.cluster] = True
        if m.shared is not None and done.any():
            m.shared.barrier(done)

    def wait(m, mask) -> bool:
        """Whether the threads' phase completed (they go on, and wait for the next one next time)."""
        threads = _threads(m, mask)
        passed = np.zeros(m.T, bool) if m.cluster_passed is None else m.cluster_passed
        if not passed[threads].all():
            return False
        passed[threads] = False
        return True

    return arrive if kind == "arrive" else wait
