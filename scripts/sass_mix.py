"""Each kernel's hot loops, instruction by instruction: the kernel file compiled by NVRTC for one
GPU architecture (no GPU needed), disassembled with `cuobjdump -sass` (pip install
".[bound]"), both as `andrea bench --bound` does it, and every loop's body counted: FFMA, shared loads by width, shuffles.

    python scripts/sass_mix.py                     # every kernel, sm_90a (H100/H200, as the bound reads them)
    python scripts/sass_mix.py --arch sm_80 scores_kernel2 attention_fused_kernel3_d64
    python scripts/sass_mix.py --tensor-cores attention_fused_kernel4_d64 attention_fused_kernel5_d64

A loop is a backward branch (BRA to an earlier label); the counts are per trip of its body,
nested loops' instructions included once. Shared loads per FFMA is the static figure the
kernel catalogue in docs/reference.md quotes: an instruction count, not a measured speed. --tensor-cores
counts a tensor-core loop instead: HMMA (mma.sync), LDSM (ldmatrix), LDGSTS (cp.async), MUFU.EX2,
HMMA per LDSM and the integer instructions' share of the loop (INTEGER below). Where a kernel's
loop holds HGMMA (Hopper's wgmma, sm_90a only: its B operand read from shared memory through a
descriptor, no LDSM) an HGMMA column joins the table and the ratio counts HMMA and HGMMA per
LDSM together (MMA/LDSM); a table without HGMMA is printed as before.

The default architecture is sm_90a, Hopper's arch-specific target, as `andrea bench --bound`
compiles for the H100/H200: the kernel file's wgmma code exists only there, and its other kernels
compile to the same SASS as for plain sm_90."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from andrea_cli.bench.bound.sass import find_cuobjdump, find_loops, parse_kernels  # noqa: F401  (tests ask for find_cuobjdump)

KERNEL_FILE = Path(__file__).resolve().parents[1] / "cuda" / "microgpt_cuda.cu"
COUNTED = ("FFMA", "FMUL", "FADD", "LDS", "LDS.64", "LDS.128", "STS", "LDG", "SHFL", "MUFU.EX2", "BAR",
           "HMMA", "HGMMA", "LDSM", "LDGSTS")
SHOWN = ("FFMA", "LDS", "LDS.64", "LDS.128", "SHFL", "MUFU.EX2", "STS", "LDG", "BAR")
TC_SHOWN = ("HMMA", "LDSM", "LDGSTS", "MUFU.EX2", "SHFL", "BAR")
# Integer and address arithmetic, moves through the integer pipe (IMAD.MOV) included, per thread
# (I...) or on the uniform datapath (U...): what a loop spends on other than its math and memory.
INTEGER = frozenset({"IADD3", "IADD", "VIADD", "IMAD", "IMUL", "IMNMX", "VIMNMX", "IABS", "ISETP", "ISCADD", "LEA",
                     "LOP3", "LOP", "SHF", "SHL", "SHR", "SEL", "PRMT", "FLO", "POPC", "BMSK", "SGXT", "BFE", "BFI",
                     "UIADD3", "UIMAD", "UIMNMX", "UISETP", "ULEA", "ULOP3", "USHF", "USEL", "UPRMT", "UFLO",
                     "UPOPC", "UBMSK", "USGXT"})


@dataclass
class Loop:
    start: int  # address of the first instruction of the body
    end: int  # address of the backward branch
    counts: dict[str, int] = field(default_factory=dict)
    instructions: int = 0
    integer: int = 0  # instructions whose opcode is in INTEGER

    @property
    def shared_loads(self) -> int:
        return sum(self.counts.get(op, 0) for op in ("LDS", "LDS.64", "LDS.128"))

    def loads_per_ffma(self) -> float | None:
        return self.shared_loads / self.counts["FFMA"] if self.counts.get("FFMA") else None

    def hmma_per_ldsm(self) -> float | None:
        return self.counts.get("HMMA", 0) / self.counts["LDSM"] if self.counts.get("LDSM") else None

    @property
    def tensor_instructions(self) -> int:
        """mma.sync (HMMA) and wgmma (HGMMA) instructions, per warp."""
        return self.counts.get("HMMA", 0) + self.counts.get("HGMMA", 0)

    def mma_per_ldsm(self) -> float | None:
        return self.tensor_instructions / self.counts["LDSM"] if self.counts.get("LDSM") else None

    def integer_share(self) -> float:
        return self.integer / self.instructions if self.instructions else 0.0

    def contains(self, other: "Loop") -> bool:
        return other is not self and self.start <= other.start and other.end <= self.end


def innermost(loops: list[Loop]) -> list[Loop]:
    """The loops with no loop inside them: where a kernel spends its trips."""
    return [lp for lp in loops if not any(lp.contains(other) for other in loops)]


def _opcode(op: str) -> str:
    """LDS.U.128 -> LDS.128, SHFL.BFLY.PT -> SHFL, MUFU.EX2 stays, FFMA.FTZ -> FFMA."""
    base = op.split(".")[0]
    if base == "LDS":
        width = next((p for p in op.split(".")[1:] if p in ("64", "128")), None)
        return f"LDS.{width}" if width else "LDS"
    if base == "MUFU":
        return op if op.startswith("MUFU.EX2") else "MUFU"
    return base


def parse_sass(text: str) -> dict[str, list[Loop]]:
    """cuobjdump -sass output -> {kernel: its loops, innermost (shortest) first}; the listing
    and its loops read as `andrea bench --bound` reads them (`@!PT` padding never runs)."""
    loops: dict[str, list[Loop]] = {}
    for name, code in parse_kernels(text).items():
        found = []
        for body in find_loops(code):
            loop = Loop(body.start, body.end)
            for ins in body.body:
                loop.instructions += 1
                loop.integer += ins.opcode.split(".")[0] in INTEGER
                key = _opcode(ins.opcode)
                if key in COUNTED:
                    loop.counts[key] = loop.counts.get(key, 0) + 1
            found.append(loop)
        loops[name] = sorted(found, key=lambda lp: lp.end - lp.start)
    return loops


def kernel_loops(path: Path = KERNEL_FILE, arch: str = "sm_90a") -> dict[str, list[Loop]]:
    """Compiled and disassembled as `andrea bench --bound` does (the cubin cached)."""
    from andrea_cli.bench.bound.report import disassembled
    from andrea_cli.errors import AndreaError

    try:
        return parse_sass(disassembled(path, arch))
    except AndreaError as exc:  # NVRTC, cuobjdump or nvdisasm missing, or the file does not compile
        raise SystemExit(str(exc)) from None


def tensor_core_hot_loop(loops: list[Loop]) -> Loop | None:
    """The loop a tensor-core kernel spends its key tiles in: of the loops with the most HMMA and
    HGMMA, the one with the fewest instructions (the one without mask code, where a kernel has
    separate loops for the tiles a mask edge crosses; kernel4's holds its copy loops, counted once)."""
    inner = [lp for lp in loops if lp.tensor_instructions]
    if not inner:
        return None
    most = max(lp.tensor_instructions for lp in inner)
    return min((lp for lp in inner if lp.tensor_instructions == most), key=lambda lp: lp.instructions)


def print_tensor_core_mix(loops: dict[str, list[Loop]], names: list[str]) -> None:
    hots = {name: tensor_core_hot_loop(loops[name]) for name in names}
    wgmma = any(hot is not None and hot.counts.get("HGMMA") for hot in hots.values())
    shown = TC_SHOWN[:1] + ("HGMMA",) + TC_SHOWN[1:] if wgmma else TC_SHOWN
    ratio = "MMA/LDSM" if wgmma else "HMMA/LDSM"
    print(f"{'kernel':<29} {'loop':>11} {'instr':>6} " + " ".join(f"{op:>8}" for op in shown)
          + f" {ratio:>9} {'integer':>8}")
    for name, hot in hots.items():
        if hot is None:
            print(f"{name:<29} {'no HMMA loop':>11}")
            continue
        per_ldsm = hot.mma_per_ldsm() if wgmma else hot.hmma_per_ldsm()
        print(f"{name:<29} {hot.start:05x}-{hot.end:05x} {hot.instructions:>6} "
              + " ".join(f"{hot.counts.get(op, 0):>8}" for op in shown)
              + f" {'-' if per_ldsm is None else f'{per_ldsm:.2f}':>9} {100 * hot.integer_share():>7.0f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", help="kernel names (default: all)")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--kernel-file", type=Path, default=KERNEL_FILE)
    parser.add_argument("--all", action="store_true", help="every loop, not only the innermost ones")
    parser.add_argument("--tensor-cores", action="store_true",
                        help="each kernel's tensor-core hot loop: HMMA (and HGMMA) per LDSM, the integer share")
    args = parser.parse_args(argv)
    loops = kernel_loops(args.kernel_file, args.arch)
    names = args.kernels or sorted(loops)
    for name in names:
        if name not in loops:
            raise SystemExit(f"no kernel named {name} in {args.kernel_file.name}")
    if args.tensor_cores:
        print(f"{args.kernel_file.name}, {args.arch}: instructions per trip of each kernel's tensor-core hot loop "
              "(static, from SASS)")
        print_tensor_core_mix(loops, names)
        return 0
    print(f"{args.kernel_file.name}, {args.arch}: instructions per trip of each {'' if args.all else 'innermost '}"
          "loop (static, from SASS)")
    print(f"{'kernel':<29} {'loop':>9} {'instr':>6} " + " ".join(f"{op:>8}" for op in SHOWN) + f" {'LDS/FFMA':>8}")
    for name in names:
        if name not in loops:
            raise SystemExit(f"no kernel named {name} in {args.kernel_file.name}")
        shown = loops[name] if args.all else innermost(loops[name])
        if not shown:
            print(f"{name:<29} {'no loop':>9}")
        for lp in sorted(shown, key=lambda lp: lp.start):
            ratio = lp.loads_per_ffma()
            print(f"{name:<29} {lp.start:04x}-{lp.end:04x} {lp.instructions:>6} "
                  + " ".join(f"{lp.counts.get(op, 0):>8}" for op in SHOWN)
                  + f" {'-' if ratio is None else f'{ratio:.3f}':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
