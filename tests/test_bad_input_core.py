"""Bad input to the attention core gets a clear error naming the bad argument or value, never a
wrong result or a bare traceback from inside NumPy. Where the fix changes a result (softmax of a
row holding NaN), the result is compared with PyTorch."""
import math
import re

import numpy as np
import pytest
import torch

import transformer as T
from transformer.flash import cuda_kernels as CK
from transformer.require import require_int, require_real
from transformer.core.paged_kv import PagedKVCache, paged_attention

from conftest import asarray


# --- A. results that were silently wrong -----------------------------------------------------------

@pytest.mark.parametrize("norm", [T.layer_norm, T.rms_norm])
def test_norms_refuse_integer_input_instead_of_rounding_the_result(norm):
    # before: the normalised values were cast back to int64, i.e. rounded to -1, 0, 1
    with pytest.raises(TypeError, match=r"x must be a floating-point array, got dtype int64"):
        norm(np.arange(8).reshape(2, 4), np.ones(4))


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf - inf, as intended: NaN
@pytest.mark.parametrize("row", [[math.nan, 1.0, 2.0], [math.inf, 1.0, 2.0], [math.nan, -math.inf, 1.0],
                                 [-math.inf, 1.0, 2.0], [1000.0, 1000.0, -5.0]])
def test_softmax_of_a_row_with_nan_or_inf_equals_torch(xp, row):
    ours = T.to_numpy(T.softmax(asarray(xp, [row, [0.5, 1.0, 1.5]])))
    ref = torch.softmax(torch.tensor([row, [0.5, 1.0, 1.5]], dtype=torch.float64), dim=-1).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=0, equal_nan=True)


def test_softmax_all_masked_row_still_gives_zeros_but_nan_row_gives_nan(xp):
    x = asarray(xp, [[1.0, 2.0], [math.nan, 1.0]])
    mask = asarray(xp, [[False, False], [True, True]])
    np.testing.assert_array_equal(T.to_numpy(T.softmax(x, mask=mask)), [[0.0, 0.0], [math.nan, math.nan]])


def _pool(n_blocks=4, h_kv=1, bs=2, d_h=4):
    return np.random.default_rng(0).standard_normal((n_blocks, h_kv, bs, d_h))


@pytest.mark.parametrize("table,match", [
    ([0, -1], r"block_table must hold integer block ids in \[0, 4\), got \[-1\]"),  # was: read the last block
    ([0, 1.9], r"block_table must hold integer block ids in \[0, 4\), got \[1.9\]"),  # was: truncated to 1
    ([0, 7], r"block_table must hold integer block ids in \[0, 4\), got \[7\]"),  # was: a bare IndexError
    (np.array([0.0, 1.0]), r"block_table must hold integer block ids.*\[0.0, 1.0\]"),
    ([0], r"n_tokens must lie in .* = \[1, 1 · 2\], got n_tokens=3"),  # 3 tokens need 2 blocks of 2
    ("01", r"block_table must be a list of block ids, got str"),
])
def test_paged_attention_checks_the_block_table(table, match):
    pool, q = _pool(), np.ones((2, 1, 4))
    with pytest.raises((ValueError, TypeError), match=match):
        paged_attention(q, pool, pool, table, 3)


def test_paged_attention_with_a_good_table_equals_sdpa(xp):
    pool = _pool()
    q = np.random.default_rng(1).standard_normal((2, 1, 4))
    table = asarray(xp, np.array([2, 0]))  # a device array of ids is read once on the host
    out = paged_attention(asarray(xp, q), asarray(xp, pool), asarray(xp, pool), table, 3)
    k = np.concatenate([pool[2], pool[0]], axis=1)[None, :, :3, :]  # [1, h_kv, 3, d_h]
    ref = T.scaled_dot_product_attention(q[None], k, k)[0]
    np.testing.assert_allclose(T.to_numpy(out), ref, rtol=1e-12)


def test_paged_attention_refuses_integer_queries_like_sdpa():
    pool, q = _pool(), np.ones((2, 1, 4), dtype=np.int64)
    msg = r"q must be a floating-point array, got dtype int64"
    with pytest.raises(TypeError, match=msg):  # was: int zeros
        paged_attention(q, pool, pool, [0, 1], 3)
    with pytest.raises(TypeError, match=msg):
        T.scaled_dot_product_attention(q[None], pool[None, 0], pool[None, 0])


@pytest.mark.parametrize("n,offset,err,match", [
    (-1, 0, ValueError, r"n must be an integer ≥ 0, got n=-1"),  # was: 4 rows
    (2, -2, ValueError, r"offset must be an integer ≥ 0, got offset=-2"),  # was: 0 rows
    (4, 2, ValueError, r"positions 2…5 exceed the table's 5 rows"),
    (2.5, 0, ValueError, r"n must be an integer ≥ 0, got n=2.5"),
])
def test_learned_positions_refuse_rows_outside_the_table(n, offset, err, match):
    with pytest.raises(err, match=match):
        T.learned_positions(n, np.zeros((5, 3)), offset)


@pytest.mark.parametrize("call, err, match", [
    (lambda: T.rope_cos_sin(np.arange(3), 4, dtype=np.int64), TypeError, r"holds fractions, got dtype='int64'"),
    (lambda: T.sinusoidal_positions(3, 4, dtype=bool), TypeError, r"holds fractions, got dtype='bool'"),
    (lambda: T.sinusoidal_positions(3, 4, dtype="foo"), TypeError, r"floating-point type .*got dtype='foo'"),
    (lambda: T.rope_angles(np.array([1, None], dtype=object), 4), TypeError, r"positions must be integers .*object"),
    (lambda: T.interleaved_to_half_permutation(7), ValueError, r"d_h must be even and ≥ 2 .*got d_h=7"),
])
def test_position_tables_refuse_a_dtype_or_positions_that_are_not_numbers(call, err, match):
    # an integer dtype rounded every sine and cosine to 0 or 1; an object array gave NaN angles
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("call, err, match", [
    (lambda q, k: T.attention_scores(q, k[:1]), ValueError, r"q and k must agree in their leading axes \(b, h\)"),
    (lambda q, k: T.attention_scores(q[:1], k), ValueError, r"q and k must agree"),  # broadcast in silence before
    (lambda q, k: T.repeat_kv(k[0], 2), ValueError, r"x must be \(b, h_kv, n, d_h\).*got shape \(2, 5, 4\)"),
    (lambda q, k: T.ffn(q[0, 0], np.float64(1), np.ones((4, 4))), ValueError, r"W1 must be a \(d, d_ff\) matrix"),
    (lambda q, k: T.ffn(q[0, 0], np.ones((4, 8)), np.ones((8, 4)), activation="tanh"), ValueError,
     r"activation must be 'relu', 'gelu', 'gelu_tanh' or 'silu', got 'tanh'"),
    (lambda q, k: T.ffn(q[0, 0], np.ones((4, 8)), np.ones((8, 4)), activation=3), TypeError,
     r"activation must be a function"),
])
def test_attention_and_ffn_refuse_shapes_they_would_misread(call, err, match):
    q = k = np.random.default_rng(0).standard_normal((3, 2, 5, 4))  # (b, h, n, d_h)
    with pytest.raises(err, match=match):
        call(q, k)


@pytest.mark.parametrize("call", [lambda x: T.sample_next(x, 1.0, rng="abc"), lambda x: T.sample_next(x, 1.0, rng=-1),
                                  lambda x: T.sample_next(x, 1.0, rng=1.5), lambda x: T.random_mask(4, 2, seed="a"),
                                  lambda x: T.dropout(x, 0.5, rng=-3, training=True),
                                  lambda x: T.random_llama(T.LlamaConfig(L=1, d=8, h=2, h_kv=1, d_h=4, d_ff=8, v=8,
                                                                         n_ctx=8), seed=2.5)])
def test_a_seed_that_is_no_seed_is_refused_by_name(call):
    # NumPy's SeedSequence refused these from deep inside
    with pytest.raises(TypeError, match=r"(rng|seed) must be a np.random.Generator or an integer seed ≥ 0, got"):
        call(np.zeros(5))


