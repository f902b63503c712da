"""The PTX mma instruction (dense, mma.sp, block-scaled): its operands checked once when it is
decoded; each time it runs, the registers of every executing warp are gathered, `mma_semantics`
computes all warps at once, and D is scattered back."""

from __future__ import annotations

import numpy as np
from tilemma.compiler.verify.emulator.machine import EmulationError, _Machine
from tilemma.compiler.verify.emulator.mma import mma_semantics
from tilemma.compiler.verify.emulator.mma_sparse import _MetadataError
from tilemma.compiler.verify.emulator.operands import Fn, _Decode, _Imm, _Reg
from tilemma.dialects import ptx


def _scale_word_operand(d: _Decode, op, text: str, where: str) -> tuple[str, int]:
    """scale-a-data / scale-b-data: a 32-bit register, bare or as a one-register vector `{%r}`."""
    inner = text[1:-1].strip() if text.startswith("{") and text.endswith("}") else text
    r = d.operand(inner, op) if "," not in inner else None
    if not isinstance(r, _Reg) or r.storage.itemsize != 4 or r.storage.kind == "b":
        raise EmulationError(f"{where}: the scale operand {text} must be a 32-bit register")
    return r.bank, r.index


def _selector_pair(d: _Decode, op, text: str, where: str) -> list:
    """{byte-id, thread-id}: each an integer constant or a 16-bit register (ISA: .u16 values)."""
    if not (text.startswith("{") and text.endswith("}")) or text.count(",") != 1:
        raise EmulationError(f"{where}: expected a selector pair {{byte-id, thread-id}}, got {text!r}")
    out = []
    for part in (x.strip() for x in text[1:-1].split(",")):
        x = d.operand(part, op)
        if isinstance(x, _Imm) and not isinstance(x.value, float) and not x.fbits and 0 <= int(x.value) < 1 << 16:
            out.append(int(x.value))
        elif isinstance(x, _Reg) and x.storage.itemsize == 2 and x.rtype != "f16":
            out.append((x.bank, x.index))
        else:
            raise EmulationError(f"{where}: selector {part!r} in {text} must be an unsigned 16-bit constant "
                                 "or a 16-bit integer register")
    return out


