"""Greedy translation with the encoder–decoder of seq2seq.py: the slow version and the fast one.

Both start from BOS and append the argmax token until every row has written EOS (or max_len
tokens). What each step recomputes is the difference:

    uncached (readable)                           cached (fast)
    encoder: once                                 encoder: once
    every step, the decoder on the whole          every step, the decoder on the ONE new token:
    prefix: self-attention K, V of all t tokens,    self-attention K, V of that token, appended to a
    cross-attention K = z C_k, V = z C_v of         KVCache; cross-attention K, V read from a table
    every layer, again and again                    made once per layer before the first step

Cross-attention's keys and values depend only on the source, which does not change while the
target grows: L_dec projections of z in all, instead of L_dec per step. `counts` (a dict) tallies
them: "cross_kv" = how many times some layer computed z C_k and z C_v, "encoder" = encoder runs.
The two give the same tokens, and the same cross-attention rows (tests/test_train_seq2seq.py).
"""
from __future__ import annotations

from . import seq2seq_decode_checks
from ..core.sampling_checks import step_logits
from ..backend import get_xp
from ..require import checked_by
from ..core.attention import scaled_dot_product_attention
from ..core.heads import merge_heads, split_heads
from ..core.kv_cache import KVCache
from ..core.layers import ffn, layer_norm, relu
from ..models.encoder_decoder_params import seq2seq_decoder_weights
from .seq2seq import embed_tokens, seq2seq_decoder, seq2seq_encode

__all__ = ["translate_greedy", "translate_greedy_uncached"]


def tally(counts, key: str, k: int):
    if counts is not None:
        counts[key] = counts.get(key, 0) + k


def next_tokens(logits, done, pad: int):  # [b, v], [b] bool -> [b] int64: argmax, PAD once a row is done
    xp = get_xp(logits)
    return xp.where(done, pad, xp.astype(xp.argmax(logits, axis=-1), xp.int64))


@checked_by(seq2seq_decode_checks.translate_greedy_uncached)
def translate_greedy_uncached(params: dict, cfg, src_ids, src_lengths, max_len: int, *, bos: int = 1, eos: int = 2,
                              pad: int = 0, counts=None):
    # [b, n_src], [b] -> ids [b, n_out], cross-attention rows [L_dec, b, h, n_out, n_src]
    """Greedy decoding the slow, obvious way: at step t, run the decoder on BOS + the t tokens so far
    and keep the last position's argmax. Returns the tokens written (EOS included, PAD after it)
    and, for each step, the cross-attention weights of the position that wrote it."""
    xp = get_xp(params["W_E"])
    z, _, cross_mask = seq2seq_encode(params, src_ids, cfg, src_lengths)  # [b, n_src, d]
    tally(counts, "encoder", 1)
    b = z.shape[0]
    prefix = xp.full((b, 1), bos, dtype=xp.int64)  # [b, 1]
    done = xp.zeros((b,), dtype=xp.bool)
    rows = []
    for _ in range(max_len):
        y, saved = seq2seq_decoder(params, prefix, z, cfg, cross_mask)  # [b, t + 1, d]: every position again
        tally(counts, "cross_kv", cfg.L_dec)  # each layer projected z to K and V once more
        logits = y[:, -1, :] @ params["W_E"].mT  # [b, v]
        step_logits(logits, len(rows))  # NaN or +inf: refused, never argmaxed to PAD
        token = next_tokens(logits, done, pad)  # [b]
        rows.append(xp.stack([s["cross"]["P"][:, :, -1:, :] for s in saved]))  # [L_dec, b, h, 1, n_src]
        prefix = xp.concat([prefix, token[:, None]], axis=1)  # [b, t + 2]
        done = done | (token == eos)
        if bool(xp.all(done)):
            break
    return prefix[:, 1:], xp.concat(rows, axis=3)


