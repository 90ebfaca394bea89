"""racecheck: the ThreadSanitizer build names every data race a GPU could expose, on one line each
(kind, memory, both threads, both lines, the rule), and stays silent on correct code.

tests/kernels/races.cu holds one race per racy kernel (its two lines marked "RACE:") and the
common correct patterns; the project's own kernel file is checked with three barriers removed
that plain verify cannot catch (each guards a write after a read)."""

import pathlib
import re

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import race_report
from andrea_cli.backends.cpu_runtime.errors import CpuRaceError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.kernel_file import packaged_kernel_path

pytestmark = pytest.mark.slow  # a ThreadSanitizer build and worker: seconds to minutes

RACES = pathlib.Path(__file__).parents[2] / "kernels" / "races.cu"


def marked_lines(name: str) -> list[int]:
    """The lines marked "RACE:" inside kernel `name` of races.cu."""
    lines = RACES.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if f"void {name}(" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("__global__")), len(lines))
    return [i + 1 for i in range(start, end) if "// RACE:" in lines[i]]


@pytest.fixture(scope="module")
def races_module():
    return CpuModule(RACES, racecheck=True)


def race_of(module, name, grid, block, args) -> CpuRaceError:
    with pytest.raises(CpuRaceError) as caught:
        module.get_function(name)(grid, block, args)
    return caught.value


def test_lane0_writes_lanes_read_is_named_with_both_lines(races_module):
    rows, cols = 4, 40
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    err = race_of(races_module, "lane0_writes_lanes_read", (1,), (128,),
                  (x, np.zeros(rows, np.float32), np.zeros_like(x), np.int32(cols)))
    write, read = marked_lines("lane0_writes_lanes_read")
    line = err.hazards[0]
    assert line.startswith("read after write on row_max[")
    assert f"races.cu:{read}" in line and f"races.cu:{write}" in line
    assert "thread (0) of block (0) wrote" in line
    assert "__syncwarp" in line and "shuffles and votes order no memory" in line
    # the kernel error's first line: the kernel and its first race, whole
    assert str(err).splitlines()[0] == f"lane0_writes_lanes_read: data race a GPU could expose: {line}"


def test_the_same_kernel_with_its_syncwarp_is_silent(races_module):
    rows, cols = 4, 40
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    out = np.zeros_like(x)
    races_module.get_function("lane0_writes_lanes_read_synced")((1,), (128,), (x, np.zeros(rows, np.float32), out,
                                                                            np.int32(cols)))
    np.testing.assert_allclose(out, x - x.max(axis=1, keepdims=True))


def test_mvt_plus_equals_by_eight_threads(races_module):
    n = 32
    rng = np.random.default_rng(1)
    a, y = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    err = race_of(races_module, "mvt_shared_sum", (1,), (32, 8), (a, y, np.zeros(n, np.float32), np.int32(n)))
    (line_no,) = marked_lines("mvt_shared_sum")
    line = err.hazards[0]
    assert re.match(r"(read|write) after (read|write) on x1\[\d+\]", line), line
    assert line.count(f"races.cu:{line_no}") == 2
    assert "threads of one block are ordered only by __syncthreads()" in line


def test_warp_synchronous_reduction_without_syncwarp(races_module):
    err = race_of(races_module, "warp_synchronous_sum", (2,), (64,),
                  (np.ones(128, np.float32), np.zeros(2, np.float32)))
    write, first_read = marked_lines("warp_synchronous_sum")
    reads = {f"races.cu:{n}" for n in range(first_read, first_read + 5)}
    for line in err.hazards[:-1] if err.hazards[-1].startswith("and ") else err.hazards:
        assert line.startswith("write after read on __shared__ s in warp_synchronous_sum byte "), line
        assert f"writes at races.cu:{write}," in line and line.split(" read at ")[1].split(";")[0] in reads, line
        assert "lanes of one warp are ordered only by a __syncwarp naming both" in line


def test_blocks_adding_into_one_output(races_module):
    err = race_of(races_module, "blocks_add_into_one", (3,), (64,),
                  (np.ones(192, np.float32), np.zeros(64, np.float32)))
    (line_no,) = marked_lines("blocks_add_into_one")
    line = err.hazards[0]
    assert " on out[" in line and line.count(f"races.cu:{line_no}") == 2
    assert "of block (1)" in line and "of block (0)" in line
    assert "blocks of one launch are never ordered" in line


def test_a_fence_with_no_atomic_orders_nothing_and_says_so(races_module):
    err = race_of(races_module, "fence_without_atomic", (4,), (32,),
                  (np.ones(4, np.float32), np.zeros(4, np.float32), np.zeros(1, np.float32)))
    write, read = marked_lines("fence_without_atomic")
    line = err.hazards[0]
    assert line.startswith("read after write on partial[")
    assert f"races.cu:{read}" in line and f"races.cu:{write}" in line
    assert "ran __threadfence() at races.cu:" in line and "with no atomic after it, so it orders nothing" in line


