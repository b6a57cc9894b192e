"""The CUDA FlashAttention kernel equals naive attention: on the CPU always, on a GPU when there is one.

CI has no GPU. There the kernel's own CUDA C source still runs: `cuda_emulator` compiles it with
g++ against a small CUDA-on-the-CPU shim (one fiber per CUDA thread, switched at __syncthreads
and __syncwarp), with the launch plan of `CK.launch_plan`, and the results are compared with
naive attention and a float64 log-sum-exp. The nvcc compile check runs wherever nvcc is installed;
the CuPy comparisons skip unless CuPy and a device are present.
"""
import json
import shutil
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

import transformer as T
from transformer.flash import cuda as flash_cuda, cuda_checks as flash_checks, cuda_kernels as CK
import cuda_emulator
import nvrtc


def _has_gpu():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


GPU = _has_gpu()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs CuPy and an NVIDIA GPU")


def _ptxas(plan, tmp_path, options=None):
    """nvcc down to machine code for an H100 (sm_90): ptxas checks registers and shared memory too.
    It compiles the text CuPy is given (headers pasted in), from a folder where no header is."""
    source = tmp_path / plan.kernel.source.name
    source.write_text(flash_cuda.kernel_source(plan.kernel.source))
    return subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-Xptxas", "-v", *(options or plan.options),
                           "-o", str(tmp_path / "k.cubin"), str(source)], capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("kernel,d_h,dtype", [  # the unrolled loops compile slowly: the extremes of each kernel
    ("simt", 32, "float16"), ("simt", 128, "float32"),  # (SIMT: its shared tiles are float32 for either dtype)
    ("tensor_cores", 32, "float16"), ("tensor_cores", 128, "float16"), ("mma", 32, "float16"), ("mma", 64, "float16"),
    ("mma", 128, "float16"),
    ("mma_tf32", 32, "float32"), ("mma_tf32", 128, "float32")])
def test_kernel_compiles_for_h100(kernel, d_h, dtype, tmp_path):
    """Every launch plan builds: the static shared memory fits 48 KiB, and the tensor-core kernels spill nothing."""
    plan = CK.launch_plan((1, 1, 1, d_h), (1, 1, 1, d_h), dtype, causal=False, scale=None, kernel=kernel)
    res = _ptxas(plan, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr, res.stderr
    assert f"Compiling entry function '{plan.kernel.name}'" in res.stderr  # extern "C": the name CuPy looks up
    if kernel != "simt":
        assert "0 bytes spill stores" in res.stderr, res.stderr
    else:  # the compiler's own count of the static shared memory equals the formula
        assert f"{CK.simt_shared_bytes(d_h)} bytes smem" in res.stderr, res.stderr
        assert CK.simt_shared_bytes(d_h) <= 48 * 1024


@pytest.mark.skipif(not nvrtc.available(), reason="needs NVRTC and the CUDA headers (requirements-dev.txt)")
@pytest.mark.parametrize("kernel", list(CK.KERNELS))
def test_kernel_compiles_as_cupy_compiles_it(kernel):
    """CuPy compiles with NVRTC, not nvcc: no <math.h>, no host functions. Every kernel, for the oldest
    GPU it allows (CUDA 13 builds sm_75 and later) and for an H100, with CuPy's own options. At d_h = 32:
    what NVRTC accepts does not depend on d_h, and the unrolled loops compile fastest there (the SIMT
    kernel took 3.6 times as long at d_h = 64); every head size is compiled by nvcc above."""
    kern = CK.KERNELS[kernel]
    plan = CK.launch_plan((1, 1, 1, 32), (1, 1, 1, 32), kern.dtypes[0], causal=False, scale=None, kernel=kernel)
    for arch in sorted({max(75, kern.min_compute_capability), 90}):
        ok, log = nvrtc.compile_cuda(flash_cuda.kernel_source(kern.source), (*plan.options, f"-arch=sm_{arch}"),
                                     kern.source.name)
        assert ok and "warning" not in log, f"sm_{arch}:\n{log}"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("kernel,d_h,dtype", [("simt", 32, "float32"), ("simt", 128, "float32"),
                                              ("simt", 128, "float16"), ("mma", 32, "float16"),
                                              ("mma", 64, "float16"), ("mma", 128, "float16"),
                                              ("mma_tf32", 32, "float32"), ("mma_tf32", 128, "float32")])
def test_backward_kernel_compiles_for_h100(kernel, d_h, dtype, tmp_path):
    """The backward kernels build for an H100. "simt": ptxas's count of its static shared memory
    equals the formula and stays within 48 KiB. "mma", "mma_tf32": no register spills, and no static
    shared memory beside the dynamic bytes the host gives it."""
    plan = CK.backward_launch_plan((1, 1, 1, d_h), (1, 1, 1, d_h), dtype, causal=False, scale=None, kernel=kernel)
    res = _ptxas(plan, tmp_path)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
    assert f"Compiling entry function '{plan.kernel.name}'" in res.stderr
    if kernel == "simt":
        assert f"{CK.backward_shared_bytes(d_h)} bytes smem" in res.stderr, res.stderr
        assert CK.backward_shared_bytes(d_h) <= 48 * 1024
    else:
        assert "0 bytes spill stores" in res.stderr and "bytes smem" not in res.stderr, res.stderr


@pytest.mark.skipif(not nvrtc.available(), reason="needs NVRTC and the CUDA headers (requirements-dev.txt)")
@pytest.mark.parametrize("kernel,dtype", [("simt", "float32"), ("simt", "float16"), ("mma", "float16"),
                                          ("mma_tf32", "float32")])
def test_backward_kernel_compiles_as_cupy_compiles_it(kernel, dtype):
    plan = CK.backward_launch_plan((1, 1, 1, 64), (1, 1, 1, 64), dtype, causal=False, scale=None, kernel=kernel)
    for arch in sorted({max(75, plan.kernel.min_compute_capability), 90}):
        ok, log = nvrtc.compile_cuda(flash_cuda.kernel_source(plan.kernel.source), (*plan.options, f"-arch=sm_{arch}"),
                                     plan.kernel.source.name)
        assert ok and "warning" not in log, f"sm_{arch}:\n{log}"


def _headers_without_crt(tmp_path):
    """The CUDA include folder as `pip install cupy-cuda13x[ctk]` leaves it: the wheels' headers
    less crt/, which only `nvidia-cuda-crt` brings (links to the real files, crt/ left out)."""
    folder = tmp_path / "include"
    folder.mkdir()
    for entry in Path(nvrtc.include_dirs()[0]).iterdir():
        if entry.name != "crt":
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.mark.skipif(not nvrtc.available(), reason="needs NVRTC and the CUDA headers (requirements-dev.txt)")
def test_wmma_kernel_finds_crt_headers_where_cupys_folder_lacks_them(tmp_path):
    """<mma.h> reads crt/mma.h; without it NVRTC stops. `header_options` adds a folder that has it."""
    kern = CK.KERNELS["tensor_cores"]
    source = flash_cuda.kernel_source(kern.source)
    options = (*CK.launch_plan((1, 1, 1, 64), (1, 1, 1, 64), "float16", causal=False, scale=None,
                                       kernel="tensor_cores").options, "-arch=sm_90")
    bare = _headers_without_crt(tmp_path)
    ok, log = nvrtc.compile_cuda(source, options, kern.source.name, includes=(bare,))
    assert not ok and 'cannot open source file "crt/mma.h"' in log
    extra = flash_cuda.header_options(source, bare, [tmp_path / "nowhere", Path(nvrtc.include_dirs()[0])])
    assert extra == (f"-I{nvrtc.include_dirs()[0]}",)
    ok, log = nvrtc.compile_cuda(source, (*options, *extra), kern.source.name, includes=(bare,))
    assert ok and "warning" not in log, log


def _folder_with_crt(folder):
    """A made-up include folder holding (an empty) crt/mma.h."""
    (folder / "crt").mkdir(parents=True)
    (folder / "crt" / "mma.h").write_text("")
    return folder


def test_header_options_add_a_folder_only_where_needed(tmp_path):
    with_crt, without = _folder_with_crt(tmp_path / "toolkit" / "include"), tmp_path / "wheels" / "include"
    without.mkdir(parents=True)
    wmma = flash_cuda.kernel_source(CK.KERNELS["tensor_cores"].source)
    mma = flash_cuda.kernel_source(CK.KERNELS["mma"].source)
    assert flash_cuda.header_options(wmma, with_crt, []) == ()           # CuPy's own folder has it
    assert flash_cuda.header_options(mma, without, []) == ()             # only <cuda_fp16.h>: nothing to add
    assert flash_cuda.header_options(wmma, without, [without, with_crt]) == (f"-I{with_crt}",)
    with pytest.raises(RuntimeError, match=r"crt/mma\.h.*nvidia-cuda-crt.*CUDA_PATH.*kernel='mma'"):
        flash_cuda.header_options(wmma, without, [without])
    with pytest.raises(RuntimeError, match=str(without)):
        flash_cuda.header_options(wmma, without, [])


class _FakeArray:
    """Just what flash_attention_cuda reads of a CuPy array."""
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.flags = types.SimpleNamespace(c_contiguous=True)
        self.data = types.SimpleNamespace(ptr=256)


@pytest.fixture
def stand_in_cupy(monkeypatch, tmp_path):
    """install(RawKernel, compute_capability, toolkits): CuPy stood in for, with the given RawKernel
    class, one GPU of that compute capability, CUDA headers in tmp_path/wheels (without crt/) and
    `toolkits` as the other header folders. Built kernels and device facts are forgotten before and
    after, so none leaks into or out of the test."""
    def install(raw_kernel, compute_capability, toolkits):
        cuda = types.SimpleNamespace(Device=lambda i: types.SimpleNamespace(compute_capability=str(compute_capability)),
                                     get_cuda_path=lambda: str(tmp_path / "wheels"), get_device_id=lambda: 0)
        fake = types.SimpleNamespace(RawKernel=raw_kernel, cuda=cuda, ndarray=_FakeArray, float32=np.float32,
                                     empty_like=lambda a: _FakeArray(a.shape, a.dtype), empty=_FakeArray)
        monkeypatch.setattr(flash_cuda, "import_cupy", lambda: fake)
        monkeypatch.setattr(flash_checks, "import_cupy", lambda: fake)  # the door's "a CuPy array" check
        monkeypatch.setattr(flash_cuda, "toolkit_include_dirs", lambda: toolkits)

    caches = (flash_cuda.compiled, flash_cuda.device_facts)
    for cache in caches:
        cache.cache_clear()
    yield install
    for cache in caches:
        cache.cache_clear()


def test_compiling_adds_the_crt_folder_and_builds_at_once(stand_in_cupy, tmp_path):
    """The host side of `compiled` with CuPy stood in for: the -I option reaches the compiler, the
    kernel is built before its first launch (so a compile error surfaces there), and a block past
    48 KiB of shared memory opts in to it."""
    seen = {}

    class RawKernel:
        def __init__(self, source, name, options):
            seen.update(name=name, options=options, pasted='#include "' not in source)

        def compile(self):
            seen["compiled"] = True

    toolkit = _folder_with_crt(tmp_path / "toolkit" / "include")
    stand_in_cupy(RawKernel, 90, [toolkit])
    plan = CK.launch_plan((1, 1, 1, 64), (1, 1, 1, 64), "float16", causal=False, scale=None,
                                  kernel="tensor_cores")
    fn = flash_cuda.compiled(plan.kernel, plan.options, plan.shared_bytes, 0)
    assert seen == {"name": "flash_attention_fwd_tc", "options": (*plan.options, f"-I{toolkit}"),
                    "pasted": True, "compiled": True}
    assert plan.shared_bytes > 48 * 1024 and fn.max_dynamic_shared_size_bytes == plan.shared_bytes


@pytest.mark.parametrize("dtype,cc,headers,expected", [
    ("float32", 90, True, "mma_tf32"), ("float32", 80, False, "mma_tf32"),  # H100, A100: 3xTF32 on tensor cores
    ("float32", 75, True, "simt"), ("float32", 60, False, "simt"),
    ("float16", 90, True, "mma"),           # H100: the register kernel, the fastest there
    ("float16", 90, False, "mma"),          # H100 with pip's CUDA wheels less crt/: mma needs no <mma.h>
    ("float16", 80, False, "mma"),          # A100
    ("float16", 75, True, "tensor_cores"),  # T4: WMMA, too old for mma.sync.m16n8k16 with cp.async
    ("float16", 75, False, "simt"),         # T4 without the headers
    ("float16", 60, True, "simt")])         # P100: no tensor cores
def test_auto_kernel_follows_the_gpu_and_the_headers(dtype, cc, headers, expected):
    assert CK.auto_kernel(dtype, cc, headers) == expected
    chosen = CK.KERNELS[expected]
    assert dtype in chosen.dtypes and cc >= chosen.min_compute_capability  # never one the GPU refuses


@pytest.mark.parametrize("cc,crt_somewhere,expected", [
    (90, False, "flash_attention_fwd_mma"), (75, True, "flash_attention_fwd_tc"), (75, False, "flash_attention_fwd")])
def test_auto_runs_a_kernel_that_compiles_on_this_gpu(stand_in_cupy, tmp_path, cc, crt_somewhere, expected):
    """flash_attention_cuda's host side with CuPy stood in for: where CuPy's CUDA folder lacks
    crt/mma.h and no other folder has it, float16 "auto" builds and launches a kernel that does
    not include <mma.h> instead of failing to compile."""
    launched = {}

    class RawKernel:
        def __init__(self, source, name, options):
            assert "#include <mma.h>" not in source or any(o.startswith("-I") for o in options), name
            self.name = name

        def compile(self):
            pass

        def __call__(self, grid, block, args, shared_mem):
            launched.update(name=self.name, grid=grid, block=block, shared_mem=shared_mem)

    toolkits = [_folder_with_crt(tmp_path / "toolkit" / "include")] if crt_somewhere else [tmp_path / "nowhere"]
    stand_in_cupy(RawKernel, cc, toolkits)
    q, kv = _FakeArray((1, 4, 100, 64), "float16"), _FakeArray((1, 2, 100, 64), "float16")
    out = flash_cuda.flash_attention_cuda(q, kv, kv, causal=True)
    assert out.shape == q.shape and out.dtype == np.float16
    br = {"flash_attention_fwd_mma": 128}.get(expected, 64)  # query rows per block: mma takes 32 a warp
    assert launched["name"] == expected and launched["grid"] == (-(-100 // br), 4)  # ⌈100 / Br⌉ query tiles, b·h = 4


def test_toolkit_include_dirs_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "a"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "b"))
    dirs = flash_cuda.toolkit_include_dirs()
    assert dirs[:3] == [tmp_path / "a" / "include", tmp_path / "b" / "include", Path("/usr/local/cuda/include")]
    if nvrtc.available():  # the nvidia-cuda-crt wheel of requirements-dev.txt is found through its metadata
        assert any((d / "crt" / "mma.h").is_file() for d in dirs[3:])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("kernel", ["tensor_cores", "mma", "mma_tf32", "backward_mma", "backward_mma_tf32"])
def test_tensor_core_kernel_refuses_too_little_shared_memory(kernel, tmp_path):
    """The kernel's static_assert holds the host's byte count to its own layout."""
    if kernel.startswith("backward_"):
        kern = kernel.removeprefix("backward_")
        plan = CK.backward_launch_plan((1, 1, 1, 64), (1, 1, 1, 64), CK.BACKWARD_KERNELS[kern].dtypes[0], causal=False,
                                       scale=None, kernel=kern)
    else:
        dtype = CK.KERNELS[kernel].dtypes[0]
        plan = CK.launch_plan((1, 1, 1, 64), (1, 1, 1, 64), dtype, causal=False, scale=None, kernel=kernel)
    small = tuple(o if not o.startswith("-DSMEM_BYTES") else f"-DSMEM_BYTES={plan.shared_bytes - 128}"
                  for o in plan.options)
    res = _ptxas(plan, tmp_path, small)
    assert res.returncode != 0 and "SMEM_BYTES" in res.stderr


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_without_gpu_the_error_is_clear():
    q = np.zeros((1, 1, 4, 64), np.float32)
    with pytest.raises(RuntimeError, match="backend 'cupy'"):
        flash_cuda.flash_attention_cuda(q, q, q)
    with pytest.raises(RuntimeError, match="backend 'cupy'"):
        flash_cuda.flash_attention_backward_cuda(q, q, q, q, q, q[..., 0])


CASES = [  # b, h, h_kv, n_q, n_k, d_h: MHA/GQA/MQA, n not a multiple of Br (64, 128) or Bc (32, 64), n_q ≠ n_k
    (1, 1, 1, 1, 1, 64), (2, 4, 4, 100, 100, 64), (1, 8, 2, 257, 257, 32),
    (1, 6, 1, 1, 300, 128), (2, 3, 3, 70, 133, 64), (1, 2, 1, 130, 64, 64),
    (1, 4, 2, 16, 128, 64)]  # 16 queries after 112 cached keys: the causal edge falls inside a key tile


def _inputs(dtype, b, h, h_kv, n_q, n_k, d_h):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype(dtype)
                 for s in ((b, h, n_q, d_h), (b, h_kv, n_k, d_h), (b, h_kv, n_k, d_h)))


