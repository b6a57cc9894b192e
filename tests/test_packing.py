"""Sequence packing: the layout by hand, the document mask by its loop definition, and packed
rows against each document run alone by an independent implementation (torch SDPA, HF's
LlamaForCausalLM holding the same weights)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import transformer as T
from transformer.models import counting, llama as llama_mod
from conftest import asarray

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SMALL = llama_mod.LlamaConfig(L=2, d=64, h=4, h_kv=2, d_h=16, d_ff=96, v=300, n_ctx=64)


def docs_of(lengths, start=1):
    """Documents whose ids say where they come from: document i holds 100·i + 1, 100·i + 2, …"""
    return [[100 * i + t + start for t in range(n)] for i, n in enumerate(lengths)]


# --- the layout ---------------------------------------------------------------------------
def test_first_fit_worked_example():
    """Lengths 5, 3, 4, 2, 6 into rows of 8, worked by hand: 5+3 fill row 0; 4 opens row 1,
    2 joins it; 6 fits neither (0 and 2 slots left), so it opens row 2."""
    p = T.pack_documents(docs_of([5, 3, 4, 2, 6]), n_ctx=8, pad_id=-7)
    _ = -7
    assert p.spans == ((0, 0, 5), (0, 5, 3), (1, 0, 4), (1, 4, 2), (2, 0, 6))
    np.testing.assert_array_equal(p.ids, [[1, 2, 3, 4, 5, 101, 102, 103],
                                          [201, 202, 203, 204, 301, 302, _, _],
                                          [401, 402, 403, 404, 405, 406, _, _]])
    np.testing.assert_array_equal(p.doc, [[0, 0, 0, 0, 0, 1, 1, 1],
                                          [2, 2, 2, 2, 3, 3, -1, -1],
                                          [4, 4, 4, 4, 4, 4, -1, -1]])
    np.testing.assert_array_equal(p.positions, [[0, 1, 2, 3, 4, 0, 1, 2],
                                                [0, 1, 2, 3, 0, 1, 0, 0],
                                                [0, 1, 2, 3, 4, 5, 0, 0]])
    np.testing.assert_array_equal(T.continued_positions(p), [list(range(8))] * 3)
    assert (p.rows, p.n_ctx, p.fill) == (3, 8, 20 / 24)


def test_a_later_short_document_fills_an_earlier_row():
    """6 then 6 in rows of 8 leave 2 slots in each; the 2 that follows goes back to row 0."""
    p = T.pack_documents(docs_of([6, 6, 2]), n_ctx=8)
    assert p.spans == ((0, 0, 6), (1, 0, 6), (0, 6, 2))


def test_longest_first_worked_example():
    """[4, 5, 3, 4] in rows of 8. In order: 4 | 5 | 3 joins the 4 | the last 4 needs a third row.
    Longest first (5, 4, 4, 3): 5 | 4 | 4 joins the 4 | 3 joins the 5: two rows, none wasted."""
    assert T.pack_documents(docs_of([4, 5, 3, 4]), n_ctx=8).rows == 3
    p = T.pack_documents(docs_of([4, 5, 3, 4]), n_ctx=8, longest_first=True)
    assert p.spans == ((1, 0, 4), (0, 0, 5), (0, 5, 3), (1, 4, 4))  # still in input order
    assert p.doc.tolist() == [[1, 1, 1, 1, 1, 2, 2, 2], [0, 0, 0, 0, 3, 3, 3, 3]]
    assert T.packing_report([4, 5, 3, 4], 8)["packed_longest_first"] == {"rows": 2, "slots": 16, "fill": 1.0}


def test_packing_report_worked_example():
    r = T.packing_report([5, 3, 4, 2, 6], 8)
    assert r == {"tokens": 20, "rows_needed": 3, "packed": {"rows": 3, "slots": 24, "fill": 20 / 24},
                 "packed_longest_first": {"rows": 3, "slots": 24, "fill": 20 / 24},
                 "one_per_row": {"rows": 5, "slots": 40, "fill": 0.5},
                 "pad_to_longest": {"rows": 5, "slots": 30, "fill": 20 / 30}}
    # batches of two, each padded to its own longest: [5, 3] -> 2·5, [4, 2] -> 2·4, [6] -> 6
    assert T.packing_report([5, 3, 4, 2, 6], 8, batch=2)["pad_to_longest"] == {"rows": 5, "slots": 24, "fill": 20 / 24}
    # NumPy sizes give the same report in plain Python numbers (JSON-ready)
    r64 = T.packing_report(np.array([5, 3, 4, 2, 6]), np.int64(8))
    assert r64 == r and all(type(r64[k]["slots"]) is int for k in ("packed", "one_per_row", "pad_to_longest"))


@SETTINGS
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=15), n_ctx=st.integers(12, 30),
       longest_first=st.booleans())
def test_every_document_lands_once_whole_and_in_the_first_row_with_room(lengths, n_ctx, longest_first):
    p = T.pack_documents(docs_of(lengths), n_ctx, longest_first=longest_first)
    free = [(p.doc[r] < 0).sum() for r in range(p.rows)]  # slots left in each row at the end
    assert p.ids.shape == p.doc.shape == p.positions.shape == (p.rows, n_ctx)
    assert (p.doc >= 0).sum() == sum(lengths)  # every token placed, none twice
    for i, (d, (row, start, n)) in enumerate(zip(docs_of(lengths), p.spans)):
        assert n == len(d)
        assert p.ids[row, start:start + n].tolist() == d  # contiguous, in order
        assert (p.doc[row, start:start + n] == i).all() and (p.doc == i).sum() == n
        assert p.positions[row, start:start + n].tolist() == list(range(n))
        # first fit: it went to a later row only if every earlier row lacked room at that time;
        # rows only fill up, so at the end they still lack it
        assert all(free[r] < n for r in range(row))
    assert (p.positions[p.doc < 0] == 0).all() and (p.ids[p.doc < 0] == 0).all()
    assert p.rows >= -(-sum(lengths) // n_ctx)  # no layout beats ⌈tokens / n_ctx⌉ rows


def naive_first_fit(lengths, n_ctx, longest_first):  # the rule as written: scan the rows from the first
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i]) if longest_first else range(len(lengths))
    used, spans = [], [None] * len(lengths)
    for i in order:
        row = next((r for r, u in enumerate(used) if u + lengths[i] <= n_ctx), len(used))
        used += [0] * (row == len(used))
        spans[i] = (row, used[row], lengths[i])
        used[row] += lengths[i]
    return tuple(spans)


@pytest.mark.parametrize("longest_first", [False, True])
@pytest.mark.parametrize("n, n_ctx, high", [(3000, 512, 60), (2000, 64, 64), (500, 7, 7), (1, 5, 5)])
def test_first_fit_places_each_document_where_a_scan_of_the_rows_does(n, n_ctx, high, longest_first):
    """The max-tree's walk against a plain scan of every row, over thousands of random lengths."""
    lengths = np.random.default_rng(n).integers(1, high + 1, n).tolist()
    p = T.pack_documents(docs_of(lengths), n_ctx, longest_first=longest_first)
    assert p.spans == naive_first_fit(lengths, n_ctx, longest_first)


