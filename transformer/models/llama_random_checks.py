"""The refusals of `models/llama_random.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..core.shared_checks import fits_in_memory, seed_or_rng
from ..require import require_real

SIZES = ("L", "d", "h", "h_kv", "d_h", "d_ff", "v")


def random_llama(config, backend, *, seed, std):
    # a str failed with "has no attribute 'L'"
    if config is not None and not all(hasattr(config, f) for f in (*SIZES, "tied", "parameter_count")):
        raise TypeError(f"config must be a T.LlamaConfig (or None: SmolLM2-135M's shapes), got {type(config).__name__}")
    if not isinstance(backend, str) and not hasattr(backend, "asarray"):
        raise TypeError(f"backend must be 'numpy', 'cupy' or an array namespace, got {type(backend).__name__} "
                        f"{backend!r:.40}")
    seed_or_rng("seed", seed)  # -1 and 2.5 were refused from inside NumPy's SeedSequence
    require_real(std=std)
    if std < 0:
        raise ValueError(f"std must be ≥ 0 (the weights' standard deviation), got std={std!r}")
    if config is not None:  # float32 weights, before any is drawn: v=2**40 asked NumPy for 64 TiB
        n_params = config.parameter_count()
        fits_in_memory(f"a Llama of {n_params:,} random float32 weights", 4 * n_params, backend)
