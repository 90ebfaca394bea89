"""A cubin's machine code, read without a GPU: `cuobjdump -sass` (which runs nvdisasm; both come
from the package index: pip install ".[bound]"), split into kernels, loops, and one
instruction mix per trip of a kernel's hot loop.

A loop is a backward branch (a BRA to an earlier address) whose target dominates it. The hot loop
is the loop whose own body (nested loops left out) holds the most tensor-core work, or FP32 work
where none has any, and of those the shortest; where no loop holds any, the loop with the most
instructions of its own. One trip counts every instruction between its first address and its
branch, nested loops once; a kernel without a loop counts the path one block takes.

Hopper's warpgroup MMA (PTX wgmma.mma_async, sm_90a only) is HGMMA in the SASS:
`HGMMA.64x128x16.F32.BF16 R24, R88, gdesc[UR8], R24` (A from registers, B from shared memory
through a matrix descriptor) or `HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24` (A and B both
through descriptors). The four warps of a warpgroup each issue it; each computes its own 16 of
the 64 rows on its SM sub-partition's tensor core, so one warp's share is 2·64·N·K / 4 flops.
The descriptor operands are read from shared memory by the tensor cores, not through the
registers; the bound counts their bytes (B: N·K elements; A: 64·K when it is a descriptor too)
ONCE per warpgroup instruction, a quarter to each warp. NVIDIA does not document how Hopper
delivers a wgmma's shared operands; this is the reading FlashAttention-3's published speed
requires (model.py works it out). WARPGROUP.ARRIVE (wgmma.fence), WARPGROUP.DEPBAR
(wgmma.wait_group) and the uniform-datapath moves that build descriptors take an issue slot
only."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from andrea_cli.errors import AndreaError

INSTALL_HINT = 'pip install ".[bound]" in the checkout (brings NVRTC, cuobjdump and nvdisasm)'

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# the opcode with its modifiers, lower case included: HGMMA.64x128x16.F32.BF16
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")
_BRANCH_TARGET = re.compile(r"(0x[0-9a-f]+)\s*$")  # BRA 0x930, @P1 BRA !P0, 0x4dc0


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str  # with its modifiers: LDS.U.128, HMMA.16816.F32.BF16, HGMMA.64x128x16.F32.BF16
    operands: str
    predicate: str = ""  # the guard, "@P0" or "@!P1"; "" when every lane runs it
    wavefronts: int | None = None  # a shared access's, from its lane addresses (lanes.py); None: not derived


# ------------------------------------------------------------------------------------------------
# The tools, and the disassembly

def _pip_tool(name: str) -> str | None:
    """On PATH, or inside the pip packages nvidia-cuda-cuobjdump / -nvdisasm (nvidia/cu*/bin/)."""
    if found := shutil.which(name):
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else None) or []:
        for candidate in sorted(Path(root).glob(f"*/bin/{name}")):
            return str(candidate)
    return None


def find_cuobjdump() -> str | None:
    return _pip_tool("cuobjdump")


def find_nvdisasm() -> str | None:
    return _pip_tool("nvdisasm")


def restore_cubin_length(binary: bytes) -> bytes:
    """cupy's getCUBIN reads the image like a C string and drops its last byte (a zero of the
    table that ends the file), and cuobjdump then finds no code: pad to the length the ELF header
    states (the end of the section or program header table, whichever is last)."""
    if binary[:4] != b"\x7fELF" or len(binary) < 0x40:
        return binary
    phoff, shoff = struct.unpack_from("<QQ", binary, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", binary, 0x36)
    end = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
    return binary + b"\0" * max(0, end - len(binary))


def disassemble(cubin: bytes) -> str:
    """cuobjdump -sass of a cubin; AndreaError naming the package when a tool is missing."""
    cuobjdump, nvdisasm = find_cuobjdump(), find_nvdisasm()
    if cuobjdump is None or nvdisasm is None:
        raise AndreaError(f"{'cuobjdump' if cuobjdump is None else 'nvdisasm'} not found: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernels.cubin"
        path.write_bytes(restore_cubin_length(cubin))
        # cuobjdump runs nvdisasm by name: put the one found first on its PATH
        env = {**os.environ, "PATH": f"{Path(nvdisasm).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        run = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True, env=env)
    if run.returncode != 0 or "Function" not in run.stdout:
        why = (run.stderr.strip() or run.stdout.strip() or "no kernels in its output").splitlines()[0]
        raise AndreaError(f"cuobjdump could not read the cubin ({why}): {INSTALL_HINT}")
    return run.stdout


def parse_kernels(text: str) -> dict[str, list[Instruction]]:
    """cuobjdump -sass output -> {kernel: its instructions in address order}."""
    kernels: dict[str, list[Instruction]] = {}
    current = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            current = kernels.setdefault(m.group(1), [])
        elif current is not None and (m := _INSTR.search(line)):
            # `@!PT` never runs (false is never true): padding ptxas writes, e.g. `@!PT LDS RZ, [RZ]`;
            # it takes an issue slot and nothing else
            opcode = "NOP" if (m.group(2) or "").strip() == "@!PT" else m.group(3)
            current.append(Instruction(int(m.group(1), 16), opcode, m.group(4).strip(), (m.group(2) or "").strip()))
    return kernels


# ------------------------------------------------------------------------------------------------
# Instruction classes: what pipe each instruction occupies, and the bytes it moves per warp

_WIDTH_BYTES = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}
_HMMA_SHAPE = re.compile(r"^(16|8)(8)(\d+)$")  # 16816 -> m16 n8 k16, 1688 -> m16 n8 k8, 884 -> m8 n8 k4
_HGMMA_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")  # 64x128x16 -> m64 n128 k16 (the warpgroup's)
# bytes of one A/B element by the HGMMA's input type (the last modifier: .F32.BF16, .F16.E4M3)
_HGMMA_INPUT_BYTES = {"BF16": 2, "F16": 2, "TF32": 4, "E4M3": 1, "E5M2": 1, "S8": 1, "U8": 1, "B1": 1}
WARPS_PER_WARPGROUP = 4
# The FMA pipe also runs the integer multiplies, IMAD and IMUL; the ALU the rest of the integer,
# logic, compare and select work (Nsight Compute's Kernel Profiling Guide, "Pipelines": FMA, ALU,
# XU; the XU runs special functions and conversions).
FP32_OPS = {"FFMA", "FMUL", "FADD", "HFMA2", "HMUL2", "HADD2", "FFMA32I", "FMUL32I", "FADD32I", "IMAD", "IMUL",
            "IMAD32I", "IMUL32I"}
ALU_OPS = {"IADD3", "IADD", "LOP3", "LOP", "SHF", "SHL", "SHR", "ISETP", "FSETP", "HSETP2",
           "LEA", "SEL", "FSEL", "FMNMX", "IMNMX", "VIMNMX", "VIADD", "VIADDMNMX", "IABS", "PRMT", "POPC",
           "FLO", "BREV", "PLOP3", "P2R", "R2P", "I2FP", "IDP", "FCHK"}
# Conversions: 16 results per clock per SM, the programming guide's "all other type conversions"
# [PG-TPUT, gpus.py], on the XU with the special functions [NCU-PIPE]; F2FP (two floats packed
# into a bf16x2, cvt.rn.bf16x2.f32) one 32-bit result a lane. (I2FP, sm_86 and later's integer to
# float, stays on the integer pipe: ptxas chose it over I2F there.)
CONVERT_OPS = {"F2F", "F2I", "I2F", "FRND", "F2FP"}
SHARED_ACCESSES = {"LDS", "STS", "LDSM", "LDGSTS", "ATOMS"}
_GLOBAL_MEMORY = {"LDG", "LDGSTS", "STG", "LD", "ST", "RED", "ATOMG", "ATOM"}


def lane_bytes(opcode: str) -> int:
    """Bytes one lane moves: LDS.128 16, LDG.E.64 8, LDS.U16 2, a plain LDS 4."""
    parts = opcode.split(".")[1:]
    return next((_WIDTH_BYTES[p] for p in parts if p in _WIDTH_BYTES), 4)


def ldsm_bytes(opcode: str) -> int:
    """ldmatrix: one 8x8 matrix of 16-bit values (128 bytes) per warp, times .2 or .4."""
    count = opcode.split(".")[-1]
    return 128 * (int(count) if count in ("2", "4") else 1)


def hmma_flops(opcode: str) -> int:
    """One warp's HMMA.MNK: 2·M·N·K flops (HMMA.16816: 4096)."""
    shape = opcode.split(".")[1] if "." in opcode else ""
    m = _HMMA_SHAPE.match(shape)
    if not m:  # a shape this reader does not know: count it as the m16n8k16 every bf16 kernel here uses
        return 2 * 16 * 8 * 16
    return 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3))