def test_row_groups_cut_the_rows_and_keep_each_document_whole():
    docs = docs_of([3, 4, 2, 5, 1, 4])
    p = T.pack_documents(docs, n_ctx=5)  # rows: [3 2] [4 1] [5] [4]
    for rows in (1, 2, 3, 4, 10):
        seen = []
        for g, which in T.row_groups(p, rows):
            assert g.rows <= rows and g.n_ctx == 5
            for i, part in zip(which, T.unpack(g.ids, g)):
                assert part.tolist() == docs[i]
            seen += which
        assert sorted(seen) == list(range(len(docs)))
    with pytest.raises(ValueError, match=r"rows must be an integer ≥ 1, got rows=0"):
        T.row_groups(p, 0)


def test_unpack_cuts_each_document_back_out():
    p = T.pack_documents(docs_of([3, 4, 2]), n_ctx=5)
    per_slot = np.stack([p.ids, p.ids * 10], axis=-1)  # (b, n_ctx, 2), a stand-in for logits
    parts = T.unpack(per_slot, p)
    for d, part in zip(docs_of([3, 4, 2]), parts):
        np.testing.assert_array_equal(part, np.stack([d, [10 * t for t in d]], axis=-1))


# --- the mask -------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
def test_document_mask_equals_its_loop_definition(xp, causal):
    doc = np.array([[0, 0, 0, 1, 1, 2, -1, -1], [3, 3, 3, 3, 4, 4, 4, -1]])
    ours = T.to_numpy(T.document_mask(asarray(xp, doc), causal=causal))
    for b in range(2):
        expected = [[doc[b, i] == doc[b, j] and doc[b, j] >= 0 and (j <= i or not causal)
                     for j in range(8)] for i in range(8)]
        np.testing.assert_array_equal(ours[b, 0], expected)
    assert ours.shape == (2, 1, 8, 8)


