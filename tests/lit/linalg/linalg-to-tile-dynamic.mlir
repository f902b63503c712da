// RUN: tilemma-opt %s -p linalg-to-tile | filecheck %s --check-prefixes=SAME,CHECK
// RUN: tilemma-opt %s -p linalg-to-tile | tilemma-opt | filecheck %s --check-prefixes=SAME,CHECK
// RUN: tilemma gemm --m 1 --n 1 --k 1 --a f16 --b f16 --acc f32 --dynamic mnk --no-c | filecheck %s --check-prefix=SAME
// RUN: tilemma compile %s --sm 90 | filecheck %s --check-prefix=PTX
// Sizes known at launch, as torch.compile(dynamic=True) hands them over through torch-mlir
// (strict symbolic shapes, bufferized, the result an out parameter): a `?` stays `?` in the
// tiles. The memref.dims that size the temporaries go with them; torch.mm on memref<?x?xf16> is
// the tile IR `tilemma gemm --dynamic mnk --no-c` writes (SAME checks both), and the PTX takes
// M, K, N and the ? row strides as .u32 parameters.

func.func @gemm_MxNxK_f16_f16_f32_noc(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %d: memref<?x?xf32>) attributes {torch.assume_strict_symbolic_shapes} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  %dim = memref.dim %a, %c0 : memref<?x?xf16>
  %dim_0 = memref.dim %b, %c1 : memref<?x?xf16>
  %alloc = memref.alloc(%dim, %dim_0) {alignment = 64 : i64} : memref<?x?xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<?x?xf32>)
  linalg.matmul ins(%a, %b : memref<?x?xf16>, memref<?x?xf16>) outs(%alloc : memref<?x?xf32>)
  memref.copy %alloc, %d : memref<?x?xf32> to memref<?x?xf32>
  return
}
// SAME-LABEL: func.func @gemm_MxNxK_f16_f16_f32_noc(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %d: memref<?x?xf32>)
// SAME-DAG:     %zero = tile.constant 0.0 : !tile.tile<?x?xf32>
// SAME-DAG:     %ta = tile.load %a[0, 0] : memref<?x?xf16> -> !tile.tile<?x?xf16>
// SAME-DAG:     %tb = tile.load %b[0, 0] : memref<?x?xf16> -> !tile.tile<?x?xf16>
// SAME:         %td = tile.mma %ta, %tb, %zero : !tile.tile<?x?xf16>, !tile.tile<?x?xf16>, !tile.tile<?x?xf32> -> !tile.tile<?x?xf32>
// SAME-NEXT:    tile.store %td, %d[0, 0] : !tile.tile<?x?xf32>, memref<?x?xf32>
// SAME-NEXT:    func.return
// CHECK-NOT:    memref.

// PTX-LABEL: .visible .entry gemm_MxNxK_f16_f16_f32_noc(
// PTX:       .param .u32 s_M,
// PTX-NEXT:  .param .u32 s_K,
// PTX-NEXT:  .param .u32 s_N,

