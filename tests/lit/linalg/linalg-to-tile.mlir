// RUN: tilemma-opt %s -p linalg-to-tile | filecheck %s
// RUN: tilemma-opt %s -p linalg-to-tile | tilemma-opt | filecheck %s
// RUN: tilemma compile %s --sm 90 | filecheck %s --check-prefix=PTX
// linalg.matmul on kernel memrefs becomes tile IR: C += A x B is a tile.mma whose accumulator is
// C, stored back to C. Signless integers are linalg's cast_signed: the arguments become si8/si32.

func.func @f16_f32(%a: memref<37x45xf16>, %b: memref<45x29xf16>, %c: memref<37x29xf32, strided<[32, 1], offset: 3>>) {
  linalg.matmul ins(%a, %b : memref<37x45xf16>, memref<45x29xf16>) outs(%c : memref<37x29xf32, strided<[32, 1], offset: 3>>)
  func.return
}
// CHECK-LABEL: func.func @f16_f32(%a: memref<37x45xf16>, %b: memref<45x29xf16>, %c: memref<37x29xf32, strided<[32, 1], offset: 3>>)
// CHECK-NEXT:    %ta = tile.load %a[0, 0] : memref<37x45xf16> -> !tile.tile<37x45xf16>
// CHECK-NEXT:    %tb = tile.load %b[0, 0] : memref<45x29xf16> -> !tile.tile<45x29xf16>
// CHECK-NEXT:    %tc = tile.load %c[0, 0] : memref<37x29xf32, strided<[32, 1], offset: 3>> -> !tile.tile<37x29xf32>
// CHECK-NEXT:    %td = tile.mma %ta, %tb, %tc : !tile.tile<37x45xf16>, !tile.tile<45x29xf16>, !tile.tile<37x29xf32> -> !tile.tile<37x29xf32>
// CHECK-NEXT:    tile.store %td, %c[0, 0] : !tile.tile<37x29xf32>, memref<37x29xf32, strided<[32, 1], offset: 3>>
// CHECK-NEXT:    func.return

func.func @s8_s32(%a: memref<16x32xi8>, %b: memref<32x8xi8>, %c: memref<16x8xi32>) {
  linalg.matmul ins(%a, %b : memref<16x32xi8>, memref<32x8xi8>) outs(%c : memref<16x8xi32>)
  func.return
}
// CHECK-LABEL: func.func @s8_s32(%a: memref<16x32xsi8>, %b: memref<32x8xsi8>, %c: memref<16x8xsi32>)
// CHECK:         %td = tile.mma %ta, %tb, %tc : !tile.tile<16x32xsi8>, !tile.tile<32x8xsi8>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
// CHECK-NEXT:    tile.store %td, %c[0, 0] : !tile.tile<16x8xsi32>, memref<16x8xsi32>

func.func @square(%a: memref<32x32xi8>, %c: memref<32x32xi32>) {
  linalg.matmul ins(%a, %a : memref<32x32xi8>, memref<32x32xi8>) outs(%c : memref<32x32xi32>)
  func.return
}
// One argument as A and B: retyped once, loaded twice.
// CHECK-LABEL: func.func @square(%a: memref<32x32xsi8>, %c: memref<32x32xsi32>)
// CHECK-NEXT:    %ta = tile.load %a[0, 0] : memref<32x32xsi8> -> !tile.tile<32x32xsi8>
// CHECK-NEXT:    %tb = tile.load %a[0, 0] : memref<32x32xsi8> -> !tile.tile<32x32xsi8>

func.func @bf16_same(%a: memref<16x16xbf16>, %b: memref<16x8xbf16>, %c: memref<16x8xf32>) {
  "linalg.matmul"(%a, %b, %c) <{operandSegmentSizes = array<i32: 2, 1>}> ({
  ^bb0(%x: bf16, %y: bf16, %z: f32):
    %0 = arith.extf %x : bf16 to f32
    %1 = arith.extf %y : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %z, %2 : f32
    linalg.yield %3 : f32
  }) : (memref<16x16xbf16>, memref<16x8xbf16>, memref<16x8xf32>) -> ()
  func.return
}
// The generic form (as mlir-opt --mlir-print-op-generic writes it) converts the same way.
// CHECK-LABEL: func.func @bf16_same
// CHECK:         tile.mma %ta, %tb, %tc : !tile.tile<16x16xbf16>, !tile.tile<16x8xbf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>

// PTX: .visible .entry f16_f32(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX: .visible .entry s8_s32(
// PTX: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// PTX: .visible .entry square(
// PTX: .visible .entry bf16_same(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
