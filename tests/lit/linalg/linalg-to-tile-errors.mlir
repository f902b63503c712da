// RUN: tilemma-opt %s --split-input-file --verify-diagnostics -p linalg-to-tile | filecheck %s
// What linalg-to-tile refuses, each at the op with what would work.

// Sizes known at launch convert (linalg-to-tile-dynamic.mlir) where the tile level lowers them;
// elsewhere its reason, at the linalg op: a ? batch, sub-byte operands, a ? against a static size.
func.func @dynamic_batch(%a: memref<?x?x?xf16>, %b: memref<?x?x?xf16>, %c: memref<?x?x?xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<?x?x?xf16>, memref<?x?x?xf16>) outs(%c : memref<?x?x?xf32>)
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 3]]:3
// CHECK: linalg.batch_matmul: the batch size must be static; M, N, K and strides may be ?

// -----
func.func @dynamic_sub_byte(%a: memref<?x64xi4>, %b: memref<64x16xi4>, %c: memref<?x16xi32>) {
  linalg.matmul ins(%a, %b : memref<?x64xi4>, memref<64x16xi4>) outs(%c : memref<?x16xi32>)
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 3]]:3
// CHECK: linalg.matmul: si4 operands are packed below a byte: their sizes must be static (a ? K would not say where a row ends within a byte)

// -----
func.func @dynamic_against_static(%a: memref<?x64xf16>, %b: memref<?x16xf16>, %c: memref<?x16xf32>) {
  linalg.matmul ins(%a, %b : memref<?x64xf16>, memref<?x16xf16>) outs(%c : memref<?x16xf32>)
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 3]]:3
// CHECK: linalg.matmul: tile.mma: the contraction dimension K is ? in one operand and 64 in the other (?x64 and ?x16); make both ? or both static

// -----
func.func @dynamic_offset(%a: memref<?x?xf16, strided<[?, 1], offset: ?>>, %b: memref<?x?xf16>, %c: memref<?x?xf32>) {
  linalg.matmul ins(%a, %b : memref<?x?xf16, strided<[?, 1], offset: ?>>, memref<?x?xf16>) outs(%c : memref<?x?xf32>)
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 3]]:3
// CHECK: linalg.matmul: operand A (memref<?x?xf16, strided<[?, 1], offset: ?>>): memref<?x?xf16, strided<[?, 1], offset: ?>> has a dynamic offset; a view starts where its buffer does (pass the view's own address)

// -----
// A row of a bias read at a constant index: along a ? stride, or of a ? dimension.
func.func @row_along_dynamic_stride(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %bias: memref<2x?xf32>, %c: memref<?x?xf32>) {
  linalg.matmul ins(%a, %b : memref<?x?xf16>, memref<?x?xf16>) outs(%c : memref<?x?xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (1, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<2x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.addf %x, %o : f32
    linalg.yield %0 : f32
  }
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 7]]:3
// CHECK: linalg.generic: input #0 (memref<2x?xf32>): the window starts at offset 1 of dimension 0, whose stride is ?: a window along a ? stride starts at 0 (pass the view that starts there)

// -----
func.func @row_of_dynamic_dimension(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %bias: memref<?x?xf32>, %c: memref<?x?xf32>) {
  linalg.matmul ins(%a, %b : memref<?x?xf16>, memref<?x?xf16>) outs(%c : memref<?x?xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<?x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.addf %x, %o : f32
    linalg.yield %0 : f32
  }
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 7]]:3
// CHECK: linalg.generic: input #0 (memref<?x?xf32>): dimension 0 is ? and read at index 0: a ? dimension is read whole, by a loop of the tile (its size is known only at launch)

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

