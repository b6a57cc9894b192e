"""The workbook's checker (`python -m transformer check`): it passes the package's own functions, and it
catches each known mistake with the hint written for it.

Each planted mistake below is learner-style code with one slip, written here (not produced by the checker's
own variants); the test asserts the checker fails it and prints the intended hint. Bad files (a syntax
error, a missing import, a wrong return type, a loop that never ends) each give one clear line.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import transformer as T
from transformer.tutor import LESSON_SPECS, check_file, format_report, workbook_files
from transformer.tutor.run import load_workbook_file

ROOT = Path(__file__).resolve().parents[1]


def write_workbook(folder: Path, lesson: str, source: str = "") -> Path:
    """A workbook file for `lesson`: the package's functions, then `source` redefining some of them."""
    imports = [f"from transformer import {s.name}" if hasattr(T, s.name) else  # or its module's (cuda_kernels, bpe …)
               f"from {s.reference.__module__} import {s.name}" for s in LESSON_SPECS[lesson]]
    path = folder / f"{lesson}_planted.py"
    path.write_text(f"import math\nimport numpy as np\n{'; '.join(imports)}\n\n" + textwrap.dedent(source),
                    encoding="utf-8")
    return path


def result_of(report, name):
    return next(r for r in report.results if r.name == name)


@pytest.mark.parametrize("lesson", sorted(LESSON_SPECS))
def test_the_package_own_functions_pass(lesson, tmp_path):
    report = check_file(write_workbook(tmp_path, lesson), lesson, use_torch=True)
    assert report.ok and all(r.status == "passed" for r in report.results), format_report(report)


def test_the_stubs_are_reported_not_written_and_exit_0():
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "all", "--workbook", str(ROOT / "workbook")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = workbook_files(ROOT / "workbook")
    assert set(files) == set(LESSON_SPECS)
    assert proc.stdout.count("not written yet") == sum(len(s) for s in LESSON_SPECS.values()), proc.stdout
    assert "FAILED" not in proc.stdout and proc.stderr == ""


def test_a_copy_kept_for_one_lesson_stops_only_that_lesson(tmp_path):
    """Two files for lesson 09 are refused when 09 is checked (the last name's was checked, in silence); lesson 03,
    alone in its file, is still found."""
    for name in ("03_attention.py", "09_flash_tiling.py", "09_flash_tiling.orig.py"):
        (tmp_path / name).write_text("")
    assert workbook_files(tmp_path, ["03"]) == {"03": tmp_path / "03_attention.py"}
    with pytest.raises(ValueError, match=r"^lesson 09 has 2 files in .*: 09_flash_tiling.orig.py, 09_flash_tiling.py"):
        workbook_files(tmp_path, ["03", "09"])


# a learner's paged_attention that gathers the blocks first, with one slip filled in by .format: the
# order of the blocks, the cut at n_tokens, the first query's position, the heads' repeat
PAGED = """
    def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None):
        h, n_q, d_h = q.shape
        K = np.concatenate([k_pool[b] for b in {blocks}], axis=1)[None]{cut}
        V = np.concatenate([v_pool[b] for b in {blocks}], axis=1)[None]{cut}
        rep = h // K.shape[1]
        K, V = K[0], V[0]
        K, V = ({heads} for A in (K, V))
        scores = q @ K.transpose(0, 2, 1) * (scale or 1 / np.sqrt(d_h))
        q_pos = np.arange(n_q)[:, None] + {first}
        k_pos = np.arange(K.shape[1])[None, :]
        if causal:
            scores = np.where(k_pos <= q_pos, scores, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ V
"""

# a learner's decoder layer with the cross-attention's call and the last line filled in by .format
DECODER = """
    from transformer import causal_mask, ffn, layer_norm, multi_head_attention

    def seq2seq_decoder_layer(y, z, lw, h, *, causal=True, self_mask=None, cross_mask=None, activation=None,
                              eps=1e-5):
        keep = self_mask
        if causal:
            keep = causal_mask(y.shape[1]) if keep is None else keep & causal_mask(y.shape[1])
        a, p_self = multi_head_attention(y, lw.self_attn, h, mask=keep, return_weights=True)
        y1 = layer_norm(y + a, lw.ln1_g, lw.ln1_b, eps)
        c, p_cross = multi_head_attention({cross}, return_weights=True)
        y2 = layer_norm(y1 + c, lw.ln2_g, lw.ln2_b, eps)
        f = ffn(y2, lw.W_1, lw.W_2, lw.b_1, lw.b_2)
        return {out}, p_self, p_cross
"""

# a learner's key_tiles_read with loops (no doc), the causal bound and the read test filled in by .format
TILES = """
    def key_tiles_read(n, block_q, block_k, *, causal, doc=None):
        n_q_tiles, n_k_tiles = -(-n // block_q), -(-n // block_k)
        out = np.zeros((1, n_q_tiles, n_k_tiles), bool)
        for t in range(n_q_tiles):
            end = n
            if causal:
                end = {end}
            for j in range(n_k_tiles):
                out[0, t, j] = {read}
        return out
"""

# a learner's mma_fragment_layout for the float16 shape, C's lane and register and A's register filled in by
# .format (the TF32 shape and B as the package lays them out)
FRAGMENT = """
    def mma_fragment_layout(operand, shape="m16n8k16"):
        if shape == "m16n8k8" or operand == "B":
            return cuda_kernels.mma_fragment_layout(operand, shape)
        r, c = np.indices((16, 8) if operand == "C" else (16, 16))
        if operand == "C":
            return {lane_c}, {reg_c}, np.zeros_like(r)
        return 4 * (r % 8) + (c % 8) // 2, {reg_a}, c % 2
"""

# (lesson, function, the learner's code with one slip, a phrase of the intended hint)
PLANTED = [
    ("03", "softmax", """
        def softmax(x, axis=-1, mask=None):
            if mask is not None:
                x = np.where(mask, x, -np.inf)
            e = np.exp(x)
            z = e.sum(axis=axis, keepdims=True)
            return e / np.where(z == 0, 1, z)
        """, "subtract the row max"),
    ("03", "softmax", """
        def softmax(x, axis=-1, mask=None):
            if mask is not None:
                x = np.where(mask, x, -np.inf)
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
        """, "zeros, not NaN"),
    ("03", "scaled_dot_product_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // k.shape[1], 1)
            s = q @ k.swapaxes(-1, -2) / q.shape[-1]
            p = softmax(s, mask=mask)
            return (p @ v, p) if return_weights else p @ v
        """, "divided by d_h"),
    ("03", "scaled_dot_product_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // k.shape[1], 1)
            s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = np.where(mask, -np.inf, s)
            p = softmax(s)
            return (p @ v, p) if return_weights else p @ v
        """, "mask polarity"),
    ("03", "scaled_dot_product_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            s = q @ k / math.sqrt(q.shape[-1])
            p = softmax(s, mask=mask)
            return (p @ v, p) if return_weights else p @ v
        """, "K is not transposed"),
    ("03", "scaled_dot_product_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
            s = (q @ k.swapaxes(-1, -2)) * scale
            p = softmax(s.astype(np.float64), mask=mask)
            out = (p @ v).astype(q.dtype)
            return (out, p.astype(q.dtype)) if return_weights else out
        """, "h_kv < h"),
    ("04", "split_heads", """
        def split_heads(x, h):
            b, n, d = x.shape
            return x.reshape(b, h, n, d // h)
        """, "reshape alone"),
    ("04", "merge_heads", """
        def merge_heads(x):
            b, h, n, d_h = x.shape
            return x.reshape(b, n, h * d_h)
        """, "reshape alone"),
    ("05", "causal_mask", """
        def causal_mask(n_q, n_k=None, offset=None, *, xp=None):
            n_k = n_q if n_k is None else n_k
            return np.tril(np.ones((n_q, n_k), dtype=bool), k=-1)
        """, "the diagonal"),
    ("05", "causal_mask", """
        def causal_mask(n_q, n_k=None, offset=None, *, xp=None):
            n_k = n_q if n_k is None else n_k
            return np.tril(np.ones((n_q, n_k), dtype=bool))
        """, "LAST n_q positions"),
    ("06", "KVCache.update", """
        class KVCache(KVCache):
            def update(self, layer, k_new, v_new):
                end = self.length + k_new.shape[2]
                self.k[layer][:, :, self.length:end] = k_new
                self.v[layer][:, :, self.length:end] = v_new
                self.written[layer] = end
                return k_new, v_new
        """, "every position written so far"),
    ("07", "repeat_kv", """
        def repeat_kv(x, n_rep):
            return np.tile(x, (1, n_rep, 1, 1))
        """, "np.tile"),
    ("08", "online_attention_update", """
        def online_attention_update(m, l, O, S_j, V_j):
            m_new = np.maximum(m, S_j.max(axis=-1, keepdims=True))
            safe = np.where(m_new == -np.inf, 0, m_new)
            P = np.exp(S_j - safe)
            alpha = np.exp(m - safe)
            return m_new, alpha * l + P.sum(-1, keepdims=True), O + P @ V_j
        """, "α is not applied to O"),
    ("08", "merge_softmax_stats", """
        def merge_softmax_stats(m_a, l_a, m_b, l_b):
            return np.maximum(m_a, m_b), l_a + l_b
        """, "rescaled to the common max"),
    ("09", "flash_attention", """
        def flash_attention(q, k, v, *, causal=False, block_q=None, block_k=None):
            k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // k.shape[1], 1)
            s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
            if causal:
                s = np.where(causal_mask(q.shape[2], k.shape[2]), s, -np.inf)
            return (np.exp(s - s.max(-1, keepdims=True)) @ v).astype(q.dtype)
        from transformer import causal_mask
        """, "not normalised"),
    ("10", "layer_norm", """
        def layer_norm(x, gamma, beta=None, eps=1e-5):
            mu = x.mean(-1, keepdims=True)
            var = x.var(-1, ddof=1, keepdims=True)
            y = (x - mu) / np.sqrt(var + eps) * gamma
            return y if beta is None else y + beta
        """, "biased one"),
    ("10", "rms_norm", """
        def rms_norm(x, gamma, eps=1e-6):
            x = x - x.mean(-1, keepdims=True)
            return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * gamma
        """, "does not subtract the mean"),
    ("10", "swiglu_ffn", """
        def swiglu_ffn(x, W_gate, W_up, W_down):
            up = x @ W_up
            return ((x @ W_gate) * (up / (1 + np.exp(-up)))) @ W_down
        """, "SiLU goes on the gate"),
    ("11", "filter_logits", """
        def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
            x = np.asarray(logits, dtype=float)
            if temperature == 0:
                return np.where(x == x.max(-1, keepdims=True), x, -np.inf)
            x = x / temperature
            if top_k is not None:
                kth = np.sort(x, axis=-1)[..., -top_k][..., None]
                x = np.where(x >= kth, x, -np.inf)
            if top_p is not None:
                p = np.exp(x - x.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
                order = np.argsort(-p, axis=-1)
                cum = np.take_along_axis(p, order, -1).cumsum(-1)
                keep_sorted = cum <= top_p
                keep_sorted[..., 0] = True
                keep = np.zeros_like(keep_sorted)
                np.put_along_axis(keep, order, keep_sorted, -1)
                x = np.where(keep, x, -np.inf)
            return x
        """, "crosses p"),
    ("18", "softmax_backward", """
        def softmax_backward(dP, P):
            return P * dP
        """, "row-sum term"),
    ("18", "adamw_step", """
        def adamw_step(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
            state.t += 1
            b1, b2 = betas
            for name, p in params.items():
                g = grads[name] + (weight_decay * p if p.ndim >= 2 else 0)
                state.m[name] = b1 * state.m[name] + (1 - b1) * g
                state.v[name] = b2 * state.v[name] + (1 - b2) * g * g
                m_hat = state.m[name] / (1 - b1 ** state.t)
                v_hat = state.v[name] / (1 - b2 ** state.t)
                p -= lr * m_hat / (np.sqrt(v_hat) + eps)
        """, "decoupled weight decay"),
    ("02", "sinusoidal_positions", """
        def sinusoidal_positions(n, d, *, base=10000.0, xp=None, dtype=None):
            angle = np.arange(n)[:, None] / base ** (np.arange(0, d, 2) / d)[None, :]
            return np.concatenate([np.sin(angle), np.cos(angle)], -1).astype(dtype or np.float32)
        """, "sin and cos alternate"),
    ("02", "apply_rope_half", """
        def apply_rope_half(x, cos, sin):
            x1, x2 = x[..., 0::2], x[..., 1::2]
            return np.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).reshape(x.shape)
        """, "interleaved layout"),
    ("01", "embed", """
        def embed(ids, W_E):
            return W_E.T[ids]
        """, "look up rows of W_E"),
    ("01", "lm_head", """
        def lm_head(x, W_E=None, *, W_out=None):
            return x @ W_E
        """, "reads the table backwards"),
    ("01", "lm_head", """
        def lm_head(x, W_E=None, *, W_out=None):
            return x @ W_E.T
        """, "with W_out given (untied)"),
    ("05", "sliding_window_mask", """
        def sliding_window_mask(n_q, w, n_k=None, offset=None, *, causal=True, xp=None):
            n_k = n_q if n_k is None else n_k
            offset = n_k - n_q if offset is None else offset
            i = np.arange(n_q)[:, None] + offset
            j = np.arange(n_k)[None, :]
            return (j <= i) & (j >= i - w) if causal else np.abs(i - j) < w
        """, "the window holds w keys, the query itself included"),
    ("05", "sliding_window_mask", """
        def sliding_window_mask(n_q, w, n_k=None, offset=None, *, causal=True, xp=None):
            n_k = n_q if n_k is None else n_k
            i = np.arange(n_q)[:, None]
            j = np.arange(n_k)[None, :]
            return (j <= i) & (j > i - w) if causal else np.abs(i - j) < w
        """, "the queries are the last n_q positions"),
    ("04", "multi_head_attention", """
        from transformer import linear, scaled_dot_product_attention

        def multi_head_attention(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):
            h_kv = h if h_kv is None else h_kv
            c = x if context is None else context
            q = split_heads(linear(x, w.W_q, w.b_q), h)
            k, v = split_heads(linear(c, w.W_k, w.b_k), h_kv), split_heads(linear(c, w.W_v, w.b_v), h_kv)
            o, p = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
            out = merge_heads(o)
            return (out, p) if return_weights else out
        """, "merged and projected"),
    # lessons 12, 14, 16, 19
    ("12", "mean_pool", """
        def mean_pool(hidden, lengths):
            return hidden.mean(axis=1)
        """, "[PAD] rows do not count"),
    ("12", "mean_pool", """
        def mean_pool(hidden, lengths):
            real = np.arange(hidden.shape[1])[None, :] < lengths[:, None]
            return (hidden * real[:, :, None]).sum(axis=1) / hidden.shape[1]
        """, "divide by the number of real tokens"),
    ("12", "mean_pool", """
        def mean_pool(hidden, lengths):
            real = (np.arange(hidden.shape[1])[None, :] <= lengths[:, None])[:, :, None]
            return (hidden * real).sum(axis=1) / real.sum(axis=1)
        """, "j < length, not j ≤ length"),
    ("12", "mean_pool", """
        def mean_pool(hidden, lengths):
            real = np.arange(hidden.shape[1])[None, :] < lengths[:, None]
            return (hidden * real[:, :, None]).sum(axis=1) / lengths
        """, "lengths[:, None] of shape (b, 1)"),
    ("14", "paged_attention", """
        def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None):
            h, n_q, d_h = q.shape
            bs, rep = k_pool.shape[2], h // k_pool.shape[1]
            full = list(block_table)[:n_tokens // bs]  # the whole blocks only
            K = np.repeat(np.concatenate([k_pool[b] for b in full], axis=1), rep, axis=0)
            V = np.repeat(np.concatenate([v_pool[b] for b in full], axis=1), rep, axis=0)
            s = q @ K.swapaxes(-1, -2) * (1 / math.sqrt(d_h) if scale is None else scale)
            q_pos, k_pos = np.arange(n_tokens - n_q, n_tokens)[:, None], np.arange(K.shape[1])[None, :]
            s = np.where(k_pos <= q_pos, s, -np.inf) if causal else s
            m = s.max(-1, keepdims=True)
            e = np.exp(s - np.where(np.isfinite(m), m, 0))
            z = e.sum(-1, keepdims=True)
            return e / np.where(z == 0, 1, z) @ V
        """, "the last block may be partly filled"),  # no hint
    ("15", "seq2seq_decoder_layer", """
        import dataclasses
        from transformer import relu
        from transformer.models.encoder_decoder import seq2seq_decoder_layer as package_layer
        def seq2seq_decoder_layer(y, z, lw, h, *, causal=True, self_mask=None, cross_mask=None, activation=relu,
                                  eps=1e-5):
            return package_layer(y, z, dataclasses.replace(lw, b_1=None, b_2=None), h, causal=causal,
                                 self_mask=self_mask, cross_mask=cross_mask, activation=activation, eps=eps)
        """, "the FFN has biases"),  # no hint
    ("17", "mma_fragment_layout", """
        from transformer import cuda_kernels
        def mma_fragment_layout(operand, shape="m16n8k16"):
            lane, reg, half = cuda_kernels.mma_fragment_layout(operand, shape)
            return lane, half, reg
        """, "return (lane, reg, half) in that order"),  # told "check the order of your reshape"
    ("17", "mma_fragment_layout", """
        def mma_fragment_layout(operand, shape="m16n8k16"):
            r, c = np.indices((16, 8))
            if operand == "C":
                return 4 * r + c // 2, 2 * (r // 8) + c % 2, np.zeros_like(r)
            return cuda_kernels.mma_fragment_layout(operand, shape)
        """, "a warp has 32 lanes, 0 … 31"),  # no hint: lanes up to 63
    ("19", "induction_head_scores", """
        def induction_head_scores(maps, n_half):
            m, maps = n_half, np.asarray(maps)
            i = np.arange(1, 2 * m)
            return {"previous token": maps[..., i, i - 1].mean(-1),
                    "induction": np.diagonal(maps, -(m - 1), -2, -1).mean(-1)}
        """, "the whole diagonal (np.diagonal with offset −(m − 1))"),  # no hint
    ("12", "l2_normalize", """
        def l2_normalize(x, eps=1e-12):
            return x / np.sqrt((x ** 2).sum(axis=-1))
        """, "keep the length's axis (keepdims=True)"),
    ("12", "l2_normalize", """
        def l2_normalize(x, eps=1e-12):
            return x / (x ** 2).sum(axis=-1, keepdims=True)
        """, "the square root of the sum of squares"),
    ("12", "l2_normalize", """
        def l2_normalize(x, eps=1e-12):
            return x / np.linalg.norm(x, axis=-1, keepdims=True)
        """, "a zero row must stay zero"),
    ("12", "l2_normalize", """
        def l2_normalize(x, eps=1e-12):
            return x / np.linalg.norm(x, axis=0, keepdims=True)
        """, "over the last axis"),
    ("13", "count_parameters", """
        def count_parameters(config):
            c = config
            per_layer = 2 * c.d * c.h * c.d_h + 2 * c.d * c.h_kv * c.d_h + 3 * c.d * c.d_ff + 2 * c.d
            return c.v * c.d + c.L * per_layer + c.d + c.v * c.d
        """, "a tied head reuses the embedding table"),
    ("13", "count_parameters", """
        def count_parameters(config):
            c = config
            per_layer = 4 * c.d * c.h * c.d_h + 3 * c.d * c.d_ff + 2 * c.d
            return c.v * c.d + c.L * per_layer + c.d + (0 if c.tied else c.v * c.d)
        """, "W_k and W_v have h_kv heads"),
    ("13", "count_parameters", """
        def count_parameters(config):
            c = config
            per_layer = 2 * c.d * c.h * c.d_h + 2 * c.d * c.h_kv * c.d_h + 3 * c.d * c.d_ff + 2 * c.d
            return c.v * c.d + c.L * per_layer + (0 if c.tied else c.v * c.d)
        """, "the final RMSNorm"),
    ("13", "kv_cache_bytes_per_token", """
        def kv_cache_bytes_per_token(config, dtype="float16"):
            return 2 * config.L * config.d * np.dtype(dtype).itemsize
        """, "a head holds d_h numbers of K"),  # d = h·d_h in four cases; the wide heads tell d from h·d_h
    ("13", "kv_cache_bytes_per_token", """
        def kv_cache_bytes_per_token(config, dtype="float16"):
            return config.L * config.h_kv * config.d_h * np.dtype(dtype).itemsize
        """, "K AND V"),
    ("13", "kv_cache_bytes_per_token", """
        def kv_cache_bytes_per_token(config, dtype="float16"):
            return 2 * config.L * config.h_kv * config.d_h * 2
        """, "use the `dtype` argument"),
    ("14", "paged_attention", PAGED.format(blocks="sorted(block_table)", cut="[:, :, :n_tokens]",
                                           first="n_tokens - n_q", heads="np.repeat(A, rep, axis=0)"),
     "in the table's order"),
    ("14", "paged_attention", PAGED.format(blocks="block_table", cut="", first="n_tokens - n_q",
                                           heads="np.repeat(A, rep, axis=0)"), "only partly written"),
    ("14", "paged_attention", PAGED.format(blocks="block_table", cut="[:, :, :n_tokens]", first="0",
                                           heads="np.repeat(A, rep, axis=0)"), "the LAST n_q"),
    ("14", "paged_attention", PAGED.format(blocks="block_table", cut="[:, :, :n_tokens]", first="n_tokens - n_q",
                                           heads="np.tile(A, (rep, 1, 1))"), "not np.tile"),
    ("15", "seq2seq_decoder_layer", DECODER.format(cross="y1, lw.cross_attn, h, mask=cross_mask, context=y1",
                                                    out="layer_norm(y2 + f, lw.ln3_g, lw.ln3_b, eps)"),
     "keys and values come from the encoder output z"),
    ("15", "seq2seq_decoder_layer", DECODER.format(cross="y1, lw.cross_attn, h, mask=cross_mask & causal_mask(y.shape[1], "
                                                    "z.shape[1]) if cross_mask is not None else causal_mask(y.shape[1], "
                                                    "z.shape[1]), context=z", out="layer_norm(y2 + f, lw.ln3_g, lw.ln3_b, eps)"),
     "cross-attention is not causal"),
    ("15", "seq2seq_decoder_layer", DECODER.replace(
        "keep = causal_mask(y.shape[1]) if keep is None else keep & causal_mask(y.shape[1])",
        "keep = causal_mask(y.shape[1])").format(cross="y1, lw.cross_attn, h, mask=cross_mask, context=z",
                                                 out="layer_norm(y2 + f, lw.ln3_g, lw.ln3_b, eps)"),
     "the self-attention takes both: causal mask & self_mask"),
    ("15", "seq2seq_decoder_layer", DECODER.format(cross="y1, lw.cross_attn, h, context=z",
                                                    out="layer_norm(y2 + f, lw.ln3_g, lw.ln3_b, eps)"),
     "pass cross_mask"),
    ("15", "seq2seq_decoder_layer", DECODER.format(cross="y1, lw.cross_attn, h, mask=cross_mask, context=z",
                                                    out="y2 + f"), "the third sub-layer ends like the others"),
    ("14", "paged_attention", """
        def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None):
            h, n_q, d_h = q.shape
            bs = k_pool.shape[2]
            m, l, o = np.full((h, n_q, 1), -np.inf), np.zeros((h, n_q, 1)), np.zeros((h, n_q, d_h))
            q_pos = np.arange(n_tokens - n_q, n_tokens)[:, None]
            for j, blk in enumerate(block_table):
                kb = np.repeat(k_pool[blk], h // k_pool.shape[1], 0)
                vb = np.repeat(v_pool[blk], h // k_pool.shape[1], 0)
                k_pos = np.arange(j * bs, (j + 1) * bs)[None, :]
                ok = (k_pos < n_tokens) & ((k_pos <= q_pos) if causal else True)
                s = np.where(ok, q @ kb.transpose(0, 2, 1) / np.sqrt(d_h), -np.inf)
                m_new = np.maximum(m, s.max(-1, keepdims=True))
                p = np.exp(s - m_new)
                l = l + p.sum(-1, keepdims=True)
                o = o * np.exp(m - m_new) + p @ vb
                m = m_new
            return o / l
        """, "the running sum l is rescaled too"),
    ("16", "document_mask", """
        def document_mask(doc, *, causal=True):
            same = doc[:, :, None] == doc[:, None, :]
            if causal:
                same = same & np.tril(np.ones((doc.shape[1], doc.shape[1]), bool))
            return same[:, None]
        """, "a padding key (doc = −1) is seen by no one"),
    ("16", "document_mask", """
        def document_mask(doc, *, causal=True):
            return ((doc[:, :, None] == doc[:, None, :]) & (doc[:, None, :] >= 0))[:, None]
        """, "still causal"),
    ("16", "document_mask", """
        def document_mask(doc, *, causal=True):
            n = doc.shape[1]
            same = (doc[:, :, None] == doc[:, None, :]) & (doc[:, None, :] >= 0)
            return same & np.tril(np.ones((n, n), bool))
        """, "return (b, 1, n, n)"),
    ("16", "document_mask", """
        def document_mask(doc, *, causal=True):
            n = doc.shape[1]
            same = (doc[:, :, None] == doc[:, None, :]) & (doc[:, None, :] >= 0)
            return (same & np.tril(np.ones((n, n), bool)))[:, None]
        """, "with causal=False"),
    ("16", "key_tiles_read", TILES.format(end="min(end, t * block_q + 1)", read="j * block_k < end"),
     "LAST row's key"),
    ("16", "key_tiles_read", TILES.format(end="min(end, min(n, (t + 1) * block_q))", read="j * block_k <= end"),
     "not ≤"),
    ("17", "mma_fragment_layout", FRAGMENT.format(lane_c="4 * (r // 2) + c // 2", reg_c="2 * (r % 2) + c % 2",
                                                  reg_a="r // 8 + 2 * (c // 8)"), "rows g AND g + 8"),
    ("17", "mma_fragment_layout", FRAGMENT.format(lane_c="4 * (r % 8) + c // 2", reg_c="r // 8 + 2 * (c % 2)",
                                                  reg_a="r // 8 + 2 * (c // 8)"), "C's four registers"),
    ("17", "mma_fragment_layout", FRAGMENT.format(lane_c="4 * (r % 8) + c // 2", reg_c="2 * (r // 8) + c % 2",
                                                  reg_a="2 * (r // 8) + c // 8"), "A's registers"),
    ("19", "induction_head_scores", """
        def induction_head_scores(maps, n_half):
            m = n_half
            prev = np.mean([maps[..., i, i - 1] for i in range(1, 2 * m)], axis=0)
            ind = np.mean([maps[..., i, i - m] for i in range(m, 2 * m - 1)], axis=0)
            return {"previous token": prev, "induction": ind}
        """, "the token AFTER the earlier copy"),
    ("19", "induction_head_scores", """
        def induction_head_scores(maps, n_half):
            m = n_half
            prev = np.mean([maps[..., i - 1, i] for i in range(1, 2 * m)], axis=0)
            ind = np.mean([maps[..., i - m + 1, i] for i in range(m, 2 * m - 1)], axis=0)
            return {"previous token": prev, "induction": ind}
        """, "the query is the second-to-last axis"),
    ("19", "induction_head_scores", """
        def induction_head_scores(maps, n_half):
            m = n_half
            prev = np.mean([maps[..., i, i - 1] for i in range(1, 2 * m)], axis=0)
            ind = np.mean([maps[..., i, i - m + 1] for i in range(m, 2 * m - 1)], axis=0)
            return prev, ind
        """, "return a dict with the two keys"),
    ("03", "softmax", """
        def softmax(x, axis=-1, mask=None):  # right, but a float16 x stays float16 throughout
            if mask is not None:
                x = np.where(mask, x, -np.inf).astype(x.dtype)
            m = x.max(axis=axis, keepdims=True)
            e = np.exp(x - np.where(np.isfinite(m), m, 0))
            z = e.sum(axis=axis, keepdims=True)
            return e / np.where(z == 0, 1, z)
        """, "taken in float16 round every term"),
]


