"""Each lane's shared-memory address, read from the SASS without running it, so banks.py can count
a shared access's wavefronts; where the address cannot be derived the access is assumed
conflict-free (its wavefronts left None, and the model charges bytes / 128).

The reader walks a kernel's instructions once in address order (branches not followed: each
register holds what the last instruction before it in the listing wrote) and evaluates the integer
arithmetic of 4 warps' 128 lanes at once, the block 1-D (threadIdx.x = 32·warp + lane). A value is
  exact:    known in every lane (threadIdx.x, immediates, anything computed only from them);
  offset:   one unknown number the same in every lane, plus a known value per lane (a kernel
            argument, blockIdx, the shared window's base, plus a per-lane part): bank conflicts
            depend only on the per-lane part, since a common offset (a multiple of the access
            size) shifts every lane's bank alike;
  unknown:  anything else (a loaded value, threadIdx.y, arithmetic the reader does not follow).
Additions, integer multiply-adds, shifts left and LEA keep an offset; other logic only exact
values. A predicated write whose predicate the reader cannot know keeps the old value only if it
equals the new one. A loop's addresses are its first trip's (a loop counter starts at its
initial value): a per-trip change common to all lanes (the next stage's buffer) does not alter
conflicts; a lane-dependent one (a swizzle that changes per trip) would be missed."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from andrea_cli.bench.bound.banks import ideal_wavefronts, wavefronts
from andrea_cli.bench.bound.sass import SHARED_ACCESSES, Instruction, hgmma_shape, lane_bytes, ldsm_bytes

WARPS = 4  # warps of a block evaluated; an access's wavefronts are the most any of them takes
LANES = 32 * WARPS
MASK = 0xFFFFFFFF
_REG = re.compile(r"^(-|~|\|)?(U?R\d+|U?RZ|SR\w+)(\.\w+)*\|?$")
_IMM = re.compile(r"^-?0x[0-9a-f]+$|^-?\d+$")


@dataclass(frozen=True)
class Value:
    lanes: np.ndarray  # int64, LANES values in [0, 2^32)
    exact: bool  # False: the true value is lanes + one unknown offset common to every lane

    @property
    def uniform(self) -> bool:
        return bool((self.lanes == self.lanes[0]).all())


def _exact(x) -> Value:
    return Value(np.broadcast_to(np.asarray(x, dtype=np.int64) & MASK, (LANES,)).copy(), True)


UNIFORM = Value(np.zeros(LANES, dtype=np.int64), False)  # one unknown, the same in every lane
_TID = _exact(np.arange(LANES))
_LANE = _exact(np.arange(LANES) % 32)


def _join(values: list[Value | None], compute, linear: bool) -> Value | None:
    """An operation's result: computed when every source is exact; for a `linear` one (its result
    an offset plus a known part when the sources are), the known parts combined; every source
    lane-uniform: an unknown uniform; otherwise unknown."""
    if any(v is None for v in values):
        return None
    if all(v.exact for v in values):
        return _exact(compute(*(v.lanes for v in values)))
    if linear:
        return Value(compute(*(v.lanes for v in values)) & MASK, False)
    if all(v.uniform for v in values):
        return UNIFORM
    return None


def _lut(a, b, c, lut: int):
    r = np.zeros_like(a)
    for i in range(8):
        if lut >> i & 1:
            r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return r & MASK


def _funnel(lo, sh, hi, left: bool, high: bool, signed: bool):
    """SHF: the 64-bit {hi:lo} shifted, its low or high half."""
    both = (hi.astype(object) << 32) | lo.astype(object)
    if signed:
        both = np.array([v - (1 << 64) if v >> 63 else v for v in both], dtype=object)
    shifted = both << (sh & 63) if left else both >> (sh & 63)
    half = shifted >> 32 if high else shifted
    return np.array([int(v) & MASK for v in half], dtype=np.int64)


class Registers:
    """The register file of the 128 lanes, as the walk has left it."""

    def __init__(self) -> None:
        self.regs: dict[str, Value | None] = {}

    def read(self, operand: str) -> Value | None:
        op = operand.strip()
        if op.startswith("c["):
            return UNIFORM  # a kernel argument, blockDim, a driver constant
        if _IMM.match(op):
            return _exact(int(op, 16) if "0x" in op else int(op))
        if op.startswith("SR"):
            special = {"SR_TID.X": _TID, "SR_LANEID": _LANE}
            return special.get(op, UNIFORM if op.startswith(("SR_CTAID", "SR_CgaCtaId")) else None)
        m = _REG.match(op)
        if m is None or any(x in op for x in (".X4", ".X8", ".X16", ".H1")):
            return None
        sign, name = m.group(1), m.group(2)
        v = _exact(0) if name in ("RZ", "URZ", "SRZ") else self.regs.get(name)
        if v is None or sign is None:
            return v
        if sign == "-":
            return _join([v], lambda x: -x, linear=True)
        if sign == "~":
            return _join([v], lambda x: ~x, linear=False)
        return _join([v], np.abs, linear=False)

    def write(self, name: str, value: Value | None, predicated: bool) -> None:
        if name in ("RZ", "URZ"):
            return
        old = self.regs.get(name)
        if predicated and old is not None:
            same = value is not None and old.exact == value.exact and np.array_equal(old.lanes, value.lanes)
            if not same:
                value = UNIFORM if value is not None and old.uniform and value.uniform else None
        self.regs[name] = value

    def forget(self, first: str, count: int) -> None:
        """Registers a load or a multi-register result overwrites with values the reader cannot know."""
        m = re.match(r"^(U?R)(\d+)$", first)
        if m:
            for i in range(count):
                self.regs[f"{m.group(1)}{int(m.group(2)) + i}"] = None


def _sources(operands: list[str]) -> list[str]:
    """Value operands: predicates (P0, !PT, UP1) dropped."""
    return [o for o in operands if not re.match(r"^!?U?P(\d+|T)$", o.strip())]


def _shift_amount(v: Value | None) -> int | None:
    return int(v.lanes[0]) if v is not None and v.exact and v.uniform else None


def _evaluate(base: str, mods: list[str], src: list[Value | None]) -> Value | None:
    """One integer instruction's result, or None where the reader does not follow it."""
    if base in ("MOV", "UMOV", "R2UR") and src:
        return src[0]
    if base in ("LDC", "ULDC"):
        return UNIFORM
    if base in ("IMAD", "UIMAD") and len(src) == 3:  # .MOV, .SHL, .IADD are a·b + c too
        if "HI" in mods:
            hi = lambda a, b, c: ((a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(32)).astype(np.int64) + c
            return _join(src, hi, linear=False) if "U32" in mods else None
        if "X" in mods:
            return UNIFORM if all(v is not None and v.uniform for v in src) else None
        a, b = src[0], src[1]
        # a·b + c keeps an offset only when one factor is an exact lane-uniform number
        linear = a is not None and b is not None and (a.exact and a.uniform or b.exact and b.uniform)
        return _join(src, lambda a, b, c: a * b + c, linear=linear)
    if base in ("IADD3", "UIADD3") and "X" not in mods:
        return _join(src, lambda *xs: sum(xs), linear=True)
    if base in ("VIADD", "IADD", "UIADD") and "X" not in mods:
        return _join(src, lambda *xs: sum(xs), linear=True)
    if base in ("LEA", "ULEA") and "HI" not in mods and "X" not in mods and len(src) == 3:
        sh = _shift_amount(src[2])
        if sh is None:
            return None
        return _join(src[:2], lambda a, b: (a << sh) + b, linear=True)
    if base in ("LEA", "ULEA") and "HI" in mods and "X" not in mods and len(src) == 4:
        sh = _shift_amount(src[3])
        if sh is None:
            return None
        if "SX32" in mods:
            return _join(src[:2], lambda a, b: ((np.where(a >> 31, a - (1 << 32), a) >> (32 - sh)) + b), linear=False)
        return _join([src[0], src[1], src[2]], lambda a, b, c: ((a >> (32 - sh)) | (c << sh)) + b, linear=False)
    if base in ("SHF", "USHF") and len(src) == 3:
        sh = _shift_amount(src[1])
        if sh is None:
            return None
        left, high = "L" in mods, "HI" in mods
        if left and not high and src[2] is not None and src[2].exact and not src[2].lanes.any():
            return _join([src[0]], lambda a: a << sh, linear=True)
        return _join([src[0], src[2]], lambda lo, hi: _funnel(lo, sh, hi, left, high, "S32" in mods), linear=False)
    if base in ("SHL", "USHL") and len(src) == 2 and (sh := _shift_amount(src[1])) is not None:
        return _join([src[0]], lambda a: a << sh, linear=True)
    if base in ("SHR", "USHR") and len(src) == 2 and (sh := _shift_amount(src[1])) is not None:
        return _join([src[0]], lambda a: a >> sh, linear=False)
    if base in ("LOP3", "ULOP3") and len(src) == 4 and (lut := _shift_amount(src[3])) is not None:
        return _join(src[:3], lambda a, b, c: _lut(a, b, c, lut), linear=False)
    if base in ("LOP", "ULOP") and len(src) == 2:
        ops = {"AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor}
        op = next((ops[m] for m in mods if m in ops), None)
        return None if op is None else _join(src, op, linear=False)
    if all(v is not None and v.uniform for v in src) and src:
        return UNIFORM
    return None


def _address(registers: Registers, operands: str) -> Value | None:
    """[R9+0x1200], [R18+UR4+0x10], [UR4]: the sum of its terms, or None."""
    m = re.search(r"(?<![a-z])\[([^\]]*)\]", operands)
    if m is None:
        return None
    terms = [t.strip() for t in m.group(1).split("+") if t.strip()]
    values = [registers.read(t.removesuffix(".64").removesuffix(".U32")) for t in terms]
    return _join(values, lambda *xs: sum(xs), linear=True) if values else None


def access_bytes(ins: Instruction) -> tuple[int, int]:
    """(lanes taking part, bytes per lane) of a shared access: ldmatrix .x1/.x2/.x4 reads 8, 16 or
    32 lanes' 16-byte row addresses."""
    if ins.opcode.startswith("LDSM"):
        return ldsm_bytes(ins.opcode) // 128 * 8, 16
    return 32, lane_bytes(ins.opcode)


def _dest_width(ins: Instruction) -> int:
    """Registers an instruction's result fills: a 128-bit load 4, ldmatrix .x4 4, an HGMMA N/2."""
    base = ins.opcode.split(".")[0]
    if base == "LDSM":
        return ldsm_bytes(ins.opcode) // 128
    if base == "HGMMA":
        return hgmma_shape(ins.opcode)[1] // 2
    if base == "HMMA":
        return 4
    return max(1, lane_bytes(ins.opcode) // 4)


_LOADS = ("LDS", "LDSM", "LDG", "LD", "LDL", "HMMA", "HGMMA", "SHFL", "ATOM", "ATOMG", "ATOMS", "MUFU", "F2F",
          "F2I", "I2F", "POPC", "FLO")


def _next(register: str, i: int) -> str:
    """R8, 1 -> R9; UR4, 1 -> UR5."""
    prefix = "UR" if register.startswith("UR") else "R"
    return f"{prefix}{int(register[len(prefix):]) + i}"


def with_wavefronts(code: list[Instruction]) -> list[Instruction]:
    """The kernel's instructions, each shared access (LDS, STS, LDSM, LDGSTS's shared side) with its
    wavefronts where its lane addresses could be derived: the most any of 4 warps takes."""
    registers = Registers()
    out = []
    for ins in code:
        parts = ins.opcode.split(".")
        base, mods = parts[0], parts[1:]
        operands = [o.strip() for o in re.split(r",(?![^\[]*\])", ins.operands) if o.strip()]
        if base in SHARED_ACCESSES:
            address = _address(registers, ins.operands)
            if address is not None:
                lanes, width = access_bytes(ins)
                by_warp = [wavefronts([int(a) for a in address.lanes[32 * w:32 * w + lanes]], width)
                           for w in range(WARPS)]
                ins = replace(ins, wavefronts=max(max(by_warp), ideal_wavefronts(lanes, width)))
        out.append(ins)
        if not operands or not re.match(r"^U?R\d+$", operands[0].split(".")[0]):
            continue  # no register written (stores, branches, predicates only)
        dest = operands[0].split(".")[0]
        predicated = bool(ins.predicate)
        if base in _LOADS:
            registers.forget(dest, _dest_width(ins))
        elif base == "CS2R":
            registers.write(dest, _exact(0), predicated)
            registers.write(f"R{int(dest[1:]) + 1}", _exact(0), predicated)
        elif base in ("LDC", "ULDC"):  # constants: the same in every lane (LDC.64 fills two)
            for i in range(2 if "64" in mods else 1):
                registers.write(_next(dest, i), UNIFORM, predicated)
        elif base in ("S2R", "S2UR"):
            registers.write(dest, registers.read(operands[1]) if len(operands) > 1 else None, predicated)
        else:
            registers.write(dest, _evaluate(base, mods, [registers.read(o) for o in _sources(operands[1:])]),
                            predicated)
            if "WIDE" in mods or ".64" in ins.opcode or "U64" in mods and "HI" not in mods:
                registers.forget(_next(dest, 1), 1)
    return out