def cached_step(params, cfg, token, t, cache, cross_kv, cross_mask):
    # [b, 1] at position t -> logits [b, v], cross weights [L_dec, b, h, 1, n_src]
    """One new token through the decoder: its own K, V appended to the cache; cross K, V from the table.
    Each layer is seq2seq_decoder_layer's lines (models/encoder_decoder.py) on one query row, its
    attentions' keys and values read from the cache and the table instead of projected again."""
    xp = get_xp(params["W_E"])
    y = embed_tokens(token, params["W_E"], t)  # [b, 1, d], position t
    weights = []
    for l in range(cfg.L_dec):
        lw = seq2seq_decoder_weights(params, l)  # the dict's arrays, no copy
        # 1. masked self-attention, KV cache: the new query reads positions 0 … t, all of them earlier
        q = split_heads(y @ lw.self_attn.W_q, cfg.h)  # [b, h, 1, d_h]
        k, v = cache.update(l, split_heads(y @ lw.self_attn.W_k, cfg.h),
                            split_heads(y @ lw.self_attn.W_v, cfg.h))  # [b, h, t + 1, d_h] each
        o = scaled_dot_product_attention(q, k, v)  # [b, h, 1, d_h]
        y = layer_norm(y + merge_heads(o) @ lw.self_attn.W_o, lw.ln1_g, lw.ln1_b, cfg.eps)
        # 2. cross-attention: K, V of the source made once, before the first step
        q = split_heads(y @ lw.cross_attn.W_q, cfg.h)  # [b, h, 1, d_h]
        k_c, v_c = cross_kv[l]  # [b, h, n_src, d_h] each
        o, P = scaled_dot_product_attention(q, k_c, v_c, cross_mask, return_weights=True)
        y = layer_norm(y + merge_heads(o) @ lw.cross_attn.W_o, lw.ln2_g, lw.ln2_b, cfg.eps)
        # 3. FFN
        f = ffn(y, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=relu)  # [b, 1, d]
        y = layer_norm(y + f, lw.ln3_g, lw.ln3_b, cfg.eps)  # [b, 1, d]
        weights.append(P)  # [b, h, 1, n_src]
    cache.advance(1)
    return y[:, -1, :] @ params["W_E"].mT, xp.stack(weights)  # [b, v], [L_dec, b, h, 1, n_src]


@checked_by(seq2seq_decode_checks.translate_greedy)
def translate_greedy(params: dict, cfg, src_ids, src_lengths, max_len: int, *, bos: int = 1, eos: int = 2,
                     pad: int = 0, counts=None):
    # [b, n_src], [b] -> ids [b, n_out], cross-attention rows [L_dec, b, h, n_out, n_src]
    """Greedy translation with the decoder's self-attention KV cache and the encoder's cross-attention
    keys and values computed once per layer. ids: the tokens written, n_out ≤ max_len (decoding stops
    when every row has written EOS; a finished row gets PAD). Logits holding NaN or +inf (finite
    weights whose products overflow) are refused, naming the step. Row i of the cross-attention weights is
    what the position that wrote token i read in the source; equal to `translate_greedy_uncached`.

    counts: None, or a dict to which "encoder" (1) and "cross_kv" (L_dec) are added.

    >>> import numpy as np
    >>> from .seq2seq import Seq2SeqConfig, init_seq2seq
    >>> cfg = Seq2SeqConfig(v=11, d=8, h=2, d_ff=12, L_enc=1, L_dec=2, n_max=8)
    >>> fast, slow, params, src, n = {}, {}, init_seq2seq(cfg), np.array([[3, 4, 5]]), np.array([3])
    >>> ids, rows = translate_greedy(params, cfg, src, n, 6, counts=fast)
    >>> ids_slow, _ = translate_greedy_uncached(params, cfg, src, n, 6, counts=slow)
    >>> ids.shape, rows.shape, bool((ids == ids_slow).all()), fast["cross_kv"], slow["cross_kv"]
    ((1, 6), (2, 1, 2, 6, 3), True, 2, 12)
    """
    xp = get_xp(params["W_E"])
    z, _, cross_mask = seq2seq_encode(params, src_ids, cfg, src_lengths)  # [b, n_src, d]
    tally(counts, "encoder", 1)
    cross_kv = []
    for l in range(cfg.L_dec):  # the source's keys and values: once per layer, for every step
        C = seq2seq_decoder_weights(params, l).cross_attn  # C_q, C_k, C_v, C_o
        cross_kv.append((split_heads(z @ C.W_k, cfg.h),  # [b, h, n_src, d_h]
                         split_heads(z @ C.W_v, cfg.h)))
    tally(counts, "cross_kv", cfg.L_dec)
    b = z.shape[0]
    cache = KVCache(cfg.L_dec, b, cfg.h, max_len, cfg.d_h, dtype=z.dtype, xp=xp)  # self-attention K, V
    token = xp.full((b, 1), bos, dtype=xp.int64)  # [b, 1]
    done = xp.zeros((b,), dtype=xp.bool)
    out, rows = [], []
    for t in range(max_len):
        logits, w = cached_step(params, cfg, token, t, cache, cross_kv, cross_mask)  # [b, v], [L_dec, b, h, 1, n_src]
        step_logits(logits, t)  # NaN or +inf: refused, never argmaxed to PAD
        nxt = next_tokens(logits, done, pad)  # [b]
        out.append(nxt)
        rows.append(w)
        done = done | (nxt == eos)
        token = nxt[:, None]  # [b, 1]
        if bool(xp.all(done)):
            break
    return xp.stack(out, axis=1), xp.concat(rows, axis=3)
