// RUN: tilemma-opt %s -p linalg-to-tile | tilemma-opt | filecheck %s
// What linalg-to-tile makes of the elementwise ops around a matmul: reads through indexing maps
// and views (broadcasts, transposes), buffers as values, several outputs, the generic and named
// forms of the ops.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A bias handed over as a stride-0 view, a per-row scale as 37x1, a scalar as a rank-0 memref
// and one as memref<1xf32>; two results stored (the pre-activation and the activation).
func.func @views(%a: memref<37x64xf16>, %b: memref<64x91xf16>, %bias: memref<37x91xf32, strided<[0, 1]>>,
                 %s: memref<37x1xf32>, %alpha: memref<f32>, %beta: memref<1xf32>,
                 %pre: memref<37x91xf32>, %d: memref<37x91xbf16>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<37x91xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<37x91xf32>)
  linalg.matmul ins(%a, %b : memref<37x64xf16>, memref<64x91xf16>) outs(%acc : memref<37x91xf32>)
  linalg.generic {indexing_maps = [#id, #id, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (0)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %bias, %s, %alpha, %beta : memref<37x91xf32>, memref<37x91xf32, strided<[0, 1]>>, memref<37x1xf32>, memref<f32>, memref<1xf32>) outs(%pre : memref<37x91xf32>) {
  ^bb0(%x: f32, %bv: f32, %sv: f32, %av: f32, %cv: f32, %o: f32):
    %0 = arith.mulf %x, %sv : f32
    %1 = math.fma %0, %av, %bv : f32
    %2 = arith.addf %1, %cv : f32
    linalg.yield %2 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%pre : memref<37x91xf32>) outs(%d : memref<37x91xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %z = arith.constant 0.0 : f32
    %0 = arith.maximumf %x, %z : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  }
  return
}

// The generic form of a u8 x u8 matmul (linalg-generalize-named-ops; arith.extui: unsigned),
// accumulating into C in place, then a named linalg.add of a residual.
func.func @generic_u8(%a: memref<16x64xi8>, %b: memref<64x24xi8>, %c: memref<16x24xi32>, %r: memref<16x24xi32>, %d: memref<16x24xi32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x64xi8>, memref<64x24xi8>) outs(%c : memref<16x24xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extui %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.add ins(%c, %r : memref<16x24xi32>, memref<16x24xi32>) outs(%d : memref<16x24xi32>)
  return
}

// A transposed through linalg.transpose, batched; a nonzero fill as the accumulator; a
// linalg.broadcast of a per-batch-row vector.
func.func @batched(%at: memref<2x48x37xf16>, %b: memref<2x48x29xf16>, %v: memref<2x29xf16>, %d: memref<2x37x29xf16>) {
  %one = arith.constant 1.0 : f16
  %a = memref.alloc() : memref<2x37x48xf16>
  linalg.transpose ins(%at : memref<2x48x37xf16>) outs(%a : memref<2x37x48xf16>) permutation = [0, 2, 1]
  %acc = memref.alloc() : memref<2x37x29xf16>
  linalg.fill ins(%one : f16) outs(%acc : memref<2x37x29xf16>)
  linalg.batch_matmul ins(%a, %b : memref<2x37x48xf16>, memref<2x48x29xf16>) outs(%acc : memref<2x37x29xf16>)
  %vb = memref.alloc() : memref<2x37x29xf16>
  linalg.broadcast ins(%v : memref<2x29xf16>) outs(%vb : memref<2x37x29xf16>) dimensions = [1]
  linalg.mul ins(%acc, %vb : memref<2x37x29xf16>, memref<2x37x29xf16>) outs(%d : memref<2x37x29xf16>)
  return
}