def _reference(q, k, v, causal, keep=None):
    """Naive attention and log Σ_j e^(s_ij), in float64 on the host (rows that see nothing: 0, -inf).
    keep: (b, n_q, n_k), False where a query may not see a key."""
    h, h_kv, n_q, n_k = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    k, v = (np.repeat(t, h // h_kv, axis=1) for t in (k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])  # [b, h, n_q, n_k]
    if causal:  # query row i sits at position i + n_k - n_q
        s = np.where(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + n_k - n_q, s, -np.inf)
    if keep is not None:
        s = np.where(keep[:, None], s, -np.inf)
    with np.errstate(invalid="ignore"):  # a NaN or inf input: its rows turn NaN, as torch's softmax
        m = s.max(-1, keepdims=True)  # [b, h, n_q, 1]
        m = np.where(m == -np.inf, 0.0, m)
        e = np.exp(s - m)
        l = e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(l == 0, 0.0, (e @ v) / l)
        lse = np.where(l[..., 0] == 0, -np.inf, np.log(l[..., 0]) + m[..., 0])
    return out, lse


def run_on_cpu(q, k, v, *, causal, scale=None, kernel="auto", defines=(), doc=None):
    """flash_attention_cuda's launch, with the kernel run by the CPU emulator on NumPy arrays
    (`defines`: extra -D options, to build a variant of the kernel)."""
    flash_checks.check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), kernel)
    plan = CK.launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale, kernel=kernel)
    fn = cuda_emulator.load(plan.kernel.source, plan.kernel.name, plan.options + tuple(defines))
    out = np.full_like(q, np.nan)  # NaN: a row the kernel forgets to write fails the test
    lse = np.full(q.shape[:3], np.nan, np.float32)
    packed = (flash_cuda.NULL,) * 2 if doc is None else CK.packed_row_args(doc, plan.kernel.block_q)
    fn(plan.grid, plan.block, (q, k, v, out, lse, *plan.scalars, *packed), shared_bytes=plan.shared_bytes)
    return out, lse


# (kernel, dtype, tolerance): float16 inputs round q, k, v, and P before P V on tensor cores
KERNEL_DTYPES = [("simt", "float32", 2e-5), ("simt", "float16", 2e-3), ("tensor_cores", "float16", 2e-3),
                 ("mma", "float16", 2e-3), ("mma_tf32", "float32", 2e-5)]


def run_on_gpu(q, k, v, *, causal, scale=None, kernel="auto", doc=None):
    """flash_attention_cuda on the device, results back as NumPy arrays."""
    import cupy
    doc = None if doc is None else cupy.asarray(doc)
    out, lse = flash_cuda.flash_attention_cuda(*(cupy.asarray(t) for t in (q, k, v)), causal=causal, scale=scale,
                                               return_lse=True, kernel=kernel, doc=doc)
    return T.to_numpy(out), T.to_numpy(lse)


