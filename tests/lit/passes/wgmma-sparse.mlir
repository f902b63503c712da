// A pre-compressed 2:4 A (`tile.sparse_from`) multiplied by sparse warpgroups (`tile-to-warp{wgmma=true producers=0}`,
// sm_90a). A's stage holds its kept values, K-major: stages of K 128 are its 64 values' 128-byte rows;
// an N-major B in blocks of 64 columns (K 128 x 64 each); the metadata words staged in a third ring as
// for mma.sp. Each stage is one `warp.wgmma` a warp, with `meta` the warp's own words of the stage's
// 4 k32 steps (`warp.load_meta_shared` at the warp's 16 rows).
// In the PTX, per stage 4 `wgmma.mma_async.sp ... m64n128k32` on descriptors whose K steps are
// immediates (A: 32 bytes = 2 units, B: 32 rows of 128 bytes = 256 units), each with its step's
// metadata register and selector 0. With a ring of 4 stages a stage's products stay in flight, so
// the copies run 2 stages ahead (pending = 1); the loop's one iteration, too few for the pairs
// `warp-unroll-sparse` makes (each with its own metadata registers, which the tensor cores read
// until the products retire), keeps nothing running (pending = 0), the last stage one. (producers=0:
// the kernel without the producer warpgroup it would take by itself.)
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=0},warp-swizzle-shared' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=0},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: not tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=0 stage-k=32}' 2>&1 | filecheck %s --check-prefix=STAGEK

// CHECK-LABEL: func.func @wgsp
// CHECK-SAME:  warps = 8x1, warp_tile = 1x16, stages = 4, stage_k = 128, {{.*}}mma = wgmma>
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x64xf16, #warp.swizzled<1>, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<8x128x64xf16, #warp.swizzled<1>, 3 : i64>
// CHECK:       %[[SM:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x4xui32, 3 : i64>
// CHECK:       scf.for
// CHECK:       warp.async_wait {pending = 1 : i64, proxy_fence}
// CHECK:       warp.copy_meta_async %a_meta[{{.*}}], %[[SM]][{{.*}}]
// CHECK:       %[[E0:.*]], %[[E1:.*]], %[[E2:.*]], %[[E3:.*]] = warp.load_meta_shared %[[SM]][{{.*}}]
// CHECK-NEXT:  warp.wgmma %[[SA]][{{.*}}], %[[SB]] after {{.*}} meta %[[E0]], %[[E1]], %[[E2]], %[[E3]] : {{.*}} {a_blocks = 0 : i64, b_blocks = 2 : i64, pending = 0 : i64}
// CHECK-NOT:   warp.ldmatrix
// CHECK:       warp.wgmma {{.*}}pending = 1 : i64}
// CHECK-NEXT:  warp.async_wait {pending = 0 : i64}
// CHECK-NEXT:  warp.wgmma_wait

// PTX:         .target sm_90a
// PTX:         ld.shared.v4.u32 {[[E0:%r[0-9]+]], [[E1:%r[0-9]+]], [[E2:%r[0-9]+]], [[E3:%r[0-9]+]]}
// PTX:         wgmma.fence.sync.aligned;
// PTX-NEXT:    wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {{{.*}}}, [[A:%rd[0-9]+]], [[B:%rd[0-9]+]], [[E0]], 0, {{%p[0-9]+}}, 1, 1, 0, 1;
// PTX-NEXT:    add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// PTX-NEXT:    add.s64 [[B1:%rd[0-9]+]], [[B]], 256;
// PTX-NEXT:    wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {{{.*}}}, [[A1]], [[B1]], [[E1]], 0, {{%p[0-9]+}}, 1, 1, 0, 1;
// PTX:         wgmma.commit_group.sync.aligned;
// PTX-NEXT:    wgmma.wait_group.sync.aligned 0;

// STAGEK: error: tile.mma: wgmma: a pre-compressed A's stages are K 128 or 64 for the descriptors
func.func @wgsp(%a_values: memref<256x128xf16>, %a_meta: memref<16x128xui32>, %b: memref<256x128xf16>, %c: memref<256x128xf32>, %d: memref<256x128xf32>) {
  %ta = tile.sparse_from %a_values, %a_meta : memref<256x128xf16>, memref<16x128xui32> -> !tile.sparse<256x256xf16>
  %tb = tile.load %b[0, 0] : memref<256x128xf16> -> !tile.tile<256x128xf16>
  %tc = tile.load %c[0, 0] : memref<256x128xf32> -> !tile.tile<256x128xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.sparse<256x256xf16>, !tile.tile<256x128xf16>, !tile.tile<256x128xf32> -> !tile.tile<256x128xf32>
  tile.store %td, %d[0, 0] : !tile.tile<256x128xf32>, memref<256x128xf32>
  func.return
}
