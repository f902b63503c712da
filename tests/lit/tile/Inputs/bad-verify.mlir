func.func @f(%a: !tile.tile<16x32xf16>, %b: !tile.tile<16x8xf16>) {
  // contraction mismatch
  %r = tile.matmul %a, %b : !tile.tile<16x32xf16>, !tile.tile<16x8xf16> -> !tile.tile<16x8xf16>
  func.return
}