def hgmma_shape(opcode: str) -> tuple[int, int, int]:
    """HGMMA.64x128x16.F32.BF16 -> (64, 128, 16): the warpgroup's M, N, K. A shape this reader
    does not find counts as the m64n64k16 the kernel file's smallest wgmma is."""
    m = next((m for part in opcode.split(".")[1:] if (m := _HGMMA_SHAPE.match(part))), None)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (64, 64, 16)


def hgmma_flops(opcode: str) -> int:
    """One warp's share of a warpgroup's HGMMA.MxNxK: 2·M·N·K / 4 (64x128x16: 65,536)."""
    m, n, k = hgmma_shape(opcode)
    return 2 * m * n * k // WARPS_PER_WARPGROUP


def hgmma_shared_bytes(opcode: str, operands: str) -> int:
    """One warp's share of the shared-memory bytes an HGMMA's descriptors describe: B (K x N) and,
    when the operand after the destination is a descriptor too, A (M x K), delivered once per
    warpgroup instruction (the module's docstring says why), a quarter to each of its warps."""
    m, n, k = hgmma_shape(opcode)
    element = _HGMMA_INPUT_BYTES.get(opcode.split(".")[-1], 2)
    sources = [o.strip() for o in operands.split(",")]
    a_from_shared = len(sources) > 1 and sources[1].startswith("gdesc")
    return (n * k + (m * k if a_from_shared else 0)) * element // WARPS_PER_WARPGROUP