needs_gxx = pytest.mark.skipif(cuda_emulator.CXX is None, reason="needs g++")
# where the kernels run: their CUDA C on the CPU (any machine with g++), and a GPU (where present)
WHERE = [pytest.param(run_on_cpu, id="cpu", marks=needs_gxx), pytest.param(run_on_gpu, id="gpu", marks=needs_gpu)]


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,h_kv,n_q,n_k,d_h", CASES)
def test_kernel_equals_naive_attention(run, kernel, dtype, tol, causal, b, h, h_kv, n_q, n_k, d_h):
    q, k, v = _inputs(dtype, b, h, h_kv, n_q, n_k, d_h)
    out, lse = run(q, k, v, causal=causal, kernel=kernel)
    ref, ref_lse = _reference(q, k, v, causal)
    assert out.dtype == q.dtype
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, ref_lse, atol=tol * 10, rtol=tol)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
def test_kernel_rows_that_see_no_key_and_huge_logits(run, kernel, dtype, tol):
    """n_q > n_k causal: the first rows see no key (O = 0, lse = -inf); scores of ~1e4 do not overflow."""
    q, k, v = _inputs(dtype, 1, 2, 2, 70, 5, 32)
    q *= 60.0  # scores ~ 60·32/√32 ≈ 340 and more: e^s overflows float32 (and float16) without the running max
    out, lse = run(q, k, v, causal=True, kernel=kernel)
    ref, ref_lse = _reference(q, k, v, True)
    assert np.all(out[:, :, :65] == 0) and np.all(lse[:, :, :65] == -np.inf)
    assert np.isfinite(out).all() and np.isfinite(lse[:, :, 65:]).all()
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, ref_lse, rtol=tol)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_kernel_nan_or_inf_input_gives_nan_rows(run, kernel, dtype, tol, bad):
    """A NaN or inf in one query row, and in one key, turn NaN exactly the rows of O (and lse) that
    torch's softmax turns NaN: never a silent 0 or a finite number. Causal, so the rows before the bad
    key do not see it and stay equal to the reference."""
    q, k, v = _inputs(dtype, 1, 2, 2, 80, 80, 64)
    q[0, 0, 70, 5] = bad  # query row 70 of head 0
    k[0, 1, 40, 3] = bad  # key 40 of head 1: rows 40..79 see it
    with np.errstate(invalid="ignore", over="ignore"):
        out, lse = run(q, k, v, causal=True, kernel=kernel)
    ref, ref_lse = _reference(q, k, v, True)
    bad_rows = np.isnan(ref).any(-1)  # [b, h, n_q]
    assert bad_rows[0, 0, 70] and bad_rows[0, 1, 40:].any() and not bad_rows[0, 1, :40].any()
    if np.isnan(bad):  # an inf key is only NaN for rows whose score is +inf (-inf: probability 0)
        assert bad_rows[0, 1, 40:].all()
    if kernel == "mma_tf32" and np.isinf(bad):
        # 3xTF32 splits ∞ into hi = ∞ and lo = ∞ - ∞ = NaN, and its correction products multiply ∞ by
        # small parts of either sign: every row that sees an inf input turns NaN, a superset of torch's
        bad_rows = np.zeros_like(bad_rows)
        bad_rows[0, 0, 70] = bad_rows[0, 1, 40:] = True
    assert np.array_equal(np.isnan(out).all(-1), bad_rows) and np.array_equal(np.isnan(out).any(-1), bad_rows)
    assert np.array_equal(np.isnan(lse), bad_rows)
    np.testing.assert_allclose(out[~bad_rows].astype(np.float32), ref[~bad_rows], atol=tol, rtol=tol)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
def test_kernel_row_of_all_minus_inf_scores_sees_no_key(run, kernel, dtype, tol):
    """An inf in q whose every score is -inf (each key's feature negative): the row counts as one that
    saw no key, O = 0 and lse = -inf, as the NumPy paths and softmax's all-masked rows; other rows
    as the reference. mma_tf32 splits ∞ into ∞ + NaN, so there the row is NaN."""
    q, k, v = _inputs(dtype, 1, 2, 1, 40, 70, 64)
    k[..., 0] = -np.abs(k[..., 0]) - 0.5  # every key's feature 0 negative
    q[0, 1, 7, 0] = np.inf  # query row 7 of head 1: every score -inf
    with np.errstate(invalid="ignore", over="ignore"):
        out, lse = run(q, k, v, causal=False, kernel=kernel)
    ref, ref_lse = _reference(q, k, v, False)
    assert np.all(ref[0, 1, 7] == 0) and ref_lse[0, 1, 7] == -np.inf
    if kernel == "mma_tf32":
        assert np.isnan(out[0, 1, 7]).all() and np.isnan(lse[0, 1, 7])
    else:
        assert np.all(out[0, 1, 7] == 0) and lse[0, 1, 7] == -np.inf
    rest = np.ones(q.shape[:3], bool)
    rest[0, 1, 7] = False
    np.testing.assert_allclose(out[rest].astype(np.float32), ref[rest], atol=tol, rtol=tol)
    np.testing.assert_allclose(lse[rest], ref_lse[rest], atol=tol * 10, rtol=tol)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
@pytest.mark.parametrize("scale", [0.5, -0.3, 0.0])
def test_kernel_honours_scale(run, kernel, dtype, tol, scale):
    """Any real scale, causal: a negative one reverses which key gets the most weight, and 0 gives
    each row the mean of the values it sees."""
    q, k, v = _inputs(dtype, 1, 2, 1, 40, 40, 64)
    out, lse = run(q, k, v, causal=True, scale=scale, kernel=kernel)
    ref, ref_lse = _reference(q.astype(np.float64) * (scale * np.sqrt(64)), k, v, True)  # scale = (scale·√d_h) / √d_h
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, ref_lse, atol=tol * 10, rtol=tol)


def _packed_doc(lengths, n):  # document lengths -> (n,) index of each slot's document, -1 after them
    return np.array([i for i, size in enumerate(lengths) for _ in range(size)] + [-1] * (n - sum(lengths)))


def _same_document(doc):  # (b, n) -> (b, n, n): query i may see key j, written out pair by pair
    b, n = doc.shape
    return np.array([[[doc[r, i] == doc[r, j] and doc[r, i] >= 0 for j in range(n)] for i in range(n)]
                     for r in range(b)])


