"""The CUDA kernels under g++'s sanitizers, on the CPU emulator: no race, no access out of bounds.

A GPU does not report a missing __syncthreads(): one warp reads a tile another is still writing,
and the output is wrong only on some runs, on some GPUs. Nor does it report a read one row past
the end of K: it returns whatever lies there. The emulator's tests (test_flash_cuda.py) compare
results, so they catch such a bug only when the timing or the memory happens to make it visible.
Here the same tests run with the kernel built by g++ with

  ThreadSanitizer    any two accesses of one address by two threads of a block, one a write, with
                     no barrier ordering them: a race, whether or not the threads' timing made
                     them collide in this run;
  AddressSanitizer   any read or write outside an input array, outside a __shared__ array, or
  (+ UndefinedBehaviorSanitizer)  outside the dynamic shared memory the launch asked for; signed
                     overflow and other undefined arithmetic.

Each sanitizer's runtime must be loaded before Python starts, so the forward kernels' cases run in
one subprocess and the backward's in another (pytest on the chosen cases of test_flash_cuda.py);
the first report ends it, and the test names the case that was running. Then
kernels broken on purpose show that each check catches what it is for.
"""
import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformer.flash import cuda as flash_cuda, cuda_kernels as CK
import cuda_emulator

TESTS = Path(__file__).parent
KERNELS = CK.KERNELS["simt"].source.parent


def _needs(sanitizer):
    return pytest.mark.skipif(not cuda_emulator.sanitizer_works(sanitizer),
                              reason=f"needs g++ and its {sanitizer} sanitizer, working on this machine")


def _available(sanitizer):
    return pytest.param(sanitizer, marks=_needs(sanitizer))


SANITIZERS = [_available("thread"), _available("address")]

# The cases each kernel runs under the sanitizers (test ids of test_flash_cuda.py): tails of
# query and key tiles, b = 2, GQA (backward: and MQA), a causal edge inside a key tile (n_q < n_k),
# d_h = 64 and 128 (so key tiles of 64, 32 and 16), packed rows with padding.
FORWARD_CASES = ["test_kernel_equals_naive_attention[2-3-3-70-133-64-True-{kernel}-{dtype}-",
                 "test_kernel_packed_rows_equal_attention_under_the_document_mask[True-128-{kernel}-{dtype}-"]
BACKWARD_CASES = ["test_backward_kernel_equals_torch_autograd[1-4-2-100-45-32-True-{kernel}-{dtype}-",
                  "test_backward_kernel_equals_torch_autograd[1-3-1-37-90-128-False-{kernel}-{dtype}-",
                  "test_backward_kernel_packed_rows_equal_torch_autograd[True-64-{kernel}-{dtype}-"]
KERNELS_OF = {  # each direction's kernels, all run in one subprocess per sanitizer (one start of Python and torch)
    "forward": [("simt", "float32", FORWARD_CASES), ("simt", "float16", FORWARD_CASES),
                ("tensor_cores", "float16", FORWARD_CASES), ("mma", "float16", FORWARD_CASES),
                ("mma_tf32", "float32", FORWARD_CASES)],
    "backward": [("simt", "float32", BACKWARD_CASES), ("simt", "float16", BACKWARD_CASES),
                 ("mma", "float16", BACKWARD_CASES),
                 # the same loops as "mma" with other operands (3 TF32 products a product: slow to emulate): the GQA causal edge
                 ("mma_tf32", "float32", BACKWARD_CASES[:1])]}


def _report(stderr: str, lines: int = 40) -> str:
    """The sanitizer's report without the C++ standard library's frames."""
    keep = [line for line in stderr.splitlines() if not re.search(r"std::|__invoke|_M_invoke|<null>", line)]
    return "\n".join(keep[:lines])


def _run(sanitizer, args, timeout=600):
    return subprocess.run([sys.executable, *args], env=cuda_emulator.sanitizer_env(sanitizer), cwd=TESTS.parent,
                          capture_output=True, text=True, timeout=timeout)


@functools.cache
def _emulator_test_ids():
    """The ids of test_flash_cuda.py's emulator tests, from pytest's own collection."""
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_flash_cuda.py"], capture_output=True, text=True, cwd=TESTS.parent)
    return [line for line in res.stdout.splitlines() if line.endswith("-cpu]")]


def _selected(cases, kernel, dtype):
    """The node ids of test_flash_cuda.py that start with one of `cases`."""
    chosen = [i for i in _emulator_test_ids()
              if any(i.split("::")[1].startswith(c.format(kernel=kernel, dtype=dtype)) for c in cases)]
    assert len(chosen) == len(cases), (cases, chosen)  # each case names exactly one test
    return chosen