@dataclass
class Mix:
    """One trip's instructions by class, per warp; bytes are what the 32 lanes move together."""

    instructions: int = 0
    hmma: int = 0  # mma.sync
    hgmma: int = 0  # wgmma (Hopper): one warp's issue of a warpgroup instruction
    tensor_flops: int = 0  # per warp: an HGMMA's quarter of the warpgroup's
    mma_sync_flops: int = 0  # the HMMAs' share of them (a slower rate on Hopper: gpus.py)
    ffma: int = 0  # FFMA alone: 2 flops per lane, the FP32 kernels' useful arithmetic
    fp32: int = 0  # everything on the FMA pipe (FFMA, FMUL, FADD, HFMA2..., and IMAD)
    imad: int = 0  # the integer multiply-adds among them: half the FP32 rate on Hopper
    alu: int = 0
    mufu: int = 0  # special functions and conversions: one unit does both
    convert: int = 0  # the conversions among them (F2FP, F2I...)
    shfl: int = 0
    bar: int = 0
    shared_load_bytes: int = 0  # LDS and LDSM
    shared_store_bytes: int = 0  # STS
    wgmma_shared_bytes: int = 0  # HGMMA descriptor operands, the warp's quarter of each warpgroup read
    global_load_bytes: int = 0  # LDG, and LDGSTS (cp.async: global straight into shared memory)
    global_store_bytes: int = 0  # STG, and atomics
    local_bytes: int = 0  # LDL/STL: spilled registers
    # bank conflicts: the wavefronts the shared accesses whose lane addresses were derived
    # (lanes.py) take beyond their bytes / 128; the others are assumed conflict-free
    shared_conflict_wavefronts: float = 0.0
    shared_derived: int = 0  # shared accesses with derived addresses
    shared_assumed: int = 0  # shared accesses assumed conflict-free (no addresses derived)
    by_opcode: dict[str, int] = field(default_factory=dict)

    def add(self, ins: Instruction) -> None:
        op = ins.opcode
        base = op.split(".")[0]
        self.instructions += 1
        if base in SHARED_ACCESSES:
            self._banks(ins)
        self.by_opcode[base] = self.by_opcode.get(base, 0) + 1
        warp = 32 * lane_bytes(op)
        if base == "HMMA":
            self.hmma += 1
            self.tensor_flops += hmma_flops(op)
            self.mma_sync_flops += hmma_flops(op)
        elif base == "HGMMA":
            self.hgmma += 1
            self.tensor_flops += hgmma_flops(op)
            self.wgmma_shared_bytes += hgmma_shared_bytes(op, ins.operands)
        elif base in FP32_OPS:
            self.fp32 += 1
            self.ffma += base == "FFMA"
            self.imad += base.startswith(("IMAD", "IMUL"))
        elif base in ALU_OPS:
            self.alu += 1
        elif base == "MUFU" or base in CONVERT_OPS:
            self.mufu += 1
            self.convert += base in CONVERT_OPS
        elif base == "SHFL":
            self.shfl += 1
        elif base == "BAR":
            self.bar += 1
        elif base == "LDSM":
            self.shared_load_bytes += ldsm_bytes(op)
        elif base == "LDS":
            self.shared_load_bytes += warp
        elif base in ("STS", "ATOMS"):
            self.shared_store_bytes += warp
        elif base == "LDGSTS":
            # one pass through the SM's memory: global (via L2) straight into shared memory
            self.global_load_bytes += warp
        elif base in ("LDG", "LD"):
            self.global_load_bytes += warp
        elif base in ("STG", "ST", "RED", "ATOMG", "ATOM"):
            self.global_store_bytes += warp
        elif base in ("LDL", "STL"):
            self.local_bytes += warp

    def _banks(self, ins: Instruction) -> None:
        if ins.wavefronts is None:
            self.shared_assumed += 1
            return
        self.shared_derived += 1
        lanes_bytes = ldsm_bytes(ins.opcode) if ins.opcode.startswith("LDSM") else 32 * lane_bytes(ins.opcode)
        self.shared_conflict_wavefronts += max(0.0, ins.wavefronts - lanes_bytes / 128)

    @property
    def global_bytes(self) -> int:
        return self.global_load_bytes + self.global_store_bytes

    @property
    def shared_bytes(self) -> int:
        return self.shared_load_bytes + self.shared_store_bytes + self.wgmma_shared_bytes

    @property
    def tensor_instructions(self) -> int:
        return self.hmma + self.hgmma


