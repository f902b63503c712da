// Sparse warpgroups with a stage's products in flight (`warp-unroll-sparse`). 8 stages of K 128 in
// a ring of 4: `warp-pipeline` runs 7 in its loop, each `warp.wgmma` leaving its products running
// (pending = 1) while the next stage's `warp.load_meta_shared` would write the metadata registers
// it still reads. The pass unrolls that loop by two (step 2, three pairs, each copy its own
// metadata words); the stage left over runs in the old loop, after a `warp.wgmma_wait` (its
// carried accumulators are copied into the loop's registers), with nothing running (pending = 0).
// In the PTX each copy loads its own registers and waits with one group running; warp-to-ptx
// refuses the loop not unrolled. (producers=0: the kernel without the producer warpgroup it would
// take by itself, whose consumers' loop is unrolled alike: warp-specialize-tma.mlir.)
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=0},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-pipeline,warp-unroll-sparse' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=0},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: not tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=0},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-pipeline,warp-swizzle-shared,warp-to-ptx' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK-LABEL: func.func @unrolled
// CHECK-SAME:  stages = 4, stage_k = 128
// CHECK:       %[[PAIRS:[0-9]+]], {{.*}} = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK:         warp.async_wait {pending = 1 : i64, proxy_fence}
// CHECK:         %[[E0:.*]], %{{.*}}, %{{.*}}, %{{.*}} = warp.load_meta_shared
// CHECK-NEXT:    warp.wgmma {{.*}} meta %[[E0]], {{.*}}pending = 1 : i64}
// CHECK:         warp.async_wait {pending = 1 : i64, proxy_fence}
// CHECK:         %[[E1:.*]], %{{.*}}, %{{.*}}, %{{.*}} = warp.load_meta_shared
// CHECK-NEXT:    warp.wgmma {{.*}} meta %[[E1]], {{.*}}pending = 1 : i64}
// CHECK-NEXT:    scf.yield
// CHECK:       %[[DONE:[0-9]+]], {{.*}} = warp.wgmma_wait %[[PAIRS]], {{.*}}
// CHECK:       %[[REST:[0-9]+]], {{.*}} = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{[0-9]+}} = %[[DONE]],
// CHECK:         warp.load_meta_shared
// CHECK-NEXT:    warp.wgmma {{.*}}pending = 0 : i64}
// CHECK-NEXT:    scf.yield
// CHECK-NEXT:  }
// CHECK:       warp.wgmma {{.*}} after %{{[0-9]+}}, %[[REST]], {{.*}}pending = 1 : i64}
// CHECK-NEXT:  warp.async_wait {pending = 0 : i64}
// CHECK-NEXT:  warp.wgmma_wait

// PTX:         ld.shared.v4.u32 {[[M0:%r[0-9]+]], {{.*}}}
// PTX:         wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {{{.*}}}, {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[M0]], 0,
// PTX:         wgmma.wait_group.sync.aligned 1;
// PTX-NOT:     [[M0]]
// PTX:         ld.shared.v4.u32 {[[M1:%r[0-9]+]], {{.*}}}
// PTX:         wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {{{.*}}}, {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[M1]], 0,
// PTX:         wgmma.wait_group.sync.aligned 1;
// PTX:         bra.uni

// ERR: warp-unroll-sparse.mlir:[[# @LINE + 1]]:1: error: func.func: run warp-unroll-sparse before warp-to-ptx (a loop's next stage would load metadata or A fragments into the registers of a warp.wgmma that still runs)
func.func @unrolled(%a_values: memref<128x512xf16>, %a_meta: memref<8x512xui32>, %b: memref<1024x128xf16>, %d: memref<128x128xf32>) {
  %ta = tile.sparse_from %a_values, %a_meta : memref<128x512xf16>, memref<8x512xui32> -> !tile.sparse<128x1024xf16>
  %tb = tile.load %b[0, 0] : memref<1024x128xf16> -> !tile.tile<1024x128xf16>
  %tc = tile.constant 0.0 : !tile.tile<128x128xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.sparse<128x1024xf16>, !tile.tile<1024x128xf16>, !tile.tile<128x128xf32> -> !tile.tile<128x128xf32>
  tile.store %td, %d[0, 0] : !tile.tile<128x128xf32>, memref<128x128xf32>
  func.return
}
