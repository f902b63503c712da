"""Check the `mma` table in `isa.py` against ptxas, line by line, on every target.

Why: the table is transcribed from prose, and prose has gaps and typos; ptxas is what users'
PTX must get through. So the candidates here are NOT taken from the table: they are cross
products of the qualifier vocabularies (forms x shapes x type pairs x accumulators x layouts x
kinds x block_scale/scale_vec/stype x satfinite x bitops x rounding), in a few slices so each
axis is crossed with the ones it interacts with (~170k lines). Illegal combinations are the
point: they show where each rule's edge is. Each line carries registers sized by the table's
formula, which for undefined combinations is the nearest family's count.

What ptxas accepts: ptxas checks in stages and skips the later ones ("Illegal instruction
types specified for '_mma'") for the whole file once any line fails an early one, and one late
check reports only its first error. So a line counts as accepted only when it was part of a
module that assembled: failing lines are removed and the rest re-assembled until it does.

Per line the table's verdict must match:

* table legal -> ptxas must accept. A wrong register count or type in the table shows up as
  "Argument vector size mismatch" / "Arguments mismatch": a disagreement, never hidden.
* table illegal -> ptxas must refuse, except where an `accepted_like` EXCEPTIONS entry records
  that ptxas also assembles the spelling. When ptxas' only complaints are about operands, the
  refusal may be an artefact of the guessed count, so `_sweep` retries the candidate with
  other register arrangements (every vector size for each of d, a, b, c) and a line that
  assembles is a disagreement.

Then PTX versions: each legal variant must assemble at `min_ptx_on(target)` and be refused one
released version below (when the target itself exists there), and every `.target` at its
measured minimum. Variants needing PTX 9.1 cannot be assembled by ptxas 13.0 (max 9.0): they
are listed as unverifiable, and the cross product checks that ptxas refuses them at 9.0.

`python -m tools.isa_ptxas_check [--sm 90 ...]` prints a per-target summary and
exits 1 on any disagreement. About 5 CPU-minutes for all 23 targets. `--record` also writes
ptxas' verdicts for `tools.ptxas_verdicts`, which the test suite compares the table against.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tilemma.compiler.core import isa
from tilemma.compiler.core.isa import (
    ACC_TYPES,
    BITOPS,
    F8F6F4,
    KINDS,
    LAYOUTS,
    ROUNDINGS,
    SCALE_VECS,
    SHAPES,
    SPARSE_FORMS,
    STYPES,
    MmaVariant,
    Operand,
)
from tilemma.compiler.core.progress import Progress
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.compiler.core.targets import (
    ALL_TARGETS,
    PTX_VERSIONS,
    PTXAS_MAX_PTX,
    PtxVersion,
    SmTarget,
    parse_sm,
    previous_ptx_version,
)

# --------------------------------------------------------------------------------------------
# Candidate space: slices of the qualifier cross product
# --------------------------------------------------------------------------------------------
# Input types grouped by what could plausibly mix; pairs inside a class are all crossed, and
# one representative of each class is crossed with every other class's.
TYPE_CLASSES: dict[str, tuple[str, ...]] = {
    "half": ("f16", "bf16"),
    "tf32": ("tf32",),
    "f64": ("f64",),
    "int8": ("s8", "u8"),
    "int4": ("s4", "u4"),
    "bit": ("b1",),
    "fp8/6/4": F8F6F4,
}
WITHIN_PAIRS = [p for ts in TYPE_CLASSES.values() for p in itertools.product(ts, ts)]
SAME_PAIRS = [(t, t) for ts in TYPE_CLASSES.values() for t in ts]
CROSS_PAIRS = [
    (a[0], b[0])
    for (ca, a), (cb, b) in itertools.permutations(TYPE_CLASSES.items(), 2)
]
ALL_CD = list(itertools.product(ACC_TYPES, ACC_TYPES))  # (dtype, ctype)
DIAG_CD = [(t, t) for t in ACC_TYPES]
SCALE_PAIRS = [("e2m1", "e2m1"), ("e4m3", "e4m3"), ("e5m2", "e3m2"), ("e2m3", "e2m1"),
               ("f16", "f16"), ("s8", "s8")]  # fmt: skip
SCALE_COMBOS = [(False, None, None)] + [
    (True, sv, st) for sv in SCALE_VECS for st in STYPES if st is not None
]


_MNK = {shape: tuple(int(x) for x in re.findall(r"\d+", shape)) for shape in SHAPES}
_DEFAULTS = {f: getattr(isa.MmaVariant(0, 0, 0, "", "", "", ""), f) for f in isa.FIELD_NAMES}


def _variant(form, shape, at, bt, dt, ct, **kw) -> tuple:
    """A candidate as its field values (`isa.FIELD_NAMES` order)."""
    m, n, k = _MNK[shape]
    d = {**_DEFAULTS, "m": m, "n": n, "k": k, "dtype": dt, "atype": at, "btype": bt, "ctype": ct,
         "sparse": form, **kw}  # fmt: skip
    return tuple(d.values())


def candidate_space() -> list[MmaVariant]:
    """Deduplicated union of the slices, in a fixed order (same list on every run).

    The slices overlap (~190k products, ~170k distinct): they are deduplicated as tuples of
    field values, and a variant built only for each distinct one."""
    out: dict[tuple, MmaVariant | None] = {}

    def add(v: tuple) -> None:
        out.setdefault(v, None)

    base = list(itertools.product(SPARSE_FORMS, SHAPES))
    prod = itertools.product
    # 1. type pairs x accumulator pairs, on every form and shape
    for (form, shape), (at, bt), (dt, ct) in prod(base, WITHIN_PAIRS, ALL_CD):
        add(_variant(form, shape, at, bt, dt, ct))
    for (form, shape), (at, bt), (dt, ct) in prod(base, CROSS_PAIRS, DIAG_CD):
        add(_variant(form, shape, at, bt, dt, ct))
    # 2. .satfinite x bit operations on every type pair
    for (form, shape), (at, bt), (dt, ct), sat, bop in prod(
        base, WITHIN_PAIRS, DIAG_CD, (False, True), BITOPS
    ):
        add(_variant(form, shape, at, bt, dt, ct, satfinite=sat, bitop=bop))
    # 3. rounding modifiers
    for (form, shape), (at, bt), (dt, ct), rnd in prod(base, SAME_PAIRS, DIAG_CD, ROUNDINGS):
        add(_variant(form, shape, at, bt, dt, ct, rounding=rnd))
    # 4. layouts (with bit operations so b1 can be legal), and every accumulator pair for f16
    for (form, shape), (al, bl), (at, bt), (dt, ct), bop in prod(
        base, prod(LAYOUTS, LAYOUTS), SAME_PAIRS, DIAG_CD, BITOPS
    ):
        add(_variant(form, shape, at, bt, dt, ct, alayout=al, blayout=bl, bitop=bop))
    for (form, shape), (al, bl), (dt, ct) in prod(base, prod(LAYOUTS, LAYOUTS), ALL_CD):
        add(_variant(form, shape, "f16", "f16", dt, ct, alayout=al, blayout=bl))
    # 5. kind x block_scale x scale_vec x stype, on a few type pairs
    for (form, shape), kind, bs, sv, st, (at, bt) in prod(
        base, KINDS, (False, True), SCALE_VECS, STYPES, SCALE_PAIRS
    ):
        add(_variant(form, shape, at, bt, "f32", "f32", kind=kind, block_scale=bs,
                     scale_vec=sv, stype=st))  # fmt: skip
    # 6. every fp8/fp6/fp4 pair x kinds x the scale combinations x f32/f16 accumulators
    for (form, shape), kind, (bs, sv, st), (at, bt), (dt, ct) in prod(
        base, KINDS, SCALE_COMBOS, prod(F8F6F4, F8F6F4), [("f32", "f32"), ("f16", "f16")]
    ):
        add(_variant(form, shape, at, bt, dt, ct, kind=kind, block_scale=bs, scale_vec=sv,
                     stype=st))  # fmt: skip
    # 7. .satfinite with kinds
    for (form, shape), kind, (at, bt) in prod(base, KINDS[1:], SCALE_PAIRS):
        add(_variant(form, shape, at, bt, "f32", "f32", kind=kind, satfinite=True))
    # and every table variant, so none can escape the check (the table's own objects)
    for v in isa.all_variants():
        key = isa._field_values(v)
        if out.get(key) is None:
            out[key] = v
    return [isa.variant_from_fields(k) if v is None else v for k, v in out.items()]


# --------------------------------------------------------------------------------------------
# PTX text
# --------------------------------------------------------------------------------------------
_POOL = {".f32": "%f", ".f16x2": "%h", ".b32": "%r", ".s32": "%s", ".f64": "%fd",
         ".b64": "%rd", ".u16": "%w"}  # fmt: skip
_POOL_SIZE = 128  # the largest operand of any candidate: f64 A at m16n8k256, 128 registers


def _operand_text(op: Operand) -> str:
    return _registers(op.count, op.reg_type, op.vector, op.immediate)


@functools.cache
def _registers(count: int, reg_type: str | None, vector: bool, immediate: bool) -> str:
    """An operand's text, cached by its fields (hashing the `Operand` itself would cost a
    Python call per operand of ~170k lines)."""
    if immediate:
        return "0"
    assert count <= _POOL_SIZE, (count, reg_type)
    prefix = _POOL[reg_type or ".b32"]
    names = [f"{prefix}{i}" for i in range(count)]
    return "{" + ", ".join(names) + "}" if vector else names[0]


def instruction(v: MmaVariant, operands: tuple[Operand, ...] | None = None) -> str:
    """One PTX line for `v` with registers sized by the table (or by `operands`)."""
    ops = operands if operands is not None else v.operands
    return f"{v.opcode} {_operands_text(ops)}"


_OPERANDS_TEXT: dict[int, tuple[tuple[Operand, ...], str]] = {}


def _operands_text(ops: tuple[Operand, ...]) -> str:
    """The operand list's text and the closing ';', cached by the tuple's identity: the
    table's operand tuples are shared (`isa._operands` is cached: ~170k candidates have ~21k
    distinct lists), and joining them anew for every line cost ~2 s of the audit. The tuple is
    kept in the entry, so its id cannot be reused by another one."""
    hit = _OPERANDS_TEXT.get(id(ops))
    if hit is not None and hit[0] is ops:
        return hit[1]
    text = ", ".join(map(_operand_text, ops)) + ";"
    _OPERANDS_TEXT[id(ops)] = (ops, text)
    return text


def module(target: SmTarget, ptx: PtxVersion, body: list[str]) -> tuple[str, int]:
    """A complete PTX module around `body`; returns (text, line number of body[0])."""
    head = [f".version {ptx}", f".target {target.name}", ".address_size 64",
            ".visible .entry tilemma_isa_check()", "{"]  # fmt: skip
    head += [f".reg {t} {p}<{_POOL_SIZE}>;" for t, p in _POOL.items()]
    return "\n".join(head + body + ["ret;", "}", ""]), len(head) + 1


# "fatal" parse errors stop ptxas reading the file: later lines stay unchecked (and are
# re-assembled by the fixpoint in `assemble_lines`).
_ERR_RE = re.compile(r"<ptx>, line (\d+); (?:error|fatal)\s*:\s*(.*)")
# ptxas messages about operand count/type rather than about the instruction itself.
_SHAPE_ERRORS = (
    "Argument vector size mismatch",
    "Arguments mismatch",
    "Illegal vector size",
    "Vector expected for argument",
)
_TYPE_ERROR = "Arguments mismatch"


def is_shape_error(msg: str) -> bool:
    return msg.startswith(_SHAPE_ERRORS)


ACCEPTED, SHAPES_ONLY, REFUSED = 0, 1, 2  # a line's verdict: `verdict_kind`


def verdict_kind(errs: list[str]) -> int:
    """ACCEPTED (no message), SHAPES_ONLY (refused only for operand counts/types: the sweep's
    boundary) or REFUSED."""
    return ACCEPTED if not errs else SHAPES_ONLY if all(map(is_shape_error, errs)) else REFUSED


def _verdict_kinds(per_line: list[list[str]]) -> np.ndarray:
    """`verdict_kind` of every line.

    Each distinct message list is classified once, found by object identity in numpy: a
    recording answers a target's ~170k lines with a few hundred shared lists, and a Python
    loop over every line of every target would cost seconds."""
    ids = np.fromiter(map(id, per_line), np.uintp, len(per_line))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    kinds = [verdict_kind(e) for e in map(per_line.__getitem__, first.tolist())]
    return np.array(kinds, np.int8)[inverse.reshape(-1)]


def _run_once(target: SmTarget, ptx: PtxVersion, lines: list[str]) -> tuple[bool, dict[int, list[str]]]:
    text, first = module(target, ptx, lines)
    result = run_ptxas(text, target.name)
    named: dict[int, list[str]] = defaultdict(list)
    for m in _ERR_RE.finditer(result.log):
        idx = int(m.group(1)) - first
        if 0 <= idx < len(lines):
            named[idx].append(m.group(2).strip())
    if not result.ok and not named:
        named[-1].append(result.log.strip()[:300])
    return result.ok, named


def assemble_lines(target: SmTarget, ptx: PtxVersion, lines: list[str]) -> list[list[str]]:
    """ptxas error messages per line; an empty list means the line was part of a module that
    assembled to a cubin.

    ptxas checks in stages: when any line fails the early (syntax/operand) checks, the later
    ones ("Illegal instruction types specified for '_mma'") are skipped for the whole file. So
    a line with no message is not yet accepted: failing lines are removed and the rest
    re-assembled until the module assembles. A failure that names no line is bisected."""
    errs: list[list[str]] = [[] for _ in lines]
    pending = list(range(len(lines)))
    while pending:
        ok, named = _run_once(target, ptx, [lines[i] for i in pending])
        if ok:
            break
        if -1 in named:  # no line named: split until one is
            if len(pending) == 1:
                errs[pending[0]] = [f"ptxas failed without naming a line: {named[-1][0]}"]
                break
            mid = len(pending) // 2
            for half in (pending[:mid], pending[mid:]):
                for i, e in zip(half, assemble_lines(target, ptx, [lines[i] for i in half])):
                    errs[i] = e
            break
        for j, msgs in named.items():
            errs[pending[j]] = msgs
        pending = [i for j, i in enumerate(pending) if j not in named]
    return errs


#: What answers for ptxas: (target, PTX version, lines) -> each line's messages ([] = accepted).
Assembler = Callable[[SmTarget, PtxVersion, list[str]], list[list[str]]]


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------
@dataclass
class TargetReport:
    target: SmTarget
    candidates: int = 0
    table_legal: int = 0
    agree: int = 0
    disagree: list[str] = field(default_factory=list)
    swept: int = 0  # illegal candidates refused only for operand shapes, then swept
    by_exception: dict[str, int] = field(default_factory=dict)  # verdicts the ISA text got wrong
    ptx_checked: int = 0
    ptx_agree: int = 0
    ptx_disagree: list[str] = field(default_factory=list)


@dataclass
class Report:
    targets: list[TargetReport]
    unverifiable: list[str]  # variants whose minimum PTX (9.1) this ptxas cannot assemble
    other_disagreements: list[str]  # `.target` minimum PTX, and audit failures of the sweep
    stale_exceptions: list[str]  # EXCEPTIONS entries that decided no verdict
    seconds: float

    @property
    def disagreements(self) -> list[str]:
        out = list(self.other_disagreements)
        for t in self.targets:
            out += [f"{t.target.name}: {d}" for d in t.disagree + t.ptx_disagree]
        return out

    def summary(self) -> str:
        head = (f"{'target':<9}{'candidates':>11}{'legal':>7}{'agree':>8}{'disagree':>9}"
                f"{'swept':>7}{'via-exc':>8}{'ptx-ver':>9}{'ptx-ok':>8}{'ptx-bad':>8}")  # fmt: skip

        def row(name: str, ts: list[TargetReport]) -> str:
            n = lambda f: sum(f(t) for t in ts)
            return (
                f"{name:<9}{n(lambda t: t.candidates):>11}{n(lambda t: t.table_legal):>7}"
                f"{n(lambda t: t.agree):>8}{n(lambda t: len(t.disagree)):>9}"
                f"{n(lambda t: t.swept):>7}{n(lambda t: sum(t.by_exception.values())):>8}"
                f"{n(lambda t: t.ptx_checked):>9}{n(lambda t: t.ptx_agree):>8}"
                f"{n(lambda t: len(t.ptx_disagree)):>8}"
            )

        exc: dict[str, int] = defaultdict(int)
        for t in self.targets:
            for k, c in t.by_exception.items():
                exc[k] += c
        lines = [
            f"mma table vs ptxas: every candidate assembled at PTX {PTXAS_MAX_PTX} per target",
            head,
            *(row(t.target.name, [t]) for t in self.targets),
            row("total", self.targets),
            "",
            _LEGEND,
        ]
        for d in isa.EXCEPTIONS:
            lines.append(f"  EXCEPTIONS {d.name}: {exc.get(d.name, 0)} verdicts")
        for s in self.stale_exceptions:
            lines.append(f"  STALE exception (changed no verdict): {s}")
        if self.unverifiable:
            lines.append(
                f"not checkable with this ptxas ({len(self.unverifiable)} variants need PTX ISA "
                f"9.1, ptxas 13.0 stops at {PTXAS_MAX_PTX}; the cross product confirms ptxas "
                f"refuses them at {PTXAS_MAX_PTX}):"
            )
            lines += [f"  {u}" for u in self.unverifiable]
        dis = self.disagreements
        lines.append(f"disagreements: {len(dis)}   ({self.seconds:.0f} s)")
        lines += [f"  {d}" for d in dis[:200]]
        return "\n".join(lines)


_LEGEND = (
    "legal: candidates the table allows; swept: illegal candidates ptxas refused only for "
    "operand shapes, retried with other register counts; via-exc: verdicts where the ISA text "
    "alone would disagree with ptxas and an EXCEPTIONS entry decides; ptx-ver: min-PTX checks "
    "(assembles at min_ptx, fails one version below)."
)


def _counted(progress: Progress, job):
    """`job`, advancing `progress` (shown on a terminal only) each time it returns."""

    def run(arg):
        out = job(arg)
        progress.advance()
        return out

    return run


VECTOR_SIZES = (1, 2, 4, 8)  # ptxas: "Illegal vector size: 16"
_ALL_COUNTS = list(itertools.product(VECTOR_SIZES, repeat=4))  # every d, a, b, c arrangement


def _generic_lines(v: MmaVariant, counts: list[tuple[int, ...]]) -> list[str]:
    """`instruction(v, ops)` for each count combination: d, a, b, c with those counts in
    untyped registers (.b64 for f64 data, .b32 else: ptxas takes .b32 for every 32-bit operand
    type), the other operands as in the table. Joined from cached operand text, not built as
    `Operand`s: the sweep writes ~300k such lines."""
    types = [".b64" if t == "f64" else ".b32" for t in (v.dtype, v.atype, v.btype, v.ctype)]
    tail = "".join(", " + _operand_text(op) for op in v.operands[4:])
    return [
        f"{v.opcode} {', '.join(_registers(n, r, True, False) for n, r in zip(c, types))}{tail};"
        for c in counts
    ]


def _coordinate_counts(v: MmaVariant) -> list[tuple[int, ...]]:
    """The table's counts (clamped to a vector size), then d, a, b, c each moved alone through
    every vector size ptxas allows.

    ptxas reports one operand-shape message per wrong operand, so moving one operand at a time
    shows, for each operand, which counts silence its message: 13 lines cover all 4^4."""
    base = tuple(min(op.count, 8) for op in v.operands[:4])
    out = [base]
    for i in range(4):
        out += [base[:i] + (n,) + base[i + 1 :] for n in VECTOR_SIZES if n != base[i]]
    return out


def _assemble_many(work: list[tuple[SmTarget, list[str]]], ptx: PtxVersion, batch: int,
                   workers: int, assemble: Assembler = assemble_lines) -> list[list[list[str]]]:
    """Assemble the lines of every (target, lines) item in shared per-target batches; returns
    each item's per-line messages, in order. Each target's lines are one concatenation (items
    in order), cut into batches and the answers sliced back per item."""
    by_target: dict[SmTarget, list[str]] = {}
    spans = []
    for t, ls in work:
        lines = by_target.setdefault(t, [])
        spans.append((t, len(lines), len(lines) + len(ls)))
        lines.extend(ls)
    jobs = [(t, lines[lo:lo + batch]) for t, lines in by_target.items()
            for lo in range(0, len(lines), batch)]  # fmt: skip
    with ThreadPoolExecutor(workers) as pool, Progress("ptxas audit: operand sweep", len(jobs), "batches") as p:
        results = list(pool.map(_counted(p, lambda j: assemble(j[0], ptx, j[1])), jobs))
    errs: dict[SmTarget, list[list[str]]] = {t: [] for t in by_target}
    for (t, _), res in zip(jobs, results):
        errs[t].extend(res)
    return [errs[t][lo:hi] for t, lo, hi in spans]


_RULED_OUT, _LOOK_CLOSER = "ruled out", "look closer"


@functools.cache
def _uniform_verdict(errs: tuple[tuple[str, ...], ...]) -> int | str:
    """Stage 0 of `_sweep` from the messages of the 4 uniform arrangements: the index of the
    first that assembled, else `_LOOK_CLOSER` or `_RULED_OUT`. Cached: ~220k candidates share
    a few hundred distinct answers."""
    ok = [i for i, e in enumerate(errs) if not e]
    if ok:
        return ok[0]
    if any(not is_shape_error(m) for e in errs for m in e):
        return _LOOK_CLOSER  # a reason beyond operands showed up
    if all(any(m.startswith(_TYPE_ERROR) for m in e) for e in errs):
        return _RULED_OUT  # a register-type mismatch that no d/a/b/c count changes
    if sum(1 for e in errs for m in e if not m.startswith(_TYPE_ERROR)) <= 12:
        return _LOOK_CLOSER
    return _RULED_OUT


AUDIT_EVERY = 200  # one ambiguous candidate in this many also gets the full 4^4 grid


def _sweep(
    keys: list[tuple[SmTarget, MmaVariant]], ptx: PtxVersion, batch: int, workers: int,
    assemble: Assembler = assemble_lines,
) -> tuple[list[str | None], list[str]]:
    """For each (target, variant) that ptxas refused only for operand shapes: a line with
    some register arrangement that ptxas accepts, or None when none does (a list in the order
    of `keys`; the stages below refer to candidates by position in `keys`).

    ptxas gives one "Argument vector size mismatch" per operand whose register count it does
    not take, one "Arguments mismatch" per operand whose register type it does not take, and
    vectors only come in sizes 1, 2, 4, 8. The sweep uses untyped registers for d, a, b, c,
    which ptxas takes for every element type of the right width. So:

    * stage 0 assembles the 4 uniform arrangements (all operands 1, all 2, all 4, all 8). A
      type mismatch on every one of them does not depend on the counts: ruled out. If operand
      i takes v_i of the sizes, the lines carry 16 - sum(v_i) size messages in total; more
      than 12 means some operand takes no size at all: ruled out.
    * otherwise stage 1 moves one operand at a time from the table's counts (13 lines) and
      stage 2 assembles the combinations of each operand's best counts.

    The model is audited: every AUDIT_EVERY-th candidate is also assembled with all 256
    arrangements, and one that assembles although the model ruled it out is reported as a
    disagreement."""
    uniform = [(n, n, n, n) for n in VECTOR_SIZES]
    per_variant0: dict[MmaVariant, list[str]] = {}
    for _, v in keys:
        if v not in per_variant0:
            per_variant0[v] = _generic_lines(v, uniform)
    lines0 = [per_variant0[v] for _, v in keys]
    res0 = _assemble_many([(t, ls) for (t, _), ls in zip(keys, lines0)], ptx, batch, workers,
                          assemble)  # fmt: skip
    found: list[str | None] = [None] * len(keys)
    undecided: list[int] = []
    for n, errs in enumerate(res0):
        verdict = _uniform_verdict(tuple(map(tuple, errs)))
        if verdict == _LOOK_CLOSER:
            undecided.append(n)
        elif verdict != _RULED_OUT:
            found[n] = lines0[n][verdict]

    per_variant: dict[MmaVariant, tuple[list[tuple[int, ...]], list[str]]] = {}
    for n in undecided:
        v = keys[n][1]
        if v not in per_variant:
            counts = _coordinate_counts(v)
            per_variant[v] = (counts, _generic_lines(v, counts))
    res1 = _assemble_many([(keys[n][0], per_variant[keys[n][1]][1]) for n in undecided], ptx,
                          batch, workers, assemble)  # fmt: skip
    stage2: dict[int, list[str]] = {}
    for n, errs in zip(undecided, res1):
        tried, lines1 = per_variant[keys[n][1]]
        ok = [ln for ln, e in zip(lines1, errs) if not e]
        if ok:
            found[n] = ok[0]
            continue
        base = tried[0]
        score = {c: sum(map(is_shape_error, e)) for c, e in zip(tried, errs)}
        best, reachable = [], score[base]
        for i in range(4):
            alone = {c[i]: n for c, n in score.items()
                     if all(c[j] == base[j] for j in range(4) if j != i)}  # fmt: skip
            low = min(alone.values())
            reachable -= score[base] - low
            best.append(sorted(n for n, s in alone.items() if s == low))
        if reachable <= 0:
            combos = [c for c in itertools.product(*best) if c not in score][:64]
            stage2[n] = _generic_lines(keys[n][1], combos)

    audit = {
        n: _generic_lines(keys[n][1], _ALL_COUNTS)
        for n in range(0, len(keys), AUDIT_EVERY) if found[n] is None and n not in stage2
    }  # fmt: skip
    work2 = [*stage2.items(), *audit.items()]  # assembled together
    res2 = _assemble_many([(keys[n][0], tried) for n, tried in work2], ptx, batch, workers,
                          assemble)  # fmt: skip
    for (n, tried), errs in zip(stage2.items(), res2[: len(stage2)]):
        ok = [ln for ln, e in zip(tried, errs) if not e]
        if ok:
            found[n] = ok[0]
    broken = []
    for (n, tried), errs in zip(audit.items(), res2[len(stage2) :]):
        ok = [ln for ln, e in zip(tried, errs) if not e]
        if ok:
            broken.append(
                f"{keys[n][0].name}: operand-shape model wrong (ruled out, yet assembles): {ok[0]}"
            )
    return found, broken


def run_check(
    targets: list[SmTarget] | None = None,
    batch: int = 20000,
    workers: int | None = None,
    ptx_checks: bool = True,
    assemble: Assembler = assemble_lines,
) -> Report:
    """Run the whole comparison; ptxas calls go out in parallel batches. `assemble` answers
    for ptxas: live by default, or a recording of its verdicts (`tools.ptxas_verdicts`)."""
    if find_ptxas() is None:
        raise FileNotFoundError("ptxas not found")
    start = time.time()
    targets = list(targets or ALL_TARGETS)
    workers = workers or max(2, os.cpu_count() or 2)
    top = PTXAS_MAX_PTX
    cands = candidate_space()
    lines = [instruction(v) for v in cands]
    # Target-independent facts, computed once: which candidates the table (or the ISA text
    # alone, or an accepted_like exception) can have an opinion about on some target.
    defined = [i for i, v in enumerate(cands) if v.is_defined]
    in_isa_text = [i for i, v in enumerate(cands) if isa.isa_text_defines(v)]
    # (`isa._accepted_like`: the matching accepted_like exceptions, what `ptxas_also_accepts`
    # asks below; matching only those entries, not all of EXCEPTIONS, saves ~3 s)
    quirky = [i for i, v in enumerate(cands) if isa._accepted_like(v)]

    # 1. every candidate on every target, with the table's register counts
    jobs = [(t, lo) for t in targets for lo in range(0, len(lines), batch)]
    with ThreadPoolExecutor(workers) as pool, Progress("ptxas audit: candidates", len(jobs), "batches") as p:
        parts = list(pool.map(_counted(p, lambda j: assemble(j[0], top, lines[j[1]:j[1] + batch])), jobs))
    main: dict[SmTarget, list[list[str]]] = defaultdict(list)
    for (t, _), part in zip(jobs, parts):
        main[t].extend(part)

    # 2. what the table expects ptxas to do: accept exactly the legal variants and the
    #    spellings an accepted_like exception records
    reports = {t: TargetReport(t, candidates=len(cands)) for t in targets}
    expected: dict[SmTarget, set[int]] = {}
    kinds = {t: _verdict_kinds(main[t]) for t in targets}
    ambiguous: list[tuple[SmTarget, MmaVariant]] = []
    ambiguous_index: list[int] = []  # each one's candidate index
    for t in targets:
        rep = reports[t]
        legal = {i for i in defined if cands[i].legal_on(t, top)}
        rep.table_legal = len(legal)
        expected[t] = legal | {i for i in quirky if isa.ptxas_also_accepts(cands[i], t, top)}
        for i in np.flatnonzero(kinds[t] == SHAPES_ONLY).tolist():
            if i not in legal:
                ambiguous.append((t, cands[i]))
                ambiguous_index.append(i)
                rep.swept += 1

    # 3. refused only for operand shapes: is there a register arrangement ptxas accepts?
    found, model_broken = _sweep(ambiguous, top, batch, workers, assemble)
    accepted_late: dict[SmTarget, dict[int, str]] = defaultdict(dict)
    for (t, _), i, line in zip(ambiguous, ambiguous_index, found):
        if line is not None:
            accepted_late[t][i] = line

    # 4. compare, and count the verdicts where the ISA text alone would have been wrong
    #    (as sets of candidate indices: ~170k per target, nearly all refused by both)
    for t in targets:
        rep, want, late = reports[t], expected[t], accepted_late[t]
        isa_ok = {i for i in in_isa_text if isa.isa_text_allows(cands[i], t, top)}
        got = set(np.flatnonzero(kinds[t] == ACCEPTED).tolist()) | late.keys()
        wrong = got ^ want
        rep.agree = len(main[t]) - len(wrong)
        for i in sorted((want ^ isa_ok) - wrong):
            for d in isa.exceptions_matching(cands[i]) or [None]:
                k = d.name if d else "(no exception: table wrong?)"
                rep.by_exception[k] = rep.by_exception.get(k, 0) + 1
        for i in sorted(wrong):
            errs = main[t][i]
            if i in want:
                rep.disagree.append(
                    f"table allows, ptxas refuses: {cands[i].opcode}: {errs[0]}"
                )
            else:
                how = f" accepted as: {late[i]}" if i in late else ""
                rep.disagree.append(
                    f"ptxas accepts, table refuses: {cands[i].opcode} "
                    f"({'; '.join(cands[i].legal(t, top))}){how}"
                )

    # 5. PTX versions: at min_ptx_on(target) it assembles, one released version below it fails
    unverifiable = sorted(v.opcode for v in isa.all_variants() if v.min_ptx > PTXAS_MAX_PTX)
    if ptx_checks:
        _check_min_ptx(targets, reports, batch, workers, assemble)
    other = (check_target_versions(targets) if ptx_checks else []) + model_broken
    stale = _stale_exceptions(reports)
    return Report([reports[t] for t in targets], unverifiable, other, stale,
                  time.time() - start)  # fmt: skip


def _check_min_ptx(
    targets: list[SmTarget], reports: dict[SmTarget, TargetReport], batch: int, workers: int,
    assemble: Assembler = assemble_lines,
) -> None:
    """Each variant legal on a target must assemble at `min_ptx_on(target)` and be refused
    (for a reason other than operand shapes) one released version below, when the target
    itself exists at that version. Batches are grouped by (target, version)."""
    groups: dict[tuple[SmTarget, PtxVersion], list[tuple[MmaVariant, bool]]] = defaultdict(list)
    for t in targets:
        for v in isa.all_variants():
            if not v.supported_on(t) or (need := v.min_ptx_on(t)) > PTXAS_MAX_PTX:
                continue
            groups[(t, need)].append((v, True))
            below = previous_ptx_version(need)
            if below is not None and below >= t.min_ptx:
                groups[(t, below)].append((v, False))
    keys = list(groups)

    def job(k):
        return assemble(k[0], k[1], [instruction(v) for v, _ in groups[k]])

    with ThreadPoolExecutor(workers) as pool, Progress("ptxas audit: minimum PTX", len(keys), "groups") as p:
        results = list(pool.map(_counted(p, job), keys))
    for (t, ver), per_line in zip(keys, results):
        rep = reports[t]
        for (v, should_pass), errs in zip(groups[(t, ver)], per_line):
            rep.ptx_checked += 1
            refused_for_a_reason = bool(errs) and not all(map(is_shape_error, errs))
            if (not errs) if should_pass else refused_for_a_reason:
                rep.ptx_agree += 1
            elif should_pass:
                rep.ptx_disagree.append(f"{v.opcode} refused at its min PTX {ver}: {errs[0]}")
            else:
                rep.ptx_disagree.append(
                    f"{v.opcode} assembles at PTX {ver}, below the table's {v.min_ptx_on(t)}"
                    + (f" ({errs[0]})" if errs else "")
                )


def _stale_exceptions(reports: dict[SmTarget, TargetReport]) -> list[str]:
    """Exceptions that changed no verdict on any checked target (only meaningful when every
    target was checked)."""
    if len(reports) < len(ALL_TARGETS):
        return []
    used = {k for r in reports.values() for k in r.by_exception}
    return [d.name for d in isa.EXCEPTIONS if d.name not in used]


def check_target_versions(targets: list[SmTarget]) -> list[str]:
    """`.target` alone: the measured minimum PTX assembles and the version below does not."""

    def probe(job):
        t, ver = job
        text, _ = module(t, ver, [])
        return run_ptxas(text, t.name).ok

    jobs = []
    for t in targets:
        jobs.append((t, t.min_ptx))
        below = previous_ptx_version(t.min_ptx)
        if below is not None and below in PTX_VERSIONS:
            jobs.append((t, below))
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        oks = list(pool.map(probe, jobs))
    out = []
    for (t, ver), ok in zip(jobs, oks):
        if ver == t.min_ptx and not ok:
            out.append(f".target {t.name} refused at its minimum PTX {ver}")
        if ver != t.min_ptx and ok:
            out.append(f".target {t.name} accepted at PTX {ver}, below the table's {t.min_ptx}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tools.isa_ptxas_check",
        description="Compare the mma table with ptxas on every target.",
    )
    ap.add_argument("--sm", action="append", help="only these targets (repeatable)")
    ap.add_argument("--no-ptx-versions", action="store_true", help="skip min-PTX checks")
    ap.add_argument("--record", action="store_true",
                    help="also write ptxas' verdicts to tests/data/ptxas_verdicts/ for this "
                         "ptxas version (what the test suite replays)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.record and (args.sm or args.no_ptx_versions):
        print("isa_ptxas_check: error: --record records the whole audit (no --sm, no "
              "--no-ptx-versions)", file=sys.stderr)  # fmt: skip
        return 1
    if find_ptxas() is None:
        print("ptxas not found: put it on PATH, set $PTXAS, or pip install nvidia-cuda-nvcc",
              file=sys.stderr)  # fmt: skip
        return 1
    try:
        targets = [parse_sm(s) for s in args.sm] if args.sm else None
    except ValueError as e:
        print(f"isa_ptxas_check: error: {e}", file=sys.stderr)
        return 1
    if args.record:
        from tools import ptxas_verdicts

        recorder = ptxas_verdicts.Recorder()
        report = run_check(assemble=recorder)
        if not report.disagreements:
            print(f"recorded: {recorder.save(ptxas_verdicts.ptxas_version())}")
    else:
        report = run_check(targets, ptx_checks=not args.no_ptx_versions)
    print(report.summary())
    return 1 if report.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