def mix_of(instructions: list[Instruction]) -> Mix:
    mix = Mix()
    for ins in instructions:
        mix.add(ins)
    return mix


# ------------------------------------------------------------------------------------------------
# Loops

@dataclass
class Loop:
    start: int  # the first instruction of the body (the branch's target)
    end: int  # the backward branch
    body: list[Instruction]  # every instruction from start to end
    own: list[Instruction]  # the body less the loops nested in it

    def contains(self, other: "Loop") -> bool:
        return other is not self and self.start <= other.start and other.end <= self.end


def _branch_target(ins: Instruction) -> int | None:
    if not ins.opcode.startswith("BRA"):
        return None
    target = _BRANCH_TARGET.search(ins.operands)
    return int(target.group(1), 16) if target else None


def steady_state(loop: Loop, loops: list[Loop] | None = None) -> list[Instruction]:
    """One ordinary trip of the loop: its body less the conditional code no ordinary trip runs.

    A forward branch inside the body skips a region (an if, the else of an if/else). Dropped:
    regions with no arithmetic and no global memory (first-trip set-up, mask-edge fix-ups, slow
    paths), and a nested loop's peeled remainder: straight-line copies of the loop's own
    memory instructions just before it, for trip counts not a multiple of its unrolling (the
    reference shape's are). Kept: tensor-core, FFMA and global-memory work, i.e. the tile, and a
    region that waits for wgmma groups (WARPGROUP.DEPBAR): the pipeline's own, never a fix-up
    (kernel6 waits for its P·V and packs the next P behind a branch of its own)."""
    loops = find_loops(loop.body) if loops is None else loops
    nested = [lp for lp in loops if loop.contains(lp)]
    regions = []
    for ins in loop.body:
        target = _branch_target(ins)
        if target is not None and ins.address < target <= loop.end:
            regions.append((ins.address, target))

    def inside(region: tuple[int, int]) -> list[Instruction]:
        return [i for i in loop.body if region[0] < i.address < region[1]]

    def peeled(region: tuple[int, int], code: list[Instruction]) -> bool:
        memory = {i.opcode for i in code if i.opcode.split(".")[0] in _GLOBAL_MEMORY}
        after = [lp for lp in nested if region[1] <= lp.start <= region[1] + 16 * 16]
        return bool(memory) and not any(region[0] < lp.start < region[1] for lp in nested) and any(
            memory <= {i.opcode for i in lp.body} for lp in after)

    def dropped(region: tuple[int, int]) -> bool:
        code = inside(region)
        mix = mix_of(code)
        if mix.tensor_instructions or mix.ffma or any(i.opcode.startswith("WARPGROUP.DEPBAR") for i in code):
            return False
        return not mix.global_bytes or peeled(region, code)

    gone = [r for r in regions if dropped(r)]
    return [i for i in loop.body if not any(lo < i.address < hi for lo, hi in gone)]


