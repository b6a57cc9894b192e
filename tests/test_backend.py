"""The xp namespace: one code path whatever the array library."""
import numpy as np
import pytest

import transformer as T
from conftest import asarray


def test_namespace_normalises_names():
    assert T.namespace(None) is T.namespace("numpy") is T.namespace(np)
    with pytest.raises(ValueError, match="'jax'"):
        T.namespace("jax")


def test_cupy_request_without_cupy_or_gpu_is_one_clear_error():
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        pytest.skip("a GPU is present")
    except Exception:
        pass
    with pytest.raises(RuntimeError, match="backend 'cupy'"):
        T.namespace("cupy")


def test_results_stay_on_the_input_backend(xp, rng):
    q = asarray(xp, rng.standard_normal((1, 2, 3, 4)), np.float32)
    out = T.scaled_dot_product_attention(q, q, q, T.causal_mask(3, xp=xp))
    assert type(out) is type(q) and out.dtype == q.dtype
    assert isinstance(T.to_numpy(out), np.ndarray)


def test_torch_tensors_run_through_the_same_code(rng):
    """A third backend (torch CPU tensors through array-api-compat): no NumPy call hides in the path."""
    import torch
    q = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    ours = T.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(q), torch.from_numpy(q),
                                          torch.from_numpy(T.causal_mask(5)))
    assert isinstance(ours, torch.Tensor) and ours.dtype == torch.float32
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(q),) * 3, is_causal=True)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    y = T.rms_norm(torch.from_numpy(q), torch.ones(4))
    np.testing.assert_allclose(y.numpy(), torch.nn.functional.rms_norm(torch.from_numpy(q), (4,), eps=1e-6).numpy(),
                               rtol=1e-5)


def test_get_xp_remembers_what_array_api_compat_answers():
    """get_xp keeps one namespace per set of array types: each answer is array_api_compat's own,
    None entries are ignored, and a mix of backends still raises (every time: nothing is stored)."""
    import array_api_compat
    import array_api_strict
    import torch
    from transformer.backend import get_xp
    cases = [(np.zeros(2),), (np.zeros(2, np.float32), np.zeros(3, np.int64)), (array_api_strict.zeros(2),),
             (torch.zeros(2),), (np.float32(1.0), np.zeros(2))]
    for arrays in cases:
        for _ in range(2):  # the first call looks it up, the second reads it back
            assert get_xp(None, *arrays) is array_api_compat.array_namespace(*arrays)
    for _ in range(2):
        with pytest.raises(TypeError, match="[Mm]ultiple namespaces"):
            get_xp(np.zeros(2), array_api_strict.zeros(2))
