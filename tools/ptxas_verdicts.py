"""ptxas' verdicts for the ISA audit, recorded per ptxas version (tests/data/ptxas_verdicts/).

Why: the live audit (`tools.isa_ptxas_check`) assembles ~170k candidate lines on each of 23
targets, about 5 CPU-minutes of ptxas; CI has 2 cores. ptxas' answers only change with ptxas,
so they are recorded once per version (`python -m tools.isa_ptxas_check --record`) and the
audit's whole comparison runs against the recording (`Replay`). Any line the recording lacks
(the table changed the candidates or their registers) is assembled live, so the comparison is
never partial. That the recording is still ptxas' own is proven by `spot_check`: every line
at a boundary (accepted, or refused only for operand shapes) and a fixed sample of the rest are
re-assembled live and must get the same verdict. Without a recording for the installed ptxas,
`load` returns None and the audit runs live.

Format (JSON, xz): `lines` (each once, newline-separated), `verdicts` (each distinct list of
messages once; [] = accepted) and per "target@ptx" group, the line ids (ascending, delta-coded,
space-separated) with the verdict id of each.
"""

from __future__ import annotations

import functools
import itertools
import json
import lzma
import operator
import re
import subprocess
import threading
import zlib

import numpy as np
from collections import defaultdict
from pathlib import Path

from tilemma.compiler.core.targets import PtxVersion, SmTarget, parse_sm
from tilemma.compiler.runtime.ptxas import find_ptxas
from tools.isa_ptxas_check import SHAPES_ONLY, assemble_lines, verdict_kind

FOLDER = Path(__file__).resolve().parent.parent / "tests" / "data" / "ptxas_verdicts"
#: `spot_check` re-assembles every accepted line, one in SAMPLE_SHAPE_EVERY of those refused only
#: for operand shapes and one in SAMPLE_EVERY of the others: about 2,000 lines a target (sm_90:
#: 428 accepted, ~970 shape refusals, ~620 others), each refusal class still sampled hundreds of
#: times, at a third of the ptxas time of the earlier 16 / 64 (the CI suite's time limit).
SAMPLE_SHAPE_EVERY = 64
SAMPLE_EVERY = 256


@functools.cache
def ptxas_version() -> str | None:
    """The installed ptxas' full version ("13.0.88"), None without ptxas."""
    exe = find_ptxas()
    if exe is None:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"\bV(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else None


def path_for(version: str) -> Path:
    return FOLDER / f"ptxas-{version}.json.xz"


def _key(target: SmTarget, ptx: PtxVersion) -> str:
    return f"{target.name}@{ptx}"


def shape_only(errs: list[str]) -> bool:
    """Refused only for operand counts/types: the sweep's boundary."""
    return verdict_kind(errs) == SHAPES_ONLY


