"""Seeded toy data for training from scratch: the induction task, rows padded or packed for a
decoder, and the iterator that feeds the loop.

Everything is drawn from a `np.random.Generator` (`np.random.default_rng(seed)`): the same seed
gives the same bytes. Arrays are NumPy int64 on the host (bookkeeping); a model moves them to
its device with the weights. Targets follow the next-token convention: targets[i] is the token
the model should predict *after reading* ids[i], and IGNORE_INDEX (−100, torch's ignore_index)
marks a position with nothing to predict.

Held-out data never meets training data: a sequence belongs to the held-out split when a hash
of its content says so (`is_heldout`), and each split draws only its own sequences, so no seed
and no number of batches can make them overlap. By convention the held-out batches are drawn
from seed + HELDOUT_SEED_OFFSET. The toy translation task lives in translation_data.py.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import data_checks as checks
from ..core.packing import pack_documents
from ..require import checked_by

__all__ = ["IGNORE_INDEX", "HELDOUT_SEED_OFFSET", "is_heldout", "InductionBatch", "induction_batch",
           "induction_split", "induction_accuracy", "induction_documents", "TrainRows", "padded_rows",
           "packed_rows", "batches", "batch_tokens", "next_token_targets"]

IGNORE_INDEX = -100  # torch's cross_entropy ignore_index: no loss, no gradient at this position
HELDOUT_SEED_OFFSET = 10_000  # held-out batches come from seed + 10 000, training from seed
HELDOUT_SHARE = 10  # one sequence in 10 is held out
MAX_DRAWS = 1000  # rounds of drawing before a split is declared (nearly) empty for these sizes


def is_heldout(tokens) -> bool:
    """Whether a sequence belongs to the held-out split: CRC-32 of its int64 bytes ≡ 0 (mod 10).

    A fixed function of the content, not of a seed: a sequence is held out in every run, so
    training never sees it, whatever the seeds or the number of batches.

    >>> is_heldout([3, 1, 4, 1, 5]), is_heldout([3, 1, 4, 1, 6])
    (False, True)
    """
    return zlib.crc32(np.asarray(tokens, dtype="<i8").tobytes()) % HELDOUT_SHARE == 0


def keep_split(rows: np.ndarray, split: str) -> np.ndarray:  # [k, n] -> [k', n]: the rows of this split
    held = np.array([is_heldout(r) for r in rows], dtype=bool)  # [k]
    return rows[held] if split == "heldout" else rows[~held]


# --- the induction task -----------------------------------------------------------------------
class InductionBatch(NamedTuple):
    """ids [b, 2·n_half]: t₁ … t_{n_half} t₁ … t_{n_half}; targets [b, 2·n_half]: the next token
    where induction can predict it, IGNORE_INDEX elsewhere."""
    ids: np.ndarray
    targets: np.ndarray


def induction_targets(ids: np.ndarray) -> np.ndarray:  # [b, 2·n_half] -> [b, 2·n_half]
    """Position i predicts ids[i + 1]. Only positions n_half … 2·n_half − 2 are scored: there the
    current token t_k appeared once before, at k − 1, and the token after it, t_{k+1}, is the
    answer (what an induction head copies). The first half is random (nothing to predict); the
    last position of the first half would have to guess t₁ from its position alone; the last
    position has no next token."""
    b, n = ids.shape
    n_half = n // 2
    targets = np.full((b, n), IGNORE_INDEX, dtype=np.int64)  # [b, 2·n_half]
    targets[:, n_half:n - 1] = ids[:, n_half + 1:]  # the repeated half, shifted by one
    return targets


def draw_halves(rng, k: int, n_half: int, v: int, first_token: int, distinct: bool):  # -> [k, n_half]
    """k random first halves from first_token … v − 1; with distinct, no token twice in a row."""
    if distinct:  # a random permutation of the tokens per row, cut to n_half
        return rng.random((k, v - first_token)).argsort(axis=1)[:, :n_half] + first_token  # [k, n_half]
    return rng.integers(first_token, v, size=(k, n_half))  # [k, n_half]


@checked_by(checks.induction_batch)
def induction_batch(rng, b: int, n_half: int, v: int, *, first_token: int = 1, distinct: bool = True,
                    split: str = "train") -> InductionBatch:  # -> ids, targets [b, 2·n_half]
    """b rows of the induction task: n_half random tokens, then the same tokens again.

    Tokens are drawn from first_token … v − 1: ids below first_token are left to special
    tokens (0 = padding by default), which the task never shows. distinct=True draws each
    row's tokens without repetition (needs v − first_token ≥ n_half), so every token of the
    second half has exactly one earlier occurrence to copy from. split="train" or "heldout"
    keeps only the rows of that split (`is_heldout` on the first half).

    >>> x = induction_batch(np.random.default_rng(0), 1, 3, 10)
    >>> bool((x.ids[:, :3] == x.ids[:, 3:]).all()), x.targets[0, :3].tolist()
    (True, [-100, -100, -100])
    >>> bool(x.targets[0, 3] == x.ids[0, 4]) and bool(x.targets[0, 4] == x.ids[0, 5]), int(x.targets[0, 5])
    (True, -100)
    """
    kept = np.zeros((0, n_half), dtype=np.int64)
    for _ in range(MAX_DRAWS):  # draw until the split has b rows (a tenth of draws are held out)
        draw = draw_halves(rng, 2 * b if split == "train" else 12 * b, n_half, v, first_token, distinct)
        kept = np.concatenate([kept, keep_split(draw.astype(np.int64), split)])  # [k, n_half]
        if len(kept) >= b:
            break
    else:
        raise ValueError(f"too few sequences fall in the {split!r} split for n_half={n_half}, v={v}, "
                         f"first_token={first_token}: raise v or n_half")
    first = kept[:b]  # [b, n_half]
    ids = np.concatenate([first, first], axis=1)  # [b, 2·n_half]
    return InductionBatch(ids, induction_targets(ids))


@checked_by(checks.induction_split)
def induction_split(seed: int, n_train_batches: int, n_heldout_batches: int, b: int, n_half: int, v: int, *,
                    first_token: int = 1, distinct: bool = True) -> tuple:
    """(train, heldout): lists of InductionBatch, training drawn from default_rng(seed), held-out
    from default_rng(seed + HELDOUT_SEED_OFFSET), each only from its own split of sequences."""
    train_rng = np.random.default_rng(seed)
    held_rng = np.random.default_rng(seed + HELDOUT_SEED_OFFSET)
    kw = dict(first_token=first_token, distinct=distinct)
    train = [induction_batch(train_rng, b, n_half, v, split="train", **kw) for _ in range(n_train_batches)]
    held = [induction_batch(held_rng, b, n_half, v, split="heldout", **kw) for _ in range(n_heldout_batches)]
    return train, held


@checked_by(checks.induction_accuracy)
def induction_accuracy(pred_ids, ids) -> float:  # [b, 2·n_half], [b, 2·n_half] -> share
    """Share of the repeated half's predictable tokens predicted right.

    pred_ids[:, i] is the model's guess for ids[:, i + 1] (argmax of the logits at i). The
    scored positions are those `induction_targets` scores: i = n_half … 2·n_half − 2, which
    predict t₂ … t_{n_half} of the second half. Chance is about 1/v.

    >>> ids = np.array([[5, 6, 7, 5, 6, 7]])
    >>> induction_accuracy(np.array([[0, 0, 0, 6, 7, 0]]), ids), induction_accuracy(np.array([[0, 0, 0, 6, 5, 0]]), ids)
    (1.0, 0.5)
    """
    n_half = ids.shape[1] // 2
    right = np.asarray(pred_ids)[:, n_half:-1] == np.asarray(ids)[:, n_half + 1:]  # [b, n_half − 1]
    return float(right.mean())


@checked_by(checks.induction_documents)
def induction_documents(rng, count: int, v: int, n_half_range=(4, 16), *, first_token: int = 1,
                        distinct: bool = True, split: str = "train") -> list:  # -> count arrays [2·n_half_i]
    """count induction documents of varying length (n_half uniform in n_half_range, both ends
    included), for padding or packing. Document i's first half is unpredictable: pass
    score_from=[len(d) // 2 for d in docs] to padded_rows / packed_rows."""
    lo, hi = n_half_range
    halves = rng.integers(lo, hi + 1, size=count)  # [count]
    return [induction_batch(rng, 1, int(n), v, first_token=first_token, distinct=distinct,
                            split=split).ids[0] for n in halves]  # arguments checked at the door


# --- rows for a decoder: padded or packed -----------------------------------------------------
@dataclass(frozen=True)
class TrainRows:
    """Documents laid out in rows for a decoder's next-token loss; b rows of n slots."""
    ids: np.ndarray  # [b, n] int64: tokens, pad_id on padding
    targets: np.ndarray  # [b, n] int64: the next token of the same document, IGNORE_INDEX otherwise
    positions: np.ndarray  # [b, n] int64: position inside its own document, 0 on padding
    doc_ids: np.ndarray  # [b, n] int64: document index (input order), -1 on padding
    padded_slots: int  # slots holding no token

    @property
    def tokens(self) -> int:
        """Slots holding a real token."""
        return int((self.doc_ids >= 0).sum())

    @property
    def scored(self) -> int:
        """Positions with a target: the terms the loss averages."""
        return int((self.targets != IGNORE_INDEX).sum())


def next_token_targets(doc, score_from: int = 0) -> np.ndarray:  # [n_doc] -> [n_doc]
    """Within one document: targets[i] = doc[i + 1] for score_from ≤ i < n_doc − 1, else −100.
    The last token has no next token in its document: whatever follows it in a packed row
    belongs to another document and must not be learned as its continuation.

    >>> next_token_targets([7, 8, 9]).tolist(), next_token_targets([7, 8, 9], score_from=1).tolist()
    ([8, 9, -100], [-100, 9, -100])
    """
    doc = np.asarray(doc, dtype=np.int64)
    targets = np.full(doc.shape, IGNORE_INDEX, dtype=np.int64)  # [n_doc]
    targets[score_from:-1] = doc[score_from + 1:]
    return targets


def rows_from_spans(docs, spans, b: int, n: int, pad_id: int, score_from) -> TrainRows:
    """Write documents at their (row, start, length) spans into b rows of n slots."""
    ids = np.full((b, n), pad_id, dtype=np.int64)  # [b, n]
    targets = np.full((b, n), IGNORE_INDEX, dtype=np.int64)  # [b, n]
    positions = np.zeros((b, n), dtype=np.int64)  # [b, n]
    doc_ids = np.full((b, n), -1, dtype=np.int64)  # [b, n]
    for i, (d, (row, start, length)) in enumerate(zip(docs, spans)):
        s = slice(start, start + length)
        ids[row, s] = d
        targets[row, s] = next_token_targets(d, 0 if score_from is None else int(score_from[i]))
        positions[row, s] = np.arange(length)  # restart at 0 in every document
        doc_ids[row, s] = i
    return TrainRows(ids, targets, positions, doc_ids, int((doc_ids < 0).sum()))


@checked_by(checks.padded_rows)
def padded_rows(docs, n: int, *, score_from=None, pad_id: int = 0) -> TrainRows:  # -> [len(docs), n] each
    """One document per row, padded to n slots (n ≥ the longest document).

    score_from[i]: the first position of document i whose next token is a target (None: 0);
    positions before it (an induction document's first half) get IGNORE_INDEX.
    padded_slots = len(docs)·n − tokens: packing_report's "one_per_row" when n = n_ctx,
    its "pad_to_longest" when n is the longest document.

    >>> r = padded_rows([[5, 6, 7], [8, 9]], 4)
    >>> r.ids.tolist(), r.targets.tolist(), r.padded_slots
    ([[5, 6, 7, 0], [8, 9, 0, 0]], [[6, 7, -100, -100], [9, -100, -100, -100]], 3)
    """
    docs = [np.asarray(d, dtype=np.int64) for d in docs]
    spans = [(i, 0, len(d)) for i, d in enumerate(docs)]
    return rows_from_spans(docs, spans, len(docs), n, pad_id, score_from)


@checked_by(checks.packed_rows)
def packed_rows(docs, n_ctx: int, *, score_from=None, pad_id: int = 0,
                longest_first: bool = False) -> TrainRows:  # -> [rows, n_ctx] each
    """Documents packed back to back into rows of n_ctx (core.packing.pack_documents: first fit).

    Positions restart at 0 in each document; doc_ids tell the model's document mask which
    tokens may see each other; the last token of a document gets no target, so nothing is
    learned across the seam into the next document. score_from as in padded_rows.

    >>> r = packed_rows([[5, 6, 7], [8, 9]], 6)
    >>> r.ids.tolist(), r.targets.tolist()
    ([[5, 6, 7, 8, 9, 0]], [[6, 7, -100, 9, -100, -100]])
    >>> r.positions.tolist(), r.doc_ids.tolist(), r.padded_slots
    ([[0, 1, 2, 0, 1, 0]], [[0, 0, 0, 1, 1, -1]], 1)
    """
    docs = [np.asarray(d, dtype=np.int64) for d in docs]
    packed = pack_documents(docs, n_ctx, pad_id=pad_id, longest_first=longest_first)
    return rows_from_spans(docs, packed.spans, packed.rows, n_ctx, pad_id, score_from)


# --- feeding the loop -------------------------------------------------------------------------
@checked_by(checks.batches)
def batches(make_batch, seed: int, steps: int):  # -> an iterator of `steps` batches
    """Yield make_batch(rng) `steps` times, rng = np.random.default_rng(seed) made afresh.

    Reproducible: the same seed (and a make_batch that draws only from the rng it is given)
    gives the same batches, in the same order, in every run and on every machine.

    >>> make = lambda rng: induction_batch(rng, 2, 4, 16)
    >>> a, b = list(batches(make, 7, 3)), list(batches(make, 7, 3))
    >>> all((x.ids == y.ids).all() for x, y in zip(a, b)), len(a)
    (True, 3)
    """
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        yield make_batch(rng)


def batch_tokens(batch) -> int:
    """The real tokens in a batch, for tokens/s: TrainRows' tokens; a translation batch's
    source lengths plus its targets; an InductionBatch's (or any tuple's first array's) size."""
    if isinstance(batch, TrainRows):
        return batch.tokens
    if hasattr(batch, "src_lengths") and hasattr(batch, "tgt_out"):
        return int(np.asarray(batch.src_lengths).sum() + (np.asarray(batch.tgt_out) != IGNORE_INDEX).sum())
    if isinstance(batch, (tuple, list)):
        return batch_tokens(batch[0]) if batch else 0
    return int(getattr(batch, "size", 0))
