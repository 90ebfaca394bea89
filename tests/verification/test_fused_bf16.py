"""`verify` on the tensor-core kernels: broken copies of attention_fused_kernel4 and kernel5 must
fail it, each on a case the sweep holds (one case per copy here, so the test stays fast), in the
broken kernel's stage only; and a broken block order fails every causal fused kernel."""

import json

import pytest

from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.backward_bf16 import STAGES as BACKWARD_BF16_STAGES
from andrea_cli.verification.case import Case
from andrea_cli.verification.decode import STAGES as DECODE_STAGES
from andrea_cli.verification.fused_bf16 import STAGES
from andrea_cli.verification.run import sweep

REAL = packaged_kernel_path().read_text()

# bug -> (kernel or kernels, text in the kernel file, its broken replacement, the case that exposes it: T, d, mask, scaled)
BROKEN = {
    # lanes 8-15 and 16-23 give each other's ldmatrix rows: K fragments land in the wrong lanes
    "two lanes' fragments swapped": (4,
        "ldmatrix<4, false>(kf, ks + (8 * nt + (lane / 16) * 8 + lane % 8) * S\n"
        "                                               + 16 * kk + (lane / 8 % 2) * 8);",
        "ldmatrix<4, false>(kf, ks + (8 * nt + (lane / 8 % 2) * 8 + lane % 8) * S\n"
        "                                               + 16 * kk + (lane / 16) * 8);",
        (200, 64, "window:100", True)),
    # the copy of tile n is read before it has landed (on a GPU: a race; here: NaN)
    "missing cp.async wait": (4, "            cp_async_wait<1>();\n        } else {\n            cp_async_wait<0>();\n"
                                 "        }\n        __syncthreads();  // every thread's copies of this tile (and",
                              "        } else {\n            cp_async_wait<0>();\n"
                              "        }\n        __syncthreads();  // every thread's copies of this tile (and",
                              (65, 64, "causal", True)),
    # cvt.rn.bf16x2.f32 puts its FIRST operand in the upper half: the trap, in the emulated wrapper
    # the three kernels (and to_bf16_kernel1) use
    "bf16 pack order swapped": ((4, 5, 6, 7), "return ptx_emulated::cvt_rn_bf16x2_f32(hi, lo);",
                                "return ptx_emulated::cvt_rn_bf16x2_f32(lo, hi);", (64, 64, "window:64", True)),
    "rescale forgotten": (4, "                    acc[c][2 * r] *= alpha;\n                    acc[c][2 * r + 1] *= alpha;\n",
                          "", (200, 64, "window:100", True)),
    # the last tile's keys past T are left unmasked when T is one short of a tile edge
    "mask off by one at a tile edge": (4, "const bool edge = mask.hides_some(w_row0, w_last, j0, j0 + TC_KEYS - 1, j0 + TC_KEYS > Sk);",
                                       "const bool edge = mask.hides_some(w_row0, w_last, j0, j0 + TC_KEYS - 1, j0 + TC_KEYS - 1 > Sk);",
                                       (127, 64, "none", True)),
    # kernel5's own code: its K fragments' lane offsets, taken from V's (ldmatrix.trans) layout
    "kernel5: K fragments from V's lane layout": (5,
        "const int k_ld = ((lane / 16) * 8 + lane % 8) * S + (lane / 8 % 2) * 8;",
        "const int k_ld = ((lane / 8 % 2) * 8 + lane % 8) * S + (lane / 16) * 8;", (65, 64, "causal", True)),
    "kernel5: missing cp.async wait": (5, "            load_kv(StaticFlag<false>(), n + 1);\n            cp_async_wait<1>();\n",
                                       "            load_kv(StaticFlag<false>(), n + 1);\n", (300, 128, "causal", True)),
    # the same in the hot loop's copy of the tile (d = 64 only: the hot loop holds one copy path)
    "kernel5: missing cp.async wait, hot loop": (5, "            load_kv(StaticFlag<true>(), n + 1);\n            cp_async_wait<1>();\n",
                                                 "            load_kv(StaticFlag<true>(), n + 1);\n", (257, 64, "causal", False)),
    "kernel5: rescale forgotten": (5, "                acc[mt][c][2 * h] *= alpha;\n                acc[mt][c][2 * h + 1] *= alpha;\n",
                                   "", (300, 128, "causal", True)),
    # kernel6's descriptors: K's two strides swapped (LBO walks keys, SBO walks d)
    "kernel6: K descriptor strides swapped": (6, "wgmma_desc(k_s, 128, GROUP_BYTES)",
                                              "wgmma_desc(k_s, GROUP_BYTES, 128)", (65, 64, "causal", True)),
    # each k16 step of Q·K^T advances one core matrix (8 of d) instead of two
    "kernel6: K descriptor's k step halved": (6, "wgmma_desc_advance(kd, 256 * kk)",
                                              "wgmma_desc_advance(kd, 128 * kk)", (63, 128, "none", False)),
    # the V tile of the other stage: the previous tile's values (or the poison of one not yet loaded)
    "kernel6: V descriptor ignores the stage": (6, "wgmma_desc_advance(v_desc, (n & 1) * KV_TILE * 2)",
                                                "wgmma_desc_advance(v_desc, 0)", (200, 64, "window:100", True)),
    # V read as K-major (no transpose): O's columns taken along V's keys
    "kernel6: V not transposed": (6, "wgmma_bf16_m64nNk16<D, true>(acc, pf[kk], wgmma_desc_advance(vd, 2 * kk",
                                  "wgmma_bf16_m64nNk16<D, false>(acc, pf[kk], wgmma_desc_advance(vd, 2 * kk",
                                  (63, 128, "none", False)),
    # P's A fragment with its halves swapped: rows g + 8 take row g's weights
    "kernel6: P fragment rows swapped": (6, "            pf[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);",
                                         "            pf[kk][1] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);",
                                         (200, 64, "window:100", True)),
    # in the online softmax kernel6 and kernel7 share (wgmma_softmax_tile)
    "kernel6, kernel7: rescale forgotten": ((6, 7), "            acc[4 * c + 2 * h] *= alpha;\n            acc[4 * c + 2 * h + 1] *= alpha;\n",
                                            "", (300, 128, "causal", True)),
    # for_each_key_tile, kernel5's and kernel6's schedule: the hot loop runs one tile further (its
    # next copy, taken as whole, reads keys past T)
    "kernel5, kernel6: hot loop's next copy crosses T": ((5, 6), "HOT ? min(n_last, (T - kt.j_begin) / TC_KEYS - 1)",
                                                         "HOT ? min(n_last, (T - kt.j_begin) / TC_KEYS)",
                                                         (257, 64, "causal", False)),
    # the Mask's edge_tiles (their schedule's counts): one tile too few at the window's far end (keys
    # outside the window get weight); the tile that crosses T taken for an unmasked one
    "kernel5, 6, 7: window's first tile unmasked": ((5, 6, 7), "(p_last - window - j_begin) / KEYS + 1);",
                                                       "(p_last - window - j_begin) / KEYS);",
                                                       (200, 64, "window:100", True)),
    "kernel5, 6, 7: last tile unmasked": ((5, 6, 7), "min(S - KEYS, p0 + right - KEYS + 1) : S - KEYS;",
                                             "min(S - KEYS, p0 + right - KEYS + 1) : S - KEYS + 1;",
                                             (127, 64, "none", True)),
    # S read before its wgmma_wait (the wgmmas still in flight): a synchronous emulation passes it,
    # the CPU build's S reads NaN until the wait, as a GPU gives whatever the registers held
    "kernel6: S read before its wgmma_wait": (6, "        wgmma_commit();\n        wgmma_wait<0>();\n#pragma unroll\n"
                                                 "        for (int i = 0; i < 32; ++i) wgmma_hold(s[i]);",
                                              "        wgmma_commit();\n#pragma unroll\n"
                                              "        for (int i = 0; i < 32; ++i) wgmma_hold(s[i]);",
                                              (65, 64, "causal", True)),
    # no barrier after O's wgmmas: the next copy refills the stage another warpgroup's wgmmas read
    "kernel6: stage refilled under the wgmmas": (6, "        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);\n"
                                                    "        __syncthreads();  // every warp is done with this stage",
                                                 "        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);\n"
                                                 "        // every warp is done with this stage",
                                                 (300, 128, "causal", True)),
    # the count of tiles the window's far end crosses (edge_tiles): a remainder for the quotient,
    # and the tile whose first key is exactly the far end left unmasked
    "kernel5, 6, 7: window tiles counted by remainder": ((5, 6, 7), "(p_last - window - j_begin) / KEYS + 1);",
                                                            "(p_last - window - j_begin) % KEYS + 1);",
                                                            (384, 64, "window:255", True)),
    "kernel5, 6, 7: window edge on a tile's first key unmasked": (
        (5, 6, 7), "if (window > 0 && p_last - window >= j_begin)",
        "if (window > 0 && p_last - window != j_begin)", (384, 64, "window:255", True)),
    # the per-thread cp.async offset no longer advances with the tiles: every tile is the first
    "kernel5: cp.async source not advanced": (5, "        kv_src += TC_KEYS * D;\n", "", (200, 64, "window:100", True)),
    # kernel7's producer arms a stage's full barrier for one box too many: the consumers wait for
    # bytes no copy brings (a deadlock, named in one line)
    "kernel7: expect_tx byte count wrong": (7, "mbar_arrive_expect_tx(&full[s], 2 * TILE_BYTES);",
                                            "mbar_arrive_expect_tx(&full[s], 2 * TILE_BYTES + 2 * BOX);",
                                            (200, 64, "window:100", True)),
    # the producer no longer waits for a stage to be emptied: it refills K and V under the
    # consumers' wgmmas (a block of more tiles than stages reads a later tile's keys)
    "kernel7: missing empty-barrier wait": (7, "            mbar_wait(&empty[s], ((n / K7_STAGES) & 1) ^ 1);",
                                            "", (300, 128, "causal", True)),
    # K's descriptor with kernel6's strides: its layout, not the TMA boxes'
    "kernel7: K descriptor strides of kernel6's layout": (7, "wgmma_desc(k_s, 1024, 128)",
                                                          "wgmma_desc(k_s, 128, 1024)", (65, 64, "causal", True)),
    # the tile past S copied by hand without its zeros: V rows past S keep a stage's stale bytes
    # (P is 0 there, but 0 times the poison of shared memory is NaN)
    "kernel7: tail tile without its zeros": (7, "js + r < Sk ? *(const uint4*)src : make_uint4(0, 0, 0, 0)",
                                             "*(const uint4*)src", (127, 64, "none", True)),
}


