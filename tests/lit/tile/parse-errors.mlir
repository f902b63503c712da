// RUN: %tilemma-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// Malformed tile IR is reported at its source position.

func.func @rank4(%a: !tile.tile<2x3x4x5xf16>) {
  func.return
}
// CHECK: parse-errors.mlir:4:32
// CHECK: tile rank must be 2 or 3 (cuda::tiles matmul/mma operate on rank 2 tiles or rank 3 batches), got rank 4 in 2x3x4x5

// -----
func.func @rank1(%a: !tile.tile<16xf16>) {
  func.return
}
// CHECK: parse-errors.mlir:11:32
// CHECK: tile rank must be 2 or 3 {{.*}} got rank 1 in 16

// -----
func.func @unknown_element(%a: !tile.tile<16x16xf17>) {
  func.return
}
// CHECK: parse-errors.mlir:18:
// CHECK: Expected shape type.

// -----
func.func @not_a_tile_element(%a: !tile.tile<16x16xi32>) {
  func.return
}
// CHECK: element type i32 is not a tile element type; allowed: si8, ui8, si4, ui4, i1, f8E4M3FN, f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN, f16, bf16, tf32, f32, f64, f8E8M0FNU, ue4m3, si32

// -----
func.func @zero_dim(%a: !tile.tile<0x16xf16>) {
  func.return
}
// CHECK: tile dimensions must be positive or ? (a size known at launch), got 0x16

// -----
func.func @missing_type(%a: !tile.tile<16x16xf16>, %b: !tile.tile<16x8xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<16x16xf16>
  func.return
}
// CHECK: parse-errors.mlir:39:3
// CHECK: Expected ','

// -----
func.func @undefined_value(%a: !tile.tile<16x16xf16>) {
  %r = tile.matmul %a, %nope : !tile.tile<16x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<16x8xf16>
  func.return
}
// CHECK: values used but not defined: [%nope]

// -----
func.func @int_constant_float(%a: !tile.tile<16x16xf16>) {
  %c = tile.constant 1.5 : !tile.tile<16x16xsi8>
  func.return
}
// CHECK: parse-errors.mlir:53:22
// CHECK: tile.constant: an si8 tile needs an integer value, got 1.5

// -----
func.func @int_constant_too_big() {
  %c = tile.constant 4294967296 : !tile.tile<16x8xsi32>
  func.return
}
// CHECK: parse-errors.mlir:61:22
// CHECK: tile.constant: 4294967296 is out of range for si32 (range -2147483648 to 2147483647)

// -----
func.func @float_constant_overflows() {
  %c = tile.constant 65520.0 : !tile.tile<16x8xf16>
  func.return
}
// CHECK: parse-errors.mlir:69:22
// CHECK: tile.constant: 65520.0 is out of range for f16 (range -65504.0 to 65504.0)

// -----
func.func @bad_popc(%a: !tile.tile<16x256xi1>, %b: !tile.tile<256x8xi1>, %c: !tile.tile<16x8xsi32>) {
  %r = tile.mma %a, %b, %c {popc = #tile<popc or>} : !tile.tile<16x256xi1>, !tile.tile<256x8xi1>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  func.return
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:{{[0-9]+}}
// CHECK: Expected `xor`, or `and`.

// -----
func.func @cast_rounding(%t: !tile.tile<16x8xf32>) {
  %c = tile.cast %t {rounding = #tile<rounding up>} : !tile.tile<16x8xf32> -> !tile.tile<16x8xtf32>
  func.return
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:{{[0-9]+}}
// CHECK: Expected `rn`, `rna`, `rz`, or `trunc`.

// -----
// Input past what the parser takes promptly is refused before parsing (issue 25).
func.func @wide_float() attributes {x = 1.0 : f80} {
  func.return
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:1
// CHECK: func.func: an f80 value: tilemma (and xDSL, which prints it) has no f80 arithmetic; use f64 or a narrower float

// -----
func.func @wide_dense() attributes {x = dense<1.0> : tensor<2xf128>} {
  func.return
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:1
// CHECK: an f128 value: tilemma (and xDSL, which reads it) has no f128 arithmetic

// -----
func.func @long_shape(%a: memref<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1xf16>) {
  func.return
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:34
// CHECK: a shape of 65 dimensions; tilemma takes at most 64 (tiles are rank 2, or 3 with a batch)

// -----
func.func @deep() attributes {x = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]} {
  func.return
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:98
// CHECK: nested more than 64 levels deep (regions, attributes, types: brackets ( [ { <); tilemma takes at most that
