// 8-bit integers multiplied by warpgroups (`tile-to-warp{wgmma=true}`, sm_90a): K-major A and B (the
// integer forms have no transposes) in stages of K 128 (128-byte rows of 8-bit elements, 1024-byte
// aligned, `#warp.swizzled<1>`), one `warp.wgmma` a warp and stage, s32 accumulators.
// In the PTX, per stage 4 `wgmma.mma_async ... m64n128k32.s32.s8.s8` whose only operand after the
// descriptors is scale-d (no immediates), both descriptors' K steps 32 bytes (2 units).
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true},warp-swizzle-shared' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @wgi8
// CHECK-SAME:  stages = 4, stage_k = 128, {{.*}}mma = wgmma>
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x128xsi8, #warp.swizzled<1>, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x128xsi8, #warp.swizzled<1>, 3 : i64>
// CHECK:       scf.for
// CHECK:       warp.wgmma %[[SA]][{{.*}}], %[[SB]] after {{.*}} {a_blocks = 0 : i64, b_blocks = 0 : i64, pending = 1 : i64} : {{.*}} -> !warp.frag<acc, si32
// CHECK-NOT:   warp.ldmatrix
// CHECK:       warp.wgmma_wait

// PTX:         wgmma.fence.sync.aligned;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {{{.*}}}, [[A:%rd[0-9]+]], [[B:%rd[0-9]+]], {{%p[0-9]+}};
// PTX-NEXT:    add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// PTX-NEXT:    add.s64 [[B1:%rd[0-9]+]], [[B]], 2;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {{{.*}}}, [[A1]], [[B1]], {{%p[0-9]+}};
// PTX:         wgmma.commit_group.sync.aligned;
func.func @wgi8(%a: memref<512x256xsi8>, %b: memref<256x256xsi8, strided<[1, 256]>>, %c: memref<512x256xsi32>, %d: memref<512x256xsi32>) {
  %ta = tile.load %a[0, 0] : memref<512x256xsi8> -> !tile.tile<512x256xsi8>
  %tb = tile.load %b[0, 0] : memref<256x256xsi8, strided<[1, 256]>> -> !tile.tile<256x256xsi8>
  %tc = tile.load %c[0, 0] : memref<512x256xsi32> -> !tile.tile<512x256xsi32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<512x256xsi8>, !tile.tile<256x256xsi8>, !tile.tile<512x256xsi32> -> !tile.tile<512x256xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<512x256xsi32>, memref<512x256xsi32>
  func.return
}
