// tile-transpose-product: an 8-bit GEMM for sm_90a whose B is stored N-major (row-major, as
// torch._int_mm takes it) is computed as D^T = B^T A^T, each operand read and D written through a
// transposed view of its argument (tile.transpose_view), an epilogue's vectors broadcast along the
// exchanged dimensions, so that tile-plan multiplies it by warpgroups with A' = B^T from registers
// (pair_bytes a); the arguments are unchanged.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-transpose-product' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp,warp-swizzle-shared' | filecheck %s --check-prefix=WARP
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{warps=2x2},warp-swizzle-shared' | filecheck %s --check-prefix=FORCED
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp,warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @brow(%a: memref<512x1024xsi8>, %b: memref<1024x520xsi8>, %c: memref<512x520xsi32>, %d: memref<512x520xsi32>)
// CHECK:       %[[AT:.*]] = tile.transpose_view %a : memref<512x1024xsi8> -> memref<1024x512xsi8, strided<[1, 1024]>>
// CHECK:       %[[TB:.*]] = tile.load %[[AT]][0, 0] : {{.*}} -> !tile.tile<1024x512xsi8>
// CHECK:       %[[BT:.*]] = tile.transpose_view %b : memref<1024x520xsi8> -> memref<520x1024xsi8, strided<[1, 520]>>
// CHECK:       %[[TA:.*]] = tile.load %[[BT]][0, 0] : {{.*}} -> !tile.tile<520x1024xsi8>
// CHECK:       %[[CT:.*]] = tile.transpose_view %c : memref<512x520xsi32> -> memref<520x512xsi32, strided<[1, 520]>>
// CHECK:       %[[TC:.*]] = tile.load %[[CT]][0, 0] : {{.*}} -> !tile.tile<520x512xsi32>
// CHECK:       %[[TD:.*]] = tile.mma %[[TA]], %[[TB]], %[[TC]] {{.*}} -> !tile.tile<520x512xsi32>
// CHECK:       %[[DT:.*]] = tile.transpose_view %d : memref<512x520xsi32> -> memref<520x512xsi32, strided<[1, 520]>>
// CHECK:       tile.store %[[TD]], %[[DT]][0, 0]
// CHECK-NOT:   tile.mma

// An epilogue (per-row and per-column scales, a per-column bias, an f16 D): each tile transposed,
// the vectors broadcast along the exchanged dimensions, the map as it is.
// CHECK-LABEL: func.func @quantized
// CHECK:       tile.mma {{.*}} -> !tile.tile<520x512xsi32>
// CHECK:       tile.broadcast %scale_rows[0] dims [1] : memref<512xf32> -> !tile.tile<520x512xf32>
// CHECK:       tile.broadcast %scale_cols[0] dims [0] : memref<520xf32> -> !tile.tile<520x512xf32>
// CHECK:       tile.map {{.*}} -> !tile.tile<520x512xf16>
// CHECK:       arith.mulf
// CHECK:       %[[DT2:.*]] = tile.transpose_view %d : memref<512x520xf16> -> memref<520x512xf16, strided<[1, 520]>>
// CHECK:       tile.store {{.*}}, %[[DT2]][0, 0]

// A K-major B: computed as it is.
// CHECK-LABEL: func.func @bcol
// CHECK-NOT:   tile.transpose_view
// CHECK:       tile.mma %ta, %tb

// The warpgroups, A' from registers: its stage as stored (K x M'), read by byte pairs, a
// fragment a k32 step of the stage; the loop unrolled by 2 (their registers stay read until the
// products retire), the accumulators unpaired after the last wait. The arguments keep their
// names; A's is read as the product's B, B's as its A.
// WARP-LABEL: func.func @brow(%a: memref<512x1024xsi8> {warp.role = ["b"]}, %b: memref<1024x520xsi8> {warp.role = ["a"]}
// WARP-SAME:  pair_bytes = a, mma = wgmma
// WARP:       %[[SA:.*]] = memref.alloc() {alignment = 1024 : i64} : memref<4x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64>
// WARP:       scf.for
// WARP-COUNT-4: warp.ldmatrix %[[SA]]{{.*}}trans
// WARP:       warp.wgmma %[[SA]][{{.*}}], {{.*}} regs {{.*}}pending = 1
// WARP-COUNT-4: warp.ldmatrix %[[SA]]{{.*}}trans
// WARP:       warp.wgmma %[[SA]][{{.*}}], {{.*}} regs {{.*}}pending = 1
// WARP:       warp.wgmma_wait
// WARP:       warp.unpair_rows

