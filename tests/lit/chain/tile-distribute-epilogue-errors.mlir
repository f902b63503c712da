// What cannot follow the mma is refused at the op, saying what can.
// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=90},tile-plan{stages=0},tile-distribute' | filecheck %s

// CHECK: error: tile.map: a tile.map of the epilogue must take the mma result or a value computed from it
// CHECK: error: tile.cast: after the mma, tile.cast converts the mma result or values computed from it by f32 -> f16
func.func @map_not_on_the_result(%a: memref<32x64xf16>, %b: memref<64x32xf16>, %c: memref<32x32xf32>, %d: memref<32x32xf32>) {
  %ta = tile.load %a[0, 0] : memref<32x64xf16> -> !tile.tile<32x64xf16>
  %tb = tile.load %b[0, 0] : memref<64x32xf16> -> !tile.tile<64x32xf16>
  %tc = tile.load %c[0, 0] : memref<32x32xf32> -> !tile.tile<32x32xf32>
  %acc = tile.mma %ta, %tb, %tc : !tile.tile<32x64xf16>, !tile.tile<64x32xf16>, !tile.tile<32x32xf32> -> !tile.tile<32x32xf32>
  %y = tile.map %tc : !tile.tile<32x32xf32> -> !tile.tile<32x32xf32> {
  ^bb0(%x: f32):
    tile.yield %x : f32
  }
  %s = tile.map %acc, %y : !tile.tile<32x32xf32>, !tile.tile<32x32xf32> -> !tile.tile<32x32xf32> {
  ^bb0(%x: f32, %w: f32):
    %r = arith.addf %x, %w : f32
    tile.yield %r : f32
  }
  tile.store %s, %d[0, 0] : !tile.tile<32x32xf32>, memref<32x32xf32>
  func.return
}

// -----
func.func @cast_before_the_mma_result(%a: memref<32x64xf16>, %b: memref<64x32xf16>, %c: memref<32x32xf32>, %d: memref<32x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<32x64xf16> -> !tile.tile<32x64xf16>
  %tb = tile.load %b[0, 0] : memref<64x32xf16> -> !tile.tile<64x32xf16>
  %tc = tile.load %c[0, 0] : memref<32x32xf32> -> !tile.tile<32x32xf32>
  %acc = tile.mma %ta, %tb, %tc : !tile.tile<32x64xf16>, !tile.tile<64x32xf16>, !tile.tile<32x32xf32> -> !tile.tile<32x32xf32>
  %h = tile.cast %tc : !tile.tile<32x32xf32> -> !tile.tile<32x32xf16>
  tile.store %h, %d[0, 0] : !tile.tile<32x32xf16>, memref<32x32xf16>
  func.return
}
