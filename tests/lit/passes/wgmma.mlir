// Stages multiplied by warpgroups (`tile-to-warp{wgmma=true producers=0}`, sm_90a: `#warp.schedule` mma = wgmma).
// The warps are W x 1 with warp tile 1 x N/8, so that each warp's accumulator fragments are the rows
// of its warpgroup's m64 tile the wgmma accumulator gives it. A is staged K-major (M x 64, 128-byte
// rows); an N-major B in blocks of 64 columns (K x 64 each, stage s the blocks 2s and 2s + 1, one copy
// a block); both buffers 1024-byte aligned and `#warp.swizzled<1>`: the hardware's 128-byte swizzle.
// The wait before the barrier fences the copies for the async proxy (`proxy_fence`), and each stage
// is one `warp.wgmma` a warp: A's rows from the warpgroup's first (the warp's row, rounded down to 64,
// once before the loop). With 4 stages one stage's products run on while the next's are issued
// (pending = 1): the copies run 2 stages ahead (two groups before the loop), and `warp.wgmma_wait`
// after it waits for the last before the epilogue reads the accumulators.
// The PTX has the copies' fence, then per stage wgmma.fence, 4 mma_async (K 64) on descriptors whose K
// steps are immediates (A: 32 bytes = 2 units, B: 16 rows of 128 bytes = 128 units), commit and wait.
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=0},warp-swizzle-shared' | filecheck %s
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=0},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: not tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{wgmma=true producers=0}' 2>&1 | filecheck %s --check-prefix=SM90

// CHECK-LABEL: func.func @wg
// CHECK-SAME:  warps = 8x1, warp_tile = 1x16, stages = 4, stage_k = 64, reads = ahead, group_m = 8, mma = wgmma>
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x64xf16, #warp.swizzled<1>, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<8x64x64xf16, #warp.swizzled<1>, 3 : i64>
// CHECK:       %[[ROW:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK-COUNT-2: warp.async_commit
// CHECK-NOT:   warp.async_commit
// CHECK:       scf.for
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}]
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}]
// CHECK:       warp.async_wait {pending = {{[0-9]+}} : i64, proxy_fence}
// CHECK-NEXT:  "gpu.barrier"() : () -> ()
// CHECK:       warp.wgmma %[[SA]][%{{.*}}, %[[ROW]]], %[[SB]] after %{{.*}}, {{.*}} {a_blocks = 0 : i64, b_blocks = 2 : i64, pending = 1 : i64} : memref<4x128x64xf16, #warp.swizzled<1>, 3 : i64>, memref<8x64x64xf16, #warp.swizzled<1>, 3 : i64>
// CHECK-NOT:   warp.ldmatrix
// CHECK:       warp.wgmma_wait
// CHECK:       warp.store

// PTX-LABEL:   .extern .shared .align 1024 .b8 smem[];
// PTX:         .entry wg(
// PTX:         cp.async.wait_group
// PTX-NEXT:    fence.proxy.async.shared::cta;
// PTX-NEXT:    bar.sync 0;
// PTX:         wgmma.fence.sync.aligned;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{.*}}}, [[A:%rd[0-9]+]], [[B:%rd[0-9]+]], {{%p[0-9]+}}, 1, 1, 0, 1;
// PTX-NEXT:    add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// PTX-NEXT:    add.s64 [[B1:%rd[0-9]+]], [[B]], 128;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{.*}}}, [[A1]], [[B1]], {{%p[0-9]+}}, 1, 1, 0, 1;
// PTX:         wgmma.commit_group.sync.aligned;
// PTX-NEXT:    wgmma.wait_group.sync.aligned 1;
// PTX:         wgmma.wait_group.sync.aligned 0;
// PTX:         st.global

// SM90: error: tile.mma: wgmma: the warpgroup mma is the arch-specific target sm_90a's, not sm_90's
func.func @wg(%a: memref<256x256xf16>, %b: memref<256x256xf16>, %c: memref<256x256xf32>, %d: memref<256x256xf32>) {
  %ta = tile.load %a[0, 0] : memref<256x256xf16> -> !tile.tile<256x256xf16>
  %tb = tile.load %b[0, 0] : memref<256x256xf16> -> !tile.tile<256x256xf16>
  %tc = tile.load %c[0, 0] : memref<256x256xf32> -> !tile.tile<256x256xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<256x256xf16>, !tile.tile<256x256xf16>, !tile.tile<256x256xf32> -> !tile.tile<256x256xf32>
  tile.store %td, %d[0, 0] : !tile.tile<256x256xf32>, memref<256x256xf32>
  func.return
}
