"""The refusals of decoding's bookkeeping: the KV caches, the paged cache's block tables, packed rows
and the sampling settings. Part of `checks` (which names every one of them, so each door reads
`checks.NAME`); kept apart because these checks look at state (a cache's length, its free blocks)
or at host-side lists, where the rest of `checks` looks at array shapes.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from ..backend import namespace, to_host, to_numpy
from ..require import require_array, require_bool, require_float, require_int, require_real

__all__ = [
    "kv_cache_init", "kv_cache_update", "kv_cache_advance", "paged_kv_cache_init",
    "paged_kv_cache_free_sequence", "paged_kv_cache_write", "paged_kv_cache_extend",
    "paged_kv_cache_gather", "paged_kv_cache_update", "paged_kv_cache_advance", "paged_attention",
    "pack_documents", "unpack", "packing_report", "check_sampling", "logits_row_max", "step_logits", "greedy",
    "filter_logits", "next_token_probs", "sample_next"
]


# --- kv_cache.py (the caches' shared pieces serve paged_kv.py too) --------------------------
def cache_layer(layer, n_layers):
    """layer must index one of the cache's n_layers layers."""
    require_int(layer=layer)
    if layer >= n_layers:
        raise ValueError(f"layer={layer} is out of range: the cache holds {n_layers} layers")


def new_kv(k_new, v_new, **dims):  # dims: name -> size in order, None for any (t, or b)
    """k_new and v_new float arrays of one shape, of rank len(dims), matching every size given."""
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        require_float(name, x)
        if x.ndim != len(dims) or any(s is not None and n != s for n, s in zip(x.shape, dims.values())):
            names, sizes = ", ".join(dims), ", ".join(d if s is None else str(s) for d, s in dims.items())
            raise ValueError(f"{name} must be ({names}) = ({sizes}), got shape {tuple(x.shape)}")
    if tuple(k_new.shape) != tuple(v_new.shape):
        raise ValueError(f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} must have one shape")


def written_ahead(call, t, length, written, holder, fill):
    """Moving on by t positions needs every layer written up to length + t."""
    require_int(t=t)
    short = [i for i, w in enumerate(written) if w < length + t]
    if short:
        i = short[0]
        raise ValueError(f"{call} past what was written: {holder} holds {length} positions, layer {i} has only "
                         f"{written[i]} written; call {fill} on every layer with the new positions first")


def cache_dtype(dtype, xp):
    """None (float32) or a real floating type: an integer cache would round every key and value."""
    if dtype is None:
        return
    try:
        ok = namespace(xp).isdtype(dtype, "real floating")
    except (TypeError, ValueError, AttributeError):  # a string, a Python type, NumPy's bfloat16
        try:
            ok = np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"
        except TypeError:
            ok = False
    if not ok:
        raise TypeError(f"dtype must be a floating-point type (float16, bfloat16, float32, float64): keys and "
                        f"values are real numbers, got dtype={getattr(dtype, '__name__', dtype)!r}")


def kv_cache_init(self, n_layers, b, h_kv, n_max, d_h, *, dtype, xp):
    namespace(xp)  # an unknown backend name is refused first
    require_int(n_layers=n_layers, b=b, h_kv=h_kv, n_max=n_max, d_h=d_h, low=1)  # 4.7 or True is no size
    cache_dtype(dtype, xp)


def kv_cache_update(self, layer, k_new, v_new):
    cache_layer(layer, len(self.k))
    b, h_kv, _, d_h = self.k[0].shape
    new_kv(k_new, v_new, b=b, h_kv=h_kv, t=None, d_h=d_h)
    t = k_new.shape[2]
    if self.length + t > self.n_max:
        raise ValueError(f"KV cache overflow: {self.length} cached + {t} new tokens > n_max={self.n_max}; "
                         "allocate a larger cache (n_max) or generate fewer tokens")


def kv_cache_advance(self, t):
    written_ahead(f"advance(t={t})", t, self.length, self.written, "the cache", "update(layer, k, v)")


# --- paged_kv.py ----------------------------------------------------------------------------
def paged_kv_cache_init(self, n_layers, b, h_kv, n_max, d_h, *, block_size, n_blocks, dtype, xp):
    namespace(xp)  # an unknown backend name is refused first
    require_int(n_layers=n_layers, h_kv=h_kv, n_max=n_max, d_h=d_h, block_size=block_size, low=1)
    require_int(b=b)  # b = 0: sequences come one by one through add_sequence
    if n_blocks is None:
        n_blocks = int(b) * math.ceil(int(n_max) / int(block_size))  # 0 when b = 0: then n_blocks must be given
    require_int(n_blocks=n_blocks, low=1)
    cache_dtype(dtype, xp)


