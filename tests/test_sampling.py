"""Decoding strategies against HF transformers' logits processors (the same filters, written
independently in torch), hand-worked examples, and the empirical frequencies of many draws."""
import numpy as np
import pytest
import torch

from transformer.sampling import filter_logits, next_token_probs, sample_next, greedy


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
    (1.3, 1, None), (1.0, None, 0.05), (2.0, 1000, 0.5), (1.0, 50_000, None)])
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
    (dict(top_p=1.5), "top_p.*1.5")])
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_next(np.zeros(3, dtype=np.float32), **kwargs)


def test_bad_logits():
    with pytest.raises(ValueError, match="NaN"):
        filter_logits(np.array([0.0, np.nan], dtype=np.float32))
    with pytest.raises(TypeError, match="int64"):
        filter_logits(np.array([1, 2]))
