// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=80},tile-to-warp,warp-split-tf32,cse,warp-to-ptx' -t ptx | filecheck %s
// Pruning ranks magnitudes (abs for signed integers) and needs no error word.

// CHECK-NOT: p_sparsity_error
// CHECK:     abs.s32
// CHECK:     setp.ge.u32
// CHECK-NOT: atom.global
// CHECK:     mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32
func.func @pruned(%a: memref<32x128xsi8>, %b: memref<128x16xsi8>, %d: memref<32x16xsi32>) {
  %ta = tile.load %a[0, 0] : memref<32x128xsi8> -> !tile.tile<32x128xsi8>
  %tb = tile.load %b[0, 0] : memref<128x16xsi8> -> !tile.tile<128x16xsi8>
  %sa = tile.compress %ta {prune} : !tile.tile<32x128xsi8> -> !tile.sparse<32x128xsi8>
  %r = tile.matmul %sa, %tb : !tile.sparse<32x128xsi8>, !tile.tile<128x16xsi8> -> !tile.tile<32x16xsi32>
  tile.store %r, %d[0, 0] : !tile.tile<32x16xsi32>, memref<32x16xsi32>
  func.return
}