def open_sequence(cache, seq):
    """seq must be the id of an open sequence of the paged cache."""
    if seq not in cache.tables:
        raise ValueError(f"unknown sequence id {seq!r}: open ones are {sorted(cache.tables)}")


def room_for(cache, seqs, n_tokens):
    """Every sequence of seqs can grow to n_tokens positions: within n_max, and the pool holds the
    blocks they still need (refused before any block is taken, so a failed write holds none)."""
    for seq in seqs:
        if n_tokens > cache.n_max:
            raise ValueError(f"KV cache overflow: sequence {seq} would hold {n_tokens} tokens > n_max={cache.n_max}")
    if sum(cache.blocks_needed(seq, n_tokens) for seq in seqs) > len(cache.free):
        raise RuntimeError(f"KV block pool exhausted: all {cache.n_blocks} blocks of {cache.block_size} "
                           "positions are in use; free finished sequences or allocate more blocks")


def paged_kv_cache_free_sequence(self, seq):
    open_sequence(self, seq)


def paged_kv_cache_write(self, seq, layer, k_new, v_new):
    open_sequence(self, seq)
    cache_layer(layer, self.n_layers)
    new_kv(k_new, v_new, h_kv=self.h_kv, t=None, d_h=self.d_h)
    room_for(self, [seq], self.lengths[seq] + k_new.shape[1])


def paged_kv_cache_extend(self, seq, t):
    open_sequence(self, seq)
    written_ahead(f"extend(seq={seq}, t={t})", t, self.lengths[seq], self.written[seq], f"sequence {seq}",
                  "write(seq, layer, k, v)")


def paged_kv_cache_gather(self, seq, layer, n):
    open_sequence(self, seq)
    cache_layer(layer, self.n_layers)
    n = self.lengths[seq] if n is None else n
    require_int(n=n)
    if n > self.written[seq][layer]:
        raise ValueError(f"gather(seq={seq}, layer={layer}, n={n}): only {self.written[seq][layer]} positions "
                         f"of sequence {seq} are written in layer {layer}")


def paged_kv_cache_update(self, layer, k_new, v_new):
    cache_layer(layer, self.n_layers)
    new_kv(k_new, v_new, b=len(self.batch), h_kv=self.h_kv, t=None, d_h=self.d_h)  # the whole batch, once
    room_for(self, self.batch, self.length + k_new.shape[2])


def paged_kv_cache_advance(self, t):
    for seq in self.batch:  # all checked before any moves on
        paged_kv_cache_extend(self, seq, t)


def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal, scale):
    for name, t in (("q", q), ("k_pool", k_pool), ("v_pool", v_pool)):
        require_float(name, t)
    if q.ndim != 3:
        raise ValueError(f"q must be (h, n_q, d_h) for one sequence, got shape {tuple(q.shape)}")
    if k_pool.ndim != 4 or tuple(k_pool.shape) != tuple(v_pool.shape):
        raise ValueError(f"k_pool and v_pool must both be (n_blocks, h_kv, block_size, d_h), got shapes "
                         f"{tuple(k_pool.shape)} and {tuple(v_pool.shape)}")
    h, n_q, d_h = q.shape
    n_blocks, h_kv, bs, d_k = k_pool.shape
    if d_h == 0 or d_h != d_k:
        raise ValueError(f"q's head size d_h={d_h} must be ≥ 1 and equal the pool's d_h={d_k}")
    if h_kv == 0 or h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    require_int(n_tokens=n_tokens)
    require_bool(causal=causal)
    if scale is not None:  # None: 1/√d_h
        require_real(scale=scale)
    table = to_numpy(block_table).tolist() if hasattr(block_table, "shape") else block_table
    if isinstance(table, (str, bytes)) or not isinstance(table, Sequence):
        raise TypeError(f"block_table must be a list of block ids, got {type(block_table).__name__}")
    bad = [b for b in table if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not 0 <= b < n_blocks]
    if bad:
        raise ValueError(f"block_table must hold integer block ids in [0, {n_blocks}), got {bad}")
    if n_q == 0:
        raise ValueError(f"q's query count n_q must be ≥ 1, got n_q={n_q}")
    if not n_q <= n_tokens <= len(table) * bs:  # the queries are the last n_q of the positions the table holds
        raise ValueError(f"n_tokens must lie in [n_q, blocks · block_size] = [{n_q}, {len(table)} · {bs}], "
                         f"got n_tokens={n_tokens}")