def _running(stdout: str) -> str:
    """The test pytest -v had started when the process ended (the sanitizer's first report ends it)."""
    started = [line.split(" ")[0] for line in stdout.splitlines() if line.startswith("tests/test_flash_cuda.py::")]
    return started[-1] if started else "(none started)"


@pytest.mark.parametrize("sanitizer", SANITIZERS)
@pytest.mark.parametrize("direction", KERNELS_OF)
def test_kernels_run_clean_under_the_sanitizer(sanitizer, direction):
    """Each kernel's chosen emulator tests pass with the kernel built under the sanitizer, which reports nothing."""
    chosen = [i for kernel, dtype, cases in KERNELS_OF[direction] for i in _selected(cases, kernel, dtype)]
    res = _run(sanitizer, ["-m", "pytest", "-v", "-p", "no:xdist", "-p", "no:cacheprovider", *chosen])
    assert res.returncode != cuda_emulator.SANITIZER_EXIT, f"in {_running(res.stdout)}:\n{_report(res.stderr)}"
    assert res.returncode == 0 and f"{len(chosen)} passed" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]


# Kernels broken on purpose: each must be caught by its sanitizer (their results can still be right
# on a CPU, where one thread often finishes before another starts). Blocks run one after another in
# the emulator, so only races inside a block are seen; the one write that blocks share, the
# backward's dQ, is an atomicAdd.
MUTANTS = {
    # the barrier that makes every thread wait until the K_j, V_j tile is staged
    "simt, no __syncthreads after staging K_j, V_j": (
        "thread", "simt", "float32", "flash_attention_fwd.cu",
        "        }\n        __syncthreads();\n        if (!active) continue;", "        }\n        if (!active) continue;"),
    # the barrier between a warp's lanes storing S and reading each other's parts of it
    "tensor_cores, no __syncwarp after storing S": (
        "thread", "tensor_cores", "float16", "flash_attention_fwd_tc.cu",
        "        __syncwarp();                               // the warp's S rows are complete\n", ""),
    # the double buffer: tile j+1 is copied into the buffer of tile j-1 while other warps still read it
    "mma, no __syncthreads before starting tile j+1": (
        "thread", "mma", "float16", "flash_attention_fwd_mma.cu",
        "            __syncthreads();                    // everyone's has; every warp is done with tile j-1\n", ""),
    # the barrier between the threads writing dS_ij (a column each) and reading it (a row each)
    "backward, no __syncthreads before dQ += dS K": (
        "thread", "backward", "float32", "flash_attention_bwd.cu",
        "        __syncthreads();  // dS_ij is complete\n", ""),
    # the same in the mma backward: warps write dSᵀ for their 16 keys, each reads all 64 for dQ
    "backward_mma, no __syncthreads before dQ += dS K": (
        "thread", "backward_mma", "float16", "bwd_mma_block.cuh",
        "        __syncthreads();  // dSᵀ of all 64 keys is in\n", ""),
    # its double buffer: Q_i+1, dO_i+1 are copied into the buffers of tile i-1 while warps still read them
    "backward_mma, no __syncthreads before starting tile i+1": (
        "thread", "backward_mma", "float16", "bwd_mma_block.cuh",
        "        __syncthreads();      // everyone's has; every warp is done with tile i-1 and its dSᵀ\n", ""),
    # the bound on the last key tile: a tail of n_k past the end of K and V
    "simt, key tile read past n_k": (
        "address", "simt", "float32", "flash_attention_fwd.cu",
        "const bool in = j0 + r < n_k;", "const bool in = true;"),
}


def mutant(tmp_path, kernel, file, old, new):
    """A copy of the kernels' folder with one of its files changed (a kernel or a header it includes),
    and the copy of `kernel`'s source in it, which the emulator builds with the headers beside it."""
    folder = tmp_path / "kernels"
    shutil.copytree(KERNELS, folder)
    text = (folder / file).read_text()
    assert text.count(old) == 1, f"{file} no longer holds the line this mutant removes"
    (folder / file).write_text(text.replace(old, new))
    return folder / source_of(kernel).name


