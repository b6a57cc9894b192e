"""The refusals of `core/packing.py`, one check per public function and of the same name. The documents
are host-side lists of token ids."""
from __future__ import annotations

import numpy as np

from ..require import require_array, require_bool, require_int
from .shared_checks import fits_in_memory


def documents(docs):
    """A list of token-id sequences: integers, at least one token each."""
    if isinstance(docs, (str, bytes)) or not hasattr(docs, "__len__"):
        raise TypeError(f"docs must be a list of token-id sequences, got {type(docs).__name__}")
    for i, d in enumerate(docs):
        a = np.asarray(d)
        if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise TypeError(f"document {i} must be a 1-D sequence of integer ids, got shape {a.shape}, "
                            f"dtype {a.dtype}")
        if a.size == 0:
            raise ValueError(f"document {i} is empty: every document needs at least one token")


def documents_fit(lengths, n_ctx):
    """A document is never split: each must fit in one row of n_ctx tokens."""
    too_long = [(i, n) for i, n in enumerate(lengths) if n > n_ctx]
    if too_long:
        i, n = too_long[0]
        raise ValueError(f"document {i} has {n} tokens, more than a row of n_ctx={n_ctx}; "
                         "split it or raise n_ctx")


def rows_fit(what, lengths, n_ctx, arrays):
    """`arrays` int64 arrays of (rows, n_ctx), rows at least ⌈tokens / n_ctx⌉, within the memory available:
    n_ctx=2**40 asked NumPy for 8 TiB."""
    rows = max(1, -(-sum(lengths) // int(n_ctx)))
    fits_in_memory(f"{what} of {rows} × n_ctx={n_ctx} tokens", 8 * arrays * rows * int(n_ctx))


def pack_documents(docs, n_ctx, *, pad_id, longest_first):
    require_int(n_ctx=n_ctx, low=1)
    require_int(pad_id=pad_id, low=None)
    require_bool(longest_first=longest_first)
    documents(docs)
    lengths = [len(np.asarray(d)) for d in docs]
    documents_fit(lengths, n_ctx)
    rows_fit("packed rows", lengths, n_ctx, 3)  # ids, doc, positions


def packed_rows(packed):
    if not hasattr(packed, "n_ctx") or not hasattr(packed, "ids"):
        raise TypeError(f"packed must be what pack_documents returns (T.Packed), got {type(packed).__name__}")


def continued_positions(packed, *, xp):
    packed_rows(packed)


def unpack(x, packed):
    require_array("x", x)
    packed_rows(packed)
    if tuple(x.shape[:2]) != (packed.rows, packed.n_ctx):
        raise ValueError(f"x of shape {tuple(x.shape)} does not start with the packed rows "
                         f"(b, n_ctx) = ({packed.rows}, {packed.n_ctx})")


def row_groups(packed, rows):
    packed_rows(packed)
    require_int(rows=rows, low=1)


def map_rows(f, packed, rows):
    if not callable(f):
        raise TypeError(f"f must be a function of a Packed (a model's pass), got {type(f).__name__}")
    row_groups(packed, rows)


def mapped(y, part):
    """What map_rows' f returned for a group: an array that starts with the group's (rows, n_ctx)."""
    if not hasattr(y, "shape") or isinstance(y, (str, bytes)):
        raise TypeError(f"f must return an array [rows, n_ctx, ...] for the packed rows it is given, "
                        f"got {type(y).__name__}")
    if tuple(y.shape[:2]) != (part.rows, part.n_ctx):
        raise ValueError(f"f returned shape {tuple(y.shape)} for {part.rows} rows of n_ctx={part.n_ctx}: it must "
                         f"keep the rows and slots it is given, [{part.rows}, {part.n_ctx}, ...]")


def packing_report(lengths, n_ctx, *, batch):
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError(f"lengths must be a list of token counts, got {type(lengths).__name__}")
    lengths = list(lengths)
    if not lengths:
        raise ValueError("lengths must be a non-empty list of token counts, got lengths=[]")
    require_int(**{f"lengths[{i}]": n for i, n in enumerate(lengths)}, low=1)  # every document has a token
    require_int(batch=len(lengths) if batch is None else batch, low=1)
    require_int(n_ctx=n_ctx, low=1)
    documents_fit([int(n) for n in lengths], n_ctx)
