"""The mma table agrees with ptxas on every target it accepts (compiler/isa_ptxas_check.py).

Slow-ish (about 1.5 minutes on 2 cores): it assembles ~170k candidate lines per target. The
only differences allowed are the ones `isa.EXCEPTIONS` documents, and each of those must still
be needed (a stale exception means ptxas changed and the table should be revisited)."""

from __future__ import annotations

import pytest
from tilemma.compiler.core import isa
from tools.isa_ptxas_check import instruction, module, run_check
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.compiler.core.targets import ALL_TARGETS, PtxVersion, parse_sm

pytestmark = [
    pytest.mark.ptxas,
    pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (PATH, $PTXAS, nvcc wheel)"),
]


@pytest.fixture(scope="module")
def report():
    return run_check()


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
