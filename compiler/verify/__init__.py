"""Proving results: the exact NumPy reference, the tensor cores' arithmetic, and the PTX emulator."""
