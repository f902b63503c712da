"""Leaf tables every layer reads: targets and their limits, the ISA's mma variants, kernel configurations, memref layouts."""