// A stride-0 view (the caller's b.expand(37, 91)) is the vector it repeats: the argument is
// retyped to memref<91xf32> and broadcast along the rows; a 37x1 scale read at (d0, 0) is a
// memref<37xf32> broadcast along the columns; rank-0 and one-element memrefs are scalars.
// Both stored results come from one map (the pre-activation is yielded too).
// CHECK-LABEL: func.func @views(%a: memref<37x64xf16>, %b: memref<64x91xf16>, %bias: memref<91xf32>, %s: memref<37xf32>, %alpha: memref<f32>, %beta: memref<1xf32>, %pre: memref<37x91xf32>, %d: memref<37x91xbf16>)
// CHECK:         %td = tile.mma %ta, %tb, %zero
// CHECK-NEXT:    %[[BIAS:.*]] = tile.broadcast %bias[0] dims [1] : memref<91xf32> -> !tile.tile<37x91xf32>
// CHECK-NEXT:    %[[S:.*]] = tile.broadcast %s[0] dims [0] : memref<37xf32> -> !tile.tile<37x91xf32>
// CHECK-NEXT:    %[[AL:.*]] = tile.broadcast %alpha[] dims [] : memref<f32> -> !tile.tile<37x91xf32>
// CHECK-NEXT:    %[[BE:.*]] = tile.broadcast %beta[0] dims [] : memref<1xf32> -> !tile.tile<37x91xf32>
// CHECK-NEXT:    %[[D:.*]], %[[PRE:.*]] = tile.map %td, %[[BIAS]], %[[S]], %[[AL]], %[[BE]] : {{.*}} -> !tile.tile<37x91xbf16>, !tile.tile<37x91xf32> {
// CHECK-NEXT:    ^bb0(%x: f32, %bv: f32, %sv: f32, %av: f32, %cv: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %x, %sv : f32
// CHECK-NEXT:      %[[F:.*]] = math.fma %[[M]], %av, %bv : f32
// CHECK-NEXT:      %[[P:.*]] = arith.addf %[[F]], %cv : f32
// CHECK-NEXT:      %z = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.maximumf %[[P]], %z : f32
// CHECK-NEXT:      %[[T:.*]] = arith.truncf %[[R]] : f32 to bf16
// CHECK-NEXT:      tile.yield %[[T]], %[[P]] : bf16, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.store %[[PRE]], %pre[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
// CHECK-NEXT:    tile.store %[[D]], %d[0, 0] : !tile.tile<37x91xbf16>, memref<37x91xbf16>
// CHECK-NEXT:    func.return

// The generic form of the matmul converts as the named one; arith.extui reads the i8 operands
// as ui8. C accumulates in place and is stored; the residual is a whole-tile load.
// CHECK-LABEL: func.func @generic_u8(%a: memref<16x64xui8>, %b: memref<64x24xui8>, %c: memref<16x24xsi32>, %r: memref<16x24xsi32>, %d: memref<16x24xsi32>)
// CHECK-NEXT:    %ta = tile.load %a[0, 0] : memref<16x64xui8> -> !tile.tile<16x64xui8>
// CHECK-NEXT:    %tb = tile.load %b[0, 0] : memref<64x24xui8> -> !tile.tile<64x24xui8>
// CHECK-NEXT:    %tc = tile.load %c[0, 0] : memref<16x24xsi32> -> !tile.tile<16x24xsi32>
// CHECK-NEXT:    %td = tile.mma %ta, %tb, %tc : !tile.tile<16x64xui8>, !tile.tile<64x24xui8>, !tile.tile<16x24xsi32> -> !tile.tile<16x24xsi32>
// CHECK-NEXT:    %[[R:.*]] = tile.load %r[0, 0] : memref<16x24xsi32> -> !tile.tile<16x24xsi32>
// CHECK-NEXT:    %[[Y:.*]] = tile.map %td, %[[R]] : !tile.tile<16x24xsi32>, !tile.tile<16x24xsi32> -> !tile.tile<16x24xsi32> {
// CHECK-NEXT:    ^bb0(%[[X0:.*]]: i32, %[[X1:.*]]: i32):
// CHECK-NEXT:      %[[S:.*]] = arith.addi %[[X0]], %[[X1]] : i32
// CHECK-NEXT:      tile.yield %[[S]] : i32
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.store %td, %c[0, 0] : !tile.tile<16x24xsi32>, memref<16x24xsi32>
// CHECK-NEXT:    tile.store %[[Y]], %d[0, 0] : !tile.tile<16x24xsi32>, memref<16x24xsi32>

// A batch of A^T through linalg.transpose [0, 2, 1]: a view with the batch stride kept. A fill
// with 1.0 is the accumulator; linalg.broadcast of a (batch, column) vector is dims [0, 2].
// CHECK-LABEL: func.func @batched(%at: memref<2x37x48xf16, strided<[1776, 1, 37]>>, %b: memref<2x48x29xf16>, %v: memref<2x29xf16>, %d: memref<2x37x29xf16>)
// CHECK-NEXT:    %[[ONE:.*]] = tile.constant 1.0 : !tile.tile<2x37x29xf16>
// CHECK-NEXT:    %ta = tile.load %at[0, 0, 0] : memref<2x37x48xf16, strided<[1776, 1, 37]>> -> !tile.tile<2x37x48xf16>
// CHECK-NEXT:    %tb = tile.load %b[0, 0, 0] : memref<2x48x29xf16> -> !tile.tile<2x48x29xf16>
// CHECK-NEXT:    %td = tile.mma %ta, %tb, %[[ONE]]
// CHECK-NEXT:    %[[V:.*]] = tile.broadcast %v[0, 0] dims [0, 2] : memref<2x29xf16> -> !tile.tile<2x37x29xf16>
// CHECK-NEXT:    %[[Y:.*]] = tile.map %td, %[[V]]
// CHECK:           arith.mulf
// CHECK:         tile.store %[[Y]], %d[0, 0, 0] : !tile.tile<2x37x29xf16>, memref<2x37x29xf16>

