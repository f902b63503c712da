// tf32 multiplied by warpgroups (`tile-to-warp{wgmma=true}`, sm_90a): wgmma reads tf32 K-major from
// the stage itself (f32 elements, stages of K 32: 128-byte rows), so a rounded operand is rounded in
// shared memory. Here A is K-major and rounded rna: copied by cp.async, then each thread rounds its
// own copies where they lie once they have landed (`warp.round_stage`, which fences for the async
// proxy in place of the wait); B is N-major (row-major): the 32-bit transposing fill stages it
// K-major, rounded on its way in (`warp.fill_store` with `rounding`). The PTX has the in-place
// rounding (16-byte shared loads, rna as half a tf32 ulp added to each finite word, stores, the fence) before the barrier, and per
// stage 4 `wgmma.mma_async ... m64n256k8.f32.tf32.tf32` whose immediates are scale-a and scale-b only
// (no transposes for tf32), K steps 32 bytes (2 units).
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true},warp-swizzle-shared' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @wgtf32
// CHECK-SAME:  stages = 4, stage_k = 32, {{.*}}fill = b, mma = wgmma>
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x32xf32, #warp.swizzled<1>, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x256x32xf32, #warp.swizzled<1>, 3 : i64>
// CHECK:       warp.copy_async %{{.*}}, %[[SA]][{{.*}}] {{.*}}vector = 16 : i64
// CHECK:       scf.for
// CHECK:       %[[W:.*]] = warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:  %[[R:.*]] = warp.round_stage %[[SA]][{{.*}}] after %[[W]] {threads = 256 : i64, vector = 16 : i64, rounding = #tile<rounding rna>, proxy_fence}
// CHECK:       warp.fill_store {{.*}}, %[[SB]][{{.*}}] {threads = 256 : i64, rounding = #tile<rounding rna>}
// CHECK:       warp.wgmma %[[SA]][{{.*}}], %[[SB]] after %[[R]], {{.*}} {a_blocks = 0 : i64, b_blocks = 0 : i64, pending = 1 : i64} : {{.*}} -> !warp.frag<acc, f32
// CHECK-NOT:   warp.ldmatrix
// CHECK:       warp.wgmma_wait

// PTX:         cp.async.wait_group 1;
// PTX:         ld.shared.v4.b32
// PTX:         @%p{{[0-9]+}} add.s32 %r{{[0-9]+}}, %r{{[0-9]+}}, 4096;
// PTX:         st.shared.v4.b32
// PTX:         fence.proxy.async.shared::cta;
// PTX-NEXT:    bar.sync 0;
// PTX:         wgmma.fence.sync.aligned;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{{.*}}}, [[A:%rd[0-9]+]], [[B:%rd[0-9]+]], {{%p[0-9]+}}, 1, 1;
// PTX-NEXT:    add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// PTX-NEXT:    add.s64 [[B1:%rd[0-9]+]], [[B]], 2;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{{.*}}}, [[A1]], [[B1]], {{%p[0-9]+}}, 1, 1;
// PTX:         wgmma.commit_group.sync.aligned;
func.func @wgtf32(%a: memref<2048x256xf32>, %b: memref<256x2048xf32>, %c: memref<2048x2048xf32>, %d: memref<2048x2048xf32>) {
  %0 = tile.load %a[0, 0] : memref<2048x256xf32> -> !tile.tile<2048x256xf32>
  %ta = tile.cast %0 {rounding = #tile<rounding rna>} : !tile.tile<2048x256xf32> -> !tile.tile<2048x256xtf32>
  %1 = tile.load %b[0, 0] : memref<256x2048xf32> -> !tile.tile<256x2048xf32>
  %tb = tile.cast %1 {rounding = #tile<rounding rna>} : !tile.tile<256x2048xf32> -> !tile.tile<256x2048xtf32>
  %tc = tile.load %c[0, 0] : memref<2048x2048xf32> -> !tile.tile<2048x2048xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<2048x256xtf32>, !tile.tile<256x2048xtf32>, !tile.tile<2048x2048xf32> -> !tile.tile<2048x2048xf32>
  tile.store %td, %d[0, 0] : !tile.tile<2048x2048xf32>, memref<2048x2048xf32>
  func.return
}
