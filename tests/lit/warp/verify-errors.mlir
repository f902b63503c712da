// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: echo 'func.func @f(%c: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f16>>) {func.return}' | not %tilemma-opt 2>&1 | filecheck %s --check-prefix=PARSE
// PARSE: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 is not an mma variant of the ISA table
// The warp dialect's verifiers, each broken once: fragments must belong to the instruction that
// uses them, in the operand slot their type names.

func.func @wrong_slot(%a: !warp.frag<b, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %b: !warp.frag<b, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %c: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>) {
  %d = warp.mma %a, %b, %c : !warp.frag<b, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, !warp.frag<b, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>> -> !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.mma a must be a fragment of operand a, got b

// -----
func.func @other_instruction(%a: !warp.frag<a, f16, #warp.variant<m16n8k8, f32, f16, f16, f32>>, %b: !warp.frag<b, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %c: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>) {
  %d = warp.mma %a, %b, %c : !warp.frag<a, f16, #warp.variant<m16n8k8, f32, f16, f16, f32>>, !warp.frag<b, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>> -> !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.mma a belongs to mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32, not to the instruction mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// -----
func.func @sparse_without_metadata(%a: !warp.frag<a, f16, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">>, %b: !warp.frag<b, f16, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">>, %c: !warp.frag<acc, f32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">>) {
  %d = warp.mma %a, %b, %c : !warp.frag<a, f16, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">>, !warp.frag<b, f16, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">>, !warp.frag<acc, f32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">> -> !warp.frag<acc, f32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.mma: a metadata fragment is needed exactly for mma.sp variants

// -----
func.func @store_a(%a: !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %m: memref<16x16xf16>, %i: index) {
  warp.store %a, %m[%i, %i, %i] {window = array<i64: 0, 0>, extent = array<i64: 1, 16, 16>} : !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>, memref<16x16xf16>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.store: only accumulator fragments are stored

// -----
func.func @bad_window(%m: memref<16x16xf16>, %i: index) {
  %f = warp.load %m[%i, %i, %i] {window = array<i64: 0>, extent = array<i64: 1, 16, 16>} : memref<16x16xf16> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load: window has 1 entries for a rank-2 memref


// -----
func.func @ldmatrix_trans_8bit(%s: memref<2x64x64xsi8, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>, trans} : memref<2x64x64xsi8, 3> -> !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.ldmatrix: trans reads 8-bit elements as byte pairs into two B fragments (the even and the odd columns of 16)

// -----
func.func @unpair_not_accumulators(%x: !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>) {
  %p, %q = warp.unpair_columns %x, %x : !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>> -> !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.unpair_columns: accumulators of one m16n8 instruction in, the same out

// -----
func.func @pair_packed_accumulators(%x: !warp.frag<acc, f16, #warp.variant<m16n8k32, f16, e4m3, e4m3, f16>>) {
  %p, %q = warp.pair_columns %x, %x : !warp.frag<acc, f16, #warp.variant<m16n8k32, f16, e4m3, e4m3, f16>>, !warp.frag<acc, f16, #warp.variant<m16n8k32, f16, e4m3, e4m3, f16>> -> !warp.frag<acc, f16, #warp.variant<m16n8k32, f16, e4m3, e4m3, f16>>, !warp.frag<acc, f16, #warp.variant<m16n8k32, f16, e4m3, e4m3, f16>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.pair_columns: the accumulators hold one 32-bit value a register (4 registers)

// -----
func.func @ldmatrix_wrong_buffer(%s: memref<2x64x64xf16, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x64xf16, 3> -> !warp.frag<a, bf16, #warp.variant<m16n8k16, f32, bf16, bf16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.ldmatrix: a f16 buffer holds no bf16 fragments

// -----
func.func @ldmatrix_rounding_not_tf32(%s: memref<2x64x64xf16, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>, rounding = #tile<rounding rna>} : memref<2x64x64xf16, 3> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.ldmatrix: rounding (a #tile<rounding ...>) reads an f32 buffer as tf32 fragments

// -----
func.func @ldmatrix_f64(%s: memref<2x64x64xf64, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x64xf64, 3> -> !warp.frag<a, f64, #warp.variant<m8n8k4, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.ldmatrix: loads A or B fragments of a dense 16-bit m16n8k16 or 8-bit m16n8k32 mma

// -----
func.func @load_shared_16bit(%s: memref<2x64x64xf16, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x64xf16, 3> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared: reads fragments of one 32- or 64-bit element per register, not 16-bit (narrower ones come from warp.ldmatrix)

// -----
func.func @load_shared_accumulator(%s: memref<2x64x64xf64, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x64xf64, 3> -> !warp.frag<acc, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared: loads A or B fragments of a dense mma

// -----
func.func @load_shared_global(%s: memref<64x64xf64>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<64x64xf64> -> !warp.frag<a, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared source must be a 3-d shared memref (stages x rows x cols, memory space 3)

// -----
func.func @load_shared_wrong_buffer(%s: memref<2x64x64xf32, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x64xf32, 3> -> !warp.frag<a, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared: a f32 buffer holds no f64 fragments

// -----
func.func @load_shared_rounding_not_tf32(%s: memref<2x64x64xf64, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>, rounding = #tile<rounding rna>} : memref<2x64x64xf64, 3> -> !warp.frag<a, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared: rounding (a #tile<rounding ...>) reads an f32 buffer as tf32 fragments

// -----
func.func @load_shared_offsets(%s: memref<2x64x64xf64, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0>} : memref<2x64x64xf64, 3> -> !warp.frag<a, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared: expected three indices (stage, row, col) and two offsets (row, col)

// -----
// The swizzle is the buffer's type: rows it cannot apply to (16 bytes: one granule) refuse it.
func.func @swizzled_short_rows(%s: memref<2x64x2xf64, #warp.swizzled<1>, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.load_shared %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x2xf64, #warp.swizzled<1>, 3> -> !warp.frag<a, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.load_shared source: #warp.swizzled needs rows of a power of two of at least 32 bytes (the XOR stays inside the row), not 16

// -----
func.func @swizzled_rows_not_a_power_of_two(%g: memref<64x24xf16>, %s: memref<2x64x24xf16, #warp.swizzled<5>, 3>, %i: index) {
  warp.copy_async %g[%i, %i, %i], %s[%i] {window = array<i64: 0, 0>, extent = array<i64: 1, 64, 24>, threads = 128 : i64, vector = 16 : i64} : memref<64x24xf16>, memref<2x64x24xf16, #warp.swizzled<5>, 3>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.copy_async destination: #warp.swizzled needs rows of a power of two of at least 32 bytes (the XOR stays inside the row), not 48

// -----
// The lowering addresses a shared buffer as row-major or swizzled: another layout is refused.
func.func @shared_strided(%s: memref<2x64x32xf16, strided<[4096, 64, 1]>, 3>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %f = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>} : memref<2x64x32xf16, strided<[4096, 64, 1]>, 3> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.ldmatrix source: a shared buffer is row-major or #warp.swizzled, not strided<[4096, 64, 1]>

// -----
// Split-K: the sum is the last CTA's, after the publish of the same tile and workspace.
func.func @sum_without_publish(%c: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %ws: memref<64xf32>, %t: index) {
  %d = warp.split_k_sum(%c) of 2 : i64 tile %t in %ws : memref<64xf32>, (!warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>) -> !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.split_k_sum: follows the warp.split_k_publish of its tile and workspace in its block, of as many splits and fragments

// -----
func.func @sum_of_other_splits(%p: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %c: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %ws: memref<64xf32>, %n: memref<1xui32>, %s: index, %t: index) {
  warp.split_k_publish(%p) split %s of 2 : i64 tile %t in %ws, %n : memref<64xf32>, memref<1xui32>, (!warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>)
  %d = warp.split_k_sum(%c) of 3 : i64 tile %t in %ws : memref<64xf32>, (!warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>) -> !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.split_k_sum: follows the warp.split_k_publish

// -----
func.func @publish_one_split(%p: !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>, %ws: memref<64xf32>, %n: memref<1xui32>, %s: index, %t: index) {
  warp.split_k_publish(%p) split %s of 1 : i64 tile %t in %ws, %n : memref<64xf32>, memref<1xui32>, (!warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>)
  func.return
}
// CHECK: verify-errors.mlir:[[# @LINE - 3]]:3
// CHECK: warp.split_k_publish: splits is 2 or more
