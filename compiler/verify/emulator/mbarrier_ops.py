"""mbarrier objects in shared memory (sm_90: `mbarrier.init`, `mbarrier.arrive`,
`mbarrier.try_wait.parity`): what a warp-specialized kernel's producer and consumer warps meet at
instead of a CTA-wide bar.sync.

A barrier is 8 bytes of shared memory, made by `mbarrier.init` with the arrivals each phase expects.
Each `mbarrier.arrive` counts one arrival a thread; the arrival that brings the count to zero
completes the phase (the phase number goes up by one and the count starts again).
`mbarrier.try_wait.parity p, [bar], parity` is true once the phase of that parity has completed
(the current phase's parity differs from it), so a fresh barrier passes a wait for parity 1 at once.

Threads of different roles run as separate contexts (`program._execute`), each warpgroup of a
role its own, the first ahead of the others (`_execute_apart`: so a stage freed before every
consumer warpgroup has read it is refilled before the lagging one reads it, and the run fails); a
try_wait that is not yet true blocks its context (the kernel's own retry loop would spin), and the
other contexts run until one completes the phase. What the arrivals order: a thread that passes a wait sees what the
threads that arrived in the completed phase wrote and read before arriving (their race marks are
cleared then, as a bar.sync clears everyone's).

Transactions (TMA): `mbarrier.arrive.expect_tx ... state, [bar], tx` arrives and adds tx bytes to
the phase's transaction count, which a `cp.async.bulk.tensor ... mbarrier::complete_tx::bytes`
naming the barrier takes off as its bytes land (`complete_tx`, `tma_ops`); the phase completes
once both its arrivals and its bytes are in (the count may go below zero before its expect_tx,
as the ISA allows). The bytes a copy wrote stay "in flight" (reading them is an error) until the
phase it completes on completes. `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar]` hands a
thread's cp.async copies so far to the barrier in the same way: they land, in flight until the
phase completes, and the thread arrives (one of the arrivals the barrier was made to expect).

A cluster's peers (`cluster_ops`): `mbarrier.arrive[.release.cluster].shared::cluster.b64 _, [a]`
arrives at the barrier a mapped address names in a peer CTA, and a multicast copy completes its
bytes on the barrier at its offset in every CTA it writes. What such a peer thread did before is
ordered before the waiters of the phase it arrived in or completed bytes on, as a local
arrival's is. Not modelled: the `.sem`/`.scope` qualifiers other than the
defaults (release arrivals, acquire waits, CTA scope), `mbarrier.expect_tx` alone and
`cp.async.mbarrier.arrive` without `.noinc`.
"""

from __future__ import annotations

import numpy as np
from tilemma.compiler.verify.emulator.cluster_ops import cluster_target, gone_check
from tilemma.compiler.verify.emulator.machine import _SHARED_BASE, EmulationError, _Machine, _per_thread
from tilemma.compiler.verify.emulator.memory_ops import _shared_addresses, _shared_of, _threads
from tilemma.compiler.verify.emulator.operands import Fn, _Addr, _Imm, _one, _reader, _writer

_SPACES = (["shared::cta", "b64"], ["shared", "b64"])
_REMOTE = (["shared::cluster", "b64"], ["release", "cluster", "shared::cluster", "b64"])  # an arrival at a peer's


