"""The training data: targets written as plain loops, packed rows worked by hand, padding counts
against packing_report, held-out splits that share nothing with training, and seeds that give
the same bytes."""
import numpy as np
import pytest

import transformer as T

IGNORE = -100


def induction_targets_by_loop(ids):
    """Position i predicts ids[i + 1] only inside the repeated half (n_half ≤ i ≤ 2·n_half − 2)."""
    b, n = ids.shape
    out = np.full((b, n), IGNORE)
    for r in range(b):
        for i in range(n):
            if n // 2 <= i <= n - 2:
                out[r, i] = ids[r, i + 1]
    return out


# --- the induction task ---------------------------------------------------------------------
@pytest.mark.parametrize("b,n_half,v,first_token,distinct", [(8, 5, 20, 1, True), (3, 16, 64, 4, True),
                                                             (6, 12, 5, 1, False)])
def test_induction_batch_layout_and_targets(b, n_half, v, first_token, distinct):
    x = T.induction_batch(np.random.default_rng(3), b, n_half, v, first_token=first_token, distinct=distinct)
    assert x.ids.shape == x.targets.shape == (b, 2 * n_half)
    np.testing.assert_array_equal(x.ids[:, :n_half], x.ids[:, n_half:])  # the same tokens again
    assert x.ids.min() >= first_token and x.ids.max() < v  # no special id
    if distinct:
        assert all(len(set(r[:n_half].tolist())) == n_half for r in x.ids)
    np.testing.assert_array_equal(x.targets, induction_targets_by_loop(x.ids))


def test_the_same_seed_gives_the_same_bytes():
    a = T.induction_batch(np.random.default_rng(11), 4, 8, 32)
    b = T.induction_batch(np.random.default_rng(11), 4, 8, 32)
    c = T.induction_batch(np.random.default_rng(12), 4, 8, 32)
    assert a.ids.tobytes() == b.ids.tobytes() and a.targets.tobytes() == b.targets.tobytes()
    assert a.ids.tobytes() != c.ids.tobytes()
    t1 = T.translation_batch(np.random.default_rng(5), 8)
    t2 = T.translation_batch(np.random.default_rng(5), 8)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(t1, t2))


def test_batches_is_a_reproducible_iterator():
    make = lambda rng: T.induction_batch(rng, 2, 6, 40)
    run = lambda seed: b"".join(x.ids.tobytes() for x in T.batches(make, seed, 5))
    assert run(3) == run(3) != run(4)
    assert len(list(T.batches(make, 3, 5))) == 5
    # the batches are the successive draws of one default_rng(seed), nothing else
    rng = np.random.default_rng(3)
    assert run(3) == b"".join(make(rng).ids.tobytes() for _ in range(5))


def test_induction_heldout_shares_no_sequence_with_training():
    """A space of 8·7·6 = 336 first halves, drawn 1 280 times for training: each training sequence
    appears many times over, yet none of the held-out ones is among them."""
    train, held = T.induction_split(0, 80, 10, 16, 3, 9)
    seen = {tuple(r[:3]) for x in train for r in x.ids}
    held_rows = {tuple(r[:3]) for x in held for r in x.ids}
    assert len(seen) > 250 and len(held_rows) > 10  # both splits well covered
    assert not seen & held_rows
    assert all(T.is_heldout(np.array(r)) for r in held_rows) and not any(T.is_heldout(np.array(r)) for r in seen)


def test_a_split_with_no_sequence_is_refused_not_drawn_forever():
    with pytest.raises(ValueError, match=r"too few sequences fall in the 'heldout' split"):
        T.induction_batch(np.random.default_rng(0), 1, 1, 3, split="heldout")  # 2 sequences: [1], [2]


