// The typed granule swizzle (#warp.swizzle<mult>) round-trips on the ops that address a shared
// buffer; an even multiplier (not a bijection of the phases) is refused where it is written.
// RUN: tilemma-opt %s | filecheck %s
// RUN: sed 's/swizzle<5/swizzle<4/' %s | not tilemma-opt 2>&1 | filecheck %s --check-prefix=EVEN

// CHECK-LABEL: func.func @reads
// CHECK:       warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 8>, swizzle = #warp.swizzle<5 : i64>} : memref<2x16x64xf64, 3 : i64> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
// CHECK:       warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>, swizzle} : memref<2x16x64xf64, 3 : i64> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
// EVEN:        stdin:13:3: error
// EVEN:        #warp.swizzle: the phase multiplier must be odd, 1..7 (a bijection of the 8 phases), got 4
func.func @reads(%s: memref<2x16x64xf64, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 8>, swizzle = #warp.swizzle<5 : i64>} : memref<2x16x64xf64, 3> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  %g = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>, swizzle} : memref<2x16x64xf64, 3> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
