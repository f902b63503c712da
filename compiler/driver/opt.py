"""`tilemma-opt`: xdsl-opt with tilemma's dialects, passes and targets, and no tracebacks.

The stock `xDSLOptMain` lets parse, verify and pass-option errors escape as Python tracebacks;
here each one becomes a located diagnostic on stderr and exit status 1. Pass timings and IR
dumps go to stderr (`instrument.PassInstrument`), so stdout stays the program; `-o -` is stdout.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence

from xdsl.passes import PassPipeline
from xdsl.xdsl_opt_main import xDSLOptMain

from tilemma.compiler.driver import instrument
from tilemma.compiler.driver.cli import tilemma_version
from tilemma.compiler.driver.diagnostics import (
    LocatedParser,
    LocatedVerifyError,
    check_input,
    run_reporting,
    verify_located,
)
from tilemma.passes.errors import LoweringError, origin
from tilemma.compiler.universe import PASSES, TARGETS, make_context
from tilemma.compiler.driver.files import EMPTY_STDIN, PendingText, decode_input, read_bounded, write_atomically


class TilemmaOptMain(xDSLOptMain):
    @property
    def version_format(self) -> str:  # xDSL fills in {xdsl_version}
        return f"tilemma-opt {tilemma_version()} (xdsl {{xdsl_version}})"

    def register_all_dialects(self):
        self.ctx = make_context()

    def register_all_arguments(self, arg_parser):
        super().register_all_arguments(arg_parser)
        instrument.add_arguments(arg_parser, time_passes=False)

    def setup_pipeline(self):
        # xDSL's callback prints timings and IR to stdout; ours writes them to stderr.
        self.args.print_ir_after_all |= self.args.print_between_passes
        verify = None if self.args.disable_verify else (lambda module: module.verify())
        self.instrument = instrument.from_arguments(self.args, verify)
        self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, self.instrument)

    def get_input_stream(self):
        if self.args.input_file == "-":  # `-` is stdin, as for mlir-opt and `tilemma compile`
            self.args.input_file = None
        if self.args.input_file is None:
            if sys.stdin is None:  # `tilemma-opt <&-`
                raise ValueError("no input file given, and standard input is closed")
            return io.BytesIO(read_bounded(sys.stdin.buffer, self.get_input_name())), "mlir"
        with open(self.args.input_file, "rb") as f:  # read whole, bounded: /dev/zero is refused
            data = read_bounded(f, self.args.input_file)
        return io.BytesIO(data), os.path.splitext(self.args.input_file)[1].replace(".", "")

    def prepare_output(self):
        if self.args.output_file in (None, "-"):
            return sys.stdout
        # kept in memory and written once the run succeeds (`run`): `-o` may name the input,
        # and a failure must not leave an existing file empty
        self._pending = PendingText()
        return self._pending

    def parse_chunk(self, chunk, file_extension, start_offset=0):
        text = decode_input(chunk.read(), self.get_input_name())
        if not text.strip() and not self.args.split_input_file:
            raise ValueError(f"{self.get_input_name()}: empty input: expected MLIR operations"
                             + (EMPTY_STDIN if self.args.input_file is None else ""))
        check_input(text, self.get_input_name(), start_offset)
        parser = LocatedParser(
            self.ctx, text, self.get_input_name(), line_offset=start_offset
        )
        self._locations = parser.locations
        return parser.parse_module(not self.args.no_implicit_module)

    def apply_passes(self, prog):
        # Verify the input first, with source locations, before any pass sees it.
        locations = getattr(self, "_locations", {})
        if not self.args.disable_verify:
            verify_located(prog, locations)
        try:
            super().apply_passes(prog)
        except LoweringError as e:
            raise LocatedVerifyError(locations.get(origin(e.op)), e.message) from None

    def run(self):
        try:
            super().run()
            if getattr(self, "_pending", None) is not None:
                write_atomically(self.args.output_file, self._pending.getvalue())
        finally:
            self.instrument.report()

    def register_all_passes(self):
        super().register_all_passes()
        for name, factory in PASSES.items():
            self.available_passes.setdefault(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        for name, factory in TARGETS.items():
            self.available_targets.setdefault(name, factory)


def main(argv: Sequence[str] | None = None) -> int:
    return run_reporting(
        "tilemma-opt",
        lambda: TilemmaOptMain("tilemma-opt: the tilemma modular optimizer driver", argv).run(),
    )


if __name__ == "__main__":
    sys.exit(main())
