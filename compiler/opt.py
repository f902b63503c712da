"""`tilemma-opt`: xdsl-opt with tilemma's dialects, passes and targets, and no tracebacks.

The stock `xDSLOptMain` lets parse, verify and pass-option errors escape as Python tracebacks;
here each one becomes a located diagnostic on stderr and exit status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from tilemma.compiler.diagnostics import (
    LocatedParser,
    LocatedVerifyError,
    run_reporting,
    verify_located,
)
from tilemma.passes.errors import LoweringError, origin
from tilemma.compiler.universe import DIALECTS, PASSES, REPLACED_DIALECTS, TARGETS


class TilemmaOptMain(xDSLOptMain):
    version_format = "tilemma-opt built from xdsl version {xdsl_version}"

    def register_all_dialects(self):
        from xdsl.universe import Universe

        # tilemma's dialects also when its entry points are not installed; REPLACED_DIALECTS
        # stand in for xDSL's of the same name.
        dialects = {**Universe.get_multiverse().all_dialects, **DIALECTS, **REPLACED_DIALECTS}
        for name, factory in dialects.items():
            self.ctx.register_dialect(name, factory)

    def parse_chunk(self, chunk, file_extension, start_offset=0):
        text = chunk.read()
        if not text.strip() and not self.args.split_input_file:
            raise ValueError(f"{self.get_input_name()}: empty input: expected MLIR operations")
        parser = LocatedParser(
            self.ctx, text.decode(), self.get_input_name(), line_offset=start_offset
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
