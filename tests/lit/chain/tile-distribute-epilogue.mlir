// tile-distribute-epilogue: the tile ops after the mma, on warp.distributed accumulators, become
// the same work per fragment: one warp.map per fragment (the tile.map body), the per-column bias
// loaded in the accumulator layout once per column of fragments (broadcast = [2]: the memref's
// one dimension runs along the tile's columns), a warp.cast per fragment, and the stores of both
// outputs in their own types.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=1x1 warp-tile=2x2 stages=0},tile-distribute' | %tilemma-opt -p tile-distribute-epilogue | filecheck %s
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=1x1 warp-tile=2x2 stages=0},tile-distribute,tile-distribute-epilogue,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME:  %bias: memref<32xf16> {warp.role = ["epilogue"]}, %d: memref<32x32xf16> {warp.role = ["d"]}, %pre: memref<32x32xf32> {warp.role = ["d"]}
// CHECK:       scf.for
// CHECK:       scf.yield
// CHECK:       warp.load %bias[%{{.*}}] {window = array<i64: 0>, extent = array<i64: 1, 32, 32>, broadcast = array<i64: 2>, in_bounds = array<i64: 1, 1>, col_align = 8 : i64} : memref<32xf16> -> !warp.frag<acc, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
// CHECK-NEXT:  warp.load %bias
// CHECK-NOT:   warp.load %bias
// CHECK:       warp.map %{{.*}}, %{{.*}} : !warp.frag<acc, f32, {{.*}}>, !warp.frag<acc, f16, {{.*}}> -> !warp.frag<acc, f32, {{.*}}>, !warp.frag<acc, f32, {{.*}}> {
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: f32, %{{.*}}: f16):
// CHECK:         arith.maximumf
// CHECK:         warp.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-COUNT-3: warp.map
// CHECK-COUNT-4: warp.cast %{{.*}} {rounding = #tile<rounding rn>} : !warp.frag<acc, f32, {{.*}}> -> !warp.frag<acc, f16, {{.*}}>
// CHECK-COUNT-4: warp.store %{{.*}}, %d[
// CHECK-COUNT-4: warp.store %{{.*}}, %pre[
// CHECK-NOT:   tile.

// PTX:         max.NaN.f32
// PTX:         cvt.rn.f16.f32
// PTX:         st.global.b32

func.func @bias_relu(%a: memref<32x64xf16>, %b: memref<64x32xf16>, %bias: memref<32xf16>, %d: memref<32x32xf16>, %pre: memref<32x32xf32>) {
  %ta = tile.load %a[0, 0] : memref<32x64xf16> -> !tile.tile<32x64xf16>
  %tb = tile.load %b[0, 0] : memref<64x32xf16> -> !tile.tile<64x32xf16>
  %z = tile.constant 0.0 : !tile.tile<32x32xf32>
  %acc = tile.mma %ta, %tb, %z : !tile.tile<32x64xf16>, !tile.tile<64x32xf16>, !tile.tile<32x32xf32> -> !tile.tile<32x32xf32>
  %bb = tile.broadcast %bias[0] dims [1] : memref<32xf16> -> !tile.tile<32x32xf16>
  %y, %s = tile.map %acc, %bb : !tile.tile<32x32xf32>, !tile.tile<32x32xf16> -> !tile.tile<32x32xf32>, !tile.tile<32x32xf32> {
  ^bb0(%x: f32, %bv: f16):
    %bf = arith.extf %bv : f16 to f32
    %s1 = arith.addf %x, %bf : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s1, %zero : f32
    tile.yield %r, %s1 : f32, f32
  }
  %h = tile.cast %y {rounding = #tile<rounding rn>} : !tile.tile<32x32xf32> -> !tile.tile<32x32xf16>
  tile.store %h, %d[0, 0] : !tile.tile<32x32xf16>, memref<32x32xf16>
  tile.store %s, %pre[0, 0] : !tile.tile<32x32xf32>, memref<32x32xf32>
  func.return
}