@pytest.mark.parametrize("call, what", [
    (lambda: T.causal_mask(10**6), r"an \(n_q, n_k\) = \(1000000, 1000000\) mask would take 1,000.0 GB"),
    (lambda: T.sliding_window_mask(10**6, 3), r"mask would take 1,000.0 GB"),
    (lambda: T.global_mask(10**6, [1]), r"mask would take 1,000.0 GB"),
    (lambda: T.random_mask(10**6, 2), r"mask would take 1,000.0 GB"),
    (lambda: T.sinusoidal_positions(10**12, 8), r"an \(n, d\) = \(1000000000000, 8\) table of positions"),
    (lambda: T.KVCache(2, 1, 2, 10**12, 4), r"a KV cache of 2 layers .* would take 128,000.0 GB"),
    (lambda: T.PagedKVCache(2, 1, 2, 64, 4, n_blocks=10**12), r"a paged KV cache of 2 layers × 1000000000000 blocks"),
    # found by fuzzing sizes of 2**40: each was a MemoryError from inside NumPy, or a loop that ran for ever
    (lambda: T.repeat_kv(np.ones((1, 2, 3, 4)), 2**40), r"x repeated n_rep=1099511627776 times"),
    (lambda: T.embed_backward(np.ones((1, 2, 4)), np.zeros((1, 2), int), 2**40),
     r"the \(v, d\) = \(1099511627776, 4\) gradient of W_E"),
    (lambda: T.learned_positions_backward(np.ones((3, 4)), 2**40), r"the \(n_pos, d\) = .* gradient of W_pos"),
    (lambda: T.rope_cos_sin(np.arange(5), 2**40), r"an \(n, d_h/2\) = \(5, 549755813888\) table of angles"),
    (lambda: T.interleaved_to_half_permutation(2**40), r"a list of d_h=1099511627776 feature indices"),
    (lambda: T.padding_mask(np.array([2, 3]), 2**40), r"a \(b, n\) = \(2, 1099511627776\) padding mask"),
    (lambda: T.encoder_mask(np.array([2, 3]), 2**40), r"a \(b, n\) = \(2, 1099511627776\) padding mask"),
    (lambda: T.pack_documents([[1, 2]], 2**40), r"packed rows of 1 × n_ctx=1099511627776 tokens"),
    (lambda: T.packed_rows([[1, 2]], 2**40), r"training rows of 1 × n_ctx=1099511627776 tokens"),
    (lambda: T.padded_rows([[1, 2], [3]], 2**40), r"training rows of 2 × n_ctx=1099511627776 tokens"),
    (lambda: T.flash2_io(2**40, 8, 4, 2, 2), r"a list of Tr = 549,755,813,888 query blocks' counts"),
    (lambda: T.random_llama(T.LlamaConfig(L=1, d=16, h=4, h_kv=2, d_h=4, d_ff=32, v=2**40, n_ctx=16)),
     r"a Llama of 17,592,186,046,768 random float32 weights"),
    (lambda: T.init_seq2seq(T.Seq2SeqConfig(v=2**40, d=8, h=2, d_ff=16, L_enc=1, L_dec=1, n_max=8)),
     r"an encoder–decoder of 8,796,093,023,616 weights"),
    (lambda: T.induction_batch(np.random.default_rng(0), 2**40, 4, 16), r"an induction batch of b=1099511627776 rows"),
    (lambda: T.induction_documents(np.random.default_rng(0), 3, 2**40),
     r"an induction batch of b=1 rows \(n_half=16, v=1099511627776\)"),
    (lambda: T.induction_split(0, 2**40, 1, 2, 4, 16), r"1,099,511,627,777 induction batches of b=2 rows"),
    (lambda: T.translation_batch(np.random.default_rng(0), 2**40), r"a translation batch of b=1099511627776 sentences"),
    (lambda: T.translation_split(0, 2**40, 1, 2), r"1,099,511,627,777 translation batches of b=2 sentences"),
])
def test_an_array_larger_than_the_memory_is_refused_before_numpy_tries(call, what, monkeypatch):
    # NumPy's "Unable to allocate 931. GiB" came from inside it, as a traceback
    from transformer.core import shared_checks
    monkeypatch.setattr(shared_checks, "available_bytes", lambda: 16 * 10**9)  # as a 16 GB machine
    with pytest.raises(ValueError, match=what + r".*, more than the 16.0 GB of memory available"):
        call()


