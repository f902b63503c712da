"""The tensor-memory accelerator's tile copy on the GPU: tools/tma_probe.py's kernel, and
tools/cluster_probe.py's 2-CTA cluster (multicast, arrivals at the peer's barrier), each variant in
a process of its own (a fault would end this one's context), every byte as `expected` says, which
the emulator reproduces (tests/test_emulator_tma.py, tests/test_emulator_cluster.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tilemma.compiler.runtime import cuda_runtime

from tools import cluster_probe as C
from tools import tma_probe as P

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]


_PROBES = [("tools.tma_probe", v) for v in P.VARIANTS] + [("tools.cluster_probe", v) for v in C.VARIANTS]


@pytest.mark.skipif(cuda_runtime.gpu_available() and cuda_runtime.device_arch() not in ("sm_90", "sm_90a"),
                    reason="the probes are sm_90a PTX")
@pytest.mark.parametrize("probe, variant", _PROBES, ids=[f"{m.split('.')[1]}-{'x'.join(map(str, v))}" for m, v in _PROBES])
def test_probe(probe, variant):
    """One CTA's box (tma_probe), or a 2-CTA cluster's multicast halves and arrivals at the peer's
    barrier (cluster_probe): every byte as expected."""
    r = subprocess.run([sys.executable, "-m", probe, *map(str, variant)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) == 0, r.stdout
