"""`tilemma isa ...`: ask the mma table what a target supports, from the command line.

    tilemma isa list --sm 90 [--ptx 8.7]          every legal opcode, one a line
    tilemma isa check OPCODE --sm 80 [--ptx 8.5]  "legal: ..." (exit 0) or the reasons (exit 1)

Kernel and compiler authors use this to see why an instruction is refused before ptxas does.
Every user error (bad opcode, bad --sm, bad --ptx) is one line on stderr and exit status 1,
never a traceback. `register(subparsers)` wires the command into any argparse CLI; the handler
is stored as `func` and returns the exit status.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tilemma.compiler.core.targets import (
    DEFAULT_PTX,
    PtxVersion,
    SmTarget,
    parse_sm,
    released_ptx_version,
)

if TYPE_CHECKING:
    from tilemma.compiler.core import isa


def _target_and_ptx(args: argparse.Namespace) -> tuple[SmTarget, PtxVersion]:
    return parse_sm(args.sm), (released_ptx_version(args.ptx) if args.ptx else DEFAULT_PTX)


def _operands_text(v: isa.MmaVariant) -> str:
    parts = []
    for op in v.operands:
        if op.immediate:
            parts.append(f"{op.name}: immediate")
        else:
            parts.append(f"{op.name}: {op.count} x {op.reg_type}")
    return ", ".join(parts)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every opcode legal on --sm with --ptx, in the table's stable order."""
    from tilemma.compiler.core import isa  # the table: imported by the commands that read it

    try:
        target, ptx = _target_and_ptx(args)
    except ValueError as e:
        print(f"tilemma: error: {e}", file=sys.stderr)
        return 1
    for v in isa.legal_variants(target, ptx):
        print(v.opcode)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Say whether OPCODE is legal on --sm with --ptx; list the reasons when it is not."""
    from tilemma.compiler.core import isa

    try:
        target, ptx = _target_and_ptx(args)
        reasons = isa.check(args.opcode, target, ptx)
    except ValueError as e:
        print(f"tilemma: error: {e}", file=sys.stderr)
        return 1
    if reasons:
        for r in reasons:
            print(f"not legal on {target.name} with PTX ISA {ptx}: {r}")
        return 1
    v = isa.parse_opcode(args.opcode)
    print(f"legal: {v.opcode} on {target.name} with PTX ISA {ptx} ({_operands_text(v)})")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add `isa list` / `isa check` to an argparse subparsers object; dispatch with
    `args.func(args)`, which returns the exit status."""
    parser = subparsers.add_parser(
        "isa",
        help="query the PTX mma instruction table",
        description="Which mma variants a target supports, and why one is refused.",
    )
    sub = parser.add_subparsers(dest="isa_command", metavar="{list,check}", prog=parser.prog)
    sub.required = True
    targets = "SM target: 90, sm_90, 120a, sm_120a, ..."
    ptx = f"PTX ISA version, e.g. 8.7 (default {DEFAULT_PTX}, the newest ptxas 13.0 accepts)"

    p_list = sub.add_parser("list", help="print every legal mma opcode for a target")
    p_list.add_argument("--sm", required=True, help=targets)
    p_list.add_argument("--ptx", help=ptx)
    p_list.set_defaults(func=cmd_list)

    p_check = sub.add_parser("check", help="is this mma opcode legal on a target?")
    p_check.add_argument("opcode", help="e.g. mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    p_check.add_argument("--sm", required=True, help=targets)
    p_check.add_argument("--ptx", help=ptx)
    p_check.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m tilemma.compiler.driver.isa_commands isa ...`) for testing."""
    parser = argparse.ArgumentParser(prog="tilemma")
    subparsers = parser.add_subparsers(dest="command", metavar="{isa}")
    subparsers.required = True
    register(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
