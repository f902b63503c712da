// RUN: tilemma-opt %s --split-input-file --verify-diagnostics -p linalg-to-tile | filecheck %s
// What linalg-to-tile refuses, each at the op with what would work.

func.func @dynamic(%a: memref<?x16xf16>, %b: memref<16x8xf16>, %c: memref<?x8xf32>) {
  linalg.matmul ins(%a, %b : memref<?x16xf16>, memref<16x8xf16>) outs(%c : memref<?x8xf32>)
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 3]]:3
// CHECK: linalg.matmul: operand A (memref<?x16xf16>) has a dynamic shape; tilemma needs static shapes

// -----
func.func @tensors(%a: tensor<16x16xf16>, %b: tensor<16x8xf16>, %c: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<16x16xf16>, tensor<16x8xf16>) outs(%c : tensor<16x8xf32>) -> tensor<16x8xf32>
  func.return %r : tensor<16x8xf32>
}
// CHECK: linalg.matmul: operand A is a tensor<16x16xf16>: only memrefs are supported (bufferize tensors first, e.g. mlir-opt --one-shot-bufferize)

// -----
func.func @not_an_argument(%a: memref<16x16xf16>, %b: memref<16x8xf16>) {
  %c = memref.alloc() : memref<16x8xf32>
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  func.return
}
// CHECK: linalg.matmul: operand C is a memref.alloc buffer that nothing has written before this read

// -----
func.func @mixed(%a: memref<16x16xf16>, %b: memref<16x8xbf16>, %c: memref<16x8xf32>) {
  "linalg.matmul"(%a, %b, %c) <{operandSegmentSizes = array<i32: 2, 1>}> ({
  ^bb0(%x: f16, %y: bf16, %z: f32):
    %0 = arith.extf %x : f16 to f32
    %1 = arith.extf %y : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %z, %2 : f32
    linalg.yield %3 : f32
  }) : (memref<16x16xf16>, memref<16x8xbf16>, memref<16x8xf32>) -> ()
  func.return
}
// CHECK: linalg.matmul: tile.mma: {{.*}}f16{{.*}}bf16

// -----
func.func @shapes(%a: memref<16x16xf16>, %b: memref<8x8xf16>, %c: memref<16x8xf32>) {
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<8x8xf16>) outs(%c : memref<16x8xf32>)
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 3]]:3
// CHECK: inferred input/output operand #1 has shape's dimension #0 to be 16, but found 8

// -----
func.func @binary(%a: memref<16x128xi1>, %b: memref<128x8xi1>, %c: memref<16x8xi32>) {
  "linalg.matmul"(%a, %b, %c) <{operandSegmentSizes = array<i32: 2, 1>}> ({
  ^bb0(%x: i1, %y: i1, %z: i32):
    %0 = arith.extsi %x : i1 to i32
    %1 = arith.extsi %y : i1 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %z, %2 : i32
    linalg.yield %3 : i32
  }) : (memref<16x128xi1>, memref<128x8xi1>, memref<16x8xi32>) -> ()
  func.return
}
// CHECK: linalg.matmul: operand A: i1 elements: tile's b1 matmul computes popc(xor/and), not linalg's arithmetic

// -----
"gpu.module"() <{sym_name = "kernels"}> ({
  "gpu.func"() ({
  ^bb0(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>):
    linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
    "gpu.return"() : () -> ()
  }) {function_type = (memref<16x16xf16>, memref<16x8xf16>, memref<16x8xf32>) -> (), sym_name = "k", gpu.kernel} : () -> ()
}) : () -> ()
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 6]]:3
// CHECK: gpu.func: kernels inside gpu.module/gpu.func are not supported: write the kernel as a top-level func.func