@pytest.mark.parametrize("lesson, name, source, hint", PLANTED,
                         ids=[f"{lesson}-{name}-{hint.split()[0]}{i}" for i, (lesson, name, _, hint)
                              in enumerate(PLANTED)])
def test_a_planted_mistake_is_caught_with_its_hint(lesson, name, source, hint, tmp_path):
    report = check_file(write_workbook(tmp_path, lesson, source), lesson)
    text = format_report(report)
    result = result_of(report, name)
    assert result.status == "failed", text
    assert any(hint in h for h in result.hints), f"expected the hint '{hint}':\n{text}"
    assert not report.ok
    for other in report.results:  # the rest of the file is the package's: it passes
        assert other.name == name or other.status == "passed", text


@pytest.mark.parametrize("lesson, name, source", [
    ("02", "sinusoidal_positions", """
        def sinusoidal_positions(n, d, *, base=10000.0, xp=None, dtype=None):
            xp = namespace(xp)  # read, then not used: np below
            angle = np.arange(n)[:, None] / base ** (np.arange(0, d, 2) / d)
            return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(n, d).astype(dtype or np.float32)
        """),
    ("05", "sliding_window_mask", """
        def sliding_window_mask(n_q, w, n_k=None, offset=None, *, causal=True, xp=None):
            n_k = n_q if n_k is None else n_k
            i = np.arange(n_q)[:, None] + (n_k - n_q if offset is None else offset)
            j = np.arange(n_k)[None, :]
            return (j <= i) & (j > i - w) if causal else np.abs(i - j) < w
        """)])
def test_a_function_that_ignores_xp_fails_only_the_case_that_gives_one(lesson, name, source, tmp_path):
    # the values are right everywhere; with xp=cupy these arrays would sit on the host
    path = write_workbook(tmp_path, lesson, "from transformer import namespace\n" + textwrap.dedent(source))
    result = result_of(check_file(path, lesson), name)
    assert result.status == "failed" and result.failed == 1, result.message
    assert "xp= a namespace to build it with" in result.message
    assert "right values, but built with np although `xp` was given" in result.message
    assert not result.hints  # no known mistake is blamed for right values


def test_a_failure_names_the_case_the_entry_and_both_values(tmp_path):
    path = write_workbook(tmp_path, "03", PLANTED[2][2])  # scores divided by d_h
    result = result_of(check_file(path, "03"), "scaled_dot_product_attention")
    assert 'case "b=1, h=1, n_q=n_k=d_h=4, no mask"' in result.message
    assert "first wrong entry at [b=0, h=0, n_q=0, d_h=" in result.message
    assert "expected " in result.message and ", got " in result.message


def test_a_wrong_shape_is_told_with_the_legend_names(tmp_path):
    path = write_workbook(tmp_path, "04", """
        def split_heads(x, h):
            b, n, d = x.shape
            return x.reshape(b, n, h, d // h)
        """)
    result = result_of(check_file(path, "04"), "split_heads")
    assert "wrong shape" in result.message and "(b, h, n, d_h) = (2, 3, 5, 4)" in result.message, result.message


@pytest.mark.parametrize("source, phrase", [
    ("def softmax(x, axis=-1, mask=None):\n    return list(x)\n", "should be an array"),
    ("def softmax(x, axis=-1, mask=None):\n    e = np.exp(x - x.max(axis, keepdims=True))\n", "forget to `return`"),
    ("import transformer as T\ndef softmax(x, axis=-1, mask=None):\n    return T.softmax(x.astype(np.float64), axis, mask)\n",
     "has dtype float64, expected float32"),
])
def test_a_wrong_kind_of_answer_gets_one_line(source, phrase, tmp_path):
    result = result_of(check_file(write_workbook(tmp_path, "03", source), "03"), "softmax")
    assert result.status == "failed" and phrase in result.message, result.message


def test_an_exception_in_the_learners_code_shows_their_line_and_nothing_of_the_checker(tmp_path):
    path = write_workbook(tmp_path, "03", """
        def softmax(x, axis=-1, mask=None):
            e = np.exp(x - x.max(axis=axis))
            return e / e.sum(axis=axis)
        """)
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "03", "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1
    assert "softmax" in proc.stdout and "FAILED" in proc.stdout
    assert f"at {path.name}, line 7, in softmax: e = np.exp(x - x.max(axis=axis))" in proc.stdout, proc.stdout
    assert "keepdims=True" in proc.stdout  # the hint for a max without its axis
    assert "Traceback" not in proc.stdout + proc.stderr and "transformer/tutor" not in proc.stdout


