"""Issue 22's GPU targets, judged from one `andrea bench --json` document: andrea's default bf16
kernel (attention_fused_kernel6 on an sm_90 GPU, wgmma; kernel5 on any other) at T 16,384, d 64
and 128, causal and not, against FlashAttention-2's published figures (target >= 0.9x) and
against torch SDPA's FlashAttention backend measured in the same run (target >= 1.0x), with
cuDNN's figure beside; and every tensor-core kernel (kernel4 to kernel7) and SDPA's flash and
cuDNN backends ranked by the TFLOP/s measured at each point (issue 34), figures of the CPU build
never ranked.

Pure: a bench document in, a dict out (rendering is render/parity.py's). TFLOP/s are bench's
own, by FlashAttention's FLOP count (roofline.attention_flops), the count the published figures
use, so the ratios are ratios of times at equal work."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from andrea_cli.backends.launch.fused_bf16 import BF16_KERNELS, default_bf16_variant
from andrea_cli.backends.toolchain.cuda_arch import WGMMA_CC
from andrea_cli.bench.anchors import ANCHOR_T, anchors_json, published
from andrea_cli.bench.cpu import CPU_BUILD

PARITY_T = 16384
PARITY_HEADS = 12
D_KS = (64, 128)
TARGET_VS_FA2_PUBLISHED = 0.9
TARGET_VS_SDPA_FLASH = 1.0
DEFAULT_KERNEL = (f"{BF16_KERNELS[default_bf16_variant(WGMMA_CC)].stem} on compute capability "
                  f"{WGMMA_CC[0]}.{WGMMA_CC[1]} (H100, H200), else {BF16_KERNELS[default_bf16_variant(None)].stem}")

# each figure's bench rows, the GPU side's first: on the CPU side the kernels run as the CPU
# build (not a speed path); torch's rows are named alike on both sides
KERNEL_ROLES = {f"kernel{v}": (k.label, CPU_BUILD + k.label) for v, k in BF16_KERNELS.items()}  # kernel4 .. 7
SDPA_BACKENDS = {"sdpa_flash": ("torch_sdpa_bf16_flash",), "sdpa_cudnn": ("torch_sdpa_bf16_cudnn",)}
ROLES = {
    "andrea": ("fused_bf16", CPU_BUILD + "fused_bf16"),  # the default: kernel6 on sm_90, else kernel5
    **KERNEL_ROLES,
    **SDPA_BACKENDS,
    "sdpa_default": ("torch_sdpa_bf16",),
}
# what the ranking orders: each kernel and each pinned backend once (andrea's default is one of the
# kernels, SDPA's default one of its backends)
RANKED = (*KERNEL_ROLES, *SDPA_BACKENDS)


def parity_impls(side: str) -> list[str]:
    """The names to pass to `bench --impl` on a side ("gpu" or "cpu"): every role's row it has."""
    own = 1 if side == "cpu" else 0
    kernels = [ROLES["andrea"][own], *(names[own] for names in KERNEL_ROLES.values())]
    return kernels + ["torch_sdpa_bf16", "torch_sdpa_bf16_flash", "torch_sdpa_bf16_cudnn"]


DRY_RUN = dict(T=64, H=2, repeats=2)  # the parity step without a GPU: the CPU build's rows, to check the step


def parity_bench_args(gpu: bool) -> list[str]:
    """The parity step's `andrea bench` arguments (scripts/gpu_check.py): on a GPU at T 16,384 with
    12 heads, 10 repeats; without one the CPU build's dry run."""
    T, H, repeats = (PARITY_T, PARITY_HEADS, 10) if gpu else (DRY_RUN["T"], DRY_RUN["H"], DRY_RUN["repeats"])
    side = "gpu" if gpu else "cpu"
    impls = [arg for name in parity_impls(side) for arg in ("--impl", name)]
    return ["bench", "--side", side, "--T", str(T), "--heads", str(H), "--repeats", str(repeats), *impls, "--json"]


@dataclass
class Figure:
    tflops: float | None
    why: str = ""  # why there is no figure ("" when there is one)
    speed_path: bool = True  # False: the CPU build of the kernel file, a correctness tool
    chose: str | None = None  # SDPA's default: the backend it ran
    max_abs_err: float | None = None  # bench's check of sampled rows against float64: a fast wrong kernel is no pass


@dataclass
class Ratio:
    label: str
    value: float | None
    target: float | None  # None: shown beside the targets, not judged
    verdict: str  # "pass", "short", "beside" (no target) or "not judged"
    why: str = ""