def _dec_mma(d: _Decode, op: ptx.MmaOp, where: str) -> Fn:
    try:
        sem = mma_semantics(op.opcode.data, d.arch)
    except (ValueError, EmulationError) as e:
        raise EmulationError(f"{where}: {e}") from None
    if d.target is not None:  # what ptxas would refuse, the emulator does not run either
        why = sem.variant.legal(d.target, d.version)
        if why:
            raise EmulationError(f"{where}: not available on {d.target} with PTX {d.version}: {'; '.join(why)}")
    groups = op.groups()
    extra = groups["extra"]
    want = []
    if sem.sparse is not None:
        want += ["the metadata register e", "the sparsity selector f"]
    if sem.scale is not None:
        want += ["scale-a-data", "{byte-id-a, thread-id-a}", "scale-b-data", "{byte-id-b, thread-id-b}"]
    if len(extra) != len(want):
        if not want:
            raise EmulationError(f"{where}: unexpected operands after c: {extra}")
        if sem.scale is None:
            raise EmulationError(f"{where}: mma.sp needs the metadata register and the sparsity selector "
                                 f"after c, got {extra}")
        raise EmulationError(f"{where}: expected {', '.join(want)} after c, got {extra}")
    selector, meta = None, None
    if sem.sparse is not None:
        e, f = (d.operand(x, op) for x in extra[:2])
        if not isinstance(e, _Reg) or e.storage.itemsize != 4 or e.storage.kind == "b":
            raise EmulationError(f"{where}: the metadata operand {extra[0]} must be a 32-bit register")
        if not isinstance(f, _Imm) or isinstance(f.value, float) or f.fbits:
            raise EmulationError(f"{where}: the sparsity selector {extra[1]} must be an integer constant")
        selector, meta = int(f.value), (e.bank, e.index)
        try:
            sem.sparse.check_selector(selector)
        except EmulationError as err:
            raise EmulationError(f"{where}: {err}") from None
    scales = {}  # operand -> ((bank, index) of the scale word, [byte-id, thread-id] constants or registers)
    if sem.scale is not None:
        rest = extra[-4:]
        for operand, word, ids in (("a", rest[0], rest[1]), ("b", rest[2], rest[3])):
            pair = _selector_pair(d, op, ids, where)
            if all(isinstance(x, int) for x in pair):
                try:
                    sem.scale.check(operand, pair)
                except EmulationError as err:
                    raise EmulationError(f"{where}: {err}") from None
            scales[operand] = (_scale_word_operand(d, op, word, where), pair)
    regs = {}
    for name, frag in (("d", sem.d), ("a", sem.a), ("b", sem.b), ("c", sem.c)):
        rs = [d.reg(r, op) for r in groups[name]]
        if len(rs) != frag.regs:
            raise EmulationError(f"{where}: {name} needs {frag.regs} registers, got {len(rs)}")
        for r in rs:
            if r.storage.itemsize * 8 != frag.lay.reg_bits or r.storage.kind == "b":
                raise EmulationError(f"{where}: {r.name} (.{r.rtype}) is not a {frag.lay.reg_bits}-bit register")
        regs[name] = [(r.bank, r.index) for r in rs]

    def gather(m: _Machine, name: str, warps) -> np.ndarray:
        words = np.stack([m.banks[bk][i] for bk, i in regs[name]])  # [regs, T]
        words = words.reshape(len(regs[name]), -1, 32)
        if warps is not None:
            words = words[:, warps]
        return words.transpose(1, 0, 2).reshape(words.shape[1], -1)

    def lane_words(m: _Machine, bank_index: tuple[str, int], warps) -> np.ndarray:
        w = m.banks[bank_index[0]][bank_index[1]].reshape(-1, 32)
        return w if warps is None else w[warps]

    def selector_values(m: _Machine, operand: str, warps) -> np.ndarray:
        """[W, 2] (byte-id, thread-id) per warp; a register must hold one value across its warp
        (the ISA gives one selector per instruction), and the value must be one Table 37 defines."""
        cols = []
        for x in scales[operand][1]:
            if isinstance(x, int):
                cols.append(np.full(m.T // 32 if warps is None else len(warps), x, np.int64))
                continue
            v = lane_words(m, x, warps).astype(np.int64)
            split = (v != v[:, :1]).any(1)
            if split.any():
                w = int(np.flatnonzero(split)[0])
                w = w if warps is None else int(warps[w])
                raise EmulationError(f"{where}: the warp of {m.thread(w * 32)}: selector register of "
                                     f"{operand.upper()} differs across lanes ({sorted(set(v[split][0].tolist()))})")
            cols.append(v[:, 0])
        ids = np.stack(cols, 1)
        for sel in np.unique(ids, axis=0):
            try:
                sem.scale.check(operand, sel)
            except EmulationError as err:
                w = int(np.flatnonzero((ids == sel).all(1))[0])
                w = w if warps is None else int(warps[w])
                raise EmulationError(f"{where}: the warp of {m.thread(w * 32)}: {err}") from None
        return ids

    def run(m: _Machine, mask):
        warps = None
        if mask is not None:
            lanes = mask.reshape(-1, 32)
            some, every = lanes.any(1), lanes.all(1)
            partial = some & ~every
            if partial.any():
                w = int(np.flatnonzero(partial)[0])
                raise EmulationError(
                    f"{where}: only {int(lanes[w].sum())} of 32 lanes of the warp of "
                    f"{m.thread(w * 32)} execute this mma (.sync.aligned needs the whole warp)")
            warps = np.flatnonzero(every)
        e_words = None if meta is None else lane_words(m, meta, warps)
        kw = {}
        if scales:
            kw = {"scale_a": lane_words(m, scales["a"][0], warps), "ids_a": selector_values(m, "a", warps),
                  "scale_b": lane_words(m, scales["b"][0], warps), "ids_b": selector_values(m, "b", warps)}
        try:
            out = sem(gather(m, "a", warps), gather(m, "b", warps), gather(m, "c", warps),
                      e_words, selector, **kw)  # [W, regs, 32]
        except _MetadataError as err:
            w = err.warp if warps is None else int(warps[err.warp])
            raise EmulationError(f"{where}: the warp of {m.thread(w * 32)}: {err}") from None
        for j, (bk, i) in enumerate(regs["d"]):
            row = m.banks[bk][i].reshape(-1, 32)
            if warps is None:
                row[...] = out[:, j, :]
            else:
                row[warps] = out[:, j, :]
        m.mma_count += 1

    return run
