"""Every sparse `mma` legal on sm_90, on raw registers, on the GPU: the proof of the sparse tables.

* `test_metadata_layout_found_on_gpu`: for one opcode of each (shape, element width) and every
  selector, finds which (lane, nibble) of `e` governs which (row, chunk) of A by flipping one nibble
  per block (`sparse_probe.MetadataDiscovery`) and compares with `sparse_fragments.metadata_layout`.
  The ISA gives the metadata layout only as figures; this reads it off the hardware.
* `test_random_registers`: every (opcode, selector) with random pattern positions and random data,
  three cases each, every D element compared; ignored lanes carry random `e` words.
* `test_plain_sp_accepts_decreasing_metadata`: plain `mma.sp` with half of the chunks stored in
  decreasing column order (not defined for `::ordered_metadata`).

Run with `pytest -q -s` to see the (opcode, selector, verdict) table at the end.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.core import isa
from tilemma.compiler.layouts import sparse_fragments as S
from tools import sparse_probe as P

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"
    ),
]

SM90 = [v for v in isa.legal_variants("sm_90") if v.sparse]
CASES = [(v.opcode, f) for v in SM90 for f in S.sparse_spec(v.shape, v.atype).selectors]
UNORDERED = [
    (v.opcode, f)
    for v in SM90
    if v.sparse == "sp" and S.sparse_spec(v.shape, v.atype).pattern.kept_atoms == 2
    for f in S.sparse_spec(v.shape, v.atype).selectors
]
# One ordered opcode per (shape, element width, type family): the metadata layout's owners.
_seen: dict = {}
for _v in SM90:
    if _v.sparse == "sp::ordered_metadata" and not _v.satfinite:
        _seen.setdefault(
            (_v.shape, S.sparse_spec(_v.shape, _v.atype).elem_bits, _v.family), _v.opcode
        )
DISCOVERY = list(_seen.values())
TRIALS = 3
RESULTS: dict[str, dict[str, list[str]]] = {}  # opcode -> check -> ["0:pass", "1:FAIL", ...]


def _record(opcode: str, check: str, selector: int, ok: bool) -> None:
    RESULTS.setdefault(opcode, {}).setdefault(check, []).append(
        f"{selector}:{'pass' if ok else 'FAIL'}"
    )


def _ptx_version() -> str:
    return "8.7" if cuda_runtime.driver_max_ptx() >= (8, 7) else pytest.skip("driver JIT < PTX 8.7")


def _short(opcode: str) -> str:
    return opcode.replace("sync.aligned.", "").replace("row.col.", "")


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    """(opcode, selector, verdict) for every check, one line per opcode."""
    yield
    if not RESULTS:
        return
    width = max(len(_short(op)) for op in RESULTS)
    print(f"\n{'opcode':<{width}}  selector:verdict per check")
    for op, checks in RESULTS.items():
        print(
            f"{_short(op):<{width}}  " + "  ".join(f"{c} {' '.join(v)}" for c, v in checks.items())
        )
    rows = [x for checks in RESULTS.values() for v in checks.values() for x in v]
    print(f"{len(rows)} (opcode, selector, check) rows, {sum('FAIL' in x for x in rows)} failing")


def _run(ptx: str, args, blocks: int = 1) -> np.ndarray:
    return cuda_runtime.run_kernel(ptx, P.ENTRY, (blocks, 1, 1), (32, 1, 1), args)[-1]


@pytest.mark.parametrize("opcode", DISCOVERY)
def test_metadata_layout_found_on_gpu(opcode):
    v = isa.parse_opcode(opcode)
    problems = []
    for f in S.sparse_spec(v.shape, v.atype).selectors:
        disc = P.MetadataDiscovery(opcode, f)
        found = disc.decode(_run(disc.ptx(ptx_version=_ptx_version()), disc.args(), disc.blocks))
        want = disc.expected_map()
        diff = {key: (found[key], want[key]) for key in want if found[key] != want[key]}
        _record(opcode, "layout", f, not diff)
        if diff:
            seen = {k: x for k, x in found.items() if x is not None}
            problems.append(
                f"f={f}: {len(diff)} (lane, nibble) differ, e.g. {list(diff.items())[:6]}; "
                f"GPU map (live only): {seen}"
            )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("opcode,selector", CASES, ids=[f"{_short(o)}-f{f}" for o, f in CASES])
def test_random_registers(opcode, selector):
    rng = np.random.default_rng(zlib.crc32(f"{opcode}/{selector}".encode()))
    problems = []
    for _ in range(TRIALS):
        case = P.sparse_probe_case(opcode, selector, rng)
        problems += case.mismatches(_run(case.ptx(ptx_version=_ptx_version()), case.args()))
    _record(opcode, "random", selector, not problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "opcode,selector", UNORDERED, ids=[f"{_short(o)}-f{f}" for o, f in UNORDERED]
)
def test_plain_sp_accepts_decreasing_metadata(opcode, selector):
    rng = np.random.default_rng(zlib.crc32(f"unordered {opcode}/{selector}".encode()))
    problems = []
    for _ in range(TRIALS):
        case = P.sparse_probe_case(opcode, selector, rng, unordered=True)
        problems += case.mismatches(_run(case.ptx(ptx_version=_ptx_version()), case.args()))
    _record(opcode, "decreasing", selector, not problems)
    assert not problems, "\n".join(problems)
