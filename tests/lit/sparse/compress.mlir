// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK-LABEL: func.func @round_trip
// CHECK: %s = tile.compress %a : !tile.tile<16x32xf16> -> !tile.sparse<16x32xf16>
// CHECK: %p = tile.compress %t {prune} : !tile.tile<16x16xtf32> -> !tile.sparse<16x16xtf32>
// CHECK: %r = tile.mma %s, %b, %c : !tile.sparse<16x32xf16>, !tile.tile<32x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
// CHECK: %m = tile.matmul %q, %y : !tile.sparse<2x16x64xsi8>, !tile.tile<1x64x8xsi8> -> !tile.tile<2x16x8xsi32>
func.func @round_trip(%a: !tile.tile<16x32xf16>, %b: !tile.tile<32x8xf16>, %c: !tile.tile<16x8xf32>,
                      %t: !tile.tile<16x16xtf32>, %x: !tile.tile<2x16x64xsi8>, %y: !tile.tile<1x64x8xsi8>) {
  %s = tile.compress %a : !tile.tile<16x32xf16> -> !tile.sparse<16x32xf16>
  %p = tile.compress %t {prune} : !tile.tile<16x16xtf32> -> !tile.sparse<16x16xtf32>
  %r = tile.mma %s, %b, %c : !tile.sparse<16x32xf16>, !tile.tile<32x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  %q = tile.compress %x : !tile.tile<2x16x64xsi8> -> !tile.sparse<2x16x64xsi8>
  %m = tile.matmul %q, %y : !tile.sparse<2x16x64xsi8>, !tile.tile<1x64x8xsi8> -> !tile.tile<2x16x8xsi32>
  func.return
}

// -----
func.func @sparse_right_operand(%a: !tile.tile<16x32xf16>, %b: !tile.tile<32x8xf16>) {
  %s = tile.compress %b : !tile.tile<32x8xf16> -> !tile.sparse<32x8xf16>
  %r = tile.matmul %a, %s : !tile.tile<16x32xf16>, !tile.sparse<32x8xf16> -> !tile.tile<16x8xf16>
  func.return
}
// CHECK: compress.mlir:[[# @LINE - 3]]:3
// CHECK: !tile.sparse<32x8xf16> should be of base attribute tile.tile

// -----
func.func @compress_changes_type(%a: !tile.tile<16x32xf16>) {
  %s = tile.compress %a : !tile.tile<16x32xf16> -> !tile.sparse<16x32xbf16>
  func.return
}
// CHECK: tile.compress: result !tile.sparse<16x32xbf16> must have the shape and element type of the source !tile.tile<16x32xf16>

// -----
func.func @store_sparse(%a: !tile.tile<16x32xf16>, %m: memref<16x32xf16>) {
  %s = tile.compress %a : !tile.tile<16x32xf16> -> !tile.sparse<16x32xf16>
  tile.store %s, %m[0, 0] : !tile.sparse<16x32xf16>, memref<16x32xf16>
  func.return
}
// CHECK: should be of base attribute tile.tile

// -----
func.func @no_sparse_f32(%a: !tile.tile<16x32xf32>) {
  %s = tile.compress %a : !tile.tile<16x32xf32> -> !tile.sparse<16x32xf32>
  func.return
}
// CHECK: compress.mlir:[[# @LINE - 3]]:64
// CHECK: f32 has no structured-sparse mma (mma.sp); sparse element types: f16, bf16, tf32, si8, ui8, f8E4M3FN, f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN, si4, ui4

// -----
// e2m1 may also be pair-wise 4:8 sparse (the sparse mxf4 kinds); the pattern prints when it is
// not the type's default.
// CHECK-LABEL: func.func @pairs
// CHECK: tile.compress %a : !tile.tile<16x128xf4E2M1FN> -> !tile.sparse<16x128xf4E2M1FN, "4:8">
func.func @pairs(%a: !tile.tile<16x128xf4E2M1FN>) {
  %s = tile.compress %a : !tile.tile<16x128xf4E2M1FN> -> !tile.sparse<16x128xf4E2M1FN, "4:8">
  func.return
}

// -----
func.func @no_pairs_for_f16(%a: !tile.tile<16x32xf16>) {
  %s = tile.compress %a : !tile.tile<16x32xf16> -> !tile.sparse<16x32xf16, "4:8">
  func.return
}
// CHECK: compress.mlir:[[# @LINE - 3]]:
// CHECK: f16 tiles can be 2:4 sparse (the patterns of mma.sp), not 4:8