def test_induction_accuracy_by_hand():
    ids = np.array([[4, 5, 6, 7, 4, 5, 6, 7], [1, 2, 3, 8, 1, 2, 3, 8]])
    pred = np.zeros_like(ids)  # position i guesses ids[i + 1]; scored: i = 4, 5, 6 -> 5, 6, 7 / 2, 3, 8
    pred[0, 4:7] = [5, 6, 7]  # all right
    pred[1, 4:7] = [2, 9, 9]  # one right
    pred[:, :4] = ids[:, 1:5]  # the unscored first half, right or not, counts for nothing
    assert T.induction_accuracy(pred, ids) == pytest.approx(4 / 6)
    x = T.induction_batch(np.random.default_rng(0), 5, 7, 30)
    perfect = np.where(x.targets == IGNORE, 0, x.targets)  # the targets themselves: every scored one right
    assert T.induction_accuracy(perfect, x.ids) == 1.0


def test_induction_documents():
    docs = T.induction_documents(np.random.default_rng(1), 50, 40, (2, 5))
    lengths = [len(d) for d in docs]
    assert set(lengths) == {4, 6, 8, 10}  # n_half 2 … 5, both ends drawn
    for d in docs:
        np.testing.assert_array_equal(d[:len(d) // 2], d[len(d) // 2:])
    again = T.induction_documents(np.random.default_rng(1), 50, 40, (2, 5))
    assert all((a == b).all() for a, b in zip(docs, again))


# --- padded and packed rows -----------------------------------------------------------------
A, B, C = [11, 12, 13, 14], [21, 22], [31, 32, 33]
_ = IGNORE


def test_packed_rows_hand_worked():
    """Three documents into rows of 6, first fit: A (4) opens row 0, B (2) fills it, C (3) opens
    row 1. Targets stop at each document's end: 14 does not predict 21, 22 nothing."""
    r = T.packed_rows([A, B, C], 6)
    np.testing.assert_array_equal(r.ids, [[11, 12, 13, 14, 21, 22], [31, 32, 33, 0, 0, 0]])
    np.testing.assert_array_equal(r.targets, [[12, 13, 14, _, 22, _], [32, 33, _, _, _, _]])
    np.testing.assert_array_equal(r.positions, [[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 0, 0]])
    np.testing.assert_array_equal(r.doc_ids, [[0, 0, 0, 0, 1, 1], [2, 2, 2, -1, -1, -1]])
    assert (r.padded_slots, r.tokens, r.scored) == (3, 9, 6)


def test_packed_rows_hand_worked_with_score_from():
    """score_from = [2, 0, 1]: A's first two positions and C's first carry no target."""
    r = T.packed_rows([A, B, C], 6, score_from=[2, 0, 1], pad_id=99)
    np.testing.assert_array_equal(r.ids, [[11, 12, 13, 14, 21, 22], [31, 32, 33, 99, 99, 99]])
    np.testing.assert_array_equal(r.targets, [[_, _, 14, _, 22, _], [_, 33, _, _, _, _]])


def test_padded_rows_hand_worked():
    r = T.padded_rows([A, B, C], 4)
    np.testing.assert_array_equal(r.ids, [[11, 12, 13, 14], [21, 22, 0, 0], [31, 32, 33, 0]])
    np.testing.assert_array_equal(r.targets, [[12, 13, 14, _], [22, _, _, _], [32, 33, _, _]])
    np.testing.assert_array_equal(r.positions, [[0, 1, 2, 3], [0, 1, 0, 0], [0, 1, 2, 0]])
    np.testing.assert_array_equal(r.doc_ids, [[0, 0, 0, 0], [1, 1, -1, -1], [2, 2, 2, -1]])
    assert r.padded_slots == 3 and T.padded_rows([A, B, C], 6).padded_slots == 18 - 9


@pytest.mark.parametrize("seed", range(5))
def test_padded_slots_agree_with_packing_report(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 33, size=int(rng.integers(1, 40))).tolist()
    docs = [rng.integers(1, 50, size=n) for n in lengths]
    n_ctx = 32
    report = T.packing_report(lengths, n_ctx)
    tokens = report["tokens"]
    assert T.packed_rows(docs, n_ctx).padded_slots == report["packed"]["slots"] - tokens
    assert T.packed_rows(docs, n_ctx, longest_first=True).padded_slots == \
        report["packed_longest_first"]["slots"] - tokens
    assert T.padded_rows(docs, n_ctx).padded_slots == report["one_per_row"]["slots"] - tokens
    assert T.padded_rows(docs, max(lengths)).padded_slots == report["pad_to_longest"]["slots"] - tokens


@pytest.mark.parametrize("seed", range(5))
def test_no_target_crosses_a_document(seed):
    """Every target is the next token of the same document; each document's targets, read back
    from the rows, are its own tokens shifted by one (a loop over the documents)."""
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, 9, size=int(n)) for n in rng.integers(1, 12, size=25)]  # few ids: neighbours repeat
    for r in (T.packed_rows(docs, 16), T.packed_rows(docs, 16, longest_first=True), T.padded_rows(docs, 11)):
        rows, cols = np.nonzero(r.targets != IGNORE)
        assert (cols < r.ids.shape[1] - 1).all()
        np.testing.assert_array_equal(r.doc_ids[rows, cols], r.doc_ids[rows, cols + 1])
        np.testing.assert_array_equal(r.targets[rows, cols], r.ids[rows, cols + 1])
        for i, d in enumerate(docs):
            where = r.doc_ids == i
            assert where.sum() == len(d)
            np.testing.assert_array_equal(r.ids[where], d)
            np.testing.assert_array_equal(r.positions[where], np.arange(len(d)))
            np.testing.assert_array_equal(r.targets[where], list(d[1:]) + [IGNORE])
        assert r.scored == sum(len(d) - 1 for d in docs)
        assert (r.targets[r.doc_ids < 0] == IGNORE).all() and (r.positions[r.doc_ids < 0] == 0).all()


