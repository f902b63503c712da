"""The mma table agrees with ptxas on every target it accepts (tools/isa_ptxas_check.py).

The audit compares ~170k candidate lines per target. The only differences allowed are the ones
`isa.EXCEPTIONS` documents, and each of those must still be needed (a stale exception means
ptxas changed and the table should be revisited).

Live, the audit is about 5 CPU-minutes of ptxas, so it runs against ptxas' recorded verdicts
for the installed version (tests/data/ptxas_verdicts/, `python -m tools.isa_ptxas_check
--record`; lines the recording lacks are assembled live), and `test_recording_is_ptxas` proves
per target, live, that the recording is still what this ptxas says: every boundary line and a
fixed sample of the rest. Without a recording for this ptxas the whole audit runs live."""

from __future__ import annotations

import fcntl
import pickle

import pytest
from tilemma.compiler.core import isa
from tools import ptxas_verdicts
from tools.isa_ptxas_check import assemble_lines, instruction, module, run_check
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.compiler.core.targets import ALL_TARGETS, PtxVersion, parse_sm

pytestmark = [
    pytest.mark.ptxas,
    pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (PATH, $PTXAS, nvcc wheel)"),
]


# Session-scoped: tests/conftest.py deals test_every_target_checked first, away from the rest of
# this module, and a module-scoped fixture would be built again when they come (the audit twice).
@pytest.fixture(scope="session")
def recording():
    return ptxas_verdicts.load()  # None: no recording for this ptxas, the audit runs live


@pytest.fixture(scope="session")
def report(recording, tmp_path_factory, worker_id):
    """One audit per run: under xdist the first worker to ask computes it and the others read
    it (the tests reading it may be spread over workers)."""
    if worker_id == "master":
        return run_check(assemble=recording or assemble_lines)
    shared = tmp_path_factory.getbasetemp().parent
    saved = shared / "ptxas-audit-report.pickle"
    with open(shared / "ptxas-audit-report.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        result = run_check(assemble=recording or assemble_lines)
        saved.write_bytes(pickle.dumps(result))
        return result


@pytest.mark.parametrize("sm", [t.name for t in ALL_TARGETS])
def test_recording_is_ptxas(recording, sm):
    """Every recorded line at a boundary (accepted, or refused only for operand shapes) and one
    in `SAMPLE_EVERY` of the rest get the same verdict from this ptxas now."""
    if recording is None:
        pytest.skip(f"no recording for ptxas {ptxas_verdicts.ptxas_version()}: the audit ran live")
    checked, wrong = recording.spot_check(parse_sm(sm))
    assert checked > 1000
    assert not wrong, f"{len(wrong)} recorded verdicts are not this ptxas' (re-record):\n" + "\n".join(wrong[:20])


def test_every_target_checked(report):
    assert [t.target for t in report.targets] == list(ALL_TARGETS)
    for t in report.targets:
        assert t.candidates > 100_000
        assert t.table_legal == len(isa.legal_variants(t.target, "9.0"))
        assert t.ptx_checked >= t.table_legal  # each legal variant at its min PTX


def test_zero_disagreements_outside_exceptions(report):
    assert report.disagreements == [], report.summary()
    for t in report.targets:
        assert t.agree == t.candidates
        assert t.ptx_agree == t.ptx_checked


def test_every_exception_is_still_needed(report):
    assert report.stale_exceptions == []
    used = {k for t in report.targets for k in t.by_exception}
    assert used == {d.name for d in isa.EXCEPTIONS}


def test_ptx_9_1_variants_are_listed_as_unverifiable(report):
    assert report.unverifiable == sorted(
        v.opcode for v in isa.all_variants() if v.min_ptx > PtxVersion(9, 0)
    )
    assert report.unverifiable  # .scale_vec::4X with .ue8m0 for mxf4nvf4


def test_a_wrong_register_count_is_caught():
    """The check's premise: ptxas refuses a legal opcode with one register too few."""
    v = isa.parse_opcode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    good = instruction(v)
    short = good.replace("{%h0, %h1, %h2, %h3}", "{%h0, %h1}", 1)
    assert short != good
    t = parse_sm("sm_90")
    assert run_ptxas(module(t, PtxVersion(9, 0), [good])[0], t.name).ok
    bad = run_ptxas(module(t, PtxVersion(9, 0), [short])[0], t.name)
    assert not bad.ok and "vector size mismatch" in bad.log


def test_a_pickled_variant_is_found_in_a_fresh_process():
    """MmaVariant caches its hash; str hashes differ per process, so the cached value must not
    travel in a pickle (reports go between xdist workers that way)."""
    import os
    import subprocess
    import sys

    v = isa.all_variants()[0]
    hash(v)  # cache it here
    code = (
        "import pickle, sys; from tilemma.compiler.core import isa; "
        "v = pickle.loads(sys.stdin.buffer.read()); "
        "assert v.is_defined and {v: 1}[isa.all_variants()[0]] == 1"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code], input=pickle.dumps(v), env=env, check=True)