def check_in_a_new_process(tmp_path, *lessons):
    return subprocess.run([sys.executable, "-m", "transformer", "check", *lessons, "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_code_that_crashes_python_itself_fails_its_function_and_the_check_goes_on(tmp_path):
    """A crash in C (ctypes, a bad as_strided) ended the whole check: the shell said "Segmentation fault", and
    the functions after it went unchecked. The check runs in a child process: the parent names the function and
    the learner's line, and a new child checks the rest, printing no line twice."""
    write_workbook(tmp_path, "03", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            import ctypes
            return ctypes.string_at(0)
        """)
    write_workbook(tmp_path, "04", "")  # the next lesson: checked in the new child
    (tmp_path / "04_planted.py").rename(tmp_path / "04_multi.py")
    proc = check_in_a_new_process(tmp_path, "03", "04")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"checking {tmp_path} against the package"
    assert lines[1] == "03_planted.py  (lesson 03)" and lines[2].split() == ["softmax", "passed", "(11", "cases)"]
    crash = "scaled_dot_product_attention  FAILED — it crashed Python itself (SIGSEGV, a segmentation fault) at " \
            "03_planted.py, line 8, in scaled_dot_product_attention"
    assert lines[3].strip() == crash, proc.stdout
    assert lines[4].strip().startswith("hint: a read or write outside the memory an array owns: an as_strided view")
    assert lines.count("03_planted.py  (lesson 03)") == 1 and sum("softmax" in line for line in lines) == 1
    assert "04_multi.py  (lesson 04)" in lines and lines[-1].startswith("1 failed, "), proc.stdout
    assert "Segmentation fault" not in proc.stderr and "Fatal Python error" not in proc.stderr, proc.stderr


def test_a_file_that_crashes_python_as_it_is_imported_is_named_and_the_check_goes_on(tmp_path):
    write_workbook(tmp_path, "03", """
        import ctypes
        ctypes.string_at(0)
        """)
    write_workbook(tmp_path, "04", "")
    (tmp_path / "04_planted.py").rename(tmp_path / "04_multi.py")
    proc = check_in_a_new_process(tmp_path, "03", "04")
    assert proc.returncode == 1
    assert ("  could not be checked: importing it crashed Python itself (SIGSEGV, a segmentation fault) at "
            "03_planted.py, line 7, in <module>") in proc.stdout.splitlines(), proc.stdout
    assert proc.stdout.splitlines()[-1] == "0 failed, 3 passed, 0 not written; 1 file did not load", proc.stdout


def test_a_crash_message_names_the_learners_innermost_line_and_the_signal():
    """The fault handler's dump lists the innermost frame first; a frame of the package's own code is not the
    learner's line. Windows reports an access violation as an NTSTATUS exit code."""
    from transformer.tutor.isolated import crash_message

    dump = ('Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n'
            '  File "/x/transformer/tutor/run.py", line 9 in _call\n'
            '  File "/w/05_masks.py", line 30 in band\n  File "/w/05_masks.py", line 41 in sliding_window_mask\n')
    message = crash_message(-11, dump, Path("/w/05_masks.py"))
    assert message.startswith("— it crashed Python itself (SIGSEGV, a segmentation fault) at 05_masks.py, line 30, "
                              "in band\n"), message
    assert crash_message(-9, "", Path("/w/05_masks.py")).startswith("— it crashed Python itself (SIGKILL, killed)\n"
                                                                    "hint: the system ends a process that takes too "
                                                                    "much memory")
    assert "(exit status 0xc0000005)" in crash_message(0xC0000005, "", Path("/w/05_masks.py"))


@pytest.mark.parametrize("call", ["os._exit(0)", "os.abort()", "sys.exit(0)"])
def test_a_function_that_ends_the_process_fails_at_its_line_and_the_check_goes_on(call, tmp_path):
    """os._exit(0) ended the check with exit 0 and no line: a learner saw an empty report, as if all
    was well. It, and os.abort, now raise inside the learner's function."""
    path = write_workbook(tmp_path, "03", f"""
        def softmax(x, axis=-1, mask=None):
            import os, sys
            {call}
        """)
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "03", "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert f"at {path.name}, line 8, in softmax: {call}" in proc.stdout, proc.stdout
    if call.startswith("os."):
        assert f"raised ProcessEnd: {call} would end the check here with no word" in proc.stdout, proc.stdout
    assert "scaled_dot_product_attention  passed" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_a_file_that_ends_the_process_as_it_loads_is_one_line(tmp_path):
    (tmp_path / "03_attention.py").write_text("import os\nos._exit(3)\n", encoding="utf-8")
    module, error = load_workbook_file(tmp_path / "03_attention.py")
    assert module is None and error == ("03_attention.py, line 2, in <module>: os._exit(3): raised ProcessEnd while "
                                        "loading: os._exit(3) would end the check here with no word: a checked "
                                        "function returns its answer"), error
    assert os._exit.__module__ == "posix"  # put back


def test_a_loop_that_never_ends_is_stopped_and_the_next_function_is_checked(tmp_path):
    path = write_workbook(tmp_path, "03", """
        def softmax(x, axis=-1, mask=None):
            while True:
                pass
        """)
    report = check_file(path, "03", seconds=0.5)
    assert "took longer than 0.5 s" in result_of(report, "softmax").message
    assert result_of(report, "scaled_dot_product_attention").status == "passed"


def test_a_function_that_calls_an_unwritten_stub_is_not_written_yet(tmp_path):
    path = write_workbook(tmp_path, "03", """
        def softmax(x, axis=-1, mask=None):
            raise NotImplementedError("write softmax")

        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            return softmax(q @ k.swapaxes(-1, -2)) @ v
        """)
    report = check_file(path, "03")
    assert report.ok
    assert "it calls `softmax`" in result_of(report, "scaled_dot_product_attention").message


def test_a_function_written_in_part_is_checked_on_the_cases_it_can_run(tmp_path):
    """document_mask with its doc branch still to write: the cases without doc are checked, the others counted."""
    start = """
        def key_tiles_read(n, block_q, block_k, *, causal=True, doc=None):
            if doc is not None:
                raise NotImplementedError("the doc branch comes next")
            Tr, Tc = -(-n // block_q), -(-n // block_k)
            q_last = np.minimum(np.arange(1, Tr + 1) * block_q, n) - 1
            read = np.arange(Tc)[None, :] * block_k <= q_last[:, None] if causal else np.ones((Tr, Tc), bool)
            return read[None]
        """
    report = check_file(write_workbook(tmp_path, "16", start), "16")
    result = result_of(report, "key_tiles_read")
    assert result.status == "not written" and report.ok, format_report(report)
    assert result.message.startswith("written in part: 3 of 6 cases pass; 3 cases still reach `raise "
                                     "NotImplementedError`"), result.message
    slip = start.replace("<= q_last", "< q_last")
    report = check_file(write_workbook(tmp_path, "16", slip), "16")
    result = result_of(report, "key_tiles_read")
    assert result.status == "failed" and "3 cases still reach `raise NotImplementedError`" in format_report(report)


def test_a_softmax_without_keepdims_gives_attention_no_gqa_hint(tmp_path):
    """Every attention case fails through the learner's softmax: "only the GQA cases fail" would be untrue."""
    report = check_file(write_workbook(tmp_path, "03", """
        def softmax(x, axis=-1, mask=None):
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis)

        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // k.shape[1], 1)
            s = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
            p = softmax(np.where(mask, s, -np.inf) if mask is not None else s)
            return (p @ v, p) if return_weights else p @ v
        """), "03")
    assert any("keepdims=True" in h for h in result_of(report, "softmax").hints)
    attention = result_of(report, "scaled_dot_product_attention")
    assert attention.note == "it calls `softmax`, which fails: fix that first"
    assert not any("h_kv < h" in h for h in attention.hints), format_report(report)


def test_a_step_that_does_not_count_itself_is_told_by_state_t_first(tmp_path):
    report = check_file(write_workbook(tmp_path, "18", ADAMW_ATTEMPT.format(**ADAMW_RIGHT).replace(
        "state.t += 1", "t = state.t + 1").replace("state.t)", "t)")), "18")
    assert result_of(report, "adamw_step").failures[0].message == "state.t: expected 3, got 0 (3 fewer)"


@pytest.mark.parametrize("source, phrase", [
    ("def softmax(x:\n    pass\n", "syntax error"),
    ("import numpy_that_does_not_exist\n", "cannot import while loading: No module named 'numpy_that_does_not_exist'"),
    ("raise RuntimeError('half done')\n", "raised RuntimeError while loading: half done"),
])
def test_a_file_that_does_not_load_is_one_line_and_the_others_are_still_checked(source, phrase, tmp_path):
    (tmp_path / "03_attention.py").write_text(source, encoding="utf-8")
    write_workbook(tmp_path, "07")
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "all", "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1
    error = [li for li in proc.stdout.splitlines() if "could not be checked:" in li]  # the summary line names no file
    assert len(error) == 1 and phrase in error[0], proc.stdout
    assert "repeat_kv  passed" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("argv, phrase", [
    (["check", "20"], "lesson 20 has no workbook file"),
    (["check", "three"], "LESSON must be a lesson number"),
    (["check", "03", "--workbook", "/nonexistent/folder"], "is not a folder"),
    (["check", "03", "--time-limit", "0"], "--time-limit must be"),
    (["check", "03", "--time-limit", "inf"], "--time-limit must be a number of seconds more than 0 and at most 86400"),
    (["check", "03", "--time-limit", "1e10"], "--time-limit must be"),  # past what setitimer takes
])
def test_bad_arguments_are_one_line(argv, phrase):
    proc = subprocess.run([sys.executable, "-m", "transformer", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 2 and phrase in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# filter_logits written out, with three places a learner's version differs: how the logits are read,
# how they are divided by T, and the top-p boundary
FILTER_LOGITS = """
    def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
        x = {asarray}
        if temperature == 0:
            return np.where(np.arange(x.shape[-1]) == x.argmax(-1)[..., None], x, -np.inf)
        x = {divide}
        if top_k is not None:
            kth = np.sort(x, axis=-1)[..., -top_k][..., None]
            x = np.where(x >= kth, x, -np.inf)
        if top_p is not None:
            p = np.exp(x - x.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            order = np.argsort(-p, axis=-1, kind="stable")
            ps = np.take_along_axis(p, order, -1)
            keep_sorted = np.cumsum(ps, -1) - ps {below} top_p
            keep = np.zeros_like(keep_sorted)
            np.put_along_axis(keep, order, keep_sorted, -1)
            x = np.where(keep, x, -np.inf)
        return x
    """


# --- known mistakes each spec recognises ------------------------------
# (lesson, function, the learner's code with one slip, a phrase of the intended hint)
# lesson 18's loss, gradient and schedule as a learner writes them; the fields hold one slip each (_SLIP: none)
LOSS_ATTEMPT = """
    def cross_entropy(logits, targets, *, ignore_index=-100):
        keep = {keep}
        {check}
        t = np.where(keep, targets, 0) if {t} is None else {t}
        m = logits.max(-1, keepdims=True) * {shift}
        lse = np.log(np.exp(logits - m).sum(-1))
        lse = {lse}
        zt = np.take_along_axis(logits, t[..., None], -1)[..., 0] - m[..., 0]
        zt = {zt}
        nll = np.where(keep, lse - zt, 0)
        return {mean}
"""
LOSS_SLIP = {"keep": "targets != ignore_index", "t": "None", "shift": "1", "lse": "lse", "zt": "zt",
             "mean": "nll.sum() / max(keep.sum(), 1)",
             "check": "if ((targets[keep] < 0) | (targets[keep] >= logits.shape[-1])).any(): raise ValueError("
                      "f'targets {targets[keep].min()} … {targets[keep].max()} outside [0, {logits.shape[-1]})')"}
GRAD_ATTEMPT = """
    def cross_entropy_backward(logits, targets, *, ignore_index=-100):
        keep = targets != ignore_index
        e = np.exp(logits - logits.max(-1, keepdims=True))
        d = e / e.sum(-1, keepdims=True) - (np.arange(logits.shape[-1]) == np.where(keep, targets, 0)[..., None])
        kept = np.where(keep[..., None], d, 0)
        return ({kept} / {n}).astype(logits.dtype)
"""
GRAD_SLIP = {"kept": "kept", "n": "max(keep.sum(), 1)"}
LR_ATTEMPT = """
    def lr_at(step, *, lr_max, warmup, total, lr_min=0.0):
        if step < warmup:
            return lr_max * {warm}
        if {after}:
            return lr_min
        p = (step - warmup) / ({length})
        return {floor} + (lr_max - {floor}) * 0.5 * (1 + math.cos(math.pi * p))
"""
LR_SLIP = {"warm": "(step + 1) / warmup", "after": "step >= total", "length": "total - warmup", "floor": "lr_min"}
RMS_BACKWARD_ATTEMPT = """
    def rms_norm_backward(dY, x, gamma, eps=1e-6):
        r = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + {eps})
        x_hat = x / r
        g = {g}
        dx = ({dx}){div}
        return dx.astype(x.dtype), {dgamma}
"""
RMS_BACKWARD_SLIP = {"eps": "eps", "g": "dY * gamma", "dx": "g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True)",
                     "div": " / r", "dgamma": "(dY * x_hat).reshape(-1, x.shape[-1]).sum(0)"}
SWIGLU_BACKWARD_ATTEMPT = """
    def swiglu_ffn_backward(dY, x, W_gate, W_up, W_down):
        d = x.shape[-1]
        X, G = {X}, {G}
        A, U = X @ W_gate, X @ W_up
        s = 1 / (1 + np.exp(-A))
        S = A * s
        dH = G @ W_down.T
        dA = dH * {dA}
        dU = dH * {dU}
        dx = {dx}
        return dx.reshape(x.shape), X.T @ dA, X.T @ dU, {dW_down}
"""
SWIGLU_BACKWARD_SLIP = {"X": "x.reshape(-1, d)", "G": "dY.reshape(-1, d)", "dA": "U * s * (1 + A * (1 - s))",
                        "dU": "S", "dx": "dA @ W_gate.T + dU @ W_up.T", "dW_down": "(S * U).T @ G"}


# lesson 02's angles, 05's sparse patterns, 16's packing and 18's clipping as a learner writes them (_SLIP: none)
ANGLES_ATTEMPT = """
    def rope_angles(positions, d_h, base=10000.0):
        i = np.arange(d_h // 2)
        return np.asarray(positions, {dtype})[:, None] * {base} ** ({exponent})
"""
ANGLES_SLIP = {"dtype": "np.float64", "base": "base", "exponent": "-2 * i / d_h"}
SPARSE_ATTEMPT = """
    from transformer import namespace
    def strided_mask(n, stride, *, xp=None):
        xp = namespace(xp)
        i, j = xp.arange(n)[:, None], xp.arange(n)[None, :]
        return {strided}
    def fixed_mask(n, block, c=1, *, xp=None):
        xp = namespace(xp)
        i, j = xp.arange(n)[:, None], xp.arange(n)[None, :]
        return {fixed}
"""
SPARSE_SLIP = {"strided": "(j <= i) & ((i - j < stride) | ((i - j) % stride == 0))",
               "fixed": "(j <= i) & ((i // block == j // block) | (j % block >= block - c))"}
PACK_ATTEMPT = """
    from transformer import Packed
    def pack_documents(docs, n_ctx, *, pad_id=0, longest_first=False):
        docs = [list(d) for d in docs]
        {check}
        order = sorted(range(len(docs)), key=lambda i: -len(docs[i])) if {longest} else range(len(docs))
        used, spans = [], [None] * len(docs)
        for i in order:
            n = len(docs[i])
            row = next((r for r in {rows} if used[r] + n <= n_ctx), None)
            if row is None:
                used.append(0)
                row = len(used) - 1
            spans[i] = (row, used[row], n)
            used[row] += n
        ids = np.full((len(used), n_ctx), {pad}, dtype=np.int64)
        doc = np.full((len(used), n_ctx), {pad_doc}, dtype=np.int64)
        positions = np.zeros((len(used), n_ctx), dtype=np.int64)
        for i, (row, start, n) in enumerate(spans):
            ids[row, start:start + n] = docs[i]
            doc[row, start:start + n] = i
            positions[row, start:start + n] = {pos}
        return Packed(ids, doc, positions, tuple(spans))
"""
PACK_SLIP = {"longest": "longest_first", "rows": "range(len(used))", "pad": "pad_id", "pad_doc": "-1",
             "pos": "np.arange(n)", "check": "if any(len(d) > n_ctx for d in docs): raise ValueError("
             "f'a document of {max(map(len, docs))} tokens is longer than n_ctx={n_ctx}')"}
CLIP_ATTEMPT = """
    def clip_by_global_norm(grads, max_norm):
        norm = math.sqrt(sum(float(({square}).sum()) for g in grads.values()))
        factor = {factor}
        for name, g in grads.items():
            {scale}
        return {returned}
"""
CLIP_SLIP = {"square": "g.astype(np.float64) ** 2", "factor": "min(1.0, max_norm / (norm + 1e-6))",
             "scale": "g *= factor", "returned": "norm"}


# lesson 01's tokenizers as a learner writes them; the fields hold one slip each (_SLIP: none)
MERGE_ATTEMPT = """
    def merge_symbols(symbols, ranks):
        s = {copy}
        while {loop}:
            pairs = [(ranks[p], i) for i, p in enumerate(zip(s, s[1:])) if {known}]
            if not pairs:
                break
            r, i = {pick}
            s[i:i + 2] = [s[i] + s[i + 1]]
        return s
"""
MERGE_SLIP = {"copy": "list(symbols)", "loop": "True", "known": "p in ranks", "pick": "min(pairs)"}
WORDPIECE_ATTEMPT = """
    def wordpiece(word, vocab, unk="[UNK]", max_chars=100):
        if len(word) > {max}:
            return [{unk}]
        pieces, start = [], 0
        while start < len(word):
            for end in {ends}:
                piece = ("##" if {hash} else "") + word[start:end]
                if piece in vocab:
                    break
            else:
                return {miss}
            pieces.append(piece)
            start = end
        return pieces
"""
WORDPIECE_SLIP = {"max": "max_chars", "unk": "unk", "ends": "range(len(word), start, -1)", "hash": "start > 0",
                  "miss": "[unk]"}


ADDITIVE_ATTEMPT = """
    def additive_scores(q, k, W_q, W_k, w):
        q_a, k_a = q @ W_q, k @ W_k
        return {body}
"""
ADDITIVE_SLIP = {"body": "np.einsum('...ija,a->...ij', np.tanh(q_a[..., :, None, :] + k_a[..., None, :, :]), w)"}


KNOWN_MISTAKES = [
    ("03", "scaled_dot_product_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            n_rep = q.shape[1] // k.shape[1]
            k, v = np.tile(k, (1, n_rep, 1, 1)), np.tile(v, (1, n_rep, 1, 1))
            scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
            p = softmax(q @ k.swapaxes(-1, -2) * scale, mask=mask)
            return (p @ v, p) if return_weights else p @ v
        """, "(np.repeat(k, h // h_kv, axis=1), not np.tile)"),
    ("03", "scaled_dot_product_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // k.shape[1], 1)
            scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
            s = q @ k.swapaxes(-1, -2) * scale
            if mask is not None:
                s = np.where(mask, s, -1e9)
            p = softmax(s)
            return (p @ v, p) if return_weights else p @ v
        """, "a query whose mask row is all False then gets equal weights, so the mean of V"),
    ("03", "softmax", """
        def softmax(x, axis=-1, mask=None):
            if mask is not None:
                x = np.where(mask, x, -1e9)
            x32 = x.astype(np.float32) if x.dtype == np.float16 else x
            e = np.exp(x32 - x32.max(axis=axis, keepdims=True))
            return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)
        """, "equal weights, 1/n each, where it must give zeros"),
    ("02", "apply_rope_interleaved", """
        def apply_rope_interleaved(x, cos, sin):
            even, odd = x[..., 0::2], x[..., 1::2]
            return np.concatenate([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
        """, "pair i to columns 2i and 2i+1"),
    ("10", "rms_norm", """
        def rms_norm(x, gamma, eps=1e-6):
            return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps) * gamma
        """, "the mean of x², not the sum"),
    ("10", "layer_norm", """
        def layer_norm(x, gamma, beta=None, eps=1e-5):
            mu, var = x.mean(axis=0, keepdims=True), x.var(axis=0, keepdims=True)
            y = (x - mu) / np.sqrt(var + eps) * gamma
            return y if beta is None else y + beta
        """, "run over axis 0, across the batch"),
    ("10", "swiglu_ffn", """
        def swiglu_ffn(x, W_gate, W_up, W_down):
            g = x @ W_gate
            return g / (1 + np.exp(-g)) * (x @ W_up)
        """, "did you skip the last product, @ W_down"),
    ("11", "filter_logits", FILTER_LOGITS.format(asarray="np.asarray(logits)", divide="x / x.dtype.type(temperature)",
                                                 below="<="), "strictly below p (<, not ≤)"),
    ("11", "filter_logits", FILTER_LOGITS.format(asarray="np.asarray(logits, dtype=float)", divide="x / temperature",
                                                 below="<"), "float32 logits come back as float64"),
    ("18", "softmax_backward", """
        def softmax_backward(dP, P):
            return P * (dP - (dP * P).sum(axis=-2, keepdims=True))
        """, "the row sum runs over axis −2"),
    ("18", "scaled_dot_product_attention_backward", """
        def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale=None):
            scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
            k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // v.shape[1], 1)
            dP = dO @ v.swapaxes(-1, -2)
            dS = P * (dP - (dP * P).sum(-1, keepdims=True))
            return dS @ k * scale, dS.swapaxes(-1, -2) @ q * scale, P.swapaxes(-1, -2) @ dO
        """, "dK and dV have h heads where K and V have h_kv"),
    ("08", "merge_softmax_stats", """
        def merge_softmax_stats(m_a, l_a, m_b, l_b):
            m = np.maximum(m_a, m_b)
            f_a = np.where(np.isneginf(m_a), 0.0, np.exp(m - np.where(np.isneginf(m_a), 0, m_a)))
            f_b = np.where(np.isneginf(m_b), 0.0, np.exp(m - m_b))
            return m, l_a * f_a + l_b * f_b
        """, "the exponent's sign is flipped"),
    ("08", "online_attention_update", """
        def online_attention_update(m, l, O, S_j, V_j):
            m_new = S_j.max(-1, keepdims=True)
            safe = np.where(np.isneginf(m_new), 0, m_new)
            P = np.exp(S_j - safe)
            alpha = np.where(np.isneginf(m), 0, np.exp(m - safe))
            return m_new, alpha * l + P.sum(-1, keepdims=True), alpha * O + P @ V_j
        """, "the new max forgets the old one"),
    # lesson 03's additive scores
    ("03", "additive_scores", ADDITIVE_ATTEMPT.format(body="(q_a[..., :, None, :] + k_a[..., None, :, :]) @ w"),
     "tanh goes on the sum"),
    ("03", "additive_scores", ADDITIVE_ATTEMPT.format(body="(np.tanh(q_a[..., :, None, :]) + np.tanh(k_a[..., None, :, "
                                                           ":])) @ w"), "two separate layers"),
    ("03", "additive_scores", ADDITIVE_ATTEMPT.format(body="np.tanh(q_a + k_a) @ w"), "each pair (i, j) needs its own"),
    ("03", "additive_scores", ADDITIVE_ATTEMPT.format(body="np.tanh(q_a[..., :, None, :] * k_a[..., None, :, :]) @ w"),
     "not their product"),
    ("03", "additive_scores", ADDITIVE_ATTEMPT.format(body="np.tanh(q_a[..., None, :, :] + k_a[..., :, None, :]) @ w"),
     "the keys along the last axis"),
    ("03", "additive_scores",
     ADDITIVE_ATTEMPT.format(body="np.tanh((q_a[..., :, None, :] + k_a[..., None, :, :]) @ w)"),
     "tanh goes on each of the d_a hidden units"),
    # lesson 01's tokenizers: BPE's merge loop and WordPiece's longest match
    ("01", "merge_symbols", MERGE_ATTEMPT.format(**{**MERGE_SLIP, "pick": "max(pairs)"}), "LOWEST rank"),
    ("01", "merge_symbols", MERGE_ATTEMPT.format(**{**MERGE_SLIP, "pick": "min(pairs, key=lambda p: p[1])"}),
     "merge by rank, not by position"),
    ("01", "merge_symbols", MERGE_ATTEMPT.format(**{**MERGE_SLIP, "loop": "len(s) == len(symbols)"}),
     "a merge makes new pairs"),
    ("01", "merge_symbols", MERGE_ATTEMPT.format(**{**MERGE_SLIP, "known": "ranks[p] >= 0"}),
     "a pair missing from ranks never merges"),
    ("01", "wordpiece", WORDPIECE_ATTEMPT.format(**{**WORDPIECE_SLIP, "ends": "range(start + 1, len(word) + 1)"}),
     "the LONGEST prefix"),
    ("01", "wordpiece", WORDPIECE_ATTEMPT.format(**{**WORDPIECE_SLIP, "hash": "False"}), "with '##' in front"),
    ("01", "wordpiece", WORDPIECE_ATTEMPT.format(**{**WORDPIECE_SLIP, "hash": "True"}), "the first piece has no '##'"),
    ("01", "wordpiece", WORDPIECE_ATTEMPT.format(**{**WORDPIECE_SLIP, "miss": "pieces + [unk]"}),
     "the WHOLE word is [UNK]"),
    ("01", "wordpiece", WORDPIECE_ATTEMPT.format(**{**WORDPIECE_SLIP, "max": "10 ** 9"}), "longer than max_chars"),
    ("01", "wordpiece", WORDPIECE_ATTEMPT.format(**{**WORDPIECE_SLIP, "unk": "'[UNK]'", "miss": "['[UNK]']"}),
     "use the `unk` argument"),
    # lesson 02's angles, 05's sparse patterns, 16's packing, 18's clipping
    ("02", "rope_angles", ANGLES_ATTEMPT.format(**{**ANGLES_SLIP, "exponent": "-i / d_h"}), "not −i/d_h"),
    ("02", "rope_angles", ANGLES_ATTEMPT.format(**{**ANGLES_SLIP, "exponent": "2 * i / d_h"}), "a negative exponent"),
    ("02", "rope_angles", ANGLES_ATTEMPT.format(**{**ANGLES_SLIP, "base": "10000.0"}), "use the `base` argument"),
    ("05", "strided_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "strided": "((j <= i) & (i - j < stride)) | "
                                                                           "((i - j) % stride == 0)"}),
     "the strided part is causal too"),
    ("05", "strided_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "strided": "(j <= i) & ((i - j < stride) | "
                                                                           "(j % stride == 0))"}),
     "the strided part is by distance"),
    ("05", "strided_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "strided": "(j <= i) & (i - j < stride) & "
                                                                           "((i - j) % stride == 0)"}),
     "the pattern is the OR of its two parts"),
    ("05", "fixed_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "fixed": "(j <= i) & ((i // block == j // block) | "
                                                                       "(j % block < c))"}),
     "the summary cells are the LAST c of each block"),
    ("05", "fixed_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "fixed": "(i // block == j // block) | "
                                                                       "((j % block >= block - c) & (j <= i))"}),
     "the pattern is causal"),
    ("05", "fixed_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "fixed": "(j <= i) & ((i - j < block) | "
                                                                       "(j % block >= block - c))"}),
     "a sliding window, not a block"),
    ("05", "fixed_mask", SPARSE_ATTEMPT.format(**{**SPARSE_SLIP, "fixed": "(j <= i) & ((i // block == j // block) | "
                                                                       "(j % block == block - 1))"}),
     "use the argument c"),
    ("16", "pack_documents", PACK_ATTEMPT.format(**{**PACK_SLIP, "rows": "range(max(len(used) - 1, 0), len(used))"}),
     "first fit: each document goes to the FIRST row with room for it"),
    ("16", "pack_documents", PACK_ATTEMPT.format(**{**PACK_SLIP, "pos": "np.arange(start, start + n)"}),
     "positions restart at 0 in every document"),
    ("16", "pack_documents", PACK_ATTEMPT.format(**{**PACK_SLIP, "pad_doc": "0"}), "doc = −1 there"),
    ("16", "pack_documents", PACK_ATTEMPT.format(**{**PACK_SLIP, "pad": "0"}), "with the pad_id given"),
    ("16", "pack_documents", PACK_ATTEMPT.format(**{**PACK_SLIP, "check": "pass"}), "fits no row"),
    ("16", "pack_documents", PACK_ATTEMPT.format(**{**PACK_SLIP, "longest": "False"}),
     "places the documents from the longest down"),
    ("18", "clip_by_global_norm", CLIP_ATTEMPT.format(**{**CLIP_SLIP, "factor": "max_norm / (norm + 1e-6)"}),
     "a small gradient is never scaled up"),
    ("18", "clip_by_global_norm", CLIP_ATTEMPT.format(**{**CLIP_SLIP, "scale": "grads[name] = g * factor"}),
     "scale in place"),
    ("18", "clip_by_global_norm", CLIP_ATTEMPT.format(**{**CLIP_SLIP, "returned": "norm * factor"}),
     "return the norm measured BEFORE clipping"),
    ("18", "clip_by_global_norm", CLIP_ATTEMPT.format(**{**CLIP_SLIP, "square": "g ** 2"}),
     "sum the squares in float64"),
    ("18", "clip_by_global_norm", CLIP_ATTEMPT.format(**{**CLIP_SLIP, "factor": "min(1.0, max_norm / norm) if norm "
                                                                               "else 1.0"}),
     "the 1e-6 keeps it finite"),
    # lesson 18's loss, its gradient and the schedule; lesson 10's GELU
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "shift": "0"}), "subtract each row's max before exp"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "lse": "m[..., 0] + lse", "zt": "zt + m[..., 0]"}),
     "never add m back"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "mean": "nll.mean()"}),
     "N counts the targets ≠ ignore_index, not every position"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "mean": "nll.sum() / keep.sum()"}),
     "return 0, not 0 / 0 = NaN"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "t": "targets"}), "a target of −100 is not an index"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "keep": "targets != -100"}),
     "the ignored positions are scored too"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "check": "pass"}), "check the kept targets first"),
    ("18", "cross_entropy", LOSS_ATTEMPT.format(**{**LOSS_SLIP, "check": "if (targets >= logits.shape[-1]).any(): "
                                                   "raise ValueError(f'a target ≥ v={logits.shape[-1]}')"}),
     "a negative target other than ignore_index"),
    ("18", "cross_entropy_backward", GRAD_ATTEMPT.format(**{**GRAD_SLIP, "n": "1"}),
     "divide by N, the number of kept positions"),
    ("18", "cross_entropy_backward", GRAD_ATTEMPT.format(**{**GRAD_SLIP, "kept": "d"}), "its row of the gradient is 0"),
    ("18", "lr_at", LR_ATTEMPT.format(**{**LR_SLIP, "warm": "step / warmup"}),
     "the warm-up's first step is η_max/warmup, not 0"),
    ("18", "lr_at", LR_ATTEMPT.format(**{**LR_SLIP, "length": "total"}),
     "progress = (step − warmup) / (total − warmup)"),
    ("18", "lr_at", LR_ATTEMPT.format(**{**LR_SLIP, "after": "step >= total + 10 ** 9"}),
     "the cosine, left running, climbs back up"),
    ("18", "lr_at", LR_ATTEMPT.format(**{**LR_SLIP, "floor": "0"}), "the cosine decays to lr_min, not to 0"),
    ("10", "gelu", """
        from transformer import erf
        def gelu(x, approximate="none"):
            if approximate == "tanh":
                return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
            return 0.5 * x * (1 + erf(x))
        """, "divide x by √2 inside erf"),
    ("10", "gelu", """
        from transformer import erf
        def gelu(x, approximate="none"):
            if approximate == "tanh":
                return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
            return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))
        """, "math.erf takes one number"),
    ("10", "gelu", """
        from transformer import erf
        def gelu(x, approximate="none"):
            return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        """, "the tanh formula is only for approximate='tanh'"),
    ("10", "gelu", """
        from transformer import erf
        def gelu(x, approximate="none"):
            if approximate == "tanh":
                return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
            return 0.5 * (1 + erf(x / math.sqrt(2)))
        """, "multiply it by x"),
    ("10", "gelu", """
        from transformer import erf
        def gelu(x, approximate="none"):
            if approximate == "tanh":
                return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 2)))
            return 0.5 * x * (1 + erf(x / math.sqrt(2)))
        """, "with x cubed"),
    ("10", "gelu", """
        from transformer import erf
        def gelu(x, approximate="none"):
            return x / (1 + np.exp(-1.702 * x))
        """, "x·σ(1.702x) is the sigmoid approximation"),
    ("05", "padding_mask", """
        def padding_mask(lengths, n=None, *, xp=None):
            lengths = np.asarray(lengths)
            n = int(lengths.max()) if n is None else n
            return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]
        """, "so j < length, not j ≤ length"),
]

