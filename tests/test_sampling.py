"""Decoding strategies against HF transformers' logits processors (the same filters, written
independently in torch), hand-worked examples, and the empirical frequencies of many draws."""
import numpy as np
import pytest
import torch

from transformer.backend import to_host
from transformer.core.sampling import check_sampling, filter_logits, next_token_probs, sample_next, greedy


def hf_filter(logits, temperature, top_k, top_p):
    """HF generate's order: temperature, then top-k, then top-p."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    x = torch.from_numpy(logits.copy())
    ids = torch.zeros((x.shape[0], 1), dtype=torch.long)
    if temperature not in (0, 1.0):
        x = TemperatureLogitsWarper(temperature)(ids, x)
    if top_k is not None:
        x = TopKLogitsWarper(top_k)(ids, x)
    if top_p is not None and top_p < 1.0:
        x = TopPLogitsWarper(top_p)(ids, x)
    return x.numpy()


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, None, None), (0.7, None, None), (1.0, 5, None), (1.0, None, 0.9), (0.8, 40, 0.95),
    (1.3, 1, None), (1.0, None, 0.05), (2.0, 1000, 0.5), (1.0, 50_000, None),
    (1.0, None, 1e-50), (0.7, 5, 1e-300)])  # top_p below float32's smallest number: the top token still survives
def test_filter_equals_hf_warpers(temperature, top_k, top_p):
    rng = np.random.default_rng(1)
    logits = (rng.standard_normal((4, 1000)) * 3).astype(np.float32)
    ours = filter_logits(logits, temperature, top_k, top_p)
    ref = hf_filter(logits, temperature, top_k, top_p)
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(ref))
    np.testing.assert_allclose(ours[np.isfinite(ours)], ref[np.isfinite(ref)], rtol=1e-6)


def test_hand_worked_top_k_and_top_p():
    p = np.array([0.05, 0.5, 0.15, 0.3], dtype=np.float32)
    logits = np.log(p)
    # top-k = 2 keeps 0.5 and 0.3, renormalised: 0.625, 0.375
    np.testing.assert_allclose(next_token_probs(logits, top_k=2), [0, 0.625, 0, 0.375], atol=1e-6)
    # top-p = 0.6: 0.5 alone is below 0.6, 0.5 + 0.3 reaches it -> same two tokens
    np.testing.assert_allclose(next_token_probs(logits, top_p=0.6), [0, 0.625, 0, 0.375], atol=1e-6)
    # top-p = 0.4: the most likely token alone (0.5) already reaches it
    np.testing.assert_allclose(next_token_probs(logits, top_p=0.4), [0, 1, 0, 0], atol=1e-6)
    # temperature 0.5 squares the odds: p² / Σp²
    np.testing.assert_allclose(next_token_probs(logits, temperature=0.5), p**2 / (p**2).sum(), rtol=1e-5)


def test_greedy_and_temperature_zero():
    logits = np.array([[0.1, 3.0, -1.0], [5.0, 4.9, 0.0]], dtype=np.float32)
    assert greedy(logits).tolist() == [1, 0]
    assert sample_next(logits, temperature=0.0).tolist() == [1, 0]
    assert sample_next(logits, temperature=1.0, top_k=1, rng=0).tolist() == [1, 0]


def test_draw_frequencies_match_probabilities():
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32))
    rng = np.random.default_rng(123)
    n = 20_000
    draws = sample_next(np.tile(logits, (n, 1)), temperature=1.0, rng=rng)
    freq = np.bincount(draws, minlength=4) / n
    # binomial standard error ≤ √(0.25/n) ≈ 0.0035: allow 4.5 σ
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.016)
    # filtered tokens are never drawn
    draws = sample_next(np.tile(logits, (n, 1)), temperature=1.0, top_k=2, rng=rng)
    assert set(np.unique(draws).tolist()) == {2, 3}


def test_seed_reproducible_and_zero_probability_never_drawn():
    logits = np.array([0.0, -np.inf, 0.0, -np.inf], dtype=np.float32)
    a = sample_next(np.tile(logits, (500, 1)), temperature=1.0, rng=7)
    b = sample_next(np.tile(logits, (500, 1)), temperature=1.0, rng=7)
    assert a.tolist() == b.tolist()
    assert set(a.tolist()) == {0, 2}


def test_extreme_logits_stay_finite():
    logits = np.array([1e30, -1e30, 0.0], dtype=np.float32)
    p = next_token_probs(logits, temperature=0.01)
    assert np.isfinite(p).all() and p[0] == 1.0
    assert sample_next(logits, temperature=5.0, rng=0) == 0


@pytest.mark.parametrize("kwargs,match", [
    (dict(temperature=-1.0), "temperature.*-1.0"), (dict(temperature=float("nan")), "temperature.*nan"),
    (dict(top_k=0), "top_k.*0"), (dict(top_k=2.5), "top_k.*2.5"), (dict(top_p=0.0), "top_p.*0.0"),
    (dict(top_p=1.5), "top_p.*1.5"), (dict(temperature=10 ** 400), "temperature must be a finite number"),
    (dict(top_p=-10 ** 400), "top_p must lie in")])
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_next(np.zeros(3, dtype=np.float32), **kwargs)


def test_bad_logits():
    with pytest.raises(ValueError, match="NaN"):
        filter_logits(np.array([0.0, np.nan], dtype=np.float32))
    with pytest.raises(TypeError, match="int64"):
        filter_logits(np.array([1, 2]))


@pytest.mark.parametrize("spread,top_p", [(30.0, 0.9), (3.0, 0.9), (1.0, 0.99), (0.3, 0.999)])
def test_top_p_over_a_large_vocabulary_equals_torch_float64(spread, top_p):
    """49 152 logits (SmolLM2's vocabulary), from peaked (a handful kept) to flat (most kept): only
    the head of the order is sorted when it holds the mass top_p, the whole row otherwise. Against
    the definition in torch float64 (stable descending sort, cumulative mass before each token):
    every token clearly under top_p is kept, every one clearly over it dropped; only tokens within
    float32 rounding (1e-5) of the cut may go either way (HF's warper, summing from the other end
    in float32, disagrees with both there by a few of 40 000)."""
    rng = np.random.default_rng(4)
    logits = (rng.standard_normal((2, 49152)) * spread).astype(np.float32)
    kept = np.isfinite(filter_logits(logits, 1.0, None, top_p))
    t = torch.from_numpy(logits.astype(np.float64))
    p_sorted, order = torch.sort(torch.softmax(t, dim=-1), dim=-1, descending=True, stable=True)
    before = torch.zeros_like(t).scatter(-1, order, torch.cumsum(p_sorted, dim=-1) - p_sorted).numpy()
    assert kept[before < top_p - 1e-5].all() and not kept[before > top_p + 1e-5].any()
    assert (np.abs(before - top_p) <= 1e-5).sum() <= 100


@pytest.mark.parametrize("v,scale,top_k,top_p", [(5000, 1.0, None, 0.9), (5000, 0.2, None, 0.95),
                                                 (5000, 4.0, None, 0.5), (5000, 1.0, 300, 0.9),
                                                 (5000, 1.0, 100, 0.99), (300, 1.0, None, 0.9)])
def test_top_p_with_ties_keeps_the_stable_order(v, scale, top_k, top_p):
    """Rounded logits tie by the hundreds, also where the head of the order is cut. top-p is defined
    on the stable order (ties in vocabulary order): written out here as one full sort in float64
    cumulative mass would round differently, so the reference sums float32 probabilities in the
    same order, one after another, as the definition does."""
    rng = np.random.default_rng(5)
    logits = np.round(rng.standard_normal((3, v)) * 4 * scale).astype(np.float32) / np.float32(scale)
    x = filter_logits(logits, 1.0, top_k, None)  # top-k alone (checked against HF above)
    for row in range(3):
        xr = x[row]
        order = sorted(range(v), key=lambda i: (-xr[i], i))  # most likely first, ties by id
        p = next_token_probs(xr, 1.0)  # [v] float32, the filtered row's softmax
        kept, mass = set(), np.float32(0)
        for i in order:
            if mass >= np.float32(top_p) or not np.isfinite(xr[i]):
                break
            kept.add(i)
            mass = np.float32(mass + p[i])
        ours = filter_logits(logits[row], 1.0, top_k, top_p)
        assert set(np.flatnonzero(np.isfinite(ours))) == kept


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, None, None), (0.7, None, None), (0.7, 50, 0.9), (1.3, 5, None), (1.0, None, 0.05), (2.0, 1000, 0.5)])
def test_probabilities_equal_torch_softmax_of_hf_warpers(temperature, top_k, top_p):
    """next_token_probs takes the row max once and reuses it through the filters: the
    distribution is still torch's softmax of HF's filtered logits."""
    rng = np.random.default_rng(2)
    logits = (rng.standard_normal((3, 1000)) * 3).astype(np.float32)
    ref = torch.softmax(torch.from_numpy(hf_filter(logits, temperature, top_k, top_p)), dim=-1).numpy()
    np.testing.assert_allclose(next_token_probs(logits, temperature, top_k, top_p), ref, rtol=1e-5, atol=1e-8)


def test_greedy_equals_torch_argmax():
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((6, 500)) * 4).astype(np.float32)
    logits[1, 7] = logits[1, 300] = 50.0  # a tie: the first one, as torch.argmax
    logits[2, :250] = -np.inf  # filtered tokens are never the argmax
    assert greedy(logits).tolist() == torch.argmax(torch.from_numpy(logits), dim=-1).tolist()
    assert greedy(logits[1]) == 7  # one row: a scalar id
    assert greedy([0.1, 3.0, -1.0]) == sample_next([0.1, 3.0, -1.0]) == 1  # a list, as sample_next takes it


_BAD_LOGITS = {  # input -> (error, what the message must say)
    "None": (None, TypeError, r"logits must be floating point, got dtype object"),
    "str": ("abc", TypeError, r"logits must be floating point, got dtype <U3"),
    "int": (np.array([1, 2]), TypeError, r"logits must be floating point, got dtype int64"),
    "bool": (np.array([True, False]), TypeError, r"got dtype bool"),
    "0-d": (np.float32(1.0), ValueError, r"vocabulary axis of size ≥ 1, got shape \(\)"),
    "empty vocab": (np.zeros((2, 0), np.float32), ValueError, r"vocabulary axis of size ≥ 1, got shape \(2, 0\)"),
    "NaN": (np.array([[0.0, 1.0], [np.nan, 1.0]], np.float32), ValueError, r"logits contain NaN"),
    "+inf": (np.array([np.inf, 1.0], np.float32), ValueError, r"logits contain \+inf"),
    "all -inf": (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), ValueError, r"a row of logits is all -inf"),
}


@pytest.mark.parametrize("case", _BAD_LOGITS)
def test_greedy_refuses_what_sample_next_at_temperature_zero_refuses(case):
    """greedy is what temperature 0 means, bad input included: the same error, the same words."""
    logits, err, match = _BAD_LOGITS[case]
    with pytest.raises(err, match=match) as ref:
        sample_next(logits, temperature=0)
    with pytest.raises(err, match=match) as got:
        greedy(logits)
    assert str(got.value) == str(ref.value)


def test_settings_as_numpy_scalars_and_0d_arrays_become_python_numbers():
    """backend.require_real takes a torch scalar or a 0-d array as a number: so do the settings."""
    assert check_sampling(np.float32(0.5), np.int64(40), np.float64(0.9)) == (0.5, 40, 0.9)
    got = check_sampling(torch.tensor(0.25), np.array(3), np.array(0.5))
    assert got == (0.25, 3, 0.5) and [type(v) for v in got] == [float, int, float]
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]], dtype=np.float32))
    # hand-worked: top-k 3 keeps 0.5, 0.3, 0.15; top-p 0.5 then keeps 0.5 alone (it reaches 0.5)
    np.testing.assert_array_equal(next_token_probs(logits, torch.tensor(1.0), np.array(3), np.array(0.5)),
                                  [[1, 0, 0, 0]])


@pytest.mark.parametrize("kwargs,match", [
    (dict(temperature=True), r"temperature must be a finite number ≥ 0 \(0 = greedy\), got temperature=True"),
    (dict(temperature="0.7"), r"temperature must be .*, got temperature='0.7'"),
    (dict(temperature=np.array([0.7])), r"temperature must be .*, got temperature=array\(\[0.7\]\)"),
    (dict(temperature=float("inf")), r"temperature must be .*, got temperature=inf"),
    (dict(top_p=np.bool_(True)), r"top_p must lie in \(0, 1\] or be None, got top_p=np.True_"),
    (dict(top_p=float("nan")), r"top_p must lie in \(0, 1\] or be None, got top_p=nan"),
    (dict(top_p=-0.5), r"top_p must lie in \(0, 1\] or be None, got top_p=-0.5")])
def test_bad_settings_are_value_errors_naming_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_sampling(**kwargs)


@pytest.mark.parametrize("settings", [dict(temperature=0.0), dict(temperature=0.7, top_k=50, top_p=0.9),
                                      dict(temperature=1e-30), dict(temperature=1.0, top_p=0.3)])
def test_unchecked_core_draws_what_sample_next_draws(settings):
    """The per-token core a model calls (settings checked once per request, host logits, no row
    max handed in) draws the same ids as the checked entry point from the same seed."""
    rng = np.random.default_rng(4)
    logits = (rng.standard_normal((8, 300)) * 3).astype(np.float16)
    settings = dict(dict(top_k=None, top_p=None), **settings)
    ref = sample_next(logits, rng=np.random.default_rng(9), **settings)
    core = sample_next.unchecked(to_host(logits), *check_sampling(**settings), np.random.default_rng(9))
    assert core.tolist() == ref.tolist()
