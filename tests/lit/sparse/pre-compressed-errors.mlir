// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics | filecheck %s
// tile.sparse_from checks both memrefs against sparse_format's layout, and the element type.

func.func @meta_shape(%av: memref<16x16xf16>, %am: memref<1x32xui32>) {
  %ta = tile.sparse_from %av, %am : memref<16x16xf16>, memref<1x32xui32> -> !tile.sparse<16x32xf16>
  func.return
}
// CHECK: pre-compressed-errors.mlir:[[# @LINE - 3]]:3: error: tile.sparse_from: meta of a 16x32 f16 tile must be memref<1x64xui32> (K padded to a multiple of 32; sparse_format's layout), got memref<1x32xui32>

// -----
func.func @values_k(%av: memref<16x20xf16>, %am: memref<1x64xui32>) {
  %ta = tile.sparse_from %av, %am : memref<16x20xf16>, memref<1x64xui32> -> !tile.sparse<16x40xf16>
  func.return
}
// CHECK: error: tile.sparse_from: values of a 16x40 f16 tile must be memref<16x32xf16>

// -----
func.func @element(%av: memref<16x16xf32>, %am: memref<1x64xui32>) {
  %ta = tile.sparse_from %av, %am : memref<16x16xf32>, memref<1x64xui32> -> !tile.sparse<16x32xtf32>
  func.return
}
// CHECK: error: tile.sparse_from: pre-compressed tiles are 2:4 sparse f16 or bf16 (mma.sp m16n8k32), not 1:2 tf32

// -----
func.func @strided(%av: memref<16x16xf16, strided<[32, 1]>>, %am: memref<1x64xui32>) {
  %ta = tile.sparse_from %av, %am : memref<16x16xf16, strided<[32, 1]>>, memref<1x64xui32> -> !tile.sparse<16x32xf16>
  func.return
}
// CHECK: error: tile.sparse_from: values must be a contiguous row-major memref

