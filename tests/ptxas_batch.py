"""Assemble many generated PTX modules for one target in few ptxas runs.

Why: the tests that assemble every family on every target run ptxas on ~400 small modules, and
ptxas' cost per run is about 40% start-up and per-module work (30 kernels: 5.8 s one by one,
3.6 s as one module). Modules with the same header (`.version`, `.target`, `.address_size`)
and the same module-level declarations (`.extern .shared ... smem[]`) go into one module, each
kernel's entry unchanged (the generated kernels reference nothing outside their own entry but
those declarations); a name met twice starts another module. When a combined module is refused,
each of its modules is assembled alone, so a failure's result (and log) is exactly the one ptxas
gives that module."""

from __future__ import annotations

import re

from tilemma.compiler.runtime.ptxas import PtxasResult, run_ptxas

_HEADER_LINES = 3  # .version, .target, .address_size
_DECLARATION = re.compile(r"^\.(?:extern|global|const|shared)\b.*$", re.M)
_ENTRY = re.compile(r"^\.(?:visible )?\.entry (\w+)", re.M)


def _parts(ptx: str) -> tuple[tuple[str, tuple[str, ...]], str, list[str]]:
    """(header and module-level declarations, the rest, the entries' names)."""
    lines = ptx.split("\n")
    head = "\n".join(lines[:_HEADER_LINES])
    rest = "\n".join(lines[_HEADER_LINES:])
    declarations = tuple(_DECLARATION.findall(rest))
    return (head, declarations), _DECLARATION.sub("", rest), _ENTRY.findall(rest)


def assemble_each(modules: list[str], arch: str) -> list[PtxasResult]:
    """`run_ptxas(m, arch)` for each of `modules`, in order; a module assembled as part of a
    combined one gets that run's result (ok, its log; the cubin is the combined one's)."""
    groups: list[tuple[tuple, list[int], set[str]]] = []
    parts = [_parts(m) for m in modules]
    for i, (key, _, names) in enumerate(parts):
        group = next((g for g in groups if g[0] == key and not g[2] & set(names)), None)
        if group is None or not names:
            group = (key, [], set())
            groups.append(group)
        group[1].append(i)
        group[2].update(names)
    results: list[PtxasResult | None] = [None] * len(modules)
    for (head, declarations), members, _ in groups:
        combined = None
        if len(members) > 1:
            text = "\n".join([head, *declarations, *(parts[i][1] for i in members)])
            combined = run_ptxas(text, arch)
        for i in members:
            results[i] = combined if combined is not None and combined.ok else run_ptxas(modules[i], arch)
    return results  # type: ignore[return-value]
