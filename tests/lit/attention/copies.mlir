// Attention's copies where the blocks lie inside the tensors (S a multiple of the 64-key block,
// L of the 128-row query block): `warp.copy_async {one_offset}` keeps one thread offset for a
// thread's chunks, each at an immediate from it (8 rows of 256 bytes apart), for Q (staged at
// head dim 128), K^T and V; nothing is predicated. Where a block can leave the tensor, each chunk
// keeps its own offset and source size (tile-attention.mlir). The ldmatrix reads (`xor_columns`)
// share one lane address a stage: a column 32 bytes on is that address XOR 32, a whole 128-byte
// line on an immediate. `--attention-ctas` asks ptxas for CTAs an SM (`.minnctapersm`), refused
// where the SM's shared memory cannot hold them.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90},tile-attention' | filecheck %s
// RUN: tilemma compile %s | filecheck %s --check-prefix=PTX
// RUN: tilemma compile %s --attention-ctas 2 | filecheck %s --check-prefix=CTAS
// RUN: not tilemma compile %s --attention-rows 16 --attention-ctas 3 2>&1 | filecheck %s --check-prefix=SMEM

// CHECK-COUNT-5: warp.copy_async {{.*}}one_offset

// PTX:      cp.async.cg.shared.global [[[Q:%r[0-9]+]]+0], [[[QS:%rd[0-9]+]]+0], 16;
// PTX-NEXT: cp.async.cg.shared.global [[[Q]]+2048], [[[QS]]+2048], 16;
// PTX:      cp.async.cg.shared.global [[[K:%r[0-9]+]]+0], [[[KS:%rd[0-9]+]]+0], 16;
// PTX-NEXT: cp.async.cg.shared.global [[[K]]+2048], [[[KS]]+2048], 16;
// PTX-NOT:  cp.async.cg.shared.global {{.*}}, 16, %r
// PTX:      xor.b32 [[X:%r[0-9]+]], %r{{[0-9]+}}, 32;
// PTX-NEXT: ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{.*}}}, [[[X]]+0];
// PTX:      ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{.*}}}, [%r{{[0-9]+}}+128];

// CTAS:      .maxntid 128, 1, 1
// CTAS-NEXT: .minnctapersm 2
// CTAS-NEXT: {

// SMEM: error: tile.mma: attention: 3 CTAs an SM need 3 x (81920 + 1024) bytes of shared memory; an SM has 233472 on sm_90

builtin.module {
  func.func @attention_b1h1_s128_d128_f16(%q: memref<1x128x128xf16>, %k: memref<1x128x128xf16, strided<[16384, 1, 128]>>, %v: memref<1x128x128xf16>, %o: memref<1x128x128xf16>) {
    %tq = tile.load %q[0, 0, 0] : memref<1x128x128xf16> -> !tile.tile<1x128x128xf16>
    %tkt = tile.load %k[0, 0, 0] : memref<1x128x128xf16, strided<[16384, 1, 128]>> -> !tile.tile<1x128x128xf16>
    %tv = tile.load %v[0, 0, 0] : memref<1x128x128xf16> -> !tile.tile<1x128x128xf16>
    %zs = tile.constant 0.0 : !tile.tile<1x128x128xf32>
    %s = tile.mma %tq, %tkt, %zs : !tile.tile<1x128x128xf16>, !tile.tile<1x128x128xf16>, !tile.tile<1x128x128xf32> -> !tile.tile<1x128x128xf32>
    %p = tile.softmax %s {scale = 0.08838834764831843 : f32} : !tile.tile<1x128x128xf32> -> !tile.tile<1x128x128xf32>
    %ph = tile.cast %p : !tile.tile<1x128x128xf32> -> !tile.tile<1x128x128xf16>
    %zo = tile.constant 0.0 : !tile.tile<1x128x128xf32>
    %acc = tile.mma %ph, %tv, %zo : !tile.tile<1x128x128xf16>, !tile.tile<1x128x128xf16>, !tile.tile<1x128x128xf32> -> !tile.tile<1x128x128xf32>
    %out = tile.cast %acc : !tile.tile<1x128x128xf32> -> !tile.tile<1x128x128xf16>
    tile.store %out, %o[0, 0, 0] : !tile.tile<1x128x128xf16>, memref<1x128x128xf16>
    func.return
  }
}