@dataclass
class FlowGraph:
    """The kernel's basic blocks, each named by its first address, and their dominator tree."""
    block_of: dict[int, int]  # instruction address -> the first address of its block
    idom: dict[int, int]  # block -> its immediate dominator (the entry: itself); reachable blocks only

    def dominates(self, a: int, b: int) -> bool:
        """Every path from the entry to the instruction at b passes the one at a's block."""
        block, top = self.block_of.get(b), self.block_of.get(a)
        if block not in self.idom or top not in self.idom:
            return False
        while block != top:
            if self.idom[block] == block:
                return False
            block = self.idom[block]
        return True


def flow_graph(instructions: list[Instruction]) -> FlowGraph:
    """Blocks end at a branch, EXIT or RET, or before a branch target; a guarded one also falls
    through. Dominators by Cooper, Harvey and Kennedy's iterative algorithm, in reverse post-order."""
    addresses = [i.address for i in instructions]
    if not addresses:
        return FlowGraph({}, {})
    starts, present = {addresses[0]}, set(addresses)  # a branch out of the code given leads nowhere
    for n, ins in enumerate(instructions):
        target = _branch_target(ins)
        if target in present:
            starts.add(target)
        if (target is not None or ins.opcode.startswith(("EXIT", "RET"))) and n + 1 < len(addresses):
            starts.add(addresses[n + 1])
    block_of, successors, first = {}, {}, addresses[0]
    for n, ins in enumerate(instructions):
        first = ins.address if ins.address in starts else first
        block_of[ins.address] = first
        if n + 1 == len(addresses) or addresses[n + 1] in starts:  # the block's last instruction
            target = _branch_target(ins)
            ends = ins.opcode.startswith(("BRA", "EXIT", "RET")) and ins.predicate in ("", "@PT")
            successors[first] = ([target] if target in present else []) + (
                [addresses[n + 1]] if n + 1 < len(addresses) and not ends else [])
    entry = addresses[0]
    post, seen, stack = [], {entry}, [(entry, iter(successors[entry]))]
    while stack:  # depth first without recursion: a kernel holds thousands of blocks
        block, rest = stack[-1]
        step = next((b for b in rest if b not in seen), None)
        if step is None:
            post.append(block)
            stack.pop()
        else:
            seen.add(step)
            stack.append((step, iter(successors.get(step, []))))
    rank = {b: n for n, b in enumerate(reversed(post))}
    predecessors: dict[int, list[int]] = {b: [] for b in rank}
    for b in rank:
        for succ in successors.get(b, []):
            if succ in rank:
                predecessors[succ].append(b)
    idom = {entry: entry}

    def meet(a: int, b: int) -> int:
        while a != b:
            while rank[a] > rank[b]:
                a = idom[a]
            while rank[b] > rank[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in sorted(rank, key=rank.get)[1:]:
            done = [p for p in predecessors[b] if p in idom]
            new = done[0]
            for p in done[1:]:
                new = meet(p, new)
            if idom.get(b) != new:
                idom[b], changed = new, True
    return FlowGraph(block_of, idom)


def find_loops(instructions: list[Instruction]) -> list[Loop]:
    """Backward branches whose target dominates them (a natural loop's back edge), each as the
    address range from the target to the branch. A backward branch whose target does not dominate
    it is no loop of its own: ptxas puts a wait's retry (an mbarrier's try_wait) out of line after
    the kernel's end and branches back into the loop that waits, which the range from the target
    to that branch would take for a loop over half the kernel."""
    graph = flow_graph(instructions)
    loops = []
    for ins in instructions:
        start = _branch_target(ins)
        # a backward branch; `BRA` to itself is the idle loop after EXIT, not a loop body
        if start is not None and start < ins.address and graph.dominates(start, ins.address):
            body = [i for i in instructions if start <= i.address <= ins.address]
            loops.append(Loop(start, ins.address, body, []))
    for loop in loops:
        nested = [lp for lp in loops if loop.contains(lp)]
        loop.own = [i for i in loop.body if not any(lp.start <= i.address <= lp.end for lp in nested)]
    return loops


def straight_line(instructions: list[Instruction]) -> list[Instruction]:
    """A kernel without a loop, as one block runs it: from the entry, falling through every guarded
    branch (BRA.DIV too: its warp converged) and following the unconditional ones, to an EXIT.
    The code laid out of line after the kernel's end (the divergent warps' shuffles, a division's
    slow path reached by CALL) and the other side of each if stay off it: counting every
    instruction once, as for a loop's trip, would charge a block both sides of every if."""
    index = {ins.address: n for n, ins in enumerate(instructions)}
    path, seen, n = [], set(), 0
    while n is not None and n < len(instructions) and n not in seen:
        seen.add(n)
        ins = instructions[n]
        path.append(ins)
        always = ins.predicate in ("", "@PT")
        if always and ins.opcode.startswith(("EXIT", "RET")):
            break
        target = _branch_target(ins)
        n = index.get(target) if always and ins.opcode == "BRA" and target is not None else n + 1
    return path


def hot_loop(instructions: list[Instruction]) -> Loop | None:
    """The loop with the most arithmetic of its own: tensor-core flops first, and FP32 FFMA only
    between loops with none; of loops with as much, the one with the fewest instructions; with no
    arithmetic anywhere, the most instructions of its own; None for straight-line code.

    Tensor work ranks alone because a kernel's copies of one tile loop differ by FFMA that is not
    the tile's: the tiles a mask edge crosses run in loops of their own, and a mask flavour (ALiBi's
    bias, an FFMA a score) in a second instantiation; every copy does the same products, and the
    steady state of the plain case is the copy without the extra code: the shortest."""
    loops = find_loops(instructions)
    if not loops:
        return None

    def rank(lp: Loop) -> tuple:
        mix = mix_of(lp.own)
        arithmetic = mix.tensor_flops or 64 * mix.ffma
        return mix.tensor_flops, arithmetic, -len(lp.own) if arithmetic else len(lp.own), -lp.start

    return max(loops, key=rank)
