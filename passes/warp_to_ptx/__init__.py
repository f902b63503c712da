"""The conversion of warp IR to the `ptx` dialect, one pattern per op."""
