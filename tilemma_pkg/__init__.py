"""tilemma: tile-level matmul IR to PTX tensor-core instructions."""