// An f8 result: arith.truncf of a value clamped to the type's finite range is the hardware's
// saturating conversion, tile.cast after the map (which yields the clamped f32). A scalar
// constant operand of the generic is a constant in the body.
func.func @fp8(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %s: memref<1xf32>, %d: memref<16x8xf8E5M2>) {
  %z = arith.constant 0.0 : f32
  %lo = arith.constant -57344.0 : f32
  %hi = arith.constant 57344.0 : f32
  %c = memref.alloc() : memref<16x8xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<16x8xf32>)
  linalg.matmul ins(%a, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%c : memref<16x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%c, %s, %hi : memref<16x8xf32>, memref<1xf32>, f32) outs(%d : memref<16x8xf8E5M2>) {
  ^bb0(%x: f32, %sv: f32, %top: f32, %o: f8E5M2):
    %0 = arith.mulf %x, %sv : f32
    %1 = arith.minnumf %0, %top : f32
    %2 = arith.maxnumf %lo, %1 : f32
    %3 = arith.truncf %2 : f32 to f8E5M2
    linalg.yield %3 : f8E5M2
  }
  return
}
// CHECK-LABEL: func.func @fp8(
// CHECK:         %[[S:.*]] = tile.broadcast %s[0] dims [] : memref<1xf32> -> !tile.tile<16x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = tile.map %td, %[[S]] : !tile.tile<16x8xf32>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32> {
// CHECK-NEXT:    ^bb0(%x: f32, %sv: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %x, %sv : f32
// CHECK-NEXT:      %[[HI:.*]] = arith.constant 5.734400e+04 : f32
// CHECK-NEXT:      %[[A:.*]] = arith.minnumf %[[M]], %[[HI]] : f32
// CHECK-NEXT:      %[[LO:.*]] = arith.constant -5.734400e+04 : f32
// CHECK-NEXT:      %[[B:.*]] = arith.maxnumf %[[LO]], %[[A]] : f32
// CHECK-NEXT:      tile.yield %[[B]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[F8:.*]] = tile.cast %[[Y]] {rounding = #tile<rounding rn>} : !tile.tile<16x8xf32> -> !tile.tile<16x8xf8E5M2>
// CHECK-NEXT:    tile.store %[[F8]], %d[0, 0] : !tile.tile<16x8xf8E5M2>, memref<16x8xf8E5M2>

// Bufferization's copies (copy-before-write): an argument copied into a buffer is read as the
// argument; the result computed into a buffer and copied out is stored to the out parameter.
func.func @copies(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>, %d: memref<16x8xf32>) {
  %abuf = memref.alloc() : memref<16x16xf16>
  memref.copy %a, %abuf : memref<16x16xf16> to memref<16x16xf16>
  %cbuf = memref.alloc() : memref<16x8xf32>
  memref.copy %c, %cbuf : memref<16x8xf32> to memref<16x8xf32>
  linalg.matmul ins(%abuf, %b : memref<16x16xf16>, memref<16x8xf16>) outs(%cbuf : memref<16x8xf32>)
  memref.copy %cbuf, %d : memref<16x8xf32> to memref<16x8xf32>
  memref.dealloc %abuf : memref<16x16xf16>
  memref.dealloc %cbuf : memref<16x8xf32>
  return
}
// CHECK-LABEL: func.func @copies(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>, %d: memref<16x8xf32>)
// CHECK-NEXT:    %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
// CHECK-NEXT:    %tc = tile.load %c[0, 0] : memref<16x8xf32> -> !tile.tile<16x8xf32>
// CHECK-NEXT:    %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
// CHECK-NEXT:    %td = tile.mma %ta, %tb, %tc
// CHECK-NEXT:    tile.store %td, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
// CHECK-NEXT:    func.return
