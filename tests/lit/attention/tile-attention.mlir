// tile-attention: S = Q K^T, P = softmax(S), O = P V becomes the FlashAttention-2 schedule at the
// warp level (here 16 query rows a warp, 64-key blocks, Q in registers). Q's A fragments are loaded
// once; K^T and V blocks of 64 rows go through two cp.async stages (the next block copied while this
// one is multiplied, after the block's one barrier); the blocks every row of the CTA sees whole run
// in a loop without masks, the rest (ragged S = 100, causal) in a second loop that masks S; S is
// reduced by rows, exponentiated and cast; its accumulators are read as P's A fragments
// (warp.to_lhs) for O += P V, whose V fragments come from ldmatrix .trans. After the loops O (1 / l)
// is stored. The PTX keeps S and P in registers: its only stores are O's, after the loops.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90},tile-attention{rows-per-warp=16 block-n=64 q-shared=no}' | filecheck %s
// RUN: tilemma compile %s --attention-rows 16 --attention-block-n 64 --attention-q-shared no | filecheck %s --check-prefix=PTX
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90},tile-attention' | filecheck %s --check-prefix=DEFAULT
// RUN: not tilemma-opt %s -p 'tile-select-mma{sm=90},tile-attention{block-n=48}' 2>&1 | filecheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @attention_b1h2_s100_d64_f16_causal
// CHECK-SAME:    warp.role = ["q"]
// CHECK-SAME:    warp.grid = array<i64: 2, 2, 1>, warp.block = array<i64: 128, 1, 1>
// CHECK:         %[[SK:.*]] = memref.alloc() {{.*}} : memref<2x64x64xf16, 3 : i64>
// CHECK:         %[[SV:.*]] = memref.alloc() {{.*}} : memref<2x64x64xf16, 3 : i64>
// CHECK-COUNT-4: warp.load %{{.*}} -> !warp.frag<a, f16
// CHECK:         arith.minui
// CHECK:         warp.copy_async {{.*}}transpose
// CHECK:         %{{.*}}, %{{.*}} = warp.map : -> !warp.rows<f32
// CHECK:         scf.for
// CHECK:           warp.async_wait {pending = 0 : i64}
// CHECK-NEXT:      "gpu.barrier"
// CHECK:           scf.if
// CHECK:             warp.copy_async
// CHECK:           warp.ldmatrix %[[SK]]
// CHECK-NOT:       warp.mask
// CHECK:           warp.row_reduce {{.*}} {kind = "max"}
// CHECK:           math.exp2 {{.*}} fastmath<afn>
// CHECK:           warp.row_reduce {{.*}} {kind = "add"}
// CHECK:           warp.cast {{.*}} -> !warp.frag<acc, f16
// CHECK:           warp.to_lhs {{.*}} -> !warp.frag<a, f16
// CHECK:           warp.ldmatrix %[[SV]]{{.*}}trans
// CHECK:           warp.mma
// CHECK-NOT:       "gpu.barrier"
// CHECK:           scf.yield
// CHECK:         arith.subi
// CHECK:         scf.for
// CHECK:           warp.mask {{.*}} cols {{.*}}causal
// CHECK:           warp.row_reduce {{.*}} {kind = "max"}
// CHECK:           scf.yield
// CHECK:         arith.divf
// CHECK-COUNT-8: warp.store

// PTX:     .entry attention_b1h2_s100_d64_f16_causal
// PTX-NOT: st.shared
// PTX:     cp.async.cg.shared.global
// PTX:     shfl.sync.bfly.b32
// PTX:     ex2.approx.ftz.f32
// PTX:     mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX-NOT: st.
// PTX:     bra.uni $k_loop
// PTX-NOT: st.
// PTX:     bra.uni $k_loop
// PTX-NOT: st.shared
// PTX-COUNT-16: st.global.b32
// PTX-NOT: st.
// PTX:     ret;

// Head dim 64 by default: 32 query rows a warp (128 a CTA: one query block), Q in registers.
// DEFAULT:       warp.grid = array<i64: 1, 2, 1>
// DEFAULT-COUNT-8: warp.load %{{.*}} -> !warp.frag<a, f16

// BAD: tile-attention: block-n must be 32, 64 or 128, got 48

builtin.module {
  func.func @attention_b1h2_s100_d64_f16_causal(%q: memref<2x100x64xf16>, %k: memref<2x64x100xf16, strided<[6400, 1, 64]>>, %v: memref<2x100x64xf16>, %o: memref<2x100x64xf16>) {
    %tq = tile.load %q[0, 0, 0] : memref<2x100x64xf16> -> !tile.tile<2x100x64xf16>
    %tkt = tile.load %k[0, 0, 0] : memref<2x64x100xf16, strided<[6400, 1, 64]>> -> !tile.tile<2x64x100xf16>
    %tv = tile.load %v[0, 0, 0] : memref<2x100x64xf16> -> !tile.tile<2x100x64xf16>
    %zs = tile.constant 0.0 : !tile.tile<2x100x100xf32>
    %s = tile.mma %tq, %tkt, %zs : !tile.tile<2x100x64xf16>, !tile.tile<2x64x100xf16>, !tile.tile<2x100x100xf32> -> !tile.tile<2x100x100xf32>
    %p = tile.softmax %s {scale = 0.125 : f32, causal} : !tile.tile<2x100x100xf32> -> !tile.tile<2x100x100xf32>
    %ph = tile.cast %p : !tile.tile<2x100x100xf32> -> !tile.tile<2x100x100xf16>
    %zo = tile.constant 0.0 : !tile.tile<2x100x64xf32>
    %acc = tile.mma %ph, %tv, %zo : !tile.tile<2x100x100xf16>, !tile.tile<2x100x64xf16>, !tile.tile<2x100x64xf32> -> !tile.tile<2x100x64xf32>
    %out = tile.cast %acc : !tile.tile<2x100x64xf32> -> !tile.tile<2x100x64xf16>
    tile.store %out, %o[0, 0, 0] : !tile.tile<2x100x64xf16>, memref<2x100x64xf16>
    func.return
  }
}
