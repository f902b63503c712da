// RUN: not %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp' 2>&1 | filecheck %s
// warp.load_meta addresses one batch's metadata words in 32 bits: a pre-compressed A whose
// metadata passes 4 GiB (M x K / 8 bytes) is refused at the mma, not miscompiled.
func.func @big(%v: memref<1048576x32768xf16>, %m: memref<65536x32768xui32>, %b: memref<65536x64xf16>, %d: memref<1048576x64xf32>) {
  %a = tile.sparse_from %v, %m : memref<1048576x32768xf16>, memref<65536x32768xui32> -> !tile.sparse<1048576x65536xf16>
  %tb = tile.load %b[0, 0] : memref<65536x64xf16> -> !tile.tile<65536x64xf16>
  %z = tile.constant 0.0 : !tile.tile<1048576x64xf32>
  %td = tile.mma %a, %tb, %z : !tile.sparse<1048576x65536xf16>, !tile.tile<65536x64xf16>, !tile.tile<1048576x64xf32> -> !tile.tile<1048576x64xf32>
  tile.store %td, %d[0, 0] : !tile.tile<1048576x64xf32>, memref<1048576x64xf32>
  func.return
}
// CHECK: pre-compressed-limits.mlir:[[# @LINE - 4]]:3: error: tile.mma: the metadata of a 1048576 x 65536 pre-compressed A is 8589934592 bytes; more than 4 GiB a batch is not supported (its offsets are 32-bit)