def test_packed_induction_documents_score_only_the_repeated_half():
    docs = T.induction_documents(np.random.default_rng(4), 12, 30, (3, 6))
    r = T.packed_rows(docs, 16, score_from=[len(d) // 2 for d in docs])
    for i, d in enumerate(docs):
        np.testing.assert_array_equal(r.targets[r.doc_ids == i], induction_targets_by_loop(d[None, :])[0])


def test_batch_tokens():
    assert T.batch_tokens(T.induction_batch(np.random.default_rng(0), 3, 5, 20)) == 30
    assert T.batch_tokens(T.packed_rows([A, B, C], 6)) == 9
    x = T.translation_batch(np.random.default_rng(0), 4)
    assert T.batch_tokens(x) == int(x.src_lengths.sum()) + int((x.src_lengths + 1).sum())


# --- the toy translation task ---------------------------------------------------------------
def test_translation_vocabulary():
    voc = T.translation_vocab()
    assert (voc.pad, voc.bos, voc.eos, voc.v) == (0, 1, 2, 51)
    assert [voc.tokens[i] for i in voc.source_ids][:3] == ["ka", "lu", "mi"]
    assert len(set(voc.tokens)) == voc.v  # no word twice, across both languages
    assert voc.tokens[voc.translate(voc.id_of("ka"))] == "dog"
    assert voc.tokens[voc.translate(voc.id_of("lu"))] == "sun"
    assert sorted(voc.translate(i) for i in voc.source_ids) == list(voc.target_ids)  # one to one


def test_translation_batch_reverses_and_translates():
    voc = T.translation_vocab()
    src_words = [voc.tokens[i] for i in voc.source_ids]
    dictionary = {s: voc.tokens[voc.translate(voc.id_of(s))] for s in src_words}
    x = T.translation_batch(np.random.default_rng(9), 40)
    b, n_src = x.src_ids.shape
    assert x.tgt_in.shape == x.tgt_out.shape == (b, n_src + 1) and n_src == x.src_lengths.max()
    assert 4 <= x.src_lengths.min() and x.src_lengths.max() <= 12
    for row in range(b):
        n = int(x.src_lengths[row])
        source = [voc.tokens[t] for t in x.src_ids[row, :n]]
        target = [voc.tokens[t] for t in x.tgt_out[row, :n]]
        assert target == [dictionary[w] for w in source[::-1]]  # reversed, then translated
        assert x.tgt_out[row, n] == voc.eos and (x.tgt_out[row, n + 1:] == IGNORE).all()
        assert x.tgt_in[row, 0] == voc.bos and (x.tgt_in[row, 1:n + 1] == x.tgt_out[row, :n]).all()
        assert (x.tgt_in[row, n + 1:] == voc.pad).all() and (x.src_ids[row, n:] == voc.pad).all()
        assert T.detokenize(x.tgt_out[row]) == " ".join(target)
        assert T.reference_translation(x.src_ids[row]) == x.tgt_out[row, :n].tolist()
        A = T.translation_alignment(n)  # target word i reads source word argmax A[i]
        for i in range(n):
            assert x.tgt_out[row, i] == voc.translate(x.src_ids[row, int(A[i].argmax())])


def test_translation_alignment_hand_worked():
    np.testing.assert_array_equal(T.translation_alignment(4), [[0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0],
                                                                [1, 0, 0, 0], [0, 0, 0, 0]])
    assert T.detokenize([1, 3, 4, 27, 0, -100]) == "ka lu dog"
    assert T.detokenize([3, 2, 4]) == "ka"  # stops at EOS


@pytest.mark.parametrize("n_range", [(1, 2), (4, 12)])
def test_translation_heldout_shares_no_sentence_with_training(n_range):
    """With sentences of 1–2 words (24 + 576 of them), 1 600 training draws repeat most of them;
    still no held-out sentence is among them."""
    train, held = T.translation_split(0, 50, 10, 32, n_range=n_range)
    sentence = lambda x, r: tuple(x.src_ids[r, :x.src_lengths[r]])
    seen = {sentence(x, r) for x in train for r in range(32)}
    held_out = {sentence(x, r) for x in held for r in range(32)}
    assert held_out and not seen & held_out
    if n_range == (1, 2):
        assert len(seen) > 400  # most of the 600 sentences: an overlap would have been found


# --- refusals -------------------------------------------------------------------------------
rng0 = np.random.default_rng(0)


@pytest.mark.parametrize("call,err,match", [
    (lambda: T.induction_batch(0, 2, 3, 10), TypeError, r"rng must be a np.random.Generator"),
    (lambda: T.induction_batch(rng0, 2, 12, 10), ValueError, r"n_half=12 distinct tokens need v − first_token"),
    (lambda: T.induction_batch(rng0, 2, 3, 10, first_token=10), ValueError, r"first_token=10 leaves no token"),
    (lambda: T.induction_batch(rng0, 0, 3, 10), ValueError, r"b must be an integer ≥ 1, got b=0"),
    (lambda: T.induction_batch(rng0, 2, 3, 10, split="test"), ValueError, r"split must be 'train' or 'heldout'"),
    (lambda: T.induction_accuracy(np.zeros((2, 6), int), np.zeros((2, 8), int)), ValueError, r"one shape"),
    (lambda: T.induction_accuracy(np.zeros((2, 5), int), np.zeros((2, 5), int)), ValueError, r"two equal halves"),
    (lambda: T.induction_documents(rng0, 3, 10, (5, 4)), ValueError, r"n_half_range must have lo ≤ hi"),
    (lambda: T.packed_rows([A, B, C], 3), ValueError, r"document 0 has 4 tokens, more than a row of n_ctx=3"),
    (lambda: T.padded_rows([A, [], C], 4), ValueError, r"document 1 is empty"),
    (lambda: T.padded_rows([], 4), ValueError, r"docs is empty"),
    (lambda: T.padded_rows([A, [1.5]], 4), TypeError, r"document 1 must be a 1-D sequence of integer ids"),
    (lambda: T.packed_rows([A, B], 6, score_from=[1]), ValueError, r"score_from must give one position per document"),
    (lambda: T.batches("make", 0, 3), TypeError, r"make_batch must be a function"),
    (lambda: T.batches(lambda r: r, -1, 3), ValueError, r"seed must be an integer ≥ 0, got seed=-1"),
    (lambda: T.translation_batch(rng0, 2, n_range=(0, 3)), ValueError, r"n_range\[0\] must be an integer ≥ 1"),
    (lambda: T.translation_alignment(0), ValueError, r"n_src must be an integer ≥ 1"),
    (lambda: T.detokenize([1, 77]), ValueError, r"token ids must lie in \[0, 51\)"),
])
def test_bad_arguments_are_refused_in_one_line(call, err, match):
    with pytest.raises(err, match=match) as e:
        call()
    assert "\n" not in str(e.value)