class Barriers:
    """The mbarrier objects of a chunk's CTAs, by shared byte offset: per CTA the arrivals a phase
    expects, those still missing, the phase number, and which threads arrived in the current phase
    and in the last completed phase of each parity."""

    def __init__(self, m: _Machine):
        self.m = m
        self.expected: dict[int, np.ndarray] = {}
        self.pending: dict[int, np.ndarray] = {}
        self.phase: dict[int, np.ndarray] = {}
        self.arrived: dict[int, np.ndarray] = {}
        self.published: dict[int, list[np.ndarray]] = {}
        self.tx: dict[int, np.ndarray] = {}  # per CTA the bytes the current phase still awaits
        self.landing: dict[int, list[np.ndarray]] = {}  # shared bytes of copies completing on it, in flight
        # per barrier, per CTA of the chunk: the peer threads (other CTAs of its cluster) that arrived
        # at, or completed bytes on, its current phase, and those of its last completed phase of each parity
        self.peers: dict[int, np.ndarray] = {}
        self.published_peers: dict[int, list[np.ndarray]] = {}
        self.completed = False  # a phase completed since the scheduler last looked

    def _at(self, where: str, addr: np.ndarray, threads: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(offset, threads using the barrier at that offset) groups, after checking alignment and range."""
        sh = _shared_of(self.m, where)
        off = addr - _SHARED_BASE
        bad = (off % 8 != 0) | (off < 0) | (off + 8 > sh.size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise EmulationError(f"{where}: {self.m.thread(int(threads[k]))} names an mbarrier at shared address "
                                 f"{int(addr[k]):#x}, which is not 8-byte aligned inside the CTA's shared memory")
        return [(int(o), threads[off == o]) for o in np.unique(off)]

    def _ctas(self, threads: np.ndarray) -> np.ndarray:
        return np.bincount(threads // self.m.per_cta, minlength=self.m.nctas)

    def init(self, where: str, addr: np.ndarray, threads: np.ndarray, count: np.ndarray) -> None:
        for o, ts in self._at(where, addr, threads):
            per_cta = self._ctas(ts)
            if (per_cta > 1).any():
                c = int(np.flatnonzero(per_cta > 1)[0])
                raise EmulationError(f"{where}: {int(per_cta[c])} threads of one CTA initialize the mbarrier at "
                                     f"{_SHARED_BASE + o:#x} at once")
            counts = count[np.searchsorted(threads, ts)]
            if ((counts < 1) | (counts > (1 << 20) - 1)).any():
                raise EmulationError(f"{where}: an mbarrier's expected count is 1 to 2^20 - 1, not {int(counts.min())}")
            n = self.m.nctas
            for name, fill in (("expected", 0), ("pending", 0), ("phase", 0), ("tx", 0)):
                getattr(self, name).setdefault(o, np.full(n, fill, np.int64))
            self.landing.setdefault(o, [])
            self.arrived.setdefault(o, np.zeros(self.m.T, bool))
            self.published.setdefault(o, [np.zeros(self.m.T, bool), np.zeros(self.m.T, bool)])
            ctas = ts // self.m.per_cta
            self.expected[o][ctas] = counts
            self.pending[o][ctas] = counts
            self.phase[o][ctas] = 0
            self.tx[o][ctas] = 0
            mine = np.repeat(per_cta > 0, self.m.per_cta)
            self.arrived[o][mine] = False
            for p in self.published[o]:
                p[mine] = False

    def _known(self, where: str, o: int, ts: np.ndarray) -> None:
        if o not in self.expected or (self.expected[o][ts // self.m.per_cta] == 0).any():
            raise EmulationError(f"{where}: the mbarrier at {_SHARED_BASE + o:#x} is used before mbarrier.init "
                                 f"(by {self.m.thread(int(ts[0]))})")

    def _peers(self, o: int) -> tuple[np.ndarray, list[np.ndarray]]:
        if o not in self.peers:
            shape = (self.m.nctas, self.m.T)
            self.peers[o] = np.zeros(shape, bool)
            self.published_peers[o] = [np.zeros(shape, bool), np.zeros(shape, bool)]
        return self.peers[o], self.published_peers[o]

    def peer(self, o: int, cta: int, t: int) -> None:
        """Peer thread t (of another CTA) takes part in CTA `cta`'s current phase of barrier `o`."""
        self._peers(o)[0][cta, t] = True

    def arrive(self, where: str, addr: np.ndarray, threads: np.ndarray, tx: np.ndarray | None = None,
               targets: np.ndarray | None = None) -> None:
        """Arrivals of `threads` (with `tx`, each adding that many bytes to its phase's count first;
        with `targets`, each at the barrier of that CTA of the chunk, a peer's or its own)."""
        for o, ts in self._at(where, addr, threads):
            at = ts // self.m.per_cta if targets is None else targets[np.searchsorted(threads, ts)]
            self._known(where, o, at * self.m.per_cta)
            per_cta = np.bincount(at, minlength=self.m.nctas)
            over = per_cta > self.pending[o]
            if over.any():
                c = int(np.flatnonzero(over)[0])
                raise EmulationError(f"{where}: {int(per_cta[c])} threads of CTA {self.m.cta0 + c} arrive at the mbarrier "
                                     f"at {_SHARED_BASE + o:#x}, whose phase awaits {int(self.pending[o][c])} more")
            if tx is not None:
                np.add.at(self.tx[o], at, tx[np.searchsorted(threads, ts)])
            local = at == ts // self.m.per_cta
            self.arrived[o][ts[local]] = True
            if not local.all():
                self._peers(o)[0][at[~local], ts[~local]] = True
            self.pending[o] -= per_cta
            self._complete(o, np.flatnonzero((self.pending[o] == 0) & (per_cta > 0)))

    def arrive_after_copies(self, where: str, addr: np.ndarray, threads: np.ndarray) -> None:
        """cp.async.mbarrier.arrive.noinc: each of `threads` arrives at its barrier once its cp.async
        copies so far have landed; their bytes stay in flight until that barrier's phase completes."""
        sh = _shared_of(self.m, where)
        for o, ts in self._at(where, addr, threads):
            self._known(where, o, ts)
            landed = sh.hand_over(ts)
            if landed.size:
                self.landing[o].append(landed)
        self.arrive(where, addr, threads)

    def complete_tx(self, where: str, o: int, cta: int, nbytes: int, landed: np.ndarray) -> None:
        """A copy of `nbytes` (shared bytes `landed`, in flight until then) completes on the
        barrier at offset `o` of CTA `cta` (its index in the chunk)."""
        self._known(where, o, np.array([cta * self.m.per_cta]))
        self.tx[o][cta] -= nbytes
        self.landing[o].append(landed)
        if self.pending[o][cta] == 0:
            self._complete(o, np.array([cta]))

    def _complete(self, o: int, ctas: np.ndarray) -> None:
        """Phases of `ctas` whose arrivals are all in: those whose bytes are too complete."""
        sh = self.m.shared
        for c in ctas:
            if self.tx[o][c] != 0:
                continue
            cta = slice(c * self.m.per_cta, (c + 1) * self.m.per_cta)
            self.published[o][int(self.phase[o][c]) & 1][cta] = self.arrived[o][cta]
            self.arrived[o][cta] = False
            if o in self.peers:
                self.published_peers[o][int(self.phase[o][c]) & 1][c] = self.peers[o][c]
                self.peers[o][c] = False
            self.phase[o][c] += 1
            self.pending[o][c] = self.expected[o][c]
            if sh is not None:  # the copies that completed on this phase land
                size = sh.size
                keep = []
                for idx in self.landing[o]:
                    mine = (idx // size) == c
                    sh.inflight[idx[mine]] = False
                    if not mine.all():
                        keep.append(idx[~mine])
                self.landing[o] = keep
            self.completed = True

    def try_wait(self, where: str, addr: np.ndarray, threads: np.ndarray, parity: np.ndarray) -> bool:
        """Whether the phase of `parity` has completed for every thread; if so, the threads that
        arrived in it are ordered before the waiters (their race marks cleared)."""
        groups = self._at(where, addr, threads)
        for o, ts in groups:
            self._known(where, o, ts)
            p = parity[np.searchsorted(threads, ts)]
            if ((self.phase[o][ts // self.m.per_cta] & 1) == p).any():
                return False
        sh = _shared_of(self.m, where)
        for o, ts in groups:
            seen = np.zeros(self.m.T, bool)
            for p in np.unique(parity[np.searchsorted(threads, ts)]):
                seen |= self.published[o][int(p)]
                if o in self.published_peers:  # and the peers that took part in the waiters' CTAs' phases
                    seen |= self.published_peers[o][int(p)][np.unique(ts // self.m.per_cta)].any(0)
            sh.publish(seen)
        return True


def _barriers(m: _Machine) -> Barriers:
    if m.mbarriers is None:
        m.mbarriers = Barriers(m)
    return m.mbarriers


def _dec_mbarrier(d, op, mods, args, where) -> Fn:
    """mbarrier.init / arrive / try_wait.parity on `.shared::cta` barriers (see the module)."""
    kind, rest = (mods[0], mods[1:]) if mods else ("", [])
    if kind == "try_wait" and rest[:1] == ["parity"]:
        kind, rest = "try_wait.parity", rest[1:]
    if kind == "arrive" and rest[:1] == ["expect_tx"]:
        kind, rest = "arrive.expect_tx", rest[1:]
    for default in (["release", "cta"], ["acquire", "cta"]):  # the default .sem and .scope, spelled out
        if rest[:2] == default:
            rest = rest[2:]
    remote = kind == "arrive" and rest in _REMOTE
    if kind not in ("init", "arrive", "arrive.expect_tx", "try_wait.parity") or (rest not in _SPACES and not remote):
        raise EmulationError(f"{where}: expected mbarrier.init, mbarrier.arrive[.expect_tx] or "
                             "mbarrier.try_wait.parity .shared::cta.b64 (the default release/acquire CTA-scope forms), "
                             "or mbarrier.arrive[.release.cluster].shared::cluster.b64 _, [addr]")
    if remote:
        return _dec_arrive_remote(d, op, args, where)
    if kind == "init":
        addr, count = _one(d, op, args, 2, where)
        reads_count = _reader(d, count, "u32", where)
    elif kind == "arrive":
        state, addr = _one(d, op, args, 2, where)
        write_state = _writer(state, where)
    elif kind == "arrive.expect_tx":
        state, addr, tx = _one(d, op, args, 3, where)
        write_state, read_tx = _writer(state, where), _reader(d, tx, "u32", where)
    else:
        done, addr, parity = _one(d, op, args, 3, where)
        write_done, read_parity = _writer(done, where), _reader(d, parity, "u32", where)
        if isinstance(parity, _Imm) and parity.value not in (0, 1):
            raise EmulationError(f"{where}: a phase parity is 0 or 1")
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: the mbarrier's address goes in brackets")
    saddr = _shared_addresses(d, addr, where)

    def at(m, mask) -> tuple[np.ndarray, np.ndarray]:
        threads = _threads(m, mask)
        return (saddr(m) if mask is None else saddr(m)[mask]), threads

    if kind == "init":
        def run_init(m, mask):
            a, threads = at(m, mask)
            c = _per_thread(reads_count(m), m.T).astype(np.int64)
            _barriers(m).init(where, a, threads, c if mask is None else c[mask])
        return run_init
    if kind in ("arrive", "arrive.expect_tx"):
        def run_arrive(m, mask):
            a, threads = at(m, mask)
            tx = None
            if kind == "arrive.expect_tx":
                tx = _per_thread(read_tx(m), m.T).astype(np.int64)
                tx = tx if mask is None else tx[mask]
            _barriers(m).arrive(where, a, threads, tx)
            write_state(m, np.zeros(m.T, np.uint64), mask)  # the state token: opaque, never read here
        return run_arrive

    def run_wait(m, mask) -> bool:
        a, threads = at(m, mask)
        p = _per_thread(read_parity(m), m.T).astype(np.int64)
        p = p if mask is None else p[mask]
        if (p > 1).any():
            raise EmulationError(f"{where}: a phase parity is 0 or 1, not {int(p.max())}")
        if not _barriers(m).try_wait(where, a, threads, p):
            return False
        write_done(m, np.ones(m.T, bool), mask)
        return True

    return run_wait


def _dec_arrive_remote(d, op, args, where) -> Fn:
    """mbarrier.arrive[.release.cluster].shared::cluster.b64 _, [a]: an arrival at the barrier at
    `.shared::cluster` address `a` (a peer's through `mapa`, or the CTA's own), no state returned."""
    if len(args) != 2 or args[0].strip() != "_":
        raise EmulationError(f"{where}: a .shared::cluster arrival returns no state: mbarrier.arrive[.release.cluster]"
                             ".shared::cluster.b64 _, [addr]")
    addr = d.operand(args[1], op)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: the mbarrier's address goes in brackets")
    saddr = _shared_addresses(d, addr, where)

    def run(m, mask):
        threads = _threads(m, mask)
        if not threads.size:
            return
        local, targets = cluster_target(m, where, saddr(m)[threads], threads)
        gone_check(m, where, targets, threads, "arrives at an mbarrier of")
        _barriers(m).arrive(where, local, threads, targets=targets)

    return run


def _dec_cp_arrive(d, op, args, where) -> Fn:
    """cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar]: the thread arrives at `bar` once its
    cp.async copies so far have landed (`Barriers.arrive_after_copies`)."""
    if op.opcode.data not in ("cp.async.mbarrier.arrive.noinc.shared::cta.b64", "cp.async.mbarrier.arrive.noinc.shared.b64"):
        raise EmulationError(f"{where}: expected cp.async.mbarrier.arrive.noinc.shared::cta.b64 [mbar] (the .noinc form: "
                             "an arrival the barrier's count expects)")
    (addr,) = _one(d, op, args, 1, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: the mbarrier's address goes in brackets")
    saddr = _shared_addresses(d, addr, where)

    def run(m, mask):
        threads = _threads(m, mask)
        if threads.size:
            _barriers(m).arrive_after_copies(where, saddr(m)[threads], threads)

    return run
