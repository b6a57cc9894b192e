"""Data parallelism on the CPU's cores: a batch's rows split over threads (`train.loop.sharded_loss`),
the shards' means weighed by their scored targets, against the same loss on the whole batch."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import transformer as T
from transformer.tasks.induction import induction_rows_loss
from transformer.train.data import row_shards
from transformer.train.loop import sharded_loss


@pytest.fixture(scope="module")
def setup():
    cfg = T.induction_config()
    docs = T.induction_documents(np.random.default_rng(3), 13, cfg.v, (4, 16))  # 13 rows: shards of unequal size
    return cfg, T.init_decoder(cfg, 0), docs


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("workers", [2, 3])
def test_the_sharded_loss_and_gradients_are_the_whole_batchs(setup, packed, workers):
    """L = Σ (n_i/N) L_i and ∇L = Σ (n_i/N) ∇L_i over the shards equal one call on all rows (float32 sums
    in another order: within 1e-6 of the loss, 1e-5 of each gradient's largest entry)."""
    cfg, params, docs = setup
    rows = T.induction_rows(docs, packed=packed)
    loss = lambda p, r: induction_rows_loss(p, r, cfg, packed=packed)  # noqa: E731
    want_L, want_g = loss(params, rows)
    with ThreadPoolExecutor(workers) as pool:
        got_L, got_g = sharded_loss(loss, pool, workers)(params, rows)
    assert abs(got_L - want_L) <= 1e-6 * abs(want_L)
    assert set(got_g) == set(want_g)
    for k in want_g:
        np.testing.assert_allclose(got_g[k], want_g[k], rtol=0, atol=1e-5 * np.abs(want_g[k]).max(), err_msg=k)


def test_row_shards_cut_consecutive_rows_and_count_their_targets(setup):
    cfg, _, docs = setup
    rows = T.induction_rows(docs, packed=False)  # 13 rows
    shards = row_shards(rows, 3)
    assert [s.ids.shape[0] for s in shards] == [5, 4, 4]  # the first 13 mod 3 = 1 shard one row longer
    np.testing.assert_array_equal(np.concatenate([s.ids for s in shards]), rows.ids)
    assert sum(s.scored for s in shards) == rows.scored and sum(s.tokens for s in shards) == rows.tokens
    assert len(row_shards(rows, 20)) == 13  # more workers than rows: empty shards are dropped


def test_two_workers_train_as_one(setup):
    """The same run with workers=2: the same losses, step by step, up to float rounding."""
    one = T.train_induction(steps=12, progress=False, snapshot_every=100)
    two = T.train_induction(steps=12, progress=False, snapshot_every=100, workers=2)
    np.testing.assert_allclose(two["history"]["loss"], one["history"]["loss"], rtol=1e-5)
    with pytest.raises(ValueError, match=r"^workers must be an integer ≥ 1, got workers=0$"):
        T.train_induction(steps=1, workers=0)