# --- slips from a learner's first attempts -----------------------------------------------------------------------
# Written as a learner wrote them, one slip each, in a run of the workbook by hand; each needed a hint it did not get
# (or got a misleading one) before the checker knew the slip.
FLASH_ATTEMPT = """
    from transformer import online_attention_update, repeat_kv
    def flash_attention(q, k, v, *, causal=False, block_q=None, block_k=None):
        b, h, n_q, d_h = q.shape
        n_k = k.shape[2]
        k, v = repeat_kv(k, h // k.shape[1]), repeat_kv(v, h // v.shape[1])
        Br, Bc = min(block_q or 128, n_q), min(block_k or 128, n_k)
        ct = {ct}
        qc, kc, vc = q.astype(ct), k.astype(ct), v.astype(ct)
        out = np.zeros((b, h, n_q, d_h), ct)
        for i0 in range(0, n_q, Br):
            Qi = qc[:, :, i0:i0 + Br]
            br = Qi.shape[2]
            m, l, O = np.full((b, h, br, 1), -np.inf, ct), np.zeros((b, h, br, 1), ct), np.zeros((b, h, br, d_h), ct)
            qpos = np.arange(i0, i0 + {rows})[:, None] + (n_k - n_q)
            for j0 in range(0, n_k, Bc):
                S = Qi @ kc[:, :, j0:j0 + Bc].swapaxes(-1, -2){scale}
                if causal:
                    S = np.where(np.arange(j0, j0 + S.shape[-1])[None, :] {le} qpos, S, -np.inf)
                m, l, O = online_attention_update(m, l, O, S, vc[:, :, j0:j0 + Bc])
            out[:, :, i0:i0 + br] = {divide}
        return out.astype(q.dtype)
    """
FLASH_RIGHT = {"ct": "np.float32 if q.dtype == np.float16 else q.dtype", "rows": "br", "scale": " / math.sqrt(d_h)",
               "le": "<=", "divide": "O / np.where(l == 0, 1, l)"}
PAGED_ATTEMPT = """
    def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None):
        h, n_q, d_h = q.shape
        h_kv, bs = k_pool.shape[1], k_pool.shape[2]
        blocks = block_table[:-(-n_tokens // bs)]
        K = np.repeat(np.concatenate([k_pool[b] for b in blocks], axis=1)[:, :n_tokens], h // h_kv, axis=0)
        V = np.repeat(np.concatenate([v_pool[b] for b in blocks], axis=1)[:, :n_tokens], h // h_kv, axis=0)
        scale = 1 / np.sqrt(d_h) if scale is None else scale
        S = q @ K.transpose(0, 2, 1){scale}
        qpos, kpos = np.arange(n_tokens - n_q, n_tokens)[:, None], np.arange(n_tokens)[None, :]
        if causal:
            S = np.where(kpos {sees} qpos, S, -np.inf)
        P = np.exp(S - S.max(-1, keepdims=True))
        return (P / P.sum(-1, keepdims=True) @ V).astype(q.dtype)
    """
DECODER_ATTEMPT = """
    from transformer import causal_mask, ffn, layer_norm, relu, multi_head_attention
    def seq2seq_decoder_layer(y, z, lw, h, *, causal=True, self_mask=None, cross_mask=None, activation=relu, eps=1e-5):
        keep = self_mask
        if causal:
            cm = {causal}
            keep = cm if keep is None else keep & cm
        a, p_self = multi_head_attention(y, lw.self_attn, h, mask=keep, return_weights=True)
        y1 = layer_norm({first}, lw.ln1_g, lw.ln1_b, eps)
        c, p_cross = multi_head_attention(y1, lw.cross_attn, h, mask=cross_mask, context=z, return_weights=True)
        y2 = layer_norm(y1 + c, lw.ln2_g, lw.ln2_b, eps)
        f = ffn(y2, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)
        return layer_norm(y2 + f, lw.ln3_g, lw.ln3_b, eps), p_self, p_cross
    """
SCORES_ATTEMPT = """
    def induction_head_scores(maps, n_half):
        W, m = np.asarray(maps), n_half
        i, j = np.arange({first_row}, 2 * m), np.arange(m, {last_row})
        return {{"previous token": {prev}, "induction": W[..., j, j - m + 1].{reduce}(-1)}}
    """
SCORES_RIGHT = {"first_row": 1, "last_row": "2 * m - 1", "prev": "W[..., i, i - 1].mean(-1)", "reduce": "mean"}
COUNT_ATTEMPT = """
    def count_parameters(config):
        c = config
        attention = {attention}
        total = c.v * c.d + c.L * (attention + 3 * c.d * c.d_ff + {norms} * c.d) + c.d
        return total if c.tied else total + c.v * c.d
    """
ADAMW_ATTEMPT = """
    from transformer import decays_by_default
    def adamw_step(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
        b1, b2 = betas
        state.t += 1
        for name, p in params.items():
            if decay(name) if decay is not None else decays_by_default(name, p):
                {shrink}
            state.m[name][...] = b1 * state.m[name] + (1 - b1) * grads[name]
            state.v[name][...] = b2 * state.v[name] + (1 - b2) * grads[name] ** 2
            m_hat = {m_hat}
            p -= lr * m_hat / (np.sqrt(state.v[name] / (1 - b2 ** state.t)) + eps)
    """
ADAMW_RIGHT = {"shrink": "p *= 1 - lr * weight_decay", "m_hat": "state.m[name] / (1 - b1 ** state.t)"}
BACKWARD_ATTEMPT = """
    def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale=None):
        b, h, n, d_h = q.shape
        h_kv = k.shape[1]
        scale = 1 / math.sqrt(d_h) if scale is None else scale
        K, V = np.repeat(k, h // h_kv, 1), np.repeat(v, h // h_kv, 1)
        dP = dO @ V.swapaxes(-1, -2)
        dS = P * (dP - (dP * P).sum(-1, keepdims=True))
        group = lambda g: g.reshape(b, h_kv, h // h_kv, *g.shape[2:]).sum(2)
        return {dq}, group(dS.swapaxes(-1, -2) @ q * scale), group({dv})
    """
BACKWARD_RIGHT = {"dq": "dS @ K * scale", "dv": "P.swapaxes(-1, -2) @ dO"}
FILTER_ATTEMPT = """
    def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
        x = np.asarray(logits)
        if temperature == 0:
            return np.where(np.arange(x.shape[-1]) == np.argmax(x, axis=-1)[..., None], x, -np.inf)
        x = {scaled}
        if top_k is not None and top_k < x.shape[-1]:
            {top_k}
        if top_p is not None and top_p < 1.0:
            p = np.exp(x - x.max(-1, keepdims=True))
            p = p / p.sum(-1, keepdims=True)
            order = np.argsort(-x, axis=-1{kind})
            sorted_p = np.take_along_axis(p, order, -1)
            keep = np.zeros(x.shape, bool)
            np.put_along_axis(keep, order, {before} < top_p, -1)
            x = np.where(keep, x, -np.inf)
        return {result}
    """
FILTER_RIGHT = {"scaled": "(x / x.dtype.type(temperature)).astype(x.dtype)", "kind": ', kind="stable"', "result": "x",
                "before": "np.cumsum(sorted_p, -1) - sorted_p",
                "top_k": "x = np.where(x >= np.sort(x, axis=-1)[..., -top_k][..., None], x, -np.inf)"}
MHA_ATTEMPT = """
    from transformer import scaled_dot_product_attention
    def multi_head_attention(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):
        h_kv = h if h_kv is None else h_kv
        c = x if context is None else context
        q = split_heads(x @ w.W_q + (0 if w.b_q is None else w.b_q), h){q_scale}
        k = split_heads(c @ w.W_k + (0 if w.b_k is None else w.b_k), h_kv)
        v = split_heads(c @ w.W_v + (0 if w.b_v is None else w.b_v), h_kv)
        o, p = scaled_dot_product_attention(q, k, v, {mask}return_weights=True)
        out = merge_heads(o) @ w.W_o{o_t} + (0 if w.b_o is None else w.b_o)
        return (out, p) if return_weights else out
    """
MHA_RIGHT = {"q_scale": "", "mask": "mask, ", "o_t": ""}
ROPE_HALF_ATTEMPT = """
    def apply_rope_half(x, cos, sin):
        x1, x2 = {halves}
        return np.concatenate([x1 * {c} - x2 * {s}, x1 * {s} + x2 * {c}], axis=-1)
    """
ROPE_HALF_RIGHT = {"halves": "np.split(x, 2, axis=-1)", "c": "cos", "s": "sin"}

# PagedKVCache.write as a learner writes it, in the workbook's class (its `extend` the plain `lengths[seq] += t`)
PAGED_WRITE_ATTEMPT = """
    class PagedKVCache(PagedKVCache):
        def extend(self, seq, t):
            self.lengths[seq] += t

        def write(self, seq, layer, k_new, v_new):
            t, table, bs = k_new.shape[1], self.tables[seq], self.block_size
            start = {start}
            for _ in range({n_new}):
                {empty}
                table.append(self.free.pop({take}))
            p = start
            while p < start + t:
                blk, off = table[p // bs], p % bs
                m = {m}
                {store}[layer][blk, :, off:off + m] = k_new[:, p - start:p - start + m]
                self.v[layer][blk, :, off:off + m] = v_new[:, p - start:p - start + m]
                p += m
            {record}
    """
PAGED_WRITE_SLIP = {"start": "self.lengths[seq]", "n_new": "-(-(start + t) // bs) - len(table)", "take": "",
              "m": "min(bs - off, start + t - p)", "store": "self.k", "record": "self.written[seq][layer] = start + t",
              "empty": "if not self.free: raise RuntimeError(f'all {self.n_blocks} blocks are in use')"}
PAGED_WRITE_SLIPS = [({"n_new": "-(-t // bs)"}, "take only ⌈(length + t) / block_size⌉ − len(table) blocks"),
               ({"empty": "pass"}, "when the free list is empty"),
               ({"n_new": "1"}, "the table must cover every new position"),
               ({"take": "0"}, "the free list is a stack"),
               ({"start": "0"}, "write the new positions at [length, length + t)"),
               ({"record": "pass"}, "record self.written[seq][layer] = length + t"),
               ({"record": "self.written[seq][layer] = start + t; self.lengths[seq] += t"},
                "write must not move self.lengths[seq]"),
               ({"m": "t"}, "run across block boundaries: copy them one block at a time"),
               ({"m": "t if t <= bs else min(bs - off, start + t - p)"}, "run across block boundaries"),
               ({"store": "self.k = [a.copy() for a in self.k]; self.k"},
                "write into the pools __init__ allocated, by slice")]
ROPE_BACKWARD_ATTEMPT = """
    def apply_rope_half_backward(dY, cos, sin):
        half = dY.shape[-1] // 2
        d1, d2 = {halves}
        first, second = {first}, {second}
        return {join}
"""
ROPE_BACKWARD_SLIP = {"halves": "dY[..., :half], dY[..., half:]", "first": "d1 * cos + d2 * sin",
                      "second": "-d1 * sin + d2 * cos", "join": "np.concatenate([first, second], axis=-1)"}
EMBED_BACKWARD_ATTEMPT = """
    def embed_backward(dX, ids, v):
        {shapes}
        rows, t = dX.reshape(-1, dX.shape[-1]), {t}
        dW = np.zeros((v, dX.shape[-1]), dtype=dX.dtype)
        {scatter}
        return dW
"""
EMBED_BACKWARD_SLIP = {"shapes": "pass", "t": "ids.reshape(-1)", "scatter": "np.add.at(dW, t, rows)"}
FLASH_BACKWARD_ATTEMPT = """
    def flash_attention_backward(dout, q, k, v, out, lse, *, causal=False, block_q=None, block_k=None):
        b, h, n_q, d_h = q.shape
        h_kv, n_k = k.shape[1], k.shape[2]
        r = h // h_kv
        K, V = np.repeat(k, r, axis=1), np.repeat(v, r, axis=1)
        Br, Bc = {tiles}
        s = 1 / math.sqrt(d_h)
        L = {L}[..., None]
        D = (dout * out).sum(-1, keepdims=True)
        dq, dK, dV = np.zeros(q.shape), np.zeros(K.shape), np.zeros(V.shape)
        for c0 in range(0, n_k, Bc):
            Kj, Vj = K[..., c0:c0 + Bc, :], V[..., c0:c0 + Bc, :]
            for r0 in range(0, n_q, Br):
                Qi, dOi = q[..., r0:r0 + Br, :], dout[..., r0:r0 + Br, :]
                S = Qi @ Kj.swapaxes(-1, -2) * s
                if causal:
                    i = np.arange(r0, r0 + Qi.shape[2])[:, None] + {offset}
                    S = np.where(np.arange(c0, c0 + Kj.shape[2])[None, :] <= i, S, -np.inf)
                P = {P}
                dV[..., c0:c0 + Bc, :] += P.swapaxes(-1, -2) @ dOi
                dP = dOi @ Vj.swapaxes(-1, -2)
                dS = P * (dP - {Di})
                dq[..., r0:r0 + Br, :] += dS @ Kj * s
                dK[..., c0:c0 + Bc, :] += dS.swapaxes(-1, -2) @ Qi * {sk}
        group = lambda g: g.reshape(b, h_kv, r, n_k, d_h).sum(2).astype(q.dtype)
        return dq.astype(q.dtype), group(dK), group(dV)
"""
FLASH_BACKWARD_SLIP = {"tiles": "block_q or 128, block_k or 128", "L": "np.where(lse == -np.inf, np.inf, lse)",
                       "offset": "n_k - n_q", "P": "np.exp(S - L[..., r0:r0 + Br, :])", "Di": "D[..., r0:r0 + Br, :]",
                       "sk": "s"}
ONLINE_STATS_ATTEMPT = """
    def online_softmax_stats(x, block=1, history=None):
        x = {x}
        m = np.full(x.shape[:-1] + (1,), -np.inf, dtype=x.dtype)
        l = np.zeros(m.shape, dtype=x.dtype)
        for c0 in range(0, x.shape[-1], block):
            x_j = x[..., c0:c0 + block]
            m_new = {m_new}
            alpha = {alpha}
            l = {l}
            m = m_new
            {record}
        return m, l
"""
ONLINE_STATS_SLIP = {"x": "x.astype(np.float32) if x.dtype == np.float16 else x",
                     "m_new": "np.maximum(m, x_j.max(-1, keepdims=True))",
                     "alpha": "np.where(m == -np.inf, 0.0, np.exp(m - np.where(m_new == -np.inf, 0, m_new)))",
                     "l": "alpha * l + np.exp(x_j - np.where(m_new == -np.inf, 0, m_new)).sum(-1, keepdims=True)",
                     "record": "if history is not None: history.append((m[..., 0], l[..., 0]))"}
HEAD_BACKWARD_ATTEMPT = """
    def lm_head_backward(d_logits, x, W_E):
        v, d = W_E.shape
        return {dx}, {dW}
"""
HEAD_BACKWARD_SLIP = {"dx": "d_logits @ W_E", "dW": "d_logits.reshape(-1, v).T @ x.reshape(-1, d)"}
LINEAR_BACKWARD_ATTEMPT = """
    def linear_backward(dY, x, W, has_bias=False):
        d_in, d_out = W.shape
        X, G = {rows}
        dx = {dx}
        dW = {dW}
        db = {db}
        return dx, dW, db
"""
LINEAR_BACKWARD_SLIP = {"rows": "x.reshape(-1, d_in), dY.reshape(-1, d_out)", "dx": "(G @ W.T).reshape(x.shape)",
                        "dW": "X.T @ G", "db": "G.sum(axis=0) if has_bias else None"}
HEADS_BACKWARD_ATTEMPT = """
    def merge_heads_backward(dY, h):
        b, n, d = dY.shape
        return {split}

    def split_heads_backward(dX):
        b, h, n, d_h = dX.shape
        return {merge}
"""
HEADS_BACKWARD_SLIP = {"split": "dY.reshape(b, n, h, d // h).swapaxes(1, 2)",
                       "merge": "dX.swapaxes(1, 2).reshape(b, n, h * d_h)"}
DROPOUT_ATTEMPT = """
    def dropout(x, p, *, rng=None, mask=None, training=True):
        if {identity}:
            return x, None
        if mask is None:
            g = {g}
            mask = {keep}
        return x * mask {scale}, mask

    def dropout_backward(dY, mask, p):
        {none}
        return dY * mask {back}
"""
DROPOUT_SLIP = {"identity": "not training or p == 0",
                "g": "rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)",
                "keep": "g.random(x.shape) >= p", "scale": "/ (1 - p)", "none": "if mask is None: return dY",
                "back": "/ (1 - p)"}
FLOPS_ATTEMPT = """
    def forward_flops(config, n_tokens, *, batch=1, phase="prefill", logits="all"):
        c = config
        d_h = {d_h}
        n_q, n_k = (n_tokens, n_tokens) if phase == "prefill" else (1, {n_k})
        n_p = {n_p}
        t = {t}
        f = {{"qkvo": {two} * (n_p * c.d * c.h * d_h + 2 * n_p * c.d * {kv} * d_h + n_p * c.h * d_h * c.d) * c.L,
             "ffn": {two} * n_p * c.d * c.d_ff * {ffn} * c.L,
             "head": {head},
             "scores": {two} * c.h * ({pairs}) * d_h * c.L}}
        f["mix"] = f["scores"]
        f = {{k: v * {b} for k, v in f.items()}}
        f["matmul"] = f["qkvo"] + f["ffn"] + f["head"]
        f["attention"] = f["scores"] + f["mix"]
        f["total"] = f["matmul"] + f["attention"]
        f["tokens"] = {tokens}
        return f
"""
FLOPS_SLIP = {"d_h": "c.d_h", "n_k": "n_tokens + 1", "n_p": "n_q", "two": "2", "kv": "c.h_kv", "ffn": "3",
              "pairs": "n_q * n_k", "t": 'n_q if phase == "prefill" and logits == "all" else 1',
              "head": "2 * t * c.d * c.v", "b": "batch", "tokens": "batch * n_q"}
