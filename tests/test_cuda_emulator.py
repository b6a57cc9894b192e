"""The CPU emulator of CUDA kernels (cuda_emulator.py, cuda_cpu/cuda_cpu.h) itself: its two ways of
running a block's threads agree, and a kernel whose barriers are wrong goes wrong in it."""
import subprocess

import numpy as np
import pytest

import cuda_emulator
from test_kernel_sanitizers import MUTANTS, mutant, one_case, source_of

pytestmark = pytest.mark.skipif(cuda_emulator.CXX is None, reason="needs g++")


@pytest.mark.parametrize("kernel,dtype", [("simt", "float32"), ("tensor_cores", "float16"), ("mma", "float16"),
                                          ("backward", "float32"), ("backward_mma", "float16")])
def test_fibers_and_threads_give_the_same_numbers(kernel, dtype):
    """Each CUDA thread as a fiber (the default) or as a std::thread (-DCUDA_CPU_THREADS, under a
    real thread scheduler): the same arithmetic in the same order, so the same bits in everything the
    kernel writes (O and lse; dQ, dK and dV), and right. The kernels cover __syncthreads, __syncwarp,
    shuffles, WMMA and mma tiles, cp.async and atomicAdd. (The TF32 kernels swap their operands between
    lanes as "mma" does, at three times the emulated products: the slowest case, left out.) One batch row
    of 2 query heads and 1 key/value head: a block's threads as std::threads wait for each other by
    spinning, so the forward's default of 2 rows of 4 heads took 4 times as long, with no new path."""
    fibers, ref = one_case(source_of(kernel), kernel, dtype, heads=(1, 2, 1))
    threads, _ = one_case(source_of(kernel), kernel, dtype, options=("-DCUDA_CPU_THREADS",), heads=(1, 2, 1))
    for a, b in zip(fibers, threads, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    np.testing.assert_allclose(fibers[0].astype(np.float64), ref, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("name", [name for name, m in MUTANTS.items() if m[0] == "thread"])
def test_a_kernel_without_its_barrier_goes_wrong_on_fibers(name, tmp_path):
    """The kernels broken on purpose for ThreadSanitizer (a barrier removed), on fibers. The lowest
    thread that may go on always runs first, so warp 0 runs ahead to the next __syncthreads and
    reads what other warps have not yet written: the output is wrong every time, no sanitizer needed."""
    _, kernel, dtype, file, old, new = MUTANTS[name]
    (good, *_), ref = one_case(source_of(kernel), kernel, dtype)
    (bad, *_), _ = one_case(mutant(tmp_path, kernel, file, old, new), kernel, dtype)
    assert np.abs(good - ref).max() < 2e-3
    assert not np.abs(bad - ref).max() < 1e-2  # NaN (shared memory not yet written) or far off


STUCK = r"""
extern "C" __global__ void stuck(float* out) {
    out[threadIdx.x] = threadIdx.x;
    if (threadIdx.x >= 32 && threadIdx.x < 48) __syncwarp();  // half of warp 1 waits for the other half,
    __syncthreads();                                          // which waits here for it: a hang on a GPU
    out[threadIdx.x] += 1.f;
}
"""


def test_a_barrier_only_some_threads_reach_is_an_error(tmp_path):
    source = tmp_path / "stuck.cu"
    source.write_text(STUCK)
    out = np.zeros(64, np.float32)
    with pytest.raises(RuntimeError, match="stuck: a block got stuck at __syncthreads/__syncwarp"):
        cuda_emulator.load(source, "stuck")((1,), (64,), (out,))
    cuda_emulator.load(source, "stuck")((1,), (32,), (out[:32].copy(),))  # one warp: no thread takes the branch


EXITED = r"""
extern "C" __global__ void exited(float* x, float* out) {
    if (threadIdx.x >= 40) return;            // these threads leave; the barrier waits for the rest only
    x[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = x[threadIdx.x] + x[39 - threadIdx.x];  // what another thread wrote before the barrier
}
"""


@pytest.mark.parametrize("options", [(), ("-DCUDA_CPU_THREADS",)], ids=["fibers", "threads"])
def test_threads_that_return_leave_the_barrier(tmp_path, options):
    """As on a GPU (compute capability ≥ 7.0), a thread that has returned no longer counts at a barrier."""
    source = tmp_path / "exited.cu"
    source.write_text(EXITED)
    x, out = np.full(64, -1.0, np.float32), np.full(64, -1.0, np.float32)
    cuda_emulator.load(source, "exited", options)((1,), (64,), (x, out))
    expected = np.full(64, -1.0)
    expected[:40] = 39.0  # i + (39 - i)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("sanitizer,options", [(None, ()), (None, ("-DCUDA_CPU_THREADS", "-DD_H=64")),
                                               ("thread", ()), ("address", ())],
                         ids=["fibers", "threads", "thread-sanitizer", "address-sanitizer"])
def test_builds_read_the_precompiled_shim(sanitizer, options, tmp_path):
    """Every kind of build (fibers, threads, each sanitizer) finds a cuda_cpu.h.gch that g++ takes for
    its flags and defines: `-H` marks a precompiled header it read with "!" (and one it refused with
    "x"), so a change of flags that makes g++ parse the header again for every kernel fails here."""
    if sanitizer and not cuda_emulator.sanitizer_works(sanitizer):
        pytest.skip(f"needs g++'s {sanitizer} sanitizer")
    cpp = tmp_path / "exited.cpp"
    cpp.write_text(f'#include "cuda_cpu.h"\n{EXITED}')
    flags = ("-g", *cuda_emulator.SANITIZER_FLAGS[sanitizer]) if sanitizer else ()
    cmd = cuda_emulator.build_command(cpp, tmp_path / "exited.so", flags, options,
                                      (cuda_emulator.SHIM, cuda_emulator.SHIM / "include"))
    res = subprocess.run([*cmd, "-H", "-Winvalid-pch"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    first = res.stderr.splitlines()[0]
    assert first.startswith("! ") and first.endswith("cuda_cpu.h.gch"), res.stderr[:2000]
