"""Pieces of the refusals that several check modules of `flash/` share: the tiles' shapes, the options,
packed rows' documents, a backward pass's inputs, a launch's host-side options. The core's own (a
scale, attention's shapes) come from `core/shared_checks.py`."""
from __future__ import annotations

from ..backend import get_xp
from ..core import shared_checks as core_checks
from ..require import require_array, require_bool, require_float, require_int
from .kernel_table import BACKWARD_KERNELS, KERNELS


def tiled_shapes(q, k, v):
    """The checks of scaled_dot_product_attention, and d_v = d_h: the tiles here share one head size."""
    core_checks.attention_shapes(q, k, v, None)
    if v.shape[-1] != q.shape[-1]:
        raise ValueError(f"the tiled kernels need v's head size to equal q's: v d_h={v.shape[-1]}, "
                         f"q d_h={q.shape[-1]} (scaled_dot_product_attention accepts different sizes)")


def tile_options(causal, block_q=None, block_k=None):
    """causal a bool; block_q, block_k None (the default size) or integers ≥ 1."""
    require_bool(causal=causal)
    for name, bsz in (("block_q", block_q), ("block_k", block_k)):
        if bsz is not None:
            require_int(**{name: bsz}, low=1)


def packed_doc(doc, b, n_q, n_k):
    """None, or the (b, n) integer document index of each position of packed rows (n = n_q = n_k)."""
    if doc is None:
        return
    require_array("doc", doc)
    xp = get_xp(doc)
    if n_q != n_k:
        raise ValueError(f"doc needs self-attention over one packed row, n_q = n_k, got n_q={n_q}, n_k={n_k}")
    if doc.ndim != 2 or not xp.isdtype(doc.dtype, "integral") or tuple(doc.shape) != (b, n_q):
        raise ValueError(f"doc must be a (b, n) = ({b}, {n_q}) integer array of document indices, got dtype "
                         f"{doc.dtype}, shape {tuple(doc.shape)}")


def backward_inputs(q, k, v, causal, scale, **given):  # given: dout, and out, lse for the tiled backward
    """The forward's inputs and options, and each given gradient or saved array of its expected shape."""
    tiled_shapes(q, k, v)
    tile_options(causal)
    core_checks.optional_scale(scale)
    shapes = {"dout": q.shape, "out": q.shape, "lse": q.shape[:3]}
    for name, t in given.items():
        require_float(name, t)  # out=None or lse=None: "must be an array, got NoneType"
        if tuple(t.shape) != tuple(shapes[name]):
            raise ValueError(f"{name} must have shape {tuple(shapes[name])}, got {tuple(t.shape)}")


def io_counter(io):
    """None, or a counter with load(name, elements) and store(name, elements) (T.IOCounter)."""
    if io is not None and not (callable(getattr(io, "load", None)) and callable(getattr(io, "store", None))):
        raise TypeError(f"io must be None or a T.IOCounter (it counts each load and store), got {type(io).__name__}")


def kernel_name(kernel):
    """"auto" or a kernel of the table."""
    if kernel != "auto" and kernel not in KERNELS:
        raise ValueError(f"kernel={kernel!r}: use 'auto', {', '.join(repr(k) for k in KERNELS)}")


def plan_options(causal, scale, kernel):
    """The host-side options of a launch, as the CPU `flash_attention` checks them."""
    require_bool(causal=causal)
    core_checks.optional_scale(scale)
    kernel_name(kernel)


def backward_kernel_name(kernel, dtype_name):
    """"auto" or a backward kernel of the table that takes dtype_name."""
    if kernel == "auto":
        return
    if kernel not in BACKWARD_KERNELS:
        raise ValueError(f"kernel={kernel!r}: the backward kernels are 'auto', "
                         f"{', '.join(repr(k) for k in BACKWARD_KERNELS)}")
    if dtype_name not in BACKWARD_KERNELS[kernel].dtypes:
        raise TypeError(f"backward kernel={kernel!r} takes {' or '.join(BACKWARD_KERNELS[kernel].dtypes)}, "
                        f"got {dtype_name}")
