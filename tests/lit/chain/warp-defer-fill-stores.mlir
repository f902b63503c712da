// warp-defer-fill-stores moves each warp.fill_store to just before the next gpu.barrier of its
// block (the block's end where none follows), past the work in between; nothing else moves.
// (The fill in PTX: tests/lit/passes/staged-ptx.mlir.)
// RUN: %tilemma-opt %s -p warp-defer-fill-stores | filecheck %s
// RUN: not %tilemma-opt %s -p warp-to-ptx 2>&1 | filecheck %s --check-prefix=NOMMA

// CHECK-LABEL: func.func @g
// CHECK:       %[[W0:.*]] = warp.fill_load %b
// CHECK-NEXT:  %[[X:.*]] = arith.addi
// CHECK-NEXT:  warp.fill_store %[[W0]]
// CHECK-NEXT:  "gpu.barrier"() : () -> ()
// CHECK-NEXT:  %[[W1:.*]] = warp.fill_load %b
// CHECK-NEXT:  arith.muli %[[X]]
// CHECK-NEXT:  warp.fill_store %[[W1]]
// CHECK-NEXT:  func.return
// NOMMA:       warp-defer-fill-stores.mlir:[[# @LINE + 1]]:1: error: func.func: warp-to-ptx: a kernel has no warp.mma
func.func @g(%b: memref<256x256xsi8> {warp.role = ["b"]}, %k: memref<1xsi32> {warp.role = ["d"]}) attributes {warp.target = #warp.target<"sm_90", "9.0">, warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 1x1, stages = 2, stage_k = 64, reads = ahead, group_m = 0, fill = b>, warp.grid = array<i64: 1, 1, 1>, warp.block = array<i64: 128, 1, 1>} {
  %z = arith.constant 0 : index
  %one = arith.constant 1 : index
  %s = memref.alloc() {alignment = 128 : i64} : memref<2x128x64xsi8, 3 : i64>
  %w0 = warp.fill_load %b[%z, %z, %z] {window = array<i64: 0, 0>, extent = array<i64: 1, 256, 256>, shape = array<i64: 128, 64>, threads = 128 : i64, transpose} : memref<256x256xsi8> -> !warp.staged<16>
  warp.fill_store %w0, %s[%z] {threads = 128 : i64} : !warp.staged<16>, memref<2x128x64xsi8, 3 : i64>
  %x = arith.addi %one, %one : index
  "gpu.barrier"() : () -> ()
  %w1 = warp.fill_load %b[%z, %x, %z] {window = array<i64: 0, 0>, extent = array<i64: 1, 256, 256>, shape = array<i64: 128, 64>, threads = 128 : i64, transpose} : memref<256x256xsi8> -> !warp.staged<16>
  warp.fill_store %w1, %s[%one] {threads = 128 : i64} : !warp.staged<16>, memref<2x128x64xsi8, 3 : i64>
  %y = arith.muli %x, %x : index
  func.return
}
