"""A 2-CTA cluster in the emulator (`cluster_ops`: `.reqnctapercluster`, `%cluster_ctarank`,
`mapa`, `barrier.cluster`; a multicast TMA copy in `tma_ops`, an arrival at a peer's mbarrier in
`mbarrier_ops`): tools/cluster_probe.py's kernel against its expected bytes (the variants an H200
ran byte for byte: tests/gpu/test_tma_gpu.py), and the kernels a wrong protocol makes."""

from __future__ import annotations

import pytest
from tilemma.compiler.verify.emulator import EmulationError, emulate

from tools import cluster_probe as C


@pytest.mark.parametrize("variant", C.VARIANTS, ids=lambda v: "x".join(map(str, v)))
def test_probe_matches_the_expected_bytes(variant):
    assert C.run(variant, "emulator") == 0


def test_each_cta_writes_half_of_every_stage():
    """The two boxes differ (each CTA's half is a different column range), so a copy that landed in
    its own CTA alone, or twice in the same place, shows."""
    args, want, _ = C.case(*C.VARIANTS[0])
    box = args[1].box_bytes
    assert (want[:box] != want[box:]).mean() > 0.5


def _probe(variant=C.VARIANTS[0]):
    args, _, _ = C.case(*variant)
    return C.probe_ptx(args[1].box_bytes, variant[1]), args


@pytest.mark.parametrize("old, new, message", [
    # the copy lands in the issuing CTA alone: the peer waits for bytes that never come
    ("mov.b16 %rs1, 3;", "mov.b16 %rs1, 0;\nmov.b16 %rs1, 1;\n", "deadlock"),
    # no arrival at the peer's barrier: each CTA waits for 32 that never come
    ("@%p3 mbarrier.arrive.shared::cluster.b64 _, [%r18];", "", "deadlock"),
    ("mapa.shared::cluster.u32 %r18, %r11, %r17;", "mapa.shared::cluster.u32 %r18, %r11, 2;", "rank 2 of a cluster of 2"),
    # the threads read the boxes (their own CTA's half and the peer's) without waiting for either barrier
    ("mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;\n@!%p2 bra.uni $wait;\n$wait2:\n"
     "mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r11], 0;\n@!%p4 bra.uni $wait2;", "", "race"),
], ids=["no-multicast", "no-peer-arrival", "rank-past-cluster", "read-before-the-waits"])
def test_a_wrong_protocol_is_an_error(old, new, message):
    text, args = _probe()
    wrong = text.replace(old, new)
    assert wrong != text
    with pytest.raises(EmulationError, match=message):
        emulate(wrong, C.ENTRY, (2, 1, 1), 128, args, max_steps=40_000)


def test_a_grid_of_part_clusters_is_refused():
    text, args = _probe()
    with pytest.raises(EmulationError, match="not a whole number of its clusters of 2"):
        emulate(text, C.ENTRY, (3, 1, 1), 128, args)


def test_a_cluster_barrier_in_divergent_code_is_refused():
    """Threads that skip the arrive leave the cluster's phase incomplete: the wait never passes."""
    text, args = _probe()
    wrong = text.replace("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\nret;",
                         "@%p1 barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\nret;")
    assert wrong != text
    with pytest.raises(EmulationError, match=r"deadlock: .*barrier\.cluster\.wait"):
        emulate(wrong, C.ENTRY, (2, 1, 1), 128, args)
