"""`tile-to-ptx`: lowers each selected and tiled GEMM kernel to a `ptx.module`.

Every lane works out, from the fragment table (`tilemma.compiler.fragments`, the one source of
truth for which lane holds which element), the matrix row and column of each value it feeds to
or takes from the `mma`: the table's linear form gives a per-lane base computed once, plus a
per-value constant folded into the instruction's immediate offset. Loads and stores outside the
tile are predicated off (loads then read 0, which adds nothing), so any M, N, K is handled
without an out-of-bounds access; predicates that can never be false are not emitted.

The kernel: CTA (x, y, z) covers columns x*BN.., rows y*BM.. of batch z; warp w of the CTA
covers a warp tile of RM x RN instructions; a loop walks K one instruction-K at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tilemma.compiler import fragments, scale_fragments
from tilemma.compiler.isa import MmaVariant, parse_opcode
from tilemma.compiler.mma_layouts import instruction_layouts
from tilemma.compiler.ptx_builder import PtxBuilder, f32_literal, f64_literal
from tilemma.dialects import ptx, tile
from tilemma.passes.errors import LoweringError
from tilemma.passes.gemm_kernel import PTX_TYPE, GemmKernel, MemOperand, read_kernel
from tilemma.passes.sparse_a import SparseALoader, metadata_linear

# Load/store opcode suffix of a whole element in memory, by storage bits.
_MEM = {64: "f64", 32: "b32", 16: "u16", 8: "u8"}
# Where a narrow float sits in the 8-bit container of .kind::f8f6f4 / mxf8f6f4: e2m1 in bits
# 2..5 (shifted left by 2); e3m2 and e2m3 in bits 0..5 (as stored).
_CONTAINER_SHIFT = {"e2m1": 2}
_FLOAT_ACC_BANK = {"f32": "f32", "f64": "f64"}


@dataclass
class _Operand:
    """Per-lane addressing of one matrix in memory."""

    mem: MemOperand
    lay: fragments.FragmentLayout
    ptr: str  # .b64 register: element address (whole-byte types) or bit address (sub-byte)
    row_reg: str  # lane's row index within the tile (without per-value offsets)
    col_reg: str
    row_preds: dict[int, str | None] = field(default_factory=dict)
    col_preds: dict[int, str | None] = field(default_factory=dict)

    @property
    def sub_byte(self) -> bool:
        return self.mem.bits < 8


class _KernelLowering:
    def __init__(self, g: GemmKernel, instr: MmaVariant, tiling: dict[str, tuple[int, ...]]):
        self.g, self.instr, self.b = g, instr, PtxBuilder()
        self.rm, self.rn = tiling["warp_tile"]
        self.wm, self.wn = tiling["warps"]
        self.grid = tiling["grid"]
        lays = instruction_layouts(instr)
        self.lay_a, self.lay_b, self.lay_c = lays.a, lays.b, lays.c
        self.mi, self.ni, self.ki = lays.warp_shape
        self.bm, self.bn = self.wm * self.rm * self.mi, self.wn * self.rn * self.ni

    # -- helpers --------------------------------------------------------------------------

    def lane_linear(self, lane: str, weights: tuple[int, ...], start: str) -> str:
        """start + sum_i bit_i(lane) * weights[i], the lane's part of a fragment coordinate."""
        b = self.b
        acc = b.reg("b32")
        b.emit("mov.u32", acc, start)
        for i, w in enumerate(weights):
            if w:
                bit = b.reg("b32")
                b.emit("bfe.u32", bit, lane, i, 1)
                b.emit("mad.lo.u32", acc, bit, w, acc)
        return acc

    def pred_lt(self, cache: dict[int, str | None], reg: str, const: int, bound: int, static: bool) -> str | None:
        """Predicate reg + const < bound (None when it always holds)."""
        if static:
            return None
        if const not in cache:
            p = self.b.reg("pred")
            self.b.emit("setp.lt.s32", p, reg, bound - const)
            cache[const] = p
        return cache[const]

    def both(self, p: str | None, q: str | None) -> str | None:
        if p is None or q is None:
            return p or q
        r = self.b.reg("pred")
        self.b.emit("and.pred", r, p, q)
        return r

    def load_element(self, op: _Operand, offset: int, pred: str | None, dst: str, bank: str) -> None:
        """dst = element at op.ptr + offset (elements), 0 where pred is false; widened to dst."""
        b, bits = self.b, op.mem.bits
        if pred is not None:
            zero = {"f32": f32_literal(0.0), "f64": f64_literal(0.0)}.get(bank, "0")
            b.emit(f"mov.{bank}", dst, zero)
        if not op.sub_byte:
            suffix = _MEM[bits]
            if bank == "f32" and bits == 32:
                suffix = "f32"
            b.emit(f"ld.global.{suffix}", dst, f"[{op.ptr}+{offset * bits // 8}]", guard=pred)
            return
        bitaddr, byte = b.reg("b64"), b.reg("b64")
        shift = b.reg("b32")
        b.emit("add.s64", bitaddr, op.ptr, offset * bits)
        b.emit("shr.u64", byte, bitaddr, 3)
        b.emit("cvt.u32.u64", shift, bitaddr)
        b.emit("and.b32", shift, shift, 7)
        b.emit("ld.global.u8", dst, f"[{byte}]", guard=pred)
        signed = op.mem.stored == "si4"
        b.emit("bfe.s32" if signed else "bfe.u32", dst, dst, shift, bits)

    # -- the kernel -----------------------------------------------------------------------

    def lower(self, sm: str, ptx_version: str) -> ptx.ModuleOp_:
        g, b, instr = self.g, self.b, self.instr
        threads = 32 * self.wm * self.wn
        b.comment(
            f"{instr.opcode}: grid ({self.grid[0]}, {self.grid[1]}, {self.grid[2]}), "
            f"block ({threads}, 1, 1); CTA tile {self.bm}x{self.bn}, warps {self.wm}x{self.wn}, "
            f"warp tile {self.rm}x{self.rn} instructions"
        )
        params = [f"p_{name}" for name in g.params]
        check_pattern = instr.sparse is not None and g.a.sparse == "check"
        if check_pattern:  # where the first A group that breaks the sparsity pattern is recorded
            params.append("p_sparsity_error")
        ptrs = []
        for name in params:
            r = b.reg("b64")
            b.emit("ld.param.u64", r, f"[{name}]")
            b.emit("cvta.to.global.u64", r, r)
            ptrs.append(r)
        tid = b.special("%tid.x")
        lane, warp = b.reg("b32"), b.reg("b32")
        b.emit("and.b32", lane, tid, 31)
        b.emit("shr.u32", warp, tid, 5)
        warp_m, warp_n = b.reg("b32"), b.reg("b32")
        b.emit("rem.u32", warp_m, warp, self.wm)
        b.emit("div.u32", warp_n, warp, self.wm)
        cta_n, cta_m, z = b.special("%ctaid.x"), b.special("%ctaid.y"), b.special("%ctaid.z")
        self.z = z
        row0, col0 = b.reg("b32"), b.reg("b32")
        b.emit("mul.lo.u32", row0, cta_m, self.bm)
        b.emit("mad.lo.u32", row0, warp_m, self.rm * self.mi, row0)
        b.emit("mul.lo.u32", col0, cta_n, self.bn)
        b.emit("mad.lo.u32", col0, warp_n, self.rn * self.ni, col0)

        self.rows_exact = rows_exact = g.m % self.bm == 0
        cols_exact = g.n % self.bn == 0
        self.k_exact = k_exact = g.k % self.ki == 0

        def operand(mem: MemOperand, lay, lin: fragments.LinearForm, row_start: str, col_start: str, col_scale: int = 1) -> _Operand:
            row = self.lane_linear(lane, lin.row_w, row_start)
            col = self.lane_linear(lane, lin.col_w, col_start)
            if col_scale != 1:  # compressed A / metadata columns -> dense A columns
                b.emit("mul.lo.u32", col, col, col_scale)
            return _Operand(mem, lay, self.address_base_for(mem, ptrs[mem.param], z, row, col), row, col)

        zero = "0"
        lin_a, lin_b, lin_c = (fragments.linear_form(l) for l in (self.lay_a, self.lay_b, self.lay_c))
        sparse = None
        if instr.sparse:
            sparse = SparseALoader(self, instr, g.a.sparse == "prune", ptrs[-1] if check_pattern else None)
            geo = sparse.geo
            lin_e = metadata_linear(instr)
            # A's lane columns count kept elements (chunk*kept apart), metadata's count fields
            # (two per chunk): both scale to dense columns (chunk elements per chunk).
            a = operand(g.a, self.lay_a, lin_a, row0, zero, geo.chunk // geo.kept)
            meta = operand(g.a, self.lay_a, lin_e, row0, zero, geo.chunk // 2)
        else:
            a = operand(g.a, self.lay_a, lin_a, row0, zero)
        bop = operand(g.b, self.lay_b, lin_b, zero, col0)

        # Accumulators: RM x RN instructions' worth, initialised from C or a constant.
        acc_bank = _FLOAT_ACC_BANK.get(instr.ctype, "b32")
        acc = [[b.regs(acc_bank, self.lay_c.regs) for _ in range(self.rn)] for _ in range(self.rm)]
        d_mem = g.d
        c_row = self.lane_linear(lane, lin_c.row_w, row0)
        c_col = self.lane_linear(lane, lin_c.col_w, col0)
        c_row_preds: dict[int, str | None] = {}
        c_col_preds: dict[int, str | None] = {}

        def c_pred(i: int, j: int, v: int) -> str | None:
            pr = self.pred_lt(c_row_preds, c_row, i * self.mi + lin_c.row_off[v], g.m, rows_exact)
            pc = self.pred_lt(c_col_preds, c_col, j * self.ni + lin_c.col_off[v], g.n, cols_exact)
            return self.both(pr, pc)

        def c_offset(mem: MemOperand, i: int, j: int, v: int) -> int:
            return (i * self.mi + lin_c.row_off[v]) * mem.row_stride + (j * self.ni + lin_c.col_off[v]) * mem.col_stride

        b.comment("accumulators")
        if isinstance(g.c, MemOperand):
            c_op = _Operand(g.c, self.lay_c, self.address_base_for(g.c, ptrs[g.c.param], z, c_row, c_col), c_row, c_col)
            self.fill_fragments(acc, c_op, lambda i, j, v: (c_pred(i, j, v), c_offset(g.c, i, j, v)), self.lay_c, acc_bank)
        else:
            literal = self.splat_literal(g.c, instr.ctype)
            for regs in (r for row in acc for r in row):
                for r in regs:
                    b.emit(f"mov.{acc_bank}", r, literal)

        # Main loop over K.
        a_regs = [b.regs("f64" if self.lay_a.reg_bits == 64 else "b32", self.lay_a.regs) for _ in range(self.rm)]
        b_regs = [b.regs("f64" if self.lay_b.reg_bits == 64 else "b32", self.lay_b.regs) for _ in range(self.rn)]
        split = getattr(g.mma, "split_tf32", None) is not None
        a_lo = [b.regs("b32", self.lay_a.regs) for _ in range(self.rm)] if split else None
        b_lo = [b.regs("b32", self.lay_b.regs) for _ in range(self.rn)] if split else None
        e_regs = [b.reg("b32") for _ in range(self.rm)] if sparse else None
        scales = self.scale_operands(g, lane, row0, col0, ptrs) if g.scales else None
        sf_a = [b.reg("b32") for _ in range(self.rm)] if scales else None
        sf_b = [b.reg("b32") for _ in range(self.rn)] if scales else None
        steps = -(-g.k // self.ki)
        kk = b.reg("b32")
        b.emit("mov.u32", kk, 0)
        loop = b.label("k_loop")
        b.place_label(loop)
        a.col_preds.clear()
        bop.row_preds.clear()
        if sparse:
            meta.col_preds.clear()
            sparse.begin_step()
            for i in range(self.rm):
                sparse.fill_a(a, a_regs[i], lin_a, self.lay_a, i)
                sparse.fill_metadata(meta, e_regs[i], lin_e, i)
        else:
            self.fill_fragments(
                [a_regs],
                a,
                lambda _, i, v: (
                    self.both(
                        self.pred_lt(a.row_preds, a.row_reg, i * self.mi + lin_a.row_off[v], g.m, rows_exact),
                        self.pred_lt(a.col_preds, a.col_reg, lin_a.col_off[v], g.k, k_exact),
                    ),
                    (i * self.mi + lin_a.row_off[v]) * g.a.row_stride + lin_a.col_off[v] * g.a.col_stride,
                ),
                self.lay_a,
                "f64" if self.lay_a.reg_bits == 64 else "b32",
                convert_to=instr.atype,
                lo_regs=[a_lo] if split else None,
            )
        if scales:
            self.fill_scales(scales, sf_a, sf_b)
        self.fill_fragments(
            [b_regs],
            bop,
            lambda _, j, v: (
                self.both(
                    self.pred_lt(bop.row_preds, bop.row_reg, lin_b.row_off[v], g.k, k_exact),
                    self.pred_lt(bop.col_preds, bop.col_reg, j * self.ni + lin_b.col_off[v], g.n, cols_exact),
                ),
                lin_b.row_off[v] * g.b.row_stride + (j * self.ni + lin_b.col_off[v]) * g.b.col_stride,
            ),
            self.lay_b,
            "f64" if self.lay_b.reg_bits == 64 else "b32",
            convert_to=instr.btype,
            lo_regs=[b_lo] if split else None,
        )
        for i in range(self.rm):
            for j in range(self.rn):
                if split:  # small terms first: lo*hi, hi*lo, then hi*hi
                    b.mma(instr.opcode, acc[i][j], a_lo[i], b_regs[j], acc[i][j])
                    b.mma(instr.opcode, acc[i][j], a_regs[i], b_lo[j], acc[i][j])
                extra = ([e_regs[i], "0"] if sparse else []) + (
                    [sf_a[i], "{0, 0}", sf_b[j], "{0, 0}"] if scales else []
                )
                b.mma(instr.opcode, acc[i][j], a_regs[i], b_regs[j], acc[i][j], extra)
        # Advance along K.
        b.emit("add.u32", a.col_reg, a.col_reg, self.ki)
        b.emit("add.u32", bop.row_reg, bop.row_reg, self.ki)
        b.emit("add.s64", a.ptr, a.ptr, self.ki * g.a.col_stride * (g.a.bits if a.sub_byte else g.a.bits // 8))
        if sparse:
            b.emit("add.u32", meta.col_reg, meta.col_reg, self.ki)
            b.emit("add.s64", meta.ptr, meta.ptr, self.ki * (g.a.bits if meta.sub_byte else g.a.bits // 8))
        step_b = self.ki * g.b.row_stride
        b.emit("add.s64", bop.ptr, bop.ptr, step_b * (g.b.bits if bop.sub_byte else g.b.bits // 8))
        if scales:
            sa_op, sb_op, per_instr = scales
            b.emit("add.u32", sa_op.col_reg, sa_op.col_reg, per_instr)
            b.emit("add.s64", sa_op.ptr, sa_op.ptr, per_instr * sa_op.mem.col_stride)
            b.emit("add.u32", sb_op.row_reg, sb_op.row_reg, per_instr)
            b.emit("add.s64", sb_op.ptr, sb_op.ptr, per_instr * sb_op.mem.row_stride)
        b.emit("add.u32", kk, kk, 1)
        more = b.reg("pred")
        b.emit("setp.lt.u32", more, kk, steps)
        b.emit("bra.uni", loop, guard=more)

        # Store D.
        b.comment("store D")
        d_op = _Operand(d_mem, self.lay_c, self.address_base_for(d_mem, ptrs[d_mem.param], z, c_row, c_col), c_row, c_col)
        for i in range(self.rm):
            for j in range(self.rn):
                for v in range(self.lay_c.nvals):
                    self.store_value(d_op, acc[i][j], v, c_pred(i, j, v), c_offset(d_mem, i, j, v), acc_bank)
        b.emit("ret")
        entry = b.entry(g.name, [f".u64 {p}" for p in params], max_threads=threads)
        return ptx.ModuleOp_(ptx_version, sm, [entry])

    def scale_operands(self, g: GemmKernel, lane: str, row0: str, col0: str, ptrs: list[str]):
        """Per-lane addressing of scale_A (rows of A x K blocks) and scale_B (K blocks x columns
        of B) for the canonical selectors {0, 0}: the scale layouts' lanes at byte j hold K
        block j of the instruction."""
        sa_mem, sb_mem, block = g.scales  # type: ignore[misc]
        scale_vec = f"{self.ki // block}X"
        wa, per_instr = scale_fragments.scale_linear("a", scale_vec)
        wb, _ = scale_fragments.scale_linear("b", scale_vec)
        b = self.b
        rows, kb = self.lane_linear(lane, wa, row0), b.reg("b32")
        b.emit("mov.u32", kb, 0)
        sa = _Operand(sa_mem, self.lay_a, self.address_base_for(sa_mem, ptrs[sa_mem.param], self.z, rows, kb), rows, kb)
        cols, kb_b = self.lane_linear(lane, wb, col0), b.reg("b32")
        b.emit("mov.u32", kb_b, 0)
        sb = _Operand(sb_mem, self.lay_b, self.address_base_for(sb_mem, ptrs[sb_mem.param], self.z, kb_b, cols), kb_b, cols)
        self.scale_blocks = -(-g.k // block)
        return sa, sb, per_instr

    def fill_scales(self, scales, sf_a: list[str], sf_b: list[str]) -> None:
        """Byte j of each lane's scale register = the scale of K block j of this k-step."""
        b, g = self.b, self.g
        sa, sb, per_instr = scales
        for regs, op, step, count, bound, along_rows in (
            (sf_a, sa, self.mi, self.rm, g.m, True),
            (sf_b, sb, self.ni, self.rn, g.n, False),
        ):
            lane_idx = op.row_reg if along_rows else op.col_reg
            block_idx = op.col_reg if along_rows else op.row_reg
            idx_preds: dict[int, str | None] = {}
            blk_preds: dict[int, str | None] = {}
            for i, reg in enumerate(regs):
                b.emit("mov.b32", reg, 0)
                for j in range(per_instr):
                    p_idx = self.pred_lt(idx_preds, lane_idx, i * step, bound, False)
                    p_blk = self.pred_lt(blk_preds, block_idx, j, self.scale_blocks, False)
                    rs, cs = op.mem.row_stride, op.mem.col_stride
                    offset = (i * step * rs + j * cs) if along_rows else (j * rs + i * step * cs)
                    t = b.reg("b32")
                    self.load_element(op, offset, self.both(p_idx, p_blk), t, "b32")
                    b.emit("bfi.b32", reg, t, reg, 8 * j, 8)

    def address_base_for(self, mem: MemOperand, ptr: str, z: str, row: str, col: str) -> str:
        """Per-lane .b64 base: byte address for whole-byte types, bit address for sub-byte."""
        b = self.b
        idx = b.reg("b64")
        b.emit("mul.wide.u32", idx, row, mem.row_stride)
        if mem.batch_stride:
            t = b.reg("b64")
            b.emit("mul.wide.u32", t, z, mem.batch_stride)
            b.emit("add.s64", idx, idx, t)
        c = b.reg("b64")
        if mem.col_stride == 1:
            b.emit("cvt.u64.u32", c, col)
        else:
            b.emit("mul.wide.u32", c, col, mem.col_stride)
        b.emit("add.s64", idx, idx, c)
        if mem.base:
            b.emit("add.s64", idx, idx, mem.base)
        if mem.bits < 8:
            bits_ptr = b.reg("b64")
            b.emit("shl.b64", bits_ptr, ptr, 3)
            b.emit("mad.lo.s64", idx, idx, mem.bits, bits_ptr)
        else:
            b.emit("mad.lo.s64", idx, idx, mem.bits // 8, ptr)
        return idx

    def fill_fragments(self, regs, op: _Operand, where, lay: fragments.FragmentLayout, bank: str, convert_to: str | None = None, lo_regs=None) -> None:
        """Load every value of every fragment in `regs[i][j]` (i, j instruction indices); with
        `lo_regs` (3xTF32), also the tf32 remainder of each f32 value into the same place there."""
        b = self.b
        per = lay.elems_per_reg
        for i, row in enumerate(regs):
            for j, frag in enumerate(row):
                for r, reg in enumerate(frag):
                    if per > 1:
                        b.emit("mov.b32", reg, 0)
                    for s in range(per):
                        v = r * per + s
                        pred, offset = where(i, j, v)
                        if lo_regs is not None:
                            self.load_split_tf32(op, offset, pred, reg, lo_regs[i][j][r])
                        elif per == 1:
                            self.load_converted(op, offset, pred, reg, bank, convert_to)
                        else:
                            t = b.reg("b32")
                            self.load_converted(op, offset, pred, t, "b32", convert_to)
                            b.emit("bfi.b32", reg, t, reg, s * lay.elem_bits, lay.elem_bits)

    def load_split_tf32(self, op: _Operand, offset: int, pred: str | None, hi: str, lo: str) -> None:
        """x (f32) -> hi = tf32(x), lo = tf32(x - hi): the 3xTF32 split."""
        b = self.b
        x, hi_f, rest = b.reg("f32"), b.reg("f32"), b.reg("f32")
        self.load_element(op, offset, pred, x, "f32")
        b.emit("cvt.rna.tf32.f32", hi, x)
        b.emit("mov.b32", hi_f, hi)
        b.emit("sub.f32", rest, x, hi_f)
        b.emit("cvt.rna.tf32.f32", lo, rest)

    def load_converted(self, op: _Operand, offset: int, pred: str | None, dst: str, bank: str, convert_to: str | None) -> None:
        """Load one element and convert it from its storage type to the instruction's type, by
        the operand's tile.cast and its rule in `tile.CAST_RULES`."""
        stored = PTX_TYPE[op.mem.stored]
        if convert_to in (None, stored):
            self.load_element(op, offset, pred, dst, bank)
            if op.lay.elem_bits == 8 and stored in _CONTAINER_SHIFT:  # .kind::*f8f6f4 byte
                self.b.emit("shl.b32", dst, dst, _CONTAINER_SHIFT[stored])
            return
        casts = op.mem.casts
        rule = tile.CAST_RULES.get(casts[0][:2]) if len(casts) == 1 else None
        if rule is None or PTX_TYPE[casts[0][1]] != convert_to:
            raise LoweringError(
                self.g.mma,
                f"no element conversion from {op.mem.stored} in memory to the instruction's "
                f".{convert_to} (tile.CAST_RULES)",
            )
        if rule.how == "extend":
            self.load_element(op, offset, pred, dst, bank)  # bfe already sign/zero-extends
            return
        t = self.b.reg(stored)
        self.load_element(op, offset, pred, t, stored)
        self.b.emit(f"cvt.{casts[0][2] or rule.default}.{convert_to}.{stored}", dst, t)

    def store_value(self, op: _Operand, frag: list[str], v: int, pred: str | None, offset: int, bank: str) -> None:
        b, lay = self.b, self.lay_c
        per = lay.elems_per_reg
        reg, slot = frag[v // per], v % per
        bits = op.mem.bits
        addr = f"[{op.ptr}+{offset * bits // 8}]"
        if per == 1:
            suffix = {"f32": "f32", "f64": "f64"}.get(bank, "b32")
            b.emit(f"st.global.{suffix}", addr, reg, guard=pred)
            return
        t = b.reg("b32")
        b.emit("bfe.u32", t, reg, slot * lay.elem_bits, lay.elem_bits)
        b.emit(f"st.global.{_MEM[bits]}", addr, t, guard=pred)

    @staticmethod
    def splat_literal(value: float | int, ctype: str) -> str:
        if ctype == "f32":
            return f32_literal(float(value))
        if ctype == "f64":
            return f64_literal(float(value))
        if ctype == "f16":
            h = int(np.array(value, dtype=np.float16).view(np.uint16))
            return str(h | (h << 16))
        return str(int(value))


class TileToPtx(ModulePass):
    """Replace every kernel (`func.func` holding a selected, tiled tile.mma) by a ptx.module."""

    name = "tile-to-ptx"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in list(op.body.ops):
            if not isinstance(kernel, func.FuncOp):
                continue
            g = read_kernel(kernel)
            if g.mma.variant is None or g.mma.tiling is None:
                raise LoweringError(g.mma, "run tile-select-mma and tile-tile-warps before tile-to-ptx")
            target = kernel.attributes.get("tile.target")
            version = kernel.attributes.get("tile.ptx")
            instr = parse_opcode(g.mma.variant.data)
            tiling = {k: tuple(v.get_values()) for k, v in g.mma.tiling.data.items()}
            module = _KernelLowering(g, instr, tiling).lower(target.data, version.data)
            op.body.block.insert_op_before(module, kernel)
            kernel.detach()
            kernel.erase()
