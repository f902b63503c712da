"""Pass instrumentation shared by `tilemma-opt` and `tilemma compile`: timings and IR dumps.

Both write to stderr, never stdout, so `tilemma-opt g.mlir -p ... -t ptx --time-passes | ptxas -`
still gets a clean module. The instrument is an xDSL `PassPipeline` callback, called before the
first pass, between passes and after the last one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # xDSL is imported when IR is printed: `tilemma compile` served from the cache needs none
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.passes import ModulePass


@dataclass
class PassInstrument:
    """Times each pass (`report` prints the table) and dumps the IR before/after each pass.

    `verify`, when given, runs on the module after every pass, outside the timed interval."""

    time_passes: bool = False
    print_before: bool = False
    print_after: bool = False
    verify: Callable[[ModuleOp], None] | None = None
    stream: IO[str] | None = None  # None: sys.stderr at the time of writing
    timings: list[tuple[str, float]] = field(default_factory=list)
    _start: float = 0.0

    def __call__(self, previous: ModulePass | None, module: ModuleOp, next_: ModulePass | None) -> None:
        if previous is not None:
            self.timings.append((previous.name, time.perf_counter() - self._start))
            if self.verify is not None:
                self.verify(module)
            if self.print_after:
                self._dump(f"IR Dump After {previous.name}", module)
        if next_ is not None:
            if self.print_before:
                self._dump(f"IR Dump Before {next_.name}", module)
            self._start = time.perf_counter()

    def _dump(self, title: str, module: ModuleOp) -> None:
        out = self.stream or sys.stderr
        from xdsl.printer import Printer

        out.write(f"// -----// {title} //----- //\n")
        Printer(stream=out).print_op(module)
        out.write("\n\n")

    @property
    def active(self) -> bool:
        """Whether it times, dumps or verifies anything (a compile it observes must run, not come
        from a cache)."""
        return self.time_passes or self.print_before or self.print_after or self.verify is not None

    def report(self) -> None:
        """The timing table (like mlir-opt's `--mlir-timing`), when `time_passes` is set."""
        if not self.time_passes:
            return
        out = self.stream or sys.stderr
        total = sum(t for _, t in self.timings)
        rule = "===" + "-" * 70 + "==="
        out.write(f"{rule}\n{'... Pass execution timing report ...':^76}\n{rule}\n")
        out.write(f"  Total Execution Time: {total:.4f} seconds\n\n")
        out.write("  ----Wall Time----  ----Name----\n")
        for name, t in [*self.timings, ("Total", total)]:
            share = 100.0 * t / total if total else 0.0
            out.write(f"  {t:8.4f} ({share:5.1f}%)  {name}\n")
        out.flush()


def add_arguments(parser, *, time_passes: bool = True) -> None:
    """The instrumentation flags (xDSL's own parser already has `--time-passes`; `tilemma-opt`
    verifies after every pass unless `--disable-verify`, as mlir-opt does)."""
    if time_passes:
        parser.add_argument("--time-passes", action="store_true",
                            help="print each pass's wall time to stderr at the end")
        parser.add_argument("--verify-each", action="store_true",
                            help="verify the IR after every pass (default: the input and the final "
                                 "module only; about 40%% of a compile's time)")
    parser.add_argument("--print-ir-before-all", action="store_true",
                        help="print the IR to stderr before every pass")
    parser.add_argument("--print-ir-after-all", action="store_true",
                        help="print the IR to stderr after every pass")


def from_arguments(args, verify: Callable[[ModuleOp], None] | None = None) -> PassInstrument:
    if verify is None and getattr(args, "verify_each", False):
        verify = verify_module
    return PassInstrument(args.time_passes, args.print_ir_before_all, args.print_ir_after_all, verify)


def verify_module(module: ModuleOp) -> None:
    module.verify()
