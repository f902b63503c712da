// The granule swizzle is the shared buffer's type (#warp.swizzled<mult>, a memref layout): it
// round-trips there, and every op on the buffer sees the same one. An even multiplier (not a
// bijection of the phases) is refused where it is written.
// RUN: tilemma-opt %s | filecheck %s
// RUN: sed 's/swizzled<5>/swizzled<4>/' %s | not tilemma-opt 2>&1 | filecheck %s --check-prefix=EVEN
// RUN: sed 's/swizzled<5>/swizzled<9>/' %s | not tilemma-opt 2>&1 | filecheck %s --check-prefix=RANGE

// CHECK-LABEL: func.func @reads
// CHECK-SAME:  (%s: memref<2x16x64xf64, #warp.swizzled<5>, 3 : i64>, %x: memref<2x64x32xf16, #warp.swizzled<1>, 3 : i64>,
// CHECK:       warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 8>} : memref<2x16x64xf64, #warp.swizzled<5>, 3 : i64> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
// CHECK:       warp.copy_async %g[%i, %i, %i], %x[%i] {{.*}} : memref<64x32xf16>, memref<2x64x32xf16, #warp.swizzled<1>, 3 : i64>
// CHECK:       warp.ldmatrix %x[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x32xf16, #warp.swizzled<1>, 3 : i64> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
// EVEN:        stdin:[[# @LINE + 4]]:57: error: #warp.swizzled: the phase multiplier must be odd, 1..7 (a bijection of the 8 phases), got 4
// EVEN-NEXT:   func.func @reads(%s: memref<2x16x64xf64, #warp.swizzled<4>, 3>
// EVEN-NEXT:   {{^ {56}\^$}}
// RANGE:       stdin:[[# @LINE + 1]]:57: error: #warp.swizzled: the phase multiplier must be odd, 1..7 (a bijection of the 8 phases), got 9
func.func @reads(%s: memref<2x16x64xf64, #warp.swizzled<5>, 3>, %x: memref<2x64x32xf16, #warp.swizzled<1>, 3>, %g: memref<64x32xf16>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 8>} : memref<2x16x64xf64, #warp.swizzled<5>, 3> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  warp.copy_async %g[%i, %i, %i], %x[%i] {window = array<i64: 0, 0>, extent = array<i64: 1, 64, 32>, threads = 128 : i64, vector = 16 : i64} : memref<64x32xf16>, memref<2x64x32xf16, #warp.swizzled<1>, 3>
  %a = warp.ldmatrix %x[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x32xf16, #warp.swizzled<1>, 3> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
