// A stage wider than a swizzle span is copied by the TMA as one box of several (`warp-tma-blocks`):
// B's N-major stage of 128 columns is two 64-column blocks, stages s and s + 1 of one buffer, which
// `warp-specialize` copies one by one; merged, one `warp.copy_tma` fills both (`blocks = 2`), its
// bytes the stage's (32 KiB expected, as before). Where the window's columns are not whole blocks
// (200), the copies stay apart: a block past the edge would read the next row's columns.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=4 tma=1},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize,warp-tma-blocks' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=4 tma=1},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @whole
// CHECK:         warp.mbarrier_expect_tx %[[FULL:.*]][%[[S:.*]]] {bytes = 32768 : i64, thread = 256 : i64}
// CHECK-NEXT:    warp.copy_tma %a[{{.*}}], %{{.*}}[%{{.*}}], %[[FULL]][%[[S]]] {{{.*}}thread = 256 : i64} : memref<512x512xf16>, memref<4x128x64xf16, 3 : i64>
// CHECK:         warp.copy_tma %b[{{.*}}], %{{.*}}[%{{.*}}], %[[FULL]][%[[S]]] {{{.*}}thread = 256 : i64, blocks = 2 : i64} : memref<512x512xf16>, memref<8x64x64xf16, 3 : i64>
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @ragged
// CHECK:         warp.copy_tma %b[{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 512, 200>, thread = 256 : i64} :
// CHECK:         warp.copy_tma %b[{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 512, 200>, thread = 256 : i64} :
// CHECK-NOT:     warp.copy_tma

// B's map is three-dimensional (the block's 64 columns, K, the blocks), its coordinates 0, the K
// row and the column over 64; A's stays a 2-d box.
// PTX-LABEL:   .visible .entry whole(
// PTX:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:         mov.u32 [[ZERO:%r[0-9]+]], 0;
// PTX-NEXT:    shr.u32 [[BLOCK:%r[0-9]+]], {{%r[0-9]+}}, 6;
// PTX:         @{{%p[0-9]+}} cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [{{%rd[0-9]+}}, {[[ZERO]], {{%r[0-9]+}}, [[BLOCK]]}], [{{%r[0-9]+}}];
// PTX-NOT:     cp.async.bulk.tensor
// PTX:         wgmma.mma_async
// PTX-LABEL:   .visible .entry ragged(
// PTX-COUNT-3: cp.async.bulk.tensor.2d
// PTX-NOT:     cp.async.bulk.tensor.3d
func.func @whole(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
func.func @ragged(%a: memref<512x512xf16>, %b: memref<512x200xf16>, %d: memref<512x200xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x200xf16> -> !tile.tile<512x200xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x200xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x200xf16>, !tile.tile<512x200xf32> -> !tile.tile<512x200xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x200xf32>, memref<512x200xf32>
  func.return
}
