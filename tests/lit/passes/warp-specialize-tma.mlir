// A producer warpgroup's copies by the TMA (`tile-plan{producers=4 tma=1}`, `warp-specialize`):
// the stage's copies become `warp.copy_tma`s that thread 256 (the first producer) issues after
// expecting their bytes at the stage's full barrier (A's 128 x 64 f16 box, 16 KiB, and B's two
// 64 x 64 blocks: 32 KiB). With every copy the TMA's, nothing is committed or waited for: full
// expects that one arrival a phase. A pre-compressed A keeps its metadata on cp.async, whose copies
// each producer thread hands to the stage's full barrier (`warp.async_arrive`: it arrives once they
// land, no group, no wait): full expects the 128 producers and the TMA thread.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=4 tma=1},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=4 tma=1},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @ws
// CHECK-SAME:  producers = 4, copy = tma>
// CHECK:       %[[FULL:.*]] = memref.alloc() {alignment = 8 : i64} : memref<4xi64, 3 : i64>
// CHECK:       warp.mbarrier_init %[[FULL]] {count = 1 : i64}
// CHECK:       scf.for
// CHECK:         warp.mbarrier_wait
// CHECK:         warp.mbarrier_expect_tx %[[FULL]][%[[S:.*]]] {bytes = 32768 : i64, thread = 256 : i64}
// CHECK-NEXT:    warp.copy_tma %a[{{.*}}], %{{.*}}[%{{.*}}], %[[FULL]][%[[S]]] {{{.*}}thread = 256 : i64} : memref<512x512xf16>, memref<4x128x64xf16, 3 : i64>
// CHECK:         warp.copy_tma %b[{{.*}}], %{{.*}}[%{{.*}}], %[[FULL]][%[[S]]] {{.*}}memref<8x64x64xf16, 3 : i64>
// CHECK:         warp.copy_tma %b
// CHECK-NOT:     warp.async_commit
// CHECK:       warp.retire

// CHECK-LABEL: func.func @sp
// CHECK:       %[[SFULL:.*]] = memref.alloc() {alignment = 8 : i64} : memref<4xi64, 3 : i64>
// CHECK:       warp.mbarrier_init %[[SFULL]] {count = 129 : i64}
// CHECK:         warp.mbarrier_expect_tx %[[SFULL]][%{{.*}}] {bytes = 49152 : i64, thread = 256 : i64}
// CHECK-NEXT:    warp.copy_tma %a_values
// CHECK:         warp.copy_tma %b
// CHECK:         warp.copy_tma %b
// CHECK-NEXT:    warp.copy_meta_async %a_meta
// CHECK-NEXT:    warp.async_arrive %[[SFULL]][%{{.*}}]
// CHECK-NOT:     warp.async_commit
// CHECK:       warp.retire

// The maps are parameters after the pointers; thread 256 expects and copies, 2-d boxes at
// (column, row) of A and (column, K row) of B.
// PTX-LABEL:   .visible .entry ws(
// PTX:         .param .u64 p_d,
// PTX-NEXT:    .param .align 64 .b8 p_a_map0[128],
// PTX-NEXT:    .param .align 64 .b8 p_b_map0[128]
// PTX:         setp.eq.u32 [[ONE:%p[0-9]+]], {{%r[0-9]+}}, 256;
// PTX-NEXT:    mov.b64 [[AMAP:%rd[0-9]+]], p_a_map0;
// PTX-NEXT:    cvta.param.u64 [[AMAP]], [[AMAP]];
// PTX:         mbarrier.init.shared::cta.b64 [{{%r[0-9]+}}], 1;
// PTX:         @[[ONE]] mbarrier.arrive.expect_tx.shared::cta.b64 {{%rd[0-9]+}}, [{{%r[0-9]+}}], 32768;
// PTX:         @[[ONE]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[AMAP]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
// PTX-NOT:     cp.async.cg
// PTX:         wgmma.mma_async
// PTX-LABEL:   .visible .entry sp(
// PTX:         .param .align 64 .b8 p_a_values_map0[128],
// PTX-NEXT:    .param .align 64 .b8 p_b_map0[128]
// PTX:         mbarrier.init.shared::cta.b64 [{{%r[0-9]+}}], 129;
// PTX:         cp.async.bulk.tensor.2d
// PTX:         cp.async.cg.shared.global
// PTX:         cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{{%r[0-9]+}}];
// PTX-NOT:     cp.async.wait_group
func.func @ws(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
func.func @sp(%a_values: memref<512x256xf16>, %a_meta: memref<32x256xui32>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.sparse_from %a_values, %a_meta : memref<512x256xf16>, memref<32x256xui32> -> !tile.sparse<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.sparse<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
