// C += A^T x B in bf16 with an f32 accumulator, A stored K x M (37 x 91 output, K = 64): the
// current upstream spelling of a transposed operand, linalg.matmul's indexing_maps (what
// linalg.matmul_transpose_a became), accumulating into the caller's C as linalg does.
module {
  func.func @matmul_ta(%a: memref<64x37xbf16>, %b: memref<64x91xbf16>, %c: memref<37x91xf32>) {
    linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%a, %b : memref<64x37xbf16>, memref<64x91xbf16>) outs(%c : memref<37x91xf32>)
    return
  }
}
