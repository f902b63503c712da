// tile-distribute on sizes known at launch: each ? dimension of an argument is named by the size
// it is (warp.sizes), each ? stride gets its own symbol (warp.strides); the K loop runs to
// ceil(K / 16) * 16 from memref.dim; the grid is ? with its formula (warp.grid_sizes). The PTX
// takes one .u32 parameter per symbol after the pointers.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=0}' | %tilemma-opt -p tile-distribute | filecheck %s
// RUN: %tilemma compile %s --sm 90 --stages 0 | filecheck %s --check-prefix=PTX
// RUN: %tilemma compile %s --sm 90 --emit json | filecheck %s --check-prefix=JSON

// CHECK-LABEL: func.func @g(%a: memref<?x?xf16> {warp.role = ["a"], warp.sizes = ["M", "K"], warp.strides = ["a_stride0", ""]}, %b: memref<?x32xf16, strided<[?, 1]>> {warp.role = ["b"], warp.sizes = ["K", ""], warp.strides = ["b_stride0", ""]}, %d: memref<?x32xf16> {warp.role = ["d"], warp.sizes = ["M", ""], warp.strides = ["", ""]})
// CHECK-SAME:  warp.grid = array<i64: 2, -9223372036854775808, 1>, warp.grid_sizes = {{\[}}[2 : i64], [1 : i64, ["M", 64 : i64]], [1 : i64]]
// CHECK:       %[[K:.*]] = memref.dim %a, %{{.*}} : memref<?x?xf16>
// CHECK:       %[[UP:.*]] = arith.addi %[[K]], %{{.*}} : index
// CHECK:       %[[STEPS:.*]] = arith.divui %[[UP]], %{{.*}} : index
// CHECK:       %[[END:.*]] = arith.muli %[[STEPS]], %{{.*}} : index
// CHECK:       scf.for %{{.*}} = %{{.*}} to %[[END]] step %{{.*}}

// PTX:      .param .u64 p_d,
// PTX-NEXT: .param .u32 s_M,
// PTX-NEXT: .param .u32 s_K,
// PTX-NEXT: .param .u32 s_a_stride0,
// PTX-NEXT: .param .u32 s_b_stride0
// PTX:      grid (1, ceil(M/

// JSON: "size_params": [
// JSON: "name": "M"

func.func @g(%a: memref<?x?xf16>, %b: memref<?x32xf16, strided<[?, 1]>>, %d: memref<?x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<?x?xf16> -> !tile.tile<?x?xf16>
  %tb = tile.load %b[0, 0] : memref<?x32xf16, strided<[?, 1]>> -> !tile.tile<?x32xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<?x?xf16>, !tile.tile<?x32xf16> -> !tile.tile<?x32xf16>
  tile.store %td, %d[0, 0] : !tile.tile<?x32xf16>, memref<?x32xf16>
  func.return
}