def one_case(source, kernel, dtype, shared_scale=1.0, options=(), heads=None):
    """One case (GQA, causal, n = 133: partial last query and key tiles; b = 2, 4 heads for the forward,
    b = 1, 2 heads for the slower backward, or `heads` = (b, h, h_kv)) of `kernel` (a forward kernel's
    name, "backward", "backward_mma" or "backward_mma_tf32") built from `source` with extra `options`,
    launched with `shared_scale` times the dynamic shared memory of its launch plan. Returns everything
    the kernel wrote (O, lse; or dQ, dK, dV) and the float64 reference of the first."""
    import test_flash_cuda as tf
    backward = kernel.startswith("backward")
    heads = heads or ((1, 2, 1) if backward else (2, 4, 2))
    q, k, v = tf._inputs(dtype, *heads, 133, 133, 64)
    ref, ref_lse = tf._reference(q, k, v, True)
    if backward:
        plan = CK.backward_launch_plan(q.shape, k.shape, dtype, causal=True, scale=None,
                                       kernel=kernel.removeprefix("backward").removeprefix("_") or "simt")
        dout = np.random.default_rng(1).standard_normal(q.shape).astype(dtype)
        L, D = CK.backward_rows(dout, ref.astype(dtype), ref_lse.astype(np.float32))
        dq = np.zeros(q.shape, np.float32)  # added to
        dk, dv = (np.full(q.shape[:2] + k.shape[2:], np.nan, np.float32) for _ in range(2))
        args, outputs = (q, k, v, dout, np.ascontiguousarray(L), np.ascontiguousarray(D), dq, dk, dv), (dq, dk, dv)
        ref = tf._torch_gradients(dout, q, k, v, True)[0]
    else:
        plan = CK.launch_plan(q.shape, k.shape, dtype, causal=True, scale=None, kernel=kernel)
        outputs = (np.full_like(q, np.nan), np.full(q.shape[:3], np.nan, np.float32))  # O, lse
        args = (q, k, v, *outputs)
    fn = cuda_emulator.load(Path(source), plan.kernel.name, plan.options + tuple(options))
    fn(plan.grid, plan.block, (*args, *plan.scalars, flash_cuda.NULL, flash_cuda.NULL),
       shared_bytes=int(plan.shared_bytes * shared_scale))
    return outputs, ref


def run_cases(*cases):
    """one_case for each (source, kernel, dtype, shared_scale) in turn, in the sanitizer's subprocess:
    prints, as each ends, a line with its largest error against the reference. The sanitizer's first
    report ends the process, so the cases whose lines were printed ran clean."""
    for source, kernel, dtype, shared_scale in cases:
        (out, *_), ref = one_case(source, kernel, dtype, shared_scale)
        print(json.dumps({"error": float(np.nanmax(np.abs(out.astype(np.float64) - ref)))}), flush=True)


def _cases_in_subprocess(sanitizer, *cases):
    """run_cases(*cases) in one process under `sanitizer`: one start of Python (numpy, torch) under its
    runtime for all of them. A case: (source, kernel, dtype) or (source, kernel, dtype, shared_scale)."""
    cases = [(str(c[0]), *c[1:3], c[3] if len(c) > 3 else 1.0) for c in cases]
    code = (f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'support')!r}]; import test_kernel_sanitizers as t; "
            f"t.run_cases(*{cases!r})")
    return _run(sanitizer, ["-c", code])


def _errors(res) -> list[float]:
    """The largest errors the cases that ran clean printed, in order."""
    return [json.loads(line)["error"] for line in res.stdout.splitlines() if line.startswith('{"error"')]


def source_of(kernel):
    if kernel.startswith("backward"):
        return CK.BACKWARD_KERNELS[kernel.removeprefix("backward").removeprefix("_") or "simt"].source
    return CK.KERNELS[kernel].source


@pytest.mark.parametrize("sanitizer,kernel,dtype,file,old,new",
                         [pytest.param(*m, marks=_needs(m[0]), id=name) for name, m in MUTANTS.items()])
def test_sanitizer_catches_a_broken_kernel(sanitizer, kernel, dtype, file, old, new, tmp_path):
    broken = (mutant(tmp_path, kernel, file, old, new), kernel, dtype)
    # thread: the unbroken kernel first, in the same harness and process, must run clean (its line printed)
    cases = [(source_of(kernel), kernel, dtype), broken] if sanitizer == "thread" else [broken]
    res = _cases_in_subprocess(sanitizer, *cases)
    errors = _errors(res)
    assert len(errors) == len(cases) - 1 and all(e < 2e-3 for e in errors), _report(res.stderr)
    assert res.returncode == cuda_emulator.SANITIZER_EXIT, res.stdout[-2000:] + res.stderr[-2000:]
    expected = {"thread": "ThreadSanitizer: data race", "address": "AddressSanitizer: heap-buffer-overflow"}[sanitizer]
    assert expected in res.stderr, _report(res.stderr)
    assert file in res.stderr or "flash_attention" in res.stderr  # the report points into the kernel


