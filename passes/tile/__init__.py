"""Passes on tile IR: linalg in, instruction selection, and the step down to the warp level."""
