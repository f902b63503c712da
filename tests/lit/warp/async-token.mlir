// A read of a shared buffer takes the token of the warp.async_wait that made its stage
// visible: without one the IR is not valid (a missing wait is caught before any emulator).
// RUN: tilemma-opt %s | filecheck %s
// RUN: sed 's/ after [^ ]*//' %s | not tilemma-opt 2>&1 | filecheck %s --check-prefix=NOWAIT

// CHECK:      %t = warp.async_wait {pending = 0 : i64}
// CHECK-NEXT: warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>}
// NOWAIT:     error: Expected 'after'
func.func @read(%s: memref<2x64x64xf16, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x64xf16, 3> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