// -----
// Bufferized frontend kernels: what does not convert, each at the op, saying what would.
func.func @uninitialized(%a: memref<16x16xf16>, %d: memref<16x16xf16>) {
  %t = memref.alloc() : memref<16x16xf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %t : memref<16x16xf16>, memref<16x16xf16>) outs(%d : memref<16x16xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %0 = arith.addf %x, %y : f16
    linalg.yield %0 : f16
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: input #1 is a memref.alloc buffer that nothing has written before this read

// -----
func.func @computed_a(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>) {
  %t = memref.alloc() : memref<16x16xf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf16>) outs(%t : memref<16x16xf16>) {
  ^bb0(%x: f16, %o: f16):
    %0 = arith.negf %x : f16
    linalg.yield %0 : f16
  }
  linalg.matmul ins(%t, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.matmul: operand A is computed in the kernel (by linalg.generic): the mma reads its A and B from kernel arguments (directly or through linalg.transpose)

// -----
func.func @transpose_computed(%a: memref<16x16xf16>, %c: memref<16x16xf32>) {
  %z = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<16x16xf32>
  linalg.fill ins(%z : f32) outs(%acc : memref<16x16xf32>)
  %t = memref.alloc() : memref<16x16xf32>
  linalg.transpose ins(%acc : memref<16x16xf32>) outs(%t : memref<16x16xf32>) permutation = [1, 0]
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.transpose: the input is computed in the kernel: tile IR has no transpose; only kernel arguments transpose (as a strided view of the same buffer)

// -----
func.func @index(%a: memref<16x16xf32>, %d: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %0 = arith.index_cast %i : index to i32
    %1 = arith.sitofp %0 : i32 to f32
    %2 = arith.addf %x, %1 : f32
    linalg.yield %2 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: the body reads linalg.index (where it is): a tile.map body sees only element values; pass what depends on the position as an input

// -----
func.func @captured(%a: memref<16x16xf32>, %s: memref<f32>, %d: memref<16x16xf32>) {
  %v = memref.load %s[] : memref<f32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.addf %x, %v : f32
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: memref.load: not converted in a linalg kernel (a scalar argument is a one-element memref input of the generic, indexing map ())

// -----
func.func @rank1(%a: memref<91xf16>, %d: memref<91xf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a : memref<91xf16>) outs(%d : memref<91xf16>) {
  ^bb0(%x: f16, %o: f16):
    %0 = arith.negf %x : f16
    linalg.yield %0 : f16
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: a rank 1 elementwise op: tile values are rank 2 (or 3 for batches); elementwise work converts where it runs over the matmul's tile

// -----
func.func @returns(%a: memref<16x16xf16>, %b: memref<16x8xf16>) -> memref<16x8xf32> {
  %z = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<16x8xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<16x8xf32>)
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  return %c : memref<16x8xf32>
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: func.return: the kernel returns values: a tilemma kernel writes its results into memref arguments (mlir-opt --buffer-results-to-out-params="hoist-static-allocs modify-public-functions" makes them so)

// -----
func.func @two_views(%w: memref<16x16xf16>, %c: memref<16x16xf32>) {
  %wt = memref.alloc() : memref<16x16xf16>
  linalg.transpose ins(%w : memref<16x16xf16>) outs(%wt : memref<16x16xf16>) permutation = [1, 0]
  linalg.matmul ins(%w, %wt : memref<16x16xf16>, memref<16x16xf16>) outs(%c : memref<16x16xf32>)
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.matmul: kernel argument %w (memref<16x16xf16>) is read both as memref<16x16xf16> and as memref<16x16xf16, strided<[1, 16]>>

// -----
func.func @write_broadcast(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32, strided<[0, 1]>>) {
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32, strided<[0, 1]>>)
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.matmul: operand C (memref<16x8xf32, strided<[0, 1]>>) has a stride-0 (broadcast) dimension: elements share a place, so it cannot be written

// -----
func.func @not_a_matmul(%a: memref<16x16xf32>, %d: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a : memref<16x16xf32>) outs(%d : memref<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.addf %x, %o : f32
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: a linalg.generic with a reduction converts as a matmul only: ins(A, B) outs(C), C += A * B (tile IR's one reduction)

// -----
func.func @max_body(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf16>) {
  ^bb0(%x: f16, %y: f16, %acc: f16):
    %0 = arith.mulf %x, %y : f16
    %1 = arith.maximumf %acc, %0 : f16
    linalg.yield %1 : f16
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: the body of a linalg.generic with a reduction must be a matmul's: yield C + A * B, A and B converted to C's type by arith.extf / extsi / extui

// -----
func.func @fp8_out(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf8E4M3FN>) {
  %z = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<16x8xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<16x8xf32>)
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%c : memref<16x8xf32>) outs(%d : memref<16x8xf8E4M3FN>) {
  ^bb0(%x: f32, %o: f8E4M3FN):
    %0 = arith.truncf %x : f32 to f8E4M3FN
    linalg.yield %0 : f8E4M3FN
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: the body yields f8E4M3FN by arith.truncf: clamp the f32 value to the type's finite range first (arith.maximumf with -448, arith.minimumf with 448, as torch's fp8 recipes do)

// -----
func.func @unknown(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>) {
  %sub = memref.subview %a[0, 0] [16, 16] [1, 1] : memref<16x16xf16> to memref<16x16xf16, strided<[16, 1]>>
  linalg.matmul ins(%sub, %b : memref<16x16xf16, strided<[16, 1]>>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: memref.subview: not converted in a linalg kernel (a window of an argument is an argument whose memref type says where it is, strided<[...], offset: ...>)

// -----
func.func @pow(%a: memref<16x16xf32>, %n: memref<i32>, %d: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %n : memref<16x16xf32>, memref<i32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %e: i32, %o: f32):
    %0 = math.fpowi %x, %e : f32, i32
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: math.fpowi needs a constant exponent here (it becomes multiplications)

// -----
func.func @reduce(%a: memref<16x16xf32>, %d: memref<16xf32>) {
  linalg.reduce ins(%a : memref<16x16xf32>) outs(%d : memref<16xf32>) dimensions = [1]
    (%x: f32, %y: f32) {
      %0 = arith.addf %x, %y : f32
      linalg.yield %0 : f32
    }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.reduce: not converted (the one reduction tile IR has is the matmul's)

// -----
func.func @i8_map(%a: memref<16x16xi8>, %d: memref<16x16xi32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xi8>) outs(%d : memref<16x16xi32>) {
  ^bb0(%x: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    linalg.yield %0 : i32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: the body reads i8 elements (from a !tile.tile<16x16xsi8>): tile.map bodies work on f16, bf16, f32, f64, i32 (si32 tiles as i32)

// -----
func.func @expression(%a: memref<40x16xf32>, %d: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0 + d1, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<40x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.negf %x : f32
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: input #0 (memref<40x16xf32>): dimension 0 is indexed by (d0 + d1): a loop of the tile or a constant can index a dimension, not an expression

// -----
func.func @broadcast_operand(%a: memref<16x16xf16, strided<[0, 1]>>, %b: memref<16x8xf16>, %c: memref<16x8xf32>) {
  linalg.matmul ins(%a, %b : memref<16x16xf16, strided<[0, 1]>>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.matmul: operand A (memref<16x16xf16, strided<[0, 1]>>) is read as a broadcast (a stride-0 or unit dimension): an mma operand is a whole matrix

// -----
func.func @mixed(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>) {
  %t = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: tile.load: not converted in a linalg kernel (a kernel is written in linalg or in tile IR, not both)

// -----
func.func @transposed_out(%a: memref<16x16xf32>, %d: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.negf %x : f32
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: output #0 is written through (d0, d1) -> (d1, d0): outputs are written elementwise (the identity map)

// -----
func.func @big_power(%a: memref<16x16xf32>, %d: memref<16x16xf32>) {
  %c9 = arith.constant 9 : i64
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = math.fpowi %x, %c9 : f32, i64
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: math.fpowi by 9: exponents up to 8 in magnitude are expanded; write larger powers with math.powf or as products

// -----
func.func @computed_transposed(%a: memref<16x16xf32>, %d: memref<16x16xf32>) {
  %t = memref.alloc() : memref<16x16xf32>
  linalg.copy ins(%a : memref<16x16xf32>) outs(%t : memref<16x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %0 = arith.negf %x : f32
    linalg.yield %0 : f32
  }
  return
}
// CHECK: linalg-to-tile-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error: linalg.generic: input #0 holds a value computed in the kernel, read here through (d1, d0): a computed tile is read elementwise (the identity map); only kernel arguments transpose or broadcast

// -----
// Without operands (xDSL's own verifiers read operand 0): refused at the op (issue 25).
func.func @no_operands() {
  "linalg.matmul"() ({
  ^bb0(%x: f16, %y: f16, %z: f32):
    linalg.yield %z : f32
  }) {operandSegmentSizes = array<i32: 0, 0>} : () -> ()
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 6]]:3: error: linalg.matmul: no outs(...) operand: a linalg op writes its result into an output buffer

// -----
func.func @no_outputs(%a: memref<16x16xf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf16>) {
  ^bb0(%x: f16):
    linalg.yield
  }
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 6]]:3: error: linalg.generic: no outs(...) operand

// -----
func.func @transpose_nothing() {
  "linalg.transpose"() ({
  ^bb0:
    linalg.yield
  }) {operandSegmentSizes = array<i32: 0, 0>, permutation = array<i64: 1, 0>} : () -> ()
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 6]]:3: error: linalg.transpose: no outs(...) operand

// -----
func.func @add_nothing() {
  "linalg.add"() ({
  ^bb0:
    linalg.yield
  }) {operandSegmentSizes = array<i32: 0, 0>} : () -> ()
  func.return
}
// CHECK: linalg-to-tile-errors.mlir:[[# @LINE - 6]]:3: error: linalg.add: no outs(...) operand
