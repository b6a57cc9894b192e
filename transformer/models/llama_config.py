"""A Llama model's shapes and weights: the config whose fields are the dimension legend, and the weight arrays of
each decoder block and of the whole model, every matrix stored (d_in, d_out) so that y = x @ W."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import llama_checks as checks

__all__ = ["LlamaConfig", "LayerWeights", "LlamaWeights"]


@dataclass(frozen=True)
class LlamaConfig:
    """Hyper-parameters of a Llama model; the field names are the dimension legend.

    Defaults are SmolLM2-135M's; a GGUF file's metadata overrides them all.
    """
    L: int = 30  # layers (decoder blocks)
    d: int = 576  # model width, d_model
    h: int = 9  # query heads
    h_kv: int = 3  # key/value heads; h_kv < h is grouped-query attention (GQA)
    d_h: int = 64  # head size (h · d_h = d here)
    d_ff: int = 1536  # SwiGLU hidden width
    v: int = 49152  # vocabulary size
    n_ctx: int = 8192  # the longest context the model was trained on
    eps: float = 1e-5  # RMSNorm epsilon
    rope_base: float = 100000.0  # RoPE θ base: pair i turns by m · base^(-2i/d_h)
    tied: bool = True  # LM head = embedding table transposed
    name: str = ""
    rope_layout: str = "interleaved"  # RoPE's pairs: (x_2i, x_2i+1) as GGUF stores SmolLM2, or "half": (x_i, x_i+d_h/2)

    def __post_init__(self):
        """Refuse a config no model can have, naming the field: sizes are whole numbers ≥ 1, each
        key/value head serves a whole group of query heads, RoPE turns pairs of features, and
        eps and the RoPE base are positive. d need not equal h · d_h: W_q is (d, h·d_h) and W_o
        (h·d_h, d), so no shape divides d by h (Mistral-Nemo has d = 5120, h · d_h = 4096)."""
        checks.llama_config(self)
        for f in ("L", "d", "h", "h_kv", "d_h", "d_ff", "v", "n_ctx"):
            object.__setattr__(self, f, int(getattr(self, f)))  # NumPy integers and 0-d arrays become plain numbers
        object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "rope_base", float(self.rope_base))

    def parameter_count(self) -> int:
        """The weights' numbers, counted without drawing them (a config may ask for 2⁴⁰): per layer W_q, W_k, W_v,
        W_o, the SwiGLU's three matrices and two RMSNorm gains; then W_E, the final norm, and W_out unless tied.
        SmolLM2-135M's defaults give 134,515,008, the count Hugging Face publishes."""
        d, h, h_kv, d_h, d_ff = self.d, self.h, self.h_kv, self.d_h, self.d_ff
        layer = d * (h + 2 * h_kv) * d_h + h * d_h * d + 3 * d * d_ff + 2 * d
        return self.L * layer + self.v * d * (1 if self.tied else 2) + d


@dataclass
class LayerWeights:
    """One decoder block, every matrix as (d_in, d_out) so that y = x @ W."""
    attn_norm: Any  # (d,)
    W_q: Any  # (d, h·d_h), each head's columns in the order of cfg.rope_layout (GGUF's: interleaved pairs)
    W_k: Any  # (d, h_kv·d_h), same order
    W_v: Any  # (d, h_kv·d_h)
    W_o: Any  # (h·d_h, d)
    ffn_norm: Any  # (d,)
    W_gate: Any  # (d, d_ff)
    W_up: Any  # (d, d_ff)
    W_down: Any  # (d_ff, d)


@dataclass
class LlamaWeights:
    W_E: Any  # (v, d) token embedding table, also the LM head when tied
    layers: list  # L × LayerWeights
    norm: Any  # (d,) final RMSNorm
    W_out: Any = None  # (d, v) untied LM head, None when tied