def test_the_memory_check_reads_each_kind_of_dtype():
    import array_api_strict as xps
    import ml_dtypes
    from transformer.core.shared_checks import itemsize
    assert [itemsize(None), itemsize(np.float16), itemsize(ml_dtypes.bfloat16), itemsize(xps.float64, xps)] == [
        4, 2, ml_dtypes.finfo(ml_dtypes.bfloat16).bits // 8, 8]
    assert T.KVCache(2, 1, 2, 8, 4, dtype=ml_dtypes.bfloat16).k[0].dtype == ml_dtypes.bfloat16  # finfo refused it


@pytest.mark.parametrize("call, err, match", [
    (lambda: T.multi_head_attention(np.zeros((1, 2, 4)), None, 2), TypeError,
     r"w must hold the projections W_q, W_k, W_v and W_o \(T.AttentionWeights\), got NoneType"),
    (lambda: T.unpack(np.zeros((1, 2)), None), TypeError, r"packed must be what pack_documents returns"),
    (lambda: T.continued_positions(None), TypeError, r"packed must be what pack_documents returns"),
    (lambda: T.attended_pairs(np.full((3, 3), 0.5)), TypeError, r"mask must be boolean .*got dtype float64"),
    (lambda: T.same_document(np.zeros((1, 3)), np.zeros((1, 3), int)), TypeError,
     r"doc_q must hold integer document indices, got dtype float64"),
    (lambda: T.WordPieceTokenizer(["[UNK]", "[CLS]"]), TypeError, r"vocab must be a dict of token -> id"),
    (lambda: T.WordPieceTokenizer({"[UNK]": "0"}), ValueError, r"vocab must map str tokens to ids ≥ 0, got '\[UNK\]'"),
    (lambda: T.WordPieceTokenizer({"[UNK]": 0, "[CLS]": 0}), ValueError, r"two tokens the same id"),
    (lambda: T.WordPieceTokenizer({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3}, lower="no"), TypeError,
     r"lower must be True or False"),
])
def test_objects_of_the_wrong_kind_are_named_at_the_door(call, err, match):
    # each failed inside the package with an AttributeError, or counted 0.5 as 0 in silence
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("fn, flag", [(T.scaled_dot_product_attention, "return_weights"), (T.flash_attention, "return_lse"),
                                      (T.flash_attention_fast, "return_lse"), (T.standard_attention, "return_lse")])
def test_a_return_flag_must_be_a_bool(fn, flag):
    q = np.zeros((1, 1, 2, 4))
    with pytest.raises(TypeError, match=f"{flag} must be True or False, got {flag}='no'"):  # "no" was truthy
        fn(q, q, q, **{flag: "no"})


def test_ffn_takes_its_activation_by_name_as_its_backward_does():
    r = np.random.default_rng(1)
    x, W1, W2 = r.standard_normal((2, 3, 4)), r.standard_normal((4, 8)), r.standard_normal((8, 4))
    for name, g in (("relu", T.relu), ("gelu", T.gelu), ("silu", T.silu)):
        np.testing.assert_array_equal(T.ffn(x, W1, W2, activation=name), T.ffn(x, W1, W2, activation=g))


def test_kv_cache_advance_refuses_negative_steps_and_unwritten_positions():
    cache = T.KVCache(2, 1, 1, 4, 2)
    with pytest.raises(ValueError, match=r"t must be an integer ≥ 0, got t=-3"):
        cache.advance(-3)
    kv = np.ones((1, 1, 3, 2))
    cache.update(0, kv, kv)  # layer 1 not yet written
    with pytest.raises(ValueError, match=r"advance\(t=3\) past what was written.*layer 1 has only 0"):
        cache.advance(3)
    cache.update(1, kv, kv)
    with pytest.raises(ValueError, match=r"advance\(t=4\).*layer 0 has only 3"):  # beyond what was written
        cache.advance(4)
    cache.advance(3)
    assert cache.length == 3


def test_paged_extend_refuses_negative_and_unwritten_and_waste_stays_non_negative():
    cache = PagedKVCache(1, 0, 1, 8, 2, block_size=4, n_blocks=2)
    seq = cache.add_sequence()
    cache.write(seq, 0, np.ones((1, 3, 2)), np.ones((1, 3, 2)))
    with pytest.raises(ValueError, match=r"t must be an integer ≥ 0, got t=-10"):
        cache.extend(seq, -10)
    with pytest.raises(ValueError, match=r"extend\(seq=0, t=5\) past what was written.*layer 0 has only 3"):
        cache.extend(seq, 5)  # was: length 5 in one block of 4, paged_waste < 0
    cache.extend(seq, 3)
    report = cache.memory_report()
    assert (report["tokens"], report["paged_waste"]) == (3, 1 * cache.bytes_per_token)  # one empty slot


# --- D. errors that came from deep inside NumPy ------------------------------------------------

def _empty_keys(xp):
    q = asarray(xp, np.ones((1, 2, 3, 4)))
    return q, asarray(xp, np.ones((1, 2, 0, 4)))


@pytest.mark.parametrize("fn", [T.scaled_dot_product_attention, T.standard_attention, T.flash_attention])
def test_no_keys_is_one_clear_error_everywhere(xp, fn):
    q, k = _empty_keys(xp)
    with pytest.raises(ValueError, match=r"n_k must be ≥ 1 \(no keys to attend to\), got n_k=0"):  # flash_attention returned zeros
        fn(q, k, k)


def test_no_keys_in_cross_attention_and_no_lengths():
    w = T.AttentionWeights(*(np.zeros((8, 8)) for _ in range(4)))
    with pytest.raises(ValueError, match=r"n_k must be ≥ 1 \(no keys to attend to\), got n_k=0"):
        T.multi_head_attention(np.zeros((1, 3, 8)), w, 2, context=np.zeros((1, 0, 8)))
    with pytest.raises(ValueError, match=r"n_k must be ≥ 1 \(no keys to attend to\), got n_k=0"):  # softmax's "x" before
        T.additive_attention(np.zeros((1, 1, 3, 4)), np.zeros((1, 1, 0, 4)), np.zeros((1, 1, 0, 4)),
                             np.zeros((4, 5)), np.zeros((4, 5)), np.zeros(5))
    with pytest.raises(ValueError, match=r"lengths is empty.*give n"):
        T.padding_mask([])
    assert T.padding_mask([], 3).shape == (0, 1, 1, 3)  # no sequences, but n given: a valid empty batch


@pytest.mark.parametrize("fn", [T.scaled_dot_product_attention, T.flash_attention])
def test_zero_head_size_is_a_clear_error(fn):
    q = np.ones((1, 1, 2, 0))
    with pytest.raises(ValueError, match=r"d_h must be ≥ 1 .*got d_h=0"):  # was: ZeroDivisionError
        fn(q, q, q)


@pytest.mark.parametrize("change,match", [
    (dict(W_o=np.zeros((6, 8))), r"W_o must be \(h·d_h, d\) with h·d_h = 8 rows, got shape \(6, 8\)"),
    (dict(b_q=np.zeros(3)), r"b_q must have shape \(8,\), got \(3,\)"),
    (dict(b_v=np.zeros(8), b_k=np.zeros((8, 1))), r"b_k must have shape \(8,\), got \(8, 1\)"),
    (dict(b_o=np.zeros(5)), r"b_o must have shape \(8,\), got \(5,\)"),
    (dict(context=np.zeros((1, 4, 5))), r"W_k/W_v need context's 5 input rows"),
    (dict(context=np.zeros((4, 8))), r"context must be \(b, n_k, d_c\) with b=1, got shape \(4, 8\)"),
    (dict(W_q=[[0.0] * 8] * 8), r"W_q must be an array, got list"),
    (dict(W_q=np.zeros((8, 4))), r"^W_q's 4 columns give d_h = 2 over h=2 heads, but W_k and W_v's 8 give d_h = 4 "
                                 r"over h_kv=2: the three must share d_h$"),
    (dict(W_k=np.zeros((8, 4))), r"^W_k/W_v need h_kv·d_h = 2·4 = 8 columns, got 4 and 8$"),
])
def test_multi_head_attention_names_the_bad_weight(change, match):
    context = change.pop("context", None)
    w = dict(zip(("W_q", "W_k", "W_v", "W_o"), (np.zeros((8, 8)) for _ in range(4))))
    w.update(change)
    with pytest.raises((ValueError, TypeError), match=match):
        T.multi_head_attention(np.zeros((1, 3, 8)), T.AttentionWeights(**w), 2, context=context)


@pytest.mark.parametrize("k_new,layer,match", [
    (np.zeros((1, 3, 1, 4)), 0, r"k_new must be \(b, h_kv, t, d_h\) = \(1, 2, t, 4\), got shape \(1, 3, 1, 4\)"),
    (np.zeros((1, 2, 1, 5)), 0, r"k_new must be .*got shape \(1, 2, 1, 5\)"),
    (np.zeros((2, 1, 4)), 0, r"k_new must be .*got shape \(2, 1, 4\)"),
    (np.zeros((2, 2, 1, 4)), 0, r"k_new must be \(b, h_kv, t, d_h\) = \(1, 2, t, 4\)"),  # batch mismatch
    (np.zeros((1, 2, 1, 4)), 1, r"layer=1 is out of range: the cache holds 1 layers"),
    (np.zeros((1, 2, 1, 4)), -1, r"layer must be an integer ≥ 0, got layer=-1"),
    (np.zeros((1, 2, 1, 4), dtype=np.int64), 0, r"k_new must be a floating-point array, got dtype \S*int64"),
])
def test_kv_cache_update_names_the_bad_shape(xp, k_new, layer, match):
    cache = T.KVCache(1, 1, 2, 5, 4, dtype=xp.float64, xp=xp)
    with pytest.raises((ValueError, TypeError), match=match):
        cache.update(layer, asarray(xp, k_new), asarray(xp, k_new))
    assert cache.written == [0]


@pytest.mark.parametrize("k_new,layer,match", [
    (np.zeros((3, 1, 4)), 0, r"k_new must be \(h_kv, t, d_h\) = \(2, t, 4\), got shape \(3, 1, 4\)"),
    (np.zeros((2, 1, 3)), 0, r"got shape \(2, 1, 3\)"),
    (np.zeros((1, 2, 1, 4)), 0, r"got shape \(1, 2, 1, 4\)"),
    (np.zeros((2, 5, 4)), 3, r"layer=3 is out of range: the cache holds 1 layers"),
])
def test_paged_write_checks_before_taking_blocks(k_new, layer, match):
    cache = PagedKVCache(1, 0, 2, 8, 4, block_size=2, n_blocks=4)
    seq = cache.add_sequence()
    with pytest.raises(ValueError, match=match):
        cache.write(seq, layer, k_new, k_new)
    assert cache.blocks_in_use == 0 and cache.tables[seq] == []  # was: the blocks stayed reserved


def test_paged_write_that_exhausts_the_pool_takes_no_block():
    cache = PagedKVCache(1, 0, 1, 8, 2, block_size=2, n_blocks=3)
    seq = cache.add_sequence()
    with pytest.raises(RuntimeError, match="exhausted"):
        cache.write(seq, 0, np.ones((1, 7, 2)), np.ones((1, 7, 2)))  # needs 4 blocks of 2, 3 exist
    assert cache.blocks_in_use == 0


def test_paged_update_and_gather_name_the_bad_argument():
    cache = PagedKVCache(1, 2, 1, 8, 2, block_size=4)
    with pytest.raises(ValueError, match=r"k_new must be \(b, h_kv, t, d_h\) = \(2, 1, t, 2\)"):
        cache.update(0, np.ones((2, 1, 3)), np.ones((2, 1, 3)))
    kv = np.ones((2, 1, 3, 2))
    cache.update(0, kv, kv)
    cache.advance(3)
    seq = cache.batch[0]
    with pytest.raises(ValueError, match=r"gather\(seq=0, layer=0, n=5\): only 3 positions"):
        cache.gather(seq, 0, 5)  # was: a reshape error
    with pytest.raises(ValueError, match=r"n must be an integer ≥ 0, got n=-1"):
        cache.gather(seq, 0, -1)
    assert cache.gather(seq, 0, 2)[0].shape == (1, 2, 2)


def test_backward_and_paged_attention_name_missing_or_misshapen_arrays():
    q = np.ones((1, 2, 3, 4))
    with pytest.raises(TypeError, match=r"out must be an array, got NoneType"):  # was: cannot reshape
        T.flash_attention_backward(q, q, q, q, None, np.zeros((1, 2, 3)))
    with pytest.raises(TypeError, match=r"lse must be an array, got NoneType"):
        T.flash_attention_backward(q, q, q, q, q, None)
    with pytest.raises(ValueError, match=r"q must be \(h, n_q, d_h\) for one sequence, got shape \(1, 2, 1, 4\)"):
        paged_attention(np.ones((1, 2, 1, 4)), _pool(), _pool(), [0, 1], 3)  # was: too many values to unpack


@pytest.mark.parametrize("call,err,match", [
    (lambda: T.bidirectional_mask(-2), ValueError, r"n_q must be an integer ≥ 0, got n_q=-2"),
    (lambda: T.bidirectional_mask(2, -1), ValueError, r"n_k must be an integer ≥ 0, got n_k=-1"),
    (lambda: T.global_mask(-1, []), ValueError, r"n must be an integer ≥ 0, got n=-1"),
    (lambda: T.random_mask(-4, 2), ValueError, r"n must be an integer ≥ 0, got n=-4"),
    (lambda: T.global_mask(4, 2), TypeError, r"global_tokens must be a list of positions, got int 2"),
    (lambda: T.apply_rope_interleaved(np.ones((3, 5)), np.ones((3, 2)), np.ones((3, 2))), ValueError,
     r"d_h must be even and ≥ 2 .*got d_h=5 in x of shape \(3, 5\)"),
    (lambda: T.apply_rope_half(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 2))), ValueError,
     r"cos of shape \(4, 2\) does not broadcast to x's \(..., n, d_h/2\) = \(3, 2\)"),
    (lambda: T.layer_norm(np.ones((2, 4)), np.ones(3)), ValueError, r"gamma must have shape \(d,\) = \(4,\), got \(3,\)"),
    (lambda: T.layer_norm(np.ones((2, 4)), np.ones(4), np.ones(5)), ValueError, r"beta must have shape"),
    (lambda: T.rms_norm(np.ones((2, 4)), np.ones((1, 4))), ValueError, r"gamma must have shape \(d,\) = \(4,\)"),
    (lambda: T.lm_head(np.ones((1, 2, 4)), np.ones((5, 3))), ValueError, r"W_E must be \(v, d\) with d = x's last size 4"),
    (lambda: T.lm_head(np.ones((1, 2, 4)), W_out=np.ones((3, 5))), ValueError, r"W_out must be \(d, v\)"),
    (lambda: T.ffn(np.ones((2, 4)), np.ones((3, 6)), np.ones((6, 4))), ValueError, r"W1 must be \(d, d_ff\) = \(4, 6\)"),
    (lambda: T.ffn(np.ones((2, 4)), np.ones((4, 6)), np.ones((5, 4))), ValueError, r"W2 must be \(d_ff, d\) with d_ff = 6"),
    (lambda: T.ffn(np.ones((2, 4)), np.ones((4, 6)), np.ones((6, 4)), np.ones(4)), ValueError, r"b1 must have shape \(6,\)"),
    (lambda: T.swiglu_ffn(np.ones((2, 4)), np.ones((4, 6)), np.ones((4, 5)), np.ones((6, 4))), ValueError,
     r"W_up must be \(d, d_ff\) = \(4, 6\)"),
    (lambda: T.softmax(np.ones(3), axis=5), ValueError, r"axis=5 is out of range for x of shape \(3,\)"),
    (lambda: T.softmax(np.ones((2, 3)), mask=np.ones((3, 3), bool)), ValueError,
     r"mask of shape \(3, 3\) is not broadcastable to x's shape = \(2, 3\)"),
    (lambda: T.softmax(np.ones((2, 0))), ValueError, r"softmax over an empty axis"),
    (lambda: T.softmax(np.array([1 + 5j, 2])), TypeError, r"x must hold real numbers .* got dtype complex128"),
    (lambda: T.softmax(np.array([True, False])), TypeError, r"x must hold real numbers .* got dtype bool"),
    (lambda: T.core.sampling.check_sampling(temperature=10 ** 400), ValueError, r"temperature must be a finite number ≥ 0"),
    (lambda: T.online_softmax_history(np.zeros(0)), ValueError, r"x has no entries"),
    (lambda: T.scaled_dot_product_attention(*(np.ones((1, 1, 2, 2)),) * 3, scale="x"), TypeError,
     r"scale must be a real number, got str scale='x'"),
    (lambda: T.flash_attention(*(np.ones((1, 1, 2, 2)),) * 3, scale=math.nan), ValueError, r"scale must be a finite"),
    (lambda: T.flash2_io(4, 4, 4, 0, 2), ValueError, r"block_q must be an integer ≥ 1, got block_q=0"),
    (lambda: T.flash1_io(4, 4, 4, 2, -2), ValueError, r"block_k must be an integer ≥ 1, got block_k=-2"),
    (lambda: T.flash1_io(-4, 4, 4, 2, 2), ValueError, r"n_q must be an integer ≥ 0, got n_q=-4"),
    (lambda: T.standard_attention_io(-1, 4, 4), ValueError, r"n_q must be an integer ≥ 0, got n_q=-1"),
    (lambda: T.additive_peak_bytes(-1, 5, 3), ValueError, r"n_q must be an integer ≥ 0, got n_q=-1"),
])
def test_bad_arguments_are_named(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("call,name", [
    (lambda: T.softmax(np.ones(2), mask=[True, False]), "mask"),
    (lambda: T.scaled_dot_product_attention(*(np.ones((1, 1, 2, 2)),) * 3, [[True] * 2] * 2), "mask"),
    (lambda: T.document_mask([[0, 0, 1]]), "doc"),
    (lambda: T.flash_attention(*(np.ones((1, 1, 2, 2)),) * 3, doc=[[0, 0]]), "doc"),
    (lambda: T.rope_cos_sin([0, 1, 2], 4), "positions"),
    (lambda: T.embed([[1, 2]], np.ones((3, 2))), "ids"),
    (lambda: T.attended_pairs([[True]]), "mask"),
    # found by fuzzing: each was "list is not a supported array type", naming no argument
    (lambda: T.relu([-1.0, 2.0]), "x"),
    (lambda: T.silu([-1.0, 2.0]), "x"),
    (lambda: T.sigmoid([-1.0, 2.0]), "x"),
    (lambda: T.erf([-1.0, 2.0]), "x"),
    (lambda: T.gelu([-1.0, 2.0]), "x"),
    (lambda: T.exp_minus([1.0, 2.0], np.zeros(1)), "x"),
    (lambda: T.merge_softmax_stats(np.zeros(1), [1.0], np.zeros(1), np.ones(1)), "l_a"),
    (lambda: T.encoder_mask([2, 3], 4), "lengths"),
])
def test_a_list_where_an_array_is_expected_names_the_argument(call, name):
    with pytest.raises(TypeError, match=rf"{name} must be an array \(NumPy, CuPy, …\), got list"):
        call()


# --- E. floats truncated, sizes ≤ 0, wrong blame, NumPy scalars ---------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda: T.causal_mask(2.5), r"n_q must be an integer ≥ 0, got n_q=2.5"),
    (lambda: T.sliding_window_mask(4, w=2.5), r"w must be an integer ≥ 1, got w=2.5"),
    (lambda: T.fixed_mask(4, 2.0), r"block must be an integer ≥ 1, got block=2.0"),
    (lambda: T.global_mask(4, [1.7]), r"global_tokens must hold integer positions, got \[1.7\]"),
    (lambda: T.global_mask(4, np.array([1.0])), r"global_tokens must be a 1-D integer array, got dtype float64"),
    (lambda: T.packing_report([2.7], 8), r"lengths\[0\] must be an integer ≥ 1, got lengths\[0\]=2.7"),
    (lambda: T.pack_documents([[1, 2]], 4, pad_id=1.5), r"pad_id must be an integer, got pad_id=1.5"),
    (lambda: paged_attention(np.ones((2, 1, 4)), _pool(), _pool(), [0, 1], 2.5),
     r"n_tokens must be an integer ≥ 0, got n_tokens=2.5"),
    (lambda: T.padding_mask(np.array([1.5, 2.0])), r"lengths must be integer token counts, got dtype float64"),
    (lambda: T.sinusoidal_positions(-1, 4), r"n must be an integer ≥ 0, got n=-1"),
    (lambda: T.sinusoidal_positions(4, 0), r"d must be even and ≥ 2 .*got d=0"),
    (lambda: T.sinusoidal_positions(4, -2), r"d must be an integer ≥ 0, got d=-2"),
    (lambda: T.sinusoidal_positions(4, 4, base=0), r"base must be a finite positive number, got base=0"),
    (lambda: T.rope_angles(np.arange(3), 0), r"d_h must be even and ≥ 2 .*got d_h=0"),
    (lambda: T.rope_angles(np.arange(3), 4, base=-1.0), r"base must be a finite positive number"),
    (lambda: T.padding_mask(np.array([1]), n=-1), r"n must be an integer ≥ 0, got n=-1"),  # was: blamed lengths
    (lambda: T.layer_norm(np.ones((1, 2)), np.ones(2), eps="x"), r"eps must be a real number"),
    (lambda: CK.launch_plan((1, 1, 1, 64), (1, 1, 1, 64), "float32", causal="yes", scale=None),
     r"causal must be True or False, got causal='yes'"),
    (lambda: CK.launch_plan((1, 1, 1, 64), (1, 1, 1, 64), "float32", causal=False, scale="x"),
     r"scale must be a real number"),
])
def test_no_silent_truncation_and_no_empty_tables(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_numpy_scalars_are_accepted_where_python_numbers_are(rng):
    q, k, v = (rng.standard_normal((1, 2, 5, 4)) for _ in range(3))
    i2, i3 = np.int64(2), np.int32(3)
    np.testing.assert_array_equal(T.flash_attention(q, k, v, block_q=i2, block_k=i3, scale=np.float32(0.5)),
                                  T.flash_attention(q, k, v, block_q=2, block_k=3, scale=0.5))
    np.testing.assert_array_equal(T.causal_mask(i3, np.int64(5)), T.causal_mask(3, 5))
    np.testing.assert_array_equal(T.global_mask(np.int64(4), [np.int64(1)]), T.global_mask(4, [1]))
    assert T.flash2_io(np.int64(8), 8, 4, i2, i2) == T.flash2_io(8, 8, 4, 2, 2)
    assert T.online_softmax_stats(np.ones(5), block=i2)[1][0] == pytest.approx(5.0)
    assert T.sinusoidal_positions(i3, np.int64(4), base=np.float64(100.0)).shape == (3, 4)


# --- F. valid input the checks must let through --------------------------------------------------------

def _torch_norm(norm, x32, g, b, eps):  # the same norm in PyTorch, float32
    t = torch.from_numpy(x32)
    if norm == "rms":
        return torch.nn.functional.rms_norm(t, (t.shape[-1],), torch.from_numpy(g), eps=eps).numpy()
    return torch.nn.functional.layer_norm(t, (t.shape[-1],), torch.from_numpy(g), torch.from_numpy(b), eps=eps).numpy()


def _our_norm(norm, x, g, b, eps):
    return T.rms_norm(x, g, eps) if norm == "rms" else T.layer_norm(x, g, b, eps)


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_norms_of_numpy_bfloat16_equal_torch(norm, rng):
    """NumPy's bfloat16 (ml_dtypes) is no NumPy float dtype to the Array API namespace; the norms
    took it before the checks came and take it again. Computed in float32 on the same bfloat16
    values as torch, rounded once to bfloat16: within 2⁻⁸ relative."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb = (rng.standard_normal((3, 16)) * 4).astype(ml_dtypes.bfloat16)
    g, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    out = _our_norm(norm, xb, g, b, 1e-6)
    assert out.dtype == xb.dtype
    ref = _torch_norm(norm, xb.astype(np.float32), g, b, 1e-6)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2 ** -8, atol=1e-6)


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_norms_of_torch_bfloat16_equal_torch(norm, rng):
    x32 = (rng.standard_normal((3, 16)) * 4).astype(np.float32)
    xb = torch.from_numpy(x32).to(torch.bfloat16)
    g, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    out = _our_norm(norm, xb, torch.from_numpy(g), torch.from_numpy(b), 1e-6)
    assert out.dtype == torch.bfloat16
    ref = _torch_norm(norm, xb.float().numpy(), g, b, 1e-6)
    np.testing.assert_allclose(out.float().numpy(), ref, rtol=2 ** -8, atol=1e-6)


def test_to_numpy_of_torch_bfloat16_widens_exactly_to_float32():
    t = torch.tensor([1.0, -2.5, 3.140625, 1e30, -math.inf], dtype=torch.bfloat16)
    a = T.to_numpy(t)  # was: TypeError "unsupported ScalarType BFloat16"
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, t.float().numpy())


_SAMPLING = [dict(temperature=0.0), dict(temperature=0.7), dict(temperature=1.3, top_k=5),
             dict(temperature=0.9, top_p=0.8)]


@pytest.mark.parametrize("settings", _SAMPLING)
def test_sampling_numpy_bfloat16_logits_equals_their_float32_widening(settings, rng):
    """bfloat16 logits are widened to float32 on the host (exactly: every bfloat16 is a float32),
    so every filter and draw matches the float32 run; the probabilities match torch's softmax."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    lb = (rng.standard_normal((4, 50)) * 3).astype(ml_dtypes.bfloat16)
    l32 = lb.astype(np.float32)
    assert T.sample_next(lb, rng=0, **settings).tolist() == T.sample_next(l32, rng=0, **settings).tolist()
    np.testing.assert_array_equal(T.filter_logits(lb, **settings), T.filter_logits(l32, **settings))
    if settings == dict(temperature=0.7):
        ref = torch.softmax(torch.from_numpy(l32) / 0.7, dim=-1).numpy()
        np.testing.assert_allclose(T.next_token_probs(lb, **settings), ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("settings", _SAMPLING)
def test_sampling_torch_bfloat16_logits_equals_their_float32_widening(settings, rng):
    lb = torch.from_numpy((rng.standard_normal((4, 50)) * 3).astype(np.float32)).to(torch.bfloat16)
    l32 = lb.float().numpy()
    assert T.sample_next(lb, rng=0, **settings).tolist() == T.sample_next(l32, rng=0, **settings).tolist()
    if settings["temperature"] == 0:
        assert T.sample_next(lb, **settings).tolist() == torch.argmax(lb.float(), dim=-1).tolist()
    else:
        ref = torch.softmax(torch.from_numpy(l32) / settings["temperature"], dim=-1).numpy()
        if len(settings) == 1:  # temperature only: the whole distribution
            np.testing.assert_allclose(T.next_token_probs(lb, **settings), ref, rtol=1e-5, atol=1e-7)


def test_bad_bfloat16_logits_are_still_refused():
    with pytest.raises(ValueError, match="logits contain NaN"):
        T.sample_next(torch.tensor([1.0, math.nan], dtype=torch.bfloat16), temperature=0.5)
    with pytest.raises(ValueError, match="all -inf"):
        T.sample_next(torch.tensor([[0.0, 1.0], [-math.inf, -math.inf]], dtype=torch.bfloat16))


@pytest.mark.parametrize("axis", [(0, 1), (1, 2), (-1, 0), (0, 1, 2), (2,)])
def test_softmax_over_a_tuple_of_axes_equals_torch_over_the_flattened_axes(xp, axis, rng):
    x = rng.standard_normal((2, 3, 4)) * 3
    dest = tuple(range(-len(axis), 0))
    moved = np.moveaxis(x, axis, dest)  # the softmax axes last, then flattened into one
    ref = torch.softmax(torch.from_numpy(moved.reshape(*moved.shape[:3 - len(axis)], -1)), dim=-1).numpy()
    ref = np.moveaxis(ref.reshape(moved.shape), dest, axis)
    np.testing.assert_allclose(T.to_numpy(T.softmax(asarray(xp, x), axis=axis)), ref, rtol=1e-12, atol=1e-15)


def test_zero_d_arrays_pass_where_numbers_do(rng):
    """A torch scalar or a 0-d array (what a CuPy reduction returns) is a number to the checks."""
    x = torch.from_numpy(rng.standard_normal((3, 8)))
    g = torch.from_numpy(rng.standard_normal(8))
    ref = torch.nn.functional.rms_norm(x, (8,), g, eps=1e-6).numpy()
    np.testing.assert_allclose(T.rms_norm(x, g, eps=torch.tensor(1e-6)).numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(T.rms_norm(x.numpy(), g.numpy(), eps=np.array(1e-6)), ref, rtol=1e-12)
    np.testing.assert_allclose(T.softmax(x, axis=torch.tensor(0)).numpy(), torch.softmax(x, dim=0).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(T.softmax(x.numpy(), axis=np.array(-1)), torch.softmax(x, dim=-1).numpy(),
                               rtol=1e-12)
    require_int(n=np.array(3), m=torch.tensor(4), low=1)
    require_real(scale=torch.tensor(0.5), eps=np.array(2), positive=True)


@pytest.mark.parametrize("call,err,match", [
    (lambda: require_int(n=np.array(2.5)), ValueError, r"n must be an integer ≥ 0, got n=array\(2.5\)"),
    (lambda: require_int(n=torch.tensor(True)), ValueError, r"n must be an integer ≥ 0, got n=tensor\(True\)"),
    (lambda: require_int(n=np.array(-1), low=1), ValueError, r"n must be an integer ≥ 1"),
    (lambda: require_int(n=np.array([1, 2])), TypeError, r"n must be an integer, got ndarray"),
    (lambda: require_real(eps=np.array(True)), TypeError, r"eps must be a real number, got ndarray"),
    (lambda: require_real(eps=torch.tensor(math.nan)), ValueError, r"eps must be a finite number"),
    (lambda: require_real(scale=np.array(-1.0), positive=True), ValueError, r"scale must be a finite positive"),
    (lambda: T.rms_norm(np.ones((1, 2)), np.ones(2), eps=np.array(-1.0)), ValueError, r"eps must be ≥ 0"),
    (lambda: T.softmax(np.ones((2, 3)), axis=(0, 0)), ValueError, r"axis=\(0, 0\) names an axis twice"),
    (lambda: T.softmax(np.ones((2, 3)), axis=(0, -2)), ValueError, r"axis=\(0, -2\) names an axis twice"),
    (lambda: T.softmax(np.ones((2, 3)), axis=(0, 2)), ValueError, r"axis=\(0, 2\) is out of range"),
    (lambda: T.softmax(np.ones((2, 3)), axis=(0, 1.0)), ValueError, r"axis must be an integer, got axis=1.0"),
    (lambda: T.softmax(np.ones((2, 0)), axis=(0, 1)), ValueError, r"softmax over an empty axis"),
    (lambda: T.softmax(np.ones(3), axis=np.array(0.0)), ValueError, r"axis must be an integer"),
])
def test_zero_d_arrays_and_axis_tuples_are_still_checked(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("cls", [T.KVCache, PagedKVCache])
@pytest.mark.parametrize("size,err,match", [
    (dict(n_max=4.7), ValueError, r"n_max must be an integer ≥ 1, got n_max=4.7"),  # was: truncated to 4
    (dict(n_max=4.0), ValueError, r"n_max must be an integer ≥ 1, got n_max=4.0"),
    (dict(h_kv=True), ValueError, r"h_kv must be an integer ≥ 1, got h_kv=True"),  # was: one head
    (dict(n_layers=0), ValueError, r"n_layers must be an integer ≥ 1, got n_layers=0"),
    (dict(d_h="8"), TypeError, r"d_h must be an integer, got str"),
    (dict(b=-1), ValueError, r"b must be an integer ≥ \d, got b=-1"),
])
def test_cache_sizes_must_be_whole_numbers(cls, size, err, match):
    sizes = dict(n_layers=2, b=1, h_kv=1, n_max=4, d_h=2)
    sizes.update(size)
    with pytest.raises(err, match=match):
        cls(**sizes)


@pytest.mark.parametrize("kw,match", [
    (dict(block_size=2.5), r"block_size must be an integer ≥ 1, got block_size=2.5"),
    (dict(block_size=True), r"block_size must be an integer ≥ 1, got block_size=True"),
    (dict(n_blocks=3.0), r"n_blocks must be an integer ≥ 1, got n_blocks=3.0"),
    (dict(b=0), r"n_blocks must be an integer ≥ 1, got n_blocks=0"),  # b = 0 needs n_blocks given
])
def test_paged_cache_block_sizes_must_be_whole_numbers(kw, match):
    sizes = dict(n_layers=1, b=1, h_kv=1, n_max=4, d_h=2)
    sizes.update(kw)
    with pytest.raises(ValueError, match=match):
        PagedKVCache(**sizes)


@pytest.mark.parametrize("cls", [T.KVCache, PagedKVCache])
def test_cache_sizes_as_numpy_or_0d_integers_are_plain_ints(cls):
    cache = cls(np.int64(2), np.array(1), torch.tensor(1), np.int32(4), 2)
    assert type(cache.n_max) is int and cache.n_max == 4
    kv = np.ones((1, 1, 3, 2), np.float32)
    k, _ = cache.update(1, kv, kv)
    np.testing.assert_array_equal(k, kv)


@pytest.mark.parametrize("call", [
    lambda c: T.flash_attention(*(np.ones((1, 1, 2, 2)),) * 3, causal=c),
    lambda c: paged_attention(np.ones((2, 1, 4)), _pool(), _pool(), [0, 1], 3, causal=c),
    lambda c: T.flash2_io(4, 4, 4, 2, 2, causal=c),
    lambda c: CK.launch_plan((1, 1, 1, 64), (1, 1, 1, 64), "float32", causal=c, scale=None),
    lambda c: T.sliding_window_mask(4, 2, causal=c),  # these three took "yes" and None for their truth
    lambda c: T.document_mask(np.zeros((1, 3), int), causal=c),
    lambda c: T.standard_attention_peak_bytes(1, 2, 4, 4, 2, 4, causal=c),
])
def test_causal_must_be_a_bool_everywhere(call):
    for bad in (1, "yes", None, np.array(True)):
        with pytest.raises(TypeError, match=rf"causal must be True or False, got causal={re.escape(repr(bad))}"):
            call(bad)
    call(np.True_)  # NumPy's bool is a bool


# --- G. every public function still checks, now that its maths sits in an unchecked core -----------------

_x3 = np.ones((1, 3, 8))


@pytest.mark.parametrize("call,err,match", [
    (lambda: T.attention_scores(np.ones((2, 4)), np.ones((2, 3))), ValueError, r"q and k head sizes differ"),
    (lambda: T.repeat_kv(np.ones((1, 2, 3, 4)), 0), ValueError, r"n_rep must be an integer ≥ 1, got n_rep=0"),
    (lambda: T.repeat_kv([[1.0]], 2), TypeError, r"x must be an array"),
    (lambda: T.scaled_dot_product_attention(*(np.ones((1, 2, 3, 4)),) * 3, np.ones((1, 2, 3, 3))), TypeError,
     r"mask must be boolean"),
    (lambda: T.split_heads(np.ones((1, 3, 8)), 3), ValueError, r"d=8 must be divisible by the number of heads h=3"),
    (lambda: T.split_heads(np.ones((3, 8)), 2), ValueError, r"split_heads needs x of shape \(b, n, h·d_h\)"),
    (lambda: T.merge_heads(np.ones((2, 3, 4))), ValueError, r"merge_heads needs x of shape \(b, h, n, d_h\)"),
    (lambda: T.qkv_heads(_x3, T.AttentionWeights(*(np.ones((8, 8)),) * 4), 3, 1), ValueError,
     r"d=8 must be divisible by the number of heads h=3"),
    (lambda: T.multi_head_attention(_x3, T.AttentionWeights(*(np.ones((8, 8)),) * 4), 2, mask=np.ones((3, 4), bool)),
     ValueError, r"mask of shape \(3, 4\) is not broadcastable to \(b, h, n_q, n_k\) = \(1, 2, 3, 3\)"),
    (lambda: T.multi_head_attention(_x3, T.AttentionWeights(*(np.ones((8, 8)),) * 4), 2, mask=np.ones((3, 3))),
     TypeError, r"mask must be boolean"),
    (lambda: T.glu_ffn(np.ones((2, 4)), np.ones((4, 6)), np.ones((4, 6)), np.ones((5, 4))), ValueError,
     r"W_down must be \(d_ff, d\) with d_ff = 6"),
    (lambda: T.rms_norm(np.ones((2, 4), np.float32), np.ones(4), eps=-1e-6), ValueError, r"eps must be ≥ 0"),
    (lambda: T.apply_rope_interleaved(np.ones((2, 4), np.int64), np.ones((2, 2)), np.ones((2, 2))), TypeError,
     r"x must be a floating-point array"),
    (lambda: T.embed(np.array([[0, 5]]), np.ones((5, 2))), ValueError,
     r"token ids must lie in \[0, 5\), got min 0, max 5"),
    (lambda: T.embed(np.array([[-1, 2]]), np.ones((5, 2))), ValueError, r"token ids must lie in \[0, 5\), got min -1"),
    (lambda: T.cross_entropy(np.zeros((2, 5)), np.array([-100, -5])), ValueError,  # the ignored target hid the bad one
     r"^targets must lie in \[0, 5\) or equal ignore_index=-100, got min -5, max -5 \(ignore_index aside\)$"),
    (lambda: T.filter_logits(np.array([1.0, math.nan]), temperature=0.5), ValueError, r"logits contain NaN"),
    (lambda: T.filter_logits(np.array([1.0, math.inf]), temperature=2.0), ValueError, r"logits contain \+inf"),
    (lambda: T.next_token_probs(np.array([[1.0, 2.0], [-math.inf, -math.inf]])), ValueError, r"all -inf"),
    (lambda: T.next_token_probs(np.array([1, 2])), TypeError, r"logits must be floating point, got dtype int64"),
    (lambda: T.sample_next(np.array([1.0, 2.0]), temperature=0.5, top_k=0), ValueError, r"top_k must be"),
])
def test_public_functions_still_check_their_input(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_embed_refuses_out_of_range_ids_on_every_backend(xp):
    table = asarray(xp, np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 5\)"):
        T.embed(asarray(xp, np.array([[0, 7]])), table)
    assert T.embed(asarray(xp, np.zeros((1, 0), np.int64)), table).shape == (1, 0, 2)  # no ids: nothing to check


def test_llama_forward_checks_a_callers_mask_once_and_its_blocks_then_run_unchecked():
    """forward's layers call unchecked cores; the one input they do not build, a caller's mask,
    is checked at the entry. A good mask gives the causal run's logits (the default mask)."""
    from transformer import LlamaConfig, llama_forward as forward, random_llama
    m = random_llama(LlamaConfig(L=2, d=16, h=4, h_kv=2, d_h=4, d_ff=32, v=32, n_ctx=16))
    ids = np.array([[1, 5, 7]])
    with pytest.raises(ValueError, match=r"mask of shape \(3, 2\) is not broadcastable to \(b, h, n, n_past \+ n\)"):
        forward(ids, m.weights, m.config, m.cos, m.sin, mask=np.ones((3, 2), bool))
    with pytest.raises(TypeError, match=r"mask must be boolean"):
        forward(ids, m.weights, m.config, m.cos, m.sin, mask=np.ones((3, 3)))
    np.testing.assert_array_equal(forward(ids, m.weights, m.config, m.cos, m.sin, mask=T.causal_mask(3)),
                                  forward(ids, m.weights, m.config, m.cos, m.sin))


# --- H. found by fuzzing the public API: hostile arguments built from valid calls ------------------------------

def _tiny_llama():
    return T.random_llama(T.LlamaConfig(L=1, d=16, h=4, h_kv=2, d_h=4, d_ff=32, v=32, n_ctx=16))


def _q(n=3, d_h=4):
    return np.ones((1, 2, n, d_h))


_W = dict(W_gate=np.ones((4, 6)), W_up=np.ones((4, 6)), W_down=np.ones((6, 4)))
_S2S = T.Seq2SeqConfig(v=16, d=8, h=2, d_ff=16, L_enc=2, L_dec=1, n_max=8)


@pytest.mark.parametrize("call,err,match", [
    # an AttributeError or a TypeError from inside Python, naming no argument
    (lambda: T.causal_mask(3, xp=1), TypeError, r"^xp must be an array namespace \(numpy, cupy, an Array API module\) "
                                                r"or its name, got int 1$"),
    (lambda: T.KVCache(1, 1, 1, 4, 2, xp=2), TypeError, r"^xp must be an array namespace"),
    (lambda: T.layer_norm(np.ones((2, 4)), None), TypeError, r"^gamma must be an array, got NoneType$"),
    (lambda: T.rms_norm_backward(np.ones((2, 4)), np.ones((2, 4)), None), TypeError, r"^gamma must be an array"),
    (lambda: T.glu_ffn(np.ones((2, 4)), activation="silu", **_W), TypeError,
     r"^activation must be a function \(T.sigmoid, T.silu, …\), got 'silu'$"),
    (lambda: T.additive_attention(_q(), [[1.0] * 4] * 5, np.ones((1, 2, 5, 4)), np.ones((4, 3)), np.ones((4, 3)),
                                  np.ones(3)), TypeError, r"^k must be an array, got list$"),
    (lambda: T.online_softmax_stats(np.ones(3), history="abc"), TypeError,
     r"^history must be None or a list to receive each step's \(m, l\), got str$"),
    (lambda: T.flash_attention(_q(), _q(), _q(), io="abc"), TypeError, r"^io must be None or a T.IOCounter"),
    (lambda: T.standard_attention(_q(), _q(), _q(), io=3), TypeError, r"^io must be None or a T.IOCounter"),
    (lambda: T.flash_attention_backward(_q(), _q(), _q(), _q(), _q(), np.zeros((1, 2, 3)), io=3), TypeError,
     r"^io must be None or a T.IOCounter"),
    (lambda: T.flash_attention(_q(), _q(), _q(), trace="abc"), TypeError, r"^trace must be None or a T.FlashTrace"),
    (lambda: T.seq2seq_encoder_layer(np.ones((1, 3, 8)), None, 2), TypeError,
     r"^lw must be a T.Seq2SeqEncoderLayer \(the layer's weights\), got NoneType$"),
    (lambda: T.detokenize([1, 3], vocab="abc"), TypeError, r"^vocab must be None or a T.TranslationVocab"),
    (lambda: T.random_llama(config="smollm2"), TypeError, r"^config must be a T.LlamaConfig .*got str$"),
    (lambda: T.decoder_forward({**T.init_decoder(T.induction_config()), "W_E": [[0.0]]}, np.zeros((1, 2), int),
                               T.induction_config()), TypeError, r"^params\['W_E'\] must be an array, got list$"),
    # an error from inside NumPy: a broadcast, a matmul, a reshape, a division by zero
    (lambda: T.decoder_mask(2, 3, np.ones((2, 4), bool)), ValueError,
     r"^key_valid must be \(b, n_past \+ n\) = \(b, 5\), one flag a key, got shape \(2, 4\)$"),
    (lambda: T.decoder_mask(2, 3, np.ones((2, 5))), TypeError,
     r"^key_valid must be booleans \(False at left padding\), got dtype float64$"),
    (lambda: T.decoder_mask(0, 3), ValueError, r"^n_q must be an integer ≥ 1, got n_q=0$"),
    (lambda: T.llama_forward(np.ones((2, 3), int), _tiny_llama().weights, _tiny_llama().config, _tiny_llama().cos,
                             _tiny_llama().sin, key_valid=np.ones((1, 3), bool)), ValueError,
     r"^key_valid must be \(b, n_past \+ n\) = \(2, 3\), one flag a key, got shape \(1, 3\)$"),
    (lambda: T.scaled_dot_product_attention_backward(_q(), _q(), _q(), _q(d_h=5), T.softmax(_q(d_h=3))), ValueError,
     r"^v's head size must be dO's \(the output's\) d_h=4, got v of shape \(1, 2, 3, 5\)$"),
    (lambda: T.exp_minus(np.ones((2, 3)), np.ones((2, 2))), ValueError,
     r"^m of shape \(2, 2\) must broadcast to x's \(2, 3\)"),
    (lambda: T.embed_backward(np.ones((1, 2, 0)), np.zeros((1, 2), int), 5), ValueError,
     r"^dX must have shape \(\*ids.shape, d\) = \(1, 2, 'd'\) with d ≥ 1, got \(1, 2, 0\)$"),
    (lambda: T.learned_positions_backward(np.ones((0, 4)), 5), ValueError,
     r"^dP must be \(\.\.\., n, d\) with n ≥ 1 and d ≥ 1, got shape \(0, 4\)$"),
    (lambda: T.flash_attention_fast_peak_bytes(1, 2, 0, 8, 4, 4, 4, 4), ValueError,
     r"^n_q must be an integer ≥ 1, got n_q=0$"),
    # a wrong answer in silence
    (lambda: T.merge_softmax_stats(np.zeros(1), np.zeros(0), np.zeros(1), np.ones(1)), ValueError,
     r"^m_a, l_a, m_b, l_b must have one shape \(\.\.\., 1\), got \(1,\), \(0,\), \(1,\), \(1,\)$"),  # l of shape (0,)
    (lambda: T.flash_attention(_q(), _q(), _q(), version=True), ValueError, r"^version must be 1 .*got version=True$"),
    (lambda: T.reference_translation([-1, 4, 5]), ValueError,  # the -1 was dropped as padding is
     r"^token ids must lie in \[0, 51\) \(or be -100\), got -1$"),
    (lambda: T.random_llama(T.LlamaConfig(L=1, d=8, h=2, h_kv=1, d_h=4, d_ff=8, v=8, n_ctx=8), std=math.nan),
     ValueError, r"^std must be a finite number, got std=nan$"),  # a model of NaN weights
    (lambda: T.seq2seq_encoder_weights(T.init_seq2seq(_S2S), 2), ValueError,  # a KeyError 'enc.2.self.W_q'
     r"^params hold no encoder layer l=2: 'enc.2.self.W_q' is missing \(12 of 12 names; the dict holds 2 encoder "
     r"layers\)$"),
    (lambda: T.seq2seq_decoder_weights(T.init_seq2seq(_S2S), -1), ValueError,
     r"^l must be an integer ≥ 0, got l=-1$"),
    (lambda: T.basic_tokenize("Hello", lower="no"), TypeError, r"^lower must be True or False, got lower='no'$"),
    (lambda: T.BPETokenizer(tokens=["a"], merges=[], pre="bogus"), ValueError,  # refused at the first encode only
     r"^unknown pre-tokenizer 'bogus'"),
    # the GPU decode step's plan, run on the CPU too: L = -1 gave -1 kernels a step, L = 2.5 gave 16.5
    (lambda: T.kernels_per_step(-1), ValueError, r"^L must be an integer ≥ 1, got L=-1$"),
    (lambda: T.kernels_per_step(2.5), ValueError, r"^L must be an integer ≥ 1, got L=2.5$"),
    (lambda: T.counter_uniforms(0, -1, 3), ValueError, r"^step must be an integer ≥ 0, got step=-1$"),
    (lambda: T.counter_uniforms(0, 2 ** 32, 3), ValueError, r"^step must be below 2\*\*32"),
    (lambda: T.counter_uniforms(1.5, 0, 3), ValueError, r"^seed must be an integer, got seed=1.5$"),
    (lambda: T.step_kernels("smollm2"), TypeError, r"^s must be a DecodeSizes .*got str$"),
    (lambda: T.DecodeSizes.of(T.LlamaConfig(), max_len=0, max_new=4), ValueError,
     r"^max_len must be an integer ≥ 1, got max_len=0$"),
    (lambda: T.DecodeSizes(30, 576, 9, 4, 64, 1536, 49152, 64, 8), ValueError, r"^h must be a multiple of h_kv"),
])
def test_fuzzed_arguments_are_named(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("change,err,match", [
    (dict(ids=[[1, 2, 3]]), TypeError, r"^ids must be an array \(NumPy, CuPy, …\), got list$"),  # was: no .shape
    (dict(ids=np.ones((1, 3))), TypeError, r"^ids must be integers, got dtype float64$"),  # a cast error inside NumPy
    (dict(ids=np.array([1, 2, 3])), ValueError, r"^ids must be \(b, n\) with n ≥ 1, got shape \(3,\)$"),  # unpacking
    (dict(ids=np.zeros((1, 0), int)), ValueError, r"^ids must be \(b, n\) with n ≥ 1, got shape \(1, 0\)$"),
    (dict(positions=np.arange(4)), ValueError, r"^positions must be \(n,\) or \(b, n\) = \(1, 3\), got \(4,\)$"),
    (dict(positions=np.arange(3.0)), TypeError, r"^positions must be integers, got dtype float64$"),
    (dict(last_only="no"), TypeError, r"^last_only must be True or False, got last_only='no'$"),  # "no" was truthy
])
def test_llama_forward_names_bad_ids_positions_and_flags(change, err, match):
    m = _tiny_llama()
    kw = {"ids": np.array([[1, 5, 7]]), **change}
    with pytest.raises(err, match=match):
        T.llama_forward(kw.pop("ids"), m.weights, m.config, m.cos, m.sin, **kw)


def test_what_the_fuzzing_checks_let_through_is_unchanged(rng):
    """Valid calls the new refusals must not touch: a list of rows to induction_accuracy (now parsed once), the
    reference translation of good ids, merge_softmax_stats of 0-d stats (lesson 08), exp_minus of a row max."""
    ids = np.array([[5, 6, 7, 5, 6, 7]])
    assert T.induction_accuracy([[0, 0, 0, 6, 7, 0]], ids) == T.induction_accuracy(np.array([[0, 0, 0, 6, 7, 0]]), ids)
    assert T.induction_accuracy([[0, 0, 0, 6, 7, 0]], ids.tolist()) == 1.0  # ids as a list failed on ids.shape
    voc = T.translation_vocab()
    assert T.detokenize(T.reference_translation([voc.id_of(w) for w in ("ka", "lu", "mi")] + [0])) == "cat sun dog"
    m, l = T.merge_softmax_stats(np.array(3.0), np.array(1.5), np.array(5.0), np.array(2.0))
    assert (float(m), float(l)) == pytest.approx((5.0, 1.5 * math.exp(-2.0) + 2.0))
    x = rng.standard_normal((2, 5))
    np.testing.assert_allclose(T.exp_minus(x, x.max(-1, keepdims=True)), np.exp(x - x.max(-1, keepdims=True)),
                               rtol=1e-15)
    m = _tiny_llama()
    ids = np.array([[1, 5, 7]])
    np.testing.assert_array_equal(T.llama_forward(ids, m.weights, m.config, m.cos, m.sin, positions=np.arange(3)),
                                  T.llama_forward(ids, m.weights, m.config, m.cos, m.sin))
