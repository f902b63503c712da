// CTAs in pairs that share B's stages (`tile-plan{producers=4 tma=1 cluster=2}`, `warp-specialize`):
// B's two 64 x 64 blocks a stage are multicast, one issued by each CTA's producer (rank 0, rank 1)
// to both; every CTA expects the whole stage (A's box and both blocks: 32 KiB). The consumers release
// a stage at their own `empty` barrier and, lane 0 a warp, at the peer's (`warp.mbarrier_arrive_peers`),
// so `empty` expects 256 + 8 arrivals; the barriers are published to the cluster (`warp.cluster_sync`)
// before anyone arrives; the producers' tail waits until every stage was released by both CTAs, and
// the consumers release the stage still in flight after their loop.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=4 tma=1 cluster=2},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=4 tma=1 cluster=2},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @pair
// CHECK-SAME:  copy = tma, cluster = 2>
// CHECK:       %[[FULL:.*]] = memref.alloc() {alignment = 8 : i64} : memref<4xi64, 3 : i64>
// CHECK:       %[[EMPTY:.*]] = memref.alloc() {alignment = 8 : i64} : memref<4xi64, 3 : i64>
// CHECK:       warp.mbarrier_init %[[FULL]] {count = 1 : i64}
// CHECK:       warp.mbarrier_init %[[EMPTY]] {count = 264 : i64}
// CHECK-NEXT:  warp.cluster_sync
// CHECK:         warp.mbarrier_expect_tx %[[FULL]][%{{.*}}] {bytes = 32768 : i64, thread = 256 : i64}
// CHECK-NEXT:    warp.copy_tma %a
// CHECK-NOT:     multicast
// CHECK-SAME:    memref<4x128x64xf16, 3 : i64>
// CHECK:         warp.copy_tma %b{{.*}}multicast = 2 : i64, rank = 0 : i64
// CHECK:         warp.copy_tma %b{{.*}}multicast = 2 : i64, rank = 1 : i64
// CHECK:       scf.for
// CHECK:         arith.divui
// CHECK:         warp.mbarrier_wait %[[EMPTY]]
// CHECK:       warp.retire
// CHECK:       scf.for
// CHECK:         warp.mbarrier_wait %[[FULL]]
// CHECK:           warp.mbarrier_arrive %[[EMPTY]]
// CHECK-NEXT:      warp.mbarrier_arrive_peers %[[EMPTY]][%{{.*}}] {cluster = 2 : i64}
// CHECK:       warp.wgmma_wait
// CHECK:       warp.mbarrier_arrive %[[EMPTY]]
// CHECK-NEXT:  warp.mbarrier_arrive_peers %[[EMPTY]]

// PTX-LABEL:   .visible .entry pair(
// PTX:         .reqnctapercluster 2, 1, 1
// PTX:         mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// PTX:         mov.b16 [[MASK:%h[0-9]+]], 3;
// PTX:         fence.mbarrier_init.release.cluster;
// PTX-NEXT:    barrier.cluster.arrive.release.aligned;
// PTX-NEXT:    barrier.cluster.wait.acquire.aligned;
// PTX:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [
// PTX:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{{%r[0-9]+}}], [{{%rd[0-9]+}}, {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}], [[MASK]];
// PTX:         mapa.shared::cluster.u32 [[THERE:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// PTX-NEXT:    @{{%p[0-9]+}} mbarrier.arrive.shared::cluster.b64 _, [[[THERE]]];
func.func @pair(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
