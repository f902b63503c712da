// Kernel and argument names reach the PTX text (and, for --emit cubin without -o, a file name):
// a name PTX cannot spell is a located error, never escaped or passed through (a newline in a
// quoted symbol name would inject PTX).
// RUN: not %tilemma compile %s 2>&1 | filecheck %s
// RUN: sed 's/@"k\\n.visible .entry evil()"/@k/; s/%a/%a.x/g' %s | not %tilemma compile - 2>&1 | filecheck %s --check-prefix=ARG
// RUN: sed 's/@"k\\n.visible .entry evil()"/@k_1/' %s | %tilemma compile - | filecheck %s --check-prefix=OK
// RUN: sed 's/@"k\\n.visible .entry evil()"/@_/' %s | not %tilemma compile - 2>&1 | filecheck %s --check-prefix=UNDERSCORE
// RUN: sed 's/@"k\\n.visible .entry evil()"/@WARP_SZ/' %s | not %tilemma compile - 2>&1 | filecheck %s --check-prefix=PREDEFINED
// RUN: sed 's/@"k\\n.visible .entry evil()"/@_k/' %s | %tilemma compile - | filecheck %s --check-prefix=OK_UNDERSCORE

// CHECK: names.mlir:17:1: error: func.func: kernel name 'k\n.visible .entry evil()' is not a PTX identifier
// ARG:   error: func.func: argument 0 is named %a.x, which PTX cannot spell as a parameter
// OK:    .visible .entry k_1(
// UNDERSCORE: error: func.func: kernel name '_' is not a PTX identifier (letters, digits and _, starting with a letter, or with _ and more)
// PREDEFINED: error: func.func: kernel name 'WARP_SZ' is PTX's predefined identifier
// OK_UNDERSCORE: .visible .entry _k(
func.func @"k\n.visible .entry evil()"(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf32>) {
  %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
  %z = tile.constant 0.0 : !tile.tile<16x8xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %td, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}
