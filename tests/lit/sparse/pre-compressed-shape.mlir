// RUN: not %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp' 2>&1 | filecheck %s
// A pre-compressed A feeds the m16n8k32 mma.sp only (its metadata layout): a shape hint for
// another is refused at the mma.
func.func @shape(%av: memref<16x16xf16>, %am: memref<1x64xui32>, %b: memref<32x8xf16>, %c: memref<16x8xf32>) {
  %ta = tile.sparse_from %av, %am : memref<16x16xf16>, memref<1x64xui32> -> !tile.sparse<16x32xf16>
  %tb = tile.load %b[0, 0] : memref<32x8xf16> -> !tile.tile<32x8xf16>
  %tc = tile.load %c[0, 0] : memref<16x8xf32> -> !tile.tile<16x8xf32>
  %td = tile.mma %ta, %tb, %tc {mma_shape = "m16n8k16"} : !tile.sparse<16x32xf16>, !tile.tile<32x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %td, %c[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}
// CHECK: pre-compressed-shape.mlir:[[# @LINE - 4]]:3: error: tile.mma: a pre-compressed A (tile.sparse_from) feeds the 16-bit m16n8k32 mma.sp (its metadata layout), not mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