def test_packed_row_args_spans_are_the_keys_a_query_tile_may_see():
    """DOC_KEYS[r, t] = [first, end) is the first and one past the last key that any query of tile t
    may see (from the pairwise document mask); [n, 0) where it sees none. DOC keeps the same-document
    relation and the padding, whatever the indices (here up to 10^12, beyond int32)."""
    rng = np.random.default_rng(7)
    docs = [np.stack([_packed_doc([50, 30, 60], 150), _packed_doc([7, 100, 43], 150)]),  # packed, padding
            rng.integers(-1, 4, (3, 150)),  # documents scattered over the row
            np.where(rng.random((2, 150)) < 0.5, -1, rng.integers(0, 10**12, (2, 150))),
            np.full((1, 150), -1)]  # a row of padding only
    for doc in docs:
        for block_q in (16, 64):
            dense, spans = CK.packed_row_args(doc, block_q)
            assert dense.dtype == spans.dtype == np.int32
            assert np.array_equal(_same_document(dense), _same_document(doc)) and np.array_equal(dense < 0, doc < 0)
            seen = _same_document(doc)  # [b, n, n]
            for r in range(doc.shape[0]):
                for t in range(-(-150 // block_q)):
                    keys = np.flatnonzero(seen[r, t * block_q:(t + 1) * block_q].any(axis=0))
                    expected = [keys[0], keys[-1] + 1] if keys.size else [150, 0]
                    assert spans[r, t].tolist() == expected, (r, t)
    # by hand: documents of 50, 30 and 60 slots, then 10 of padding, in tiles of 64 queries
    assert CK.packed_row_args(docs[0][:1], 64)[1].tolist() == [[[0, 80], [50, 140], [80, 140]]]


@pytest.mark.parametrize("block_q,block_k", [(64, 64), (64, 32), (64, 16), (16, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_key_tiles_read_are_the_tiles_the_numpy_loop_computes(block_q, block_k, causal):
    """The kernels read, for each block, a run of key tiles bounded by its documents' span and the
    causal edge. On packed rows (each document contiguous) that run is exactly the set of tiles
    that hold a pair the mask lets through, which the NumPy loop finds tile by tile from the mask
    itself (`FlashTrace.computed`); so too without documents."""
    rng = np.random.default_rng(11)
    for trial in range(6):
        n = int(rng.integers(100, 400))
        lengths, doc = [], None
        if trial:  # trial 0: one sequence a row
            while sum(lengths) < n - 30:
                lengths.append(int(min(rng.integers(5, 120), n - sum(lengths))))
            doc = np.stack([_packed_doc(lengths[:len(lengths) - r], n) for r in range(2)])  # [2, n], padding at the end
        trace = T.FlashTrace()
        x = rng.standard_normal((3, 1 if doc is None else 2, 1, n, 4))
        T.flash_attention(*x, causal=causal, block_q=block_q, block_k=block_k, doc=doc, trace=trace)
        reads = CK.key_tiles_read(n, block_q, block_k, causal=causal, doc=doc)  # [b, Tr, Tc]
        assert np.array_equal(reads.any(axis=0), trace.computed()), (trial, lengths)  # the trace: over the batch


def test_key_tiles_read_checks_its_input():
    with pytest.raises(ValueError, match=r"doc must hold n=8 positions a row, got shape \(1, 6\)"):
        CK.key_tiles_read(8, 4, 4, causal=True, doc=np.zeros((1, 6), np.int64))
    with pytest.raises(ValueError, match="block_k"):
        CK.key_tiles_read(8, 4, 0, causal=True)
    with pytest.raises(TypeError, match="causal"):
        CK.key_tiles_read(8, 4, 4, causal=1)


def test_packed_row_args_refuses_what_is_no_doc_array():
    with pytest.raises(TypeError, match="doc must be an array"):
        CK.packed_row_args([[0, 0, 1]], 64)
    with pytest.raises(ValueError, match=r"doc must be a \(b, n\) integer array .* got dtype float64, shape \(1, 3\)"):
        CK.packed_row_args(np.array([[0.0, 0.0, 1.0]]), 64)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        CK.packed_row_args(np.array([0, 0, 1]), 64)
    with pytest.raises(ValueError, match="block_q"):
        CK.packed_row_args(np.array([[0, 0, 1]]), 0)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
@pytest.mark.parametrize("causal,d_h", [(False, 64), (True, 64), (True, 128)])
def test_kernel_packed_rows_equal_attention_under_the_document_mask(run, kernel, dtype, tol, causal, d_h):
    """doc=: each query reads only its own document (and the keys before it, when causal); padding
    rows get O = 0 and lse = -inf. Row 1's documents cross the tiles of 64 or 128 queries, and blocks
    start at key tiles other than the first (of 16, 32 or 64 keys: d_h = 128 halves them); GQA."""
    doc = np.stack([_packed_doc([50, 30, 60], 150), _packed_doc([7, 100, 43], 150)])  # [2, 150]
    q, k, v = _inputs(dtype, 2, 2, 1, 150, 150, d_h)
    _check_packed_rows(run, q, k, v, doc, causal, kernel, tol, padding_from=140)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [(300, 200), (200, 300)])
def test_kernel_packed_rows_of_long_documents(run, kernel, dtype, tol, causal, lengths):
    """Documents longer than a block (then 12 slots of padding): most blocks hold rows of one
    document only, and most of their key tiles keys of that document only, which the register
    kernels then leave unmasked. A tile at a document's border must still be masked: with 300 + 200
    the one after document 0's end (keys 256 … 319) for the rows of block 0; with 200 + 300 the one
    before document 1's start (keys 192 … 255) for the rows of 256 … 383, causal or not."""
    doc = _packed_doc(list(lengths), 512)[None]  # [1, 512]
    q, k, v = _inputs(dtype, 1, 2, 1, 512, 512, 64)
    _check_packed_rows(run, q, k, v, doc, causal, kernel, tol, padding_from=500)


def _check_packed_rows(run, q, k, v, doc, causal, kernel, tol, padding_from):
    """The kernel on packed rows against float64 attention under the document mask written out pair by
    pair; batch row 0's slots from padding_from on are padding (O = 0, lse = -inf)."""
    out, lse = run(q, k, v, causal=causal, kernel=kernel, doc=doc)
    ref, ref_lse = _reference(q, k, v, causal, keep=_same_document(doc))
    assert np.all(out[0, :, padding_from:] == 0) and np.all(lse[0, :, padding_from:] == -np.inf)
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, ref_lse, atol=tol * 10, rtol=tol)


@pytest.mark.parametrize("run", WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", KERNEL_DTYPES)
@pytest.mark.parametrize("bad_key,exact", [(290, slice(0, 128)), (10, slice(128, 300))])
def test_kernel_skips_key_tiles_outside_the_documents(run, kernel, dtype, tol, bad_key, exact):
    """A NaN value at one key, in documents of 100 slots: a query that reads the tile holding it turns
    NaN even where the key is masked, since 0 · NaN = NaN; that is what torch's dense masked attention
    gives every row. Key 290 (document 2): queries 0 … 127 (documents 0 and 1, keys 0 … 199) stay
    exact only if their blocks (of 64 or 128 queries) stop before its tile (keys 256 … 319, or
    288 … 319). Key 10 (document 0): queries 128 … 299 (documents 1 and 2, keys 100 … 299) only if
    their blocks start after it."""
    doc = _packed_doc([100, 100, 100], 300)[None]  # [1, 300]
    q, k, v = _inputs(dtype, 1, 2, 2, 300, 300, 32)
    ref, _ = _reference(q, k, v, False, keep=_same_document(doc))  # before the NaN
    v[0, :, bad_key] = np.nan
    with np.errstate(invalid="ignore"):
        out, _ = run(q, k, v, causal=False, kernel=kernel, doc=doc)
        dense, _ = _reference(q, k, v, False, keep=_same_document(doc))
    assert np.isnan(dense).all()  # the dense product reads every key
    np.testing.assert_allclose(out[0, :, exact].astype(np.float32), ref[0, :, exact], atol=tol, rtol=tol)
    seen_by = slice(bad_key // 100 * 100, bad_key // 100 * 100 + 100)  # the queries of the key's document
    assert np.isnan(out[0, :, seen_by]).all()


@needs_gpu
def test_bad_doc_is_named_on_gpu():
    import cupy

    q = cupy.zeros((1, 1, 8, 64), cupy.float32)
    with pytest.raises(ValueError, match=r"doc must be a \(b, n\) = \(1, 8\) integer array"):
        flash_cuda.flash_attention_cuda(q, q, q, doc=cupy.zeros((1, 7), cupy.int64))
    with pytest.raises(ValueError, match=r"doc needs self-attention over one packed row, n_q = n_k, got n_q=8, n_k=9"):
        k = cupy.zeros((1, 1, 9, 64), cupy.float32)
        flash_cuda.flash_attention_cuda(q, k, k, doc=cupy.zeros((1, 8), cupy.int64))


def run_backward_on_cpu(dout, q, k, v, out, lse, *, causal, scale=None, doc=None, kernel="simt"):
    """flash_attention_backward_cuda's host side, with the kernel run by the CPU emulator."""
    plan = CK.backward_launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale, kernel=kernel)
    fn = cuda_emulator.load(plan.kernel.source, plan.kernel.name, plan.options)
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    L, D = CK.backward_rows(dout, out, lse)
    dq = np.zeros((b, h, n_q, d_h), np.float32)
    dk = np.full((b, h, n_k, d_h), np.nan, np.float32)  # NaN: a row the kernel forgets to write fails the test
    dv = np.full((b, h, n_k, d_h), np.nan, np.float32)
    packed = (flash_cuda.NULL,) * 2 if doc is None else CK.packed_row_args(doc, plan.tile)
    fn(plan.grid, plan.block, (q, k, v, dout, np.ascontiguousarray(L), np.ascontiguousarray(D), dq, dk, dv,
                               *plan.scalars, *packed), shared_bytes=plan.shared_bytes)
    return (dq.astype(q.dtype), CK.sum_query_groups(dk, h_kv).astype(k.dtype),
            CK.sum_query_groups(dv, h_kv).astype(v.dtype))


def run_backward_on_gpu(dout, q, k, v, out, lse, *, causal, scale=None, doc=None, kernel="simt"):
    import cupy
    grads = flash_cuda.flash_attention_backward_cuda(*(cupy.asarray(t) for t in (dout, q, k, v, out, lse)),
                                                     causal=causal, scale=scale, kernel=kernel,
                                                     doc=None if doc is None else cupy.asarray(doc))
    return tuple(T.to_numpy(g) for g in grads)


BACKWARD_WHERE = [pytest.param(run_backward_on_cpu, id="cpu", marks=needs_gxx),
                  pytest.param(run_backward_on_gpu, id="gpu", marks=needs_gpu)]
# (kernel, dtype, tolerance): float16 rounds the inputs, and "mma" P and dS too, before the products
BACKWARD_KERNEL_DTYPES = [("simt", "float32", 2e-5), ("simt", "float16", 3e-3), ("mma", "float16", 3e-3),
                          ("mma_tf32", "float32", 2e-5)]


def _torch_gradients(dout, q, k, v, causal, scale=None, keep=None):
    """dq, dk, dv of softmax(Q Kᵀ·scale + causal mask) V by torch's autograd in float64 (GQA by
    repeat_interleave, causal rows at position i + n_k - n_q; a row that sees no key has O = 0).
    keep: (b, n_q, n_k), False where a query may not see a key."""
    torch = pytest.importorskip("torch")
    n_q, n_k, d_h = q.shape[2], k.shape[2], q.shape[3]
    tq, tk, tv = (torch.tensor(t.astype(np.float64), requires_grad=True) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    s = tq @ tk.repeat_interleave(group, dim=1).transpose(-1, -2) * (scale or 1 / np.sqrt(d_h))
    mask = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        mask = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + n_k - n_q
    if keep is not None:
        mask = mask & torch.from_numpy(keep)[:, None]  # [b, 1, n_q, n_k]
    p = torch.softmax(s.masked_fill(~mask, -torch.inf), dim=-1)
    p = torch.where(mask.any(-1, keepdim=True), p, 0.0)  # rows that see nothing: 0, not NaN
    o = p @ tv.repeat_interleave(group, dim=1)
    o.backward(torch.tensor(dout.astype(np.float64)))
    return tuple(t.grad.numpy() for t in (tq, tk, tv))


BACKWARD_CASES = [  # b, h, h_kv, n_q, n_k, d_h: MHA/GQA/MQA, n not a multiple of the 32- or 16-key tiles
    (1, 1, 1, 1, 1, 64), (2, 2, 2, 70, 70, 64), (1, 4, 2, 100, 45, 32), (1, 3, 1, 37, 90, 128),
    (1, 2, 1, 70, 5, 32)]  # causal: the first 65 rows see no key


@pytest.mark.parametrize("run", BACKWARD_WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", BACKWARD_KERNEL_DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,h_kv,n_q,n_k,d_h", BACKWARD_CASES)
def test_backward_kernel_equals_torch_autograd(run, kernel, dtype, tol, causal, b, h, h_kv, n_q, n_k, d_h):
    """dQ, dK, dV from the kernel against torch's autograd in float64 on the same (rounded) inputs;
    O and lse come from the float64 reference, as the forward would save them."""
    q, k, v = _inputs(dtype, b, h, h_kv, n_q, n_k, d_h)
    dout = np.random.default_rng(1).standard_normal(q.shape).astype(dtype)
    out, lse = _reference(q, k, v, causal)
    grads = run(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), causal=causal, kernel=kernel)
    for name, ours, ref in zip(("dq", "dk", "dv"), grads, _torch_gradients(dout, q, k, v, causal)):
        assert ours.dtype == q.dtype and ours.shape == ref.shape, name
        scale = max(1.0, np.abs(ref).max())
        np.testing.assert_allclose(ours.astype(np.float64), ref, atol=tol * scale, rtol=tol, err_msg=name)


def test_backward_launch_plan_tiles_the_keys():
    """"simt": one block of Bc threads per (key tile, batch·head); Bc halves at d_h = 128."""
    plan = CK.backward_launch_plan((2, 8, 257, 64), (2, 2, 300, 64), "float16", causal=True, scale=None, kernel="simt")
    assert plan.grid == (10, 16) and plan.block == (32,) and plan.shared_bytes == 0  # ⌈300 / 32⌉ key tiles
    assert {"-DD_H=64", "-DBC=32", "-DSCALAR_T=__half"} <= set(plan.options)
    assert [int(x) for x in plan.scalars[:4]] == [257, 300, 8, 2] and int(plan.scalars[5]) == 1
    plan = CK.backward_launch_plan((1, 1, 5, 128), (1, 1, 40, 128), "float32", causal=False, scale=0.5, kernel="simt")
    assert plan.grid == (3, 1) and plan.block == (16,) and float(plan.scalars[4]) == 0.5 and plan.tile == 16
    with pytest.raises(TypeError, match="causal"):
        CK.backward_launch_plan((1, 1, 5, 64), (1, 1, 5, 64), "float32", causal="yes", scale=None)


@pytest.mark.parametrize("kernel,dtype,d_h,br,size,pad", [
    ("mma", "float16", 32, 64, 2, 8), ("mma", "float16", 64, 64, 2, 8), ("mma", "float16", 128, 32, 2, 8),
    ("mma_tf32", "float32", 32, 32, 4, 4), ("mma_tf32", "float32", 64, 32, 4, 4), ("mma_tf32", "float32", 128, 32, 4, 4)])
def test_backward_mma_launch_plan_and_shared_memory(kernel, dtype, d_h, br, size, pad):
    """"mma", "mma_tf32": a block of 4 warps per (64 keys, batch·head); query tiles of 64 rows (32 at
    d_h = 128) in float16, 32 in float32. Hand count of the shared memory: K_j, V_j (64 rows) and
    two Q_i, two dO_i (Br rows), d_h + pad elements a row; dSᵀ, 64 keys × (Br + pad); L_i and D_i
    twice, Br floats each. Within what an A100 gives a block (163 KiB)."""
    expected = (2 * 64 + 4 * br) * (d_h + pad) * size + 64 * (br + pad) * size + 4 * br * 4
    assert CK.backward_tiles(kernel, d_h) == (br, 64)
    plan = CK.backward_launch_plan((2, 8, 257, d_h), (2, 2, 300, d_h), dtype, causal=True, scale=None)
    assert plan.kernel is CK.BACKWARD_KERNELS[kernel]  # "auto" for the dtype on a GPU new enough
    assert plan.grid == (5, 16) and plan.block == (128,) and plan.tile == 64  # ⌈300 / 64⌉ key tiles
    assert plan.shared_bytes == CK.backward_shared_bytes(d_h, kernel) == expected <= 163 * 1024
    assert f"-DSMEM_BYTES={expected}" in plan.options
    assert CK.backward_launch_plan((1, 1, 5, d_h), (1, 1, 5, d_h), dtype, causal=False, scale=None,
                                   compute_capability=75).kernel is CK.BACKWARD  # before sm_80: "simt"
    with pytest.raises(TypeError, match="backward kernel='mma' takes float16, got float32"):
        CK.backward_launch_plan((1, 1, 5, d_h), (1, 1, 5, d_h), "float32", causal=False, scale=None, kernel="mma")
    with pytest.raises(TypeError, match="backward kernel='mma_tf32' takes float32, got float16"):
        CK.backward_launch_plan((1, 1, 5, d_h), (1, 1, 5, d_h), "float16", causal=False, scale=None, kernel="mma_tf32")
    with pytest.raises(ValueError, match="kernel='tensor_cores': the backward kernels are 'auto', 'simt', 'mma', "
                                         "'mma_tf32'"):
        CK.backward_launch_plan((1, 1, 5, d_h), (1, 1, 5, d_h), "float16", causal=False, scale=None,
                                kernel="tensor_cores")


@needs_gpu
def test_backward_bad_input_is_named_on_gpu():
    import cupy

    q = cupy.zeros((1, 2, 8, 64), cupy.float32)
    lse = cupy.zeros((1, 2, 8), cupy.float32)
    with pytest.raises(ValueError, match=r"lse must have shape \(1, 2, 8\), got \(1, 2, 7\)"):
        flash_cuda.flash_attention_backward_cuda(q, q, q, q, q, lse[:, :, :7])
    with pytest.raises(TypeError, match="dout must have q's dtype float32, got float16"):
        flash_cuda.flash_attention_backward_cuda(q.astype(cupy.float16), q, q, q, q, lse)
    with pytest.raises(TypeError, match="lse must be a CuPy array"):
        flash_cuda.flash_attention_backward_cuda(q, q, q, q, q, np.zeros((1, 2, 8), np.float32))


@pytest.mark.parametrize("run", BACKWARD_WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", BACKWARD_KERNEL_DTYPES)
@pytest.mark.parametrize("causal,d_h", [(False, 64), (True, 64), (True, 128)])
def test_backward_kernel_packed_rows_equal_torch_autograd(run, kernel, dtype, tol, causal, d_h):
    """doc=: the gradients of attention under the document mask (torch's autograd through the mask
    written out pair by pair); padding gets zero gradients. Key tiles visit only the query tiles of
    their documents (key tiles of 32 or 16 positions, "simt"; 64, "mma")."""
    doc = np.stack([_packed_doc([50, 30, 60], 150), _packed_doc([7, 100, 43], 150)])  # [2, 150]
    keep = _same_document(doc)  # [2, 150, 150]
    q, k, v = _inputs(dtype, 2, 2, 1, 150, 150, d_h)
    dout = np.random.default_rng(1).standard_normal(q.shape).astype(dtype)
    out, lse = _reference(q, k, v, causal, keep=keep)
    grads = run(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), causal=causal, doc=doc, kernel=kernel)
    refs = _torch_gradients(dout, q, k, v, causal, keep=keep)
    for name, ours, ref in zip(("dq", "dk", "dv"), grads, refs):
        np.testing.assert_allclose(ours.astype(np.float64), ref, atol=tol * max(1.0, np.abs(ref).max()), rtol=tol,
                                   err_msg=name)
    assert all(np.all(g[0, :, 140:] == 0) for g in grads)  # the padding slots of row 0


@pytest.mark.parametrize("run", BACKWARD_WHERE)
@pytest.mark.parametrize("kernel,dtype,tol", BACKWARD_KERNEL_DTYPES)
@pytest.mark.parametrize("bad_query,exact", [(250, slice(0, 32)), (10, slice(128, 192))])
def test_backward_kernel_skips_query_tiles_outside_the_documents(run, kernel, dtype, tol, bad_query, exact):
    """A NaN in dO at one query, in documents of 100 slots. A key tile that visited the query tile
    holding it would turn NaN (0 · NaN in dV_j += P_ijᵀ dO_i). Query 250 (document 2): keys 0 … 31
    (document 0, queries 0 … 99) keep exact gradients only if their block stops before it. Query 10
    (document 0): keys 128 … 191 (document 1, queries 100 … 199) only if their blocks start after it."""
    doc = _packed_doc([100, 100, 100], 300)[None]  # [1, 300]
    keep = _same_document(doc)
    q, k, v = _inputs(dtype, 1, 2, 2, 300, 300, 64)
    dout = np.random.default_rng(1).standard_normal(q.shape).astype(dtype)
    out, lse = _reference(q, k, v, False, keep=keep)
    refs = _torch_gradients(dout, q, k, v, False, keep=keep)  # before the NaN
    dout[0, :, bad_query] = np.nan
    with np.errstate(invalid="ignore"):
        _, dk, dv = run(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), causal=False, doc=doc, kernel=kernel)
    for ours, ref in ((dk, refs[1]), (dv, refs[2])):
        np.testing.assert_allclose(ours[0, :, exact].astype(np.float64), ref[0, :, exact],
                                   atol=tol * max(1.0, np.abs(ref).max()), rtol=tol)
    seen_by = slice(bad_query // 100 * 100, bad_query // 100 * 100 + 100)  # the keys the query sees
    assert np.isnan(dv[0, :, seen_by]).all()


@needs_gxx
@pytest.mark.parametrize("kernel,dtype,tol", [("simt", "float32", 2e-5), ("mma", "float16", 3e-3),
                                              ("mma_tf32", "float32", 2e-5)])
def test_backward_kernel_honours_scale(kernel, dtype, tol):
    q, k, v = _inputs(dtype, 1, 2, 1, 40, 40, 64)
    dout = np.random.default_rng(1).standard_normal(q.shape).astype(dtype)
    out, lse = _reference(q.astype(np.float64) * (0.5 * np.sqrt(64)), k, v, False)  # scale 0.5 = (0.5·√d_h) / √d_h
    grads = run_backward_on_cpu(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), causal=False, scale=0.5,
                                kernel=kernel)
    for ours, ref in zip(grads, _torch_gradients(dout, q, k, v, False, scale=0.5)):
        np.testing.assert_allclose(ours.astype(np.float64), ref, atol=tol * max(1.0, np.abs(ref).max()), rtol=tol)


@needs_gxx
@pytest.mark.parametrize("kernel", ["simt", "mma_tf32"])
def test_backward_kernel_float32_large_scores_rebuild_the_forwards_probabilities(kernel):
    """Scores up to ~3e3 in float32 (q and k ×30), P almost one-hot, lse from the same pair's forward kernel as
    flash_attention_backward_cuda gets it. P_ij = e^(S_ij − L_i) is 1 at a row's max key only if the backward
    rounds the exponent as the forward did. "simt" rounded S_ij as (Q Kᵀ)·scale where its forward rounds
    (Q·scale) Kᵀ: an ulp or two of 3e3 (2.4e-4 each) off, and dV 1.6e-3 off. "mma_tf32" folded log2 e into the
    scale, so lse went through (m + log2 l)·ln 2 and back by ·log2 e, 1 to 3 ulps of ~4.3e3 off m, and dV 2.3e-4
    off; now S·scale − m and S·scale − L are rounded in natural units before the ·log2 e. The emulator's __expf
    is the C library's expf, a GPU's an approximation: the exponent's bits are what is checked. Reference: torch
    autograd in float64 on the same float32 inputs."""
    rng = np.random.default_rng(19)
    q, k, v = (rng.standard_normal(s) for s in ((1, 2, 13, 32), (1, 1, 17, 32), (1, 1, 17, 32)))
    q, k, v = (t.astype(np.float32) for t in (q * 30, k * 30, v))
    dout = rng.standard_normal(q.shape).astype(np.float32)
    out, lse = run_on_cpu(q, k, v, causal=False, kernel=kernel)
    dq, dk, dv = run_backward_on_cpu(dout, q, k, v, out, lse, causal=False, kernel=kernel)
    ref_dq, ref_dk, ref_dv = _torch_gradients(dout, q, k, v, False)
    # measured max |Δ| 3e-7 (simt) and 4.8e-7 (mma_tf32: float32 sums of dO through three TF32 products), |dV| ≤ 5.6
    np.testing.assert_allclose(dv, ref_dv, rtol=0, atol=1e-6 * np.abs(ref_dv).max())
    # dQ, dK (≤ 2e-7 in float64) are dS = P (dP − D) with dP_ij and D_i float32 sums of size ~10 that cancel:
    # measured 4e-5 (simt) and 2.7e-5 (mma_tf32), before the fixes and after; the NumPy backward is 1.6e-5 off here
    for ours, ref in ((dq, ref_dq), (dk, ref_dk)):
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-4)


@needs_gxx
def test_tf32_kernel_needs_its_three_products():
    """One TF32 product (10 mantissa bits) puts the float32 kernel at float16's error; the split
    x = x_hi + x_lo and three products bring it back under the float32 tolerance."""
    q, k, v = _inputs("float32", 2, 4, 4, 100, 100, 64)
    ref, _ = _reference(q, k, v, False)
    errors = {}
    for products in (1, 3):
        out, _ = run_on_cpu(q, k, v, causal=False, kernel="mma_tf32", defines=(f"-DTF32_PRODUCTS={products}",))
        errors[products] = np.abs(out - ref).max()
    assert errors[3] < 2e-5 < 1e-4 < errors[1], errors


@needs_gpu
def test_kernel_agrees_with_the_package_attention_on_gpu():
    """The CuPy run of the package's own naive attention (the `xp` code path) gives the same numbers."""
    import cupy

    q, k, v = (cupy.asarray(t) for t in _inputs("float32", 2, 4, 2, 200, 200, 64))
    out = flash_cuda.flash_attention_cuda(q, k, v, causal=True)
    ref = T.scaled_dot_product_attention(q, k, v, T.causal_mask(200, 200, xp=cupy))
    np.testing.assert_allclose(T.to_numpy(out), T.to_numpy(ref), atol=2e-5)


def test_launch_plan_tiles_the_queries():
    plan = CK.launch_plan((2, 8, 257, 64), (2, 2, 300, 64), "float16", causal=True, scale=None,
                                  kernel="simt")
    assert plan.grid == (5, 16) and plan.block == (64,)  # ⌈257/64⌉ = 5 tiles, b·h = 16; a thread per row
    assert "-DSCALAR_T=__half" in plan.options and "-DD_H=64" in plan.options and plan.shared_bytes == 0
    assert [int(x) for x in plan.scalars[:4]] == [257, 300, 8, 2] and int(plan.scalars[5]) == 1
    assert float(plan.scalars[4]) == pytest.approx(1 / 8)
    auto16 = CK.launch_plan((2, 8, 257, 64), (2, 2, 300, 64), "float16", causal=True, scale=None)
    auto32 = CK.launch_plan((2, 8, 257, 64), (2, 2, 300, 64), "float32", causal=True, scale=None)
    assert auto16.kernel.name == "flash_attention_fwd_mma" and auto16.block == (128,)  # 4 warps of 32 rows
    assert auto16.grid == (3, 16)  # ⌈257/128⌉ = 3 tiles
    assert auto32.kernel.name == "flash_attention_fwd_mma_tf32" and auto32.grid == (5, 16)


@pytest.mark.parametrize("d_h,expected", [
    # hand count: Ks + Vs 2·64·(d_h+8)·2, S 64·68·4 = 17408, P 64·72·2 = 9216, O 64·(d_h+4)·4, 64·4 = 256
    (64, 2 * 9216 + 17408 + 9216 + 17408 + 256),
    (128, 2 * 17408 + 17408 + 9216 + 33792 + 256),
    (32, 2 * 5120 + 17408 + 9216 + 9216 + 256)])
def test_tensor_core_shared_memory(d_h, expected):
    assert CK.dynamic_shared_bytes("tensor_cores", d_h) == expected
    assert expected <= 227 * 1024  # an H100 block may opt in to 227 KiB


@pytest.mark.parametrize("d_h,expected,threads", [  # hand count: a Q tile of 128 rows + 2 K_j + 2 V_j buffers
    (32, (128 + 4 * 64) * 40 * 2, 128), (64, (128 + 4 * 64) * 72 * 2, 128),  # of 64, (d_h + 8) halves a row;
    (128, (128 + 4 * 64) * 136 * 2, 256)])  # 4 warps of 32 query rows, 8 of 16 at d_h = 128
def test_mma_kernel_shared_memory(d_h, expected, threads):
    assert CK.dynamic_shared_bytes("mma", d_h) == expected
    plan = CK.launch_plan((1, 1, 300, d_h), (1, 1, 300, d_h), "float16", causal=False, scale=None, kernel="mma")
    assert plan.shared_bytes == expected and f"-DSMEM_BYTES={expected}" in plan.options
    assert f"-DBLOCK_THREADS={threads}" in plan.options  # the kernel's static_assert checks its own count
    assert plan.block == (threads,) == (CK.block_threads("mma", d_h),) and plan.grid == (3, 1)  # ⌈300 / 128⌉


@pytest.mark.skipif(not nvrtc.available(), reason="needs NVRTC and the CUDA headers (requirements-dev.txt)")
def test_mma_kernel_refuses_a_block_size_it_was_not_built_for():
    """The host launches 256 threads at d_h = 128 and the kernel is built for that; told 128 there,
    it does not compile (a launch with the wrong count would leave query rows unwritten)."""
    plan = CK.launch_plan((1, 1, 1, 128), (1, 1, 1, 128), "float16", causal=False, scale=None, kernel="mma")
    source = flash_cuda.kernel_source(plan.kernel.source)
    ok, log = nvrtc.compile_cuda(source, (*plan.options, "-arch=sm_90"))
    assert ok, log
    wrong = tuple("-DBLOCK_THREADS=128" if o.startswith("-DBLOCK_THREADS=") else o for o in plan.options)
    ok, log = nvrtc.compile_cuda(source, (*wrong, "-arch=sm_90"))
    assert not ok and "the host must launch THREADS threads a block" in log


@pytest.mark.parametrize("d_h,bc", [(32, 64), (64, 64), (128, 32)])
def test_mma_tf32_kernel_shared_memory(d_h, bc):
    """Hand count: a Q tile of 64 rows and 2 K_j + 2 V_j buffers of Bc rows, d_h + 4 floats a row;
    Bc halves at d_h = 128 so that a block fits the 163 KiB an A100 gives it."""
    expected = (64 + 4 * bc) * (d_h + 4) * 4
    assert CK.block_k("mma_tf32", d_h) == bc
    assert CK.dynamic_shared_bytes("mma_tf32", d_h) == expected <= 163 * 1024
    plan = CK.launch_plan((1, 1, 1, d_h), (1, 1, 1, d_h), "float32", causal=False, scale=None, kernel="mma_tf32")
    assert plan.shared_bytes == expected and f"-DBC={bc}" in plan.options and plan.block == (128,)


def test_kernel_source_pastes_the_local_headers():
    """CuPy compiles a string: the PTX wrappers must be in it, and no include of a file beside the kernel."""
    text = flash_cuda.kernel_source(CK.KERNELS["mma"].source)
    assert '#include "' not in text and "mma.sync.aligned.m16n8k16" in text and "#include <cuda_fp16.h>" in text
    assert "#pragma once" not in text
    text = flash_cuda.kernel_source(CK.KERNELS["mma_tf32"].source)  # three headers, each pasted once
    assert '#include "' not in text and text.count("void online_softmax(") == 1
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text and "cvt.rna.tf32.f32" in text
    # packed_rows.cuh is included by the kernel and again inside mma_softmax.cuh: pasted once, first
    assert text.count("bool in_document(") == 1 < text.index("void scale_and_mask(") - text.index("bool in_document(")
    simt = flash_cuda.kernel_source(CK.KERNELS["simt"].source)
    assert '#include "' not in simt and simt.count("bool in_document(") == 1 and "#pragma once" not in simt


def test_too_old_a_gpu_gets_a_clear_error():
    flash_checks.check_device(CK.KERNELS["mma"], 90)  # H100: fine
    with pytest.raises(RuntimeError, match=r"flash_attention_fwd_mma.cu needs .* 8\.0 or later, this one is 7\.5"):
        flash_checks.check_device(CK.KERNELS["mma"], 75)
    with pytest.raises(RuntimeError, match=r"7\.0 or later, this one is 6\.1"):
        flash_checks.check_device(CK.KERNELS["tensor_cores"], 61)


@pytest.mark.parametrize("shapes,dtypes,match", [
    (((1, 4, 8, 48),) * 3, ("float32",) * 3, "d_h=48"),
    (((1, 4, 8, 64), (1, 3, 8, 64), (1, 3, 8, 64)), ("float32",) * 3, r"h=4.*h_kv=3"),
    (((1, 4, 8, 64),) * 3, ("float32", "float16", "float32"), "float32 or all float16"),
    (((1, 4, 8, 64),) * 3, ("float64",) * 3, "float64"),
    (((4, 8, 64), (1, 4, 8, 64), (1, 4, 8, 64)), ("float32",) * 3, r"q must have 4 dims.*\(4, 8, 64\)"),
    (((1, 4, 8, 64), (1, 4, 8, 64), (1, 4, 9, 64)), ("float32",) * 3, r"k \(1, 4, 8, 64\) and v \(1, 4, 9, 64\)"),
])
def test_bad_input_gets_a_clear_error(shapes, dtypes, match):
    with pytest.raises((ValueError, TypeError), match=match):
        flash_checks.check_inputs(*shapes, dtypes)


def test_bad_kernel_choice_gets_a_clear_error():
    shapes = ((1, 4, 8, 64),) * 3
    with pytest.raises(TypeError, match=r"'tensor_cores' takes float16, got float32"):
        flash_checks.check_inputs(*shapes, ("float32",) * 3, "tensor_cores")
    with pytest.raises(TypeError, match=r"'mma_tf32' takes float32, got float16"):
        flash_checks.check_inputs(*shapes, ("float16",) * 3, "mma_tf32")
    with pytest.raises(ValueError, match=r"kernel='wmma'"):
        flash_checks.check_inputs(*shapes, ("float16",) * 3, "wmma")


@needs_gpu
def test_kernel_rejects_bad_input():
    import cupy

    q = cupy.zeros((1, 4, 8, 64), cupy.float32)
    with pytest.raises(ValueError, match=r"d_h=48"):
        flash_cuda.flash_attention_cuda(q[..., :48], q[..., :48], q[..., :48])
    with pytest.raises(ValueError, match=r"h=4.*h_kv=3"):
        flash_cuda.flash_attention_cuda(q, q[:, :3], q[:, :3])
    with pytest.raises(TypeError, match="float32 or all float16"):
        flash_cuda.flash_attention_cuda(q, q.astype(cupy.float16), q)
    with pytest.raises(TypeError, match="CuPy array"):
        flash_cuda.flash_attention_cuda(T.to_numpy(q), q, q)


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_gpu_peak_measurement_without_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="backend 'cupy'"):
        T.measure_peak_bytes_gpu(lambda: None)


@needs_gpu
def test_gpu_peak_bytes_of_naive_attention_hold_the_score_matrices():
    """Naive attention materialises n×n scores per head: the pool's peak is at least b·h·n²·4 bytes."""
    import cupy

    b, h, n, d_h = 1, 4, 1024, 64
    q = cupy.asarray(np.random.default_rng(0).standard_normal((b, h, n, d_h)).astype(np.float32))
    _, naive = T.measure_peak_bytes_gpu(T.scaled_dot_product_attention, q, q, q)
    _, tiled = T.measure_peak_bytes_gpu(flash_cuda.flash_attention_cuda, q, q, q)
    assert naive >= b * h * n * n * 4
    assert tiled <= 2 * (b * h * n * d_h * 4 + b * h * n * 4) + 4096  # O and lse only: O(n) extra


def _bench_gpu():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("causal", [False, True])
def test_bench_gpu_flop_count_equals_torchs(causal):
    """The benchmark's TFLOP/s use 4·b·h·n²·d_h (×½ causal); torch's FlopCounterMode counts SDPA's products."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    bench = _bench_gpu()
    n = 256
    q = torch.zeros(bench.B, bench.H, n, bench.D_H)
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):  # the math path: counted products
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    full = counter.get_total_flops()
    assert bench.attention_flops(n, False) == full
    if causal:  # the causal half: n(n+1)/2 of n² scores are computed by a kernel that skips the rest
        assert bench.attention_flops(n, True) == pytest.approx(full * n * (n + 1) / 2 / n ** 2, rel=1 / n)


def test_bench_gpu_report_names_the_fastest_kernel():
    """The report's arithmetic on hand-made timings: the best kernel is the fastest that ran, its
    ratio to torch is its time over torch's, a kernel that ran out of memory shows as OOM."""
    bench = _bench_gpu()
    common = {"n": 8192, "causal": False, "flops": 2e12, "naive_peak_formula": 2 ** 30, "kernel_peak_formula": 2 ** 20,
              "torch_s": 1e-3, "torch_peak_bytes": 2 ** 20, "naive_s": None, "naive_peak_bytes": None}
    half = {**common, "dtype": "float16", "simt_s": 4e-3, "tensor_cores_s": 2e-3, "mma_s": 1.5e-3,
            "simt_peak_bytes": 2 ** 20, "tensor_cores_peak_bytes": 2 ** 20, "mma_peak_bytes": 3 * 2 ** 19}
    single = {**common, "dtype": "float32", "simt_s": 3e-3, "mma_tf32_s": None, "simt_peak_bytes": 2 ** 20,
              "mma_tf32_peak_bytes": None}
    assert bench.best_kernel(half) == "mma" and bench.best_kernel(single) == "simt"
    assert bench.tflops(half, "mma") == pytest.approx(2e12 / 1.5e-3 / 1e12)
    summary = bench.summarise([half, single], None)
    assert summary[0].startswith("n = 8192, float16, causal=False: mma kernel 1.50 ms = 1.50× torch SDPA (1.00 ms")
    assert "extra memory 1.5 MiB" in summary[0] and summary[0].endswith("vs naive out of memory.")
    assert "simt kernel 3.00 ms = 3.00× torch SDPA" in summary[1]
    meta = {"device": "a GPU", "command": "python benchmarks/bench_gpu.py", "wall_s": 1.0, "date": "today",
            "cupy": "x", "torch": "y", "cuda_runtime": 0, "summary": summary}
    table = [line for line in bench.markdown([half, single], None, meta).splitlines() if line.startswith("| 8192")]
    assert [c.strip() for c in table[0].split("|")[4:10]] == ["1.00", "OOM", "4.00", "2.00", "1.50", "–"]
    assert "| mma: 1.50× |" in table[0] and "| simt: 3.00× |" in table[1]
    assert [c.strip() for c in table[1].split("|")[6:10]] == ["3.00", "–", "–", "OOM"]


def test_bench_gpu_packed_row_slower_than_one_sequence_is_said_so():
    """A packed row that took longer than the sequence alone is not reported as "0.8× faster"."""
    bench = _bench_gpu()
    row = {"n": 8192, "documents": 8, "doc_len": 1024, "dtype": "float16", "kernel": "mma", "tiles_one_sequence": 4160,
           "tiles_packed": 576, "one_sequence_s": 0.74e-3, "packed_s": 0.99e-3, "max_abs_diff_vs_alone": 0.0}
    assert bench.packed_speed(row) == "takes 1.34× the time"  # 0.99 / 0.74
    assert "and takes 1.34× the time (0.99 ms against 0.74 ms)." in bench.summarise([], None, [row])[0]
    assert bench.packed_speed({**row, "packed_s": 0.37e-3}) == "runs 2.0× faster"


def test_bench_gpu_model_part_from_an_earlier_run(tmp_path):
    """--model-from: the SmolLM2 part of an earlier gpu.json, with a note in the report saying whose it is,
    through any number of runs that each took it from the one before; a file without one, or not JSON, is a
    clear error before any GPU work."""
    bench = _bench_gpu()
    model = {"model": "SmolLM2", "prompt_tokens": 32, "new_tokens": 64, "repeats": 3, "cupy_decode_tok_s": 14.5,
             "cupy_first_token_s": 0.05, "hf_decode_tok_s": 36.0, "hf_first_token_s": 0.04, "cpu_count": 16,
             "numpy_decode_tok_s": 41.9, "numpy_first_token_s": 0.05, "cupy_generate_peak_bytes": 2 ** 20,
             "weights_bytes": 2 ** 29, "kv_cache_bytes_formula": 2 ** 22}
    earlier = tmp_path / "gpu.json"
    earlier.write_text(json.dumps({"meta": {"date": "2026-01-02 03:04 UTC", "device": "a GPU"}, "model": model}))
    got, note = bench.earlier_model(earlier)
    assert got == model and note == "This part is from the run of 2026-01-02 03:04 UTC (a GPU)."
    meta = {"device": "a GPU", "command": "c", "wall_s": 1.0, "date": "d", "cupy": "x", "torch": "y",
            "cuda_runtime": 0, "summary": [], "model_note": note}
    assert "medians of 3 runs. This part is from the run of 2026-01-02 03:04 UTC (a GPU)." in bench.markdown(
        [], model, meta)
    later = tmp_path / "later.json"  # a run that took the part from the one above: the note still names that one
    later.write_text(json.dumps({"meta": {"date": "2026-02-03 04:05 UTC", "device": "another GPU", "model_note": note},
                                 "model": model}))
    assert bench.earlier_model(later) == (model, note)
    (tmp_path / "none.json").write_text(json.dumps({"meta": {}, "model": None}))
    with pytest.raises(SystemExit, match=r"none\.json: it holds no SmolLM2 part"):
        bench.main(["--model-from", str(tmp_path / "none.json")])
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SystemExit, match=r"bad\.json: cannot read it as a gpu\.json"):
        bench.main(["--model-from", str(tmp_path / "bad.json")])


