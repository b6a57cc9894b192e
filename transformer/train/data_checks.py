"""The refusals of data.py's public functions, one check per function and of the same name."""
from __future__ import annotations

import numpy as np

from ..core.packing_checks import documents, documents_fit, rows_fit
from ..require import require_bool, require_int
from .shared_checks import callable_arg


def doc_list(docs, score_from, pad_id):
    documents(docs)
    if len(docs) == 0:
        raise ValueError("docs is empty: no document to lay out")
    require_int(pad_id=pad_id, low=None)
    if score_from is not None:
        if not hasattr(score_from, "__len__") or len(score_from) != len(docs):
            raise ValueError(f"score_from must give one position per document ({len(docs)}), got {score_from!r}")
        require_int(**{f"score_from[{i}]": s for i, s in enumerate(score_from)})


def padded_rows(docs, n, *, score_from, pad_id):
    doc_list(docs, score_from, pad_id)
    require_int(n=n, low=1)
    documents_fit([len(np.asarray(d)) for d in docs], n)
    rows_fit("training rows", [n] * len(docs), n, 4)  # one row a document; ids, targets, positions, doc_ids


def packed_rows(docs, n_ctx, *, score_from, pad_id, longest_first):
    doc_list(docs, score_from, pad_id)
    require_int(n_ctx=n_ctx, low=1)
    require_bool(longest_first=longest_first)
    lengths = [len(np.asarray(d)) for d in docs]
    documents_fit(lengths, n_ctx)
    rows_fit("training rows", lengths, n_ctx, 4)  # ids, targets, positions, doc_ids


def batches(make_batch, seed, steps):
    callable_arg("make_batch", make_batch)
    require_int(seed=seed, steps=steps)