@pytest.mark.parametrize("h_kv", [4, 2, 1])  # MHA, GQA, MQA
@pytest.mark.parametrize("causal", [True, False])
def test_packed_attention_equals_torch_on_each_document_alone(rng, causal, h_kv):
    """Attention over packed rows under the document mask = torch SDPA run on every
    document by itself (is_causal for the decoder case); padding queries give zeros."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    p = T.pack_documents(docs_of([5, 3, 4, 7, 1]), n_ctx=10)
    h, d_h = 4, 8
    q = rng.standard_normal((p.rows, h, p.n_ctx, d_h))
    k = rng.standard_normal((p.rows, h_kv, p.n_ctx, d_h))
    v = rng.standard_normal((p.rows, h_kv, p.n_ctx, d_h))
    out = T.scaled_dot_product_attention(q, k, v, T.document_mask(p.doc, causal=causal))  # (b, h, n_ctx, d_h)
    for row, start, n in p.spans:
        s = slice(start, start + n)
        expected = F.scaled_dot_product_attention(*(torch.from_numpy(a[row:row + 1, :, s]) for a in (q, k, v)),
                                                  is_causal=causal, enable_gqa=True)
        np.testing.assert_allclose(out[row, :, s], expected[0].numpy(), atol=1e-12, rtol=1e-12)
    padding = np.broadcast_to((p.doc < 0)[:, None, :], out.shape[:3])
    assert (out[padding] == 0).all()


# --- FlashAttention on packed rows: tiles between documents are skipped ----------------------
def torch_per_document(p, q, k, v, causal, dout=None):
    """torch SDPA (and autograd) on every document alone, written back into packed positions."""
    import torch
    F = torch.nn.functional
    out, lse = np.zeros(q.shape), np.full(q.shape[:3], -np.inf)
    grads = [np.zeros(a.shape) for a in (q, k, v)]
    for row, start, n in p.spans:
        s = slice(start, start + n)
        tq, tk, tv = (torch.tensor(a[row:row + 1, :, s], requires_grad=True) for a in (q, k, v))
        o = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=True)
        out[row:row + 1, :, s] = o.detach().numpy()
        scores = tq @ tk.repeat_interleave(q.shape[1] // k.shape[1], dim=1).transpose(-1, -2) / np.sqrt(q.shape[-1])
        if causal:
            scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        lse[row:row + 1, :, s] = torch.logsumexp(scores, dim=-1).detach().numpy()
        if dout is not None:
            o.backward(torch.from_numpy(dout[row:row + 1, :, s]))
            for g, t in zip(grads, (tq, tk, tv)):
                g[row:row + 1, :, s] = t.grad.numpy()
    return out, lse, grads


@SETTINGS
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6), n_ctx=st.integers(9, 16),
       block_q=st.integers(1, 7), block_k=st.integers(1, 7), causal=st.booleans(), version=st.sampled_from([1, 2]),
       h_kv=st.sampled_from([4, 2, 1]))
def test_flash_attention_on_packed_rows_equals_torch_on_each_document(lengths, n_ctx, block_q, block_k, causal,
                                                                     version, h_kv):
    """Forward (both loop orders) and log-sum-exp, any block sizes, h = 4 query heads over
    h_kv ∈ {4, 2, 1} key/value heads, padding rows zero."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(len(lengths) * 100 + n_ctx)
    p = T.pack_documents(docs_of(lengths), n_ctx)
    q = rng.standard_normal((p.rows, 4, n_ctx, 8))
    k, v = rng.standard_normal((2, p.rows, h_kv, n_ctx, 8))
    out, lse = T.flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k, version=version,
                                 doc=p.doc, return_lse=True)
    ref_out, ref_lse, _ = torch_per_document(p, q, k, v, causal)
    np.testing.assert_allclose(out, ref_out, atol=1e-10)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-10)  # -inf on padding rows, equal as inf


@pytest.mark.parametrize("h_kv", [4, 2, 1])
@pytest.mark.parametrize("causal", [True, False])
def test_flash_backward_on_packed_rows_equals_torch_autograd_per_document(causal, h_kv):
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    p = T.pack_documents(docs_of([5, 3, 4, 7, 1, 6]), n_ctx=11)
    q = rng.standard_normal((p.rows, 4, 11, 8))
    k, v = rng.standard_normal((2, p.rows, h_kv, 11, 8))
    dout = rng.standard_normal(q.shape)
    out, lse = T.flash_attention(q, k, v, causal=causal, block_q=3, block_k=4, doc=p.doc, return_lse=True)
    grads = T.flash_attention_backward(dout, q, k, v, out, lse, causal=causal, block_q=3, block_k=4, doc=p.doc)
    _, _, expected = torch_per_document(p, q, k, v, causal, dout)
    for name, g, e in zip("qkv", grads, expected):
        np.testing.assert_allclose(g, e, atol=1e-10, err_msg=f"d{name}")