def test_bench_gpu_report_packed_rows():
    """The packed-rows table and summary on hand-made timings: speed-up = one sequence over packed,
    fewer tiles = tiles over tiles; the summary names each dtype's fastest kernel on the packed row;
    a kernel that failed is a row marked failed."""
    bench = _bench_gpu()
    common = {"n": 8192, "documents": 8, "doc_len": 1024}
    packed = [{**common, "dtype": "float32", "kernel": "simt", "tiles_one_sequence": 8256, "tiles_packed": 1152,
               "one_sequence_s": 8e-3, "packed_s": 1.6e-3, "max_abs_diff_vs_alone": 1e-7},
              {**common, "dtype": "float32", "kernel": "mma_tf32", "tiles_one_sequence": 4160, "tiles_packed": 640,
               "one_sequence_s": 4e-3, "packed_s": 1e-3, "max_abs_diff_vs_alone": 2e-7},
              {**common, "dtype": "float16", "kernel": "tensor_cores", "tiles_one_sequence": 2080, "tiles_packed": 288,
               "error": "RuntimeError: crt/mma.h missing"}]
    summary = bench.summarise([], None, packed)
    assert summary == ["Packed rows, float32 (8 documents of 1024 in 8192 slots, causal): the mma_tf32 kernel reads "
                       "6.5× fewer key tiles than on one sequence and runs 4.0× faster (1.00 ms against 4.00 ms)."]
    meta = {"device": "a GPU", "command": "c", "wall_s": 1.0, "date": "d", "cupy": "x", "torch": "y",
            "cuda_runtime": 0, "summary": summary}
    text = bench.markdown([], None, meta, packed)
    assert "## Packed rows: 8 documents of 1024 tokens in one row of 8192, causal" in text
    assert "| float32 | simt | 8.00 | 1.60 | 5.00× | 8256 → 1152 | 7.17× | 1.0e-07 |" in text
    assert "| float16 | tensor_cores | failed | | | | | |" in text
    assert "failed (RuntimeError: crt/mma.h missing)" in bench.packed_line(packed[2])


