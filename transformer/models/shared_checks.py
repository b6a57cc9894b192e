"""Pieces of the models' refusals that several check modules share: a layer and a head to read
(`MiniLM.attention_weights` in bert_checks.py, `Llama.attention_weights` in llama_checks.py)."""
from __future__ import annotations

from ..require import require_int


def layer_and_head(L: int, h: int, layer, head):
    """layer and head None, or Python-style indices into the L layers and h heads (−1 the last)."""
    for name, value, count in (("layer", layer, L), ("head", head, h)):
        if value is not None:
            require_int(low=None, **{name: value})
            if not -count <= value < count:
                raise ValueError(f"{name}={value} does not exist: the model has {count} {name}s "
                                 f"(0 … {count - 1}, or -1 for the last)")
