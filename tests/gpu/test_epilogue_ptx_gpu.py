"""The epilogue's PTX arithmetic on the GPU against the emulator (`tools/epilogue_probe.py`).

* exact instructions (IEEE arithmetic, comparisons, conversions, packing, narrow loads/stores):
  the GPU's output words are bit-identical to the emulator's on every input - the NaN bits
  included;
* approximate instructions (`ex2/lg2/tanh/rcp/rsqrt/sqrt .approx`): the GPU's results lie within
  the error the PTX ISA states; how often they equal the emulator's model is recorded;
* the `scalar_math` sequences: the GPU's results lie within `scalar_math.bound` - each bound is
  proven on the hardware as well as in the emulator.

Run with `pytest -q -s` to see the table at the end (`python -m tools.epilogue_probe --out DIR`
prints the same table and writes it to DIR).
"""

from __future__ import annotations

import pytest
from tilemma.compiler.runtime import cuda_runtime
from tools import epilogue_probe as EP

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]

RESULTS: list[EP.Result] = []


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    if RESULTS:
        print("\n" + EP.HEADER)
        print("\n".join(r.row() for r in RESULTS))


def _check(r: EP.Result) -> None:
    RESULTS.append(r)
    assert not r.error, r.error
    if r.kind == "exact":
        assert r.identical == 1.0, f"{r.name}: GPU and emulator differ on {100 * (1 - r.identical):.3g}% of " \
                                   f"{r.n} inputs: " + "; ".join(r.examples)
    else:
        assert r.bound_violations == 0, f"{r.name}: {r.bound_violations} results beyond the bound: " + \
                                        "; ".join(r.examples)
        assert r.bound_units is not None and r.bound_units <= 1.0


@pytest.mark.parametrize("probe", EP.PROBES, ids=[p.name for p in EP.PROBES])
def test_probe(probe):
    if cuda_runtime.driver_max_ptx() < (8, 7):
        pytest.skip("the probes are PTX 8.7; the driver's JIT is older")
    _check(EP.run_probe(probe, gpu=True))