def test_correct_patterns_are_silent_and_right(races_module):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(1000, dtype=np.float32)
    blocks = (1000 + 127) // 128
    total, ticket = np.zeros(1, np.float32), np.zeros(1, np.uint32)
    races_module.get_function("last_block_sum")((blocks,), (128,), (x, np.zeros(blocks, np.float32), ticket, total,
                                                                    np.int32(1000)))
    assert total[0] == pytest.approx(x.astype(np.float64).sum(), abs=1e-3) and ticket[0] == 0

    x = rng.standard_normal(4 * 256, dtype=np.float32)
    out = np.zeros(4, np.float32)
    races_module.get_function("shuffle_block_sum")((4,), (256,), (x, out))
    np.testing.assert_allclose(out, x.reshape(4, 256).sum(axis=1), rtol=1e-4, atol=1e-4)

    out = np.zeros(4, np.float32)
    races_module.get_function("tile_exchange")((4,), (256,), (x, out))
    np.testing.assert_allclose(out, x.reshape(4, 256).sum(axis=1), rtol=1e-4, atol=1e-4)

    values = rng.integers(0, 1000, 5000).astype(np.uint32)
    bins = np.zeros(16, np.uint32)
    races_module.get_function("histogram")((8,), (128,), (values, bins, np.int32(5000)))
    np.testing.assert_array_equal(bins, np.bincount(values % 16, minlength=16))

    x = rng.standard_normal(2 * 128, dtype=np.float32)
    out = np.zeros_like(x)
    races_module.get_function("wide_tile_exchange")((2,), (128,), (x, out))
    tiles = x.reshape(4, 64)
    other = np.roll(tiles, -32, axis=1)
    np.testing.assert_allclose(out.reshape(4, 64), other + other[:, :1], rtol=1e-6)

    n = 48
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    races_module.get_function("tiled_gemm")((3, 3), (16, 16), (a, b, c, np.int32(n)))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_racecheck_is_refused_where_it_cannot_run(run_main):
    code, _, err = run_main("verify", "--racecheck", "--backend", "cuda")
    assert code == 2 and "--racecheck runs the CPU build under ThreadSanitizer: pass --backend cpu" in err
    code, _, err = run_main("verify", "--racecheck", "--sanitize")
    assert code == 2 and "pass one of them" in err
    code, _, err = run_main("attend", "--racecheck", "--backend", "numpy")
    assert code == 2 and "not --backend numpy: pass --backend cpu" in err


def test_a_repeated_race_is_reported_at_every_launch(races_module):
    # ThreadSanitizer says each pair of lines once per process: the worker is renewed after a report
    for _ in range(2):
        race_of(races_module, "blocks_add_into_one", (2,), (32,), (np.ones(64, np.float32), np.zeros(32, np.float32)))


def test_the_report_is_parsed_into_cuda_terms():
    report = """==================
WARNING: ThreadSanitizer: data race (pid=1)
  Read of size 4 at 0x1010 by thread T3:
    #0 k(float*) /x/k.cu:6 (lib.so+0x1)
    #1 call_with /x/cuda/cpu_runtime/exports.h:10 (lib.so+0x1)

  Previous write of size 4 at 0x1010 by thread T2:
    #0 k(float*) /x/k.cu:5 (lib.so+0x2)

  Location is heap block of size 64 at 0x1000 allocated by main thread:
    #0 malloc x.cpp:1

  Thread T3 'block (0, 0, 0) thread (33, 0, 0)' (tid=0, running) created by main thread at:
    #0 race_block_begin racecheck.h:1

  Thread T2 'block (0, 0, 0) thread (0, 0, 0)' (tid=0, running) created by main thread at:
    #0 race_block_begin racecheck.h:1

SUMMARY: ThreadSanitizer: data race /x/k.cu:6 in k(float*)
=================="""
    races = race_report.parse(report)
    memory = race_report.Memory([("out", 0x1000, 64, 4)], (0, 0), [], (0, 0), [])
    (line,) = race_report.summarize(races, memory, (64, 1, 1))
    assert line == ("read after write on out[4]: thread (33) of block (0) reads at k.cu:6, thread (0) of block (0) "
                    "wrote at k.cu:5; threads of one block are ordered only by __syncthreads(), a named barrier "
                    "(bar.sync id, n) both join, or an mbarrier phase one arrives on and the other waits for")


# --- the project's kernel file ------------------------------------------------------------------

# Barriers that guard a write after a read: removed one at a time, plain verify still passes
# (the fiber scheduler runs every thread to the barrier before any runs on), racecheck must not.
# (the barrier's comment, which of its occurrences): block_reduce's, kernel4's and kernel5's stage
# refills, kernel3's k_s
WAR_BARRIERS = [("__syncthreads();  // warp_results is reused by the next reduction", 0),
                ("__syncthreads();  // every warp is done with this stage before it is refilled", 0),
                ("__syncthreads();  // every warp is done with this stage before it is refilled", 1),
                ("__syncthreads();  // every thread is done reading k_s: P may overwrite it", 0)]