def spec(mask: str) -> MaskSpec:
    kind, _, w = mask.partition(":")
    return MaskSpec(kind, int(w)) if w else MaskSpec(kind)


def test_the_sweep_holds_every_exposing_case():
    cases = sweep()
    for _, _, _, (T, d, mask, scaled) in BROKEN.values():
        assert Case(T, d, d, spec(mask), scaled) in cases, (T, d, mask, scaled)
    assert Case(127, 128, 128, MaskSpec("none"), True) in sweep(quick=True)  # the tile edge, quick too


def no_scale(scaled: bool) -> tuple[str, ...]:
    return () if scaled else ("--no-scale",)


def verify_broken(cli, tmp_path, old: str, new: str, T: int, d: int, mask: str, scaled: bool) -> dict:
    assert REAL.count(old) == 1, f"the kernel file changed: update the mutation of {old!r}"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))
    result = cli("verify", "--backend", "cpu", "--T", T, "--d-k", d, "--mask", mask, *no_scale(scaled),
                 "--kernel", broken, "--json")
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


@pytest.mark.slow  # a CPU build per broken copy, and every family on a case of up to T = 300: ~10 s each
@pytest.mark.parametrize("bug", BROKEN)
def test_verify_catches_a_broken_tensor_core_kernel(cli, tmp_path, bug, quick_builds):
    variants, old, new, (T, d, mask, scaled) = BROKEN[bug]
    doc = verify_broken(cli, tmp_path, old, new, T, d, mask, scaled)
    stages = {STAGES[v] for v in (variants if isinstance(variants, tuple) else (variants,))}
    failed = [c for c in doc["cases"] if not c["passed"]]
    assert failed and all(not c["stages"][stage]["passed"] for c in failed if c["error"] is None for stage in stages), \
        failed[0]
    # the other kernels share none of this code: only the broken kernels' stages fail (and the bf16
    # backward's, whose forward is kernel4's body, and the decode family's bf16 cache, which the
    # same pack_bf16x2 fills)
    shared = {*BACKWARD_BF16_STAGES, DECODE_STAGES[1]} if bug == "bf16 pack order swapped" else set(BACKWARD_BF16_STAGES)
    assert all(s["passed"] for c in doc["cases"] for name, s in c["stages"].items()
               if name not in stages and name not in shared)


def test_verify_catches_a_broken_causal_block_order(cli, tmp_path, quick_builds):
    # every block of a causal launch computing head (rank % H) instead of (n % H): the other head
    # is never written, in every causal fused kernel
    doc = verify_broken(cli, tmp_path, "rank : rank, n % (int)gridDim.z};", "rank : rank, rank % (int)gridDim.z};",
                        65, 64, "causal", True)
    failed = {name for c in doc["cases"] for name, s in c["stages"].items() if not s["passed"]}
    assert {"fused1", "fused2", "fused3", STAGES[4], STAGES[5]} <= failed, failed
