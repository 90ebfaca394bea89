"""llm.c's dev/cuda and NVIDIA's cuda-samples on the CPU build: does each case's device code
compile as written? Each case's .cu and every header it includes from its own repository go to
andrea_cli.RawModule with their host functions blanked (cuda_source.device_half: line for line,
device code untouched); template kernels are instantiated where the case names them.

    PYTHONPATH=$PWD python scripts/suites/run_kernel_files.py --llmc ~/src/llm.c --samples ~/src/cuda-samples

--llmc: a checkout of https://github.com/karpathy/llm.c; --samples: of
https://github.com/NVIDIA/cuda-samples. llm.c's common.h includes the cuBLAS headers for its host
helpers: the CPU build has no cuBLAS, so host_include/cublas_types/ gives their types (no
functions) for the declarations that stay. Compile only: these programs' mains benchmark
their kernels at sizes meant for a GPU. One line per case, then the totals.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cuda_source import device_half  # noqa: E402

from andrea_cli import RawModule  # noqa: E402
from andrea_cli.backends.cpu_runtime.errors import CpuRuntimeError  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
LLMC = ["adamw", "classifier_fused", "crossentropy_forward", "crossentropy_softmax_backward", "encoder_backward",
        "encoder_forward", "fused_residual_forward", "gelu_backward", "gelu_forward", "global_norm",
        "layernorm_backward", "layernorm_forward", "permute", "residual_forward", "softmax_forward"]
# case -> the template instantiations it launches (name expressions, as a cupy user lists them)
SAMPLES = {
    "0_Introduction/vectorAdd/vectorAdd.cu": (),
    "0_Introduction/matrixMul/matrixMul.cu": ("MatrixMulCUDA<16>", "MatrixMulCUDA<32>"),
    "0_Introduction/simpleAtomicIntrinsics/simpleAtomicIntrinsics.cu": (),
    "0_Introduction/simpleCooperativeGroups/simpleCooperativeGroups.cu": (),
    "0_Introduction/mergeSort/bitonic.cu": (),
    "2_Concepts_and_Techniques/convolutionSeparable/convolutionSeparable.cu": (),
    "2_Concepts_and_Techniques/histogram/histogram256.cu": (),
    "2_Concepts_and_Techniques/histogram/histogram64.cu": (),
    "2_Concepts_and_Techniques/reduction/reduction_kernel.cu": (
        "reduce0<float>", "reduce3<float>", "reduce4<float,256>", "reduce5<float,256>",
        "reduce6<float,256,true>", "reduce7<float,256,false>", "cg_reduce<float>", "multi_warp_cg_reduce<float,256,64>",
        "multi_warp_cg_reduce<float,512,128>"),
    "2_Concepts_and_Techniques/scalarProd/scalarProd.cu": (),
    "2_Concepts_and_Techniques/scan/scan.cu": (),
    "2_Concepts_and_Techniques/shfl_scan/shfl_scan.cu": (),
    "2_Concepts_and_Techniques/sortingNetworks/bitonicSort.cu": (),
    "3_CUDA_Features/warpAggregatedAtomicsCG/warpAggregatedAtomicsCG.cu": (),
    "6_Performance/transpose/transpose.cu": (),
}
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def mirror(case: pathlib.Path, root: pathlib.Path, include_dirs: list[pathlib.Path], out: pathlib.Path) -> pathlib.Path:
    """Copy the case and every header it reaches inside root into out (same relative paths),
    each with its host functions blanked; the case's path in out."""
    todo, seen = [case], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = path.read_text(errors="replace")
        target = out / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(device_half(text))
        for kind, name in _INCLUDE.findall(text):
            places = ([path.parent] if kind == '"' else []) + include_dirs
            found = next((p / name for p in places if (p / name).is_file()), None)
            if found is not None and root in found.resolve().parents:
                todo.append(found.resolve())
    return out / case.relative_to(root)


def compile_case(case: pathlib.Path, root: pathlib.Path, include_dirs: list[pathlib.Path],
                 expressions: tuple[str, ...], work: pathlib.Path) -> tuple[bool, str]:
    copy = mirror(case.resolve(), root.resolve(), [d.resolve() for d in include_dirs], work)
    options = ["-I", str(HERE / "host_include" / "cublas_types")]
    for d in include_dirs:
        options += ["-I", str(work / d.resolve().relative_to(root.resolve()))]
    try:
        module = RawModule(path=copy, options=options, name_expressions=expressions)
    except CpuRuntimeError as exc:
        return False, str(exc).splitlines()[0]
    return True, f"{len(module.kernel_names)} kernels"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llmc", type=pathlib.Path, help="a checkout of karpathy/llm.c")
    parser.add_argument("--samples", type=pathlib.Path, help="a checkout of NVIDIA/cuda-samples")
    args = parser.parse_args(argv)
    if not args.llmc and not args.samples:
        parser.error("give --llmc PATH, --samples PATH or both")
    cases: list[tuple[str, pathlib.Path, pathlib.Path, list[pathlib.Path], tuple[str, ...]]] = []
    if args.llmc:
        folder = args.llmc / "dev" / "cuda"
        if not folder.is_dir():
            parser.error(f"--llmc {args.llmc}: no dev/cuda there (a checkout of karpathy/llm.c?)")
        cases += [(f"llm.c {n}", folder / f"{n}.cu", args.llmc, [folder], ()) for n in LLMC]
    if args.samples:
        common = args.samples / "Common"
        if not common.is_dir():
            parser.error(f"--samples {args.samples}: no Common/ there (a checkout of NVIDIA/cuda-samples?)")
        cases += [(f"cuda-samples {pathlib.Path(p).stem}", args.samples / "Samples" / p, args.samples, [common], e)
                  for p, e in SAMPLES.items()]
    compiled = 0
    with tempfile.TemporaryDirectory(prefix="andrea-kernel-files-") as tmp:
        for label, case, root, include_dirs, expressions in cases:
            ok, detail = compile_case(case, root, include_dirs, expressions, pathlib.Path(tmp) / label.replace(" ", "_"))
            compiled += ok
            print(f"{label:<45} {'compiles' if ok else 'FAILS':<9} {detail}", flush=True)
    print(f"{len(cases)} cases, {compiled} compile as written")
    return 0 if compiled == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