def test_tiles_between_documents_are_skipped():
    """Two documents of 4 in a row of 8, blocks of 4, worked by hand: the two off-diagonal tiles
    hold no pair of one document and are skipped; with causal the diagonal tiles are masked inside."""
    doc = np.array([[0, 0, 0, 0, 1, 1, 1, 1]])
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 4))
    for causal, kinds in ((False, [["full", "skipped"], ["skipped", "full"]]),
                          (True, [["diagonal", "skipped"], ["skipped", "diagonal"]])):
        trace = T.FlashTrace()
        T.flash_attention(x, x, x, causal=causal, block_q=4, block_k=4, doc=doc, trace=trace)
        assert trace.kinds().tolist() == kinds
    # blocks of 3 cut the documents: row blocks hold documents [0 0 0], [0 1 1], [1 1]; a tile is
    # full where both sides hold one and the same document, skipped where they share none
    trace = T.FlashTrace()
    T.flash_attention(x, x, x, block_q=3, block_k=3, doc=doc, trace=trace)
    assert trace.kinds().tolist() == [["full", "diagonal", "skipped"], ["diagonal", "diagonal", "diagonal"],
                                      ["skipped", "diagonal", "full"]]


def test_flash_on_each_backend_with_doc(xp, rng):
    p = T.pack_documents(docs_of([3, 2, 4]), n_ctx=5)
    q, k, v = rng.standard_normal((3, p.rows, 2, 5, 4))
    ref = T.flash_attention(q, k, v, causal=True, block_q=2, block_k=2, doc=p.doc)
    got = T.flash_attention(*(asarray(xp, a) for a in (q, k, v)), causal=True, block_q=2, block_k=2,
                            doc=asarray(xp, p.doc))
    np.testing.assert_allclose(T.to_numpy(got), ref, atol=1e-12)


# --- a model --------------------------------------------------------------------------------
@pytest.mark.parametrize("restart, pass_bytes", [(True, None), (False, None), (True, 1)])
def test_packed_llama_equals_hf_on_each_document_alone(restart, pass_bytes, monkeypatch):
    """Three prompts in rows of 12 (two rows), one forward pass, against HF's LlamaForCausalLM
    holding the same weights and reading each prompt alone. RoPE scores depend on distance
    only, so numbering the row straight through (restart=False) changes nothing either.
    pass_bytes=1: one row a pass (as SmolLM2 runs rows of 512), the same logits."""
    pytest.importorskip("torch")
    from hf_llama import hf_llama_holding, hf_logits

    if pass_bytes is not None:
        monkeypatch.setattr(counting, "PACKED_PASS_BYTES", pass_bytes)
    passes = []
    forward = llama_mod.forward
    monkeypatch.setattr(llama_mod, "forward", lambda ids, *a, **k: passes.append(ids.shape[0]) or forward(ids, *a, **k))
    ours = T.random_llama(SMALL, seed=3, std=0.1)
    hf = hf_llama_holding(ours)
    docs = [[5, 17, 250, 3, 99], [42, 7, 7, 1, 2, 3, 4], [200, 100, 50, 25]]
    packed = ours.packed_logits(docs, n_ctx=12, restart_positions=restart)
    assert passes == ([2] if pass_bytes is None else [1, 1])
    for d, got in zip(docs, packed):
        np.testing.assert_allclose(got, hf_logits(hf, d), atol=1e-4, rtol=1e-4)


def test_packed_llama_on_each_backend_equals_numpy(other_xp):
    docs = [[5, 17, 250], [42, 7, 7, 1]]
    ref = T.random_llama(SMALL, seed=3, std=0.1).packed_logits(docs)
    got = T.random_llama(SMALL, backend=other_xp, seed=3, std=0.1).packed_logits(docs)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(T.to_numpy(a), b, atol=1e-5)


# --- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("docs,n_ctx,err,match", [
    ([[1, 2, 3], [1] * 9], 8, ValueError, r"document 1 has 9 tokens, more than a row of n_ctx=8"),
    ([[1, 2], []], 8, ValueError, "document 1 is empty"),
    ([[1, 2], [1.5, 2.0]], 8, TypeError, "document 1 must be a 1-D sequence of integer ids"),
    ([[[1, 2]]], 8, TypeError, "document 0 must be a 1-D"),
    ("some text", 8, TypeError, "docs must be a list of token-id sequences, got str"),
    ([[1, 2]], 0, ValueError, "n_ctx must be an integer ≥ 1, got n_ctx=0"),
    ([[1, 2]], 2.5, ValueError, "n_ctx must be an integer ≥ 1, got n_ctx=2.5"),
])
def test_bad_packing_input_is_named(docs, n_ctx, err, match):
    with pytest.raises(err, match=match):
        T.pack_documents(docs, n_ctx)
    with pytest.raises(err, match=match):
        T.pack_documents(docs, n_ctx, longest_first=True)  # the same checks either way