// nn.Linear(64, 91) + ReLU in f16 with only the batch of rows M dynamic: the weight's
// linalg.transpose is its K-major view (the caller passes w.t()), static; the bias a broadcast
// along the ? rows; the epilogue one tile.map over ?x91.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @linear_relu(%x: memref<?x64xf16>, %w: memref<91x64xf16>, %bias: memref<91xf16>, %y: memref<?x91xf16>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 0.000000e+00 : f16
  %wt = memref.alloc() {alignment = 64 : i64} : memref<64x91xf16>
  linalg.transpose ins(%w : memref<91x64xf16>) outs(%wt : memref<64x91xf16>) permutation = [1, 0]
  %m = memref.dim %x, %c0 : memref<?x64xf16>
  %acc = memref.alloc(%m) {alignment = 64 : i64} : memref<?x91xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<?x91xf32>)
  linalg.matmul ins(%x, %wt : memref<?x64xf16>, memref<64x91xf16>) outs(%acc : memref<?x91xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%acc, %bias : memref<?x91xf32>, memref<91xf16>) outs(%y : memref<?x91xf16>) {
  ^bb0(%in: f32, %b: f16, %o: f16):
    %0 = arith.truncf %in : f32 to f16
    %1 = arith.addf %0, %b : f16
    %2 = arith.cmpf ugt, %1, %cst_0 : f16
    %3 = arith.select %2, %1, %cst_0 : f16
    linalg.yield %3 : f16
  }
  return
}
// CHECK-LABEL: func.func @linear_relu(%x: memref<?x64xf16>, %w: memref<64x91xf16, strided<[1, 64]>>, %bias: memref<91xf16>, %y: memref<?x91xf16>)
// CHECK-NEXT:    %zero = tile.constant 0.0 : !tile.tile<?x91xf32>
// CHECK-NEXT:    %ta = tile.load %x[0, 0] : memref<?x64xf16> -> !tile.tile<?x64xf16>
// CHECK-NEXT:    %tb = tile.load %w[0, 0] : memref<64x91xf16, strided<[1, 64]>> -> !tile.tile<64x91xf16>
// CHECK-NEXT:    %td = tile.mma %ta, %tb, %zero : !tile.tile<?x64xf16>, !tile.tile<64x91xf16>, !tile.tile<?x91xf32> -> !tile.tile<?x91xf32>
// CHECK-NEXT:    %[[BIAS:.*]] = tile.broadcast %bias[0] dims [1] : memref<91xf16> -> !tile.tile<?x91xf16>
// CHECK-NEXT:    %[[Y:.*]] = tile.map %td, %[[BIAS]] : !tile.tile<?x91xf32>, !tile.tile<?x91xf16> -> !tile.tile<?x91xf16> {
// CHECK:           arith.select
// CHECK:         tile.store %[[Y]], %y[0, 0] : !tile.tile<?x91xf16>, memref<?x91xf16>
// CHECK-NEXT:    func.return

// PTX-LABEL: .visible .entry linear_relu(
// PTX:       .param .u64 p_y,
// PTX-NEXT:  .param .u32 s_M
// PTX-NEXT:  )

// torch.bmm with a static batch and ? M, N, K: rank-3 tiles 3x?x?. (A ? batch is refused:
// linalg-to-tile-errors.mlir.)
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @bmm(%a: memref<3x?x?xf16>, %b: memref<3x?x?xf16>, %d: memref<3x?x?xf16>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cst = arith.constant 0.000000e+00 : f32
  %m = memref.dim %a, %c1 : memref<3x?x?xf16>
  %n = memref.dim %b, %c2 : memref<3x?x?xf16>
  %acc = memref.alloc(%m, %n) {alignment = 64 : i64} : memref<3x?x?xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<3x?x?xf32>)
  linalg.batch_matmul ins(%a, %b : memref<3x?x?xf16>, memref<3x?x?xf16>) outs(%acc : memref<3x?x?xf32>)
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%acc : memref<3x?x?xf32>) outs(%d : memref<3x?x?xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return
}
// CHECK-LABEL: func.func @bmm(%a: memref<3x?x?xf16>, %b: memref<3x?x?xf16>, %d: memref<3x?x?xf16>)
// CHECK:         %td = tile.mma %ta, %tb, %zero : !tile.tile<3x?x?xf16>, !tile.tile<3x?x?xf16>, !tile.tile<3x?x?xf32> -> !tile.tile<3x?x?xf32>
// CHECK-NEXT:    %[[D:.*]] = tile.map %td : !tile.tile<3x?x?xf32> -> !tile.tile<3x?x?xf16> {
// CHECK:         tile.store %[[D]], %d[0, 0, 0] : !tile.tile<3x?x?xf16>, memref<3x?x?xf16>

// PTX-LABEL: .visible .entry bmm(
// PTX:       .param .u32 s_M,