GLOBAL_ATTEMPT = """
    from transformer import namespace
    def global_mask(n, global_tokens, *, xp=None):
        xp = namespace(xp)
        {g}
        return {mask}
"""
GLOBAL_SLIP = {"g": "g = xp.zeros(n, dtype=bool); g[list(global_tokens)] = True", "mask": "g[:, None] | g[None, :]"}
DECODER_MASK_ATTEMPT = """
    from transformer import causal_mask, namespace
    def decoder_mask(n_q, n_past, key_valid=None, *, xp=None):
        xp = namespace(xp)
        if {none}:
            return None
        causal = {causal}
        if key_valid is None:
            return causal
        {check}
        return {combine}
"""
DECODER_MASK_SLIP = {"none": "key_valid is None and n_q == 1", "causal": "causal_mask(n_q, n_past + n_q, xp=xp)",
                     "combine": "causal[None, None, :, :] & key_valid[:, None, None, :]",
                     "check": "if key_valid.shape[-1] != n_past + n_q: raise ValueError("
                              "f'key_valid has {key_valid.shape[-1]} keys, not n_past + n_q = {n_past + n_q}')"}
ACCURACY_ATTEMPT = """
    def induction_accuracy(pred_ids, ids):
        m = ids.shape[1] // 2
        right = {right}
        return float({share})
"""
ACCURACY_SLIP = {"right": "pred_ids[:, m:-1] == ids[:, m + 1:]", "share": "right.mean()"}
REPORT_ATTEMPT = """
    from transformer import kv_cache_bytes_per_token
    def paged_memory_report(config, lengths, *, block_size=16, n_max=None, dtype="float16"):
        per = {per}
        n_max = {n_max}
        {check}
        blocks = sum({blocks} for n in lengths)
        used, paged, contiguous = sum(lengths) * per, blocks * block_size * per, len(lengths) * n_max * per
        return {{"requests": len(lengths), "tokens": sum(lengths), "blocks": blocks, "bytes_per_token": per,
                "used": used, "paged_reserved": paged, "contiguous_reserved": contiguous,
                "paged_waste": {waste_p}, "contiguous_waste": contiguous - used,
                "paged_utilisation": {util_p}, "contiguous_utilisation": used / contiguous if contiguous else 1.0}}
"""
REPORT_SLIP = {"per": "kv_cache_bytes_per_token(config, dtype)", "n_max": "max(lengths, default=0) if n_max is None "
               "else n_max", "blocks": "-(-n // block_size)", "waste_p": "paged - used",
               "util_p": "used / paged if paged else 1.0",
               "check": "if any(n > n_max for n in lengths): raise ValueError(f'a request exceeds n_max={n_max}')"}
LEARNED_ATTEMPT = """
    def learned_positions(n, W_pos, offset=0):
        {check}
        return {rows}
"""
LEARNED_SLIP = {"check": "if offset + n > W_pos.shape[0]: raise ValueError(f'positions {offset}…{offset + n - 1} "
                         "past {W_pos.shape[0]} rows')",
                "rows": "W_pos[offset:offset + n]"}
FFN_ATTEMPT = """
    from transformer import relu
    def ffn(x, W1, W2, b1=None, b2=None, activation=relu):
        h = x @ {first}
        {b1}
        y = {g}(h) @ {second}
        {end}
        return y + b2 if b2 is not None else y
"""
FFN_SLIP = {"first": "W1", "second": "W2", "b1": "h = h + b1 if b1 is not None else h", "g": "activation", "end": ""}
RESIDUAL_ATTEMPT = """
    def residual(x, sublayer, norm, *, pre_norm=True):
        if {which}:
            return {pre}
        return {post}
"""
RESIDUAL_SLIP = {"which": "pre_norm", "pre": "x + sublayer(norm(x))", "post": "norm(x + sublayer(x))"}
IO_ATTEMPT = """
    import transformer as package
    def visible_key_tiles(n_q, n_k, block_q, block_k, causal):
        Tr, Tc = -(-n_q // block_q), {Tc}
        if not causal:
            return [Tc] * Tr
        out = []
        for i in range(Tr):
            p = {last} + {offset}
            out.append({count})
        return out

    def standard_attention_io(n_q, n_k, d_h, heads=1):
        loads = {loads}
        stores = {stores}
        return {{"loads": {h} * loads, "stores": {h} * stores, "total": {h} * (loads + stores)}}

    def flash2_io(n_q, n_k, d_h, block_q, block_k, causal=False, heads=1):
        tiles = {tiles}(n_q, n_k, block_q, block_k, {causal})
        keys = sum({keys} for t in tiles)
        loads = {q} + {kv} * d_h * keys
        stores = n_q * {o}
        return {{"loads": heads * loads, "stores": heads * stores, "total": heads * (loads + stores)}}
"""
# a slip in visible_key_tiles planted alone: flash2_io counts with the package's tiles, so that it still passes
TILES_GIVEN = {"visible_key_tiles": {"tiles": "package.visible_key_tiles"}, "standard_attention_io": {}, "flash2_io": {}}
IO_SLIP = {"Tc": "-(-n_k // block_k)", "last": "min(n_q, (i + 1) * block_q) - 1", "offset": "n_k - n_q",
           "count": "0 if p < 0 else min(Tc, p // block_k + 1)",
           "loads": "n_q * d_h + 2 * n_k * d_h + 2 * n_q * n_k", "stores": "2 * n_q * n_k + n_q * d_h", "h": "heads",
           "causal": "causal", "tiles": "visible_key_tiles", "keys": "min(n_k, t * block_k)", "q": "n_q * d_h", "kv": "2",
           "o": "(d_h + 1)"}
INTENSITY_ATTEMPT = """
    from transformer import forward_flops
    def arithmetic_intensity(config, n_tokens, *, batch=1, dtype="float16"):
        c, size = config, {size}
        W = c.L * (c.d * c.h * c.d_h + 2 * c.d * c.h_kv * c.d_h + c.h * c.d_h * c.d + 3 * c.d * c.d_ff) + {head}
        row = 2 * c.L * c.h_kv * c.d_h * size
        pre = forward_flops(c, n_tokens, batch=batch, logits={logits})["total"]
        dec = forward_flops(c, n_tokens, batch=batch, phase="decode")["total"]
        pre_bytes = W * size{per_token} + {kv} * batch * n_tokens * row
        dec_bytes = W * size + {kv} * batch * ({cached}) * row
        return {{"prefill": {{"flops": pre, "bytes": pre_bytes, "intensity": {ratio}}},
                "decode": {{"flops": dec, "bytes": dec_bytes, "intensity": {dec_ratio}}}}}
"""
INTENSITY_SLIP = {"size": "np.dtype(dtype).itemsize", "head": "c.v * c.d", "logits": '"last"', "per_token": "",
                  "kv": "1", "cached": "n_tokens + 1", "ratio": "pre / pre_bytes", "dec_ratio": "dec / dec_bytes"}
SAMPLE_ATTEMPT = """
    from transformer import filter_logits, softmax
    def sample_next(logits, temperature=0.0, top_k=None, top_p=None, rng=None):
        if {greedy}:
            return np.argmax(logits, axis=-1)
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        p = {probs}
        c = np.cumsum(p, axis=-1)
        u = {u}
        return {pick}
"""
SAMPLE_SLIP = {"greedy": "temperature == 0", "probs": "softmax(filter_logits(logits, temperature, top_k, top_p))",
               "u": "rng.random(size=(*c.shape[:-1], 1))", "pick": "np.sum(c <= u, axis=-1)"}
QKV_ATTEMPT = """
    from transformer import split_heads
    def qkv_heads(x, w, h, h_kv, context=None):
        c = {c}
        q = {split}(x @ w.W_q{bq}, h)
        k = {split}(c @ w.W_k{bk}, {kv})
        v = {split}(c @ w.W_v{bv}, {kv})
        return q, {k}, {v}
"""
QKV_SLIP = {"c": "x if context is None else context", "bq": " + (0 if w.b_q is None else w.b_q)",
            "bk": " + (0 if w.b_k is None else w.b_k)", "bv": " + (0 if w.b_v is None else w.b_v)",
            "split": "split_heads", "kv": "h_kv", "k": "k", "v": "v"}
BERT_EMBED_ATTEMPT = """
    from transformer import layer_norm
    def bert_embeddings(ids, w, cfg, token_types=None, positions=None):
        b, n = ids.shape
        pos = {pos}
        types = np.zeros_like(ids) if token_types is None else token_types
        x = w.W_E[ids] + w.W_pos[pos]{type_term}
        return {out}
"""
BERT_EMBED_SLIP = {"pos": "np.broadcast_to(np.arange(n), (b, n)) if positions is None else positions",
                   "type_term": " + w.W_type[types]", "out": "layer_norm(x, w.ln_g, w.ln_b, cfg.eps)"}
ENCODER_ATTEMPT = """
    from transformer import causal_mask, ffn, layer_norm, multi_head_attention, relu
    def seq2seq_encoder_layer(x, lw, h, *, mask=None, activation=relu, eps=1e-5):
        keep = {keep}
        a, p = multi_head_attention({q_in}, lw.self_attn, h, mask=keep, return_weights=True)
        x1 = {x1}
        f = ffn({f_in}, lw.W_1, lw.W_2, {biases}, activation={act})
        return {out}, p
"""
ENCODER_SLIP = {"keep": "mask", "q_in": "x", "x1": "layer_norm(x + a, lw.ln1_g, lw.ln1_b, eps)", "f_in": "x1",
                "biases": "lw.b_1, lw.b_2", "act": "activation", "out": "layer_norm(x1 + f, lw.ln2_g, lw.ln2_b, eps)"}
