"""The CUDA FlashAttention kernel: compiles for every specialisation; on a GPU, equals naive attention.

CI has no GPU: the compile check runs wherever `nvcc` is installed, and the GPU comparisons
skip cleanly unless CuPy and a device are present.
"""
import shutil
import subprocess

import numpy as np
import pytest

import transformer as T
from transformer import flash_cuda


def _has_gpu():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


GPU = _has_gpu()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs CuPy and an NVIDIA GPU")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("d_h,dtype", [(32, "float32"), (64, "float16")])  # the unrolled loops compile slowly:
def test_kernel_compiles(d_h, dtype, tmp_path):                           # two specialisations cover both types
    opts = [o for o in flash_cuda.kernel_options(d_h, dtype) if not o.startswith("-std")]
    res = subprocess.run(["nvcc", "--ptx", "-arch=sm_80", *opts, "-o", str(tmp_path / "k.ptx"),
                          str(flash_cuda.KERNEL_SOURCE)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert ".entry flash_attention_fwd" in (tmp_path / "k.ptx").read_text()  # extern "C": the name CuPy looks up


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_without_gpu_the_error_is_clear():
    q = np.zeros((1, 1, 4, 64), np.float32)
    with pytest.raises(RuntimeError, match="backend 'cupy'"):
        flash_cuda.flash_attention_cuda(q, q, q)


@needs_gpu
@pytest.mark.parametrize("dtype,tol", [("float32", 2e-5), ("float16", 2e-3)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,h_kv,n_q,n_k,d_h", [
    (1, 1, 1, 1, 1, 64), (2, 4, 4, 100, 100, 64), (1, 8, 2, 257, 257, 32),
    (1, 6, 1, 1, 300, 128), (2, 3, 3, 70, 133, 64), (1, 2, 1, 130, 64, 64)])
def test_kernel_equals_naive_attention_on_gpu(dtype, tol, causal, b, h, h_kv, n_q, n_k, d_h):
    import cupy

    rng = np.random.default_rng(0)
    q, k, v = (cupy.asarray(rng.standard_normal(s).astype(dtype))
               for s in ((b, h, n_q, d_h), (b, h_kv, n_k, d_h), (b, h_kv, n_k, d_h)))
    out, lse = flash_cuda.flash_attention_cuda(q, k, v, causal=causal, return_lse=True)
    mask = T.causal_mask(n_q, n_k, xp=cupy) if causal else None
    ref = T.scaled_dot_product_attention(q.astype(cupy.float32), k.astype(cupy.float32),
                                         v.astype(cupy.float32), mask)
    assert out.dtype == q.dtype
    np.testing.assert_allclose(T.to_numpy(out).astype(np.float32), T.to_numpy(ref), atol=tol, rtol=tol)
    # lse = log Σ_j e^(s_ij), in float64 on the host
    s = np.einsum("bhqd,bhkd->bhqk", T.to_numpy(q).astype(np.float64),
                  np.repeat(T.to_numpy(k).astype(np.float64), h // h_kv, axis=1)) / np.sqrt(d_h)
    if causal:
        s = np.where(T.to_numpy(mask), s, -np.inf)
    with np.errstate(divide="ignore"):
        m = s.max(-1, keepdims=True)
        ref_lse = (np.log(np.exp(s - np.where(np.isfinite(m), m, 0)).sum(-1)) + np.where(np.isfinite(m), m, 0)[..., 0])
    ref_lse = np.where(np.isfinite(m[..., 0]), ref_lse, -np.inf)
    np.testing.assert_allclose(T.to_numpy(lse), ref_lse, atol=tol * 10, rtol=tol)


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