class Recorder:
    """Live assembly (`assemble_lines`) that keeps every line's messages, for `save`."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, list[str]]] = defaultdict(dict)
        self._lock = threading.Lock()

    def __call__(self, target: SmTarget, ptx: PtxVersion, lines: list[str]) -> list[list[str]]:
        errs = assemble_lines(target, ptx, lines)
        with self._lock:
            group = self.groups[_key(target, ptx)]
            for line, e in zip(lines, errs):
                group.setdefault(line, e)
        return errs

    def save(self, version: str) -> Path:
        line_ids: dict[str, int] = {}
        verdict_ids: dict[tuple[str, ...], int] = {(): 0}
        groups = {}
        for key in sorted(self.groups):
            group = self.groups[key]
            for line in group:
                line_ids.setdefault(line, len(line_ids))
            pairs = sorted((line_ids[ln], verdict_ids.setdefault(tuple(e), len(verdict_ids)))
                           for ln, e in group.items())  # fmt: skip
            ids = [p[0] for p in pairs]
            groups[key] = {"lines": " ".join(str(b - a) for a, b in zip([-1] + ids, ids)),
                           "verdicts": " ".join(str(p[1]) for p in pairs)}  # fmt: skip
        assert not any("\n" in ln for ln in line_ids)
        data = {"ptxas": version, "lines": "\n".join(line_ids),
                "verdicts": [list(v) for v in verdict_ids], "groups": groups}  # fmt: skip
        path = path_for(version)
        path.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(path, "wt", preset=6) as f:
            json.dump(data, f, separators=(",", ":"))
        return path


class Replay:
    """Answers for ptxas from a recording; lines it lacks are assembled live (`live_lines`)."""

    def __init__(self, data: dict) -> None:
        self.version: str = data["ptxas"]
        self.lines: list[str] = data["lines"].split("\n")
        self.index = {ln: i for i, ln in enumerate(self.lines)}
        self.verdicts: list[list[str]] = [list(v) for v in data["verdicts"]]
        self.groups: dict[str, tuple[np.ndarray, np.ndarray]] = {
            key: (np.cumsum(_ints(g["lines"])) - 1, _ints(g["verdicts"]))
            for key, g in data["groups"].items()
        }  # per group: ascending line ids, the verdict id of each
        # the verdicts as a numpy object array with None last: `lookup` picks them by index
        self._answers = np.empty(len(self.verdicts) + 1, dtype=object)
        for i, v in enumerate(self.verdicts):
            self._answers[i] = v
        self.live_lines = 0
        self._lock = threading.Lock()
        self._ids_memo: dict[tuple[int, int], tuple[list[str], np.ndarray]] = {}

    def lookup(self, key: str, lines: list[str]) -> list[list[str] | None]:
        """Recorded messages of each line in group `key` (None where not recorded). Vectorised:
        the audit looks up ~5M lines."""
        ids, verdicts = self.groups.get(key, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        q = self._line_ids(lines)
        if not len(ids):
            return [None] * len(lines)
        pos = np.minimum(np.searchsorted(ids, q), len(ids) - 1)
        hit = (q >= 0) & (ids[pos] == q)
        return self._answers[np.where(hit, verdicts[pos], len(self.verdicts))].tolist()

    def _line_ids(self, lines: list[str]) -> np.ndarray:
        """Each line's id in the recording (-1 where it has none). The audit asks about the same
        batch of candidate lines (the same string objects) on each of 23 targets, and looking
        ~170k lines up in the ~1M-line index costs ~0.2 s a target: a batch's ids are kept and
        reused when the same objects come again (checked element by element, by identity; the
        batch is kept with them, so no id is reused while its entry lives)."""
        key = (len(lines), id(lines[0]) if lines else 0)
        hit = self._ids_memo.get(key)
        if hit is not None and all(map(operator.is_, hit[0], lines)):
            return hit[1]
        q = np.fromiter(map(self.index.get, lines, itertools.repeat(-1)), np.int64, len(lines))
        if len(lines) >= 1000:
            self._ids_memo[key] = (list(lines), q)
        return q

    def __call__(self, target: SmTarget, ptx: PtxVersion, lines: list[str]) -> list[list[str]]:
        out = self.lookup(_key(target, ptx), lines)
        missing = [i for i, e in enumerate(out) if e is None]
        if missing:
            for i, e in zip(missing, assemble_lines(target, ptx, [lines[i] for i in missing])):
                out[i] = e
            with self._lock:
                self.live_lines += len(missing)
        return out  # type: ignore[return-value]

    def sample(self, target: SmTarget) -> dict[str, list[str]]:
        """Per "target@ptx" group of `target`: the lines `spot_check` re-assembles. Every
        accepted line; one refused only for operand shapes in `SAMPLE_SHAPE_EVERY` (these are
        the sweep's: one flipping to accepted could change a verdict); one other in
        `SAMPLE_EVERY`; chosen by a hash of the line's text, so the same on every run."""
        every = np.array((1, SAMPLE_SHAPE_EVERY, SAMPLE_EVERY), np.int64)  # by verdict kind: accepted, shapes only, refused
        every_of_verdict = every[[verdict_kind(v) for v in self.verdicts]]
        out = {}
        for key, (ids, verdicts) in self.groups.items():
            if key.split("@")[0] != target.name:
                continue
            keep = self._hashes[ids] % every_of_verdict[verdicts] == 0
            out[key] = [self.lines[i] for i in ids[keep].tolist()]
        return out

    @functools.cached_property
    def _hashes(self) -> np.ndarray:
        """crc32 of each line's text, computed once for all targets (per target, hashing each
        of its ~200k lines in Python cost ~0.4 s)."""
        return np.fromiter((zlib.crc32(ln.encode()) for ln in self.lines), np.int64, len(self.lines))

    def spot_check(self, target: SmTarget) -> tuple[int, list[str]]:
        """Re-assemble `sample(target)` live: (lines checked, those whose verdict differs)."""
        checked, wrong = 0, []
        for key, lines in self.sample(target).items():
            name, ptx = key.split("@")
            live = assemble_lines(parse_sm(name), PtxVersion.parse(ptx), lines)
            for ln, want, got in zip(lines, self.lookup(key, lines), live):
                checked += 1
                if (not got, shape_only(got)) != (not want, shape_only(want)):
                    wrong.append(f"{key}: {ln}\n  recorded: {want or 'accepted'}\n  ptxas now: {got or 'accepted'}")
        return checked, wrong


def _ints(text: str) -> np.ndarray:
    """Space-separated integers; parsed by numpy (text mode), ~6x faster than via str.split."""
    return np.fromstring(text, dtype=np.int64, sep=" ") if text else np.zeros(0, np.int64)


def load(version: str | None = None) -> Replay | None:
    """The recording for `version` (default: the installed ptxas), None when there is none."""
    version = version or ptxas_version()
    if version is None or not path_for(version).exists():
        return None
    with lzma.open(path_for(version), "rt") as f:
        return Replay(json.load(f))