@pytest.mark.parametrize("barrier, occurrence", WAR_BARRIERS)
def test_each_write_after_read_barrier_of_our_kernels_is_named_when_removed(tmp_path, run_main, barrier, occurrence):
    source = packaged_kernel_path().read_text()
    parts = source.split(barrier)
    assert len(parts) > occurrence + 1, barrier
    broken = tmp_path / "microgpt_cuda.cu"
    removed = ";  // (barrier removed)"
    broken.write_text(barrier.join(parts[:occurrence + 1]) + removed + barrier.join(parts[occurrence + 1:]))
    removed_at = next(n for n, line in enumerate(broken.read_text().splitlines(), 1) if "(barrier removed)" in line)
    T, d = (192, 64)  # three 64-key tiles: kernel4's stages are refilled, kernel3 has key tiles to read
    code, out, err = run_main("verify", "--backend", "cpu", "--racecheck", "--T", str(T), "--d-k", str(d),
                              "--d-v", str(d), "--kernel", broken)
    assert code == 1 and "FAIL" in err, (out, err)
    text = " ".join(out.split())
    assert re.search(r"data race a GPU could expose: write after read on (extern )?__shared__", text), out
    assert f"microgpt_cuda.cu:{removed_at}" not in text  # the barrier's line is gone: the race is between others
    assert ("threads of one block are ordered only by __syncthreads()" in text
            or "lanes of one warp are ordered only by a __syncwarp" in text), out


def test_kernel6_without_its_proxy_fence_is_named(tmp_path, run_main):
    """kernel6 keeps its barrier but loses fence_proxy_async(): the cp.async copies (generic proxy)
    no longer reach the tensor cores' descriptor reads (async proxy), and racecheck says the fence
    is missing; the unchanged file passes (verify --racecheck --quick, every run)."""
    fence = "        fence_proxy_async();  // this thread's copies, visible to the tensor cores' reads\n"
    source = packaged_kernel_path().read_text()
    assert source.count(fence) == 1
    broken = tmp_path / "microgpt_cuda.cu"
    broken.write_text(source.replace(fence, "        ;  // (fence removed)\n"))
    code, out, err = run_main("verify", "--backend", "cpu", "--racecheck", "--T", "129", "--d-k", "64",
                              "--d-v", "64", "--mask", "none", "--kernel", broken)
    assert code == 1 and "FAIL" in err, (out, err)
    text = " ".join(out.split())
    assert re.search(r"attention_fused_kernel6_d64: data race a GPU could expose: read after write on extern "
                     r"__shared__ memory byte \d+: thread \(\d+\) of block \(\d+\)'s tensor cores reads", text), out
    assert "a barrier alone orders nothing for them: the fence is missing" in text


def test_kernel3s_bias_tile_read_before_a_barrier_is_named(tmp_path):
    """kernel3's mask-array tile b_s stored after the barrier that publishes the K tile, not
    before it: the element pass reads biases other threads may not have stored yet (read after
    write on b_s, which lies past q_s, k_s and v_s); K and V keep their barrier, so b_s alone races."""
    from andrea_cli.backends.launch.catalogue import kernel
    from andrea_cli.commands.verify import verify_backends
    from andrea_cli.verification import run_verify
    from andrea_cli.verification.race_sweep import bias_tile_case

    source = packaged_kernel_path().read_text()
    load = "        if (bias != nullptr) {  // the array's (64, 64) slice"
    barrier = "            }\n        }\n        __syncthreads();\n\n        // S = Q · K^T"
    assert source.count(load) == 1 and source.count(barrier) == 1
    broken = tmp_path / "microgpt_cuda.cu"
    broken.write_text(source.replace(load, "        __syncthreads();\n" + load)
                      .replace(barrier, barrier.replace("        __syncthreads();\n", "")))
    case = bias_tile_case()
    report = run_verify(verify_backends("cpu", broken, racecheck=True, schedules=("forward",)), [case],
                        kernel_file=str(broken))
    (result,) = report.results
    assert not report.passed and result.error is not None
    # whichever thread ThreadSanitizer sees first: one stores, another reads the same bias
    found = re.search(r"attention_fused_kernel3_d64: data race a GPU could expose: (?:read after write|write after "
                      r"read) on extern __shared__ memory byte (\d+): .* at microgpt_cuda.cu:(\d+), .* at "
                      r"microgpt_cuda.cu:(\d+)", result.error)
    assert found, result.error
    assert int(found.group(1)) >= kernel("fused", "fused", 3).shared_bytes(64, 64)  # in b_s, past v_s
    lines = broken.read_text().splitlines()
    sides = {lines[int(found.group(n)) - 1].strip() for n in (2, 3)}
    assert any(s.startswith("b_s[fused3_bias_at(rr, jj)] =") for s in sides), sides  # the store
    assert any("b_s[fused3_bias_at(8 * rg + r, cg + 16 * n)]" in s for s in sides), sides  # the element pass