def test_longest_first_must_be_a_bool():
    with pytest.raises((TypeError, ValueError), match="longest_first"):
        T.pack_documents([[1, 2]], 8, longest_first="yes")


def test_bad_doc_for_flash_attention():
    x = np.zeros((1, 2, 6, 4))
    with pytest.raises(ValueError, match=r"doc must be a \(b, n\) = \(1, 6\) integer array.*shape \(1, 5\)"):
        T.flash_attention(x, x, x, doc=np.zeros((1, 5), dtype=np.int64))
    with pytest.raises(ValueError, match="doc must be a .*dtype float64"):
        T.flash_attention(x, x, x, doc=np.zeros((1, 6)))
    with pytest.raises(ValueError, match="n_q = n_k, got n_q=6, n_k=3"):
        T.flash_attention(x, x[:, :, :3], x[:, :, :3], doc=np.zeros((1, 6), dtype=np.int64))


def test_bad_input_at_the_other_entry_points():
    p = T.pack_documents(docs_of([3, 2]), n_ctx=5)
    with pytest.raises(ValueError, match=r"does not start with the packed rows \(b, n_ctx\) = \(1, 5\)"):
        T.unpack(np.zeros((2, 5, 3)), p)
    with pytest.raises(TypeError, match=r"doc must be a \(b, n\) integer array.*float64"):
        T.document_mask(np.zeros((1, 4)))
    with pytest.raises(ValueError, match=r"lengths\[1\] must be an integer ≥ 1, got lengths\[1\]=0"):
        T.packing_report([3, 0], 8)
    with pytest.raises(ValueError, match="batch must be an integer ≥ 1, got batch=0"):
        T.packing_report([3], 8, batch=0)
    m = T.random_llama(SMALL, seed=3)
    with pytest.raises(ValueError, match="exceed the model's context of n_ctx=64"):
        m.packed_logits([[1, 2]], n_ctx=65)
    with pytest.raises(ValueError, match="non-empty list"):
        m.packed_logits([])
    with pytest.raises(ValueError, match="either mask or key_valid"):
        ids = np.array([[1, 2]])
        llama_mod.forward(ids, m.weights, m.config, m.cos, m.sin, mask=T.causal_mask(2),
                          key_valid=np.ones((1, 2), bool))


def test_map_rows_gives_each_document_its_own_copy():
    p = T.pack_documents(docs_of([3, 4, 2, 5]), n_ctx=5)
    for rows in (1, 3, 10):
        got = T.map_rows(lambda g: np.stack([g.ids, -g.ids], axis=-1), p, rows)  # [r, n_ctx, 2]
        for d, x in zip(docs_of([3, 4, 2, 5]), got):
            assert x.tolist() == [[t, -t] for t in d] and x.base is None  # not a view into a pass's result
    with pytest.raises(TypeError, match=r"f must be a function of a Packed .*got int"):
        T.map_rows(3, p, 1)
    with pytest.raises(TypeError, match=r"f must return an array \[rows, n_ctx, ...\] .*got NoneType"):
        T.map_rows(lambda g: None, p, 1)
    with pytest.raises(ValueError, match=r"f returned shape \(1, 2\) for 1 rows of n_ctx=5: it must keep"):
        T.map_rows(lambda g: g.ids[:, :2], p, 1)


def test_packed_logits_larger_than_the_memory_are_refused_before_a_pass(monkeypatch):
    """The logits come back whole: tokens × v float32. 300 tokens of a 2²⁰-token vocabulary are 1.26 GB,
    refused on a machine with 1 GB available before any row runs."""
    from transformer.core import shared_checks
    cfg = llama_mod.LlamaConfig(L=1, d=8, h=1, h_kv=1, d_h=8, d_ff=8, v=2**20, n_ctx=64)
    m = T.random_llama(cfg, seed=0)
    monkeypatch.setattr(shared_checks, "available_bytes", lambda: 10**9)
    monkeypatch.setattr(llama_mod, "forward", lambda *a, **k: pytest.fail("a pass ran"))
    with pytest.raises(ValueError, match=r"the logits of 10 documents \(300 tokens × v = 1,048,576 float32\) would "
                                         r"take 1.3 GB, more than the 1.0 GB of memory available"):
        m.packed_logits([[1] * 30] * 10)