# --- packing.py -----------------------------------------------------------------------------
def documents(docs):
    """A list of token-id sequences: integers, at least one token each."""
    if isinstance(docs, (str, bytes)) or not hasattr(docs, "__len__"):
        raise TypeError(f"docs must be a list of token-id sequences, got {type(docs).__name__}")
    for i, d in enumerate(docs):
        a = np.asarray(d)
        if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise TypeError(f"document {i} must be a 1-D sequence of integer ids, got shape {a.shape}, "
                            f"dtype {a.dtype}")
        if a.size == 0:
            raise ValueError(f"document {i} is empty: every document needs at least one token")


def documents_fit(lengths, n_ctx):
    """A document is never split: each must fit in one row of n_ctx tokens."""
    too_long = [(i, n) for i, n in enumerate(lengths) if n > n_ctx]
    if too_long:
        i, n = too_long[0]
        raise ValueError(f"document {i} has {n} tokens, more than a row of n_ctx={n_ctx}; "
                         "split it or raise n_ctx")


def pack_documents(docs, n_ctx, *, pad_id, longest_first):
    require_int(n_ctx=n_ctx, low=1)
    require_int(pad_id=pad_id, low=None)
    require_bool(longest_first=longest_first)
    documents(docs)
    documents_fit([len(np.asarray(d)) for d in docs], n_ctx)


def unpack(x, packed):
    require_array("x", x)
    if tuple(x.shape[:2]) != (packed.rows, packed.n_ctx):
        raise ValueError(f"x of shape {tuple(x.shape)} does not start with the packed rows "
                         f"(b, n_ctx) = ({packed.rows}, {packed.n_ctx})")


def packing_report(lengths, n_ctx, *, batch):
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError(f"lengths must be a list of token counts, got {type(lengths).__name__}")
    lengths = list(lengths)
    if not lengths:
        raise ValueError("lengths must be a non-empty list of token counts, got lengths=[]")
    require_int(**{f"lengths[{i}]": n for i, n in enumerate(lengths)}, low=1)  # every document has a token
    require_int(batch=len(lengths) if batch is None else batch, low=1)
    require_int(n_ctx=n_ctx, low=1)
    documents_fit([int(n) for n in lengths], n_ctx)


# --- sampling.py ----------------------------------------------------------------------------
def setting(name, value, inside, want):
    """Raise ValueError "NAME must WANT, got NAME=VALUE" unless value is a real number in range.
    A real number is what require_real takes (Python's, NumPy's, a 0-d array; finite, not a
    bool); its TypeError becomes a ValueError here, the one error type of a bad setting."""
    try:
        require_real(**{name: value})
        ok = inside(float(value))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must {want}, got {name}={value!r}")


def check_sampling(temperature, top_k, top_p):
    setting("temperature", temperature, lambda t: t >= 0, "be a finite number ≥ 0 (0 = greedy)")
    if top_k is not None:
        require_int(top_k=top_k, low=1)
    if top_p is not None:
        setting("top_p", top_p, lambda p: 0.0 < p <= 1.0, "lie in (0, 1] or be None")


def logits_row_max(x):  # [..., v] NumPy, floating, non-empty
    """A possible token in every row: NaN or +inf has no softmax. One pass: a finite row max means
    no NaN (max propagates it), no +inf, and not all -inf. A model calls this on its own logits."""
    if not np.isfinite(x.max(axis=-1)).all():
        if np.isnan(x).any():
            raise ValueError("logits contain NaN")
        if np.isposinf(x).any():
            raise ValueError("logits contain +inf")
        raise ValueError("a row of logits is all -inf: no token is possible")


def step_logits(logits, step: int):  # [b, v] logits of one generation step, any backend
    """A possible token in every row of a generation step's logits, or one line naming the step: broken
    weights, finite weights whose products overflow, or a float16 overflow give NaN or +inf, and an
    argmax over them would pick a meaningless id. Every generation loop calls this before it samples."""
    try:
        logits_row_max(to_host(logits))
    except ValueError as e:
        raise ValueError(f"the model's {e} at generation step {step}: no token can be chosen from them") from None


def host_logits(logits):
    """Floating-point logits with a vocabulary axis, and a possible token in every row."""
    x = to_host(logits)  # the check looks at the host copy the formula samples from
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"logits must be floating point, got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"logits must have a vocabulary axis of size ≥ 1, got shape {x.shape}")
    logits_row_max(x)


def greedy(logits):
    host_logits(logits)


def filter_logits(logits, temperature, top_k, top_p):
    check_sampling(temperature, top_k, top_p)
    host_logits(logits)


def next_token_probs(logits, temperature, top_k, top_p):
    filter_logits(logits, temperature, top_k, top_p)


def sample_next(logits, temperature, top_k, top_p, rng):
    filter_logits(logits, temperature, top_k, top_p)
