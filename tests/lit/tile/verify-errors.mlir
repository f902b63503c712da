// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Every cuda::tiles rule the tile verifiers enforce, each broken once.

func.func @k_mismatch(%a: !tile.tile<16x32xf16>, %b: !tile.tile<16x8xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<16x32xf16>, !tile.tile<16x8xf16> -> !tile.tile<16x8xf16>
  func.return
}
// CHECK: verify-errors.mlir:5:3
// CHECK: tile.matmul: contraction dimensions differ: left is 16x32 (N x K with K=32), right is 16x8 (K x M with K=16) (rule: N x K times K x M)

// -----
func.func @mixed_rank_float(%a: !tile.tile<16x16xf16>, %b: !tile.tile<16x8xbf16>) {
  %r = tile.matmul %a, %b : !tile.tile<16x16xf16>, !tile.tile<16x8xbf16> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: verify-errors.mlir:13:3
// CHECK: tile.matmul: operand element types f16 and bf16 may not meet (rule 1: operands must be floating point scalars of the same conversion rank)

// -----
func.func @int_and_float(%a: !tile.tile<16x32xsi8>, %b: !tile.tile<32x8xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<16x32xsi8>, !tile.tile<32x8xf16> -> !tile.tile<16x8xsi32>
  func.return
}
// CHECK: tile.matmul: operand element types si8 and f16 may not meet (rule 1: both integral or both floating point)

// -----
func.func @int_widths(%a: !tile.tile<16x32xsi8>, %b: !tile.tile<32x8xsi4>, %c: !tile.tile<16x8xsi32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x32xsi8>, !tile.tile<32x8xsi4>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  func.return
}
// CHECK: tile.mma: operand element types si8 and si4 may not meet (rule 1: operands must be integral scalars of the same bit width)

// -----
func.func @matmul_int4(%a: !tile.tile<16x64xsi4>, %b: !tile.tile<64x8xsi4>) {
  %r = tile.matmul %a, %b : !tile.tile<16x64xsi4>, !tile.tile<64x8xsi4> -> !tile.tile<16x8xsi32>
  func.return
}
// CHECK: tile.matmul: si4 operands have no matmul result type (rule 1 of matmul_compatible: integral operands must be 8 bits wide); use tile.mma with an si32 accumulator

// -----
func.func @matmul_result_fixed(%a: !tile.tile<16x16xf16>, %b: !tile.tile<16x8xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<16x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.matmul: result type must be !tile.tile<16x8xf16> (matmul_result_t of f16 operands), got !tile.tile<16x8xf32>; the result element type of matmul cannot be configured: use tile.mma with a zero accumulator

// -----
func.func @bad_accumulator(%a: !tile.tile<16x16xbf16>, %b: !tile.tile<16x8xbf16>, %c: !tile.tile<16x8xf16>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x16xbf16>, !tile.tile<16x8xbf16>, !tile.tile<16x8xf16> -> !tile.tile<16x8xf16>
  func.return
}
// CHECK: tile.mma: accumulator element type f16 is not allowed for bf16 x bf16 operands (rule 2: bf16 operands accumulate into f32)

// -----
func.func @int_accumulator(%a: !tile.tile<16x32xui8>, %b: !tile.tile<32x8xui8>, %c: !tile.tile<16x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x32xui8>, !tile.tile<32x8xui8>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.mma: accumulator element type f32 is not allowed for ui8 x ui8 operands (rule 2: 8-bit integer operands accumulate into si32)

// -----
func.func @f64_accumulator(%a: !tile.tile<8x4xf64>, %b: !tile.tile<4x8xf64>, %c: !tile.tile<8x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<8x4xf64>, !tile.tile<4x8xf64>, !tile.tile<8x8xf32> -> !tile.tile<8x8xf32>
  func.return
}
// CHECK: tile.mma: accumulator element type f32 is not allowed for f64 x f64 operands (rule 2: f64 operands accumulate into f64)

// -----
func.func @acc_shape(%a: !tile.tile<16x16xf16>, %b: !tile.tile<16x8xf16>, %c: !tile.tile<16x16xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x16xf32> -> !tile.tile<16x16xf32>
  func.return
}
// CHECK: tile.mma: accumulator shape 16x16 does not match N x M = 16x8 of 16x16 times 16x8 (rule 4: N x K, K x M, N x M)

// -----
func.func @acc_rank(%a: !tile.tile<2x16x16xf16>, %b: !tile.tile<2x16x8xf16>, %c: !tile.tile<16x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<2x16x16xf16>, !tile.tile<2x16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.mma: accumulator rank differs from the operands' (rule 3: same rank)

// -----
func.func @operand_rank(%a: !tile.tile<2x16x16xf16>, %b: !tile.tile<16x8xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<2x16x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<2x16x8xf16>
  func.return
}
// CHECK: tile.matmul: operands must have the same rank (rule: same rank, 2 or 3), got 2x16x16 and 16x8

// -----
func.func @batch_mismatch(%a: !tile.tile<3x16x16xf16>, %b: !tile.tile<2x16x8xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<3x16x16xf16>, !tile.tile<2x16x8xf16> -> !tile.tile<3x16x8xf16>
  func.return
}
// CHECK: tile.matmul: batch sizes 3 and 2 differ and neither is 1 (rule: A = B, or one of them is 1 and broadcasts)

// -----
func.func @mma_batch(%a: !tile.tile<2x16x16xf16>, %b: !tile.tile<1x16x8xf16>, %c: !tile.tile<3x16x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<2x16x16xf16>, !tile.tile<1x16x8xf16>, !tile.tile<3x16x8xf32> -> !tile.tile<3x16x8xf32>
  func.return
}
// CHECK: tile.mma: left batch 2 must equal the accumulator batch 3 or be 1 (rule 5: broadcast of a batch of 1)

// -----
func.func @scale_operand(%a: !tile.tile<16x32xf8E8M0FNU>, %b: !tile.tile<32x8xf8E8M0FNU>) {
  %r = tile.matmul %a, %b : !tile.tile<16x32xf8E8M0FNU>, !tile.tile<32x8xf8E8M0FNU> -> !tile.tile<16x8xf16>
  func.return
}
// CHECK: tile.matmul: left operand element type f8E8M0FNU cannot be multiplied (it is a block-scale type)

// -----
func.func @b1_needs_popc(%a: !tile.tile<16x256xi1>, %b: !tile.tile<256x8xi1>, %c: !tile.tile<16x8xsi32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x256xi1>, !tile.tile<256x8xi1>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  func.return
}
// CHECK: tile.mma: single-bit (i1) operands need popc = #tile<popc xor> or #tile<popc and> (PTX mma .b1 multiplies by xor/and then popc)

// -----
func.func @satfinite_float(%a: !tile.tile<16x16xf16>, %b: !tile.tile<16x8xf16>, %c: !tile.tile<16x8xf32>) {
  %r = tile.mma %a, %b, %c {satfinite} : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.mma: satfinite clamps integer (si32) accumulation, not f32

// -----
func.func @load_out_of_bounds(%m: memref<37x53xf16>) {
  %t = tile.load %m[8, 0] : memref<37x53xf16> -> !tile.tile<32x53xf16>
  func.return
}
// CHECK: tile.load: tile 32x53 at offsets [8, 0] leaves memref 37x53 in dimension 0 (8 + 32 > 37)

// -----
func.func @load_element(%m: memref<16x16xf32>) {
  %t = tile.load %m[0, 0] : memref<16x16xf32> -> !tile.tile<16x16xf16>
  func.return
}
// CHECK: tile.load: memref element type f32 does not match tile element type f16; use tile.cast to convert

// -----
func.func @tf32_storage(%m: memref<16x16xtf32>) {
  %t = tile.load %m[0, 0] : memref<16x16xtf32> -> !tile.tile<16x16xtf32>
  func.return
}
// CHECK: tile.load: memref element type tf32 does not match tile element type tf32 (tf32 is stored as f32); use tile.cast to convert

// -----
func.func @store_rank(%t: !tile.tile<16x8xf32>, %m: memref<2x16x8xf32>) {
  tile.store %t, %m[0, 0] : !tile.tile<16x8xf32>, memref<2x16x8xf32>
  func.return
}
// CHECK: tile.store: memref rank 3 differs from tile rank 2

// -----
func.func @cast_shape(%t: !tile.tile<16x8xf32>) {
  %c = tile.cast %t : !tile.tile<16x8xf32> -> !tile.tile<8x16xf16>
  func.return
}
// CHECK: tile.cast: shape changes from 16x8 to 8x16; a cast converts elements only

// -----
func.func @cast_not_lowered(%t: !tile.tile<16x8xf16>) {
  %c = tile.cast %t : !tile.tile<16x8xf16> -> !tile.tile<16x8xbf16>
  func.return
}
// CHECK: verify-errors.mlir:{{[0-9]+}}:3
// CHECK: tile.cast: no conversion from f16 to bf16; supported: f32 -> tf32 (rounding rna / rn / rz / trunc), si4 -> si8, ui4 -> ui8, f32 -> f16

// -----
func.func @cast_exact_rounding(%t: !tile.tile<16x64xsi4>) {
  %c = tile.cast %t {rounding = #tile<rounding rz>} : !tile.tile<16x64xsi4> -> !tile.tile<16x64xsi8>
  func.return
}
// CHECK: tile.cast: si4 -> si8 is exact and takes no rounding, got 'rz'