@pytest.mark.parametrize("sanitizer", [_available("address")])
def test_address_sanitizer_catches_too_little_shared_memory(sanitizer):
    """The mma kernel launched with 3/4 of the dynamic shared memory its tiles need: on a GPU it
    would read and write past its block's allocation; the emulator's buffer is exactly the launch's
    size, so AddressSanitizer stops it. With the full size it runs clean."""
    source = CK.KERNELS["mma"].source
    res = _cases_in_subprocess(sanitizer, (source, "mma", "float16"), (source, "mma", "float16", 0.75))
    errors = _errors(res)
    assert len(errors) == 1 and errors[0] < 2e-3, _report(res.stderr)  # the full size ran clean
    assert res.returncode == cuda_emulator.SANITIZER_EXIT, res.stdout[-2000:] + res.stderr[-2000:]
    assert "AddressSanitizer: heap-buffer-overflow" in res.stderr and "SharedBuffer" in res.stderr, _report(res.stderr)


@pytest.mark.skipif(cuda_emulator.CXX is None, reason="needs g++")
def test_sanitizer_name_is_checked():
    with pytest.raises(ValueError, match="sanitizer must be one of .*'thread'.*got 'memory'"):
        cuda_emulator.load(KERNELS / "flash_attention_fwd.cu", "flash_attention_fwd", sanitizer="memory")


def _small_kernel(sanitizer, source, name, threads, args, options=()):
    """Launch kernel `name` of the file `source` on one block of `threads` threads, in the
    sanitizer's subprocess. args: the Python text of its argument tuple."""
    code = (f"import sys, numpy as np; sys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'support')!r}]; import cuda_emulator; "
            f"cuda_emulator.load({str(source)!r}, {name!r}, {tuple(options)!r})((1,), ({threads},), {args})")
    return _run(sanitizer, ["-c", code])


OVERFLOW = r"""
extern "C" __global__ void row_offset(float* out, int n) {
    const int row = threadIdx.x;
    const int offset = row * n;  // int × int: past 2^31 for the later rows when n is large
    out[threadIdx.x] = float(offset);
}
"""


@pytest.mark.parametrize("sanitizer", [_available("address")])
def test_undefined_behaviour_sanitizer_catches_an_index_that_overflows_int(sanitizer, tmp_path):
    """The offset of a row computed in int, as `(size_t)` before the product avoids in the kernels:
    fine for n = 2^20, undefined (and on a GPU silently negative) for n = 2^30."""
    source = tmp_path / "row_offset.cu"
    source.write_text(OVERFLOW)
    small = _small_kernel(sanitizer, source, "row_offset", 4, f"(np.zeros(4, np.float32), np.int32({2 ** 20}))")
    assert small.returncode == 0, _report(small.stderr)
    res = _small_kernel(sanitizer, source, "row_offset", 4, f"(np.zeros(4, np.float32), np.int32({2 ** 30}))")
    assert res.returncode == cuda_emulator.SANITIZER_EXIT, res.stderr[-2000:]
    assert "signed integer overflow" in res.stderr, _report(res.stderr)


PUBLISH = r"""
extern "C" __global__ void publish(float* out) {
    __shared__ float x[32];
    x[threadIdx.x] = threadIdx.x;  // each lane its own slot
    const float token = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);  // swaps registers only
#ifdef WITH_SYNCWARP
    __syncwarp();                  // this is what makes the slots visible to the other lanes
#endif
    out[threadIdx.x] = x[31 - threadIdx.x] + 0.f * token;  // another lane's slot
}
"""


@pytest.mark.parametrize("sanitizer", [_available("thread")])
def test_a_shuffle_is_not_taken_for_a_memory_barrier(sanitizer, tmp_path):
    """A lane reads another lane's shared-memory write with only a shuffle between them: a race on
    a GPU, where a shuffle orders no memory. The emulator's shuffle goes through barriers, which
    ThreadSanitizer is told to ignore, so the race is reported; with __syncwarp it is not."""
    source = tmp_path / "publish.cu"
    source.write_text(PUBLISH)
    out = "(np.zeros(32, np.float32),)"
    fenced = _small_kernel(sanitizer, source, "publish", 32, out, options=("-DWITH_SYNCWARP",))
    assert fenced.returncode == 0, _report(fenced.stderr)
    res = _small_kernel(sanitizer, source, "publish", 32, out)
    assert res.returncode == cuda_emulator.SANITIZER_EXIT, res.stderr[-2000:]
    assert "ThreadSanitizer: data race" in res.stderr and "publish" in res.stderr, _report(res.stderr)
