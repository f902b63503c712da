// An 8-bit N-major B transposed in shared memory (`#warp.schedule` transpose): s8 with A M-major
// and B N-major on sm_90a, which tile-plan gives warpgroups by itself, A from registers by byte
// pairs and a producer warpgroup. `warp-stage-shared` copies B as stored into a ring of its own
// (3 stages of K x N), each producer thread the rows it transposes (`for_transpose`), and after
// the wait transposes the stage into B's K-major ring (2 stages: no products in flight), which
// the warpgroups read by their third index. (128 CTAs of 128 x 256: a wave, `configs.WGMMA_WAVE`.)
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{tune-cache=""},tile-distribute,tile-distribute-epilogue,warp-stage-shared' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{tune-cache=""},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize' | filecheck %s --check-prefix=SPEC
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{tune-cache="" transpose-first=0},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @both
// CHECK-SAME:    pair_bytes = a, mma = wgmma, producers = 4, transpose = b>
// CHECK:         %[[A:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<3x128x128xsi8, 3 : i64>
// CHECK-NEXT:    %[[KB:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<2x256x128xsi8, 3 : i64>
// CHECK-NEXT:    %[[RAW:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<3x128x256xsi8, 3 : i64>
// CHECK:         scf.for %[[KT:[^ ]+]] = 
// CHECK:           %[[S:.*]] = arith.remui %[[KT]], %{{.*}} : index
// CHECK:           warp.copy_async %b[{{.*}}], %[[RAW]][%{{.*}}] {{{.*}}vector = 16 : i64, for_transpose{{.*}}}
// CHECK:           %[[W:.*]] = warp.async_wait {pending = 0 : i64, proxy_fence}
// CHECK-NEXT:      %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:      %[[R:.*]] = arith.remui %[[KT]], %[[TWO]] : index
// CHECK-NEXT:      %[[T:.*]] = warp.transpose_stage %[[RAW]][%[[S]]] -> %[[KB]][%[[R]]] after %[[W]] {threads = 128 : i64, first_thread = 256 : i64, proxy_fence}
// CHECK-NEXT:      "gpu.barrier"() : () -> ()
// CHECK:           warp.wgmma %[[A]][%[[S]], %{{.*}}, %[[R]]], %[[KB]] after %[[T]]

// The producers transpose stage kt - 2 before they wait for stage kt's slot (the release their
// transpose needs was waited for the iteration before, on every iteration: the K-major ring is
// shorter than the stages') and copy it.
// SPEC:          scf.for
// SPEC:            scf.if
// SPEC:              warp.async_wait {pending = 1 : i64, proxy_fence}
// SPEC-NEXT:         warp.transpose_stage
// SPEC:              warp.mbarrier_arrive
// SPEC:            warp.mbarrier_wait
// SPEC:            scf.if
// SPEC:              warp.copy_async %a
// SPEC-NEXT:         warp.copy_async %b{{.*}}for_transpose
// SPEC:            warp.async_commit

// A chunk of 16 lines by 16 bytes across: 16 reads of 16 bytes (a row each), 4 x 4 byte blocks
// transposed by prmt, 16 stores of 16 bytes (a line each), then the fence for the warpgroups.
// PTX-LABEL:   .visible .entry both(
// PTX:         cp.async.wait_group 1;
// PTX-COUNT-16: ld.shared.v4.b32
// PTX:         prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, 20800;
// PTX-COUNT-16: st.shared.v4.b32
// PTX-NEXT:    fence.proxy.async.shared::cta;

func.func @both(%a: memref<4096x512xsi8, strided<[1, 4096]>>, %b: memref<512x1024xsi8>, %d: memref<4096x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<4096x512xsi8, strided<[1, 4096]>> -> !tile.tile<4096x512xsi8>
  %tb = tile.load %b[0, 0] : memref<512x1024xsi8> -> !tile.tile<512x1024xsi8>
  %zero = tile.constant 0 : !tile.tile<4096x1024xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<4096x512xsi8>, !tile.tile<512x1024xsi8>, !tile.tile<4096x1024xsi32> -> !tile.tile<4096x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<4096x1024xsi32>, memref<4096x1024xsi32>
  func.return
}