def test_bench_gpu_report_backward():
    """The backward table and summary on hand-made timings: kernel / torch is the ratio of times,
    TFLOP/s count 2.5 forward passes; a failed kernel shows as failed, its torch time still given."""
    bench = _bench_gpu()
    flops = 2.5 * bench.attention_flops(8192, True)
    rows = [{"n": 8192, "dtype": "float16", "kernel": "mma", "causal": True, "flops": flops, "kernel_s": 8e-3,
             "torch_s": 2e-3,
             "kernel_peak_bytes": 3 * 2 ** 20, "dq_max_rel_diff_vs_torch": 1e-3, "dk_max_rel_diff_vs_torch": 2e-3,
             "dv_max_rel_diff_vs_torch": 5e-4},
            {"n": 8192, "dtype": "float32", "kernel": "simt", "causal": True, "flops": flops, "kernel_s": None,
             "torch_s": 4e-3,
             "kernel_error": "RuntimeError: no"}]
    assert bench.summarise([], None, None, rows) == [
        "Backward at n = 8192, float16, causal: mma kernel 8.00 ms = 4.00× torch's SDPA backward (2.00 ms; "
        "target ≤ 3×)."]
    meta = {"device": "a GPU", "command": "c", "wall_s": 1.0, "date": "d", "cupy": "x", "torch": "y",
            "cuda_runtime": 0, "summary": []}
    text = bench.markdown([], None, meta, None, rows)
    tf = flops / 8e-3 / 1e12  # 4·b·h·n²·d_h/2 · 2.5 FLOPs in 8 ms
    assert f"| 8192 | float16 | mma | 8.00 | 2.00 | 4.00× | {tf:.1f} | {4 * tf:.1f} | 1e-03, 2e-03, 5e-04 | 3.0 |" in text
    assert "| 8192 | float32 | simt | failed | 4.00 | – | – |" in text
    assert (bench.backward_line(rows[1])
            == "backward n=  8192 float32 simt: kernel failed (RuntimeError: no) | torch 4.00 ms")