// A configuration forced (warps): the product as written (mma.sync, B through the fill).
// FORCED-LABEL: func.func @brow(%a: memref<512x1024xsi8> {warp.role = ["a"]}
// FORCED-SAME:  fill = b
// FORCED-NOT:   tile.transpose_view

// PTX-LABEL:   .entry brow(
// PTX:         ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX:         wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k32.s32.s8.s8 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, %p{{[0-9]+}};
func.func @brow(%a: memref<512x1024xsi8>, %b: memref<1024x520xsi8>, %c: memref<512x520xsi32>, %d: memref<512x520xsi32>) {
  %ta = tile.load %a[0, 0] : memref<512x1024xsi8> -> !tile.tile<512x1024xsi8>
  %tb = tile.load %b[0, 0] : memref<1024x520xsi8> -> !tile.tile<1024x520xsi8>
  %tc = tile.load %c[0, 0] : memref<512x520xsi32> -> !tile.tile<512x520xsi32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<512x1024xsi8>, !tile.tile<1024x520xsi8>, !tile.tile<512x520xsi32> -> !tile.tile<512x520xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<512x520xsi32>, memref<512x520xsi32>
  func.return
}

func.func @quantized(%a: memref<512x1024xsi8>, %b: memref<1024x520xsi8>, %scale_rows: memref<512xf32>, %scale_cols: memref<520xf32>, %d: memref<512x520xf16>) {
  %ta = tile.load %a[0, 0] : memref<512x1024xsi8> -> !tile.tile<512x1024xsi8>
  %tb = tile.load %b[0, 0] : memref<1024x520xsi8> -> !tile.tile<1024x520xsi8>
  %zero = tile.constant 0 : !tile.tile<512x520xsi32>
  %acc = tile.mma %ta, %tb, %zero : !tile.tile<512x1024xsi8>, !tile.tile<1024x520xsi8>, !tile.tile<512x520xsi32> -> !tile.tile<512x520xsi32>
  %sr = tile.broadcast %scale_rows[0] dims [0] : memref<512xf32> -> !tile.tile<512x520xf32>
  %sc = tile.broadcast %scale_cols[0] dims [1] : memref<520xf32> -> !tile.tile<512x520xf32>
  %td = tile.map %acc, %sr, %sc : !tile.tile<512x520xsi32>, !tile.tile<512x520xf32>, !tile.tile<512x520xf32> -> !tile.tile<512x520xf16> {
  ^bb0(%x: i32, %r: f32, %c: f32):
    %xf = arith.sitofp %x : i32 to f32
    %y = arith.mulf %xf, %r : f32
    %z = arith.mulf %y, %c : f32
    %h = arith.truncf %z : f32 to f16
    tile.yield %h : f16
  }
  tile.store %td, %d[0, 0] : !tile.tile<512x520xf16>, memref<512x520xf16>
  func.return
}

func.func @bcol(%a: memref<512x256xsi8>, %b: memref<256x520xsi8, strided<[1, 256]>>, %d: memref<512x520xsi32>) {
  %ta = tile.load %a[0, 0] : memref<512x256xsi8> -> !tile.tile<512x256xsi8>
  %tb = tile.load %b[0, 0] : memref<256x520xsi8, strided<[1, 256]>> -> !tile.tile<256x520xsi8>
  %zero = tile.constant 0 : !tile.tile<512x520xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x256xsi8>, !tile.tile<256x520xsi8>, !tile.tile<512x520xsi32> -> !tile.tile<512x520xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<512x520xsi32>, memref<512x520xsi32>
  func.return
}
