"""Seeded data for training from scratch, whatever the task: the held-out split, rows padded or
packed for a decoder, and the iterator that feeds the loop. The tasks' own data are in tasks/
(induction_data.py, translation_data.py).

Everything is drawn from a `np.random.Generator` (`np.random.default_rng(seed)`): the same seed
gives the same bytes. Arrays are NumPy int64 on the host (bookkeeping); a model moves them to
its device with the weights. Targets follow the next-token convention: targets[i] is the token
the model should predict *after reading* ids[i], and IGNORE_INDEX (−100, torch's ignore_index)
marks a position with nothing to predict.

Held-out data never meets training data: a sequence belongs to the held-out split when a hash
of its content says so (`is_heldout`), and each split draws only its own sequences, so no seed
and no number of batches can make them overlap. By convention the held-out batches are drawn
from seed + HELDOUT_SEED_OFFSET.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from . import data_checks as checks
from ..core.packing import pack_documents
from ..require import checked_by

__all__ = ["IGNORE_INDEX", "HELDOUT_SEED_OFFSET", "is_heldout", "TrainRows", "padded_rows", "packed_rows",
           "batches", "batch_tokens", "next_token_targets", "row_shards"]

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
def row_shards(rows: TrainRows, k: int) -> list:  # [b, n] -> k × [≈ b/k, n]
    """The rows cut into k shards of consecutive rows (the first b mod k one row longer), each a
    TrainRows, for k workers that each compute one shard's loss; a shard without a scored target is
    dropped (it would weigh 0).

    >>> r = padded_rows([[1, 2, 3], [4, 5], [6, 7, 8]], 3)
    >>> [s.ids.tolist() for s in row_shards(r, 2)], [s.scored for s in row_shards(r, 2)]
    ([[[1, 2, 3], [4, 5, 0]], [[6, 7, 8]]], [3, 2])
    """
    b = rows.ids.shape[0]
    size, extra = divmod(b, k)
    edges = np.cumsum([0] + [size + (i < extra) for i in range(k)])  # [k + 1]
    shards = [TrainRows(rows.ids[a:e], rows.targets[a:e], rows.positions[a:e], rows.doc_ids[a:e],
                        int((rows.doc_ids[a:e] < 0).sum())) for a, e in zip(edges[:-1], edges[1:])]
    return [s for s in shards if s.scored]


@checked_by(checks.batches)
def batches(make_batch, seed: int, steps: int):  # -> an iterator of `steps` batches
    """Yield make_batch(rng) `steps` times, rng = np.random.default_rng(seed) made afresh.

    Reproducible: the same seed (and a make_batch that draws only from the rng it is given)
    gives the same batches, in the same order, in every run and on every machine.

    >>> make = lambda rng: rng.integers(1, 16, size=(2, 8))
    >>> a, b = list(batches(make, 7, 3)), list(batches(make, 7, 3))
    >>> all((x == y).all() for x, y in zip(a, b)), len(a)
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