def figure(doc: dict, role: str, d_k: int, causal: bool, T: int) -> Figure:
    """The role's TFLOP/s at one point, or why bench has none."""
    rows = {m["impl"]: m for m in doc.get("measurements", [])
            if (m["d_k"], m["causal"], m["T"], m.get("direction", "forward")) == (d_k, causal, T, "forward")}
    m = next((rows[name] for name in ROLES[role] if name in rows), None)
    if m is None:
        torch_reason = (doc.get("torch") or {}).get("reason")
        if role.startswith("sdpa") and torch_reason:
            return Figure(None, torch_reason)
        return Figure(None, f"no {' or '.join(ROLES[role])} row in bench's output")
    if m.get("tflops") is None:
        return Figure(None, m.get("skipped") or "not timed", m.get("speed_path", True))
    if m.get("within_tolerance") is False:  # a fast wrong kernel is no figure to judge or rank
        return Figure(None, f"a wrong output: max err {m['max_abs_err']:.1e} over its tolerance "
                            f"{m['tolerance']:.1e}", m.get("speed_path", True), m.get("chose"), m.get("max_abs_err"))
    return Figure(m["tflops"], "", m.get("speed_path", True), m.get("chose"), m.get("max_abs_err"))


def ratio(label: str, kernel: Figure, peer: Figure, target: float | None) -> Ratio:
    """kernel / peer, TFLOP/s over TFLOP/s (a ratio of times at equal work, > 1: faster), judged
    against target where there is one; not judged when either side has no speed figure."""
    for side in (kernel, peer):
        if side.tflops is None:
            return Ratio(label, None, target, "not judged", side.why)
        if not side.speed_path:
            return Ratio(label, None, target, "not judged", "the CPU build of the kernel file, not a speed path")
    value = kernel.tflops / peer.tflops
    verdict = "beside" if target is None else "pass" if value >= target else "short"
    return Ratio(label, value, target, verdict)


def published_figure(impl: str, d_k: int, causal: bool, T: int) -> Figure:
    if T != ANCHOR_T:
        return Figure(None, f"the published figures are at T {ANCHOR_T}, this run's at T {T}")
    tflops = published(impl, d_k, causal)
    return Figure(tflops, "" if tflops else f"no published {impl} figure at d {d_k}{' causal' if causal else ''}")


def ranking(figures: dict[str, Figure]) -> list[dict]:
    """The kernels and SDPA's pinned backends that have a speed figure at a point, fastest first
    (a CPU-build figure is not a speed figure, and is left out)."""
    timed = [(role, figures[role]) for role in RANKED if figures[role].tflops is not None and figures[role].speed_path]
    return [{"role": role, "tflops": f.tflops} for role, f in sorted(timed, key=lambda item: -item[1].tflops)]


def parity_point(doc: dict, d_k: int, causal: bool, T: int) -> dict:
    figures = {role: figure(doc, role, d_k, causal, T) for role in ROLES}
    fa2 = published_figure("FlashAttention-2", d_k, causal, T)
    ours = figures["andrea"]
    ratios = [ratio("andrea / FA2 published", ours, fa2, TARGET_VS_FA2_PUBLISHED),
              ratio("andrea / SDPA flash", ours, figures["sdpa_flash"], TARGET_VS_SDPA_FLASH),
              ratio("andrea / SDPA cuDNN", ours, figures["sdpa_cudnn"], None)]
    return {"d_k": d_k, "causal": causal, "T": T,
            "measured": {role: asdict(f) for role, f in figures.items()},
            "sdpa_default_chose": figures["sdpa_default"].chose,
            "ranking": ranking(figures),
            "published": {impl: published(impl, d_k, causal) if T == ANCHOR_T else None
                          for impl in ("FlashAttention-2", "cuDNN", "FlashAttention-3")},
            "ratios": [asdict(r) for r in ratios]}


def verdict(points: list[dict]) -> str:
    """"pass" when every judged target passes at every point, "short" when any falls short,
    "not judged" when none could be judged (no GPU, a missing peer)."""
    judged = [r["verdict"] for p in points for r in p["ratios"] if r["target"] is not None]
    if "short" in judged:
        return "short"
    if judged and all(v == "pass" for v in judged):
        return "pass"
    return "not judged"


def parity_report(doc: dict, T: int | None = None) -> dict:
    """Every (d_k, mask) point at T (default: the largest T of the document's default-kernel rows)."""
    Ts = [m["T"] for m in doc.get("measurements", []) if m["impl"] in ROLES["andrea"]]
    T = T or (max(Ts) if Ts else PARITY_T)
    points = [parity_point(doc, d_k, causal, T) for d_k in D_KS for causal in (False, True)]
    heads = {m["H"] for m in doc.get("measurements", []) if m["T"] == T}
    return {"T": T, "H": min(heads) if heads else None, "side": doc.get("side"), "device": doc.get("device"),
            "torch": doc.get("torch"), "published": anchors_json(),
            "andrea": DEFAULT_KERNEL,
            "targets": {"andrea / FA2 published": TARGET_VS_FA2_PUBLISHED,
                        "andrea / SDPA flash": TARGET_VS_SDPA_FLASH},
            "points": points, "verdict": verdict(points)}
