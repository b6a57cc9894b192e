"""The xp namespace: one code path whatever the array library."""
import subprocess
import sys
from pathlib import Path

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


FAULTS = """
import resource, sys
import numpy as np
from transformer.backend import reuse_freed_memory
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
def step():  # a training step's pattern: 8 temporaries of 1 MiB alive at once, written, then all freed
    temporaries = [np.ones(1 << 17) for _ in range(8)]
    del temporaries
step()  # the first is fresh memory either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_reuse_freed_memory_stops_the_page_faults_of_each_new_temporary():
    """The kernel's own count of page faults (getrusage), over 50 rounds of 8 arrays of 1 MiB alive at once,
    each written, then all freed: by default the freed top of the heap goes back to the OS and each round
    faults its 2,048 pages in again; once freed memory is kept, almost none. Each in a fresh process, as
    the setting is process-wide."""
    def faults(mode):
        out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True,
                             cwd=Path(T.__file__).parents[1])
        return int(out.stdout.split()[-1])
    default, reused = faults("default"), faults("reuse")
    assert default > 50 * 2048 * 0.9, default  # every page of every round, faulted in again
    assert reused < 50 * 2048 * 0.02, reused