@needs_gpu
def test_bench_gpu_backward_runs_on_gpu():
    bench = _bench_gpu()
    r32, r32_mma, r16, r16_mma = bench.backward_rows([1024], lambda n: 2)  # float32, then float16: simt, tensor cores
    assert [r["kernel"] for r in (r32, r32_mma, r16, r16_mma)] == ["simt", "mma_tf32", "simt", "mma"]
    for r, tol in ((r32, 1e-4), (r32_mma, 1e-4), (r16, 1e-2), (r16_mma, 1e-2)):
        assert r["kernel_s"] and r["torch_s"], r
        assert max(r[f"{g}_max_rel_diff_vs_torch"] for g in ("dq", "dk", "dv")) < tol, r


@needs_gpu
def test_bench_gpu_packed_rows_run_on_gpu():
    """The packed-rows part on the device: each kernel's packed output equals each document run alone."""
    bench = _bench_gpu()
    rows = bench.packed_rows(2 * bench.DOC_LEN, 2)
    assert {r["kernel"] for r in rows} >= {"simt"} and all(r["tiles_packed"] < r["tiles_one_sequence"] for r in rows)
    for r in rows:
        if not r.get("error"):
            assert r["max_abs_diff_vs_alone"] < (2e-5 if r["dtype"] == "float32" else 2e-3), r