FIRST_ATTEMPTS = [
    *(("15", "seq2seq_encoder_layer", ENCODER_ATTEMPT.format(**{**ENCODER_SLIP, **slip}), hint)
      for slip, hint in [({"q_in": "layer_norm(x, lw.ln1_g, lw.ln1_b, eps)", "x1": "x + a",
                           "f_in": "layer_norm(x1, lw.ln2_g, lw.ln2_b, eps)", "out": "x1 + f"}, "post-norm"),
                         ({"keep": "causal_mask(x.shape[1]) if mask is None else mask & causal_mask(x.shape[1])"},
                          "bidirectional"),
                         ({"keep": "None"}, "pass `mask` to the self-attention"),
                         ({"x1": "layer_norm(a, lw.ln1_g, lw.ln1_b, eps)"}, "the self-attention has a residual"),
                         ({"out": "layer_norm(f, lw.ln2_g, lw.ln2_b, eps)"}, "the FFN has a residual too"),
                         ({"out": "x1 + f"}, "the second sub-layer ends like the first"),
                         ({"biases": "None, None"}, "the FFN has biases"),
                         ({"act": "relu"}, "pass `activation` on to the FFN")]),
    *(("12", "bert_embeddings", BERT_EMBED_ATTEMPT.format(**{**BERT_EMBED_SLIP, **slip}), hint)
      for slip, hint in [({"out": "x"}, "BERT's embedding LayerNorm"),
                         ({"type_term": " + (0 if token_types is None else w.W_type[token_types])"},
                          "W_type[0] is a learned vector"),
                         ({"pos": "np.broadcast_to(np.arange(n), (b, n))"}, "use the positions given"),
                         ({"pos": "np.broadcast_to(np.arange(1, n + 1), (b, n)) if positions is None else positions"},
                          "positions count from 0"),
                         ({"out": "layer_norm(x, w.ln_g, w.ln_b)"}, "BERT's 1e-12")]),
    *(("07", "qkv_heads", QKV_ATTEMPT.format(**{**QKV_SLIP, **slip}), hint)
      for slip, hint in [({"kv": "h"}, "K and V have h_kv heads, not h"),
                         ({"k": "np.repeat(k, h // h_kv, axis=1)", "v": "np.repeat(v, h // h_kv, axis=1)"},
                          "as the KV cache stores them"),
                         ({"c": "x"}, "K = context W_k and"),
                         ({"bq": "", "bk": "", "bv": ""}, "add each projection's bias"),
                         ({"split": "(lambda t, n: t.reshape(t.shape[0], n, t.shape[1], -1))"},
                          "a reshape straight to (b, h, n, d_h)")]),
    *(("11", "sample_next", SAMPLE_ATTEMPT.format(**{**SAMPLE_SLIP, **slip}), hint)
      for slip, hint in [({"greedy": "True"}, "the rng passed in"),
                         ({"probs": "softmax(filter_logits(logits, 1.0, top_k, top_p))"}, "the temperature is left out"),
                         ({"probs": "softmax(filter_logits(logits, temperature))"}, "top_k and top_p are left out"),
                         ({"u": "rng.random()"}, "one u for each row"),
                         ({"u": "rng.random(size=c.shape)"}, "once for each row and pick the first token"),
                         ({"greedy": "False", "probs": "softmax(logits / temperature)",
                           "u": "rng.random(size=(*c.shape[:-1], 1)) if temperature else 0.5"}, "temperature 0 is greedy"),
                         ({"u": "np.random.default_rng(7).random(size=(*c.shape[:-1], 1))"}, "the rng passed in"),
                         ({"u": "None", "pick": "np.argmax(np.log(p) + rng.gumbel(size=p.shape), axis=-1)"},
                          "the case's own uniform numbers"),
                         ({"u": "None", "pick": "np.argmax(np.log(p) - np.log(-np.log(rng.uniform(size=p.shape))), "
                                                "axis=-1)"}, "for each row and pick the first token")]),
    *(("13", "arithmetic_intensity", INTENSITY_ATTEMPT.format(**{**INTENSITY_SLIP, **slip}), hint)
      for slip, hint in [({"head": "0"}, "its v·d numbers are read too"),
                         ({"head": "c.v * c.d * (1 if c.tied else 2)"}, "the embedding table is looked up"),
                         ({"kv": "0"}, "the KV cache moves too"),
                         ({"cached": "n_tokens"}, "writes its own K and V row"),
                         ({"logits": '"all"'}, "logits='last'"),
                         ({"per_token": " * batch * n_tokens"}, "each weight is read once a pass"),
                         ({"size": "2"}, "bytes come from `dtype`"),
                         ({"ratio": "pre_bytes / pre", "dec_ratio": "dec_bytes / dec"}, "not bytes per FLOP")]),
    *(("09", name, IO_ATTEMPT.format(**{**IO_SLIP, **slip, **TILES_GIVEN[name]}), hint)
      for name, slip, hint in [
        ("visible_key_tiles", {"offset": "0"}, "the queries are the LAST n_q"),
        ("visible_key_tiles", {"last": "i * block_q"}, "not its first"),
        ("visible_key_tiles", {"count": "0 if p < 0 else min(Tc, -(-p // block_k))"}, "falls one short"),
        ("visible_key_tiles", {"Tc": "n_k // block_k"}, "is still a tile"),
        ("visible_key_tiles", {"count": "min(Tc, p // block_k + 1)"}, "computes no tile"),
        ("standard_attention_io", {"loads": "n_q * d_h + 2 * n_k * d_h + n_q * n_k"}, "the softmax reads S back"),
        ("standard_attention_io", {"stores": "n_q * n_k + n_q * d_h"}, "writes S AND P"),
        ("standard_attention_io", {"loads": "3 * n_q * d_h + 2 * n_q * n_k"}, "K and V have n_k rows each"),
        ("standard_attention_io", {"h": "1"}, "multiply by heads"),
        ("standard_attention_io", {"loads": "2 * n_q * n_k + n_q * d_h",
                                   "stores": "n_q * d_h + 2 * n_k * d_h + 2 * n_q * n_k"}, "the two are swapped"),
        ("flash2_io", {"keys": "t * block_k"}, "streams only the keys it holds"),
        ("flash2_io", {"kv": "1"}, "K AND V"),
        ("flash2_io", {"o": "d_h"}, "its log-sum-exp L"),
        ("flash2_io", {"q": "sum(min(block_q, n_q - i * block_q) * t for i, t in enumerate(tiles)) * d_h"},
         "Q_i is loaded once"),
        ("flash2_io", {"causal": "False"}, "only the key tiles it sees")]),
    *(("10", "ffn", FFN_ATTEMPT.format(**{**FFN_SLIP, **slip}), hint)
      for slip, hint in [({"b1": "pass", "end": "y = (activation(h) + (b1 if b1 is not None else 0)) @ W2"},
                          "b₁ goes inside the activation"),
                         ({"end": "y = activation(y)"}, "with no g at the end"),
                         ({"g": "relu"}, "use the activation given"),
                         ({"first": "W2", "second": "W1"}, "W₁ (d, d_ff) comes first"),
                         ({"b1": "pass"}, "add b₁ when it is given"),
                         ({"end": "b2 = None"}, "add b₂ when it is given")]),
    *(("10", "residual", RESIDUAL_ATTEMPT.format(**{**RESIDUAL_SLIP, **slip}), hint)
      for slip, hint in [({"pre": "norm(x) + sublayer(norm(x))"}, "pre-norm leaves the residual stream as it is"),
                         ({"which": "not pre_norm"}, "the two are swapped"),
                         ({"post": "x + norm(sublayer(x))"}, "post-norm normalises the SUM"),
                         ({"pre": "sublayer(norm(x))", "post": "norm(sublayer(x))"}, "the residual adds x back"),
                         ({"which": "True"}, "use pre_norm"),
                         ({"pre": "x + sublayer(x)"}, "the norm is missing")]),
    *(("05", "global_mask", GLOBAL_ATTEMPT.format(**{**GLOBAL_SLIP, **slip}), hint)
      for slip, hint in [({"mask": "xp.broadcast_to(g[:, None], (n, n))"}, "is also SEEN by every query"),
                         ({"mask": "xp.broadcast_to(g[None, :], (n, n))"}, "also SEES every key"),
                         ({"mask": "g[:, None] & g[None, :]"}, "OR, not AND"),
                         ({"mask": "g[:, None] | g[None, :] | xp.eye(n, dtype=bool)"}, "not itself"),
                         ({"g": "g = xp.stack([xp.arange(n) == t for t in global_tokens]).any(axis=0)"},
                          "with no global token nothing is seen")]),
    ("01", "embed", "def embed(ids, W_E):\n    return W_E[ids]\n", "check the ids first"),
    ("01", "embed", "def embed(ids, W_E):\n    if ids.max() >= len(W_E): raise ValueError(f'id {ids.max()} ≥ v')\n"
                    "    return W_E[ids]\n", "a negative id is no token either"),
    *(("02", "learned_positions", LEARNED_ATTEMPT.format(**{**LEARNED_SLIP, **slip}), hint)
      for slip, hint in [({"check": "pass"}, "a slice past the end quietly returns fewer rows"),
                         ({"rows": "W_pos[:n]"}, "position i of the input is row offset + i"),
                         ({"rows": "W_pos[offset:n]"}, "the slice ENDS at offset + n"),
                         ({"check": "pass", "rows": "W_pos[:, offset:offset + n]"}, "slice the rows"),
                         ({"check": "assert offset + n <= W_pos.shape[0]"}, "raise ValueError naming the numbers"),
                         ({"check": "if offset + n >= W_pos.shape[0]: raise ValueError('past the table')"},
                          "offset + n = n_ctx still fits")]),
    *(("06", "decoder_mask", DECODER_MASK_ATTEMPT.format(**{**DECODER_MASK_SLIP, **slip}), hint)
      for slip, hint in [({"causal": "xp.tril(xp.ones((n_q, n_past + n_q), dtype=bool))"},
                          "query i is at position n_past + i"),
                         ({"causal": "causal_mask(n_q, n_q, xp=xp)"}, "AND the n_q new ones"),
                         ({"none": "False"}, "return None"),
                         ({"none": "n_q == 1"}, "even one decode step needs the mask"),
                         ({"combine": "causal[None, None, :, :] | key_valid[:, None, None, :]"}, "AND not padding"),
                         ({"combine": "causal[None, None, :, :] & key_valid[:, None, -n_q:, None]"},
                          "key_valid marks KEYS"),
                         ({"combine": "causal[None, :, :] & key_valid[:, None, :]"}, "a head axis of 1"),
                         ({"causal": "causal_mask(n_q, n_past + n_q, 0, xp=xp)"},
                          "query i is at position n_past + i"),
                         ({"check": "pass"}, "holds n_past + n_q flags a row")]),
    *(("19", "induction_accuracy", ACCURACY_ATTEMPT.format(**{**ACCURACY_SLIP, **slip}), hint)
      for slip, hint in [({"right": "pred_ids[:, m:] == ids[:, m:]"}, "the guess for the NEXT token"),
                         ({"right": "pred_ids[:, :-1] == ids[:, 1:]"}, "only the repeated half can be predicted"),
                         ({"right": "pred_ids[:, m - 1:-1] == ids[:, m:]"}, "the second half's first token"),
                         ({"share": "right.sum()"}, "not their count")]),
    *(("14", "paged_memory_report", REPORT_ATTEMPT.format(**{**REPORT_SLIP, **slip}), hint)
      for slip, hint in [({"blocks": "n // block_size"}, "its last block, part full, is reserved whole"),
                         ({"blocks": "n // block_size + 1"}, "one too many when block_size divides n"),
                         ({"n_max": "max(lengths, default=0)"}, "reserves n_max tokens for EVERY request"),
                         ({"waste_p": "used - paged"}, "reserved − used"),
                         ({"util_p": "paged / used if used else 1.0"}, "utilisation is used / reserved"),
                         ({"per": "1"}, "in bytes"),
                         ({"per": 'kv_cache_bytes_per_token(config, "float16")'}, "the `dtype` argument"),
                         ({"util_p": "used / paged"}, "guard the divisions by zero"),
                         ({"check": "pass"}, "a request longer than n_max fits no contiguous reservation")]),
    *(("13", "forward_flops", FLOPS_ATTEMPT.format(**{**FLOPS_SLIP, **slip}), hint)
      for slip, hint in [({"two": "1", "head": "t * c.d * c.v"}, "a multiply AND an add"),
                         ({"kv": "c.h"}, "only the h_kv key/value heads are projected"),
                         ({"ffn": "2"}, "SwiGLU multiplies by three matrices"),
                         ({"n_p": 'n_tokens + 1 if phase == "decode" else n_q'}, "projects only the new token"),
                         ({"n_k": "n_tokens"}, "meets n_tokens + 1 keys"),
                         ({"pairs": 'n_q * (n_q + 1) // 2 if phase == "prefill" else n_q * n_k'}, "dense n × n"),
                         ({"t": 'n_q'}, "on the last token only"),
                         ({"t": "1"}, "on every prefill token"),
                         ({"head": "0 if c.tied else 2 * t * c.d * c.v"}, "still multiplies by them"),
                         ({"b": "1", "tokens": "n_q"}, "every count grows with the batch"),
                         ({"tokens": 'batch * (n_tokens if phase == "decode" else n_q)'}, "not the cached ones"),
                         ({"d_h": "c.d // c.h"}, "which need not be d / h")]),
    *(("18", "linear_backward", LINEAR_BACKWARD_ATTEMPT.format(**{**LINEAR_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [({"dx": "(G @ W).reshape(x.shape)"}, "dY W multiplies by W untransposed"),
                         ({"dW": "G.T @ X"}, "dYᵀ X is its transpose"),
                         ({"rows": "x, dY", "dx": "G @ W.T", "dW": "X.swapaxes(-1, -2) @ G"},
                          "W is shared by every position of every sequence"),
                         ({"db": "dY.sum(axis=0) if has_bias else None"}, "not only axis 0"),
                         ({"db": "G.mean(axis=0) if has_bias else None"}, "not its mean"),
                         ({"db": "G.sum(axis=0) if has_bias else np.zeros(d_out)"}, "return None for db"),
                         ({"db": "None"}, "return it in the third place")]),
    *(("18", name, HEADS_BACKWARD_ATTEMPT.format(**{**HEADS_BACKWARD_SLIP, **slip}), hint)
      for name, slip, hint in [
        ("merge_heads_backward", {"split": "dY.reshape(b, h, n, d // h)"}, "a reshape straight to (b, h, n, d_h)"),
        ("merge_heads_backward", {"split": "dY.reshape(b, n, d // h, h).transpose(0, 3, 1, 2)"},
         "deals the columns out to the heads in turn"),
        ("split_heads_backward", {"merge": "dX.reshape(b, n, h * d_h)"}, "a reshape alone mixes positions with heads"),
        ("split_heads_backward", {"merge": "dX.transpose(0, 2, 3, 1).reshape(b, n, h * d_h)"},
         "interleaves the heads' features")]),
    *(("18", name, DROPOUT_ATTEMPT.format(**{**DROPOUT_SLIP, **slip}), hint)
      for name, slip, hint in [
        ("dropout", {"scale": ""}, "scales the kept entries by 1/(1 − p)"),
        ("dropout", {"scale": "* (1 - p)"}, "not multiply"),
        ("dropout", {"scale": "/ p"}, "not 1/p"),
        ("dropout", {"keep": "g.random(x.shape) < p"}, "the probability of DROPPING"),
        ("dropout", {"identity": "p == 0"}, "with training=False (evaluation)"),
        ("dropout", {"identity": "not training"}, "p = 0 drops nothing"),
        ("dropout", {"g": "np.random"}, "draw with the rng given"),
        ("dropout_backward", {"back": ""}, "multiplies the gradient too"),
        ("dropout_backward", {"back": "* (1 - p)"}, "as the forward does, not multiply"),
        ("dropout_backward", {"none": "pass"}, "mask None means nothing was dropped")]),
    *(("18", "lm_head_backward", HEAD_BACKWARD_ATTEMPT.format(**{**HEAD_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [({"dx": "d_logits @ W_E.T"}, "W_E as it is, untransposed"),
                         ({"dW": "x.reshape(-1, d).T @ d_logits.reshape(-1, v)"}, "Xᵀ d_logits is its transpose"),
                         ({"dW": "d_logits.swapaxes(-1, -2) @ x"}, "its gradient sums over all of them")]),
    *(("08", "online_softmax_stats", ONLINE_STATS_ATTEMPT.format(**{**ONLINE_STATS_SLIP, **slip}), hint)
      for slip, hint in [
        ({"l": "l + np.exp(x_j - np.where(m_new == -np.inf, 0, m_new)).sum(-1, keepdims=True)"},
         "rescale it by α = e^(m − m_new)"),
        ({"alpha": "np.where(m == -np.inf, 0.0, np.exp(np.where(m_new == -np.inf, 0, m_new) - m))"},
         "not e^(m_new − m)"),
        ({"m_new": "x_j.max(-1, keepdims=True)"}, "m is the max SO FAR"),
        ({"record": "pass"}, "append (m, l) to it after each block"),
        ({"m_new": "np.maximum(m, x.max(-1, keepdims=True))"}, "history holds the running (m, l) AFTER EACH BLOCK"),
        ({"record": "if history is not None: history.append((m[..., 0], l[..., 0]))\n"
                    "        if history: history[:] = [history[-1]] * len(history)"},
         "not an array changed in place later"),
        ({"alpha": "np.exp(m - m_new)"}, "a masked row (all −inf) keeps m = −inf and l = 0")]),
    *(("09", "flash_attention_backward", FLASH_BACKWARD_ATTEMPT.format(**{**FLASH_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [
        ({"P": "np.exp(S - S.max(-1, keepdims=True)) / np.exp(S - S.max(-1, keepdims=True)).sum(-1, keepdims=True)"},
         "a softmax of one tile normalises over its Bc keys only"),
        ({"Di": "(P * dP).sum(-1, keepdims=True)"}, "a tile's own rowsum(P_ij ∘ dP_ij) is only its part"),
        ({"Di": "0"}, "the softmax's backward subtracts D_i"),
        ({"sk": "1"}, "dK carries the scale too"),
        ({"L": "lse"}, "a row that saw no key has lse = −inf"),
        ({"offset": "0"}, "query row r sits at r + n_k − n_q")]),
    *(("18", "apply_rope_half_backward", ROPE_BACKWARD_ATTEMPT.format(**{**ROPE_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [
        ({"first": "d1 * cos - d2 * sin", "second": "d1 * sin + d2 * cos"}, "rotating dY by +θ again is the forward"),
        ({"second": "d1 * sin + d2 * cos"}, "the sign of its sin term is flipped (dX₁ is right)"),
        ({"first": "d1 * cos - d2 * sin"}, "the sign of its sin term is flipped (dX₂ is right)"),
        ({"first": "d1 * cos", "second": "d2 * cos"}, "each half of dX mixes both halves of dY"),
        ({"halves": "dY[..., 0::2], dY[..., 1::2]", "join": "np.stack([first, second], axis=-1).reshape(dY.shape)"},
         "not 2i with 2i + 1")]),
    *(("18", "embed_backward", EMBED_BACKWARD_ATTEMPT.format(**{**EMBED_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [
        ({"scatter": "dW[t] += rows"}, "NumPy buffers the fancy index: the last row wins"),
        ({"scatter": "dW[t] = rows"}, "np.add.at(dW, ids, dX) adds every row"),
        ({"scatter": "np.add.at(dW, t, rows); dW /= np.maximum(np.bincount(t, minlength=v), 1)[:, None]"},
         "not their mean"),
        ({"shapes": "b, n = ids.shape"}, "the ids can have any shape, (b, n) or (n,)"),
        ({"t": "ids"}, "flatten both the same way")]),
    *(("14", "PagedKVCache.write", PAGED_WRITE_ATTEMPT.format(**{**PAGED_WRITE_SLIP, **slip}), hint)
      for slip, hint in PAGED_WRITE_SLIPS),
    *(("18", "rms_norm_backward", RMS_BACKWARD_ATTEMPT.format(**{**RMS_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [
        ({"dx": "g"}, "r depends on x too"),
        ({"dx": "g - g.mean(-1, keepdims=True) - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True)"},
         "RMSNorm does not centre"),
        ({"g": "dY"}, "the gradient that reaches x̂ is g = dY ∘ γ"),
        ({"dx": "g - x_hat * np.sum(g * x_hat, axis=-1, keepdims=True)"}, "the correction is the MEAN of g ∘ x̂"),
        ({"div": ""}, "divide by r at the end"),
        ({"dgamma": "(dY * x).reshape(-1, x.shape[-1]).sum(0)"}, "dγ sums dY ∘ x̂, the normalised x"),
        ({"eps": "1e-6"}, "use the `eps` argument"),
        ({"eps": "0"}, "a row of zeros has r = √ε, not 0")]),
    *(("18", "swiglu_ffn_backward", SWIGLU_BACKWARD_ATTEMPT.format(**{**SWIGLU_BACKWARD_SLIP, **slip}), hint)
      for slip, hint in [
        ({"dA": "U * s"}, "not σ(a) alone"),
        ({"dA": "U * s * (1 - s)"}, "σ(a)(1 − σ(a)) is the sigmoid's own slope"),
        ({"dA": "s * (1 + A * (1 - s))"}, "the gate's gradient is scaled by the other factor, U"),
        ({"dU": "1"}, "dU = dH ∘ SiLU(A)"),
        ({"dx": "dA @ W_gate.T"}, "(the up branch's part is missing)"),
        ({"dx": "dU @ W_up.T"}, "(the gate's part is missing)"),
        ({"dW_down": "G.T @ (S * U)"}, "dYᵀ H is its transpose"),
        ({"X": "x", "G": "dY"}, "a weight is shared by every position")]),
    ("03", "softmax", """
        def softmax(x, axis=-1, mask=None):
            xf = x.astype(np.float32) if x.dtype == np.float16 else x
            if mask is not None:
                xf = np.where(mask, -np.inf, xf)
            m = xf.max(axis=axis, keepdims=True)
            e = np.exp(xf - np.where(np.isfinite(m), m, 0))
            s = e.sum(axis=axis, keepdims=True)
            return (e / np.where(s == 0, 1, s)).astype(x.dtype)
        """, "mask polarity: True means 'may attend'"),
    ("05", "causal_mask", """
        def causal_mask(n_q, n_k=None, offset=None, *, xp=None):
            n_k = n_q if n_k is None else n_k
            return np.triu(np.ones((n_q, n_k), bool), k=n_k - n_q if offset is None else offset)
        """, "the triangle is the wrong way round"),
    ("05", "padding_mask", """
        def padding_mask(lengths, n=None, *, xp=None):
            n = lengths.max() if n is None else n
            return (np.arange(n)[None, :] < lengths[:, None])[:, None, None, :]
        """, "lengths may be a Python list"),
    ("09", "flash_attention", FLASH_ATTEMPT.format(**{**FLASH_RIGHT, "rows": "Br"}), "the last query tile is shorter"),
    ("09", "flash_attention", FLASH_ATTEMPT.format(**{**FLASH_RIGHT, "scale": ""}), "the scores are not scaled"),
    ("09", "flash_attention", FLASH_ATTEMPT.format(**{**FLASH_RIGHT, "ct": "np.float32"}),
     "agrees only to about 7 digits, as float32 arithmetic does"),
    ("12", "mean_pool", """
        def mean_pool(hidden, lengths):
            keep = np.arange(hidden.shape[1])[None, :] <= np.asarray(lengths)[:, None]
            return ((hidden * keep[..., None]).sum(1) / np.asarray(lengths)[:, None]).astype(hidden.dtype)
        """, "j < length, not j ≤ length (the sum takes one [PAD] row)"),
    ("13", "count_parameters", COUNT_ATTEMPT.format(attention="2 * c.d * c.h * c.d_h + 2 * c.d * c.h_kv * c.d_h",
                                                    norms=1), "a layer has two RMSNorms"),
    ("13", "count_parameters", COUNT_ATTEMPT.format(attention="4 * c.d * c.d", norms=2),
     "the four attention matrices are not all d × d"),
    ("14", "paged_attention", PAGED_ATTEMPT.format(scale="", sees="<="), "the scores are not scaled"),
    ("14", "paged_attention", PAGED_ATTEMPT.format(scale=" * scale", sees="<"), "a query reads its own key too"),
    ("15", "seq2seq_decoder_layer", DECODER_ATTEMPT.format(causal="causal_mask(y.shape[1])", first="a"),
     "the self-attention has a residual"),
    ("15", "seq2seq_decoder_layer", DECODER_ATTEMPT.format(causal="~causal_mask(y.shape[1])", first="y + a"),
     "the causal mask is the wrong way round"),
    ("16", "document_mask", """
        def document_mask(doc, *, causal=True):
            doc = np.asarray(doc)
            m = (doc[:, :, None] == doc[:, None, :]) & (doc[:, None, :] >= 0)
            return (m & np.triu(np.ones((doc.shape[1],) * 2, bool)) if causal else m)[:, None]
        """, "the causal triangle is the wrong way round"),
    ("18", "scaled_dot_product_attention_backward", BACKWARD_ATTEMPT.format(**{**BACKWARD_RIGHT, "dv": "P @ dO"}),
     "dV = Pᵀ dO"),
    ("18", "adamw_step", ADAMW_ATTEMPT.format(**{**ADAMW_RIGHT, "shrink": "p = p * (1 - lr * weight_decay)"}),
     "the decayed parameters never change"),
    ("18", "adamw_step", ADAMW_ATTEMPT.format(**{**ADAMW_RIGHT, "m_hat": "state.m[name]"}),
     "m's bias correction is missing"),
    ("18", "adamw_step", ADAMW_ATTEMPT.format(**{**ADAMW_RIGHT, "shrink": "pass"}), "the weight decay is missing"),
    ("18", "softmax_backward", """
        def softmax_backward(dP, P):
            return P * (dP - dP.sum(-1, keepdims=True))
        """, "the row sum is weighted by P"),
    ("18", "scaled_dot_product_attention_backward", BACKWARD_ATTEMPT.format(**{**BACKWARD_RIGHT, "dq": "dS @ K"}),
     "dQ and dK carry the scale"),
    ("17", "mma_fragment_layout", """
        def mma_fragment_layout(operand, shape="m16n8k16"):
            if (operand, shape) != ("B", "m16n8k8"):  # every other operand as the package lays it out
                return cuda_kernels.mma_fragment_layout(operand, shape)
            k, col = np.indices((8, 8))
            return 4 * k + col % 4, col // 4, np.zeros_like(k)
        """, "TF32 B (k × n, 8 × 8) goes by column"),
    ("01", "embed", """
        def embed(ids, W_E):
            return W_E[ids - 1]
        """, "ids count from 0"),
    ("01", "lm_head", """
        def lm_head(x, W_E=None, *, W_out=None):
            return x @ W_E.T if W_out is None else x @ W_out.T
        """, "W_out is (d, v) already"),
    ("01", "lm_head", """
        def lm_head(x, W_E=None, *, W_out=None):
            z = x @ (W_E.T if W_out is None else W_out)
            e = np.exp(z - z.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
        """, "lm_head returns the logits"),
    ("02", "apply_rope_half", ROPE_HALF_ATTEMPT.format(**{**ROPE_HALF_RIGHT, "halves": "x[..., 0::2], x[..., 1::2]"}),
     "the half layout pairs x_i with x_{i + d_h/2}"),
    ("02", "apply_rope_half", ROPE_HALF_ATTEMPT.format(**{**ROPE_HALF_RIGHT, "c": "sin", "s": "cos"}),
     "sin and cos swapped"),
    ("02", "apply_rope_interleaved", """
        def apply_rope_interleaved(x, cos, sin):
            out = x.copy()
            x1, x2 = out[..., 0::2], out[..., 1::2]
            out[..., 0::2] = x1 * cos - x2 * sin
            out[..., 1::2] = x1 * sin + x2 * cos
            return out
        """, "x_2i is overwritten before the second formula reads it"),
    ("04", "multi_head_attention", MHA_ATTEMPT.format(**{**MHA_RIGHT, "mask": ""}), "only the masked cases fail"),
    ("04", "multi_head_attention", MHA_ATTEMPT.format(**{**MHA_RIGHT, "q_scale": " / np.sqrt(w.W_q.shape[1] // h)"}),
     "the scores are scaled once"),
    ("04", "multi_head_attention", MHA_ATTEMPT.format(**{**MHA_RIGHT, "o_t": ".T"}), "not W_o.T"),
    ("06", "KVCache.update", """
        class KVCache(KVCache):
            def advance(self, t):
                self.length += t

            def update(self, layer, k_new, v_new):
                end = self.length + k_new.shape[2]
                self.k[0][:, :, self.length:end], self.v[0][:, :, self.length:end] = k_new, v_new
                self.written[layer] = end
                return self.k[0][:, :, :end], self.v[0][:, :, :end]
        """, "each layer has its own arrays"),
    ("08", "merge_softmax_stats", """
        def merge_softmax_stats(m_a, l_a, m_b, l_b):
            m = np.maximum(m_a, m_b)
            return m, l_a * np.exp(m_a - m) + l_b * np.exp(m_b - m)
        """, "two empty parts merge into an empty one"),
    ("10", "layer_norm", """
        def layer_norm(x, gamma, beta=None, eps=1e-5):
            mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            return (x - mu) / np.sqrt(var + eps) * gamma + beta
        """, "β is optional"),
    ("10", "rms_norm", """
        def rms_norm(x, gamma, eps=1e-6):
            return x / np.sqrt(x.mean(-1, keepdims=True) ** 2 + eps) * gamma
        """, "the mean of the squares, mean(x²), not the square of the mean"),
    ("10", "swiglu_ffn", """
        def swiglu_ffn(x, W_gate, W_up, W_down):
            a = x @ W_gate
            return (a / (1 + np.exp(a)) * (x @ W_up)) @ W_down
        """, "the exponent's sign is flipped"),
    ("10", "swiglu_ffn", """
        def swiglu_ffn(x, W_gate, W_up, W_down):
            a = x @ W_gate
            return (a / (1 + np.exp(-a)) * (x @ W_up)) @ W_down.T
        """, "takes W_down (d_ff, d) as it is"),
    ("11", "filter_logits", FILTER_ATTEMPT.format(**{**FILTER_RIGHT, "top_k": (
        "keep_k = np.zeros(x.shape, bool); np.put_along_axis(keep_k, np.argsort(-x, axis=-1, kind='stable')"
        "[..., :top_k], True, -1); x = np.where(keep_k, x, -np.inf)")}), "a tie at the k-th keeps more than k tokens"),
    ("11", "filter_logits", FILTER_ATTEMPT.format(**{**FILTER_RIGHT, "kind": ""}), "top-p takes tied tokens in "
     "vocabulary order"),
    ("11", "filter_logits", FILTER_ATTEMPT.format(**{**FILTER_RIGHT, "scaled": "x", "result": (
        "(x / x.dtype.type(temperature)).astype(x.dtype)")}), "divide by the temperature first"),
    ("19", "induction_head_scores", SCORES_ATTEMPT.format(**{**SCORES_RIGHT, "last_row": "2 * m"}),
     "the induction score reads the rows i = m … 2m − 2"),
    ("19", "induction_head_scores", SCORES_ATTEMPT.format(**{**SCORES_RIGHT, "prev": "W[..., i - 1, i].mean(-1)"}),
     "the previous-token score reads row i, column i − 1"),
    ("19", "induction_head_scores", SCORES_ATTEMPT.format(**{**SCORES_RIGHT, "first_row": 0}),
     "the previous-token score starts at row i = 1"),
    ("19", "induction_head_scores", SCORES_ATTEMPT.format(**{**SCORES_RIGHT, "reduce": "sum"}),
     "a score is a mean over its rows"),
]
# GELU with math.erf, exact where the package's erf is written out to 1.5e-7: within the cases' tolerance
GELU_RIGHT = """
    def gelu(x, approximate="none"):
        if approximate == "tanh":
            return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        return (x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) / 2).astype(x.dtype)
"""
RIGHT_ATTEMPTS = [("09", FLASH_ATTEMPT.format(**FLASH_RIGHT)), ("14", PAGED_ATTEMPT.format(scale=" * scale", sees="<=")),
                  ("15", DECODER_ATTEMPT.format(causal="causal_mask(y.shape[1])", first="y + a")),
                  ("18", ADAMW_ATTEMPT.format(**ADAMW_RIGHT) + BACKWARD_ATTEMPT.format(**BACKWARD_RIGHT)),
                  ("19", SCORES_ATTEMPT.format(**SCORES_RIGHT)),
                  ("02", ROPE_HALF_ATTEMPT.format(**ROPE_HALF_RIGHT)), ("04", MHA_ATTEMPT.format(**MHA_RIGHT)),
                  ("11", FILTER_ATTEMPT.format(**FILTER_RIGHT)), ("10", GELU_RIGHT),
                  ("18", LOSS_ATTEMPT.format(**LOSS_SLIP) + GRAD_ATTEMPT.format(**GRAD_SLIP)
                   + LR_ATTEMPT.format(**LR_SLIP) + CLIP_ATTEMPT.format(**CLIP_SLIP)),
                  ("02", ANGLES_ATTEMPT.format(**ANGLES_SLIP)), ("05", SPARSE_ATTEMPT.format(**SPARSE_SLIP)),
                  ("16", PACK_ATTEMPT.format(**PACK_SLIP)),
                  ("01", MERGE_ATTEMPT.format(**MERGE_SLIP) + WORDPIECE_ATTEMPT.format(**WORDPIECE_SLIP)),
                  ("03", ADDITIVE_ATTEMPT.format(**ADDITIVE_SLIP)),
                  ("18", RMS_BACKWARD_ATTEMPT.format(**RMS_BACKWARD_SLIP) + SWIGLU_BACKWARD_ATTEMPT.format(
                      **SWIGLU_BACKWARD_SLIP)), ("14", PAGED_WRITE_ATTEMPT.format(**PAGED_WRITE_SLIP)),
                  ("18", ROPE_BACKWARD_ATTEMPT.format(**ROPE_BACKWARD_SLIP)
                   + EMBED_BACKWARD_ATTEMPT.format(**EMBED_BACKWARD_SLIP)),
                  ("09", FLASH_ATTEMPT.format(**FLASH_RIGHT) + FLASH_BACKWARD_ATTEMPT.format(**FLASH_BACKWARD_SLIP)),
                  ("08", ONLINE_STATS_ATTEMPT.format(**ONLINE_STATS_SLIP)),
                  ("18", HEAD_BACKWARD_ATTEMPT.format(**HEAD_BACKWARD_SLIP)),
                  ("13", FLOPS_ATTEMPT.format(**FLOPS_SLIP)), ("13", INTENSITY_ATTEMPT.format(**INTENSITY_SLIP)),
                  ("05", GLOBAL_ATTEMPT.format(**GLOBAL_SLIP)),
                  ("15", ENCODER_ATTEMPT.format(**ENCODER_SLIP)
                   + DECODER_ATTEMPT.format(causal="causal_mask(y.shape[1])", first="y + a")),
                  ("12", BERT_EMBED_ATTEMPT.format(**BERT_EMBED_SLIP)),
                  ("11", SAMPLE_ATTEMPT.format(**SAMPLE_SLIP)), ("07", QKV_ATTEMPT.format(**QKV_SLIP)),
                  ("11", SAMPLE_ATTEMPT.format(**{**SAMPLE_SLIP, "u": "None",
                                                  "pick": "np.apply_along_axis(lambda q: rng.choice(len(q), p=q), "
                                                          "-1, p)"})),
                  ("09", IO_ATTEMPT.format(**IO_SLIP)),
                  ("10", FFN_ATTEMPT.format(**FFN_SLIP) + RESIDUAL_ATTEMPT.format(**RESIDUAL_SLIP)),
                  ("02", LEARNED_ATTEMPT.format(**LEARNED_SLIP)),
                  ("06", DECODER_MASK_ATTEMPT.format(**DECODER_MASK_SLIP)),
                  ("19", ACCURACY_ATTEMPT.format(**ACCURACY_SLIP)), ("14", REPORT_ATTEMPT.format(**REPORT_SLIP)),
                  ("18", LINEAR_BACKWARD_ATTEMPT.format(**LINEAR_BACKWARD_SLIP)
                   + HEADS_BACKWARD_ATTEMPT.format(**HEADS_BACKWARD_SLIP) + DROPOUT_ATTEMPT.format(**DROPOUT_SLIP))]


def test_each_input_a_case_asks_to_refuse_is_refused_by_the_package():
    """A case with `refuses` compares no answer: the package's function must raise that exception on it (so the
    learner is asked for what the package does), with a message; and some lessons have such cases."""
    refusing = [(spec, case) for specs in LESSON_SPECS.values() for spec in specs for case in spec.cases()
                if case.refuses is not None]
    assert {spec.name for spec, _ in refusing} >= {"learned_positions", "paged_memory_report"}
    for spec, case in refusing:
        with pytest.raises(case.refuses, match=r"\w"):
            spec.call(spec.reference, case)
        assert case.refusal, f"{spec.name}: case {case.label!r} should say why its input is refused"


def test_an_input_to_refuse_that_is_answered_or_refused_otherwise_is_told_so(tmp_path):
    answered = result_of(check_file(write_workbook(tmp_path, "02", LEARNED_ATTEMPT.format(
        **{**LEARNED_SLIP, "check": "pass"})), "02"), "learned_positions")
    assert answered.failures[0].message == (
        "returned an array of shape (4, 6) where it must refuse the input: positions 12 … 17 of a 16-row table "
        "(NumPy's slice would quietly give fewer rows); raise ValueError with a message that names the bad value")
    other = result_of(check_file(write_workbook(tmp_path, "02", LEARNED_ATTEMPT.format(
        **{**LEARNED_SLIP, "check": "if offset + n > W_pos.shape[0]: raise IndexError('no row')"})), "02"),
        "learned_positions")
    assert other.failures[0].message.splitlines()[0] == "raised IndexError: no row"
    assert other.failures[0].message.splitlines()[-1] == (
        "where a ValueError should say it: positions 12 … 17 of a 16-row table (NumPy's slice would quietly give "
        "fewer rows)")
    assert other.cases == 7 and other.failed == 2


def test_a_refusal_left_to_numpy_or_naming_nothing_is_told(tmp_path):
    """split_heads on d = 10 and h = 4: NumPy's reshape error is a ValueError, but names neither; a message of the
    learner's own that names no number at fault is told too; one naming d passes."""
    def failure(check):
        return result_of(check_file(write_workbook(tmp_path, "04", f"""
            def split_heads(x, h):
                b, n, d = x.shape
                {check}
                return x.reshape(b, n, h, d // h).swapaxes(1, 2)
            """), "04"), "split_heads")
    numpy_own = failure("pass")
    assert numpy_own.failures[0].message.splitlines()[0] == (
        "raised ValueError: cannot reshape array of size 30 into shape (1,3,4,2)")
    assert numpy_own.failures[0].message.splitlines()[-1].startswith("the right exception, but NumPy's own")
    assert any("raise ValueError naming d and h" in h for h in numpy_own.hints)
    vague = failure("if d % h: raise ValueError('bad heads')")
    assert vague.failures[0].message.splitlines()[-1] == (
        "the right exception, but its message names none of the numbers at fault (10): say what is wrong in the "
        "caller's terms, d=10 features do not split into h=4 heads of the same size")
    assert failure("if d % h: raise ValueError(f'd={d} is not a multiple of h={h}')").status == "passed"


def test_an_embedding_by_a_one_hot_product_is_told_its_dtype(tmp_path):
    report = check_file(write_workbook(tmp_path, "01", """
        def embed(ids, W_E):
            return np.eye(W_E.shape[0])[ids] @ W_E
        """), "01")
    assert result_of(report, "embed").failures[0].message == (
        "the result has dtype float64, expected float32: the vectors keep W_E's dtype: W_E[ids] does, where a one-hot "
        "product or np.zeros(…) filled in a loop is float64 (its values are right)")


@pytest.mark.parametrize("lesson, source", RIGHT_ATTEMPTS, ids=[lesson for lesson, _ in RIGHT_ATTEMPTS])
def test_the_first_attempts_without_their_slip_pass(lesson, source, tmp_path):
    """The templates below are right with the slip taken out: each failure is the slip's, not the template's."""
    report = check_file(write_workbook(tmp_path, lesson, source), lesson)
    assert all(r.status == "passed" for r in report.results), format_report(report)


@pytest.mark.parametrize("lesson, name, source, hint", FIRST_ATTEMPTS,
                         ids=[f"{lesson}-{name}-{i}" for i, (lesson, name, _, _) in enumerate(FIRST_ATTEMPTS)])
def test_a_first_attempts_slip_is_caught_with_its_hint(lesson, name, source, hint, tmp_path):
    test_a_planted_mistake_is_caught_with_its_hint(lesson, name, source, hint, tmp_path)


# KVCache.update as the workbook's class holds it: `advance` there is the plain `self.length += t`
CACHE_CLASS = """
    class KVCache(KVCache):
        def advance(self, t):
            self.length += t

        def update(self, layer, k_new, v_new):
            end = self.length + k_new.shape[2]
            if end > self.n_max:
                raise ValueError(f"{end} positions do not fit a cache of n_max={self.n_max}")
    """
CACHE_CLASS_UNCHECKED = CACHE_CLASS[:CACHE_CLASS.index("            if end > self.n_max")]  # no overflow check
CACHE_RIGHT = """
            self.k[layer][:, :, self.length:end] = k_new
            self.v[layer][:, :, self.length:end] = v_new
            self.written[layer] = end
            return self.k[layer][:, :, :end], self.v[layer][:, :, :end]
    """
CACHE_MISTAKES = {
    "concatenate": """
            K = np.concatenate([self.k[layer][:, :, :self.length], k_new], axis=2)
            V = np.concatenate([self.v[layer][:, :, :self.length], v_new], axis=2)
            self.k[layer] = np.concatenate([K, self.k[layer][:, :, end:]], axis=2)
            self.v[layer] = np.concatenate([V, self.v[layer][:, :, end:]], axis=2)
            self.written[layer] = end
            return K, V
    """,
    "copies": """
            self.k[layer][:, :, self.length:end] = k_new
            self.v[layer][:, :, self.length:end] = v_new
            self.written[layer] = end
            return self.k[layer][:, :, :end].copy(), self.v[layer][:, :, :end].copy()
    """,
    "copies, written not set": """
            self.k[layer][:, :, self.length:end] = k_new
            self.v[layer][:, :, self.length:end] = v_new
            return self.k[layer][:, :, :end].copy(), self.v[layer][:, :, :end].copy()
    """,
    "written not set": """
            self.k[layer][:, :, self.length:end] = k_new
            self.v[layer][:, :, self.length:end] = v_new
            return self.k[layer][:, :, :end], self.v[layer][:, :, :end]
    """,
}
# 3 steps on 2 layers in each case: 6 updates, 12 arrays returned; the first prefill writes 3 positions
CACHE_EXPECTED = {
    "concatenate": ("updates that replaced self.k[layer] or self.v[layer] by a new array: expected 0, got 6",
                    ["np.concatenate builds a new array"]),
    "copies": ("K and V returned as copies, not views of the cache: expected 0, got 12",
               ["return views of the cache, self.k[layer][:, :, :length + t], not copies"]),
    "copies, written not set": ("self.written[0] after step 0: expected 3, got 0",
                                ["return views of the cache", "record self.written[layer] = length + t"]),
    "written not set": ("self.written[0] after step 0: expected 3, got 0", ["record self.written[layer] = length + t"]),
}


@pytest.mark.parametrize("lesson, name, source, hint", KNOWN_MISTAKES,
                         ids=[f"{lesson}-{name}-{i}" for i, (lesson, name, _, _) in enumerate(KNOWN_MISTAKES)])
def test_a_known_mistake_is_caught_with_its_hint(lesson, name, source, hint, tmp_path):
    test_a_planted_mistake_is_caught_with_its_hint(lesson, name, source, hint, tmp_path)


def cache_source(body: str) -> str:
    return textwrap.dedent(CACHE_CLASS) + textwrap.indent(textwrap.dedent(body), " " * 8)


@pytest.mark.parametrize("mistake", sorted(CACHE_MISTAKES))
def test_a_cache_that_is_not_written_in_place_fails_with_what_it_broke(mistake, tmp_path):
    report = check_file(write_workbook(tmp_path, "06", cache_source(CACHE_MISTAKES[mistake])), "06")
    result, text = result_of(report, "KVCache.update"), format_report(report)
    message, hints = CACHE_EXPECTED[mistake]
    assert result.status == "failed" and result.failed == 2 and result.cases == 3, text  # the overflow refused
    assert message in text, text
    for phrase in hints:
        assert any(phrase in h for h in result.hints), f"expected the hint '{phrase}':\n{text}"
    others = {"record self.written": "written" not in mistake, "np.concatenate": mistake != "concatenate"}
    for phrase, absent in others.items():
        assert not absent or not any(phrase in h for h in result.hints), text


def test_a_cache_written_in_place_passes(tmp_path):
    result = result_of(check_file(write_workbook(tmp_path, "06", cache_source(CACHE_RIGHT)), "06"), "KVCache.update")
    assert result.status == "passed", result.message


@pytest.mark.parametrize("lesson, source, name, words", [
    ("10", KNOWN_MISTAKES[5][2], "layer_norm", "first wrong entry at [b=0, n=0, d=0]"),
    ("10", KNOWN_MISTAKES[6][2], "swiglu_ffn", "should be (b, n, d) = (2, 3, 6), got (2, 3, 10)"),
    ("05", KNOWN_MISTAKES[-1][2], "padding_mask", "first wrong entry at [b=0, 0, 0, n=3]: expected False, got True"),
    ("11", KNOWN_MISTAKES[8][2], "filter_logits", "has dtype float64, expected float32"),
])
def test_the_entries_and_shapes_of_norms_swiglu_and_masks_are_named(lesson, source, name, words, tmp_path):
    result = result_of(check_file(write_workbook(tmp_path, lesson, source), lesson), name)
    assert words in result.message and "1=0" not in result.message, result.message


# --- mistakes a learner made that passed, or were told another mistake's hint ----------------------------------
SOFTMAX_SHIFTED = """
    def softmax(x, axis=-1, mask=None):
        if mask is not None:
            x = np.where(mask, x, -np.inf)
        xf = x.astype(np.float32) if x.dtype == np.float16 else x
        m = {shift}
        e = np.exp(xf - np.where(np.isfinite(m), m, 0))
        z = e.sum(axis=axis, keepdims=True)
        return (e / {z}).astype(x.dtype)
    """
SDPA_SCORES = """
    def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
        k, v = np.repeat(k, q.shape[1] // k.shape[1], 1), np.repeat(v, q.shape[1] // k.shape[1], 1)
        scale = 1 / math.sqrt({size}) if scale is None else scale
        s = {scores} * scale
        {masking}
        p = softmax(s)
        return (p @ v, p) if return_weights else p @ v
    """
SDPA_PLAIN = dict(size="q.shape[-1]", scores="q @ k.swapaxes(-1, -2)", masking="s = s if mask is None else "
                  "np.where(mask, s, -np.inf)")
FLASH_FULL = """
    from transformer import scaled_dot_product_attention
    def flash_attention(q, k, v, *, causal=False, block_q=None, block_k=None):
        n_q, n_k = q.shape[2], k.shape[2]
        i, j = np.arange(n_q)[:, None] + n_k - n_q, np.arange(n_k)[None, :]  # a row that sees no key gives zeros
        return scaled_dot_product_attention(q, k, v, j <= i if causal else None)
    """
AUDITED = [
    ("03", "softmax", SOFTMAX_SHIFTED.format(shift="xf.min(axis=axis, keepdims=True)", z="np.where(z == 0, 1, z)"),
     "not its min: e^(x − min) overflows"),
    ("03", "softmax", SOFTMAX_SHIFTED.format(shift="xf.mean(axis=axis, keepdims=True)", z="np.where(z == 0, 1, z)"),
     "not its mean: e^(x − mean) overflows"),
    ("03", "softmax", SOFTMAX_SHIFTED.format(shift="xf.max()", z="z"), "not the max of the whole array"),
    ("03", "softmax", SOFTMAX_SHIFTED.format(shift="xf.max()", z="np.where(z == 0, 1, z)"),
     "not the max of the whole array"),
    ("03", "softmax", SOFTMAX_SHIFTED.format(shift="xf.max(axis=axis, keepdims=True)", z="e.sum()"),
     "the sum runs over the whole array"),
    ("03", "scaled_dot_product_attention", SDPA_SCORES.format(**{**SDPA_PLAIN, "scores": "q @ k.T"}),
     "k.T reverses all four axes"),
    ("03", "scaled_dot_product_attention", SDPA_SCORES.format(**{**SDPA_PLAIN, "size": "k.shape[-2]"}),
     "divided by √n_k, the number of keys"),
    ("03", "scaled_dot_product_attention", SDPA_SCORES.format(**{**SDPA_PLAIN, "masking": "s = s if mask is None else "
                                                                 "np.where(mask, s, 0)"}),
     "masked scores set to 0 instead of −inf"),
    ("03", "scaled_dot_product_attention", SDPA_SCORES.format(**{**SDPA_PLAIN, "masking": "s = s if mask is None else "
                                                                 "s + mask"}),
     "the mask is boolean (True = may attend), not a bias to add"),
    ("05", "sliding_window_mask", """
        def sliding_window_mask(n_q, w, n_k=None, offset=None, *, causal=True, xp=None):
            n_k = n_q if n_k is None else n_k
            i = np.arange(n_q)[:, None] + (n_k - n_q if offset is None else offset)
            j = np.arange(n_k)[None, :]
            return ((j <= i) & (j > i - w)) if causal else (np.abs(i - j) <= w // 2)
        """, "not a window of w keys centred on it"),
    ("06", "KVCache.update", CACHE_CLASS_UNCHECKED + """
            self.k[layer][:, :, self.length:end] = k_new
            self.v[layer][:, :, self.length:end] = v_new
            self.written[layer] = end
            self.length = end
            return self.k[layer][:, :, :end], self.v[layer][:, :, :end]
    """, "update must not move self.length"),
    ("08", "online_attention_update", """
        def online_attention_update(m, l, O, S_j, V_j):
            m_new = np.maximum(m, S_j.max(-1, keepdims=True))
            P = np.exp(S_j - np.where(np.isneginf(m_new), 0, m_new))
            alpha = np.where(np.isneginf(m), 0, np.exp(m_new - np.where(np.isneginf(m), 0, m)))
            return m_new, alpha * l + P.sum(-1, keepdims=True), alpha * O + P @ V_j
        """, "α's exponent is the wrong way round"),
    ("09", "flash_attention", FLASH_ATTEMPT.format(**{**FLASH_RIGHT, "divide": "O / l"}),
     "O / l is 0 / 0 = NaN"),
    ("09", "flash_attention", FLASH_ATTEMPT.format(**{**FLASH_RIGHT, "le": "<"}), "not j <"),
    ("10", "rms_norm", """
        def rms_norm(x, gamma, eps=1e-6):
            return x / np.sqrt((x * x).mean(-1, keepdims=True)) * gamma
        """, "ε is left out: add the `eps` argument inside the root"),
    ("11", "filter_logits", FILTER_ATTEMPT.format(**{**FILTER_RIGHT, "before": "np.cumsum(sorted_p, -1)"}),
     "the cumulative sum counts the token's own mass"),
    ("18", "softmax_backward", """
        def softmax_backward(dP, P):
            return P * (1 - P) * dP
        """, "only the diagonal of the Jacobian is taken"),
    ("18", "scaled_dot_product_attention_backward", """
        def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale=None):
            b, h_kv, n_k, d_h = k.shape
            r = q.shape[1] // h_kv
            scale = 1 / math.sqrt(d_h) if scale is None else scale
            k, v = np.repeat(k, r, axis=1), np.repeat(v, r, axis=1)
            dV = P.swapaxes(-1, -2) @ dO
            dP = dO @ v.swapaxes(-1, -2)
            dS = P * (dP - (dP * P).sum(-1, keepdims=True))
            dQ = dS @ k * scale
            dK = dS.swapaxes(-1, -2) @ q * scale
            return dQ, dK.reshape(b, r, h_kv, n_k, d_h).sum(1), dV.reshape(b, r, h_kv, n_k, d_h).sum(1)
        """, "the groups are consecutive query heads"),
    ("18", "adamw_step", """
        def adamw_step(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
            state.t += 1
            for name, p in params.items():
                if p.ndim >= 2:
                    p = p - lr * weight_decay * p
                state.m[name] = betas[0] * state.m[name] + (1 - betas[0]) * grads[name]
                state.v[name] = betas[1] * state.v[name] + (1 - betas[1]) * grads[name] ** 2
                m_hat = state.m[name] / (1 - betas[0] ** state.t)
                v_hat = state.v[name] / (1 - betas[1] ** state.t)
                params[name] = p - lr * m_hat / (np.sqrt(v_hat) + eps)
        """, "a model holding the old one never sees it"),
]


AUDITED += [
    ("13", "kv_cache_bytes_per_token", """
        def kv_cache_bytes_per_token(config, dtype="float16"):
            return 2 * config.L * config.h_kv * config.d_h
        """, "that counts numbers, not bytes"),  # told "the cache holds K AND V", which it counts
    ("13", "kv_cache_bytes_per_token", """
        def kv_cache_bytes_per_token(config, dtype="float16"):
            return 2 * config.L * config.h_kv * config.d_h * 4
        """, "not always float32's 4"),  # told "K AND V" on one case and "h_kv heads" on another
    ("13", "count_parameters", """
        def count_parameters(c):
            d_h = c.d // c.h
            attention = c.d * c.h * d_h + 2 * c.d * c.h_kv * d_h + c.h * d_h * c.d
            return c.v * c.d + c.L * (attention + 3 * c.d * c.d_ff + 2 * c.d) + c.d + (0 if c.tied else c.v * c.d)
        """, "the head size is config.d_h, which need not be d / h"),  # told "SwiGLU has three matrices"
    ("14", "paged_attention", """
        from transformer.core.paged_kv import paged_attention as package_paged
        def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None):
            return package_paged(q, k_pool, v_pool, block_table, n_tokens, causal=causal)
        """, "use the `scale` argument"),  # passed: no case gave scale
    ("15", "seq2seq_decoder_layer", """
        from transformer import relu
        from transformer.models.encoder_decoder import seq2seq_decoder_layer as package_layer
        def seq2seq_decoder_layer(y, z, lw, h, *, causal=True, self_mask=None, cross_mask=None, activation=relu,
                                  eps=1e-5):
            return package_layer(y, z, lw, h, causal=causal, self_mask=self_mask, cross_mask=cross_mask)
        """, "pass `activation` on to the FFN and `eps` to each LayerNorm"),  # passed: no case gave them
    ("16", "key_tiles_read", """
        def key_tiles_read(n, block_q, block_k, *, causal, doc=None):
            rows = [None] if doc is None else list(np.asarray(doc))
            n_q_tiles, n_k_tiles = -(-n // block_q), -(-n // block_k)
            out = np.zeros((len(rows), n_q_tiles, n_k_tiles), bool)
            for r, d in enumerate(rows):
                for t in range(n_q_tiles):
                    q = np.arange(t * block_q, min(n, (t + 1) * block_q))
                    if d is None:
                        first, end = 0, n
                    else:
                        keys = np.flatnonzero(np.isin(d, d[q][d[q] >= 0]))
                        first, end = keys[0], keys[-1] + 1  # a block of padding only has no keys
                    if causal:
                        end = min(end, q[-1] + 1)
                    for j in range(n_k_tiles):
                        out[r, t, j] = j >= first // block_k and j * block_k < end
            return out
        """, "a block of padding only"),  # passed: no case had such a block
    ("19", "induction_head_scores", """
        def induction_head_scores(maps, n_half):
            m = n_half
            i, j = np.arange(1, 2 * m), np.arange(m, 2 * m - 1)
            return {"previous token": maps[:, :, i, i - 1].mean(2), "induction": maps[:, :, j, j - m + 1].mean(2)}
        """, "maps may hold more axes in front of L and h"),  # passed: every case was 4-D
    ("04", "multi_head_attention", MHA_ATTEMPT.format(**MHA_RIGHT).replace(
        "o, p = scaled_dot_product_attention(q, k, v,",
        "k, v = np.tile(k, (1, h // h_kv, 1, 1)), np.tile(v, (1, h // h_kv, 1, 1))\n"
        "        o, p = scaled_dot_product_attention(q, k, v,"), "not np.tile"),  # told "split k and v into h_kv"
    ("16", "document_mask", """
        def document_mask(doc, *, causal=True):
            doc = np.asarray(doc)
            n = doc.shape[1]
            keep = (doc[:, None, :] <= doc[:, :, None]) & (doc[:, None, :] >= 0) & (doc[:, :, None] >= 0)
            return (keep & np.tri(n, dtype=bool) if causal else keep)[:, None]
        """, "with ≤ it also reads every document packed before its own"),  # no hint
    ("12", "l2_normalize", """
        def l2_normalize(x, eps=1e-12):
            return x / max(np.linalg.norm(x), eps)
        """, "not one norm of the whole array"),  # no hint
]


def test_an_embedding_scaled_by_sqrt_d_is_told_sqrt_d_in_every_case(tmp_path):
    """The float32 case had n = d = 4, and its factor 2 read "√4 = √n?"."""
    report = check_file(write_workbook(tmp_path, "01", """
        def embed(ids, W_E):
            return W_E[ids] * np.sqrt(W_E.shape[1]).astype(W_E.dtype)
        """), "01")
    messages = [f.message for f in result_of(report, "embed").failures if f.case.refuses is None]  # ids unchecked too
    assert len(messages) == 3 and all("= √d?)" in m for m in messages), messages


@pytest.mark.parametrize("lesson, name, source, hint", AUDITED,
                         ids=[f"{lesson}-{name}-{i}" for i, (lesson, name, _, _) in enumerate(AUDITED)])
def test_a_mistake_that_passed_or_was_misnamed_is_caught_with_its_own_hint(lesson, name, source, hint, tmp_path):
    """Each of these passed the checker, or was told another mistake's hint: a softmax shifted by the row's
    min or mean or by the array's max (no row spread wide enough), attention masked with 0 or by adding the mask
    (told "add the mask before the softmax"), k.T on 4 axes, the scale √n_k, a band centred on the query, an
    update that moves length, α = e^(m_new − m), a flash loop dividing 0 by 0, a top-p cumulative sum that counts
    the token itself (told "−inf, not 0"), the diagonal of softmax's Jacobian, GQA gradients summed in np.tile's
    order (told "sum the gradients of each group", which it did), AdamW putting new arrays in params."""
    test_a_planted_mistake_is_caught_with_its_hint(lesson, name, source, hint, tmp_path)


def test_flash_attention_that_holds_the_whole_score_matrix_fails_on_memory(tmp_path):
    """Its values are right in every case: the tiles are what the lesson teaches, and only the memory tells."""
    report = check_file(write_workbook(tmp_path, "09", FLASH_FULL), "09")
    result = result_of(report, "flash_attention")
    assert result.status == "failed" and result.failed == 2, format_report(report)  # the two memory cases
    message = result.failures[0].message
    assert message.startswith("right values, but the call held") and "the n_q × n_k scores alone are 8.4 MB" in message
    held = float(message.split("held ")[1].split(" MB")[0])
    assert held > 8.4  # tracemalloc saw the scores, and more


def test_online_stats_summed_in_float16_are_told_the_float32_rule(tmp_path):
    source = ONLINE_STATS_ATTEMPT.format(**{**ONLINE_STATS_SLIP, "x": "x"})
    result = result_of(check_file(write_workbook(tmp_path, "08", source), "08"), "online_softmax_stats")
    assert result.status == "failed" and result.failed == 1, result.message  # the float16 case only
    assert "m has dtype float16, expected float32: m and l keep x's dtype, but a float16 row's are float32" in (
        result.failures[0].message)


def test_a_flash_backward_that_holds_the_whole_p_fails_on_memory(tmp_path):
    """One tile of n_q × n_k (the tile sizes ignored): right values in every case, and only the memory tells."""
    source = FLASH_BACKWARD_ATTEMPT.format(**{**FLASH_BACKWARD_SLIP, "tiles": "n_q, n_k"})
    report = check_file(write_workbook(tmp_path, "09", source), "09")
    result = result_of(report, "flash_attention_backward")
    assert result.status == "failed" and result.failed == 1, format_report(report)  # the memory case
    message = result.failures[0].message
    assert message.startswith("right values, but the call held") and "never holds one" in message, message


FLASH_LOOP = """
    def flash_attention(q, k, v, *, causal=False, block_q=None, block_k=None):
        n_rep = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)
        n_q, n_k, d_h = q.shape[2], k.shape[2], q.shape[3]
        Br = block_q or 128
        Bc = {Bc}
        out = np.zeros(q.shape)
        for r0 in range(0, n_q, Br):
            Qi = q[:, :, r0:r0 + Br]
            m = np.full((*Qi.shape[:3], 1), -np.inf)
            l, O = np.zeros(m.shape), np.zeros(Qi.shape)
            for c0 in range(0, n_k, Bc):
                S = Qi @ k[:, :, c0:c0 + Bc].swapaxes(-1, -2) / math.sqrt(d_h)
                if causal:
                    i = np.arange(r0, r0 + Qi.shape[2])[:, None] + n_k - n_q
                    j = np.arange(c0, c0 + S.shape[-1])[None, :]
                    S = np.where(j <= i, S, -np.inf)
                m_new = np.maximum(m, S.max(-1, keepdims=True))
                shift = np.where(np.isinf(m_new), 0, m_new)
                P, alpha = np.exp(S - shift), np.exp(m - shift)
                l = alpha * l + P.sum(-1, keepdims=True)
                O = alpha * O + P @ v[:, :, c0:c0 + Bc]
                m = m_new
            out[:, :, r0:r0 + Br] = O / np.where(l == 0, 1, l)
        return out.astype(q.dtype)
    """


def test_a_flash_loop_written_plainly_passes_every_case(tmp_path):
    """The memory cases leave room for a loop with the temporaries a learner writes (S, P, α, the shift)."""
    report = check_file(write_workbook(tmp_path, "09", FLASH_LOOP.format(Bc="block_k or 128")), "09")
    result = result_of(report, "flash_attention")
    assert result.status == "passed", format_report(report)


def test_a_flash_loop_whose_key_tiles_are_block_q_wide_fails_on_memory(tmp_path):
    """Bc = Br gives the right values everywhere; only the case of one query tile over narrow key tiles tells."""
    report = check_file(write_workbook(tmp_path, "09", FLASH_LOOP.format(Bc="block_q or 128")), "09")
    result = result_of(report, "flash_attention")
    assert result.status == "failed" and result.failed == 1, format_report(report)
    failure = result.failures[0]
    assert "in one query tile" in failure.label and "take Bc from block_k" in failure.message, format_report(report)
    assert float(failure.message.split("held ")[1].split(" MB")[0]) > 8.4


# the plain loop above, paying while tracemalloc runs what counting every allocation costs a loop of plain-Python steps
# (5 to 25 times its time: a loop over the rows of each tile took 1 s, and 10 s traced, on the case of one query tile)
FLASH_SLOWED_BY_TRACING = FLASH_LOOP.format(Bc="block_k or 128").replace("def flash_attention(", "def plain_flash(") + """
    import time, tracemalloc

    def flash_attention(q, k, v, **tiles):
        if tracemalloc.is_tracing():
            time.sleep({pause})
        return plain_flash(q, k, v, **tiles)
    """


def test_a_flash_loop_is_timed_without_the_memory_count_that_slows_it(tmp_path):
    """The time limit is the learner's code's: the bytes of the memory cases are counted in a second call, once the
    first, untraced, gave the right values in time (it failed 'took longer than 5 s … a loop that never ends?')."""
    report = check_file(write_workbook(tmp_path, "09", FLASH_SLOWED_BY_TRACING.format(pause=0.6)), "09", seconds=0.5)
    assert result_of(report, "flash_attention").status == "passed", format_report(report)


def test_a_memory_case_whose_counted_call_runs_too_long_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr("transformer.tutor.run.TRACED_SLOWDOWN", 1)  # the second call gets the limit, 0.5 s
    report = check_file(write_workbook(tmp_path, "09", FLASH_SLOWED_BY_TRACING.format(pause=2)), "09", seconds=0.5)
    result = result_of(report, "flash_attention")
    assert result.status == "failed" and result.failed == 2, format_report(report)  # the two memory cases
    assert result.failures[0].message.startswith("right values, but its memory could not be counted"), result.message


def test_a_fragment_layout_in_unsigned_integers_passes(tmp_path):
    """The docstring asks for integer arrays: lanes 0 … 31 in uint8 are (they failed 'dtype uint8, expected int64')."""
    report = check_file(write_workbook(tmp_path, "17", """
        def mma_fragment_layout(operand, shape="m16n8k16"):
            byte = lambda *arrays: tuple(a.astype(np.uint8) for a in arrays)  # a lane number fits in a byte
            if operand == "C":
                r, c = np.indices((16, 8))
                return byte(4 * (r % 8) + c // 2, 2 * (r // 8) + c % 2, 0 * r)
            if shape == "m16n8k16" and operand == "A":
                r, c = np.indices((16, 16))
                return byte(4 * (r % 8) + (c % 8) // 2, r // 8 + 2 * (c // 8), c % 2)
            if shape == "m16n8k16":
                k, col = np.indices((16, 8))
                return byte(4 * col + (k % 8) // 2, k // 8, k % 2)
            if operand == "A":
                r, c = np.indices((16, 8))
                return byte(4 * (r % 8) + c % 4, r // 8 + 2 * (c // 4), 0 * r)
            k, col = np.indices((8, 8))
            return byte(4 * col + k % 4, k // 4, 0 * k)
        """), "17")
    assert result_of(report, "mma_fragment_layout").status == "passed", format_report(report)


def test_an_eps_slip_in_float64_is_not_told_to_compute_in_float64(tmp_path):
    report = check_file(write_workbook(tmp_path, "10", """
        def rms_norm(x, gamma, eps=1e-6):
            return x / (np.sqrt((x * x).mean(-1, keepdims=True)) + eps) * gamma
        """), "10")
    hints = result_of(report, "rms_norm").hints
    assert hints[0].startswith("ε goes inside the square root") and not any("7 digits" in h for h in hints), hints


def test_a_softmax_that_returns_a_torch_tensor_is_told_to_return_a_numpy_array(tmp_path):
    pytest.importorskip("torch")
    report = check_file(write_workbook(tmp_path, "03", """
        import torch
        def softmax(x, axis=-1, mask=None):
            t = torch.from_numpy(np.asarray(x))
            if mask is not None:
                t = t.masked_fill(~torch.from_numpy(np.asarray(mask)), -math.inf)
            return torch.softmax(t, dim=axis)
        """), "03")
    assert "should be a NumPy array, got a torch.Tensor" in result_of(report, "softmax").failures[0].message


def test_a_sinusoidal_table_made_in_float32_fails_the_float64_case(tmp_path):
    report = check_file(write_workbook(tmp_path, "02", """
        def sinusoidal_positions(n, d, *, base=10000.0, xp=None, dtype=None):
            pos = np.arange(n, dtype=np.float32)[:, None]
            angle = pos / np.float32(base) ** (np.arange(0, d, 2, dtype=np.float32) / d)
            return np.stack([np.sin(angle), np.cos(angle)], -1).reshape(n, d).astype(dtype or np.float32)
        """), "02")
    result = result_of(report, "sinusoidal_positions")
    assert [f.label for f in result.failures if "dtype=float64" in f.label], format_report(report)
    assert any("as float32 arithmetic does" in h for h in result.hints), result.hints


def test_the_check_example_in_docs_cli_is_what_the_checker_prints(tmp_path):
    """docs/cli.md shows `check 03` on a workbook without GQA's repeat and with one return value; its GQA hint
    was missing, as the return_weights case (a wrong kind of answer) made "only the GQA cases fail" look false."""
    (tmp_path / "03_attention.py").write_text(textwrap.dedent("""
        import math
        import numpy as np
        from transformer import softmax

        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
            return softmax(scores, mask=mask) @ v

        def additive_scores(q, k, W_q, W_k, w):
            raise NotImplementedError("additive_scores: start with …")
        """), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "03", "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    example = doc.split("$ python -m transformer check 03\n", 1)[1].split("```", 1)[0].splitlines()
    printed = [line.strip() for line in proc.stdout.splitlines()]
    for line in example[1:]:  # the first names the workbook's folder and torch
        shown = line.strip()
        if shown.startswith("at 03_attention.py"):  # the line number is the example file's own
            assert any(p.startswith("at 03_attention.py, line ") and p.endswith(shown.split(": ", 1)[1])
                       for p in printed), (shown, proc.stdout)
        else:
            assert any(p == shown or (shown.endswith(" …") and p.startswith(shown[:-2])) for p in printed), (
                shown, proc.stdout)


def test_each_case_is_reported_as_it_starts_and_the_memory_count_apart(tmp_path):
    """progress gets case i of n before it runs, and once more, counting, before the memory of each case that limits
    it: the cases of the spec with max_bytes, the two n = 1,024 flash cases and the backward's one."""
    calls = []
    report = check_file(write_workbook(tmp_path, "09"), "09", progress=lambda *call: calls.append(call))
    assert report.ok
    expected = []
    for spec in LESSON_SPECS["09"]:
        cases = spec.cases()
        for i, case in enumerate(cases, 1):
            expected.append((spec.name, i, len(cases), False))
            if case.max_bytes is not None:
                expected.append((spec.name, i, len(cases), True))
    assert calls == expected and sum(c[3] for c in calls) == 3


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX's")
def test_on_a_terminal_a_bar_shows_the_case_and_is_wiped_before_the_report(tmp_path):
    """On a terminal, a bar names the function and its case while the cases run (a slow loop's memory count took a
    minute with nothing shown); the report's lines come out whole after it. Piped, nothing is added (the other
    tests read stderr == "")."""
    import fcntl
    import pty
    import struct
    import termios

    write_workbook(tmp_path, "09")
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # rows, columns: a bar needs both
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "check", "09", "--workbook", str(tmp_path),
                             "--no-torch"], stdin=subprocess.DEVNULL, stdout=child, stderr=child, cwd=ROOT, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 0
    os.close(main)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert "  flash_attention:" in out and "/10 [" in out and "counting its memory" in out, out
    lines = [line.rsplit("\r", 1)[-1] for line in out.split("\r\n")]  # what stays on screen: after the last \r
    assert "  flash_attention           passed (10 cases)" in lines, lines
    assert "  flash_attention_backward  passed (8 cases)" in lines, lines
    assert lines[-2] == f"every function written so far passes ({len(LESSON_SPECS['09'])} passed, 0 not written)", lines


def test_a_merge_loop_that_glues_the_callers_list_is_told_to_copy_it(tmp_path):
    """A list changed in place (s[i:i + 2] = …) is told to work on a copy of it, not the array advice (x -= m)."""
    source = MERGE_ATTEMPT.format(**{**MERGE_SLIP, "copy": "symbols"})
    result = result_of(check_file(write_workbook(tmp_path, "01", source), "01"), "merge_symbols")
    assert result.status == "failed" and "so work on a copy, s = list(symbols)" in result.message, result.message
    assert "x -= m" not in result.message


def test_a_stub_the_copy_lacks_is_not_written_and_a_renamed_one_fails(tmp_path):
    """A copy of the workbook made before a function was added lacks its stub: not a failure of the learner's, but
    where to copy it from; a function of a close name is a renamed stub, told by name."""
    from transformer.tutor.report import format_summary

    path = write_workbook(tmp_path, "03")
    source = path.read_text(encoding="utf-8")
    path.write_text(source.replace("from transformer import additive_scores", ""), encoding="utf-8")
    report = check_file(path, "03")
    absent = result_of(report, "additive_scores")
    assert (absent.status, absent.message) == ("not written", "not in 03_planted.py: the workbook gained it after "
                                               "this copy was made; copy its stub from workbook/03_attention.py")
    assert report.ok and format_summary([report]) == "every function written so far passes (2 passed, 1 not written)"
    path.write_text(source.replace("from transformer import additive_scores", "from transformer import additive_scores "
                                   "as package\ndef additive_score(q, k, W_q, W_k, w):\n    return package(q, k, W_q, "
                                   "W_k, w)\n"), encoding="utf-8")
    renamed = result_of(check_file(path, "03"), "additive_scores")
    assert (renamed.status, renamed.message) == ("missing", "no `additive_scores` in 03_planted.py, but a "
                                                 "`additive_score`: keep the stub's name")
