"""The tensor-memory accelerator's tile copy on the GPU: tools/tma_probe.py's kernel, each variant
in a process of its own (a fault would end this one's context), every byte of the box as
`expected` says, which the emulator reproduces (tests/test_emulator_tma.py)."""

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


@pytest.mark.skipif(cuda_runtime.gpu_available() and cuda_runtime.device_arch() not in ("sm_90", "sm_90a"),
                    reason="the probe is sm_90a PTX")
@pytest.mark.parametrize("variant", P.VARIANTS, ids=lambda v: "x".join(map(str, v)))
def test_tma_probe(variant):
    r = subprocess.run([sys.executable, "-m", "tools.tma_probe", *map(str, variant)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) == 0, r.stdout


@pytest.mark.skipif(cuda_runtime.gpu_available() and cuda_runtime.device_arch() not in ("sm_90", "sm_90a"),
                    reason="the probe is sm_90a PTX")
@pytest.mark.parametrize("variant", C.VARIANTS, ids=lambda v: "x".join(map(str, v)))
def test_cluster_probe(variant):
    """A 2-CTA cluster: multicast halves and arrivals at the peer's barrier, both CTAs' bytes as expected."""
    r = subprocess.run([sys.executable, "-m", "tools.cluster_probe", *map(str, variant)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) == 0, r.stdout