def test_bench_gpu_report_keeps_going_past_a_kernel_that_failed():
    """A kernel that could not be built (say WMMA without crt/mma.h) shows as failed with its reason,
    is never the best kernel, and a model run without HF transformers still reports its own rate."""
    bench = _bench_gpu()
    row = {"n": 8192, "dtype": "float16", "causal": True, "flops": 1e12, "naive_peak_formula": 2 ** 30,
           "kernel_peak_formula": 2 ** 20, "torch_s": 1e-3, "torch_peak_bytes": 2 ** 20, "naive_s": 8e-3,
           "naive_peak_bytes": 2 ** 30, "simt_s": 4e-3, "simt_peak_bytes": 2 ** 20, "tensor_cores_s": None,
           "tensor_cores_peak_bytes": None, "tensor_cores_error": "RuntimeError: crt/mma.h missing",
           "mma_s": 1.5e-3, "mma_peak_bytes": 2 ** 20}
    model = {"model": "m", "prompt_tokens": 32, "new_tokens": 64, "repeats": 3, "cupy_decode_tok_s": 100.0,
             "cupy_first_token_s": 0.1, "hf_decode_tok_s": None, "hf_first_token_s": None,
             "numpy_decode_tok_s": 20.0, "numpy_first_token_s": 0.5, "cpu_count": 16,
             "cupy_generate_peak_bytes": 2 ** 20, "weights_bytes": 2 ** 29, "kv_cache_bytes_formula": 2 ** 20}
    assert bench.best_kernel(row) == "mma"
    assert "tensor_cores failed" in bench.line(row) and "mma 1.50 ms" in bench.line(row)
    summary = bench.summarise([row], model)
    assert summary[-1] == "SmolLM2 decode on CuPy 100.0 tok/s, 5.0× the package on this machine's CPUs."
    meta = {"device": "a GPU", "command": "c", "wall_s": 1.0, "date": "d", "cupy": "x", "torch": "y",
            "cuda_runtime": 0, "summary": summary}
    text = bench.markdown([row], model, meta)
    cells = [c.strip() for c in next(t for t in text.splitlines() if t.startswith("| 8192")).split("|")]
    assert cells[6:9] == ["4.00", "failed", "1.50"]
    assert "- `tensor_cores` failed: RuntimeError: crt/mma.h missing" in text
    assert "| HF transformers on the same GPU | not installed | |" in text


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_bench_gpu_without_gpu_says_so():
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu.py"
    res = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True)
    assert res.returncode == 2
    assert "needs CuPy and an NVIDIA GPU" in res.stderr and "Traceback" not in res.stderr


PROBE = cuda_emulator.SHIM / "mma_probe.cu"


def _placements(operand, per_lane, shape="m16n8k16"):
    """[32, per_lane] int32: for lane l, register element e (= 2·register + half for float16 A and B,
    the register otherwise), the flat index of the operand element it holds, by
    `CK.mma_fragment_layout`."""
    lane, reg, half = CK.mma_fragment_layout(operand, shape)
    elem = reg if operand == "C" or shape == "m16n8k8" else 2 * reg + half
    slot = lane * per_lane + elem  # [rows, cols]
    at = np.full(32 * per_lane, -1, np.int32)
    at[slot.ravel()] = np.arange(slot.size)
    assert (at >= 0).all()  # every register element of every lane holds exactly one matrix element
    return at.reshape(32, per_lane)


def _tf32_nearest(x):
    """x rounded to the nearest number with 10 mantissa bits, ties away from zero (cvt.rna.tf32.f32),
    by comparing the two candidates in float64: a route apart from the kernels' bit arithmetic."""
    bits = x.view(np.uint32)
    down = (bits & np.uint32(0xFFFFE000)).view(np.float32)           # toward zero
    up = (bits & np.uint32(0xFFFFE000)) + np.uint32(0x2000)           # away from zero, one TF32 step
    up = up.view(np.float32)
    with np.errstate(invalid="ignore"):  # inf - inf: those are exact, kept below
        far = np.abs(up.astype(np.float64) - x) <= np.abs(x - down.astype(np.float64))  # a tie goes away
    exact = (bits & np.uint32(0x1FFF)) == 0
    return np.where(exact, x, np.where(far, up, down)).astype(np.float32)  # exact: also ±inf and 0


def test_tf32_rounding_on_the_host_matches_nearest_ties_away():
    """CK.tf32_round (bit arithmetic) against the float64 comparison of the two neighbours."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(10_000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 10_000),
                        np.array([0x3F801000, 0xBF801000, 0x3FFFF000, 0x00001000], np.uint32).view(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf], np.float32)]).astype(np.float32)
    np.testing.assert_array_equal(CK.tf32_round(x), _tf32_nearest(x))
    assert np.all(CK.tf32_round(x).view(np.uint32) & 0x1FFF == 0)


def test_split_tf32_keeps_21_bits():
    """hi + lo is within 2^-21 of x (one TF32 number alone: 2^-11); both halves are TF32 numbers."""
    x = np.random.default_rng(4).standard_normal(10_000).astype(np.float32)
    hi, lo = CK.split_tf32(x)
    assert np.all(hi.view(np.uint32) & 0x1FFF == 0) and np.all(lo.view(np.uint32) & 0x1FFF == 0)
    rel = np.abs(hi.astype(np.float64) + lo - x) / np.abs(x)
    assert rel.max() <= 2.0 ** -21 < 2.0 ** -13 < (np.abs(hi.astype(np.float64) - x) / np.abs(x)).max()


def _probe_inputs():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float16)  # [16, 16]
    b = rng.standard_normal((16, 8)).astype(np.float16)   # [16, 8]
    m = np.arange(4 * 64).astype(np.float16).reshape(4, 8, 8)  # 4 matrices 8×8, every element different
    a8 = rng.integers(-64, 64, (16, 8)).astype(np.float32) / 8  # [16, 8] TF32 numbers: products exact
    b8 = rng.integers(-64, 64, (8, 8)).astype(np.float32) / 8   # [8, 8]
    x = rng.standard_normal(32).astype(np.float32)  # [32]: mostly not TF32 numbers; then edge cases
    ties = np.array([0x3F801000, 0xBF801000, 0x3F803000, 0x3FFFF000, 0xC0001000], np.uint32)  # half-way
    x[:5] = ties.view(np.float32)  # 1 + 2^-11 (up to 1 + 2^-10), its negative, 1 + 3·2^-11,
    x[5:8] = [np.inf, -np.inf, 0.0]  # 2 - 2^-11 (up to 2), -(2 + 2^-10) (to -(2 + 2^-9))
    return (a, b, _placements("A", 8), _placements("B", 4), _placements("C", 4), m,
            np.full((16, 8), np.nan, np.float32), np.zeros((32, 4), np.uint32), np.zeros((32, 4), np.uint32),
            a8, b8, _placements("A", 4, "m16n8k8"), _placements("B", 2, "m16n8k8"),
            np.full((16, 8), np.nan, np.float32), x, np.zeros(32, np.uint32))


def _probe_on_cpu(*args):
    cuda_emulator.load(PROBE, "mma_probe")((1,), (32,), args)


def _probe_source() -> str:
    """The probe with the package's real PTX wrappers pasted in: what a GPU compiles."""
    return flash_cuda.kernel_source(PROBE, headers=CK.KERNELS["mma"].source.parent)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_probe_compiles_for_h100(tmp_path):
    (tmp_path / "mma_probe.cu").write_text(_probe_source())
    res = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", "-o", str(tmp_path / "p.cubin"),
                          str(tmp_path / "mma_probe.cu")], capture_output=True, text=True)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr


@pytest.mark.skipif(not nvrtc.available(), reason="needs NVRTC and the CUDA headers (requirements-dev.txt)")
def test_probe_compiles_as_cupy_compiles_it():
    ok, log = nvrtc.compile_cuda(_probe_source(), ("-std=c++17", "-arch=sm_90"), "mma_probe.cu")
    assert ok and "warning" not in log, log


def _probe_on_gpu(*args):
    import cupy
    dev = [cupy.asarray(x) for x in args]
    cupy.RawKernel(_probe_source(), "mma_probe", options=("-std=c++17",))((1,), (32,), tuple(dev))
    for host, d in zip(args, dev):
        host[...] = cupy.asnumpy(d)


@pytest.mark.parametrize("probe", [pytest.param(_probe_on_cpu, id="cpu", marks=needs_gxx),
                                   pytest.param(_probe_on_gpu, id="gpu", marks=needs_gpu)])
def test_mma_and_ldmatrix_follow_the_ptx_fragment_tables(probe):
    """The register kernels' PTX wrappers, alone: with operands placed by `mma_fragment_layout`, D = A B
    for the float16 and the TF32 mma; ldmatrix lanes as the PTX ISA's tables say; TF32 rounding
    to nearest, ties away from zero."""
    a, b, a_at, b_at, d_at, m, d, r, rt, a8, b8, a8_at, b8_at, d8, x, xt = args = _probe_inputs()
    probe(*args)
    np.testing.assert_allclose(d, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(d8, a8.astype(np.float64) @ b8)  # small multiples of 1/8: exact
    np.testing.assert_array_equal(xt.view(np.float32), _tf32_nearest(x))
    halves = lambda regs: np.stack([regs & 0xFFFF, regs >> 16], -1).astype(np.uint16).view(np.float16)  # low first
    g, t = np.arange(32) // 4, np.arange(32) % 4
    for j in range(4):  # register j of lane 4g + t: matrix j's [g][2t], [g][2t+1] (.trans: [2t][g], [2t+1][g])
        np.testing.assert_array_equal(halves(r[:, j]), np.stack([m[j, g, 2 * t], m[j, g, 2 * t + 1]], -1))
        np.testing.assert_array_equal(halves(rt[:, j]), np.stack([m[j, 2 * t, g], m[j, 2 * t + 1, g]], -1))
